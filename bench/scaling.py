"""MFU against scale: the step model beside MegaScale's published scaling tables.

Run: .venv/bin/python -m bench.scaling [--markdown]

Prints, for MegaScale Table 2 (175B, strong scaling) and Figure 9 (530B, weak scaling), each
row's published and twin MFU for both columns (Megatron-LM, the "unoptimised" configuration,
and MegaScale), the error, whether the row was fitted, and the tolerance; then the loss from
the smallest to the largest scale of each column, the batch-size effect (1,024 GPUs at batch
768 against 3,072 at 6,144) and the overlap ablation of Table 3 (256 GPUs, batch 256).  With
``--markdown`` the rows come out as the validation fragment (docs/validation.md format).
CPU seconds are printed beside wall time.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from scheduler.physics.scaling_cases import (
    COLUMNS,
    FIGURE9,
    ROW_TOLERANCE,
    TABLE2,
    TREND_TOLERANCE,
    Row,
    step,
)
from scheduler.physics.step_time import no_overlap


def rows(table) -> list[tuple]:
    """``(row, column, published, twin)`` for every row and column of ``table``."""
    return [(r, c, r.mfu[c], step(r, c).mfu) for r in table for c in COLUMNS]


def trend(table, column: str) -> tuple[float, float]:
    """Published and twin loss (points of MFU, fractions) from the first to the last row."""
    first, last = table[0], table[-1]
    return (first.mfu[column] - last.mfu[column],
            step(first, column).mfu - step(last, column).mfu)


def ablation() -> list[tuple[str, float]]:
    """Twin MFU along Table 3's overlap steps (256 GPUs, batch 256, MegaScale's profile)."""
    base = Row("Table 3", "175B", 256, 256, {})
    col = COLUMNS["megascale"]
    steps = (("no overlap", no_overlap(col.recipe)),
             ("+ TP overlap", replace(no_overlap(col.recipe), tp_overlap=1.0)),
             ("+ PP overlap", replace(no_overlap(col.recipe), tp_overlap=1.0, pp_overlap=True)),
             ("+ DP overlap", col.recipe))
    return [(name, step(base, replace(col, recipe=recipe)).mfu) for name, recipe in steps]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the validation fragment")
    args = ap.parse_args(argv)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    if args.markdown:
        print("| figure | GPUs | batch | column | published MFU | twin | error | tolerance "
              "| fitted? |")
        print("|---|---|---|---|---|---|---|---|---|")
    else:
        print(f"{'figure':9} {'model':5} {'GPUs':>6} {'batch':>6} {'column':12} "
              f"{'published':>9} {'twin':>6} {'error':>7}  status")
    for table in (TABLE2, FIGURE9):
        for r, c, pub, twin in rows(table):
            fitted = r.fitted(c)
            err = twin - pub
            ok = "fitted" if fitted else ("ok" if abs(err) <= ROW_TOLERANCE else "OUTSIDE")
            if args.markdown:
                print(f"| MegaScale {r.table} ({r.model}) | {r.gpus:,} | {r.batch:,} | "
                      f"{COLUMNS[c].name} | {pub:.1%} | {twin:.1%} | {err * 100:+.1f} pp | "
                      f"{'-' if fitted else '±5 pp'} | {'**yes** (jitter)' if fitted else 'no'}"
                      " |")
            else:
                print(f"{r.table:9} {r.model:5} {r.gpus:6d} {r.batch:6d} {COLUMNS[c].name:12} "
                      f"{pub:9.1%} {twin:6.1%} {err * 100:+6.1f}pp  {ok}")
    print()
    for label, table in (("Table 2 (256 -> 12,288)", TABLE2), ("Figure 9 (2,240 -> 11,200)",
                                                               FIGURE9)):
        for c in COLUMNS:
            pub, twin = trend(table, c)
            ok = "ok" if abs(twin - pub) <= TREND_TOLERANCE else "OUTSIDE"
            print(f"loss {label:27} {COLUMNS[c].name:12} published {pub * 100:5.1f} pp, "
                  f"twin {twin * 100:5.1f} pp, error {(twin - pub) * 100:+5.1f} pp  {ok}")
    small, large = TABLE2[3], TABLE2[4]
    for c in COLUMNS:
        pub = large.mfu[c] - small.mfu[c]
        twin = step(large, c).mfu - step(small, c).mfu
        print(f"batch 768 @1,024 -> 6,144 @3,072 {COLUMNS[c].name:12} published "
              f"{pub * 100:+5.1f} pp, twin {twin * 100:+5.1f} pp")
    t3 = Row("Table 3", "175B", 256, 256, {})
    lamb = step(TABLE2[0], "megascale").mfu - step(t3, "megascale").mfu
    print(f"Table 3 LAMB step, batch 256 -> 768 on 256 GPUs, MegaScale: published +3.0 pp, "
          f"twin {lamb * 100:+.1f} pp")
    print(f"Table 3 baseline (Megatron-LM, 256 GPUs, batch 256): published 47.7 %, "
          f"twin {step(t3, 'megatron').mfu:.1%}")
    print("Table 3 overlap steps (256 GPUs, batch 256; published 53.3 -> 55.5 -> 58.0 -> 59.5 %,"
          " +6.2 pp):")
    for name, mfu in ablation():
        print(f"  {name:14} {mfu:6.1%}")
    print(f"\nwall {time.perf_counter() - wall0:.3f} s, CPU {time.process_time() - cpu0:.3f} s")


if __name__ == "__main__":
    main()
