"""python manage.py setup_site — first-start chores for `make run`.

Creates the data folders, a first admin account when none exists (its password is printed
once, here, and stored nowhere else), and imports the packs in examples/ when the database
holds no pack yet; then says what sandboxes the workers will use (the operations page says
it too, per worker). Safe to run at every start.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from packs.management.commands.import_pack import import_path
from packs.models import Pack
from packs.services import UploadRejected
from verifiers.sandbox import SandboxUnavailable, get_sandbox
from verifiers.sandbox.docker_engine import fallback_image

ADMIN_USERNAME = "admin"


class Command(BaseCommand):
    help = "Create data folders, a first admin account and the example packs if missing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--examples",
            type=Path,
            default=Path(settings.BASE_DIR) / "examples",
            help="folder of example packs to import into an empty database",
        )

    def handle(self, *args: object, examples: Path, **options: object) -> None:
        for folder in (settings.DATA_DIR, settings.UPLOAD_WORK_ROOT, settings.BROKER_DIR):
            Path(folder).mkdir(parents=True, exist_ok=True)
        self.create_first_admin()
        if not Pack.objects.exists():
            self.import_examples(examples)
        self.stdout.write(f"  sandbox: {sandbox_line()}")

    def create_first_admin(self) -> None:
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(ADMIN_USERNAME, email="", password=password)
        self.stdout.write(
            self.style.SUCCESS(
                "\n  First admin account created (shown only this once):\n"
                f"    username: {ADMIN_USERNAME}\n    password: {password}\n"
            )
        )

    def import_examples(self, examples: Path) -> None:
        if not examples.is_dir():
            return
        for folder in sorted(p for p in examples.iterdir() if (p / "manifest.yaml").is_file()):
            try:
                outcome = import_path(folder)
            except UploadRejected as rejected:
                self.stderr.write(f"example {folder.name} not imported:\n{rejected}")
                continue
            self.stdout.write(f"  example: {outcome.message}")


def sandbox_line() -> str:
    """What this machine's workers (same environment) run sandboxed checks in, in a line."""
    try:
        sandbox = get_sandbox()
    except SandboxUnavailable as exc:
        return (
            f"none usable ({exc}); code, repository and terminal tasks are not checked until"
            " one is (install bubblewrap, or start Docker and run make sandbox-image)"
        )
    client = getattr(sandbox, "client", None)
    if client is None:
        return "bubblewrap (no Docker engine answers); tasks run on this machine's own python"
    local = fallback_image(client)
    if local is not None:
        return f"Docker; a pack's image this machine lacks and cannot pull runs in {local}"
    return (
        "Docker; a pack's image is pulled when first needed, and without a registry it is not"
        " checked (make sandbox-image builds a local image that stands in)"
    )
