#!/usr/bin/env python3
"""flashx demo: one Triton attention kernel, called from PyTorch, from JAX, and on NumPy arrays.

For each framework that is installed, runs flashx on random inputs of a few shapes (GQA with
causal masking, cross-attention with Nq != Nkv and Dv != D, MQA with causal Nq < Nkv) beside
the framework's own attention (torch SDPA; jax.nn.dot_product_attention, implementation="xla")
and prints relative errors against those and against a float64 NumPy reference. Then shows
`flashx.attention` on NumPy arrays (zero-copy through DLPack), a decode step over a paged KV
cache, gradients through a causal sliding window in both frameworks, and, where a CUDA GPU is in
use, times flashx against SDPA on one larger shape.

Without a GPU the kernels run through Triton's interpreter on the CPU: slow, so the shapes here
are tiny (the whole demo takes well under a minute). Exits non-zero if any flashx result is off.

    python examples/demo.py
"""
from __future__ import annotations

import functools
import importlib.util
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass

# torch and JAX may share the GPU in this process: keep JAX from taking most of its memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np

import flashx  # before triton: flashx decides here whether kernels are compiled or interpreted
from flashx.core import runtime

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_JAX = importlib.util.find_spec("jax") is not None
ON_CPU = runtime.INTERPRETER  # no GPU in use: kernels run through Triton's interpreter

# The interpreter's one-time "slow on the CPU" warning is expected here.
warnings.filterwarnings("ignore", message="flashx: no GPU in use", category=RuntimeWarning)


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    seqlen_q: int
    seqlen_kv: int
    heads_q: int
    heads_kv: int
    head_dim: int
    head_dim_v: int
    causal: bool
    dtype: str  # "bfloat16", "float16", "float32"

    def shapes(self):
        """q, k, v shapes in layout "bnhd": (B, N, H, D)."""
        return (
            (self.batch, self.seqlen_q, self.heads_q, self.head_dim),
            (self.batch, self.seqlen_kv, self.heads_kv, self.head_dim),
            (self.batch, self.seqlen_kv, self.heads_kv, self.head_dim_v),
        )


# Tiny and odd-sized on purpose: the interpreter runs one 16x16 tile at a time.
CASES = [
    Case("GQA 8q:2kv heads, causal", batch=2, seqlen_q=37, seqlen_kv=37, heads_q=8, heads_kv=2,
         head_dim=64, head_dim_v=64, causal=True, dtype="bfloat16"),
    Case("cross-attn Nq!=Nkv, Dv!=D", batch=2, seqlen_q=21, seqlen_kv=45, heads_q=4, heads_kv=4,
         head_dim=32, head_dim_v=48, causal=False, dtype="float16"),
    Case("MQA, causal Nq<Nkv, Dv<D", batch=1, seqlen_q=19, seqlen_kv=50, heads_q=4, heads_kv=1,
         head_dim=64, head_dim_v=40, causal=True, dtype="float32"),
]

# flashx's error against float64 may be this, or a few times the framework's own, whichever is larger.
TOLERANCE = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}
FAILURES: list = []


def bottom_right_mask(seqlen_q: int, seqlen_kv: int) -> np.ndarray:
    """(Nq, Nkv) bool, True where query i sees key j: j <= i + Nkv - Nq (flashx's causal)."""
    return np.arange(seqlen_kv)[None, :] <= np.arange(seqlen_q)[:, None] + (seqlen_kv - seqlen_q)


