#!/usr/bin/env python3
"""A model of the Gluon forward's persistent causal walks: which (query block, head) each
program gets, and how evenly the causal work falls on the programs (no GPU needed).

Python copies of the kernel's arithmetic (core/gluon_forward.py): "rounds" is the walk before
2026-12-01 (every head's last block, then every head's next, rounds alternating direction) and
"pairs" is `_causal_pair` (NOTES v0.25 item 3). Each is checked to hand out every tile once;
the imbalance is the busiest program's key blocks over the mean (a static model: it ignores
per-tile costs and the L2, which is what "pairs" is for).

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
    head = place // num_blocks
    s = place - head * num_blocks
    if num_blocks % 2 == 1 and head % 2 == 1:
        s -= 1
    if s < 0:
        return (num_blocks - 1) // 2, head
    return (num_blocks - 1 - s // 2 if s % 2 == 0 else s // 2), head


WALKS = {"rounds": rounds_walk, "pairs": pairs_walk}


def imbalance(walk, programs: int, num_blocks: int, heads: int) -> float:
    """Busiest program's key blocks over the mean; raises if a tile is handed out twice or never."""
    num_tiles = num_blocks * heads
    programs = min(programs, num_tiles)
    work = [0] * programs
    seen = set()
    for t in range(num_tiles):
        block, head = walk(t, num_tiles, programs, num_blocks, heads)
        seen.add((block, head))
        work[t % programs] += block + 1
    if seen != {(b, h) for b in range(num_blocks) for h in range(heads)}:
        raise AssertionError(f"{walk.__name__}: not every tile once at {programs}, {num_blocks}, {heads}")
    return max(work) / (sum(work) / programs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--programs", type=int, default=132)
    args = p.parse_args()
    for programs, blocks, heads in itertools.product((1, 2, 7, args.programs), (1, 2, 3, 5, 22, 23), (1, 3, 5, 128, 131)):
        for walk in WALKS.values():
            imbalance(walk, programs, blocks, heads)
    print("both walks hand out every tile once (120 small cases)")
    shapes = (("D=64 N=1k trimmed (B=16, H=32)", 8, 512), ("D=64 N=4k c3 (B=4, H=32)", 22, 128),
              ("D=64 N=16k c3 (B=1, H=32)", 86, 32), ("D=128 N=512 (B=64, H=16)", 4, 1024),
              ("D=128 N=1k (B=16, H=16)", 8, 256), ("D=128 N=4k (B=4, H=16)", 32, 64),
              ("D=128 N=16k (B=1, H=16)", 128, 16), ("D=256 N=1k (B=16, H=8)", 8, 128))
    print("| shape | query blocks | heads | " + " | ".join(WALKS) + " |\n|---|---:|---:|" + "---:|" * len(WALKS))
    for name, blocks, heads in shapes:
        print(f"| {name} | {blocks} | {heads} | "
              + " | ".join(f"{imbalance(w, args.programs, blocks, heads):.3f}" for w in WALKS.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
