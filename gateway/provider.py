"""Forwarding one model call to the operator's provider, and reading its usage.

The URL is always the configured base URL plus a fixed path per API: nothing from the
request (path, headers, body) can name another host or path, and redirects are not followed.
Only the headers the API needs are sent: no header of the agent's is passed on except the
key it chose to bring, which is used for this call only and never logged or stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import httpx
from django.conf import settings

CHAT_COMPLETIONS = "chat_completions"
MESSAGES = "messages"
API_PATHS = {CHAT_COMPLETIONS: "/chat/completions", MESSAGES: "/messages"}
ANTHROPIC_VERSION = "2023-06-01"


@dataclass
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    model: str = ""

    def read(self, body: Any) -> None:
        """Take what one JSON answer (or one streamed event) says of usage and the model.

        OpenAI: ``usage.prompt_tokens`` / ``completion_tokens`` (a stream's last chunk, when
        asked with ``stream_options.include_usage``). Anthropic: ``usage.input_tokens`` /
        ``output_tokens``, in a stream split over ``message_start`` and ``message_delta``."""
        if not isinstance(body, dict):
            return
        message = body.get("message") if isinstance(body.get("message"), dict) else body
        if isinstance(message.get("model"), str) and message["model"]:
            self.model = message["model"][:200]
        usage = message.get("usage") or body.get("usage")
        if not isinstance(usage, dict):
            return
        for ours, names in (
            ("input_tokens", ("prompt_tokens", "input_tokens")),
            ("output_tokens", ("completion_tokens", "output_tokens")),
        ):
            for name in names:
                value = usage.get(name)
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    setattr(self, ours, value)


@dataclass
class EventReader:
    """Reads server-sent events as their bytes pass through, for the usage they carry."""

    usage: Usage = field(default_factory=Usage)
    pending: bytes = b""

    def feed(self, chunk: bytes) -> None:
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            line = line.strip()
            if line.startswith(b"data:") and line[5:].strip() not in (b"", b"[DONE]"):
                try:
                    self.usage.read(json.loads(line[5:]))
                except ValueError:
                    continue  # not JSON: passed through all the same


def provider_url(api: str) -> str:
    return settings.SECUREBENCH_GATEWAY_BASE_URL + API_PATHS[api]


def provider_headers(api: str, key: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api == MESSAGES:
        headers |= {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
    else:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def prepared_body(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """The body to send: the agent's, asking a stream for its usage (OpenAI sends it only
    when asked; Anthropic always does)."""
    if api == CHAT_COMPLETIONS and body.get("stream") is True:
        options = body.get("stream_options")
        options = options if isinstance(options, dict) else {}
        return {**body, "stream_options": {**options, "include_usage": True}}
    return body


@cache
def shared_client() -> httpx.Client:
    # One pooled client per process: a kept-alive connection is most of the gateway's
    # overhead budget. trust_env is off so that no proxy variable reroutes the calls.
    return httpx.Client(follow_redirects=False, trust_env=False)


def provider_timeout() -> httpx.Timeout:
    timeout = settings.SECUREBENCH_GATEWAY_TIMEOUT_SECONDS
    return httpx.Timeout(timeout, connect=min(timeout, 10.0))


def send(api: str, body: dict[str, Any], key: str) -> httpx.Response:
    """Send the call; the answer's body is left unread (the caller streams or reads it).
    Raises httpx.HTTPError when the provider cannot be reached or times out."""
    client = shared_client()
    request = client.build_request(
        "POST",
        provider_url(api),
        content=json.dumps(prepared_body(api, body)).encode(),
        headers=provider_headers(api, key),
        timeout=provider_timeout(),
    )
    return client.send(request, stream=True)
