"""Runs stored before validity existed: an over-budget run is invalid, its budget notes the
reasons (as runs.validity says for new runs)."""

from django.db import migrations


def over_budget_runs_invalid(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    for run in Run.objects.filter(over_budget=True, valid=True).only("pk", "budget_notes"):
        reasons = [f"over budget: {note}" for note in run.budget_notes or []]
        Run.objects.filter(pk=run.pk).update(valid=False, invalid_reasons=reasons)


class Migration(migrations.Migration):
    dependencies = [("runs", "0006_contract_validity_samples_metrics")]

    operations = [migrations.RunPython(over_budget_runs_invalid, migrations.RunPython.noop)]
