"""The operations page (/operations/, admins and reviewers; /health/, its old address,
redirects there), the load balancer's probes (/health/live, /health/ready: no sign-in, no
data) and /metrics (a token or an allowed network)."""

from __future__ import annotations

import hmac
import ipaddress
import logging
from typing import Any

from celery import current_app
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, connection
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponsePermanentRedirect,
    JsonResponse,
)
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from kombu.exceptions import KombuError

from operations import access, canary, images, metrics, selectors

logger = logging.getLogger(__name__)

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@require_GET
@never_cache
@vary_on_headers("HX-Request")
def overview_page(request: HttpRequest) -> HttpResponse:
    if not access.can_view_operations(request.user):
        raise PermissionDenied("The operations page is for reviewers and admins.")
    template = "operations/overview.html#overview" if request.htmx else "operations/overview.html"
    return render(request, template, overview(request.user))


@login_not_required
@require_GET
def health_moved(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """/health/, the operations page's old address: old bookmarks still reach it (the page
    itself asks for a sign-in and the role)."""
    return HttpResponsePermanentRedirect(reverse("operations:overview"))


@require_POST
def pull_image(request: HttpRequest) -> HttpResponse:
    """An admin's "pull now": every worker host pulls an image a published version needs."""
    if not access.can_pull_images(request.user):
        raise PermissionDenied("Only admins can ask the workers to pull images.")
    image = request.POST.get("image", "")
    if image not in images.images_needed():
        return HttpResponseBadRequest("Not an image any published version needs.")
    images.request_pull(image)
    logger.info("%s asked every worker to pull %s", request.user, image)
    messages.success(
        request,
        f"Every Docker worker host is pulling {image}; this page shows it once they have it.",
    )
    return redirect("operations:overview")


def overview(user: Any = None) -> dict[str, Any]:
    now = timezone.now()
    rows = selectors.queues()
    alive, gone = selectors.workers(now)
    reasons = selectors.failure_reasons(now)
    return {
        "canary": canary.canary_status(now),
        "images": images.image_rows(alive),
        "can_pull": user is not None and access.can_pull_images(user),
        "now": now,
        "queues": [(row, row.waited_seconds(now)) for row in rows],
        "stalls": selectors.stalls(rows, now),
        "running": selectors.running_results(),
        "running_count": selectors.running_count(),
        "expired_leases": selectors.expired_leases(now),
        "workers_alive": alive,
        "workers_gone": gone,
        "reasons": reasons,
        "failure_totals": selectors.failure_totals(reasons),
        "longest": selectors.longest_evaluations(),
        "open_reports": selectors.open_health_reports(),
        "alive_seconds": settings.SECUREBENCH_WORKER_ALIVE_SECONDS,
        "stall_seconds": settings.SECUREBENCH_STALL_SECONDS,
        "poll_seconds": POLL_SECONDS,
        "canary_minutes": settings.SECUREBENCH_CANARY_MINUTES,
    }


POLL_SECONDS = 5


@login_not_required
@require_GET
@never_cache
def live(request: HttpRequest) -> JsonResponse:
    """The process answers: nothing else is checked (a load balancer restarts what fails)."""
    return JsonResponse({"status": "ok"})


@login_not_required
@require_GET
@never_cache
def ready(request: HttpRequest) -> JsonResponse:
    """Ready to serve: the database answers and the broker takes a connection. Names only
    what failed; the reasons go to the log, never to an unauthenticated caller."""
    failing = [name for name, check in READINESS_CHECKS if not check()]
    status = 503 if failing else 200
    return JsonResponse({"status": "not ready" if failing else "ready", "failing": failing},
                        status=status)  # fmt: skip


def _database_answers() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except DatabaseError as exc:
        logger.warning("readiness: the database does not answer: %s", exc)
        return False


def _broker_answers() -> bool:
    # The project's Celery app, current once Django is set up (operations sits below it).
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return True
    except (KombuError, OSError, ConnectionError) as exc:
        logger.warning("readiness: the broker does not answer: %s", exc)
        return False


READINESS_CHECKS = (("database", _database_answers), ("broker", _broker_answers))


@login_not_required
@require_GET
@never_cache
def metrics_page(request: HttpRequest) -> HttpResponse:
    """Prometheus text; a 404 to anyone who brings neither the token nor an allowed address
    (nothing tells a stranger that the endpoint exists)."""
    if not metrics_allowed(request):
        raise Http404
    return HttpResponse(metrics.exposition(), content_type=PROMETHEUS_CONTENT_TYPE)


def metrics_allowed(request: HttpRequest) -> bool:
    token = settings.SECUREBENCH_METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if sent and hmac.compare_digest(sent.encode(), token.encode()):
            return True
    return _address_allowed(request.META.get("REMOTE_ADDR", ""))


def _address_allowed(address: str) -> bool:
    try:
        client = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(client in network for network in _networks())


def _networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    networks = []
    for text in settings.SECUREBENCH_METRICS_NETWORKS:
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            logger.error("SECUREBENCH_METRICS_NETWORKS: %r is not a network; ignored", text)
    return networks