def reference(q, k, v, causal: bool):
    """float64 NumPy attention, layout "bnhd": (out (B, Nq, Hq, Dv), lse (B, Hq, Nq))."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    group = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(bottom_right_mask(q.shape[1], k.shape[1]), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    lse = (m + np.log(p.sum(-1, keepdims=True)))[..., 0]
    out = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)
    return out, lse


def rel_err(x, ref) -> float:
    x, ref = np.asarray(x, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-300))


def report(framework: str, case: Case, inputs, out, native, lse, note: str = "") -> None:
    """One table row; `inputs` the float32 q, k, v; `out`, `native`, `lse` float NumPy arrays ("bnhd")."""
    ref_out, ref_lse = reference(*inputs, case.causal)
    e_flashx, e_native, e_vs = rel_err(out, ref_out), rel_err(native, ref_out), rel_err(out, native)
    e_lse = float(np.max(np.abs(np.asarray(lse, np.float64) - ref_lse)))
    ok = bool(e_flashx <= max(3 * e_native, TOLERANCE[case.dtype]) and e_lse < 1e-3)  # NaN fails
    if not ok:
        FAILURES.append(f"{framework}: {case.name}")
    print(f"  {case.name:<27} {case.dtype:<9} {e_vs:>13.1e} {e_flashx:>14.1e} {e_native:>14.1e} {e_lse:>10.1e}  "
          f"{'ok' if ok else 'CHECK'}{note}")


def failed(framework: str, case: Case, err: BaseException) -> None:
    FAILURES.append(f"{framework}: {case.name}")
    print(f"  {case.name:<27} {case.dtype:<9} FAILED: {type(err).__name__}: {err}")


def table_header(native: str) -> None:
    print(f"  {'case':<27} {'dtype':<9} {'flashx~' + native:>13} {'flashx~fp64':>14} {native + '~fp64':>14} "
          f"{'lse abs':>10}")


@functools.lru_cache(maxsize=None)
def make_inputs(case: Case, seed: int) -> tuple:
    """float32 NumPy q, k, v (layout "bnhd"), rounded to the case's dtype so every party sees the same values."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in case.shapes()]
    if case.dtype == "float16":
        arrays = [a.astype(np.float16).astype(np.float32) for a in arrays]
    elif case.dtype == "bfloat16":  # round to nearest even on the top 16 bits
        arrays = [_round_bf16(a) for a in arrays]
    for a in arrays:
        a.flags.writeable = False  # shared by both frameworks' runs (cached)
    return tuple(arrays)


def _round_bf16(a: np.ndarray) -> np.ndarray:
    bits = a.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


# ------------------------------------------------------------------------------------------------
# PyTorch


def torch_part() -> None:
    import torch
    import torch.nn.functional as F

    import flashx.torch

    device = "cpu" if ON_CPU else "cuda"
    print(f"\n== PyTorch {torch.__version__} ({device}): flashx.torch.attention vs torch SDPA ==")

    def sdpa(q, k, v, causal):
        """Native attention in (B, N, H, D) layout; bottom-right causal through an explicit mask if Nq != Nkv."""
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # SDPA wants (B, H, N, D): views, no copies
        nq, nkv = q.shape[2], k.shape[2]
        mask = None
        if causal and nq != nkv:  # SDPA's is_causal is top-left aligned; flashx's is bottom-right
            mask = torch.from_numpy(bottom_right_mask(nq, nkv)).to(q.device)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal and mask is None, enable_gqa=q.shape[1] != k.shape[1]
        )
        return out.transpose(1, 2)

    table_header("SDPA")
    for i, case in enumerate(CASES):
        arrays = make_inputs(case, seed=i)
        try:
            q, k, v = (torch.tensor(a, device=device, dtype=getattr(torch, case.dtype)) for a in arrays)
            out, lse = flashx.torch.attention(q, k, v, causal=case.causal, return_lse=True)
            native = sdpa(q, k, v, case.causal)
            report("torch", case, arrays, out.float().cpu().numpy(), native.float().cpu().numpy(), lse.cpu().numpy())
        except Exception as err:  # noqa: BLE001 (shown, counted, and the demo goes on)
            failed("torch", case, err)

    # The same data in layout "bhnd" (SDPA's own): strided views, no copies, the same answer.
    case = CASES[0]
    q, k, v = (torch.tensor(a, device=device) for a in make_inputs(case, seed=0))
    a = flashx.torch.attention(q, k, v, causal=True)
    b = flashx.torch.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True, layout="bhnd")
    print(f"  layout 'bhnd' on transposed views == layout 'bnhd': max abs diff "
          f"{(a - b.transpose(1, 2)).abs().max().item():.1e}")

    # Bottom-right causal alignment, read off the kernel itself: with equal scores every query
    # spreads its weight evenly over the keys it sees, and v = identity shows which ones.
    nq, nkv = 2, 4
    q = torch.zeros(1, nq, 1, 16, device=device)
    k = torch.zeros(1, nkv, 1, 16, device=device)
    v = torch.eye(nkv, device=device).reshape(1, nkv, 1, nkv)
    weights = flashx.torch.attention(q, k, v, causal=True)[0, :, 0].cpu()
    print(f"  causal, Nq={nq}, Nkv={nkv} (bottom-right: query i sees key j iff j <= i + Nkv - Nq):")
    for i in range(nq):
        seen = [j for j in range(nkv) if weights[i, j] > 0]
        print(f"    query {i} sees keys {seen}  (weights {', '.join(f'{w:.2f}' for w in weights[i].tolist())})")

    # Dropout, read off the kernel the same way (v = identity: out is each weight, kept and scaled
    # by 1 / (1 - p), or 0); torch.manual_seed repeats the mask.
    n, p = 64, 0.25
    q, k = (torch.randn(1, n, 2, 16, device=device) for _ in range(2))
    v = torch.eye(n, device=device)[None, :, None, :].expand(1, n, 2, n)
    torch.manual_seed(0)
    dropped = flashx.torch.attention(q, k, v, dropout_p=p)
    torch.manual_seed(0)
    again = flashx.torch.attention(q, k, v, dropout_p=p)
    full = flashx.torch.attention(q, k, v)
    kept = dropped != 0
    scaled = (dropped[kept] - full[kept] / (1 - p)).abs().max().item()
    ok = abs(kept.float().mean().item() - (1 - p)) < 0.02 and scaled < 1e-5 and torch.equal(dropped, again)
    print(f"  dropout_p={p}: kept {kept.float().mean().item():.3f} of the weights, each scaled by 1/(1-p) "
          f"(max abs diff {scaled:.1e}), the same mask after torch.manual_seed: {torch.equal(dropped, again)}  "
          f"{'ok' if ok else 'CHECK'}")


