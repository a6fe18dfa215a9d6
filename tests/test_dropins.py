"""The drop-ins against the functions they replace, forward and backward.

- flashx.torch.scaled_dot_product_attention vs torch.nn.functional.scaled_dot_product_attention:
  the reference is torch's own SDPA (math backend) on float64 copies of the same inputs, with
  torch autograd for dq, dk, dv and the float mask's gradient.
- flashx.jax.dot_product_attention vs jax.nn.dot_product_attention(implementation="xla"), both
  inside jax.jit: the reference is jax.nn's XLA path in float64 (x64 switched on only there).

Bounds (relative Frobenius error): OUT_TOL / GRAD_TOL of variants_common (fp32 2e-5 / 3e-5,
fp16 2e-3 / 3e-3, bf16 2e-2 / 3e-2); the float mask / bias gradient uses GRAD_TOL too.
Semantics under test: is_causal and local windows are top-left; bool masks True = attend; float
masks are additive; dropout is not implemented; GQA only with enable_gqa=True.
"""
from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import flashx.jax  # noqa: E402
import flashx.torch  # noqa: E402
from conftest import INTERPRETED, reference_attention, require_sm90  # noqa: E402
from variants_common import GRAD_TOL, LSE_TOL, OUT_TOL, assert_close, assert_lse  # noqa: E402

DEVICE = "cpu" if INTERPRETED else "cuda"
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
JAX_DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}
# On the GPU flashx.jax runs through jax-triton (and JAX's GPU backend); on the CPU through the interpreter.
needs_jax_triton = pytest.mark.skipif(
    not INTERPRETED and (importlib.util.find_spec("jax_triton") is None or jax.default_backend() != "gpu"),
    reason="flashx.jax on the GPU needs jax-triton and JAX's GPU backend",
)


