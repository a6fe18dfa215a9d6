"""Dropout (dropout_p) in both frontends and the SDPA drop-in, against float64 with the kernels' own mask.

Which weights a call dropped is read from the kernel itself: with V the identity (Dv = Nkv),
out = P * Z exactly, Z = kept / (1 - p). Each test checks that readout against the float64
reference's P (the kept fraction too), then repeats the call with the same seed (torch.manual_seed,
or the same JAX key) on a real V: out, lse and the gradients must match float64 attention whose
weights are P * Z with that mask. Bounds: variants_common's OUT_TOL / GRAD_TOL per dtype.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import flashx.torch  # noqa: E402, I001  (flashx before triton)
from conftest import INTERPRETED, Case, random_qkv  # noqa: E402
from test_variants import reference  # noqa: E402  (the variant tests' float64 reference: window, softcap, ALiBi)
from variants_common import GRAD_TOL, LSE_TOL, OUT_TOL, assert_close, assert_lse  # noqa: E402

DEVICE = "cpu" if INTERPRETED else "cuda"
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _bnhd(x: torch.Tensor, layout: str) -> torch.Tensor:
    return x.transpose(1, 2) if layout == "bhnd" else x


def _np(x) -> np.ndarray:
    """float64 NumPy of a torch tensor (any dtype, grad or not) or a JAX / NumPy array."""
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(np.asarray(x).astype(np.float32) if str(np.asarray(x).dtype) == "bfloat16" else x, np.float64)


def _identity_values(case: Case, dtype) -> torch.Tensor:
    """V with Dv = Nkv whose key j is the j-th unit vector, in case's layout: out = the weights."""
    eye = torch.eye(case.nkv, dtype=dtype, device=DEVICE)[None, :, None, :].expand(case.b, case.nkv, case.hkv, case.nkv)
    return _bnhd(eye, case.layout).contiguous()


def _check_kept_fraction(kept: np.ndarray, weights: np.ndarray, p: float) -> None:
    """Among pairs with a clear weight, the kept fraction is 1 - p within 5 standard deviations."""
    clear = weights > 1e-3
    n = int(clear.sum())
    rate = kept[clear].mean()
    assert abs(rate - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n) + 1e-9, f"kept {rate:.4f} of {n}, expected {1 - p}"


DROPOUT_CASES = [
    pytest.param(Case(2, 37, 45, 4, 2, 32, 32, causal=True), "float32", 0.2, {}, id="gqa-causal-fp32"),
    # D = 64 in 16 bits: the backward's tile puts queries down (ROWS_DOWN).
    pytest.param(Case(1, 40, 40, 2, 2, 64, 64), "float16", 0.5, {}, id="rows-down-fp16"),
    pytest.param(Case(1, 33, 47, 2, 1, 24, 24, layout="bhnd"), "bfloat16", 0.1, dict(window=(8, 4), softcap=20.0),
                 id="mqa-window-softcap-bhnd-bf16"),
]


@pytest.mark.parametrize("case, dtype, p, options", DROPOUT_CASES)
def test_torch_dropout_matches_reference(rng, case, dtype, p, options):
    """flashx.torch.attention with dropout_p: out, lse and dq, dk, dv against float64 attention
    with the call's own mask, read back through V = I."""
    torch_dtype = TORCH_DTYPES[dtype]
    q, k, v = (torch.from_numpy(x).to(DEVICE, torch_dtype) for x in random_qkv(rng, *case[:7], layout=case.layout))
    kw = dict(causal=case.causal, layout=case.layout, **options)
    torch.manual_seed(1234)
    weights = flashx.torch.attention(q, k, _identity_values(case, torch_dtype), dropout_p=p, **kw)

    ref_kw = dict(causal=case.causal, window=options.get("window"), softcap=options.get("softcap"))
    leaves = [_bnhd(x, case.layout).detach().double().requires_grad_() for x in (q, k, v)]
    eye64 = _bnhd(_identity_values(case, torch.float64), case.layout)
    ref_weights, ref_lse = reference(leaves[0], leaves[1], eye64, **ref_kw)
    kept = (_bnhd(weights, case.layout) != 0).double()
    _check_kept_fraction(_np(kept), _np(ref_weights), p)
    assert_close(_np(_bnhd(weights, case.layout)), _np(ref_weights * kept / (1 - p)), OUT_TOL[dtype], "weights P * Z")

    torch.manual_seed(1234)  # the same seed: the same mask
    q_, k_, v_ = (x.detach().requires_grad_() for x in (q, k, v))
    out, lse = flashx.torch.attention(q_, k_, v_, dropout_p=p, return_lse=True, **kw)
    ref_out = torch.einsum("bqhk,bkhd->bqhd", ref_weights * kept / (1 - p),
                           leaves[2].repeat_interleave(case.hq // case.hkv, dim=2))
    assert_close(_np(_bnhd(out, case.layout)), _np(ref_out), OUT_TOL[dtype], "out")
    assert_lse(_np(lse), _np(ref_lse), LSE_TOL)  # lse keeps every weight

    grad = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q_, k_, v_), grad)
    ref_grads = torch.autograd.grad(ref_out, leaves, _bnhd(grad, case.layout).double())
    for name, g, r in zip("qkv", grads, ref_grads):
        assert_close(_np(_bnhd(g, case.layout)), _np(r), GRAD_TOL[dtype], f"d{name}")


