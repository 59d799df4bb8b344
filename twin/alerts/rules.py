"""Alerts on the live twin: rules on any figure of the live frame, evaluated once per frame.

A rule (:class:`twin.models.AlertRule`) names a *figure*, a comparison, a threshold, a
duration ``for_s`` and a severity.  A figure is either a dotted path into the frame
(``util.down``, ``power.throttled_gpus``, ``mirror.telemetry.temp_max_c``; an integer segment
indexes a list) or one of :data:`DERIVED`, computed from the frame (a tenant's used/quota ratio,
the hottest link cell, the longest queue wait …).  A derived figure may give one value per
label set (one per tenant, one per job): each fires and resolves on its own.

:func:`evaluate` runs inside :func:`twin.live.services.live_state_write`, before the frame is stored
and broadcast: it reads the rules (cached, re-read every ``ALERT_RULES_REFRESH_S`` wall seconds
or after an edit in this process), touches the database only when an alert fires or resolves,
and puts ``{"firing": n}`` into the frame for the nav badge.  It never raises: an exception is
logged once (until evaluation succeeds again) and the frame goes on without ``alerts``.

``for_s`` counts simulated seconds (the frame's clock), except for :data:`WALL_FIGURES`
(mirror source lag), which count wall seconds: a paused or slow engine does not stop a source
from going quiet.

On fire and resolve, when ``ALERT_WEBHOOK_URL`` is set, Alertmanager's webhook JSON (version
"4": ``status``, ``alerts[]`` with ``labels``, ``annotations``, ``startsAt``, ``endsAt``,
``fingerprint``; the format Prometheus Alertmanager's ``webhook_config`` sends) is POSTed from
one background thread (:class:`Webhook`) with a timeout and bounded retries; a full queue
drops the message, and every failure is logged and counted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import operator
import queue
import re
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from scheduler.frame_schema import LostFrame, StoredFrame
from twin import app_setting
from twin.alerts.models import Alert, AlertRule
from twin.audit.models import AuditEntry

logger = logging.getLogger(__name__)

COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
MAX_FOR_S = 30 * 86400.0
"""The longest duration a rule may wait (30 days, simulated or wall)."""
PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+){0,7}$")
FRAME_ROOTS = frozenset({
    "t", "util", "mfu", "goodput", "loss_pp", "ledger_gpu_hours", "jobs", "tenants",
    "inference", "interruptions", "failures", "power", "mirror", "ettr", "lag_ticks", "speed",
    "sources", "queue", "running_jobs", "heatmaps", "fleet", "overview"})
"""First segments a path may start with: the live frame's keys (``ettr``, ``fleet`` and
``overview`` are accepted for frames that carry them; an absent figure never fires)."""

Values = list[tuple[dict, float]]  # (labels, value) pairs


def _num(x) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def frame_path(frame: dict, path: str):
    """The value at a dotted ``path`` of ``frame`` (``None`` if any step is missing)."""
    node = frame
    for part in path.split("."):
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _tenant_quota_ratio(frame: StoredFrame) -> Values:
    return [({"tenant": str(t["tenant"])}, t["used_gpus"] / t["quota_gpus"])
            for t in frame["tenants"] if t["quota_gpus"]]


def _down_pct(frame: StoredFrame) -> Values:
    util = frame["util"]
    return [({}, 100.0 * util["down"] / util["gpus"])] if util["gpus"] else []


def _links_util_max(frame: StoredFrame) -> Values:
    cells = [v for hm in frame["heatmaps"].get("links", [])
             for row in hm["z"] for v in row if _num(v) is not None]
    return [({}, max(cells))] if cells else []


def _outlet_max(frame: StoredFrame) -> Values:
    hm = frame["heatmaps"]["racks"].get("outlet_c")  # only with the power model
    if hm is None:
        return []
    cells = [v for row in hm["z"] for v in row if _num(v) is not None and v != hm["empty"]]
    return [({}, max(cells))] if cells else []


def _queue_wait_max(frame: StoredFrame) -> Values:
    waits = [q["wait_h"] for q in frame["queue"] if _num(q["wait_h"]) is not None]
    return [({}, max(waits))] if waits else []


def _job_mfu(frame: StoredFrame) -> Values:
    return [({"job": str(j["name"])}, j["mfu"]) for j in frame["running_jobs"]
            if j["state"] == "running" and _num(j["mfu"]) is not None]


def _source_lag_max(frame: StoredFrame) -> Values:
    sources = frame["sources"]  # None: not a mirror
    if sources is None:
        return []
    ages = [s["age_s"] for s in sources.values() if _num(s["age_s"]) is not None]
    return [({}, max(ages))] if ages else []


def _xid_total(frame: StoredFrame) -> Values:
    mirror = frame["mirror"]  # None: not a mirror
    if mirror is None:
        return []
    return [({}, float(sum(v for v in mirror["xid"].values() if _num(v) is not None)))]


DERIVED: dict[str, tuple[str, Callable[[StoredFrame], Values]]] = {
    "util.down_pct": ("GPUs down, % of the fleet", _down_pct),
    "tenants.quota_ratio": ("a tenant's GPUs used / its quota (one per tenant)",
                            _tenant_quota_ratio),
    "links.util_max": ("the hottest cell of the link heatmaps (0-1; at 100k GPUs a cell "
                       "averages several switches)", _links_util_max),
    "racks.outlet_max_c": ("the hottest rack outlet cell, C", _outlet_max),
    "queue.wait_h_max": ("the longest wait in the queue's first rows, simulated h",
                         _queue_wait_max),
    "jobs.mfu": ("a running job's MFU (one per job, the frame's largest 50)", _job_mfu),
    "sources.lag_max_s": ("the oldest mirror source's age, wall s", _source_lag_max),
    "mirror.xid_per_h": ("XID errors reported per simulated hour (mirror)", _xid_total),
}
"""Figures computed from the frame: name -> (what it is, function)."""
RATES = frozenset({"mirror.xid_per_h"})  # the function gives a running total; alerts use its rate
WALL_FIGURES = frozenset({"sources.lag_max_s"})

ETTR_FLOOR = 0.90
"""Effective training time ratio below which a run is worse than published large runs: the
Llama 3 report (Dubey et al. 2024, sec. 3.3.4) and MegaScale (NSDI 2024) both report more than
90 % effective training time.  Override the rule in the admin for a different target."""
MFU_FLOOR = 0.19
"""Half the low end of the Llama 3 report's 38-43 % BF16 MFU (Dubey et al. 2024, Table 4): a
running job below it is worth a look.  The factor one half is assumed."""
GPU_TEMP_LIMIT_C = 85.0
"""Assumed: a GPU temperature to warn at, below the throttle points of data-centre GPUs (no
published figure was checked for every model the mirror may report)."""
RACK_OUTLET_LIMIT_C = 45.0  # assumed: a hot-aisle outlet temperature worth a warning
DOWN_PCT_LIMIT = 2.0  # assumed: share of the fleet down, %
QUEUE_WAIT_LIMIT_H = 24.0  # assumed: the longest queue wait, simulated h
LINK_SATURATION = 0.95  # assumed: a link heatmap cell this busy (0-1) is saturated
XID_STORM_PER_H = 60.0  # assumed: XID errors per simulated hour across the mirrored fleet
SOURCE_LAG_LIMIT_S = 120.0  # assumed: a mirror source quiet this long (wall s) is lagging

DEFAULT_RULES = [
    # name, figure, comparison, threshold, for_s, severity, description
    ("gpus-down", "util.down_pct", ">", DOWN_PCT_LIMIT, 600.0, "warning",
     "More of the fleet is down than spares and repairs keep up with (threshold assumed)."),
    ("ettr-low", "ettr", "<", ETTR_FLOOR, 3600.0, "warning",
     "Effective training time below the >90 % published by Llama 3 and MegaScale."),
    ("job-mfu-low", "jobs.mfu", "<", MFU_FLOOR, 3600.0, "info",
     "A running job's MFU is under half the Llama 3 report's 38 %."),
    ("queue-wait-long", "queue.wait_h_max", ">", QUEUE_WAIT_LIMIT_H, 0.0, "warning",
     "A job has waited longer than a day (threshold assumed)."),
    ("tenant-over-quota", "tenants.quota_ratio", ">", 1.0, 300.0, "warning",
     "A tenant holds more GPUs than its quota (borrowed GPUs, preemptible by their owners)."),
    ("link-saturated", "links.util_max", ">=", LINK_SATURATION, 600.0, "warning",
     "A fabric link (heatmap cell) is saturated (threshold assumed)."),
    ("rack-power-capped", "power.throttled_gpus", ">", 0.0, 300.0, "warning",
     "A rack's demand exceeds its power budget: its GPUs are throttled."),
    ("rack-outlet-hot", "racks.outlet_max_c", ">", RACK_OUTLET_LIMIT_C, 300.0, "warning",
     "A rack's outlet air is hot (threshold assumed)."),
    ("gpu-temperature", "mirror.telemetry.temp_max_c", ">", GPU_TEMP_LIMIT_C, 300.0,
     "critical", "The hottest GPU the mirror reads is near throttling (threshold assumed)."),
    ("xid-storm", "mirror.xid_per_h", ">", XID_STORM_PER_H, 600.0, "critical",
     "Many XID errors per hour in the mirrored fleet (threshold assumed)."),
    ("mirror-lag", "sources.lag_max_s", ">", SOURCE_LAG_LIMIT_S, 60.0, "warning",
     "A mirror source has not answered for two minutes (wall clock; threshold assumed)."),
]
"""The rules shipped (``0014_alerts`` creates them; ``rules_seed`` restores missing ones)."""


def rules_seed() -> int:
    """Create the shipped rules that are missing (by name); returns how many were created."""
    have = set(AlertRule.objects.values_list("name", flat=True))
    new = [AlertRule(name=n, figure=f, comparison=c, threshold=t, for_s=d, severity=s,
                       description=text)
           for n, f, c, t, d, s, text in DEFAULT_RULES if n not in have]
    AlertRule.objects.bulk_create(new)
    return len(new)


def rule_errors(*, figure, threshold, for_s) -> dict[str, str]:
    """What is wrong with a rule's values (field -> one message); empty when it is valid."""
    errors = {}
    if not isinstance(figure, str) or not PATH.match(figure or ""):
        errors["figure"] = (f"{figure!r} is not a figure: give a dotted path in the live frame "
                            "such as util.down, or one of " + ", ".join(sorted(DERIVED)))
    elif figure not in DERIVED and figure.split(".")[0] not in FRAME_ROOTS:
        errors["figure"] = (f"{figure!r} does not start with a key of the live frame ("
                            + ", ".join(sorted(FRAME_ROOTS)) + ") nor is it a derived figure ("
                            + ", ".join(sorted(DERIVED)) + ")")
    if _num(threshold) is None:
        errors["threshold"] = f"threshold must be a finite number, not {threshold!r}"
    if _num(for_s) is None or not 0 <= float(for_s) <= MAX_FOR_S:
        errors["for_s"] = f"for_s must be a number of seconds from 0 to {MAX_FOR_S:.0f}"
    return errors


