"""schemathesis against the OpenAPI schema the app serves: every operation, fuzzed, as a
superuser with a token, never answers a server error or an undocumented shape.

Requests go straight into Django's WSGI application (no server). Each generated case is sent
as drawn (random ids: mostly 404s) and again with the path pointed at seeded objects, so
detail endpoints and writes are fuzzed with real data behind them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, given, settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from schemathesis.specs.openapi.checks import ignored_auth, positive_data_acceptance

from packs.services import pack_import_folder
from runs.models import RunSource
from runs.pipeline import score_results
from runs.services import RunMetadata, run_create, run_submit_reference
from tests.conftest import mc_row

pytestmark = pytest.mark.django_db


APP = WSGIHandler()


def served_schema() -> dict[str, Any]:
    """What `GET /api/v1/schema/` serves (drf-spectacular's generator, as its view runs it).

    Built in-process at collection, when no test database exists to authenticate against;
    `test_the_served_schema_is_the_one_tested` checks the endpoint returns the same.
    """
    return SchemaGenerator().get_schema(request=None, public=True)


schema = schemathesis.openapi.from_dict(served_schema())
# Every check but two: our explicit token overrides the credentials schemathesis generates,
# so it would take the answer for one to invalid ones (ignored_auth); and a request can be
# schema-valid yet name a pack that does not exist (positive_data_acceptance).
NOT_APPLICABLE = [ignored_auth, positive_data_acceptance]
schema.app = APP


@pytest.fixture(autouse=True)
def requests_keep_the_test_connection() -> Iterator[None]:
    """As Django's test client does: a request must not close the connection, which holds
    the test's uncommitted data."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def seeded(make_pack, settings) -> dict[str, Any]:
    """A pack with assets, a scored oracle run (evaluation 1) and an open run, all the
    superuser's; write throttles out of the way (they would turn fuzzing into 429s)."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {
            "run_writes": "100000/minute",
            "run_candidates": "100000/minute",
        },
    }
    cache.clear()
    admin = User.objects.create_superuser("schema-admin", password=None)
    with_assets = mc_row("set/q1")
    with_assets["assets"] = [{"path": "data"}]
    folder = make_pack(
        {"id": "schema-pack", "version": 1},
        [with_assets, mc_row("q2", "C")],
        files={"assets/data/a.csv": "x\n"},
    )
    version = pack_import_folder(folder=folder).contract_version
    scored, evaluation = run_submit_reference(
        contract_version=version,
        origin="oracle",
        metadata=RunMetadata(agent_name="oracle-agent"),
        source=RunSource.API,
        user=admin,
    )
    score_results(list(evaluation.results.values_list("pk", flat=True)), worker="schema-test")
    open_run = run_create(
        contract_version=version,
        metadata=RunMetadata(agent_name="open-agent"),
        source=RunSource.API,
        user=admin,
    )
    return {
        "token": Token.objects.create(user=admin).key,
        "pack_id": "schema-pack",
        "version": 1,
        "scored_run": scored.pk,
        "open_run": open_run.pk,
        "number": evaluation.number,
    }


def seeded_path(path: str, drawn: dict[str, Any], seeded: dict[str, Any]) -> dict[str, Any]:
    run = seeded["scored_run"] if "/evaluations/" in path else seeded["open_run"]
    known = {
        "pack_id": seeded["pack_id"],
        "version": seeded["version"],
        "run_id": run,
        "number": seeded["number"],
    }
    return {name: known.get(name, value) for name, value in drawn.items()}


# One test per operation, each with an id of its own ("GET /api/v1/packs/"): schemathesis's
# own parametrize gives every operation the same node id, and `make test`'s parallel run
# (pytest-xdist) keys its schedule by node id, so it would run only one of them.
OPERATIONS = [result.ok() for result in schema.get_all_operations()]
FUZZ_SETTINGS = settings(
    max_examples=10,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.label)
def test_every_operation_answers_without_a_server_error(operation, seeded):
    headers = {"Authorization": f"Token {seeded['token']}"}

    @FUZZ_SETTINGS
    @given(case=operation.as_strategy())
    def fuzz(case) -> None:
        case.call_and_validate(headers=headers, excluded_checks=NOT_APPLICABLE)
        if case.path_parameters:
            case.path_parameters = seeded_path(case.operation.path, case.path_parameters, seeded)
            case.call_and_validate(headers=headers, excluded_checks=NOT_APPLICABLE)

    fuzz()


def test_every_operation_of_the_served_schema_is_fuzzed() -> None:
    labels = [operation.label for operation in OPERATIONS]
    assert len(labels) == len(set(labels)) >= 20


def test_the_served_schema_is_the_one_tested(seeded):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {seeded['token']}")

    response = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    assert json.loads(response.content) == json.loads(json.dumps(served_schema()))
