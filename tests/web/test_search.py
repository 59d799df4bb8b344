"""Search from every page: nodes by hostname, GPUs by serial or ``hostname:index``, switches,
links, racks, jobs and tenants by name, anywhere in it, and by id; bounded, saying how many
more; one clear answer for a query it cannot take; login required."""

from __future__ import annotations

import pytest

from tests import frames
from tests.web.test_entity_pages import RUN, frame, placement
from twin import models as m
from twin.live import services
from twin.pages import search

pytestmark = pytest.mark.django_db


@pytest.fixture
def live(small_cluster):
    services.live_state_write(seq=1, t_sim=7200.0, frame=frame(), health="ok", last_error="",
                              speed=60.0, paused=False, inventory=RUN, placement=placement())
    return small_cluster


def hits(client, q) -> dict:
    got = client.get("/api/search", {"q": q})
    assert got.status_code == 200, got.content
    return {kind: [(h["name"], h["url"]) for h in r["hits"]]
            for kind, r in got.json()["results"].items() if r["hits"]}


@pytest.mark.parametrize(("q", "kind", "hit"), [
    ("tiny-n000003", "node", ("tiny-n000003", "/nodes/3/")),
    ("tiny-n000002:3", "gpu", ("tiny-n000002:3", "/nodes/2/#gpu-3")),
    ("H100-SXM-tiny-000019", "gpu", ("tiny-n000002:3", "/nodes/2/#gpu-3")),
    ("spine-00024", "switch", ("spine-00024", "/switches/24/")),
    ("tiny-rack-00001", "rack", ("tiny-rack-00001", "/racks/1/")),
    ("train-7", "job", ("train-7", "/jobs/train-7/")),
    ("big", "job", ("big-9", "/jobs/big-9/")),
    ("acm", "tenant", ("acme", "/tenants/acme/")),
])
def test_each_kind_is_found_by_its_name_and_links_to_its_page(live, login, q, kind, hit):
    assert hit in hits(login("operator"), q)[kind]


def test_a_link_is_found_by_its_switch_or_as_a_nic_port(live, login):
    client = login("operator")
    nic = m.Link.objects.get(cluster=live, node__hostname="tiny-n000001", node_port=5)
    got = hits(client, "tiny-n000001:5")["link"]
    assert got == [(f"{nic.switch.name} – tiny-n000001:5",
                    f"/switches/{nic.switch.index}/#link-{nic.pk}")]
    uplinks = hits(client, "spine-00024")["link"]
    assert uplinks and all("spine-00024" in name for name, _ in uplinks)


def test_a_prefix_matches_many_and_says_how_many_more_are_not_shown(live, login):
    got = login("operator").get("/api/search", {"q": "tiny-n"}).json()
    nodes = got["results"]["node"]
    total = m.Node.objects.count()
    assert len(nodes["hits"]) == min(total, search.LIMIT)
    assert nodes["more"] == max(0, total - search.LIMIT)
    gpus = got["results"]["gpu"]  # "tiny-n" is no serial's beginning
    assert gpus["hits"] == [] and gpus["more"] == 0


def test_more_than_the_limit_is_counted_and_capped(live, monkeypatch):
    monkeypatch.setattr(search, "COUNT_CAP", 30)
    groups = {g.kind: g for g in search.search(cluster=live, placement=None, frame=None, q="H100",
                                               limit=5)}
    gpu = groups["gpu"]  # 64 H100 serials: 5 shown, more than 30 - 5 more
    assert len(gpu.hits) == 5 and gpu.more == 25 and gpu.capped


def test_names_match_anywhere_whatever_the_case(live, login):
    client = login("operator")
    node = ("tiny-n000003", "/nodes/3/")
    assert hits(client, "n000003")["node"] == [node]  # the middle of tiny-n000003
    assert hits(client, "TINY-N000003")["node"] == [node]
    assert ("train-7", "/jobs/train-7/") in hits(client, "rain-7")["job"]
    assert ("acme", "/tenants/acme/") in hits(client, "CME")["tenant"]
    assert ("leaf-00010", "/switches/10/") in hits(client, "f-0001")["switch"]


def test_an_id_finds_what_each_kind_numbers_first(live, login):
    got = hits(login("operator"), "7")
    assert got["node"][0] == ("tiny-n000007", "/nodes/7/")
    assert got["gpu"][0] == ("tiny-n000000:7", "/nodes/0/#gpu-7")
    assert got["switch"][0] == ("leaf-00007", "/switches/7/")
    assert ("train-7", "/jobs/train-7/") in got["job"]


