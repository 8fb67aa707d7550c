"""Episode run pages: open a run from a version page (its URL shown once), the live
episodes table of a run page, revoking the URL, and each result's trajectory and transcript.

The run and result pages (runs.views) load these as htmx partials: runs never imports this
app. Every view here asks runs' own access rules first, so a partial is never more visible
than the page it sits in.
"""

from __future__ import annotations

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HTMX_STOP_POLLING, HttpResponseClientRedirect

from episodes import selectors
from episodes.forms import EpisodeRunForm
from episodes.models import EpisodeRun
from episodes.services import (
    OraclePrivilege,
    benchmark_path,
    episode_run_open,
    episode_run_revoke,
)
from packs import access as pack_access
from packs import selectors as pack_selectors
from packs.models import ContractVersion
from runs import access, privileged
from runs import selectors as run_selectors
from runs.evaluators import scoring_problem
from runs.models import AuditAction, Run, RunSource, TaskResult
from runs.services import RunMetadata, draft_refusal
from runs.state import one_moment, run_state

EPISODES_PER_PAGE = 50


# --- opening a run -------------------------------------------------------------------------


@never_cache
@login_required
@permission_required(access.SUBMIT, raise_exception=True)
@require_http_methods(["GET", "POST"])
def episode_run_open_view(request: HttpRequest, pack_id: str, version: int) -> HttpResponse:
    if not access.can_submit(request.user):
        raise PermissionDenied("Opening a run needs the submitter role.")
    contract_version = pack_selectors.visible_version_get(pack_id, version, user=request.user)
    # A draft takes no run but its health checks (runs.services refuses it too); its page
    # says so, so only a hand-made request gets this far.
    refusal = draft_refusal(contract_version)
    if request.method != "POST":
        if refusal is not None:
            messages.error(request, refusal)
            return redirect("packs:version", pack_id=pack_id, version=version)
        return _open_page(request, contract_version, EpisodeRunForm())
    form = EpisodeRunForm(request.POST)
    if not form.is_valid():
        return _open_page(request, contract_version, form, status=400)
    if (problem := refusal or scoring_problem(contract_version.contract)) is not None:
        form.add_error(None, problem)
        return _open_page(request, contract_version, form, status=400)
    oracle = None
    if form.cleaned_data["oracle"]:
        oracle, refusal = _oracle_privilege(request, contract_version)
        if oracle is None:
            form.add_error("oracle", refusal)
            return _open_page(request, contract_version, form, status=403)
    data = form.cleaned_data
    opened = episode_run_open(
        contract_version=contract_version,
        metadata=RunMetadata(
            agent_name=data["agent_name"],
            agent_version=data.get("agent_version", ""),
            model_name=data.get("model_name", ""),
        ),
        source=RunSource.FORM,
        user=request.user,
        oracle=oracle,
        ip_address=privileged.client_ip(request),
    )
    # Rendered, not redirected: the secret exists in this answer only (never_cache keeps it
    # out of the browser's cache; nothing stores it).
    context = {
        "cv": contract_version,
        "pack": contract_version.pack,
        "run": opened.run,
        "episode_run": opened.episode_run,
        "benchmark_url": request.build_absolute_uri(benchmark_path(opened.secret)),
    }
    return render(request, "episodes/opened.html", context, status=201)


def _open_page(
    request: HttpRequest, contract_version: ContractVersion, form: EpisodeRunForm, *, status=200
) -> HttpResponse:
    context = {
        "cv": contract_version,
        "pack": contract_version.pack,
        "form": form,
        "can_reveal": pack_access.can_view_privileged(request.user, contract_version.pack),
    }
    return render(request, "episodes/open.html", context, status=status)


def _oracle_privilege(
    request: HttpRequest, contract_version: ContractVersion
) -> tuple[OraclePrivilege | None, str]:
    """The privilege an oracle run opened now would hold, or why there is none."""
    if not pack_access.can_view_privileged(request.user, contract_version.pack):
        return None, "Oracle runs are for reviewers and maintainers of this pack."
    mode = privileged.debug_mode(request)
    session_key = request.session.session_key or ""
    if mode is None or not session_key:
        return None, (
            "Switch debug mode on (with a reason) first: an oracle run reads the references "
            "only while the debug mode that opened it lasts."
        )
    return OraclePrivilege(until=mode.expires_at, reason=mode.reason, session_key=session_key), ""


# --- the episodes of a run (run page partial) ----------------------------------------------


