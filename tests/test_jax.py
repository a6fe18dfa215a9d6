"""flashx.jax.attention (inside jax.jit and eagerly) against jax.nn.dot_product_attention and the float64 reference.

On the CPU the kernel runs through Triton's interpreter in a host callback; on the GPU through
jax-triton's triton_call.
"""
from __future__ import annotations

import functools
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import flashx.jax  # noqa: E402
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
    zero_rows_without_keys,
)

if not INTERPRETED:
    pytest.importorskip("jax_triton", reason="flashx.jax runs through jax-triton on the GPU")

JAX_DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}
OPTIONS = ("causal", "scale", "layout", "return_lse")
jitted_attention = jax.jit(flashx.jax.attention, static_argnames=OPTIONS)


def make_inputs(rng, case: Case, dtype: str):
    return tuple(jnp.asarray(x, dtype=JAX_DTYPES[dtype]) for x in random_qkv(rng, *case[:7], layout=case.layout))


def to_numpy(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def native_attention(q, k, v, *, causal=False, scale=None, layout="bnhd"):
    """jax.nn.dot_product_attention (XLA) in the input dtype, with an explicit bottom-right causal mask.

    It needs Dv == D: the shorter of q/k and v is zero-padded, which changes no dot product
    (the scale stays 1/sqrt(D) of the real D).
    """
    if layout == "bhnd":
        q, k, v = (jnp.swapaxes(x, 1, 2) for x in (q, k, v))
    d, dv = q.shape[-1], v.shape[-1]
    scale = d**-0.5 if scale is None else scale
    pad = lambda x, n: jnp.pad(x, [(0, 0)] * 3 + [(0, n - x.shape[-1])])  # noqa: E731
    q, k, v = pad(q, max(d, dv)), pad(k, max(d, dv)), pad(v, max(d, dv))
    mask = jnp.asarray(causal_mask(q.shape[1], k.shape[1]))[None, None] if causal else None
    out = jax.nn.dot_product_attention(q, k, v, mask=mask, scale=scale, implementation="xla")[..., :dv]
    return jnp.swapaxes(out, 1, 2) if layout == "bhnd" else out


def check_against_reference(q, k, v, out, lse, dtype, *, causal=False, scale=None, layout="bnhd"):
    """out and lse against the float64 reference, out bounded by jax's own error in the same dtype."""
    seq_axis = 1 if layout == "bnhd" else 2
    nq, nkv = q.shape[seq_axis], k.shape[seq_axis]
    assert isinstance(out, jax.Array) and out.dtype == q.dtype
    assert out.shape == (*q.shape[:3], v.shape[-1])
    assert lse.dtype == jnp.float32 and lse.shape == (q.shape[0], q.shape[3 - seq_axis], nq)
    ref_out, ref_lse = reference_attention(to_numpy(q), to_numpy(k), to_numpy(v), causal=causal, scale=scale, layout=layout)
    native = zero_rows_without_keys(to_numpy(native_attention(q, k, v, causal=causal, scale=scale, layout=layout)), nq, nkv, causal, layout)
    assert_error_within(rel_error(to_numpy(out), ref_out), rel_error(native, ref_out), dtype)
    assert_lse_close(to_numpy(lse), ref_lse)


def native_gradients(grads, q, k, v) -> tuple:
    """(reference, yardstick): grads(native_attention, ...) on float32 copies of q, k, v, jitted as
    one call (run op by op, JAX would compile each op apart), and on q, k, v as given, run op by op
    so each op rounds as the error bounds were set."""
    ref = jax.jit(lambda *a: grads(native_attention, *a))(*(x.astype(jnp.float32) for x in (q, k, v)))
    return ref, grads(native_attention, q, k, v)


def checked_gradients(rng, q, k, v, causal: bool, dtype: str = "bfloat16", layout: str = "bnhd") -> tuple:
    """jax.jit(jax.grad) of flashx.jax.attention under a random cotangent: dq, dk and dv against
    float32 within the dtype's bound of JAX's own in that dtype. Returns them."""
    out_shape = q.shape[:-1] + (v.shape[-1],)
    cotangent = jnp.asarray(rng.standard_normal(out_shape), jnp.float32)

    def grads(fn, *inputs):
        return jax.grad(lambda q, k, v: jnp.sum(fn(q, k, v, causal=causal, layout=layout).astype(jnp.float32)
                                                * cotangent), argnums=(0, 1, 2))(*inputs)

    ours = jax.jit(lambda *a: grads(flashx.jax.attention, *a))(q, k, v)
    ref, native = native_gradients(grads, q, k, v)
    for name, g, r, n in zip("qkv", ours, ref, native):
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), dtype, f"d{name}")
    return ours


CASES = [
    pytest.param(Case(1, 37, 65, 4, 2, 64, 64), id="gqa-4:2-q37-kv65"),
    pytest.param(Case(1, 65, 37, 2, 2, 40, 40, causal=True), id="q65-kv37-causal-rows-without-keys"),
    pytest.param(Case(2, 37, 65, 3, 1, 24, 72, causal=True), id="mqa-3:1-q37-kv65-d24-dv72-causal"),
    pytest.param(Case(1, 37, 50, 2, 2, 40, 16, causal=True, layout="bhnd"), id="d40-dv16-causal-bhnd"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_jit_matches_reference(rng, case, dtype):
    """Inside jax.jit: out and lse agree with float64, within a small factor of jax's own error."""
    q, k, v = make_inputs(rng, case, dtype)
    out, lse = jitted_attention(q, k, v, causal=case.causal, layout=case.layout, return_lse=True)
    check_against_reference(q, k, v, out, lse, dtype, causal=case.causal, layout=case.layout)


@pytest.mark.parametrize(
    "case, dtype, scale",
    [
        pytest.param(Case(1, 1, 33, 2, 1, 1, 8, causal=True), "float32", None, id="q1-kv33-d1-causal-fp32"),
        pytest.param(Case(1, 29, 29, 2, 2, 256, 256, layout="bhnd"), "bfloat16", 0.2, id="d256-bhnd-scale-bf16"),
    ],
)
def test_eager_matches_reference(rng, case, dtype, scale):
    """Called eagerly (no jit): the same results."""
    q, k, v = make_inputs(rng, case, dtype)
    out, lse = flashx.jax.attention(q, k, v, causal=case.causal, scale=scale, layout=case.layout, return_lse=True)
    check_against_reference(q, k, v, out, lse, dtype, causal=case.causal, scale=scale, layout=case.layout)


def test_jit_equals_eager_and_composes(rng):
    """jit and eager give identical bits, and the call composes with other ops in one jitted function."""
    case = Case(1, 21, 30, 2, 1, 16, 16, causal=True)
    q, k, v = make_inputs(rng, case, "float16")
    eager = flashx.jax.attention(q, k, v, causal=True)
    assert isinstance(eager, jax.Array)
    np.testing.assert_array_equal(np.asarray(jitted_attention(q, k, v, causal=True)), np.asarray(eager))

    @jax.jit
    def block(q, k, v):
        return flashx.jax.attention(q * 2.0, k, v, causal=True, scale=0.125).sum(axis=-1)  # same scores

    np.testing.assert_allclose(to_numpy(block(q, k, v)), to_numpy(eager).sum(axis=-1), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(Case(1, 50, 20, 2, 1, 16, 24, causal=True), id="causal-q50-kv20"),
        pytest.param(Case(1, 9, 0, 2, 2, 16, 16, layout="bhnd"), id="kv0-bhnd"),
    ],
)
def test_rows_without_keys_are_zero(rng, case):
    """A row that sees no key gives out exactly 0 and lse exactly -inf."""
    q, k, v = make_inputs(rng, case, "float32")
    out, lse = jitted_attention(q, k, v, causal=case.causal, layout=case.layout, return_lse=True)
    empty = ~rows_with_keys(case.nq, case.nkv, case.causal)
    out, lse = np.asarray(out), np.asarray(lse)
    rows = out[:, empty] if case.layout == "bnhd" else out[:, :, empty]
    assert (rows == 0).all()
    assert np.isneginf(lse[:, :, empty]).all() and np.isfinite(lse[:, :, ~empty]).all()
    check_against_reference(q, k, v, jnp.asarray(out), jnp.asarray(lse), "float32", causal=case.causal, layout=case.layout)


def test_empty_query(rng):
    """Nq = 0: empty outputs of the right shapes and dtypes, under jit too."""
    q, k, v = make_inputs(rng, Case(2, 0, 5, 2, 1, 16, 8), "bfloat16")
    for fn in (flashx.jax.attention, jitted_attention):
        out, lse = fn(q, k, v, return_lse=True)
        assert out.shape == (2, 0, 2, 8) and out.dtype == jnp.bfloat16
        assert lse.shape == (2, 2, 0) and lse.dtype == jnp.float32


# ----------------------------------------------------------------------------------------------
# jax.vmap
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def launched_batches(monkeypatch):
    """Asserts that no launch is traced with vmap's tracers (jax-triton refuses to batch its
    launches on the GPU, so flashx must batch first). Returns the batch size (Q's first axis) of
    each attention kernel run, in Triton's interpreter: None on the GPU, where XLA runs them."""
    import sys

    module = sys.modules["flashx.jax.attention"]
    launch, batches = module._launch, []

    def spy(build, arrays, out_types, zeroed=()):
        mapped = [n for n, a in arrays.items() if any(t.__name__ == "BatchTracer" for t in type(a).__mro__)]
        assert not mapped, f"jax.vmap reached a launch with {mapped}"

        def run(host_arrays, placeholder):  # on the CPU, called as the kernel runs, on torch tensors
            if "Q" in host_arrays and type(host_arrays["Q"]).__module__.startswith("torch"):
                batches.append(host_arrays["Q"].shape[0])
            return build(host_arrays, placeholder)
        return launch(run, arrays, out_types, zeroed)

    monkeypatch.setattr(module, "_launch", spy)
    return batches if INTERPRETED else None


def _mapped_inputs(rng, case: Case, dtype: str, size: int, in_axes):
    """`size` fresh slices of q, k, v, and them stacked along in_axes (None: the first slice's, shared)."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * 3
    slices = [make_inputs(rng, case, dtype) for _ in range(size)]
    stacked = tuple(slices[0][i] if ax is None else jnp.stack([s[i] for s in slices], axis=ax) for i, ax in enumerate(axes))
    slices = [tuple(s[i] if ax is not None else slices[0][i] for i, ax in enumerate(axes)) for s in slices]
    return slices, stacked


@pytest.mark.parametrize("case, size, in_axes, out_axes", VMAP_CASES)
def test_vmap_folds_into_one_launch(rng, launched_batches, case, size, in_axes, out_axes):
    """jax.vmap (under jit) of attention: each slice's out and lse agree with float64 as an
    unmapped call's do, and the mapped axis folds into the batch axis of one launch."""
    slices, (q, k, v) = _mapped_inputs(rng, case, "bfloat16", size, in_axes)
    call = lambda q, k, v: flashx.jax.attention(q, k, v, causal=case.causal, layout=case.layout, return_lse=True)  # noqa: E731
    out, lse = jax.jit(jax.vmap(call, in_axes=in_axes, out_axes=out_axes))(q, k, v)
    assert launched_batches in (None, [size * case.b])
    for i, (qi, ki, vi) in enumerate(slices):
        check_against_reference(qi, ki, vi, jnp.take(out, i, axis=out_axes), jnp.take(lse, i, axis=out_axes), "bfloat16",
                                causal=case.causal, layout=case.layout)


def test_vmap_of_vmap(rng, launched_batches):
    """Two nested vmaps fold into one launch (3 x 2 x B)."""
    case = Case(1, 19, 26, 2, 1, 16, 16, causal=True)
    slices = [[make_inputs(rng, case, "float16") for _ in range(2)] for _ in range(3)]
    q, k, v = (jnp.stack([jnp.stack([s[i] for s in row]) for row in slices]) for i in range(3))
    out = jax.vmap(jax.vmap(lambda q, k, v: flashx.jax.attention(q, k, v, causal=True)))(q, k, v)
    assert launched_batches in (None, [6])
    for a, row in enumerate(slices):
        for b, (qi, ki, vi) in enumerate(row):
            _, lse = flashx.jax.attention(qi, ki, vi, causal=True, return_lse=True)
            check_against_reference(qi, ki, vi, out[a, b], lse, "float16", causal=True)


def test_vmap_with_mapped_mask_runs_slice_by_slice(rng, launched_batches):
    """A mask mapped with q (here through the jax.nn drop-in) depends on the mapped index: the
    call runs one slice at a time (lax.map), against jax.nn's own attention
    in float32, bounded by its error in float16."""
    case = Case(2, 23, 31, 2, 2, 16, 16)
    slices, (q, k, v) = _mapped_inputs(rng, case, "float16", 3, 0)
    mask = jnp.asarray(rng.random((3, 1, 1, 23, 31)) < 0.7)

    def native(q, k, v, mask):
        return jax.nn.dot_product_attention(q, k, v, mask=mask, implementation="xla")

    out = jax.jit(jax.vmap(lambda q, k, v, m: flashx.jax.dot_product_attention(q, k, v, mask=m)))(q, k, v, mask)
    assert launched_batches in (None, [case.b] * 3)
    ref = jax.vmap(native)(*(x.astype(jnp.float32) for x in (q, k, v)), mask)
    rows = np.asarray(mask).any(axis=-1)[:, :, :, :, None].transpose(0, 1, 3, 2, 4)  # rows that see no key give 0
    ref = np.where(rows, to_numpy(ref), 0.0)
    own = np.where(rows, to_numpy(jax.vmap(native)(q, k, v, mask)), 0.0)
    assert_error_within(rel_error(to_numpy(out), ref), rel_error(own, ref), "float16")


@pytest.mark.parametrize("bias_axis", [0, None], ids=["bias-mapped", "bias-shared"])
def test_vmap_bias_gradients_slice_by_slice(rng, launched_batches, bias_axis):
    """vmap of grad through the jax.nn drop-in with a bias (its gradient per slice: the call
    runs slice by slice), against jax.nn's attention in float64, bounded by its float32 error."""
    case = Case(1, 17, 29, 2, 2, 16, 16)
    slices, (q, k, v) = _mapped_inputs(rng, case, "float32", 3, 0)
    bias = jnp.asarray(rng.standard_normal((3, 1, 2, 17, 29) if bias_axis == 0 else (1, 2, 17, 29)), jnp.float32)

    def grads(fn, *arrays):
        loss = lambda q, k, v, b: jnp.sum(fn(q, k, v, bias=b) ** 2)  # noqa: E731
        return jax.vmap(jax.grad(loss, argnums=(0, 1, 2, 3)), in_axes=(0, 0, 0, bias_axis))(*arrays)

    native = lambda *a, **kw: jax.nn.dot_product_attention(*a, **kw, implementation="xla")  # noqa: E731
    ours = jax.jit(lambda *a: grads(flashx.jax.dot_product_attention, *a))(q, k, v, bias)
    assert launched_batches is None or (len(launched_batches) >= 3 and set(launched_batches) == {case.b})
    with jax.enable_x64(True):
        ref = grads(native, *(x.astype(jnp.float64) for x in (q, k, v, bias)))
    own = grads(native, q, k, v, bias)
    for name, g, r, n in zip(("dq", "dk", "dv", "dbias"), ours, ref, own):
        assert g.shape == r.shape and g.shape[0] == 3, name
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), "float32", name)


