"""The edges: error pages in the app's theme (JSON under /api/), the stale banner's data, the
login page's demo note, `make run PORT=`, and the admin's engine ids and live-page links.

This module is also the URLconf of the tests that need a view that fails (``urls`` fixture):
the twin's URLs plus ``/boom/`` and ``/denied/`` and their ``/api/`` twins."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory
from django.urls import path

from tests import frames
from twin import models as m
from twin.config import urls as twin_urls
from twin.inventory.adapter import EngineIds, cluster_plan_write
from twin.live import services as live_services
from twin.pages import errors

ROOT = Path(__file__).resolve().parents[2]


def _boom(request):
    raise RuntimeError("the database went away")


def _denied(request):
    raise PermissionDenied("only the night shift may open this")


urlpatterns = [path("boom/", _boom), path("api/boom", _boom), path("denied/", _denied),
               path("api/denied", _denied), *twin_urls.urlpatterns]
handler400 = twin_urls.handler400
handler403 = twin_urls.handler403
handler404 = twin_urls.handler404
handler500 = twin_urls.handler500


@pytest.fixture
def urls(settings):
    settings.ROOT_URLCONF = __name__


@pytest.fixture
def operator(demo_users):
    client = Client(raise_request_exception=False)
    client.force_login(demo_users["operator"])
    return client


def themed(response, status: int) -> str:
    """The page, checked to be the app's themed error page for ``status``: the theme's
    stylesheet and dark colour scheme (no white flash) and a link back to the overview."""
    html = response.content.decode()
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    assert f'id="error-page" data-status="{status}"' in html
    assert '/static/css/twin.css"' in html and '<meta name="color-scheme" content="dark">' in html
    assert '<a href="/" id="error-home">Back to the overview</a>' in html
    return html


# ----------------------------------------------------------------- error pages
def test_settings_run_with_debug_off(settings):
    assert settings.DEBUG is False  # what the error pages below are rendered under


def test_an_unknown_page_is_the_themed_404_with_the_navigation(operator, small_cluster):
    html = themed(operator.get("/no-such-page/"), 404)
    assert "<code>/no-such-page/</code>" in html
    assert 'href="/jobs/"' in html and "Log out</button>" in html  # the header's navigation
    assert "Resolver404" not in html


def test_a_404_from_a_page_says_what_is_missing(operator, small_cluster):
    html = themed(operator.get("/nodes/999999/"), 404)
    assert "node 999999 does not exist in cluster tiny" in html


def test_a_refused_page_is_the_themed_403_with_the_refusal(operator, small_cluster):
    html = themed(operator.get("/drills/"), 403)
    assert "drill" in re.search(r"<h1>Not allowed</h1>\s*<p>(.*?)</p>", html, re.S).group(1)


def test_a_refusal_raised_anywhere_is_the_themed_403(operator, urls):
    assert "only the night shift may open this" in themed(operator.get("/denied/"), 403)


def test_a_bad_request_is_the_themed_400(operator):
    themed(operator.get("/", HTTP_HOST="intruder.example"), 400)


def test_a_failing_page_is_the_themed_500_without_the_failure(operator, urls):
    html = themed(operator.get("/boom/"), 500)
    assert "database went away" not in html


def test_a_refused_form_is_the_themed_403(demo_users):
    client = Client(enforce_csrf_checks=True)
    client.force_login(demo_users["operator"])
    html = themed(client.post("/accounts/logout/"), 403)
    assert "Form expired" in html


def test_the_500_page_renders_without_a_database_or_a_user():
    """No ``db`` fixture: pytest-django refuses any query, so rendering must make none."""
    for path_ in ("/boom/", "/jobs/"):
        response = errors.server_error(RequestFactory().get(path_))
        html = themed(response, 500)
        assert "Log out" not in html  # no user: the header shows no one's navigation
    assert errors.bad_request(RequestFactory().get("/"), None).status_code == 400


@pytest.mark.parametrize(("path_", "status", "error"), [
    ("/api/no-such-thing", 404, "/api/no-such-thing does not exist"),
    ("/api/nodes/999999999999999999999", 404, None),
    ("/api/denied", 403, "only the night shift may open this"),
    ("/api/boom", 500, "internal server error"),
])
def test_the_api_keeps_answering_json_errors(operator, urls, path_, status, error):
    response = operator.get(path_)
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    assert error is None or response.json() == {"error": error}
    assert "error" in response.json()


def test_a_bad_api_request_is_json(operator):
    response = operator.get("/api/state", HTTP_HOST="intruder.example")
    assert (response.status_code, response.json()) == (400, {"error": "bad request"})


def test_a_refused_api_form_is_json(demo_users):
    client = Client(enforce_csrf_checks=True)
    client.force_login(demo_users["staff"])
    response = client.post("/api/drills", {}, content_type="application/json")
    assert response.status_code == 403 and "CSRF" in response.json()["error"]


# ----------------------------------------------------------------- the stale banner
# What the banner says from these is tested in a browser (tests/browser/test_stale_banner.py).
def banner(html: str) -> dict[str, str]:
    tag = re.search(r'<div id="stale-banner"[^>]*>', html).group(0)
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', tag))


def test_the_stale_banner_knows_the_engine_mode_and_that_there_is_no_state(operator, settings):
    data = banner(operator.get("/").content.decode())
    assert data["engine-mode"] == "off" and data["state-at"] == ""
    assert float(data["server-now"]) > 1.6e9
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "ENGINE_MODE": "separate"}
    assert banner(operator.get("/").content.decode())["engine-mode"] == "separate"


def test_the_stale_banner_knows_when_the_live_state_was_last_written(operator, small_cluster):
    live_services.live_state_write(seq=3, t_sim=60.0, frame=frames.frame(t=60.0), health="ok",
                                   last_error="", speed=1.0, paused=False,
                                   placement=frames.placement(t=60.0))
    written = m.LiveState.objects.get().updated_at.timestamp()
    data = banner(operator.get("/jobs/").content.decode())
    assert float(data["state-at"]) == pytest.approx(written, abs=1e-3)


# ----------------------------------------------------------------- the login page
def test_the_login_page_lists_the_demo_accounts_only_in_the_demo(client, db, settings):
    settings.CLUSTERTWIN_INSECURE_DEMO = True
    html = client.get("/accounts/login/").content.decode()
    assert 'id="demo-accounts"' in html
    assert all(f"<code>{name}</code>" in html for name in ("admin", "staff", "operator"))
    settings.CLUSTERTWIN_INSECURE_DEMO = False
    html = client.get("/accounts/login/").content.decode()
    assert "demo-accounts" not in html and "<code>operator</code>" not in html


# ----------------------------------------------------------------- make run
@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
@pytest.mark.parametrize(("args", "port"), [((), "8000"), (("PORT=8123",), "8123")])
def test_make_run_serves_on_the_port_asked(args, port):
    dry = subprocess.run(["make", "-n", "run", *args], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert f"manage.py serve --bind 127.0.0.1 --port {port}" in dry
    assert f"Serving on http://127.0.0.1:{port}" in dry


# ----------------------------------------------------------------- the admin
@pytest.fixture
def clusters(db, small_plan, settings, demo_users):
    """Another cluster first (so admin ids and engine ids differ), then the live one."""
    from dataclasses import replace
    other = cluster_plan_write(replace(small_plan, name="other"))
    live = cluster_plan_write(small_plan)
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "CLUSTER": small_plan.name}
    return other, live


@pytest.fixture
def admin_(demo_users):
    client = Client()
    client.force_login(demo_users["admin"])
    return client


def view_on_site(html: str) -> str | None:
    found = re.search(r'<a href="([^"]*)" class="viewsitelink">', html)
    return found and found.group(1)


def test_an_admin_node_shows_its_engine_id_and_links_its_live_page(clusters, admin_):
    other, live = clusters
    node = m.Node.objects.filter(rack__hall__site__cluster=live).order_by("id")[3]
    engine = EngineIds(live).node(node.pk)
    assert engine != node.pk  # the off-by-some the admin used to hide
    html = admin_.get(f"/admin/twin/node/{node.pk}/change/").content.decode()
    link = f'<a href="/nodes/{engine}/" class="live-page" title="its live page">{engine}</a>'
    assert link in html
    assert view_on_site(html) == f"/nodes/{engine}/"
    page = admin_.get(f"/nodes/{engine}/").content.decode()
    assert node.hostname in re.search(r"<h1>(.*?)</h1>", page, re.S).group(1)


def test_the_node_changelist_shows_engine_ids_beside_hostnames(clusters, admin_):
    other, live = clusters
    html = admin_.get("/admin/twin/node/", {"o": "1"}).content.decode()
    ids = EngineIds(live)
    for node in m.Node.objects.filter(rack__hall__site__cluster=live)[:5]:
        assert f'<a href="/nodes/{ids.node(node.pk)}/" class="live-page"' in html
    assert "not in the live cluster" in html  # the other cluster's nodes


def test_a_node_of_another_cluster_has_no_live_page(clusters, admin_):
    other, _ = clusters
    node = m.Node.objects.filter(rack__hall__site__cluster=other).first()
    html = admin_.get(f"/admin/twin/node/{node.pk}/change/").content.decode()
    assert "not in the live cluster" in html and view_on_site(html) is None


def test_an_admin_switch_links_the_switch_page_of_its_index(clusters, admin_):
    _, live = clusters
    switch = m.Switch.objects.filter(cluster=live).order_by("id")[2]
    html = admin_.get(f"/admin/twin/switch/{switch.pk}/change/").content.decode()
    assert view_on_site(html) == f"/switches/{switch.index}/"
    assert switch.name in admin_.get(f"/switches/{switch.index}/").content.decode()


def test_an_admin_rack_links_its_live_page(clusters, admin_):
    _, live = clusters
    rack = m.Rack.objects.filter(hall__site__cluster=live).order_by("id")[1]
    html = admin_.get(f"/admin/twin/rack/{rack.pk}/change/").content.decode()
    assert view_on_site(html) == f"/racks/{EngineIds(live).rack(rack.pk)}/"


def test_an_admin_gpu_shows_its_engine_id_and_links_its_node(clusters, admin_):
    _, live = clusters
    gpu = m.Accelerator.objects.filter(node__rack__hall__site__cluster=live).order_by("id")[11]
    ids = EngineIds(live)
    html = admin_.get(f"/admin/twin/accelerator/{gpu.pk}/change/").content.decode()
    node = ids.node(gpu.node_id)
    assert f'<a href="/nodes/{node}/" class="live-page" title="its live page">' \
           f'{ids.gpu(gpu.node_id, gpu.index)}</a>' in html


def test_the_live_cluster_links_the_overview_and_the_other_does_not(clusters, admin_):
    other, live = clusters
    assert view_on_site(admin_.get(f"/admin/twin/cluster/{live.pk}/change/")
                        .content.decode()) == "/"
    assert view_on_site(admin_.get(f"/admin/twin/cluster/{other.pk}/change/")
                        .content.decode()) is None
