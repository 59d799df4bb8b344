"""Django's SQLite JSON capability asked of the library, not of the project's busy file.

Django decides whether SQLite has JSON by running ``SELECT JSON(...)`` inside
``transaction.atomic`` on the project's database.  With ``transaction_mode = IMMEDIATE``
(settings: writers queue at BEGIN) that BEGIN takes the write lock, so a management command
started beside a busy live engine can wait out the busy timeout and read "no JSON" — and then
Django's checks fail with "SQLite does not support JSONFields" although nothing is wrong.
JSON support is a property of the SQLite library, not of the file: :func:`install` (called
from the app's ``ready``) makes the backend ask a private in-memory database, once a process.
The backend keeps its own ENGINE name (tools such as pytest-django recognise SQLite by it).
"""

from __future__ import annotations

import functools
import sqlite3


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


def install() -> None:
    """Replace the SQLite backend's file probe by :func:`library_has_json`."""
    # the backend's base first: its features module imports it (a cycle when features is first)
    from django.db.backends.sqlite3 import base

    base.DatabaseFeatures.supports_json_field = property(
        lambda self: library_has_json(), doc=library_has_json.__doc__)
