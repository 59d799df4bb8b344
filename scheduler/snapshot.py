"""The snapshot format: an engine as versioned bytes, upgraded in one place.

Layout (all integers big-endian)::

    MAGIC (8 bytes) | format version (u16) | header length (u32) | header (UTF-8 JSON) | body

The header is readable without loading the body (:func:`read_header`): the cluster's name,
preset and size, the digest of the plan (:func:`plan_digest`), the lineage, seed and simulated
time.  The body of format 2 is still the engine's object graph, pickled and zlib-compressed:
an explicit ``state()``/``from_state()`` per component is the next step (``BODY`` names the
encoding so that step is a new format version, not a silent change).  What makes the pickle
a *format* here: every change to the layout of a pickled class (a field added, renamed or moved
to another module) bumps :data:`FORMAT` and adds one upgrade function to :data:`UPGRADES`;
``tests/fixtures/snapshots/layout-v6.json`` records the layout and a test fails when it drifts.

Format 1 is the bare zlib pickle written by releases before this module (no header): its
upgrade reads it with the modules of that time mapped to today's (:data:`V1_MODULES`) and fills
in every field those engines lack, so no component keeps defaults or ``__setstate__`` for old
pickles.

Snapshots are written by the application's own engine process, never uploaded: the body is a
pickle, so loading one runs whatever it names (never load bytes from elsewhere).

>>> from scheduler.simulate import Scenario
>>> engine, _ = Scenario(preset="dev-small", gpus=64, days=0.1, seed=1).engine()
>>> data = dumps(engine)
>>> header = read_header(data)
>>> header.format, header.gpus, header.t_sim
(6, 64, 0.0)
>>> loads(data).now
0.0
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import io
import json
import pickle
import struct
import zlib
from collections import Counter
from collections.abc import Callable

import numpy as np

from scheduler.engine import Engine
from scheduler.model.ledger import MFU_WINDOW_COPIES, MFU_WINDOW_S, LedgerWindow
from scheduler.reliability.incidents import IncidentBook
from scheduler.scheduling.running_index import EndIndex, MoveLog

MAGIC = b"CTWINSNP"
FORMAT = 6
"""The format :func:`dumps` writes."""
BODY = "engine-pickle+zlib"
"""How the body of :data:`FORMAT` is encoded."""
_FIXED = struct.Struct(">8sHI")  # magic, format, header length
_ZLIB_LEVEL = 1  # snapshots are taken often and are small compressed: speed over ratio


class SnapshotError(ValueError):
    """Bytes that are not a snapshot this code can load (one line says why)."""


@dataclasses.dataclass(frozen=True)
class Header:
    """What a snapshot says about itself, read without loading the engine.

    ``t_sim`` is the engine's simulated time, s; ``plan`` the digest of its cluster plan
    (:func:`plan_digest`); ``lineage`` the run it continues (``None``: a standalone engine).
    Format-1 snapshots have no header: only ``format`` is known (the rest is ``None``).
    """

    format: int
    cluster: str | None = None
    preset: str | None = None
    gpus: int | None = None
    plan: str | None = None
    lineage: str | None = None
    seed: int | None = None
    t_sim: float | None = None
    body: str | None = None


def plan_digest(plan) -> str:
    """A digest of what an engine is built from (structure, not status), 16 hex digits: the same
    figure as the twin's inventory fingerprint, so a snapshot states which cluster it ran."""
    h = hashlib.sha256()
    f = plan.fabric
    for arr in (plan.node_model, plan.node_gpus, plan.node_rack, plan.node_slot,
                plan.node_spare, plan.node_nvlink_domain, plan.rack_hall, f.switch_tier,
                f.switch_pod, f.switch_rail, f.endpoint_leaf, f.link_a, f.link_b, f.link_kind):
        h.update(np.asarray(arr, dtype=np.int64).tobytes())
        h.update(b"|")

    def canon(x):  # 1000 and 1000.0 are the same figure; None stays None
        return tuple(v if v is None or isinstance(v, str) else float(v)
                     for v in dataclasses.astuple(x))
    h.update(repr((f.kind, [a.name for a in plan.models],
                   [canon(x) for x in plan.node_shape + plan.storage + plan.cloud_pools])
                  ).encode())
    return h.hexdigest()[:16]


