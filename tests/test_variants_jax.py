"""flashx.jax.attention's variants inside jax.jit, forward and grads, against a float64 jax.grad reference.

The same variants as test_variants.py (window, ALiBi, softcap, score_mod, mask_mod with automatic and
reused block maps, varlen, combinations), each called inside jax.jit with jax.value_and_grad. The
reference is plain jax.numpy in float64 (jax_enable_x64 switched on only around the reference
computation) on the upcast rounded inputs. Bounds: OUT_TOL / GRAD_TOL / LSE_TOL in variants_common.
"""
from __future__ import annotations

import math
import sys
import zlib
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import flashx.jax  # noqa: E402  (flashx before triton: variants_common defines @triton.jit functions)
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
    expected_block_map,
    holes_mask,
    index_grids,
    nothing_mask,
    window_visible,
    wobble_score,
    wobble_score_grad,
    wobble_score_terms,
)

if not INTERPRETED:
    pytest.importorskip("jax_triton", reason="flashx.jax runs through jax-triton on the GPU")

JAX_DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}


@dataclass(frozen=True)
class Variant:
    causal: bool = False
    window: Optional[tuple] = None
    alibi: Optional[str] = None  # "h": (Hq,), "bh": (B, Hq)
    softcap: Optional[float] = None
    score_mod: bool = False
    mask: Optional[str] = None
    layout: str = "bnhd"
    input_scale: float = 1.0


# ----------------------------------------------------------------------------------------------
# Inputs and the float64 reference
# ----------------------------------------------------------------------------------------------


