"""Run a seeded stream of ``sleep`` jobs on a real Slurm and record what Slurm did (issue 25).

Not a test module: ``tests/slurm/test_slurm_agreement.py`` and ``bench/slurm_agreement.py``
use it.  A :class:`Scenario` names the scheduling part of a ``slurm.conf`` (partitions,
priority, ``SchedulerParameters``, preemption, QOS); :func:`stream` draws its jobs from a seed;
:func:`run_scenarios` starts one Slurm per scenario at once (each with its own ports, state
and spool folders, all served by one slurmdbd on one throw-away MariaDB), submits each stream
with ``sbatch`` at its planned offsets, waits until every job has ended, and reads each job's
real submit, start and end from ``sacct --json`` (whole seconds; for a requeued job, the start
of its last run).

The cluster is four emulated nodes (``slurmd -N``) of 64 cores and eight GPUs each, their
GPU device files links to ``/dev/null`` (as ``conftest.py`` makes them).  Things of Slurm that
shape the streams and the configuration:

* ``--time`` is whole minutes, and backfill plans by limits while a ``sleep`` ends by its own
  duration; every job here asks for 1 or 2 minutes and sleeps 3-18 s.
* ``SelectTypeParameters=CR_Core``: memory is not a consumable resource, so a job does not
  take its node's whole memory (with ``CR_Core_Memory`` and no ``DefMemPerCPU`` it would).
* ``bf_interval=1``: the backfill pass runs every second (default 30 s) so that a job started
  by backfill starts within a second of the hole opening, not at the next half-minute;
  ``sched_interval=2``: the periodic main pass (default 60 s) is what starts a job whose begin
  time passed with nothing else happening, e.g. a requeued job at the end of its 120 s hold.
* slurmctld times its periodic work (priority recalculation every ``PriorityCalcPeriod``, the
  main and backfill polls) from its own start: each stream starts :data:`ALIGN_S` after its
  slurmctld, so every run of a stream sees them at the same instants (see :meth:`Run.t0`).
* consecutive submits are at least :data:`MIN_GAP_S` apart (see :func:`stream`).
* the job-size factor counts nodes and CPUs, not GPUs; every job asks one task per node.
* jobs are one node with ``k <= 8`` GPUs (``-N1 --gres=gpu:k``) or ``n`` whole nodes
  (``-N n --gres=gpu:8``): the twin places gangs as whole nodes plus at most one partial node.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import math
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.slurm.conftest import (
    SBIN,
    Munge,
    daemon_conf,
    free_ports,
    gres_conf,
    stop,
    tail,
    which,
)

NODES = 4
GPUS_PER_NODE = 8
NODE_NAMES = [f"gpu{i}" for i in range(1, NODES + 1)]
GRES_TYPE = "h100_sxm"   # export_topology's name for H100-SXM: import_inventory maps it back
TRACE_HEADER = ("job_id", "submit_s", "duration_s", "gpus", "gpus_per_node", "partition", "qos",
                "user", "time_limit_s")
START_TIMEOUT = 40.0
MIN_GAP_S = 1.0
ALIGN_S = 60.0
"""Seconds from starting slurmctld to the stream's first submit.  slurmctld's priority
decay thread recomputes pending jobs' priorities 61 s (measured: 60.9-61.1 s) after it is
started and every ``PriorityCalcPeriod`` (60 s) after, so a stream that starts at the next
whole second after 60 s sees them at about 0, 60, 120 s; its backfill and main-loop polls, also
timed from its start, fall at the same instants in every run."""
_CLUSTERS = itertools.count()
RUN_DEADLINE = 420.0
"""Seconds after the first submit by which every job must have ended."""

SHAPES = ((1, 1), (2, 1), (4, 1), (8, 1), (16, 2), (24, 3), (32, 4))
"""(GPUs, nodes) a job may ask for: one node with k <= 8 GPUs or n whole nodes."""
SHAPE_P = (0.25, 0.2, 0.2, 0.15, 0.1, 0.06, 0.04)

BASE_SCHED = ("SchedulerType=sched/backfill\n"
              "SchedulerParameters=bf_interval=1,bf_resolution=1,bf_window=10,"
              "bf_max_job_test=1000,default_queue_depth=1000,sched_interval=2\n"
              "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n")


class SlurmRunError(RuntimeError):
    """A daemon died, a command failed or a wait timed out; the message has the logs' tails."""


