"""A stand-in model provider: a real OpenAI-compatible HTTP server on loopback, for the
gateway's tests and its benchmark (bench.gateway).

It answers ``POST /v1/chat/completions`` (streamed or not) and ``POST /v1/messages``
(Anthropic's shape) with a fixed answer and fixed usage, and can be told to fail, to be
slow, or to hold a stream after its first chunk until the caller releases it. It records
every request it gets (path and headers), so a test can see what was, or was not, forwarded.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "gpt-4o-mini"  # a name LiteLLM's price table knows
INPUT_TOKENS, OUTPUT_TOKENS = 120, 30
REPLY_WORDS = ("Hello", " from", " the", " stand-in", ".")


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class StandinState:
    # ok, fail (HTTP 500), slow (waits delay first), hold (a stream holds after its first
    # chunk until release is set), redirect (307 to location)
    mode: str = "ok"
    delay: float = 0.0
    model: str = MODEL  # the model name the answers report
    location: str = ""
    release: threading.Event = field(default_factory=threading.Event)
    received: list[Received] = field(default_factory=list)


class StandinProvider:
    """``with StandinProvider() as provider:`` — ``provider.base_url`` ends with ``/v1``."""

    def __init__(self) -> None:
        self.state = StandinState()
        handler = type("Handler", (StandinHandler,), {"state": self.state})
        self.server = QuietServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> StandinProvider:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.state.release.set()
        self.server.shutdown()
        self.server.server_close()


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer (a timeout under test) is expected, not news.
        return


class StandinHandler(BaseHTTPRequestHandler):
    state: StandinState
    protocol_version = "HTTP/1.1"  # keep-alive, as real providers
    # Headers and body leave in separate writes: without TCP_NODELAY the second waits for
    # the client's delayed ACK (tens of ms on loopback), which no real provider costs.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        return  # quiet: tests read what was received, not a log

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.state.received.append(Received(self.path, dict(self.headers.items()), body))
        if self.state.mode == "slow":
            time.sleep(self.state.delay)
        if self.state.mode == "fail":
            return self._json(500, {"error": {"message": "stand-in failure", "type": "server"}})
        if self.state.mode == "redirect":
            self.send_response(307)
            self.send_header("Location", self.state.location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if self.path == "/v1/chat/completions":
            if body.get("stream"):
                return self._chat_stream(body)
            return self._json(200, chat_answer(self.state.model))
        if self.path == "/v1/messages":
            if body.get("stream"):
                return self._messages_stream()
            return self._json(200, messages_answer(self.state.model))
        return self._json(404, {"error": {"message": f"no route {self.path}"}})

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _events(self, events: list[bytes]) -> None:
        """Chunked transfer, one event per chunk; a held stream waits after the first."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for index, event in enumerate(events):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
            if index == 0 and self.state.mode == "hold":
                self.state.release.wait(timeout=30)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chat_stream(self, body: dict[str, Any]) -> None:
        include_usage = (body.get("stream_options") or {}).get("include_usage") is True
        model = self.state.model
        events = [
            sse({"id": "c1", "model": model, "choices": [{"index": 0, "delta": {"content": w}}]})
            for w in REPLY_WORDS
        ]
        if include_usage:
            events.append(sse({"id": "c1", "model": model, "choices": [], "usage": usage()}))
        self._events([*events, b"data: [DONE]\n\n"])

    def _messages_stream(self) -> None:
        start = {
            "type": "message_start",
            "message": {
                "model": MODEL,
                "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1},
            },
        }
        delta = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hi"}}
        end = {"type": "message_delta", "usage": {"output_tokens": OUTPUT_TOKENS}}
        self._events([sse(start), sse(delta), sse(end), sse({"type": "message_stop"})])


def sse(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def usage() -> dict[str, int]:
    return {
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": OUTPUT_TOKENS,
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
    }


def chat_answer(model: str = MODEL) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(REPLY_WORDS)},
                "finish_reason": "stop",
            }
        ],
        "usage": usage(),
    }


def messages_answer(model: str = MODEL) -> dict[str, Any]:
    return {
        "id": "m1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": "".join(REPLY_WORDS)}],
        "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS},
    }
