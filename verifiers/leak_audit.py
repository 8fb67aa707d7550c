"""The static leak audit of a pack: does anything sealed show up where agents can read it?

Public places: each task's public values, metadata and environment (the agent payload and
task page), the pack's title and description, every file under the public root (text read;
zip, tar and single gzip/bzip2/xz files looked into, never extracted to disk). Sealed text:
every string in a task's ``evaluation_inputs`` and ``hidden`` values, and eval-root files.

* ``hidden_tokens_in_public`` / ``reference_in_public`` (failing): at least half of a sealed
  value's 8-word passages appear verbatim in public places. A passage is 8 word tokens
  (letters or identifiers, case aside) with everything between them (numbers, punctuation:
  ``ord(ch) + 5`` is not ``ord(ch) - 5``); numbers or brackets alone never make one. Hashes
  are compared across the whole pack: one task's hidden value in another's prompt counts.
  A smaller overlap is ``hidden_tokens_overlap`` (info): a test repeating a docstring
  example, a rubric quoting the question.
* ``hidden_value_in_public`` / ``reference_in_public`` (failing): a value too short for a
  passage but long enough to matter (4 words and 20 characters: "B", "42" or a file name
  meet public text by chance) appears whole, case and spacing aside, in the same task's
  public data, the title or the description.
* ``reference_in_public`` (failing): every line of a code task's reference solution is in
  the task's public data. Lines it shares with the prompt (the signature, a copied
  docstring) are expected, so otherwise only the lines it adds are compared as above.
* ``hidden_file_is_public`` (failing): an eval-root file (of 20 bytes or more: empty
  ``__init__.py`` files are everywhere) has the sha256 of a public file or archive member.
* ``canary_in_public`` (failing): a manifest canary appears in any public place (case and
  spacing aside; binary files and file paths too).
* ``repo_patch_without_allow_paths``, ``mc_answers_all_same`` (warnings).

Exempt, by design of the family or the data: a multiple-choice ``answer`` (it names a public
choice) and a terminal task's ``expected_state`` (what the instructions ask for); evaluation
inputs equal to a public string or file path, or without spaces (a test path, a command
word; see verifiers.redaction); a patch's context and removed lines (the public repository
before it). Extractive question answering (the answer is a span of the prompt) is flagged.

Messages and ``evidence`` name tasks, resources, public places and rules; sealed text and
eval-root paths go in ``sealed_evidence``. Memory stays bounded: tasks are read once, public
passages are kept as 64-bit hashes in flat arrays behind a bit filter, files are read in
capped chunks.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import lzma
import re
import tarfile
import zipfile
import zlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import IO, Any, Literal

from verifiers.families.multiple_choice import expected_answers, read_choices
from verifiers.health import FAILING, INFO, LEAK, WARNING, Finding
from verifiers.redaction import public_strings
from verifiers.task import TaskLanes

WORDS = 8  # words in a passage
MAJORITY = 0.5  # share of a value's passages that makes it leaked
MIN_VALUE_WORDS = 4
MIN_VALUE_CHARS = 20
MIN_FILE_BYTES = 20
MIN_MC_TASKS = 4
MAX_VALUE_CHARS = 1_000_000  # of one sealed value (the rest is listed as not audited)
MAX_FILE_BYTES = 8 * 1024 * 1024  # read of one public file or archive member
MAX_EVAL_FILE_BYTES = 1024 * 1024  # read of one eval-root file
MAX_EVAL_TEXT_BYTES = 32 * 1024 * 1024  # all eval-root files together
MAX_ARCHIVE_MEMBERS = 2000
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024  # decompressed, per archive
CHUNK_BYTES = 64 * 1024
OVERLAP_CHARS = 2048  # text carried into the next chunk, so passages across the cut are seen
MAX_FINDINGS_PER_CODE = 100
MAX_PASSAGES = 3
MAX_PASSAGE_CHARS = 400
MAX_OWNERS_PER_PASSAGE = 64  # boilerplate shared by many sealed values
BLOOM_BITS = 1 << 26  # 8 MB: about 1% false hits at 700k public passages, checked exactly

# What a damaged or hostile archive raises while it is read.
_UNREADABLE = (
    OSError,
    EOFError,
    ValueError,
    zlib.error,
    lzma.LZMAError,
    zipfile.BadZipFile,
    tarfile.TarError,
)
_TOKEN = re.compile(r"[^\W\d]\w*|\d\w*|[^\w\s]")
_SPACE = re.compile(r"\s+")
_DIFF_START = re.compile(r"^(diff --git |--- \S)", re.MULTILINE)

# (family, eval key): sealed values whose text the public data states by design.
STATED_BY_DESIGN = frozenset({("multiple_choice", "answer"), ("terminal_task", "expected_state")})
# (family, eval key): reference solutions; their leaks get the code reference_in_public.
CODE_SOLUTIONS = frozenset(
    ("code_completion", k) for k in ("canonical_solution", "reference_solution")
)
REFERENCE_KEYS = CODE_SOLUTIONS | {
    ("repo_patch", "gold_patch"),
    ("free_response", "reference_answer"),
    ("short_answer", "accepted_answers"),
}

Place = tuple[str, str]  # ("task", task id) | ("file", path) | ("description"|"title", "")


@dataclass(frozen=True)
class AuditFile:
    root: Literal["public", "eval"]
    path: str  # posix path under its root
    sha256: str
    source: Path  # where to read it


@dataclass
class _Value:
    """A sealed value (or eval-root file) being compared by passages."""

    task_id: str | None  # None: an eval-root file
    name: str  # resource name, or the eval file's path
    lane: str  # "evaluation_inputs", "hidden" or "eval file"
    reference: bool
    passages: int  # distinct passages in it
    hits: dict[Place, set[int]] = field(default_factory=dict)
    hit_names: dict[Place, set[str]] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)  # hash → passage text (a few)


def leak_findings(
    tasks: Iterable[TaskLanes],
    files: Iterable[AuditFile],
    *,
    description: str,
    canaries: Sequence[str],
    pack_title: str = "",
) -> list[Finding]:
    """Every leak finding of a pack; ``tasks`` (TaskLanes) and ``files`` are read once."""
    audit = _Audit(description or "", pack_title or "", canaries)
    for task in tasks:
        audit.add_task(task)
    audit.add_files(files)
    return audit.findings()


# --- text ------------------------------------------------------------------------------------


def normalise(text: str) -> str:
    """Case and runs of whitespace aside."""
    return _SPACE.sub(" ", text.casefold()).strip()


def _is_word(token: str) -> bool:
    return token[0].isalpha() or token[0] == "_"


def passage_hashes(text: str) -> list[int]:
    """The hash of every passage of ``text``, in order (index = passage number)."""
    if len(text) < 2 * WORDS - 1:  # too short to hold 8 words and the spaces between
        return []
    tokens = _TOKEN.findall(text.lower())
    # Inlined _is_word: this runs for every token of the pack.
    words = [i for i, token in enumerate(tokens) if token[0].isalpha() or token[0] == "_"]
    last = WORDS - 1
    return [hash(tuple(tokens[words[k] : words[k + last] + 1])) for k in range(len(words) - last)]


def word_count(text: str) -> int:
    return sum(1 for token in _TOKEN.findall(text) if _is_word(token))


def _passage_text(text: str, number: int) -> str:
    """The original text of passage ``number`` (for sealed evidence; called for few hits)."""
    lowered = text.lower()
    spans = [match.span() for match in _TOKEN.finditer(lowered) if _is_word(match.group())]
    start, end = spans[number][0], spans[number + WORDS - 1][1]
    source = text if len(lowered) == len(text) else lowered
    return source[start:end][:MAX_PASSAGE_CHARS]


def _leaves(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (dict keys are names, not content)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))


def patch_sides(patch: str) -> tuple[str, str] | None:
    """A unified diff's (added lines, context and removed lines), or None for other text.
    The second side is the repository before the patch: public by definition."""
    if not _DIFF_START.search(patch) or "\n@@" not in patch:
        return None
    added, base = [], []
    for line in patch.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added.append(line[1:])
        elif line[:1] in (" ", "-") and not line.startswith("---"):
            base.append(line[1:])
    return "\n".join(added), "\n".join(base)


def _unmarked(text: str) -> str:
    """Public text as a diff's lines read without their ``+``/``-`` markers (empty for text
    with none): a gold patch shipped as a ``.patch`` file puts a marker token between every
    two lines, so no passage of its sealed side (read unmarked) spanned a line break."""
    lines = text.splitlines()
    if not any(line[:1] in ("+", "-") for line in lines):
        return ""
    return "\n".join(line[1:] if line[:1] in ("+", "-") else line for line in lines)


def _numbered(hashes: list[int], known: Iterable[int] = ()) -> dict[int, int]:
    """Each distinct passage hash → its first passage number, less the ``known`` ones."""
    first: dict[int, int] = {}
    for number, digest in enumerate(hashes):
        first.setdefault(digest, number)
    for digest in known:
        first.pop(digest, None)
    return first


def _lines(text: str) -> set[str]:
    return {line for line in (normalise(raw) for raw in text.splitlines()) if line}


def matters(text: str) -> bool:
    """Long enough that finding it whole in public text is no coincidence."""
    return len(normalise(text)) >= MIN_VALUE_CHARS and word_count(text) >= MIN_VALUE_WORDS


# --- the audit ---------------------------------------------------------------------------------


class _Audit:
    def __init__(self, description: str, title: str, canaries: Sequence[str]) -> None:
        self.description, self.title = description, title
        # Numbered as the manifest lists them: messages name a canary by number only.
        self.canaries = [(n, normalise(c)) for n, c in enumerate(canaries, 1) if normalise(c)]
        self.canary_bytes = [(n, c.encode().lower()) for n, c in self.canaries]
        self.values: list[_Value] = []
        self.sealed: dict[int, int | list[int]] = {}  # passage hash → value index(es)
        self.bloom = bytearray(BLOOM_BITS // 8)
        self.public_hashes = array("q")
        self.public_task = array("i")
        self.public_name = array("i")
        self.task_ids: list[str] = []
        self.names: dict[str, int] = {}
        self.candidates: dict[int, list[int]] = {}  # bloom hits waiting for the final check
        self.found: list[Finding] = []
        self.canary_seen: set[tuple[int, Place]] = set()
        self.mc_letters: Counter[str] = Counter()
        self.mc_tasks = 0
        self.unaudited: list[str] = []  # public-safe notes of what was read in part
        self.unaudited_eval: list[str] = []  # the same for eval-root files (paths are sealed)
        self.eval_hashes: dict[str, str] = {}  # sha256 → eval-root path
        self.eval_text_read = 0

    # --- tasks ---

    def add_task(self, task: TaskLanes) -> None:
        place: Place = ("task", task.task_id)
        pieces = self._public_pieces(task)
        shown = public_strings(task)
        for lane, values in (
            ("evaluation_inputs", task.evaluation_inputs),
            ("hidden", task.hidden),
        ):
            for name, value in values.items():
                if (task.family, name) in STATED_BY_DESIGN:
                    continue
                for leaf in _leaves(value):
                    if lane == "evaluation_inputs" and (leaf in shown or leaf.strip() in shown):
                        continue
                    self._sealed_leaf(task, lane, name, leaf, pieces)
        self._public_task(task, place, pieces)
        self._family_rules(task)

    def _public_pieces(self, task: TaskLanes) -> list[tuple[str, str]]:
        """(resource name, text) of everything the task shows."""
        pieces = [("task id", task.task_id)]
        for name, value in task.public.items():
            pieces += [(name, leaf) for leaf in _leaves(value)]
        pieces += [("metadata", leaf) for leaf in _leaves(task.metadata)]
        pieces += [("environment", leaf) for leaf in _leaves(task.environment)]
        return pieces

    def _sealed_leaf(
        self, task: TaskLanes, lane: str, name: str, leaf: str, pieces: list[tuple[str, str]]
    ) -> None:
        reference = (task.family, name) in REFERENCE_KEYS
        text = leaf[:MAX_VALUE_CHARS]
        if len(leaf) > MAX_VALUE_CHARS:
            self.unaudited.append(f"task {task.task_id}: {lane} value {name} (past 1M characters)")
        known: list[int] = []
        sides = patch_sides(text)
        if sides is not None:
            # Passages a changed line keeps from the line it replaces are no secret.
            text, known = sides[0], passage_hashes(sides[1])
        elif (task.family, name) in CODE_SOLUTIONS:
            text = self._solution_lines(task, name, text, pieces)
            if text is None:
                return
        hashes = passage_hashes(text)
        if hashes:
            numbered = _numbered(hashes, known)
            if numbered:
                self._add_value(_Value(task.task_id, name, lane, reference, 0), text, numbered)
        elif matters(text) and (lane == "hidden" or len(text.split()) > 1):
            # A one-piece evaluation input is a name (a test path, a command word), which
            # instructions may well mention; hidden one-piece values (a flag) still count.
            self._whole_value(task, lane, name, text, reference, pieces)

    def _solution_lines(
        self, task: TaskLanes, name: str, text: str, pieces: list[tuple[str, str]]
    ) -> str | None:
        """The lines a code solution adds to its public data (None when it adds none)."""
        public = set().union(*(_lines(piece) for _, piece in pieces))
        mine = [line for line in text.splitlines() if normalise(line)]
        novel = [line for line in mine if normalise(line) not in public]
        if not novel and any(word_count(line) for line in mine) and matters(text):
            self._emit(
                "reference_in_public",
                FAILING,
                task.task_id,
                f"Every line of the reference solution `{name}` of task {task.task_id} is "
                "already in the task's public data: an agent can copy it.",
                {"resource": name, "lane": "hidden", "rule": "solution lines all public"},
                {"solution": text[:MAX_PASSAGE_CHARS]},
            )
            return None
        return "\n".join(novel)

    def _whole_value(
        self,
        task: TaskLanes,
        lane: str,
        name: str,
        text: str,
        reference: bool,
        pieces: list[tuple[str, str]],
    ) -> None:
        wanted = normalise(text)
        places = sorted({piece_name for piece_name, piece in pieces if wanted in normalise(piece)})
        where = [f"task {task.task_id} ({', '.join(places)})"] if places else []
        where += [label for label, body in self._pack_texts() if wanted in normalise(body)]
        if not where:
            return
        self._emit(
            "reference_in_public" if reference else "hidden_value_in_public",
            FAILING,
            task.task_id,
            f"The {_lane_label(lane)} `{name}` of task {task.task_id} appears whole in public "
            f"data: {'; '.join(where)}.",
            {"resource": name, "lane": lane, "places": where, "rule": "whole value"},
            {"value": text[:MAX_PASSAGE_CHARS]},
        )

    def _pack_texts(self) -> list[tuple[str, str]]:
        return [("the pack title", self.title), ("the pack description", self.description)]

    def _add_value(self, value: _Value, text: str, first: dict[int, int]) -> None:
        index = len(self.values)
        self.values.append(value)
        value.passages = len(first)
        mask = BLOOM_BITS - 1
        bloom, sealed, candidates = self.bloom, self.sealed, self.candidates
        for digest, number in first.items():
            owners = sealed.get(digest)
            if owners is None:
                sealed[digest] = index
            elif isinstance(owners, int):
                sealed[digest] = [owners, index]
            elif len(owners) < MAX_OWNERS_PER_PASSAGE:
                owners.append(index)
            bit = digest & mask
            if bloom[bit >> 3] & (1 << (bit & 7)):
                candidates.setdefault(digest, []).append(index)
                if len(value.texts) < MAX_PASSAGES * 3:
                    value.texts[digest] = _passage_text(text, number)

    def _public_task(self, task: TaskLanes, place: Place, pieces: list[tuple[str, str]]) -> None:
        task_index = len(self.task_ids)
        self.task_ids.append(task.task_id)
        seen: set[int] = set()
        mask = BLOOM_BITS - 1
        for name, text in pieces:
            self._canaries_in(text, place, name)
            name_index = self.names.setdefault(name, len(self.names))
            for number, digest in enumerate(passage_hashes(text)):
                if digest in seen:
                    continue
                seen.add(digest)
                if digest in self.sealed:
                    self._hit(digest, place, name, lambda t=text, n=number: _passage_text(t, n))
                bit = digest & mask
                self.bloom[bit >> 3] |= 1 << (bit & 7)
                self.public_hashes.append(digest)
                self.public_task.append(task_index)
                self.public_name.append(name_index)

    def _hit(self, digest: int, place: Place, name: str | None, text: Callable[[], str]) -> None:
        owners = self.sealed[digest]
        for index in [owners] if isinstance(owners, int) else owners:
            value = self.values[index]
            value.hits.setdefault(place, set()).add(digest)
            if name is not None:
                value.hit_names.setdefault(place, set()).add(name)
            if digest not in value.texts and len(value.texts) < MAX_PASSAGES * 3:
                value.texts[digest] = text()

    def _family_rules(self, task: TaskLanes) -> None:
        if task.family == "multiple_choice":
            self.mc_tasks += 1
            letter = _answer_letter(task)
            if letter is not None:
                self.mc_letters[letter] += 1
        elif task.family == "repo_patch":
            policy = task.evaluation_inputs.get("candidate_policy")
            allowed = policy.get("allow_paths") if isinstance(policy, dict) else None
            if not allowed:
                self._emit(
                    "repo_patch_without_allow_paths",
                    WARNING,
                    task.task_id,
                    f"Task {task.task_id} declares no eval.candidate_policy.allow_paths: a "
                    "candidate patch may change any file outside the built-in sensitive "
                    "paths (tests, CI and build files), not only the code under repair.",
                    {"rule": "allow_paths missing or empty"},
                )

    def _canaries_in(self, text: str, place: Place, name: str | None) -> None:
        if not self.canaries:
            return
        body = normalise(text)
        for number, canary in self.canaries:
            if canary in body:
                self._canary(number, place, name)

    def _canary(self, number: int, place: Place, name: str | None) -> None:
        if (number, place) in self.canary_seen:
            return
        self.canary_seen.add((number, place))
        where = _place_label(place, {name} if name else set())
        self._emit(
            "canary_in_public",
            FAILING,
            place[1] if place[0] == "task" else None,
            f"Canary #{number} declared in the manifest appears in public data: {where}.",
            {"canary": number, "place": where},
            {"canary": dict(self.canaries)[number]},
        )

    # --- files ---

    def add_files(self, files: Iterable[AuditFile]) -> None:
        public: list[AuditFile] = []
        for audit_file in files:
            if audit_file.root == "eval":
                self._eval_file(audit_file)
            else:
                public.append(audit_file)
        for audit_file in public:
            if audit_file.sha256 in self.eval_hashes:
                self._same_file(audit_file.sha256, audit_file.path)
            self._public_file(audit_file)
        self._public_text(self.title, ("title", ""), set())
        self._public_text(self.description, ("description", ""), set())

    def _eval_file(self, audit_file: AuditFile) -> None:
        budget_left = self.eval_text_read < MAX_EVAL_TEXT_BYTES
        try:
            with audit_file.source.open("rb") as handle:
                data = handle.read(MAX_EVAL_FILE_BYTES + 1 if budget_left else 4096)
        except OSError:
            self.unaudited_eval.append(f"{audit_file.path} (unreadable)")
            return
        if len(data[:4096].strip()) >= MIN_FILE_BYTES:
            self.eval_hashes.setdefault(audit_file.sha256, audit_file.path)
        if b"\0" in data[:8192]:
            return  # binary: compared by sha256 only
        if not budget_left:
            self.unaudited_eval.append(f"{audit_file.path} (eval text budget spent)")
            return
        if len(data) > MAX_EVAL_FILE_BYTES:
            self.unaudited_eval.append(f"{audit_file.path} (past 1 MB)")
            data = data[:MAX_EVAL_FILE_BYTES]
        self.eval_text_read += len(data)
        text = data.decode("utf-8", errors="replace")
        numbered = _numbered(passage_hashes(text))
        if numbered:
            self._add_value(_Value(None, audit_file.path, "eval file", False, 0), text, numbered)

    def _same_file(self, digest: str, public_path: str) -> None:
        self._emit(
            "hidden_file_is_public",
            FAILING,
            None,
            f"A file under the eval root has the same content (sha256) as the public file "
            f"{public_path}: its content is not sealed.",
            {"public_path": public_path},
            {"eval_path": self.eval_hashes[digest]},
        )

    def _public_file(self, audit_file: AuditFile) -> None:
        try:
            with audit_file.source.open("rb") as handle:
                kind = _archive_kind(handle.read(512))
                handle.seek(0)
                if kind is None:
                    self._public_stream(audit_file.path, handle, MAX_FILE_BYTES)
                else:  # compressed bytes hold no readable text: the members do
                    self._archive(audit_file.path, handle, kind)
        except OSError:
            self.unaudited.append(f"public file {audit_file.path} (unreadable)")

    def _public_stream(self, path: str, stream: IO[bytes], limit: int) -> tuple[bool, str, int]:
        """Audit a public file or archive member, read in overlapping chunks up to ``limit``
        bytes: (read to its end, sha256 of what was read, bytes read)."""
        place: Place = ("file", path)
        self._canaries_in(path, place, None)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        digest, binary = sha256(), None
        seen: set[int] = set()
        carry_text, carry_bytes, read = "", b"", 0
        while read < limit and (data := stream.read(min(CHUNK_BYTES, limit - read))):
            read += len(data)
            digest.update(data)
            binary = b"\0" in data[:8192] if binary is None else binary
            if binary:  # only canaries are looked for in binary files
                window = carry_bytes + data.lower()
                for number, canary in self.canary_bytes:
                    if canary in window:
                        self._canary(number, place, None)
                carry_bytes = window[-OVERLAP_CHARS:]
            else:
                text = carry_text + decoder.decode(data)
                self._public_text(text, place, seen)
                carry_text = text[-OVERLAP_CHARS:]
        complete = not stream.read(1)
        if not complete:
            self.unaudited.append(f"public file {path} (read to {read} bytes)")
        return complete, digest.hexdigest(), read

    def _public_text(self, text: str, place: Place, seen: set[int]) -> None:
        self._canaries_in(text, place, None)
        if not self.sealed:
            return
        for view in (text, _unmarked(text)):
            for number, digest in enumerate(passage_hashes(view)):
                if digest in self.sealed and digest not in seen:
                    seen.add(digest)
                    self._hit(digest, place, None, lambda t=view, n=number: _passage_text(t, n))

    def _archive(self, path: str, handle: IO[bytes], kind: str) -> None:
        budget = MAX_ARCHIVE_BYTES
        try:
            for member, stream in _members(handle, kind):
                inner = f"{path}!{member}"
                limit = min(MAX_FILE_BYTES, budget)
                complete, digest, read = self._public_stream(inner, stream, limit)
                budget -= read
                if complete and digest in self.eval_hashes:
                    self._same_file(digest, inner)
                if budget <= 0 or (not complete and kind != "zip"):
                    # Skipping the rest of a streamed member would decompress all of it.
                    self.unaudited.append(f"archive {path} (not read to the end)")
                    return
        except _UNREADABLE:
            self.unaudited.append(f"archive {path} (damaged: not read to the end)")

    # --- findings ---

    def findings(self) -> list[Finding]:
        self._resolve_candidates()
        for value in self.values:
            if value.hits:
                self._passage_finding(value)
        self._mc_finding()
        if self.unaudited or self.unaudited_eval:
            shown = self.unaudited[:20]
            eval_part = f"; {len(self.unaudited_eval)} eval-root file(s)" * bool(
                self.unaudited_eval
            )
            # A warning, not a note: "healthy" has to mean every public byte was read.
            self._emit(
                "audit_limits",
                WARNING,
                None,
                "Audited only in part (size caps or unreadable): " + "; ".join(shown) + eval_part,
                {"not_fully_audited": shown, "eval_files": len(self.unaudited_eval)},
                {"eval_files": self.unaudited_eval[:20]},
            )
        return _capped(self.found)

    def _resolve_candidates(self) -> None:
        """Sealed passages that hit the filter: find which earlier public task shows them."""
        if not self.candidates:
            return
        names = list(self.names)
        candidates = self.candidates
        for position, digest in enumerate(self.public_hashes):
            owners = candidates.get(digest)
            if owners is None:
                continue
            place: Place = ("task", self.task_ids[self.public_task[position]])
            name = names[self.public_name[position]]
            for index in owners:
                value = self.values[index]
                value.hits.setdefault(place, set()).add(digest)
                value.hit_names.setdefault(place, set()).add(name)

    def _passage_finding(self, value: _Value) -> None:
        matched = set().union(*value.hits.values())
        share = len(matched) / value.passages
        leaked = share >= MAJORITY
        places = sorted(value.hits, key=lambda p: (-len(value.hits[p]), p))
        labels = [_place_label(p, value.hit_names.get(p, set())) for p in places]
        owner = (
            f"the {_lane_label(value.lane)} `{value.name}` of task {value.task_id}"
            if value.task_id is not None
            else "a file under the eval root"
        )
        if leaked:
            code = "reference_in_public" if value.reference else "hidden_tokens_in_public"
            message = (
                f"{share:.0%} of the 8-word passages of {owner} appear verbatim in public "
                f"data: {'; '.join(labels[:5])}."
            )
        else:
            code = "hidden_tokens_overlap"
            message = (
                f"{len(matched)} 8-word passage(s) of {owner} ({share:.0%} of it) also appear "
                f"in public data: {'; '.join(labels[:5])}. Usually harmless (a test repeating "
                "a documented example, a rubric quoting the question); check it is intended."
            )
        passages = [text for digest, text in value.texts.items() if digest in matched]
        self._emit(
            code,
            FAILING if leaked else INFO,
            value.task_id,
            message,
            {
                "resource": value.name if value.task_id is not None else "eval-root file",
                "lane": value.lane,
                "share": round(share, 3),
                "passages_matched": len(matched),
                "passages_total": value.passages,
                "places": labels[:20],
                "rule": f"{WORDS}-word passages",
            },
            {"passages": passages[:MAX_PASSAGES]}
            | ({"eval_path": value.name} if value.task_id is None else {}),
        )

    def _mc_finding(self) -> None:
        if self.mc_tasks < MIN_MC_TASKS or len(self.mc_letters) != 1:
            return
        ((letter, count),) = self.mc_letters.items()
        if count != self.mc_tasks:
            return
        self._emit(
            "mc_answers_all_same",
            WARNING,
            None,
            f"All {count} multiple-choice tasks have the same answer letter: an agent that "
            "always answers that letter scores 100%.",
            {"task_count": count},
            {"answer": letter},
        )

    def _emit(
        self,
        code: str,
        severity: str,
        task_id: str | None,
        message: str,
        evidence: dict[str, Any],
        sealed: dict[str, Any] | None = None,
    ) -> None:
        self.found.append(Finding(LEAK, code, severity, task_id, message, evidence, sealed or {}))


def _answer_letter(task: TaskLanes) -> str | None:
    """The one choice a multiple-choice answer names, as a letter (None: several or none)."""
    answer = task.hidden.get("answer")
    if isinstance(answer, str) and len(answer.strip()) == 1 and answer.strip().isalpha():
        return answer.strip().upper()  # the common case, without reading the choices
    choices = read_choices(task.public.get("choices"))
    expected = expected_answers(answer, choices) if choices is not None else None
    if expected is None or len(expected.choices) != 1 or expected.literals:
        return None
    (only,) = expected.choices
    return chr(ord("A") + only)


def _lane_label(lane: str) -> str:
    return {"evaluation_inputs": "evaluation input", "hidden": "hidden value"}.get(lane, lane)


def _place_label(place: Place, names: set[str]) -> str:
    kind, name = place
    if kind == "task":
        return f"task {name} ({', '.join(sorted(names))})" if names else f"task {name}"
    if kind == "file":
        return f"public file {name}"
    return f"the pack {kind}"


def _capped(found: list[Finding]) -> list[Finding]:
    """At most MAX_FINDINGS_PER_CODE findings of one code, plus a line saying how many more."""
    rank = {FAILING: 0, WARNING: 1, INFO: 2}
    kept: list[Finding] = []
    counts: Counter[str] = Counter()
    for finding in sorted(found, key=lambda f: rank.get(f.severity, 3)):
        counts[finding.code] += 1
        if counts[finding.code] <= MAX_FINDINGS_PER_CODE:
            kept.append(finding)
    for code, count in counts.items():
        if count > MAX_FINDINGS_PER_CODE:
            severity = next(f.severity for f in kept if f.code == code)
            kept.append(
                Finding(
                    LEAK,
                    code,
                    severity,
                    None,
                    f"{count - MAX_FINDINGS_PER_CODE} more finding(s) of this kind not listed.",
                    {"not_listed": count - MAX_FINDINGS_PER_CODE},
                )
            )
    return kept


# --- archives ----------------------------------------------------------------------------------


def _archive_kind(head: bytes) -> str | None:
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[257:262] == b"ustar":
        return "tar"
    if head[:2] == b"\x1f\x8b":
        return "gz"
    if head[:3] == b"BZh":
        return "bz2"
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    return None


def _members(handle: IO[bytes], kind: str) -> Iterator[tuple[str, IO[bytes]]]:
    """(member name, readable stream) of regular members; nothing is written to disk."""
    if kind == "zip":
        with zipfile.ZipFile(handle) as archive:
            for info in archive.infolist()[:MAX_ARCHIVE_MEMBERS]:
                if info.is_dir() or info.flag_bits & 0x1:  # encrypted members are skipped
                    continue
                try:
                    with archive.open(info) as stream:
                        yield info.filename, stream
                except (NotImplementedError, RuntimeError):
                    continue
        return
    try:
        # Streaming mode: members are read in order, never seeking back.
        archive = tarfile.open(fileobj=handle, mode="r|*")  # noqa: SIM115 - `with` below
    except tarfile.ReadError:
        if kind == "tar":
            raise
        handle.seek(0)  # one compressed file, not a tar
        opener = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}[kind]
        with opener(handle, "rb") as stream:
            yield "(decompressed)", stream
        return
    with archive:
        for count, info in enumerate(archive):
            if count >= MAX_ARCHIVE_MEMBERS:
                return
            if info.isfile():
                stream = archive.extractfile(info)
                if stream is not None:
                    yield info.name, stream
