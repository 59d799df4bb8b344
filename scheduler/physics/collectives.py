"""Alpha-beta cost model of NCCL collectives on a two-level (scale-up + scale-out) cluster.

Definitions follow NVIDIA nccl-tests ``doc/PERFORMANCE.md``: ``S`` is the size the test prints
(for all-reduce the buffer on each rank; for all-gather and reduce-scatter the *total* array,
``count * n``; for all-to-all each rank's whole send buffer, ``count * n`` as in
``src/alltoall.cu``), ``algbw = S / t`` and ``busbw = algbw * factor`` with factor
``2(n-1)/n`` for all-reduce, ``(n-1)/n`` for all-gather, reduce-scatter and all-to-all, and 1 for
send/recv.  GB here is 10^9 bytes, as in nccl-tests.

Topology: ``gpus`` ranks sit ``k = min(gpus_per_node, gpus)`` to a scale-up domain (a node, or
an NVL72 rack), on ``N = ceil(gpus / k)`` domains.  Inside a domain ranks use the scale-up link
class; between domains each GPU uses its own NIC (rail-aligned, one NIC per GPU).

* Ring (all-reduce, all-gather, reduce-scatter): NCCL runs ``k`` rings, each leaving a node
  through a different NIC, so one NIC carries ``1/k`` of the data and each GPU's scale-up link
  forwards ``(k-1)/k`` of it: ring bandwidth ``B = min(k * B_out, k/(k-1) * B_up)``; inside one
  domain ``B = B_up``.  Latency: ``2(n-1)`` steps for all-reduce, ``n-1`` for the others, of
  which ``2(N-1)`` (``N-1``) cross the scale-out at ``alpha_out`` and the rest cost
  ``alpha_up`` (NCCL ``src/graph/tuning.cc``).
* Tree (all-reduce only): a chain inside each node and a double binary tree between nodes; a
  node sends and receives ``S`` per phase (half of it on two nodes), a GPU's chain ``S``; two
  phases (reduce, broadcast), at :data:`TREE_EFFICIENCY` of the link bandwidth.  Latency
  ``2((k-1) alpha_up + ceil(log2 N) alpha_out)``.
* NVLS (all-reduce inside one domain whose switches reduce, NVLink SHARP): ``S / B_nvls``.
* All-to-all (grouped send/recv): ``(n-k)/n`` of each rank's buffer crosses the scale-out on its
  own NIC (NCCL cannot spread one GPU's all-to-all over several NICs, nccl-tests #267) while
  ``(k-1)/n`` moves over scale-up; latency one round per peer node and per local peer.
* Send/recv (``p2p``, two ranks): ``alpha + S / B`` on the link class joining them.

``scaleout_share`` (0, 1] scales the scale-out bandwidth: the routing layer's congestion or
oversubscription share for this communicator's traffic.  Calibration sources are in
``docs/collectives.md``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from numbers import Integral, Real

from scheduler.hardware.catalog import Accelerator

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")
"""Operations the model prices."""

ALGORITHMS = ("ring", "tree", "nvls", "direct")
"""``direct`` is the one algorithm of all-to-all and send/recv; ``auto`` picks the fastest."""

NVLINK_EFFICIENCY = 370.0 / 450.0
"""Effective / line rate of NVLink for ring traffic: 370 of 450 GB/s per direction on H100.

sjeaugey (S. Jeaugey, NCCL), NVIDIA/nccl-tests issue #212 (2024): "450GB/s is the line rate.
With the protocol overhead (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s", seen
as busbw of non-all-reduce operations or with ``NCCL_ALGO=RING``.  Applied to every vendor's
scale-up figure (assumed for AMD, Intel, Huawei and Google links: not calibrated).
"""

NVLS_EFFICIENCY = 275.0 / 450.0
"""NVLink SHARP all-reduce algbw / NVLink line rate per direction: ~275 of 450 GB/s on H100.

Same comment of nccl-tests #212: "On 8 GPUs, you should reach a peak busBw of ~480GB/s (algbw
~275GB/s)"; AddyLaddy (NCCL team), nccl-tests #290 (2025): 476 GB/s single-node is "in the
expected range for H100".
"""

NIC_EFFICIENCY = 47.0 / 50.0
"""Effective / line rate of one NIC: 47 of 50 GB/s for NDR 400 Gb/s InfiniBand.

