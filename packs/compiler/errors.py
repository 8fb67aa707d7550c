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


class PackError(Exception):
    """The pack cannot be compiled; ``problems`` says every reason found (at least one)."""

    def __init__(self, problems: list[Problem]) -> None:
        if not problems:
            raise ValueError("PackError needs at least one problem")
        self.problems = list(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


class ProblemLog:
    """Collects problems so an author sees many at once, but stops at a cap.

    The cap bounds memory and the size of the error page for a pack with a million bad rows.
    """

    def __init__(self, max_problems: int) -> None:
        self.max_problems = max(1, max_problems)
        self.problems: list[Problem] = []

    def add(self, problem: Problem) -> None:
        self.problems.append(problem)
        if len(self.problems) >= self.max_problems:
            self.problems.append(
                Problem(
                    problem.file,
                    None,
                    None,
                    f"stopped after {self.max_problems} problems; fix these and upload again",
                )
            )
            raise PackError(self.problems)

    def fail(self, problem: Problem) -> None:
        """Record a problem that makes going on pointless, and stop."""
        self.problems.append(problem)
        raise PackError(self.problems)

    def raise_if_any(self) -> None:
        if self.problems:
            raise PackError(self.problems)
