"""Benchmark ``export_topology``: every format from the hyperscale-100k inventory in SQLite.

Run: .venv/bin/python -m bench.export_topology [--preset hyperscale-100k] [--repeat 3]
Builds the preset into a throw-away SQLite database in a temporary directory (a minute or two
for hyperscale-100k), then times each export in this process (queries, formatting and the
atomic write; the fastest of ``--repeat`` runs) against the target of 5 s.
"""

import argparse
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", default="hyperscale-100k")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="export-topology-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{work / 'bench.sqlite3'}"}
        py = sys.executable
        start = time.perf_counter()
        subprocess.run([py, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        subprocess.run([py, "manage.py", "build_cluster", "--preset", args.preset], cwd=ROOT,
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"built {args.preset} into SQLite in {time.perf_counter() - start:.1f} s")
        os.environ.update(env)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.config.settings")
        import django

        django.setup()
        from django.core.management import call_command

        from twin.inventory.topology_export import FORMATS

        worst = 0.0
        for fmt in FORMATS:
            out = work / fmt / ("topology.yaml" if fmt == "k8s" else "topology.conf")
            out.parent.mkdir()
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                call_command("export_topology", "--format", fmt, "--out", str(out),
                             stdout=io.StringIO())
                times.append(time.perf_counter() - start)
            best = min(times)
            worst = max(worst, best)
            sizes = ", ".join(f"{p.name} {p.stat().st_size / 1e6:.2f} MB"
                              for p in sorted(out.parent.iterdir()))
            verdict = "ok" if best < TARGET_S else "OVER TARGET"
            print(f"export_topology --format {fmt}: {best:.2f} s (target < {TARGET_S:g} s, "
                  f"{verdict}; runs {', '.join(f'{t:.2f}' for t in times)}); {sizes}")
        if worst >= TARGET_S:
            sys.exit(1)


if __name__ == "__main__":
    main()
