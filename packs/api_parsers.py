"""The API's JSON parser: a 400, never a 500, for JSON nested too deeply to decode or whose
strings are not text.

JSON lets an unpaired surrogate escape ("\\ud800") through, and Python decodes it into a
string that no database, page, log or answer can encode: stored, it broke later pages;
echoed in a 400 (an unknown key), it broke the answer itself. Refused here, as the parse
error it is, before any view sees the body.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from packs.compiler.digest import contains_lone_surrogate


class TextJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document nests too deeply.") from None
        if contains_lone_surrogate(data):
            raise ParseError(
                "JSON parse error - the body holds an unpaired surrogate escape (such as "
                "\\ud800), which is not text"
            )
        return data
