from django.apps import AppConfig


class PackHealthConfig(AppConfig):
    name = "pack_health"
    verbose_name = "pack health"
    default_auto_field = "django.db.models.BigAutoField"
