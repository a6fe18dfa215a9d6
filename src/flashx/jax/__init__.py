"""JAX frontend of flashx: `flashx.jax.attention` (inside jax.jit, differentiable), its block masks and the jax.nn drop-in."""
from .attention import attention, create_block_mask
from .nn import dot_product_attention

__all__ = ["attention", "create_block_mask", "dot_product_attention"]
