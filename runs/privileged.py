"""Debug mode, the audit trail and the sealed reader: the only way to privileged information.

A user who may see privileged information of at least one pack (packs.access) switches debug
mode on for their session, with a reason; it ends after SECUREBENCH_DEBUG_MODE_MINUTES or
when they switch it off. Every privileged view asks ``require_privileged`` first and then
records an ``AuditEvent`` with the debug-mode reason. The session holds an absolute expiry
time (epoch seconds), so nothing but the clock and the user's own switch can extend it.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from django.utils import timezone

from evaluations import access as evaluation_access
from evaluations.models import EvaluationDefinition, EvaluationFile, FileRole
from evaluations.services import blob_chunks
from packs import access as pack_access
from packs import sealed
from packs.models import ContractVersion, Pack, PackFile, Task
from runs.models import AuditAction, AuditEvent

SESSION_KEY = "securebench_debug_mode"
MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class DebugMode:
    reason: str
    expires_at: dt.datetime


class DebugModeRefused(Exception):
    """The switch was refused; the message is for the user."""


def debug_mode(request: HttpRequest) -> DebugMode | None:
    """The request's active debug mode, or None (off, expired, or no longer privileged)."""
    cached = getattr(request, "_securebench_debug_mode", False)
    if cached is not False:
        return cached
    state = _read_state(request)
    request._securebench_debug_mode = state  # type: ignore[attr-defined]
    return state


def _read_state(request: HttpRequest) -> DebugMode | None:
    raw = request.session.get(SESSION_KEY) if hasattr(request, "session") else None
    if not raw:
        return None
    user = request.user
    valid = isinstance(raw, dict) and raw.get("user") == user.pk and "until" in raw
    if not valid or not pack_access.has_any_privilege(user):
        request.session.pop(SESSION_KEY, None)
        return None
    expires_at = dt.datetime.fromtimestamp(float(raw["until"]), tz=dt.UTC)
    if expires_at <= timezone.now():
        request.session.pop(SESSION_KEY, None)
        _record(request, AuditAction.DEBUG_MODE_OFF, reason=raw.get("reason", ""), note="expired")
        return None
    return DebugMode(reason=str(raw.get("reason", "")), expires_at=expires_at)


def session_debug_mode(session_key: str, user: Any) -> DebugMode | None:
    """The debug mode a stored session still holds for ``user`` (an oracle episode run opened
    from the site keeps its privilege only while the debug mode that opened it lasts)."""
    if not session_key or user is None:
        return None
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    raw = store.get(SESSION_KEY)
    if not isinstance(raw, dict) or raw.get("user") != user.pk or "until" not in raw:
        return None
    if not pack_access.has_any_privilege(user):
        return None
    expires_at = dt.datetime.fromtimestamp(float(raw["until"]), tz=dt.UTC)
    if timezone.now() >= expires_at:
        return None
    return DebugMode(reason=str(raw.get("reason", "")), expires_at=expires_at)


def debug_mode_start(request: HttpRequest, *, reason: str) -> DebugMode:
    user = request.user
    if not pack_access.has_any_privilege(user):
        raise PermissionDenied("Debug mode is for reviewers, admins and pack maintainers.")
    reason = " ".join(reason.split())
    if not reason:
        raise DebugModeRefused("Give a reason: it is recorded with every view in debug mode.")
    if any(unicodedata.category(char) == "Cc" for char in reason):
        raise DebugModeRefused("Write the reason as plain text, without control characters.")
    if len(reason) > MAX_REASON_CHARS:
        raise DebugModeRefused(f"Keep the reason under {MAX_REASON_CHARS} characters.")
    minutes = settings.SECUREBENCH_DEBUG_MODE_MINUTES
    expires_at = timezone.now() + dt.timedelta(minutes=minutes)
    request.session[SESSION_KEY] = {
        "user": user.pk,
        "reason": reason,
        "until": expires_at.timestamp(),
    }
    state = DebugMode(reason=reason, expires_at=expires_at)
    request._securebench_debug_mode = state  # type: ignore[attr-defined]
    _record(request, AuditAction.DEBUG_MODE_ON, reason=reason, note=f"{minutes} minutes")
    return state


def debug_mode_stop(request: HttpRequest) -> None:
    state = debug_mode(request)
    request.session.pop(SESSION_KEY, None)
    request._securebench_debug_mode = None  # type: ignore[attr-defined]
    if state is not None:
        _record(request, AuditAction.DEBUG_MODE_OFF, reason=state.reason, note="switched off")


def require_privileged(request: HttpRequest, pack: Pack) -> DebugMode:
    """Gate of every privileged view: 404 without the privilege for this pack (nothing
    confirms the object exists), 403 with it but debug mode off or expired."""
    if not pack_access.can_view_privileged(request.user, pack):
        raise Http404("Not found.")
    state = debug_mode(request)
    if state is None:
        raise PermissionDenied("Switch debug mode on (with a reason) to see this.")
    return state