# ----------------------------------------------------------------- writing
def header_of(engine: Engine) -> Header:
    """The header :func:`dumps` writes for ``engine`` now."""
    plan = engine.plan
    return Header(format=FORMAT, cluster=plan.name, preset=plan.preset, gpus=int(plan.n_gpus),
                  plan=plan_digest(plan), lineage=engine.lineage, seed=int(engine.seed),
                  t_sim=float(engine.now), body=BODY)


def dumps(engine: Engine) -> bytes:
    """``engine`` as a snapshot of the current :data:`FORMAT`."""
    with _gc_paused():
        raw = pickle.dumps(engine, protocol=pickle.HIGHEST_PROTOCOL)
    return _pack(header_of(engine), zlib.compress(raw, _ZLIB_LEVEL))


@contextlib.contextmanager
def _gc_paused():
    """No cyclic garbage collection meanwhile: (un)pickling an engine's millions of small
    objects set it off again and again, each pass walking them all (it took half the time of
    a noc-4k snapshot, written or read).  Nothing here makes cycles to collect."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _pack(header: Header, body: bytes) -> bytes:
    text = json.dumps(dataclasses.asdict(header), sort_keys=True).encode()
    return _FIXED.pack(MAGIC, header.format, len(text)) + text + body


# ----------------------------------------------------------------- reading
def read_header(data: bytes) -> Header:
    """The header of snapshot ``data`` (the body is not read); raises :class:`SnapshotError`."""
    return _split(data)[0]


def _split(data: bytes) -> tuple[Header, bytes]:
    data = bytes(data)
    if not data.startswith(MAGIC):
        if data[:1] == b"\x78":  # a zlib stream: the bare pickle of format 1
            return Header(format=1), data
        raise SnapshotError("not a ClusterTwin snapshot (no snapshot magic, not a format-1 "
                            "zlib stream)")
    if len(data) < _FIXED.size:
        raise SnapshotError("corrupt snapshot: truncated header")
    _, version, size = _FIXED.unpack_from(data)
    if version > FORMAT:
        raise SnapshotError(f"snapshot format {version} is newer than this release reads "
                            f"(formats 1..{FORMAT}); upgrade ClusterTwin to load it")
    if version < 2:
        raise SnapshotError(f"corrupt snapshot: format {version} has no header")
    end = _FIXED.size + size
    try:
        fields = json.loads(data[_FIXED.size:end].decode())
        header = Header(**fields)
    except (UnicodeDecodeError, ValueError, TypeError) as exc:
        raise SnapshotError(f"corrupt snapshot: unreadable header ({exc})") from None
    if header.format != version or len(data) < end:
        raise SnapshotError("corrupt snapshot: header and body disagree")
    return header, data[end:]


def loads(data: bytes) -> Engine:
    """The engine of snapshot ``data``, upgraded to the current format if it is older; raises
    :class:`SnapshotError` for bytes it cannot load (a newer format, a corrupt header)."""
    header, body = _split(data)
    version = header.format
    while version < FORMAT:
        header, body = UPGRADES[version](header, body)
        if header.format != version + 1:
            raise RuntimeError(f"the upgrade of format {version} wrote format {header.format}")
        version = header.format
    if header.body != BODY:
        raise SnapshotError(f"corrupt snapshot: unknown body encoding {header.body!r}")
    engine = _unpickle(body)
    if not isinstance(engine, Engine):
        raise SnapshotError(f"corrupt snapshot: the body holds a {type(engine).__name__}")
    return engine


def _unpickle(body: bytes, modules: dict[str, str] | None = None):
    try:
        raw = zlib.decompress(body)
    except zlib.error as exc:
        raise SnapshotError(f"corrupt snapshot: the body does not decompress ({exc})") from None
    try:
        with _gc_paused():
            if not modules:
                return pickle.loads(raw)
            return _MovedModules(io.BytesIO(raw), modules).load()
    except Exception as exc:  # a truncated stream, a class no module holds any longer ...
        raise SnapshotError(f"corrupt snapshot: the body cannot be unpickled "
                            f"({type(exc).__name__}: {exc})") from exc


class _MovedModules(pickle.Unpickler):
    """Finds the classes of an older format where they live now: ``modules`` maps the module
    paths of that format to today's (:data:`V1_MODULES`)."""

    def __init__(self, file, modules: dict[str, str]):
        super().__init__(file)
        self.modules = modules

    def find_class(self, module: str, name: str):
        return super().find_class(self.modules.get(module, module), name)


