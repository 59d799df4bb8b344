"""The live frame: JSON-safe, bounded, and every figure equal to the engine's own state.

Each value of :func:`scheduler.live.live_frame` is recomputed here from the engine's public
surface (its queue, runs, cluster state, tenants, fleet and books) by plain loops, and checked
on literal clusters whose figures are also worked out by hand.
"""

import json
import pickle

import numpy as np
import pytest

from scheduler.live import live_frame
from scheduler.reliability.failures import job_failure_rate
from scheduler.report import WALL_CLOCK_FIELDS, build_report
from scheduler.simulate import Scenario, run_scenario
from scheduler.workload.jobs import Tenant
from tests.core.factories import HOUR, job, run_engine, service, small_plan, workload

BUCKETS = (("1-7", 1, 7), ("8-63", 8, 63), ("64-511", 64, 511), ("512-4095", 512, 4095),
           (">=4096", 4096, None))


def _strip(report):
    report.pop("wall_seconds")
    for path in WALL_CLOCK_FIELDS[1:]:
        report[path[0]].pop(path[1])
    return report


def test_a_live_frame_is_json_and_small():
    engine, _ = run_scenario(Scenario(preset="dev-small", days=0.2, seed=1))
    frame = live_frame(engine)
    text = json.dumps(frame)
    assert len(text) < 100_000
    assert frame["util"]["gpus"] == 512
    assert frame["util"]["allocated"] + frame["util"]["idle"] + frame["util"]["spare"] \
        + frame["util"]["down"] == 512
    assert len(frame["queue"]) <= 50 and len(frame["events"]) <= 50


def test_an_engine_restored_from_its_pickle_continues_exactly_as_the_original():
    engine, _ = run_scenario(Scenario(preset="dev-small", days=0.2, seed=3))
    copy = pickle.loads(pickle.dumps(engine))
    engine.run_until(engine.now + 6 * 3600)
    copy.run_until(copy.now + 6 * 3600)
    a = _strip(build_report(engine, scenario={}, wall_seconds=0.0))
    b = _strip(build_report(copy, scenario={}, wall_seconds=0.0))
    assert a == b


# ------------------------------------------------------------------ recomputed from the engine
def _index(e, run) -> int:
    return next(i for i, r in enumerate(e.runs) if r is run)


def hand_queue(e) -> list[str]:
    return [r.spec.name for r in sorted(e.queue.values(),
                                        key=lambda r: e.policy.order(r, e.tenants))]


def hand_running(e) -> list[str]:
    return [r.spec.name for r in sorted(e.running.values(), key=lambda r: (-r.gpus, _index(e, r)))]


def hand_tenant_gpus(e) -> tuple[dict[str, int], int]:
    """GPUs held per tenant (its gangs' plus its services' replicas, read off gpu_owner), and
    the GPUs serving inference."""
    owner = e.state.gpu_owner
    used = {t: 0 for t in e.tenants.usage}
    for run in e.running.values():
        used[run.spec.tenant] += run.gpus
        assert np.count_nonzero(owner == _index(e, run)) == run.gpus
    serving = 0
    for s in e.fleet.services:
        held = int(np.count_nonzero(np.isin(owner, [rep.owner for rep in s.replicas])))
        used[s.spec.tenant] += held
        serving += held
    return used, serving


def hand_util(e) -> dict:
    s = e.state
    free = np.bincount(s.gpu_node[s.gpu_owner < 0], minlength=s.node_up.size)
    up = s.node_up & ~s.node_drained
    return {"gpus": int(s.gpu_owner.size), "allocated": int(np.count_nonzero(s.gpu_owner >= 0)),
            "idle": int(free[up & ~s.node_spare].sum()),
            "spare": int(free[up & s.node_spare].sum()),
            "down": int(free[~up].sum())}


def measured(buckets: list[dict]) -> list[dict]:
    """The measured part of the MTTF table (the model's prediction left out)."""
    return [{k: v for k, v in b.items() if k != "predicted_mttf_hours"} for b in buckets]


def hand_mttf_by_size(e) -> list[dict]:
    """Per size bucket: gangs that started on premises, their interruptions, wall hours."""
    out = []
    for label, lo, hi in BUCKETS:
        runs = [r for r in e.runs if r.first_start is not None and r.placement is not None
                and lo <= r.gpus and (hi is None or r.gpus <= hi)]
        n = sum(r.interruptions for r in runs)
        hours = sum(((r.end_s if r.end_s is not None else e.now) - r.first_start) / HOUR
                    for r in runs)
        out.append({"gpus": label, "jobs": len(runs), "interruptions": n,
                    "mttf_hours": round(hours / n, 2) if n else None})
    return out