@dataclass(frozen=True)
class Scenario:
    """One Slurm configuration and the seed of its stream.

    ``conf`` holds the scheduling lines of ``slurm.conf`` (priority, scheduler, preemption) and
    the ``PartitionName`` lines; ``partitions`` and ``qos`` are drawn per job with the given
    probabilities; ``qos_lines`` are ``sacctmgr`` arguments after ``add qos``.
    """

    name: str
    conf: str
    seed: int
    partitions: tuple[tuple[str, float], ...] = (("batch", 1.0),)
    qos: tuple[tuple[str, float], ...] = (("normal", 1.0),)
    qos_lines: tuple[str, ...] = ()
    n_jobs: int = 44
    span_s: float = 60.0


@dataclass(frozen=True)
class Planned:
    """One job of a stream: ``submit_s`` is its planned offset from the stream's start."""

    index: int
    submit_s: float
    duration_s: int
    gpus: int
    nodes: int
    partition: str
    qos: str
    time_limit_min: int

    @property
    def gpus_per_node(self) -> int:
        return self.gpus // self.nodes


@dataclass(frozen=True)
class Recorded:
    """What Slurm recorded for one job, in whole seconds from the stream's first submit."""

    job_id: int
    submit_s: int
    start_s: int
    end_s: int
    gpus: int
    nodes: int
    state: str
    requeues: int


@dataclass
class Outcome:
    """One scenario's run: the planned jobs, Slurm's record, and the files written."""

    scenario: Scenario
    planned: list[Planned]
    jobs: dict[int, Recorded]            # by Slurm job id
    planned_of: dict[int, Planned]       # Slurm job id -> planned job
    conf: Path                           # the slurm.conf used (for the twin's --slurm-conf)
    trace: Path                          # the CSV trace in the documented format
    sacct: Path                          # sacct --json as Slurm printed it
    epoch: int                           # Slurm's submit time of the first job (Unix s)
    ctld_s: float                        # when slurmctld was started, from ``epoch`` (< 0)


def stream(scenario: Scenario) -> list[Planned]:
    """The scenario's jobs, drawn from its seed: submits spread over ``span_s`` seconds.

    Consecutive submits are at least :data:`MIN_GAP_S` apart (plus an exponential gap): two
    jobs that compete and arrive within a fraction of a second are a race whose winner is
    whichever ``sbatch`` slurmctld reads first, not a scheduling rule (such streams made
    Slurm disagree with itself by a median 9.5 s).
    """
    rng = np.random.default_rng(scenario.seed)
    n = scenario.n_jobs
    mean = max(0.0, scenario.span_s - (n - 1) * MIN_GAP_S) / (n - 1)
    submits = np.concatenate([[0.0], np.cumsum(MIN_GAP_S + rng.exponential(mean, n - 1))])
    shapes = rng.choice(len(SHAPES), size=n, p=SHAPE_P)
    durations = rng.integers(3, 19, n)
    slack = rng.integers(0, 2, n)                       # 1 or 2 minute limits
    pnames, pp = zip(*scenario.partitions, strict=True)
    qnames, qp = zip(*scenario.qos, strict=True)
    parts = rng.choice(len(pnames), size=n, p=pp)
    qos = rng.choice(len(qnames), size=n, p=qp)
    return [Planned(i, round(float(submits[i]), 2), int(durations[i]), SHAPES[shapes[i]][0],
                    SHAPES[shapes[i]][1], pnames[parts[i]], qnames[qos[i]],
                    math.ceil(durations[i] / 60) + int(slack[i]))
            for i in range(n)]


# ------------------------------------------------------------------------------ daemons
REFERENCE_NICE = -10
"""The reference's priority where it may be raised (root, as in CI): Slurm's starts are the
yardstick, and on a machine the rest of the suite loads (or ``make test-loaded``'s hog) a
slurmctld at the default priority took its decisions seconds late (multifactor: median
|Δstart| 8.25 s against 0.5-1.5 s on a quiet machine)."""


def _ahead_of_the_load() -> None:
    """In the daemon's child, before it runs: raise its priority if allowed, else leave it."""
    try:
        os.nice(REFERENCE_NICE)
    except PermissionError:
        pass


