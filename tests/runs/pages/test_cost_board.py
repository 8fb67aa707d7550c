"""The leaderboard's score-against-cost chart, read as a user reads it: measured figures over
reported ones, the frontier, who dominates whom, and runs with no cost figure."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from packs.models import ContractVersion
from runs.models import Candidate, RunMode

# Fixtures (imported so pytest finds them here): a client signed in as a viewer.
from tests.runs.pages.support import (  # noqa: F401
    FAILED,
    PASSED,
    import_version,
    make_evaluation,
    make_run,
)

pytestmark = pytest.mark.django_db


def gateway_usage(usd: float, input_tokens: int, output_tokens: int) -> dict:
    """Run.measured_usage as the gateway fills it: the sums and one entry per task."""
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "usd": usd,
        "calls": 12,
        "tasks": {
            "q1": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "usd": usd,
                "calls": 12,
            }
        },
    }


def scored(cv, agent: str, passed: int, **fields):
    run = make_run(cv, agent, **fields)
    make_evaluation(run, [PASSED] * passed + [FAILED] * (4 - passed))
    return run


@pytest.fixture
def board(make_pack) -> ContractVersion:
    return import_version(make_pack, "costs", tasks=4)


def board_page(client, cv, **params) -> str:
    response = client.get(reverse("runs:leaderboard", args=[cv.pack.pack_id, cv.version]), params)
    assert response.status_code == 200
    return response.content.decode()


def chart_of(html: str) -> str:
    """The chart's own SVG (the legend's markers are apart)."""
    return html.split('<svg class="cost-chart-svg"', 1)[1].split("</svg>", 1)[0]


def dominated_rows(html: str) -> list[str]:
    table = html.split('<table class="dominated">', 1)[1].split("</table>", 1)[0]
    return [
        re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip() for row in table.split("<tr>")[2:]
    ]


def test_measured_dollars_are_plotted_and_the_dominated_run_names_its_dominator(client, board):
    cheap = scored(board, "cheap", 3, measured_usage=gateway_usage(0.0012, 900, 300))
    dear = scored(board, "dear", 2, measured_usage=gateway_usage(0.0450, 30_000, 8_000))
    best = scored(board, "best", 4, measured_usage=gateway_usage(0.0210, 12_000, 3_000))
    html = board_page(client, board)
    assert 'role="img" aria-labelledby="cost-chart-title cost-chart-desc"' in html
    assert chart_of(html).count('class="pt pt-measured') == 3
    assert "pt-reported" not in chart_of(html)
    assert 'class="frontier-line" d="M' in html
    assert "$0.0012" in html and "$0.045" in html
    rows = dominated_rows(html)
    assert len(rows) == 1
    assert f"Run #{dear.pk}" in rows[0] and f"Run #{cheap.pk}" in rows[0]
    assert f"dominated by run #{cheap.pk}" in html  # the point's hover and the table cell
    assert html.count("◆ frontier") == 2
    assert best.pk and "measured by the site&#x27;s model gateway" in html


def test_tokens_sum_input_and_output(client, board):
    scored(board, "a", 3, measured_usage=gateway_usage(0.01, 9_000, 3_300))
    html = board_page(client, board, axis="tokens")
    assert "12.3k" in html
    assert '<option value="tokens" selected>' in html


def test_a_reported_figure_is_plotted_marked_reported(client, board):
    scored(board, "gw", 2, measured_usage=gateway_usage(0.02, 1000, 100))
    scored(board, "self", 3, usage={"usd": 0.5, "input_tokens": 10, "output_tokens": 5})
    html = board_page(client, board)
    chart = chart_of(html)
    assert chart.count('class="pt pt-reported') == 1
    assert "(reported) · on the frontier</title>" in chart
    assert "reported by the agent, not measured" in html
    assert "badge-reported" in html


def test_runs_with_no_figure_are_listed_below_the_chart(client, board):
    costed = scored(board, "costed", 2, usage={"wall_seconds": 40})
    bare = scored(board, "bare", 3)
    html = board_page(client, board, axis="wall")
    listed = html.split('id="no-cost-figure"', 1)[1].split("</p>", 1)[0]
    assert "bare" in listed and "costed" not in listed
    assert costed.pk and bare.pk and "40 s" in html


def test_no_figure_at_all_says_so_instead_of_an_empty_chart(client, board):
    scored(board, "bare", 3)
    html = board_page(client, board, axis="steps")
    assert "No ranked run has a steps figure" in html
    assert '<svg class="cost-chart-svg"' not in html


def test_an_unknown_axis_falls_back_to_dollars(client, board):
    scored(board, "a", 3, usage={"usd": 0.3})
    html = board_page(client, board, axis="bogus")
    assert '<option value="usd" selected>' in html


def test_live_episode_wall_time_and_steps_are_the_sites_own(client, board):
    # A live run whose agent also reported a wall time: the site's own figure wins.
    run = scored(board, "live", 3, usage={"wall_seconds": 1.0, "steps": 1.0})
    run.mode = RunMode.EPISODES
    run.save(update_fields=["mode"])
    for task in board.tasks.order_by("position")[:2]:
        Candidate.objects.create(
            run=run, task=task, kind="text", usage={"wall_seconds": 30.0, "steps": 7.0}
        )
    wall = board_page(client, board, axis="wall")
    assert "1 min" in wall and "measured by the site, for live episode runs" in wall
    steps = board_page(client, board, axis="steps")
    assert ">14<" in steps.replace(" <span", "<")
    assert "(reported)" not in chart_of(steps)


def test_the_chart_plots_every_ranked_run_not_only_the_page(client, board):
    for i in range(3):
        scored(board, f"r{i}", i + 1, usage={"usd": 0.1 * (i + 1)})
    response = client.get(reverse("runs:leaderboard", args=["costs", 1]), {"page": 2})
    assert response.status_code == 200  # a page past the end shows the last one
    assert chart_of(response.content.decode()).count('class="pt pt-reported') == 3


def test_the_cost_chart_makes_the_same_queries_for_3_or_30_runs(
    client, make_pack, django_assert_max_num_queries
):
    small = import_version(make_pack, "few", tasks=4)
    large = import_version(make_pack, "many", tasks=4)
    for cv, n in ((small, 3), (large, 30)):
        for i in range(n):
            scored(cv, f"agent{i}", i % 5, measured_usage=gateway_usage(0.01 * i, 100 * i, i))
    for axis in ("usd", "wall"):
        url = reverse("runs:leaderboard", args=["few", 1])
        with CaptureQueriesContext(connection) as queries:
            client.get(url, {"axis": axis})
        with django_assert_max_num_queries(len(queries)):
            board_page(client, large, axis=axis)


# --- the compare page: each task's cost beside its verdicts ----------------------------------


def compare_rows(client, a, b, **params) -> list[str]:
    response = client.get(reverse("runs:compare"), {"a": a.pk, "b": b.pk, **params})
    assert response.status_code == 200
    body = response.content.decode().split('<div id="verdicts">', 1)[1]
    return [
        re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip()
        for row in body.split("</table>", 1)[0].split("<tr>")[2:]
    ]


def test_compare_shows_measured_task_costs_and_reported_ones_marked(client, board):
    a = scored(board, "metered", 3, measured_usage=gateway_usage(0.0012, 900, 300))
    b = scored(board, "self-reported", 2)
    tasks = list(board.tasks.order_by("position"))
    for task, usd in zip(tasks[:2], (0.25, 0.5), strict=True):
        Candidate.objects.create(run=b, task=task, kind="text", usage={"usd": usd})
    rows = compare_rows(client, a, b)
    assert len(rows) == 4
    assert "$0.0012" in rows[0] and "$0.25 reported" in rows[0]
    assert "$0.50 reported" in rows[1]
    assert rows[2].count("—") == 2  # no figure either side


def test_compare_reads_tokens_when_asked(client, board):
    a = scored(board, "metered", 3, measured_usage=gateway_usage(0.0012, 9_000, 3_300))
    b = scored(board, "other", 2)
    assert "12.3k" in compare_rows(client, a, b, axis="tokens")[0]


def test_compare_task_costs_add_no_query_per_task(client, make_pack, django_assert_max_num_queries):
    small = import_version(make_pack, "few", tasks=2)
    large = import_version(make_pack, "many", tasks=20)
    pairs = {}
    for cv, n in ((small, 2), (large, 20)):
        runs = [make_run(cv, name) for name in ("a", "b")]
        for run in runs:
            make_evaluation(run, [PASSED] * n)
            for task in cv.tasks.all():
                Candidate.objects.create(run=run, task=task, kind="text", usage={"usd": 0.1})
        pairs[cv.pk] = runs
    a, b = pairs[small.pk]
    with CaptureQueriesContext(connection) as queries:
        compare_rows(client, a, b)
    a, b = pairs[large.pk]
    with django_assert_max_num_queries(len(queries)):
        assert len(compare_rows(client, a, b)) == 20
