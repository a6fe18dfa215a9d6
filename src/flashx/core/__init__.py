"""Framework-free core of flashx: the Triton kernels and the plan that launches them.

Imports triton and the standard library only; the frontends (flashx.torch, flashx.jax)
turn their arrays into `ArraySpec`s, ask for a plan and launch the calls it returns.
"""
from . import compile_hook, launch, runtime, tuning
from .plan import (
    ArraySpec,
    AttentionPlan,
    BlockMask,
    BlockMaskSpec,
    CallOptions,
    KernelCall,
    block_map_calls,
    FLOAT32_PRECISIONS,
    check_dropout_p,
    check_flag,
    check_float32_precision,
    dense_strides,
    errors_named,
    folds_mapped_axis,
    packed_query_heads,
    splittable_axes,
    device_split,
    AxisSplit,
    plan_attention,
    plan_block_mask,
    plan_call,
)

__all__ = [
    "ArraySpec",
    "AttentionPlan",
    "BlockMask",
    "BlockMaskSpec",
    "CallOptions",
    "KernelCall",
    "block_map_calls",
    "FLOAT32_PRECISIONS",
    "check_dropout_p",
    "check_flag",
    "check_float32_precision",
    "dense_strides",
    "errors_named",
    "folds_mapped_axis",
    "packed_query_heads",
    "splittable_axes",
    "device_split",
    "AxisSplit",
    "plan_attention",
    "plan_block_mask",
    "plan_call",
    "compile_hook",
    "launch",
    "runtime",
    "tuning",
]