def np64(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(np.asarray(x).astype(np.float32), np.float64)


# ----------------------------------------------------------------------------------------------
# torch: scaled_dot_product_attention
# ----------------------------------------------------------------------------------------------


def _t(rng, shape, dtype="float32", scale=1.0):
    return torch.from_numpy((rng.standard_normal(shape) * scale).astype(np.float32)).to(DEVICE, TORCH_DTYPES[dtype])


def compare_sdpa(rng, q, k, v, dtype, *, attn_mask=None, mask_grad=False, **kwargs):
    """flashx's SDPA vs torch's (float64, math backend): out, dq, dk, dv and the float mask's gradient."""
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    ref_leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    mask = ref_mask = attn_mask
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        mask = attn_mask.clone().requires_grad_(mask_grad)
        ref_mask = attn_mask.detach().double().requires_grad_(mask_grad)
    out = flashx.torch.scaled_dot_product_attention(*leaves, attn_mask=mask, **kwargs)
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(*ref_leaves, attn_mask=ref_mask, **kwargs)
    assert out.dtype == q.dtype and out.shape == ref.shape
    assert_close(np64(out), np64(ref), OUT_TOL[dtype], f"out ({dtype})")
    w = _t(rng, tuple(out.shape))
    inputs = leaves + ([mask] if mask_grad else [])
    ref_inputs = ref_leaves + ([ref_mask] if mask_grad else [])
    grads = torch.autograd.grad((out.float() * w).sum(), inputs)
    ref_grads = torch.autograd.grad((ref * w.double()).sum(), ref_inputs)
    for name, x, g, rg in zip(("dq", "dk", "dv", "dmask"), inputs, grads, ref_grads):
        assert g.shape == x.shape and g.dtype == x.dtype, f"{name}: {g.shape} {g.dtype} vs {x.shape} {x.dtype}"
        assert_close(np64(g), np64(rg), GRAD_TOL[dtype], f"{name} ({dtype})")
    return out, grads


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize(
    "b, hq, hkv, nq, nkv, e, ev, kwargs",
    [
        pytest.param(2, 2, 2, 37, 45, 24, 40, {}, id="plain-q37-kv45-e24-ev40"),
        pytest.param(1, 4, 2, 37, 45, 24, 24, dict(enable_gqa=True), id="gqa-4:2"),
        pytest.param(1, 2, 2, 45, 29, 24, 24, dict(is_causal=True), id="causal-top-left-q45-kv29"),
        pytest.param(1, 3, 1, 29, 45, 24, 24, dict(is_causal=True, enable_gqa=True, scale=0.3), id="causal-top-left-q29-kv45-mqa-scale"),
    ],
)
def test_sdpa(rng, b, hq, hkv, nq, nkv, e, ev, kwargs, dtype):
    q, k, v = (_t(rng, s, dtype) for s in ((b, hq, nq, e), (b, hkv, nkv, e), (b, hkv, nkv, ev)))
    compare_sdpa(rng, q, k, v, dtype, **kwargs)


@pytest.mark.parametrize(
    "mask_shape",
    [pytest.param((2, 1, 37, 45), id="b-1-nq-nkv"), pytest.param((37, 45), id="nq-nkv")],
)
def test_sdpa_bool_mask(rng, mask_shape):
    """Bool masks (True = attend) broadcast over heads / batch and heads; one row sees no key: 0 there."""
    q, k, v = (_t(rng, s) for s in ((2, 2, 37, 24), (2, 2, 45, 24), (2, 2, 45, 24)))
    mask = torch.from_numpy(rng.random(mask_shape) < 0.6).to(DEVICE)
    mask[..., 5, :] = False  # a row without keys
    out, grads = compare_sdpa(rng, q, k, v, "float32", attn_mask=mask)
    assert (out[..., 5, :] == 0).all() and (grads[0][..., 5, :] == 0).all()


@pytest.mark.parametrize(
    "mask_shape, dtype",
    [
        pytest.param((1, 2, 37, 45), "float32", id="broadcast-batch"),
        pytest.param((2, 1, 37, 45), "float32", id="broadcast-heads"),
        pytest.param((37, 45), "float32", id="broadcast-batch-and-heads"),
        pytest.param((2, 2, 37, 45), "float16", id="full-fp16"),
    ],
)
def test_sdpa_float_mask_gradient(rng, mask_shape, dtype):
    """Additive float masks get their gradient, summed over the axes they broadcast along."""
    q, k, v = (_t(rng, s, dtype) for s in ((2, 2, 37, 24), (2, 2, 45, 24), (2, 2, 45, 40)))
    compare_sdpa(rng, q, k, v, dtype, attn_mask=_t(rng, mask_shape, dtype), mask_grad=True)


def test_sdpa_float_mask_with_minus_inf(rng):
    """-inf entries of an additive mask hide those pairs (their gradient is 0, not NaN)."""
    q, k, v = (_t(rng, s) for s in ((1, 2, 37, 24), (1, 2, 45, 24), (1, 2, 45, 24)))
    mask = _t(rng, (37, 45))
    mask[torch.from_numpy(rng.random((37, 45)) < 0.3).to(DEVICE)] = float("-inf")
    mask[:, 0] = 0.5  # every row keeps a key
    _, grads = compare_sdpa(rng, q, k, v, "float32", attn_mask=mask, mask_grad=True)
    assert (grads[3][torch.isinf(mask)] == 0).all()


def test_sdpa_float_mask_without_grad(rng):
    """A float mask that does not require grad: no mask gradient computed, q/k/v grads still right."""
    q, k, v = (_t(rng, s) for s in ((1, 2, 21, 16), (1, 2, 30, 16), (1, 2, 30, 16)))
    compare_sdpa(rng, q, k, v, "float32", attn_mask=_t(rng, (1, 1, 21, 30)))


def test_sdpa_3d_inputs(rng):
    """(H, N, E) inputs, as torch accepts them: output (H, Nq, Ev)."""
    q, k, v = (_t(rng, s) for s in ((2, 37, 24), (2, 45, 24), (2, 45, 40)))
    out, _ = compare_sdpa(rng, q, k, v, "float32", is_causal=True)
    assert out.shape == (2, 37, 40)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        pytest.param(dict(is_causal=True, attn_mask="mask"), ValueError, r"attn_mask.*is_causal", id="mask-and-causal"),
        pytest.param(dict(enable_gqa=1), TypeError, r"enable_gqa", id="enable-gqa-int"),
        pytest.param(dict(attn_mask=[[True]]), TypeError, r"attn_mask", id="mask-list"),
    ],
)
def test_sdpa_bad_input(rng, kwargs, error, match):
    q, k, v = (_t(rng, s) for s in ((1, 2, 5, 16), (1, 2, 7, 16), (1, 2, 7, 16)))
    if kwargs.get("attn_mask") == "mask":
        kwargs = dict(kwargs, attn_mask=torch.ones(5, 7, dtype=torch.bool, device=DEVICE))
    with pytest.raises(error, match=match):
        flashx.torch.scaled_dot_product_attention(q, k, v, **kwargs)


