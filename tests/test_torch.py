"""flashx.torch.attention against torch's scaled_dot_product_attention and the float64 reference.

Small shapes run everywhere (CPU through Triton's interpreter, or the GPU when there is one);
tests marked `gpu` run larger shapes on the GPU only.
"""
from __future__ import annotations

import functools
import importlib
import math
import warnings
import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import flashx.torch  # noqa: E402, I001  (flashx before triton: this module defines a @triton.jit function)
import triton  # noqa: E402
import triton.language as tl  # noqa: E402, F401  (Triton's interpreter wants it visible to @triton.jit functions)
from conftest import (  # noqa: E402
    VMAP_CASES,
    Case,
    DTYPES,
    INTERPRETED,
    assert_error_within,
    assert_lse_close,
    causal_mask,
    check_in_fresh_process,
    random_qkv,
    reference_attention,
    rel_error,
    require_sm90,
    rows_with_keys,
    shapes,
    zero_rows_without_keys,
)

DEVICE = "cpu" if INTERPRETED else "cuda"
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def to_torch(x: np.ndarray, dtype: str, device=DEVICE) -> torch.Tensor:
    return torch.from_numpy(x).to(device=device, dtype=TORCH_DTYPES[dtype])


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


def make_inputs(rng, case: Case, dtype: str, device=DEVICE, scale: float = 1.0):
    q, k, v = random_qkv(rng, *case[:7], layout=case.layout, scale=scale)
    return tuple(to_torch(x, dtype, device) for x in (q, k, v))


def to_bhnd(x: torch.Tensor, layout: str) -> torch.Tensor:
    return x.transpose(1, 2) if layout == "bnhd" else x


def sdpa(q, k, v, *, causal=False, scale=None, layout="bnhd", upcast=False):
    """torch's own attention in q's layout: native in the input dtype, or the math backend in float64.

    Causal uses an explicit bottom-right mask (SDPA's is_causal is top-left) unless Nq == Nkv.
    Rows that see no key are left as SDPA gives them; callers zero them.
    """
    q, k, v = (to_bhnd(x, layout) for x in (q, k, v))
    if upcast:
        q, k, v = q.double(), k.double(), v.double()
    nq, nkv = q.shape[2], k.shape[2]
    mask = None
    is_causal = causal and nq == nkv and not upcast
    if causal and not is_causal:
        mask = torch.from_numpy(causal_mask(nq, nkv)).to(q.device)
    gqa = q.shape[1] != k.shape[1]
    if upcast:
        with sdpa_kernel(SDPBackend.MATH):
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=gqa)
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=gqa)
    return to_bhnd(out, layout)


def check_causal_gradients(q, k, v, out, dtype: str, what: str, grad=None, grads=None) -> None:
    """out = causal attention of q, k, v (bnhd, requiring grad) and its gradients for a random dO
    against SDPA in float64, within the dtype's bound of SDPA's own error. grad, grads: a dO and
    the gradients of out already taken for it (else both are made here)."""
    if grads is None:
        grad = torch.randn_like(out)
        grads = torch.autograd.grad(out, (q, k, v), grad)
    ref_in = [x.detach().double().requires_grad_() for x in (q, k, v)]
    ref = sdpa(*ref_in, causal=True, upcast=True)
    ref_grads = torch.autograd.grad(ref, ref_in, grad.double())
    native = sdpa(q, k, v, causal=True)
    native_grads = torch.autograd.grad(native, (q, k, v), grad)
    assert_error_within(rel_error(to_numpy(out), to_numpy(ref)), rel_error(to_numpy(native), to_numpy(ref)), dtype, what)
    for name, g, r, n in zip("qkv", grads, ref_grads, native_grads):
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), dtype,
                            f"{what} d{name}")


def check_against_references(q, k, v, out, lse, dtype, *, causal=False, scale=None, layout="bnhd"):
    """flashx's out and lse against the float64 NumPy reference and float64 SDPA, bounded by native SDPA's error."""
    nq = q.shape[1 if layout == "bnhd" else 2]
    nkv = k.shape[1 if layout == "bnhd" else 2]
    dv = v.shape[-1]
    assert out.dtype == q.dtype and out.device == q.device
    assert tuple(out.shape) == (*q.shape[:3], dv)
    assert lse.dtype == torch.float32 and tuple(lse.shape) == (q.shape[0], q.shape[2 if layout == "bnhd" else 1], nq)

    ref_out, ref_lse = reference_attention(to_numpy(q), to_numpy(k), to_numpy(v), causal=causal, scale=scale, layout=layout)
    sdpa64 = zero_rows_without_keys(
        to_numpy(sdpa(q, k, v, causal=causal, scale=scale, layout=layout, upcast=True)), nq, nkv, causal, layout
    )
    assert rel_error(sdpa64, ref_out) < 1e-12, "the two float64 references disagree"
    native = zero_rows_without_keys(to_numpy(sdpa(q, k, v, causal=causal, scale=scale, layout=layout)), nq, nkv, causal, layout)
    native_error = rel_error(native, ref_out)

    got = to_numpy(out)
    assert_error_within(rel_error(got, ref_out), native_error, dtype, "out vs float64 reference")
    assert_error_within(rel_error(got, sdpa64), native_error, dtype, "out vs float64 SDPA")
    assert_lse_close(to_numpy(lse), ref_lse)


# ----------------------------------------------------------------------------------------------
# Correctness on small shapes (every dtype)
# ----------------------------------------------------------------------------------------------

SMALL_CASES = [
    pytest.param(Case(1, 37, 37, 2, 2, 64, 64), id="q37-kv37"),
    pytest.param(Case(1, 37, 37, 2, 2, 64, 64, causal=True), id="q37-kv37-causal"),
    pytest.param(Case(2, 1, 65, 2, 2, 32, 32), id="q1-kv65"),
    pytest.param(Case(1, 1, 65, 2, 2, 32, 32, causal=True), id="q1-kv65-causal"),
    pytest.param(Case(1, 65, 1, 2, 2, 32, 32), id="q65-kv1"),
    pytest.param(Case(1, 65, 37, 2, 2, 40, 40, causal=True), id="q65-kv37-causal-rows-without-keys"),
    pytest.param(Case(1, 37, 130, 2, 2, 24, 24, causal=True), id="q37-kv130-causal"),
    pytest.param(Case(1, 65, 65, 4, 2, 72, 72, causal=True), id="gqa-4:2-d72-causal"),
    pytest.param(Case(2, 37, 65, 3, 1, 32, 32, layout="bhnd"), id="mqa-3:1-bhnd"),
    pytest.param(Case(1, 37, 65, 2, 2, 40, 16, layout="bhnd"), id="d40-dv16-bhnd"),
    pytest.param(Case(1, 37, 37, 2, 1, 24, 96, causal=True), id="gqa-2:1-d24-dv96-causal"),
    pytest.param(Case(1, 37, 65, 2, 1, 1, 1), id="d1"),
    pytest.param(Case(1, 20, 33, 1, 1, 1, 256, causal=True, layout="bhnd"), id="d1-dv256-causal-bhnd"),
    pytest.param(Case(1, 20, 33, 1, 1, 256, 256), id="d256"),
    pytest.param(Case(1, 130, 130, 2, 2, 16, 16, causal=True), id="q130-kv130-causal"),
    pytest.param(Case(1, 203, 203, 1, 1, 16, 16), id="q203-kv203"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", SMALL_CASES)
def test_matches_reference(rng, case, dtype):
    """out and lse agree with float64 references, within a small factor of SDPA's own error."""
    q, k, v = make_inputs(rng, case, dtype)
    out, lse = flashx.torch.attention(q, k, v, causal=case.causal, layout=case.layout, return_lse=True)
    check_against_references(q, k, v, out, lse, dtype, causal=case.causal, layout=case.layout)


# Nkv - Nq around multiples of the key/query tile sizes (16 in the interpreter, 64 and 128 on the GPU),
# where the unmasked/masked split of the key loop and the last key block can be off by one.
CAUSAL_OFFSETS = [-65, -63, -31, -18, -17, -2, -1, 1, 14, 15, 17, 30, 62, 63, 65, 127, 129]


@pytest.mark.parametrize("offset", [pytest.param(o, id=f"nkv-nq={o}") for o in CAUSAL_OFFSETS])
def test_causal_diagonal_offsets(rng, offset):
    """Bottom-right causal masking for Nkv - Nq across tile boundaries (fp32, so any wrong key shows)."""
    nq = 70 if INTERPRETED else 300
    case = Case(1, nq, nq + offset, 2, 1, 16, 16, causal=True)
    q, k, v = make_inputs(rng, case, "float32")
    out, lse = flashx.torch.attention(q, k, v, causal=True, return_lse=True)
    check_against_references(q, k, v, out, lse, "float32", causal=True)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(Case(1, 65, 37, 2, 2, 32, 24, causal=True), id="causal-q65-kv37"),
        pytest.param(Case(1, 70, 5, 2, 1, 16, 16, causal=True, layout="bhnd"), id="causal-q70-kv5-gqa-bhnd"),
        pytest.param(Case(2, 19, 0, 2, 2, 16, 16), id="kv0"),
    ],
)
def test_rows_without_keys_are_zero(rng, case):
    """A row that sees no key gives out exactly 0 and lse exactly -inf (never NaN); the others are correct."""
    q, k, v = make_inputs(rng, case, "float16")
    out, lse = flashx.torch.attention(q, k, v, causal=case.causal, layout=case.layout, return_lse=True)
    empty = ~rows_with_keys(case.nq, case.nkv, case.causal)
    assert empty.any()
    rows = out[:, empty] if case.layout == "bnhd" else out[:, :, empty]
    assert torch.equal(rows, torch.zeros_like(rows))
    assert torch.isneginf(lse[:, :, empty]).all()
    assert torch.isfinite(lse[:, :, ~empty]).all()
    check_against_references(q, k, v, out, lse, "float16", causal=case.causal, layout=case.layout)


@pytest.mark.parametrize("layout", ["bnhd", "bhnd"])
def test_empty_query_or_batch(rng, layout):
    """Nq = 0 or B = 0: empty outputs of the right shapes, dtype and device."""
    for b, nq in ((1, 0), (0, 5)):
        q, k, v = make_inputs(rng, Case(b, nq, 7, 2, 1, 16, 24, layout=layout), "float16")
        out, lse = flashx.torch.attention(q, k, v, layout=layout, return_lse=True)
        assert tuple(out.shape) == (*q.shape[:3], 24) and out.dtype == torch.float16 and out.device == q.device
        assert tuple(lse.shape) == (b, 2, nq) and lse.dtype == torch.float32


def test_return_lse_false_returns_tensor(rng):
    """Without return_lse the result is one tensor, equal to the out of return_lse=True."""
    q, k, v = make_inputs(rng, Case(1, 17, 23, 2, 2, 16, 16), "float32")
    out = flashx.torch.attention(q, k, v)
    assert isinstance(out, torch.Tensor)
    out2, _ = flashx.torch.attention(q, k, v, return_lse=True)
    assert torch.equal(out, out2)


@pytest.mark.parametrize(
    "scale",
    [
        pytest.param(0.3, id="float"),
        pytest.param(1, id="int"),
        pytest.param(-0.2, id="negative"),
        pytest.param(0.0, id="zero"),
    ],
)
def test_explicit_scale(rng, scale):
    """An explicit scale replaces 1/sqrt(D); ints, negatives and 0 (uniform weights) are valid."""
    case = Case(1, 37, 45, 2, 1, 24, 24, causal=True)
    q, k, v = make_inputs(rng, case, "float32")
    out, lse = flashx.torch.attention(q, k, v, causal=True, scale=scale, return_lse=True)
    check_against_references(q, k, v, out, lse, "float32", causal=True, scale=scale)


@pytest.mark.parametrize(
    "scale",
    [pytest.param(1e-4, id="moderate-softmax"), pytest.param(1.0, id="saturated-softmax")],
)
def test_fp16_scores_beyond_fp16_range(rng, scale):
    """q.k dot products of ~1e5 (past fp16's 65504): finite, correct output; the kernel must not form scores in fp16.

    torch's own fp16 attention may overflow here, so only the fp16 cap bounds the error.
    """
    case = Case(1, 37, 45, 2, 2, 32, 32)
    q, k, v = make_inputs(rng, case, "float16")
    q, k = q * 80.0, k * 80.0  # |q.k| ~ 80 * 80 * sqrt(32) ~ 4e4, the largest ~ 1e5
    dots = torch.einsum("bihd,bjhd->bhij", q.double(), k.double())
    assert dots.abs().max() > 65504
    out, lse = flashx.torch.attention(q, k, v, scale=scale, return_lse=True)
    ref_out, ref_lse = reference_attention(to_numpy(q), to_numpy(k), to_numpy(v), scale=scale)
    assert_error_within(rel_error(to_numpy(out), ref_out), None, "float16")
    assert_lse_close(to_numpy(lse), ref_lse)


def _poison_uninitialized_allocations(monkeypatch) -> list:
    """From here on torch.empty and Tensor.new_empty fill floating-point tensors with NaN; returns
    the list of the poisoned tensors' shapes, which grows as they are allocated."""
    poisoned = []

    def poisoning(allocate):
        def poisoned_allocate(*args, **kwargs):
            t = allocate(*args, **kwargs)
            if t.is_floating_point():
                t.fill_(float("nan"))
                poisoned.append(tuple(t.shape))
            return t
        return poisoned_allocate

    monkeypatch.setattr(torch, "empty", poisoning(torch.empty))
    monkeypatch.setattr(torch.Tensor, "new_empty", poisoning(torch.Tensor.new_empty))
    return poisoned


def test_every_output_element_is_written(rng, monkeypatch):
    """Outputs are allocated uninitialized: make that allocation NaN-filled, then expect every element written."""
    case = Case(2, 37, 29, 3, 1, 40, 24, causal=True, layout="bhnd")
    q, k, v = make_inputs(rng, case, "float16")
    poisoned = _poison_uninitialized_allocations(monkeypatch)
    out, lse = flashx.torch.attention(q, k, v, causal=True, layout="bhnd", return_lse=True)
    monkeypatch.undo()
    assert {(2, 3, 37, 24), (2, 3, 37)} <= set(poisoned), f"out and lse were not allocated uninitialized: {poisoned}"
    assert torch.isfinite(out).all()
    assert not torch.isnan(lse).any()
    check_against_references(q, k, v, out, lse, "float16", causal=True, layout="bhnd")


