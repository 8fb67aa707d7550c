"""Deploy checks for the site's own settings (`manage.py check --deploy`).

Ids continue packs.checks' securebench.W00x series.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, Warning, register


@register(Tags.security, deploy=True)
def secret_key_is_not_generated(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    # The generated key lets a fresh clone run its commands with nothing exported; in
    # production it would sit in the data folder beside the data it signs for, so backups and
    # copies of that folder would carry it.
    if not settings.SECUREBENCH_SECRET_KEY_GENERATED:
        return []
    return [
        Warning(
            "SECRET_KEY is the key generated under the data folder for local use.",
            hint="Set SECRET_KEY (or SECRET_KEY_FILE) in production.",
            id="securebench.W002",
        )
    ]