def test_torch_dropout_varlen(rng):
    """Packed sequences (one without queries), causal GQA: as test_torch_dropout_matches_reference,
    the reference per sequence (V = I over the packed keys, Dv = their total)."""
    lens_q, lens_k, p = [5, 0, 9], [7, 3, 6], 0.3
    cu_q, cu_k = (torch.tensor(np.cumsum([0, *n]), dtype=torch.int32, device=DEVICE) for n in (lens_q, lens_k))
    q = torch.from_numpy(rng.standard_normal((sum(lens_q), 2, 16))).float().to(DEVICE)
    k, v = (torch.from_numpy(rng.standard_normal((sum(lens_k), 1, 16))).float().to(DEVICE) for _ in range(2))
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k), causal=True,
              dropout_p=p)
    eye = torch.eye(sum(lens_k), device=DEVICE)[:, None, :]
    torch.manual_seed(99)
    weights = flashx.torch.attention(q, k, eye, **kw)

    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    ref_weights = torch.zeros(sum(lens_q), 2, sum(lens_k), dtype=torch.float64, device=DEVICE)
    for s in range(len(lens_q)):
        rows, keys = slice(int(cu_q[s]), int(cu_q[s + 1])), slice(int(cu_k[s]), int(cu_k[s + 1]))
        ref_weights[rows] = reference(leaves[0][None, rows], leaves[1][None, keys], eye.double()[None, keys], causal=True)[0][0]
    kept = (weights != 0).double()
    _check_kept_fraction(_np(kept), _np(ref_weights), p)
    assert_close(_np(weights), _np(ref_weights * kept / (1 - p)), OUT_TOL["float32"], "weights P * Z")

    torch.manual_seed(99)
    q_, k_, v_ = (x.detach().requires_grad_() for x in (q, k, v))
    out = flashx.torch.attention(q_, k_, v_, **kw)
    ref_out = torch.einsum("qhk,kd->qhd", ref_weights * kept / (1 - p), leaves[2][:, 0])
    assert_close(_np(out), _np(ref_out), OUT_TOL["float32"], "out")
    grad = torch.randn_like(out)
    for name, g, r in zip("qkv", torch.autograd.grad(out, (q_, k_, v_), grad), torch.autograd.grad(ref_out, leaves, grad.double())):
        assert_close(_np(g), _np(r), GRAD_TOL["float32"], f"d{name}")


def test_torch_dropout_seeds(rng):
    """The same seed repeats a call bit for bit; another seed drops other weights; dropout_p = 0
    is the plain call; the SDPA drop-in drops as flashx.torch.attention does."""
    q, k, v = (torch.from_numpy(x).to(DEVICE) for x in random_qkv(rng, 2, 29, 29, 2, 2, 16, 16, layout="bhnd"))

    def call(seed, fn=flashx.torch.attention, **kw):
        torch.manual_seed(seed)
        return fn(q, k, v, **kw)

    first = call(7, dropout_p=0.3, layout="bhnd", causal=True)
    assert torch.equal(first, call(7, dropout_p=0.3, layout="bhnd", causal=True))
    assert not torch.equal(first, call(8, dropout_p=0.3, layout="bhnd", causal=True))
    assert torch.equal(call(7, dropout_p=0.0, layout="bhnd"), flashx.torch.attention(q, k, v, layout="bhnd"))
    sdpa = call(7, flashx.torch.scaled_dot_product_attention, dropout_p=0.3, is_causal=True)  # Nq = Nkv: same diagonal
    assert torch.equal(sdpa, first)


