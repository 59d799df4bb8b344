"""A management command beside a busy live engine on SQLite: Django's checks must not read a
held write lock as "SQLite has no JSON" (issue 28: a rerun passed, so the product is fine; the
check was not)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def locked_db(tmp_path):
    """A database file whose write lock another connection holds (as a snapshot write does)."""
    path = tmp_path / "busy.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO t VALUES (1)")
    yield path
    holder.execute("ROLLBACK")
    holder.close()


def test_the_projects_checks_pass_while_another_process_holds_the_write_lock(locked_db):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{locked_db}",
           "CLUSTERTWIN_SQLITE_TIMEOUT_S": "0.2", "CLUSTERTWIN_INSECURE_DEMO": "1"}
    env.pop("REDIS_URL", None)
    done = subprocess.run([sys.executable, "manage.py", "check", "--database", "default"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    # Django's own probe would BEGIN IMMEDIATE on the busy file, wait out the 0.2 s and read
    # "no JSON": fields.E180 "SQLite does not support JSONFields"
    assert done.returncode == 0, done.stderr
    assert "JSONField" not in done.stderr
