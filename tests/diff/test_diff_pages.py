"""The diff page, its API, the audited sealed before/after, the upload landing and the
leaderboard's version note, as viewers, reviewers and authors meet them."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from packs.models import ContractVersion
from runs.models import AuditAction, AuditEvent
from tests.conftest import make_user, zip_folder
from tests.diff.support import (
    NEW_SECRET,
    NEW_TESTS,
    OLD_SECRET,
    PROMPT,
    answer_row,
    base_rows,
    code_row,
    import_pack,
    manifest,
    two_versions,
)

pytestmark = pytest.mark.django_db
REASON = "checking what changed in the tests"


def compare_url(old: int = 1, new: int = 2, pack: str = "demo", **extra) -> str:
    query = "&".join([f"from={old}", f"to={new}", *(f"{k}={v}" for k, v in extra.items())])
    return f"{reverse('packs:compare', args=[pack])}?{query}"


def api_url(old: int = 1, new: int = 2) -> str:
    return f"{reverse('api-pack-diff', args=['demo'])}?from={old}&to={new}"


def reveal_url(task: str = "add", name: str = "tests") -> str:
    return f"{reverse('runs:diff-reveal', args=['demo'])}?from=1&to=2&task={task}&name={name}"


def signed_in(*roles: str, name: str = "someone") -> Client:
    client = Client()
    client.force_login(make_user(name, *roles))
    return client


def debug_on(client: Client) -> None:
    response = client.post(reverse("runs:debug-mode"), {"reason": REASON, "next": "/packs/"})
    assert response.status_code == 302


@pytest.fixture
def sealed_change(make_pack) -> tuple[ContractVersion, ContractVersion]:
    """v2 changes one task's hidden answer and another task's tests (evaluation inputs)."""
    return two_versions(
        make_pack,
        [code_row(tests=NEW_TESTS), answer_row(answers=[f"Lyon {NEW_SECRET}"]), base_rows()[2]],
    )


# --- the page, as a viewer ------------------------------------------------------------------------


def test_a_viewer_reads_a_breaking_verdict_with_digests_and_never_a_sealed_value(sealed_change):
    old, new = sealed_change
    viewer = signed_in("viewer")

    page = viewer.get(compare_url()).content.decode()

    assert "Scores of v1 and v2 are not comparable" in page
    assert "Rules applied" in page and 'id="rule-evaluation-lanes"' in page
    for task_id in ("add", "q1"):
        assert f">{task_id}</a>" in page
    tests_old = old.tasks.get(task_id="add").resources.get(name="tests").sha256
    tests_new = new.tasks.get(task_id="add").resources.get(name="tests").sha256
    assert tests_old[:12] in page and tests_new[:12] in page
    assert "&lt;redacted&gt;" in page
    assert OLD_SECRET not in page and NEW_SECRET not in page
    assert "Reveal before/after" not in page and "Switch debug mode on" not in page


def test_the_api_gives_the_same_diff_with_digests_and_no_sealed_value(sealed_change):
    api = APIClient()
    api.force_authenticate(make_user("reader", "viewer"))

    response = api.get(api_url())

    assert response.status_code == 200
    body = response.json()
    assert body["comparable"] is False and body["tasks_changed_count"] == 2
    add = next(t for t in body["tasks_changed"] if t["task_id"] == "add")
    tests = next(r for r in add["resources"] if r["name"] == "tests")
    assert tests["lane_before"] == "evaluation_inputs" and tests["impact"] == "breaking"
    assert tests["public_before"] is None and len(tests["sha256_after"]) == 64
    assert OLD_SECRET not in response.content.decode()
    assert NEW_SECRET not in response.content.decode()
    assert {rule["id"] for rule in body["rules"]} >= {"evaluation-lanes", "public-wording"}


def test_a_typo_fix_reads_comparable_with_the_change_shown_inline(make_pack):
    typo = PROMPT.replace("arguments", "argumnets", 1)
    two_versions(make_pack, base_rows(), old_rows=[code_row(prompt=typo), *base_rows()[1:]])

    page = signed_in("viewer").get(compare_url()).content.decode()

    assert "Scores of v1 and v2 are comparable" in page
    assert "✎ wording" in page
    assert "<del>argumnets.</del><ins>arguments.</ins>" in page


def test_the_same_content_under_a_new_number_says_no_changes(make_pack):
    two_versions(make_pack)

    page = signed_in("viewer").get(compare_url()).content.decode()

    assert "No changes: v1 and v2 hold the same contract, tasks, lanes and files." in page


def test_asking_for_one_version_twice_or_a_bad_number_is_a_clear_400(sealed_change):
    viewer = signed_in("viewer")

    same = viewer.get(compare_url(2, 2))
    bad = viewer.get(compare_url("one", 2))
    superscript = viewer.get(compare_url("%C2%B2", 2))

    assert same.status_code == 400
    assert "a version compared with itself has no changes" in same.content.decode()
    assert bad.status_code == 400 and "must be a version number" in bad.content.decode()
    assert superscript.status_code == 400


def test_an_unknown_version_or_pack_is_a_404(sealed_change):
    viewer = signed_in("viewer")

    assert viewer.get(compare_url(1, 9)).status_code == 404
    assert viewer.get(compare_url(pack="nope")).status_code == 404
    assert viewer.get(api_url(1, 9)).status_code == 404


def test_without_a_from_the_page_compares_with_the_version_before(sealed_change):
    viewer = signed_in("viewer")

    latest = viewer.get(reverse("packs:compare", args=["demo"])).content.decode()
    first = viewer.get(f"{reverse('packs:compare', args=['demo'])}?to=1").content.decode()

    assert "What changed: v1 → v2" in latest
    assert "v1 is the earliest version of demo" in first


def test_changed_tasks_come_fifty_to_a_page(make_pack):
    rows = [answer_row(f"q{i}", question=f"Question number {i}?") for i in range(60)]
    edited = [answer_row(f"q{i}", question=f"Question number {i}?!") for i in range(60)]
    import_pack(make_pack, 1, rows)
    import_pack(make_pack, 2, edited)
    viewer = signed_in("viewer")

    first = viewer.get(compare_url()).content.decode()
    second = viewer.get(compare_url(page=2)).content.decode()

    assert first.count('class="panel task-change"') == 50 and "1–50 of 60" in first
    assert second.count('class="panel task-change"') == 10 and ">q59</a>" in second


def test_the_pack_and_version_pages_link_to_compare_with_previous(sealed_change):
    viewer = signed_in("viewer")

    pack_page = viewer.get(reverse("packs:detail", args=["demo"])).content.decode()
    version_page = viewer.get(reverse("packs:version", args=["demo", 2])).content.decode()

    link = f'href="{reverse("packs:compare", args=["demo"])}?to=2"'
    assert link in pack_page and pack_page.count("compare with previous") == 1
    assert link in version_page


# --- sealed before/after: privileged, debug mode, audited ----------------------------------------


def test_a_viewer_never_gets_the_sealed_before_after(sealed_change):
    viewer = signed_in("viewer")

    assert viewer.get(reveal_url()).status_code == 404
    assert not AuditEvent.objects.exists()


def test_a_reviewer_needs_debug_mode_for_the_sealed_before_after(sealed_change):
    reviewer = signed_in("reviewer", name="reviewer")

    refused = reviewer.get(reveal_url())
    page = reviewer.get(compare_url()).content.decode()

    assert refused.status_code == 403
    assert OLD_SECRET not in refused.content.decode()
    assert "Switch debug mode on" in page and "Reveal before/after" not in page
    assert not AuditEvent.objects.filter(action=AuditAction.VIEW_DIFF).exists()


def test_in_debug_mode_a_reviewer_sees_both_sealed_values_and_each_read_is_audited(sealed_change):
    reviewer = signed_in("reviewer", name="reviewer")
    debug_on(reviewer)

    page = reviewer.get(compare_url()).content.decode()
    panel = reviewer.get(reveal_url(), HTTP_HX_REQUEST="true")

    assert "Reveal before/after" in page and 'hx-get="/privileged/packs/demo/diff/?' in page
    assert OLD_SECRET not in page  # the page itself still shows digests only
    text = panel.content.decode()
    assert panel.status_code == 200
    assert f"{OLD_SECRET}-tests" in text and f"{NEW_SECRET}-tests" in text
    events = AuditEvent.objects.filter(action=AuditAction.VIEW_DIFF).order_by("version")
    assert [(e.version, e.task_id, e.reason) for e in events] == [
        (1, "add", REASON),
        (2, "add", REASON),
    ]
    assert all(e.resource == "tests · v1→v2" and e.pack_id == "demo" for e in events)


def test_the_sealed_before_after_is_only_for_sealed_resources(sealed_change):
    reviewer = signed_in("reviewer", name="reviewer")
    debug_on(reviewer)

    assert reviewer.get(reveal_url(name="prompt")).status_code == 404
    assert reviewer.get(reveal_url(name="nothing")).status_code == 404
    assert not AuditEvent.objects.filter(action=AuditAction.VIEW_DIFF).exists()


# --- uploads land on the diff ------------------------------------------------------------------


def test_uploading_a_new_version_lands_on_what_changed(make_pack):
    author = make_user("author", "pack maintainer")
    client = Client()
    client.force_login(author)

    def upload(version: int, rows: list[dict]):
        folder = make_pack(manifest(version), rows)
        archive = SimpleUploadedFile("pack.zip", zip_folder(folder))
        return client.post(reverse("pack-upload"), {"archive": archive})

    first = upload(1, base_rows())
    second = upload(2, [code_row(), answer_row(answers=[f"Lyon {NEW_SECRET}"]), base_rows()[2]])

    assert first["Location"] == reverse("packs:version", args=["demo", 1])
    assert second["Location"] == compare_url(1, 2)
    page = client.get(second["Location"]).content.decode()
    assert "Stored version 2 of demo" in page
    assert "Scores of v1 and v2 are not comparable" in page and "✕ breaking" in page


def test_the_upload_api_answer_links_the_diff_for_a_new_version(make_pack):
    api = APIClient()
    api.force_authenticate(make_user("author", "pack maintainer"))

    def upload(version: int, rows: list[dict]):
        archive = SimpleUploadedFile("pack.zip", zip_folder(make_pack(manifest(version), rows)))
        return api.post(reverse("api-pack-upload"), {"archive": archive}, format="multipart")

    first = upload(1, base_rows()).json()
    second = upload(2, [code_row(tests=NEW_TESTS), *base_rows()[1:]]).json()

    assert first["previous_version"] is None and first["diff_url"] is None
    assert second["previous_version"] == 1
    assert second["diff_url"].endswith(api_url())
    assert second["compare_url"].endswith(compare_url())
    diff = api.get(second["diff_url"]).json()
    assert diff["comparable"] is False
    assert [t["task_id"] for t in diff["tasks_changed"]] == ["add"]


def test_the_api_refuses_a_missing_or_equal_version_with_a_400(sealed_change):
    api = APIClient()
    api.force_authenticate(make_user("reader", "viewer"))

    missing = api.get(reverse("api-pack-diff", args=["demo"]))
    same = api.get(api_url(2, 2))
    not_ascii = api.get(f"{reverse('api-pack-diff', args=['demo'])}?from=%C2%B2&to=2")
    past_the_end = api.get(f"{api_url()}&page=9")

    assert missing.status_code == 400 and "from" in missing.json()
    assert same.status_code == 400 and "to" in same.json()
    assert not_ascii.status_code == 400
    assert past_the_end.status_code == 404


# --- leaderboards --------------------------------------------------------------------------------


def test_a_leaderboard_offers_the_previous_board_only_when_scores_compare(make_pack):
    typo = PROMPT.replace("arguments", "argumnets", 1)
    import_pack(make_pack, 1, [code_row(prompt=typo), *base_rows()[1:]])
    import_pack(make_pack, 2, base_rows())
    import_pack(make_pack, 3, [code_row(tests=NEW_TESTS), *base_rows()[1:]])
    viewer = signed_in("viewer")

    second = viewer.get(reverse("runs:leaderboard", args=["demo", 2])).content.decode()
    third = viewer.get(reverse("runs:leaderboard", args=["demo", 3])).content.decode()
    first = viewer.get(reverse("runs:leaderboard", args=["demo", 1])).content.decode()

    assert "This board ranks runs of v2 only." in second
    assert f'href="{reverse("runs:leaderboard", args=["demo", 1])}"' in second
    assert "scores of v2 are not comparable" in third
    assert f'href="{reverse("runs:leaderboard", args=["demo", 2])}"' not in third
    assert 'id="version-lineage"' not in first


def test_the_diff_json_is_plain_json(sealed_change):
    api = APIClient()
    api.force_authenticate(make_user("reader", "viewer"))

    body = api.get(api_url()).content

    assert json.loads(body)["from_version"] == 1