@dataclass
class Daemons:
    """Processes started for a run, with their logs, for failure messages and stopping."""

    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    def start(self, name: str, log: Path, args: list[str], env: dict, cwd: Path) -> None:
        self.logs[name] = log
        with open(log.with_suffix(".out"), "w") as out:
            self.procs[name] = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                                env=env, cwd=cwd, start_new_session=True,
                                                preexec_fn=_ahead_of_the_load)

    def report(self, only: str = "") -> str:
        parts = []
        for name, proc in self.procs.items():
            if only and only not in name:
                continue
            state = "running" if proc.poll() is None else f"exited {proc.returncode}"
            parts.append(f"--- {name} ({state}), {self.logs[name]}:\n{tail(self.logs[name])}")
        return "\n".join(parts)

    def wait(self, what: str, ready, timeout: float = START_TIMEOUT) -> None:
        """Poll ``ready()`` until true; a dead daemon or the deadline raises with the logs."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise SlurmRunError(f"{dead[0]} died while waiting for {what}\n{self.report()}")
            try:
                if ready():
                    return
            except (SlurmRunError, subprocess.TimeoutExpired, ValueError, KeyError) as err:
                last = err
            if time.monotonic() > deadline:
                raise SlurmRunError(f"timed out after {timeout:.0f} s waiting for {what} "
                                    f"(last: {last})\n{self.report()}")
            time.sleep(0.2)

    def stop(self) -> None:
        stop(list(self.procs.values()))


def command(args: list[str], env: dict, timeout: float = 30.0, what: str = "") -> str:
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode:
        raise SlurmRunError(f"{' '.join(args)} exited {proc.returncode}: "
                            f"{(proc.stderr or proc.stdout).strip()} {what}")
    return proc.stdout


@contextlib.contextmanager
def munged() -> Iterator[Munge]:
    """A munged of its own (``conftest.munge`` is a fixture; the bench runs without pytest)."""
    root = Path(tempfile.mkdtemp(prefix="twin-munge-"))
    os.chmod(root, 0o700)
    key, sock, log = root / "munge.key", root / "munge.socket", root / "munged.log"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o600)
    d = Daemons()
    d.start("munged", log, [which("munged"), "--foreground", "--force", f"--socket={sock}",
                            f"--key-file={key}", f"--log-file={log}",
                            f"--pid-file={root / 'munged.pid'}",
                            f"--seed-file={root / 'munged.seed'}"], dict(os.environ), root)
    try:
        d.wait("munged's socket", sock.exists, 10)
        yield Munge(sock, log)
    finally:
        d.stop()
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Accounting:
    """A throw-away MariaDB and one slurmdbd that every scenario's slurmctld reports to."""

    root: Path
    munge: Munge
    daemons: Daemons = field(default_factory=Daemons)
    dbd_port: int = 0

    def client_conf(self, cluster: str) -> str:
        return (f"AccountingStorageType=accounting_storage/slurmdbd\n"
                f"AccountingStorageHost=localhost\nAccountingStoragePort={self.dbd_port}\n"
                # the munge socket for the persistent connection to slurmdbd (22.05 reads it
                # here, not from AuthInfo)
                f"AccountingStoragePass={self.munge.socket}\n"
                f"AccountingStorageEnforce=associations,limits,qos\n"
                f"AccountingStorageTRES=gres/gpu\n")

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.root / "slurm.conf"), "PATH": SBIN}

    def start(self) -> None:
        db, root = self.root / "db", self.root
        my_port, self.dbd_port = free_ports(2)
        command([which("mariadb-install-db"), "--no-defaults", f"--datadir={db}",
                 "--user=root", "--auth-root-authentication-method=normal",
                 "--skip-test-db"], dict(os.environ), timeout=120, what="(mariadb-install-db)")
        sock = root / "mysql.sock"
        self.daemons.start("mariadbd", root / "mariadbd.err", [
            which("mariadbd"), "--no-defaults", f"--datadir={db}", "--user=root",
            f"--socket={sock}", f"--port={my_port}", "--bind-address=127.0.0.1",
            f"--pid-file={root / 'mariadbd.pid'}", f"--log-error={root / 'mariadbd.err'}",
            "--innodb-buffer-pool-size=64M", "--skip-log-bin",
            "--innodb-flush-log-at-trx-commit=0"],
            dict(os.environ), root)
        self.daemons.wait("mariadbd's socket", sock.exists, 60)
        dbd = root / "slurmdbd.conf"
        dbd.write_text(f"""\
AuthType=auth/munge
AuthInfo=socket={self.munge.socket}
DbdHost=localhost
DbdPort={self.dbd_port}
SlurmUser=root
PidFile={root}/slurmdbd.pid
LogFile={root}/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={my_port}
StorageUser=root
StorageLoc=slurm_acct_db
""")
        os.chmod(dbd, 0o600)
        # sacctmgr reads the controller-side settings from a slurm.conf of its own
        (root / "slurm.conf").write_text(
            f"ClusterName=acct\nSlurmctldHost=localhost\nAuthType=auth/munge\n"
            f"AuthInfo=socket={self.munge.socket}\n{self.client_conf('acct')}"
            f"NodeName=localhost CPUs=1\nPartitionName=p Nodes=ALL\n")
        self.daemons.start("slurmdbd", root / "slurmdbd.log",
                           [which("slurmdbd"), "-D"], self.env, root)
        self.daemons.wait("slurmdbd to answer sacctmgr",
                          lambda: self.sacctmgr("show", "cluster") is not None, 60)

    def sacctmgr(self, *args: str) -> str:
        return command([which("sacctmgr"), "-i", *args], self.env, what=self.daemons.report())

    def add_cluster(self, name: str, qos_lines: tuple[str, ...]) -> None:
        """The cluster, its QOS (``sacctmgr add qos`` arguments), an account, and root."""
        self.sacctmgr("add", "cluster", name)
        names = ["normal"]
        for line in qos_lines:
            qname, *rest = line.split()
            if qname not in self.sacctmgr("-n", "-P", "show", "qos", "format=name").split():
                self.sacctmgr("add", "qos", qname)
            if rest:
                self.sacctmgr("modify", "qos", qname, "set", *rest)
            names.append(qname)
        self.sacctmgr("add", "account", "twin", f"cluster={name}")
        self.sacctmgr("add", "user", "root", "account=twin", f"cluster={name}",
                      f"qos={','.join(names)}", "defaultqos=normal")

    def stop(self) -> None:
        self.daemons.stop()


