"""Who may read /metrics and /metrics/dcgm: a logged-in user, a scraper with the bearer token,
or a client whose address is allow-listed; anyone else a plain 401 (a scraper cannot follow a
login redirect). Bad settings stop the start-up with one clear line."""

import ipaddress
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATHS = ["/metrics", "/metrics/dcgm"]
TOKEN = "s3cret-scrape-token"


@pytest.fixture
def metrics_settings(settings):
    def configure(*, token=None, allow=()):
        settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "METRICS_TOKEN": token,
                                "METRICS_ALLOW": tuple(ipaddress.ip_network(a) for a in allow)}
    configure()
    return configure


def readable(response) -> bool:
    """The view ran: the answer is not the access refusal (the DCGM view may still say 503
    when no engine ran)."""
    return response.status_code in (200, 503)


@pytest.mark.parametrize("path", PATHS)
def test_anonymous_scrapers_get_a_plain_401_with_a_bearer_challenge_not_a_redirect(
        client, db, metrics_settings, path):
    response = client.get(path)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "Location" not in response
    assert response["Content-Type"].startswith("text/plain")


@pytest.mark.parametrize("path", PATHS)
def test_the_right_bearer_token_reads_the_metrics(client, db, metrics_settings, path):
    metrics_settings(token=TOKEN)
    assert readable(client.get(path, HTTP_AUTHORIZATION=f"Bearer {TOKEN}"))
    assert readable(client.get(path, HTTP_AUTHORIZATION=f"bearer {TOKEN}"))


@pytest.mark.parametrize("path", PATHS)
def test_a_wrong_bearer_token_is_refused_as_invalid(client, db, metrics_settings, path):
    metrics_settings(token=TOKEN)
    for wrong in ("Bearer nope", f"Bearer {TOKEN}x", f"Basic {TOKEN}", "Bearer "):
        response = client.get(path, HTTP_AUTHORIZATION=wrong)
        assert response.status_code == 401, wrong
    assert 'error="invalid_token"' in client.get(
        path, HTTP_AUTHORIZATION="Bearer nope")["WWW-Authenticate"]


def test_an_absent_token_is_refused_when_one_is_configured(client, db, metrics_settings):
    metrics_settings(token=TOKEN)
    assert client.get("/metrics").status_code == 401


def test_bearer_access_is_off_without_a_configured_token(client, db, metrics_settings):
    metrics_settings(token=None)
    for header in ("Bearer ", "Bearer None", "Bearer null"):
        assert client.get("/metrics", HTTP_AUTHORIZATION=header).status_code == 401


@pytest.mark.parametrize("path", PATHS)
def test_an_allow_listed_address_reads_the_metrics(client, db, metrics_settings, path):
    metrics_settings(allow=["10.1.0.0/16", "2001:db8::/32"])
    assert readable(client.get(path, REMOTE_ADDR="10.1.2.3"))
    assert readable(client.get(path, REMOTE_ADDR="2001:db8::7"))
    assert readable(client.get(path, REMOTE_ADDR="::ffff:10.1.2.3"))  # IPv4 on a dual stack


def test_an_address_outside_the_allow_list_is_refused(client, db, metrics_settings):
    metrics_settings(allow=["10.1.0.0/16"])
    assert client.get("/metrics", REMOTE_ADDR="10.2.0.1").status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401


def test_a_forwarded_for_header_does_not_count_as_the_address(client, db, metrics_settings):
    metrics_settings(allow=["10.1.0.0/16"])
    response = client.get("/metrics", REMOTE_ADDR="192.0.2.9", HTTP_X_FORWARDED_FOR="10.1.2.3",
                          HTTP_X_REAL_IP="10.1.2.3")
    assert response.status_code == 401


def test_an_empty_allow_list_lets_no_address_in(client, db, metrics_settings):
    metrics_settings(allow=())
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401


@pytest.mark.parametrize("path", PATHS)
def test_a_logged_in_user_reads_the_metrics_as_before(login, metrics_settings, path):
    assert readable(login("operator").get(path))


def test_other_pages_still_send_anonymous_visitors_to_login(client, db, metrics_settings):
    metrics_settings(token=TOKEN, allow=["127.0.0.0/8"])
    response = client.get("/metrics/other", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert client.get("/api/state", REMOTE_ADDR="127.0.0.1").status_code == 401


@pytest.mark.parametrize("value", ["10.0.0.300/8", "10.0.0.1/8", "localhost", "10.0.0.0/8,,x"])
def test_a_malformed_allow_list_stops_the_start_up_with_one_clear_line(value):
    env = {**os.environ, "CLUSTERTWIN_METRICS_ALLOW": value,
           "DJANGO_SETTINGS_MODULE": "twin.config.settings"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: "
                           "CLUSTERTWIN_METRICS_ALLOW: ")
    assert "10.0.0.0/8" in last  # says what a good value looks like


def test_a_well_formed_allow_list_starts(tmp_path):
    env = {**os.environ, "CLUSTERTWIN_METRICS_ALLOW": " 10.0.0.0/8, 127.0.0.1 ,::1/128",
           "DJANGO_SETTINGS_MODULE": "twin.config.settings"}
    code = ("import django; django.setup(); from twin import app_setting; "
            "print(sorted(str(n) for n in app_setting('METRICS_ALLOW')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['10.0.0.0/8', '127.0.0.1/32', '::1/128']"
