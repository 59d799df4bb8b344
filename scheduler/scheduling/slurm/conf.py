"""A cluster's ``slurm.conf`` (or ``scontrol show config``), read into what the ``slurm``
policy models.

Keys are read as slurm.conf(5) of Slurm 22.05 documents them: case-insensitive, ``#`` starts a
comment, ``NodeName=`` and ``PartitionName=`` lines carry several ``key=value`` pairs.  The
output of ``scontrol show config`` (``Key = value`` lines) is read as well, so a mirrored
cluster's live configuration needs no file.  QOS live in the accounting database, not in
``slurm.conf``: a file ``sacctmgr-qos.txt`` beside the configuration, the output of
``sacctmgr --parsable2 show qos format=Name,Priority,Preempt,PreemptMode,PreemptExemptTime,
GraceTime,MaxWall,MaxTRESPU,MaxJobsPU,MaxSubmitPU,GrpTRES,Flags``, gives them (:func:`read_qos`);
reservations, ``scontrol-reservations.txt`` (:mod:`~scheduler.scheduling.slurm.reservations`).

A key the twin does not model is never silently ignored: :attr:`SlurmConf.unmodelled` lists
it, and :meth:`SlurmConf.warning` names them all in one line.  A key whose value is wrong is
one :class:`SlurmConfError` naming the file, the line and the key.

>>> conf = parse_slurm_conf('''
... PriorityType=priority/multifactor
... PriorityWeightAge=1000
... PriorityMaxAge=1-0
... SchedulerParameters=bf_interval=2,bf_resolution=1
... NodeName=gpu[1-2] Gres=gpu:8 RealMemory=512000
... PartitionName=batch Nodes=gpu[1-2] Default=YES PriorityTier=1
... ''', where="slurm.conf")
>>> conf.weights["age"], conf.max_age_s, conf.bf_interval_s, conf.bf_resolution_s
(1000, 86400.0, 2.0, 1.0)
>>> [p.name for p in conf.partitions], conf.partitions[0].nodes
(['batch'], ('gpu1', 'gpu2'))
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.hardware.hostlist import expand
from scheduler.scheduling.slurm.limits import enforce_limits, qos_limit_fields

QOS_FILE = "sacctmgr-qos.txt"
"""The QOS table read beside a configuration file (see :func:`read_qos`)."""

MAX_CONF_BYTES = 4 * 1024 * 1024
"""The largest configuration read, bytes (a real slurm.conf is a few hundred kB at most)."""


class SlurmConfError(ValueError):
    """A configuration the twin cannot read: the file, line and key are named, in one line."""


@dataclass(frozen=True)
class Partition:
    """One ``PartitionName=`` line.  Times in seconds; ``None`` is ``INFINITE``."""

    name: str
    nodes: tuple[str, ...]          # node names; ("ALL",) for every node
    priority_tier: int = 1
    priority_job_factor: int = 1
    max_time_s: float | None = None
    default_time_s: float | None = None
    default: bool = False
    up: bool = True
    qos: str = ""
    preempt_mode: str | None = None  # None: the cluster's PreemptMode
    grace_time_s: float = 0.0  # preemption grace time (preempt/partition_prio)
    over_time_limit_s: float | None = None  # None: the cluster's OverTimeLimit


@dataclass(frozen=True)
class Qos:
    """One QOS of the accounting database: priority, whom it preempts and how."""

    name: str
    priority: int = 0
    preempt: tuple[str, ...] = ()
    preempt_mode: str | None = None
    preempt_exempt_time_s: float | None = None
    grace_time_s: float = 0.0
    max_wall_s: float | None = None
    max_tres_pu_gpus: int | None = None  # MaxTRESPerUser=gres/gpu=N
    grp_tres_gpus: int | None = None  # GrpTRES=gres/gpu=N
    max_jobs_pu: int | None = None
    max_submit_jobs_pu: int | None = None
    flags: frozenset = frozenset()  # lower-case (denyonlimit)


@dataclass(frozen=True)
class NodeLine:
    """One node of a ``NodeName=`` line (expanded): its name, GPUs, CPUs and memory (MB)."""

    name: str
    gpus: int
    cpus: int
    real_memory_mb: float


@dataclass(frozen=True)
class SlurmConf:
    """What the ``slurm`` policy reads of a cluster's configuration.

    Times are seconds; weights are Slurm's integers.  Defaults are Slurm 22.05's.
    """

    source: str = "slurm.conf"
    priority_type: str = "priority/basic"
    weights: dict = field(default_factory=lambda: dict.fromkeys(
        ("age", "fairshare", "jobsize", "partition", "qos", "assoc"), 0))
    max_age_s: float = 7 * 86400.0
    favor_small: bool = False
    decay_half_life_s: float = 7 * 86400.0
    calc_period_s: float = 300.0
    priority_flags: frozenset = frozenset()
    sched_type: str = "sched/backfill"
    bf_interval_s: float = 30.0
    bf_window_s: float = 86400.0
    bf_resolution_s: float = 60.0
    bf_max_job_test: int = 500
    bf_max_job_user: int = 0
    bf_continue: bool = False
    default_queue_depth: int = 100
    sched_interval_s: float = 60.0
    batch_sched_delay_s: float = 3.0
    preempt_type: str = "preempt/none"
    preempt_mode: str = "OFF"
    preempt_exempt_time_s: float = 0.0
    select_params: frozenset = frozenset({"CR_CORE_MEMORY"})
    def_mem: bool = False
    cred_expire_s: float = 120.0
    nodes: tuple[NodeLine, ...] = ()
    partitions: tuple[Partition, ...] = ()
    qos: dict = field(default_factory=dict)
    over_time_limit_s: float = 0.0
    enforce_limits: bool = False  # AccountingStorageEnforce=limits (or safe)
    reservations: tuple = ()  # advance reservations (reservations.Reservation)
    unmodelled: tuple[str, ...] = ()

    @property
    def fair_tree(self) -> bool:
        """Fair Tree (the default since 19.05) unless ``PriorityFlags=NO_FAIR_TREE``."""
        return "NO_FAIR_TREE" not in self.priority_flags

    @property
    def multifactor(self) -> bool:
        return self.priority_type == "priority/multifactor"

    @property
    def backfill(self) -> bool:
        return self.sched_type == "sched/backfill"

    @property
    def memory_whole_node(self) -> bool:
        """Memory is a consumable resource and no default is set: a job that does not ask
        takes its nodes' whole memory, so no other job shares them."""
        return any("MEMORY" in p for p in self.select_params) and not self.def_mem

    def warning(self) -> str | None:
        """One line naming the keys the twin does not model (``None`` if there are none)."""
        if not self.unmodelled:
            return None
        return (f"{self.source}: not modelled by the twin, so not applied: "
                f"{', '.join(self.unmodelled)}")


