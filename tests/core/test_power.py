"""Power and cooling limit the accelerators' speed (scheduler/hardware/power.py).

Expected values are worked by hand in comments (H100: 700 W TDP, 120 W idle from the catalog;
host 575 W per GPU slot at full load, half of it idle).  ``test_regression_*`` compares with
the DGX H100 figure the host share was fitted to; the validation against an unfitted figure
(HPN's 18 MW for about 15,000 GPUs) is in tests/core/test_validation.py.
"""

import numpy as np
import pytest

from scheduler.hardware import power
from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.hardware.power import PowerModel, gpu_power_w, power_report, rack_power_kw

H100 = get("H100-SXM")


def one_rack():
    """4 DGX H100 nodes (32 GPUs) in one rack."""
    return plan_cluster("t", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8})


def two_rows():
    """Two rows of 16 racks, one node per rack."""
    return plan_cluster("t", (NodeGroup("H100-SXM", 32, nodes_per_rack=1),),
                        fabric_kind="fat-tree", fabric_kw={"radix": 16})


def test_gpu_power_is_linear_from_idle_to_tdp():
    assert (gpu_power_w(H100, 0.0), gpu_power_w(H100, 1.0)) == (120.0, 700.0)
    assert gpu_power_w(H100, 0.25) == pytest.approx(265.0)   # 120 + 0.25 x 580
    assert gpu_power_w(H100, 1.5) == 700.0


def test_regression_a_full_rack_of_four_dgx_h100_draws_40_8_kw():
    """Regression check, not validation.

    Fitted: ``HOST_KW_PER_ACCELERATOR`` = (10.2 kW - 8 x 700 W) / 8 from the DGX H100's about
    10.2 kW (figures.md), so 4 nodes at full load draw 4 x 10.2 = 40.8 kW by construction.
    """
    assert rack_power_kw(one_rack(), 1.0).tolist() == pytest.approx([40.8])


def test_an_idle_rack_draws_idle_power_plus_the_idle_host_share():
    # 32 x (120 W + 575 W / 2) = 32 x 407.5 W = 13.04 kW
    assert rack_power_kw(one_rack(), 0.0).tolist() == pytest.approx([13.04])


def test_a_mixed_rack_is_the_hand_sum_of_its_gpus():
    util = np.zeros(32)
    util[:8] = 1.0                        # one node busy, three idle
    # 8 x 1,275 W + 24 x 407.5 W = 10.2 + 9.78 kW
    assert rack_power_kw(one_rack(), util)[0] == pytest.approx(19.98)


def test_full_load_matches_the_plans_peak_node_power():
    p = two_rows()
    # 32 nodes x 10.2 kW, and the plan's own peak figure agrees
    assert rack_power_kw(p, 1.0).sum() == pytest.approx(326.4)
    assert rack_power_kw(p, 1.0).sum() == pytest.approx(p.node_kw().sum())


def test_it_power_adds_switches_and_optics_and_facility_is_it_times_pue():
    """By hand, 32 GPUs on a radix-8 fat-tree: 2 pods of 4 leaves and 4 spines, 4 cores (one
    per plane): 20 switches at 1 kW.  Cables: 32 GPU-leaf + 8 x 4 leaf-spine + 8 x 4
    spine-core = 96, 192 ends in 96 twin-port multimode modules of 15 W: 1.44 kW.  Support
    fabrics of 4 nodes: one storage switch (1 kW) with 8 node links in 8 modules (0.12 kW), one
    in-band switch (0.5 kW), one out-of-band switch (0.1 kW).  Network 23.16 kW; IT 40.8 +
    23.16 = 63.96 kW; facility at PUE 1.3: 83.148 kW."""
    r = PowerModel(one_rack(), pue=1.3).step(1.0)
    assert r.network_kw == pytest.approx(23.16)
    assert r.it_mw == pytest.approx(0.06396)
    assert r.facility_mw == pytest.approx(0.083148)


def test_default_pue_is_inside_the_published_range_and_below_one_is_refused():
    assert 1.1 <= power.PUE_DEFAULT <= 1.6
    with pytest.raises(ValueError, match="PUE"):
        PowerModel(one_rack(), pue=0.9)


