"""The site's roles as Django groups. Admins are superusers (every permission); the admin
group gives a non-superuser the same site permissions.

Groups are created by migration runs.0003 and topped up after every migrate (add-only, so
an admin's additions stay), which also restores them after a test database flush.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, Permission

BROWSE = "packs.browse"
VIEW_PRIVILEGED = "packs.view_privileged"
UPLOAD = "packs.add_contractversion"
SUBMIT = "runs.add_run"
REEVALUATE = "runs.add_evaluation"
VIEW_AUDIT = "runs.view_auditevent"

VIEWER = "viewer"
SUBMITTER = "submitter"
MAINTAINER = "pack maintainer"
REVIEWER = "reviewer"
ADMIN = "admin"

ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    VIEWER: (BROWSE,),
    SUBMITTER: (BROWSE, SUBMIT),
    MAINTAINER: (BROWSE, UPLOAD),
    REVIEWER: (BROWSE, VIEW_PRIVILEGED, REEVALUATE, VIEW_AUDIT),
    ADMIN: (BROWSE, SUBMIT, UPLOAD, VIEW_PRIVILEGED, REEVALUATE, VIEW_AUDIT),
}


def ensure_role_groups(**kwargs: Any) -> None:
    """post_migrate receiver: every role group exists with at least its permissions."""
    for name, codes in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=name)
        wanted = [code.split(".") for code in codes]
        permissions = [
            Permission.objects.filter(content_type__app_label=app, codename=codename).first()
            for app, codename in wanted
        ]
        group.permissions.add(*[p for p in permissions if p is not None])
