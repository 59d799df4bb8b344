"""Admin and API permissions: catalog edits that would strand nodes are refused, audit rows are
read-only for everyone, the drills API answers as the drills page does, who asked for a drill
is for staff, the API takes JSON only and ids too large for the database are 404s."""

import json

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError

from twin import models as m

HUGE = "99999999999999999999"  # 20 digits: past a 64-bit integer


def run_drill() -> Permission:
    return Permission.objects.get(codename="run_drill", content_type__app_label="twin")


def admin_form_data(page) -> dict:
    form = page.context["adminform"].form
    return {k: v for k, v in form.initial.items() if v is not None}


# ----------------------------------------------------------------- per_node
def test_lowering_per_node_below_what_nodes_hold_is_refused_with_how_many(small_cluster):
    h100 = m.AcceleratorModel.objects.get(name="H100-SXM")
    holding = m.Node.objects.filter(accelerator_model=h100, accelerator_count__gt=4).count()
    assert holding > 1
    h100.per_node = 4
    with pytest.raises(ValidationError, match=f"{holding} H100-SXM nodes hold more than 4"):
        h100.full_clean()


def test_per_node_may_drop_to_what_the_nodes_hold(small_cluster):
    h100 = m.AcceleratorModel.objects.get(name="H100-SXM")
    h100.per_node = max(m.Node.objects.filter(accelerator_model=h100)
                        .values_list("accelerator_count", flat=True))
    h100.full_clean()


def test_the_admin_refuses_the_lower_per_node_and_nodes_stay_editable(login, small_cluster):
    client = login("admin")
    h100 = m.AcceleratorModel.objects.get(name="H100-SXM")
    url = f"/admin/twin/acceleratormodel/{h100.pk}/change/"
    data = {**admin_form_data(client.get(url)), "per_node": 4}
    response = client.post(url, data)
    assert response.status_code == 200
    assert b"H100-SXM nodes hold more than 4 accelerators" in response.content
    h100.refresh_from_db()
    assert h100.per_node == 8
    node = m.Node.objects.filter(accelerator_model=h100).first()
    url = f"/admin/twin/node/{node.pk}/change/"
    data = {**admin_form_data(client.get(url)), "accelerator_model": h100.pk,
            "rack": node.rack_id, "nvme_tb": 7.5, "accelerators-TOTAL_FORMS": 0,
            "accelerators-INITIAL_FORMS": 0}
    assert client.post(url, data).status_code == 302
    node.refresh_from_db()
    assert node.nvme_tb == 7.5


# ----------------------------------------------------------------- audit rows
@pytest.fixture
def audit_rows(demo_users):
    return {
        "drill": m.Drill.objects.create(kind="node", target="3", requested_by=demo_users["staff"]),
        "auditentry": m.AuditEntry.objects.create(username="staff", action="node_drain",
                                                  target="node n1"),
    }


@pytest.mark.parametrize("model", ["drill", "auditentry"])
def test_a_superuser_can_view_audit_rows_but_not_change_add_or_delete_them(login, audit_rows,
                                                                           model):
    client = login("admin")
    row = audit_rows[model]
    before = {f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields}
    change = f"/admin/twin/{model}/{row.pk}/change/"
    page = client.get(change)
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert client.post(change, {"kind": "rack_power", "target": "9", "action": "x",
                                "username": "someone"}).status_code == 403
    assert client.post(f"/admin/twin/{model}/{row.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.post(f"/admin/twin/{model}/add/", {"kind": "node"}).status_code == 403
    changelist = client.get(f"/admin/twin/{model}/")
    assert b"delete_selected" not in changelist.content
    client.post(f"/admin/twin/{model}/", {"action": "delete_selected",
                                           "_selected_action": [row.pk], "post": "yes"})
    row.refresh_from_db()
    assert {f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields} == before


# ----------------------------------------------------------------- drills: API = page
def post_drill(client, body, content_type="application/json"):
    return client.post("/api/drills", json.dumps(body), content_type=content_type)


@pytest.mark.parametrize("username, grant, allowed", [
    ("operator", False, False),
    ("operator", True, False),  # run_drill without staff: the page says no, so does the API
    ("staff", False, False),
    ("staff", True, True),
])
def test_the_drills_api_answers_as_the_drills_page_does(login, demo_users, username, grant,
                                                        allowed):
    user = demo_users[username]
    if grant:
        user.user_permissions.add(run_drill())
    else:
        user.user_permissions.remove(run_drill())
    client = login(username)
    page = client.get("/drills/")
    form = client.post("/drills/", {"kind": "node", "target": "random"})
    api = post_drill(client, {"kind": "node", "target": "random"})
    assert (page.status_code, form.status_code, api.status_code) == (
        (200, 302, 202) if allowed else (403, 403, 403))
    assert m.Drill.objects.count() == (2 if allowed else 0)
    if not allowed:
        assert api.json()["error"] in page.content.decode()


# ----------------------------------------------------------------- drills: who asked
def test_operators_see_every_drill_but_only_their_own_name(login, demo_users):
    m.Drill.objects.create(kind="node", target="3", requested_by=demo_users["staff"])
    m.Drill.objects.create(kind="rack_power", target="1", requested_by=demo_users["operator"])
    seen = login("operator").get("/api/drills").json()["drills"]
    assert {(d["kind"], d["requested_by"]) for d in seen} == {("node", None),
                                                             ("rack_power", "operator")}
    seen = login("staff").get("/api/drills").json()["drills"]
    assert {(d["kind"], d["requested_by"]) for d in seen} == {("node", "staff"),
                                                             ("rack_power", "operator")}


# ----------------------------------------------------------------- JSON only
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x"])
def test_a_drill_body_that_is_not_declared_json_is_a_415(login, content_type):
    response = post_drill(login("staff"), {"kind": "node"}, content_type=content_type)
    assert response.status_code == 415
    assert "application/json" in response.json()["error"]
    assert not m.Drill.objects.exists()


def test_json_with_a_charset_is_json(login):
    response = post_drill(login("staff"), {"kind": "node"},
                          content_type="application/json; charset=utf-8")
    assert response.status_code == 202


# ----------------------------------------------------------------- ids past 64 bits
@pytest.mark.parametrize("path", [f"/api/racks/{HUGE}", f"/api/nodes/{HUGE}",
                                  "/api/racks/999999999999999999",
                                  "/api/nodes/999999999999999999"])
def test_an_id_past_the_database_integers_is_a_json_404(login, small_cluster, path):
    response = login("operator").get(path)
    assert response.status_code == 404
    assert "error" in response.json()


def test_an_event_page_past_the_database_integers_is_refused_not_a_500(login, db):
    m.LiveState.objects.create(pk=m.LiveState.SINGLETON_PK, health="ok")
    client = login("operator")
    response = client.get(f"/api/events?page={HUGE}")
    assert response.status_code == 400 and "page must be between" in response.json()["error"]
    assert client.get(f"/events/?page={HUGE}").status_code == 200