# The core validates under its own names (q, causal, bias, mask...): the drop-in's errors must name
# the caller's arguments and show shapes as passed. `core`: what the message must not contain.
_CORE_TORCH = r"\b(q|k|v|causal|bias|mask)\b|layout"


@pytest.mark.parametrize(
    "shapes, mask, kwargs, error, match, core",
    [
        pytest.param(None, ((3, 4), "bool"), {}, ValueError, r"^attn_mask of shape \(3, 4\)", _CORE_TORCH, id="bool-mask-shape"),
        pytest.param(None, ((4, 6), "float32"), {}, ValueError, r"^attn_mask of shape \(4, 6\)", _CORE_TORCH, id="float-mask-shape"),
        pytest.param(None, ((4, 5), "int64"), {}, TypeError, r"^attn_mask\b.*int64", _CORE_TORCH, id="mask-int64"),
        pytest.param(None, ((4, 5), "uint8"), {}, TypeError, r"^attn_mask\b.*uint8", _CORE_TORCH, id="mask-uint8"),
        pytest.param(None, ((4, 5), "float64"), {}, TypeError, r"^attn_mask\b.*float64", _CORE_TORCH, id="mask-float64"),
        pytest.param(None, None, dict(is_causal=1), TypeError, r"^is_causal\b", _CORE_TORCH, id="is-causal-int"),
        pytest.param(None, None, dict(is_causal=None), TypeError, r"^is_causal\b", _CORE_TORCH, id="is-causal-none"),
        pytest.param(((4, 8), (1, 2, 5, 8), (1, 2, 5, 8)), None, {}, ValueError, r"^query\b.*\(4, 8\)", _CORE_TORCH, id="query-2d"),
        pytest.param(((2, 4, 8), (1, 2, 5, 8), (1, 2, 5, 8)), None, {}, ValueError, r"^key\b.*got shape \(1, 2, 5, 8\)",
                     _CORE_TORCH + r"|\(1, 1, 2, 5, 8\)", id="query-3d-key-4d"),
        pytest.param(((2, 4, 8), (2, 5, 16), (2, 5, 16)), None, {}, ValueError, r"query \(2, 4, 8\), key \(2, 5, 16\), value \(2, 5, 16\)$",
                     _CORE_TORCH + r"|\(1, 2, ", id="3d-shapes-as-passed"),
        pytest.param(((2, 4, 8), (2, 5, 8), (2, 5, 8)), ((3, 4, 5), "bool"), {}, ValueError,
                     r"^attn_mask of shape \(3, 4, 5\) does not broadcast to \(2, 4, 5\)$", _CORE_TORCH + r"|\(1, 2, ",
                     id="3d-mask-target-as-passed"),
        pytest.param(((1, 3, 4, 8), (1, 2, 5, 8), (1, 2, 5, 8)), None, dict(enable_gqa=True), ValueError,
                     r"^query's heads \(3\) must be a multiple of key's and value's", _CORE_TORCH, id="gqa-heads-possessive"),
        pytest.param(None, None, dict(scale="k"), TypeError, r"^scale\b.*'k'", r"'key'", id="scale-repr-untouched"),
        pytest.param(None, None, dict(dropout_p=None), TypeError, r"^dropout_p\b", r"no dropout yet", id="dropout-none"),
        pytest.param(None, None, dict(dropout_p="0"), TypeError, r"^dropout_p\b", r"no dropout yet", id="dropout-str"),
        pytest.param(None, None, dict(dropout_p=-0.5), ValueError, r"^dropout_p\b.*-0\.5", r"no dropout yet", id="dropout-negative"),
        pytest.param(None, None, dict(dropout_p=1.5), ValueError, r"^dropout_p\b.*1\.5", r"no dropout yet", id="dropout-above-1"),
        pytest.param(None, None, dict(dropout_p=1.0), ValueError, r"^dropout_p\b.*\[0, 1\).*1\.0", _CORE_TORCH, id="dropout-1"),
    ],
)
def test_sdpa_errors_name_its_arguments(rng, shapes, mask, kwargs, error, match, core):
    q, k, v = (_t(rng, s) for s in (shapes or ((1, 2, 4, 8), (1, 2, 5, 8), (1, 2, 5, 8))))
    if mask is not None:
        kwargs = dict(kwargs, attn_mask=torch.ones(mask[0], dtype=getattr(torch, mask[1]), device=DEVICE))
    with pytest.raises(error, match=match) as info:
        flashx.torch.scaled_dot_product_attention(q, k, v, **kwargs)
    assert not re.search(core, str(info.value)), str(info.value)


