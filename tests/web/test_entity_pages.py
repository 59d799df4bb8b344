"""Pages of one job, node, switch and tenant: each renders from the inventory and the live
engine's last placement and frame, links to the others (rack -> node -> GPU -> job -> tenant and
back), shows live status rather than the inventory's, and is a 404 for an unknown id or name."""

from __future__ import annotations

import pytest

from tests import frames
from twin import models as m
from twin.live import services

pytestmark = pytest.mark.django_db
RUN = "run-pages"


def placement(**extra):
    """Job ``train-7`` on engine nodes 0-1 (16 GPUs), ``serve-2`` on node 2; node 5 down,
    GPU 19 (node 2, index 3) out, switch link 0 out."""
    return frames.placement(**{
        "t": 7200.0,
        "jobs": {"train-7": {"gpus": 16, "tenant": "acme", "nodes": [[0, 1]],
                             "gpu_runs": [[0, 15]]},
                 # node 2's GPUs 0-2 and 4 (engine 16-18, 20): GPU 19 is out
                 "serve-2": {"gpus": 4, "tenant": "serving", "nodes": [[2, 2]],
                             "gpu_runs": [[16, 18], [20, 20]]}},
        "down": [[5, 5]], "gpus_down": [[19, 19]], "links_down": [[0, 0]], **extra})


def frame():
    return frames.frame(
        t=7200.0,
        queue=[{"position": 1, "name": "big-9", "tenant": "acme", "gpus": 512,
                "priority": 1, "wait_h": 1.5, "reason": "Resources"}],
        running_jobs=[{"name": "train-7", "tenant": "acme", "gpus": 16, "state": "running",
                       "model": "H100-SXM", "span": {"pods": 1, "leaves": 2}, "mfu": 0.41,
                       "running_h": 1.25}],
        tenants=[{"tenant": "acme", "used_gpus": 16, "quota_gpus": 64},
                 {"tenant": "serving", "used_gpus": 4, "quota_gpus": 32}])


@pytest.fixture
def live(small_cluster):
    services.live_state_write(seq=1, t_sim=7200.0, frame=frame(), health="ok", last_error="",
                              speed=60.0, paused=False, inventory=RUN, placement=placement())
    m.EngineEvent.objects.bulk_create([
        m.EngineEvent(inventory=RUN, seq=1, t_sim=60.0, kind="start", component="",
                      jobs=",train-7,", text="train-7 started on 16 GPUs"),
        m.EngineEvent(inventory=RUN, seq=2, t_sim=3600.0, kind="checkpoint", component="",
                      jobs=",train-7,", text="train-7 checkpointed"),
        m.EngineEvent(inventory=RUN, seq=3, t_sim=3700.0, kind="start", component="",
                      jobs=",other,", text="other started")])
    return small_cluster


def test_a_running_job_lists_its_nodes_with_links_its_tenant_and_its_timeline(live, login):
    html = login("operator").get("/jobs/train-7/").content.decode()
    assert 'href="/nodes/0/">tiny-n000000' in html and 'href="/nodes/1/">tiny-n000001' in html
    assert 'href="/nodes/2/"' not in html  # serve-2's node
    assert 'href="/tenants/acme/"' in html
    assert 'href="/racks/0/"' in html
    assert "train-7 checkpointed" in html and "train-7 started" in html
    assert "other started" not in html
    assert html.index("train-7 checkpointed") < html.index("train-7 started")  # newest first


def test_a_queued_job_shows_its_position_and_pending_reason(live, login):
    html = login("operator").get("/jobs/big-9/").content.decode()
    assert 'id="job-state">queued' in html
    assert 'id="job-reason">Resources' in html


def test_a_job_gone_from_the_live_state_still_has_its_event_log_page(live, login):
    html = login("operator").get("/jobs/other/").content.decode()
    assert "other started" in html and "not running" in html


