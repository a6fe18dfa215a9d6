#!/usr/bin/env python3
"""Does the order of timings move them? Times a sequence of systems on one shape, one do_bench
median each (flashx torch frontend, SDPA FA2, SDPA cuDNN; bf16, layout "bhnd"), and reads the
SM clock, power and temperature after each timing, so that a reading that drifts with the
card's state shows beside that state; --settle-ms loads the card before each timing as the
benchmarks do (common.settle), to see whether that makes the order matter less.

    python benchmarks/order_probe.py --shape 4,4096,16,128 --seq "x x x x f c x x rest x f c x"

--seq tokens: x (flashx), f (FA2), c (cuDNN), rest (sleep --rest-s seconds, the card idle).
Prints one line a timing and a table last; the clock readings come from torch.cuda (pynvml)
where it has them, else nvidia-smi.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time


def card_state() -> str:
    """'sm MHz, W, C' of GPU 0 now."""
    try:
        import torch

        return f"{torch.cuda.clock_rate()} MHz {torch.cuda.power_draw() / 1000:.0f} W {torch.cuda.temperature()} C"
    except Exception:  # noqa: BLE001 -- pynvml missing: ask nvidia-smi
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                                  "--format=csv,noheader", "-i", "0"], capture_output=True, text=True, timeout=10)
            return out.stdout.strip()
        except Exception as err:  # noqa: BLE001
            return f"(no clock reading: {type(err).__name__})"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="4,4096,16,128", help="B,N,H,D")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--seq", default="x x x x f c x x rest x f c x")
    parser.add_argument("--rep-ms", type=float, default=100.0)
    parser.add_argument("--rest-s", type=float, default=5.0)
    parser.add_argument("--settle-ms", type=float, default=0.0,
                        help="common.settle() before each timing (the benchmarks' default: common.SETTLE_MS)")
    args = parser.parse_args()

    import torch
    import triton
    from torch.nn.attention import SDPBackend

    import common  # benchmarks/, this script's folder
    import flashx.torch as ft

    b, n, h, d = (int(x) for x in args.shape.split(","))
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4 * b * h * n * n * d / (2 if args.causal else 1)

    systems = {"x": ("flashx", lambda: ft.attention(q, k, v, causal=args.causal, layout="bhnd")),
               "f": ("FA2", common.sdpa_call(SDPBackend.FLASH_ATTENTION, q, k, v, is_causal=args.causal)),
               "c": ("cuDNN", common.sdpa_call(SDPBackend.CUDNN_ATTENTION, q, k, v, is_causal=args.causal))}
    for _, fn in systems.values():  # compiled before the first timing
        fn()
    torch.cuda.synchronize()
    time.sleep(args.rest_s)
    print(f"shape B={b} N={n} H={h} D={d} {'causal' if args.causal else 'full'}; idle: {card_state()}", flush=True)
    rows = []
    for i, token in enumerate(args.seq.split()):
        if token == "rest":
            time.sleep(args.rest_s)
            print(f"{i:2d} rest {args.rest_s:.0f} s: {card_state()}", flush=True)
            continue
        name, fn = systems[token]
        common.settle(args.settle_ms)
        start = time.perf_counter()
        ms = triton.testing.do_bench(fn, warmup=25, rep=args.rep_ms)
        rows.append((i, name, flops / ms * 1e-9, time.perf_counter() - start, card_state()))
        print(f"{i:2d} {name:7s} {rows[-1][2]:6.0f} TFLOP/s  ({rows[-1][3]:.2f} s)  after: {rows[-1][4]}", flush=True)
    print("| # | system | TFLOP/s | card after |\n|---|---|---|---|")
    for i, name, tflops, _, state in rows:
        print(f"| {i} | {name} | {tflops:.0f} | {state} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
