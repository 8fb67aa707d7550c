"""Which evaluations exist: the site's built-in scorers and the ones authors uploaded.

Every score on the site is "evaluation X@N on run R". A built-in key (runs.evaluators) and
an uploaded key live in one name space: an upload may not take a built-in's name.
"""

from __future__ import annotations

from django.db.models import QuerySet

from evaluations.manifest import BUILT_IN_NAMES, EvaluationManifest, manifest_from_canonical
from evaluations.models import EvaluationDefinition
from packs.models import ContractVersion, Pack


def split_key(key: str) -> tuple[str, int] | None:
    name, sep, version = key.rpartition("@")
    if not sep or not name or not version.isdigit() or len(version) > 10:
        return None
    return name, int(version)


def uploaded_definition(key: str) -> EvaluationDefinition | None:
    parts = split_key(key)
    if parts is None or parts[0] in BUILT_IN_NAMES:
        return None
    return EvaluationDefinition.objects.filter(name=parts[0], version=parts[1]).first()


def manifest_of(definition: EvaluationDefinition) -> EvaluationManifest:
    return manifest_from_canonical(definition.manifest)


def scores_version(definition: EvaluationDefinition, contract_version: ContractVersion) -> bool:
    """Whether the evaluation declares it may score this contract version."""
    target = definition.targets.filter(pack_id=contract_version.pack.pack_id).first()
    return target is not None and target.covers(contract_version.version)


def definitions_for_pack(pack: Pack) -> QuerySet[EvaluationDefinition]:
    """Every uploaded evaluation that declares it scores some version of the pack."""
    return (
        EvaluationDefinition.objects.filter(targets__pack_id=pack.pack_id)
        .prefetch_related("targets")
        .order_by("name", "-version")
        .distinct()
    )


def definition_versions(name: str) -> QuerySet[EvaluationDefinition]:
    return EvaluationDefinition.objects.filter(name=name).order_by("-version")
