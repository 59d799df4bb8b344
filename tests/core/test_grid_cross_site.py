"""Cross-site data parallelism on the grid (issue 30, item 2): a gang spans places only when
its job allows it, and then pays the WAN's gradient exchange in its step time.

Sites here are one H100 node (8 GPUs) each; the jobs are 16-GPU gangs of a 7B model (TP 8 x
DP 2 by default: one replica per node), so no single site holds one.  The physics is off, so
each part computes at its job's efficiency and only the WAN slows it.
"""

from __future__ import annotations

import json

import pytest

from scheduler.grid.jobs import GridJob
from scheduler.grid.report import grid_report
from scheduler.hardware.catalog import get
from scheduler.model.job_run import CANCELLED, DONE
from scheduler.physics.step_time import step_breakdown
from scheduler.workload.jobs import Parallelism, TrainingJob
from tests.core.grid_factories import H100_RATE, HOUR, grid, link, site

PARAMS_B = 7.0
GRAD_GB = 2.0 * PARAMS_B
"""BF16 gradients of a 7B model, GB: what each direction carries per step between two places
(a ring all-reduce of two members sends its whole buffer once each way)."""


def cjob(k: int = 0, *, gpus: int = 16, hours: float = 2.0, cross: bool = True,
         submit_h: float = 0.0, allowed=(), stacks=(), data_site: str = "",
         dataset_gb: float = 0.0, checkpoint_gb: float = 10.0) -> GridJob:
    job = TrainingJob(k, f"j{k}", "t", submit_h * HOUR, gpus, gpus * H100_RATE * hours * HOUR,
                      params_b=PARAMS_B, checkpoint_gb=checkpoint_gb,
                      checkpoint_interval_s=HOUR)
    return GridJob(job, "data" if dataset_gb else "", data_site, dataset_gb, tuple(allowed),
                   tuple(stacks), cross_site=cross)


def part_runs(g, name: str, places=None):
    """Every engine run of grid job ``name`` (its parts), per place."""
    out = []
    for p in places or g.places:
        place = g.places[p]
        out += [(p, place.engine.runs[i]) for i, n in place.runs.items() if n == name]
    return out


def in_place_step_s() -> float:
    """The engine's step model for one part: 8 H100s, TP 8, one replica."""
    part = TrainingJob(0, "part", "t", 0.0, 8, 1.0, params_b=PARAMS_B,
                       parallelism=Parallelism(tp=8, dp=1))
    return step_breakdown(part, get("H100-SXM"), gpus_per_node=8, nodes=1).total_s


def two_sites(gbps: float = 100.0, ms: float = 0.0, jobs=None, **kw):
    """Sites a and b joined by one link; by default one cross-site job without checkpoints
    (so no replica shares the link with its gradients: the hand checks stay exact)."""
    return grid([site("a"), site("b")], [link("a", "b", gbps, ms)],
                [cjob(checkpoint_gb=0.0)] if jobs is None else jobs, **kw)


# --------------------------------------------------------------------- when it splits
def test_too_big_job_runs_split_only_when_it_allows_it():
    g = two_sites(jobs=[cjob(0, cross=False), cjob(1, cross=True)])
    g.run_until(6 * HOUR)
    assert g.jobs["j0"].state == "refused"          # as today: no place holds 16 GPUs
    assert "holds 16 GPUs" in g.jobs["j0"].reason
    assert part_runs(g, "j0") == []
    js = g.jobs["j1"]
    assert js.state == "done"
    assert sorted((p, r.gpus) for p, r in part_runs(g, "j1")) == [("a", 8), ("b", 8)]


def test_job_that_fits_one_place_runs_whole_even_if_it_may_split():
    g = grid([site("a"), site("b", nodes=2)], [link("a", "b", 100.0)], [cjob()])
    g.run_until(6 * HOUR)
    assert g.jobs["j0"].state == "done"
    assert [(p, r.gpus) for p, r in part_runs(g, "j0")] == [("b", 16)]
    assert g.jobs["j0"].wan_gradient_gb == 0.0