def test_every_gradient_element_is_written(rng, monkeypatch):
    """Gradients and the backward's row statistics are allocated uninitialized: with those
    allocations NaN-filled, dq, dk and dv must still match float64 SDPA (every element written,
    no padding row of delta or lse_log2 read unwritten)."""
    case = Case(2, 29, 37, 2, 2, 24, 24, causal=True)  # Nq < Nkv: bottom-right; rows padded to a block
    q, k, v = (x.requires_grad_() for x in make_inputs(rng, case, "float32"))
    out = flashx.torch.attention(q, k, v, causal=True)
    grad = torch.randn_like(out)
    poisoned = _poison_uninitialized_allocations(monkeypatch)
    grads = torch.autograd.grad(out, (q, k, v), grad)
    monkeypatch.undo()
    assert {tuple(q.shape), tuple(k.shape), tuple(v.shape)} <= set(poisoned), \
        f"the gradients were not allocated uninitialized: {poisoned}"
    for name, g in zip("qkv", grads):
        assert torch.isfinite(g).all(), f"d{name} has unwritten (NaN) elements"
    check_causal_gradients(q, k, v, out, "float32", "poisoned allocations", grad, grads)


# ----------------------------------------------------------------------------------------------
# Strided inputs
# ----------------------------------------------------------------------------------------------


def _packed_qkv(rng, dtype):
    """q, k, v as slices of one (B, N, 3, H, D) tensor."""
    qkv = to_torch(rng.standard_normal((2, 37, 3, 2, 40)).astype(np.float32), dtype)
    return qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], "bnhd"


def _packed_gqa_heads(rng, dtype):
    """q, k, v as head slices of one (B, N, Hq + 2 Hkv, D) tensor (fused GQA projection)."""
    qkv = to_torch(rng.standard_normal((1, 45, 4 + 2 + 2, 24)).astype(np.float32), dtype)
    return qkv[:, :, :4], qkv[:, :, 4:6], qkv[:, :, 6:], "bnhd"


def _transposed_views(rng, dtype):
    """bnhd views of (B, H, N, D) tensors (the sequence axis is not the slow one)."""
    q, k, v = (to_torch(rng.standard_normal(s).astype(np.float32), dtype) for s in ((1, 2, 37, 32), (1, 2, 50, 32), (1, 2, 50, 16)))
    return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), "bnhd"


def _bhnd_of_bnhd_memory(rng, dtype):
    """bhnd views of (B, N, H, D) tensors."""
    q, k, v = (to_torch(rng.standard_normal(s).astype(np.float32), dtype) for s in ((1, 37, 2, 32), (1, 50, 1, 32), (1, 50, 1, 32)))
    return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), "bhnd"


def _head_dim_stride_2(rng, dtype):
    """Every other element of the head dim (D stride 2), with a sliced sequence."""
    q, k, v = (to_torch(rng.standard_normal(s).astype(np.float32), dtype) for s in ((1, 40, 2, 48), (1, 60, 2, 48), (1, 60, 2, 32)))
    return q[:, 3:, :, ::2], k[:, 5:, :, ::2], v[:, 5:, :, ::2], "bnhd"


def _broadcast_kv_heads(rng, dtype):
    """k and v expanded over heads (head stride 0)."""
    q = to_torch(rng.standard_normal((1, 37, 3, 16)).astype(np.float32), dtype)
    k, v = (to_torch(rng.standard_normal((1, 41, 1, 16)).astype(np.float32), dtype).expand(1, 41, 3, 16) for _ in range(2))
    return q, k, v, "bnhd"


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(_packed_qkv, id="packed-qkv"),
        pytest.param(_packed_gqa_heads, id="packed-gqa-heads"),
        pytest.param(_transposed_views, id="transposed-view"),
        pytest.param(_bhnd_of_bnhd_memory, id="bhnd-view-of-bnhd"),
        pytest.param(_head_dim_stride_2, id="head-dim-stride-2"),
        pytest.param(_broadcast_kv_heads, id="broadcast-kv-heads"),
    ],
)
def test_strided_inputs(rng, make, dtype):
    """Non-contiguous q, k, v give the right answer (strides go to the kernel as they are)."""
    q, k, v, layout = make(rng, dtype)
    assert not all(x.is_contiguous() for x in (q, k, v))
    out, lse = flashx.torch.attention(q, k, v, causal=True, layout=layout, return_lse=True)
    check_against_references(q, k, v, out, lse, dtype, causal=True, layout=layout)


# ----------------------------------------------------------------------------------------------
# torch.compile and the registered op
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "backend, dynamic",
    [
        pytest.param("eager", False, id="eager"),
        pytest.param("aot_eager", False, id="aot_eager"),
        pytest.param("aot_eager", True, id="aot_eager-dynamic"),
    ],
)
def test_torch_compile_fullgraph(rng, backend, dynamic):
    """flashx traces into one graph under torch.compile(fullgraph=True) and matches eager bit for bit."""
    torch._dynamo.reset()

    def fn(q, k, v):
        out, lse = flashx.torch.attention(q, k, v, causal=True, layout="bhnd", return_lse=True)
        return out * 2.0, lse

    compiled = torch.compile(fn, backend=backend, fullgraph=True, dynamic=dynamic)
    for case in (Case(1, 37, 29, 2, 1, 24, 40, causal=True, layout="bhnd"), Case(1, 20, 45, 2, 1, 24, 40, causal=True, layout="bhnd")):
        q, k, v = make_inputs(rng, case, "float16")
        out, lse = compiled(q, k, v)
        ref_out, ref_lse = fn(q, k, v)
        assert torch.equal(out, ref_out)
        assert torch.equal(lse, ref_lse)


def test_torch_compile_first_call_of_the_process(rng, monkeypatch):
    """A process whose first flashx call is traced (a compiled decode loop, say): the plan's device
    queries (the SM count, asked of libcuda through ctypes, which Dynamo cannot trace) run at
    trace time as constants. Before, fullgraph=True failed there (the H200 found it in
    test_paged_decode_reduce_overhead_gpu, 2026-12-05)."""
    from flashx.core import plan, runtime

    monkeypatch.setattr(runtime, "_multiprocessors", None)  # as in a fresh process
    plan.clear_plan_cache()
    torch._dynamo.reset()

    def fn(q, k, v):
        return flashx.torch.attention(q, k, v, causal=True)

    q, k, v = make_inputs(rng, Case(2, 1, 77, 4, 2, 24, 24, causal=True), "float32")
    out = torch.compile(fn, backend="eager", fullgraph=True)(q, k, v)
    assert torch.equal(out, fn(q, k, v))
    assert runtime._multiprocessors is not None, "the SM count was not asked at trace time"


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph_backward(rng, backend):
    """Forward and backward trace into one graph (fullgraph=True) and give eager's gradients bit for bit,
    with a window and the lse in the loss so that every backward input is exercised."""
    torch._dynamo.reset()

    def loss(q, k, v, w):
        out, lse = flashx.torch.attention(q, k, v, causal=True, window=(5, -1), return_lse=True)
        return (out.float() * w).sum() + lse.sum() * 0.5

    case = Case(1, 23, 31, 4, 2, 24, 40, causal=True)
    q, k, v = (x.requires_grad_() for x in make_inputs(rng, case, "float32"))
    w = torch.from_numpy(rng.standard_normal((1, 23, 4, 40)).astype("float32")).to(DEVICE)
    compiled = torch.compile(loss, backend=backend, fullgraph=True)
    grads = torch.autograd.grad(compiled(q, k, v, w), (q, k, v))
    eager = torch.autograd.grad(loss(q, k, v, w), (q, k, v))
    for name, got, want in zip("qkv", grads, eager):
        assert torch.equal(got, want), f"d{name} differs between compiled and eager"
        assert got.abs().sum() > 0, f"d{name} is all zero"


def test_compiled_graph_keys_on_flashx_sources(rng):
    """torch.compile's on-disk caches key a compiled graph on the graph Dynamo traced, which holds
    the forward op's call but not the backward that flashx's autograd formula traces for it: the
    forward op's call carries a hash of flashx's sources (deterministic, an int64), so a graph
    cached by another flashx version is not reused. (Session 69: a cached backward from before a
    change of the backward op's arguments called it with the old ones.)"""
    module = importlib.import_module("flashx.torch.attention")
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm.code)
        return gm.forward

    torch._dynamo.reset()
    q = torch.tensor(rng.standard_normal((1, 9, 2, 16)), dtype=torch.float32, device=DEVICE)
    torch.compile(lambda q: flashx.torch.attention(q, q, q, causal=True), backend=backend, fullgraph=True)(q)
    key = module._SOURCE_KEY
    assert module._source_key() == key and 0 <= key < 2**56
    assert graphs and str(key) in graphs[0], graphs


@pytest.mark.parametrize("arrays", ["alibi", "varlen", "sdpa-bias", "sdpa-mask"])
def test_torch_compile_with_optional_arrays(rng, arrays, monkeypatch):
    """Calls with an optional array (ALiBi slopes, varlen offsets, the SDPA drop-in's float bias
    or boolean mask) trace under torch.compile(fullgraph=True) and give eager's gradients bit for
    bit. Before NOTES v0.50 every such call failed there: the plan's cache key sorted tuples
    holding ArraySpecs, which Dynamo cannot sort. The trace warns of no functools.lru_cache
    (Dynamo steps through a cache with a UserWarning about possible silent incorrectness; before
    2026-12-05 every compiled call gave three)."""
    torch._dynamo.reset()
    if hasattr(torch._dynamo.utils, "warn_once_cache"):  # Dynamo warns once a process: forget earlier tests'
        monkeypatch.setattr(torch._dynamo.utils, "warn_once_cache", set())
    if arrays.startswith("sdpa"):
        q, k, v = (torch.from_numpy(rng.standard_normal((2, 3, n, 24)).astype("float32")).to(DEVICE).requires_grad_()
                   for n in (21, 30, 30))
        bias = rng.standard_normal((2, 3, 21, 30)).astype("float32")
        attn_mask = torch.from_numpy(bias if arrays == "sdpa-bias" else bias > -1.0).to(DEVICE)
        attend = functools.partial(flashx.torch.scaled_dot_product_attention, attn_mask=attn_mask)
    elif arrays == "alibi":
        q, k, v = (x.requires_grad_() for x in make_inputs(rng, Case(2, 19, 26, 4, 2, 24, 24, causal=True), "float32"))
        slopes = torch.from_numpy(rng.uniform(0.1, 1.0, (4,)).astype("float32")).to(DEVICE)
        attend = functools.partial(flashx.torch.attention, causal=True, alibi_slopes=slopes)
    else:
        lengths = (11, 4, 17)
        q, k, v = (torch.from_numpy(rng.standard_normal((sum(lengths), 4, 24)).astype("float32")).to(DEVICE).requires_grad_()
                   for _ in range(3))
        offsets = torch.tensor(np.cumsum((0,) + lengths), dtype=torch.int32, device=DEVICE)
        attend = functools.partial(flashx.torch.attention, causal=True, cu_seqlens_q=offsets, cu_seqlens_k=offsets,
                                   max_seqlen_q=17, max_seqlen_k=17)

    def loss(q, k, v):
        return (attend(q, k, v) ** 2).sum()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grads = torch.autograd.grad(torch.compile(loss, backend="aot_eager", fullgraph=True)(q, k, v), (q, k, v))
    assert not [w for w in caught if "lru_cache" in str(w.message)], [str(w.message)[:120] for w in caught]
    eager = torch.autograd.grad(loss(q, k, v), (q, k, v))
    for name, got, want in zip("qkv", grads, eager):
        assert torch.equal(got, want), f"d{name} differs between compiled and eager"
        assert got.abs().sum() > 0, f"d{name} is all zero"


@pytest.mark.parametrize("frozen", ["kv", "q", "v"], ids=["kv-frozen", "q-frozen", "v-frozen"])
@pytest.mark.parametrize("path", ["eager", "torch.func", "compile"])
def test_backward_runs_only_the_passes_it_needs(rng, monkeypatch, frozen, path):
    """Where k and v take no gradient (a frozen encoder's keys and values, a cache's) the backward
    runs no dK/dV pass, and where q takes none no dQ pass: no launch writes what nobody reads, on
    each autograd path (the eager Function, torch.func.grad through the ops, torch.compile). The
    gradients that are taken match SDPA's in float64 (bounded by its own error); v alone frozen
    still needs dK's pass, which computes both. Before session 69 every backward ran both."""
    module = importlib.import_module("flashx.torch.attention")
    written = []
    original = module.core.launch.KernelCall.launch

    def spy(call, outputs, inputs=(), allocator=None):
        written.extend(call.writes)
        return original(call, outputs, inputs, allocator)

    monkeypatch.setattr(module.core.launch.KernelCall, "launch", spy)
    q, k, v = make_inputs(rng, Case(2, 29, 29, 4, 2, 16, 16, causal=True), "float32")
    wrt = [x for name, x in zip("qkv", (q, k, v)) if name not in frozen]
    grad = torch.randn(q.shape, dtype=q.dtype, device=q.device)

    def loss(*leaves):
        args = dict(zip([n for n in "qkv" if n not in frozen], leaves))
        return (flashx.torch.attention(args.get("q", q), args.get("k", k), args.get("v", v), causal=True) * grad).sum()

    if path == "torch.func":
        grads = torch.func.grad(loss, argnums=tuple(range(len(wrt))))(*wrt)
    else:
        leaves = [x.clone().requires_grad_() for x in wrt]
        fn = torch.compile(loss, backend="aot_eager", fullgraph=True) if path == "compile" else loss
        if path == "compile":
            torch._dynamo.reset()
        written.clear()
        grads = torch.autograd.grad(fn(*leaves), leaves)
    gradient_writes = set(written) - {"O", "LSE", "DELTA", "LSE_LOG2"}
    assert ("DQ" in gradient_writes) == ("q" not in frozen), gradient_writes
    assert ("DK" in gradient_writes) == ("k" not in frozen), gradient_writes
    ref_in = [x.detach().double().requires_grad_() for x in (q, k, v)]
    ref_grads = dict(zip("qkv", torch.autograd.grad(sdpa(*ref_in, causal=True, upcast=True), ref_in, grad.double())))
    native_in = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    native_grads = dict(zip("qkv", torch.autograd.grad(sdpa(*native_in, causal=True), native_in, grad)))
    for name, g in zip([n for n in "qkv" if n not in frozen], grads):
        assert_error_within(rel_error(to_numpy(g), to_numpy(ref_grads[name])),
                            rel_error(to_numpy(native_grads[name]), to_numpy(ref_grads[name])), "float32", f"d{name}")