AddyLaddy (NCCL team), nccl-tests #290 (2025): "For NDR @ 400Gbps you should see 46-48GB/s
per NIC"; nccl-tests #267: "up to 48-49GB/s per NIC".  Applied to other NIC speeds as is.
"""

SCALEUP_ALPHA_S = 1.9e-6
"""Latency per ring step over NVLink, s: NCCL ``tuning.cc`` ``hwLat`` NVLink/Ring/LL128."""

SCALEOUT_ALPHA_S = 4.0e-6
"""Latency per ring step over the network, s: NCCL ``tuning.cc`` ``hwLat`` NET/Ring/LL128."""

NVLS_ALPHA_S = 25e-6
"""Fixed latency of an NVLS all-reduce, s: NCCL ``tuning.cc`` ``hwLat`` NVLink/NVLS/Simple."""

TREE_EFFICIENCY = 0.92
"""Tree all-reduce bandwidth relative to the links: NCCL ``tuning.cc`` (``busBw * .92``)."""

_BUS_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "p2p": lambda n: 1.0,
}


@dataclass(frozen=True)
class LinkClass:
    """One class of link as NCCL sees it, per GPU.

    Parameters
    ----------
    name : str
    bw_gb_s : float
        Effective bandwidth per GPU, one direction, GB/s (10^9 bytes/s), > 0.
    alpha_s : float
        Latency per algorithm step, s, >= 0.
    nvls_gb_s : float, optional
        All-reduce algorithm bandwidth of in-switch reduction (NVLink SHARP), GB/s; 0 where
        the switch cannot reduce (default).
    """

    name: str
    bw_gb_s: float
    alpha_s: float
    nvls_gb_s: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.bw_gb_s) and self.bw_gb_s > 0):
            raise ValueError(f"link {self.name!r}: bw_gb_s must be positive, not {self.bw_gb_s}")
        if not (math.isfinite(self.alpha_s) and self.alpha_s >= 0):
            raise ValueError(f"link {self.name!r}: alpha_s must be >= 0, not {self.alpha_s}")
        if not (math.isfinite(self.nvls_gb_s) and self.nvls_gb_s >= 0):
            raise ValueError(f"link {self.name!r}: nvls_gb_s must be >= 0, not "
                             f"{self.nvls_gb_s}")


def scaleup_link(model: Accelerator) -> LinkClass:
    """Effective scale-up link of an accelerator model.

    Half the catalog's bidirectional ``scaleup_gb_s`` times :data:`NVLINK_EFFICIENCY`; parts
    whose NVSwitch reduces in the network (``model.nvls``: NVSwitch generation 3 or later, so
    H100/H200/B200/GB200 but not A100 nor any AMD part) get NVLS at :data:`NVLS_EFFICIENCY` of
    the line rate.

    Parameters
    ----------
    model : Accelerator

    Returns
    -------
    LinkClass

    Examples
    --------
    >>> from scheduler.hardware.catalog import get
    >>> link = scaleup_link(get("H100-SXM"))
    >>> round(link.bw_gb_s), round(link.nvls_gb_s)
    (370, 275)
    >>> round(scaleup_link(get("B200")).bw_gb_s)
    740
    >>> scaleup_link(get("A100-SXM4-80GB")).nvls_gb_s
    0.0
    """
    line = model.scaleup_gb_s / 2.0
    nvls = line * NVLS_EFFICIENCY if model.nvls else 0.0
    return LinkClass(f"{model.name} scale-up", line * NVLINK_EFFICIENCY, SCALEUP_ALPHA_S, nvls)


def scaleout_link(nic_gbps: float = 400.0) -> LinkClass:
    """Effective scale-out link of one GPU's NIC.

    Parameters
    ----------
    nic_gbps : float, optional
        NIC line rate, Gb/s (default 400, NDR InfiniBand / 400G RoCE).

    Returns
    -------
    LinkClass
        ``nic_gbps / 8 * NIC_EFFICIENCY`` GB/s at :data:`SCALEOUT_ALPHA_S`.

    Examples
    --------
    >>> scaleout_link().bw_gb_s
    47.0
    """
    if not (isinstance(nic_gbps, Real) and math.isfinite(nic_gbps) and nic_gbps > 0):
        raise ValueError(f"nic_gbps must be a positive number, not {nic_gbps!r}")
    return LinkClass(f"{nic_gbps:g}G NIC", nic_gbps / 8.0 * NIC_EFFICIENCY, SCALEOUT_ALPHA_S)


@dataclass(frozen=True)
class CollectiveResult:
    """Price of one collective.

    Parameters
    ----------
    op : str
    bytes : float
        ``S`` as nccl-tests defines it for ``op``, bytes.
    gpus : int
        Ranks.
    algorithm : str
        One of :data:`ALGORITHMS`, or ``"none"`` for a single rank.
    time_s : float
        Duration, s.
    algbw_GB_s, busbw_GB_s : float
        nccl-tests algorithm and bus bandwidth, GB/s; 0 for a single rank (nothing moves).
    nodes : int
        Scale-up domains the ranks span.
    """

    op: str
    bytes: float
    gpus: int
    algorithm: str
    time_s: float
    algbw_GB_s: float
    busbw_GB_s: float
    nodes: int = 1

    def as_dict(self) -> dict:
        """Plain-``dict`` form (JSON-serialisable)."""
        return asdict(self)


def _layout(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    k = min(gpus_per_node, gpus)
    return k, -(-gpus // k)


def _check_op(op: str) -> None:
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; choose one of: {', '.join(OPS)}")


def algorithms(op: str, *, gpus: int, gpus_per_node: int, scaleup: LinkClass) -> tuple[str, ...]:
    """Algorithms that can run ``op`` on this layout, in :data:`ALGORITHMS` order.

    >>> from scheduler.hardware.catalog import get
    >>> algorithms("all_reduce", gpus=8, gpus_per_node=8, scaleup=scaleup_link(get("H100-SXM")))
    ('ring', 'tree', 'nvls')
    >>> algorithms("all_gather", gpus=16, gpus_per_node=8, scaleup=scaleup_link(get("MI300X")))
    ('ring',)
    """
    _check_op(op)
    if op in ("all_to_all", "p2p"):
        return ("direct",)
    if op != "all_reduce":
        return ("ring",)
    _, nodes = _layout(gpus, gpus_per_node)
    nvls = nodes == 1 and scaleup.nvls_gb_s > 0
    return ("ring", "tree", "nvls") if nvls else ("ring", "tree")


def _check(op, nbytes, gpus, gpus_per_node, algorithm, share) -> None:
    _check_op(op)
    if isinstance(nbytes, bool) or not isinstance(nbytes, Real) or not (
            math.isfinite(nbytes) and nbytes > 0):
        raise ValueError(f"bytes must be a positive finite number, not {nbytes!r}")
    for name, value in (("gpus", gpus), ("gpus_per_node", gpus_per_node)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, not {value!r}")
    if op == "p2p" and gpus != 2:
        raise ValueError(f"p2p is between 2 GPUs, not {gpus}")
    if algorithm != "auto" and algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose auto or one of: "
                         f"{', '.join(ALGORITHMS)}")
    if isinstance(share, bool) or not (isinstance(share, Real) and 0 < share <= 1):
        raise ValueError(f"scaleout_share must be in (0, 1], not {share!r}")


def _time(op, algorithm, s, n, k, nodes, up: LinkClass, out: LinkClass, share) -> float:
    """Seconds for one algorithm; ``s`` bytes as nccl-tests defines them."""
    b_up = up.bw_gb_s * 1e9
    b_out = out.bw_gb_s * 1e9 * share
    if algorithm == "nvls":
        return s / (up.nvls_gb_s * 1e9) + NVLS_ALPHA_S
    if op == "p2p":
        return (up.alpha_s + s / b_up) if k >= 2 else (out.alpha_s + s / b_out)
    if op == "all_to_all":
        moved = max((n - k) / n * s / b_out, (k - 1) / n * s / b_up)
        return moved + (nodes - 1) * out.alpha_s + (k - 1) * up.alpha_s
    if algorithm == "tree":
        if nodes == 1:
            per_phase = s / b_up
        else:
            network = s / (k * b_out) * (0.5 if nodes == 2 else 1.0)
            per_phase = max(network, s / b_up if k > 1 else 0.0)
        latency = 2.0 * ((k - 1) * up.alpha_s + math.ceil(math.log2(nodes)) * out.alpha_s)
        return 2.0 * per_phase / TREE_EFFICIENCY + latency
    if nodes == 1:
        ring_bw = b_up
    else:
        ring_bw = k * b_out if k == 1 else min(k * b_out, k / (k - 1) * b_up)
    if op == "all_reduce":
        data, steps, inter = 2.0 * (n - 1) / n, 2 * (n - 1), 2 * (nodes - 1)
    else:
        data, steps, inter = (n - 1) / n, n - 1, nodes - 1
    return data * s / ring_bw + (steps - inter) * up.alpha_s + inter * out.alpha_s


def collective(op: str, nbytes: float, gpus: int, *, gpus_per_node: int, scaleup: LinkClass,
               scaleout: LinkClass, algorithm: str = "auto",
               scaleout_share: float = 1.0) -> CollectiveResult:
    """Time and nccl-tests bandwidths of one collective.

    Parameters
    ----------
    op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"}
    nbytes : float
        ``S`` in bytes, as nccl-tests prints it for ``op`` (module docstring).
    gpus : int
        Ranks, >= 1 (exactly 2 for ``p2p``).
    gpus_per_node : int
        Ranks per scale-up domain, >= 1; ``gpus <= gpus_per_node`` keeps everything on the
        scale-up links, 1 makes a flat scale-out ring.  For ``p2p``, >= 2 means both ranks
        share a domain.
    scaleup, scaleout : LinkClass
        Link classes inside and between domains (:func:`scaleup_link`, :func:`scaleout_link`).
    algorithm : {"auto", "ring", "tree", "nvls", "direct"}, optional
        ``auto`` (default) takes the fastest of :func:`algorithms`.
    scaleout_share : float, optional
        Share of the scale-out bandwidth this traffic gets, in (0, 1] (default 1).

    Returns
    -------
    CollectiveResult

    Raises
    ------
    ValueError
        Unknown op or algorithm, an algorithm that cannot run ``op`` here, ``nbytes <= 0``,
        ``gpus < 1``, ``gpus_per_node < 1``, a share outside (0, 1]; one-line message.

    Examples
    --------
    >>> from scheduler.hardware.catalog import get
    >>> up, out = scaleup_link(get("H100-SXM")), scaleout_link(400)
    >>> r = collective("all_reduce", 8 * 2**30, 8, gpus_per_node=8, scaleup=up, scaleout=out,
    ...                algorithm="ring")
    >>> round(r.busbw_GB_s)
    370
    >>> r = collective("all_reduce", 8 * 2**30, 128, gpus_per_node=8, scaleup=up, scaleout=out)
    >>> r.algorithm, r.nodes, round(r.busbw_GB_s)
    ('ring', 16, 372)
    """
    _check(op, nbytes, gpus, gpus_per_node, algorithm, scaleout_share)
    k, nodes = _layout(gpus, gpus_per_node)
    if op == "p2p":
        k, nodes = (2, 1) if gpus_per_node >= 2 else (1, 2)
    if gpus == 1:
        return CollectiveResult(op, float(nbytes), 1, "none", 0.0, 0.0, 0.0, 1)
    usable = algorithms(op, gpus=gpus, gpus_per_node=gpus_per_node, scaleup=scaleup)
    if algorithm == "auto":
        times = {a: _time(op, a, nbytes, gpus, k, nodes, scaleup, scaleout, scaleout_share)
                 for a in usable}
        algorithm = min(times, key=times.__getitem__)
        t = times[algorithm]
    elif algorithm not in usable:
        raise ValueError(f"{algorithm} cannot run {op} on {gpus} GPUs over {nodes} "
                         f"node(s); usable here: {', '.join(usable)}")
    else:
        t = _time(op, algorithm, nbytes, gpus, k, nodes, scaleup, scaleout, scaleout_share)
    algbw = nbytes / t / 1e9
    return CollectiveResult(op, float(nbytes), gpus, algorithm, t, algbw,
                            algbw * _BUS_FACTOR[op](gpus), nodes)