# ----------------------------------------------------------------- reading
# Keys read and applied; keys read only to know they are harmless (daemon plumbing, paths,
# logging, plugins with no effect on scheduling decisions) are in _INERT.
_INERT = {k.lower() for k in (
    "ClusterName", "SlurmctldHost", "ControlMachine", "ControlAddr", "BackupController",
    "AuthType", "CredType", "SlurmUser", "SlurmdUser", "SlurmctldPort", "SlurmdPort",
    "StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile",
    "SlurmctldLogFile", "SlurmdLogFile", "SlurmctldDebug", "SlurmdDebug", "SlurmdParameters",
    "ReturnToService", "ProctrackType", "TaskPlugin", "SwitchType", "MpiDefault",
    "JobAcctGatherType", "JobAcctGatherFrequency", "AccountingStorageType",
    "AccountingStorageHost", "AccountingStoragePort",
    "AccountingStorageTRES", "AccountingStoreFlags", "JobCompType", "JobCompLoc", "MailProg",
    "GresTypes", "TopologyPlugin", "KillWait", "InactiveLimit", "MinJobAge",
    "Waittime", "SlurmctldTimeout", "SlurmdTimeout", "MessageTimeout", "TCPTimeout",
    "PluginDir", "Epilog", "Prolog", "PrologFlags", "LaunchParameters", "SrunPortRange",
    "DebugFlags", "HealthCheckProgram", "HealthCheckInterval", "MaxJobCount", "FirstJobId",
    "SlurmctldParameters", "CommunicationParameters", "TreeWidth", "AuthAltTypes",
    "JobCompHost", "JobCompPort", "JobCompUser", "JobCompPass",
    "CpuFreqDef", "AcctGatherNodeFreq", "SchedulerTimeSlice", "NodeName", "PartitionName",
    "AuthInfo")}

