"""Attacks on the CUBE endpoints of a live site (`make run`), each a test, through the real
`cube-standard` client where it can send the attack and raw HTTP where it cannot.

The protocol has no user identity: the URL is the whole credential, so "another run or user"
is another run's URL. Every error answer is checked to be HTTP 200 JSON-RPC whose message
holds no URL secret (cube_driver); the last test checks the site's own output for them.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from cube.client import BenchmarkClient, TaskClient

from tests.conftest import EXAMPLES, REPO_ROOT
from tests.episodes.conftest import WORKER_MARKER, LiveSite, OpenedRun, mc_rows, write_pack
from tests.episodes.cube_driver import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_PERMITTED,
    NOT_VALID,
    PARSE_ERROR,
    THROTTLED,
    WRONG_STATE,
    CheckedBenchmark,
    CheckedTask,
    assert_no_secret,
    check_environment_output,
    expect_rpc_error,
    post_raw,
    rpc_failure,
    secret_of,
    settled,
)

ATTACK_PACK = "attack-mc"  # eight multiple-choice tasks, every right answer "A"
FIVE_STEPS_PACK = "five-steps"  # one task, budgets.steps: 5
THREADS = 8
STEPS_PER_THREAD = 40
# What the stock client would wait for any answer.
CLIENT_TIMEOUT = 10.0


@pytest.fixture(scope="module")
def packs(live: LiveSite, tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("attack-packs")
    live.import_pack(write_pack(folder, ATTACK_PACK, mc_rows(ATTACK_PACK, ["A"] * THREADS)))
    live.import_pack(
        write_pack(folder, FIVE_STEPS_PACK, mc_rows(FIVE_STEPS_PACK, ["A"]), budgets={"steps": 5})
    )


def started(live: LiveSite, pack: str, *, oracle: bool = False) -> tuple[OpenedRun, CheckedTask]:
    """A run with one episode spawned (the run's first task) and reset."""
    opened = live.open_run(pack, oracle=oracle)
    bench = CheckedBenchmark(opened.url)
    task = bench.spawn(bench.task_configs()[0])
    task.reset()
    return opened, task


def episode_url(run_url: str, secret: str) -> str:
    return run_url.split("/cube/runs/")[0] + "/cube/episodes/" + secret


def run_python(task: CheckedTask, code: str, stdin: str = "") -> dict[str, Any]:
    """What a snippet printed as JSON, once it ran to its end."""
    output = task.step("run_python", {"code": code, "stdin": stdin})
    text = output["obs"]["contents"][0]["data"]
    assert text.startswith("exit code: 0\n--- stdout ---\n"), text[-2000:]
    return json.loads(text.split("--- stdout ---\n", 1)[1].split("\n--- stderr", 1)[0])


# --- capabilities -------------------------------------------------------------------------------


def test_a_benchmark_url_with_one_character_changed_is_not_valid(
    live: LiveSite, packs: None
) -> None:
    opened = live.open_run(ATTACK_PACK)
    secret = secret_of(opened.url)
    changed = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    forged = opened.url[: -len(secret)] + changed
    message = expect_rpc_error(NOT_VALID, BenchmarkClient(forged).info)
    assert message == "This URL is not valid: unknown, revoked, expired or closed."
    for method in ("cube/tasks", "cube/task_configs", "cube/shutdown"):
        body = post_raw(forged, json.dumps({"jsonrpc": "2.0", "id": 3, "method": method}))
        assert (body["error"]["code"], body["id"]) == (NOT_VALID, 3), body
    # Shorter, longer, or outside the secret's alphabet: the same answer.
    for bad in (secret[:-1], secret + "A", secret[:-1] + "~", secret[:-1] + "%2B"):
        expect_rpc_error(NOT_VALID, BenchmarkClient(opened.url[: -len(secret)] + bad).info)
    # The real URL still works: nothing was guessed, nothing was locked out.
    assert CheckedBenchmark(opened.url).info()["num_tasks"] == THREADS


def test_a_capability_works_only_for_its_own_run_and_endpoint(live: LiveSite, packs: None) -> None:
    run_a, task_a = started(live, ATTACK_PACK)
    run_b = live.open_run("capitals-short-answer")
    bench_b = CheckedBenchmark(run_b.url)
    # A run's secret is not an episode's, nor the other way round.
    run_secret_as_episode = episode_url(run_a.url, secret_of(run_a.url))
    expect_rpc_error(NOT_VALID, TaskClient(run_secret_as_episode).reset)
    episode_secret_as_run = run_a.url.replace(secret_of(run_a.url), secret_of(task_a.url))
    expect_rpc_error(NOT_VALID, BenchmarkClient(episode_secret_as_run).info)
    # Run B cannot spawn run A's task (another pack): the task config names a task id only.
    config_a = CheckedBenchmark(run_a.url).task_configs()[0]
    message = expect_rpc_error(INVALID_PARAMS, bench_b.spawn, config_a)
    assert config_a["metadata"]["id"] in message and "capitals-short-answer" in message
    # Once run A is shut down, its URLs are dead; run B's still work.
    CheckedBenchmark(run_a.url).shutdown()
    expect_rpc_error(NOT_VALID, task_a.step, "submit_answer", {"answer": "A"})
    expect_rpc_error(NOT_VALID, task_a.evaluate)
    expect_rpc_error(NOT_VALID, CheckedBenchmark(run_a.url).info)
    assert bench_b.info()["name"]
    bench_b.shutdown()


def test_a_closed_episode_is_not_valid_and_what_it_held_is_scored_abandoned(
    live: LiveSite, packs: None
) -> None:
    opened, task = started(live, ATTACK_PACK)
    task.step("submit_answer", {"answer": "A"})
    task.close()
    for call in (task.reset, task.status, task.evaluate, task.close, task.tools_list):
        expect_rpc_error(NOT_VALID, call)
    expect_rpc_error(NOT_VALID, task.step, "final_step")
    CheckedBenchmark(opened.url).shutdown()
    live.evaluation(opened.run_id)
    (episode,) = live.episodes(opened.run_id)
    assert (episode["status"], episode["end_note"]) == ("abandoned", "closed before final_step")
    assert episode["verdict_status"] == "passed"  # its answer was scored as it stood


def test_an_expired_run_is_not_valid_and_closes_itself(live: LiveSite, packs: None) -> None:
    opened, task = started(live, ATTACK_PACK)
    task.step("submit_answer", {"answer": "A"})
    live.shell(
        "import json; from datetime import timedelta; from django.utils import timezone; "
        "from episodes.models import EpisodeRun; print(json.dumps(EpisodeRun.objects.filter("
        f"run_id={opened.run_id}).update(expires_at=timezone.now() - timedelta(minutes=1))))"
    )
    expect_rpc_error(NOT_VALID, task.step, "final_step")
    expect_rpc_error(NOT_VALID, CheckedBenchmark(opened.url).info)
    # The reaper closes the run (no client will call cube/shutdown) and scores what it held.
    evaluation = live.evaluation(opened.run_id, wait=120)
    assert (evaluation["counts"]["passed"], evaluation["counts"]["failed"]) == (1, THREADS - 1)
    (episode,) = live.episodes(opened.run_id)
    assert (episode["status"], episode["end_note"]) == ("abandoned", "the run's URL expired")
    rows = live.results(opened.run_id)
    assert Counter(row["failure_reason"] or "" for row in rows.values()) == {
        "": 1,
        "missing_candidate": THREADS - 1,
    }


def test_a_revoked_run_is_not_valid_and_what_it_held_is_scored_abandoned(
    live: LiveSite, packs: None
) -> None:
    opened, task = started(live, ATTACK_PACK)
    task.step("submit_answer", {"answer": "B"})
    live.shell(
        "import json; from episodes.models import EpisodeRun; "
        "from episodes.services import episode_run_revoke; "
        f"episode_run_revoke(EpisodeRun.objects.get(run_id={opened.run_id})); print('null')"
    )
    expect_rpc_error(NOT_VALID, task.step, "submit_answer", {"answer": "A"})
    expect_rpc_error(NOT_VALID, CheckedBenchmark(opened.url).task_configs)
    evaluation = live.evaluation(opened.run_id, wait=60)
    assert evaluation["counts"]["failed"] == THREADS, evaluation
    (episode,) = live.episodes(opened.run_id)
    assert (episode["status"], episode["end_note"]) == ("abandoned", "the run's URL was revoked")
    assert (episode["verdict_status"], episode["verdict_reason"]) == ("failed", "wrong_answer")


# --- the verdict and privileged information ------------------------------------------------------


def test_evaluate_before_final_step_is_refused(live: LiveSite, packs: None) -> None:
    opened = live.open_run(ATTACK_PACK)
    bench = CheckedBenchmark(opened.url)
    task = bench.spawn(bench.task_configs()[0])
    message = expect_rpc_error(NOT_PERMITTED, task.evaluate)  # before reset
    assert "not done" in message
    task.reset()
    for answer in ("A", "B", "C"):  # an agent hill-climbing on the verdict learns nothing
        task.step("submit_answer", {"answer": answer})
        expect_rpc_error(NOT_PERMITTED, task.evaluate, {"contents": [], "error": None})
    task.step("submit_answer", {"answer": "A"})
    final = settled(task, task.step("final_step"))
    assert task.evaluate()["reward"] == final["reward"] == 1.0
    bench.shutdown()


def test_privileged_info_is_refused_to_an_agent_run(live: LiveSite, packs: None) -> None:
    opened, task = started(live, "python-functions")
    message = expect_rpc_error(NOT_PERMITTED, task.privileged_info)
    assert "only for oracle runs" in message
    CheckedBenchmark(opened.url).shutdown()


def test_privileged_info_is_refused_once_an_oracle_runs_privilege_ended(
    live: LiveSite, packs: None
) -> None:
    opened, task = started(live, "python-functions", oracle=True)
    assert "def " in task.privileged_info()["data"]  # while it holds
    live.shell(
        "import json; from datetime import timedelta; from django.utils import timezone; "
        "from episodes.models import EpisodeRun; print(json.dumps(EpisodeRun.objects.filter("
        f"run_id={opened.run_id}).update(privilege_until=timezone.now() - timedelta(seconds=1))))"
    )
    message = expect_rpc_error(NOT_PERMITTED, task.privileged_info)
    assert "privilege has ended" in message
    CheckedBenchmark(opened.url).shutdown()


# --- run_python against the worker -----------------------------------------------------------

ENVIRONMENT_SNIPPET = """
import json, os
seen = {"environ": dict(os.environ), "proc": {}}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as handle:
                    seen["proc"][f"{pid}/{part}"] = handle.read().decode("utf-8", "replace")
            except OSError as exc:
                seen["proc"][f"{pid}/{part}"] = type(exc).__name__
print(json.dumps(seen))
"""
FORBIDDEN_PREFIXES = ("SECUREBENCH", "SECRET", "DATABASE", "CELERY", "DJANGO", "DEBUG")


def test_run_python_cannot_read_the_workers_environment(live: LiveSite) -> None:
    # The worker really holds these (else the test would prove nothing).
    worker_environ = b"".join(
        Path(f"/proc/{pid}/environ").read_bytes() for pid in live.site.process.worker_pids()
    )
    assert WORKER_MARKER.encode() in worker_environ
    secret_key = (live.site.data_dir / "secret_key").read_text().strip()
    assert secret_key
    opened, task = started(live, "python-functions")
    seen = run_python(task, ENVIRONMENT_SNIPPET)
    names = sorted(seen["environ"])
    assert not [name for name in names if name.upper().startswith(FORBIDDEN_PREFIXES)], names
    assert "PATH" in names
    dumped = json.dumps(seen)
    for value in (WORKER_MARKER, secret_key, str(live.site.data_dir), str(REPO_ROOT)):
        assert value not in dumped
    CheckedBenchmark(opened.url).shutdown()


SEARCH_SNIPPET = """
# CONTROL_MARKER
import json, os, sys
asked = json.loads(sys.stdin.read())
needles = [marker.encode() for marker in asked["markers"]]
hits = {str(index): [] for index in range(len(needles))}
files = 0
skipped = {"/proc", "/sys", "/dev", "/usr"}
for root, dirs, names in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in skipped]
    for name in names:
        path = os.path.join(root, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        try:
            with open(path, "rb") as handle:
                data = handle.read(16 << 20)
        except OSError:
            continue
        files += 1
        for index, needle in enumerate(needles):
            if needle in data:
                hits[str(index)].append(path)
exists = {path: os.path.exists(path) for path in asked["paths"]}
print(json.dumps({"hits": hits, "files": files, "exists": exists, "complete": True}))
"""


def sealed_markers() -> list[str]:
    """Lines of python-functions' hidden tests and reference solutions that its public input
    does not hold (without quotes or backslashes, so that JSON storage keeps them as is)."""
    markers = []
    for line in (EXAMPLES / "python-functions" / "tasks.jsonl").read_text().splitlines():
        row = json.loads(line)
        public = json.dumps(row["input"]) + "".join(str(v) for v in row["input"].values())
        sealed = [row["eval"]["tests"]["code"], row["eval"]["canonical_solution"]]
        for text in sealed:
            for candidate in (part.strip() for part in text.splitlines()):
                quoted = set(candidate) & {'"', "\\"}
                if len(candidate) >= 24 and not quoted and candidate not in public:
                    markers.append(candidate)
    return markers


def test_run_python_cannot_find_an_evaluation_input_or_hidden_value(live: LiveSite) -> None:
    """The whole filesystem the snippet sees, except /usr (the host's read-only system files:
    6 GB, never written by the site), /proc, /sys and /dev, searched for the sealed lines of
    the task's pack. A control marker in the snippet's own file shows the search works."""
    markers = sealed_markers()
    assert len(markers) >= 8, markers
    control = f"control-{time.time_ns()}"
    code = SEARCH_SNIPPET.replace("CONTROL_MARKER", control)
    paths = [str(live.site.data_dir), str(REPO_ROOT), str(EXAMPLES / "python-functions")]
    opened, task = started(live, "python-functions")
    found = run_python(task, code, json.dumps({"markers": [control, *markers], "paths": paths}))
    assert found["complete"] and found["files"] > 0, found
    assert found["hits"]["0"] == ["/opt/securebench/snippet/main.py"], found
    leaked = {
        markers[int(i) - 1]: where for i, where in found["hits"].items() if i != "0" and where
    }
    assert not leaked, leaked
    assert found["exists"] == dict.fromkeys(paths, False), found
    CheckedBenchmark(opened.url).shutdown()


NETWORK_SNIPPET = """
import json, socket
def attempt(host, port):
    try:
        with socket.create_connection((host, port), timeout=2):
            return "connected"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
print(json.dumps({
    "own listener": attempt("127.0.0.1", listener.getsockname()[1]),
    "site": attempt("127.0.0.1", SITE_PORT),
    "outside": attempt("1.1.1.1", 443),
    "outside by name": attempt("example.org", 80),
}))
"""


def test_run_python_has_no_network(live: LiveSite) -> None:
    opened, task = started(live, "python-functions")
    reached = run_python(task, NETWORK_SNIPPET.replace("SITE_PORT", str(live.site.port)))
    # The control: the snippet's own loopback works, so a refusal below is the sandbox's.
    assert reached.pop("own listener") == "connected", reached
    assert all(outcome != "connected" for outcome in reached.values()), reached
    CheckedBenchmark(opened.url).shutdown()


# --- steps after done, budgets, floods -----------------------------------------------------------


def test_steps_after_done_are_refused(live: LiveSite, packs: None) -> None:
    opened, task = started(live, ATTACK_PACK)
    task.step("submit_answer", {"answer": "C"})
    settled(task, task.step("final_step"))
    for name, arguments in (("submit_answer", {"answer": "A"}), ("final_step", None)):
        message = expect_rpc_error(WRONG_STATE, task.step, name, arguments)
        assert "has ended" in message
    expect_rpc_error(WRONG_STATE, task.tools_call, "submit_answer", {"answer": "A"})
    expect_rpc_error(WRONG_STATE, task.reset)
    # The verdict stands: the late answer changed nothing.
    assert task.evaluate()["info"]["reason"] == "wrong_answer"
    CheckedBenchmark(opened.url).shutdown()
    assert live.results(opened.run_id)[f"{ATTACK_PACK}/q1"]["failure_reason"] == "wrong_answer"


def test_a_flood_of_steps_past_the_budget_is_cut_at_the_budget(live: LiveSite, packs: None) -> None:
    opened, task = started(live, FIVE_STEPS_PACK)  # the reset is step 1
    outcomes = []
    for _ in range(50):
        try:
            output = task.step("submit_answer", {"answer": "A"})
            outcomes.append((output["done"], output["truncated"]))
        except RuntimeError as exc:
            outcomes.append(rpc_failure(exc).code)
    assert outcomes == [(False, False)] * 4 + [(True, True)] + [WRONG_STATE] * 45
    CheckedBenchmark(opened.url).shutdown()
    (episode,) = live.episodes(opened.run_id)
    assert (episode["status"], episode["step_count"]) == ("truncated", 6)
    assert live.run(opened.run_id)["over_budget"] is True
    steps = live.shell(
        "import json; from episodes.models import Step; "
        f"print(json.dumps(Step.objects.filter(run_id={opened.run_id}).count()))"
    )
    assert steps == 6


def test_eight_clients_stepping_as_fast_as_they_can_are_throttled_and_nothing_is_lost(
    live: LiveSite, packs: None
) -> None:
    opened = live.open_run(ATTACK_PACK)
    bench = CheckedBenchmark(opened.url)
    tasks = [bench.spawn(config) for config in bench.task_configs()]
    assert len(tasks) == THREADS
    stop = threading.Event()
    pages: list[int | str] = []

    def browse() -> None:
        # Someone reads the site meanwhile, with the stock client's patience.
        while not stop.is_set():
            try:
                answer = httpx.get(f"{live.url}/", timeout=CLIENT_TIMEOUT, follow_redirects=True)
                pages.append(answer.status_code)
            except httpx.HTTPError as exc:
                pages.append(type(exc).__name__)

    def hammer(task: CheckedTask) -> Counter[Any]:
        tally: Counter[Any] = Counter()
        raw = TaskClient(task.url)  # no backing off: as fast as it can
        for _ in range(STEPS_PER_THREAD):
            try:
                check_environment_output(raw.step("submit_answer", {"answer": "A"}))
                tally["accepted"] += 1
            except RuntimeError as exc:
                tally[rpc_failure(exc).code] += 1
        return tally

    for task in tasks:
        task.reset()
    browser = threading.Thread(target=browse)
    browser.start()
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            tallies = list(pool.map(hammer, tasks))
    finally:
        stop.set()
        browser.join()
    total = sum(tallies, Counter())
    assert set(total) <= {"accepted", THROTTLED}, total
    assert total[THROTTLED] > 0 and total["accepted"] > 0, total
    assert pages and set(pages) == {200}, Counter(pages)
    # Every accepted step is recorded, once; nothing refused is (the resets came before).
    recorded = live.shell(
        "import json; from episodes.models import Step; "
        f"print(json.dumps(Step.objects.filter(run_id={opened.run_id}).count()))"
    )
    assert recorded == total["accepted"] + THREADS, (recorded, total)
    per_episode = sorted(episode["step_count"] for episode in live.episodes(opened.run_id))
    assert per_episode == sorted(tally["accepted"] + 1 for tally in tallies)
    # The episodes still end normally, each scoring the answer it sent.
    for task in tasks:
        assert task.step("final_step")["info"]["status"] in ("passed", "scoring")
    bench.shutdown()
    assert live.evaluation(opened.run_id)["counts"]["passed"] == THREADS


# --- huge and malformed requests ---------------------------------------------------------------


def test_a_body_over_the_limit_is_refused_naming_the_limit(live: LiveSite, packs: None) -> None:
    opened, task = started(live, ATTACK_PACK)
    huge = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "cube/step",
            "params": {"name": "submit_answer", "arguments": {"answer": "A" * (3 << 20)}},
        }
    )
    for url in (task.url, opened.url):
        body = post_raw(url, huge, timeout=30)
        assert body["error"]["code"] == INVALID_REQUEST, body
        assert "over 2,097,152 bytes" in body["error"]["message"], body
    assert task.status().startswith("open, 1 steps")  # the reset; the refused body is not one
    CheckedBenchmark(opened.url).shutdown()


