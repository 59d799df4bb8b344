"""One world after every drill kind (issue 27, item 3).

Each test applies one kind of drill (:data:`scheduler.control.drills.KINDS`) to a small engine
(fabric and power physics on), writes the engine's live state as the driver does, and reads
every page and API that shows a switch, a link, a node or a rack: the switch pages with their
ports, the node pages with their cabling, the node and rack APIs, the admin's live columns,
the link and rack heatmaps of the frame and their full-resolution zoom. Each must agree with
the engine's own state (failed switches and links, nodes down, GPUs out), the drilled component
must show failed, and after the engine ran past the repair everything must be back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np
import pytest
from django.test import Client

from scheduler.control.drills import KINDS, end_drill, run_drill
from scheduler.engine import Engine
from scheduler.fabric.topology import LINK_KINDS
from scheduler.hardware.cluster import CloudPoolSpec, NodeGroup, StorageSpec, plan_cluster
from scheduler.live import live_frame, live_placement
from scheduler.sim import Kind
from tests import frames
from tests.core.factories import HOUR, job, service, workload
from twin import models as m
from twin.inventory.adapter import cluster_plan_write
from twin.live.services import live_state_write

pytestmark = pytest.mark.django_db

DETECTED_S = 200.0
"""Simulated seconds after a drill by which its failure was detected (drills detect in 120 s)."""


def tiny_plan():
    """12 nodes (8 H100, 4 MI300X with a spare) on a radix-8 three-tier fat-tree (24 leaves,
    24 spines, 16 cores), a central file system and one cloud pool."""
    return plan_cluster("tiny", (NodeGroup("H100-SXM", 8), NodeGroup("MI300X", 4, spares=1)),
                        fabric_kind="fat-tree", fabric_kw={"radix": 8},
                        storage=(StorageSpec("pfs", "central", 1000.0, 10.0, 5.0),),
                        cloud_pools=(CloudPoolSpec("aws", "us-east-1", "H100-SXM", 64, 4.0),))


@dataclass
class World:
    engine: Engine
    cluster: object
    client: Client
    admin: Client
    seq: int = 0
    pages: dict = field(default_factory=dict)

    def publish(self) -> None:
        """Write the engine's frame and placement as the live driver does."""
        self.seq += 1
        e = self.engine
        live_state_write(seq=self.seq, t_sim=e.now,
                         frame=frames.frame(**json.loads(json.dumps(live_frame(e)))),
                         health="ok", last_error="", speed=60.0, paused=False,
                         inventory=f"test:{self.cluster.pk}",
                         placement=json.loads(json.dumps(live_placement(e))))

    def html(self, path: str) -> str:
        response = self.client.get(path)
        assert response.status_code == 200, path
        return response.content.decode()

    def json(self, path: str) -> dict:
        response = self.client.get(path)
        assert response.status_code == 200, (path, response.content[:200])
        return response.json()

    def hostnames(self) -> list[str]:
        """Hostnames in engine order."""
        return list(m.Node.objects.filter(rack__hall__site__cluster=self.cluster)
                    .order_by("id").values_list("hostname", flat=True))

    def switch_names(self) -> dict[int, str]:
        return dict(m.Switch.objects.filter(cluster=self.cluster)
                    .values_list("index", "name"))


@pytest.fixture
def world(db, client, demo_users):
    plan = tiny_plan()
    cluster = cluster_plan_write(plan)
    wl = workload(job(gpus=16, hours=8), job(gpus=32, hours=8), job(gpus=8, hours=8),
                  services=(service(gpus_per_replica=2, peak_replicas=1.0,
                                    trough_fraction=1.0),))
    e = Engine(plan, wl, seed=3, physics=True)
    e.run_until(1.0 * HOUR)
    client.force_login(demo_users["staff"])
    admin = Client()
    admin.force_login(demo_users["admin"])
    return World(e, cluster, client, admin)


# ----------------------------------------------------------------- the engine's own answers
def failed_switches(e) -> set[int]:
    return {int(k) for k, n in e.reliability.failed_switches.items() if n > 0}


