"""A real Slurm on this machine: munged, slurmctld and one slurmd per exported node.

The daemons are Debian's (``apt-get install slurm-wlm munge``, Slurm 22.05 on bookworm); every
test here is skipped, with the reason, where they are not installed or where this is not root
(``SlurmUser=root``; slurmd serves many node names with ``-N`` as root only).

:func:`munge` starts one ``munged`` for the session with its own key, socket, pid, seed and
log files under a temporary folder.  :func:`slurm` returns a function that takes a folder
written by ``export_topology --format slurm-tree`` and starts Slurm on it: a ``slurm.conf``
built around the exported ``NodeName`` lines (one per node, ``NodeHostname=localhost`` and a
port of its own, every other field as exported), the exported ``topology.conf`` as is, and the
exported ``gres.conf`` with each device file moved under the temporary folder (a link to
``/dev/null``, so slurmd finds a character device).  It waits until slurmctld answers and
every node has registered, and stops the daemons after the test; a daemon that dies or a
wait that times out fails the test with the tail of every daemon's log.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.core.management import call_command

from scheduler.hardware.cluster import NodeGroup, plan_cluster
from tests.hostlists import expand
from twin import models as m

SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "scontrol", "sinfo")
START_TIMEOUT = 30.0
TAIL = 25


def which(name: str) -> str | None:
    return shutil.which(name, path=SBIN)


@pytest.fixture(scope="session")
def slurm_bins() -> dict[str, str]:
    """Paths of the munge and Slurm programs; skips the test where one is missing."""
    found = {name: which(name) for name in DAEMONS}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        pytest.skip(f"Slurm/munge not installed ({', '.join(missing)} not found); "
                    "apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        pytest.skip("the Slurm tests run slurmctld and slurmd as root (SlurmUser=root)")
    return found


def conf_lines(text: str) -> list[dict[str, str]]:
    """``Key=value`` lines of a Slurm file or of ``scontrol show`` output, comments left out."""
    return [dict(kv.split("=", 1) for kv in line.split())
            for line in text.splitlines() if line.strip() and not line.startswith("#")]


def tail(path: Path, n: int = TAIL) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as err:
        return f"  ({err})"
    return "\n".join(f"  {line}" for line in lines[-n:]) or "  (empty)"


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on localhost just now."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def stop(procs: list[subprocess.Popen], timeout: float = 10.0) -> None:
    """SIGTERM each process, then SIGKILL what is still running after ``timeout`` seconds."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


@dataclass
class Munge:
    socket: Path
    log: Path


@pytest.fixture(scope="session")
def munge(slurm_bins):
    """One munged for the session, with its own key, socket, pid, seed and log files."""
    # a short folder of its own: a Unix socket's path is limited to 107 bytes
    root = Path(tempfile.mkdtemp(prefix="twin-munge-"))
    os.chmod(root, 0o700)
    key, sock, log = root / "munge.key", root / "munge.socket", root / "munged.log"
    made = subprocess.run([slurm_bins["mungekey"], "--create", "--keyfile", str(key)],
                          capture_output=True, text=True)
    if made.returncode:
        key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o600)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [slurm_bins["munged"], "--foreground", "--force", f"--socket={sock}",
             f"--key-file={key}", f"--log-file={log}", f"--pid-file={root / 'munged.pid'}",
             f"--seed-file={root / 'munged.seed'}"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"munged did not start (exit {proc.poll()}); its log:\n{tail(log)}")
            time.sleep(0.05)
        yield Munge(sock, log)
    finally:
        stop([proc])
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Slurm:
    """A running Slurm: its config, the daemons, and its client commands."""

    root: Path
    conf: Path
    nodes: list[str]
    bins: dict[str, str]
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf), "PATH": SBIN}

    def run(self, *args: str, timeout: float = 20.0) -> str:
        """Run a Slurm client command (``scontrol``, ``sinfo``...) and return its stdout."""
        proc = subprocess.run(list(args), capture_output=True, text=True, env=self.env,
                              timeout=timeout)
        if proc.returncode:
            raise AssertionError(f"{' '.join(args)} exited {proc.returncode}: "
                                 f"{proc.stderr.strip()}\n{self.report()}")
        return proc.stdout

    def hostnames(self, expr: str) -> list[str]:
        """A hostlist expression expanded by Slurm itself (``scontrol show hostnames``)."""
        return self.run("scontrol", "show", "hostnames", expr).split() if expr else []

    def report(self) -> str:
        """Each daemon's state and the tail of its log, for failure messages."""
        parts = []
        for name, proc in self.procs.items():
            state = "running" if proc.poll() is None else f"exited {proc.returncode}"
            parts.append(f"--- {name} ({state}), {self.logs[name]}:\n{tail(self.logs[name])}")
        return "\n".join(parts)

    def wait(self, what: str, ready, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while True:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                pytest.fail(f"Slurm daemon {dead[0]} died while waiting for {what}\n"
                            f"{self.report()}")
            try:
                if ready():
                    return
            except (AssertionError, subprocess.TimeoutExpired, ValueError) as err:
                last = err
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} "
                            f"(last: {last})\n{self.report()}")
            time.sleep(0.2)

    def node_states(self) -> dict[str, dict]:
        """``sinfo --json`` nodes by name (Slurm 22.05's ``scontrol`` has no ``--json``)."""
        return {n["name"]: n for n in json.loads(self.run("sinfo", "--json"))["nodes"]}


