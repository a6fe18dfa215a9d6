"""float32_precision: how float32 inputs are multiplied ("tf32x3", the default; "ieee"; "tf32";
"bf16x3"), from both frontends and flashx.attention.

On the GPU each precision's out, dq, dk and dv are checked against float64 attention: "tf32x3" and
"ieee" within float32's bound, "tf32" and "bf16x3" within bounds of their own, "tf32" less exact
than "tf32x3" by far and "bf16x3" between them (so each option reaches the kernels' dots).
Triton's interpreter multiplies float32 in full precision whatever the option, so on the CPU the
tests check validation, the plan's constexpr, and that every option runs and stays correct.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the float64 reference's autograd, and the torch frontend
from conftest import INTERPRETED, TOLERANCES, Case, random_qkv, rel_error  # noqa: E402
from flashx import core  # noqa: E402, I001  (flashx before triton: this module defines a @triton.jit function)
from flashx.core import scores  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from test_variants import reference  # noqa: E402  (the variant tests' float64 reference)

# One tf32 product keeps 10 of float32's 23 mantissa bits: errors of float16's order. The GPU run
# of 2026-12-06 (H100, D = 64-256, N = 2048) read 0.7-4.2e-3 relative (max-abs) against float64.
TF32_BOUND = 2e-2
# "tf32" must read at least this many times "tf32x3"'s error: three orders of magnitude apart there.
TF32_LOSS = 20.0
# Two bfloat16 parts keep about 16 mantissa bits: the H200 run of 2026-12-06 (D = 64-256, N = 2048)
# read 0.5-1.3e-5 relative (max-abs) against float64, 2-20x tf32x3's and ~1/100 of tf32's.
BF16X3_BOUND = 2e-4
# "bf16x3" must read at most this fraction of "tf32"'s error (and differ from "tf32x3"'s results).
BF16X3_GAIN = 0.1

CPU_CASE = Case(1, 37, 45, 4, 2, 32, 32, causal=True)
GPU_CASES = [
    pytest.param(Case(1, 333, 333, 4, 2, 64, 64, causal=True), id="gqa-n333-d64-causal"),
    pytest.param(Case(2, 517, 517, 4, 4, 128, 128), id="n517-d128"),
    pytest.param(Case(1, 300, 300, 4, 1, 256, 256, causal=True), id="mqa-n300-d256-causal"),
]


def _errors(case: Case, results: tuple, arrays: tuple) -> dict:
    """Relative errors of results (out, dq, dk, dv) against float64 attention of arrays (q, k, v, dO)."""
    leaves = [torch.from_numpy(x).double().requires_grad_() for x in arrays[:3]]
    ref_out, _ = reference(*leaves, causal=case.causal)
    ref_grads = torch.autograd.grad(ref_out, leaves, torch.from_numpy(arrays[3]).double())
    return {name: rel_error(got, want.detach().numpy()) for name, got, want in zip(("out", "dq", "dk", "dv"), results,
                                                                                   (ref_out, *ref_grads))}


def _torch_run(case: Case, arrays, precision: str) -> tuple:
    import flashx.torch

    device = "cpu" if INTERPRETED else "cuda"
    q, k, v = (torch.from_numpy(x).to(device).requires_grad_() for x in arrays[:3])
    out = flashx.torch.attention(q, k, v, causal=case.causal, float32_precision=precision)
    grads = torch.autograd.grad(out, (q, k, v), torch.from_numpy(arrays[3]).to(device))
    return tuple(x.detach().cpu().double().numpy() for x in (out, *grads))


def _jax_run(case: Case, arrays, precision: str) -> tuple:
    jax = pytest.importorskip("jax")
    if not INTERPRETED:
        pytest.importorskip("jax_triton", reason="flashx.jax runs through jax-triton on the GPU")
    import flashx.jax

    q, k, v, dout = (jax.numpy.asarray(x) for x in arrays)

    def loss(q, k, v):
        return (flashx.jax.attention(q, k, v, causal=case.causal, float32_precision=precision) * dout).sum()

    out = jax.jit(lambda q, k, v: flashx.jax.attention(q, k, v, causal=case.causal, float32_precision=precision))(q, k, v)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(q, k, v)
    return tuple(np.asarray(x, np.float64) for x in (out, *grads))


def _inputs(rng, case: Case) -> tuple:
    q, k, v = random_qkv(rng, *case[:7])
    dout = rng.standard_normal((case.b, case.nq, case.hq, case.dv)).astype(np.float32)
    return q, k, v, dout


def _check(errors: dict, precision: str, what: str) -> None:
    bound = {"tf32": TF32_BOUND, "bf16x3": BF16X3_BOUND}.get(precision, TOLERANCES["float32"].bound(None))
    for name, err in errors.items():
        assert err <= bound, f"{what} {precision} {name}: error {err:.3e} > {bound:.1e}"


RUNS = {"torch": _torch_run, "jax": _jax_run}


@pytest.mark.parametrize("frontend", ["torch", "jax"])
@pytest.mark.parametrize("precision", core.FLOAT32_PRECISIONS)
def test_each_precision_runs_and_matches_float64(rng, frontend, precision):
    """Every option gives out and gradients within its bound of float64 (on the CPU the interpreter
    multiplies in full float32 whatever the option)."""
    arrays = _inputs(rng, CPU_CASE)
    errors = _errors(CPU_CASE, RUNS[frontend](CPU_CASE, arrays, precision), arrays)
    _check(errors, precision, frontend)


@pytest.mark.gpu
@pytest.mark.parametrize("frontend", ["torch", "jax"])
@pytest.mark.parametrize("case", GPU_CASES)
def test_gpu_precisions(rng, frontend, case):
    """Each option on the GPU against float64: "ieee" and "tf32x3" within float32's bound, "tf32"
    within TF32_BOUND and at least TF32_LOSS times "tf32x3"'s error on out and every gradient,
    "bf16x3" within BF16X3_BOUND, at most BF16X3_GAIN times "tf32"'s error, and not "tf32x3"'s
    results."""
    arrays = _inputs(rng, case)
    results = {p: RUNS[frontend](case, arrays, p) for p in core.FLOAT32_PRECISIONS}
    errors = {p: _errors(case, r, arrays) for p, r in results.items()}
    for precision, errs in errors.items():
        _check(errs, precision, f"{frontend} {case}")
    for name in errors["tf32"]:
        assert errors["tf32"][name] >= TF32_LOSS * errors["tf32x3"][name], (
            f"{frontend} {name}: tf32 error {errors['tf32'][name]:.3e} is not {TF32_LOSS}x tf32x3's "
            f"{errors['tf32x3'][name]:.3e}: did the option reach the dots?")
        assert errors["bf16x3"][name] <= BF16X3_GAIN * errors["tf32"][name], (
            f"{frontend} {name}: bf16x3 error {errors['bf16x3'][name]:.3e} is not under {BF16X3_GAIN} of "
            f"tf32's {errors['tf32'][name]:.3e}")
    assert not all(np.array_equal(a, b) for a, b in zip(results["bf16x3"], results["tf32x3"])), (
        f"{frontend}: bf16x3 gave tf32x3's results: did the option reach the dots?")


def _spec(shape, dtype):
    return core.ArraySpec(shape, core.dense_strides(shape), dtype, "cpu" if INTERPRETED else "cuda:0")


@pytest.mark.parametrize("d", [64, 256])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("precision", core.FLOAT32_PRECISIONS)
def test_plan_passes_the_precision_to_every_kernel(dtype, precision, d):
    """float32 calls take the option as every launch's DOT_PRECISION, forward and backward; 16-bit
    calls ignore it."""
    q = _spec((2, 100, 4, d), dtype)
    plan = core.plan_attention(q, q, q, causal=True, float32_precision=precision)
    forward = [c for c in plan.forward_calls({}, None) if "DOT_PRECISION" in c.constexprs]
    backward = [c for c in plan.backward_calls({}, None, False, q, gluon=False) if "DOT_PRECISION" in c.constexprs]
    assert forward and backward
    # (Triton's interpreter takes no "bf16x3": it multiplies float32 in full, as "ieee" asks. On the
    # GPU, "tf32x3" at D <= 128 splits its operands in flashx's dot: see test_tf32_high_*.)
    want = ("ieee" if INTERPRETED and precision == "bf16x3" else precision) if dtype == "float32" else "tf32"
    if want == "tf32x3" and not INTERPRETED and d <= 128:
        want = core.tuning.TF32X3_BY_INTEGERS
    assert {c.constexprs["DOT_PRECISION"] for c in forward + backward} == {want}


def test_dot_precision_splits_tf32x3_by_integers_only_where_measured(monkeypatch):
    """Off the interpreter, float32 "tf32x3" takes flashx's own split at the widths tuning lists
    (D <= 128) and Triton's above; other precisions and 16-bit inputs pass through."""
    monkeypatch.setattr(core.runtime, "INTERPRETER", False)
    dot_precision = core.tuning.dot_precision
    for block_d in (16, 32, 64, 128):
        assert dot_precision("float32", block_d, "tf32x3") == core.tuning.TF32X3_BY_INTEGERS
    assert dot_precision("float32", 256, "tf32x3") == "tf32x3"
    for precision in ("ieee", "tf32", "bf16x3"):
        assert dot_precision("float32", 64, precision) == precision
    assert dot_precision("bfloat16", 64, "tf32x3") == "tf32"
    monkeypatch.setattr(core.runtime, "INTERPRETER", True)
    assert dot_precision("float32", 64, "tf32x3") == "tf32x3"
    assert dot_precision("float32", 64, "bf16x3") == "ieee"