def test_sdpa_gqa_needs_enable_gqa(rng):
    """Fewer kv heads without enable_gqa=True: flashx raises ValueError naming enable_gqa (torch raises too)."""
    q, k, v = (_t(rng, s) for s in ((1, 4, 5, 16), (1, 2, 7, 16), (1, 2, 7, 16)))
    with pytest.raises(ValueError, match="enable_gqa"):
        flashx.torch.scaled_dot_product_attention(q, k, v)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, v)


# ----------------------------------------------------------------------------------------------
# JAX: jax.nn.dot_product_attention
# ----------------------------------------------------------------------------------------------


def _a(rng, shape, dtype="float32", scale=1.0):
    return jnp.asarray((rng.standard_normal(shape) * scale).astype(np.float32), JAX_DTYPES[dtype])


def compare_jax(rng, q, k, v, dtype, *, bias=None, mask=None, bias_grad=False, **kwargs):
    """flashx's drop-in (jit) vs jax.nn's XLA path (jit, float64): out and grads of q, k, v (and bias).

    With query_seq_lengths only the valid query rows are compared, and the loss weights padded rows
    by 0 (so what jax.nn returns there cannot leak into the gradients); flashx's padded rows must be 0.
    """
    w = _a(rng, q.shape[:-1] + (v.shape[-1],))
    valid = np.ones(q.shape[:2], bool)
    if kwargs.get("query_seq_lengths") is not None:
        valid = np.arange(q.shape[1])[None, :] < np.asarray(kwargs["query_seq_lengths"])[:, None]
        w = w * jnp.asarray(valid)[:, :, None, None]
    argnums = (0, 1, 2, 3) if bias_grad else (0, 1, 2)

    def loss(fn):
        def f(q, k, v, bias):
            out = fn(q, k, v, bias, mask, **kwargs)
            return (out.astype(w.dtype) * w).sum(), out
        return jax.jit(jax.value_and_grad(f, argnums=argnums, has_aux=True))

    (_, out), grads = loss(flashx.jax.dot_product_attention)(q, k, v, bias)
    with jax.enable_x64(True):
        up = lambda x: None if x is None else jnp.asarray(np64(x))  # noqa: E731
        w = up(w)
        xla = lambda *a, **kw: jax.nn.dot_product_attention(*a, implementation="xla", **kw)  # noqa: E731
        (_, ref), ref_grads = loss(xla)(up(q), up(k), up(v), up(bias))
        ref, ref_grads = np.asarray(ref), [np.asarray(g) for g in ref_grads]
    assert out.dtype == q.dtype and out.shape == ref.shape
    assert_close(np64(out)[valid], ref[valid], OUT_TOL[dtype], f"out ({dtype}), valid rows")
    assert (np64(out)[~valid] == 0).all(), "padded query rows must be 0"
    for name, x, g, rg in zip(("dq", "dk", "dv", "dbias"), (q, k, v, bias), grads, ref_grads):
        assert g.shape == x.shape and g.dtype == x.dtype
        assert_close(np64(g), rg, GRAD_TOL[dtype], f"{name} ({dtype})")
    return out, grads


