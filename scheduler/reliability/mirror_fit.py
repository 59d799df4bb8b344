"""The failures a what-if forked from a mirror draws: the cluster's own, once it measured enough.

A mirror sees the real cluster's nodes go down (Slurm's ``down``, ``fail``, ``not_responding``:
whatever the cause, a GPU, the host, its NIC) and for how many node-hours it watched them.
Once it has seen :data:`MIN_FAILURES` of them, a fork draws node failures at the measured rate
(maximum likelihood ``k / T``, with the exact Poisson interval of
:func:`scheduler.reliability.fit.fit_counts`) in place of the chosen profile's GPU, host and
NIC modes, whose failures are what takes a node down; the components a mirror cannot see
failing (switches, links, power, cooling, storage, software, planned stops) keep the chosen
profile's rates.  With fewer failures the chosen profile is drawn whole: ten failures bound the
rate within a factor of about 0.5-1.8 (95 %), fewer leave the interval wider than the spread
between published fleets (``docs/failures.md``).

The answer says which it did and why, and a what-if's report carries it.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.reliability.fit import fit_counts, profile_from_estimates
from scheduler.reliability.profiles import Profile

MIN_FAILURES = 10
"""Node failures a mirror must have measured before its forks draw the measured rate."""
SEEN_AS_NODE_DOWN = ("gpu", "host", "nic")
"""Components whose failures take a node down, as Slurm reports them (what the fit replaces)."""


@dataclass(frozen=True)
class ForkFailures:
    """What a fork draws: ``modes``, named ``profile``; ``fitted`` when measured; ``why`` says
    which in one line (the what-if report shows it)."""

    profile: str
    fitted: bool
    why: str
    modes: tuple

    def report(self) -> dict:
        return {"profile": self.profile, "fitted": self.fitted, "why": self.why}


def fork_failures(chosen: Profile, *, nodes_down: int, node_hours: float,
                  confidence: float = 0.95, min_failures: int = MIN_FAILURES) -> ForkFailures:
    """The failure modes forks of a mirror draw: measured node failures when there are
    ``min_failures`` of them over ``node_hours``, else the ``chosen`` profile.

    >>> from scheduler.reliability.profiles import load_profile
    >>> few = fork_failures(load_profile("llama3"), nodes_down=3, node_hours=5000.0)
    >>> few.fitted, few.profile
    (False, 'llama3')
    >>> many = fork_failures(load_profile("llama3"), nodes_down=20, node_hours=10000.0)
    >>> many.fitted, many.modes[0].cause, round(many.modes[0].per_hour, 6)
    (True, 'node_down', 0.002)
    """
    if isinstance(nodes_down, bool) or not isinstance(nodes_down, int) or nodes_down < 0:
        raise ValueError(f"nodes_down must be an integer >= 0, not {nodes_down!r}")
    if nodes_down < min_failures or not node_hours > 0:
        return ForkFailures(
            chosen.name, False,
            f"profile {chosen.name}: the mirror has measured {nodes_down} node failure(s) over "
            f"{max(node_hours, 0.0):,.0f} node-hours, fewer than the {min_failures} a fit "
            "needs", chosen.modes)
    (estimate,) = fit_counts({"node_down": nodes_down}, float(node_hours),
                             components={"node_down": "host"}, confidence=confidence)
    fitted = profile_from_estimates([estimate], name=f"measured+{chosen.name}",
                                    fleet="this cluster, as the mirror saw it",
                                    source="the mirror's node failures", confidence=confidence)
    kept = tuple(m for m in chosen.modes if m.component not in SEEN_AS_NODE_DOWN)
    per_day = 1000 * 24
    return ForkFailures(
        fitted.name, True,
        f"node failures measured by the mirror: {nodes_down} in {node_hours:,.0f} node-hours, "
        f"{estimate.rate * per_day:.3g} per 1,000 node-days ({confidence:.0%}: "
        f"{estimate.low * per_day:.3g}-{estimate.high * per_day:.3g}); switches, links, power, "
        f"cooling, storage, software and planned stops from profile {chosen.name}",
        fitted.modes + kept)
