"""The path policy: asset descriptors, file-backed eval references, checker files, and the
walk of both asset roots (no symlinks or special files anywhere under them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from packs.compiler import PackError, compile_pack, paths
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN, PUBLIC

FILES = {
    "assets/data.csv": "a,b\n1,2\n",
    "assets/repo/README.md": "# repo\n",
    "assets/repo/src/app.py": "print('hi')\n",
    "assets/input/hidden.json": "{}\n",
    "assets/input/notes.txt": "public notes\n",
    "hidden/run-tests.sh": "#!/bin/sh\npytest\n",
    "hidden/task-a/tests/test_a.py": "def test_a():\n    pass\n",
    "hidden/task-a/tests/conftest.py": "\n",
    "hidden/answers.json": '{"answer": 42}\n',
}


def write_pack(root: Path, rows: list[dict], files: dict[str, str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.yaml").write_text("id: demo\nversion: 1\ndefaults: {family: terminal_task}\n")
    (root / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    for name, text in (FILES if files is None else files).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def task(eval: dict | None = None, assets: list | None = None, **extra) -> dict:
    row = {
        "id": "t1",
        "input": {"instructions": "do it"},
        "eval": {"checker": {"command": "true"}} | (eval or {}),
    }
    if assets is not None:
        row["assets"] = assets
    return row | extra


def only_problem(root: Path):
    with pytest.raises(PackError) as caught:
        compile_pack(root)
    problems = caught.value.problems
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


def resource(pack, name):
    return next(r for r in pack.tasks[0].resources if r.name == name)


# --- assets ----------------------------------------------------------------------------------


def test_assets_become_one_public_resource_with_their_files_attached(tmp_path):
    assets = [{"path": "data.csv"}, {"path": "repo", "mount": "work/repo", "read_only": False}]
    pack = compile_pack(write_pack(tmp_path, [task(assets=assets)]))

    assets_resource = resource(pack, "assets")
    assert (assets_resource.lane, assets_resource.kind, assets_resource.value) == (
        PUBLIC,
        "json",
        assets,
    )
    assert assets_resource.files == (
        ("public", "data.csv"),
        ("public", "repo/README.md"),
        ("public", "repo/src/app.py"),
    )
    assert assets_resource.size == sum(pack.files[key].size for key in assets_resource.files)
    assert pack.tasks[0].agent_payload()["assets"] == assets


def test_assets_sharing_source_files_attach_each_file_once(tmp_path):
    assets = [{"path": "repo", "mount": "a"}, {"path": "repo/README.md", "mount": "b/README.md"}]
    pack = compile_pack(write_pack(tmp_path, [task(assets=assets)]))

    assert resource(pack, "assets").files == (
        ("public", "repo/README.md"),
        ("public", "repo/src/app.py"),
    )


def test_a_directory_asset_does_not_pick_up_siblings_with_a_longer_name(tmp_path):
    files = {"assets/repo/a.txt": "a", "assets/repo-old/b.txt": "b", "assets/repo.txt": "c"}
    pack = compile_pack(write_pack(tmp_path, [task(assets=[{"path": "repo"}])], files))

    assert resource(pack, "assets").files == (("public", "repo/a.txt"),)


def test_an_empty_assets_list_adds_no_resource(tmp_path):
    pack = compile_pack(write_pack(tmp_path, [task(assets=[])]))

    assert "assets" not in {r.name for r in pack.tasks[0].resources}


ASSET_ERRORS = [
    (["data.csv"], "assets[0]", "must be an object"),
    ([{"mount": "x"}], "assets[0].path", "is required"),
    (
        [{"path": "missing.csv"}],
        "assets[0].path",
        "missing.csv does not exist under the public root assets/",
    ),
    ([{"path": ""}], "assets[0].path", "must be a non-empty relative path"),
    ([{"path": "/etc/passwd"}], "assets[0].path", "may not be absolute"),
    ([{"path": "../hidden/answers.json"}], "assets[0].path", "may not contain '..'"),
    ([{"path": "repo/../data.csv"}], "assets[0].path", "may not contain '..'"),
    ([{"path": "repo\\src"}], "assets[0].path", "may not contain backslashes"),
    ([{"path": "."}], "assets[0].path", "may not be '.' (the pack itself)"),
    ([{"path": "data.csv", "expose": True}], "assets[0]", "has unknown field(s): expose"),
    ([{"path": "data.csv", "read_only": "yes"}], "assets[0].read_only", "must be a boolean"),
    ([{"path": "data.csv", "mount": "/abs"}], "assets[0].mount", "may not be absolute"),
    ([{"path": "data.csv", "mount": "a/../b"}], "assets[0].mount", "may not contain '..'"),
    (
        [{"path": "data.csv", "mount": "securebench/evaluator/x.csv"}],
        "assets[0].mount",
        "securebench/evaluator/x.csv is reserved for non-public files (securebench/evaluator)",
    ),
    (
        [{"path": "data.csv", "mount": "securebench/evaluation_inputs"}],
        "assets[0].mount",
        "securebench/evaluation_inputs is reserved for non-public files"
        " (securebench/evaluation_inputs)",
    ),
    (
        [{"path": "repo", "mount": "securebench"}],
        "assets[0].mount",
        "securebench is reserved for non-public files (securebench/evaluation_inputs)",
    ),
    (
        [{"path": "data.csv", "mount": "ground_truth"}],
        "assets[0].mount",
        "ground_truth is a denied path (ground_truth and anything beneath it)",
    ),
    (
        [{"path": "data.csv", "mount": "scorer/x.csv"}],
        "assets[0].mount",
        "scorer/x.csv is a denied path (scorer and anything beneath it)",
    ),
    (
        [{"path": "data.csv", "mount": "eval"}],
        "assets[0].mount",
        "eval is a denied path (eval and anything beneath it)",
    ),
    (
        [{"path": "data.csv", "mount": "task/hidden.json"}],
        "assets[0].mount",
        "task/hidden.json is a denied path (task/hidden.json and anything beneath it)",
    ),
    (
        [{"path": "data.csv", "mount": "output/score.json"}],
        "assets[0].mount",
        "output/score.json is a denied path (output/score.json and anything beneath it)",
    ),
    (
        [{"path": "data.csv", "mount": "Ground_Truth"}],
        "assets[0].mount",
        "Ground_Truth is a denied path (ground_truth and anything beneath it)",
    ),
    (
        [{"path": "data.csv", "mount": "task.json"}],
        "assets[0].mount",
        "task.json is where the agent's task.json is written",
    ),
    (
        [{"path": "input"}],
        "assets[0].mount",
        "input (its file input/hidden.json) is a denied path"
        " (input/hidden.json and anything beneath it)",
    ),
    (
        [{"path": "data.csv", "mount": "work/data.csv"}, {"path": "repo", "mount": "work"}],
        "assets[1].mount",
        "overlaps assets[0].mount (work/data.csv); mounts in one task may not be equal or nested",
    ),
    (
        [{"path": "data.csv"}, {"path": "repo/README.md", "mount": "data.csv"}],
        "assets[1].mount",
        "overlaps assets[0].mount (data.csv); mounts in one task may not be equal or nested",
    ),
]


@pytest.mark.parametrize(("assets", "field", "message"), ASSET_ERRORS)
def test_it_rejects_a_bad_asset(tmp_path, assets, field, message):
    problem = only_problem(write_pack(tmp_path, [task(assets=assets)]))

    assert (problem.file, problem.line, problem.field) == ("tasks.jsonl", 1, field)
    assert problem.message == f"{message} (task 't1', terminal_task)"


def test_a_directory_asset_may_be_mounted_where_none_of_its_files_hit_a_denied_path(tmp_path):
    files = {"assets/input/notes.txt": "x", "hidden/.keep": ""}
    pack = compile_pack(write_pack(tmp_path, [task(assets=[{"path": "input"}])], files))

    assert resource(pack, "assets").files == (("public", "input/notes.txt"),)


# --- file-backed eval references --------------------------------------------------------------


def test_a_file_reference_attaches_its_eval_files(tmp_path):
    eval = {
        "run_tests": {
            "path": "run-tests.sh",
            "mount": "securebench/evaluation_inputs/run-tests.sh",
        },
        "test_files": {"path": "task-a/tests", "read_only": True},
        "expected_state": {"path": "answers.json"},
    }
    pack = compile_pack(write_pack(tmp_path, [task(eval)]))

    names = ("run_tests", "test_files", "expected_state")
    run_tests, test_files, expected_state = (resource(pack, name) for name in names)
    assert (run_tests.lane, run_tests.kind, run_tests.files) == (
        EVALUATION_INPUTS,
        "file",
        (("eval", "run-tests.sh"),),
    )
    assert (test_files.kind, test_files.files) == (
        "directory",
        (("eval", "task-a/tests/conftest.py"), ("eval", "task-a/tests/test_a.py")),
    )
    assert (expected_state.lane, expected_state.kind) == (HIDDEN, "file")
    assert test_files.size == sum(pack.files[key].size for key in test_files.files)
    assert test_files.value == {"path": "task-a/tests", "read_only": True}


def test_an_object_with_other_keys_is_a_plain_json_value(tmp_path):
    eval = {"run_tests": {"path": "no/such/file", "command": "bash x"}}
    pack = compile_pack(write_pack(tmp_path, [task(eval)]))

    assert (resource(pack, "run_tests").kind, resource(pack, "run_tests").files) == ("json", ())


EVAL_REF_ERRORS = [
    (
        {"run_tests": {"path": "nope.sh"}},
        "eval.run_tests.path",
        "nope.sh does not exist under the eval root hidden/",
    ),
    ({"run_tests": {"path": "../assets/data.csv"}}, "eval.run_tests.path", "may not contain '..'"),
    ({"run_tests": {"path": "/etc/passwd"}}, "eval.run_tests.path", "may not be absolute"),
    ({"run_tests": {"path": 5}}, "eval.run_tests.path", "must be a non-empty relative path"),
    (
        {"run_tests": {"path": "run-tests.sh", "read_only": 1}},
        "eval.run_tests.read_only",
        "must be a boolean",
    ),
    (
        {"run_tests": {"path": "run-tests.sh", "mount": "run-tests.sh"}},
        "eval.run_tests.mount",
        "must be under securebench/evaluation_inputs/ for a evaluation_inputs resource",
    ),
    (
        {"run_tests": {"path": "run-tests.sh", "mount": "securebench/evaluator/run.sh"}},
        "eval.run_tests.mount",
        "must be under securebench/evaluation_inputs/ for a evaluation_inputs resource",
    ),
    (
        {
            "expected_state": {
                "path": "answers.json",
                "mount": "securebench/evaluation_inputs/a.json",
            }
        },
        "eval.expected_state.mount",
        "must be under securebench/evaluator/ for a hidden resource",
    ),
    (
        {"run_tests": {"path": "run-tests.sh", "mount": "securebench/../x"}},
        "eval.run_tests.mount",
        "may not contain '..'",
    ),
    (
        {
            "run_tests": {
                "path": "task-a/tests/test_a.py",
                "mount": "securebench/evaluation_inputs/t/test_a.py",
            },
            "test_files": {"path": "task-a/tests", "mount": "securebench/evaluation_inputs/t"},
        },
        "eval.test_files.mount",
        "securebench/evaluation_inputs/t overlaps eval.run_tests.mount"
        " (securebench/evaluation_inputs/t/test_a.py)",
    ),
]


@pytest.mark.parametrize(("eval", "field", "message"), EVAL_REF_ERRORS)
def test_it_rejects_a_bad_eval_file_reference(tmp_path, eval, field, message):
    problem = only_problem(write_pack(tmp_path, [task(eval)]))

    assert (problem.line, problem.field) == (1, field)
    assert problem.message == f"{message} (task 't1', terminal_task)"


# --- trusted-file checker ----------------------------------------------------------------------


def test_a_trusted_file_checker_carries_the_files_under_its_path(tmp_path):
    checker = {"source": "pytest", "path": "task-a/tests", "timeout_seconds": 30}
    pack = compile_pack(write_pack(tmp_path, [task({"checker": checker})]))

    checker_resource = resource(pack, "checker")
    assert (checker_resource.lane, checker_resource.kind) == (EVALUATION_INPUTS, "json")
    assert checker_resource.files == (
        ("eval", "task-a/tests/conftest.py"),
        ("eval", "task-a/tests/test_a.py"),
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("task-b/tests", "task-b/tests does not exist under the eval root hidden/"),
        ("../assets", "may not contain '..'"),
        ("/opt/tests", "may not be absolute"),
        ("task-a\\tests", "may not contain backslashes"),
    ],
)
def test_it_rejects_a_bad_checker_path(tmp_path, path, message):
    checker = {"source": "pytest", "path": path}
    problem = only_problem(write_pack(tmp_path, [task({"checker": checker})]))

    assert (problem.line, problem.field) == (1, "eval.checker.path")
    assert problem.message == f"{message} (task 't1', terminal_task)"


def test_a_command_checker_carries_no_files(tmp_path):
    pack = compile_pack(write_pack(tmp_path, [task({"checker": {"command": ["pytest", "tests"]}})]))

    assert resource(pack, "checker").files == ()


# --- the walk of both roots --------------------------------------------------------------------


def test_every_file_under_both_roots_is_listed_with_its_hash(tmp_path):
    pack = compile_pack(write_pack(tmp_path, [task()]))

    assert set(pack.files) == {
        ("public" if n.startswith("assets/") else "eval", n.split("/", 1)[1]) for n in FILES
    }
    entry = pack.files[("eval", "answers.json")]
    assert entry.source == tmp_path / "hidden" / "answers.json"
    assert entry.size == len(FILES["hidden/answers.json"])
    assert len(entry.sha256) == 64
    assert pack.report["file_count"] == len(FILES)
    assert pack.report["file_bytes"] == sum(len(text) for text in FILES.values())


@pytest.mark.parametrize("where", ["assets/link", "hidden/task-a/link", "hidden/dirlink"])
def test_a_symlink_under_an_asset_root_is_rejected(tmp_path, where):
    pack = write_pack(tmp_path / "pack", [task()])
    target = tmp_path / "secret"
    target.mkdir()
    (pack / where).symlink_to(target)

    problem = only_problem(pack)

    assert problem.file == where
    assert problem.message == "is a symlink; packs may only contain regular files and directories"
    assert str(tmp_path) not in str(problem)


def test_a_symlink_inside_an_asset_directory_is_rejected_even_when_it_points_inside(tmp_path):
    pack = write_pack(tmp_path, [task(assets=[{"path": "repo"}])])
    (pack / "assets" / "repo" / "answers").symlink_to(pack / "hidden" / "answers.json")

    problem = only_problem(pack)

    assert problem.file == "assets/repo/answers"


def test_an_asset_pointing_at_a_symlink_says_so(tmp_path):
    pack = write_pack(tmp_path, [task(assets=[{"path": "link"}])])
    (pack / "assets" / "link").symlink_to(pack / "assets" / "data.csv")

    with pytest.raises(PackError) as caught:
        compile_pack(pack)

    assert [(p.file, p.field, p.message) for p in caught.value.problems] == [
        ("assets/link", None, "is a symlink; packs may only contain regular files and directories"),
        (
            "tasks.jsonl",
            "assets[0].path",
            "assets/link is not a regular file or directory (task 't1', terminal_task)",
        ),
    ]


def test_a_fifo_under_an_asset_root_is_rejected(tmp_path):
    pack = write_pack(tmp_path, [task()])
    os.mkfifo(pack / "hidden" / "pipe")

    problem = only_problem(pack)

    assert problem.file == "hidden/pipe"
    assert (
        problem.message
        == "is a device, fifo or socket; packs may only contain regular files and directories"
    )


def test_a_file_name_that_is_not_utf8_is_rejected(tmp_path):
    pack = write_pack(tmp_path, [task()])
    (pack / "assets").mkdir(exist_ok=True)
    with open(os.path.join(os.fsencode(pack / "assets"), b"bad-\xff.txt"), "wb") as handle:
        handle.write(b"x")

    problem = only_problem(pack)

    assert problem.message == "has a name that is not valid UTF-8"
    assert problem.file.startswith("assets/bad-")


def test_an_unreadable_file_is_reported_without_host_paths(tmp_path, monkeypatch):
    # Root (as in CI containers) can read any file, so the OS refusal is simulated.
    def refuse(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(paths, "file_sha256", refuse)
    pack = write_pack(tmp_path, [task()], {"hidden/answers.json": "{}"})

    problem = only_problem(pack)

    assert problem.file == "hidden/answers.json"
    assert problem.message == "could not be read (Permission denied)"
    assert str(tmp_path) not in str(problem)


def test_files_outside_the_roots_are_ignored_and_reported(tmp_path):
    pack = write_pack(tmp_path, [task()])
    (pack / "README.md").write_text("hi")
    (pack / "docker" / "task-a").mkdir(parents=True)
    (pack / "docker" / "task-a" / "Dockerfile").write_text("FROM x")
    (pack / "elsewhere").symlink_to(tmp_path / "nowhere")

    report = compile_pack(pack).report

    assert report["ignored_files"] == ["README.md", "docker/task-a/Dockerfile", "elsewhere"]
    assert ("public", "README.md") not in compile_pack(pack).files


def test_custom_roots_are_walked(tmp_path):
    files = {"pub/a.txt": "a", "priv/b.txt": "b"}
    pack = write_pack(
        tmp_path, [task(assets=[{"path": "a.txt"}], eval={"run_tests": {"path": "b.txt"}})], files
    )
    text = (pack / "manifest.yaml").read_text() + "asset_roots: {public: pub, eval: priv/}\n"
    (pack / "manifest.yaml").write_text(text)

    compiled = compile_pack(pack)

    assert set(compiled.files) == {("public", "a.txt"), ("eval", "b.txt")}
    assert compiled.tasks[0].metadata["asset_roots"] == {"public": "pub", "eval": "priv"}
