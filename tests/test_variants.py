"""flashx.torch.attention's variants, forward and backward, against a float64 torch autograd reference.

Variants: window (bottom-right, -1 sides, with causal), ALiBi ((Hq,) and (B, Hq) slopes), softcap,
score_mod (+ score_mod_grad), mask_mod (automatic block map and a reused create_block_mask), varlen
(causal, window, GQA, Dv != D, empty sequences, padding rows, clamped cu_seqlens) and their
combinations; lse values and gradients; bitwise-deterministic gradients; bad input.

The reference upcasts the rounded inputs to float64 and differentiates with torch autograd; the
loss weights out (and lse) by fresh random weights, never ones. Bounds (relative Frobenius error):
OUT_TOL / GRAD_TOL / LSE_TOL in variants_common (fp32 2e-5 / 5e-5, fp16 2e-3 / 5e-3,
bf16 2e-2 / 5e-2, lse 1e-5). Small odd shapes on the CPU (Triton's interpreter); the tests
marked `gpu` run training-sized bf16 shapes against the same reference, bounded by a small
factor of torch's own error in bf16.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import flashx.torch  # noqa: E402, I001  (flashx before triton: this module defines @triton.jit functions)
from flashx import core  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402, F401  (Triton's interpreter wants it visible to @triton.jit functions)
from conftest import INTERPRETED, TOLERANCES, Shape, Tolerance, rel_error, require_sm90  # noqa: E402
from variants_common import (  # noqa: E402
    GLUON_MASKED_CASES,
    GRAD_TOL,
    MASK_MODS,
    OUT_TOL,
    alibi_distance,
    assert_close,
    assert_lse,
    check_block_map,
    clamped_bounds,
    document_mask,
    everything_mask,
    expected_block_map,
    holes_mask,
    index_grids,
    nothing_mask,
    window_visible,
    wobble_score,
    wobble_score_grad,
    wobble_score_terms,
)

DEVICE = "cpu" if INTERPRETED else "cuda"
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class Variant:
    """The options of one call, in terms both flashx and the reference understand."""

    causal: bool = False
    window: Optional[tuple] = None
    alibi: Optional[str] = None  # "h": slopes (Hq,), "bh": slopes (B, Hq)
    softcap: Optional[float] = None
    score_mod: bool = False
    mask: Optional[str] = None  # a key of MASK_MODS
    layout: str = "bnhd"
    input_scale: float = 1.0


# ----------------------------------------------------------------------------------------------
# Inputs and the float64 reference
# ----------------------------------------------------------------------------------------------


def randn(rng, shape, scale=1.0) -> torch.Tensor:
    return torch.from_numpy((rng.standard_normal(shape) * scale).astype(np.float32))


def make_qkv(rng, s: Shape, dtype: str, layout="bnhd", scale=1.0, device=DEVICE):
    """q, k, v in `layout`, rounded to `dtype` (the reference upcasts these rounded values)."""
    shapes = [(s.b, s.nq, s.hq, s.d), (s.b, s.nkv, s.hkv, s.d), (s.b, s.nkv, s.hkv, s.dv)]
    if layout == "bhnd":
        shapes = [(x[0], x[2], x[1], x[3]) for x in shapes]
    return tuple(randn(rng, x, scale).to(device=device, dtype=TORCH_DTYPES[dtype]) for x in shapes)


def make_slopes(rng, kind: Optional[str], b: int, hq: int, device=DEVICE):
    if kind is None:
        return None
    shape = (hq,) if kind == "h" else (b, hq)
    return torch.from_numpy(rng.uniform(0.05, 0.6, shape).astype(np.float32)).to(device)


def reference(q, k, v, *, causal=False, scale=None, window=None, slopes=None, softcap=None, score_mod=False,
              mask=None, batch_ids=None, bottom_right=True):
    """float64 attention on (B, N, H, D) tensors: (out (B, Nq, Hq, Dv), lse (B, Hq, Nq)), differentiable.

    score = q.k * scale -> score_mod (wobble_score's twin) -> softcap -> alibi -> masks; a row that sees
    no key gives out 0 and lse -inf (and no gradient). batch_ids: the b each batch row stands for
    (varlen passes the sequence index). mask: a key of MASK_MODS, or a NumPy mask function
    (b, h, q_idx, kv_idx) -> bool.
    """
    bsz, nq, hq, d = q.shape
    nkv, hkv, dv = k.shape[1], k.shape[2], v.shape[3]
    if nkv == 0 or nq == 0:
        out = (q.sum() * 0 + torch.zeros(bsz, nq, hq, dv, dtype=q.dtype, device=q.device))
        return out, torch.full((bsz, hq, nq), -math.inf, dtype=q.dtype, device=q.device)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    group = hq // hkv
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    b_ids = np.arange(bsz) if batch_ids is None else np.asarray(batch_ids)
    b, h, qi, kj = index_grids(b_ids, np.arange(hq), nq, nkv)
    as_t = lambda a: torch.as_tensor(np.array(a), device=q.device)  # noqa: E731
    if score_mod:
        s = s + 0.5 * torch.sin(s) + as_t(wobble_score_terms(b, h, qi, kj))
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if slopes is not None:
        sl = slopes.to(q.device, torch.float64)
        sl = sl.expand(bsz, hq) if sl.dim() == 1 else sl
        s = s - sl[:, :, None, None] * as_t(alibi_distance(nq, nkv, bottom_right))
    visible = window_visible(nq, nkv, window, causal, bottom_right)[None, None]
    if mask is not None:
        mask_np = MASK_MODS[mask][1] if isinstance(mask, str) else mask
        visible = visible & mask_np(b, h, qi, kj)
    s = s.masked_fill(~as_t(np.broadcast_to(visible, s.shape)), -math.inf)
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    empty = l == 0
    out = torch.einsum("bhqk,bkhd->bqhd", p / torch.where(empty, torch.ones_like(l), l), v)
    lse = torch.where(empty, -math.inf, torch.log(torch.where(empty, torch.ones_like(l), l)) + m)[..., 0]
    return out, lse


def to_bnhd(x, layout):
    return x.transpose(1, 2) if layout == "bhnd" else x


def flashx_kwargs(var: Variant, slopes) -> dict:
    kw = dict(causal=var.causal, window=var.window, alibi_slopes=slopes, softcap=var.softcap, layout=var.layout)
    if var.score_mod:
        kw.update(score_mod=wobble_score, score_mod_grad=wobble_score_grad)
    if var.mask is not None:
        kw.update(mask_mod=MASK_MODS[var.mask][0])
    return kw


def reference_kwargs(var: Variant, slopes) -> dict:
    return dict(causal=var.causal, window=var.window, slopes=slopes, softcap=var.softcap, score_mod=var.score_mod,
                mask=var.mask)


def np64(t) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


def finite_or_zero(lse):
    return torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))


def weighted_grads(rng, out, lse, ref_out, ref_lse, leaves, ref_leaves, lse_grad: bool) -> tuple:
    """(flashx's, the reference's) gradients wrt their leaves of one random weighting of out, plus
    of lse when lse_grad (rows without keys, lse = -inf, count as 0). ref_out in out's layout."""
    w_out = randn(rng, tuple(out.shape)).to(out.device)
    w_lse = randn(rng, tuple(lse.shape)).to(out.device)
    loss = (out.float() * w_out).sum()
    ref_loss = (ref_out * w_out.double()).sum()
    if lse_grad:
        loss = loss + (finite_or_zero(lse) * w_lse).sum()
        ref_loss = ref_loss + (finite_or_zero(ref_lse) * w_lse.double()).sum()
    return torch.autograd.grad(loss, leaves), torch.autograd.grad(ref_loss, ref_leaves)


def run_and_compare(rng, shape: Shape, var: Variant, dtype: str, *, backward=True, lse_grad=False, block_mask=None,
                    fx_extra=None):
    """flashx's out, lse and (dq, dk, dv, and ALiBi's slopes' gradient where the variant has
    slopes) against the float64 reference; returns flashx's results (out, lse, (dq, dk, dv))."""
    q, k, v = make_qkv(rng, shape, dtype, var.layout, var.input_scale)
    slopes = make_slopes(rng, var.alibi, shape.b, shape.hq)
    slope_leaves = [] if slopes is None else [slopes.detach().clone().requires_grad_(backward)]
    kwargs = flashx_kwargs(var, slope_leaves[0] if slope_leaves else None)
    if block_mask is not None:
        kwargs.update(block_mask=block_mask, mask_mod=None)
    kwargs.update(fx_extra or {})
    leaves = [x.detach().clone().requires_grad_(backward) for x in (q, k, v)]
    out, lse = flashx.torch.attention(*leaves, return_lse=True, **kwargs)
    assert out.dtype == q.dtype and tuple(out.shape) == (*q.shape[:3], shape.dv)
    assert lse.dtype == torch.float32 and tuple(lse.shape) == (shape.b, shape.hq, shape.nq)

    ref_leaves = [to_bnhd(x.detach().double(), var.layout).requires_grad_(backward) for x in (q, k, v)]
    ref_slope_leaves = [x.detach().double().requires_grad_(backward) for x in slope_leaves]
    ref_out, ref_lse = reference(*ref_leaves, **reference_kwargs(var, ref_slope_leaves[0] if slopes is not None else None))
    ref_out_l = to_bnhd(ref_out, var.layout)
    assert_close(np64(out), np64(ref_out_l), OUT_TOL[dtype], f"out ({dtype})")
    assert_lse(np64(lse), np64(ref_lse))
    # rows that see no key: exactly 0
    empty = np.isneginf(np64(ref_lse))  # (B, Hq, Nq)
    if empty.any():
        assert (np64(to_bnhd(out, var.layout)).transpose(0, 2, 1, 3)[empty] == 0).all(), "rows without keys must be 0"
    if not backward:
        return out, lse, None
    grads, ref_grads = weighted_grads(rng, out, lse, ref_out_l, ref_lse, leaves + slope_leaves,
                                      ref_leaves + ref_slope_leaves, lse_grad)
    for name, x, g, rg in zip("qkv", leaves, grads, ref_grads):
        assert g.dtype == x.dtype and g.shape == x.shape
        assert_close(np64(g), np64(to_bnhd(rg, var.layout)), GRAD_TOL[dtype], f"d{name} ({dtype})")
    if slopes is not None:
        assert grads[3].dtype == torch.float32 and grads[3].shape == slopes.shape
        assert_close(np64(grads[3]), np64(ref_grads[3]), GRAD_TOL[dtype], f"d alibi_slopes ({dtype})")
    return out, lse, grads[:3]


# ----------------------------------------------------------------------------------------------
# Forward and backward of each variant
# ----------------------------------------------------------------------------------------------

ODD = Shape(1, 37, 45, 2, 2, 24, 40)  # Nq != Nkv, D and Dv not powers of two
ODD_B2 = Shape(2, 37, 45, 2, 2, 24, 40)
SQUARE = Shape(1, 45, 45, 2, 2, 24, 24)
TALL = Shape(1, 45, 29, 2, 2, 24, 40)  # Nq > Nkv: bottom-right leaves the first rows without keys
GQA = Shape(1, 37, 45, 4, 2, 24, 40)

VARIANTS = [
    # windows (bottom-right), with unbounded sides and with causal
    pytest.param(ODD, Variant(window=(8, 4)), "float32", id="window-8-4"),
    pytest.param(ODD, Variant(window=(-1, 3)), "float32", id="window-inf-3"),
    pytest.param(ODD, Variant(window=(6, -1)), "float32", id="window-6-inf"),
    pytest.param(ODD, Variant(window=(0, 0)), "float32", id="window-0-0-diagonal"),
    # sides past any sequence: cut to its length, never wrapped in the kernels' 32-bit positions
    pytest.param(ODD, Variant(window=(3, 2**31 - 1)), "float32", id="window-3-int32-max"),
    pytest.param(ODD, Variant(window=(2**40, 2), causal=True), "float32", id="window-2pow40-causal"),
    pytest.param(ODD, Variant(window=(-1, -1)), "float32", id="window-unbounded"),
    pytest.param(ODD, Variant(window=(10, 5), causal=True), "float32", id="window-10-5-causal"),
    pytest.param(ODD, Variant(window=(-1, 3), causal=True), "float32", id="window-inf-3-causal"),
    pytest.param(TALL, Variant(window=(3, 2)), "float32", id="window-3-2-q45-kv29-rows-without-keys"),
    pytest.param(ODD, Variant(window=(20, 1), layout="bhnd"), "float32", id="window-20-1-bhnd"),
    pytest.param(ODD, Variant(window=(7, 2)), "float16", id="window-7-2-fp16"),
    pytest.param(ODD, Variant(window=(7, 2), causal=True), "bfloat16", id="window-7-2-causal-bf16"),
    # ALiBi
    pytest.param(ODD, Variant(alibi="h"), "float32", id="alibi-h"),
    pytest.param(ODD_B2, Variant(alibi="bh", causal=True), "float32", id="alibi-bh-causal"),
    pytest.param(ODD_B2, Variant(alibi="bh"), "float16", id="alibi-bh-fp16"),
    # softcap (large scores, so tanh bends)
    pytest.param(ODD, Variant(softcap=1.5, input_scale=2.0), "float32", id="softcap-1.5"),
    pytest.param(ODD, Variant(softcap=30.0, causal=True), "float32", id="softcap-30-causal"),
    # score_mod with its gradient
    pytest.param(ODD_B2, Variant(score_mod=True), "float32", id="score-mod"),
    pytest.param(ODD, Variant(score_mod=True, causal=True), "float16", id="score-mod-causal-fp16"),
    # mask_mod with the automatic block map
    pytest.param(SQUARE, Variant(mask="document", causal=True), "float32", id="mask-document-causal"),
    pytest.param(ODD, Variant(mask="document"), "float32", id="mask-document-q37-kv45"),
    pytest.param(SQUARE, Variant(mask="prefix_lm"), "float32", id="mask-prefix-lm"),
    pytest.param(Shape(2, 37, 45, 2, 1, 24, 40), Variant(mask="holes"), "float32", id="mask-holes-rows-without-keys-gqa"),
    pytest.param(ODD, Variant(mask="holes", window=(9, 9)), "float32", id="mask-holes-window"),
    pytest.param(SQUARE, Variant(mask="document", causal=True), "bfloat16", id="mask-document-causal-bf16"),
    pytest.param(TALL, Variant(mask="prefix_lm", causal=True, layout="bhnd"), "float32", id="mask-prefix-lm-causal-q45-kv29-bhnd"),
    # combinations
    pytest.param(GQA, Variant(causal=True, window=(12, 0)), "float32", id="causal-gqa-window"),
    pytest.param(Shape(1, 37, 45, 4, 1, 24, 40), Variant(causal=True, window=(5, -1)), "float16", id="causal-mqa-window-fp16"),
    pytest.param(ODD_B2, Variant(alibi="bh", softcap=2.0, input_scale=1.5), "float32", id="alibi-softcap"),
    pytest.param(ODD_B2, Variant(alibi="h", softcap=2.0, causal=True), "bfloat16", id="alibi-softcap-causal-bf16"),
    pytest.param(GQA, Variant(score_mod=True, softcap=2.5, alibi="h", window=(15, 3), mask="prefix_lm"), "float32",
                 id="everything-at-once"),
]


@pytest.mark.parametrize("shape, var, dtype", VARIANTS)
def test_variant(rng, shape, var, dtype):
    """out, lse and dq, dk, dv of one variant agree with the float64 reference."""
    run_and_compare(rng, shape, var, dtype)


# Causal grids walk heads in groups (HEAD_GROUP = 4, 2 or 1, the largest dividing Hkv), and
# dK/dV runs queries-down at D, Dv <= 64 in 16-bit inputs (ROWS_DOWN), transposed otherwise;
# lengths and lse rows that are multiples of 16 (or 8, 4, 2 for lse) are marked so.
HEAD_GROUP_CASES = [
    pytest.param(Shape(2, 37, 45, 8, 4, 24, 40), "float16", 4, True, id="group4-rows-down-gqa"),
    pytest.param(Shape(1, 45, 37, 6, 6, 72, 40), "float16", 2, False, id="group2-transposed"),
    pytest.param(Shape(1, 29, 45, 3, 3, 80, 80), "float32", 1, False, id="group1-transposed-fp32"),
    # lengths that are multiples of 16: the kernels are told so (Q_ALIGN, KV_ALIGN, LSE_ALIGN)
    pytest.param(Shape(2, 48, 64, 4, 2, 24, 40), "bfloat16", 2, True, id="group2-rows-down-aligned-lengths"),
    pytest.param(Shape(1, 32, 48, 2, 2, 72, 72), "bfloat16", 2, False, id="group2-transposed-aligned-lengths"),
]


@pytest.mark.parametrize("shape, dtype, group, rows_down", HEAD_GROUP_CASES)
def test_causal_head_groups_and_dkdv_orientation(rng, shape, dtype, group, rows_down):
    from flashx import core

    specs = [core.ArraySpec(dims, core.dense_strides(dims), dtype, "cuda:0") for dims in (
        (shape.b, shape.nq, shape.hq, shape.d), (shape.b, shape.nkv, shape.hkv, shape.d),
        (shape.b, shape.nkv, shape.hkv, shape.dv))]
    flags = core.plan_attention(*specs, causal=True).flags
    assert (flags["HEAD_GROUP"], flags["ROWS_DOWN"]) == (group, rows_down)
    assert (flags["Q_ALIGN"], flags["KV_ALIGN"]) == tuple(16 if n % 16 == 0 else 1 for n in (shape.nq, shape.nkv))
    assert flags["LSE_ALIGN"] == next(a for a in (16, 8, 4, 2, 1) if shape.nq % a == 0)
    run_and_compare(rng, shape, Variant(causal=True), dtype)


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(Shape(1, 77, 77, 2, 2, 16, 16), id="square"),
        pytest.param(Shape(2, 45, 93, 4, 2, 24, 16), id="cross-gqa"),
        pytest.param(Shape(1, 93, 50, 2, 1, 16, 8), id="tall-mqa"),
    ],
)
def test_causal_masked_blocks_around_full_ones(rng, shape):
    """Causal backward with ragged lengths: the masked blocks (the diagonal and the ragged last
    block) lie on both sides of the full ones and are walked in one loop that jumps over them
    (EDGES_TOGETHER: no window's left side)."""
    run_and_compare(rng, shape, Variant(causal=True), "float32")


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(Shape(2, 45, 45, 2, 2, 16, 16), id="square"),
        pytest.param(Shape(1, 29, 70, 4, 2, 24, 16), id="wide-gqa"),
        pytest.param(Shape(1, 70, 29, 2, 1, 16, 8), id="tall-mqa"),
    ],
)
def test_causal_forward_in_one_loop(rng, forward_one_loop, shape):
    """Causal without a window's left side, its key blocks walked in one loop and masked per
    block at run time (ONE_LOOP), as the GPU's short-sequence tiles do: the diagonal blocks,
    the full ones before them, ragged ends, and rows that see no key (Nq > Nkv)."""
    q, k, v = (core.ArraySpec(dims, core.dense_strides(dims), "float32", DEVICE) for dims in (
        (shape.b, shape.nq, shape.hq, shape.d), (shape.b, shape.nkv, shape.hkv, shape.d), (shape.b, shape.nkv, shape.hkv, shape.dv)))
    assert core.plan_attention(q, k, v, causal=True).flags["ONE_LOOP"]
    run_and_compare(rng, shape, Variant(causal=True), "float32")


