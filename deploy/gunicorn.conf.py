"""gunicorn's settings for `make serve` (and the compose file's web service).

Processes: WEB_CONCURRENCY (gunicorn reads it itself; 3 here by default), each with a few
threads: a page mostly waits on the database, and uploads and downloads stream. The access log
goes to standard output with the CUBE capabilities in request paths redacted, as the
development server's log is: an episode run's URL is its credential.
"""

import os

workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
threads = int(os.environ.get("WEB_THREADS", "4"))
# A pack upload is compiled in the request; a large one takes longer than gunicorn's default.
timeout = int(os.environ.get("WEB_TIMEOUT_SECONDS", "300"))
graceful_timeout = 30
# Behind a proxy on the same host: forwarded headers from loopback only (gunicorn's default).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")
accesslog = "-"
# gunicorn 27's control socket lives in the home folder, shared by every instance of a user.
control_socket_disable = True

_REDACT = {"capabilities": {"()": "securebench_site.log_filters.RedactCapabilities"}}
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": _REDACT,
    "formatters": {"plain": {"format": "%(asctime)s [%(process)d] %(levelname)s %(message)s"}},
    "handlers": {
        "access": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stdout",
            "filters": ["capabilities"],
        },
        "error": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
            "formatter": "plain",
            "filters": ["capabilities"],
        },
    },
    "loggers": {
        "gunicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        "gunicorn.error": {"handlers": ["error"], "level": "INFO", "propagate": False},
    },
    "root": {"handlers": ["error"], "level": "INFO"},
}