def daemon_conf(root: Path, munge: Munge, cluster: str, ctld_port: int,
                slurmd_port: int) -> str:
    """The ``slurm.conf`` lines of a test Slurm's daemons: its name, munge, users, ports and
    the state, spool, pid and log files under ``root``."""
    return f"""\
ClusterName={cluster}
SlurmctldHost=localhost
AuthType=auth/munge
AuthInfo=socket={munge.socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/spool/%n/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info"""


def slurm_conf(root: Path, munge: Munge, node_lines: list[dict[str, str]],
               ports: list[int]) -> tuple[str, list[str]]:
    """``slurm.conf`` text and the node names, one ``NodeName`` line per node."""
    ctld_port, slurmd_port, *node_ports = ports
    lines, names = [], []
    for line in node_lines:
        rest = " ".join(f"{k}={v}" for k, v in line.items() if k != "NodeName")
        for host in expand(line["NodeName"]):
            lines.append(f"NodeName={host} NodeHostname=localhost NodeAddr=127.0.0.1 "
                         f"Port={node_ports[len(names)]} {rest}")
            names.append(host)
    conf = f"""\
# written by tests/slurm/conftest.py around the exported slurm-nodes.conf
{daemon_conf(root, munge, "twintest", ctld_port, slurmd_port)}
TopologyPlugin=topology/tree
GresTypes=gpu
SelectType=select/cons_tres
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MailProg=/bin/true
# the exported CPUs and RealMemory are the inventory's, not this machine's
SlurmdParameters=config_overrides
# an operator's DOWN stays down (1); a node down for not responding comes back when it registers
ReturnToService=1
{chr(10).join(lines)}
PartitionName=all Nodes=ALL Default=YES State=UP MaxTime=INFINITE
"""
    return conf, names