_WEIGHTS = {"priorityweightage": "age", "priorityweightfairshare": "fairshare",
            "priorityweightjobsize": "jobsize", "priorityweightpartition": "partition",
            "priorityweightqos": "qos", "priorityweightassoc": "assoc"}

_SCHED_PARAMS = {"bf_interval", "bf_window", "bf_resolution", "bf_max_job_test",
                 "bf_max_job_user", "bf_continue", "default_queue_depth", "sched_interval",
                 "batch_sched_delay"}
"""SchedulerParameters the twin applies; others are listed as not modelled."""
_SCHED_INERT = {"bf_yield_interval", "bf_yield_sleep", "max_rpc_cnt", "sched_min_interval",
                "bf_max_time", "max_sched_time"}
"""SchedulerParameters about slurmctld's own locking and pacing (no effect on the order)."""

_PREEMPT_TYPES = ("preempt/none", "preempt/partition_prio", "preempt/qos")
_PREEMPT_MODES = ("OFF", "CANCEL", "REQUEUE", "SUSPEND", "GANG")


def parse_time(text: str, *, minutes: bool = True) -> float | None:
    """Seconds of a Slurm time: ``minutes``, ``minutes:seconds``, ``hours:minutes:seconds``,
    ``days-hours[:minutes[:seconds]]``; ``None`` for ``INFINITE``/``UNLIMITED``.

    >>> parse_time("90"), parse_time("1:30"), parse_time("2-0"), parse_time("UNLIMITED")
    (5400.0, 90.0, 172800.0, None)
    """
    t = text.strip()
    if t.upper() in ("INFINITE", "UNLIMITED", ""):
        return None
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", t)
    if not m:
        raise ValueError(f"not a Slurm time: {t!r}")
    days, a, b, c = m.groups()
    if days is not None:  # days-hours[:minutes[:seconds]]
        secs = int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    elif c is not None:  # hours:minutes:seconds
        secs = int(a) * 3600 + int(b) * 60 + int(c)
    elif b is not None:  # minutes:seconds
        secs = int(a) * 60 + int(b)
    else:  # minutes (or seconds where the key counts seconds)
        secs = int(a) * (60 if minutes else 1)
    return float(secs)


def _pairs(line: str) -> list[tuple[str, str]]:
    """``key=value`` pairs of one line (values may be double-quoted)."""
    return [(k, v.strip('"')) for k, v in re.findall(r'([A-Za-z_][\w]*)\s*=\s*("[^"]*"|\S*)',
                                                        line)]


def _lines(text: str) -> list[tuple[int, str]]:
    out, pending, first = [], "", 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if pending:
            line = pending + line.strip()  # Slurm joins a continued line as it is
        else:
            first = no
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        if line.strip():
            out.append((first, line.strip()))
    return out


