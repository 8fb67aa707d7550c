"""The site's operations view: queues, leases, workers and probes. It reads runs, episodes and
pack_health; above it sit only the home page (dashboard, which shows its queue summary) and the
site's settings, URLs and Celery app (pyproject.toml's layers contract)."""
