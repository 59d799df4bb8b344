"""Entity history at noc-4k's and hyperscale-100k's sizes: one sample's reduction, its packed
size, writing it, and reading one node's (and one job's) 30-day series back (issue 27).

Run: .venv/bin/python -m bench.entity_history [--days 30] [--preset noc-4k hyperscale-100k]
     [--jobs 1500] [--repeat 5]

Per preset, on arrays of its plan's size (no engine is built: a 100,000-GPU engine takes
minutes here): the reductions of :mod:`scheduler.physics.entity_figures` from per-GPU columns
(node and rack utilisation and allocation, node power, switch load, job figures), the packed
bytes of one sample (and what the same as a JSON object of one key per figure would take),
``twin.live.entity_history.record`` of one sample, the fold of :data:`CHUNK_SAMPLES` samples
into chunks, and ``series`` of one node's and one job's last 30 days (the picker's longest
range: at most 1,000 bucketed points) and last 24 hours, in a scratch SQLite database.  A
month of samples (8,640 at the 300 s step) is written as ``record`` writes them (rows of
packed arrays, eight distinct samples taking turns) and folded as ``record`` folds them.
Every figure is the wall time beside the process's CPU time (``time.process_time``): the
machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def timed(fn, repeat: int = 1):
    """``(result, best wall s, median CPU s)`` of ``repeat`` calls of ``fn``."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return out, min(walls), statistics.median(cpus)


def line(label: str, wall: float, cpu: float, extra: str = "") -> None:
    print(f"  {label:<44}{wall:>9.4f}{cpu:>9.4f}  {extra}")


def synthetic(plan, n_jobs: int, rng):
    """Per-GPU columns of a busy fleet: up to ``n_jobs`` gangs of 8-256 GPUs side by side."""
    from scheduler.physics.entity_figures import gpu_demand_w

    n = plan.n_gpus
    owner = np.full(n, -1, dtype=np.int64)
    sizes = rng.choice([8, 8, 8, 16, 16, 32, 64, 256], n_jobs)
    at = 0
    for j, size in enumerate(sizes):
        if at + size > n:
            break
        owner[at:at + size] = j
        at += int(size)
    util = np.where(owner >= 0, rng.uniform(0.5, 0.95, n_jobs + 1)[owner], 0.0)
    gpu_node = plan.gpu_node().astype(np.int64)
    gpu_model = plan.node_model[gpu_node]
    demand = gpu_demand_w(plan.models, gpu_model, util)
    rack_kw = np.bincount(plan.node_rack[gpu_node], weights=demand, minlength=plan.n_racks) / 1e3
    link_util = rng.uniform(0.0, 0.8, plan.fabric.link_a.size)
    return owner, util, gpu_node, demand, rack_kw, link_util


def reduce(plan, owner, util, gpu_node, demand, rack_kw, link_util, t: float):
    from scheduler.physics import entity_figures as ef

    held = owner >= 0
    nodes = ef.holder_figures(gpu_node, plan.n_nodes, util, held)
    racks = ef.holder_figures(plan.node_rack[gpu_node], plan.n_racks, util, held)
    node_w = np.bincount(gpu_node, weights=demand, minlength=plan.n_nodes)
    nodes["power_kw"] = ef.node_power_kw(plan.node_rack, node_w, rack_kw)
    outlet = 24.0 + 12.0 * rack_kw / np.maximum(plan.rack_power_kw, 1.0)
    nodes["temp_c"] = outlet[plan.node_rack]
    racks.update(power_kw=rack_kw, temp_c=outlet)
    f = plan.fabric
    names = {j: f"job-{j:05d}" for j in np.unique(owner[owner >= 0]).tolist()}
    mfu = {j: 0.4 for j in names}
    return ef.EntitySample(t=t, kinds={
        "node": ef.Figures(nodes), "rack": ef.Figures(racks),
        "switch": ef.Figures(ef.switch_load(f.link_a, f.link_b, f.n_switches(), link_util)),
        "job": ef.job_figures(owner, util, names, mfu)})


