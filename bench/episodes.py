"""Workload 7: agents acting live (issue 11), driven by the stock CUBE client against a fresh
`make run` (its Celery worker, bubblewrap sandboxes: `SECUREBENCH_SANDBOX=bwrap`).

* Reset and text step: `cube/reset` and a `submit_answer` step on arithmetic-mc, each a
  client-measured round trip (the stock client builds a new httpx client, TLS context
  included, for every call: that is part of every figure here). Anchor: the
  client's own readiness probe (`POST {}`, answered -32600 before any database work) in the
  same run. Target: p50 <= 50 ms each.
* `run_python`: a step on python-functions that runs a two-line snippet on a worker, in a
  fresh bubblewrap sandbox. Anchor: the same snippet through `verifiers.snippet.run_snippet`
  in this process, no site in between. Target: p50 <= 150 ms.
* The HumanEval oracle as episodes: an oracle episode run (`open_episode_run --oracle`), 4
  client threads, each task spawn → reset → privileged_info → submit_code → final_step →
  close, then shutdown; timed from the first spawn until the evaluation is done, every task
  checked passed. Anchor: `submit_run --oracle --wait` on the same pack, timed from the run's
  submission until its evaluation is done (the site's own timestamps), alternating with the
  episode runs. Target: episodes within 2x the bundle path. Beside it, for diagnosis only:
  the same calls over one kept connection pool per client thread, which leaves out the
  stock client's per-call set-up and shows what the site itself costs.

The site throttles a run past SECUREBENCH_EPISODE_STEPS_PER_SECOND steps a second; the latency
loop paces itself under that (the pause is not timed), the oracle clients retry a throttled
call after a short pause and the retries are reported.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from cube.client import BenchmarkClient, TaskClient
from django.conf import settings

from bench.common import Figure, at_most, django_setup, main, median, p95
from bench.site import Site
from verifiers.sandbox.bwrap import BwrapSandbox
from verifiers.snippet import run_snippet

WORKLOAD = "7 episodes"
TEXT_PACK = "arithmetic-mc"  # imported by `make run`, like the next one
CODE_PACK = "python-functions"
TEXT_CALLS, SMOKE_TEXT_CALLS = 200, 10
RUN_PYTHON_CALLS, SMOKE_RUN_PYTHON_CALLS = 100, 5
WARM_UP_CALLS = 3
ORACLE_CLIENTS = 4
ORACLE_REPETITIONS = 3
SNIPPET = "total = sum(range(10))\nprint(total)\n"
SNIPPET_OUTPUT = "45"
# The latency loop keeps under this share of the site's per-run step rate.
PACE_SHARE = 0.6
THROTTLED = "-32004"
THROTTLE_PAUSE = 0.25
EVALUATION_TIMEOUT = 600.0
TEXT_TARGET_MS, RUN_PYTHON_TARGET_MS, ORACLE_TARGET_RATIO = 50.0, 150.0, 2.0

# --- helpers -------------------------------------------------------------------------------


def open_episode_run(site: Site, pack: str, *, oracle: bool = False) -> tuple[int, str]:
    """(run id, benchmark URL) of a new episode run, opened the way the agents guide shows."""
    args = ["open_episode_run", "--pack", pack, "--agent", "bench", "--base-url", site.url]
    printed = site.manage(*args, *(["--oracle"] if oracle else []), "--json").stdout
    opened = json.loads(printed.strip().splitlines()[-1])
    return int(opened["run"]), str(opened["url"])


def timed_ms[T](call: Callable[[], T]) -> tuple[float, T]:
    started = time.perf_counter()
    result = call()
    return (time.perf_counter() - started) * 1000, result


def server_ms(output: dict[str, Any]) -> float | None:
    """The step's own duration as the site measured it (info.profiling.step_ms)."""
    profiling = output.get("info", {}).get("profiling") or {}
    value = profiling.get("step_ms")
    return float(value) if isinstance(value, int | float) else None


def text_of(obs: dict[str, Any]) -> str:
    return "\n".join(str(c["data"]) for c in obs["contents"] if isinstance(c.get("data"), str))