def randn(rng, shape, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def make_qkv(rng, s: Shape, dtype: str, layout="bnhd", scale=1.0):
    shapes = [(s.b, s.nq, s.hq, s.d), (s.b, s.nkv, s.hkv, s.d), (s.b, s.nkv, s.hkv, s.dv)]
    if layout == "bhnd":
        shapes = [(x[0], x[2], x[1], x[3]) for x in shapes]
    return tuple(jnp.asarray(randn(rng, x, scale), JAX_DTYPES[dtype]) for x in shapes)


def make_slopes(rng, kind, b, hq):
    if kind is None:
        return None
    return jnp.asarray(rng.uniform(0.05, 0.6, (hq,) if kind == "h" else (b, hq)).astype(np.float32))


def f64(x) -> np.ndarray:
    return np.asarray(np.asarray(x, np.float32) if np.asarray(x).dtype == jnp.bfloat16 else x, np.float64)


def reference(q, k, v, *, causal=False, scale=None, window=None, slopes=None, softcap=None, score_mod=False,
              mask=None, batch_ids=None, bottom_right=True):
    """float64 jnp attention on (B, N, H, D): (out (B, Nq, Hq, Dv), lse (B, Hq, Nq)); call under enable_x64.

    score = q.k * scale -> score_mod (wobble twin) -> softcap -> alibi -> masks; rows without keys:
    out 0, lse -inf, no gradient.
    """
    bsz, nq, hq, d = q.shape
    nkv, hkv, dv = k.shape[1], k.shape[2], v.shape[3]
    if nkv == 0 or nq == 0:
        return jnp.zeros((bsz, nq, hq, dv), q.dtype) + 0 * q.sum(), jnp.full((bsz, hq, nq), -jnp.inf, q.dtype)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    group = hq // hkv
    k = jnp.repeat(k, group, axis=2)
    v = jnp.repeat(v, group, axis=2)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * scale
    b, h, qi, kj = index_grids(np.arange(bsz) if batch_ids is None else np.asarray(batch_ids), np.arange(hq), nq, nkv)
    if score_mod:
        s = s + 0.5 * jnp.sin(s) + wobble_score_terms(b, h, qi, kj)
    if softcap is not None:
        s = softcap * jnp.tanh(s / softcap)
    if slopes is not None:
        sl = jnp.broadcast_to(jnp.asarray(slopes, jnp.float64), (bsz, hq))  # jnp: differentiable in the slopes
        s = s - sl[:, :, None, None] * alibi_distance(nq, nkv, bottom_right)
    visible = window_visible(nq, nkv, window, causal, bottom_right)[None, None]
    if mask is not None:
        mask_np = MASK_MODS[mask][1] if isinstance(mask, str) else mask
        visible = visible & mask_np(b, h, qi, kj)
    s = jnp.where(np.broadcast_to(visible, s.shape), s, -jnp.inf)
    m = jax.lax.stop_gradient(s.max(-1, keepdims=True))
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    p = jnp.exp(s - m)
    l = p.sum(-1, keepdims=True)
    empty = l == 0
    safe_l = jnp.where(empty, 1.0, l)
    out = jnp.einsum("bhqk,bkhd->bqhd", p / safe_l, v)
    lse = jnp.where(empty, -jnp.inf, jnp.log(safe_l) + m)[..., 0]
    return out, lse


def finite_or_zero(x):
    return jnp.where(jnp.isfinite(x), x, 0.0)


def loss_of(fn, w_out, w_lse, lse_grad):
    """sum(out * w_out) [+ sum(finite lse * w_lse)] as a function of fn's arguments (q, k, v, and
    whatever else fn takes), with (out, lse) as aux."""
    def loss(*args):
        out, lse = fn(*args)
        total = (out.astype(w_out.dtype) * w_out).sum()
        if lse_grad:
            total = total + (finite_or_zero(lse).astype(w_lse.dtype) * w_lse).sum()
        return total, (out, lse)
    return loss


def reference_results(q, k, v, w_out, w_lse, lse_grad, to_bnhd, from_bnhd, slopes=None, **kw):
    """(out, lse, (dq, dk, dv[, d slopes])) of the float64 reference as NumPy, x64 switched on
    only here; the slopes' gradient where slopes are given."""
    with jax.enable_x64(True):
        args = [jnp.asarray(f64(x)) for x in (q, k, v)] + ([] if slopes is None else [jnp.asarray(f64(slopes))])
        w_out64, w_lse64 = jnp.asarray(f64(w_out)), jnp.asarray(f64(w_lse))

        def fn(q, k, v, slopes=None):
            out, lse = reference(*(to_bnhd(x) for x in (q, k, v)), slopes=slopes, **kw)
            return from_bnhd(out), lse

        # jitted: one XLA compilation instead of one per eager op
        (_, (out, lse)), grads = jax.jit(jax.value_and_grad(loss_of(fn, w_out64, w_lse64, lse_grad),
                                                            argnums=tuple(range(len(args))), has_aux=True))(*args)
        return np.asarray(out), np.asarray(lse), tuple(np.asarray(g) for g in grads)


def swap_if(layout):
    return (lambda x: jnp.swapaxes(x, 1, 2)) if layout == "bhnd" else (lambda x: x)


def run_and_compare(rng, shape: Shape, var: Variant, dtype: str, *, lse_grad=False, block_mask=None, backward=True):
    q, k, v = make_qkv(rng, shape, dtype, var.layout, var.input_scale)
    slopes = make_slopes(rng, var.alibi, shape.b, shape.hq)
    opts = dict(causal=var.causal, window=var.window, softcap=var.softcap, layout=var.layout)
    if var.score_mod:
        opts.update(score_mod=wobble_score, score_mod_grad=wobble_score_grad)
    if var.mask is not None and block_mask is None:
        opts.update(mask_mod=MASK_MODS[var.mask][0])
    out_shape = (*q.shape[:3], shape.dv)
    w_out = jnp.asarray(randn(rng, out_shape))
    w_lse = jnp.asarray(randn(rng, (shape.b, shape.hq, shape.nq)))

    @jax.jit
    def fx(q, k, v, slopes, bm, w_out, w_lse):
        fn = lambda q, k, v, s: flashx.jax.attention(q, k, v, alibi_slopes=s, block_mask=bm, return_lse=True, **opts)  # noqa: E731
        if not backward:
            return fn(q, k, v, slopes), None
        argnums = (0, 1, 2) if slopes is None else (0, 1, 2, 3)  # the slopes' gradient too, where they exist
        (_, aux), grads = jax.value_and_grad(loss_of(fn, w_out, w_lse, lse_grad), argnums=argnums, has_aux=True)(
            q, k, v, slopes)
        return aux, grads

    (out, lse), grads = fx(q, k, v, slopes, block_mask, w_out, w_lse)
    assert out.dtype == q.dtype and out.shape == out_shape
    assert lse.dtype == jnp.float32 and lse.shape == (shape.b, shape.hq, shape.nq)
    swap = swap_if(var.layout)
    ref_out, ref_lse, ref_grads = reference_results(
        q, k, v, w_out, w_lse, lse_grad, swap, swap, causal=var.causal, window=var.window,
        slopes=None if slopes is None else np.asarray(slopes), softcap=var.softcap, score_mod=var.score_mod, mask=var.mask,
    )
    assert_close(f64(out), ref_out, OUT_TOL[dtype], f"out ({dtype})")
    assert_lse(f64(lse), ref_lse)
    empty = np.isneginf(ref_lse)
    if empty.any():
        bnhd = f64(swap(out))
        assert (bnhd.transpose(0, 2, 1, 3)[empty] == 0).all(), "rows without keys must be 0"
    if backward:
        for name, x, g, rg in zip("qkv", (q, k, v), grads, ref_grads):
            assert g.dtype == x.dtype and g.shape == x.shape
            assert_close(f64(g), rg, GRAD_TOL[dtype], f"d{name} ({dtype})")
        if slopes is not None:
            assert grads[3].dtype == jnp.float32 and grads[3].shape == slopes.shape
            assert_close(f64(grads[3]), ref_grads[3], GRAD_TOL[dtype], f"d alibi_slopes ({dtype})")
    return out, lse, grads if grads is None else grads[:3]


# ----------------------------------------------------------------------------------------------
# Variants
# ----------------------------------------------------------------------------------------------

ODD = Shape(1, 37, 45, 2, 2, 24, 40)
ODD_B2 = Shape(2, 37, 45, 2, 2, 24, 40)
SQUARE = Shape(1, 45, 45, 2, 2, 24, 24)
TALL = Shape(1, 45, 29, 2, 2, 24, 40)
GQA = Shape(1, 37, 45, 4, 2, 24, 40)

VARIANTS = [
    pytest.param(ODD, Variant(window=(8, 4)), "float32", id="window-8-4"),
    pytest.param(ODD, Variant(window=(-1, 3), causal=True), "float32", id="window-inf-3-causal"),
    pytest.param(ODD, Variant(window=(6, -1), layout="bhnd"), "float16", id="window-6-inf-bhnd-fp16"),
    pytest.param(TALL, Variant(window=(3, 2)), "float32", id="window-3-2-q45-kv29-rows-without-keys"),
    pytest.param(ODD, Variant(window=(2**31 - 1, 3)), "float32", id="window-int32-max-3"),
    pytest.param(ODD, Variant(alibi="h"), "float32", id="alibi-h"),
    pytest.param(ODD_B2, Variant(alibi="bh", causal=True), "float32", id="alibi-bh-causal"),
    pytest.param(ODD, Variant(softcap=1.5, input_scale=2.0), "float32", id="softcap-1.5"),
    pytest.param(ODD_B2, Variant(score_mod=True), "float32", id="score-mod"),
    pytest.param(SQUARE, Variant(mask="document", causal=True), "float32", id="mask-document-causal"),
    pytest.param(Shape(2, 37, 45, 2, 1, 24, 40), Variant(mask="holes"), "float32", id="mask-holes-rows-without-keys-gqa"),
    pytest.param(SQUARE, Variant(mask="prefix_lm"), "bfloat16", id="mask-prefix-lm-bf16"),
    pytest.param(GQA, Variant(causal=True, window=(12, 0)), "float32", id="causal-gqa-window"),
    pytest.param(ODD_B2, Variant(alibi="bh", softcap=2.0, input_scale=1.5), "bfloat16", id="alibi-softcap-bf16"),
    pytest.param(GQA, Variant(score_mod=True, softcap=2.5, alibi="h", window=(15, 3), mask="prefix_lm"), "float32",
                 id="everything-at-once"),
]


@pytest.mark.parametrize("shape, var, dtype", VARIANTS)
def test_variant(rng, shape, var, dtype):
    """Inside jax.jit: out, lse and the grads of q, k, v agree with the float64 reference."""
    run_and_compare(rng, shape, var, dtype)


@pytest.mark.parametrize(
    "shape, var",
    [
        pytest.param(TALL, Variant(causal=True), id="causal-rows-without-keys"),
        pytest.param(ODD_B2, Variant(window=(6, 2), alibi="bh", softcap=2.0), id="window-alibi-softcap"),
    ],
)
def test_lse_gradient(rng, shape, var):
    """A loss that uses lse: its cotangent flows into the grads and matches the reference."""
    run_and_compare(rng, shape, var, "float32", lse_grad=True)


def test_alibi_slopes_gradient(rng):
    """ALiBi's slopes are differentiable, against float64: jax.grad in the slopes alone, under jit
    with q, k and v, and jax.vmap of per-example gradients of shared (Hq,) slopes (the mapped axis
    folded into the batch); slopes under jax.lax.stop_gradient get none and leave q, k, v's as they
    were. Before 2026-12-05 (session 69) a differentiated slope raised NotImplementedError
    (session 68), and before that got a zero. jax.jvp has no rule (a custom_vjp): it raises."""
    q, k, v = make_qkv(rng, Shape(2, 13, 17, 4, 2, 16, 16), "float32")
    slopes = make_slopes(rng, "bh", 2, 4)
    w_out = jnp.asarray(randn(rng, q.shape))

    def loss(q, k, v, slopes):
        return (flashx.jax.attention(q, k, v, causal=True, alibi_slopes=slopes) * w_out).sum()

    def want(q, k, v, slopes):
        """float64 gradients of the same loss in q, k, v and the slopes, as NumPy."""
        with jax.enable_x64(True):
            def ref_loss(q, k, v, s):
                return (reference(q, k, v, causal=True, slopes=s)[0] * jnp.asarray(f64(w_out))).sum()
            grads = jax.grad(ref_loss, argnums=(0, 1, 2, 3))(*(jnp.asarray(f64(x)) for x in (q, k, v, slopes)))
            return tuple(np.asarray(g) for g in grads)

    want_q, want_k, want_v, want_slopes = want(q, k, v, slopes)
    got = jax.grad(loss, argnums=3)(q, k, v, slopes)
    assert got.shape == slopes.shape and got.dtype == jnp.float32
    assert rel_error(np.asarray(got), want_slopes) < 1e-5
    got_all = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))(q, k, v, slopes)
    for name, g, w in zip(("q", "k", "v", "slopes"), got_all, (want_q, want_k, want_v, want_slopes)):
        assert rel_error(np.asarray(g), w) < 1e-4, f"d{name}"
    stopped = lambda q, k, v, s: loss(q, k, v, jax.lax.stop_gradient(s))  # noqa: E731
    got_stopped = jax.grad(stopped, argnums=(0, 1, 2, 3))(q, k, v, slopes)
    assert not np.asarray(got_stopped[3]).any()
    for name, g, w in zip("qkv", got_stopped, (want_q, want_k, want_v)):
        assert rel_error(np.asarray(g), w) < 1e-4, f"d{name} (slopes stopped)"
    shared = slopes[0]
    per_example = jax.vmap(jax.grad(lambda q, s: loss(q, k, v, s), argnums=1), in_axes=(0, None))(
        jnp.stack([q, 0.5 * q]), shared)
    for i, qi in enumerate((q, 0.5 * q)):
        assert rel_error(np.asarray(per_example[i]), want(qi, k, v, shared)[3]) < 1e-5, f"vmap slice {i}"
    with pytest.raises(TypeError, match="custom_vjp"):
        jax.jvp(lambda s: loss(q, k, v, s), (slopes,), (slopes,))


