"""/metrics/dcgm: the twin's simulated NVIDIA GPUs under dcgm-exporter's metric names and labels,
with values from the live placement (running gangs busy, idle GPUs at idle power, down nodes
silent), one node at a time with ?hostname=, and the bulk writer equal to prometheus_client's.

The cluster is the shared ``small_cluster``: engine nodes 0-7 hold 8 H100 each (hostnames
``tiny-n000000`` ..), nodes 8-11 hold MI300X (no DCGM exporter runs there).
"""

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.hardware.catalog import get
from scheduler.hardware.power import gpu_power_w
from tests import frames
from tests.frames import gpu_runs
from twin.live.services import live_state_write
from twin.metrics import dcgm
from twin.metrics.collector import exposition

H100 = get("H100-SXM")
# dcgm-exporter's default counters (etc/default-counters.csv) the twin models, and the DCP
# fields of its profiling set; names exactly as the exporter writes them.
EXPORTER_NAMES = {
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
    "DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES",
}
EXPORTER_LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
                   "DCGM_FI_DRIVER_VERSION"}
FRAME = frames.frame(t=3600.0, mfu=0.3, running_jobs=[{"name": "llama", "mfu": 0.42}])
IDLE = frames.placement(t=3600.0)


def placed(*, down=(), gpus_down=(), **jobs) -> dict:
    """The placement with these gangs (name -> partial placed job, ``gpu_runs`` explicit:
    ``tiny`` nodes hold 8 GPUs, node ``n`` GPUs ``8n`` to ``8n + 7``) and these runs down."""
    return frames.placement(t=3600.0, jobs=jobs, down=list(down), gpus_down=list(gpus_down))


def host(node: int) -> str:
    return f"tiny-n{node:06d}"


@pytest.fixture
def publish(small_cluster):
    """Write a live state of the engine running ``small_cluster`` with this placement."""
    def write(placement, frame=FRAME, inventory=f"fingerprint:{small_cluster.pk}"):
        live_state_write(seq=7, t_sim=3600.0, frame=frame, health="ok", last_error="",
                         speed=60.0, paused=False, inventory=inventory, placement=placement)
    return write


@pytest.fixture
def scrape(login):
    client = login("operator")

    def get(**params) -> dict[str, list]:
        response = client.get("/metrics/dcgm", params)
        assert response.status_code == 200, response.content
        assert response["Content-Type"].startswith("text/plain; version=0.0.4")
        return {f.name: f.samples
                for f in text_string_to_metric_families(response.content.decode())}
    return get


def by_gpu(samples) -> dict[tuple[str, int], object]:
    return {(s.labels["Hostname"], int(s.labels["gpu"])): s for s in samples}


def test_names_and_labels_are_dcgm_exporters_for_every_nvidia_gpu(publish, scrape):
    publish(IDLE)
    families = scrape()
    assert set(families) == EXPORTER_NAMES
    for name, samples in families.items():
        assert len(samples) == 64, name  # 8 H100 nodes; the MI300X nodes have no exporter
        for s in samples:
            assert s.name == name
            assert set(s.labels) == EXPORTER_LABELS
            assert s.labels["device"] == f"nvidia{s.labels['gpu']}"
            assert re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", s.labels["UUID"])
            assert re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:00\.0", s.labels["pci_bus_id"])
            assert s.labels["modelName"] == "NVIDIA H100 80GB HBM3"
            assert s.labels["DCGM_FI_DRIVER_VERSION"] == dcgm.DRIVER_VERSION
    gpus = by_gpu(families["DCGM_FI_DEV_GPU_UTIL"])
    assert set(gpus) == {(host(n), i) for n in range(8) for i in range(8)}
    assert len({s.labels["UUID"] for s in families["DCGM_FI_DEV_GPU_UTIL"]}) == 64


