"""Continuity on a grid: a lost region's jobs restart elsewhere from their off-site checkpoint,
paying its transfer; a cut WAN holds a job whose data cannot reach; same seed, same report.

The hand-built drill: sites ``a`` (16 GPUs, cheapest that fits), ``b`` (8 GPUs: too small for
the gang, holds the data and the off-site copies) and ``c`` (16 GPUs), all joined at 10 Gb/s
(1.25 GB/s) with no latency.  A 16-GPU job of 10 h reads 125 GB from ``b``; checkpoints of
250 GB every hour of compute; replication every hour.
"""

import json
import subprocess
import sys

import pytest

from scheduler.grid.continuity import compare_replication, random_region_losses
from scheduler.grid.presets import grid_spec
from scheduler.grid.run import run_grid
from scheduler.model.ledger import INDEX
from tests.core.grid_factories import H100_RATE, HOUR, gjob, grid, link, site

WORK_H = 10.0


def drill(replication_s):
    g = grid([site("a", 2, price=0.05), site("b", 1, price=0.01), site("c", 2, price=0.1)],
             [link("a", "b"), link("b", "c"), link("a", "c")],
             [gjob(0, gpus=16, hours=WORK_H, dataset="d", data_site="b", dataset_gb=125.0,
                   checkpoint_gb=250.0)], replication_s=replication_s)
    g.region_loss("a", 4 * HOUR, None)
    g.run_until(20 * HOUR)
    return g


def hours_of(flops):
    return flops / (16 * H100_RATE * HOUR)


def test_a_lost_regions_job_restarts_elsewhere_from_its_replicated_checkpoint():
    """At 4 h the job has computed almost 4 h at ``a`` (after 100 s moving its data); the
    copies that landed at ``b`` by then hold 2 h (the third checkpoint is written at about
    3 h 2 min, replicated at the 4 h tick: too late).  It restarts at ``c`` with 8 h to do,
    after its dataset (125 GB) and checkpoint (250 GB) have crossed b->c together: the
    dataset at 5 Gb/s lands at 200 s, the checkpoint's last 125 GB at 10 Gb/s at 300 s."""
    g = drill(HOUR)
    js = g.jobs["j0"]
    assert js.history == ["a", "c"] and js.state == "done"
    assert hours_of(js.remaining_flops) == pytest.approx(WORK_H - 2.0)
    assert 1.9 < hours_of(js.lost_flops) < 2.0
    ckpt = [t for t in g.wan.done if t.tag == "checkpoint of j0"]
    assert [(t.src, t.dst, t.gb) for t in ckpt] == [("b", "c", 250.0)]
    assert ckpt[0].done_s - 4 * HOUR == pytest.approx(300.0)
    assert js.move_wait_s == pytest.approx(100.0 + 300.0)
    assert js.moved_gb == pytest.approx(125.0 + 125.0 + 250.0)
    assert g.places["c"].engine.runs[0].first_start == pytest.approx(4 * HOUR + 300.0)


def test_without_off_site_copies_the_job_starts_again_from_nothing():
    g = drill(None)
    js = g.jobs["j0"]
    assert js.history == ["a", "c"]
    assert hours_of(js.remaining_flops) == pytest.approx(WORK_H)
    assert 3.9 < hours_of(js.lost_flops) < 4.0
    assert not [t for t in g.wan.done if "checkpoint" in t.tag or "replica" in t.tag]


def test_replicating_more_often_loses_less_to_a_region_loss():
    lost = [drill(r).jobs["j0"].lost_flops for r in (HOUR, 2 * HOUR, None)]
    assert lost[0] < lost[1] < lost[2]


def test_a_dark_place_books_its_gpus_down_and_takes_no_job():
    g = drill(HOUR)
    led = g.places["a"].engine.horizon_ledger()
    assert led.gpu_s[INDEX["down_for_repair"]].sum() == pytest.approx(16 * 16 * HOUR)
    assert len(g.places["a"].engine.runs) == 1


def test_a_cut_wan_holds_a_job_whose_data_cannot_reach_until_it_is_mended():
    g = grid([site("store", 1), site("run", 2)], [link("store", "run")],
             [gjob(0, gpus=16, submit_h=1.0, dataset="d", data_site="store",
                   dataset_gb=125.0)])
    g.wan_cut("store", "run", 0.5 * HOUR, 1.5 * HOUR)
    g.run_until(1.5 * HOUR)
    assert g.jobs["j0"].state == "held"
    assert "no WAN path from a live copy of its dataset" in g.jobs["j0"].reason
    g.run_until(4 * HOUR)
    assert g.jobs["j0"].history == ["run"]
    assert g.jobs["j0"].first_start_s == pytest.approx(2 * HOUR + 100.0)


# ----------------------------------------------------------------- the grid preset
@pytest.fixture(scope="module")
def lost_north():
    return run_grid(days=2.0, seed=2, policy="cost",
                    region_loss=[("eu-north", 18 * HOUR, 12 * HOUR)])


