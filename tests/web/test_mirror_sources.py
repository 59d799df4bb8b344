"""Issue 14: the mirror's readers of Slurm and Prometheus parse what the sources say, or fail
with one line naming the source.

Slurm: answers recorded from Debian's Slurm 22.05 and hand-written samples of 23.02+ shapes
(``tests/fixtures/slurm_json/README.md``), read directly, through fake ``sinfo``/``squeue``/
``sacct`` programs on PATH, and from a fake slurmrestd.  Prometheus: a local HTTP server thread
serving canned ``/api/v1/query`` answers.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from twin.mirror.errors import SourceError
from twin.mirror.prom_source import DCGM_METRICS, parse_prom, prom_view
from twin.mirror.slurm_source import parse_sacct, parse_sinfo, parse_squeue, slurm_view

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SLURM = FIXTURES / "slurm_json"
PROM = FIXTURES / "prom_json"


def load(name: str) -> dict:
    return json.loads((SLURM / name).read_text())


def by_id(jobs) -> dict:
    return {job.job_id: job for job in jobs}


# ------------------------------------------------------------------ Slurm 22.05, recorded


def test_sinfo_22_05_gives_each_node_its_state_flags_reason_and_gpus():
    nodes, partitions = parse_sinfo(load("sinfo-22.05.json"))
    assert sorted(nodes) == [f"rec-n{i:06d}" for i in range(8)]
    assert partitions == ("all",)
    assert nodes["rec-n000002"].state == {"mixed", "drain", "draining"}
    assert nodes["rec-n000002"].reason == "xid 79 on gpu 3"
    assert nodes["rec-n000006"].state == {"idle", "drain", "drained"}
    assert nodes["rec-n000006"].reason == "maintenance: reseat NIC"
    assert nodes["rec-n000000"].state == {"mixed"} and nodes["rec-n000007"].state == {"idle"}
    assert {(n.gres, n.gpus, n.partitions, n.features) for n in nodes.values()} == {
        ("gpu:h100_sxm:8", 8, ("all",), ())}


def test_squeue_22_05_keeps_running_pending_and_recently_finished_jobs():
    jobs = by_id(parse_squeue(load("squeue-22.05.json")))
    assert sorted(jobs) == ["1", "10", "2", "3", "4", "5_0", "5_1", "6", "8", "9"]
    ok, bad, train, victim = jobs["1"], jobs["2"], jobs["3"], jobs["6"]
    assert (ok.state, ok.reason, ok.exit_code, ok.nodes) == ("COMPLETED", "", 0, ("rec-n000000",))
    assert (bad.state, bad.reason, bad.exit_code) == ("FAILED", "NonZeroExitCode", 3)
    assert (train.state, train.nodes) == ("RUNNING", ("rec-n000000", "rec-n000001"))
    assert (train.gpus, train.gpus_per_node, train.exit_code, train.user) == (16, 8, None, "root")
    assert train.start_time - train.submit_time == 3.0 and train.time_limit_s is None
    assert (jobs["4"].gpus, jobs["4"].time_limit_s) == (4, 1800.0)
    assert jobs["4"].end_time - jobs["4"].start_time == 1800.0
    assert [(jobs[k].state, jobs[k].gpus, jobs[k].nodes) for k in ("5_0", "5_1")] == [
        ("RUNNING", 1, ("rec-n000003",)), ("RUNNING", 1, ("rec-n000004",))]
    # the node set down under it: killed by SIGTERM (raw wait status 15)
    assert (victim.state, victim.reason, victim.exit_code) == ("NODE_FAIL", "NodeDown", 143)
    big, after = jobs["8"], jobs["9"]
    assert (big.state, big.reason, big.nodes, big.gpus, big.gpus_per_node) == \
        ("PENDING", "Resources", (), 64, 8)
    assert big.start_time is None and big.end_time is None and big.exit_code is None
    assert (after.reason, after.gpus) == ("Priority", 8)
    assert (jobs["10"].state, jobs["10"].reason) == ("CANCELLED", "JobHeldUser")


# ------------------------------------------------------------------ newer shapes, hand-written


def test_slurmrestd_24_05_nodes_read_state_lists_and_feature_lists():
    nodes, partitions = parse_sinfo(load("nodes-24.05.json"), origin="GET /slurm/v0.0.41/nodes")
    assert partitions == ("gpu", "debug")
    assert nodes["gpu-a03"].state == {"mixed", "drain", "draining"}
    assert nodes["gpu-a04"].state == {"idle", "drain", "drained"}
    assert nodes["gpu-a05"].state == {"down", "not_responding"}
    assert nodes["gpu-a05"].reason == "Not responding"
    assert nodes["gpu-a06"].state == {"allocated", "maint", "reserved"}
    assert nodes["gpu-a06"].partitions == ("gpu", "debug")
    assert (nodes["gpu-a01"].gpus, nodes["gpu-a01"].features) == (8, ("h100", "ib"))
    assert (nodes["cpu-b01"].gpus, nodes["cpu-b01"].gres) == (0, "")


def test_sinfo_23_11_entries_grouping_nodes_are_split_per_node_and_partitions_merged():
    nodes, partitions = parse_sinfo(load("sinfo-24.11.json"))
    assert partitions == ("gpu", "debug")
    assert sorted(nodes) == ["cpu-b01", "gpu-a01", "gpu-a02", "gpu-a03", "gpu-a05", "gpu-a06"]
    assert nodes["gpu-a06"].partitions == ("gpu", "debug")
    assert nodes["gpu-a02"].state == {"mixed"} and nodes["gpu-a02"].gpus == 8
    assert (nodes["gpu-a03"].state, nodes["gpu-a03"].reason) == (
        {"mixed", "drain", "draining"}, "xid 79 on gpu 3")
    assert nodes["gpu-a01"].features == ("h100", "ib")


def test_squeue_24_05_reads_no_val_numbers_state_lists_arrays_and_gpu_requests():
    jobs = by_id(parse_squeue(load("squeue-24.05.json")))
    llama = jobs["101"]
    assert (llama.state, llama.nodes, llama.gpus, llama.gpus_per_node) == (
        "RUNNING", ("gpu-a02", "gpu-a03"), 16, 8)
    assert (llama.time_limit_s, llama.start_time, llama.exit_code) == (86400.0, 1796390100.0,
                                                                       None)
    # asked per socket (not read): the allocation in gres_detail gives the GPUs
    assert (jobs["100_3"].gpus, jobs["100_3"].nodes) == (2, ("gpu-a06",))
    rest = jobs["100_[4-9]"]
    assert (rest.state, rest.reason, rest.gpus, rest.time_limit_s) == (
        "PENDING", "JobArrayTaskLimit", 2, None)
    assert (jobs["103"].reason, jobs["103"].gpus) == ("QOSMaxGRESPerUser", 512)
    assert (jobs["104"].reason, jobs["104"].gpus, jobs["104"].gpus_per_node) == (
        "ReqNodeNotAvail, UnavailableNodes:gpu-a05", 4, 4)
    assert jobs["105"].state == "COMPLETING"            # a set flag is shown, as squeue does
    assert (jobs["106"].state, jobs["106"].exit_code, jobs["106"].gpus) == ("FAILED", 2, 8)
    assert (jobs["107"].state, jobs["107"].exit_code, jobs["107"].gpus) == (
        "OUT_OF_MEMORY", 137, 4)
    assert (jobs["108"].state, jobs["108"].exit_code, jobs["108"].gpus) == ("NODE_FAIL", 143, 8)


@pytest.mark.parametrize("fixture", ["sacct-22.05.json", "sacct-24.05.json"])
def test_sacct_22_05_and_24_05_give_finished_jobs_with_their_gpus_and_exit(fixture):
    jobs = by_id(parse_sacct(load(fixture)))
    assert sorted(jobs) == ["90", "91", "92_1"]
    done, late, gone = jobs["90"], jobs["91"], jobs["92_1"]
    assert (done.state, done.nodes, done.gpus, done.gpus_per_node, done.exit_code) == (
        "COMPLETED", ("gpu-a01", "gpu-a02"), 16, 8, 0)
    assert (done.user, done.account, done.end_time, done.time_limit_s) == (
        "bob", "vision", 1796385000.0, 7200.0)
    assert (late.state, late.exit_code, late.gpus) == ("TIMEOUT", 137, 8)
    assert (gone.state, gone.nodes, gone.start_time, gone.gpus) == ("CANCELLED", (), None, 0)


# ------------------------------------------------------------------ slurm_view, fake commands


def fake_bin(tmp_path: Path, scripts: dict[str, str]) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def recorded_cli(tmp_path: Path, sacct: str) -> Path:
    return fake_bin(tmp_path, {
        "sinfo": f'[ "$SLURM_CONF" = /etc/twin/slurm.conf ] || exit 9\n'
                 f'/bin/cat {SLURM / "sinfo-22.05.json"}',
        "squeue": f'[ "$1 $2" = "--json --all" ] || exit 9\n'
                  f'/bin/cat {SLURM / "squeue-22.05.json"}',
        "sacct": sacct})


def test_slurm_view_without_accounting_says_so_and_keeps_squeues_finished_jobs(tmp_path,
                                                                               monkeypatch):
    disabled = f"/bin/cat {SLURM / 'sacct-22.05.stderr'} >&2; exit 1"
    monkeypatch.setenv("PATH", str(recorded_cli(tmp_path, disabled)))
    view = slurm_view(conf=Path("/etc/twin/slurm.conf"), clock=lambda: 1234.5)
    assert (view.source, view.read_at, view.accounting) == ("cli", 1234.5, False)
    assert view.accounting_note.endswith("exited 1: Slurm accounting storage is disabled")
    assert len(view.nodes) == 8 and view.partitions == ("all",)
    assert {j.job_id: j.state for j in view.jobs}["2"] == "FAILED"


def test_slurm_view_adds_accountings_jobs_that_squeue_no_longer_lists(tmp_path, monkeypatch):
    sacct = f'[ "$1 $2 $3" = "--json --allusers --starttime" ] || exit 9\n' \
            f'/bin/cat {SLURM / "sacct-22.05.json"}'
    monkeypatch.setenv("PATH", str(recorded_cli(tmp_path, sacct)))
    view = slurm_view(conf=Path("/etc/twin/slurm.conf"))
    assert view.accounting and view.accounting_note == ""
    ids = [job.job_id for job in view.jobs]
    assert ids[:10] == [j.job_id for j in parse_squeue(load("squeue-22.05.json"))]
    assert ids[10:] == ["90", "91", "92_1"]


GOOD = f"/bin/cat {SLURM / 'sinfo-22.05.json'}"


@pytest.mark.parametrize("scripts, message", [
    (None, "slurm: sinfo not found: is Slurm's client installed and on PATH?"),
    ({"sinfo": "exec /bin/sleep 5"}, "slurm: `sinfo --json` did not answer within 0.5 s"),
    ({"sinfo": "echo 'sinfo: error: resolve_ctls_from_dns_srv: res_nsearch error' >&2\n"
               "echo 'sinfo: fatal: Could not establish a configuration source' >&2; exit 1"},
     "slurm: `sinfo --json` exited 1: sinfo: fatal: Could not establish a configuration "
     "source"),
    ({"sinfo": "echo '{\"nodes\": [}'"}, "slurm: `sinfo --json` did not give JSON"),
    ({"sinfo": "echo '[]'"}, "slurm: `sinfo --json`: expected a JSON object, got list"),
    ({"sinfo": "echo '{\"meta\": {}}'"},
     "slurm: `sinfo --json`: unexpected JSON at nodes: expected a list, got null"),
    ({"sinfo": "echo '{\"nodes\": [{\"name\": 5, \"state\": \"idle\"}]}'"},
     "slurm: `sinfo --json`: unexpected JSON at nodes[0].name: expected a string, got int"),
    ({"sinfo": "echo '{\"nodes\": [], \"errors\": [{\"error\": \"Unable to contact slurm "
               "controller\"}]}'"},
     "slurm: `sinfo --json` reported an error: Unable to contact slurm controller"),
    ({"sinfo": GOOD, "squeue": "echo '{\"jobs\": [{\"job_id\": 7, \"job_state\": 3}]}'"},
     "slurm: `squeue --json --all`: unexpected JSON at jobs[0].job_state: expected a string or "
     "a list of strings, got int"),
    ({"sinfo": GOOD, "squeue": "echo '{\"jobs\": [{\"job_state\": \"RUNNING\"}]}'"},
     "slurm: `squeue --json --all`: unexpected JSON at jobs[0].job_id: missing"),
    ({"sinfo": GOOD, "squeue": "echo '{\"jobs\": []}'", "sacct": "echo 'not json'"},
     "slurm: `sacct --json --allusers --starttime now-3600seconds` did not give JSON"),
])
def test_a_slurm_that_cannot_be_read_gives_one_line_naming_the_source(tmp_path, monkeypatch,
                                                                       scripts, message):
    path = fake_bin(tmp_path, scripts) if scripts else tmp_path
    monkeypatch.setenv("PATH", str(path))
    with pytest.raises(SourceError) as err:
        slurm_view(timeout=0.5)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value) and err.value.source == "slurm"


# ------------------------------------------------------------------ HTTP: slurmrestd, Prometheus


class Canned(BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.requests.append((self.path, self.headers))   # names: any case
        status, body, delay = self.server.answer(urlsplit(self.path))
        time.sleep(delay)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if data[:2] == b"\x1f\x8b":
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """A local HTTP server; set ``.answer(url) -> (status, body, delay_s)``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Canned)
    httpd.daemon_threads = True
    httpd.requests = []
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_slurmrestd_is_read_with_the_user_and_token_headers(server):
    def answer(url):
        return {"/openapi/v3": (200, load("openapi-22.05.json"), 0),
                "/slurm/v0.0.38/nodes": (200, load("sinfo-22.05.json"), 0),
                "/slurm/v0.0.38/jobs": (200, load("squeue-22.05.json"), 0),
                "/slurm/v0.0.38/reservations": (200, load("reservations-22.05.json"), 0)}.get(
            url.path, (500, {"errors": [{"error": "Unable to connect to database"}]}, 0))

    server.answer = answer
    view = slurm_view(rest_url=server.url + "/", token="jwt-abc", user="twin",
                      clock=lambda: 5000.0)
    assert (view.source, len(view.nodes), len(view.jobs), view.accounting) == (
        "rest", 8, 10, False)
    assert "answered HTTP 500: Unable to connect to database" in view.accounting_note
    assert view.rest_version == "v0.0.38" and [r.name for r in view.reservations] == [
        "psu-swap"]
    paths = [p for p, _ in server.requests]
    assert paths == ["/openapi/v3", "/slurm/v0.0.38/nodes", "/slurm/v0.0.38/jobs",
                     "/slurm/v0.0.38/reservations", "/slurmdb/v0.0.38/jobs?start_time=1400"]
    assert all(h["X-SLURM-USER-NAME"] == "twin" and h["X-SLURM-USER-TOKEN"] == "jwt-abc"
               for _, h in server.requests)


