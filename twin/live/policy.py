"""The live twin's scheduling policy, from the settings: a registered policy's name, and for
``slurm`` the cluster's configuration (``CLUSTERTWIN_SLURM_CONF``, the same file the mirror's
Slurm commands read; ``docs/slurm_policy.md``).

A mirror schedules nothing itself (the real cluster's scheduler starts its jobs), but its
forks (what-ifs from now) run by themselves: with a readable ``CLUSTERTWIN_SLURM_CONF`` they
run by the cluster's own rules, whatever ``CLUSTERTWIN_POLICY`` says.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.scheduling.policies import REGISTRY
from scheduler.scheduling.slurm.conf import SlurmConf, SlurmConfError, read_slurm_conf
from twin import app_setting


class LivePolicyError(ValueError):
    """A policy setting the live twin cannot run: one line naming the setting."""


@dataclass(frozen=True)
class LivePolicy:
    name: str
    slurm_conf: SlurmConf | None = None
    slurm_conf_path: str | None = None


def live_policy(*, mirror: bool = False) -> LivePolicy:
    """The policy the live engine (``mirror``: the mirror's forks) schedules with."""
    name = app_setting("POLICY")
    path = app_setting("SLURM_CONF") or None
    if mirror and path:
        name = "slurm"
    if name not in REGISTRY:
        raise LivePolicyError(f"CLUSTERTWIN_POLICY={name!r}: choose one of "
                              f"{', '.join(REGISTRY)}")
    if name != "slurm":
        return LivePolicy(name)
    if not path:
        raise LivePolicyError("CLUSTERTWIN_POLICY=slurm needs CLUSTERTWIN_SLURM_CONF (the "
                              "cluster's slurm.conf)")
    try:
        return LivePolicy(name, read_slurm_conf(path), path)
    except SlurmConfError as exc:
        raise LivePolicyError(f"CLUSTERTWIN_SLURM_CONF: {exc}") from None
