"""The model endpoint over HTTP: OpenAI's chat completions and Anthropic's messages.

No session, cookie or CSRF token is involved: the URL is the credential (as for the CUBE
endpoints), so these views are exempt from sign-in and CSRF. Every refusal is JSON in the
shape the API's own clients read. A key the agent brings (``X-Provider-Key``) is used for
the one call: it is never logged, stored or shown.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt

from gateway import provider, services
from gateway.services import GatewayRefusal

TASK_HEADER = "X-SecureBench-Task"
KEY_HEADER = "X-Provider-Key"


@csrf_exempt
@login_not_required
@never_cache
def chat_completions(request: HttpRequest, secret: str) -> HttpResponse:
    return _call(request, secret, provider.CHAT_COMPLETIONS)


@csrf_exempt
@login_not_required
@never_cache
def messages(request: HttpRequest, secret: str) -> HttpResponse:
    return _call(request, secret, provider.MESSAGES)


def _call(request: HttpRequest, secret: str, api: str) -> HttpResponse:
    # A call's latency counts all of the gateway's own work, from here.
    started = time.monotonic()
    try:
        if request.method != "POST":
            raise GatewayRefusal(405, "method_not_allowed", "POST a JSON body to this URL.")
        endpoint = services.endpoint_by_secret(secret)
        body = _json_body(request)
        key, key_source = _provider_key(request)
        target = services.call_target(endpoint, request.headers.get(TASK_HEADER, "").strip())
        record = services.CallRecord(
            target=target,
            api=api,
            model=body["model"][:200],
            stream=body.get("stream") is True,
            key_source=key_source,
            started=started,
        )
        services.call_admit(
            target, api=api, model=record.model, stream=record.stream, key_source=key_source
        )
        relay = services.call_forward(record, body, key)
    except GatewayRefusal as refusal:
        return _refusal(api, refusal)
    if relay.chunks is not None:
        response: HttpResponse = StreamingHttpResponse(
            relay.chunks, status=relay.status, content_type=relay.content_type
        )
        # A proxy in front must pass each event on at once, not gather the answer.
        response["X-Accel-Buffering"] = "no"
        return response
    return HttpResponse(relay.content, status=relay.status, content_type=relay.content_type)


def _json_body(request: HttpRequest) -> dict[str, Any]:
    limit = settings.SECUREBENCH_GATEWAY_MAX_BODY_BYTES
    # Never more than one byte past the limit is read, whatever length was declared.
    raw = request.read(limit + 1)
    if len(raw) > limit:
        raise GatewayRefusal(413, "body_too_large", f"The body is over {limit:,} bytes.")
    try:
        body = json.loads(raw)
    except ValueError:
        raise GatewayRefusal(400, "invalid_json", "The body is not JSON.") from None
    if not isinstance(body, dict) or not isinstance(body.get("model"), str) or not body["model"]:
        raise GatewayRefusal(400, "invalid_request", "The body must be an object naming a model.")
    return body


def _provider_key(request: HttpRequest) -> tuple[str, str]:
    own = request.headers.get(KEY_HEADER, "").strip()
    if own:
        return own, services.OWN_KEY
    if not settings.SECUREBENCH_GATEWAY_API_KEY:
        raise GatewayRefusal(
            401, "no_provider_key", f"The site has no provider key: send yours in {KEY_HEADER}."
        )
    return settings.SECUREBENCH_GATEWAY_API_KEY, services.OPERATOR_KEY


def _refusal(api: str, refusal: GatewayRefusal) -> JsonResponse:
    if api == provider.MESSAGES:
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": refusal.code, "message": refusal.message},
        }
    else:
        body = {
            "error": {
                "message": refusal.message,
                "type": "insufficient_quota" if refusal.status == 402 else "gateway_error",
                "param": None,
                "code": refusal.code,
            }
        }
    return JsonResponse(body, status=refusal.status)
