from django.apps import AppConfig


class GatewayConfig(AppConfig):
    """Each live run's metered model endpoint (gateway → episodes → runs → packs)."""

    name = "gateway"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Opening a run (API or page) shows the endpoint's URL; runs and episodes never
        # import us, so we add it through runs.modes.
        from gateway.services import opened_run_endpoint  # noqa: PLC0415 - needs the app registry
        from runs.modes import register_run_opened_extra  # noqa: PLC0415 - needs the app registry

        register_run_opened_extra(opened_run_endpoint)
