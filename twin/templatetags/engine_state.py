"""``{% stale_banner_data %}``: what the stale banner (``static/js/twin-live.js``) needs to say
how old the page's data is and why no frames come: this process's engine mode, when the live
state was last written and the server's clock, as ``data-*`` attributes."""

from __future__ import annotations

import time

from django import template
from django.utils.html import format_html

from twin import app_setting
from twin.live import selectors as live_selectors

register = template.Library()


@register.simple_tag
def stale_banner_data() -> str:
    """``data-engine-mode`` (``embedded``, ``separate`` or ``off``), ``data-state-at`` (epoch s
    of the live state's last write; empty before any) and ``data-server-now`` (epoch s), so a
    browser with a wrong clock still counts the age right."""
    version = live_selectors.live_state_version()
    written = version[2] if version is not None else None
    return format_html('data-engine-mode="{}" data-state-at="{}" data-server-now="{}"',
                       app_setting("ENGINE_MODE"),
                       "" if written is None else f"{written.timestamp():.3f}",
                       f"{time.time():.3f}")
