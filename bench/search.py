"""Search at a preset's scale: CPU and wall seconds of one query, for a few kinds of query.

Builds the preset's inventory into a throw-away SQLite database (two to three minutes for
hyperscale-100k: 101,120 GPUs, 217,856 links), or reuses one (``--database PATH``: built
there when the file does not exist, kept afterwards), then times
:func:`twin.pages.search.search` as the search page calls it (the live engine's placement
and frame absent: they add a few hundred names matched in memory) for a hostname substring,
a number, a switch name, a rack name, a GPU serial, the log's words, one letter (every row
matches: the counts stop at the cap) and a name nothing holds (every column scanned).  Each
query runs ``--repeat`` times; the first (cold: SQLite's page cache, the id maps) and the
best of the rest are printed with CPU seconds beside wall time, and the hits per kind.
``python -m bench.search [--preset hyperscale-100k] [--database PATH] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = (
    ("hostname substring", "n0123"),
    ("a number", "4711"),
    ("a switch name", "leaf-00042"),
    ("a rack name", "rack-0123"),
    ("a GPU serial", "H200-SXM-hyperscale-100k-09"),
    ("in the log's words", "leaf 10"),
    ("one letter", "e"),
    ("no match (full scans)", "zq9"),
)


def _build(preset: str, db: Path, env: dict) -> None:
    py = sys.executable
    start = time.perf_counter()
    subprocess.run([py, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run([py, "manage.py", "build_cluster", "--preset", preset], cwd=ROOT, env=env,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"built {preset} into {db} in {time.perf_counter() - start:.1f} s wall")


def _timed(fn) -> tuple[float, float, object]:
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c0, time.perf_counter() - w0, out


def run(db: Path, preset: str, repeat: int) -> None:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", "CLUSTERTWIN_ENGINE": "off",
           "CLUSTERTWIN_INSECURE_DEMO": "1"}
    if not db.exists():
        _build(preset, db, env)
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.config.settings")
    import django

    django.setup()
    from twin.live.selectors import cluster_current
    from twin.pages.search import search

    cluster = cluster_current()
    print(f"{cluster.name}: search, CPU s / wall s per query (first, then best of "
          f"{max(0, repeat - 1)} more)")
    for label, q in QUERIES:
        runs = [_timed(lambda q=q: search(cluster=cluster, placement=None, frame=None, q=q))
                for _ in range(max(1, repeat))]
        cpu0, wall0, groups = runs[0]
        rest = runs[1:] or runs
        cpu, wall = min(r[0] for r in rest), min(r[1] for r in rest)
        hits = ", ".join(f"{g.kind} {len(g.hits)}{'+' if g.more else ''}" for g in groups
                         if g.hits)
        print(f"  {label:<22} {q!r:<32} first {cpu0:.3f} CPU s ({wall0:.3f} wall), "
              f"then {cpu:.3f} CPU s ({wall:.3f} wall)  [{hits or 'no hits'}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="hyperscale-100k")
    ap.add_argument("--database", type=Path, default=None,
                    help="SQLite file to reuse (built there if missing)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.database is not None:
        run(args.database.resolve(), args.preset, args.repeat)
        return
    with tempfile.TemporaryDirectory(prefix="search-bench-") as tmp:
        run(Path(tmp) / "bench.sqlite3", args.preset, args.repeat)


if __name__ == "__main__":
    main()
