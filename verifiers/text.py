"""Text helpers shared by the text-answer verifiers (multiple_choice, short_answer, free_response).

Everything here is a pure function of its arguments. Normalisation follows upstream (spec §4.1):
trim, lowercase, collapse whitespace runs, strip edge punctuation; we also strip ``!`` and ``?``
so "Gold!" reads as "gold". The focused answer is the text after an answer keyword on the last
non-empty line (spec §4.1 step 2, §4.2).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from verifiers.task import Candidate, TaskLanes
from verifiers.verdict import Reason, Verdict, error, failed

# Spec A49: a verifier refuses answers long enough to hold every plausible answer.
MAX_CANDIDATE_CHARS = 20_000

EDGE_CHARACTERS = " \t\r\n\"'`.,;:!?"
# Markdown emphasis and brackets around a bare answer ("**B**", "(B)") — stripped only when
# looking for a label or a choice, never by the general normalisation.
DECORATION_CHARACTERS = EDGE_CHARACTERS + "*_()[]{}"

MULTIPLE_CHOICE_KEYWORDS = ("final answer", "answer", "choice", "option")
SHORT_ANSWER_KEYWORDS = ("final answer", "answer")

_WORD_TOKEN = re.compile(r"[^\W_]+")
_F1_TOKEN = re.compile(r"[a-z0-9]+")

# A comma is a list separator unless it sits between a digit and exactly three digits
# ("1,234.5" is one number, "0,1" and "3, 4" are two items).
# No surrounding \s*: that backtracks quadratically over long whitespace; items are stripped.
_LIST_SEPARATOR = re.compile(
    r"(?<!\d),|,(?!\d{3}(?!\d))|[;|/&\n]|\band/or\b|\bor\b|\band\b", re.IGNORECASE
)
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# A signed decimal not glued to a preceding word ("COVID-19" has 19, not -19; "CO2" has none).
_NUMBER = re.compile(r"(?<![\w.])[-+\u2212]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")

# Upstream's list (spec §4.3), used by token F1 and to let "it is gold" count as one word.
_STOPWORD_TEXT = (
    "a an and are as at be because been before being by did do does due for from how if in "
    "into is it its no not of on or over that the their this through to was were what when "
    "where which who whom whose why with you your"
)
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())


# --- candidates ----------------------------------------------------------------------------


def reject_unusable_text(candidate: Candidate) -> Verdict | None:
    """The failed verdict for a candidate no text verifier should look at, else None."""
    if candidate.kind != "text":
        return failed(
            Reason.INVALID_CANDIDATE,
            details={"problem": "wrong_candidate_kind", "candidate_kind": candidate.kind},
        )
    if not candidate.text.strip():
        return failed(Reason.INVALID_CANDIDATE, details={"problem": "empty_answer"})
    if len(candidate.text) > MAX_CANDIDATE_CHARS:
        return failed(
            Reason.INVALID_CANDIDATE,
            details={
                "problem": "answer_too_long",
                "length": len(candidate.text),
                "limit": MAX_CANDIDATE_CHARS,
            },
        )
    return None


def evaluation_value(task: TaskLanes, name: str) -> Any:
    """An eval field wherever the compiler put it (hidden by default, spec §2.2)."""
    if name in task.hidden:
        return task.hidden[name]
    return task.evaluation_inputs.get(name)


def task_misconfigured(problem: str) -> Verdict:
    """Our fault, not the candidate's: eval data that upload validation should have refused."""
    return error(Reason.TASK_MISCONFIGURED, details={"problem": problem})


# --- normalisation -------------------------------------------------------------------------


def normalise(text: str) -> str:
    """Trim, lowercase, collapse whitespace, strip edge punctuation (spec §4.1 ``norm``)."""
    # str.split() splits on exactly the characters re's \s matches (both use Unicode's
    # whitespace property) and drops the edges: the same result as a regex sub, 3x faster.
    # Verifiers call this a dozen times per verdict.
    return " ".join(text.lower().split()).strip(EDGE_CHARACTERS)


def normalise_free_text(text: str) -> str:
    """``normalise`` after spelling out "u.s." (spec §4.3 containment)."""
    return normalise(text.lower().replace("u.s.", "united states"))


def undecorate(text: str) -> str:
    """A normalised text without surrounding emphasis or brackets: "**(b)**" → "b"."""
    return normalise(text).strip(DECORATION_CHARACTERS)


def undecorate_normalised(normalised: str) -> str:
    """``undecorate`` of a text already normalised (saves normalising it twice)."""
    return normalised.strip(DECORATION_CHARACTERS)


