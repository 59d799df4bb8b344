"""Heatmap frames: small, JSON-safe, and faithful to the state they summarise."""

import json

import numpy as np

from scheduler.engine import Engine
from scheduler.fabric import dragonfly_plus, fat_tree
from scheduler.fabric.topology import LINK_KINDS
from scheduler.frames import dashboard_frames, downsample, link_heatmaps, rack_floor
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.workload.jobs import Workload
from tests.core.factories import job, run_engine, small_plan, workload


def test_downsampling_keeps_each_blocks_maximum_within_the_cell_budget():
    z = np.random.default_rng(0).uniform(size=(3192, 32))
    small, rb, cb = downsample(z, max_cells=2048)
    assert small.size <= 2048 and rb > 1 and cb == 1
    blocks = z[: (z.shape[0] // rb) * rb].reshape(-1, rb, 32).max(axis=1)
    assert np.array_equal(small[: z.shape[0] // rb], blocks)
    assert small.max() == z.max()


def test_downsampling_by_mean_gives_shares():
    dead = np.zeros((100, 4))
    dead[0, 0] = 1.0
    small, rb, _ = downsample(dead, max_cells=100, how="mean")
    assert rb == 4 and small[0, 0] == 0.25 and small.sum() == 0.25


def test_link_heatmap_puts_each_uplink_in_its_leaf_row():
    f = fat_tree(4)
    util = np.zeros(f.link_a.size)
    util[0] = 0.75  # first uplink of leaf 0
    frames = link_heatmaps(f, util)
    leaf = next(fr for fr in frames if fr["title"].startswith("leaf-spine"))
    assert leaf["shape"] == [8, 2]
    assert leaf["z"][0][0] == 0.75 and sum(map(sum, leaf["z"])) == 0.75


def test_rack_floor_places_racks_by_hall_row_and_column():
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 40, nodes_per_rack=2),),
                        fabric_kind="fat-tree", fabric_kw={"radix": 16})
    values = np.arange(plan.n_racks, dtype=float)
    frame = rack_floor(plan, values, title="t")
    r = 17
    assert frame["z"][plan.rack_row[r]][plan.rack_col[r]] == r
    assert frame["z"][1][15] == -1 or plan.n_racks > 31  # empty slots are marked


def test_dashboard_frames_are_json_and_small_on_a_live_engine():
    plan = plan_cluster("t", (NodeGroup("H100-SXM", 16),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8})
    engine = Engine(plan, Workload(jobs=()), physics=True, physics_tick_s=60)
    engine.run_until(120)
    frames = dashboard_frames(engine)
    text = json.dumps(frames)
    assert len(text) < 100_000
    assert "status" in frames["racks"] and "power_kw" in frames["racks"]


# ------------------------------------------------------------------ values, by hand
def test_a_dragonfly_plus_global_heatmap_is_the_mean_of_each_group_pairs_links():
    # dragonfly_plus(4, groups=3): 6 leaves with 2 uplinks each (links 0-11), then two global
    # links per group pair (links 12-17, spines 6-11; spine s belongs to group (s - 6) % 3)
    f = dragonfly_plus(4, groups=3)
    glob = slice(12, 18)
    pairs = sorted(zip(f.switch_pod[f.link_a[glob]].tolist(),
                       f.switch_pod[f.link_b[glob]].tolist(), strict=True))
    assert pairs == [(0, 1), (0, 1), (0, 2), (0, 2), (1, 2), (1, 2)]
    util = np.zeros(f.link_a.size)
    util[:12] = np.arange(12) / 100.0                # leaf k's uplinks: 2k/100 and (2k+1)/100
    base = {(0, 1): 0.3, (0, 2): 0.6, (1, 2): 0.8}
    seen: dict = {}
    for k in range(12, 18):                          # the pair's two links: base -/+ 0.1
        pair = tuple(sorted((int(f.switch_pod[f.link_a[k]]), int(f.switch_pod[f.link_b[k]]))))
        util[k] = base[pair] + (-0.1 if pair not in seen else 0.1)
        seen[pair] = True
    frames = {fr["title"]: fr for fr in link_heatmaps(f, util)}
    assert set(frames) == {"leaf-spine links", "global links: group x group"}
    glob_frame = frames["global links: group x group"]
    assert glob_frame["shape"] == [3, 3] and (glob_frame["x"], glob_frame["y"]) == ("group",
                                                                                   "group")
    assert glob_frame["z"] == [[0.0, 0.3, 0.6],
                               [0.3, 0.0, 0.8],
                               [0.6, 0.8, 0.0]]
    leaf = frames["leaf-spine links"]
    assert leaf["shape"] == [6, 2]
    assert leaf["z"] == [[0.0, 0.01], [0.02, 0.03], [0.04, 0.05], [0.06, 0.07], [0.08, 0.09],
                         [0.1, 0.11]]


def _hand_global(fabric, util):
    """Group x group mean utilisation of the global links, by a plain loop over the links."""
    groups = int(fabric.switch_pod.max()) + 1
    cells: dict = {}
    for k in np.flatnonzero(fabric.link_kind == LINK_KINDS.index("global")).tolist():
        a, b = int(fabric.switch_pod[fabric.link_a[k]]), int(fabric.switch_pod[fabric.link_b[k]])
        cells.setdefault((a, b), []).append(float(util[k]))
        cells.setdefault((b, a), []).append(float(util[k]))
    return [[round(sum(cells[i, j]) / len(cells[i, j]), 4) if (i, j) in cells else 0.0
             for j in range(groups)] for i in range(groups)]


def _hand_uplinks(fabric, util):
    """Each leaf's leaf-spine links in link order, one row per leaf."""
    rows: dict = {}
    for k in np.flatnonzero(fabric.link_kind == LINK_KINDS.index("leaf-spine")).tolist():
        rows.setdefault(int(fabric.link_a[k]), []).append(round(float(util[k]), 4))
    return [rows[leaf] for leaf in sorted(rows)]


def test_a_live_dragonfly_plus_engine_draws_its_routed_load_group_by_group():
    # radix 8: groups of 4 leaves x 4 endpoints = two 8-GPU nodes; 8 nodes make 4 groups
    plan = small_plan(8, fabric="dragonfly+", fabric_kw={"radix": 8})
    wl = workload(job(gpus=48, hours=10), job(gpus=16, hours=10))
    engine = run_engine(plan, wl, physics=True, physics_tick_s=600.0, until_h=1)
    big = engine.runs[0]
    groups = np.unique(plan.fabric.switch_pod[plan.fabric.endpoint_leaf[
        plan.node_first_gpu[big.placement.nodes]]])
    assert groups.size == 3  # the 48-GPU gang crosses three groups: global traffic
    util = engine.physics.last_load.utilisation
    frames = {fr["title"]: fr for fr in dashboard_frames(engine)["links"]}
    glob = frames["global links: group x group"]
    assert glob["shape"] == [4, 4] and glob["rows_per_cell"] == glob["cols_per_cell"] == 1
    assert glob["z"] == _hand_global(plan.fabric, util)
    z = np.array(glob["z"])
    assert (z == z.T).all() and not z.diagonal().any()
    assert z[np.ix_(groups, groups)].sum() > 0  # the crossing gang's groups carry load...
    idle = np.setdiff1d(np.arange(4), groups)
    assert not z[idle][:, idle].any()            # ...and no link joins two idle groups
    leaf = frames["leaf-spine links"]
    assert leaf["shape"] == [16, 4] and leaf["z"] == _hand_uplinks(plan.fabric, util)


def test_rack_status_and_power_heatmaps_hold_the_engines_values_per_rack():
    plan = small_plan(8)  # two racks of four nodes, side by side in one row
    wl = workload(job(gpus=32, hours=10), job(gpus=8, hours=10))
    engine = run_engine(plan, wl, physics=True, physics_tick_s=600.0, until_h=1)
    engine.command("drain_node", node=5)
    engine.command("node_down", node=6)
    frames = dashboard_frames(engine)
    status = frames["racks"]["status"]
    assert status["shape"] == [1, 2] and status["z"] == [[0.0, 0.5]]  # 2 of rack 1's 4 out
    power = engine.physics.last_power
    assert frames["racks"]["power_kw"]["z"] == [[round(float(power.rack_kw[0]), 4),
                                                 round(float(power.rack_kw[1]), 4)]]
    assert frames["racks"]["outlet_c"]["z"] == [[round(float(power.outlet_c[0]), 4),
                                                 round(float(power.outlet_c[1]), 4)]]
    assert power.rack_kw[0] != power.rack_kw[1]  # the busy rack draws more than the other
