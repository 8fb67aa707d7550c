"""A scripted agent for SecureBench episode runs: no model, just the CUBE protocol.

    .venv/bin/python examples/agents/scripted_agent.py BENCHMARK_URL [--limit N]

BENCHMARK_URL is the URL an episode run shows once when it is opened (version page,
`POST /api/v1/runs/` with "mode": "episodes", or `manage.py open_episode_run`). For every
task the agent spawns an episode, resets it, reads its tools, submits a fixed answer and
calls final_step, which comes back with the verdict:

- multiple_choice: the first choice (letter A);
- code_completion: the starter code the task shows (else its prompt), unchanged;
- short_answer, free_response: a fixed short answer;
- anything else: nothing, just final_step.

It scores what a guesser scores; it is here to show the calls a real agent makes, in order.
It needs only the `cube-standard` client (and httpx, which that client uses).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from cube.client import BenchmarkClient, TaskClient

FIXED_ANSWER = "I do not know."
FIRST_CHOICE = "A"
# final_step answers within seconds; a verdict still being scored is read with cube/evaluate.
SCORING_POLLS = 30
SCORING_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class TaskOutcome:
    task_id: str
    status: str  # the verdict's status (passed, failed, pending, …), or "skipped"
    reward: float
    note: str = ""


class AgentError(Exception):
    """Something the person running the agent must fix (bad URL, site not running)."""


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise AgentError(f"{url!r} is not an http(s) URL: pass the benchmark URL of a run")
    if "/cube/runs/" not in parts.path:
        raise AgentError(
            "this is not a benchmark URL: it looks like http://HOST/cube/runs/SECRET "
            "(shown once when an episode run is opened)"
        )
    return url


def task_family(config: dict[str, Any]) -> str:
    """The task's family: the site's abstract description starts with it ("family: title")."""
    description = str(config.get("metadata", {}).get("abstract_description") or "")
    return description.split(":", 1)[0].strip()


def task_payload(reset_output: dict[str, Any]) -> dict[str, Any]:
    """The task's public payload: the structured content named "task" of the first
    observation."""
    for content in reset_output["obs"]["contents"]:
        if content.get("name") == "task" and isinstance(content.get("data"), dict):
            return content["data"]
    return {}


def choose_submission(family: str, payload: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
    """(tool, arguments) of the one submission this agent makes; None: submit nothing."""
    if family == "multiple_choice":
        return "submit_answer", {"answer": FIRST_CHOICE}
    if family == "code_completion":
        code = payload.get("starter_code") or payload.get("prompt") or ""
        return "submit_code", {"code": str(code)}
    if family in ("short_answer", "free_response"):
        return "submit_answer", {"answer": FIXED_ANSWER}
    return None


def run_episode(task: TaskClient, family: str) -> tuple[str, float]:
    """Reset, submit, final_step: the verdict's status and the reward."""
    first = task.reset()
    tools = {tool["name"] for tool in task.tools_list()}
    submission = choose_submission(family, task_payload(first))
    if submission is not None and submission[0] in tools:
        name, arguments = submission
        task.step(name, arguments)
    output = task.step("final_step")
    status = str(output["info"].get("status", "unknown"))
    reward = float(output["reward"])
    polls = 0
    while status == "scoring" and polls < SCORING_POLLS:
        time.sleep(SCORING_POLL_SECONDS)
        verdict = task.evaluate()
        status, reward = str(verdict["info"].get("status", "unknown")), float(verdict["reward"])
        polls += 1
    return status, reward


def attempt_task(bench: BenchmarkClient, config: dict[str, Any]) -> TaskOutcome:
    task_id = str(config["metadata"]["id"])
    try:
        task = bench.spawn(config)
    except RuntimeError as exc:  # e.g. a family not served as an episode yet
        return TaskOutcome(task_id, "skipped", 0.0, note=str(exc))
    try:
        status, reward = run_episode(task, task_family(config))
    finally:
        task.close()
    return TaskOutcome(task_id, status, reward)


def run_agent(url: str, limit: int | None) -> list[TaskOutcome]:
    bench = BenchmarkClient(check_url(url))
    info = bench.info()
    print(f"{info['name']} v{info['version']}: {info['num_tasks']} task(s)")
    outcomes = []
    try:
        for config in bench.task_configs(limit=limit):
            outcome = attempt_task(bench, config)
            note = f"  ({outcome.note})" if outcome.note else ""
            print(f"{outcome.task_id}  {outcome.status}  reward {outcome.reward:g}{note}")
            outcomes.append(outcome)
    finally:
        # Closes the run: tasks never attempted count as missing, the evaluation finishes.
        bench.shutdown()
    return outcomes


def summary(outcomes: list[TaskOutcome]) -> str:
    """E.g. "5 tasks: 1 passed, 4 failed; total reward 1"."""
    counts = Counter(outcome.status for outcome in outcomes)
    by_status = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    total = sum(outcome.reward for outcome in outcomes)
    noun = "task" if len(outcomes) == 1 else "tasks"
    return f"{len(outcomes)} {noun}: {by_status or 'none attempted'}; total reward {total:g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", metavar="BENCHMARK_URL", help="the run's benchmark URL")
    parser.add_argument("--limit", type=int, help="attempt only the first N tasks")
    options = parser.parse_args(argv)
    if options.limit is not None and options.limit < 1:
        parser.error("--limit must be at least 1")
    try:
        outcomes = run_agent(options.url, options.limit)
    except AgentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except httpx.ConnectError:
        print(
            f"error: nothing answers at {urlsplit(options.url).netloc}: is the site running "
            "(make run)?",
            file=sys.stderr,
        )
        return 2
    except httpx.HTTPStatusError as exc:
        print(
            f"error: the site answered HTTP {exc.response.status_code}: check the URL "
            "(copy it whole, as it was shown)",
            file=sys.stderr,
        )
        return 2
    except RuntimeError as exc:  # a JSON-RPC error the site answered
        hint = ""
        if "-32001" in str(exc):
            hint = " (a benchmark URL stops working once its run is shut down, revoked or "
            hint += "expired: open a new run)"
        print(f"error: {exc}{hint}", file=sys.stderr)
        return 1
    print(summary(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
