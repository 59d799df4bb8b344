"""A live grid (issue 30): an inventory grid's federation run forward in paced simulated time,
its overview written to ``GridState(source="simulated")`` every frame, staff drills applied,
and a pickled snapshot a restart resumes from.

The snapshot is a file, ``<GRID_DIR>/<grid>.pickle`` (``GRID_DIR``: the environment's
``CLUSTERTWIN_GRID_DIR``, else ``var/grids`` under the project), written atomically (a
temporary file, then ``os.replace``) only by ``run_grid`` and read only by it: a pickle is
code, so it is never taken from anywhere else.  It is not kept in ``GridState.doc``: that is
the page's JSON document (an :class:`~scheduler.grid.overview.Overview`), read by every page
view, and a few hundred kB of pickle in it would be read with every poll.  The snapshot carries
a fingerprint of the grid's spec, seed and workload horizon: one taken from another inventory
(a site added, a link changed) is not resumed; the grid starts afresh and says so.

The workload of an inventory grid is generated here (:func:`grid_live_workload`): the
inventory holds places, not jobs.  Every place holds one dataset; training jobs arrive as a
Poisson process sized so the owned sites are about three-quarters busy; a job's gang is one
that fits the largest place.  It covers ``days`` of simulated time; past that the grid runs
on without new arrivals.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import tempfile
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import transaction

from scheduler.grid.federation import Grid
from scheduler.grid.jobs import GridJob
from scheduler.grid.overview_of import overview_of
from scheduler.hardware.catalog import get
from scheduler.workload.jobs import DEFAULT_EFFICIENCY, TrainingJob
from twin.inventory.grid import grid_settings_read, grid_spec_read
from twin.live.grid_drills import GRID_DRILL_KINDS
from twin.live.models import Drill, DrillStatus, GridState, GridStateSource

SNAPSHOT_FORMAT = 2
"""2: places and the grid carry supply-cut books (an older snapshot starts afresh)."""
DATASET_GB = 2_000.0
"""Each place's dataset, GB (an assumption: a mid-sized training corpus shard)."""
MEAN_JOB_H = 5.5
"""Mean compute of a job on H100s, hours (log-normal, median 4 h, sigma 0.8, 0.5-24 h)."""
BUSY = 0.75
"""Share of the owned GPUs the arrivals keep busy on average (clouds absorb the peaks)."""
GANGS = (8, 16, 32, 64)
GANG_P = (0.35, 0.3, 0.2, 0.15)


def grid_dir() -> Path:
    """Where live grids keep their snapshots."""
    return Path(os.environ.get("CLUSTERTWIN_GRID_DIR") or settings.BASE_DIR / "var" / "grids")


def grid_live_workload(spec, plans: dict, *, days: float, seed: int) -> tuple[GridJob, ...]:
    """Jobs over ``days`` for the places of ``spec`` (see the module's note); seeded."""
    rng = np.random.default_rng([seed, 30, 1])
    gpus_of = {p: int(plans[p].node_gpus.sum()) for p in plans}
    owned = sum(gpus_of[s.name] for s in spec.sites) or sum(gpus_of.values())
    biggest = max(gpus_of.values())
    gangs = [g for g in GANGS if g <= biggest] or [min(biggest, GANGS[0])]
    p = np.array(GANG_P[:len(gangs)]) / sum(GANG_P[:len(gangs)])
    mean_gang = float(np.dot(gangs, p))
    rate_per_s = BUSY * owned / (mean_gang * MEAN_JOB_H) / 3600.0
    h100 = get("H100-SXM").bf16_tflops * 1e12 * DEFAULT_EFFICIENCY
    places = spec.places()
    jobs, t, k = [], 0.0, 0
    while True:
        t += float(rng.exponential(1.0 / rate_per_s))
        if t >= days * 86400.0:
            return tuple(jobs)
        gpus = int(rng.choice(gangs, p=p))
        hours = float(np.clip(rng.lognormal(math.log(4.0), 0.8), 0.5, 24.0))
        home = places[int(rng.integers(len(places)))]
        job = TrainingJob(k, f"g{k:05d}", f"team-{k % 7}", round(t, 3), gpus,
                          gpus * h100 * hours * 3600.0, params_b=7.0 * gpus / 8,
                          checkpoint_gb=14.0 * 7.0 * gpus / 8, checkpoint_interval_s=3600.0)
        jobs.append(GridJob(job, f"data-{home}", home, DATASET_GB))
        k += 1


def _fingerprint(spec, *, seed: int, days: float) -> str:
    return hashlib.sha256(repr((spec, seed, days)).encode()).hexdigest()[:16]


