"""Sign-in lockout (django-axes): five failures for one username from one address."""

from __future__ import annotations

import pytest
from axes.utils import reset
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "right-pw-for-tests-only"


@pytest.fixture
def alice(settings) -> User:
    # Dozens of sign-ins: a fast hasher keeps this about lockout, not PBKDF2.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return User.objects.create_user("alice", password=PASSWORD)


def sign_in(client: Client, password: str, address: str = "203.0.113.7"):
    return client.post(
        "/accounts/login/",
        {"username": "alice", "password": password},
        REMOTE_ADDR=address,
    )


def test_five_wrong_passwords_lock_out_even_the_right_one(client, alice):
    failures = [sign_in(client, "wrong").status_code for _ in range(5)]

    locked = sign_in(client, PASSWORD)

    # The fifth failure is answered with the lockout already.
    assert failures == [200, 200, 200, 200, 429]
    assert locked.status_code == 429
    assert "Too many failed sign-in attempts" in locked.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_reset_lifts_the_lockout(client, alice):
    for _ in range(6):
        sign_in(client, "wrong")

    reset(username="alice")

    assert sign_in(client, PASSWORD).status_code == 302
    assert client.session["_auth_user_id"] == str(alice.pk)


def test_the_lockout_is_per_username_and_address(client, alice):
    for _ in range(6):
        sign_in(client, "wrong", address="203.0.113.7")

    assert sign_in(client, PASSWORD, address="198.51.100.2").status_code == 302


def test_a_success_before_the_limit_clears_the_count(client, alice):
    for _ in range(4):
        sign_in(client, "wrong")
    assert sign_in(client, PASSWORD).status_code == 302
    client.logout()

    for _ in range(4):
        sign_in(client, "wrong")

    assert sign_in(client, PASSWORD).status_code == 302


def test_the_test_clients_own_logins_still_work(alice):
    assert Client().login(username="alice", password=PASSWORD)
    assert not Client().login(username="alice", password="wrong")
