"""The Gluon forward's variants (flashx/core/gluon_forward.py), launched directly rather than
through the plan (which takes one, GLUON_FORWARD_TILE): correctness of each against float64 on
odd shapes (torch; JAX for one), then TFLOP/s beside flashx's forward as the plan picks it, its
tl kernel (the Gluon route switched off for the call), FA2 and cuDNN, in one process.

Run it under a timeout: a wrong barrier protocol hangs rather than fails.

    timeout 300 python benchmarks/gluon_forward_check.py [--quick]
"""
import argparse
import math
import sys

import numpy as np
import torch
import triton

import flashx.torch as ft
from flashx.core import gluon_forward, runtime

# name: (BLOCK_N, STAGES, OVERLAP, CONSUMER_REGS, PRODUCER_REGS)
VARIANTS = {
    "pp": (128, 2, False, 200, 80),
    "pp-n64s4": (64, 4, False, 200, 80),
    "ov-n64s3": (64, 3, True, 200, 80),
    "ov-n64s4": (64, 4, True, 200, 80),
    "ov-n128s2": (128, 2, True, 240, 24),
}


def launch_torch(q, k, v, variant, causal=False, bottom_right=True):
    """q (B, Nq, Hq, D), k / v (B, Nkv, Hkv, D): (out, lse [B, Hq, Nq])."""
    block_n, stages, overlap, cregs, pregs = VARIANTS[variant]
    b, nq, hq, d = q.shape
    out = torch.empty_like(q)
    lse = torch.empty((b, hq, nq), dtype=torch.float32, device=q.device)
    gluon_forward.gluon_attention_forward_kernel[(triton.cdiv(nq, 128), hq, b)](
        q, k, v, d ** -0.5, int(bottom_right), nq, k.shape[1], hq // k.shape[2],
        *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3], *lse.stride(),
        out, lse,
        HEAD_DIM=d, BLOCK_M=128, BLOCK_N=block_n, LIMIT_RIGHT=causal, STRIDE_ALIGN=8, STAGES=stages,
        OVERLAP=overlap, PRODUCER_WARPS=4, PRODUCER_REGS=pregs, CONSUMER_REGS=cregs, num_warps=4,
    )
    return out, lse


def launch_jax(q, k, v, variant, causal=False):
    import jax
    import jax.numpy as jnp
    import jax_triton as jt

    from flashx.jax import gluon

    assert gluon.install(), "this jax-triton's kernel builder could not be wrapped for Gluon"
    block_n, stages, overlap, cregs, pregs = VARIANTS[variant]
    b, nq, hq, d = q.shape
    nkv, hkv = k.shape[1], k.shape[2]
    qs = (nq * hq * d, hq * d, d)
    ks = (nkv * hkv * d, hkv * d, d)
    return jt.triton_call(
        q, k, v, d ** -0.5, 1, nq, nkv, hq // hkv, *qs, *ks, *ks, *qs, hq * nq, nq, 1,
        kernel=gluon_forward.gluon_attention_forward_kernel,
        out_shape=(jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((b, hq, nq), jnp.float32)),
        grid=(math.ceil(nq / 128), hq, b), num_warps=4, num_stages=1,
        HEAD_DIM=d, BLOCK_M=128, BLOCK_N=block_n, LIMIT_RIGHT=causal, STRIDE_ALIGN=8, STAGES=stages,
        OVERLAP=overlap, PRODUCER_WARPS=4, PRODUCER_REGS=pregs, CONSUMER_REGS=cregs,
    )