@pytest.mark.parametrize("in_dq", [False, True], ids=["preprocess", "dq"])
@pytest.mark.parametrize("window", [None, (5, -1)])
def test_backward_row_statistics_fill_their_padding(rng, monkeypatch, window, in_dq):
    """The backward's first launch, the preprocess or dQ's programs (tuning.DQ_ROW_STATS), writes
    every row of the padded delta and lse_log2, which the dK/dV and dQ loops read without a mask:
    real rows rowsum(dO * O) and lse in log2 units (-inf, a row that sees no key, becomes +inf),
    padding rows 0 and +inf. The gradient tests cannot see the padding: past the sequence q and dO
    load as zeros, so any finite value there gives the same gradients, and only a NaN or -inf
    would show."""
    from flashx import core
    from flashx.torch.attention import _spec

    monkeypatch.setattr(core.tuning, "DQ_ROW_STATS", in_dq)
    case = Case(2, 37, 21, 3, 3, 24, 24, causal=True)  # Nq > Nkv: bottom-right, rows 0-15 see no key
    q, k, v = make_inputs(rng, case, "float32")
    out, lse = flashx.torch.attention(q, k, v, causal=True, window=window, return_lse=True)
    dout = torch.randn_like(out)
    plan = core.plan_attention(_spec("q", q), _spec("k", k), _spec("v", v), causal=True, window=window)
    assert plan.flags["PADDED_ROW_STATS"] and plan.row_stats_shape[-1] % 128 == 0 and plan.row_stats_shape[-1] > 37
    # More padding rows than one dQ block: the dQ launch's grid must cover them too.
    assert plan.row_stats_shape[-1] - 37 > plan.tiles.dq.block_m
    delta, lse_log2 = (torch.full(plan.row_stats_shape, float("nan"), device=q.device) for _ in range(2))
    arrays = dict(Q=q, K=k, V=v, O=out, DO=dout, LSE=lse)
    first, *_ = plan.backward_calls(arrays, torch.empty(1, device=q.device), False, _spec("grad_out", dout), split=True)
    assert (first.kernel is core.plan.attention_backward_kernel) is in_dq
    assert set(core.ROW_STATS_OUTPUTS) <= set(first.writes)
    outputs = dict(DELTA_OUT=delta, LSE_LOG2_OUT=lse_log2, DQ=torch.empty_like(q))
    first.launch(plan.launch_outputs(first, outputs, torch.empty(1, device=q.device)))

    want_delta = (out.double() * dout.double()).sum(-1).transpose(1, 2)  # (B, Nq, H) -> (B, H, Nq)
    lse64 = lse.double()
    assert bool((lse64[:, :, :16] == float("-inf")).all()), "the rows that see no key should have lse = -inf"
    want_lse_log2 = torch.where(lse64 == float("-inf"), float("inf"), lse64 * math.log2(math.e))
    got_delta, got_lse = delta.double(), lse_log2.double()
    assert torch.allclose(got_delta[:, :, :37], want_delta, rtol=1e-5, atol=1e-5)
    assert torch.equal(torch.isinf(got_lse[:, :, :37]), torch.isinf(want_lse_log2))
    finite = torch.isfinite(want_lse_log2)
    assert torch.allclose(got_lse[:, :, :37][finite], want_lse_log2[finite], rtol=1e-6, atol=1e-6)
    assert bool((got_delta[:, :, 37:] == 0).all()), "padding rows of delta must be 0"
    assert bool((got_lse[:, :, 37:] == float("inf")).all()), "padding rows of lse_log2 must be +inf"


@pytest.mark.parametrize("slopes_grad", [False, True], ids=["plain", "alibi-slopes-grad"])
def test_opcheck_backward_op(rng, slopes_grad):
    """torch.ops.flashx.attention_backward passes opcheck's schema and fake-tensor checks, also
    writing ALiBi's slopes' per-block parts in place of dBias."""
    from flashx.core import CallOptions
    from flashx.torch.attention import _OPTIONAL_INPUTS, _encode

    case = Case(1, 13, 17, 4, 2, 24, 40, causal=True)
    q, k, v = make_inputs(rng, case, "float32")
    encoded = _encode(CallOptions(causal=True, window=(6, -1)))
    tensors = [None] * len(_OPTIONAL_INPUTS)
    if slopes_grad:
        tensors[_OPTIONAL_INPUTS.index("SLOPES")] = torch.rand(4, device=DEVICE)
    out, lse = torch.ops.flashx.attention_forward(q, k, v, None, None, tensors, *encoded)
    dout = torch.randn_like(out)
    torch.library.opcheck(
        torch.ops.flashx.attention_backward.default,
        (dout, None, q, k, v, out, lse, None, tensors, False, slopes_grad, True, True, *encoded),
        test_utils=("test_schema", "test_faketensor"),
    )


@pytest.mark.parametrize(
    "case, slopes",
    [
        pytest.param(Case(1, 21, 13, 4, 2, 24, 40, causal=True), False, id="bnhd-causal-gqa"),
        pytest.param(Case(1, 13, 21, 2, 2, 16, 16, layout="bhnd"), False, id="bhnd"),
        pytest.param(Case(2, 13, 21, 2, 2, 16, 16, causal=True), True, id="alibi-slopes-grad"),
    ],
)
def test_opcheck(rng, case, slopes):
    """torch.ops.flashx.attention_forward passes torch.library.opcheck's schema, fake-tensor and
    autograd-registration checks; with ALiBi slopes that require grad (passed again as the op's
    `slopes` argument, which autograd sees) too."""
    from flashx.core import CallOptions
    from flashx.torch.attention import _OPTIONAL_INPUTS, _encode

    q, k, v = (x.requires_grad_() for x in make_inputs(rng, case, "float32"))
    options = CallOptions(causal=case.causal, scale=0.25 if case.causal else None, layout=case.layout)
    tensors = [None] * len(_OPTIONAL_INPUTS)
    differentiated = None
    if slopes:
        differentiated = tensors[_OPTIONAL_INPUTS.index("SLOPES")] = torch.rand(2, 2, device=DEVICE).requires_grad_()
    torch.library.opcheck(
        torch.ops.flashx.attention_forward.default,
        (q, k, v, None, differentiated, tensors, *_encode(options)),
        test_utils=("test_schema", "test_faketensor", "test_autograd_registration"),
    )


# ----------------------------------------------------------------------------------------------
# torch.func: vmap and grad
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def launched_batches(monkeypatch):
    """The batch size of every forward and backward the ops run (their implementations' plans)."""
    import sys

    module = sys.modules["flashx.torch.attention"]
    batches = []
    for name in ("_forward_impl", "_backward_impl"):
        def spy(plan, *args, _original=getattr(module, name), **kwargs):
            batches.append(plan.batch)
            return _original(plan, *args, **kwargs)
        monkeypatch.setattr(module, name, spy)
    return batches


def _mapped_inputs(rng, case: Case, dtype: str, size: int, in_dims):
    """`size` fresh slices of q, k, v, and them stacked along in_dims (None: the first slice's, shared)."""
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * 3
    slices = [make_inputs(rng, case, dtype) for _ in range(size)]
    stacked = tuple(slices[0][i] if d is None else torch.stack([s[i] for s in slices], dim=d) for i, d in enumerate(dims))
    return [tuple(s[i] if d is not None else slices[0][i] for i, d in enumerate(dims)) for s in slices], stacked


@pytest.mark.parametrize("case, size, in_dims, out_dims", VMAP_CASES)
def test_vmap_folds_into_one_launch(rng, launched_batches, case, size, in_dims, out_dims):
    """torch.func.vmap of attention: each slice's out and lse agree with the float64 references
    as an unmapped call's do, and the mapped dim folds into the batch of one launch."""
    slices, (q, k, v) = _mapped_inputs(rng, case, "float16", size, in_dims)
    call = lambda q, k, v: flashx.torch.attention(q, k, v, causal=case.causal, layout=case.layout, return_lse=True)  # noqa: E731
    out, lse = torch.func.vmap(call, in_dims=in_dims, out_dims=out_dims)(q, k, v)
    assert launched_batches == [size * case.b]
    for i, (qi, ki, vi) in enumerate(slices):
        check_against_references(qi, ki, vi, out.select(out_dims, i), lse.select(out_dims, i), "float16",
                                 causal=case.causal, layout=case.layout)


def test_vmap_of_vmap(rng, launched_batches):
    """Two nested vmaps fold into one launch (3 x 2 x B)."""
    case = Case(1, 19, 26, 2, 1, 16, 16, causal=True)
    slices = [[make_inputs(rng, case, "float32") for _ in range(2)] for _ in range(3)]
    q, k, v = (torch.stack([torch.stack([s[i] for s in row]) for row in slices]) for i in range(3))
    call = lambda q, k, v: flashx.torch.attention(q, k, v, causal=True, return_lse=True)  # noqa: E731
    out, lse = torch.func.vmap(torch.func.vmap(call))(q, k, v)
    assert launched_batches == [6]
    for a, row in enumerate(slices):
        for b, (qi, ki, vi) in enumerate(row):
            check_against_references(qi, ki, vi, out[a, b], lse[a, b], "float32", causal=True)


@pytest.mark.parametrize("wrt", ["qkv", "q"], ids=["all", "kv-frozen"])
@pytest.mark.parametrize("transform", ["grad", "vmap-of-grad", "backward-of-vmap"])
def test_func_gradients(rng, launched_batches, transform, wrt):
    """torch.func.grad, vmap of it, and autograd through a vmap (k and v shared by the slices):
    the gradients against SDPA's in float64 under the same transform, bounded by its own error
    in float16; every kernel folded. In q alone too (the backward then runs dQ's pass only, and
    its left-out dK and dV fold and unfold as empty stand-ins)."""
    case = Case(2, 33, 45, 4, 2, 24, 24, causal=True)
    slices, (q, k, v) = _mapped_inputs(rng, case, "float16", 3, (0, None, None))
    cotangent = torch.randn(3, *q.shape[1:4], v.shape[-1], dtype=torch.float16, device=DEVICE)

    argnums = tuple("qkv".index(name) for name in wrt)

    def grads(fn, q, k, v, g):
        loss = lambda q, k, v, g: (fn(q, k, v) * g).sum()  # noqa: E731
        if transform == "grad":
            return torch.func.grad(loss, argnums=argnums)(q[0], k, v, g[0])
        if transform == "vmap-of-grad":
            return torch.func.vmap(torch.func.grad(loss, argnums=argnums), in_dims=(0, None, None, 0))(q, k, v, g)
        leaves = [x.detach().requires_grad_(name in wrt) for name, x in zip("qkv", (q, k, v))]
        torch.func.vmap(loss, in_dims=(0, None, None, 0))(*leaves, g).sum().backward()
        return tuple(leaves[i].grad for i in argnums)

    ours = grads(lambda q, k, v: flashx.torch.attention(q, k, v, causal=True), q, k, v, cotangent)
    folded = case.b if transform == "grad" else 3 * case.b
    assert len(launched_batches) == 2 and set(launched_batches) == {folded}  # forward, backward
    ref = grads(lambda q, k, v: sdpa(q, k, v, causal=True, upcast=True), q, k, v, cotangent.double())
    native = grads(lambda q, k, v: sdpa(q, k, v, causal=True), q, k, v, cotangent)
    assert len(ours) == len(wrt)
    for name, g, r, n in zip(wrt, ours, ref, native):
        assert g.shape == r.shape, name
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), "float16", f"d{name}")


def test_func_jacobian_at_batch_one(rng):
    """torch.func.jacrev (vmap over the cotangents of a vjp: out and lse reach the backward
    unmapped) against SDPA's Jacobian in float64. At batch 1 the folded out and lse were views
    of stride 0, which the backward read as dense: NaNs and 1e38s. (Small: 32 cotangents.)"""
    case = Case(1, 2, 5, 1, 1, 16, 16, causal=True)
    q, k, v = make_inputs(rng, case, "float32")
    ours = torch.func.jacrev(lambda q: flashx.torch.attention(q, k, v, causal=True))(q)
    ref = torch.func.jacrev(lambda q: sdpa(q, k, v, causal=True, upcast=True))(q.double())
    assert ours.shape == ref.shape
    assert rel_error(to_numpy(ours), to_numpy(ref)) < 1e-5


@pytest.mark.parametrize("bias_dim", [0, None], ids=["bias-mapped", "bias-shared"])
def test_vmap_bias_gradients_slice_by_slice(rng, launched_batches, bias_dim):
    """vmap of grad through the SDPA drop-in with a float attn_mask (its gradient per slice: the
    ops run slice by slice), against torch's SDPA in float64, bounded by its float32 error."""
    case = Case(1, 17, 29, 2, 2, 16, 16, layout="bhnd")
    slices, (q, k, v) = _mapped_inputs(rng, case, "float32", 3, 0)
    bias = torch.randn((3, 1, 2, 17, 29) if bias_dim == 0 else (1, 2, 17, 29), device=DEVICE)

    def grads(fn, *tensors):
        loss = lambda q, k, v, b: fn(q, k, v, attn_mask=b).square().sum()  # noqa: E731
        return torch.func.vmap(torch.func.grad(loss, argnums=(0, 1, 2, 3)), in_dims=(0, 0, 0, bias_dim))(*tensors)

    ours = grads(flashx.torch.scaled_dot_product_attention, q, k, v, bias)
    assert len(launched_batches) == 6 and set(launched_batches) == {case.b}  # 3 slices, forward and backward
    with sdpa_kernel(SDPBackend.MATH):
        ref = grads(F.scaled_dot_product_attention, *(x.double() for x in (q, k, v, bias)))
    native = grads(F.scaled_dot_product_attention, q, k, v, bias)
    for name, g, r, n in zip(("dq", "dk", "dv", "dbias"), ours, ref, native):
        assert g.shape == r.shape and g.shape[0] == 3, name
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), "float32", name)


