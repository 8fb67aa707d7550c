"""manifest.yaml: safe YAML, every key checked, asset roots kept apart."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from packs.compiler import CompileLimits, PackError, compile_pack

ROW = {
    "id": "t1",
    "family": "multiple_choice",
    "input": {"question": "2+2?", "choices": ["3", "4"]},
    "eval": {"answer": "B"},
}


def write_pack(root: Path, manifest: str, rows: list[dict] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.yaml").write_text(manifest, encoding="utf-8")
    lines = [json.dumps(row) for row in (rows if rows is not None else [ROW])]
    (root / "tasks.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def problems_of(root: Path, **kwargs) -> list:
    with pytest.raises(PackError) as caught:
        compile_pack(root, **kwargs)
    return caught.value.problems


def only_problem(root: Path, **kwargs):
    problems = problems_of(root, **kwargs)
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


def test_a_minimal_manifest_gets_the_default_roots_and_read_only(tmp_path):
    pack = compile_pack(write_pack(tmp_path, "id: demo\nversion: 1\n"))

    manifest = pack.manifest
    assert (manifest.id, manifest.version) == ("demo", 1)
    assert (manifest.public_root, manifest.eval_root) == ("assets", "hidden")
    assert manifest.read_only_default is True
    assert manifest.default_family is None and manifest.default_environment == {}
    assert manifest.contract is None and manifest.title is None
    assert manifest.canonical == {"id": "demo", "version": 1}


def test_it_reads_every_allowed_key(tmp_path):
    text = """\
id: full.pack_1
version: 3
title: Full pack
description: All keys
defaults:
  family: multiple_choice
  environment: {image: python:3.12-slim, timeout_seconds: 30}
asset_roots: {public: data/public/, eval: data/private}
asset_defaults: {read_only: false}
contract:
  budgets: {wall_time_seconds: 1.5, tokens: 1000, usd: 0, attempts: 2}
  allowed_to_modify: [src/]
  read_only: [tests/]
  required_outputs: [out.txt]
  compatible_evaluations: [securebench@1, other-eval@12]