def gres_conf(text: str, devroot: Path) -> str:
    """The exported ``gres.conf`` with each ``File=`` moved under ``devroot`` (links to
    ``/dev/null``, a character device as slurmd wants)."""
    out = []
    for line in text.splitlines():
        match = re.search(r"\bFile=(\S+)", line)
        if match and not line.startswith("#"):
            for path in expand(match.group(1)):
                dev = devroot / path.lstrip("/")
                dev.parent.mkdir(parents=True, exist_ok=True)
                if not dev.is_symlink():
                    dev.symlink_to("/dev/null")
            line = line.replace(f"File={match.group(1)}", f"File={devroot}{match.group(1)}")
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.fixture
def slurm(slurm_bins, munge, tmp_path_factory):
    """Start Slurm on a folder written by ``export_topology --format slurm-tree``."""
    started: list[Slurm] = []

    def start(export_dir: Path) -> Slurm:
        export_dir = Path(export_dir)
        root = tmp_path_factory.mktemp("slurm")
        for sub in ("state", "spool", "log"):
            (root / sub).mkdir()
        node_lines = conf_lines((export_dir / "slurm-nodes.conf").read_text())
        count = sum(len(expand(line["NodeName"])) for line in node_lines)
        conf_text, names = slurm_conf(root, munge, node_lines, free_ports(count + 2))
        conf = root / "slurm.conf"
        conf.write_text(conf_text)
        shutil.copy(export_dir / "topology.conf", root / "topology.conf")
        (root / "gres.conf").write_text(gres_conf((export_dir / "gres.conf").read_text(),
                                                  root / "devroot"))
        cluster = Slurm(root, conf, names, slurm_bins)
        started.append(cluster)

        def daemon(name: str, log: Path, *args: str) -> None:
            cluster.logs[name] = log
            with open(root / "log" / f"{name}.out", "w") as out:
                cluster.procs[name] = subprocess.Popen(
                    list(args), stdout=out, stderr=subprocess.STDOUT, env=cluster.env,
                    cwd=root, start_new_session=True)

        daemon("slurmctld", root / "log" / "slurmctld.log",
               slurm_bins["slurmctld"], "-D", "-i", "-f", str(conf))
        cluster.wait("slurmctld to answer `scontrol ping`",
                     lambda: "is UP" in cluster.run("scontrol", "ping"))
        for host in names:
            (root / "spool" / host).mkdir()
            daemon(f"slurmd {host}", root / "log" / f"slurmd-{host}.log",
                   slurm_bins["slurmd"], "-D", "-N", host, "-f", str(conf))

        def all_registered() -> bool:
            states = cluster.node_states()
            waiting = [n for n in names if n not in states
                       or not {"idle", "allocated", "mixed"} & set(
                           states[n]["state"].split("+") if isinstance(states[n]["state"], str)
                           else states[n]["state"])]
            if waiting:
                raise ValueError(f"{len(waiting)} nodes not idle yet, e.g. {waiting[0]}: "
                                 f"{states.get(waiting[0], {}).get('state')}")
            return True

        cluster.wait(f"all {len(names)} slurmd to register", all_registered)
        return cluster

    yield start
    for cluster in started:
        stop(list(cluster.procs.values()))


# ------------------------------------------------------------------ shared by the test modules
PLANS = {
    "fat-tree": lambda: plan_cluster(
        "ft", (NodeGroup("H100-SXM", 12), NodeGroup("MI300X", 4, spares=1)),
        fabric_kind="fat-tree", fabric_kw={"radix": 8}),
    "rail": lambda: plan_cluster(
        "rail", (NodeGroup("H100-SXM", 24),),
        fabric_kind="rail", fabric_kw={"radix": 16, "su_per_group": 1}),
}
"""The two clusters every Slurm test runs: a fat-tree of 16 nodes and a rail cluster of 24."""


@pytest.fixture(autouse=True)
def engine_off(settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "ENGINE_MODE": "off"}


def export_tree(tmp_path: Path) -> Path:
    """``export_topology --format slurm-tree`` of the database's cluster into a new folder."""
    out = tmp_path / "export"
    out.mkdir()
    call_command("export_topology", "--format", "slurm-tree", "--out",
                 str(out / "topology.conf"), stdout=io.StringIO())
    return out


def slurm_tree(slurm) -> dict[str, dict]:
    """Switch -> {"level", "nodes", "switches"} from ``scontrol show topology``."""
    tree = {}
    for line in conf_lines(slurm.run("scontrol", "show", "topology")):
        assert line["SwitchName"] not in tree, f"switch {line['SwitchName']} listed twice"
        tree[line["SwitchName"]] = {"level": int(line["Level"]),
                                    "nodes": set(slurm.hostnames(line.get("Nodes", ""))),
                                    "switches": set(slurm.hostnames(line.get("Switches", "")))}
    return tree


def leaf_sets(cluster) -> set[frozenset[str]]:
    """Sets of nodes joined by the leaf switches their NICs are cabled to (inventory rows)."""
    parent: dict = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for host, leaf in m.Link.objects.filter(cluster=cluster, node__isnull=False).values_list(
            "node__hostname", "switch__name"):
        parent[root(("host", host))] = root(("leaf", leaf))
    groups: dict = {}
    for key in list(parent):
        if key[0] == "host":
            groups.setdefault(root(key), set()).add(key[1])
    return {frozenset(g) for g in groups.values()}
