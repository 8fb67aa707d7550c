"""POST attacks of the leak suites: every form found on a page and every POST operation of
the OpenAPI schema, sent by a role with plausible bodies (a new pack version that conflicts
with the sealed one, bundles with wrong answers, candidate batches for other users' runs,
re-evaluations, debug mode without the privilege). No body carries a marker, so any marker
in a response (or in the page a redirect leads to) is the site's own leak.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.conftest import zip_folder
from tests.security.leak_crawl import (
    PostForm,
    assert_no_leak,
    same_site,
    schema_operations,
)
from tests.security.leak_markers import MARK
from tests.security.leak_world import LeakWorld, wrong_candidates

# Forms whose POST would end the attack (signing out) or is the privileged switch itself,
# which the debug-mode attack sends last.
SKIPPED_FORMS = ("/accounts/logout", "/admin/logout", "/debug-mode/")
DEBUG_MODE_REASON = "leak test: trying to switch debug mode on"


def conflicting_pack(world: LeakWorld) -> bytes:
    """The leaky pack with every marker changed: same id and version, other content. The
    refusal must not explain the difference with the stored (sealed) values."""
    folder = world.root / "conflicting-pack"
    if not folder.exists():
        for source in world.pack_folder.rglob("*"):
            if source.is_file():
                target = folder / source.relative_to(world.pack_folder)
                target.parent.mkdir(parents=True, exist_ok=True)
                text = source.read_text(encoding="utf-8").replace(MARK, "CHANGED")
                target.write_text(text, encoding="utf-8")
    return zip_folder(folder)


def conflicting_evaluation(world: LeakWorld) -> bytes:
    """The leak evaluation with its sealed labels changed: same key, other content. The 409
    must not quote the stored labels."""
    source = world.root / "leaky-evaluation"
    folder = world.root / "conflicting-evaluation"
    if not folder.exists():
        for path in source.rglob("*"):
            if path.is_file():
                target = folder / path.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(path.read_text(encoding="utf-8").replace(MARK, "CHANGED"))
    return zip_folder(folder)


def bundle_text(world: LeakWorld) -> str:
    return "".join(json.dumps(line) + "\n" for line in wrong_candidates(world.root))


def upload(name: str, data: bytes | str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data.encode() if isinstance(data, str) else data)


def form_value(world: LeakWorld, name: str, default: str) -> Any:
    """A plausible value for a form field, by its name."""
    values: dict[str, Any] = {
        "archive": lambda: upload("leaky.zip", conflicting_pack(world)),
        "bundle": lambda: upload("run.jsonl", bundle_text(world)),
        "contract_version": lambda: str(world.contract_version.pk),
        "agent_name": lambda: "attacker",
        "reason": lambda: DEBUG_MODE_REASON,
        "username": lambda: "reviewer",
        "password": lambda: "not the password",
    }
    maker = values.get(name)
    return maker() if maker is not None else default


def post_form(client: Client, world: LeakWorld, form: PostForm) -> list[tuple[str, int]]:
    data = {}
    for name, default in form.fields:
        if name in ("manifest", "tasks", "files"):
            continue  # the archive field carries the pack
        data[name] = form_value(world, name, default)
    sent = []
    for headers in ({}, {"HX-Request": "true"}):
        response = client.post(form.url, data, headers=headers)
        sent.append((f"POST {form.url} htmx={bool(headers)}", response.status_code))
        assert_no_leak(f"POST {form.url}", response)
        follow_redirect(client, form.url, response)
        for value in data.values():
            if hasattr(value, "seek"):
                value.seek(0)
    return sent


def follow_redirect(client: Client, source: str, response: Any) -> None:
    """The page a POST leads to (a new run, a refusal) is checked too."""
    for header in ("Location", "HX-Redirect"):
        target = response.headers.get(header)
        if target and (url := same_site(source, target)) is not None:
            assert_no_leak(f"GET {url} after POST {source}", client.get(url))


def api_body(world: LeakWorld, operation: str) -> tuple[Any, str | None]:
    """(body, JSON or multipart) per operation id. A new POST operation fails the attack
    until it is given a body here: no endpoint escapes it unnoticed."""
    bodies: dict[str, tuple[Any, str | None]] = {
        "runs_create": ({"pack": "leaky", "version": 1, "agent_name": "attacker"}, "json"),
        "run_candidates_add": ({"candidates": wrong_candidates(world.root)}, "json"),
        "run_submit": (None, None),
        "run_reevaluate": (None, None),
        "run_bundle_submit": (
            {
                "pack": "leaky",
                "version": "1",
                "agent_name": "attacker",
                "bundle": upload("run.jsonl", bundle_text(world)),
            },
            "multipart",
        ),
        "health_check_again": (None, None),
        "health_publish": ({"reason": "attacker publishes"}, "json"),
        "uploads_create": (
            {"archive": upload("leaky.zip", conflicting_pack(world))},
            "multipart",
        ),
        # A multipart artifact for the world's artifact task (its run id in the URL).
        "run_artifacts_add": (
            {"task_id": "artifact_task", "file:report.txt": upload("report.txt", "wrong\n")},
            "multipart",
        ),
        "evaluations_create": (
            {"archive": upload("leaky-eval.zip", conflicting_evaluation(world))},
            "multipart",
        ),
    }
    assert operation in bodies, f"no attack body for POST operation {operation!r}"
    return bodies[operation]


def post_api(client: Client, world: LeakWorld) -> list[tuple[str, int]]:
    sent = []
    for operation, url in schema_operations(world, "post"):
        body, kind = api_body(world, operation)
        if kind == "json":
            response = client.post(url, json.dumps(body), content_type="application/json")
        elif kind == "multipart":
            response = client.post(url, body)
        else:
            response = client.post(url)
        sent.append((f"POST {url} ({operation})", response.status_code))
        assert_no_leak(f"POST {url} ({operation})", response)
        follow_redirect(client, url, response)
    return sent


def post_attack(
    client: Client, world: LeakWorld, forms: dict[str, PostForm]
) -> list[tuple[str, int]]:
    """Every form the role's crawl found, then every POST operation of the API."""
    sent = []
    for url, form in sorted(forms.items()):
        if url.startswith(SKIPPED_FORMS):
            continue
        sent += post_form(client, world, form)
    sent += post_api(client, world)
    return sent


def debug_mode_attempt(client: Client) -> int:
    response = client.post("/debug-mode/", {"reason": DEBUG_MODE_REASON, "next": "/packs/"})
    assert_no_leak("POST /debug-mode/", response)
    return response.status_code


def sealed_logs_present(world: LeakWorld) -> dict[str, str]:
    """The wrong run's stored logs and details, per task: the material a leak would show."""
    results = world.wrong_run.evaluations.get().results.select_related("task")
    return {
        result.task.task_id: "\n".join(
            [result.stdout, result.stderr, json.dumps(result.details, ensure_ascii=False)]
        )
        for result in results
    }