def test_uuids_are_fixed_by_cluster_host_and_index_in_every_process(publish, scrape):
    publish(IDLE)
    gpus = by_gpu(scrape()["DCGM_FI_DEV_GPU_UTIL"])
    # uuid5 of "tiny/tiny-n000001/3": the same after a restart, in any worker
    assert gpus[(host(1), 3)].labels["UUID"] == "GPU-ea2dcd24-aa83-5a2e-8f88-8cb72209faa6"


def test_idle_gpus_read_idle_power_no_load_and_free_memory(publish, scrape):
    publish(IDLE)
    families = scrape()
    assert {s.value for s in families["DCGM_FI_DEV_GPU_UTIL"]} == {0.0}
    assert {s.value for s in families["DCGM_FI_DEV_POWER_USAGE"]} == {H100.idle_w}
    assert {s.value for s in families["DCGM_FI_DEV_FB_USED"]} == {0.0}
    assert {s.value for s in families["DCGM_FI_DEV_FB_FREE"]} == {H100.hbm_gb * 1024}
    assert {s.value for s in families["DCGM_FI_DEV_SM_CLOCK"]} == {dcgm.SM_CLOCK_IDLE_MHZ}
    assert {s.value for s in families["DCGM_FI_DEV_XID_ERRORS"]} == {0.0}


def test_a_running_gangs_gpus_are_busy_and_labelled_with_the_job(publish, scrape):
    # 12 GPUs over nodes 1-2: 6 on each, the lowest indices
    publish(placed(llama={"gpus": 12, "nodes": [[1, 2]], "gpu_runs": gpu_runs((1, 6), (2, 6))}))
    families = scrape()
    held = {(host(n), i) for n in (1, 2) for i in range(6)}
    util = by_gpu(families["DCGM_FI_DEV_GPU_UTIL"])
    power = by_gpu(families["DCGM_FI_DEV_POWER_USAGE"])
    tensor = by_gpu(families["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"])
    nvlink = by_gpu(families["DCGM_FI_PROF_NVLINK_TX_BYTES"])
    for key, s in util.items():
        if key in held:
            assert s.labels["hpc_job"] == "llama"
            assert s.value == 100 * dcgm.BUSY_UTIL
            assert power[key].value == pytest.approx(gpu_power_w(H100, dcgm.BUSY_UTIL))
            assert tensor[key].value == 0.42  # the gang's MFU in the frame
            assert nvlink[key].value > 0
        else:
            assert "hpc_job" not in s.labels
            assert s.value == 0 and power[key].value == H100.idle_w
            assert tensor[key].value == 0 and nvlink[key].value == 0
    temp = by_gpu(families["DCGM_FI_DEV_GPU_TEMP"])
    assert temp[(host(1), 0)].value > temp[(host(1), 7)].value
    used = by_gpu(families["DCGM_FI_DEV_FB_USED"])
    assert used[(host(2), 5)].value > 0 and used[(host(2), 6)].value == 0


def test_gangs_beyond_the_frames_list_take_the_listed_gangs_mean_mfu(publish, scrape):
    publish(placed(llama={"gpus": 8, "nodes": [[0, 0]], "gpu_runs": gpu_runs((0, 8))},
                   other={"gpus": 8, "nodes": [[3, 3]], "gpu_runs": gpu_runs((3, 8))}))
    tensor = by_gpu(scrape()["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"])
    assert tensor[(host(3), 0)].value == 0.42 and tensor[(host(3), 0)].labels["hpc_job"] == "other"


def test_a_gang_hung_in_a_failure_reads_full_util_without_tensor_work(publish, scrape):
    publish(placed(llama={"state": "detecting", "gpus": 8, "nodes": [[4, 4]],
                          "gpu_runs": gpu_runs((4, 8))}))
    families = scrape()
    key = (host(4), 2)
    assert by_gpu(families["DCGM_FI_DEV_GPU_UTIL"])[key].value == 100
    assert by_gpu(families["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"])[key].value == 0
    hung_w = by_gpu(families["DCGM_FI_DEV_POWER_USAGE"])[key].value
    assert H100.idle_w < hung_w < gpu_power_w(H100, dcgm.BUSY_UTIL)


