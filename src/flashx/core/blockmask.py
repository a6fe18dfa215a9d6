"""Block maps for mask_mod: which key blocks each query block sees, so empty blocks are skipped.

`block_map_kernel` evaluates mask_mod (with any causal/window mask folded in) on whole tiles
and classifies each (query block, key block) as empty, partial or full, writing compact lists
for the forward and dQ passes; `block_map_transpose_kernel` derives the lists per key block
that the dK/dV pass walks.
"""
from . import runtime  # noqa: F401, I001  (first: decides compiled vs interpreted before triton loads)

import triton
import triton.language as tl

from .scores import visible_pairs

EMPTY: tl.constexpr = tl.constexpr(0)
PARTIAL: tl.constexpr = tl.constexpr(1)
FULL: tl.constexpr = tl.constexpr(2)


@triton.jit
def block_map_kernel(
    seqlen_q, seqlen_kv, window_left, window_right, num_q_blocks, num_kv_blocks,
    STATE, COUNTS, INDICES,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASK_MOD: tl.constexpr,
    LIMIT_LEFT: tl.constexpr, LIMIT_RIGHT: tl.constexpr,
):
    """One query block of one (batch, head). Grid (nQ, H, B); all outputs dense:
    STATE [B, H, nQ, nK] int8, COUNTS [B, H, nQ, 2] (partial, full), INDICES [B, H, nQ, 2, nK].

    Causal/window align bottom-right, like flashx's attention.
    """
    pid_m = tl.program_id(0)
    head = tl.program_id(1)
    batch = tl.program_id(2)
    row = ((batch * tl.num_programs(1) + head) * num_q_blocks + pid_m).to(tl.int64)  # row of [B, H, nQ]
    q_idx = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rows_in_range = tl.sum((q_idx < seqlen_q).to(tl.int32), 0)
    diag_offset = seqlen_kv - seqlen_q
    p_indices = INDICES + row * 2 * num_kv_blocks
    n_partial = 0
    n_full = 0
    for kv_block in range(0, num_kv_blocks):
        kv_idx = kv_block * BLOCK_N + tl.arange(0, BLOCK_N)
        visible = visible_pairs(
            batch, head, q_idx[:, None], kv_idx[None, :], seqlen_q, seqlen_kv, diag_offset,
            window_left, window_right, STATE, 0, 0, MASK_MOD, LIMIT_LEFT, LIMIT_RIGHT, True, False, True,
        )
        seen = tl.sum(tl.sum(visible.to(tl.int32), 1), 0)
        full = seen == rows_in_range * BLOCK_N  # every key in range and seen by every row in range
        partial = (seen > 0) & (seen < rows_in_range * BLOCK_N)
        tl.store(p_indices + n_partial, kv_block, mask=partial)
        tl.store(p_indices + num_kv_blocks + n_full, kv_block, mask=full)
        n_partial += partial.to(tl.int32)
        n_full += full.to(tl.int32)
        state = tl.where(full, FULL, tl.where(partial, PARTIAL, EMPTY))
        tl.store(STATE + row * num_kv_blocks + kv_block, state.to(tl.int8))
    tl.store(COUNTS + row * 2, n_partial)
    tl.store(COUNTS + row * 2 + 1, n_full)


@triton.jit
def block_map_transpose_kernel(
    STATE,
    num_q_blocks, num_kv_blocks,
    T_COUNTS, T_INDICES,
):
    """One key block of one (batch, head). Grid (nK, H, B); all dense:
    T_COUNTS [B, H, nK, 2] (partial, full), T_INDICES [B, H, nK, 2, nQ].
    """
    pid_n = tl.program_id(0)
    head = tl.program_id(1)
    batch = tl.program_id(2)
    bh = (batch * tl.num_programs(1) + head).to(tl.int64)
    row = bh * num_kv_blocks + pid_n  # row of [B, H, nK]
    p_state = STATE + bh * num_q_blocks * num_kv_blocks + pid_n
    p_indices = T_INDICES + row * 2 * num_q_blocks
    n_partial = 0
    n_full = 0
    for q_block in range(0, num_q_blocks):
        state = tl.load(p_state + q_block * num_kv_blocks)
        partial = state == PARTIAL
        full = state == FULL
        tl.store(p_indices + n_partial, q_block, mask=partial)
        tl.store(p_indices + num_q_blocks + n_full, q_block, mask=full)
        n_partial += partial.to(tl.int32)
        n_full += full.to(tl.int32)
    tl.store(T_COUNTS + row * 2, n_partial)
    tl.store(T_COUNTS + row * 2 + 1, n_full)
