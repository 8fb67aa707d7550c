"""Settings for the SecureBench site: one module, driven by environment variables.

Embedded defaults (SQLite, kombu's filesystem broker, files under ``var/``) need nothing
set; production sets ``DATABASE_URL``, ``CELERY_BROKER_URL``, ``SECRET_KEY`` and
``ALLOWED_HOSTS``. Environment values are read and converted here only, once.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from securebench_site.paths import default_episode_workspace_dir
from securebench_site.storage import S3Location, pack_storages

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)

# One folder holds everything the site writes: uploads being compiled, public and sealed
# pack files, run artifacts and the embedded broker's queue.
DATA_DIR = Path(env_str("SECUREBENCH_DATA_DIR") or BASE_DIR / "var").resolve()


def _given_secret_key() -> str:
    """SECRET_KEY, else the content of SECRET_KEY_FILE, else "" (none given)."""
    key = env_str("SECRET_KEY")
    key_file = env_str("SECRET_KEY_FILE")
    if key or not key_file:
        return key
    try:
        key = Path(key_file).read_text().strip()
    except OSError as exc:
        raise ImproperlyConfigured(f"SECRET_KEY_FILE {key_file!r} cannot be read: {exc}") from exc
    if not key:
        raise ImproperlyConfigured(f"SECRET_KEY_FILE {key_file!r} is empty")
    return key


def _generated_secret_key(path: Path) -> str:
    """The key kept in the data folder, readable by its owner only. It is written to a
    temporary file (0600 from the start) and linked into place, so a web server and a worker
    started together never read a half-written key nor keep two different ones."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".secret_key-")
        try:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(secrets.token_urlsafe(50))
            with contextlib.suppress(FileExistsError):
                os.link(temporary, path)
        finally:
            os.unlink(temporary)
    key = path.read_text().strip()
    if not key:
        raise ImproperlyConfigured(f"{path} is empty: delete it and a new key is generated")
    return key


def _secret_key() -> tuple[str, bool]:
    """The key and whether it is the generated one. A key is generated only where no other
    process can depend on it: with DEBUG on, or on the embedded defaults (no DATABASE_URL),
    so that the `manage.py` commands of the README and the guides work in a fresh clone
    without exporting anything. Production (DATABASE_URL set, DEBUG off) must bring its own
    key; the deploy check (securebench_site.checks) warns about a generated one wherever it is
    in use."""
    given = _given_secret_key()
    if given:
        return given, False
    # Read here too (the database section reads it again): only its presence matters here.
    production_database = bool(env_str("DATABASE_URL"))
    if production_database and not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY (or SECRET_KEY_FILE) must be set when DEBUG is off and DATABASE_URL "
            "is set; a generated key under the data folder is kept only on the embedded "
            "defaults (no DATABASE_URL) or with DEBUG=1."
        )
    return _generated_secret_key(DATA_DIR / "secret_key"), True


SECRET_KEY, SECUREBENCH_SECRET_KEY_GENERATED = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_htmx",
    "securebench_site.apps.SiteConfig",
    "packs",
    "evaluations",
    "runs",
    "pack_health",
    "episodes",
    "operations",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "securebench_site.middleware.TextQueryMiddleware",
    "securebench_site.middleware.CacheHeadersMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "securebench_site.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Innermost but Axes's (below): the site's 404/500 pages even with DEBUG on, sent out
    # through every middleware above.
    "securebench_site.error_pages.ErrorPagesMiddleware",
]

ROOT_URLCONF = "securebench_site.urls"
WSGI_APPLICATION = "securebench_site.wsgi.application"
ASGI_APPLICATION = "securebench_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.csp",
                "runs.context_processors.roles",
                "operations.context_processors.operations",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------------------
# SQLite in WAL mode with a busy timeout is the embedded default, so the web server and the
# worker can write at the same time; PostgreSQL comes in through DATABASE_URL.
DATABASE_URL = env_str("DATABASE_URL")
SQLITE_OPTIONS = {
    "timeout": 20,
    "transaction_mode": "IMMEDIATE",
    "init_command": (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
        "PRAGMA busy_timeout=20000; PRAGMA foreign_keys=ON;"
    ),
}
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
else:
    DATABASES = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA_DIR / "db.sqlite3"}
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A worker given the web server's SQLite file by URL must behave the same way.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {**SQLITE_OPTIONS, **DATABASES["default"].get("OPTIONS", {})}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

