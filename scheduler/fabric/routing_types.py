"""Data classes of fabric routing: what :class:`~scheduler.fabric.routing.Router`
returns (:class:`LoadResult`, :class:`Route`) and the tables it builds on the way
(:class:`_Traffic`, the offered load per job; :class:`_State`, the capacity under one failure
set).  The traffic model and the units that loads are summed over are described in
:mod:`scheduler.fabric.routing`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LoadResult:
    """Link loads and job shares after max-min fair sharing.

    Parameters
    ----------
    link_load_gbps : numpy.ndarray of float, shape (n_links, 2)
        Per switch link, Gb/s: column 0 from ``link_a`` to ``link_b`` (upwards, or along a
        global link), column 1 back.
    link_capacity_gbps : numpy.ndarray of float, shape (n_links,)
        Per link and direction, Gb/s; 0 for a failed link.
    utilisation : numpy.ndarray of float, shape (n_links,)
        Load of the busier direction over capacity; 0 on failed links.
    job_share : numpy.ndarray of float, shape (n_jobs,)
        Achieved fraction of each job's demand, in ``[0, 1]``; 0 only for a job cut off by
        failures.
    job_rate_gbps : numpy.ndarray of float, shape (n_jobs,)
        Achieved per-GPU rate, Gb/s.
    tier_utilisation : dict of str to dict
        Per link kind present (``"leaf-spine"``, ``"spine-core"``, ``"global"``,
        ``"island-uplink"``): ``{"mean", "p99", "max"}`` of :attr:`utilisation` over live links.
    elapsed_s : float
        Wall-clock time of the update, seconds.
    """

    link_load_gbps: np.ndarray
    link_capacity_gbps: np.ndarray
    utilisation: np.ndarray
    job_share: np.ndarray
    job_rate_gbps: np.ndarray
    tier_utilisation: dict
    elapsed_s: float


@dataclass(frozen=True)
class Route:
    """The ECMP route of one flow.

    Parameters
    ----------
    hops : int
        Links on every shortest path, endpoint links included (0 for a flow to itself).
    link : numpy.ndarray of int
        Switch links the flow crosses.
    direction : numpy.ndarray of int
        Per entry: 0 from ``link_a`` to ``link_b``, 1 back.
    fraction : numpy.ndarray of float
        Share of the flow on that link and direction.
    """

    hops: int
    link: np.ndarray
    direction: np.ndarray
    fraction: np.ndarray


@dataclass
class _Traffic:
    """Per-job offered load at full demand, aggregated for routing (Gb/s).

    Tables are tuples of equal-length arrays, all values >= 0, rows may repeat.
    ``leaf_out`` / ``leaf_in`` ``(job, leaf, gbps)``: traffic leaving / entering a leaf that is
    spread evenly over its uplinks: all off-leaf traffic on a tree, traffic within the group on
    a fabric with global links.  Trees: ``block_out`` / ``block_in`` ``(job, block, gbps)``
    leaving / entering a block.  Global links: ``leaf_to`` / ``leaf_from``
    ``(job, leaf, block, gbps)`` from a leaf to another group / into a leaf from another group,
    ``pair`` ``(job, block, block, gbps)`` between groups.  ``touch``: ``(job, leaf)`` of GPUs
    that send or receive on the fabric.
    """

    leaf_out: tuple
    leaf_in: tuple
    block_out: tuple = ()
    block_in: tuple = ()
    leaf_to: tuple = ()
    leaf_from: tuple = ()
    pair: tuple = ()
    touch: tuple = ()
    rows: tuple | None = None


@dataclass(frozen=True)
class _State:
    """Capacity under one failure set."""

    alive: np.ndarray        # per link
    members: np.ndarray      # live directed links per unit
    capacity: np.ndarray     # per unit, Gb/s
    failed_leaf: np.ndarray  # per switch
    # fabrics with global links; [group, local leaf or spine, other group] arrays
    leaf_up: np.ndarray | None = None   # live uplinks per leaf
    ok: np.ndarray | None = None        # [g, leaf, spine]: the bundle is live
    w: np.ndarray | None = None         # [g, spine, h]: live global links from spine to h
    z: np.ndarray | None = None         # [g, leaf, h]: sum of w over the leaf's live spines
