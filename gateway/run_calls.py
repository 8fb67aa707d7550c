"""A run's model calls on a page of their own: every call the gateway recorded, newest
last, filtered by task and status, fifty a page. Nothing a call recorded is privileged (no
key, prompt or answer is kept), so whoever may see the run may see its calls."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.paginator import Page, Paginator
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from gateway.models import CallStatus, ModelCall
from runs import selectors as run_selectors
from runs.models import Run

CALLS_PER_PAGE = 50


@dataclass(frozen=True)
class CallFilters:
    task: str
    status: str

    @classmethod
    def from_request(cls, request: HttpRequest) -> CallFilters:
        status = request.GET.get("status", "")
        return cls(
            task=request.GET.get("task", "").strip()[:200],
            status=status if status in CallStatus.values else "",
        )


def run_calls(run: Run, filters: CallFilters) -> QuerySet[ModelCall]:
    calls = ModelCall.objects.filter(run=run)
    if filters.task:
        calls = calls.filter(task_id=filters.task)
    if filters.status:
        calls = calls.filter(status=filters.status)
    return calls.order_by("created_at", "id")


def status_counts(run: Run) -> list[tuple[str, str, int]]:
    """(status, its words, calls) for each status the run's calls have, in the model's order."""
    found = dict(
        ModelCall.objects.filter(run=run).values_list("status").annotate(n=Count("id")).order_by()
    )
    return [(value, label, found[value]) for value, label in CallStatus.choices if value in found]


def calls_page(request: HttpRequest, calls: QuerySet[ModelCall]) -> Page:
    return Paginator(calls, CALLS_PER_PAGE).get_page(request.GET.get("page"))


def run_calls_view(request: HttpRequest, run_id: int) -> HttpResponse:
    run = run_selectors.run_get(run_id, user=request.user)
    filters = CallFilters.from_request(request)
    context = {
        "run": run,
        "filters": filters,
        "page": calls_page(request, run_calls(run, filters)),
        "counts": status_counts(run),
        "statuses": CallStatus.choices,
    }
    return render(request, "gateway/run_calls.html", context)
