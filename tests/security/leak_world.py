"""The world the leak suites attack: packs of all twelve families with a marker in every
sealed value and hidden file, users of every role, and runs scored by the real pipeline.

Built once per test module (``leak_world`` fixture) inside one transaction that is rolled
back at the module's end; each test runs in a savepoint on top of it. Besides an oracle run
and a null run, an ordinary agent run answers wrongly where the verifier's output is rich:
a code task whose tests print the expected value (JSON-, URL- and base64-encoded), a patch
whose test run prints the hidden test file, a terminal task whose checker prints the
expected state. The stored logs and details of those results then hold markers in forms the
scrubber does not know, which is what a careless view would let through.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.test import Client, override_settings

from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs import pipeline
from runs.bundle import parse_candidate_objects
from runs.models import Run
from runs.pipeline import score_results
from runs.services import (
    RunMetadata,
    run_add_candidates,
    run_create,
    run_submit,
    run_submit_reference,
)
from securebench_site.storage import pack_storages
from tests.conftest import make_user, mc_row, zip_folder
from tests.security.leak_markers import mark, plain_mark

ROLES = [
    "anonymous",
    "no role",
    "viewer",
    "submitter",
    "maintainer of this pack",
    "maintainer of another pack",
    "reviewer",
    "superuser",
]
PRIVILEGED_ROLES = ("maintainer of this pack", "reviewer", "superuser")
USERNAMES = {
    "no role": "no-role",
    "viewer": "viewer",
    "submitter": "submitter",
    "maintainer of this pack": "author",
    "maintainer of another pack": "other-maintainer",
    "reviewer": "reviewer",
    "superuser": "root",
}
HIDDEN_FILE_PATHS = (
    "tt/tests/test_outputs.py",
    "tt/run-tests.sh",
    "unreferenced.txt",
    "tt-rich/check.sh",
)
# The public repository of the rich repo_patch task. Its file names are public: the agent
# is shown them, and result details must show them too (the redaction finding).
PUBLIC_SOURCE = "calculator_core.py"
PUBLIC_TEST = "tests/test_calculator_core.py"
# A test file only the hidden test patch adds: sealed, so redacted wherever it is printed.
SEALED_TEST = "tests/sealed_only_check.py"


@dataclass
class LeakWorld:
    root: Path
    pack_folder: Path
    contract_version: ContractVersion
    users: dict[str, User]
    reference_runs: list[Run]  # oracle, null
    wrong_run: Run  # the submitter's ordinary run with wrong answers
    open_run: Run  # an unsubmitted run of another user

    @property
    def runs(self) -> list[Run]:
        return [*self.reference_runs, self.wrong_run, self.open_run]

    def client_for(self, role: str) -> Client:
        client = Client()
        if role != "anonymous":
            client.force_login(self.users[role])
        return client


# --- the pack ------------------------------------------------------------------------------


def marked_rows() -> list[dict[str, Any]]:
    return [*basic_rows(), *rich_rows(), *deferred_rows(), artifact_row()]


def basic_rows() -> list[dict[str, Any]]:
    return [
        {
            "id": "mc",
            "family": "multiple_choice",
            "input": {"question": "Pick one", "choices": ["a", "b"]},
            "assets": [{"path": "readme.txt"}],
            "eval": {"answer": mark("mc-answer")},
        },
        {
            "id": "sa",
            "family": "short_answer",
            "input": {"question": "How many?"},
            "eval": {"accepted_answers": [mark("sa-accepted"), 731904581], "tolerance": 0.000731},
        },
        {
            "id": "fr",
            "family": "free_response",
            "input": {"prompt": "Explain"},
            "eval": {
                "reference_answer": mark("fr-reference"),
                "rubric": {
                    "type": "contains_any",
                    "accepted_answers": [mark("fr-accepted")],
                    "rejected_answers": [mark("fr-rejected")],
                    "min_token_f1": 0.5,
                },
            },
        },
        {
            "id": "cc",
            "family": "code_completion",
            "input": {"prompt": "def f(): ...", "language": "python"},
            "eval": {
                "tests": {"source": "inline", "code": f"# {mark('cc-tests')}\nassert f()\n"},
                "canonical_solution": mark("cc-canonical"),
                "reference_solution": mark("cc-reference"),
            },
        },
        {
            "id": "rp",
            "family": "repo_patch",
            "input": {"repo": "demo", "base_commit": "a" * 40, "instructions": "Fix it"},
            "eval": {
                "tests": {
                    "source": "command",
                    "command": ["python3", "-m", "pytest", mark("rp-command")],
                    "test_patch": {"source": "inline", "patch": mark("rp-test-patch")},
                },
                "candidate_policy": {"allow_paths": [plain_mark("rp-allow")]},
                "gold_patch": mark("rp-gold"),
            },
        },
        {
            "id": "tt",
            "family": "terminal_task",
            "input": {"instructions": "Make the file"},
            "eval": {
                "checker": {"source": "pytest", "path": "tt/tests", "timeout_seconds": 30},
                "run_tests": {"path": "tt/run-tests.sh"},
                "expected_state": {"path": "out.txt", "content": mark("tt-expected")},
            },
        },
        {
            "id": "tt-command",
            "family": "terminal_task",
            "input": {"instructions": "Other form"},
            "eval": {"checker": {"command": ["sh", "-c", mark("tt-command")]}},
        },
    ]


CC_RICH_TESTS = """\
import base64, json, urllib.parse
EXPECTED = {expected!r}
print("expected, as JSON:", json.dumps(EXPECTED))
print("expected, URL-encoded:", urllib.parse.quote(EXPECTED), urllib.parse.quote_plus(EXPECTED))
print("expected, base64:", base64.b64encode(EXPECTED.encode()).decode())
assert answer() == EXPECTED, "wanted " + base64.b64encode(EXPECTED.encode()).decode()
"""

# The hidden test prints its own source (markers and all), both file names it was given,
# runs the public test and fails.
RP_SEALED_CHECK = """\
import sys
# {marker}
print(open(__file__, encoding="utf-8").read())
print("checked files:", sys.argv[1:])
print("sealed name:", {sealed_name!r})
sys.exit(1)
"""

TT_RICH_CHECK = """\
echo "checking out.txt against the expected state:"
cat <<'EXPECTED'
{marker}
EXPECTED
base64 <<'EXPECTED'
{marker}
EXPECTED
python3 -c 'import json, sys, urllib.parse; m = sys.stdin.read().strip(); \
print(json.dumps(m)); print(urllib.parse.quote_plus(m))' <<'EXPECTED'
{marker}
EXPECTED
exit 1
"""


def rich_rows() -> list[dict[str, Any]]:
    return [
        {
            "id": "cc-rich",
            "family": "code_completion",
            "input": {"prompt": "def answer():\n    '''Return the secret.'''\n"},
            "eval": {
                "tests": {
                    "source": "inline",
                    "code": CC_RICH_TESTS.format(expected=mark("cc-expected")),
                },
            },
            "metadata": {"entry_point": "answer"},
        },
        {
            "id": "rp-rich",
            "family": "repo_patch",
            "input": {
                "repo": "calc",
                "base_commit": "b" * 40,
                "instructions": f"add() in {PUBLIC_SOURCE} subtracts; make it add.",
            },
            "assets": [{"path": "calc-repo", "mount": "repo"}],
            "eval": {
                "tests": {
                    "source": "command",
                    "command": ["python3", SEALED_TEST, PUBLIC_TEST],
                    "workdir": "/workspace/repo",
                    "timeout_seconds": 60,
                    "test_patch": {"source": "inline", "patch": sealed_test_patch()},
                },
                "candidate_policy": {"allow_paths": [PUBLIC_SOURCE]},
                "gold_patch": mark("rp-rich-gold"),
            },
            "environment": {"workdir": "/workspace/repo", "timeout_seconds": 60},
        },
        {
            "id": "tt-rich",
            "family": "terminal_task",
            "input": {"instructions": "Write the right words to out.txt."},
            "eval": {
                "checker": {"source": "script", "path": "tt-rich/check.sh", "timeout_seconds": 30},
                "expected_state": {"path": "out.txt", "content": mark("tt-rich-expected")},
            },
            "environment": {"workdir": "/workspace", "timeout_seconds": 60},
        },
    ]


def sealed_test_patch() -> str:
    body = RP_SEALED_CHECK.format(marker=mark("rp-hidden-test"), sealed_name=SEALED_TEST)
    lines = body.splitlines()
    added = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{SEALED_TEST} b/{SEALED_TEST}\nnew file mode 100644\n"
        f"--- /dev/null\n+++ b/{SEALED_TEST}\n@@ -0,0 +1,{len(lines)} @@\n{added}"
    )


def deferred_rows() -> list[dict[str, Any]]:
    eval_keys = {
        "tool_call": ["initial_state", "expected_calls", "expected_final_state"],
        "browser_task": ["credentials", "success_check"],
        "desktop_task": ["success_check"],
        "multimodal_qa": ["answer", "rubric"],
        "preference_pair": ["preference", "rubric"],
        "invented_family": ["anything"],
    }
    return [
        {
            "id": family,
            "family": family,
            "input": {"prompt": f"a {family} task"},
            "eval": {key: {"value": mark(f"{family}-{key}")} for key in keys}
            | {"unlisted_key": mark(f"{family}-unlisted")},
        }
        for family, keys in eval_keys.items()
    ]


def artifact_row() -> dict[str, Any]:
    """artifact_task has a schema now (no unlisted keys): its reference files and rubric are
    sealed, inline, each with a marker."""
    return {
        "id": "artifact_task",
        "family": "artifact_task",
        "input": {"instructions": "an artifact_task task"},
        "eval": {
            "reference_artifact": {"report.txt": mark("artifact_task-reference_artifact")},
            "rubric": {"value": mark("artifact_task-rubric")},
        },
    }


CALC_SOURCE = "def add(a, b):\n    return a - b\n"
CALC_TEST = "from calculator_core import add\n\n\ndef test_add_zero():\n    assert add(2, 0) == 2\n"


def pack_files() -> dict[str, str]:
    return {
        "hidden/tt/tests/test_outputs.py": f"# {mark('tt-checker-file')}\n",
        "hidden/tt/run-tests.sh": f"echo '{mark('tt-run-tests')}'\n",
        "hidden/tt-rich/check.sh": TT_RICH_CHECK.format(marker=mark("tt-rich-checker")),
        "hidden/unreferenced.txt": mark("unreferenced-hidden-file"),
        "assets/readme.txt": "public asset\n",
        f"assets/calc-repo/{PUBLIC_SOURCE}": CALC_SOURCE,
        f"assets/calc-repo/{PUBLIC_TEST}": CALC_TEST,
    }


def write_pack(folder: Path, manifest: dict[str, Any], rows: list[dict[str, Any]],
               files: dict[str, str]) -> Path:  # fmt: skip
    folder.mkdir(parents=True)
    (folder / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (folder / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    for relpath, content in files.items():
        target = folder / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    return folder


# --- the wrong answers -----------------------------------------------------------------------


def wrong_patch(scratch: Path) -> str:
    """A real ``git diff`` of the public repository: add() now multiplies."""
    work = scratch / "calc-diff"
    work.mkdir()
    (work / PUBLIC_SOURCE).write_text(CALC_SOURCE)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=work, check=True)
    subprocess.run([*git, "add", "-A"], cwd=work, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=work, check=True)
    (work / PUBLIC_SOURCE).write_text("def add(a, b):\n    return a * b\n")
    diff = subprocess.run(
        [*git, "diff"], cwd=work, check=True, capture_output=True, text=True
    ).stdout
    shutil.rmtree(work)
    return diff


WRONG_CODE = "def answer():\n    return 'no'\n"


def wrong_candidates(scratch: Path) -> list[dict[str, Any]]:
    return [
        {"task_id": "mc", "candidate": {"kind": "text", "text": "Answer: a"}},
        {"task_id": "sa", "candidate": {"kind": "text", "text": "12"}},
        {"task_id": "fr", "candidate": {"kind": "text", "text": "Because."}},
        {"task_id": "cc-rich", "candidate": {"kind": "code", "code": WRONG_CODE}},
        {"task_id": "rp-rich", "candidate": {"kind": "patch", "patch": wrong_patch(scratch)}},
        {"task_id": "tt-rich", "candidate": {"kind": "workspace", "files": {"out.txt": "wrong\n"}}},
    ]  # fmt: skip


# --- building it ------------------------------------------------------------------------------


def data_settings(root: Path, pack_storage: dict[str, dict] | None = None) -> override_settings:
    """The world's own folders; its pack files in ``root`` unless ``pack_storage`` gives the
    ``pack_public`` and ``pack_sealed`` storages (buckets, say)."""
    return override_settings(
        # Module-scoped, so the suite's per-test settings do not reach here: the packs are
        # stored published (drafts are tests/packs/test_publish_gate.py's), with no checks.
        SECUREBENCH_PUBLISH_GATE=False,
        SECUREBENCH_HEALTH_ON_UPLOAD=False,
        UPLOAD_WORK_ROOT=root / "uploads",
        SECUREBENCH_BLOB_CACHE_DIR=root / "cache" / "blobs",
        STORAGES={
            "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
            **(pack_storage or pack_storages("local", root / "pack-files", None)),
        },
    )


def leak_world_fixture(
    django_db_blocker: Any, root: Path, pack_storage: dict[str, dict] | None = None
) -> Iterator[LeakWorld]:
    """Body of each module's ``leak_world`` fixture: build, yield, roll everything back."""
    settings_override = data_settings(root, pack_storage)
    settings_override.enable()
    try:
        with pytest.MonkeyPatch.context() as patch:
            # The pipeline's sandbox, as the pipeline tests choose it (bwrap unless CI's
            # Docker pass says otherwise), chosen afresh for this module.
            sandbox = os.environ.get("SECUREBENCH_PIPELINE_SANDBOX", "bwrap")
            patch.setenv("SECUREBENCH_SANDBOX", sandbox)
            patch.setattr(pipeline, "_worker_sandbox", None)
            with django_db_blocker.unblock(), transaction.atomic():
                yield build_world(root)
                transaction.set_rollback(True)
    finally:
        settings_override.disable()


