"""Silences: staff mute the notifications of matching alerts until a time, saying why.

A silence's matchers are label -> value pairs (``alertname``, ``severity`` and the rule's labels:
``tenant``, ``node``, ``switch`` ...); a value may use ``*`` and ``?`` wildcards; an alert
matches when every pair matches.  The evaluator (:mod:`twin.alerts.rules`) records a silenced
alert as usual and shows it silenced, but sends no webhook for it; when the silence ends and the
alert still fires, its notification goes out then.  Creating and expiring are audited.
"""

from __future__ import annotations

import fnmatch
import re
from datetime import datetime, timedelta

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from twin.alerts.models import Silence
from twin.audit.models import AuditEntry

LONGEST = timedelta(days=30)
"""The longest a silence may last (renew it to keep it)."""
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
SILENCE_DENIED = "silencing alerts is for staff"


def matchers_parse(text: str) -> dict[str, str]:
    """``"alertname=tenant-over-quota, tenant=research"`` -> a dict; ``ValueError`` with one
    message for a pair without ``=``, a bad label name or a label given twice."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in (text or "").replace("\n", ",").split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip().strip('"')
        if not sep or not value:
            raise ValueError(f"{part[:60]!r}: write label=value (e.g. tenant=research)")
        if not _KEY.match(key):
            raise ValueError(f"{key[:60]!r} is not a label name (letters, digits, _)")
        if key in out:
            raise ValueError(f"label {key!r} is given twice")
        out[key] = value[:200]
    return out


def silence_errors(*, matchers, starts_at, ends_at, comment) -> dict[str, str]:
    """What is wrong with a silence (field -> one message); empty when it is valid."""
    errors = {}
    if (not isinstance(matchers, dict) or not matchers
            or not all(isinstance(k, str) and _KEY.match(k) and isinstance(v, str) and v
                       for k, v in matchers.items())):
        errors["matchers"] = ("give at least one label=value to match (alertname, severity, "
                              "tenant, node, switch ...)")
    if not (comment or "").strip():
        errors["comment"] = "say why (for whoever is on call next)"
    if isinstance(starts_at, datetime) and isinstance(ends_at, datetime):
        if ends_at <= starts_at:
            errors["ends_at"] = "a silence must end after it starts"
        elif ends_at - starts_at > LONGEST:
            errors["ends_at"] = f"a silence lasts at most {LONGEST.days} days: renew it later"
    return errors


def matches(matchers: dict, labels: dict) -> bool:
    """Whether every matcher matches ``labels`` (``*`` and ``?`` are wildcards)."""
    return all(k in labels and fnmatch.fnmatchcase(str(labels[k]), str(v))
               for k, v in matchers.items())


def silences_active(*, now: datetime | None = None) -> list[Silence]:
    now = now or timezone.now()
    return list(Silence.objects.filter(starts_at__lte=now, ends_at__gt=now)
                .order_by("ends_at"))


def silence_matching(labels: dict, silences: list[Silence]) -> Silence | None:
    """The matching silence that lasts longest, or ``None``."""
    hits = [s for s in silences if matches(s.matchers, labels)]
    return max(hits, key=lambda s: s.ends_at) if hits else None


def _audit(user, action: str, silence: Silence) -> None:
    AuditEntry.objects.create(user=user, username=user.get_username(), action=action,
                              target=f"silence {silence.pk}",
                              detail={"matchers": silence.matchers,
                                      "ends_at": silence.ends_at.isoformat(),
                                      "comment": silence.comment})


def silence_create(*, user, matchers: dict, ends_at: datetime, comment: str) -> Silence:
    """A silence from now until ``ends_at`` by ``user`` (staff), audited.  Raises
    ``PermissionDenied``, or ``ValueError`` with one message per bad field."""
    if not getattr(user, "is_staff", False):
        raise PermissionDenied(SILENCE_DENIED)
    now = timezone.now()
    errors = silence_errors(matchers=matchers, starts_at=now, ends_at=ends_at, comment=comment)
    if errors:
        raise ValueError("; ".join(errors.values()))
    with transaction.atomic():
        silence = Silence.objects.create(matchers=matchers, starts_at=now, ends_at=ends_at,
                                         created_by=user, created_by_name=user.get_username(),
                                         comment=comment.strip())
        _audit(user, "silence_create", silence)
    _changed()
    return silence


def silence_expire(*, user, silence_id: int) -> Silence:
    """End a silence now (staff), audited.  Raises ``Silence.DoesNotExist``,
    ``PermissionDenied`` or ``ValueError`` (it has ended already)."""
    if not getattr(user, "is_staff", False):
        raise PermissionDenied(SILENCE_DENIED)
    now = timezone.now()
    with transaction.atomic():
        silence = Silence.objects.select_for_update().get(pk=silence_id)
        if silence.ends_at <= now:
            raise ValueError(f"silence {silence_id} has ended already")
        silence.ends_at = max(now, silence.starts_at)
        silence.save(update_fields=["ends_at"])
        _audit(user, "silence_expire", silence)
    _changed()
    return silence


def _changed() -> None:
    from twin.alerts import rules  # the evaluator re-reads silences at its next frame

    rules.silences_changed()
