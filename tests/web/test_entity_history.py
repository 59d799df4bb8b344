"""Entity history: every node's, rack's, switch's and job's figures are kept as packed arrays
every ``HISTORY_STEP_S`` simulated seconds, folded into chunks, pruned and cut like the fleet's
history, survive a restart (they are rows), and ``/api/history?kind=&id=`` serves one entity's
series in the fleet series' shape; a sample of the 100,000-GPU preset stays small."""

from __future__ import annotations

import json

import numpy as np
import pytest
from channels.db import database_sync_to_async

from scheduler.physics.entity_figures import (
    KINDS,
    METRICS,
    EntitySample,
    Figures,
    entity_sample,
)
from scheduler.presets import get_preset
from tests import frames
from tests.web.test_driver import FakeClock, drivers  # noqa: F401 (a fixture)
from twin import models as m
from twin.live import entity_codec, entity_history, services

pytestmark = pytest.mark.django_db
RUN = "run-entities"
STEP = 60.0
NODES, RACKS, SWITCHES = 12, 3, 20  # at least the small cluster's nodes and racks


@pytest.fixture(autouse=True)
def step(settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "HISTORY_STEP_S": STEP,
                            "HISTORY_RETENTION_S": 7200.0}
    entity_history.forget_process_cache()
    yield
    entity_history.forget_process_cache()


def util_of(t: float, node: int) -> float:
    """Node ``node``'s utilisation at ``t``: a different sawtooth per node."""
    return float((t / STEP + 7 * node) % 100)


def sample(t: float, *, power: bool = True, jobs=(("train-7", 16), ("serve-x", 4))):
    nodes = {"util_pct": np.array([util_of(t, n) for n in range(NODES)]),
             "alloc_pct": np.full(NODES, 50.0)}
    racks = {"util_pct": np.full(RACKS, 10.0), "alloc_pct": np.full(RACKS, 20.0)}
    if power:
        nodes.update(power_kw=np.linspace(3.0, 10.0, NODES), temp_c=np.full(NODES, 31.5))
        racks.update(power_kw=np.array([40.0, 35.5, 12.25]), temp_c=np.full(RACKS, 31.5))
    switches = {"load_pct": np.arange(SWITCHES, dtype=float),
                "load_max_pct": np.arange(SWITCHES, dtype=float) * 2} if power else {}
    names = tuple(sorted(name for name, _ in jobs))
    gpus = dict(jobs)
    job = Figures({"gpus": np.array([gpus[n] + t / STEP for n in names]),
                   "util_pct": np.full(len(names), 90.0), "mfu_pct": np.full(len(names), 41.0)},
                  ids=names)
    return EntitySample(t=t, kinds={"node": Figures(nodes), "rack": Figures(racks),
                                    "switch": Figures(switches), "job": job})


def keep(t: float, **kw) -> bool:
    return entity_history.record(run=RUN, sample=sample(t, **kw))


def node_series(node: int = 3, metric: str = "util_pct", **kw) -> dict:
    return entity_history.series(run=RUN, kind="node", entity=node, metric=metric, **kw)


def test_a_sample_is_kept_every_step_one_row_per_kind_not_a_key_per_entity():
    kept = [keep(float(t)) for t in range(0, 300, 10)]  # a frame every 10 simulated seconds
    assert sum(kept) == 5
    assert sorted(set(m.EntitySample.objects.values_list("t_sim", flat=True))) == [
        0.0, 60.0, 120.0, 180.0, 240.0]
    assert m.EntitySample.objects.count() == 5 * len(KINDS)
    got = node_series()
    assert got["t"] == [0.0, 60.0, 120.0, 180.0, 240.0]
    assert got["v"] == [util_of(t, 3) for t in got["t"]]
    assert got["unit"] == "%" and got["label"] == METRICS["node"]["util_pct"][0]


def test_folded_chunks_read_back_the_same_series_as_the_samples(monkeypatch):
    monkeypatch.setattr(entity_history, "CHUNK_SAMPLES", 4)
    monkeypatch.setattr(entity_history, "BLOCK", 5)  # nodes 0-4, 5-9, 10-11
    for i in range(10):
        keep(i * STEP)
    assert m.EntityChunk.objects.exists()
    assert sorted(set(m.EntitySample.objects.values_list("t_sim", flat=True))) == [
        8 * STEP, 9 * STEP]  # two folds of four; the newest two are still samples
    assert set(m.EntityChunk.objects.filter(kind="node", metric="util_pct")
               .values_list("block", flat=True)) == {0, 1, 2}
    for node in (0, 7, 11):
        got = node_series(node)
        assert got["t"] == [i * STEP for i in range(10)]
        assert got["v"] == pytest.approx([util_of(i * STEP, node) for i in range(10)],
                                         abs=0.05)
    job = entity_history.series(run=RUN, kind="job", entity="serve-x", metric="gpus")
    assert job["v"] == [4.0 + i for i in range(10)]
    rack = entity_history.series(run=RUN, kind="rack", entity=1, metric="power_kw")
    assert rack["v"] == [35.5] * 10