@pytest.mark.parametrize("argnums", [(0,), (1, 2), (2,), (0, 1, 2)], ids=["q", "kv", "v", "qkv"])
def test_grad_runs_only_the_passes_it_needs(rng, argnums):
    """jax.grad in q alone runs no dK/dV pass, in k and v (or v) alone no dQ pass: the backward's
    recorded launches write only what is differentiated (the custom_vjp's forward rule sees which
    primals are perturbed). Under jit, the gradients taken match JAX's own attention in float32,
    bounded by its error in bfloat16. Before session 69 every backward ran both passes."""
    frontend = sys.modules["flashx.jax.attention"]
    case = Case(2, 33, 45, 4, 2, 24, 24, causal=True)
    q, k, v = make_inputs(rng, case, "bfloat16")
    cotangent = jnp.asarray(rng.standard_normal((*q.shape[:3], v.shape[-1])), jnp.float32)

    def loss(fn, q, k, v):
        return jnp.sum(fn(q, k, v, causal=True).astype(jnp.float32) * cotangent)

    launches = frontend._recorded_launches(jax.grad(functools.partial(loss, flashx.jax.attention), argnums=argnums), q, k, v)
    written = {name for build, arrays, _, _ in launches for name in build(arrays, None)[0].writes}
    assert ("DQ" in written) == (0 in argnums) and ("DK" in written) == (1 in argnums or 2 in argnums), written
    ours = jax.jit(jax.grad(functools.partial(loss, flashx.jax.attention), argnums=argnums))(q, k, v)
    ref = jax.grad(functools.partial(loss, native_attention), argnums=argnums)(*(x.astype(jnp.float32) for x in (q, k, v)))
    own = jax.grad(functools.partial(loss, native_attention), argnums=argnums)(q, k, v)
    for i, g, r, n in zip(argnums, ours, ref, own):
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), "bfloat16", "qkv"[i])


@pytest.mark.parametrize("order", ["vmap-of-grad", "grad-of-vmap"])
def test_vmap_gradients(rng, launched_batches, order):
    """Gradients through a folded vmap, either way round, against jax's own attention in float32
    (vmapped), bounded by its error in bfloat16; k and v shared by the slices (their gradient
    summed over them under grad-of-vmap, one per slice under vmap-of-grad)."""
    case = Case(2, 33, 45, 4, 2, 24, 24, causal=True)
    slices, (q, k, v) = _mapped_inputs(rng, case, "bfloat16", 3, (0, None, None))
    cotangent = jnp.asarray(rng.standard_normal((3, *q.shape[1:4], v.shape[-1])), jnp.float32)

    def loss(fn, q, k, v, g):
        return jnp.sum(fn(q, k, v, causal=True).astype(jnp.float32) * g)

    def grads(fn, q, k, v):
        if order == "vmap-of-grad":
            return jax.vmap(jax.grad(functools.partial(loss, fn), argnums=(0, 1, 2)), in_axes=(0, None, None, 0))(q, k, v, cotangent)
        mapped = lambda q, k, v: jax.vmap(lambda *a: loss(fn, *a), in_axes=(0, None, None, 0))(q, k, v, cotangent).sum()  # noqa: E731
        return jax.grad(mapped, argnums=(0, 1, 2))(q, k, v)

    ours = jax.jit(lambda *a: grads(flashx.jax.attention, *a))(q, k, v)
    # Every launch folded: the forward, the backward's row statistics and its gradient kernels.
    assert launched_batches is None or (len(launched_batches) >= 3 and set(launched_batches) == {3 * case.b})
    ref, native = native_gradients(grads, q, k, v)
    for name, g, r, n in zip("qkv", ours, ref, native):
        assert g.shape == r.shape
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), "bfloat16", f"d{name}")


@pytest.mark.gpu
@pytest.mark.parametrize("case", [pytest.param(Case(1, 1000, 1000, 4, 2, 128, 128, causal=True), id="d128-gqa-n1000-causal"),
                                  pytest.param(Case(2, 300, 520, 2, 2, 64, 64), id="d64-q300-kv520")])
def test_gpu_vmap(rng, launched_batches, case):
    """On the GPU, where jax-triton refuses to batch its launches: jax.vmap of the forward (each
    slice against float64) and of the gradient (against jax's own in float32, bounded by its
    bfloat16 error), through the routed kernels."""
    slices, (q, k, v) = _mapped_inputs(rng, case, "bfloat16", 2, 0)
    out, lse = jax.jit(jax.vmap(lambda q, k, v: flashx.jax.attention(q, k, v, causal=case.causal, return_lse=True)))(q, k, v)
    for i, (qi, ki, vi) in enumerate(slices):
        check_against_reference(qi, ki, vi, out[i], lse[i], "bfloat16", causal=case.causal)

    cotangent = jnp.asarray(rng.standard_normal(out.shape), jnp.float32)

    def grads(fn, *arrays):
        loss = lambda q, k, v, g: jnp.sum(fn(q, k, v, causal=case.causal).astype(jnp.float32) * g)  # noqa: E731
        return jax.vmap(jax.grad(loss, argnums=(0, 1, 2)))(*arrays, cotangent)

    ours = jax.jit(lambda *a: grads(flashx.jax.attention, *a))(q, k, v)
    ref = grads(native_attention, *(x.astype(jnp.float32) for x in (q, k, v)))
    native = grads(native_attention, q, k, v)
    for name, g, r, n in zip("qkv", ours, ref, native):
        assert_error_within(rel_error(to_numpy(g), to_numpy(r)), rel_error(to_numpy(n), to_numpy(r)), "bfloat16", f"d{name}")


