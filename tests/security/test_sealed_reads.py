"""Sealed lanes are reached only through the audited accessor (runs.privileged.SealedReader)
or the evaluator's own read — proved by watching the reads themselves, not by reading code.

The probe (tests/security/sealed_probe.py) records every SQL statement on the sealed-value
table and every open under the sealed file root, attributed to its caller. These tests show
that it sees every way in (so a quiet probe means something), that the evaluator's read and
the accessor's are told apart, and that the accessor checks the privilege before it reads and
audits every read. The leak crawl (tests/security/test_leak.py) runs every page, partial,
API operation and POST of every role under the same probe and requires it to stay silent.
"""

from __future__ import annotations

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.core.files.storage import storages
from django.db import connection
from django.http import Http404
from django.test import Client

from packs.models import ContractVersion, Resource, SealedValue
from packs.selectors import evaluator_task_lanes
from packs.services import pack_import_folder
from runs.models import AuditEvent
from runs.privileged import SealedReader, debug_mode_start
from tests.conftest import make_user, mc_row
from tests.security.sealed_probe import (
    EVALUATOR,
    PRIVILEGED,
    UNATTRIBUTED,
    describe,
    sealed_probe,
)
from verifiers.lanes import PUBLIC

pytestmark = pytest.mark.django_db
SECRET = "the sealed answer"
RESOURCE_URL = "/privileged/packs/demo/v1/resource/?task=q1&name=accepted_answers"
FILE_URL = "/privileged/packs/demo/v1/file/?path=notes.txt"


@pytest.fixture
def version(make_pack) -> ContractVersion:
    folder = make_pack(
        {"id": "demo", "version": 1},
        [
            {
                "id": "q1",
                "family": "short_answer",
                "input": {"question": "Which?"},
                "eval": {"accepted_answers": [SECRET]},
            }
        ],
        files={"hidden/notes.txt": "sealed notes\n"},
    )
    return pack_import_folder(folder=folder).contract_version


def test_the_probe_sees_every_way_to_a_sealed_value_or_file(version):
    resource = Resource.objects.exclude(lane=PUBLIC).get(task__contract_version=version)
    blob = version.files.get(path="notes.txt").blob_name

    with sealed_probe() as probe:
        # A view that dodges a grep: the related name built at run time.
        dodged = getattr(resource, "se" + "aled").value
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT value FROM {SealedValue._meta.db_table}")  # noqa: S608
            raw = cursor.fetchall()
        with storages["pack_sealed"].open(blob, "rb") as handle:
            stored = handle.read()
        with open(storages["pack_sealed"].path(blob), "rb") as handle:
            plain = handle.read()

    assert SECRET in str(dodged) and SECRET in str(raw)
    assert stored == plain == b"sealed notes\n"
    kinds = [read.kind for read in probe.reads]
    assert kinds.count("sql") >= 2 and kinds.count("open") >= 2, describe(probe.reads)
    assert all(read.path == UNATTRIBUTED for read in probe.reads)
    assert all("test_sealed_reads.py" in read.caller for read in probe.reads)


def test_the_evaluators_read_is_told_apart_from_any_other(version):
    task = version.tasks.get()

    with sealed_probe() as probe:
        lanes = evaluator_task_lanes(task)

    assert lanes.hidden["accepted_answers"] == [SECRET]
    assert probe.reads and all(read.path == EVALUATOR for read in probe.reads)
    assert probe.accessor_calls == []


@pytest.mark.parametrize("role", ["viewer", "submitter", "maintainer of another pack"])
def test_without_the_privilege_the_accessor_refuses_before_reading(client, version, role):
    if role == "maintainer of another pack":
        user = make_user("other", "pack maintainer")
    else:
        user = make_user(role, role)
    client.force_login(user)
    # Debug mode is refused to most; those who get it hold no privilege for this pack.
    client.post("/debug-mode/", {"reason": "trying", "next": "/"})

    with sealed_probe() as probe:
        responses = [client.get(url) for url in (RESOURCE_URL, FILE_URL)]

    assert [r.status_code for r in responses] == [404, 404]
    assert probe.reads == [], describe(probe.reads)
    assert not AuditEvent.objects.filter(action__in=["view_resource", "view_file"]).exists()


def test_a_privileged_user_reads_only_in_debug_mode_and_every_read_is_audited(client, version):
    reviewer = make_user("reviewer", "reviewer")
    client.force_login(reviewer)

    with sealed_probe() as before:
        closed = [client.get(url).status_code for url in (RESOURCE_URL, FILE_URL)]
    assert closed == [403, 403]
    assert before.reads == [] and before.accessor_calls == []

    assert client.post("/debug-mode/", {"reason": "checking q1", "next": "/"}).status_code == 302
    with sealed_probe() as probe:
        opened = [client.get(url) for url in (RESOURCE_URL, FILE_URL)]

    assert [r.status_code for r in opened] == [200, 200]
    assert SECRET in opened[0].content.decode() and "sealed notes" in opened[1].content.decode()
    assert {read.kind for read in probe.reads} == {"sql", "open"}
    assert all(read.path == PRIVILEGED for read in probe.reads), describe(probe.reads)
    assert len(probe.accessor_calls) == 2
    audited = AuditEvent.objects.filter(user=reviewer, action__in=["view_resource", "view_file"])
    assert sorted(audited.values_list("action", flat=True)) == ["view_file", "view_resource"]
    assert set(audited.values_list("reason", flat=True)) == {"checking q1"}


def test_another_client_sees_nothing_of_a_reviewers_debug_mode(client, version):
    reviewer = make_user("reviewer", "reviewer")
    client.force_login(reviewer)
    client.post("/debug-mode/", {"reason": "checking q1", "next": "/"})
    stranger = Client()
    stranger.force_login(make_user("viewer", "viewer"))

    with sealed_probe() as probe:
        response = stranger.get(RESOURCE_URL)

    assert response.status_code == 404
    assert probe.reads == []


def test_a_reader_opened_for_one_pack_reads_no_task_of_another(version, make_pack, rf):
    # A maintainer of "mine" only: a view that handed the reader a task of another pack
    # must get a 404, not the other pack's sealed value.
    mine = pack_import_folder(
        folder=make_pack({"id": "mine", "version": 1}, [mc_row("q")])
    ).contract_version
    maintainer = make_user("maintainer", "pack maintainer")
    mine.pack.maintainers.add(maintainer)
    request = rf.get("/")
    request.user = maintainer
    request.session = SessionStore()
    debug_mode_start(request, reason="checking my pack")
    reader = SealedReader(request, mine)

    with sealed_probe() as probe, pytest.raises(Http404):
        reader.resource(version.tasks.get(), "accepted_answers")

    assert probe.reads == []
    assert reader.resource(mine.tasks.get(), "answer").value == "B"