# --- Static and pack files ----------------------------------------------------------------
STATIC_URL = "static/"
# Production runs collectstatic into STATIC_ROOT; the embedded default serves from the apps.
STATIC_ROOT = env_str("STATIC_ROOT") or None
STATICFILES_DIRS = [BASE_DIR / "static"]

# Public pack files are served only through an access-checked view; sealed files (evaluation
# inputs and hidden) live in a separate root that no URL maps to. Neither is MEDIA_ROOT.
# SECUREBENCH_STORAGE picks where: `local` (the data folder) or `s3` (an S3-compatible bucket,
# for worker hosts that share no disk with the web host; securebench_site/storage.py).
SECUREBENCH_STORAGE = env_str("SECUREBENCH_STORAGE") or "local"
PACK_FILES_ROOT = DATA_DIR / "pack-files"
UPLOAD_WORK_ROOT = DATA_DIR / "uploads"
_S3 = S3Location(
    bucket=env_str("SECUREBENCH_S3_BUCKET"),
    sealed_bucket=env_str("SECUREBENCH_S3_SEALED_BUCKET"),
    prefix=env_str("SECUREBENCH_S3_PREFIX", "securebench"),
    endpoint_url=env_str("SECUREBENCH_S3_ENDPOINT_URL") or None,
    region=env_str("SECUREBENCH_S3_REGION") or None,
)
# Workers (and web processes) read pack files through a local cache keyed by sha256, checked
# before every use and trimmed least-recently-used past its cap (packs/blobs.py).
SECUREBENCH_BLOB_CACHE_DIR = Path(
    env_str("SECUREBENCH_BLOB_CACHE_DIR") or DATA_DIR / "cache" / "blobs"
).resolve()
SECUREBENCH_BLOB_CACHE_BYTES = env_int("SECUREBENCH_BLOB_CACHE_BYTES", 10 * 2**30)

STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": DATA_DIR / "media", "base_url": None},
    },
    **pack_storages(SECUREBENCH_STORAGE, PACK_FILES_ROOT, _S3),
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedStaticFilesStorage"
        ),
    },
}
# Tests and `make run` serve static files straight from the apps (no collectstatic step).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --- Upload limits (pack archives) --------------------------------------------------------
SECUREBENCH_MAX_UPLOAD_BYTES = env_int("SECUREBENCH_MAX_UPLOAD_BYTES", 256 * 1024 * 1024)
SECUREBENCH_MAX_ARCHIVE_MEMBERS = env_int("SECUREBENCH_MAX_ARCHIVE_MEMBERS", 20_000)
SECUREBENCH_MAX_UNPACKED_BYTES = env_int("SECUREBENCH_MAX_UNPACKED_BYTES", 1024 * 1024 * 1024)
SECUREBENCH_MAX_MANIFEST_BYTES = env_int("SECUREBENCH_MAX_MANIFEST_BYTES", 256 * 1024)
SECUREBENCH_MAX_LINE_BYTES = env_int("SECUREBENCH_MAX_LINE_BYTES", 1024 * 1024)
SECUREBENCH_MAX_ROWS = env_int("SECUREBENCH_MAX_ROWS", 1_000_000)
SECUREBENCH_MAX_JSON_DEPTH = env_int("SECUREBENCH_MAX_JSON_DEPTH", 64)
# Large uploads go to a temp file, never into memory; the pack-upload handler enforces
# SECUREBENCH_MAX_UPLOAD_BYTES while streaming.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
FILE_UPLOAD_TEMP_DIR = None
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
DATA_UPLOAD_MAX_NUMBER_FILES = 10

# --- Verifiers ---------------------------------------------------------------------------
# Sandboxes are chosen by SECUREBENCH_SANDBOX (auto | docker | bwrap), images mapped by
# SECUREBENCH_IMAGE_ALIASES / SECUREBENCH_DEFAULT_IMAGE; verifiers read those themselves, as
# they read SECUREBENCH_TRUSTED_DIR: where the runner scripts sandboxes mount are staged,
# readable by the sandbox uid wherever the checkout lives (default
# /tmp/securebench-trusted-<uid>).
# Dangerous verifier commands a pack may ask for (only "chroot" exists); none by default.
SECUREBENCH_ALLOWED_VERIFIER_COMMANDS = frozenset(
    env_list("SECUREBENCH_ALLOWED_VERIFIER_COMMANDS", [])
)

