"""Bounded input (issue 28): a YAML alias bomb, JSON nested 50,000 deep and a 3 MB body are each
one clear refusal, in JSON on the API and in one line (exit status 2) on the command line,
after little CPU (:mod:`scheduler.limits.documents`).

The time bound is the behaviour named (an alias bomb kept a worker busy for minutes), so it is
measured as this thread's CPU time, with a wide margin; the first call of each kind runs once
beforehand so that imports are not counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from scheduler.limits.documents import MAX_BYTES, MAX_DEPTH
from scheduler.study.spec import SpecError, load_spec_text
from tests.web.test_fuzz_endpoints import api_urls

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
CPU_BOUND_S = 1.0
DEEP = "[" * 50_000
BOMB = "\n".join(
    [f'a: &a [{", ".join(["lol"] * 9)}]']
    + [f"{b}: &{b} [{', '.join(['*' + a] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi",
                                                                   strict=True)])
"""Nine lines that expand to 9^9 (387 million) strings when aliases are followed."""
ENDPOINTS = ("/api/drills", "/api/jobs/job-0/actions", "/api/whatif", "/api/studies")
VALID_SPEC = """\
name: cap
base: {preset: dev-small, days: 0.5}
seeds: 2
arms:
  - name: uncapped
  - name: capped
    set: {power_cap: 0.4}
