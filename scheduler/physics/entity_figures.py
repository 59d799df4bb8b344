"""Per-entity figures of a running engine: every node's and rack's utilisation, power and
temperature, every switch's link load, every running job's GPUs, utilisation and MFU.

The twin keeps them as history (``twin.live.entity_history``, one sample every
``HISTORY_STEP_S`` simulated seconds); this module only reduces the engine's columns, in a few
``np.bincount`` calls (a 100,000-GPU cluster takes milliseconds, no Python loop over GPUs):

* **compute utilisation** of a GPU: the share of wall time its gang computes (``run.slow``:
  after exposed communication, data stalls and throttling), :data:`INFERENCE_UTILISATION` for
  an inference replica (as the power model), 0 for a free GPU or a gang that is not running
  (hung until a failure is detected, draining, in recovery).  A node's and a rack's is the mean
  over their GPUs, a job's over the GPUs it holds.
* **allocated**: the share of a node's or rack's GPUs that a gang or replica holds.
* **power** (kW): a rack's draw as the physics model's last refresh has it (``rack_kw``: after
  caps and throttling; the rack heatmap's figure); a node's is its rack's split over the rack's
  nodes in proportion to what each draws now at its GPUs' load (:func:`node_power_kw`: the
  power model's linear GPU and host power), so a rack's nodes add up to the rack.
* **temperature** (°C): a rack's outlet air (the physics model's ``outlet_c``); the model has
  no per-node temperature, so a node's is the outlet air of its rack.
* **switch load** (%): the mean and the highest utilisation of a switch's switch-to-switch
  links (both ends count), from the last routed load (0 before any gang crossed a leaf).

Without the physics model (or before its first refresh) power, temperature and switch load are
absent from the sample, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.hardware.power import gpu_power_w, host_power_w
from scheduler.model.job_run import RUNNING
from scheduler.model.state import REPLICA_BASE
from scheduler.physics.job_speed import INFERENCE_UTILISATION

KINDS = ("node", "rack", "switch", "job")
"""The kinds of entity the figures are about (a job by name, the others by engine id)."""

METRICS: dict[str, dict[str, tuple[str, str]]] = {
    "node": {"util_pct": ("compute utilisation", "%"), "alloc_pct": ("GPUs allocated", "%"),
             "power_kw": ("power draw", "kW"), "temp_c": ("outlet air of its rack", "°C")},
    "rack": {"util_pct": ("compute utilisation", "%"), "alloc_pct": ("GPUs allocated", "%"),
             "power_kw": ("power draw", "kW"), "temp_c": ("outlet air", "°C")},
    "switch": {"load_pct": ("mean load of its switch links", "%"),
               "load_max_pct": ("load of its busiest switch link", "%")},
    "job": {"gpus": ("GPUs held", "GPUs"), "util_pct": ("compute utilisation", "%"),
            "mfu_pct": ("MFU", "%")},
}
"""Each kind's figures: name -> (label, unit)."""


@dataclass(frozen=True)
class Figures:
    """One kind's figures at one time: ``columns`` maps a metric of :data:`METRICS` to one
    value per entity (entity ``i`` is engine id ``i``; for jobs the ``ids`` name them).  A
    metric the engine cannot tell (no physics model) is left out, never filled with 0."""

    columns: dict[str, np.ndarray]
    ids: tuple[str, ...] | None = None


@dataclass(frozen=True)
class EntitySample:
    """Every kind's :class:`Figures` at simulated time ``t`` (s)."""

    t: float
    kinds: dict[str, Figures]


