"""Badges, scores, highlighted candidates and small SVG charts for run pages.

Everything renders without ``style=`` attributes: the CSP allows styles from our stylesheet
only, so colours come from classes and SVG sizes from presentation attributes.
"""

from __future__ import annotations

from django import template
from django.contrib.humanize.templatetags.humanize import intcomma
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from pygments.lexers import DiffLexer, PythonLexer, TextLexer

from packs.readable import highlighted
from runs.evaluators import UnknownEvaluator, evaluator_get, metrics_of
from runs.models import CandidateOrigin, Run, RunMode, RunSource
from runs.selectors import FamilyRate

register = template.Library()

# Icon + word, so a badge reads the same in colour, greyscale and print (UI.md).
BADGES = {
    "passed": ("✓", "passed"),
    "failed": ("✗", "failed"),
    "error": ("⚠", "error"),
    "pending": ("○", "pending"),
    "queued": ("◷", "queued"),
    "running": ("●", "running"),
    "done": ("✓", "done"),
}

LEXERS = {"code": PythonLexer, "patch": DiffLexer}

CHART_ROW = 26
CHART_LABEL = 180
CHART_BAR = 420
# The narrow chart (phones, site.css shows it below 820 px): each family's name above its bar,
# so that the labels keep their width and the text stays 12 px instead of being scaled down.
NARROW_ROW = 42
NARROW_BAR = 200
NARROW_WIDTH = 330


@register.simple_tag
def status_badge(status: str | None, title: str = "") -> SafeString:
    # A run still being filled through the API has no evaluation yet.
    if not status:
        return mark_safe('<span class="badge badge-neutral">no evaluation</span>')  # noqa: S308
    icon, word = BADGES.get(status, ("", status))
    return format_html(
        '<span class="badge status status-{}"{}>{} {}</span>',
        status,
        format_html(' title="{}"', title) if title else "",
        icon,
        word,
    )


def score_text(score: float | None, low: float | None, high: float | None) -> str:
    """The score with the bounds of its 95 % interval, as in "0.62 [0.55, 0.69]": a Wilson
    interval is not symmetric around the score (1 of 1 passed is 1.00 [0.21, 1.00]), so a
    "± half width" would misstate one of its ends."""
    if score is None:
        return "—"
    if low is None or high is None:
        return f"{score:.2f}"
    return f"{score:.2f} {interval_text(low, high)}"


def interval_text(low: float, high: float) -> str:
    return f"[{low:.2f}, {high:.2f}]"


def interval_title(low: float | None, high: float | None) -> str:
    """What the bracket means, on hover: the interval with one more decimal."""
    if low is None or high is None:
        return "no interval"
    return f"95 % Wilson interval: from {low:.3f} to {high:.3f}"


@register.simple_tag
def score_ci(score: float | None, low: float | None, high: float | None) -> SafeString:
    """The score and its interval's bounds, with what they are on hover."""
    if score is None or low is None or high is None:
        return format_html('<span class="score">{}</span>', score_text(score, low, high))
    return format_html(
        '<span class="score" title="{}">{}</span>',
        interval_title(low, high),
        score_text(score, low, high),
    )


@register.simple_tag
def board_score(row, metric: str) -> SafeString:
    """A leaderboard row's number and interval; the hover says how an uploaded evaluation's
    interval was found (a built-in scorer's is Wilson's)."""
    stated = stated_interval(row.evaluation, metric)
    if not stated or row.value is None or row.ci_low is None or row.ci_high is None:
        return score_ci(row.value, row.ci_low, row.ci_high)
    title = f"{stated}: from {row.ci_low:.3f} to {row.ci_high:.3f}"
    return format_html(
        '<span class="score" title="{}">{}</span>',
        title,
        score_text(row.value, row.ci_low, row.ci_high),
    )


NO_VERIFIER_TITLE = "their family has no verifier yet: left out of the score, not failed"


def _count(value: object) -> int:
    return int(value or 0)  # type: ignore[call-overload]


def no_verifier_only(total: object, pending: object) -> bool:
    """Every result is pending (a family with no verifier): nothing was scored."""
    return _count(pending) > 0 and _count(total) <= _count(pending)


@register.simple_tag
def score_cell(
    score: float | None,
    low: float | None,
    high: float | None,
    total: object = 0,
    pending: object = 0,
) -> SafeString:
    """A done evaluation's score with its interval; when none of its results could be
    verified it has no score, and says why instead of a bare dash."""
    if score is None and no_verifier_only(total, pending):
        return format_html(
            '<span class="muted" title="{}">no score — no verifier</span>',
            f"no result can be verified: {NO_VERIFIER_TITLE}",
        )
    return score_ci(score, low, high)


