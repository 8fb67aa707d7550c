"""Which strings stored verifier output must not show: what is sealed and not also public.

A task's evaluation inputs often repeat what the agent was given: an ``allow_paths`` entry
such as ``src/calculator_core.py``, the name of a test file in the public repository. Those
strings are no secret, and redacting them makes a failing run's log unreadable. A sealed
string is public when it equals a string value of the public lane, or a public file's path
seen from any folder the agent may have been given (the asset's own path, its path inside
the mounted folder, any folder on the way). Hidden values stay redacted whatever they equal:
they are for the trusted evaluator only, and whether a public string is also the answer is
itself the secret (a multiple-choice answer equal to one of the choices).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

from verifiers.task import TaskLanes
from verifiers.verdict import MIN_INPUT_SCRUB_LENGTH, MIN_SCRUB_LENGTH, secret_strings

# Files of these resource names live in the public root (the agent's assets).
PUBLIC_FILE_RESOURCES = ("assets",)


def public_strings(task: TaskLanes) -> frozenset[str]:
    """Every string the agent was shown whole: public values and public file paths."""
    found = set(secret_strings(task.public.values(), min_length=1))
    for name in PUBLIC_FILE_RESOURCES:
        for task_file in task.files.get(name, ()):
            found.update(path_forms(task_file.path))
    return frozenset(found)


def path_forms(path: str) -> set[str]:
    """``a/b/c.py`` → itself and every run of its components: ``b/c.py``, ``c.py``, ``a/b``,
    ``a/b/``, ``b/`` … (a mount or a working folder may start the agent at any of them)."""
    parts = PurePosixPath(path).parts
    forms: set[str] = set()
    for start in range(len(parts)):
        for end in range(start + 1, len(parts) + 1):
            joined = "/".join(parts[start:end])
            forms.add(joined)
            if end < len(parts):
                forms.add(f"{joined}/")  # a folder, as allow_paths writes it
    return forms


def sealed_only(secrets: Iterable[str], public: frozenset[str]) -> list[str]:
    """The secrets that are not also public, longest first."""
    kept = {secret for secret in secrets if secret not in public and secret.strip() not in public}
    return sorted(kept, key=len, reverse=True)


def output_secrets(task: TaskLanes, *, min_input_length: int = MIN_INPUT_SCRUB_LENGTH) -> list[str]:
    """What to scrub from a verifier's stored output: every hidden string, and the
    evaluation-input strings of at least ``min_input_length`` characters that the agent
    was not shown."""
    hidden = secret_strings(task.hidden.values(), MIN_SCRUB_LENGTH)
    inputs = secret_strings(task.evaluation_inputs.values(), min_input_length)
    return sorted({*hidden, *sealed_only(inputs, public_strings(task))}, key=len, reverse=True)