# ----------------------------------------------------------------- upgrades
V1_MODULES = {
    "scheduler.physics.fabric": "scheduler.fabric",
    **{f"scheduler.physics.fabric.{m}": f"scheduler.fabric.{m}"
       for m in ("all_to_all", "dragonfly", "dragonfly_routing", "fattree", "flows",
                 "global_links", "islands", "maxmin", "nvlink", "optics", "rail", "routing",
                 "routing_types", "topology", "zones")},
    "scheduler.physics.fabric.collectives": "scheduler.physics.collectives",
    "scheduler.physics.fabric.step_time": "scheduler.physics.step_time",
    "scheduler.physics.power": "scheduler.hardware.power",
    "scheduler.control.params": "scheduler.limits.checks",
    "scheduler.control.bounds": "scheduler.limits.bounds",
}
"""Modules of format-1 pickles (release ddaa64d and before) -> where their classes live now."""


def upgrade_v1_to_v2(header: Header, body: bytes) -> tuple[Header, bytes]:
    """A bare zlib pickle of an engine (format 1) as format 2.

    Reads it with the old module paths mapped (:data:`V1_MODULES`) and gives the objects every
    field that later releases added, as a fresh engine would have it: what class defaults,
    ``getattr`` fallbacks and ``__setstate__`` did in the components before.
    """
    engine = _unpickle(body, V1_MODULES)
    if not isinstance(engine, Engine):
        raise SnapshotError(f"corrupt snapshot: the body holds a {type(engine).__name__}")
    e = vars(engine)
    e.setdefault("settings", None)  # before re-planning: such an engine cannot be re-planned
    e.setdefault("replans", 0)
    e.setdefault("keys", None)
    e.setdefault("lineage", None)
    e.setdefault("mirror", None)
    e.setdefault("active_drills", {})  # before drills could be ended: none can be
    e.setdefault("_mfu_window", LedgerWindow(MFU_WINDOW_S, MFU_WINDOW_S / MFU_WINDOW_COPIES))
    kernel = vars(engine.kernel)
    kernel.setdefault("logged", len(engine.kernel.events))  # at least the lines it keeps
    jobs = engine.jobs
    vars(jobs.pricing).setdefault("modes", engine.reliability.modes)  # before profiles
    # the lifecycle's indexes became objects: their old fields move into them as they were
    if isinstance(jobs._ends, list):  # before EndIndex: one SortedList per model
        ends = EndIndex(0)
        ends._ends = jobs._ends
        jobs._ends = ends
    if isinstance(jobs._moved, list):  # before MoveLog: the list and its base
        moved = MoveLog()
        moved._moved, moved._base = jobs._moved, vars(jobs).pop("_moved_base", 0)
        jobs._moved = moved
    sched = vars(engine.scheduler)
    sched.setdefault("reasons", {})  # before pending reasons were kept
    sched.setdefault("partition_reasons", {})
    rel = vars(engine.reliability)
    rel.setdefault("storage_left", {})  # before storage status: every tier up
    rel.setdefault("_node_watchers", [engine.fleet])  # as the engine wires it
    rel.setdefault("while_down", Counter())  # before hits on stopped gangs were counted
    return replace_format(header_of(engine), 2), zlib.compress(
        pickle.dumps(engine, protocol=pickle.HIGHEST_PROTOCOL), _ZLIB_LEVEL)


