"""One naming for the web side: the core's ids -> the names and pages the UI shows, and back.

The core numbers everything (``twin.inventory.adapter.EngineIds``) and logs components as
``"<component> <unit>"`` texts: ``host 100`` and ``node 100`` (a node), ``gpu 2318``, ``leaf
10`` and ``switch 10``, ``rack 3``, ``fabric_link 7`` ...  :data:`COMPONENT_KINDS` is the one
table of those words; :class:`Names` turns any of them into a :class:`Named` (a hostname, a GPU
as ``host:index``, a switch, rack or cooling loop name, a link as ``a – b``) with the URL of its
page, and :meth:`Names.resolve` turns what a person types (a name, an id, a component text)
into the same.

Tables are read from the inventory on first use and kept for the instance's life: build one
per request (or per page of events), never per row.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass
from urllib.parse import quote

from twin.inventory.adapter import EngineIds
from twin.inventory.models import (
    Accelerator,
    Cluster,
    CoolingLoop,
    Link,
    Node,
    Rack,
    Switch,
    SwitchTier,
)

COMPONENT_KINDS: dict[str, str] = {
    # a node: the failure engine's host, software and planned units, drills', operators'
    "node": "node", "host": "node", "software": "node", "planned": "node",
    # a GPU and its NIC link, by engine GPU id
    "gpu": "gpu", "accelerator": "gpu",
    "nic": "nic", "endpoint_link": "nic",
    # switches: operators log the engine's switch position; failures and drills the unit
    # among leaves or among spines and cores
    "switch": "switch", "leaf": "leaf", "leaf_switch": "leaf",
    "spine": "spine", "spine_switch": "spine",
    # switch-to-switch links, by engine link id
    "link": "link", "fabric_link": "link", "optical_link": "link",
    # racks (a power feed is its rack's) and cooling loops (one per rack row)
    "rack": "rack", "pdu": "rack", "rack_power": "rack", "power_cap": "rack",
    "cooling": "cooling",
}
"""The words the core's log puts before a unit id, and the kind of thing the id numbers."""

KIND_WORDS: dict[str, tuple[str, ...]] = {}
for _word, _kind in COMPONENT_KINDS.items():
    KIND_WORDS.setdefault(_kind, ())
    KIND_WORDS[_kind] += (_word,)

_COMPONENT = re.compile(r"^\s*([a-z_]+)\s+(\S.*?)\s*$")


def job_url(name: str) -> str:
    return f"/jobs/{quote(name, safe='')}/"


def tenant_url(name: str) -> str:
    return f"/tenants/{quote(name, safe='')}/"


def node_url(node: int) -> str:
    return f"/nodes/{node}/"


def switch_url(index: int) -> str:
    return f"/switches/{index}/"


def rack_url(rack: int) -> str:
    return f"/racks/{rack}/"


@dataclass(frozen=True)
class Named:
    """A thing the UI shows: its ``kind`` (node, gpu, nic, switch, link, rack, cooling, job,
    tenant), its engine ``id`` (a job's or tenant's is its name), its display ``name`` and
    the ``url`` of its page (``""``: none)."""

    kind: str
    id: int | str
    name: str
    url: str = ""

    def as_json(self) -> dict:
        return {"kind": self.kind, "id": self.id, "name": self.name, "url": self.url}


def job(name: str) -> Named:
    return Named("job", name, name, job_url(name))


def tenant(name: str) -> Named:
    return Named("tenant", name, name, tenant_url(name))


