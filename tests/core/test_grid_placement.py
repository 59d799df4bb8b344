"""Where the grid runs a job: by cost, by expected start, by data gravity, within hard limits.

Hand-built grids show each criterion's choice on one job; the ``grid`` preset, over a few
seeds, shows each policy winning on what it optimises (the ordering, not the figures);
sovereignty, stacks and whole gangs hold on every run.
"""

import pytest

from scheduler.grid.federation import Grid
from scheduler.grid.placement import Weights, weights_of
from scheduler.grid.presets import grid_spec, grid_workload
from scheduler.grid.run import grid_preset, run_grid
from scheduler.model.job_run import CANCELLED, DONE, PENDING
from tests.core.grid_factories import HOUR, gjob, grid, link, site


def where(g, name):
    return g.jobs[name].history


# ----------------------------------------------------------------- one job, by hand
def test_by_cost_a_job_goes_to_the_cheaper_energy_and_its_data_follows_it():
    """The data (125 GB) sits at the dear site; energy there costs 4x: cost moves the job's
    data to the cheap site (100 s at 10 Gb/s) and runs it there."""
    g = grid([site("cheap", price=0.05), site("dear", price=0.2)], [link("cheap", "dear")],
             [gjob(0, dataset="d", data_site="dear", dataset_gb=125.0)], policy="cost")
    g.run_until(3 * HOUR)
    js = g.jobs["j0"]
    assert js.history == ["cheap"] and js.state == "done"
    assert js.moved_gb == pytest.approx(125.0)
    assert js.move_wait_s == pytest.approx(100.0)
    assert g.wan.bytes_in["cheap"] == pytest.approx(125.0)


def test_by_gravity_the_same_job_stays_with_its_data_and_moves_nothing():
    g = grid([site("cheap", price=0.05), site("dear", price=0.2)], [link("cheap", "dear")],
             [gjob(0, dataset="d", data_site="dear", dataset_gb=125.0)], policy="gravity")
    g.run_until(3 * HOUR)
    assert where(g, "j0") == ["dear"] and g.jobs["j0"].moved_gb == 0.0
    assert sum(g.wan.bytes_out.values()) == 0.0


def test_by_start_a_job_skips_the_cheap_site_while_a_long_gang_holds_it():
    """j0 holds the cheap site's only node for 10 h; j1 arrives at 0.1 h: by cost it waits
    there for 10 h, by start it runs at once at the dear site."""
    jobs = [gjob(0, hours=10.0), gjob(1, submit_h=0.1)]
    sites, links = [site("cheap", price=0.05), site("dear", price=0.2)], [link("cheap", "dear")]
    by_cost = grid(sites, links, jobs, policy="cost")
    by_start = grid(sites, links, jobs, policy="start")
    for g in (by_cost, by_start):
        g.run_until(12 * HOUR)
    assert where(by_cost, "j1") == ["cheap"]
    assert by_cost.jobs["j1"].first_start_s == pytest.approx(10 * HOUR)
    assert where(by_start, "j1") == ["dear"]
    assert by_start.jobs["j1"].first_start_s == pytest.approx(0.1 * HOUR)


def test_a_second_job_on_the_same_dataset_finds_the_copy_the_first_one_moved():
    jobs = [gjob(0, dataset="d", data_site="dear", dataset_gb=125.0),
            gjob(1, submit_h=2.0, dataset="d", data_site="dear", dataset_gb=125.0)]
    g = grid([site("cheap", price=0.05), site("dear", price=0.2)], [link("cheap", "dear")],
             jobs, policy="cost")
    g.run_until(4 * HOUR)
    assert where(g, "j1") == ["cheap"] and g.jobs["j1"].moved_gb == 0.0
    assert g.wan.bytes_in["cheap"] == pytest.approx(125.0)


# ----------------------------------------------------------------- hard limits
def test_sovereignty_and_stack_rule_places_out_whatever_they_cost():
    """The only EU place runs ROCm; a CUDA job allowed in the EU fits nowhere: refused,
    with each place's reason."""
    g = grid([site("us", price=0.01, jurisdiction="US"),
              site("eu", jurisdiction="EU", stacks=("rocm",))], [link("us", "eu")],
             [gjob(0, allowed=("EU",), stacks=("cuda",))])
    g.run_until(HOUR)
    js = g.jobs["j0"]
    assert js.state == "refused" and js.history == []
    assert "us: sovereignty: US is not among EU" in js.reason
    assert "eu: stack: runs rocm, the job cuda" in js.reason


def test_a_gang_larger_than_every_place_is_refused_not_split():
    """Two sites of 8 GPUs each: a 16-GPU gang would fit only across them."""
    g = grid([site("a"), site("b")], [link("a", "b")], [gjob(0, gpus=16)])
    g.run_until(HOUR)
    assert g.jobs["j0"].state == "refused"
    assert "no pool of any holds 16 GPUs (largest here: 8)" in g.jobs["j0"].reason
    assert all(not p.engine.runs for p in g.places.values())


