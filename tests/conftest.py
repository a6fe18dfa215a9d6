"""Shared test helpers: the `gpu` marker, seeded inputs, a float64 reference, error measures, tolerances.

Framework-free on purpose (NumPy only): test_torch.py and test_jax.py convert their arrays to
float64 NumPy and judge them with the same reference and the same tolerances.

Tolerances follow FlashAttention's hopper tests: flashx's error against the float64 reference
must be within a small factor (plus a small floor) of the error the framework's own attention
makes in the same dtype, and under a hard cap per dtype whatever the framework does.
"""
from __future__ import annotations

import os

# JAX must not grab most of the GPU when torch shares the process; set before jax is imported.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import collections  # noqa: E402
import dataclasses  # noqa: E402
import math  # noqa: E402
import zlib  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import NamedTuple, Optional  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import flashx  # noqa: E402, F401  (first: decides compiled vs interpreted before anything loads triton)
from flashx.core import runtime  # noqa: E402

import fast_interpreter  # noqa: E402

INTERPRETED = runtime.INTERPRETER
fast_interpreter.install()  # half the CPU suite's time (see fast_interpreter.py)
DTYPES = ("float32", "float16", "bfloat16")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_configure(config):
    # Expected on every CPU run: flashx's one-time "runs through the interpreter" notice, and NumPy's
    # log2(0) inside the interpreter for rows that see no key (the kernel then selects -inf).
    config.addinivalue_line("filterwarnings", "ignore:flashx. no GPU in use:RuntimeWarning")
    config.addinivalue_line("filterwarnings", "ignore:divide by zero encountered in log2:RuntimeWarning:triton")


def pytest_collection_modifyitems(config, items):
    """Skip `gpu` tests without a CUDA GPU, or when flashx runs through the interpreter anyway."""
    if _cuda_available() and not INTERPRETED:
        return
    reason = "needs a CUDA GPU and compiled kernels" + (" (TRITON_INTERPRET is set)" if _cuda_available() else "")
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def require_sm90(kernels: str = "the Gluon kernels") -> None:
    """Skip the calling GPU test unless every device the driver shows is sm_90, where `kernels`
    (flashx's Gluon ones) run. Asked of the driver, not of flashx's route (runtime.hopper_gluon):
    a test that checks the route ran must not skip when the route is what is wrong."""
    capabilities = runtime.cuda_capabilities()
    if not capabilities or any(c != (9, 0) for c in capabilities):
        pytest.skip(f"{kernels} run on sm_90 devices only")


# ----------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A generator seeded from the test's id: fresh data per test, the same data on every run."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def gradient_launches(calls) -> list:
    """A backward's launches (AttentionPlan.backward_calls) less the preprocess, where it has one."""
    from flashx import core

    return [call for call in calls if call.kernel is not core.plan.attention_backward_preprocess_kernel]


def _count_backward_launches(monkeypatch) -> list:
    """Wraps AttentionPlan.backward_calls: the returned list gets each call's number of gradient
    launches (gradient_launches)."""
    from flashx import core

    counts = []
    backward_calls = core.AttentionPlan.backward_calls

    def counted(self, *args, **kwargs):
        calls = backward_calls(self, *args, **kwargs)
        counts.append(len(gradient_launches(calls)))
        return calls

    monkeypatch.setattr(core.AttentionPlan, "backward_calls", counted)
    return counts


@pytest.fixture
def forward_kernels(monkeypatch) -> list:
    """Wraps AttentionPlan.forward_calls: the returned list gets the kernel of each forward's
    launch that reads Q, K and V (the first)."""
    from flashx import core

    kernels = []
    forward_calls = core.AttentionPlan.forward_calls

    def recorded(self, *args, **kwargs):
        calls = forward_calls(self, *args, **kwargs)
        kernels.append(calls[0].kernel)
        return calls

    monkeypatch.setattr(core.AttentionPlan, "forward_calls", recorded)
    return kernels


@pytest.fixture
def keys_unsplit(monkeypatch):
    """The forward never splits its keys (tuning.KV_SPLIT_MAX = 1). On the GPU a call of fewer
    tiles than ~80% of the SMs takes the split tl forward (tuning.kv_splits, since s68), so a
    test of the Gluon forward on a small grid would test the tl kernel. Plans made before or
    during the test are dropped from the plan cache, so that none outlives the patch."""
    from flashx.core import plan as plan_mod, tuning

    plan_mod.clear_plan_cache()
    monkeypatch.setattr(tuning, "KV_SPLIT_MAX", 1)
    yield
    plan_mod.clear_plan_cache()


@pytest.fixture
def backward_kernels(monkeypatch) -> list:
    """Wraps AttentionPlan.backward_calls: the returned list gets each backward launch's kernel."""
    from flashx import core

    kernels = []
    backward_calls = core.AttentionPlan.backward_calls

    def recorded(self, *args, **kwargs):
        calls = backward_calls(self, *args, **kwargs)
        kernels.extend(call.kernel for call in calls)
        return calls

    monkeypatch.setattr(core.AttentionPlan, "backward_calls", recorded)
    return kernels