def test_split_when_the_place_it_fits_is_busy_too_long():
    # "big" holds 16 GPUs but is busy for 5 h (> SPLIT_PATIENCE_S): the cross-site job splits
    # over the two free small sites; the same job without permission waits for "big"
    block = GridJob(TrainingJob(9, "block", "t", 0.0, 16, 16 * H100_RATE * 5 * HOUR),
                    allowed=("big",))
    sites = [site("big", nodes=2), site("a"), site("b")]
    links = [link("big", "a", 100.0), link("a", "b", 100.0), link("big", "b", 100.0)]
    g = grid(sites, links, [block, cjob(0, submit_h=0.1), cjob(1, submit_h=0.1, cross=False)])
    g.run_until(40 * HOUR)
    assert sorted(p for p, _ in part_runs(g, "j0")) == ["a", "b"]
    assert [p for p, _ in part_runs(g, "j1")] == ["big"]
    assert g.jobs["j0"].first_start_s < HOUR < 5 * HOUR <= g.jobs["j1"].first_start_s


def test_cross_site_needs_a_model_size():
    job = TrainingJob(0, "j0", "t", 0.0, 16, 1e18)
    with pytest.raises(ValueError, match="params_b"):
        GridJob(job, cross_site=True)
    GridJob(job)  # a job that never splits needs none


# --------------------------------------------------------------------- the step pays the WAN
def _finish_h(g, name="j0") -> float:
    g.run_until(40 * HOUR)
    assert g.jobs[name].state == "done"
    return g.jobs[name].end_s / HOUR


def test_split_step_is_slower_than_whole_and_slower_on_a_thinner_link():
    whole = grid([site("a", nodes=2)], (), [cjob(checkpoint_gb=0.0)])
    thick, thin = two_sites(100.0), two_sites(10.0)
    t_whole, t_thick, t_thin = _finish_h(whole), _finish_h(thick), _finish_h(thin)
    assert t_whole < t_thick < t_thin
    # by hand: each step adds 14 GB x 8 / bandwidth of exposed WAN time (no latency), so
    # the WAN hours of the two links stand as 112 s / 11.2 s = 10 to one
    wan_thick = thick.jobs["j0"].wan_exposed_s
    wan_thin = thin.jobs["j0"].wan_exposed_s
    assert wan_thin / wan_thick == pytest.approx(10.0, rel=1e-6)
    # ... and beside the in-place step of the engine's step model (2 h of compute):
    steps = 2 * HOUR / in_place_step_s()
    assert wan_thick == pytest.approx(steps * GRAD_GB * 8 / 100.0, rel=1e-3)
    assert t_thick - t_whole == pytest.approx(wan_thick / HOUR, rel=1e-3)


def test_link_latency_adds_two_hops_per_step():
    flat, far = two_sites(100.0, 0.0), two_sites(100.0, 50.0)
    _finish_h(flat), _finish_h(far)
    steps = 2 * HOUR / in_place_step_s()
    extra = far.jobs["j0"].wan_exposed_s - flat.jobs["j0"].wan_exposed_s
    assert extra == pytest.approx(steps * 2 * 0.050, rel=1e-3)  # reduce-scatter + all-gather


def test_both_parts_pay_the_wan_in_their_ledgers():
    g = two_sites(10.0)
    g.run_until(40 * HOUR)
    comm = [g.places[p].engine.horizon_ledger().gpu_hours()["exposed_communication"]
            for p in ("a", "b")]
    assert comm[0] == pytest.approx(comm[1]) and comm[0] > 0
    assert comm[0] == pytest.approx(8 * g.jobs["j0"].wan_exposed_s / HOUR, rel=1e-6)


def test_other_transfers_share_the_link_with_the_gradients():
    # a 4 TB dataset crosses b -> a while the job runs: it takes half of that direction,
    # so the job's step is slower than on an empty link, and the dataset slower too
    def run(with_data: bool):
        jobs = [cjob(0, hours=4.0)]
        if with_data:
            jobs.append(GridJob(TrainingJob(1, "j1", "t", 0.5 * HOUR, 8, 1.0), "big", "b",
                                4000.0, ("a",)))
        g = two_sites(100.0, jobs=jobs)
        g.run_until(40 * HOUR)
        return g
    alone, shared = run(False), run(True)
    assert shared.jobs["j0"].wan_exposed_s > alone.jobs["j0"].wan_exposed_s * 1.01
    moved = [t for t in shared.wan.done if t.tag == "dataset of j1"][0]
    assert moved.done_s - moved.started_s > 4000 * 8 / 100.0 * 1.2