def links_out(e) -> np.ndarray:
    """Per switch link: out itself, or through a failed switch at either end."""
    f = e.plan.fabric
    out = np.zeros(f.link_a.size, dtype=bool)
    out[[k for k, n in e.reliability.failed_links.items() if n > 0]] = True
    failed = np.zeros(f.n_switches(), dtype=bool)
    failed[sorted(failed_switches(e))] = True
    return out | failed[f.link_a] | failed[f.link_b]


def node_status(e, n: int) -> str:
    s = e.state
    return ("down" if not s.node_up[n] else "drained" if s.node_drained[n]
            else "spare" if s.node_spare[n] else "up")


def nic_out(e, gpu: int) -> bool:
    """A NIC link is out when its GPU is, or its leaf switch failed."""
    e_leaf = int(e.plan.fabric.endpoint_leaf[gpu])
    return (not e.state.gpu_up[gpu]) or e_leaf in failed_switches(e)


# ----------------------------------------------------------------- what the pages say
def status_span(html: str, element_id: str) -> str:
    found = re.search(rf'<span id="{element_id}" class="status status-[\w-]+">(.*?)</span>', html)
    assert found, element_id
    return found.group(1)


def entity_state(html: str) -> str:
    found = re.search(r'id="entity-state"><span class="status status-[\w-]+">(.*?)</span>', html)
    assert found
    return found.group(1)


def table(html: str, table_id: str) -> str:
    start = html.index(f'id="{table_id}"')
    return html[start:html.index("</table>", start)]


def live_cell(row: str) -> str:
    found = re.search(r'<td class="link-live"><span class="status status-[\w-]+">(.*?)</span>',
                      row)
    assert found, row
    return found.group(1)


def check_switch_page(w: World, s: int) -> str:
    """Switch ``s``'s page against the engine; returns the status its state line shows."""
    e, f = w.engine, w.engine.plan.fabric
    html = w.html(f"/switches/{s}/")
    failed = s in failed_switches(e)
    assert status_span(html, "switch-live") == ("down" if failed else "up"), s
    out = links_out(e)
    any_down = False
    for row in re.findall(r'<tr id="link-\d+">(.*?)</tr>', table(html, "switch-links"), re.S):
        live = live_cell(row)
        node_link = re.search(r'href="/nodes/(\d+)/#gpu-(\d+)"', row)
        if node_link:
            n, port = map(int, node_link.groups())
            expected = nic_out(e, int(e.state.node_first_gpu[n]) + port)
        else:
            far = int(re.search(r'href="/switches/(\d+)/"', row).group(1))
            between = ((f.link_a == s) & (f.link_b == far)) | ((f.link_a == far) & (f.link_b == s))
            assert between.any(), (s, far)
            expected = bool(out[between].any())
        assert live == ("down" if expected else "up"), (s, row)
        any_down |= expected
    state = entity_state(html)
    assert state == ("down" if failed else "degraded" if any_down else "up"), s
    return state


def check_node_page(w: World, n: int) -> None:
    e = w.engine
    html = w.html(f"/nodes/{n}/")
    status = node_status(e, n)
    assert status_span(html, "node-live") == status, n
    first = int(e.state.node_first_gpu[n])
    rows = re.findall(r'<tr id="port-(\d+)">(.*?)</tr>', table(html, "node-links"), re.S)
    assert len(rows) == int(e.state.node_gpus[n])
    for port, row in rows:
        gpu = first + int(port)
        leaf = int(re.search(r'href="/switches/(\d+)/"', row).group(1))
        assert leaf == int(e.plan.fabric.endpoint_leaf[gpu])
        assert live_cell(row) == ("down" if nic_out(e, gpu) else "up"), (n, port)
    assert w.json(f"/api/nodes/{n}")["live_status"] == status