def figure_values(figure: str, frame: StoredFrame) -> Values:
    """The figure's values in ``frame``: ``[(labels, value), ...]`` (empty when absent)."""
    if figure in DERIVED:
        return [(labels, float(v)) for labels, v in DERIVED[figure][1](frame)
                if _num(v) is not None]
    value = _num(frame_path(frame, figure))
    return [] if value is None else [({}, value)]


# ----------------------------------------------------------------- the evaluator
@dataclass(frozen=True)
class Rule:
    id: int
    name: str
    figure: str
    comparison: str
    threshold: float
    for_s: float
    severity: str
    description: str


def _key(rule_id: int, labels: dict) -> tuple:
    return (rule_id, tuple(sorted(labels.items())))


class Evaluator:
    """One process's alert state: rules (cached), pending breaches, firing alerts by key."""

    def __init__(self, *, wall: Callable[[], float] = time.monotonic):
        self.wall = wall
        self.rules: list[Rule] | None = None
        self.loaded_at = -math.inf
        self.pending: dict[tuple, float] = {}     # key -> clock when the breach began
        self.firing: dict[tuple, int] | None = None  # key -> Alert id
        self.rates: dict[tuple, tuple[float, float]] = {}  # key -> (t_sim, total) last seen
        self.failed = False

    def forget_rules(self) -> None:
        self.loaded_at = -math.inf

    def _load(self) -> None:
        now = self.wall()
        if self.rules is None or now - self.loaded_at >= app_setting("ALERT_RULES_REFRESH_S"):
            self.rules = [Rule(r.id, r.name, r.figure, r.comparison, r.threshold, r.for_s,
                               r.severity, r.description)
                          for r in AlertRule.objects.filter(enabled=True)]
            self.loaded_at = now
        if self.firing is None:  # a restart keeps what was firing
            self.firing = {_key(rule_id, labels or {}): pk for pk, rule_id, labels in
                           Alert.objects.filter(state=Alert.State.FIRING)
                           .values_list("id", "rule_id", "labels")}

    def _values(self, rule: Rule, frame: StoredFrame, t_sim: float) -> Values:
        values = figure_values(rule.figure, frame)
        if rule.figure not in RATES:
            return values
        out = []
        for labels, total in values:
            key = _key(rule.id, labels)
            last = self.rates.get(key)
            self.rates[key] = (t_sim, total)
            if last is not None and t_sim > last[0] and total >= last[1]:
                out.append((labels, (total - last[1]) * 3600.0 / (t_sim - last[0])))
        return out

    def evaluate(self, *, frame: StoredFrame, t_sim: float) -> int:
        """Advance every rule by one frame; returns the number of alerts firing."""
        self._load()
        now_wall = self.wall()
        breaching = set()
        for rule in self.rules:
            clock = now_wall if rule.figure in WALL_FIGURES else t_sim
            for labels, value in self._values(rule, frame, t_sim):
                key = _key(rule.id, labels)
                if not COMPARE[rule.comparison](value, rule.threshold):
                    continue
                breaching.add(key)
                since = self.pending.get(key)
                if since is None or since > clock:  # new, or the engine went back in time
                    since = self.pending[key] = clock
                if key not in self.firing and clock - since >= rule.for_s:
                    self.firing[key] = _fire(rule, labels, value, t_sim)
        for key in [k for k in self.firing if k not in breaching]:
            _resolve(self.firing.pop(key), t_sim)
        self.pending = {k: self.pending[k] for k in breaching}  # a lapse starts the wait again
        return len(self.firing)


