"""Time the reading part of one mirror poll of a 100k-GPU cluster. Target for the whole poll,
applying to the twin included: < 2 s; this prints the reading part.

Run: .venv/bin/python -m bench.mirror_poll [PATH] [--repeat 3]

PATH holds a recording written by ``bench.mirror_fixtures`` (``sinfo.json``, ``squeue.json``,
``prom_query.json``); without PATH one is written to a temporary folder first (13,000 nodes of
8 GPUs, 10,000 jobs).  Each step is timed from the bytes a command or Prometheus would hand
over (files read before timing) to the parsed view: JSON decoding plus parsing, the best of
``--repeat`` runs.  :func:`recording` gives the parsed views to other benchmarks.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.mirror_fixtures import METRICS, write
from twin.mirror.errors import json_load
from twin.mirror.prom_source import PromView, parse_prom
from twin.mirror.slurm_source import SlurmView, parse_sinfo, parse_squeue


def recording(path: Path | str, *, read_at: float | None = None) -> tuple[SlurmView, PromView]:
    """The Slurm and Prometheus views of the recording in ``path``, as one poll gives them.

    ``read_at`` defaults to the time of the recording (the Prometheus samples' timestamp).
    """
    path = Path(path)
    def load(name: str):
        return json_load((path / name).read_bytes(), source="recording", what=name)

    nodes, partitions = parse_sinfo(load("sinfo.json"))
    jobs = parse_squeue(load("squeue.json"))
    prom = parse_prom(load("prom_query.json"), metrics=METRICS, expect_hosts=nodes)
    at = read_at if read_at is not None else prom.eval_time or 0.0
    prom.read_at = at
    slurm = SlurmView(nodes=nodes, partitions=partitions, jobs=jobs, accounting=False,
                      read_at=at, source="cli",
                      accounting_note="a recording: squeue's finished jobs only")
    return slurm, prom


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, nargs="?")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.path
        if path is None:
            path = Path(tmp)
            t0 = time.perf_counter()
            counts = write(path, names=[f"gpu-{i:05d}" for i in range(13_000)])
            print(f"wrote a recording in {time.perf_counter() - t0:.1f} s: "
                  + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
        raw = {name: (path / name).read_bytes()
               for name in ("sinfo.json", "squeue.json", "prom_query.json")}
        total = 0.0
        steps = (("sinfo", "sinfo.json", lambda d: parse_sinfo(d)),
                 ("squeue", "squeue.json", lambda d: parse_squeue(d)),
                 ("prom", "prom_query.json", lambda d: parse_prom(d, metrics=METRICS)))
        for label, name, parse in steps:
            t_json, doc = _best(lambda name=name: json_load(raw[name], source="bench",
                                                            what=name), args.repeat)
            t_parse, out = _best(lambda doc=doc, parse=parse: parse(doc), args.repeat)
            total += t_json + t_parse
            size = len(out[0]) if label == "sinfo" else len(out)
            what = {"sinfo": "nodes", "squeue": "jobs", "prom": "GPUs"}[label]
            print(f"{label} parse: {t_json + t_parse:.3f} s (JSON {t_json:.3f} s of "
                  f"{len(raw[name]) / 1e6:.1f} MB, parse {t_parse:.3f} s) -> {size:,} {what}")
        print(f"reading total: {total:.3f} s (the whole poll's target, applying included: 2 s)")


if __name__ == "__main__":
    main()
