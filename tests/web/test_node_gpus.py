"""Which GPUs a job holds, on the node and job pages (issue 16): each GPU of a node lists the
job holding it (or the inference service, or none) with its live telemetry, and a job lists its
GPUs as ``host:ranges``, all exactly as the engine's ``gpu_owner`` has them."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.engine import Engine
from scheduler.live import live_frame, live_placement
from scheduler.scheduling.inference import REPLICA_BASE
from scheduler.workload.jobs import Requirement
from tests import frames
from tests.core.factories import HOUR, job, service, workload
from twin import models as m
from twin.live.services import live_state_write
from twin.metrics import dcgm

pytestmark = pytest.mark.django_db


@pytest.fixture
def engine(small_plan):
    """The ``tiny`` cluster (8 H100 nodes, 4 MI300X) at 1 h: H100 gangs of 12 and 2 GPUs and a
    replica of 2 GPUs share a node, an early gang has ended; some GPUs are free."""
    h100 = Requirement(models=("H100-SXM",))  # NVIDIA: DCGM reports them
    wl = workload(job(gpus=12, hours=5, requirement=h100), job(gpus=2, hours=5, requirement=h100),
                  job(gpus=8, hours=0.3), job(gpus=4, hours=5, submit_h=0.5),
                  services=(service(gpus_per_replica=2, peak_replicas=1.0,
                                    trough_fraction=1.0),))
    e = Engine(small_plan, wl, seed=3)
    e.run_until(1.0 * HOUR)
    return e


@pytest.fixture
def live(small_cluster, engine):
    live_state_write(seq=1, t_sim=engine.now,
                     frame=frames.frame(**json.loads(json.dumps(live_frame(engine)))),
                     health="ok", last_error="", speed=60.0, paused=False,
                     inventory=f"test:{small_cluster.pk}",
                     placement=json.loads(json.dumps(live_placement(engine))))
    return small_cluster


def hostnames(cluster) -> list[str]:
    return list(m.Node.objects.filter(rack__hall__site__cluster=cluster).order_by("id")
                .values_list("hostname", flat=True))


def holder(engine, g: int) -> str | None:
    """The engine's answer: the job's name, ``svc:<name>`` for a replica, None when free."""
    o = int(engine.state.gpu_owner[g])
    if o < 0:
        return None
    if o >= REPLICA_BASE:
        return next(f"svc:{s.spec.name}" for s in engine.fleet.services
                    if any(r.owner == o for r in s.replicas))
    return engine.runs[o].spec.name


def gpu_rows(html: str) -> dict[int, str]:
    """Each ``<tr id="gpu-N">`` of the node page's GPU table, by N."""
    table = html[html.index('id="node-gpus"'):]
    table = table[:table.index("</table>")]
    return {int(i): row for i, row in re.findall(r'<tr id="gpu-(\d+)">(.*?)</tr>', table, re.S)}


def cell(row: str, cls: str) -> str:
    found = re.search(rf'<td class="{cls}">(.*?)</td>', row, re.S)
    return found.group(1).strip() if found else ""


def test_a_node_page_lists_each_gpu_with_the_job_that_holds_it(live, engine, login):
    client = login("operator")
    s = engine.state
    seen = set()
    for node in range(s.node_gpus.size):
        rows = gpu_rows(client.get(f"/nodes/{node}/").content.decode())
        assert sorted(rows) == list(range(int(s.node_gpus[node])))
        for i, row in rows.items():
            who = holder(engine, int(s.node_first_gpu[node]) + i)
            text = cell(row, "gpu-holder")
            seen.add("idle" if who is None else "svc" if who.startswith("svc:") else "job")
            if who is None:
                assert "gpu-job" not in text and "idle" in text, (node, i, text)
            elif who.startswith("svc:"):
                assert f"inference: {who[4:]}" in text and "gpu-job" not in text
            else:
                links = re.findall(r'class="gpu-job" href="/jobs/([^/]+)/"', text)
                assert links == [who], (node, i, text)
    assert seen == {"idle", "svc", "job"}, "the scenario must hold GPUs of every kind"


def test_a_node_shared_by_two_gangs_shows_each_gpus_own_job(live, engine, login):
    s = engine.state
    def jobs_on(n: int) -> list[str | None]:
        first = int(s.node_first_gpu[n])
        return [holder(engine, g) for g in range(first, first + int(s.node_gpus[n]))]

    shared = [n for n in range(s.node_gpus.size)
              if len({j for j in jobs_on(n) if j and not j.startswith("svc:")}) > 1]
    assert shared, "no node is shared by two gangs: the scenario tests no part of a node"
    rows = gpu_rows(login("operator").get(f"/nodes/{shared[0]}/").content.decode())
    shown = [(re.findall(r'href="/jobs/([^/]+)/"', cell(rows[i], "gpu-holder")) or [None])[0]
             for i in sorted(rows)]
    assert shown == [j if is_job(j) else None for j in jobs_on(shared[0])]


