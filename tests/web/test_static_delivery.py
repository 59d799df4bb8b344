"""Static files: a favicon for every page, and compressed copies of the large bundles."""

from __future__ import annotations

import gzip

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_the_favicon_answers_without_a_login_and_every_page_names_it(client, login):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("/static/favicon.svg")
    page = login("operator").get("/")
    assert b'rel="icon"' in page.content and b"favicon.svg" in page.content


def test_collectstatic_writes_a_compressed_plotly_a_fraction_of_its_size(settings, tmp_path):
    settings.STATIC_ROOT = tmp_path
    call_command("collectstatic", "--noinput", verbosity=0)
    plain = tmp_path / "vendor" / "plotly" / "plotly.min.js"
    packed = plain.with_name("plotly.min.js.gz")
    assert plain.exists() and packed.exists()
    assert packed.stat().st_size < plain.stat().st_size / 3
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    assert (tmp_path / "favicon.svg").exists()


def test_a_refusal_is_logged_in_one_line_without_a_traceback_but_a_crash_keeps_its():
    import logging
    import sys

    from django.conf import settings

    from twin.config.log_filters import RefusalsWithoutTraceback

    assert "refusals" in settings.LOGGING["handlers"]["console"]["filters"]
    try:
        raise PermissionError("nope")
    except PermissionError:
        exc = sys.exc_info()
    for status, kept in ((403, False), (404, False), (500, True)):
        record = logging.LogRecord("django.request", logging.WARNING, __file__, 1,
                                   "Forbidden: %s", ("/drills/",), exc)
        record.status_code = status
        assert RefusalsWithoutTraceback().filter(record)
        assert (record.exc_info is not None) == kept
        assert record.getMessage() == "Forbidden: /drills/"
