"""A real Prometheus scrapes a live twin: ``/metrics/dcgm`` (the whole cluster, and single nodes
with ``?hostname=``) and ``/metrics``, with the bearer token; the series that arrive carry
dcgm-exporter's labels and the twin's values, and a node taken down by a drill reads as such.

The twin is the production path (``bench.live_server``): a SQLite file, ``migrate``,
``build_cluster --preset dev-small``, daphne with the embedded engine, started by the first
dashboard socket of a logged-in staff user. Once gangs run, a node drill takes one of their
nodes down and the same socket pauses the engine, so what Prometheus stores and what the twin
answers can be compared exactly. Timeouts only guard against a hang.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.live_server import daphne_start, database_prepare, free_port, live_env, manage, stop
from tests.waiting import wait_until

pytestmark = pytest.mark.prometheus

TOKEN = "prometheus-test-token"
EXPORTER_LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
                   "DCGM_FI_DRIVER_VERSION"}
_STAFF_LOGIN = """
from django.contrib.auth import get_user_model
from django.test import Client
user, _ = get_user_model().objects.get_or_create(username="prom-staff")
user.is_staff = user.is_superuser = True
user.set_unusable_password()
user.save()
client = Client()
client.force_login(user)
print(client.cookies["sessionid"].value)
"""


def rows(db, sql, args=()):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def wait(condition, timeout=120.0, what="a condition"):
    """``condition()``'s first truthy value (a guard against a hang, not a speed check)."""
    # sqlite3.OperationalError: the engine is writing, look again
    return wait_until(condition, timeout=timeout, what=what, ignoring=(sqlite3.OperationalError,))


def scrape(base: str, path: str) -> dict[str, list]:
    """The twin's own answer, read as Prometheus would (bearer token)."""
    request = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            text = r.read().decode()
    except urllib.error.HTTPError as exc:
        if exc.code == 503:  # no frame yet
            return {}
        raise
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def series(samples) -> set:
    """Samples as comparable (labels, value) pairs, Prometheus' own labels left out."""
    return {(tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("job", "instance"))),
             float(s.value)) for s in samples}


def result_series(result) -> set:
    return {(tuple(sorted((k, v) for k, v in r["metric"].items()
                          if k not in ("job", "instance", "__name__"))), float(r["value"][1]))
            for r in result}


@pytest.fixture
def twin(tmp_path):
    """A live twin on a free port: ``(base URL, SQLite path, staff session cookie)``."""
    db = tmp_path / "db.sqlite3"
    env = live_env(db, mode="embedded", speed=600.0, frame_interval_s=0.25)
    env.update(CLUSTERTWIN_METRICS_TOKEN=TOKEN)
    database_prepare(env)
    manage(env, "build_cluster", "--preset", "dev-small")
    cookie = manage(env, "shell", "-c", _STAFF_LOGIN).strip().splitlines()[-1]
    port = free_port()
    proc = daphne_start(env, port, log=tmp_path / "daphne.log")
    try:
        yield f"http://127.0.0.1:{port}", db, cookie
    finally:
        stop(proc, timeout=30)


