"""Debug mode's quieter guards: it dies with the privilege that allowed it, and the audit trail
records who really asked (the peer's address, never a header the client writes itself).

Fixtures and helpers come from tests/test_roles_and_debug_mode.py (a pack "demo" with a
code task, every role, a scored result).
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from runs.models import AuditAction, AuditEvent
from tests.test_roles_and_debug_mode import (  # noqa: F401 - cv, users, result are fixtures
    client_as,
    cv,
    debug_on,
    result,
    reveal_url,
    users,
)

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def test_losing_every_privilege_ends_debug_mode_for_good(users):  # noqa: F811
    reviewer = users["reviewer"]
    client = client_as(reviewer)
    assert debug_on(client).status_code == 302
    assert client.get(reveal_url(), headers=HTMX).status_code == 200

    # Demoted to viewer: the next page they load finds debug mode without a privilege.
    reviewer.groups.remove(Group.objects.get(name="reviewer"))
    reviewer.groups.add(Group.objects.get(name="viewer"))
    assert client.get("/packs/").status_code == 200
    # Given back later, the role does not revive the old switch: a new one, with a new
    # reason, is needed (and audited) before anything privileged shows again.
    reviewer.groups.add(Group.objects.get(name="reviewer"))
    again = client.get(reveal_url(), headers=HTMX)

    assert again.status_code == 403
    assert "CANONICAL-MARK" not in again.content.decode()
    assert AuditEvent.objects.filter(action="view_resource").count() == 1


def test_the_audit_log_records_the_peer_address_not_a_forwarded_header(users):  # noqa: F811
    client = client_as(users["reviewer"])
    forged = {"X-Forwarded-For": "203.0.113.9", **HTMX}

    client.post("/debug-mode/", {"reason": "checking the audit trail", "next": "/"}, headers=forged)
    client.get(reveal_url(), headers=forged)

    switched = AuditEvent.objects.get(action=AuditAction.DEBUG_MODE_ON)
    looked = AuditEvent.objects.get(action="view_resource")
    # The Django test client's peer is 127.0.0.1; the header is the client's invention.
    assert switched.ip_address == looked.ip_address == "127.0.0.1"


def test_an_inactive_account_reaches_nothing_even_with_a_live_session(users, result):  # noqa: F811
    reviewer = users["reviewer"]
    client = client_as(reviewer)
    assert debug_on(client).status_code == 302
    reviewer.is_active = False
    reviewer.save(update_fields=["is_active"])

    page = client.get("/packs/")
    panel = client.get(reveal_url(), headers=HTMX)

    assert page.status_code == 302 and "/accounts/login/" in page["Location"]
    assert panel.status_code == 302
    assert AuditEvent.objects.filter(action="view_resource").count() == 0


# --- the service's own checks, for callers other than today's view --------------------------
# The debug-mode view refuses unprivileged users before it calls the service, and Django's
# login() flushes a session another user signs in on; these checks must hold without that help
# (an API endpoint, a session backend that keeps data across sign-ins).


def _request_as(user, session=None):
    from django.contrib.sessions.backends.db import SessionStore  # noqa: PLC0415
    from django.test import RequestFactory  # noqa: PLC0415

    request = RequestFactory().post("/debug-mode/", REMOTE_ADDR="192.0.2.7")
    request.user = user
    request.session = session if session is not None else SessionStore()
    return request


def test_the_service_refuses_debug_mode_to_a_user_without_privilege(users):  # noqa: F811
    from django.core.exceptions import PermissionDenied  # noqa: PLC0415

    from runs.privileged import SESSION_KEY, debug_mode_start  # noqa: PLC0415

    request = _request_as(users["viewer"])

    with pytest.raises(PermissionDenied):
        debug_mode_start(request, reason="curious")

    assert SESSION_KEY not in request.session
    assert not AuditEvent.objects.filter(action=AuditAction.DEBUG_MODE_ON).exists()


def test_a_debug_mode_state_belongs_to_the_user_who_switched_it_on(users):  # noqa: F811
    from runs.privileged import debug_mode, debug_mode_start  # noqa: PLC0415

    reviewer, maintainer = users["reviewer"], users["maintainer"]
    switched = _request_as(reviewer)
    debug_mode_start(switched, reason="checking a flaky task")

    # The same session, now carrying another (also privileged) user: no debug mode for them.
    other = _request_as(maintainer, session=switched.session)

    assert debug_mode(other) is None
    assert debug_mode(_request_as(reviewer, session=switched.session)) is None  # state dropped
