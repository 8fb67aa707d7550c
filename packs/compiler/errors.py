"""Problems an author can fix, and the exception that carries them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    file: str  # pack-relative file name; never an absolute host path
    line: int | None  # 1-based line in `file`, when known
    field: str | None  # dotted field path, e.g. "eval.answer", "assets[0].path"
    message: str
    # The offending text (a window of the line) and the 1-based column in it, when known:
    # shown under the message with the column marked.
    excerpt: str | None = None
    column: int | None = None

    @property
    def caret(self) -> str:
        return " " * (self.column - 1) + "^" if self.column else ""

    def __str__(self) -> str:
        where = [self.file]
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field:
            where.append(f"field {self.field}")
        return f"{', '.join(where)}: {self.message}"


EXCERPT_RADIUS = 60


def excerpt_around(text: str, column: int) -> tuple[str, int]:
    """A window of at most 2 × EXCERPT_RADIUS characters around a 1-based column."""
    start = max(0, column - 1 - EXCERPT_RADIUS)
    window = text[start : column - 1 + EXCERPT_RADIUS]
    return window.replace("\t", " "), column - start


def more_problems_text(count: int) -> str:
    """The line that stands for the problems past the cap: 'and 7 more problems'."""
    return f"and {count} more problem{'' if count == 1 else 's'}"


class PackError(Exception):
    """The pack cannot be compiled; ``problems`` lists the reasons found (at least one), up
    to the cap; ``unlisted`` counts the ones found past it, which were not kept."""

    def __init__(self, problems: list[Problem], *, unlisted: int = 0) -> None:
        if not problems:
            raise ValueError("PackError needs at least one problem")
        self.problems = list(problems)
        self.unlisted = unlisted
        lines = [str(problem) for problem in self.problems]
        if unlisted:
            lines.append(more_problems_text(unlisted))
        super().__init__("\n".join(lines))

    @property
    def total(self) -> int:
        return len(self.problems) + self.unlisted


class ProblemLog:
    """Collects every problem of one pass, so an author sees them all at once.

    Only the first ``max_problems`` are kept, the rest are counted: that bounds memory and
    the size of the error page for a pack with a million bad rows, while still telling the
    author how much is left to fix.
    """

    def __init__(self, max_problems: int) -> None:
        self.max_problems = max(1, max_problems)
        self.problems: list[Problem] = []
        self.unlisted = 0

    def add(self, problem: Problem) -> None:
        if len(self.problems) < self.max_problems:
            self.problems.append(problem)
        else:
            self.unlisted += 1

    def fail(self, problem: Problem) -> None:
        """Record a problem that makes going on pointless, and stop. It is listed even past
        the cap: it says why the problems after it were not looked for."""
        self.problems.append(problem)
        raise self.error()

    def error(self) -> PackError:
        return PackError(self.problems, unlisted=self.unlisted)

    def raise_if_any(self) -> None:
        if self.problems:
            raise self.error()