# ------------------------------------------------------------------------------------------------
# JAX


def jax_part() -> None:
    import jax
    import jax.numpy as jnp

    import flashx.jax

    backend = jax.default_backend()
    print(f"\n== JAX {jax.__version__} ({backend}): flashx.jax.attention (in jax.jit) vs "
          "jax.nn.dot_product_attention(implementation='xla') ==")
    if ON_CPU and not HAVE_TORCH:
        print("  skipped: on the CPU, Triton's interpreter runs on torch tensors; install torch")
        return
    if not ON_CPU and backend == "cpu":
        print("  skipped: this JAX has no GPU backend, and flashx compiles its kernels for the GPU here")
        return
    if not ON_CPU and importlib.util.find_spec("jax_triton") is None:
        print("  skipped: the JAX GPU path needs jax-triton (pip install jax-triton)")
        return

    @functools.partial(jax.jit, static_argnames=("causal",))
    def native(q, k, v, *, causal):
        # jax.nn.dot_product_attention wants v shaped like k: zero-pad the smaller head dim
        # (zeros add nothing to q.k, and extra v columns are sliced off), keep scale = 1/sqrt(D).
        d, dv = q.shape[-1], v.shape[-1]
        width = max(d, dv)
        pad = lambda x: jnp.pad(x, [(0, 0)] * 3 + [(0, width - x.shape[-1])])  # noqa: E731
        nq, nkv = q.shape[1], k.shape[1]
        mask = None
        if causal and nq != nkv:  # is_causal=True is top-left aligned; flashx's causal is bottom-right
            mask = jnp.asarray(bottom_right_mask(nq, nkv))[None, None]
        out = jax.nn.dot_product_attention(
            pad(q), pad(k), pad(v), mask=mask, is_causal=causal and mask is None, scale=1 / math.sqrt(d),
            implementation="xla",
        )
        return out[..., :dv]

    table_header("jax.nn")
    as_np = lambda x: np.asarray(x.astype(jnp.float32))  # noqa: E731
    for i, case in enumerate(CASES):
        arrays = make_inputs(case, seed=i)
        try:
            q, k, v = (jnp.asarray(a).astype(case.dtype) for a in arrays)
            attend = jax.jit(functools.partial(flashx.jax.attention, causal=case.causal, return_lse=True))
            out, lse = attend(q, k, v)
            note = ""
            if backend == "cpu" and case.dtype == "float16":
                # XLA:CPU has no float16 dot with float32 accumulation ("F16_F16_F32"): the native
                # runs on float32 copies and rounds its output to float16.
                upcast = (x.astype(jnp.float32) for x in (q, k, v))
                ref = native(*upcast, causal=case.causal).astype(jnp.float16)
                note = "  (jax.nn in fp32 on XLA:CPU)"
            else:
                ref = native(q, k, v, causal=case.causal)
            report("jax", case, arrays, as_np(out), as_np(ref), as_np(lse), note)
        except Exception as err:  # noqa: BLE001 (shown, counted, and the demo goes on)
            failed("jax", case, err)

    # jax.vmap over 3 independent calls: one launch of 3x the batch, equal to calling each.
    case = CASES[0]
    q, k, v = (jnp.stack([jnp.asarray(make_inputs(case, seed=10 + s)[i]) for s in range(3)]) for i in range(3))
    mapped = jax.jit(jax.vmap(functools.partial(flashx.jax.attention, causal=True)))(q, k, v)
    each = jnp.stack([flashx.jax.attention(q[s], k[s], v[s], causal=True) for s in range(3)])
    diff = float(jnp.abs(mapped - each).max())
    print(f"  jax.vmap over 3 calls {tuple(q.shape)} == each call: max abs diff {diff:.1e}  {'ok' if diff < 1e-5 else 'CHECK'}")


