"""The plan: everything about one attention call that follows from shapes, strides, dtypes and options.

Both frontends describe their arrays as `ArraySpec`s and call `plan_attention`; the returned
`AttentionPlan` holds the validated sizes, the strides in the kernels' (batch, seq, head, dim)
order, the output shapes, grids, block sizes and constexpr flags, and binds kernel arguments by
name. A frontend never re-derives any of these. Which tiles and routes a call takes, and the
measurements behind them, are core/tuning.py's tables. Framework-free: the standard library, triton.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import math
import numbers
import re
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping, NamedTuple, Optional, Sequence

from . import runtime, scores, tuning
from .backward import attention_backward_kernel, attention_backward_preprocess_kernel
from .blockmask import block_map_kernel, block_map_transpose_kernel
from .forward import attention_combine_kernel, attention_forward_kernel
from .launch import CompiledRunners, KernelCall, kernel_params

SUPPORTED_DTYPES = ("float16", "bfloat16", "float32")
INDEX_DTYPES = ("int32",)
MASK_DTYPES = ("bool", "uint8", "int8")
# Axis positions of (batch, seq, head, dim) in each user layout.
LAYOUTS = {"bnhd": (0, 1, 2, 3), "bhnd": (0, 2, 1, 3)}
MAX_HEAD_DIM = 256
MAX_GRID_YZ = 65535  # CUDA's limit on grid axes 1 and 2 (heads, batch)
# The backward's row statistics, by the name of the output a launch writes them to and the name
# of the input the launches after it read them by (AttentionPlan.backward_calls).
ROW_STATS_INPUTS = {"DELTA_OUT": "DELTA", "LSE_LOG2_OUT": "LSE_LOG2"}
ROW_STATS_OUTPUTS = tuple(ROW_STATS_INPUTS)
# The kernels scale scores in float32 (by scale * log2(e) where the scale folds into exp2).
FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38  # the smallest normal float32: GPUs flush smaller ones to 0
LOG2_E = scores.LOG2_E.value  # the kernels' own
# What a user function is called with (the README's signatures).
FUNCTION_ARGUMENTS = {"mask_mod": ("b", "h", "q_idx", "kv_idx"), "score_mod": ("score", "b", "h", "q_idx", "kv_idx"),
                      "score_mod_grad": ("score", "b", "h", "q_idx", "kv_idx")}


@dataclass(frozen=True)
class ArraySpec:
    """What the plan needs of one array: its shape, strides in elements, dtype name and device."""

    shape: tuple
    strides: tuple
    dtype: str  # numpy-style name: "float16", "bfloat16", "float32", "int32", "bool", ...
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


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)




def _takes_tma(descriptors: Optional[str]) -> bool:
    """Whether a launcher that passes `descriptors` (None; "host": Triton's, host tensor
    descriptors; "device": jax-triton's, descriptors built in the kernel's DESCRIPTOR_SCRATCH)
    may take a TMA tile: "device" only while tuning.GLUON_DEVICE_DESCRIPTORS."""
    if descriptors not in (None, "host", "device"):
        raise ValueError(f'descriptors must be None, "host" or "device", got {descriptors!r}')
    return descriptors == "host" or (descriptors == "device" and tuning.GLUON_DEVICE_DESCRIPTORS)


def descriptor_scratch_bytes(grid: Sequence[int]) -> int:
    """The DESCRIPTOR_SCRATCH a DEVICE_DESCRIPTORS launch on `grid` needs with a slot of
    descriptors a program, and room to round the buffer's start up to 128 bytes (a tensor map's
    alignment). A launcher whose programs all build their maps into one slot asks it of (1,)."""
    return math.prod(grid) * tuning.GLUON_DESCRIPTOR_BYTES + 127




def gluon_forward_grid(tile: Mapping[str, Any], batch: int, seqlen_q: int, heads_q: int) -> tuple:
    """The Gluon forward's grid for a tile (a tuning.GLUON_FORWARD_TILES entry): a program per tile of
    BLOCK_M query rows of one (batch, head), or (PERSISTENT) at most one per SM."""
    grid = (_cdiv(seqlen_q, tile["BLOCK_M"]), heads_q, batch)
    if tile["PERSISTENT"]:
        grid = (min(grid[0] * grid[1] * grid[2], runtime.multiprocessor_count()), 1, 1)
    return grid


def gluon_tma_descriptor(array: Any, shape: Sequence[int], strides: Sequence[int], rows: int, dtype: str,
                         columns: Optional[int] = None) -> Any:
    """A TMA descriptor of the Gluon forward (TMA=True) over `array`: its logical [B, N, H, D]
    shape and strides (elements), blocks of [1, rows, 1, columns or D] (one (batch, head)'s rows).
    array: anything with data_ptr() and a dtype triton knows (a torch tensor)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    columns = columns or shape[3]
    block = (1, rows, 1, columns)
    return TensorDescriptor(array, list(shape), list(strides), list(block), _tma_layout(rows, columns, dtype))


@functools.lru_cache(maxsize=None)
def _tma_layout(rows: int, columns: int, dtype: str) -> Any:
    """The kernel's own layout of a [1, rows, 1, columns] block (its shared buffers must match)."""
    from triton.experimental.gluon import language as gl

    from .gluon_forward import descriptor_layout  # imported only where descriptors are built

    return descriptor_layout(rows, columns, {"bfloat16": gl.bfloat16, "float16": gl.float16}[dtype])




def _map_ratios(block_mask: Optional["BlockMaskSpec"], tiles: tuning.KernelTiles, transposed: bool = False) -> dict:
    """How a kernel's tiles divide a block map's blocks: MAP_SPLIT programs per map block along
    the grid's axis (queries; keys for dK/dV, transposed) and MAP_STEPS loop steps per map block."""
    if block_mask is None:
        return dict(MAP_SPLIT=1, MAP_STEPS=1)
    rows, cols = block_mask.block_m // tiles.block_m, block_mask.block_n // tiles.block_n
    return dict(MAP_SPLIT=cols, MAP_STEPS=rows) if transposed else dict(MAP_SPLIT=rows, MAP_STEPS=cols)




def stride_alignment(*strides: int) -> int:
    """The largest power of two <= 16 that divides every stride (0 counts as divisible).

    Passed to the kernels as STRIDE_ALIGN: Triton's own launcher tells the compiler which integer
    arguments are multiples of 16, jax-triton does not, and without it no load is vectorized.
    """
    # % rather than math.gcd: under torch.compile's dynamic shapes the strides are symbolic
    # integers, which take % (a guard on divisibility) but not gcd.
    for align in (16, 8, 4, 2):
        if all(s % align == 0 for s in strides):
            return align
    return 1


# --- user functions -------------------------------------------------------------------------


def _is_triton_function(fn: Any) -> bool:
    import triton
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(fn, (triton.JITFunction, InterpretedFunction))


@functools.lru_cache(maxsize=None)
def _interpretable(fn: Any) -> Any:
    """A user's @triton.jit function in the form the current mode can call from a kernel.

    A function decorated before flashx switched to the interpreter is a compiled-kernel
    JITFunction; the interpreter needs its plain-Python twin.
    """
    import triton
    from triton.runtime.interpreter import InterpretedFunction

    if runtime.INTERPRETER and isinstance(fn, triton.JITFunction):
        return InterpretedFunction(fn.fn)
    return fn


def _check_function(name: str, fn: Any) -> Any:
    if fn is None:
        return None
    if not _is_triton_function(fn):
        raise TypeError(f"{name} must be a @triton.jit function, got {type(fn).__name__}")
    if not _takes_arguments(fn, len(FUNCTION_ARGUMENTS[name])):
        raise TypeError(f"{name} must take {len(FUNCTION_ARGUMENTS[name])} arguments "
                        f"({', '.join(FUNCTION_ARGUMENTS[name])}), got {fn.fn.__name__}{inspect.signature(fn.fn)}")
    return _interpretable(fn)


@functools.lru_cache(maxsize=None)
def _takes_arguments(fn: Any, count: int) -> bool:
    """Whether a @triton.jit function can be called with `count` positional arguments (a wrong
    signature would otherwise fail inside the kernel's compile or run)."""
    try:
        inspect.signature(fn.fn).bind(*range(count))
    except TypeError:
        return False
    return True


# --- block masks ----------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockMaskSpec:
    """The framework-free description of a block map: which key blocks each query block sees.

    Built once (by `create_block_mask` in either frontend) from mask_mod, optionally with a
    causal/window mask folded in, and reusable across calls and layers with the same sizes.
    batch or heads 1 means the mask does not depend on that index (broadcast).
    """

    mask_mod: Any
    batch: int
    heads: int
    seqlen_q: int
    seqlen_kv: int
    block_m: int
    block_n: int
    window_left: int  # -1: unbounded
    window_right: int

    @property
    def num_q_blocks(self) -> int:
        return _cdiv(self.seqlen_q, self.block_m)

    @property
    def num_kv_blocks(self) -> int:
        return _cdiv(self.seqlen_kv, self.block_n)

    @property
    def shapes(self) -> dict:
        """Shapes of the map's arrays (all int32 but `state`, int8)."""
        bh = (self.batch, self.heads)
        nq, nk = self.num_q_blocks, self.num_kv_blocks
        return dict(
            state=bh + (nq, nk),  # 0 empty, 1 partial, 2 full
            counts=bh + (nq, 2),  # [partial, full] key blocks per query block
            indices=bh + (nq, 2, nk),
            t_counts=bh + (nk, 2),  # the transpose: query blocks per key block
            t_indices=bh + (nk, 2, nq),
        )

    def scalars(self) -> dict:
        return dict(
            seqlen_q=self.seqlen_q, seqlen_kv=self.seqlen_kv,
            window_left=max(self.window_left, 0), window_right=max(self.window_right, 0),
            num_q_blocks=self.num_q_blocks, num_kv_blocks=self.num_kv_blocks,
        )

    def constexprs(self) -> dict:
        return dict(
            BLOCK_M=self.block_m, BLOCK_N=self.block_n, MASK_MOD=self.mask_mod,
            LIMIT_LEFT=self.window_left >= 0, LIMIT_RIGHT=self.window_right >= 0,
        )

    @property
    def grid(self) -> tuple:
        return (self.num_q_blocks, self.heads, self.batch)

    @property
    def transpose_grid(self) -> tuple:
        return (self.num_kv_blocks, self.heads, self.batch)


@dataclass
class BlockMask:
    """A block map built on the device: `spec` plus its arrays (torch tensors or jax arrays)."""

    spec: BlockMaskSpec
    counts: Any
    indices: Any
    t_counts: Any
    t_indices: Any

    def kernel_arrays(self) -> dict:
        """The map's arrays by kernel argument name (forward/dQ lists, then dK/dV's transposed ones)."""
        return dict(MAP_COUNTS=self.counts, MAP_INDICES=self.indices,
                    MAP_T_COUNTS=self.t_counts, MAP_T_INDICES=self.t_indices)


def _normalize_window(window: Any, causal: bool, longest: int) -> tuple:
    """(left, right) with -1 for unbounded; causal closes the right side at the diagonal.

    A side wider than the longest sequence bounds nothing, so it is cut to that length: the
    kernels add it to positions in 32-bit arithmetic, where 2**31 - 1 would wrap around."""
    if window is None:
        left, right = -1, -1
    else:
        ok = isinstance(window, (tuple, list)) and len(window) == 2
        ok = ok and all(isinstance(w, int) and not isinstance(w, bool) and w >= -1 for w in window)
        if not ok:
            raise ValueError(f"window must be (left, right), two ints >= -1 (-1: unbounded), got {window!r}")
        left, right = int(window[0]), int(window[1])
    if causal:
        right = 0 if right == -1 else min(right, 0)
    return min(left, longest), min(right, longest)


@dataclass(frozen=True)
class CallOptions:
    """The non-array options of one attention call (hashable: the frontends key ops and jit on it)."""

    causal: bool = False
    scale: Optional[float] = None
    layout: str = "bnhd"
    window: Any = None  # (left, right) tuple
    softcap: Optional[float] = None
    max_seqlen_q: Optional[int] = None
    max_seqlen_k: Optional[int] = None
    mask_mod: Any = None
    score_mod: Any = None
    score_mod_grad: Any = None
    block_mask: Optional[BlockMaskSpec] = None
    bottom_right: bool = True  # False: causal/window top-left aligned (the SDPA and jax.nn drop-ins)
    dropout_p: float = 0.0  # > 0: the frontend draws the call's DROPOUT_SEED (plan_attention)
    float32_precision: str = "tf32x3"  # one of FLOAT32_PRECISIONS: float32 inputs' dots

    def as_keywords(self) -> dict:
        """The options by name, as plan_attention takes them. By name, not vars(self):
        torch.compile traces this, and its Dynamo in torch 2.11 cannot trace a frozen
        dataclass's __dict__ (the GPU image's test_torch_compile_fullgraph, 2026-12-04)."""
        return {name: getattr(self, name) for name in CALL_OPTION_NAMES}


CALL_OPTION_NAMES = tuple(f.name for f in dataclasses.fields(CallOptions))

# Optional input arrays: kernel argument name -> plan_attention keyword.
ARRAY_KEYWORDS = {
    "SLOPES": "alibi_slopes", "BIAS": "bias", "MASK": "mask", "CU_SEQLENS_Q": "cu_seqlens_q",
    "CU_SEQLENS_K": "cu_seqlens_k", "SEQUSED_Q": "seqused_q", "SEQUSED_K": "seqused_k",
    "DROPOUT_SEED": "dropout_seed", "BLOCK_TABLE": "block_table",
}


# How the kernels multiply float32 inputs (Triton's dot input precisions); 16-bit inputs take
# their own tensor-core dots whatever this says. "tf32x3" splits each operand into a high and a
# low tf32 part and sums three tensor-core products: on an H100 its errors against float64 were
# those of "ieee" (full float32 FMA dots; relative 0.2-5e-6 on out, dQ, dK and dV) at 2-5.3x its
# speed (D <= 128), and "tf32" (one product) read 0.7-4.2e-3 at 1.7-2.3x tf32x3's (NOTES v0.66).
# "bf16x3" splits each operand into two bfloat16 parts and sums three bf16 products (about 16
# mantissa bits; XLA's BF16_BF16_F32_X3 dot algorithm): 0.5-1.3e-5 at 1.9-2.9x tf32x3's speed
# at D <= 128 on its own tiles (H100, NOTES v0.67). (Triton's "bf16x6" matched tf32x3's speed
# at D <= 128 and spilled 5-11 KB a thread at D = 256: not offered.)
FLOAT32_PRECISIONS = ("tf32x3", "ieee", "tf32", "bf16x3")


def check_float32_precision(float32_precision: Any) -> str:
    """float32_precision as one of FLOAT32_PRECISIONS."""
    if not isinstance(float32_precision, str):
        raise TypeError(f"float32_precision must be a str, one of {FLOAT32_PRECISIONS}, "
                        f"got {_type_name(float32_precision)}")
    if float32_precision not in FLOAT32_PRECISIONS:
        raise ValueError(f"float32_precision must be one of {FLOAT32_PRECISIONS}, got {float32_precision!r}")
    return float32_precision


def check_dropout_p(dropout_p: Any) -> float:
    """dropout_p as a float in [0, 1): the probability that a weight is dropped."""
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, numbers.Real):
        raise TypeError(f"dropout_p must be a float in [0, 1), got {_type_name(dropout_p)}")
    if not 0.0 <= dropout_p < 1.0:  # 1 would drop every weight and scale by 1 / 0
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p!r}")
    return float(dropout_p)


