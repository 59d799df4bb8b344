"""Alerts on the live twin: rules on figures of the live frame and of the event log, evaluated
once per frame, with hysteresis, silences and an Alertmanager webhook.

A rule (:class:`twin.alerts.models.AlertRule`) names a *figure* (:mod:`twin.alerts.figures`:
a path into the frame, a figure derived from it, or one counted per node, switch, link or GPU
from the stored event log, :mod:`twin.alerts.log_windows`), a comparison, a threshold, a
duration ``for_s`` and a severity.  A breach that lasts ``for_s`` fires an alert for its label
set; the alert resolves once the figure has been clear (no longer beyond ``resolve_threshold``,
else the threshold; or absent) for ``resolve_for_s`` (else ``for_s``): it cannot fire and
resolve within its own duration.

:func:`evaluate` runs inside :func:`twin.live.services.live_state_write`, before the frame is
stored and broadcast: it reads the rules and active silences (cached, re-read every
``ALERT_RULES_REFRESH_S`` wall seconds or after an edit in this process), reads only the event
log rows it has not seen, touches the database for alerts only when one fires or resolves (or
a silence over a firing one ends), and puts ``{"firing": n}`` into the frame for the nav badge.
It never raises: an exception is logged once (until evaluation succeeds again) and the frame
goes on without ``alerts``.

``for_s`` counts simulated seconds (the frame's clock), except for
:data:`~twin.alerts.figures.WALL_FIGURES` (mirror source lag), which count wall seconds: a
paused or slow engine does not stop a source from going quiet.

A firing alert that matches an active silence (:mod:`twin.alerts.silences`) is recorded and
shown, but its webhook message waits: it goes out if the alert still fires when the silence
ends.  A resolve is sent for every alert whose firing was sent.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, fields

from django.db import transaction
from django.utils import timezone

from scheduler.frame_schema import LostFrame, StoredFrame
from twin import app_setting
from twin.alerts import silences as silencing
from twin.alerts.entities import Labeller, entities_fallback
from twin.alerts.figures import (  # noqa: F401 (the figures' names, as before)
    COMPARE,
    DERIVED,
    LOG_FIGURES,
    RATES,
    WALL_FIGURES,
    figure_values,
    frame_path,
    rule_errors,
    value_text,
)
from twin.alerts.log_windows import EventLog, LogWindows, throttle_incidents
from twin.alerts.models import Alert, AlertRule
from twin.alerts.shipped import DEFAULT_RULES, SHIPPED, ShippedRule  # noqa: F401 (as before)
from twin.alerts.webhook import webhook, webhook_payload, webhook_send  # noqa: F401
from twin.audit.models import AuditEntry

logger = logging.getLogger(__name__)


def rules_seed() -> int:
    """Create the shipped rules that are missing (by name); returns how many were created."""
    have = set(AlertRule.objects.values_list("name", flat=True))
    new = [AlertRule(**spec.fields()) for spec in SHIPPED if spec.name not in have]
    AlertRule.objects.bulk_create(new)
    return len(new)


# ----------------------------------------------------------------- the evaluator
@dataclass(frozen=True)
class Rule(ShippedRule):
    """A stored rule as the evaluator holds it: the shipped rule's fields and its row id."""
    id: int = 0

    @property
    def holds_at(self) -> float:
        return self.threshold if self.resolve_threshold is None else self.resolve_threshold

    @property
    def clear_for(self) -> float:
        return self.for_s if self.resolve_for_s is None else self.resolve_for_s


def _key(rule_id: int, labels: dict) -> tuple:
    return (rule_id, tuple(sorted(labels.items())))


