"""ECMP hash collisions against even spreading: a gang's share, step time and MFU on fat-trees.

Run: .venv/bin/python -m bench.ecmp_congestion [--seeds N] [--markdown] [--bins SEEDS]

For gangs of 256 to 16,384 GPUs placed from GPU 0 (topology-aware: whole leaves, whole pods) on
a radix-64 fat-tree at 1:1, 1:3 and 1:7 (``fat_tree(64, oversubscription=R)``: 32 / 48 / 56
GPUs and 32 / 16 / 8 uplinks per leaf), the gang's data-parallel rings (a 175B model at TP 8 x
PP 8, so ring neighbours sit 8 nodes apart and every ring flow leaves its leaf) are routed by
:class:`~scheduler.fabric.routing.Router` with ``balance="spread"`` (today's default: the ideal
of packet spraying / adaptive routing) and ``balance="ecmp"`` (each flow hashed onto one path;
the mean over ``--seeds`` hash seeds), and with ECMP over 4 queue pairs per connection
(``subflows=4``).  Each share prices the step with :func:`~scheduler.physics.step_time.
step_breakdown` (H100, 400 Gb/s NICs, MegaScale's recipe).  ``hot/mean`` is the busiest leaf
uplink's load over the mean of the sending leaves' uplinks (1 when spread evenly);
``E[max]/(K/M)`` is the balls-into-bins expectation of that ratio for one leaf's ``K`` flows
over its ``M`` uplinks (:func:`~scheduler.fabric.ecmp.expected_max_load`; a gang's busiest
link is the maximum over all its leaves and layers, so it exceeds it).  CPU seconds are
printed beside wall time.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from scheduler.fabric import fat_tree
from scheduler.fabric.ecmp import expected_max_load
from scheduler.fabric.routing import Router
from scheduler.hardware.catalog import get
from scheduler.physics.scaling_cases import COLUMNS, GPT_175B
from scheduler.physics.step_time import step_breakdown
from scheduler.workload.jobs import Parallelism, TrainingJob

H100 = get("H100-SXM")
NIC_GBPS = 400.0
GPN = 8
TP, PP = 8, 8
GANGS = (256, 1024, 4096, 16384)
RATIOS = (1, 3, 7)


def step(gpus: int, share: float):
    """The 175B step at ``gpus`` with ``share`` of the scale-out bandwidth."""
    col = COLUMNS["megascale"]
    job = TrainingJob(0, "175B", "t", 0.0, gpus, 1e21, params_b=175.0,
                      parallelism=Parallelism(TP, PP, gpus // (TP * PP)), transformer=GPT_175B,
                      recipe=replace(col.recipe, global_batch=max(768, gpus // 2),
                                     virtual_stages=6))
    return step_breakdown(job, H100, gpus_per_node=GPN, nodes=gpus // GPN, nic_gbps=NIC_GBPS,
                          scaleout_share=max(0.01, share), stragglers=col.stragglers)


def route(fabric, gpus: int, **kw):
    """Share and busiest-over-mean leaf uplink ratio of a gang on GPUs ``0 .. gpus-1``."""
    router = Router(fabric, gpus_per_node=GPN, **kw)
    res = router.update([np.arange(gpus)], NIC_GBPS, ring_stride=[TP * PP // GPN])
    up = fabric.link_kind == 0
    sending = np.unique(fabric.endpoint_leaf[:gpus])
    mine = up & np.isin(fabric.link_a, sending)
    load = res.link_load_gbps[mine, 0]
    return float(res.job_share[0]), float(load.max() / load.mean()), res.elapsed_s


def bins_check(seeds: int) -> None:
    """The busiest of one leaf's uplinks under ECMP against the exact balls-into-bins
    expectation: two leaves of a one-pod radix-64 fat-tree swap ``K`` line-rate flows (every
    GPU of one leaf sends to the other), ``seeds`` hash seeds, both leaves counted."""
    print(f"{'fabric':7} {'K':>3} {'M':>3} {'twin E[max]':>12} {'+-':>6} {'exact':>7} "
          f"{'twin/(K/M)':>10} {'exact/(K/M)':>11}")
    for ratio in RATIOS:
        f = fat_tree(64, pods=1, oversubscription=ratio)
        k, m = f.params["hosts_per_leaf"], f.params["leaf_uplinks"]
        up = [np.flatnonzero((f.link_kind == 0) & (f.link_a == leaf)) for leaf in (0, 1)]
        busiest = []
        for seed in range(seeds):
            res = Router(f, gpus_per_node=1, balance="ecmp", hash_seed=seed).update(
                [np.arange(2 * k)], 1.0, ring_stride=[k])
            busiest += [res.link_load_gbps[u, 0].max() for u in up]
        mean, se, exact = np.mean(busiest), np.std(busiest) / np.sqrt(len(busiest)), \
            expected_max_load(k, m)
        print(f"1:{ratio:<5} {k:3d} {m:3d} {mean:12.3f} {se:6.3f} {exact:7.3f} "
              f"{mean / (k / m):10.3f} {exact / (k / m):11.3f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="ECMP hash seeds averaged (3)")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--bins", type=int, metavar="SEEDS", default=0,
                    help="print only the balls-into-bins check over SEEDS hash seeds")
    args = ap.parse_args(argv)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    if args.bins:
        bins_check(args.bins)
        print(f"\nwall {time.perf_counter() - wall0:.1f} s, "
              f"CPU {time.process_time() - cpu0:.1f} s")
        return
    head = ("fabric", "GPUs", "K/M", "spread share", "step s", "MFU", "ECMP share", "step s",
            "MFU", "loss pp", "ECMP x4 share", "MFU", "hot/mean", "E[max]/(K/M)")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print(("{:7} {:>6} {:>6} " + "{:>9} " * 11).format(*head))
    routes = 0
    route_s = 0.0
    for ratio in RATIOS:
        fabric = fat_tree(64, oversubscription=ratio)
        k, m = fabric.params["hosts_per_leaf"], fabric.params["leaf_uplinks"]
        for gpus in GANGS:
            s_share, _, dt = route(fabric, gpus)
            e = [route(fabric, gpus, balance="ecmp", hash_seed=s) for s in range(args.seeds)]
            q = [route(fabric, gpus, balance="ecmp", hash_seed=s, subflows=4)
                 for s in range(args.seeds)]
            routes += 1 + 2 * args.seeds
            route_s += dt + sum(x[2] for x in e + q)
            e_share = float(np.mean([x[0] for x in e]))
            q_share = float(np.mean([x[0] for x in q]))
            hot = float(np.mean([x[1] for x in e]))
            sb, eb, qb = step(gpus, s_share), step(gpus, e_share), step(gpus, q_share)
            bins = expected_max_load(k, m) / (k / m)
            row = (f"1:{ratio}", f"{gpus:,}", f"{k}/{m}", f"{s_share:.3f}", f"{sb.total_s:.2f}",
                   f"{sb.mfu:.1%}", f"{e_share:.3f}", f"{eb.total_s:.2f}", f"{eb.mfu:.1%}",
                   f"{(sb.mfu - eb.mfu) * 100:+.1f}", f"{q_share:.3f}", f"{qb.mfu:.1%}",
                   f"{hot:.2f}", f"{bins:.2f}")
            if args.markdown:
                print("| " + " | ".join(row) + " |")
            else:
                print(("{:7} {:>6} {:>6} " + "{:>9} " * 11).format(*row))
    print("\nQP scaling on the 1:1 tree (Meta, SIGCOMM 2024: E-ECMP + QP scaling, up to +40 % "
          "AllReduce over baseline ECMP): mean ECMP share by queue pairs per connection")
    fabric = fat_tree(64)
    for gpus in (1024, 4096):
        share = {q: float(np.mean([route(fabric, gpus, balance="ecmp", hash_seed=s,
                                         subflows=q)[0] for s in range(args.seeds)]))
                 for q in (1, 2, 4, 16)}
        print(f"  {gpus:6,} GPUs: " + ", ".join(f"{q} QP {v:.3f}" for q, v in share.items())
              + f"; 16 over 1: {share[16] / share[1] - 1:+.0%}, 16 over 4: "
              f"{share[16] / share[4] - 1:+.0%}")
    print(f"\n{routes} routings, {route_s:.2f} s in Router.update; total wall "
          f"{time.perf_counter() - wall0:.1f} s, CPU {time.process_time() - cpu0:.1f} s")


if __name__ == "__main__":
    main()