def test_dropout_mask_has_no_draw_structure(rng):
    """The draw shares one Philox counter among the pairs that differ in key bit 0, query bit 3
    and key bit 3 (scores.dropout_kept), and two heads or batches have counters of their own:
    at p = 0.5 every such partner (and a neighbour sharing no counter) must agree with a pair
    half the time, and each of the eight positions in a draw keeps half its pairs, within 5
    standard deviations. A draw that repeated a number across a word's halves, its words, heads
    or batches would agree every time."""
    b, n, h = 2, 64, 2
    case = Case(b, n, n, h, h, 16, 16)
    q, k = (torch.from_numpy(x).to(DEVICE) for x in random_qkv(rng, *case[:7])[:2])
    torch.manual_seed(3)
    weights = flashx.torch.attention(q, k, _identity_values(case, torch.float32), dropout_p=0.5)
    kept = _np(weights != 0).astype(bool)  # [B, Nq, H, Nkv]: P > 0 everywhere
    assert kept.shape == (b, n, h, n)

    def agreement_ok(a, other):
        rate = (a == other).mean()
        return abs(rate - 0.5) < 5 * math.sqrt(0.25 / a.size), rate

    partners = {
        "key bit 0": kept[:, :, :, np.arange(n) ^ 1],
        "key bit 3": kept[:, :, :, np.arange(n) ^ 8],
        "query bit 3": kept[:, np.arange(n) ^ 8],
        "query bit 0 (no shared counter)": kept[:, np.arange(n) ^ 1],
        "head": kept[:, :, ::-1],
        "batch": kept[::-1],
    }
    for name, other in partners.items():
        ok, rate = agreement_ok(kept, other)
        assert ok, f"pairs agree with their {name} partner {rate:.3f} of the time"
    for key_bit0, query_bit3, key_bit3 in itertools.product((0, 1), repeat=3):
        rows = (np.arange(n) >> 3 & 1) == query_bit3
        cols = ((np.arange(n) & 1) == key_bit0) & ((np.arange(n) >> 3 & 1) == key_bit3)
        _check_kept_fraction(kept[:, rows][..., cols].astype(float), np.ones((b, rows.sum(), h, cols.sum())), 0.5)


def test_torch_dropout_under_activation_checkpointing(rng):
    """torch.utils.checkpoint recomputes the forward with the RNG state it saved, so the recompute
    draws the same seed and mask: loss and gradient equal the plain call's bit for bit."""
    from torch.utils.checkpoint import checkpoint

    q = torch.from_numpy(random_qkv(rng, 1, 17, 17, 2, 2, 16, 16)[0]).to(DEVICE).requires_grad_()

    def loss(x):
        return flashx.torch.attention(x, x, x, causal=True, dropout_p=0.3).square().sum()

    torch.manual_seed(5)
    plain = loss(q)
    plain_grad, = torch.autograd.grad(plain, q)
    torch.manual_seed(5)
    recomputed = checkpoint(loss, q, use_reentrant=False)
    recomputed_grad, = torch.autograd.grad(recomputed, q)
    assert torch.equal(plain, recomputed) and torch.equal(plain_grad, recomputed_grad)


def test_torch_dropout_under_compile(rng):
    """torch.compile(fullgraph=True) draws the seed inside the graph: its weights, read through
    V = I, are the reference's kept or 0, as eagerly."""
    case = Case(1, 21, 26, 2, 2, 16, 16)
    q, k, _ = (torch.from_numpy(x).to(DEVICE) for x in random_qkv(rng, *case[:7]))
    eye = _identity_values(case, torch.float32)
    compiled = torch.compile(lambda q, k, v: flashx.torch.attention(q, k, v, dropout_p=0.25), fullgraph=True, backend="aot_eager")
    weights = compiled(q, k, eye)
    ref_weights, _ = reference(q.double(), k.double(), eye.double())
    kept = (weights != 0).double()
    assert 0 < kept.mean() < 1
    assert_close(_np(weights), _np(ref_weights * kept / 0.75), OUT_TOL["float32"], "weights P * Z")


