"""Can a Gluon kernel, warp-specialized included, run from JAX inside jax.jit? (A probe.)

jax-triton 0.3.1's triton_call compiles only `tl` kernels (TTIR -> TTGIR), yet what it hands
jaxlib is just PTX, a kernel name, warps and shared memory (`jax._src.lib.gpu_triton.TritonKernel`).
Here its kernel builder (`jax_triton.triton_lib.get_or_create_triton_kernel`, internal) is taught
Gluon: a Gluon function is compiled by `triton.compile` from a GluonASTSource and wrapped the same
way. Two kernels: a plain Gluon add, and one whose `gl.warp_specialize` adds a one-warp worker
partition that marks its program in a second output. Torch launches the plain one as a check.

Run on the H200 (Triton 3.6, jax 0.11.2, jax-triton 0.3.1), 2026-11-30 12:04 UTC:
    JAX gluon plain: OK
    JAX gluon warp-specialized: OK, worker marks 196/196
    torch gluon plain: OK
So the JAX frontend can launch Gluon kernels, worker warps included, as long as they need no
global scratch (device-side TMA descriptors do; metadata.global_scratch_size is 0 for both
here) and no host-side TMA descriptors (jaxlib passes arrays and scalars only).

    python benchmarks/gluon_jax_probe.py            # on a GPU
    python benchmarks/gluon_jax_probe.py --offline  # compile both for sm_90 only (Triton 3.6)
"""
import os
import sys

import numpy as np
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

BLOCK = 512


@gluon.jit
def add_kernel(X, Y, n, OUT, BLOCK: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [gl.num_warps()], [0])
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    m = offs < n
    gl.store(OUT + offs, gl.load(X + offs, mask=m) + gl.load(Y + offs, mask=m), mask=m)


@gluon.jit
def _ws_worker(FLAG, BLOCK: gl.constexpr):
    # one warp: marks its program, so the host can see the worker partition ran
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    lane = gl.arange(0, 32, layout=layout)
    gl.store(FLAG + gl.program_id(0) + lane * 0, gl.program_id(0) + 1, mask=lane == 0)


@gluon.jit
def ws_add_kernel(X, Y, n, OUT, FLAG, BLOCK: gl.constexpr):
    # The default partition runs the plain kernel's body, the worker marks the program.
    gl.warp_specialize([(add_kernel, (X, Y, n, OUT, BLOCK)), (_ws_worker, (FLAG, BLOCK))], [1], [48])


def compile_gluon(fn, signature, constexprs, num_warps=4, cc=90):
    attrs = {(i,): [["tt.divisibility", 16]] for i, (k, v) in enumerate(signature.items()) if v.startswith("*")}
    sig = dict(signature, **{k: "constexpr" for k in constexprs})
    consts = {(list(sig).index(k),): v for k, v in constexprs.items()}
    return triton.compile(GluonASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", cc, 32),
                          options=dict(num_warps=num_warps))


SIG_ADD = {"X": "*fp32", "Y": "*fp32", "n": "i32", "OUT": "*fp32"}
SIG_WS = {"X": "*fp32", "Y": "*fp32", "n": "i32", "OUT": "*fp32", "FLAG": "*i32"}


def offline() -> None:
    for fn, sig in ((add_kernel, SIG_ADD), (ws_add_kernel, SIG_WS)):
        md = compile_gluon(fn, sig, {"BLOCK": BLOCK}).metadata
        print(fn.__name__, "warps", md.num_warps, "shared", md.shared, "global scratch",
              getattr(md, "global_scratch_size", None), "profile scratch", getattr(md, "profile_scratch_size", None))


def teach_jax_triton_gluon() -> None:
    """jax-triton's kernel builder wrapped for Gluon: flashx's own wrapper (src/flashx/jax/gluon.py),
    which grew out of this probe's (the 12:04 UTC run above used the probe's first version)."""
    from flashx.jax import gluon

    assert gluon.install(), "this jax-triton's kernel builder could not be wrapped for Gluon"


def on_gpu() -> None:
    import jax
    import jax.numpy as jnp
    import jax_triton as jt
    import torch

    if os.environ.get("TRITON_CACHE_DIR") == "":  # jax_triton's empty value breaks triton.compile's cache
        del os.environ["TRITON_CACHE_DIR"]
    teach_jax_triton_gluon()
    n = 100_003
    x = jnp.asarray(np.random.rand(n).astype(np.float32))
    y = jnp.asarray(np.random.rand(n).astype(np.float32))
    grid = (triton.cdiv(n, BLOCK),)

    @jax.jit
    def jax_add(x, y):
        return (jt.triton_call(x, y, n, kernel=add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                               grid=grid, num_warps=4, BLOCK=BLOCK),)

    @jax.jit
    def jax_ws_add(x, y):
        shapes = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct((grid[0],), jnp.int32))
        return jt.triton_call(x, y, n, kernel=ws_add_kernel, out_shape=shapes, grid=grid, num_warps=4, BLOCK=BLOCK)

    expected = np.asarray(x) + np.asarray(y)
    for name, run in (("plain", jax_add), ("warp-specialized", jax_ws_add)):
        try:
            outs = run(x, y)
            extra = ""
            if len(outs) > 1:
                marks = int((np.asarray(outs[1]) == np.arange(1, grid[0] + 1)).sum())
                extra = f", worker marks {marks}/{grid[0]}"
            print(f"JAX gluon {name}: {'OK' if np.allclose(np.asarray(outs[0]), expected) else 'WRONG'}{extra}")
        except Exception as e:  # noqa: BLE001
            print(f"JAX gluon {name}: FAILED {type(e).__name__}: {str(e)[:400]}")

    tx, ty = torch.tensor(np.asarray(x), device="cuda"), torch.tensor(np.asarray(y), device="cuda")
    out = torch.empty_like(tx)
    add_kernel[grid](tx, ty, n, out, BLOCK=BLOCK, num_warps=4)
    print("torch gluon plain:", "OK" if torch.allclose(out, tx + ty) else "WRONG")


if __name__ == "__main__":
    offline() if "--offline" in sys.argv else on_gpu()
