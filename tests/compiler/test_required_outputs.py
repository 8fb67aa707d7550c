"""A contract's required_outputs written as objects: each fault named by file, line and field,
and each schema checked as a Draft 2020-12 JSON Schema whose references stay inside it."""

from __future__ import annotations

import pytest

from packs.compiler import compile_pack
from tests.compiler.test_manifest import only_problem, write_pack

pytestmark = pytest.mark.database_independent

HEAD = "id: demo\nversion: 1\ncontract:\n  required_outputs:\n"


def manifest(*entries: str) -> str:
    return HEAD + "".join(entries)


GOOD = manifest(
    "    - run_manifest.json\n",
    "    - path: predictions.jsonl\n",
    "      format: jsonl\n",
    "      max_bytes: 1000000\n",
    "      purpose: evaluation\n",
    "      schema:\n",
    "        type: object\n",
    "        required: [id]\n",
    "        properties: {id: {$ref: '#/$defs/id'}}\n",
    "        $defs: {id: {type: string}}\n",
    "    - {path: traces.jsonl, optional: true, purpose: audit}\n",
)


def test_strings_and_objects_compile_and_the_contract_keeps_them_as_written(tmp_path):
    pack = compile_pack(write_pack(tmp_path, GOOD))

    outputs = pack.manifest.contract["required_outputs"]
    assert outputs[0] == "run_manifest.json"
    assert outputs[1]["schema"]["$defs"] == {"id": {"type": "string"}}
    assert outputs[2] == {"path": "traces.jsonl", "optional": True, "purpose": "audit"}


BAD = [
    # (entry lines, field, line of the field, message part)
    ("    - {format: json}\n", "contract.required_outputs[0].path", 5, "is required"),
    ("    - {path: a.json, format: yaml}\n", "contract.required_outputs[0].format", 5, "one of"),
    ("    - {path: a.json, max_bytes: 0}\n", "contract.required_outputs[0].max_bytes", 5,
     "positive integer"),
    ("    - {path: a.json, optional: 'no'}\n", "contract.required_outputs[0].optional", 5,
     "boolean"),
    ("    - {path: a.json, purpose: fun}\n", "contract.required_outputs[0].purpose", 5, "one of"),
    ("    - {path: a.json, mode: 644}\n", "contract.required_outputs[0].mode", 5,
     "is not a key of a required output"),
    ("    - {path: a.bin, schema: {type: object}}\n", "contract.required_outputs[0].schema", 5,
     "applies to json or jsonl outputs only"),
    ("    - {path: a.json, schema: [1]}\n", "contract.required_outputs[0].schema", 5,
     "must be a JSON Schema object"),
]  # fmt: skip


@pytest.mark.parametrize(("entry", "field", "line", "message"), BAD)
def test_a_bad_output_object_is_named_by_file_line_and_field(tmp_path, entry, field, line, message):
    problem = only_problem(write_pack(tmp_path, manifest("    - ok.txt\n", entry)))

    # The bad entry is the second one here: index 1, on line 6.
    assert problem.file == "manifest.yaml"
    assert problem.field == field.replace("[0]", "[1]")
    assert problem.line == line + 1
    assert message in problem.message


def test_an_invalid_schema_names_the_field_inside_it(tmp_path):
    text = manifest(
        "    - path: predictions.jsonl\n",
        "      schema:\n",
        "        type: object\n",
        "        properties:\n",
        "          answer:\n",
        "            type: integr\n",
    )

    problem = only_problem(write_pack(tmp_path, text))

    assert problem.file == "manifest.yaml"
    assert problem.field == "contract.required_outputs[0].schema.properties.answer.type"
    assert problem.line == 10
    assert problem.message.startswith("is not a valid JSON Schema (Draft 2020-12): 'integr'")
    assert str(problem).startswith(
        "manifest.yaml, line 10, field contract.required_outputs[0].schema.properties.answer.type"
    )


def test_a_schema_may_not_fetch_anything(tmp_path):
    text = manifest(
        "    - path: a.json\n",
        "      schema: {$ref: 'https://example.com/schema.json'}\n",
    )

    problem = only_problem(write_pack(tmp_path, text))

    assert problem.field == "contract.required_outputs[0].schema.$ref"
    assert problem.line == 6
    assert "no schema is fetched" in problem.message


def test_a_reference_must_point_somewhere_in_the_schema(tmp_path):
    text = manifest(
        "    - path: a.json\n",
        "      schema: {properties: {x: {$ref: '#/$defs/missing'}}}\n",
    )

    problem = only_problem(write_pack(tmp_path, text))

    assert problem.field == "contract.required_outputs[0].schema.properties.x.$ref"
    assert "#/$defs/missing points to nothing in this schema" in problem.message