class Evaluator:
    """One process's alert state: rules and silences (cached), pending breaches, firing alerts
    by key, clearing alerts, and the event-log windows."""

    def __init__(self, *, wall: Callable[[], float] = time.monotonic):
        self.wall = wall
        self.rules: list[Rule] | None = None
        self.loaded_at = -math.inf
        self.silences: list = []
        self.pending: dict[tuple, float] = {}     # key -> clock when the breach began
        self.clearing: dict[tuple, float] = {}    # firing key -> clock when it went clear
        self.firing: dict[tuple, int] | None = None  # key -> Alert id
        self.held: dict[int, object] = {}         # Alert id -> the silence holding its news
        self.rates: dict[tuple, tuple[float, float]] = {}  # key -> (t_sim, total) last seen
        self.windows = LogWindows()
        self.labeller: tuple[str, Labeller] | None = None  # (log key, its labeller)
        self.failed = False

    def forget_rules(self) -> None:
        self.loaded_at = -math.inf

    def _load(self) -> None:
        now = self.wall()
        if self.rules is None or now - self.loaded_at >= app_setting("ALERT_RULES_REFRESH_S"):
            self.rules = [Rule(id=r.id, **{f.name: getattr(r, f.name)
                                           for f in fields(ShippedRule)})
                          for r in AlertRule.objects.filter(enabled=True)]
            self.silences = silencing.silences_active()
            self.loaded_at = now
        if self.firing is None:  # a restart keeps what was firing, and what a silence holds
            self.firing = {}
            for pk, rule_id, labels, silence in (Alert.objects.filter(state=Alert.State.FIRING)
                                                 .values_list("id", "rule_id", "labels",
                                                              "silence")):
                self.firing[_key(rule_id, labels or {})] = pk
                if silence is not None:
                    self.held[pk] = silence

    def _values(self, rule: Rule, frame: StoredFrame, t_sim: float) -> list:
        if rule.figure in LOG_FIGURES:
            return self.windows.values(rule.figure, t_sim=t_sim, window_s=rule.window_s or 0.0)
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

    def _advance_log(self, log: EventLog | None, frame: StoredFrame, t_sim: float) -> None:
        log_rules = [r for r in self.rules if r.figure in LOG_FIGURES]
        if log is None or not log_rules:
            return
        self.windows.advance(log, t_sim=t_sim,
                             horizon_s=max([r.window_s or 0.0 for r in log_rules] + [0.0]),
                             labels=self._labeller(log).labels)
        self.windows.close_throttles(throttle_incidents(frame))

    def evaluate(self, *, frame: StoredFrame, t_sim: float, log: EventLog | None = None) -> int:
        """Advance every rule by one frame; returns the number of alerts firing."""
        self._load()
        self._advance_log(log, frame, t_sim)
        now_wall = self.wall()
        seen, rules = set(), {r.id: r for r in self.rules}
        for rule in self.rules:
            clock = now_wall if rule.figure in WALL_FIGURES else t_sim
            compare = COMPARE[rule.comparison]
            for labels, value in self._values(rule, frame, t_sim):
                key = _key(rule.id, labels)
                if key in self.firing:
                    if compare(value, rule.holds_at):
                        seen.add(key)
                    continue
                if not compare(value, rule.threshold):
                    continue
                seen.add(key)
                since = self.pending.get(key)
                if since is None or since > clock:  # new, or the engine went back in time
                    since = self.pending[key] = clock
                if clock - since >= rule.for_s:
                    self.firing[key] = self._fire(rule, labels, value, t_sim, log)
        self.pending = {k: self.pending[k] for k in seen if k in self.pending
                        and k not in self.firing}  # a lapse starts the wait again
        for key in list(self.firing):
            rule = rules.get(key[0])
            if rule is None:  # disabled or deleted: its alerts resolve now
                self._resolve(self.firing.pop(key), t_sim)
                self.clearing.pop(key, None)
                continue
            if key in seen:
                self.clearing.pop(key, None)
                continue
            clock = now_wall if rule.figure in WALL_FIGURES else t_sim
            since = self.clearing.get(key)
            if since is None or since > clock:
                since = self.clearing[key] = clock
            if clock - since >= rule.clear_for:
                self._resolve(self.firing.pop(key), t_sim)
                del self.clearing[key]
        self._release_held()
        return len(self.firing)

    # ----------------------------------------------------------------- fire, resolve, notify
    def _labeller(self, log: EventLog | None) -> Labeller:
        key = log.key if log is not None else ""
        if self.labeller is None or self.labeller[0] != key:
            cluster = log.cluster() if log is not None and log.cluster is not None else None
            self.labeller = (key, Labeller(cluster))
        return self.labeller[1]

    def _fire(self, rule: Rule, labels: dict, value: float, t_sim: float,
              log: EventLog | None) -> int:
        full = {"alertname": rule.name, "severity": rule.severity, **labels}
        silence = silencing.silence_matching(full, self.silences)
        try:
            entities = self._labeller(log).entities_of(labels)
        except Exception:  # names are a courtesy: the alert fires without them
            logger.exception("alerts: could not name the labels %s", labels)
            entities = entities_fallback(labels)
        alert = Alert.objects.create(rule_id=rule.id, labels=labels, value=value,
                                     started_at=timezone.now(), t_sim=t_sim,
                                     entities=entities, silence=silence,
                                     notified=silence is None)
        logger.warning("alert %s fired: %s = %s (%s %g) %s%s", rule.name, rule.figure,
                       value_text(rule.figure, value), rule.comparison, rule.threshold,
                       labels or "", f" silenced by #{silence.pk}" if silence else "")
        if silence is None:
            webhook_send(alert.pk)
        else:
            self.held[alert.pk] = silence.pk
        return alert.pk

    def _resolve(self, alert_id: int, t_sim: float) -> None:
        Alert.objects.filter(pk=alert_id, state=Alert.State.FIRING).update(
            state=Alert.State.RESOLVED, resolved_at=timezone.now(), t_sim_resolved=t_sim)
        if self.held.pop(alert_id, None) is None:  # its firing was sent: so is its resolve
            webhook_send(alert_id)

    def _release_held(self) -> None:
        """Send the firing of alerts whose silence has ended (unless another holds them)."""
        if not self.held:
            return
        now = timezone.now()
        active = {s.pk: s for s in self.silences if s.ends_at > now}
        for alert_id in [a for a, s in self.held.items() if s not in active]:
            alert = Alert.objects.select_related("rule").filter(pk=alert_id).first()
            if alert is None:
                del self.held[alert_id]
                continue
            full = {"alertname": alert.rule.name, "severity": alert.rule.severity,
                    **(alert.labels or {})}
            other = silencing.silence_matching(full, list(active.values()))
            if other is not None:
                self.held[alert_id] = other.pk
                Alert.objects.filter(pk=alert_id).update(silence=other)
                continue
            del self.held[alert_id]
            Alert.objects.filter(pk=alert_id).update(silence=None, notified=True)
            webhook_send(alert_id)