def test_a_restarted_process_reads_the_rows_and_keeps_the_cadence():
    for t in (0.0, 60.0, 120.0):
        keep(t)
    entity_history.forget_process_cache()  # a new process
    assert node_series()["t"] == [0.0, 60.0, 120.0]
    assert not keep(150.0)  # within a step of the newest row kept
    assert keep(180.0)
    assert node_series()["t"] == [0.0, 60.0, 120.0, 180.0]


def test_a_resumed_engine_drops_what_came_after_its_clock_in_samples_and_chunks(monkeypatch):
    monkeypatch.setattr(entity_history, "CHUNK_SAMPLES", 4)
    for i in range(10):
        keep(i * STEP)
    entity_history.forget_process_cache()  # the engine resumed from t=150
    assert not keep(150.0)  # within a step of the newest sample it did live (120)
    assert not m.EntityChunk.objects.filter(t_last__gt=150.0).exists()
    assert not m.EntitySample.objects.filter(t_sim__gt=150.0).exists()
    assert keep(200.0)
    got = node_series(5)
    assert got["t"] == [0.0, 60.0, 120.0, 200.0]  # the first chunk cut at its third sample
    assert got["v"] == pytest.approx([util_of(t, 5) for t in got["t"]], abs=0.05)


def test_a_fresh_engine_forgets_the_run_s_figures_from_its_first_sample_on(monkeypatch):
    monkeypatch.setattr(entity_history, "CHUNK_SAMPLES", 4)
    for i in range(10):
        keep(i * STEP)
    entity_history.forget_after(run=RUN, t=2 * STEP)  # its warm-up's first sample
    assert node_series()["t"] == [0.0, 60.0]  # the first chunk cut before its third sample
    assert keep(2 * STEP)  # the fresh engine's own
    assert node_series()["t"] == [0.0, 60.0, 120.0]


def test_samples_and_chunks_older_than_the_retention_are_dropped(monkeypatch):
    monkeypatch.setattr(entity_history, "CHUNK_SAMPLES", 10)
    for i in range(300):  # 5 h at one a minute, retention 2 h, pruned every 100 samples
        keep(i * STEP)
    oldest = node_series()["t"][0]
    assert oldest >= 299 * STEP - 7200.0 - 100 * STEP - 10 * STEP
    assert not m.EntityChunk.objects.filter(
        t_last__lt=299 * STEP - 7200.0 - 100 * STEP).exists()


def test_without_a_power_model_power_and_temperature_are_absent_never_zero():
    keep(0.0, power=False)
    assert set(entity_history.known(RUN, "node")) == {"util_pct", "alloc_pct"}
    assert node_series(metric="power_kw")["v"] == []
    assert entity_history.series(run=RUN, kind="switch", entity=2, metric="load_pct")["v"] == []


# ----------------------------------------------------------------- the API
def publish(t: float, **extra) -> None:
    services.live_state_write(seq=int(t) + 1, t_sim=t, frame=frames.frame(t=t, **extra),
                              health="ok", last_error="", speed=60.0, paused=False,
                              inventory=RUN)


@pytest.fixture
def live(small_cluster):
    for i in range(10):
        keep(i * STEP)
    publish(9 * STEP)
    return small_cluster


def test_the_api_serves_an_entity_in_the_fleet_series_shape(live, login):
    client = login("operator")
    fleet = client.get("/api/history", {"metric": "fleet.mfu_pct"}).json()
    got = client.get("/api/history", {"kind": "node", "id": 3, "metric": "util_pct",
                                      "from": 120, "to": 420, "bucket": 120}).json()
    assert set(fleet) <= set(got)
    assert (got["kind"], got["id"], got["name"]) == ("node", 3, "tiny-n000003")
    assert got["aggregate"] == "bucket mean, min, max" and got["t"] == [120.0, 240.0, 360.0]
    # samples 2, 3 | 4, 5 | 6, 7 of node 3's sawtooth (21 + sample index)
    assert got["v"] == [23.5, 25.5, 27.5]
    assert got["min"] == [23.0, 25.0, 27.0] and got["max"] == [24.0, 26.0, 28.0]
    assert got["n"] == [2, 2, 2] and len(got["wall"]) == 3
    whole = client.get("/api/history", {"kind": "job", "id": "train-7", "metric": "gpus",
                                        "range": "all"}).json()
    assert whole["aggregate"] == "as recorded" and whole["v"] == [16.0 + i for i in range(10)]
    listing = client.get("/api/history", {"kind": "rack", "id": 0}).json()
    assert listing["metrics"]["power_kw"] == {"label": "power draw", "unit": "kW"}


