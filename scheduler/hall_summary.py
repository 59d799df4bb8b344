"""One line per data hall for the rack floor: what a merged heatmap cell cannot say.

At 100,000 GPUs the floor's heatmaps merge three floor rows per cell, so a cell shows its worst
rack but not how many racks are out.  The summary counts them per hall, with the hall's peak
power share and hottest outlet, in a few hundred bytes of the live frame; the topology page
links each hall to its rack heatmaps at full resolution (``/api/heatmap?tier=…&hall=…``).
"""

from __future__ import annotations

import numpy as np

from scheduler.frame_schema import HallSummary


def hall_summary(plan, status: np.ndarray, rack_kw: np.ndarray | None = None,
                 outlet_c: np.ndarray | None = None) -> list[HallSummary]:
    """Per hall: racks, racks with any node out, nodes out, the worst rack's share of nodes
    out, and with the power model the hall's draw (kW), its peak rack draw over budget
    (fraction) and its hottest rack outlet (°C).

    ``status`` is each rack's share of nodes down or drained (0-1), ``rack_kw`` each rack's
    draw (kW), ``outlet_c`` each rack's outlet temperature (°C).

    >>> from scheduler.hardware.cluster import NodeGroup, plan_cluster
    >>> plan = plan_cluster("t", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree",
    ...                     fabric_kw={"radix": 8})
    >>> [(h["hall"], h["racks"], h["racks_out"], h["nodes_out"])
    ...  for h in hall_summary(plan, np.array([0.25]))]
    [(0, 1, 1, 1)]
    """
    halls = np.asarray(plan.rack_hall)
    n = plan.n_halls
    status = np.asarray(status, dtype=float)
    nodes_per_rack = np.bincount(plan.node_rack, minlength=plan.n_racks)
    racks = np.bincount(halls, minlength=n)
    racks_out = np.bincount(halls, weights=status > 0, minlength=n)
    nodes_out = np.bincount(halls, weights=np.rint(status * nodes_per_rack), minlength=n)
    worst = np.zeros(n)
    np.maximum.at(worst, halls, status)
    out: list[HallSummary] = []
    for h in range(n):
        row: HallSummary = {"hall": h, "racks": int(racks[h]), "racks_out": int(racks_out[h]),
                            "nodes_out": int(nodes_out[h]), "worst": round(float(worst[h]), 4)}
        out.append(row)
    if rack_kw is not None:
        kw = np.asarray(rack_kw, dtype=float)
        budget = np.asarray(plan.rack_power_kw, dtype=float)
        share = np.divide(kw, budget, out=np.zeros(kw.size), where=budget > 0)
        total = np.bincount(halls, weights=kw, minlength=n)
        peak = np.zeros(n)
        np.maximum.at(peak, halls, share)
        for h, row in enumerate(out):
            row["power_kw"] = round(float(total[h]), 1)
            row["power_share_max"] = round(float(peak[h]), 4)
    if outlet_c is not None:
        hottest = np.full(n, -np.inf)
        np.maximum.at(hottest, halls, np.asarray(outlet_c, dtype=float))
        for h, row in enumerate(out):
            row["outlet_c_max"] = round(float(hottest[h]), 2)
    return out