@triton.jit
def _tf32_high_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    tl.store(out_ptr + offsets, scores._tf32_high(x), mask=offsets < n)


def _tf32_rounded(x: np.ndarray) -> np.ndarray:
    """float32 x rounded to 11 significant bits (tf32), to nearest with ties away from zero, in
    float64 arithmetic: the reference for scores._tf32_high (normal numbers)."""
    mantissa, exponent = np.frexp(x.astype(np.float64))  # |mantissa| in [0.5, 1): 11 bits are 2**11 steps
    scaled = np.abs(mantissa) * 2.0 ** 11
    return (np.sign(mantissa) * np.floor(scaled + 0.5) * 2.0 ** (exponent - 11)).astype(np.float32)


def test_tf32_high_rounds_to_nearest_tf32(rng):
    """scores._tf32_high, the high part of flashx's tf32x3 split, rounds float32 to tf32 to nearest
    (ties away from zero), carries into the exponent, and keeps 0, -0, infinities and NaN; the low
    part x - high is at most half a tf32 step."""
    step = np.float32(2.0 ** -10)  # a tf32 step at exponent 0
    ties = np.array([1 + step / 2, -(1 + step / 2), 1 + 3 * step / 2, 2 - step / 2, 1.5 + step / 4], np.float32)
    wide = (rng.standard_normal(900) * np.exp2(rng.integers(-60, 60, 900))).astype(np.float32)
    normal = np.concatenate([ties, wide, np.float32([3.0e38, 1.2e-38, 0.1, 1 / 3])])
    special = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan])
    x = np.concatenate([normal, special])
    device = "cpu" if INTERPRETED else "cuda"
    x_t = torch.from_numpy(x).to(device)
    out_t = torch.empty_like(x_t)
    _tf32_high_kernel[(1,)](x_t, out_t, x.size, BLOCK=triton.next_power_of_2(x.size))
    high = out_t.cpu().numpy()
    n = normal.size
    np.testing.assert_array_equal(high[:n], _tf32_rounded(normal))
    assert high[:5].tolist() == [1 + step, -(1 + step), 1 + 2 * step, 2.0, 1.5]  # ties away; the carry
    assert np.all(np.abs(normal - high[:n]) <= np.abs(high[:n]) * 2.0 ** -11)
    np.testing.assert_array_equal(high[n:n + 4], special[:4])
    assert np.signbit(high[n + 1]) and np.isnan(high[-1])