def _fire(rule: Rule, labels: dict, value: float, t_sim: float) -> int:
    alert = Alert.objects.create(rule_id=rule.id, labels=labels, value=value,
                                   started_at=timezone.now(), t_sim=t_sim)
    logger.warning("alert %s fired: %s = %g (%s %g) %s", rule.name, rule.figure, value,
                   rule.comparison, rule.threshold, labels or "")
    webhook_send(alert.pk)
    return alert.pk


def _resolve(alert_id: int, t_sim: float) -> None:
    Alert.objects.filter(pk=alert_id, state=Alert.State.FIRING).update(
        state=Alert.State.RESOLVED, resolved_at=timezone.now(), t_sim_resolved=t_sim)
    webhook_send(alert_id)


_evaluator = Evaluator()


def evaluate(*, frame: StoredFrame | LostFrame, t_sim: float) -> None:
    """The hook in ``live_state_write``: put ``{"firing": n}`` in ``frame``; never raises.
    A :class:`~scheduler.frame_schema.LostFrame` has no figures: nothing is evaluated (what
    fires keeps firing, nothing resolves for lack of data)."""
    try:
        if frame.get("lost") is True:  # twin.live.stored.frame_lost; alerts sit below live
            _evaluator._load()
            frame["alerts"] = {"firing": len(_evaluator.firing)}
            return
        frame["alerts"] = {"firing": _evaluator.evaluate(frame=frame, t_sim=t_sim)}
        _evaluator.failed = False
    except Exception:
        if not _evaluator.failed:
            logger.exception("alerts: evaluation failed; the frame goes on without alerts")
        _evaluator.failed = True