def rest_24_11(url, *, reservations=None):
    reservations = reservations or (200, load("reservations-24.11.json"), 0)
    return {"/openapi/v3": (200, load("openapi-24.11.json"), 0),
            "/slurm/v0.0.42/nodes": (200, load("nodes-24.11.json"), 0),
            "/slurm/v0.0.42/jobs": (200, load("squeue-24.11.json"), 0),
            "/slurm/v0.0.42/reservations": reservations,
            "/slurmdb/v0.0.42/jobs": (200, load("sacct-24.11.json"), 0)}.get(
        url.path, (404, b"Unable to find requested URL", 0))


def test_slurmrestd_24_11_is_read_at_v0_0_42_with_allocations_and_reservations(server):
    server.answer = rest_24_11
    view = slurm_view(rest_url=server.url, token="jwt", user="twin")
    assert (view.rest_version, view.accounting, view.reservations_note) == ("v0.0.42", True, "")
    jobs = by_id(view.jobs)
    assert (jobs["302"].cpus_by_node, jobs["302"].gpus_by_node) == ((32, 16), (4, 4))
    assert jobs["401"].mem_mb_by_node == (131072,) * 3         # from accounting
    assert view.nodes["mig-01"].mig and view.nodes["lean-06"].state == {"idle",
                                                                         "powered_down"}
    assert [r.name for r in view.reservations if r.maintenance] == ["psu-swap"]
    # a version given is used as is: no OpenAPI document asked for
    server.requests.clear()
    assert slurm_view(rest_url=server.url, rest_version="v0.0.42").rest_version == "v0.0.42"
    assert "/openapi/v3" not in [p for p, _ in server.requests]