@pytest.mark.parametrize(("q", "kind", "hit"), [
    ("host 3", "node", ("tiny-n000003", "/nodes/3/")),  # the failure log's words
    ("node 3", "node", ("tiny-n000003", "/nodes/3/")),  # the drills' and operators'
    ("gpu 19", "gpu", ("tiny-n000002:3", "/nodes/2/#gpu-3")),
    ("leaf 10", "switch", ("leaf-00010", "/switches/10/")),
    ("spine 0", "switch", ("spine-00024", "/switches/24/")),
    ("rack 1", "rack", ("tiny-rack-00001", "/racks/1/")),
])
def test_the_event_log_s_component_words_find_the_thing_by_name(live, login, q, kind, hit):
    assert hits(login("operator"), q)[kind][0] == hit


def test_no_hit_says_nothing_matched(live, login):
    client = login("operator")
    assert hits(client, "zzz-no-such") == {}
    html = client.get("/search/", {"q": "zzz-no-such"}).content.decode()
    assert 'id="search-none"' in html


def test_the_results_page_groups_hits_by_kind_with_links(live, login):
    client = login("operator")
    html = client.get("/search/", {"q": "tiny-n000002"}).content.decode()
    assert 'id="results-node"' in html and 'href="/nodes/2/">tiny-n000002' in html
    assert 'id="results-gpu"' not in html and 'id="results-job"' not in html
    html = client.get("/search/", {"q": "tiny-n000002:"}).content.decode()  # its GPUs, NICs
    assert 'id="results-gpu"' in html and 'id="results-link"' in html
    assert 'href="/nodes/2/#gpu-7">tiny-n000002:7' in html
    assert 'id="results-node"' not in html


@pytest.mark.parametrize("q", ["x" * 101, "<script>alert(1)</script>", "a%'--", "   ",
                               "tiny-n\x00"])
def test_a_query_it_cannot_take_gets_one_clear_line(live, login, q):
    client = login("operator")
    api = client.get("/api/search", {"q": q})
    assert api.status_code == 400
    error = api.json()["error"]
    assert "\n" not in error and len(error) < 200
    page = client.get("/search/", {"q": q})
    assert page.status_code == 400 and 'id="search-error"' in page.content.decode()
    assert "<script>alert" not in page.content.decode()


def test_the_search_box_is_in_every_pages_header(live, login):
    client = login("operator")
    for path in ("/", "/jobs/", "/topology/", "/nodes/0/", "/jobs/train-7/"):
        html = client.get(path).content.decode()
        assert '<form method="get" action="/search/"' in html, path


def test_search_needs_a_login(live, client):
    assert client.get("/api/search", {"q": "tiny"}).status_code == 401
    page = client.get("/search/", {"q": "tiny"})
    assert page.status_code == 302 and "/accounts/login/" in page["Location"]


def test_search_works_before_any_live_engine_reported(small_cluster, login):
    got = hits(login("operator"), "tiny-n000000")
    assert got["node"] == [("tiny-n000000", "/nodes/0/")] and "job" not in got


def test_a_mirror_s_jobs_are_found_by_slurm_s_id_job_name_user_and_account(small_cluster, login):
    """Issue 26: Slurm's job names and users are searchable (the frame's followed jobs)."""
    run = "slurm-4242"
    f = frame()
    f["running_jobs"][0]["name"] = run
    f = frames.frame(**{**f, "mirror": {"jobs": {run: {
        "key": "4242", "name": "llama-sft", "user": "ana", "account": "nlp", "partition": "gpu",
        "state": "running"}}}})
    services.live_state_write(seq=1, t_sim=7200.0, frame=f, health="ok", last_error="",
                              speed=60.0, paused=False, inventory=RUN, placement=placement())
    client = login("operator")
    for q in ("4242", "llama", "ana", "nlp", "slurm-42"):
        assert hits(client, q).get("job") == [(run, f"/jobs/{run}/")], q
    detail = client.get("/api/search", {"q": "llama"}).json()["results"]["job"]["hits"][0]
    assert detail["detail"] == "running: Slurm job 4242 'llama-sft' of ana (nlp)"
    assert "job" not in hits(client, "bob")