@pytest.mark.parametrize(
    "window",
    [(15, 0), (16, 0), (17, -1), (0, 15), (0, 16), (-1, 17), (16, 16), (31, 1), (1, 31), (32, 32)],
    ids=lambda w: f"window-{w[0]}-{w[1]}",
)
def test_window_block_boundaries(rng, window):
    """Window edges on and next to the 16-wide interpreter tiles, where a key block flips between
    skipped, masked and unmasked (forward key_range and backward query_range)."""
    run_and_compare(rng, Shape(1, 48, 64, 1, 1, 16, 16), Variant(window=window), "float32")


def test_alibi_slopes_gradient_every_path(rng):
    """ALiBi's slopes are differentiable on each of torch's autograd paths, against float64: the
    eager Function (slopes alone requiring grad, and with q, k, v), torch.func.grad, torch.func.vmap
    of per-example slope gradients (the mapped axis folded into the batch: (Hq,) slopes shared) and
    torch.compile (the op's autograd, bit for bit with eager). Before 2026-12-05 (session 69) a
    slope that required grad raised NotImplementedError (session 68), and before that got none.
    Forward mode still has no formula: a slope with a tangent raises, as q's does."""
    from torch.autograd import forward_ad

    shape = Shape(2, 13, 17, 4, 2, 16, 16)
    q, k, v = make_qkv(rng, shape, "float32")
    slopes = make_slopes(rng, "bh", 2, 4).requires_grad_()
    cotangent = randn(rng, (2, 13, 4, 16)).to(DEVICE)

    def want_grads(slopes, wrt_qkv: bool):
        leaves = tuple(x.detach().double().requires_grad_() for x in (q, k, v))
        ref_slopes = slopes.detach().double().requires_grad_()
        out, _ = reference(*leaves, causal=True, slopes=ref_slopes)
        return torch.autograd.grad(out, (ref_slopes, *leaves) if wrt_qkv else (ref_slopes,), cotangent.double())

    want_slopes, *want_qkv = want_grads(slopes, True)
    (got,) = torch.autograd.grad(flashx.torch.attention(q, k, v, causal=True, alibi_slopes=slopes), slopes, cotangent)
    assert got.shape == slopes.shape and got.dtype == torch.float32
    assert rel_error(np64(got), np64(want_slopes)) < 1e-5
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    got_all = torch.autograd.grad(flashx.torch.attention(*leaves, causal=True, alibi_slopes=slopes),
                                  (slopes, *leaves), cotangent)
    for name, g, w in zip(("slopes", "q", "k", "v"), got_all, (want_slopes, *want_qkv)):
        assert rel_error(np64(g), np64(w)) < 1e-4, f"d{name}"

    def loss(s, q=q):
        return (flashx.torch.attention(q, k, v, causal=True, alibi_slopes=s) * cotangent).sum()

    assert rel_error(np64(torch.func.grad(loss)(slopes.detach())), np64(want_slopes)) < 1e-5
    # Per-example gradients of shared (Hq,) slopes: vmap over a stack of q's.
    shared = slopes.detach()[0].clone()
    qs = torch.stack([q, 0.5 * q])
    per_example = torch.func.vmap(lambda qi: torch.func.grad(lambda s: loss(s, qi))(shared))(qs)
    for i, qi in enumerate((q, 0.5 * q)):
        leaves = tuple(x.detach().double() for x in (qi, k, v))
        ref_s = shared.detach().double().requires_grad_()
        out, _ = reference(*leaves, causal=True, slopes=ref_s)
        (w,) = torch.autograd.grad(out, ref_s, cotangent.double())
        assert rel_error(np64(per_example[i]), np64(w)) < 1e-5, f"vmap slice {i}"

    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
    torch._dynamo.reset()
    (got_compiled,) = torch.autograd.grad(compiled(slopes), slopes)
    (got_eager,) = torch.autograd.grad(loss(slopes), slopes)
    assert torch.equal(got_compiled, got_eager)
    with forward_ad.dual_level(), pytest.raises(NotImplementedError, match="forward-mode"):
        flashx.torch.attention(q, k, v, alibi_slopes=forward_ad.make_dual(slopes.detach(), torch.ones_like(slopes)))


