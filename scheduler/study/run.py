"""One run of a study: an arm's scenario at one seed, reduced to its report and figures.

:func:`run_one` takes and returns plain values only, so a Dask worker (or any process with
this package) can run it; it is deterministic in its arguments except the wall-clock fields
(``wall_seconds``, ``scheduler.wall_seconds``, ``scheduler.decisions_per_second``, and this
function's own ``wall_s``, ``pid`` and ``host``).
"""

from __future__ import annotations

import os
import socket
import time

from scheduler.simulate import Scenario, run_scenario
from scheduler.study.figures import read_figures, study_extras
from scheduler.study.grid import run_grid_arm


def run_one(options: dict, seed: int, figures: list[str], *,
            energy_price_usd_per_mwh: float | None = None, grid=None) -> dict:
    """Run ``Scenario(**options, seed=seed)``; return its figures and report.

    An arm of a grid study (options naming a ``grid``) runs that grid instead
    (:func:`scheduler.study.grid.run_grid_arm`); ``grid`` is an inventory grid's
    ``(GridSpec, plans)``, read when its spec was checked (:attr:`StudySpec.grid`).

    Returns
    -------
    dict
        ``{"figures": {name: value}, "report": dict, "wall_s": s, "pid": int, "host": str}``.

    Examples
    --------
    >>> out = run_one({"preset": "dev-small", "days": 0.05}, 1, ["mfu", "jobs_completed"])
    >>> sorted(out["figures"]), out["report"]["scenario"]["seed"]
    (['jobs_completed', 'mfu'], 1)
    """
    started = time.perf_counter()
    if "grid" in options:
        out = run_grid_arm(options, seed, figures, grid=grid)
        return {**out, "wall_s": round(time.perf_counter() - started, 3), "pid": os.getpid(),
                "host": socket.gethostname()}
    engine, report = run_scenario(Scenario(**options, seed=int(seed)))
    report["study"] = study_extras(engine, report,
                                   energy_price_usd_per_mwh=energy_price_usd_per_mwh)
    return {"figures": read_figures(report, figures), "report": report,
            "wall_s": round(time.perf_counter() - started, 3), "pid": os.getpid(),
            "host": socket.gethostname()}