# --- Celery ------------------------------------------------------------------------------
# Embedded default: kombu's filesystem transport (no server to run). Production: Redis.
# Job state lives in our tables (runs.models.TaskResult); the broker only carries ids, so a
# lost message or a dead worker costs a lease expiry, never a result (DESIGN.md §4).
BROKER_DIR = DATA_DIR / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or "filesystem://localhost/"
# Longest a sandboxed verification may take before Celery's soft and hard limits stop it.
SECUREBENCH_SANDBOX_TASK_SECONDS = env_int("SECUREBENCH_SANDBOX_TASK_SECONDS", 1800)
# Redis re-delivers an unacknowledged message after this; it must exceed twice the longest
# task so that a slow verification is never handed to a second worker (security.md §4).
BROKER_VISIBILITY_TIMEOUT = max(3600, 2 * (SECUREBENCH_SANDBOX_TASK_SECONDS + 120))
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
        # A worker whose prefetch slots are full polls again only after this: with one
        # message per sandboxed verification, a longer interval idles the pool between
        # tasks (a listdir every 10 ms costs an idle worker well under 1 % of a core).
        "polling_interval": 0.01,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": BROKER_VISIBILITY_TIMEOUT}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Fast text verdicts and sandboxed work travel on separate queues, so a long sandbox queue
# never holds back multiple-choice scoring. A worker hoards nothing: prefetch 1.
CELERY_TASK_DEFAULT_QUEUE = "text"
CELERY_TASK_ROUTES = {
    "runs.score_text_results": {"queue": "text"},
    "runs.score_sandbox_result": {"queue": "sandbox"},
    "runs.score_run_scope": {"queue": "sandbox"},
    "runs.reap_leases": {"queue": "text"},
    "runs.fill_reference_runs": {"queue": "text"},
    # Agents wait on these (run_python now, workspace actions next): a queue of their own, so
    # a long verification backlog never holds an agent's step past its answer window.
    "episodes.run_step_action": {"queue": "actions"},
    # A live workspace's candidate is collected (a diff may need a sandbox) where its folder is.
    "episodes.collect_workspace": {"queue": "actions"},
    "episodes.reap_episodes": {"queue": "text"},
}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
# A killed pool child is acknowledged, not re-queued by the broker: the lease and the reaper
# re-queue it, with the attempt counter that stops a poison submission looping forever.
CELERY_TASK_REJECT_ON_WORKER_LOST = False
CELERY_WORKER_MAX_TASKS_PER_CHILD = env_int("SECUREBENCH_WORKER_MAX_TASKS_PER_CHILD", 200)
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")