def check_racks(w: World) -> None:
    """The rack drill-down (``/api/racks/<id>``) and the frame's rack floor."""
    e = w.engine
    plan = e.plan
    for r in range(plan.n_racks):
        rack = w.json(f"/api/racks/{r}")
        assert {n["id"]: n["live_status"] for n in rack["nodes"]} == {
            int(n): node_status(e, int(n)) for n in np.flatnonzero(plan.node_rack == r)}
    out = ~e.state.node_up | e.state.node_drained
    share = np.bincount(plan.node_rack, weights=out, minlength=plan.n_racks) / np.bincount(
        plan.node_rack, minlength=plan.n_racks)
    z = np.array(w.json("/api/state")["frame"]["heatmaps"]["racks"]["status"]["z"])
    assert sorted(z[z >= 0].round(4).tolist()) == sorted(share.round(4).tolist())


def check_heatmaps(w: World) -> None:
    """Every link tier's heatmap counts and places the links out; the zoom shows each."""
    e, f = w.engine, w.engine.plan.fabric
    out = links_out(e)
    heatmaps = {h.get("tier", "global"): h
                for h in w.json("/api/state")["frame"]["heatmaps"].get("links", [])}
    assert heatmaps, "the frame has no link heatmaps"
    for code, name in enumerate(LINK_KINDS):
        sel = np.flatnonzero(f.link_kind == code)
        if sel.size == 0:
            continue
        heatmap = heatmaps[name]
        assert heatmap["links_down"] == int(out[sel].sum()), name
        assert (np.array(heatmap["down"]) > 0).sum() == int(out[sel].sum()), name  # unmerged
        zoom = w.json(f"/api/heatmap?tier={name}&first=0&last={f.n_switches() - 1}")
        assert zoom["links_down"] == int(out[sel].sum()), name
        down_rows = {zoom["ids"][i] for i, row in enumerate(zoom["down"]) if any(row)}
        assert down_rows == {int(a) for a in f.link_a[sel[out[sel]]]}, name


def admin_rows(w: World, path: str, key: str) -> dict[str, str]:
    """An admin changelist's live column by the row's ``key`` column."""
    response = w.admin.get(path)
    assert response.status_code == 200, path
    html = response.content.decode()
    rows = re.findall(r"<tr>(.*?)</tr>", html[html.index('id="result_list"'):], re.S)
    out = {}
    for row in rows:
        name = re.search(rf'class="field-{key}"[^>]*>(?:<a [^>]*>)?([^<]*)', row)
        live = re.search(r'class="field-live_engine">([^<]*)<', row)
        if name and live:
            out[name.group(1).strip()] = live.group(1).strip()
    return out


def check_admin(w: World) -> None:
    e = w.engine
    switches = admin_rows(w, "/admin/twin/switch/", "name")
    names = w.switch_names()
    assert switches == {names[i]: "down" if i in failed_switches(e) else "up"
                        for i in range(e.plan.fabric.n_switches())}
    nodes = admin_rows(w, "/admin/twin/node/", "hostname")
    assert len(nodes) == e.plan.n_nodes
    for n, host in enumerate(w.hostnames()):
        expected = {"up": "in service"}.get(node_status(e, n), node_status(e, n))
        assert nodes[host].split(";")[0] == expected, host


def check_world(w: World, *, switches=(), nodes=()) -> dict[int, str]:
    """Every page against the engine; returns each switch page's state line."""
    w.publish()
    shown = {s: check_switch_page(w, s) for s in sorted(set(switches))}
    for n in sorted(set(nodes)):
        check_node_page(w, n)
    check_racks(w)
    check_heatmaps(w)
    check_admin(w)
    return shown


# ----------------------------------------------------------------- drills and their repair
def drilled(w: World, kind: str, target) -> dict:
    result = run_drill(w.engine, kind, target=target, drill_id=1)
    w.engine.run_until(w.engine.now + DETECTED_S)
    return result


def repaired(w: World) -> None:
    """Run the engine until every pending repair is done (a drill's among them)."""
    due = [h.time for h in w.engine.kernel.pending(Kind.REPAIR)]
    assert due, "the drill left no repair to wait for"
    w.engine.run_until(max(due) + 1.0)


