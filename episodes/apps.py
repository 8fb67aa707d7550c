from django.apps import AppConfig


class EpisodesConfig(AppConfig):
    """Agents acting live against a contract version over CUBE (episodes → runs → packs)."""

    name = "episodes"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The run API opens an episode run through runs.modes; runs never imports us.
        from episodes.services import register_run_mode  # noqa: PLC0415 - needs the app registry
        from episodes.views import run_section  # noqa: PLC0415 - needs the app registry
        from runs.models import RunMode  # noqa: PLC0415 - needs the app registry
        from runs.modes import register_run_section  # noqa: PLC0415 - needs the app registry

        register_run_mode()
        # The run page shows the episodes table inside its own (polled) answer.
        register_run_section(RunMode.EPISODES, run_section)
