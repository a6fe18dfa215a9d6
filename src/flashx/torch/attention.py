"""flashx attention for PyTorch tensors: eager, and torch.compile through a torch.library op."""
from __future__ import annotations

import contextlib
from typing import Optional, Union

import torch

from .. import core


def _spec(name: str, x) -> core.ArraySpec:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return core.ArraySpec(
        shape=tuple(x.shape),
        strides=tuple(x.stride()),
        dtype=str(x.dtype).removeprefix("torch."),
        device=str(x.device),
    )


def _plan(q, k, v, causal, scale, layout) -> core.ForwardPlan:
    return core.plan_forward(_spec("q", q), _spec("k", k), _spec("v", v), causal=causal, scale=scale, layout=layout)


@torch.library.custom_op("flashx::attention_forward", mutates_args=())
def _attention_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: Optional[float], layout: str
) -> tuple[torch.Tensor, torch.Tensor]:
    plan = _plan(q, k, v, causal, scale, layout)
    out = torch.empty(plan.out_shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(plan.lse_shape, dtype=torch.float32, device=q.device)
    if plan.needs_launch:
        # Triton launches on the current CUDA device: make it q's.
        with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
            core.launch(core.attention_forward_kernel, plan, q, k, v, out, lse)
    return out, lse


@_attention_forward.register_fake
def _(q, k, v, causal, scale, layout):
    plan = _plan(q, k, v, causal, scale, layout)
    return q.new_empty(plan.out_shape), q.new_empty(plan.lse_shape, dtype=torch.float32)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    layout: str = "bnhd",
    return_lse: bool = False,
) -> Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Fused softmax(q k^T * scale) v.

    Args:
        q: (B, Nq, Hq, D) for layout "bnhd", (B, Hq, Nq, D) for "bhnd".
        k: (B, Nkv, Hkv, D), Hq a multiple of Hkv (GQA/MQA: q head h reads kv head h // (Hq // Hkv)).
        v: (B, Nkv, Hkv, Dv).
        causal: bottom-right aligned: query i sees key j iff j <= i + Nkv - Nq.
        scale: defaults to 1 / sqrt(D).
        layout: "bnhd" or "bhnd"; any strides are accepted, no copy is made.
        return_lse: also return the float32 log-sum-exp, (B, Hq, Nq).

    Returns:
        out in q's layout and dtype, last dim Dv; and lse if return_lse.
    """
    if not isinstance(return_lse, bool):
        raise TypeError(f"return_lse must be a bool, got {type(return_lse).__name__}")
    _plan(q, k, v, causal, scale, layout)  # validate with argument names before dispatch
    out, lse = _attention_forward(q, k, v, causal, scale, layout)
    return (out, lse) if return_lse else out
