"""The accelerator catalog: several vendors behind one abstraction, figures sourced."""

import pytest

from scheduler.hardware import catalog

REQUIRED = ["H100-SXM", "H200-SXM", "B200", "GB200", "MI300X", "MI325X", "Gaudi3",
            "Ascend910B", "TPUv5p"]


def test_catalog_holds_every_required_model_with_a_source():
    for name in REQUIRED:
        model = catalog.get(name)
        assert model.source, name
        assert model.bf16_tflops > 0 and model.hbm_gb > 0 and model.scaleup_gb_s > 0


def test_catalog_spans_several_vendors():
    vendors = {m.vendor for m in catalog.CATALOG.values()}
    assert {"NVIDIA", "AMD", "Intel", "Huawei", "Google"} <= vendors


def test_figures_match_the_reference_table():
    h100 = catalog.get("H100-SXM")
    assert (h100.bf16_tflops, h100.hbm_gb, h100.hbm_tb_s, h100.tdp_w) == (989, 80, 3.35, 700)
    assert catalog.get("GB200").scaleup_domain == 72
    assert catalog.get("MI300X").hbm_gb == 192


def test_unpublished_figures_are_marked_and_known_fields():
    assert catalog.get("TPUv5p").tdp_w is None
    assert "tdp_w" in catalog.get("TPUv5p").unconfirmed
    assert "bf16_tflops" in catalog.get("Ascend910B").unconfirmed
    fields = set(catalog.Accelerator.__dataclass_fields__)
    for model in catalog.CATALOG.values():
        assert set(model.unconfirmed) <= fields


def test_requirement_matching_selects_by_memory_and_vendor():
    assert "H100-SXM" not in catalog.matching(min_hbm_gb=100)
    assert set(catalog.matching(min_hbm_gb=100, vendors=("NVIDIA",))) == {
        "H200-SXM", "B200", "GB200"}


def test_unknown_model_is_refused_with_the_known_names():
    with pytest.raises(KeyError, match="known models: H100-SXM"):
        catalog.get("A100")


def test_override_returns_a_changed_copy():
    faster = catalog.override("H100-SXM", bf16_tflops=1200.0)
    assert faster.bf16_tflops == 1200.0
    assert catalog.get("H100-SXM").bf16_tflops == 989.0
