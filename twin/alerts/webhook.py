"""The Alertmanager webhook out: each fire and resolve (unless silenced) as Alertmanager's
webhook JSON (version "4": ``status``, ``alerts[]`` with ``labels``, ``annotations``,
``startsAt``, ``endsAt``, ``fingerprint``; the format Prometheus Alertmanager's
``webhook_config`` sends), POSTed from one background thread (:class:`Webhook`) with a timeout
and bounded retries; a full queue drops the message, and every failure is logged and counted.

Labels are the rule's (``alertname``, ``severity``, ``figure``) and the alert's (engine ids and
names as kept); annotations give the value with its unit, the rule, the description, the
runbook, and each labelled entity's name and page.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import threading
import time
import urllib.request
from datetime import UTC, datetime

from twin import app_setting
from twin.alerts.entities import entities_fallback
from twin.alerts.figures import value_text
from twin.alerts.models import Alert

logger = logging.getLogger("twin.alerts.rules")

ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt of an alert still firing


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def webhook_payload(alert: Alert) -> dict:
    """Alertmanager's webhook JSON (version "4") for one alert that fired or resolved."""
    rule = alert.rule
    labels = {"alertname": rule.name, "severity": rule.severity, "figure": rule.figure,
              **{str(k): str(v) for k, v in (alert.labels or {}).items()}}
    fingerprint = hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]
    entities = alert.entities or entities_fallback(alert.labels)
    annotations = {"summary": f"{rule.figure} = {value_text(rule.figure, alert.value)} "
                              f"({rule.comparison} {value_text(rule.figure, rule.threshold)} "
                              f"for {rule.for_s:g} s)",
                   "description": rule.description,
                   "t_sim": f"{alert.t_sim:.0f}"}
    if rule.runbook_url:
        annotations["runbook_url"] = rule.runbook_url
    for e in entities:
        annotations[f"{e['key']}_name"] = e["name"]
        if e["url"]:
            annotations[f"{e['key']}_url"] = e["url"]
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