def test_alibi_strided_slopes(rng):
    """Slopes read through their strides: a transposed (B, Hq) view and a strided (Hq,) view."""
    q, k, v = make_qkv(rng, Shape(2, 21, 30, 3, 3, 16, 16), "float32")
    base = torch.from_numpy(rng.uniform(0.1, 0.5, (3, 2)).astype(np.float32)).to(DEVICE)
    for slopes in (base.T, base[:, 0]):
        assert not slopes.is_contiguous()
        got = flashx.torch.attention(q, k, v, alibi_slopes=slopes)
        want = flashx.torch.attention(q, k, v, alibi_slopes=slopes.contiguous())
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize(
    "shape, var",
    [
        pytest.param(ODD, Variant(), id="plain"),
        pytest.param(TALL, Variant(causal=True), id="causal-rows-without-keys"),
        pytest.param(ODD_B2, Variant(window=(6, 2), alibi="bh", softcap=2.0), id="window-alibi-softcap"),
        pytest.param(Shape(2, 37, 45, 2, 1, 24, 40), Variant(mask="holes", score_mod=True), id="mask-holes-score-mod"),
    ],
)
def test_lse_gradient(rng, shape, var):
    """A loss that uses lse too: its gradient flows into dq and dk (delta -= dlse), and matches."""
    run_and_compare(rng, shape, var, "float32", lse_grad=True)


def test_score_mod_backward_needs_grad(rng):
    """score_mod without score_mod_grad: the forward runs, the backward raises NotImplementedError."""
    q, k, v = (x.requires_grad_() for x in make_qkv(rng, Shape(1, 17, 19, 1, 1, 16, 16), "float32"))
    out = flashx.torch.attention(q, k, v, score_mod=wobble_score)
    ref, _ = reference(*(x.detach().double() for x in (q, k, v)), score_mod=True)
    assert_close(np64(out), np64(ref), OUT_TOL["float32"], "out")
    with pytest.raises(NotImplementedError, match="score_mod_grad"):
        out.sum().backward()


# ----------------------------------------------------------------------------------------------
# Block masks: create_block_mask's map, and its reuse
# ----------------------------------------------------------------------------------------------


def visible_for_map(name, b, h, nq, nkv, causal=False, window=None):
    bs, hs, qi, kj = index_grids(np.arange(b), np.arange(h), nq, nkv)
    vis = MASK_MODS[name][1](bs, hs, qi, kj) & window_visible(nq, nkv, window, causal)[None, None]
    return np.broadcast_to(vis, (b, h, nq, nkv))


