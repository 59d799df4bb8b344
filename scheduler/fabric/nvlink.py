"""NVLink (scale-up) domains: 8 GPUs on an HGX board, 72 in a GB200 NVL72 rack.

Bandwidths are NVIDIA's per-GPU NVLink figures, both directions together: 900 GB/s for
fourth-generation NVLink (H100/H200 HGX), 1,800 GB/s for fifth generation (B200, GB200 NVL72).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.fabric.topology import _int


@dataclass(frozen=True)
class NVLinkDomain:
    """One scale-up domain type.

    Parameters
    ----------
    name : str
    size : int
        GPUs in one domain.
    gbytes_per_gpu : float
        NVLink bandwidth per GPU, GB/s, both directions together.
    """

    name: str
    size: int
    gbytes_per_gpu: float


HGX_H100 = NVLinkDomain("HGX H100", 8, 900.0)
HGX_B200 = NVLinkDomain("HGX B200", 8, 1800.0)
NVL72 = NVLinkDomain("GB200 NVL72", 72, 1800.0)


def nvlink_domains(n_gpus: int, domain_size: int) -> np.ndarray:
    """NVLink domain id of every GPU; GPUs ``i*size .. (i+1)*size - 1`` form domain ``i``.

    Parameters
    ----------
    n_gpus : int
        GPUs, >= 0.
    domain_size : int
        GPUs per domain, >= 1 (8 for HGX, 72 for NVL72).  A last, smaller domain takes any
        remainder.

    Returns
    -------
    numpy.ndarray of int32

    Examples
    --------
    >>> nvlink_domains(20, 8).tolist()[-5:]
    [1, 2, 2, 2, 2]
    """
    n = _int("n_gpus", n_gpus, 0)
    size = _int("domain_size", domain_size)
    return (np.arange(n, dtype=np.int64) // size).astype(np.int32)
