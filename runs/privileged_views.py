"""Debug mode switch, the privileged panels and the audit log.

Every panel answers one resource per request, asks ``privileged.require_privileged`` first
(404 without the privilege for the pack, 403 with it while debug mode is off) and writes an
``AuditEvent``; sealed values and files come only through ``privileged.SealedReader``.
An htmx request gets the panel alone; a plain request (no JavaScript) gets it inside the
site's frame.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from evaluations import selectors as evaluation_selectors
from packs import access as pack_access
from packs import selectors as pack_selectors
from packs.models import ContractVersion, Pack
from packs.pagination import paginate
from runs import access, privileged, rendering, selectors
from runs.forms import AuditFilterForm
from runs.models import AuditAction, AuditEvent, CandidateOrigin, Evaluation, TaskResult

AUDIT_EVENTS_PER_PAGE = 50
RESULT_PARTS = ("logs", "details", "candidate")


def next_url(request: HttpRequest, fallback: str = "home") -> str:
    """The form's or link's ``next`` when it stays on this site, else ``fallback``."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


def _panel(request: HttpRequest, template: str, context: dict) -> HttpResponse:
    if request.htmx:
        return render(request, template, context)
    return render(request, "runs/privileged/page.html", {**context, "panel": template})


# --- debug mode ------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def debug_mode_on(request: HttpRequest) -> HttpResponse:
    if not pack_access.has_any_privilege(request.user):
        raise PermissionDenied("Debug mode is for reviewers, admins and pack maintainers.")
    error = ""
    if request.method == "POST":
        try:
            state = privileged.debug_mode_start(request, reason=request.POST.get("reason", ""))
        except privileged.DebugModeRefused as refused:
            error = str(refused)
        else:
            messages.warning(
                request,
                f"Debug mode is on until {state.expires_at:%H:%M} UTC; every privileged view "
                "is recorded with your reason.",
            )
            return redirect(next_url(request))
    context = {
        "next": next_url(request, fallback=""),
        "error": error,
        "reason": request.POST.get("reason", ""),
        "minutes": settings.SECUREBENCH_DEBUG_MODE_MINUTES,
    }
    return render(request, "runs/debug_mode.html", context, status=400 if error else 200)


@require_POST
def debug_mode_off(request: HttpRequest) -> HttpResponse:
    privileged.debug_mode_stop(request)
    messages.info(request, "Debug mode is off.")
    return redirect(next_url(request))


# --- task resources and sealed files (packs' task and version pages) -------------------------


def _version(pack_id: str, version: int) -> tuple[Pack, ContractVersion]:
    contract_version = pack_selectors.version_get(pack_id, version)
    return contract_version.pack, contract_version


@require_GET
def reveal_resource(request: HttpRequest, pack_id: str, version: int) -> HttpResponse:
    pack, contract_version = _version(pack_id, version)
    reader = privileged.SealedReader(request, contract_version)
    task = pack_selectors.task_get(contract_version, request.GET.get("task", ""))
    resource = reader.resource(task, request.GET.get("name", ""))
    context = {
        "pack": pack,
        "cv": contract_version,
        "task": task,
        "resource": resource,
        "blocks": rendering.value_blocks(resource.name, resource.value),
    }
    return _panel(request, "runs/privileged/_resource.html", context)


@require_GET
def sealed_file_list(request: HttpRequest, pack_id: str, version: int) -> HttpResponse:
    pack, contract_version = _version(pack_id, version)
    reader = privileged.SealedReader(request, contract_version)
    context = {"pack": pack, "cv": contract_version, "files": reader.file_list()}
    return _panel(request, "runs/privileged/_file_list.html", context)


@require_GET
def reveal_file(request: HttpRequest, pack_id: str, version: int) -> HttpResponse:
    pack, contract_version = _version(pack_id, version)
    reader = privileged.SealedReader(request, contract_version)
    content = reader.file(request.GET.get("path", ""), task_id=request.GET.get("task", ""))
    context = {
        "pack": pack,
        "cv": contract_version,
        "file": content.pack_file,
        "truncated": content.truncated,
        "html": rendering.file_html(content.pack_file.path, content.data),
    }
    return _panel(request, "runs/privileged/_file.html", context)