@pytest.mark.parametrize(
    "name, B, H, nq, nkv, causal, window, blocks",
    [
        pytest.param("document", None, None, 45, 45, True, None, None, id="document-causal-broadcast"),
        pytest.param("holes", 2, 2, 37, 45, False, None, None, id="holes-b2-h2"),
        pytest.param("prefix_lm", 1, 1, 45, 45, False, (20, -1), (32, 16), id="prefix-lm-window-blocks-32x16"),
        pytest.param("nothing", 1, 2, 37, 45, False, None, None, id="nothing-zero-counts"),
        pytest.param("everything", None, None, 48, 45, False, None, None, id="everything-full-blocks"),
        pytest.param("everything", None, None, 37, 48, True, (-1, 5), None, id="everything-causal"),
    ],
)
def test_create_block_mask_map(name, B, H, nq, nkv, causal, window, blocks):
    """counts/indices and their transposes classify each tile as the mask says (empty, partial, full)."""
    bm = flashx.torch.create_block_mask(MASK_MODS[name][0], B, H, nq, nkv, causal=causal, window=window,
                                        device=DEVICE, blocks=blocks)
    block_m, block_n = blocks or (bm.spec.block_m, bm.spec.block_n)
    assert (bm.spec.block_m, bm.spec.block_n) == (block_m, block_n)
    state = expected_block_map(visible_for_map(name, B or 1, H or 1, nq, nkv, causal, window), block_m, block_n)
    nqb, nkb = -(-nq // block_m), -(-nkv // block_n)
    assert tuple(bm.counts.shape) == (B or 1, H or 1, nqb, 2) and tuple(bm.t_counts.shape) == (B or 1, H or 1, nkb, 2)
    check_block_map(*(x.cpu().numpy() for x in (bm.counts, bm.indices, bm.t_counts, bm.t_indices)), state)
    counts = bm.counts.cpu().numpy()
    if name == "nothing":
        assert (counts == 0).all() and (bm.t_counts.cpu().numpy() == 0).all()
    if name == "everything" and not causal:
        # every key block is full but the last one, which runs past Nkv = 45 (partial)
        assert (counts[..., 1] == nkb - 1).all() and (counts[..., 0] == 1).all()


def test_block_mask_reused_across_calls(rng):
    """One create_block_mask result (B, H broadcast) serves several calls, dtypes and batch/head counts."""
    bm = flashx.torch.create_block_mask(document_mask, None, None, 45, 45, causal=True, device=DEVICE)
    var = Variant(mask="document", causal=True)
    run_and_compare(rng, Shape(2, 45, 45, 2, 1, 24, 40), var, "float32", block_mask=bm)
    run_and_compare(rng, Shape(1, 45, 45, 3, 3, 16, 16), var, "float16", block_mask=bm, backward=False)
    # the same mask_mod passed alongside its block_mask is accepted
    run_and_compare(rng, Shape(1, 45, 45, 1, 1, 16, 16), var, "float32", block_mask=bm, backward=False,
                    fx_extra=dict(mask_mod=document_mask))


@pytest.mark.parametrize("blocks", [(32, 16), (16, 32), (32, 32)], ids=lambda b: f"blocks-{b[0]}x{b[1]}")
def test_block_mask_per_batch_and_head(rng, blocks):
    """A map built per (batch, head) for a mask that depends on both, with map blocks larger than
    the kernels' tiles along either axis (each kernel then walks a map block in several tiles)."""
    bm = flashx.torch.create_block_mask(holes_mask, 2, 2, 37, 45, window=(9, 9), device=DEVICE, blocks=blocks)
    run_and_compare(rng, ODD_B2, Variant(mask="holes", window=(9, 9)), "float32", block_mask=bm)


@pytest.mark.parametrize("blocks", [(16, 16), (16, 32)], ids=lambda b: f"blocks-{b[0]}x{b[1]}")
def test_block_mask_partial_and_full_blocks_in_one_row(rng, blocks):
    """Rows of the map with both partial and full blocks (a causal map at N = 70: the diagonal
    block, then the full ones before it), which the forward walks in one loop (ONE_LOOP): the
    partial list's steps, then the full list's, each map block in one or two tiles."""
    bm = flashx.torch.create_block_mask(everything_mask, None, None, 70, 70, causal=True, device=DEVICE, blocks=blocks)
    counts = bm.counts.cpu().numpy()
    assert ((counts[..., 0] > 0) & (counts[..., 1] > 1)).any()
    run_and_compare(rng, Shape(2, 70, 70, 2, 1, 16, 24), Variant(mask="everything", causal=True), "float32", block_mask=bm)


def test_block_mask_nothing_visible(rng):
    """A mask that hides everything: zero counts, out 0, lse -inf, all gradients 0 (no NaN)."""
    bm = flashx.torch.create_block_mask(nothing_mask, None, None, 37, 45, device=DEVICE)
    assert (bm.counts.cpu() == 0).all()
    out, lse, grads = run_and_compare(rng, ODD, Variant(mask="nothing"), "float32", block_mask=bm, lse_grad=True)
    assert (out == 0).all() and torch.isneginf(lse).all()
    assert all((g == 0).all() for g in grads)


# ----------------------------------------------------------------------------------------------
# Varlen
# ----------------------------------------------------------------------------------------------


def varlen_reference(q, k, v, cu_q, cu_k, *, slopes=None, **kw):
    """Per-sequence dense reference on the packed float64 tensors (bounds clamped as the kernel does);
    rows outside every sequence: out 0, lse 0 (left as allocated)."""
    total_q, hq = q.shape[0], q.shape[1]
    out = torch.zeros(total_q, hq, v.shape[2], dtype=q.dtype, device=q.device) + q.sum() * 0
    lse = torch.zeros(hq, total_q, dtype=q.dtype, device=q.device)
    outs, lses = [], []
    for b, ((sq, eq), (sk, ek)) in enumerate(zip(clamped_bounds(cu_q, total_q), clamped_bounds(cu_k, k.shape[0]))):
        if eq == sq:
            continue
        sl = None if slopes is None else (slopes if slopes.dim() == 1 else slopes[b])
        o, l = reference(q[None, sq:eq], k[None, sk:ek], v[None, sk:ek], slopes=sl, batch_ids=[b], **kw)
        outs.append((sq, eq, o[0]))
        lses.append((sq, eq, l[0]))
    rows = torch.arange(total_q, device=q.device)
    for sq, eq, o in outs:  # differentiable scatter of each sequence's rows
        sel = ((rows >= sq) & (rows < eq))[:, None, None]
        out = torch.where(sel, torch.nn.functional.pad(o, (0, 0, 0, 0, sq, total_q - eq)), out)
    for sq, eq, l in lses:
        sel = ((rows >= sq) & (rows < eq))[None, :]
        lse = torch.where(sel, torch.nn.functional.pad(l, (sq, total_q - eq), value=0.0), lse)
    return out, lse


def run_varlen(rng, cu_q, cu_k, total_q, total_k, hq, hkv, d, dv, dtype, *, max_q=None, max_k=None, slopes_kind=None,
               backward=True, lse_grad=False, **opts):
    cu_q_t = torch.tensor(cu_q, dtype=torch.int32, device=DEVICE)
    cu_k_t = torch.tensor(cu_k, dtype=torch.int32, device=DEVICE)
    bq = clamped_bounds(cu_q, total_q)
    bk = clamped_bounds(cu_k, total_k)
    max_q = max(e - s for s, e in bq) if max_q is None else max_q
    max_k = max(e - s for s, e in bk) if max_k is None else max_k
    q = randn(rng, (total_q, hq, d)).to(DEVICE, TORCH_DTYPES[dtype])
    k = randn(rng, (total_k, hkv, d)).to(DEVICE, TORCH_DTYPES[dtype])
    v = randn(rng, (total_k, hkv, dv)).to(DEVICE, TORCH_DTYPES[dtype])
    slopes = make_slopes(rng, slopes_kind, len(cu_q) - 1, hq)
    slope_leaves = [] if slopes is None else [slopes.detach().clone().requires_grad_(backward)]
    fx_opts = dict(opts)
    if fx_opts.pop("score_mod", False):
        fx_opts.update(score_mod=wobble_score, score_mod_grad=wobble_score_grad)
    if fx_opts.get("mask") is not None:
        fx_opts["mask_mod"] = MASK_MODS[fx_opts.pop("mask")][0]
    fx_opts.pop("mask", None)
    leaves = [x.detach().clone().requires_grad_(backward) for x in (q, k, v)]
    out, lse = flashx.torch.attention(*leaves, cu_seqlens_q=cu_q_t, cu_seqlens_k=cu_k_t, max_seqlen_q=max_q,
                                      max_seqlen_k=max_k, alibi_slopes=slope_leaves[0] if slope_leaves else None,
                                      return_lse=True, **fx_opts)
    assert tuple(out.shape) == (total_q, hq, dv) and out.dtype == q.dtype
    assert tuple(lse.shape) == (hq, total_q) and lse.dtype == torch.float32
    ref_leaves = [x.detach().double().requires_grad_(backward) for x in (q, k, v)]
    ref_slope_leaves = [x.detach().double().requires_grad_(backward) for x in slope_leaves]
    ref_out, ref_lse = varlen_reference(*ref_leaves, cu_q, cu_k, slopes=ref_slope_leaves[0] if slope_leaves else None,
                                        **opts)
    assert_close(np64(out), np64(ref_out), OUT_TOL[dtype], f"out ({dtype})")
    assert_lse(np64(lse), np64(ref_lse))
    covered = np.zeros(total_q, bool)
    for s, e in bq:
        covered[s:e] = True
    assert (np64(out)[~covered] == 0).all() and (np64(lse)[:, ~covered] == 0).all(), "padding rows must stay 0"
    if not backward:
        return out, lse, None
    grads, ref_grads = weighted_grads(rng, out, lse, ref_out, ref_lse, leaves + slope_leaves,
                                      ref_leaves + ref_slope_leaves, lse_grad)
    for name, g, rg in zip("qkv", grads, ref_grads):
        assert_close(np64(g), np64(rg), GRAD_TOL[dtype], f"d{name} ({dtype})")
    if slopes is not None:  # per sequence ((B, Hq)) or summed over them ((Hq,))
        assert grads[3].shape == slopes.shape
        assert_close(np64(grads[3]), np64(ref_grads[3]), GRAD_TOL[dtype], f"d alibi_slopes ({dtype})")
    assert (np64(grads[0])[~covered] == 0).all(), "dq of padding rows must be 0"
    return out, lse, grads[:3]


ONE_LAUNCH = [
    pytest.param(ODD_B2, Variant(causal=True), "float32", id="causal-b2"),
    pytest.param(ODD, Variant(window=(10, 5), causal=True), "float32", id="window-10-5-causal"),
    pytest.param(TALL, Variant(window=(3, 2)), "float32", id="window-rows-without-keys"),
    pytest.param(ODD_B2, Variant(alibi="bh", softcap=30.0, layout="bhnd"), "float32", id="alibi-softcap-bhnd"),
    pytest.param(SQUARE, Variant(mask="document", causal=True), "float32", id="document-block-map"),
    pytest.param(ODD, Variant(score_mod=True), "float16", id="score-mod-fp16"),
]


@pytest.mark.parametrize("shape, var, dtype", ONE_LAUNCH)
def test_one_backward_launch(rng, one_backward_launch, shape, var, dtype):
    """dK/dV's and dQ's programs sharing one launch (the GPU's choice at 64 < D <= 128 without GQA)
    give the reference's gradients, lse's included."""
    run_and_compare(rng, shape, var, dtype, lse_grad=True)
    assert one_backward_launch and set(one_backward_launch) == {1}


# The one launch's cases, and GQA (two passes, unlike one launch, take it: dK/dV sums the group).
TWO_PASSES = ONE_LAUNCH + [pytest.param(GQA, Variant(window=(10, 5), causal=True), "float32", id="gqa-window-10-5-causal")]


@pytest.mark.parametrize("shape, var, dtype", TWO_PASSES)
def test_dkdv_in_two_passes(rng, dkdv_two_passes, shape, var, dtype):
    """dK/dV as a dV pass then a dK pass (the GPU's choice at D = 256) give the reference's
    gradients, lse's included: each pass writes its own gradient and only that one."""
    run_and_compare(rng, shape, var, dtype, lse_grad=True)
    assert dkdv_two_passes and set(dkdv_two_passes) == {3}


def test_varlen_dkdv_in_two_passes(rng, dkdv_two_passes):
    """Packed sequences (empty ones, padding rows) through dK/dV's two passes."""
    run_varlen(rng, CU_Q, CU_K, TQ, TK, 4, 2, 24, 40, "float32", causal=True, window=(6, -1), lse_grad=True)
    assert dkdv_two_passes and set(dkdv_two_passes) == {3}


# Sequences (q lengths / k lengths): 13/20, 0/5 (empty query), 27/22 (causal: 5 rows without keys);
# 5 padding q rows and 3 padding k rows past cu_seqlens[-1].
CU_Q, CU_K, TQ, TK = [0, 13, 13, 40], [0, 20, 25, 47], 45, 50
# 13/20, 8/0 (keys empty: rows without keys), 19/27; padding as above.
CU_Q2, CU_K2 = [0, 13, 21, 40], [0, 20, 20, 47]

VARLEN_CASES = [
    pytest.param(CU_Q, CU_K, 4, 2, 24, 40, "float32", dict(causal=True), id="causal-gqa-dv40-empty-q-padding"),
    pytest.param(CU_Q2, CU_K2, 2, 2, 24, 24, "float32", dict(window=(5, 2)), id="window-empty-k"),
    pytest.param(CU_Q2, CU_K2, 4, 1, 24, 40, "float32", dict(causal=True, window=(6, -1)), id="causal-window-mqa"),
    pytest.param(CU_Q, CU_K, 2, 2, 24, 40, "float32", dict(slopes_kind="bh", softcap=2.0), id="alibi-bh-softcap"),
    pytest.param(CU_Q2, CU_K2, 2, 1, 24, 40, "float32", dict(mask="holes", score_mod=True), id="mask-mod-score-mod"),
    pytest.param(CU_Q, CU_K, 2, 2, 16, 16, "float32", dict(mask="prefix_lm", causal=True), id="mask-mod-causal"),
    pytest.param(CU_Q, CU_K, 4, 2, 24, 40, "float16", dict(causal=True, slopes_kind="h"), id="causal-alibi-h-fp16"),
    pytest.param(CU_Q2, CU_K2, 2, 2, 40, 24, "bfloat16", dict(window=(8, 8)), id="window-bf16"),
]


@pytest.mark.parametrize("cu_q, cu_k, hq, hkv, d, dv, dtype, opts", VARLEN_CASES)
def test_varlen(rng, cu_q, cu_k, hq, hkv, d, dv, dtype, opts):
    """Packed sequences: each attends within itself (causal/window bottom-right per sequence)."""
    run_varlen(rng, cu_q, cu_k, TQ, TK, hq, hkv, d, dv, dtype, **opts)


def test_varlen_one_backward_launch(rng, one_backward_launch):
    """Packed sequences (empty ones, padding rows) through the one-launch backward."""
    run_varlen(rng, CU_Q, CU_K, TQ, TK, 2, 2, 24, 40, "float32", causal=True, window=(6, -1), lse_grad=True)
    assert one_backward_launch and set(one_backward_launch) == {1}


def test_varlen_lse_gradient(rng):
    run_varlen(rng, CU_Q, CU_K, TQ, TK, 2, 1, 24, 40, "float32", causal=True, lse_grad=True)


def test_varlen_generous_max_seqlen(rng):
    """max_seqlen larger than any sequence only adds idle programs."""
    run_varlen(rng, CU_Q, CU_K, TQ, TK, 2, 2, 16, 16, "float32", max_q=60, max_k=70, causal=True, backward=False)


@pytest.mark.parametrize(
    "cu_q, cu_k",
    [
        # decreasing at the end: the last sequence is clamped to [30, 30), empty
        pytest.param([0, 30, 20], [0, 25, 10], id="decreasing"),
        # overrunning the packed tensors: the last sequence ends at the tensor's end
        pytest.param([0, 20, 100], [0, 25, 200], id="overrunning"),
        # negative start: clamped to 0
        pytest.param([-7, 20, 45], [-3, 25, 50], id="negative-start"),
    ],
)
def test_varlen_clamped_cu_seqlens(rng, cu_q, cu_k):
    """Out-of-range cu_seqlens do not crash or read out of bounds: each sequence is clamped into
    [0, total] (start = clip(cu[b]), end = clip(cu[b+1], start, total)), and the result is that
    of the clamped sequences; outputs and gradients are finite."""
    run_varlen(rng, cu_q, cu_k, TQ, TK, 2, 2, 16, 24, "float32", max_q=TQ, max_k=TK, causal=True)


def test_varlen_strided_cu_seqlens(rng):
    """cu_seqlens given as a strided view (stride 2) must be read through its stride (or be rejected
    naming it): the result equals that of the contiguous copy."""
    cu_q = torch.tensor([0, 99, 13, 99, 13, 99, 40, 99], dtype=torch.int32, device=DEVICE)[::2]
    cu_k = torch.tensor([0, 99, 20, 99, 25, 99, 47, 99], dtype=torch.int32, device=DEVICE)[::2]
    assert cu_q.stride() == (2,)
    q, k, v = (randn(rng, (t, 2, 16)).to(DEVICE) for t in (TQ, TK, TK))
    kw = dict(max_seqlen_q=27, max_seqlen_k=22, causal=True)
    want = flashx.torch.attention(q, k, v, cu_seqlens_q=cu_q.contiguous(), cu_seqlens_k=cu_k.contiguous(), **kw)
    try:
        got = flashx.torch.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **kw)
    except (ValueError, TypeError) as err:
        assert "cu_seqlens" in str(err)
        return
    torch.testing.assert_close(got, want, rtol=0, atol=0, msg="strided cu_seqlens read as if contiguous")