class LiveGrid:
    """One inventory grid's federation, stepped by ``run_grid``.

    Raises ``ValueError`` (one line) for a grid the core cannot run.
    """

    def __init__(self, grid_row, *, seed: int, days: float = 30.0, resume: bool = True):
        self.row = grid_row
        self.name = grid_row.name
        spec, plans = grid_spec_read(grid=grid_row)
        s = grid_settings_read(grid=grid_row)
        self.fingerprint = _fingerprint(spec, seed=seed, days=days)
        self.path = grid_dir() / f"{self.name}.pickle"
        self.resumed_from: float | None = None
        self.note = ""
        self.grid = self._restore() if resume else None
        if self.grid is None:
            jobs = grid_live_workload(spec, plans, days=days, seed=seed)
            self.grid = Grid(spec, plans, jobs, seed=seed,
                             policy={"cost": s["weight_cost"], "start": s["weight_start"],
                                     "gravity": s["weight_gravity"]},
                             replication_s=s["checkpoint_replication_s"] or None)

    # ----------------------------------------------------------------- the snapshot
    def _restore(self) -> Grid | None:
        try:
            with self.path.open("rb") as f:
                saved = pickle.load(f)  # noqa: S301 - our own file, written by save()
        except FileNotFoundError:
            return None
        except Exception as exc:  # a torn or foreign file: start afresh, and say so
            self.note = f"snapshot {self.path} unreadable ({type(exc).__name__}); started afresh"
            return None
        if saved.get("format") != SNAPSHOT_FORMAT or saved.get("fingerprint") != self.fingerprint:
            self.note = (f"snapshot {self.path} is of another grid layout, seed or horizon; "
                         "started afresh")
            return None
        self.resumed_from = saved["grid"].now
        return saved["grid"]

    def save(self) -> None:
        """Write the snapshot atomically (a reader never sees half a file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = pickle.dumps({"format": SNAPSHOT_FORMAT, "fingerprint": self.fingerprint,
                             "grid": self.grid}, protocol=pickle.HIGHEST_PROTOCOL)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.name}.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # ----------------------------------------------------------------- stepping
    def step(self, seconds: float) -> None:
        """Run the federation ``seconds`` of simulated time forward."""
        self.grid.run_until(self.grid.now + max(0.0, seconds))

    def publish(self) -> dict:
        """Write the overview to ``GridState(simulated)``; returns it."""
        doc = overview_of(self.grid, self.name)
        GridState.objects.update_or_create(grid=self.row, source=GridStateSource.SIMULATED,
                                           defaults={"doc": doc})
        return doc

    def drills_apply(self) -> int:
        """Apply this grid's pending drills (oldest first): each is applied now or refused
        with its reason; returns how many were applied."""
        applied = 0
        pending = Drill.objects.filter(status=DrillStatus.PENDING, kind__in=GRID_DRILL_KINDS,
                                       params__grid=self.name).order_by("pk")
        for drill in pending:
            ok, outcome = self._apply(drill)
            with transaction.atomic():
                Drill.objects.filter(pk=drill.pk, status=DrillStatus.PENDING).update(
                    status=DrillStatus.APPLIED if ok else DrillStatus.REFUSED, outcome=outcome,
                    applied_at_sim=self.grid.now if ok else None)
            applied += ok
        if applied:
            self.step(0.0)  # the event fires at now: apply it before the next frame
        self.whatifs_serve()
        return applied

    def whatifs_serve(self) -> int:
        """Start this grid's pending simulated what-ifs, each on a fork taken now, in a
        thread (:mod:`twin.live.grid_whatif`); run_grid reaches it between two frames."""
        from twin.live.grid_whatif import grid_whatifs_serve_live
        return grid_whatifs_serve_live(self)

    def _apply(self, drill) -> tuple[bool, dict]:
        params = drill.params or {}
        duration = params.get("duration_s")
        try:
            if drill.kind == "grid_region_loss":
                self.grid.region_loss(drill.target, self.grid.now, duration)
                what = f"{drill.target} dark"
            elif drill.kind == "grid_supply_cut":
                models = self.grid.supply_cut(drill.target, self.grid.now, duration)
                what = f"supply of {', '.join(models)} cut"
            else:
                self.grid.wan_cut(params["a"], params["b"], self.grid.now, duration)
                what = f"WAN link {params['a']}-{params['b']} cut"
        except (ValueError, KeyError) as exc:
            return False, {"error": str(exc)}
        span = "until mended" if duration is None else f"for {duration:g} s"
        return True, {"effect": f"{what} at t={self.grid.now:.0f} s, {span}"}