# --- Evaluation pipeline ------------------------------------------------------------------
# A claimed result's lease; the worker renews it while verifying (heartbeat) so it can stay
# short and a dead worker's results come back quickly.
SECUREBENCH_LEASE_SECONDS = env_int("SECUREBENCH_LEASE_SECONDS", 60)
SECUREBENCH_MAX_ATTEMPTS = env_int("SECUREBENCH_MAX_ATTEMPTS", 3)
# The reaper runs this often; queued results whose message is older than the redispatch
# age, in an evaluation that made no progress meanwhile, are sent again (lost messages).
SECUREBENCH_REAPER_SECONDS = env_int("SECUREBENCH_REAPER_SECONDS", 30)
SECUREBENCH_REDISPATCH_SECONDS = env_int("SECUREBENCH_REDISPATCH_SECONDS", 300)
# Text results travel in chunks: per-message cost would dominate one-verdict messages.
SECUREBENCH_TEXT_CHUNK = env_int("SECUREBENCH_TEXT_CHUNK", 500)
SECUREBENCH_MAX_BUNDLE_BYTES = env_int("SECUREBENCH_MAX_BUNDLE_BYTES", 64 * 1024 * 1024)
SECUREBENCH_MAX_CANDIDATE_BYTES = env_int("SECUREBENCH_MAX_CANDIDATE_BYTES", 4 * 1024 * 1024)
# One artifact candidate's uploaded files altogether (POST runs/{id}/artifacts/): each request's
# body is refused past it, and so is a request that would take the candidate past it.
SECUREBENCH_MAX_ARTIFACT_BYTES = env_int("SECUREBENCH_MAX_ARTIFACT_BYTES", 64 * 1024 * 1024)
# Body of one `POST /api/v1/runs/{id}/candidates/` batch (JSON is parsed in memory).
SECUREBENCH_MAX_BATCH_BYTES = env_int("SECUREBENCH_MAX_BATCH_BYTES", 16 * 1024 * 1024)
# Candidates per task in one run (bundle lines' `sample`, numbered from 0): enough for pass@100
# with room to spare, and a bound on the results one evaluation creates per task. A contract's
# budgets.attempts caps it lower for its own runs.
# Whether storing a version queues its health checks at once (pack_health). Off, a version's
# checks run only when a maintainer asks for them ("check again"), and a draft waits for that.
SECUREBENCH_HEALTH_ON_UPLOAD = env_bool("SECUREBENCH_HEALTH_ON_UPLOAD", True)
# The publish gate: a new version starts as a draft, offered to nobody but its pack's
# maintainers and reviewers until its health report (or a maintainer, with a written reason)
# publishes it. Off, versions are published as they are stored and their checks only report:
# for a site whose every author is trusted, and for test and benchmark sites about other things.
SECUREBENCH_PUBLISH_GATE = env_bool("SECUREBENCH_PUBLISH_GATE", True)
# A report whose checks could not run because of the site (no sandbox, an image a worker could
# not get, a worker gone) is checked again by the beat's sweep as soon as the live workers
# change, or else after this long, the wait doubling with each re-check in a row (at most 5).
SECUREBENCH_HEALTH_RECHECK_SECONDS = env_int("SECUREBENCH_HEALTH_RECHECK_SECONDS", 600)
# Operations (/operations/, /metrics). Workers write a heartbeat every HEARTBEAT seconds and count
# as alive for WORKER_ALIVE seconds after the last one; a queue whose oldest item has waited
# STALL seconds with no claim in that time is shown as stalled.
# The name a worker host's leases and results carry (the machine's host name by default;
# containers of one compose project would all be named after their container ids).
SECUREBENCH_HOST_NAME = env_str("SECUREBENCH_HOST_NAME")
SECUREBENCH_HEARTBEAT_SECONDS = env_int("SECUREBENCH_HEARTBEAT_SECONDS", 15)
SECUREBENCH_WORKER_ALIVE_SECONDS = env_int("SECUREBENCH_WORKER_ALIVE_SECONDS", 60)
SECUREBENCH_STALL_SECONDS = env_int("SECUREBENCH_STALL_SECONDS", 60)
# /metrics answers a request bearing this token (Authorization: Bearer ...), or coming from one
# of these networks (CIDRs, comma-separated); with neither set it is a 404 for everyone.
# Behind a proxy every request comes from the proxy's address: use the token there.
SECUREBENCH_METRICS_TOKEN = env_str("SECUREBENCH_METRICS_TOKEN")
SECUREBENCH_METRICS_NETWORKS = env_list("SECUREBENCH_METRICS_NETWORKS", [])
SECUREBENCH_MAX_SAMPLES = env_int("SECUREBENCH_MAX_SAMPLES", 200)
CELERY_BEAT_SCHEDULE = {
    "reap-expired-leases": {
        "task": "runs.reap_leases",
        "schedule": float(SECUREBENCH_REAPER_SECONDS),
    },
    # Docker containers of workers that died mid-verification (runs.pipeline).
    "remove-stale-sandboxes": {
        "task": "runs.remove_stale_sandboxes",
        "schedule": float(env_int("SECUREBENCH_STALE_SANDBOX_CHECK_SECONDS", 600)),
    },
    # Idle episodes, verdicts to copy to their episodes, episode runs whose URL expired.
    "reap-episodes": {
        "task": "episodes.reap_episodes",
        "schedule": float(SECUREBENCH_REAPER_SECONDS),
    },
    # Health reports whose last run finished without a message, or whose start was lost.
    "sweep-health-reports": {
        "task": "pack_health.sweep_health_reports",
        "schedule": float(SECUREBENCH_REAPER_SECONDS),
    },
}
# The canary (operations.canary): the built-in canary pack scored with its reference answers
# and with empty ones every CANARY_MINUTES (0: never); a check unfinished after LATE seconds,
# or none for two intervals, shows as late on /operations/.
SECUREBENCH_CANARY_MINUTES = env_int("SECUREBENCH_CANARY_MINUTES", 10)
SECUREBENCH_CANARY_LATE_SECONDS = env_int("SECUREBENCH_CANARY_LATE_SECONDS", 300)
if SECUREBENCH_CANARY_MINUTES > 0:
    CELERY_BEAT_SCHEDULE["run-canary"] = {
        "task": "operations.run_canary",
        "schedule": float(SECUREBENCH_CANARY_MINUTES * 60),
    }
