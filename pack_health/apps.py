from django.apps import AppConfig

from runs import hooks as run_hooks


class PackHealthConfig(AppConfig):
    name = "pack_health"
    verbose_name = "pack health"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Lower layers call back through their hooks; they never import this app.
        from pack_health import panels, services  # noqa: PLC0415 - needs the app registry ready
        from packs import hooks as pack_hooks  # noqa: PLC0415 - needs the app registry ready

        pack_hooks.on_version_created(services.on_version_created)
        pack_hooks.register_version_panel(panels.version_panel)
        run_hooks.on_evaluation_done(services.on_evaluation_done)
