from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluations.models import EvaluationDefinition
from packs.models import ContractVersion, Pack, Task
from tests.conftest import EXAMPLES, mc_row, zip_folder

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_import_pack_prints_json_for_a_folder(reference_packs):
    first = json.loads(run("import_pack", str(reference_packs / "humaneval-mini"), "--json"))
    again = json.loads(run("import_pack", str(reference_packs / "humaneval-mini"), "--json"))

    assert first["pack"] == "humaneval-mini" and first["version"] == 1
    assert first["tasks"] == 10 and first["created"] is True
    assert len(first["digest"]) == 64
    assert again == {**first, "created": False}


def test_import_pack_accepts_an_archive(tmp_path, make_pack):
    archive = tmp_path / "pack.zip"
    archive.write_bytes(zip_folder(make_pack({"id": "zipped", "version": 3})))

    result = json.loads(run("import_pack", str(archive), "--json"))

    assert (result["pack"], result["version"]) == ("zipped", 3)


def test_import_pack_fails_with_the_message_and_stores_nothing(make_pack):
    folder = make_pack({"id": "bad", "version": "1"}, [mc_row("q1")])

    with pytest.raises(CommandError) as raised:
        run("import_pack", str(folder))

    assert "manifest.yaml" in str(raised.value) and "version" in str(raised.value)
    assert not Pack.objects.exists()


def test_import_pack_refuses_a_missing_path(tmp_path):
    with pytest.raises(CommandError, match="no such file or folder"):
        run("import_pack", str(tmp_path / "absent"))


def test_import_humaneval_stores_all_164_problems_with_sealed_tests():
    result = json.loads(run("import_humaneval", "--json"))

    cv = ContractVersion.objects.get(pack__pack_id="humaneval", version=1)
    assert result["tasks"] == 164 and cv.task_count == 164
    task = cv.tasks.get(task_id="HumanEval/0")
    lanes = dict(task.resources.values_list("name", "lane"))
    assert lanes["tests"] == "evaluation_inputs"
    assert lanes["canonical_solution"] == "hidden"
    assert lanes["prompt"] == "public"
    assert task.metadata["entry_point"] == "has_close_elements"
    assert (
        task.resources.get(name="tests")
        .sealed.value["code"]
        .rstrip()
        .endswith("check(has_close_elements)")
    )


def test_setup_site_creates_one_admin_and_imports_the_examples_once():
    first = run("setup_site")
    second = run("setup_site")

    assert "password:" in first and "password:" not in second
    assert User.objects.filter(is_superuser=True).count() == 1
    example_count = sum(1 for p in EXAMPLES.iterdir() if (p / "manifest.yaml").is_file())
    assert example_count >= 6
    assert Pack.objects.count() == example_count
    families = set(Task.objects.values_list("family", flat=True))
    assert {
        "multiple_choice",
        "short_answer",
        "free_response",
        "code_completion",
        "repo_patch",
        "terminal_task",
        "artifact_task",
    } <= families
    # Evaluations are uploaded on their own (the authors' guide walks through the examples').
    assert not EvaluationDefinition.objects.exists()


def test_every_example_pack_compiles_cleanly():
    for folder in sorted(p for p in EXAMPLES.iterdir() if (p / "manifest.yaml").is_file()):
        result = json.loads(run("import_pack", str(folder), "--json"))
        assert result["created"], folder.name
