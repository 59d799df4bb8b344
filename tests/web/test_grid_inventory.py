"""A grid in the inventory (issue 30): the models refuse bad rows with one clear error each, and
``grid_write`` / ``grid_spec_read`` carry a two-site grid to rows and back unchanged.

The grid is written from plans made by ``plan_cluster`` and a ``GridSpec`` built here; reading
it back must give the same spec (every site, cloud and link field) and the same plan arrays.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from django.core.exceptions import ValidationError

from scheduler.hardware.cluster import ClusterPlan, NodeGroup, StorageSpec, plan_cluster
from scheduler.hardware.grid_spec import CloudRegionSpec, GridSpec, SiteSpec, WanLinkSpec
from twin.inventory.grid import grid_settings_read, grid_spec_read, grid_write
from twin.inventory.models import (
    AcceleratorModel,
    Cluster,
    Grid,
    GridCloudRegion,
    Node,
    Site,
    WanLink,
)

TABLES = (Grid, GridCloudRegion, WanLink, Cluster, Site, Node)


def counts() -> dict[str, int]:
    return {t.__name__: t.objects.count() for t in TABLES}


def grid_plans() -> dict[str, ClusterPlan]:
    """Two small owned sites of different hardware, one with a central file system."""
    return {
        "paris": plan_cluster(
            "paris", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree",
            fabric_kw={"radix": 8},
            storage=(StorageSpec("lustre", "central", 500.0, 40.0, 20.0, True),)),
        "oslo": plan_cluster("oslo", (NodeGroup("MI300X", 3, spares=1),),
                             fabric_kind="fat-tree", fabric_kw={"radix": 8}),
    }


def grid_spec(plans: dict[str, ClusterPlan], name: str = "eu") -> GridSpec:
    return GridSpec(
        name=name,
        sites=(SiteSpec("paris", "eu-west", "EU", fabric_kind="fat-tree",
                        storage=plans["paris"].storage, pue=1.15, power_price_per_kwh=0.11,
                        stacks=("cuda12",), cluster="paris"),
               SiteSpec("oslo", "eu-north", "NO", fabric_kind="fat-tree", pue=1.08,
                        power_price_per_kwh=0.05, stacks=("rocm6", "cuda12"), cluster="oslo")),
        clouds=(CloudRegionSpec("aws", "eu-central-1", "EU", "H100-SXM", 64, 6.9, 2.5, 0.05,
                                420, ("cuda12",)),
                CloudRegionSpec("gcp", "us-east4", "US", "MI300X", 32, 5.5)),
        links=(WanLinkSpec("paris", "oslo", 100.0, 18.0, 0.01),
               WanLinkSpec("paris", "aws/eu-central-1", 50.0, 9.0, 0.02, 0.09),
               WanLinkSpec("oslo", "gcp/us-east4", 10.0, 95.0)))


@pytest.fixture
def plans():
    return grid_plans()


@pytest.fixture
def grid(db, plans):
    return grid_write(grid_spec(plans), plans)


def assert_same_plan(a: ClusterPlan, b: ClusterPlan) -> None:
    for f in dataclasses.fields(ClusterPlan):
        if f.name in ("fabric", "extra"):
            continue
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if isinstance(va, np.ndarray):
            np.testing.assert_array_equal(va, vb, err_msg=f.name)
        else:
            assert va == vb, f.name
    for f in dataclasses.fields(a.fabric):
        va, vb = getattr(a.fabric, f.name), getattr(b.fabric, f.name)
        if isinstance(va, np.ndarray):
            np.testing.assert_array_equal(va, vb, err_msg=f"fabric.{f.name}")
        else:
            assert va == vb, f"fabric.{f.name}"


def one_error(row, match: str) -> None:
    """``row`` is refused with exactly one message, which holds ``match``."""
    with pytest.raises(ValidationError) as exc:
        row.full_clean()
    assert len(exc.value.messages) == 1, exc.value.messages
    assert match in exc.value.messages[0]


# ---------------------------------------------------------------- the adapter


def test_a_written_grid_reads_back_as_the_same_spec_and_plans(grid, plans):
    spec, read = grid_spec_read(grid=grid)
    assert spec == grid_spec(plans)
    assert set(read) == {"paris", "oslo"}
    for place, plan in plans.items():
        assert_same_plan(plan, read[place])
    assert [c.name for c in grid.clusters.order_by("id")] == ["paris", "oslo"]


def test_settings_are_kept_and_read_as_plain_values(db, plans):
    grid = grid_write(grid_spec(plans), plans, settings={
        "weight_cost": 2.0, "weight_start": 0.5, "weight_gravity": 0.0,
        "checkpoint_replication_s": 900})
    assert grid_settings_read(grid=grid) == {
        "weight_cost": 2.0, "weight_start": 0.5, "weight_gravity": 0.0,
        "checkpoint_replication_s": 900}


def test_writing_an_existing_grid_needs_replace_and_replace_rewrites_it(grid, plans):
    before = counts()
    with pytest.raises(ValueError, match="'eu' already exists"):
        grid_write(grid_spec(plans), plans)
    assert counts() == before
    smaller = dataclasses.replace(grid_spec(plans), clouds=(), links=(
        WanLinkSpec("oslo", "paris", 40.0, 20.0),))
    grid_write(smaller, plans, replace=True)
    spec, _ = grid_spec_read(grid=Grid.objects.get(name="eu"))
    assert spec == smaller
    assert GridCloudRegion.objects.count() == 0 and WanLink.objects.count() == 1


@pytest.mark.parametrize("mutate, match", [
    (lambda s, p: dataclasses.replace(s, links=(*s.links, WanLinkSpec("paris", "nowhere", 1,
                                                                       1))),
     "'nowhere', which is no site"),
    (lambda s, p: dataclasses.replace(s, clouds=(dataclasses.replace(
        s.clouds[0], on_demand_per_gpu_hour=-1.0), s.clouds[1])), "cannot be negative"),
    (lambda s, p: dataclasses.replace(s, clouds=(dataclasses.replace(
        s.clouds[0], model="NoSuchGPU"), s.clouds[1])), "'NoSuchGPU' is not a catalog"),
    (lambda s, p: dataclasses.replace(s, sites=(dataclasses.replace(
        s.sites[0], jurisdiction=""), s.sites[1])), "needs a jurisdiction"),
    (lambda s, p: dataclasses.replace(s, sites=(dataclasses.replace(
        s.sites[0], pue=0.0), s.sites[1])), "must be positive"),
    (lambda s, p: dataclasses.replace(s, sites=s.sites[:1], links=()),
     "plans and sites differ: oslo"),
])
def test_a_refused_grid_writes_nothing(db, plans, mutate, match):
    before = counts()
    with pytest.raises(ValueError, match=match):
        grid_write(mutate(grid_spec(plans), plans), plans)
    assert counts() == before


def test_a_cluster_of_another_grid_is_not_taken(grid, plans):
    other = dataclasses.replace(grid_spec(plans), name="other")
    with pytest.raises(ValueError, match="cluster paris is a site of grid eu"):
        grid_write(other, plans, replace=True)
    assert Cluster.objects.get(name="paris").grid == grid


def test_a_grid_without_clusters_cannot_be_read(db):
    grid = Grid.objects.create(name="empty")
    with pytest.raises(ValueError, match="at least one owned site"):
        grid_spec_read(grid=grid)


# ---------------------------------------------------------------- the models' checks


def link(grid, **kw) -> WanLink:
    return WanLink(grid=grid, **{"a": "paris", "b": "gcp/us-east4", "gbps": 10.0,
                                 "latency_ms": 5.0, **kw})


def cloud(grid, **kw) -> GridCloudRegion:
    return GridCloudRegion(grid=grid, **{
        "provider": "azure", "region": "westeurope", "jurisdiction": "EU",
        "accelerator_model": AcceleratorModel.objects.get(name="H100-SXM"), "quota_gpus": 8,
        "on_demand_per_gpu_hour": 7.0, **kw})


def test_a_good_link_and_cloud_region_pass(grid):
    link(grid).full_clean()
    cloud(grid).full_clean()


@pytest.mark.parametrize("kw, match", [
    ({"b": "lyon"}, "'lyon' is no place of the grid"),
    ({"a": "aws/eu-west-9"}, "'aws/eu-west-9' is no place of the grid"),
    ({"b": "paris"}, "not paris to itself"),
    ({"gbps": 0.0}, "must be positive"),
    ({"latency_ms": -1.0}, "cannot be negative"),
    ({"egress_per_gb": -0.01}, "cannot be negative"),
    ({"egress_back_per_gb": -0.01}, "cannot be negative"),
    ({"a": "oslo", "b": "paris"}, "already has a WAN link between oslo and paris"),
])
def test_a_bad_wan_link_gets_one_clear_error(grid, kw, match):
    one_error(link(grid, **kw), match)


@pytest.mark.parametrize("kw, match", [
    ({"quota_gpus": 0}, "quota must be positive"),
    ({"on_demand_per_gpu_hour": -1.0}, "cannot be negative"),
    ({"spot_per_gpu_hour": -0.5}, "cannot be negative"),
    ({"spot_interruptions_per_hour": -0.1}, "cannot be negative"),
    ({"provider": "aws/x"}, "letters, digits"),
    ({"jurisdiction": ""}, "cannot be blank"),
    ({"stacks": "cuda12"}, "a list of software stack names"),
    ({"stacks": ["cuda12", "cuda12"]}, "named twice"),
    ({"provider": "aws", "region": "eu-central-1"}, "already exists"),
])
def test_a_bad_cloud_region_gets_one_clear_error(grid, kw, match):
    one_error(cloud(grid, **kw), match)


@pytest.mark.parametrize("kw, match", [
    ({"weight_cost": -1.0}, "cannot be negative"),
    ({"weight_cost": 0.0, "weight_start": 0.0, "weight_gravity": 0.0},
     "at least one placement weight must be positive"),
])
def test_a_bad_grid_gets_one_clear_error(db, kw, match):
    one_error(Grid(name="g", **kw), match)


def test_a_site_of_a_grid_needs_a_jurisdiction(grid):
    paris = Cluster.objects.get(name="paris")
    paris.jurisdiction = " "
    one_error(paris, "a site of a grid needs a jurisdiction")
    Cluster(name="lab", fabric_kind="fat-tree").full_clean()  # outside a grid, none is needed


def test_a_cluster_named_by_links_keeps_its_name_and_grid(grid):
    paris = Cluster.objects.get(name="paris")
    paris.name = "lyon"
    one_error(paris, "WAN links name paris (paris - oslo, paris - aws/eu-central-1)")
    paris.name, paris.grid = "paris", None
    one_error(paris, "remove them before renaming the cluster or leaving its grid")
    WanLink.objects.filter(grid=grid, a="oslo").delete()
    WanLink.objects.filter(grid=grid, b="oslo").delete()
    oslo = Cluster.objects.get(name="oslo")
    oslo.grid = None
    oslo.full_clean()  # no link names it now


def test_a_cloud_region_named_by_links_keeps_its_place(grid):
    aws = GridCloudRegion.objects.get(provider="aws")
    aws.region = "eu-west-1"
    one_error(aws, "WAN links name aws/eu-central-1 (paris - aws/eu-central-1)")
    aws.region = "eu-central-1"
    aws.quota_gpus = 128
    aws.full_clean()  # other edits are fine
