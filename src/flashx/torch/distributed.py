"""flashx on DTensors (torch.distributed.tensor): each rank attends over its slice.

The kernels take plain tensors. A call on DTensors redistributes q, k and v to the split over
batch and heads that core.device_split gives for their placements, runs flashx on each rank's local
tensors, and wraps out and lse as DTensors split the same way; autograd runs through DTensor's
own redistribute / to_local / from_local. Anything else (a split along the sequence or head dim,
a Partial placement) is gathered first; a call that sees the global batch or head index runs
whole on every rank.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Mapping

from .. import core


def dtensor_type():
    """torch.distributed.tensor.DTensor where that module is loaded (a DTensor exists only then)."""
    return getattr(sys.modules.get("torch.distributed.tensor"), "DTensor", None)


def any_dtensor(*tensors) -> bool:
    dtensor = dtensor_type()
    return dtensor is not None and any(isinstance(t, dtensor) for t in tensors)


def attention_on_dtensors(attend: Callable, plan_of: Callable, q, k, v, keywords: Mapping[str, Any],
                          tensors: Mapping[str, Any], return_lse: bool):
    """attend(q, k, v, **keywords, **tensors' keywords, return_lse=True) on each rank's slice of the
    DTensors q, k, v (see the module's docstring), out (and lse) as DTensors.

    tensors: the optional tensor arguments by keyword (alibi_slopes, cu_seqlens_q, ...): DTensors
    on q's mesh or plain tensors, which every rank must hold whole and equal. plan_of(q, k, v,
    tensors by kernel name) validates the global call and returns its plan."""
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, DTensor):
            raise TypeError(f"{name} must be a DTensor like q, k and v, or none of them: got {type(x).__name__}")
    mesh = q.device_mesh
    for name, x in (("k", k), ("v", v), *((n, t) for n, t in tensors.items() if isinstance(t, DTensor))):
        if x.device_mesh != mesh:
            raise ValueError(f"{name} must be on q's device mesh {mesh}, got {x.device_mesh}")
    if core.check_dropout_p(keywords.get("dropout_p", 0.0)) > 0:
        raise ValueError("dropout_p > 0 on DTensors is not supported: each rank would draw its own mask; call "
                         "flashx on the local tensors (DTensor.to_local) with generators seeded alike")
    replicated = (Replicate(),) * mesh.ndim
    whole = {n: t if isinstance(t, DTensor) or t is None else DTensor.from_local(t, mesh, replicated, run_check=False)
             for n, t in tensors.items()}
    by_kernel_name = {_KERNEL_NAMES[n]: t for n, t in whole.items() if t is not None}
    plan = plan_of(q, k, v, by_kernel_name)
    # Each mesh dim, with the dims of q and k its placements split (torch's order: dim 0 major).
    mesh_axes = [(dim, mesh.size(dim), *(p.dim if isinstance(p, Shard) else None for p in (pq, pk)))
                 for dim, (pq, pk) in enumerate(zip(q.placements, k.placements))]
    split = core.device_split(plan, core_options(keywords), {n: tuple(t.shape) for n, t in by_kernel_name.items()},
                              mesh_axes)

    def places(dim_of):
        return tuple(Replicate() if dim not in split or dim_of(split[dim]) is None else Shard(dim_of(split[dim]))
                     for dim in range(mesh.ndim))

    q_places, kv_places, lse_places = places(lambda s: s.q_dim), places(lambda s: s.kv_dim), places(lambda s: s.lse_dim)
    slopes_places = places(lambda s: 0 if s.heads else None)  # per-head slopes (Hq,) split with q's heads

    def local(x, placements, grad_placements=None):
        return x.redistribute(mesh, placements).to_local(grad_placements=grad_placements)

    # Where only q is split (MQA's heads), each rank's dK and dV are its q heads' part of the sum;
    # where the batch is split, each rank's gradient of whole (Hq,) slopes is its batch's part.
    kv_grad_places = tuple(Partial() if dim in split and split[dim].kv_dim is None else p
                           for dim, p in enumerate(kv_places))
    slopes_grad_places = tuple(Partial() if dim in split and not split[dim].heads else p
                               for dim, p in enumerate(slopes_places))
    local_tensors = {n: None if t is None else local(t, slopes_places, slopes_grad_places) if n == "alibi_slopes"
                     else local(t, replicated) for n, t in whole.items()}
    out, lse = attend(local(q, q_places), local(k, kv_places, kv_grad_places), local(v, kv_places, kv_grad_places),
                      **keywords, **local_tensors, return_lse=True)
    out = DTensor.from_local(out, mesh, q_places, run_check=False)
    lse = DTensor.from_local(lse, mesh, lse_places, run_check=False)
    return (out, lse) if return_lse else out


# The optional tensors' kernel argument names, by attention keyword.
_KERNEL_NAMES = {keyword: name for name, keyword in core.plan.ARRAY_KEYWORDS.items()}


def core_options(keywords: Mapping[str, Any]) -> core.CallOptions:
    """The CallOptions of attention's keyword arguments (those CallOptions holds)."""
    fields = core.CallOptions.__dataclass_fields__
    options = {n: v for n, v in keywords.items() if n in fields}
    if isinstance(options.get("window"), list):
        options["window"] = tuple(options["window"])
    if isinstance(options.get("block_mask"), core.BlockMask):
        options["block_mask"] = options["block_mask"].spec
    return core.CallOptions(**options)
