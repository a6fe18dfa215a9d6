"""flashx on nested (jagged) tensors: torch.nested's variable-length batches as flashx's varlen call.

A jagged q (B, j, Hq, D) in layout "bnhd" (ragged dim 1), or (B, Hq, j, D) in "bhnd" (ragged dim
2, as SDPA takes them), holds its sequences packed in values() with offsets(): exactly flashx's
varlen inputs (total, H, D) with cu_seqlens. The call runs on those, and out comes back jagged
like q, autograd through torch.nested's own values() / nested_tensor_from_jagged.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

_RAGGED_DIM = {"bnhd": 1, "bhnd": 2}
_VARLEN = ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")  # the offsets' part of a call


def any_nested(*tensors) -> bool:
    return any(isinstance(t, torch.Tensor) and t.is_nested for t in tensors)


def _packed(name: str, x, layout: str):
    """x's values as (total, H, D) and its offsets (int32), checking that x is jagged along the
    sequence dim of `layout`."""
    if not (isinstance(x, torch.Tensor) and x.is_nested):
        raise TypeError(f"{name} must be a nested tensor like the others, or none of them: got a dense {type(x).__name__}")
    if x.layout is not torch.jagged or x.dim() != 4 or x._ragged_idx != _RAGGED_DIM.get(layout):
        raise ValueError(f"{name}: nested tensors must be torch.jagged, 4-D and ragged along the sequence dim "
                         f"(dim 1 for layout 'bnhd', 2 for 'bhnd'), got layout {x.layout}, shape {tuple(x.shape)}")
    values = x.values()
    return (values if layout == "bnhd" else values.transpose(0, 1)), x.offsets()


def _longest(x, offsets) -> int:
    cached = getattr(x, "_maybe_max_seqlen", None)  # torch.nested keeps it where it is known
    return int(cached) if cached is not None else int((offsets[1:] - offsets[:-1]).max())


def attention_on_nested(attend: Callable, q, k, v, keywords: Mapping[str, Any], return_lse: bool):
    """attend on the packed values of jagged q, k, v (see the module's docstring): out jagged like
    q, lse (Hq, total_q) as the varlen call returns it."""
    layout = keywords.get("layout", "bnhd")
    given = [n for n in _VARLEN if keywords.get(n) is not None]
    if given:
        raise ValueError(f"{given[0]} must be None for nested q, k, v: their offsets give it")
    (q_values, q_offsets), (k_values, k_offsets), (v_values, v_offsets) = (
        _packed(n, x, layout) for n, x in (("q", q), ("k", k), ("v", v)))
    if v_offsets is not k_offsets and not torch.equal(v_offsets, k_offsets):
        raise ValueError("v must have k's sequence lengths (the same offsets)")
    longest_q = _longest(q, q_offsets)
    keywords = {n: x for n, x in keywords.items() if n not in _VARLEN}
    out, lse = attend(q_values, k_values, v_values, **{**keywords, "layout": "bnhd"},
                      cu_seqlens_q=q_offsets.to(torch.int32), cu_seqlens_k=k_offsets.to(torch.int32),
                      max_seqlen_q=longest_q, max_seqlen_k=_longest(k, k_offsets), return_lse=True)
    out = torch.nested.nested_tensor_from_jagged(out, q_offsets, max_seqlen=longest_q)
    out = out if layout == "bnhd" else out.transpose(1, 2)
    return (out, lse) if return_lse else out
