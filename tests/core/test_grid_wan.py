"""The grid's WAN and the shape of a grid: transfers share links max-min, pay latency and
egress, stall on a cut and resume on repair; a grid that cannot run is refused in one line.

Figures are worked by hand: a 10 Gb/s link moves 1.25 GB a second.
"""

import pytest

from scheduler.grid.federation import Grid
from scheduler.grid.jobs import GridJob
from scheduler.grid.places import check_plans, plans_from_spec
from scheduler.grid.wan import Wan
from scheduler.hardware.cluster import NodeGroup
from scheduler.hardware.grid_spec import CloudRegionSpec, GridSpec, SiteSpec, WanLinkSpec
from scheduler.workload.jobs import TrainingJob

PLACES = ("a", "b", "c")


def wan(*links) -> Wan:
    return Wan(tuple(links), PLACES)


def run_to_end(w: Wan) -> list:
    landed = []
    while (t := w.next_event()) is not None:
        landed += w.advance(t)
    return landed


def test_one_transfer_takes_bytes_over_bandwidth_plus_the_paths_latency():
    """125 GB over 10 Gb/s: 100 s of bytes, then 50 ms of latency."""
    w = wan(WanLinkSpec("a", "b", 10.0, 50.0))
    w.start("a", "b", 125.0)
    (t,) = run_to_end(w)
    assert t.done_s == pytest.approx(100.05)


def test_two_transfers_on_one_link_split_it_evenly_and_the_survivor_takes_it_all():
    """Two 125 GB moves a->b on 10 Gb/s: 5 Gb/s each, both land at 200 s (not 100 and 200)."""
    w = wan(WanLinkSpec("a", "b", 10.0, 0.0))
    w.start("a", "b", 125.0)
    w.start("a", "b", 125.0)
    assert [t.rate_gbps for t in w.transfers.values()] == pytest.approx([5.0, 5.0])
    done = run_to_end(w)
    assert [t.done_s for t in done] == pytest.approx([200.0, 200.0])


def test_a_shorter_transfer_leaves_its_share_to_the_other():
    """25 GB and 125 GB on 10 Gb/s: the small one lands at 40 s (5 Gb/s); the large one has
    moved 25 GB by then and takes the full 10 Gb/s for its last 100 GB: 120 s."""
    w = wan(WanLinkSpec("a", "b", 10.0, 0.0))
    w.start("a", "b", 25.0)
    w.start("a", "b", 125.0)
    small, large = run_to_end(w)
    assert small.done_s == pytest.approx(40.0)
    assert large.done_s == pytest.approx(120.0)


def test_sharing_is_max_min_not_equal_split_when_one_transfer_is_bottlenecked_elsewhere():
    """a->b (40 Gb/s) then b->c (10 Gb/s) for one move, a->b alone for the other: the first
    is held to 10 by b->c, so the second gets the 30 left on a->b, not 20."""
    w = wan(WanLinkSpec("a", "b", 40.0, 0.0), WanLinkSpec("b", "c", 10.0, 0.0))
    through = w.start("a", "c", 1000.0)
    local = w.start("a", "b", 1000.0)
    assert through.rate_gbps == pytest.approx(10.0)
    assert local.rate_gbps == pytest.approx(30.0)


def test_the_two_directions_of_a_link_do_not_share():
    w = wan(WanLinkSpec("a", "b", 10.0, 0.0))
    there, back = w.start("a", "b", 10.0), w.start("b", "a", 10.0)
    assert there.rate_gbps == back.rate_gbps == pytest.approx(10.0)


def test_egress_is_charged_to_the_place_data_leaves_by_direction_and_bytes_are_booked():
    """a->b costs 0.09 $/GB, b->a 0.02: 100 GB each way."""
    w = wan(WanLinkSpec("a", "b", 10.0, 0.0, egress_per_gb=0.09, egress_back_per_gb=0.02))
    w.start("a", "b", 100.0)
    w.start("b", "a", 100.0)
    run_to_end(w)
    assert w.egress_cost["a"] == pytest.approx(9.0)
    assert w.egress_cost["b"] == pytest.approx(2.0)
    assert w.bytes_out == pytest.approx({"a": 100.0, "b": 100.0, "c": 0.0})
    assert w.bytes_in == pytest.approx({"a": 100.0, "b": 100.0, "c": 0.0})