BAD_PRECISIONS = [
    pytest.param("highest", ValueError, r"^float32_precision must be one of \('tf32x3', 'ieee', 'tf32', 'bf16x3'\), got 'highest'",
                 id="unknown-name"),
    pytest.param("TF32", ValueError, r"^float32_precision must be one of", id="upper-case"),
    pytest.param("bf16x6", ValueError, r"^float32_precision must be one of", id="triton-bf16x6"),
    pytest.param(None, TypeError, r"^float32_precision must be a str, one of .*got None", id="none"),
    pytest.param(3, TypeError, r"^float32_precision must be a str", id="int"),
]


@pytest.mark.parametrize("precision, error, match", BAD_PRECISIONS)
def test_bad_precision_raises_before_launch(rng, monkeypatch, precision, error, match):
    """A bad float32_precision is a ValueError / TypeError naming it, from both frontends and
    flashx.attention, on float32 and 16-bit inputs alike, before anything is launched."""
    import flashx.torch

    def no_launch(*args, **kwargs):
        raise AssertionError("launched")

    monkeypatch.setattr(core.KernelCall, "launch", no_launch)
    device = "cpu" if INTERPRETED else "cuda"
    for dtype in (torch.float32, torch.bfloat16):
        q = torch.from_numpy(random_qkv(rng, 1, 5, 5, 2, 2, 16, 16)[0]).to(device, dtype)
        with pytest.raises(error, match=match):
            flashx.torch.attention(q, q, q, float32_precision=precision)
        with pytest.raises(error, match=match):
            flashx.attention(q, q, q, float32_precision=precision)
    jax = pytest.importorskip("jax")
    import flashx.jax

    qj = jax.numpy.asarray(random_qkv(rng, 1, 5, 5, 2, 2, 16, 16)[0])
    with pytest.raises(error, match=match):
        flashx.jax.attention(qj, qj, qj, float32_precision=precision)
    with pytest.raises(error, match=match):
        jax.jit(lambda q: flashx.jax.attention(q, q, q, float32_precision=precision))(qj)


