"""Issue 26: a cap on each source's answer (``CLUSTERTWIN_MIRROR_MAX_BYTES``, 256 MB by
default).  Over it: one error line, nothing applied, and the reader's memory stays below the
cap plus 100 MB, because the answer is read in chunks and dropped as soon as it passes."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.web.test_mirror_sources import SLURM, fake_bin, load, server  # noqa: F401
from twin import app_setting
from twin.mirror.errors import MAX_BYTES, SourceError, TooLarge, http_get, run_command
from twin.mirror.slurm_source import slurm_view

MB = 2**20
ROOT = Path(__file__).resolve().parent.parent.parent

# the peak is VmHWM of this process's own memory: getrusage's ru_maxrss would also count the
# parent's resident set at fork (Linux keeps the larger of the two across exec), which is
# pytest's and grows with the tests run before
READ_ONCE = textwrap.dedent("""
    import json, sys, time
    from twin.mirror.slurm_source import slurm_view
    from twin.mirror.errors import SourceError
    t0, c0 = time.monotonic(), time.process_time()
    try:
        slurm_view(timeout=120, max_bytes=int(sys.argv[1]))
        error = ""
    except SourceError as exc:
        error = str(exc)
    print(json.dumps({"error": error,
                      "maxrss_mb": next(int(line.split()[1]) for line in
                                        open("/proc/self/status") if line.startswith("VmHWM"))
                                   / 1024,
                      "wall_s": time.monotonic() - t0, "cpu_s": time.process_time() - c0}))
""")


def test_the_default_cap_is_256_mb_and_configurable():
    assert app_setting("MIRROR_MAX_BYTES") == MAX_BYTES == 256 * MB


def test_a_1_gb_sinfo_is_cut_at_the_cap_and_memory_stays_below_cap_plus_100_mb(tmp_path):
    bin_dir = fake_bin(tmp_path, {"sinfo": "yes '{\"nodes\": []}' | head -c 1073741824"})
    cap = 64 * MB
    proc = subprocess.run([sys.executable, "-c", READ_ONCE, str(cap)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    print(f"1 GB sinfo, cap 64 MB: peak RSS {got['maxrss_mb']:.0f} MB, "
          f"{got['wall_s']:.2f} s wall, {got['cpu_s']:.2f} s CPU")
    assert got["error"] == "slurm: `sinfo --json` answered more than 64 MB " \
                           "(CLUSTERTWIN_MIRROR_MAX_BYTES)"
    assert got["maxrss_mb"] < cap / MB + 100


def test_an_answer_at_the_cap_is_read_and_one_byte_over_is_not(tmp_path, monkeypatch):
    path = SLURM / "sinfo-22.05.json"
    size = path.stat().st_size
    monkeypatch.setenv("PATH", str(fake_bin(tmp_path, {"sinfo": f"/bin/cat {path}"})))
    assert len(run_command(["sinfo", "--json"], timeout=10, max_bytes=size)) == size
    with pytest.raises(TooLarge, match=r"^slurm: `sinfo --json` answered more than "):
        run_command(["sinfo", "--json"], timeout=10, max_bytes=size - 1)


def test_over_the_cap_accounting_is_an_error_not_a_note(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(fake_bin(tmp_path, {
        "sinfo": f"/bin/cat {SLURM / 'sinfo-22.05.json'}",
        "squeue": "echo '{\"jobs\": []}'",
        "sacct": "/usr/bin/head -c 3000000 /dev/zero"})))
    with pytest.raises(TooLarge, match=r"^slurm: `sacct .*` answered more than 2 MB "
                                       r"\(CLUSTERTWIN_MIRROR_MAX_BYTES\)$"):
        slurm_view(max_bytes=2 * MB)


@pytest.mark.parametrize("gzipped", [False, True])
def test_an_http_answer_over_the_cap_stops_the_read(server, gzipped):  # noqa: F811
    body = b" " * (3 * MB) + json.dumps(load("sinfo-22.05.json")).encode()
    server.answer = lambda url: (200, gzip.compress(body) if gzipped else body, 0)
    assert len(http_get(server.url + "/x", headers={}, timeout=10, source="s",
                        max_bytes=4 * MB)) == len(body)
    with pytest.raises(TooLarge, match=r"^s: GET http://127.0.0.1:\d+/x answered more than "
                                       r"2 MB \(CLUSTERTWIN_MIRROR_MAX_BYTES\)$"):
        http_get(server.url + "/x", headers={}, timeout=10, source="s", max_bytes=2 * MB)


def test_a_truncated_gzip_body_is_one_line(server):  # noqa: F811
    server.answer = lambda url: (200, gzip.compress(b"{}" * 1000)[:-12], 0)
    with pytest.raises(SourceError, match=r"GET .*/x: a broken gzip body"):
        http_get(server.url + "/x", headers={}, timeout=10, source="s")
