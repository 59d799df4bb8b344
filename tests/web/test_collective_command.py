"""collective: a readable table, JSON with nccl-tests figures, and clear refusals."""

import json
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command


def _json(capsys, *args) -> dict:
    call_command("collective", *args, "--json", "-")
    out = capsys.readouterr().out
    return json.loads(out[out.index("{"):])


def test_json_holds_the_time_and_both_bandwidths(capsys):
    """8 GiB all-reduce on 128 H100 (16 nodes), worked by hand.

    NCCL's 8 rail-aligned rings: each GPU's NIC carries one ring at 47 GB/s and its NVLink
    forwards the other 7 at 370 GB/s, so the rings run at min(8 x 47, 8/7 x 370) = 376 GB/s.
    Bytes: 2 x 127/128 x 8,589,934,592 = 17.0459e9, in 45.335 ms; latency 254 steps, 30 of
    them across nodes at 4 us and 224 at 1.9 us: 0.546 ms.  Time 45.880 ms; algbw =
    8.59 GB / 45.880 ms = 187.23 GB/s; busbw = x 254/128 = 371.53 GB/s.
    """
    r = _json(capsys, "--op", "all_reduce", "--bytes", "8G", "--gpus", "128")
    assert set(r) >= {"op", "bytes", "gpus", "gpus_per_node", "time_s", "algbw_GB_s",
                      "busbw_GB_s", "algorithm"}
    assert (r["op"], r["bytes"], r["gpus"], r["gpus_per_node"], r["nodes"]) == (
        "all_reduce", 8 * 2 ** 30, 128, 8, 16)
    assert r["algorithm"] == "ring" and set(r["candidates"]) == {"ring", "tree"}
    assert r["time_s"] == pytest.approx(0.045880, rel=1e-4)
    assert r["algbw_GB_s"] == pytest.approx(187.23, rel=1e-4)
    assert r["busbw_GB_s"] == pytest.approx(371.53, rel=1e-4)


def test_regression_busbw_of_16_nodes_is_in_the_fitted_per_nic_band(capsys):
    """Regression check, not validation.

    Fitted: NIC_EFFICIENCY = 47/50 from "For NDR @ 400Gbps you should see 46-48GB/s per NIC"
    (nccl-tests #290), so 8 NICs give 368-384 GB/s by construction.
    """
    r = _json(capsys, "--op", "all_reduce", "--bytes", "8G", "--gpus", "128")
    assert 368 <= r["busbw_GB_s"] <= 384


def test_a_preset_gives_the_accelerator_nic_and_fabric(capsys):
    """The busbw check is a regression: NVLS_EFFICIENCY was fitted to "peak busBw of ~480GB/s"
    on 8 H100 (nccl-tests #212)."""
    r = _json(capsys, "--preset", "llama3-16k", "--op", "all_reduce", "--bytes", "8G",
              "--gpus", "8")
    assert (r["accelerator"], r["nic_gbps"], r["fabric"]) == ("H100-SXM", 400.0, "island")
    assert r["algorithm"] == "nvls" and r["busbw_GB_s"] == pytest.approx(481, rel=0.01)


def test_the_table_and_a_json_file(tmp_path, capsys):
    path = tmp_path / "a2a.json"
    call_command("collective", "--op", "all_to_all", "--bytes", "1G", "--gpus", "128",
                 "--accelerator", "H100-SXM", "--fabric", "fat-tree", "--json", str(path))
    out = capsys.readouterr().out
    for text in ("all_to_all of 1 GiB", "128 GPUs", "fat-tree fabric", "busbw GB/s", "direct *"):
        assert text in out
    r = json.loads(path.read_text())
    # 120 of a GPU's 128 pieces leave through its 47 GB/s NIC: busbw 47 x 127/120 = 49.74
    assert r["algorithm"] == "direct" and r["busbw_GB_s"] == pytest.approx(49.74, rel=0.02)


