"""A real Prometheus on loopback: Debian's ``/usr/bin/prometheus`` (``apt-get install
prometheus``; ``.ci/run`` installs it).

:func:`prometheus_start` writes a configuration around the given ``scrape_configs`` (plain
dicts, as Prometheus' YAML has them: ``job_name``, ``metrics_path``, ``params``,
``static_configs``, ``authorization: {credentials: TOKEN}`` …), starts Prometheus on a free
loopback port with its storage under ``tmp_path``, waits until ``/-/ready`` and returns a
:class:`Prometheus` to query through the HTTP API. Import it from other test packages
(``from tests.prometheus.conftest import prometheus_start``); call ``.stop()`` after, or use the
``prometheus`` fixture here, which stops every server it started. Where the binary is missing
the test is skipped, with the reason.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

PROMETHEUS = os.environ.get("CLUSTERTWIN_PROMETHEUS_BIN", "/usr/bin/prometheus")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Prometheus:
    """A running Prometheus: ``url`` (``http://127.0.0.1:PORT``), its process and log."""

    url: str
    process: subprocess.Popen
    log: Path

    def api(self, path: str, **params) -> dict:
        """``GET /api/v1/<path>``'s ``data`` (a failed query raises with Prometheus' error)."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus {path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list:
        """An instant query's result: ``[{"metric": {...}, "value": [t, "v"]}, ...]``."""
        return self.api("query", query=expr)["result"]

    def targets(self) -> list[dict]:
        return self.api("targets")["activeTargets"]

    def wait(self, condition, *, timeout: float = 60.0, what: str = "a condition"):
        """Poll ``condition(self)`` until it returns something true; returns it."""
        end = time.monotonic() + timeout
        while True:
            value = condition(self)
            if value:
                return value
            if self.process.poll() is not None:
                pytest.fail(f"Prometheus exited ({self.process.returncode}):\n{self.log_tail()}")
            if time.monotonic() > end:
                scrapes = [(t["scrapePool"], t["health"], t["lastError"]) for t in self.targets()]
                pytest.fail(f"Prometheus: not {what} after {timeout:g} s (targets: {scrapes})")
            time.sleep(0.2)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def prometheus_start(tmp_path: Path, scrape_configs: list[dict], *,
                     scrape_interval: str = "1s", ready_timeout: float = 60.0) -> Prometheus:
    """Start Prometheus scraping ``scrape_configs`` every ``scrape_interval`` (each config may
    set its own ``scrape_interval`` too); skips the test where the binary is missing."""
    if not os.access(PROMETHEUS, os.X_OK):
        pytest.skip(f"{PROMETHEUS} is missing (apt-get install prometheus)")
    home = Path(tmp_path) / f"prometheus-{_free_port()}"
    home.mkdir(parents=True)
    config = {"global": {"scrape_interval": scrape_interval,
                         "scrape_timeout": scrape_interval,
                         "evaluation_interval": scrape_interval},
              "scrape_configs": scrape_configs}
    # JSON is YAML: no YAML writer needed
    (home / "prometheus.yml").write_text(json.dumps(config, indent=1))
    port = _free_port()
    log = home / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={home / 'prometheus.yml'}",
             f"--storage.tsdb.path={home / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
             "--log.level=warn"], stdout=out, stderr=subprocess.STDOUT, cwd=home)
    server = Prometheus(url=f"http://127.0.0.1:{port}", process=process, log=log)
    end = time.monotonic() + ready_timeout
    while True:
        if process.poll() is not None:
            pytest.fail(f"Prometheus exited ({process.returncode}):\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return server
        except OSError:
            pass
        if time.monotonic() > end:
            server.stop()
            pytest.fail(f"Prometheus not ready after {ready_timeout:g} s:\n{server.log_tail()}")
        time.sleep(0.1)


@pytest.fixture
def prometheus(tmp_path):
    """``prometheus(scrape_configs, **kw)``: :func:`prometheus_start`, stopped after the test."""
    started: list[Prometheus] = []

    def start(scrape_configs: list[dict], **kw) -> Prometheus:
        server = prometheus_start(tmp_path, scrape_configs, **kw)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
