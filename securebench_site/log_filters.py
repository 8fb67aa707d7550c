"""Logging filters. The CUBE endpoints' URLs are capabilities (episodes.capabilities): any
log line that quotes a request path, e.g. the development server's or gunicorn's access log,
gets the secret segment replaced before it is written anywhere.

Logs quote the path as the client spelled it, but the server routes on the percent-decoded
path: ``/cube/%72uns/SECRET`` and ``/cube/runs%2FSECRET`` reach the benchmark endpoint too,
and a secret may itself be percent-encoded. So every word of a line that holds a ``%`` is
looked at decoded, as the router sees it.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import quote, unquote

CAPABILITY_PATH = re.compile(r"(/cube/+(?:runs|episodes)/+)[^/\s\"?]+")
WORD = re.compile(r"[^\s\"']+")
# What stays readable when a decoded word is written back (the rest is escaped again, so a
# decoded %0A cannot start a forged log line).
KEPT_IN_WORDS = "/[]:?=&;,.-_~"


def redact_capabilities(text: str) -> str:
    return WORD.sub(_redacted_word, text)


def _redacted_word(match: re.Match[str]) -> str:
    word = match.group(0)
    redacted = CAPABILITY_PATH.sub(r"\1[redacted]", word)
    if "%" not in word:
        return redacted
    decoded = _fully_unquoted(word)
    if CAPABILITY_PATH.search(decoded) is None:
        return redacted
    return quote(CAPABILITY_PATH.sub(r"\1[redacted]", decoded), safe=KEPT_IN_WORDS)


def _fully_unquoted(word: str) -> str:
    """Decoded until nothing changes: a proxy in front may decode once more than we think."""
    for _ in range(4):
        decoded = unquote(word)
        if decoded == word:
            break
        word = decoded
    return word


class RedactCapabilities(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_capabilities(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