def test_dropout_under_vmap(rng):
    """Mapped calls draw as unmapped ones: under torch.func.vmap, randomness="same" gives every
    slice one mask and "different" each its own (torch's default, "error", refuses, as for any
    random op); under jax.vmap, one shared key gives one mask and mapped keys their own."""
    n = 24
    q = torch.from_numpy(rng.standard_normal((3, 1, n, 2, 16))).float().to(DEVICE)
    eye = torch.eye(n, device=DEVICE)[None, :, None, :].expand(1, n, 2, n)

    def masks(randomness):
        out = torch.func.vmap(lambda x: flashx.torch.attention(x, x, eye, dropout_p=0.5), randomness=randomness)(q)
        return [(out[i] != 0) for i in range(3)]
    same, different = masks("same"), masks("different")
    assert torch.equal(same[0], same[1]) and torch.equal(same[1], same[2])
    assert not torch.equal(different[0], different[1]) and not torch.equal(different[1], different[2])
    with pytest.raises(RuntimeError, match="randomness"):
        masks("error")

    jax = pytest.importorskip("jax")
    from flashx.jax import attention as jax_attention

    qj, eyej = jax.numpy.asarray(q.cpu().numpy()), jax.numpy.asarray(eye.cpu().numpy())
    call = jax.jit(jax.vmap(lambda x, key: jax_attention(x, x, eyej, dropout_p=0.5, dropout_key=key), in_axes=(0, None)))
    shared = np.asarray(call(qj, jax.random.key(3))) != 0
    assert (shared[0] == shared[1]).all() and (shared[1] == shared[2]).all()
    own = np.asarray(jax.jit(jax.vmap(lambda x, key: jax_attention(x, x, eyej, dropout_p=0.5, dropout_key=key)))(
        qj, jax.random.split(jax.random.key(3), 3))) != 0
    assert not (own[0] == own[1]).all() and not (own[1] == own[2]).all()


@pytest.mark.parametrize(
    "dropout_p, error, match",
    [
        pytest.param(1.0, ValueError, r"^dropout_p must be in \[0, 1\), got 1\.0", id="one"),
        pytest.param(-0.1, ValueError, r"^dropout_p must be in \[0, 1\), got -0\.1", id="negative"),
        pytest.param("0.1", TypeError, r"^dropout_p must be a float", id="string"),
        pytest.param(True, TypeError, r"^dropout_p must be a float", id="bool"),
    ],
)
def test_bad_dropout_p(rng, dropout_p, error, match):
    """A bad dropout_p is a ValueError / TypeError naming it, from both frontends, before any launch."""
    q, k, v = (torch.from_numpy(x).to(DEVICE) for x in random_qkv(rng, 1, 5, 7, 2, 2, 16, 16))
    with pytest.raises(error, match=match):
        flashx.torch.attention(q, k, v, dropout_p=dropout_p)
    jax = pytest.importorskip("jax")
    from flashx.jax import attention as jax_attention

    qj, kj, vj = (jax.numpy.asarray(x.cpu().numpy()) for x in (q, k, v))
    with pytest.raises(error, match=match):
        jax_attention(qj, kj, vj, dropout_p=dropout_p, dropout_key=jax.random.key(0))


def test_jax_dropout_needs_a_key(rng):
    jax = pytest.importorskip("jax")
    from flashx.jax import attention as jax_attention

    q = jax.numpy.asarray(random_qkv(rng, 1, 5, 5, 2, 2, 16, 16)[0])
    with pytest.raises(ValueError, match=r"dropout_p=0\.5 needs dropout_key"):
        jax_attention(q, q, q, dropout_p=0.5)
    for bad in (jax.numpy.zeros((3,), jax.numpy.int32), jax.random.split(jax.random.key(0), 2)):
        with pytest.raises(TypeError, match=r"^dropout_key must be one jax\.random key"):
            jax_attention(q, q, q, dropout_p=0.5, dropout_key=bad)
    raw = jax_attention(q, q, q, dropout_p=0.5, dropout_key=jax.random.PRNGKey(0))  # a raw key works too
    assert raw.shape == q.shape


