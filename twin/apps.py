from django.apps import AppConfig


class TwinConfig(AppConfig):
    name = "twin"
    verbose_name = "ClusterTwin inventory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from twin import checks  # noqa: F401  (registers the system checks)
        from twin.replanning import receivers_connect

        receivers_connect()