def test_alibi_slopes_gradient_partitioned(rng, monkeypatch):
    """The launches wrapped for Auto meshes (_partitioned, as with several devices; here on one,
    where the wrapper lowers its function whole): the backward with the slopes' gradient goes
    through custom_partitioning too, its per-block parts a fifth result, and gives float64's
    gradients of (Hq,) slopes under jax.jit, with q, k and v's."""
    frontend = sys.modules["flashx.jax.attention"]
    monkeypatch.setattr(frontend, "_partitions", lambda: True)
    q, k, v = make_qkv(rng, Shape(2, 9, 11, 4, 2, 16, 16), "float32")
    slopes = make_slopes(rng, "h", 2, 4)
    w_out = jnp.asarray(randn(rng, q.shape))

    def loss(q, k, v, s):
        return (flashx.jax.attention(q, k, v, causal=True, alibi_slopes=s) * w_out).sum()

    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))
    assert str(jax.make_jaxpr(grad)(q, k, v, slopes)).count("custom_partitioning") >= 2, "the launches were not wrapped"
    with jax.enable_x64(True):
        def ref_loss(q, k, v, s):
            return (reference(q, k, v, causal=True, slopes=s)[0] * jnp.asarray(f64(w_out))).sum()
        want = jax.grad(ref_loss, argnums=(0, 1, 2, 3))(*(jnp.asarray(f64(x)) for x in (q, k, v, slopes)))
    for name, got, w in zip(("q", "k", "v", "slopes"), grad(q, k, v, slopes), want):
        assert rel_error(np.asarray(got), np.asarray(w)) < 1e-4, f"d{name}"


