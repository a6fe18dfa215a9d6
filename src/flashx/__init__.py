"""flashx: FlashAttention-2-style fused attention written once in Triton, for PyTorch and JAX.

- `flashx.torch.attention` for torch tensors (eager, torch.compile).
- `flashx.jax.attention` for JAX arrays (inside jax.jit).
- `flashx.attention` dispatches on the array type; other DLPack producers (NumPy, CuPy) go
  zero-copy through torch and come back as the caller's type.

Importing `flashx` imports neither torch nor JAX; each frontend imports only its own framework.
"""
from __future__ import annotations

import sys

from . import core  # noqa: F401  (decides compiled vs interpreted before anything imports triton)

__all__ = ["attention"]
__version__ = "0.1.0"


def _framework(name: str, x) -> str:
    """'torch', 'jax' or 'dlpack' for an array, judged without importing any framework."""
    module = type(x).__module__.split(".")[0]
    if module == "torch":
        return "torch"
    if module in ("jax", "jaxlib"):
        return "jax"
    if hasattr(x, "__dlpack__"):
        return "dlpack"
    raise TypeError(f"{name} must be a torch.Tensor, a jax.Array or a DLPack array, got {type(x).__name__}")


def attention(q, k, v, **options):
    """`flashx.torch.attention` or `flashx.jax.attention`, whichever fits q's type.

    Arrays of other DLPack producers (NumPy, CuPy, ...) are viewed as torch tensors without a
    copy, run through the torch frontend, and returned as the producer's own array type; array
    options (alibi_slopes, cu_seqlens_q/k, seqused_q/k, block_table) of that producer are viewed
    the same way.
    Options and shapes are those of `flashx.torch.attention`.
    """
    kind = _framework("q", q)
    for name, x in (("k", k), ("v", v)):
        if _framework(name, x) != kind or (kind == "dlpack" and type(x) is not type(q)):
            raise TypeError(f"q and {name} must be arrays of one kind, got {type(q).__name__} and {type(x).__name__}")
    if kind == "jax":
        from .jax import attention as jax_attention

        return jax_attention(q, k, v, **options)

    import torch

    from .torch import attention as torch_attention

    if kind == "torch":
        return torch_attention(q, k, v, **options)

    def to_torch(name, x):
        # torch aborts the process on a DLPack view with a negative stride (NumPy's x[::-1]).
        if any(stride < 0 for stride in getattr(x, "strides", None) or ()):
            raise ValueError(f"{name} has negative strides {tuple(x.strides)} (a reversed view), which torch cannot "
                             f"share through DLPack: pass a copy (numpy.ascontiguousarray)")
        try:
            return torch.from_dlpack(x)
        except Exception as err:  # e.g. NumPy's ml_dtypes bfloat16, which DLPack cannot carry
            raise TypeError(f"{name} ({type(x).__name__}, dtype {getattr(x, 'dtype', '?')}) cannot be shared through DLPack: {err}") from err

    # Array options of the same producer (not scalars, which stay Python/NumPy numbers).
    options = {name: to_torch(name, x) if type(x) is type(q) and getattr(x, "ndim", 0) >= 1 else x
               for name, x in options.items()}
    result = torch_attention(to_torch("q", q), to_torch("k", k), to_torch("v", v), **options)
    from_dlpack = getattr(sys.modules[type(q).__module__.split(".")[0]], "from_dlpack")
    if isinstance(result, tuple):
        return tuple(from_dlpack(r) for r in result)
    return from_dlpack(result)