def test_second_derivative_raises(rng):
    """A gradient of flashx's gradient raises NotImplementedError at trace time (it differentiated
    the launches before: the interpreter's host callback refused, unclearly)."""
    q, k, v = make_inputs(rng, Case(1, 5, 7, 2, 1, 16, 16), "float32")
    first = jax.grad(lambda q: flashx.jax.attention(q, k, v).sum())
    with pytest.raises(NotImplementedError, match="no second derivative"):
        jax.jit(jax.grad(lambda q: first(q).sum()))(q)


# ----------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------


def _a(*shape, dtype=jnp.float16):
    return jnp.asarray(np.random.default_rng(0).standard_normal(shape), dtype=dtype)


Q, K, V = (1, 5, 4, 16), (1, 7, 2, 16), (1, 7, 2, 8)

BAD_INPUTS = [
    pytest.param(lambda: ((_a(5, 4, 16), _a(*K), _a(*V)), {}), ValueError, r"\bq\b.*4-D", id="q-rank-3"),
    pytest.param(lambda: ((_a(*Q), _a(1, 7, 2, 24), _a(*V)), {}), ValueError, r"q and k.*head dim", id="head-dim-mismatch"),
    pytest.param(lambda: ((_a(*Q), _a(*K), _a(1, 6, 2, 8)), {}), ValueError, r"k and v.*sequence length", id="kv-length-mismatch"),
    pytest.param(lambda: ((_a(1, 5, 3, 16), _a(*K), _a(*V)), {}), ValueError, r"q's heads", id="hq-not-multiple"),
    pytest.param(lambda: ((_a(*Q), _a(*K), _a(1, 7, 2, 300)), {}), ValueError, r"v head dim.*300", id="dv-300"),
    pytest.param(lambda: ((_a(*Q), _a(*K, dtype=jnp.bfloat16), _a(*V)), {}), TypeError, r"q, k and v.*dtype", id="mixed-dtypes"),
    pytest.param(lambda: ((_a(*Q, dtype=jnp.int32), _a(*K, dtype=jnp.int32), _a(*V, dtype=jnp.int32)), {}), TypeError, r"\bq\b.*int32", id="int32"),
    pytest.param(lambda: ((_a(*Q), _a(*K), _a(*V)), {"layout": "BNHD"}), ValueError, r"layout", id="unknown-layout"),
    pytest.param(lambda: ((_a(*Q), _a(*K), _a(*V)), {"causal": 0}), TypeError, r"causal", id="causal-int"),
    pytest.param(lambda: ((_a(*Q), _a(*K), _a(*V)), {"scale": float("nan")}), TypeError, r"scale", id="scale-nan"),
    pytest.param(lambda: ((_a(*Q), _a(*K), _a(*V)), {"return_lse": "yes"}), TypeError, r"return_lse", id="return-lse-str"),
    pytest.param(lambda: ((_a(*Q), [1.0], _a(*V)), {}), TypeError, r"\bk\b.*jax\.Array", id="k-list"),
    pytest.param(
        lambda: ((np.ones(Q, np.float32), np.ones(K, np.float32), np.ones(V, np.float32)), {}),
        TypeError, r"\bq\b.*jax\.Array.*ndarray", id="numpy-inputs",
    ),
]


@pytest.mark.parametrize("make, error, match", BAD_INPUTS)
def test_bad_input_raises(make, error, match):
    """Each bad input raises the documented error naming the argument (NumPy arrays are not accepted: jax.Array only)."""
    args, kwargs = make()
    with pytest.raises(error, match=match):
        flashx.jax.attention(*args, **kwargs)


def test_bad_input_raises_at_trace_time():
    """Under jit the error comes from tracing, with the same message."""
    with pytest.raises(ValueError, match=r"q's heads \(3\)"):
        jitted_attention(_a(1, 5, 3, 16), _a(*K), _a(*V))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case, dtype",
    [
        pytest.param(Case(1, 2100, 2100, 4, 2, 128, 128, causal=True), "bfloat16", id="gqa-4:2-n2100-causal-bf16"),
        pytest.param(Case(2, 333, 2049, 2, 2, 128, 128, layout="bhnd"), "float16", id="q333-kv2049-bhnd-fp16"),
        pytest.param(Case(2, 1000, 1000, 40, 8, 128, 128), "bfloat16", id="persistent-gqa-40:8-n1000-bf16"),
        pytest.param(Case(1, 2100, 2100, 6, 2, 64, 64), "bfloat16", id="d64-gqa-6:2-n2100-bf16"),
        pytest.param(Case(1, 1500, 2200, 2, 1, 256, 256, causal=True), "float16", id="d256-mqa-q1500-kv2200-causal-fp16"),
        pytest.param(Case(1, 1040, 1040, 4, 2, 256, 256), "bfloat16", id="d256-gqa-4:2-n1040-bf16"),
        # A short causal call (JAX's own route from 256 keys): the gradient reads the trimmed tile's lse.
        pytest.param(Case(2, 300, 300, 4, 2, 128, 128, causal=True), "bfloat16", id="short-gqa-4:2-n300-causal-bf16"),
    ],
)
@pytest.mark.usefixtures("keys_unsplit")
def test_gpu_gluon_forward(forward_kernels, rng, case, dtype):
    """On Hopper, inside jax.jit: dense 16-bit calls at D = 64, 128 or 256 with enough keys take the Gluon
    forward through jax-triton (flashx/jax/gluon.py teaches its builder Gluon), and agree with
    float64; the gradient reads its lse."""
    from flashx import core
    from flashx.core import gluon_forward

    require_sm90("the Gluon forward's kernels")
    assert core.runtime.hopper_gluon(), "an sm_90 device, yet the Gluon forward is off"
    q, k, v = make_inputs(rng, case, dtype)
    out, lse = jax.jit(lambda q, k, v: flashx.jax.attention(q, k, v, causal=case.causal, layout=case.layout,
                                                             return_lse=True))(q, k, v)
    assert forward_kernels and all(kern is gluon_forward.gluon_attention_forward_kernel for kern in forward_kernels)
    check_against_reference(q, k, v, out, lse, dtype, causal=case.causal, layout=case.layout)

    checked_gradients(rng, q, k, v, case.causal, dtype, case.layout)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case, dtype",
    [
        pytest.param(Case(2, 1000, 1100, 8, 2, 128, 128), "bfloat16", id="gqa-8:2-q1000-kv1100-bf16"),
        pytest.param(Case(1, 2100, 2100, 4, 4, 128, 128, causal=True, layout="bhnd"), "float16",
                     id="n2100-causal-bhnd-fp16"),
        pytest.param(Case(2, 1100, 1030, 4, 2, 64, 64), "bfloat16", id="d64-q1100-kv1030-bf16"),
        pytest.param(Case(1, 700, 1500, 4, 1, 64, 64, causal=True), "bfloat16", id="d64-trim-mqa-q700-kv1500-causal"),
        pytest.param(Case(1, 1500, 4100, 4, 2, 64, 64, causal=True), "bfloat16", id="d64-c3-gqa-q1500-kv4100-causal"),
        pytest.param(Case(1, 1200, 4200, 2, 1, 256, 256, causal=True), "bfloat16", id="d256-mqa-q1200-kv4200-causal"),
        pytest.param(Case(3, 600, 700, 4, 2, 128, 128, causal=True), "bfloat16", id="trimmed-gqa-q600-kv700-causal"),
        # Short causal calls: JAX's own route (GLUON_DEVICE_TMA_ROUTE) from 256 keys.
        pytest.param(Case(5, 300, 300, 4, 2, 128, 128, causal=True, layout="bhnd"), "bfloat16",
                     id="trimmed-short-q300-causal-bhnd"),
        pytest.param(Case(3, 130, 260, 4, 4, 128, 128, causal=True), "float16", id="trimmed-short-q130-kv260-causal"),
    ],
)
@pytest.mark.usefixtures("keys_unsplit")
def test_gpu_gluon_device_descriptors(monkeypatch, forward_kernels, rng, case, dtype):
    """With tuning.GLUON_DEVICE_DESCRIPTORS (the default; set here so the path stays tested if the
    default changes), JAX's launches take the TMA tiles, each program building its descriptors in
    the DESCRIPTOR_SCRATCH output that flashx/jax/gluon.py points the kernel's global scratch at;
    out and lse agree with float64. Run it under a timeout: a wrong descriptor hangs rather than
    fails."""
    from flashx import core
    from flashx.core import gluon_forward, tuning

    require_sm90("the Gluon forward's kernels")
    monkeypatch.setattr(tuning, "GLUON_DEVICE_DESCRIPTORS", True)
    route = {**tuning.GLUON_TMA_ROUTE, **tuning.GLUON_DEVICE_TMA_ROUTE}
    tile = tuning.gluon_forward_tile(case.d, case.causal, case.nkv, route)
    assert tile is not None and tuning.GLUON_FORWARD_TILES[tile]["TMA"]
    q, k, v = make_inputs(rng, case, dtype)
    out, lse = jax.jit(lambda q, k, v: flashx.jax.attention(q, k, v, causal=case.causal, layout=case.layout,
                                                             return_lse=True))(q, k, v)
    assert forward_kernels and all(kern is gluon_forward.gluon_attention_forward_kernel for kern in forward_kernels)
    check_against_reference(q, k, v, out, lse, dtype, causal=case.causal, layout=case.layout)
    assert core.runtime.hopper_gluon()


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(Case(1, 700, 1300, 4, 2, 128, 128, causal=True), id="gqa-q700-kv1300-causal"),
        pytest.param(Case(1, 900, 900, 2, 1, 128, 128), id="mqa-dense"),
    ],
)
@pytest.mark.parametrize("dkdv_tile", ["dkdv", "dkdv-tma", "dkdv-tma-ts", "dkdv-tma-persist"])
def test_gpu_gluon_dkdv_through_the_plan(monkeypatch, backward_kernels, rng, case, dkdv_tile):
    """With the Gluon backward routes switched on for dense and causal calls (dK/dV by cp.async,
    or by TMA from descriptors the kernel builds in its DESCRIPTOR_SCRATCH output, dK and dV stored
    by TMA or not, on the grid or persistent: "dkdv-tma-persist", which loses and is not routed), jax.grad of
    flashx.jax.attention launches the Gluon dK/dV and dQ kernels through jax-triton:
    the gradients against float32 within the dtype's bound of JAX's own. Run it under a timeout:
    a wrong barrier protocol hangs rather than fails."""
    from flashx.core import gluon_backward, tuning, plan as plan_mod

    require_sm90()
    kinds = ("dense", "causal")
    monkeypatch.setattr(tuning, "GLUON_DKDV_ROUTE", {(128, k): "dkdv" for k in kinds})
    monkeypatch.setattr(tuning, "GLUON_DKDV_TMA_ROUTE", {(128, k): dkdv_tile for k in kinds if dkdv_tile != "dkdv"})
    monkeypatch.setattr(tuning, "GLUON_DQ_ROUTE", {(128, k): "dq" for k in kinds})
    on_device = []
    statics = plan_mod.AttentionPlan._backward_statics
    monkeypatch.setattr(plan_mod.AttentionPlan, "_backward_statics", lambda self, *a: on_device.extend(
        bool(static[4].get("DEVICE_DESCRIPTORS")) for static in statics(self, *a)) or statics(self, *a))
    q, k, v = make_inputs(rng, case, "bfloat16")
    checked_gradients(rng, q, k, v, case.causal)
    assert {gluon_backward.gluon_attention_dkdv_kernel, gluon_backward.gluon_attention_dq_kernel} <= set(backward_kernels)
    assert any(on_device) is (dkdv_tile != "dkdv")