def test_oversubscription_squeezes_traffic_that_leaves_the_node(capsys):
    args = ("--op", "all_gather", "--bytes", "4G", "--gpus", "64", "--fabric", "island")
    full = _json(capsys, *args)
    squeezed = _json(capsys, *args, "--oversubscription", "7")
    assert squeezed["scaleout_share"] == pytest.approx(1 / 7)
    assert squeezed["time_s"] > 5 * full["time_s"]
    inside = _json(capsys, "--op", "all_gather", "--bytes", "4G", "--gpus", "8",
                   "--oversubscription", "7")
    assert inside["scaleout_share"] == 1.0


@pytest.mark.parametrize("raw, expected", [("8", 8), ("8K", 8192), ("256M", 256 * 2 ** 20),
                                           ("1G", 2 ** 30), ("2GiB", 2 ** 31), ("1e9", 1e9)])
def test_sizes_take_power_of_two_suffixes(capsys, raw, expected):
    r = _json(capsys, "--op", "reduce_scatter", "--bytes", raw, "--gpus", "16")
    assert r["bytes"] == expected


@pytest.mark.parametrize("args, message", [
    (["--bytes", "1G", "--gpus", "8"], "--op is required"),
    (["--op", "broadcast", "--bytes", "1G", "--gpus", "8"], "--op must be one of"),
    (["--op", "all_reduce", "--gpus", "8"], "--bytes is required"),
    (["--op", "all_reduce", "--bytes", "1X", "--gpus", "8"], "--bytes must be a positive"),
    (["--op", "all_reduce", "--bytes=-1G", "--gpus", "8"], "--bytes must be a positive"),
    (["--op", "all_reduce", "--bytes", "0", "--gpus", "8"], "--bytes must be a positive"),
    (["--op", "all_reduce", "--bytes", "1G"], "--gpus is required"),
    (["--op", "all_reduce", "--bytes", "1G", "--gpus", "0"], "--gpus must be a positive"),
    (["--op", "all_reduce", "--bytes", "1G", "--gpus", "2.5"], "--gpus must be a positive"),
    (["--op", "all_reduce", "--bytes", "1G", "--gpus", "8", "--preset", "nope"],
     "unknown preset"),
    (["--op", "all_reduce", "--bytes", "1G", "--gpus", "8", "--accelerator", "A100"],
     "unknown accelerator"),
    (["--op", "all_reduce", "--bytes", "1G", "--gpus", "8", "--fabric", "torus"],
     "unknown fabric"),
    (["--op", "all_reduce", "--bytes", "1G", "--gpus", "8", "--preset", "dev-small",
      "--fabric", "rail"], "not both"),
    (["--op", "all_reduce", "--bytes", "1G", "--gpus", "8", "--algorithm", "bruck"],
     "--algorithm must be one of"),
    (["--op", "all_gather", "--bytes", "1G", "--gpus", "8", "--algorithm", "tree"],
     "tree cannot run all_gather"),
    (["--op", "all_reduce", "--bytes", "1G", "--gpus", "16", "--algorithm", "nvls"],
     "nvls cannot run all_reduce"),
    (["--op", "all_reduce", "--bytes", "1G", "--gpus", "8", "--oversubscription", "0.5"],
     "--oversubscription must be"),
    (["--op", "all_reduce", "--bytes", "1G", "--gpus", "8", "--nic-gbps", "fast"],
     "--nic-gbps must be"),
])
def test_bad_flags_are_refused_with_status_2_and_nothing_written(tmp_path, args, message):
    path = tmp_path / "out.json"
    with pytest.raises(CommandError, match=message) as err:
        call_command("collective", *args, "--json", str(path))
    assert err.value.returncode == 2
    assert not path.exists()


@pytest.mark.parametrize("args, message", [
    (["--op", "all_reduce", "--bytes", "1G", "--gpus", "8", "--algorithm", "bruck"],
     "--algorithm must be one of"),
    (["--op", "all_reduce", "--bytes", "1G", "--gpus", "8", "--bogus", "1"],
     "unrecognized arguments"),
    (["--op", "all_reduce", "--bytes", "1G", "--gpus"], "expected one argument"),
])
def test_command_line_error_is_one_line_with_exit_status_2(tmp_path, args, message):
    path = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "manage.py", "collective", *args, "--json",
                           str(path)], capture_output=True, text=True,
                          env={"DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}",
                               "CLUSTERTWIN_INSECURE_DEMO": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert message in proc.stderr
    assert not path.exists()
