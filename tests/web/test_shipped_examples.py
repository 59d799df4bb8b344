"""Every file under ``docs/examples/`` is run: a study spec runs (cut to a small size by the
test, the file itself kept as shipped) and tells its arms apart, and the Dask configuration is
the one the study workers are documented to read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from scheduler.study.spec import check_spec, load_spec, parse_text
from twin.studies.report import write_all
from twin.studies.runner import WORKER_ENVIRON, run_path, run_study

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
SPECS = sorted(p for p in EXAMPLES.rglob("*.yaml") if "arms" in (yaml.safe_load(p.read_text())
                                                                 or {}))
DASK_CONFIGS = sorted(EXAMPLES.glob("dask/*"))
CUT_DAYS, CUT_SEEDS = 2.0, 3
"""The test's size: a few simulated days and the fewest seeds that give an interval."""
DISTINGUISHED = ("better", "worse", "higher", "lower")
ANSWERS = {"oversubscription.yaml": {"ledger.exposed_communication": "worse",
                                     "energy_mwh": "better"}}
"""What an example asks, read from its verdicts: its title's question, answered."""


def cut(path: Path):
    """The spec of ``path`` as shipped, with fewer days and seeds (a test-only override)."""
    data, lines = parse_text(path.read_text())
    for scenario in [data["base"], *(a.get("set") or {} for a in data["arms"])]:
        if "days" in scenario:
            scenario["days"] = min(float(scenario["days"]), CUT_DAYS)
    data.pop("first_seed", None)
    data["seeds"] = CUT_SEEDS
    return check_spec(data, lines, base_dir=path.parent)


def test_every_shipped_example_is_run_here():
    shipped = {p for p in EXAMPLES.rglob("*") if p.is_file()}
    assert shipped == set(SPECS) | set(DASK_CONFIGS), "an example no test runs"
    assert SPECS and DASK_CONFIGS


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_a_shipped_study_runs_its_workload_and_tells_its_arms_apart(path, tmp_path):
    shipped = load_spec(path)
    spec = cut(path)
    assert [a.name for a in spec.arms] == [a.name for a in shipped.arms]
    assert spec.figures == shipped.figures
    outcome = run_study(spec, tmp_path, serial=True)
    assert outcome.failed == 0
    for arm, seed in spec.runs():  # every run ran a workload: jobs submitted and finished
        report = json.loads(run_path(tmp_path, arm, seed).read_text())["report"]
        assert report["jobs"]["completed"] > 0 and report["mfu"]["achieved"] > 0, \
            (arm.name, seed)
    summary = write_all(spec, outcome, tmp_path)["summary"]
    verdicts = {(p["arm"], name): d["verdict"] for p in summary["paired"]
                for name, d in p["figures"].items()}
    assert any(v in DISTINGUISHED for v in verdicts.values()), verdicts
    for figure, verdict in ANSWERS.get(path.name, {}).items():
        assert {v for (_, f), v in verdicts.items() if f == figure} == {verdict}, verdicts


@pytest.mark.parametrize("path", DASK_CONFIGS, ids=lambda p: p.name)
def test_the_shipped_dask_configuration_keeps_glibcs_memory_trimming(path):
    """The file ``DASK_CONFIG`` points study workers at (``tests/dask/`` starts its workers
    with it) sets what the embedded cluster sets (:data:`WORKER_ENVIRON`)."""
    import dask

    config = dask.config.collect(paths=[str(path.parent)], env={})
    for key, value in WORKER_ENVIRON.items():
        assert dask.config.get(key, default="absent", config=config) == value
