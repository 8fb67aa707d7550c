"""code_completion test harness: runs INSIDE the test sandbox (T). Trusted; never runs
candidate code.

Standalone script (stdlib + the sibling ``code_codec.py``), mounted read-only into T and run
as ``python3 -I -S code_harness.py --tests /work/tests.py [--entry-point NAME]``. The test
source is the task's evaluation input; it is copied into T's own work dir only. The
candidate lives in another sandbox (W) reachable only through the host relay:

    T → host: {"type": "request", "id": n, "op": "names" | "call" | "get", ...}
    host → T: W's reply for that id, or a host-made one with "gone": true when W is broken
    T → host: {"type": "result", "passed": bool, "stage": ..., "error": ..., ...}  (last)

Every candidate name becomes a proxy in the test globals: functions forward calls, data is
fetched once, values cross only through the codec. Only this script writes T's protocol
pipe (the test source's own prints go to stderr), so the result frame is a channel no
candidate code can reach.
"""

from __future__ import annotations

import ast
import builtins
import os
import sys

# Every import is paid at each verification's start-up: annotations only, no argparse, no
# traceback (a test failure's line is read from the traceback objects directly).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_FRAME = 1024 * 1024
TESTS_FILENAME = "<tests>"  # compile() name: tracebacks give line numbers, never file text
# Importing these has side effects (a browser, a printed poem, a GUI): never on a
# candidate's say-so.
UNSAFE_MODULES = frozenset({"antigravity", "this", "turtle", "turtledemo", "tkinter", "idlelib"})
# Everything the worker names is the candidate's to choose: bounded before it is kept, so no
# candidate can swell the harness's result past the relay's frame cap (which would read as
# our fault, not theirs).
MAX_NAME_CHARS = 200
MAX_ERROR_CHARS = 2000


class CandidateGone(BaseException):
    """The candidate's sandbox died, timed out or broke the protocol.

    A BaseException so that test code's ``except Exception`` cannot swallow it and carry on
    as if the call had merely raised.
    """


class ImportFailed(Exception):
    """The candidate module could not be imported (reported by the worker)."""


class Client:
    def __init__(
        self,
        fd_in: int,
        fd_out: int,
        to_data: Callable[[Any], Any],
        from_data: Callable[[Any], Any],
        dumps: Callable[[dict[str, Any]], bytes],
        loads: Callable[[bytes], dict[str, Any]],
    ) -> None:
        self._in = os.fdopen(fd_in, "rb")
        self._fd_out = fd_out
        self._next_id = 0
        self.calls = 0
        self.to_data, self.from_data, self.dumps, self.loads = to_data, from_data, dumps, loads

    def send(self, frame: dict[str, Any]) -> None:
        data = memoryview(self.dumps(frame))
        while data:
            data = data[os.write(self._fd_out, data) :]

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        self._next_id += 1
        self.send({"type": "request", "id": self._next_id, "op": op, **fields})
        line = self._in.readline(MAX_FRAME + 2)
        if not line.endswith(b"\n"):
            raise CandidateGone("no reply from the candidate")
        try:
            reply = self.loads(line)
        except TypeError:
            raise CandidateGone("malformed reply from the candidate") from None
        if reply.get("id") != self._next_id:
            raise CandidateGone("reply does not match the request")
        if reply.get("gone"):
            raise CandidateGone(str(reply.get("message") or "candidate process ended"))
        if reply.get("ok") is True:
            return reply
        error = reply.get("error")
        if not isinstance(error, dict):
            raise CandidateGone("malformed error reply from the candidate")
        kind, message = str(error.get("type", "Exception")), str(error.get("message", ""))
        if reply.get("stage") == "import":
            raise ImportFailed(f"{kind}: {message}")
        raise _rebuild(kind, message)

    def value(self, reply: dict[str, Any]) -> Any:
        try:
            return self.from_data(reply.get("value"))
        except TypeError as exc:  # CodecError: not plain data → the call fails (A06)
            raise TypeError(f"candidate returned a value that is not plain data: {exc}") from None

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.calls += 1
        try:
            payload = {"args": self.to_data(args), "kwargs": self.to_data(kwargs)}
        except TypeError as exc:
            raise TypeError(f"test argument cannot be passed to the candidate: {exc}") from None
        return self.value(self.request("call", name=name, **payload))


