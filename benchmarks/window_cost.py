#!/usr/bin/env python3
"""What a sliding window's backward costs per program and per loop step, flashx beside FlexAttention.

A causal window of W keys (query i sees keys i-W+1 .. i) at B = 1, N = 16k, H = 16, D = 128, bf16,
for several W in one process. Each dK/dV program of flashx owns 128 keys and walks cdiv(W + 127, 64)
query blocks of 64 (its dQ programs as many key blocks), so the backward kernel's time, fitted as
a + b * steps over W, splits into what every program pays once (a, spread over the programs each
SM runs) and what each step costs (b). The kernel CUDA times come from torch.profiler (mean over
the profiled calls). Both backwards run dK/dV's and dQ's programs in one kernel (flashx's since
v0.8), each fitted against the same step count.

    python benchmarks/window_cost.py [--windows 256 512 1024 2048 4096] [--calls 10] [--no-flex]

Prints one line per (system, W) and the fits; needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

B, N, H, D = 1, 16384, 16, 128
BLOCK_KEYS, BLOCK_QUERIES = 128, 64  # flashx's dK/dV tile at D = 128 (tuning.TUNED_TILES)


def kernel_ms(torch, run, calls: int) -> dict:
    """Mean CUDA ms per call of each kernel `run` launches (torch.profiler, after one warm-up call)."""
    from torch.profiler import ProfilerActivity, profile

    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            run()
        torch.cuda.synchronize()
    totals: dict = {}
    for event in prof.key_averages():
        if event.device_type.name == "CUDA" and event.count:
            totals[event.key] = totals.get(event.key, 0.0) + event.device_time_total / 1e3 / calls
    return totals


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--windows", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--no-flex", action="store_true")
    args = p.parse_args(argv)

    import numpy as np
    import torch

    import flashx.torch as ft

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    programs = B * H * N // BLOCK_KEYS
    waves = programs / sms
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16)
    window_t = torch.zeros((), dtype=torch.int64, device="cuda")  # read by Flex's mask_mod: one compile for all W

    def window_mask(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window_t)

    flex = None if args.no_flex else common.flex_setup(torch)
    rows = {"flashx": [], "flex": []}
    for w in args.windows:
        steps = -(-(w + BLOCK_KEYS - 1) // BLOCK_QUERIES)
        out = ft.attention(q, k, v, causal=True, window=(w - 1, 0), layout="bhnd")
        times = kernel_ms(torch, lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), args.calls)
        # One kernel holds dK/dV's and dQ's programs at D = 128 (plan.fused_backward), as in FlexAttention.
        both = sum(t for name, t in times.items() if "attention_backward_kernel" in name)
        rows["flashx"].append((w, steps, both, 0.0))
        print(f"flashx W={w:5d} steps/program {steps:3d}  backward kernel {both:.3f} ms", flush=True)
        if flex is not None:
            compiled, create_block_mask = flex
            window_t.fill_(w)
            block_mask = create_block_mask(window_mask, None, None, N, N, device="cuda")
            fout = compiled(q, k, v, block_mask=block_mask)
            times = kernel_ms(torch, lambda: torch.autograd.grad(fout, (q, k, v), dout, retain_graph=True), args.calls)
            main_ms = max(times.values())
            rows["flex"].append((w, steps, main_ms, 0.0))
            print(f"flex   W={w:5d} steps/program {steps:3d}  backward kernel {main_ms:.3f} ms  "
                  f"({', '.join(f'{n[:40]}={t:.3f}' for n, t in times.items())})", flush=True)
    print(f"\nFits, time = a + b * steps ({programs} programs per kernel, {waves:.1f} per SM):")
    series = [
        ("flashx dK/dV + dQ (one kernel)", rows["flashx"], lambda r: r[2]),
        ("flex dK/dV + dQ (one kernel)", rows["flex"], lambda r: r[2]),
    ]
    for label, data, value in series:
        if len(data) < 2:
            continue
        b, a = np.polyfit([r[1] for r in data], [value(r) for r in data], 1)  # least squares: slope, intercept
        print(f"{label}: a = {a:.3f} ms ({a * 1e3 / waves:.1f} us per program), "
              f"b = {b * 1e3:.1f} us per step ({b * 1e3 / waves:.2f} us per program step)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
