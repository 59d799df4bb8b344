"""Operator-set storage status: a tier marked down, degraded (some bandwidth left) or up.

A status lasts until the operator changes it (no duration, unlike a storage-slowdown drill) and
replaces the tier's previous status.  What each tier carries in the core:

- ``central``, the shared parallel file system: every checkpoint write and every restore from
  disk (:class:`~scheduler.reliability.checkpoint.CheckpointCosts`), and the input reads the
  cache does not serve (:mod:`scheduler.physics.storage`, with the physics on).
- ``nvme``, the node-local cache: cached input reads only (with the physics on); checkpoints
  never go there in this model, so its status leaves checkpoint costs as they are.

``down`` has no exact counterpart for the central tier: zero bandwidth would make a checkpoint
free (:func:`~scheduler.reliability.checkpoint.write_seconds` treats a tier without bandwidth as
no checkpointing at all) instead of impossible.  It is modelled as :data:`CENTRAL_DOWN_LEFT` of
the bandwidth: a 100 GB/s share becomes 10 MB/s, so a 1 TB checkpoint takes about 28 hours, a
restart's restore as long, and input reads stall as far as the physics lets them (95 %).  Gangs
already running write their later checkpoints at the new cost at once.  A cache that is down is
exact: it serves nothing and its reads fall through to the central tier.
"""

from __future__ import annotations

from scheduler.hardware.cluster import StorageSpec
from scheduler.limits.bounds import STORAGE_LEFT_MIN
from scheduler.limits.checks import fraction

TIERS = ("central", "nvme")
CENTRAL_DOWN_LEFT = STORAGE_LEFT_MIN
"""Share of its bandwidth a central tier marked down keeps (see the module docstring)."""
DOWN_LEFT = {"central": CENTRAL_DOWN_LEFT, "nvme": 0.0}


def _tier(engine, tier) -> StorageSpec:
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}, not {tier!r}")
    spec = next((s for s in engine.plan.storage if s.tier == tier), None)
    if spec is None:
        raise ValueError(f"this cluster has no {tier} storage tier")
    return spec


def _set(engine, spec: StorageSpec, left: float, what: str) -> dict:
    engine.reliability.set_storage(spec.tier, left)
    jobs = engine.jobs
    hit = sorted(set(jobs.rerate_all()) | set(jobs.recost_all()))
    names = [engine.runs[i].spec.name for i in hit]
    engine.kernel.log("storage", f"storage {spec.name} ({spec.tier} tier) {what}; "
                                 f"{len(names)} job(s) re-rated",
                      component=f"storage {spec.tier}", jobs=names)
    return {"tier": spec.tier, "storage": spec.name, "bandwidth_left": left, "jobs": names}


def storage_down(engine, *, tier) -> dict:
    """An operator marked a storage tier down (see the module docstring for what that does)."""
    spec = _tier(engine, tier)
    effect = ("checkpoints and restores crawl" if spec.tier == "central"
              else "reads fall through to the central tier")
    return _set(engine, spec, DOWN_LEFT[spec.tier], f"marked down: {effect}")


def storage_degraded(engine, *, tier, factor) -> dict:
    """An operator marked a storage tier degraded: ``factor`` (0 < factor < 1) of its
    bandwidth is left until it is marked up."""
    spec = _tier(engine, tier)
    left = fraction("factor", factor)
    return _set(engine, spec, left, f"marked degraded: {left:.0%} of its bandwidth left")


def storage_up(engine, *, tier) -> dict:
    spec = _tier(engine, tier)
    return _set(engine, spec, 1.0, "back to full bandwidth")