# A Docker sandbox older than this is an orphan of a dead worker: no live verification runs
# past the sandbox task's hard limit (runs.jobs), plus a margin. Lower it only together with
# SECUREBENCH_SANDBOX_TASK_SECONDS, or the janitor removes live sandboxes.
SECUREBENCH_STALE_SANDBOX_SECONDS = env_int(
    "SECUREBENCH_STALE_SANDBOX_SECONDS", SECUREBENCH_SANDBOX_TASK_SECONDS + 60 + 120
)
# Extra labels ("key=value,…") on this site's Docker sandboxes; the janitor removes only
# containers that carry them, so sites (or test runs) sharing one engine never touch each
# other's sandboxes.
SECUREBENCH_SANDBOX_LABELS = dict(
    item.split("=", 1) for item in env_list("SECUREBENCH_SANDBOX_LABELS", []) if "=" in item
)

# --- REST framework ------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_PARSER_CLASSES": [
        "packs.api_parsers.TextJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "packs.api.exception_handler",
    # Per user (per address when anonymous), for the run API's writes; reads are not throttled.
    # Counters live in the default cache: give production a shared one (Redis) for exact limits.
    "DEFAULT_THROTTLE_RATES": {
        "run_writes": env_str("SECUREBENCH_RUN_WRITE_RATE", "60/minute"),
        "run_candidates": env_str("SECUREBENCH_CANDIDATE_BATCH_RATE", "600/minute"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "SecureBench site API",
    "DESCRIPTION": "Packs, contract versions and agent payloads (public lane only).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "ENUM_NAME_OVERRIDES": {"RunModeEnum": "runs.models.RunMode"},
}
# --- API docs (/api/v1/docs/) ---------------------------------------------------------------
# Swagger UI's files come from drf-spectacular-sidecar, served by us (never a CDN); the page
# loads its init script as a separate same-origin file, so the CSP needs no unsafe-inline.
INSTALLED_APPS += ["drf_spectacular_sidecar"]
SPECTACULAR_SETTINGS |= {
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "securebench_site.openapi.document_standard_errors",
    ],
}

# --- Security headers ----------------------------------------------------------------------
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
}

# --- Hardening -----------------------------------------------------------------------------
# Production (DEBUG off) is HTTPS-only by default: redirect, secure cookies, HSTS; each can be
# turned off by its environment variable (the test suite sets SECURE_SSL_REDIRECT=0, since
# Django's test client speaks plain HTTP). `manage.py check --deploy --fail-level WARNING` is
# clean with SECRET_KEY, ALLOWED_HOSTS and nothing else set (tests/test_hardening.py).
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", SECURE_HSTS_SECONDS > 0)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", SECURE_HSTS_SECONDS > 0)


def _proxy_ssl_header(raw: str) -> tuple[str, str] | None:
    """``HTTP_X_FORWARDED_PROTO`` or ``HTTP_X_FORWARDED_PROTO=https``: trust that header only
    when a proxy that always sets (and strips incoming copies of) it sits in front."""
    if not raw:
        return None
    name, _, value = raw.partition("=")
    if not name.startswith("HTTP_"):
        raise ImproperlyConfigured(
            f"SECURE_PROXY_SSL_HEADER must name a META key such as HTTP_X_FORWARDED_PROTO, "
            f"got {raw!r}"
        )
    return name.strip(), value.strip() or "https"


SECURE_PROXY_SSL_HEADER = _proxy_ssl_header(env_str("SECURE_PROXY_SSL_HEADER"))