@register.simple_tag
def passed_total(passed: object, total: object, pending: object = 0) -> SafeString:
    """Passed out of the results that were scored, as in "2 / 3"; results of a family with no
    verifier are counted apart ("2 / 3 · 1 no verifier"), never as failures."""
    scored = _count(total) - _count(pending)
    if no_verifier_only(total, pending):
        return format_html(
            '<span class="muted" title="{}">{} no verifier</span>',
            NO_VERIFIER_TITLE,
            intcomma(_count(pending)),
        )
    text = format_html("{} / {}", intcomma(_count(passed)), intcomma(scored))
    if not _count(pending):
        return text
    return format_html(
        '{} <span class="muted small" title="{}">· {} no verifier</span>',
        text,
        NO_VERIFIER_TITLE,
        intcomma(_count(pending)),
    )


# On a score column's heading: the bracket after every score, explained once.
CI_HEADING_TITLE = (
    "Each score is followed by the low and high ends of its 95 % Wilson interval, "
    "which is not symmetric around the score"
)


@register.simple_tag
def ci_heading(label: str = "Score") -> SafeString:
    """A score column's heading, as in "Score [95 % CI]", with what the bracket is on hover."""
    return format_html('<span title="{}">{} [95 % CI]</span>', CI_HEADING_TITLE, label)


@register.filter
def duration(seconds: float | None) -> str:
    """A verifier's time: milliseconds under a second (text verdicts take a few), else
    seconds with two decimals; "—" when the task has not run."""
    if seconds is None:
        return "—"
    if seconds < 1:
        milliseconds = round(seconds * 1000)
        return f"{milliseconds} ms" if milliseconds else "< 1 ms"
    return f"{seconds:.2f} s"


# What a run's candidates are and how it arrived, in words a reader needs no glossary for
# (the stored choice labels are the code's: "oracle (reference solutions)", "form").
ORIGIN_WORDS = {
    "agent": "the agent's answers",
    "oracle": "reference solutions",
    "null": "empty answers",
    "adversarial": "built-in attacks",
}
SOURCE_WORDS = {"form": "the submit page", "api": "the API", "command": "the command line"}
# The site's forms other than the submit page: a version page opens episode runs and asks for
# reference runs, and those runs are stored as made through a form too.
VERSION_PAGE_WORDS = {
    "episodes": "the version page's episode form",
    "reference": "the version page's reference button",
}


@register.filter
def origin_words(origin: str) -> str:
    return ORIGIN_WORDS.get(origin, origin)


@register.filter
def source_words(run: Run) -> str:
    """Where a run came from, as its reader knows the place: a run made through a form names
    the form (the submit page, or a version page's episode form or reference button)."""
    if run.source == RunSource.FORM and run.mode == RunMode.EPISODES:
        return VERSION_PAGE_WORDS["episodes"]
    if run.source == RunSource.FORM and run.origin != CandidateOrigin.AGENT:
        return VERSION_PAGE_WORDS["reference"]
    return SOURCE_WORDS.get(run.source, run.source)


@register.simple_tag
def result_time(verified: float | None, episode: float | None = None) -> str:
    """What a result's times measured, each named: the verifier's time, and for a live
    episode the episode's own (from its first reset to its end), as in
    "verified in < 1 ms · episode 594 ms"."""
    parts = []
    if verified is not None:
        parts.append(f"verified in {duration(verified)}")
    if episode is not None:
        parts.append(f"episode {duration(episode)}")
    return " · ".join(parts) or "—"


@register.filter
def highlight_candidate(text: str, kind: str) -> SafeString:
    """Pygments-highlighted candidate with line numbers; Pygments escapes the text itself."""
    return highlighted(text or "", LEXERS.get(kind, TextLexer)(), line_numbers=True)


