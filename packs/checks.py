"""System checks for the site's configuration (ids securebench.W00x)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning, register


@register()
def data_dir_exists(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if Path(settings.DATA_DIR).is_dir():
        return []
    return [
        Warning(
            f"The data folder {settings.DATA_DIR} does not exist yet.",
            hint="`make run` creates it; or create it, or set SECUREBENCH_DATA_DIR.",
            id="securebench.W001",
        )
    ]