class Pacer:
    """Spaces calls at least ``interval`` seconds apart (start to start); the wait is not
    part of any measured call."""

    def __init__(self, per_second: float) -> None:
        self.interval = 1.0 / per_second
        self.next_start = 0.0

    def wait(self) -> None:
        now = time.perf_counter()
        if now < self.next_start:
            time.sleep(self.next_start - now)
        self.next_start = max(now, self.next_start) + self.interval


def make_pacer() -> Pacer:
    return Pacer(settings.SECUREBENCH_EPISODE_STEPS_PER_SECOND * PACE_SHARE)


def _probe_ms(url: str) -> float:
    """The stock client's readiness probe: HTTP 200 with -32600, no database involved."""
    elapsed, answer = timed_ms(lambda: httpx.post(url, json={}, timeout=10.0))
    if answer.status_code != 200 or answer.json()["error"]["code"] != -32600:
        raise RuntimeError(f"unexpected probe answer: {answer.status_code} {answer.text[:200]}")
    return elapsed


def _end_episodes(bench: BenchmarkClient, tasks: list[TaskClient]) -> None:
    for task in tasks:
        task.step("final_step")
        task.close()
    bench.shutdown()


# --- (a) reset and a text step -------------------------------------------------------------


@dataclass
class Latencies:
    client_ms: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)


def text_latencies(site: Site, calls: int) -> tuple[Latencies, Latencies, list[float]]:
    """(reset, submit_answer step, probe anchor) round trips on the text pack."""
    _, url = open_episode_run(site, TEXT_PACK)
    bench = BenchmarkClient(url)
    tasks = [bench.spawn(config) for config in bench.task_configs()]
    pacer = make_pacer()
    resets, steps, probes = Latencies(), Latencies(), []
    for index in range(WARM_UP_CALLS + calls):
        task = tasks[index % len(tasks)]
        pacer.wait()
        reset_ms, first = timed_ms(task.reset)
        if not first["obs"]["contents"]:
            raise RuntimeError("reset gave an empty observation")
        pacer.wait()
        step_ms, output = timed_ms(lambda t=task: t.step("submit_answer", {"answer": "B"}))
        if output["done"] or output["error"] is not None:
            raise RuntimeError(f"submit_answer failed: {output}")
        probe = _probe_ms(task.url)
        if index < WARM_UP_CALLS:
            continue
        resets.client_ms.append(reset_ms)
        steps.client_ms.append(step_ms)
        steps.server_ms.append(server_ms(output) or 0.0)
        probes.append(probe)
    _end_episodes(bench, tasks)
    return resets, steps, probes


# --- (b) run_python on bwrap ---------------------------------------------------------------


def run_python_latencies(site: Site, calls: int) -> Latencies:
    _, url = open_episode_run(site, CODE_PACK)
    bench = BenchmarkClient(url)
    tasks = [bench.spawn(config) for config in bench.task_configs()]
    for task in tasks:
        task.reset()
    pacer = make_pacer()
    measured = Latencies()
    for index in range(WARM_UP_CALLS + calls):
        task = tasks[index % len(tasks)]
        pacer.wait()
        elapsed, output = timed_ms(lambda t=task: t.step("run_python", {"code": SNIPPET}))
        shown = text_of(output["obs"])
        if output["error"] is not None or SNIPPET_OUTPUT not in shown:
            raise RuntimeError(f"run_python did not print {SNIPPET_OUTPUT}: {output}")
        if index >= WARM_UP_CALLS:
            measured.client_ms.append(elapsed)
            measured.server_ms.append(server_ms(output) or 0.0)
    _end_episodes(bench, tasks)
    return measured


def run_python_backends() -> set[str]:
    """The sandbox backends that ran this benchmark's run_python steps (must be bwrap)."""
    from episodes.models import Step  # noqa: PLC0415 - Django app loading: after django_setup()

    steps = Step.objects.filter(action="run_python")
    return set(steps.values_list("sandbox_backend", flat=True))


def snippet_anchor_ms(calls: int) -> list[float]:
    """The same snippet in a bubblewrap sandbox, in this process: the sandbox's own cost."""
    sandbox = BwrapSandbox()
    measured = []
    for index in range(WARM_UP_CALLS + calls):
        elapsed, outcome = timed_ms(lambda: run_snippet(sandbox, SNIPPET))
        if outcome.stdout.strip() != SNIPPET_OUTPUT:
            raise RuntimeError(f"the anchor snippet printed {outcome.stdout!r}")
        if index >= WARM_UP_CALLS:
            measured.append(elapsed)
    return measured


