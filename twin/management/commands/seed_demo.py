"""``seed_demo``: create the demo accounts (admin, staff, operator)."""

from django.core.management.base import BaseCommand

from twin.conf import app_setting
from twin.services import DEMO_ACCOUNTS, demo_accounts_seed


class Command(BaseCommand):
    help = "Create or reset the demo accounts; the password comes from CLUSTERTWIN_DEMO_PASSWORD."

    def handle(self, *args, **opts):
        password = app_setting("DEMO_PASSWORD")
        demo_accounts_seed(password=password)
        for username, role in DEMO_ACCOUNTS:
            self.stdout.write(f"  {username:<9} {role}")
        self.stdout.write(f"Demo password: {password!r} (set CLUSTERTWIN_DEMO_PASSWORD to change)")
