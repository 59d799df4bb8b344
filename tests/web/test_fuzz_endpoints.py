"""Fuzzing every POST endpoint and every command that reads JSON or YAML (issue 28): whatever
the body or document (JSON of any shape, nested 100,000 deep, YAML anchors, aliases, tags and
5,000-digit integers, bytes that are not UTF-8, forms), the answer is a refusal or a result,
never a 500 or a traceback, and never more than a second of CPU.

The endpoints are read from the URLconf, so a new one is fuzzed without being listed here; an
endpoint that answers 405 to a POST takes none.  Django's admin is left out: its forms are
Django's own.  The CPU bound is the behaviour named (an alias bomb kept a worker busy for
minutes): this thread's CPU time, measured after one warm-up call per endpoint or command."""

from __future__ import annotations

import io
import json
import re
import time
from urllib.parse import urlencode

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RoutePattern
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from scheduler.limits.documents import json_depth

pytestmark = pytest.mark.django_db

CPU_BOUND_S = 1.0
SKIPPED_PREFIXES = ("admin/",)
SAMPLE = {"engine_id": "1", "int": "1", "str": "job-0", "slug": "job-0", "path": "job-0"}
"""A value for each path converter the URLconf uses (an unknown one fails the test)."""
FIELDS = ("kind", "target", "action", "priority", "spec", "name", "base", "seeds", "arms",
          "set", "hours", "first_seed", "figures", "duration_s", "factor", "fraction", "unit",
          "policy", "placement", "matchers", "until", "comment", "limit", "q", "jobs",
          "cluster", "nodes", "username", "password", "preset", "days")
"""Field names the endpoints and documents read, so fuzzed bodies reach past "unknown field"."""
_QUIET = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]
FUZZ = examples(max_examples=20, deadline=None, database=None, derandomize=True,
                suppress_health_check=_QUIET)
"""Per endpoint (23 take POSTs): the whole module stays near 20 s of CPU.  Derandomized, so a
run is repeatable; a new endpoint or strategy changes the examples drawn."""
FUZZ_COMMAND = examples(max_examples=30, deadline=None, database=None, derandomize=True,
                        suppress_health_check=_QUIET)


def _routes(patterns, prefix: str = ""):
    for p in patterns:
        route = prefix + str(p.pattern)
        if route.startswith(SKIPPED_PREFIXES):
            continue
        assert isinstance(p.pattern, RoutePattern), f"{route}: give re_path URLs a sample here"
        if isinstance(p, URLResolver):
            yield from _routes(p.url_patterns, route)
        elif isinstance(p, URLPattern):
            yield route


def endpoint_urls() -> list[str]:
    """Every URL of the URLconf (the admin's aside), its parameters filled with samples."""
    return sorted({"/" + re.sub(r"<(?:(\w+):)?\w+>", lambda m: SAMPLE[m.group(1) or "str"], r)
                   for r in _routes(get_resolver().url_patterns)})


def api_urls() -> list[str]:
    return [u for u in endpoint_urls() if u.startswith("/api/")]


# ------------------------------------------------------------------ documents
def alias_doublings(n: int) -> str:
    """YAML whose aliases double ``n`` times: 2^n strings once they are followed."""
    return "\n".join(["l0: &l0 [x, x]"] + [f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]"
                                            for i in range(1, n + 1)])


scalars = (st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False)
           | st.text(max_size=12) | st.text('[]{}"\\/ u0', max_size=12)
           | st.sampled_from(["random", "all", "node", "rack", "hold", "dev-small", "llama3",
                              "priority"]))
json_values = st.recursive(
    scalars, lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), kids, max_size=5),
    max_leaves=24)
deep_json = st.builds(lambda n, opener: opener * n, st.integers(0, 100_000),
                      st.sampled_from(["[", '{"a":', '{"spec":', "[{}, "]))
yaml_texts = st.one_of(
    json_values.map(lambda v: yaml.safe_dump(v, default_flow_style=None)),
    json_values.map(json.dumps),
    deep_json,
    st.integers(0, 10_000).map(lambda n: "a:\n" + "".join(f"{'  ' * i}- k:\n"
                                                          for i in range(n % 300))),
    st.integers(1, 22).map(alias_doublings),
    st.sampled_from(["!!python/object/apply:os.system ['true']", "x: !!binary aGk=",
                     "? [a, b]\n: c", "x: " + "9" * 5000, "%YAML 1.1\n---\na: 1\n--- b",
                     "x: 2001-02-30", "x: \x00", "name: x\nname: y"]),
    st.text(max_size=200),
)
documents = st.one_of(json_values.map(json.dumps), deep_json, yaml_texts)


