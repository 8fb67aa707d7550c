"""Who sees what of a health report: everyone who may see the version sees its badge and
counts; the pack's maintainers and privileged users see the per-task findings; sealed evidence
(here the leaked value) only in debug mode, one finding at a time, each view audited."""

from __future__ import annotations

import pytest

from pack_health import services
from runs.models import AuditAction, AuditEvent
from tests.conftest import make_user
from tests.pack_health.support import LEAKED, check_inline, leaky_rows, store_draft

pytestmark = pytest.mark.django_db
REPORT = "/packs/leaky/versions/1/health/"
API = "/api/v1/packs/leaky/versions/1/health/"
# Public-safe text of the leak finding: shown to maintainers, never to viewers.
FINDING_CODE = "reference_in_public"


@pytest.fixture
def maintainer():
    return make_user("author", "pack maintainer")


@pytest.fixture
def version(make_pack, maintainer):
    version = store_draft(make_pack, {"id": "leaky", "version": 1}, leaky_rows())
    version.pack.maintainers.add(maintainer)
    report = check_inline(version)
    assert report.findings.filter(code=FINDING_CODE, sealed_evidence__value=LEAKED).exists()
    return version


def evidence_url(version) -> str:
    finding = version.health_reports.get().findings.get(code=FINDING_CODE)
    return f"/privileged/packs/leaky/v1/health/1/findings/{finding.pk}/"


def test_a_draft_report_does_not_exist_for_a_viewer(version, client):
    client.force_login(make_user("viewer", "viewer"))
    for url in (REPORT, API, evidence_url(version)):
        assert client.get(url).status_code == 404, url


def test_a_viewer_sees_the_badge_and_counts_only(version, maintainer, client):
    services.version_publish(version, maintainer, "published to show its report")
    client.force_login(make_user("viewer", "viewer"))

    page = client.get(REPORT).content.decode()
    panel = client.get("/packs/leaky/v1/").content.decode()
    api = client.get(API).json()

    for html in (page, panel):
        assert "✗ failing" in html and "Leak audit" in html
        assert FINDING_CODE not in html and LEAKED not in html
    assert api["report"]["badge"] == "failing" and api["report"]["counts"]["leak"]["failing"] == 1
    assert "findings" not in api["report"]
    assert client.get(evidence_url(version)).status_code == 404


def test_a_maintainer_sees_findings_but_sealed_evidence_only_in_debug_mode(
    version, maintainer, client
):
    client.force_login(maintainer)

    page = client.get(REPORT).content.decode()
    panel = client.get("/packs/leaky/v1/").content.decode()
    api = client.get(API).json()
    closed = client.get(evidence_url(version))

    for html in (page, panel):
        assert FINDING_CODE in html and "appears whole in public data" in html
        assert LEAKED not in html and "Reveal evidence" not in html
    assert [f["code"] for f in api["report"]["findings"]] == [FINDING_CODE]
    assert LEAKED not in str(api)
    assert closed.status_code == 403
    assert not AuditEvent.objects.filter(action=AuditAction.VIEW_HEALTH_EVIDENCE).exists()


def test_debug_mode_reveals_the_evidence_and_records_each_view(version, maintainer, client):
    client.force_login(maintainer)
    client.post("/debug-mode/", {"reason": "reading the leak finding", "next": "/"})

    page = client.get(REPORT).content.decode()
    assert "Reveal evidence" in page and LEAKED not in page
    revealed = client.get(evidence_url(version), headers={"HX-Request": "true"})

    assert revealed.status_code == 200 and LEAKED in revealed.content.decode()
    event = AuditEvent.objects.get(action=AuditAction.VIEW_HEALTH_EVIDENCE)
    assert (event.user, event.reason, event.pack_id, event.task_id) == (
        maintainer,
        "reading the leak finding",
        "leaky",
        "leaky",
    )


def test_a_maintainer_of_another_pack_gets_nothing(version, client):
    other = make_user("other", "pack maintainer")
    client.force_login(other)
    client.post("/debug-mode/", {"reason": "curious", "next": "/"})
    for url in (REPORT, API, evidence_url(version)):
        assert client.get(url).status_code == 404, url
