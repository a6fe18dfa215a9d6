"""The Gluon forward's variants (flashx/core/gluon_forward.py), launched directly rather than
through the plan (whose GLUON_FORWARD_ROUTE picks one by head dim, causality and Nkv): correctness of each against
float64 on odd shapes (torch; JAX for one per head dim, or each of --variants), then TFLOP/s beside flashx's forward as
the plan picks it, its tl kernel (the Gluon route switched off for the call), FA2 and cuDNN, in
one process.

Run it under a timeout: a wrong barrier protocol hangs rather than fails.

    timeout 300 python benchmarks/gluon_forward_check.py [--quick] [--d 128 64 256] [--only torch|jax]
        [--timings-only] [--variants pp pp-qp ...]

Every variant at every head dim takes longer than one 10-minute GPU call: split by --d and
--variants (the torch checks of all of them took over 170 s on the H200).
"""
import argparse
import sys
from typing import NamedTuple, Optional

import numpy as np
import torch
import triton

import flashx.torch as ft
from flashx.core import gluon_forward, plan, runtime

class Variant(NamedTuple):
    head_dim: int
    block_m: int  # 64 rows a consumer: 128 = two consumers, 192 = three
    block_n: int
    stages: int
    turns: bool
    persistent: bool
    consumer_regs: int
    producer_regs: int
    q_by_producer: bool = False  # the producer copies each tile's Q (two buffers) with cp.async
    tma: bool = False  # Q, K and V by TMA (needs q_by_producer): torch passes host descriptors, JAX's are built on the device
    producer_warps: int = 4
    trim: bool = False  # TRIM_DIAGONAL: each consumer only the key blocks its rows see (a half diagonal block)
    overlap: bool = False  # OVERLAP: block j's softmax under block j - 1's O += P V, in each consumer
    tma_store: bool = False  # TMA_STORE: O leaves by TMA from a shared buffer a consumer
    across: bool = False  # ACROSS_TILES: a tile's epilogue under the next tile's first S (persistent, overlap)


