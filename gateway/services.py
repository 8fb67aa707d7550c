"""A run's model endpoint: issued when the run opens, found by its secret, and each call
admitted against the task's budgets, forwarded, and recorded.

The capability is per run, and the agent names the task of each call in the
``X-SecureBench-Task`` header: one URL serves a bundle run opened ahead of time (which has
no episodes) and an episode run alike, and the site checks the name against the run's
tasks. In an episode run the call is recorded against that task's open episode, and a
spent budget ends that episode, truncated, as a step past the step budget does.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from episodes.capabilities import looks_like_secret, new_secret, secret_digest
from episodes.lifecycle import episode_finish
from episodes.models import Episode, EpisodeStatus
from episodes.services import episode_run_usable
from gateway import provider
from gateway.models import CallStatus, ModelCall, ModelEndpoint
from gateway.prices import call_usd
from packs.models import Task
from runs.metering import add_measured_call, run_mark_refused, spent_budget
from runs.models import Run

logger = logging.getLogger(__name__)
OPERATOR_KEY, OWN_KEY = "operator", "own"
NOT_VALID_MESSAGE = "This model endpoint URL is not valid: unknown, revoked, expired or closed."


class GatewayRefusal(Exception):
    """A call answered by the gateway itself, never forwarded."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


# --- the capability ------------------------------------------------------------------------


def endpoint_path(secret: str) -> str:
    """The base URL an OpenAI client takes (it appends /chat/completions)."""
    return f"/gateway/{secret}/v1"


def endpoint_open(run: Run) -> str:
    """A new secret for the run's endpoint (replacing any earlier one); shown once."""
    secret = new_secret()
    ModelEndpoint.objects.update_or_create(
        run=run, defaults={"capability_hash": secret_digest(secret), "revoked_at": None}
    )
    return secret


def opened_run_endpoint(run: Run, base_url: str) -> dict[str, Any]:
    """The member the answer that opens a run carries (runs.modes), when a provider is set."""
    if not settings.SECUREBENCH_GATEWAY_BASE_URL:
        return {}
    return {"model_endpoint_url": base_url.rstrip("/") + endpoint_path(endpoint_open(run))}


def endpoint_revoke(run: Run) -> None:
    ModelEndpoint.objects.filter(run=run, revoked_at__isnull=True).update(revoked_at=timezone.now())


def endpoint_by_secret(secret: str) -> ModelEndpoint:
    """The endpoint a URL names while its run is live; one answer for every refusal."""
    endpoint = None
    if looks_like_secret(secret):
        endpoint = (
            ModelEndpoint.objects.select_related(
                "run__submitted_by", "run__contract_version", "run__episode_run"
            )
            .filter(capability_hash=secret_digest(secret))
            .first()
        )
    if endpoint is None or not endpoint_usable(endpoint):
        raise GatewayRefusal(404, "not_found", NOT_VALID_MESSAGE)
    return endpoint


def endpoint_usable(endpoint: ModelEndpoint) -> bool:
    run = endpoint.run
    owner = run.submitted_by
    if endpoint.revoked_at is not None or run.is_submitted:
        return False  # a submitted or closed run takes no more model calls
    if owner is not None and not owner.is_active:
        return False
    episode_run = getattr(run, "episode_run", None)
    return episode_run is None or episode_run_usable(episode_run)


# --- one call ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallTarget:
    run: Run
    task_id: str
    episode: Episode | None


@dataclass(frozen=True)
class Relay:
    """What to answer the agent: the provider's status and type, with the whole body or
    the stream's chunks as they arrive."""

    status: int
    content_type: str
    content: bytes = b""
    chunks: Iterator[bytes] | None = None


def call_target(endpoint: ModelEndpoint, task_id: str) -> CallTarget:
    run = endpoint.run
    if not task_id:
        raise GatewayRefusal(
            400, "missing_task", "Name the task of this call in the X-SecureBench-Task header."
        )
    episode = None
    if getattr(run, "episode_run", None) is not None:
        episode = (
            Episode.objects.filter(
                episode_run__run=run, task__task_id=task_id, status=EpisodeStatus.OPEN
            )
            .order_by("-attempt")
            .first()
        )
    # An open episode's task is one of the run's; otherwise the name is checked.
    tasks = Task.objects.filter(contract_version_id=run.contract_version_id)
    if episode is None and not tasks.filter(task_id=task_id).exists():
        raise GatewayRefusal(400, "unknown_task", f"The run has no task {task_id[:200]!r}.")
    return CallTarget(run=run, task_id=task_id, episode=episode)


def call_admit(target: CallTarget, *, api: str, model: str, stream: bool, key_source: str) -> None:
    """Refuse the call when the task's tokens or dollars are already spent: the refusal is
    recorded, the task's open episode ends truncated and the run is over budget."""
    # The run was read in this request (its measured usage is current to the last call).
    run = target.run
    crossed = spent_budget(run, target.task_id)
    if not crossed:
        return
    ModelCall.objects.create(
        run=run,
        episode=target.episode,
        task_id=target.task_id,
        api=api,
        model=model,
        stream=stream,
        key_source=key_source,
        status=CallStatus.REFUSED,
        http_status=402,
        note=crossed[:300],
    )
    if target.episode is not None:
        episode_finish(target.episode, ending=EpisodeStatus.TRUNCATED, note=crossed)
    run_mark_refused(run.pk, crossed)
    raise GatewayRefusal(
        402,
        "budget_exceeded",
        f"Budget exhausted: {crossed}. This call was not forwarded"
        + ("; the task's episode has ended and is scored as it stands." if target.episode else "."),
    )


