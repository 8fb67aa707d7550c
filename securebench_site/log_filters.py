"""Logging filters. The CUBE endpoints' URLs are capabilities (episodes.capabilities): any
log line that quotes a request path, e.g. the development server's access log, gets the
secret segment replaced before it is written anywhere."""

from __future__ import annotations

import logging
import re

CAPABILITY_PATH = re.compile(r"(/cube/(?:runs|episodes)/)[^/\s\"?]+")


def redact_capabilities(text: str) -> str:
    return CAPABILITY_PATH.sub(r"\1[redacted]", text)


class RedactCapabilities(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_capabilities(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
