"""Capability URLs never reach a log line, however the client spelled the path: the server
routes on the percent-decoded path, so the filter must see what the router sees."""

from __future__ import annotations

import logging

import pytest

from securebench_site.log_filters import RedactCapabilities, redact_capabilities

SECRET = "4DVreu8uQjxssplVfN2Sgm-6LNgm4ljpAk9b5cYPXmU"
ENCODED_SECRET = "".join(f"%{ord(c):02X}" for c in SECRET[:6]) + SECRET[6:]


@pytest.mark.parametrize(
    "path",
    [
        f"/cube/runs/{SECRET}",
        f"/cube/episodes/{SECRET}",
        f"/cube/%72uns/{SECRET}",  # "r" encoded
        f"/cube/runs%2F{SECRET}",  # the slash encoded
        f"/cube/runs%2f{SECRET}",
        f"/%63ube/episodes/{SECRET}",
        f"/cube/runs/{ENCODED_SECRET}",  # the secret itself encoded
        f"/cube/runs/%25{SECRET}",  # encoded twice over
        f"/cube//runs/{SECRET}",
    ],
)
def test_an_access_log_line_keeps_no_secret(path):
    line = f'"POST {path} HTTP/1.1" 200 795'

    redacted = redact_capabilities(line)

    assert SECRET not in redacted and SECRET[6:] not in redacted, redacted
    assert redacted.startswith('"POST /') and redacted.endswith('HTTP/1.1" 200 795')
    assert "[redacted]" in redacted


def test_a_decoded_word_cannot_forge_a_log_line():
    line = f'"POST /cube/runs/{SECRET}%0AINFO%20forged HTTP/1.1" 200 5'

    redacted = redact_capabilities(line)

    assert "\n" not in redacted and SECRET not in redacted


def test_other_lines_are_left_as_they_are():
    line = "GET /packs/demo/v1/?q=100%25%20sure 200 (sha256 " + "ab" * 32 + ")"

    assert redact_capabilities(line) == line


def test_the_filter_rewrites_a_record_with_arguments():
    record = logging.LogRecord(
        "django.server",
        logging.INFO,
        __file__,
        1,
        '"%s %s" %d',
        ("POST", f"/cube/%72uns/{SECRET}", 200),
        None,
    )

    RedactCapabilities().filter(record)

    assert SECRET not in record.getMessage()