def test_a_transfer_takes_the_lowest_latency_path_and_reroutes_when_it_is_cut():
    """a-b direct (10 ms) or via c (20 + 20 ms), all 10 Gb/s.  Cut a-b at 50 s with 62.5 GB
    moved: the rest goes via c at 10 Gb/s, 50 s more, and lands 40 ms after its last byte."""
    w = wan(WanLinkSpec("a", "b", 10.0, 10.0), WanLinkSpec("a", "c", 10.0, 20.0),
            WanLinkSpec("c", "b", 10.0, 20.0))
    t = w.start("a", "b", 125.0)
    assert t.latency_s == pytest.approx(0.010)
    w.advance(50.0)
    w.set_link("a", "b", up=False)
    assert t.latency_s == pytest.approx(0.040)
    (done,) = run_to_end(w)
    assert done.done_s == pytest.approx(100.04)


def test_a_cut_with_no_other_path_stalls_the_transfer_until_the_link_is_back():
    w = wan(WanLinkSpec("a", "b", 10.0, 0.0))
    t = w.start("a", "b", 125.0)
    w.advance(50.0)
    w.set_link("a", "b", up=False)
    assert w.next_event() is None and t.rate_gbps == 0.0
    w.advance(1000.0)
    w.set_link("a", "b", up=True)
    (done,) = run_to_end(w)
    assert done.done_s == pytest.approx(1050.0)


def test_a_cancelled_transfer_books_only_what_it_moved():
    w = wan(WanLinkSpec("a", "b", 10.0, 0.0, egress_per_gb=0.1))
    t = w.start("a", "b", 125.0)
    w.advance(40.0)
    w.cancel(t.tid)
    assert w.bytes_out["a"] == pytest.approx(50.0)
    assert w.egress_cost["a"] == pytest.approx(5.0)


# ----------------------------------------------------------------- a grid that cannot run
def site(name, jurisdiction="EU"):
    return SiteSpec(name, name, jurisdiction, (NodeGroup("H100-SXM", 2),), "fat-tree",
                    {"radix": 8})


@pytest.mark.parametrize("spec, message", [
    (GridSpec("g", (site("a"),), links=(WanLinkSpec("a", "z", 10, 1),)),
     "WAN link a-z names 'z', which is no site or cloud region"),
    (GridSpec("g", (site("a"), site("a"))), "place names repeat: a"),
    (GridSpec("g", ()), "at least one owned site"),
    (GridSpec("g", (site("a"), site("b")), links=(WanLinkSpec("a", "b", 0, 1),)),
     "bandwidth must be positive"),
    (GridSpec("g", (site("a"),), (CloudRegionSpec("aws", "x", "US", "H100-SXM", 0, 4.0),)),
     "quota must be positive"),
])
def test_a_bad_grid_spec_is_refused_in_one_line(spec, message):
    with pytest.raises(ValueError, match=message) as err:
        plans_from_spec(spec)
    assert "\n" not in str(err.value)


def test_plans_may_leave_out_clouds_and_preset_sites_but_name_no_other_place():
    """The inventory hands its owned sites' plans only: a cloud region's pool is built from
    its quota; a site with no node groups (an inventory cluster) needs its plan."""
    cloud = CloudRegionSpec("aws", "x", "EU", "H100-SXM", 16, 4.0)
    spec = GridSpec("g", (site("a"),), (cloud,), links=(WanLinkSpec("a", "aws/x", 10, 1),))
    plans = check_plans(spec, {"a": plans_from_spec(spec)["a"]})
    assert plans["aws/x"].n_gpus == 16 and plans["a"].n_gpus == 16
    with pytest.raises(ValueError, match="not a place: x"):
        check_plans(spec, {"x": plans["a"]})
    bare = GridSpec("g", (SiteSpec("b", "b", "EU"),))
    with pytest.raises(ValueError, match="site b names no node groups: give its plan"):
        Grid(bare, {})


