"""Heatmaps at 100,000 GPUs: a single hot link survives the fleet view (cells keep their
maximum) and the zoom finds it by switch; colour scales come from the model, not the data."""

import json

import numpy as np
import pytest

from scheduler.frames import (
    LINK_SCALE,
    OUTLET_SCALE,
    POWER_SCALE,
    ZOOM_MAX_CELLS,
    dashboard_frames,
    heat_detail,
    heat_zoom,
    link_detail,
    link_heatmaps,
)
from scheduler.hardware.power import DESIGN_DELTA_T_K, SUPPLY_AIR_C
from scheduler.presets import get_preset
from tests.core.factories import job, run_engine, small_plan, workload


@pytest.fixture(scope="module")
def fabric_100k():
    plan = get_preset("hyperscale-100k").plan()
    assert plan.node_gpus.sum() >= 100_000
    return plan.fabric


def _one_hot(fabric, link: int, value: float = 1.0) -> np.ndarray:
    util = np.full(fabric.link_a.size, 0.02)  # idle links carry a little background traffic
    util[link] = value
    return util


def _cell_of(frame: dict, switch: int, slot: int) -> tuple[int, int]:
    row = next(i for i, (a, b) in enumerate(frame["rows"]) if a <= switch <= b)
    return row, slot // frame["cols_per_cell"]


def _slot(fabric, link: int) -> int:
    """The link's uplink slot on its lower switch (its position among that switch's
    links of its kind, in link order)."""
    same = np.flatnonzero((fabric.link_a == fabric.link_a[link])
                          & (fabric.link_kind == fabric.link_kind[link]))
    return int(np.searchsorted(same, link))


def test_one_saturated_link_among_idle_ones_shows_in_its_merged_fleet_cell(fabric_100k):
    f = fabric_100k
    link = int(np.flatnonzero(f.link_kind == 0)[40_001])  # a leaf-spine link mid-fleet
    leaf = int(f.link_a[link])
    frame = next(fr for fr in link_heatmaps(f, _one_hot(f, link)) if fr["tier"] == "leaf-spine")
    assert frame["rows_per_cell"] > 1  # merged: more leaves than rows drawn
    y, x = _cell_of(frame, leaf, _slot(f, link))
    assert frame["z"][y][x] >= 1.0
    others = [v for r, row in enumerate(frame["z"]) for c, v in enumerate(row) if (r, c) != (y, x)]
    assert max(others) == pytest.approx(0.02)
    a, b = frame["rows"][y]
    assert a <= leaf <= b and b - a + 1 == frame["rows_per_cell"]


def test_the_zoomed_pod_shows_that_exact_link_unmerged(fabric_100k):
    f = fabric_100k
    link = int(np.flatnonzero(f.link_kind == 0)[40_001])
    leaf, pod = int(f.link_a[link]), int(f.switch_pod[f.link_a[link]])
    detail = json.loads(json.dumps(link_detail(f, _one_hot(f, link))))  # as stored
    zoom = heat_zoom({"links": detail}, tier="leaf-spine", pod=pod)
    leaves = np.unique(f.link_a[(f.link_kind == 0) & (f.switch_pod[f.link_a] == pod)])
    assert zoom["ids"] == leaves.tolist()
    z = np.array(zoom["z"])
    assert z.shape == (leaves.size, 32) and z.size <= ZOOM_MAX_CELLS
    row = zoom["ids"].index(leaf)
    assert z[row, _slot(f, link)] == 1.0
    assert np.count_nonzero(z == 1.0) == 1 and np.all(z[z != 1.0] == 0.02)
    by_range = heat_zoom({"links": detail}, tier="leaf-spine", first=leaf, last=leaf)
    assert by_range["ids"] == [leaf] and by_range["z"][0][_slot(f, link)] == 1.0


