"""``mirror_check``: read each source once and say what maps onto the inventory, what does not
and why, before a mirror is started (``docs/mirror.md``, "Point it at your Slurm").

Each line is a :class:`Finding`: ``ok``, ``warn`` (the mirror runs, something is shown as
assumed or left out) or ``fail`` (the mirror cannot follow the cluster as it stands: a source
that cannot be read, nodes that do not map, a slurm.conf the forks cannot use).  The check
reads with the mirror's own readers and maps with its own adapter (:mod:`twin.mirror.follow`),
so what it says is what the running mirror would do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from twin.inventory.models import Cluster, Node
from twin.mirror.follow import HostIndex, observation
from twin.mirror.slurm_import import node_gpus

OK, WARN, FAIL = "ok", "warn", "fail"
SHOWN = 5  # names listed per finding
PROBLEM_WORDS = {
    "unknown_nodes": "node(s) Slurm lists that the inventory lacks",
    "jobs_on_unknown_nodes": "running job(s) on nodes the inventory lacks",
    "jobs_without_gpus": "job(s) without GPUs (not followed: the twin models GPU work)",
    "jobs_with_uneven_gpus": "job(s) whose GPUs do not divide over their nodes",
    "jobs_with_a_bad_model_declaration": "job(s) with a bad twin: declaration in the comment",
    "unknown_hosts_in_telemetry": "exporter host(s) the inventory lacks",
    "gpu_index_out_of_range": "sample(s) with a GPU index the node does not have",
    "jobs_on_gpu_slices": "job(s) on MIG or shard slices (not followed: the twin models "
                          "whole GPUs)",
    "array_tasks_not_followed": "pending array task(s) beyond the first 1,000 of an array "
                                "(counted, not queued one by one)",
    "reservations_on_unknown_nodes": "reservation(s) on nodes the inventory lacks",
    "stale_exporters": "inventory node(s) whose exporter sent nothing",
}
WARN_ONLY = {"jobs_without_gpus", "jobs_with_a_bad_model_declaration", "jobs_on_gpu_slices",
             "array_tasks_not_followed", "stale_exporters"}


@dataclass
class Finding:
    level: str  # ok, warn or fail
    source: str  # inventory, slurm, prometheus, forks
    text: str


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)

    def add(self, level: str, source: str, text: str) -> None:
        self.findings.append(Finding(level, source, text))

    @property
    def ok(self) -> bool:
        return all(f.level != FAIL for f in self.findings)

    def lines(self) -> list[str]:
        width = max((len(f.source) for f in self.findings), default=0)
        return [f"{f.level.upper():4}  {f.source:{width}}  {f.text}" for f in self.findings]


def _names(items) -> str:
    items = list(items)
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(str(i) for i in items[:SHOWN]) + more


def _slurm_nodes(report: Report, view, cluster: Cluster) -> None:
    rows = {h: (m, c) for h, m, c in Node.objects.filter(rack__hall__site__cluster=cluster)
            .values_list("hostname", "accelerator_model__name", "accelerator_count")}
    known = [n for n in view.nodes if n in rows]
    missing = sorted(set(rows) - set(view.nodes))
    report.add(OK if known else FAIL, "slurm",
               f"{len(view.nodes)} node(s) listed, {len(known)} of the inventory's {len(rows)} "
               "mapped by hostname")
    if missing:
        report.add(WARN, "slurm", f"{len(missing)} inventory node(s) Slurm does not list "
                                  f"(shown as they are in the inventory): {_names(missing)}")
    gpus, types = [], []
    for name in known:
        node, (model, count) = view.nodes[name], rows[name]
        got = node_gpus(node.gres or "", cluster.gres_map or {})
        if isinstance(got, str):
            types.append(f"{name} ({got})")
        elif got[0] != model:
            types.append(f"{name} ({node.gres} is {got[0]}, the inventory says {model})")
        elif got[1] != count:
            gpus.append(f"{name} ({got[1]} in Slurm, {count} in the inventory)")
    if gpus:
        report.add(FAIL, "slurm", f"{len(gpus)} node(s) with another GPU count than the "
                                  f"inventory: {_names(gpus)}")
    if types:
        report.add(FAIL, "slurm", f"{len(types)} node(s) whose GRES does not map to the "
                                  "inventory's model (re-import with --gres-map, or edit the "
                                  f"cluster's GRES map in the admin): {_names(types)}")


def _problems(report: Report, source: str, problems: dict) -> None:
    for kind, entry in sorted(problems.items()):
        words = PROBLEM_WORDS.get(kind, kind.replace("_", " "))
        report.add(WARN if kind in WARN_ONLY else FAIL, source,
                   f"{entry['count']} {words}: {_names(entry['names'])}")


def _jobs(report: Report, view) -> None:
    states: dict[str, int] = {}
    for job in view.jobs:
        states[job.state] = states.get(job.state, 0) + 1
    shown = ", ".join(f"{n} {s.lower()}"
                      for s, n in sorted(states.items(), key=lambda kv: -kv[1]))
    report.add(OK, "slurm", f"{len(view.jobs)} job(s) read{': ' + shown if shown else ''}")
    if view.accounting:
        report.add(OK, "slurm", "accounting (sacct) answered: finished jobs keep their end "
                                "state")
    else:
        why = view.accounting_note or "sacct did not answer"
        report.add(WARN, "slurm", f"no accounting ({why}): jobs that left squeue's list count "
                                  "as ended (GONE)")


def _slurm(report: Report, read: Callable, hosts: HostIndex, cluster: Cluster):
    try:
        view = read()
    except Exception as exc:  # SourceError is one line; anything else is named
        report.add(FAIL, "slurm", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return None
    how = "slurmrestd" if view.source == "rest" else "the commands (sinfo, squeue, sacct --json)"
    report.add(OK, "slurm", f"read through {how}")
    _slurm_nodes(report, view, cluster)
    _jobs(report, view)
    return view


def _prometheus(report: Report, read: Callable | None, hosts: HostIndex):
    if read is None:
        report.add(WARN, "prometheus", "CLUSTERTWIN_PROMETHEUS_URL is not set: no GPU "
                                       "telemetry (power, utilisation, XID) on the pages")
        return None
    try:
        view = read()
    except Exception as exc:
        report.add(FAIL, "prometheus",
                   str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return None
    mapped = sum(1 for h in view.hosts if h in hosts.node_of)
    report.add(OK if mapped else FAIL, "prometheus",
               f"{len(view.hosts)} exporter host(s), {mapped} of them inventory nodes")
    silent = [h for h in hosts.hostnames if h not in set(view.hosts)]
    if silent and mapped:
        report.add(WARN, "prometheus", f"{len(silent)} inventory node(s) whose exporter sent "
                                       f"nothing (stale or not scraped): {_names(silent)}")
    return view


def _forks(report: Report, policy: Callable, n_nodes: int) -> None:
    from twin.live.policy import LivePolicyError

    try:
        chosen = policy()
    except LivePolicyError as exc:
        report.add(FAIL, "forks", str(exc))
        return
    conf = chosen.slurm_conf
    if conf is None:
        report.add(WARN, "forks", f"what-ifs schedule with the twin's {chosen.name!r} policy "
                                  "(set CLUSTERTWIN_SLURM_CONF to the cluster's slurm.conf for "
                                  "its own rules)")
        return
    if conf.nodes and len(conf.nodes) != n_nodes:
        report.add(FAIL, "forks", f"{chosen.slurm_conf_path} has {len(conf.nodes)} node(s), "
                                  f"the inventory {n_nodes}")
        return
    report.add(OK, "forks", f"what-ifs schedule by {chosen.slurm_conf_path} (the slurm policy)")
    if conf.unmodelled:
        report.add(WARN, "forks", f"keys the twin does not model: {_names(conf.unmodelled)}")


def mirror_check(cluster: Cluster | None, *, slurm: Callable, prometheus: Callable | None,
                 policy: Callable) -> Report:
    """What the mirror would make of ``cluster`` (``None``: the inventory has none).

    ``slurm()`` and ``prometheus()`` read a source (the mirror's readers), ``policy()`` gives
    the forks' policy (:func:`twin.live.policy.live_policy` with ``mirror=True``).
    """
    report = Report()
    if cluster is None:
        report.add(FAIL, "inventory", "no cluster to mirror: import it with `manage.py "
                                      "import_inventory --from-slurm --name NAME`")
        return report
    hosts = HostIndex.of(cluster)
    report.add(OK if hosts.hostnames else FAIL, "inventory",
               f"cluster {cluster.name}: {len(hosts.hostnames)} node(s), {hosts.n_gpus} GPU(s)")
    view = _slurm(report, slurm, hosts, cluster)
    prom = _prometheus(report, prometheus, hosts)
    if view is not None or prom is not None:
        _, problems = observation(view, prom, hosts)
        _problems(report, "slurm", problems["slurm"])
        _problems(report, "prometheus", problems["prometheus"])
    _forks(report, policy, len(hosts.hostnames))
    return report