def test_on_the_preset_a_region_loss_moves_jobs_with_their_checkpoints(lost_north):
    """Each job at eu-north when it went dark starts again at another place: from the
    checkpoint it had replicated (there already, or moved there over the WAN, booked), or
    from its beginning if it had none off-site yet."""
    g, rep = lost_north
    moved = [js for js in g.jobs.values() if js.restarts]
    lost = rep["summary"]["region_loss"]
    assert lost["jobs_hit"] == lost["restarted"] == len(moved) > 0
    assert 0 < lost["from_checkpoint"] <= len(moved)
    carried = {(t.tag, t.src, t.dst) for t in g.wan.done if t.tag.startswith("checkpoint of")}
    for js in moved:
        (lost,) = js.restarts
        assert js.history[0] == "eu-north" and len(js.history) == 2
        at, to = lost["checkpoint_at"], js.history[1]
        if at is None:
            assert lost["kept_flops"] == 0.0
            continue
        assert at != "eu-north" and lost["kept_flops"] > 0
        assert at == to or (f"checkpoint of {js.gjob.name}", at, to) in carried
    assert carried  # some restarts had to move theirs
    north = g.places["eu-north"].engine
    assert not [r for r in north.runs if r.first_start is not None
                and 18 * HOUR < r.first_start < 30 * HOUR]
    (entry,) = [s for s in rep["sites"] if s["place"] == "eu-north"]
    assert entry["dark_hours"] == pytest.approx(12.0)


def test_the_report_has_one_site_entry_per_place_and_its_bytes_add_up(lost_north):
    g, rep = lost_north
    assert [s["place"] for s in rep["sites"]] == list(g.spec.places())
    assert [s["kind"] for s in rep["sites"]] == ["site"] * 3 + ["cloud"] * 2
    out = sum(s["wan_out_gb"] for s in rep["sites"])
    assert out == pytest.approx(sum(s["wan_in_gb"] for s in rep["sites"]), abs=1.0)
    assert out == pytest.approx(rep["summary"]["moved_gb"]["total"], abs=1.0)
    for s in rep["sites"]:
        assert s["gpus"] > 0 and 0 <= s["allocation"] <= 1 and s["cost"] > 0
    summary = rep["summary"]
    assert summary["cost"]["total"] == pytest.approx(
        sum(s["cost"] + s["egress_cost"] for s in rep["sites"]), abs=0.1)
    assert summary["data_move"]["job_hours"] == pytest.approx(
        sum(j["data_move_hours"] for j in rep["jobs"]), abs=0.01)


def _strip(report):
    report = dict(report)
    report.pop("wall_seconds")
    return report


def test_same_seed_same_report_in_this_process_and_another():
    one = _strip(run_grid(days=1.0, seed=5, policy="balanced")[1])
    again = _strip(run_grid(days=1.0, seed=5, policy="balanced")[1])
    other = _strip(run_grid(days=1.0, seed=6, policy="balanced")[1])
    assert one == again and one != other
    code = ("import json; from scheduler.grid.run import simulate_grid; "
            "r = simulate_grid(days=1.0, seed=5, policy='balanced'); r.pop('wall_seconds'); "
            "print(json.dumps(r))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert json.loads(out.stdout) == json.loads(json.dumps(one))


def test_checkpoints_go_off_site_only_where_the_job_may_run():
    """An EU-only job at eu1 (its data there too): the US site is the closest (1 ms), but its
    copies go to eu2 (50 ms)."""
    g = grid([site("eu1", 2), site("us", 2, jurisdiction="US"), site("eu2", 2)],
             [link("eu1", "us", ms=1.0), link("eu1", "eu2", ms=50.0)],
             [gjob(0, hours=4.0, allowed=("EU",), checkpoint_gb=10.0)],
             replication_s=HOUR, policy="gravity")
    g.run_until(5 * HOUR)
    replicas = {(t.src, t.dst) for t in g.wan.done if t.tag == "replica of j0"}
    assert g.jobs["j0"].history == ["eu1"] and replicas == {("eu1", "eu2")}


def test_a_job_whose_every_data_copy_is_dark_waits_for_it():
    g = grid([site("store", 1), site("run", 2)], [link("store", "run")],
             [gjob(0, gpus=16, submit_h=1.0, dataset="d", data_site="store",
                   dataset_gb=125.0)])
    g.region_loss("store", 0.5 * HOUR, 2 * HOUR)
    g.run_until(2 * HOUR)
    assert g.jobs["j0"].state == "held"
    assert "run: every copy of its dataset is in the dark" in g.jobs["j0"].reason
    g.run_until(4 * HOUR)
    assert g.jobs["j0"].first_start_s == pytest.approx(2.5 * HOUR + 100.0)


# ----------------------------------------------------------------- replication vs loss rate
def test_random_region_losses_are_seeded_and_never_overlap_at_one_place():
    spec = grid_spec()
    one = random_region_losses(spec, days=10, rate_per_day=0.5, duration_s=6 * HOUR, seed=4)
    assert one == random_region_losses(spec, days=10, rate_per_day=0.5,
                                       duration_s=6 * HOUR, seed=4)
    assert one != random_region_losses(spec, days=10, rate_per_day=0.5,
                                       duration_s=6 * HOUR, seed=5)
    assert random_region_losses(spec, days=10, rate_per_day=0.0, duration_s=HOUR,
                                seed=4) == []
    for place in spec.places():
        starts = [at for p, at, _ in one if p == place]
        assert all(b - a >= 6 * HOUR for a, b in zip(starts, starts[1:], strict=False))
    assert len(one) > 5


def test_replicating_off_site_trades_wan_bytes_for_work_kept_through_region_losses():
    """Same grid, jobs and losses (one a place a day, 6 h each, 2 seeds): hourly copies
    move replica bytes and lose less work than no copies, which move none."""
    hourly, never = compare_replication([HOUR, None], [1.0], seeds=(0, 1), days=1.5)
    assert hourly["losses"] == never["losses"] > 0
    assert hourly["lost_h100_gpu_hours"] < never["lost_h100_gpu_hours"]
    assert hourly["replica_gb"] > 0 == never["replica_gb"]
