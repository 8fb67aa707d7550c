"""What the site's frame needs on every page: the user's role links and debug mode."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from packs import access as pack_access
from runs import access, privileged


def roles(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"can_browse": pack_access.can_browse(user), "debug_mode": None}
    return {
        "can_browse": pack_access.can_browse(user),
        "can_upload": pack_access.can_upload(user),
        "can_submit": access.can_submit(user),
        "can_audit": access.can_view_audit_log(user),
        "can_debug": pack_access.has_any_privilege(user),
        "debug_mode": privileged.debug_mode(request),
    }
