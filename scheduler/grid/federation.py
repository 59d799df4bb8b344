"""The grid run: one engine per place, stepped in lockstep on one clock, and the grid's own
decisions on top (where each job runs, what moves over the WAN, what a lost region costs).

A grid job reaches the grid at its submit time; :func:`scheduler.grid.placement.assess` picks a
place; the job's dataset (and, after a region loss, its latest off-site checkpoint) moves
there over the WAN first, and the job is submitted to that place's engine when the last byte
has landed (plus a cloud's start-up delay): it holds no GPU while it waits, so the wait is the
grid's to book (``data_move`` hours per job and place; the places' ledgers stay as they are).
A gang never spans places: it runs whole in one engine, unless its job allows cross-site data
parallelism (:mod:`scheduler.grid.cross_site`: its DP replicas split over two engines).

Checkpoints go off-site every ``replication_s``: each running job's latest usable checkpoint is
copied over the WAN to another live place it may run at (its data site first), and counts as
replicated once it has landed.  When a place goes dark its jobs are cancelled there (compute
since their last replicated checkpoint is lost) and placed again, restarting from that
checkpoint, which then moves to the new place; a job without one restarts from its beginning.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field, replace

import numpy as np

from scheduler.grid import cross_site
from scheduler.grid.jobs import GridJob, check_jobs
from scheduler.grid.placement import assess, weights_of
from scheduler.grid.places import build_places, check_plans
from scheduler.grid.supply import apply_cut, check_window, cut_models, held_by_cut, mend
from scheduler.grid.wan import Wan
from scheduler.hardware.grid_spec import GridSpec
from scheduler.model.job_run import CANCELLED, DETECTING, DONE, DRAINING, PENDING, REJECTED, RUNNING

ARRIVE, REPLICATE, DARK, LIGHT, CUT, MEND, SPOT, CROSS = (
    "arrive", "replicate", "dark", "light", "cut", "mend", "spot", "cross")
SUPPLY, RESUPPLY = "supply_cut", "supply_back"

SPOT_CHECK_S = 600.0
"""How often spot gangs are drawn for interruption, s (each gang: a Poisson process of its
region's rate per instance-hour times its nodes, drawn over the last interval)."""


@dataclass
class JobState:
    """A grid job's life across places."""

    gjob: GridJob
    state: str = "pending"       # pending, moving, placed, held, done, refused
    place: str | None = None
    run_idx: int | None = None
    remaining_flops: float = 0.0  # work still to do when last submitted (or to submit)
    decided_s: float | None = None
    first_start_s: float | None = None
    end_s: float | None = None
    move_tids: set = field(default_factory=set)
    move_wait_s: float = 0.0      # decision to submission, summed over placements
    moved_gb: float = 0.0
    history: list = field(default_factory=list)   # places it was submitted to, in order
    checkpoint: tuple | None = None   # (place, GB, done FLOPs) of its replicated checkpoint
    replicating: int | None = None    # the transfer id of a replication in flight
    replicating_flops: float = 0.0
    lost_flops: float = 0.0           # compute thrown away by region losses
    restarts: list = field(default_factory=list)  # one dict per region loss it lived through
    reason: str = ""
    split: object = None              # a cross-site job's current parts (cross_site.Split)
    wan_exposed_s: float = 0.0        # cross-site: step time lost to the WAN exchange
    wan_gradient_gb: float = 0.0      # cross-site: gradient GB sent over the WAN


class Grid:
    """A federation of engines, one per place of ``spec``, run as one pool.

    Parameters
    ----------
    spec : GridSpec
        Sites, cloud regions and WAN links.
    plans : dict
        Place name -> :class:`~scheduler.hardware.cluster.ClusterPlan` (the inventory's or
        :func:`scheduler.grid.places.plans_from_spec`'s); a cloud region left out gets its
        quota's pool, a site left out the cluster of its node groups
        (:func:`scheduler.grid.places.check_plans`).
    jobs : iterable of GridJob
        The grid's workload.
    seed : int
        Seeds every place's engine (each its own stream).
    policy : str, Weights or dict
        Placement weighting (:func:`scheduler.grid.placement.weights_of`).
    replication_s : float or None
        How often checkpoints go off-site, s; ``None``: never.
    engine_options : dict, optional
        Passed to every place's :class:`~scheduler.engine.Engine` (``failures``,
        ``physics`` ...; default: the failure-free, physics-free baseline).
    spot : bool
        Cloud regions that offer spot run on it: billed at the spot price, and their gangs
        are reclaimed at the region's interruption rate (requeued there, losing the work
        since their last checkpoint, booked ``lost_work`` in that region's ledger).
    """

    def __init__(self, spec: GridSpec, plans: dict, jobs=(), *, seed: int = 0,
                 policy="cost", replication_s: float | None = 3600.0,
                 engine_options: dict | None = None, spot: bool = False):
        spec.check()
        plans = check_plans(spec, plans)
        jobs = tuple(jobs)
        check_jobs(jobs, spec.places())
        if replication_s is not None and not replication_s > 0:
            raise ValueError(f"replication interval must be positive seconds or None, not "
                             f"{replication_s!r}")
        self.spec = spec
        self.weights = weights_of(policy)
        self.replication_s = replication_s
        self.seed = seed
        self.places = build_places(spec, plans, seed=seed, engine_options=engine_options or {},
                                   spot=spot)
        self._rng = np.random.default_rng([seed, 31])  # spot interruptions
        self.wan = Wan(spec.links, spec.places())
        self.now = 0.0
        self.jobs: dict[str, JobState] = {}
        self.log: list[dict] = []
        self.cut_delayed: set[str] = set()  # jobs held while a supply cut ruled a place out
        self._copies: dict[str, set[str]] = {}
        self._tid_job: dict[int, tuple[str, str]] = {}  # transfer -> (job, what for)
        self._heap: list = []
        self._seq = 0
        for g in jobs:
            self.jobs[g.name] = JobState(g, remaining_flops=float(g.job.work_flops))
            if g.dataset:
                self._copies.setdefault(g.dataset, set()).add(g.data_site)
            self._push(g.job.submit_s, ARRIVE, g.name)
        if replication_s is not None:
            self._push(replication_s, REPLICATE, None)
        if any(p.spot and p.spec.spot_interruptions_per_hour > 0 for p in self.places.values()):
            self._push(SPOT_CHECK_S, SPOT, None)
        if any(g.cross_site for g in jobs):
            self._push(cross_site.CROSS_CHECK_S, CROSS, None)

    # ----------------------------------------------------------------- what placement reads
    def copies(self, dataset: str) -> set[str]:
        return self._copies.get(dataset, set())

    def checkpoint_of(self, name: str) -> tuple[str, float] | None:
        ck = self.jobs[name].checkpoint
        return None if ck is None else (ck[0], ck[1])

    def remaining_flops(self, name: str) -> float:
        return self.jobs[name].remaining_flops

    def inbound_gpus(self, place: str) -> int:
        return sum(sum(p.gpus for p in js.split.parts if p.place == place) if js.split
                   else js.gjob.job.gpus for js in self.jobs.values()
                   if js.state == "moving" and (js.place == place or js.split))

    # ----------------------------------------------------------------- drills
    def region_loss(self, place: str, at_s: float, duration_s: float | None = None) -> None:
        """``place`` goes dark at ``at_s`` for ``duration_s`` (``None``: for good)."""
        if place not in self.places:
            raise ValueError(f"no place {place!r} in grid {self.spec.name}")
        self._push(at_s, DARK, place)
        if duration_s is not None:
            self._push(at_s + duration_s, LIGHT, place)

    def wan_cut(self, a: str, b: str, at_s: float, duration_s: float | None = None) -> None:
        """The WAN link between ``a`` and ``b`` is cut at ``at_s`` for ``duration_s``."""
        self.wan._link(a, b)  # refuse an unknown link now, not when the event fires
        self._push(at_s, CUT, (a, b))
        if duration_s is not None:
            self._push(at_s + duration_s, MEND, (a, b))

    def supply_cut(self, model: str | None, at_s: float, duration_s: float | None = None, *,
                   vendor: str | None = None) -> tuple[str, ...]:
        """No more parts of ``model`` (with ``vendor``: of every model of that vendor in the
        grid) from ``at_s`` for ``duration_s`` (``None``: for good): see
        :mod:`scheduler.grid.supply`.  Returns the models cut; a model no place has is
        refused now, in one line, and nothing is scheduled."""
        models = cut_models(self, model, vendor)
        check_window(at_s, duration_s)
        self._push(at_s, SUPPLY, models)
        if duration_s is not None:
            self._push(at_s + duration_s, RESUPPLY, models)
        return models

    # ----------------------------------------------------------------- the clock
    def _push(self, t: float, kind: str, payload) -> None:
        heapq.heappush(self._heap, (float(t), self._seq, kind, payload))
        self._seq += 1

    def run_until(self, t_end: float) -> None:
        """Step every place, the WAN and the grid's events to ``t_end`` (s)."""
        while True:
            nxt = [t for t in (self._heap[0][0] if self._heap else None,
                               self.wan.next_event()) if t is not None]
            if not nxt or min(nxt) > t_end:
                break
            te = max(min(nxt), self.now)
            self._advance(te)
            while self._heap and self._heap[0][0] <= te:
                _, _, kind, payload = heapq.heappop(self._heap)
                self._handle(kind, payload)
            cross_site.refresh(self)
        self._advance(max(t_end, self.now))

    def _advance(self, t: float) -> None:
        for place in self.places.values():
            place.engine.run_until(t)
        cross_site.account(self)
        landed = self.wan.advance(t)
        self.now = t
        for tr in landed:
            self._landed(tr)
        self._collect()
        cross_site.refresh(self)

    def _handle(self, kind: str, payload) -> None:
        if kind == ARRIVE:
            self._place(self.jobs[payload])
        elif kind == REPLICATE:
            self._replicate()
            self._push(self.now + self.replication_s, REPLICATE, None)
        elif kind == SPOT:
            self._reclaim_spot()
            self._push(self.now + SPOT_CHECK_S, SPOT, None)
        elif kind == CROSS:
            if payload is None:
                cross_site.tick(self)
                self._push(self.now + cross_site.CROSS_CHECK_S, CROSS, None)
            else:
                cross_site.costart(self, self.jobs[payload])
        elif kind == DARK:
            self._go_dark(payload)
        elif kind == LIGHT:
            self._light(payload)
        elif kind in (SUPPLY, RESUPPLY):
            hit = (apply_cut if kind == SUPPLY else mend)(self, payload)
            self._note(kind, f"supply of {', '.join(payload)} "
                             f"{'cut' if kind == SUPPLY else 'back'} at {len(hit)} place(s)",
                       places=hit, models=list(payload), delayed=sorted(self.cut_delayed))
            if kind == RESUPPLY:
                self._retry_held()
        else:
            crossing = self._crossing(*payload) if kind == CUT else []
            self.wan.set_link(*payload, up=kind == MEND)
            self._note(kind, f"WAN link {payload[0]}-{payload[1]} "
                             f"{'restored' if kind == MEND else 'cut'}",
                       link=list(payload), jobs=crossing)
            if kind == MEND:
                self._retry_held()

    def _note(self, kind: str, text: str, **more) -> None:
        self.log.append({"t": self.now, "kind": kind, "text": text, **more})

    def _crossing(self, a: str, b: str) -> list[str]:
        """The jobs whose transfers or streams run over the link ``a``-``b`` now."""
        units = {2 * self.wan._link(a, b), 2 * self.wan._link(a, b) + 1}
        flows = (*self.wan.transfers.values(), *self.wan.streams.values())
        return sorted({t.tag.partition(" of ")[2] for t in flows
                       if t.units and units & set(t.units)} - {""})

    # ----------------------------------------------------------------- placing
    def _place(self, js: JobState) -> None:
        verdict = assess(js.gjob, self)
        if cross_site.try_place(self, js, verdict):
            return
        if verdict.option is None:
            js.state = "held" if verdict.waits else "refused"
            js.reason = f"fits nowhere now: {verdict.why_not()}"
            if js.state == "held" and held_by_cut(verdict.reasons):
                self.cut_delayed.add(js.gjob.name)
            if js.state == "refused":
                self._note("refused", f"{js.gjob.name} refused: {js.reason}", job=js.gjob.name)
            return
        opt = verdict.option
        js.place, js.decided_s, js.reason = opt.place, self.now, ""
        js.state = "moving"
        for mv in opt.moves:
            tr = self.wan.start(mv.src, opt.place, mv.gb, tag=f"{mv.tag} of {js.gjob.name}")
            js.move_tids.add(tr.tid)
            self._tid_job[tr.tid] = (js.gjob.name, mv.tag)
        self._note("place", f"{js.gjob.name} -> {opt.place}"
                   + (f", moving {opt.move_gb:g} GB first" if opt.moves else ""),
                   job=js.gjob.name, place=opt.place)
        if not js.move_tids:
            self._submit(js)

    def _submit(self, js: JobState) -> None:
        if js.split is not None:
            return cross_site.submit(self, js)
        place = self.places[js.place]
        job = replace(js.gjob.job, work_flops=js.remaining_flops,
                      submit_s=self.now + place.startup_s)
        out = place.engine.command("submit_job", job=job)
        js.run_idx = out["job_id"]
        place.runs[js.run_idx] = js.gjob.name
        js.state = "placed"
        js.history.append(js.place)
        js.move_wait_s += self.now - js.decided_s
        place.data_move_s += self.now - js.decided_s
        if place.is_cloud:
            place.gangs_started += 1
            place.startup_gpu_s += job.gpus * place.startup_s

    def _landed(self, tr) -> None:
        name, tag = self._tid_job.pop(tr.tid, (None, None))
        if name is None:
            return
        js = self.jobs[name]
        if tag == "replica":
            js.replicating = None
            js.checkpoint = (tr.dst, tr.gb, js.replicating_flops)
            return
        js.moved_gb += tr.gb
        if tag == "dataset":
            self._copies.setdefault(js.gjob.dataset, set()).add(tr.dst)
        js.move_tids.discard(tr.tid)
        if js.state == "moving" and not js.move_tids:
            self._submit(js)

    def _collect(self) -> None:
        for js in self.jobs.values():
            if js.state != "placed":
                continue
            if js.split is not None:
                cross_site.collect(self, js)
                continue
            run = self.places[js.place].engine.runs[js.run_idx]
            if js.first_start_s is None and run.first_start is not None:
                js.first_start_s = run.first_start
            if run.state == DONE:
                js.state, js.end_s = "done", run.end_s
            elif run.state == REJECTED:
                js.state = "refused"
                js.reason = f"{js.place} could not admit it (host resources)"

    def _retry_held(self) -> None:
        for js in self.jobs.values():
            if js.state == "held":
                self._place(js)

    # ----------------------------------------------------------------- checkpoints
    def _done_flops(self, js: JobState, *, saved: bool) -> float:
        """Work done so far (``saved``: up to its latest usable local checkpoint)."""
        if js.split is not None:
            return cross_site.done_flops(self, js, saved=saved)
        run = self.places[js.place].engine.runs[js.run_idx]
        done = js.gjob.job.work_flops - run.remaining_flops
        if run.state == RUNNING:
            books = run.books_at(self.now)
            done += (books.saved_s if saved else books.computed_s) * run.rate * run.slow
        return min(done, js.gjob.job.work_flops)

    def _backup(self, js: JobState) -> str | None:
        """Where the job's checkpoint goes off-site: its data site, else the live place it
        may run at that is quickest to reach."""
        g, here = js.gjob, js.place
        best = None
        for name, p in self.places.items():
            if name == here or p.dark or not g.allows(name, p.jurisdiction):
                continue
            est = self.wan.estimate(here, name, max(g.job.checkpoint_gb, 1e-9))
            if est is None:
                continue
            key = (name != g.data_site, est[0], name)
            if best is None or key < best[0]:
                best = (key, name)
        return None if best is None else best[1]

    def _replicate(self) -> None:
        for js in self.jobs.values():
            gb = js.gjob.job.checkpoint_gb
            if js.state != "placed" or gb <= 0 or js.replicating is not None:
                continue
            done = self._done_flops(js, saved=True)
            have = js.checkpoint[2] if js.checkpoint else 0.0
            target = self._backup(js)
            if done <= have or target is None:
                continue
            tr = self.wan.start(js.place, target, gb, tag=f"replica of {js.gjob.name}")
            self._tid_job[tr.tid] = (js.gjob.name, "replica")
            js.replicating, js.replicating_flops = tr.tid, done

    def _reclaim_spot(self) -> None:
        for place in self.places.values():
            rate = place.spec.spot_interruptions_per_hour if place.spot else 0.0
            if rate <= 0 or place.dark:
                continue
            jobs = place.engine.jobs
            for idx in sorted(jobs.running):
                run = jobs.running[idx]
                if run.state != RUNNING:
                    continue
                p = 1.0 - math.exp(-rate * run.placement.nodes.size * SPOT_CHECK_S / 3600.0)
                if self._rng.random() < p:
                    jobs.preempt(run, reason="spot instances reclaimed",
                                 lost_category="lost_work")
                    run.interruptions += 1
                    place.spot_interruptions += 1
            place.engine.kernel.end_instant()

    # ----------------------------------------------------------------- region loss
    def _go_dark(self, name: str) -> None:
        place = self.places[name]
        if place.dark:
            return
        place.dark, place.dark_since = True, self.now
        moved = []
        for tid, tr in list(self.wan.transfers.items()):  # transfers to or from it stop
            if name in (tr.src, tr.dst):
                self.wan.cancel(tid)
                job, tag = self._tid_job.pop(tid, (None, None))
                js = self.jobs.get(job)
                if js is None:
                    continue
                if tag == "replica":
                    js.replicating = None
                elif js.state == "moving":
                    js.move_tids.discard(tid)
                    moved.append(js)
        moved += cross_site.go_dark(self, name)
        for js in self.jobs.values():
            if js.place == name and js.state == "placed":
                self._evict(js, place)
                moved.append(js)
            elif js.place == name and js.state == "moving":
                moved.append(js)
        for js in {js.gjob.name: js for js in moved}.values():  # once each, in order
            for tid in list(js.move_tids):
                self.wan.cancel(tid)
                self._tid_job.pop(tid, None)
            js.move_tids.clear()
            js.state, js.place = "pending", None
            self._place(js)
        engine = place.engine
        for n in range(engine.plan.n_nodes):
            engine.command("node_down", node=n)
        self._note("dark", f"{name} lost: {len(moved)} job(s) placed again", place=name,
                   jobs=list(dict.fromkeys(js.gjob.name for js in moved)))

    def _evict(self, js: JobState, place) -> None:
        run = place.engine.runs[js.run_idx]
        progress = self._done_flops(js, saved=False)
        jobs = place.engine.jobs
        if run.state == PENDING:  # still in its cloud start-up: never arrives
            run.cancel_event()
        elif run.state in (DRAINING, DETECTING):  # lending its GPUs, or hung on a failure
            jobs.stop_for_replan(run)
        if run.state not in (DONE, CANCELLED):
            jobs.cancel(run)
        ck = js.checkpoint
        if ck is not None and (ck[0] == place.name or self.places[ck[0]].dark):
            ck = None  # its only copy is in the dark
        kept = ck[2] if ck else 0.0
        js.checkpoint = ck
        js.restarts.append({"t": self.now, "lost_at": place.name,
                            "checkpoint_at": ck[0] if ck else None, "kept_flops": kept,
                            "lost_flops": max(0.0, progress - kept)})
        js.lost_flops += max(0.0, progress - kept)
        js.remaining_flops = js.gjob.job.work_flops - kept
        js.replicating = None

    def _light(self, name: str) -> None:
        place = self.places[name]
        if not place.dark:
            return
        place.dark = False
        place.dark_s += self.now - place.dark_since
        engine = place.engine
        for n in range(engine.plan.n_nodes):
            engine.command("node_up", node=n)
        self._note("light", f"{name} back", place=name)
        self._retry_held()
