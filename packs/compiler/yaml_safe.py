"""A YAML loader for manifests that can only produce plain JSON data.

On top of PyYAML's SafeLoader it refuses aliases and anchors (alias bombs: a few hundred bytes
that expand to gigabytes), every explicit tag outside the JSON-like core schema (so no
!!python/..., !!binary, !!set, !!timestamp), duplicate mapping keys and non-string keys, and it
leaves dates as strings so the parsed manifest is always JSON-serialisable for the digest.
"""

from __future__ import annotations

import math
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node

_ALLOWED_TAGS = frozenset(
    "tag:yaml.org,2002:" + name for name in ("str", "int", "float", "bool", "null", "map", "seq")
)
# Implicit resolvers whose results are not JSON (dates) or need aliases to be useful (merge).
_DROPPED_RESOLVERS = frozenset(
    {"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"}
)


class YamlRefused(Exception):
    """A refused construct, with the 1-based line it was found on (when known)."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def _line(mark: Any) -> int | None:
    return mark.line + 1 if mark is not None else None


class _StrictLoader(yaml.SafeLoader):
    # The pure-Python loader (not CSafeLoader) because its composer can be overridden; the
    # manifest is small (max_manifest_bytes) so speed does not matter.
    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in _DROPPED_RESOLVERS]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise YamlRefused(
                "aliases are not allowed (anchors '&' and aliases '*')", _line(event.start_mark)
            )
        tag = getattr(event, "tag", None)
        # "!" is the non-specific tag of a quoted scalar; anything else explicit must be core.
        if tag is not None and tag != "!" and tag not in _ALLOWED_TAGS:
            shown = tag.replace("tag:yaml.org,2002:", "!!")
            raise YamlRefused(f"the YAML tag {shown} is not allowed", _line(event.start_mark))
        return super().compose_node(parent, index)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                raise YamlRefused(
                    f"mapping keys must be strings, not {key!r}", _line(key_node.start_mark)
                )
            if key in seen:
                raise YamlRefused(f"duplicate key '{key}'", _line(key_node.start_mark))
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_float(self, node: Node) -> float:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise YamlRefused("NaN and infinite numbers are not allowed", _line(node.start_mark))
        return value


_StrictLoader.add_constructor("tag:yaml.org,2002:float", _StrictLoader.construct_yaml_float)


def compose_yaml(text: str) -> Node | None:
    """Parse one YAML document into nodes (kept for line numbers of keys).

    Raises YamlRefused, yaml.YAMLError or RecursionError.
    """
    loader = _StrictLoader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def construct_yaml(node: Node | None) -> Any:
    if node is None:  # an empty document
        return None
    loader = _StrictLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_yaml(text: str) -> Any:
    return construct_yaml(compose_yaml(text))