def test_torch_compile_carries_the_precision(rng, monkeypatch):
    """Under torch.compile(fullgraph=True) the option reaches every kernel the forward and backward
    ops launch (the interpreter cannot tell precisions apart by their results, so the launches'
    DOT_PRECISION is read), and the gradients equal eager ones bit for bit."""
    import flashx.torch

    seen = []
    launch = core.KernelCall.launch

    def spy(call, *args, **kwargs):
        if "DOT_PRECISION" in call.constexprs:
            seen.append(call.constexprs["DOT_PRECISION"])
        return launch(call, *args, **kwargs)

    monkeypatch.setattr(core.KernelCall, "launch", spy)
    torch._dynamo.reset()
    device = "cpu" if INTERPRETED else "cuda"
    q, k, v = (torch.from_numpy(x).to(device).requires_grad_() for x in random_qkv(rng, 1, 21, 30, 4, 2, 16, 16))

    def loss(q, k, v):
        return (flashx.torch.attention(q, k, v, causal=True, float32_precision="tf32") ** 2).sum()

    grads = torch.autograd.grad(torch.compile(loss, backend="aot_eager", fullgraph=True)(q, k, v), (q, k, v))
    assert len(seen) >= 2 and set(seen) == {"tf32"}, seen  # the forward and the backward's launch(es)
    eager = torch.autograd.grad(loss(q, k, v), (q, k, v))
    for name, got, want in zip("qkv", grads, eager):
        assert torch.equal(got, want), f"d{name} differs between compiled and eager"