def test_a_job_whose_only_place_is_dark_waits_and_runs_when_it_is_back():
    g = grid([site("eu"), site("us", jurisdiction="US")], [link("eu", "us")],
             [gjob(0, submit_h=1.0, allowed=("EU",))])
    g.region_loss("eu", 0.5 * HOUR, 2 * HOUR)
    g.run_until(2 * HOUR)
    assert g.jobs["j0"].state == "held" and "eu: dark" in g.jobs["j0"].reason
    g.run_until(4 * HOUR)
    assert where(g, "j0") == ["eu"]
    assert g.jobs["j0"].first_start_s == pytest.approx(2.5 * HOUR)


@pytest.mark.parametrize("bad", ["fastest", {"cost": 1, "speed": 1},
                                 {"cost": 0, "start": 0, "gravity": 0}, {"cost": -1}])
def test_bad_weights_are_refused_in_one_line(bad):
    with pytest.raises(ValueError) as err:
        weights_of(bad)
    assert "\n" not in str(err.value)


def test_weights_can_be_named_or_given():
    assert weights_of("gravity") == Weights(0.0, 0.0, 1.0)
    assert weights_of({"cost": 2, "start": 1}) == Weights(2.0, 1.0, 0.0)


# ----------------------------------------------------------------- the grid preset
SEEDS = (0, 1, 2)
DAYS = 2.0


@pytest.fixture(scope="module")
def preset_runs():
    return {(policy, seed): run_grid(days=DAYS, seed=seed, policy=policy)
            for policy in ("cost", "start", "gravity") for seed in SEEDS}


@pytest.mark.parametrize("seed", SEEDS)
def test_each_policy_wins_on_what_it_weighs(preset_runs, seed):
    """Cost: the lowest bill; start: the shortest wait; gravity: the fewest bytes moved
    for jobs (datasets and checkpoints)."""
    rep = {p: preset_runs[(p, seed)][1]["summary"] for p in ("cost", "start", "gravity")}
    cost = {p: r["cost"]["total"] for p, r in rep.items()}
    wait = {p: r["wait_hours"]["mean"] for p, r in rep.items()}
    moved = {p: r["moved_gb"]["jobs"] for p, r in rep.items()}
    assert min(cost, key=cost.get) == "cost", cost
    assert min(wait, key=wait.get) == "start", wait
    assert min(moved, key=moved.get) == "gravity", moved


def test_no_job_ever_runs_or_keeps_a_checkpoint_where_sovereignty_forbids(preset_runs):
    spec = grid_spec()
    juris = {s.name: s.jurisdiction for s in spec.sites} | {
        c.place: c.jurisdiction for c in spec.clouds}
    checked = 0
    for (_, seed), (g, _) in preset_runs.items():
        jobs = {j.name: j for j in grid_workload(DAYS, seed)}
        for name, js in g.jobs.items():
            if jobs[name].allowed:
                checked += 1
                assert all(juris[p] in jobs[name].allowed for p in js.history), name
        for tr in g.wan.done:
            job = jobs[tr.tag.split(" of ")[-1]]
            if tr.tag.startswith("replica") and job.allowed:
                assert juris[tr.dst] in job.allowed, tr
    assert checked > 10


def test_cuda_only_jobs_never_run_on_the_rocm_site(preset_runs):
    for (_, seed), (g, _) in preset_runs.items():
        jobs = {j.name: j for j in grid_workload(DAYS, seed)}
        assert not [n for n, js in g.jobs.items()
                    if jobs[n].stacks == ("cuda",) and "us-east" in js.history]
        assert any("us-east" in js.history for js in g.jobs.values())


def test_a_gang_runs_whole_at_one_place_at_a_time():
    """Stepped every 3 h through two days with a region loss: at every step each job has at
    most one live run in the whole grid, of its full gang, and its GPUs are in that place."""
    spec, plans = grid_preset("grid")
    g = Grid(spec, plans, grid_workload(DAYS, 3), seed=3, policy="balanced")
    g.region_loss("eu-north", 20 * HOUR, 6 * HOUR)
    for step in range(1, 17):
        g.run_until(step * 3 * HOUR)
        live = {}
        for name, place in g.places.items():
            for run in place.engine.runs:
                if run.state in (DONE, CANCELLED, PENDING):
                    continue
                live.setdefault(run.spec.name, []).append(name)
                assert run.gids.size in (0, run.spec.gpus)
                assert run.gids.size == 0 or run.gids.max() < place.gpus()
        assert all(len(v) == 1 for v in live.values()), live
    assert any(len(js.history) > 1 for js in g.jobs.values())  # the loss moved some
