"""Drive a live site's episodes with the real `cube-standard` client, and hold every answer
to cube's own models.

``CheckedBenchmark`` / ``CheckedTask`` are the stock ``BenchmarkClient`` / ``TaskClient``
(same HTTP calls, same 10 s timeout) with each result validated by the model cube itself
would build it from — ``BenchmarkMetadata``, ``TaskMetadata``, ``TaskConfig``,
``ActionSchema``, ``Observation``, ``EnvironmentOutput``, ``Content`` — and dumped back: the
dump must equal what the site sent, so an extra, missing or mistyped field fails. The agents
below (oracle, null, scripted multiple-choice) are what a harness would run.

Every URL secret this module sees is kept in ``ISSUED_SECRETS``; error messages and the
site's output are checked against them (a URL is a credential).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from cube.benchmark import BenchmarkMetadata
from cube.client import BenchmarkClient, TaskClient
from cube.core import ActionSchema, Content, EnvironmentOutput, Observation, TextContent
from cube.task import Task, TaskConfig, TaskMetadata

# JSON-RPC codes (the site's own are in episodes.wire; repeated here: the test speaks HTTP).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
NOT_VALID = -32001
WRONG_STATE = -32002
NOT_PERMITTED = -32003
THROTTLED = -32004
BUSY = -32005

ISSUED_SECRETS: set[str] = set()
_RPC_ERROR = re.compile(r"^JSON-RPC error (-?\d+): (.*)$", re.DOTALL)
# How long a well-behaved agent backs off when the site throttles it, and how often.
THROTTLE_PAUSE = 0.25
THROTTLE_RETRIES = 40
# A verdict still being scored after final_step is polled through cube/evaluate this long.
VERDICT_POLL_SECONDS = 120


def secret_of(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def remember(url: str) -> str:
    ISSUED_SECRETS.add(secret_of(url))
    return url


def assert_no_secret(text: str, where: str) -> None:
    leaked = [secret for secret in ISSUED_SECRETS if secret in text]
    assert not leaked, f"a URL secret appears in {where}"


# --- validation with cube's models ----------------------------------------------------------


def _round_trip(model: type[Any], answer: Any) -> Any:
    """Validate with cube's model, then require its dump to be exactly what the site sent."""
    assert isinstance(answer, dict), answer
    validated = model.model_validate(answer)
    assert validated.model_dump(mode="json") == answer, (model.__name__, answer)
    return validated


def check_observation(answer: Any) -> Observation:
    obs = _round_trip(Observation, answer)
    assert type(obs) is Observation
    return obs


def check_environment_output(answer: Any) -> EnvironmentOutput:
    output = _round_trip(EnvironmentOutput, answer)
    assert type(output) is EnvironmentOutput
    # The site mirrors the observation's error at the top level, as cube's own tools do.
    assert answer["error"] == answer["obs"]["error"], answer
    return output


def check_content(answer: Any) -> Content:
    content = _round_trip(Content, answer)
    assert isinstance(content, Content)
    return content


def check_action_schemas(answer: Any) -> list[ActionSchema]:
    assert isinstance(answer, list) and answer, answer
    schemas = [_round_trip(ActionSchema, item) for item in answer]
    assert all(type(schema) is ActionSchema for schema in schemas)
    return schemas


def check_task_metadata(answer: Any) -> TaskMetadata:
    metadata = _round_trip(TaskMetadata, answer)
    assert type(metadata) is TaskMetadata
    return metadata


class SiteTaskConfig(TaskConfig):
    """cube's TaskConfig is abstract (``make``): a concrete stand-in to validate the site's
    configs with. The site's own configs are opaque references and never made here."""

    def make(self, runtime_context: Any = None) -> Task:
        raise NotImplementedError("a live site's task is spawned by the site, not made here")


def check_task_config(answer: Any) -> dict[str, Any]:
    assert isinstance(answer, dict) and answer.get("_type") == "cube.task.TaskConfig", answer
    check_task_metadata(answer["metadata"])
    fields = {key: value for key, value in answer.items() if key != "_type"}
    config = SiteTaskConfig.model_validate(fields)
    dumped = config.model_dump(mode="json")
    dumped.pop("_type")
    assert dumped == fields, answer
    return answer


def check_benchmark_metadata(answer: Any) -> BenchmarkMetadata:
    metadata = _round_trip(BenchmarkMetadata, answer)
    assert type(metadata) is BenchmarkMetadata
    return metadata


