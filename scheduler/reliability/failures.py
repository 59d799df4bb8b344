"""Failure modes and their rates: failures are normal at this scale.

Calibration (``../shared/reference/figures.md``):

* Llama 3 report (Meta 2024, sec. 3.3.4, Table 5): 419 unexpected and 47 planned interruptions
  in a 54-day (1,296 h) snapshot of pre-training on 16,384 H100 GPUs (2,048 nodes).  Each cause's
  count is divided by the units that can cause it and the hours the job was UP
  (:data:`LLAMA3_UP_HOURS`, 1,268.05 h: the counts are interruptions, which only a running job
  can suffer): per GPU (16,384) for GPU causes, per NIC (16,384) for NICs, per node (2,048) for
  host causes, per node-hour of running training for software causes and planned maintenance
  (they come with the job, not the part).  The engine draws these rates in calendar time; the
  hits on a job already down are counted apart (``while_down``), so a 54-day run observes the
  published counts on average (``bench/llama3_interruptions.py``).
* "Network switch/cable" (35) is split between NIC-to-leaf links and leaf switches by the
  per-unit monthly failure shares of Alibaba HPN (SIGCOMM 2024): 0.057 % of NIC-ToR links and
  0.051 % of ToRs per month.  With the job's 16,384 links and 1,024 leaves (16 GPUs a leaf in
  Meta's 3,072-GPU zones) that is 33 links and 2 leaves.
* Spine switches and switch-to-switch links: HPN's monthly shares taken as they are.
* PDU, cooling loop and storage-system rates, detection delays and repair times are
  assumptions (marked ``assumed``); no public source gives them for this class of cluster.

These are the ``llama3`` profile; other fleets' rates are data files under
:mod:`scheduler.reliability.profiles` (``docs/failures.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LLAMA3_HOURS = 54 * 24.0
LLAMA3_UP_HOURS = 1268.05
"""The exposure of Table 5's counts: hours the Llama 3 job was up (could be interrupted) in the
1,296-h snapshot.  A fit, not a published figure: 1,296 h less the hang of each of the 466
interruptions until it was detected, with this module's detection times weighted by the
table's counts (sum of count x ``detect_s`` = 100,620 s = 27.95 h).  A failure while the job
hangs is not a new interruption, so the table saw failures only over these hours; the restart
itself is up-time here as in the engine (a failure during it interrupts again).  Checked by
``tests/core/test_failures.py`` and measured by ``bench/llama3_interruptions.py``."""
LLAMA3_GPUS = 16384
LLAMA3_NODES = 2048
HPN_MONTH_H = 730.0

COMPONENTS = ("gpu", "host", "nic", "endpoint_link", "leaf", "spine", "fabric_link", "pdu",
              "cooling", "storage", "software", "planned", "job")
"""What fails.  ``software`` and ``planned`` are per node-hour of running training; ``job`` is
per running training job and hour, whatever its size (user, data and framework faults)."""

UNITS = {
    "gpu": "gpu", "host": "node", "nic": "nic", "endpoint_link": "link", "leaf": "leaf",
    "spine": "spine", "fabric_link": "link", "pdu": "pdu", "cooling": "row",
    "storage": "system", "software": "node", "planned": "node", "job": "job",
}
"""The unit each component's rate is counted per (a profile file names it)."""

EFFECTS = {
    "gpu": "interrupt", "host": "interrupt", "nic": "interrupt", "endpoint_link": "interrupt",
    "software": "interrupt", "planned": "interrupt", "leaf": "interrupt", "pdu": "interrupt",
    "job": "interrupt",
    "spine": "slow", "fabric_link": "slow", "cooling": "throttle", "storage": "slow_storage",
}
"""Blast radius: interrupt the jobs on the nodes it takes down, slow the jobs that cross it
(ECMP reroutes around a spine or link), throttle the racks it cools, or slow storage."""


@dataclass(frozen=True)
class FailureMode:
    """One root cause.

    Parameters
    ----------
    cause : str
        Name as in the report's ``by_cause``.
    component : str
        One of :data:`COMPONENTS`.
    per_hour : float
        Failures per unit per hour.
    detect_s : float
        From the failure until the job is stopped and its nodes evicted, s.
    repair_h : float
        Mean time to repair or replace the part, h (log-normal, shape 0.5).
    planned : bool
    source : str
    """

    cause: str
    component: str
    per_hour: float
    detect_s: float
    repair_h: float
    planned: bool = False
    source: str = "Llama 3 Table 5"


def _llama(count: float, units: float) -> float:
    """Table 5's ``count`` over ``units`` and the job's up-hours, per unit-hour."""
    return count / (units * LLAMA3_UP_HOURS)


