"""``{% load entity_names %}``: names and links of :mod:`twin.inventory.names` for templates."""

from django import template
from django.utils.html import json_script

from twin.inventory import names

register = template.Library()


@register.simple_tag
def component_words_json():
    """The words the core's log puts before a unit id, as ``<script id="component-words">``
    for the overview's log (``static/js/twin-panels.js`` names and links those units)."""
    return json_script(sorted(names.COMPONENT_KINDS), "component-words")
