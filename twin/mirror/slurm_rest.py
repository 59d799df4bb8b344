"""Where one poll of Slurm reads each answer: Slurm's commands, or slurmrestd.

slurmrestd serves one path prefix per data parser it was built with (``/slurm/v0.0.41/``,
``/slurmdb/v0.0.41/``...) and lists them in its OpenAPI document (``GET /openapi/v3``, served
since 20.11).  The newest prefix this twin reads (``SUPPORTED``: 22.05's ``v0.0.38`` to
24.11's ``v0.0.42``) is picked from it, separately for ``/slurm/`` and ``/slurmdb/`` (a
slurmrestd without the slurmdbd plugin offers no ``/slurmdb/``: accounting is then off, and
the view says why).  Every request carries ``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN``
(JWT) when given.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from twin.mirror.errors import SourceError, http_get, json_load, run_command
from twin.mirror.slurm_json import SOURCE

SUPPORTED = ("v0.0.38", "v0.0.39", "v0.0.40", "v0.0.41", "v0.0.42")
"""slurmrestd data parsers read, oldest first (Slurm 22.05, 23.02, 23.11, 24.05, 24.11)."""

OPENAPI = "/openapi/v3"
_PREFIX = re.compile(r"^/(slurm|slurmdb)/(v\d+\.\d+\.\d+)/")


@dataclass(frozen=True, slots=True)
class Asks:
    """One poll's plan: the name of each answer (a command or ``GET path``) and ``fetch``,
    which returns an answer's raw bytes by its name.

    ``accounting``: None when the source offers none (``accounting_note`` says why).
    ``reservations``: JSON first; ``reservations_text``: ``scontrol``'s text, tried when the
    JSON cannot be had (22.05's ``scontrol`` has no ``--json``), or None.
    """

    source: str
    kind: str
    fetch: Callable[[str], bytes | bytearray | str]
    nodes: str
    jobs: str
    accounting: str | None
    reservations: str
    reservations_text: str | None = None
    accounting_note: str = ""
    version: str = ""


def cli_asks(*, conf: Path | None, timeout: float, max_bytes: int,
             accounting_window_s: float) -> Asks:
    """``sinfo``, ``squeue``, ``sacct`` and ``scontrol`` (``SLURM_CONF=conf`` when given)."""
    commands = {f"`{' '.join(args)}`": args for args in (
        ["sinfo", "--json"], ["squeue", "--json", "--all"],
        ["sacct", "--json", "--allusers", "--starttime",
         f"now-{int(accounting_window_s)}seconds"],
        ["scontrol", "--json", "show", "reservation"], ["scontrol", "show", "reservation"])}

    def fetch(ask: str) -> bytes | bytearray | str:
        return run_command(commands[ask], conf=conf, timeout=timeout, max_bytes=max_bytes,
                           text=ask.startswith("`scontrol show"))

    nodes, jobs, accounting, resv, resv_text = commands
    return Asks(SOURCE, "cli", fetch, nodes, jobs, accounting, resv, resv_text)


def rest_asks(url: str, *, token: str | None, user: str | None, timeout: float,
              max_bytes: int, version: str | None, accounting_start: float) -> Asks:
    """slurmrestd at ``url``, at data parser ``version`` or the newest both sides know."""
    base = url.rstrip("/")
    source = f"slurmrestd {base}"
    headers = {"Accept": "application/json",
               **({"X-SLURM-USER-NAME": user} if user else {}),
               **({"X-SLURM-USER-TOKEN": token} if token else {})}

    def fetch(ask: str) -> bytes | bytearray:
        return http_get(base + ask[4:], headers=headers, timeout=timeout, source=source,
                        max_bytes=max_bytes)

    if version:
        db_version, note = version, ""
    else:
        what = f"GET {OPENAPI}"
        version, db_version = negotiate(json_load(fetch(what), source=source, what=what),
                                        source=source, what=what)
        note = "" if db_version else "slurmrestd offers no /slurmdb/ API (started without " \
                                     "the openapi/slurmdbd plugin?)"
    accounting = f"GET /slurmdb/{db_version}/jobs?start_time={int(accounting_start)}" \
        if db_version else None
    return Asks(source, "rest", fetch, f"GET /slurm/{version}/nodes",
                f"GET /slurm/{version}/jobs", accounting, f"GET /slurm/{version}/reservations",
                accounting_note=note, version=version)


def negotiate(doc, *, source: str = "slurmrestd", what: str = f"GET {OPENAPI}"
              ) -> tuple[str, str | None]:
    """(``/slurm/`` version, ``/slurmdb/`` version or None): the newest of ``SUPPORTED``
    that slurmrestd's OpenAPI document ``doc`` has paths for.

    >>> negotiate({"paths": {"/slurm/v0.0.41/jobs/": {}, "/slurm/v0.0.42/jobs/": {},
    ...                      "/slurmdb/v0.0.41/jobs/": {}, "/slurm/v0.0.43/jobs/": {}}})
    ('v0.0.42', 'v0.0.41')
    """
    paths = doc.get("paths") if isinstance(doc, dict) else None
    if not isinstance(paths, dict):
        raise SourceError(source, f"{what}: unexpected JSON at paths: expected an object, got "
                                  f"{'null' if paths is None else type(paths).__name__}")
    offered: dict[str, set[str]] = {"slurm": set(), "slurmdb": set()}
    for path in paths:
        if (match := _PREFIX.match(path)):
            offered[match.group(1)].add(match.group(2))
    ours = [v for v in reversed(SUPPORTED) if v in offered["slurm"]]
    if not ours:
        listed = ", ".join(sorted(offered["slurm"], key=_order)) or "none"
        raise SourceError(source, f"{what}: slurmrestd offers /slurm/ data parsers {listed}; "
                                  f"this twin reads {SUPPORTED[0]} to {SUPPORTED[-1]}")
    db = next((v for v in reversed(SUPPORTED) if v in offered["slurmdb"]), None)
    return ours[0], db


def _order(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version[1:].split("."))