@pytest.mark.gpu
@pytest.mark.parametrize("window", [None, (150, 0)], ids=["dense", "window-150"])
def test_gpu_gluon_dq_row_statistics(monkeypatch, backward_kernels, rng, window):
    """jax.grad through out and lse with the Gluon dQ routed: its launch comes first and writes the
    row statistics (tuning.GLUON_DQ_ROW_STATS, the lse's gradient folded into delta) that the
    dK/dV launch after it reads; the gradients agree with a float32 reference (highest-precision
    matmuls) within the bf16 bound. GQA 4 / 2, Nq = 333 (51 padding rows), D = 128."""
    from flashx.core import gluon_backward, tuning

    require_sm90()
    monkeypatch.setattr(tuning, "GLUON_DQ_ROUTE", {(128, k): "dq" for k in ("dense", "causal", "window", "map")})
    monkeypatch.setattr(tuning, "GLUON_DQ_ROW_STATS", True)
    q, k, v = (jnp.asarray(rng.standard_normal(s), jnp.bfloat16) for s in ((2, 333, 4, 128), (2, 333, 2, 128), (2, 333, 2, 128)))
    w = jnp.asarray(rng.standard_normal((2, 333, 4, 128)), jnp.float32)
    u = jnp.asarray(rng.standard_normal((2, 4, 333)), jnp.float32)
    options = dict(window=window) if window else {}

    def loss(q, k, v):
        out, lse = flashx.jax.attention(q, k, v, return_lse=True, **options)
        return jnp.sum(out.astype(jnp.float32) * w) + jnp.sum(lse * u)

    def reference_loss(q, k, v):
        k, v = (jnp.repeat(x, 2, axis=2) for x in (k, v))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision="highest") / np.sqrt(128)
        if window is not None:
            i, j = np.arange(333)[:, None], np.arange(333)[None, :]
            scores = jnp.where((j <= i) & (j >= i - window[0]), scores, -jnp.inf)
        lse = jax.nn.logsumexp(scores, axis=-1)
        out = jnp.einsum("bhqk,bkhd->bqhd", jnp.exp(scores - lse[..., None]), v, precision="highest")
        return jnp.sum(out * w) + jnp.sum(lse * u)

    ours = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(q, k, v)
    assert backward_kernels[0] is gluon_backward.gluon_attention_dq_kernel, backward_kernels
    ref = jax.jit(jax.grad(reference_loss, argnums=(0, 1, 2)))(*(x.astype(jnp.float32) for x in (q, k, v)))
    for name, g, r in zip("qkv", ours, ref):
        assert_error_within(rel_error(np.asarray(g, np.float64), np.asarray(r, np.float64)), None, "bfloat16", f"d{name}")


def test_descriptor_scratch_sized_by_slot_sharing(monkeypatch):
    """DESCRIPTOR_SCRATCH holds one slot of descriptors (and 127 bytes to align its start) for a
    kernel whose programs share it, as both JAX TMA kernels do, else a slot for every program."""
    import types

    from flashx import core
    from flashx.core import gluon_backward, gluon_forward
    from flashx.jax import gluon

    slot = core.tuning.GLUON_DESCRIPTOR_BYTES
    for kernel in (gluon_forward.gluon_attention_forward_kernel, gluon_backward.gluon_attention_dkdv_kernel):
        call = types.SimpleNamespace(kernel=kernel, grid=(17, 4, 2))
        assert gluon.descriptor_scratch_bytes(call) == slot + 127
        monkeypatch.setattr(core.compile_hook, "SHARED_SLOT_KERNELS", frozenset())
        assert gluon.descriptor_scratch_bytes(call) == 17 * 4 * 2 * slot + 127
        monkeypatch.undo()


def test_scratch_taken_from_the_argument(monkeypatch):
    """flashx/jax/gluon.py points a kernel's global scratch (Triton's hidden parameter after its
    own, which jaxlib does not fill) at its DESCRIPTOR_SCRATCH argument, rounded up to 128 bytes,
    less Triton's per-program offset for kernels that share one slot (SHARED_SLOT_KERNELS); a
    kernel without that argument, or needing more scratch than it is sized for, is refused.
    core.compile_hook.with_one_scratch_slot takes the same offset off Triton's own scratch parameter."""
    from flashx import core
    from flashx.jax.gluon import _scratch_in_argument

    names = ("Q", "n", "BLOCK", "O", "DESCRIPTOR_SCRATCH")
    signature = {"Q": "*bf16", "n": "i32", "BLOCK": "constexpr", "O": "*bf16", "DESCRIPTOR_SCRATCH": "*u8"}
    params = ",\n".join(f"\t.param .u64 k_param_{i}" for i in range(6))
    ptx = (f".visible .entry k(\n{params}\n)\n{{\n\tld.param.b64 \t%rd3, [k_param_0];\n"
           "\tld.param.b64 \t%rd7, [k_param_4];\n\tadd.s64 %rd8, %rd7, %rd2;\n}\n")
    monkeypatch.setattr(core.compile_hook, "SHARED_SLOT_KERNELS", frozenset({"k"}))
    rewritten = _scratch_in_argument(ptx, "k", names, signature, 384)
    assert "[k_param_4]" not in rewritten.split(")", 1)[1]
    assert "ld.param.b64 %rd7, [k_param_3];\n\tadd.s64 %rd7, %rd7, 127;\n\tand.b64 %rd7, %rd7, -128;" in rewritten
    assert "[k_param_0]" in rewritten and "add.s64 %rd8, %rd7, %rd2;" in rewritten
    # every program's slot at the base: Triton's (linear program id) x 384 taken off first
    assert "mul.wide.s32 %fxs_offset, %fxs5, 384; sub.s64 %rd7, %rd7, %fxs_offset; }" in rewritten
    assert "mad.lo.s32 %fxs5, %fxs2, %fxs4, %fxs1; mad.lo.s32 %fxs5, %fxs5, %fxs3, %fxs0;" in rewritten
    monkeypatch.setattr(core.compile_hook, "SHARED_SLOT_KERNELS", frozenset())
    assert "%fxs" not in _scratch_in_argument(ptx, "k", names, signature, 384)
    # For Triton's own launcher (the probe's timing from torch): its hidden parameter kept, the
    # same offset taken off after it.
    one_slot = core.compile_hook.with_one_scratch_slot(ptx, "k", 384)
    assert ("ld.param.b64 \t%rd7, [k_param_4];\n\t{ .reg .b32 %fxs<6>;" in one_slot
            and "mul.wide.s32 %fxs_offset, %fxs5, 384; sub.s64 %rd7, %rd7, %fxs_offset; }" in one_slot)
    with pytest.raises(ValueError, match="ld.param"):
        core.compile_hook.with_one_scratch_slot(ptx.replace("[k_param_4]", "[k_param_3]"), "k", 384)
    with pytest.raises(ValueError, match="DESCRIPTOR_SCRATCH"):
        _scratch_in_argument(ptx, "k", names[:-1], signature, 384)
    bound = core.tuning.GLUON_DESCRIPTOR_BYTES
    with pytest.raises(ValueError, match=f"sized for {bound}"):
        _scratch_in_argument(ptx, "k", names, signature, bound + 128)
    with pytest.raises(ValueError, match="hidden"):
        _scratch_in_argument(ptx.replace(",\n\t.param .u64 k_param_5", ""), "k", names, signature, 384)


_COMPILE_TO_PTX_CHECK = """
from flashx.jax.gluon import compile_to_ptx  # flashx first: without a GPU it sets up the interpreter

import triton
import triton.language as tl
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction


def add_one(X, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(X + offsets, tl.load(X + offsets) + 1)


seen = []


def earlier_hook(*args):  # Triton >= 3.7 also calls it with nothing, for its part of a cache key
    if not args:
        return "", ""
    seen.append(list(args[1]))


knobs.runtime.add_stages_inspection_hook = earlier_hook
kernel = JITFunction(add_one)


def source():
    return ASTSource(kernel, {"X": "*fp32", "N": "constexpr"}, {(1,): 64})


ptx_only = compile_to_ptx(source(), 90, 4)
assert ".entry add_one" in ptx_only.asm["ptx"] and ptx_only.asm["cubin"] == b""
assert seen == [["ttir", "ttgir", "llir", "ptx", "cubin"]], seen
assert knobs.runtime.add_stages_inspection_hook is earlier_hook  # put back after each compile
full = triton.compile(source(), target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4))
assert len(full.asm["cubin"]) > 0 and full.hash != ptx_only.hash
assert full.asm["ptx"] == ptx_only.asm["ptx"]
again = compile_to_ptx(source(), 90, 4)  # from the cache, and still its own entry
assert again.hash == ptx_only.hash and again.asm["cubin"] == b"" and again.asm["ptx"] == ptx_only.asm["ptx"]
print("checked")
"""