def check_against_engine(e, frame, top=50):
    """Every figure of ``frame`` equals the same figure recomputed from ``e``."""
    queue = hand_queue(e)[:top]
    assert [q["name"] for q in frame["queue"]] == queue
    assert [q["position"] for q in frame["queue"]] == list(range(1, len(queue) + 1))
    by_name = {r.spec.name: r for r in e.runs}
    for q in frame["queue"]:
        r = by_name[q["name"]]
        assert (q["tenant"], q["gpus"], q["priority"]) == (r.spec.tenant, r.gpus, r.spec.priority)
    assert [j["name"] for j in frame["running_jobs"]] == hand_running(e)[:top]
    for j in frame["running_jobs"]:
        r = by_name[j["name"]]
        assert (j["tenant"], j["gpus"], j["state"]) == (r.spec.tenant, r.gpus, r.state)
        assert j["model"] == e.plan.models[r.model].name
        assert j["span"] == {
            "pods": int(np.unique(e.state.domain["pod"][r.placement.nodes]).size),
            "leaves": int(np.unique(e.state.domain["leaf"][r.placement.nodes]).size)}
        # achieved model FLOP/s over the gang's peak: its rate slowed by what it waits on
        peak = r.gpus * e.ledger.peak[r.model]
        assert j["mfu"] == pytest.approx(r.rate * r.slow / peak if r.state == "running"
                                         else 0.0, abs=1e-4)
        assert 0.0 <= j["mfu"] < 1.0
        if r.state != "running":
            assert j["mfu"] == 0.0
    used, serving = hand_tenant_gpus(e)
    assert {t["tenant"]: t["used_gpus"] for t in frame["tenants"]} == used
    assert {t["tenant"]: t["quota_gpus"] for t in frame["tenants"]} == {
        t: int(e.tenants.quota[t]) for t in used}
    util = hand_util(e)
    assert {k: frame["util"][k] for k in util} == util
    assert sum(util[k] for k in ("allocated", "idle", "spare", "down")) == util["gpus"]
    states = [r.state for r in e.runs]
    assert frame["jobs"] == {
        "queued": states.count("queued"),
        "running": states.count("running") + states.count("draining"),
        "recovering": states.count("detecting"), "in_cloud": states.count("cloud"),
        "done": states.count("done"), "preemptions": sum(r.preemptions for r in e.runs)}
    assert frame["jobs"]["queued"] == len(e.queue)
    led = e.horizon_ledger()
    assert frame["ledger_gpu_hours"] == led.gpu_hours()
    assert frame["mfu"] == led.mfu()["achieved"]
    assert sum(frame["ledger_gpu_hours"].values()) == pytest.approx(
        e.state.gpu_owner.size * e.now / HOUR, abs=1e-5)  # 13 figures rounded to 1e-6
    rel = e.reliability
    assert frame["interruptions"]["by_cause"] == dict(sorted(rel.interruptions.items()))
    assert frame["interruptions"]["unplanned"] + frame["interruptions"]["planned"] == sum(
        r.interruptions for r in e.runs)
    assert frame["failures"]["total"] == sum(rel.failures.values())
    assert frame["failures"]["lemon_nodes"] == list(rel.lemons)
    assert frame["failures"]["spares_free"] == util["spare"]
    assert measured(frame["failures"]["mttf_by_size"]) == hand_mttf_by_size(e)
    assert frame["inference"]["serving_gpus"] == serving
    assert frame["events"] == list(e.events)[-top:]
    if e.physics is not None and e.physics.last_power is not None:
        p = e.physics.last_power
        assert frame["power"] == {"it_mw": round(p.it_mw, 4),
                                  "facility_mw": round(p.facility_mw, 4),
                                  "rack_peak_kw": round(float(p.rack_kw.max()), 2),
                                  "throttled_gpus": int(np.count_nonzero(p.gpu_throttle < 1))}
    else:
        assert frame["power"] is None
    json.dumps(frame)


# ------------------------------------------------------------------ a literal busy cluster
TENANTS = (Tenant("research", 32), Tenant("prod", 32), Tenant("serving", 8))