def test_score_mod_grad_missing_raises(rng):
    """score_mod without score_mod_grad: jax.grad raises NotImplementedError."""
    q, k, v = make_qkv(rng, Shape(1, 17, 19, 1, 1, 16, 16), "float32")
    with pytest.raises(NotImplementedError, match="score_mod_grad"):
        jax.jit(jax.grad(lambda q: flashx.jax.attention(q, k, v, score_mod=wobble_score).sum()))(q)


# ----------------------------------------------------------------------------------------------
# Block masks built outside jit and passed in
# ----------------------------------------------------------------------------------------------


def test_block_mask_reused_inside_jit(rng):
    """create_block_mask's map (a pytree) goes into jax.jit as an argument; its lists match the mask."""
    bm = flashx.jax.create_block_mask(document_mask, None, None, 45, 45, causal=True)
    bs, hs, qi, kj = index_grids([0], [0], 45, 45)
    state = expected_block_map(MASK_MODS["document"][1](bs, hs, qi, kj) & window_visible(45, 45, None, True)[None, None],
                               bm.spec.block_m, bm.spec.block_n)
    check_block_map(bm.counts, bm.indices, bm.t_counts, bm.t_indices, state)
    run_and_compare(rng, Shape(2, 45, 45, 2, 1, 24, 40), Variant(mask="document", causal=True), "float32", block_mask=bm)
    run_and_compare(rng, Shape(1, 45, 45, 1, 1, 16, 16), Variant(mask="document", causal=True), "float16", block_mask=bm,
                    backward=False)


