from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.storage import storages

from packs import services
from packs.compiler import CompiledTask, compile_pack
from packs.management.commands.import_pack import import_path
from packs.models import ContractVersion, Pack, PackFile, Resource, SealedValue, Task
from packs.selectors import evaluator_task_lanes
from packs.services import PackVersionConflict, UploadRejected, pack_import_folder
from tests.conftest import mc_row

pytestmark = pytest.mark.django_db


def lanes_of(task: Task) -> dict[str, str]:
    return dict(task.resources.values_list("name", "lane"))


def test_it_stores_humaneval_mini_with_tests_sealed_as_evaluation_inputs(reference_packs):
    outcome = pack_import_folder(folder=reference_packs / "humaneval-mini")

    cv = outcome.contract_version
    assert outcome.created
    assert (cv.pack.pack_id, cv.version, cv.task_count) == ("humaneval-mini", 1, 10)
    task = cv.tasks.get(task_id="humaneval-mini/0")
    assert lanes_of(task) == {
        "language": "public",
        "prompt": "public",
        "starter_code": "public",
        "tests": "evaluation_inputs",
        "canonical_solution": "hidden",
    }
    assert set(task.agent_payload) == {"language", "prompt", "starter_code"}
    assert task.metadata["entry_point"] == "has_close_elements"


def test_it_stores_mmlu_answers_as_hidden(reference_packs):
    cv = pack_import_folder(folder=reference_packs / "mmlu-abstract-algebra-mini").contract_version

    for task in cv.tasks.all():
        assert lanes_of(task) == {"question": "public", "choices": "public", "answer": "hidden"}
        assert "answer" not in task.agent_payload
    assert cv.family_counts == {"multiple_choice": 10}


def test_it_stores_the_terminal_checker_with_its_hidden_files_sealed(reference_packs):
    cv = pack_import_folder(folder=reference_packs / "terminal-task-smoke").contract_version

    task = cv.tasks.get()
    assert lanes_of(task) == {
        "instructions": "public",
        "checker": "evaluation_inputs",
        "expected_state": "hidden",
    }
    assert task.agent_payload == {"instructions": task.agent_payload["instructions"]}
    checker = task.resources.get(name="checker")
    checker_files = [link.pack_file for link in checker.files.select_related("pack_file")]
    assert [(f.root, f.path) for f in checker_files] == [
        ("eval", "create-output-file/tests/test_outputs.py")
    ]
    blob = checker_files[0].blob_name
    assert storages["pack_sealed"].exists(blob)
    assert not storages["pack_public"].exists(blob)


def test_it_imports_code_completion_smoke(reference_packs):
    cv = pack_import_folder(folder=reference_packs / "code-completion-smoke").contract_version

    assert cv.task_count == 3
    assert set(cv.tasks.values_list("family", flat=True)) == {"code_completion"}


def test_non_public_values_live_only_in_the_sealed_table(reference_packs):
    pack_import_folder(folder=reference_packs / "humaneval-mini")

    for resource in Resource.objects.exclude(lane="public"):
        assert resource.public_value is None
        assert SealedValue.objects.filter(resource=resource).exists()
    assert not SealedValue.objects.filter(resource__lane="public").exists()


def test_reimporting_the_same_content_is_a_no_op_that_says_so(reference_packs):
    first = pack_import_folder(folder=reference_packs / "mmlu-abstract-algebra-mini")
    again = pack_import_folder(folder=reference_packs / "mmlu-abstract-algebra-mini")

    assert not again.created
    assert again.contract_version.pk == first.contract_version.pk
    assert "already stored with the same content" in again.message
    assert ContractVersion.objects.count() == 1
    assert Task.objects.count() == 10


def test_reimporting_different_content_under_the_same_version_is_refused(make_pack):
    pack_import_folder(folder=make_pack({"id": "humaneval-mini", "version": 1}))
    changed = make_pack({"id": "humaneval-mini", "version": 1}, [mc_row("q1", answer="C")])

    with pytest.raises(PackVersionConflict) as raised:
        pack_import_folder(folder=changed)

    assert str(raised.value).startswith(
        "version 1 of humaneval-mini is already stored with different content; raise `version`"
    )
    assert Task.objects.count() == 1


def test_a_raised_version_is_stored_beside_the_old_one(make_pack):
    pack_import_folder(folder=make_pack({"id": "demo", "version": 1}))
    pack_import_folder(folder=make_pack({"id": "demo", "version": 2}, [mc_row("q1", "C")]))

    pack = Pack.objects.get(pack_id="demo")
    assert list(pack.versions.order_by("version").values_list("version", flat=True)) == [1, 2]
    assert pack.latest_version == 2


def test_a_bad_pack_stores_nothing_at_all(make_pack, isolated_data_dir):
    folder = make_pack(
        {"id": "demo", "version": 1},
        [mc_row("q1"), {"id": "q2", "family": "multiple_choice", "input": {}}],
        files={"assets/data.txt": "public", "hidden/secret.txt": "sealed"},
    )

    with pytest.raises(UploadRejected):
        import_path(folder)

    assert not Pack.objects.exists() and not PackFile.objects.exists()
    assert not any(p.is_file() for p in Path(isolated_data_dir).rglob("*"))


