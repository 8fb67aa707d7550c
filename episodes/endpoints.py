"""The two CUBE endpoints over HTTP: thin views around episodes.rpc.

No session, cookie or CSRF token is involved (the stock client sends none): the URL is the
credential, so these views are exempt from sign-in and CSRF, and answer only POST bodies
within the size limit. Every answer is HTTP 200 with JSON (episodes.rpc says why).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt

from episodes import rpc, wire
from episodes.capabilities import looks_like_secret
from runs.privileged import client_ip

Call = Callable[[str, rpc.RpcRequest, rpc.CallContext], Any]


def _endpoint(request: HttpRequest, secret: str, call: Call) -> JsonResponse:
    if request.method != "POST":
        body = wire.error(None, wire.INVALID_REQUEST, "POST a JSON-RPC 2.0 request to this URL")
        return _json(body)
    limit = settings.SECUREBENCH_CUBE_MAX_BODY_BYTES
    # Never more than one byte past the limit is read, whatever length was declared.
    raw = request.read(limit + 1)
    if len(raw) > limit:
        return _json(_too_large(limit))
    context = rpc.CallContext(
        base_url=request.build_absolute_uri("/"), ip_address=client_ip(request)
    )

    def dispatch(parsed: rpc.RpcRequest) -> Any:
        if not looks_like_secret(secret):
            raise wire.RpcError(
                wire.NOT_VALID, "This URL is not valid: unknown, revoked, expired or closed."
            )
        return call(secret, parsed, context)

    return _json(rpc.answer(raw, dispatch))


def _too_large(limit: int) -> dict[str, Any]:
    return wire.error(
        None, wire.INVALID_REQUEST, f"Invalid Request: the body is over {limit:,} bytes"
    )


def _json(body: dict[str, Any]) -> JsonResponse:
    try:
        return JsonResponse(body, status=200, json_dumps_params={"ensure_ascii": False})
    except UnicodeEncodeError:
        # Text that is not UTF-8 (an unpaired surrogate) can still be sent escaped: an
        # answer is always JSON, never the server's error page.
        return JsonResponse(body, status=200)


@csrf_exempt
@login_not_required
@never_cache
def benchmark_endpoint(request: HttpRequest, secret: str) -> JsonResponse:
    return _endpoint(request, secret, rpc.benchmark_call)


@csrf_exempt
@login_not_required
@never_cache
def task_endpoint(request: HttpRequest, secret: str) -> JsonResponse:
    return _endpoint(request, secret, rpc.task_call)
