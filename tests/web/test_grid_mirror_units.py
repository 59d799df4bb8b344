"""The grid mirror without Slurm (issue 30): per-site health, sites polled each on its own (a
source that hangs delays no other), the overview it writes, and bad ``SiteMirror`` rows refused.

The real-Slurm twin of these is ``tests/slurm/test_grid_mirror.py``.
"""

from __future__ import annotations

import io
import os
import signal
import threading

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from scheduler.grid.overview import check_overview
from tests.waiting import wait_until
from tests.web.test_grid_inventory import grid_plans, grid_spec
from twin.inventory.grid import grid_write
from twin.inventory.grid_models import SiteMirror
from twin.inventory.models import Cluster
from twin.live.models import GridState
from twin.management.commands import mirror_grid
from twin.mirror.errors import SourceError
from twin.mirror.grid_mirror import GridMirror, grid_sources
from twin.mirror.grid_sites import (
    SiteReading,
    SiteSource,
    SiteState,
    health,
    read_site,
    summarise,
)
from twin.mirror.slurm_source import SlurmJob, SlurmNode


def reading(at: float, allocated: int = 8) -> SiteReading:
    return SiteReading(16, allocated, 0, 1, 4, at)


# ------------------------------------------------------------------ health of one site
def test_a_site_goes_ok_stale_down_and_ok_again():
    state = SiteState(SiteSource("paris", poll_s=10.0))
    assert health(state, 0.0)[0] == "down"                       # not polled yet
    assert "not polled yet" in health(state, 0.0)[1]
    state.record(reading(100.0))
    assert health(state, 100.0) == ("ok", "")
    assert health(state, 130.0) == ("ok", "")                   # exactly 3 polls old
    level, note = health(state, 131.0)                          # older than 3 polls
    assert level == "stale" and "31 s ago" in note
    state.record(None, "slurm: `sinfo --json` exited 1: Unable to contact slurm controller")
    level, note = health(state, 140.0)
    assert level == "down"
    assert "Unable to contact slurm controller" in note and "40 s ago" in note
    state.record(reading(150.0))
    assert health(state, 150.0) == ("ok", "")


def test_summarise_counts_down_allocated_and_queued_gpus():
    def node(name, *state):
        return SlurmNode(name, frozenset(state), "", "gpu:8", 8, (), ("all",))

    def job(jid, state, gpus):
        return SlurmJob(jid, "j", "u", "a", "all", state, "", (), gpus, None, None, None,
                        None, None, None)

    nodes = {n.name: n for n in (node("a1", "mixed"), node("a2", "idle", "drained"),
                                 node("a3", "down"), node("a4", "allocated"))}
    jobs = [job("1", "RUNNING", 8), job("2", "RUNNING", 3), job("3", "COMPLETING", 1),
            job("4", "PENDING", 4), job("5", "PENDING", 2), job("6", "COMPLETED", 8)]
    assert summarise(nodes, jobs, 5.0) == SiteReading(32, 12, 16, 2, 6, 5.0)


# ------------------------------------------------------------------ sites polled each on its own
class Sources:
    """Fake reads: ``fast`` answers at once, ``hung`` waits until released."""

    def __init__(self):
        self.release = threading.Event()
        self.calls = {"fast": 0, "hung": 0}

    def read(self, site: SiteSource) -> SiteReading:
        self.calls[site.place] += 1
        if site.place == "hung":
            self.release.wait(30)
            raise SourceError("slurm", "timed out")
        return reading(float(self.calls["fast"]), allocated=self.calls["fast"] % 16)


def test_a_hung_source_does_not_delay_the_others():
    sources = Sources()
    mirror = GridMirror("g", [SiteSource("fast", poll_s=0.02), SiteSource("hung", poll_s=0.02)],
                        [], read=sources.read, clock=lambda: 1.0)
    mirror.start()
    try:
        wait_until(lambda: mirror.states[0].polls >= 5, what="five polls of the fast site")
        assert sources.calls["hung"] == 1 and mirror.states[1].polls == 0
        fast, hung = mirror.overview()["places"]
        assert fast["health"] == "ok" and hung["health"] == "down"
        assert "not polled yet" in hung["note"]
    finally:
        sources.release.set()
        mirror.stop()


def test_one_round_gives_up_on_a_hung_source_and_keeps_the_others():
    sources = Sources()
    mirror = GridMirror("g", [SiteSource("fast", timeout_s=0.1),
                              SiteSource("hung", timeout_s=0.1)], [], read=sources.read,
                        clock=lambda: 1.0)
    try:
        mirror.poll_once(slack_s=0.1)
        fast, hung = mirror.overview()["places"]
    finally:
        sources.release.set()
    assert (fast["health"], fast["allocated"]) == ("ok", 1)
    assert hung["health"] == "down" and "no answer within 0.1 s" in hung["note"]


# ------------------------------------------------------------------ rows, overview, command
@pytest.fixture
def grid(db):
    plans = grid_plans()
    grid = grid_write(grid_spec(plans), plans)
    SiteMirror.objects.create(cluster=Cluster.objects.get(name="paris"), slurm_conf="/x.conf",
                              poll_s=5.0, timeout_s=2.0)
    return grid


