"""A federation that starts from a mirrored grid's "now" (issue 30), so a what-if
(:mod:`scheduler.grid.whatif`) can run ahead of real Slurm clusters.

:func:`grid_from_mirror` builds a :class:`~scheduler.grid.federation.Grid` whose clock 0 is the
mirror's reading time, and whose places hold what the sites' Slurms said:

* each running job holds its GPUs at its site for its **remaining time**: its time limit less
  its elapsed time when Slurm gave both (a job is assumed to run to its limit: an upper bound,
  most end earlier); with an elapsed time but no limit, as long again as it has run (the
  median of a job seen at a random instant of its life), at least :data:`MIN_REMAINING_S`;
  with neither, :data:`UNKNOWN_S`;
* each pending job waits in its site's queue for its time limit (else :data:`UNKNOWN_S`);
* GPUs the overview counts down are whole nodes down (the first ones of the site's plan);
* jobs start where they are (their data is assumed to be there: no dataset to move) and carry
  no checkpoint: a region loss in a what-if loses their compute since now, not since they
  started (the mirror does not see checkpoints); they may be placed anywhere afterwards;
* no arrivals beyond now unless ``future`` gives some (the mirror sees no arrival process).

Work is the remaining time at the site's largest GPU model's peak times the jobs' default
kernel efficiency.  Cloud regions start empty (no Slurm to mirror).
"""

from __future__ import annotations

import dataclasses

from scheduler.grid.federation import Grid, JobState
from scheduler.grid.jobs import GridJob
from scheduler.workload.jobs import DEFAULT_EFFICIENCY, TrainingJob

UNKNOWN_S = 4 * 3600.0
"""Remaining (or queued) time of a job whose times Slurm did not give, s: the median job of
the grid preset's workload (:mod:`scheduler.grid.presets`), an assumption."""
MIN_REMAINING_S = 600.0
"""The least remaining time of a running job, s (one already past its limit included)."""


def remaining_s(job: dict) -> float:
    """A mirrored job's remaining (running) or requested (pending) time, s (module note).

    >>> remaining_s({"state": "running", "elapsed_s": 3600, "time_limit_s": 7200})
    3600.0
    >>> remaining_s({"state": "running", "elapsed_s": 7200, "time_limit_s": None})
    7200.0
    >>> remaining_s({"state": "pending", "time_limit_s": None})
    14400.0
    """
    limit, elapsed = job.get("time_limit_s"), job.get("elapsed_s")
    if job.get("state") == "pending":
        return float(limit) if limit else UNKNOWN_S
    if limit and elapsed is not None:
        return max(float(limit) - float(elapsed), MIN_REMAINING_S)
    if elapsed is not None:
        return max(float(elapsed), MIN_REMAINING_S)
    return float(limit) if limit else UNKNOWN_S


def _check_jobs(jobs: dict, places) -> None:
    for place, rows in jobs.items():
        if place not in places:
            raise ValueError(f"mirrored jobs name {place!r}, no place of the grid")
        for j in rows:
            if j.get("state") not in ("running", "pending"):
                raise ValueError(f"mirrored job {j.get('job_id')!r} at {place}: state must be "
                                 f"running or pending, not {j.get('state')!r}")
            g = j.get("gpus")
            if isinstance(g, bool) or not isinstance(g, int) or g < 1:
                raise ValueError(f"mirrored job {j.get('job_id')!r} at {place}: gpus must be "
                                 f"an integer >= 1, not {g!r}")


def grid_from_mirror(spec, plans: dict, overview_doc: dict, jobs: dict, *, seed: int = 0,
                     policy="cost", replication_s: float | None = 3600.0,
                     future=()) -> Grid:
    """A grid at the mirrored instant (module note).

    Parameters
    ----------
    spec, plans : GridSpec and dict
        The inventory's grid and one plan per place.
    overview_doc : dict
        The mirrored :class:`~scheduler.grid.overview.Overview` (its places' ``down`` GPUs).
    jobs : dict
        Place -> list of ``{"job_id", "state": "running"|"pending", "gpus", "elapsed_s",
        "time_limit_s"}`` (seconds; ``None`` where Slurm said nothing).
    seed, policy, replication_s : as :class:`Grid`
    future : iterable of GridJob
        Arrivals after now (``submit_s`` > 0), if any are to be assumed.
    """
    places = spec.places()
    _check_jobs(jobs, places)
    grid = Grid(spec, plans, tuple(future), seed=seed, policy=policy,
                replication_s=replication_s)
    for row in overview_doc.get("places", []):
        p = grid.places.get(row.get("place"))
        down = int(row.get("down") or 0)
        if p is None or down <= 0:
            continue
        per_node = p.engine.plan.node_gpus
        left, n = down, 0
        while left > 0 and n < p.engine.plan.n_nodes:
            p.engine.command("node_down", node=n)
            left -= int(per_node[n])
            n += 1
    k = 1 + max((js.gjob.job.job_id for js in grid.jobs.values()), default=-1)
    for state in ("running", "pending"):  # the running ones take their GPUs first
        for place in places:
            for j in jobs.get(place, []):
                if j["state"] == state:
                    _start(grid, place, j, k)
                    k += 1
    grid.run_until(0.0)
    return grid


def _start(grid, place: str, j: dict, job_id: int) -> None:
    p = grid.places[place]
    plan = p.engine.plan
    sizes = [int(plan.node_gpus[plan.node_model == m].sum()) for m in range(len(plan.models))]
    acc = plan.models[sizes.index(max(sizes))]
    work = j["gpus"] * acc.bf16_tflops * 1e12 * DEFAULT_EFFICIENCY * remaining_s(j)
    job = TrainingJob(job_id, f"{place}:{j.get('job_id', job_id)}", "mirrored", 0.0,
                      int(j["gpus"]), work)
    gj = GridJob(job, data_site=place)
    js = JobState(gj, state="placed", place=place, remaining_flops=work, decided_s=0.0)
    run = p.engine.command("submit_job", job=dataclasses.replace(job, submit_s=0.0))
    js.run_idx = run["job_id"]
    js.history.append(place)
    p.runs[js.run_idx] = gj.name
    grid.jobs[gj.name] = js
