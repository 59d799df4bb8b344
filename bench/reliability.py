"""How fast ``manage.py reliability`` answers (target: under 1 s), and the figures it gives.

Run: ``python -m bench.reliability [--repeat N]``.  Prints, per subcommand, the answer time
inside a Django process (first call, which imports scipy.optimize, and the best of the
others), then the wall time of whole ``manage.py`` processes beside ``manage.py version``,
the interpreter and Django start-up every command pays.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import time

CASES = {
    "mttf": ("mttf",),
    "interval": ("interval", "--checkpoint-s", "2.92", "--gpus", "16384"),
    "ettr": ("ettr", "--gpus", "16384", "--checkpoint-s", "2.92", "--interval", "3600",
             "--load-s", "2.92"),
    "ettr async": ("ettr", "--gpus", "131072", "--checkpoint-s", "1", "--persist-s", "300"),
}


def _process_s(args, env) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "manage.py", *args], env=env, capture_output=True,
                          text=True)
    if proc.returncode:
        raise SystemExit(f"manage.py {' '.join(args)} failed: {proc.stderr.strip()}")
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    env = {**os.environ, "CLUSTERTWIN_INSECURE_DEMO": "1"}
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.config.settings")
    import django
    django.setup()
    from django.core.management import call_command

    print(f"{'subcommand':<12}{'first s':>10}{'best s':>10}   (in-process answer, target < 1 s)")
    for name, argv in CASES.items():
        times = []
        for _ in range(max(2, args.repeat)):
            started = time.perf_counter()
            call_command("reliability", *argv, stdout=io.StringIO(), stderr=io.StringIO())
            times.append(time.perf_counter() - started)
        print(f"{name:<12}{times[0]:>10.4f}{min(times[1:]):>10.4f}")
    base = min(_process_s(("version",), env) for _ in range(3))
    print(f"\nmanage.py version (start-up only): {base:.2f} s")
    for name, argv in CASES.items():
        wall = min(_process_s(("reliability", *argv), env) for _ in range(3))
        print(f"manage.py reliability {name:<11} {wall:.2f} s (start-up + {wall - base:+.2f} s)")
    out = io.StringIO()
    call_command("reliability", *CASES["ettr"], stdout=out)
    print("\n" + out.getvalue())


if __name__ == "__main__":
    main()
