"""A spec with several mistakes gets every one of them at once, each with its line: from the
checker, the Studies page's form, the API and ``manage.py study check``; nothing is written."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.study.spec import SpecError, load_spec_text
from twin import models as m

ROOT = Path(__file__).resolve().parents[2]
BAD = """\
name: several mistakes
colour: red
base:
  preset: dev-small
  days: 1
  fabric: fat-tree
  polcy: fifo
seeds: [1, -2]
arms:
  - name: one
    set:
      oversubscription: 0.5
      policy: nope
  - name: two
    set: {oversubscription: 3, spares: 2}
  - name: two
    set: {oversubscription: 4}
  - name: four
    set: {oversubscription: 4}
figures: [mfu, mfuu]
"""


def line_of(text: str, fragment: str, nth: int = 1) -> int:
    """The line (from 1) of the ``nth`` line of ``text`` holding ``fragment``."""
    found = [i for i, line in enumerate(text.splitlines(), 1) if fragment in line]
    return found[nth - 1]


EXPECTED = [  # (line, what the message says): every mistake of BAD, in the order of its lines
    (line_of(BAD, "colour"), "unknown field 'colour' in the spec"),
    (line_of(BAD, "polcy"), "unknown field 'polcy' in base"),
    (line_of(BAD, "seeds"), "a seed is an integer >= 0, not -2"),
    (line_of(BAD, "oversubscription: 0.5"),
     "arm 'one': oversubscription must be a number >= 1, not 0.5"),
    (line_of(BAD, "policy: nope"), "arm 'one': unknown policy 'nope'"),
    (line_of(BAD, "spares: 2"), "arm 'two': spares must be a fraction in [0, 1), not 2"),
    (line_of(BAD, "name: two", 2), "arm name 'two' is used twice"),
    (line_of(BAD, "name: four"), "arms 'two' and 'four' run the same scenario"),
    (line_of(BAD, "figures"), "unknown figure 'mfuu'"),
]


def assert_all_found(messages: list[str]) -> None:
    assert len(messages) == len(EXPECTED), messages
    for message, (line, says) in zip(messages, EXPECTED, strict=True):
        assert message.startswith(f"line {line}: ") and says in message, (message, line, says)


def test_the_checker_reports_every_mistake_each_at_its_line():
    with pytest.raises(SpecError) as err:
        load_spec_text(BAD, origin="bad.yaml")
    assert_all_found(err.value.messages())
    text = str(err.value)
    assert text.startswith(f"bad.yaml: {len(EXPECTED)} errors: line ") and "\n" not in text


def test_mistakes_that_follow_from_another_are_not_reported_twice():
    # a misspelt field is one mistake: not also "changes nothing from the baseline"
    good = "name: x\nbase: {preset: dev-small, days: 1}\nseeds: 2\narms:\n  - name: a\n" \
           "  - name: b\n    set: {polcy: fifo}\n"
    with pytest.raises(SpecError) as err:
        load_spec_text(good)
    [message] = err.value.messages()
    assert message.startswith(f"line {line_of(good, 'polcy')}: unknown field 'polcy' in arm 'b'")


@pytest.fixture
def study_dir(settings, tmp_path):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "STUDY_DIR": str(tmp_path / "studies")}
    return tmp_path / "studies"


def test_the_studies_form_shows_every_mistake_and_starts_nothing(login, db, study_dir):
    r = login("staff").post("/studies/", {"spec": BAD})
    assert r.status_code == 400
    page = html.unescape(r.content.decode())
    shown = [f"line {line}: " for line, _ in EXPECTED]
    for (line, says), head in zip(EXPECTED, shown, strict=True):
        assert f"{head}" in page and says in page, (line, says)
    assert not m.Study.objects.exists() and not study_dir.exists()


def test_the_api_answers_every_mistake_and_starts_nothing(login, db, study_dir):
    r = login("staff").post("/api/studies", json.dumps({"spec": BAD}),
                            content_type="application/json")
    assert r.status_code == 400
    error = r.json()["error"]
    assert_all_found([error[i:] for i in range(len(error)) if error.startswith("line ", i)
                      and (i == 0 or error.startswith("; ", i - 2))])
    assert not m.Study.objects.exists() and not study_dir.exists()


def test_the_web_refuses_server_files_without_looking_at_them(login, db, study_dir, tmp_path):
    """A path on the server is refused the same way whether a file is there or not."""
    here = tmp_path / "trace.csv"
    here.write_text("jobid,gpus\n")
    answers = []
    for path in (here, tmp_path / "missing.csv"):
        spec = BAD.replace("  polcy: fifo\n", f"  trace: {path}\n")
        r = login("staff").post("/api/studies", json.dumps({"spec": spec}),
                                content_type="application/json")
        assert r.status_code == 400
        answers.append(r.json()["error"].replace(str(path), "PATH"))
    assert answers[0] == answers[1]
    assert f"line {line_of(BAD, 'polcy')}: base: a trace file is read by the command line" \
        in answers[0]


def test_study_check_prints_every_mistake_on_one_line(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(BAD)
    env = {**os.environ, "CLUSTERTWIN_INSECURE_DEMO": "1"}
    r = subprocess.run([sys.executable, "manage.py", "study", "check", str(spec)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"{spec}: {len(EXPECTED)} errors: " in r.stderr
    for line, says in EXPECTED:
        assert f"line {line}: {says}" in r.stderr, (line, says)
