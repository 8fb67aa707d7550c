"""Who sees the operations page: reviewers and admins (the people who read the audit log)."""

from __future__ import annotations

from typing import Any

from packs.access import is_member
from runs.roles import VIEW_PRIVILEGED


def can_view_operations(user: Any) -> bool:
    return is_member(user) and (user.is_superuser or user.has_perm(VIEW_PRIVILEGED))