def test_the_overview_has_each_member_its_links_and_no_cloud(grid):
    _, sites, links = grid_sources(name="eu")
    assert [s.place for s in sites] == ["paris", "oslo"]
    assert (sites[0].kind, str(sites[0].conf), sites[0].poll_s) == ("cli", "/x.conf", 5.0)
    assert sites[0].inventory_gpus == 32 and sites[0].jurisdiction == "EU"
    assert [(w["a"], w["b"], w["load_gbps"]) for w in links] == [("paris", "oslo", 0.0)]
    def read(site):
        if site.place == "oslo":
            raise SourceError("oslo", "unreachable")
        return reading(7.0)

    mirror = GridMirror("eu", sites, links, read=read, clock=lambda: 8.0)
    mirror.poll_once()
    doc = check_overview(mirror.overview())
    paris, oslo = doc["places"]
    assert (paris["health"], paris["gpus"], paris["allocated"], paris["mfu"]) == \
        ("ok", 16, 8, None)
    assert (oslo["health"], oslo["gpus"], oslo["allocated"]) == ("down", 24, 0)


def test_a_member_without_a_mirror_row_is_down_and_says_so(grid):
    call_command("mirror_grid", "--grid", "eu", "--once", stdout=io.StringIO())
    doc = GridState.objects.get(grid=grid, source="mirrored").doc
    oslo = next(p for p in doc["places"] if p["place"] == "oslo")
    assert oslo["health"] == "down" and "add a SiteMirror" in oslo["note"]


def test_an_unknown_grid_is_refused(db):
    with pytest.raises(CommandError, match="no grid named 'nope'"):
        call_command("mirror_grid", "--grid", "nope", "--once", stdout=io.StringIO())


def test_sigterm_stops_the_loop(grid, monkeypatch):
    writes = []
    real = mirror_grid.grid_state_write

    def write(*, grid, doc):
        writes.append(doc)
        if len(writes) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(grid=grid, doc=doc)

    monkeypatch.setattr(mirror_grid, "grid_state_write", write)
    before = signal.getsignal(signal.SIGTERM)
    call_command("mirror_grid", "--grid", "eu", stdout=io.StringIO())   # returns: it stopped
    assert len(writes) >= 2 and signal.getsignal(signal.SIGTERM) is before
    assert GridState.objects.filter(grid=grid, source="mirrored").count() == 1


# ------------------------------------------------------------------ bad rows refused
BAD = [
    ({"token_env": "eyJhbGciOiJIUzI1NiJ9.e30.x", "kind": "rest",
      "rest_url": "http://ctl:6820"}, "token_env", "never the token itself"),
    ({"slurm_conf": "etc/slurm.conf"}, "slurm_conf", "an absolute path"),
    ({"kind": "rest", "rest_url": "ctl:6820"}, "rest_url", "slurmrestd's URL"),
    ({"kind": "cli", "rest_url": "http://ctl:6820"}, "__all__", "leave the slurmrestd URL"),
    ({"kind": "rest", "rest_url": "http://ctl:6820", "slurm_conf": "/etc/slurm.conf"},
     "__all__", "leave slurm.conf empty"),
    ({"poll_s": 0.5, "timeout_s": 0.2}, "poll_s", "at most once a second"),
    ({"poll_s": 5.0, "timeout_s": 10.0}, "timeout_s", "must not exceed the poll interval"),
    ({"kind": "ssh"}, "kind", "not a valid choice"),
]


@pytest.mark.parametrize(("fields", "where", "message"), BAD, ids=[b[1] + str(i) for i, b in
                                                                   enumerate(BAD)])
def test_a_bad_site_mirror_is_refused_with_one_clear_error(grid, fields, where, message):
    row = SiteMirror(cluster=Cluster.objects.get(name="oslo"), **fields)
    with pytest.raises(ValidationError) as caught:
        row.full_clean()
    errors = caught.value.message_dict
    assert list(errors) == [where] and len(errors[where]) == 1
    assert message in errors[where][0]
    assert not SiteMirror.objects.filter(cluster__name="oslo").exists()


def test_a_good_rest_site_mirror_is_accepted(grid):
    SiteMirror(cluster=Cluster.objects.get(name="oslo"), kind="rest",
               rest_url="https://ctl.example:6820", token_env="SLURM_JWT_OSLO",
               poll_s=30.0, timeout_s=10.0).full_clean()


def test_the_admin_refuses_a_pasted_token_and_saves_nothing(grid, admin_client):
    assert admin_client.get("/admin/twin/sitemirror/").status_code == 200
    oslo = Cluster.objects.get(name="oslo")
    page = admin_client.post("/admin/twin/sitemirror/add/", {
        "cluster": oslo.pk, "kind": "rest", "rest_url": "http://ctl:6820",
        "token_env": "eyJhbGciOiJIUzI1NiJ9.e30.x", "poll_s": "30", "timeout_s": "10"})
    assert page.status_code == 200 and b"never the token itself" in page.content
    assert not SiteMirror.objects.filter(cluster=oslo).exists()


def test_a_rest_site_whose_token_variable_is_unset_is_not_read(monkeypatch):
    monkeypatch.delenv("SLURM_JWT_NOWHERE", raising=False)
    site = SiteSource("oslo", kind="rest", rest_url="http://127.0.0.1:9",
                      token_env="SLURM_JWT_NOWHERE")
    with pytest.raises(SourceError, match="token variable SLURM_JWT_NOWHERE is not set"):
        read_site(site)