# --------------------------------------------------------------------- together
def test_parts_start_and_stop_together():
    g = two_sites()
    g.run_until(40 * HOUR)
    runs = [r for _, r in part_runs(g, "j0")]
    assert len(runs) == 2 and all(r.state == DONE for r in runs)
    assert runs[0].first_start == runs[1].first_start == g.jobs["j0"].first_start_s
    assert runs[0].end_s == pytest.approx(runs[1].end_s, abs=1e-6)


def test_parts_wait_until_both_places_can_start():
    # b is busy for an hour with a job only it may run: the cross job holds no GPU at a
    # meanwhile, then both parts start at one instant
    blocker = GridJob(TrainingJob(5, "block", "t", 0.0, 8, 8 * H100_RATE * HOUR), allowed=("b",))
    g = two_sites(jobs=[blocker, cjob(0)])
    g.run_until(0.5 * HOUR)
    assert g.jobs["j0"].state == "held"
    assert part_runs(g, "j0") == []
    assert g.places["a"].engine.horizon_ledger().gpu_hours().get("productive", 0.0) == 0.0
    g.run_until(40 * HOUR)
    runs = [r for _, r in part_runs(g, "j0")]
    assert g.jobs["j0"].state == "done"
    assert runs[0].first_start == runs[1].first_start >= g.jobs["block"].end_s


def test_region_loss_of_one_part_stops_both_and_restarts_from_checkpoint():
    # data (and so the off-site replicas) at c; the job splits over a and b first
    sites = [site("a"), site("b"), site("c")]
    links = [link("a", "b", 100.0), link("b", "c", 100.0), link("a", "c", 100.0)]
    g = grid(sites, links, [cjob(0, hours=6.0, data_site="c", dataset_gb=10.0)],
             replication_s=1800.0)
    g.run_until(4 * HOUR)
    first = part_runs(g, "j0")
    lost = next(p for p, _ in first if p != "c")
    g.region_loss(lost, 4 * HOUR, None)
    g.run_until(4 * HOUR + 1)
    js = g.jobs["j0"]
    assert all(r.state == CANCELLED for _, r in first)       # both parts stopped
    assert len({r.end_s for _, r in first}) == 1
    (restart,) = js.restarts
    assert restart["lost_at"] == lost and restart["checkpoint_at"] == "c"
    assert 0 < restart["kept_flops"] < js.gjob.job.work_flops
    assert js.remaining_flops == pytest.approx(js.gjob.job.work_flops - restart["kept_flops"])
    g.run_until(60 * HOUR)
    assert js.state == "done"
    second = [(p, r) for p, r in part_runs(g, "j0") if r not in [x for _, x in first]]
    assert {p for p, _ in second} and lost not in {p for p, _ in second}
    assert sum(r.spec.work_flops for _, r in second) == pytest.approx(js.remaining_flops)


def test_failure_of_one_part_stops_both():
    g = grid([site("a"), site("b"), site("c")],
             [link("a", "b", 100.0), link("b", "c", 100.0), link("a", "c", 100.0)],
             [cjob(0, hours=6.0)])
    g.run_until(2 * HOUR + 60)
    saved = g._done_flops(g.jobs["j0"], saved=True)      # the parts' checkpoint at 2 h
    g.run_until(2.5 * HOUR)
    assert g._done_flops(g.jobs["j0"], saved=True) == pytest.approx(saved)
    first = part_runs(g, "j0")
    assert sorted(p for p, _ in first) == ["a", "b"]
    g.places["a"].engine.command("node_down", node=0)   # a's part loses its node
    g.run_until(2.5 * HOUR + 700)                         # seen at the grid's next check
    assert all(r.state == CANCELLED for _, r in first)
    (restart,) = g.jobs["j0"].restarts
    assert restart["lost_at"] == "a" and restart["checkpoint_at"] == "b"
    assert 0 < restart["kept_flops"] == pytest.approx(saved, rel=1e-9)
    assert g.jobs["j0"].lost_flops > 0                   # the half hour since it
    g.run_until(60 * HOUR)
    assert g.jobs["j0"].state == "done"
    second = [p for p, r in part_runs(g, "j0") if r not in [x for _, x in first]]
    assert sorted(second) == ["b", "c"]