@require_GET
def reveal_evaluation_file(request: HttpRequest, name: str, version: int) -> HttpResponse:
    """One sealed file of an uploaded evaluation (its page links here in debug mode)."""
    try:
        definition = evaluation_selectors.definition_get(name, version, user=request.user)
    except Http404:
        raise Http404("Not found.") from None
    reader = privileged.EvaluationSealedReader(request, definition)
    content = reader.sealed_file(request.GET.get("path", ""))
    context = {
        "definition": definition,
        "file": content.file,
        "truncated": content.truncated,
        "html": rendering.file_html(content.file.path, content.data),
    }
    return _panel(request, "runs/privileged/_evaluation_file.html", context)


@require_GET
def evaluation_program_log(request: HttpRequest, run_id: int, number: int) -> HttpResponse:
    """A run-scope evaluation's one program call: what went wrong and the program's log
    (the evaluation's authors read it in debug mode; it may quote their sealed data)."""
    run = selectors.run_get(run_id, user=request.user)
    mode = privileged.require_privileged(request, run.contract_version.pack)
    evaluation = get_object_or_404(Evaluation, run=run, number=number)
    privileged.audit(
        request,
        AuditAction.VIEW_LOGS,
        mode=mode,
        object_type="evaluation",
        object_id=evaluation.pk,
        pack_id=run.contract_version.pack.pack_id,
        version=run.contract_version.version,
        resource=f"run {run.pk} · evaluation {number} · program log",
    )
    outcome = evaluation.program_outcome or {}
    context = {
        "run": run,
        "evaluation": evaluation,
        "problem": outcome.get("problem", ""),
        "log": rendering.log_html(evaluation.program_log) if evaluation.program_log else None,
    }
    return _panel(request, "runs/privileged/_program_log.html", context)


# --- result panels -----------------------------------------------------------------------------


@require_GET
def result_privileged(request: HttpRequest, run_id: int, result_id: int, part: str) -> HttpResponse:
    if part not in RESULT_PARTS:
        raise Http404("No such panel.")
    run = selectors.run_get(run_id, user=request.user)
    mode = privileged.require_privileged(request, run.contract_version.pack)
    result = get_object_or_404(
        TaskResult.objects.select_related("evaluation", "task", "candidate"),
        evaluation__run=run,
        pk=result_id,
    )
    action = {
        "logs": AuditAction.VIEW_LOGS,
        "details": AuditAction.VIEW_DETAILS,
        "candidate": AuditAction.VIEW_CANDIDATE,
    }[part]
    privileged.audit(
        request,
        action,
        mode=mode,
        object_type="task_result",
        object_id=result.pk,
        pack_id=run.contract_version.pack.pack_id,
        version=run.contract_version.version,
        task_id=result.task.task_id,
        resource=f"run {run.pk} · {part}",
    )
    context = {"run": run, "result": result, "part": part}
    if part == "logs":
        context["stdout"] = rendering.log_html(result.stdout) if result.stdout else None
        context["stderr"] = rendering.log_html(result.stderr) if result.stderr else None
    elif part == "details":
        context["blocks"] = rendering.value_blocks("details", result.details)
    else:
        candidate = result.candidate
        context["candidate"] = candidate
        context["oracle"] = run.origin == CandidateOrigin.ORACLE
        context["workspace"] = (
            selectors.workspace_files(candidate.files)
            if candidate is not None and candidate.kind in ("workspace", "artifact")
            else []
        )
    return _panel(request, "runs/privileged/_result.html", context)


# --- audit log ---------------------------------------------------------------------------------


@require_GET
@vary_on_headers("HX-Request")
def audit_log(request: HttpRequest) -> HttpResponse:
    if not access.can_view_audit_log(request.user):
        raise PermissionDenied("The audit log is for reviewers and admins.")
    form = AuditFilterForm(request.GET)
    events = AuditEvent.objects.order_by("-created_at", "-id")
    filters: dict = {}
    if form.is_valid():
        filters = {key: value for key, value in form.cleaned_data.items() if value}
    if "user" in filters:
        events = events.filter(username__iexact=filters["user"])
    if "action" in filters:
        events = events.filter(action=filters["action"])
    if "pack" in filters:
        events = events.filter(pack_id=filters["pack"])
    if "since" in filters:
        events = events.filter(created_at__date__gte=filters["since"])
    if "until" in filters:
        events = events.filter(created_at__date__lte=filters["until"])
    page = paginate(request, events, AUDIT_EVENTS_PER_PAGE)
    context = {
        "form": form,
        "page": page,
        "filtered": bool(filters),
        "actions": AuditAction.choices,
    }
    template = "runs/audit_log.html#audit-table" if request.htmx else "runs/audit_log.html"
    return render(request, template, context)