def rules_changed() -> None:
    """Re-read the rules at the next frame (an edit in this process; others within
    ``ALERT_RULES_REFRESH_S``)."""
    _evaluator.forget_rules()


def forget_process_state() -> None:
    """Tests: a fresh evaluator (no cached rules, breaches or firing alerts)."""
    global _evaluator
    _evaluator = Evaluator()


# ----------------------------------------------------------------- acknowledging
def alert_acknowledge(*, alert_id: int, user) -> Alert:
    """Mark an alert acknowledged by ``user`` (staff), audited.  Raises ``Alert.DoesNotExist``,
    ``PermissionDenied`` or ``ValueError`` (already acknowledged)."""
    from django.core.exceptions import PermissionDenied

    if not getattr(user, "is_staff", False):
        raise PermissionDenied("acknowledging alerts is for staff")
    with transaction.atomic():
        alert = Alert.objects.select_for_update().select_related("rule").get(pk=alert_id)
        if alert.acknowledged_at is not None:
            raise ValueError(f"alert {alert_id} was acknowledged by "
                             f"{alert.acknowledged_by or 'a deleted account'} already")
        alert.acknowledged_by, alert.acknowledged_at = user, timezone.now()
        alert.save(update_fields=["acknowledged_by", "acknowledged_at"])
        AuditEntry.objects.create(user=user, username=user.get_username(),
                                    action="alert_ack", target=f"alert {alert.pk}",
                                    detail={"rule": alert.rule.name, "labels": alert.labels,
                                            "state": alert.state})
    return alert


