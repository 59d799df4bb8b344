"""The demo logins `make run` seeds (admin, staff, operator)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import transaction

DEMO_ACCOUNTS = (
    ("admin", "superuser: edits inventory in the admin"),
    ("staff", "staff with twin.run_drill: runs drills"),
    ("operator", "view only"),
)


@transaction.atomic
def demo_accounts_seed(*, password: str, reset_passwords: bool = False) -> list[str]:
    """Create the missing demo accounts with ``password``; returns the usernames created.

    An existing account is left alone (its password, its roles) unless ``reset_passwords``:
    an operator who changed a demo password keeps it across ``make run``.
    """
    users = get_user_model()
    drill = Permission.objects.get(codename="run_drill", content_type__app_label="twin")
    created = []
    for username, _ in DEMO_ACCOUNTS:
        user, new = users.objects.get_or_create(username=username)
        if not (new or reset_passwords):
            continue
        user.is_superuser = username == "admin"
        user.is_staff = username in ("admin", "staff")
        user.set_password(password)
        user.save()
        if username == "staff":
            user.user_permissions.add(drill)
        if new:
            created.append(username)
    return created
