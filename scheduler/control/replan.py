"""Re-plan: move a running engine onto a changed inventory, at a safe point, losing nothing
that the change did not touch.

An admin adds a rack, removes a drained node or recables a switch while the twin runs.  The
engine's arrays are sized by its plan, so :func:`replan` builds a successor from the new plan,
with the same workload and settings, starting at the old engine's clock, and carries over:

- every job: finished, rejected and cloud runs with their history; queued runs with their wait;
  running gangs whose nodes all survive (same model, GPU count and spare role) on the same
  nodes, with their open segment, checkpoints and expected end, so they do not notice the move;
  gangs on
  a changed or removed node (and gangs lending or hung) stop as a preemption would and wait
  in the queue; jobs not yet submitted arrive when they were due;
- failures in flight: nodes down until their repair (mapped to the new ids), a failed leaf
  switch with them (the switch its GPUs hang off in the new plan; its incident closes at the
  re-plan where nothing of it is left); fabric, cooling
  and storage slowdowns when the fabric and rows kept their shape (else they are repaired at
  the re-plan, and the log says so); failure statistics and lemons; drains;
- the books (GPU-seconds by category and model, FLOPs, checkpoints), scheduling counters, the
  event log and its numbering; cloud pools' use when the pools did not change.

Not carried: inference replicas (the successor's fleet re-places them from demand at once)
and hot spares swapped in (the new plan's spares are held afresh).  Operator-set statuses are
the caller's to apply again (the twin reads them from the inventory).  The successor's random
streams are reseeded from the seed and the number of re-plans: deterministic, and not a replay
of the first hours' draws.
"""

from __future__ import annotations

import numpy as np

from scheduler.hardware.cluster import ClusterPlan
from scheduler.model.job_run import CLOUD, DETECTING, DONE, DRAINING, PENDING, QUEUED, REJECTED
from scheduler.model.state import Placement
from scheduler.reliability.failures import EFFECTS


def _model_map(old: ClusterPlan, new: ClusterPlan) -> np.ndarray:
    names = {m.name: i for i, m in enumerate(new.models)}
    return np.array([names.get(m.name, -1) for m in old.models], dtype=np.int64)


def _kept_nodes(old: ClusterPlan, new: ClusterPlan, node_map: np.ndarray,
                model_map: np.ndarray) -> np.ndarray:
    """``node_map`` where the node kept its model, GPU count and spare role, else -1."""
    out = node_map.copy()
    ok = out >= 0
    idx = np.flatnonzero(ok)
    target = out[idx]
    same = ((model_map[old.node_model[idx]] == new.node_model[target])
            & (old.node_gpus[idx] == new.node_gpus[target])
            & (old.node_spare[idx] == new.node_spare[target]))
    out[idx[~same]] = -1
    return out


def _leaf_after(old: ClusterPlan, new: ClusterPlan, node_map: np.ndarray, leaf: int,
                same_fabric: bool) -> int:
    """The switch of ``new`` that the GPUs cabled to leaf switch ``leaf`` of ``old`` hang off
    (those on nodes the change kept; a rail leaf serves one GPU of each of many nodes, so
    nodes alone cannot say).  With none of them left: ``leaf`` itself where the fabric kept
    its shape, else -1; -1 too when they now hang off several leaves (recabled)."""
    n_gpus = old.n_gpus
    gpus = np.flatnonzero(old.fabric.endpoint_leaf[:n_gpus] == leaf)
    node = old.gpu_node()[gpus]
    target = node_map[node]
    index = gpus - old.node_first_gpu[node]
    ok = target >= 0
    ok[ok] = index[ok] < new.node_gpus[target[ok]]
    if not ok.any():
        return leaf if same_fabric else -1
    moved = new.node_first_gpu[target[ok]] + index[ok]
    leaves = np.unique(new.fabric.endpoint_leaf[moved])
    return int(leaves[0]) if leaves.size == 1 else -1


def _check_map(node_map, old: ClusterPlan, new: ClusterPlan) -> np.ndarray:
    node_map = np.asarray(node_map)
    if node_map.shape != (old.n_nodes,) or not np.issubdtype(node_map.dtype, np.integer):
        raise ValueError(f"node_map must give one integer per node of the old plan "
                         f"({old.n_nodes}), not shape {node_map.shape}")
    node_map = node_map.astype(np.int64)
    mapped = node_map[node_map >= 0]
    if (node_map < -1).any() or (mapped >= new.n_nodes).any():
        raise ValueError(f"node_map holds ids outside -1 .. {new.n_nodes - 1}")
    if np.unique(mapped).size != mapped.size:
        raise ValueError("node_map sends two old nodes to one new node")
    return node_map


