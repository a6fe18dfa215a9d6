#!/usr/bin/env python3
"""How a call's GPU time moves in the half second after common.settle().

The suite times every system after a settle, then do_bench's warm-up and timed window (--quick:
10 ms + 50 ms; otherwise 25 + 100). If the card's clock is still moving over that window, what
do_bench reads depends on how much of the move the window holds, call length by call length and
system by system. This probe settles (--settle matmuls: 300 ms of bf16 matmuls, which hold the
H200 at its power limit, the suite's settle until 2026-12-04; own: the timed call itself back to
back, the suite's settle since; both: each in turn), then times each call on its own (CUDA events
around the call, L2 flushed before it as do_bench does) for --span-ms of GPU time, and prints each
system's median call time in windows of time since the settle ended, `--rounds` rounds with the
systems alternated; plus, per system, the median of the calls in the quick suite's window
(10-60 ms) and in a late one (300 ms on).

    python benchmarks/settle_probe.py [--cases 64,512,16,128,1 4,4096,16,128,1] [--span-ms 600] [--settle both]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

WINDOWS_MS = (0, 10, 25, 60, 100, 200, 300, 450, 600)
QUICK_WINDOW_MS = (10, 60)  # --quick: do_bench warm-up 10 ms, then 50 ms timed
LATE_FROM_MS = 300


def calls_after_settle(fn, torch, flush, span_ms: float, estimate_ms: float, own: bool) -> list:
    """settle() (own: with fn as its load, else matmuls), then calls of fn, each after zeroing
    `flush` (256 MB: do_bench's L2 flush), for ~span_ms of GPU time: [(ms since the settle ended at
    the call's start, the call's ms)]."""
    count = max(8, int(span_ms / estimate_ms))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
    origin = torch.cuda.Event(enable_timing=True)
    common.settle(load=fn if own else None)
    origin.record()
    for begin, end in zip(starts, ends):
        flush.zero_()
        begin.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [(origin.elapsed_time(b), b.elapsed_time(e)) for b, e in zip(starts, ends)]


def window_medians(samples: list, edges) -> list:
    """Median call ms of the samples starting in each [edges[i], edges[i + 1]) window; None if empty."""
    out = []
    for lo, hi in zip(edges, edges[1:]):
        inside = [ms for at, ms in samples if lo <= at < hi]
        out.append(statistics.median(inside) if inside else None)
    return out


def fmt(ms) -> str:
    return "-" if ms is None else f"{ms * 1e3:.1f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", type=common.parse_shape,
                   default=[(64, 512, 16, 128, True), (4, 4096, 16, 128, True)], metavar="B,N,H,D,causal")
    p.add_argument("--span-ms", type=float, default=600.0, help="GPU time of calls after each settle")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--settle", choices=("matmuls", "own", "both"), default="both")
    args = p.parse_args()

    import torch
    from torch.nn.attention import SDPBackend
    from triton.testing import do_bench

    import flashx.torch

    edges = tuple(w for w in WINDOWS_MS if w < args.span_ms) + (args.span_ms,)
    heads = " | ".join(f"{lo}-{hi}" for lo, hi in zip(edges, edges[1:]))
    settles = ("matmuls", "own") if args.settle == "both" else (args.settle,)
    print(f"| case | settle | system | round | {heads} | quick window {QUICK_WINDOW_MS[0]}-{QUICK_WINDOW_MS[1]} "
          f"| from {LATE_FROM_MS} |\n|---|---|---|---|" + "---:|" * (len(edges) + 1), flush=True)
    summary = {}
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    for b, n, h, d, causal in args.cases:
        text = f"{b},{n},{h},{d},{int(causal)}"
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        systems = {"flashx": lambda: flashx.torch.attention(q, k, v, causal=causal, layout="bhnd"),
                   "FA2": common.sdpa_call(SDPBackend.FLASH_ATTENTION, q, k, v, is_causal=causal),
                   "cuDNN": common.sdpa_call(SDPBackend.CUDNN_ATTENTION, q, k, v, is_causal=causal)}
        # a call and its flush (~0.07 ms on the H200), to size each pass to span_ms
        estimates = {name: do_bench(fn, warmup=10, rep=20, return_mode="median") + 0.07 for name, fn in systems.items()}
        for r in range(args.rounds):
            order = list(systems) if r % 2 == 0 else list(systems)[::-1]
            for name in order:
                for how in settles:
                    samples = calls_after_settle(systems[name], torch, flush, args.span_ms, estimates[name], how == "own")
                    cells = window_medians(samples, edges)
                    quick, late = window_medians(samples, QUICK_WINDOW_MS) + window_medians(samples, (LATE_FROM_MS, 1e9))
                    summary.setdefault((text, how, name), []).append((quick, late))
                    print(f"| {text} | {how} | {name} | {r} | " + " | ".join(fmt(c) for c in cells)
                          + f" | {fmt(quick)} | {fmt(late)} |", flush=True)
    print("\n| case | settle | system | quick window, us (rounds) | from 300 ms, us (rounds) |\n|---|---|---|---|---|")
    for (text, how, name), rows in summary.items():
        print(f"| {text} | {how} | {name} | " + ", ".join(fmt(q) for q, _ in rows) + " | "
              + ", ".join(fmt(late) for _, late in rows) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
