#!/usr/bin/env python
"""Django's command-line utility for ClusterTwin.

Settings that cannot be used (no ``SECRET_KEY`` of one's own with ``DEBUG`` off, a bad
``CLUSTERTWIN_*`` value) are one line on stderr and exit status 2, as every other refusal of
the commands, never a traceback: ``--help`` included, since Django loads the settings first.
"""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.config.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        from django.conf import settings

        settings.INSTALLED_APPS  # noqa: B018 (loads the settings: their refusal comes here)
    except ImproperlyConfigured as exc:
        command = sys.argv[1] if len(sys.argv) > 1 else "manage.py"
        sys.stderr.write(f"{command}: settings: {' '.join(str(exc).split())}\n")
        sys.exit(2)
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
