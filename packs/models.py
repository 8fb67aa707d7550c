"""Packs, their immutable contract versions, compiled tasks and their resources.

Non-public resource values live in ``SealedValue`` (their own table) and non-public files in
the ``pack_sealed`` storage root, which no URL maps to. Rows are written once, by
``packs.services.pack_import``; nothing here is edited in place.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from verifiers.lanes import EVALUATION_INPUTS, HIDDEN, PUBLIC


class Lane(models.TextChoices):
    PUBLIC = PUBLIC, "public"
    EVALUATION_INPUTS = EVALUATION_INPUTS, "evaluation inputs"
    HIDDEN = HIDDEN, "hidden"


class ResourceKind(models.TextChoices):
    TEXT = "text", "text"
    JSON = "json", "json"
    FILE = "file", "file"
    DIRECTORY = "directory", "directory"


class FileRoot(models.TextChoices):
    PUBLIC = "public", "public asset root"
    EVAL = "eval", "eval asset root"


class VersionState(models.TextChoices):
    # A new version is a draft until its health report clears it (pack_health): visible to
    # its maintainers and privileged users only, and no run but the health checks' own.
    DRAFT = "draft", "draft"
    PUBLISHED = "published", "published"


class PublishPolicy(models.TextChoices):
    AUTO = "auto", "automatically, once its health checks pass"
    MANUAL = "manual", "by a maintainer's click"


class Pack(models.Model):
    pack_id = models.CharField(max_length=100, unique=True)
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Denormalised for the pack list; only pack_import changes it, when a version is added.
    latest_version = models.PositiveIntegerField(default=0)
    # Maintainers add versions and see this pack's privileged information in debug mode
    # (packs.access). The first uploader becomes one; admins manage the rest.
    maintainers = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="maintained_packs"
    )
    # How a new version that passed its health checks becomes published.
    publish_policy = models.CharField(
        max_length=16, choices=PublishPolicy.choices, default=PublishPolicy.AUTO
    )

    class Meta:
        ordering = ["pack_id"]
        permissions = [
            ("browse", "Can browse packs, runs, results and leaderboards"),
            ("view_privileged", "Can view privileged information of every pack in debug mode"),
        ]

    def __str__(self) -> str:
        return self.pack_id


class ContractVersion(models.Model):
    pack = models.ForeignKey(Pack, on_delete=models.PROTECT, related_name="versions")
    version = models.PositiveIntegerField()
    digest = models.CharField(max_length=64, db_index=True)
    manifest = models.JSONField()
    contract = models.JSONField(null=True, blank=True)
    compile_report = models.JSONField(default=dict)
    family_counts = models.JSONField(default=dict)
    lane_counts = models.JSONField(default=dict)
    task_count = models.PositiveIntegerField()
    file_count = models.PositiveIntegerField(default=0)
    file_bytes = models.PositiveBigIntegerField(default=0)
    source_name = models.CharField(max_length=255, blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    uploaded_at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(
        max_length=16, choices=VersionState.choices, default=VersionState.DRAFT, db_index=True
    )
    published_at = models.DateTimeField(null=True, blank=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The maintainer's written reason when the version was published despite failing (or
    # unfinished) health checks; shown beside the health badge. Empty for a clean publish.
    publish_reason = models.TextField(blank=True)
    # The manifest's `canary:` strings. Sealed: the leak audit looks for them in everything
    # public, so they are never shown (the stored manifest no longer carries them).
    canaries = models.JSONField(default=list)

    class Meta:
        ordering = ["pack__pack_id", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["pack", "version"], name="unique_pack_version"),
            models.CheckConstraint(condition=Q(version__gte=1), name="version_at_least_one"),
        ]

    def __str__(self) -> str:
        return f"{self.pack.pack_id} v{self.version}"

    @property
    def short_digest(self) -> str:
        return self.digest[:12]


class Task(models.Model):
    contract_version = models.ForeignKey(
        ContractVersion, on_delete=models.PROTECT, related_name="tasks"
    )
    task_id = models.CharField(max_length=200)
    family = models.CharField(max_length=64, db_index=True)
    position = models.PositiveIntegerField()
    line = models.PositiveIntegerField()
    has_verifier = models.BooleanField()
    metadata = models.JSONField(default=dict)
    environment = models.JSONField(default=dict)
    # Exactly the public resources, precomputed: what an agent harness receives.
    agent_payload = models.JSONField(default=dict)

    class Meta:
        ordering = ["contract_version", "position"]
        constraints = [
            models.UniqueConstraint(fields=["contract_version", "task_id"], name="unique_task_id"),
            models.UniqueConstraint(
                fields=["contract_version", "position"], name="unique_task_position"
            ),
        ]

    def __str__(self) -> str:
        return self.task_id


class Resource(models.Model):
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="resources")
    name = models.CharField(max_length=200)
    position = models.PositiveIntegerField()
    lane = models.CharField(max_length=20, choices=Lane.choices, db_index=True)
    kind = models.CharField(max_length=20, choices=ResourceKind.choices)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    # Only public values are kept here; a non-public value lives in SealedValue.
    public_value = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["task", "position"]
        constraints = [
            models.UniqueConstraint(fields=["task", "name"], name="unique_resource_name"),
            models.CheckConstraint(
                condition=Q(lane=PUBLIC) | Q(public_value__isnull=True),
                name="non_public_value_not_in_resource_table",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.lane})"

    @property
    def is_public(self) -> bool:
        return self.lane == PUBLIC


class SealedValue(models.Model):
    """The value of a non-public resource. Never rendered, serialised or logged."""

    resource = models.OneToOneField(
        Resource, on_delete=models.PROTECT, primary_key=True, related_name="sealed"
    )
    value = models.JSONField(null=True)

    def __str__(self) -> str:
        return f"sealed value of resource {self.resource_id}"


class PackFile(models.Model):
    """A file under one of the pack's asset roots, stored content-addressed by sha256."""

    contract_version = models.ForeignKey(
        ContractVersion, on_delete=models.PROTECT, related_name="files"
    )
    root = models.CharField(max_length=10, choices=FileRoot.choices)
    path = models.CharField(max_length=1024)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["contract_version", "root", "path"]
        constraints = [
            models.UniqueConstraint(
                fields=["contract_version", "root", "path"], name="unique_pack_file"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.root}:{self.path}"

    @property
    def blob_name(self) -> str:
        return blob_name(self.sha256)


class ResourceFile(models.Model):
    """Links a file-backed resource (assets, eval file references) to its files."""

    resource = models.ForeignKey(Resource, on_delete=models.PROTECT, related_name="files")
    pack_file = models.ForeignKey(PackFile, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["resource", "pack_file"], name="unique_resource_file"),
        ]

    def __str__(self) -> str:
        return f"file {self.pack_file_id} of resource {self.resource_id}"


def blob_name(sha256: str) -> str:
    return f"{sha256[:2]}/{sha256}"
