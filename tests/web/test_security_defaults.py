"""Security defaults: the published key refused in production, HTTPS-only defaults, a
Content-Security-Policy without inline scripts, login throttling, demo passwords kept, SQLite
in WAL mode with a busy timeout.

Settings are read once per process, so what they do at start-up is tested in child processes
with a clean environment (the suite itself runs as the insecure demo: pyproject's pytest env).
"""

import io
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from axes.utils import reset as axes_reset
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from tests.web.conftest import PASSWORD

ROOT = Path(__file__).resolve().parents[2]
A_KEY = "k" * 20 + "-a-key-of-this-deployment-only-" + "q" * 20


def django_process(tmp_path, code: str, **env: str) -> subprocess.CompletedProcess:
    """``code`` after ``django.setup()`` in a child with only ``env`` (and PATH) set."""
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
             "DJANGO_SETTINGS_MODULE": "twin.config.settings",
             "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", **env}
    return subprocess.run([sys.executable, "-c", f"import django; django.setup()\n{code}"],
                          cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120)


def manage_check(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
             "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", **env}
    return subprocess.run([sys.executable, "manage.py", "check", *args], cwd=ROOT,
                          env=clean, capture_output=True, text=True, timeout=120)


# ----------------------------------------------------------------- SECRET_KEY
def test_the_development_key_with_debug_off_refuses_to_start(tmp_path):
    proc = django_process(tmp_path, "print('started')")
    assert proc.returncode != 0 and "started" not in proc.stdout
    assert "ImproperlyConfigured" in proc.stderr
    assert "published development key" in proc.stderr
    assert "CLUSTERTWIN_INSECURE_DEMO=1" in proc.stderr


def test_manage_py_refuses_the_development_key_too(tmp_path):
    proc = manage_check(tmp_path)
    assert proc.returncode != 0
    assert "published development key" in proc.stderr


@pytest.mark.parametrize("env", [{"CLUSTERTWIN_INSECURE_DEMO": "1"}, {"DEBUG": "1"},
                                 {"SECRET_KEY": A_KEY}])
def test_the_demo_flag_debug_or_a_key_of_ones_own_start(tmp_path, env):
    proc = django_process(tmp_path, "print('started')", **env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "started"


def test_the_deploy_check_errors_on_the_development_key_in_demo_mode(tmp_path):
    proc = manage_check(tmp_path, "--deploy", CLUSTERTWIN_INSECURE_DEMO="1")
    assert proc.returncode != 0
    assert "clustertwin.E002" in proc.stderr and "clustertwin.W002" in proc.stderr


def test_the_deploy_check_passes_our_checks_with_a_key_of_ones_own(tmp_path):
    proc = manage_check(tmp_path, "--deploy", SECRET_KEY=A_KEY)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    for check in ("clustertwin.E002", "clustertwin.W002", "clustertwin.W003",
                  "clustertwin.W004", "security.W004", "security.W008", "security.W012",
                  "security.W016"):
        assert check not in out


def test_the_deploy_checks_flag_an_inline_script_policy_and_no_login_throttling(settings):
    from twin.config import checks
    assert checks.content_security_policy_check() == []
    assert checks.login_throttling_check() == []
    inline = {"default-src": ["'self'", "'unsafe-inline'"]}  # script-src falls back to it
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": inline}
    settings.AXES_ENABLED = False
    assert [m.id for m in checks.content_security_policy_check()] == ["clustertwin.W003"]
    assert [m.id for m in checks.login_throttling_check()] == ["clustertwin.W004"]


# ----------------------------------------------------------------- HTTPS defaults
HTTPS_SETTINGS = ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE",
                  "SECURE_HSTS_SECONDS")
PRINT_HTTPS = ("from django.conf import settings; import json; "
               f"print(json.dumps([getattr(settings, k) for k in {HTTPS_SETTINGS!r}]))")