def test_reservations_that_cannot_be_read_are_a_note_not_an_error(server):
    server.answer = lambda url: rest_24_11(url, reservations=(
        403, {"errors": [{"description": "Access denied"}]}, 0))
    view = slurm_view(rest_url=server.url)
    assert view.reservations == [] and len(view.jobs) == 8
    assert view.reservations_note.endswith("/slurm/v0.0.42/reservations answered HTTP 403: "
                                           "Access denied")


def test_cli_reservations_fall_back_to_scontrols_text_on_22_05(tmp_path, monkeypatch):
    text = ("ReservationName=psu StartTime=2026-12-04T10:00:00 EndTime=2026-12-04T11:00:00 "
            "Duration=01:00:00\n   Nodes=rec-n[000006-000007] NodeCnt=2 Flags=MAINT\n")
    scontrol = ('[ "$1" = --json ] && { echo "scontrol: unrecognized option \'--json\'" >&2; '
                f'exit 1; }}\nprintf "{text}"')
    disabled = "echo 'Slurm accounting storage is disabled' >&2; exit 1"
    bin_dir = recorded_cli(tmp_path, disabled)
    fake_bin(tmp_path, {"scontrol": scontrol})
    monkeypatch.setenv("PATH", str(bin_dir))
    view = slurm_view(conf=Path("/etc/twin/slurm.conf"))
    assert [(r.name, r.nodes, r.maintenance) for r in view.reservations] == [
        ("psu", ("rec-n000006", "rec-n000007"), True)]
    assert view.reservations_note == ""
    fake_bin(tmp_path, {"scontrol": "echo 'scontrol: error: slurm_load_reservations' >&2; "
                                    "exit 1"})
    view = slurm_view(conf=Path("/etc/twin/slurm.conf"))
    assert view.reservations == [] and len(view.nodes) == 8
    assert view.reservations_note.endswith("`scontrol show reservation` exited 1: scontrol: "
                                           "error: slurm_load_reservations")