# ------------------------------------------------------------------------------ one cluster
def node_lines(ports: list[int]) -> str:
    return "\n".join(
        f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs=64 "
        f"RealMemory=512000 Gres=gpu:{GRES_TYPE}:{GPUS_PER_NODE} State=UNKNOWN"
        for name, port in zip(NODE_NAMES, ports, strict=True))


def cluster_conf(root: Path, munge: Munge, scenario: Scenario, ports: list[int],
                 accounting: Accounting, cluster: str) -> str:
    ctld, slurmd, *nodes = ports
    return f"""\
# tests/slurm/agreement.py, scenario {scenario.name}
{daemon_conf(root, munge, cluster, ctld, slurmd)}
DebugFlags=Priority
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
{accounting.client_conf(cluster)}MailProg=/bin/true
SlurmdParameters=config_overrides
ReturnToService=2
TopologyPlugin=topology/tree
GresTypes=gpu
MinJobAge=600
{BASE_SCHED}{scenario.conf.strip()}
{node_lines(nodes)}
"""


@dataclass
class Run:
    """One scenario's Slurm while it runs."""

    scenario: Scenario
    root: Path
    daemons: Daemons = field(default_factory=Daemons)
    conf: Path | None = None
    cluster: str = ""
    submitted: dict[int, int] = field(default_factory=dict)   # planned index -> job id
    error: BaseException | None = None
    ctld_started: float = 0.0                                  # Unix time slurmctld was run
    phase_s: float = 0.05      # where in its second the stream starts (runs at once differ)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf), "PATH": SBIN}

    def run(self, *args: str, timeout: float = 30.0) -> str:
        return command([which(args[0]) or args[0], *args[1:]], self.env, timeout,
                       what=f"\n{self.daemons.report('slurmctld')}")

    def start(self, munge: Munge, accounting: Accounting) -> None:
        """Write the files and start slurmctld (:meth:`ready` waits for it and the nodes)."""
        root = self.root
        for sub in ("state", "spool", "log"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        # a name of its own in the shared slurmdbd: a scenario may run more than once
        self.cluster = f"{self.scenario.name.replace('-', '')[:24]}{next(_CLUSTERS)}"
        text = cluster_conf(root, munge, self.scenario, free_ports(NODES + 2), accounting,
                            self.cluster)
        self.conf = root / "slurm.conf"
        self.conf.write_text(text)
        (root / "topology.conf").write_text(f"SwitchName=leaf1 Nodes={','.join(NODE_NAMES)}\n")
        files = f"/dev/nvidia[0-{GPUS_PER_NODE - 1}]"
        (root / "gres.conf").write_text(gres_conf(
            f"NodeName={','.join(NODE_NAMES)} Name=gpu Type={GRES_TYPE} File={files}",
            root / "devroot"))
        accounting.add_cluster(self.cluster, self.scenario.qos_lines)
        self.daemons.start("slurmctld", root / "log" / "slurmctld.log",
                           [which("slurmctld"), "-D", "-i", "-f", str(self.conf)], self.env,
                           root)
        self.ctld_started = time.time()

    def ready(self) -> None:
        """Wait for slurmctld, start the slurmd, wait until every node is idle."""
        self.daemons.wait("slurmctld to answer `scontrol ping`",
                          lambda: "is UP" in self.run("scontrol", "ping"))
        for host in NODE_NAMES:
            (self.root / "spool" / host).mkdir(exist_ok=True)
            self.daemons.start(f"slurmd {host}", self.root / "log" / f"slurmd-{host}.log",
                               [which("slurmd"), "-D", "-N", host, "-f", str(self.conf)],
                               self.env, self.root)

        def registered() -> bool:
            nodes = json.loads(self.run("sinfo", "--json"))["nodes"]
            idle = [n for n in nodes if n["state"] == "idle"]
            if len(idle) < NODES:
                raise ValueError(f"{len(idle)} of {NODES} nodes idle")
            return True

        self.daemons.wait(f"all {NODES} slurmd to register", registered)

    def sbatch(self, job: Planned) -> int:
        args = ["sbatch", "--parsable", "-J", f"j{job.index}", "-N", str(job.nodes),
                "--ntasks-per-node=1", f"--gres=gpu:{job.gpus_per_node}",
                "-t", str(job.time_limit_min), "-p", job.partition, "--qos", job.qos,
                "-A", "twin",
                "-o", "/dev/null", "-e", "/dev/null", "--requeue",
                "--wrap", f"sleep {job.duration_s}"]
        return int(self.run(*args).strip().split(";")[0])

    def t0(self) -> float:
        """When (Unix time) the stream's first job is submitted: just after a whole second,
        :data:`ALIGN_S` after slurmctld was started, so that its periodic work falls at the
        same times of every run of a stream, and its priority recalculation (every
        ``PriorityCalcPeriod`` from its start) at about 0, 60, 120 s of the stream."""
        return math.ceil(self.ctld_started + ALIGN_S) + self.phase_s

    def submit(self, jobs: list[Planned], t0: float) -> None:
        """Submit each job at ``t0`` + its offset (Unix time); runs in a thread."""
        try:
            for job in jobs:
                delay = t0 + job.submit_s - time.time()
                if delay > 0:
                    time.sleep(delay)
                self.submitted[job.index] = self.sbatch(job)
        except BaseException as err:  # reported by the caller, in the main thread
            self.error = err

    def sacct(self) -> dict:
        ids = ",".join(str(j) for j in self.submitted.values())
        return json.loads(self.run("sacct", "--json", "-X", "-j", ids))

    def done(self) -> bool:
        jobs, _ = recorded(self.sacct())
        ended = [j for j in jobs.values() if j.state in ENDED]
        if len(ended) < len(self.submitted):
            raise ValueError(f"{len(ended)} of {len(self.submitted)} jobs ended")
        return True


ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
         "BOOT_FAIL", "DEADLINE"}