def parse_slurm_conf(text: str, *, where: str = "slurm.conf",
                     qos: dict | None = None) -> SlurmConf:
    """Read a ``slurm.conf`` or ``scontrol show config`` text.

    Raises
    ------
    SlurmConfError
        A value that is wrong (``where:line: Key=value: why``), a partition naming a node no
        ``NodeName`` line has, or a QOS preempting one that does not exist.
    """
    kw: dict = {"weights": dict(SlurmConf().weights), "qos": dict(qos or {})}
    unmodelled: list[str] = []
    nodes: list[NodeLine] = []
    parts: list[Partition] = []
    scontrol = bool(re.search(r"^\s*\w+\s+=\s", text, re.M)) and "=" in text
    for no, line in _lines(text):
        if scontrol and re.match(r"^\w[\w]*\s+=\s", line):
            key, _, value = line.partition("=")
            pairs = [(key.strip(), value.strip())]
        else:
            pairs = _pairs(line)
        if not pairs:
            continue
        head = pairs[0][0].lower()
        try:
            if head == "nodename":
                nodes.extend(_node_line(dict((k.lower(), v) for k, v in pairs)))
                continue
            if head == "partitionname":
                parts.append(_partition_line(dict((k.lower(), v) for k, v in pairs)))
                continue
            for key, value in pairs:
                _apply(key, value, kw, unmodelled)
        except ValueError as exc:
            raise SlurmConfError(f"{where}:{no}: {line[:80]}: {exc}") from None
    names = {n.name for n in nodes}
    for p in parts:
        missing = [n for n in p.nodes if n != "ALL" and names and n not in names]
        if missing:
            raise SlurmConfError(f"{where}: partition {p.name} names node {missing[0]}, which "
                                 "no NodeName line has")
    for q in kw["qos"].values():
        gone = [o for o in q.preempt if o not in kw["qos"]]
        if gone:
            raise SlurmConfError(f"{where}: QOS {q.name} preempts QOS {gone[0]}, which is not "
                                 "defined")
    return SlurmConf(source=where, nodes=tuple(nodes), partitions=tuple(parts),
                     unmodelled=tuple(dict.fromkeys(unmodelled)), **kw)


def _apply(key: str, value: str, kw: dict, unmodelled: list[str]) -> None:
    k = key.lower().replace(" ", "")
    if k in _WEIGHTS:
        kw["weights"][_WEIGHTS[k]] = _int(value)
    elif k == "prioritytype":
        if value not in ("priority/basic", "priority/multifactor"):
            raise ValueError("PriorityType must be priority/basic or priority/multifactor")
        kw["priority_type"] = value
    elif k == "prioritymaxage":
        kw["max_age_s"] = _time(value, "PriorityMaxAge")
    elif k == "prioritydecayhalflife":
        kw["decay_half_life_s"] = _time(value, "PriorityDecayHalfLife")
    elif k == "prioritycalcperiod":
        kw["calc_period_s"] = _time(value, "PriorityCalcPeriod")
    elif k == "priorityfavorsmall":
        kw["favor_small"] = value.strip().upper() in ("YES", "1", "TRUE")
    elif k == "priorityflags":
        kw["priority_flags"] = frozenset(f.strip().upper() for f in value.split(",") if f)
        if kw["priority_flags"] - {"NO_FAIR_TREE", "MAX_TRES", "CALCULATE_RUNNING"}:
            unmodelled.append("PriorityFlags=" + ",".join(
                sorted(kw["priority_flags"] - {"NO_FAIR_TREE"})))
    elif k == "schedulertype":
        if value not in ("sched/backfill", "sched/builtin"):
            raise ValueError("SchedulerType must be sched/backfill or sched/builtin")
        kw["sched_type"] = value
    elif k == "schedulerparameters":
        _sched_params(value, kw, unmodelled)
    elif k == "preempttype":
        if value not in _PREEMPT_TYPES:
            raise ValueError(f"PreemptType must be one of {', '.join(_PREEMPT_TYPES)}")
        kw["preempt_type"] = value
    elif k == "preemptmode":
        kw["preempt_mode"] = _preempt_mode(value, unmodelled)
    elif k == "preemptexempttime":
        kw["preempt_exempt_time_s"] = _time(value, "PreemptExemptTime", minutes=True) or 0.0
    elif k == "selecttypeparameters":
        kw["select_params"] = frozenset(p.strip().upper() for p in value.split(",") if p)
    elif k in ("defmempercpu", "defmempernode", "defmempergpu"):
        kw["def_mem"] = True
    elif k == "selecttype":
        if value not in ("select/cons_tres", "select/cons_res"):
            unmodelled.append(f"SelectType={value} (the twin allocates as select/cons_tres)")
    elif k == "overtimelimit":
        kw["over_time_limit_s"] = _time(value, "OverTimeLimit")
    elif k == "accountingstorageenforce":
        kw["enforce_limits"] = enforce_limits(value)
    elif k == "authinfo":
        m = re.search(r"cred_expire=(\d+)", value)
        if m:
            kw["cred_expire_s"] = float(m.group(1))
    elif k not in _INERT:
        unmodelled.append(key)