def test_slurmrestd_refusing_the_token_is_one_line(server):
    server.answer = lambda url: (401, b"Authentication failure", 0)
    with pytest.raises(SourceError, match=r"^slurmrestd http://127\.0\.0\.1:\d+: GET "
                                          r".*/openapi/v3 answered HTTP 401: "
                                          r"Authentication failure$"):
        slurm_view(rest_url=server.url, token="expired")


def prom_answer(name: str):
    return json.loads((PROM / name).read_text())


def test_prometheus_answer_becomes_gpu_columns_with_nan_where_missing(server):
    server.answer = lambda url: (200, prom_answer("query-good.json"), 0)
    view = prom_view(server.url, token="s3cret", clock=lambda: 99.0,
                     expect_hosts=["gpu-a01", "gpu-a02", "gpu-a03"])
    path, headers = server.requests[0]
    query = parse_qs(urlsplit(path).query)["query"][0]
    assert urlsplit(path).path == "/api/v1/query"
    assert query.startswith("max by (__name__, Hostname, gpu, UUID) ({__name__=~\"")
    assert all(m in query for m in DCGM_METRICS) and headers["Authorization"] == "Bearer s3cret"
    assert view.hosts == ("gpu-a01", "gpu-a02") and len(view) == 4
    assert view.host_index.tolist() == [0, 0, 1, 1] and view.gpu.tolist() == [0, 1, 0, 1]
    assert view.uuid.tolist() == ["GPU-gpu-a01-0", "GPU-gpu-a01-1", "GPU-gpu-a02-0",
                                  "GPU-gpu-a02-1"]
    v = view.values
    assert v["DCGM_FI_DEV_GPU_UTIL"].tolist() == [40, 41, 40, 41]
    assert np.isnan(v["DCGM_FI_DEV_POWER_USAGE"][0]) and v["DCGM_FI_DEV_POWER_USAGE"][1] == 412.5
    assert v["DCGM_FI_DEV_GPU_TEMP"][:3].tolist() == [61, 61, 61]
    assert np.isnan(v["DCGM_FI_DEV_GPU_TEMP"][3])             # no sample: NaN, not 0
    assert v["DCGM_FI_DEV_XID_ERRORS"][[0, 3]].tolist() == [0, 79]
    assert np.isnan(v["DCGM_FI_DEV_XID_ERRORS"][[1, 2]]).all()
    assert np.isnan(v["DCGM_FI_PROF_NVLINK_TX_BYTES"]).all()   # asked for, never reported
    assert (view.stale, view.rejected, view.read_at, view.eval_time) == (
        ["gpu-a03"], 0, 99.0, 1796393600.781)


