"""The live twin schedules with the policy its settings name; ``slurm`` by the cluster's own
slurm.conf, which the mirror's forks also follow."""

from __future__ import annotations

import pytest
from django.core import checks

from scheduler.hardware.cluster import NodeGroup, plan_cluster
from twin.config.checks import live_policy_check
from twin.live.policy import LivePolicyError, live_policy
from twin.mirror.poller import MirrorPoller

CONF = ("SchedulerParameters=bf_interval=5\n"
        "NodeName=gpu[1-4] Gres=gpu:8 CPUs=64 RealMemory=512000\n"
        "PartitionName=batch Nodes=ALL Default=YES\n")


@pytest.fixture
def knobs(settings):
    def set_(**kw):
        settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, **kw}
    set_(ENGINE_MODE="off", POLICY="default", SLURM_CONF="")
    return set_


def test_the_default_policy_needs_nothing(knobs):
    assert live_policy().name == "default"
    assert live_policy_check() == []


def test_the_slurm_policy_reads_the_clusters_slurm_conf(knobs, tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF)
    knobs(POLICY="slurm", SLURM_CONF=str(conf))
    policy = live_policy()
    assert policy.name == "slurm" and policy.slurm_conf.bf_interval_s == 5.0
    assert live_policy_check() == []


@pytest.mark.parametrize("knob, message", [
    ({"POLICY": "best"}, "CLUSTERTWIN_POLICY='best': choose one of"),
    ({"POLICY": "slurm"}, "CLUSTERTWIN_POLICY=slurm needs CLUSTERTWIN_SLURM_CONF"),
    ({"POLICY": "slurm", "SLURM_CONF": "/nonexistent/slurm.conf"},
     "CLUSTERTWIN_SLURM_CONF: slurm configuration '/nonexistent/slurm.conf' does not exist"),
])
def test_a_policy_the_twin_cannot_run_is_one_startup_error(knobs, knob, message):
    knobs(**knob)
    with pytest.raises(LivePolicyError, match=message.replace("(", r"\(")):
        live_policy()
    [error] = live_policy_check()
    assert error.level == checks.ERROR and error.id == "clustertwin.E003"
    assert error.msg.startswith(message)


def test_the_mirrors_forks_follow_the_clusters_slurm_conf(knobs, tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF)
    knobs(SLURM_CONF=str(conf))  # the policy setting is the twin's own: the mirror follows Slurm
    four = plan_cluster("m", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree",
                        fabric_kw={"radix": 8})
    chosen = MirrorPoller._fork_policy(four)
    assert chosen["policy"] == "slurm" and chosen["slurm_conf"].partitions[0].name == "batch"
    # a slurm.conf of another cluster (8 nodes here, 4 there) is not applied
    eight = plan_cluster("m", (NodeGroup("H100-SXM", 8),), fabric_kind="fat-tree",
                         fabric_kw={"radix": 8})
    assert MirrorPoller._fork_policy(eight) == {}