# detection: Xid / health-check driven for hardware (about 2 min, assumed); NCCL watchdog at
# PyTorch's default 10-minute timeout; silent data corruption found by loss-spike or
# checksum checks much later (1 h, assumed).  Repairs: assumed.
_G, _N = LLAMA3_GPUS, LLAMA3_NODES
MODES: tuple[FailureMode, ...] = (
    FailureMode("faulty_gpu", "gpu", _llama(148, _G), 120, 72),
    FailureMode("gpu_hbm3_memory", "gpu", _llama(72, _G), 120, 72),
    FailureMode("gpu_sram_memory", "gpu", _llama(19, _G), 120, 72),
    FailureMode("gpu_system_processor", "gpu", _llama(17, _G), 120, 72),
    FailureMode("gpu_thermal_interface", "gpu", _llama(6, _G), 120, 24),
    FailureMode("silent_data_corruption", "gpu", _llama(6, _G), 3600, 72),
    FailureMode("host_maintenance", "host", _llama(32, _N), 120, 8),
    FailureMode("ssd", "host", _llama(3, _N), 120, 8),
    FailureMode("power_supply", "host", _llama(3, _N), 60, 8),
    FailureMode("server_chassis", "host", _llama(2, _N), 120, 24),
    FailureMode("io_expansion_board", "host", _llama(2, _N), 120, 24),
    FailureMode("cpu", "host", _llama(2, _N), 120, 24),
    FailureMode("system_memory", "host", _llama(2, _N), 120, 8),
    FailureMode("nic", "nic", _llama(7, _G), 120, 4),
    FailureMode("network_cable", "endpoint_link", _llama(33, _G), 120, 4,
                source="Llama 3 Table 5 split by Alibaba HPN link/ToR shares"),
    FailureMode("leaf_switch", "leaf", _llama(2, 1024), 120, 8,
                source="Llama 3 Table 5 split by Alibaba HPN link/ToR shares"),
    FailureMode("software_bug", "software", _llama(54, _N), 600, 0.25),
    FailureMode("nccl_watchdog", "software", _llama(7, _N), 600, 0.25),
    FailureMode("dependency", "software", _llama(2, _N), 300, 0.25),
    FailureMode("planned_maintenance", "planned", _llama(47, _N), 0, 0.5, planned=True),
    FailureMode("spine_switch", "spine", 0.00051 / HPN_MONTH_H, 60, 8, source="Alibaba HPN"),
    FailureMode("fabric_link", "fabric_link", 0.00057 / HPN_MONTH_H, 60, 4,
                source="Alibaba HPN"),
    FailureMode("pdu", "pdu", 1.0 / (1056 * LLAMA3_HOURS), 60, 12,  # racks: calendar hours
                source="Llama 3 Table 5 lists none in 54 days over 1,056 racks: rate set to 1"),
    FailureMode("cooling_loop", "cooling", 5e-6, 300, 6, source="assumed"),
    FailureMode("storage_slowdown", "storage", 2e-4, 60, 4, source="assumed"),
)
BY_CAUSE = {m.cause: m for m in MODES}


def unit_counts(plan) -> dict[str, int]:
    """Units of every component in a plan (software and planned: nodes; job: the most gangs
    that can run at once, one per GPU, of which the running ones are hit)."""
    fabric = plan.fabric
    tiers = np.bincount(fabric.switch_tier, minlength=3)
    return {
        "gpu": plan.n_gpus, "host": plan.n_nodes, "nic": plan.n_gpus,
        "endpoint_link": plan.n_gpus, "leaf": int(tiers[0]), "spine": int(tiers[1] + tiers[2]),
        "fabric_link": int(fabric.link_a.size), "pdu": plan.n_racks,
        "cooling": int(np.unique(plan.rack_hall * 1000 + plan.rack_row).size),
        "storage": max(1, sum(1 for s in plan.storage if s.tier == "central")),
        "software": plan.n_nodes, "planned": plan.n_nodes, "job": plan.n_gpus,
    }


def job_failure_rate(nodes: int, gpus: int, modes=MODES) -> float:
    """Interruptions per hour expected for a gang on ``nodes`` nodes of ``gpus`` GPUs.

    Counts the causes that stop a job on its own nodes (GPU, host, NIC, NIC link, software,
    planned) and the job-level ones (the same rate at any size); shared switches and PDUs are
    left out, so this is the job's own MTTF.

    >>> round(job_failure_rate(2048, 16384) * LLAMA3_UP_HOURS)  # Llama 3: 466 less 2 leaves
    464
    """
    per_gpu = sum(m.per_hour for m in modes if m.component in ("gpu", "nic", "endpoint_link"))
    per_node = sum(m.per_hour for m in modes if m.component in ("host", "software", "planned"))
    per_job = sum(m.per_hour for m in modes if m.component == "job")
    return gpus * per_gpu + nodes * per_node + per_job
