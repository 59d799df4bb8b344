"""Incidents: one per root cause, with the nodes, jobs and GPU-hours it cost, resolved by its
repair (:mod:`scheduler.reliability.incidents`)."""

import json

import numpy as np
import pytest

from scheduler.control.commands import apply_command
from scheduler.control.drills import run_drill
from scheduler.control.inject import OBSERVED_DOWN
from scheduler.live import live_frame
from scheduler.reliability.failures import BY_CAUSE
from scheduler.reliability.incidents import IncidentBook, incidents_view
from scheduler.sim import Kind
from scheduler.simulate import Scenario
from tests.frames import validate

HOUR = 3600.0


def _engine(seed: int = 3, failures: bool = False, hours: float = 6.0):
    engine, _ = Scenario(preset="dev-small", days=1, seed=seed, failures=failures).engine()
    engine.run_until(hours * HOUR)
    return engine


def _busy_leaf(engine) -> int:
    """A leaf switch whose nodes run training gangs."""
    rel = engine.reliability
    for leaf in range(rel.units["leaf"]):
        if rel._training_owners(rel.nodes_of("leaf", leaf)):
            return leaf
    raise AssertionError("no leaf runs a job")


def _lost_work_gpu_s(engine) -> float:
    return engine.ledger.gpu_hours()["lost_work"] * HOUR


def test_a_leaf_drill_is_one_incident_with_its_nodes_resolved_by_its_repair():
    engine = _engine()
    leaf = _busy_leaf(engine)
    nodes = engine.reliability.nodes_of("leaf", leaf)
    result = run_drill(engine, "leaf_switch", leaf, drill_id=41)
    book = engine.reliability.incidents
    assert len(book.open_incidents) == 1  # not one per node
    (inc,) = book.open_incidents.values()
    assert (inc.target_kind, inc.target_id, inc.component) == ("switch", leaf, "leaf")
    assert inc.drill and inc.drill_id == 41 and inc.cause == "drill_leaf_switch"
    assert inc.nodes.tolist() == nodes.tolist()
    assert inc.gpus_down == int(engine.state.node_gpus[nodes].sum())
    assert sorted(inc.jobs) == sorted(result["jobs"]) and inc.jobs
    assert inc.since == engine.now
    (repair,) = [h.time for h in engine.kernel.pending(Kind.REPAIR)]
    assert inc.expected_repair == repair  # the repair the drill scheduled

    due = inc.expected_repair
    engine.run_until(due - 1.0)
    assert inc.id in book.open_incidents
    engine.run_until(due + 1.0)
    assert not book.open_incidents
    assert book.resolved[-1] is inc and inc.resolved_at == pytest.approx(due)
    assert [e for e in engine.events if e["kind"] == "repair"][-1]["component"] == f"leaf {leaf}"
    record = incidents_view(book, engine.now)["resolved"][0]
    assert record["duration_s"] == pytest.approx(repair - inc.since, abs=1e-3)
    # resolved: its down GPUs stop counting at the repair
    assert record["down_gpu_h"] == pytest.approx(inc.gpus_down * (repair - inc.since) / HOUR,
                                                 rel=1e-6)


def test_a_node_failure_is_one_incident_with_the_job_hit_and_the_gpu_hours_lost():
    engine = _engine()
    run = max(engine.running.values(), key=lambda r: r.gpus)
    node = int(run.placement.nodes[0])
    gpu = int(engine.state.node_first_gpu[node])
    lost_before = _lost_work_gpu_s(engine)
    hit = engine.reliability.inject(BY_CAUSE["faulty_gpu"], gpu,
                                    rng=np.random.default_rng(0))
    (inc,) = engine.reliability.incidents.open_incidents.values()
    assert (inc.target_kind, inc.target_id, inc.source) == ("gpu", gpu, "Llama 3 Table 5")
    assert not inc.drill and inc.nodes.tolist() == [node]
    assert run.spec.name in hit["jobs"] and set(inc.jobs) == set(hit["jobs"])
    assert inc.jobs[run.spec.name][0] == run.gpus
    # the lost work is what the ledger booked for the interruption
    lost = _lost_work_gpu_s(engine) - lost_before
    assert lost > 0 and inc.lost_work_gpu_s() == pytest.approx(lost, rel=1e-6)  # GPU-h rounded
    engine.run_until(engine.now + 2 * HOUR)
    gpus = int(engine.state.node_gpus[node])
    assert inc.gpu_hours_lost(engine.now) == pytest.approx(lost / HOUR + gpus * 2.0, rel=1e-6)


