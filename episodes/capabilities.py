"""Capability URLs: the stock CUBE client sends no credentials, so the URL is the credential.

A secret has 256 bits from ``secrets``; only its sha256 is stored, so neither a database dump
nor the admin can give a working URL back. Pages, logs and messages name runs and episodes
by id, never by secret (securebench_site.logging redacts the URL path from request logs).
"""

from __future__ import annotations

import hashlib
import re
import secrets

SECRET_BYTES = 32
# token_urlsafe's alphabet; anything else in the URL cannot be one of ours.
SECRET_SHAPE = re.compile(r"^[A-Za-z0-9_-]{43}$")


def new_secret() -> str:
    return secrets.token_urlsafe(SECRET_BYTES)


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii", "replace")).hexdigest()


def looks_like_secret(value: str) -> bool:
    return bool(SECRET_SHAPE.match(value))
