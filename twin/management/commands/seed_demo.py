"""``seed_demo``: create the demo accounts (admin, staff, operator) that are missing."""

from django.core.management.base import BaseCommand

from twin import app_setting
from twin.config.demo import DEMO_ACCOUNTS, demo_accounts_seed


class Command(BaseCommand):
    help = ("Create the missing demo accounts with the password CLUSTERTWIN_DEMO_PASSWORD. "
            "Existing accounts keep their passwords unless --reset-passwords.")

    def add_arguments(self, parser):
        parser.add_argument("--reset-passwords", action="store_true",
                            help="also set the existing demo accounts' passwords (and roles) "
                                 "back to the demo ones")

    def handle(self, *args, **opts):
        reset = opts["reset_passwords"]
        created = demo_accounts_seed(password=app_setting("DEMO_PASSWORD"),
                                     reset_passwords=reset)
        for username, role in DEMO_ACCOUNTS:
            state = "created" if username in created else "reset" if reset else "kept"
            self.stdout.write(f"  {username:<9} {role} ({state})")
        if created or reset:
            self.stdout.write("Created or reset accounts have the password in "
                              "CLUSTERTWIN_DEMO_PASSWORD.")
        if not reset:
            self.stdout.write("Existing accounts keep their passwords (--reset-passwords sets "
                              "them to CLUSTERTWIN_DEMO_PASSWORD).")
