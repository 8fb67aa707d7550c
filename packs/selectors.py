"""Reads for pack pages and the API. Nothing here returns a non-public value, except the
evaluator's reads at the end (workers only); the audited debug-mode views read one sealed
value at a time through runs.privileged.SealedReader (which calls packs.sealed)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404

from packs import access
from packs.blobs import blob_cache
from packs.internal import internal
from packs.models import (
    ContractVersion,
    Pack,
    PackFile,
    Resource,
    ResourceFile,
    Task,
)
from verifiers.families import artifact_task
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN, LANES, PUBLIC
from verifiers.task import TaskFile, TaskLanes


def pack_list(*, user: Any, query: str = "", family: str = "") -> QuerySet[Pack]:
    """Packs the user may see, each with its latest version *for this user* (``shown_version``,
    its task count and families) and how many versions the user may see."""
    visible = _visible_of_pack(user)
    latest = visible.order_by("-version")
    counted = visible.order_by().values("pack").annotate(n=Count("pk")).values("n")
    # Internal packs (the canary) are listed on /operations/ only, whoever asks.
    packs = (
        access.visible_packs(user)
        .exclude(internal())
        .annotate(
            shown_version=Subquery(latest.values("version")[:1]),
            version_count=Coalesce(Subquery(counted), 0),
            latest_task_count=Subquery(latest.values("task_count")[:1]),
            latest_families=Subquery(latest.values("family_counts")[:1]),
        )
    )
    if query:
        packs = packs.filter(
            Q(pack_id__icontains=query)
            | Q(title__icontains=query)
            | Q(description__icontains=query)
        )
    if family:
        tasks = Task.objects.filter(
            access.version_visibility(user, "contract_version__"),
            contract_version__pack=OuterRef("pk"),
            family=family,
        )
        packs = packs.filter(Exists(tasks))
    return packs.order_by("pack_id")


def known_families(*, user: Any) -> list[str]:
    """Families of the tasks in versions the user may see (a draft's new family stays unseen)."""
    tasks = Task.objects.filter(access.version_visibility(user, "contract_version__"))
    return list(tasks.order_by("family").values_list("family", flat=True).distinct())


def pack_get(pack_id: str, *, user: Any) -> Pack:
    """A pack the user may see, with ``shown_version`` (the latest version they may see);
    404 otherwise, as for a pack never stored."""
    latest = _visible_of_pack(user).order_by("-version").values("version")[:1]
    packs = access.visible_packs(user).annotate(shown_version=Subquery(latest))
    return get_object_or_404(packs, pack_id=pack_id)


def _visible_of_pack(user: Any) -> QuerySet[ContractVersion]:
    """Versions the user may see of the pack of the outer query (for subqueries)."""
    return ContractVersion.objects.filter(access.version_visibility(user), pack=OuterRef("pk"))


def pack_versions(pack: Pack, *, user: Any) -> QuerySet[ContractVersion]:
    """The pack's versions the user may see, newest first."""
    return access.visible_versions(user).filter(pack=pack).order_by("-version")


def visible_version_get(pack_id: str, version: int, *, user: Any) -> ContractVersion:
    """A version the user may see (packs.access); a draft is a 404 for anyone else, exactly
    like a version never stored. Every page, API view and download of packs asks this."""
    return get_object_or_404(
        access.visible_versions(user).select_related("pack", "uploaded_by", "published_by"),
        pack__pack_id=pack_id,
        version=version,
    )


def previous_visible_version(cv: ContractVersion, *, user: Any) -> ContractVersion | None:
    """The version just below this one that the user may see (numbers may skip)."""
    return pack_versions(cv.pack, user=user).filter(version__lt=cv.version).first()


def version_get(pack_id: str, version: int) -> ContractVersion:
    """Any stored version, drafts included, with no access check: for trusted code and for
    views that check a stronger right themselves (runs' privileged views: whoever holds the
    privilege on a pack may see its drafts). Pages and APIs use ``visible_version_get``."""
    return get_object_or_404(
        ContractVersion.objects.select_related("pack", "uploaded_by"),
        pack__pack_id=pack_id,
        version=version,
    )


def version_tasks(contract_version: ContractVersion, *, family: str = "") -> QuerySet[Task]:
    tasks = contract_version.tasks.order_by("position")
    if family:
        tasks = tasks.filter(family=family)
    return tasks


def tasks_with_resource_summaries(tasks: QuerySet[Task]) -> QuerySet[Task]:
    """Tasks with their resources' name, lane, kind and size only (values stay unread).

    The tasks' own JSON columns (metadata, environment, agent payload) stay unread too: a
    matrix page shows none of them, and for large prompts they are most of a row's bytes.
    """
    return tasks.only(
        "id", "contract_version_id", "task_id", "family", "position", "has_verifier"
    ).prefetch_related(
        Prefetch(
            "resources",
            queryset=Resource.objects.only(
                "id", "task_id", "name", "lane", "kind", "size", "position"
            ).order_by("position"),
        )
    )


def task_get(contract_version: ContractVersion, task_id: str) -> Task:
    return get_object_or_404(contract_version.tasks, task_id=task_id)


def task_neighbours(task: Task) -> dict[str, str | None]:
    """Task ids before and after this one in the version, for previous/next links."""
    siblings = Task.objects.filter(contract_version_id=task.contract_version_id)
    before = siblings.filter(position=task.position - 1).values_list("task_id", flat=True)
    after = siblings.filter(position=task.position + 1).values_list("task_id", flat=True)
    return {"previous": before.first(), "next": after.first()}


@dataclass(frozen=True)
class ResourceCard:
    name: str
    lane: str
    kind: str
    size: int
    sha256: str
    file_count: int


def sealed_resource_cards(task: Task) -> list[ResourceCard]:
    """Name, lane, kind, size and digest of each non-public resource; never its value."""
    resources = (
        task.resources.exclude(lane=PUBLIC)
        .only("name", "lane", "kind", "size", "sha256", "position")
        .annotate(file_count=Count("files"))
        .order_by("position")
    )
    return [ResourceCard(r.name, r.lane, r.kind, r.size, r.sha256, r.file_count) for r in resources]


def public_asset_files(task: Task) -> QuerySet[PackFile]:
    return PackFile.objects.filter(
        root="public",
        id__in=ResourceFile.objects.filter(resource__task=task, resource__lane=PUBLIC).values(
            "pack_file_id"
        ),
    ).order_by("path")


def public_asset_paths(task_pks: list[int]) -> dict[int, list[str]]:
    """Public asset file paths per task, for a page of tasks in one query."""
    links = (
        ResourceFile.objects.filter(
            resource__task_id__in=task_pks, resource__lane=PUBLIC, pack_file__root="public"
        )
        .order_by("pack_file__path")
        .values_list("resource__task_id", "pack_file__path")
    )
    paths: dict[int, list[str]] = {}
    for task_pk, path in links:
        paths.setdefault(task_pk, []).append(path)
    return paths


def public_file_get(contract_version: ContractVersion, path: str) -> PackFile:
    return get_object_or_404(contract_version.files, root="public", path=path)


@dataclass(frozen=True)
class VisibilityColumn:
    name: str
    counts: dict[str, int]

    @property
    def lanes(self) -> list[str]:
        return [lane for lane in LANES if self.counts.get(lane)]


def visibility_columns(contract_version: ContractVersion) -> list[VisibilityColumn]:
    """Resource names × lane counts, computed at compile time (cheap for 100k-row packs)."""
    resource_lanes: dict[str, dict[str, int]] = contract_version.compile_report.get(
        "resource_lanes", {}
    )
    columns = [VisibilityColumn(name, counts) for name, counts in resource_lanes.items()]
    # Public columns first, then evaluation inputs, then hidden: the map reads left to right
    # from what the agent sees to what only the evaluator sees.
    return sorted(columns, key=lambda c: (min(LANES.index(lane) for lane in c.lanes), c.name))


def evaluator_task_lanes(task: Task) -> TaskLanes:
    """All three lanes of a task, for trusted evaluator code in a worker only.

    With ``SealedReader`` (debug mode, audited) this is one of the two paths to sealed values;
    only the pipeline and the reference-run builder call it, never a view, partial or API
    (tests/security/test_sealed_reads.py tells the two paths apart by the reads themselves).
    """
    return evaluator_lanes_for_tasks([task])[task.pk]


def evaluator_lanes_for_tasks(tasks: list[Task]) -> dict[int, TaskLanes]:
    """Lanes of many tasks in a fixed number of queries (a chunk of text verdicts).

    Trusted evaluator code only, like ``evaluator_task_lanes``.
    """
    by_pk = {task.pk: task for task in tasks}
    lanes: dict[int, dict[str, dict[str, Any]]] = {pk: {lane: {} for lane in LANES} for pk in by_pk}
    # Plain values, not model instances: a chunk of 500 text verdicts would otherwise spend
    # most of its time building Resource objects and a prefetch cache per resource.
    resources = (
        Resource.objects.filter(task_id__in=by_pk)
        .order_by("task_id", "position")
        .values_list("task_id", "lane", "name", "public_value", "sealed__value")
    )
    for task_pk, lane, name, public_value, sealed_value in resources:
        lanes[task_pk][lane][name] = public_value if lane == PUBLIC else sealed_value
    files = _task_files(by_pk)
    contracts = _contracts(by_pk.values())
    return {
        pk: TaskLanes(
            task_id=task.task_id,
            family=task.family,
            public=lanes[pk][PUBLIC],
            evaluation_inputs=lanes[pk][EVALUATION_INPUTS],
            hidden=lanes[pk][HIDDEN],
            environment=task.environment,
            metadata=task.metadata,
            files=files[pk],
            contract=contracts.get(task.contract_version_id) or {},
        )
        for pk, task in by_pk.items()
    }


# Families whose verifier reads the contract (TaskLanes.contract).
CONTRACT_FAMILIES = frozenset({artifact_task.SPEC.name})


def _contracts(tasks: Iterable[Task]) -> dict[int, dict[str, Any]]:
    """Contracts of the versions whose tasks judge by theirs (artifact_task's required
    outputs), by version pk: one query then, none for every other family."""
    wanted = {task.contract_version_id for task in tasks if task.family in CONTRACT_FAMILIES}
    if not wanted:
        return {}
    rows = ContractVersion.objects.filter(pk__in=wanted).values_list("pk", "contract")
    return {pk: contract or {} for pk, contract in rows}


def _task_files(task_pks: Iterable[int]) -> dict[int, dict[str, tuple[TaskFile, ...]]]:
    """Files of file-backed resources, by task and resource name, in the order stored."""
    files: dict[int, dict[str, list[TaskFile]]] = {pk: {} for pk in task_pks}
    links = (
        ResourceFile.objects.filter(resource__task_id__in=files)
        .order_by("resource__task_id", "resource__position", "pk")
        .values_list("resource__task_id", "resource__name", "pack_file__root", "pack_file__path",
                     "pack_file__sha256")
    )  # fmt: skip
    cache = blob_cache()
    for task_pk, name, root, path, sha256 in links:
        source = cache.local_path(root, sha256)
        files[task_pk].setdefault(name, []).append(TaskFile(path=path, source=source))
    return {
        pk: {name: tuple(found) for name, found in by_name.items()} for pk, by_name in files.items()
    }