def neighbours(e, switch: int) -> set[int]:
    f = e.plan.fabric
    return ({int(b) for b in f.link_b[f.link_a == switch]}
            | {int(a) for a in f.link_a[f.link_b == switch]})


def assert_all_clear(w: World) -> None:
    e = w.engine
    assert not failed_switches(e) and not links_out(e).any()
    assert e.state.node_up.all() and e.state.gpu_up.all()


def busy_node(e) -> int:
    """A node a training gang runs on (the drills then hit a job)."""
    busy = [int(n) for r in e.running.values() for n in r.placement.nodes]
    assert busy
    return busy[0]


def test_the_drills_tested_here_are_every_kind_there_is():
    assert set(KINDS) == {*NODE_KINDS, "leaf_switch", "spine_switch", "optical_link",
                          "rack_power", "cooling", "storage_slowdown", *NO_COMPONENT_DOWN}


def test_a_leaf_switch_drill_fails_the_switch_its_ports_links_nodes_and_heatmap_cells(world):
    e, f = world.engine, world.engine.plan.fabric
    node = busy_node(e)
    leaf = int(f.endpoint_leaf[e.state.node_first_gpu[node]])
    around = neighbours(e, leaf) | {leaf}
    cabled = {int(n) for n in np.unique(e.state.gpu_node[f.endpoint_leaf[:e.state.n_gpus]
                                                          == leaf])}
    drilled(world, "leaf_switch", leaf)
    assert leaf in failed_switches(e) and node in cabled and not e.state.node_up[node]
    shown = check_world(world, switches=around, nodes=cabled)
    assert shown[leaf] == "down"
    assert all(shown[s] == "degraded" for s in neighbours(e, leaf))  # their link to it is out
    html = world.html(f"/nodes/{node}/")
    assert "failed)" in table(html, "node-links")  # the cause beside each port on it
    links = admin_rows(world, f"/admin/twin/link/?q={world.switch_names()[leaf]}", "id")
    assert "down, its switch failed" in links.values()  # its NIC links; its uplinks: down
    assert set(links.values()) <= {"down, its switch failed", "down"}
    repaired(world)
    shown = check_world(world, switches=around, nodes=cabled)
    assert set(shown.values()) == {"up"}
    assert_all_clear(world)


def test_a_spine_switch_drill_fails_the_spine_and_every_link_to_it(world):
    e, f = world.engine, world.engine.plan.fabric
    result = drilled(world, "spine_switch", 0)
    spine = int(np.flatnonzero(f.switch_tier > 0)[result["target"]])
    around = neighbours(e, spine) | {spine}
    shown = check_world(world, switches=around)
    assert shown[spine] == "down" and len(around) > 1
    assert all(shown[s] == "degraded" for s in neighbours(e, spine))
    repaired(world)
    assert set(check_world(world, switches=around).values()) == {"up"}
    assert_all_clear(world)


def test_an_optical_link_drill_fails_the_link_on_both_switches_and_its_heatmap_cell(world):
    e, f = world.engine, world.engine.plan.fabric
    link = 5
    ends = {int(f.link_a[link]), int(f.link_b[link])}
    drilled(world, "optical_link", link)
    assert links_out(e).sum() == 1
    shown = check_world(world, switches=ends)
    assert set(shown.values()) == {"degraded"}  # each end is up with one link out
    repaired(world)
    assert set(check_world(world, switches=ends).values()) == {"up"}
    assert_all_clear(world)


NODE_KINDS = ("node", "accelerator", "nic")
"""Kinds that take one node out (a GPU's or NIC's failure takes its node down until repaired)."""


@pytest.mark.parametrize("kind", NODE_KINDS)
def test_a_node_drill_takes_the_node_out_on_every_page_and_brings_it_back(world, kind):
    e = world.engine
    node = busy_node(e)
    target = node if kind == "node" else int(e.state.node_first_gpu[node]) + 1
    leaves = {int(x) for x in e.plan.fabric.endpoint_leaf[e.state.gpu_node == node]}
    drilled(world, kind, target)
    assert node_status(e, node) == "down"
    check_world(world, switches=leaves, nodes=[node])
    repaired(world)
    check_world(world, switches=leaves, nodes=[node])
    assert node_status(e, node) in ("up", "spare")  # a repaired node may refill the spares
    assert_all_clear(world)


