"""Pack pages. Templates receive public values and redacted summaries only."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from packs import access, hooks, selectors
from packs.compiler import Problem, agent_task_json
from packs.diff import previous_version
from packs.files import public_file_response
from packs.forms import PackFilterForm, PackUploadForm, too_large_message
from packs.models import ContractVersion, PublishPolicy, Task, VersionState
from packs.pagination import paginate
from packs.publishing import PolicyRefused, pack_set_publish_policy, policy_text
from packs.readable import readable_fields
from packs.services import UploadRejected, pack_import_upload
from packs.uploads import (
    cap_uploads,
    problems_context,
    upload_declared_too_large,
    upload_was_too_large,
)
from verifiers.families import get_family
from verifiers.lanes import LANES

PACKS_PER_PAGE = 25
VERSIONS_PER_PAGE = 50
MATRIX_TASKS_PER_PAGE = 50


@require_GET
@access.browse_view
def pack_list(request: HttpRequest) -> HttpResponse:
    form = PackFilterForm(request.GET)
    query = family = ""
    if form.is_valid():
        query, family = form.cleaned_data["q"], form.cleaned_data["family"]
    page = paginate(
        request, selectors.pack_list(user=request.user, query=query, family=family), PACKS_PER_PAGE
    )
    context = {
        "form": form,
        "page": page,
        "query": query,
        "family": family,
        "families": selectors.known_families(user=request.user),
    }
    template = "packs/pack_list.html#pack-table" if request.htmx else "packs/pack_list.html"
    return render(request, template, context)


@require_GET
@access.browse_view
def pack_detail(request: HttpRequest, pack_id: str) -> HttpResponse:
    pack = selectors.pack_get(pack_id, user=request.user)
    versions = selectors.pack_versions(pack, user=request.user).select_related("uploaded_by")
    page = paginate(request, versions, VERSIONS_PER_PAGE)
    context = {
        "pack": pack,
        "page": page,
        "can_manage": access.can_manage(request.user, pack),
        "policies": PublishPolicy.choices,
        # Sections registered by apps above packs (the evaluations that score it).
        "panels": hooks.pack_panels(request, pack),
    }
    return render(request, "packs/pack_detail.html", context)


@require_POST
@login_required
def pack_publish_policy(request: HttpRequest, pack_id: str) -> HttpResponse:
    """A maintainer chooses how the pack's new versions are published (auto or manual)."""
    pack = selectors.pack_get(pack_id, user=request.user)
    try:
        pack_set_publish_policy(pack, request.POST.get("publish_policy", ""), user=request.user)
    except PolicyRefused as refused:
        raise PermissionDenied(str(refused)) from refused
    except ValueError as bad:
        messages.error(request, str(bad))
    else:
        text = f"New versions of {pack.pack_id} are published {policy_text(pack)}."
        messages.success(request, text)
    return redirect("packs:detail", pack_id=pack.pack_id)


@require_GET
@access.browse_view
def version_detail(request: HttpRequest, pack_id: str, version: int) -> HttpResponse:
    contract_version = selectors.visible_version_get(pack_id, version, user=request.user)
    family = request.GET.get("family", "")
    tasks = selectors.tasks_with_resource_summaries(
        selectors.version_tasks(contract_version, family=family)
    )
    page = paginate(request, tasks, MATRIX_TASKS_PER_PAGE)
    columns = selectors.visibility_columns(contract_version)
    rows = [_matrix_row(task, columns) for task in page.object_list]
    context = {
        "cv": contract_version,
        "pack": contract_version.pack,
        "columns": columns,
        "rows": rows,
        "page": page,
        "family": family,
        "lanes": LANES,
        "families": sorted(contract_version.family_counts.items()),
        "can_reveal": access.can_view_privileged(request.user, contract_version.pack),
    }
    if not request.htmx:
        context |= _version_frame(request, contract_version)
    template = "packs/version_detail.html#matrix" if request.htmx else "packs/version_detail.html"
    return render(request, template, context)