def is_job(who: str | None) -> bool:
    return who is not None and not who.startswith("svc:")


def test_gpu_telemetry_on_the_node_page_is_what_the_dcgm_exporter_reports(live, engine, login):
    client = login("operator")
    s = engine.state
    util = {True: set(), False: set()}  # held by a job or not -> utilisations shown
    power = {True: set(), False: set()}
    for node, host in enumerate(hostnames(live)):
        if s.node_model[node] != 0:  # MI300X: no DCGM exporter
            continue
        rows = gpu_rows(client.get(f"/nodes/{node}/").content.decode())
        metrics = client.get("/metrics/dcgm", {"hostname": host}).content.decode()
        for name, cls in (("DCGM_FI_DEV_GPU_UTIL", "gpu-util"),
                          ("DCGM_FI_DEV_POWER_USAGE", "gpu-power"),
                          ("DCGM_FI_DEV_GPU_TEMP", "gpu-temp"),
                          ("DCGM_FI_DEV_XID_ERRORS", "gpu-xid")):
            exported = re.findall(rf'^{name}{{[^}}]*gpu="(\d+)"[^}}]*}} (\S+)$', metrics, re.M)
            assert len(exported) == len(rows)
            for gpu, value in exported:
                assert float(cell(rows[int(gpu)], cls)) == pytest.approx(float(value), abs=0.5)
        for i, row in rows.items():
            busy = is_job(holder(engine, int(s.node_first_gpu[node]) + i))
            util[busy].add(float(cell(row, "gpu-util")))
            power[busy].add(float(cell(row, "gpu-power")))
    assert util == {True: {round(100 * dcgm.BUSY_UTIL)}, False: {0.0}}
    assert min(power[True]) > max(power[False])


def test_the_dcgm_exporter_labels_each_gpu_with_the_job_that_really_holds_it(live, engine,
                                                                                login):
    client = login("operator")
    s = engine.state
    for node, host in enumerate(hostnames(live)):
        if s.node_model[node] != 0:  # MI300X: no DCGM exporter
            continue
        text = client.get("/metrics/dcgm", {"hostname": host}).content.decode()
        util = next(f for f in text_string_to_metric_families(text)
                    if f.name == "DCGM_FI_DEV_GPU_UTIL")
        jobs = {int(x.labels["gpu"]): x.labels.get(dcgm.JOB_LABEL) for x in util.samples}
        assert sorted(jobs) == list(range(int(s.node_gpus[node])))
        for i, job_label in jobs.items():
            who = holder(engine, int(s.node_first_gpu[node]) + i)
            assert job_label == (who if is_job(who) else None), (host, i)


def ranges(indices: list[int]) -> str:
    groups = itertools.groupby(enumerate(indices), key=lambda p: p[1] - p[0])
    out = []
    for _, run in groups:
        run = [i for _, i in run]
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out)


def test_a_job_page_lists_the_gpu_ranges_the_engine_gave_it(live, engine, login):
    client = login("operator")
    s = engine.state
    hosts = hostnames(live)
    for r in engine.running.values():
        html = client.get(f"/jobs/{r.spec.name}/").content.decode()
        mine = np.flatnonzero(s.gpu_owner == r.idx)
        expected = []
        for node in np.unique(s.gpu_node[mine]).tolist():
            local = (mine[s.gpu_node[mine] == node] - s.node_first_gpu[node]).tolist()
            expected.append(f"{hosts[node]}:{ranges(local)}")
            for i in local:
                assert f'href="/nodes/{node}/#gpu-{i}"' in html
        assert re.findall(r'<td class="gpu-range">(.*?)</td>', html) == expected, r.spec.name


def test_without_gpu_owners_the_node_page_says_so_and_lists_the_nodes_jobs(live, engine,
                                                                           login):
    state = m.LiveState.objects.get()
    for j in state.placement["jobs"].values():
        del j["gpu_runs"]
    state.save()
    node = int(engine.state.gpu_node[next(iter(engine.running.values())).gids[0]])
    html = login("operator").get(f"/nodes/{node}/").content.decode()
    assert "not which of its GPUs each holds" in html
    assert "does not report which GPUs its jobs hold" in html
    # an old placement (gpu_runs null after twin.live.stored.placement_upgrade) names no
    # holder: each GPU's says "not reported", none links a job as if it knew
    rows = gpu_rows(html)
    assert rows and all(cell(r, "gpu-holder") == '<span class="muted">not reported</span>'
                        for r in rows.values())
    scrape = login("operator").get("/metrics/dcgm")
    assert scrape.status_code == 503 and b"does not report which GPUs" in scrape.content