def test_an_operators_leaf_edit_is_one_incident_until_the_switch_is_back():
    engine = _engine()
    leaf = _busy_leaf(engine)
    apply_command(engine, "switch_down", switch=leaf)
    book = engine.reliability.incidents
    (inc,) = book.open_incidents.values()
    assert inc.nodes.size == engine.reliability.nodes_of("leaf", leaf).size > 1
    assert inc.expected_repair is None and inc.source == "inventory edit"
    apply_command(engine, "switch_up", switch=leaf)
    assert not book.open_incidents and book.resolved[-1] is inc


def test_a_mirrored_node_down_is_an_incident_named_by_the_schedulers_reason():
    engine = _engine()
    rel = engine.reliability
    rel.node_out(5, OBSERVED_DOWN)
    rel.node_out(6, OBSERVED_DOWN)
    rel.incidents.observed_reason(5, "Not responding")
    causes = {tuple(i.nodes.tolist()): i.cause for i in rel.incidents.open_incidents.values()}
    assert causes == {(5,): "Not responding", (6,): "observed_down"}  # one per node
    rel.node_back(5, all_causes=True)
    assert [i.nodes.tolist() for i in rel.incidents.open_incidents.values()] == [[6]]


def test_the_frame_lists_open_incidents_worst_first_and_validates():
    engine = _engine()
    rel = engine.reliability
    run_drill(engine, "node", 3, drill_id=1)
    run_drill(engine, "leaf_switch", _busy_leaf(engine), drill_id=2)
    frame = live_frame(engine)
    shown = frame["incidents"]
    assert [i["drill_id"] for i in shown["open"]] == [2, 1]  # the leaf hits more GPUs
    assert shown["counts"]["open"] == shown["counts"]["open_drills"] == 2
    assert shown["open"][0]["gpus_hit"] >= shown["open"][1]["gpus_hit"]
    assert len(rel.incidents.open_incidents) == 2
    validate("LiveFrame", frame)
    assert len(json.dumps(shown)) < 20_000


def test_resolved_incidents_beyond_the_last_n_are_counted():
    book = IncidentBook(resolved_kept=3)
    for k in range(5):
        book.open(component="host", unit=k, target=("node", k), cause="c", source="drill",
                  now=float(k), due=None, nodes=np.array([k]), gpus_down=8, jobs={},
                  repair=k)
        book.repaired(k, now=k + 0.5)
    assert [i.id for i in book.resolved] == [3, 4, 5]
    assert book.resolved_total == 5 and book.dropped == {"drill": 2}


def _incidents(seed: int) -> list[dict]:
    engine = _engine(seed=seed, failures=True, hours=24.0 * 10)
    book = engine.reliability.incidents
    view = incidents_view(book, engine.now, top=1000)
    return view["open"] + [json.loads(json.dumps(r)) for r in view["resolved"]]


def test_incidents_are_deterministic_for_a_seed():
    first = _incidents(5)
    assert first, "ten days of failures open incidents"
    assert first == _incidents(5)
    assert first != _incidents(6)


def test_a_snapshot_keeps_the_incidents_and_their_repair():
    from scheduler.snapshot import dumps, loads

    engine = _engine()
    run_drill(engine, "node", 3, drill_id=9)
    restored = loads(dumps(engine))
    (inc,) = restored.reliability.incidents.open_incidents.values()
    assert inc.drill_id == 9
    restored.run_until(inc.expected_repair + 1.0)
    assert not restored.reliability.incidents.open_incidents
    assert restored.reliability.incidents.resolved[-1].id == inc.id