def test_big_answers_are_accepted_or_refused_cleanly(live: LiveSite, packs: None) -> None:
    opened, task = started(live, ATTACK_PACK)
    big = task.step("submit_answer", {"answer": "A" * 900_000})
    assert big["error"] is None and "900,000 characters" in big["obs"]["contents"][0]["data"]
    assert len(json.dumps(big)) < 2_000  # the answer is not echoed back
    over = task.step("submit_answer", {"answer": "B" * 1_500_000})
    assert over["error"]["error_type"] == "InvalidArguments", over
    assert "over 1,048,576 characters" in over["error"]["exception_str"]
    final = settled(task, task.step("final_step"))
    # The 900 KB answer (the last one accepted) was scored; the refused one never counted.
    assert final["info"]["status"] == "failed", final
    assert final["info"]["reason"] in ("wrong_answer", "invalid_candidate"), final
    CheckedBenchmark(opened.url).shutdown()
    recorded = live.shell(
        "import json; from episodes.models import Step; print(json.dumps([len(json.dumps("
        f"s.arguments)) for s in Step.objects.filter(run_id={opened.run_id}).order_by('index')]))"
    )
    assert recorded[1] > 900_000 and recorded[2] < 3_000, recorded  # refused: kept bounded


def test_deeply_nested_json_is_refused_without_a_server_error(live: LiveSite, packs: None) -> None:
    opened, task = started(live, ATTACK_PACK)
    depth = 100_000
    nested = "[" * depth + "]" * depth
    in_arguments = (
        '{"jsonrpc": "2.0", "id": 1, "method": "cube/step", "params": {"name": "submit_answer",'
        f' "arguments": {{"answer": {nested}}}}}}}'
    )
    for url in (task.url, opened.url):
        for body in (nested, in_arguments):
            answer = post_raw(url, body, timeout=30)
            assert answer["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST), answer
    # Shallow enough to parse: a clean refusal of the arguments, recorded, not a crash.
    shallow = "[" * 200 + "]" * 200
    output = task.step("submit_answer", {"answer": json.loads(shallow)})
    assert output["error"]["error_type"] == "InvalidArguments", output
    CheckedBenchmark(opened.url).shutdown()


@pytest.mark.parametrize("body", ["[]", '"x"', "1", "null", "true", '[{"jsonrpc": "2.0"}]', "{}"])
def test_a_body_that_is_not_one_request_object_is_an_invalid_request(
    live: LiveSite, packs: None, body: str
) -> None:
    opened = live.open_run(ATTACK_PACK)
    bench = CheckedBenchmark(opened.url)
    task = bench.spawn(bench.task_configs()[0])
    forged = episode_url(opened.url, "x" * 43)
    for url in (opened.url, task.url, forged):
        answer = post_raw(url, body)
        assert answer["error"]["code"] == INVALID_REQUEST, (body, answer)
        assert answer["id"] is None
    bench.shutdown()


def test_what_is_not_a_json_rpc_post_still_gets_a_json_rpc_answer(
    live: LiveSite, packs: None
) -> None:
    opened = live.open_run(ATTACK_PACK)
    bench = CheckedBenchmark(opened.url)
    task = bench.spawn(bench.task_configs()[0])
    for url in (opened.url, task.url):
        for method in ("GET", "PUT", "DELETE"):
            answer = httpx.request(method, url, timeout=CLIENT_TIMEOUT)
            assert answer.status_code == 200 and answer.json()["error"]["code"] == INVALID_REQUEST
        assert post_raw(url, b"")["error"]["code"] == PARSE_ERROR
        assert post_raw(url, b"\xff\xfe{not json")["error"]["code"] == PARSE_ERROR
        missing_version = post_raw(url, '{"id": 9, "method": "cube/info"}')
        assert (missing_version["error"]["code"], missing_version["id"]) == (INVALID_REQUEST, 9)
        unknown = post_raw(url, '{"jsonrpc": "2.0", "id": "u", "method": "os.system"}')
        assert (unknown["error"]["code"], unknown["id"]) == (METHOD_NOT_FOUND, "u")
        listed = post_raw(url, '{"jsonrpc": "2.0", "id": 2, "method": "cube/info", "params": [1]}')
        assert listed["error"]["code"] == INVALID_PARAMS
    expect_rpc_error(METHOD_NOT_FOUND, task._rpc, "cube/info")
    expect_rpc_error(METHOD_NOT_FOUND, bench._rpc, "cube/reset")
    # Missing or wrong params.
    expect_rpc_error(INVALID_PARAMS, bench._rpc, "cube/spawn", {"host": "127.0.0.1"})
    expect_rpc_error(INVALID_PARAMS, bench._rpc, "cube/spawn", {"task_config": {"metadata": {}}})
    expect_rpc_error(INVALID_PARAMS, bench.tasks, None, -1)
    expect_rpc_error(INVALID_PARAMS, bench._rpc, "cube/tasks", {"limit": "all"})
    task.reset()
    expect_rpc_error(INVALID_PARAMS, task._rpc, "cube/step", {})
    expect_rpc_error(INVALID_PARAMS, task._rpc, "cube/step", {"name": ["final_step"]})
    wrong_type = task.step("submit_answer", {"answer": 42})
    assert wrong_type["error"]["error_type"] == "InvalidArguments"
    unknown_tool = task.step("rm_rf", {"path": "/"})
    assert unknown_tool["error"]["error_type"] == "UnknownTool"
    bench.shutdown()


def test_a_client_sent_type_is_never_imported(live: LiveSite, packs: None) -> None:
    """cube's own validators import the module a ``_type`` names; the site never runs them on
    what a client sends. ``this`` prints the Zen of Python when imported: the web server's
    output would show it."""
    opened = live.open_run(ATTACK_PACK)
    bench = CheckedBenchmark(opened.url)
    config = bench.task_configs()[0]
    poisoned = config | {
        "_type": "os.system",
        "metadata": config["metadata"] | {"_type": "this.Zen"},
        "tool_config": {"_type": "this.Tool"},
    }
    task = bench.spawn(poisoned)
    task.reset()
    task.step("submit_answer", {"answer": "A"}, action_id="this.Zen")
    poisoned_obs = {"_type": "this.Zen", "contents": [{"_type": "this.Content"}]}
    settled(task, task.step("final_step"), poisoned_obs)
    assert task.evaluate(poisoned_obs)["reward"] == 1.0
    bench.shutdown()
    output = live.output()
    assert "Beautiful is better than ugly" not in output
    assert "ModuleNotFoundError" not in output and "ImportError" not in output


def test_a_percent_encoded_capability_path_is_redacted_from_the_log(
    live: LiveSite, packs: None
) -> None:
    """The server routes on the decoded path, so these spellings reach the endpoint: the
    access log must not keep what they carry (the last test reads the whole output)."""
    opened = live.open_run(ATTACK_PACK)
    secret = secret_of(opened.url)
    body = {"jsonrpc": "2.0", "method": "cube/info", "id": 1}
    for path in (f"/cube/%72uns/{secret}", f"/cube/runs%2F{secret}"):
        answer = httpx.post(f"{live.url}{path}", json=body, timeout=CLIENT_TIMEOUT)
        assert answer.status_code == 200
        assert answer.json()["result"]["num_tasks"] == THREADS, path
    time.sleep(0.5)  # the access log line is written after the answer
    assert secret not in live.output()


def test_no_url_secret_reaches_the_sites_output(live: LiveSite) -> None:
    output = live.output()
    assert_no_secret(output, "the site's output")
    assert "/cube/runs/[redacted]" in output  # requests were logged, without their secrets
