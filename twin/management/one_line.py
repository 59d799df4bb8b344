"""What the management commands share: bad input is one line and exit status 2, and an output
file is checked before anything is written and then written whole or not at all."""

from __future__ import annotations

import math
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from twin.inventory.topology_export import files_write
from twin.live.engine_commands import SPEED_MAX


def refuse(message: str) -> CommandError:
    """The error for bad input: ``manage.py`` prints it as one line and exits with 2."""
    return CommandError(message, returncode=2)


def checked(parse, *args, **kwargs):
    """``parse(*args, **kwargs)``, a checked parser of :mod:`scheduler.limits.checks` (with the
    documented bounds of :mod:`scheduler.limits.bounds`); its ``ValueError`` becomes the one
    line of :func:`refuse`."""
    try:
        return parse(*args, **kwargs)
    except ValueError as exc:
        raise refuse(str(exc)) from None


def speed_flag(raw: str) -> float:
    """``--speed`` of the live engine and the live grid: simulated seconds per wall second,
    in (0, :data:`~twin.live.engine_commands.SPEED_MAX`]."""
    try:
        value = float(raw)
    except ValueError:
        raise refuse(f"--speed {raw!r} is not a number") from None
    if not (math.isfinite(value) and 0 < value <= SPEED_MAX):
        raise refuse(f"--speed must be in (0, {SPEED_MAX:g}], not {raw}")
    return value


class OneLineCommand(BaseCommand):
    """A command whose mistyped flags, like its other errors, get one line and status 2
    (argparse would print its usage block as well)."""

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        if parser.called_from_command_line:
            parser.error = lambda message: parser.exit(
                2, f"{prog_name} {subcommand}: error: {message}\n")
        return parser


def output_path(flag: str, raw: str | None) -> Path | None:
    """The file ``flag`` names, checked before the command writes anything (its folder exists,
    it is not a folder itself); None for no file or ``-`` (standard output)."""
    if raw is None or raw == "-":
        return None
    if not raw.strip():
        raise refuse(f"{flag} needs the path of a file, or - for standard output")
    path = Path(raw)
    if path.is_dir():
        raise refuse(f"{flag} {raw!r} is a folder; give the path of the file to write")
    parent = path.resolve().parent
    if not parent.is_dir():
        raise refuse(f"{flag}: folder {str(parent)!r} does not exist")
    return path


def output_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file in its folder, then a rename)."""
    try:
        files_write({path: text})
    except OSError as exc:
        raise refuse(f"cannot write {exc.filename}: {exc.strerror}") from None
