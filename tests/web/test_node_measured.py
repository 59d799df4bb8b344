"""A mirror's node page shows what the node's dcgm-exporter measured (issue 26): the same
Prometheus query as the poller's, for that node alone, with NVLink and PCIe traffic; a
Prometheus that fails is one line on the page, and a twin that simulates shows no such table."""

from __future__ import annotations

import re
from urllib.parse import parse_qs

import pytest

from tests.web.test_mirror_sources import server  # noqa: F401  (the fixture)
from twin import models as m

pytestmark = pytest.mark.django_db


def sample(host: str, gpu: int, metric: str, value: float) -> dict:
    return {"metric": {"__name__": metric, "Hostname": host, "gpu": str(gpu), "UUID": f"U{gpu}"},
            "value": [1_800_000_000.0, str(value)]}


@pytest.fixture
def mirror(settings, small_cluster, server):  # noqa: F811
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "SOURCE": "mirror",
                            "PROMETHEUS_URL": server.url}
    host = m.Node.objects.filter(rack__hall__site__cluster=small_cluster).order_by("id")[0]
    return host.hostname


def rows(html: str) -> list[str]:
    table = html.split('id="node-measured-gpus"', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr><td>.*?</tr>", table, re.S)


def test_the_node_page_shows_the_exporter_s_measurements_with_nvlink_and_pcie(
        mirror, server, login):  # noqa: F811
    asked = []

    def answer(url):
        asked.append(parse_qs(url.query)["query"][0])
        result = [sample(mirror, 0, "DCGM_FI_DEV_GPU_UTIL", 87),
                  sample(mirror, 0, "DCGM_FI_DEV_POWER_USAGE", 612.4),
                  sample(mirror, 0, "DCGM_FI_PROF_NVLINK_TX_BYTES", 2 * 2**30),
                  sample(mirror, 0, "DCGM_FI_PROF_NVLINK_RX_BYTES", 1 * 2**30),
                  sample(mirror, 0, "DCGM_FI_PROF_PCIE_TX_BYTES", 5 * 2**20),
                  sample(mirror, 3, "DCGM_FI_DEV_XID_ERRORS", 79)]
        return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}, 0

    server.answer = answer
    html = login("operator").get("/nodes/0/").content.decode()
    assert asked and f'Hostname="{mirror}"' in asked[0]  # that node only, not the fleet
    got = rows(html)
    assert len(got) == 8
    assert 'class="m-util">87<' in got[0] and 'class="m-power">612<' in got[0]
    assert 'class="m-nvlink">3.0\xa0GB/s<' in got[0] and 'class="m-pcie">5.0\xa0MB/s<' in got[0]
    assert 'class="m-xid">79<' in got[3] and 'class="m-util">–<' in got[3]
    assert 'class="m-nvlink">–<' in got[1]  # not reported: a dash, never a zero


def test_a_failing_prometheus_is_one_line_on_the_page(mirror, server, login):  # noqa: F811
    server.answer = lambda url: (503, {"status": "error", "error": "scrape pool busy"}, 0)
    html = login("operator").get("/nodes/0/").content.decode()
    error = html.split('id="node-measured-error">', 1)[1].split("<", 1)[0]
    assert "answered HTTP 503: scrape pool busy" in error


def test_a_simulating_twin_shows_no_measured_table(settings, small_cluster, login):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "SOURCE": "simulate",
                            "PROMETHEUS_URL": "http://127.0.0.1:9"}
    html = login("operator").get("/nodes/0/").content.decode()
    assert "node-measured" not in html
