"""Inputs at the edges of what the API accepts (an input-validation audit, NOTES v0.52): extreme
scales and softcaps, NumPy scalars and reversed NumPy views, meta and sparse tensors, user
functions of the wrong signature or return type, huge varlen max_seqlen, block masks of the other
frontend, create_block_mask's device and blocks. Each either gives the float64 reference's result
or a ValueError / TypeError naming the argument, before any launch.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flashx  # noqa: E402, I001  (flashx before triton: this module defines @triton.jit functions)
import flashx.torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402, F401  (Triton's interpreter wants it visible to @triton.jit functions)
from conftest import INTERPRETED, assert_error_within, reference_attention, rel_error  # noqa: E402
from test_variants import reference  # noqa: E402  (the variant tests' float64 reference, softcap included)

DEVICE = "cpu" if INTERPRETED else "cuda"


def _qkv(rng, b=1, nq=5, nkv=7, h=2, d=16, dtype=torch.float32):
    return tuple(torch.from_numpy(rng.standard_normal((b, n, h, d))).to(dtype=dtype, device=DEVICE)
                 for n in (nq, nkv, nkv))


def _np(x):
    return x.detach().double().cpu().numpy()


def _softcap_reference(q, k, v, softcap):
    """(out, leaves): float64 causal attention with softcap on float64 copies (the leaves, for
    autograd) of (B, N, H, D) tensors."""
    leaves = tuple(x.detach().double().requires_grad_() for x in (q, k, v))
    return reference(*leaves, causal=True, softcap=softcap)[0], leaves


@pytest.mark.parametrize("scale", [1e-46, 1e-300, 1e-40, -1e-46])
def test_scales_below_float32_give_uniform_weights(rng, scale):
    """A scale that float32 rounds to 0 or flushes (subnormal) weighs every visible key alike,
    as scale 0 does; the folded-scale path once gave NaN there (masked -inf times a 0 factor)."""
    q, k, v = _qkv(rng)
    got = flashx.torch.attention(q, k, v, causal=True, scale=scale)
    want, _ = reference_attention(_np(q), _np(k), _np(v), causal=True, scale=0.0)
    assert torch.isfinite(got).all()
    assert_error_within(rel_error(_np(got), want), None, "float32")


def test_scale_beyond_float32_is_refused():
    q = torch.zeros(1, 2, 1, 8, device=DEVICE)
    with pytest.raises(ValueError, match=r"\bscale\b.*float32"):
        flashx.torch.attention(q, q, q, scale=3e38)
    with pytest.raises(ValueError, match=r"\bscale\b"):
        flashx.torch.attention(q, q, q, scale=-1e300)


def test_numpy_scalars_are_numbers(rng):
    """NumPy scalars are accepted where Python numbers are (scale, causal, max_seqlen), with the
    same result; a type that is not a number is refused with its full name."""
    q, k, v = _qkv(rng)
    want = flashx.torch.attention(q, k, v, causal=True, scale=0.3)
    got = flashx.torch.attention(q, k, v, causal=np.bool_(True), scale=np.float32(0.3))
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match=r"causal must be a bool, got numpy\.int64"):
        flashx.torch.attention(q, k, v, causal=np.int64(1))
    qv, kv, vv = (x[0] for x in (q, k, v))  # varlen: one packed sequence each
    cu_q, cu_k = (torch.tensor([0, x.shape[0]], dtype=torch.int32, device=DEVICE) for x in (qv, kv))
    packed = flashx.torch.attention(qv, kv, vv, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                    max_seqlen_q=np.int32(5), max_seqlen_k=np.int64(7), causal=True, scale=0.3)
    torch.testing.assert_close(packed, want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("softcap", [1e4, 1e8, 1e39])
def test_large_softcaps_stay_accurate(rng, softcap):
    """softcap * tanh(x / softcap) tends to x as the cap grows: tanh through exp lost every digit
    there (relative errors 4e-4 at 1e4, the scores themselves at 1e8, NaN past float32's range)."""
    q, k, v = _qkv(rng)
    got = flashx.torch.attention(q, k, v, causal=True, softcap=softcap)
    want, _ = _softcap_reference(q, k, v, softcap)
    assert rel_error(_np(got), _np(want)) < 2e-6


def test_softcap_gradients_for_small_and_large_caps(rng):
    """The backward's 1 - tanh^2 through the same accurate tanh: against float64 autograd."""
    for softcap in (0.7, 30.0, 1e6):
        q, k, v = (x.requires_grad_() for x in _qkv(rng))
        out = flashx.torch.attention(q, k, v, causal=True, softcap=softcap)
        dout = torch.from_numpy(rng.standard_normal(out.shape)).to(out)
        grads = torch.autograd.grad(out, (q, k, v), dout)
        ref, leaves = _softcap_reference(q, k, v, softcap)
        ref_grads = torch.autograd.grad(ref, leaves, dout.double())
        for got, want in zip(grads, ref_grads):
            assert rel_error(_np(got), _np(want)) < 1e-5, softcap


@triton.jit
def _diagonal_off_as_int(b, h, q_idx, kv_idx):
    return q_idx - kv_idx  # an int: nonzero reads as visible


@triton.jit
def _diagonal_off(b, h, q_idx, kv_idx):
    return q_idx != kv_idx


def test_mask_mod_returning_a_number_reads_nonzero_as_visible(rng):
    """A mask_mod that returns a number is read as Python reads it (nonzero: visible), not bit 0 of
    it as the masks' `&` once did; a bool mask_mod compiles to the same kernels as before."""
    q, k, v = _qkv(rng, nq=6, nkv=6)
    got = flashx.torch.attention(q, k, v, mask_mod=_diagonal_off_as_int)
    want = flashx.torch.attention(q, k, v, mask_mod=_diagonal_off)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@triton.jit
def _two_arguments(q_idx, kv_idx):
    return q_idx >= kv_idx


@triton.jit
def _bias_score(score, b, h, q_idx, kv_idx):
    return score + 1.0


@pytest.mark.parametrize("options, name", [
    (dict(mask_mod=_two_arguments), "mask_mod"),
    (dict(mask_mod=_bias_score), "mask_mod"),
    (dict(score_mod=_diagonal_off), "score_mod"),
    (dict(score_mod=_bias_score, score_mod_grad=_two_arguments), "score_mod_grad"),
])
def test_user_functions_of_the_wrong_signature(options, name, monkeypatch):
    """A mask_mod / score_mod that cannot take its arguments is a TypeError naming it, raised
    before anything is compiled or launched (it used to fail inside the kernel)."""
    import flashx.core

    monkeypatch.setattr(flashx.core.KernelCall, "launch", lambda *a, **k: pytest.fail("launched"))
    q = torch.zeros(1, 4, 1, 8, device=DEVICE)
    with pytest.raises(TypeError, match=rf"{name} must take (4|5) arguments"):
        flashx.torch.attention(q, q, q, **options)


def test_huge_max_seqlen_is_cut_to_the_packed_total(rng):
    """max_seqlen only sizes the launch grid; no sequence is longer than the packed total, so a
    larger value is cut to it (2**31 rows used to run for minutes of idle programs)."""
    qv, kv, vv = (x[0] for x in _qkv(rng, nq=5, nkv=6))
    cu_q = torch.tensor([0, 2, 5], dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor([0, 3, 6], dtype=torch.int32, device=DEVICE)
    want = flashx.torch.attention(qv, kv, vv, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=3, max_seqlen_k=3)
    begin = time.perf_counter()
    got = flashx.torch.attention(qv, kv, vv, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=2**31,
                                 max_seqlen_k=2**40)
    assert time.perf_counter() - begin < 60  # a hang guard, not a timing: the cut grid is the small one's
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_reversed_numpy_views_are_refused():
    """torch aborts the whole process on a DLPack view with a negative stride: flashx.attention
    refuses it first, naming the argument."""
    a = np.random.default_rng(0).standard_normal((1, 4, 2, 8)).astype(np.float32)
    with pytest.raises(ValueError, match=r"\bk\b has negative strides"):
        flashx.attention(a, a[:, ::-1], a)
    out = flashx.attention(a, np.ascontiguousarray(a[:, ::-1]), a)
    want, _ = reference_attention(a, a[:, ::-1], a)
    assert_error_within(rel_error(out, want), None, "float32")


def test_sparse_tensors_are_refused():
    q = torch.zeros(1, 4, 2, 8, device=DEVICE)
    with pytest.raises(TypeError, match=r"\bq\b must be a dense"):
        flashx.torch.attention(q.to_sparse(), q, q)
    with pytest.raises(TypeError, match=r"\bv\b must be a dense"):
        flashx.torch.attention(q, q, q.to_sparse(), causal=True, softcap=5.0)


def test_meta_tensors_give_shapes_only():
    """On the meta device (shape inference, deferred initialization) flashx launches nothing and
    returns meta tensors of the right shapes, forward and backward, as torch's own ops do."""
    q = torch.empty(2, 5, 4, 16, device="meta", requires_grad=True)
    k = torch.empty(2, 7, 2, 16, device="meta", requires_grad=True)
    v = torch.empty(2, 7, 2, 8, device="meta", requires_grad=True)
    out, lse = flashx.torch.attention(q, k, v, causal=True, return_lse=True)
    assert out.is_meta and out.shape == (2, 5, 4, 8) and lse.shape == (2, 4, 5)
    grads = torch.autograd.grad(out, (q, k, v), torch.empty_like(out))
    assert [g.shape for g in grads] == [q.shape, k.shape, v.shape] and all(g.is_meta for g in grads)


@triton.jit
def _causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


@pytest.mark.parametrize("kwargs, match", [
    (dict(device="bogus"), r"\bdevice\b"),
    (dict(device=3.5), r"\bdevice\b"),
    (dict(blocks=16), r"\bblocks\b"),
    (dict(blocks=(16, 16, 16)), r"\bblocks\b"),
    (dict(blocks=(16, 24)), r"\bblocks\b.*block_n"),
])
def test_create_block_mask_arguments(kwargs, match):
    kwargs.setdefault("device", DEVICE)
    with pytest.raises(ValueError, match=match):
        flashx.torch.create_block_mask(_causal_mask, None, None, 32, 32, **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the default device, cuda, exists here")
def test_create_block_mask_default_device_without_cuda():
    with pytest.raises(ValueError, match=r"device.*cuda.*not available"):
        flashx.torch.create_block_mask(_causal_mask, None, None, 32, 32)


def test_block_mask_of_the_other_frontend_is_refused():
    """Each frontend's block mask holds its own framework's arrays: the other frontend names
    block_mask rather than an array it holds."""
    jax = pytest.importorskip("jax")
    import flashx.jax

    torch_mask = flashx.torch.create_block_mask(_causal_mask, None, None, 32, 32, device=DEVICE)
    jax_mask = flashx.jax.create_block_mask(_causal_mask, None, None, 32, 32)
    q = torch.zeros(1, 32, 1, 16, device=DEVICE)
    with pytest.raises(TypeError, match=r"block_mask must come from flashx\.torch.*flashx\.jax"):
        flashx.torch.attention(q, q, q, block_mask=jax_mask)
    qj = jax.numpy.zeros((1, 32, 1, 16))
    with pytest.raises(TypeError, match=r"block_mask must come from flashx\.jax.*flashx\.torch"):
        flashx.jax.attention(qj, qj, qj, block_mask=torch_mask)


def _autocast_device():
    return "cpu" if DEVICE == "cpu" else "cuda"


def test_autocast_casts_inputs_as_sdpa(rng):
    """Under torch.autocast flashx casts q, k and v to its dtype, as autocast casts
    scaled_dot_product_attention's: float32 activations (and mixed float32 / bfloat16 ones, as RoPE
    in float32 leaves them) run in bfloat16, gradients reach the float32 leaves."""
    q, k, v = (x.requires_grad_() for x in _qkv(rng))
    with torch.autocast(_autocast_device(), dtype=torch.bfloat16):
        out = flashx.torch.attention(q, k, v, causal=True)
        mixed = flashx.torch.attention(q, k.detach().bfloat16(), v, causal=True)
        drop_in = flashx.torch.scaled_dot_product_attention(*(x.transpose(1, 2) for x in (q, k, v)))
        native = torch.nn.functional.scaled_dot_product_attention(*(x.transpose(1, 2) for x in (q, k, v)))
    want = flashx.torch.attention(*(x.detach().bfloat16() for x in (q, k, v)), causal=True)
    assert out.dtype == mixed.dtype == drop_in.dtype == native.dtype == torch.bfloat16
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    torch.testing.assert_close(mixed, want, rtol=0, atol=0)
    ref, _ = reference_attention(*(_np(x.bfloat16()) for x in (q, k, v)), layout="bnhd")
    assert_error_within(rel_error(_np(drop_in.transpose(1, 2)), ref), rel_error(_np(native.transpose(1, 2)), ref),
                        "bfloat16")
    grads = torch.autograd.grad(out.float().sum(), (q, k, v))
    assert all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)
    # Outside autocast nothing is cast: float32 stays float32.
    assert flashx.torch.attention(q, k, v).dtype == torch.float32


def test_autocast_under_torch_compile(rng):
    """The autocast check traces under torch.compile(fullgraph=True) and gives eager's result."""
    q, k, v = _qkv(rng)

    def run(q, k, v):
        with torch.autocast(_autocast_device(), dtype=torch.bfloat16):
            return flashx.torch.attention(q, k, v, causal=True)

    compiled = torch.compile(run, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(q, k, v), run(q, k, v), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("softcap, dtype", [(30.0, torch.bfloat16), (1e4, torch.bfloat16), (1e8, torch.float16)])
def test_gpu_softcap_forms(rng, softcap, dtype):
    """Both softcap forms on the GPU (the series one from caps of 64 on), forward and backward, at a
    size whose D = 128 backward spills with the series (NOTES v0.52), against float64 autograd."""
    q, k, v = (x.requires_grad_() for x in _qkv(rng, b=2, nq=300, nkv=517, h=4, d=128, dtype=dtype))
    out = flashx.torch.attention(q, k, v, causal=True, softcap=softcap)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    ref, leaves = _softcap_reference(q, k, v, softcap)
    ref_grads = torch.autograd.grad(ref, leaves, dout.double())
    assert rel_error(_np(out), _np(ref)) < 2e-2
    for got, want in zip(grads, ref_grads):
        assert rel_error(_np(got), _np(want)) < 3e-2


def _from_threads(call, inputs: list, rounds: int = 3) -> list:
    """call(x) for every x, from one thread per input, each `rounds` times; the results in order."""
    import threading

    results = [[None] * rounds for _ in inputs]

    def work(i):
        for r in range(rounds):
            results[i][r] = call(inputs[i])
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.mark.parametrize("frontend", ["torch", "jax"])
def test_calls_from_threads_at_once(rng, frontend):
    """Calls from 6 threads at once give each thread its own call's result, bit for bit: Triton's
    interpreter is not thread-safe, and concurrent CPU launches gave wrong outputs (silently)."""
    tensors = [_qkv(rng, nq=17, nkv=17, d=16)[0] for _ in range(6)]
    if frontend == "torch":
        call, inputs, as_numpy = (lambda q: flashx.torch.attention(q, q, q, causal=True)), tensors, _np
    else:
        jax = pytest.importorskip("jax")
        from flashx.jax import attention as jax_attention

        jitted = jax.jit(lambda q: jax_attention(q, q, q, causal=True))
        call, inputs = (lambda q: np.asarray(jitted(q))), [jax.numpy.asarray(_np(t), jax.numpy.float32) for t in tensors]
        as_numpy = np.asarray
    alone = [as_numpy(call(x)) for x in inputs]
    for i, t in enumerate(tensors):  # and each result is attention's
        want, _ = reference_attention(_np(t), _np(t), _np(t), causal=True)
        assert rel_error(alone[i], want) < 1e-5
    for i, rounds in enumerate(_from_threads(call, inputs)):
        for got in rounds:
            np.testing.assert_array_equal(as_numpy(got), alone[i])
