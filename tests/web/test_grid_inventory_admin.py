"""The grid's admin (issue 30): add and change pages render with the member clusters, cloud
regions and WAN links; a bad row is refused with its message and nothing changes; the pages
are for staff with inventory rights only."""

from __future__ import annotations

import pytest

from tests.web.test_grid_inventory import counts, grid_plans, grid_spec
from twin.inventory.grid import grid_spec_read, grid_write
from twin.inventory.models import AcceleratorModel, Cluster, Grid, GridCloudRegion, WanLink


@pytest.fixture
def grid(db):
    plans = grid_plans()
    return grid_write(grid_spec(plans), plans)


@pytest.fixture
def admin_(login, grid):
    return login("admin")


def form_data(page) -> dict:
    """What the browser posts back from ``page`` unchanged: the form, each inline's
    management form and its rows."""
    data: dict = {}

    def add(form):
        for name in form.fields:
            value = form[name].value()
            if value is not None and value is not False:
                data[form.add_prefix(name)] = "on" if value is True else value

    add(page.context["adminform"].form)
    for inline in page.context["inline_admin_formsets"]:
        add(inline.formset.management_form)
        for form in inline.formset.initial_forms:
            add(form)
    return data


def new_rows(data: dict, prefix: str, rows: list[dict]) -> dict:
    """``data`` with ``rows`` added to inline ``prefix``."""
    n = int(data[f"{prefix}-TOTAL_FORMS"])
    for i, row in enumerate(rows, start=n):
        data.update({f"{prefix}-{i}-{k}": v for k, v in row.items()})
    data[f"{prefix}-TOTAL_FORMS"] = n + len(rows)
    return data


def change_url(grid) -> str:
    return f"/admin/twin/grid/{grid.pk}/change/"


def aws_row(data: dict) -> int:
    return next(int(k.split("-")[1]) for k, v in data.items()
                if k.startswith("cloud_regions-") and k.endswith("-provider") and v == "aws")


def test_the_change_page_shows_members_regions_and_links(admin_, grid):
    page = admin_.get(change_url(grid))
    assert page.status_code == 200
    html = page.content.decode()
    for text in ("paris", "oslo", "eu-central-1", "us-east4", "aws/eu-central-1"):
        assert text in html
    for c in Cluster.objects.filter(grid=grid):   # each member links to its own page
        assert f"/admin/twin/cluster/{c.pk}/change/" in html


def test_posting_the_page_back_unchanged_changes_nothing(admin_, grid):
    spec = grid_spec_read(grid=grid)[0]
    response = admin_.post(change_url(grid), form_data(admin_.get(change_url(grid))))
    assert response.status_code == 302, response.context and \
        response.context["adminform"].form.errors
    assert grid_spec_read(grid=Grid.objects.get(pk=grid.pk))[0] == spec


def refused(client, grid, data: dict, message: str) -> None:
    before, spec = counts(), grid_spec_read(grid=grid)[0]
    response = client.post(change_url(grid), data)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert counts() == before
    assert grid_spec_read(grid=Grid.objects.get(pk=grid.pk))[0] == spec


def test_a_link_to_an_unknown_place_is_refused(admin_, grid):
    data = new_rows(form_data(admin_.get(change_url(grid))), "wan_links",
                    [{"a": "paris", "b": "lyon", "gbps": 10, "latency_ms": 3,
                      "egress_per_gb": 0}])
    refused(admin_, grid, data, "&#x27;lyon&#x27; is no place of the grid")


@pytest.mark.parametrize("field, value, message", [
    ("gbps", "0", "must be positive"),
    ("latency_ms", "-1", "cannot be negative"),
    ("b", "paris", "not paris to itself"),
])
def test_a_bad_link_edit_is_refused(admin_, grid, field, value, message):
    data = form_data(admin_.get(change_url(grid)))
    data[f"wan_links-0-{field}"] = value
    refused(admin_, grid, data, message)


def test_a_cloud_region_with_no_quota_is_refused(admin_, grid):
    data = form_data(admin_.get(change_url(grid)))
    data[f"cloud_regions-{aws_row(data)}-quota_gpus"] = "0"
    refused(admin_, grid, data, "quota must be positive")


def test_deleting_a_region_a_link_still_names_is_refused(admin_, grid):
    data = form_data(admin_.get(change_url(grid)))
    data[f"cloud_regions-{aws_row(data)}-DELETE"] = "on"
    refused(admin_, grid, data, "&#x27;aws/eu-central-1&#x27; is no place of the grid")