def test_varlen_overlapping_cu_seqlens_is_finite(rng):
    """Decreasing offsets in the middle make clamped sequences overlap (rows written twice): no crash,
    finite outputs and gradients; rows outside every clamped sequence stay 0."""
    cu_q, cu_k = [0, 30, 10, 45], [0, 30, 5, 50]
    q, k, v = (randn(rng, (t, 2, 16)).to(DEVICE).requires_grad_() for t in (TQ, TK, TK))
    out, lse = flashx.torch.attention(q, k, v, cu_seqlens_q=torch.tensor(cu_q, dtype=torch.int32, device=DEVICE),
                                      cu_seqlens_k=torch.tensor(cu_k, dtype=torch.int32, device=DEVICE), max_seqlen_q=TQ,
                                      max_seqlen_k=TK, causal=True, return_lse=True)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    (out * randn(rng, tuple(out.shape)).to(DEVICE)).sum().backward()
    assert all(torch.isfinite(x.grad).all() for x in (q, k, v))


# ----------------------------------------------------------------------------------------------
# Determinism
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, var",
    [
        pytest.param(Shape(1, 37, 45, 4, 1, 24, 40), Variant(causal=True, window=(9, -1)), id="mqa-causal-window"),
        pytest.param(Shape(1, 45, 45, 4, 2, 16, 16), Variant(mask="document", alibi="h", softcap=3.0), id="gqa-mask-alibi-softcap"),
    ],
)
def test_backward_is_deterministic(rng, shape, var):
    """Two backward passes give bitwise equal dq, dk, dv (no atomics), deterministic=True or not."""
    q, k, v = make_qkv(rng, shape, "float16")
    slopes = make_slopes(rng, var.alibi, shape.b, shape.hq)
    w = randn(rng, (shape.b, shape.nq, shape.hq, shape.dv)).to(DEVICE).half()
    results = []
    for deterministic in (False, True):
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        out = flashx.torch.attention(*leaves, deterministic=deterministic, **flashx_kwargs(var, slopes))
        results.append(torch.autograd.grad((out * w).sum(), leaves))
    for name, a, b in zip("qkv", *results):
        assert torch.equal(a, b), f"d{name} differs between two runs"


# ----------------------------------------------------------------------------------------------
# Bad input: ValueError / TypeError naming the argument
# ----------------------------------------------------------------------------------------------


def _t(*shape, dtype=torch.float32):
    return torch.randn(shape, dtype=dtype, device=DEVICE)


def _not_jit_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _qkv4():
    return _t(1, 5, 2, 16), _t(1, 7, 2, 16), _t(1, 7, 2, 16)


def _qkv3():
    return _t(12, 2, 16), _t(14, 2, 16), _t(14, 2, 16)


def _cu(*values, dtype=torch.int32):
    return torch.tensor(values, dtype=dtype, device=DEVICE)


VARLEN_OK = dict(max_seqlen_q=8, max_seqlen_k=8)