def test_a_drilled_down_node_goes_silent_and_alone_answers_503(publish, scrape, login):
    gang = {"gpus": 16, "nodes": [[2, 3]], "gpu_runs": gpu_runs((2, 8), (3, 8))}
    publish(placed(llama=gang))
    before = by_gpu(scrape()["DCGM_FI_DEV_GPU_UTIL"])
    assert before[(host(3), 0)].value > 0
    publish(placed(down=[[3, 3]], llama={**gang, "state": "detecting"}))
    after = by_gpu(scrape()["DCGM_FI_DEV_GPU_UTIL"])
    assert {h for h, _ in after} == {host(n) for n in range(8)} - {host(3)}
    assert len(after) == 56
    response = login("operator").get("/metrics/dcgm", {"hostname": host(3)})
    assert response.status_code == 503 and b"down" in response.content


def test_a_failed_gpu_on_a_live_node_reads_xid_79_and_idle(publish, scrape):
    publish(placed(gpus_down=[[20, 20]],  # node 2, index 4
                   llama={"gpus": 8, "nodes": [[2, 2]], "gpu_runs": gpu_runs((2, 8))}))
    families = scrape()
    xid = by_gpu(families["DCGM_FI_DEV_XID_ERRORS"])
    assert xid[(host(2), 4)].value == dcgm.XID_FALLEN_OFF_BUS
    assert [k for k, s in xid.items() if s.value] == [(host(2), 4)]
    failed = by_gpu(families["DCGM_FI_DEV_GPU_UTIL"])[(host(2), 4)]
    assert failed.value == 0 and "hpc_job" not in failed.labels


def test_hostname_selects_one_node_as_a_per_node_exporter(publish, scrape, login):
    publish(placed(llama={"gpus": 8, "nodes": [[5, 5]], "gpu_runs": gpu_runs((5, 8))}))
    families = scrape(hostname=host(5))
    assert set(families) == EXPORTER_NAMES
    util = families["DCGM_FI_DEV_GPU_UTIL"]
    assert sorted(int(s.labels["gpu"]) for s in util) == list(range(8))
    assert {s.labels["Hostname"] for s in util} == {host(5)}
    assert {s.labels["hpc_job"] for s in util} == {"llama"}
    client = login("operator")
    assert client.get("/metrics/dcgm", {"hostname": "tiny-n000009"}).status_code == 404  # AMD
    assert client.get("/metrics/dcgm", {"hostname": "nope"}).status_code == 404


def test_no_answer_is_invented_before_the_engine_runs_this_cluster(small_cluster, publish, login):
    client = login("operator")
    assert client.get("/metrics/dcgm").status_code == 503  # no live state yet
    publish(IDLE, inventory="preset:dev-small:0")  # the engine runs a preset, not this cluster
    response = client.get("/metrics/dcgm")
    assert response.status_code == 503 and b"tiny" in response.content


def test_the_bulk_writer_writes_prometheus_clients_bytes(small_cluster):
    nodes = tuple((host(n), "H100-SXM" if n < 8 else "MI300X", 8, 400.0) for n in range(12))
    inv = dcgm.DcgmInventory("tiny", nodes)
    placement = placed(down=[[6, 6]], gpus_down=[[9, 9]], **{
        'odd "name"\\x': {"gpus": 10, "nodes": [[0, 1]], "gpu_runs": gpu_runs((0, 5), (1, 5))},
        "hung": {"state": "detecting", "gpus": 3, "nodes": [[2, 2]],
                 "gpu_runs": gpu_runs((2, 3))}})
    readings = dcgm.dcgm_readings(inv, placement=placement, frame=FRAME)
    library = exposition(dcgm.DcgmCollector(inv, readings))
    bulk = b"".join(dcgm.dcgm_exposition_chunks(inv, readings))
    assert bulk == library
    assert b'hpc_job="odd \\"name\\"\\\\x"' in bulk
    families = {f.name: f for f in text_string_to_metric_families(bulk.decode())}
    assert len(families["DCGM_FI_DEV_GPU_UTIL"].samples) == 56
