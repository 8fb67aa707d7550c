"""The site's own packs (the canary, operations/canary.py): stored and scored like any pack,
but not the users' to browse. They are listed nowhere but /operations/ (no pack list, home
page, submit page, leaderboard, run list or API listing), and their pages answer only the
reviewers and admins who reach them from there."""

from __future__ import annotations

from django.db.models import Q

CANARY_PACK_ID = "securebench-canary"
INTERNAL_PACK_IDS = (CANARY_PACK_ID,)


def internal(prefix: str = "") -> Q:
    """Rows of an internal pack: on packs, or with ``prefix`` on rows that name one
    (``"pack__"`` for versions, ``"contract_version__pack__"`` for runs, …)."""
    return Q(**{f"{prefix}pack_id__in": INTERNAL_PACK_IDS})


def is_internal(pack_id: str) -> bool:
    return pack_id in INTERNAL_PACK_IDS
