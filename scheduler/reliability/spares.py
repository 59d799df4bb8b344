"""The hot-spare pool: spares held per model, swapped in for failed nodes, refilled on repair.

A supply cut on a model freezes its pool: no spare of that model is swapped in, and its
repaired nodes wait (parked) until parts come back.
"""

from __future__ import annotations

import numpy as np

from scheduler.model.state import ClusterState, Placement


class SparePool:
    """Spare targets per model (the plan's, or ``hold_spares``'s) and the cut models."""

    def __init__(self, state: ClusterState):
        self.state = state
        s = state
        self.target = np.bincount(s.node_model[s.node_spare], minlength=s.n_models)
        self.cut_models: set[int] = set()
        self.parked: list[int] = []

    def cut(self, model: int) -> None:
        """No more parts for ``model``: its spares are frozen and its repairs wait."""
        self.cut_models.add(int(model))

    def mend(self, model: int) -> np.ndarray:
        """Parts for ``model`` again: its spares swap in; returns its parked nodes (the
        caller brings them back) and forgets them."""
        m = int(model)
        self.cut_models.discard(m)
        mine = [n for n in self.parked if self.state.node_model[n] == m]
        self.parked = [n for n in self.parked if self.state.node_model[n] != m]
        return np.array(mine, dtype=np.int64)

    def swap(self, old: Placement, bad: np.ndarray) -> Placement | None:
        """``old`` with its failed nodes replaced by spares (same pod first), or ``None``."""
        if old.model in self.cut_models:
            return None
        return spare_swap(self.state, old, bad)

    def park_cut(self, nodes: np.ndarray) -> np.ndarray:
        """Keep repaired nodes of a cut model out of service; return the others."""
        cut = np.isin(self.state.node_model[nodes], list(self.cut_models))
        if cut.any():
            self.parked.extend(nodes[cut].tolist())
            nodes = nodes[~cut]
        return nodes

    def refill(self, nodes: np.ndarray) -> None:
        """Repaired, idle nodes go back to the spare pool while it is below target."""
        s = self.state
        have = np.bincount(s.node_model[s.node_spare & s.node_up], minlength=s.n_models)
        for n in nodes.tolist():
            m = s.node_model[n]
            if have[m] < self.target[m] and s.node_free[n] == s.node_gpus[n]:
                s.set_node_flags([n], spare=True)
                have[m] += 1


def spare_swap(state: ClusterState, old: Placement, bad: np.ndarray) -> Placement | None:
    """The old placement with its failed nodes replaced by hot spares (same pod first)."""
    s = state
    need = int(bad.sum())
    if need == 0 or not np.all(old.counts[bad] == s.node_gpus[old.nodes[bad]]):
        return None
    spares = np.flatnonzero(s.node_spare & s.node_up & ~s.node_drained
                            & s.model_mask[old.model] & (s.node_free == s.node_gpus))
    if spares.size < need:
        return None
    pods = s.domain["pod"]
    near = np.isin(pods[spares], pods[old.nodes[bad]])
    chosen = np.concatenate([spares[near], spares[~near]])[:need]
    return Placement(np.concatenate([old.nodes[~bad], chosen]),
                     np.concatenate([old.counts[~bad], s.node_gpus[chosen]]), old.model)
