"""The operations page's link in the site's frame, for the people who may open it."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from operations.access import can_view_operations


def operations(request: HttpRequest) -> dict[str, Any]:
    return {"can_view_operations": can_view_operations(getattr(request, "user", None))}
