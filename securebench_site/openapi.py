"""OpenAPI schema post-processing (drf-spectacular hook)."""

from __future__ import annotations

from typing import Any

# Answers every API operation may give, documented once here rather than on each view.
STANDARD_ERRORS = {
    "401": "Not signed in (no session, no valid token).",
    "403": "Signed in, but without the permission this needs.",
}
NOT_FOUND = "No such object or page, or not one you may see."
BAD_INPUT = 'Invalid query or body: field errors, e.g. {"field": ["message"]}.'


def document_standard_errors(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """Adds 401/403 to every operation, 404 where the path names an object (or a page) and
    400 where the client sends a query or a body; an operation's own description of a code
    wins. Optional query parameters may be empty (`allowEmptyValue`)."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            parameters = operation.get("parameters", [])
            extra = dict(STANDARD_ERRORS)
            if any(p.get("in") == "path" or p.get("name") == "page" for p in parameters):
                extra["404"] = NOT_FOUND  # a page past the last is a 404 too
            if "requestBody" in operation or any(p.get("in") == "query" for p in parameters):
                extra["400"] = BAD_INPUT
            for parameter in parameters:
                # DRF reads `?pack=` (an optional field left empty) as "not given".
                if parameter.get("in") == "query" and not parameter.get("required"):
                    parameter.setdefault("allowEmptyValue", True)
            responses = operation.setdefault("responses", {})
            for code, description in extra.items():
                responses.setdefault(code, {"description": description})
    return result
