"""Benchmark the cluster generator: hyperscale-100k dry run, SQLite build, admin page time.

Run: .venv/bin/python -m bench.build_cluster [--preset hyperscale-100k] [--skip-db]
Prints wall-clock figures; writes into a throw-away SQLite database under bench/out/.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd, env):
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", default="hyperscale-100k")
    parser.add_argument("--skip-db", action="store_true")
    args = parser.parse_args()
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    db = out / "bench.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}"}
    py = sys.executable
    dry = timed([py, "manage.py", "build_cluster", "--preset", args.preset, "--dry-run"], env)
    print(f"build_cluster --preset {args.preset} --dry-run: {dry:.2f} s (process wall time)")
    if args.skip_db:
        return
    timed([py, "manage.py", "migrate", "-v0"], env)
    full = timed([py, "manage.py", "build_cluster", "--preset", args.preset], env)
    print(f"build_cluster --preset {args.preset} into SQLite: {full:.2f} s")
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.config.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from twin.models import Accelerator

    user, _ = get_user_model().objects.get_or_create(username="bench", is_staff=True,
                                                      is_superuser=True)
    client = Client()
    client.force_login(user)
    n = Accelerator.objects.count()
    times = []
    for page in (1, 2, 3, 50, 1000):
        start = time.perf_counter()
        response = client.get("/admin/twin/accelerator/", {"p": page})
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, (response.status_code, response.get("Location"))
    print(f"admin accelerator changelist over {n:,} rows: "
          + ", ".join(f"{t * 1000:.0f} ms" for t in times) + f" (max {max(times) * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