@pytest.fixture
def one_backward_launch(monkeypatch) -> list:
    """Plans launch dK/dV's and dQ's programs together wherever the grids allow (no GQA), as the
    GPU tables do at 64 < D <= 128; the interpreter's tiles would launch them apart. Yields the
    number of gradient launches of each backward_calls, for the test to check."""
    from flashx import core

    monkeypatch.setattr(core.AttentionPlan, "fused_backward", property(lambda plan: plan.heads_q == plan.heads_kv))
    return _count_backward_launches(monkeypatch)


@pytest.fixture
def dkdv_two_passes(monkeypatch) -> list:
    """Plans whose dK/dV runs as a dV pass then a dK pass (TileConfig.dkdv_passes = 2), as the
    GPU's D = 256 tiles do; the interpreter's tiles would take one. Yields the number of gradient
    launches of each backward_calls (3: dV, dK, dQ), for the test to check. Plans made before or
    during the test are dropped from the plan cache, so that none outlives the patch. dK/dV and
    dQ launch apart: on the GPU the tables would share one launch at 64 < D <= 128."""
    from flashx import core
    from flashx.core import plan as plan_mod, tuning

    tile_config = tuning.tile_config

    def two_passes(*args, **kwargs):
        return dataclasses.replace(tile_config(*args, **kwargs), dkdv_passes=2)

    plan_mod.clear_plan_cache()
    monkeypatch.setattr(tuning, "tile_config", two_passes)
    monkeypatch.setattr(core.AttentionPlan, "fused_backward", property(lambda plan: False))
    yield _count_backward_launches(monkeypatch)
    plan_mod.clear_plan_cache()


@pytest.fixture
def forward_one_loop(monkeypatch):
    """Plans whose forward tile walks its key blocks in one loop (KernelTiles.one_loop), as the
    GPU's short causal tiles do; the interpreter's tiles would take spans. Plans made before or
    during the test are dropped from the plan cache, so that none outlives the patch."""
    from flashx.core import plan as plan_mod, tuning

    tile_config = tuning.tile_config

    def one_loop(*args, **kwargs):
        tiles = tile_config(*args, **kwargs)
        return dataclasses.replace(tiles, forward=dataclasses.replace(tiles.forward, one_loop=True))

    plan_mod.clear_plan_cache()
    monkeypatch.setattr(tuning, "tile_config", one_loop)
    yield
    plan_mod.clear_plan_cache()


def randn(rng: np.random.Generator, shape, scale: float = 1.0) -> np.ndarray:
    """Standard-normal float32 data (never zeros or ones), times `scale`."""
    return (rng.standard_normal(shape) * scale).astype(np.float32)


class Shape(NamedTuple):
    """Sizes of one call: q (b, nq, hq, d), k (b, nkv, hkv, d), v (b, nkv, hkv, dv)."""

    b: int
    nq: int
    nkv: int
    hq: int
    hkv: int
    d: int
    dv: int


# A Shape's sizes (its seven fields first) with the call's causal flag and layout.
Case = collections.namedtuple("Case", Shape._fields + ("causal", "layout"), defaults=(False, "bnhd"))


# Calls mapped by jax.vmap / torch.func.vmap (test_jax.py, test_torch.py): (case, mapped size,
# in axes: one for all or (q, k, v) with None for shared, out axis).
VMAP_CASES = [
    pytest.param(Case(2, 37, 50, 4, 2, 24, 24, causal=True), 3, 0, 0, id="gqa-causal-all-mapped"),
    pytest.param(Case(1, 29, 29, 2, 1, 40, 16, layout="bhnd"), 2, (0, None, None), 0, id="kv-shared-bhnd"),
    pytest.param(Case(2, 21, 33, 2, 2, 16, 16, causal=True), 3, 2, 1, id="mapped-2-out-1"),
]


def shapes(b, nq, nkv, hq, hkv, d, dv, layout="bnhd"):
    """Shapes of q, k, v in `layout`."""
    if layout == "bnhd":
        return (b, nq, hq, d), (b, nkv, hkv, d), (b, nkv, hkv, dv)
    assert layout == "bhnd", layout
    return (b, hq, nq, d), (b, hkv, nkv, d), (b, hkv, nkv, dv)


def random_qkv(rng, b, nq, nkv, hq, hkv, d, dv, layout="bnhd", scale: float = 1.0):
    """Fresh float32 q, k, v in `layout` (convert to the dtype under test, then reference the rounded values)."""
    return tuple(randn(rng, s, scale) for s in shapes(b, nq, nkv, hq, hkv, d, dv, layout))


# ----------------------------------------------------------------------------------------------
# Reference
# ----------------------------------------------------------------------------------------------


def causal_mask(nq: int, nkv: int) -> np.ndarray:
    """[Nq, Nkv] bool, bottom-right aligned: query i sees key j iff j <= i + Nkv - Nq."""
    return np.arange(nkv)[None, :] <= np.arange(nq)[:, None] + (nkv - nq)


