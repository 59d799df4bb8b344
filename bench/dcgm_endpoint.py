"""Benchmark ``/metrics/dcgm`` on a 100,000-GPU inventory: the whole-cluster answer and one node.

Run: .venv/bin/python -m bench.dcgm_endpoint [--preset hyperscale-100k] [--hours 12] [--reuse]
     [--library]

Builds the preset into a throw-away SQLite database under ``bench/out/`` (``--reuse`` keeps a
previous one), runs the preset's engine for ``--hours`` simulated hours so gangs hold GPUs and
failures have struck, writes its placement and frame as the live state, then times
``GET /metrics/dcgm`` through Django's test client (middleware, access check, the inventory
read, the mapping and the writing; the body read to its end): the first request (it builds the
per-inventory label cache), the median of the next ones, and ``?hostname=``. ``--library`` also
times ``prometheus_client``'s own writer on the same readings, for comparison. Prints the
figures.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", default="hyperscale-100k")
    parser.add_argument("--hours", type=float, default=12.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--library", action="store_true")
    args = parser.parse_args()
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    db = out / f"dcgm-{args.preset}.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", "CLUSTERTWIN_INSECURE_DEMO": "1",
           "CLUSTERTWIN_ENGINE": "off", "DJANGO_SETTINGS_MODULE": "twin.config.settings"}
    env.pop("CLUSTERTWIN_CLUSTER", None)
    if not (args.reuse and db.exists()):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        for cmd in (["migrate", "-v0"], ["build_cluster", "--preset", args.preset]):
            subprocess.run([sys.executable, "manage.py", *cmd], cwd=ROOT, env=env, check=True,
                           stdout=subprocess.DEVNULL)
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from scheduler.live import live_frame, live_placement
    from scheduler.simulate import Scenario
    from twin import models as m
    from twin.inventory.selectors import dcgm_nodes_get
    from twin.live import selectors
    from twin.live.services import live_state_write
    from twin.metrics import dcgm
    from twin.metrics.collector import exposition

    cluster = m.Cluster.objects.get(name=args.preset) if m.Cluster.objects.filter(
        name=args.preset).exists() else m.Cluster.objects.order_by("-id").first()
    engine, _ = Scenario(preset=args.preset, days=max(1, int(args.hours // 24) + 1),
                         seed=0).engine()
    engine.run_until(args.hours * 3600.0)
    nodes = dcgm_nodes_get(cluster=cluster)
    assert len(nodes) == engine.state.node_up.size, "the preset's engine and inventory differ"
    placement, frame = live_placement(engine), live_frame(engine)
    live_state_write(seq=1, t_sim=engine.now, frame=json.loads(json.dumps(frame)), health="ok",
                     last_error="", speed=60.0, paused=False, inventory=f"bench:{cluster.pk}",
                     placement=json.loads(json.dumps(placement)))
    user, _ = get_user_model().objects.get_or_create(username="bench-dcgm")
    client = Client()
    client.force_login(user)

    def timed(path, **params):
        start = time.perf_counter()
        response = client.get(path, params)
        body = (b"".join(response.streaming_content) if response.streaming
                else response.content)
        assert response.status_code == 200, body[:200]
        return time.perf_counter() - start, body

    first, body = timed("/metrics/dcgm")
    warm = [timed("/metrics/dcgm")[0] for _ in range(args.repeat)]
    lines = body.count(b"\n") - 2 * len(dcgm.METRICS)
    gpus = lines // len(dcgm.METRICS)
    util = [line for line in body.splitlines() if line.startswith(b"DCGM_FI_DEV_GPU_UTIL{")]
    held = len({line.split(b'hpc_job="')[1].split(b'"')[0] for line in util
                if b"hpc_job" in line})
    print(f"{args.preset}: {engine.state.n_gpus:,} GPUs on {len(nodes):,} nodes at "
          f"t = {engine.now / 3600:.1f} h; {len(placement['jobs'])} gangs hold GPUs "
          f"({held} seen), {sum(b - a + 1 for a, b in placement['down'])} nodes down")
    print(f"GET /metrics/dcgm (whole cluster): {gpus:,} GPUs reported, {lines:,} series, "
          f"{len(body) / 1e6:.1f} MB")
    print(f"  first request (builds the label cache): {first:.2f} s")
    print(f"  next {args.repeat}: median {statistics.median(warm):.2f} s, "
          f"max {max(warm):.2f} s")
    host = nodes[len(nodes) // 2][0]
    one = [timed("/metrics/dcgm", hostname=host)[0] for _ in range(args.repeat)]
    print(f"GET /metrics/dcgm?hostname={host}: median {statistics.median(one) * 1e3:.0f} ms")
    if args.library:
        live = selectors.live_state_get()
        inv = dcgm.dcgm_inventory(cluster.name, nodes)
        readings = dcgm.dcgm_readings(inv, placement=live.placement, frame=live.frame)
        start = time.perf_counter()
        text = exposition(dcgm.DcgmCollector(inv, readings))
        print(f"prometheus_client's writer on the same readings: "
              f"{time.perf_counter() - start:.2f} s ({'same' if text == body else 'different'}"
              f" bytes)")


if __name__ == "__main__":
    main()