def test_cut_between_the_parts_stops_the_job():
    g = grid([site("a"), site("b"), site("c")],
             [link("a", "b", 100.0), link("b", "c", 100.0)], [cjob(0, hours=6.0)])
    g.wan_cut("a", "b", 2 * HOUR, None)
    g.run_until(2 * HOUR - 1)
    first = part_runs(g, "j0")
    assert sorted(p for p, _ in first) == ["a", "b"]
    g.run_until(2 * HOUR + 1)
    assert all(r.state == CANCELLED and r.end_s == 2 * HOUR for _, r in first)
    (restart,) = g.jobs["j0"].restarts
    assert restart["t"] == 2 * HOUR and restart["checkpoint_at"] == "b"  # b's own copy
    assert restart["kept_flops"] > 0
    g.run_until(60 * HOUR)
    assert g.jobs["j0"].state == "done"   # again, over b and c, still joined
    second = [p for p, r in part_runs(g, "j0") if r not in [x for _, x in first]]
    assert sorted(second) == ["b", "c"]


# --------------------------------------------------------------------- filters still hold
def test_sovereignty_and_stack_hold_for_every_part():
    sites = [site("a"), site("us", jurisdiction="US"), site("amd", stacks=("rocm",)),
             site("d", stacks=("cuda",))]
    links = [link(x, y, 100.0) for x, y in (("a", "us"), ("a", "amd"), ("a", "d"),
                                             ("us", "d"), ("amd", "d"))]
    g = grid(sites, links, [cjob(0, allowed=("EU",), stacks=("cuda",))])
    g.run_until(20 * HOUR)
    assert g.jobs["j0"].state == "done"
    assert sorted(p for p, _ in part_runs(g, "j0")) == ["a", "d"]
    # with only one place passing the filters there is no second part: refused, as today
    g = grid(sites[:3], links[:2], [cjob(0, allowed=("EU",), stacks=("cuda",))])
    g.run_until(HOUR)
    assert g.jobs["j0"].state == "refused" and part_runs(g, "j0") == []


# --------------------------------------------------------------------- books
def test_gradient_bytes_booked_and_site_totals_add_up():
    g = two_sites(100.0, jobs=[cjob(0, data_site="a", dataset_gb=50.0)])
    g.run_until(40 * HOUR)
    rep = grid_report(g, scenario={})
    js = g.jobs["j0"]
    sites = {s["place"]: s for s in rep["sites"]}
    grad = rep["cross_site"]["gradient_gb"]
    assert grad == pytest.approx(js.wan_gradient_gb, abs=0.1)
    # by hand: 14 GB each way per step, for every step of 2 h of compute
    assert grad == pytest.approx(2 * GRAD_GB * 2 * HOUR / in_place_step_s(), rel=1e-3)
    total = rep["summary"]["moved_gb"]["total"]
    assert sum(s["wan_out_gb"] for s in sites.values()) == pytest.approx(total, abs=0.2)
    assert sum(s["wan_in_gb"] for s in sites.values()) == pytest.approx(total, abs=0.2)
    assert total == pytest.approx(grad + 50.0 + rep["summary"]["moved_gb"]["replicas"],
                                  abs=0.3)
    assert sites["b"]["wan_in_gb"] >= grad / 2 + 50.0 - 0.1    # its dataset and its half
    (entry,) = rep["jobs"]
    assert entry["wan_gradient_gb"] == pytest.approx(grad, abs=0.1)
    assert entry["wan_exposed_hours"] == pytest.approx(js.wan_exposed_s / HOUR, abs=1e-4)


def test_reports_without_cross_site_jobs_carry_no_new_keys():
    g = grid([site("a", nodes=2)], (), [cjob(0, cross=False)])
    g.run_until(4 * HOUR)
    rep = grid_report(g, scenario={})
    assert "cross_site" not in rep and "wan_exposed_hours" not in rep["jobs"][0]


def test_same_seed_same_report():
    def once():
        jobs = [cjob(0, hours=3.0, data_site="c", dataset_gb=20.0), cjob(1, submit_h=1.0)]
        g = grid([site("a"), site("b"), site("c")],
                 [link("a", "b", 40.0, 10.0), link("b", "c", 100.0), link("a", "c", 25.0)],
                 jobs, seed=3, engine_options={"failures": True})
        g.region_loss("b", 2 * HOUR, 3 * HOUR)
        g.run_until(30 * HOUR)
        return json.dumps(grid_report(g, scenario={}), sort_keys=True)
    assert once() == once()