_evaluator = Evaluator()


def evaluate(*, frame: StoredFrame | LostFrame, t_sim: float, log: EventLog | None = None
             ) -> None:
    """The hook in ``live_state_write``: put ``{"firing": n}`` in ``frame``; never raises.
    ``log`` reads the run's stored event log (``None``: no log figures this frame).  A
    :class:`~scheduler.frame_schema.LostFrame` has no figures: nothing is evaluated (what
    fires keeps firing, nothing resolves for lack of data)."""
    try:
        if frame.get("lost") is True:  # twin.live.stored.frame_lost; alerts sit below live
            _evaluator._load()
            frame["alerts"] = {"firing": len(_evaluator.firing)}
            return
        frame["alerts"] = {"firing": _evaluator.evaluate(frame=frame, t_sim=t_sim, log=log)}
        _evaluator.failed = False
    except Exception:
        if not _evaluator.failed:
            logger.exception("alerts: evaluation failed; the frame goes on without alerts")
        _evaluator.failed = True


def rules_changed() -> None:
    """Re-read the rules and silences at the next frame (an edit in this process; others
    within ``ALERT_RULES_REFRESH_S``)."""
    _evaluator.forget_rules()


silences_changed = rules_changed


def forget_process_state() -> None:
    """Tests: a fresh evaluator (no cached rules, breaches, windows or firing alerts)."""
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