def answer_text(value: Any) -> str:
    """How an accepted answer (a JSON string or number) reads as text."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --- focused answer ------------------------------------------------------------------------


def last_non_empty_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


# ":" or a dash after an answer keyword; a dash before a digit is a minus sign ("answer -3").
_SEPARATOR_MARK = r":|[\-\u2013\u2014](?![\d.])"


def keyword_pattern(keywords: Sequence[str]) -> str:
    """An answer keyword, optionally plural and followed by "is": "Final answer is", "Options"."""
    words = "|".join(r"\s+".join(map(re.escape, keyword.split())) for keyword in keywords)
    return rf"(?:{words})s?(?:\s+is\b)?"


@functools.cache
def focus_pattern(keywords: tuple[str, ...]) -> re.Pattern[str]:
    # One \s* before and one after the optional mark: two adjacent \s* would backtrack
    # quadratically on a keyword followed by a long run of spaces.
    return re.compile(
        rf"\b{keyword_pattern(keywords)}\b\s*(?:(?:{_SEPARATOR_MARK})\s*)?(?P<answer>\S.*)$",
        re.IGNORECASE,
    )


@functools.cache
def prefix_pattern(keywords: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(
        rf"^{keyword_pattern(keywords)}(?:\s*(?:{_SEPARATOR_MARK})\s*|\s+)", re.IGNORECASE
    )


def focused_answer(text: str, keywords: tuple[str, ...]) -> str:
    """The text after the first answer keyword on the last non-empty line, else that line."""
    line = last_non_empty_line(text)
    match = focus_pattern(keywords).search(line)
    return match.group("answer").strip() if match else line


def strip_answer_prefix(text: str, keywords: tuple[str, ...]) -> str:
    """Drop a leading "answer:" / "option" / "final answer is" from one answer item."""
    text = text.strip()
    # An anchored match, not sub(): sub() tries the pattern at every position of the text.
    found = prefix_pattern(keywords).match(text)
    return text[found.end() :] if found else text


# --- lists, phrases, numbers ---------------------------------------------------------------


def split_list_items(text: str) -> list[str]:
    """The non-empty items of a list written with , ; | / & newlines, "or", "and", "and/or"."""
    items = (item.strip() for item in _LIST_SEPARATOR.split(text))
    return [item for item in items if item.strip(DECORATION_CHARACTERS)]


def contains_phrase(text: str, phrase: str) -> bool:
    """``phrase`` occurs in ``text`` with no letter, digit or underscore touching either end."""
    return bool(phrase) and re.search(phrase_pattern(phrase), text) is not None


def phrase_pattern(phrase: str) -> str:
    return rf"(?<!\w){re.escape(phrase)}(?!\w)"


def numbers_in(text: str) -> list[float]:
    """Every signed decimal in reading order; thousands commas are ignored ("1,234.5")."""
    plain = _THOUSANDS_COMMA.sub("", text).replace("\u2212", "-")
    found: list[float] = []
    for match in _NUMBER.finditer(plain):
        value = float(match.group())
        if math.isfinite(value):
            found.append(value)
    return found


def first_number(text: str) -> float | None:
    numbers = numbers_in(text)
    return numbers[0] if numbers else None


def numbers_close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance or math.isclose(a, b, rel_tol=1e-9)


def word_tokens(text: str) -> list[str]:
    """Lowercased runs of letters and digits (any script)."""
    return _WORD_TOKEN.findall(text.lower())


def content_tokens(text: str) -> list[str]:
    return [token for token in word_tokens(text) if token not in STOPWORDS]


# --- token F1 (spec §4.3) ------------------------------------------------------------------


def f1_tokens(text: str) -> list[str]:
    spelled_out = text.lower().replace("u.s.", "united states")
    return [token for token in _F1_TOKEN.findall(spelled_out) if token not in STOPWORDS]


def token_f1(candidate: str, answer: str) -> float:
    candidate_tokens = f1_tokens(candidate)
    answer_tokens = f1_tokens(answer)
    if not candidate_tokens or not answer_tokens:
        return 0.0
    common = sum((Counter(candidate_tokens) & Counter(answer_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(candidate_tokens)
    recall = common / len(answer_tokens)
    return 2 * precision * recall / (precision + recall)


def best_token_f1(candidate: str, answers: Iterable[str]) -> tuple[float, int | None]:
    """The best F1 and the first index reaching it (None when every score is zero)."""
    best_score, best_index = 0.0, None
    for index, answer in enumerate(answers):
        score = token_f1(candidate, answer)
        if score > best_score:
            best_score, best_index = score, index
    return best_score, best_index