@needs_jax_triton
@pytest.mark.parametrize(
    "b, t, s, n, kh, h, dtype, kwargs",
    [
        pytest.param(1, 37, 45, 4, 2, 24, "float32", {}, id="gqa-4:2"),
        pytest.param(1, 45, 29, 2, 2, 24, "float32", dict(is_causal=True), id="causal-top-left-t45-s29"),
        pytest.param(1, 29, 45, 4, 1, 24, "bfloat16", dict(is_causal=True, scale=0.3), id="causal-top-left-t29-s45-mqa-bf16"),
        pytest.param(1, 37, 45, 2, 2, 24, "float32", dict(local_window_size=5), id="window-int"),
        pytest.param(1, 37, 45, 2, 1, 24, "float16", dict(local_window_size=(6, 2)), id="window-tuple-gqa-fp16"),
        pytest.param(1, 37, 45, 2, 2, 24, "float32", dict(local_window_size=(4, 0), is_causal=True), id="window-causal"),
    ],
)
def test_jax_dot_product_attention(rng, b, t, s, n, kh, h, dtype, kwargs):
    q, k, v = (_a(rng, x, dtype) for x in ((b, t, n, h), (b, s, kh, h), (b, s, kh, h)))
    compare_jax(rng, q, k, v, dtype, **kwargs)


@needs_jax_triton
@pytest.mark.parametrize(
    "bias_shape",
    [pytest.param((1, 2, 37, 45), id="broadcast-batch"), pytest.param((2, 1, 37, 45), id="broadcast-heads"),
     pytest.param((1, 1, 37, 45), id="broadcast-batch-and-heads")],
)
def test_jax_bias_gradient(rng, bias_shape):
    """A bias gets its gradient, reduced over the axes it broadcasts along."""
    q, k, v = (_a(rng, x) for x in ((2, 37, 2, 24), (2, 45, 2, 24), (2, 45, 2, 24)))
    compare_jax(rng, q, k, v, "float32", bias=_a(rng, bias_shape), bias_grad=True)


@needs_jax_triton
def test_jax_constant_bias_writes_no_gradient(rng):
    """A bias that jax.grad does not differentiate costs no dBias: the backward's launches write
    none (BIAS_GRAD off), where before session 69 every differentiated call with a bias wrote its
    (B, Hq, Nq, Nkv) float32 gradient whole and dropped it; differentiated, it gets one. Either
    way q, k and v's gradients are jax.nn's (compare_jax, float64)."""
    import sys

    frontend = sys.modules["flashx.jax.attention"]
    q, k, v = (_a(rng, x) for x in ((2, 21, 2, 16), (2, 27, 2, 16), (2, 27, 2, 16)))
    bias = _a(rng, (2, 2, 21, 27))

    def loss(q, k, v, bias):
        return flashx.jax.dot_product_attention(q, k, v, bias).sum()

    for argnums, wants_bias_grad in (((0, 1, 2), False), ((0, 1, 2, 3), True)):
        launches = frontend._recorded_launches(jax.grad(loss, argnums=argnums), q, k, v, bias)
        calls = [build(arrays, None)[0] for build, arrays, _, _ in launches]
        written = [call.constexprs["BIAS_GRAD"] for call in calls if "BIAS_GRAD" in call.constexprs]
        assert written and any(written) == wants_bias_grad, (argnums, written)
    compare_jax(rng, q, k, v, "float32", bias=bias)


@needs_jax_triton
@pytest.mark.parametrize("batched", [True, False], ids=["btnh", "tnh-unbatched"])
def test_jax_residual_and_unbatched_inputs(rng, batched):
    """return_residual gives jax.nn's (out, logsumexp (B, T, N) in key's dtype, no gradient), and
    (T, N, H) inputs without a batch axis work as in jax.nn; implementation is accepted, ignored."""
    q, k, v = (_a(rng, x) for x in ((2, 37, 4, 24), (2, 45, 2, 24), (2, 45, 2, 24)))
    if not batched:
        q, k, v = q[0], k[0], v[0]
    out, residual = jax.jit(lambda q, k, v: flashx.jax.dot_product_attention(
        q, k, v, return_residual=True, implementation="cudnn"))(q, k, v)
    arrays = [np.asarray(x, np.float64) for x in (q, k, v)]
    want_out, want_lse = reference_attention(*(a if batched else a[None] for a in arrays))
    want_lse = np.swapaxes(want_lse, -1, -2)  # (B, N, T) -> (B, T, N)
    if not batched:
        want_out, want_lse = want_out[0], want_lse[0]
    assert out.shape == q.shape and residual.shape == q.shape[:-1] and residual.dtype == k.dtype
    assert_close(np.asarray(out, np.float64), want_out, OUT_TOL["float32"], "out")
    assert_lse(np.asarray(residual), want_lse, LSE_TOL, "residual")
    grad = jax.grad(lambda q: flashx.jax.dot_product_attention(q, k, v, return_residual=True)[1].sum())(q)
    assert not np.asarray(grad).any(), "the residual carries no gradient (as jax.nn's)"


