"""The form that opens an episode run from a pack version's page."""

from __future__ import annotations

from django import forms


class EpisodeRunForm(forms.Form):
    # Field ids start with "live_": the version page already has an id_family filter.
    agent_name = forms.CharField(
        max_length=200,
        help_text="Shown on the run's pages and the leaderboard.",
    )
    agent_version = forms.CharField(max_length=100, required=False)
    model_name = forms.CharField(max_length=200, required=False, label="Model")
    oracle = forms.BooleanField(
        required=False,
        label="Oracle run",
        help_text="Its episodes answer cube/privileged_info with each task's reference while "
        "your debug mode lasts (every read audited); never ranked.",
    )

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("auto_id", "live_%s")
        super().__init__(*args, **kwargs)

    def clean_agent_name(self) -> str:
        name = " ".join(self.cleaned_data["agent_name"].split())
        if not name:
            raise forms.ValidationError("Give the agent's name.")
        return name
