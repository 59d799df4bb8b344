"""``{% demo_accounts as accounts %}``: the demo logins, only where the demo flag is on."""

from __future__ import annotations

from django import template
from django.conf import settings

from twin.config.demo import DEMO_ACCOUNTS

register = template.Library()


@register.simple_tag
def demo_accounts() -> tuple[tuple[str, str], ...]:
    """``(username, role)`` pairs with ``CLUSTERTWIN_INSECURE_DEMO`` on, else ``()``: a
    deployment's login page never advertises accounts."""
    return DEMO_ACCOUNTS if settings.CLUSTERTWIN_INSECURE_DEMO else ()
