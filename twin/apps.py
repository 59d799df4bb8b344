from django.apps import AppConfig


class TwinConfig(AppConfig):
    """One Django app (label ``twin``) whose domain packages each own their models, admin,
    services and selectors; ``twin.models`` is the registry Django loads."""

    name = "twin"
    verbose_name = "ClusterTwin inventory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # No engine starts here: the serving command starts it (docs/live.md).
        from twin.config import (
            checks,  # noqa: F401  (registers the system checks)
            sqlite_json,
        )
        from twin.inventory.replanning import receivers_connect

        receivers_connect()
        sqlite_json.install()  # before any check asks SQLite for JSON (twin/config/sqlite_json.py)
