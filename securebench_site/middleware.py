"""Site-wide sign-in requirement, URLs that text columns can hold, and caching headers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequired
from django.http import (
    HttpRequest,
    HttpResponseBadRequest,
    HttpResponseBase,
    HttpResponseNotFound,
)
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from rest_framework.views import APIView


class LoginRequiredMiddleware(DjangoLoginRequired):
    """Django's (every view needs a signed-in user unless marked ``login_not_required``),
    except for DRF views: an API client gets a 401/403 JSON answer from DRF's permission
    classes, not a redirect to an HTML sign-in page."""

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponseBase | None:
        view_class = getattr(view_func, "cls", None)
        if isinstance(view_class, type) and issubclass(view_class, APIView):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


class TextQueryMiddleware:
    """A NUL character in the URL is answered before any view filters on it: PostgreSQL's
    text columns cannot hold NUL and refuse the query itself, which would be a server error of
    ours. In the path (``/packs/x%00y/``) it names nothing: 404; in the query string
    (``?pack=%00``) no parameter can hold it: 400. (Form bodies are the forms' to check:
    reading them here would fix their upload handlers too early.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if "\x00" in request.path_info:
            return HttpResponseNotFound(
                "A NUL character in the path: no page, file or API resource is named so.",
                content_type="text/plain; charset=utf-8",
            )
        for key, values in request.GET.lists():
            if "\x00" in key or any("\x00" in value for value in values):
                return HttpResponseBadRequest(
                    "A NUL character in the query string: no parameter can hold one.",
                    content_type="text/plain; charset=utf-8",
                )
        return self.get_response(request)


class CacheHeadersMiddleware:
    """Two caching rules for every page, partial and API answer (static files are
    WhiteNoise's, answered before this runs):

    - ``Vary: HX-Request``: views answer an htmx request with a fragment and any other with
      the whole page, so a cache keyed without the header (the browser's back/forward cache
      included) would show one for the other (UI.md);
    - ``Cache-Control: no-store`` on whatever was answered in an active debug mode: a page
      that may show a sealed value must not outlive the mode in a browser cache, where it could
      be read again without the server, and so without the audit log.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        patch_vary_headers(response, ("HX-Request",))
        # runs.privileged.debug_mode caches the request's mode here once anything asked.
        if getattr(request, "_securebench_debug_mode", None):
            add_never_cache_headers(response)
        return response
