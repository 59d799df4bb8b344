"""The drills page: staff request a drill through a form; errors are shown, nothing is created."""

import re

import pytest
from django.test import Client

from scheduler.control.drills import KINDS
from twin import models as m


@pytest.fixture
def staff(login, small_cluster):
    return login("staff")


def test_the_form_offers_every_drill_kind(staff):
    page = staff.get("/drills/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="drill-form"' in html and "csrfmiddlewaretoken" in html
    for kind in KINDS:
        assert f'<option value="{kind}"' in html


def test_the_target_picker_suggests_random_models_and_cloud_pools(staff):
    page = staff.get("/drills/")
    assert page.context["targets"][:2] == ["random", "all"]
    assert {"H100-SXM", "MI300X"} <= set(page.context["targets"])
    assert b'<datalist id="drill-targets">' in page.content
    assert b'value="random" list="drill-targets"' in page.content


def test_kind_and_target_can_be_prefilled_from_the_query(staff):
    page = staff.get("/drills/?kind=rack_power&target=3")
    assert page.context["form"]["kind"].value() == "rack_power"
    assert b'value="3" list="drill-targets"' in page.content


def test_staff_run_a_drill_and_see_it_listed(staff, demo_users):
    response = staff.post("/drills/", {"kind": "node", "target": "5"})
    assert response.status_code == 302 and response["Location"] == "/drills/"
    drill = m.Drill.objects.get()
    assert (drill.kind, drill.target, drill.params, drill.status) == ("node", "5", {}, "pending")
    assert drill.requested_by == demo_users["staff"]
    page = staff.get("/drills/")
    html = page.content.decode()
    assert f"Drill #{drill.pk}: node on tiny-n000005 sent to the live engine." in html
    assert '<tr class="status-pending">' in html
    assert "<td>staff</td>" in html and "<td>node</td>" in html
    assert re.search(r'<td class="drill-target"><a href="/nodes/5/"[^>]*>tiny-n000005</a></td>',
                     html)


@pytest.mark.parametrize("kind, target, unit", [
    ("leaf_switch", "leaf-00010", "10"),  # the name the switch page shows
    ("spine_switch", "spine-00025", "1"),  # spines are numbered among spines and cores
    ("node", "tiny-n000005", "5"),
    ("node", "host 5", "5"),  # the failure log's words
    ("accelerator", "tiny-n000002:3", "19"),  # host:index -> engine GPU id
    ("nic", "tiny-n000002:3", "19"),
    ("rack_power", "tiny-rack-00001", "1"),
    ("power_cap", "tiny-rack-00001", "1"),
    ("optical_link", "spine-00024 – leaf-00000", "0"),
    ("leaf_switch", "10", "10"),  # ids still work
])
def test_a_drill_takes_the_name_the_pages_show_and_sends_the_unit_id(staff, kind, target, unit):
    response = staff.post("/drills/", {"kind": kind, "target": target})
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert m.Drill.objects.get().target == unit


def test_the_api_takes_names_too_and_names_the_target(staff):
    got = staff.post("/api/drills", {"kind": "leaf_switch", "target": "leaf-00003"},
                     content_type="application/json")
    assert got.status_code == 202 and got.json()["target"] == "3"
    listed = staff.get("/api/drills").json()["drills"][0]
    assert listed["target_named"] == {"kind": "switch", "id": 3, "name": "leaf-00003",
                                      "url": "/switches/3/"}


def test_each_kind_suggests_every_target_it_can_hit_by_name(staff, small_cluster):
    targets = staff.get("/drills/").context["kind_targets"]
    leaves = set(m.Switch.objects.filter(tier="leaf").values_list("name", flat=True))
    assert set(targets["leaf_switch"]) == {"random"} | leaves
    assert set(targets["node"]) == {"random"} | set(m.Node.objects.values_list("hostname",
                                                                               flat=True))
    assert len(targets["accelerator"]) == 1 + m.Accelerator.objects.count()
    assert set(targets["rack_power"]) == {"random"} | set(m.Rack.objects.values_list("name",
                                                                                     flat=True))
    assert targets["power_cap"][:2] == ["random", "all"]
    assert {"H100-SXM", "MI300X"} <= set(targets["supply_cut"])


def test_parameters_reach_the_drill(staff):
    staff.post("/drills/", {"kind": "storage_slowdown", "target": "", "factor": "0.4",
                            "duration_s": "7200"})
    drill = m.Drill.objects.get()
    assert drill.target == "random"
    assert drill.params == {"factor": 0.4, "duration_s": 7200.0}


@pytest.mark.parametrize("data, message", [
    ({"kind": "meteor"}, "Select a valid choice. meteor is not one of the available choices."),
    ({"kind": "storage_slowdown", "factor": "half"}, "Enter a number."),
    ({"kind": "storage_slowdown", "factor": "2"}, "factor must be at most 1, not 2.0"),
    ({"kind": "power_cap", "fraction": "-0.5"}, "fraction must be a positive number"),
    ({"kind": "node", "factor": "0.5"}, "a node drill takes no parameters; not factor"),
    ({"kind": "accelerator", "target": "gpu-seven"},
     "targets &#x27;random&#x27;, a non-negative id or the name of its gpu: &#x27;gpu-seven&#x27; "
     "names nothing in this cluster"),
    ({"kind": "leaf_switch", "target": "spine-00024"},
     "&#x27;spine-00024&#x27; is a switch, not a leaf switch target"),
])
def test_bad_input_shows_the_error_and_creates_nothing(staff, data, message):
    page = staff.post("/drills/", data)
    assert page.status_code == 400
    assert message in page.content.decode()
    assert not m.Drill.objects.exists()


def test_operator_can_neither_open_nor_post_the_drills_page(login, small_cluster):
    client = login("operator")
    assert client.get("/drills/").status_code == 403
    assert client.post("/drills/", {"kind": "node"}).status_code == 403
    assert not m.Drill.objects.exists()


def test_the_drill_form_needs_a_csrf_token(demo_users, small_cluster):
    client = Client(enforce_csrf_checks=True)
    client.force_login(demo_users["staff"])
    assert client.post("/drills/", {"kind": "node"}).status_code == 403
    assert not m.Drill.objects.exists()
    client.get("/drills/")
    token = client.cookies["csrftoken"].value
    response = client.post("/drills/", {"kind": "node", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert m.Drill.objects.count() == 1


def test_the_list_shows_who_when_status_and_outcome(staff, demo_users):
    m.Drill.objects.create(kind="rack_power", target="2", requested_by=demo_users["admin"],
                           status=m.DrillStatus.APPLIED, applied_at_sim=7200.0,
                           outcome={"jobs": ["train-1", "train-2"], "gpus": 48,
                                    "repair_s": 3600.0})
    m.Drill.objects.create(kind="cloud_region_loss", target="nowhere/none",
                           requested_by=demo_users["staff"], status=m.DrillStatus.REFUSED,
                           outcome={"error": "cloud pool 'nowhere/none' does not exist"})
    html = staff.get("/drills/").content.decode()
    assert "2 job(s) hit, 48 GPUs, repair 1 h" in html  # durations as twin/pages/formats.py
    assert '<span class="sim-time">day 0, 02:00</span>' in html and "<td>admin</td>" in html
    assert "cloud pool &#x27;nowhere/none&#x27; does not exist" in html
    assert '<tr class="status-refused">' in html


def test_a_random_target_shows_the_unit_the_engine_chose(staff, demo_users):
    m.Drill.objects.create(kind="node", target="random", requested_by=demo_users["staff"],
                           status=m.DrillStatus.APPLIED, applied_at_sim=60.0,
                           outcome={"target": 42, "jobs": [], "gpus": 0})
    assert '<td class="drill-target">random → 42</td>' in staff.get("/drills/").content.decode()
    m.Drill.objects.update(outcome={"target": 4, "jobs": [], "gpus": 0})
    html = staff.get("/drills/").content.decode()
    assert re.search(r'random → <a href="/nodes/4/"[^>]*>tiny-n000004</a>', html)