def test_prometheus_stores_the_twins_dcgm_series_and_a_drilled_node_reads_down(twin, prometheus):
    from websockets.sync.client import connect

    base, db, cookie = twin
    hosts = [h for (h,) in rows(db, "SELECT hostname FROM twin_node ORDER BY id")]
    nvidia_gpus = rows(db, "SELECT sum(n.accelerator_count) FROM twin_node n JOIN "
                           "twin_acceleratormodel a ON a.id = n.accelerator_model_id "
                           "WHERE a.vendor = 'NVIDIA'")[0][0]
    with connect(base.replace("http", "ws") + "/ws/twin/", origin=base, open_timeout=60,
                 additional_headers={"Cookie": f"sessionid={cookie}"}) as ws:
        ws.recv(timeout=120)  # the first frame: the embedded engine runs

        def busy_host():
            util = scrape(base, "/metrics/dcgm").get("DCGM_FI_DEV_GPU_UTIL", [])
            return next((s.labels["Hostname"] for s in util
                         if s.labels.get("hpc_job") and s.value > 0), None)

        drilled = wait(busy_host, what="a gang running")
        with sqlite3.connect(db, timeout=30) as con:
            con.execute("INSERT INTO twin_drill (kind, target, params, requested_at, outcome, "
                        "status) VALUES ('node', ?, '{}', datetime('now'), '{}', 'pending')",
                        (str(hosts.index(drilled)),))
        def drilled_gone():
            util = scrape(base, "/metrics/dcgm").get("DCGM_FI_DEV_GPU_UTIL")
            return util and drilled not in {s.labels["Hostname"] for s in util}

        wait(drilled_gone, what=f"{drilled} gone after its drill")
        ws.send(json.dumps({"type": "pause", "paused": True}))
        wait(lambda: rows(db, "SELECT paused FROM twin_livestate") == [(1,)], what="paused")

    def settled():  # paused: a later frame than this one shows the same simulated time
        [(seq, t_sim)] = rows(db, "SELECT seq, t_sim FROM twin_livestate")
        later = wait(lambda: [r for r in rows(db, "SELECT seq, t_sim FROM twin_livestate")
                              if r[0] > seq], what=f"a frame after frame {seq}")
        return later[0][1] == t_sim

    wait(settled, what="the clock stopped")
    placement = json.loads(rows(db, "SELECT placement FROM twin_livestate")[0][0])
    down = {hosts[n] for a, b in placement["down"] for n in range(a, b + 1)}
    assert drilled in down
    healthy = next(h for h in hosts if h not in down)
    own = scrape(base, "/metrics/dcgm")

    auth = {"authorization": {"type": "Bearer", "credentials": TOKEN}}
    target = {"static_configs": [{"targets": [base.removeprefix("http://")]}]}
    server = prometheus([
        {"job_name": "dcgm", "metrics_path": "/metrics/dcgm", **auth, **target},
        {"job_name": "dcgm-node", "metrics_path": "/metrics/dcgm",
         "params": {"hostname": [healthy]}, **auth, **target},
        {"job_name": "dcgm-drilled", "metrics_path": "/metrics/dcgm",
         "params": {"hostname": [drilled]}, **auth, **target},
        {"job_name": "twin", "metrics_path": "/metrics", **auth, **target},
        {"job_name": "no-token", "metrics_path": "/metrics", **target},
    ], scrape_interval="1s")
    server.wait(lambda p: len({r["metric"]["job"] for r in p.query("up")}) == 5,
                what="every target scraped once")

    up = {r["metric"]["job"]: r["value"][1] for r in server.query("up")}
    assert up == {"dcgm": "1", "dcgm-node": "1", "dcgm-drilled": "0", "twin": "1",
                  "no-token": "0"}
    assert [t["lastError"] for t in server.targets() if t["scrapePool"] == "no-token"] == [
        "server returned HTTP status 401 Unauthorized"]

    util = server.query('DCGM_FI_DEV_GPU_UTIL{job="dcgm"}')
    count = float(server.query('count(DCGM_FI_DEV_GPU_UTIL{job="dcgm"})')[0]["value"][1])
    down_gpus = sum(rows(db, "SELECT accelerator_count FROM twin_node WHERE hostname = ?",
                         (h,))[0][0] for h in down)
    assert count == nvidia_gpus - down_gpus == len(util)
    assert all(EXPORTER_LABELS <= set(r["metric"]) for r in util)
    assert not server.query(f'DCGM_FI_DEV_GPU_UTIL{{Hostname="{drilled}"}}')
    # what Prometheus stored is what the twin says, labels and values, series by series
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_FB_USED"):
        assert result_series(server.query(f'{name}{{job="dcgm"}}')) == series(own[name]), name
    busy = server.query('DCGM_FI_DEV_GPU_UTIL{job="dcgm", hpc_job!=""} > 0')
    assert busy and all(r["metric"]["hpc_job"] in placement["jobs"] for r in busy)
    node = server.query('DCGM_FI_DEV_GPU_UTIL{job="dcgm-node"}')
    assert sorted(int(r["metric"]["gpu"]) for r in node) == list(range(8))
    assert {r["metric"]["Hostname"] for r in node} == {healthy}

    assert server.query('clustertwin_engine_paused{job="twin"}')[0]["value"][1] == "1"
    gpus = {r["metric"]["state"]: float(r["value"][1])
            for r in server.query('clustertwin_gpus{job="twin"}')}
    assert sum(gpus[s] for s in ("allocated", "idle", "spare", "down")) == nvidia_gpus
