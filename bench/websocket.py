"""Benchmark the live dashboard's WebSocket: N logged-in clients on ``/ws/twin/`` for ~30 s.

One worker: ``manage.py serve`` with the engine embedded (the ``make run`` shape). Two
workers: ``manage.py run_engine`` plus two ``manage.py serve`` processes joined by Redis
(``REDIS_URL``), the clients split between them. Every client connects at once (a server
restart: every dashboard reconnects) and records its handshake time. Every frame carries its
publish time (``sent_at``), so each client records delivery latency; it also records frame
sizes, the seqs it never got (lost) and the ``dropped`` counts the server reports. The
engine's pace is simulated seconds per wall second as seen in the frames. A logged-in page
load (GET /) is timed while the sockets stream. The load generator shares the machine: the
CPU seconds of every server process and of the clients are reported apart, for the connect
phase and the measured window, with the load average before and after.

Targets: every client connected, handshake p99 < 5 s, p99 delivery latency < 1 s, no frame
lost or dropped, frames < 100 kB, pace within 5 % of the speed-up. Run: .venv/bin/python -m
bench.websocket [--clients 500] [--preset P] [--workers 1|2] [--seconds 30] [--speed 60] [--runs 1]

``--storm``: against one daphne (engine embedded), ``--connects`` clients connect at the same
instant and each waits for its snapshot (lost: no handshake, or no snapshot, within 30 s; daphne
itself drops a handshake after 5 s); then ``--flood-clients`` clients that never read send
``resync`` for ``--flood-seconds``, half as fast as they can (closed with 4429), half at 4/s,
under the rate limit (closed with 4408 once their queued snapshots pass the limit). Reported:
lost connects, handshake times, the server's close codes (from its log) and its memory (RSS)
while flooded against before. Targets: no lost connect, RSS within 50 MB of the baseline. Run:
.venv/bin/python -m bench.websocket --storm [--connects 1000] [--flood-clients 10]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import http.client
import multiprocessing as mp
import os
import re
import resource
import statistics
import tempfile
import time
from pathlib import Path

import psutil

from bench.live_server import (
    database_prepare,
    engine_start,
    free_port,
    live_env,
    redis_reachable,
    serve_start,
    stop,
)
from bench.ws_client import dashboard_open, masked_frame, upgrade_request

TARGET_P99_S = 1.0
TARGET_HANDSHAKE_P99_S = 5.0
TARGET_FRAME_KB = 100.0
TARGET_FLOOD_MB = 50.0
_HEAD = re.compile(rb'^\{(?:"dropped":(\d+),)?"type":"(\w+)","seq":(\d+),"t":([-0-9.e+]+),'
                   rb'"sent_at":([0-9.e+]+)')


async def _client(port: int, cookie: str, at: float, start: float, end: float,
                  out: dict) -> None:
    await asyncio.sleep(max(0.0, at - time.time()))
    last = None  # the seq of the last message (snapshot or frame) before this one

    def message(opcode: int, head_bytes: bytes, length: int, now: float) -> None:
        nonlocal last
        head = _HEAD.match(head_bytes)
        if head is None:
            return
        seq = int(head[3])
        if head[2] != b"frame" or now < start or now > end:
            last = seq
            return
        if last is not None and seq > last + 1:
            out["lost"] += seq - last - 1
        last = seq
        out["latency"].append(now - float(head[5]))
        out["frames"] += 1
        out["max_bytes"] = max(out["max_bytes"], length)
        out["dropped"] += int(head[1] or 0)
        out["pace"].append((float(head[5]), float(head[4])))

    try:
        client, took = await dashboard_open(port, cookie, message, timeout=120)
    except Exception as exc:  # a failed client is counted, not fatal to the run
        out["errors"].append(f"{type(exc).__name__}: {exc}")
        return
    out["handshake_s"].append(took)
    out["connected"] += 1
    try:
        await asyncio.wait_for(client.closed, max(0.0, end - time.time()))
        out["errors"].append(f"closed by the server with {client.closed.result()}")
    except TimeoutError:
        pass
    except Exception as exc:
        out["errors"].append(f"{type(exc).__name__}: {exc}")
    finally:
        client.close()


def _client_process(ports: list[int], cookie: str, n: int, offset: int, connects: tuple,
                    start: float, end: float, results) -> None:
    """``n`` clients, the ``offset``-th first; ``connects``: (first time, spread s, clients in
    all): client ``j`` of all connects at ``first + j / clients * spread``."""
    first, spread, total = connects
    out = {"connected": 0, "latency": [], "frames": 0, "max_bytes": 0, "dropped": 0,
           "lost": 0, "pace": [], "errors": [], "handshake_s": []}

    async def window_start():
        await asyncio.sleep(max(0.0, start - time.time()))
        out["cpu_connect_s"] = _own_cpu_s()

    async def main():
        await asyncio.gather(window_start(), *(
            _client(ports[(offset + i) % len(ports)], cookie,
                    first + (offset + i) / total * spread, start, end, out)
            for i in range(n)))

    asyncio.run(main())
    out["cpu_s"] = _own_cpu_s() - out["cpu_connect_s"]
    out["pace"] = out["pace"][:: max(1, len(out["pace"]) // 200)]
    results.put(out)


def _first_frame(port: int, cookie: str, timeout: float) -> None:
    """Wait until the engine publishes (the embedded one starts on this first connection)."""
    async def wait():
        from websockets.asyncio.client import connect
        async with connect(f"ws://127.0.0.1:{port}/ws/twin/", origin=f"http://127.0.0.1:{port}",
                           additional_headers={"Cookie": f"sessionid={cookie}"},
                           compression=None, max_size=None) as ws:
            while True:
                head = _HEAD.match(await asyncio.wait_for(ws.recv(decode=False), timeout))
                if head is not None and head[2] == b"frame":
                    return
    asyncio.run(wait())


def _page_load(port: int, cookie: str, times: int = 10) -> tuple[list[float], int, int]:
    took, status, size = [], 0, 0
    for _ in range(times):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        t = time.perf_counter()
        conn.request("GET", "/", headers={"Cookie": f"sessionid={cookie}"})
        response = conn.getresponse()
        body = response.read()
        took.append(time.perf_counter() - t)
        status, size = response.status, len(body)
        conn.close()
        time.sleep(0.5)
    return took, status, size


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def _pct(values: list[float], q: float) -> float:
    return (v := sorted(values))[min(len(v) - 1, int(q * len(v)))] if values else float("nan")


def run(args) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="bench-ws-"))
    separate = args.workers == 2
    redis_url = args.redis_url or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    if separate and not redis_reachable(redis_url):
        raise SystemExit(f"--workers 2 needs Redis at {redis_url}")
    env = live_env(tmp / "db.sqlite3", mode="separate" if separate else "embedded",
                   redis_url=redis_url if separate else None, preset=args.preset,
                   speed=args.speed, frame_interval_s=args.frame_interval,
                   snapshot_interval_s=args.snapshot_interval)
    cookie = database_prepare(env)
    procs = {}
    try:
        if separate:
            procs["engine"] = engine_start(env, log=tmp / "engine.log")
        ports = [free_port() for _ in range(args.workers)]
        for i, port in enumerate(ports):
            procs[f"serve{i}"] = serve_start(env, port, log=tmp / f"serve{i}.log")
        t = time.perf_counter()
        _first_frame(ports[0], cookie, timeout=300)
        print(f"engine publishing after {time.perf_counter() - t:.1f} s "
              f"({args.preset}, x{args.speed:g}); logs in {tmp}")

        ramp = max(10.0, args.clients / 100) + args.connect_over
        connects = (time.time() + 1.0, args.connect_over, args.clients)
        start = time.time() + ramp
        end = start + args.seconds
        results: mp.Queue = mp.Queue()
        k = max(1, min(args.client_procs, args.clients))
        share = [args.clients // k + (i < args.clients % k) for i in range(k)]
        workers = [mp.Process(target=_client_process,
                              args=(ports, cookie, share[i], sum(share[:i]), connects,
                                    start, end, results)) for i in range(k)]
        load_before = os.getloadavg()
        cpu0 = {name: _cpu_s(p.pid) for name, p in procs.items()}
        for w in workers:
            w.start()
        time.sleep(max(0.0, start - time.time()))
        cpu1 = {name: _cpu_s(p.pid) for name, p in procs.items()}
        page, status, size = _page_load(ports[0], cookie)
        outs = [results.get(timeout=end - time.time() + 120) for _ in workers]
        cpu2 = {name: _cpu_s(p.pid) for name, p in procs.items()}
        load_after = os.getloadavg()
        for w in workers:
            w.join(30)
    finally:
        for proc in procs.values():
            stop(proc, timeout=60)
        for db in tmp.glob("db.sqlite3*"):  # snapshots of 10 MB each; the logs stay
            db.unlink()
    latency = [x for o in outs for x in o["latency"]]
    handshakes = [x for o in outs for x in o["handshake_s"]]
    pace_points = sorted(p for o in outs for p in o["pace"])
    pace = ((pace_points[-1][1] - pace_points[0][1]) / (pace_points[-1][0] - pace_points[0][0])
            if len(pace_points) > 1 and pace_points[-1][0] > pace_points[0][0] else float("nan"))
    errors = [e for o in outs for e in o["errors"]]
    return {
        "clients": args.clients, "workers": args.workers, "preset": args.preset,
        "connected": sum(o["connected"] for o in outs), "errors": errors,
        "handshake_p50_s": statistics.median(handshakes) if handshakes else float("nan"),
        "handshake_p99_s": _pct(handshakes, 0.99),
        "handshake_max_s": max(handshakes, default=float("nan")),
        "p50_s": statistics.median(latency) if latency else float("nan"),
        "p99_s": _pct(latency, 0.99), "max_s": max(latency, default=float("nan")),
        "frames_per_s_per_client": sum(o["frames"] for o in outs) / args.clients / args.seconds,
        "max_frame_kb": max(o["max_bytes"] for o in outs) / 1000.0,
        "dropped": sum(o["dropped"] for o in outs), "lost": sum(o["lost"] for o in outs),
        "pace": pace, "speed": args.speed,
        "page_p50_s": statistics.median(page), "page_max_s": max(page),
        "page_status": status, "page_kb": size / 1000.0,
        "cpu_connect_s": {n: cpu1[n] - cpu0[n] for n in procs},
        "cpu_window_s": {n: cpu2[n] - cpu1[n] for n in procs},
        "client_cpu_connect_s": sum(o["cpu_connect_s"] for o in outs),
        "client_cpu_window_s": sum(o["cpu_s"] for o in outs),
        "client_procs": len(outs), "ramp_s": ramp, "seconds": args.seconds,
        "connect_over_s": args.connect_over,
        "load_before": load_before, "load_after": load_after,
    }


def report(r: dict) -> None:
    ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
    how = (f"connecting over {r['connect_over_s']:g} s" if r["connect_over_s"]
           else "connecting at once")
    print(f"{r['clients']} clients {how}, {r['workers']} worker(s), {r['preset']}: "
          f"{r['connected']} connected, {len(r['errors'])} failed   target all: "
          f"{ok(r['connected'] == r['clients'])}")
    for e, n in collections.Counter(r["errors"]).most_common(5):
        print(f"  client error: {n} x {e[:160]}")
    print(f"  handshake p50 {r['handshake_p50_s'] * 1000:.0f} ms  p99 "
          f"{r['handshake_p99_s'] * 1000:.0f} ms  max {r['handshake_max_s'] * 1000:.0f} ms   "
          f"target p99 < {TARGET_HANDSHAKE_P99_S:g} s: "
          f"{ok(r['handshake_p99_s'] < TARGET_HANDSHAKE_P99_S)}")
    print(f"  delivery latency  p50 {r['p50_s'] * 1000:.0f} ms  p99 {r['p99_s'] * 1000:.0f} ms  "
          f"max {r['max_s'] * 1000:.0f} ms   target p99 < {TARGET_P99_S:g} s: "
          f"{ok(r['p99_s'] < TARGET_P99_S)}")
    print(f"  frames/s per client {r['frames_per_s_per_client']:.2f}   max frame "
          f"{r['max_frame_kb']:.1f} kB   target < {TARGET_FRAME_KB:g} kB: "
          f"{ok(r['max_frame_kb'] < TARGET_FRAME_KB)}")
    print(f"  frames lost (seqs a client never got) {r['lost']}, of which the server reported "
          f"dropped {r['dropped']}   target 0: {ok(r['lost'] == 0 and r['dropped'] == 0)}")
    print(f"  engine pace {r['pace']:.1f} simulated s per wall s (speed-up x{r['speed']:g}): "
          f"{ok(abs(r['pace'] / r['speed'] - 1) < 0.05)}")
    print(f"  GET / (logged in) p50 {r['page_p50_s'] * 1000:.0f} ms  max "
          f"{r['page_max_s'] * 1000:.0f} ms  (HTTP {r['page_status']}, {r['page_kb']:.1f} kB)")
    for phase, wall in (("connect", r["ramp_s"]), ("window", r["seconds"])):
        server = r[f"cpu_{phase}_s"]
        print(f"  CPU s in the {phase} phase ({wall:.0f} s wall): "
              + ", ".join(f"{k} {v:.1f}" for k, v in server.items())
              + f" (servers {sum(server.values()):.1f}); clients "
              f"{r[f'client_cpu_{phase}_s']:.1f} in {r['client_procs']} processes")
    print("  load average (1, 5, 15 min) before {:.2f} {:.2f} {:.2f}, after {:.2f} {:.2f} "
          "{:.2f}, on {} cores".format(*r["load_before"], *r["load_after"], os.cpu_count()))


# ----------------------------------------------------------------- --storm
async def _storm_client(port: int, cookie: str, start: float, hold_until: float,
                        out: dict) -> None:
    await asyncio.sleep(max(0.0, start - time.time()))
    first: asyncio.Future = asyncio.get_running_loop().create_future()

    def message(opcode: int, head: bytes, length: int, now: float) -> None:
        if not first.done():
            first.set_result((head, now))

    t = time.time()
    try:
        client, took = await dashboard_open(port, cookie, message, timeout=30)
    except Exception as exc:  # a lost connect is counted, not fatal to the run
        out["errors"].append(f"{type(exc).__name__}: {exc}"[:160])
        return
    try:
        out["handshake_s"].append(took)
        head, now = await asyncio.wait_for(first, 30)
        if not head.startswith(b'{"type":"snapshot"'):
            raise RuntimeError("the first message is not a snapshot")
        out["snapshot_s"].append(now - t)
        # keep reading frames until every client is in
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(client.closed, max(0.0, hold_until - time.time()))
    except Exception as exc:
        out["errors"].append(f"{type(exc).__name__}: {exc}"[:160])
    finally:
        client.close()


def _storm_process(port: int, cookie: str, n: int, start: float, hold_until: float,
                   results) -> None:
    out = {"handshake_s": [], "snapshot_s": [], "errors": []}

    async def main():
        await asyncio.gather(*(_storm_client(port, cookie, start, hold_until, out)
                               for _ in range(n)))

    asyncio.run(main())
    out["cpu_s"] = _own_cpu_s()
    results.put(out)


async def _flood_client(port: int, cookie: str, every_s: float, end: float) -> str:
    """Open a socket, then send resync every ``every_s`` (0: as fast as the socket takes
    them) and read nothing; returns how it ended."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(upgrade_request(port, cookie))
    if b" 101 " not in (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")[0]:
        return "refused"
    resync = masked_frame(0x1, b'{"type":"resync"}')
    try:
        while time.time() < end:
            writer.write(resync)
            await asyncio.wait_for(writer.drain(), max(0.1, end - time.time()))
            await asyncio.sleep(every_s)
    except (ConnectionError, TimeoutError):
        return "closed by the server"
    finally:
        writer.transport.abort()
    return "still open"


def _flood_process(port: int, cookie: str, rates: list[float], end: float, results) -> None:
    async def main():
        return await asyncio.gather(*(_flood_client(port, cookie, every, end)
                                      for every in rates))
    results.put(asyncio.run(main()))


def _rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def _rss_while(pid: int, until: float, every_s: float = 0.2) -> list[float]:
    samples = []
    while time.time() < until:
        samples.append(_rss_mb(pid))
        time.sleep(every_s)
    return samples


def storm(args) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="bench-ws-storm-"))
    # no engine snapshot in the run: its blob would read as growth, and its forked child holds
    # the server's sockets (a socket the server drops stays open until the child exits)
    env = live_env(tmp / "db.sqlite3", mode="embedded", preset=args.preset, speed=args.speed,
                   frame_interval_s=args.frame_interval, snapshot_interval_s=3600.0)
    env["LOG_LEVEL"] = "WARNING"  # the consumers log closes for 4408 and 4429 at WARNING
    cookie = database_prepare(env)
    port = free_port()
    log = tmp / "daphne.log"
    daphne = serve_start(env, port, log=log)
    try:
        t = time.perf_counter()
        _first_frame(port, cookie, timeout=300)
        print(f"engine publishing after {time.perf_counter() - t:.1f} s "
              f"({args.preset}, x{args.speed:g}); logs in {tmp}")
        rss_idle = statistics.median(_rss_while(daphne.pid, time.time() + 2))

        k = max(1, min(args.client_procs, args.connects))
        share = [args.connects // k + (i < args.connects % k) for i in range(k)]
        start = time.time() + 3.0  # every client process ready: one instant for all
        hold_until = start + 15.0  # then each client leaves once it has its snapshot
        results: mp.Queue = mp.Queue()
        procs = [mp.Process(target=_storm_process,
                            args=(port, cookie, share[i], start, hold_until, results))
                 for i in range(k)]
        load_before = os.getloadavg()
        cpu0 = _cpu_s(daphne.pid)
        for proc in procs:
            proc.start()
        rss_storm = max(_rss_while(daphne.pid, hold_until), default=float("nan"))
        outs = [results.get(timeout=120) for _ in procs]
        storm_cpu = _cpu_s(daphne.pid) - cpu0
        for proc in procs:
            proc.join(30)

        time.sleep(3.0)  # the storm's sockets are closed
        rss_base = statistics.median(_rss_while(daphne.pid, time.time() + 3))
        end = time.time() + 2.0 + args.flood_seconds
        rates = [0.0 if i % 2 == 0 else 0.25 for i in range(args.flood_clients)]
        flood_q: mp.Queue = mp.Queue()
        flooder = mp.Process(target=_flood_process, args=(port, cookie, rates, end, flood_q))
        flooder.start()
        flood_rss = _rss_while(daphne.pid, end + 2.0)
        endings = flood_q.get(timeout=60)
        flooder.join(30)
        rss_after = _rss_mb(daphne.pid)
    finally:
        stop(daphne, timeout=60)
        for db in tmp.glob("db.sqlite3*"):
            db.unlink()
    closes = collections.Counter(re.findall(r"closing a dashboard socket with (\d+)",
                                            log.read_text(errors="replace")))
    handshakes = [x for o in outs for x in o["handshake_s"]]
    snapshots = [x for o in outs for x in o["snapshot_s"]]
    return {
        "connects": args.connects, "preset": args.preset,
        "connected": len(handshakes), "snapshots": len(snapshots),
        "errors": [e for o in outs for e in o["errors"]],
        "handshake_p50_s": statistics.median(handshakes) if handshakes else float("nan"),
        "handshake_p99_s": _pct(handshakes, 0.99),
        "handshake_max_s": max(handshakes, default=float("nan")),
        "snapshot_p99_s": _pct(snapshots, 0.99),
        "rss_idle_mb": rss_idle, "rss_storm_mb": rss_storm, "rss_base_mb": rss_base,
        "rss_flood_peak_mb": max(flood_rss, default=float("nan")), "rss_after_mb": rss_after,
        "flood_clients": args.flood_clients, "flood_seconds": args.flood_seconds,
        "endings": collections.Counter(endings), "closes": dict(closes),
        "server_cpu_s": storm_cpu, "client_cpu_s": sum(o["cpu_s"] for o in outs),
        "storm_wall_s": hold_until - start + 3.0, "load_before": load_before,
    }


def storm_report(r: dict) -> None:
    ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
    lost = r["connects"] - r["snapshots"]
    print(f"{r['connects']} simultaneous connects to one daphne ({r['preset']}): "
          f"{r['connected']} handshakes, {r['snapshots']} snapshots, {lost} lost "
          f"({lost / r['connects'] * 100:.1f} %)   target 0: {ok(lost == 0)}")
    for e, n in collections.Counter(r["errors"]).most_common(5):
        print(f"  lost: {n} x {e}")
    print(f"  handshake p50 {r['handshake_p50_s'] * 1000:.0f} ms  p99 "
          f"{r['handshake_p99_s'] * 1000:.0f} ms  max {r['handshake_max_s'] * 1000:.0f} ms; "
          f"snapshot p99 {r['snapshot_p99_s'] * 1000:.0f} ms after the connect began")
    print(f"  CPU s over the storm ({r['storm_wall_s']:.0f} s wall): server "
          f"{r['server_cpu_s']:.1f}, clients {r['client_cpu_s']:.1f}; load average before "
          "{:.2f} {:.2f} {:.2f} on {} cores".format(*r["load_before"], os.cpu_count()))
    print(f"  daphne RSS: idle {r['rss_idle_mb']:.0f} MB, with the {r['connects']} sockets "
          f"{r['rss_storm_mb']:.0f} MB, after them {r['rss_base_mb']:.0f} MB")
    growth = r["rss_flood_peak_mb"] - r["rss_base_mb"]
    print(f"{r['flood_clients']} flood clients that never read, {r['flood_seconds']:g} s: "
          f"RSS peak {r['rss_flood_peak_mb']:.0f} MB, {growth:+.1f} MB over the baseline "
          f"{r['rss_base_mb']:.0f} MB (after: {r['rss_after_mb']:.0f} MB)   target < "
          f"{TARGET_FLOOD_MB:g} MB: {ok(growth < TARGET_FLOOD_MB)}")
    print("  clients: " + ", ".join(f"{n} {k}" for k, n in r["endings"].items())
          + "; server closes: " + (", ".join(f"{n} x {code}" for code, n in
                                             sorted(r["closes"].items())) or "none logged"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--preset", default="hyperscale-100k")
    parser.add_argument("--workers", type=int, choices=(1, 2), default=1)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=1, help="measure this many times")
    parser.add_argument("--connect-over", type=float, default=0.0,
                        help="spread the clients' connects evenly over this many s (0: all at "
                        "once, as dashboards reconnecting 1 s after a restart)")
    parser.add_argument("--speed", type=float, default=60.0)
    parser.add_argument("--frame-interval", type=float, default=1.0)
    parser.add_argument("--snapshot-interval", type=float, default=20.0,
                        help="wall s between engine snapshots (20: at least one in the window)")
    parser.add_argument("--client-procs", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--storm", action="store_true",
                        help="simultaneous connects, then flood clients (see above)")
    parser.add_argument("--connects", type=int, default=1000)
    parser.add_argument("--flood-clients", type=int, default=10)
    parser.add_argument("--flood-seconds", type=float, default=20.0)
    args = parser.parse_args()
    if args.storm:
        storm_report(storm(args))
    else:
        for _ in range(args.runs):
            report(run(args))


if __name__ == "__main__":
    main()
