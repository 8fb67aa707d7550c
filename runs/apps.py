from django.apps import AppConfig
from django.db.models.signals import post_migrate


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs and evaluations"

    def ready(self) -> None:
        from packs import hooks as pack_hooks  # noqa: PLC0415 - needs the app registry ready
        from runs.evaluation_panels import (  # noqa: PLC0415 - needs the app registry ready
            pack_evaluations_panel,
            version_evaluations_panel,
        )
        from runs.panels import reference_panel  # noqa: PLC0415 - needs the app registry ready
        from runs.roles import ensure_role_groups  # noqa: PLC0415 - needs the app registry ready

        post_migrate.connect(ensure_role_groups, sender=self, dispatch_uid="runs-role-groups")
        # The version page lives below runs: it shows this panel through its hook.
        pack_hooks.register_version_panel(reference_panel)
        # The evaluations that score a pack: built-in scorers and uploaded ones.
        pack_hooks.register_pack_panel(pack_evaluations_panel)
        pack_hooks.register_version_panel(version_evaluations_panel)