def test_compile_to_ptx(tmp_path):
    """compile_to_ptx (flashx/jax/gluon.py) stops at PTX, which jaxlib assembles itself: the cubin
    is empty, the stage hook installed before it still runs and is put back, and a full Triton
    compile of the same kernel gets a real cubin, not the PTX-only cache entry (nor the other way
    round). Compiled offline for sm_90 with Triton's own ptxas, in a fresh process: a kernel run
    through Triton's interpreter (the other CPU tests) leaves the tl frontend patched."""
    check_in_fresh_process(tmp_path, "compile_to_ptx_check", _COMPILE_TO_PTX_CHECK)


_SPECIALIZER_CHECK = """
import sys
import types

from flashx.jax.gluon import start_specializer_without_torch

assert "torch" not in sys.modules
start_specializer_without_torch()
assert "torch" not in sys.modules
assert not any(type(finder).__name__ == "_TorchRefusedHere" for finder in sys.meta_path)  # taken out again
from triton._C.libtriton import native_specialize_impl
from triton.backends.compiler import BaseBackend

# jax-triton's call: an object with data_ptr and a dtype name stands for each array.
array = types.SimpleNamespace(data_ptr=lambda: 32, dtype="bf16")
assert native_specialize_impl(BaseBackend, array, False, True, True) == ("*bf16", "D")
assert native_specialize_impl(BaseBackend, 48, False, True, True) == ("i32", "D")
assert "torch" not in sys.modules
import torch  # still importable, and its tensors still specialize

assert native_specialize_impl(BaseBackend, torch.empty(8, dtype=torch.float16), False, True, True) == ("*fp16", "D")
assert native_specialize_impl(BaseBackend, torch.empty(9)[1:], False, True, True) == ("*fp32", "")
print("checked")
"""


def test_specializer_starts_without_torch(tmp_path):
    """flashx.jax sets up Triton's argument specializer (which jax-triton calls for every tl
    kernel) without importing torch, which Triton 3.6's setup does where torch is installed (1-5
    s of a JAX process's first compile); the specializer still gives jax-triton's arrays, integers
    and, once imported, torch's tensors their types and alignments. A fresh process: this one has
    torch imported."""
    pytest.importorskip("torch")  # the point is a process where torch could be imported
    check_in_fresh_process(tmp_path, "specializer_check", _SPECIALIZER_CHECK)


_NO_TORCH_ON_GPU_CHECK = """
import sys

import flashx.jax
import jax
import jax.numpy as jnp
import numpy as np

q, k, v = (jax.random.normal(key, (1, 300, 2, 64), jnp.bfloat16) for key in jax.random.split(jax.random.key(0), 3))


def attention(q, k, v):  # a sliding window: the tl kernels, which jax-triton specializes and compiles
    return flashx.jax.attention(q, k, v, window=(64, 0))


out = jax.jit(attention)(q, k, v)
grads = jax.jit(jax.grad(lambda q, k, v: attention(q, k, v).astype(jnp.float32).sum(), argnums=(0, 1, 2)))(q, k, v)
assert "torch" not in sys.modules, "compiling flashx.jax's kernels imported torch"
x = [np.asarray(a, np.float64) for a in (q, k, v)]
scores = np.einsum("bqhd,bkhd->bhqk", x[0], x[1]) / 8.0
rows, cols = np.arange(300)[:, None], np.arange(300)[None, :]
scores = np.where((cols <= rows) & (cols >= rows - 64), scores, -np.inf)
p = np.exp(scores - scores.max(-1, keepdims=True))
ref = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), x[2])
assert np.abs(np.asarray(out, np.float64) - ref).max() < 3e-2
assert all(bool(jnp.isfinite(g.astype(jnp.float32)).all()) for g in grads)
print("checked")
"""


@pytest.mark.gpu
def test_gpu_compiles_without_importing_torch(tmp_path):
    """On the GPU a JAX process compiles and runs flashx's tl kernels, forward and backward,
    without importing torch (Triton 3.6's argument specializer would, at jax-triton's first
    kernel: start_specializer_without_torch); the forward agrees with float64. A fresh process,
    as a JAX user's would be."""
    pytest.importorskip("torch")  # where torch is missing there is nothing to import
    check_in_fresh_process(tmp_path, "no_torch_check", _NO_TORCH_ON_GPU_CHECK)


@pytest.fixture(params=[False, True], ids=["cp-async", "device-descriptors"])
def traced_as_hopper(request, monkeypatch):
    """(GLUON_DEVICE_DESCRIPTORS, launches): JAX traced as on Hopper (nothing runs: tests use
    jax.eval_shape) with the flag as parametrized; launches gets (KernelCall, out_types) of each
    launch the frontend asks jax-triton for. Nothing is compiled ahead either: on a GPU host
    _compile_ahead would record every launch once more (two dK/dV launches where the trace asks
    for one, seen on the H200) and compile kernels for a Hopper that is only pretended."""
    import sys

    from flashx import core
    from flashx.core import tuning

    module = sys.modules["flashx.jax.attention"]  # flashx.jax.attention is also the function
    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: True)
    monkeypatch.setattr(core.runtime, "multiprocessor_count", lambda: 132)
    monkeypatch.setattr(module._gluon, "install", lambda: True)
    monkeypatch.setattr(module, "_launches_compile", lambda: False)
    monkeypatch.setattr(tuning, "GLUON_DEVICE_DESCRIPTORS", request.param)
    asked = []
    launch = module._launch

    def recorded(build, arrays, out_types, zeroed=()):
        call, _ = build({}, None)
        asked.append((call, out_types))
        return launch(build, arrays, out_types, zeroed)

    monkeypatch.setattr(module, "_launch", recorded)
    return request.param, asked


def test_forward_asks_for_descriptor_scratch(traced_as_hopper):
    """The JAX forward's Gluon launch asks for O, LSE and DESCRIPTOR_SCRATCH:
    one program's slot of descriptors (its programs share one: core.compile_hook.SHARED_SLOT_KERNELS) where its
    TMA tile builds descriptors on the device (tuning.GLUON_DEVICE_DESCRIPTORS), else one byte for
    the cp.async tile; the caller gets O and LSE only."""
    from flashx.core import tuning

    device_descriptors, asked = traced_as_hopper
    q, k, v = (jax.ShapeDtypeStruct((2, 2100, h, 128), jnp.bfloat16) for h in (4, 2, 2))
    out, lse = jax.eval_shape(lambda q, k, v: flashx.jax.attention(q, k, v, return_lse=True), q, k, v)
    assert (out.shape, lse.shape) == ((2, 2100, 4, 128), (2, 4, 2100))
    (call, out_types), = asked
    assert call.outputs == ("O", "LSE", "DESCRIPTOR_SCRATCH")
    assert call.constexprs["TMA"] == call.constexprs["DEVICE_DESCRIPTORS"] == device_descriptors
    scratch = tuning.GLUON_DESCRIPTOR_BYTES + 127 if device_descriptors else 1
    assert [t.shape for t in out_types] == [(2, 2100, 4, 128), (2, 4, 2100), (scratch,)]
    assert out_types[2].dtype == jnp.uint8


def test_backward_asks_for_descriptor_scratch(traced_as_hopper):
    """jax.grad's backward launches the routed Gluon dK/dV kernel with DK, DV and
    DESCRIPTOR_SCRATCH: one program's slot (shared by all) where its TMA tile builds Q's and dO's
    descriptors on the device (tuning.GLUON_DEVICE_DESCRIPTORS), else the cp.async tile and one
    byte; the gradients keep their shapes."""
    from flashx.core import gluon_backward, tuning

    device_descriptors, asked = traced_as_hopper
    q, k, v = (jax.ShapeDtypeStruct((2, 1100, h, 128), jnp.bfloat16) for h in (4, 2, 2))
    grads = jax.eval_shape(jax.grad(lambda q, k, v: flashx.jax.attention(q, k, v, causal=True).astype(jnp.float32).sum(),
                                    argnums=(0, 1, 2)), q, k, v)
    assert [g.shape for g in grads] == [(2, 1100, 4, 128), (2, 1100, 2, 128), (2, 1100, 2, 128)]
    (call, out_types), = [(c, t) for c, t in asked if c.kernel is gluon_backward.gluon_attention_dkdv_kernel]
    assert call.outputs == ("DK", "DV", "DESCRIPTOR_SCRATCH") and call.grid == (9, 2, 2)
    assert call.constexprs["TMA"] == call.constexprs["DEVICE_DESCRIPTORS"] == device_descriptors
    scratch = tuning.GLUON_DESCRIPTOR_BYTES + 127 if device_descriptors else 1
    assert [t.shape for t in out_types] == [(2, 1100, 2, 128), (2, 1100, 2, 128), (scratch,)]
    assert out_types[2].dtype == jnp.uint8