def bench_preset(name: str, args) -> None:
    from django.utils import timezone

    from scheduler.presets import get_preset
    from twin.live import entity_codec, entity_history
    from twin.live.models import EntityChunk, EntitySample

    plan = get_preset(name).plan()
    rng = np.random.default_rng(27)
    print(f"\n{name}: {plan.n_gpus:,} GPUs, {plan.n_nodes:,} nodes, {plan.n_racks:,} racks, "
          f"{plan.fabric.n_switches():,} switches, {args.jobs:,} gangs asked for")
    print(f"  {'':<44}{'wall s':>9}{'CPU s':>9}")
    columns = synthetic(plan, args.jobs, rng)
    sample, wall, cpu = timed(lambda: reduce(plan, *columns, t=0.0), args.repeat)
    values = sum(v.size for f in sample.kinds.values() for v in f.columns.values())
    line("reduce per-GPU columns to entities", wall, cpu,
         f"{values:,} figures, {len(sample.kinds['job'].ids):,} jobs")
    size, wall, cpu = timed(lambda: entity_codec.packed_bytes(sample), args.repeat)
    as_json = len(json.dumps({f"{k}.{i}.{m}": round(float(x), 2)
                              for k, f in sample.kinds.items() for m, v in f.columns.items()
                              for i, x in enumerate(v)}))
    line("pack one sample", wall, cpu, f"{size:,} bytes ({size / values:.2f} a figure; as "
                                       f"JSON {as_json:,} bytes)")
    run = f"bench-{name}"
    step = 300.0
    n = int(args.days * 86400 / step)
    variants = [reduce(plan, *synthetic(plan, args.jobs, rng), t=0.0) for _ in range(8)]
    packed = [[(kind, *entity_codec.pack_figures(f)) for kind, f in v.kinds.items()]
              for v in variants]
    _, wall, cpu = timed(lambda: entity_history.record(run=run, sample=variants[0]))
    line("record one sample (pack + insert)", wall, cpu)
    print(f"  writing {n:,} samples ({args.days:g} days every {step:g} s) …", flush=True)
    EntitySample.objects.filter(run=run).delete()
    folds = []
    now = timezone.now()
    t0, c0 = time.perf_counter(), time.process_time()
    for start in range(0, n, entity_history.CHUNK_SAMPLES):
        rows = [EntitySample(run=run, kind=kind, t_sim=i * step, recorded_at=now,
                             metrics=metrics, ids=ids, data=data)
                for i in range(start, min(n, start + entity_history.CHUNK_SAMPLES))
                for kind, metrics, ids, data in packed[i % len(packed)]]
        EntitySample.objects.bulk_create(rows, batch_size=500)
        if start + entity_history.CHUNK_SAMPLES < n:  # the newest samples stay unfolded
            folds.append(timed(lambda: entity_history.fold(run))[1:])
    line(f"write and fold the month ({len(folds)} folds)", time.perf_counter() - t0,
         time.process_time() - c0,
         f"{EntityChunk.objects.filter(run=run).count():,} chunks")
    line("one fold (median)", statistics.median(w for w, _ in folds),
         statistics.median(c for _, c in folds))
    entity_history.forget_process_cache()
    end = (n - 1) * step
    node = plan.n_nodes // 2
    job = sample.kinds["job"].ids[len(sample.kinds["job"].ids) // 2]
    for label, kind, entity, span in (("one node, 30 days", "node", node, 30 * 86400.0),
                                      ("one node, 24 hours", "node", node, 86400.0),
                                      ("one rack, 30 days", "rack", 1, 30 * 86400.0),
                                      ("one job, 30 days", "job", job, 30 * 86400.0)):
        got, wall, cpu = timed(lambda k=kind, e=entity, s=span: entity_history.series(
            run=run, kind=k, entity=e, metric="util_pct", t_from=end - s, t_to=end),
            args.repeat)
        line(f"read {label}", wall, cpu,
             f"{sum(got['n']):,} samples in {len(got['t']):,} points")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--preset", nargs="+", default=["noc-4k", "hyperscale-100k"])
    ap.add_argument("--jobs", type=int, default=1500)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    os.environ.update(DATABASE_URL=f"sqlite:///{tmp / 'entities.sqlite3'}",
                      DJANGO_SETTINGS_MODULE="twin.config.settings", CLUSTERTWIN_INSECURE_DEMO="1",
                      CLUSTERTWIN_ENGINE="off")
    import django
    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    for name in args.preset:
        bench_preset(name, args)
    size = (tmp / "entities.sqlite3").stat().st_size
    print(f"\ndatabase: {size / 1e6:,.1f} MB for {len(args.preset)} month(s) of samples")


if __name__ == "__main__":
    main()
