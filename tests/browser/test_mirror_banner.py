"""A mirror's sources on the page: when Slurm cannot be read, every page says so in a banner,
with the error and the age of the state still shown; when it answers again the banner goes.

A real daphne in mirror mode (``CLUSTERTWIN_SOURCE=mirror``) on dev-small's inventory; Slurm's
commands are stand-ins on ``PATH`` that print the recorded Slurm 22.05 answers
(``tests/fixtures/slurm_json``) or, while a flag file exists, fail as ``sinfo`` does when
slurmctld is down.  The recorded hostnames are not dev-small's: the mirror card must say so.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.browser.conftest import ROOT, log_in, twin_server

pytestmark = pytest.mark.browser

FIXTURES = ROOT / "tests" / "fixtures" / "slurm_json"
DOWN_MESSAGE = "Unable to contact slurm controller (connect failure)"


def fake_slurm(folder: Path, flag: Path) -> None:
    folder.mkdir()
    answers = {"sinfo": FIXTURES / "sinfo-22.05.json", "squeue": FIXTURES / "squeue-22.05.json"}
    for name, answer in answers.items():
        script = folder / name
        script.write_text(f"#!/bin/sh\nif [ -e '{flag}' ]; then\n"
                          f"  echo '{name}: error: {DOWN_MESSAGE}' >&2; exit 1\nfi\n"
                          f"cat '{answer}'\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    sacct = folder / "sacct"
    sacct.write_text("#!/bin/sh\necho 'sacct: error: Slurm accounting storage is disabled' >&2\n"
                     "exit 1\n")
    sacct.chmod(sacct.stat().st_mode | stat.S_IXUSR)


@pytest.fixture(scope="module")
def mirror_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mirror-server")
    flag = tmp / "slurm-down"
    flag.touch()
    fake_slurm(tmp / "bin", flag)
    with twin_server(tmp, CLUSTERTWIN_SOURCE="mirror", CLUSTERTWIN_MIRROR_POLL_S="0.5",
                     CLUSTERTWIN_PROMETHEUS_URL="",
                     PATH=f"{tmp / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}") as url:
        yield url, flag


def test_an_unreachable_slurm_is_a_banner_on_every_page_until_it_answers(mirror_server, page):
    url, flag = mirror_server
    log_in(page, url, "operator")
    banner = page.locator("#source-banner")
    page.wait_for_function("() => document.getElementById('source-banner').textContent"
                           ".includes('unreachable')", timeout=60_000)
    text = banner.inner_text()
    assert banner.is_visible()
    assert "slurm unreachable" in text and DOWN_MESSAGE in text
    assert "nothing read from it yet" in text
    assert page.locator("#mirror-card").is_visible()
    assert page.locator("#engine-card").count() == 0 or not page.locator(
        "#engine-card").is_visible()  # no speed or pause on a real cluster
    assert page.locator("#mirror-sources tr[data-source=slurm]").get_attribute(
        "data-state") == "error"

    page.goto(url + "/jobs/")  # another page: the same banner
    page.locator("#source-banner").wait_for(state="visible", timeout=30_000)

    flag.unlink()  # slurmctld is back
    page.goto(url + "/")
    page.wait_for_function(
        "() => document.querySelector('#mirror-sources tr[data-source=slurm]')"
        "?.dataset.state === 'ok'", timeout=30_000)
    assert not page.locator("#source-banner").is_visible()
    # the recorded cluster's hostnames are not this inventory's: said, not hidden
    row = page.locator("#mirror-sources tr[data-source=slurm]").inner_text()
    assert "unknown nodes" in row