def episodes_context(request: HttpRequest, run: Run) -> dict:
    """The episodes table of a run, read inside the caller's runs.state.one_moment so that
    its rows and the run's counts are of the same moment."""
    episode_run = selectors.episode_run_for(run)
    page = Paginator(selectors.run_episodes(episode_run), EPISODES_PER_PAGE).get_page(
        request.GET.get("episodes_page", request.GET.get("page"))
    )
    episodes = list(page.object_list)
    result_ids = selectors.result_ids_by_task(run, [e.task_id for e in episodes])
    can_stop = access.can_stop(request.user, run)
    return {
        "run": run,
        "cv": run.contract_version,
        "pack": run.contract_version.pack,
        "episode_run": episode_run,
        "page": page,
        "rows": selectors.episode_rows(episodes, result_ids),
        "counts": selectors.status_counts(episode_run),
        "live": selectors.episodes_live(episode_run),
        "can_write": access.can_write(request.user, run),
        # The URL's state is for who may stop the run; the URL itself is never stored.
        "url_state": selectors.url_state(episode_run) if can_stop else None,
        "is_owner": run.submitted_by_id == request.user.pk,
    }


def run_section(request: HttpRequest, run: Run) -> str:
    """The run page's episodes section (runs.modes): rendered inside the run page's own
    answer, which refreshes it with the rest of the run's state."""
    context = {**episodes_context(request, run), "embedded": True}
    return render_to_string("episodes/run_episodes.html#episodes", context, request=request)


@require_GET
@vary_on_headers("HX-Request")
@pack_access.browse_view
def run_episodes(request: HttpRequest, run_id: int) -> HttpResponse:
    run = run_selectors.run_get(run_id, user=request.user)
    # Writes first (the copy of landed verdicts), then every read of one moment.
    selectors.sync_landed_verdicts(selectors.episode_run_for(run))
    with one_moment():
        run = run_selectors.run_get(run_id, user=request.user)
        context = {**episodes_context(request, run), "state": run_state(run)}
        if not request.htmx:
            return render(request, "episodes/run_episodes.html", context)
        response = render(request, "episodes/run_episodes.html#episodes", context)
    if not context["state"].live and not context["live"]:
        response.status_code = HTMX_STOP_POLLING
    return response


@require_POST
@login_required
def episode_run_revoke_view(request: HttpRequest, run_id: int) -> HttpResponse:
    run = run_selectors.run_get(run_id, user=request.user)
    episode_run = selectors.episode_run_for(run)
    if not access.can_stop(request.user, run):
        raise PermissionDenied("Only the user who created this run, or an admin, may stop it.")
    state = selectors.url_state(episode_run)
    if state.usable:
        episode_run_revoke(episode_run)
        messages.success(
            request,
            f"The URL of run {run.pk} is revoked: it answers nothing any more. Open episodes "
            "are scored as they stand and tasks never attempted count as missing.",
        )
    else:
        messages.info(request, f"The URL of run {run.pk} is already {state.state}.")
    url = reverse("runs:detail", args=[run.pk])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


# --- trajectories (result page partial) and transcripts ------------------------------------


def _trajectory_target(
    request: HttpRequest, run_id: int, result_id: int, what: str
) -> tuple[Run, TaskResult, EpisodeRun]:
    """The run, result and episode run, once the user may read the task's steps.

    The owner of an agent run reads them as they read its candidates (runs.access). Anyone
    else, and everyone for an oracle run (its steps hold references), needs privilege on
    the pack and debug mode: 404 without the privilege, 403 without debug mode, and each
    read is audited."""
    run = run_selectors.run_get(run_id, user=request.user)
    result = run_selectors.result_get(run, result_id)
    episode_run = selectors.episode_run_for(run)
    if not access.can_see_candidates(request.user, run):
        version = run.contract_version
        mode = privileged.require_privileged(request, version.pack)
        privileged.audit(
            request,
            AuditAction.VIEW_CANDIDATE,
            mode=mode,
            object_type="result",
            object_id=result.pk,
            pack_id=version.pack.pack_id,
            version=version.version,
            task_id=result.task.task_id,
            resource=f"run {run.pk} · {what}",
        )
    return run, result, episode_run


@never_cache
@require_GET
@vary_on_headers("HX-Request")
@pack_access.browse_view
def result_trajectory(request: HttpRequest, run_id: int, result_id: int) -> HttpResponse:
    run, result, episode_run = _trajectory_target(request, run_id, result_id, "trajectory")
    attempts = [
        {"episode": episode, "steps": selectors.step_views(list(episode.steps.all()))}
        for episode in selectors.task_attempts(episode_run, result.task)
    ]
    context = {
        "run": run,
        "cv": run.contract_version,
        "pack": run.contract_version.pack,
        "result": result,
        "attempts": attempts,
    }
    template = "episodes/trajectory.html#trajectory" if request.htmx else "episodes/trajectory.html"
    return render(request, template, context)


@never_cache
@require_GET
@pack_access.browse_view
def result_transcript(request: HttpRequest, run_id: int, result_id: int) -> HttpResponse:
    run, result, episode_run = _trajectory_target(request, run_id, result_id, "transcript")
    body = "".join(selectors.transcript_lines(episode_run, result.task))
    response = HttpResponse(body, content_type="application/jsonl; charset=utf-8")
    name = f"run-{run.pk}-{_file_safe(result.task.task_id)}-transcript.jsonl"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def _file_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:80] or "task"
