"""``/api/history?kind=&id=``: one node's, rack's, switch's or job's history
(:mod:`twin.live.entity_history`), in the fleet series' shape and with the same span and bucket
parameters (:mod:`twin.api.history_query`).

``id`` is what the entity's page has in its URL: a node's or rack's engine id, a switch's
inventory index, a job's name.  An unknown kind, metric or malformed id is a 400, an entity the
twin does not have a 404, each one line of JSON.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.physics.entity_figures import KINDS, METRICS
from twin.api.history_query import history_query
from twin.inventory import names as naming
from twin.inventory.names import Named, Names
from twin.live import entity_history
from twin.live import selectors as live_selectors

ID_MAX = 200
"""Characters of an ``id`` (a job's name) read."""


class EntityError(ValueError):
    """A request the entity history cannot answer: ``status`` 400 or 404, one-line message."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Entity:
    """What ``kind`` and ``id`` name: the store's ``key`` (an engine id, a job's name) and
    the thing as pages show it."""

    kind: str
    key: int | str
    named: Named


def _number(kind: str, text: str) -> int:
    if not text.isdigit() or len(text) > 18:
        raise EntityError(f"a {kind}'s id is a non-negative integer, not {text[:40]!r}", 400)
    return int(text)


def entity_resolve(*, kind: str, text: str, run: str, placement) -> Entity:
    """The entity ``kind`` and ``id`` (``text``) name in the live twin; :class:`EntityError`
    (400 for a bad kind or id, 404 for one the twin does not have)."""
    if kind not in KINDS:
        raise EntityError(f"kind must be one of {', '.join(KINDS)}, not {kind[:40]!r}", 400)
    text = text.strip()[:ID_MAX]
    if not text:
        raise EntityError(f"give the {kind}'s id", 400)
    if kind == "job":
        held = placement is not None and text in placement["jobs"]
        if not held and not entity_history.has_job(run, text):
            raise EntityError(f"job {text!r} has no history in the live twin", 404)
        return Entity(kind, text, naming.job(text))
    names = Names(live_selectors.cluster_current())
    number = _number(kind, text)
    named = {"node": names.node, "rack": names.rack, "switch": names.switch}[kind](number)
    if named is None:
        raise EntityError(f"{kind} {number} does not exist in the live twin's cluster", 404)
    key = names.switch_position(number) if kind == "switch" else number
    return Entity(kind, key, named)


def entity_history_answer(params, *, live) -> dict:
    """The answer to ``params`` (``kind``, ``id``, ``metric`` and the span's) about the run
    ``live`` shows: without ``metric``, the figures the entity's kind has; raises
    :class:`EntityError`."""
    kind = params.get("kind", "")[:40]
    entity = entity_resolve(kind=kind, text=params.get("id", ""), run=live.inventory,
                            placement=live.placement)
    head = {"kind": kind, "id": entity.named.id, "name": entity.named.name,
            "url": entity.named.url}
    metric = params.get("metric", "")[:200]
    if not metric:
        return {**head, "metrics": {m: {"label": label, "unit": unit} for m, (label, unit)
                                    in entity_history.known(live.inventory, kind).items()}}
    if metric not in METRICS[kind]:
        raise EntityError(f"unknown metric {metric[:40]!r} for a {kind}; known: "
                          f"{', '.join(METRICS[kind])}", 400)
    mirror = (live.frame or {}).get("source") == "mirror"
    try:
        answer = entity_history.series(run=live.inventory, kind=kind, entity=entity.key,
                                       metric=metric, wall_clock=mirror,
                                       **history_query(params, now=live.t_sim))
    except ValueError as exc:
        raise EntityError(str(exc), 400) from None
    return {**head, **answer}
