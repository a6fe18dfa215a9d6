"""PyTorch frontend of flashx: `flashx.torch.attention`, its block masks and the SDPA drop-in."""
from .attention import attention, create_block_mask
from .sdpa import scaled_dot_product_attention

__all__ = ["attention", "create_block_mask", "scaled_dot_product_attention"]