# ------------------------------------------------------------------------------------------------
# NumPy through DLPack


def numpy_part() -> None:
    print("\n== NumPy: flashx.attention on numpy arrays (zero-copy through DLPack and the torch frontend) ==")
    if not HAVE_TORCH:
        print("  skipped: other DLPack producers go through torch; install torch")
        return
    case = CASES[2]
    q, k, v = (a.astype(np.float32) for a in make_inputs(case, seed=7))
    try:
        out, lse = flashx.attention(q, k, v, causal=True, return_lse=True)
    except ValueError as err:  # NumPy arrays live on the CPU; with a GPU flashx compiles for the GPU
        print(f"  not run with a GPU in use ({err})")
        return
    ref_out, ref_lse = reference(q, k, v, causal=True)
    err = rel_err(out, ref_out)
    ok = err < TOLERANCE["float32"] and np.max(np.abs(lse - ref_lse)) < 1e-4
    if not ok:
        FAILURES.append("numpy: flashx.attention")
    print(f"  q {q.shape} {q.dtype}, k {k.shape}, v {v.shape}, causal -> {type(out).__module__}.{type(out).__name__} "
          f"{out.shape} {out.dtype}, lse {lse.shape} {lse.dtype}")
    print(f"  rel err vs float64 reference: {err:.1e}  {'ok' if ok else 'CHECK'}")


# ------------------------------------------------------------------------------------------------
# Decoding over a paged KV cache


def decode_part() -> None:
    """One decode step per sequence over a paged cache: 3 sequences of different lengths, their
    pages shuffled in one shared pool, in both frameworks, against float64 on the gathered keys."""
    print("\n== Decoding: one query per sequence over a paged KV cache (block_table, seqused_k) ==")
    batch, heads_q, heads_kv, d, page, pages_per_seq = 3, 8, 2, 32, 16, 4
    rng = np.random.default_rng(11)
    pool = 2 + batch * pages_per_seq
    k_cache, v_cache = (rng.standard_normal((pool, page, heads_kv, d)).astype(np.float32) for _ in range(2))
    table = rng.permutation(pool)[:batch * pages_per_seq].reshape(batch, pages_per_seq).astype(np.int32)
    lengths = np.array([64, 23, 41], np.int32)  # each sequence's filled cache rows
    q = rng.standard_normal((batch, 1, heads_q, d)).astype(np.float32)
    want = np.concatenate([reference(q[b:b + 1], k_cache[table[b]].reshape(1, -1, heads_kv, d)[:, :lengths[b]],
                                     v_cache[table[b]].reshape(1, -1, heads_kv, d)[:, :lengths[b]], causal=True)[0]
                           for b in range(batch)])
    runs = []
    if HAVE_TORCH:
        import torch

        import flashx.torch

        device = "cpu" if ON_CPU else "cuda"
        args = [torch.from_numpy(x).to(device) for x in (q, k_cache, v_cache, table, lengths)]
        runs.append(("torch", lambda: flashx.torch.attention(*args[:3], block_table=args[3], seqused_k=args[4],
                                                             causal=True).cpu().numpy()))
    if HAVE_JAX and (ON_CPU and HAVE_TORCH or not ON_CPU and importlib.util.find_spec("jax_triton")):
        import jax

        import flashx.jax

        step = jax.jit(functools.partial(flashx.jax.attention, causal=True))
        runs.append(("jax", lambda: np.asarray(step(*(jax.numpy.asarray(x) for x in (q, k_cache, v_cache)),
                                                     block_table=jax.numpy.asarray(table),
                                                     seqused_k=jax.numpy.asarray(lengths)))))
    print(f"  cache {k_cache.shape} in pages of {page} rows, block table {table.shape}, lengths {lengths.tolist()}, "
          f"q {q.shape} (GQA {heads_q}:{heads_kv})")
    for name, run in runs:
        try:
            err = rel_err(run(), want)
        except Exception as exc:  # noqa: BLE001 (shown, counted, and the demo goes on)
            FAILURES.append(f"{name}: paged decode")
            print(f"  {name:<6} FAILED: {type(exc).__name__}: {exc}")
            continue
        ok = err < TOLERANCE["float32"]
        if not ok:
            FAILURES.append(f"{name}: paged decode")
        print(f"  {name:<6} rel err vs float64 on the gathered keys: {err:.1e}  {'ok' if ok else 'CHECK'}")


