"""The leak audit's pass over a pack: sealed values in, public places scanned, hits kept."""

from __future__ import annotations

import json
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Literal

from verifiers.families.multiple_choice import expected_answers, read_choices
from verifiers.leak_audit.containers import CHUNK_BYTES, OVERLAP_CHARS, Walker
from verifiers.leak_audit.report import DERIVED_NOTE, Place, Report, SealedValue, place_label
from verifiers.leak_audit.text import (
    MAX_PASSAGE_CHARS,
    decoded,
    leaves,
    lines,
    matters,
    name_views,
    normalise,
    numbered,
    passage_hashes,
    passage_text,
    patch_sides,
    public_views,
    window_hashes,
    word_count,
)
from verifiers.pack_findings import FAILING, WARNING, Finding
from verifiers.redaction import public_strings
from verifiers.task import TaskLanes

MIN_FILE_BYTES = 20
MIN_MC_TASKS = 4
MAX_VALUE_CHARS = 1_000_000  # of one sealed value (the rest is listed as not audited)
MAX_EVAL_FILE_BYTES = 1024 * 1024  # text kept of one eval-root file
MAX_EVAL_TEXT_BYTES = 32 * 1024 * 1024  # all eval-root files together
MAX_OWNERS_PER_PASSAGE = 64  # boilerplate shared by many sealed values
BLOOM_BITS = 1 << 26  # 8 MB: about 1% false hits at 700k public passages, checked exactly
MAX_NOTES_SHOWN = 20
MAX_FILES_CPU_SECONDS = 600.0  # reading all files of one pack
MAX_JSON_CHARS = 8 * 1024 * 1024  # a public JSON file parsed whole

# (family, eval key): sealed values the public data states by design, never looked for: a
# terminal task's expected state is what its instructions ask for, often an edit of a public
# file.
STATED_BY_DESIGN = frozenset({("terminal_task", "expected_state")})
# (family, eval key): values tasks show by design (a multiple-choice answer names one of its
# choices, and choices recur across tasks): looked for in files, the title and description.
STATED_IN_TASKS = frozenset({("multiple_choice", "answer")})
# Keys inside sealed values whose strings are no secret: answers a rubric rejects (a
# misconception question states the misconception in its prompt).
NOT_SECRET_KEYS = frozenset({"rejected_answers"})
# An eval-root file of a terminal task that is not code is usually an expected output, which
# the task derives from public inputs by design (the ERROR lines of a public log, a file with
# its line endings converted): found in public, it is a warning. A checker (code) still fails.
CODE_SUFFIXES = frozenset(
    {
        ".py",
        ".sh",
        ".bash",
        ".js",
        ".ts",
        ".rb",
        ".go",
        ".rs",
        ".java",
        ".c",
        ".cc",
        ".cpp",
        ".pl",
        ".php",
        ".lua",
        ".r",
        ".jl",
        ".exp",
        ".bats",
    }
)
# (family, eval key): reference solutions; their leaks get the code reference_in_public.
CODE_SOLUTIONS = frozenset(
    ("code_completion", k) for k in ("canonical_solution", "reference_solution")
)
REFERENCE_KEYS = CODE_SOLUTIONS | {
    ("repo_patch", "gold_patch"),
    ("free_response", "reference_answer"),
    ("short_answer", "accepted_answers"),
}


@dataclass(frozen=True)
class AuditFile:
    root: Literal["public", "eval"]
    path: str  # posix path under its root
    sha256: str
    source: Path  # where to read it