def test_block_mask_per_batch_and_head(rng):
    bm = flashx.jax.create_block_mask(holes_mask, 2, 2, 37, 45, window=(9, 9), blocks=(32, 16))
    bs, hs, qi, kj = index_grids(np.arange(2), np.arange(2), 37, 45)
    state = expected_block_map(MASK_MODS["holes"][1](bs, hs, qi, kj) & window_visible(37, 45, (9, 9))[None, None], 32, 16)
    check_block_map(bm.counts, bm.indices, bm.t_counts, bm.t_indices, state)
    run_and_compare(rng, ODD_B2, Variant(mask="holes", window=(9, 9)), "float32", block_mask=bm)


def test_block_mask_nothing_visible(rng):
    """All pairs masked: zero counts, out 0, lse -inf, zero (finite) grads."""
    bm = flashx.jax.create_block_mask(nothing_mask, None, None, 37, 45)
    assert (np.asarray(bm.counts) == 0).all() and (np.asarray(bm.t_counts) == 0).all()
    out, lse, grads = run_and_compare(rng, ODD, Variant(mask="nothing"), "float32", block_mask=bm, lse_grad=True)
    assert (np.asarray(out) == 0).all() and np.isneginf(np.asarray(lse)).all()
    assert all((np.asarray(g) == 0).all() for g in grads)


def test_block_mask_for_other_sizes_raises(rng):
    q, k, v = make_qkv(rng, ODD, "float32")
    bm = flashx.jax.create_block_mask(document_mask, None, None, 45, 45)
    with pytest.raises(ValueError, match=r"block_mask was built for .*Nq=45"):
        jax.jit(lambda q, k, v, bm: flashx.jax.attention(q, k, v, block_mask=bm))(q, k, v, bm)


# ----------------------------------------------------------------------------------------------
# Varlen
# ----------------------------------------------------------------------------------------------

CU_Q, CU_K, TQ, TK = [0, 13, 13, 40], [0, 20, 25, 47], 45, 50  # empty q sequence, padding rows
CU_Q2, CU_K2 = [0, 13, 21, 40], [0, 20, 20, 47]  # empty k sequence: its 8 rows see no key


def varlen_reference(q, k, v, cu_q, cu_k, *, slopes=None, **kw):
    """Per-sequence reference on packed (total, H, D) float64 arrays; padding rows: out 0, lse 0."""
    total_q, hq = q.shape[0], q.shape[1]
    out = jnp.zeros((total_q, hq, v.shape[2]), q.dtype)
    lse = jnp.zeros((hq, total_q), q.dtype)
    for b, ((sq, eq), (sk, ek)) in enumerate(zip(clamped_bounds(cu_q, total_q), clamped_bounds(cu_k, k.shape[0]))):
        if eq == sq:
            continue
        sl = None if slopes is None else (slopes if slopes.ndim == 1 else slopes[b])
        o, l = reference(q[None, sq:eq], k[None, sk:ek], v[None, sk:ek], slopes=sl, batch_ids=[b], **kw)
        out = out.at[sq:eq].set(o[0])
        lse = lse.at[:, sq:eq].set(l[0])
    return out, lse