# Login lockout (django-axes): 5 failures for one username from one address lock that pair
# out for 15 minutes; attempts are kept in the database, so every web process sees them.
# Authentication without a request (test client, shell) is not a network login and is not
# counted (securebench_site.auth.LoginLockoutBackend).
INSTALLED_APPS += ["axes"]
MIDDLEWARE += ["axes.middleware.AxesMiddleware"]
AUTHENTICATION_BACKENDS = [
    "securebench_site.auth.LoginLockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("SECUREBENCH_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("SECUREBENCH_LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "securebench_site.auth.locked_out"
# No "AXES: BEGIN …" banner on every command and server start; lockouts are still logged
# (django-axes logs them as warnings whatever this says).
AXES_VERBOSE = False

# Every handler redacts capability URLs (securebench_site.log_filters), including the
# development server's access log, which Django otherwise writes through a handler of its own.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"capabilities": {"()": "securebench_site.log_filters.RedactCapabilities"}},
    "formatters": {
        "server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        }
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["capabilities"]},
        "server": {
            "class": "logging.StreamHandler",
            "formatter": "server",
            "filters": ["capabilities"],
        },
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "django.server": {"handlers": ["server"], "level": "INFO", "propagate": False},
        "django.request": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}

# --- Live episodes over CUBE (episodes app) ----------------------------------------------------
# An episode run's URL (a capability) works this long unless revoked or shut down earlier; an
# episode with no call for the idle time is scored as it stands (abandoned).
SECUREBENCH_EPISODE_RUN_HOURS = env_int("SECUREBENCH_EPISODE_RUN_HOURS", 24)
SECUREBENCH_EPISODE_IDLE_MINUTES = env_int("SECUREBENCH_EPISODE_IDLE_MINUTES", 15)
# `open_episode_run --oracle` (shell access is trusted already) holds its privilege this long.
SECUREBENCH_ORACLE_EPISODE_MINUTES = env_int("SECUREBENCH_ORACLE_EPISODE_MINUTES", 120)
# Steps (reset, step, tools/call) per second per run, all of its clients together.
SECUREBENCH_EPISODE_STEPS_PER_SECOND = env_int("SECUREBENCH_EPISODE_STEPS_PER_SECOND", 40)
# The stock client gives up after 10 s: final_step waits this long for the verdict, a
# sandboxed action this long for a worker (plus a grace for one taken at the last moment).
SECUREBENCH_EPISODE_VERDICT_WAIT_SECONDS = float(
    env_int("SECUREBENCH_EPISODE_VERDICT_WAIT_MS", 6000) / 1000
)
SECUREBENCH_EPISODE_ACTION_WAIT_SECONDS = float(
    env_int("SECUREBENCH_EPISODE_ACTION_WAIT_MS", 2500) / 1000
)
SECUREBENCH_EPISODE_ACTION_GRACE_SECONDS = 6.0

# Live workspaces (terminal_task, repo_patch episodes): one folder per episode, holding the
# workspace as a tar snapshot (never extracted on the host); every action is a fresh sandbox.
# Default: a folder of the site's own in the system temp folder (securebench_site.paths says
# why not under the data folder).
SECUREBENCH_EPISODE_WORKSPACE_DIR = Path(
    env_str("SECUREBENCH_EPISODE_WORKSPACE_DIR") or default_episode_workspace_dir(DATA_DIR)
).resolve()
# Per episode: the workspace's size, and how many files it may hold beyond the seed's own.
SECUREBENCH_EPISODE_WORKSPACE_BYTES = env_int("SECUREBENCH_EPISODE_WORKSPACE_BYTES", 256 * 2**20)
SECUREBENCH_EPISODE_WORKSPACE_FILES = env_int("SECUREBENCH_EPISODE_WORKSPACE_FILES", 8192)
# A bash step's timeout when the agent gives none, and the most it may ask for. A command
# longer than the answer window keeps running; the agent collects the rest with `wait`.
SECUREBENCH_EPISODE_COMMAND_SECONDS = env_int("SECUREBENCH_EPISODE_COMMAND_SECONDS", 60)
SECUREBENCH_EPISODE_COMMAND_MAX_SECONDS = env_int("SECUREBENCH_EPISODE_COMMAND_MAX_SECONDS", 900)
SECUREBENCH_CUBE_MAX_BODY_BYTES = env_int("SECUREBENCH_CUBE_MAX_BODY_BYTES", 2 * 1024 * 1024)

# --- Roles and debug mode ------------------------------------------------------------------
# Everything needs a signed-in user with a role (runs.roles) except the login page; with
# SECUREBENCH_PUBLIC_RESULTS on, anonymous visitors also browse packs, runs, results and
# leaderboards read-only (never privileged information, never candidates). Debug mode
# (privileged information, every view audited) ends after SECUREBENCH_DEBUG_MODE_MINUTES.
SECUREBENCH_PUBLIC_RESULTS = env_bool("SECUREBENCH_PUBLIC_RESULTS", False)
SECUREBENCH_DEBUG_MODE_MINUTES = env_int("SECUREBENCH_DEBUG_MODE_MINUTES", 30)
# The API answers 401/403 JSON: DRF views skip the login middleware and ask packs.access.
REST_FRAMEWORK["DEFAULT_PERMISSION_CLASSES"] = ["packs.permissions.CanBrowse"]
