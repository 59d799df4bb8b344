"""The live driver as a mirror: it follows what the sources read, says how each source is, and
keeps the last state (with its age) when one fails.  The sources are stand-ins here (the real
Slurm and Prometheus are in tests/slurm and tests/prometheus)."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import pytest_asyncio
from channels.db import database_sync_to_async
from django.core.exceptions import ValidationError

from tests.web.test_driver import FakeClock, drivers  # noqa: F401  (the fixture)
from twin import models as m
from twin.control import services
from twin.inventory.adapter import cluster_plan_write
from twin.live.driver import EngineStartError
from twin.mirror.errors import SourceError
from twin.mirror.poller import MirrorPoller

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

POLL_S = 5.0


class Wall:
    def __init__(self):
        self.now = 1_800_000_000.0

    def __call__(self):
        return self.now


@pytest.fixture
def mirror_settings(settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "SOURCE": "mirror", "MIRROR_POLL_S": POLL_S,
                            "PROMETHEUS_URL": "http://prometheus.invalid:9090"}
    return settings


def hostnames():
    return list(m.Node.objects.order_by("id").values_list("hostname", flat=True))


def node(state=("idle",), reason=""):
    return SimpleNamespace(state=frozenset(state), reason=reason)


def job(job_id, state, nodes=(), gpus=8, reason="", start=None, limit=None):
    return SimpleNamespace(job_id=str(job_id), state=state, nodes=tuple(nodes), gpus=gpus,
                           gpus_per_node=None, reason=reason, name=f"train-{job_id}",
                           account="research", user="ana", partition="gpu",
                           start_time=start, time_limit_s=limit)


class Sources:
    """What the stand-in Slurm and Prometheus answer; ``None`` makes the source fail."""

    def __init__(self, wall, hosts):
        self.wall, self.hosts = wall, hosts
        self.nodes = {h: node() for h in hosts}
        self.jobs = []
        self.power = None
        self.slurm_error = self.prom_error = None

    def slurm(self):
        if self.slurm_error:
            raise SourceError("slurm", self.slurm_error)
        return SimpleNamespace(nodes=copy.deepcopy(self.nodes), jobs=list(self.jobs),
                               read_at=self.wall())

    def prometheus(self):
        if self.prom_error:
            raise SourceError("prometheus", self.prom_error)
        hosts = tuple(self.hosts[:2]) + ("not-in-inventory",)
        host_index = np.repeat(np.arange(3), 8)
        gpu = np.tile(np.arange(8), 3)
        power = np.full(24, self.power if self.power is not None else 300.0)
        return SimpleNamespace(hosts=hosts, host_index=host_index, gpu=gpu,
                               values={"DCGM_FI_DEV_POWER_USAGE": power,
                                       "DCGM_FI_DEV_GPU_UTIL": np.full(24, 90.0)},
                               read_at=self.wall())


@pytest_asyncio.fixture
async def mirror(mirror_settings, drivers, small_plan):  # noqa: F811
    await database_sync_to_async(cluster_plan_write)(small_plan)
    wall = Wall()
    driver = await drivers(clock=FakeClock(), wall=wall, mirror=MirrorPoller)
    sources = Sources(wall, await database_sync_to_async(hostnames)())
    driver.mirror.readers = {"slurm": sources.slurm, "prometheus": sources.prometheus}
    return driver, sources, wall


async def poll(driver, wall):
    """One poll interval of wall time: a step starts the read, the next applies it."""
    driver.clock.now += POLL_S
    wall.now += POLL_S
    await driver.step_once()
    if driver.mirror.poll_task is not None:
        await driver.mirror.poll_task
    return await driver.step_once()


def run_of(driver, key):
    return next(r for r in driver.engine.runs if r.spec.name == f"slurm-{key}")


async def test_the_mirror_runs_the_inventory_on_the_wall_clock_with_no_jobs_of_its_own(mirror):
    driver, sources, wall = mirror
    assert driver.engine.runs == [] and driver.engine.scheduler.held
    frame = await poll(driver, wall)
    assert driver.engine.now == pytest.approx(POLL_S)
    assert frame["source"] == "mirror"
    assert frame["sources"]["slurm"]["state"] == "ok"


async def test_jobs_nodes_and_pending_reasons_follow_slurm(mirror):
    driver, sources, wall = mirror
    h = sources.hosts
    sources.jobs = [job(1, "RUNNING", nodes=h[:2], gpus=16, start=wall.now - 600, limit=3600),
                    job(2, "PENDING", gpus=64, reason="Resources")]
    sources.nodes[h[5]] = node(("idle", "drain"), reason="bad DIMM")
    sources.nodes[h[6]] = node(("down",), reason="not responding")
    frame = await poll(driver, wall)
    assert sorted(run_of(driver, 1).placement.nodes.tolist()) == [0, 1]
    assert run_of(driver, 2).state == "queued"
    assert frame["queue"][0]["reason"] == "Resources"
    assert driver.engine.state.node_drained[5] and not driver.engine.state.node_up[6]
    texts = [e["text"] for e in driver.engine.events if e["kind"] in ("drain", "node_down")]
    assert texts == [f"{h[6]} down in the cluster: not responding",
                     f"{h[5]} drained in the cluster: bad DIMM"]  # by hostname
    assert frame["mirror"]["jobs"]["slurm-1"] == {"key": "1", "name": "train-1", "user": "ana",
                                                  "account": "research", "partition": "gpu",
                                                  "state": "running"}

    sources.jobs = [job(1, "NODE_FAIL", nodes=h[:2], gpus=16),
                    job(2, "PENDING", gpus=64, reason="Resources")]
    sources.nodes[h[1]] = node(("down",))
    frame = await poll(driver, wall)
    assert run_of(driver, 1).state == "done"
    assert frame["interruptions"]["by_cause"] == {"node_fail": 1}
    assert any(e["kind"] == "failure" and "slurm-1" in e["text"] for e in frame["events"])


async def test_telemetry_comes_from_prometheus_and_unmapped_hosts_are_reported(mirror):
    driver, sources, wall = mirror
    sources.power = 650.0
    frame = await poll(driver, wall)
    tel = frame["mirror"]["telemetry"]
    assert tel["gpus_reporting"] == 16 and tel["power_kw"] == pytest.approx(16 * 0.65)
    problems = frame["sources"]["prometheus"]["problems"]
    assert problems["unknown_hosts_in_telemetry"]["names"] == ["not-in-inventory"]


async def test_a_failed_source_keeps_the_last_state_says_how_old_and_is_one_event(mirror):
    driver, sources, wall = mirror
    h = sources.hosts
    sources.jobs = [job(1, "RUNNING", nodes=h[:1], start=wall.now, limit=3600)]
    await poll(driver, wall)
    sources.slurm_error = "squeue timed out after 10 s"
    for _ in range(3):
        frame = await poll(driver, wall)
    slurm = frame["sources"]["slurm"]
    assert slurm["state"] == "error" and "timed out" in slurm["error"]
    assert slurm["age_s"] == pytest.approx(3 * POLL_S, abs=0.01)
    assert run_of(driver, 1).state == "running"  # kept, not ended by a failed read
    assert frame["sources"]["prometheus"]["state"] == "ok"
    source_events = [e for e in driver.engine.events if e["kind"] == "source"]
    assert len(source_events) == 1 and "timed out" in source_events[0]["text"]

    sources.slurm_error = None
    frame = await poll(driver, wall)
    assert frame["sources"]["slurm"]["state"] == "ok"
    assert [e["text"] for e in driver.engine.events if e["kind"] == "source"][-1] == (
        "slurm: reachable again")


async def test_a_job_the_twin_cannot_follow_is_named_and_the_rest_applies(mirror):
    driver, sources, wall = mirror
    h = sources.hosts
    sources.jobs = [job(1, "RUNNING", nodes=h[:1], start=wall.now, limit=3600),
                    job(2, "RUNNING", nodes=h[:1], start=wall.now, limit=3600),
                    job(3, "PENDING", gpus=8, reason="Priority")]
    frame = await poll(driver, wall)
    assert run_of(driver, 1).state == "running" and run_of(driver, 3).state == "queued"
    assert "free GPU" in frame["mirror"]["rejected"]["2"]
    assert frame["sources"]["slurm"]["state"] == "ok"
    sources.jobs = [sources.jobs[0], sources.jobs[2]]
    frame = await poll(driver, wall)
    assert frame["mirror"]["rejected"] == {}
    assert not [e for e in driver.engine.events if e["kind"] == "source"]


async def test_a_refused_observation_is_not_an_unreachable_source(mirror, monkeypatch):
    from twin.mirror import poller

    driver, sources, wall = mirror
    h = sources.hosts
    sources.jobs = [job(1, "RUNNING", nodes=h[:1], start=wall.now, limit=3600)]
    await poll(driver, wall)
    real = poller.observe

    def refuse(engine, obs):
        raise ValueError("node 99 is not a node of this cluster")

    monkeypatch.setattr(poller, "observe", refuse)
    for _ in range(2):
        frame = await poll(driver, wall)
    slurm = frame["sources"]["slurm"]
    assert slurm["state"] == "ok" and slurm["error"] == ""
    assert slurm["problems"]["observation_refused"]["names"] == [
        "node 99 is not a node of this cluster"]
    assert run_of(driver, 1).state == "running"  # as it was
    monkeypatch.setattr(poller, "observe", real)
    frame = await poll(driver, wall)
    texts = [e["text"] for e in driver.engine.events if e["kind"] == "source"]
    assert texts == ["mirror: observation refused: node 99 is not a node of this cluster"]
    assert "observation_refused" not in frame["sources"]["slurm"]["problems"]


async def test_drills_speed_and_pause_are_refused_on_a_mirror(mirror, django_user_model):
    staff = await database_sync_to_async(django_user_model.objects.create_user)(
        "staff", is_staff=True, is_superuser=True)
    for call in (lambda: services.drill_request(user=staff, kind="node", target=3),
                 lambda: services.engine_speed_set(user=staff, factor=10.0),
                 lambda: services.engine_pause(user=staff, paused=True)):
        with pytest.raises(ValidationError, match="mirrors a real cluster"):
            await database_sync_to_async(call)()
    assert not await database_sync_to_async(m.Drill.objects.exists)()


async def test_a_mirror_without_an_inventory_refuses_to_start(mirror_settings, drivers):  # noqa: F811
    with pytest.raises(EngineStartError, match="import_inventory --from-slurm"):
        await drivers(clock=FakeClock(), wall=Wall(), mirror=MirrorPoller)

