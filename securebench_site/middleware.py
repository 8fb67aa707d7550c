"""Site-wide sign-in requirement."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequired
from django.http import HttpRequest, HttpResponseBase
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
