from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "operations"
    verbose_name = "Operations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # pack_health asks through its hook whether a worker can run sandboxed checks now.
        from operations import selectors  # noqa: PLC0415 - needs the app registry ready
        from pack_health import hooks as health_hooks  # noqa: PLC0415 - same

        health_hooks.register_sandbox_capability(selectors.sandbox_capability)
