"""flashx attention for JAX arrays: jax-triton's `triton_call` on the GPU, Triton's interpreter on the CPU."""
from __future__ import annotations

import warnings
from typing import Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from .. import core

_jax_triton = None


def _triton_call(*args, **kwargs):
    """jax_triton.triton_call, imported on first use: it needs a GPU build of JAX."""
    global _jax_triton
    if _jax_triton is None:
        import jax_triton

        _jax_triton = jax_triton
        # Importing jax_triton empties TRITON_CACHE_DIR, which breaks plain Triton launches
        # (the torch frontend) later in this process.
        core.runtime.repair_triton_cache_dir()
    return _jax_triton.triton_call(*args, **kwargs)


def _spec(name: str, x) -> core.ArraySpec:
    if not isinstance(x, jax.Array):
        raise TypeError(f"{name} must be a jax.Array, got {type(x).__name__}")
    # JAX arrays are dense and row-major; inside jit the backend stands for the device.
    return core.ArraySpec(
        shape=tuple(x.shape),
        strides=core.dense_strides(x.shape),
        dtype=str(x.dtype),
        device="cpu" if jax.default_backend() == "cpu" else "cuda",
    )


def _to_torch(a: np.ndarray):
    """A zero-copy torch view of a host buffer, for Triton's interpreter (which runs on torch tensors)."""
    import torch

    a = np.ascontiguousarray(a)
    with warnings.catch_warnings():  # callback buffers are read-only; the kernel only writes outputs
        warnings.simplefilter("ignore", UserWarning)
        if a.dtype.name == "bfloat16":  # ml_dtypes' bfloat16 has no DLPack or torch.from_numpy route
            return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16)
        return torch.from_numpy(a)


def _interpreted_forward(plan: core.ForwardPlan, q, k, v, out_type, lse_type):
    def run_on_host(q, k, v):
        out = np.empty(out_type.shape, out_type.dtype)
        lse = np.empty(lse_type.shape, lse_type.dtype)
        core.launch(core.attention_forward_kernel, plan, *map(_to_torch, (q, k, v, out, lse)))
        return out, lse

    return jax.pure_callback(run_on_host, (out_type, lse_type), q, k, v, vmap_method="sequential")


def _forward(q, k, v, causal, scale, layout):
    plan = core.plan_forward(_spec("q", q), _spec("k", k), _spec("v", v), causal=causal, scale=scale, layout=layout)
    out_type = jax.ShapeDtypeStruct(plan.out_shape, q.dtype)
    lse_type = jax.ShapeDtypeStruct(plan.lse_shape, jnp.float32)
    if not plan.needs_launch:
        return jnp.zeros(out_type.shape, out_type.dtype), jnp.zeros(lse_type.shape, lse_type.dtype)
    if plan.interpret:
        return _interpreted_forward(plan, q, k, v, out_type, lse_type)
    return _triton_call(
        q, k, v, *plan.scalar_args(),
        kernel=core.attention_forward_kernel,
        out_shape=(out_type, lse_type),
        grid=plan.grid,
        **plan.launch_options,
        **plan.constexprs,
    )


def attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    layout: str = "bnhd",
    return_lse: bool = False,
) -> Union[jax.Array, tuple[jax.Array, jax.Array]]:
    """Fused softmax(q k^T * scale) v; works eagerly and inside `jax.jit`.

    Args:
        q: (B, Nq, Hq, D) for layout "bnhd", (B, Hq, Nq, D) for "bhnd".
        k: (B, Nkv, Hkv, D), Hq a multiple of Hkv (GQA/MQA: q head h reads kv head h // (Hq // Hkv)).
        v: (B, Nkv, Hkv, Dv).
        causal: bottom-right aligned: query i sees key j iff j <= i + Nkv - Nq.
        scale: defaults to 1 / sqrt(D).
        layout: "bnhd" or "bhnd".
        return_lse: also return the float32 log-sum-exp, (B, Hq, Nq).

    Returns:
        out in q's layout and dtype, last dim Dv; and lse if return_lse.
    """
    if not isinstance(return_lse, bool):
        raise TypeError(f"return_lse must be a bool, got {type(return_lse).__name__}")
    out, lse = _forward(q, k, v, causal, scale, layout)
    return (out, lse) if return_lse else out
