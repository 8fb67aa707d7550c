"""The nim-arena evaluation plays the games its README describes and counts them right.

The program runs directly with a small host relay (tests/examples/harness.py) that starts
the candidate's player as a subprocess. The expected games are replayed here from the
README's schedule with the player's own move function, and the relay's transcript must be
exactly the positions that replay sent the player.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.examples.harness import (
    EVALUATIONS,
    EXAMPLES,
    TaskCall,
    load_module,
    pack_rows,
    reference_files,
    run_arena,
    wilson,
)

pytestmark = pytest.mark.database_independent

ARENA = "nim-arena"
ROW = pack_rows("nim-arena")[0]
CONFIG = json.loads((EVALUATIONS / ARENA / "sealed" / "arena.json").read_text())
COMMAND = "python3 player.py\n"
Choose = Callable[[list[int]], tuple[int, int]]


@dataclass(frozen=True)
class Game:
    opponent: str
    won: bool
    forfeited: bool


def nim_sum(heaps: list[int]) -> int:
    total = 0
    for size in heaps:
        total ^= size
    return total


def opponent_move(kind: str, rate: float, rng: random.Random, heaps: list[int]) -> tuple[int, int]:
    moves = [(h, n) for h in range(len(heaps)) for n in range(1, heaps[h] + 1)]
    if kind == "random" or rng.random() < rate:
        return rng.choice(moves)
    for h, n in moves:
        after = list(heaps)
        after[h] -= n
        if nim_sum(after) == 0:
            return h, n
    return rng.choice(moves)


def replay(choose: Choose | None) -> tuple[list[Game], list[str]]:
    """Every game of the schedule, and the positions the player is sent. `choose` None is a
    player whose every answer is illegal."""
    positions = random.Random(CONFIG["position_seed"])  # noqa: S311 - the sealed seed
    opponents = [
        (spec, random.Random(spec["seed"]))  # noqa: S311 - the sealed seeds
        for spec in CONFIG["opponents"]
    ]
    games, sent = [], []
    for number in range(CONFIG["games"]):
        heaps = [positions.randint(1, CONFIG["max_heap"]) for _ in range(CONFIG["heaps"])]
        spec, rng = opponents[(number // 2) % len(opponents)]
        mine = number % 2 == 0
        while True:
            if mine:
                sent.append("position " + " ".join(map(str, heaps)))
                move = choose(list(heaps)) if choose else None
                if move is None or not 1 <= move[1] <= heaps[move[0]]:
                    games.append(Game(spec["name"], won=False, forfeited=True))
                    break
            else:
                move = opponent_move(spec["kind"], spec.get("mistake_rate", 0.0), rng, heaps)
            heaps[move[0]] -= move[1]
            if not any(heaps):
                games.append(Game(spec["name"], won=mine, forfeited=False))
                break
            mine = not mine
    return games, sent


def expected_metrics(games: list[Game]) -> dict[str, object]:
    wins = sum(game.won for game in games)
    low, high = wilson(wins, len(games))
    metrics: dict[str, object] = {
        "win_rate": {
            "value": wins / len(games),
            "ci_low": max(low, 0.0),
            "ci_high": min(high, 1.0),
        },
        "forfeit_rate": sum(game.forfeited for game in games) / len(games),
    }
    for name in ("random", "optimal"):
        mine = [game for game in games if game.opponent == name]
        metrics[f"win_rate_vs_{name}"] = sum(game.won for game in mine) / len(mine)
    return metrics


def assert_close(found: dict[str, object], expected: dict[str, object]) -> None:
    assert set(found) == set(expected)
    for name, value in expected.items():
        if isinstance(value, dict):
            for key, number in value.items():
                assert found[name][key] == pytest.approx(number, abs=1e-9), (name, key)  # type: ignore[index]
        else:
            assert found[name] == pytest.approx(value, abs=1e-9), name


def task(files: dict[str, str]) -> TaskCall:
    return TaskCall(task_id=ROW["id"], input=ROW["input"], files=files)


REFERENCE = reference_files("nim-arena", ROW)
EXAMPLE_PLAYER = {
    "player.py": (EXAMPLES / "agents" / "nim_player.py").read_text(),
    "load_player_command.txt": COMMAND,
}
PLAYERS = {"reference": REFERENCE, "example": EXAMPLE_PLAYER}


@pytest.mark.parametrize("name", sorted(PLAYERS))
def test_a_player_scores_what_a_replay_of_the_schedule_gives(name: str, tmp_path: Path) -> None:
    files = PLAYERS[name]
    folder = tmp_path / "module"
    folder.mkdir()
    (folder / f"{name}_player.py").write_text(files["player.py"])
    choose = load_module(folder / f"{name}_player.py").choose_move
    games, sent = replay(choose)

    message, seen = run_arena(ARENA, task(files), tmp_path / "run", reply_timeout=5)

    assert seen.to_candidate == sent  # the same games, move by move
    assert seen.restarts == 0
    assert_close(message["metrics"], expected_metrics(games))
    assert len(games) == CONFIG["games"] == 1000


def test_the_reference_player_beats_the_example_player() -> None:
    reference = load_module(
        EXAMPLES / "nim-arena" / "hidden" / "normal-play" / "reference" / "player.py"
    )
    example = load_module(EXAMPLES / "agents" / "nim_player.py")
    strong = sum(game.won for game in replay(reference.choose_move)[0])
    weak = sum(game.won for game in replay(example.choose_move)[0])
    assert strong > weak


def test_a_player_whose_every_move_is_illegal_scores_zero(tmp_path: Path) -> None:
    player = "import sys\nfor line in sys.stdin:\n    print('7 99', flush=True)\n"
    files = {"player.py": player, "load_player_command.txt": COMMAND}
    message, seen = run_arena(ARENA, task(files), tmp_path, reply_timeout=5)
    games, sent = replay(None)
    assert seen.to_candidate == sent
    assert_close(message["metrics"], expected_metrics(games))
    assert message["metrics"]["win_rate"]["value"] == 0.0
    assert message["metrics"]["forfeit_rate"] == 1.0


@pytest.mark.parametrize(
    ("player", "problem", "reply_timeout"),
    [
        ("import sys, time\nfor line in sys.stdin:\n    time.sleep(60)\n", "timeout", 0.3),
        # A generous wait: the player must have exited (not merely be slow to start) to read
        # as "exited" on a busy machine.
        ("import sys\nsys.exit(0)\n", "exited", 10),
    ],
)
def test_a_player_that_never_answers_still_lets_the_program_finish(
    player: str, problem: str, reply_timeout: float, tmp_path: Path
) -> None:
    files = {"player.py": player, "load_player_command.txt": COMMAND}
    message, seen = run_arena(ARENA, task(files), tmp_path, reply_timeout=reply_timeout)
    allowed = CONFIG["failed_replies_in_a_row"]
    # Asked `allowed` times, restarted after each miss but the last, then every game left is
    # forfeited without asking.
    assert [reply.get("problem") for reply in seen.replies] == [problem] * allowed
    assert seen.restarts == allowed - 1
    metrics = message["metrics"]
    assert metrics["win_rate"]["value"] == 0.0 and metrics["forfeit_rate"] == 1.0
    assert metrics["win_rate_vs_random"] == metrics["win_rate_vs_optimal"] == 0.0