def test_a_rack_power_drill_takes_every_node_of_the_rack_out_and_back(world):
    e = world.engine
    rack = int(e.plan.node_rack[busy_node(e)])
    nodes = np.flatnonzero(e.plan.node_rack == rack).tolist()
    drilled(world, "rack_power", rack)
    assert all(node_status(e, n) == "down" for n in nodes)
    check_world(world, nodes=nodes)
    assert world.json(f"/api/racks/{rack}")["live"]["status"] == 1.0  # the floor: all out
    repaired(world)
    check_world(world, nodes=nodes)
    assert world.json(f"/api/racks/{rack}")["live"]["status"] == 0.0
    assert_all_clear(world)


def test_a_cooling_drill_throttles_its_racks_and_lets_them_go_after_repair(world):
    e = world.engine
    drilled(world, "cooling", 0)
    check_world(world, nodes=range(e.plan.n_nodes))
    power = world.json("/api/state")["frame"]["power"]
    assert power["throttled_gpus"] == e.physics.last_power.throttled_gpus > 0
    repaired(world)
    check_world(world, nodes=range(e.plan.n_nodes))
    assert world.json("/api/state")["frame"]["power"]["throttled_gpus"] == 0
    assert_all_clear(world)


def test_a_storage_slowdown_degrades_the_file_system_until_it_ends(world):
    drilled(world, "storage_slowdown", None)
    check_world(world)
    assert admin_rows(world, "/admin/twin/storagesystem/", "name") == {
        "pfs": "degraded, 50% of its bandwidth left"}
    repaired(world)
    check_world(world)
    assert admin_rows(world, "/admin/twin/storagesystem/", "name") == {"pfs": "up"}
    assert_all_clear(world)


NO_COMPONENT_DOWN = ("inference_surge", "supply_cut", "cloud_region_loss", "power_cap")
"""Kinds that fail no switch, link, node or rack: every page must keep saying so."""


@pytest.mark.parametrize("kind", NO_COMPONENT_DOWN)
def test_a_drill_that_fails_no_component_leaves_every_page_up(world, kind):
    e = world.engine
    leaf = int(e.plan.fabric.endpoint_leaf[e.state.node_first_gpu[busy_node(e)]])
    run_drill(e, kind, target=None, drill_id=1)
    e.run_until(e.now + DETECTED_S)
    shown = check_world(world, switches={leaf}, nodes=range(e.plan.n_nodes))
    assert shown == {leaf: "up"}
    assert_all_clear(world)
    if kind in ("power_cap", "cloud_region_loss"):
        end_drill(e, 1)
    e.run_until(e.now + 2 * HOUR)  # past a surge's end
    assert check_world(world, switches={leaf}) == {leaf: "up"}
    assert_all_clear(world)


def test_a_failed_leaf_shows_on_the_link_heatmaps_before_any_load_was_routed(db, client,
                                                                              demo_users):
    plan = tiny_plan()
    cluster = cluster_plan_write(plan)
    e = Engine(plan, workload(job(gpus=2, hours=8)), seed=3, physics=True)  # on one leaf
    e.run_until(1.0 * HOUR)
    assert e.physics.last_load is None
    client.force_login(demo_users["staff"])
    w = World(e, cluster, client, client)
    w.publish()
    assert "links" not in w.json("/api/state")["frame"]["heatmaps"]  # "no link load yet"
    drilled(w, "leaf_switch", 3)
    w.publish()
    check_heatmaps(w)
    assert w.json("/api/state")["frame"]["heatmaps"]["links"][0]["links_down"] == len(
        neighbours(e, 3))
    repaired(w)
    w.publish()
    assert "links" not in w.json("/api/state")["frame"]["heatmaps"]  # no load, none out
    assert_all_clear(w)
