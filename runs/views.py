"""Run, result, leaderboard and comparison pages. Reads live in runs.selectors; writes in
runs.services. Verifier output and detail strings are privileged and never rendered here."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import UploadedFile
from django.core.paginator import Page
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HTMX_STOP_POLLING, HttpResponseClientRedirect

from packs import access as pack_access
from packs import selectors as pack_selectors
from packs.diff import PreviousVersion, versions_comparable
from packs.internal import internal
from packs.models import ContractVersion, VersionState
from packs.pagination import paginate
from packs.services import upload_workspace
from packs.uploads import cap_uploads, upload_declared_too_large, upload_was_too_large
from runs import (
    access,
    comparison,
    modes,
    privileged,
    progress,
    samples,
    selectors,
    timings,
    validity,
)
from runs.bundle import BundleRejected
from runs.evaluators import (
    EVALUATORS,
    EvaluatorNotAllowed,
    allowed_evaluators,
    board_choice,
    scoring_problem,
)
from runs.forms import (
    CompareFilterForm,
    ResultFilterForm,
    RunFilterForm,
    RunSubmitForm,
    bundle_too_large_message,
)
from runs.models import CandidateOrigin, Evaluation, ResultStatus, Run, RunSource
from runs.services import (
    RunMetadata,
    bundle_upload_parse,
    evaluation_create,
    run_submit_bundle,
)
from runs.state import evaluation_states, one_moment, run_state, run_states

RUNS_PER_PAGE = 50
RESULTS_PER_PAGE = 50
TASKS_PER_PAGE = 50
VERDICTS_PER_PAGE = 50
LEADERBOARD_ROWS_PER_PAGE = 100
# The id of the run page's evaluation section: an htmx request aimed at it (HX-Target) gets
# that whole section (score, chart, results), any other htmx request only the results table.
EVALUATION_VIEW = "evaluation-view"


def _cleaned(form, name: str, default=""):
    # A bad value in one filter drops that filter only, not the others.
    form.is_valid()
    value = form.cleaned_data.get(name)
    return default if value in (None, "") else value


# --- runs list -----------------------------------------------------------------------------


@require_GET
@vary_on_headers("HX-Request")
@pack_access.browse_view
def run_list(request: HttpRequest) -> HttpResponse:
    form = RunFilterForm(request.GET)
    filters = {
        "pack": _cleaned(form, "pack"),
        "version": _cleaned(form, "version", None),
        "agent": _cleaned(form, "agent"),
        "status": _cleaned(form, "status"),
    }
    run_ids = form.run_ids()
    with one_moment():
        runs = selectors.run_list(user=request.user, run_ids=run_ids, **filters)
        page = paginate(request, runs, RUNS_PER_PAGE)
        states = run_states(page.object_list)
        context = {
            "page": page,
            "rows": [(run, states[run.pk]) for run in page.object_list],
            # The table refreshes itself while a run it lists can still change.
            "live": any(state.live for state in states.values()),
            "filters": filters,
            "run_ids": run_ids,
            "filtered": bool(run_ids) or any(value not in (None, "") for value in filters.values()),
            "packs": selectors.packs_with_runs(),
            "statuses": ["queued", "running", "done"],
        }
        template = "runs/run_list.html#run-table" if request.htmx else "runs/run_list.html"
        response = render(request, template, context)
    if request.htmx and not context["live"]:
        response.status_code = HTMX_STOP_POLLING
    return response


# --- submit --------------------------------------------------------------------------------


def _submit_page(
    request: HttpRequest,
    form: RunSubmitForm,
    *,
    problems: list | None = None,
    more: int = 0,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    template = "runs/submit.html#submit-form" if request.htmx else "runs/submit.html"
    context = {
        "form": form,
        "problems": problems or [],
        "more_problems": more,
        "error": error,
        "max_bundle": settings.SECUREBENCH_MAX_BUNDLE_BYTES,
    }
    # htmx swaps only 2xx answers by default; the form with its errors is still what to show.
    return render(request, template, context, status=200 if request.htmx else status)


def _submit_initial(request: HttpRequest) -> dict:
    try:
        version = int(request.GET.get("version", ""))
    except ValueError:
        return {}
    contract_version = (
        pack_access.visible_versions(request.user)
        .exclude(internal("pack__"))
        .filter(pack__pack_id=request.GET.get("pack", ""), version=version)
        .first()
    )
    return {"contract_version": contract_version} if contract_version else {}


# Upload handlers can only change before anything reads request.POST, and CsrfViewMiddleware
# reads it; so the CSRF check moves inside, after the size cap is in place (as pack_upload).
@csrf_exempt
@login_required
@permission_required("runs.add_run", raise_exception=True)
@require_http_methods(["GET", "POST"])
def run_submit(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        form = RunSubmitForm(initial=_submit_initial(request), user=request.user)
        return _submit_page(request, form)
    if upload_declared_too_large(request, settings.SECUREBENCH_MAX_BUNDLE_BYTES):
        form = RunSubmitForm(user=request.user)
        return _submit_page(request, form, error=bundle_too_large_message(), status=413)
    cap_uploads(request, settings.SECUREBENCH_MAX_BUNDLE_BYTES)
    return _run_submit_post(request)


@csrf_protect
def _run_submit_post(request: HttpRequest) -> HttpResponse:
    form = RunSubmitForm(request.POST, request.FILES, user=request.user)
    if upload_was_too_large(request):
        return _submit_page(request, form, error=bundle_too_large_message(), status=413)
    if not form.is_valid():
        return _submit_page(request, form, status=400)
    data = form.cleaned_data
    upload: UploadedFile = data["bundle"]
    try:
        with upload_workspace() as work:
            bundle = bundle_upload_parse(upload, work)
            metadata = _metadata(data, bundle.metadata)
            if metadata is None:
                form.add_error(
                    "agent_name", "Give the agent's name, here or as agent_name in the bundle."
                )
                return _submit_page(request, form, status=400)
            run, evaluation = run_submit_bundle(
                contract_version=data["contract_version"],
                bundle=bundle,
                metadata=metadata,
                source=RunSource.FORM,
                user=request.user,
            )
    except BundleRejected as rejected:
        form.add_error(None, str(rejected))
        context_more = getattr(rejected, "more", 0)
        return _submit_page(
            request, form, problems=list(rejected.problems), more=context_more, status=400
        )
    # What was done, not a state: the page below shows the state, live.
    messages.success(
        request,
        f"Run {run.pk} stored with {run.candidate_count} candidates; "
        f"evaluation {evaluation.number} scores them.",
    )
    if run.over_budget:
        notes = "; ".join(run.budget_notes)
        messages.warning(request, f"This run is over the pack version's budgets: {notes}.")
    elif not run.valid:
        reasons = "; ".join(run.invalid_reasons)
        messages.warning(request, f"This run breaks the pack version's contract: {reasons}.")
    url = reverse("runs:detail", args=[run.pk])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _metadata(data: dict, from_bundle: dict) -> RunMetadata | None:
    """The form's fields; empty ones are filled from the bundle's run line by the service.
    None when neither names the agent: a leaderboard row needs a name."""
    if not (data.get("agent_name") or from_bundle.get("agent_name")):
        return None
    return RunMetadata(
        agent_name=data.get("agent_name", ""),
        agent_version=data.get("agent_version", ""),
        model_name=data.get("model_name", ""),
        notes=data.get("notes", ""),
    )


# --- one run -------------------------------------------------------------------------------


def _selected_evaluation(request: HttpRequest, evaluations: list[Evaluation]) -> Evaluation | None:
    number = request.GET.get("evaluation")
    if not number:
        return evaluations[0] if evaluations else None
    for evaluation in evaluations:
        if str(evaluation.number) == number:
            return evaluation
    raise Http404("No such evaluation of this run.")


def _results_context(request: HttpRequest, run: Run, evaluation: Evaluation) -> dict:
    form = ResultFilterForm(request.GET)
    filters = {
        "status": _cleaned(form, "status"),
        "family": _cleaned(form, "family"),
        "reason": _cleaned(form, "reason"),
        "sort": _cleaned(form, "sort", "position"),
    }
    results = selectors.evaluation_results(evaluation, **filters)
    count = selectors.known_result_count(
        evaluation, status=filters["status"], family=filters["family"], reason=filters["reason"]
    )
    return {
        "results": paginate(request, results, RESULTS_PER_PAGE, count=count),
        "result_filters": filters,
        "results_filtered": any(filters[k] for k in ("status", "family", "reason")),
        "result_statuses": ResultStatus.values,
        "result_families": sorted(run.contract_version.family_counts),
        "failure_reasons": selectors.failure_reasons(evaluation),
        # Several candidates per task: the table names each result's sample.
        "samples": samples.has_samples(run),
        # An uploaded evaluation's results carry its metrics (a task's accuracy, say) beside
        # the pass/fail verdict: the table shows them.
        "result_metrics": evaluation.evaluator not in EVALUATORS,
    }


@require_GET
@vary_on_headers("HX-Request", "HX-Target")
@pack_access.browse_view
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    # Every read of one moment (runs.state): header, card, tables and episodes agree.
    with one_moment():
        run = selectors.run_get(run_id, user=request.user)
        evaluations = selectors.run_evaluations(run)
        evaluation = _selected_evaluation(request, evaluations)
        states = evaluation_states(run, evaluations)
        context: dict = {
            "run": run,
            "evaluation": evaluation,
            "evaluations": evaluations,
            "evaluation_rows": [(e, states[e.pk]) for e in evaluations],
            # The run's state is its latest evaluation's; the card shows the selected one.
            "run_state": states[evaluations[0].pk] if evaluations else run_state(run),
        }
        context["state"] = states[evaluation.pk] if evaluation else context["run_state"]
        if evaluation is not None:
            context.update(_results_context(request, run, evaluation))
        whole_section = request.htmx and request.htmx.target == EVALUATION_VIEW
        if request.htmx and evaluation is not None and not whole_section:
            return render(request, "runs/run_detail.html#results", context)
        context.update(
            cv=run.contract_version,
            pack=run.contract_version.pack,
            usage=selectors.usage_totals(run),
            comparable=selectors.comparable_runs(run),
            validity_word=validity.validity_word(run, judged=validity.has_judged_candidate(run)),
            can_reevaluate=access.can_reevaluate(request.user) and run.is_submitted,
            # A run-scope evaluation program's log: offered in debug mode to the privileged.
            can_reveal=access.can_view_privileged(request.user, run),
            debug_on=privileged.debug_mode(request) is not None,
            # The re-evaluate form's choice of scorer, or why this version has none.
            scorers=allowed_evaluators(run.contract_version.contract),
            scoring_problem=scoring_problem(run.contract_version.contract),
            oob=bool(whole_section),
        )
        if (section := modes.run_section(run.mode)) is not None:
            context["run_section"] = section(request, run)
        if evaluation is not None:
            context.update(_evaluation_context(evaluation, evaluations))
            if context["samples"]:
                context["task_passes"] = _task_passes(request, run, evaluation)
        template = (
            "runs/run_detail.html#evaluation-view" if whole_section else "runs/run_detail.html"
        )
        return render(request, template, context)


def _evaluation_context(evaluation: Evaluation, evaluations: list[Evaluation]) -> dict:
    previous = next((e for e in evaluations if e.number == evaluation.number - 1), None)
    context: dict = {
        "progress": progress.evaluation_progress(evaluation),
        "family_rates": selectors.family_rates(evaluation.family_summary),
        "previous": previous,
    }
    if previous is not None and previous.is_done and evaluation.is_done:
        context["changes"], context["change_count"] = selectors.evaluation_changes(
            evaluation, previous
        )
    return context


def _task_passes(request: HttpRequest, run: Run, evaluation: Evaluation) -> Page:
    """Each task's passes out of its samples, a page at a time (?tasks_page=). A submitted
    run's evaluation has at least one result per task, so the count is the version's."""
    rows = samples.task_passes(evaluation)
    count = run.contract_version.task_count
    return paginate(request, rows, TASKS_PER_PAGE, count=count, page_param="tasks_page")


@require_GET
@pack_access.browse_view
def evaluation_progress(request: HttpRequest, run_id: int, number: int) -> HttpResponse:
    with one_moment():
        run = selectors.run_get(run_id, user=request.user)
        evaluation = selectors.evaluation_get(run, number)
        context = {
            "run": run,
            "evaluation": evaluation,
            "progress": progress.evaluation_progress(evaluation),
            "state": run_state(run, evaluation),
        }
        response = render(request, "runs/run_detail.html#progress", context)
    if evaluation.is_done:
        # Stop polling. The final fragment (swapped all the same) loads the evaluation section
        # in place, so the score, chart and results appear without reloading the page.
        response.status_code = HTMX_STOP_POLLING
    return response


@require_POST
def run_reevaluate(request: HttpRequest, run_id: int) -> HttpResponse:
    if not access.can_reevaluate(request.user):
        raise PermissionDenied("Re-evaluating needs the reviewer role.")
    run = selectors.run_get(run_id, user=request.user)
    if not run.is_submitted:
        messages.error(
            request,
            "This run is still open (API batches to submit, or live episodes to close); "
            "it can be re-scored once it is submitted or closed.",
        )
        return redirect("runs:detail", run_id=run.pk)
    try:
        evaluation = evaluation_create(
            run, created_by=request.user, evaluator=request.POST.get("evaluator") or None
        )
    except EvaluatorNotAllowed as refused:
        messages.error(request, f"Not re-evaluated: {refused}")
        url = reverse("runs:detail", args=[run.pk])
        return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    messages.success(
        request,
        f"Evaluation {evaluation.number} of run {run.pk} ({evaluation.evaluator}) created: "
        "it scores the same candidates again.",
    )
    url = f"{reverse('runs:detail', args=[run.pk])}?evaluation={evaluation.number}"
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


# --- one result ----------------------------------------------------------------------------


@require_GET
@pack_access.browse_view
def result_detail(request: HttpRequest, run_id: int, result_id: int) -> HttpResponse:
    run = selectors.run_get(run_id, user=request.user)
    result = selectors.result_get(run, result_id)
    candidate = result.candidate
    # Run details: the candidate is shown to the run's submitter only (runs.access), and an
    # oracle candidate (a reference solution) to nobody outside the audited debug-mode panel.
    shown = candidate is not None and access.can_see_candidates(request.user, run)
    withheld = run.origin == CandidateOrigin.ORACLE
    context = {
        "run": run,
        "cv": run.contract_version,
        "pack": run.contract_version.pack,
        "result": result,
        "evaluation": result.evaluation,
        "details": list(selectors.public_detail_counts(result.details, origin=run.origin).items()),
        "violations": validity.result_violations(result, origin=run.origin),
        "neighbours": selectors.result_neighbours(result),
        "episode_seconds": timings.result_episode_seconds(run, result),
        "candidate": candidate if shown else None,
        "candidate_withheld": withheld and candidate is not None,
        "candidate_private": not withheld and candidate is not None and not shown,
        "workspace": (
            selectors.workspace_files(candidate.files)
            if shown and candidate is not None and candidate.kind in ("workspace", "artifact")
            else []
        ),
        # Privileged panels (verifier output, full details, withheld candidate) are offered in
        # debug mode to users privileged for this pack; the panels check again and audit.
        "can_reveal": access.can_view_privileged(request.user, run),
        "debug_on": privileged.debug_mode(request) is not None,
    }
    return render(request, "runs/result_detail.html", context)


# --- leaderboards --------------------------------------------------------------------------


@require_GET
@pack_access.browse_view
def leaderboard_list(request: HttpRequest) -> HttpResponse:
    return render(
        request, "runs/leaderboard_list.html", {"versions": selectors.leaderboard_versions()}
    )


@require_GET
@pack_access.browse_view
def leaderboard_detail(request: HttpRequest, pack_id: str, version: int) -> HttpResponse:
    contract_version = pack_selectors.visible_version_get(pack_id, version, user=request.user)
    # One board per scorer and metric (?evaluation=name@version&metric=…); by default the
    # version's first allowed scorer and its primary metric.
    choice = board_choice(
        contract_version.contract, request.GET.get("evaluation", ""), request.GET.get("metric", "")
    )
    # Ranks count every run; a page shows a hundred of them, so a thousand runs load and
    # render as fast as a hundred.
    board = (
        selectors.leaderboard(
            contract_version,
            evaluator=choice.evaluator.key,
            metric=choice.metric,
            page=request.GET.get("page"),
            per_page=LEADERBOARD_ROWS_PER_PAGE,
        )
        if choice.evaluator is not None
        else None
    )
    context = {
        "cv": contract_version,
        "pack": contract_version.pack,
        "board": board,
        "choice": choice,
        # The version before, and whether its scores compare with these (packs.diff).
        "previous": _previous_board(request, contract_version),
        "can_score_references": contract_version.state == VersionState.PUBLISHED
        and access.can_score_references(request.user, contract_version.pack),
    }
    return render(request, "runs/leaderboard_detail.html", context)


def _previous_board(request: HttpRequest, cv: ContractVersion) -> PreviousVersion | None:
    # The version below that this user may see: a draft has no board and, for most users,
    # does not exist.
    previous = pack_selectors.previous_visible_version(cv, user=request.user)
    if previous is None:
        return None
    return PreviousVersion(previous, versions_comparable(previous, cv))


# --- compare -------------------------------------------------------------------------------


@require_GET
@vary_on_headers("HX-Request")
@pack_access.browse_view
def run_compare(request: HttpRequest) -> HttpResponse:
    form = CompareFilterForm(request.GET)
    if not form.is_valid() and ("a" in form.errors or "b" in form.errors):
        return _compare_error(request, "Choose two runs to compare: ?a=RUN&b=RUN.")
    a = selectors.run_get(form.cleaned_data["a"], user=request.user)
    b = selectors.run_get(form.cleaned_data["b"], user=request.user)
    try:
        compared = comparison.comparison(a, b)
    except comparison.CompareError as exc:
        return _compare_error(request, str(exc), a=a, b=b)
    category = form.cleaned_data.get("category") or ""
    pairs = comparison.verdict_pairs(compared.evaluation_a, compared.evaluation_b)
    if category:
        pairs = pairs.filter(verdict=category)
    context = {
        "comparison": compared,
        "cv": a.contract_version,
        "category": category,
        "categories": comparison.VERDICT_CATEGORIES,
        "page": paginate(request, pairs, VERDICTS_PER_PAGE),
    }
    template = "runs/compare.html#verdicts" if request.htmx else "runs/compare.html"
    return render(request, template, context)


def _compare_error(
    request: HttpRequest, message: str, *, a: Run | None = None, b: Run | None = None
) -> HttpResponse:
    context = {"error": message, "a": a, "b": b}
    return render(request, "runs/compare.html", context, status=400)