# Exceptions that steer control flow rather than report an error: a StopIteration raised
# through map()/zip() would silently end a test's loop before its assertions ran.
NEVER_REBUILT = frozenset({"StopIteration", "StopAsyncIteration"})


def _rebuild(kind: str, message: str) -> Exception:
    """The candidate's exception as the same builtin type, else RuntimeError."""
    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception) and kind not in NEVER_REBUILT:
        try:
            return cls(message)
        except Exception:  # noqa: BLE001, S110 - e.g. UnicodeDecodeError needs 5 arguments
            pass
    return RuntimeError(f"{kind}: {message}")


def _proxy(client: Client, name: str) -> Callable[..., Any]:
    def proxy(*args: Any, **kwargs: Any) -> Any:
        return client.call(name, args, kwargs)

    proxy.__name__ = proxy.__qualname__ = name
    return proxy


def _allowed(name: str, entry_point: str | None) -> bool:
    """May a candidate name enter the test globals?

    Not if it would shadow a builtin the tests rely on: a candidate defining ``abs`` (or
    ``len``, ``isinstance`` ...) to return 0 would otherwise turn ``assert abs(got - want) <
    1e-6`` into a pass. The entry point itself is always allowed.
    """
    if name == entry_point:
        return True
    return name.isidentifier() and not name.startswith("__") and not hasattr(builtins, name)


def _importable_stdlib(name: str) -> bool:
    """A standard-library module the harness may import under a name the candidate chose:
    dotted identifiers only, none private or a package's ``__main__`` (``unittest.__main__``
    runs a test program on import), outside the modules that act when imported."""
    parts = name.split(".")
    if not all(part.isidentifier() and not part.startswith("_") for part in parts):
        return False
    return parts[0] in sys.stdlib_module_names and parts[0] not in UNSAFE_MODULES


def _seed_globals(
    client: Client, names: dict[str, Any], entry_point: str | None
) -> tuple[dict[str, Any], list[str]]:
    """Test globals holding a proxy or a copy for every candidate name."""
    scope: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    skipped: list[str] = []
    listed = [
        *dict(names.get("modules") or {}),
        *(names.get("functions") or []),
        *(names.get("data") or []),
    ]
    for name in listed:
        if not _allowed(str(name), entry_point):
            skipped.append(str(name)[:MAX_NAME_CHARS])
    for module_name, real_name in dict(names.get("modules") or {}).items():
        if not _allowed(str(module_name), entry_point):
            continue
        # Tests written for one-file HumanEval scripts use the prompt's imports (math, ...):
        # import the same stdlib module here ourselves; the candidate's object never crosses.
        if _importable_stdlib(str(real_name)):
            try:
                scope[str(module_name)] = __import__(str(real_name), fromlist=["_"])
            except BaseException:  # noqa: BLE001 - a module's own exit is no harness fault
                skipped.append(str(module_name)[:MAX_NAME_CHARS])
    for name in list(names.get("functions") or []):
        if _allowed(str(name), entry_point):
            scope[str(name)] = _proxy(client, str(name))
    for name in list(names.get("data") or []):
        if not _allowed(str(name), entry_point):
            continue
        try:
            scope[str(name)] = client.value(client.request("get", name=str(name)))
        except Exception:  # noqa: BLE001 - CandidateGone (BaseException) still propagates
            skipped.append(str(name)[:MAX_NAME_CHARS])  # e.g. a regex: not data, not callable
    return scope, skipped


