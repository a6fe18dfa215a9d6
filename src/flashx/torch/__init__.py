"""PyTorch frontend of flashx: `flashx.torch.attention`."""
from .attention import attention

__all__ = ["attention"]