def test_jax_unknown_implementation_is_refused(rng):
    q = _a(rng, (1, 5, 2, 16))
    with pytest.raises(ValueError, match=r"^implementation must be one of"):
        flashx.jax.dot_product_attention(q, q, q, implementation="triton")


@needs_jax_triton
def test_jax_mask(rng):
    """Bool mask (True = attend), broadcast over heads; every row keeps a key (jax.nn averages empty rows)."""
    q, k, v = (_a(rng, x) for x in ((2, 37, 2, 24), (2, 45, 2, 24), (2, 45, 2, 24)))
    mask = rng.random((2, 1, 37, 45)) < 0.5
    mask[..., 3] = True
    compare_jax(rng, q, k, v, "float32", mask=jnp.asarray(mask))


@needs_jax_triton
def test_jax_query_seq_lengths(rng):
    """Query rows past query_seq_lengths are padding: 0 in flashx (and in jax.nn's XLA path), no gradient."""
    q, k, v = (_a(rng, x) for x in ((2, 37, 2, 24), (2, 45, 2, 24), (2, 45, 2, 24)))
    lengths = jnp.asarray([20, 37], jnp.int32)
    out, grads = compare_jax(rng, q, k, v, "float32", query_seq_lengths=lengths, is_causal=True)
    assert (np.asarray(out)[0, 20:] == 0).all() and (np.asarray(grads[0])[0, 20:] == 0).all()


@needs_jax_triton
@pytest.mark.parametrize("array", [jnp.asarray, np.asarray], ids=["jax", "numpy"])
def test_jax_key_value_seq_lengths(rng, array):
    """Keys past key_value_seq_lengths are not attended to and get no gradient; the lengths as a
    jax.Array or, as jax.nn takes them too, a NumPy array."""
    q, k, v = (_a(rng, x) for x in ((2, 37, 4, 24), (2, 45, 2, 24), (2, 45, 2, 24)))
    lengths = array(np.array([19, 45], np.int32))
    _, grads = compare_jax(rng, q, k, v, "float32", key_value_seq_lengths=lengths)
    assert (np.asarray(grads[1])[0, 19:] == 0).all() and (np.asarray(grads[2])[0, 19:] == 0).all()


@needs_jax_triton
def test_jax_bias_and_mask_and_lengths(rng):
    """bias with gradient + mask + both lengths together."""
    q, k, v = (_a(rng, x) for x in ((2, 29, 2, 16), (2, 33, 2, 16), (2, 33, 2, 16)))
    mask = rng.random((1, 2, 29, 33)) < 0.7
    mask[..., 0] = True
    compare_jax(rng, q, k, v, "float32", bias=_a(rng, (2, 2, 29, 33)), bias_grad=True, mask=jnp.asarray(mask),
                query_seq_lengths=jnp.asarray([29, 17], jnp.int32), key_value_seq_lengths=jnp.asarray([25, 33], jnp.int32))


