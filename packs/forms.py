from __future__ import annotations

from django import forms
from django.conf import settings
from django.template.defaultfilters import filesizeformat


class PackUploadForm(forms.Form):
    archive = forms.FileField(
        required=False,
        label="Pack archive",
        help_text="A .zip or .tar.gz of the pack folder (manifest.yaml, tasks.jsonl, assets/, "
        "hidden/).",
    )
    manifest = forms.FileField(required=False, label="manifest.yaml")
    tasks = forms.FileField(required=False, label="tasks.jsonl")
    files = forms.FileField(
        required=False,
        label="Asset roots archive (optional)",
        help_text="A .zip or .tar.gz holding the assets/ and hidden/ folders.",
    )

    def clean(self) -> dict:
        data = super().clean() or {}
        archive = data.get("archive")
        parts = [data.get("manifest"), data.get("tasks")]
        if archive and any(parts + [data.get("files")]):
            raise forms.ValidationError(
                "Upload either one pack archive, or manifest.yaml and tasks.jsonl — not both."
            )
        if not archive and not all(parts):
            if any(parts):
                missing = "tasks.jsonl" if parts[0] else "manifest.yaml"
                self.add_error("tasks" if parts[0] else "manifest", f"{missing} is required.")
            else:
                raise forms.ValidationError(
                    "Choose a pack archive, or a manifest.yaml and a tasks.jsonl."
                )
        total = sum(
            upload.size
            for upload in (data.get(n) for n in ("archive", "manifest", "tasks", "files"))
            if upload is not None
        )
        if total > settings.SECUREBENCH_MAX_UPLOAD_BYTES:
            raise forms.ValidationError(too_large_message(total))
        return data


def too_large_message(size: int | None = None) -> str:
    limit = filesizeformat(settings.SECUREBENCH_MAX_UPLOAD_BYTES)
    if size is None:
        return f"The upload is larger than the {limit} limit."
    return f"The file is {filesizeformat(size)}; the limit is {limit}."


class PackFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search", max_length=100)
    family = forms.CharField(required=False, max_length=64)