def busy(until_h: float = 2.0, **kw):
    """10 nodes (80 GPUs, nodes 8 and 9 hot spares), one always-on 8-GPU replica, three gangs
    of priority 10 running from t=0 and four gangs queued behind them.

    The default policy orders by priority, then "within the tenant's quota", then the tenant's
    DRF share, then submission::

        job  tenant    GPUs  prio  submit h  why here
        j6   prod      32    3     1.5       highest priority
        j5   prod      24    0     1.0       prod holds 16 of its 32: within quota
        j3   research  24    0     0.25      research holds 24 of 32: 24 + 24 is beyond
        j4   research  24    0     0.5       same tenant as j3, submitted later
    """
    plan = small_plan(10, spares=2)
    wl = workload(
        job(gpus=16, hours=10, tenant="research", priority=10, efficiency=0.5),
        job(gpus=16, hours=10, tenant="prod", priority=10, efficiency=0.4),
        job(gpus=8, hours=10, tenant="research", priority=10, efficiency=0.3),
        job(gpus=24, hours=5, tenant="research", submit_h=0.25),
        job(gpus=24, hours=5, tenant="research", submit_h=0.5),
        job(gpus=24, hours=5, tenant="prod", submit_h=1.0),
        job(gpus=32, hours=5, tenant="prod", priority=3, submit_h=1.5),
        services=(service(gpus_per_replica=8, peak_replicas=1, trough_fraction=1.0),),
        tenants=TENANTS)
    return run_engine(plan, wl, until_h=until_h, **kw)


def free_nodes(e) -> list[int]:
    s = e.state
    held = np.bincount(s.gpu_node[s.gpu_owner >= 0], minlength=s.node_up.size)
    return [int(n) for n in np.flatnonzero((held == 0) & ~s.node_spare & s.node_up)]


def test_the_queue_is_in_the_policys_order_with_hand_computed_waits():
    e = busy()
    frame = live_frame(e)
    assert [q["name"] for q in frame["queue"]] == ["j6", "j5", "j3", "j4"]
    assert [q["name"] for q in frame["queue"]] == hand_queue(e)
    assert [q["wait_h"] for q in frame["queue"]] == [0.5, 1.0, 1.75, 1.5]
    assert [q["gpus"] for q in frame["queue"]] == [32, 24, 24, 24]
    # EASY backfill reserved the head's start for when the gangs of 10 h end
    assert frame["queue"][0]["reserved_start_h"] == 10.0
    assert [q["name"] for q in live_frame(e, top=2)["queue"]] == ["j6", "j5"]
    check_against_engine(e, frame)


def test_running_jobs_report_their_kernel_efficiency_as_mfu_and_tenants_their_gpus():
    e = busy()
    frame = live_frame(e)
    # physics off, nothing failed: every gang computes at its own kernel efficiency
    assert [(j["name"], j["gpus"], j["mfu"], j["state"]) for j in frame["running_jobs"]] == [
        ("j0", 16, 0.5, "running"), ("j1", 16, 0.4, "running"), ("j2", 8, 0.3, "running")]
    assert [j["running_h"] for j in frame["running_jobs"]] == [2.0, 2.0, 2.0]
    assert frame["tenants"] == [
        {"tenant": "research", "used_gpus": 24, "quota_gpus": 32},
        {"tenant": "prod", "used_gpus": 16, "quota_gpus": 32},
        {"tenant": "serving", "used_gpus": 8, "quota_gpus": 8}]
    assert frame["inference"]["serving_gpus"] == 8
    assert frame["util"] == {"gpus": 80, "allocated": 48, "idle": 16, "spare": 16, "down": 0,
                             "by_vendor": {"NVIDIA": {"gpus": 80, "allocated": 48}}}
    check_against_engine(e, frame)


def test_a_cooling_loss_shows_as_each_running_gangs_mfu_times_the_throttle():
    e = busy()
    e.command("drill", kind="cooling", target=0)  # the one row: all three racks
    frame = live_frame(e)
    # with the physics off a lost cooling loop leaves the gangs 70 % of their speed
    assert [j["mfu"] for j in frame["running_jobs"]] == [0.35, 0.28, 0.21]
    check_against_engine(e, frame)


def test_drained_down_and_spare_gpus_and_a_recovering_gang_are_counted_as_the_state_says():
    e = busy()
    idle = free_nodes(e)
    assert len(idle) == 2
    e.command("drain_node", node=idle[0])          # 8 free GPUs out of the pool
    e.command("node_down", node=8)                 # a hot spare fails
    j2 = e.runs[2]
    e.command("drill", kind="node", target=int(j2.placement.nodes[0]))
    frame = live_frame(e)
    # j2 still holds its GPUs while its failure is being detected
    assert {k: frame["util"][k] for k in ("allocated", "idle", "spare", "down")} == {
        "allocated": 48, "idle": 8, "spare": 8, "down": 16}
    assert frame["jobs"]["running"] == 2 and frame["jobs"]["recovering"] == 1
    assert frame["running_jobs"][2] == {**frame["running_jobs"][2], "name": "j2",
                                        "state": "detecting", "mfu": 0.0}
    assert frame["interruptions"]["by_cause"] == {"drill_node": 1}
    check_against_engine(e, frame)
    e.run_until(e.now + 121.0)  # detected: j2 resumes on the last hot spare, node 9
    frame = live_frame(e)
    assert e.runs[2].state == "running" and e.runs[2].placement.nodes.tolist() == [9]
    assert {k: frame["util"][k] for k in ("allocated", "idle", "spare", "down")} == {
        "allocated": 48, "idle": 8, "spare": 0, "down": 24}
    assert frame["failures"]["spares_free"] == 0
    check_against_engine(e, frame)