def upgrade_v2_to_v3(header: Header, body: bytes) -> tuple[Header, bytes]:
    """A format-2 engine (release f1f57e4) as format 3 (issue 25: the slurm, sjf and las
    policies, bounded preemption, Slurm traces' job log).

    Every field format 3 added gets what an engine of format 2 had in effect: no Slurm
    configuration and no policy mechanics or ranking, no run restarted from scratch, and a
    lifecycle whose queue changes reach the scheduler (as ``Scheduler.__init__`` wires it).
    A run's latest start is its first (format 2 kept no other); queued runs have none.
    """
    engine = _unpickle(body)
    if not isinstance(engine, Engine):
        raise SnapshotError(f"corrupt snapshot: the body holds a {type(engine).__name__}")
    sched = vars(engine.scheduler)
    sched.setdefault("slurm_conf", None)
    sched.setdefault("mechanics", None)
    jobs = vars(engine.jobs)
    jobs.setdefault("_queue_watchers", [engine.scheduler])
    jobs.setdefault("run_watchers", [])
    for run in engine.jobs.runs:
        if not hasattr(run, "fresh"):
            run.fresh = False
        if not hasattr(run, "rank"):
            run.rank = ()
        if not hasattr(run, "last_start"):
            run.last_start = run.first_start
    if isinstance(engine.settings, dict):
        engine.settings.setdefault("slurm_conf", None)
    return replace_format(header, 3), zlib.compress(
        pickle.dumps(engine, protocol=pickle.HIGHEST_PROTOCOL), _ZLIB_LEVEL)


def upgrade_v3_to_v4(header: Header, body: bytes) -> tuple[Header, bytes]:
    """A format-3 engine (release f44fa85) as format 4 (issues 25-27: jobs' advance
    reservations, backfill estimates kept by the queue, incidents).

    Jobs run in no reservation; the failure engine starts an empty incident book (failures in
    progress at the upgrade have no incident: their repairs resolve nothing); a backfilling
    scheduler's queue computes its gangs' estimates now, as ``Scheduler.set_policy`` does.
    An engine on the ``slurm`` policy is refused: its mechanics' books (the pending order,
    the priority columns) changed shape and cannot be rebuilt from a format-3 body without
    changing what it would decide; the live twin then starts afresh and says so.
    """
    engine = _unpickle(body)
    if not isinstance(engine, Engine):
        raise SnapshotError(f"corrupt snapshot: the body holds a {type(engine).__name__}")
    sched = engine.scheduler
    if getattr(sched, "mechanics", None) is not None:
        raise SnapshotError("a format-3 snapshot of an engine on the slurm policy cannot be "
                            "upgraded to format 4 (its scheduler's books changed shape): "
                            "start the run afresh")
    for spec in {id(r.spec): r.spec for r in engine.jobs.runs}.values():
        if "reservation" not in vars(spec):
            object.__setattr__(spec, "reservation", "")
    for spec in engine.workload.jobs:
        if "reservation" not in vars(spec):
            object.__setattr__(spec, "reservation", "")
    vars(engine.reliability).setdefault("incidents", IncidentBook())
    keep = sched.policy.backfill
    engine.jobs.index.use_estimator(sched.estimate if keep else None, engine.jobs.runs,
                                    engine.jobs.costs.storage_factor)
    return replace_format(header, 4), zlib.compress(
        pickle.dumps(engine, protocol=pickle.HIGHEST_PROTOCOL), _ZLIB_LEVEL)