def check_reset(answer: Any) -> Observation:
    assert isinstance(answer, dict) and set(answer) == {"obs", "info"}, answer
    assert isinstance(answer["info"], dict)
    return check_observation(answer["obs"])


def check_evaluation(answer: Any) -> dict[str, Any]:
    assert isinstance(answer, dict) and set(answer) == {"reward", "info"}, answer
    assert isinstance(answer["reward"], float) and isinstance(answer["info"], dict), answer
    return answer


# --- JSON-RPC errors -------------------------------------------------------------------------


@dataclass(frozen=True)
class RpcFailure:
    code: int
    message: str


def rpc_failure(exc: RuntimeError) -> RpcFailure:
    """The code and message of the error the stock client raised (it raises only after an
    HTTP 200: a 4xx/5xx would have been an httpx.HTTPStatusError)."""
    found = _RPC_ERROR.match(str(exc))
    assert found, f"not a JSON-RPC error: {exc!r}"
    message = found.group(2)
    assert_no_secret(message, "an error message")
    return RpcFailure(code=int(found.group(1)), message=message)


def expect_rpc_error(code: int, call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """Call through the stock client and require the JSON-RPC error ``code``; its message."""
    with pytest.raises(RuntimeError) as caught:
        call(*args, **kwargs)
    failure = rpc_failure(caught.value)
    assert failure.code == code, failure
    return failure.message


def post_raw(url: str, content: bytes | str, *, timeout: float = 10.0) -> dict[str, Any]:
    """POST a body exactly as given; the answer must be HTTP 200 JSON-RPC (a dict)."""
    response = httpx.post(
        url, content=content, headers={"Content-Type": "application/json"}, timeout=timeout
    )
    return checked_http_answer(response)


def checked_http_answer(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, (response.status_code, response.text[:300])
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    body = response.json()
    assert isinstance(body, dict) and body.get("jsonrpc") == "2.0", body
    if "error" in body:
        assert set(body["error"]) <= {"code", "message", "data"}, body
        assert_no_secret(response.text, "an error answer")
    return body


# --- the stock clients, every answer validated ----------------------------------------------


def _patient(call: Callable[[], Any]) -> Any:
    """A well-behaved client backs off when throttled (the call was not recorded)."""
    for _ in range(THROTTLE_RETRIES):
        try:
            return call()
        except RuntimeError as exc:
            if rpc_failure(exc).code != THROTTLED:
                raise
        time.sleep(THROTTLE_PAUSE)
    return call()


class CheckedTask(TaskClient):
    def tools_list(self) -> list[dict]:
        answer = super().tools_list()
        check_action_schemas(answer)
        return answer

    def tools_call(
        self, name: str, arguments: dict | None = None, action_id: str | None = None
    ) -> dict:
        answer = _patient(lambda: TaskClient.tools_call(self, name, arguments, action_id))
        check_observation(answer)
        return answer

    def reset(self) -> dict:
        answer = _patient(lambda: TaskClient.reset(self))
        check_reset(answer)
        return answer

    def step(self, name: str, arguments: dict | None = None, action_id: str | None = None) -> dict:
        answer = _patient(lambda: TaskClient.step(self, name, arguments, action_id))
        check_environment_output(answer)
        return answer

    def evaluate(self, obs: dict | None = None) -> dict:
        answer = super().evaluate(obs)
        return check_evaluation(answer)

    def close(self) -> None:
        assert self._rpc("cube/close") is None

    def status(self) -> str:
        answer = super().status()
        assert isinstance(answer, str) and answer, answer
        return answer

    def privileged_info(self) -> dict:
        answer = super().privileged_info()
        check_content(answer)
        return answer


class CheckedBenchmark(BenchmarkClient):
    def info(self) -> dict:
        answer = super().info()
        check_benchmark_metadata(answer)
        return answer

    def tasks(self, task_id: str | None = None, offset: int = 0, limit: int | None = None):
        answer = super().tasks(task_id, offset, limit)
        assert isinstance(answer, list), answer
        for item in answer:
            check_task_metadata(item)
        return answer

    def task_configs(
        self, task_id: str | None = None, offset: int = 0, limit: int | None = None
    ) -> list[dict]:
        answer = super().task_configs(task_id, offset, limit)
        assert isinstance(answer, list), answer
        for item in answer:
            check_task_config(item)
        return answer

    def spawn(self, task_config: dict, host: str | None = None, port: int | None = None):
        task = super().spawn(task_config, host, port)
        site = self.url.split("/cube/runs/")[0]
        assert task.url.startswith(site + "/cube/episodes/"), task.url
        assert secret_of(task.url) != secret_of(self.url)
        remember(task.url)
        return CheckedTask(task.url)

    def shutdown(self) -> None:
        assert self._rpc("cube/shutdown") is None


# --- agents ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeRecord:
    task_id: str
    answer: str | None  # what the agent submitted last (None: nothing)
    final: dict[str, Any]  # final_step's EnvironmentOutput
    verdict: dict[str, Any]  # {reward, info} once scored (final_step's, or cube/evaluate's)


Agent = Callable[[CheckedTask, str], EpisodeRecord]


def objective_payload(reset: dict[str, Any]) -> dict[str, Any]:
    """The task's public payload, given as structured content by cube/reset."""
    for content in reset["obs"]["contents"]:
        if content["_type"] == "cube.core.StructuredContent" and content["name"] == "task":
            return content["data"]
    raise AssertionError(f"no task payload in {reset}")


def submit(task: CheckedTask, text: str) -> dict[str, Any]:
    tools = {tool["name"] for tool in task.tools_list()}
    if "submit_code" in tools:
        output = task.step("submit_code", {"code": text})
    else:
        output = task.step("submit_answer", {"answer": text})
    assert output["error"] is None and not output["done"], output
    return output


def settled(task: CheckedTask, ending: dict[str, Any], obs: dict | None = None) -> dict:
    """The verdict of an episode that just ended (``ending``: the step that ended it), as
    {reward, info}: the step's own, or cube/evaluate's once the site has scored it."""
    verdict = {"reward": ending["reward"], "info": ending["info"]}
    deadline = time.monotonic() + VERDICT_POLL_SECONDS
    while verdict["info"].get("status") == "scoring" and time.monotonic() < deadline:
        time.sleep(0.2)
        verdict = task.evaluate(obs)
    assert verdict["info"].get("status") != "scoring", verdict
    return verdict


def finish(task: CheckedTask, task_id: str, answer: str | None) -> EpisodeRecord:
    """final_step, then the verdict, then close."""
    final = task.step("final_step")
    assert final["done"] is True, final
    verdict = settled(task, final)
    evaluated = task.evaluate()
    assert evaluated["reward"] == verdict["reward"], (evaluated, verdict)
    assert evaluated["info"]["status"] == verdict["info"]["status"], (evaluated, verdict)
    task.close()
    return EpisodeRecord(task_id=task_id, answer=answer, final=final, verdict=evaluated)


def oracle_agent(task: CheckedTask, task_id: str) -> EpisodeRecord:
    task.reset()
    reference = task.privileged_info()
    assert reference["_type"] == "cube.core.TextContent" and reference["name"] == "reference"
    assert TextContent.model_validate(reference).data == reference["data"]
    submit(task, reference["data"])
    return finish(task, task_id, reference["data"])


def null_agent(task: CheckedTask, task_id: str) -> EpisodeRecord:
    task.reset()
    return finish(task, task_id, None)


def first_choice_agent(task: CheckedTask, task_id: str) -> EpisodeRecord:
    """The scripted agent: answers every multiple-choice question with its first choice."""
    reset = task.reset()
    assert objective_payload(reset)["choices"], reset
    assert "\nA. " in reset["obs"]["contents"][0]["data"], reset
    submit(task, "A")
    return finish(task, task_id, "A")


def drive_run(url: str, agent: Agent, *, threads: int = 1) -> dict[str, EpisodeRecord]:
    """One episode per task of the run with ``agent``, then cube/shutdown."""
    remember(url)
    bench = CheckedBenchmark(url)
    info = bench.info()
    listed = bench.tasks()
    configs = bench.task_configs()
    assert info["num_tasks"] == len(listed) == len(configs)
    assert [config["metadata"] for config in configs] == listed

    def one(config: dict[str, Any]) -> EpisodeRecord:
        task = CheckedBenchmark(url).spawn(config)
        return agent(task, config["metadata"]["id"])

    with ThreadPoolExecutor(threads) as pool:
        records = list(pool.map(one, configs))
    bench.shutdown()
    return {record.task_id: record for record in records}


def verdicts(records: Iterable[EpisodeRecord]) -> dict[str, tuple[str, str | None]]:
    return {
        record.task_id: (record.verdict["info"]["status"], record.verdict["info"].get("reason"))
        for record in records
    }


# --- live workspaces (terminal_task, repo_patch) ----------------------------------------------

WAIT_CALLS = 60  # `wait` calls at most for one action's rest (each waits a few seconds)
TEXT_CONTENT = "cube.core.TextContent"


def text_of(obs: dict[str, Any]) -> str:
    """Every text content of an observation, in order, joined by newlines."""
    return "\n".join(str(c["data"]) for c in obs["contents"] if c["_type"] == TEXT_CONTENT)


def named_text(obs: dict[str, Any], name: str) -> str:
    found = [c["data"] for c in obs["contents"] if c.get("name") == name]
    assert found, (name, obs)
    return str(found[0])


@dataclass(frozen=True)
class Acted:
    """One workspace action as the agent saw it: the step's answer, then each ``wait``'s,
    until the action had finished."""

    outputs: list[dict[str, Any]]

    @property
    def first(self) -> dict[str, Any]:
        return self.outputs[0]

    @property
    def last(self) -> dict[str, Any]:
        return self.outputs[-1]

    @property
    def text(self) -> str:
        return "\n".join(text_of(output["obs"]) for output in self.outputs)

    @property
    def error(self) -> dict[str, Any] | None:
        """The StepError of the action itself (its final answer's)."""
        return self.last["obs"]["error"]

    @property
    def waited(self) -> bool:
        return len(self.outputs) > 1


def still_running(output: dict[str, Any]) -> bool:
    return bool(output["info"].get("running"))


def act(task: CheckedTask, name: str, arguments: dict[str, Any] | None = None) -> Acted:
    """A workspace tool call, then ``wait`` until the action has finished (info.running
    false): a command longer than the answer window is answered with its output so far."""
    outputs = [task.step(name, arguments)]
    for _ in range(WAIT_CALLS):
        if not still_running(outputs[-1]):
            break
        outputs.append(task.step("wait"))
    assert not still_running(outputs[-1]), outputs[-1]
    return Acted(outputs)


def bash(task: CheckedTask, command: str, timeout: float | None = None) -> Acted:
    arguments: dict[str, Any] = {"command": command}
    if timeout is not None:
        arguments["timeout"] = timeout
    return act(task, "bash", arguments)


def workspace_reset(task: CheckedTask) -> dict[str, Any]:
    """cube/reset of a workspace episode, then ``wait`` while the workspace is still being
    laid out; the reset's answer, and the observation that holds the file listing."""
    answer = task.reset()
    if answer["info"].get("running"):
        settled_wait = act(task, "wait")
        return {"reset": answer, "listing": settled_wait.last["obs"]}
    return {"reset": answer, "listing": answer["obs"]}


def workspace_reference(task: CheckedTask) -> dict[str, Any]:
    """An oracle run's reference for a workspace task (structured: files, or a patch and the
    repository's folder)."""
    reference = task.privileged_info()
    assert reference["_type"] == "cube.core.StructuredContent", reference
    assert reference["name"] == "reference", reference
    data = reference["data"]
    assert isinstance(data, dict) and data.get("family") in ("terminal_task", "repo_patch")
    return data


def apply_reference(task: CheckedTask, data: dict[str, Any]) -> list[Acted]:
    """What an oracle agent does with the reference: write the expected files, or apply the
    gold patch in the repository with ``git apply`` (the patch given on stdin)."""
    if data["family"] == "terminal_task":
        done = [
            act(task, "write_file", {"path": p, "content": c}) for p, c in data["files"].items()
        ]
        assert all(acted.error is None for acted in done), [a.last for a in done]
        return done
    patch = data["patch"] if data["patch"].endswith("\n") else data["patch"] + "\n"
    end = f"SECUREBENCH_PATCH_{time.time_ns()}"
    folder = "'" + str(data["repo_dir"]).replace("'", "'\\''") + "'"
    applied = bash(task, f"cd {folder} && git apply --verbose <<'{end}'\n{patch}{end}\n")
    assert applied.error is None and "[exit code 0]" in applied.text, applied.text[-3000:]
    return [applied]


def workspace_oracle_agent(task: CheckedTask, task_id: str) -> EpisodeRecord:
    workspace_reset(task)
    apply_reference(task, workspace_reference(task))
    return finish(task, task_id, None)