def test_a_rack_within_its_provisioned_power_is_not_throttled():
    r = PowerModel(one_rack()).step(1.0)
    assert r.rack_throttle.tolist() == [1.0]
    assert (r.gpu_throttle == 1.0).all()
    assert r.throttled_gpus == 0


def test_a_rack_over_its_cap_throttles_its_gpus_to_what_the_cap_leaves_them():
    pm = PowerModel(one_rack(), rack_caps_kw=np.array([35.0]))
    r = pm.step(1.0)
    # GPUs 32 x 0.7 = 22.4 kW, hosts 32 x 0.575 = 18.4 kW; the hosts keep theirs, so the GPUs
    # get 35 - 18.4 = 16.6 kW of their 22.4: a factor 0.74107
    assert r.rack_demand_kw[0] == pytest.approx(40.8)
    assert r.rack_throttle[0] == pytest.approx(0.741071, rel=1e-5)
    assert r.rack_kw[0] == pytest.approx(35.0)
    assert (r.gpu_throttle == r.rack_throttle[0]).all()
    assert r.throttled_gpus == 32
    assert not r.over_cap.any()


def test_cap_rack_lowers_one_rack_and_cap_all_lowers_every_rack():
    p = two_rows()
    pm = PowerModel(p)
    pm.cap_rack(3, 5.0)
    r = pm.step(1.0)
    assert np.flatnonzero(r.rack_throttle < 1).tolist() == [3]
    pm.cap_all(0.5)
    assert pm.caps_kw == pytest.approx(p.rack_power_kw * 0.5)
    r = pm.step(1.0)
    assert (r.rack_kw <= p.rack_power_kw * 0.5 + 1e-9).all()
    assert (r.rack_throttle < 1).all()
    pm.restore()
    assert (pm.step(1.0).rack_throttle == 1).all()


def test_the_throttle_has_a_floor_and_a_rack_that_needs_less_is_flagged_over_cap():
    pm = PowerModel(one_rack())
    pm.cap_rack(0, 10.0)
    r = pm.step(1.0)
    assert r.rack_throttle[0] == power.THROTTLE_FLOOR
    assert r.over_cap[0]
    assert r.rack_kw[0] > 10.0


def test_a_cooling_loss_throttles_the_racks_of_its_row_only():
    p = two_rows()
    pm = PowerModel(p)
    assert pm.n_rows == 2
    pm.cool_row(1, 0.6)
    r = pm.step(1.0)
    row1 = pm.rack_row == 1
    assert (r.rack_throttle[row1] < 1).all()
    assert (r.rack_throttle[~row1] == 1).all()
    # each rack of one node is provisioned 15 kW (10.2 x 1.15 in 5 kW steps); 60 % is 9 kW
    assert r.rack_kw[row1] == pytest.approx(9.0)
    assert r.rack_throttle[row1] == pytest.approx((9.0 - 4.6) / 5.6)  # hosts keep 4.6 kW
    assert r.throttled_gpus == 8 * int(row1.sum())


def test_outlet_runs_hotter_under_load_and_the_inlet_warms_when_cooling_cannot_keep_up():
    pm = PowerModel(one_rack())
    idle, busy = pm.step(0.0), pm.step(1.0)
    assert busy.inlet_c[0] == power.SUPPLY_AIR_C
    assert busy.outlet_c[0] > idle.outlet_c[0] > power.SUPPLY_AIR_C
    pm.cool_row(0, 0.2)                    # the floor cannot get the rack this low
    hot = pm.step(1.0)
    assert hot.inlet_c[0] > power.SUPPLY_AIR_C


def test_drill_arguments_are_checked():
    pm = PowerModel(one_rack())
    with pytest.raises(ValueError, match="does not exist"):
        pm.cap_rack(7, 10.0)
    with pytest.raises(ValueError, match="positive"):
        pm.cap_rack(0, 0.0)
    with pytest.raises(ValueError, match="fraction"):
        pm.cap_all(1.5)
    with pytest.raises(ValueError, match="does not exist"):
        pm.cool_row(4, 0.5)
    with pytest.raises(ValueError, match="one entry per GPU"):
        pm.step(np.ones(3))


