from __future__ import annotations

from django import forms
from django.conf import settings

from packs.forms import too_large_message


class EvaluationUploadForm(forms.Form):
    archive = forms.FileField(
        label="Evaluation archive",
        help_text="A .zip or .tar.gz of the evaluation folder: evaluation.yaml, program/ and "
        "(optional) sealed/.",
    )

    def clean_archive(self):  # noqa: ANN201 - Django's hook
        archive = self.cleaned_data["archive"]
        if archive.size > settings.SECUREBENCH_MAX_UPLOAD_BYTES:
            raise forms.ValidationError(too_large_message(archive.size))
        return archive


class CompareForm(forms.Form):
    a = forms.IntegerField(min_value=1, required=False)
    b = forms.IntegerField(min_value=1, required=False)
