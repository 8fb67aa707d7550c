"""CUBE's objects and JSON-RPC 2.0 envelopes, as plain dicts shaped exactly like
``cube-standard`` dumps them (each with its ``_type``).

The site never runs cube's own model validation on what a client sends: a client-sent
``_type`` names a module for the validator to import. Responses are built here by hand and the
tests validate every one of them with cube's models.
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Server errors of our own (JSON-RPC reserves -32000 … -32099 for them).
NOT_VALID = -32001  # unknown, revoked, expired or closed capability
WRONG_STATE = -32002  # e.g. a step before reset, or after the episode ended
NOT_PERMITTED = -32003  # privileged_info for an agent run, evaluate before done
THROTTLED = -32004
BUSY = -32005  # e.g. another attempt of the task is still being scored

OBSERVATION = "cube.core.Observation"
TEXT_CONTENT = "cube.core.TextContent"
STRUCTURED_CONTENT = "cube.core.StructuredContent"
ENVIRONMENT_OUTPUT = "cube.core.EnvironmentOutput"
ACTION_SCHEMA = "cube.core.ActionSchema"
STEP_ERROR = "cube.core.StepError"
TASK_METADATA = "cube.task.TaskMetadata"
TASK_CONFIG = "cube.task.TaskConfig"
BENCHMARK_METADATA = "cube.benchmark.BenchmarkMetadata"


class RpcError(Exception):
    """An error answer; its message is written for the client and never holds internals."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def ok(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "result": result, "id": request_id}


def error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "error": body, "id": request_id}


def text_content(text: str, *, tool_call_id: str | None = None, name: str | None = None) -> dict:
    return {"tool_call_id": tool_call_id, "name": name, "data": text, "_type": TEXT_CONTENT}


def structured_content(
    data: dict[str, Any] | list[Any], *, tool_call_id: str | None = None, name: str | None = None
) -> dict:
    return {"tool_call_id": tool_call_id, "name": name, "data": data, "_type": STRUCTURED_CONTENT}


def step_error(error_type: str, message: str) -> dict[str, Any]:
    # No stack trace: the agent's mistake has none of ours worth showing.
    return {
        "error_type": error_type,
        "exception_str": message,
        "stack_trace": "",
        "_type": STEP_ERROR,
    }


def observation(contents: list[dict[str, Any]], *, err: dict[str, Any] | None = None) -> dict:
    return {"contents": contents, "error": err, "_type": OBSERVATION}


def environment_output(
    obs: dict[str, Any],
    *,
    reward: float = 0.0,
    done: bool = False,
    truncated: bool = False,
    info: dict[str, Any] | None = None,
    err: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "obs": obs,
        "reward": float(reward),
        "done": done,
        "truncated": truncated,
        "info": info or {},
        "error": err,
        "_type": ENVIRONMENT_OUTPUT,
    }


def action_schema(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": parameters,
        "_type": ACTION_SCHEMA,
    }


def task_metadata(task_id: str, description: str, max_steps: int | None) -> dict[str, Any]:
    return {
        "id": task_id,
        "split": "test",
        "abstract_description": description,
        "recommended_max_steps": max_steps,
        "container_config": None,
        "_type": TASK_METADATA,
    }


def task_config(metadata: dict[str, Any]) -> dict[str, Any]:
    # An opaque reference for cube/spawn: the site looks the task up by metadata.id within
    # the run and never validates (or imports) anything else the client sends back.
    return {
        "metadata": metadata,
        "seed": None,
        "tool_config": None,
        "sub_bench_name": None,
        "_type": TASK_CONFIG,
    }


def benchmark_metadata(
    *,
    name: str,
    version: str,
    description: str,
    num_tasks: int,
    requirements: dict[str, Any],
    tags: list[str],
) -> dict[str, Any]:
    return {
        "name": name,
        "version": version,
        "description": description,
        "authors": [],
        "license": "",
        "requirements": requirements,
        "num_tasks": num_tasks,
        "tags": tags,
        "reset_isolation": None,
        "named_subsets": {},
        "_type": BENCHMARK_METADATA,
    }
