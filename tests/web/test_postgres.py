"""Migrations and a cluster build against PostgreSQL (when DATABASE_URL points at it)."""

import os

import pytest
from django.db import connection

pytestmark = pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="DATABASE_URL is not a PostgreSQL URL; .ci/run sets it for this module")


@pytest.mark.django_db
def test_migrations_and_a_build_run_on_postgresql(build):
    assert connection.vendor == "postgresql"
    build("--preset", "dev-small")
    from twin import models as m
    cluster = m.Cluster.objects.get()
    assert m.Accelerator.objects.count() == cluster.summary["gpus"]
    assert m.Link.objects.filter(cluster=cluster).count() == cluster.summary["links"]
    build("--preset", "dev-small", "--replace")
    assert m.Cluster.objects.count() == 1
