"""``{% load twin_format %}``: the filters of :mod:`twin.pages.formats`.  They live in the pages
package; Django finds template libraries only in an installed app's ``templatetags``."""

from django import template
from django.utils.html import json_script

from twin.api import events
from twin.live import selectors as live_selectors
from twin.pages import formats
from twin.pages.clock import sim_clock

register = template.Library()

register.filter("duration", formats.duration)
register.filter("duration_h", formats.duration_h)
register.filter("percent", formats.percent)
register.filter("thousands", formats.thousands)
register.filter("sim_time", formats.sim_time)
register.filter("when", formats.when_html, is_safe=True)
register.filter("number", formats.number)
register.filter("figure", formats.figure)
register.filter("figure_delta", formats.figure_delta)
register.filter("figure_unit", formats.figure_unit)


@register.simple_tag
def event_kinds_json():
    """Each event kind's severity and routine flag as ``<script id="event-kinds">`` for the
    overview's log (``static/js/twin-panels.js``)."""
    return json_script(events.severity_table(), "event-kinds")


@register.simple_tag(takes_context=True)
def when_live(context, t_sim, unit="s"):
    """``{% when_live t %}``: the simulated instant ``t`` (seconds, or hours with ``unit="h"``)
    as :func:`twin.pages.formats.when_html` writes it, on the live run's clock (read once per
    render)."""
    cache = context.render_context
    if "twin_clock" not in cache:
        cache["twin_clock"] = sim_clock(live_selectors.live_state_get())
    if t_sim is not None and t_sim != "" and unit == "h":
        t_sim = float(t_sim) * 3600.0
    return formats.when_html(t_sim, cache["twin_clock"])