VARIANTS = {
    # D = 128; for launchers without descriptors (JAX) the plan routes "pp" from 2k keys and
    # "pp-qp-persist" below (non-causal), by these names; GLUON_TMA_ROUTE (torch) the TMA ones.
    "pp": Variant(128, 128, 128, 2, False, False, 200, 80),
    "pp-turns": Variant(128, 128, 128, 2, True, False, 200, 80),
    "pp-s3-turns": Variant(128, 128, 128, 3, True, False, 200, 80),
    "pp-persist": Variant(128, 128, 128, 2, False, True, 216, 56),
    "pp-turns-persist": Variant(128, 128, 128, 2, True, True, 216, 56),
    # Q by the producer (session 13; first run 2026-11-30 17:09): the next tile's Q arrives during this one.
    "pp-qp": Variant(128, 128, 128, 2, False, False, 200, 80, True),
    "pp-qp-persist": Variant(128, 128, 128, 2, False, True, 192, 96, True),
    "pp-turns-qp-persist": Variant(128, 128, 128, 2, True, True, 192, 96, True),
    # TMA (session 14, first run in 15): one producer thread issues each copy, so the producer needs
    # few registers and the consumers may take more. Offline (sm_90): no stack at 240 / 32; three
    # stages at D = 128 would need 257 KB of shared memory with Q's two buffer sets. Routed in
    # v0.15-v0.18: pp-tma-persist, pp-tma-turns-persist (OVERLAP tiles since v0.19), and
    # d64-c3-turns-tma-persist (still).
    "pp-tma": Variant(128, 128, 128, 2, False, False, 200, 80, True, True),
    "pp-tma-c240": Variant(128, 128, 128, 2, False, False, 240, 32, True, True),
    "pp-tma-persist": Variant(128, 128, 128, 2, False, True, 232, 48, True, True),
    "pp-tma-turns-c240": Variant(128, 128, 128, 2, True, False, 240, 32, True, True),
    "pp-tma-turns-persist": Variant(128, 128, 128, 2, True, True, 232, 48, True, True),
    # 64-key tiles for short causal calls (session 14): half the diagonal block's wasted columns.
    "pp-n64-qp-persist": Variant(128, 128, 64, 2, False, True, 192, 96, True),
    "pp-n64-s3-qp-persist": Variant(128, 128, 64, 3, False, True, 192, 96, True),
    "pp-n64-s3-qp": Variant(128, 128, 64, 3, False, False, 200, 80, True),
    # Trimmed diagonals (session 18): a consumer computes only the key blocks its own 64 rows see,
    # so a 128-row causal tile's first consumer runs its diagonal block on 64 keys (BLOCK_N = 128)
    # or skips it (BLOCK_N = 64). First run 2026-11-30: +1-3% at 1k causal; the persistent 128-key
    # forms read shared memory out of bounds from torch: Triton's ptxas 12.8 miscompiled the half
    # step as a separate step after the loop (NOTES v0.18). With the half step inside the loop all
    # five passed from torch and JAX (2026-12-01, v0.19). "d256-tma-trim" was routed until its
    # TMA-store form, "d256-tma-trim-ts", replaced it (v0.21).
    "pp-tma-persist-trim": Variant(128, 128, 128, 2, False, True, 232, 48, True, True, trim=True),
    "d64-tma-persist-trim": Variant(64, 128, 128, 2, False, True, 232, 48, True, True, trim=True),
    "pp-tma-c240-trim": Variant(128, 128, 128, 2, False, False, 240, 32, True, True, trim=True),
    "d256-tma-trim": Variant(256, 128, 64, 2, False, False, 240, 24, True, True, trim=True),
    "d256-tma-persist-trim": Variant(256, 128, 64, 2, False, True, 240, 24, True, True, trim=True),
    # The trimmed diagonal with O stored by TMA (session 20, prepared): TMA_STORE bought 13% at
    # D = 128 1k causal; the trimmed tiles were level with OVERLAP there before it.
    "pp-tma-c240-trim-ts": Variant(128, 128, 128, 2, False, False, 240, 32, True, True, trim=True, tma_store=True),
    "pp-tma-persist-trim-ts": Variant(128, 128, 128, 2, False, True, 232, 48, True, True, trim=True,
                                      tma_store=True),
    "d64-tma-persist-trim-ts": Variant(64, 128, 128, 2, False, True, 232, 48, True, True, trim=True, tma_store=True),
    "d64-tma-trim-ts": Variant(64, 128, 128, 2, False, False, 232, 48, True, True, trim=True, tma_store=True),
    # The trimmed diagonal under OVERLAP (session 24, prepared): full blocks overlapped, the half
    # block a plain step after them; at D = 128 1k causal OVERLAP (pp-tma-c240-ovl-ts) leads, at
    # 512 keys the trimmed tile (pp-tma-persist-trim-ts), and tl at 256.
    "pp-tma-c240-ovl-trim-ts": Variant(128, 128, 128, 2, False, False, 240, 32, True, True, trim=True,
                                       overlap=True, tma_store=True),
    "pp-tma-persist-ovl-trim-ts": Variant(128, 128, 128, 2, False, True, 232, 48, True, True, trim=True,
                                          overlap=True, tma_store=True),
    # Each consumer's softmax under its previous block's O += P V (session 18; first run
    # 2026-12-01, correct from both frontends, NOTES v0.19): FlashAttention-3's overlap within a
    # warpgroup. Routed: pp-tma-persist-ovl, pp-tma-c240-ovl, d256-tma-persist-ovl.
    "pp-tma-persist-ovl": Variant(128, 128, 128, 2, False, True, 232, 48, True, True, overlap=True),
    "pp-tma-c240-ovl": Variant(128, 128, 128, 2, False, False, 240, 32, True, True, overlap=True),
    # Persistent at 240 / 32 (session 19, prepared): pp-tma-persist-ovl keeps 32 bytes of stack at
    # 232 / 48; persistent tiles also spare JAX's device descriptors a build per tile.
    "pp-tma-c240-persist-ovl": Variant(128, 128, 128, 2, False, True, 240, 32, True, True, overlap=True),
    # O by TMA from a shared buffer a consumer (session 19, prepared; from JAX each consumer builds
    # O's descriptor on the device): the epilogue's stores drain under the next tile, where
    # v0.15's fit put 3.1-4.9 us a wave once a tile against 2.5 us a key block. 224 KiB of shared
    # memory at D = 128 (D = 256 has no room).
    "pp-tma-c240-ovl-ts": Variant(128, 128, 128, 2, False, False, 240, 32, True, True, overlap=True, tma_store=True),
    "pp-tma-persist-ovl-ts": Variant(128, 128, 128, 2, False, True, 232, 48, True, True, overlap=True, tma_store=True),
    "pp-tma-c240-persist-ovl-ts": Variant(128, 128, 128, 2, False, True, 240, 32, True, True, overlap=True,
                                          tma_store=True),
    # Tiles chained (session 19, prepared): each tile's last O += P V is issued with the next
    # tile's first S, and the tile's rows are stored while that S runs (ACROSS_TILES); persistent
    # OVERLAP tiles only; with TMA_STORE too, or without.
    "pp-tma-persist-ovl-x": Variant(128, 128, 128, 2, False, True, 232, 48, True, True, overlap=True, across=True),
    "pp-tma-c240-persist-ovl-x": Variant(128, 128, 128, 2, False, True, 240, 32, True, True, overlap=True,
                                         across=True),
    "pp-tma-c240-persist-ovl-x-ts": Variant(128, 128, 128, 2, False, True, 240, 32, True, True, overlap=True,
                                            tma_store=True, across=True),
    "d256-tma-persist-ovl-x": Variant(256, 128, 64, 2, False, True, 240, 24, True, True, overlap=True, across=True),
    "d64-tma-persist-ovl": Variant(64, 128, 128, 2, False, True, 232, 48, True, True, overlap=True),
    # Three consumers with OVERLAP instead of turns (session 19, prepared; offline: no stack at
    # 160 / 32, 112 KiB): the two-consumer OVERLAP tile trailed the three-consumer turns tile at D = 64.
    "d64-c3-tma-persist-ovl": Variant(64, 192, 128, 2, False, True, 160, 32, True, True, overlap=True),
    "d64-c3-tma-ovl": Variant(64, 192, 128, 2, False, False, 160, 32, True, True, overlap=True),
    # The routed D = 64 tile with O stored by TMA (session 20): TMA_STORE bought 5-15% at D = 128.
    "d64-c3-turns-tma-persist-ts": Variant(64, 192, 128, 2, True, True, 160, 32, True, True, tma_store=True),
    "d64-c3-turns-tma-ts": Variant(64, 192, 128, 2, True, False, 160, 32, True, True, tma_store=True),
    # 256-key blocks at D = 64 (session 22, prepared): half the key-block steps, so half the
    # per-step softmax bookkeeping and barriers, for a 64 x 256 S a consumer (two consumers).
    "d64-tma-persist-n256-ts": Variant(64, 128, 256, 2, False, True, 232, 48, True, True, tma_store=True),
    "d64-tma-persist-n256-trim-ts": Variant(64, 128, 256, 2, False, True, 232, 48, True, True, trim=True,
                                            tma_store=True),
    "d64-tma-n256-ts": Variant(64, 128, 256, 2, False, False, 232, 48, True, True, tma_store=True),
    # D = 64 causal from 2k keys (session 23, prepared): the trimmed diagonal with three consumers
    # (192-row tiles, no turns: a trimmed consumer skips steps), and the two-consumer trimmed tile
    # with three stages; at 4k causal tl (398) leads d64-tma-persist-trim-ts (362-383) and the
    # three-consumer turns tile (386-394). First run 2026-12-01 11:27 UTC: the three-consumer
    # trimmed tile ("d64-c3-tma-persist-trim-ts", 192-row tiles at 160 / 32 registers) made an
    # illegal memory access from torch on its first check (B = 2, N = 1000, non-causal, where no
    # consumer trims) and was dropped from this list; session 43 put it back (below).
    "d64-tma-s3-persist-trim-ts": Variant(64, 128, 128, 3, False, True, 232, 48, True, True, trim=True,
                                          tma_store=True),
    # Session 43, for D = 64 4k causal (the trimmed tile, then routed, 669-672 us under ncu against
    # the 650 that 1.5x FA2 asks): the three-consumer tile without turns, with O stored by TMA,
    # untrimmed (routed since: 640-643 us) and trimmed, and the trimmed tile with OVERLAP (correct,
    # not faster). The trimmed three-consumer tile failed on its first shape (B = 2, N = 1000,
    # non-causal: garbage; causal: out-of-range shared reads at the S = Q K^T wgmma, NOTES
    # v0.36); since session 44 three consumers trim whole blocks only (no half-block steps in
    # their code) and it passes (routed for D = 64 causal from 4k keys, NOTES v0.37).
    "d64-c3-tma-persist-ts": Variant(64, 192, 128, 2, False, True, 160, 32, True, True, tma_store=True),
    "d64-c3-tma-persist-trim-ts": Variant(64, 192, 128, 2, False, True, 160, 32, True, True, trim=True,
                                          tma_store=True),
    "d64-tma-persist-ovl-trim-ts": Variant(64, 128, 128, 2, False, True, 232, 48, True, True, trim=True,
                                           overlap=True, tma_store=True),
    # 64-key blocks by TMA for short causal D = 128 (session 22, prepared): at N = 256 the diagonal
    # is half the work, and tl (175) still beats the 128-key trimmed tile (165, v0.21 item 3).
    "pp-n64-tma-persist-trim-ts": Variant(128, 128, 64, 3, False, True, 232, 48, True, True, trim=True,
                                          tma_store=True),
    "pp-n64-tma-persist-ts": Variant(128, 128, 64, 3, False, True, 232, 48, True, True, tma_store=True),
    "d256-tma-ovl": Variant(256, 128, 64, 2, False, False, 240, 24, True, True, overlap=True),
    "d256-tma-persist-ovl": Variant(256, 128, 64, 2, False, True, 240, 24, True, True, overlap=True),
    # O stored by TMA in two 128-column halves (session 20, prepared): 224 KB with the K / V rings and Q.
    "d256-tma-persist-ovl-ts": Variant(256, 128, 64, 2, False, True, 240, 24, True, True, overlap=True,
                                       tma_store=True),
    "d256-tma-trim-ts": Variant(256, 128, 64, 2, False, False, 240, 24, True, True, trim=True, tma_store=True),
    # D = 64: two consumers (as at D = 128) or three (FlashAttention-3's shape there).
    "d64-pp": Variant(64, 128, 128, 2, False, False, 200, 80),
    "d64-c3": Variant(64, 192, 128, 2, False, False, 152, 56),
    "d64-c3-turns": Variant(64, 192, 128, 2, True, False, 152, 56),
    "d64-c3-s3-turns": Variant(64, 192, 128, 3, True, False, 152, 56),
    "d64-c3-turns-persist": Variant(64, 192, 128, 2, True, True, 152, 56),
    "d64-c3-turns-qp-persist": Variant(64, 192, 128, 2, True, True, 152, 56, True),
    "d64-qp-persist": Variant(64, 128, 128, 2, False, True, 192, 96, True),
    "d64-c3-qp-persist": Variant(64, 192, 128, 2, False, True, 152, 56, True),
    "d64-c3-turns-tma": Variant(64, 192, 128, 2, True, False, 160, 32, True, True),
    "d64-c3-turns-tma-persist": Variant(64, 192, 128, 2, True, True, 160, 32, True, True),
    # Two consumers (128-row tiles) by TMA (session 15; timed in 16, behind tl and
    # d64-c3-turns-tma-persist at 4k causal: 357-372 vs 388 / 391): for causal D = 64, where the
    # 192-row tiles trail tl (their diagonal and their last tile waste more); no stack offline.
    "d64-tma-persist": Variant(64, 128, 128, 2, False, True, 232, 48, True, True),
    "d64-tma-s3-persist": Variant(64, 128, 128, 3, False, True, 232, 48, True, True),
    "d64-tma-turns-persist": Variant(64, 128, 128, 2, True, True, 232, 48, True, True),
    # D = 256: 64-key tiles (192 KB of shared memory).
    "d256-pp": Variant(256, 128, 64, 2, False, False, 224, 64),
    "d256-turns": Variant(256, 128, 64, 2, True, False, 224, 64),
    # D = 256 by TMA (session 15; routed in 16): one Q buffer set (two would not fit), so the next
    # tile's Q waits for this one's last S; the consumers at 240 registers. Offline (sm_90): no
    # stack, 197 KB of shared memory, persistent and with turns too (the persistent cp.async form
    # spills 216 bytes at 224 / 64).
    "d256-tma": Variant(256, 128, 64, 2, False, False, 240, 24, True, True),
    "d256-tma-persist": Variant(256, 128, 64, 2, False, True, 240, 24, True, True),
    "d256-tma-turns-persist": Variant(256, 128, 64, 2, True, True, 240, 24, True, True),
}
# One variant per head dim also runs from JAX (the same kernel through flashx.jax.gluon's builder).
JAX_VARIANTS = {128: "pp-turns-qp-persist", 64: "d64-c3-turns-qp-persist", 256: "d256-turns"}