def run_varlen(rng, cu_q, cu_k, hq, hkv, d, dv, dtype, *, slopes_kind=None, lse_grad=False, max_q=None, max_k=None, **opts):
    bq, bk = clamped_bounds(cu_q, TQ), clamped_bounds(cu_k, TK)
    max_q = max(e - s for s, e in bq) if max_q is None else max_q
    max_k = max(e - s for s, e in bk) if max_k is None else max_k
    q = jnp.asarray(randn(rng, (TQ, hq, d)), JAX_DTYPES[dtype])
    k = jnp.asarray(randn(rng, (TK, hkv, d)), JAX_DTYPES[dtype])
    v = jnp.asarray(randn(rng, (TK, hkv, dv)), JAX_DTYPES[dtype])
    slopes = make_slopes(rng, slopes_kind, len(cu_q) - 1, hq)
    w_out, w_lse = jnp.asarray(randn(rng, (TQ, hq, dv))), jnp.asarray(randn(rng, (hq, TQ)))
    fx_opts = dict(opts)
    if fx_opts.pop("score_mod", False):
        fx_opts.update(score_mod=wobble_score, score_mod_grad=wobble_score_grad)
    if fx_opts.get("mask") is not None:
        fx_opts["mask_mod"] = MASK_MODS[fx_opts["mask"]][0]
    fx_opts.pop("mask", None)

    argnums = (0, 1, 2) if slopes is None else (0, 1, 2, 3)  # the slopes' gradient too, where they exist

    @jax.jit
    def fx(q, k, v, cu_q, cu_k, slopes):
        fn = lambda q, k, v, s: flashx.jax.attention(  # noqa: E731
            q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max_q, max_seqlen_k=max_k,
            alibi_slopes=s, return_lse=True, **fx_opts)
        return jax.value_and_grad(loss_of(fn, w_out, w_lse, lse_grad), argnums=argnums, has_aux=True)(q, k, v, slopes)

    (_, (out, lse)), grads = fx(q, k, v, jnp.asarray(cu_q, jnp.int32), jnp.asarray(cu_k, jnp.int32), slopes)
    assert out.shape == (TQ, hq, dv) and out.dtype == q.dtype and lse.shape == (hq, TQ)
    with jax.enable_x64(True):
        args = [jnp.asarray(f64(x)) for x in (q, k, v)] + ([] if slopes is None else [jnp.asarray(f64(slopes))])
        fn = lambda q, k, v, sl=None: varlen_reference(q, k, v, cu_q, cu_k, slopes=sl, **opts)  # noqa: E731
        (_, (ref_out, ref_lse)), ref_grads = jax.jit(jax.value_and_grad(
            loss_of(fn, jnp.asarray(f64(w_out)), jnp.asarray(f64(w_lse)), lse_grad), argnums=argnums, has_aux=True))(*args)
        ref_out, ref_lse, ref_grads = np.asarray(ref_out), np.asarray(ref_lse), [np.asarray(g) for g in ref_grads]
    assert_close(f64(out), ref_out, OUT_TOL[dtype], f"out ({dtype})")
    assert_lse(f64(lse), ref_lse)
    covered = np.zeros(TQ, bool)
    for s, e in bq:
        covered[s:e] = True
    assert (f64(out)[~covered] == 0).all() and (f64(lse)[:, ~covered] == 0).all(), "padding rows must stay 0"
    for name, g, rg in zip("qkv", grads, ref_grads):
        assert_close(f64(g), rg, GRAD_TOL[dtype], f"d{name} ({dtype})")
    if slopes is not None:  # per sequence ((B, Hq)) or summed over them ((Hq,))
        assert grads[3].shape == slopes.shape
        assert_close(f64(grads[3]), ref_grads[3], GRAD_TOL[dtype], f"d alibi_slopes ({dtype})")
    assert (f64(grads[0])[~covered] == 0).all()


@pytest.mark.parametrize(
    "cu_q, cu_k, hq, hkv, d, dv, dtype, opts",
    [
        pytest.param(CU_Q, CU_K, 4, 2, 24, 40, "float32", dict(causal=True), id="causal-gqa-dv40-empty-q-padding"),
        pytest.param(CU_Q2, CU_K2, 4, 1, 24, 40, "float32", dict(causal=True, window=(6, -1)), id="causal-window-mqa-empty-k"),
        pytest.param(CU_Q, CU_K, 2, 2, 24, 40, "float32", dict(slopes_kind="bh", softcap=2.0, lse_grad=True),
                     id="alibi-bh-softcap-lse-grad"),
        pytest.param(CU_Q2, CU_K2, 2, 1, 24, 40, "float32", dict(mask="holes", score_mod=True), id="mask-mod-score-mod"),
        pytest.param(CU_Q2, CU_K2, 2, 2, 40, 24, "float16", dict(window=(8, 8)), id="window-fp16"),
        pytest.param([0, 20, 100], [0, 25, 200], 2, 2, 16, 24, "float32", dict(causal=True, max_q=TQ, max_k=TK),
                     id="overrunning-cu-seqlens-clamped"),
        pytest.param([0, 30, 20], [0, 25, 10], 2, 2, 16, 24, "float32", dict(causal=True, max_q=TQ, max_k=TK),
                     id="decreasing-cu-seqlens-clamped"),
    ],
)
def test_varlen(rng, cu_q, cu_k, hq, hkv, d, dv, dtype, opts):
    run_varlen(rng, cu_q, cu_k, hq, hkv, d, dv, dtype, **opts)


@pytest.mark.parametrize(
    "shape, var",
    [
        pytest.param(ODD_B2, Variant(causal=True, window=(10, 5)), id="window-10-5-causal"),
        pytest.param(ODD, Variant(alibi="bh", softcap=30.0), id="alibi-softcap"),
    ],
)
def test_one_backward_launch(rng, one_backward_launch, shape, var):
    """dK/dV's and dQ's programs in one launch (the GPU's choice at 64 < D <= 128 without GQA), from JAX."""
    run_and_compare(rng, shape, var, "float32", lse_grad=True)
    assert one_backward_launch and set(one_backward_launch) == {1}


