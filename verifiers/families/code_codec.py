"""Plain-data codec shared by the code_completion worker, harness and host relay.

Stdlib only and importable on its own: the same file is mounted read-only into both
sandboxes (Python 3.11 there), so it must not import anything from the project.

Values cross between the candidate's sandbox and the test sandbox only as tagged JSON, never
as objects: pickle would run code on unpickling, and an object crossing with its class would
bring its ``__eq__`` along (always-equal attack, security.md A06). Only these exact types are
accepted (subclasses are refused, because a subclass can override ``__eq__``):

    None, bool, int, float, str       → JSON scalars (float nan/inf and huge ints tagged)
    list                              → JSON array
    tuple, set, frozenset, dict,      → {"t": <tag>, "v": <payload>}
    bytes, complex, big int, nan/inf

Decoding checks every node, so a hostile frame (unknown tag, extra keys, wrong payload shape,
too deep) is refused with ``CodecError`` rather than producing anything but plain data.
"""

from __future__ import annotations

import base64
import binascii
import json
import math

# typing is only for annotations: not importing it saves every sandbox start-up its import.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Deeper values are refused; a candidate returning a self-referencing list must not crash the
# test harness with a RecursionError, and no sane task result nests this deep.
MAX_DEPTH = 100
# Ints beyond the range every JSON implementation round-trips exactly go as decimal text.
SAFE_INT = 2**53
_FLOAT_WORDS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class CodecError(TypeError):
    """A value that is not plain data (on encode) or a malformed frame (on decode)."""


def _type_name(value: Any) -> str:
    # type() cannot be overridden by the value itself, unlike __class__ or __repr__.
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def _encode_float(value: float) -> Any:
    if math.isnan(value):
        return {"t": "float", "v": "nan"}
    if math.isinf(value):
        return {"t": "float", "v": "inf" if value > 0 else "-inf"}
    return value


def _decode_float(raw: Any) -> float:
    if type(raw) is float:
        return raw
    if type(raw) is int:  # json.dumps(1e300) stays a float, but accept integral literals
        return float(raw)
    if type(raw) is dict and set(raw) == {"t", "v"} and raw["t"] == "float":
        word = raw["v"]
        if type(word) is str and word in _FLOAT_WORDS:
            return _FLOAT_WORDS[word]
    raise CodecError("malformed float")


def to_data(value: Any, depth: int = 0) -> Any:
    """The JSON-ready form of a plain value; CodecError for anything else."""
    if depth > MAX_DEPTH:
        raise CodecError("value nests too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if -SAFE_INT < value < SAFE_INT else {"t": "int", "v": str(value)}
    if kind is float:
        return _encode_float(value)
    if kind is list:
        return [to_data(item, depth + 1) for item in value]
    if kind is tuple:
        return {"t": "tuple", "v": [to_data(item, depth + 1) for item in value]}
    if kind is set or kind is frozenset:
        tag = "set" if kind is set else "frozenset"
        return {"t": tag, "v": [to_data(item, depth + 1) for item in value]}
    if kind is dict:
        pairs = [[to_data(k, depth + 1), to_data(v, depth + 1)] for k, v in value.items()]
        return {"t": "dict", "v": pairs}
    if kind is bytes:
        return {"t": "bytes", "v": base64.b64encode(value).decode("ascii")}
    if kind is complex:
        return {"t": "complex", "v": [_encode_float(value.real), _encode_float(value.imag)]}
    raise CodecError(f"{_type_name(value)} is not plain data")


def _items(raw: Any, depth: int) -> list[Any]:
    if type(raw) is not list:
        raise CodecError("malformed container")
    return [from_data(item, depth + 1) for item in raw]


def _hashable(items: list[Any]) -> list[Any]:
    for item in items:
        try:
            hash(item)  # only plain data here, so hashing runs no foreign code
        except TypeError:
            raise CodecError(f"unhashable {type(item).__name__} in set or dict key") from None
    return items


def from_data(raw: Any, depth: int = 0) -> Any:
    """The plain value a JSON-parsed node stands for; CodecError if the node is malformed."""
    if depth > MAX_DEPTH:
        raise CodecError("value nests too deeply")
    kind = type(raw)
    if raw is None or kind is bool or kind is str or kind is int:
        return raw
    if kind is float:
        return raw
    if kind is list:
        return _items(raw, depth)
    if kind is not dict or set(raw) != {"t", "v"}:
        raise CodecError("malformed value")
    tag, payload = raw["t"], raw["v"]
    if tag == "tuple":
        return tuple(_items(payload, depth))
    if tag == "set":
        return set(_hashable(_items(payload, depth)))
    if tag == "frozenset":
        return frozenset(_hashable(_items(payload, depth)))
    if tag == "dict":
        return _decode_dict(payload, depth)
    if tag == "int":
        return _decode_int(payload)
    if tag == "float":
        return _decode_float(raw)
    if tag == "bytes":
        return _decode_bytes(payload)
    if tag == "complex":
        if type(payload) is not list or len(payload) != 2:
            raise CodecError("malformed complex")
        return complex(_decode_float(payload[0]), _decode_float(payload[1]))
    raise CodecError("unknown value tag")


def _decode_dict(payload: Any, depth: int) -> dict[Any, Any]:
    if type(payload) is not list:
        raise CodecError("malformed dict")
    result: dict[Any, Any] = {}
    for pair in payload:
        if type(pair) is not list or len(pair) != 2:
            raise CodecError("malformed dict entry")
        key = _hashable([from_data(pair[0], depth + 1)])[0]
        result[key] = from_data(pair[1], depth + 1)
    return result


def _decode_int(payload: Any) -> int:
    if type(payload) is not str:
        raise CodecError("malformed int")
    try:
        # int() honours the interpreter's digit limit (4300 by default): no quadratic parse.
        return int(payload, 10)
    except ValueError:
        raise CodecError("malformed or oversized int") from None


def _decode_bytes(payload: Any) -> bytes:
    if type(payload) is not str:
        raise CodecError("malformed bytes")
    try:
        return base64.b64decode(payload.encode("ascii"), validate=True)
    except (ValueError, binascii.Error):
        raise CodecError("malformed bytes") from None


def dumps_frame(frame: dict[str, Any]) -> bytes:
    """One protocol frame: compact JSON on a single line (JSON escapes every newline)."""
    return json.dumps(frame, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n"


def loads_frame(line: bytes) -> dict[str, Any]:
    """Parse one frame; CodecError if it is not a JSON object (or too deep to parse)."""
    try:
        frame = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError, UnicodeDecodeError):
        raise CodecError("malformed frame") from None
    if type(frame) is not dict:
        raise CodecError("frame is not an object")
    return frame