def reference(q, k, v, causal, bottom_right=True):
    """float64 attention and lse on (B, N, H, D) tensors; GQA by repeating K/V heads."""
    q, k, v = (x.double().transpose(1, 2) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    if causal:
        nq, nkv = s.shape[-2:]
        i = torch.arange(nq, device=s.device)[:, None] + (nkv - nq if bottom_right else 0)
        s = s.masked_fill(torch.arange(nkv, device=s.device)[None, :] > i, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.nan_to_num(torch.exp(s - lse[..., None]))
    return (p @ v).transpose(1, 2), lse


def check(quick: bool, torch_side: bool, jax_side: bool) -> int:
    torch.manual_seed(0)
    failures = 0
    shapes = [  # (B, Nq, Nkv, Hq, Hkv, D, causal)
        (2, 1000, 1000, 3, 3, 128, False), (2, 1000, 1000, 3, 3, 128, True), (1, 333, 1111, 4, 2, 128, True),
        (1, 777, 300, 2, 1, 128, True), (2, 517, 517, 3, 1, 64, False), (1, 700, 900, 2, 2, 64, True),
    ]
    variants = ["ov-n64s3"] if quick else list(VARIANTS)
    if not torch_side:
        variants = []
    for (b, nq, nkv, hq, hkv, d, causal) in shapes:
        q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, nkv, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        ref, ref_lse = reference(q, k, v, causal)
        rows = ref_lse.isfinite()
        for variant in variants:
            out, lse = launch_torch(q, k, v, variant, causal)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            lse_err = (lse.double() - ref_lse)[rows].abs().max().item()
            lse_inf_ok = bool((lse[~rows] == float("-inf")).all())
            ok = err < 1e-2 and lse_err < 1e-2 and lse_inf_ok and bool(out.isfinite().all())
            failures += not ok
            print(f"torch {variant:10s} B={b} Nq={nq} Nkv={nkv} Hq={hq} Hkv={hkv} D={d} causal={causal}: "
                  f"rel err {err:.1e} lse err {lse_err:.1e} empty rows {int((~rows).sum())} {'OK' if ok else 'WRONG'}",
                  flush=True)
        if not jax_side:
            continue
        try:
            import jax
            import jax.numpy as jnp

            arrays = [jnp.asarray(x.float().cpu().numpy()).astype(jnp.bfloat16) for x in (q, k, v)]
            variant = "ov-n64s3"
            out, lse = jax.jit(lambda a, b_, c: launch_jax(a, b_, c, variant, causal))(*arrays)
            out = torch.from_numpy(np.asarray(out.astype(jnp.float32))).double()
            err = ((out - ref.cpu()).norm() / ref.norm().cpu()).item()
            ok = err < 1e-2
            print(f"jax   {variant:10s} B={b} Nq={nq} Nkv={nkv} causal={causal}: rel err {err:.1e} {'OK' if ok else 'WRONG'}",
                  flush=True)
        except Exception as e:  # noqa: BLE001
            ok = False
            print(f"jax: FAILED {type(e).__name__}: {str(e)[:400]}", flush=True)
        failures += not ok
    return failures


def without_gluon(fn):
    """fn with the plan's Gluon route off (runtime.hopper_gluon is asked on every call)."""
    def run():
        saved, runtime._hopper_gluon = runtime._hopper_gluon, False
        try:
            return fn()
        finally:
            runtime._hopper_gluon = saved
    return run


def bench(quick: bool) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rows = []
    shapes = [(4, 4096, 16, 128), (1, 16384, 16, 128), (16, 1024, 16, 128), (4, 4096, 32, 64)]
    for (b, n, h, d) in shapes[:2] if quick else shapes:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        for causal in (False, True):
            flops = 4 * b * h * n * n * d / (2 if causal else 1)
            systems = {f"gluon {name}": (lambda name=name: launch_torch(q, k, v, name, causal)) for name in VARIANTS}
            systems["flashx"] = lambda: ft.attention(q, k, v, causal=causal)
            systems["flashx tl"] = without_gluon(lambda: ft.attention(q, k, v, causal=causal))

            def sdpa(backend):
                def run():
                    with sdpa_kernel(backend):
                        return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                return run
            systems["FA2"] = sdpa(SDPBackend.FLASH_ATTENTION)
            systems["cuDNN"] = sdpa(SDPBackend.CUDNN_ATTENTION)
            for name, fn in systems.items():
                try:
                    ms = triton.testing.do_bench(fn, warmup=25, rep=100)
                    rows.append((f"B={b} N={n} H={h} D={d} {'causal' if causal else 'full'}", name, flops / ms / 1e9))
                except Exception as e:  # noqa: BLE001
                    rows.append((f"B={b} N={n} H={h} D={d} {'causal' if causal else 'full'}", name, float("nan")))
                    print(f"{name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
    names = list(dict.fromkeys(r[1] for r in rows))
    cases = list(dict.fromkeys(r[0] for r in rows))
    table = {(c, n): t for c, n, t in rows}
    print("| case | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for c in cases:
        print(f"| {c} | " + " | ".join(f"{table.get((c, n), float('nan')):.0f}" for n in names) + " |")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("torch", "jax"), help="check one frontend only, and skip the timings")
    args = parser.parse_args()
    failures = check(args.quick, args.only != "jax", args.only != "torch")
    print(f"correctness failures: {failures}", flush=True)
    if args.only is None:
        bench(args.quick)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
