"""The site's operations view: queues, leases, workers and probes (the top layer: it reads
runs, episodes and pack_health; nothing imports it but the site's settings, URLs and Celery)."""
