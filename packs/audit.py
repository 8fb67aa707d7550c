"""The offline pack health audit behind ``manage.py audit_pack`` (issue 14).

The same checks the site runs before a version is published, on a pack folder or archive
and without a database: the leak audit (static), then per task its reference solution
scored twice (oracle, repeat), its empty candidate (null) and the built-in attack candidates
(adversarial), all through ``verifiers.scoring.verify`` on a thread pool. The findings are
judged by the shared rules of ``verifiers.pack_findings``, so a pack that is healthy here is healthy
on the site. Nothing here touches Django: the command passes the site's limits in.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from packs.compiler import CompiledPack, CompileLimits, compile_pack, compiled_task_lanes
from packs.compiler.archive import ArchiveLimits, extract_archive, find_pack_root
from verifiers import pack_findings
from verifiers.adversarial import Attack, attack_candidates
from verifiers.leak_audit import AuditFile, leak_findings
from verifiers.oracle import null_candidate, oracle_candidate
from verifiers.pack_findings import Finding, Outcome
from verifiers.sandbox import (
    Sandbox,
    SandboxProcess,
    SandboxResult,
    SandboxSpec,
    SandboxUnavailable,
)
from verifiers.scoring import VerifierSettings, is_text_family, verify
from verifiers.task import Candidate, TaskLanes
from verifiers.verdict import Verdict

# Families whose verifiers run candidates in a sandbox (the others are pure functions).
SANDBOXED_FAMILIES = frozenset({"code_completion", "repo_patch", "terminal_task"})
# Verdicts of the health report, and the exit status the command gives each (CI reads it).
EXIT_STATUS = {
    pack_findings.HEALTHY: 0,
    pack_findings.WARNINGS: 1,
    pack_findings.FAILING: 2,
    pack_findings.NOT_CHECKED: 4,
}
EXIT_INVALID = 3
PROGRESS_SECONDS = 2.0  # between progress lines


def default_jobs() -> int:
    """Verifications at once: one per core, as a site worker runs (Celery's default)."""
    return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class TaskChecks:
    """What each verification of one task gave (None: the task has no such candidate)."""

    task_id: str
    oracle: Outcome | None = None
    repeat: Outcome | None = None
    null: Outcome | None = None
    attacks: tuple[tuple[Attack, Outcome], ...] = ()

    def findings(self) -> list[Finding]:
        found = [
            *pack_findings.oracle_findings(self.task_id, self.oracle),
            *pack_findings.repeat_findings(self.task_id, self.oracle, self.repeat),
            *pack_findings.null_findings(self.task_id, self.null),
        ]
        for attack, outcome in self.attacks:
            found += pack_findings.adversarial_findings(
                self.task_id, attack.name, outcome, attack.description
            )
        return found


@dataclass(frozen=True)
class AuditReport:
    pack_id: str
    version: int
    task_count: int
    verdict: str  # healthy, warnings or failing
    counts: dict[str, dict[str, int]]
    findings: list[Finding]
    timing: dict[str, Any]
    seconds: float  # wall time of the whole audit
    sandbox: str | None  # the backend used, None when no task needed one
    jobs: int = 1

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS[self.verdict]

    def as_json(self) -> dict[str, Any]:
        """The report for authors' CI: sealed evidence included (the author owns the pack)."""
        return {
            "pack": {"id": self.pack_id, "version": self.version, "tasks": self.task_count},
            "verdict": self.verdict,
            "counts": self.counts,
            "findings": [asdict(finding) for finding in self.findings],
            "timing": {
                **self.timing,
                "audit_seconds": round(self.seconds, 3),
                "sandbox": self.sandbox,
                "jobs": self.jobs,
            },
        }


class _Progress:
    """Counts finished tasks for a progress line; ticked from the pool's threads."""

    def __init__(self, report: Callable[[int, int], None] | None, total: int) -> None:
        self.report, self.total = report, total
        self.done, self.last = 0, 0.0
        self.lock = threading.Lock()

    def tick(self) -> None:
        if self.report is None:
            return
        with self.lock:
            self.done += 1
            now = time.monotonic()
            if now - self.last > PROGRESS_SECONDS or self.done == self.total:
                self.last = now
                self.report(self.done, self.total)


# --- entry points ------------------------------------------------------------------------------


@contextlib.contextmanager
def pack_folder(path: Path, *, archive_limits: ArchiveLimits) -> Iterator[Path]:
    """The pack's folder: ``path`` itself, or an archive extracted the way uploads are
    (``ArchiveError`` when it is refused), removed afterwards."""
    if path.is_dir():
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="securebench-audit-") as scratch:
        extracted = Path(scratch) / "pack"
        extract_archive(path, extracted, limits=archive_limits, display_name=path.name)
        yield find_pack_root(extracted, display_name=path.name)


def audit_folder(
    folder: Path,
    *,
    sandbox: Callable[[], Sandbox],
    jobs: int | None = None,
    compile_limits: CompileLimits | None = None,
    allowed_commands: frozenset[str] = frozenset(),
    progress: Callable[[int, int], None] | None = None,
) -> AuditReport:
    """Compile (``PackError`` when the pack is invalid) and audit a pack folder."""
    pack = compile_pack(folder, limits=compile_limits or CompileLimits())
    return audit_pack(
        pack, sandbox=sandbox, jobs=jobs, allowed_commands=allowed_commands, progress=progress
    )