def test_dkdv_in_two_passes(rng, dkdv_two_passes):
    """dK/dV as a dV pass then a dK pass (the GPU's choice at D = 256), from JAX: each launch's
    one written gradient comes back, the other's stand-in is dropped."""
    run_and_compare(rng, GQA, Variant(causal=True, alibi="h"), "float32", lse_grad=True)
    assert dkdv_two_passes and set(dkdv_two_passes) == {3}


# ----------------------------------------------------------------------------------------------
# Determinism
# ----------------------------------------------------------------------------------------------


def test_grads_are_deterministic(rng):
    """Two jitted gradient computations give bitwise equal dq, dk, dv (GQA: dk/dv sum over the group)."""
    q, k, v = make_qkv(rng, Shape(1, 37, 45, 4, 1, 24, 40), "float16")
    w = jnp.asarray(randn(rng, (1, 37, 4, 40)), jnp.float16)

    def grads(deterministic):
        f = lambda q, k, v: (flashx.jax.attention(q, k, v, causal=True, window=(9, -1), deterministic=deterministic) * w).sum()  # noqa: E731
        return jax.jit(jax.grad(f, argnums=(0, 1, 2)))(q, k, v)

    for name, a, b in zip("qkv", grads(False), grads(True)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"d{name} differs between two runs")


# ----------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------


def _a(*shape, dtype=jnp.float32):
    return jnp.asarray(np.random.default_rng(0).standard_normal(shape), dtype)


def _not_jit(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _qkv4():
    return _a(1, 5, 2, 16), _a(1, 7, 2, 16), _a(1, 7, 2, 16)


def _qkv3():
    return _a(12, 2, 16), _a(14, 2, 16), _a(14, 2, 16)


def _cu(*values, dtype=jnp.int32):
    return jnp.asarray(values, dtype)


VL = dict(max_seqlen_q=8, max_seqlen_k=8)

BAD = [
    pytest.param(_qkv4, lambda: dict(window=(-2, 0)), ValueError, r"window", id="window-below-minus-1"),
    pytest.param(_qkv4, lambda: dict(window=(3,)), ValueError, r"window", id="window-one-int"),
    pytest.param(_qkv4, lambda: dict(window=(1.5, 2)), ValueError, r"window", id="window-float"),
    pytest.param(_qkv4, lambda: dict(window=4), (ValueError, TypeError), r"window", id="window-int"),
    pytest.param(_qkv4, lambda: dict(alibi_slopes=_a(3)), ValueError, r"alibi_slopes", id="slopes-wrong-heads"),
    pytest.param(_qkv4, lambda: dict(alibi_slopes=_a(2, 2)), ValueError, r"alibi_slopes", id="slopes-wrong-batch"),
    pytest.param(_qkv4, lambda: dict(alibi_slopes=_a(2, dtype=jnp.float16)), ValueError, r"alibi_slopes.*float32", id="slopes-fp16"),
    pytest.param(_qkv4, lambda: dict(alibi_slopes=np.ones(2, np.float32)), TypeError, r"alibi_slopes", id="slopes-numpy"),
    pytest.param(_qkv4, lambda: dict(softcap=0.0), ValueError, r"softcap", id="softcap-0"),
    pytest.param(_qkv4, lambda: dict(softcap=-3), ValueError, r"softcap", id="softcap-negative"),
    pytest.param(_qkv4, lambda: dict(mask_mod=_not_jit), TypeError, r"mask_mod.*triton\.jit", id="mask-mod-python"),
    pytest.param(_qkv4, lambda: dict(score_mod=jnp.tanh), TypeError, r"score_mod.*triton\.jit", id="score-mod-jnp"),
    pytest.param(_qkv4, lambda: dict(score_mod=wobble_score, score_mod_grad=_not_jit), TypeError, r"score_mod_grad", id="score-mod-grad-python"),
    pytest.param(_qkv4, lambda: dict(deterministic="no"), TypeError, r"deterministic", id="deterministic-str"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), cu_seqlens_k=_cu(0, 7, 14)), ValueError, r"max_seqlen_q", id="max-seqlen-missing"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), cu_seqlens_k=_cu(0, 7, 14), max_seqlen_q=8, max_seqlen_k=jnp.int32(8)),
                 ValueError, r"max_seqlen_k", id="max-seqlen-traced-int"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12, dtype=jnp.uint32), cu_seqlens_k=_cu(0, 7, 14), **VL), TypeError, r"cu_seqlens_q.*uint32", id="cu-q-uint32"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), cu_seqlens_k=_cu(0.0, 7.0, 14.0, dtype=jnp.float32), **VL), TypeError, r"cu_seqlens_k.*float32", id="cu-k-float"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), cu_seqlens_k=_cu(0, 7, 10, 14), **VL), ValueError, r"cu_seqlens_q and cu_seqlens_k", id="cu-length-mismatch"),
    pytest.param(_qkv3, lambda: dict(cu_seqlens_q=_cu(0, 5, 12), **VL), ValueError, r"cu_seqlens_q and cu_seqlens_k", id="cu-k-missing"),
    pytest.param(_qkv4, lambda: dict(block_mask=flashx.jax.create_block_mask(document_mask, 1, 2, 6, 7)), ValueError, r"block_mask was built", id="block-mask-other-nq"),
    pytest.param(_qkv4, lambda: dict(causal=True, block_mask=flashx.jax.create_block_mask(document_mask, None, None, 5, 7)), ValueError, r"causal/window", id="block-mask-without-causal"),
    pytest.param(_qkv4, lambda: dict(block_mask=object()), TypeError, r"block_mask", id="block-mask-object"),
]


