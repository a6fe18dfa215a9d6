"""Framework-free core of flashx: the Triton kernels and the plan that launches them.

Imports triton and the standard library only; the frontends (flashx.torch, flashx.jax)
turn their arrays into `ArraySpec`s, ask for a plan and launch the kernels it names.
"""
from . import runtime
from .forward import attention_forward_kernel
from .plan import ArraySpec, ForwardPlan, dense_strides, launch, plan_forward

__all__ = [
    "ArraySpec",
    "ForwardPlan",
    "attention_forward_kernel",
    "dense_strides",
    "launch",
    "plan_forward",
    "runtime",
]
