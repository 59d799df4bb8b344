"""Logging filters: refusals are expected answers, not errors.

Django logs a ``PermissionDenied`` (403) with the exception attached, so every refused request
printed a traceback.  :class:`RefusalsWithoutTraceback` keeps the one line (who asked what,
and the status) and drops the traceback for 4xx answers; server errors keep theirs.
"""

import logging


class RefusalsWithoutTraceback(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if status is not None and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