@register.inclusion_tag("runs/_family_chart.html")
def family_chart(rates: list[FamilyRate]) -> dict:
    rows = [
        {
            "rate": rate,
            "bar_y": index * CHART_ROW + 4,
            "text_y": index * CHART_ROW + 17,
            "width": f"{CHART_BAR * rate.rate:.1f}",
            "percent": f"{100 * rate.rate:.0f} %" if rate.scored else "no verifier",
            "narrow_label_y": index * NARROW_ROW + 14,
            "narrow_bar_y": index * NARROW_ROW + 20,
            "narrow_value_y": index * NARROW_ROW + 32,
            "narrow_width": f"{NARROW_BAR * rate.rate:.1f}",
        }
        for index, rate in enumerate(rates)
    ]
    return {
        "rows": rows,
        "height": max(1, len(rows)) * CHART_ROW,
        "label_x": CHART_LABEL - 8,
        "bar_x": CHART_LABEL,
        "bar_width": CHART_BAR,
        "value_x": CHART_LABEL + CHART_BAR + 8,
        "total_width": CHART_LABEL + CHART_BAR + 150,
        "narrow_height": max(1, len(rows)) * NARROW_ROW,
        "narrow_bar": NARROW_BAR,
        "narrow_value_x": NARROW_BAR + 8,
        "narrow_width": NARROW_WIDTH,
    }


@register.simple_tag(takes_context=True)
def sort_header(context, key: str, label: str, current: str) -> SafeString:
    """A column header link that sorts by ``key``, and reverses when already sorted by it."""
    query = context["request"].GET.copy()
    query["sort"] = f"-{key}" if current == key else key
    query.pop("page", None)
    arrow = " ▲" if current == key else " ▼" if current == f"-{key}" else ""
    return format_html('<a href="?{}">{}{}</a>', query.urlencode(), label, arrow)


@register.simple_tag
def metrics_line(evaluation) -> SafeString:
    """A done evaluation's metrics, each with its interval, as in
    "pass@1 0.62 [0.55, 0.69] · pass@10 0.91 [0.85, 0.95]". An uploaded evaluation's
    intervals say on hover how they were found (a seeded bootstrap, the program's own)."""
    metrics = metrics_of(evaluation)
    if not metrics:
        return mark_safe("—")  # noqa: S308 - a constant
    return format_html_join(
        " · ",
        '<span class="metric" title="{}">{} <strong>{}</strong>{}</span>',
        (
            (
                stated_interval(evaluation, name) or interval_title(m.ci_low, m.ci_high),
                name,
                "—" if m.value is None else f"{m.value:.2f}",
                ""
                if m.value is None or m.ci_low is None or m.ci_high is None
                else f" {interval_text(m.ci_low, m.ci_high)}",
            )
            for name, m in metrics
        ),
    )


def stated_interval(evaluation, metric: str) -> str:
    """How an uploaded evaluation's interval for this metric was found, as its metrics store
    it ("bootstrap over 3 tasks, 2000 resamples, seed '…'"); "" for a built-in scorer, whose
    interval is a Wilson one."""
    data = (evaluation.metrics or {}).get(metric)
    words = data.get("interval") if isinstance(data, dict) else None
    return f"95 % interval: {words}" if isinstance(words, str) and words else ""


@register.simple_tag
def score_label(evaluation) -> str:
    """What a done evaluation's headline number is: its scorer's primary metric and how its
    interval was found (Wilson for the built-in scorers, the stored words for an uploaded
    evaluation)."""
    metric = primary_metric(evaluation.evaluator)
    if evaluation.ci_low is None or evaluation.ci_high is None:
        return metric
    stated = stated_interval(evaluation, metric)
    return f"{metric} [{stated}]" if stated else f"{metric} [95 % Wilson interval]"


@register.simple_tag
def errors_label(evaluation) -> str:
    """Whose the errors are: never the agent's. Under an uploaded evaluation an error is its
    program's (evaluation_error) or ours (a sandbox that could not start)."""
    try:
        program = evaluator_get(evaluation.evaluator).program
    except UnknownEvaluator:
        program = False
    return "the evaluation's or ours, never the agent's" if program else "ours, not the agent's"


@register.filter
def result_metrics(result) -> SafeString:
    """An uploaded evaluation's metrics for one result, as in "accuracy 0.44 · coverage
    1.00"; "" for a result of a built-in scorer (its score is the verdict)."""
    stored = result.metrics if isinstance(result.metrics, dict) else {}
    values = [
        (name, data.get("value"))
        for name, data in sorted(stored.items())
        if isinstance(data, dict) and isinstance(data.get("value"), int | float)
    ]
    return format_html_join(
        " · ",
        '<span class="metric">{} <strong>{}</strong></span>',
        ((name, f"{value:.2f}") for name, value in values),
    )


@register.filter
def primary_metric(evaluator_key: str) -> str:
    """The metric an evaluation's score is (its scorer's primary one, built in or uploaded)."""
    try:
        return evaluator_get(evaluator_key).primary_metric
    except UnknownEvaluator:
        return "score"
