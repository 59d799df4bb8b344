"""Cross-site data parallelism: a training gang whose DP replicas are split over two places.

Only a :class:`~scheduler.grid.jobs.GridJob` with ``cross_site=True`` is ever split; every
other gang runs whole at one place.  The rules:

* **When**: a cross-site job runs whole where it fits (the ordinary placement) if some place
  can start it within :data:`SPLIT_PATIENCE_S` (the expected start the ``start`` criterion
  uses); otherwise it is split if two places can start their parts *now*; otherwise it takes
  the whole option, or waits (a job too big for any place, but not for two, is held and tried
  again every :data:`CROSS_CHECK_S`).
* **Where**: both places pass the job's sovereignty and stack filters, are up, have a WAN path
  from a live copy of its data, run the same accelerator model (a synchronous job on two
  generations would need an uneven batch split: not done), and are joined by a path of live
  WAN links.  Among the pairs, the one whose gradient exchange is quickest now (bytes over
  the shared bottleneck plus latency) wins, then the cheaper GPU-hour, then the listed order.
* **Parts**: each part is a gang of whole DP replicas (TP x CP x PP stays inside a place) on
  its place's engine, with its share of the remaining work in proportion to its replicas.
* **Co-start**: all or nothing.  The parts are submitted together (after their data has
  landed, at the latest cloud start-up); if a part is not running at that instant, every part
  is withdrawn (no compute done, no GPU held) and the job waits for the next try.  No GPU is
  ever held for a partner, so there is no held GPU-time to book: the wait is the job's own
  (``wait_hours``, from reaching the grid to computing).
* **Co-stop**: a part that stops (a failure, a preemption, a region loss, or the WAN path
  between the parts cut) stops the job: every part is cancelled and the job is placed again,
  restarting from its last checkpoint (region loss: the off-site replica, as any job; a
  failure or a cut: the parts' own last saved step, which both places hold).  A part's engine
  failure is seen at the grid's next event (at most :data:`CROSS_CHECK_S` later).
* **Step time**: the in-place step of each part is the engine's step model
  (:func:`scheduler.physics.step_time.step_breakdown` with the part's parallelism); the slower
  part sets the job's pace.  Per step the parts exchange their gradients hierarchically:
  reduced inside each place (priced in the in-place step), then one ring all-reduce across the
  places: ``2 (k - 1) / k`` of the BF16 gradients (``2 x params`` bytes) each way over the WAN,
  plus ``2 (k - 1)`` path latencies.  The WAN leg is **exposed** (assumed: it starts once the
  local reduction is done, so nothing is left to hide it behind).  The exchange is a standing
  flow in each direction's max-min share of the link (:meth:`scheduler.grid.wan.Wan.stream`),
  sharing it with the grid's transfers; every part runs at ``T_in / (T_in + T_wan)`` of its
  place's speed, the rest booked ``exposed_communication`` in its place's ledger.
* **Books**: per job the WAN-exposed hours and the gradient GB; the gradient bytes are booked
  on the WAN (``gradient``) as they cross, so the places' ``wan_in_gb``/``wan_out_gb`` and
  egress include them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from scheduler.grid.placement import _needs
from scheduler.model.job_run import (
    CANCELLED,
    DETECTING,
    DONE,
    DRAINING,
    PENDING,
    QUEUED,
    RUNNING,
)
from scheduler.physics.step_time import default_parallelism, step_breakdown

CROSS_CHECK_S = 600.0
"""How often the grid retries held cross-site jobs and checks their parts, s."""

SPLIT_PATIENCE_S = 3600.0
"""A cross-site job is split only if no single place is expected to start it within this, s."""

GRAD_BYTES = 2.0
"""Bytes per gradient value crossing the WAN (BF16, as the step model's DP reduction)."""


class WanSlowed:
    """A place's speed model with the WAN's share added to its cross-site parts.

    ``factor[run index] = T_in / (T_in + T_wan)``: the part's in-place categories shrink by it
    and ``exposed_communication`` takes the rest.  Everything else is the inner model's."""

    def __init__(self, inner):
        self.inner = inner
        self.factor: dict[int, float] = {}

    def __getattr__(self, name):
        if name.startswith("__") or name == "inner":  # copies and pickles: not forwarded
            raise AttributeError(name)
        return getattr(self.inner, name)

    def split(self, run) -> tuple[tuple[str, float], ...]:
        inner = tuple(self.inner.split(run))
        phi = self.factor.get(run.idx)
        if phi is None or phi >= 1.0:
            return inner
        return tuple((c, f * phi) for c, f in inner) + (("exposed_communication", 1.0 - phi),)

    def refresh(self):
        return self.inner.refresh()


@dataclass
class Part:
    place: str
    model: int
    replicas: int
    gpus: int
    run_idx: int | None = None


@dataclass
class Split:
    """One split of a job: its parts and the step it runs at."""

    parts: list[Part]
    base_flops: float           # work done before this split
    work_flops: float           # work this split does (shared by the parts)
    step_in_s: float = 0.0      # the slower part's in-place step, s
    grad_gb: float = 0.0        # GB each way per step across each ring hop
    streams: list = field(default_factory=list)
    wan_s: float = 0.0          # the exposed WAN exchange per step now, s
    seen: float = 0.0           # the first part's progress already booked, FLOP
    started: bool = False

    @property
    def phi(self) -> float:
        return self.step_in_s / (self.step_in_s + self.wan_s)


def _parallelism(job, per_node: int):
    par = job.parallelism or default_parallelism(job.gpus, per_node)
    return par, par.tp * par.cp * par.pp


def _eligible(grid, gjob, *, live: bool):
    """(place, model index, accelerator) that may hold a part of ``gjob``."""
    out = []
    for name, p in grid.places.items():
        if not gjob.allows(name, p.jurisdiction) or not gjob.runs_on(p.stacks):
            continue
        if live and p.dark:
            continue
        m, cap = p.capacity(gjob.job)
        if m >= 0 and cap > 0:
            out.append((name, m, p.engine.plan.models[m], cap))
    return out


def could_split(grid, gjob) -> bool:
    """Whether two places (dark ones too) could ever hold the job's replicas together."""
    cands = _eligible(grid, gjob, live=False)
    for i, (_, _, acc, cap_a) in enumerate(cands):
        r = _parallelism(gjob.job, acc.per_node)[1]
        for _, _, acc_b, cap_b in cands[i + 1:]:
            if acc_b.name == acc.name and (cap_a // r) + (cap_b // r) >= gjob.job.gpus // r:
                return True
    return False


def choose(grid, js) -> Split | None:
    """The pair of places that can start the job's parts now, or ``None``."""
    gjob, job = js.gjob, js.gjob.job
    cands = []
    for name, m, acc, _ in _eligible(grid, gjob, live=True):
        if isinstance(_needs(gjob, name, grid), str):
            continue
        p = grid.places[name]
        par, r = _parallelism(job, acc.per_node)
        queued = sum(run.gpus for run in p.engine.runs
                     if run.state in (QUEUED, PENDING) and m in run.models)
        free = int(p.engine.state.free_counts()[0][m]) - queued - grid.inbound_gpus(name)
        n = max(0, free) // r   # whole replicas it can start now, nothing queued or inbound
        cands.append((name, m, acc, n, r, par))
    best = None
    for i, (a, ma, acc, na, r, par) in enumerate(cands):
        for b, mb, acc_b, nb, _, _ in cands[i + 1:]:
            if acc_b.name != acc.name or grid.wan.path(a, b) is None:
                continue
            take_a = min(na, par.dp - 1)
            take_b = par.dp - take_a
            if take_a < 1 or not 1 <= take_b <= nb:
                continue
            grad = GRAD_BYTES * job.params_b
            est = grid.wan.estimate(a, b, grad)
            price = grid.places[a].price_per_gpu_hour(ma) + grid.places[b].price_per_gpu_hour(mb)
            key = (est[0], price, i)
            if best is None or key < best[0]:
                best = (key, [Part(a, ma, take_a, take_a * r), Part(b, mb, take_b, take_b * r)])
    if best is None:
        return None
    done = job.work_flops - js.remaining_flops
    return Split(best[1], done, js.remaining_flops)


# --------------------------------------------------------------------- the grid's hooks
def try_place(grid, js, verdict) -> bool:
    """Place a cross-site job split if the rules say so; ``False``: place it as any job."""
    if not js.gjob.cross_site:
        return False
    js.split = None
    whole = verdict.option
    if whole is not None and whole.wait_s <= SPLIT_PATIENCE_S:
        return False
    sp = choose(grid, js)
    if sp is None:
        if whole is not None or not could_split(grid, js.gjob):
            return False
        js.state = "held"
        js.reason = f"no two places can start its parts now: {verdict.why_not()}"
        return True
    js.split, js.place, js.decided_s, js.reason = sp, sp.parts[0].place, grid.now, ""
    js.state = "moving"
    for part in sp.parts:
        for mv in _needs(js.gjob, part.place, grid)[0]:
            tr = grid.wan.start(mv.src, part.place, mv.gb, tag=f"{mv.tag} of {js.gjob.name}")
            js.move_tids.add(tr.tid)
            grid._tid_job[tr.tid] = (js.gjob.name, mv.tag)
    grid._note("place", f"{js.gjob.name} split over "
               + " + ".join(f"{p.place} ({p.gpus} GPUs)" for p in sp.parts),
               job=js.gjob.name, place=sp.parts[0].place)
    if not js.move_tids:
        submit(grid, js)
    return True


def submit(grid, js) -> None:
    """Submit every part at once, to start at the latest start-up of their places."""
    sp, job = js.split, js.gjob.job
    start = grid.now + max(grid.places[p.place].startup_s for p in sp.parts)
    steps = []
    for part in sp.parts:
        place = grid.places[part.place]
        if not isinstance(place.engine.jobs.speed_model, WanSlowed):
            place.engine.jobs.use_speed_model(WanSlowed(place.engine.jobs.speed_model))
        acc = place.engine.plan.models[part.model]
        par, _ = _parallelism(job, acc.per_node)
        pj = replace(job, name=f"{job.name}@{part.place}", gpus=part.gpus,
                     parallelism=replace(par, dp=part.replicas), submit_s=start,
                     work_flops=sp.work_flops * part.gpus / job.gpus)
        part.run_idx = place.engine.command("submit_job", job=pj)["job_id"]
        place.runs[part.run_idx] = js.gjob.name
        js.history.append(part.place)
        place.data_move_s += grid.now - js.decided_s
        if place.is_cloud:
            place.gangs_started += 1
            place.startup_gpu_s += pj.gpus * place.startup_s
        steps.append(step_breakdown(pj, acc, gpus_per_node=acc.per_node,
                                    nodes=-(-pj.gpus // acc.per_node)).total_s)
    k = len(sp.parts)
    sp.step_in_s = max(steps)
    sp.grad_gb = 2.0 * (k - 1) / k * GRAD_BYTES * job.params_b
    js.move_wait_s += grid.now - js.decided_s
    js.run_idx, js.state = sp.parts[0].run_idx, "placed"
    grid._push(start, "cross", js.gjob.name)


def _runs(grid, sp):
    return [(grid.places[p.place], grid.places[p.place].engine.runs[p.run_idx])
            for p in sp.parts]


def costart(grid, js) -> None:
    """At the parts' start: all running, or every part withdrawn and the job waits."""
    sp = js.split
    if sp is None or sp.started or js.state != "placed":
        return
    for p in sp.parts:
        grid.places[p.place].engine.run_until(grid.now)
    runs = _runs(grid, sp)
    if all(run.state == RUNNING for _, run in runs):
        sp.started = True
        if js.first_start_s is None:
            js.first_start_s = grid.now
        ring = [p.place for p in sp.parts]
        for a, b in zip(ring, ring[1:] + ring[:1], strict=True) if len(ring) > 2 else (
                (ring[0], ring[1]), (ring[1], ring[0])):
            sp.streams.append(grid.wan.stream(a, b, tag=f"gradient of {js.gjob.name}"))
        refresh(grid)
        return
    _cancel(grid, sp)
    js.split, js.place, js.run_idx = None, None, None
    js.state, js.reason = "held", "its parts could not start together"
    grid._note("cross_wait", f"{js.gjob.name}: its parts could not start together; withdrawn",
               job=js.gjob.name)


def _cancel(grid, sp) -> None:
    for place, run in _runs(grid, sp):
        jobs = place.engine.jobs
        if run.state == PENDING:
            run.cancel_event()
        elif run.state in (DRAINING, DETECTING):
            jobs.stop_for_replan(run)
        if run.state not in (DONE, CANCELLED):
            jobs.cancel(run)
        slowed = jobs.speed_model
        if isinstance(slowed, WanSlowed):
            slowed.factor.pop(run.idx, None)
        place.engine.kernel.end_instant()
    for s in sp.streams:
        grid.wan.end_stream(s.tid)
    sp.streams = []


def done_flops(grid, js, *, saved: bool, most: bool = False) -> float:
    """The job's work done (``saved``: up to its parts' last saved step): the least-advanced
    part's share of it, since the parts step together (``most``: the furthest part's, what
    was computed before a part was cut short)."""
    sp = js.split
    least = -math.inf if most else math.inf
    for part, (_, run) in zip(sp.parts, _runs(grid, sp), strict=True):
        share = part.gpus / js.gjob.job.gpus
        done = sp.work_flops * share - run.remaining_flops
        if run.state == RUNNING:
            books = run.books_at(grid.now)
            done += (books.saved_s if saved else books.computed_s) * run.rate * run.slow
        least = max(least, done / share) if most else min(least, done / share)
    return min(sp.base_flops + max(0.0, least), js.gjob.job.work_flops)


def stop(grid, js, *, lost_at: str, dark: bool) -> None:
    """Stop every part; the job restarts from its last checkpoint (module docstring)."""
    sp = js.split
    progress = done_flops(grid, js, saved=False, most=True)
    saved = done_flops(grid, js, saved=True)
    _cancel(grid, sp)
    ck = js.checkpoint
    if ck is not None and grid.places[ck[0]].dark:
        ck = None
    if not dark and saved > (ck[2] if ck else 0.0):  # the parts' own checkpoint: each place
        held = [p.place for p in sp.parts if p.place != lost_at]  # holds one; the other's
        ck = ((held or [lost_at])[0], js.gjob.job.checkpoint_gb, saved)
    kept = ck[2] if ck else 0.0
    js.checkpoint = ck
    js.restarts.append({"t": grid.now, "lost_at": lost_at,
                        "checkpoint_at": ck[0] if ck else None, "kept_flops": kept})
    js.lost_flops += max(0.0, progress - kept)
    js.remaining_flops = js.gjob.job.work_flops - kept
    js.replicating = None
    js.split, js.run_idx = None, None


def collect(grid, js) -> None:
    """A placed split job: done when every part is; stopped when one part stops."""
    sp = js.split
    if not sp.started:
        return
    runs = _runs(grid, sp)
    if all(run.state == DONE for _, run in runs):
        for s in sp.streams:
            grid.wan.end_stream(s.tid)
        sp.streams = []
        js.state, js.end_s = "done", max(run.end_s for _, run in runs)
        return
    broken = [p.place for p, (_, run) in zip(sp.parts, runs, strict=True)
              if run.state not in (RUNNING, DONE) or run.interruptions or run.preemptions]
    if broken:
        _restart(grid, js, broken[0], "a part stopped")


def _restart(grid, js, at: str, why: str) -> None:
    stop(grid, js, lost_at=at, dark=False)
    grid._note("cross_stop", f"{js.gjob.name} stopped at every place: {why} at {at}",
               job=js.gjob.name, place=at)
    js.state, js.place = "pending", None
    grid._place(js)


def go_dark(grid, name: str) -> list:
    """Split jobs with a part at the place that went dark: stopped (the caller re-places)."""
    hit = []
    for js in grid.jobs.values():
        if js.split is None or not any(p.place == name for p in js.split.parts):
            continue
        if js.state == "placed":
            stop(grid, js, lost_at=name, dark=True)
        elif js.state != "moving":
            continue
        js.split, js.state, js.place = None, "pending", None
        hit.append(js)
    return hit


def refresh(grid) -> None:
    """Re-price every running split's WAN exchange; re-rate its parts when it moved."""
    for js in grid.jobs.values():
        sp = js.split
        if sp is None or not sp.started or js.state != "placed":
            continue
        if any(s.units is None for s in sp.streams):
            _restart(grid, js, sp.parts[0].place, "the WAN path between its parts was cut")
            continue
        rate = min(s.rate_gbps for s in sp.streams)
        lat = max(s.latency_s for s in sp.streams)
        k = len(sp.parts)
        wan_s = sp.grad_gb * 8.0 / rate + 2 * (k - 1) * lat if rate > 0 else math.inf
        if math.isfinite(wan_s) and abs(wan_s - sp.wan_s) <= 1e-9 * max(1.0, wan_s):
            continue
        sp.wan_s = min(wan_s, 1e9)
        for place, run in _runs(grid, sp):
            place.engine.jobs.speed_model.factor[run.idx] = sp.phi
            if run.state == RUNNING:
                place.engine.jobs.rerate(run)
            place.engine.kernel.end_instant()


def account(grid) -> None:
    """Book the WAN-exposed time and the gradient bytes since the last call (the engines
    have just advanced): from the first part's progress, as the parts step together.  Its
    computing wall time (checkpoint stalls left out) is ``progress / (rate x slow)``; the
    WAN's share of it ``1 - T_in / (T_in + T_wan)``; its steps ``wall x phi / T_in``."""
    for js in grid.jobs.values():
        sp = js.split
        if sp is None or not sp.started or js.state != "placed" or not sp.streams:
            continue
        part = sp.parts[0]
        run = grid.places[part.place].engine.runs[part.run_idx]
        done = sp.work_flops * part.gpus / js.gjob.job.gpus - run.remaining_flops
        if run.state == RUNNING:
            done += run.books_at(grid.places[part.place].engine.now).computed_s \
                * run.rate * run.slow
        step, sp.seen = done - sp.seen, done
        if step <= 0 or not run.rate * run.slow > 0:
            continue
        wall = step / (run.rate * run.slow)
        js.wan_exposed_s += wall * (1.0 - sp.phi)
        gb = wall * sp.phi / sp.step_in_s * sp.grad_gb
        for s in sp.streams:
            grid.wan.book_stream(s.tid, gb)
            js.wan_gradient_gb += gb


def tick(grid) -> None:
    """Every :data:`CROSS_CHECK_S`: retry held cross-site jobs."""
    for js in grid.jobs.values():
        if js.state == "held" and js.gjob.cross_site:
            grid._place(js)
