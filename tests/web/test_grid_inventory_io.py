"""A grid exported as JSON and imported by ``import_inventory`` (issue 30): the document
round-trips, and a bad one is refused with one line naming the row, exit status 2 and nothing
written (a failed ``--replace`` leaves the old grid as it was)."""

from __future__ import annotations

import copy
import dataclasses
import io
import json

import pytest
from django.core.management import CommandError, call_command

from tests.web.test_grid_inventory import grid_plans, grid_spec
from twin.inventory.adapter import cluster_delete
from twin.inventory.grid import grid_spec_read, grid_write
from twin.inventory.grid_formats import grid_export_json
from twin.inventory.models import Accelerator, Cluster, Grid, GridCloudRegion, Node, WanLink

TABLES = (Grid, GridCloudRegion, WanLink, Cluster, Node, Accelerator)


def counts() -> dict[str, int]:
    return {t.__name__: t.objects.count() for t in TABLES}


@pytest.fixture
def exported(db):
    """The export of a two-site grid, and the spec it was written from."""
    plans = grid_plans()
    grid = grid_write(grid_spec(plans), plans, settings={"description": "two sites",
                                                         "weight_gravity": 3.0,
                                                         "checkpoint_replication_s": 1800})
    return grid_export_json(grid=grid), grid_spec(plans)


def wipe() -> None:
    Grid.objects.all().delete()  # first: a member cluster its WAN links name is not deleted
    for cluster in Cluster.objects.all():
        cluster_delete(cluster=cluster)


def write(tmp_path, doc) -> str:
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(doc))
    return str(path)


def run(*args) -> str:
    out = io.StringIO()
    call_command("import_inventory", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def refused(*args) -> list[str]:
    before, err = counts(), io.StringIO()
    with pytest.raises(CommandError) as exc:
        call_command("import_inventory", *args, stdout=io.StringIO(), stderr=err)
    assert exc.value.returncode == 2
    assert counts() == before
    return err.getvalue().splitlines() + [str(exc.value)]


def test_an_exported_grid_imports_as_the_same_grid(exported, tmp_path):
    doc, spec = exported
    assert doc["grid"]["weight_gravity"] == 3.0 and len(doc["sites"]) == 2
    wipe()
    out = run(write(tmp_path, doc))
    assert out.startswith("Imported grid eu from") and "sites paris, oslo" in out
    grid = Grid.objects.get(name="eu")
    assert grid_export_json(grid=grid) == doc
    # the cluster layout keeps no storage systems; every other field of the spec is back
    read, plans = grid_spec_read(grid=grid)
    assert read == dataclasses.replace(spec, sites=tuple(
        dataclasses.replace(s, storage=()) for s in spec.sites))
    assert plans["paris"].n_gpus == 32 and plans["oslo"].n_gpus == 24


def test_importing_over_a_grid_needs_replace(exported, tmp_path):
    doc, _ = exported
    path = write(tmp_path, doc)
    lines = refused(path)
    assert any("already exists" in line for line in lines)
    doc2 = copy.deepcopy(doc)
    doc2["links"] = doc2["links"][:1]
    run(write(tmp_path, doc2), "--replace")
    assert grid_export_json(grid=Grid.objects.get(name="eu")) == doc2


def bad(mutate):
    def apply(doc):
        doc = copy.deepcopy(doc)
        mutate(doc)
        return doc
    return apply


BAD = {
    "unknown end": (bad(lambda d: d["links"][0].update(b="lyon")),
                    "links[0] (paris-lyon): b: 'lyon' is no place of the grid"),
    "a link to itself": (bad(lambda d: d["links"][0].update(b="paris")),
                         "links[0] (paris-paris): a WAN link joins two places, not paris to "
                         "itself"),
    "negative latency": (bad(lambda d: d["links"][1].update(latency_ms=-2)),
                         "links[1] (paris-aws/eu-central-1): latency_ms: cannot be negative"),
    "zero bandwidth": (bad(lambda d: d["links"][2].update(gbps=0)),
                       "links[2] (oslo-gcp/us-east4): gbps: must be positive"),
    "no quota": (bad(lambda d: d["clouds"][0].update(quota_gpus=0)),
                 "clouds[0] (aws/eu-central-1): quota_gpus: quota must be positive"),
    "negative spot price": (bad(lambda d: d["clouds"][0].update(spot_per_gpu_hour=-1)),
                            "spot_per_gpu_hour: cannot be negative"),
    "unknown model": (bad(lambda d: d["clouds"][1].update(model="Z9")),
                      "clouds[1] (gcp/us-east4): model: 'Z9' is not a catalog accelerator"),
    "model not text": (bad(lambda d: d["clouds"][1].update(model=["MI300X"])),
                       "clouds[1] (gcp/us-east4): model: ['MI300X'] is not a catalog"),
    "no jurisdiction": (bad(lambda d: d["sites"][1].pop("jurisdiction")),
                        "sites[1] (oslo): jurisdiction: a site of a grid needs a "
                        "jurisdiction"),
    "bad stacks": (bad(lambda d: d["sites"][0].update(stacks="cuda12")),
                   "sites[0] (paris): stacks: a list of software stack names"),
    "a bad cluster row": (bad(lambda d: d["sites"][0]["inventory"]["nodes"][0].update(
        model="Z9")), "sites[0].inventory: nodes[0]: unknown accelerator model 'Z9'"),
    "unknown field": (bad(lambda d: d["clouds"][0].update(price=1)),
                      "clouds[0]: unknown field(s) price"),
    "weights all zero": (bad(lambda d: d["grid"].update(weight_cost=0, weight_start=0,
                                                        weight_gravity=0)),
                         "grid: at least one placement weight must be positive"),
    "links not a list": (bad(lambda d: d.update(links={})), "links: must be a list"),
    "no sites": (bad(lambda d: d.update(sites=[], links=[])),
                 "sites: a grid needs at least one owned site"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_document_gets_one_clear_error_and_writes_nothing(exported, tmp_path, case):
    doc, _ = exported
    wipe()
    mutate, message = BAD[case]
    lines = refused(write(tmp_path, mutate(doc)))
    assert len(lines) == 2, lines                 # the error, then the one-line summary
    assert message in lines[0]
    assert lines[1].endswith("1 error(s); nothing was written")


def test_a_refused_replace_leaves_the_grid_as_it_was(exported, tmp_path):
    doc, _ = exported
    lines = refused(write(tmp_path, BAD["unknown end"][0](doc)), "--replace")
    assert "'lyon' is no place of the grid" in lines[0]
    assert grid_export_json(grid=Grid.objects.get(name="eu")) == doc


def test_a_grid_document_takes_no_name(exported, tmp_path):
    doc, _ = exported
    lines = refused(write(tmp_path, doc), "--name", "other")
    assert "a grid document names its own" in lines[-1]
