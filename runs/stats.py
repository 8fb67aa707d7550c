"""Small statistics for scores: a 95 % interval and a paired test. Pure functions."""

from __future__ import annotations

import math
from dataclasses import dataclass

Z_95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high


def wilson_interval(successes: float, total: int, z: float = Z_95) -> Interval | None:
    """Wilson score interval for a pass rate (fractional successes allowed).

    Unlike mean ± 1.96·sd/√n it stays inside 0..1 and does not collapse to a point when every
    task passed, which is exactly when small benchmarks most need an honest width.
    """
    if total <= 0:
        return None
    p = min(max(successes / total, 0.0), 1.0)
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    margin = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return Interval(max(0.0, centre - margin), min(1.0, centre + margin))


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar test on the discordant pairs of two runs on the same tasks.

    Tasks both runs passed or both failed carry no information about which run is better;
    under the null hypothesis each discordant task is a fair coin.
    """
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    smaller = min(only_a, only_b)
    tail = sum(math.comb(discordant, k) for k in range(smaller + 1)) / 2**discordant
    return min(1.0, 2 * tail)
