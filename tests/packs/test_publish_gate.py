"""The publish gate: a draft version exists only for its pack's maintainers and privileged
users (404 for everyone else, on every page, API answer and download, and in every list), and
no run targets it but its own health checks."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils.html import format_html
from rest_framework.test import APIClient

from packs import hooks
from packs.models import ContractVersion, Pack, PublishPolicy, VersionState
from packs.services import pack_import_folder
from runs.models import Run, RunSource
from runs.services import RunMetadata, VersionIsDraft, run_create
from tests.conftest import make_user, mc_row

pytestmark = pytest.mark.django_db

DRAFT_REFUSAL = (
    "version 2 of gate is a draft: it is offered to agents once its health checks pass and it "
    "is published"
)


def import_version(make_pack, pack_id: str, version: int) -> ContractVersion:
    row = mc_row("q1")
    row["assets"] = [{"path": "data"}]
    folder = make_pack(
        {"id": pack_id, "version": version, "title": f"{pack_id} pack"},
        [row, mc_row("q2")],
        files={"assets/data/a.csv": f"x,y\n{version},2\n"},
    )
    return pack_import_folder(folder=folder).contract_version


def make_draft(cv: ContractVersion) -> ContractVersion:
    ContractVersion.objects.filter(pk=cv.pk).update(state=VersionState.DRAFT, published_at=None)
    cv.refresh_from_db()
    return cv


@pytest.fixture
def published(make_pack) -> ContractVersion:
    """gate v1, published (the suite stores versions without the gate; see below for it on)."""
    return import_version(make_pack, "gate", 1)


@pytest.fixture
def draft(make_pack, published) -> ContractVersion:
    """gate v2, a draft above the published v1."""
    return make_draft(import_version(make_pack, "gate", 2))


@pytest.fixture
def fresh(make_pack) -> ContractVersion:
    """A pack whose only version is a draft."""
    return make_draft(import_version(make_pack, "fresh", 1))


@pytest.fixture
def maintainer(draft, fresh) -> User:
    user = make_user("keeper", "pack maintainer", "submitter")
    for pack in Pack.objects.all():
        pack.maintainers.add(user)
    return user


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def viewer() -> Client:
    # A submitter: may browse and open runs, maintains nothing, holds no privilege.
    return signed_in(make_user("someone", "submitter"))


def reviewer() -> Client:
    return signed_in(make_user("checker", "reviewer"))


# Every page, API view and download that names a version; ?from/?to for the diffs.
DRAFT_URLS: list[tuple[str, list[Any], str]] = [
    ("packs:version", ["gate", 2], ""),
    ("packs:task", ["gate", 2, "q1"], ""),
    ("packs:public-file", ["gate", 2, "data/a.csv"], ""),
    ("packs:compare", ["gate"], "?from=1&to=2"),
    ("packs:compare", ["gate"], "?to=2"),
    ("packs:compare", ["gate"], "?from=2&to=1"),
    ("runs:leaderboard", ["gate", 2], ""),
    ("api-version", ["gate", 2], ""),
    ("api-tasks", ["gate", 2], ""),
    ("api-public-file", ["gate", 2, "data/a.csv"], ""),
    ("api-agent-bundle", ["gate", 2], ""),
    ("api-pack-diff", ["gate"], "?from=1&to=2"),
    ("packs:detail", ["fresh"], ""),
    ("packs:version", ["fresh", 1], ""),
    ("packs:compare", ["fresh"], ""),
    ("api-pack", ["fresh"], ""),
    ("api-agent-bundle", ["fresh", 1], ""),
]


def url_of(name: str, args: list[Any], query: str) -> str:
    return reverse(name, args=args) + query


@pytest.mark.parametrize(("name", "args", "query"), DRAFT_URLS)
def test_a_draft_is_not_found_for_a_plain_user(draft, fresh, name, args, query):
    response = viewer().get(url_of(name, args, query))

    assert response.status_code == 404


@pytest.mark.parametrize(("name", "args", "query"), DRAFT_URLS)
def test_a_draft_is_there_for_its_maintainers_and_privileged_users(
    draft, fresh, maintainer, name, args, query
):
    clients = {
        "maintainer": signed_in(maintainer),
        "reviewer": reviewer(),
        "superuser": signed_in(make_user("root", superuser=True)),
    }

    statuses = {who: c.get(url_of(name, args, query)).status_code for who, c in clients.items()}

    assert statuses == {"maintainer": 200, "reviewer": 200, "superuser": 200}


def test_the_privileged_panels_of_a_draft_are_not_found_for_a_plain_user(draft):
    # They check the privilege on the pack (which covers drafts) before anything else.
    client = viewer()
    urls = [
        reverse("runs:sealed-files", args=["gate", 2]),
        reverse("runs:reveal-resource", args=["gate", 2]) + "?task=q1&name=answer",
        reverse("runs:diff-reveal", args=["gate"]) + "?from=1&to=2&task=q1&name=answer",
    ]

    assert [client.get(url).status_code for url in urls] == [404, 404, 404]


def test_the_episode_run_form_of_a_draft_is_not_found_for_a_plain_user(draft):
    client = viewer()

    assert client.get(reverse("episodes:open", args=["gate", 2])).status_code == 404
    posted = client.post(reverse("episodes:open", args=["gate", 2]), {"agent_name": "a"})
    assert posted.status_code == 404
    assert not Run.objects.exists()


def test_the_published_version_stays_open_to_everyone(draft):
    client = viewer()

    for name, args in [("packs:version", ["gate", 1]), ("api-agent-bundle", ["gate", 1])]:
        assert client.get(reverse(name, args=args)).status_code == 200


def test_the_version_page_shows_a_drafts_state_to_those_who_see_it(draft, maintainer):
    body = signed_in(maintainer).get(reverse("packs:version", args=["gate", 2])).content.decode()
    published_body = viewer().get(reverse("packs:version", args=["gate", 1])).content.decode()

    assert "✎ draft" in body and "This version is a draft" in body
    assert "Run an agent live" not in body  # no run on a draft: the form is not offered
    assert "✓ published" in published_body and "✎ draft" not in published_body


def test_the_version_page_shows_why_a_version_was_published_despite_its_checks(published):
    ContractVersion.objects.filter(pk=published.pk).update(
        publish_reason="The flaky task is a known sandbox timeout <b>on CI</b>."
    )

    body = viewer().get(reverse("packs:version", args=["gate", 1])).content.decode()

    assert (
        "<strong>Published despite its health checks:</strong> "
        "The flaky task is a known sandbox timeout &lt;b&gt;on CI&lt;/b&gt;." in body
    )


def test_the_version_page_renders_the_panels_registered_for_it(draft, maintainer, monkeypatch):
    def panel(request, version):
        return format_html("<section id='test-panel'>{} sees {}</section>", request.user, version)

    monkeypatch.setattr(hooks, "_version_panels", [panel])

    body = signed_in(maintainer).get(reverse("packs:version", args=["gate", 2])).content.decode()

    assert "<section id='test-panel'>keeper sees gate v2</section>" in body


def test_the_pack_list_hides_drafts_from_plain_users(draft, fresh, maintainer):
    plain = viewer().get(reverse("packs:list")).content.decode()
    keeper = signed_in(maintainer).get(reverse("packs:list")).content.decode()

    assert "/packs/gate/v1/" in plain and "/packs/gate/v2/" not in plain
    assert "/packs/fresh/" not in plain
    assert "/packs/gate/v2/" in keeper and "/packs/fresh/" in keeper


def test_the_api_pack_list_and_pack_answer_count_only_what_the_user_sees(draft, fresh, maintainer):
    api = APIClient()
    api.force_authenticate(make_user("harness", "viewer"))
    keeper = APIClient()
    keeper.force_authenticate(maintainer)

    listed = api.get("/api/v1/packs/").json()["results"]
    detail = api.get("/api/v1/packs/gate/").json()
    kept = {
        row["id"]: row["latest_version"] for row in keeper.get("/api/v1/packs/").json()["results"]
    }

    assert [(row["id"], row["latest_version"]) for row in listed] == [("gate", 1)]
    assert detail["latest_version"] == 1
    assert [(v["version"], v["state"]) for v in detail["versions"]] == [(1, "published")]
    assert kept == {"fresh": 1, "gate": 2}


def without_random_tokens(body: str) -> str:
    return re.sub(r'nonce="[^"]*"|"X-CSRFToken": "[^"]*"|value="[A-Za-z0-9]{64}"', "", body)


def test_the_pack_page_home_and_compare_picker_list_no_draft_for_plain_users(draft):
    client = viewer()

    pack_page = client.get(reverse("packs:detail", args=["gate"])).content.decode()
    home = client.get(reverse("home")).content.decode()
    compare = client.get(reverse("packs:compare", args=["gate"])).content.decode()
    version_page = client.get(reverse("packs:version", args=["gate", 1])).content.decode()

    for body in (pack_page, home, compare, version_page):
        assert "/packs/gate/v2/" not in body
        # Random tokens (the CSP nonce, the CSRF token) may spell "v2" by chance: not a leak.
        assert not re.search(r"\bv2\b", without_random_tokens(body))
    assert "1 version ·" in pack_page and "latest v1" in pack_page


# --- no run on a draft -----------------------------------------------------------------------


def bundle_file() -> SimpleUploadedFile:
    line = {"task_id": "q1", "candidate": {"kind": "text", "text": "Answer: B"}}
    return SimpleUploadedFile("candidates.jsonl", (json.dumps(line) + "\n").encode())


def test_the_run_form_refuses_a_draft_and_does_not_offer_it(draft, maintainer):
    client = signed_in(maintainer)

    form = client.get(reverse("runs:submit")).content.decode()
    response = client.post(
        reverse("runs:submit"),
        {"contract_version": draft.pk, "agent_name": "a", "bundle": bundle_file()},
    )

    assert "gate v1" in form
    assert "gate v2" not in form
    assert response.status_code == 400
    assert DRAFT_REFUSAL in response.content.decode()
    assert not Run.objects.exists()


def test_the_run_form_gives_no_hint_of_a_draft_to_a_plain_user(draft):
    response = viewer().post(
        reverse("runs:submit"),
        {"contract_version": draft.pk, "agent_name": "a", "bundle": bundle_file()},
    )

    body = response.content.decode()
    assert response.status_code == 400
    assert "Select a valid choice" in body and "draft" not in body
    assert not Run.objects.exists()


@pytest.mark.parametrize("mode", ["bundle", "episodes"])
def test_the_run_api_refuses_a_draft(draft, maintainer, mode):
    keeper = APIClient()
    keeper.force_authenticate(maintainer)
    plain = APIClient()
    plain.force_authenticate(make_user("someone", "submitter"))
    body = {"pack": "gate", "version": 2, "agent_name": "a", "mode": mode}

    refused = keeper.post("/api/v1/runs/", body, format="json")
    unknown = plain.post("/api/v1/runs/", body, format="json")

    assert refused.status_code == 400 and refused.json() == {"version": [DRAFT_REFUSAL]}
    assert unknown.status_code == 400
    assert unknown.json() == {"version": ["Pack 'gate' has no version 2 (it has: 1)."]}
    assert not Run.objects.exists()


def test_the_bundle_api_refuses_a_draft(draft, maintainer):
    keeper = APIClient()
    keeper.force_authenticate(maintainer)

    response = keeper.post(
        "/api/v1/runs/bundle/",
        {"pack": "gate", "version": 2, "agent_name": "a", "bundle": bundle_file()},
        format="multipart",
    )

    assert response.status_code == 400 and response.json() == {"version": [DRAFT_REFUSAL]}
    assert not Run.objects.exists()


def test_submit_run_refuses_a_draft(draft, fresh):
    with pytest.raises(CommandError, match=DRAFT_REFUSAL):
        call_command("submit_run", "--pack", "gate", "--version", "2", "--null")
    # Without --version the latest published is meant; a pack with none is refused.
    with pytest.raises(CommandError, match="version 1 of fresh is a draft"):
        call_command("submit_run", "--pack", "fresh", "--oracle")
    assert not Run.objects.exists()


def test_open_episode_run_refuses_a_draft(draft):
    with pytest.raises(CommandError, match=DRAFT_REFUSAL):
        call_command("open_episode_run", "--pack", "gate", "--version", "2", stdout=io.StringIO())
    assert not Run.objects.exists()


def test_the_episode_run_form_refuses_a_draft(draft, maintainer):
    client = signed_in(maintainer)
    url = reverse("episodes:open", args=["gate", 2])

    posted = client.post(url, {"agent_name": "live-agent"})
    shown = client.get(url, follow=True)

    assert posted.status_code == 400 and DRAFT_REFUSAL in posted.content.decode()
    assert shown.redirect_chain == [(reverse("packs:version", args=["gate", 2]), 302)]
    assert DRAFT_REFUSAL in shown.content.decode()
    assert not Run.objects.exists()


def test_only_a_health_check_run_may_target_a_draft(draft):
    metadata = RunMetadata(agent_name="oracle")

    with pytest.raises(VersionIsDraft, match=DRAFT_REFUSAL):
        run_create(contract_version=draft, metadata=metadata, source=RunSource.COMMAND)
    health = run_create(
        contract_version=draft, metadata=metadata, source=RunSource.COMMAND, health_check=True
    )

    assert health.health_check and health.contract_version == draft


# --- the publish policy ----------------------------------------------------------------------


def test_a_maintainer_switches_the_publish_policy(draft, maintainer):
    client = signed_in(maintainer)

    page = client.get(reverse("packs:detail", args=["gate"])).content.decode()
    response = client.post(
        reverse("packs:publish-policy", args=["gate"]), {"publish_policy": "manual"}, follow=True
    )

    assert 'name="publish_policy"' in page
    assert Pack.objects.get(pack_id="gate").publish_policy == PublishPolicy.MANUAL
    assert "New versions of gate are published by a maintainer&#x27;s click." in (
        response.content.decode()
    )


def test_an_unknown_policy_changes_nothing(draft, maintainer):
    signed_in(maintainer).post(
        reverse("packs:publish-policy", args=["gate"]), {"publish_policy": "never"}
    )

    assert Pack.objects.get(pack_id="gate").publish_policy == PublishPolicy.AUTO


@pytest.mark.parametrize("role", ["viewer", "pack maintainer", "reviewer"])
def test_only_the_packs_maintainers_switch_its_policy(draft, role):
    client = signed_in(make_user("other", role))

    page = client.get(reverse("packs:detail", args=["gate"])).content.decode()
    response = client.post(
        reverse("packs:publish-policy", args=["gate"]), {"publish_policy": "manual"}
    )

    assert 'name="publish_policy"' not in page
    assert response.status_code == 403
    assert Pack.objects.get(pack_id="gate").publish_policy == PublishPolicy.AUTO


def test_the_policy_of_a_pack_one_may_not_see_is_not_found(fresh):
    response = viewer().post(
        reverse("packs:publish-policy", args=["fresh"]), {"publish_policy": "manual"}
    )

    assert response.status_code == 404
    assert Pack.objects.get(pack_id="fresh").publish_policy == PublishPolicy.AUTO


def test_behind_the_gate_a_stored_version_is_a_draft_nobody_else_sees(make_pack, settings):
    settings.SECUREBENCH_PUBLISH_GATE = True  # as the site runs by default

    version = import_version(make_pack, "fresh", 1)

    assert (version.state, version.published_at) == (VersionState.DRAFT, None)
    someone = viewer()
    assert someone.get(url_of("packs:version", ["fresh", 1], "")).status_code == 404
    assert someone.get(url_of("api-pack", ["fresh"], "")).status_code == 404


def test_without_the_gate_a_stored_version_is_published_at_once(make_pack, settings):
    settings.SECUREBENCH_PUBLISH_GATE = False

    version = import_version(make_pack, "fresh", 1)

    assert version.state == VersionState.PUBLISHED and version.published_at is not None
    assert viewer().get(url_of("packs:version", ["fresh", 1], "")).status_code == 200