def _sched_params(value: str, kw: dict, unmodelled: list[str]) -> None:
    for item in filter(None, (v.strip() for v in value.split(","))):
        name, _, arg = item.partition("=")
        name = name.lower()
        if name == "bf_continue":
            kw["bf_continue"] = True
        elif name in ("bf_interval", "bf_resolution", "sched_interval"):
            kw[f"{name}_s"] = float(_int(arg, name, at_least=1))
        elif name == "batch_sched_delay":
            kw[f"{name}_s"] = float(_int(arg, name, at_least=0))
        elif name == "bf_window":
            kw["bf_window_s"] = 60.0 * _int(arg, name, at_least=1)
        elif name in ("bf_max_job_test", "default_queue_depth"):
            kw[name] = _int(arg, name, at_least=1)
        elif name == "bf_max_job_user":
            kw[name] = _int(arg, name, at_least=0)
        elif name not in _SCHED_INERT:
            unmodelled.append(f"SchedulerParameters={name}")


def _preempt_mode(value: str, unmodelled: list[str]) -> str:
    modes = [m.strip().upper() for m in value.split(",") if m.strip()]
    base = [m for m in modes if m != "GANG"]
    if "GANG" in modes:
        unmodelled.append("PreemptMode=GANG")
    mode = base[0] if base else "OFF"
    if mode not in _PREEMPT_MODES:
        raise ValueError(f"PreemptMode must be one of {', '.join(_PREEMPT_MODES)}")
    if mode == "SUSPEND":
        unmodelled.append("PreemptMode=SUSPEND (the twin requeues instead)")
    return mode


def _int(text: str, what: str = "value", at_least: int = 0) -> int:
    if not re.fullmatch(r"\d+", text.strip()):
        raise ValueError(f"{what} must be an integer >= {at_least}, not {text!r}")
    n = int(text)
    if n < at_least:
        raise ValueError(f"{what} must be an integer >= {at_least}, not {text!r}")
    return n


def _time(text: str, what: str, minutes: bool = True) -> float:
    t = parse_time(text, minutes=minutes)
    if t is None:
        return math.inf
    return t


def _gres_gpus(gres: str) -> int:
    total = 0
    for item in gres.split(","):
        parts = item.split(":")
        if parts[0] == "gpu":
            count = parts[-1].split("(")[0]
            total += int(count) if count.isdigit() else 1
    return total


def _node_line(d: dict) -> list[NodeLine]:
    if d["nodename"].upper() == "DEFAULT":
        return []
    gpus = _gres_gpus(d.get("gres", ""))
    cpus = _int(d.get("cpus", "1"), "CPUs", at_least=1)
    mem = float(_int(d.get("realmemory", "1"), "RealMemory", at_least=1))
    return [NodeLine(name, gpus, cpus, mem) for name in expand(d["nodename"])]


