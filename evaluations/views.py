"""Evaluation pages: upload, one version, its versions, two versions compared.

Templates receive the declaration, file names, sizes and digests; the program's contents only
through ``selectors.program_files`` (its reviewers); sealed contents never (the reveal panel
is runs' audited privileged view, linked in debug mode).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from evaluations import access, selectors
from evaluations.forms import CompareForm, EvaluationUploadForm
from evaluations.models import FileRole
from evaluations.services import evaluation_import_upload
from packs.access import browse_view
from packs.compiler import Problem
from packs.forms import too_large_message
from packs.pagination import paginate
from packs.services import UploadRejected
from packs.uploads import (
    cap_uploads,
    problems_context,
    upload_declared_too_large,
    upload_was_too_large,
)

VERSIONS_PER_PAGE = 50


def evaluation_url(name: str, version: int) -> str:
    return reverse("evaluations:detail", kwargs={"name": name, "version": version})


# --- upload ---------------------------------------------------------------------------------


def _upload_page(
    request: HttpRequest,
    form: EvaluationUploadForm,
    *,
    problems: list[Problem] | None = None,
    unlisted: int = 0,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    template = "evaluations/upload.html#upload-form" if request.htmx else "evaluations/upload.html"
    context = {
        "form": form,
        **problems_context(problems, unlisted, error),
        "pack": request.GET.get("pack", "")[:100],
    }
    return render(request, template, context, status=200 if request.htmx else status)


# The size cap goes in before anything reads the body; CSRF is checked inside (as pack_upload).
@csrf_exempt
@login_required
@require_http_methods(["GET", "POST"])
def evaluation_upload(request: HttpRequest) -> HttpResponse:
    if not access.can_upload_evaluation(request.user):
        raise PermissionDenied(
            "Evaluations are added by the maintainers of the packs they score, reviewers and "
            "admins."
        )
    if request.method != "POST":
        return _upload_page(request, EvaluationUploadForm())
    if upload_declared_too_large(request):
        return _upload_page(request, EvaluationUploadForm(), error=too_large_message(), status=413)
    cap_uploads(request)
    return _upload_post(request)


@csrf_protect
def _upload_post(request: HttpRequest) -> HttpResponse:
    form = EvaluationUploadForm(request.POST, request.FILES)
    if upload_was_too_large(request):
        return _upload_page(request, EvaluationUploadForm(), error=too_large_message(), status=413)
    if not form.is_valid():
        return _upload_page(request, form, status=400)
    try:
        outcome = evaluation_import_upload(
            archive=form.cleaned_data["archive"], uploaded_by=request.user
        )
    except UploadRejected as rejected:
        form.add_error(None, rejected.summary)
        return _upload_page(
            request,
            form,
            problems=rejected.problems,
            unlisted=rejected.unlisted,
            status=409 if rejected.conflict else 400,
        )
    messages.success(request, outcome.message)
    url = evaluation_url(outcome.definition.name, outcome.definition.version)
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


# --- pages ------------------------------------------------------------------------------------


@require_GET
@browse_view
def evaluation_detail(request: HttpRequest, name: str, version: int) -> HttpResponse:
    definition = selectors.definition_get(name, version, user=request.user)
    files = selectors.files_by_role(definition)
    privileged = access.privileged_packs(request.user, definition)
    versions = list(
        selectors.definition_versions(name, user=request.user).values_list("version", flat=True)
    )
    older = [v for v in versions if v < version]
    context = {
        "definition": definition,
        "manifest": selectors.manifest(definition),
        "targets": selectors.targets(definition, user=request.user),
        "program": files[FileRole.PROGRAM],
        "sealed": files[FileRole.SEALED],
        "program_files": selectors.program_files(definition, user=request.user),
        "can_read_program": bool(privileged),
        # Sealed contents: these users, once debug mode is on (runs' audited panel).
        "can_reveal": bool(privileged),
        "version_count": len(versions),
        "previous": older[0] if older else None,
    }
    return render(request, "evaluations/detail.html", context)


@require_GET
@browse_view
def evaluation_versions(request: HttpRequest, name: str) -> HttpResponse:
    versions = selectors.definition_versions(name, user=request.user)
    page = paginate(request, versions, VERSIONS_PER_PAGE)
    context = {"name": name, "page": page, "latest": versions.first()}
    return render(request, "evaluations/versions.html", context)


@require_GET
@browse_view
def evaluation_compare(request: HttpRequest, name: str) -> HttpResponse:
    versions = list(selectors.definition_versions(name, user=request.user))
    numbers = [item.version for item in versions]
    form = CompareForm(request.GET)
    a = b = None
    if form.is_valid():
        a, b = form.cleaned_data["a"], form.cleaned_data["b"]
    by_number = {item.version: item for item in versions}
    if b not in by_number:
        b = numbers[0]
    if a not in by_number:
        older = [number for number in numbers if number < b]
        a = older[0] if older else b
    comparison = selectors.compare(by_number[a], by_number[b])
    context = {
        "name": name,
        "numbers": numbers,
        "a": a,
        "b": b,
        "comparison": comparison,
        "counts": comparison.counts,
        "asked_missing": form.is_valid()
        and any(
            value is not None and value not in by_number
            for value in (form.cleaned_data["a"], form.cleaned_data["b"])
        ),
    }
    return render(request, "evaluations/compare.html", context)
