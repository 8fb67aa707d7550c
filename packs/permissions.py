"""DRF permission classes. Kept apart from the API views: DRF imports the default permission
classes while rest_framework.views is still loading."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions

from packs import access


class CanBrowse(permissions.BasePermission):
    """The site's default API permission (settings): the browse rule of packs.access,
    answered as JSON 401/403 rather than a sign-in redirect."""

    message = "Sign in with an account that may browse this site (packs.browse)."

    def has_permission(self, request: Any, view: Any) -> bool:
        return access.can_browse(request.user)
