"""Who may see and do what with packs. Every pack view, partial, API view and file download
asks these functions; runs.access builds the run rules on top of them.

- Browsing (packs, versions, task pages, public assets) needs ``packs.browse`` (the viewer
  role and every role above it). With ``SECUREBENCH_PUBLIC_RESULTS`` on, anonymous visitors
  browse too, read-only; they are never privileged.
- Privileged information of a pack (sealed values, hidden files, verifier output, oracle
  candidates) is for superusers, holders of ``packs.view_privileged`` (reviewers) and the
  pack's maintainers, and only in debug mode (runs.privileged checks that part).
- A new version of an existing pack may be added by its maintainers and superusers; the
  first uploader of a pack becomes its maintainer.
- A draft version (not published yet: its health checks are running or failed) exists only
  for the pack's maintainers, privileged users and superusers. To everyone else it is a 404
  like a version never stored: no page, API answer, file, list entry or count gives it away,
  and a pack whose versions are all drafts is hidden likewise. ``version_visibility`` is the
  one rule; every other function here that names versions is built on it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import HttpRequest, HttpResponse

from packs.internal import internal, is_internal
from packs.models import ContractVersion, Pack, VersionState

BROWSE = "packs.browse"
VIEW_PRIVILEGED = "packs.view_privileged"
UPLOAD = "packs.add_contractversion"


def is_member(user: Any) -> bool:
    """Signed in with an active account (anonymous and inactive users are never members)."""
    return bool(user is not None and user.is_authenticated and user.is_active)


def can_browse(user: Any) -> bool:
    if is_member(user):
        return user.has_perm(BROWSE)
    return bool(settings.SECUREBENCH_PUBLIC_RESULTS)


def check_browse(user: Any) -> None:
    """403 for a signed-in user without the browse permission; anonymous visitors never get
    this far without public results (the login middleware sends them to sign in)."""
    if not can_browse(user):
        raise PermissionDenied("Your account may not browse this site; ask an admin for a role.")


def visible_packs(user: Any) -> QuerySet[Pack]:
    """Packs a user may see in lists and by id: those with a version the user may see."""
    if not can_browse(user):
        return Pack.objects.none()
    if sees_every_draft(user):
        return Pack.objects.all()
    visible = ContractVersion.objects.filter(version_visibility(user), pack=OuterRef("pk"))
    return Pack.objects.filter(Exists(visible))


def visible_versions(user: Any) -> QuerySet[ContractVersion]:
    """Contract versions a user may see: published ones, and drafts of the packs they may see
    drafts of. Browsing is needed for any."""
    if not can_browse(user):
        return ContractVersion.objects.none()
    return ContractVersion.objects.filter(version_visibility(user))


def version_visibility(user: Any, prefix: str = "") -> Q:
    """The filter for versions the user may see (browsing checked apart), on a queryset of
    contract versions or, with ``prefix`` (``"contract_version__"``), of rows that name one."""
    if sees_every_draft(user):
        return Q()
    visible = Q(**{f"{prefix}state": VersionState.PUBLISHED})
    if is_member(user):
        # A subquery rather than a join on the maintainers table: a join would repeat a
        # published version once per maintainer of its pack.
        maintained = Pack.objects.filter(maintainers=user).values("pk")
        visible |= Q(**{f"{prefix}pack__in": maintained})
    # The site's own packs (the canary) are for the reviewers and admins of /operations/.
    return visible & ~internal(f"{prefix}pack__")


def can_see_version(user: Any, version: ContractVersion) -> bool:
    """The one-version form of ``version_visibility`` (for a version already loaded)."""
    if not can_browse(user):
        return False
    if is_internal(version.pack.pack_id) and not sees_every_draft(user):
        return False
    return version.state == VersionState.PUBLISHED or sees_drafts(user, version.pack)


def sees_drafts(user: Any, pack: Pack) -> bool:
    """Drafts of a pack are for the people who own or review it: the same people as its
    privileged information (but no debug mode is needed to see that a draft exists)."""
    return can_view_privileged(user, pack)


def sees_every_draft(user: Any) -> bool:
    return is_member(user) and (user.is_superuser or user.has_perm(VIEW_PRIVILEGED))


def maintains(user: Any, pack: Pack) -> bool:
    return is_member(user) and pack.maintainers.filter(pk=user.pk).exists()


def can_manage(user: Any, pack: Pack) -> bool:
    """Settings of a pack (how its versions are published): the people who may add its
    versions (maintainers and superusers), and only signed-in ones."""
    return user is not None and can_add_version(user, pack)


def can_view_privileged(user: Any, pack: Pack) -> bool:
    """May this user see the pack's privileged information (once debug mode is on)?"""
    if not is_member(user):
        return False
    if user.is_superuser or user.has_perm(VIEW_PRIVILEGED):
        return True
    return maintains(user, pack)


def has_any_privilege(user: Any) -> bool:
    """May this user switch debug mode on at all (reviewer, superuser or some maintainer)?"""
    if not is_member(user):
        return False
    if user.is_superuser or user.has_perm(VIEW_PRIVILEGED):
        return True
    return Pack.objects.filter(maintainers=user).exists()


def can_upload(user: Any) -> bool:
    return is_member(user) and user.has_perm(UPLOAD)


def can_add_version(user: Any, pack: Pack) -> bool:
    """A new version of an existing pack: its maintainers and superusers. A trusted import
    from the command line has no user and is always allowed."""
    if user is None:
        return True
    return is_member(user) and (user.is_superuser or maintains(user, pack))


def browse_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """For read-only pages and partials: sign-in required unless results are public, then the
    browse permission (403 without it)."""

    @login_not_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated and not settings.SECUREBENCH_PUBLIC_RESULTS:
            return redirect_to_login(request.get_full_path())
        check_browse(request.user)
        return view(request, *args, **kwargs)

    return wrapped