def test_mttf_by_size_counts_interruptions_and_wall_hours_of_started_gangs():
    """16 nodes; gangs of 4, 8, 16 and 64 GPUs from t=0 and one of 128 that never starts.

    The 8-GPU gang ends at 1 h; the 16-GPU gang is hit once (at 2 h), the 64-GPU one twice
    (3 h and 4 h).  At 6 h: bucket 1-7 holds one gang and no interruption; 8-63 holds two with
    1 + 6 = 7 wall hours over one interruption; 64-511 one gang with 6 hours over two.
    """
    plan = small_plan(16, fabric_kw={"radix": 16})
    wl = workload(job(gpus=4, hours=10), job(gpus=8, hours=1), job(gpus=16, hours=10),
                  job(gpus=64, hours=10), job(gpus=128, hours=1, submit_h=5))
    e = run_engine(plan, wl)
    for t_h, victim in ((2, 2), (3, 3), (4, 3)):
        e.run_until(t_h * HOUR)
        assert e.runs[victim].state == "running"
        e.command("drill", kind="node", target=int(e.runs[victim].placement.nodes[0]))
    e.run_until(6 * HOUR)
    assert e.runs[4].first_start is None
    frame = live_frame(e)
    assert measured(frame["failures"]["mttf_by_size"]) == [
        {"gpus": "1-7", "jobs": 1, "interruptions": 0, "mttf_hours": None},
        {"gpus": "8-63", "jobs": 2, "interruptions": 1, "mttf_hours": 7.0},
        {"gpus": "64-511", "jobs": 1, "interruptions": 2, "mttf_hours": 3.0},
        {"gpus": "512-4095", "jobs": 0, "interruptions": 0, "mttf_hours": None},
        {"gpus": ">=4096", "jobs": 0, "interruptions": 0, "mttf_hours": None}]
    assert frame["failures"]["total"] == 3 and frame["interruptions"]["unplanned"] == 3
    check_against_engine(e, frame)
    # beside each measured MTTF, the failure model's for the bucket's mean gang: 8-63 holds
    # gangs of 8 GPUs on 1 node and 16 on 2, so 12 GPUs on 1.5 nodes; none for empty buckets
    predicted = [b["predicted_mttf_hours"] for b in frame["failures"]["mttf_by_size"]]
    assert predicted[1] == round(1 / job_failure_rate(1.5, 12.0), 2)
    assert predicted[0] > predicted[1] > predicted[2] and predicted[3:] == [None, None]


# ------------------------------------------------------------------ a preset, all models on
def busy_dev_small(seed: int = 1, min_queue: int = 3):
    """dev-small (failures and physics on) at the first hour when ``min_queue`` gangs wait."""
    engine, _ = Scenario(preset="dev-small", days=2, seed=seed).engine()
    for hour in range(1, 49):
        engine.run_until(hour * HOUR)
        if len(engine.queue) >= min_queue:
            return engine
    pytest.fail(f"dev-small seed {seed} never queued {min_queue} gangs in two days")


@pytest.fixture(scope="module")
def dev_small_busy():
    """dev-small when gangs queue, just after a node drill on a running gang."""
    engine = busy_dev_small()
    engine.command("drill", kind="node", target=int(next(iter(
        engine.running.values())).placement.nodes[0]))
    return engine


def test_a_dev_small_frame_equals_the_engine_state_with_physics_and_failures_on(dev_small_busy):
    e = dev_small_busy
    frame = live_frame(e)
    assert len(frame["queue"]) >= 3 and len(frame["running_jobs"]) >= 3
    assert frame["power"] is not None and frame["interruptions"]["by_cause"]
    check_against_engine(e, frame)
    short = live_frame(e, top=2)
    assert len(short["queue"]) == 2 and len(short["running_jobs"]) == 2
    check_against_engine(e, short, top=2)


def test_the_frames_ettr_is_the_reports():
    """The overview's ETTR counter reads the figure the report gives for the same instant."""
    engine, _ = Scenario(preset="llama3-16k", gpus=1024, days=1, seed=2).engine()
    engine.run_until(12 * HOUR)
    frame = live_frame(engine)
    report = build_report(engine, scenario={}, wall_seconds=0.0)
    assert frame["ettr"] is not None and frame["ettr"] == report["ettr"]
    assert 0.0 < frame["ettr"] <= 1.0
