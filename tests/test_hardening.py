"""Production settings: `check --deploy` is clean, SECRET_KEY is required, and oversized
request bodies are a JSON 413 in the API."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.conftest import REPO_ROOT

# Settings the test run sets for itself (pyproject.toml, CI) that production would not.
TEST_ONLY = {
    "DEBUG",
    "SECRET_KEY",
    "SECRET_KEY_FILE",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER",
    "ALLOWED_HOSTS",
    "DJANGO_SETTINGS_MODULE",
    # The check opens the database (JSONField support): an SQLite file of the test's own.
    "DATABASE_URL",
    "CELERY_BROKER_URL",
}
PRODUCTION_KEY = "k3Q9-production-like-secret-for-the-deploy-check-only-x7Vb2mZpR4tN8wYe"


def production_env(tmp_path, **extra: str) -> dict[str, str]:
    (tmp_path / "data").mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items() if key not in TEST_ONLY}
    return env | {
        "SECRET_KEY": PRODUCTION_KEY,
        "ALLOWED_HOSTS": "bench.example.org",
        "SECUREBENCH_DATA_DIR": str(tmp_path / "data"),
        **extra,
    }


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def settings_in(env: dict[str, str], *names: str) -> dict[str, object]:
    code = (
        "import json, django; django.setup(); from django.conf import settings; "
        f"print(json.dumps({{n: getattr(settings, n) for n in {list(names)!r}}}))"
    )
    env = env | {"DJANGO_SETTINGS_MODULE": "securebench_site.settings"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.database_independent
def test_the_deploy_check_is_clean_with_production_environment_variables(tmp_path):
    done = manage(production_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


@pytest.mark.database_independent
def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    # Production shape: a database of its own; only the embedded defaults generate a key.
    env = production_env(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path / 'production.sqlite3'}")
    del env["SECRET_KEY"]

    done = manage(env, "check")

    assert done.returncode != 0
    assert "SECRET_KEY (or SECRET_KEY_FILE) must be set when DEBUG is off" in done.stderr


@pytest.mark.database_independent
def test_production_defaults_are_https_only_and_can_trust_a_named_proxy_header(tmp_path):
    names = (
        "SECURE_SSL_REDIRECT",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SESSION_COOKIE_HTTPONLY",
        "SECURE_HSTS_SECONDS",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "SECURE_HSTS_PRELOAD",
        "SECURE_PROXY_SSL_HEADER",
        "X_FRAME_OPTIONS",
        "SECURE_REFERRER_POLICY",
    )
    plain = settings_in(production_env(tmp_path), *names)
    proxied = settings_in(
        production_env(
            tmp_path,
            SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO",
            SECURE_HSTS_PRELOAD="0",
        ),
        *names,
    )

    assert plain == {
        "SECURE_SSL_REDIRECT": True,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SESSION_COOKIE_HTTPONLY": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": True,
        "SECURE_PROXY_SSL_HEADER": None,
        "X_FRAME_OPTIONS": "DENY",
        "SECURE_REFERRER_POLICY": "same-origin",
    }
    assert proxied["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert proxied["SECURE_HSTS_PRELOAD"] is False


@pytest.mark.django_db
def test_an_api_body_over_djangos_memory_cap_is_a_json_413(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    user = User.objects.create_user("uploader", password=None)
    user.user_permissions.add(Permission.objects.get(codename="add_contractversion"))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")

    # Form fields (not files) count against DATA_UPLOAD_MAX_MEMORY_SIZE.
    response = api.post("/api/v1/uploads/", {"notes": "x" * 5000}, format="multipart")

    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert "larger than" in response.json()["detail"]
