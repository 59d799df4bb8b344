"""At 100,000 GPUs one node out is still seen: its rack's merged heatmap cell shows the worst
of the racks it merges, and its hall's summary line counts the rack and the node."""

from __future__ import annotations

import numpy as np

from scheduler.frames import rack_status
from scheduler.hall_summary import hall_summary
from scheduler.live import live_frame
from scheduler.simulate import Scenario


def test_one_node_out_shows_in_its_merged_cell_and_its_halls_line():
    engine, _ = Scenario(preset="hyperscale-100k", days=1, seed=3, failures=False,
                         physics=False).engine()
    plan = engine.plan
    node = int(plan.node_rack.size // 2 + 7)
    rack = int(plan.node_rack[node])
    engine.state.node_up[node] = False
    maps = live_frame(engine)["heatmaps"]
    status = maps["racks"]["status"]
    assert status["rows_per_cell"] > 1  # merged: the case this guards
    floor_row = int(plan.rack_hall[rack]) * status["rows_per_hall"] + int(plan.rack_row[rack])
    cell = status["z"][floor_row // status["rows_per_cell"]][
        int(plan.rack_col[rack]) // status["cols_per_cell"]]
    share = 1.0 / np.count_nonzero(plan.node_rack == rack)
    assert cell == round(share, 4)
    assert sum(1 for row in status["z"] for v in row if v > 0) == 1
    halls = maps["halls"]
    assert len(halls) == plan.n_halls and sum(h["racks"] for h in halls) == plan.n_racks
    hit = halls[int(plan.rack_hall[rack])]
    assert (hit["racks_out"], hit["nodes_out"], hit["worst"]) == (1, 1, round(share, 4))
    assert sum(h["nodes_out"] for h in halls) == 1


def test_power_and_outlet_per_hall_are_the_racks_extremes():
    engine, _ = Scenario(preset="dev-small", days=1, seed=1).engine()
    plan = engine.plan
    kw = np.linspace(1.0, 30.0, plan.n_racks)
    outlet = np.linspace(25.0, 40.0, plan.n_racks)
    halls = hall_summary(plan, rack_status(engine), kw, outlet)
    for h in halls:
        mine = plan.rack_hall == h["hall"]
        assert h["power_kw"] == round(float(kw[mine].sum()), 1)
        assert h["outlet_c_max"] == round(float(outlet[mine].max()), 2)
        assert h["power_share_max"] == round(float((kw[mine] / plan.rack_power_kw[mine]).max()), 4)
