"""Screenshots of the overview's incident panel after a leaf-switch drill, for docs/incidents.md.

For each preset (``noc-4k`` and ``hyperscale-100k`` by default): a throw-away database with
the preset's inventory and the demo accounts, ``manage.py serve`` (daphne with the embedded
engine: the ``make run`` shape), a staff login in Debian's Chromium (headless, through
Playwright), a ``leaf_switch`` drill through ``/api/drills`` on the leaf above the largest
running job, and once its incident is on the overview, a PNG of the incident panel at 1440 px
and one of the same panel at 390 px.
Also printed: the live frame's size (``/api/state``), the wall and CPU seconds of each step
(CPU: this process and its children, the server included).

Run: ``python -m bench.screenshots --out docs/img [--preset noc-4k --preset hyperscale-100k]``
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.live_server import free_port, live_env, manage, serve_start, stop
from bench.twin_browser import (
    busy_leaf,
    chromium_launch,
    cpu_s,
    csrf_token,
    log_in,
    until,
    wait_live,
)

PASSWORD = "bench-pass-123"
PRESETS = ("noc-4k", "hyperscale-100k")
MAX_PNG_BYTES = 300_000


def _shoot(preset: str, out: Path, tmp: Path, browser) -> None:
    env = live_env(tmp / "db.sqlite3", mode="embedded", preset=preset)
    env["CLUSTERTWIN_DEMO_PASSWORD"] = PASSWORD
    w0, c0 = time.perf_counter(), cpu_s()
    manage(env, "migrate", "--noinput")
    manage(env, "build_cluster", "--preset", preset, timeout=600)
    manage(env, "seed_demo")
    print(f"{preset}: database and inventory {time.perf_counter() - w0:.1f} s wall, "
          f"{cpu_s() - c0:.1f} s CPU", flush=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = serve_start(env, port, tmp / "daphne.log")
    try:
        w1 = time.perf_counter()
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        log_in(page, url, "staff", PASSWORD)
        wait_live(page, timeout_ms=600_000)
        print(f"{preset}: first frame {time.perf_counter() - w1:.1f} s wall after login",
              flush=True)

        def busy():
            util = page.request.get(url + "/api/state").json()["frame"]["util"]
            return util["allocated"] > util["gpus"] // 2
        until(busy, "half the GPUs allocated", 300)
        leaf = busy_leaf(page, url, preset)
        answer = page.request.post(url + "/api/drills", data={"kind": "leaf_switch",
                                                              "target": leaf},
                                   headers={"X-CSRFToken": csrf_token(page)})
        if answer.status != 202:
            raise SystemExit(f"{preset}: the drill was refused: {answer.text()}")
        drill = answer.json()["id"]

        def incident():
            found = page.request.get(url + "/api/incidents?state=open").json()["incidents"]
            return [i for i in found if i.get("drill_id") == drill]
        found = until(incident, "the drill's incident", 120)[0]
        print(f"{preset}: drill on leaf switch {leaf}: incident #{found['id']}, "
              f"{len(found['jobs'])} job(s) hit", flush=True)
        row = page.locator(f"#incidents-now tr[data-id='{found['id']}']")
        row.wait_for(timeout=60_000)
        page.wait_for_timeout(500)
        frame = page.request.get(url + "/api/state").json()["frame"]
        size = len(json.dumps(frame, separators=(",", ":")))
        print(f"{preset}: live frame {size:,} bytes (heatmaps "
              f"{len(json.dumps(frame['heatmaps'], separators=(',', ':'))):,})", flush=True)
        panel = out / f"incidents-{preset}.png"
        page.locator("#incidents-card").screenshot(path=str(panel))
        phone = out / f"incidents-{preset}-390.png"
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_timeout(500)
        page.locator("#incidents-card").screenshot(path=str(phone))
        context.close()
        for png in (panel, phone):
            n = png.stat().st_size
            flag = "" if n < MAX_PNG_BYTES else f"  OVER {MAX_PNG_BYTES:,} bytes"
            print(f"{preset}: wrote {png} ({n:,} bytes){flag}", flush=True)
        print(f"{preset}: served and shot in {time.perf_counter() - w1:.1f} s wall", flush=True)
    finally:
        stop(proc)
    print(f"{preset}: total {time.perf_counter() - w0:.1f} s wall, {cpu_s() - c0:.1f} s CPU "
          "(this process and the server)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("docs/img"))
    ap.add_argument("--preset", action="append",
                    help=f"repeatable; default: {', '.join(PRESETS)}")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = chromium_launch(p)
        try:
            for preset in args.preset or PRESETS:
                with tempfile.TemporaryDirectory() as tmp:
                    _shoot(preset, args.out, Path(tmp), browser)
        finally:
            browser.close()


if __name__ == "__main__":
    main()
