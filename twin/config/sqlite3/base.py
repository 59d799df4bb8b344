"""Django's SQLite backend with one capability probe made lock-proof.

Django decides whether SQLite has JSON by running ``SELECT JSON(...)`` inside
``transaction.atomic`` on the project's database.  With ``transaction_mode = IMMEDIATE``
(settings: writers queue at BEGIN) that BEGIN takes the write lock, so a management command
started beside a busy live engine can wait out the busy timeout and read "no JSON" — and then
Django's checks fail with "SQLite does not support JSONFields" although nothing is wrong.
JSON support is a property of the SQLite library, not of the file: this backend asks a
private in-memory database once per process, and never the shared file.
"""

from __future__ import annotations

import functools
import sqlite3

from django.db.backends.sqlite3 import base, features


@functools.cache
def library_has_json() -> bool:
    """Whether this process's SQLite library has the JSON functions (asked in memory)."""
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute('SELECT JSON(\'{"a": "b"}\')')
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()
    return True


class DatabaseFeatures(features.DatabaseFeatures):
    @property
    def supports_json_field(self) -> bool:  # type: ignore[override]
        return library_has_json()


class DatabaseWrapper(base.DatabaseWrapper):
    features_class = DatabaseFeatures