def alert_json(alert: Alert) -> dict:
    return {"id": alert.pk, "rule": alert.rule.name, "figure": alert.rule.figure,
            "comparison": alert.rule.comparison, "threshold": alert.rule.threshold,
            "severity": alert.rule.severity, "state": alert.state, "labels": alert.labels,
            "value": alert.value, "t_sim": alert.t_sim, "started_at": alert.started_at.isoformat(),
            "resolved_at": alert.resolved_at and alert.resolved_at.isoformat(),
            "t_sim_resolved": alert.t_sim_resolved,
            "acknowledged_by": alert.acknowledged_by.get_username()
            if alert.acknowledged_by else None,
            "acknowledged_at": alert.acknowledged_at and alert.acknowledged_at.isoformat()}


# ----------------------------------------------------------------- the webhook out
ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt of an alert still firing


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def webhook_payload(alert: Alert) -> dict:
    """Alertmanager's webhook JSON (version "4") for one alert that fired or resolved."""
    rule = alert.rule
    labels = {"alertname": rule.name, "severity": rule.severity, "figure": rule.figure,
              **{str(k): str(v) for k, v in (alert.labels or {}).items()}}
    fingerprint = hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]
    annotations = {"summary": f"{rule.figure} = {alert.value:g} ({rule.comparison} "
                              f"{rule.threshold:g} for {rule.for_s:g} s)",
                   "description": rule.description,
                   "t_sim": f"{alert.t_sim:.0f}"}
    item = {"status": alert.state, "labels": labels, "annotations": annotations,
            "startsAt": _iso(alert.started_at),
            "endsAt": _iso(alert.resolved_at) if alert.resolved_at else ZERO_TIME,
            "generatorURL": "/alerts/", "fingerprint": fingerprint}
    common = {"alertname": rule.name, "severity": rule.severity}
    return {"version": "4", "receiver": "clustertwin", "status": alert.state,
            "alerts": [item], "groupLabels": {"alertname": rule.name},
            "commonLabels": {**labels}, "commonAnnotations": annotations,
            "externalURL": "", "truncatedAlerts": 0,
            "groupKey": "{}:" + "{" + ", ".join(f'{k}="{v}"' for k, v in common.items()) + "}"}


class Webhook:
    """One daemon thread POSTing queued payloads; ``send`` never blocks the caller."""

    def __init__(self):
        self.queue: queue.Queue = queue.Queue(maxsize=app_setting("ALERT_WEBHOOK_QUEUE"))
        self.counts = {"sent": 0, "failed": 0, "dropped": 0}
        self.thread = threading.Thread(target=self._run, name="alert-webhook", daemon=True)
        self.thread.start()

    def send(self, payload: dict, url: str) -> None:
        try:
            self.queue.put_nowait((payload, url))
        except queue.Full:
            self.counts["dropped"] += 1
            logger.warning("alert webhook: queue full, dropped a %s message", payload["status"])

    def _post(self, payload: dict, url: str) -> None:
        body = json.dumps(payload).encode()
        req = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=app_setting("ALERT_WEBHOOK_TIMEOUT_S")) as r:
            r.read()

    def _run(self) -> None:
        while True:
            payload, url = self.queue.get()
            tries = app_setting("ALERT_WEBHOOK_RETRIES") + 1
            for attempt in range(tries):
                try:
                    self._post(payload, url)
                    self.counts["sent"] += 1
                    break
                except Exception as exc:
                    if attempt + 1 == tries:
                        self.counts["failed"] += 1
                        logger.warning("alert webhook: %s not delivered after %d tries: %s",
                                       payload["status"], tries, exc)
                    else:
                        time.sleep(min(2.0 ** attempt, 30.0) * app_setting(
                            "ALERT_WEBHOOK_BACKOFF_S"))
            self.queue.task_done()


_webhook: Webhook | None = None
_webhook_lock = threading.Lock()


def webhook() -> Webhook:
    global _webhook
    with _webhook_lock:
        if _webhook is None:
            _webhook = Webhook()
    return _webhook


def webhook_send(alert_id: int) -> None:
    """Queue the alert's Alertmanager message, if a receiver is configured."""
    url = app_setting("ALERT_WEBHOOK_URL")
    if not url:
        return
    alert = Alert.objects.select_related("rule").get(pk=alert_id)
    webhook().send(webhook_payload(alert), url)
