from django.apps import AppConfig


class TwinConfig(AppConfig):
    name = "twin"
    verbose_name = "ClusterTwin inventory"
    default_auto_field = "django.db.models.BigAutoField"