# --- (c) the HumanEval oracle as episodes vs the bundle path --------------------------------


def with_retry[T](call: Callable[[], T], retries: list[int]) -> T:
    """Call; a throttled answer (-32004) is retried after a short pause and counted."""
    while True:
        try:
            return call()
        except RuntimeError as exc:
            if THROTTLED not in str(exc):
                raise
            retries.append(1)
            time.sleep(THROTTLE_PAUSE)


def oracle_episode(bench: BenchmarkClient, config: dict[str, Any], retries: list[int]) -> None:
    task = with_retry(lambda: bench.spawn(config), retries)
    with_retry(task.reset, retries)
    reference = with_retry(task.privileged_info, retries)
    with_retry(lambda: task.step("submit_code", {"code": reference["data"]}), retries)
    output = with_retry(lambda: task.step("final_step"), retries)
    status = output["info"].get("status")
    while status == "scoring":  # the verdict took longer than final_step waits
        time.sleep(0.2)
        status = with_retry(task.evaluate, retries)["info"].get("status")
    if status != "passed":
        raise RuntimeError(f"{config['metadata']['id']}: oracle {status}: {output['info']}")
    with_retry(task.close, retries)


# The stock client opens a new httpx client for every call, and with it a TLS context that
# loads certifi's CA bundle even for http:// URLs (about 20 ms of CPU a call). A client that
# keeps one connection pool per thread shows what the site itself costs.


def _kept_rpc(http: httpx.Client, url: str, method: str, params: dict | None, req_id: int) -> Any:
    # The stock client's rpc() over a kept connection pool: same body, same error handling.
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": req_id}
    if params is not None:
        body["params"] = params
    answer = http.post(url, json=body, timeout=10.0)
    answer.raise_for_status()
    data = answer.json()
    if "error" in data:
        raise RuntimeError(f"JSON-RPC error {data['error']['code']}: {data['error']['message']}")
    return data["result"]


class KeptTaskClient(TaskClient):
    def __init__(self, url: str, http: httpx.Client) -> None:
        super().__init__(url)
        self.http = http

    def _rpc(self, method: str, params: dict | None = None) -> Any:
        return _kept_rpc(self.http, self.url, method, params, self._next_id())


class KeptBenchmarkClient(BenchmarkClient):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.http = httpx.Client()

    def _rpc(self, method: str, params: dict | None = None) -> Any:
        return _kept_rpc(self.http, self.url, method, params, self._next_id())

    def spawn(self, task_config: dict, host: str | None = None, port: int | None = None) -> Any:
        task_url = self._rpc("cube/spawn", {"task_config": task_config})
        self.http.post(task_url, json={}, timeout=5.0)  # the stock client's readiness probe
        return KeptTaskClient(task_url, self.http)


@dataclass(frozen=True)
class OracleOutcome:
    seconds: float  # first spawn -> evaluation done
    throttled: int  # calls answered -32004 and retried
    client_cpu_ms_per_call: float  # this process's CPU (all threads) over the calls made


# spawn (+ the readiness probe), reset, privileged_info, submit_code, final_step, close
CALLS_PER_TASK = 7


def oracle_episodes(
    site: Site, pack: str, clients: int, make_client: Callable[[str], BenchmarkClient]
) -> OracleOutcome:
    """The pack's oracle as episodes, ``clients`` threads at once, every task checked."""
    run_id, url = open_episode_run(site, pack, oracle=True)
    work: queue.Queue[dict[str, Any]] = queue.Queue()
    retries: list[int] = []
    failures: list[BaseException] = []
    started, cpu_started = time.perf_counter(), time.process_time()
    for config in make_client(url).task_configs():
        work.put(config)
    tasks = work.qsize()

    def client() -> None:
        bench = make_client(url)
        while not failures:
            try:
                config = work.get_nowait()
            except queue.Empty:
                return
            try:
                oracle_episode(bench, config, retries)
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                failures.append(exc)

    threads = [threading.Thread(target=client, name=f"bench-agent-{n}") for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"an oracle episode failed: {failures[0]}") from failures[0]
    make_client(url).shutdown()
    client_cpu = time.process_time() - cpu_started
    evaluation_id = _wait_run_done(run_id)
    seconds = time.perf_counter() - started
    _check_all_passed(evaluation_id)
    calls = tasks * CALLS_PER_TASK + 2 + len(retries)
    return OracleOutcome(seconds, len(retries), client_cpu * 1000 / calls)


