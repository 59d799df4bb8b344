"""Heatmap frames: small, JSON-safe, and faithful to the state they summarise."""

import json

import numpy as np

from scheduler.engine import Engine
from scheduler.frames import dashboard_frames, downsample, link_heatmaps, rack_floor
from scheduler.hardware.cluster import NodeGroup, plan_cluster
from scheduler.physics.fabric import fat_tree
from scheduler.workload.jobs import Workload


def test_downsampling_keeps_the_mean_and_the_cell_budget():
    z = np.random.default_rng(0).uniform(size=(3192, 32))
    small, rb, cb = downsample(z, max_cells=2048)
    assert small.size <= 2048 and rb > 1
    assert abs(small[: z.shape[0] // rb].mean() - z[: (z.shape[0] // rb) * rb].mean()) < 1e-9


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