def test_gradient_compiles_its_kernels_ahead(traced_as_hopper, monkeypatch):
    """A differentiated call (traced as on a GPU, with Hopper's routes) first lowers each of its
    launches, forward and backward, on its own thread, so that jax-triton compiles the kernels side
    by side: the same kernels, grids, constexprs, arrays and output types, in the order the trace
    then launches them; a second trace with the same plan lowers nothing ahead, nor does one at a
    new sequence length whose kernels compile the same (only their lengths differ)."""
    import sys
    import threading

    module = sys.modules["flashx.jax.attention"]
    device_descriptors, _ = traced_as_hopper
    monkeypatch.setattr(module, "_launches_compile", lambda: True)  # as jax-triton's launches do on a GPU
    monkeypatch.setattr(module._gluon, "import_jax_triton", lambda: None)
    monkeypatch.setattr(module, "_compiled_ahead", set())
    lowered = []
    monkeypatch.setattr(module, "_lower_launch", lambda launch: lowered.append((launch, threading.current_thread().name)))

    def described(build, arrays, out_types):
        call, _ = build(arrays, None)
        return (call.kernel, call.grid, dict(call.constexprs), sorted(arrays),
                tuple((t.shape, t.dtype) for t in out_types))

    launched = []  # every launch: the recording pass's, then the trace's own
    launch = module._launch

    def seen(build, arrays, out_types, zeroed=()):
        launched.append(described(build, {n: a for n, a in arrays.items() if a is not None}, out_types))
        return launch(build, arrays, out_types, zeroed)

    monkeypatch.setattr(module, "_launch", seen)
    n = 1100 + 7 * device_descriptors  # plans are cached by shape: one each, not yet seen
    q, k, v = (jax.ShapeDtypeStruct((1, n, h, 128), jnp.bfloat16) for h in (4, 2, 2))
    grad = jax.grad(lambda q, k, v: flashx.jax.attention(q, k, v, causal=True).astype(jnp.float32).sum(), argnums=(0, 1, 2))
    grads = jax.eval_shape(grad, q, k, v)
    assert [g.shape for g in grads] == [q.shape, k.shape, v.shape]
    ahead = [described(launch[0], launch[1], launch[2]) for launch, _ in lowered]
    assert len(ahead) >= 3  # the forward, the row statistics, dK/dV (and dQ)
    assert "DLSE" in ahead[1][3]  # jax.custom_vjp hands the backward dlse as zeros
    assert launched == ahead * 2
    assert all(name.startswith("flashx-jax-compile") for _, name in lowered)
    lowered.clear()
    jax.eval_shape(grad, q, k, v)
    assert lowered == []
    launched.clear()
    longer = [jax.ShapeDtypeStruct((1, n + 64, h, 128), jnp.bfloat16) for h in (4, 2, 2)]  # same alignments
    jax.eval_shape(grad, *longer)
    assert lowered == []
    same = lambda described: (described[0], described[2], described[3])  # noqa: E731 (kernel, constexprs, arrays)
    assert [same(d) for d in launched] == [same(d) for d in ahead] * 2  # recorded, then the trace's own


@pytest.fixture
def lowered_ahead(monkeypatch):
    """(thread name, error or None) of each launch flashx.jax lowers ahead (_lower_launch)."""
    import sys
    import threading

    module = sys.modules["flashx.jax.attention"]
    lowered = []
    lower = module._lower_launch

    def checked(launch):
        try:
            lower(launch)
        except Exception as err:
            lowered.append((threading.current_thread().name, err))
            raise
        lowered.append((threading.current_thread().name, None))

    monkeypatch.setattr(module, "_lower_launch", checked)
    # Launches an earlier test lowered ahead are skipped (_compiled_ahead): start from none, so
    # what a test counts does not depend on the tests run before it.
    monkeypatch.setattr(module, "_compiled_ahead", set())
    return lowered


@pytest.mark.gpu
@pytest.mark.parametrize("case", [
    pytest.param(Case(1, 1037, 1037, 4, 2, 128, 128, causal=True), id="gqa-causal-n1037"),
    pytest.param(Case(2, 333, 777, 2, 1, 64, 64), id="mqa-q333-kv777-d64"),
])
def test_gpu_gradient_compiled_ahead(lowered_ahead, rng, case):
    """On the GPU a first jax.grad lowers each launch ahead on its own thread (jax-triton compiles
    the kernels side by side), every one without error, and the gradients are right: against
    float32 within the dtype's bound of JAX's own."""
    q, k, v = make_inputs(rng, case, "bfloat16")
    checked_gradients(rng, q, k, v, case.causal)
    assert len(lowered_ahead) >= 3
    assert all(name.startswith("flashx-jax-compile") and err is None for name, err in lowered_ahead), lowered_ahead


def test_gradient_lowered_ahead_on_threads(monkeypatch, lowered_ahead, rng):
    """The lowering ahead itself, on the CPU (each launch lowers to a host callback here, where
    on the GPU jax-triton compiles): a first jax.jit(jax.grad) lowers every launch on the pool's
    threads while the trace waits, without error or deadlock, and the gradients stay right:
    against float32 within the dtype's bound of JAX's own."""
    import sys

    module = sys.modules["flashx.jax.attention"]
    monkeypatch.setattr(module, "_launches_compile", lambda: True)
    monkeypatch.setattr(module._gluon, "import_jax_triton", lambda: None)
    case = Case(1, 41, 53, 4, 2, 32, 32, causal=True)  # a shape no other test plans
    q, k, v = make_inputs(rng, case, "bfloat16")
    checked_gradients(rng, q, k, v, causal=True)
    assert len(lowered_ahead) == 3  # the forward, dQ's launch (with the row statistics), dK/dV's
    assert all(name.startswith("flashx-jax-compile") and err is None for name, err in lowered_ahead), lowered_ahead


