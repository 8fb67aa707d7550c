"""Publishing a draft: on a clean report by a click; on a failing, unfinished or missing one
only with a written reason, which is kept on the version and audited as an override."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from pack_health import services
from packs.models import PublishPolicy, VersionState
from runs.models import AuditAction, AuditEvent
from tests.conftest import make_user
from tests.pack_health.support import check_inline, clean_mc_rows, leaky_rows, store_draft

pytestmark = pytest.mark.django_db
REASON = "The leaked phrase is an example from the docs; v2 removes it."


@pytest.fixture
def maintainer():
    return make_user("author", "pack maintainer")


@pytest.fixture
def failing(make_pack, maintainer):
    version = store_draft(make_pack, {"id": "leaky", "version": 1}, leaky_rows())
    version.pack.maintainers.add(maintainer)
    assert check_inline(version).verdict == "failing"
    return version


def test_a_clean_report_publishes_on_a_click_without_an_audit_event(make_pack, maintainer):
    version = store_draft(
        make_pack, {"id": "quiz", "version": 1}, clean_mc_rows(), policy=PublishPolicy.MANUAL
    )
    version.pack.maintainers.add(maintainer)
    assert check_inline(version).verdict == "healthy"
    version.refresh_from_db()
    assert version.state == VersionState.DRAFT  # manual policy: healthy, not auto-published

    published = services.version_publish(version, maintainer)

    assert published.state == VersionState.PUBLISHED
    assert published.published_by == maintainer and published.publish_reason == ""
    assert not AuditEvent.objects.filter(action=AuditAction.PUBLISH_OVERRIDE).exists()


def test_a_failing_report_needs_a_written_reason(failing, maintainer):
    for blank in ("", "   \n "):
        with pytest.raises(services.PublishRefused, match="its health report is failing"):
            services.version_publish(failing, maintainer, blank)
    failing.refresh_from_db()
    assert failing.state == VersionState.DRAFT

    services.version_publish(failing, maintainer, REASON, ip_address="10.0.0.7")

    failing.refresh_from_db()
    assert failing.state == VersionState.PUBLISHED and failing.publish_reason == REASON
    event = AuditEvent.objects.get(action=AuditAction.PUBLISH_OVERRIDE)
    assert (event.user, event.reason, event.pack_id, event.version) == (
        maintainer,
        REASON,
        "leaky",
        1,
    )
    assert event.ip_address == "10.0.0.7" and "failing" in event.resource


def test_no_report_or_a_running_one_needs_a_reason_too(make_pack, maintainer):
    version = store_draft(make_pack, {"id": "quiz", "version": 1}, clean_mc_rows())
    version.pack.maintainers.add(maintainer)
    with pytest.raises(services.PublishRefused, match="no health report"):
        services.version_publish(version, maintainer)
    services.health_start(services.health_request(version).pk)
    with pytest.raises(services.PublishRefused, match="still running"):
        services.version_publish(version, maintainer)


@pytest.mark.parametrize("role", ["viewer", "submitter", "other maintainer"])
def test_only_maintainers_and_privileged_users_publish(failing, role):
    user = make_user(role.replace(" ", "-"), "pack maintainer" if "maintainer" in role else role)
    with pytest.raises(PermissionDenied):
        services.version_publish(failing, user, REASON)
    failing.refresh_from_db()
    assert failing.state == VersionState.DRAFT


def test_a_reviewer_may_publish_with_a_reason(failing):
    reviewer = make_user("reviewer", "reviewer")
    services.version_publish(failing, reviewer, REASON)
    failing.refresh_from_db()
    assert failing.state == VersionState.PUBLISHED and failing.published_by == reviewer


def test_the_page_form_refuses_without_a_reason_and_publishes_with_one(failing, maintainer, client):
    client.force_login(maintainer)
    url = "/packs/leaky/versions/1/health/publish/"

    refused = client.post(url, {"reason": ""})
    assert refused.status_code == 400
    assert "its health report is failing" in refused.content.decode()
    published = client.post(url, {"reason": REASON})

    assert published.status_code == 302 and published["Location"] == "/packs/leaky/v1/"
    failing.refresh_from_db()
    assert failing.publish_reason == REASON
    assert REASON in client.get("/packs/leaky/versions/1/health/").content.decode()
    overrides = AuditEvent.objects.filter(action=AuditAction.PUBLISH_OVERRIDE, user=maintainer)
    assert overrides.count() == 1


def test_the_api_refuses_without_a_reason_and_publishes_with_one(failing, maintainer, client):
    client.force_login(maintainer)
    url = "/api/v1/packs/leaky/versions/1/health/publish/"

    refused = client.post(url, {}, content_type="application/json")
    assert refused.status_code == 400 and "reason" in refused.json()
    answer = client.post(url, {"reason": REASON}, content_type="application/json")

    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["state"] == "published" and body["publish_reason"] == REASON
    assert body["report"]["badge"] == "failing"
    assert AuditEvent.objects.filter(action=AuditAction.PUBLISH_OVERRIDE).count() == 1


def test_check_again_queues_a_new_report_for_maintainers_only(failing, maintainer, client):
    viewer = make_user("viewer", "viewer")
    client.force_login(viewer)
    # A draft does not exist for a viewer.
    assert client.post("/packs/leaky/versions/1/health/check/").status_code == 404
    client.force_login(maintainer)

    response = client.post("/packs/leaky/versions/1/health/check/")

    assert response.status_code == 302
    assert list(failing.health_reports.values_list("number", "status")) == [
        (2, "queued"),
        (1, "done"),
    ]
    api = client.post("/api/v1/packs/leaky/versions/1/health/check/")
    assert api.status_code == 202 and api.json()["report"]["number"] == 2  # still the open one


@pytest.mark.parametrize("control", ["\x00", "\x1b[2J", "\x7f"])
def test_a_reason_holding_a_control_character_is_refused_on_the_page_and_the_api(
    failing, maintainer, client, control
):
    client.force_login(maintainer)
    reason = f"Known false positive{control} in the docs."

    page = client.post("/packs/leaky/versions/1/health/publish/", {"reason": reason})
    api = client.post(
        "/api/v1/packs/leaky/versions/1/health/publish/",
        {"reason": reason},
        content_type="application/json",
    )

    assert page.status_code == 400 and api.status_code == 400
    assert "without control characters" in page.content.decode()
    failing.refresh_from_db()
    assert failing.state == VersionState.DRAFT
    assert not AuditEvent.objects.filter(action=AuditAction.PUBLISH_OVERRIDE).exists()


def test_a_reason_on_several_lines_is_plain_text(failing, maintainer):
    reason = "The leaked phrase is an example.\r\n\tv2 removes it."

    services.version_publish(failing, maintainer, reason)

    failing.refresh_from_db()
    assert failing.publish_reason == reason.strip()