def _partition_line(d: dict) -> Partition:
    name = d["partitionname"]
    nodes = d.get("nodes", "ALL")
    return Partition(
        name=name,
        nodes=("ALL",) if nodes.upper() == "ALL" else tuple(expand(nodes)),
        priority_tier=_int(d.get("prioritytier", "1"), "PriorityTier"),
        priority_job_factor=_int(d.get("priorityjobfactor", "1"), "PriorityJobFactor"),
        max_time_s=parse_time(d.get("maxtime", "INFINITE")),
        default_time_s=parse_time(d["defaulttime"]) if "defaulttime" in d else None,
        default=d.get("default", "NO").upper() == "YES",
        up=d.get("state", "UP").upper() == "UP",
        qos=d.get("qos", ""),
        preempt_mode=d["preemptmode"].upper() if "preemptmode" in d else None,
        grace_time_s=parse_time(d.get("gracetime", "0"), minutes=False) or 0.0,
        over_time_limit_s=_time(d["overtimelimit"], "OverTimeLimit") if "overtimelimit" in d
        else None)


def read_qos(text: str, *, where: str = QOS_FILE) -> dict[str, Qos]:
    """QOS from ``sacctmgr --parsable2 show qos`` output (a header line, ``|``-separated).

    >>> q = read_qos("Name|Priority|Preempt|PreemptMode\\n"
    ...              "normal|0||cluster\\nhigh|100|normal|requeue")
    >>> q["high"].preempt, q["high"].priority, q["normal"].preempt_mode
    (('normal',), 100, None)
    """
    rows = [r for r in text.splitlines() if r.strip()]
    if not rows:
        return {}
    head = [h.strip().lower() for h in rows[0].split("|")]
    if "name" not in head:
        raise SlurmConfError(f"{where}:1: the header names no Name column")
    out = {}
    for no, row in enumerate(rows[1:], 2):
        cells = dict(zip(head, (c.strip() for c in row.split("|")), strict=False))
        try:
            mode = cells.get("preemptmode", "").upper()
            exempt = cells.get("preemptexempttime", "")
            out[cells["name"]] = Qos(
                name=cells["name"],
                priority=_int(cells.get("priority") or "0", "Priority"),
                preempt=tuple(p for p in cells.get("preempt", "").split(",") if p),
                preempt_mode=None if mode in ("", "CLUSTER") else mode,
                preempt_exempt_time_s=parse_time(exempt, minutes=False) if exempt else None,
                grace_time_s=parse_time(cells.get("gracetime") or "0", minutes=False) or 0.0,
                max_wall_s=parse_time(cells["maxwall"]) if cells.get("maxwall") else None,
                **qos_limit_fields(cells))
        except ValueError as exc:
            raise SlurmConfError(f"{where}:{no}: {exc}") from None
    return out


def read_slurm_conf(path: str | os.PathLike, *, epoch_s: float = 0.0) -> SlurmConf:
    """Read a ``slurm.conf`` (or ``scontrol show config`` output) file, with the QOS of a
    ``sacctmgr-qos.txt`` and ``scontrol-reservations.txt`` beside it (times from ``epoch_s``).

    Raises :class:`SlurmConfError` (one line, the file named) for a file that does not exist,
    is too large, is not text, or holds a wrong value.
    """
    p = Path(path)
    try:
        if p.stat().st_size > MAX_CONF_BYTES:
            raise SlurmConfError(f"{p.name}: larger than {MAX_CONF_BYTES // 2**20} MiB; "
                                 "not a slurm.conf")
        text = p.read_text(encoding="utf-8")
        qos_path = p.parent / QOS_FILE
        qos = read_qos(qos_path.read_text(encoding="utf-8"), where=qos_path.name) \
            if qos_path.is_file() else None
    except FileNotFoundError:
        raise SlurmConfError(f"slurm configuration {os.fspath(path)!r} does not exist") from None
    except UnicodeDecodeError:
        raise SlurmConfError(f"{p.name}: not UTF-8 text") from None
    except IsADirectoryError:
        raise SlurmConfError(f"{os.fspath(path)!r} is a folder, not a slurm.conf") from None
    from scheduler.scheduling.slurm.reservations import with_reservations  # imports this
    return with_reservations(parse_slurm_conf(text, where=p.name, qos=qos), p, epoch_s)
