"""Login required everywhere; the home page shows the inventory summary."""

import pytest


@pytest.mark.parametrize("path", ["/", "/api/inventory"])
def test_anonymous_visitors_are_sent_to_login(client, db, path):
    response = client.get(path)
    assert response.status_code in (302, 401)
    if response.status_code == 302:
        assert response["Location"].startswith("/accounts/login/")


def test_operator_sees_the_inventory_summary(login, small_cluster):
    page = login("operator").get("/")
    assert page.status_code == 200
    assert b"tiny" in page.content
    assert page.context["summary"]["gpus"] == 96
    assert page.context["summary"]["nodes_by_status"]["ready"] == 12


def test_home_page_without_a_cluster_says_how_to_build_one(login):
    page = login("operator").get("/")
    assert b"build_cluster" in page.content


def test_api_inventory_returns_the_summary(login, small_cluster):
    data = login("operator").get("/api/inventory").json()
    assert data["cluster"] == "tiny" and data["gpus"] == 96


def test_operator_cannot_open_the_admin(login, small_cluster):
    assert login("operator").get("/admin/twin/node/").status_code == 302


def test_demo_accounts_have_their_roles(demo_users):
    assert demo_users["admin"].is_superuser
    assert demo_users["staff"].has_perm("twin.run_drill")
    assert not demo_users["operator"].has_perm("twin.run_drill")
    assert not demo_users["operator"].is_staff


def test_seeding_again_keeps_the_passwords_unless_asked_to_reset_them(demo_users):
    from django.contrib.auth import get_user_model

    from tests.web.conftest import PASSWORD
    from twin.config.demo import demo_accounts_seed
    assert demo_accounts_seed(password="another-pass") == []
    assert get_user_model().objects.count() == 3
    assert get_user_model().objects.get(username="staff").check_password(PASSWORD)
    assert demo_accounts_seed(password="another-pass", reset_passwords=True) == []
    assert get_user_model().objects.get(username="staff").check_password("another-pass")


def test_login_page_uses_csrf(client, db):
    from django.test import Client
    strict = Client(enforce_csrf_checks=True)
    response = strict.post("/accounts/login/", {"username": "x", "password": "y"})
    assert response.status_code == 403
