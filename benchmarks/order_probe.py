#!/usr/bin/env python3
"""Does the order of timings move them? Times a sequence of systems on one shape, one do_bench
median each (flashx torch frontend, SDPA FA2, SDPA cuDNN; bf16, layout "bhnd"), and reads the
SM clock, power and temperature after each timing, so that a reading that drifts with the
card's state shows beside that state; --settle-ms loads the card before each timing as the
benchmarks do (common.settle), to see whether that makes the order matter less; --sample-ms
also reads the SM clock and power every so many ms while each do_bench runs (pynvml), and
reports their medians: the state the card was in during the timing, not after it.

    python benchmarks/order_probe.py --shape 4,4096,16,128 --seq "x x x x f c x x rest x f c x"

--seq tokens: x (flashx), f (FA2), c (cuDNN), rest (sleep --rest-s seconds, the card idle).
Prints one line a timing and a table last; the clock readings come from torch.cuda (pynvml)
where it has them, else nvidia-smi.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
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


class CardSampler:
    """Reads (SM MHz, W) every `period_ms` on a thread between start() and stop(); stop() gives
    their medians ((nan, nan) where pynvml gave no reading). The clock is read as it is; NVML's
    power is its own running average, so it carries what ran before the timing (the settle)."""

    def __init__(self, period_ms: float):
        self.period_s = period_ms / 1e3
        self.readings: list = []
        self._stop = threading.Event()
        self._thread = None

    def _run(self) -> None:
        import torch

        while not self._stop.is_set():
            try:
                self.readings.append((torch.cuda.clock_rate(), torch.cuda.power_draw() / 1000))
            except Exception:  # noqa: BLE001 -- no pynvml: nothing to sample
                return
            time.sleep(self.period_s)

    def start(self) -> None:
        self.readings, self._stop = [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> tuple:
        self._stop.set()
        self._thread.join()
        if not self.readings:
            return float("nan"), float("nan")
        return (statistics.median(r[0] for r in self.readings), statistics.median(r[1] for r in self.readings))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="4,4096,16,128", help="B,N,H,D")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--seq", default="x x x x f c x x rest x f c x")
    parser.add_argument("--rep-ms", type=float, default=100.0)
    parser.add_argument("--rest-s", type=float, default=5.0)
    parser.add_argument("--settle-ms", type=float, default=0.0,
                        help="common.settle() before each timing (the benchmarks' default: common.SETTLE_MS)")
    parser.add_argument("--sample-ms", type=float, default=0.0,
                        help="also sample the SM clock and power this often during each timing (0: off)")
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
    sampler = CardSampler(args.sample_ms) if args.sample_ms > 0 else None
    for i, token in enumerate(args.seq.split()):
        if token == "rest":
            time.sleep(args.rest_s)
            print(f"{i:2d} rest {args.rest_s:.0f} s: {card_state()}", flush=True)
            continue
        name, fn = systems[token]
        common.settle(args.settle_ms)
        if sampler:
            sampler.start()
        start = time.perf_counter()
        ms = triton.testing.do_bench(fn, warmup=25, rep=args.rep_ms)
        during = sampler.stop() if sampler else (float("nan"), float("nan"))
        rows.append((i, name, flops / ms * 1e-9, time.perf_counter() - start, card_state(), during))
        print(f"{i:2d} {name:7s} {rows[-1][2]:6.0f} TFLOP/s  ({rows[-1][3]:.2f} s)  during: {during[0]:.0f} MHz "
              f"{during[1]:.0f} W  after: {rows[-1][4]}", flush=True)
    print("| # | system | TFLOP/s | MHz during (median) | W during (median) | card after |\n|---|---|---|---|---|---|")
    for i, name, tflops, _, state, (mhz, watts) in rows:
        print(f"| {i} | {name} | {tflops:.0f} | {mhz:.0f} | {watts:.0f} | {state} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
