"""Grid what-ifs (issue 30, scheduler/grid/whatif.py): forks are independent, seeds make them
reproducible, a region loss from now costs what it should, and the unchanged fork under the
original's own seed is the original run continued."""

import json

import pytest

from scheduler.grid.federation import Grid
from scheduler.grid.report import grid_report
from scheduler.grid.run import grid_preset, grid_workload_for
from scheduler.grid.whatif import change_check, fork, what_if

HOUR = 3600.0


@pytest.fixture(scope="module")
def preset():
    spec, plans = grid_preset()
    return spec, plans, grid_workload_for(spec, 2.0, 1)


def _grid(preset, t_s=12 * HOUR):
    spec, plans, jobs = preset
    g = Grid(spec, plans, jobs, seed=1)
    g.run_until(t_s)
    return g


def _state(g) -> dict:
    """What a run has done: the report (sans wall time) and its jobs' states."""
    r = grid_report(g, scenario={})
    return {"now": g.now, "summary": r["summary"], "sites": r["sites"],
            "jobs": {n: (js.state, js.place, js.first_start_s, js.end_s, js.moved_gb)
                     for n, js in g.jobs.items()}}


def test_a_fork_is_independent_of_its_original(preset):
    g = _grid(preset)
    before = _state(g)
    f = fork(g, 5)
    f.region_loss("eu-north", f.now)
    f.run_until(f.now + 12 * HOUR)
    assert f.places["eu-north"].dark and f.now == g.now + 12 * HOUR
    assert _state(g) == before                      # the original did not move or change
    assert not g.places["eu-north"].dark
    g.run_until(g.now + HOUR)                       # and driving it leaves the fork alone
    assert f.now == before["now"] + 12 * HOUR


def test_the_unchanged_fork_under_the_original_seed_is_the_original_continued(preset):
    g = _grid(preset)
    f = fork(g, g.seed)
    g.run_until(g.now + 12 * HOUR)
    f.run_until(f.now + 12 * HOUR)
    assert _state(f) == _state(g)
    # and a fresh run of the same seed straight to that time agrees too
    assert _state(_grid(preset, 24 * HOUR)) == _state(g)


def test_another_seed_redraws_only_the_future(preset):
    g = _grid(preset)
    past = {n for n, js in g.jobs.items() if js.gjob.job.submit_s <= g.now}
    a, b = fork(g, 11), fork(g, 12)
    for f in (a, b):  # what had arrived is kept as it is
        assert {n for n in f.jobs if n in past} == past
        assert all(f.jobs[n].state == g.jobs[n].state for n in past)
    future = lambda f: sorted((n, js.gjob.job.submit_s) for n, js in f.jobs.items()  # noqa: E731
                              if n not in past)
    assert future(a) and future(a) != future(b)
    assert future(a) == future(fork(g, 11))


def test_same_seeds_same_result_and_the_live_grid_untouched(preset):
    g = _grid(preset)
    before = _state(g)
    change = {"kind": "policy", "policy": "start"}
    r1 = what_if(g, horizon_s=6 * HOUR, seeds=[3, 4], change=change)
    r2 = what_if(g, horizon_s=6 * HOUR, seeds=[3, 4], change=change)
    assert r1 == r2
    assert _state(g) == before
    assert r1["per_seed"][0]["baseline"] != r1["per_seed"][1]["baseline"]  # seeds differ


def test_a_region_loss_from_now_loses_work_and_moves_bytes(preset):
    g = _grid(preset)
    r = what_if(g, horizon_s=12 * HOUR, seeds=[2, 3, 4, 5, 6],
                change={"kind": "region_loss", "place": "eu-north"})
    s = r["summary"]
    for m in ("lost_work_h", "moved_gb"):
        d = s[m]["difference"]
        assert d["low"] > 0, (m, d)
        assert s[m]["verdict"] == "higher"
    assert s["lost_work_h"]["baseline"]["mean"] == 0.0
    assert g.places["eu-north"].dark is False and g.now == 12 * HOUR


