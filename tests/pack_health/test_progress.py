"""Live progress on the report page: final results of the health runs out of all of them,
polled every 2 s while the report runs; the last poll (HTTP 286) stops the polling and loads
the finished report in place."""

from __future__ import annotations

import pytest

from pack_health import services
from runs.models import ResultStatus, TaskResult
from runs.pipeline import score_results
from tests.conftest import make_user
from tests.pack_health.support import clean_mc_rows, store_draft

pytestmark = pytest.mark.django_db
PROGRESS = "/packs/quiz/versions/1/health/1/progress/"


def test_progress_counts_the_health_runs_results_until_the_report_is_done(make_pack, client):
    version = store_draft(make_pack, {"id": "quiz", "version": 1}, clean_mc_rows())
    report = services.health_request(version)
    client.force_login(make_user("root", superuser=True))

    queued = client.get(PROGRESS, headers={"HX-Request": "true"}).content.decode()
    assert "waiting for a worker" in queued and 'hx-trigger="every 2s"' in queued

    services.health_start(report.pk)
    results = TaskResult.objects.filter(evaluation__run__health_run__report=report)
    total = results.count()
    first = results.order_by("pk")[:3]
    score_results([r.pk for r in first], worker="progress-test")
    running = client.get(PROGRESS, headers={"HX-Request": "true"})
    assert running.status_code == 200
    assert f"3 of {total} verifications finished" in running.content.decode()

    score_results(
        list(results.filter(status=ResultStatus.QUEUED).values_list("pk", flat=True)),
        worker="progress-test",
    )
    services.health_finish_if_done(report.pk)
    done = client.get(PROGRESS, headers={"HX-Request": "true"})

    assert done.status_code == 286
    body = done.content.decode()
    assert "every 2s" not in body and "The checks are finished" in body
    assert f"{total} of {total} verifications finished" in body
