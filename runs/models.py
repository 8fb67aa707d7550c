"""Runs, their candidates, evaluations and per-task results.

Job state lives here, never only in the broker: a task result is claimed with a conditional
update (``queued → running`` with a lease), and a periodic reaper re-queues leases that
expired because a worker died or a message was lost (DESIGN.md §4).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from packs.models import ContractVersion, Task


class RunSource(models.TextChoices):
    FORM = "form", "form"
    API = "api", "API"
    COMMAND = "command", "command line"


class CandidateOrigin(models.TextChoices):
    AGENT = "agent", "agent"
    # Oracle candidates are made of reference solutions: privileged data wherever shown.
    ORACLE = "oracle", "oracle (reference solutions)"
    NULL = "null", "null (empty candidates)"
    # Built-in attack candidates (verifiers.adversarial) of a pack's health checks.
    ADVERSARIAL = "adversarial", "adversarial (built-in attacks)"


class RunMode(models.TextChoices):
    # Candidates arrive as a bundle or in API batches, made somewhere else.
    BUNDLE = "bundle", "bundle"
    # An agent acts live against the site over CUBE (the episodes app); each episode's
    # final answer becomes the run's candidate for its task.
    EPISODES = "episodes", "live episodes"


class Run(models.Model):
    contract_version = models.ForeignKey(
        ContractVersion, on_delete=models.PROTECT, related_name="runs"
    )
    agent_name = models.CharField(max_length=200)
    agent_version = models.CharField(max_length=100, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    notes = models.TextField(blank=True)
    source = models.CharField(max_length=16, choices=RunSource.choices)
    origin = models.CharField(
        max_length=16, choices=CandidateOrigin.choices, default=CandidateOrigin.AGENT
    )
    mode = models.CharField(max_length=16, choices=RunMode.choices, default=RunMode.BUNDLE)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # None while an API client is still adding candidates; set once, when scoring is queued.
    submitted_at = models.DateTimeField(null=True, blank=True)
    # Run-level usage as reported, plus the per-task sums (wall_seconds, tokens, usd).
    usage = models.JSONField(default=dict)
    # What the site itself measured of the run's model calls (the gateway meters them):
    # {"input_tokens", "output_tokens", "usd", "calls", "tasks": {task_id: {same keys}}}.
    # Empty when no call went through the gateway; never written from an agent's report.
    measured_usage = models.JSONField(default=dict)
    over_budget = models.BooleanField(default=False)
    budget_notes = models.JSONField(default=list)
    candidate_count = models.PositiveIntegerField(default=0)
    # Whether the run satisfies its contract (runs.validity): no candidate broke a rule and
    # the run is within budget. Fixed when the run is submitted or closed; the reasons say
    # which rule each invalid candidate broke. Only valid runs are ranked.
    valid = models.BooleanField(default=True)
    invalid_reasons = models.JSONField(default=list)
    # A run of a version's health checks (pack_health): scored like any run, listed on the
    # health report only, never in run lists or on leaderboards; the only runs a draft takes.
    health_check = models.BooleanField(default=False, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["contract_version", "-created_at"])]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.agent_name})"

    @property
    def is_submitted(self) -> bool:
        return self.submitted_at is not None


class Candidate(models.Model):
    """What the agent produced for one task. Workspace files are kept base64-encoded."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="candidates")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=16)
    text = models.TextField(blank=True)
    # {path: {"content_b64": str, "mode": int}} for workspace candidates, else {}.
    files = models.JSONField(default=dict)
    usage = models.JSONField(default=dict)
    line = models.PositiveIntegerField(null=True, blank=True)
    # Several candidates per task (for pass@k) are numbered 0, 1, … within the task.
    sample = models.PositiveIntegerField(default=0)
    # The contract rules this candidate broke, found before any verifier ran
    # ([{"rule", "paths", "message"}]); empty when it satisfies the contract.
    contract_violations = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "task", "sample"], name="one_candidate_per_task_sample"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} candidate for task {self.task_id} of run {self.run_id}"


class EvaluationStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"


class Evaluation(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="evaluations")
    number = models.PositiveIntegerField()
    evaluator = models.CharField(max_length=64)
    status = models.CharField(
        max_length=16, choices=EvaluationStatus.choices, default=EvaluationStatus.QUEUED
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Written once, by the worker that lands the last result.
    total = models.PositiveIntegerField(default=0)
    passed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    errored = models.PositiveIntegerField(default=0)
    pending = models.PositiveIntegerField(default=0)
    score = models.FloatField(null=True, blank=True)
    ci_low = models.FloatField(null=True, blank=True)
    ci_high = models.FloatField(null=True, blank=True)
    family_summary = models.JSONField(default=dict)
    # Every metric the evaluator emits ({name: {"value", "ci_low", "ci_high", ...}}), written
    # with the summary; ``score`` is the evaluator's primary metric.
    metrics = models.JSONField(default=dict)
    # The distinct failure reasons of the results, sorted; the results table offers them as a
    # filter. None until the evaluation is done (then pages read them from the results).
    failure_reasons = models.JSONField(null=True, blank=True)
    # An uploaded run-scope evaluation's one program call over the whole run: null until it
    # has run; then {"status", "problem", "metrics", "backend", "image", ...}. The program's
    # log is kept apart (privileged: its authors read it in debug mode).
    program_outcome = models.JSONField(null=True, blank=True)
    program_log = models.TextField(blank=True)
    # When the run-scope call was last sent to a worker (the reaper sends it again after the
    # program's own time limit has passed with no outcome).
    program_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="unique_evaluation_number"),
        ]
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"evaluation {self.number} of run {self.run_id}"

    @property
    def is_done(self) -> bool:
        return self.status == EvaluationStatus.DONE

    @property
    def scored_total(self) -> int:
        """Results that count in the score: all but the pending ones (a family with no
        verifier yet), which are left out of the score rather than counted as failures."""
        return self.total - self.pending

    @property
    def has_no_verifier(self) -> bool:
        """Done, and not one result could be verified: there is no score to show."""
        return self.is_done and self.total > 0 and self.scored_total <= 0


class ResultStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    PASSED = "passed", "passed"
    FAILED = "failed", "failed"
    ERROR = "error", "error"
    PENDING = "pending", "pending"


FINAL_STATUSES = (
    ResultStatus.PASSED,
    ResultStatus.FAILED,
    ResultStatus.ERROR,
    ResultStatus.PENDING,
)
OPEN_STATUSES = (ResultStatus.QUEUED, ResultStatus.RUNNING)


class WorkQueue(models.TextChoices):
    TEXT = "text", "text verdicts"
    SANDBOX = "sandbox", "sandboxed verification"


class TaskResult(models.Model):
    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="results")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    candidate = models.ForeignKey(
        Candidate, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # Copied from the task so that filters, charts and ordering need no join.
    family = models.CharField(max_length=64)
    position = models.PositiveIntegerField()
    # The candidate's sample number (0 when a task has one candidate, or none).
    sample = models.PositiveIntegerField(default=0)
    queue = models.CharField(max_length=16, choices=WorkQueue.choices)
    status = models.CharField(
        max_length=16, choices=ResultStatus.choices, default=ResultStatus.QUEUED
    )
    score = models.FloatField(default=0.0)
    failure_reason = models.CharField(max_length=64, blank=True)
    # Counts and facts from the verifier (tests passed/failed, notes); scrubbed.
    details = models.JSONField(default=dict)
    # Verifier output, scrubbed of exact hidden values; privileged all the same (debug mode).
    stdout = models.TextField(blank=True)
    stderr = models.TextField(blank=True)
    # An uploaded evaluation's metrics for this result ({name: {"value", "ci_low",
    # "ci_high"}}), validated by the host against the evaluation's declaration.
    metrics = models.JSONField(default=dict, blank=True)
    duration_seconds = models.FloatField(null=True, blank=True)
    sandbox_backend = models.CharField(max_length=32, blank=True)
    sandbox_image = models.CharField(max_length=255, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    lease_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    # What a running verification waits for, shown on the run page (an image being pulled).
    waiting_for = models.CharField(max_length=255, blank=True, default="")
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["evaluation", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "task", "sample"], name="one_result_per_task_sample"
            ),
            models.CheckConstraint(
                condition=~Q(status="running") | Q(lease_expires_at__isnull=False),
                name="running_result_has_lease",
            ),
        ]
        indexes = [
            models.Index(fields=["evaluation", "status"]),
            models.Index(fields=["evaluation", "position"]),
            models.Index(fields=["status", "lease_expires_at"]),
            # The operations page: waiting work per queue, its newest claim, the last day.
            models.Index(fields=["queue", "status"]),
            models.Index(fields=["queue", "started_at"]),
            models.Index(fields=["finished_at"]),
        ]

    def __str__(self) -> str:
        return f"result of task {self.task_id} in evaluation {self.evaluation_id}"

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES


class AuditAction(models.TextChoices):
    DEBUG_MODE_ON = "debug_mode_on", "debug mode on"
    DEBUG_MODE_OFF = "debug_mode_off", "debug mode off"
    VIEW_RESOURCE = "view_resource", "viewed a sealed resource"
    LIST_FILES = "list_files", "listed sealed files"
    VIEW_FILE = "view_file", "viewed a sealed file"
    VIEW_LOGS = "view_logs", "viewed verifier output"
    VIEW_DETAILS = "view_details", "viewed verifier details"
    VIEW_CANDIDATE = "view_candidate", "viewed a privileged candidate"
    API_RESULTS = "api_results", "read results with logs through the API"
    ORACLE_EPISODE_RUN = "oracle_episode_run", "opened an oracle episode run"
    EPISODE_PRIVILEGED_INFO = "episode_privileged_info", "an oracle episode read a reference"
    VIEW_DIFF = "view_diff", "viewed sealed changes between versions"
    VIEW_HEALTH_EVIDENCE = "view_health_evidence", "viewed sealed evidence of a health check"
    PUBLISH_OVERRIDE = "publish_override", "published a version despite its health checks"


class AuditEvent(models.Model):
    """One look at privileged information, or a debug-mode switch. Written, never edited."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Kept beside the foreign key so the record survives the account's deletion.
    username = models.CharField(max_length=150)
    action = models.CharField(max_length=32, choices=AuditAction.choices, db_index=True)
    object_type = models.CharField(max_length=32, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    pack_id = models.CharField(max_length=100, blank=True, db_index=True)
    version = models.PositiveIntegerField(null=True, blank=True)
    task_id = models.CharField(max_length=200, blank=True)
    resource = models.CharField(max_length=1024, blank=True)
    reason = models.TextField()
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.username} {self.action} at {self.created_at:%Y-%m-%d %H:%M:%S}"
