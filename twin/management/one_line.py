"""What the management commands share: bad input is one line and exit status 2."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError


def refuse(message: str) -> CommandError:
    """The error for bad input: ``manage.py`` prints it as one line and exits with 2."""
    return CommandError(message, returncode=2)


class OneLineCommand(BaseCommand):
    """A command whose mistyped flags, like its other errors, get one line and status 2
    (argparse would print its usage block as well)."""

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        if parser.called_from_command_line:
            parser.error = lambda message: parser.exit(
                2, f"{prog_name} {subcommand}: error: {message}\n")
        return parser
