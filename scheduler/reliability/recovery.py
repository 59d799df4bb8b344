"""What happens to a gang when a failure hits it: hang, detection, eviction, spare swap, restart.

A failure stops the gang at once (its collectives hang), but its GPUs stay held until the
failure is detected (booked as recovery).  Then the gang is evicted; if hot spares of its model
can replace exactly its failed nodes (same pod first) it restarts on its old healthy nodes plus
the spares without waiting in the queue, else it requeues.  Its restart (relaunch plus restore
from the last checkpoint) is booked as recovery by the engine when it starts again.
"""

from __future__ import annotations

import numpy as np

from scheduler.model.job_run import DETECTING, DRAINING, JobRun
from scheduler.model.state import Placement
from scheduler.reliability import checkpoint


def interrupt(engine, run: JobRun, *, cause: str, detect_s: float, planned: bool,
              failed_nodes: np.ndarray | None = None) -> None:
    """A failure stops ``run``: it hangs until detected, then is evicted and restarts.

    A planned stop checkpoints first (nothing lost); an unplanned one loses the compute since
    the last checkpoint (booked as lost work).  With in-memory checkpoints, a failure that takes
    down every node of one replica group loses the in-memory copy: the gang falls back to its
    last checkpoint persisted to disk and restores from there.
    """
    from scheduler.engine import DETECT
    e = engine
    if run.state == DRAINING:
        e.ledger.book("checkpoint_stall", run.model, run.gpus * (e.now - run.seg_start))
        e.fleet.forget_lend(run)
        run.version += 1
    else:
        fallback = (not planned and e.recovery == "memory" and failed_nodes is not None
                    and checkpoint.replica_group_lost(run.placement.nodes, failed_nodes))
        if fallback:
            run.restore_from_disk = True
            e.reliability.memory_fallbacks += 1
        e._close(run, "lend" if planned else "kill", "lost_work", disk_fallback=fallback)
    run.state = DETECTING
    run.seg_start = e.now
    run.detect_s = detect_s
    run.interruptions += 1
    e._push(e.now + detect_s, DETECT, run.idx, run.version)
    e.log("interrupt", f"{run.spec.name} ({run.gpus} GPUs) interrupted by {cause}",
          job=run.spec.name, cause=cause)


def on_detected(engine, run: JobRun) -> None:
    """Evict the gang; swap hot spares in for its failed nodes, else requeue it."""
    e = engine
    e.ledger.book("recovery", run.model, run.gpus * (e.now - run.seg_start))
    run.version += 1
    old = run.placement
    s = e.state
    bad = ~s.node_up[old.nodes] | s.node_drained[old.nodes]
    swap = None if old.model in e.reliability.cut_models else spare_swap(s, old, bad)
    e.release(run)
    if swap is not None:
        s.set_node_flags(swap.nodes, spare=False)
        run.queued_since = e.now
        e.start(run, swap)
        e.log("recover", f"{run.spec.name} resumes on {int(bad.sum())} hot spare(s)",
              job=run.spec.name)
    else:
        e.requeue(run)


def spare_swap(state, old: Placement, bad: np.ndarray) -> Placement | None:
    """The old placement with its failed nodes replaced by hot spares (same pod first)."""
    s = state
    need = int(bad.sum())
    if need == 0 or not np.all(old.counts[bad] == s.node_gpus[old.nodes[bad]]):
        return None
    spares = np.flatnonzero(s.node_spare & s.node_up & ~s.node_drained
                            & s.model_mask[old.model] & (s.node_free == s.node_gpus))
    if spares.size < need:
        return None
    pods = s.domain["pod"]
    near = np.isin(pods[spares], pods[old.nodes[bad]])
    chosen = np.concatenate([spares[near], spares[~near]])[:need]
    return Placement(np.concatenate([old.nodes[~bad], chosen]),
                     np.concatenate([old.counts[~bad], s.node_gpus[chosen]]), old.model)