def _constexprs(variant: Variant, causal: bool, device_descriptors: bool = False) -> dict:
    return dict(HEAD_DIM=variant.head_dim, BLOCK_M=variant.block_m, BLOCK_N=variant.block_n, LIMIT_RIGHT=causal,
                STRIDE_ALIGN=8, STAGES=variant.stages, TURNS=variant.turns, PERSISTENT=variant.persistent,
                Q_BY_PRODUCER=variant.q_by_producer, TMA=variant.tma,
                PRODUCER_WARPS=variant.producer_warps, PRODUCER_REGS=variant.producer_regs, CONSUMER_REGS=variant.consumer_regs,
                DEVICE_DESCRIPTORS=device_descriptors, TRIM_DIAGONAL=variant.trim, OVERLAP=variant.overlap,
                TMA_STORE=variant.tma_store, ACROSS_TILES=variant.across,
                LIMIT_LEFT=False, BLOCK_MAP=False, MAP_STEPS=1, HAS_MASK_MOD=False, MASK_MOD=None)


def _grid(variant: Variant, b: int, nq: int, hq: int) -> tuple:
    return plan.gluon_forward_grid(dict(BLOCK_M=variant.block_m, PERSISTENT=variant.persistent), b, nq, hq)


def descriptor(x, rows, columns=None):
    """A TMA descriptor over x (B, N, H, D) whose block is [1, rows, 1, columns or D]: rows of one
    (batch, head)."""
    return plan.gluon_tma_descriptor(x, x.shape, x.stride(), rows, str(x.dtype).removeprefix("torch."), columns)