@pytest.mark.parametrize("case, dtype, p", [
    pytest.param(Case(2, 37, 45, 4, 2, 32, 32, causal=True), "float32", 0.2, id="gqa-causal-fp32"),
    pytest.param(Case(1, 40, 40, 2, 2, 64, 64), "bfloat16", 0.5, id="rows-down-bf16"),
])
def test_jax_dropout_matches_reference(rng, case, dtype, p):
    """flashx.jax.attention with dropout_p and a key, inside jax.jit: out, lse and the gradients
    against float64 attention with the call's own mask (read back through V = I); the same key
    drops the same weights, another key others."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from flashx.jax import attention as jax_attention

    q, k, v = (jnp.asarray(x, getattr(jnp, dtype)) for x in random_qkv(rng, *case[:7]))
    key = jax.random.key(11)
    call = jax.jit(lambda q, k, v, key: jax_attention(q, k, v, causal=case.causal, dropout_p=p, dropout_key=key,
                                                             return_lse=True))
    eye = jnp.broadcast_to(jnp.eye(case.nkv, dtype=q.dtype)[None, :, None, :], (case.b, case.nkv, case.hkv, case.nkv))
    weights = _np(call(q, k, eye, key)[0])
    assert np.array_equal(weights, _np(call(q, k, eye, key)[0]))
    assert not np.array_equal(weights, _np(call(q, k, eye, jax.random.key(12))[0]))

    q64, k64, v64 = (torch.from_numpy(_np(x)).requires_grad_() for x in (q, k, v))
    ref_weights, ref_lse = reference(q64, k64, torch.eye(case.nkv, dtype=torch.float64)[None, :, None, :].expand(
        case.b, case.nkv, case.hkv, case.nkv), causal=case.causal)
    kept = torch.from_numpy((weights != 0).astype(np.float64))
    _check_kept_fraction(_np(kept), _np(ref_weights), p)
    assert_close(weights, _np(ref_weights * kept / (1 - p)), OUT_TOL[dtype], "weights P * Z")

    out, lse = call(q, k, v, key)
    ref_out = torch.einsum("bqhk,bkhd->bqhd", ref_weights * kept / (1 - p), v64.repeat_interleave(case.hq // case.hkv, dim=2))
    assert_close(_np(out), _np(ref_out), OUT_TOL[dtype], "out")
    assert_lse(_np(lse), _np(ref_lse), LSE_TOL)

    grad = rng.standard_normal(out.shape).astype(np.float32)
    grads = jax.jit(jax.grad(lambda q, k, v: jnp.sum(call(q, k, v, key)[0].astype(jnp.float32) * grad),
                             argnums=(0, 1, 2)))(q, k, v)
    ref_grads = torch.autograd.grad(ref_out, (q64, k64, v64), torch.from_numpy(grad).double())
    for name, g, r in zip("qkv", grads, ref_grads):
        assert_close(_np(g), _np(r), GRAD_TOL[dtype], f"d{name}")


@pytest.mark.gpu
@pytest.mark.parametrize("case", [
    pytest.param(Case(2, 300, 256, 8, 2, 64, 64, causal=True), id="d64-gqa-q300-kv256-causal"),
    pytest.param(Case(1, 250, 256, 4, 4, 128, 128, layout="bhnd"), id="d128-q250-kv256-bhnd"),
    # 8k queries: the long-sequence tiles, which ran out of shared memory with dropout at D = 128.
    pytest.param(Case(1, 8192, 256, 2, 2, 128, 128, causal=True), id="d128-q8192-kv256-causal"),
    # D = 256: dK and dV in two launches, dK/dV's keys in two passes (TileConfig.dkdv_passes).
    pytest.param(Case(1, 1000, 256, 2, 1, 256, 256, causal=True), id="d256-gqa-q1000-kv256-causal"),
])
def test_gpu_torch_dropout(rng, case):
    """On the GPU (the tl kernels: dropout takes no Gluon route), bf16: as
    test_torch_dropout_matches_reference at training-like head dims."""
    test_torch_dropout_matches_reference(rng, case, "bfloat16", 0.15, {})


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128])
def test_gpu_torch_dropout_float32(rng, d):
    """float32 takes its own tiles (tuning.FLOAT32_TILES), dropout's draw in them: as
    test_torch_dropout_matches_reference on the GPU."""
    test_torch_dropout_matches_reference(rng, Case(1, 700, 256, 2, 2, d, d, causal=True), "float32", 0.15, {})


@pytest.mark.gpu
def test_gpu_jax_dropout(rng):
    """On the GPU, through jax-triton (DROPOUT_P reaches the kernels as a float constexpr, the
    seed as an int32 input): as test_jax_dropout_matches_reference at D = 64, 256 keys, bf16."""
    test_jax_dropout_matches_reference(rng, Case(2, 300, 256, 8, 2, 64, 64, causal=True), "bfloat16", 0.15)
