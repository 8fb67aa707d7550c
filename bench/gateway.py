"""Workload 16: the metered model gateway (issue 34), against a fresh `make run`.

The stand-in provider (bench.standin: an OpenAI-compatible server on loopback with fixed
answers and usage) runs in this process; the site is configured to forward to it. A bundle
run of arithmetic-mc is opened through the run API ahead of its candidates, which gives it a
model endpoint. Then, alternating call by call so that both see the same machine:

* a chat completion (not streamed) through the gateway, and the same body straight to the
  stand-in. Each side keeps its own connection open (httpx), as an agent's client does.
  Figure: the gateway's added time per call, median through it minus median direct.
  Target: <= 5 ms. Beside it, the ratio of the two medians.
* a streamed chat completion: the time until the first chunk of the body arrives, through
  the gateway and direct. Figure: the added time to first streamed byte (medians).
* anchor: the site's floor, a POST to the CUBE endpoint that is answered before any database
  work, over the same kept-alive connection: what any endpoint of `make run`'s development
  server costs, which the gateway's figure includes.

Every gateway call is metered for real: looked up by its secret, held to the task's budget,
forwarded, recorded as a ModelCall and added to the run's measured usage; the run's measured
calls are checked against the number made at the end.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx

from bench.common import REPO_ROOT, Figure, at_most, main, median
from bench.site import Site
from bench.standin import StandinProvider

WORKLOAD = "16 model gateway"
PACK = "arithmetic-mc"  # imported by `make run`; its contract has no token budget
CALLS, SMOKE_CALLS = 200, 10
WARM_UP_CALLS = 5
TARGET_MS = 5.0
# The run's measured calls and its non-streamed calls' latencies as the gateway recorded them.
RECORDED = (
    "import json; from gateway.models import ModelCall; from runs.models import Run; "
    "run = Run.objects.get(agent_name='bench-gateway'); "
    "print(json.dumps({'calls': run.measured_usage['calls'], 'latencies': list("
    "ModelCall.objects.filter(run=run, stream=False).order_by('id')"
    ".values_list('latency_ms', flat=True))}))"
)
BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hello."}]}


def first_task_id() -> str:
    first = (REPO_ROOT / "examples" / PACK / "tasks.jsonl").read_text().splitlines()[0]
    return json.loads(first)["id"]


def open_run(site: Site) -> str:
    """A bundle run opened ahead of its candidates; its model endpoint URL."""
    api = httpx.Client(headers={"Authorization": f"Token {site.admin_token()}"}, timeout=30)
    body = {"pack": PACK, "version": 1, "agent_name": "bench-gateway"}
    answer = api.post(f"{site.url}/api/v1/runs/", json=body)
    answer.raise_for_status()
    return answer.json()["model_endpoint_url"]


def timed_call(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    answer = client.post(url, json=BODY)
    elapsed = time.perf_counter() - started
    answer.raise_for_status()
    return elapsed * 1000


def timed_first_byte(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    with client.stream("POST", url, json={**BODY, "stream": True}) as answer:
        answer.raise_for_status()
        chunks = answer.iter_raw()
        next(chunks)
        elapsed = time.perf_counter() - started
        for _ in chunks:  # the rest, so that the call is metered and the connection reused
            pass
    return elapsed * 1000


def timed_probe(client: httpx.Client, url: str) -> float:
    """The site's floor: a POST the CUBE endpoint answers (-32600) before any database work,
    through the same web server and kept-alive connection as the gateway's calls."""
    started = time.perf_counter()
    answer = client.post(url, json={})
    elapsed = time.perf_counter() - started
    if answer.json()["error"]["code"] != -32600:
        raise RuntimeError(f"the probe was answered {answer.text}")
    return elapsed * 1000


def alternate(
    measure: Callable[[httpx.Client, str], float],
    gateway: tuple[httpx.Client, str],
    direct: tuple[httpx.Client, str],
    calls: int,
) -> tuple[list[float], list[float]]:
    through, straight = [], []
    for index in range(calls + WARM_UP_CALLS):
        first, second = (gateway, direct) if index % 2 else (direct, gateway)
        times = {id(first): measure(*first), id(second): measure(*second)}
        if index >= WARM_UP_CALLS:
            through.append(times[id(gateway)])
            straight.append(times[id(direct)])
    return through, straight


def run(*, smoke: bool = False) -> list[Figure]:
    calls = SMOKE_CALLS if smoke else CALLS
    with StandinProvider() as standin:
        env = {
            "SECUREBENCH_GATEWAY_BASE_URL": standin.base_url,
            "SECUREBENCH_GATEWAY_API_KEY": "bench-operator-key",
        }
        with Site(env=env) as site:
            endpoint = open_run(site)
            task = {"X-SecureBench-Task": first_task_id()}
            with (
                httpx.Client(headers=task, timeout=30) as via,
                httpx.Client(headers={"Authorization": "Bearer bench"}, timeout=30) as direct,
            ):
                gateway = (via, f"{endpoint}/chat/completions")
                straight = (direct, f"{standin.base_url}/chat/completions")
                call_through, call_direct = alternate(timed_call, gateway, straight, calls)
                byte_through, byte_direct = alternate(timed_first_byte, gateway, straight, calls)
                probe = (via, f"{site.url}/cube/runs/{'x' * 43}")
                floor = [timed_probe(*probe) for _ in range(calls + WARM_UP_CALLS)]
                floor = floor[WARM_UP_CALLS:]
            made = 2 * (calls + WARM_UP_CALLS)  # the probes are no model calls
            recorded = json.loads(site.manage("shell", "-c", RECORDED).stdout.splitlines()[-1])
    if recorded["calls"] != made:
        raise RuntimeError(f"the run measured {recorded['calls']} calls, {made} were made")
    # Non-streamed calls after the warm-up, as the gateway timed them from its view's start.
    in_view = recorded["latencies"][WARM_UP_CALLS : WARM_UP_CALLS + calls]
    added = median(call_through) - median(call_direct)
    added_first_byte = median(byte_through) - median(byte_direct)
    note = f"{calls} calls each, alternating; medians {median(call_through):.2f} ms through, "
    note += f"{median(call_direct):.2f} ms direct"
    return [
        Figure(
            WORKLOAD,
            "added time per call (p50, through minus direct)",
            added,
            "ms",
            target=f"<= {TARGET_MS:.0f} ms",
            met=None if smoke else at_most(added, TARGET_MS),
            note=note,
            signed=True,
        ),
        Figure(
            WORKLOAD,
            "call through the gateway / direct (p50)",
            median(call_through) / median(call_direct),
            "x",
        ),
        Figure(
            WORKLOAD,
            "added time to first streamed byte (p50)",
            added_first_byte,
            "ms",
            note=f"medians {median(byte_through):.2f} ms through, "
            f"{median(byte_direct):.2f} ms direct",
            signed=True,
        ),
        Figure(
            WORKLOAD,
            "anchor: the site's floor, a POST answered before any database work (p50)",
            median(floor),
            "ms",
            note="the web server `make run` starts, on the gateway's kept-alive connection",
        ),
        Figure(
            WORKLOAD,
            "diagnosis: added time per call over the site's floor (p50)",
            added - median(floor),
            "ms",
            signed=True,
        ),
        Figure(
            WORKLOAD,
            "diagnosis: the gateway's own time per call (p50, in its view minus direct)",
            median(in_view) - median(call_direct),
            "ms",
            note="the server's work alone, without the web server and HTTP in front of it; "
            f"in-view median {median(in_view):.2f} ms",
            signed=True,
        ),
    ]


if __name__ == "__main__":
    main(run)