def launch_torch(q, k, v, name, causal=False, bottom_right=True, device_descriptors=False):
    """q (B, Nq, Hq, D), k / v (B, Nkv, Hkv, D): (out, lse [B, Hq, Nq]). device_descriptors: a
    TMA variant builds its descriptors in the kernel, as JAX's launches do (host descriptors
    otherwise), so that the two can be timed side by side from one launcher."""
    variant = VARIANTS[name]
    b, nq, hq, d = q.shape
    grid = _grid(variant, b, nq, hq)
    out = torch.empty_like(q)
    lse = torch.empty((b, hq, nq), dtype=torch.float32, device=q.device)
    inputs, stored = (q, k, v), out
    if variant.tma and device_descriptors:
        # Triton's launcher gives the kernel its global scratch from the allocator (JAX's
        # launches point it at DESCRIPTOR_SCRATCH instead: flashx.jax.gluon).
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    elif variant.tma:
        inputs = (descriptor(q, 64), descriptor(k, variant.block_n), descriptor(v, variant.block_n))
        if variant.tma_store:
            stored = descriptor(out, 64, gluon_forward.output_columns(d))
    gluon_forward.gluon_attention_forward_kernel[grid](
        *inputs, lse, lse,  # MAP_COUNTS, MAP_INDICES: no block map
        d ** -0.5, int(bottom_right), 0, nq, k.shape[1], hq // k.shape[2], hq, b,
        *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3], *lse.stride(), *(0,) * 7,
        stored, lse, lse,  # DESCRIPTOR_SCRATCH: unused from torch
        num_warps=4, **_constexprs(variant, causal, device_descriptors=variant.tma and device_descriptors),
    )
    return out, lse