def _wait_run_done(run_id: int) -> int:
    from runs.models import Evaluation, EvaluationStatus  # noqa: PLC0415 - Django app loading: after django_setup()

    deadline = time.perf_counter() + EVALUATION_TIMEOUT
    while time.perf_counter() < deadline:
        evaluation = Evaluation.objects.filter(run_id=run_id).order_by("number").first()
        if evaluation is not None and evaluation.status == EvaluationStatus.DONE:
            return evaluation.pk
        time.sleep(0.05)
    raise RuntimeError(f"run {run_id}'s evaluation is not done after {EVALUATION_TIMEOUT} s")


def _check_all_passed(evaluation_id: int) -> None:
    from runs.models import TaskResult  # noqa: PLC0415 - Django app loading: after django_setup()

    results = TaskResult.objects.filter(evaluation_id=evaluation_id)
    wrong = list(results.exclude(status="passed").values("status", "failure_reason")[:3])
    if wrong or not results.exists():
        raise RuntimeError(f"evaluation {evaluation_id}: not every task passed, e.g. {wrong}")


def bundle_seconds(site: Site, pack: str) -> float:
    """`submit_run --oracle --wait`: seconds from the run's submission until its evaluation
    is done, by the site's own timestamps (the command's start-up and its 0.5 s polling
    excluded)."""
    from runs.models import Evaluation  # noqa: PLC0415 - Django app loading: after django_setup()

    printed = site.manage(
        "submit_run", "--pack", pack, "--oracle", "--wait", "--json", "--agent", "bench-bundle"
    ).stdout
    outcome = json.loads(printed.strip().splitlines()[-1])
    evaluation = Evaluation.objects.select_related("run").get(
        run_id=outcome["run"], number=outcome["evaluation"]
    )
    if outcome["status"] != "done" or evaluation.finished_at is None:
        raise RuntimeError(f"the bundle run did not finish: {outcome['status']}")
    _check_all_passed(evaluation.pk)
    return (evaluation.finished_at - evaluation.run.submitted_at).total_seconds()


# --- the workload --------------------------------------------------------------------------


def _latency_figures(name: str, measured: Latencies, target_ms: float, smoke: bool) -> list[Figure]:
    p50 = median(measured.client_ms)
    note = f"{len(measured.client_ms)} calls; p95 {p95(measured.client_ms):.1f} ms"
    if measured.server_ms:
        note += f"; site-measured step median {median(measured.server_ms):.1f} ms"
    return [
        Figure(
            WORKLOAD,
            f"{name}: p50 round trip",
            p50,
            "ms",
            target=f"<= {target_ms:g} ms",
            met=None if smoke else at_most(p50, target_ms),
            note=note,
        ),
        Figure(WORKLOAD, f"{name}: p95 round trip", p95(measured.client_ms), "ms"),
    ]