def test_a_gzip_answer_is_decompressed(server):
    server.answer = lambda url: (
        200, gzip.compress(json.dumps(prom_answer("query-good.json")).encode()), 0)
    view = prom_view(server.url)
    assert server.requests[0][1]["Accept-Encoding"] == "gzip"
    assert view.values["DCGM_FI_DEV_GPU_UTIL"].tolist() == [40, 41, 40, 41]


def test_prometheus_duplicate_series_of_one_gpu_keep_the_largest_value():
    view = parse_prom(prom_answer("query-raw-labels.json"))
    assert view.hosts == ("gpu-a01",) and view.gpu.tolist() == [0]
    assert view.values["DCGM_FI_DEV_XID_ERRORS"].tolist() == [79]
    assert view.values["DCGM_FI_DEV_GPU_UTIL"].tolist() == [97]
    assert view.uuid.tolist() == ["GPU-5c0b2b5e-3f0a-7d36-4c6a-1c0e9a3b7f21"]


@pytest.mark.parametrize("change, note", [
    (lambda s: s["value"].__setitem__(1, "n/a"), "a sample's value is not a number ('n/a')"),
    (lambda s: s["metric"].pop("Hostname"), "data.result[5]: no 'Hostname' label"),
    (lambda s: s["metric"].__setitem__("gpu", "GPU-0"), "data.result[5]: gpu label 'GPU-0' is"),
    (lambda s: s["metric"].__setitem__("__name__", "up"), "data.result[5]: metric 'up' was not"),
    (lambda s: s.pop("value"), "data.result[5]: value None is not a [time, value] pair"),
])
def test_a_bad_sample_is_counted_and_left_out_never_stored_as_zero(change, note):
    doc = prom_answer("query-good.json")
    sample = doc["data"]["result"][5]                   # gpu-a01 GPU 1, power
    assert sample["metric"]["__name__"] == "DCGM_FI_DEV_POWER_USAGE"
    change(sample)
    view = parse_prom(doc)
    assert (view.rejected, view.rejected_note[:len(note)]) == (1, note)
    assert np.isnan(view.values["DCGM_FI_DEV_POWER_USAGE"][1])
    assert view.values["DCGM_FI_DEV_GPU_UTIL"][1] == 41       # the GPU's other samples stay


