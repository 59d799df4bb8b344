"""The alert rules the twin ships: thresholds (most assumed, each said so), descriptions and
runbook sections (``docs/runbooks.md``, served at ``/alerts/runbooks/``).

``0014_alerts`` creates them from :data:`DEFAULT_RULES` (with the fields it knew);
``0017_alerts_oncall`` adds any missing and fills the newer fields (:func:`rules_upgrade`);
``twin.alerts.rules.rules_seed`` restores missing ones.  Every rule resolves only after its
figure has been clear for ``resolve_for_s`` (or ``for_s``), past ``resolve_threshold`` where
one is given.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass

from scheduler.reliability.failure_engine import LEMON_FAILURES, LEMON_WINDOW_S

ETTR_FLOOR = 0.90
"""Effective training time ratio below which a run is worse than published large runs: the
Llama 3 report (Dubey et al. 2024, sec. 3.3.4) and MegaScale (NSDI 2024) both report more than
90 % effective training time.  Override the rule in the admin for a different target."""
MFU_FLOOR = 0.19
"""Half the low end of the Llama 3 report's 38-43 % BF16 MFU (Dubey et al. 2024, Table 4): a
running job below it is worth a look.  The factor one half is assumed."""
GPU_TEMP_LIMIT_C = 85.0
"""Assumed: a GPU temperature to warn at, below the throttle points of data-centre GPUs (no
published figure was checked for every model the mirror may report)."""
RACK_OUTLET_LIMIT_C = 45.0  # assumed: a hot-aisle outlet temperature worth a warning
DOWN_PCT_LIMIT = 2.0  # assumed: share of the fleet down, %
QUEUE_WAIT_LIMIT_H = 24.0  # assumed: the longest queue wait, simulated h
LINK_SATURATION = 0.95  # assumed: a link heatmap cell this busy (0-1) is saturated
XID_STORM_PER_H = 60.0  # assumed: XID errors per simulated hour across the mirrored fleet
SOURCE_LAG_LIMIT_S = 120.0  # assumed: a mirror source quiet this long (wall s) is lagging
GPU_XID_STORM = 3  # assumed: XID events on one GPU within GPU_XID_WINDOW_S
GPU_XID_WINDOW_S = 3600.0
LINK_FLAPS = 4  # assumed: two down/up cycles of one link or switch within LINK_FLAP_WINDOW_S
LINK_FLAP_WINDOW_S = 3600.0
THROTTLED_S = 900.0  # assumed: a rack row or rack throttled this long costs real throughput
NODE_FAILURES = LEMON_FAILURES - 1
"""One failure short of the failure engine's quarantine (``LEMON_FAILURES`` within
``LEMON_WINDOW_S``), within half its window: pull the node before it takes a third job down."""
NODE_FAILURE_WINDOW_S = LEMON_WINDOW_S / 2


@dataclass(frozen=True)
class ShippedRule:
    name: str
    figure: str
    comparison: str
    threshold: float
    for_s: float
    severity: str
    description: str
    window_s: float | None = None
    resolve_threshold: float | None = None
    resolve_for_s: float | None = None

    @property
    def runbook_url(self) -> str:
        return f"/alerts/runbooks/#{self.name}"

    def fields(self) -> dict:
        keys = ("name", "figure", "comparison", "threshold", "for_s", "severity",
                "description", "window_s", "resolve_threshold", "resolve_for_s")
        return {**dict(zip(keys, astuple(self), strict=True)), "runbook_url": self.runbook_url}


SHIPPED = [
    ShippedRule("gpus-down", "util.down_pct", ">", DOWN_PCT_LIMIT, 600.0, "warning",
                "More of the fleet is down than spares and repairs keep up with: jobs wait "
                "for GPUs (threshold assumed).", resolve_threshold=1.5),
    ShippedRule("ettr-low", "ettr", "<", ETTR_FLOOR, 3600.0, "warning",
                "Effective training time is below the >90 % published by Llama 3 and "
                "MegaScale: failures and restarts eat the fleet's training time.",
                resolve_threshold=0.92),
    ShippedRule("job-mfu-low", "jobs.mfu", "<", MFU_FLOOR, 3600.0, "info",
                "A running job's MFU is under half the Llama 3 report's 38 %: it is slowed "
                "(stragglers, a spread placement, throttling, data stalls).",
                resolve_threshold=0.21),
    ShippedRule("queue-wait-long", "queue.wait_h_max", ">", QUEUE_WAIT_LIMIT_H, 0.0, "warning",
                "A job has waited in the queue for more than a day (threshold assumed).",
                resolve_for_s=1800.0),
    ShippedRule("tenant-over-quota", "tenants.quota_ratio", ">", 1.0, 1800.0, "warning",
                "A tenant has held more GPUs than its quota for half an hour: it runs on "
                "borrowed GPUs that their owners' jobs will preempt.",
                resolve_threshold=0.95),
    ShippedRule("link-saturated", "links.util_max", ">=", LINK_SATURATION, 600.0, "warning",
                "A fabric link (heatmap cell) is saturated: jobs crossing it wait on "
                "communication (threshold assumed).", resolve_threshold=0.85),
    ShippedRule("rack-power-capped", "power.throttled_gpus", ">", 0.0, 300.0, "warning",
                "A rack's demand exceeds its power budget: its GPUs are throttled."),
    ShippedRule("rack-outlet-hot", "racks.outlet_max_c", ">", RACK_OUTLET_LIMIT_C, 300.0,
                "warning", "A rack's outlet air is hot: cooling is short or the rack draws "
                "more than it was provisioned for (threshold assumed).",
                resolve_threshold=RACK_OUTLET_LIMIT_C - 2.0),
    ShippedRule("gpu-temperature", "mirror.telemetry.temp_max_c", ">", GPU_TEMP_LIMIT_C, 300.0,
                "critical", "The hottest GPU the mirror reads is near its throttle point "
                "(threshold assumed).", resolve_threshold=GPU_TEMP_LIMIT_C - 3.0),
    ShippedRule("xid-storm", "mirror.xid_per_h", ">", XID_STORM_PER_H, 600.0, "critical",
                "Many XID errors per hour across the mirrored fleet: a driver, firmware or "
                "fabric problem rather than one bad GPU (threshold assumed)."),
    ShippedRule("mirror-lag", "sources.lag_max_s", ">", SOURCE_LAG_LIMIT_S, 60.0, "warning",
                "A mirror source has not answered for two minutes: the twin shows stale "
                "state (wall clock; threshold assumed)."),
    ShippedRule("gpu-xid-storm", "gpu.xid_events", ">=", GPU_XID_STORM, 0.0, "critical",
                "One GPU reported repeated XID errors within an hour: it is failing; drain "
                "its node before it takes a job down (threshold assumed).",
                window_s=GPU_XID_WINDOW_S, resolve_for_s=GPU_XID_WINDOW_S),
    ShippedRule("link-flapping", "link.flaps", ">=", LINK_FLAPS, 0.0, "warning",
                "A link, NIC link or switch went down and came back repeatedly within an hour: "
                "each flap re-routes or interrupts the jobs on it (threshold assumed).",
                window_s=LINK_FLAP_WINDOW_S, resolve_for_s=LINK_FLAP_WINDOW_S),
    ShippedRule("rack-throttled", "racks.throttled_s", ">=", THROTTLED_S, 0.0, "warning",
                "A rack row has lost its cooling loop, or a rack is power-capped, for a quarter "
                "of an hour: its GPUs run slower (threshold assumed).", resolve_for_s=600.0),
    ShippedRule("node-failing-repeatedly", "node.failures", ">=", NODE_FAILURES, 0.0,
                "warning", "One node failed again within a week: one failure short of the "
                "failure engine's quarantine; drain it and have it checked.",
                window_s=NODE_FAILURE_WINDOW_S, resolve_for_s=86400.0),
]
"""The rules shipped, in the order the admin lists them when new."""

DEFAULT_RULES = [astuple(r)[:7] for r in SHIPPED]
"""``(name, figure, comparison, threshold, for_s, severity, description)`` per shipped rule:
what ``0014_alerts`` creates (its fields then)."""


def rules_upgrade(rule_model) -> int:
    """Bring the shipped rules up to date (``0017_alerts_oncall``): create the missing ones,
    and give each existing one its runbook, window and hysteresis; its description, duration
    and threshold only where nobody changed them.  Returns how many rules were created."""
    have = {r.name: r for r in rule_model.objects.filter(name__in=[s.name for s in SHIPPED])}
    created = 0
    for spec in SHIPPED:
        fields = spec.fields()
        row = have.get(spec.name)
        if row is None:
            rule_model.objects.create(**fields)
            created += 1
            continue
        for key in ("runbook_url", "window_s", "resolve_for_s"):
            setattr(row, key, fields[key])
        if row.figure == spec.figure and row.threshold == spec.threshold:
            row.description, row.for_s = spec.description, max(row.for_s, spec.for_s)
            row.resolve_threshold = spec.resolve_threshold
        row.save()
    return created
