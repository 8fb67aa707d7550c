from django.apps import AppConfig


class PacksConfig(AppConfig):
    name = "packs"
    verbose_name = "Benchmark packs"