def test_energy_of_a_constant_load_is_megawatts_times_hours():
    r = PowerModel(one_rack()).step(1.0)
    rep = power_report([(0.0, r), (1800.0, r), (7200.0, r)])
    assert rep["hours"] == 2.0
    # 63.96 kW of IT for 2 h = 0.1279 MWh; at the default PUE 1.2, 0.1535 MWh
    assert rep["energy_mwh"]["it"] == pytest.approx(0.1279, abs=1e-4)
    assert rep["energy_mwh"]["facility"] == pytest.approx(0.1535, abs=1e-4)
    assert rep["it_mw"]["mean"] == pytest.approx(0.0640, abs=1e-4)


def test_the_power_report_gives_peaks_top_racks_and_throttled_gpu_hours():
    p = two_rows()
    pm = PowerModel(p)
    calm = pm.step(0.0)
    pm.cap_rack(5, 5.0)
    busy = pm.step(1.0)
    rep = power_report(iter([(0.0, calm), (3600.0, busy), (7200.0, calm)]))
    assert rep["it_mw"]["peak"] == pytest.approx(busy.it_mw, rel=1e-3)
    assert rep["rack_peak_kw"]["max"] == pytest.approx(busy.rack_kw.max(), abs=0.01)
    top = rep["rack_peak_kw"]["top"]
    assert len(top) == 10 and 5 not in [t["rack"] for t in top]
    # one hour with rack 5 (one node) capped at 5 kW: its hosts alone need 4.6 kW, so the
    # factor would be 0.4 / 5.6 and stops at the 0.3 floor: 8 GPU-hours throttled, 8 x 0.7 lost
    assert rep["throttled_gpu_hours"] == pytest.approx(8.0)
    assert rep["throttle_lost_gpu_hours"] == pytest.approx(5.6, abs=1e-3)


def test_a_step_of_a_hundred_thousand_gpus_lies_between_idle_and_full_load():
    """Functional check at scale (the time it takes is measured in bench/, not here)."""
    from scheduler.presets import get_preset
    p = get_preset("hyperscale-100k").plan()
    pm = PowerModel(p)
    util = np.random.default_rng(0).random(p.n_gpus)
    r = pm.step(util)
    idle, full = pm.step(0.0), pm.step(1.0)
    assert idle.it_mw < r.it_mw < full.it_mw
    # a random load is on average half the span between idle and full, rack by rack
    assert r.it_mw == pytest.approx((idle.it_mw + full.it_mw) / 2, rel=0.01)
    assert r.throttled_gpus == 0 and full.throttled_gpus == 0


def test_the_last_sample_holds_until_the_end_of_the_run():
    """With an adaptive tick the last sample can come hours before the end: the energy of two
    runs of the same length must cover the same period (issue 17's studies compare them)."""
    r = PowerModel(one_rack()).step(1.0)
    closed = power_report([(0.0, r), (3600.0, r)])
    held = power_report([(0.0, r), (3600.0, r)], until=7200.0)
    assert held["hours"] == 2.0 and closed["hours"] == 1.0
    assert held["energy_mwh"]["it"] == pytest.approx(2 * closed["energy_mwh"]["it"], abs=2e-4)
    assert power_report([(0.0, r), (3600.0, r)], until=100.0)["hours"] == 1.0


def test_a_power_capped_run_is_integrated_over_the_same_period_and_uses_less_energy():
    from scheduler.simulate import Scenario, run_scenario

    _, free = run_scenario(Scenario(preset="dev-small", days=0.5, seed=1))
    _, capped = run_scenario(Scenario(preset="dev-small", days=0.5, seed=1, power_cap=0.4))
    assert free["power"]["hours"] == capped["power"]["hours"]
    assert capped["power"]["throttled_gpu_hours"] > 0 == free["power"]["throttled_gpu_hours"]
    assert capped["power"]["energy_mwh"]["it"] < free["power"]["energy_mwh"]["it"]