class Names:
    """Engine ids <-> names and pages for one cluster (``None``: nothing resolves)."""

    def __init__(self, cluster: Cluster | None):
        self.cluster = cluster

    # ----------------------------------------------------------------- tables, read once
    @functools.cached_property
    def _nodes(self) -> tuple[list[int], list[str], list[int]]:
        """Node primary keys in id order (the engine's order), hostnames, first GPU ids."""
        if self.cluster is None:
            return [], [], []
        rows = list(Node.objects.filter(rack__hall__site__cluster=self.cluster).order_by("id")
                    .values_list("id", "hostname", "accelerator_count"))
        first, total = [], 0
        for _, _, gpus in rows:
            first.append(total)
            total += gpus
        self._gpus_total = total
        return [r[0] for r in rows], [r[1] for r in rows], first

    @functools.cached_property
    def _switches(self) -> list[tuple[int, str, str]]:
        """``(index, name, tier)`` in index order: the engine's switch positions."""
        if self.cluster is None:
            return []
        return list(Switch.objects.filter(cluster=self.cluster).order_by("index")
                    .values_list("index", "name", "tier"))

    @functools.cached_property
    def _tier_positions(self) -> tuple[list[int], list[int]]:
        """Switch positions of the leaves and of the spines and cores (the failure engine's
        ``leaf`` and ``spine`` units number them in this order)."""
        leaves = [p for p, s in enumerate(self._switches) if s[2] == SwitchTier.LEAF]
        upper = [p for p, s in enumerate(self._switches) if s[2] != SwitchTier.LEAF]
        return leaves, upper

    @functools.cached_property
    def _racks(self) -> tuple[list[int], list[str]]:
        if self.cluster is None:
            return [], []
        rows = list(Rack.objects.filter(hall__site__cluster=self.cluster).order_by("id")
                    .values_list("id", "name"))
        return [r[0] for r in rows], [r[1] for r in rows]

    @functools.cached_property
    def _loops(self) -> list[str]:
        if self.cluster is None:
            return []
        return list(CoolingLoop.objects.filter(hall__site__cluster=self.cluster)
                    .order_by("id").values_list("name", flat=True))

    def _switch_links(self):
        return Link.objects.filter(cluster=self.cluster, peer_switch__isnull=False).order_by("id")

    # ----------------------------------------------------------------- id -> name
    def node(self, node: int) -> Named | None:
        hosts = self._nodes[1]
        if not 0 <= node < len(hosts):
            return None
        return Named("node", node, hosts[node], node_url(node))

    def _gpu_at(self, gpu: int) -> tuple[int, int] | None:
        """Engine GPU id -> (engine node, index on the node)."""
        first = self._nodes[2]
        if gpu < 0 or not first or gpu >= self._gpus_total:
            return None
        n = bisect.bisect_right(first, gpu) - 1
        return n, gpu - first[n]

    def gpu(self, gpu: int) -> Named | None:
        at = self._gpu_at(gpu)
        if at is None:
            return None
        n, i = at
        return Named("gpu", gpu, f"{self._nodes[1][n]}:{i}", f"{node_url(n)}#gpu-{i}")

    def nic(self, gpu: int) -> Named | None:
        """The NIC (and its link to the leaf) of engine GPU ``gpu``."""
        at = self._gpu_at(gpu)
        if at is None:
            return None
        n, i = at
        return Named("nic", gpu, f"{self._nodes[1][n]}:{i} NIC", f"{node_url(n)}#gpu-{i}")

    def switch_at(self, position: int) -> Named | None:
        """The switch at the engine's switch ``position`` (index order)."""
        if not 0 <= position < len(self._switches):
            return None
        index, name, _ = self._switches[position]
        return Named("switch", index, name, switch_url(index))

    def switch(self, index: int) -> Named | None:
        """The switch whose inventory ``index`` is ``index``."""
        indices = [s[0] for s in self._switches]
        p = bisect.bisect_left(indices, index)
        return self.switch_at(p) if p < len(indices) and indices[p] == index else None

    def leaf(self, unit: int) -> Named | None:
        leaves = self._tier_positions[0]
        return self.switch_at(leaves[unit]) if 0 <= unit < len(leaves) else None

    def spine(self, unit: int) -> Named | None:
        upper = self._tier_positions[1]
        return self.switch_at(upper[unit]) if 0 <= unit < len(upper) else None

    def link(self, link: int) -> Named | None:
        """Switch-to-switch link ``link`` (the engine's: position in id order)."""
        if self.cluster is None or link < 0:
            return None
        row = (self._switch_links().values_list("id", "switch__name", "switch__index",
                                                "peer_switch__name")[link:link + 1])
        row = next(iter(row), None)
        if row is None:
            return None
        pk, near, near_index, far = row
        return Named("link", link, f"{near} – {far}", f"{switch_url(near_index)}#link-{pk}")

    def rack(self, rack: int) -> Named | None:
        names = self._racks[1]
        if not 0 <= rack < len(names):
            return None
        return Named("rack", rack, names[rack], rack_url(rack))

    def cooling(self, loop: int) -> Named | None:
        loops = self._loops
        return Named("cooling", loop, loops[loop]) if 0 <= loop < len(loops) else None

    def of(self, kind: str, unit: int) -> Named | None:
        """Unit ``unit`` of a kind of :data:`COMPONENT_KINDS` (``leaf``: the unit-th leaf)."""
        getter = {"node": self.node, "gpu": self.gpu, "nic": self.nic,
                  "switch": self.switch_at, "leaf": self.leaf, "spine": self.spine,
                  "link": self.link, "rack": self.rack, "cooling": self.cooling}.get(kind)
        return None if getter is None else getter(unit)

    def component(self, text: str) -> Named | None:
        """A component text of the core's log (``"host 100"``, ``"leaf_switch 3"``) by name;
        ``None`` for one that names no unit (``"storage central"``, ``"power_cap all"``)."""
        m = _COMPONENT.match(text or "")
        if m is None or m.group(1) not in COMPONENT_KINDS or not m.group(2).isdigit():
            return None
        return self.of(COMPONENT_KINDS[m.group(1)], int(m.group(2)))

    def all_of(self, kind: str, *, limit: int) -> list[Named]:
        """The first ``limit`` units of a :data:`COMPONENT_KINDS` kind, in unit order (what a
        drill of that kind can hit)."""
        if kind in ("gpu", "nic"):
            count = self._gpus_total if self._nodes[0] else 0
        elif kind == "link":
            count = (self._switch_links().count() if self.cluster is not None else 0)
            if self.cluster is None:
                return []
            rows = self._switch_links().values_list("id", "switch__name", "switch__index",
                                                    "peer_switch__name")[:min(count, limit)]
            return [Named("link", k, f"{near} – {far}", f"{switch_url(i)}#link-{pk}")
                    for k, (pk, near, i, far) in enumerate(rows)]
        else:
            count = {"node": len(self._nodes[0]), "switch": len(self._switches),
                     "leaf": len(self._tier_positions[0]), "spine": len(self._tier_positions[1]),
                     "rack": len(self._racks[0]), "cooling": len(self._loops)}.get(kind, 0)
        return [x for x in (self.of(kind, u) for u in range(min(count, limit))) if x is not None]

    # ----------------------------------------------------------------- name -> id
    def node_of(self, hostname: str) -> int | None:
        pk = Node.objects.filter(hostname=hostname).values_list("id", flat=True).first()
        return None if pk is None else self._position(self._nodes[0], pk)

    @staticmethod
    def _position(keys: list[int], pk: int) -> int | None:
        i = bisect.bisect_left(keys, pk)
        return i if i < len(keys) and keys[i] == pk else None

    def by_name(self, name: str) -> list[Named]:
        """Everything called exactly ``name``: a hostname, ``host:index`` (a GPU), a GPU
        serial, a switch, rack or cooling loop name."""
        if self.cluster is None or not name:
            return []
        found: list[Named] = []
        n = self.node_of(name)
        if n is not None:
            found.append(self.node(n))
        host, sep, index = name.rpartition(":")
        if sep and index.isdigit():
            n = self.node_of(host)
            if n is not None and int(index) < self._gpus_on(n):
                found.append(self.gpu(self._nodes[2][n] + int(index)))
        serial = (Accelerator.objects.filter(serial=name).values_list("node_id", "index")
                  .first())
        if serial is not None:
            n = self._position(self._nodes[0], serial[0])
            if n is not None:
                found.append(self.gpu(self._nodes[2][n] + serial[1]))
        for p, (_, sw_name, _) in enumerate(self._switches):
            if sw_name == name:
                found.append(self.switch_at(p))
        near, dash, far = name.partition(" – ")
        if dash:
            found += self._link_named(near.strip(), far.strip())
        found += [self.rack(r) for r, rack in enumerate(self._racks[1]) if rack == name]
        found += [self.cooling(k) for k, loop in enumerate(self._loops) if loop == name]
        return found

    def _link_named(self, a: str, b: str) -> list[Named]:
        """The switch-to-switch links between switches ``a`` and ``b`` (either way round)."""
        pks = (self._switch_links().filter(switch__name=a, peer_switch__name=b)
               | self._switch_links().filter(switch__name=b, peer_switch__name=a))
        ids = EngineIds(self.cluster)
        found = [ids.link(pk) for pk in pks.values_list("id", flat=True)[:8]]
        return [self.link(k) for k in found if k is not None]

    def _gpus_on(self, node: int) -> int:
        first = self._nodes[2]
        end = first[node + 1] if node + 1 < len(first) else self._gpus_total
        return end - first[node]

    def by_id(self, number: int) -> list[Named]:
        """What engine id ``number`` is, kind by kind (a node, a GPU, a switch, a rack ...)."""
        return [x for x in (self.node(number), self.gpu(number), self.switch(number),
                            self.rack(number), self.link(number)) if x is not None]

    def resolve(self, text: str) -> list[Named]:
        """What ``text`` names: a component text (``"host 100"``, ``"leaf_switch 3"``), a kind
        and a name (``"switch leaf-00010"``, ``"node n000100"``), a name, or an id (every
        kind's thing of that id)."""
        text = (text or "").strip()
        if not text:
            return []
        one = self.component(text)
        if one is not None:
            return [one]
        m = _COMPONENT.match(text)
        if m is not None and m.group(1) in COMPONENT_KINDS:
            kind = _BASE_KIND.get(COMPONENT_KINDS[m.group(1)], COMPONENT_KINDS[m.group(1)])
            return [x for x in self.by_name(m.group(2)) if _BASE_KIND.get(x.kind, x.kind) == kind]
        if text.isdigit():
            return self.by_id(int(text))
        return self.by_name(text)

    def unit(self, kind: str, text: str) -> int | None:
        """The unit of a :data:`COMPONENT_KINDS` kind that ``text`` names (an id, a name or a
        component text): e.g. ``unit("leaf", "leaf-00010")`` is that leaf's number among the
        leaves, ``unit("nic", "host:3")`` the GPU id.  ``None`` when it names none."""
        text = (text or "").strip()
        if text.isdigit():
            return int(text)
        for x in self.resolve(text):
            got = self._unit_of(kind, x)
            if got is not None:
                return got
        return None

    def _unit_of(self, kind: str, x: Named) -> int | None:
        if kind in ("gpu", "nic") and x.kind in ("gpu", "nic"):
            return int(x.id)
        if kind == x.kind:
            return int(x.id) if kind != "switch" else self.switch_position(int(x.id))
        if x.kind == "switch" and kind in ("leaf", "spine"):
            p = self.switch_position(int(x.id))
            group = self._tier_positions[0 if kind == "leaf" else 1]
            return self._position(group, p) if p is not None else None
        return None

    def switch_position(self, index: int) -> int | None:
        """The engine's position of the switch whose inventory ``index`` is ``index``."""
        return self._position([s[0] for s in self._switches], index)

    def aliases(self, x: Named) -> list[str]:
        """Every component text the core's log may name ``x`` by (what an event filter on
        ``x`` matches): a node is ``node N``, ``host N``, ``software N`` ...; a leaf is
        ``switch P``, ``leaf U`` and ``leaf_switch U``."""
        if x.kind in ("gpu", "nic"):
            return [f"{w} {x.id}" for k in ("gpu", "nic") for w in KIND_WORDS[k]]
        if x.kind == "switch":
            p = self.switch_position(int(x.id))
            if p is None:
                return []
            out = [f"switch {p}"]
            for kind in ("leaf", "spine"):
                u = self._position(self._tier_positions[0 if kind == "leaf" else 1], p)
                if u is not None:
                    out += [f"{w} {u}" for w in KIND_WORDS[kind]]
            return out
        return [f"{w} {x.id}" for w in KIND_WORDS.get(x.kind, ())]


_BASE_KIND = {"leaf": "switch", "spine": "switch", "nic": "gpu"}
"""Kinds a name cannot tell apart: a switch's name is its name in any tier."""
