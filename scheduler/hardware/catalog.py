"""Accelerator catalog: one abstraction over several vendors.

Figures are dense (no sparsity) and come from the sources listed per model; the table they are
taken from is ``../shared/reference/figures.md`` (vendor spec sheets, MLPerf system
descriptions, Google Cloud TPU docs, Hot Chips 2024).  A figure the vendor does not publish, or
whose public sources disagree, is listed in ``Accelerator.unconfirmed`` so reports and the admin
can flag it; such figures are easy to override with :func:`override`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Accelerator:
    """One accelerator SKU.

    Parameters
    ----------
    name : str
        Catalog key, e.g. ``"H100-SXM"``.
    vendor : str
    bf16_tflops : float
        Dense BF16 (or FP16 where BF16 is not published) peak, TFLOP/s.
    hbm_gb : float
        Accelerator memory, GB.
    hbm_tb_s : float or None
        Memory bandwidth, TB/s; ``None`` when not published.
    scaleup_gb_s : float
        Scale-up (NVLink, Infinity Fabric, ICI, HCCS) bandwidth per accelerator, GB/s,
        both directions together.
    scaleup_domain : int
        Accelerators joined by the scale-up fabric in one domain (8 for an HGX board,
        72 for NVL72).
    tdp_w : float or None
        Board power, W; ``None`` when not published.
    idle_w : float
        Idle power, W (assumed 15-20 % of TDP; no vendor publishes it).
    per_node : int
        Accelerators per standard node of this model.
    memory_kind : str
        HBM generation, e.g. ``"HBM3"``.
    nvswitch_gen : int
        NVSwitch generation of the scale-up fabric; 0 where there is none (AMD, Intel,
        Google, Huawei).  NVLink SHARP (NVLS, in-switch reduction) needs generation 3 or later
        (the NVSwitch of HGX H100/H200; generation 4 on HGX B200 and GB200 NVL72); the
        second-generation NVSwitch of HGX A100 does not reduce (NVIDIA Hopper architecture
        whitepaper, "third-generation NVSwitch ... SHARP in-network reductions").
    unconfirmed : tuple of str
        Names of fields whose figure is not published by the vendor or is disputed.
    source : str
    """

    name: str
    vendor: str
    bf16_tflops: float
    hbm_gb: float
    hbm_tb_s: float | None
    scaleup_gb_s: float
    scaleup_domain: int
    tdp_w: float | None
    idle_w: float
    per_node: int = 8
    memory_kind: str = ""
    nvswitch_gen: int = 0
    unconfirmed: tuple[str, ...] = field(default_factory=tuple)
    source: str = ""

    @property
    def power_w(self) -> float:
        """TDP for power budgeting; where unpublished, 450 W is assumed (flagged)."""
        return self.tdp_w if self.tdp_w is not None else 450.0

    @property
    def nvls(self) -> bool:
        """Whether the scale-up switches reduce in the network (NVLink SHARP).

        >>> CATALOG["H100-SXM"].nvls, CATALOG["A100-SXM4-80GB"].nvls, CATALOG["MI300X"].nvls
        (True, False, False)
        """
        return self.nvswitch_gen >= NVLS_MIN_NVSWITCH_GEN

    def satisfies(self, *, min_hbm_gb: float = 0.0, min_bf16_tflops: float = 0.0,
                  vendors: tuple[str, ...] | None = None) -> bool:
        """Whether this model meets a job's requirement.

        >>> CATALOG["H100-SXM"].satisfies(min_hbm_gb=80)
        True
        >>> CATALOG["H100-SXM"].satisfies(min_hbm_gb=141)
        False
        """
        if vendors is not None and self.vendor not in vendors:
            return False
        return self.hbm_gb >= min_hbm_gb and self.bf16_tflops >= min_bf16_tflops


NVLS_MIN_NVSWITCH_GEN = 3
"""First NVSwitch generation with NVLink SHARP in-switch reduction (Hopper, 2022)."""

_MODELS = (
    Accelerator("H100-SXM", "NVIDIA", 989.0, 80.0, 3.35, 900.0, 8, 700.0, 120.0,
                memory_kind="HBM3", nvswitch_gen=3,
                source="NVIDIA H100 datasheet; Llama 3 report"),
    Accelerator("H200-SXM", "NVIDIA", 989.0, 141.0, 4.8, 900.0, 8, 700.0, 120.0,
                memory_kind="HBM3e", nvswitch_gen=3,
                source="NVIDIA H200 datasheet; MLPerf v4.1 systems"),
    Accelerator("B200", "NVIDIA", 2250.0, 180.0, 7.7, 1800.0, 8, 1000.0, 160.0,
                memory_kind="HBM3e", nvswitch_gen=4, source="NVIDIA HGX B200 spec table"),
    Accelerator("GB200", "NVIDIA", 2500.0, 186.0, 8.0, 1800.0, 72, 1200.0, 180.0, per_node=4,
                memory_kind="HBM3e", nvswitch_gen=4,
                source="NVIDIA GB200 NVL72 spec table (per GPU)"),
    Accelerator("A100-SXM4-40GB", "NVIDIA", 312.0, 40.0, 1.555, 600.0, 8, 400.0, 70.0,
                memory_kind="HBM2", nvswitch_gen=2,
                source="NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4): "
                       "BF16 312 dense, 1,555 GB/s, NVLink3 600 GB/s, 400 W SXM"),
    Accelerator("A100-SXM4-80GB", "NVIDIA", 312.0, 80.0, 2.039, 600.0, 8, 400.0, 70.0,
                memory_kind="HBM2e", nvswitch_gen=2,
                source="NVIDIA A100 datasheet (r4): BF16 312 dense, 2,039 GB/s, NVLink3 "
                       "600 GB/s, 400 W SXM"),
    Accelerator("H800-SXM", "NVIDIA", 989.0, 80.0, 3.35, 400.0, 8, 700.0, 120.0,
                memory_kind="HBM3", nvswitch_gen=3, unconfirmed=("scaleup_gb_s",),
                source="export variant of H100 SXM: H100 compute and memory, NVLink cut to "
                       "400 GB/s (second-hand; DeepSeek-V3 report, section 3.1, H800 "
                       "clusters)"),
    Accelerator("MI300X", "AMD", 1307.0, 192.0, 5.3, 896.0, 8, 750.0, 130.0,
                memory_kind="HBM3", source="AMD Instinct MI300X datasheet; MLPerf systems"),
    Accelerator("MI325X", "AMD", 1307.0, 256.0, 6.0, 896.0, 8, 1000.0, 160.0,
                memory_kind="HBM3E", unconfirmed=("scaleup_gb_s", "tdp_w"),
                source="AMD product page (second-hand)"),
    Accelerator("Gaudi3", "Intel", 1835.0, 128.0, 3.67, 600.0, 8, 900.0, 150.0,
                memory_kind="HBM2e",
                source="Intel Gaudi 3 white paper, Hot Chips 2024 (24 x 200 GbE RoCE on chip; "
                       "scale-up figure is 24 x 200 Gb/s = 600 GB/s)"),
    Accelerator("Ascend910B", "Huawei", 320.0, 64.0, None, 392.0, 8, 400.0, 70.0,
                memory_kind="HBM2e",
                unconfirmed=("bf16_tflops", "hbm_gb", "hbm_tb_s", "scaleup_gb_s", "tdp_w"),
                source="conflicting public reports; FP16 figure"),
    Accelerator("TPUv5p", "Google", 459.0, 95.0, 2.77, 1200.0, 4, None, 90.0, per_node=4,
                memory_kind="HBM2e", unconfirmed=("tdp_w",),
                source="Google Cloud TPU v5p docs (ICI 3D torus, 8,960 chips per pod)"),
)

CATALOG: dict[str, Accelerator] = {m.name: m for m in _MODELS}


def get(name: str) -> Accelerator:
    """Look a model up by name, case-insensitively.

    >>> get("h100-sxm").vendor
    'NVIDIA'
    """
    for key, model in CATALOG.items():
        if key.lower() == name.lower():
            return model
    known = ", ".join(CATALOG)
    raise KeyError(f"unknown accelerator model {name!r}; known models: {known}")


def override(name: str, **figures) -> Accelerator:
    """Return a copy of a catalog model with some figures replaced (for what-if runs)."""
    return replace(get(name), **figures)


def matching(*, min_hbm_gb: float = 0.0, min_bf16_tflops: float = 0.0,
             vendors: tuple[str, ...] | None = None) -> list[str]:
    """Names of the models that meet a requirement such as "at least 80 GB HBM".

    >>> matching(min_hbm_gb=190)
    ['MI300X', 'MI325X']
    """
    return [m.name for m in _MODELS
            if m.satisfies(min_hbm_gb=min_hbm_gb, min_bf16_tflops=min_bf16_tflops,
                           vendors=vendors)]
