"""code_completion worker: runs INSIDE the candidate's sandbox (W). Untrusted by design.

Standalone script (stdlib + the sibling ``code_codec.py``), mounted read-only into W and run
as ``python3 -I code_worker.py /work/candidate.py``. It imports the candidate as the module
``candidate`` and answers framed requests (one JSON object per line) on the protocol pipes:

    {"id": n, "op": "names"}                           → {"id": n, "ok": true, "names": {...}}
    {"id": n, "op": "call", "name", "args", "kwargs"}  → {"id": n, "ok": true, "value": ...}
    {"id": n, "op": "get", "name"}                     → {"id": n, "ok": true, "value": ...}
    failure                                            → {"id": n, "ok": false,
                                                          "error": {"type", "message"},
                                                          "stage": "import" | "call"}

Nothing here is trusted: the candidate shares this process and can rewrite any of it. The
design does not need it to be trusted: this process never sees the tests, the expected values
or the verdict channel, and whatever it sends is only data the test sandbox decodes with its
own copy of the codec. The fd juggling below only keeps honest candidates' prints from being
mistaken for frames.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
import types

TYPE_CHECKING = False  # typing only for annotations: one import less at every start-up
if TYPE_CHECKING:
    from typing import Any

MAX_FRAME = 1024 * 1024  # the host relay enforces the same cap; bigger requests are refused


def _protocol_fds() -> tuple[int, int]:
    """Move the protocol pipes off fds 0/1 and point fd 1 (and sys.stdout) at stderr."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # print(), os.write(1, ...) and child processes now land on stderr
    sys.stdout = sys.stderr
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives for the process
    return proto_in, proto_out


class Channel:
    def __init__(self, fd_in: int, fd_out: int) -> None:
        self._in = os.fdopen(fd_in, "rb", buffering=0)
        self._fd_out = fd_out
        self._buffer = b""
        self._write = os.write  # bound now, so a candidate rebinding os.write cannot break us

    def read(self) -> bytes | None:
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_FRAME:
                return None
            chunk = self._in.read(65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = self._write(self._fd_out, view)
            view = view[written:]


def _describe(exc: BaseException) -> dict[str, str]:
    """Type name and message; str() runs candidate code, so it may itself fail."""
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - anything the candidate's __str__ raises
        message = "<unprintable exception>"
    return {"type": type(exc).__name__, "message": message[:2000]}


def _ast_names(source: str) -> list[str]:
    """Top-level names the source defines (def/async def/class and simple assignments)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.extend(_target_names(target))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            names.extend(_target_names(node.target))
    return names


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [name for item in target.elts for name in _target_names(item)]
    return []


def _exposed(module: types.ModuleType, source: str) -> dict[str, Any]:
    """Classify the candidate's names: functions get proxies, data is fetched, modules named."""
    attributes = dict(vars(module))
    defined = _ast_names(source)
    wanted = dict.fromkeys([*defined, *attributes])
    functions: list[str] = []
    data: list[str] = []
    modules: dict[str, str] = {}
    for name in wanted:
        if name.startswith("__") or name not in attributes:
            continue
        value = attributes[name]
        if type(value) is types.ModuleType:
            modules[name] = str(value.__name__)
        elif callable(value):
            # Imported helpers (typing.List, functools.reduce, ...) are not the candidate's
            # API; only what the source defines, or what was made in this module, is.
            if name in defined or getattr(value, "__module__", None) == "candidate":
                functions.append(name)
        else:
            data.append(name)
    return {"functions": functions, "data": data, "modules": modules}


def _import_candidate(path: str) -> tuple[types.ModuleType | None, str, dict[str, str] | None]:
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        source = handle.read()
    spec = importlib.util.spec_from_file_location("candidate", path)
    if spec is None or spec.loader is None:
        return None, source, {"type": "ImportError", "message": "candidate is not loadable"}
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    sys.argv = [os.path.basename(path)]
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and friends are failures too
        return None, source, _describe(exc)
    finally:
        _flush()
    return module, source, None


def _flush() -> None:
    for stream in (sys.__stdout__, sys.__stderr__, sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:  # noqa: BLE001, S110 - a broken stream must not stop serving
            pass


def serve(channel: Channel, module: types.ModuleType | None, source: str, failure: Any) -> None:
    # Bound before the first request: the codec module object is shared with the candidate.
    import code_codec

    to_data, from_data = code_codec.to_data, code_codec.from_data
    dumps, loads = code_codec.dumps_frame, code_codec.loads_frame
    exposed = _exposed(module, source) if module is not None else None

    while True:
        line = channel.read()
        if line is None:
            return
        try:
            request = loads(line)
        except Exception:  # noqa: BLE001 - a garbled request ends the session
            return
        reply = _handle(request, module, exposed, failure, to_data, from_data)
        reply["id"] = request.get("id")
        try:
            frame = dumps(reply)
        except Exception as exc:  # noqa: BLE001 - e.g. a value json cannot write
            frame = dumps(
                {
                    "id": reply["id"],
                    "ok": False,
                    "stage": "call",
                    "error": {
                        "type": "TypeError",
                        "message": f"result cannot be encoded: {_describe(exc)}",
                    },
                }
            )
        _flush()
        channel.write(frame)


def _handle(
    request: dict[str, Any],
    module: types.ModuleType | None,
    exposed: dict[str, Any] | None,
    failure: Any,
    to_data: Any,
    from_data: Any,
) -> dict[str, Any]:
    if module is None or exposed is None:
        return {"ok": False, "stage": "import", "error": failure}
    op = request.get("op")
    if op == "names":
        return {"ok": True, "names": exposed}
    name = request.get("name")
    if op == "get" and name in exposed["data"]:
        try:
            return {"ok": True, "value": to_data(getattr(module, name))}
        except BaseException as exc:  # noqa: BLE001
            return {"ok": False, "stage": "call", "error": _describe(exc)}
    if op == "call" and name in exposed["functions"]:
        return _call(getattr(module, name, None), request, to_data, from_data)
    return {
        "ok": False,
        "stage": "call",
        "error": {"type": "NameError", "message": f"name {name!r} is not exposed by the candidate"},
    }


def _call(function: Any, request: dict[str, Any], to_data: Any, from_data: Any) -> dict[str, Any]:
    try:
        args = from_data(request.get("args"))
        kwargs = from_data(request.get("kwargs"))
        if type(args) is not tuple or type(kwargs) is not dict:
            raise TypeError("malformed call arguments")
    except BaseException as exc:  # noqa: BLE001
        return {"ok": False, "stage": "call", "error": _describe(exc)}
    try:
        result = function(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - SystemExit in a call is just a failure
        return {"ok": False, "stage": "call", "error": _describe(exc)}
    try:
        return {"ok": True, "value": to_data(result)}
    except BaseException as exc:  # noqa: BLE001 - refused (not plain data) or too deep
        return {"ok": False, "stage": "call", "error": _describe(exc)}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: code_worker.py CANDIDATE", file=sys.stderr)
        return 2
    proto_in, proto_out = _protocol_fds()
    channel = Channel(proto_in, proto_out)
    # -I keeps this script's folder off sys.path; add it for the codec only, then drop it so
    # the candidate's imports resolve exactly as they would without us.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import code_codec  # noqa: F401 - imported now, before the candidate can shadow it

    sys.path.remove(here)
    module, source, failure = _import_candidate(argv[1])
    serve(channel, module, source, failure)
    _flush()
    return 0


if __name__ == "__main__":
    # os._exit: skip interpreter teardown, which would run candidate atexit hooks and
    # finalizers after the session is over.
    os._exit(main(sys.argv))
