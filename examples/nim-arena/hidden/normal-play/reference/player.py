"""A Nim player that plays perfectly: it leaves a nim-sum of 0 whenever it can.

Protocol: reads `position A B C` lines on stdin, answers `HEAP COUNT` (heap index from 0,
objects to take) on stdout, one line per position, flushed at once.
"""

from __future__ import annotations

import sys


def choose_move(heaps: list[int]) -> tuple[int, int]:
    total = 0
    for size in heaps:
        total ^= size
    for heap, size in enumerate(heaps):
        if size ^ total < size:  # taking down to size ^ total leaves a nim-sum of 0
            return heap, size - (size ^ total)
    # A losing position: take one object from the largest heap and hope for a mistake.
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
