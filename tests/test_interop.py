"""flashx.attention's dispatch on the array type, import isolation, and torch and JAX in one process."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import flashx  # noqa: E402
import flashx.jax  # noqa: E402
import flashx.torch  # noqa: E402
from conftest import INTERPRETED, assert_error_within, assert_lse_close, random_qkv, reference_attention, rel_error  # noqa: E402

DEVICE = "cpu" if INTERPRETED else "cuda"
needs_interpreter = pytest.mark.skipif(not INTERPRETED, reason="NumPy arrays live on the CPU: the interpreter runs them")


def _qkv(rng, *, nq=21, nkv=30, hq=2, hkv=1, d=16, dv=24, layout="bnhd"):
    return random_qkv(rng, 1, nq, nkv, hq, hkv, d, dv, layout=layout)


# ----------------------------------------------------------------------------------------------
# Dispatch
# ----------------------------------------------------------------------------------------------


def test_torch_in_torch_out(rng):
    """torch tensors go to flashx.torch.attention: same type, same bits."""
    q, k, v = (torch.from_numpy(x).to(DEVICE, torch.float16) for x in _qkv(rng))
    out, lse = flashx.attention(q, k, v, causal=True, return_lse=True)
    assert type(out) is torch.Tensor and type(lse) is torch.Tensor
    want_out, want_lse = flashx.torch.attention(q, k, v, causal=True, return_lse=True)
    assert torch.equal(out, want_out) and torch.equal(lse, want_lse)


def test_jax_in_jax_out(rng):
    """jax arrays go to flashx.jax.attention, eagerly and inside jax.jit (tracers): same type, same bits."""
    if not INTERPRETED:
        pytest.importorskip("jax_triton")
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in _qkv(rng))
    out = flashx.attention(q, k, v, causal=True, layout="bnhd")
    assert isinstance(out, jax.Array) and out.dtype == jnp.bfloat16
    jitted = jax.jit(lambda q, k, v: flashx.attention(q, k, v, causal=True))(q, k, v)
    want = flashx.jax.attention(q, k, v, causal=True)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(want))


@needs_interpreter
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("layout", ["bnhd", "bhnd"])
def test_numpy_in_numpy_out(rng, dtype, layout):
    """NumPy arrays run through the torch frontend (via DLPack) and come back as NumPy arrays of the input dtype."""
    q, k, v = (x.astype(dtype) for x in _qkv(rng, layout=layout))
    out, lse = flashx.attention(q, k, v, causal=True, layout=layout, return_lse=True)
    assert type(out) is np.ndarray and out.dtype == dtype and out.shape == (*q.shape[:3], 24)
    assert type(lse) is np.ndarray and lse.dtype == np.float32
    want_out, want_lse = flashx.torch.attention(*map(torch.from_numpy, (q, k, v)), causal=True, layout=layout, return_lse=True)
    np.testing.assert_array_equal(out, want_out.numpy())
    np.testing.assert_array_equal(lse, want_lse.numpy())
    assert type(flashx.attention(q, k, v, layout=layout)) is np.ndarray


@needs_interpreter
def test_numpy_array_options(rng):
    """NumPy alibi slopes and cu_seqlens go through DLPack with q, k, v: the same result as torch's."""
    q, k, v = (x[0] for x in _qkv(rng, nq=21, nkv=21))  # packed varlen: (total, H, D)
    slopes = rng.uniform(0.1, 1.0, size=2).astype(np.float32)
    cu = np.array([0, 8, 21], dtype=np.int32)
    options = dict(alibi_slopes=slopes, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=13, max_seqlen_k=13, causal=True)
    out = flashx.attention(q, k, v, **options)
    assert type(out) is np.ndarray
    as_torch = {n: torch.from_numpy(x) if isinstance(x, np.ndarray) else x for n, x in options.items()}
    want = flashx.torch.attention(*map(torch.from_numpy, (q, k, v)), **as_torch)
    np.testing.assert_array_equal(out, want.numpy())


@needs_interpreter
def test_numpy_strided_views(rng):
    """Non-contiguous NumPy views (a bhnd view of bnhd memory) are read through their strides, correctly."""
    q, k, v = _qkv(rng, nq=33, nkv=33)
    q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
    assert not q.flags.c_contiguous
    out, lse = flashx.attention(q, k, v, causal=True, layout="bhnd", return_lse=True)
    ref_out, ref_lse = reference_attention(q, k, v, causal=True, layout="bhnd")
    assert_error_within(rel_error(out, ref_out), None, "float32")
    assert_lse_close(lse, ref_lse)


