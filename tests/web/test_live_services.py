"""Services and selectors of the live engine: drill requests, speed, pause, snapshots."""

import datetime

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from tests import frames
from twin import models as m
from twin.control import selectors as control_selectors
from twin.control import services as control_services
from twin.live import command_log
from twin.live import selectors as live_selectors
from twin.live import services as live_services


@pytest.fixture
def sent(monkeypatch):
    """Commands sent to the engine group, instead of a channel layer."""
    calls = []
    monkeypatch.setattr(control_services, "command_send",
                        lambda command, **p: calls.append((command, p)))
    return calls


@pytest.fixture
def request_drill(demo_users, django_capture_on_commit_callbacks):
    """``drill_request`` as the staff user, its on-commit dispatch run at once."""
    def request(user="staff", **kw):
        with django_capture_on_commit_callbacks(execute=True):
            return control_services.drill_request(user=demo_users[user], **kw)
    return request


def test_staff_request_a_drill_it_is_recorded_pending_and_sent(demo_users, sent, request_drill):
    drill = request_drill(kind="storage_slowdown", target="random",
                          params={"factor": 0.5, "duration_s": 600})
    assert (drill.status, drill.requested_by, drill.target) == ("pending", demo_users["staff"],
                                                                "random")
    assert sent == [("drill", {"drill_id": drill.pk, "kind": "storage_slowdown",
                               "target": "random",
                               "params": {"factor": 0.5, "duration_s": 600.0}})]
    assert control_selectors.drills_recent() == [drill]


def test_a_drill_the_engine_cannot_be_sent_stays_pending_for_the_engine_to_read(
        monkeypatch, request_drill):
    def down(command, **params):
        raise ConnectionError("redis is down")

    monkeypatch.setattr(control_services, "command_send", down)
    drill = request_drill(kind="node", target="random", params={})
    drill.refresh_from_db()
    assert drill.status == "pending"
    assert command_log.drills_pending() == [{"command": "drill", "params": {
        "drill_id": drill.pk, "kind": "node", "target": "random", "params": {}}}]


def test_a_numeric_target_travels_as_an_integer(sent, request_drill):
    request_drill(kind="node", target="12", params=None)
    assert sent[0][1]["target"] == 12


def test_an_operator_cannot_request_a_drill(sent, request_drill):
    with pytest.raises(PermissionDenied):
        request_drill(user="operator", kind="node", target="random", params={})
    assert not m.Drill.objects.exists() and not sent


@pytest.mark.parametrize("kind, target, params, says", [
    ("meteor", "random", {}, "unknown drill 'meteor'"),
    ("node", -1, {}, "non-negative"),
    ("node", "all", {}, "cannot target 'all'"),
    ("node", "rack-7", {}, "'rack-7' names nothing in this cluster"),
    ("node", 1.5, {}, "target must be"),
    ("node", "random", {"factor": 2}, "takes no parameters"),
    ("storage_slowdown", "random", {"factor": 1.5}, "at most 1"),
    ("storage_slowdown", "random", {"factor": 0}, "positive number"),
    ("storage_slowdown", "random", {"factor": "half"}, "positive number"),
    ("storage_slowdown", "random", {"duration_s": True}, "positive number"),
    ("storage_slowdown", "random", {"duration_s": float("nan")}, "positive number"),
    ("power_cap", "all", {"fraction": 1.2}, "at most 1"),
    ("inference_surge", "random", {"speed": 2}, "takes factor, duration_s"),
    ("supply_cut", 3, {}, "targets a name"),
    ("supply_cut", "H100; DROP TABLE", {}, "not a valid name"),
    ("node", "random", [1], "object of name: number"),
])
def test_bad_drills_are_refused_with_a_clear_message_and_nothing_is_created(
        sent, request_drill, kind, target, params, says):
    with pytest.raises(ValidationError) as err:
        request_drill(kind=kind, target=target, params=params)
    assert says in " ".join(err.value.messages)
    assert not m.Drill.objects.exists() and not sent


def test_named_targets_and_all_are_accepted_where_the_kind_takes_them(sent, request_drill):
    for kind, target in (("supply_cut", "H100-SXM"), ("cloud_region_loss", "aws/us-east-1"),
                         ("inference_surge", "all"), ("power_cap", "all")):
        request_drill(kind=kind, target=target, params={})
    assert [p["target"] for _, p in sent] == ["H100-SXM", "aws/us-east-1", "all", "all"]


def test_speed_and_pause_are_for_staff_with_the_drill_permission(demo_users, sent):
    with pytest.raises(PermissionDenied):
        control_services.engine_speed_set(user=demo_users["operator"], factor=10)
    with pytest.raises(PermissionDenied):
        control_services.engine_pause(user=demo_users["operator"], paused=True)
    assert control_services.engine_speed_set(user=demo_users["staff"], factor=600) == 600.0
    assert control_services.engine_pause(user=demo_users["staff"], paused=False) is False
    assert sent == [("speed", {"factor": 600.0}), ("resume", {})]


@pytest.mark.parametrize("factor", [0, -1, 10_001, "7", None, True, float("inf")])
def test_speed_out_of_range_is_refused(demo_users, sent, factor):
    with pytest.raises(ValidationError):
        control_services.engine_speed_set(user=demo_users["staff"], factor=factor)
    assert not sent


def test_only_the_newest_three_snapshots_are_kept(db):
    for t in range(5):
        live_services.engine_snapshot_save(data=b"x", t_sim=float(t), preset="dev-small", seed=0)
    assert list(m.EngineSnapshot.objects.values_list("t_sim", flat=True)) == [4.0, 3.0, 2.0]
    assert live_selectors.engine_snapshot_latest(preset="dev-small", seed=0).t_sim == 4.0
    assert live_selectors.engine_snapshot_latest(preset="dev-small", seed=1) is None


def test_live_state_is_one_row_updated_in_place(db):
    assert live_selectors.live_state_get() is None
    for seq in (1, 2):
        live_services.live_state_write(seq=seq, t_sim=60.0 * seq,
                                       frame=frames.frame(t=60.0 * seq), health="ok",
                                       last_error="", speed=60.0, paused=False)
    state = live_selectors.live_state_get()
    assert (m.LiveState.objects.count(), state.pk, state.seq, state.frame) == (
        1, 1, 2, {**frames.frame(t=120.0), "alerts": {"firing": 0}})  # the nav badge


def test_health_is_a_heartbeat_a_silent_engine_reads_as_down(db, settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "HEARTBEAT_S": 10.0}
    live_services.live_state_write(seq=1, t_sim=5.0, frame=frames.frame(t=5.0, health="ok"),
                                   health="ok", last_error="", speed=1.0, paused=False)
    assert live_selectors.live_state_get().health == "ok"
    m.LiveState.objects.update(updated_at=timezone.now() - datetime.timedelta(seconds=11))
    live = live_selectors.live_state_get()
    assert live.health == "down" and live.frame["health"] == "down"
    assert "no heartbeat" in live.last_error
    m.LiveState.objects.update(health="stopped")  # a clean stop says so itself
    assert live_selectors.live_state_get().health == "stopped"