def test_no_change_reads_no_difference(preset):
    g = _grid(preset)
    r = what_if(g, horizon_s=6 * HOUR, seeds=[3, 4, 5], change=None)
    assert {v["verdict"] for v in r["summary"].values()} <= {"no difference", "too few seeds"}
    assert r["per_seed"][0]["baseline"] == r["per_seed"][0]["change"]


def test_more_load_raises_the_wait_and_the_result_is_json(preset):
    g = _grid(preset)
    r = what_if(g, horizon_s=12 * HOUR, seeds=[3, 4, 5, 6, 7],
                change={"kind": "load", "factor": 3.0})
    assert r["summary"]["mean_wait_h"]["difference"]["low"] > 0
    assert json.loads(json.dumps(r)) == r


@pytest.mark.parametrize("kw, msg", [
    ({"horizon_s": 0, "seeds": [1, 2]}, "horizon"),
    ({"horizon_s": HOUR, "seeds": [1]}, "2 to 16 seeds"),
    ({"horizon_s": HOUR, "seeds": [1, 1]}, "distinct"),
    ({"horizon_s": HOUR, "seeds": [1, 2], "change": {"kind": "region_loss", "place": "mars"}},
     "no place"),
    ({"horizon_s": HOUR, "seeds": [1, 2], "change": {"kind": "wan_cut", "a": "eu-north",
                                                      "b": "gcp/us-central1"}}, ""),
    ({"horizon_s": HOUR, "seeds": [1, 2], "change": {"kind": "warp"}}, "kind"),
    ({"horizon_s": HOUR, "seeds": [1, 2], "change": {"kind": "policy", "policy": "x"}}, ""),
])
def test_bad_parameters_one_error_nothing_run(preset, kw, msg):
    g = _grid(preset)
    before = _state(g)
    with pytest.raises(ValueError, match=msg):
        what_if(g, **kw)
    assert _state(g) == before


def test_change_check_normalises():
    spec, plans = grid_preset()
    g = Grid(spec, plans, ())
    assert change_check(None, g) == {"kind": "none"}
    assert change_check({"kind": "replication", "interval_s": 600}, g) == {
        "kind": "replication", "interval_s": 600.0}


def test_a_mirrored_start_holds_gpus_for_the_remaining_time():
    from scheduler.grid.mirror_start import UNKNOWN_S, grid_from_mirror
    spec, plans = grid_preset()
    doc = {"places": [{"place": "eu-west", "down": 16}]}
    jobs = {"eu-north": [
        {"job_id": "a", "state": "running", "gpus": 16, "elapsed_s": 3600.0,
         "time_limit_s": 3 * HOUR},
        {"job_id": "b", "state": "running", "gpus": 8, "elapsed_s": 5 * HOUR,
         "time_limit_s": None},
        {"job_id": "c", "state": "running", "gpus": 8, "elapsed_s": None,
         "time_limit_s": None},
        {"job_id": "q", "state": "pending", "gpus": 256, "elapsed_s": None,
         "time_limit_s": HOUR}]}
    g = grid_from_mirror(spec, plans, doc, jobs)
    assert g.now == 0.0
    north = g.places["eu-north"].engine
    assert sum(r.gpus for r in north.running.values()) == 32   # the queued gang waits
    g.run_until(24 * HOUR)
    ends = {n: js.end_s for n, js in g.jobs.items()}
    assert ends["eu-north:a"] == pytest.approx(2 * HOUR, rel=0.02)
    assert ends["eu-north:b"] == pytest.approx(5 * HOUR, rel=0.02)
    assert ends["eu-north:c"] == pytest.approx(UNKNOWN_S, rel=0.02)
    assert g.jobs["eu-north:q"].first_start_s == pytest.approx(5 * HOUR, rel=0.02)
    west = g.places["eu-west"].engine
    assert west.state.n_gpus - int(west.state.free_counts()[0].sum()) >= 16  # nodes down
    with pytest.raises(ValueError, match="no place"):
        grid_from_mirror(spec, plans, doc, {"mars": []})