@dataclass
class CallRecord:
    target: CallTarget
    api: str
    model: str
    stream: bool
    key_source: str
    started: float

    def save(
        self,
        status: str,
        *,
        http_status: int | None,
        usage: provider.Usage | None = None,
        first_byte: float | None = None,
        note: str = "",
    ) -> ModelCall:
        usage = usage or provider.Usage()
        input_tokens, output_tokens = usage.input_tokens, usage.output_tokens
        metered = status == CallStatus.OK and input_tokens is not None and output_tokens is not None
        usd = call_usd([usage.model, self.model], input_tokens, output_tokens) if metered else None
        now = time.monotonic()
        # The call's row and the run's totals commit together: one never counts without
        # the other.
        with transaction.atomic():
            call = self._create(status, http_status, usage, usd, now, first_byte, note)
            if metered:
                add_measured_call(
                    self.target.run.pk,
                    self.target.task_id,
                    input_tokens or 0,
                    output_tokens or 0,
                    usd,
                )
        return call

    def _create(
        self,
        status: str,
        http_status: int | None,
        usage: provider.Usage,
        usd: float | None,
        now: float,
        first_byte: float | None,
        note: str,
    ) -> ModelCall:
        return ModelCall.objects.create(
            run_id=self.target.run.pk,
            episode=self.target.episode,
            task_id=self.target.task_id,
            api=self.api,
            model=(usage.model or self.model)[:200],
            stream=self.stream,
            key_source=self.key_source,
            status=status,
            http_status=http_status,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            usd=usd,
            latency_ms=(now - self.started) * 1000,
            first_byte_ms=(first_byte - self.started) * 1000 if first_byte else None,
            note=note[:300],
        )


def call_forward(record: CallRecord, body: dict[str, Any], key: str) -> Relay:
    """Forward the call and record it; a stream is recorded once its last chunk has passed."""
    try:
        response = provider.send(record.api, body, key)
    except httpx.HTTPError as exc:
        return _provider_failed(record, f"the model provider could not be reached ({_kind(exc)})")
    if response.status_code == 200 and record.stream:
        return Relay(
            status=200,
            content_type=response.headers.get("content-type", "text/event-stream"),
            chunks=_streamed(record, response),
        )
    try:
        content = response.read()
    except httpx.HTTPError as exc:
        return _provider_failed(record, f"the model provider's answer broke off ({_kind(exc)})")
    finally:
        response.close()
    return _answered(record, response, content)


def _answered(record: CallRecord, response: httpx.Response, content: bytes) -> Relay:
    status = response.status_code
    content_type = response.headers.get("content-type", "application/json")
    if status >= 500:
        return _provider_failed(record, f"the model provider failed (HTTP {status})")
    if 300 <= status < 400:
        # Redirects are never followed: the gateway fetches the configured URL and no other.
        return _provider_failed(record, f"the model provider answered a redirect ({status})")
    if status in (401, 403):
        # Never relayed: a provider's message may quote part of the key it refused.
        record.save(CallStatus.REJECTED, http_status=status, note="the provider refused the key")
        if record.key_source == OPERATOR_KEY:
            raise GatewayRefusal(
                502,
                "provider_key_refused",
                "The provider refused the site's key: tell the "
                "site's operator. This call is not counted against the agent.",
            )
        raise GatewayRefusal(
            status, "provider_key_refused", "The provider refused the key in X-Provider-Key."
        )
    if status >= 400:
        record.save(CallStatus.REJECTED, http_status=status, note=f"the provider answered {status}")
        return Relay(status=status, content_type=content_type, content=content)
    usage = provider.Usage()
    if record.stream:
        reader = provider.EventReader()
        reader.feed(content + b"\n")
        usage = reader.usage
    else:
        with contextlib.suppress(ValueError):  # not JSON: relayed as it is, unmetered
            usage.read(json.loads(content))
    record.save(CallStatus.OK, http_status=status, usage=usage)
    return Relay(status=status, content_type=content_type, content=content)


def _streamed(record: CallRecord, response: httpx.Response) -> Iterator[bytes]:
    reader = provider.EventReader()
    chunks = response.iter_raw()
    first_byte: float | None = None
    status, note = CallStatus.OK, ""
    try:
        for chunk in chunks:
            reader.feed(chunk)
            first_byte = first_byte or time.monotonic()
            yield chunk
    except GeneratorExit:
        # The agent hung up mid-stream. The provider's answer is still read to its end so
        # that its usage is counted: hanging up before the last chunk (which carries the
        # usage) must not be a way around the budget.
        status, note = _drained(chunks, reader)
        raise
    except httpx.HTTPError as exc:
        status, note = CallStatus.ERROR, f"the provider's stream broke off ({_kind(exc)})"
    finally:
        response.close()
        reader.feed(b"\n")
        record.save(status, http_status=200, usage=reader.usage, first_byte=first_byte, note=note)


def _drained(chunks: Iterator[bytes], reader: provider.EventReader) -> tuple[str, str]:
    try:
        for chunk in chunks:
            reader.feed(chunk)
    except httpx.HTTPError as exc:
        return CallStatus.ERROR, f"the provider's stream broke off ({_kind(exc)})"
    return CallStatus.OK, "the agent hung up before the end; the whole answer is counted"


def _provider_failed(record: CallRecord, why: str) -> NoReturn:
    # Our sentence only, for the operator: nothing of the request or of any key.
    logger.warning("model call of run %s failed: %s", record.target.run.pk, why)
    record.save(CallStatus.ERROR, http_status=None, note=why)
    raise GatewayRefusal(
        502, "provider_error", f"Upstream error: {why}. This call is not counted against the agent."
    )


def _kind(exc: Exception) -> str:
    # The exception's class only: its text may quote the provider's URL or answer.
    return type(exc).__name__