def latency_figures(site: Site, *, smoke: bool) -> list[Figure]:
    """(a) reset and a text step, (b) run_python on bwrap, each with its anchor."""
    text_calls = SMOKE_TEXT_CALLS if smoke else TEXT_CALLS
    python_calls = SMOKE_RUN_PYTHON_CALLS if smoke else RUN_PYTHON_CALLS
    resets, steps, probes = text_latencies(site, text_calls)
    run_python = run_python_latencies(site, python_calls)
    backends = run_python_backends()
    if backends != {"bwrap"}:
        raise RuntimeError(f"run_python ran on {backends}, not bwrap")
    snippet = snippet_anchor_ms(python_calls)
    return [
        Figure(
            WORKLOAD,
            "anchor: readiness probe POST {} (-32600), p50 round trip",
            median(probes),
            "ms",
            note=f"{len(probes)} calls; p95 {p95(probes):.1f} ms",
        ),
        *_latency_figures(f"cube/reset ({TEXT_PACK})", resets, TEXT_TARGET_MS, smoke),
        *_latency_figures(f"submit_answer step ({TEXT_PACK})", steps, TEXT_TARGET_MS, smoke),
        Figure(
            WORKLOAD,
            "anchor: the snippet in bwrap in-process (run_snippet), p50",
            median(snippet),
            "ms",
            note=f"{len(snippet)} calls; p95 {p95(snippet):.1f} ms",
        ),
        *_latency_figures(
            f"run_python step on bwrap ({CODE_PACK})", run_python, RUN_PYTHON_TARGET_MS, smoke
        ),
        Figure(
            WORKLOAD,
            "run_python p50 / in-process snippet p50",
            median(run_python.client_ms) / median(snippet),
            "x",
            # A ratio, not a difference: on a busy machine the anchor's median can come out
            # above the step's, and a negative "share" would read as nonsense.
            note=(
                "the site's share (HTTP, step rows, the actions queue, the worker): "
                f"{median(run_python.client_ms) - median(snippet):.1f} ms"
            ),
        ),
    ]


def _runs_note(outcomes: list[OracleOutcome]) -> str:
    seconds = ", ".join(f"{outcome.seconds:.1f}" for outcome in outcomes)
    cpu = median([outcome.client_cpu_ms_per_call for outcome in outcomes])
    throttled = sum(outcome.throttled for outcome in outcomes)
    return f"runs: {seconds}; client CPU {cpu:.1f} ms a call; {throttled} throttled calls retried"


def oracle_figures(site: Site, *, smoke: bool) -> list[Figure]:
    """(c) the oracle as episodes (stock client; kept connections) vs the bundle path,
    alternating so that both see the same machine."""
    pack = CODE_PACK if smoke else "humaneval"
    bundles: list[float] = []
    stock: list[OracleOutcome] = []
    kept: list[OracleOutcome] = []
    for _ in range(1 if smoke else ORACLE_REPETITIONS):
        bundles.append(bundle_seconds(site, pack))
        stock.append(oracle_episodes(site, pack, ORACLE_CLIENTS, BenchmarkClient))
        kept.append(oracle_episodes(site, pack, ORACLE_CLIENTS, KeptBenchmarkClient))
    from packs.models import ContractVersion  # noqa: PLC0415 - Django app loading: after django_setup()

    tasks = ContractVersion.objects.filter(pack__pack_id=pack).latest("version").task_count
    bundle = median(bundles)
    episodes = median([outcome.seconds for outcome in stock])
    kept_episodes = median([outcome.seconds for outcome in kept])
    ratio = episodes / bundle
    return [
        Figure(
            WORKLOAD,
            f"anchor: submit_run --oracle --wait, submit -> done ({pack}, {tasks} tasks)",
            bundle,
            "s",
            note="runs: " + ", ".join(f"{seconds:.1f}" for seconds in bundles),
        ),
        Figure(
            WORKLOAD,
            f"oracle as episodes, stock client x {ORACLE_CLIENTS}: first spawn -> done",
            episodes,
            "s",
            note=_runs_note(stock),
        ),
        Figure(
            WORKLOAD,
            "episodes (stock client) / bundle",
            ratio,
            "x",
            target=f"<= {ORACLE_TARGET_RATIO:g}x",
            met=None if smoke else at_most(ratio, ORACLE_TARGET_RATIO),
        ),
        Figure(
            WORKLOAD,
            f"oracle as episodes, kept connections x {ORACLE_CLIENTS}: first spawn -> done",
            kept_episodes,
            "s",
            note=_runs_note(kept),
        ),
        Figure(WORKLOAD, "episodes (kept connections) / bundle", kept_episodes / bundle, "x"),
    ]


def run(*, smoke: bool) -> list[Figure]:
    with Site(env={"SECUREBENCH_SANDBOX": "bwrap"}) as site:
        if not smoke:
            site.manage("import_humaneval")
        django_setup(site.data_dir)
        logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per call otherwise
        print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
        figures = latency_figures(site, smoke=smoke)
        figures += oracle_figures(site, smoke=smoke)
        print(f"load average after: {os.getloadavg()[0]:.2f}", flush=True)
    return figures


if __name__ == "__main__":
    sys.exit(main(run))
