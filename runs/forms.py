from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.forms.models import ModelChoiceIterator
from django.template.defaultfilters import filesizeformat

from packs import access as pack_access
from packs.models import ContractVersion, VersionState
from runs.comparison import VERDICT_CATEGORIES
from runs.evaluators import scoring_problem
from runs.models import AuditAction, EvaluationStatus, ResultStatus
from runs.selectors import RESULT_SORTS, submittable_versions
from runs.services import draft_refusal

BUNDLE_SUFFIXES = (".jsonl", ".zip", ".tar.gz", ".tgz")


class PublishedChoices(ModelChoiceIterator):
    """The choices offered: published versions only (no run may target a draft). The field
    still accepts any version the user may see, so that picking a draft is answered with why
    it is refused rather than "not one of the choices"."""

    def __init__(self, field: forms.ModelChoiceField) -> None:
        super().__init__(field)
        self.queryset = self.queryset.filter(state=VersionState.PUBLISHED)


class ContractVersionChoiceField(forms.ModelChoiceField):
    iterator = PublishedChoices

    def label_from_instance(self, obj: ContractVersion) -> str:
        return f"{obj.pack.pack_id} v{obj.version}"


class RunSubmitForm(forms.Form):
    contract_version = ContractVersionChoiceField(
        queryset=ContractVersion.objects.none(),
        label="Pack version",
        empty_label="choose a pack version",
        help_text="Runs target exactly one contract version; candidates are checked against "
        "its tasks.",
    )
    agent_name = forms.CharField(
        max_length=200,
        required=False,
        label="Agent name",
        help_text="Leave empty to use agent_name from the bundle's metadata.",
    )
    agent_version = forms.CharField(max_length=100, required=False, label="Agent version")
    model_name = forms.CharField(max_length=200, required=False, label="Model")
    notes = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3}), label="Notes", max_length=5000
    )
    bundle = forms.FileField(
        label="Candidate bundle",
        help_text="A .jsonl file with one candidate per line, or a .zip / .tar.gz holding one.",
    )

    def __init__(self, *args, user: Any = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Versions the user may not see are not there at all (a draft of someone else's pack
        # is "not one of the choices", like a version never stored).
        versions = submittable_versions().filter(pack_access.version_visibility(user))
        self.fields["contract_version"].queryset = versions  # type: ignore[attr-defined]

    def clean_contract_version(self):
        contract_version = self.cleaned_data["contract_version"]
        if (refusal := draft_refusal(contract_version)) is not None:
            raise forms.ValidationError(refusal)
        problem = scoring_problem(contract_version.contract)
        if problem is not None:
            raise forms.ValidationError(problem)
        return contract_version

    def clean_bundle(self):
        bundle = self.cleaned_data["bundle"]
        name = (bundle.name or "").lower()
        if not name.endswith(BUNDLE_SUFFIXES):
            raise forms.ValidationError("Upload a .jsonl, .zip or .tar.gz bundle.")
        if bundle.size > settings.SECUREBENCH_MAX_BUNDLE_BYTES:
            raise forms.ValidationError(bundle_too_large_message(bundle.size))
        return bundle


def bundle_too_large_message(size: int | None = None) -> str:
    limit = filesizeformat(settings.SECUREBENCH_MAX_BUNDLE_BYTES)
    if size is None:
        return f"The bundle is larger than the {limit} limit."
    return f"The bundle is {filesizeformat(size)}; the limit is {limit}."


def _choices(values, blank: str) -> list[tuple[str, str]]:
    return [("", blank), *((v, v) for v in values)]


class RunFilterForm(forms.Form):
    pack = forms.CharField(required=False, max_length=100)
    version = forms.IntegerField(required=False, min_value=1)
    agent = forms.CharField(required=False, max_length=200)
    status = forms.ChoiceField(
        required=False, choices=_choices(EvaluationStatus.values, "any status")
    )
    # ?runs=12,13: exactly these runs (where a button that starts several runs lands).
    runs = forms.RegexField(required=False, regex=r"^\d{1,12}(,\d{1,12}){0,19}$")

    def run_ids(self) -> list[int]:
        self.is_valid()
        text = self.cleaned_data.get("runs") or ""
        return [int(part) for part in text.split(",") if part]


class ResultFilterForm(forms.Form):
    status = forms.ChoiceField(required=False, choices=_choices(ResultStatus.values, "any"))
    family = forms.CharField(required=False, max_length=64)
    reason = forms.CharField(required=False, max_length=64)
    sort = forms.ChoiceField(
        required=False,
        choices=[(key, key) for name in RESULT_SORTS for key in (name, f"-{name}")],
    )


class CompareFilterForm(forms.Form):
    a = forms.IntegerField(min_value=1)
    b = forms.IntegerField(min_value=1)
    category = forms.ChoiceField(
        required=False, choices=_choices(list(VERDICT_CATEGORIES), "all tasks")
    )


class AuditFilterForm(forms.Form):
    user = forms.CharField(required=False, max_length=150)
    action = forms.ChoiceField(required=False, choices=[("", "any action"), *AuditAction.choices])
    pack = forms.CharField(required=False, max_length=100)
    since = forms.DateField(required=False, label="From")
    until = forms.DateField(required=False, label="To")
