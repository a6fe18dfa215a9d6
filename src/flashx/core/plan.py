"""The plan: everything about one attention call that follows from shapes, strides, dtypes and options.

Both frontends describe their arrays as `ArraySpec`s and call `plan_forward`; the returned
`ForwardPlan` holds the validated sizes, the strides in the kernel's (batch, seq, head, dim)
order, the output shapes, the grid, the block sizes and the constexpr flags. A frontend never
re-derives any of these. Framework-free: imports the standard library and `runtime` only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from . import runtime

SUPPORTED_DTYPES = ("float16", "bfloat16", "float32")
# Axis positions of (batch, seq, head, dim) in each user layout.
LAYOUTS = {"bnhd": (0, 1, 2, 3), "bhnd": (0, 2, 1, 3)}
MAX_HEAD_DIM = 256
LOG2_E = 1.4426950408889634


@dataclass(frozen=True)
class ArraySpec:
    """What the plan needs of one array: its shape, strides in elements, dtype name and device."""

    shape: tuple
    strides: tuple
    dtype: str  # "float16", "bfloat16", "float32"; anything else is rejected by the plan
    device: str  # e.g. "cpu", "cuda:0"


def dense_strides(shape: Sequence[int]) -> tuple:
    """Row-major strides, in elements, of a dense array of `shape`."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(int(size), 1)
    return tuple(reversed(strides))


def _next_power_of_2(n: int) -> int:
    return 1 << (max(n, 1) - 1).bit_length()


