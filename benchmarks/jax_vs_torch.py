#!/usr/bin/env python3
"""flashx's JAX frontend against its torch frontend: the same kernels, so the ratio is overhead.

One process, the same random bf16 inputs (B = 4, N = 4k, H * D = 2048, layout "bhnd") in both
frameworks: forward at D = 64 (causal and not) and D = 128 causal, and the D = 128 causal
backward (JAX: the jitted vjp function applied to dO; torch: autograd.grad of one saved
forward). Timing as in the other scripts: triton.testing.do_bench medians for torch, a
jitted call timed around block_until_ready for JAX. Prints TFLOP/s and jax/torch per case.

    python benchmarks/jax_vs_torch.py          # on the GPU, with jax-triton installed
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # torch shares the GPU

CASES = ((64, True, "fwd"), (64, False, "fwd"), (128, True, "fwd"), (128, True, "bwd"))
B, N, HIDDEN = 4, 4096, 2048


def main() -> int:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    from triton.testing import do_bench

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common

    import flashx.jax as fj
    import flashx.torch as ft

    for d, causal, kind in CASES:
        h = HIDDEN // d
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal((B, h, N, d), dtype=np.float32) for _ in range(4)]
        jq, jk, jv, jdo = (jnp.asarray(a, dtype=jnp.bfloat16) for a in arrays)
        tq, tk, tv, tdo = (torch.tensor(a, device="cuda", dtype=torch.bfloat16) for a in arrays)
        flops = 4.0 * B * h * N * N * d * (0.5 if causal else 1.0) * (2.5 if kind == "bwd" else 1.0)

        def attend(q, k, v):
            return fj.attention(q, k, v, causal=causal, layout="bhnd")

        if kind == "fwd":
            jax_ms = common.time_jax(jax.jit(attend), (jq, jk, jv), 200, 1000)
            torch_ms = do_bench(lambda: ft.attention(tq, tk, tv, causal=causal, layout="bhnd"), warmup=25, rep=200)
        else:
            _, vjp_fn = jax.jit(lambda q, k, v: jax.vjp(attend, q, k, v))(jq, jk, jv)
            jax_ms = common.time_jax(jax.jit(lambda fn, ct: fn(ct)), (vjp_fn, jdo), 200, 1000)
            q, k, v = (t.clone().requires_grad_() for t in (tq, tk, tv))
            out = ft.attention(q, k, v, causal=causal, layout="bhnd")
            torch_ms = do_bench(lambda: torch.autograd.grad(out, (q, k, v), tdo, retain_graph=True), warmup=25, rep=200)
        name = f"{kind} D{d} {'causal' if causal else 'non-causal'}"
        print(f"{name}: jax {flops / jax_ms * 1e-9:.1f}  torch {flops / torch_ms * 1e-9:.1f}  "
              f"jax/torch {torch_ms / jax_ms:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