def https_settings(tmp_path, **env) -> list:
    proc = django_process(tmp_path, PRINT_HTTPS, **env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_production_defaults_are_https_only(tmp_path):
    assert https_settings(tmp_path, SECRET_KEY=A_KEY) == [True, True, True, 3600]


def test_the_demo_defaults_are_plain_http(tmp_path):
    assert https_settings(tmp_path, CLUSTERTWIN_INSECURE_DEMO="1") == [False, False, False, 0]


def test_https_settings_come_from_the_environment(tmp_path):
    assert https_settings(tmp_path, SECRET_KEY=A_KEY, SECURE_SSL_REDIRECT="0",
                          SESSION_COOKIE_SECURE="1", CSRF_COOKIE_SECURE="1",
                          SECURE_HSTS_SECONDS="31536000") == [False, True, True, 31536000]


def test_a_misspelt_https_setting_refuses_to_start(tmp_path):
    proc = django_process(tmp_path, "", SECRET_KEY=A_KEY, SESSION_COOKIE_SECURE="yes please")
    assert proc.returncode != 0 and "SESSION_COOKIE_SECURE" in proc.stderr


# ----------------------------------------------------------------- Content-Security-Policy
PAGES = ["/", "/topology/", "/jobs/", "/failures/", "/events/", "/drills/"]


class Scripts(HTMLParser):
    """Every <script> and every inline event handler attribute of a page."""

    def __init__(self):
        super().__init__()
        self.scripts: list[dict] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script":
            self.scripts.append(attrs)
        self.handlers += [f"<{tag} {name}>" for name in attrs if name.startswith("on")]
        self.handlers += [f"<{tag} {name}>" for name, value in attrs.items()
                          if (value or "").strip().lower().startswith("javascript:")]


def scripts_of(html: str) -> Scripts:
    parser = Scripts()
    parser.feed(html)
    return parser


def csp_directives(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {name: sources for name, *sources in
            (part.split() for part in header.split(";") if part.strip())}


@pytest.mark.parametrize("path", PAGES)
def test_dashboard_pages_send_a_csp_and_hold_no_inline_script(login, small_cluster, path):
    response = login("staff").get(path)
    assert response.status_code == 200
    csp = csp_directives(response)
    assert csp["default-src"] == ["'self'"] and csp["script-src"] == ["'self'"]
    assert csp["object-src"] == ["'none'"] and csp["frame-ancestors"] == ["'none'"]
    page = scripts_of(response.content.decode())
    assert page.scripts, "every dashboard page loads its scripts"
    for script in page.scripts:
        assert script.get("src", "").startswith("/static/") or (
            script.get("type") == "application/json"), script
    assert page.handlers == []


def test_the_login_page_sends_the_csp_too(client, db):
    response = client.get("/accounts/login/")
    assert csp_directives(response)["script-src"] == ["'self'"]
    assert scripts_of(response.content.decode()).handlers == []


def test_json_data_blocks_hold_data_not_code(login, small_cluster):
    """json_script escapes <, > and &: no value can close its <script> and start another."""
    html = login("staff").get("/drills/").content.decode()
    blocks = [s for s in scripts_of(html).scripts if s.get("type") == "application/json"]
    assert {s["id"] for s in blocks} == {"kind-params", "kind-bounds", "event-kinds",
                                         "kind-targets", "component-words"}


# ----------------------------------------------------------------- login throttling
def wrong_logins(client: Client, url: str, username: str, n: int, **extra) -> None:
    for _ in range(n):
        response = client.post(url, {"username": username, "password": "not-it"}, **extra)
        assert response.status_code in (200, 429)


@pytest.mark.parametrize("url", ["/accounts/login/", "/admin/login/"])
def test_too_many_failures_lock_the_username_from_that_address_out(demo_users, settings, url):
    username = "admin"  # the admin login accepts staff only; the site login anyone
    client = Client()
    wrong_logins(client, url, username, settings.AXES_FAILURE_LIMIT - 1)
    ok = client.post(url, {"username": username, "password": PASSWORD})
    assert ok.status_code == 302, "fewer failures than the limit, then the right password"
    client = Client()
    wrong_logins(client, url, username, settings.AXES_FAILURE_LIMIT)
    locked = client.post(url, {"username": username, "password": PASSWORD})
    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content
    assert "_auth_user_id" not in client.session
    # another address, or another username from this one, is not locked out
    assert Client(REMOTE_ADDR="10.9.8.7").post(
        url, {"username": username, "password": PASSWORD}).status_code == 302
    assert Client().post(url, {"username": "staff", "password": PASSWORD}).status_code == 302
    axes_reset(username=username)
    assert client.post(url, {"username": username, "password": PASSWORD}).status_code == 302


def test_the_failure_limit_is_a_setting(demo_users, settings):
    settings.AXES_FAILURE_LIMIT = 2
    client = Client()
    wrong_logins(client, "/accounts/login/", "operator", 2)
    assert client.post("/accounts/login/", {"username": "operator",
                                            "password": PASSWORD}).status_code == 429


# ----------------------------------------------------------------- demo accounts
def test_seed_demo_keeps_existing_passwords(demo_users, settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "DEMO_PASSWORD": "the-published-one"}
    admin = demo_users["admin"]
    admin.set_password("changed-by-the-operator")
    admin.save()
    get_user_model().objects.filter(username="operator").delete()
    call_command("seed_demo", stdout=io.StringIO())
    users = {u.username: u for u in get_user_model().objects.all()}
    assert users["admin"].check_password("changed-by-the-operator")
    assert users["staff"].check_password(PASSWORD)
    assert users["operator"].check_password("the-published-one"), "missing ones are created"
    assert not users["operator"].is_staff


def test_seed_demo_resets_passwords_only_when_asked(demo_users, settings):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "DEMO_PASSWORD": "the-published-one"}
    call_command("seed_demo", "--reset-passwords", stdout=io.StringIO())
    for user in get_user_model().objects.all():
        assert user.check_password("the-published-one")


def test_seed_demo_does_not_print_the_password(demo_users, settings, capsys):
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "DEMO_PASSWORD": "the-published-one"}
    call_command("seed_demo", "--reset-passwords")
    assert "the-published-one" not in capsys.readouterr().out


