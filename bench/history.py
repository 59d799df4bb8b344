"""``/api/history`` over 30 simulated days (issue 16: under 200 ms; issue 27: the range picker's
30 days, downsampled server-side to at most 1,000 points).

Run: .venv/bin/python -m bench.history [--days 30] [--gpus 4096] [--tenants 4] [--repeat 5]

A scratch SQLite database (migrated here) gets a run of ``--days`` simulated days sampled every
``HISTORY_STEP_S`` (300 s: 8,640 samples for 30 days), each sample with the fleet's series and
``--tenants`` tenants' GPUs, as ``twin.live.history.record`` writes them (defaults: noc-4k's
4,096 GPUs and 4 tenants).  Then, through Django's test client with a logged-in user (the whole
view: login, query, JSON), the best and median wall and CPU seconds (``time.process_time``) of
``--repeat`` requests for: ``range=30d`` (server-side buckets), the four series the overview
loads at ``range=30d``, ``range=30d&bucket=1h``, and a tenant's last day.
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
    ap.add_argument("--gpus", type=int, default=4096)
    ap.add_argument("--tenants", type=int, default=4)
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
        tenants=[{"tenant": f"team{k}", "used_gpus": args.gpus // (args.tenants + 1) + k,
                  "quota_gpus": args.gpus // args.tenants}
                 for k in range(args.tenants)])
    frame = base
    for i in range(n):
        t = i * step
        frame = {**base, "t": t,
                 "util": {**base["util"], "gpus": args.gpus,
                          "allocated": int(args.gpus * 0.87) + i % (args.gpus // 20),
                          "down": i % 30},
                 "failures": {**base["failures"], "total": i // 10}}
        rows.append(m.HistorySample(run=run, t_sim=t, values=history.sample(frame)))
    m.HistorySample.objects.bulk_create(rows, batch_size=2000)
    services.live_state_write(seq=1, t_sim=frame["t"], frame=frame, health="ok",
                              last_error="", speed=60.0, paused=False, inventory=run)
    user = get_user_model().objects.create_user("bench")
    client = Client()
    client.force_login(user)
    overview = ("fleet.allocated_pct", "fleet.mfu_pct", "fleet.mfu_window_pct",
                "fleet.goodput_pct")
    queries = {"range=30d, one series": [{"metric": "fleet.allocated_pct", "range": "30d"}],
               "range=30d, the overview's 4": [{"metric": k, "range": "30d"} for k in overview],
               "range=30d, bucket=1h": [{"metric": "fleet.allocated_pct", "range": "30d",
                                         "bucket": "1h"}],
               "range=24h, a tenant": [{"metric": "tenant.team3.gpus", "range": "24h"}]}
    print(f"\n{'query':<30}{'points':>8}{'best s':>8}{'median s':>10}{'CPU s':>8}"
          f"{'target s':>10}  verdict (target: {TARGET_S} s a request)")
    for label, asks in queries.items():
        walls, cpus, points = [], [], 0
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            for query in asks:
                response = client.get("/api/history", query)
                assert response.status_code == 200, response.content[:200]
                points = len(response.json()["t"])
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        best, median = min(walls), statistics.median(walls)
        target = TARGET_S * len(asks)
        print(f"{label:<30}{points:>8,}{best:>8.3f}{median:>10.3f}{statistics.median(cpus):>8.3f}"
              f"{target:>10.1f}  {'ok' if median < target else 'MISSED'}")


if __name__ == "__main__":
    main()
