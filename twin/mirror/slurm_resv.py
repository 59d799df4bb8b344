"""Slurm's reservations (maintenance windows among them), from JSON or ``scontrol`` text.

``scontrol --json show reservation`` (23.02+) and slurmrestd ``/slurm/<v>/reservations``
print ``{"reservations": [{"name", "node_list", "start_time", "end_time", "flags"}]}``,
times plain epoch seconds (v0.0.38, v0.0.39) or ``{"set", "infinite", "number"}`` (v0.0.40+).
Slurm 22.05's ``scontrol`` has no ``--json``: its text (``ReservationName=... StartTime=
2026-12-04T10:00:00 ... Nodes=n[1-2] ... Flags=MAINT,SPEC_NODES``, times in the local time
zone) is read instead.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from twin.inventory.hostlist import expand
from twin.mirror.errors import SourceError, TooLarge, json_load
from twin.mirror.slurm_json import _csv, _epoch, _fail, _Shape, _str, _top, _type_name
from twin.mirror.slurm_rest import Asks


@dataclass(slots=True, frozen=True)
class SlurmReservation:
    """One reservation: its ``name``, the ``nodes`` it holds (expanded), ``start`` and
    ``end`` in epoch seconds (``end`` None when it has none), and its upper-case ``flags``
    (``MAINT``, ``IGNORE_JOBS``, ``DAILY``...)."""

    name: str
    nodes: tuple[str, ...]
    start: float | None
    end: float | None
    flags: tuple[str, ...]

    @property
    def maintenance(self) -> bool:
        """Whether Slurm calls it a maintenance window (flag ``MAINT``)."""
        return "MAINT" in self.flags


def read_reservations(asks: Asks) -> tuple[list[SlurmReservation], str]:
    """The reservations and "", or [] and why they could not be read."""
    try:
        return parse_reservations(json_load(asks.fetch(asks.reservations), source=asks.source,
                                            what=asks.reservations),
                                  origin=asks.reservations), ""
    except TooLarge:
        raise
    except SourceError as exc:
        if asks.reservations_text is None:
            return [], exc.problem
        first = exc.problem
    try:
        text = asks.fetch(asks.reservations_text)
        return parse_reservations_text(str(text), origin=asks.reservations_text), ""
    except TooLarge:
        raise
    except SourceError as exc:
        return [], first if exc.problem == first else f"{first}; {exc.problem}"


def parse_reservations(doc: dict, *, origin: str = "`scontrol --json show reservation`"
                       ) -> list[SlurmReservation]:
    """Reservations from a JSON answer (``{"reservations": [...]}``)."""
    out = []
    for i, raw in enumerate(_top(doc, "reservations", origin)):
        path = f"reservations[{i}]"
        try:
            if not isinstance(raw, dict):
                raise _Shape(path, f"expected an object, got {_type_name(raw)}")
            out.append(SlurmReservation(
                name=_str(raw, "name", path, None),
                nodes=tuple(expand(_str(raw, "node_list", path))),
                start=_epoch(raw, "start_time", path), end=_epoch(raw, "end_time", path),
                flags=tuple(f.upper() for f in _csv(raw.get("flags"), f"{path}.flags"))))
        except _Shape as exc:
            raise _fail(origin, exc) from None
    return out


def parse_reservations_text(text: str, *, origin: str = "`scontrol show reservation`"
                            ) -> list[SlurmReservation]:
    """Reservations from ``scontrol show reservation``'s text (one block per reservation,
    ``Key=Value`` words; ``No reservations in the system`` when there are none)."""
    blocks: list[dict[str, str]] = []
    for word in text.split():
        key, eq, value = word.partition("=")
        if not eq:
            continue
        if key == "ReservationName":
            blocks.append({})
        if blocks:
            blocks[-1].setdefault(key, value)
    out = []
    for i, block in enumerate(blocks):
        path = f"reservation {i}"
        try:
            nodes = block.get("Nodes", "")
            flags = block.get("Flags", "")
            out.append(SlurmReservation(
                name=block["ReservationName"],
                nodes=() if nodes in ("", "(null)") else tuple(expand(nodes)),
                start=_local_time(block.get("StartTime"), f"{path}.StartTime"),
                end=_local_time(block.get("EndTime"), f"{path}.EndTime"),
                flags=() if flags in ("", "(null)") else tuple(flags.upper().split(","))))
        except _Shape as exc:
            raise _fail(origin, exc) from None
    return out


def _local_time(value: str | None, path: str) -> float | None:
    """Epoch seconds of ``scontrol``'s ``2026-12-04T10:00:00`` (local time)."""
    if value in (None, "", "Unknown", "None", "(null)"):
        return None
    try:
        return dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise _Shape(path, f"{value!r} is not a time (SLURM_TIME_FORMAT set?)") from None
