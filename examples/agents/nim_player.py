"""A simple Nim player for the nim-arena example pack: a starting point, not a strong one.

It always takes one object from the largest heap. Upload it as the candidate's player.py
with a load_player_command.txt of `python3 player.py` (the README of examples/nim-arena
shows the bundle line). Knowing the nim-sum strategy beats it easily.

Protocol: reads `position A B C` lines on stdin, answers `HEAP COUNT` (heap index from 0,
objects to take) on stdout, one line per position, flushed at once.
"""

from __future__ import annotations

import sys


def choose_move(heaps: list[int]) -> tuple[int, int]:
    largest = max(range(len(heaps)), key=lambda heap: heaps[heap])
    return largest, 1


def main() -> None:
    for line in sys.stdin:
        words = line.split()
        if len(words) < 2 or words[0] != "position":
            print("0 1", flush=True)  # not a position: answer anyway, to stay in step
            continue
        heap, count = choose_move([int(word) for word in words[1:]])
        print(f"{heap} {count}", flush=True)


if __name__ == "__main__":
    main()