DROPOUT_SEED_SHAPE = (2,)  # int32: the two words of the call's 64-bit Philox seed (scores.dropout_kept)
# What both frontends raise where a gradient of flashx's gradient is asked for.
NO_SECOND_DERIVATIVE = "flashx has no second derivative (a gradient of flashx's gradient)"


def _sees_indices(options: CallOptions) -> bool:
    """Whether the call's user functions or block map see the batch and head index."""
    return options.mask_mod is not None or options.score_mod is not None or options.block_mask is not None


def folds_mapped_axis(options: CallOptions, optional: Mapping[str, tuple]) -> bool:
    """Whether a vmapped call (jax.vmap, torch.func.vmap) can run as one launch with the mapped
    axis folded into the batch axis: q, k, v, the outputs and the backward's inputs, all batch
    first, (V, B, ...) -> (V * B, ...). Only where nothing else depends on the batch index:
    mask_mod, score_mod and block maps see it, and an optional array with a batch extent or a
    mapped axis of its own would have to be tiled to match (bias's gradient then summed back
    per mapped slice). Otherwise the frontend maps the call one slice at a time.

    optional: the call's optional input arrays present, by kernel name (BIAS included), each as
    (its shape within one mapped slice, whether it is mapped)."""
    if _sees_indices(options):
        return False
    for name, (shape, mapped) in optional.items():
        if mapped:
            return False
        if name == "SLOPES" and len(shape) == 1:  # (H,): per head only
            continue
        if name == "MASK" and (len(shape) < 4 or shape[0] == 1):  # broadcast over the batch
            continue
        return False
    return True


# Optional arrays a split keeps whole on every slice, each slice's call reading them as the whole
# call does; with any of them present a call splits its heads only (their batch extent stays whole).
_WHOLE_ON_EVERY_SLICE = ("CU_SEQLENS_Q", "CU_SEQLENS_K", "SEQUSED_Q", "SEQUSED_K", "BLOCK_TABLE")


def splittable_axes(plan: "AttentionPlan", options: CallOptions, optional: Mapping[str, tuple]) -> Optional[tuple]:
    """The axes of q, k, v and out, (batch or None, heads), along which a call splits into
    independent calls on slices: run on each slice of a split (jax.shard_map's devices), they
    give the whole call's result. None where something sees the global batch or head index
    (mask_mod, score_mod and block maps; dropout's draw) or an optional array other than
    per-head ALiBi slopes (H,), which split with the heads, and varlen's offsets, per-sequence
    lengths and block tables, which are whole on every slice (the call then splits its heads
    only: a paged cache's first axis is its pages, not the batch); None for varlen queries
    against a paged cache, whose q and k hold their heads on different dims. optional: the
    call's optional input arrays present, by kernel name (BIAS included), each as its shape."""
    if _sees_indices(options) or check_dropout_p(options.dropout_p) > 0:
        return None
    for name, shape in optional.items():
        if not ((name == "SLOPES" and len(shape) == 1) or name in _WHOLE_ON_EVERY_SLICE):
            return None
    if plan.varlen:
        return (None, plan.layout_axes[1]) if "BLOCK_TABLE" not in optional else None
    if any(name in optional for name in _WHOLE_ON_EVERY_SLICE):
        return None, plan.layout_axes[2]
    return plan.layout_axes[0], plan.layout_axes[2]


def packed_query_heads(options: CallOptions, q_shape: Sequence[int], k_shape: Sequence[int],
                       optional: Collection[str]) -> int:
    """g > 1 where a one-query call (a decode step) should run as g query rows of each kv head,
    g the GQA group (FlashAttention 2's decode packing): q (B, 1, Hkv * g, D) viewed as (B, g,
    Hkv, D) ("bhnd": (B, Hq, 1, D) as (B, Hkv, g, D)), out and lse viewed back. The group's q heads
    read the same keys, so each key block is then read once per kv head, not once per q head,
    into a tile of g rows rather than 1. The packed call runs without causal, which for one query
    aligned bottom-right hides nothing. 1 (no packing) where anything tells the q heads or the
    query position apart: windows, top-left causal, mask_mod, score_mod, block masks, dropout,
    ALiBi, seqused_q, a bias or mask, varlen (3-D inputs); head counts or options the plan would
    refuse (it then names them). Other bad shapes (head dims, batch, pages) pack and are refused
    by the packed call's plan; a frontend names the caller's shapes (JAX plans the call as given
    first, torch again on a refusal). optional: the kernel names of the call's optional arrays
    present (seqused_k and a block table pack)."""
    if options.layout not in LAYOUTS or len(q_shape) != 4 or len(k_shape) != 4:
        return 1
    axes = LAYOUTS[options.layout]
    nq, hq, hkv = q_shape[axes[1]], q_shape[axes[2]], k_shape[axes[2]]
    if nq != 1 or not 0 < hkv < hq or hq % hkv:
        return 1
    if type(options.causal) is not bool or (options.causal and options.bottom_right is not True):
        return 1
    if options.window is not None or _sees_indices(options) or options.dropout_p != 0:
        return 1
    if any(name not in ("SEQUSED_K", "BLOCK_TABLE") for name in optional):
        return 1
    return hq // hkv


class AxisSplit(NamedTuple):
    """What one device-mesh axis splits in a call (device_split): the dims of q (and out), of k and
    v (None: whole on every device) and of lse; heads: whether it splits the heads (per-head
    arrays, ALiBi's slopes, split with them)."""

    q_dim: int
    kv_dim: Optional[int]
    lse_dim: int
    heads: bool


def device_split(plan: "AttentionPlan", options: CallOptions, optional: Mapping[str, tuple],
                 mesh_axes: Sequence[tuple]) -> dict:
    """How a call runs over a device mesh, each device on its slice (JAX's shard_map, torch's
    DTensors): {mesh axis: AxisSplit} for the axes it splits along; the inputs whole along every
    other axis (gathered first where they came split).

    mesh_axes: (name, size, q_dim, k_dim) for each mesh axis, major first: the dims of q and of k
    the inputs came split along on it (None: none). An axis that splits q's batch splits the batch
    of q, k and v; one that splits k's heads, the heads of q, k and v (each GQA group on one
    device); with one kv head, one that splits q's heads splits q's alone. Only where the call
    splits so (splittable_axes) and the sizes divide evenly; optional: as splittable_axes'."""
    axes = splittable_axes(plan, options, optional)
    if axes is None:
        return {}
    batch_axis, heads_axis = axes
    lse_dims = {heads_axis: 0} if plan.varlen else {batch_axis: 0, heads_axis: 1}  # lse (B, Hq, Nq) or (Hq, total)
    split, batch_parts, heads_parts = {}, 1, 1
    for name, size, q_dim, k_dim in mesh_axes:
        if batch_axis is not None and q_dim == batch_axis and plan.batch % (batch_parts * size) == 0:
            split[name] = AxisSplit(batch_axis, batch_axis, lse_dims[batch_axis], False)
            batch_parts *= size
        elif plan.heads_kv > 1 and k_dim == heads_axis and plan.heads_kv % (heads_parts * size) == 0:
            split[name] = AxisSplit(heads_axis, heads_axis, lse_dims[heads_axis], True)
            heads_parts *= size
        elif plan.heads_kv == 1 and q_dim == heads_axis and plan.heads_q % (heads_parts * size) == 0:
            split[name] = AxisSplit(heads_axis, None, lse_dims[heads_axis], True)
            heads_parts *= size
    return split


def plan_block_mask(
    mask_mod: Any, batch: Optional[int], heads: Optional[int], seqlen_q: int, seqlen_kv: int, *,
    causal: bool = False, window: Any = None, blocks: Optional[tuple] = None,
) -> BlockMaskSpec:
    """Validate `create_block_mask`'s arguments. blocks: (BLOCK_M, BLOCK_N), powers of two >= 16."""
    mask_mod = _check_function("mask_mod", mask_mod)
    if mask_mod is None:
        raise TypeError("mask_mod must be a @triton.jit function, got None")
    sizes = dict(batch=1 if batch is None else batch, heads=1 if heads is None else heads, seqlen_q=seqlen_q, seqlen_kv=seqlen_kv)
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < (0 if name.startswith("seqlen") else 1):
            raise ValueError(f"{name} must be a positive int (None for batch/heads: broadcast), got {size!r}")
    causal = check_flag("causal", causal)
    left, right = _normalize_window(window, causal, max(seqlen_q, seqlen_kv))
    if blocks is not None and (not isinstance(blocks, (tuple, list)) or len(blocks) != 2):
        raise ValueError(f"blocks must be (BLOCK_M, BLOCK_N) or None, got {blocks!r}")
    block_m, block_n = blocks or tuning.default_blocks()
    for name, b in (("block_m", block_m), ("block_n", block_n)):
        if isinstance(b, bool) or not isinstance(b, int) or b < 16 or b & (b - 1):
            raise ValueError(f"blocks' {name} must be a power of two >= 16, got {b!r}")
    return BlockMaskSpec(mask_mod, sizes["batch"], sizes["heads"], seqlen_q, seqlen_kv, block_m, block_n, left, right)