def _calls_check(tree: ast.Module) -> tuple[bool, bool]:
    """(defines a top-level check(), calls check(...) anywhere)."""
    defines = any(isinstance(node, ast.FunctionDef) and node.name == "check" for node in tree.body)
    calls = any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "check"
        for node in ast.walk(tree)
    )
    return defines, calls


def _failure_line(exc: BaseException) -> int | None:
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == TESTS_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _describe(exc: BaseException) -> str:
    message = str(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text[:MAX_ERROR_CHARS]


def run(client: Client, source: str, entry_point: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {"type": "result", "passed": False}
    try:
        tree = ast.parse(source, TESTS_FILENAME)
        code = compile(tree, TESTS_FILENAME, "exec")
    except SyntaxError as exc:
        return {**result, "stage": "setup", "error": f"test source does not compile: {exc}"}
    result["assert_statements"] = sum(isinstance(node, ast.Assert) for node in ast.walk(tree))
    defines_check, calls_check = _calls_check(tree)
    if defines_check and not calls_check and not entry_point:
        return {**result, "stage": "setup", "error": "tests define check() but no entry point"}

    try:
        names = client.request("names")["names"]
        if not isinstance(names, dict):
            raise CandidateGone("malformed names reply")
        scope, skipped = _seed_globals(client, names, entry_point)
    except ImportFailed as exc:
        return {**result, "stage": "import", "error": str(exc)[:MAX_ERROR_CHARS]}
    except CandidateGone as exc:
        return {**result, "stage": "import", "error": _describe(exc), "gone": True}
    except Exception as exc:  # noqa: BLE001 - the worker's reply is the candidate's doing
        error = f"the candidate's names could not be read: {_describe(exc)}"
        return {**result, "stage": "import", "error": error[:MAX_ERROR_CHARS], "gone": True}
    result["exposed"] = {
        "functions": [str(n)[:MAX_NAME_CHARS] for n in names.get("functions") or []][:50],
        "data": [str(n)[:MAX_NAME_CHARS] for n in names.get("data") or []][:50],
        "skipped": skipped[:50],
    }

    try:
        exec(code, scope)  # noqa: S102 - the task's own test source, in the test sandbox
        if defines_check and not calls_check:
            if entry_point not in scope:
                raise NameError(f"name {entry_point!r} is not defined by the candidate")
            scope["check"](scope[entry_point])
    except BaseException as exc:  # noqa: BLE001 - any exception is a failed test run
        result.update(stage="tests", error=_describe(exc), line=_failure_line(exc))
        result["gone"] = isinstance(exc, CandidateGone)
    else:
        result.update(passed=True, stage="tests")
    result["calls"] = client.calls
    return result


def _options(args: list[str]) -> dict[str, str]:
    """``--tests PATH [--entry-point NAME]`` (the host builds this command line itself)."""
    options: dict[str, str] = {}
    if len(args) % 2:
        raise SystemExit("usage: code_harness.py --tests PATH [--entry-point NAME]")
    for flag, value in zip(args[::2], args[1::2], strict=True):
        if flag not in ("--tests", "--entry-point") or flag in options:
            raise SystemExit(f"code_harness.py: unexpected argument {flag!r}")
        options[flag] = value
    if "--tests" not in options:
        raise SystemExit("code_harness.py: --tests is required")
    return options


def main(argv: list[str]) -> int:
    options = _options(argv[1:])

    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # the test source's prints go to stderr, never onto the result channel
    sys.stdout = sys.stderr

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import code_codec

    sys.path.remove(here)
    client = Client(
        proto_in,
        proto_out,
        code_codec.to_data,
        code_codec.from_data,
        code_codec.dumps_frame,
        code_codec.loads_frame,
    )
    with open(options["--tests"], encoding="utf-8") as handle:
        source = handle.read()
    try:
        result = run(client, source, options.get("--entry-point"))
    except BaseException as exc:  # noqa: BLE001 - report rather than die silently
        result = {"type": "result", "passed": False, "stage": "harness", "error": _describe(exc)}
    sys.stderr.flush()
    client.send(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