def build_world(root: Path) -> LeakWorld:
    users = {
        role: make_user(name, *role_groups(role), superuser=role == "superuser")
        for role, name in USERNAMES.items()
    }
    pack_folder = write_pack(
        root / "leaky-pack",
        {"id": "leaky", "version": 1, "title": "Leak test pack"},
        marked_rows(),
        pack_files(),
    )
    upload_as(users["maintainer of this pack"], pack_folder)
    contract_version = ContractVersion.objects.get(pack__pack_id="leaky", version=1)
    # A second version whose sealed answers changed: the crawl reaches its diff against v1
    # (pack page, version page, the upload's landing), which must show digests only.
    upload_as(users["maintainer of this pack"], second_version(root))
    upload_evaluation_as(users["maintainer of this pack"], leaky_evaluation(root))
    other = write_pack(root / "other-pack", {"id": "other", "version": 1}, [mc_row("q")], {})
    other_version = pack_import_folder(folder=other).contract_version
    other_version.pack.maintainers.add(users["maintainer of another pack"])
    reference_runs = [
        run_submit_reference(
            contract_version=contract_version,
            origin=origin,
            metadata=RunMetadata(agent_name=f"{origin}-agent"),
            source="command",
        )[0]
        for origin in ("oracle", "null")
    ]
    wrong_run = run_create(
        contract_version=contract_version,
        metadata=RunMetadata(agent_name="wrong-agent"),
        source="api",
        user=users["submitter"],
    )
    run_add_candidates(wrong_run, parse_candidate_objects(wrong_candidates(root)))
    run_submit(wrong_run, user=users["submitter"])
    owner = make_user("run-owner", "submitter")
    open_run = run_create(
        contract_version=contract_version,
        metadata=RunMetadata(agent_name="open-agent"),
        source="api",
        user=owner,
    )
    score_every_queued_result([*reference_runs, wrong_run])
    cache.clear()  # the upload's throttle counts must not carry into the tests
    return LeakWorld(
        root, pack_folder, contract_version, users, reference_runs, wrong_run, open_run
    )