def test_zoom_marks_links_out_and_counts_them():
    plan = small_plan(8)
    f = plan.fabric
    util = np.zeros(f.link_a.size)
    down = np.zeros(f.link_a.size, dtype=bool)
    down[[0, 3]] = True
    zoom = heat_zoom({"links": link_detail(f, util, down)}, tier="leaf-spine",
                     first=0, last=int(f.n_switches()))
    assert zoom["links_down"] == 2
    flat = np.array(zoom["down"])
    assert flat.sum() == 2 and flat[0, 0] == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"tier": "nope", "pod": 0}, "unknown tier 'nope'"),
    ({"tier": "leaf-spine"}, "needs pod, or first and last"),
    ({"tier": "leaf-spine", "pod": 0, "first": 0, "last": 1}, "not both"),
    ({"tier": "leaf-spine", "pod": -1}, "non-negative integer"),
    ({"tier": "leaf-spine", "pod": 999}, "pod 999 has no leaf-spine switches"),
    ({"tier": "leaf-spine", "first": 9, "last": 3}, "before first"),
    ({"tier": "leaf-spine", "first": 0, "last": 10**6}, "zoom further"),
    ({"tier": "leaf-spine", "pod": 0, "hall": 0}, "hall zooms a rack heatmap"),
])
def test_a_bad_zoom_is_one_clear_error(fabric_100k, kwargs, message):
    detail = {"links": link_detail(fabric_100k, np.zeros(fabric_100k.link_a.size))}
    with pytest.raises(ValueError, match=message):
        heat_zoom(detail, **kwargs)


def test_colour_scales_are_fixed_by_the_model_whatever_the_data():
    plan = small_plan(8)
    wl = workload(job(gpus=32, hours=10))
    busy = dashboard_frames(run_engine(plan, wl, physics=True, physics_tick_s=600.0, until_h=1))
    idle = dashboard_frames(run_engine(small_plan(8), workload(job(gpus=8, hours=10)),
                                       physics=True, physics_tick_s=600.0, until_h=1))
    for frames in (busy, idle):
        racks = frames["racks"]
        assert racks["outlet_c"]["scale"]["zmin"] == SUPPLY_AIR_C
        assert racks["outlet_c"]["scale"]["zmax"] == SUPPLY_AIR_C + 2 * DESIGN_DELTA_T_K
        assert racks["outlet_c"]["scale"] == OUTLET_SCALE
        assert racks["power_share"]["scale"] == POWER_SCALE
        assert racks["power_kw"]["scale"]["zmax"] == float(plan.rack_power_kw.max())
        assert all(fr["scale"] == LINK_SCALE for fr in frames.get("links", []))
    assert busy["racks"]["outlet_c"]["z"] != idle["racks"]["outlet_c"]["z"]  # data differ


def test_power_share_is_each_racks_draw_over_its_budget_and_zooms_by_hall():
    plan = small_plan(8)
    engine = run_engine(plan, workload(job(gpus=32, hours=10)), physics=True,
                        physics_tick_s=600.0, until_h=1)
    kw = engine.physics.last_power.rack_kw
    frames = dashboard_frames(engine)
    assert frames["racks"]["power_share"]["z"][0] == [
        round(float(kw[r] / plan.rack_power_kw[r]), 4) for r in range(2)]
    detail = json.loads(json.dumps(heat_detail(engine)))
    zoom = heat_zoom(detail, tier="power_share", hall=0)
    assert zoom["ids"] == [[0, 1]]
    assert zoom["z"][0] == pytest.approx([kw[r] / plan.rack_power_kw[r] for r in range(2)],
                                         abs=1e-4)
    assert zoom["kw"][0] == pytest.approx(kw.tolist(), abs=0.05)
    temps = heat_zoom(detail, tier="outlet_c", hall=0)
    assert temps["z"][0] == pytest.approx(engine.physics.last_power.outlet_c.tolist(), abs=0.01)
    with pytest.raises(ValueError, match="hall 3 does not exist"):
        heat_zoom(detail, tier="outlet_c", hall=3)
    with pytest.raises(ValueError, match="by hall only"):
        heat_zoom(detail, tier="outlet_c", pod=0)


def test_fleet_cells_name_the_switch_ids_they_cover():
    plan = small_plan(8)
    f = plan.fabric
    frame = link_heatmaps(f, np.zeros(f.link_a.size), max_cells=4)[0]
    leaves = np.unique(f.link_a[f.link_kind == 0])
    rb = frame["rows_per_cell"]
    assert frame["rows"] == [[int(leaves[i]), int(leaves[min(i + rb, leaves.size) - 1])]
                             for i in range(0, leaves.size, rb)]