SLOW = 2.0


@pytest.mark.parametrize("answer, message", [
    ((400, prom_answer("query-error.json"), 0),
     r"answered HTTP 400: invalid parameter \"query\": 1:10: parse error"),
    ((200, prom_answer("query-error.json"), 0),
     r"/api/v1/query answered status 'error' \(bad_data: invalid parameter"),
    ((500, b"", 0), r"answered HTTP 500$"),
    ((200, b"", SLOW), r"did not answer within 0.3 s$"),
    ((200, b"<html>proxy error</html>", 0), r"GET /api/v1/query did not give JSON"),
    ((200, {"status": "success", "data": {"resultType": "matrix", "result": []}}, 0),
     r"unexpected JSON at data.resultType: expected 'vector', got 'matrix'"),
    ((200, {"status": "success", "data": {"resultType": "vector"}}, 0),
     r"unexpected JSON at data.result: expected a list"),
])
def test_a_prometheus_that_cannot_be_read_gives_one_line_naming_it(server, answer, message):
    server.answer = lambda url: answer
    with pytest.raises(SourceError, match=rf"^prometheus http://127\.0\.0\.1:\d+: .*{message}"
                       ) as err:
        prom_view(server.url, timeout=0.3)
    assert "query=" not in str(err.value)


def test_an_unreachable_prometheus_says_so(server):
    url = server.url
    server.shutdown()
    server.server_close()
    with pytest.raises(SourceError, match=r"^prometheus http://127.0.0.1:\d+: GET .* "
                                          r"unreachable \(.*refused.*\)$"):
        prom_view(url, timeout=1.0)