BAD = [
    pytest.param(_qkv4, lambda: dict(window=(-2, 0)), ValueError, r"window", id="window-below-minus-1"),
    pytest.param(_qkv4, lambda: dict(window=(3,)), ValueError, r"window", id="window-one-int"),
    pytest.param(_qkv4, lambda: dict(window=(1, 2, 3)), ValueError, r"window", id="window-three-ints"),
    pytest.param(_qkv4, lambda: dict(window=(1.5, 2)), ValueError, r"window", id="window-float"),
    pytest.param(_qkv4, lambda: dict(window=(True, 2)), ValueError, r"window", id="window-bool"),
    pytest.param(_qkv4, lambda: dict(window=4), (ValueError, TypeError), r"window", id="window-int"),
    pytest.param(_qkv4, lambda: dict(alibi_slopes=_t(3)), ValueError, r"alibi_slopes", id="slopes-wrong-heads"),
    pytest.param(_qkv4, lambda: dict(alibi_slopes=_t(2, 2)), ValueError, r"alibi_slopes", id="slopes-wrong-batch"),
    pytest.param(_qkv4, lambda: dict(alibi_slopes=_t(1, 1, 2)), ValueError, r"alibi_slopes", id="slopes-3d"),
    pytest.param(_qkv4, lambda: dict(alibi_slopes=_t(2, dtype=torch.float16)), ValueError, r"alibi_slopes.*float32", id="slopes-fp16"),
    pytest.param(_qkv4, lambda: dict(alibi_slopes=_t(2, dtype=torch.float64)), ValueError, r"alibi_slopes.*float32", id="slopes-fp64"),
    pytest.param(_qkv4, lambda: dict(alibi_slopes=[0.5, 0.25]), TypeError, r"alibi_slopes", id="slopes-list"),
    pytest.param(_qkv4, lambda: dict(softcap=0.0), ValueError, r"softcap", id="softcap-0"),
    pytest.param(_qkv4, lambda: dict(softcap=-1.0), ValueError, r"softcap", id="softcap-negative"),
    pytest.param(_qkv4, lambda: dict(softcap=float("inf")), ValueError, r"softcap", id="softcap-inf"),
    pytest.param(_qkv4, lambda: dict(softcap="2"), ValueError, r"softcap", id="softcap-str"),
    pytest.param(_qkv4, lambda: dict(mask_mod=_not_jit_mask), TypeError, r"mask_mod.*triton\.jit", id="mask-mod-python"),
    pytest.param(_qkv4, lambda: dict(mask_mod=lambda b, h, q, k: q >= k), TypeError, r"mask_mod", id="mask-mod-lambda"),
    pytest.param(_qkv4, lambda: dict(score_mod=torch.tanh), TypeError, r"score_mod.*triton\.jit", id="score-mod-torch-fn"),
    pytest.param(_qkv4, lambda: dict(score_mod=wobble_score, score_mod_grad=math.cos), TypeError, r"score_mod_grad", id="score-mod-grad-python"),
    pytest.param(_qkv4, lambda: dict(score_mod_grad=wobble_score_grad), ValueError, r"score_mod_grad", id="score-mod-grad-alone"),
    pytest.param(_qkv4, lambda: dict(deterministic=1), TypeError, r"deterministic", id="deterministic-int"),
    pytest.param(_qkv4, lambda: dict(max_seqlen_q=5, max_seqlen_k=7), ValueError, r"max_seqlen", id="max-seqlen-without-varlen"),
    # varlen
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), cu_seqlens_k=_cu(0, 7, 14)), ValueError, r"max_seqlen_q", id="max-seqlen-missing"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), cu_seqlens_k=_cu(0, 7, 14), max_seqlen_q=8), ValueError, r"max_seqlen_k", id="max-seqlen-k-missing"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), cu_seqlens_k=_cu(0, 7, 14), max_seqlen_q=8.0, max_seqlen_k=8), ValueError, r"max_seqlen_q", id="max-seqlen-float"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), cu_seqlens_k=_cu(0, 7, 14), max_seqlen_q=-1, max_seqlen_k=8), ValueError, r"max_seqlen_q", id="max-seqlen-negative"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12, dtype=torch.int64), cu_seqlens_k=_cu(0, 7, 14), **VARLEN_OK), TypeError, r"cu_seqlens_q.*int64", id="cu-q-int64"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), cu_seqlens_k=_cu(0.0, 7.0, 14.0, dtype=torch.float32), **VARLEN_OK), TypeError, r"cu_seqlens_k.*float32", id="cu-k-float"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), cu_seqlens_k=_cu(0, 7, 10, 14), **VARLEN_OK), ValueError, r"cu_seqlens_q and cu_seqlens_k.*length", id="cu-length-mismatch"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0), cu_seqlens_k=_cu(0), **VARLEN_OK), ValueError, r"cu_seqlens", id="cu-length-1"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12).reshape(1, 3), cu_seqlens_k=_cu(0, 7, 14), **VARLEN_OK), ValueError, r"cu_seqlens_q.*1-D", id="cu-2d"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), **VARLEN_OK), ValueError, r"cu_seqlens_q and cu_seqlens_k", id="cu-k-missing"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=[0, 5, 12], cu_seqlens_k=_cu(0, 7, 14), **VARLEN_OK), TypeError, r"cu_seqlens_q", id="cu-list"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), cu_seqlens_k=_cu(0, 7, 14), layout="bhnd", **VARLEN_OK), ValueError, r"layout", id="varlen-bhnd"),
    pytest.param(_qkv4, lambda: dict(cu_seqlens_q=_cu(0, 5), cu_seqlens_k=_cu(0, 7), **VARLEN_OK), ValueError, r"\bq\b.*3-D", id="varlen-4d-q"),
    # block masks
    pytest.param(_qkv4, lambda: dict(block_mask=flashx.torch.create_block_mask(document_mask, 1, 2, 6, 7, device=DEVICE)),
                 ValueError, r"block_mask was built for .*Nq=6", id="block-mask-other-nq"),
    pytest.param(_qkv4, lambda: dict(block_mask=flashx.torch.create_block_mask(document_mask, 3, None, 5, 7, device=DEVICE)),
                 ValueError, r"block_mask was built for B=3", id="block-mask-other-batch"),
    pytest.param(_qkv4, lambda: dict(block_mask=flashx.torch.create_block_mask(document_mask, None, 4, 5, 7, device=DEVICE)),
                 ValueError, r"block_mask was built for .*H=4", id="block-mask-other-heads"),
    pytest.param(_qkv4, lambda: dict(causal=True, block_mask=flashx.torch.create_block_mask(document_mask, None, None, 5, 7, device=DEVICE)),
                 ValueError, r"causal/window differ from the block_mask", id="block-mask-without-causal"),
    pytest.param(_qkv4, lambda: dict(mask_mod=holes_mask, block_mask=flashx.torch.create_block_mask(document_mask, None, None, 5, 7, device=DEVICE)),
                 ValueError, r"mask_mod differs", id="block-mask-other-mask-mod"),
    pytest.param(_qkv4, lambda: dict(block_mask="document"), TypeError, r"block_mask", id="block-mask-str"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), cu_seqlens_k=_cu(0, 7, 14), **VARLEN_OK,
                                     block_mask=flashx.torch.create_block_mask(document_mask, None, None, 12, 14, device=DEVICE)),
                 ValueError, r"varlen.*block_mask", id="varlen-block-mask"),
]


@pytest.mark.parametrize("make_qkv_, make_kwargs, error, match", BAD)
def test_bad_input_raises(make_qkv_, make_kwargs, error, match):
    """Each bad option raises the documented error, naming the argument."""
    with pytest.raises(error, match=match):
        flashx.torch.attention(*make_qkv_(), **make_kwargs())


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        pytest.param((_not_jit_mask, 1, 1, 5, 7), {}, TypeError, r"mask_mod.*triton\.jit", id="python-mask-mod"),
        pytest.param((None, 1, 1, 5, 7), {}, TypeError, r"mask_mod", id="no-mask-mod"),
        pytest.param((document_mask, 0, 1, 5, 7), {}, ValueError, r"batch", id="batch-0"),
        pytest.param((document_mask, 1, 1, -5, 7), {}, ValueError, r"seqlen_q", id="nq-negative"),
        pytest.param((document_mask, 1, 1, 5, 7), dict(window=(-3, 1)), ValueError, r"window", id="window"),
        pytest.param((document_mask, 1, 1, 5, 7), dict(causal=1), TypeError, r"causal", id="causal-int"),
        pytest.param((document_mask, 1, 1, 5, 7), dict(blocks=(24, 16)), ValueError, r"block_m", id="blocks-not-pow2"),
        pytest.param((document_mask, 1, 1, 5, 7), dict(blocks=(16, 8)), ValueError, r"block_n", id="blocks-too-small"),
    ],
)
def test_create_block_mask_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        flashx.torch.create_block_mask(*args, device=DEVICE, **kwargs)


# ----------------------------------------------------------------------------------------------
# GPU only: training-sized bf16 shapes, bounded by a small factor of torch's own bf16 error
# ----------------------------------------------------------------------------------------------

# Gradients: the same factor-of-native idea as conftest's TOLERANCES, with a looser cap.
GRAD_TOLERANCES = {"bfloat16": Tolerance(factor=3.0, floor=5e-3, cap=5e-2), "float16": Tolerance(3.0, 5e-4, 5e-3)}