def test_a_node_page_shows_live_gpu_status_the_job_on_it_its_rack_and_its_leaf(live, login):
    html = login("operator").get("/nodes/2/").content.decode()
    assert 'id="node-live" class="status status-up">up' in html
    row3 = html[html.index('id="gpu-3"'):html.index('id="gpu-4"')]
    row2 = html[html.index('id="gpu-2"'):html.index('id="gpu-3"')]
    assert "<td>down</td>" in row3 and "<td>up</td>" in row2  # GPU 19 = node 2's first (16) + 3
    assert 'href="/jobs/serve-2/"' in row2 and "train-7" not in row2
    assert 'id="node-rack" href="/racks/' in html
    assert 'href="/switches/' in html
    assert 'href="/nodes/3/">tiny-n000003' in html  # a node in the same rack
    assert "<strong>tiny-n000002</strong>" in html


def test_a_node_the_engine_reports_down_says_so_though_the_inventory_says_ready(live, login):
    html = login("operator").get("/nodes/5/").content.decode()
    assert 'id="node-live" class="status status-down">down' in html and "inventory: ready" in html


def test_a_leaf_page_lists_its_links_live_status_and_the_jobs_on_its_nodes(live, login):
    cluster = live
    leaf = (m.Link.objects.filter(cluster=cluster, node__hostname="tiny-n000000")
            .values_list("switch__index", flat=True).first())
    html = login("operator").get(f"/switches/{leaf}/").content.decode()
    assert 'href="/nodes/0/#gpu-0">tiny-n000000:0' in html
    assert 'href="/jobs/train-7/"' in html
    assert "ECMP" not in html


def test_a_switch_link_out_in_the_engine_is_shown_down_on_both_switches(live, login):
    first = m.Link.objects.filter(cluster=live, peer_switch__isnull=False).order_by("id").first()
    client = login("operator")
    for index, other in ((first.switch.index, first.peer_switch.name),
                         (first.peer_switch.index, first.switch.name)):
        html = client.get(f"/switches/{index}/").content.decode()
        row = html[html.index(f'id="link-{first.pk}"'):]
        row = row[:row.index("</tr>")]
        assert other in row and '<span class="status status-down">down</span>' in row


def test_a_spine_page_says_the_jobs_crossing_it_are_not_derivable(live, login):
    spine = m.Switch.objects.filter(cluster=live, tier="spine").first()
    html = login("operator").get(f"/switches/{spine.index}/").content.decode()
    assert "Not derivable" in html and "leaf" in html


def test_a_tenant_page_shows_quota_use_its_jobs_and_asks_for_its_history(live, login):
    html = login("operator").get("/tenants/acme/").content.decode()
    assert 'id="tenant-quota">64 GPUs' in html
    assert 'id="tenant-used">16 GPUs (25 % of quota)' in html
    assert 'href="/jobs/train-7/"' in html and 'href="/jobs/big-9/"' in html
    assert 'href="/jobs/serve-2/"' not in html
    assert 'data-metric="tenant.acme.gpus"' in html and "js/entity.js" in html


@pytest.mark.parametrize("path", ["/jobs/nope/", "/nodes/9999/", "/switches/9999/",
                                  "/tenants/nobody/", "/nodes/1234567890123456789012/"])
def test_unknown_ids_and_names_are_404(live, login, path):
    assert login("operator").get(path).status_code == 404


@pytest.mark.parametrize("path", ["/jobs/train-7/", "/nodes/0/", "/switches/0/",
                                  "/tenants/acme/"])
def test_pages_need_a_login_and_are_read_only(live, client, login, path):
    assert client.get(path).status_code == 302
    assert login("operator").post(path).status_code == 405
    assert client.get(path).status_code == 200


def test_pages_render_before_any_live_engine_reported(small_cluster, login):
    client = login("operator")
    assert "unknown" in client.get("/nodes/0/").content.decode()
    assert client.get("/switches/0/").status_code == 200
    assert client.get("/jobs/train-7/").status_code == 404
