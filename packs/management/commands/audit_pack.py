"""python manage.py audit_pack PATH [--json] [--sandbox bwrap|docker] — a pack's health
checks before upload, for authors and their CI.

Exit status: 0 healthy, 1 warnings, 2 failing, 3 invalid pack (or no such path), 4 not
checked (this machine could not run a check: no sandbox backend, an image it cannot get).
"""

from __future__ import annotations

import json as json_module
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from packs.audit import EXIT_INVALID, AuditReport, UnavailableSandbox, audit_folder, pack_folder
from packs.compiler import PackError, Problem, more_problems_text
from packs.compiler.archive import ArchiveError
from packs.services import archive_limits, compile_limits
from verifiers.pack_findings import CHECKS, Finding
from verifiers.sandbox import Sandbox, SandboxUnavailable, get_sandbox

SEVERITY_ORDER = {"failing": 0, "not_checked": 1, "warning": 2, "info": 3}


class Command(BaseCommand):
    help = (
        "Run a pack's health checks (oracle, repeat, null, adversarial attacks, leak audit) on"
        " a pack folder or .zip/.tar.gz archive. Exit status: 0 healthy, 1 warnings,"
        " 2 failing, 3 invalid pack, 4 not checked (no sandbox or image on this machine)."
    )
    # Nothing here reads the database; the project's checks would only slow a CI step down.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="pack folder or archive")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument(
            "--sandbox",
            choices=("bwrap", "docker"),
            default=None,
            help="backend for code, repository and terminal tasks"
            " (default: SECUREBENCH_SANDBOX, else Docker when it answers, else bwrap)",
        )
        parser.add_argument(
            "--jobs", type=int, default=None, help="verifications at once (default: one a core)"
        )

    def handle(
        self,
        *args: object,
        path: Path,
        json: bool = False,
        sandbox: str | None = None,
        jobs: int | None = None,
        **options: object,
    ) -> None:
        status = self.audit(path, as_json=json, backend=sandbox, jobs=jobs)
        if status:
            raise SystemExit(status)

    def audit(self, path: Path, *, as_json: bool, backend: str | None, jobs: int | None) -> int:
        if not path.exists():
            return self.invalid(as_json, [f"{path}: no such file or folder"], [])
        try:
            with pack_folder(path, archive_limits=archive_limits()) as folder:
                report = audit_folder(
                    folder,
                    sandbox=sandbox_opener(backend),
                    jobs=jobs if jobs and jobs > 0 else None,
                    compile_limits=compile_limits(),
                    allowed_commands=settings.SECUREBENCH_ALLOWED_VERIFIER_COMMANDS,
                    progress=self.progress if self.stderr.isatty() else None,
                )
        except ArchiveError as exc:
            return self.invalid(as_json, [str(exc)], [])
        except PackError as exc:
            return self.invalid(as_json, [], exc.problems, unlisted=exc.unlisted)
        if as_json:
            self.stdout.write(json_module.dumps(report.as_json(), indent=2, default=str))
        else:
            self.stdout.write(report_text(report))
        return report.exit_status

    def invalid(
        self, as_json: bool, messages: list[str], problems: list[Problem], *, unlisted: int = 0
    ) -> int:
        if as_json:
            self.stdout.write(
                json_module.dumps(
                    {
                        "verdict": "invalid",
                        "errors": messages,
                        "problems": [problem_json(problem) for problem in problems],
                        "more_problems": unlisted,  # found past the cap, not listed
                    },
                    indent=2,
                )
            )
        else:
            lines = ["invalid pack:", *(f"  {m}" for m in messages)]
            lines += [line for problem in problems for line in problem_lines(problem)]
            if unlisted:
                lines.append(f"  {more_problems_text(unlisted)}")
            self.stderr.write("\n".join(lines))
        return EXIT_INVALID

    def progress(self, done: int, total: int) -> None:
        self.stderr.write(f"checked {done}/{total} tasks")


def sandbox_opener(backend: str | None) -> Callable[[], Sandbox]:
    """Opens the chosen backend (None: the site's SECUREBENCH_SANDBOX, else auto) when a task
    first needs one; one that cannot open makes every sandboxed check an error, reported."""

    def open_sandbox() -> Sandbox:
        try:
            return get_sandbox(backend)
        except SandboxUnavailable as exc:
            return UnavailableSandbox(str(exc))

    return open_sandbox


# --- rendering -----------------------------------------------------------------------------------


def problem_json(problem: Problem) -> dict[str, Any]:
    return {
        "file": problem.file,
        "line": problem.line,
        "field": problem.field,
        "message": problem.message,
    }


def problem_lines(problem: Problem) -> list[str]:
    lines = [f"  {problem}"]
    if problem.excerpt:
        lines += [f"      {problem.excerpt}", f"      {problem.caret}".rstrip()]
    return lines


def report_text(report: AuditReport) -> str:
    how = f"{report.sandbox}, {report.jobs} at once" if report.sandbox else "no sandbox needed"
    tasks = "1 task" if report.task_count == 1 else f"{report.task_count} tasks"
    lines = [
        f"{report.pack_id} v{report.version}: {tasks} audited in {report.seconds:.1f} s ({how})",
        f"verdict: {report.verdict}",
        "",
        f"  {'check':<12}{'checked':>8}{'failing':>9}{'warning':>9}{'info':>6}{'not checked':>13}",
    ]
    for check in (*CHECKS, *(name for name in report.counts if name not in CHECKS)):
        row = report.counts.get(check, {})
        lines.append(
            f"  {check:<12}{row.get('checked', 0):>8}{row.get('failing', 0):>9}"
            f"{row.get('warning', 0):>9}{row.get('info', 0):>6}{row.get('not_checked', 0):>13}"
        )
    if report.findings:
        lines += ["", "findings:"]
        ordered = sorted(report.findings, key=lambda f: SEVERITY_ORDER.get(f.severity, 4))
        lines += [line for finding in ordered for line in finding_lines(finding)]
        if any(finding.sealed_evidence for finding in report.findings):
            lines += ["", "(verifier output and leaked values: see the --json report)"]
    lines += ["", timing_line(report.timing)]
    return "\n".join(lines)


def finding_lines(finding: Finding) -> list[str]:
    where = f"task {finding.task_id}" if finding.task_id else "pack"
    lines = [f"  [{finding.severity}] {finding.check} · {where} · {finding.code}"]
    lines.append(f"      {finding.message}")
    if finding.evidence:
        shown = ", ".join(f"{key}={value}" for key, value in finding.evidence.items())
        lines.append(f"      evidence: {shown}"[:400])
    return lines


def timing_line(timing: dict[str, Any]) -> str:
    slowest = ", ".join(
        f"{item['task_id']} {item['seconds']:.2f} s" for item in timing.get("slowest", [])
    )
    line = (
        f"timing (reference solutions): median {timing.get('median_seconds', 0):.2f} s a task,"
        f" {timing.get('total_seconds', 0):.1f} s in all"
    )
    return f"{line}; slowest: {slowest}" if slowest else line
