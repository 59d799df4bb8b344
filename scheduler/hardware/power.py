"""Power figures for nodes, switches and optics (kW and W), with their sources.

Calibration (see ``../shared/reference/figures.md``):

* DGX H100: about 10.2 kW with 8 x 700 W GPUs, so about 4.6 kW goes to the host (CPUs,
  NVSwitches, NICs, fans, drives): 0.575 kW per accelerator slot, applied to every model.
* Transceivers: a 400G single-port module draws 8-9 W; we book 8.5 W per link end.
* Switches: a 64 x 400G NDR switch without optics is taken as 1.0 kW (assumed; the vendor
  publishes a maximum, not a typical draw).
"""

from __future__ import annotations

from scheduler.hardware.catalog import Accelerator

HOST_KW_PER_ACCELERATOR = 4.6 / 8
TRANSCEIVER_W = 8.5
SWITCH_KW = 1.0


def node_kw(model: Accelerator, count: int) -> float:
    """Peak IT power of one node, kW.

    >>> from scheduler.hardware.catalog import get
    >>> round(node_kw(get("H100-SXM"), 8), 1)
    10.2
    """
    return count * (model.power_w / 1000.0 + HOST_KW_PER_ACCELERATOR)