class Audit:
    def __init__(self, description: str, title: str, canaries: Sequence[str]) -> None:
        self.description, self.title = description, title
        # Numbered as the manifest lists them: messages name a canary by number only.
        self.canaries = [(n, normalise(c)) for n, c in enumerate(canaries, 1) if normalise(c)]
        self.canary_bytes = [(n, c.encode().lower()) for n, c in self.canaries]
        self.report = Report()
        self.values: list[SealedValue] = []
        self.sealed: dict[int, int | list[int]] = {}  # passage/window hash → value index(es)
        self.has_short = False
        self.bloom = bytearray(BLOOM_BITS // 8)
        self.public_hashes = array("q")
        self.public_task = array("i")
        self.public_name = array("i")
        self.task_ids: list[str] = []
        self.names: dict[str, int] = {}
        self.candidates: dict[int, list[int]] = {}  # bloom hits waiting for the final check
        self.boilerplate: set[int] = set()  # keys of more than MAX_OWNERS_PER_PASSAGE values
        self.canary_seen: set[tuple[int, Place]] = set()
        self.mc_letters: Counter[str] = Counter()
        self.mc_tasks = 0
        self.unaudited: list[str] = []  # public-safe notes of what was read in part
        self.unaudited_eval: list[str] = []  # the same for eval-root files (paths are sealed)
        self.eval_hashes: dict[str, str] = {}  # sha256 (raw, or of small text) → eval path
        self.same_reported: set[str] = set()  # public paths already found equal to one
        self.terminal_paths: set[str] = set()  # what terminal tasks' evaluation inputs name
        self.eval_text_read = 0
        # Reading files stops here (a pack of many costly files is noted, not read for hours).
        self.cpu_deadline = time.thread_time() + MAX_FILES_CPU_SECONDS

    # --- tasks ---

    def add_task(self, task: TaskLanes) -> None:
        place: Place = ("task", task.task_id)
        pieces = self._public_pieces(task)
        # An evaluation input equal to something the task shows (a value or a key) is no
        # secret: a field the agent fills in, a test path the instructions name.
        shown = public_strings(task) | {text for _, text in pieces}
        for lane, values in (
            ("evaluation_inputs", task.evaluation_inputs),
            ("hidden", task.hidden),
        ):
            for name, value in values.items():
                if (task.family, name) in STATED_BY_DESIGN:
                    continue
                for leaf in leaves(value, skip=NOT_SECRET_KEYS):
                    if lane == "evaluation_inputs" and (leaf in shown or leaf.strip() in shown):
                        continue
                    self._sealed_leaf(task, lane, name, leaf, pieces)
        self._public_task(task, place, pieces)
        self._family_rules(task)
        if task.family == "terminal_task":
            self.terminal_paths.update(
                leaf.strip().strip("/") for leaf in leaves(task.evaluation_inputs) if leaf.strip()
            )

    def _public_pieces(self, task: TaskLanes) -> list[tuple[str, str]]:
        """(resource name, text) of everything the task shows, its dict keys included."""
        pieces = [("task id", task.task_id)]
        for name, value in task.public.items():
            pieces += [(name, name)] + [(name, leaf) for leaf in leaves(value, keys=True)]
        pieces += [("metadata", leaf) for leaf in leaves(task.metadata, keys=True)]
        pieces += [("environment", leaf) for leaf in leaves(task.environment, keys=True)]
        return pieces

    def _sealed_leaf(
        self, task: TaskLanes, lane: str, name: str, leaf: str, pieces: list[tuple[str, str]]
    ) -> None:
        text = leaf[:MAX_VALUE_CHARS]
        if len(leaf) > MAX_VALUE_CHARS:
            self.unaudited.append(f"task {task.task_id}: {lane} value {name} (past 1M characters)")
        known: Iterable[int] = ()
        base = ""
        sides = patch_sides(text)
        if sides is not None:
            # Passages a changed line keeps from the line it replaces are no secret.
            text, base = sides
            known = passage_hashes(base)
        elif (task.family, name) in CODE_SOLUTIONS:
            text = self._solution_lines(task, name, text, pieces)
            if text is None:
                return
        value = SealedValue(
            task.task_id,
            name,
            lane,
            (task.family, name) in REFERENCE_KEYS,
            tasks_state_it=(task.family, name) in STATED_IN_TASKS,
        )
        hashes = passage_hashes(text)
        if hashes:
            self._register(value, text, numbered(hashes, known))
        elif matters(text) and (lane == "hidden" or len(text.split()) > 1):
            # A one-piece evaluation input is a name (a test path, a command word), which
            # instructions may well mention; hidden one-piece values (a flag) still count.
            self._register_short(value, text, window_hashes(base) if base else ())

    def _solution_lines(
        self, task: TaskLanes, name: str, text: str, pieces: list[tuple[str, str]]
    ) -> str | None:
        """The lines a code solution adds to its public data (None when it adds none)."""
        public = set().union(*(lines(piece) for _, piece in pieces))
        mine = [line for line in text.splitlines() if normalise(line)]
        novel = [line for line in mine if normalise(line) not in public]
        if not novel and any(word_count(line) for line in mine) and matters(text):
            self.report.emit(
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

    def _register_short(self, value: SealedValue, text: str, known: Iterable[int]) -> None:
        """A value too short for a passage, looked for whole: every 4-term window of it."""
        first = numbered(window_hashes(text), known)
        if first:
            value.short, value.whole = True, text
            self.has_short = True
            self._register(value, text, first)

    def _register(self, value: SealedValue, text: str, first: dict[int, int]) -> None:
        index = len(self.values)
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
            else:
                # Boilerplate shared by many sealed values: counted in none of them (see
                # _drop_boilerplate), so it cannot dilute a leaked value's share.
                self.boilerplate.add(digest)
                continue
            value.passages += 1
            bit = digest & mask
            if bloom[bit >> 3] & (1 << (bit & 7)):
                candidates.setdefault(digest, []).append(index)
                if not value.short and len(value.texts) < 9:
                    value.texts[digest] = passage_text(text, number)
        if value.passages:
            self.values.append(value)

    def _public_task(self, task: TaskLanes, place: Place, pieces: list[tuple[str, str]]) -> None:
        task_index = len(self.task_ids)
        self.task_ids.append(task.task_id)
        seen: set[int] = set()
        mask = BLOOM_BITS - 1
        for name, text in pieces:
            self._canaries_in(text, place, name)
            name_index = self.names.setdefault(name, len(self.names))
            for view in public_views(text):
                # Windows are kept for every task: a later task's short value may be in it.
                for digest, evidence in _keys(view):
                    if digest in seen:
                        continue
                    seen.add(digest)
                    if digest in self.sealed:
                        self._hit(digest, place, name, evidence)
                    bit = digest & mask
                    self.bloom[bit >> 3] |= 1 << (bit & 7)
                    self.public_hashes.append(digest)
                    self.public_task.append(task_index)
                    self.public_name.append(name_index)

    def _hit(
        self, digest: int, place: Place, name: str | None, text: Callable[[], str] | None
    ) -> None:
        owners = self.sealed[digest]
        for index in [owners] if isinstance(owners, int) else owners:
            value = self.values[index]
            if not value.counts_at(place):
                continue
            value.hits.setdefault(place, set()).add(digest)
            if name is not None:
                value.hit_names.setdefault(place, set()).add(name)
            if text is not None and digest not in value.texts and len(value.texts) < 9:
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
                self.report.emit(
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
                self.canary(number, place, name)

    def canary(self, number: int, place: Place, name: str | None) -> None:
        if (number, place) in self.canary_seen:
            return
        self.canary_seen.add((number, place))
        where = place_label(place, {name} if name else set())
        self.report.emit(
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
                self._eval_digest(audit_file)
                self._read(audit_file, _EvalVisitor(self))
            else:
                public.append(audit_file)
        for audit_file in public:
            if audit_file.sha256 in self.eval_hashes:
                self.same_file(audit_file.sha256, audit_file.path)
            self._read(audit_file, _PublicVisitor(self))
        self.public_text(self.title, ("title", ""), set())
        self.public_text(self.description, ("description", ""), set())

    def _eval_digest(self, audit_file: AuditFile) -> None:
        """An eval-root file's own digest, whatever its size (its text is read in part)."""
        try:
            with audit_file.source.open("rb") as handle:
                head = handle.read(4096)
        except OSError:
            return  # the walk that follows notes it
        if len(head.strip()) >= MIN_FILE_BYTES:
            self.eval_hashes.setdefault(audit_file.sha256, audit_file.path)

    def _read(self, audit_file: AuditFile, visitor: _PublicVisitor | _EvalVisitor) -> None:
        try:
            with audit_file.source.open("rb") as handle:
                Walker(visitor, self.cpu_deadline).walk(audit_file.path, handle)
        except OSError:
            visitor.note(f"{audit_file.path} (unreadable)")

    def derived_output(self, eval_path: str) -> bool:
        """An eval-root file a terminal task names that is not code: an expected output."""
        top = eval_path.split("!", 1)[0]
        if PurePosixPath(top).suffix.lower() in CODE_SUFFIXES:
            return False
        return any(top == named or top.startswith(named + "/") for named in self.terminal_paths)

    def same_file(self, digest: str, public_path: str) -> None:
        if public_path in self.same_reported:
            return
        self.same_reported.add(public_path)
        eval_path = self.eval_hashes[digest]
        derived = self.derived_output(eval_path)
        self.report.emit(
            "hidden_file_is_public",
            WARNING if derived else FAILING,
            None,
            f"A file under the eval root has the same content as the public file "
            f"{public_path}: its content is not sealed." + DERIVED_NOTE * derived,
            {"public_path": public_path} | ({"derived_output": True} if derived else {}),
            {"eval_path": eval_path},
        )

    def public_text(self, text: str, place: Place, seen: set[int]) -> None:
        self._canaries_in(text, place, None)
        if not self.sealed:
            return
        for view in public_views(text):
            for digest, evidence in _keys(view, windows=self.has_short):
                if digest in self.sealed and digest not in seen:
                    seen.add(digest)
                    self._hit(digest, place, None, evidence)

    def add_eval_text(self, path: str, text: str) -> None:
        # Read as an agent would read a copy of it: a notebook's cells, a page's words.
        text = decoded(text) or text
        value = SealedValue(None, path, "eval file", False, derived=self.derived_output(path))
        hashes = passage_hashes(text)
        if hashes:
            self._register(value, text, numbered(hashes))
        elif matters(text):
            self._register_short(value, text, ())

    # --- findings ---

    def findings(self) -> list[Finding]:
        self._resolve_candidates()
        self._drop_boilerplate()
        for value in self.values:
            if value.hits and value.passages > 0:
                self.report.value(value)
        self._mc_finding()
        if self.unaudited or self.unaudited_eval:
            shown = self.unaudited[:MAX_NOTES_SHOWN]
            eval_part = f"; {len(self.unaudited_eval)} eval-root file(s)" * bool(
                self.unaudited_eval
            )
            more = len(self.unaudited) - len(shown)
            # A warning, not a note: "healthy" has to mean every public byte was read.
            self.report.emit(
                "audit_limits",
                WARNING,
                None,
                "Audited only in part (size caps, unreadable or unsupported content): "
                + "; ".join(shown)
                + (f"; and {more} more" if more > 0 else "")
                + eval_part,
                {"not_fully_audited": shown, "eval_files": len(self.unaudited_eval)},
                {"eval_files": self.unaudited_eval[:MAX_NOTES_SHOWN]},
            )
        return self.report.capped()

    def _drop_boilerplate(self) -> None:
        """Take passages shared by too many sealed values out of the values that hold them,
        whichever came first: a value is judged on its own text."""
        for digest in self.boilerplate:
            owners = self.sealed[digest]
            for index in [owners] if isinstance(owners, int) else owners:
                value = self.values[index]
                value.passages -= 1
                for place in [p for p, hit in value.hits.items() if digest in hit]:
                    value.hits[place].discard(digest)
                    if not value.hits[place]:
                        del value.hits[place]

    def _resolve_candidates(self) -> None:
        """Sealed keys that hit the filter: find which earlier public task shows them."""
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
                if value.counts_at(place):
                    value.hits.setdefault(place, set()).add(digest)
                    value.hit_names.setdefault(place, set()).add(name)

    def _mc_finding(self) -> None:
        if self.mc_tasks < MIN_MC_TASKS or len(self.mc_letters) != 1:
            return
        ((letter, count),) = self.mc_letters.items()
        if count != self.mc_tasks:
            return
        self.report.emit(
            "mc_answers_all_same",
            WARNING,
            None,
            f"All {count} multiple-choice tasks have the same answer letter: an agent that "
            "always answers that letter scores 100%.",
            {"task_count": count},
            {"answer": letter},
        )


def _keys(view: str, *, windows: bool = True) -> Iterator[tuple[int, Callable[[], str] | None]]:
    """The passage hashes (with a way to quote each) and short-window hashes of a view."""
    for number, digest in enumerate(passage_hashes(view)):
        yield digest, partial(passage_text, view, number)
    if windows:
        for digest in window_hashes(view):
            yield digest, None


class _PublicVisitor:
    """Scans every public file, member and name the walker reads."""

    def __init__(self, audit: Audit) -> None:
        self.audit = audit

    def open(self, path: str) -> _PublicReader:
        reader = _PublicReader(self.audit, ("file", path))
        for view in name_views(path):  # a name is public text too
            self.audit.public_text(view, reader.place, reader.seen)
        return reader

    def note(self, what: str) -> None:
        self.audit.unaudited.append(what)


class _PublicReader:
    def __init__(self, audit: Audit, place: Place) -> None:
        self.audit, self.place, self.seen = audit, place, set[int]()
        self.json: list[str] | None = None  # the text of what may be a JSON document
        self.json_size = 0

    def text(self, carried: str, new: str) -> None:
        self.audit.public_text(carried + new, self.place, self.seen)
        if not carried and self.json is None and new.lstrip()[:1] in ("{", "["):
            self.json = []
        if self.json is not None and self.json_size + len(new) <= MAX_JSON_CHARS:
            self.json.append(new)
            self.json_size += len(new)
        else:
            self.json = None

    def _json_strings(self) -> None:
        """A JSON document's strings, read as one text: a notebook keeps each line of a cell
        in a string of its own, with quotes and commas between them."""
        try:
            document = json.loads("".join(self.json or ()))
        except (ValueError, RecursionError):  # not JSON, or nested past what Python parses
            return
        text = "\n".join(leaves(document, keys=True))
        for start in range(0, len(text), CHUNK_BYTES):  # in pieces: bounded memory
            piece = text[max(start - OVERLAP_CHARS, 0) : start + CHUNK_BYTES]
            self.audit.public_text(piece, self.place, self.seen)

    def binary(self, carried: bytes, new: bytes) -> None:
        window = (carried + new).lower()
        for number, canary in self.audit.canary_bytes:
            if canary in window:
                self.audit.canary(number, self.place, None)

    def close(self, complete: bool, digest: str, text_digest: str | None) -> None:
        if complete and self.json:
            self._json_strings()
        for key in (digest if complete else None, text_digest):
            if key and key in self.audit.eval_hashes:
                self.audit.same_file(key, self.place[1])


class _EvalVisitor:
    """Reads eval-root files (and what their archives hold) as sealed text and digests."""

    def __init__(self, audit: Audit) -> None:
        self.audit = audit

    def open(self, path: str) -> _EvalReader:
        return _EvalReader(self.audit, path)

    def note(self, what: str) -> None:
        self.audit.unaudited_eval.append(what)


class _EvalReader:
    def __init__(self, audit: Audit, path: str) -> None:
        self.audit, self.path = audit, path
        self.parts: list[str] = []
        self.kept = 0
        self.is_binary = False
        self.capped = False
        self.head = b""

    def text(self, carried: str, new: str) -> None:
        if self.is_binary:
            return  # printable runs of a sealed binary: compared by digest only
        if not self.head:
            self.head = new[:4096].encode("utf-8", "surrogatepass")
        room = min(MAX_EVAL_FILE_BYTES - self.kept, MAX_EVAL_TEXT_BYTES - self.audit.eval_text_read)
        if room <= 0:
            if not self.capped:
                self.capped = True
                self.audit.unaudited_eval.append(f"{self.path} (eval text caps: not read)")
            return
        piece = new[:room]
        if len(piece) < len(new) and not self.capped:
            self.capped = True
            self.audit.unaudited_eval.append(f"{self.path} (eval text caps: read in part)")
        self.parts.append(piece)
        self.kept += len(piece)
        self.audit.eval_text_read += len(piece)

    def binary(self, carried: bytes, new: bytes) -> None:
        self.is_binary = True
        self.head = self.head or new[:4096]

    def close(self, complete: bool, digest: str, text_digest: str | None) -> None:
        if not complete:
            return
        if len(self.head.strip()) >= MIN_FILE_BYTES:
            self.audit.eval_hashes.setdefault(digest, self.path)
            if text_digest:
                self.audit.eval_hashes.setdefault(text_digest, self.path)
        if self.parts:
            self.audit.add_eval_text(self.path, "".join(self.parts))


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