def rows_with_keys(nq: int, nkv: int, causal: bool) -> np.ndarray:
    """[Nq] bool: which query rows see at least one key."""
    if nkv == 0:
        return np.zeros(nq, bool)
    if not causal:
        return np.ones(nq, bool)
    return np.arange(nq) + (nkv - nq) >= 0


def reference_attention(q, k, v, *, causal=False, scale=None, layout="bnhd"):
    """float64 attention on upcast inputs: (out in `layout`, lse (B, Hq, Nq)).

    Explicit bottom-right causal mask, GQA by repeating kv heads; a row that sees no key gives
    out 0 and lse -inf.
    """
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    if layout == "bnhd":  # compute in (B, H, N, D)
        q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
    hq, hkv = q.shape[1], k.shape[1]
    k = np.repeat(k, hq // hkv, axis=1)
    v = np.repeat(v, hq // hkv, axis=1)
    nq, nkv = q.shape[2], k.shape[2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.swapaxes(-1, -2)) * scale
    if causal:
        s = np.where(causal_mask(nq, nkv), s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    out = (p @ v) / np.where(l == 0, 1.0, l)
    with np.errstate(divide="ignore"):
        lse = np.where(l == 0, -np.inf, np.log(l) + m)[..., 0]
    if layout == "bnhd":
        out = out.transpose(0, 2, 1, 3)
    return out, lse


def zero_rows_without_keys(out: np.ndarray, nq: int, nkv: int, causal: bool, layout: str) -> np.ndarray:
    """`out` with rows that see no key set to 0 (frameworks give NaN or a mean there; flashx gives 0).

    Other rows are left alone: a NaN there still fails `rel_error`.
    """
    keep = rows_with_keys(nq, nkv, causal)
    keep = keep[None, :, None, None] if layout == "bnhd" else keep[None, None, :, None]
    return np.where(keep, out, 0.0)


# ----------------------------------------------------------------------------------------------
# Errors and tolerances
# ----------------------------------------------------------------------------------------------


def rel_error(got, want) -> float:
    """Relative Frobenius error ||got - want|| / ||want||; fails on any non-finite element of `got`."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    bad = ~np.isfinite(got)
    assert not bad.any(), f"{int(bad.sum())} non-finite elements (first at {tuple(np.argwhere(bad)[0])})"
    norm = np.linalg.norm(want)
    diff = np.linalg.norm(got - want)
    return float(diff / norm) if norm > 0 else float(diff)


@dataclass(frozen=True)
class Tolerance:
    """Bound on flashx's error: min(factor * native error + floor, cap)."""

    factor: float
    floor: float
    cap: float

    def bound(self, native_error: Optional[float]) -> float:
        if native_error is None:
            return self.cap
        return min(self.factor * native_error + self.floor, self.cap)


# Floors are about a quarter of the dtype's machine epsilon (fp32: a little more). flashx rounds the
# softmax weights to the input dtype before the P @ V product, as FlashAttention does; torch's CPU
# attention keeps them in float32, so in bf16 flashx's error runs at 2-3x torch's there.
TOLERANCES = {
    "float32": Tolerance(factor=3.0, floor=1e-6, cap=2e-5),
    "float16": Tolerance(factor=3.0, floor=2e-4, cap=2e-3),
    "bfloat16": Tolerance(factor=3.0, floor=2e-3, cap=2e-2),
}
# lse is float32 computed from float32 scores whatever the input dtype: judged on its own.
LSE_TOLERANCE = 1e-5


def assert_error_within(err: float, native_error: Optional[float], dtype: str, what: str = "out") -> None:
    """flashx's error `err` must be within the dtype's bound given the framework's `native_error`."""
    bound = TOLERANCES[dtype].bound(native_error)
    native = "n/a" if native_error is None else f"{native_error:.3e}"
    assert err <= bound, f"{what}: flashx error {err:.3e} > bound {bound:.3e} ({dtype}, native error {native})"


def assert_lse_close(got, want) -> None:
    """lse: -inf exactly where the reference has -inf, never NaN/+inf, close elsewhere."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"lse shape {got.shape} != {want.shape}"
    assert not np.isnan(got).any() and not np.isposinf(got).any(), "lse has NaN or +inf"
    empty = np.isneginf(want)
    np.testing.assert_array_equal(np.isneginf(got), empty, err_msg="lse must be -inf exactly on rows that see no key")
    if (~empty).any():
        err = rel_error(got[~empty], want[~empty])
        assert err <= LSE_TOLERANCE, f"lse error {err:.3e} > {LSE_TOLERANCE:.0e}"


def check_in_fresh_process(tmp_path, name: str, script_text: str) -> None:
    """Run a check script (it prints "checked" last) in a fresh Python process with flashx's src
    and tests/ (for fast_interpreter) on its path and its own Triton cache folder."""
    import os
    import subprocess
    import sys

    script = tmp_path / f"{name}.py"  # Triton reads a kernel's source from its file
    script.write_text(script_text)
    env = dict(os.environ)
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    tests = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(os.path.dirname(tests), "src")
    env["PYTHONPATH"] = os.pathsep.join([src, tests] + [p for p in [env.get("PYTHONPATH")] if p])
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("checked"), done.stderr[-3000:]
