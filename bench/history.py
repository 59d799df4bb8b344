"""``/api/history`` for one metric over 30 simulated days (issue 16: under 200 ms).

Run: .venv/bin/python -m bench.history [--days 30] [--tenants 12] [--repeat 5]

A scratch SQLite database (migrated here) gets a run of ``--days`` simulated days sampled every
``HISTORY_STEP_S`` (300 s: 8,640 samples for 30 days), each sample with the fleet's series and
``--tenants`` tenants' GPUs, as ``twin.live.history.record`` writes them.  Then, through Django's
test client with a logged-in user (the whole view: login, query, JSON), the best and median of
``--repeat`` requests for: the whole run as recorded, the whole run in 1-hour buckets, and the
last day.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

TARGET_S = 0.2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--tenants", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    os.environ.update(DATABASE_URL=f"sqlite:///{tmp / 'history.sqlite3'}",
                      DJANGO_SETTINGS_MODULE="twin.config.settings", CLUSTERTWIN_INSECURE_DEMO="1",
                      CLUSTERTWIN_ENGINE="off")
    import django
    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from twin import models as m
    from twin.live import history, services

    settings.ALLOWED_HOSTS = ["testserver", *settings.ALLOWED_HOSTS]
    call_command("migrate", "--noinput", verbosity=0)
    step = settings.CLUSTERTWIN["HISTORY_STEP_S"]
    n = int(args.days * 86400 / step)
    print(f"writing {n:,} samples ({args.days:g} days every {step:g} s, "
          f"{args.tenants} tenants) …", flush=True)
    from tests.frames import frame as stored_frame  # a schema-valid frame to vary

    run = "bench-run"
    rows = []
    base = stored_frame(
        mfu=0.4, mfu_window=0.38, goodput=0.6, jobs={"queued": 40, "running": 900},
        inference={"slo_attainment": 0.999, "serving_gpus": 4096},
        power={"it_mw": 140.0, "facility_mw": 170.0, "throttled_gpus": 0},
        tenants=[{"tenant": f"team{k}", "used_gpus": 5000 + k, "quota_gpus": 8000}
                 for k in range(args.tenants)])
    frame = base
    for i in range(n):
        t = i * step
        frame = {**base, "t": t,
                 "util": {**base["util"], "gpus": 100_000, "allocated": 90_000 + i % 5000,
                          "down": i % 300},
                 "failures": {**base["failures"], "total": i // 10}}
        rows.append(m.HistorySample(run=run, t_sim=t, values=history.sample(frame)))
    m.HistorySample.objects.bulk_create(rows, batch_size=2000)
    services.live_state_write(seq=1, t_sim=frame["t"], frame=frame, health="ok",
                              last_error="", speed=60.0, paused=False, inventory=run)
    user = get_user_model().objects.create_user("bench")
    client = Client()
    client.force_login(user)
    queries = {"whole run, as recorded": {"metric": "fleet.allocated_pct"},
               "whole run, 1-hour buckets": {"metric": "fleet.allocated_pct", "step": 3600},
               "last day, a tenant": {"metric": "tenant.team3.gpus", "last": 86400}}
    print(f"\n{'query':<28}{'points':>8}{'best s':>9}{'median s':>10}{'target s':>10}  verdict")
    for label, query in queries.items():
        times, points = [], 0
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            response = client.get("/api/history", query)
            times.append(time.perf_counter() - t0)
            assert response.status_code == 200, response.content[:200]
            points = len(response.json()["t"])
        best, median = min(times), statistics.median(times)
        print(f"{label:<28}{points:>8,}{best:>9.3f}{median:>10.3f}{TARGET_S:>10.1f}  "
              f"{'ok' if median < TARGET_S else 'MISSED'}")


if __name__ == "__main__":
    main()