def test_two_links_between_one_pair_are_refused(admin_, grid):
    data = new_rows(form_data(admin_.get(change_url(grid))), "wan_links",
                    [{"a": "oslo", "b": "paris", "gbps": 10, "latency_ms": 3,
                      "egress_per_gb": 0}])
    refused(admin_, grid, data, "already has a WAN link between oslo and paris")


def test_a_region_and_its_link_are_added_in_one_form(admin_, grid):
    h100 = AcceleratorModel.objects.get(name="H100-SXM")
    data = new_rows(form_data(admin_.get(change_url(grid))), "cloud_regions", [{
        "provider": "azure", "region": "westeurope", "jurisdiction": "EU",
        "accelerator_model": h100.pk, "quota_gpus": 16, "on_demand_per_gpu_hour": 7.5,
        "spot_interruptions_per_hour": 0, "startup_s": 300, "stacks": "[]"}])
    data = new_rows(data, "wan_links", [{"a": "azure/westeurope", "b": "oslo", "gbps": 25,
                                         "latency_ms": 30, "egress_per_gb": 0.05}])
    response = admin_.post(change_url(grid), data)
    assert response.status_code == 302
    spec, _ = grid_spec_read(grid=grid)
    assert "azure/westeurope" in spec.places()
    assert spec.links[-1].a == "azure/westeurope" and spec.links[-1].gbps == 25


def test_the_add_page_makes_a_grid_of_two_regions_and_a_link(admin_):
    page = admin_.get("/admin/twin/grid/add/")
    assert page.status_code == 200
    h100 = AcceleratorModel.objects.get(name="H100-SXM").pk
    data = {**form_data(page), "name": "clouds", "checkpoint_replication_s": 600}
    region = {"jurisdiction": "US", "accelerator_model": h100, "quota_gpus": 8,
              "on_demand_per_gpu_hour": 6, "spot_interruptions_per_hour": 0,
              "startup_s": 600, "stacks": "[]"}
    data = new_rows(data, "cloud_regions", [{**region, "provider": "aws", "region": "a"},
                                            {**region, "provider": "aws", "region": "b"}])
    data = new_rows(data, "wan_links", [{"a": "aws/a", "b": "aws/b", "gbps": 5,
                                         "latency_ms": 1, "egress_per_gb": 0}])
    assert admin_.post("/admin/twin/grid/add/", data).status_code == 302
    grid = Grid.objects.get(name="clouds")
    assert grid.cloud_regions.count() == 2
    assert list(grid.wan_links.values_list("a", "b")) == [("aws/a", "aws/b")]


def test_the_add_page_refuses_a_link_to_a_region_not_in_the_form(admin_):
    data = {**form_data(admin_.get("/admin/twin/grid/add/")), "name": "clouds"}
    data = new_rows(data, "wan_links", [{"a": "aws/a", "b": "aws/b", "gbps": 5,
                                         "latency_ms": 1, "egress_per_gb": 0}])
    before = counts()
    response = admin_.post("/admin/twin/grid/add/", data)
    assert response.status_code == 200
    assert "is no place of the grid" in response.content.decode()
    assert counts() == before


def test_all_weights_zero_is_refused(admin_, grid):
    data = {**form_data(admin_.get(change_url(grid))), "weight_cost": 0, "weight_start": 0,
            "weight_gravity": 0}
    refused(admin_, grid, data, "at least one placement weight must be positive")
    assert Grid.objects.get(pk=grid.pk).weight_cost == 1.0


def test_a_cluster_joins_a_grid_on_its_page_only_with_a_jurisdiction(admin_, grid):
    lab = Cluster.objects.create(name="lab", fabric_kind="fat-tree")
    url = f"/admin/twin/cluster/{lab.pk}/change/"
    data = {**form_data(admin_.get(url)), "grid": grid.pk}
    response = admin_.post(url, data)
    assert response.status_code == 200
    assert "a site of a grid needs a jurisdiction" in response.content.decode()
    assert Cluster.objects.get(pk=lab.pk).grid is None
    assert admin_.post(url, {**data, "jurisdiction": "EU"}).status_code == 302
    assert Cluster.objects.get(pk=lab.pk).grid == grid


@pytest.mark.parametrize("user", ["operator", "staff"])
def test_the_grid_pages_are_for_inventory_editors_only(login, grid, user):
    client = login(user)
    for url in (change_url(grid), "/admin/twin/grid/add/", "/admin/twin/grid/"):
        assert client.get(url).status_code in (302, 403)
    assert WanLink.objects.count() == 3 and GridCloudRegion.objects.count() == 2
