"""Session 19: JAX (device descriptors) vs torch (host descriptors) per TMA tile, forward, bf16 bnhd.
Which tiles a launcher without host descriptors should take."""
import sys
sys.path.insert(0, "benchmarks")
import torch
import triton
import jax
import jax.numpy as jnp
import common
import gluon_forward_check as gc
import flashx.jax as fj
import flashx.torch as ft
from flashx.core import runtime

CASES = [  # (B, N, H, D, causal, variants)
    (16, 1024, 16, 128, True, ["pp-tma-c240-ovl", "pp-tma-persist-ovl", "pp-tma-persist"]),
    (4, 4096, 16, 128, True, ["pp-tma-c240-ovl", "pp-tma-persist-ovl", "pp-tma-persist"]),
    (1, 16384, 16, 128, True, ["pp-tma-c240-ovl", "pp-tma-persist-ovl"]),
    (16, 1024, 16, 128, False, ["pp-tma-persist-ovl", "pp-tma-c240-ovl"]),
    (4, 4096, 16, 128, False, ["pp-tma-persist-ovl", "pp-tma-c240-ovl"]),
    (16, 1024, 8, 256, True, ["d256-tma-trim", "d256-tma-persist-trim", "d256-tma"]),
    (4, 4096, 8, 256, True, ["d256-tma-persist-ovl", "d256-tma-ovl"]),
    (16, 1024, 8, 256, False, ["d256-tma-persist-ovl", "d256-tma-ovl"]),
]
rows = []
for b, n, h, d, causal, names in CASES:
    flops = 4 * b * h * n * n * d / (2 if causal else 1)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qj, kj, vj = (jnp.asarray(x.float().cpu().numpy()).astype(jnp.bfloat16) for x in (q, k, v))
    res = {}
    for name in names:
        res[f"{name} torch"] = flops / triton.testing.do_bench(lambda: gc.launch_torch(q, k, v, name, causal), warmup=25, rep=100) / 1e9
        fn = jax.jit(lambda a, b_, c, name=name: gc.launch_jax(a, b_, c, name, causal)[0])
        res[f"{name} jax"] = flops / common.time_jax(fn, (qj, kj, vj), 25, 100, feed=0) / 1e9
    res["flashx torch"] = flops / triton.testing.do_bench(lambda: ft.attention(q, k, v, causal=causal), warmup=25, rep=100) / 1e9
    res["flashx jax"] = flops / common.time_jax(jax.jit(lambda a, b_, c: fj.attention(a, b_, c, causal=causal)), (qj, kj, vj), 25, 100, feed=0) / 1e9
    saved, runtime._hopper_gluon = runtime._hopper_gluon, False
    res["tl jax"] = flops / common.time_jax(jax.jit(lambda a, b_, c: fj.attention(a, b_, c, causal=causal)), (qj, kj, vj), 25, 100, feed=0) / 1e9
    runtime._hopper_gluon = saved
    case = f"B={b} N={n} H={h} D={d} {'causal' if causal else 'full'}"
    print(case, " ".join(f"{k}={v:.0f}" for k, v in res.items()), flush=True)
    rows.append((case, res))
print("\n| case | TFLOP/s (bf16, bnhd) |\n|---|---|")
for case, res in rows:
    print(f"| {case} | " + ", ".join(f"{k} {v:.0f}" for k, v in res.items()) + " |")