@pytest.mark.gpu
@pytest.mark.parametrize("case", [pytest.param(Case(1, 1000, 1000, 4, 2, 128, 128, causal=True), id="d128-gqa-n1000-causal"),
                                  pytest.param(Case(2, 300, 520, 2, 2, 64, 64), id="d64-q300-kv520")])
def test_gpu_vmap(rng, launched_batches, case):
    """On the GPU: torch.func.vmap of the forward (each slice against the float64 references) and
    of torch.func.grad (against SDPA's in float64, bounded by its bfloat16 error), folded, through
    the routed kernels."""
    slices, (q, k, v) = _mapped_inputs(rng, case, "bfloat16", 2, 0)
    out, lse = torch.func.vmap(lambda q, k, v: flashx.torch.attention(q, k, v, causal=case.causal, return_lse=True))(q, k, v)
    for i, (qi, ki, vi) in enumerate(slices):
        check_against_references(qi, ki, vi, out[i], lse[i], "bfloat16", causal=case.causal)

    cotangent = torch.randn_like(out)

    def grads(fn, *tensors, g=cotangent):
        loss = lambda q, k, v, g: (fn(q, k, v) * g).sum()  # noqa: E731
        return torch.func.vmap(torch.func.grad(loss, argnums=(0, 1, 2)))(*tensors, g)

    ours = grads(lambda q, k, v: flashx.torch.attention(q, k, v, causal=case.causal), q, k, v)
    assert set(launched_batches) == {2 * case.b}
    ref = grads(lambda q, k, v: sdpa(q, k, v, causal=case.causal, upcast=True), q, k, v, g=cotangent.double())
    native = grads(lambda q, k, v: sdpa(q, k, v, causal=case.causal), q, k, v)
    for name, g, r, n in zip("qkv", ours, ref, native):
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), "bfloat16", f"d{name}")


def test_func_second_derivative_raises(rng):
    """torch.func.grad of flashx's torch.func.grad raises NotImplementedError (computed without a
    record, the outer derivative would silently be 0)."""
    q, k, v = make_inputs(rng, Case(1, 5, 7, 2, 1, 16, 16), "float32")
    first = torch.func.grad(lambda q: flashx.torch.attention(q, k, v).square().sum())
    with pytest.raises(NotImplementedError, match="no second derivative"):
        torch.func.grad(lambda q: first(q).sum())(q)


@pytest.mark.parametrize("call", ["attention", "decode", "sdpa"])
def test_forward_mode_ad_raises(rng, call):
    """A tangent (torch.autograd.forward_ad) on an input that does not require grad raised
    nothing and came back without one (a zero tangent); now NotImplementedError, as torch's SDPA
    (and flashx where the input also requires grad). Also the packed decode and the drop-in."""
    from torch.autograd import forward_ad

    nq = 1 if call == "decode" else 4
    q, k, v = make_inputs(rng, Case(1, nq, 6, 4, 2 if call == "decode" else 4, 16, 16), "float32")
    fn = {"attention": flashx.torch.attention, "decode": flashx.torch.attention,
          "sdpa": lambda q, k, v: flashx.torch.scaled_dot_product_attention(*(x.transpose(1, 2) for x in (q, k, v)))}[call]
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(q, torch.randn_like(q))
        with pytest.raises(NotImplementedError, match="forward-mode"):
            fn(dual, k, v)
        plain = fn(q, k, v)  # no tangent: runs
        assert forward_ad.unpack_dual(plain).tangent is None


def test_batched_gradients_raise(rng):
    """Autograd's own vmap over the backward (is_grads_batched=True) hands the backward batched
    cotangents, which the kernels cannot read: a NotImplementedError naming the way that works
    (before: "Cannot access storage of BatchedTensorImpl" from inside the launch)."""
    q, k, v = (x.requires_grad_() for x in make_inputs(rng, Case(1, 4, 5, 2, 2, 16, 16), "float32"))
    out = flashx.torch.attention(q, k, v)
    with pytest.raises(NotImplementedError, match="is_grads_batched.*torch.func"):
        torch.autograd.grad(out, (q, k, v), torch.randn(3, *out.shape), is_grads_batched=True)


def test_autograd_second_derivative_raises(rng):
    """Eager autograd with create_graph=True (a gradient penalty, the loss with another term in
    q): the first gradients are flashx's as without it, and differentiating them raises
    NotImplementedError. (Before, flashx's part came back as a constant: a second derivative
    8% off, d/dk None, no error.)"""
    q, k, v = (x.requires_grad_() for x in make_inputs(rng, Case(1, 6, 7, 2, 2, 16, 16, causal=True), "float32"))
    loss = lambda q, k: flashx.torch.attention(q, k, v, causal=True).square().sum() + (q ** 3).sum()  # noqa: E731
    plain = torch.autograd.grad(loss(q, k), (q, k))
    recorded = torch.autograd.grad(loss(q, k), (q, k), create_graph=True)
    for a, b in zip(plain, recorded):
        assert torch.equal(a, b.detach()) and b.requires_grad
    with pytest.raises(NotImplementedError, match="no second derivative"):
        torch.autograd.grad(recorded[0].square().sum(), (q, k))


# ----------------------------------------------------------------------------------------------
# Bad input: ValueError or TypeError naming the argument, before any launch
# ----------------------------------------------------------------------------------------------


def _t(*shape, dtype=torch.float16):
    return torch.randn(shape, dtype=dtype, device=DEVICE)


Q, K, V = (1, 5, 4, 16), (1, 7, 2, 16), (1, 7, 2, 8)

BAD_INPUTS = [
    pytest.param(lambda: ((_t(5, 4, 16), _t(*K), _t(*V)), {}), ValueError, r"\bq\b.*4-D", id="q-rank-3"),
    pytest.param(lambda: ((_t(*Q), _t(1, *K), _t(*V)), {}), ValueError, r"\bk\b.*4-D", id="k-rank-5"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(7, 2, 8)), {}), ValueError, r"\bv\b.*4-D", id="v-rank-3"),
    pytest.param(lambda: ((_t(2, 5, 4, 16), _t(*K), _t(*V)), {}), ValueError, r"batch", id="batch-mismatch"),
    pytest.param(lambda: ((_t(*Q), _t(1, 7, 2, 24), _t(*V)), {}), ValueError, r"q and k.*head dim", id="head-dim-mismatch"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(1, 6, 2, 8)), {}), ValueError, r"k and v.*sequence length", id="kv-length-mismatch"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(1, 7, 1, 8)), {}), ValueError, r"k and v.*heads", id="kv-heads-mismatch"),
    pytest.param(lambda: ((_t(1, 5, 3, 16), _t(*K), _t(*V)), {}), ValueError, r"q's heads \(3\).*k's and v's heads \(2\)", id="hq-not-multiple"),
    pytest.param(lambda: ((_t(1, 5, 0, 16), _t(1, 7, 0, 16), _t(1, 7, 0, 8)), {}), ValueError, r"head", id="zero-heads"),
    pytest.param(lambda: ((_t(1, 5, 4, 257), _t(1, 7, 2, 257), _t(*V)), {}), ValueError, r"q and k head dim.*257", id="d-257"),
    pytest.param(lambda: ((_t(1, 5, 4, 0), _t(1, 7, 2, 0), _t(*V)), {}), ValueError, r"q and k head dim.*0", id="d-0"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(1, 7, 2, 257)), {}), ValueError, r"v head dim.*257", id="dv-257"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(1, 7, 2, 0)), {}), ValueError, r"v head dim.*0", id="dv-0"),
    pytest.param(lambda: ((_t(*Q), _t(*K, dtype=torch.float32), _t(*V)), {}), TypeError, r"q, k and v.*dtype", id="mixed-dtypes"),
    pytest.param(lambda: ((_t(*Q, dtype=torch.float64), _t(*K, dtype=torch.float64), _t(*V, dtype=torch.float64)), {}), TypeError, r"\bq\b.*float64", id="float64"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(*V).to(torch.int32)), {}), TypeError, r"v\b.*dtype", id="int-v"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(*V)), {"layout": "bshd"}), ValueError, r"layout", id="unknown-layout"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(*V)), {"layout": None}), ValueError, r"layout", id="layout-none"),
    pytest.param(lambda: ((_t(*Q).numpy() if DEVICE == "cpu" else [1.0], _t(*K), _t(*V)), {}), TypeError, r"\bq\b.*torch\.Tensor", id="q-not-a-tensor"),
    pytest.param(lambda: ((_t(*Q), [[1.0]], _t(*V)), {}), TypeError, r"\bk\b.*torch\.Tensor", id="k-list"),
    pytest.param(lambda: ((_t(*Q), _t(*K), None), {}), TypeError, r"\bv\b.*torch\.Tensor", id="v-none"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(*V)), {"causal": 1}), TypeError, r"causal", id="causal-int"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(*V)), {"causal": "yes"}), TypeError, r"causal", id="causal-str"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(*V)), {"scale": float("nan")}), TypeError, r"scale", id="scale-nan"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(*V)), {"scale": float("inf")}), TypeError, r"scale", id="scale-inf"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(*V)), {"scale": "0.5"}), TypeError, r"scale", id="scale-str"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(*V)), {"scale": True}), TypeError, r"scale", id="scale-bool"),
    pytest.param(lambda: ((_t(*Q), _t(*K), _t(*V)), {"return_lse": 1}), TypeError, r"return_lse", id="return-lse-int"),
]


@pytest.mark.parametrize("make, error, match", BAD_INPUTS)
def test_bad_input_raises(make, error, match):
    """Each bad input raises the documented error type with a message naming the argument."""
    args, kwargs = make()
    with pytest.raises(error, match=match):
        flashx.torch.attention(*args, **kwargs)


@pytest.mark.parametrize(
    "good, bad, error, match",
    [
        pytest.param({"causal": True}, {"causal": 1}, TypeError, r"causal", id="causal"),
        pytest.param({"scale": 1.0}, {"scale": True}, TypeError, r"scale", id="scale"),
        pytest.param({"window": (1, 0)}, {"window": (True, 0)}, ValueError, r"window", id="window-item"),
    ],
)
def test_bad_input_raises_after_an_equal_good_call(good, bad, error, match):
    """Plans are cached, and True == 1 == 1.0: a bad option equal to a good one already planned
    must still be refused, as must a non-tensor q of the same shape."""
    q, k, v = _t(*Q), _t(*K), _t(*V)
    flashx.torch.attention(q, k, v, **good)
    with pytest.raises(error, match=match):
        flashx.torch.attention(q, k, v, **bad)
    if DEVICE == "cpu":
        with pytest.raises(TypeError, match=r"\bq\b.*torch\.Tensor"):
            flashx.torch.attention(q.numpy(), k, v, **good)


def test_plain_calls_reuse_their_plan(rng, monkeypatch):
    """A plain call (no optional arrays, functions or varlen sizes) keeps its plan by the tensors'
    sizes, strides, dtypes and devices and the options: an equal call skips planning altogether,
    while other strides or options plan anew, and both give the reference's result."""
    attention_module = importlib.import_module("flashx.torch.attention")
    case = Case(2, 37, 53, 4, 2, 24, 24, causal=True)
    q, k, v = make_inputs(rng, case, "float32")
    attention_module._DENSE_PLANS.clear()
    first = flashx.torch.attention(q, k, v, causal=True)
    assert len(attention_module._DENSE_PLANS) == 1
    plan = attention_module._plan

    def no_planning(*args, **kwargs):
        raise AssertionError("planned again")

    monkeypatch.setattr(attention_module, "_plan", no_planning)
    again = flashx.torch.attention(q, k, v, causal=True)
    assert torch.equal(first, again)
    with pytest.raises(AssertionError, match="planned again"):  # another option: another plan
        flashx.torch.attention(q, k, v, causal=False)
    # The same sizes and values through every other head of a wider tensor: other strides.
    wide = torch.zeros(2, 37, 8, 24, dtype=q.dtype, device=q.device)
    wide[:, :, ::2] = q
    q_strided = wide[:, :, ::2]
    with pytest.raises(AssertionError, match="planned again"):
        flashx.torch.attention(q_strided, k, v, causal=True)
    monkeypatch.setattr(attention_module, "_plan", plan)
    strided = flashx.torch.attention(q_strided, k, v, causal=True)
    want, _ = reference_attention(*(to_numpy(x) for x in (q, k, v)), causal=True)
    for got in (first, strided):
        assert_error_within(rel_error(to_numpy(got), want), None, "float32")


def test_bad_input_is_rejected_before_launch(monkeypatch):
    """Validation happens before the kernel is launched."""
    import flashx.core

    def no_launch(*args, **kwargs):
        raise AssertionError("launched")

    monkeypatch.setattr(flashx.core.KernelCall, "launch", no_launch)
    with pytest.raises(ValueError, match="head dim"):
        flashx.torch.attention(_t(*Q), _t(1, 7, 2, 24), _t(*V))


# ----------------------------------------------------------------------------------------------
# GPU only: larger shapes, >2^31-element tensors, several devices
# ----------------------------------------------------------------------------------------------