def test_a_switch_is_asked_for_by_its_page_s_index(live, login):
    switch = m.Switch.objects.filter(cluster=live).order_by("index")[2]
    got = login("operator").get("/api/history", {"kind": "switch", "id": switch.index,
                                                 "metric": "load_max_pct"}).json()
    assert got["name"] == switch.name and got["v"] == [4.0] * 10  # position 2, twice


@pytest.mark.parametrize(("query", "status", "message"), [
    ({"kind": "gpu", "id": "1", "metric": "util_pct"}, 400, "kind must be one of"),
    ({"kind": "node", "metric": "util_pct"}, 400, "give the node's id"),
    ({"kind": "node", "id": "n1", "metric": "util_pct"}, 400, "non-negative integer"),
    ({"kind": "node", "id": "1", "metric": "load_pct"}, 400, "unknown metric 'load_pct'"),
    ({"kind": "node", "id": "1", "metric": "util_pct", "range": "2w"}, 400, "range must be"),
    ({"kind": "node", "id": "999", "metric": "util_pct"}, 404, "node 999 does not exist"),
    ({"kind": "rack", "id": "99", "metric": "util_pct"}, 404, "rack 99 does not exist"),
    ({"kind": "switch", "id": "99999", "metric": "load_pct"}, 404, "does not exist"),
    ({"kind": "job", "id": "nobody", "metric": "gpus"}, 404, "job 'nobody' has no history"),
])
def test_a_bad_kind_id_or_metric_gets_one_line_of_json(live, login, query, status, message):
    before = m.EntitySample.objects.count()
    response = login("operator").get("/api/history", query)
    assert response.status_code == status
    body = response.content.decode()
    assert "\n" not in body and message in json.loads(body)["error"]
    assert m.EntitySample.objects.count() == before


def test_entity_history_needs_a_login(live, client):
    response = client.get("/api/history", {"kind": "node", "id": 1, "metric": "util_pct"})
    assert response.status_code in (302, 401, 403)


# ----------------------------------------------------------------- scale
def test_a_sample_of_the_100k_preset_packs_into_about_two_bytes_a_figure():
    plan = get_preset("hyperscale-100k").plan()
    rng = np.random.default_rng(7)
    n_jobs = 2000
    names = tuple(sorted(f"job-{k:05d}" for k in range(n_jobs)))

    def noisy(n, hi):
        return rng.uniform(0.0, hi, n)

    big = EntitySample(t=0.0, kinds={
        "node": Figures({m_: noisy(plan.n_nodes, 100.0) for m_ in METRICS["node"]}),
        "rack": Figures({m_: noisy(plan.n_racks, 100.0) for m_ in METRICS["rack"]}),
        "switch": Figures({m_: noisy(plan.fabric.n_switches(), 100.0)
                           for m_ in METRICS["switch"]}),
        "job": Figures({"gpus": rng.integers(8, 100_000, n_jobs).astype(float),
                        "util_pct": noisy(n_jobs, 100.0), "mfu_pct": noisy(n_jobs, 60.0)},
                       ids=names)})
    values = sum(v.size for f in big.kinds.values() for v in f.columns.values())
    names_bytes = len("\x00".join(names))
    size = entity_codec.packed_bytes(big)
    # half precision and at most zlib's few bytes of framing: no JSON keys, no text numbers
    assert size <= 2 * values + 2 * n_jobs + names_bytes + 1024
    as_json = len(json.dumps({f"{k}.{i}.{m_}": round(float(x), 2)
                              for k, f in big.kinds.items() for m_, v in f.columns.items()
                              for i, x in enumerate(v)}))
    assert size * 5 < as_json



# ----------------------------------------------------------------- the live driver records
@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_live_driver_keeps_the_engine_s_figures_at_the_history_step(drivers):  # noqa: F811,E501
    clock = FakeClock()
    driver = await drivers(speed=12.0, clock=clock)  # 30 simulated s a wall-clock 2.5 s
    for _ in range(5):
        clock.now += 2.5
        await driver.step_once()
    run = driver.log_key
    now = await driver.host.call(entity_sample, driver.engine)

    def kept():
        rows = m.EntitySample.objects.filter(run=run, kind="node")
        return (sorted(rows.values_list("t_sim", flat=True)),
                [entity_history.series(run=run, kind="node", entity=n, metric="alloc_pct")
                 ["v"][-1] for n in range(4)])

    times, alloc = await database_sync_to_async(kept)()
    # five steps of 30 s at a 60 s history step: the first, then every other one
    assert len(times) == 3 and times[-1] - times[0] == pytest.approx(4 * 30.0)
    assert times[-1] == pytest.approx(now.t)
    assert alloc == now.kinds["node"].columns["alloc_pct"][:4].tolist()  # the engine's own
