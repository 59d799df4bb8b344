"""static/js/twin-panels.js writes durations and simulated times exactly as twin/pages/formats.py
does (run under Node with a stub document; skipped where Node is not installed)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from twin.pages import formats

PANELS = Path(__file__).resolve().parents[2] / "static" / "js" / "twin-panels.js"
SECONDS = [0, 0.5, 1, 29.6, 59.4, 60, 89, 90, 150, 14 * 60, 3540, 3599.9, 3600, 8040,
           5 * 3600 + 1800, 23064, 86399, 86400, 90000, 257256, 268980.691, -90, 10 ** 7]

RUN = """
global.window = {};
global.document = {addEventListener() {}, getElementById() { return null; }};
require(process.argv[1]);
const P = window.TwinPanels, xs = JSON.parse(process.argv[2]);
console.log(JSON.stringify({duration: xs.map(P.duration), sim: xs.map(P.simTime),
                            hours: xs.map(x => P.durationH(x / 3600)),
                            none: [P.duration(null), P.simTime(undefined)]}));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js not installed")
def test_the_js_formatters_match_the_python_ones():
    out = subprocess.run(["node", "-e", RUN, str(PANELS), json.dumps(SECONDS)],
                         capture_output=True, text=True, timeout=60, check=True)
    js = json.loads(out.stdout)
    assert js["duration"] == [formats.duration(s) for s in SECONDS]
    assert js["hours"] == [formats.duration_h(s / 3600) for s in SECONDS]
    assert js["sim"] == [formats.sim_time(s) for s in SECONDS]
    assert js["none"] == [formats.NONE, formats.NONE]
