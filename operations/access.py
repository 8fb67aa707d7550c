"""Who sees the operations page: reviewers and admins (the people who read the audit log)."""

from __future__ import annotations

from typing import Any

from packs.access import is_member
from runs.roles import ADMIN, VIEW_PRIVILEGED


def can_view_operations(user: Any) -> bool:
    return is_member(user) and (user.is_superuser or user.has_perm(VIEW_PRIVILEGED))


def can_pull_images(user: Any) -> bool:
    """Admins only: a pull costs every worker host bandwidth and disk."""
    return is_member(user) and (user.is_superuser or user.groups.filter(name=ADMIN).exists())
