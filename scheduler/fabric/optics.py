"""Optical modules by type, and the storage and management fabrics beside the compute fabric.

Optics are counted per *module*, not per link end: a twin-port 800G OSFP module carries two
400G ports (two link ends), a 400G module one.  Module power (figures.md, "Transceivers"):

* 400G single-port: 8-9 W; 8.5 W booked (the midpoint);
* 800G twin-port multimode (2 x SR4): 15 W;
* 800G twin-port single-mode (2 x DR4): 17 W.

The DGX SuperPOD H100 RA (RA-11333-001) uses twin-port OSFP modules on the DGX H100 ("the
compute fabric ports in the middle use a two-port transceiver to access all eight GPUs") and on
the 64-port QM9700 switches, all multimode: :data:`COMPUTE_MODULE` is the 800G twin-port
multimode module.  Modules are counted as ``ceil(link ends / ports per module)`` over the whole
fabric (a device with an odd number of used ports would leave half a module idle; ignored).

Storage and management fabrics
------------------------------
The RA gives every DGX H100 two storage ports (NDR, on the InfiniBand storage fabric), two
in-band management ports and one out-of-band (BMC) port.  Their switch counts are built here
from those port counts and the switches' radix, as two-tier non-blocking trees (storage) and
single-tier access switches (management); the RA's own per-size counts for these fabrics
were not found in the stored sources, so these constructions are *assumed* and every figure
is a named constant.  The storage servers' own ports are not counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduler.fabric.topology import Fabric


@dataclass(frozen=True)
class OpticModule:
    """One pluggable optical module type.

    Parameters
    ----------
    name : str
    ports : int
        Link ends (switch or NIC ports) one module serves.
    watts : float
        Power of one module, W.
    source : str
    """

    name: str
    ports: int
    watts: float
    source: str

    def count(self, link_ends: int) -> int:
        """Modules for ``link_ends`` optical link ends.

        >>> OPTICS["800G-2xSR4"].count(5), OPTICS["400G-SR4"].count(5)
        (3, 5)
        """
        return math.ceil(max(0, int(link_ends)) / self.ports)

    def kw(self, link_ends: int) -> float:
        """Power of the modules for ``link_ends`` link ends, kW."""
        return self.count(link_ends) * self.watts / 1000.0


OPTICS = {m.name: m for m in (
    OpticModule("400G-SR4", 1, 8.5, "figures.md: 400G single-port 8-9 W (midpoint booked)"),
    OpticModule("800G-2xSR4", 2, 15.0, "figures.md: 800G twin-port multimode 15 W"),
    OpticModule("800G-2xDR4", 2, 17.0, "figures.md: 800G twin-port single-mode 17 W"),
)}
"""Module types by name."""

COMPUTE_MODULE = "800G-2xSR4"
"""Module of the compute and storage fabrics: twin-port OSFP, multimode (DGX SuperPOD RA)."""

COMPUTE_SWITCH_KW = 1.0
"""A 64 x 400G NDR switch (QM9700) without optics, kW (assumed; the vendor publishes a
maximum, not a typical draw)."""

STORAGE_PORTS_PER_NODE = 2
"""Storage-fabric ports of a DGX H100 (RA-11333-001, "DGX H100 network ports")."""

STORAGE_SWITCH_RADIX = 64
"""Storage fabric switches: QM9700, 64 x 400G NDR (RA)."""

INBAND_PORTS_PER_NODE = 2
"""In-band management ports of a DGX H100 (RA)."""

INBAND_SWITCH_PORTS = 48
"""Node-facing ports of an in-band switch (SN4600C: 64 x 100/200 GbE, 48 down and 16 up;
the split is assumed)."""

INBAND_SWITCH_KW = 0.5
"""An SN4600C without optics, kW (assumed)."""

OOB_PORTS_PER_NODE = 1
"""Out-of-band (BMC) ports of a DGX H100 (RA)."""

OOB_SWITCH_PORTS = 48
"""1 GbE ports of an out-of-band switch (SN2201: 48 x 1 GbE RJ45)."""

OOB_SWITCH_KW = 0.1
"""An SN2201, kW (assumed)."""


@dataclass(frozen=True)
class SupportFabric:
    """Switches and optics of one non-compute fabric.

    Parameters
    ----------
    name : str
        ``"storage"``, ``"inband"`` or ``"oob"``.
    switches : int
    switch_kw : float
        Power of one switch without optics, kW.
    optical_ends : int
        Optical link ends (0 where the fabric is copper).
    module : str
        Key of :data:`OPTICS` for its optical ends.
    """

    name: str
    switches: int
    switch_kw: float
    optical_ends: int
    module: str = COMPUTE_MODULE

    def kw(self) -> float:
        """Switches plus optics, kW."""
        return self.switches * self.switch_kw + OPTICS[self.module].kw(self.optical_ends)


def _two_tier(ports: int, radix: int) -> tuple[int, int]:
    """Leaves and spines of a non-blocking two-tier tree of radix-``radix`` switches holding
    ``ports`` end ports (one leaf and no spine while one switch holds them all)."""
    if ports <= radix:
        return (1 if ports else 0), 0
    leaves = math.ceil(ports / (radix // 2))
    return leaves, math.ceil(leaves * (radix // 2) / radix)


def support_fabrics(n_nodes: int) -> tuple[SupportFabric, ...]:
    """Storage, in-band and out-of-band fabrics of ``n_nodes`` nodes (assumed construction).

    Storage: a two-tier non-blocking tree of :data:`STORAGE_SWITCH_RADIX`-port switches over
    the nodes' storage ports, optical (node and leaf-spine links).  In-band: access switches of
    :data:`INBAND_SWITCH_PORTS` node ports (copper; uplinks not counted).  Out-of-band: access
    switches of :data:`OOB_SWITCH_PORTS` 1 GbE ports (copper).

    >>> [(f.name, f.switches) for f in support_fabrics(127)]
    [('storage', 12), ('inband', 6), ('oob', 3)]
    """
    n = max(0, int(n_nodes))
    s_ports = n * STORAGE_PORTS_PER_NODE
    leaves, spines = _two_tier(s_ports, STORAGE_SWITCH_RADIX)
    uplinks = leaves * (STORAGE_SWITCH_RADIX // 2) if spines else 0
    return (
        SupportFabric("storage", leaves + spines, COMPUTE_SWITCH_KW, 2 * (s_ports + uplinks)),
        SupportFabric("inband", math.ceil(n * INBAND_PORTS_PER_NODE / INBAND_SWITCH_PORTS),
                      INBAND_SWITCH_KW, 0),
        SupportFabric("oob", math.ceil(n * OOB_PORTS_PER_NODE / OOB_SWITCH_PORTS),
                      OOB_SWITCH_KW, 0),
    )


def compute_optics(fabric: Fabric, module: str = COMPUTE_MODULE) -> tuple[int, float]:
    """Optical modules of a compute fabric and their power: ``(modules, kW)``.

    Link ends are :meth:`Fabric.transceivers` (two per optical link).

    >>> from scheduler.fabric import fat_tree
    >>> compute_optics(fat_tree(4))          # 48 links, 96 ends, 48 twin-port modules
    (48, 0.72)
    >>> compute_optics(fat_tree(4), "400G-SR4")
    (96, 0.816)
    """
    if module not in OPTICS:
        raise ValueError(f"unknown optic module {module!r}; choose one of: {', '.join(OPTICS)}")
    m = OPTICS[module]
    ends = fabric.transceivers()
    return m.count(ends), m.kw(ends)