# ----------------------------------------------------------------------------------------------
# jax.shard_map
# ----------------------------------------------------------------------------------------------
_SHARD_MAP_CHECK = """
import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import fast_interpreter  # tests/: the CPU suite's speedup of Triton's interpreter
import flashx.jax

fast_interpreter.install()

DTYPE, TOLERANCE, (B, N, HQ, HKV, D) = jnp.{dtype}, {tolerance}, {shape}
shard_map = getattr(jax, "shard_map", None)
if shard_map is None:  # JAX before 0.7
    from jax.experimental.shard_map import shard_map
devices = jax.devices()  # four forced host devices on the CPU; the one GPU's mesh is 1 x 1
mesh = Mesh(np.array(devices[:4]).reshape(2, 2) if len(devices) >= 4 else np.array(devices[:1]).reshape(1, 1),
            ("data", "model"))
rng = np.random.default_rng()


def fresh(*shape):
    x = jnp.asarray(rng.standard_normal(shape), DTYPE)
    return x, np.asarray(x, np.float64)  # the reference takes the rounded values


def reference(q, k, v, causal, cotangent, slopes=None, layout="bnhd"):
    \"\"\"float64 attention in plain JAX (bottom-right causal, ALiBi slope_h * |i' - j|): out,
    lse and (dq, dk, dv) for `cotangent` (dO; dlse 0).\"\"\"
    def attend(q, k, v):
        if layout == "bhnd":
            q, k, v = (jnp.swapaxes(x, 1, 2) for x in (q, k, v))
        k, v = (jnp.repeat(x, q.shape[2] // k.shape[2], axis=2) for x in (k, v))
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * D ** -0.5
        nq, nkv = s.shape[-2:]
        rows = np.arange(nq)[:, None] + nkv - nq
        if slopes is not None:
            s = s - jnp.asarray(slopes)[:, None, None] * np.abs(rows - np.arange(nkv))
        if causal:
            s = jnp.where(rows >= np.arange(nkv), s, -jnp.inf)
        lse = jax.nn.logsumexp(s, axis=-1)
        out = jnp.einsum("bhqk,bkhd->bqhd", jnp.exp(s - lse[..., None]), v)
        return (jnp.swapaxes(out, 1, 2) if layout == "bhnd" else out), lse
    def with_gradients(q, k, v, cotangent):
        (out, lse), vjp = jax.vjp(attend, q, k, v)
        return out, lse, vjp((cotangent, jnp.zeros_like(lse)))

    with jax.enable_x64():  # one compiled call: op by op, JAX compiles each of its steps
        out, lse, grads = jax.jit(with_gradients)(*(np.asarray(x, np.float64) for x in (q, k, v, cotangent)))
        return np.asarray(out), np.asarray(lse), [np.asarray(x) for x in grads]


def rel(got, want):
    got = np.asarray(got, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


(q, q64), (k, k64), (v, v64), (g, g64) = fresh(B, N, HQ, D), fresh(B, N, HKV, D), fresh(B, N, HKV, D), fresh(B, N, HQ, D)
errors = {{}}

# 1. Batch along "data", heads along "model" (GQA groups stay whole): out, lse and gradients.
spec, lse_spec = P("data", None, "model", None), P("data", "model", None)
sharded = shard_map(lambda q, k, v: flashx.jax.attention(q, k, v, causal=True, return_lse=True), mesh=mesh,
                    in_specs=(spec,) * 3, out_specs=(spec, lse_spec))
placed = [jax.device_put(x, NamedSharding(mesh, spec)) for x in (q, k, v)]
(out, lse), vjp = jax.jit(lambda *a: jax.vjp(sharded, *a))(*placed)
grads = jax.jit(vjp)((g, jnp.zeros_like(lse)))
want_out, want_lse, want_grads = reference(q64, k64, v64, True, g64)
errors.update(out=rel(out, want_out), lse=rel(lse, want_lse), **{{f"d{{n}}": rel(x, w) for n, x, w in zip("qkv", grads, want_grads)}})
assert all(x.sharding.is_equivalent_to(NamedSharding(mesh, spec), 4) for x in (out, *grads)), [x.sharding for x in (out, *grads)]
loss = lambda *a: jnp.sum((sharded(*a)[0] * g).astype(jnp.float32))  # noqa: E731
hlo = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(*placed).compile().as_text()
assert "all-gather" not in hlo, "the sharded call gathered its inputs"

# 2. Keys split along "data", q the same on every device (invariant there): each device attends
# to its keys, the parts combine through their lse; q's gradient is the sum over the devices.
def split_keys(q, k, v):
    out, lse = flashx.jax.attention(q, k, v, return_lse=True)
    top = jax.lax.pmax(jax.lax.stop_gradient(lse), "data")  # a stabilizer, no gradient through it
    weight = jnp.swapaxes(jnp.exp(lse - top), 1, 2)[..., None]  # (B, Nq, H, 1)
    return (jax.lax.psum(out * weight, "data") / jax.lax.psum(weight, "data")).astype(q.dtype)


kv_spec = P(None, "data", None, None)
combined = shard_map(split_keys, mesh=mesh, in_specs=(P(), kv_spec, kv_spec), out_specs=P())
(k2, k2_64), (v2, v2_64) = (fresh(B, N + mesh.shape["data"] - 1, HKV, D) for _ in range(2))  # splits evenly
out2, vjp2 = jax.jit(lambda *a: jax.vjp(combined, *a))(q, k2, v2)
want_out2, _, want_grads2 = reference(q64, k2_64, v2_64, False, g64)
errors.update({{"split out": rel(out2, want_out2)}}, **{{f"split d{{n}}": rel(x, w) for n, x, w in zip("qkv", jax.jit(vjp2)(g), want_grads2)}})

# 3. No shard_map: arrays on a mesh of Explicit axes (JAX's sharding in types) and plain jit.
# flashx splits the call over batch and heads itself; out, lse and gradients keep the split.
if hasattr(jax.sharding, "AxisType") and hasattr(jax, "set_mesh"):
    key = jax.random.key(5)  # off the mesh, as the off-mesh call below takes it
    explicit = jax.make_mesh(mesh.devices.shape, ("data", "model"), devices=mesh.devices.flatten(),
                             axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    with jax.set_mesh(explicit):
        placed = [jax.device_put(x, spec) for x in (q, k, v)]
        attend = lambda q, k, v: flashx.jax.attention(q, k, v, causal=True, return_lse=True)  # noqa: E731
        (out, lse), vjp = jax.jit(lambda *a: jax.vjp(attend, *a))(*placed)
        grads = jax.jit(vjp)((jax.device_put(g, spec), jnp.zeros_like(lse)))
        errors.update({{"explicit out": rel(out, want_out), "explicit lse": rel(lse, want_lse)}},
                      **{{f"explicit d{{n}}": rel(x, w) for n, x, w in zip("qkv", grads, want_grads)}})
        assert all(x.sharding.is_equivalent_to(NamedSharding(explicit, spec), 4) for x in (out, *grads)), \
            [jax.typeof(x) for x in (out, *grads)]
        loss = lambda *a: jnp.sum((attend(*a)[0] * g).astype(jnp.float32))  # noqa: E731
        assert "all-gather" not in jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(*placed).compile().as_text()

        # One kv head (MQA), "bhnd", ALiBi slopes: q's heads split, k and v whole on each device.
        (qm, qm64), (km, km64), (vm, vm64) = fresh(B, HQ, N, D), fresh(B, 1, N + 3, D), fresh(B, 1, N + 3, D)
        (gm, gm64), slopes = fresh(B, HQ, N, D), np.abs(rng.standard_normal(HQ)).astype(np.float32)
        attend = lambda q, k, v: flashx.jax.attention(q, k, v, causal=True, layout="bhnd",  # noqa: E731
                                                      alibi_slopes=jnp.asarray(slopes))
        q_spec, kv_spec = P("data", "model", None, None), P("data", None, None, None)
        args = jax.device_put(qm, q_spec), jax.device_put(km, kv_spec), jax.device_put(vm, kv_spec)
        outm, vjpm = jax.jit(lambda *a: jax.vjp(attend, *a))(*args)
        wantm, _, want_gradsm = reference(qm64, km64, vm64, True, gm64, slopes=slopes, layout="bhnd")
        errors.update({{"mqa out": rel(outm, wantm)}},
                      **{{f"mqa d{{n}}": rel(x, w) for n, x, w in zip("qkv", jax.jit(vjpm)(jax.device_put(gm, q_spec)), want_gradsm)}})
        assert outm.sharding.is_equivalent_to(NamedSharding(explicit, q_spec), 4), jax.typeof(outm)

        # Varlen (total, H, D): its heads split, the offsets whole on every device.
        lengths = (N // 3, 2, N - N // 3 - 2)  # two keys at least: with one, dq and dk are exactly 0
        cu = jnp.asarray(np.cumsum((0,) + lengths), jnp.int32)
        (qv, qv64), (kv, kv64), (vv, vv64), (gv, gv64) = (fresh(N, h, D) for h in (HQ, HKV, HKV, HQ))
        packed = lambda q, k, v: flashx.jax.attention(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu,  # noqa: E731
                                                      max_seqlen_q=max(lengths), max_seqlen_k=max(lengths))
        heads_spec = P(None, "model", None)
        outv, vjpv = jax.jit(lambda *a: jax.vjp(packed, *a))(*(jax.device_put(x, heads_spec) for x in (qv, kv, vv)))
        assert outv.sharding.is_equivalent_to(NamedSharding(explicit, heads_spec), 3), jax.typeof(outv)
        got = (outv, *jax.jit(vjpv)(jax.device_put(gv, heads_spec)))
        for i, (start, stop) in enumerate(zip(np.asarray(cu)[:-1], np.asarray(cu)[1:])):
            want_v, _, want_grads_v = reference(*(x[start:stop][None] for x in (qv64, kv64, vv64)), True, gv64[start:stop][None])
            for name, x, w in zip(("out", "dq", "dk", "dv"), got, (want_v, *want_grads_v)):
                errors[f"varlen {{i}} {{name}}"] = rel(np.asarray(x)[start:stop], w[0])

        # A paged GQA decode step: the cache's heads split, the block table and lengths whole on
        # every device; each device packs its q heads as rows of its kv heads (no reshape of a
        # split array outside the split, which JAX's sharding in types refuses).
        page = 8
        (kc, kc64), (vc, vc64), (qd, qd64) = fresh(B + 3, page, HKV, D), fresh(B + 3, page, HKV, D), fresh(B, 1, HQ, D)
        table = rng.permutation(B + 3)[:B].reshape(B, 1).astype(np.int32)  # one page each
        used = rng.integers(1, page + 1, size=B).astype(np.int32)
        heads = P(None, None, "model", None)
        outd = jax.jit(lambda q, k, v: flashx.jax.attention(q, k, v, block_table=jnp.asarray(table),
                                                            seqused_k=jnp.asarray(used), causal=True))(
            *(jax.device_put(x, heads) for x in (qd, kc, vc)))
        assert outd.sharding.is_equivalent_to(NamedSharding(explicit, heads), 4), jax.typeof(outd)
        for b in range(B):
            want_d, _, _ = reference(qd64[b:b + 1], kc64[table[b]][:, :used[b]], vc64[table[b]][:, :used[b]], True,
                                     np.zeros((1, 1, HQ, D)))
            errors[f"paged decode {{b}}"] = rel(np.asarray(outd)[b:b + 1], want_d)

        # Dropout sees the global batch and head index: the call runs whole on every device, its
        # mask that of the same call off the mesh. Two short sequences: each device runs all of it.
        *short, g_short = (x[:2, :N // 3] for x in (q, k, v, g))
        drop = lambda q, k, v: jnp.sum(flashx.jax.attention(q, k, v, dropout_p=0.25, dropout_key=key) * g_short)  # noqa: E731
        on_mesh = jax.jit(jax.value_and_grad(drop, argnums=(0, 1, 2)))(*(jax.device_put(x, spec) for x in short))
    off_mesh = jax.jit(jax.value_and_grad(drop, argnums=(0, 1, 2)))(*short)
    for name, x, y in zip(("loss", "dq", "dk", "dv"), jax.tree_util.tree_leaves(on_mesh), jax.tree_util.tree_leaves(off_mesh)):
        assert np.array_equal(np.asarray(x), np.asarray(y)), f"dropout on the mesh: {{name}} differs from off it"
print(errors)
bad = {{n: e for n, e in errors.items() if not e <= TOLERANCE}}
assert not bad, f"errors above {{TOLERANCE}}: {{bad}}"
print("checked")
"""