def launch_jax(q, k, v, name, causal=False):
    import jax
    import jax.numpy as jnp
    import jax_triton as jt

    from flashx.jax import gluon

    assert gluon.install(), "this jax-triton's kernel builder could not be wrapped for Gluon"
    variant = VARIANTS[name]
    b, nq, hq, d = q.shape
    nkv, hkv = k.shape[1], k.shape[2]
    qs = (nq * hq * d, hq * d, d)
    ks = (nkv * hkv * d, hkv * d, d)
    grid = _grid(variant, b, nq, hq)
    # A TMA variant builds its descriptors on the device, in DESCRIPTOR_SCRATCH (jax-triton cannot
    # pass host descriptors); the others leave that output alone.
    scratch = plan.descriptor_scratch_bytes(grid) if variant.tma else 1
    no_map = jnp.zeros((1,), jnp.int32)
    out, lse, _ = jt.triton_call(
        q, k, v, no_map, no_map, d ** -0.5, 1, 0, nq, nkv, hq // hkv, hq, b, *qs, *ks, *ks, *qs, hq * nq, nq, 1,
        *(0,) * 7,
        kernel=gluon_forward.gluon_attention_forward_kernel,
        out_shape=(jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((b, hq, nq), jnp.float32),
                   jax.ShapeDtypeStruct((scratch,), jnp.uint8)),
        grid=grid, num_warps=4, num_stages=1, **_constexprs(variant, causal, device_descriptors=variant.tma),
    )
    return out, lse


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


