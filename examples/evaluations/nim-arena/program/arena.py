"""nim-arena@1: the candidate's player against two sealed baseline players, 1,000 games of Nim.

Game: three heaps of 1..7 objects; a move takes one or more objects from one heap; whoever
takes the last object wins. sealed/arena.json holds the number of games, the heap shape,
the seeds and the opponents.

Schedule (what a second implementation needs to reproduce every game):
- starting positions: random.Random(position_seed); game g's heaps are `heaps` calls of
  randint(1, max_heap), drawn game after game;
- game g is played against opponents[(g // 2) % len(opponents)], and the candidate moves
  first when g is even, so each opponent meets both orders equally often;
- an opponent's moves are the legal moves listed heap by heap (heap 0 first), and within a
  heap by count (1 first), and each opponent draws from its own random.Random(seed):
  `random` plays rng.choice(moves); `mostly_optimal` first draws rng.random() and, when it
  is below mistake_rate, plays rng.choice(moves); otherwise it plays the first move that
  leaves a nim-sum of 0, or rng.choice(moves) when there is none.

Protocol with the candidate (the task's public text): each of the candidate's turns sends
the line `position A B C` (heap sizes); the player answers one line `HEAP COUNT` (heap index
from 0, objects to take). One player process plays every game. Anything else, a move that
is not legal, no answer in time or a player that exited forfeits that game. After a missing
answer the player is restarted (so a late answer is never read as the next one); after
failed_replies_in_a_row missing answers in a row, when the host cannot restart it, or once
the player's answers have taken player_seconds in all, every game left is forfeited without
asking: a slow player loses its games instead of running the program past its timeout
(which would be an evaluation error, not the candidate's loss).

Metrics: win_rate with a Wilson 95 % interval over all games, win_rate_vs_<opponent> per
opponent, forfeit_rate. Only metrics that input.json declares are reported.

Channel: messages to the host are JSON lines on stdout ({"to_candidate": ...},
{"restart_candidate": true}, then the final {"metrics": ...}); its answers come one line
each on stdin. The log goes to stderr.

Paths: the sandbox's /evaluation/input.json and /evaluation/sealed/. Outside the sandbox
(tests, an author's machine) SECUREBENCH_EVALUATION_ROOT (default /evaluation) says where
that root is. The program never reads the candidate's files: it only talks to the player.
Standard library only.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Move = tuple[int, int]  # (heap index, objects taken)
MOVE_LINE = re.compile(r"\A\s*(\d{1,6})\s+(\d{1,6})\s*\Z")
MAX_RESTARTS = 100  # the host's limit per call
WILSON_Z = 1.959963984540054  # the standard normal's 97.5th percentile


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def evaluation_path(relative: str) -> Path:
    return Path(os.environ.get("SECUREBENCH_EVALUATION_ROOT", "/evaluation")) / relative


def send(message: dict[str, Any]) -> dict[str, Any]:
    """One message to the host and its one-line answer."""
    print(json.dumps(message), flush=True)
    line = sys.stdin.readline()
    if not line:
        raise SystemExit("the host closed the channel")
    return json.loads(line)


# --- the game ---------------------------------------------------------------------------------


def legal_moves(heaps: list[int]) -> list[Move]:
    return [(heap, count) for heap, size in enumerate(heaps) for count in range(1, size + 1)]


def winning_move(heaps: list[int]) -> Move | None:
    """The first move (in legal_moves order) that leaves a nim-sum of 0, if any."""
    total = 0
    for size in heaps:
        total ^= size
    for heap, count in legal_moves(heaps):
        if total ^ heaps[heap] ^ (heaps[heap] - count) == 0:
            return heap, count
    return None


def parse_move(line: str, heaps: list[int]) -> Move | None:
    """The candidate's move if its line is a legal one, else None."""
    match = MOVE_LINE.match(line)
    if match is None:
        return None
    heap, count = int(match.group(1)), int(match.group(2))
    if heap >= len(heaps) or not 1 <= count <= heaps[heap]:
        return None
    return heap, count


@dataclass
class Opponent:
    name: str
    kind: str
    rng: random.Random
    mistake_rate: float = 0.0

    def move(self, heaps: list[int]) -> Move:
        moves = legal_moves(heaps)
        if self.kind == "random":
            return self.rng.choice(moves)
        if self.rng.random() < self.mistake_rate:
            return self.rng.choice(moves)
        return winning_move(heaps) or self.rng.choice(moves)