def second_version(root: Path) -> Path:
    rows = marked_rows()
    rows[0] = {**rows[0], "eval": {"answer": mark("mc-answer-v2")}}
    files = {**pack_files(), "hidden/unreferenced.txt": mark("unreferenced-hidden-file-v2")}
    return write_pack(
        root / "leaky-pack-v2",
        {"id": "leaky", "version": 2, "title": "Leak test pack", "description": "Second."},
        rows,
        files,
    )


def role_groups(role: str) -> tuple[str, ...]:
    groups = {
        "no role": (),
        "viewer": ("viewer",),
        "submitter": ("submitter",),
        "maintainer of this pack": ("pack maintainer",),
        "maintainer of another pack": ("pack maintainer",),
        "reviewer": ("reviewer",),
        "superuser": (),
    }
    return groups[role]


def upload_as(user: User, folder: Path) -> None:
    """Through the upload form, as a maintainer would: the uploader maintains the pack."""
    client = Client()
    client.force_login(user)
    archive = SimpleUploadedFile(f"{folder.name}.zip", zip_folder(folder))
    response = client.post("/upload/", {"archive": archive})
    assert response.status_code == 302, response.content.decode()[:2000]


EVALUATION_NAME = "leaky-eval"
# Shown to the pack's maintainers and reviewers without debug mode: no marker in it.
EVALUATION_PROGRAM = "import json\nprint(json.dumps({'metrics': {'accuracy': 1.0}}))\n"