@needs_interpreter
def test_numpy_bfloat16_is_rejected(rng):
    """NumPy's ml_dtypes bfloat16 cannot travel through DLPack: TypeError naming q."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    q, k, v = (x.astype(ml_dtypes.bfloat16) for x in _qkv(rng))
    with pytest.raises(TypeError, match=r"\bq\b.*DLPack"):
        flashx.attention(q, k, v)


def _arrays(rng):
    x = _qkv(rng)[0]
    return {"torch": torch.from_numpy(x), "jax": jnp.asarray(x), "numpy": x}


@pytest.mark.parametrize(
    "kinds, name",
    [
        pytest.param(("torch", "jax", "torch"), "k", id="torch-jax"),
        pytest.param(("jax", "jax", "torch"), "v", id="jax-torch"),
        pytest.param(("numpy", "torch", "numpy"), "k", id="numpy-torch"),
        pytest.param(("jax", "numpy", "jax"), "k", id="jax-numpy"),
    ],
)
def test_mixed_array_types_raise(rng, kinds, name):
    """q, k and v of different array types: TypeError naming the odd one out."""
    arrays = _arrays(rng)
    with pytest.raises(TypeError, match=rf"q and {name}.*one kind"):
        flashx.attention(*(arrays[kind] for kind in kinds))


@pytest.mark.parametrize(
    "position",
    [pytest.param(0, id="q-float"), pytest.param(1, id="k-list"), pytest.param(2, id="v-none")],
)
def test_non_array_raises_naming_argument(rng, position):
    """A non-array argument: TypeError whose message names that argument."""
    args = [_arrays(rng)["numpy"]] * 3
    args[position] = (1.0, [[1.0, 2.0]], None)[position]
    name = "qkv"[position]
    with pytest.raises(TypeError, match=rf"\b{name}\b"):
        flashx.attention(*args)


# ----------------------------------------------------------------------------------------------
# Import isolation (fresh interpreters)
# ----------------------------------------------------------------------------------------------


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("before", ["/tmp/flashx-user-cache", None])
def test_importing_jax_triton_keeps_the_triton_cache_dir(tmp_path, before):
    """jax_triton sets TRITON_CACHE_DIR to "" when imported (a stand-in package here does the
    same, since the real one needs a GPU build of JAX): flashx's import of it gives back the
    user's folder, or leaves the variable unset where there was none (Triton's default)."""
    package = tmp_path / "jax_triton"
    package.mkdir()
    (package / "__init__.py").write_text('import os\nos.environ["TRITON_CACHE_DIR"] = ""\n')
    out = _run(
        f"""
        import os, sys
        sys.path.insert(0, {str(tmp_path)!r})
        before = {before!r}
        if before is not None:
            os.environ["TRITON_CACHE_DIR"] = before
        else:
            os.environ.pop("TRITON_CACHE_DIR", None)
        from flashx.jax import gluon
        module = gluon.import_jax_triton()
        assert module.__file__.startswith({str(tmp_path)!r}), module.__file__
        print(repr(os.environ.get("TRITON_CACHE_DIR")))
        """
    )
    assert out == repr(before)


@pytest.mark.parametrize(
    "module, absent",
    [
        pytest.param("flashx", ("torch", "jax", "jaxlib"), id="flashx"),
        pytest.param("flashx.torch", ("jax", "jaxlib"), id="flashx.torch"),
        pytest.param("flashx.jax", ("torch",), id="flashx.jax"),
    ],
)
def test_import_isolation(module, absent):
    """Importing flashx imports neither framework; each frontend imports only its own."""
    loaded = _run(
        f"""
        import sys, {module}
        print(",".join(m for m in {absent!r} if m in sys.modules))
        """
    )
    assert loaded == "", f"importing {module} imported {loaded}"


@needs_interpreter
def test_numpy_call_does_not_import_jax():
    """flashx.attention on NumPy arrays goes through torch alone."""
    loaded = _run(
        """
        import sys, warnings
        import numpy as np, flashx
        warnings.simplefilter("ignore")
        rng = np.random.default_rng(0)
        q, k, v = (rng.standard_normal((1, 5, 2, 16)).astype(np.float32) for _ in range(3))
        assert type(flashx.attention(q, k, v)) is np.ndarray
        print(",".join(m for m in ("jax", "jaxlib") if m in sys.modules))
        """
    )
    assert loaded == ""


# ----------------------------------------------------------------------------------------------
# torch, then JAX, then torch again in one process
# ----------------------------------------------------------------------------------------------


# Sequence lengths: small for the interpreter, a few tiles of 128 on the GPU.
NQ, NKV = (45, 37) if INTERPRETED else (300, 257)


def _torch_call(rng, d):
    q, k, v = (torch.from_numpy(x).to(DEVICE, torch.float16) for x in _qkv(rng, nq=NQ, nkv=NKV, hq=4, hkv=2, d=d, dv=d))
    out = flashx.torch.attention(q, k, v, causal=True)
    ref, _ = reference_attention(*(x.cpu().double().numpy() for x in (q, k, v)), causal=True)
    assert_error_within(rel_error(out.cpu().double().numpy(), ref), None, "float16", f"torch d={d}")


def _jax_call(rng):
    q, k, v = (jnp.asarray(x, jnp.float16) for x in _qkv(rng, nq=NQ, nkv=NKV, hq=4, hkv=2, d=64, dv=64))
    out = jax.jit(lambda q, k, v: flashx.jax.attention(q, k, v, causal=True))(q, k, v)
    ref, _ = reference_attention(*(np.asarray(x, np.float64) for x in (q, k, v)), causal=True)
    assert_error_within(rel_error(np.asarray(out, np.float64), ref), None, "float16", "jax")


def _torch_then_jax_then_torch(rng):
    _torch_call(rng, d=64)
    _jax_call(rng)
    # A head dim not compiled before: the torch frontend must compile (and cache) anew after JAX ran.
    _torch_call(rng, d=96)


@needs_interpreter
def test_torch_then_jax_then_torch_cpu(rng):
    """Both frontends work in one process, in either order (CPU interpreter)."""
    _torch_then_jax_then_torch(rng)


@pytest.mark.gpu
def test_torch_then_jax_then_torch_gpu():
    """On the GPU, in a fresh process: torch, then JAX through jax-triton (whose import empties
    TRITON_CACHE_DIR), then torch compiling a new kernel variant; all correct."""
    pytest.importorskip("jax_triton")
    if jax.default_backend() != "gpu":
        pytest.skip("JAX has no GPU backend here")
    out = _run(
        f"""
        import os, sys
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import numpy as np
        import test_interop
        test_interop._torch_then_jax_then_torch(np.random.default_rng(0))
        assert "jax_triton" in sys.modules
        print("ok")
        """
    )
    assert out.endswith("ok")
