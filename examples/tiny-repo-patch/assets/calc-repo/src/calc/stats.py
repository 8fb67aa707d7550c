"""Small descriptive statistics helpers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean of the values."""
    items = list(values)
    if not items:
        raise ValueError("mean() of an empty sequence")
    return sum(items) / len(items)


def median(values: Iterable[float]) -> float:
    """Middle value of the sorted values."""
    items = sorted(values)
    if not items:
        raise ValueError("median() of an empty sequence")
    middle = len(items) // 2
    return items[middle]


def variance(values: Iterable[float]) -> float:
    """Sample variance (divides by n - 1); needs at least two values."""
    items = list(values)
    if len(items) < 2:
        raise ValueError("variance() needs at least two values")
    centre = mean(items)
    return sum((x - centre) ** 2 for x in items) / len(items)


def mode(values: Iterable[float]) -> float:
    """Most common value; on a tie, the smallest of the tied values."""
    counts = Counter(values)
    if not counts:
        raise ValueError("mode() of an empty sequence")
    return counts.most_common(1)[0][0]