# ------------------------------------------------------------------------------------------------
# Speed (GPU only)


def speed_part() -> None:
    if ON_CPU or not HAVE_TORCH:
        print("\n== Speed: skipped (no CUDA GPU in use; the interpreter says nothing about speed) ==")
        return
    import torch
    import torch.nn.functional as F
    from triton.testing import do_bench

    import flashx.torch

    b, h, n, d, causal = 4, 16, 4096, 128, True
    flops = 4 * b * h * n * n * d / (2 if causal else 1)
    print(f"\n== Speed on {torch.cuda.get_device_name()}: B={b} H={h} N={n} D={d} bf16 causal, "
          "layout (B, H, N, D) ==")
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    runs = {
        "flashx (torch)": lambda: flashx.torch.attention(q, k, v, causal=causal, layout="bhnd"),
        "torch SDPA": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
    }
    for name, fn in runs.items():
        try:
            ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
            print(f"  {name:<16} {ms:8.3f} ms  {flops / ms / 1e9:7.1f} TFLOP/s")
        except Exception as err:  # noqa: BLE001
            print(f"  {name:<16} failed: {type(err).__name__}: {err}")
    if HAVE_JAX and importlib.util.find_spec("jax_triton") is not None:
        try:
            import jax

            import flashx.jax

            if jax.default_backend() != "gpu":
                raise RuntimeError(f"JAX backend is {jax.default_backend()}")
            torch.cuda.synchronize()
            jq, jk, jv = (jax.dlpack.from_dlpack(t) for t in (q, k, v))  # the same buffers, no copy
            fn = jax.jit(functools.partial(flashx.jax.attention, causal=causal, layout="bhnd"))
            for _ in range(3):
                fn(jq, jk, jv).block_until_ready()
            times = []
            for _ in range(20):
                t0 = time.perf_counter()
                for _ in range(5):
                    out = fn(jq, jk, jv)
                out.block_until_ready()
                times.append((time.perf_counter() - t0) / 5)
            ms = sorted(times)[len(times) // 2] * 1e3
            print(f"  {'flashx (jax)':<16} {ms:8.3f} ms  {flops / ms / 1e9:7.1f} TFLOP/s")
        except Exception as err:  # noqa: BLE001
            print(f"  {'flashx (jax)':<16} failed: {type(err).__name__}: {err}")
    print("  (full comparison with FA2 and cuDNN: python benchmarks/bench_forward.py)")


GRAD_CASE = Case("GQA 4q:2kv, causal window", batch=1, seqlen_q=29, seqlen_kv=41, heads_q=4, heads_kv=2,
                 head_dim=32, head_dim_v=32, causal=True, dtype="float32")  # jax.nn needs Dv == D
GRAD_WINDOW = (9, -1)  # with causal: each query sees itself and the 9 keys before its diagonal


def window_mask(case: Case) -> np.ndarray:
    """[Nq, Nkv] bool: bottom-right causal with a left window of GRAD_WINDOW[0] keys."""
    i = np.arange(case.seqlen_q)[:, None] + case.seqlen_kv - case.seqlen_q
    j = np.arange(case.seqlen_kv)[None, :]
    return (j <= i) & (j >= i - GRAD_WINDOW[0])


def gradient_part() -> None:
    """dq, dk, dv through flashx (torch autograd and jax.grad) against each framework's own
    attention with the same explicit mask, in float64."""
    case = GRAD_CASE
    q, k, v = make_inputs(case, seed=11)
    weights = np.random.default_rng(12).standard_normal((case.batch, case.seqlen_q, case.heads_q, case.head_dim_v))
    mask = window_mask(case)
    print(f"\n== Gradients: {case.name}, window={GRAD_WINDOW}, {case.dtype}: loss = sum(out * w) ==")
    print(f"  {'framework':<12} {'dq err':>10} {'dk err':>10} {'dv err':>10}   (flashx vs the framework's float64 attention)")
    if HAVE_TORCH:
        import torch
        import torch.nn.functional as F

        import flashx.torch

        device = "cpu" if ON_CPU else "cuda"
        t = [torch.tensor(x, device=device, requires_grad=True) for x in (q, k, v)]
        w = torch.tensor(weights, device=device, dtype=torch.float32)
        out = flashx.torch.attention(*t, causal=True, window=GRAD_WINDOW)
        got = torch.autograd.grad((out * w).sum(), t)
        ref_in = [x.detach().double().transpose(1, 2).requires_grad_() for x in t]  # SDPA's (B, H, N, D)
        ref = F.scaled_dot_product_attention(*ref_in, attn_mask=torch.tensor(mask, device=device), enable_gqa=True)
        want = torch.autograd.grad((ref.transpose(1, 2) * w.double()).sum(), ref_in)
        errs = [rel_err(g.double().cpu().numpy(), r.transpose(1, 2).cpu().numpy()) for g, r in zip(got, want)]
        grade("torch", errs)
    if HAVE_JAX:
        import jax
        import jax.numpy as jnp

        import flashx.jax

        w32 = jnp.asarray(weights, jnp.float32)
        loss = jax.jit(jax.grad(
            lambda q, k, v: jnp.sum(flashx.jax.attention(q, k, v, causal=True, window=GRAD_WINDOW) * w32), argnums=(0, 1, 2)))
        got = loss(*(jnp.asarray(x) for x in (q, k, v)))
        with jax.enable_x64(True):  # float64 only for the reference (jax.nn handles GQA itself)
            w64 = jnp.asarray(weights, jnp.float64)
            ref_loss = jax.grad(lambda q, k, v: jnp.sum(jax.nn.dot_product_attention(
                q, k, v, mask=jnp.asarray(mask)[None, None], implementation="xla") * w64), argnums=(0, 1, 2))
            dq, dk, dv = (np.asarray(g) for g in ref_loss(*(x.astype(np.float64) for x in (q, k, v))))
        grade("jax", [rel_err(np.asarray(g, np.float64), r) for g, r in zip(got, (dq, dk, dv))])


def grade(framework: str, errs: list) -> None:
    ok = all(e <= 1e-4 for e in errs)
    if not ok:
        FAILURES.append(f"{framework} gradients")
    print(f"  {framework:<12} " + " ".join(f"{e:>10.1e}" for e in errs) + f"   {'ok' if ok else 'CHECK'}")


def main() -> int:
    start = time.perf_counter()
    where = "CPU, Triton interpreter (slow; tiny shapes)" if ON_CPU else "GPU, compiled kernels"
    print(f"flashx {flashx.__version__} on {where}")
    print("columns: relative Frobenius errors (flashx vs the framework's attention, each vs a float64 NumPy "
          "reference), max abs error of flashx's lse")
    for name, have, part in (("PyTorch", HAVE_TORCH, torch_part), ("JAX", HAVE_JAX, jax_part)):
        if have:
            part()
        else:
            print(f"\n== {name}: skipped ({name} is not installed) ==")
    numpy_part()
    decode_part()
    gradient_part()
    speed_part()
    print(f"\ndone in {time.perf_counter() - start:.1f} s")
    if FAILURES:
        print(f"flashx results off in: {'; '.join(FAILURES)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
