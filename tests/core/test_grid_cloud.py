"""What places charge: owned sites pay energy, cloud regions the GPU-hours their gangs hold
plus each gang's start-up (on demand or spot), and spot gangs are reclaimed at their rate.

Worked by hand: an H100 slot draws 700 W (board) + 575 W (host share) busy, 120 + 287.5 W
idle (:mod:`scheduler.hardware.power`).
"""

import pytest

from scheduler.grid.federation import Grid
from scheduler.grid.places import plans_from_spec
from scheduler.hardware.grid_spec import CloudRegionSpec, GridSpec
from tests.core.grid_factories import HOUR, gjob, link, site

CLOUD = "aws/x"


def cloud_grid(jobs, *, rate=0.0, spot=False, seed=0):
    spec = GridSpec("t", (site("home", price=0.1),),
                    (CloudRegionSpec("aws", "x", "EU", "H100-SXM", 16, 4.0, 1.6, rate, 600),),
                    (link("home", CLOUD),))
    return Grid(spec, plans_from_spec(spec), jobs, spot=spot, seed=seed)


def test_an_owned_site_pays_its_energy_at_its_price_times_pue():
    """One node (8 H100) busy for an hour: 8 x 1.275 kW = 10.2 kWh, x PUE 1.2 x 0.1 $/kWh."""
    g = cloud_grid([gjob(0, allowed=("home",))])
    g.run_until(HOUR)
    assert g.jobs["j0"].state == "done"
    assert g.places["home"].cost() == pytest.approx(10.2 * 1.2 * 0.1)


def test_an_idle_site_still_pays_its_idle_draw():
    """8 idle H100 slots for an hour: 8 x 0.4075 kW x 1.2 x 0.1 $/kWh."""
    g = cloud_grid([])
    g.run_until(HOUR)
    assert g.places["home"].cost() == pytest.approx(8 * 0.4075 * 1.2 * 0.1)


def test_a_cloud_gang_starts_after_the_regions_start_up_and_pays_it_too():
    """8 GPUs for 1 h of work after 600 s of start-up: (8 + 8/6) GPU-hours at 4 $."""
    g = cloud_grid([gjob(0, allowed=(CLOUD,))])
    g.run_until(3 * HOUR)
    js = g.jobs["j0"]
    assert js.history == [CLOUD] and js.first_start_s == pytest.approx(600.0)
    assert g.places[CLOUD].cost() == pytest.approx((8 + 8 / 6) * 4.0)


def test_on_spot_the_same_gang_pays_the_spot_price():
    g = cloud_grid([gjob(0, allowed=(CLOUD,))], spot=True)
    g.run_until(3 * HOUR)
    assert g.places[CLOUD].cost() == pytest.approx((8 + 8 / 6) * 1.6)


def test_spot_gangs_are_reclaimed_and_lose_work_on_demand_ones_are_not():
    """At 1 interruption per instance-hour a 6 h gang is reclaimed (e^-6 chance it is not,
    per seed); it loses the work since its last checkpoint and still finishes, later."""
    jobs = [gjob(0, hours=6.0, allowed=(CLOUD,))]
    calm = cloud_grid(jobs, rate=1.0, spot=False)
    calm.run_until(48 * HOUR)
    assert calm.places[CLOUD].spot_interruptions == 0
    for seed in (0, 1):
        g = cloud_grid(jobs, rate=1.0, spot=True, seed=seed)
        g.run_until(48 * HOUR)
        place = g.places[CLOUD]
        assert place.spot_interruptions > 0
        led = place.engine.horizon_ledger()
        assert led.gpu_hours()["lost_work"] > 0
        assert g.jobs["j0"].state == "done" and g.jobs["j0"].end_s > calm.jobs["j0"].end_s
