"""ClusterTwin's Django side: one app (label ``twin``) in packages that show the data flow
(docs/architecture.md).  The one accessor of the app's own settings lives here, at the root,
because every package reads it and it imports nothing of them."""

from django.conf import settings


def app_setting(name: str):
    """``settings.CLUSTERTWIN[name]``: read when called, never at import time."""
    return settings.CLUSTERTWIN[name]
