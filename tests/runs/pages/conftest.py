"""Fixtures of the page tests: a version with five tasks (two families), and a client signed in
as a viewer."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from packs.models import ContractVersion
from tests.conftest import make_user
from tests.runs.pages.support import import_version


@pytest.fixture
def cv(make_pack) -> ContractVersion:
    """Four multiple-choice tasks and one deferred tool_call task (two families)."""
    return import_version(
        make_pack,
        rows=[{"id": "t1", "family": "tool_call", "input": {"goal": "x"}, "eval": {}}],
    )


@pytest.fixture
def reader(db) -> User:
    return make_user("reader", "viewer")


@pytest.fixture
def client(client, reader):
    """Pages need a signed-in user with a role: these tests read them as a viewer."""
    client.force_login(reader)
    return client