def test_a_job_whose_data_lives_at_no_place_of_the_grid_is_refused_before_the_run():
    spec = GridSpec("g", (site("a"),))
    job = TrainingJob(0, "j", "t", 0.0, 8, 1e18)
    with pytest.raises(ValueError, match="data site 'nowhere' is no place"):
        Grid(spec, plans_from_spec(spec), [GridJob(job, "d", "nowhere", 10.0)])


def test_a_cut_of_a_link_the_grid_lacks_is_refused_when_asked():
    spec = GridSpec("g", (site("a"), site("b")), links=(WanLinkSpec("a", "b", 10, 1),))
    grid = Grid(spec, plans_from_spec(spec))
    with pytest.raises(ValueError, match="no WAN link joins a and c"):
        grid.wan_cut("a", "c", 10.0)


def test_the_estimate_placement_weighs_is_bytes_over_the_free_share_plus_latency_and_egress():
    """What a policy sees before it moves anything: 100 GB over 10 Gb/s with 20 ms: 80.02 s,
    priced at the link's egress per GB; with one transfer already on the link the newcomer
    would get half of it (160.02 s); a landed transfer no longer counts."""
    w = wan(WanLinkSpec("a", "b", 10.0, 20.0, egress_per_gb=0.05))
    assert w.estimate("a", "b", 100.0) == pytest.approx((80.02, 5.0))
    w.start("a", "b", 12.5)
    assert w.estimate("a", "b", 100.0) == pytest.approx((160.02, 5.0))
    run_to_end(w)
    assert w.estimate("a", "b", 100.0) == pytest.approx((80.02, 5.0))


def test_an_estimate_with_nothing_to_move_or_no_path_says_so():
    w = wan(WanLinkSpec("a", "b", 10.0, 20.0, egress_per_gb=0.05))
    assert w.estimate("a", "a", 100.0) == (0.0, 0.0)  # already there
    assert w.estimate("a", "b", 0.0) == (0.0, 0.0)    # nothing to move
    assert w.estimate("a", "c", 100.0) is None        # no link reaches c
    w.set_link("a", "b", False)
    assert w.estimate("a", "b", 100.0) is None        # the only link is cut


@pytest.mark.parametrize("src, dst, gb, message", [
    ("a", "a", 10.0, "two different places"), ("a", "mars", 10.0, "two different places"),
    ("mars", "b", 10.0, "two different places"), ("a", "b", 0.0, "positive number of GB"),
    ("a", "b", 0.5, None), ("a", "b", -1.0, "positive number of GB"),
    ("a", "b", float("nan"), "positive number of GB"),
    ("a", "b", float("inf"), "positive number of GB")])
def test_a_transfer_joins_two_places_of_the_grid_and_moves_a_positive_finite_amount(
        src, dst, gb, message):
    w = wan(WanLinkSpec("a", "b", 10.0, 0.0))
    if message is None:  # half a GB is a transfer like any other
        assert w.start(src, dst, gb).gb == gb
        return
    with pytest.raises(ValueError, match=message):
        w.start(src, dst, gb)
    assert not w.transfers


def test_every_transfer_gets_its_own_id_and_a_cut_off_one_is_priced_nothing_yet():
    w = wan(WanLinkSpec("a", "b", 10.0, 0.0, egress_per_gb=0.05))
    ids = [w.start("a", "b", 1.0).tid for _ in range(3)]
    assert len(set(ids)) == 3
    stalled = w.start("a", "c", 1.0)  # no link reaches c: it waits, and pays nothing so far
    assert stalled.units is None and stalled.price_per_gb == 0.0
