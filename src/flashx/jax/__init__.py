"""JAX frontend of flashx: `flashx.jax.attention`, usable inside `jax.jit`."""
from .attention import attention

__all__ = ["attention"]
