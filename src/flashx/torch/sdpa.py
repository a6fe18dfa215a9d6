"""`flashx.torch.scaled_dot_product_attention`: torch.nn.functional's signature and semantics, flashx's kernel."""
from __future__ import annotations

from typing import Optional

import torch

from .. import core
from .attention import _run


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: Optional[torch.Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """Drop-in for torch.nn.functional.scaled_dot_product_attention.

    query (B, H, Nq, E) or (H, Nq, E), key (B, Hkv, Nkv, E), value (B, Hkv, Nkv, Ev); Hkv < H
    needs enable_gqa=True. is_causal is top-left aligned, as in torch (query i sees keys
    j <= i). attn_mask: bool (True takes part) or additive float, broadcastable to
    (B, H, Nq, Nkv); a float mask that requires grad gets its gradient. A row that sees no key
    gives 0. Dropout is not implemented yet.
    """
    if dropout_p != 0.0:
        raise NotImplementedError("flashx has no dropout yet: dropout_p must be 0.0")
    if not isinstance(enable_gqa, bool):
        raise TypeError(f"enable_gqa must be a bool, got {type(enable_gqa).__name__}")
    if attn_mask is not None and is_causal:
        raise ValueError("attn_mask and is_causal=True cannot be combined (as in torch)")
    squeeze = isinstance(query, torch.Tensor) and query.dim() == 3
    if squeeze:
        query, key, value = (x.unsqueeze(0) if isinstance(x, torch.Tensor) else x for x in (query, key, value))
    if not enable_gqa and all(isinstance(x, torch.Tensor) and x.dim() == 4 for x in (query, key)) and query.shape[1] != key.shape[1]:
        raise ValueError(f"query has {query.shape[1]} heads and key {key.shape[1]}: pass enable_gqa=True for GQA")
    bias = mask = None
    if attn_mask is not None:
        if not isinstance(attn_mask, torch.Tensor):
            raise TypeError(f"attn_mask must be a torch.Tensor, got {type(attn_mask).__name__}")
        if attn_mask.dtype == torch.bool:
            mask = attn_mask
        else:
            bias = attn_mask
    options = core.CallOptions(causal=is_causal, scale=scale, layout="bhnd", bottom_right=False)
    out = _run(query, key, value, {"MASK": mask}, options, False, bias=bias)
    return out.squeeze(0) if squeeze else out