def group_mean(group: np.ndarray, n: int, values: np.ndarray) -> np.ndarray:
    """Mean of ``values`` over each of ``n`` groups (``group[i]``: the group of value ``i``);
    NaN for an empty group.

    >>> group_mean(np.array([0, 0, 2]), 3, np.array([1.0, 3.0, 5.0])).tolist()
    [2.0, nan, 5.0]
    """
    count = np.bincount(group, minlength=n)
    total = np.bincount(group, weights=values, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def holder_figures(gpu_group: np.ndarray, n: int, util: np.ndarray,
                   held: np.ndarray) -> dict[str, np.ndarray]:
    """Compute utilisation and GPUs allocated (both %) of ``n`` nodes or racks from the
    per-GPU ``util`` (0-1) and ``held`` (bool); ``gpu_group`` maps each GPU to its node or
    rack.

    >>> f = holder_figures(np.array([0, 0, 1, 1]), 2, np.array([0.5, 0.0, 1.0, 1.0]),
    ...                    np.array([True, False, True, True]))
    >>> f["util_pct"].tolist(), f["alloc_pct"].tolist()
    ([25.0, 100.0], [50.0, 100.0])
    """
    return {"util_pct": 100.0 * group_mean(gpu_group, n, util),
            "alloc_pct": 100.0 * group_mean(gpu_group, n, held.astype(float))}


def node_power_kw(node_rack: np.ndarray, node_demand_w: np.ndarray,
                  rack_kw: np.ndarray) -> np.ndarray:
    """Each node's share of its rack's draw ``rack_kw`` (kW), in proportion to what the node
    asks now, ``node_demand_w`` (W); the nodes of a rack add up to the rack.

    >>> node_power_kw(np.array([0, 0, 1]), np.array([300.0, 100.0, 50.0]),
    ...               np.array([8.0, 2.0])).tolist()
    [6.0, 2.0, 2.0]
    """
    rack_demand = np.bincount(node_rack, weights=node_demand_w, minlength=rack_kw.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(rack_demand[node_rack] > 0,
                         node_demand_w / rack_demand[node_rack], 0.0)
    return rack_kw[node_rack] * share


def switch_load(link_a: np.ndarray, link_b: np.ndarray, n_switches: int,
                link_util: np.ndarray) -> dict[str, np.ndarray]:
    """Mean and highest utilisation (%) of each switch's switch-to-switch links (a link
    counts at both ends); NaN for a switch with none.

    >>> f = switch_load(np.array([0, 0]), np.array([2, 2]), 3, np.array([0.2, 0.6]))
    >>> [round(x, 1) for x in f["load_pct"].tolist()], f["load_max_pct"].tolist()[:1]
    ([40.0, nan, 40.0], [60.0])
    """
    ends = np.concatenate([link_a, link_b]).astype(np.int64)
    util = np.concatenate([link_util, link_util]).astype(float)
    top = np.full(n_switches, -np.inf)
    np.maximum.at(top, ends, util)
    return {"load_pct": 100.0 * group_mean(ends, n_switches, util),
            "load_max_pct": np.where(np.isfinite(top), 100.0 * top, np.nan)}


def job_figures(owner: np.ndarray, util: np.ndarray, names: dict[int, str],
                mfu: dict[int, float]) -> Figures:
    """GPUs held, compute utilisation (%) and MFU (%) of every training gang that holds GPUs:
    ``owner`` is each GPU's owner id (-1 free; inference replicas from
    :data:`~scheduler.model.state.REPLICA_BASE` up are left out), ``names`` and ``mfu`` (0-1)
    by owner id.  Jobs come in name order.

    >>> f = job_figures(np.array([3, 3, -1, 5]), np.array([0.5, 0.7, 0.0, 1.0]),
    ...                 {3: "b", 5: "a"}, {3: 0.4, 5: 0.5})
    >>> f.ids, f.columns["gpus"].tolist(), f.columns["util_pct"].round(1).tolist()
    (('a', 'b'), [1.0, 2.0], [100.0, 60.0])
    """
    mine = (owner >= 0) & (owner < REPLICA_BASE)
    held, inverse = np.unique(owner[mine], return_inverse=True)
    keep = [k for k, o in enumerate(held.tolist()) if o in names]
    gpus = np.bincount(inverse, minlength=held.size).astype(float)
    busy = np.bincount(inverse, weights=util[mine], minlength=held.size)
    order = sorted(keep, key=lambda k: names[int(held[k])])
    idx = np.array(order, dtype=np.int64)
    return Figures(
        columns={"gpus": gpus[idx],
                 "util_pct": 100.0 * busy[idx] / np.maximum(gpus[idx], 1.0),
                 "mfu_pct": 100.0 * np.array([mfu.get(int(held[k]), 0.0) for k in order])},
        ids=tuple(names[int(held[k])] for k in order))


def gpu_demand_w(models, gpu_model: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """What each GPU slot asks of its rack at load ``demand`` (0-1), W: the board
    (:func:`~scheduler.hardware.power.gpu_power_w`) plus its host share."""
    watts = host_power_w(demand)
    for m, model in enumerate(models):
        mask = gpu_model == m
        if mask.any():
            watts[mask] += gpu_power_w(model, demand[mask])
    return watts


def entity_sample(engine) -> EntitySample:
    """The figures of ``engine`` now (see the module's docstring for what each one is)."""
    plan, state = engine.plan, engine.state
    owner = state.gpu_owner
    util = np.zeros(owner.size)
    demand = np.zeros(owner.size)
    names: dict[int, str] = {}
    mfu: dict[int, float] = {}
    peak = engine.ledger.peak
    for r in engine.running.values():
        names[r.idx] = r.spec.name
        if r.state != RUNNING:
            mfu[r.idx] = 0.0
            continue
        util[r.gids] = r.slow
        # the load before throttling, as the power model asks it of the rack
        demand[r.gids] = r.slow + dict(r.slow_split).get("throttled", 0.0)
        mfu[r.idx] = float(r.rate * r.slow / (r.gpus * peak[r.model]))
    serving = owner >= REPLICA_BASE
    util[serving] = demand[serving] = INFERENCE_UTILISATION
    held = owner >= 0
    gpu_node = state.gpu_node
    gpu_rack = plan.node_rack[gpu_node]
    nodes = holder_figures(gpu_node, plan.n_nodes, util, held)
    racks = holder_figures(gpu_rack, plan.n_racks, util, held)
    switches: dict[str, np.ndarray] = {}
    physics = engine.physics
    power = physics.last_power if physics is not None else None
    if power is not None:
        node_w = np.bincount(gpu_node, minlength=plan.n_nodes,
                             weights=gpu_demand_w(plan.models, state.gpu_model, demand))
        nodes["power_kw"] = node_power_kw(plan.node_rack, node_w, power.rack_kw)
        nodes["temp_c"] = power.outlet_c[plan.node_rack]
        racks["power_kw"] = np.asarray(power.rack_kw, dtype=float)
        racks["temp_c"] = np.asarray(power.outlet_c, dtype=float)
    if physics is not None:
        f = plan.fabric
        link_util = (physics.last_load.utilisation if physics.last_load is not None
                     else np.zeros(f.link_a.size))
        switches = switch_load(f.link_a, f.link_b, f.n_switches(), link_util)
    return EntitySample(t=float(engine.now), kinds={
        "node": Figures(nodes), "rack": Figures(racks), "switch": Figures(switches),
        "job": job_figures(owner, util, names, mfu)})
