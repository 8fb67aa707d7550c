"""Leaderboards, comparisons and the query counts of the busiest pages, read as a user reads
them."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from packs.models import ContractVersion
from runs.models import (
    CandidateOrigin,
    Run,
)

# Fixtures (imported so pytest finds them here): a version with five tasks, a viewer, and a
# client signed in as that viewer.
from tests.runs.pages.support import (  # noqa: F401
    ERROR,
    FAILED,
    MARK,
    PASSED,
    PENDING,
    QUEUED,
    RUNNING,
    import_version,
    make_evaluation,
    make_run,
    page,
    run_url,
    user_with,
)

pytestmark = pytest.mark.django_db


# --- leaderboards ----------------------------------------------------------------------------


def scored_run(cv, agent: str, passed: int, total: int, **fields) -> Run:
    """A done run passing ``passed`` of the first ``total`` tasks."""
    run = make_run(cv, agent, **fields)
    make_evaluation(run, [PASSED] * passed + [FAILED] * (total - passed))
    return run


@pytest.fixture
def big(make_pack) -> ContractVersion:
    return import_version(make_pack, "board", tasks=40)


def test_the_leaderboards_page_says_when_nothing_is_scored(client, cv):
    make_run(cv)

    body = page(client, reverse("runs:leaderboards"))

    assert "No leaderboards yet" in body


def test_the_leaderboards_page_lists_scored_versions_with_best_score(client, big, cv):
    scored_run(big, "a", 30, 40)
    scored_run(big, "b", 36, 40, over_budget=True)
    make_run(cv)

    body = page(client, reverse("runs:leaderboards"))

    assert reverse("runs:leaderboard", args=["board", 1]) in body
    assert reverse("runs:leaderboard", args=["demo", 1]) not in body
    assert "0.75" in body  # the over-budget 0.90 is not the best eligible score
    assert "0.90" not in body


def test_the_leaderboard_ranks_by_score_and_marks_ties_within_noise(client, big):
    scored_run(big, "leader", 36, 40)
    scored_run(big, "close", 34, 40)
    scored_run(big, "far", 10, 40)

    body = page(client, reverse("runs:leaderboard", args=["board", 1]))

    assert body.index(">leader</a>") < body.index(">close</a>") < body.index(">far</a>")
    rows = body[: body.index("</table>")].split("<tr")
    close = next(r for r in rows if ">close</a>" in r)
    far = next(r for r in rows if ">far</a>" in r)
    leader = next(r for r in rows if ">leader</a>" in r)
    assert "tied within noise" in close
    assert "tied within noise" not in far and "tied within noise" not in leader
    assert leader.count("36 / 40") == 2  # per family (all multiple_choice) and in total


def test_invalid_and_reference_runs_are_listed_apart(client, big):
    scored_run(big, "honest", 20, 40)
    scored_run(big, "spender", 39, 40, over_budget=True, budget_notes=["used 9,000 tokens"])
    scored_run(
        big,
        "rule-breaker",
        38,
        40,
        valid=False,
        invalid_reasons=["task q3 sample 0: read_only: tests/test_x.py"],
    )
    scored_run(big, "the-oracle", 40, 40, origin=CandidateOrigin.ORACLE)

    body = page(client, reverse("runs:leaderboard", args=["board", 1]))

    ranked = body[: body.index("<h2>Invalid runs")]
    invalid = body[body.index("<h2>Invalid runs") : body.index("<h2>Reference runs")]
    reference = body[body.index("<h2>Reference runs") :]
    assert "honest" in ranked and "the-oracle" not in ranked
    assert "spender" not in ranked and "rule-breaker" not in ranked
    assert "spender" in invalid and "used 9,000 tokens" in invalid
    assert "rule-breaker" in invalid
    assert "task q3 sample 0: read_only: tests/test_x.py" in invalid
    assert "the-oracle" in reference and "reference solutions" in reference


def test_the_leaderboard_uses_each_runs_latest_done_evaluation(client, big):
    run = scored_run(big, "rescored", 10, 40)
    make_evaluation(run, [PASSED] * 30 + [FAILED] * 10, number=2)
    make_evaluation(run, [QUEUED] * 40, number=3)

    body = page(client, reverse("runs:leaderboard", args=["board", 1]))

    assert "30 / 40" in body and "10 / 40" not in body
    assert body.count(">rescored</a>") == 1


def test_a_leaderboard_without_ranked_runs_says_so(client, big):
    body = page(client, reverse("runs:leaderboard", args=["board", 1]))

    assert "No ranked runs yet" in body
    assert client.get(reverse("runs:leaderboard", args=["board", 9])).status_code == 404


# --- compare ---------------------------------------------------------------------------------


def compare(client, a: Run, b: Run, **params):
    return client.get(reverse("runs:compare"), {"a": a.pk, "b": b.pk, **params})


def test_comparing_two_runs_counts_agreements_and_tests_the_difference(client, make_pack):
    cv = import_version(make_pack, "cmp", tasks=10)
    a = make_run(cv, "A-agent")
    make_evaluation(a, [PASSED] * 8 + [FAILED] * 2)
    b = make_run(cv, "B-agent")
    make_evaluation(b, [PASSED] * 2 + [FAILED] * 6 + [PASSED] + [FAILED])

    body = compare(client, a, b).content.decode()

    # both 2, only A 6, only B 1, neither 1; exact McNemar p = 2 * 8 / 128 = 0.125
    assert '>2</a> <span class="muted small">both' in body
    assert '>6</a> <span class="muted small">only A' in body
    assert '>1</a> <span class="muted small">only B' in body
    assert '>1</a> <span class="muted small">neither' in body
    assert "p = 0.125" in body
    assert "not significant at 5 %" in body


def test_a_lopsided_comparison_is_significant(client, make_pack):
    cv = import_version(make_pack, "cmp", tasks=6)
    a = make_run(cv, "A-agent")
    make_evaluation(a, [PASSED] * 6)
    b = make_run(cv, "B-agent")
    make_evaluation(b, [FAILED] * 6)

    body = compare(client, a, b).content.decode()

    assert "p = 0.0312" in body
    assert "significant at 5 %</strong>: run A passes more" in body


def test_the_verdict_table_filters_by_category_and_pages_by_fifty(client, make_pack):
    cv = import_version(make_pack, "cmp", tasks=60)
    a = make_run(cv, "A-agent")
    make_evaluation(a, [PASSED] * 60)
    b = make_run(cv, "B-agent")
    make_evaluation(b, [PASSED] * 55 + [FAILED] * 5)

    everything = compare(client, a, b).content.decode()
    only_a = compare(client, a, b, category="only_a").content.decode()

    assert "1–50 of 60" in everything
    assert "1–5 of 5" in only_a and ">q56</a>" in only_a and ">q1</a>" not in only_a


def test_runs_on_different_versions_cannot_be_compared(client, make_pack, cv):
    other = import_version(make_pack, "other", tasks=5)
    a, b = scored_run(cv, "a", 1, 5), scored_run(other, "b", 1, 5)

    response = compare(client, a, b)

    assert response.status_code == 400
    assert "only runs on the same contract version" in response.content.decode()


def test_compare_needs_two_runs_with_a_finished_evaluation(client, cv):
    a = scored_run(cv, "a", 1, 5)
    b = make_run(cv, "b")

    missing = client.get(reverse("runs:compare"), {"a": a.pk})
    unscored = compare(client, a, b)

    assert missing.status_code == 400
    assert "Choose two runs to compare" in missing.content.decode()
    assert unscored.status_code == 400
    assert f"Run {b.pk} has no finished evaluation yet" in unscored.content.decode()
    assert client.get(reverse("runs:compare"), {"a": a.pk, "b": 999}).status_code == 404


def test_the_run_page_offers_to_compare_with_runs_of_the_same_version(client, make_pack, cv):
    here, same = make_run(cv, "here"), make_run(cv, "same-version")
    make_run(import_version(make_pack, "other", tasks=1), "elsewhere")

    body = page(client, run_url(here))

    assert "Compare with…" in body
    assert f'<option value="{same.pk}">#{same.pk} same-version' in body
    assert "elsewhere" not in body


# --- query counts ----------------------------------------------------------------------------


def count_queries(client, url: str, **params) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url, params).status_code == 200
    return len(queries)


def test_the_run_page_makes_the_same_queries_for_3_or_30_results(
    client, make_pack, django_assert_max_num_queries
):
    cv = import_version(make_pack, "qc", tasks=30)
    small, large = make_run(cv, "small"), make_run(cv, "large")
    for run, n in ((small, 3), (large, 30)):
        make_evaluation(run, [PASSED, FAILED, ERROR] * (n // 3))
        make_evaluation(run, [FAILED, PASSED, ERROR] * (n // 3), number=2)
        make_evaluation(run, [FAILED, PASSED, QUEUED] * (n // 3), number=3, done=False)

    # Evaluation 3 is running (progress, why waiting, queue position); 2 is done and changed
    # from 1 (score, chart, changes): both views stay constant.
    running = count_queries(client, run_url(small))
    with django_assert_max_num_queries(running):
        assert client.get(run_url(large)).status_code == 200
    done = count_queries(client, run_url(small), evaluation=2)
    with django_assert_max_num_queries(done):
        body = client.get(run_url(large), {"evaluation": 2}).content.decode()
    assert "20 tasks changed status." in body


def test_the_results_partial_makes_the_same_queries_for_3_or_30_results(
    client, make_pack, django_assert_max_num_queries
):
    cv = import_version(make_pack, "qc", tasks=30)
    small, large = make_run(cv, "small"), make_run(cv, "large")
    make_evaluation(small, [PASSED, FAILED, ERROR])
    make_evaluation(large, [PASSED, FAILED, ERROR] * 10)

    with CaptureQueriesContext(connection) as queries:
        client.get(run_url(small), {"sort": "-score"}, HTTP_HX_REQUEST="true")
    with django_assert_max_num_queries(len(queries)):
        response = client.get(run_url(large), {"sort": "-score"}, HTTP_HX_REQUEST="true")
    assert response.content.decode().count("/results/") == 30


def test_the_leaderboard_makes_the_same_queries_for_3_or_30_runs(
    client, make_pack, django_assert_max_num_queries
):
    small = import_version(make_pack, "few", tasks=4)
    large = import_version(make_pack, "many", tasks=4)
    for cv, n in ((small, 3), (large, 30)):
        for i in range(n):
            origin = CandidateOrigin.ORACLE if i == 0 else CandidateOrigin.AGENT
            scored_run(cv, f"agent{i}", i % 5, 4, origin=origin, over_budget=i == 1)

    baseline = count_queries(client, reverse("runs:leaderboard", args=["few", 1]))
    with django_assert_max_num_queries(baseline):
        assert client.get(reverse("runs:leaderboard", args=["many", 1])).status_code == 200
    list_baseline = count_queries(client, reverse("runs:leaderboards"))
    scored_run(import_version(make_pack, "more", tasks=4), "late", 2, 4)
    with django_assert_max_num_queries(list_baseline):
        assert client.get(reverse("runs:leaderboards")).status_code == 200


def test_the_runs_list_makes_the_same_queries_for_3_or_30_runs(
    client, cv, django_assert_max_num_queries
):
    for i in range(3):
        make_evaluation(make_run(cv, f"r{i}"), [PASSED, FAILED, FAILED, FAILED, PENDING])
    baseline = count_queries(client, reverse("runs:list"))
    for i in range(27):
        make_evaluation(make_run(cv, f"s{i}"), [PASSED, FAILED, FAILED, FAILED, PENDING])

    with django_assert_max_num_queries(baseline):
        assert client.get(reverse("runs:list")).status_code == 200


def test_durations_read_in_milliseconds_under_a_second():
    from runs.templatetags.runs_tags import duration

    assert [duration(s) for s in (None, 0.0001, 0.004, 0.5, 1.0, 12.345)] == [
        "—",
        "< 1 ms",
        "4 ms",
        "500 ms",
        "1.00 s",
        "12.35 s",
    ]