GPU_CASES = [
    pytest.param(Case(2, 1023, 1023, 8, 8, 64, 64), "float16", id="b2-n1023-h8-d64-fp16"),
    pytest.param(Case(2, 1023, 1023, 8, 8, 64, 64, causal=True), "bfloat16", id="b2-n1023-h8-d64-causal-bf16"),
    pytest.param(Case(2, 2048, 2048, 8, 8, 128, 128, causal=True), "float16", id="b2-n2048-h8-d128-causal-fp16"),
    pytest.param(Case(2, 2048, 2048, 8, 8, 128, 128), "bfloat16", id="b2-n2048-h8-d128-bf16"),
    pytest.param(Case(2, 1023, 2048, 8, 2, 256, 256, causal=True), "bfloat16", id="gqa-8:2-q1023-kv2048-d256-causal-bf16"),
    pytest.param(Case(2, 2048, 1023, 8, 8, 256, 256, causal=True, layout="bhnd"), "float16", id="q2048-kv1023-d256-causal-bhnd-fp16"),
    pytest.param(Case(2, 1023, 1023, 8, 1, 96, 96, causal=True), "float16", id="mqa-8:1-n1023-d96-causal-fp16"),
    pytest.param(Case(2, 777, 1500, 8, 4, 80, 48), "bfloat16", id="gqa-8:4-q777-kv1500-d80-dv48-bf16"),
    pytest.param(Case(1, 1023, 1023, 4, 4, 128, 128, causal=True), "float32", id="n1023-d128-causal-fp32"),
    pytest.param(Case(1, 777, 1023, 4, 2, 256, 200), "float32", id="gqa-q777-kv1023-d256-dv200-fp32"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case, dtype", GPU_CASES)
def test_gpu_large_shapes(case, dtype):
    """Training-sized shapes on the GPU: within a small factor of native SDPA's error against float64."""
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(repr(case).encode()))
    q, k, v = (
        torch.randn(s, generator=gen, device="cuda", dtype=torch.float32).to(TORCH_DTYPES[dtype])
        for s in shapes(*case[:7], case.layout)
    )
    out, lse = flashx.torch.attention(q, k, v, causal=case.causal, layout=case.layout, return_lse=True)
    torch.cuda.synchronize()
    nq, nkv = case.nq, case.nkv
    ref = sdpa(q, k, v, causal=case.causal, layout=case.layout, upcast=True)
    ref = zero_rows_without_keys(to_numpy(ref), nq, nkv, case.causal, case.layout)
    native = zero_rows_without_keys(to_numpy(sdpa(q, k, v, causal=case.causal, layout=case.layout)), nq, nkv, case.causal, case.layout)
    assert_error_within(rel_error(to_numpy(out), ref), rel_error(native, ref), dtype)
    # lse from the float64 scores, computed on the GPU
    qh, kh = (to_bhnd(x, case.layout).double() for x in (q, k))
    kh = kh.repeat_interleave(case.hq // case.hkv, dim=1)
    s = (qh @ kh.transpose(-1, -2)) / math.sqrt(case.d)
    if case.causal:
        s = s.masked_fill(~torch.from_numpy(causal_mask(nq, nkv)).cuda(), float("-inf"))
    assert_lse_close(to_numpy(lse), to_numpy(torch.logsumexp(s, dim=-1)))


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128, 192, 256])
def test_gpu_float32_gradients(rng, d):
    """float32 takes its own tiles (tuning.FLOAT32_TILES; at D > 128 the former ones asked more
    shared memory in the backward than a Hopper block has): out and dq, dk, dv of a causal GQA
    call against float64 SDPA, within float32's bound of native SDPA's error."""
    case = Case(1, 333, 333, 4, 2, d, d, causal=True)
    q, k, v = (x.requires_grad_() for x in make_inputs(rng, case, "float32"))
    out = flashx.torch.attention(q, k, v, causal=True)
    check_causal_gradients(q, k, v, out, "float32", f"float32 D = {d}")


@pytest.mark.gpu
@pytest.mark.parametrize("batch, n", [(1, 333), (2, 2200)])
def test_gpu_float32_tiles_on_either_grid(rng, batch, n):
    """tf32x3 at D = 128 runs its forward and dK/dV on FLOAT32_FEW_PROGRAMS_TILES' tiles where a
    causal call's grids fill under tuning.FEW_PROGRAMS_WAVES waves of the SMs and on TF32X3_TILES'
    on larger grids: out and dq, dk, dv of a causal GQA call (16 q heads over 4) on each, against
    float64."""
    from flashx.core import tuning

    grid = tuning.CallGrid(batch * 16, n, batch * 4, n)
    sized = tuning.tile_config(128, 4, True, n, None, grid=grid)
    large = tuning.tile_config(128, 4, True, n, None)  # grid not given: as if large
    # each case on its side of the rule on this GPU, for both kernels
    assert (sized.forward != large.forward, sized.dkdv != large.dkdv) == ((n == 333),) * 2
    case = Case(batch, n, n, 16, 4, 128, 128, causal=True)
    q, k, v = (x.requires_grad_() for x in make_inputs(rng, case, "float32"))
    out = flashx.torch.attention(q, k, v, causal=True)
    check_causal_gradients(q, k, v, out, "float32", f"float32 D = 128, B = {batch}, N = {n}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_packed_qkv(dtype):
    """q, k, v sliced from one packed (B, N, 3, H, D) projection output, causal, on the GPU."""
    qkv = torch.randn(2, 1531, 3, 8, 128, device="cuda", dtype=TORCH_DTYPES[dtype])
    q, k, v = qkv.unbind(2)
    out, lse = flashx.torch.attention(q, k, v, causal=True, return_lse=True)
    ref = to_numpy(sdpa(q, k, v, causal=True, upcast=True))
    native = to_numpy(sdpa(q, k, v, causal=True))
    assert_error_within(rel_error(to_numpy(out), ref), rel_error(native, ref), dtype)
    same = flashx.torch.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)
    assert_error_within(rel_error(to_numpy(same), ref), rel_error(native, ref), dtype, "contiguous copy")


GLUON_CASES = [
    pytest.param(Case(2, 2100, 2100, 4, 4, 128, 128), "bfloat16", id="n2100-bf16"),
    pytest.param(Case(2, 2100, 2100, 4, 4, 128, 128, causal=True), "float16", id="n2100-causal-fp16"),
    pytest.param(Case(1, 333, 2500, 8, 2, 128, 128, causal=True), "bfloat16", id="gqa-8:2-q333-kv2500-causal"),
    pytest.param(Case(1, 3000, 2049, 2, 1, 128, 128, causal=True, layout="bhnd"), "bfloat16",
                 id="mqa-q3000-kv2049-causal-rows-without-keys-bhnd"),
    # D = 128 non-causal under 2k keys: persistent, Q by the producer; more tiles than SMs.
    pytest.param(Case(3, 1000, 1000, 50, 10, 128, 128), "bfloat16", id="persistent-gqa-50:10-n1000"),
    pytest.param(Case(2, 700, 300, 6, 3, 128, 128, layout="bhnd"), "float16", id="persistent-q700-kv300-bhnd"),
    # D = 128 below 512 keys: descriptors built on the device, in the global scratch Triton's launcher
    # asks flashx's allocator for (tuning.HOST_DESCRIPTORS_FROM_KEYS); causal: the trimmed tile from 256 keys.
    pytest.param(Case(3, 300, 300, 8, 2, 128, 128, causal=True), "bfloat16", id="device-desc-gqa-8:2-n300-causal"),
    pytest.param(Case(2, 130, 260, 4, 4, 128, 128, causal=True, layout="bhnd"), "float16",
                 id="device-desc-q130-kv260-causal-bhnd"),
    # D = 128 causal from 512 to 1k keys: the persistent tile with trimmed diagonals (TMA route).
    pytest.param(Case(2, 800, 700, 4, 2, 128, 128, causal=True), "bfloat16", id="trim-gqa-4:2-q800-kv700-causal"),
    # D = 64 from 2k keys (causal: from 4k): three consumers without turns.
    pytest.param(Case(1, 2100, 2100, 4, 2, 64, 64), "bfloat16", id="d64-gqa-4:2-n2100"),
    pytest.param(Case(1, 300, 16400, 2, 1, 64, 64, causal=True), "float16", id="d64-mqa-q300-kv16400-causal"),
    # D = 64 from 1k keys: the TMA route only (256-key blocks up to 2k keys).
    pytest.param(Case(2, 1100, 1030, 4, 2, 64, 64, layout="bhnd"), "float16", id="d64-tma-q1100-kv1030-bhnd"),
    # D = 64 causal from 1k to 4k keys: two consumers with trimmed diagonals (TMA route); from 4k three,
    # trimmed by whole blocks (q2500 and q300: a 192-row tile's last consumers past Nq).
    pytest.param(Case(2, 1100, 1030, 4, 2, 64, 64, causal=True), "bfloat16", id="d64-trim-gqa-q1100-kv1030-causal"),
    pytest.param(Case(1, 700, 1500, 4, 1, 64, 64, causal=True, layout="bhnd"), "float16",
                 id="d64-trim-mqa-q700-kv1500-causal-bhnd"),
    pytest.param(Case(1, 2500, 4100, 4, 2, 64, 64, causal=True), "bfloat16", id="d64-c3-gqa-q2500-kv4100-causal"),
    # D = 256: 64-key tiles, from 1k keys.
    pytest.param(Case(1, 2049, 2049, 2, 2, 256, 256, causal=True), "bfloat16", id="d256-n2049-causal"),
    pytest.param(Case(2, 700, 2300, 3, 1, 256, 256, layout="bhnd"), "float16", id="d256-mqa-q700-kv2300-bhnd"),
    pytest.param(Case(2, 1100, 1030, 3, 1, 256, 256, causal=True), "bfloat16", id="d256-mqa-q1100-kv1030-causal"),
    pytest.param(Case(1, 1500, 4100, 2, 1, 256, 256, causal=True), "float16", id="d256-mqa-q1500-kv4100-causal"),
]


@pytest.mark.parametrize("layout", ["bnhd", "bhnd"])
def test_tma_route_binds_descriptors(monkeypatch, layout):
    """Where the launcher passes descriptors (torch's), a call that tuning.GLUON_TMA_ROUTE covers
    takes its TMA tile and binds Q, K and V as TMA descriptors over their logical [B, N, H, D]
    shapes and strides, in either layout; without descriptors (JAX's launcher) or with a broadcast
    K it takes the cp.async route (GLUON_FORWARD_ROUTE) and the arrays. Runs on the CPU: nothing is
    launched."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from flashx import core
    from flashx.core import launch, tuning

    b, nq, nkv, hq, hkv, d = 2, 2100, 2200, 4, 2, 128
    tma_tile = tuning.gluon_forward_tile(d, False, nkv, tuning.GLUON_TMA_ROUTE)
    assert tma_tile is not None and tuning.GLUON_FORWARD_TILES[tma_tile]["TMA"]

    def make(n, h, broadcast=False):
        x = torch.randn((1 if broadcast else b, h, n, d) if layout == "bhnd" else (1 if broadcast else b, n, h, d),
                        dtype=torch.bfloat16)
        return x.expand(b, *x.shape[1:]) if broadcast else x

    def call(q, k, v, descriptors):
        specs = [core.ArraySpec(tuple(x.shape), x.stride(), "bfloat16", "cuda:0") for x in (q, k, v)]
        plan = core.plan_attention(*specs, layout=layout)
        assert plan.gluon_tile == "pp"
        return plan.forward_call(dict(Q=q, K=k, V=v), None, descriptors=descriptors)

    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: True)
    monkeypatch.setattr(core.runtime, "multiprocessor_count", lambda: 132)
    q, k, v = make(nq, hq), make(nkv, hkv), make(nkv, hkv)
    bound = call(q, k, v, descriptors="host")
    args = dict(zip(launch.kernel_params(bound.kernel)[0], bound.args))
    assert {n: bound.constexprs[n] for n in tuning.GLUON_FORWARD_TILES[tma_tile]} == tuning.GLUON_FORWARD_TILES[tma_tile]
    assert bound.grid == (132, 1, 1)
    axes = (0, 2, 1, 3) if layout == "bhnd" else (0, 1, 2, 3)  # (B, N, H, D) of the stored array
    for name, x, n, h, rows in (("Q", q, nq, hq, 64), ("K", k, nkv, hkv, 128), ("V", v, nkv, hkv, 128)):
        descriptor = args[name]
        assert isinstance(descriptor, TensorDescriptor) and descriptor.base is x
        assert list(descriptor.shape) == [b, n, h, d]
        assert list(descriptor.strides) == [x.stride(a) for a in axes]
        assert list(descriptor.block_shape) == [1, rows, 1, d]
        assert launch._specialization(descriptor) == ((1, rows, 1, d), torch.bfloat16, True)

    assert not bound.constexprs["DEVICE_DESCRIPTORS"] and bound.outputs == ("O", "LSE", "DESCRIPTOR_SCRATCH")
    assert bound.writes == ("O", "LSE")  # the scratch output is only a placeholder here
    for plain in (call(q, k, v, descriptors=None), call(q, make(nkv, hkv, broadcast=True), v, descriptors="host")):
        args = dict(zip(launch.kernel_params(plain.kernel)[0], plain.args))
        assert not plain.constexprs["TMA"] and args["Q"] is q
        assert {n: plain.constexprs[n] for n in tuning.GLUON_FORWARD_TILES["pp"]} == tuning.GLUON_FORWARD_TILES["pp"]


@pytest.mark.parametrize("layout, d", [("bnhd", 128), ("bhnd", 128), ("bhnd", 256)])
def test_tma_store_tile_binds_an_output_descriptor(monkeypatch, layout, d):
    """A tile with TMA_STORE takes O as a host TMA descriptor over its logical [B, Nq, Hq, D] view
    (blocks of one consumer's 64 rows and at most 128 columns: D = 256 leaves in two halves), in
    either layout, and LSE as it is; a tile without it takes both arrays as they are. Runs on the
    CPU: nothing is launched."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from flashx import core
    from flashx.core import tuning

    b, n, h = 2, 1100, 4
    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: True)
    monkeypatch.setattr(core.runtime, "multiprocessor_count", lambda: 132)
    shape = (b, h, n, d) if layout == "bhnd" else (b, n, h, d)
    q, k, v = (torch.randn(shape, dtype=torch.bfloat16) for _ in range(3))
    plan = core.plan_attention(*[core.ArraySpec(shape, x.stride(), "bfloat16", "cuda:0") for x in (q, k, v)],
                               layout=layout)
    out = torch.empty(plan.out_shape, dtype=torch.bfloat16)
    lse = torch.empty(plan.lse_shape, dtype=torch.float32)
    placeholder = torch.empty(1)

    routed = tuning.GLUON_FORWARD_TILES[plan.gluon_forward_tile(descriptors="host")]

    def plan_with_store(tma_store):
        name = f"tma-store-{tma_store}"
        monkeypatch.setitem(tuning.GLUON_FORWARD_TILES, name, dict(routed, TMA_STORE=tma_store))
        monkeypatch.setitem(tuning.GLUON_TMA_ROUTE, (d, False), ((256, name),))
        return core.plan_attention(*[core.ArraySpec(shape, x.stride(), "bfloat16", "cuda:0") for x in (q, k, v)],
                                   layout=layout)

    plan = plan_with_store(False)
    untouched = plan.forward_call(dict(Q=q, K=k, V=v), None, descriptors="host")
    assert not untouched.constexprs["TMA_STORE"]
    assert plan.launch_outputs(untouched, dict(O=out, LSE=lse), placeholder) == (out, lse, placeholder)

    plan = plan_with_store(True)
    call = plan.forward_call(dict(Q=q, K=k, V=v), None, descriptors="host")
    assert call.constexprs["TMA_STORE"]
    bound = plan.launch_outputs(call, dict(O=out, LSE=lse), placeholder)
    descriptor = bound[call.outputs.index("O")]
    axes = (0, 2, 1, 3) if layout == "bhnd" else (0, 1, 2, 3)
    assert isinstance(descriptor, TensorDescriptor) and descriptor.base is out
    assert list(descriptor.shape) == [b, n, h, d]
    assert list(descriptor.strides) == [out.stride(a) for a in axes]
    assert list(descriptor.block_shape) == [1, 64, 1, min(d, 128)]
    assert bound[call.outputs.index("LSE")] is lse


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(Case(2, 1000, 1000, 3, 3, 128, 128), id="n1000"),
        pytest.param(Case(1, 333, 1111, 4, 2, 128, 128, causal=True), id="gqa-q333-kv1111-causal"),
        pytest.param(Case(1, 777, 300, 2, 1, 128, 128, causal=True), id="mqa-q777-kv300-causal-rows-without-keys"),
        pytest.param(Case(1, 900, 1100, 4, 2, 64, 64, causal=True), id="d64-gqa-q900-kv1100-causal"),
    ],
)
def test_gpu_gluon_backward_kernels(case):
    """The Gluon dK/dV and dQ kernels (core/gluon_backward.py), launched directly as
    benchmarks/gluon_backward_check.py does from flashx's own forward (out, lse): dQ, dK and dV
    against float64 within the dtype's bound of torch's own bf16 gradients. Run it under a
    timeout: a wrong barrier protocol hangs rather than fails."""
    import sys
    from pathlib import Path
    from types import SimpleNamespace

    require_sm90()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        import gluon_backward_check as check
    finally:
        sys.path.pop(0)
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(repr(case).encode()))
    q, k, v = (torch.randn(s, generator=gen, device="cuda", dtype=torch.float32).to(torch.bfloat16)
               for s in shapes(*case[:7], "bnhd"))
    grad = torch.randn(q.shape, generator=gen, device="cuda", dtype=torch.float32).to(torch.bfloat16)
    out, lse = flashx.torch.attention(q, k, v, causal=case.causal, return_lse=True)
    lse_log2, delta = check.row_stats(out, grad, lse)
    options = SimpleNamespace(stages=2, cregs=240, pregs=24, tma=True)  # the script's defaults
    dk, dv = check.launch(q, k, v, grad, lse_log2, delta, case.causal, -1, options)
    dq = check.launch_dq(q, k, v, grad, lse_log2, delta, case.causal, -1, options)
    ref_in = [x.detach().double().requires_grad_() for x in (q, k, v)]
    ref = torch.autograd.grad(sdpa(*ref_in, causal=case.causal, upcast=True), ref_in, grad.double())
    native_in = [x.detach().requires_grad_() for x in (q, k, v)]
    native = torch.autograd.grad(sdpa(*native_in, causal=case.causal), native_in, grad)
    for name, g, r, n in zip("qkv", (dq, dk, dv), ref, native):
        r, n = (torch.nan_to_num(x) for x in (r, n))  # rows without keys: SDPA's NaN
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), "bfloat16", f"d{name}")