# --- the attention plan ---------------------------------------------------------------------


def _named_strides(prefix: str, axes: str, strides: Sequence[int]) -> dict:
    return {f"{prefix}{a}": int(s) for a, s in zip(axes, strides)}


@contextlib.contextmanager
def errors_named(names: Mapping[str, str]):
    """Re-raise the core's validation errors (plain ValueError / TypeError) with its argument names
    replaced by a drop-in's own (query for q): whole words only (not the q of seqused_q), longest
    first, never inside a quoted repr of the caller's value (scale='k'). A subclass (a framework's
    own error) passes through; the original stays chained."""
    try:
        yield
    except (ValueError, TypeError) as err:
        if type(err) not in (ValueError, TypeError):
            raise
        keys = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
        message = re.sub(rf"(?<!\w)(?:'[^']*'|{keys})(?!\w)", lambda m: names.get(m[0], m[0]), str(err))
        raise type(err)(message) from err


def check_flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    kind = type(value)
    if kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"):  # what numpy's comparisons give
        return bool(value)
    raise TypeError(f"{name} must be a bool, got {_type_name(value)}")


def _type_name(value: Any) -> str:
    """A value's type as a user would write it (numpy.float32, not float32)."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _softcap_form(softcap: Optional[float]) -> int:
    """The kernels' SOFTCAP_FORM for a (checked) softcap (scores.softcapped)."""
    if softcap is None:
        return scores.NO_SOFTCAP.value
    return (scores.SOFTCAP_SERIES if softcap >= scores.SOFTCAP_SERIES_FROM else scores.SOFTCAP_TANH).value


def _check_scale(scale: Any) -> float:
    """A finite real scale as a float (numpy scalars too) whose float32 factor the kernels can use."""
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale):
        raise TypeError(f"scale must be a finite float or None, got {scale!r} ({_type_name(scale)})")
    scale = float(scale)
    if abs(scale) * LOG2_E > FLOAT32_MAX:
        raise ValueError(f"scale must be at most {FLOAT32_MAX / LOG2_E:.4g} in magnitude (the kernels scale "
                         f"scores by scale * log2(e) in float32), got {scale!r}")
    return scale


