"""The site package as an app, so that its own system checks are registered at start."""

from django.apps import AppConfig


class SiteConfig(AppConfig):
    name = "securebench_site"
    verbose_name = "SecureBench site"

    def ready(self) -> None:
        from securebench_site import checks  # noqa: F401, PLC0415 - registers the checks