_AUTO_MESH_CHECK = """
import os
import sys

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import fast_interpreter  # tests/: the CPU suite's speedup of Triton's interpreter
import flashx.jax
from flashx import core

fast_interpreter.install()

frontend = sys.modules["flashx.jax.attention"]
mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))  # Auto axes: jax.jit of NamedShardings
rng = np.random.default_rng()
B, N, M, D = 4, 37, 41, 24


def fresh(*shape):
    return jnp.asarray(rng.standard_normal(shape), jnp.float32)


def rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def reference_forward(options, q, k, v, bias, aux):
    \"\"\"A plain-JAX stand-in for a launch, with _forward's signature: out and lse (bottom-right
    causal, GQA), so that the partitioner's own arithmetic (which slices, which sums) is what
    the comparison checks.\"\"\"
    if options.layout == "bhnd":
        q, k, v = (jnp.swapaxes(x, 1, 2) for x in (q, k, v))
    k, v = (jnp.repeat(x, q.shape[2] // k.shape[2], axis=2) for x in (k, v))
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * q.shape[-1] ** -0.5
    if options.causal:  # iotas, not NumPy constants: custom_partitioning takes a function without any
        rows = jax.lax.broadcasted_iota(jnp.int32, s.shape, 2) + s.shape[-1] - s.shape[-2]
        s = jnp.where(rows >= jax.lax.broadcasted_iota(jnp.int32, s.shape, 3), s, -jnp.inf)
    lse = jax.nn.logsumexp(s, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", jnp.exp(s - lse[..., None]), v)
    return (jnp.swapaxes(out, 1, 2) if options.layout == "bhnd" else out), lse


def reference_backward(options, q, k, v, bias, aux, out, lse, dout, dlse):
    _, vjp = jax.vjp(lambda q, k, v: reference_forward(options, q, k, v, bias, aux), q, k, v)
    return (*vjp((dout, dlse)), None)


def objective(out, lse):  # a scalar of both outputs, so that both carry cotangents
    return jnp.sum(out * jnp.arange(D)) + jnp.sum(jnp.sin(lse))


frontend._PARTITION_INTERPRETED = True  # the stand-in runs no callback; flashx's own launches only compile
split_forward = frontend._partitioned(backward=False)(reference_forward)
split_backward = frontend._partitioned(backward=True)(reference_backward)
errors = {{}}
cases = [  # (name, layout, Nq, Nkv, Hq, Hkv, q's spec, k's spec, the split the partitioner should take: q's, k's)
    ("gqa", "bnhd", N, M, 4, 2, P("data", None, "model", None), P("data", None, "model", None),
     P("data", None, "model", None), P("data", None, "model", None)),
    ("mqa", "bhnd", N, M, 4, 1, P("data", "model", None, None), P("data", None, None, None),
     P("data", "model", None, None), P("data", None, None, None)),
    ("sequence split gathered", "bnhd", N + 1, M + 1, 4, 4, P(None, "data", "model", None), P(None, "data", "model", None),
     P(None, None, "model", None), P(None, None, "model", None)),
]
for name, layout, nq, nkv, hq, hkv, q_spec, k_spec, want_q, want_k in cases:
    options = core.CallOptions(causal=True, layout=layout)
    q, k, v = (fresh(*((B, n, h, D) if layout == "bnhd" else (B, h, n, D))) for n, h in ((nq, hq), (nkv, hkv), (nkv, hkv)))
    placed = [jax.device_put(x, NamedSharding(mesh, s)) for x, s in zip((q, k, v), (q_spec, k_spec, k_spec))]

    @jax.custom_vjp
    def attend(q, k, v):
        return split_forward(options, q, k, v, None, {{}})

    def attend_fwd(q, k, v):
        out, lse = split_forward(options, q, k, v, None, {{}})
        return (out, lse), (q, k, v, out, lse)

    def attend_bwd(res, cot):
        return split_backward(options, *res[:3], None, {{}}, *res[3:], *cot)[:3]

    attend.defvjp(attend_fwd, attend_bwd)
    split_loss = lambda q, k, v: objective(*attend(q, k, v))  # noqa: E731
    whole_loss = lambda q, k, v: objective(*reference_forward(options, q, k, v, None, {{}}))  # noqa: E731
    with jax.enable_x64():  # float64 references of the same inputs
        wide = [jnp.asarray(np.asarray(x), jnp.float64) for x in (q, k, v)]
        want = jax.value_and_grad(whole_loss, argnums=(0, 1, 2))(*wide)
        want_out, want_lse = (np.asarray(x) for x in reference_forward(options, *wide, None, {{}}))
    out, lse = jax.jit(lambda *a: split_forward(options, *a, None, {{}}))(*placed)
    errors[f"{{name}} out"], errors[f"{{name}} lse"] = rel(out, want_out), rel(lse, want_lse)
    assert out.sharding.is_equivalent_to(NamedSharding(mesh, want_q), 4), (name, out.sharding)
    split_grad = jax.jit(jax.grad(split_loss, argnums=(0, 1, 2)))
    grads = split_grad(*placed)
    for n, g, w in zip("qkv", grads, want[1]):
        errors[f"{{name}} d{{n}}"] = rel(g, w)
    assert grads[1].sharding.is_equivalent_to(NamedSharding(mesh, want_k), 4), (name, grads[1].sharding)
    if name != "sequence split gathered":
        hlo = split_grad.lower(*placed).compile().as_text()
        assert "all-gather" not in hlo, f"{{name}}: the partitioned call gathered its inputs"
        assert ("all-reduce" in hlo) == (name == "mqa"), f"{{name}}: dk and dv summed over the devices only for MQA"

# flashx's own launches (host callbacks into the interpreter: compiled only, see _partitions): each
# device's launches take its slice, with no gather, forward and backward.
q, k, v = fresh(B, N, 4, D), fresh(B, M, 2, D), fresh(B, M, 2, D)
spec = P("data", None, "model", None)
shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, spec)) for x in (q, k, v)]
flashx_loss = lambda q, k, v: jnp.sum(flashx.jax.attention(q, k, v, causal=True))  # noqa: E731
hlo = jax.jit(jax.grad(flashx_loss, argnums=(0, 1, 2))).lower(*shapes).compile().as_text()
assert "all-gather" not in hlo, "flashx's launches gathered their inputs"
launches = [line for line in hlo.splitlines() if "xla_ffi_python_cpu_callback" in line]
assert launches and all(f"f32[{{B // 2}},{{N}},2,{{D}}]" in line or f"f32[{{B // 2}},{{M}},1,{{D}}]" in line for line in launches), launches
# ALiBi's slopes split with the heads; varlen splits its heads; dropout's draw sees the global
# indices, so its call runs whole on every device (its inputs gathered). Forward and backward.
heads = P(None, "model", None)
for name, attend, args, splits in [
    ("alibi", lambda q, k, v, s: flashx.jax.attention(q, k, v, alibi_slopes=s, causal=True),
     [*shapes, jax.ShapeDtypeStruct((4,), jnp.float32, sharding=NamedSharding(mesh, P("model")))], True),
    ("varlen", lambda q, k, v, cu: flashx.jax.attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=N, max_seqlen_k=N),
     [*(jax.ShapeDtypeStruct((2 * N, h, D), jnp.float32, sharding=NamedSharding(mesh, heads)) for h in (4, 2, 2)),
      jax.ShapeDtypeStruct((3,), jnp.int32)], True),
    ("dropout", lambda q, k, v: flashx.jax.attention(q, k, v, dropout_p=0.5, dropout_key=jax.random.key(0)), shapes, False),
]:
    grad = jax.jit(jax.grad(lambda *a: jnp.sum(attend(*a)), argnums=(0, 1, 2))).lower(*args).compile()
    assert ("all-gather" not in grad.as_text()) == splits, name
    assert all(s.is_equivalent_to(NamedSharding(mesh, x.sharding.spec if splits else P()), len(x.shape))
               for s, x in zip(grad.output_shardings, args)), (name, grad.output_shardings)
# Learned (Hq,) slopes: the backward's fifth result, the slopes' per-block parts, splits as lse's
# batch and heads, and XLA sums it over the batch's devices: no gather, the launches on slices.
slopes = jax.ShapeDtypeStruct((4,), jnp.float32, sharding=NamedSharding(mesh, P("model")))
learned_loss = lambda q, k, v, s: jnp.sum(flashx.jax.attention(q, k, v, alibi_slopes=s, causal=True))  # noqa: E731
learned = jax.jit(jax.grad(learned_loss, argnums=(0, 1, 2, 3))).lower(*shapes, slopes).compile()
hlo = learned.as_text()
assert "all-gather" not in hlo, "learned slopes: flashx's launches gathered their inputs"
launches = [line for line in hlo.splitlines() if "xla_ffi_python_cpu_callback" in line]
assert launches and all(f"f32[{{B // 2}},{{N}},2,{{D}}]" in line or f"f32[{{B // 2}},{{M}},1,{{D}}]" in line for line in launches), launches
assert all(s.is_equivalent_to(NamedSharding(mesh, x.sharding.spec), len(x.shape))
           for s, x in zip(learned.output_shardings[:3], shapes)), learned.output_shardings
# With per-sequence lengths the batch stays whole on every device (core.splittable_axes): heads only.
used = jax.ShapeDtypeStruct((B,), jnp.int32)
compiled = jax.jit(lambda q, k, v, used: flashx.jax.attention(q, k, v, seqused_k=used)).lower(*shapes, used).compile()
assert compiled.output_shardings.is_equivalent_to(NamedSharding(mesh, P(None, None, "model", None)), 4), compiled.output_shardings
print(errors)
bad = {{n: e for n, e in errors.items() if not e <= 1e-5}}
assert not bad, f"errors above 1e-5: {{bad}}"
print("checked")
"""


def test_auto_mesh(tmp_path):
    """jax.jit of arrays on a mesh of Auto axes (NamedShardings, the default): the launches split
    over the devices through custom_partitioning (flashx/jax/attention.py: _partitioned), as the
    Explicit-mesh path splits them. In a fresh process with four CPU devices. The partitioner's
    arithmetic is checked by running it around a plain-JAX stand-in for the launches (the
    interpreter's host callbacks do not survive custom_partitioning in JAX): GQA split over
    batch and heads, MQA over q's heads (dk and dv summed over the devices), and a sequence
    split gathered, out, lse and gradients against float64 with the shardings they should keep;
    then flashx's own call compiled: each launch on its slice, no gather (learned ALiBi slopes'
    gradient included), and a call with per-sequence lengths splitting its heads only. Before,
    XLA ran the call on one device."""
    check_in_fresh_process(tmp_path, "auto_mesh_check", _AUTO_MESH_CHECK.format())


@pytest.mark.parametrize("dtype, shape", [
    pytest.param("float32", (2, 37, 53, 4, 2, 24), id="float32-gqa-d24"),
    pytest.param("bfloat16", (2, 300, 700, 8, 2, 128), id="bfloat16-gqa-d128-gpu", marks=pytest.mark.gpu),
])
def test_partitioned_launches(monkeypatch, rng, dtype, shape):
    """The launches wrapped for Auto meshes (_partitioned: custom_partitioning around each
    forward and backward launch), here on this process's devices, where the wrapper lowers its
    function whole: out, lse and gradients of a causal GQA call inside jax.jit against float64.
    On the GPU this runs jax-triton's launches (and the Gluon routes at D = 128) through
    custom_partitioning's trace, which takes no closed-over constants; on the CPU the
    interpreter's host callbacks, which survive it on one device."""
    frontend = sys.modules["flashx.jax.attention"]
    monkeypatch.setattr(frontend, "_partitions", lambda: True)
    b, nq, nkv, hq, hkv, d = shape
    q, k, v = make_inputs(rng, Case(b, nq, nkv, hq, hkv, d, d, causal=True), dtype)
    attend = lambda *a: flashx.jax.attention(*a, causal=True, return_lse=True)  # noqa: E731
    assert "custom_partitioning" in str(jax.make_jaxpr(attend)(q, k, v)), "the launches were not wrapped"
    out, lse = jax.jit(attend)(q, k, v)
    check_against_reference(q, k, v, out, lse, dtype, causal=True)
    checked_gradients(rng, q, k, v, True, dtype)


@pytest.mark.parametrize("dtype, tolerance, shape", [
    pytest.param("float32", 1e-4, (4, 37, 4, 2, 24), id="float32-d24"),
    pytest.param("bfloat16", 2e-2, (4, 300, 4, 2, 64), id="bfloat16-d64-gpu", marks=pytest.mark.gpu),
])
def test_shard_map(tmp_path, dtype, tolerance, shape):
    """Inside jax.shard_map (in a fresh process with four CPU devices; on the GPU a 1 x 1 mesh):
    batch and heads sharded, forward, lse and gradients against float64, no gather; and keys
    split across devices with q invariant, the parts combined through their lse, whose q
    gradient is the psum of the devices'. Before flashx typed its launches' outputs as varying
    where their inputs do, the backward failed there (JAX's check of the gradients' types).
    Then without shard_map, on a mesh of Explicit axes under plain jit: flashx splits the call
    itself (GQA batch and heads; MQA "bhnd" with ALiBi, q's heads split; varlen, its heads split;
    a paged GQA decode step, its heads split and packed on each device), against float64 and keeping the split; a dropout call runs whole on every device, equal to the call off the
    mesh. Before, the forward gathered onto one device and the gradient failed inside JAX."""
    check_in_fresh_process(tmp_path, "shard_map_check", _SHARD_MAP_CHECK.format(dtype=dtype, tolerance=tolerance, shape=shape))