@dataclass(frozen=True)
class TileConfig:
    """Block sizes and launch options of the forward kernel."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


def _tile_config(block_d: int, interpret: bool) -> TileConfig:
    if interpret:
        # The interpreter runs tiles as NumPy arrays: small tiles keep CPU tests quick.
        return TileConfig(block_m=16, block_n=16, num_warps=1, num_stages=1)
    # Hopper (H200) choices: 128-row tiles feed wgmma; smaller key tiles at large D keep
    # the K/V stages within shared memory.
    if block_d <= 64:
        return TileConfig(block_m=128, block_n=64, num_warps=4, num_stages=3)
    if block_d <= 128:
        return TileConfig(block_m=128, block_n=64, num_warps=8, num_stages=3)
    return TileConfig(block_m=64, block_n=64, num_warps=4, num_stages=2)


@dataclass(frozen=True)
class ForwardPlan:
    """A validated forward attention call.

    Sizes: q is (B, Nq, Hq, D), k (B, Nkv, Hkv, D), v (B, Nkv, Hkv, Dv) in "bnhd" layout
    ("bhnd" swaps the sequence and head axes). The output has q's layout and dtype with last
    dim Dv; lse is float32 (B, Hq, Nq).
    """

    batch: int
    seqlen_q: int
    seqlen_kv: int
    heads_q: int
    heads_kv: int
    head_dim: int
    head_dim_v: int
    dtype: str
    layout: str
    causal: bool
    scale: float
    interpret: bool
    # Strides in elements, ordered (batch, seq, head, dim) whatever the layout.
    q_strides: tuple
    k_strides: tuple
    v_strides: tuple
    out_strides: tuple
    out_shape: tuple
    lse_shape: tuple
    tiles: TileConfig = field(repr=False)

    @property
    def needs_launch(self) -> bool:
        """False when the output is empty: nothing to compute."""
        return self.batch * self.heads_q * self.seqlen_q > 0

    def scalar_args(self) -> tuple:
        """The kernel's scalar arguments, in signature order (between the inputs and the outputs)."""
        return (
            self.scale * LOG2_E,
            self.seqlen_q,
            self.seqlen_kv,
            self.heads_q // self.heads_kv,
            *self.q_strides,
            *self.k_strides,
            *self.v_strides,
            *self.out_strides,
        )

    def kernel_args(self, q: Any, k: Any, v: Any, out: Any, lse: Any) -> tuple:
        """All positional kernel arguments: inputs, scalars, then outputs (jax-triton's order)."""
        return (q, k, v, *self.scalar_args(), out, lse)

    @property
    def constexprs(self) -> dict:
        """The kernel's constexpr arguments."""
        block_d = _next_power_of_2(max(self.head_dim, 16))
        block_dv = _next_power_of_2(max(self.head_dim_v, 16))
        return dict(
            HEAD_DIM=self.head_dim,
            HEAD_DIM_V=self.head_dim_v,
            BLOCK_D=block_d,
            BLOCK_DV=block_dv,
            BLOCK_M=self.tiles.block_m,
            BLOCK_N=self.tiles.block_n,
            CAUSAL=self.causal,
            # Triton's interpreter gets bf16 dots wrong; upcast there, keep bf16 tensor cores on GPU.
            UPCAST_DOT=self.interpret and self.dtype == "bfloat16",
            # float32 inputs: full-precision dots rather than tf32, so fp32 means fp32.
            DOT_PRECISION="ieee" if self.dtype == "float32" else "tf32",
        )

    @property
    def launch_options(self) -> dict:
        return dict(num_warps=self.tiles.num_warps, num_stages=self.tiles.num_stages)

    @property
    def grid(self) -> tuple:
        """(query blocks, q heads, batch)."""
        return (-(-self.seqlen_q // self.tiles.block_m), self.heads_q, self.batch)


def _check_array(name: str, spec: ArraySpec) -> None:
    if len(spec.shape) != 4:
        raise ValueError(f"{name} must be 4-D, got shape {tuple(spec.shape)} ({len(spec.shape)}-D)")
    if spec.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} has dtype {spec.dtype}; flashx supports {', '.join(SUPPORTED_DTYPES)}")


def _check_flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return value


def plan_forward(
    q: ArraySpec,
    k: ArraySpec,
    v: ArraySpec,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    layout: str = "bnhd",
) -> ForwardPlan:
    """Validate one forward call and compute everything its launch needs.

    Raises ValueError or TypeError naming the offending argument; nothing is launched here.
    """
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
    causal = _check_flag("causal", causal)
    for name, spec in (("q", q), ("k", k), ("v", v)):
        _check_array(name, spec)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype, got q {q.dtype}, k {k.dtype}, v {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device, got q {q.device}, k {k.device}, v {v.device}")
    if not runtime.INTERPRETER and q.device == "cpu":
        raise ValueError(
            "q, k and v are on the CPU, but flashx compiles its kernels for the GPU in this process; "
            "move them to the GPU, or set TRITON_INTERPRET=1 before importing flashx to run on the CPU"
        )

    axes = LAYOUTS[layout]

    def canonical(values: Sequence[int]) -> tuple:
        return tuple(int(values[a]) for a in axes)

    qb, nq, hq, d = canonical(q.shape)
    kb, nkv, hkv, dk = canonical(k.shape)
    vb, nv, hv, dv = canonical(v.shape)
    shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} (layout {layout!r})"
    if not (qb == kb == vb):
        raise ValueError(f"q, k and v must have the same batch size, got {shapes}")
    if dk != d:
        raise ValueError(f"q and k must have the same head dim, got {shapes}")
    if nv != nkv:
        raise ValueError(f"k and v must have the same sequence length, got {shapes}")
    if hv != hkv:
        raise ValueError(f"k and v must have the same number of heads, got {shapes}")
    if hq < 1 or hkv < 1:
        raise ValueError(f"q, k and v need at least one head, got {shapes}")
    if hq % hkv:
        raise ValueError(f"q's heads ({hq}) must be a multiple of k's and v's heads ({hkv}), got {shapes}")
    for name, size in (("q and k head dim", d), ("v head dim", dv)):
        if not 1 <= size <= MAX_HEAD_DIM:
            raise ValueError(f"{name} must be in [1, {MAX_HEAD_DIM}], got {size}: {shapes}")

    if scale is None:
        scale = 1.0 / math.sqrt(d)
    elif isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise TypeError(f"scale must be a finite float or None, got {scale!r}")

    out_shape = list(q.shape)
    out_shape[axes[3]] = dv
    out_shape = tuple(int(s) for s in out_shape)
    interpret = runtime.INTERPRETER
    return ForwardPlan(
        batch=qb,
        seqlen_q=nq,
        seqlen_kv=nkv,
        heads_q=hq,
        heads_kv=hkv,
        head_dim=d,
        head_dim_v=dv,
        dtype=q.dtype,
        layout=layout,
        causal=causal,
        scale=float(scale),
        interpret=interpret,
        q_strides=canonical(q.strides),
        k_strides=canonical(k.strides),
        v_strides=canonical(v.strides),
        out_strides=canonical(dense_strides(out_shape)),
        out_shape=out_shape,
        lse_shape=(qb, hq, nq),
        tiles=_tile_config(_next_power_of_2(max(d, dv, 16)), interpret),
    )


def launch(kernel: Callable, plan: ForwardPlan, q: Any, k: Any, v: Any, out: Any, lse: Any) -> None:
    """Launch `kernel` with Triton's own launcher on arrays Triton accepts (torch tensors)."""
    runtime.repair_triton_cache_dir()
    runtime.warn_once_if_interpreted()
    kernel[plan.grid](*plan.kernel_args(q, k, v, out, lse), **plan.constexprs, **plan.launch_options)
