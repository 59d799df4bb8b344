"""Killed / survived / timeouts per mutated module, from mutmut's books under ``mutants/``.

Run after ``mutmut run`` (``make mutation`` does both)::

    .venv/bin/python -m mutation.summary               # the table
    .venv/bin/python -m mutation.summary --survivors   # and the name of every survivor

``mutmut show NAME`` prints a survivor's diff.  Never run ``mutmut apply``: it writes the
mutant into the real source tree.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

# mutmut's exit-code meanings (mutmut.stats.status_by_exit_code), copied so this script needs
# neither mutmut's config nor its import side effects
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests",
          34: "skipped", 35: "suspicious", 36: "timeout", 37: "type check", -24: "timeout",
          24: "timeout", 152: "timeout", 255: "timeout", -11: "segfault", -9: "segfault",
          None: "not checked"}
COLUMNS = ("killed", "survived", "timeout", "no tests", "suspicious", "not checked")


def status(code) -> str:
    return STATUS.get(code, "suspicious")


def load(root: Path) -> dict[str, dict[str, str]]:
    """``{module path: {mutant name: status}}`` for every mutated module under ``root``."""
    out = {}
    for meta in sorted(root.rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        module = str(meta.relative_to(root))[: -len(".meta")]
        out[module] = {k: status(v) for k, v in data["exit_code_by_key"].items()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path("mutants"))
    ap.add_argument("--survivors", action="store_true", help="list every surviving mutant")
    args = ap.parse_args(argv)
    books = {m: b for m, b in load(args.root).items() if b}  # skip modules with no mutants
    if not books:
        print(f"no mutmut results under {args.root}/: run `make mutation` first", file=sys.stderr)
        return 1
    width = max(len(m) for m in books) + 2
    print(f"{'module':<{width}}" + "".join(f"{c:>13}" for c in COLUMNS) + f"{'score':>8}")
    total: Counter = Counter()
    for module, by_name in books.items():
        n = Counter(by_name.values())
        total += n
        print(f"{module:<{width}}" + "".join(f"{n[c]:>13}" for c in COLUMNS) + f"{score(n):>8}")
    print(f"{'total':<{width}}" + "".join(f"{total[c]:>13}" for c in COLUMNS)
          + f"{score(total):>8}")
    if args.survivors:
        for by_name in books.values():
            for name, s in by_name.items():
                if s not in ("killed", "timeout"):
                    print(f"  {s:<12} {name}")
    return 0


def score(n: Counter) -> str:
    """Killed (timeouts count as killed, as mutmut does) over mutants that were run."""
    ran = n["killed"] + n["timeout"] + n["survived"] + n["suspicious"]
    return f"{100 * (n['killed'] + n['timeout']) / ran:.1f}%" if ran else "-"


if __name__ == "__main__":
    sys.exit(main())
