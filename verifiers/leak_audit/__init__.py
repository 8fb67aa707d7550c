"""The static leak audit of a pack: does anything sealed show up where agents can read it?

Public places: each task's public values (their keys too), metadata and environment (the
agent payload and task page), the pack's title and description, and every file under the
public root with its name: text read as UTF-8 or UTF-16/32, binary files as their printable
runs and embedded zlib streams, and containers looked into, nested or not (zip, tar, gzip,
bzip2, xz, lzma, Zstandard, LZ4, zlib), never extracted to disk (see ``containers``). Public
text is also read without diff markers and with JSON escapes and HTML tags undone. Sealed
text: every string in a task's ``evaluation_inputs`` and ``hidden`` values, and the text of
eval-root files (archives looked into the same way). Text is compared as a reader sees it:
NFKC, invisible characters dropped, bytes that are not UTF-8 read as Windows-1252.
Reading is bounded per file (bytes decompressed by every layer, CPU for the content given)
and per pack; whatever a bound stops is listed in ``audit_limits``.

* ``hidden_tokens_in_public`` / ``reference_in_public`` (failing): at least half of a sealed
  value's 8-word passages appear verbatim in public places (see ``text``; numbers or
  brackets alone never make one). Hashes are compared across the whole pack: one task's
  hidden value in another's prompt counts. A smaller overlap is ``hidden_tokens_overlap``
  (info): a test repeating a docstring example, a rubric quoting the question. A passage
  shared by more than 64 sealed values (boilerplate) counts for the first 64 only.
* ``hidden_value_in_public`` / ``reference_in_public`` (failing): a value too short for a
  passage but long enough to matter (4 words and 20 characters: "B", "42" or a file name
  meet public text by chance) appears whole (every 4-term window of it in one place) in its
  own task, a public file or file name, the title or the description. Found whole only in
  other tasks, it is ``value_in_other_tasks`` (warning): a short answer is often a name two
  questions share.
* ``reference_in_public`` (failing): every line of a code task's reference solution is in
  the task's public data. Lines it shares with the prompt (the signature, a copied
  docstring) are expected, so otherwise only the lines it adds are compared as above.
* ``hidden_file_is_public`` (failing): an eval-root file or archive member (of 20 bytes or
  more: empty ``__init__.py`` files are everywhere) has the content of a public file or
  member: the same sha256, or for small text files the same text with case, line endings
  and spacing aside.
* ``canary_in_public`` (failing): a manifest canary appears in any public place (case and
  spacing aside; binary files and file paths too).
* ``repo_patch_without_allow_paths``, ``mc_answers_all_same`` (warnings).
* ``audit_limits`` (warning): anything public not read to its end (size caps, damage,
  encryption, unsupported compression, members past the cap), so "healthy" means every
  public byte was audited.

Exempt, by design of the family or the data: a terminal task's ``expected_state`` (what the
instructions ask for, often an edit of a public file), and its eval-root files that are not
code (expected outputs derived from public inputs: found in public, a warning); answers a
rubric rejects (``rejected_answers``: a misconception the question states); a
multiple-choice ``answer`` within tasks (it names a public choice; it still counts in files,
the title and description);
evaluation inputs equal to a public string or file path, or without spaces (a test path, a
command word; see verifiers.redaction); a patch's context and removed lines (the public
repository before it). Extractive question answering (the answer is a span of the prompt)
is flagged.

Messages and ``evidence`` name tasks, resources, public places and rules; sealed text and
eval-root paths go in ``sealed_evidence``. Memory stays bounded: tasks are read once, public
passages are kept as 64-bit hashes in flat arrays behind a bit filter, files are read in
capped chunks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from verifiers.leak_audit.audit import Audit, AuditFile
from verifiers.pack_findings import Finding
from verifiers.task import TaskLanes

__all__ = ["AuditFile", "leak_findings"]


def leak_findings(
    tasks: Iterable[TaskLanes],
    files: Iterable[AuditFile],
    *,
    description: str,
    canaries: Sequence[str],
    pack_title: str = "",
) -> list[Finding]:
    """Every leak finding of a pack; ``tasks`` (TaskLanes) and ``files`` are read once."""
    audit = Audit(description or "", pack_title or "", canaries)
    for task in tasks:
        audit.add_task(task)
    audit.add_files(files)
    return audit.findings()