@triton.jit
def _documents_of_300(b, h, q_idx, kv_idx):
    return (q_idx // 300) == (kv_idx // 300)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case, window",
    [
        pytest.param(Case(1, 700, 1300, 4, 2, 128, 128, causal=True), None, id="gqa-q700-kv1300-causal"),
        pytest.param(Case(2, 1000, 1000, 2, 2, 128, 128, causal=True), (200, 0), id="window-200"),
        pytest.param(Case(1, 900, 900, 2, 1, 128, 128), None, id="mqa-dense"),
        pytest.param(Case(2, 1000, 1000, 4, 2, 128, 128, causal=True), "documents", id="documents-gqa"),
    ],
)
@pytest.mark.parametrize("dkdv_tile", ["dkdv", "dkdv-tma", "dkdv-tma-ts", "dkdv-tma-persist"])
def test_gpu_gluon_dkdv_through_the_plan(monkeypatch, backward_kernels, case, window, dkdv_tile):
    """With the Gluon backward routes switched on for every kind (dK/dV by cp.async, or by TMA
    from host descriptors of Q and dO, dK and dV stored by TMA or not, on the grid or persistent:
    "dkdv-tma-persist", which loses and is not routed), flashx's backward launches the Gluon dK/dV and dQ kernels
    (a causal document mask: through its block map, mask_mod on the partial blocks): dq, dk and
    dv against float64 within the dtype's bound of torch's own bf16 gradients. Run it under a
    timeout (see above)."""
    from flashx.core import gluon_backward, tuning, plan as plan_mod

    require_sm90()
    kinds = ("dense", "causal", "window", "map")
    monkeypatch.setattr(tuning, "GLUON_DKDV_ROUTE", {(128, k): "dkdv" for k in kinds})
    monkeypatch.setattr(tuning, "GLUON_DKDV_TMA_ROUTE", {(128, k): dkdv_tile for k in kinds if dkdv_tile != "dkdv"})
    monkeypatch.setattr(tuning, "GLUON_DQ_ROUTE", {(128, k): "dq" for k in kinds})
    described = []
    describe = plan_mod.AttentionPlan._backward_tma_descriptors
    monkeypatch.setattr(plan_mod.AttentionPlan, "_backward_tma_descriptors",
                        lambda self, *a: described.append(1) or describe(self, *a))
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(repr(case).encode()))
    q, k, v = (torch.randn(s, generator=gen, device="cuda", dtype=torch.float32).to(torch.bfloat16).requires_grad_()
               for s in shapes(*case[:7], "bnhd"))
    grad = torch.randn(q.shape, generator=gen, device="cuda", dtype=torch.float32).to(torch.bfloat16)
    options = dict(causal=case.causal) if window is None else dict(window=window)
    if window == "documents":
        options = dict(causal=True, mask_mod=_documents_of_300)
    grads = torch.autograd.grad(flashx.torch.attention(q, k, v, **options), (q, k, v), grad)
    assert {gluon_backward.gluon_attention_dkdv_kernel, gluon_backward.gluon_attention_dq_kernel} <= set(backward_kernels)
    assert bool(described) is (dkdv_tile != "dkdv")
    mask = None
    if window is not None:
        i = torch.arange(case.nq, device="cuda")[:, None] + case.nkv - case.nq
        j = torch.arange(case.nkv, device="cuda")[None, :]
        mask = (j <= i) & ((i // 300 == j // 300) if window == "documents" else (j >= i - window[0]))
    ref_in = [x.detach().double().requires_grad_() for x in (q, k, v)]
    native_in = [x.detach().requires_grad_() for x in (q, k, v)]
    if mask is None:
        ref = torch.autograd.grad(sdpa(*ref_in, causal=case.causal, upcast=True), ref_in, grad.double())
        native = torch.autograd.grad(sdpa(*native_in, causal=case.causal), native_in, grad)
    else:
        def masked(q, k, v):
            q, k, v = (x.transpose(1, 2) for x in (q, k, v))
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True).transpose(1, 2)
        with sdpa_kernel(SDPBackend.MATH):
            ref = torch.autograd.grad(masked(*ref_in), ref_in, grad.double())
        native = torch.autograd.grad(masked(*native_in), native_in, grad)
    for name, g, r, n in zip("qkv", grads, ref, native):
        r, n = (torch.nan_to_num(x) for x in (r, n))  # rows without keys: SDPA's NaN
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), "bfloat16", f"d{name}")


@pytest.mark.gpu
@pytest.mark.parametrize("window", [None, (150, 0)], ids=["dense", "window-150"])
def test_gpu_gluon_dq_writes_row_statistics(monkeypatch, backward_kernels, window):
    """The Gluon dQ kernel launched first (tuning.GLUON_DQ_ROW_STATS) computes the row statistics
    itself: every padded row of delta and lse_log2 as the preprocess writes them (real rows
    rowsum(dO * O) - dlse and lse in log2 units, padding 0 and +inf), and the gradients of a loss
    through out and lse (the lse's gradient enters through delta) agree with float64 autograd.
    Nq = 333 leaves 51 padding rows in the last 128-row block; GQA 4 / 2, bf16, D = 128."""
    from flashx import core
    from flashx.core import gluon_backward, tuning
    from flashx.torch.attention import _spec

    require_sm90()
    monkeypatch.setattr(tuning, "GLUON_DQ_ROUTE", {(128, k): "dq" for k in ("dense", "causal", "window", "map")})
    monkeypatch.setattr(tuning, "GLUON_DQ_ROW_STATS", True)
    case = Case(2, 333, 333, 4, 2, 128, 128, causal=window is not None)
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(repr((case, window)).encode()))
    q, k, v = (torch.randn(s, generator=gen, device="cuda").to(torch.bfloat16).requires_grad_()
               for s in shapes(*case[:7], "bnhd"))
    w = torch.randn(q.shape, generator=gen, device="cuda")
    u = torch.randn((2, 4, 333), generator=gen, device="cuda")
    options = dict(window=window) if window else {}
    out, lse = flashx.torch.attention(q, k, v, return_lse=True, **options)
    grads = torch.autograd.grad((out.float() * w).sum() + (lse * u).sum(), (q, k, v))
    assert backward_kernels[0] is gluon_backward.gluon_attention_dq_kernel, backward_kernels

    # The first launch alone, into NaN-filled statistics: every row written, padding included.
    dout, dlse = w.to(torch.bfloat16), u
    plan = core.plan_attention(_spec("q", q), _spec("k", k), _spec("v", v), **options)
    assert plan.row_stats_shape[-1] == 384
    arrays = dict(Q=q.detach(), K=k.detach(), V=v.detach(), O=out.detach(), DO=dout, LSE=lse.detach(), DLSE=dlse)
    first, *_ = plan.backward_calls(arrays, torch.empty(1, device="cuda"), False, _spec("grad_out", dout))
    assert first.kernel is gluon_backward.gluon_attention_dq_kernel and first.constexprs["HAS_DLSE"]
    delta, lse_log2 = (torch.full(plan.row_stats_shape, float("nan"), device="cuda") for _ in range(2))
    outputs = dict(DELTA_OUT=delta, LSE_LOG2_OUT=lse_log2, DQ=torch.empty_like(q))
    first.launch(plan.launch_outputs(first, outputs, torch.empty(1, device="cuda")))
    want_delta = (out.double() * dout.double()).sum(-1).transpose(1, 2) - dlse.double()
    want_lse_log2 = lse.double() * math.log2(math.e)
    assert torch.allclose(delta[:, :, :333].double(), want_delta, rtol=1e-4, atol=1e-4)
    assert torch.allclose(lse_log2[:, :, :333].double(), want_lse_log2, rtol=1e-6, atol=1e-6)
    assert bool((delta[:, :, 333:] == 0).all()) and bool((lse_log2[:, :, 333:] == float("inf")).all())

    ref_in = [x.detach().double().requires_grad_() for x in (q, k, v)]
    rq, rk, rv = (x.transpose(1, 2) for x in ref_in)
    rk, rv = (x.repeat_interleave(2, dim=1) for x in (rk, rv))
    scores = rq @ rk.transpose(-1, -2) / math.sqrt(128)
    if window is not None:
        i, j = torch.arange(333, device="cuda")[:, None], torch.arange(333, device="cuda")[None, :]
        scores = scores.masked_fill(~((j <= i) & (j >= i - window[0])), float("-inf"))
    ref_lse = torch.logsumexp(scores, -1)
    ref_out = (torch.softmax(scores, -1) @ rv).transpose(1, 2)
    ref = torch.autograd.grad((ref_out * w.double()).sum() + (ref_lse * u.double()).sum(), ref_in)
    for name, g, r in zip("qkv", grads, ref):
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), None, "bfloat16", f"d{name}")