def recorded(sacct: dict) -> tuple[dict[int, Recorded], int]:
    """Job id -> :class:`Recorded` from ``sacct --json -X`` (22.05), and the first submit.

    A requeued job has one record per run: the first holds its original submit, the last
    (whose ``submission`` is the requeue time) its last start and its end.
    """
    runs: dict[int, list[dict]] = {}
    for j in sacct["jobs"]:
        runs.setdefault(j["job_id"], []).append(j)
    epoch = min(j["time"]["submission"] for j in sacct["jobs"])
    jobs = {}
    for job_id, rs in runs.items():
        rs.sort(key=lambda j: (j["time"]["submission"], j["time"]["start"]))
        last = rs[-1]
        gpus = sum(int(x["count"] or 0) for x in last["tres"]["allocated"]
                   if x["type"] == "gres" and x["name"] == "gpu")
        jobs[job_id] = Recorded(job_id, rs[0]["time"]["submission"] - epoch,
                                last["time"]["start"] - epoch, last["time"]["end"] - epoch,
                                gpus, last["allocation_nodes"], last["state"]["current"],
                                len(rs) - 1)
    return jobs, epoch


SUBMIT_MID_S = 0.5
"""sacct truncates times to the second: a job it shows submitted at ``s`` reached slurmctld
somewhere in ``[s, s + 1)``; the trace puts it in the middle (a submission at ``s`` exactly
would be seen by a pass that Slurm ran before it, e.g. one as a job ended at ``s + 0.03``)."""


