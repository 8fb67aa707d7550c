"""Prices per token from LiteLLM's maintained table (``model_prices_and_context_window``).

The site reads the JSON file the ``litellm`` package ships and never imports the package
(heavy, and nothing of it runs here). A model the table does not know has no price: the call
is recorded with ``usd`` null, never a guess.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

PRICE_FILE = "litellm/model_prices_and_context_window_backup.json"


@dataclass(frozen=True)
class Price:
    input_per_token: float
    output_per_token: float

    def usd(self, input_tokens: int, output_tokens: int) -> float:
        return input_tokens * self.input_per_token + output_tokens * self.output_per_token


def price_table_path() -> Path:
    # locate_file finds the installed file without running litellm's __init__.
    return Path(str(metadata.distribution("litellm").locate_file(PRICE_FILE)))


@cache
def price_table() -> dict[str, Price]:
    """Every priced model of the file, read once per process. Only the two figures of each
    entry are kept: the file is several megabytes of JSON, and a web process that held all
    of it would carry it through every garbage collection."""
    with price_table_path().open(encoding="utf-8") as handle:
        entries = json.load(handle)
    return {
        model: price
        for model, entry in entries.items()
        if (price := entry_price(entry)) is not None
    }


def entry_price(entry: Any) -> Price | None:
    if not isinstance(entry, dict):
        return None
    cost_in, cost_out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if not all(
        isinstance(cost, int | float) and not isinstance(cost, bool) for cost in (cost_in, cost_out)
    ):
        return None
    return Price(float(cost_in), float(cost_out))


def model_price(model: str) -> Price | None:
    return price_table().get(model)


def call_usd(models: list[str], input_tokens: int, output_tokens: int) -> float | None:
    """The price of a call, by the first of ``models`` the table knows (the provider's
    answered name first: it may name the exact dated version)."""
    for model in models:
        price = model_price(model) if model else None
        if price is not None:
            return price.usd(input_tokens, output_tokens)
    return None
