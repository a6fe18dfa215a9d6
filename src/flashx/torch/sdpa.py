"""`flashx.torch.scaled_dot_product_attention`: torch.nn.functional's signature and semantics, flashx's kernel."""
from __future__ import annotations

from typing import Optional

import torch

from .. import core
from . import distributed as _distributed
from . import nested as _nested
from .attention import _autocast, _run, attention

# The core validates under its own argument names; core.errors_named re-raises its errors under
# this function's (query, not q). The layout is the drop-in's choice, not the caller's: dropped from messages.
_CORE_NAMES = {"q": "query", "k": "key", "v": "value", "causal": "is_causal", "bias": "attn_mask",
               "mask": "attn_mask", " (layout 'bhnd')": ""}


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
    gives 0. dropout_p drops weights as flashx.torch.attention's does (torch's generator on the
    query's device). Under torch.autocast the tensors (a float attn_mask too) are cast to its
    dtype first, as torch casts its own.
    """
    dropout_p = core.check_dropout_p(dropout_p)  # [0, 1): torch's 1.0 (every weight dropped) is refused
    if not isinstance(enable_gqa, bool):
        raise TypeError(f"enable_gqa must be a bool, got {type(enable_gqa).__name__}")
    if attn_mask is not None and is_causal:
        raise ValueError("attn_mask and is_causal=True cannot be combined (as in torch)")
    query, key, value, attn_mask = _autocast(query, key, value, attn_mask)
    # (H, N, E) inputs are the drop-in's own (the core takes 4-D ones): the ranks are checked here,
    # before the unsqueeze, which the core's messages must not show.
    if isinstance(query, torch.Tensor):
        if query.dim() not in (3, 4):
            raise ValueError(f"query must be 3-D (H, Nq, E) or 4-D (B, H, Nq, E), got shape {tuple(query.shape)}")
        for name, x in (("key", key), ("value", value)):
            if isinstance(x, torch.Tensor) and x.dim() != query.dim():
                raise ValueError(f"{name} must be {query.dim()}-D like query {tuple(query.shape)}, got shape {tuple(x.shape)}")
    names = dict(_CORE_NAMES)
    squeeze = isinstance(query, torch.Tensor) and query.dim() == 3
    if squeeze:
        for core_name, name, x in zip("qkv", ("query", "key", "value"), (query, key, value)):
            if isinstance(x, torch.Tensor):  # the core's "q (1, H, N, E)" is the caller's "query (H, N, E)"
                names[f"{core_name} {(1, *x.shape)}"] = f"{name} {tuple(x.shape)}"
        if isinstance(key, torch.Tensor) and key.dim() == 3:  # attn_mask's target, as the caller sees it
            scores_shape = (query.shape[0], query.shape[1], key.shape[1])
            names[str((1, *scores_shape))] = str(scores_shape)
        query, key, value = (x.unsqueeze(0) if isinstance(x, torch.Tensor) else x for x in (query, key, value))
    if not enable_gqa and all(isinstance(x, torch.Tensor) and x.dim() == 4 for x in (query, key)) and query.shape[1] != key.shape[1]:
        raise ValueError(f"query has {query.shape[1]} heads and key {key.shape[1]}: pass enable_gqa=True for GQA")
    if not (type(query) is type(key) is type(value) is torch.Tensor) and (
            _distributed.any_dtensor(query, key, value, attn_mask) or _nested.any_nested(query, key, value)):
        kind = "nested tensors" if _nested.any_nested(query, key, value) else "DTensors"
        # Nq == Nkv: for nested tensors, the same offsets (torch gives them the same ragged size).
        if attn_mask is not None or (is_causal and query.shape[-2] != key.shape[-2]):
            raise TypeError(f"scaled_dot_product_attention on {kind} takes no attn_mask, and is_causal only where "
                            "Nq == Nkv (torch's top-left causal is flashx's bottom-right there); use "
                            "flashx.torch.attention")
        out = attention(query, key, value, causal=is_causal, scale=scale, layout="bhnd", dropout_p=dropout_p)
        return out.squeeze(0) if squeeze else out
    bias = mask = None
    if attn_mask is not None:
        if not isinstance(attn_mask, torch.Tensor):
            raise TypeError(f"attn_mask must be a torch.Tensor, got {type(attn_mask).__name__}")
        if attn_mask.dtype == torch.bool:
            mask = attn_mask
        elif attn_mask.is_floating_point():
            bias = attn_mask
        else:  # torch's rule: bool (which keys take part) or float (added to the scores)
            raise TypeError(f"attn_mask must be bool or a float dtype, got {attn_mask.dtype}")
    options = core.CallOptions(causal=is_causal, scale=scale, layout="bhnd", bottom_right=False, dropout_p=dropout_p)
    with core.errors_named(names):  # (a GQA decode step packs its heads there, as attention's)
        out = _run(query, key, value, {"MASK": mask}, options, False, bias=bias)
    return out.squeeze(0) if squeeze else out