def write_trace(path: Path, planned_of: dict[int, Planned], jobs: dict[int, Recorded]) -> None:
    """The stream as the documented CSV: Slurm's submits from its first (the middle of
    sacct's second, :data:`SUBMIT_MID_S`), planned shapes."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(TRACE_HEADER)
        for job_id in sorted(planned_of):
            p = planned_of[job_id]
            w.writerow([job_id, jobs[job_id].submit_s + SUBMIT_MID_S, p.duration_s, p.gpus,
                        p.gpus_per_node, p.partition, p.qos, "root", p.time_limit_min * 60])


def write_job_log(path: Path, jobs: dict[int, Recorded]) -> None:
    """``job_id,submit_s,start_s,end_s,gpus,nodes`` (the twin's ``--job-log`` format)."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(("job_id", "submit_s", "start_s", "end_s", "gpus", "nodes"))
        for j in sorted(jobs.values(), key=lambda r: r.job_id):
            w.writerow((j.job_id, j.submit_s, j.start_s, j.end_s, j.gpus, j.nodes))


# ------------------------------------------------------------------------------ entry point
@contextlib.contextmanager
def slurm_site(munge: Munge | None = None) -> Iterator[tuple[Munge, Accounting]]:
    """munged (unless given) and the accounting (MariaDB + slurmdbd) every run shares."""
    with contextlib.ExitStack() as stack:
        if munge is None:
            munge = stack.enter_context(munged())
        root = Path(tempfile.mkdtemp(prefix="twin-acct-"))
        if not os.environ.get("TWIN_KEEP_SLURM"):
            stack.callback(shutil.rmtree, root, True)
        acct = Accounting(root, munge)
        stack.callback(acct.stop)
        acct.start()
        yield munge, acct


def run_scenarios(scenarios: list[Scenario], out: Path, munge: Munge, accounting: Accounting,
                  tag: str = "", plans: dict[str, list[Planned]] | None = None
                  ) -> dict[str, Outcome]:
    """Run every scenario's stream at once, each on its own Slurm.

    Each scenario's files go to ``out/<name><tag>/``: ``slurm.conf`` (with ``topology.conf``,
    ``gres.conf`` and the QOS as ``sacctmgr-qos.txt`` beside it), ``trace.csv`` (the stream),
    ``sacct.json`` (Slurm's record), ``slurm-log.csv`` (Slurm's starts as a job log) and
    ``slurmctld.log``.  ``plans`` replaces a scenario's drawn stream (by name).
    """
    # the streams start 0.2 s apart within their second, so that the runs' sbatch calls do
    # not all fall at once on a small machine (each is 50-100 ms of CPU)
    runs = [Run(s, Path(tempfile.mkdtemp(prefix=f"twin-{s.name}-")), phase_s=0.05 + 0.2 * i)
            for i, s in enumerate(scenarios)]
    try:
        for r in runs:
            r.start(munge, accounting)
        for r in runs:
            r.ready()
        plans = {r.scenario.name: (plans or {}).get(r.scenario.name) or stream(r.scenario)
                 for r in runs}
        threads = [threading.Thread(target=r.submit, args=(plans[r.scenario.name], r.t0()),
                                    daemon=True) for r in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in runs:
            if r.error is not None:
                raise SlurmRunError(f"{r.scenario.name}: sbatch failed: {r.error}")
        for r in runs:
            r.daemons.wait(f"every job of {r.scenario.name} to end", r.done,
                           max(10.0, r.t0() + RUN_DEADLINE - time.time()))
        outcomes = {}
        for r in runs:
            name = r.scenario.name
            where = out / f"{name}{tag}"
            where.mkdir(parents=True, exist_ok=True)
            raw = r.run("sacct", "--json", "-X", "-j",
                        ",".join(str(j) for j in r.submitted.values()))
            (where / "sacct.json").write_text(raw)
            jobs, epoch = recorded(json.loads(raw))
            planned_of = {job_id: plans[name][i] for i, job_id in r.submitted.items()}
            for f in ("slurm.conf", "topology.conf", "gres.conf"):
                shutil.copy(r.root / f, where / f)
            # the QOS as the twin's slurm policy reads them, beside slurm.conf
            (where / "sacctmgr-qos.txt").write_text(accounting.sacctmgr(
                "--parsable2", "show", "qos", "format=Name,Priority,Preempt,PreemptMode,"
                "PreemptExemptTime,GraceTime,MaxWall"))
            write_trace(where / "trace.csv", planned_of, jobs)
            write_job_log(where / "slurm-log.csv", jobs)
            shutil.copy(r.root / "log" / "slurmctld.log", where / "slurmctld.log")
            outcomes[name] = Outcome(r.scenario, plans[name], jobs, planned_of,
                                     where / "slurm.conf", where / "trace.csv",
                                     where / "sacct.json", epoch,
                                     round(r.ctld_started - epoch, 2))
        return outcomes
    finally:
        for r in runs:
            r.daemons.stop()
        if not os.environ.get("TWIN_KEEP_SLURM"):
            for r in runs:
                shutil.rmtree(r.root, ignore_errors=True)


# ------------------------------------------------------------------------------ the scenarios
BATCH = "PartitionName=batch Nodes=ALL Default=YES State=UP MaxTime=INFINITE\n"
NO_FACTORS = ("PriorityWeightFairshare=0\nPriorityWeightPartition=0\nPriorityWeightQOS=0\n"
              "PriorityWeightAssoc=0\n")
SCENARIOS = (
    # (a) first come, first served with backfill into the holes the gangs leave
    Scenario("backfill", "PriorityType=priority/basic\n" + BATCH, seed=11),
    # (b) age and job size: age grows to its weight in 2 minutes, big gangs first
    Scenario("multifactor", "PriorityType=priority/multifactor\nPriorityCalcPeriod=1\n"
             "PriorityMaxAge=0-0:02:00\nPriorityWeightAge=1000\nPriorityWeightJobSize=1000\n"
             "PriorityFavorSmall=NO\n" + NO_FACTORS + BATCH, seed=12),
    # (c) two partitions over the same nodes: the higher PriorityTier is scheduled first
    Scenario("tiers", "PriorityType=priority/basic\n"
             "PartitionName=low Nodes=ALL Default=YES State=UP MaxTime=INFINITE PriorityTier=1\n"
             "PartitionName=high Nodes=ALL State=UP MaxTime=INFINITE PriorityTier=2\n",
             seed=13, partitions=(("low", 0.7), ("high", 0.3))),
    # (d) QOS preemption: a high job requeues low jobs in its way
    Scenario("qos-preempt", "PriorityType=priority/multifactor\nPriorityWeightQOS=10000\n"
             "PriorityWeightAge=0\nPriorityWeightJobSize=0\nPreemptType=preempt/qos\n"
             "PreemptMode=REQUEUE\n" + BATCH, seed=14,
             qos=(("low", 0.6), ("normal", 0.15), ("high", 0.25)),
             qos_lines=("low", "high preempt=low priority=100")),
)
"""Issue 25's four: plain backfill holes, multifactor age + size, partition tiers, QOS
preemption with REQUEUE."""
