"""Run one benchmark on this tree and on an earlier commit, alternately, in one run.

Both sides run this tree's copy of the module (``python -m bench.NAME ARGS``; the benchmark
must work with the old commit's API too) in fresh processes, interleaved
(old, new, old, new ...) so machine load falls on both alike; the lines of each side's last run
are printed one under the other with each side's wall time per run.  The old commit is checked
out into a temporary git worktree (removed afterwards); it runs with this tree's interpreter.

Run: .venv/bin/python -m bench.side_by_side --ref HEAD~3 [--repeat 2] -- simulate --days 30
     .venv/bin/python -m bench.side_by_side --ref 2305e67 -- placement
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(tree: Path, module: str, args: list[str]) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", f"bench.{module}", *args], cwd=tree, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"bench.{module} failed in {tree}:\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", required=True, help="the earlier commit (any git revision)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per side (default 1)")
    ap.add_argument("module", help="benchmark module under bench/, e.g. simulate")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the benchmark")
    opts = ap.parse_args()
    if opts.repeat < 1:
        ap.error("--repeat must be at least 1")
    args = [a for a in opts.args if a != "--"]
    sha = subprocess.run(["git", "rev-parse", "--short", opts.ref], cwd=ROOT, text=True,
                         capture_output=True)
    if sha.returncode != 0:
        ap.error(f"--ref {opts.ref!r} is not a commit of this repository")
    with tempfile.TemporaryDirectory(prefix="clustertwin-old-") as tmp:
        old = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(old), opts.ref], cwd=ROOT,
                       check=True, capture_output=True)
        shared = ROOT.parent / "shared"  # the design, figures and traces sit beside the tree
        if shared.is_dir():
            (Path(tmp) / "shared").symlink_to(shared)
        # the same benchmark code on both sides (a new benchmark may not exist back then)
        shutil.copy2(ROOT / "bench" / f"{opts.module}.py", old / "bench" / f"{opts.module}.py")
        try:
            walls: dict[str, list[float]] = {"old": [], "new": []}
            outs: dict[str, str] = {}
            for i in range(opts.repeat):
                for side, tree in (("old", old), ("new", ROOT)):
                    print(f"[{i + 1}/{opts.repeat}] {side} ...", file=sys.stderr, flush=True)
                    wall, out = _run(tree, opts.module, args)
                    walls[side].append(wall)
                    outs[side] = out
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT,
                           capture_output=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                          capture_output=True).stdout.strip()
    for side, label in (("old", f"old ({sha.stdout.strip()})"), ("new", f"new ({head}+tree)")):
        print(f"===== {label}: bench.{opts.module} {' '.join(args)}")
        print(outs[side].rstrip())
    print("===== process wall seconds per run")
    for side in ("old", "new"):
        w = walls[side]
        print(f"{side}: " + ", ".join(f"{x:.1f}" for x in w)
              + f"  (median {statistics.median(w):.1f})")


if __name__ == "__main__":
    main()