def _check_max_seqlen(name: str, value: Any, total: int) -> int:
    """A varlen max_seqlen as an int, cut to the packed total (no sequence is longer, and the
    launch grid follows it: a huge value would only launch idle programs)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be an int >= 0 with cu_seqlens (a static Python int), got {value!r}")
    return min(int(value), total)


def _check_array(name: str, spec: Any, ndim: int, dtypes: Sequence[str]) -> None:
    if not isinstance(spec, ArraySpec):
        raise TypeError(f"{name} must be an array, got {type(spec).__name__}")
    if len(spec.shape) != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(spec.shape)} ({len(spec.shape)}-D)")
    if spec.dtype not in dtypes:
        raise TypeError(f"{name} has dtype {spec.dtype}; expected {' or '.join(dtypes)}")


def _check_contiguous(name: str, spec: ArraySpec) -> None:
    # The kernels read these offsets (and a page table's rows) as dense int32 vectors.
    if spec.shape[-1] > 1 and spec.strides[-1] != 1:
        raise ValueError(f"{name} must be contiguous along its last dim, got strides {tuple(spec.strides)}")


def _paged_keys(block_table: Any, batch: int, k_dims: Sequence[int], v_dims: Sequence[int], shapes: str) -> int:
    """Each sequence's key count in a paged cache (Nkv = pages per sequence * page size), after
    checking the block table and that k and v, (pages, page_size, heads, ·) in bnhd order, are
    paged alike."""
    _check_array("block_table", block_table, 2, INDEX_DTYPES)
    _check_contiguous("block_table", block_table)
    if block_table.shape[0] != batch:
        raise ValueError(f"block_table must have q's batch size {batch} as its first dim, got {tuple(block_table.shape)}")
    (pages, page_size), (v_pages, v_page_size) = k_dims[:2], v_dims[:2]
    if (pages, page_size) != (v_pages, v_page_size):
        raise ValueError(f"k and v must be paged alike (pages, page_size, heads, ·), got {shapes}")
    if pages < 1 or page_size < 1:
        raise ValueError(f"a paged cache needs at least one page of at least one row, got {shapes}")
    return int(block_table.shape[1]) * int(page_size)


def _broadcast_strides(name: str, spec: ArraySpec, target: tuple) -> tuple:
    """Strides that read `spec` broadcast to `target` (numpy rules; size-1 and missing axes: 0)."""
    if len(spec.shape) > len(target):
        raise ValueError(f"{name} of shape {tuple(spec.shape)} does not broadcast to {target}")
    pad = len(target) - len(spec.shape)
    shape = (1,) * pad + tuple(spec.shape)
    strides = (0,) * pad + tuple(spec.strides)
    out = []
    for size, stride, want in zip(shape, strides, target):
        if size == want:
            out.append(int(stride) if want > 1 else 0)
        elif size == 1:
            out.append(0)
        else:
            raise ValueError(f"{name} of shape {tuple(spec.shape)} does not broadcast to {target}")
    return tuple(out)


@dataclass(frozen=True)
class AttentionPlan:
    """A validated attention call: sizes, flags, strides, output shapes, grids and tiles.

    Shapes: q (B, Nq, Hq, D), k (B, Nkv, Hkv, D), v (B, Nkv, Hkv, Dv) for layout "bnhd"
    ("bhnd" swaps sequence and head axes); varlen: q (total_q, Hq, D), k/v (total_kv, Hkv, ·).
    Output: q's layout and dtype, last dim Dv; lse float32 (B, Hq, Nq), varlen (Hq, total_q).
    """

    batch: int
    seqlen_q: int  # per-batch length, or total rows when varlen
    seqlen_kv: int
    max_seqlen_q: int  # rows the grid covers per sequence
    max_seqlen_kv: int
    heads_q: int
    heads_kv: int
    head_dim: int
    head_dim_v: int
    dtype: str
    varlen: bool
    out_shape: tuple
    lse_shape: tuple
    # The backward's delta and lse_log2 (float32): lse's shape, with PADDED_ROW_STATS each row
    # padded to a multiple of every tile and map block of the call (see plan_attention).
    row_stats_shape: tuple
    q_shape: tuple
    k_shape: tuple
    v_shape: tuple
    bias_shape: Optional[tuple]
    bias_reduce_axes: tuple  # axes of the (B, Hq, Nq, Nkv) bias gradient to sum for the bias's shape
    slopes_reduce_axes: tuple  # axes of slopes_grad_shape to sum for alibi_slopes' shape ((Hq,) or (B, Hq))
    block_mask: Optional[BlockMaskSpec]
    # mask_mod without a block map: the map this call should build first (then plan again with it).
    auto_block_mask: Optional[BlockMaskSpec]
    scalars: Mapping[str, Any] = field(repr=False)
    flags: Mapping[str, Any] = field(repr=False)
    tiles: tuning.TileConfig = field(repr=False)
    layout_axes: tuple = field(repr=False)
    # Launch templates by key (see _memoized): plans are cached, so this work is done once per shape.
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def needs_launch(self) -> bool:
        """False when the output is empty: nothing to compute."""
        return self.batch * self.heads_q * self.max_seqlen_q > 0

    @property
    def needs_backward_launch(self) -> bool:
        return self.needs_launch and self.max_seqlen_kv > 0

    def check_backward(self) -> None:
        """Raise if this call's gradient cannot be computed (before any backward launch)."""
        if self.flags["HAS_SCORE_MOD"] and self.flags["SCORE_MOD_GRAD"] is None:
            raise NotImplementedError("the backward through a score_mod needs score_mod_grad, d score_mod / d score")
        if self.flags["PAGE_SIZE"]:
            raise NotImplementedError("a paged KV cache (block_table) is forward only: its pages may be shared "
                                      "between sequences, so they have no gradient of their own; call without "
                                      "block_table (on a gathered k and v) to differentiate")

    # Output and gradient layouts: dense in the user's layout (lse: dense (B, Hq, Nq) or (Hq, total)).
    def _dense(self, prefix: str, shape: tuple) -> dict:
        strides = dense_strides(shape)
        if self.varlen:  # (total, H, D): no batch stride, rows offset by cu_seqlens
            return _named_strides(prefix, "bnhd", (0,) + strides)
        return _named_strides(prefix, "bnhd", tuple(strides[a] for a in self.layout_axes))

    def _per_row_strides(self, prefix: str, shape: tuple) -> dict:
        """(batch, head, row) strides of a dense float32 per-row array: (B, Hq, rows), or varlen's
        (Hq, total_q), which has no batch axis (rows offset by cu_seqlens)."""
        if self.varlen:
            return _named_strides(prefix, "bhn", (0, shape[1], 1))
        return _named_strides(prefix, "bhn", dense_strides(shape))

    def _lse_strides(self) -> dict:
        return self._per_row_strides("stride_l", self.lse_shape)

    def _row_stats_strides(self) -> dict:
        return self._per_row_strides("stride_r", self.row_stats_shape)

    def _constexprs(self, kernel: Any, extra: Mapping[str, Any] = {}) -> dict:
        wanted = kernel_params(kernel)[1]
        values = {**self.flags, **extra}
        return {name: values[name] for name in wanted}

    def _template(self, kernel: Any, scalars: Mapping[str, Any]) -> tuple:
        """(the kernel's runtime arguments with None for arrays, (position, name) of each array)."""
        values = {**self.scalars, **scalars}
        args, slots = [], []
        for name in kernel_params(kernel)[0]:
            if name in values:
                args.append(values[name])
            elif name.isupper():
                slots.append((len(args), name))
                args.append(None)
            else:
                raise KeyError(f"no value for kernel argument {name}")
        return tuple(args), tuple(slots)

    def first_time(self, key: Any) -> bool:
        """True the first time a frontend asks with key for this plan, then False: for work a
        frontend does once per plan (JAX's compiles a new plan's kernels ahead, side by side)."""
        memo_key = ("first_time", key)
        if memo_key in self._memo:
            return False
        self._memo[memo_key] = True
        return True

    def _memoized(self, key: Any, build: Any) -> Any:
        """build() once per plan and key: a call at known shapes then only binds its arrays."""
        memo = self._memo
        if key not in memo:
            memo[key] = build()
        return memo[key]

    @staticmethod
    def _static(
        kernel: Any, grid: tuple, template: tuple, outputs: tuple, constexprs: dict, options: dict, writes: tuple = (),
    ) -> tuple:
        """What every call of one launch shares; memoized per plan (see _memoized)."""
        return kernel, grid, template, outputs, constexprs, options, CompiledRunners(), writes or outputs

    @staticmethod
    def _call(static: tuple, arrays: Mapping[str, Any], placeholder: Any) -> "KernelCall":
        """A KernelCall from a memoized launch (see _static) and the arrays."""
        kernel, grid, (args, slots), outputs, constexprs, options, runners, writes = static
        args = list(args)
        bound = []
        for position, name in slots:
            array = arrays.get(name)
            if array is None:
                args[position] = placeholder  # absent inputs: never read
            else:
                args[position] = array
                bound.append(array)
        return KernelCall(kernel, grid, tuple(args), outputs, constexprs, options, tuple(bound), runners, writes)

    @property
    def gluon_forward(self) -> bool:
        """Whether the forward takes the warp-specialized Gluon kernel (core/gluon_forward.py) from
        a launcher without tensor descriptors (see tuning.gluon_forward_tile)."""
        return self.gluon_forward_tile() is not None

    def gluon_forward_tile(self, descriptors: Optional[str] = None) -> Optional[str]:
        """The Gluon forward tile (tuning.GLUON_FORWARD_TILES) this call takes, or None (the tl forward):
        on Hopper, for dense 16-bit calls (causal or not, GQA, any Nq) whose head dim, causality
        and Nkv a route gives a tile, with D = Dv and rows that start at 16-byte multiples (its
        copies move 16 bytes). descriptors: "host" where the launcher passes host tensor
        descriptors (Triton's), "device" where it can point the kernel's scratch at an output
        (jax-triton's, through flashx/jax/gluon.py; taken while tuning.GLUON_DEVICE_DESCRIPTORS), else
        None. With descriptors, tuning.GLUON_TMA_ROUTE comes first (with "device", tuning.GLUON_DEVICE_TMA_ROUTE's
        spans replace its own), for inputs with no broadcast axis (a descriptor's strides must be
        positive multiples of 16 bytes); calls with a left window or a block map take
        tuning.GLUON_MASKED_TMA_ROUTE's tile there, and no cp.async tile."""
        tma = _takes_tma(descriptors)
        if not runtime.hopper_gluon():
            return None
        # A call of few tiles whose tl forward splits the keys (a decode step) spreads over the
        # SMs that way; a Gluon tile is one program. bench_decode.py on an H100 (2026-12-05, s68;
        # Hq 32 / Hkv 8, D = 128, bf16): B = 1 with 16k keys 189.7 -> 80.8 us (FA2 48.4 us), B = 8
        # at 4k 179.6 -> 122.1 us; calls that fill the SMs (B = 32) do not split and are level.
        if self.flags["SPLIT_KEYS"]:
            return None
        # The call's own part is decided once per plan (forward calls ask on every launch).
        tma_tile = self._memoized(("gluon_tma_tile", descriptors), lambda: self._gluon_tma_tile(descriptors)) if tma else None
        return tma_tile or self.gluon_tile

    @property
    def either_descriptors(self) -> str:
        """Which descriptors a launcher that can pass either (Triton's own) passes for this call:
        "device" below tuning.HOST_DESCRIPTORS_FROM_KEYS keys (where its host time limits), else "host"."""
        return "device" if self.max_seqlen_kv < tuning.HOST_DESCRIPTORS_FROM_KEYS else "host"

    @property
    def gluon_tile(self) -> Optional[str]:
        """The cp.async Gluon tile (tuning.GLUON_FORWARD_ROUTE) this call would take on Hopper, or None."""
        return self._memoized("gluon_tile", lambda: self._gluon_route(tuning.GLUON_FORWARD_ROUTE))

    def _gluon_tma_tile(self, descriptors: str) -> Optional[str]:
        positive = all(self.scalars[f"stride_{x}{a}"] > 0 for x in "qkv" for a in "bnh")
        if self.flags["LIMIT_LEFT"] or self.flags["BLOCK_MAP"]:
            return self._gluon_masked_tile() if positive else None
        route = {**tuning.GLUON_TMA_ROUTE, **tuning.GLUON_DEVICE_TMA_ROUTE} if descriptors == "device" else tuning.GLUON_TMA_ROUTE
        return self._gluon_route(route) if positive else None

    def _gluon_masked_tile(self) -> Optional[str]:
        """The TMA tile (tuning.GLUON_MASKED_TMA_ROUTE) of a call with a left window or a block map, or None."""
        if not self._gluon_plain(window=True, block_map=True):
            return None
        tile = tuning.GLUON_MASKED_TMA_ROUTE.get((self.head_dim, "map" if self.flags["BLOCK_MAP"] else "window"))
        spec = self.block_mask
        if tile is None or (spec is not None and (spec.block_m != tuning.GLUON_FORWARD_TILES[tile]["BLOCK_M"]
                                                  or spec.block_n % tuning.GLUON_FORWARD_TILES[tile]["BLOCK_N"])):
            return None
        return tile

    def _gluon_route(self, route: Mapping) -> Optional[str]:
        if not self._gluon_plain(window=False, block_map=False):
            return None
        return tuning.gluon_forward_tile(self.head_dim, bool(self.flags["LIMIT_RIGHT"]), self.max_seqlen_kv, route)

    def _gluon_plain(self, window: bool, block_map: bool) -> bool:
        """Whether the Gluon kernels can run this call: 16-bit, D = Dv, rows contiguous and
        16-byte aligned, causal at most (window: also a left window; block_map: also a block map of
        128 x 128 blocks, with or without mask_mod), and nothing else (FOLD_SCALE: a positive scale
        and no score_mod, softcap, ALiBi or bias), without dropout."""
        f, s = self.flags, self.scalars
        others = ("VARLEN", "HAS_SEQUSED_Q", "HAS_SEQUSED_K", "HAS_DENSE_MASK", "DROPOUT_P", "PAGE_SIZE")
        plain = f["FOLD_SCALE"] and not any(f[name] for name in others) and (window or not f["LIMIT_LEFT"])
        if f["BLOCK_MAP"]:
            plain = plain and block_map and (self.block_mask.block_m, self.block_mask.block_n) == (128, 128)
        elif f["HAS_MASK_MOD"]:  # mask_mod on every block (no map): not in the Gluon kernels
            plain = False
        causal_at_most = not f["LIMIT_RIGHT"] or s["window_right"] == 0
        rows_contiguous = all(s[f"stride_{x}d"] == 1 for x in "qkv")
        return (plain and causal_at_most and rows_contiguous and f["STRIDE_ALIGN"] >= 8
                and self.dtype in ("float16", "bfloat16") and self.head_dim == self.head_dim_v)

    def gluon_backward_tiles(self, descriptors: Optional[str] = None) -> tuple:
        """(dK/dV tile, dQ tile): the Gluon backward tiles (tuning.GLUON_DKDV_TILES, tuning.GLUON_DQ_TILES) this
        call's backward takes on Hopper, each None where its half runs the portable kernel: where
        tuning.GLUON_DKDV_ROUTE / tuning.GLUON_DQ_ROUTE name one for its head dim and kind ("dense", "causal",
        "window", "map": a block map, whatever else it folds in), for calls the Gluon kernels can
        run (_gluon_plain, windows and block maps included) whose row statistics are padded (the
        kernels read lse_log2 and delta unmasked). descriptors: as tuning.gluon_forward_tile's ("host":
        Triton's launcher; "device": jax-triton's through flashx/jax/gluon.py, while
        tuning.GLUON_DEVICE_DESCRIPTORS); with descriptors and a Q without broadcast axes,
        tuning.GLUON_DKDV_TMA_ROUTE comes first for dK/dV (backward_calls also asks it of dO's strides)."""
        tma = _takes_tma(descriptors)
        if not runtime.hopper_gluon():
            return None, None
        kind = self._memoized("gluon_backward_kind", self._gluon_backward_kind)
        if kind is None:
            return None, None
        key = (self.head_dim, kind)
        q_positive = all(self.scalars[f"stride_q{a}"] > 0 for a in "bnh")
        tma_tile = tuning.GLUON_DKDV_TMA_ROUTE.get(key) if tma and q_positive else None
        return tma_tile or tuning.GLUON_DKDV_ROUTE.get(key), tuning.GLUON_DQ_ROUTE.get(key)

    def _gluon_backward_kind(self) -> Optional[str]:
        f = self.flags
        # The kernels hold D = 64 or 128 (a consumer's dK and dV at D = 256 would not fit).
        if not (f["PADDED_ROW_STATS"] and self.head_dim in (64, 128) and self._gluon_plain(window=True, block_map=True)):
            return None
        if f["BLOCK_MAP"]:
            return "map"
        return "window" if f["LIMIT_LEFT"] else "causal" if f["LIMIT_RIGHT"] else "dense"

    @property
    def scratch_shapes(self) -> dict:
        """The float32 arrays, by name, that pass between the forward's launches (forward_calls):
        a split forward's O_SPLIT (kv_splits, *out_shape) and LSE_SPLIT (kv_splits, *lse_shape);
        none otherwise. Only the portable forward splits: a caller whose forward takes the Gluon
        kernel allocates them for nothing (calls that split run the portable kernel anyway)."""
        splits = self.scalars["kv_splits"]
        if splits == 1:
            return {}
        return {"O_SPLIT": (splits, *self.out_shape), "LSE_SPLIT": (splits, *self.lse_shape)}

    def forward_calls(
        self, arrays: Mapping[str, Any], placeholder: Any, gluon: bool = True, descriptors: Optional[str] = None,
    ) -> tuple:
        """The forward's launches, in order: one, or two where the portable kernel splits each
        tile's keys (SPLIT_KEYS: tuning.kv_splits): the split forward, whose outputs are O_SPLIT and
        LSE_SPLIT (scratch_shapes), then the combine, which takes them (by name, in arrays) and
        writes O and LSE. arrays: Q, K, V and the optional inputs by kernel name. The one launch's
        outputs (KernelCall.outputs): O and LSE, and for the Gluon kernel DESCRIPTOR_SCRATCH, which only a
        DEVICE_DESCRIPTORS launch uses (at most descriptor_scratch_bytes(grid); KernelCall.writes names it).

        gluon: whether this launch may take the Gluon forward where tuning.gluon_forward_tile gives one:
        the caller's Q, K and V start at 16-byte boundaries (its copies move 16 bytes; a torch
        view may not) and its launcher compiles Gluon. descriptors: as tuning.gluon_forward_tile's; where
        "host" takes a TMA tile, the call binds descriptors of Q, K and V (triton's
        TensorDescriptor, over arrays that have data_ptr() and dtype) in their places."""
        tile = self.gluon_forward_tile(descriptors) if gluon else None
        if tile is None:
            if self.flags["SPLIT_KEYS"]:
                return (self._call(self._memoized("split forward", self._split_forward_static), arrays, placeholder),
                        self._call(self._memoized("combine", self._combine_static), arrays, placeholder))
            return (self._call(self._memoized("forward", self._tl_forward_static), arrays, placeholder),)
        tma = tuning.GLUON_FORWARD_TILES[tile]["TMA"]
        on_device = tma and descriptors == "device"
        static = self._memoized(("gluon_forward", tile, on_device), lambda: self._gluon_forward_static(tile, on_device))
        if tma and not on_device:
            arrays = {**arrays, **self._tma_descriptors(arrays, tile)}
        return (self._call(static, arrays, placeholder),)

    def forward_call(
        self, arrays: Mapping[str, Any], placeholder: Any, gluon: bool = True, descriptors: Optional[str] = None,
    ) -> "KernelCall":
        """The first of forward_calls: the launch that reads Q, K and V (the whole forward unless
        it splits over the keys)."""
        return self.forward_calls(arrays, placeholder, gluon, descriptors)[0]

    def launch_outputs(self, call: "KernelCall", outputs: Mapping[str, Any], placeholder: Any) -> tuple:
        """What a launch takes for its outputs, in call.outputs' order: `outputs` by name,
        `placeholder` where they leave one out. A TMA_STORE tile whose launcher passes host
        descriptors (torch's) takes its stored outputs as TMA descriptors over their logical
        [B, N, H, D] views, in blocks of one consumer's 64 rows: the forward's O ([1, 64, 1,
        gluon_forward.output_columns(D)]) and the Gluon dK/dV kernel's DK and DV ([1, 64, 1, D])."""
        bound = [outputs.get(name, placeholder) for name in call.outputs]
        if call.constexprs.get("TMA_STORE") and not call.constexprs["DEVICE_DESCRIPTORS"]:
            views = self._memoized(("stored outputs", call.outputs), lambda: self._stored_views(call.outputs))
            for i, shape, strides, columns in views:
                bound[i] = gluon_tma_descriptor(bound[i], shape, strides, tuning.GLUON_TMA_Q_ROWS, self.dtype, columns)
        return tuple(bound)

    def _stored_views(self, names: tuple) -> tuple:
        """(position, [B, N, H, D] shape, strides, block columns) of each output among `names`
        that a TMA_STORE tile stores by TMA (see launch_outputs)."""
        from .gluon_forward import output_columns  # imported only where descriptors are built

        views = {"O": (self.max_seqlen_q, self.heads_q, self.out_shape, output_columns(self.head_dim)),
                 "DK": (self.max_seqlen_kv, self.heads_kv, self.k_shape, self.head_dim),
                 "DV": (self.max_seqlen_kv, self.heads_kv, self.v_shape, self.head_dim)}
        found = []
        for i, name in enumerate(names):
            if name in views:
                rows, heads, shape, columns = views[name]
                s = self._dense("stride_", shape)
                found.append((i, (self.batch, rows, heads, self.head_dim), (s["stride_b"], s["stride_n"], s["stride_h"], 1),
                              columns))
        return tuple(found)

    def _tma_descriptors(self, arrays: Mapping[str, Any], tile_name: str) -> dict:
        """Q, K and V as the Gluon kernel's TMA descriptors over their logical [B, N, H, D] shapes
        and strides (any layout)."""
        s, d, block_n = self.scalars, self.head_dim, tuning.GLUON_FORWARD_TILES[tile_name]["BLOCK_N"]
        return {
            x.upper(): gluon_tma_descriptor(arrays[x.upper()], (self.batch, n, h, d),
                                            (s[f"stride_{x}b"], s[f"stride_{x}n"], s[f"stride_{x}h"], 1), rows, self.dtype)
            for x, n, h, rows in (("q", self.max_seqlen_q, self.heads_q, tuning.GLUON_TMA_Q_ROWS),
                                  ("k", self.max_seqlen_kv, self.heads_kv, block_n),
                                  ("v", self.max_seqlen_kv, self.heads_kv, block_n))
        }

    def _forward_static(
        self, kernel: Any, grid: tuple, constexprs: dict, options: dict, outputs: tuple = ("O", "LSE"),
        writes: tuple = (),
    ) -> tuple:
        """Either forward kernel's launch: Q, K, V in, O and LSE (dense) out (the sizes for the
        Gluon kernel's persistent tile walk)."""
        extra = (self._dense("stride_o", self.out_shape) | self._lse_strides()
                 | dict(num_heads=self.heads_q, num_batches=self.batch))
        return self._static(kernel, grid, self._template(kernel, extra), outputs, constexprs, options, writes)

    def _tl_forward_static(self) -> tuple:
        kernel = attention_forward_kernel
        return self._forward_static(kernel, self.forward_grid, self._constexprs(kernel, dict(SPLIT_KEYS=False)),
                                    self.tiles.forward.options)

    def _split_forward_static(self) -> tuple:
        """The portable forward split over the keys: each tile's kv_splits programs side by side."""
        kernel = attention_forward_kernel
        blocks, *rest = self.forward_grid
        return self._forward_static(kernel, (blocks * self.scalars["kv_splits"], *rest), self._constexprs(kernel),
                                    self.tiles.forward.options, outputs=("O_SPLIT", "LSE_SPLIT"))

    def _combine_static(self) -> tuple:
        kernel = attention_combine_kernel
        grid = (_cdiv(self.max_seqlen_q, tuning.COMBINE_BLOCK_M), self.heads_q, self.batch)
        extra = self._dense("stride_o", self.out_shape) | self._lse_strides()
        return self._static(kernel, grid, self._template(kernel, extra), ("O", "LSE"),
                            self._constexprs(kernel, dict(BLOCK_M=tuning.COMBINE_BLOCK_M)),
                            dict(num_warps=4, num_stages=1, **tuning.LAUNCH_OPTIONS))

    def _gluon_forward_static(self, tile_name: str, device_descriptors: bool = False) -> tuple:
        """The Gluon forward's launch with a tile of tuning.GLUON_FORWARD_TILES (a TMA one may build its
        descriptors on the device)."""
        from .gluon_forward import gluon_attention_forward_kernel as kernel  # imported only where it runs

        tile = tuning.GLUON_FORWARD_TILES[tile_name]
        grid = gluon_forward_grid(tile, self.batch, self.max_seqlen_q, self.heads_q)
        map_steps = self.block_mask.block_n // tile["BLOCK_N"] if self.block_mask else 1
        constexprs = self._constexprs(kernel, dict(tile, DEVICE_DESCRIPTORS=device_descriptors, MAP_STEPS=map_steps))
        outputs = ("O", "LSE", "DESCRIPTOR_SCRATCH")
        # num_warps: the first consumer warpgroup's; Triton adds the other partitions' warps.
        return self._forward_static(kernel, grid, constexprs, dict(num_warps=4, num_stages=1), outputs,
                                    outputs if device_descriptors else outputs[:2])

    def backward_calls(
        self, arrays: Mapping[str, Any], placeholder: Any, bias_grad: bool, grad_out: ArraySpec,
        split: Optional[bool] = None, gluon: bool = True, descriptors: Optional[str] = None,
        slopes_grad: bool = False, need_dq: bool = True, need_dkdv: bool = True,
    ) -> tuple:
        """The backward's launches, in order. The first writes the row statistics (DELTA_OUT and
        LSE_LOG2_OUT, which the launches after it read as DELTA and LSE_LOG2: ROW_STATS_INPUTS):
        where dQ's programs launch alone (split, or beside a Gluon dK/dV launch), they come first
        and write them (tuning.DQ_ROW_STATS for the portable kernel, GLUON_DQ_ROW_STATS for the
        Gluon one), then dK/dV's; otherwise the preprocess does,
        then dK/dV's and dQ's programs in one launch, or split in two, dK/dV's then dQ's
        (split=None: as fused_backward says). With tiles.dkdv_passes == 2, dK/dV's launch is two,
        dV's then dK's. gluon: whether each half
        may take the Gluon kernel where gluon_backward_tiles gives one (the caller's Q, K, V and
        dO start at 16-byte boundaries); then dK/dV and dQ launch apart. descriptors: as
        gluon_backward_tiles'; where dK/dV takes a TMA tile, its launch binds host descriptors of
        Q and dO in their places ("host"), or builds them on the device and writes its
        DESCRIPTOR_SCRATCH output (at most descriptor_scratch_bytes(grid); "device").

        arrays: the forward's plus O, DO (grad_out, any strides), LSE, and optionally DLSE (the
        gradient of lse, folded into delta); for the launches after the first also DELTA and
        LSE_LOG2, the row statistics (row_stats_shape, float32). bias_grad: also write dBias
        (bias_grad_shape) into DBIAS; slopes_grad: write there instead the dQ programs' parts of
        ALiBi's slope gradient (slopes_grad_shape; see slopes_reduce_axes), not both. need_dq,
        need_dkdv: which gradients of q, k and v the caller uses; the other kind's programs are
        left out (dQ's run anyway for a bias or slopes gradient, which they write), so a call
        whose k and v take no gradient (a frozen encoder's, a cache's) runs no dK/dV pass. Each
        gradient launch names the outputs it takes in KernelCall.outputs (the portable kernel
        DK, DV, DQ, DBIAS; the Gluon dK/dV kernel DK, DV, DESCRIPTOR_SCRATCH: bind them with
        launch_outputs) and those it writes in KernelCall.writes.
        """
        if split is None:
            split = not self.fused_backward
        if tuple(grad_out.shape) != self.out_shape:
            raise ValueError(f"grad_out must have the output's shape {self.out_shape}, got {tuple(grad_out.shape)}")
        has_dlse = arrays.get("DLSE") is not None
        if slopes_grad and (bias_grad or not self.flags["HAS_ALIBI"]):
            raise ValueError("slopes_grad needs ALiBi slopes and no bias gradient in the same call")
        shapes = self.gradient_shapes(bias_grad, slopes_grad, need_dq, need_dkdv)
        need_dq = shapes["DQ"] is not None
        if not (need_dq or need_dkdv):
            raise ValueError("a backward needs some gradient: need_dq, need_dkdv, bias_grad or slopes_grad")
        # A descriptor's strides are positive (dO's too: a broadcast gradient takes cp.async).
        descriptors = descriptors if all(s > 0 for s in grad_out.strides) else None
        # The Gluon kernels write neither gradient (nor take ALiBi).
        gluon_tiles = self.gluon_backward_tiles(descriptors) if gluon and not bias_grad and not slopes_grad else (None, None)
        on_device = descriptors == "device"
        statics = self._memoized(
            ("backward", tuple(grad_out.strides), bias_grad, slopes_grad, has_dlse, split, gluon_tiles, on_device,
             need_dq, need_dkdv, tuning.DQ_ROW_STATS, tuning.GLUON_DQ_ROW_STATS),
            lambda: self._backward_statics(tuple(grad_out.strides), bias_grad, has_dlse, split, gluon_tiles, on_device,
                                           slopes_grad, need_dq, need_dkdv),
        )
        # Only a Gluon dK/dV launch with constexpr TMA (and host descriptors) takes Q and dO as
        # descriptors; where dO's rows do not fit the Gluon kernels the statics are portable.
        if not on_device and any(static[4].get("TMA") for static in statics):
            tma_arrays = {**arrays, **self._backward_tma_descriptors(arrays, grad_out.strides)}
            return tuple(self._call(static, tma_arrays if static[4].get("TMA") else arrays, placeholder)
                         for static in statics)
        return tuple(self._call(static, arrays, placeholder) for static in statics)

    def _backward_tma_descriptors(self, arrays: Mapping[str, Any], grad_out_strides: Sequence[int]) -> dict:
        """Q and dO as the Gluon dK/dV kernel's TMA descriptors over their logical [B, Nq, Hq, D]
        shapes and strides (any layout), 64-row blocks (one consumer's step)."""
        s, shape = self.scalars, (self.batch, self.max_seqlen_q, self.heads_q, self.head_dim)
        do_strides = tuple(grad_out_strides[a] for a in self.layout_axes)
        return {
            "Q": gluon_tma_descriptor(arrays["Q"], shape, (s["stride_qb"], s["stride_qn"], s["stride_qh"], 1), 64, self.dtype),
            "DO": gluon_tma_descriptor(arrays["DO"], shape, do_strides[:3] + (1,), 64, self.dtype),
        }

    def _backward_statics(self, grad_out_strides: tuple, bias_grad: bool, has_dlse: bool, split: bool,
                          gluon_tiles: tuple = (None, None), device_descriptors: bool = False,
                          slopes_grad: bool = False, need_dq: bool = True, need_dkdv: bool = True) -> tuple:
        do_strides = (0,) + grad_out_strides if self.varlen else tuple(grad_out_strides[a] for a in self.layout_axes)
        grads = (
            _named_strides("stride_do", "bnhd", do_strides) | self._dense("stride_dk", self.k_shape)
            | self._dense("stride_dv", self.v_shape) | self._dense("stride_dq", self.q_shape)
            | self._lse_strides() | self._row_stats_strides() | self._dense("stride_o", self.out_shape)
        )
        # DBIAS: dBias (B, Hq, Nq, Nkv), the slopes' parts (B, Hq, query blocks: no key axis), or none.
        score_grad = self.gradient_shapes(bias_grad, slopes_grad)["DBIAS"]
        strides = dense_strides(score_grad) if score_grad else ()
        grads |= _named_strides("stride_g", "bhqk", strides + (0,) * (4 - len(strides)))
        # dO comes with the caller's strides: the alignment hint must hold for them too.
        align = dict(STRIDE_ALIGN=stride_alignment(self.flags["STRIDE_ALIGN"], *do_strides[:3]))
        preprocess = self._static(
            attention_backward_preprocess_kernel, self.preprocess_grid,
            self._template(attention_backward_preprocess_kernel, grads), ROW_STATS_OUTPUTS,
            self._constexprs(attention_backward_preprocess_kernel, dict(align, HAS_DLSE=has_dlse)),
            dict(num_warps=4, num_stages=1, **tuning.LAUNCH_OPTIONS),
        )
        dkdv_kt, dq_kt = self.tiles.dkdv, self.tiles.dq  # KernelTiles (dkdv and dq name launches below)
        tiles = dict(
            DKDV_BLOCK_M=dkdv_kt.block_m, DKDV_BLOCK_N=dkdv_kt.block_n, DKDV_STAGES=dkdv_kt.num_stages,
            DQ_BLOCK_M=dq_kt.block_m, DQ_BLOCK_N=dq_kt.block_n, DQ_STAGES=dq_kt.num_stages,
            **{"DKDV_" + k: v for k, v in _map_ratios(self.block_mask, dkdv_kt, True).items()},
            **{"DQ_" + k: v for k, v in _map_ratios(self.block_mask, dq_kt).items()},
        )
        kernel = attention_backward_kernel
        outputs = ("DK", "DV", "DQ", "DBIAS") + ROW_STATS_OUTPUTS

        def launch(run_dkdv: bool, run_dq: bool, write_dk: bool = True, write_dv: bool = True,
                   row_stats: bool = False) -> tuple:
            # Alone, a kind launches with its own tile's options; together, with their one warp
            # count, and each loop pipelines its own stages (DKDV_STAGES, DQ_STAGES).
            kinds = [t for t, run in ((dkdv_kt, run_dkdv), (dq_kt, run_dq)) if run]
            if len({t.num_warps for t in kinds}) > 1:
                raise ValueError(f"one backward launch needs one warp count, got dK/dV's {dkdv_kt} and dQ's {dq_kt}")
            options = dict(kinds[0].options, num_stages=max(t.num_stages for t in kinds))
            # Both kinds: one grid (fused_backward: no GQA, so the second axes agree). dQ writing
            # the row statistics also covers their padding rows.
            dq_grid = self.dq_grid_of(self.row_stats_shape[-1] if row_stats and self.flags["PADDED_ROW_STATS"] else None)
            dkdv_programs = self.dkdv_grid[0] if run_dkdv else 0
            grid = (dkdv_programs + (dq_grid[0] if run_dq else 0),) + (dq_grid if run_dq else self.dkdv_grid)[1:]
            constexprs = self._constexprs(kernel, dict(
                align, **tiles, BIAS_GRAD=bias_grad, SLOPES_GRAD=slopes_grad, RUN_DKDV=run_dkdv, RUN_DQ=run_dq,
                WRITE_DK=write_dk, WRITE_DV=write_dv, DQ_ROW_STATS=row_stats, HAS_DLSE=has_dlse,
            ))
            template = self._template(kernel, grads | dict(dkdv_programs=dkdv_programs))
            written = dict(DK=run_dkdv and write_dk, DV=run_dkdv and write_dv, DQ=run_dq, DBIAS=run_dq,
                           **dict.fromkeys(ROW_STATS_OUTPUTS, row_stats))
            writes = tuple(name for name in outputs if written[name])
            return self._static(kernel, grid, template, outputs, constexprs, options, writes)

        def in_order(dkdv: tuple, run_dq: bool, gluon_dq: Optional[tuple] = None, gluon_row_stats: bool = False) -> tuple:
            # The row statistics' writer first: dQ's launch where it runs alone and writes them
            # (tuning.DQ_ROW_STATS for the tl dQ; gluon_row_stats for the Gluon one), then dK/dV's
            # launches; else the preprocess, dK/dV's launches, then dQ's.
            if run_dq and (gluon_row_stats if gluon_dq else tuning.DQ_ROW_STATS):
                return (gluon_dq or launch(False, True, row_stats=True), *dkdv)
            return (preprocess, *dkdv, *((gluon_dq or launch(False, True),) if run_dq else ()))

        def dkdv_alone() -> tuple:
            # dK/dV's programs without dQ's: in two passes (dV's, then dK's) where the tiles say so.
            if self.tiles.dkdv_passes == 2:
                return launch(True, False, write_dk=False), launch(True, False, write_dv=False)
            return (launch(True, False),)

        # The Gluon kernels copy dO's rows 16 bytes at a time: its last axis contiguous.
        if any(gluon_tiles) and do_strides[3] == 1 and align["STRIDE_ALIGN"] >= 8:
            from . import gluon_backward  # imported only where it runs

            def gluon_launch(kernel: Any, tile: dict, grid: tuple, outputs: tuple, map_steps: int,
                             writes: tuple = (), **constexprs) -> tuple:
                # num_warps: the first consumer's warpgroup; Triton adds the other partitions' warps.
                sizes = dict(num_heads_kv=self.heads_kv, num_batches=self.batch)  # a persistent walk's
                return self._static(kernel, grid, self._template(kernel, grads | sizes), outputs,
                                    self._constexprs(kernel, dict(align, **tile, MAP_STEPS=map_steps, **constexprs)),
                                    dict(num_warps=4, num_stages=1), writes)

            dkdv_tile, dq_tile = gluon_tiles
            # A map block (128 x 128) is walked in 64-row steps by dK/dV, in 64-key steps by dQ.
            map_m, map_n = (self.block_mask.block_m // 64, self.block_mask.block_n // 64) if self.block_mask else (1, 1)
            if dkdv_tile is None:
                dkdv = dkdv_alone()
            else:
                tile = tuning.GLUON_DKDV_TILES[dkdv_tile]
                # DESCRIPTOR_SCRATCH: written (as the forward's) only where the TMA tile builds its
                # descriptors on the device.
                on_device = device_descriptors and tile["TMA"]
                dkdv_outputs = ("DK", "DV", "DESCRIPTOR_SCRATCH")
                grid = (_cdiv(self.max_seqlen_kv, tile["BLOCK_N"]), self.heads_kv, self.batch)
                if tile["PERSISTENT"]:
                    grid = (min(math.prod(grid), runtime.multiprocessor_count()), 1, 1)
                dkdv = (gluon_launch(gluon_backward.gluon_attention_dkdv_kernel, tile, grid,
                                     dkdv_outputs, map_m, dkdv_outputs if on_device else dkdv_outputs[:2],
                                     DEVICE_DESCRIPTORS=on_device),)
            gluon_dq, row_stats = None, False
            if dq_tile is not None:
                tile = tuning.GLUON_DQ_TILES[dq_tile]
                grid = (_cdiv(self.max_seqlen_q, tile["BLOCK_M"]), self.heads_q, self.batch)
                # Its programs write the row statistics where their rows cover every padded row
                # (tuning.GLUON_DQ_ROW_STATS).
                row_stats = tuning.GLUON_DQ_ROW_STATS and grid[0] * tile["BLOCK_M"] == self.row_stats_shape[-1]
                dq_outputs = ("DQ",) + ROW_STATS_OUTPUTS
                gluon_dq = gluon_launch(gluon_backward.gluon_attention_dq_kernel, tile, grid, dq_outputs, map_n,
                                        dq_outputs if row_stats else dq_outputs[:1], ROW_STATS=row_stats,
                                        HAS_DLSE=has_dlse)
            return in_order(dkdv if need_dkdv else (), need_dq, gluon_dq, row_stats)
        if not (need_dq and need_dkdv):  # one kind alone, in its own launch(es)
            return in_order(dkdv_alone() if need_dkdv else (), need_dq)
        if split:
            return in_order(dkdv_alone(), True)
        if self.dkdv_grid[1] != self.dq_grid[1]:
            raise ValueError("one backward launch needs as many kv heads as q heads (see fused_backward)")
        return preprocess, launch(True, True)

    def scalars_for_map(self, prefix: str) -> dict:
        """Strides of the block map's count and index arrays, stride_c* and stride_i*; with prefix
        "t_", those of the transposed map, stride_tc* and stride_ti*."""
        spec = self.block_mask
        shapes = spec.shapes
        counts = dense_strides(shapes[prefix + "counts"])
        indices = dense_strides(shapes[prefix + "indices"])
        # A map built for batch 1 or head 1 broadcasts over that index.
        bcast = (spec.batch == 1, spec.heads == 1)
        counts = tuple(0 if (i < 2 and bcast[i]) else s for i, s in enumerate(counts))
        indices = tuple(0 if (i < 2 and bcast[i]) else s for i, s in enumerate(indices))
        kind = "t" if prefix else ""
        return _named_strides(f"stride_{kind}c", "bhq", counts[:3]) | _named_strides(f"stride_{kind}i", "bhqk", indices[:4])

    @property
    def bias_grad_shape(self) -> tuple:
        return (self.batch, self.heads_q, self.seqlen_q, self.seqlen_kv)

    def gradient_shapes(self, bias_grad: bool, slopes_grad: bool = False, need_dq: bool = True,
                        need_dkdv: bool = True) -> dict:
        """The shapes of the gradient outputs (DQ, DK, DV, DBIAS) that backward_calls' launches
        with these arguments write, None for those they leave alone: DQ where dQ's programs run
        (need_dq, or for a bias or slopes gradient, which they write), DK and DV with need_dkdv,
        DBIAS holding bias_grad_shape or slopes_grad_shape."""
        writes_dq = need_dq or bias_grad or slopes_grad
        return dict(DQ=self.q_shape if writes_dq else None, DK=self.k_shape if need_dkdv else None,
                    DV=self.v_shape if need_dkdv else None,
                    DBIAS=self.bias_grad_shape if bias_grad else self.slopes_grad_shape if slopes_grad else None)

    @property
    def slopes_grad_shape(self) -> tuple:
        """The backward's parts of ALiBi's slope gradient (float32, zero-filled: programs past a
        sequence write none): (B, Hq, query blocks of dQ's tile); summed over
        slopes_reduce_axes, alibi_slopes' gradient."""
        return (self.batch, self.heads_q, _cdiv(self.max_seqlen_q, self.tiles.dq.block_m))

    @property
    def forward_grid(self) -> tuple:
        """(query blocks * G, q heads / G, batch), G = HEAD_GROUP (see program_tile)."""
        group = self.flags["HEAD_GROUP"]
        return (_cdiv(self.max_seqlen_q, self.tiles.forward.block_m) * group, self.heads_q // group, self.batch)

    @property
    def preprocess_grid(self) -> tuple:
        """(row blocks, q heads, batch) for the backward's row statistics, padding rows included."""
        rows = self.max_seqlen_q if self.varlen else self.row_stats_shape[-1]
        return (_cdiv(rows, self.tiles.forward.block_m), self.heads_q, self.batch)

    @property
    def fused_backward(self) -> bool:
        """Whether dK/dV's and dQ's programs share one launch (attention_backward_kernel).

        Measured on the H200 (NOTES v0.8): +2.0-2.4% at D = 128 and on a window, but 0.85x under
        GQA (its dK/dV grid has fewer heads than dQ's) and 0.96-0.97x with D = 64's 4-warp tiles,
        where dQ alone fits more programs per SM than the shared kernel's registers allow; nor
        with tiles whose table entry says so (tuning.TileConfig.one_backward_launch: D = 256's, which
        wider heads and float32 D = 128 use too).
        """
        warps = {self.tiles.dkdv.num_warps, self.tiles.dq.num_warps}
        return self.heads_q == self.heads_kv and warps == {8} and self.tiles.one_backward_launch

    @property
    def dq_grid(self) -> tuple:
        """(query blocks * G, q heads / G, batch) in dQ's tiles."""
        return self.dq_grid_of()

    def dq_grid_of(self, rows: Optional[int] = None) -> tuple:
        """dq_grid over `rows` query rows (default max_seqlen_q)."""
        group = self.flags["HEAD_GROUP"]
        return (_cdiv(rows or self.max_seqlen_q, self.tiles.dq.block_m) * group, self.heads_q // group, self.batch)

    @property
    def dkdv_grid(self) -> tuple:
        """(key blocks * G, kv heads / G, batch)."""
        group = self.flags["HEAD_GROUP"]
        return (_cdiv(self.max_seqlen_kv, self.tiles.dkdv.block_n) * group, self.heads_kv // group, self.batch)


def plan_attention(
    q: ArraySpec,
    k: ArraySpec,
    v: ArraySpec,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    layout: str = "bnhd",
    window: Any = None,
    alibi_slopes: Optional[ArraySpec] = None,
    softcap: Optional[float] = None,
    cu_seqlens_q: Optional[ArraySpec] = None,
    cu_seqlens_k: Optional[ArraySpec] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    mask_mod: Any = None,
    score_mod: Any = None,
    score_mod_grad: Any = None,
    block_mask: Optional[BlockMaskSpec] = None,
    bias: Optional[ArraySpec] = None,
    mask: Optional[ArraySpec] = None,
    seqused_q: Optional[ArraySpec] = None,
    seqused_k: Optional[ArraySpec] = None,
    bottom_right: bool = True,
    dropout_p: float = 0.0,
    dropout_seed: Optional[ArraySpec] = None,
    block_table: Optional[ArraySpec] = None,
    float32_precision: str = "tf32x3",
) -> AttentionPlan:
    """Validate one call and compute everything its launches need.

    Raises ValueError or TypeError naming the offending argument; nothing is launched here.
    seqused_q / seqused_k (int32 (B,)): how many of each batch's (or sequence's) rows take part,
    the rest padding; causal and windows align on those lengths. block_table (int32 (B, pages)):
    k and v are a paged cache (pages, page_size, Hkv, ·) and batch b's keys are the pages its row
    names, in order (forward only; varlen q with cu_seqlens_q alone). bias, mask and bottom_right=False serve the SDPA / jax.nn
    drop-ins. dropout_p > 0 takes dropout_seed, int32 DROPOUT_SEED_SHAPE, which the frontend
    draws for each call. float32_precision (FLOAT32_PRECISIONS): how float32 inputs' dots multiply.
    """
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
    causal = check_flag("causal", causal)
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    paged = block_table is not None
    ndim = 3 if varlen else 4
    for name, spec in (("q", q), ("k", k), ("v", v)):
        _check_array(name, spec, 4 if paged and name != "q" else ndim, SUPPORTED_DTYPES)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype, got q {q.dtype}, k {k.dtype}, v {v.dtype}")
    devices = {name: s.device for name, s in (("q", q), ("k", k), ("v", v), ("alibi_slopes", alibi_slopes),
               ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k), ("bias", bias), ("mask", mask),
               ("seqused_q", seqused_q), ("seqused_k", seqused_k), ("dropout_seed", dropout_seed),
               ("block_table", block_table)) if s is not None}
    if len(set(devices.values())) > 1:
        raise ValueError("all arrays must be on one device, got " + ", ".join(f"{n} {d}" for n, d in devices.items()))
    if not runtime.INTERPRETER and q.device == "cpu":
        raise ValueError(
            "q, k and v are on the CPU, but flashx compiles its kernels for the GPU in this process; "
            "move them to the GPU, or set TRITON_INTERPRET=1 before importing flashx to run on the CPU"
        )

    if varlen:
        if layout != "bnhd":
            raise ValueError(f"varlen inputs are (total, heads, dim): layout must be 'bnhd', got {layout!r}")
        axes = (0, 1, 2)
        shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        tq, hq, d = q.shape
        if paged:  # packed queries against a paged cache: sequence b's keys are block_table[b]'s pages
            if cu_seqlens_q is None or cu_seqlens_k is not None:
                raise ValueError("with block_table, varlen takes cu_seqlens_q alone: each sequence's keys are its "
                                 "block table row's pages, their lengths seqused_k (not cu_seqlens_k)")
            (_, _, hkv, dk), (_, _, hv, dv) = k.shape, v.shape
        else:
            (tk, hkv, dk), (tv, hv, dv) = k.shape, v.shape
            if cu_seqlens_q is None or cu_seqlens_k is None:
                raise ValueError("varlen needs both cu_seqlens_q and cu_seqlens_k")
        for name, spec in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
            if spec is not None:
                _check_array(name, spec, 1, INDEX_DTYPES)
                _check_contiguous(name, spec)
        batch = int(cu_seqlens_q.shape[0]) - 1
        if batch < 1 or (not paged and cu_seqlens_k.shape[0] != batch + 1):
            raise ValueError(f"cu_seqlens_q and cu_seqlens_k must have the same length B + 1 >= 2, got "
                             f"{cu_seqlens_q.shape[0]} and {None if paged else cu_seqlens_k.shape[0]}")
        if paged:
            nkv = _paged_keys(block_table, batch, k.shape, v.shape, shapes)
            k_strides, v_strides = tuple(k.strides), tuple(v.strides)  # pages step as batches do
        else:
            if tv != tk:
                raise ValueError(f"k and v must have the same number of rows, got {shapes}")
            nkv = int(tk)
            k_strides, v_strides = (0,) + tuple(k.strides), (0,) + tuple(v.strides)
        nq = int(tq)
        max_q = _check_max_seqlen("max_seqlen_q", max_seqlen_q, nq)
        # A paged sequence's keys are at most its table row's: max_seqlen_k may be left out.
        max_kv = nkv if paged and max_seqlen_k is None else _check_max_seqlen("max_seqlen_k", max_seqlen_k, nkv)
        q_strides = (0,) + tuple(q.strides)
        out_shape = (tq, hq, dv)
        lse_shape = (hq, tq)
        if bias is not None or mask is not None or block_mask is not None:
            raise ValueError("varlen does not combine with bias, mask or block_mask (mask_mod alone is fine)")
    else:
        axes = LAYOUTS[layout]

        def canonical(values: Sequence[int]) -> tuple:
            return tuple(int(values[a]) for a in axes)

        batch, nq, hq, d = canonical(q.shape)
        kb, nkv, hkv, dk = canonical(k.shape)
        vb, nv, hv, dv = canonical(v.shape)
        shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} (layout {layout!r})"
        if paged:
            if bias is not None or mask is not None:
                raise ValueError("block_table does not combine with bias or mask")
            nkv = nv = _paged_keys(block_table, batch, canonical(k.shape), canonical(v.shape), shapes)
        elif not (batch == kb == vb):
            raise ValueError(f"q, k and v must have the same batch size, got {shapes}")
        if nv != nkv:
            raise ValueError(f"k and v must have the same sequence length, got {shapes}")
        if max_seqlen_q is not None or max_seqlen_k is not None:
            raise ValueError("max_seqlen_q and max_seqlen_k go with cu_seqlens_q and cu_seqlens_k")
        max_q, max_kv = nq, nkv
        q_strides, k_strides, v_strides = canonical(q.strides), canonical(k.strides), canonical(v.strides)
        out_shape = list(q.shape)
        out_shape[axes[3]] = dv
        out_shape = tuple(int(s) for s in out_shape)
        lse_shape = (batch, hq, nq)
    if dk != d:
        raise ValueError(f"q and k must have the same head dim, got {shapes}")
    if hv != hkv:
        raise ValueError(f"k and v must have the same number of heads, got {shapes}")
    if hq < 1 or hkv < 1:
        raise ValueError(f"q, k and v need at least one head, got {shapes}")
    if hq % hkv:
        raise ValueError(f"q's heads ({hq}) must be a multiple of k's and v's heads ({hkv}), got {shapes}")
    for name, size in (("q and k head dim", d), ("v head dim", dv)):
        if not 1 <= size <= MAX_HEAD_DIM:
            raise ValueError(f"{name} must be in [1, {MAX_HEAD_DIM}], got {size}: {shapes}")
    if hq > MAX_GRID_YZ or batch > MAX_GRID_YZ:
        raise ValueError(f"at most {MAX_GRID_YZ} heads and batches per call, got {shapes}")

    scale = 1.0 / math.sqrt(d) if scale is None else _check_scale(scale)
    if softcap is not None:
        if (isinstance(softcap, bool) or not isinstance(softcap, numbers.Real) or not math.isfinite(softcap)
                or softcap <= 0):
            raise ValueError(f"softcap must be a float > 0 or None, got {softcap!r}")
        # Beyond float32's range it is the same no-op cap (softcap * tanh(x / softcap) = x).
        softcap = min(float(softcap), FLOAT32_MAX)
    window_left, window_right = _normalize_window(window, causal, max(nq, nkv))
    bottom_right = check_flag("bottom_right", bottom_right)
    dropout_p = check_dropout_p(dropout_p)
    float32_precision = check_float32_precision(float32_precision)
    if dropout_p > 0:
        _check_array("dropout_seed", dropout_seed, 1, INDEX_DTYPES)
        if tuple(dropout_seed.shape) != DROPOUT_SEED_SHAPE:
            raise ValueError(f"dropout_seed must have shape {DROPOUT_SEED_SHAPE}, got {tuple(dropout_seed.shape)}")
        _check_contiguous("dropout_seed", dropout_seed)

    slope_strides = (0, 0)
    if alibi_slopes is not None:
        if not isinstance(alibi_slopes, ArraySpec) or alibi_slopes.dtype != "float32" or \
                tuple(alibi_slopes.shape) not in ((hq,), (batch, hq)):
            got = f"{tuple(alibi_slopes.shape)} {alibi_slopes.dtype}" if isinstance(alibi_slopes, ArraySpec) else type(alibi_slopes).__name__
            raise ValueError(f"alibi_slopes must be float32 of shape ({hq},) or ({batch}, {hq}), got {got}")
        slope_strides = tuple(alibi_slopes.strides) if len(alibi_slopes.shape) == 2 else (0, alibi_slopes.strides[0])

    score_target = (batch, hq, nq, nkv)
    bias_strides = mask_strides = (0, 0, 0, 0)
    bias_reduce: tuple = ()
    if bias is not None:
        if not isinstance(bias, ArraySpec) or bias.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"bias must be a float array ({', '.join(SUPPORTED_DTYPES)}), got {getattr(bias, 'dtype', type(bias).__name__)}")
        bias_strides = _broadcast_strides("bias", bias, score_target)
        padded = (1,) * (4 - len(bias.shape)) + tuple(bias.shape)
        bias_reduce = tuple(i for i, (s, t) in enumerate(zip(padded, score_target)) if s != t)
    if mask is not None:
        if not isinstance(mask, ArraySpec) or mask.dtype not in MASK_DTYPES:
            raise TypeError(f"mask must be a boolean array, got {getattr(mask, 'dtype', type(mask).__name__)}")
        mask_strides = _broadcast_strides("mask", mask, score_target)
    for name, spec in (("seqused_q", seqused_q), ("seqused_k", seqused_k)):
        if spec is not None:
            _check_array(name, spec, 1, INDEX_DTYPES)
            _check_contiguous(name, spec)
            if spec.shape[0] != batch:
                raise ValueError(f"{name} must have shape ({batch},), got {tuple(spec.shape)}")

    mask_mod = _check_function("mask_mod", mask_mod)
    score_mod = _check_function("score_mod", score_mod)
    score_mod_grad = _check_function("score_mod_grad", score_mod_grad)
    if score_mod_grad is not None and score_mod is None:
        raise ValueError("score_mod_grad goes with score_mod")
    if block_mask is not None:
        if not isinstance(block_mask, BlockMaskSpec):
            raise TypeError(f"block_mask must come from create_block_mask, got {type(block_mask).__name__}")
        if mask_mod is not None and mask_mod is not block_mask.mask_mod:
            raise ValueError("mask_mod differs from the block_mask's: pass one or the other")
        want = (block_mask.seqlen_q, block_mask.seqlen_kv)
        if want != (nq, nkv) or block_mask.batch not in (1, batch) or block_mask.heads not in (1, hq):
            raise ValueError(f"block_mask was built for B={block_mask.batch}, H={block_mask.heads}, Nq={want[0]}, "
                             f"Nkv={want[1]}, not for {shapes}")
        if (block_mask.window_left, block_mask.window_right) != (window_left, window_right) and (causal or window is not None):
            raise ValueError("causal/window differ from the block_mask's: build the block mask with them")
        window_left, window_right = block_mask.window_left, block_mask.window_right
        mask_mod = block_mask.mask_mod
        if not bottom_right and nq != nkv and (window_left >= 0 or window_right >= 0):
            raise ValueError("a block_mask aligns causal/window bottom-right")

    block_d = _next_power_of_2(max(d, 16))
    block_dv = _next_power_of_2(max(dv, 16))
    head_block = max(block_d, block_dv)  # what tiles and dot precision are chosen by
    map_blocks = (block_mask.block_m, block_mask.block_n) if block_mask else None
    tiles = tuning.tile_config(head_block, 4 if q.dtype == "float32" else 2, window_right >= 0,
                         max(max_q, max_kv), map_blocks, window=window_left >= 0, dropout=dropout_p > 0,
                         decode=max_q <= tuning.DECODE_ROWS, float32_precision=float32_precision,
                         grid=tuning.CallGrid(batch * hq, max_q, batch * hkv, max_kv))
    # dK/dV's tile orientation: queries down keeps lse and delta in a few registers per thread
    # (32 fewer at D = 64, where the transposed tile spilled); at wider tiles Triton lays the
    # transposed P out with more registers than it saves.
    rows_down = head_block <= 64 and q.dtype != "float32"
    # The backward's row statistics padded, each row to whole blocks of every kernel that reads
    # it (a block map's blocks too), so that the loops read them unmasked. That is for the
    # transposed dK/dV tile, where lse and delta spread across the tile's columns and the masked
    # loads' fill values kept ~70 predicates a step packed into registers: H200, ab.py, D = 128
    # backward +3.2-3.3% dense, +5.3% GQA 32/8, +5.7% window, +6.5% documents; queries down
    # (D = 64) lost 7.7% non-causal that way. Varlen's sequences follow each other: no padding.
    padded_row_stats = not varlen and not rows_down
    row_block = math.lcm(128, tiles.dkdv.block_m, tiles.dq.block_m, tiles.forward.block_m, map_blocks[0] if map_blocks else 1)
    row_stats_shape = (batch, hq, _cdiv(nq, row_block) * row_block) if padded_row_stats else lse_shape
    # A block map lists each tile's blocks (split_spans cuts [lo, hi) only): never split.
    splits = 1 if block_mask is not None else tuning.kv_splits(
        _cdiv(max_q, tiles.forward.block_m) * hq * batch, _cdiv(max_kv, tiles.forward.block_n),
        runtime.multiprocessor_count())
    flags = dict(
        HEAD_DIM=d, HEAD_DIM_V=dv, BLOCK_D=block_d, BLOCK_DV=block_dv,
        BLOCK_M=tiles.forward.block_m, BLOCK_N=tiles.forward.block_n, **_map_ratios(block_mask, tiles.forward),
        # Over the inputs' (batch, row, head) strides and those of the dense outputs and gradients
        # (the last axis is D in every layout).
        STRIDE_ALIGN=stride_alignment(*q_strides[:3], *k_strides[:3], *v_strides[:3], *(
            s for shape in (out_shape, q.shape, k.shape, v.shape) for s in dense_strides(shape)[:-1])),
        # lse and delta ([B, Hq, Nq], or [Hq, total_q] for varlen): a head's row starts at a
        # multiple of the row length, so its alignment is the row length's.
        LSE_ALIGN=stride_alignment(lse_shape[-1]),
        ROW_ALIGN=stride_alignment(row_stats_shape[-1]),
        PADDED_ROW_STATS=padded_row_stats,
        # Lengths that are multiples of 16, marked so in the kernels (Triton's launcher does the
        # same for its integer arguments; jax-triton does not).
        Q_ALIGN=16 if nq % 16 == 0 else 1, KV_ALIGN=16 if nkv % 16 == 0 else 1,
        LIMIT_LEFT=window_left >= 0, LIMIT_RIGHT=window_right >= 0, VARLEN=varlen,
        HAS_SEQUSED_Q=seqused_q is not None, HAS_SEQUSED_K=seqused_k is not None,
        MASK_MOD=mask_mod, HAS_MASK_MOD=mask_mod is not None, HAS_DENSE_MASK=mask is not None,
        BLOCK_MAP=block_mask is not None,
        # The forward walks its key blocks in one loop, masking a block or not at run time, where
        # that measured faster than spans of masked and full blocks, each a pipeline to fill:
        # sliding windows (window 1024, N = 16k: 347 vs 329 TFLOP/s), block maps (the partial
        # blocks, then the full ones: 8 documents +3.3-4.1% in three ab.py runs, 2026-11-30; a
        # causal map's long programs level) and the short tiles that say so. Dense calls lost
        # that way (non-causal 0.93-0.96x, causal 16k 0.96x), and the backward's kernels 11%.
        ONE_LOOP=block_mask is not None or window_left >= 0 or tiles.forward.one_loop,
        # The backward without a window's left side: its masked blocks are causal's diagonal and
        # at most a ragged last block, walked in one loop that jumps over the full blocks, then
        # the full blocks; no third loop, usually empty, to fill and drain (GQA 32/8 causal
        # backward +7.5% on the H200). A window's two wide edges keep a loop each: one loop over
        # both cost it 3%.
        EDGES_TOGETHER=window_left < 0,
        SCORE_MOD=score_mod, SCORE_MOD_GRAD=score_mod_grad, HAS_SCORE_MOD=score_mod is not None,
        SOFTCAP_FORM=_softcap_form(softcap), HAS_ALIBI=alibi_slopes is not None, HAS_BIAS=bias is not None,
        DROPOUT_P=dropout_p,
        # Plain scaled scores with a positive scale: the forward takes the row max before scaling.
        # The scale's float32 factor must stay normal: a masked score, -inf, times a factor of 0
        # (flushed or rounded) would be NaN. Smaller scales scale first, where 0 is harmless.
        FOLD_SCALE=(scale * LOG2_E >= FLOAT32_TINY and score_mod is None and softcap is None
                    and alibi_slopes is None and bias is None),
        # Triton's interpreter gets bf16 dots wrong; upcast there, keep bf16 tensor cores on GPU.
        UPCAST_DOT=runtime.INTERPRETER and q.dtype == "bfloat16",
        DOT_PRECISION=tuning.dot_precision(q.dtype, head_block, float32_precision),
        BIAS_GRAD=False, SLOPES_GRAD=False,
        PAGE_SIZE=int(k.shape[axes[1]]) if block_table is not None else 0,
        # Rows past the sequence need the per-element bound only where one could read memory by
        # row (mask_mod, a dense mask, score_mod) or holds real data (seqused padding). Elsewhere
        # it loads zeros, its outputs are never stored and its lse reads +inf in the backward
        # (P = 0). Leaving the bound out keeps D = 64's forward under 128 registers per thread
        # when Triton cannot prove the length a multiple of 16 (jax-triton never marks integers
        # so): 133 -> 125, two programs per SM instead of one.
        BOUND_ROWS=any(x is not None for x in (mask_mod, mask, score_mod, seqused_q)),
        # Causal programs differ in length: heads in groups of up to 4 walk their blocks together,
        # longest first, so that no head's longest program starts last (see program_tile).
        HEAD_GROUP=next(g for g in (4, 2, 1) if hkv % g == 0) if window_right >= 0 and window_left < 0 else 1,
        ROWS_DOWN=rows_down,
        SPLIT_KEYS=splits > 1,
    )
    scalars = dict(
        sm_scale=float(scale), softcap=float(softcap or 1.0),
        window_left=max(window_left, 0), window_right=max(window_right, 0),
        bottom_right=int(bottom_right), seqlen_q=nq, seqlen_kv=nkv, gqa_group=hq // hkv,
        page_count=int(k.shape[axes[0]]) if block_table is not None else 1,
        stride_tb=int(block_table.strides[0]) if block_table is not None else 0,
        # A split forward's (SPLIT_KEYS) count, and one split's O and lse apart in its scratch.
        kv_splits=splits, stride_os=math.prod(out_shape), stride_ls=math.prod(lse_shape),
        **_named_strides("stride_q", "bnhd", q_strides), **_named_strides("stride_k", "bnhd", k_strides),
        **_named_strides("stride_v", "bnhd", v_strides), **_named_strides("stride_s", "bh", slope_strides),
        **_named_strides("stride_b", "bhqk", bias_strides), **_named_strides("stride_m", "bhqk", mask_strides),
        **_named_strides("stride_c", "bhq", (0, 0, 0)), **_named_strides("stride_i", "bhqk", (0, 0, 0, 0)),
        **_named_strides("stride_tc", "bhq", (0, 0, 0)), **_named_strides("stride_ti", "bhqk", (0, 0, 0, 0)),
    )
    auto_block_mask = None
    if mask_mod is not None and block_mask is None and not varlen:
        # The map folds the window in aligned bottom-right; top-left windows keep the plain path.
        if bottom_right or nq == nkv or (window_left < 0 and window_right < 0):
            auto_block_mask = BlockMaskSpec(
                mask_mod, batch, hq, nq, nkv, *tuning.default_blocks(), window_left, window_right
            )
    plan = AttentionPlan(
        batch=batch, seqlen_q=nq, seqlen_kv=nkv, max_seqlen_q=max_q, max_seqlen_kv=max_kv,
        heads_q=hq, heads_kv=hkv, head_dim=d, head_dim_v=dv, dtype=q.dtype, varlen=varlen,
        out_shape=out_shape, lse_shape=lse_shape, row_stats_shape=row_stats_shape,
        q_shape=tuple(q.shape), k_shape=tuple(k.shape), v_shape=tuple(v.shape),
        bias_shape=tuple(bias.shape) if bias is not None else None, bias_reduce_axes=bias_reduce,
        slopes_reduce_axes=(0, 2) if alibi_slopes is not None and len(alibi_slopes.shape) == 1 else (2,),
        block_mask=block_mask, auto_block_mask=auto_block_mask, scalars=scalars, flags=flags, tiles=tiles, layout_axes=axes,
    )
    if block_mask is not None:
        object.__setattr__(plan, "scalars", {**scalars, **plan.scalars_for_map(""), **plan.scalars_for_map("t_")})
    return plan


def plan_call(options: CallOptions, q: ArraySpec, k: ArraySpec, v: ArraySpec, arrays: Mapping[str, Any],
              cached: bool = True) -> "AttentionPlan":
    """plan_attention for options and optional arrays given by kernel argument name (others ignored).

    Plans are cached by their (hashable) inputs: a call at known shapes skips the validation,
    which would otherwise cost more host time than a short kernel takes on the GPU. cached=False
    plans afresh (a tracer that would step through the cache anyway).
    """
    # In ARRAY_KEYWORDS' order, not sorted: torch.compile cannot sort tuples holding ArraySpecs
    # (every call with an optional array failed under it before NOTES v0.50).
    keywords = tuple((keyword, arrays[name]) for name, keyword in ARRAY_KEYWORDS.items() if name in arrays)
    if cached:
        try:
            return _cached_plan(options, option_types(options), q, k, v, keywords)
        except TypeError as err:
            if "unhashable" not in str(err):
                raise
            # Symbolic sizes (torch.compile's dynamic shapes) do not hash: plan without the cache.
    return plan_attention(q, k, v, **options.as_keywords(), **dict(keywords))


def option_types(options: CallOptions) -> tuple:
    """The types of the options' values (of a tuple's items too), for cache keys: True == 1 and
    (True, 0) == (1, 0), but only ints and bools of the right kind pass validation."""
    values = (getattr(options, name) for name in CALL_OPTION_NAMES)
    return tuple(tuple(map(type, value)) if type(value) is tuple else type(value) for value in values)


# clear() of the caches that keep plans beside _cached_plan (a frontend's fast path).
_PLAN_HOLDERS: list = []


def register_plan_holder(clear: Any) -> None:
    """A frontend that keeps plans of its own registers how to forget them (see clear_plan_cache)."""
    _PLAN_HOLDERS.append(clear)


def clear_plan_cache() -> None:
    """Forget every cached plan, the frontends' included: what a change of the tile table (a test
    patching it) needs before the next call plans again."""
    _cached_plan.cache_clear()
    for clear in _PLAN_HOLDERS:
        clear()


@functools.lru_cache(maxsize=512)
def _cached_plan(options: CallOptions, types: tuple, q: ArraySpec, k: ArraySpec, v: ArraySpec, keywords: tuple) -> "AttentionPlan":
    return plan_attention(q, k, v, **options.as_keywords(), **dict(keywords))


def block_map_calls(spec: BlockMaskSpec) -> tuple:
    """The two launches that fill a BlockMask's arrays, in order.

    First (no inputs) -> STATE, COUNTS, INDICES; then (STATE) -> T_COUNTS, T_INDICES.
    Returns (call, input names) pairs; a call's args start with its inputs, in that order.
    """
    scalars = spec.scalars()
    values = spec.constexprs()
    calls = []
    for kernel, grid, outputs in (
        (block_map_kernel, spec.grid, ("STATE", "COUNTS", "INDICES")),
        (block_map_transpose_kernel, spec.transpose_grid, ("T_COUNTS", "T_INDICES")),
    ):
        names, constexpr_names = kernel_params(kernel)
        inputs = tuple(n for n in names if n not in scalars)
        calls.append((KernelCall(
            kernel, grid, tuple(scalars[n] for n in names if n in scalars), outputs,
            {n: values[n] for n in constexpr_names}, dict(num_warps=4, num_stages=1, **tuning.LAUNCH_OPTIONS),
        ), inputs))
    return tuple(calls)