def test_files_are_split_between_the_public_and_sealed_roots(make_pack):
    row = mc_row("q1")
    row["assets"] = [{"path": "table.csv"}]
    folder = make_pack(
        {"id": "demo", "version": 1},
        [row],
        files={"assets/table.csv": "a,b\n1,2\n", "hidden/notes.txt": "sealed notes\n"},
    )

    cv = pack_import_folder(folder=folder).contract_version

    public = cv.files.get(root="public")
    sealed = cv.files.get(root="eval")
    assert storages["pack_public"].exists(public.blob_name)
    assert storages["pack_sealed"].exists(sealed.blob_name)
    assert not storages["pack_public"].exists(sealed.blob_name)


def test_the_evaluator_view_of_a_task_has_all_lanes_and_trusted_file_copies(reference_packs):
    cv = pack_import_folder(folder=reference_packs / "terminal-task-smoke").contract_version

    lanes = evaluator_task_lanes(cv.tasks.get())

    assert set(lanes.public) == {"instructions"}
    assert lanes.evaluation_inputs["checker"]["source"] == "pytest"
    assert lanes.hidden["expected_state"]["path"] == "output.txt"
    (checker_file,) = lanes.files["checker"]
    assert checker_file.path == "create-output-file/tests/test_outputs.py"
    assert "securebench terminal task" in checker_file.source.read_text()


def stored_task(task: Task) -> dict:
    """A stored task as plain data: its columns, and every resource with its value."""
    lanes = evaluator_task_lanes(task)
    resources = list(
        task.resources.order_by("position").values_list("name", "lane", "kind", "size", "sha256")
    )
    return {
        "task_id": task.task_id,
        "family": task.family,
        "line": task.line,
        "has_verifier": task.has_verifier,
        "metadata": task.metadata,
        "environment": task.environment,
        "agent_payload": task.agent_payload,
        "resources": resources,
        "values": {**lanes.public, **lanes.evaluation_inputs, **lanes.hidden},
        # Links have no order of their own: compare the sets of files.
        "files": {name: sorted(f.path for f in files) for name, files in lanes.files.items()},
    }


def compiled_task(task: CompiledTask) -> dict:
    return {
        "task_id": task.task_id,
        "family": task.family,
        "line": task.line,
        "has_verifier": task.has_verifier,
        "metadata": task.metadata,
        "environment": task.environment,
        "agent_payload": task.agent_payload(),
        "resources": [(r.name, r.lane, r.kind, r.size, r.sha256) for r in task.resources],
        "values": {r.name: r.value for r in task.resources},
        "files": {r.name: sorted(path for _, path in r.files) for r in task.resources if r.files},
    }


def varied_rows() -> list[dict]:
    """Rows of several shapes: plain, with assets, with nested public JSON and unicode, and
    with a hidden file reference (unknown families: no verifier, every eval key hidden)."""
    with_assets = mc_row("assets-row")
    with_assets["assets"] = [{"path": "table.csv"}, {"path": "docs", "mount": "reference"}]
    nested = mc_row("nested-row", family="custom")  # an unknown family takes any input
    nested["input"]["context"] = {"z": [1, 2.5, None, True], "a": {"ünï": "código ✓"}}
    nested["metadata"] = {"source": "here", "z-last": 1, "a-first": 2}
    nested["environment"] = {"timeout_seconds": 30}
    file_ref = {
        "id": "file-ref-row",
        "family": "custom",
        "input": {"prompt": "call the tool"},
        "eval": {"expected": {"path": "expected.json"}},
    }
    return [
        *(mc_row(f"q{index}", answer="ABC"[index % 3]) for index in range(5)),
        with_assets,
        nested,
        file_ref,
        *(mc_row(f"r{index}") for index in range(4)),
    ]


def test_tasks_stored_in_batches_are_exactly_the_compiled_tasks(make_pack, monkeypatch):
    # Batches of 2 make every batch boundary fall somewhere in this small pack.
    monkeypatch.setattr(services, "TASK_BATCH", 2)
    folder = make_pack(
        {"id": "batched", "version": 1, "defaults": {"environment": {"image": "python:3.12"}}},
        varied_rows(),
        files={
            "assets/table.csv": "a,b\n1,2\n",
            "assets/docs/one.md": "one\n",
            "assets/docs/two.md": "two\n",
            "hidden/expected.json": "{}\n",
        },
    )
    compiled = compile_pack(folder)

    cv = pack_import_folder(folder=folder).contract_version

    tasks = list(cv.tasks.order_by("position"))
    assert [t.position for t in tasks] == list(range(len(compiled.tasks)))
    assert [stored_task(t) for t in tasks] == [compiled_task(t) for t in compiled.tasks]
    assert cv.digest == compiled.digest and cv.task_count == len(compiled.tasks)
    assert cv.compile_report == compiled.report
    assert cv.lane_counts == compiled.report["lane_counts"]


def test_a_bad_row_after_many_good_batches_stores_nothing(make_pack, monkeypatch):
    monkeypatch.setattr(services, "TASK_BATCH", 2)
    rows = [mc_row(f"q{index}") for index in range(7)]
    rows.append({"id": "late", "family": "multiple_choice", "input": {"question": "?"}})
    folder = make_pack({"id": "demo", "version": 1}, rows)

    with pytest.raises(UploadRejected) as rejected:
        import_path(folder)

    problems = {(p.file, p.line, p.field) for p in rejected.value.problems}
    assert problems == {("tasks.jsonl", 8, "input.choices"), ("tasks.jsonl", 8, "eval.answer")}
    assert not Pack.objects.exists() and not Task.objects.exists()
    assert not Resource.objects.exists() and not SealedValue.objects.exists()
