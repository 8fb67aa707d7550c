from django.apps import AppConfig


class PacksConfig(AppConfig):
    name = "packs"
    verbose_name = "Benchmark packs"

    def ready(self) -> None:
        from packs import checks  # noqa: F401 - registers the system checks
