"""No page, partial, API response, download or POST answer shows a non-public value to an
unprivileged user, in any encoding, and no such request even reads one.

Every eval field and every hidden file of packs of all twelve families carries a marker
(tests/security/leak_world.py); the packs go in through the upload form; an oracle run, a
null run and an ordinary run with wrong answers (whose verifier output prints the expected
values, the hidden test and the expected state) are scored by the real pipeline. Then, as
each role with debug mode off, a crawler follows every link, htmx partial and API URL it can
find, posts every form and every POST operation of the API, and searches each response for
the markers: literal, HTML-, JSON-, URL- and base64-encoded. Meanwhile a probe watches the
sealed-value table and the sealed file root (tests/security/sealed_probe.py): not one read.
With debug mode on, a reviewer's crawl reaches the privileged panels: there every marker
shows, every sealed read went through the audited accessor, and every look was recorded.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.test import Client

from packs.models import SealedValue
from runs.models import AuditEvent
from tests.security.leak_crawl import assert_no_leak, crawl, response_text, schema_get_urls
from tests.security.leak_markers import LABELS, MARK, encoded_forms, labels_in, mark
from tests.security.leak_posts import debug_mode_attempt, post_attack, sealed_logs_present
from tests.security.leak_world import (
    HIDDEN_FILE_PATHS,
    PRIVILEGED_ROLES,
    PUBLIC_SOURCE,
    PUBLIC_TEST,
    ROLES,
    SEALED_TEST,
    LeakWorld,
    leak_world_fixture,
    marked_rows,
)
from tests.security.sealed_probe import EVALUATOR, PRIVILEGED, PROGRAM, describe, sealed_probe

pytestmark = pytest.mark.django_db
REASON = "leak test: checking the privileged panels"


@pytest.fixture(scope="module")
def leak_world(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LeakWorld]:
    yield from leak_world_fixture(django_db_blocker, tmp_path_factory.mktemp("leak-world"))


@pytest.fixture(autouse=True)
def isolated_data_dir(leak_world):
    # The module's world keeps its own pack-file roots for every test of the module, and
    # each role's POSTs start with fresh throttle counts.
    cache.clear()
    yield leak_world.root
    cache.clear()


def test_the_marked_values_and_the_rich_verifier_output_really_are_stored(leak_world):
    sealed = json.dumps(list(SealedValue.objects.values_list("value", flat=True)))
    assert sealed.count(MARK) >= 25
    assert leak_world.contract_version.task_count == len(marked_rows())
    # The wrong run's stored output holds markers in forms the scrubber does not know:
    # this is what a careless view would let through.
    logs = sealed_logs_present(leak_world)
    cc_expected = encoded_forms(mark("cc-expected"))
    assert any(form in logs["cc-rich"] for form in cc_expected["base64"]), logs["cc-rich"]
    assert any(form in logs["cc-rich"] for form in cc_expected["json-escaped"])
    assert any(form in logs["cc-rich"] for form in cc_expected["url-encoded"])
    assert mark("rp-hidden-test") in logs["rp-rich"], logs["rp-rich"]
    checker = encoded_forms(mark("tt-rich-checker"))
    assert mark("tt-rich-checker") in logs["tt-rich"], logs["tt-rich"]
    assert any(form in logs["tt-rich"] for form in checker["base64"])
    assert any(form in logs["tt-rich"] for form in checker["json-escaped"])


@pytest.mark.parametrize("role", ROLES)
def test_no_request_of_any_role_shows_or_reads_a_sealed_value(leak_world, role):
    client = leak_world.client_for(role)

    with sealed_probe() as probe:
        seen = crawl(client, schema_get_urls(leak_world))
        posted = post_attack(client, leak_world, seen.forms)
        switched = debug_mode_attempt(client)

    # Not one statement on the sealed-value table, not one open under the sealed root,
    # not one call of the accessor: no unprivileged path reaches sealed data at all. The
    # uploaded evaluation's program (in the sealed store, not sealed data) is read for its
    # pack's maintainers and reviewers only, by its own reader.
    program_reads = probe.by_path(PROGRAM)
    assert [read for read in probe.reads if read.path != PROGRAM] == [], describe(probe.reads)
    assert bool(program_reads) == (role in PRIVILEGED_ROLES), (role, describe(program_reads))
    assert probe.accessor_calls == []
    statuses = [*seen.statuses.values(), *(status for _url, status in posted)]
    assert all(status < 500 for status in statuses), [p for p in posted if p[1] >= 500]
    # Debug mode: on for the privileged (and for a maintainer of another pack, privileged
    # there only), refused to the rest; whoever got it, this pack's panels stay shut.
    expected_switch = {"anonymous": 302, "no role": 403, "viewer": 403, "submitter": 403}
    assert switched == expected_switch.get(role, 302), (role, switched)
    if role not in PRIVILEGED_ROLES:
        assert_privileged_urls_stay_shut(client, leak_world, role)
    if role in ("anonymous", "no role"):
        # Nothing but the sign-in page (anonymous) or 403s (an account without a role).
        assert not any("/packs/leaky/" in url and s == 200 for url, s in seen.statuses.items())
        return
    assert_the_crawl_reached_everything(leak_world, seen.statuses)
    # The forms of the role's pages were found and sent, and every POST operation too.
    if role in ("submitter", "superuser"):
        assert any(url.startswith("POST /runs/submit/") for url, _status in posted)
    if role in ("maintainer of this pack", "superuser"):
        assert any(url.startswith("POST /upload/") for url, _status in posted)
    for operation in ("runs_create", "run_candidates_add", "run_bundle_submit", "uploads_create"):
        assert any(f"({operation})" in url for url, _status in posted), operation


def assert_the_crawl_reached_everything(world: LeakWorld, seen: dict[str, int]) -> None:
    task_pages = [url for url in seen if "/packs/leaky/v1/tasks/" in url]
    assert len(task_pages) >= len(marked_rows()), "the crawler must reach every task page"
    assert any("/api/v1/packs/leaky/versions/1/tasks/" in url for url in seen)
    assert any("/files/readme.txt" in url for url in seen)
    assert seen.get("/evaluations/leaky-eval/v1/") == 200, "the evaluation page was not crawled"
    assert seen.get("/api/v1/evaluations/leaky-eval/1/") == 200
    bundle = "/api/v1/packs/leaky/versions/1/agent-bundle/"
    assert seen.get(bundle) == 200, "the agent bundle was not crawled"
    for path in HIDDEN_FILE_PATHS:
        assert seen[f"/api/v1/packs/leaky/versions/1/files/{path}"] == 404
    for run in [*world.reference_runs, world.wrong_run]:
        result_pages = [url for url in seen if url.startswith(f"/runs/{run.pk}/results/")]
        assert len(result_pages) >= len(marked_rows()), "the crawler must reach every result"
        assert f"/api/v1/runs/{run.pk}/evaluations/1/results/" in seen


def privileged_urls(world: LeakWorld) -> list[str]:
    """One URL of each privileged panel, on the results that hold the richest output."""
    pack = "/privileged/packs/leaky/v1"
    urls = [f"{pack}/files/", f"{pack}/file/?path=tt-rich/check.sh"]
    urls += [f"{pack}/resource/?task=cc-rich&name=tests", f"{pack}/resource/?task=mc&name=answer"]
    urls.append("/privileged/evaluations/leaky-eval/v1/file/?path=labels.txt")
    for result in world.wrong_run.evaluations.get().results.filter(
        task__task_id__in=["cc-rich", "rp-rich", "tt-rich"]
    ):
        for part in ("logs", "details", "candidate"):
            urls.append(f"/runs/{world.wrong_run.pk}/results/{result.pk}/privileged/{part}/")
    return urls


def assert_privileged_urls_stay_shut(client: Client, world: LeakWorld, role: str) -> None:
    for url in privileged_urls(world):
        for headers in ({}, {"HX-Request": "true"}):
            response = client.get(url, headers=headers)
            assert response.status_code in (302, 403, 404), (role, url, response.status_code)
            assert_no_leak(f"GET {url}", response)


def reviewer_in_debug_mode(world: LeakWorld) -> Client:
    client = world.client_for("reviewer")
    response = client.post("/debug-mode/", {"reason": REASON, "next": "/packs/"})
    assert response.status_code == 302, response.content.decode()[:2000]
    return client


def shown_text(bodies: dict[str, str]) -> str:
    # Highlighted code splits a marker into tokens: read the text, as the reviewer does.
    return html.unescape(re.sub(r"<[^>]+>", "", "\n".join(bodies.values())))


def test_a_reviewer_in_debug_mode_sees_every_marker_through_the_audited_accessor_only(
    leak_world,
):
    client = reviewer_in_debug_mode(leak_world)
    reviewer = leak_world.users["reviewer"]

    with sealed_probe() as probe:
        seen = crawl(client, expect_markers=True)

    assert set(LABELS) <= labels_in(shown_text(seen.bodies))
    privileged = [url for url in seen.statuses if "/privileged/" in url]
    assert any("/resource/" in url for url in privileged)
    assert any("/file/" in url for url in privileged)
    assert any(url.endswith("/privileged/logs/") for url in privileged)
    assert any(url.endswith("/privileged/candidate/") for url in privileged)
    assert any("/privileged/packs/leaky/diff/" in url for url in privileged)
    assert all(status < 500 for status in seen.statuses.values())
    # Every sealed read happened inside the accessor, none in the evaluator's read or
    # anywhere else, and each accessor call left its audit record.
    assert probe.reads, "the privileged panels read sealed values"
    sealed_reads = [read for read in probe.reads if read.path != PROGRAM]
    assert probe.by_path(PRIVILEGED) == sealed_reads, describe(probe.unattributed())
    assert any("/privileged/evaluations/leaky-eval/" in url for url in privileged)
    assert not probe.by_path(EVALUATOR)
    events = AuditEvent.objects.filter(user=reviewer)
    sealed_events = events.filter(
        action__in=["view_resource", "view_file", "list_files", "view_diff"]
    )
    assert sealed_events.count() == len(probe.accessor_calls) > 0
    assert events.filter(action="debug_mode_on").count() == 1
    assert events.filter(action="view_logs").exists() and events.filter(action="view_candidate")
    assert events.exclude(reason=REASON).count() == 0
    assert set(events.values_list("ip_address", flat=True)) == {"127.0.0.1"}

    # The same URLs as the reviewer after switching debug mode off: never a 200, no marker.
    assert client.post("/debug-mode/off/").status_code == 302
    for url in privileged:
        response = client.get(url)
        assert response.status_code in (302, 403, 404), (url, response.status_code)
        assert_no_leak(f"GET {url} (debug mode off)", response)


def result_panel(client: Client, world: LeakWorld, task_id: str, part: str) -> str:
    result = world.wrong_run.evaluations.get().results.get(task__task_id=task_id)
    url = f"/runs/{world.wrong_run.pk}/results/{result.pk}/privileged/{part}/"
    response = client.get(url, headers={"HX-Request": "true"})
    assert response.status_code == 200, response_text(response)[:2000]
    return shown_text({url: response_text(response)})


def test_result_details_show_public_file_names_and_redact_sealed_ones(leak_world):
    # The allow_paths entry and the public test file are evaluation inputs the agent was
    # shown (files of the public repository); the hidden test's name is sealed only.
    client = reviewer_in_debug_mode(leak_world)

    details = result_panel(client, leak_world, "rp-rich", "details")
    logs = result_panel(client, leak_world, "rp-rich", "logs")

    assert PUBLIC_SOURCE in details, details
    assert PUBLIC_TEST in logs, logs
    assert SEALED_TEST not in logs and SEALED_TEST not in details
    assert "<redacted>" in logs