def replan(old, plan: ClusterPlan, node_map) -> tuple:
    """The successor of engine ``old`` on ``plan``, at ``old.now``; and what moved.

    Parameters
    ----------
    old : Engine
        The running engine (it is spent afterwards: gangs on changed nodes are stopped in it).
    plan : ClusterPlan
        The changed inventory.
    node_map : array of int
        For each node of ``old.plan`` its id in ``plan``, or -1 where it was removed.

    Returns
    -------
    (Engine, dict)
        The successor, and a summary: jobs kept running, stopped, requeued, rejected; nodes
        added, removed and changed; failures carried and dropped.
    """
    if old.settings is None:
        raise ValueError("this engine predates re-planning (no settings kept); build afresh")
    node_map = _check_map(node_map, old.plan, plan)
    model_map = _model_map(old.plan, plan)
    kept = _kept_nodes(old.plan, plan, node_map, model_map)

    # 1. in the old engine: stop what the change touches (books the loss there)
    stopped = []
    for run in list(old.running.values()):
        nodes = run.placement.nodes
        if run.state in (DRAINING, DETECTING) or (kept[nodes] < 0).any():
            old.jobs.stop_for_replan(run)
            stopped.append(run.spec.name)
    # (no pass runs in the old engine: the successor schedules the stopped gangs)

    # 2. the successor, at the same instant, with the old engine's books
    new = old.successor(plan)
    new.kernel.streams.reseed(int(np.random.SeedSequence(
        [old.seed, new.replans]).generate_state(1)[0]))
    new.reliability.redraw()
    new.ledger.carry(old.ledger, model_map)
    new.scheduler.carry_counters(old.scheduler)
    new.jobs.carry_counters(old.jobs)
    new.burst.carry_pools(old.burst.pools)

    # 3. failures in flight, drains and lemons (on surviving nodes)
    same_fabric = (old.plan.fabric.n_switches() == plan.fabric.n_switches()
                   and old.plan.fabric.link_a.size == plan.fabric.link_a.size)
    same_rows = (np.unique(old.plan.rack_hall * 1000 + old.plan.rack_row).size
                 == np.unique(plan.rack_hall * 1000 + plan.rack_row).size)
    carried, dropped = 0, 0
    for t, mode, unit, nodes, factor in old.reliability.repairs_in_flight():
        effect = EFFECTS[mode.component]
        if effect == "interrupt":
            mapped = node_map[np.asarray(nodes)]
            mapped = mapped[mapped >= 0]
            switch = -1  # a failed leaf stays failed under its id in the new fabric
            if mode.component == "leaf" and unit >= 0:
                switch = _leaf_after(old.plan, plan, node_map, unit, same_fabric)
            if mapped.size == 0 and switch < 0:
                continue  # the part went with the change: its incident closes now
            new.reliability.carry_repair(t, mode, switch, mapped)
        elif (effect == "slow" and not same_fabric) or (effect == "throttle" and not same_rows):
            dropped += 1
            continue
        else:
            new.reliability.carry_repair(t, mode, unit, None, factor)
        carried += 1
    new.reliability.carry_books(old.reliability, node_map)
    drained = node_map[np.flatnonzero(old.state.node_drained)]
    new.state.set_node_flags(drained[drained >= 0], drained=True)

    # 4. the jobs, in their old order (so the queue keeps its order)
    running, rejected = [], []
    for run in old.runs:
        if run.state == PENDING:
            new.jobs.submit(run.spec)
            continue
        placement = None
        if run.idx in old.running:
            placement = Placement(kept[run.placement.nodes], run.placement.counts.copy(),
                                  int(model_map[run.model]))
        model = int(model_map[run.model]) if run.model >= 0 else -1
        moved = new.jobs.carry(run, placement, model=model)
        if moved.state == CLOUD:
            new.burst.carry(moved)
        elif placement is not None:
            running.append(run.spec.name)
        elif moved.state == REJECTED and run.state == QUEUED:
            rejected.append(run.spec.name)
    new.jobs.rerate_all()
    new.scheduler.wake()

    # 5. the log goes on where it was, numbering included
    new.kernel.carry_log(old.kernel)
    gone = int((node_map < 0).sum())
    changed = int(((node_map >= 0) & (kept < 0)).sum())
    added = plan.n_nodes - int((node_map >= 0).sum())
    summary = {"t": round(new.now, 3), "replans": new.replans, "nodes_added": added,
               "nodes_removed": gone, "nodes_changed": changed, "kept_running": running,
               "stopped": stopped, "rejected": rejected, "failures_carried": carried,
               "failures_repaired_at_replan": dropped,
               "done": sum(r.state == DONE for r in new.runs)}
    new.kernel.log("replan", f"inventory changed: {added} node(s) added, {gone} removed, "
                             f"{changed} changed; {len(running)} job(s) kept running, "
                             f"{len(stopped)} stopped and requeued"
                   + (f", {dropped} fabric/cooling failure(s) repaired at the re-plan"
                      if dropped else ""), jobs=stopped)
    new.kernel.end_instant()
    return new, summary
