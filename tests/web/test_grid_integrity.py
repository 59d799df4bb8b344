"""The inventory keeps a grid whole (issue 30): rebuilding a member cluster
(``build_cluster --replace``, ``cluster_plan_write(replace=True)``) keeps it in its grid with its
grid attributes and mirror; deleting a member cluster that WAN links name is refused, in one
line, by ``cluster_delete`` and on the admin's delete page (shown, not a 500), and nothing is
deleted; once its links are gone it can go."""

from __future__ import annotations

import pytest

from scheduler.hardware.cluster import NodeGroup, plan_cluster
from tests.web.test_grid_inventory import grid_plans, grid_spec
from twin.inventory.adapter import cluster_delete, cluster_plan_write
from twin.inventory.grid import grid_spec_read, grid_write
from twin.inventory.grid_models import SiteMirror
from twin.inventory.models import Cluster, Node, WanLink

REFUSED = ("cluster oslo is a site of grid eu and its WAN links name it (paris - oslo, "
           "oslo - gcp/us-east4): remove those links before deleting the cluster")


@pytest.fixture
def grid(db):
    plans = grid_plans()
    g = grid_write(grid_spec(plans), plans)
    SiteMirror.objects.create(cluster=Cluster.objects.get(name="oslo"), kind="rest",
                              rest_url="http://ctl.oslo:6820", token_env="SLURM_JWT_OSLO",
                              poll_s=20.0, timeout_s=5.0)
    return g


def mirror_of(name: str) -> dict:
    return SiteMirror.objects.filter(cluster__name=name).values(
        "kind", "rest_url", "token_env", "poll_s", "timeout_s").get()


def test_replacing_a_member_cluster_keeps_its_grid_attributes_and_mirror(grid):
    before_spec, _ = grid_spec_read(grid=grid)
    old = Cluster.objects.get(name="oslo")
    before_mirror = mirror_of("oslo")
    new = cluster_plan_write(plan_cluster("oslo", (NodeGroup("MI300X", 4, spares=1),),
                                          fabric_kind="fat-tree", fabric_kw={"radix": 8}),
                             replace=True)
    assert new.pk != old.pk and Node.objects.filter(rack__hall__site__cluster=new).count() == 4
    assert (new.grid_id, new.jurisdiction, new.power_price_per_kwh, new.stacks) == (
        grid.pk, "NO", 0.05, ["rocm6", "cuda12"])
    site = new.sites.get()
    assert (site.region, site.pue) == ("eu-north", 1.08)
    assert mirror_of("oslo") == before_mirror
    after_spec, plans = grid_spec_read(grid=grid)
    assert after_spec == before_spec and int(plans["oslo"].node_gpus.sum()) == 32


def test_build_cluster_replace_of_a_member_keeps_it_in_its_grid(grid, build):
    build("--fabric", "fat-tree", "--gpus", "16", "--radix", "8", "--name", "paris",
          "--replace")
    paris = Cluster.objects.get(name="paris")
    assert paris.grid_id == grid.pk and paris.jurisdiction == "EU"
    assert grid.places() == ["oslo", "paris", "aws/eu-central-1", "gcp/us-east4"]
    grid_spec_read(grid=grid)  # still runs: every link names a place


def test_cluster_delete_of_a_member_named_by_wan_links_is_refused_and_deletes_nothing(grid):
    oslo = Cluster.objects.get(name="oslo")
    nodes = Node.objects.count()
    with pytest.raises(ValueError) as err:
        cluster_delete(cluster=oslo)
    assert str(err.value) == REFUSED
    assert Cluster.objects.filter(pk=oslo.pk, grid=grid).exists()
    assert Node.objects.count() == nodes and SiteMirror.objects.count() == 1


def test_a_replacement_under_another_name_is_refused_too(grid):
    with pytest.raises(ValueError, match="remove those links"):
        cluster_delete(cluster=Cluster.objects.get(name="oslo"), successor="oslo-2")


def test_once_its_links_are_gone_a_member_cluster_can_be_deleted(grid):
    WanLink.objects.filter(grid=grid, a="oslo").delete()
    WanLink.objects.filter(grid=grid, b="oslo").delete()
    cluster_delete(cluster=Cluster.objects.get(name="oslo"))
    assert not Cluster.objects.filter(name="oslo").exists()
    assert "oslo" not in grid.places()


def test_the_admin_delete_page_shows_the_refusal_and_deletes_nothing(login, grid):
    oslo = Cluster.objects.get(name="oslo")
    url = f"/admin/twin/cluster/{oslo.pk}/delete/"
    c = login("admin")
    page = c.get(url)
    assert page.status_code == 200 and REFUSED in page.content.decode()
    posted = c.post(url, {"post": "yes"})
    assert posted.status_code == 200 and REFUSED in posted.content.decode()
    assert Cluster.objects.filter(pk=oslo.pk).exists()


def test_the_admin_bulk_delete_refuses_too(login, grid):
    ids = list(Cluster.objects.values_list("pk", flat=True))
    c = login("admin")
    page = c.post("/admin/twin/cluster/", {"action": "delete_selected",
                                           "_selected_action": ids, "post": "yes"})
    assert page.status_code == 200 and REFUSED in page.content.decode()
    assert Cluster.objects.count() == len(ids)


def test_the_admin_still_deletes_a_cluster_outside_any_grid(login, grid):
    """An empty cluster (no racks, which Django's own protection would hold) of no grid."""
    lone = Cluster.objects.create(name="lone")
    response = login("admin").post(f"/admin/twin/cluster/{lone.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not Cluster.objects.filter(name="lone").exists()


def test_an_empty_member_cluster_named_by_links_is_refused_on_the_delete_page(login, grid):
    """Nothing but the links holds it (no racks): the refusal alone keeps the grid whole."""
    WanLink.objects.filter(grid=grid, a="oslo").delete()
    WanLink.objects.filter(grid=grid, b="oslo").delete()
    Cluster.objects.filter(name="oslo").update(name="oslo-old")
    empty = Cluster.objects.create(name="oslo", grid=grid, jurisdiction="NO")
    WanLink.objects.create(grid=grid, a="paris", b="oslo", gbps=10.0, latency_ms=1.0)
    url = f"/admin/twin/cluster/{empty.pk}/delete/"
    posted = login("admin").post(url, {"post": "yes"})
    assert posted.status_code == 200
    assert "cluster oslo is a site of grid eu and its WAN links name it (paris - oslo)" in \
        posted.content.decode()
    assert Cluster.objects.filter(pk=empty.pk).exists()


def test_an_import_that_replaces_a_member_cluster_keeps_it_in_its_grid(grid):
    from twin.inventory.formats import inventory_export_json, inventory_from_json
    from twin.inventory.import_write import inventory_import
    doc = inventory_export_json(cluster=Cluster.objects.get(name="oslo"))
    new = inventory_import(inventory_from_json(doc), replace=True)
    assert (new.grid_id, new.jurisdiction, new.stacks) == (grid.pk, "NO", ["rocm6", "cuda12"])
    assert mirror_of("oslo")["rest_url"] == "http://ctl.oslo:6820"
    grid_spec_read(grid=grid)