def _sdpa_native(q, k, v, visible, *, backward_w=None):
    """torch SDPA in the inputs' dtype with an explicit bool mask [.., Nq, Nkv] (bnhd in and out);
    with backward_w also (dq, dk, dv) of sum(out * w)."""
    leaves = [x.detach().clone().requires_grad_(backward_w is not None) for x in (q, k, v)]
    group = q.shape[2] // k.shape[2]
    qh, kh, vh = (x.repeat_interleave(g, dim=2).transpose(1, 2) for x, g in zip(leaves, (1, group, group)))
    out = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=visible).transpose(1, 2)
    if backward_w is None:
        return out, None
    return out, torch.autograd.grad((out.float() * backward_w).sum(), leaves)


def _gpu_check(q, k, v, visible_np, fx_kwargs, ref_kwargs, dtype, backward=False, wrt="qkv"):
    """flashx vs the float64 reference (on the GPU), bounded by SDPA's own error in `dtype`;
    backward: the gradients of those of q, k, v that `wrt` names (the others take none)."""
    gen = torch.Generator(device="cuda").manual_seed(1)
    w = torch.randn(*q.shape[:3], v.shape[-1], generator=gen, device="cuda") if backward else None
    leaves = [x.detach().clone().requires_grad_(backward and name in wrt) for name, x in zip("qkv", (q, k, v))]
    out = flashx.torch.attention(*leaves, **fx_kwargs)
    ref_leaves = [x.detach().double().requires_grad_(backward) for x in (q, k, v)]
    ref, _ = reference(*ref_leaves, **ref_kwargs)
    visible = torch.from_numpy(np.ascontiguousarray(visible_np)).cuda()
    assert visible.any(-1).all(), "GPU cases are chosen so that every row sees a key (SDPA gives NaN there)"
    native, native_grads = _sdpa_native(q, k, v, visible, backward_w=w)
    assert TOLERANCES[dtype].bound(rel_error(np64(native), np64(ref))) >= rel_error(np64(out), np64(ref)), \
        f"out error {rel_error(np64(out), np64(ref)):.3e} vs native {rel_error(np64(native), np64(ref)):.3e}"
    if backward:
        picked = [i for i, name in enumerate("qkv") if name in wrt]
        grads = torch.autograd.grad((out.float() * w).sum(), [leaves[i] for i in picked])
        ref_grads = torch.autograd.grad((ref * w.double()).sum(), [ref_leaves[i] for i in picked])
        for name, g, ng, rg in zip(wrt, grads, [native_grads[i] for i in picked], ref_grads):
            native_err = rel_error(np64(ng), np64(rg))
            err = rel_error(np64(g), np64(rg))
            bound = GRAD_TOLERANCES[dtype].bound(native_err)
            assert err <= bound, f"d{name}: flashx {err:.3e} > bound {bound:.3e} (native {native_err:.3e})"


def _gpu_qkv(seed, s: Shape, dtype="bfloat16"):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return tuple(torch.randn(x, generator=gen, device="cuda").to(TORCH_DTYPES[dtype])
                 for x in ((s.b, s.nq, s.hq, s.d), (s.b, s.nkv, s.hkv, s.d), (s.b, s.nkv, s.hkv, s.dv)))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape, window, causal",
    [
        pytest.param(Shape(2, 2048, 2048, 8, 8, 128, 128), (256, 0), False, id="n2048-d128-window-256-0"),
        pytest.param(Shape(2, 1000, 1500, 8, 2, 64, 64), (128, 64), True, id="gqa-q1000-kv1500-d64-window-causal"),
    ],
)
def test_gpu_window(shape, window, causal):
    q, k, v = _gpu_qkv(11, shape)
    vis = window_visible(shape.nq, shape.nkv, window, causal)
    _gpu_check(q, k, v, vis, dict(window=window, causal=causal), dict(window=window, causal=causal), "bfloat16")


@triton.jit
def long_documents(b, h, q_idx, kv_idx):
    """Documents of 300 tokens."""
    return (q_idx // 300) == (kv_idx // 300)


@pytest.mark.gpu
def test_gpu_document_mask():
    """mask_mod (document mask over 2048 positions, documents of 300 tokens), causal, forward and
    backward; then the same through a create_block_mask map."""
    s = Shape(2, 2048, 2048, 8, 8, 64, 64)
    q, k, v = _gpu_qkv(12, s)
    pos = np.arange(2048)
    vis = ((pos[:, None] // 300) == (pos[None, :] // 300)) & window_visible(2048, 2048, None, True)
    ref_kw = dict(mask=lambda b, h, qi, kj: (qi // 300) == (kj // 300), causal=True)
    _gpu_check(q, k, v, vis, dict(mask_mod=long_documents, causal=True), ref_kw, "bfloat16", backward=True)
    bm = flashx.torch.create_block_mask(long_documents, None, None, 2048, 2048, causal=True, device="cuda")
    _gpu_check(q, k, v, vis, dict(block_mask=bm, causal=True), ref_kw, "bfloat16")


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape, slopes_shape",
    [
        pytest.param(Shape(2, 1000, 1000, 8, 2, 128, 128), (8,), id="gqa-8:2-n1000-d128-slopes-h"),
        pytest.param(Shape(2, 700, 900, 4, 4, 64, 64), (2, 4), id="q700-kv900-d64-slopes-bh"),
    ],
)
def test_gpu_alibi_slopes_gradient(shape, slopes_shape):
    """ALiBi's slopes' gradient (with q, k and v's), causal, bf16 at training sizes, against float64,
    each bounded by SDPA's own error in bf16 where ALiBi and the causal mask are a float bias
    (its gradient reaching the slopes through autograd)."""
    s = shape
    q, k, v = _gpu_qkv(13, s)
    gen = torch.Generator(device="cuda").manual_seed(2)
    slopes = torch.rand(slopes_shape, generator=gen, device="cuda") * 0.05 + 0.01
    w = torch.randn(*q.shape[:3], s.dv, generator=gen, device="cuda")
    leaves = [x.detach().clone().requires_grad_() for x in (*(q, k, v), slopes)]
    out = flashx.torch.attention(*leaves[:3], causal=True, alibi_slopes=leaves[3])
    grads = torch.autograd.grad((out.float() * w).sum(), leaves)
    ref_leaves = [x.detach().double().requires_grad_() for x in (*(q, k, v), slopes)]
    ref, _ = reference(*ref_leaves[:3], causal=True, slopes=ref_leaves[3])
    ref_grads = torch.autograd.grad((ref * w.double()).sum(), ref_leaves)
    native_leaves = [x.detach().clone().requires_grad_() for x in (*(q, k, v), slopes)]
    nq, hq, group = s.nq, s.hq, s.hq // s.hkv
    distance = torch.from_numpy(alibi_distance(nq, s.nkv)).float().cuda()
    visible = torch.from_numpy(np.ascontiguousarray(window_visible(nq, s.nkv, None, True))).cuda()
    sl = native_leaves[3].expand(s.b, hq) if len(slopes_shape) == 1 else native_leaves[3]
    bias = (-(sl[:, :, None, None] * distance)).masked_fill(~visible, float("-inf")).to(q.dtype)
    qh, kh, vh = (x.repeat_interleave(g, dim=2).transpose(1, 2) for x, g in zip(native_leaves[:3], (1, group, group)))
    native = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=bias).transpose(1, 2)
    native_grads = torch.autograd.grad((native.float() * w).sum(), native_leaves)
    native_err = rel_error(np64(native), np64(ref))
    assert rel_error(np64(out), np64(ref)) <= TOLERANCES["bfloat16"].bound(native_err), "out"
    for name, g, ng, rg in zip(("q", "k", "v", "alibi_slopes"), grads, native_grads, ref_grads):
        native_err = rel_error(np64(ng), np64(rg))
        err = rel_error(np64(g), np64(rg))
        bound = GRAD_TOLERANCES["bfloat16"].bound(native_err)
        assert err <= bound, f"d{name}: flashx {err:.3e} > bound {bound:.3e} (native {native_err:.3e})"


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape, causal",
    [
        pytest.param(Shape(2, 1024, 1024, 8, 2, 128, 128), True, id="gqa-8:2-n1024-d128-causal"),
        pytest.param(Shape(1, 2048, 2048, 16, 4, 64, 64), True, id="gqa-16:4-n2048-d64-causal"),
        pytest.param(Shape(2, 1000, 1200, 8, 8, 64, 64), False, id="q1000-kv1200-d64"),
        # D = 256: dK/dV in two passes (dV, then dK) and dQ apart, with D = 256's tiles
        pytest.param(Shape(1, 1000, 1300, 4, 4, 256, 256), False, id="q1000-kv1300-d256"),
        pytest.param(Shape(2, 777, 777, 4, 4, 256, 256), True, id="n777-d256-causal"),
        pytest.param(Shape(1, 700, 900, 8, 2, 256, 256), True, id="gqa-8:2-q700-kv900-d256-causal"),
    ],
)
def test_gpu_backward(shape, causal):
    q, k, v = _gpu_qkv(13, shape)
    vis = window_visible(shape.nq, shape.nkv, None, causal)
    _gpu_check(q, k, v, vis, dict(causal=causal), dict(causal=causal), "bfloat16", backward=True)


@pytest.mark.gpu
@pytest.mark.parametrize("wrt", ["q", "kv", "v"], ids=["kv-frozen", "q-frozen", "qk-frozen"])
@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(Shape(2, 1024, 1024, 8, 8, 128, 128), id="n1024-d128"),  # Gluon routes, or one fused launch
        pytest.param(Shape(1, 1000, 1300, 8, 2, 64, 64), id="gqa-q1000-kv1300-d64"),
        pytest.param(Shape(1, 777, 777, 4, 4, 256, 256), id="n777-d256"),  # dK/dV in two passes
    ],
)
def test_gpu_backward_of_some_inputs(shape, wrt):
    """A backward in some of q, k, v (the others frozen) runs only the passes it needs (dQ's
    alone, or dK/dV's alone) and gives those gradients within SDPA's bound, causal, bf16."""
    q, k, v = _gpu_qkv(15, shape)
    vis = window_visible(shape.nq, shape.nkv, None, True)
    _gpu_check(q, k, v, vis, dict(causal=True), dict(causal=True), "bfloat16", backward=True, wrt=wrt)