def upgrade_v4_to_v5(header: Header, body: bytes) -> tuple[Header, bytes]:
    """A format-4 engine (release 32f2488, the last before issue 29) as format 5 (issue 29:
    step breakdowns book the stragglers' share, ``StepBreakdown.straggler_s``; a failed
    preemption attempt is remembered with the victim sets it tried).

    The only objects of that class an engine holds are the physics' memo of priced steps
    (``Physics._steps``): what the writing release's step model gave, without the stragglers
    and at its kernel efficiencies.  The memo is emptied, so every step priced from now on is
    this release's, as in a fresh engine (the physics empties it itself past 50,000 entries;
    a format-4 snapshot of a later release, whose entries already had the field, loses only
    their reuse).  Gangs keep the segments they run in: the next refresh re-rates those whose
    split moved past the physics' tolerance, as after any change of the fabric.  The figures
    that release recorded for the time after the snapshot are therefore not this release's.

    The failed preemption attempts the scheduler remembered (``Scheduler.no_victims``) are
    forgotten: a format-4 memo does not say which victim sets it tried, and those move with the
    work each candidate would lose.  A gang's next attempt is made afresh, as when a gang it
    may evict changed (on the fixtures of formats 1-4: the same decisions and counters).
    """
    engine = _unpickle(body)
    if not isinstance(engine, Engine):
        raise SnapshotError(f"corrupt snapshot: the body holds a {type(engine).__name__}")
    if engine.physics is not None:
        engine.physics._steps.clear()
    engine.scheduler.no_victims.clear()
    return replace_format(header, 5), zlib.compress(
        pickle.dumps(engine, protocol=pickle.HIGHEST_PROTOCOL), _ZLIB_LEVEL)


def upgrade_v5_to_v6(header: Header, body: bytes) -> tuple[Header, bytes]:
    """A format-5 engine (release 630d9f2) as format 6 (issue 29: a job's recipe may take
    layers off its first and last pipeline stages, ``Recipe.pp_edge_layers_off``; the step
    model runs a pipeline at its slowest stage, the last one with the logit layer, and its
    kernel efficiencies and MegaScale's jitter were refitted with that).

    Every recipe the engine holds gets the even split it was priced with (0).  The physics'
    memo of priced steps is emptied, as in the upgrade from format 4: every step priced from
    now on is this release's, so a pipelined job's figures after the snapshot are not what the
    writing release would have recorded.
    """
    engine = _unpickle(body)
    if not isinstance(engine, Engine):
        raise SnapshotError(f"corrupt snapshot: the body holds a {type(engine).__name__}")
    specs = [r.spec for r in engine.jobs.runs] + list(engine.workload.jobs)
    recipes = (getattr(s, "recipe", None) for s in specs)
    for recipe in {id(r): r for r in recipes if r is not None}.values():
        if "pp_edge_layers_off" not in vars(recipe):
            object.__setattr__(recipe, "pp_edge_layers_off", 0)
    if engine.physics is not None:
        engine.physics._steps.clear()
    return replace_format(header, 6), zlib.compress(
        pickle.dumps(engine, protocol=pickle.HIGHEST_PROTOCOL), _ZLIB_LEVEL)


def replace_format(header: Header, version: int) -> Header:
    """``header`` as written by format ``version`` (its other fields are the engine's)."""
    return dataclasses.replace(header, format=version)


UPGRADES: dict[int, Callable[[Header, bytes], tuple[Header, bytes]]] = {
    1: upgrade_v1_to_v2,
    2: upgrade_v2_to_v3,
    3: upgrade_v3_to_v4,
    4: upgrade_v4_to_v5,
    5: upgrade_v5_to_v6,
}
"""``{n: upgrade}``: each turns a format-``n`` snapshot into format ``n + 1`` (applied in
sequence by :func:`loads`)."""
