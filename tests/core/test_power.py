"""Power and cooling limit the accelerators' speed (scheduler/physics/power.py)."""

import numpy as np
import pytest

from scheduler.hardware.catalog import get
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.physics import power
from scheduler.physics.power import PowerModel, gpu_power_w, power_report, rack_power_kw

H100 = get("H100-SXM")
HOST_W = power.HOST_KW_PER_ACCELERATOR * 1000.0


def one_rack():
    """4 DGX H100 nodes (32 GPUs) in one rack."""
    return plan_cluster("t", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8})


def two_rows():
    """Two rows of 16 racks, one node per rack."""
    return plan_cluster("t", (NodeGroup("H100-SXM", 32, nodes_per_rack=1),),
                        fabric_kind="fat-tree", fabric_kw={"radix": 16})


def test_gpu_power_is_linear_from_idle_to_tdp():
    assert gpu_power_w(H100, 0.0) == H100.idle_w
    assert gpu_power_w(H100, 1.0) == H100.tdp_w
    assert gpu_power_w(H100, 0.25) == pytest.approx(H100.idle_w + 0.25 * (700 - H100.idle_w))
    assert gpu_power_w(H100, 1.5) == H100.tdp_w


def test_a_rack_at_full_load_draws_tdp_plus_host_for_every_gpu():
    assert rack_power_kw(one_rack(), 1.0).tolist() == pytest.approx([32 * (700 + HOST_W) / 1e3])


def test_an_idle_rack_draws_idle_power_plus_the_idle_host_share():
    expected = 32 * (H100.idle_w + power.HOST_IDLE_FRACTION * HOST_W) / 1e3
    assert rack_power_kw(one_rack(), 0.0).tolist() == pytest.approx([expected])


def test_a_mixed_rack_is_the_hand_sum_of_its_gpus():
    util = np.zeros(32)
    util[:8] = 1.0                        # one node busy, three idle
    busy = 8 * (700 + HOST_W)
    idle = 24 * (H100.idle_w + power.HOST_IDLE_FRACTION * HOST_W)
    assert rack_power_kw(one_rack(), util)[0] == pytest.approx((busy + idle) / 1e3)


def test_full_load_matches_the_plans_peak_node_power():
    p = two_rows()
    assert rack_power_kw(p, 1.0).sum() == pytest.approx(p.node_kw().sum())


def test_it_power_adds_switches_and_optics_and_facility_is_it_times_pue():
    p = one_rack()
    r = PowerModel(p, pue=1.3).step(1.0)
    network = (power.SWITCH_KW * p.fabric.n_switches()
               + 2 * p.cabled_links() * power.TRANSCEIVER_W / 1e3)
    assert r.network_kw == pytest.approx(network)
    assert r.it_mw == pytest.approx((r.rack_kw.sum() + network) / 1e3)
    assert r.facility_mw == pytest.approx(r.it_mw * 1.3)


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
    gpu_kw, host_kw = 32 * 0.7, 32 * HOST_W / 1e3
    assert r.rack_demand_kw[0] == pytest.approx(gpu_kw + host_kw)
    assert r.rack_throttle[0] == pytest.approx((35.0 - host_kw) / gpu_kw)
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
    assert r.rack_kw[row1] == pytest.approx(p.rack_power_kw[row1] * 0.6)
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
    assert rep["energy_mwh"]["it"] == pytest.approx(r.it_mw * 2, rel=1e-3)
    assert rep["energy_mwh"]["facility"] == pytest.approx(r.facility_mw * 2, rel=1e-3)
    assert rep["it_mw"]["mean"] == pytest.approx(r.it_mw, rel=1e-3)


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
    assert rep["throttled_gpu_hours"] == pytest.approx(8.0)
    assert rep["throttle_lost_gpu_hours"] == pytest.approx(8 * (1 - busy.rack_throttle[5]),
                                                           abs=1e-3)


def test_a_step_of_a_hundred_thousand_gpus_takes_milliseconds():
    from time import perf_counter

    from scheduler.presets import get_preset
    p = get_preset("hyperscale-100k").plan()
    pm = PowerModel(p)
    util = np.random.default_rng(0).random(p.n_gpus)
    pm.step(util)
    start = perf_counter()
    pm.step(util)
    assert perf_counter() - start < 0.1
