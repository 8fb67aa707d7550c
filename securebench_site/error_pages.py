"""The site's own error pages — 400, 404 and 500 in the site's frame, JSON under /api/ — with
DEBUG off and on.

With DEBUG off Django calls the handlers below (handler400, handler404 and handler500 in
securebench_site.urls). With DEBUG on, which `make run` sets (for a generated secret key,
static files served as they are edited, plain-HTTP cookies), Django answers instead with its
technical pages: a 404 listing every URL pattern of the site, a 500 with the traceback, local
variables, settings and the request (capability URLs included). ``ErrorPagesMiddleware`` gives
the same pages as with DEBUG off there: a newcomer never sees the technical ones, and a
developer reads the traceback where it always goes, the log (the terminal of `make run`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import BadRequest, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import render
from django.template import loader

logger = logging.getLogger(__name__)

# Every API route lives under /api/ (securebench_site.urls); its clients read JSON, as DRF
# answers them for the errors its views catch ({"detail": "Not found."}).
API_PREFIX = "/api/"
# Where ErrorPagesMiddleware keeps the exception a view raised, for the response Django makes
# of it.
RAISED = "securebench_raised"
BAD_REQUESTS = (BadRequest, SuspiciousOperation, MultiPartParserError)


def page_not_found(request: HttpRequest, exception: Exception | None) -> HttpResponse:
    # The exception's message is not shown: "No such run." also answers a run the user may
    # not see, and get_object_or_404's names a model.
    if request.path_info.startswith(API_PREFIX):
        return JsonResponse({"detail": "Not found."}, status=404)
    return error_page(request, "404.html", 404, {"path": request.path})


def bad_request(request: HttpRequest, exception: Exception | None) -> HttpResponse:
    if request.path_info.startswith(API_PREFIX):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return error_page(request, "400.html", 400)


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path_info.startswith(API_PREFIX):
        return JsonResponse({"detail": "A server error occurred."}, status=500)
    # Where a developer finds the traceback; on a production site nobody reading the page can.
    return error_page(request, "500.html", 500, {"in_development": settings.DEBUG})


def error_page(
    request: HttpRequest, template: str, status: int, context: dict[str, Any] | None = None
) -> HttpResponse:
    """The page in the site's frame (the user's menu); should the frame itself fail — its
    role links ask the database, which may be what just failed — the same page without the
    request's context (no menu), rather than a second error."""
    try:
        return render(request, template, context, status=status)
    except Exception:  # a page about an error must not raise one
        logger.exception("The %s page failed in the site's frame; shown without it", status)
        return HttpResponse(loader.render_to_string(template, context), status=status)


class ErrorPagesMiddleware:
    """With DEBUG on, the pages above where Django would show a technical one: a URL no pattern
    matches (404), and what a view or its template raised — Http404 (404), a bad request (400)
    or any other exception (500).

    It answers nothing itself: Django goes on as with DEBUG off — logs the exception with its
    traceback (django.request), tells got_request_exception's receivers — and builds its
    technical page, which this then replaces. Innermost in MIDDLEWARE (but for AxesMiddleware,
    which only answers lockouts), so that the page goes out through every other middleware
    (CSP nonce, security headers, APPEND_SLASH's redirect of a 404). With DEBUG off it does
    nothing: Django calls the handlers itself."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if not settings.DEBUG:
            return response
        raised = getattr(request, RAISED, None)
        status = response.status_code
        # Nothing between this middleware and the URL resolver answers a 404 of its own: a
        # request that matched no pattern got its 404 from the resolver.
        if status == 404 and (request.resolver_match is None or isinstance(raised, Http404)):
            return page_not_found(request, raised)
        if status == 400 and isinstance(raised, BAD_REQUESTS):
            return bad_request(request, raised)
        if status == 500 and raised is not None:
            return server_error(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> None:
        if settings.DEBUG:
            setattr(request, RAISED, exception)