@pytest.mark.gpu
@pytest.mark.parametrize("case, dtype", GLUON_CASES)
@pytest.mark.usefixtures("keys_unsplit")
def test_gpu_gluon_forward(monkeypatch, forward_kernels, case, dtype):
    """On Hopper, dense 16-bit calls at D = 64, 128 or 256 with enough keys take the
    warp-specialized Gluon forward, with the TMA tile that the plan's GLUON_TMA_ROUTE gives (torch
    passes host descriptors; below HOST_DESCRIPTORS_FROM_KEYS keys it has the kernel build them,
    and GLUON_DEVICE_TMA_ROUTE's spans come first), else GLUON_FORWARD_ROUTE's cp.async tile: out
    and lse against float64 on ragged lengths, GQA, causal rows without keys and both layouts; a q
    that starts off a 16-byte boundary takes the tl kernel, with the same results; the backward
    reads the Gluon forward's lse."""
    from flashx import core
    from flashx.core import gluon_forward, tuning

    require_sm90("the Gluon forward's kernels")
    assert core.runtime.hopper_gluon(), "an sm_90 device, yet the Gluon forward is off"
    on_device = case.nkv < tuning.HOST_DESCRIPTORS_FROM_KEYS
    tma_route = {**tuning.GLUON_TMA_ROUTE, **tuning.GLUON_DEVICE_TMA_ROUTE} if on_device else tuning.GLUON_TMA_ROUTE
    routes = (tma_route, tuning.GLUON_FORWARD_ROUTE)
    tile = next(filter(None, (tuning.gluon_forward_tile(case.d, case.causal, case.nkv, r) for r in routes)))
    calls = []
    forward_calls = core.AttentionPlan.forward_calls

    def recorded(self, *args, **kwargs):
        launches = forward_calls(self, *args, **kwargs)
        calls.append(launches[0])
        return launches

    monkeypatch.setattr(core.AttentionPlan, "forward_calls", recorded)
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(repr(case).encode()))
    q, k, v = (torch.randn(s, generator=gen, device="cuda", dtype=torch.float32).to(TORCH_DTYPES[dtype])
               for s in shapes(*case[:7], case.layout))
    out, lse = flashx.torch.attention(q, k, v, causal=case.causal, layout=case.layout, return_lse=True)
    assert forward_kernels == [gluon_forward.gluon_attention_forward_kernel]
    constexprs = tuning.GLUON_FORWARD_TILES[tile]
    assert {name: calls[0].constexprs[name] for name in constexprs} == constexprs, tile
    assert calls[0].constexprs["DEVICE_DESCRIPTORS"] == (on_device and constexprs["TMA"])
    check_against_references(q, k, v, out, lse, dtype, causal=case.causal, layout=case.layout)

    base = torch.empty(q.numel() + 8, device="cuda", dtype=q.dtype)
    shifted = base[1:1 + q.numel()].view(q.shape).copy_(q)  # 2 bytes off
    out_tl, lse_tl = flashx.torch.attention(shifted, k, v, causal=case.causal, layout=case.layout, return_lse=True)
    assert forward_kernels[-1] is not gluon_forward.gluon_attention_forward_kernel
    check_against_references(shifted, k, v, out_tl, lse_tl, dtype, causal=case.causal, layout=case.layout)

    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    out = flashx.torch.attention(q, k, v, causal=case.causal, layout=case.layout)
    grad = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), grad)
    ref_in = [x.detach().double().requires_grad_() for x in (q, k, v)]
    ref_grads = torch.autograd.grad(sdpa(*ref_in, causal=case.causal, layout=case.layout, upcast=True), ref_in, grad.double())
    native_grads = torch.autograd.grad(sdpa(q, k, v, causal=case.causal, layout=case.layout), (q, k, v), grad)
    for name, g, r, n in zip("qkv", grads, ref_grads, native_grads):
        r, n = (torch.nan_to_num(x) for x in (r, n))  # rows without keys: SDPA's NaN, flashx's 0
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), dtype, f"d{name}")


@pytest.mark.gpu
def test_gpu_repeated_calls_through_the_compiled_runner():
    """Later calls at known shapes launch the compiled kernel's runner directly: fresh data, then a
    q misaligned by one element (Triton specializes on 16-byte alignment: a second runner), then
    aligned again, forward and backward, each against SDPA in float64. (D = 64 at 333 keys: the tl
    forward takes both alignments; at D = 128 an aligned q takes a Gluon tile.)"""
    shape = (2, 333, 4, 64)
    numel = math.prod(shape)
    plan_of = importlib.import_module("flashx.torch.attention")._plan  # the module, not the function
    for step, misaligned in enumerate((False, False, True, False)):
        base = torch.randn(numel + 8, device="cuda", dtype=torch.bfloat16)
        q = (base[1:1 + numel] if misaligned else base[:numel]).view(shape).requires_grad_()
        k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
        out = flashx.torch.attention(q, k, v, causal=True)
        check_causal_gradients(q, k, v, out, "bfloat16", f"call {step}")
    plan = plan_of(q, k, v, None, [None] * 10, flashx.core.CallOptions(causal=True))
    # The launch that reads q (the split forward's, where this shape splits its keys: kv_splits).
    call = plan.forward_calls(dict(Q=q, K=k, V=v), q, gluon=False)[0]
    assert call.kernel is flashx.core.forward.attention_forward_kernel
    assert len(call.runners._runners) == 2, "one runner per alignment of q"


@pytest.mark.parametrize("learned_slopes", [False, True], ids=["plain", "learned-alibi"])
def test_first_recorded_forward_compiles_its_backward_ahead(monkeypatch, rng, learned_slopes):
    """A plan's first forward that autograd records hands compile_together its own launch and
    the launches its backward will make (out standing in for dO): the same kernels, grids,
    constexprs (with learned ALiBi slopes, the slopes' gradient's), scalar arguments and shared
    runners as the backward then hands it, on arrays of the same dtypes and 16-byte alignments;
    a later forward of the plan, or one without gradients, hands it nothing."""
    module = importlib.import_module("flashx.torch.attention")
    from flashx.core.launch import _specialization

    batches, compiled = [], set()  # compile_together's arguments; runners it "compiled"

    def compile_together(launches):
        batches.append(list(launches))
        compiled.update(id(call.runners) for call, _, _ in launches)

    monkeypatch.setattr(module.core.launch, "compile_together", compile_together)
    # On the interpreter no runner is ever kept: a launch counts as first until compile_together had it.
    monkeypatch.setattr(module.core.launch, "first_launch", lambda call: call.runners is not None and id(call.runners) not in compiled)
    q, k, v = (torch.tensor(rng.standard_normal((1, n, h, 32)), dtype=torch.float32, device=DEVICE, requires_grad=True)
               for n, h in ((37, 4), (45, 2), (45, 2)))
    slopes = torch.tensor(rng.uniform(0.1, 0.5, 4), dtype=torch.float32, device=DEVICE, requires_grad=True)
    extra = dict(alibi_slopes=slopes) if learned_slopes else {}
    out = flashx.torch.attention(q, k, v, causal=True, **extra)
    (forward, *ahead), = batches
    assert forward[0].kernel is not ahead[0][0].kernel and len(ahead) >= 2  # row statistics, then the gradients
    assert any(call.constexprs.get("SLOPES_GRAD") for call, _, _ in ahead) == learned_slopes
    torch.autograd.grad(out, (q, k, v, slopes) if learned_slopes else (q, k, v), torch.randn_like(out))
    assert len(batches) == 2

    def described(launch):
        call, bound, _ = launch
        scalars = [a for a in call.args if not isinstance(a, torch.Tensor)]
        return (call.kernel, call.grid, dict(call.constexprs), scalars, call.runners,
                [_specialization(a) for a in (*call.arrays, *bound)])

    assert [described(launch) for launch in batches[1]] == [described(launch) for launch in ahead]
    flashx.torch.attention(q, k, v, causal=True, **extra)
    with torch.no_grad():
        flashx.torch.attention(q[:, :20], k, v, causal=True, **extra)
    assert len(batches) == 2


def test_backward_ahead_failure_leaves_the_call_alone(monkeypatch, rng):
    """Compiling a backward ahead is work ahead only: when that fails, the forward and the
    backward still run (each launch compiles, and would report, its own kernel), and agree with
    the float64 reference as closely as SDPA does."""
    module = importlib.import_module("flashx.torch.attention")
    failed = []

    def compile_together(launches):
        if not failed:  # the first forward's batch: its own launch and the backward's
            failed.append(len(launches))
            raise RuntimeError("a kernel does not compile")

    monkeypatch.setattr(module.core.launch, "compile_together", compile_together)
    monkeypatch.setattr(module.core.launch, "first_launch", lambda call: call.runners is not None)
    case = Case(1, 29, 31, 2, 1, 16, 16, causal=True)
    q, k, v = (x.requires_grad_() for x in make_inputs(rng, case, "float32"))
    out = flashx.torch.attention(q, k, v, causal=True)
    assert failed and failed[0] >= 3
    check_causal_gradients(q, k, v, out, "float32", "call")


@pytest.mark.gpu
def test_gpu_backward_compiled_at_the_first_forward():
    """On the GPU a first forward that autograd records compiles the backward's kernels too, so
    the backward compiles nothing; the gradients agree with SDPA's in float64."""
    from flashx.core import backward, gluon_backward

    kernels = (backward.attention_backward_preprocess_kernel, backward.attention_backward_kernel,
               gluon_backward.gluon_attention_dkdv_kernel, gluon_backward.gluon_attention_dq_kernel)

    def compiled() -> int:  # Triton's per-device kernel caches (internal API, as benchmarks/kernel_stats.py reads it)
        return sum(len(entry[0] if isinstance(entry, tuple) else entry) for k in kernels for entry in k.device_caches.values())

    q, k, v = (torch.randn(1, n, h, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for n, h in ((1557, 4), (1559, 2), (1559, 2)))  # a plan no other test makes
    out = flashx.torch.attention(q, k, v, causal=True)
    after_forward = compiled()
    grad = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), grad)
    assert compiled() == after_forward, "the backward compiled a kernel its forward had not"
    ref_in = [x.detach().double().requires_grad_() for x in (q, k, v)]
    ref_grads = torch.autograd.grad(sdpa(*ref_in, causal=True, upcast=True), ref_in, grad.double())
    native_grads = torch.autograd.grad(sdpa(q, k, v, causal=True), (q, k, v), grad)
    for name, g, r, n in zip("qkv", grads, ref_grads, native_grads):
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), "bfloat16", f"d{name}")


