"""The "Evaluations" section of the pack and version pages: the site's built-in scorers and
the uploaded evaluations that declare they score the pack (packs shows it through its hooks;
it may import neither runs nor evaluations)."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from evaluations import access as evaluation_access
from evaluations import selectors as evaluation_selectors
from packs.models import ContractVersion, Pack
from runs.evaluators import EVALUATORS


@dataclass(frozen=True)
class BuiltInMetric:
    name: str
    direction: str
    primary: bool


@dataclass(frozen=True)
class BuiltIn:
    key: str
    description: str
    metrics: list[BuiltInMetric]


def built_in_evaluations() -> list[BuiltIn]:
    return [
        BuiltIn(
            evaluator.key,
            evaluator.description,
            [
                BuiltInMetric(name, evaluator.direction(name), name == evaluator.primary_metric)
                for name in evaluator.metrics
            ],
        )
        for evaluator in EVALUATORS.values()
    ]


def _section(request: HttpRequest, pack: Pack, version: ContractVersion | None) -> SafeString | str:
    uploaded = evaluation_selectors.definition_list(user=request.user, pack=pack.pack_id)
    rows = []
    for definition in uploaded:
        target = next(t for t in definition.targets.all() if t.pack_id == pack.pack_id)
        if version is not None and not target.covers(version.version):
            continue
        rows.append({"definition": definition, "target": target})
    contract = (version.contract or {}) if version is not None else {}
    compatible = list(contract.get("compatible_evaluations") or [])
    context = {
        "pack": pack,
        "cv": version,
        "rows": rows,
        "built_ins": built_in_evaluations(),
        "compatible": compatible,
        "can_add": evaluation_access.can_upload_evaluation(request.user)
        and (
            evaluation_access.is_reviewer(request.user)
            or pack.maintainers.filter(pk=request.user.pk).exists()
        ),
    }
    return render_to_string("evaluations/_pack_section.html", context, request=request)


def pack_evaluations_panel(request: HttpRequest, pack: Pack) -> SafeString | str:
    return _section(request, pack, None)


def version_evaluations_panel(request: HttpRequest, version: ContractVersion) -> SafeString | str:
    return _section(request, version.pack, version)
