"""Gang placement: choose nodes for a whole gang, or nothing.

Three strategies over the same candidate sets:

* ``topology``: minimise the span: the gang goes to the tightest nest of domains (pod, then
  leaf group and NVLink domain inside it) that can hold it anywhere in the cluster, and among
  the nests that can, to the one with the fewest free nodes, ties to the fullest enclosing
  domain (best fit), so large contiguous blocks stay whole for large gangs.  A gang larger
  than any pod fills the freest pods first and puts its remainder in the best-fitting one.
  A partial node (a small gang, or a gang's remainder) goes to the fullest node that fits,
  ties to the node in the leaf group and pod with the fewest whole free nodes, so a small job
  breaks a node where no large gang could start anyway.
* ``first-fit``: the lowest-numbered nodes that fit (what a naive scheduler does).
* ``random``: random fitting nodes (the scattered baseline for placement comparisons).

Every strategy honours the hard constraints: accepted models, CPU cores, RAM and NIC
bandwidth per GPU, and the job's affinity (the loosest span it accepts).  A gang of ``g`` GPUs
on nodes of ``p`` GPUs takes ``g // p`` whole nodes plus one partial node for the remainder.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.model.state import LEVELS, ClusterState, Placement

STRATEGIES = ("topology", "first-fit", "random")


@dataclass(frozen=True)
class Request:
    """What a gang needs.

    Parameters
    ----------
    gpus : int
        Gang size.
    models : tuple of int
        Accepted model indices (into ``ClusterState.models``), in order of preference.
    affinity : str
        ``"nvlink"``, ``"leaf"``, ``"pod"`` or ``"any"``: the loosest span allowed.
    cpu_per_gpu, ram_gb_per_gpu, nic_gbps_per_gpu : float
        Host resources per GPU: cores, GB, Gb/s.
    """

    gpus: int
    models: tuple[int, ...]
    affinity: str = "any"
    cpu_per_gpu: float = 0.0
    ram_gb_per_gpu: float = 0.0
    nic_gbps_per_gpu: float = 0.0


class Placer:
    """Places requests on a :class:`ClusterState` with one strategy.

    Examples
    --------
    >>> from scheduler.hardware.cluster import NodeGroup, plan_cluster
    >>> plan = plan_cluster("t", (NodeGroup("H100-SXM", 16),), fabric_kind="fat-tree",
    ...                     fabric_kw={"radix": 8})
    >>> p = Placer(ClusterState(plan), "topology").place(Request(gpus=12, models=(0,)))
    >>> p.gpus, len(p.nodes)
    (12, 2)
    """

    def __init__(self, state: ClusterState, strategy: str = "topology",
                 rng: np.random.Generator | None = None):
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown placement {strategy!r}; choose one of: "
                             f"{', '.join(STRATEGIES)}")
        if strategy == "random" and rng is None:
            raise ValueError("random placement needs a numpy Generator")
        self.state = state
        self.strategy = strategy
        self.rng = rng
        self.per_node = [int(m.per_node) for m in state.models]
        self._bases: dict[int, np.ndarray] = {}
        self._base_version = -1
        self._whole_fits: dict[tuple, np.ndarray] = {}
        # Finer levels ordered coarse to fine per model: an NVL72 domain (18 trays) is larger
        # than a leaf group, an HGX domain (one node) smaller.
        self.nested = []
        for m in range(state.n_models):
            mask = state.model_mask[m]
            size = {lvl: mask.sum() / max(1, np.unique(state.domain[lvl][mask]).size)
                    for lvl in ("leaf", "nvlink")}
            self.nested.append(("pod",) + tuple(sorted(size, key=lambda k: -size[k])))

    def place(self, req: Request) -> Placement | None:
        """A placement for the whole gang on one accepted model, or ``None``."""
        for m in req.models:
            p = self._place_on_model(req, m)
            if p is not None:
                return p
        return None

    # ----------------------------------------------------------------- internals
    def _host_fit_at(self, nodes: np.ndarray, k: int, req: Request) -> np.ndarray:
        """Which of ``nodes`` have the free CPU, RAM and NIC bandwidth for ``k`` GPUs of ``req``."""
        s = self.state
        return ((s.node_free_cpu[nodes] + 1e-9 >= k * req.cpu_per_gpu)
                & (s.node_free_ram[nodes] + 1e-9 >= k * req.ram_gb_per_gpu)
                & (s.node_free_nic[nodes] + 1e-9 >= k * req.nic_gbps_per_gpu))

    def _base(self, m: int) -> np.ndarray:
        """Schedulable nodes of model ``m`` (kept until node flags change)."""
        s = self.state
        if self._base_version != s.flags_version:
            self._bases, self._base_version = {}, s.flags_version
        base = self._bases.get(m)
        if base is None:
            base = self._bases[m] = s.schedulable() & s.model_mask[m]
        return base

    def _whole_fit(self, m: int, per: int, req: Request) -> np.ndarray:
        """Nodes whose host resources can carry ``per`` GPUs of ``req`` when the node is all
        free (a node's CPU, RAM and NIC are used only with its GPUs, so a whole free node has
        them all): depends on the request, not on the allocation."""
        key = (m, per, req.cpu_per_gpu, req.ram_gb_per_gpu, req.nic_gbps_per_gpu)
        fit = self._whole_fits.get(key)
        if fit is None:
            s = self.state
            fit = self._whole_fits[key] = (
                (s.node_cpu + 1e-9 >= per * req.cpu_per_gpu)
                & (s.node_ram + 1e-9 >= per * req.ram_gb_per_gpu)
                & (s.node_nic + 1e-9 >= per * req.nic_gbps_per_gpu))
        return fit

    def _place_on_model(self, req: Request, m: int) -> Placement | None:
        s = self.state
        per = self.per_node[m]
        whole, rem = divmod(req.gpus, per)
        base = self._base(m)
        if whole == 0:
            cand = np.flatnonzero(base & (s.node_free >= rem))
            cand = cand[self._host_fit_at(cand, rem, req)]
            if cand.size == 0:
                return None
            node = self._pick_partial(cand, m)
            return Placement(np.array([node]), np.array([rem]), m)
        full = np.flatnonzero(base & s.node_whole & self._whole_fit(m, per, req))
        if full.size < whole:
            return None
        if req.affinity != "any":
            level = s.domain[req.affinity]
            counts = np.bincount(level[full], minlength=s.n_domains[req.affinity])
            fits = counts >= whole
            if rem:
                # the remainder needs one more node in the same domain: a spare whole node or
                # a partly used one with room
                part = np.flatnonzero(base & (s.node_free >= rem) & ~s.node_whole)
                part = part[self._host_fit_at(part, rem, req)]
                has_part = np.bincount(level[part], minlength=counts.size) > 0
                fits &= (counts > whole) | has_part
            ok = np.flatnonzero(fits)
            if ok.size == 0:
                return None
            finer = tuple(lvl for lvl in self.nested[m]
                          if LEVELS.index(lvl) < LEVELS.index(req.affinity))
            if self.strategy == "topology":
                # the tightest nest inside any domain that holds the gang, not the finer
                # levels of the best-fitting domain alone
                full = full[np.isin(level[full], ok)]
                levels = (req.affinity,) + finer
            else:
                d = self._pick_domain(ok, counts)
                full = full[level[full] == d]
                levels = finer
        else:
            levels = self.nested[m]
        chosen = self._pick_nodes(full, whole, levels)
        if not rem:
            return Placement(chosen, np.full(whole, per), m)
        return self._with_remainder(req, m, chosen, per, rem)

    def _with_remainder(self, req: Request, m: int, chosen: np.ndarray, per: int,
                        rem: int) -> Placement | None:
        s = self.state
        cand = np.flatnonzero(self._base(m) & (s.node_free >= rem))
        cand = cand[self._host_fit_at(cand, rem, req)]
        cand = cand[~np.isin(cand, chosen)]
        if req.affinity != "any":
            d = s.domain[req.affinity][chosen[0]]
            cand = cand[s.domain[req.affinity][cand] == d]
        elif self.strategy == "topology" and cand.size:
            for lvl in ("pod", "leaf"):  # the gang's own pod, and in it its own leaf group
                same = cand[np.isin(s.domain[lvl][cand], s.domain[lvl][chosen])]
                if same.size == 0:
                    break
                cand = same
        if cand.size == 0:
            return None
        node = self._pick_partial(cand, m)
        return Placement(np.append(chosen, node), np.append(np.full(chosen.size, per), rem), m)

    def _pick_partial(self, cand: np.ndarray, m: int) -> int:
        if self.strategy == "first-fit":
            return int(cand[0])
        if self.strategy == "random":
            return int(self.rng.choice(cand))
        # best fit: the fullest node that still fits; among equally full ones, the one whose
        # leaf group, then pod, has the fewest whole free nodes (what large gangs need)
        s = self.state
        whole = np.flatnonzero(self._base(m) & s.node_whole)
        keys = [cand]
        for lvl in ("pod", "leaf"):
            dom = s.domain[lvl]
            keys.append(np.bincount(dom[whole], minlength=s.n_domains[lvl])[dom[cand]])
        keys.append(s.node_free[cand])
        return int(cand[np.lexsort(keys)[0]])

    def _pick_domain(self, ok: np.ndarray, counts: np.ndarray) -> int:
        if self.strategy == "first-fit":
            return int(ok[0])
        if self.strategy == "random":
            return int(self.rng.choice(ok))
        return int(ok[np.argmin(counts[ok])])

    def _pick_nodes(self, cand: np.ndarray, need: int, levels: tuple[str, ...]) -> np.ndarray:
        if self.strategy == "first-fit":
            return cand[:need]
        if self.strategy == "random":
            return np.sort(self.rng.choice(cand, size=need, replace=False))
        return self._nested(cand, need, levels)

    def _nested(self, cand: np.ndarray, need: int, levels: tuple[str, ...]) -> np.ndarray:
        """``need`` of ``cand``: the tightest nest of ``levels`` (coarse to fine) that holds
        them, best fit at each depth; a gang larger than any domain of ``levels[0]`` spills."""
        if cand.size == need or not levels:
            return cand[:need]
        s = self.state
        # inside an NVLink domain larger than a leaf (NVL72) the traffic stays off the
        # fabric: the span is decided there, and finer levels only best-fit inside it
        deepest = levels.index("nvlink") if "nvlink" in levels[:-1] else len(levels) - 1
        key = np.zeros(cand.size, dtype=np.int64)
        nests = []  # per depth: each node's nest (its domains down to that level), nest sizes
        for lvl in levels[:deepest + 1]:
            key = key * s.n_domains[lvl] + s.domain[lvl][cand]
            _, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
            nests.append((inv, cnt))
        for depth in range(deepest, -1, -1):
            inv, cnt = nests[depth]
            fits = np.flatnonzero(cnt >= need)
            if fits.size:
                rep = np.searchsorted(np.sort(inv), fits)  # rank of each nest's first node
                first = np.argsort(inv, kind="stable")[rep]
                # fewest free nodes in the nest, then in each enclosing nest, tightest first
                order = np.lexsort([nests[d][1][nests[d][0][first]] for d in range(depth)]
                                   + [cnt[fits]])
                g = fits[order[0]]
                return self._nested(cand[inv == g], need, levels[depth + 1:])
        dom = s.domain[levels[0]][cand]
        counts = np.bincount(dom)
        order = np.argsort(-counts, kind="stable")
        cum = np.cumsum(counts[order])
        k = int(np.searchsorted(cum, need, side="right"))  # domains taken whole
        left = need - (int(cum[k - 1]) if k else 0)
        picked = cand[np.isin(dom, order[:k])]
        if left == 0:
            return picked
        rest = order[k:]
        best = rest[np.argmin(np.where(counts[rest] >= left, counts[rest], np.iinfo(np.int64).max))]
        tail = self._nested(cand[dom == best], left, levels[1:])
        return np.sort(np.concatenate([picked, tail]))