"""
    manifest = compile_pack(write_pack(tmp_path, text)).manifest

    assert manifest.title == "Full pack" and manifest.description == "All keys"
    assert manifest.default_family == "multiple_choice"
    assert manifest.default_environment == {"image": "python:3.12-slim", "timeout_seconds": 30}
    assert (manifest.public_root, manifest.eval_root) == ("data/public", "data/private")
    assert manifest.read_only_default is False
    assert manifest.contract["budgets"]["tokens"] == 1000
    assert manifest.contract["compatible_evaluations"] == ["securebench@1", "other-eval@12"]


def test_it_rejects_an_unknown_manifest_key(tmp_path):
    problem = only_problem(write_pack(tmp_path, "id: demo\nversion: 1\nschema_version: '2.0'\n"))

    assert (problem.file, problem.line, problem.field) == ("manifest.yaml", 3, "schema_version")
    assert "is not a manifest key" in problem.message
    assert str(problem).startswith("manifest.yaml, line 3, field schema_version: is not a manifest")


BAD_MANIFESTS = [
    ("version: 1\n", "id", "is required"),
    ("id: ''\nversion: 1\n", "id", "must be a non-empty string"),
    ("id: 12\nversion: 1\n", "id", "must be a non-empty string"),
    ("id: my pack\nversion: 1\n", "id", "because it appears in URLs"),
    ("id: -pack\nversion: 1\n", "id", "because it appears in URLs"),
    (f"id: {'a' * 101}\nversion: 1\n", "id", "because it appears in URLs"),
    # "$" would match before the final newline: a second "demo" that prints like the first
    ('id: "demo\\n"\nversion: 1\n', "id", "because it appears in URLs"),
    ("id: demo\n", "version", "is required"),
    ("id: demo\nversion: true\n", "version", "must be an integer of at least 1"),
    ("id: demo\nversion: '1'\n", "version", "must be an integer of at least 1"),
    ("id: demo\nversion: 0\n", "version", "must be an integer of at least 1"),
    ("id: demo\nversion: 1.5\n", "version", "must be an integer of at least 1"),
    ("id: demo\nversion: 2147483648\n", "version", "must be at most 2147483647"),
    (f"id: demo\nversion: 1\ntitle: {'t' * 201}\n", "title", "must be at most 200 characters"),
    ("id: demo\nversion: 1\ntitle: ''\n", "title", "must be a non-empty string"),
    ("id: demo\nversion: 1\ndescription: 5\n", "description", "must be a string"),
    ("id: demo\nversion: 1\ndefaults: []\n", "defaults", "must be an object"),
    ("id: demo\nversion: 1\ndefaults: {image: x}\n", "defaults", "has unknown field(s): image"),
    (
        "id: demo\nversion: 1\ndefaults: {family: ' '}\n",
        "defaults.family",
        "must be a non-empty string",
    ),
    (
        "id: demo\nversion: 1\ndefaults: {environment: x}\n",
        "defaults.environment",
        "must be an object",
    ),
    ("id: demo\nversion: 1\nasset_roots: x\n", "asset_roots", "must be an object"),
    (
        "id: demo\nversion: 1\nasset_roots: {runtime: r/}\n",
        "asset_roots.runtime",
        "is not an asset root",
    ),
    (
        "id: demo\nversion: 1\nasset_defaults: {read_only: 'yes'}\n",
        "asset_defaults.read_only",
        "must be a boolean",
    ),
    (
        "id: demo\nversion: 1\nasset_defaults: {writable: true}\n",
        "asset_defaults",
        "has unknown field(s): writable",
    ),
    ("id: demo\nversion: 1\nasset_defaults: true\n", "asset_defaults", "must be an object"),
]


@pytest.mark.parametrize(("text", "field", "message"), BAD_MANIFESTS)
def test_it_rejects_a_bad_manifest_value(tmp_path, text, field, message):
    problem = only_problem(write_pack(tmp_path, text))

    assert problem.file == "manifest.yaml"
    assert problem.field == field
    assert message in problem.message


def test_a_field_problem_names_the_line_of_its_key(tmp_path):
    problem = only_problem(write_pack(tmp_path, "id: demo\nversion: 1\ndefaults:\n  family: 7\n"))

    assert (
        str(problem) == "manifest.yaml, line 4, field defaults.family: must be a non-empty string"
    )


def test_it_reports_every_manifest_problem_at_once(tmp_path):
    problems = problems_of(write_pack(tmp_path, "id: a b\nversion: '1'\nextra: 1\n"))

    assert {p.field for p in problems} == {"id", "version", "extra"}


CONTRACTS = [
    ("{shipping: 1}", "contract", "has unknown field(s): shipping"),
    ("[]", "contract", "must be an object"),
    ("{budgets: {gpus: 1}}", "contract.budgets", "has unknown field(s): gpus"),
    (
        "{budgets: {wall_time_seconds: 0}}",
        "contract.budgets.wall_time_seconds",
        "must be a positive number",
    ),
    (
        "{budgets: {wall_time_seconds: true}}",
        "contract.budgets.wall_time_seconds",
        "must be a positive number",
    ),
    ("{budgets: {tokens: 1.5}}", "contract.budgets.tokens", "must be a positive integer"),
    ("{budgets: {tokens: true}}", "contract.budgets.tokens", "must be a positive integer"),
    ("{budgets: {usd: -0.01}}", "contract.budgets.usd", "must be a non-negative number"),
    ("{budgets: {usd: '1'}}", "contract.budgets.usd", "must be a non-negative number"),
    ("{budgets: {attempts: 0}}", "contract.budgets.attempts", "must be a positive integer"),
    ("{allowed_to_modify: src}", "contract.allowed_to_modify", "must be a string array"),
    ("{read_only: ['']}", "contract.read_only", "must contain only non-empty strings"),
    (
        "{required_outputs: [1]}",
        "contract.required_outputs[0]",
        "must be a non-empty path or a {path, ...} object",
    ),
    (
        "{compatible_evaluations: securebench@1}",
        "contract.compatible_evaluations",
        "like securebench@1",
    ),
    (
        "{compatible_evaluations: [securebench]}",
        "contract.compatible_evaluations[0]",
        "like securebench@1",
    ),
    (
        "{compatible_evaluations: ['securebench@x']}",
        "contract.compatible_evaluations[0]",
        "like securebench@1",
    ),
]


@pytest.mark.parametrize(("contract", "field", "message"), CONTRACTS)
def test_it_rejects_a_bad_contract(tmp_path, contract, field, message):
    problem = only_problem(write_pack(tmp_path, f"id: demo\nversion: 1\ncontract: {contract}\n"))

    assert (problem.field, problem.line) == (field, 3)
    assert message in problem.message


# --- YAML safety -----------------------------------------------------------------------------


def test_it_refuses_yaml_aliases(tmp_path):
    text = "id: demo\nversion: 1\ndefaults:\n  environment: &env {image: x}\ntitle: *env\n"
    problem = only_problem(write_pack(tmp_path, text))

    assert (problem.file, problem.line) == ("manifest.yaml", 4)
    assert "aliases are not allowed" in problem.message


def test_it_refuses_an_alias_bomb_without_expanding_it(tmp_path):
    lines = ["id: demo", "version: 1", 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    problem = only_problem(write_pack(tmp_path, "\n".join(lines) + "\n"))

    assert "aliases are not allowed" in problem.message


@pytest.mark.parametrize(
    ("value", "tag"),
    [
        ("!!python/object/apply:os.system ['true']", "!!python/object/apply:os.system"),
        ("!!binary aGVsbG8=", "!!binary"),
        ("!!set {a, b}", "!!set"),
        ("!custom 1", "!custom"),
    ],
)
def test_it_refuses_non_standard_yaml_tags(tmp_path, value, tag):
    problem = only_problem(write_pack(tmp_path, f"id: demo\nversion: 1\ntitle: {value}\n"))

    assert problem.line == 3
    assert problem.message == f"the YAML tag {tag} is not allowed"


def test_standard_tags_and_dates_stay_plain_json(tmp_path):
    text = "id: demo\nversion: !!int 2\ntitle: !!str 2024-01-01\ndescription: 2024-01-01\n"
    manifest = compile_pack(write_pack(tmp_path, text)).manifest

    assert manifest.version == 2
    assert manifest.title == "2024-01-01" and manifest.description == "2024-01-01"


def test_it_refuses_a_manifest_over_the_size_limit(tmp_path):
    text = "id: demo\nversion: 1\ndescription: " + "x" * 300_000 + "\n"
    problem = only_problem(write_pack(tmp_path, text))

    assert problem.message == "is larger than 256 KiB"


def test_the_manifest_size_limit_can_be_overridden(tmp_path):
    pack = write_pack(tmp_path, "id: demo\nversion: 1\ndescription: " + "x" * 200 + "\n")

    problem = only_problem(pack, limits=CompileLimits(max_manifest_bytes=100))

    assert problem.message == "is larger than 100 bytes"


def test_it_reports_a_yaml_syntax_error_with_its_line(tmp_path):
    problem = only_problem(write_pack(tmp_path, "id: demo\nversion: 1\ndefaults: {family: x\n"))

    assert problem.file == "manifest.yaml"
    assert problem.line == 4
    assert problem.message.startswith("invalid YAML: ")


def test_it_refuses_deeply_nested_yaml_without_crashing(tmp_path):
    problem = only_problem(write_pack(tmp_path, "id: demo\nversion: 1\ntitle: " + "[" * 50_000))

    assert problem.message == "nests deeper than 64 levels"


def test_it_refuses_yaml_nested_past_the_depth_limit(tmp_path):
    text = "id: demo\nversion: 1\ndefaults: {environment: " + "[" * 70 + "]" * 70 + "}\n"
    problem = only_problem(write_pack(tmp_path, text))

    assert problem.message == "nests deeper than 64 levels"


def test_it_refuses_duplicate_yaml_keys(tmp_path):
    problem = only_problem(write_pack(tmp_path, "id: demo\nversion: 1\nid: other\n"))

    assert (problem.line, problem.message) == (3, "duplicate key 'id'")


def test_it_refuses_non_string_yaml_keys(tmp_path):
    problem = only_problem(write_pack(tmp_path, "id: demo\nversion: 1\n1: one\n"))

    assert problem.message == "mapping keys must be strings, not 1"


def test_it_refuses_nan_in_yaml(tmp_path):
    text = "id: demo\nversion: 1\ncontract: {budgets: {usd: .nan}}\n"
    problem = only_problem(write_pack(tmp_path, text))

    assert problem.message == "NaN and infinite numbers are not allowed"


@pytest.mark.parametrize("text", ["- id: demo\n", "just a string\n", ""])
def test_the_manifest_root_must_be_a_mapping(tmp_path, text):
    problem = only_problem(write_pack(tmp_path, text))

    assert problem.message == "the manifest root must be a mapping (key: value pairs)"


def test_it_refuses_a_manifest_that_is_not_utf8(tmp_path):
    pack = write_pack(tmp_path, "")
    (pack / "manifest.yaml").write_bytes(b"id: demo\nversion: 1\ntitle: \xff\n")

    problem = only_problem(pack)

    assert (problem.line, problem.message) == (3, "is not valid UTF-8 (byte 27)")


def test_it_reports_a_missing_manifest(tmp_path):
    pack = write_pack(tmp_path, "")
    (pack / "manifest.yaml").unlink()

    problem = only_problem(pack)

    assert problem.file == "manifest.yaml"
    assert problem.message.startswith("is missing")


def test_it_accepts_other_manifest_and_tasks_names(tmp_path):
    pack = write_pack(tmp_path, "id: demo\nversion: 1\n")
    (pack / "manifest.yaml").rename(pack / "bench.yaml")
    (pack / "tasks.jsonl").rename(pack / "rows.jsonl")

    compiled = compile_pack(pack, manifest_name="bench.yaml", tasks_name="rows.jsonl")

    assert [task.task_id for task in compiled.tasks] == ["t1"]


# --- asset roots -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("''", "must be a non-empty relative path"),
        ("'.'", "may not be '.' (the pack itself)"),
        ("./", "may not be '.' (the pack itself)"),
        ("/assets", "may not be absolute"),
        ("../assets", "may not contain '..'"),
        ("assets/../hidden", "may not contain '..'"),
        ("'assets\\\\public'", "may not contain backslashes"),
        ("7", "must be a non-empty relative path"),
    ],
)
@pytest.mark.parametrize("root", ["public", "eval"])
def test_it_rejects_an_unsafe_asset_root(tmp_path, root, value, message):
    problem = only_problem(
        write_pack(tmp_path, f"id: demo\nversion: 1\nasset_roots:\n  {root}: {value}\n")
    )

    assert (problem.field, problem.line) == (f"asset_roots.{root}", 4)
    assert problem.message == message


@pytest.mark.parametrize(
    ("public", "eval"),
    [("shared", "shared/"), ("files", "files/hidden"), ("files/public", "files"), ("Data", "data")],
)
def test_it_rejects_overlapping_asset_roots(tmp_path, public, eval):
    text = f"id: demo\nversion: 1\nasset_roots: {{public: {public}, eval: {eval}}}\n"
    problem = only_problem(write_pack(tmp_path, text))

    assert problem.field == "asset_roots"
    assert "may not overlap: files under the eval root would be served publicly" in problem.message


def test_an_asset_root_that_is_a_file_is_rejected(tmp_path):
    pack = write_pack(tmp_path, "id: demo\nversion: 1\n")
    (pack / "hidden").write_text("not a directory")

    problem = only_problem(pack)

    assert (problem.field, problem.message) == ("asset_roots.eval", "must be a directory")


def test_an_asset_root_symlinked_outside_the_pack_is_rejected(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    pack = write_pack(tmp_path / "pack", "id: demo\nversion: 1\n")
    (pack / "hidden").symlink_to(outside)

    problem = only_problem(pack)

    assert problem.field == "asset_roots.eval"
    assert problem.message == "may not resolve outside the pack (it is a symlink)"
    assert str(tmp_path) not in str(problem)


def test_an_asset_root_symlinked_to_the_other_root_is_rejected(tmp_path):
    pack = write_pack(tmp_path, "id: demo\nversion: 1\n")
    (pack / "hidden").mkdir()
    (pack / "assets").symlink_to(pack / "hidden")

    problem = only_problem(pack)

    assert (problem.field, problem.message) == (
        "asset_roots.public",
        "may not be or pass through a symlink",
    )


def test_absent_asset_roots_are_fine(tmp_path):
    pack = compile_pack(
        write_pack(tmp_path, "id: demo\nversion: 1\nasset_roots: {public: a/b, eval: c}\n")
    )

    assert pack.files == {} and pack.report["file_count"] == 0


def test_a_manifest_that_is_a_symlink_is_rejected(tmp_path):
    pack = write_pack(tmp_path / "pack", "")
    (tmp_path / "real.yaml").write_text("id: demo\nversion: 1\n")
    (pack / "manifest.yaml").unlink()
    os.symlink(tmp_path / "real.yaml", pack / "manifest.yaml")

    problem = only_problem(pack)

    assert (problem.file, problem.message) == ("manifest.yaml", "may not be a symlink")


def test_a_nul_character_in_the_manifest_is_refused(tmp_path):
    (tmp_path / "manifest.yaml").write_text('id: demo\nversion: 1\ndescription: "a\\0b"\n')
    (tmp_path / "tasks.jsonl").write_text("")

    with pytest.raises(PackError) as caught:
        compile_pack(tmp_path)

    assert "NUL character" in str(caught.value)


# --- canaries (sealed: never in the stored manifest) -------------------------------------------


def test_a_canary_is_kept_apart_from_the_public_manifest(tmp_path):
    manifest = compile_pack(
        write_pack(tmp_path, "id: demo\nversion: 1\ncanary: '  BENCH-CANARY-1234  '\n")
    ).manifest

    assert manifest.canaries == ("BENCH-CANARY-1234",)
    assert manifest.canonical == {"id": "demo", "version": 1}


def test_a_list_of_canaries_keeps_its_order_without_repeats(tmp_path):
    items = ("first-canary-a", "second-canary-b", "first-canary-a")
    text = "id: demo\nversion: 1\ncanary:\n" + "".join(f"  - {item}\n" for item in items)

    manifest = compile_pack(write_pack(tmp_path, text)).manifest

    assert manifest.canaries == ("first-canary-a", "second-canary-b")
    assert "canary" not in manifest.canonical


BAD_CANARIES = [
    ("canary: short\n", "canary", 3, "must be a string of 8 to 1000 characters"),
    ("canary: '   seven  '\n", "canary", 3, "surrounding spaces not counted"),
    (f"canary: {'x' * 1001}\n", "canary", 3, "must be a string of 8 to 1000 characters"),
    ("canary: 123456789\n", "canary", 3, "must be a string or a non-empty list of strings"),
    ("canary: []\n", "canary", 3, "must be a string or a non-empty list of strings"),
    ("canary: {a: long-enough-1}\n", "canary", 3, "must be a string or a non-empty list"),
    ("canary:\n  - long-enough-1\n  - tiny\n", "canary[1]", 5, "must be a string of 8"),
    ("canary:\n  - long-enough-1\n  - 123456789\n", "canary[1]", 5, "must be a string of 8"),
]


@pytest.mark.parametrize(("text", "field", "line", "message"), BAD_CANARIES)
def test_it_rejects_a_bad_canary_without_repeating_it(tmp_path, text, field, line, message):
    problem = only_problem(write_pack(tmp_path, "id: demo\nversion: 1\n" + text))

    assert (problem.file, problem.field, problem.line) == ("manifest.yaml", field, line)
    assert message in problem.message
    for secret in ("short", "seven", "tiny", "123456789", "long-enough"):
        assert secret not in str(problem)


def test_too_many_canaries_are_refused(tmp_path):
    items = "".join(f"  - canary-number-{n}\n" for n in range(101))

    problem = only_problem(write_pack(tmp_path, f"id: demo\nversion: 1\ncanary:\n{items}"))

    assert problem.field == "canary" and "at most 100" in problem.message


def test_the_digest_covers_the_canaries(tmp_path):
    """Two uploads that differ only in their canary are different content (the canary is
    not in the stored manifest, so it must reach the digest another way)."""

    def digest(name: str, extra: str) -> str:
        return compile_pack(write_pack(tmp_path / name, "id: demo\nversion: 1\n" + extra)).digest

    plain = digest("plain", "")
    first = digest("first", "canary: first-canary-a\n")
    second = digest("second", "canary: second-canary-b\n")

    assert len({plain, first, second}) == 3
    assert first == digest("again", "canary: [first-canary-a]\n")


@pytest.mark.django_db
def test_a_stored_version_keeps_its_canary_sealed(tmp_path, client):
    from packs.services import pack_import_folder  # noqa: PLC0415 - needs Django
    from tests.conftest import make_user  # noqa: PLC0415

    folder = write_pack(tmp_path, "id: demo\nversion: 1\ncanary: SB-CANARY-7f3c2a9e\n")

    version = pack_import_folder(folder=folder).contract_version

    assert version.canaries == ["SB-CANARY-7f3c2a9e"]
    assert "canary" not in version.manifest
    client.force_login(make_user("boss", superuser=True))
    for url in ("/packs/demo/v1/", "/api/v1/packs/demo/versions/1/", "/api/v1/packs/demo/"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert b"7f3c2a9e" not in response.content, url
