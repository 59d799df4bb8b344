"""``{% load incident_tags %}``: a drill row's end once its repair (or duration) ran out, so a
drill ends visibly as its incident resolves (``twin.pages.incident_rows``)."""

from django import template
from django.utils.html import format_html

from twin.control.actions import drill_ran_out_at
from twin.live import selectors as live_selectors
from twin.pages import formats
from twin.pages.clock import sim_clock

register = template.Library()


@register.simple_tag(takes_context=True)
def drill_end(context, drill):
    """``ended <when> (ran out)`` for a drill whose repair or duration is over, else ``–``;
    the live state is read once per render."""
    cache = context.render_context
    if "twin_live_end" not in cache:
        live = live_selectors.live_state_get()
        cache["twin_live_end"] = (live.t_sim if live is not None else None, sim_clock(live))
    t_sim, clock = cache["twin_live_end"]
    end = drill_ran_out_at(drill, t_sim)
    if end is None:
        return formats.NONE
    return format_html('<span class="drill-ran-out">ended {} (ran out)</span>',
                       formats.when_html(end, clock))
