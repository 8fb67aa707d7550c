"""A pack's publishing settings. Publishing a version itself (after its health checks, or
with a written reason) belongs to pack_health, which knows the checks' verdicts."""

from __future__ import annotations

from typing import Any

from packs import access
from packs.models import Pack, PublishPolicy


class PolicyRefused(Exception):
    """The user may not change this pack's settings (they do not maintain it)."""


def pack_set_publish_policy(pack: Pack, policy: str, *, user: Any) -> None:
    """Set how the pack's new versions are published: ``auto`` (once their health checks
    pass) or ``manual`` (by a maintainer's click). Maintainers and superusers only."""
    if not access.can_manage(user, pack):
        raise PolicyRefused("Only a maintainer of this pack may change how it is published.")
    if policy not in PublishPolicy.values:
        known = " or ".join(PublishPolicy.values)
        raise ValueError(f"Unknown publish policy {policy!r}: choose {known}.")
    if pack.publish_policy != policy:
        pack.publish_policy = policy
        pack.save(update_fields=["publish_policy"])


def policy_text(pack: Pack) -> str:
    """How the pack's new versions are published, as a sentence ending."""
    return PublishPolicy(pack.publish_policy).label
