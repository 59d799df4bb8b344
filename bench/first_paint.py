"""First paint of every page with the 100k-GPU twin running (issue 16: under 1.5 s).

A throw-away database with ``hyperscale-100k`` (or ``--preset``), the demo accounts,
``manage.py serve`` (daphne, the engine started with the server: the ``make run`` shape);
Debian's Chromium through Playwright
logs in as staff and opens every page ``--repeat`` times.  Reported per page (median): the
server's response time (``responseStart``), first contentful paint (the browser's own
``paint`` entry) and, for the live pages, the time until the first frame has filled the
counters.  Run: ``python -m bench.first_paint [--preset hyperscale-100k] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.live_server import free_port, live_env, manage, serve_start, stop

TARGET_S = 1.5
PASSWORD = "bench-pass-123"
FCP_JS = """() => new Promise(done => {
  const nav = performance.getEntriesByType('navigation')[0];
  new PerformanceObserver(list => {
    const fcp = list.getEntriesByName('first-contentful-paint');
    if (fcp.length) done([nav.responseStart, fcp[0].startTime]);
  }).observe({type: 'paint', buffered: true});  // paint entries come only through an observer
  setTimeout(() => done([nav.responseStart, null]), 5000);
})"""
LIVE = "() => { const e = document.getElementById('gpus-allocated'); " \
       "return !e || e.textContent !== '–'; }"


def _pages(state: dict) -> list[tuple[str, str]]:
    running = state.get("running_jobs") or []
    first = running[0] if running else None
    job = first.get("name") if isinstance(first, dict) else first
    pages = [("overview", "/"), ("topology", "/topology/"), ("jobs", "/jobs/"),
             ("failures", "/failures/"), ("events", "/events/"), ("alerts", "/alerts/"),
             ("what-if", "/whatif/"), ("studies", "/studies/"), ("drills", "/drills/"),
             ("search", "/search/?q=gpu"), ("node", "/nodes/0/"), ("switch", "/switches/0/"),
             ("tenant", "/tenants/research/")]
    if job:
        pages.append(("job", f"/jobs/{job}/"))
    return pages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="hyperscale-100k")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = live_env(tmp / "db.sqlite3", mode="embedded", preset=args.preset)
        env["CLUSTERTWIN_DEMO_PASSWORD"] = PASSWORD
        t0 = time.perf_counter()
        manage(env, "migrate", "--noinput")
        manage(env, "build_cluster", "--preset", args.preset, timeout=600)
        manage(env, "seed_demo")
        print(f"{args.preset}: database and inventory in {time.perf_counter() - t0:.1f} s",
              flush=True)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = serve_start(env, port, tmp / "daphne.log")
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                            args=["--headless", "--no-sandbox",
                                                  "--disable-gpu"])
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.goto(url + "/accounts/login/")
                page.fill("input[name=username]", "staff")
                page.fill("input[name=password]", PASSWORD)
                page.click("button[type=submit]")
                page.wait_for_url(url + "/")
                t1 = time.perf_counter()
                page.wait_for_function(LIVE, timeout=600_000)
                print(f"engine's first frame on the overview {time.perf_counter() - t1:.1f} s "
                      "after login", flush=True)
                cookies = {c["name"]: c["value"] for c in page.context.cookies()}
                session = f"sessionid={cookies['sessionid']}"
                req = urllib.request.Request(url + "/api/jobs", headers={"Cookie": session})
                state = json.loads(urllib.request.urlopen(req, timeout=60).read())
                rows = []
                for name, path in _pages(state):
                    resp, fcp, live = [], [], []
                    for _ in range(args.repeat):
                        t = time.perf_counter()
                        r = page.goto(url + path, wait_until="load")
                        if r is None or r.status >= 400:
                            raise SystemExit(f"{path}: HTTP {r.status if r else '?'}")
                        timing = page.evaluate(FCP_JS)
                        page.wait_for_function(LIVE, timeout=60_000)
                        live.append(time.perf_counter() - t)
                        resp.append(timing[0] / 1000.0)
                        fcp.append((timing[1] or float("nan")) / 1000.0)
                    rows.append((name, path, statistics.median(resp), statistics.median(fcp),
                                 statistics.median(live)))
                browser.close()
        finally:
            stop(proc)
    print(f"\n{'page':<10}{'response s':>11}{'first paint s':>15}{'live s':>9}  verdict "
          f"(first paint < {TARGET_S} s)")
    for name, path, resp, fcp, live in rows:
        ok = "ok" if fcp < TARGET_S else "SLOW"
        print(f"{name:<10}{resp:>11.3f}{fcp:>15.3f}{live:>9.3f}  {ok}   {path}")
    worst = max(rows, key=lambda r: r[3])
    print(f"\nslowest first paint: {worst[0]} {worst[3]:.3f} s (target {TARGET_S} s)")


if __name__ == "__main__":
    main()
