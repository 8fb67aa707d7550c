"""Evaluations that authors bring: each a versioned, immutable, content-addressed program.

Seed 004 keeps the benchmark (the contract) apart from the evaluation (how a submitted
artifact is scored). An uploaded evaluation is stored like a contract version: its key
``id@version`` names one digest for ever (the same key with other content is refused), its
program and sealed data lie in the sealed store by sha256 (no URL maps to it), and only its
declaration (what it scores, its metrics) is public.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from packs.models import blob_name


class FileRole(models.TextChoices):
    # The program's files: seen by the pack's maintainers and reviewers, never by agents.
    PROGRAM = "program", "program"
    # Labels, opponents, thresholds: sealed like a pack's hidden lane (debug mode, audited).
    SEALED = "sealed", "sealed data"


class EvaluationDefinition(models.Model):
    name = models.CharField(max_length=63)
    version = models.PositiveIntegerField()
    digest = models.CharField(max_length=64, db_index=True)
    title = models.CharField(max_length=4000, blank=True)
    description = models.TextField(blank=True)
    scope = models.CharField(max_length=8)
    # evaluation.yaml as parsed (public: the declaration, never the program or its data).
    manifest = models.JSONField()
    primary_metric = models.CharField(max_length=63)
    source_name = models.CharField(max_length=255, blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    uploaded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="unique_evaluation_version"),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def short_digest(self) -> str:
        return self.digest[:12]


class EvaluationTarget(models.Model):
    """A pack the evaluation may score: every version (versions null) or the listed ones."""

    definition = models.ForeignKey(
        EvaluationDefinition, on_delete=models.CASCADE, related_name="targets"
    )
    pack_id = models.CharField(max_length=100, db_index=True)
    versions = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["definition", "pack_id"], name="unique_target"),
        ]

    def __str__(self) -> str:
        return f"{self.definition.key} scores {self.pack_id}"

    def covers(self, version: int) -> bool:
        return self.versions is None or version in self.versions


class EvaluationFile(models.Model):
    definition = models.ForeignKey(
        EvaluationDefinition, on_delete=models.CASCADE, related_name="files"
    )
    role = models.CharField(max_length=8, choices=FileRole.choices)
    path = models.CharField(max_length=1024)  # relative to program/ or sealed/
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    mode = models.PositiveIntegerField(default=0o644)

    class Meta:
        ordering = ["definition", "role", "path"]
        constraints = [
            models.UniqueConstraint(
                fields=["definition", "role", "path"], name="unique_evaluation_file"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role}:{self.path}"

    @property
    def blob_name(self) -> str:
        return blob_name(self.sha256)