@st.composite
def bodies(draw) -> tuple[bytes, str]:
    """A request body and its Content-Type."""
    kind = draw(st.sampled_from(["json", "spec", "deep", "form", "bytes"]))
    if kind == "json":
        body = json.dumps(draw(json_values)).encode()
    elif kind == "spec":
        body = json.dumps({"spec": draw(yaml_texts)}).encode()
    elif kind == "deep":
        body = draw(deep_json).encode()
    elif kind == "form":
        body = urlencode(draw(st.dictionaries(st.sampled_from(FIELDS), yaml_texts | st.text(),
                                              max_size=4))).encode()
    else:
        body = draw(st.binary(max_size=300))
    content_type = draw(st.sampled_from(["application/json", "application/x-www-form-urlencoded",
                                         "text/plain"]))
    return body, content_type


def nesting(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    return 0


@examples(max_examples=300, deadline=None, database=None, derandomize=True)
@given(json_values, st.booleans(), st.sampled_from([None, 1]))
def test_the_depth_scan_agrees_with_the_parsed_nesting(value, ascii_only, indent):
    """Brackets, quotes and backslashes inside strings never count."""
    raw = json.dumps(value, ensure_ascii=ascii_only, indent=indent).encode()
    assert json_depth(raw) == nesting(value)


# ------------------------------------------------------------------ the endpoints
def _post(client, url: str, body: bytes, content_type: str):
    start = time.thread_time()
    r = client.generic("POST", url, body, content_type=content_type)
    spent = time.thread_time() - start
    assert r.status_code < 500, (url, body[:200], r.content[:300])
    assert spent < CPU_BOUND_S, f"POST {url}: {spent:.2f} s of CPU for {body[:200]!r}"
    return r


def _fuzz_endpoint(client, user, url: str) -> None:
    @FUZZ
    @given(bodies())
    def fuzz(sent):
        client.force_login(user)  # the logout endpoint ends the session
        _post(client, url, *sent)

    fuzz()


def test_no_post_body_gives_a_500_or_a_second_of_cpu(client, demo_users, small_cluster):
    """One database for all endpoints (its setup costs more than the fuzzing)."""
    admin = demo_users["admin"]
    fuzzed = []
    for url in endpoint_urls():
        client.force_login(admin)
        if _post(client, url, b"{}", "application/json").status_code == 405:
            continue  # not a POST endpoint
        fuzzed.append(url)
        _fuzz_endpoint(client, admin, url)
    for url in ("/api/drills", "/api/jobs/job-0/actions", "/api/whatif", "/api/studies",
                "/studies/", "/whatif/", "/api/alerts/1/ack", "/api/incidents/1/ack"):
        assert url in fuzzed


def test_the_endpoints_are_read_from_the_urlconf():
    urls = endpoint_urls()
    for url in ("/api/drills", "/api/jobs/job-0/actions", "/api/whatif", "/api/studies",
                "/studies/", "/api/alerts/1/ack"):
        assert url in urls
    assert not any(u.startswith("/admin/") for u in urls)


# ------------------------------------------------------------------ the commands
def _command(*args):
    """Run ``manage.py`` ``args`` in this thread: it succeeds or refuses in one line (exit
    status 2), within the CPU bound when it refuses."""
    start = time.thread_time()
    try:
        call_command(*args, stdout=io.StringIO(), stderr=io.StringIO())
    except CommandError as exc:
        spent = time.thread_time() - start
        assert exc.returncode == 2 and "\n" not in str(exc), (args, str(exc))
        assert spent < CPU_BOUND_S, f"{args[0]}: {spent:.2f} s of CPU to refuse"


def _file_fuzz(tmp_path, name: str, texts, run):
    path = tmp_path / name
    path.write_text("{}")
    run(path)  # warm-up: imports

    @FUZZ_COMMAND
    @given(texts)
    def fuzz(text):
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        run(path)

    fuzz()


def test_whatif_action_never_tracebacks(db):
    _command("whatif", "--from-live", "--action=null")

    @FUZZ_COMMAND
    @given(documents)
    def fuzz(text):
        # "--action=TEXT", as a shell user would write a value such as "-1" that is no flag
        _command("whatif", "--from-live", f"--action={text}")

    fuzz()


@pytest.mark.parametrize("action", ["check", "run"])
def test_study_spec_never_tracebacks(tmp_path, action):
    out = ("--out", str(tmp_path / "out")) if action == "run" else ()
    _file_fuzz(tmp_path, "spec.yaml", yaml_texts,
               lambda p: _command("study", action, str(p), *out))


def test_import_inventory_never_tracebacks(tmp_path, db):
    _file_fuzz(tmp_path, "inventory.json", documents,
               lambda p: _command("import_inventory", str(p)))


def test_simulate_trace_never_tracebacks(tmp_path, db):
    _file_fuzz(tmp_path, "sacct.json", documents,
               lambda p: _command("simulate", "--preset", "dev-small", "--days", "0.01",
                                  "--trace", str(p)))