def check(quick: bool, torch_side: bool, jax_side: bool, head_dims: tuple, names: tuple,
          jax_names: Optional[dict] = None) -> int:
    """Each variant in `names` from torch, and jax_names[d] (default JAX_VARIANTS') from JAX,
    against float64; returns the number of failures."""
    jax_names = jax_names or {d: (name,) for d, name in JAX_VARIANTS.items()}
    torch.manual_seed(0)
    failures = 0
    shapes = [  # (B, Nq, Nkv, Hq, Hkv, D, causal, stored as (B, H, N, D))
        shape for d in head_dims for shape in (
            (2, 1000, 1000, 3, 3, d, False, False), (2, 1000, 1000, 3, 3, d, True, False),
            (1, 333, 1111, 4, 2, d, True, False), (1, 777, 300, 2, 1, d, True, False),
            (2, 517, 517, 3, 1, d, False, False),
            # more tiles than SMs: a persistent program walks several, its ring phases carried over
            (1, 2100, 2100, 16, 4, d, True, False), (1, 2100, 2100, 16, 4, d, False, False),
            # heads outermost: other strides (a TMA descriptor takes them as they are)
            (2, 700, 1300, 4, 2, d, True, True))
    ]
    for (b, nq, nkv, hq, hkv, d, causal, bhnd) in shapes:
        variants = [name for name, v in VARIANTS.items() if v.head_dim == d and torch_side and name in names]
        if quick:
            variants = variants[:1]

        def randn(b, n, h, d):
            if bhnd:
                return torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
            return torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16)
        q = randn(b, nq, hq, d)
        k, v = (randn(b, nkv, hkv, d) for _ in range(2))
        ref, ref_lse = reference(q, k, v, causal)
        rows = ref_lse.isfinite()
        for variant in variants:
            out, lse = launch_torch(q, k, v, variant, causal)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            lse_err = (lse.double() - ref_lse)[rows].abs().max().item()
            lse_inf_ok = bool((lse[~rows] == float("-inf")).all())
            ok = err < 1e-2 and lse_err < 1e-2 and lse_inf_ok and bool(out.isfinite().all())
            failures += not ok
            print(f"torch {variant:10s} B={b} Nq={nq} Nkv={nkv} Hq={hq} Hkv={hkv} D={d} causal={causal} bhnd={bhnd}: "
                  f"rel err {err:.1e} lse err {lse_err:.1e} empty rows {int((~rows).sum())} {'OK' if ok else 'WRONG'}",
                  flush=True)
        if not jax_side:
            continue
        try:
            import jax
            import jax.numpy as jnp

            arrays = [jnp.asarray(x.float().cpu().numpy()).astype(jnp.bfloat16) for x in (q, k, v)]
            for variant in jax_names.get(d, ()):
                out, lse = jax.jit(lambda a, b_, c: launch_jax(a, b_, c, variant, causal))(*arrays)
                out = torch.from_numpy(np.asarray(out.astype(jnp.float32))).double()
                err = ((out - ref.cpu()).norm() / ref.norm().cpu()).item()
                ok = err < 1e-2
                failures += not ok
                print(f"jax   {variant:10s} B={b} Nq={nq} Nkv={nkv} causal={causal}: rel err {err:.1e} "
                      f"{'OK' if ok else 'WRONG'}", flush=True)
        except Exception as e:  # noqa: BLE001
            failures += 1
            print(f"jax: FAILED {type(e).__name__}: {str(e)[:400]}", flush=True)
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


