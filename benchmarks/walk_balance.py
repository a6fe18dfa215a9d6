#!/usr/bin/env python3
"""A model of the Gluon forward's persistent causal walks: which (query block, head) each
program gets, and how evenly the causal work falls on the programs (no GPU needed).

Python copies of the kernel's arithmetic (core/gluon_forward.py): "rounds" is the walk before
2026-12-01 (every head's last block, then every head's next, rounds alternating direction),
"pairs" the walk from then to 2026-12-04 (NOTES v0.25 item 3: heavy and light blocks of one head
in pairs, the leftover tiles one or two a program), and "tail" `_causal_walk` (NOTES v0.48: the
pairs, then the last heads heaviest block first in rounds of alternating direction). Each is
checked to hand out every tile once; the imbalance is the busiest program's key blocks over the
mean (a static model: it ignores per-tile costs and the L2, which the pairs are for).

    python benchmarks/walk_balance.py [--programs 132]
"""
from __future__ import annotations

import argparse
import itertools
import sys


def rounds_walk(t: int, num_tiles: int, programs: int, num_blocks: int, heads: int) -> tuple:
    r = t // programs
    if r % 2 == 1 and (r + 1) * programs <= num_tiles:
        t = r * programs + (programs - 1 - t % programs)
    return num_blocks - 1 - t // heads, t % heads


def paired_place(place: int, num_blocks: int) -> tuple:
    """_paired_place: (block, head) at `place` of the pairs' order."""
    head = place // num_blocks
    s = place - head * num_blocks
    if num_blocks % 2 == 1 and head % 2 == 1:
        s -= 1
    if s < 0:
        return (num_blocks - 1) // 2, head
    return (num_blocks - 1 - s // 2 if s % 2 == 0 else s // 2), head


def pairs_walk(t: int, num_tiles: int, programs: int, num_blocks: int, heads: int) -> tuple:
    paired = num_tiles // (2 * programs) * (2 * programs)
    if t < paired:
        r = t // programs
        place = (r // 2) * 2 * programs + 2 * (t % programs) + r % 2
    else:
        j = t - paired
        twice = max(num_tiles - paired - programs, 0)
        if j >= programs:
            place = paired + 2 * (j - programs) + 1
        elif j < twice:
            place = paired + 2 * j
        else:
            place = paired + twice + j
    return paired_place(place, num_blocks)


def tail_sizes(programs: int, num_blocks: int, heads: int) -> tuple:
    """_causal_walk_sizes: (tail heads, whole rounds of pairs, pairs left over, tail items)."""
    tail = min(heads, -(-2 * programs // num_blocks))
    tail += (num_blocks % 2) * ((heads - tail) % 2)
    pairs = (heads - tail) * num_blocks // 2
    rounds, left = divmod(pairs, programs)
    return tail, rounds, left, left + tail * num_blocks


def tail_length(p: int, programs: int, num_blocks: int, heads: int) -> int:
    """_causal_walk_length: program p's count of tiles."""
    tail, rounds, left, items = tail_sizes(programs, num_blocks, heads)
    full, rest = divmod(items, programs)
    in_last = p < rest if full % 2 == 0 else p >= programs - rest
    return 2 * rounds + full + int(in_last) + int(p < left)


def tail_walk(p: int, k: int, programs: int, num_blocks: int, heads: int) -> tuple:
    """_causal_walk: (block, head) of program p's k-th tile."""
    tail, rounds, left, items = tail_sizes(programs, num_blocks, heads)
    j = k - 2 * rounds
    if k < 2 * rounds:
        return paired_place((k // 2) * 2 * programs + 2 * p + k % 2, num_blocks)
    if p < left and j < 2:
        return paired_place(2 * rounds * programs + 2 * p + j, num_blocks)
    turn = j - int(p < left)
    u = turn * programs + (programs - 1 - p if turn % 2 == 1 else p) - left
    return num_blocks - 1 - u // tail, heads - tail + u % tail


def program_tiles(walk: str, programs: int, num_blocks: int, heads: int) -> list:
    """Each program's (block, head) tiles under a walk."""
    num_tiles = num_blocks * heads
    if walk == "tail":
        return [[tail_walk(p, k, programs, num_blocks, heads)
                 for k in range(tail_length(p, programs, num_blocks, heads))] for p in range(programs)]
    fn = {"rounds": rounds_walk, "pairs": pairs_walk}[walk]
    return [[fn(t, num_tiles, programs, num_blocks, heads) for t in range(p, num_tiles, programs)]
            for p in range(programs)]


WALKS = ("rounds", "pairs", "tail")


def imbalance(walk: str, programs: int, num_blocks: int, heads: int) -> float:
    """Busiest program's key blocks over the mean; raises if a tile is handed out twice or never."""
    programs = min(programs, num_blocks * heads)
    tiles = program_tiles(walk, programs, num_blocks, heads)
    every = [tile for mine in tiles for tile in mine]
    if sorted(every) != [(b, h) for b in range(num_blocks) for h in range(heads)]:
        raise AssertionError(f"{walk}: not every tile once at {programs}, {num_blocks}, {heads}")
    work = [sum(block + 1 for block, _ in mine) for mine in tiles]
    return max(work) / (sum(work) / programs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--programs", type=int, default=132)
    args = p.parse_args()
    for programs, blocks, heads in itertools.product((1, 2, 7, args.programs), (1, 2, 3, 5, 22, 23), (1, 3, 5, 128, 131)):
        for walk in WALKS:
            imbalance(walk, programs, blocks, heads)
    print("every walk hands out every tile once (120 small cases)")
    shapes = (("D=64 N=1k trimmed (B=16, H=32)", 8, 512), ("D=64 N=4k c3 (B=4, H=32)", 22, 128),
              ("D=64 N=16k c3 (B=1, H=32)", 86, 32), ("D=128 N=512 (B=64, H=16)", 4, 1024),
              ("D=128 N=1k (B=16, H=16)", 8, 256), ("D=128 N=4k (B=4, H=16)", 32, 64),
              ("D=128 N=16k (B=1, H=16)", 128, 16), ("D=256 N=1k (B=16, H=8)", 8, 128))
    print("| shape | query blocks | heads | " + " | ".join(WALKS) + " |\n|---|---:|---:|" + "---:|" * len(WALKS))
    for name, blocks, heads in shapes:
        print(f"| {name} | {blocks} | {heads} | "
              + " | ".join(f"{imbalance(w, args.programs, blocks, heads):.3f}" for w in WALKS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