def _version_frame(request: HttpRequest, cv: ContractVersion) -> dict:
    """The version page around its matrix: state, neighbours, and other apps' panels."""
    latest = selectors.pack_versions(cv.pack, user=request.user).first()
    return {
        "is_draft": cv.state == VersionState.DRAFT,
        "previous": selectors.previous_visible_version(cv, user=request.user),
        "latest": latest if latest is not None and latest.version > cv.version else None,
        # Fragments registered by apps above packs (the health report); each checks what
        # this user may see of it.
        "panels": hooks.version_panels(request, cv),
    }


def _matrix_row(task: Task, columns: list[selectors.VisibilityColumn]) -> dict:
    by_name = {resource.name: resource for resource in task.resources.all()}
    return {"task": task, "cells": [by_name.get(column.name) for column in columns]}


@require_GET
@access.browse_view
def task_detail(request: HttpRequest, pack_id: str, version: int, task_id: str) -> HttpResponse:
    contract_version = selectors.visible_version_get(pack_id, version, user=request.user)
    task = selectors.task_get(contract_version, task_id)
    context = {
        "cv": contract_version,
        "pack": contract_version.pack,
        "task": task,
        "family": get_family(task.family),
        "agent_json": agent_task_json(task.agent_payload),
        "agent_fields": readable_fields(task.agent_payload),
        "environment_json": agent_task_json(task.environment),
        "metadata_json": agent_task_json(task.metadata),
        "assets": selectors.public_asset_files(task),
        "sealed": selectors.sealed_resource_cards(task),
        "neighbours": selectors.task_neighbours(task),
        # Whether this user may reveal sealed values once debug mode is on; the values are
        # served by runs' audited privileged views, never by this page.
        "can_reveal": access.can_view_privileged(request.user, contract_version.pack),
    }
    return render(request, "packs/task_detail.html", context)


@require_GET
@access.browse_view
def public_file(request: HttpRequest, pack_id: str, version: int, path: str) -> FileResponse:
    cv = selectors.visible_version_get(pack_id, version, user=request.user)
    return public_file_response(cv, path)


def _upload_page(
    request: HttpRequest,
    form: PackUploadForm,
    *,
    problems: list[Problem] | None = None,
    unlisted: int = 0,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    template = "packs/upload.html#upload-form" if request.htmx else "packs/upload.html"
    context = {"form": form, **problems_context(problems, unlisted, error)}
    # htmx swaps only 2xx responses by default; the error form is still the answer to show.
    return render(request, template, context, status=200 if request.htmx else status)


def _too_large(request: HttpRequest) -> HttpResponse:
    return _upload_page(request, PackUploadForm(), error=too_large_message(), status=413)


# Upload handlers can only change before anything reads request.POST, and CsrfViewMiddleware
# reads it; so the CSRF check moves inside, after the size cap is in place (Django's documented
# pattern for custom upload handlers).
@csrf_exempt
@login_required
@permission_required("packs.add_contractversion", raise_exception=True)
@require_http_methods(["GET", "POST"])
def pack_upload(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _upload_page(request, PackUploadForm())
    if upload_declared_too_large(request):
        return _too_large(request)
    cap_uploads(request)
    return _pack_upload_post(request)


@csrf_protect
def _pack_upload_post(request: HttpRequest) -> HttpResponse:
    form = PackUploadForm(request.POST, request.FILES)
    if upload_was_too_large(request):
        return _too_large(request)
    if not form.is_valid():
        return _upload_page(request, form, status=400)
    try:
        outcome = pack_import_upload(uploaded_by=request.user, **form.cleaned_data)
    except UploadRejected as rejected:
        form.add_error(None, rejected.summary)
        status = 409 if rejected.conflict else 400
        return _upload_page(
            request, form, problems=rejected.problems, unlisted=rejected.unlisted, status=status
        )
    cv = outcome.contract_version
    messages.success(request, outcome.message)
    url = reverse("packs:version", kwargs={"pack_id": cv.pack.pack_id, "version": cv.version})
    # A new version of an existing pack lands on what changed since the version before it.
    previous = previous_version(cv) if outcome.created else None
    if previous is not None:
        url = reverse("packs:compare", kwargs={"pack_id": cv.pack.pack_id})
        url += f"?from={previous.version}&to={cv.version}"
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