# ----------------------------------------------------------------- SQLite
SQLITE_WRITER = """
import sqlite3, threading, time
from django.db import connection, transaction
from django.conf import settings
cursor = connection.cursor()
mode = cursor.execute("PRAGMA journal_mode").fetchone()[0]
busy = cursor.execute("PRAGMA busy_timeout").fetchone()[0]
cursor.execute("CREATE TABLE t (x INTEGER)")
other = sqlite3.connect(settings.DATABASES["default"]["NAME"], check_same_thread=False)
other.isolation_level = None
other.execute("BEGIN IMMEDIATE")
other.execute("INSERT INTO t VALUES (1)")
threading.Timer(1.0, lambda: other.execute("COMMIT")).start()
start = time.monotonic()
with transaction.atomic():
    connection.cursor().execute("INSERT INTO t VALUES (2)")
waited = time.monotonic() - start
print(mode, busy, round(waited, 1))
"""


def test_sqlite_runs_in_wal_mode_and_a_writer_waits_for_a_long_one(tmp_path):
    proc = django_process(tmp_path, SQLITE_WRITER, CLUSTERTWIN_INSECURE_DEMO="1")
    assert proc.returncode == 0, proc.stderr
    mode, busy, waited = proc.stdout.split()
    assert mode == "wal" and busy == "20000"
    assert float(waited) >= 0.8, "the second writer waited for the first, then wrote"


def test_the_sqlite_busy_timeout_is_a_setting(tmp_path):
    proc = django_process(tmp_path, SQLITE_WRITER, CLUSTERTWIN_INSECURE_DEMO="1",
                          CLUSTERTWIN_SQLITE_TIMEOUT_S="0.2")
    assert proc.returncode != 0 and "database is locked" in proc.stderr