"""


def cpu(call):
    """``call()`` and the CPU seconds this thread spent in it."""
    start = time.thread_time()
    out = call()
    return out, time.thread_time() - start


def post(client, url, body, content_type="application/json"):
    return client.generic("POST", url, body, content_type=content_type)


def refusal(call) -> CommandError:
    """The one-line ``CommandError`` (exit status 2) a command raises for ``call``."""
    with pytest.raises(CommandError) as caught:
        call()
    assert caught.value.returncode == 2
    assert "\n" not in str(caught.value)
    return caught.value


def manage(*args):
    env = {**os.environ, "CLUSTERTWIN_INSECURE_DEMO": "1"}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def admin(login):
    return login("admin")


# ------------------------------------------------------------------ the alias bomb
def test_the_alias_bomb_is_nine_lines_of_anchors_and_aliases():
    assert len(BOMB.splitlines()) == 9 and BOMB.count("*") == 8 * 9


def test_the_alias_bomb_is_refused_by_the_api_at_its_first_anchor_in_under_a_second_of_cpu(
        admin):
    post(admin, "/api/studies", json.dumps({"spec": "name: x"}))  # imports, first queries
    r, spent = cpu(lambda: post(admin, "/api/studies", json.dumps({"spec": BOMB})))
    assert r.status_code == 400, r.content
    error = r.json()["error"]
    assert "line 1: anchors and aliases" in error and "\n" not in error
    assert spent < CPU_BOUND_S, f"{spent:.2f} s of CPU"


def test_the_alias_bomb_is_refused_by_the_study_page_form(admin):
    r = admin.post("/studies/", {"spec": BOMB})
    assert r.status_code == 400
    assert b"anchors and aliases" in r.content


def test_study_check_refuses_the_alias_bomb_in_under_a_second_of_cpu(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    good = tmp_path / "good.yaml"
    good.write_text(VALID_SPEC)
    call_command("study", "check", str(good), stdout=open(os.devnull, "w"))  # imports
    exc, spent = cpu(lambda: refusal(lambda: call_command("study", "check", str(path))))
    assert str(exc) == f"{path}: line 1: anchors and aliases (&name, *name) are not allowed; " \
                       "write the values out"
    assert spent < CPU_BOUND_S, f"{spent:.2f} s of CPU"


def test_manage_py_study_check_prints_one_line_and_exits_2_for_the_bomb(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    r = manage("study", "check", str(path))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"CommandError: {path}: line 1: anchors and aliases (&name, *name) are not allowed; "
        "write the values out"]


def test_an_alias_is_refused_at_its_own_line():
    text = VALID_SPEC.replace("  - name: capped\n", "  - name: capped\n    base: *b\n")
    text = text.replace("base: {preset", "base: &b {preset")
    with pytest.raises(SpecError, match=r"^spec: line 2: anchors and aliases"):
        load_spec_text(text)
    with pytest.raises(SpecError, match=r"^spec: line 7: anchors and aliases"):
        load_spec_text(text.replace("&b ", ""))


# ------------------------------------------------------------------ nesting depth
@pytest.mark.parametrize("url", ENDPOINTS)
def test_json_nested_50000_deep_is_a_json_400_on_each_endpoint(admin, url):
    r, spent = cpu(lambda: post(admin, url, DEEP))
    assert r.status_code == 400, r.content
    assert r["Content-Type"] == "application/json"
    assert r.json() == {"error": f"the request body nests 50,000 levels deep; at most "
                                 f"{MAX_DEPTH}"}
    assert spent < CPU_BOUND_S, f"{spent:.2f} s of CPU"


@pytest.mark.parametrize("url", ENDPOINTS)
def test_json_at_the_depth_bound_is_parsed_and_one_level_more_is_refused(admin, url):
    """The bound itself: 64 levels reach the endpoint's own checks, 65 do not."""
    at_bound = post(admin, url, "[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert "levels deep" not in at_bound.json().get("error", "")
    over = post(admin, url, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert over.status_code == 400 and "65 levels deep" in over.json()["error"]


def test_brackets_inside_strings_do_not_count_as_depth(admin):
    text = json.dumps({"kind": "[" * 5000 + '\\"{' * 100, "target": "random"})
    r = post(admin, "/api/drills", text)
    assert "levels deep" not in r.json().get("error", "")


def test_a_spec_nested_deeper_than_the_bound_is_refused_at_its_line():
    with pytest.raises(SpecError, match=r"^spec: line 1: nested more than 64 levels deep$"):
        load_spec_text("[" * 100)
    with pytest.raises(SpecError, match=r"^spec: line 1: .*nest"):
        load_spec_text(DEEP)  # libyaml's own bound (1,000 levels) may see it first
    block = "name: x\n" + "".join(f"{'  ' * i}k{i}:\n" for i in range(100))
    with pytest.raises(SpecError, match=r"^spec: line 66: nested more than 64 levels deep$"):
        load_spec_text(block)  # line 66 opens the 65th mapping (key k64)


def test_whatif_action_nested_50000_deep_is_one_line_and_exit_2():
    r = manage("whatif", "--preset", "dev-small", "--action", DEEP)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"CommandError: --action nests 50,000 levels deep; at most {MAX_DEPTH}"]


def test_study_check_refuses_a_deep_spec(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    exc = refusal(lambda: call_command("study", "check", str(path)))
    assert str(exc).startswith(f"{path}: line 1: ") and "nest" in str(exc)


def test_import_inventory_refuses_a_deep_json_file(tmp_path):
    path = tmp_path / "inventory.json"
    path.write_text(DEEP)
    exc = refusal(lambda: call_command("import_inventory", str(path)))
    assert str(exc) == f"{path} nests 50,000 levels deep; at most {MAX_DEPTH}"


def test_import_inventory_refuses_deep_fabric_params_in_cluster_csv(tmp_path):
    for table, header in (("sites", "site,hall"), ("racks", "name,site"), ("nodes", "hostname"),
                          ("switches", "name,tier"), ("cables", "upper,lower")):
        (tmp_path / f"{table}.csv").write_text(header + "\n")
    (tmp_path / "cluster.csv").write_text(f'name,fabric_kind,fabric_params\nx,fat-tree,"{DEEP}"\n')
    exc = refusal(lambda: call_command("import_inventory", str(tmp_path)))
    assert str(exc) == f"cluster.csv row 1: fabric_params nests 50,000 levels deep; at most " \
                       f"{MAX_DEPTH}"


def test_simulate_refuses_a_deep_sacct_trace(tmp_path):
    path = tmp_path / "sacct.json"
    path.write_text(DEEP)
    exc = refusal(lambda: call_command("simulate", "--preset", "dev-small", "--days", "0.01",
                                       "--trace", str(path)))
    assert "sacct.json nests 50,000 levels deep" in str(exc)


# ------------------------------------------------------------------ size
def test_a_3_mb_body_is_a_json_413_on_every_api_path(admin):
    body = b"[" + b"0," * 1_500_000 + b"0]"
    for url in api_urls():
        for content_type in ("application/json", "application/x-www-form-urlencoded"):
            r = post(admin, url, body, content_type)
            assert r.status_code == 413, (url, content_type, r.content[:200])
            assert r.json() == {"error": f"the request body is too large ({len(body):,} bytes); "
                                         f"at most {MAX_BYTES:,} bytes"}


def test_a_body_just_over_the_bound_is_a_413_and_one_at_it_is_read(admin):
    """Our own bound (1 MB), below Django's (2.5 MB)."""
    padding = MAX_BYTES - len('{"kind": "", "target": "random"}')
    at = json.dumps({"kind": "x" * padding, "target": "random"})
    assert len(at) == MAX_BYTES
    r = post(admin, "/api/drills", at)
    assert r.status_code == 400 and "too large" not in r.json()["error"]
    assert post(admin, "/api/drills", at + " ").status_code == 413


def test_a_body_over_djangos_own_bound_is_a_json_413_not_a_400_page(admin, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    r = post(admin, "/api/drills", json.dumps({"kind": "node", "target": "x" * 200}))
    assert r.status_code == 413
    assert r.json() == {"error": f"the request body is too large; at most {MAX_BYTES:,} bytes"}


def test_study_check_refuses_a_spec_file_over_the_bound(tmp_path):
    """A spec's own bound is tighter than a document's (every accepted spec reads in < 1 s)."""
    from scheduler.study.spec import SPEC_MAX_BYTES
    assert SPEC_MAX_BYTES < MAX_BYTES
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * SPEC_MAX_BYTES + "\n" + VALID_SPEC)
    exc = refusal(lambda: call_command("study", "check", str(path)))
    assert str(exc) == f"{path}: the spec is more than {SPEC_MAX_BYTES:,} bytes"
    path.write_text("# " + "x" * (SPEC_MAX_BYTES - 2 - len(VALID_SPEC.encode()) - 2) + "\n"
                    + VALID_SPEC)
    call_command("study", "check", str(path))  # just under: read and checked


def test_a_spec_text_over_the_bound_is_refused_by_the_api(admin):
    spec = "# " + "x" * MAX_BYTES
    r = post(admin, "/api/studies", json.dumps({"spec": spec}))
    assert r.status_code == 413  # the body holding it is over the bound as well


def test_an_integer_of_5000_digits_is_one_line_not_a_traceback(admin, tmp_path):
    with pytest.raises(SpecError, match=r"^spec: line 1: Exceeds the limit"):
        load_spec_text("name: " + "9" * 5000)
    r = post(admin, "/api/drills", '{"kind": "node", "duration_s": ' + "9" * 5000 + "}")
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]
