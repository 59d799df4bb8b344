"""An alert's labels as the UI names and links them, and engine units as alert labels.

Labels hold engine ids (``node``, ``gpu``, ``nic``, ``link``, ``rack``, ``cooling``), a switch's
inventory ``index`` (as ``/switches/<index>/``) or a name (``tenant``, ``job``).  When an alert
fires, :func:`entities_of` resolves each through :class:`twin.inventory.names.Names` once and the
alert keeps the result (a hostname, ``host:index`` for a GPU, a switch's name, with the page's
URL), so its page, API and webhook show names without reading the inventory again.
"""

from __future__ import annotations

import bisect
import functools

from twin.inventory import names
from twin.inventory.adapter import EngineIds
from twin.inventory.models import Cluster

LABEL_KINDS = {"node": "node", "gpu": "gpu", "nic": "nic", "link": "link", "rack": "rack",
               "cooling": "cooling"}
"""Labels holding an engine id, by the kind :meth:`Names.of` resolves."""


class Labeller:
    """Engine units -> labels, and labels -> names and links, for one cluster (or none)."""

    def __init__(self, cluster: Cluster | None):
        self.names = names.Names(cluster)
        self.ids = EngineIds(cluster) if cluster is not None else None

    def labels(self, unit: tuple) -> dict[str, str]:
        """The labels of an engine unit of :func:`twin.alerts.log_windows.classify`."""
        kind, number = unit[0], unit[1]
        if kind == "gpu_node":
            node = self._node_of(number)
            return {"node": str(node)} if node is not None else {"gpu": str(number)}
        if kind == "node_gpu":
            gpu = self._gpu_of(number, unit[2])
            return {"gpu": str(gpu)} if gpu is not None else {"node": str(number),
                                                              "gpu_index": str(unit[2])}
        if kind in ("switch", "leaf", "spine"):
            getter = {"switch": self.names.switch_at, "leaf": self.names.leaf,
                      "spine": self.names.spine}[kind]
            named = getter(number)
            if named is not None:
                return {"switch": str(named.id)}
            return {"switch": str(number)} if kind == "switch" else {kind: str(number)}
        return {kind: str(number)}

    @functools.cached_property
    def _first_gpus(self) -> list[int]:
        """Each engine node's first engine GPU id (the adapter's numbering, node by node)."""
        if self.ids is None:
            return []
        keys = self.ids.node_keys()
        return [self.ids.gpu(int(pk), 0) for pk in keys]

    def _gpu_of(self, node: int, index: int) -> int | None:
        first = self._first_gpus
        return first[node] + index if 0 <= node < len(first) else None

    def _node_of(self, gpu: int) -> int | None:
        first = self._first_gpus
        return bisect.bisect_right(first, gpu) - 1 if first and gpu >= 0 else None

    def entity(self, key: str, value: str) -> dict:
        """One label as ``{key, value, name, url}`` (``url`` empty when it has no page)."""
        named = None
        if key == "tenant":
            named = names.tenant(value)
        elif key == "job":
            named = names.job(value)
        elif value.isdigit() and key == "switch":
            named = self.names.switch(int(value))
        elif value.isdigit() and key in LABEL_KINDS:
            named = self.names.of(LABEL_KINDS[key], int(value))
        if named is None:
            fallback = {"node": names.node_url, "switch": names.switch_url}.get(key)
            url = fallback(int(value)) if fallback and value.isdigit() else ""
            return {"key": key, "value": value, "name": f"{key} {value}", "url": url}
        return {"key": key, "value": value, "name": named.name, "url": named.url}

    def entities_of(self, labels: dict) -> list[dict]:
        return [self.entity(str(k), str(v)) for k, v in sorted((labels or {}).items())]


def entities_fallback(labels: dict) -> list[dict]:
    """Entities of an alert stored without them (before names were kept): links from ids."""
    return Labeller(None).entities_of(labels)