@pytest.mark.gpu
def test_gpu_varlen():
    """Packed sequences of training lengths, causal, GQA, bf16: per sequence within the native bound."""
    lens_q = [700, 1, 1300, 0, 513]
    lens_k = [700, 64, 1300, 17, 600]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    s = Shape(1, int(cu_q[-1]) + 9, int(cu_k[-1]), 8, 2, 128, 128)
    q, k, v = (x[0] for x in _gpu_qkv(14, s))
    out = flashx.torch.attention(q, k, v, cu_seqlens_q=torch.from_numpy(cu_q).cuda(),
                                 cu_seqlens_k=torch.from_numpy(cu_k).cuda(), max_seqlen_q=max(lens_q),
                                 max_seqlen_k=max(lens_k), causal=True)
    assert (out[cu_q[-1]:] == 0).all()
    for b in range(len(lens_q)):
        sq, eq, sk, ek = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if eq == sq:
            continue
        qs, ks, vs = q[None, sq:eq], k[None, sk:ek], v[None, sk:ek]
        ref, _ = reference(qs.double(), ks.double(), vs.double(), causal=True)
        vis = torch.from_numpy(window_visible(eq - sq, ek - sk, None, True)).cuda()
        native, _ = _sdpa_native(qs, ks, vs, vis)
        bound = TOLERANCES["bfloat16"].bound(rel_error(np64(native), np64(ref)))
        err = rel_error(np64(out[None, sq:eq]), np64(ref))
        assert err <= bound, f"sequence {b}: {err:.3e} > {bound:.3e}"


@pytest.mark.gpu
@pytest.mark.parametrize("shape, fields, dtype", [pytest.param(Shape(*s), v, d, id=i) for i, s, v, d in GLUON_MASKED_CASES])
@pytest.mark.usefixtures("keys_unsplit")
def test_gpu_gluon_forward_windows_and_maps(forward_kernels, shape, fields, dtype):
    """On Hopper, calls with a sliding window or a block map (mask_mod) at the head dims
    tuning.GLUON_MASKED_TMA_ROUTE routes take the Gluon forward: out, lse and the gradients (whose
    backward reads that lse) against float64, rows without keys exactly 0."""
    from flashx.core import gluon_forward

    require_sm90("the Gluon forward's kernels")
    run_and_compare(np.random.default_rng(zlib.crc32(repr((shape, fields)).encode())), shape, Variant(**fields), dtype)
    assert forward_kernels == [gluon_forward.gluon_attention_forward_kernel]


def test_block_mask_under_torch_compile():
    """A block mask built outside torch.compile(fullgraph=True) goes through it, forward and
    backward, with eager's gradients bit for bit; mask_mod alone inside it asks for one."""
    from variants_common import document_mask

    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 37, 2, 16, generator=gen).to(DEVICE).requires_grad_() for _ in range(3))
    block_mask = flashx.torch.create_block_mask(document_mask, None, None, 37, 37, causal=True, device=DEVICE)

    def loss(q, k, v):
        return flashx.torch.attention(q, k, v, causal=True, block_mask=block_mask).sum()

    compiled = torch.autograd.grad(torch.compile(loss, fullgraph=True, backend="aot_eager")(q, k, v), (q, k, v))
    eager = torch.autograd.grad(loss(q, k, v), (q, k, v))
    for name, got, want in zip("qkv", compiled, eager):
        assert torch.equal(got, want), f"d{name}"
    with pytest.raises(Exception, match="create_block_mask outside"):
        torch.compile(lambda q: flashx.torch.attention(q, k, v, mask_mod=document_mask), fullgraph=True, backend="eager")(q)


def test_score_mod_under_torch_compile():
    """A score_mod (with score_mod_grad) used once eagerly goes through torch.compile(fullgraph=True),
    forward and backward, with eager's outputs and gradients bit for bit (README: "a score_mod used
    inside a compiled region must have been used once eagerly first")."""
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(1, 21, 2, 16, generator=gen).to(DEVICE).requires_grad_() for _ in range(3))

    def loss(q, k, v):
        return flashx.torch.attention(q, k, v, causal=True, score_mod=wobble_score, score_mod_grad=wobble_score_grad).sum()

    eager = torch.autograd.grad(loss(q, k, v), (q, k, v))
    _compare_compiled_score_mod(loss, eager, q, k, v)


def _compare_compiled_score_mod(loss, eager, q, k, v):
    """loss's gradients under torch.compile equal eager's, bit for bit; before torch 2.13, flashx's
    own error instead (on a GPU host that Dynamo can neither hash, type nor take the id of a
    @triton.jit function: NOTES v0.50)."""
    compiled_loss = torch.compile(loss, fullgraph=True, backend="aot_eager")
    if torch.__version__ < (2, 13):
        with pytest.raises(Exception, match="cannot read a @triton.jit score_mod"):
            compiled_loss(q, k, v)
        return
    compiled = torch.autograd.grad(compiled_loss(q, k, v), (q, k, v))
    for name, got, want in zip("qkv", compiled, eager):
        assert torch.equal(got, want), f"d{name}"


def test_triton_functions_under_torch_compile_as_on_a_gpu_host(monkeypatch):
    """With Dynamo told that Triton runs (as on a GPU host, where it wraps a @triton.jit function
    as a TritonKernelVariable) and real JITFunctions as the user's functions: a block mask from
    create_block_mask and a score_mod used once eagerly go through torch.compile(fullgraph=True)
    with eager's gradients, and mask_mod alone asks for a block mask. On the GPU's torch 2.11 the
    first two failed in Dynamo ("TritonKernelVariable() has no type", 2026-12-04); the CPU's
    interpreted functions never showed it."""
    import torch.utils._triton
    from triton.runtime.jit import JITFunction

    from variants_common import prefix_lm_mask

    # Functions that call no other @triton.jit function: Triton cannot key a JITFunction that
    # calls an interpreted one.
    real = {name: JITFunction(f.fn) if INTERPRETED else f for name, f in
            dict(mask=prefix_lm_mask, score=wobble_score, grad=wobble_score_grad).items()}
    monkeypatch.setattr(torch.utils._triton, "has_triton", lambda: True)
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(13)
    q, k, v = (torch.randn(1, 27, 2, 16, generator=gen).to(DEVICE).requires_grad_() for _ in range(3))
    block_mask = flashx.torch.create_block_mask(real["mask"], None, None, 27, 27, causal=True, device=DEVICE)

    def masked(q, k, v):
        return flashx.torch.attention(q, k, v, causal=True, block_mask=block_mask).sum()

    eager = torch.autograd.grad(masked(q, k, v), (q, k, v))
    compiled = torch.autograd.grad(torch.compile(masked, fullgraph=True, backend="aot_eager")(q, k, v), (q, k, v))
    for name, got, want in zip("qkv", compiled, eager):
        assert torch.equal(got, want), f"block mask: d{name}"

    def scored(q, k, v):
        return flashx.torch.attention(q, k, v, causal=True, score_mod=real["score"], score_mod_grad=real["grad"]).sum()

    _compare_compiled_score_mod(scored, torch.autograd.grad(scored(q, k, v), (q, k, v)), q, k, v)
    with pytest.raises(Exception, match="create_block_mask outside"):
        torch.compile(lambda q: flashx.torch.attention(q, k, v, mask_mod=real["mask"]), fullgraph=True, backend="eager")(q)
    torch._dynamo.reset()


def test_compiled_block_mask_is_found_by_id(monkeypatch):
    """Under torch.compile a map from create_block_mask, with no eager call first, reaches the op
    through the id() of its spec, registered by create_block_mask, not by a lookup that hashes
    the spec: Dynamo (torch 2.11, GPU) could not hash a spec holding a @triton.jit mask_mod.
    Forward equal to eager's, bit for bit."""
    import importlib

    from variants_common import document_mask

    module = importlib.import_module("flashx.torch.attention")
    torch._dynamo.reset()
    q, k, v = (torch.randn(1, 29, 2, 16, generator=torch.Generator().manual_seed(s)).to(DEVICE) for s in (3, 4, 5))
    block_mask = flashx.torch.create_block_mask(document_mask, None, None, 29, 29, causal=True, device=DEVICE)
    key = module._function_ids[module._object_ids((None, None, None, block_mask.spec))]
    assert module._functions[key][3] is block_mask.spec
    lookup = module._function_key

    def eager_only(options):
        assert not torch.compiler.is_compiling(), "compiled code looked the block mask up"
        return lookup(options)

    monkeypatch.setattr(module, "_function_key", eager_only)
    fn = lambda q: flashx.torch.attention(q, k, v, causal=True, block_mask=block_mask)  # noqa: E731
    assert torch.equal(torch.compile(fn, fullgraph=True, backend="eager")(q), fn(q))
