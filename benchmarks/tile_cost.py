#!/usr/bin/env python3
"""What one forward tile costs once, per key block, and for a causal diagonal: tl and Gluon tiles.

Short causal calls (B = 64, N = 256 / 512) are where flashx is furthest from its targets, and
where the Gluon tiles trail the tl forward (NOTES v0.14). A tile there walks 1-4 key blocks, so
what it pays once (its prologue and epilogue, the pipeline's fill) and what the masked diagonal
block adds weigh as much as the blocks themselves. This script measures both apart, on shapes
where every tile does the same work, so no load imbalance mixes in:

- Nq = 128 query rows (one 128-row tile a head), Nkv = k * 128 keys for k in --blocks, H = 132 *
  --waves heads at B = 1, D = 128, bf16, bnhd: every program walks k key blocks, in whole waves.
- Non-causal, the time per wave fits a + b * k: a, what a tile pays once; b, a key block.
- Causal (bottom-right), each tile walks the same k blocks, the last one masked: the causal time
  less the non-causal one at the same k is what the masked diagonal adds.

Systems: the Gluon tiles of benchmarks/gluon_forward_check.py (--variants), launched directly,
and flashx's tl forward (the plan's tile for the shape, the Gluon route off; where that tile has
64 rows, two of its programs make one head's 128, and its figures stay per wave of SMs heads).
Times: triton.testing.do_bench medians.

    python benchmarks/tile_cost.py [--blocks 1 2 4 8 16] [--waves 16] [--variants pp pp-qp-persist]

Prints a line per (system, k) and a table of a, b and the diagonal's cost; needs a CUDA GPU (an
sm_90 one for the Gluon tiles).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

HEAD_DIM, ROWS, KEY_BLOCK = 128, 128, 128


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, nargs="+", default=[1, 2, 4, 8, 16], help="key blocks a tile walks")
    p.add_argument("--waves", type=int, default=16, help="tiles per SM (heads = SMs * waves)")
    p.add_argument("--variants", nargs="+", default=["pp", "pp-qp-persist", "pp-turns-qp-persist"],
                   help="Gluon tiles of gluon_forward_check.VARIANTS (D = 128 ones)")
    args = p.parse_args(argv)

    import numpy as np
    import torch
    import triton

    import flashx.torch as ft
    import gluon_forward_check as check

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    heads = sms * args.waves
    systems = {f"gluon {name}": name for name in args.variants}
    systems["flashx tl"] = None
    per_wave: dict = {}  # (system, causal, k) -> us per wave
    for k in args.blocks:
        q = torch.randn(1, ROWS, heads, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
        kk, v = (torch.randn(1, k * KEY_BLOCK, heads, HEAD_DIM, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        for causal in (False, True):
            for system, name in systems.items():
                if name is None:
                    fn = check.without_gluon(lambda causal=causal: ft.attention(q, kk, v, causal=causal))
                else:
                    fn = (lambda name=name, causal=causal: check.launch_torch(q, kk, v, name, causal))
                ms = triton.testing.do_bench(fn, warmup=25, rep=100)
                per_wave[system, causal, k] = ms * 1e3 / args.waves
                print(f"{system:28s} k={k:3d} {'causal' if causal else 'full  '} {ms * 1e3:9.1f} us "
                      f"{per_wave[system, causal, k]:8.2f} us a wave", flush=True)

    ks = np.array(args.blocks, dtype=float)
    print(f"\nFit, D = {HEAD_DIM}, {ROWS}-row tiles, {heads} heads ({args.waves} waves of {sms}): "
          "a = once a tile, b = a key block, diag = causal less non-causal at the same k (us)")
    print("| system | a | b | " + " | ".join(f"diag k={k}" for k in args.blocks) + " | a / (a + b k) at k = 2, 4 |")
    print("|---|---:|---:|" + "---:|" * len(args.blocks) + "---|")
    for system in systems:
        full = np.array([per_wave[system, False, k] for k in args.blocks])
        b, a = np.polyfit(ks, full, 1)
        diag = [per_wave[system, True, k] - per_wave[system, False, k] for k in args.blocks]
        share = " / ".join(f"{a / (a + b * k):.2f}" for k in (2, 4))
        print(f"| {system} | {a:.2f} | {b:.2f} | " + " | ".join(f"{x:.2f}" for x in diag) + f" | {share} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
