"""Who may see and do what with uploaded evaluations (built on packs.access).

- The declaration (what it scores, its metrics, its command) and every file's name, size
  and sha256 are for whoever may browse a pack it scores: an evaluation of packs the user
  cannot see (drafts, the site's own packs) is a 404 like one never stored.
- The program's files: the maintainers of a pack it scores, reviewers and admins (no debug
  mode: authors review one another's scorers). Never agents, never viewers.
- The sealed data: the same people, in debug mode only, each read audited
  (runs.privileged.EvaluationSealedReader; this layer cannot reach debug mode).
- Adding one: a signed-in maintainer of some pack, a reviewer or an admin; the service
  checks every pack it names (evaluations.services._check_targets).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from evaluations.models import EvaluationDefinition
from packs.access import VIEW_PRIVILEGED, is_member, visible_packs
from packs.models import Pack


def visible_definitions(user: Any) -> QuerySet[EvaluationDefinition]:
    packs = visible_packs(user).values("pack_id")
    return EvaluationDefinition.objects.filter(targets__pack_id__in=packs).distinct()


def is_reviewer(user: Any) -> bool:
    return is_member(user) and (user.is_superuser or user.has_perm(VIEW_PRIVILEGED))


def can_upload_evaluation(user: Any) -> bool:
    if not is_member(user):
        return False
    return is_reviewer(user) or Pack.objects.filter(maintainers=user).exists()


def privileged_packs(user: Any, definition: EvaluationDefinition) -> list[str]:
    """The packs it scores whose privileged information this user may see, in order."""
    if not is_member(user):
        return []
    pack_ids = sorted(definition.targets.values_list("pack_id", flat=True))
    if is_reviewer(user):
        return pack_ids
    maintained = set(
        Pack.objects.filter(maintainers=user, pack_id__in=pack_ids).values_list(
            "pack_id", flat=True
        )
    )
    return [pack_id for pack_id in pack_ids if pack_id in maintained]


def can_read_program(user: Any, definition: EvaluationDefinition) -> bool:
    return bool(privileged_packs(user, definition))
