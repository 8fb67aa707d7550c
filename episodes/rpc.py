"""JSON-RPC 2.0 for the two CUBE endpoints: the benchmark (a run) and the task (an episode).

Every answer is HTTP 200 with a JSON-RPC body, whatever was sent: the stock client treats
4xx/5xx as transport failures, its readiness probe ``POST {}`` expects 200 + -32600, and an
error page would put the URL (a capability) in Django's request log. Messages are written for
the client and never carry internals, secrets or the URL.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from episodes import lifecycle, privileged, services, wire
from episodes.models import Episode, EpisodeRun
from episodes.tools import family_tools
from packs.compiler.digest import contains_lone_surrogate
from packs.models import Task
from runs.budgets import contract_budgets

logger = logging.getLogger(__name__)
MAX_LIST = 5000
MAX_COUNT = 2**31 - 1  # offsets and limits: what every database compares without error


@dataclass(frozen=True)
class RpcRequest:
    request_id: Any
    method: str
    params: dict[str, Any]


@dataclass(frozen=True)
class CallContext:
    base_url: str
    ip_address: str | None


def parse(raw: bytes) -> RpcRequest:
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise wire.RpcError(wire.PARSE_ERROR, "Parse error: the body is not JSON") from exc
    if contains_lone_surrogate(body):
        # JSON lets "\ud800" through; no database, log or answer can hold it (nor is the
        # request id safe to echo), so the whole body is refused before anything is read.
        raise wire.RpcError(
            wire.PARSE_ERROR,
            "Parse error: the body holds an unpaired surrogate escape (such as \\ud800), "
            "which is not text",
        )
    if not isinstance(body, dict):
        raise wire.RpcError(wire.INVALID_REQUEST, "Invalid Request: send one JSON-RPC object")
    request_id = body.get("id")
    if not isinstance(request_id, str | int | type(None)) or isinstance(request_id, bool):
        request_id = None
    method = body.get("method")
    if body.get("jsonrpc") != "2.0" or not isinstance(method, str):
        raise _with_id(wire.RpcError(wire.INVALID_REQUEST, "Invalid Request"), request_id)
    params = body.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _with_id(
            wire.RpcError(wire.INVALID_PARAMS, "params must be an object of named parameters"),
            request_id,
        )
    holder = _holding_nul(params, "params")
    if holder is not None:
        # No database column holds a NUL (PostgreSQL refuses it): refused before any lookup.
        # A tool's own arguments are the tool's to refuse, as an observation (episodes.tools).
        raise _with_id(
            wire.RpcError(wire.INVALID_PARAMS, f"{holder} contains a NUL character"), request_id
        )
    return RpcRequest(request_id=request_id, method=method, params=params)


def _holding_nul(value: Any, path: str) -> str | None:
    """The path of the first string (key or value) holding a NUL, outside tool arguments."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in key:
                return path
            if path == "params" and key == "arguments":
                continue
            found = _holding_nul(item, f"{path}.{key}")
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _holding_nul(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _with_id(exc: wire.RpcError, request_id: Any) -> wire.RpcError:
    exc.data = {"id": request_id} if request_id is not None else None
    return exc


def answer(raw: bytes, call: Callable[[RpcRequest], Any]) -> dict[str, Any]:
    request_id = None
    try:
        request = parse(raw)
        request_id = request.request_id
        return wire.ok(request_id, call(request))
    except wire.RpcError as exc:
        if request_id is None and isinstance(exc.data, dict):
            request_id = exc.data.get("id")
            exc.data = None
        return wire.error(request_id, exc.code, exc.message, exc.data)
    except Exception:
        logger.exception("CUBE call failed")
        return wire.error(request_id, wire.INTERNAL_ERROR, "Internal error (the site logged it)")


def method_not_found(method: str) -> wire.RpcError:
    return wire.RpcError(wire.METHOD_NOT_FOUND, f"Method not found: {method[:100]!r}")


# --- the benchmark endpoint ----------------------------------------------------------------


def benchmark_call(secret: str, request: RpcRequest, context: CallContext) -> Any:
    handlers: dict[str, Callable[[EpisodeRun, dict[str, Any], CallContext], Any]] = {
        "cube/info": _info,
        "cube/tasks": _tasks,
        "cube/task_configs": _task_configs,
        "cube/spawn": _spawn,
        "cube/shutdown": _shutdown,
    }
    handler = handlers.get(request.method)
    if handler is None:
        raise method_not_found(request.method)
    return handler(services.episode_run_by_secret(secret), request.params, context)


def _info(episode_run: EpisodeRun, params: dict[str, Any], context: CallContext) -> Any:
    version = episode_run.run.contract_version
    pack = version.pack
    contract = version.contract or {}
    surfaces = {
        key: contract.get(key, [])
        for key in ("allowed_to_modify", "read_only", "required_outputs", "compatible_evaluations")
    }
    description = pack.description or version.manifest.get("description") or ""
    return wire.benchmark_metadata(
        name=pack.title or pack.pack_id,
        version=str(version.version),
        description=description if isinstance(description, str) else "",
        num_tasks=version.task_count,
        requirements={
            "pack_id": pack.pack_id,
            "contract_version": version.version,
            "digest": version.digest,
            # As the contract states them (whole numbers stay whole).
            "budgets": _stated_budgets(contract),
            **surfaces,
            "families": version.family_counts,
            "oracle": episode_run.run.origin == "oracle",
        },
        tags=sorted(version.family_counts),
    )


def _stated_budgets(contract: dict[str, Any]) -> dict[str, Any]:
    budgets = contract.get("budgets") or {}
    return dict(budgets) if isinstance(budgets, dict) else {}


def _listed_tasks(episode_run: EpisodeRun, params: dict[str, Any]) -> list[dict[str, Any]]:
    tasks: QuerySet[Task] = episode_run.run.contract_version.tasks.order_by("position")
    task_id = params.get("task_id")
    if task_id is not None:
        if not isinstance(task_id, str):
            raise wire.RpcError(wire.INVALID_PARAMS, "task_id must be a string")
        tasks = tasks.filter(task_id=task_id[:200])
    offset = _count_param(params, "offset", 0)
    limit = _count_param(params, "limit", None)
    total = tasks.count()
    if limit is None and total - offset > MAX_LIST:
        raise wire.RpcError(
            wire.INVALID_PARAMS,
            f"this benchmark lists {total:,} tasks: page with offset and limit "
            f"(at most {MAX_LIST:,} per call)",
        )
    limit = MAX_LIST if limit is None else min(limit, MAX_LIST)
    steps = contract_budgets(episode_run.run.contract_version.contract).get("steps")
    return [
        wire.task_metadata(
            task.task_id,
            _abstract(task),
            int(steps) if steps is not None else None,
        )
        for task in tasks.only("task_id", "family", "metadata")[offset : offset + limit]
    ]


def _count_param(params: dict[str, Any], name: str, default: int | None) -> int | None:
    value = params.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise wire.RpcError(
            wire.INVALID_PARAMS, f"{name} must be a whole number from 0 to {MAX_COUNT:,}"
        )
    return value


def _abstract(task: Task) -> str:
    # Family and title only: for search, never the objective.
    title = task.metadata.get("title") if isinstance(task.metadata, dict) else None
    return f"{task.family}: {title}" if isinstance(title, str) and title else task.family


def _tasks(episode_run: EpisodeRun, params: dict[str, Any], context: CallContext) -> Any:
    return _listed_tasks(episode_run, params)


def _task_configs(episode_run: EpisodeRun, params: dict[str, Any], context: CallContext) -> Any:
    return [wire.task_config(metadata) for metadata in _listed_tasks(episode_run, params)]


def _spawn(episode_run: EpisodeRun, params: dict[str, Any], context: CallContext) -> Any:
    # host / port choose where the stock server listens: meaningless here, ignored.
    if "task_config" not in params:
        raise wire.RpcError(wire.INVALID_PARAMS, "Missing 'task_config' in params")
    _, secret = services.episode_spawn(episode_run, params["task_config"])
    return context.base_url.rstrip("/") + services.episode_path(secret)


def _shutdown(episode_run: EpisodeRun, params: dict[str, Any], context: CallContext) -> Any:
    services.episode_run_shutdown(episode_run.pk, reason="open when the client shut the run down")
    return None


# --- the task endpoint ---------------------------------------------------------------------

STEPPING_METHODS = frozenset({"cube/reset", "cube/step", "tools/call"})


def task_call(secret: str, request: RpcRequest, context: CallContext) -> Any:
    handlers: dict[str, Callable[[Episode, dict[str, Any], CallContext], Any]] = {
        "tools/list": _tools_list,
        "tools/call": _tools_call,
        "cube/reset": _reset,
        "cube/step": _step,
        "cube/evaluate": _evaluate,
        "cube/close": _close,
        "cube/status": _status,
        "cube/privileged_info": _privileged_info,
    }
    handler = handlers.get(request.method)
    if handler is None:
        raise method_not_found(request.method)
    episode = services.episode_by_secret(secret)
    if request.method in STEPPING_METHODS and lifecycle.steps_throttled(episode.episode_run.run_id):
        raise wire.RpcError(
            wire.THROTTLED, "too many steps in this run in the last second: slow down and retry"
        )
    return handler(episode, request.params, context)


def _tools_list(episode: Episode, params: dict[str, Any], context: CallContext) -> Any:
    return [tool.schema() for tool in family_tools(episode.task.family)]


def _tools_call(episode: Episode, params: dict[str, Any], context: CallContext) -> Any:
    # Counted and recorded like a step: a budget that tools/call could bypass binds nothing.
    outcome = lifecycle.episode_step(
        episode,
        method="tools/call",
        name=params.get("name"),
        arguments=params.get("arguments"),
        action_id=params.get("action_id"),
    )
    return outcome.output["obs"]


def _reset(episode: Episode, params: dict[str, Any], context: CallContext) -> Any:
    return lifecycle.episode_reset(episode)


def _step(episode: Episode, params: dict[str, Any], context: CallContext) -> Any:
    return lifecycle.episode_step(
        episode,
        method="cube/step",
        name=params.get("name"),
        arguments=params.get("arguments"),
        action_id=params.get("action_id"),
    ).output


def _evaluate(episode: Episode, params: dict[str, Any], context: CallContext) -> Any:
    # A client-sent obs is ignored: the verdict is the one recorded for the frozen answer.
    return lifecycle.episode_evaluate(episode)


def _close(episode: Episode, params: dict[str, Any], context: CallContext) -> Any:
    lifecycle.episode_close(episode)
    return None


def _status(episode: Episode, params: dict[str, Any], context: CallContext) -> Any:
    return lifecycle.episode_status(episode)


def _privileged_info(episode: Episode, params: dict[str, Any], context: CallContext) -> Any:
    return privileged.episode_privileged_info(episode, ip_address=context.ip_address)
