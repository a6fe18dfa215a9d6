"""The Gluon forward draft (flashx/core/gluon_forward.py, branch exp/gluon-forward) on the GPU:
correctness against torch SDPA in float64, then TFLOP/s beside flashx's tl forward.

Run it in a subprocess with a timeout: the draft has never run, and a wrong mbarrier count or
a register budget the partitions cannot share would hang it, not fail it.

    timeout 120 python benchmarks/gluon_forward_check.py
"""
import sys

import numpy as np
import torch
import triton

from flashx.core import gluon_forward
import flashx.torch as ft


def check_jax(q, k, v, ref) -> int:
    """The same draft from JAX inside jax.jit (a Gluon-aware jax-triton kernel builder)."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("JAX: not installed, skipped", flush=True)
        return 0
    arrays = [jnp.asarray(x.float().cpu().numpy()).astype(jnp.bfloat16) for x in (q, k, v)]
    try:
        out, _ = jax.jit(gluon_forward.launch_jax)(*arrays)
        out = torch.from_numpy(np.asarray(out.astype(jnp.float32))).double().transpose(1, 2)
        err = ((out - ref.cpu()).norm() / ref.norm().cpu()).item()
    except Exception as e:  # noqa: BLE001
        print(f"JAX: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
        return 1
    print(f"JAX: relative error {err:.2e} {'OK' if err < 1e-2 else 'WRONG'}", flush=True)
    return int(err >= 1e-2)


def main() -> int:
    torch.manual_seed(0)
    failures = 0
    for (b, n, h, d) in ((1, 128, 1, 128), (2, 1024, 4, 128), (2, 512, 3, 64)):
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        ref = torch.nn.functional.scaled_dot_product_attention(*(x.transpose(1, 2).double() for x in (q, k, v)))
        for pingpong in (False, True):
            out, lse = gluon_forward.launch_torch(q, k, v, pingpong=pingpong, consumer_regs=200)
            err = ((out.double().transpose(1, 2) - ref).norm() / ref.norm()).item()
            ok = err < 1e-2
            failures += not ok
            print(f"B={b} N={n} H={h} D={d} pingpong={pingpong}: relative error {err:.2e} {'OK' if ok else 'WRONG'}",
                  flush=True)
        failures += check_jax(q, k, v, ref)
    for d in (64, 128):
        n, h = 4096, 2048 // d
        q, k, v = (torch.randn(4, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * 4 * h * n * n * d
        for name, fn in (("gluon draft", lambda: gluon_forward.launch_torch(q, k, v)),
                         ("gluon draft, ping-pong", lambda: gluon_forward.launch_torch(q, k, v, pingpong=True, consumer_regs=200)),
                         ("flashx tl", lambda: ft.attention(q, k, v))):
            ms = triton.testing.do_bench(fn, warmup=25, rep=100)
            print(f"D={d} N={n}: {name} {flops / ms / 1e9:.1f} TFLOP/s", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
