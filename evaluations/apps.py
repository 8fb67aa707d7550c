from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    name = "evaluations"
    verbose_name = "Evaluations that score runs"

    def ready(self) -> None:
        from evaluations.examples import (  # noqa: PLC0415 - needs the app registry ready
            import_example_evaluations,
        )
        from packs import hooks  # noqa: PLC0415 - needs the app registry ready

        hooks.on_examples_imported(import_example_evaluations)
