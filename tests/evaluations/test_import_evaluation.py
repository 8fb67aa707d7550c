"""Uploading an evaluation: checked with file, line and field; content-addressed; immutable;
its program and sealed data in the sealed store; only maintainers and reviewers may add one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.files.storage import storages
from django.core.management import CommandError, call_command

from evaluations.models import EvaluationDefinition, EvaluationFile
from evaluations.services import evaluation_import_folder
from packs.models import blob_name
from packs.services import UploadRejected, pack_import_folder
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

SCORER = (
    "import json, sys\n"
    "data = json.load(open('/evaluation/input.json'))\n"
    "print(json.dumps({'metrics': {'accuracy': 1.0}}))\n"
)


def declaration(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "exact",
        "version": 1,
        "title": "Exact match",
        "scores": [{"pack": "demo", "versions": "all"}],
        "scope": "task",
        "metrics": [{"name": "accuracy", "direction": "higher", "range": [0, 1], "primary": True}],
        "program": {"command": ["python3", "/evaluation/program/score.py"]},
    }
    data.update(changes)
    return data


def write_evaluation(
    root: Path, data: dict[str, Any], *, sealed: str = "secret-label-7f3a\n", program: str = SCORER
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "evaluation.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (root / "program").mkdir(exist_ok=True)
    (root / "program" / "score.py").write_text(program)
    (root / "sealed").mkdir(exist_ok=True)
    (root / "sealed" / "labels.txt").write_text(sealed)
    return root


@pytest.fixture
def demo_pack(make_pack):
    return pack_import_folder(folder=make_pack()).contract_version


def test_an_evaluation_is_stored_with_its_files_sealed_by_digest(tmp_path, demo_pack):
    outcome = evaluation_import_folder(folder=write_evaluation(tmp_path / "e", declaration()))

    definition = outcome.definition
    assert outcome.created and definition.key == "exact@1"
    assert definition.scope == "task" and definition.primary_metric == "accuracy"
    files = {(f.role, f.path): f for f in EvaluationFile.objects.filter(definition=definition)}
    assert set(files) == {("program", "score.py"), ("sealed", "labels.txt")}
    sealed = files[("sealed", "labels.txt")]
    with storages["pack_sealed"].open(blob_name(sealed.sha256), "rb") as handle:
        assert handle.read() == b"secret-label-7f3a\n"
    assert not storages["pack_public"].exists(blob_name(sealed.sha256))
    assert "secret-label" not in json.dumps(definition.manifest)


def test_the_same_key_with_other_content_is_refused_and_the_same_content_is_a_no_op(
    tmp_path, demo_pack
):
    first = evaluation_import_folder(folder=write_evaluation(tmp_path / "a", declaration()))
    again = evaluation_import_folder(folder=write_evaluation(tmp_path / "b", declaration()))
    assert not again.created and again.definition.pk == first.definition.pk

    changed = write_evaluation(tmp_path / "c", declaration(), sealed="other labels\n")
    with pytest.raises(UploadRejected) as refused:
        evaluation_import_folder(folder=changed)
    assert "already stored with different content" in str(refused.value)
    assert refused.value.problems[0].field == "version"
    assert EvaluationDefinition.objects.count() == 1
    assert EvaluationFile.objects.count() == 2


def test_every_problem_names_the_file_line_and_field(tmp_path, demo_pack):
    bad = declaration(
        version=0,
        scope="dataset",
        metrics=[
            {"name": "accuracy", "direction": "up", "range": [1, 0], "primary": True},
            {"name": "accuracy", "direction": "higher"},
        ],
    )
    with pytest.raises(UploadRejected) as refused:
        evaluation_import_folder(folder=write_evaluation(tmp_path / "e", bad))

    found = {(p.file, p.field): p for p in refused.value.problems}
    assert {("evaluation.yaml", "version"), ("evaluation.yaml", "scope")} <= set(found)
    assert ("evaluation.yaml", "metrics[0].direction") in found
    assert ("evaluation.yaml", "metrics[0].range") in found
    assert ("evaluation.yaml", "metrics[1].name") in found
    text = (tmp_path / "e" / "evaluation.yaml").read_text().splitlines()
    line = found[("evaluation.yaml", "scope")].line
    assert line is not None and text[line - 1].startswith("scope:")
    assert not EvaluationDefinition.objects.exists()


def test_a_symlink_or_a_stray_top_level_file_is_refused(tmp_path, demo_pack):
    root = write_evaluation(tmp_path / "e", declaration())
    (root / "program" / "peek").symlink_to("/etc/passwd")
    (root / "notes.txt").write_text("stray")
    with pytest.raises(UploadRejected) as refused:
        evaluation_import_folder(folder=root)
    files = {problem.file for problem in refused.value.problems}
    assert {"program/peek", "notes.txt"} <= files
    assert not EvaluationDefinition.objects.exists()


def test_a_pack_it_scores_must_exist_and_the_uploader_must_maintain_it(tmp_path, demo_pack):
    unknown = declaration(scores=[{"pack": "nowhere", "versions": "all"}])
    with pytest.raises(UploadRejected, match="no pack nowhere"):
        evaluation_import_folder(folder=write_evaluation(tmp_path / "a", unknown))

    stranger = make_user("stranger", "pack maintainer")
    with pytest.raises(UploadRejected, match="you do not maintain demo"):
        evaluation_import_folder(
            folder=write_evaluation(tmp_path / "b", declaration()), uploaded_by=stranger
        )
    reviewer = make_user("rita", "reviewer")
    outcome = evaluation_import_folder(
        folder=write_evaluation(tmp_path / "c", declaration()), uploaded_by=reviewer
    )
    assert outcome.created


def test_a_built_in_scorers_name_cannot_be_taken(tmp_path, demo_pack):
    with pytest.raises(UploadRejected, match="the site's own scorers"):
        evaluation_import_folder(
            folder=write_evaluation(tmp_path / "e", declaration(id="securebench"))
        )


def test_the_command_prints_json_and_exits_non_zero_on_problems(tmp_path, demo_pack, capsys):
    good = write_evaluation(tmp_path / "good", declaration())
    call_command("import_evaluation", str(good), "--json")
    printed = json.loads(capsys.readouterr().out)
    assert printed["evaluation"] == "exact@1" and printed["created"] is True

    bad = write_evaluation(tmp_path / "bad", declaration(scope="nope", version=2))
    with pytest.raises(CommandError, match="evaluation not stored"):
        call_command("import_evaluation", str(bad), "--json")
    answer = json.loads(capsys.readouterr().out)
    assert answer["stored"] is False
    assert any(problem["field"] == "scope" for problem in answer["problems"])