@pytest.mark.gpu
@pytest.mark.parametrize("window", [None, (255, 0)], ids=["causal", "window"])
def test_gpu_new_sequence_length_compiles_nothing(window):
    """A new sequence length of the same divisibility by 16 (2048, then 2560: 16, then 20 key
    blocks of 128) reuses every compiled kernel, forward and backward; integer arguments that
    grow with the length must not be specialized on (the backward's dkdv_programs)."""
    from flashx.core import backward, forward, gluon_backward, gluon_forward

    kernels = (forward.attention_forward_kernel, gluon_forward.gluon_attention_forward_kernel,
               backward.attention_backward_preprocess_kernel, backward.attention_backward_kernel,
               gluon_backward.gluon_attention_dkdv_kernel, gluon_backward.gluon_attention_dq_kernel)

    def compiled() -> int:  # Triton's per-device kernel caches (internal API, as benchmarks/kernel_stats.py reads it)
        return sum(len(entry[0] if isinstance(entry, tuple) else entry) for k in kernels for entry in k.device_caches.values())

    def forward_backward(n: int) -> None:
        q, k, v = (torch.randn(1, 1, n, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        out = flashx.torch.attention(q, k, v, causal=True, window=window, layout="bhnd")
        torch.autograd.grad(out, (q, k, v), torch.randn_like(out))

    forward_backward(2048)
    before = compiled()
    forward_backward(2560)
    assert compiled() == before, "a new sequence length compiled a kernel again"


@pytest.mark.gpu
@pytest.mark.parametrize(
    "b, nkv",
    [
        pytest.param(2, 4_194_307, id="batch-offset"),  # batch 1 starts at 2^30 elements and ends past 2^31
        pytest.param(1, 8_388_611, id="sequence-offset"),  # key index * key stride alone passes 2^31
    ],
)
def test_gpu_tensor_over_2_31_elements(b, nkv):
    """k and v of more than 2^31 elements each (fp16, ~4.3 GB): the kernel's offsets must not wrap around.

    The last keys get the largest scores, so reading wrong memory there changes the output; the
    reference runs in float32 on the GPU, one (batch, head) at a time.
    """
    hkv, hq, d, nq = 2, 4, 128, 64
    assert b * nkv * hkv * d > 2**31
    gen = torch.Generator(device="cuda").manual_seed(nkv)
    k = torch.randn(b, nkv, hkv, d, device="cuda", dtype=torch.float16, generator=gen)
    v = torch.randn(b, nkv, hkv, d, device="cuda", dtype=torch.float16, generator=gen)
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16, generator=gen)
    k[:, -2048:] *= 4  # the tail, past 2^31 elements, dominates the softmax
    out, lse = flashx.torch.attention(q, k, v, causal=True, return_lse=True)
    scale = 1.0 / math.sqrt(d)
    group = hq // hkv
    visible = torch.from_numpy(causal_mask(nq, nkv)).cuda()
    for bi in range(b):
        for h in range(hq):
            s = (q[bi, :, h].float() @ k[bi, :, h // group].float().T) * scale
            s.masked_fill_(~visible, float("-inf"))
            ref_lse = torch.logsumexp(s, dim=-1)
            p = torch.exp_(s.sub_(ref_lse[:, None]))
            ref_out = p @ v[bi, :, h // group].float()
            del s, p
            err = rel_error(to_numpy(out[bi, :, h]), to_numpy(ref_out))
            assert_error_within(err, None, "float16", f"out[batch {bi}, head {h}]")
            assert_lse_close(to_numpy(lse[bi, h]), to_numpy(ref_lse))


@pytest.mark.gpu
@pytest.mark.parametrize("k_device", ["cpu", "cuda:1"])
def test_gpu_inputs_on_different_devices(k_device):
    """q and k/v on different devices raise ValueError naming them, before any launch."""
    if k_device == "cuda:1" and torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    q = torch.randn(1, 5, 2, 16, device="cuda:0", dtype=torch.float16)
    k = torch.randn(1, 7, 2, 16, device=k_device, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"one device.*q cuda:0, k " + k_device):
        flashx.torch.attention(q, k, k)


@pytest.mark.gpu
def test_gpu_second_device(rng):
    """Inputs on a GPU other than the current one are computed there, correctly."""
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    case = Case(1, 300, 400, 4, 2, 64, 64, causal=True)
    q, k, v = make_inputs(rng, case, "float16", device="cuda:1")
    out, lse = flashx.torch.attention(q, k, v, causal=True, return_lse=True)
    assert out.device == q.device
    check_against_references(q, k, v, out, lse, "float16", causal=True)


@pytest.mark.gpu
def test_gpu_cpu_inputs_rejected():
    """With compiled kernels, CPU inputs raise a ValueError saying how to run on the CPU."""
    q = torch.randn(1, 5, 2, 16, dtype=torch.float16)
    with pytest.raises(ValueError, match="TRITON_INTERPRET"):
        flashx.torch.attention(q, q, q)


# ----------------------------------------------------------------------------------------------
# DTensor
# ----------------------------------------------------------------------------------------------
_DTENSOR_CHECK = """
import os
import socket
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fast_interpreter  # tests/: the CPU suite's speedup of Triton's interpreter
import flashx.torch  # before triton: on the CPU its kernels run through Triton's interpreter

fast_interpreter.install()
B, N, HQ, HKV, D, WORLD = 4, 13, 4, 2, 16, 2


def reference(q, k, v, cotangent, causal, slopes=None, layout="bnhd"):
    \"\"\"float64 attention in plain torch (bottom-right causal, ALiBi slope_h * |i' - j|): out and
    the gradients of q, k, v (and of the slopes, where given) for `cotangent`.\"\"\"
    q, k, v = (x.detach().double().requires_grad_() for x in (q, k, v))
    if slopes is not None:
        slopes = slopes.detach().double().requires_grad_()
    qb, kb, vb = (x if layout == "bhnd" else x.transpose(1, 2) for x in (q, k, v))
    kb, vb = (x.repeat_interleave(qb.shape[1] // x.shape[1], dim=1) for x in (kb, vb))
    s = qb @ kb.transpose(-1, -2) * D ** -0.5
    nq, nkv = s.shape[-2:]
    rows = torch.arange(nq)[:, None] + nkv - nq
    if slopes is not None:
        s = s - slopes[:, None, None] * (rows - torch.arange(nkv)).abs()
    if causal:
        s = s.masked_fill(rows < torch.arange(nkv), float("-inf"))
    out = torch.softmax(s, -1) @ vb
    out = out if layout == "bhnd" else out.transpose(1, 2)
    out.backward(cotangent.double())
    return out.detach(), q.grad, k.grad, v.grad, None if slopes is None else slopes.grad


def rel(got, want):
    return float((got.detach().double() - want).norm() / want.norm())


def check(rank, port, seed):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (WORLD,))
    gen = torch.Generator().manual_seed(seed)  # every rank the same global inputs
    fresh = lambda *shape: torch.randn(*shape, generator=gen)  # noqa: E731
    slopes = torch.rand(HQ, generator=gen) + 0.1
    cases = [  # (q, k, v, q and kv placements, keywords, the placement out must keep)
        ((B, N, HQ, D), (B, N + 3, HKV, D), Shard(0), Shard(0), dict(causal=True), Shard(0)),
        ((B, N, HQ, D), (B, N + 3, HKV, D), Shard(2), Shard(2), dict(alibi_slopes=slopes), Shard(2)),
        ((B, HQ, N, D), (B, 1, N, D), Shard(1), Replicate(), dict(causal=True, layout="bhnd"), Shard(1)),
        ((B, N, HQ, D), (B, N, HKV, D), Shard(1), Replicate(), dict(causal=True), Replicate()),  # a sequence split
    ]
    for q_shape, kv_shape, q_place, kv_place, keywords, out_place in cases:
        q, k, v, g = fresh(*q_shape), fresh(*kv_shape), fresh(*kv_shape), fresh(*q_shape[:-1], D)
        dq, dk, dv = (distribute_tensor(x, mesh, [p]).requires_grad_() for x, p in ((q, q_place), (k, kv_place), (v, kv_place)))
        out = flashx.torch.attention(dq, dk, dv, **keywords)
        assert isinstance(out, DTensor) and out.placements == (out_place,), (keywords, out.placements)
        out.backward(distribute_tensor(g, mesh, out.placements))
        want = reference(q, k, v, g, keywords.get("causal", False), keywords.get("alibi_slopes"), keywords.get("layout", "bnhd"))
        for name, got, w in zip(("out", "dq", "dk", "dv"), (out, dq.grad, dk.grad, dv.grad), want):
            error = rel(got.full_tensor(), w)
            assert error < 1e-4, f"{keywords} {name}: error {error:.2e}"
    # Learned (Hq,) slopes (a plain tensor, equal on every rank): split with the heads, or whole
    # beside a batch split, where each rank's gradient is its batch's part of the sum.
    for place in (Shard(0), Shard(2)):
        q, k, v, g = fresh(B, N, HQ, D), fresh(B, N + 3, HKV, D), fresh(B, N + 3, HKV, D), fresh(B, N, HQ, D)
        learned = (torch.rand(HQ, generator=gen) + 0.1).requires_grad_()
        dq, dk, dv = (distribute_tensor(x, mesh, [place]).requires_grad_() for x in (q, k, v))
        out = flashx.torch.attention(dq, dk, dv, causal=True, alibi_slopes=learned)
        assert out.placements == (place,), out.placements
        out.backward(distribute_tensor(g, mesh, out.placements))
        want = reference(q, k, v, g, True, learned)
        for name, got, w in zip(("out", "dq", "dk", "dv", "dslopes"),
                                (out.full_tensor(), dq.grad.full_tensor(), dk.grad.full_tensor(), dv.grad.full_tensor(),
                                 learned.grad), want):
            error = rel(got, w)
            assert error < 1e-4, f"learned slopes, {place}: {name} error {error:.2e}"
    # varlen (total, H, D): heads split, cu_seqlens whole on every rank; with per-sequence slopes
    # (B, Hq) the call sees the sequence index and runs whole on every rank instead.
    lengths_q, lengths_k = (5, 1, 7), (6, 3, 7)
    cu_q, cu_k = (torch.tensor(np.cumsum((0,) + n), dtype=torch.int32) for n in (lengths_q, lengths_k))
    per_sequence = torch.rand(3, HQ, generator=gen) + 0.1
    for slopes, out_place in ((None, Shard(1)), (per_sequence, Replicate())):
        q, g = fresh(sum(lengths_q), HQ, D), fresh(sum(lengths_q), HQ, D)
        k, v = fresh(sum(lengths_k), HKV, D), fresh(sum(lengths_k), HKV, D)
        dq, dk, dv = (distribute_tensor(x, mesh, [Shard(1)]).requires_grad_() for x in (q, k, v))
        out = flashx.torch.attention(dq, dk, dv, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=7,
                                     max_seqlen_k=7, alibi_slopes=slopes)
        assert out.placements == (out_place,), out.placements
        out.backward(distribute_tensor(g, mesh, out.placements))
        for i in range(3):
            rows, keys = slice(int(cu_q[i]), int(cu_q[i + 1])), slice(int(cu_k[i]), int(cu_k[i + 1]))
            want = reference(q[rows][None], k[keys][None], v[keys][None], g[rows][None], True,
                             None if slopes is None else slopes[i])
            got = (out.full_tensor()[rows], dq.grad.full_tensor()[rows], dk.grad.full_tensor()[keys], dv.grad.full_tensor()[keys])
            for name, x, w in zip(("out", "dq", "dk", "dv"), got, want):
                assert rel(x, w[0]) < 1e-4, f"varlen slopes={slopes is not None} sequence {i} {name}"
    # torch.compile traces the split and gives eager's result bit for bit.
    q, k, v = (distribute_tensor(fresh(B, N, HQ, D), mesh, [Shard(0)]) for _ in range(3))
    compiled = torch.compile(lambda q, k, v: flashx.torch.attention(q, k, v, causal=True), backend="aot_eager")
    out = compiled(q, k, v)
    assert out.placements == (Shard(0),) and torch.equal(out.full_tensor(), flashx.torch.attention(q, k, v, causal=True).full_tensor())
    # The SDPA drop-in (B, H, N, E), causal with Nq == Nkv: its top-left diagonal is flashx's.
    q, k, v, g = (fresh(B, HQ, N, D) for _ in range(4))
    dq, dk, dv = (distribute_tensor(x, mesh, [Shard(0)]).requires_grad_() for x in (q, k, v))
    out = flashx.torch.scaled_dot_product_attention(dq, dk, dv, is_causal=True)
    assert out.placements == (Shard(0),), out.placements
    out.backward(distribute_tensor(g, mesh, [Shard(0)]))
    for name, got, w in zip(("sdpa out", "dq", "dk", "dv"), (out, dq.grad, dk.grad, dv.grad), reference(q, k, v, g, True, layout="bhnd")):
        assert rel(got.full_tensor(), w) < 1e-4, name
    try:
        flashx.torch.scaled_dot_product_attention(dq, dk, dv, attn_mask=torch.ones(N, N, dtype=torch.bool))
    except TypeError as err:
        assert "DTensors takes no attn_mask" in str(err), err
    else:
        raise AssertionError("the drop-in took an attn_mask beside DTensors")
    q = distribute_tensor(fresh(B, N, HQ, D), mesh, [Shard(0)])
    try:
        flashx.torch.attention(q, q, q, dropout_p=0.1)
    except ValueError as err:
        assert "DTensor" in str(err), err
    else:
        raise AssertionError("dropout on DTensors did not raise")
    for args, name in (((q, q.full_tensor(), q), "k"), ((q.full_tensor(), q, q), "q")):
        try:
            flashx.torch.attention(*args)
        except TypeError as err:
            assert f"{name} must be a DTensor" in str(err), err
        else:
            raise AssertionError(f"a plain {name} beside DTensors did not raise")
    dist.destroy_process_group()
    # Every check has passed. torch 2.13's gloo teardown at interpreter exit aborts now and then
    # ("terminate called without an active exception", 1 run in 8 of a flashx-free DTensor
    # script on this CPU box): leave without it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(check, args=(port, int(np.random.SeedSequence().entropy % 2**31)), nprocs=WORLD)
    print("checked")
"""


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without torch.distributed")
@pytest.mark.skipif(not INTERPRETED, reason="two CPU ranks over gloo: the kernels must run through the interpreter")
def test_dtensor(tmp_path):
    """On DTensors (two CPU ranks, gloo, in a fresh process) flashx attends over each rank's slice:
    batch split (GQA, causal, cross), kv heads split with per-head ALiBi slopes (also learned ones,
    under a batch split and a heads split: their gradient), MQA "bhnd" with
    q's heads split and k, v whole (their gradients summed over the ranks), varlen with its heads
    split; out keeps that split and out and every gradient match float64; a sequence split is
    gathered first and a varlen call with per-sequence slopes runs whole (out whole); the
    SDPA drop-in, causal; torch.compile of a split call, equal to eager. Dropout is refused (ranks
    would draw differently), as are a plain q or k beside DTensors and the drop-in's attn_mask.
    Before, a DTensor call failed inside the launch ("invalid python storage")."""
    check_in_fresh_process(tmp_path, "dtensor_check", _DTENSOR_CHECK)


# ----------------------------------------------------------------------------------------------
# Nested (jagged) tensors
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["bnhd", "bhnd"])
def test_nested_jagged(rng, layout):
    """torch.nested jagged q, k, v ((B, j, H, D) in "bnhd", (B, H, j, D) in "bhnd" as SDPA takes
    them; cross lengths, GQA, causal) run as flashx's varlen call: out comes back jagged like q,
    and each sequence's out and q, k, v gradients match SDPA's in float64 on that sequence alone."""
    lengths_q, lengths_k, hq, hkv, d = (7, 1, 12), (9, 4, 12), 4, 2, 24

    def nested(lengths, heads):
        parts = [torch.from_numpy(rng.standard_normal((n, heads, d)).astype("float32")).to(DEVICE) for n in lengths]
        return torch.nested.nested_tensor(parts, layout=torch.jagged, requires_grad=True)

    q, k, v = nested(lengths_q, hq), nested(lengths_k, hkv), nested(lengths_k, hkv)
    as_layout = (lambda x: x) if layout == "bnhd" else (lambda x: x.transpose(1, 2))  # noqa: E731
    out = flashx.torch.attention(as_layout(q), as_layout(k), as_layout(v), causal=True, layout=layout)
    assert out.is_nested and out.layout is torch.jagged and out._ragged_idx == (1 if layout == "bnhd" else 2)
    packed = out.values() if layout == "bnhd" else out.values().transpose(0, 1)  # (total_q, Hq, D)
    grad = torch.randn_like(packed)
    (packed * grad).sum().backward()
    starts_q, starts_k = np.cumsum((0,) + lengths_q), np.cumsum((0,) + lengths_k)
    for i in range(len(lengths_q)):
        rows, keys = slice(starts_q[i], starts_q[i + 1]), slice(starts_k[i], starts_k[i + 1])
        ref_in = [x.values()[part].detach().double()[None].requires_grad_() for x, part in ((q, rows), (k, keys), (v, keys))]
        ref = sdpa(*ref_in, causal=True, upcast=True)
        ref_grads = torch.autograd.grad(ref, ref_in, grad[rows].double()[None])
        got = [packed[rows], q.grad.values()[rows], k.grad.values()[keys], v.grad.values()[keys]]
        for name, g, r in zip(("out", "dq", "dk", "dv"), got, (ref[0], *(x[0] for x in ref_grads))):
            error = rel_error(to_numpy(g), to_numpy(r))
            assert error < 2e-5, f"sequence {i} {name}: error {error:.2e}"


def test_nested_jagged_sdpa_drop_in_and_bad_calls(rng):
    """The SDPA drop-in takes jagged (B, H, j, E) query, key, value (causal where they share their
    offsets, as self-attention's do) and gives flashx.torch.attention's result; a nested q beside
    dense k, explicit cu_seqlens, a k / v length mismatch and causal across different offsets
    are refused, naming what is wrong."""
    lengths, h, d = (5, 11), 2, 16
    parts = [torch.from_numpy(rng.standard_normal((n, h, d)).astype("float32")).to(DEVICE) for n in lengths]
    q = torch.nested.nested_tensor(parts, layout=torch.jagged)
    k = torch.nested.nested_tensor_from_jagged(q.values() * 0.5 + 1.0, q.offsets())  # q's offsets: self-attention
    out = flashx.torch.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), k.transpose(1, 2), is_causal=True)
    want = flashx.torch.attention(q, k, k, causal=True)
    assert out.is_nested and torch.equal(out.transpose(1, 2).values(), want.values())
    other = torch.nested.nested_tensor([p.clone() for p in parts], layout=torch.jagged)  # equal lengths, other offsets
    with pytest.raises(TypeError, match="is_causal only where"):
        flashx.torch.scaled_dot_product_attention(q.transpose(1, 2), other.transpose(1, 2), other.transpose(1, 2),
                                                  is_causal=True)
    with pytest.raises(TypeError, match="k must be a nested tensor"):
        flashx.torch.attention(q, q.values()[None], q)
    with pytest.raises(ValueError, match="cu_seqlens_q must be None"):
        flashx.torch.attention(q, q, q, cu_seqlens_q=q.offsets().int())
    shorter = torch.nested.nested_tensor([p[:3] for p in parts], layout=torch.jagged)
    with pytest.raises(ValueError, match="v must have k's sequence lengths"):
        flashx.torch.attention(q, q, shorter)