def audit(
    request: HttpRequest,
    action: str,
    *,
    mode: DebugMode,
    object_type: str = "",
    object_id: Any = "",
    pack_id: str = "",
    version: int | None = None,
    task_id: str = "",
    resource: str = "",
) -> AuditEvent:
    return AuditEvent.objects.create(
        user=request.user,
        username=request.user.get_username(),
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        pack_id=pack_id,
        version=version,
        task_id=task_id[:200],
        resource=resource[:1024],
        reason=mode.reason,
        ip_address=client_ip(request),
    )


def _record(request: HttpRequest, action: str, *, reason: str, note: str) -> None:
    AuditEvent.objects.create(
        user=request.user,
        username=request.user.get_username(),
        action=action,
        resource=note,
        reason=reason,
        ip_address=client_ip(request),
    )


def client_ip(request: HttpRequest) -> str | None:
    # The direct peer only: a forwarded-for header is the client's to invent. Behind a proxy,
    # the proxy must set REMOTE_ADDR (e.g. gunicorn's --forwarded-allow-ips).
    return request.META.get("REMOTE_ADDR") or None


class SealedReader:
    """The one way a web request reaches sealed lanes (non-public values and eval-root files).

    Opening a reader is the privilege check (``require_privileged`` for the version's pack);
    every read records an ``AuditEvent`` before the value is returned. The evaluator's own
    read in a worker (``packs.selectors.evaluator_lanes_for_tasks``) is the only other path;
    tests/security/test_sealed_reads.py watches the sealed-value table and the sealed file
    root while every page is rendered, and fails on any read outside these two.
    """

    def __init__(self, request: HttpRequest, contract_version: ContractVersion) -> None:
        self.request = request
        self.contract_version = contract_version
        self.mode = require_privileged(request, contract_version.pack)

    def resource(self, task: Task, name: str) -> sealed.SealedResource:
        if task.contract_version_id != self.contract_version.pk:
            # The privilege was checked for this version's pack, not for the task's.
            raise Http404("Not found.")
        found = sealed.sealed_resource(task, name)
        self._audit(
            AuditAction.VIEW_RESOURCE,
            object_type="task",
            object_id=task.pk,
            task_id=task.task_id,
            resource=found.name,
        )
        return found

    def file_list(self) -> QuerySet[PackFile]:
        self._audit(
            AuditAction.LIST_FILES,
            object_type="contract_version",
            object_id=self.contract_version.pk,
        )
        return sealed.sealed_files(self.contract_version)

    def file(self, path: str, *, task_id: str = "") -> sealed.SealedFileContent:
        content = sealed.sealed_file(self.contract_version, path)
        self._audit(
            AuditAction.VIEW_FILE,
            object_type="pack_file",
            object_id=content.pack_file.pk,
            task_id=task_id,
            resource=content.pack_file.path,
        )
        return content

    def _audit(self, action: str, **fields: Any) -> None:
        audit(
            self.request,
            action,
            mode=self.mode,
            pack_id=self.contract_version.pack.pack_id,
            version=self.contract_version.version,
            **fields,
        )


@dataclass(frozen=True)
class EvaluationSealedContent:
    file: EvaluationFile
    data: bytes
    truncated: bool


class EvaluationSealedReader:
    """The same gate for an uploaded evaluation's sealed data (its labels, opponents,
    thresholds): the privilege for a pack it scores (its maintainers, reviewers, admins),
    debug mode, and an ``AuditEvent`` (object type ``evaluation_file``) before the bytes."""

    def __init__(self, request: HttpRequest, definition: EvaluationDefinition) -> None:
        packs = evaluation_access.privileged_packs(request.user, definition)
        if not packs:
            raise Http404("Not found.")
        state = debug_mode(request)
        if state is None:
            raise PermissionDenied("Switch debug mode on (with a reason) to see this.")
        self.request = request
        self.definition = definition
        self.mode = state
        # The audit log files the read under the (first) pack that granted the privilege.
        self.pack_id = packs[0]

    def sealed_file(self, path: str) -> EvaluationSealedContent:
        found = self.definition.files.filter(role=FileRole.SEALED, path=path).first()
        if found is None:
            raise Http404("No such sealed file.")
        self._audit(found)
        data = b""
        for chunk in blob_chunks(found.sha256):
            data += chunk
            if len(data) > sealed.MAX_FILE_DISPLAY_BYTES:
                break
        limit = sealed.MAX_FILE_DISPLAY_BYTES
        return EvaluationSealedContent(found, data[:limit], len(data) > limit)

    def _audit(self, found: EvaluationFile) -> None:
        audit(
            self.request,
            AuditAction.VIEW_FILE,
            mode=self.mode,
            object_type="evaluation_file",
            object_id=found.pk,
            pack_id=self.pack_id,
            resource=f"{self.definition.key} sealed/{found.path}",
        )