def leaky_evaluation(root: Path) -> Path:
    """An uploaded evaluation of the leak pack whose sealed data carries markers."""
    folder = root / "leaky-evaluation"
    (folder / "program").mkdir(parents=True)
    (folder / "sealed").mkdir()
    (folder / "evaluation.yaml").write_text(
        yaml.safe_dump(
            {
                "id": EVALUATION_NAME,
                "version": 1,
                "title": "Leak test evaluation",
                "scores": [{"pack": "leaky", "versions": "all"}],
                "scope": "task",
                "metrics": [
                    {"name": "accuracy", "direction": "higher", "range": [0, 1], "primary": True}
                ],
                "program": {"command": ["python3", "/evaluation/program/score.py"]},
            },
            sort_keys=False,
        )
    )
    (folder / "program" / "score.py").write_text(EVALUATION_PROGRAM)
    (folder / "sealed" / "labels.txt").write_text(mark("evaluation-sealed-labels") + "\n")
    return folder


def upload_evaluation_as(user: User, folder: Path) -> None:
    client = Client()
    client.force_login(user)
    archive = SimpleUploadedFile(f"{folder.name}.zip", zip_folder(folder))
    response = client.post("/evaluations/upload/", {"archive": archive})
    assert response.status_code == 302, response.content.decode()[:2000]


def score_every_queued_result(runs: list[Run]) -> None:
    """Scored by the real pipeline code in this process: verdicts, details and logs stored."""
    for run in runs:
        evaluation = run.evaluations.get()
        for _attempt in range(3):  # our own transient faults are retried, as a worker would
            queued = list(evaluation.results.filter(status="queued").values_list("pk", flat=True))
            if queued:
                score_results(queued, worker="leak-test")
        statuses = list(evaluation.results.values_list("task__task_id", "status", "failure_reason"))
        evaluation.refresh_from_db()
        assert evaluation.is_done, statuses