class Player:
    """The candidate's player, reached through the host; gives up after repeated silence."""

    def __init__(self, failures_allowed: int, seconds: float) -> None:
        self.failures_allowed = failures_allowed
        self.seconds_left = seconds
        self.failures_in_a_row = 0
        self.restarts = 0
        self.gave_up = False

    def reply(self, heaps: list[int]) -> str | None:
        if self.gave_up:
            return None
        if self.seconds_left <= 0:
            log("the player used up its time: every game left is forfeited")
            self.gave_up = True
            return None
        started = time.monotonic()
        answer = send({"to_candidate": "position " + " ".join(map(str, heaps))})
        self.seconds_left -= time.monotonic() - started
        line = answer.get("from_candidate")
        if isinstance(line, str):
            self.failures_in_a_row = 0
            return line
        self.failures_in_a_row += 1
        log(f"no answer from the player ({answer.get('problem')}): the game is forfeited")
        self._recover()
        return None

    def _recover(self) -> None:
        if self.failures_in_a_row >= self.failures_allowed or self.restarts >= MAX_RESTARTS:
            log("the player stopped answering: every game left is forfeited")
            self.gave_up = True
            return
        self.restarts += 1
        if not send({"restart_candidate": True}).get("restarted"):
            log("the host could not restart the player: every game left is forfeited")
            self.gave_up = True


@dataclass(frozen=True)
class Outcome:
    opponent: str
    won: bool
    forfeited: bool


def play(player: Player, opponent: Opponent, heaps: list[int], candidate_moves: bool) -> Outcome:
    while True:
        if candidate_moves:
            line = player.reply(heaps)
            move = parse_move(line, heaps) if line is not None else None
            if move is None:
                if line is not None:
                    log(f"illegal move {line[:80]!r} at {heaps}: the game is forfeited")
                return Outcome(opponent.name, won=False, forfeited=True)
        else:
            move = opponent.move(heaps)
        heaps[move[0]] -= move[1]
        if not any(heaps):  # the mover took the last object
            return Outcome(opponent.name, won=candidate_moves, forfeited=False)
        candidate_moves = not candidate_moves


# --- the arena --------------------------------------------------------------------------------


def opponents_of(config: dict[str, Any]) -> list[Opponent]:
    return [
        # Seeded on purpose: the sealed seeds make every game reproducible.
        Opponent(
            name=spec["name"],
            kind=spec["kind"],
            rng=random.Random(spec["seed"]),  # noqa: S311
            mistake_rate=float(spec.get("mistake_rate", 0.0)),
        )
        for spec in config["opponents"]
    ]


def run_arena(config: dict[str, Any]) -> list[Outcome]:
    positions = random.Random(config["position_seed"])  # noqa: S311 - seeded, reproducible
    opponents = opponents_of(config)
    player = Player(config["failed_replies_in_a_row"], config["player_seconds"])
    outcomes = []
    for game in range(config["games"]):
        heaps = [positions.randint(1, config["max_heap"]) for _ in range(config["heaps"])]
        opponent = opponents[(game // 2) % len(opponents)]
        outcomes.append(play(player, opponent, heaps, candidate_moves=game % 2 == 0))
    return outcomes


def wilson(wins: int, games: int) -> dict[str, float]:
    rate = wins / games
    z2 = WILSON_Z * WILSON_Z
    centre = (rate + z2 / (2 * games)) / (1 + z2 / games)
    half = WILSON_Z * math.sqrt(rate * (1 - rate) / games + z2 / (4 * games * games))
    half /= 1 + z2 / games
    # Rounding may put an end a hair past the rate or outside [0, 1]; the channel refuses both.
    return {
        "value": rate,
        "ci_low": max(0.0, min(centre - half, rate)),
        "ci_high": min(1.0, max(centre + half, rate)),
    }


def metrics_of(outcomes: list[Outcome], declared: set[str]) -> dict[str, Any]:
    metrics: dict[str, Any] = {
        "win_rate": wilson(sum(o.won for o in outcomes), len(outcomes)),
        "forfeit_rate": sum(o.forfeited for o in outcomes) / len(outcomes),
    }
    for name in dict.fromkeys(o.opponent for o in outcomes):
        games = [o for o in outcomes if o.opponent == name]
        metrics[f"win_rate_vs_{name}"] = sum(o.won for o in games) / len(games)
    return {name: value for name, value in metrics.items() if name in declared}


def main() -> None:
    job = json.loads(evaluation_path("input.json").read_text(encoding="utf-8"))
    config = json.loads(evaluation_path("sealed/arena.json").read_text(encoding="utf-8"))
    (task,) = job["tasks"]  # task scope: exactly one task per call
    log(f"{job['evaluation']}: task {task['task_id']}, {config['games']} games")
    outcomes = run_arena(config)
    declared = {metric["name"] for metric in job["metrics"]}
    metrics = metrics_of(outcomes, declared)
    log(f"results: {json.dumps(metrics)}")
    print(json.dumps({"metrics": metrics}), flush=True)


if __name__ == "__main__":
    main()
