"""The gateway's suites: Django's test client in front, a stand-in provider on loopback
behind (bench.standin), and the gateway's own forwarding code between them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from bench.standin import StandinProvider
from packs.models import ContractVersion
from packs.services import pack_import_folder
from tests.conftest import mc_row

OPERATOR_KEY = "sk-operator-key-for-tests-0123456789"
PACK = "gateway-pack"


@dataclass(frozen=True)
class Opened:
    run_id: int
    endpoint: str  # the model endpoint URL's path (ends with /v1)
    benchmark: str  # the CUBE benchmark URL's path


@pytest.fixture
def standin() -> Iterator[StandinProvider]:
    with StandinProvider() as provider:
        yield provider


@pytest.fixture
def gateway_settings(settings: Any, standin: StandinProvider) -> Any:
    settings.SECUREBENCH_GATEWAY_BASE_URL = standin.base_url
    settings.SECUREBENCH_GATEWAY_API_KEY = OPERATOR_KEY
    return settings


def budget_version(make_pack: Any, budgets: dict[str, Any]) -> ContractVersion:
    folder = make_pack(
        {"id": PACK, "version": 1, "contract": {"budgets": budgets}},
        [mc_row("q1", "B"), mc_row("q2", "C")],
    )
    return pack_import_folder(folder=folder).contract_version


def harness_user(name: str = "harness") -> User:
    user = User.objects.create_user(name, password="pw-for-tests-only")
    for codename in ("browse", "add_run"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def api_for(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def open_run(api: APIClient, *, mode: str = "episodes") -> Opened:
    """A run opened through the run API, as a harness does; the answer shows both URLs."""
    body = {"pack": PACK, "version": 1, "mode": mode, "agent_name": "gateway tests"}
    answer = api.post("/api/v1/runs/", body, format="json")
    assert answer.status_code == 201, answer.content
    opened = answer.json()
    assert answer["Cache-Control"] == "no-store"
    return Opened(
        run_id=opened["id"],
        endpoint=opened["model_endpoint_url"].removeprefix("http://testserver"),
        benchmark=opened.get("benchmark_url", "").removeprefix("http://testserver"),
    )


def chat(
    endpoint: str,
    *,
    task: str = "q1",
    stream: bool = False,
    headers: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
    path: str = "/chat/completions",
) -> Any:
    payload = body or {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Say hello."}],
        "stream": stream,
    }
    extra = {"HTTP_X_SECUREBENCH_TASK": task}
    for name, value in (headers or {}).items():
        extra["HTTP_" + name.upper().replace("-", "_")] = value
    return Client().post(
        endpoint + path, json.dumps(payload), content_type="application/json", **extra
    )


def cube(url: str, method: str, params: dict[str, Any] | None = None) -> Any:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": 1}
    if params is not None:
        body["params"] = params
    answer = Client().post(url, json.dumps(body), content_type="application/json").json()
    assert "result" in answer, answer
    return answer["result"]


def spawn_episode(benchmark: str, task_id: str) -> str:
    configs = cube(benchmark, "cube/task_configs", {"task_id": task_id})
    task_url = cube(benchmark, "cube/spawn", {"task_config": configs[0]})
    task_url = task_url.removeprefix("http://testserver")
    cube(task_url, "cube/reset")
    return task_url