@pytest.mark.gpu
@needs_jax_triton
@pytest.mark.parametrize(
    "t, s, n, kh, h, kwargs",
    [
        pytest.param(1000, 900, 4, 2, 128, dict(local_window_size=(150, 0)), id="gqa-t1000-s900-window-150"),
        pytest.param(700, 1300, 4, 1, 128, dict(local_window_size=(333, 0), is_causal=True),
                     id="mqa-t700-s1300-window-333-causal"),
        pytest.param(800, 1000, 2, 2, 256, dict(local_window_size=(200, 0)), id="d256-t800-s1000-window-200"),
    ],
)
@pytest.mark.usefixtures("keys_unsplit")
def test_gpu_jax_top_left_window_runs_gluon_forward(rng, forward_kernels, t, s, n, kh, h, kwargs):
    """On Hopper, jax.nn's local windows (aligned top-left) with T != S take the Gluon forward,
    whose walk starts each row's window at key i - left rather than i + S - T - left: bf16 out
    and grads against jax.nn's XLA path in float64 (every row sees a key, where the two agree)."""
    from flashx.core import gluon_forward

    require_sm90("the Gluon forward's kernels")
    q, k, v = (_a(rng, x, "bfloat16") for x in ((2, t, n, h), (2, s, kh, h), (2, s, kh, h)))
    compare_jax(rng, q, k, v, "bfloat16", **kwargs)
    assert forward_kernels and all(kernel is gluon_forward.gluon_attention_forward_kernel for kernel in forward_kernels)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        pytest.param(dict(local_window_size=2.5), ValueError, r"local_window_size", id="window-float"),
        pytest.param(dict(local_window_size=(1, -3)), ValueError, r"window", id="window-negative"),
        pytest.param(dict(query_seq_lengths=jnp.asarray([3.0])), TypeError, r"query_seq_lengths", id="q-lengths-float"),
        pytest.param(dict(key_value_seq_lengths=[7]), TypeError, r"key_value_seq_lengths .*got list", id="kv-lengths-list"),
        pytest.param(dict(key_value_seq_lengths=np.array([7.0])), TypeError, r"key_value_seq_lengths .*got float",
                     id="kv-lengths-numpy-float"),
        pytest.param(dict(bias=jnp.zeros((3, 5, 7))), ValueError, r"bias", id="bias-not-broadcastable"),
        pytest.param(dict(mask=jnp.zeros((5, 7), jnp.float32)), TypeError, r"mask", id="mask-float"),
    ],
)
def test_jax_bad_input(rng, kwargs, error, match):
    q, k = _a(rng, (1, 5, 2, 16)), _a(rng, (1, 7, 2, 16))
    with pytest.raises(error, match=match):
        flashx.jax.dot_product_attention(q, k, k, **kwargs)


_CORE_JAX = r"\b(q|k|v|causal|window|seqused_q|seqused_k)\b|layout"


@pytest.mark.parametrize(
    "q_shape, kwargs, error, match, core",
    [
        pytest.param(None, dict(query_seq_lengths=jnp.asarray([3, 4], jnp.int32)), ValueError, r"^query_seq_lengths\b.*\(1,\)",
                     _CORE_JAX, id="q-lengths-shape"),
        pytest.param(None, dict(key_value_seq_lengths=jnp.asarray([[5]], jnp.int32)), ValueError, r"^key_value_seq_lengths must be 1-D",
                     _CORE_JAX, id="kv-lengths-2d"),
        pytest.param(None, dict(local_window_size=-3), ValueError, r"^local_window_size\b.*got -3$", _CORE_JAX + r"|\(-3, -3\)",
                     id="window-int-negative"),
        pytest.param(None, dict(local_window_size=(1, 2, 3)), ValueError, r"^local_window_size\b", _CORE_JAX, id="window-3-tuple"),
        pytest.param(None, dict(is_causal=1), TypeError, r"^is_causal\b", _CORE_JAX, id="is-causal-int"),
        pytest.param((5, 2, 16), {}, ValueError, r"^query must be 4-D, got shape \(5, 2, 16\)", _CORE_JAX, id="query-3d"),
        pytest.param((1, 5, 3, 16), {}, ValueError, r"^query's heads \(3\) must be a multiple of key's and value's", _CORE_JAX,
                     id="gqa-heads-possessive"),
        pytest.param(None, dict(scale="k"), TypeError, r"^scale\b.*'k'", r"'key'", id="scale-repr-untouched"),
    ],
)
def test_jax_errors_name_its_arguments(rng, q_shape, kwargs, error, match, core):
    """As test_sdpa_errors_name_its_arguments, for jax.nn's names."""
    q, k = _a(rng, q_shape or (1, 5, 2, 16)), _a(rng, (1, 7, 2, 16))
    with pytest.raises(error, match=match) as info:
        flashx.jax.dot_product_attention(q, k, k, **kwargs)
    assert not re.search(core, str(info.value)), str(info.value)