def audit_pack(
    pack: CompiledPack,
    *,
    sandbox: Callable[[], Sandbox],
    jobs: int | None = None,
    allowed_commands: frozenset[str] = frozenset(),
    progress: Callable[[int, int], None] | None = None,
) -> AuditReport:
    """Every health check on a compiled pack. ``sandbox`` is called only when a task needs
    one, so a pack of text tasks audits without any backend."""
    started = time.monotonic()
    jobs = jobs or default_jobs()
    needs_sandbox = any(task.family in SANDBOXED_FAMILIES for task in pack.tasks)
    chosen = sandbox() if needs_sandbox else None
    settings = VerifierSettings(sandbox=chosen, allowed_commands=allowed_commands)
    tracker = _Progress(progress, total=len(pack.tasks))

    def check(index: int) -> TaskChecks:
        lanes = compiled_task_lanes(pack.tasks[index], pack.files, pack.manifest.contract)
        result = check_task(lanes, settings)
        tracker.tick()
        return result

    text = [i for i, task in enumerate(pack.tasks) if is_text_family(task.family)]
    others = [i for i, task in enumerate(pack.tasks) if not is_text_family(task.family)]
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="audit") as pool:
        # Sandboxed verifications mostly wait on their sandboxes: the static leak audit and
        # the pure text verifiers run here meanwhile, in this thread (threads would only add
        # switching to pure Python work).
        pending = [pool.submit(check, index) for index in others]
        findings = leak_audit(pack)
        by_index = {index: check(index) for index in text}
        by_index.update(zip(others, (future.result() for future in pending), strict=True))
    results = [by_index[index] for index in range(len(pack.tasks))]
    for result in results:
        findings += result.findings()
    manifest = pack.manifest
    return AuditReport(
        pack_id=manifest.id,
        version=manifest.version,
        task_count=len(pack.tasks),
        verdict=pack_findings.report_verdict(findings),
        counts=pack_findings.check_counts(findings, checked_counts(pack, results)),
        findings=findings,
        timing=pack_findings.timing_summary(
            {r.task_id: r.oracle.seconds for r in results if r.oracle is not None}
        ),
        seconds=time.monotonic() - started,
        sandbox=chosen.name if chosen is not None else None,
        jobs=jobs,
    )


# --- the checks --------------------------------------------------------------------------------


def leak_audit(pack: CompiledPack) -> list[Finding]:
    """The static leak audit over every task, every file and the pack's own texts."""
    manifest = pack.manifest
    files = [
        AuditFile(root=entry.root, path=entry.path, sha256=entry.sha256, source=entry.source)
        for entry in pack.files.values()
    ]
    tasks = (compiled_task_lanes(task, pack.files) for task in pack.tasks)
    return leak_findings(
        tasks,
        files,
        description=manifest.description or "",
        canaries=manifest.canaries,
        pack_title=manifest.title or "",
    )


def check_task(task: TaskLanes, settings: VerifierSettings) -> TaskChecks:
    """Oracle twice, null once, then each attack: one task's verifications, in order."""

    def outcome(candidate: Candidate | None) -> Outcome | None:
        if candidate is None:
            return None
        return _outcome(verify(task, candidate, settings), settings)

    oracle = oracle_candidate(task)
    first = outcome(oracle)
    return TaskChecks(
        task_id=task.task_id,
        oracle=first,
        # A task whose verifier is still pending has nothing to repeat.
        repeat=outcome(oracle) if first is not None and first.status != "pending" else None,
        null=outcome(null_candidate(task)),
        attacks=tuple(
            (attack, _outcome(verify(task, attack.candidate, settings), settings))
            for attack in attack_candidates(task)
        ),
    )


def _outcome(verdict: Verdict, settings: VerifierSettings) -> Outcome:
    """The verdict as the rules see it; a check this machine could not run says why."""
    found = Outcome.of_verdict(verdict)
    if verdict.reason not in pack_findings.INFRASTRUCTURE_REASONS:
        return found
    chosen = settings.sandbox
    backend = chosen.name if chosen is not None and chosen.name != UnavailableSandbox.name else ""
    return replace(
        found, cause=pack_findings.infrastructure_cause(found.reason or "", backend=backend)
    )


def checked_counts(pack: CompiledPack, results: list[TaskChecks]) -> dict[str, int]:
    """How many verifications (tasks, for the leak audit) each check looked at."""
    return {
        pack_findings.ORACLE: sum(r.oracle is not None for r in results),
        pack_findings.REPEAT: sum(r.repeat is not None for r in results),
        pack_findings.NULL: sum(r.null is not None for r in results),
        pack_findings.ADVERSARIAL: sum(len(r.attacks) for r in results),
        pack_findings.LEAK: len(pack.tasks),
    }


class UnavailableSandbox(Sandbox):
    """Stands in for a backend that could not be opened: every sandboxed verification ends
    in ``sandbox_unavailable`` (a check error, reported), never in an unsandboxed run."""

    name = "unavailable"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def run(self, spec: SandboxSpec) -> SandboxResult:
        raise SandboxUnavailable(self.reason)

    def start(self, spec: SandboxSpec) -> SandboxProcess:
        raise SandboxUnavailable(self.reason)