def bench(quick: bool, head_dims: tuple, names: tuple, lengths: tuple | None = None, cudagraph: bool = False,
          device_descriptors: bool = False) -> None:
    """Time each variant beside flashx, its tl forward, FA2 and cuDNN. do_bench counts a call's
    host time where it outlasts the GPU's queue (short shapes: each variant's launch here builds
    its descriptors and goes through Triton's dispatch, flashx's through its runner); cudagraph:
    replays captured calls instead (do_bench_cudagraph, median), the kernels' own time.
    device_descriptors: each TMA variant a second time ("... dev"), its descriptors built in the kernel."""
    from torch.nn.attention import SDPBackend

    import common  # benchmarks/, this script's folder

    def timed(fn):
        fn()  # compiled before the card is loaded
        common.settle()  # each timing from the loaded card's clock (common.SETTLE_MS)
        if cudagraph:
            return triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median")
        return triton.testing.do_bench(fn, warmup=25, rep=100)
    print(f"timing: {'CUDA graph replays (do_bench_cudagraph)' if cudagraph else 'do_bench'}", flush=True)
    rows = []
    shapes = [(4, 4096, 16, 128), (1, 16384, 16, 128), (16, 1024, 16, 128), (64, 512, 16, 128), (64, 256, 16, 128),
              (4, 4096, 32, 64), (1, 16384, 32, 64), (16, 1024, 32, 64), (8, 2048, 32, 64), (16, 1024, 8, 256), (4, 4096, 8, 256),
              (1, 16384, 8, 256)]
    shapes = [shape for shape in shapes if shape[3] in head_dims and (lengths is None or shape[1] in lengths)]
    for (b, n, h, d) in shapes[:2] if quick else shapes:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        for causal in (False, True):
            flops = 4 * b * h * n * n * d / (2 if causal else 1)
            systems = {}
            for name, variant in VARIANTS.items():
                if variant.head_dim == d and name in names:
                    systems[f"gluon {name}"] = lambda name=name: launch_torch(q, k, v, name, causal)
                    if device_descriptors and variant.tma:  # the same tile as JAX launches it
                        systems[f"gluon {name} dev"] = lambda name=name: launch_torch(q, k, v, name, causal,
                                                                                       device_descriptors=True)
                        # The same kernel on the same inputs: the two builds must agree bit for bit.
                        (o_host, l_host), (o_dev, l_dev) = (systems[f"gluon {name}{s}"]() for s in ("", " dev"))
                        same = torch.equal(o_host, o_dev) and torch.equal(l_host, l_dev)
                        print(f"{name} host / device descriptors, B={b} N={n} causal={causal}: "
                              f"{'identical' if same else 'DIFFER'}", flush=True)
            systems["flashx"] = lambda: ft.attention(q, k, v, causal=causal)
            systems["flashx tl"] = without_gluon(lambda: ft.attention(q, k, v, causal=causal))
            systems["FA2"] = common.sdpa_call(SDPBackend.FLASH_ATTENTION, qt, kt, vt, is_causal=causal)
            systems["cuDNN"] = common.sdpa_call(SDPBackend.CUDNN_ATTENTION, qt, kt, vt, is_causal=causal)
            for name, fn in systems.items():
                try:
                    ms = timed(fn)
                    rows.append((f"B={b} N={n} H={h} D={d} {'causal' if causal else 'full'}", name, flops / ms / 1e9))
                    print(f"timed {rows[-1][0]} {name}: {rows[-1][2]:.0f}", flush=True)  # kept if a timeout cuts the table
                except Exception as e:  # noqa: BLE001
                    rows.append((f"B={b} N={n} H={h} D={d} {'causal' if causal else 'full'}", name, float("nan")))
                    print(f"{name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
    table = {(c, n): t for c, n, t in rows}
    for d in head_dims:  # one table a head dim: its variants differ
        cases = [c for c in dict.fromkeys(r[0] for r in rows) if f" D={d} " in c]
        names = list(dict.fromkeys(r[1] for r in rows if r[0] in cases))
        print("| case | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for c in cases:
            print(f"| {c} | " + " | ".join(f"{table.get((c, n), float('nan')):.0f}" for n in names) + " |")
        print()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("torch", "jax"), help="check one frontend only, and skip the timings")
    parser.add_argument("--timings-only", action="store_true", help="skip the correctness checks")
    parser.add_argument("--d", type=int, nargs="+", default=[128, 64, 256], help="only these head dims")
    parser.add_argument("--n", type=int, nargs="+", help="time only these sequence lengths (default: all)")
    parser.add_argument("--cudagraph", action="store_true",
                        help="time CUDA graph replays (the kernels alone, no host time) instead of do_bench")
    parser.add_argument("--device-descriptors", action="store_true",
                        help="also time each TMA variant from torch with its descriptors built on the device "
                             "(as JAX's launches build them): the descriptors' cost, without JAX")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS),
                        help="only these variants, also checked from JAX (TMA ones with descriptors built "
                             "on the device); default: all, and one a head dim from JAX (JAX_VARIANTS). "
                             "The peers and the plan's choice are always timed")
    args = parser.parse_args()
    head_dims, names = tuple(args.d), tuple(args.variants or VARIANTS)
    jax_names = None
    if args.variants:
        jax_names = {d: tuple(n for n in names if VARIANTS[n].head_dim == d) for d in head_dims}
    failures = 0
    if not args.timings_only:
        failures = check(args.quick, args.only != "jax", args.only != "torch", head_dims, names, jax_names)
        print(f"correctness failures: {failures}", flush=True)
    if args.only is None:
        bench(args.quick, head_dims, names, tuple(args.n) if args.n else None, args.cudagraph,
              args.device_descriptors)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
