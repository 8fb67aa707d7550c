"""Where layers above pack_health join in without pack_health importing them.

``operations`` knows the workers (their heartbeats): whether any live one can run sandboxed
checks, so that a report whose checks could not run is checked again once one can.
"""

from __future__ import annotations

from collections.abc import Callable

# "" when no live worker can run sandboxed checks; otherwise a digest that changes whenever
# those workers change (a worker started, an image arrived, a backend came back).
SandboxCapability = Callable[[], str]

_providers: list[SandboxCapability] = []


def register_sandbox_capability(provider: SandboxCapability) -> None:
    if provider not in _providers:
        _providers.append(provider)


def sandbox_capability() -> str | None:
    """The registered provider's answer; None when nobody tells (then only time decides)."""
    for provider in _providers:
        return provider()
    return None
