"""Reading uploaded evaluations for pages and the API: the declaration and file digests for
whoever may browse a pack it scores; the program's files for its reviewers (``program_files``).

Sealed data is never read here: runs.privileged.EvaluationSealedReader is its only way out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from django.utils.safestring import SafeString
from pygments.lexers import BashLexer, TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from evaluations.access import can_read_program, visible_definitions
from evaluations.manifest import KEYS, EvaluationManifest
from evaluations.models import EvaluationDefinition, EvaluationFile, FileRole
from evaluations.registry import manifest_of
from evaluations.services import blob_chunks
from packs.access import visible_versions
from packs.readable import highlighted

# A program file larger than this is listed (size, digest) but not shown.
MAX_PROGRAM_DISPLAY_BYTES = 256 * 1024
MAX_PROGRAM_FILES_SHOWN = 50


def definition_list(*, user: Any, pack: str = "") -> QuerySet[EvaluationDefinition]:
    definitions = visible_definitions(user)
    if pack:
        definitions = definitions.filter(targets__pack_id=pack)
    return (
        EvaluationDefinition.objects.filter(pk__in=definitions.values("pk"))
        .select_related("uploaded_by")
        .prefetch_related("targets")
        .order_by("name", "-version")
    )


def definition_get(name: str, version: int, *, user: Any) -> EvaluationDefinition:
    found = (
        visible_definitions(user)
        .select_related("uploaded_by")
        .filter(name=name, version=version)
        .first()
    )
    if found is None:
        raise Http404("No such evaluation.")
    return found


def definition_versions(name: str, *, user: Any) -> QuerySet[EvaluationDefinition]:
    versions = definition_list(user=user).filter(name=name)
    if not versions.exists():
        raise Http404("No such evaluation.")
    return versions


@dataclass(frozen=True)
class Target:
    pack_id: str
    versions: list[int] | None  # None: every version
    # Of the named versions, those this user may open (for links).
    linked: list[int]


def targets(definition: EvaluationDefinition, *, user: Any) -> list[Target]:
    rows = sorted(definition.targets.all(), key=lambda target: target.pack_id)
    seen = {
        (pack_id, version)
        for pack_id, version in visible_versions(user)
        .filter(pack__pack_id__in=[row.pack_id for row in rows])
        .values_list("pack__pack_id", "version")
    }
    return [
        Target(
            row.pack_id,
            row.versions,
            sorted(
                version
                for pack_id, version in seen
                if pack_id == row.pack_id and (row.versions is None or version in row.versions)
            ),
        )
        for row in rows
    ]


def files_by_role(definition: EvaluationDefinition) -> dict[str, list[EvaluationFile]]:
    grouped: dict[str, list[EvaluationFile]] = {FileRole.PROGRAM: [], FileRole.SEALED: []}
    for item in definition.files.order_by("role", "path"):
        grouped.setdefault(item.role, []).append(item)
    return grouped


def manifest(definition: EvaluationDefinition) -> EvaluationManifest:
    return manifest_of(definition)


# --- the program's files (its reviewers only) -----------------------------------------------


@dataclass(frozen=True)
class ProgramFile:
    file: EvaluationFile
    html: SafeString | None  # None: binary, or too large to show
    note: str


def program_files(definition: EvaluationDefinition, *, user: Any) -> list[ProgramFile]:
    """The program's files, highlighted, for the maintainers of a pack it scores, reviewers
    and admins; [] for anyone else (nothing is read). Sealed files are never read here."""
    if not can_read_program(user, definition):
        return []
    shown: list[ProgramFile] = []
    program = definition.files.filter(role=FileRole.PROGRAM).order_by("path")
    for item in program[:MAX_PROGRAM_FILES_SHOWN]:
        if item.role != FileRole.PROGRAM:  # never a sealed file, whatever the query said
            continue
        if item.size > MAX_PROGRAM_DISPLAY_BYTES:
            shown.append(ProgramFile(item, None, "too large to show here"))
            continue
        data = b"".join(blob_chunks(item.sha256))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            shown.append(ProgramFile(item, None, "binary file: not shown"))
            continue
        shown.append(ProgramFile(item, highlighted(text, _lexer(item.path, text)), ""))
    return shown


def _lexer(path: str, text: str) -> Any:
    if path.endswith(".sh"):
        return BashLexer()
    try:
        return get_lexer_for_filename(path, text)
    except ClassNotFound:
        return TextLexer()


# --- comparing two versions (declaration and digests; never contents) ---------------------------


@dataclass(frozen=True)
class FieldChange:
    field: str
    old: str
    new: str


@dataclass(frozen=True)
class FileChange:
    role: str
    path: str
    change: str  # added | removed | changed | same
    old: EvaluationFile | None
    new: EvaluationFile | None


@dataclass(frozen=True)
class Comparison:
    old: EvaluationDefinition
    new: EvaluationDefinition
    fields: list[FieldChange]
    files: list[FileChange]

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("added", "removed", "changed", "same"), 0)
        for item in self.files:
            counts[item.change] += 1
        return counts

    @property
    def identical(self) -> bool:
        return self.old.digest == self.new.digest


def _shown(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def compare(old: EvaluationDefinition, new: EvaluationDefinition) -> Comparison:
    fields = [
        FieldChange(key, _shown(old.manifest.get(key)), _shown(new.manifest.get(key)))
        for key in KEYS
        if key != "version" and old.manifest.get(key) != new.manifest.get(key)
    ]
    before = {(f.role, f.path): f for f in old.files.all()}
    after = {(f.role, f.path): f for f in new.files.all()}
    files = []
    for role, path in sorted(before.keys() | after.keys()):
        a, b = before.get((role, path)), after.get((role, path))
        if a is None:
            change = "added"
        elif b is None:
            change = "removed"
        elif (a.sha256, a.mode) != (b.sha256, b.mode):
            change = "changed"
        else:
            change = "same"
        files.append(FileChange(role, path, change, a, b))
    return Comparison(old, new, fields, files)
