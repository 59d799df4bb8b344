"""One accessor for ClusterTwin's own settings (never read at import time)."""

from django.conf import settings


def app_setting(name: str):
    return settings.CLUSTERTWIN[name]
