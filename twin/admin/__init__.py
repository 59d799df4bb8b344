"""The Django admin: the inventory (what admins edit) and the records (drills, audit, alerts).

Django's admin finds ``twin.admin`` by itself (autodiscovery); importing the modules here
registers their ``ModelAdmin`` classes.  The admin is a presentation layer: it reads the live
status (``twin.pages.columns``) and edits through services (``twin.control.edits``)."""

from twin.admin import grid, inventory, records  # noqa: F401