@pytest.mark.parametrize("make_qkv_, make_kwargs, error, match", BAD)
def test_bad_input_raises(make_qkv_, make_kwargs, error, match):
    with pytest.raises(error, match=match):
        flashx.jax.attention(*make_qkv_(), **make_kwargs())


@pytest.mark.gpu
@pytest.mark.parametrize("shape, fields, dtype", [pytest.param(Shape(*s), v, d, id=i) for i, s, v, d in GLUON_MASKED_CASES])
@pytest.mark.usefixtures("keys_unsplit")
def test_gpu_gluon_forward_windows_and_maps(forward_kernels, shape, fields, dtype):
    """On Hopper, inside jax.jit: calls with a sliding window or a block map (mask_mod) at the
    head dims tuning.GLUON_MASKED_TMA_ROUTE routes take the Gluon forward (descriptors built on the
    device): out, lse and the gradients against float64, rows without keys exactly 0."""
    from flashx.core import gluon_forward

    require_sm90("the Gluon forward's kernels")
    run_and_compare(np.random.default_rng(zlib.crc32(repr((shape, fields)).encode())), shape, Variant(**fields), dtype)
    assert forward_kernels and all(kernel is gluon_forward.gluon_attention_forward_kernel for kernel in forward_kernels)


# ----------------------------------------------------------------------------------------------
# GPU: grads of a training-sized bf16 case, bounded by a small factor of jax's own bf16 error
# ----------------------------------------------------------------------------------------------

GRAD_TOLERANCE_BF16 = Tolerance(factor=3.0, floor=5e-3, cap=5e-2)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape, window",
    [
        pytest.param(Shape(2, 1024, 1024, 8, 2, 128, 128), None, id="gqa-8:2-n1024-d128-causal"),
        pytest.param(Shape(1, 2048, 2048, 8, 8, 64, 64), (256, 0), id="n2048-d64-causal-window-256"),
        pytest.param(Shape(1, 1000, 1000, 4, 4, 256, 256), None, id="n1000-d256-causal"),
    ],
)
def test_gpu_grads(shape, window):
    """jax.grad of flashx inside jit on the GPU (jax-triton) vs float64, within 3x jax.nn's bf16 error."""
    rng = np.random.default_rng(7)
    q, k, v = make_qkv(rng, shape, "bfloat16")
    w = jnp.asarray(randn(rng, (shape.b, shape.nq, shape.hq, shape.dv)))
    w_lse = jnp.zeros((shape.b, shape.hq, shape.nq), jnp.float32)
    fx = lambda q, k, v: flashx.jax.attention(q, k, v, causal=True, window=window, return_lse=True)  # noqa: E731
    (_, (out, _)), grads = jax.jit(jax.value_and_grad(loss_of(fx, w, w_lse, False), argnums=(0, 1, 2), has_aux=True))(q, k, v)
    vis = window_visible(shape.nq, shape.nkv, window, True)

    def native(q, k, v):  # jax.nn (XLA) in bf16 with the same mask; Nq == Nkv so top-left == bottom-right
        out = jax.nn.dot_product_attention(q, k, v, mask=jnp.asarray(vis)[None, None], implementation="xla")
        return out, None

    (_, (n_out, _)), n_grads = jax.jit(jax.value_and_grad(loss_of(native, w, w_lse, False), argnums=(0, 1, 2), has_aux=True))(q, k, v)
    ident = lambda x: x  # noqa: E731
    ref_out, _, ref_grads = reference_results(q, k, v, w, w_lse, False, ident, ident, causal=True, window=window)
    bound = TOLERANCES["bfloat16"].bound(rel_error(f64(n_out), ref_out))
    assert rel_error(f64(out), ref_out) <= bound
    for name, g, ng, rg in zip("qkv", grads, n_grads, ref_grads):
        err, n_err = rel_error(f64(g), rg), rel_error(f64(ng), rg)
        assert err <= GRAD_TOLERANCE_BF16.bound(n_err), f"d{name}: {err:.3e} vs native {n_err:.3e}"
