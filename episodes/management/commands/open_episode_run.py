"""Open an episode run on a contract version and print its benchmark URL (shown this once).

manage.py open_episode_run --pack ID [--version N] [--agent NAME] [--oracle]
                           [--base-url URL] [--json]
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from episodes.services import OraclePrivilege, benchmark_path, episode_run_open
from packs.models import ContractVersion, Pack, VersionState
from runs.evaluators import scoring_problem
from runs.models import RunSource
from runs.services import RunMetadata, draft_refusal

DEFAULT_BASE_URL = "http://127.0.0.1:8000"


class Command(BaseCommand):
    help = (
        "Open a live episode run on a pack version and print its CUBE benchmark URL, which any "
        "CUBE client can drive (the URL is the credential: keep it private)."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # Django's own --version (print Django's version) would shadow the contract version.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--pack", required=True, help="Pack id.")
        parser.add_argument(
            "--version", type=int, help="Version number (default: the latest published)."
        )
        parser.add_argument("--agent", default="", help="Agent name shown on the run's pages.")
        parser.add_argument("--agent-version", default="")
        parser.add_argument("--model", default="", help="Model name shown on the run's pages.")
        parser.add_argument(
            "--oracle",
            action="store_true",
            help="An oracle run: its episodes answer cube/privileged_info with each task's "
            "reference (audited) for SECUREBENCH_ORACLE_EPISODE_MINUTES; never ranked.",
        )
        parser.add_argument(
            "--reason", default="", help="Why an oracle run is opened (recorded in the audit log)."
        )
        parser.add_argument(
            "--base-url",
            default=DEFAULT_BASE_URL,
            help=f"The site's address as clients reach it (default {DEFAULT_BASE_URL}).",
        )
        parser.add_argument("--json", action="store_true", help='Print {"run": ID, "url": URL}.')

    def handle(self, *args: Any, **options: Any) -> None:
        version = _contract_version(options["pack"], options["version"])
        if (problem := scoring_problem(version.contract)) is not None:
            raise CommandError(problem)
        base_url = options["base_url"].rstrip("/")
        if not base_url.startswith(("http://", "https://")):
            raise CommandError(f"--base-url must start with http:// or https://, not {base_url!r}")
        oracle = None
        if options["oracle"]:
            minutes = settings.SECUREBENCH_ORACLE_EPISODE_MINUTES
            oracle = OraclePrivilege(
                until=timezone.now() + timedelta(minutes=minutes),
                reason=options["reason"].strip() or "oracle episode run from the command line",
            )
        agent = options["agent"].strip() or ("oracle agent" if oracle else "")
        opened = episode_run_open(
            contract_version=version,
            metadata=RunMetadata(
                agent_name=agent,
                agent_version=options["agent_version"],
                model_name=options["model"],
            ),
            source=RunSource.COMMAND,
            oracle=oracle,
        )
        url = base_url + benchmark_path(opened.secret)
        if options["json"]:
            self.stdout.write(json.dumps({"run": opened.run.pk, "url": url}))
            return
        self.stdout.write(
            f"Opened episode run {opened.run.pk} on {version.pack.pack_id} v{version.version} "
            f"({'oracle' if oracle else 'agent'} run; its URL works until "
            f"{opened.episode_run.expires_at:%Y-%m-%d %H:%M %Z}).\n"
            f"Benchmark URL (shown this once, keep it private):\n{url}"
        )


def _contract_version(pack_id: str, number: int | None) -> ContractVersion:
    pack = Pack.objects.filter(pack_id=pack_id).first()
    if pack is None:
        raise CommandError(f"no pack {pack_id!r} (see the packs page, or import_pack)")
    versions = pack.versions.order_by("-version")
    if number:
        version = versions.filter(version=number).first()
    else:
        published = versions.filter(state=VersionState.PUBLISHED)
        version = published.first() or versions.first()
    if version is None:
        label = f"version {number}" if number else "any version"
        raise CommandError(f"pack {pack_id!r} has no {label}")
    # Refused before anything is opened; runs.services would refuse the run all the same.
    if (refusal := draft_refusal(version)) is not None:
        raise CommandError(refusal)
    return version
