"""Warp-specialized dK/dV and dQ kernels in Gluon for Hopper (sm_90): the backward, whose dK/dV
half loses to FlexAttention on windows and documents (NOTES v0.6-v0.9), written the way the
Gluon forward is.

The plan launches them where tuning.GLUON_DKDV_ROUTE / GLUON_DKDV_TMA_ROUTE / GLUON_DQ_ROUTE name
a tile (D = 128; NOTES v0.17 has the first run's checks and times).
benchmarks/gluon_backward_check.py checks them against float64 and times them beside the
portable backward.

Why: the portable dK/dV tile (64 queries x 128 keys, 8 warps) holds dK and dV for 128 keys, K,
V, and the step's S, dP in the registers of two warpgroups that meet at barriers every step, and
spills (48-96 bytes of stack at D = 128, 72 on the window). Here one program owns BLOCK_N = 64 *
NUM_CONSUMERS keys of one (batch, kv head) and runs NUM_CONSUMERS + 1 partitions:
- the producer (PRODUCER_WARPS warps, few registers) streams each 64-row query block's Q and dO
  into rings of STAGES shared-memory buffers (TMA, or cp.async), over every q head of the GQA
  group;
- each consumer (one warpgroup) owns 64 keys: K and V in shared memory, dK and dV as wgmma
  accumulators in its registers ([64, D] float32 each), and per query block S^T = K Q^T,
  dP^T = V dO^T, P^T = exp2(S^T * scale * log2(e) - lse_log2), dS^T = P^T (dP^T - delta),
  dV += P^T dO and dK += dS^T Q, the last two with P^T and dS^T as register operands.
The consumers are not synchronized with each other, so one's exponentials run under the
other's products (the forward's untimed order, without TURNS).

The dQ kernel (gluon_attention_dq_kernel) is the forward's shape: a program owns 128 query rows
of one (batch, q head), the producer streams the K and V blocks (64 keys) they see, and each
consumer holds its 64 rows' Q, dO, lse_log2 and delta and accumulates dQ += dS K with dS in
registers (S = Q K^T, P = exp2(S c - lse_log2), dP = dO V^T, dS = P (dP - delta)). No atomics:
dQ stays deterministic, as the portable backward's is. Launched before dK/dV (ROW_STATS), its
consumers compute their rows' lse_log2 and delta from O, dO and lse and write them for dK/dV,
while the producer's first copies are in flight, in place of the preprocess pass.

Inputs as the portable backward's: Q, dO [B, Nq, Hq, D]; K, V [B, Nkv, Hkv, D] through their
strides (the last axis contiguous, the others multiples of STRIDE_ALIGN elements); LSE_LOG2 and
DELTA [B, Hq, R] float32 with contiguous rows, R >= cdiv(Nq, 64) * 64 (the plan's padded row
statistics: lse_log2 +inf and delta 0 past Nq, so no step masks a query row). Outputs DK, DV
[B, Nkv, Hkv, D] (rows past Nkv are not written). LIMIT_RIGHT: causal, aligned bottom-right when
bottom_right is 1; LIMIT_LEFT: a query i sees keys from i' - window_left (i' = i + Nkv - Nq when
bottom-right). D = Dv = 64 or 128; 16-bit inputs.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma

from .gluon_forward import (
    CONSUMER_ROWS,
    CONSUMER_WARPS,
    LOG2_E,
    _aligned,
    _as_tile,
    _copy_block,
    _copy_layout,
    _element_type,
    _key_blocks_seen,
    _map_row,
    _map_walk,
    _ring_slot,
    _tile,
    _tile_walk,
    _unmasked_key_blocks,
    _walk_block,
    _wgmma_layout,
    descriptor_layout,
    rows_descriptor,
)

KEYS_PER_CONSUMER = CONSUMER_ROWS  # 64 keys a warpgroup
QUERY_BLOCK = CONSUMER_ROWS  # 64 query rows a step


@gluon.jit
def _load_rows(X, row0, stride_n, rows, BLOCK_D: gl.constexpr):
    """Rows row0 .. row0 + 64 of X (a pointer to one (batch, head)'s row 0) into a consumer
    warpgroup's registers; rows from `rows` on read 0."""
    layout: gl.constexpr = _copy_layout(BLOCK_D, CONSUMER_WARPS)
    offs_n = gl.arange(0, CONSUMER_ROWS, layout=gl.SliceLayout(1, layout))
    offs_d = gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, layout))
    ok = (row0 + offs_n)[:, None] < rows
    return gl.load(X + (row0 + offs_n).to(gl.int64)[:, None] * stride_n + offs_d[None, :], mask=ok, other=0.0)


@gluon.jit
def _write_rows(X, row0, stride_n, rows, tile):
    """tile (64 rows of a consumer warpgroup, any layout) into rows row0 .. row0 + 64 of X (a pointer
    to one (batch, head)'s row 0), rows from `rows` on left out: converted to _load_rows' layout
    first, so that each thread stores 16 bytes at once (wgmma's accumulator layout holds 2 adjacent
    values a thread, 4-byte stores)."""
    BLOCK_D: gl.constexpr = tile.shape[1]
    layout: gl.constexpr = _copy_layout(BLOCK_D, CONSUMER_WARPS)
    offs_n = gl.arange(0, CONSUMER_ROWS, layout=gl.SliceLayout(1, layout))
    offs_d = gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, layout))
    ok = (row0 + offs_n)[:, None] < rows
    gl.store(X + (row0 + offs_n).to(gl.int64)[:, None] * stride_n + offs_d[None, :], gl.convert_layout(tile, layout),
             mask=ok)


@gluon.jit
def _stage_rows(X, row0, stride_n, rows, smem, BLOCK_D: gl.constexpr):
    """_load_rows through a consumer warpgroup's registers into smem."""
    smem.store(_load_rows(X, row0, stride_n, rows, BLOCK_D))


@gluon.jit
def _ring_buffers(dtype: gl.constexpr, STAGES: gl.constexpr, ROWS: gl.constexpr, HEAD_DIM: gl.constexpr,
                  TMA: gl.constexpr):
    """Two rings of STAGES [ROWS, HEAD_DIM] buffers that the producer fills: TMA's hold a
    descriptor's [1, ROWS, 1, HEAD_DIM] block (descriptor_layout), cp.async's the tile itself."""
    if TMA:
        layout: gl.constexpr = descriptor_layout(ROWS, HEAD_DIM, dtype)
        a = gl.allocate_shared_memory(dtype, [STAGES, 1, ROWS, 1, HEAD_DIM], layout)
        b = gl.allocate_shared_memory(dtype, [STAGES, 1, ROWS, 1, HEAD_DIM], layout)
    else:
        layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([ROWS, HEAD_DIM], dtype)
        a = gl.allocate_shared_memory(dtype, [STAGES, ROWS, HEAD_DIM], layout)
        b = gl.allocate_shared_memory(dtype, [STAGES, ROWS, HEAD_DIM], layout)
    return a, b


@gluon.jit
def _aligned_strides(stride_b, stride_n, stride_h, ALIGN: gl.constexpr):
    """An array's (batch, row, head) strides, each a multiple of ALIGN the compiler can see."""
    return _aligned(stride_b, ALIGN), _aligned(stride_n, ALIGN), _aligned(stride_h, ALIGN)


@gluon.jit
def _ring(STAGES: gl.constexpr, COPY_ARRIVALS: gl.constexpr, READERS: gl.constexpr):
    """Barriers of two rings of STAGES stages (ready: the copies' arrivals; empty: each reader
    hands a stage back on its own): (a_ready, b_ready, a_empty, b_empty)."""
    a_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    b_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    a_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    b_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for stage in gl.static_range(STAGES):
        mbarrier.init(a_ready.index(stage), count=COPY_ARRIVALS)
        mbarrier.init(b_ready.index(stage), count=COPY_ARRIVALS)
        mbarrier.init(a_empty.index(stage), count=READERS)
        mbarrier.init(b_empty.index(stage), count=READERS)
    return a_ready, b_ready, a_empty, b_empty


@gluon.jit
def _query_blocks(k0, seqlen_q, diag_offset, window_left, BLOCK_N: gl.constexpr, LIMIT_RIGHT: gl.constexpr,
                  LIMIT_LEFT: gl.constexpr):
    """[first, end) of the 64-row query blocks that see any of keys k0 .. k0 + BLOCK_N: causal
    starts at the first key's diagonal, a left window ends where the last key leaves it. May be
    empty (the program then writes zeros)."""
    q_lo = 0
    q_hi = seqlen_q  # exclusive
    if LIMIT_RIGHT:
        q_lo = gl.maximum(k0 - diag_offset, 0)
    if LIMIT_LEFT:
        q_hi = gl.minimum(k0 + BLOCK_N + window_left - diag_offset, seqlen_q)
    first = q_lo // QUERY_BLOCK
    end = gl.maximum((gl.maximum(q_hi, 0) + QUERY_BLOCK - 1) // QUERY_BLOCK, first)
    return first, end


@gluon.jit
def _dkdv_producer(Q, DO, strides, sizes, grid_sizes, rings, map_t,
                   BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr, STAGES: gl.constexpr,
                   PRODUCER_WARPS: gl.constexpr, LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr,
                   TMA: gl.constexpr, BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr,
                   DEVICE_DESCRIPTORS: gl.constexpr, PERSISTENT: gl.constexpr):
    """Copy Q_i then dO_i into ring step s's stage (s % STAGES) once both consumers have handed it
    back, for every query block i this program's keys see (BLOCK_MAP: the transposed map's
    partial list, then its full one), of every q head of the kv head's group; PERSISTENT: for
    each of its key blocks in turn (_dkdv_tile), the ring steps running on. DEVICE_DESCRIPTORS:
    Q and dO come as pointers, and their TMA descriptors are built here, in the program's global
    scratch (for launchers that cannot pass host descriptors: jax-triton's).

    strides: Q's and dO's (batch, row, head) strides; sizes, grid_sizes, rings, map_t: as
    _dkdv_consumer's."""
    stride_qb, stride_qn, stride_qh, stride_dob, stride_don, stride_doh = strides
    seqlen_q, seqlen_kv, diag_offset, window_left, gqa_group = sizes
    num_heads_kv, num_batches = grid_sizes
    if DEVICE_DESCRIPTORS:
        if PERSISTENT:
            batches, heads = num_batches, num_heads_kv * gqa_group
        else:
            batches, heads = gl.num_programs(2), gl.num_programs(1) * gqa_group
        Q = rows_descriptor(Q, batches, seqlen_q, heads, stride_qb, stride_qn, stride_qh, QUERY_BLOCK, BLOCK_D, BLOCK_D)
        DO = rows_descriptor(DO, batches, seqlen_q, heads, stride_dob, stride_don, stride_doh, QUERY_BLOCK, BLOCK_D,
                             BLOCK_D)
    layout: gl.constexpr = _copy_layout(BLOCK_D, PRODUCER_WARPS)
    offs_m = gl.arange(0, QUERY_BLOCK, layout=gl.SliceLayout(1, layout))
    offs_d = gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, layout))
    q_offs = offs_m[:, None] * stride_qn + offs_d[None, :]
    do_offs = offs_m[:, None] * stride_don + offs_d[None, :]
    offsets = (offs_m, q_offs, do_offs)
    s = gl.to_tensor(0)  # ring steps so far
    num_tiles, first_tile, end_tile, step = _dkdv_tile_walk(seqlen_kv, grid_sizes, BLOCK_N, PERSISTENT, LIMIT_RIGHT)
    for t in range(first_tile, end_tile, step):
        tile = _dkdv_tile(t, num_tiles, grid_sizes, seqlen_kv, BLOCK_N, LIMIT_RIGHT, PERSISTENT)
        s = _dkdv_producer_tile(Q, DO, strides, sizes, offsets, rings, map_t, tile, s, BLOCK_N, STAGES,
                                LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS)


@gluon.jit
def _dkdv_tile_walk(seqlen_kv, grid_sizes, BLOCK_N: gl.constexpr, PERSISTENT: gl.constexpr,
                    LIMIT_RIGHT: gl.constexpr):
    """(tiles, first, end, step): the key-block tiles of every (kv head, batch) and this
    program's walk over them (_tile_walk), the same for the producer and each consumer."""
    num_heads_kv, num_batches = grid_sizes
    num_tiles = gl.cdiv(seqlen_kv, BLOCK_N) * num_heads_kv * num_batches
    first, end, step = _tile_walk(num_tiles, seqlen_kv, BLOCK_N, PERSISTENT, LIMIT_RIGHT)
    return num_tiles, first, end, step


@gluon.jit
def _dkdv_tile(t, num_tiles, grid_sizes, seqlen_kv, BLOCK_N: gl.constexpr, LIMIT_RIGHT: gl.constexpr,
               PERSISTENT: gl.constexpr):
    """(key block, kv head, batch) of tile t: the program's own (not PERSISTENT), or the
    forward's persistent walk (_tile) over key blocks, under causal masks the first key blocks
    (which the most queries see) first."""
    num_heads_kv, num_batches = grid_sizes
    block, kv_head, batch = _tile(t, num_tiles, num_heads_kv, num_batches, seqlen_kv, BLOCK_N, LIMIT_RIGHT,
                                  PERSISTENT)
    if LIMIT_RIGHT:  # _tile starts from the last block (the forward's heaviest): the other way round
        block = (gl.cdiv(seqlen_kv, BLOCK_N) if PERSISTENT else gl.num_programs(0)) - 1 - block
    return block, kv_head, batch


@gluon.jit
def _dkdv_producer_tile(Q, DO, strides, sizes, offsets, rings, map_t, tile, s, BLOCK_N: gl.constexpr,
                        STAGES: gl.constexpr, LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr,
                        TMA: gl.constexpr, BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr):
    """The producer's copies for one key block (tile: key block, kv head, batch) from ring step
    s; the next ring step."""
    stride_qb, stride_qn, stride_qh, stride_dob, stride_don, stride_doh = strides
    seqlen_q, seqlen_kv, diag_offset, window_left, gqa_group = sizes
    offs_m, q_offs, do_offs = offsets
    k_block, kv_head, batch = tile
    b64 = batch.to(gl.int64)
    first, end = _query_blocks(k_block * BLOCK_N, seqlen_q, diag_offset, window_left, BLOCK_N, LIMIT_RIGHT,
                               LIMIT_LEFT)
    for g in range(gqa_group):
        head = kv_head * gqa_group + g
        q_base = b64 * stride_qb + head.to(gl.int64) * stride_qh
        do_base = b64 * stride_dob + head.to(gl.int64) * stride_doh
        copies = (Q, DO, q_base, do_base, stride_qn, stride_don, q_offs, do_offs, offs_m, batch, head, seqlen_q)
        if BLOCK_MAP:
            p_counts, p_list, stride_kind = _map_row(map_t, batch, head, k_block)
            n_partial, n_full = _map_walk(p_counts, MAP_STEPS)
            s = _copy_rows(copies, rings, s, 0, n_partial, p_list, STAGES, TMA, BLOCK_MAP, MAP_STEPS)
            s = _copy_rows(copies, rings, s, 0, n_full, p_list + stride_kind, STAGES, TMA, BLOCK_MAP, MAP_STEPS)
        else:
            s = _copy_rows(copies, rings, s, first, end, Q, STAGES, TMA, BLOCK_MAP, MAP_STEPS)
    return s


@gluon.jit
def _copy_rows(copies, rings, s, begin, end, p_list, STAGES: gl.constexpr, TMA: gl.constexpr,
               BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr):
    """Q's and dO's 64-row blocks of walk steps begin .. end (_walk_block) into ring steps s, s + 1,
    ...; the next ring step."""
    Q, DO, q_base, do_base, stride_qn, stride_don, q_offs, do_offs, offs_m, batch, head, seqlen_q = copies
    q_smem, do_smem, q_ready, do_ready, q_empty, do_empty = rings
    for i in range(begin, end):
        stage, phase = _ring_slot(s, STAGES)
        phase = phase ^ 1  # a fresh barrier counts the phase before 0 as complete
        row0 = _walk_block(i, p_list, MAP_STEPS, BLOCK_MAP) * QUERY_BLOCK
        # Rows past Nq arrive as zeros (TMA: by the copy engine); their lse_log2 is +inf.
        in_bounds = (row0 + offs_m)[:, None] < seqlen_q
        coord = (batch, row0, head, 0)
        start = row0.to(gl.int64)
        _copy_block(Q, q_base, start, stride_qn, q_offs, in_bounds, coord, q_smem, q_ready, q_empty, stage, phase, TMA)
        _copy_block(DO, do_base, start, stride_don, do_offs, in_bounds, coord, do_smem, do_ready, do_empty, stage,
                    phase, TMA)
        s += 1
    return s


@gluon.jit
def _unmasked_blocks(kc0, first, end, diag_offset, window_left, LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr):
    """[lo, hi) within [first, end): the query blocks in which every query sees all of keys kc0 ..
    kc0 + 64 (the blocks before lo cross the keys' diagonal, those from hi their window's left
    edge). Signed division truncates, so the negative cases are settled first."""
    lo = first
    hi = end
    if LIMIT_RIGHT:  # block b is masked while b * 64 + diag_offset < kc0 + 63
        x = kc0 + KEYS_PER_CONSUMER - 2 - diag_offset
        lo = gl.minimum(gl.maximum(gl.where(x < 0, 0, x // QUERY_BLOCK + 1), first), end)
    if LIMIT_LEFT:  # block b is masked once kc0 < b * 64 + 63 + diag_offset - window_left
        y = kc0 - (QUERY_BLOCK - 1) - diag_offset + window_left
        hi = gl.minimum(gl.maximum(gl.where(y < 0, 0, y // QUERY_BLOCK + 1), lo), end)
    return lo, hi


@gluon.jit
def _mask_scores_t(s_t, keys, q0, offs_q, diag_offset, window_left, batch, head, LIMIT_RIGHT: gl.constexpr,
                   LIMIT_LEFT: gl.constexpr, HAS_MASK_MOD: gl.constexpr, MASK_MOD: gl.constexpr):
    """-inf where key keys[r] is outside query q0 + offs_q[c]'s mask (S^T: keys down, queries
    across): causal, the left window, and mask_mod(batch, head, q_idx, kv_idx). Each row's bounds
    on offs_q, against offs_q itself: the column indices stay compile-time constants per thread
    instead of a register each."""
    first_q = keys - diag_offset - q0  # the row's first visible column (causal)
    visible = offs_q[None, :] >= first_q[:, None] - (1 << 30)  # all True, in the tile's shape
    if LIMIT_RIGHT:
        visible = offs_q[None, :] >= first_q[:, None]
    if LIMIT_LEFT:
        visible = visible & (offs_q[None, :] <= (first_q + window_left)[:, None])
    if HAS_MASK_MOD:
        visible = visible & (MASK_MOD(batch, head, (q0 + offs_q)[None, :], keys[:, None]) != 0)
    return gl.where(visible, s_t, float("-inf"))


@gluon.jit
def _dkdv_steps(dk, dv, s, begin, end, p_list, stats, operands, rings, BLOCK_D: gl.constexpr, STAGES: gl.constexpr,
                MASKED: gl.constexpr, LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr, TMA: gl.constexpr,
                BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr, HAS_MASK_MOD: gl.constexpr,
                MASK_MOD: gl.constexpr):
    """dK and dV after walk steps begin .. end (_walk_block: query blocks, or a block map's list)
    of one q head, ring steps s, s + 1, ...; (dk, dv, next step). MASKED: the blocks cross the
    keys' diagonal or window edge, or are a map's partial blocks."""
    lse_log2_row, delta_row, batch, head = stats
    k_smem, v_smem, s_zero, keys, offs_q, qk_scale_log2, diag_offset, window_left = operands
    q_smem, do_smem, q_ready, do_ready, q_empty, do_empty = rings
    dtype: gl.constexpr = k_smem.dtype
    operand_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dk.type.layout, k_width=2)
    for i in range(begin, end):
        stage, phase = _ring_slot(s, STAGES)
        q0 = _walk_block(i, p_list, MAP_STEPS, BLOCK_MAP) * QUERY_BLOCK
        # Padded row statistics: no mask (lse_log2 +inf past Nq makes P^T 0 there).
        lse_log2 = gl.load(lse_log2_row + q0 + offs_q)
        mbarrier.wait(q_ready.index(stage), phase)
        q_tile = _as_tile(q_smem.index(stage), QUERY_BLOCK, BLOCK_D, TMA)
        s_t = warpgroup_mma(k_smem, q_tile.permute((1, 0)), s_zero, use_acc=False)
        if MASKED:
            s_t = _mask_scores_t(s_t, keys, q0, offs_q, diag_offset, window_left, batch, head, LIMIT_RIGHT,
                                 LIMIT_LEFT, HAS_MASK_MOD, MASK_MOD)
        # In this order, at most P^T and dP^T ([64, 64] float32 each) live beside dK and dV
        # ([64, D] each): with S^T, dP^T, lse and delta all live at once the consumer spilled.
        p_t = gl.exp2(s_t * qk_scale_log2 - lse_log2[None, :])
        mbarrier.wait(do_ready.index(stage), phase)
        do_tile = _as_tile(do_smem.index(stage), QUERY_BLOCK, BLOCK_D, TMA)
        dv = warpgroup_mma(gl.convert_layout(p_t.to(dtype), operand_layout), do_tile, dv)
        delta = gl.load(delta_row + q0 + offs_q)
        dp_t = warpgroup_mma(v_smem, do_tile.permute((1, 0)), s_zero, use_acc=False)
        ds_t = p_t * (dp_t - delta[None, :])
        dk = warpgroup_mma(gl.convert_layout(ds_t.to(dtype), operand_layout), q_tile, dk)
        mbarrier.arrive(q_empty.index(stage))
        mbarrier.arrive(do_empty.index(stage))
        s += 1
    return dk, dv, s


@gluon.jit
def _dkdv_consumer(K, V, DK, DV, LSE_LOG2, DELTA, strides, sizes, grid_sizes, qk_scale_log2, sm_scale, rings,
                   kv_smem, map_t, CONSUMER: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr,
                   STAGES: gl.constexpr, LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr, TMA: gl.constexpr,
                   BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr, HAS_MASK_MOD: gl.constexpr,
                   MASK_MOD: gl.constexpr, PERSISTENT: gl.constexpr, TMA_STORE: gl.constexpr,
                   DEVICE_DESCRIPTORS: gl.constexpr):
    """One warpgroup: keys k0 + CONSUMER * 64 .. + 64 of this program's block (PERSISTENT: of
    each of its key blocks in turn, as the producer walks them); their dK and dV.

    strides: K's, V's, the row statistics' (batch, head), dK's and dV's (batch, row, head);
    sizes: (seqlen_q, seqlen_kv, diag_offset, window_left, gqa_group); grid_sizes: (kv heads,
    batches); rings: (q_smem, do_smem, q_ready, do_ready, q_empty, do_empty); kv_smem:
    [2 * consumers, 64, D] ([2 * consumers, 1, 64, 1, D] with TMA_STORE), this consumer's K at
    2 * CONSUMER, its V after it; map_t: the transposed block map (_map_row), with BLOCK_MAP.
    TMA_STORE with DEVICE_DESCRIPTORS: DK and DV come as pointers, and the consumer builds their
    descriptors in the program's scratch."""
    seqlen_q, seqlen_kv, diag_offset, window_left, gqa_group = sizes
    if TMA_STORE and DEVICE_DESCRIPTORS:
        DK, DV = _gradient_descriptors(DK, DV, strides, seqlen_kv, grid_sizes, BLOCK_D)
    s = gl.to_tensor(0)  # ring steps so far
    num_tiles, first_tile, end_tile, step = _dkdv_tile_walk(seqlen_kv, grid_sizes, BLOCK_N, PERSISTENT, LIMIT_RIGHT)
    for t in range(first_tile, end_tile, step):
        tile = _dkdv_tile(t, num_tiles, grid_sizes, seqlen_kv, BLOCK_N, LIMIT_RIGHT, PERSISTENT)
        s = _dkdv_consumer_tile(K, V, DK, DV, LSE_LOG2, DELTA, strides, sizes, qk_scale_log2, sm_scale, rings,
                                kv_smem, map_t, tile, s, CONSUMER, BLOCK_N, BLOCK_D, STAGES, LIMIT_RIGHT, LIMIT_LEFT,
                                TMA, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD, TMA_STORE)
    if TMA_STORE:
        tma.store_wait(0)  # the program's shared memory outlives the last stores' reads


@gluon.jit
def _gradient_descriptors(DK, DV, strides, seqlen_kv, grid_sizes, BLOCK_D: gl.constexpr):
    """DK and DV (pointers) as TMA descriptors over [B, Nkv, Hkv, D] with one consumer's
    [1, 64, 1, D] block, built in the program's global scratch (TMA_STORE for launchers without
    host descriptors: jax-triton's)."""
    (stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh, stride_rb, stride_rh,
     stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh) = strides
    num_heads_kv, num_batches = grid_sizes
    dk = rows_descriptor(DK, num_batches, seqlen_kv, num_heads_kv, stride_dkb, stride_dkn, stride_dkh,
                         KEYS_PER_CONSUMER, BLOCK_D, BLOCK_D)
    dv = rows_descriptor(DV, num_batches, seqlen_kv, num_heads_kv, stride_dvb, stride_dvn, stride_dvh,
                         KEYS_PER_CONSUMER, BLOCK_D, BLOCK_D)
    return dk, dv


@gluon.jit
def _dkdv_consumer_tile(K, V, DK, DV, LSE_LOG2, DELTA, strides, sizes, qk_scale_log2, sm_scale, rings, kv_smem,
                        map_t, tile, s, CONSUMER: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr,
                        STAGES: gl.constexpr, LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr,
                        TMA: gl.constexpr, BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr,
                        HAS_MASK_MOD: gl.constexpr, MASK_MOD: gl.constexpr, TMA_STORE: gl.constexpr):
    """One consumer's part of one key block (tile: key block, kv head, batch) from ring step s:
    its dK and dV, written (TMA_STORE: by TMA from its K and V buffers, which the last step has
    done reading); the next ring step."""
    (stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh, stride_rb, stride_rh,
     stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh) = strides
    seqlen_q, seqlen_kv, diag_offset, window_left, gqa_group = sizes
    dtype: gl.constexpr = _element_type(DK, TMA_STORE)
    s_layout: gl.constexpr = _wgmma_layout(QUERY_BLOCK)
    acc_layout: gl.constexpr = _wgmma_layout(BLOCK_D)

    k_block, kv_head, batch = tile
    b64 = batch.to(gl.int64)
    h64 = kv_head.to(gl.int64)
    k0 = k_block * BLOCK_N
    kc0 = k0 + CONSUMER * KEYS_PER_CONSUMER

    # This consumer's K and V, through registers into shared memory (wgmma's A operands of S^T and
    # dP^T); keys past Nkv read 0 (their dK and dV are never written).
    k_buffer = kv_smem.index(2 * CONSUMER)
    v_buffer = kv_smem.index(2 * CONSUMER + 1)
    k_smem = _as_tile(k_buffer, KEYS_PER_CONSUMER, BLOCK_D, TMA_STORE)
    v_smem = _as_tile(v_buffer, KEYS_PER_CONSUMER, BLOCK_D, TMA_STORE)
    if TMA_STORE:
        tma.store_wait(0)  # this consumer's previous key block's dK and dV have left these buffers
    _stage_rows(K + (b64 * stride_kb + h64 * stride_kh), kc0, stride_kn, seqlen_kv, k_smem, BLOCK_D)
    _stage_rows(V + (b64 * stride_vb + h64 * stride_vh), kc0, stride_vn, seqlen_kv, v_smem, BLOCK_D)
    fence_async_shared()

    keys = kc0 + gl.arange(0, KEYS_PER_CONSUMER, layout=gl.SliceLayout(1, s_layout))
    offs_q = gl.arange(0, QUERY_BLOCK, layout=gl.SliceLayout(0, s_layout))
    s_zero = gl.zeros([KEYS_PER_CONSUMER, QUERY_BLOCK], gl.float32, layout=s_layout)
    dk = gl.zeros([KEYS_PER_CONSUMER, BLOCK_D], gl.float32, layout=acc_layout)
    dv = gl.zeros([KEYS_PER_CONSUMER, BLOCK_D], gl.float32, layout=acc_layout)
    first, end = _query_blocks(k0, seqlen_q, diag_offset, window_left, BLOCK_N, LIMIT_RIGHT, LIMIT_LEFT)
    lo, hi = _unmasked_blocks(kc0, first, end, diag_offset, window_left, LIMIT_RIGHT, LIMIT_LEFT)
    for g in range(gqa_group):
        head = kv_head * gqa_group + g
        stats = (LSE_LOG2 + (b64 * stride_rb + head.to(gl.int64) * stride_rh),
                 DELTA + (b64 * stride_rb + head.to(gl.int64) * stride_rh), batch, head)
        operands = (k_smem, v_smem, s_zero, keys, offs_q, qk_scale_log2, diag_offset, window_left)
        if BLOCK_MAP:  # the map's partial blocks, masked; then its full ones
            p_counts, p_list, stride_kind = _map_row(map_t, batch, head, k_block)
            n_partial, n_full = _map_walk(p_counts, MAP_STEPS)
            dk, dv, s = _dkdv_steps(dk, dv, s, 0, n_partial, p_list, stats, operands, rings, BLOCK_D, STAGES, True,
                                    LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)
            dk, dv, s = _dkdv_steps(dk, dv, s, 0, n_full, p_list + stride_kind, stats, operands, rings, BLOCK_D,
                                    STAGES, False, LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD,
                                    MASK_MOD)
        else:
            # Three loops, so that only the blocks that cross the keys' diagonal or window edge pay
            # the mask: a run-time branch in one loop kept both paths' values live (600 bytes of
            # stack).
            dk, dv, s = _dkdv_steps(dk, dv, s, first, lo, K, stats, operands, rings, BLOCK_D, STAGES, True,
                                    LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)
            dk, dv, s = _dkdv_steps(dk, dv, s, lo, hi, K, stats, operands, rings, BLOCK_D, STAGES, False,
                                    LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)
            dk, dv, s = _dkdv_steps(dk, dv, s, hi, end, K, stats, operands, rings, BLOCK_D, STAGES, True,
                                    LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)

    if TMA_STORE:  # the steps' products are synchronous: K and V are no longer read
        k_smem.store((dk * sm_scale).to(dtype))
        v_smem.store(dv.to(dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(DK, [batch, kc0, kv_head, 0], k_buffer)  # keys past Nkv: clipped
        tma.async_copy_shared_to_global(DV, [batch, kc0, kv_head, 0], v_buffer)
    else:
        _write_rows(DK + (b64 * stride_dkb + h64 * stride_dkh), kc0, stride_dkn, seqlen_kv, (dk * sm_scale).to(dtype))
        _write_rows(DV + (b64 * stride_dvb + h64 * stride_dvh), kc0, stride_dvn, seqlen_kv, dv.to(dtype))
    return s


@gluon.jit
def gluon_attention_dkdv_kernel(
    Q, K, V, DO, LSE_LOG2, DELTA, MAP_T_COUNTS, MAP_T_INDICES,
    sm_scale, bottom_right, window_left, seqlen_q, seqlen_kv, gqa_group, num_heads_kv, num_batches,
    stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh,
    stride_dob, stride_don, stride_doh, stride_rb, stride_rh,
    stride_tcb, stride_tch, stride_tcq, stride_tib, stride_tih, stride_tiq, stride_tik,
    stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh,
    DK, DV, DESCRIPTOR_SCRATCH,
    HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr,
    STRIDE_ALIGN: gl.constexpr, ROW_ALIGN: gl.constexpr, STAGES: gl.constexpr, PRODUCER_WARPS: gl.constexpr,
    PRODUCER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr, TMA: gl.constexpr, DEVICE_DESCRIPTORS: gl.constexpr,
    PERSISTENT: gl.constexpr,
    BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr, HAS_MASK_MOD: gl.constexpr, MASK_MOD: gl.constexpr,
    TMA_STORE: gl.constexpr,
):
    """Grid (cdiv(Nkv, BLOCK_N), Hkv, B), or PERSISTENT (min(those tiles, SMs),) with each program
    walking tiles as the forward's persistent grid does, the first key blocks first under causal
    masks (num_heads_kv = Hkv, num_batches = B); launch with num_warps=4 (the first consumer's
    warpgroup: Triton adds the other partitions' warps). BLOCK_N: 128 (two consumers). TMA: Q and
    dO are tensor descriptors over [B, Nq, Hq, D] with [1, 64, 1, D] blocks (descriptor_layout);
    with DEVICE_DESCRIPTORS they are pointers and the producer builds those descriptors in the
    program's global scratch (2 x 128 bytes), which jax-triton's launcher takes from the
    DESCRIPTOR_SCRATCH output (flashx/jax/gluon.py; otherwise unused, as in the forward).
    STRIDE_ALIGN: what Q's, K's, V's, dO's, dK's and dV's (batch, row, head) strides are multiples
    of; ROW_ALIGN: the same for the row statistics' (batch, head) strides (jax-triton passes no
    divisibility hints). BLOCK_MAP: the program walks the transposed block map's lists for its
    key block (MAP_T_COUNTS [B, H, nK, 2], MAP_T_INDICES [B, H, nK, 2, nQ], their map blocks
    BLOCK_N keys wide and MAP_STEPS * 64 queries high), masking the partial blocks with causal,
    the window and, with HAS_MASK_MOD, MASK_MOD(batch, q head, q_idx, kv_idx) (a @triton.jit
    function); otherwise those arrays and strides are unused. TMA_STORE (with TMA): DK and DV are
    tensor descriptors over [B, Nkv, Hkv, D] with [1, 64, 1, D] blocks (descriptor_layout), which
    each consumer fills from its K and V buffers once it is done with them; with
    DEVICE_DESCRIPTORS they are pointers and each consumer builds their descriptors (768 bytes of
    scratch a program in all)."""
    NUM_CONSUMERS: gl.constexpr = BLOCK_N // KEYS_PER_CONSUMER
    gl.static_assert(NUM_CONSUMERS == 2)
    gl.static_assert(HEAD_DIM == 64 or HEAD_DIM == 128)
    gl.static_assert(not TMA_STORE or TMA)
    dtype: gl.constexpr = _element_type(DK, TMA_STORE and not DEVICE_DESCRIPTORS)
    A: gl.constexpr = STRIDE_ALIGN
    stride_qb, stride_qn, stride_qh = _aligned_strides(stride_qb, stride_qn, stride_qh, A)
    stride_kb, stride_kn, stride_kh = _aligned_strides(stride_kb, stride_kn, stride_kh, A)
    stride_vb, stride_vn, stride_vh = _aligned_strides(stride_vb, stride_vn, stride_vh, A)
    stride_dob, stride_don, stride_doh = _aligned_strides(stride_dob, stride_don, stride_doh, A)
    # dK and dV are dense [B, Nkv, Hkv, D]; the row statistics' rows are ROW_ALIGN multiples.
    stride_dkb, stride_dkn, stride_dkh = _aligned_strides(stride_dkb, stride_dkn, stride_dkh, A)
    stride_dvb, stride_dvn, stride_dvh = _aligned_strides(stride_dvb, stride_dvn, stride_dvh, A)
    stride_rb, stride_rh = _aligned(stride_rb, ROW_ALIGN), _aligned(stride_rh, ROW_ALIGN)
    diag_offset = (seqlen_kv - seqlen_q) * bottom_right

    q_smem, do_smem = _ring_buffers(dtype, STAGES, QUERY_BLOCK, HEAD_DIM, TMA)
    # TMA: the producer's expect, the bytes completing the phase; cp.async: every producer thread.
    COPY_ARRIVALS: gl.constexpr = 1 if TMA else 32 * PRODUCER_WARPS
    if TMA_STORE:  # K's and V's buffers become dK's and dV's TMA blocks
        kv_smem = gl.allocate_shared_memory(dtype, [2 * NUM_CONSUMERS, 1, KEYS_PER_CONSUMER, 1, HEAD_DIM],
                                            descriptor_layout(KEYS_PER_CONSUMER, HEAD_DIM, dtype))
    else:
        kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KEYS_PER_CONSUMER, HEAD_DIM], dtype)
        kv_smem = gl.allocate_shared_memory(dtype, [2 * NUM_CONSUMERS, KEYS_PER_CONSUMER, HEAD_DIM], kv_layout)
    q_ready, do_ready, q_empty, do_empty = _ring(STAGES, COPY_ARRIVALS, NUM_CONSUMERS)

    qk_scale_log2 = sm_scale.to(gl.float32) * LOG2_E  # jax-triton passes Python floats as fp64
    scale = sm_scale.to(gl.float32)
    sizes = (seqlen_q, seqlen_kv, diag_offset, window_left, gqa_group)
    grid_sizes = (num_heads_kv, num_batches)
    rings = (q_smem, do_smem, q_ready, do_ready, q_empty, do_empty)
    copy_strides = (stride_qb, stride_qn, stride_qh, stride_dob, stride_don, stride_doh)
    strides = (stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh, stride_rb, stride_rh,
               stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh)
    map_t = (MAP_T_COUNTS, MAP_T_INDICES, stride_tcb, stride_tch, stride_tcq, stride_tib, stride_tih, stride_tiq,
             stride_tik)
    gl.warp_specialize(
        [(_dkdv_consumer, (K, V, DK, DV, LSE_LOG2, DELTA, strides, sizes, grid_sizes, qk_scale_log2, scale, rings,
                           kv_smem, map_t, 0, BLOCK_N, HEAD_DIM, STAGES, LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP,
                           MAP_STEPS, HAS_MASK_MOD, MASK_MOD, PERSISTENT, TMA_STORE, DEVICE_DESCRIPTORS)),
         (_dkdv_consumer, (K, V, DK, DV, LSE_LOG2, DELTA, strides, sizes, grid_sizes, qk_scale_log2, scale, rings,
                           kv_smem, map_t, 1, BLOCK_N, HEAD_DIM, STAGES, LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP,
                           MAP_STEPS, HAS_MASK_MOD, MASK_MOD, PERSISTENT, TMA_STORE, DEVICE_DESCRIPTORS)),
         (_dkdv_producer, (Q, DO, copy_strides, sizes, grid_sizes, rings, map_t, BLOCK_N, HEAD_DIM, STAGES,
                           PRODUCER_WARPS, LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS, DEVICE_DESCRIPTORS,
                           PERSISTENT))],
        [CONSUMER_WARPS, PRODUCER_WARPS],
        [CONSUMER_REGS, PRODUCER_REGS],
    )


# ----------------------------------------------------------------------------------------------
# dQ: a program owns 64 * NUM_CONSUMERS query rows of one (batch, q head); the producer streams
# the K and V blocks they see, each consumer holds its 64 rows' Q, dO, lse_log2 and delta and
# accumulates dQ = scale * sum_j dS_j K_j.


@gluon.jit
def _mask_scores(s, rows, row_diag, offs_n, k0, window_left, batch, head, LIMIT_RIGHT: gl.constexpr,
                 LIMIT_LEFT: gl.constexpr, HAS_MASK_MOD: gl.constexpr, MASK_MOD: gl.constexpr):
    """-inf where key k0 + offs_n[c] is outside query rows[r]'s mask (queries down, keys across):
    causal, the left window, and mask_mod(batch, head, q_idx, kv_idx); row_diag[r] = rows[r] +
    diag_offset, the last key the row sees (causal). Column bounds against offs_n itself, which
    stays a compile-time constant per thread."""
    last = row_diag - k0  # the row's last visible column (causal)
    visible = offs_n[None, :] <= last[:, None] + (1 << 30)  # all True, in the tile's shape
    if LIMIT_RIGHT:
        visible = offs_n[None, :] <= last[:, None]
    if LIMIT_LEFT:
        visible = visible & (offs_n[None, :] >= (last - window_left)[:, None])
    if HAS_MASK_MOD:
        visible = visible & (MASK_MOD(batch, head, rows[:, None], (k0 + offs_n)[None, :]) != 0)
    return gl.where(visible, s, float("-inf"))


@gluon.jit
def _dq_steps(dq, s, begin, end, p_list, operands, rings, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr,
              STAGES: gl.constexpr, MASKED: gl.constexpr, LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr,
              TMA: gl.constexpr, BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr, HAS_MASK_MOD: gl.constexpr,
              MASK_MOD: gl.constexpr):
    """dQ after walk steps begin .. end (_walk_block: key blocks, or a block map's list), ring
    steps s, s + 1, ...; (dq, next step). MASKED: the blocks cross the rows' diagonal or window
    edge, or are a map's partial blocks."""
    q_smem, do_smem, s_zero, lse_log2, delta, rows, row_diag, offs_n, qk_scale_log2, window_left, batch, head = operands
    k_smem, v_smem, k_ready, v_ready, k_empty, v_empty = rings
    dtype: gl.constexpr = q_smem.dtype
    operand_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dq.type.layout, k_width=2)
    for i in range(begin, end):
        stage, phase = _ring_slot(s, STAGES)
        mbarrier.wait(k_ready.index(stage), phase)
        k_tile = _as_tile(k_smem.index(stage), BLOCK_N, BLOCK_D, TMA)
        scores = warpgroup_mma(q_smem, k_tile.permute((1, 0)), s_zero, use_acc=False)
        if MASKED:
            k0 = _walk_block(i, p_list, MAP_STEPS, BLOCK_MAP) * BLOCK_N
            scores = _mask_scores(scores, rows, row_diag, offs_n, k0, window_left, batch, head, LIMIT_RIGHT,
                                  LIMIT_LEFT, HAS_MASK_MOD, MASK_MOD)
        p = gl.exp2(scores * qk_scale_log2 - lse_log2[:, None])
        mbarrier.wait(v_ready.index(stage), phase)
        dp = warpgroup_mma(do_smem, _as_tile(v_smem.index(stage), BLOCK_N, BLOCK_D, TMA).permute((1, 0)), s_zero,
                           use_acc=False)
        mbarrier.arrive(v_empty.index(stage))
        ds = p * (dp - delta[:, None])
        dq = warpgroup_mma(gl.convert_layout(ds.to(dtype), operand_layout), k_tile, dq)
        mbarrier.arrive(k_empty.index(stage))
        s += 1
    return dq, s


@gluon.jit
def _dq_producer(K, V, strides, sizes, rings, map_q,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr, STAGES: gl.constexpr,
                 PRODUCER_WARPS: gl.constexpr, LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr,
                 TMA: gl.constexpr, BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr):
    """Copy K_j then V_j into ring step s's stage once both consumers have handed it back, for
    every key block j that the program's BLOCK_M rows see (BLOCK_MAP: the map row's partial
    list, then its full one). strides: K's and V's (batch, row, head); sizes, rings, map_q: as
    _dq_consumer's."""
    stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh = strides
    seqlen_q, seqlen_kv, diag_offset, window_left, gqa_group = sizes
    k_smem, v_smem, k_ready, v_ready, k_empty, v_empty = rings
    layout: gl.constexpr = _copy_layout(BLOCK_D, PRODUCER_WARPS)
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
    offs_d = gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, layout))
    k_offs = offs_n[:, None] * stride_kn + offs_d[None, :]
    v_offs = offs_n[:, None] * stride_vn + offs_d[None, :]
    q0 = gl.program_id(0) * BLOCK_M
    batch = gl.program_id(2)
    kv_head32 = gl.program_id(1) // gqa_group
    kv_head = kv_head32.to(gl.int64)
    k_base = batch.to(gl.int64) * stride_kb + kv_head * stride_kh
    v_base = batch.to(gl.int64) * stride_vb + kv_head * stride_vh
    copies = (K, V, k_base, v_base, stride_kn, stride_vn, k_offs, v_offs, offs_n, batch, kv_head32, seqlen_kv)
    if BLOCK_MAP:
        p_counts, p_list, stride_kind = _map_row(map_q, batch, gl.program_id(1), gl.program_id(0))
        n_partial, n_full = _map_walk(p_counts, MAP_STEPS)
        s = _copy_keys(copies, rings, gl.to_tensor(0), 0, n_partial, p_list, BLOCK_N, STAGES, TMA, BLOCK_MAP,
                       MAP_STEPS)
        _copy_keys(copies, rings, s, 0, n_full, p_list + stride_kind, BLOCK_N, STAGES, TMA, BLOCK_MAP, MAP_STEPS)
    else:
        first, end = _key_blocks_seen(q0, BLOCK_M, seqlen_kv, diag_offset, window_left, BLOCK_N, LIMIT_RIGHT,
                                      LIMIT_LEFT)
        _copy_keys(copies, rings, gl.to_tensor(0), first, end, K, BLOCK_N, STAGES, TMA, BLOCK_MAP, MAP_STEPS)


@gluon.jit
def _copy_keys(copies, rings, s, begin, end, p_list, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, TMA: gl.constexpr,
               BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr):
    """K's and V's key blocks of walk steps begin .. end (_walk_block) into ring steps s, s + 1,
    ...; the next ring step."""
    K, V, k_base, v_base, stride_kn, stride_vn, k_offs, v_offs, offs_n, batch, kv_head32, seqlen_kv = copies
    k_smem, v_smem, k_ready, v_ready, k_empty, v_empty = rings
    for i in range(begin, end):
        stage, phase = _ring_slot(s, STAGES)
        phase = phase ^ 1  # a fresh barrier counts the phase before 0 as complete
        key0 = _walk_block(i, p_list, MAP_STEPS, BLOCK_MAP) * BLOCK_N
        # Keys past Nkv arrive as zeros (TMA: by the copy engine): their dS K adds nothing.
        in_bounds = (key0 + offs_n)[:, None] < seqlen_kv
        coord = (batch, key0, kv_head32, 0)
        start = key0.to(gl.int64)
        _copy_block(K, k_base, start, stride_kn, k_offs, in_bounds, coord, k_smem, k_ready, k_empty, stage, phase, TMA)
        _copy_block(V, v_base, start, stride_vn, v_offs, in_bounds, coord, v_smem, v_ready, v_empty, stage, phase, TMA)
        s += 1
    return s


@gluon.jit
def _dq_row_stats(o_tile, do_tile, LSE, DLSE, DELTA_OUT, LSE_LOG2_OUT, lse_base, stats_base, rows, seqlen_q,
                  HAS_DLSE: gl.constexpr):
    """(lse_log2, delta) of one consumer's 64 rows (rows: their indices, in the layout the loop
    reads them in), computed as the portable backward's _row_stats does (delta = rowsum(dO * O) -
    dlse; lse in log2 units, +inf where lse = -inf) and stored into LSE_LOG2_OUT and DELTA_OUT for
    the dK/dV launch after this one; rows past Nq take delta 0 and lse_log2 +inf (the padded
    row statistics). o_tile, do_tile: the rows' O and dO as _load_rows gives them; LSE, DLSE:
    pointers to the (batch, head)'s rows at lse_base."""
    in_seq = rows < seqlen_q
    lse = gl.load(LSE + lse_base + rows, mask=in_seq, other=float("-inf"))
    rowsum = gl.sum(o_tile.to(gl.float32) * do_tile.to(gl.float32), axis=1)
    delta = gl.convert_layout(rowsum, rows.type.layout)
    if HAS_DLSE:
        delta -= gl.load(DLSE + lse_base + rows, mask=in_seq, other=0.0)
    lse_log2 = gl.where(lse == float("-inf"), float("inf"), lse * LOG2_E)
    delta = gl.where(in_seq, delta, 0.0)
    gl.store(DELTA_OUT + stats_base + rows, delta)
    gl.store(LSE_LOG2_OUT + stats_base + rows, lse_log2)
    return lse_log2, delta


@gluon.jit
def _dq_consumer(Q, DO, DQ, LSE_LOG2, DELTA, strides, sizes, qk_scale_log2, sm_scale, rings, qdo_smem, map_q,
                 row_stats, CONSUMER: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                 BLOCK_D: gl.constexpr, STAGES: gl.constexpr, LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr,
                 TMA: gl.constexpr, BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr, HAS_MASK_MOD: gl.constexpr,
                 MASK_MOD: gl.constexpr, ROW_STATS: gl.constexpr, HAS_DLSE: gl.constexpr):
    """One warpgroup: rows q0 + CONSUMER * 64 .. + 64 of this program's block; their dQ.

    strides: Q's, dO's, dQ's (batch, row, head) and the row statistics' (batch, head); sizes:
    (seqlen_q, seqlen_kv, diag_offset, window_left, gqa_group); rings: (k_smem, v_smem, k_ready,
    v_ready, k_empty, v_empty); qdo_smem: [2 * consumers, 64, D], this consumer's Q at
    2 * CONSUMER, its dO after it; map_q: the block map (_map_row), with BLOCK_MAP; row_stats:
    (O, LSE, DLSE, DELTA_OUT, LSE_LOG2_OUT, O's (batch, row, head) strides, LSE's (batch, head)),
    with ROW_STATS the consumer's rows' statistics computed here (_dq_row_stats) rather than
    loaded from LSE_LOG2 and DELTA."""
    (stride_qb, stride_qn, stride_qh, stride_dob, stride_don, stride_doh, stride_dqb, stride_dqn, stride_dqh,
     stride_rb, stride_rh) = strides
    O, LSE, DLSE, DELTA_OUT, LSE_LOG2_OUT, stride_ob, stride_on, stride_oh, stride_lb, stride_lh = row_stats
    seqlen_q, seqlen_kv, diag_offset, window_left, gqa_group = sizes
    dtype: gl.constexpr = DQ.dtype.element_ty
    s_layout: gl.constexpr = _wgmma_layout(BLOCK_N)
    acc_layout: gl.constexpr = _wgmma_layout(BLOCK_D)
    q0 = gl.program_id(0) * BLOCK_M
    head = gl.program_id(1)
    batch = gl.program_id(2)
    b64 = batch.to(gl.int64)
    h64 = head.to(gl.int64)
    qc0 = q0 + CONSUMER * QUERY_BLOCK

    # This consumer's Q and dO through registers into shared memory (wgmma's A operands of S and
    # dP); rows past Nq read 0, and their lse_log2 is +inf (padded row statistics).
    q_smem = qdo_smem.index(2 * CONSUMER)
    do_smem = qdo_smem.index(2 * CONSUMER + 1)
    rows = qc0 + gl.arange(0, QUERY_BLOCK, layout=gl.SliceLayout(1, s_layout))
    stats_base = b64 * stride_rb + h64 * stride_rh
    # Every load issued before the first store to shared memory: their latencies overlap.
    q_tile = _load_rows(Q + (b64 * stride_qb + h64 * stride_qh), qc0, stride_qn, seqlen_q, BLOCK_D)
    do_tile = _load_rows(DO + (b64 * stride_dob + h64 * stride_doh), qc0, stride_don, seqlen_q, BLOCK_D)
    if ROW_STATS:
        o_tile = _load_rows(O + (b64 * stride_ob + h64 * stride_oh), qc0, stride_on, seqlen_q, BLOCK_D)
    q_smem.store(q_tile)
    do_smem.store(do_tile)
    fence_async_shared()
    if ROW_STATS:  # the producer's first copies meanwhile go on: nothing here waits for them
        lse_log2, delta = _dq_row_stats(o_tile, do_tile, LSE, DLSE, DELTA_OUT, LSE_LOG2_OUT,
                                        b64 * stride_lb + h64 * stride_lh, stats_base, rows, seqlen_q, HAS_DLSE)
    else:
        lse_log2 = gl.load(LSE_LOG2 + stats_base + rows)
        delta = gl.load(DELTA + stats_base + rows)

    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    s_zero = gl.zeros([QUERY_BLOCK, BLOCK_N], gl.float32, layout=s_layout)
    dq = gl.zeros([QUERY_BLOCK, BLOCK_D], gl.float32, layout=acc_layout)
    operands = (q_smem, do_smem, s_zero, lse_log2, delta, rows, rows + diag_offset, offs_n, qk_scale_log2,
                window_left, batch, head)
    if BLOCK_MAP:  # the map row's partial blocks, masked; then its full ones
        p_counts, p_list, stride_kind = _map_row(map_q, batch, head, gl.program_id(0))
        n_partial, n_full = _map_walk(p_counts, MAP_STEPS)
        dq, s = _dq_steps(dq, gl.to_tensor(0), 0, n_partial, p_list, operands, rings, BLOCK_N, BLOCK_D, STAGES, True,
                          LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)
        dq, s = _dq_steps(dq, s, 0, n_full, p_list + stride_kind, operands, rings, BLOCK_N, BLOCK_D, STAGES, False,
                          LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)
    else:
        # As in dK/dV: masked blocks at the window's left edge, unmasked ones, masked ones on the
        # diagonal, each consumer its own bounds over the ring steps both share.
        first, end = _key_blocks_seen(q0, BLOCK_M, seqlen_kv, diag_offset, window_left, BLOCK_N, LIMIT_RIGHT,
                                      LIMIT_LEFT)
        lo, hi = _unmasked_key_blocks(qc0, first, end, diag_offset, window_left, BLOCK_N, LIMIT_RIGHT, LIMIT_LEFT)
        dq, s = _dq_steps(dq, gl.to_tensor(0), first, lo, Q, operands, rings, BLOCK_N, BLOCK_D, STAGES, True,
                          LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)
        dq, s = _dq_steps(dq, s, lo, hi, Q, operands, rings, BLOCK_N, BLOCK_D, STAGES, False,
                          LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)
        dq, s = _dq_steps(dq, s, hi, end, Q, operands, rings, BLOCK_N, BLOCK_D, STAGES, True,
                          LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)

    _write_rows(DQ + (b64 * stride_dqb + h64 * stride_dqh), qc0, stride_dqn, seqlen_q, (dq * sm_scale).to(dtype))


@gluon.jit
def gluon_attention_dq_kernel(
    Q, K, V, DO, LSE_LOG2, DELTA, MAP_COUNTS, MAP_INDICES, O, LSE, DLSE,
    sm_scale, bottom_right, window_left, seqlen_q, seqlen_kv, gqa_group,
    stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh,
    stride_dob, stride_don, stride_doh, stride_rb, stride_rh,
    stride_cb, stride_ch, stride_cq, stride_ib, stride_ih, stride_iq, stride_ik,
    stride_ob, stride_on, stride_oh, stride_lb, stride_lh,
    stride_dqb, stride_dqn, stride_dqh,
    DQ, DELTA_OUT, LSE_LOG2_OUT,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, LIMIT_RIGHT: gl.constexpr,
    LIMIT_LEFT: gl.constexpr, STRIDE_ALIGN: gl.constexpr, ROW_ALIGN: gl.constexpr, STAGES: gl.constexpr,
    PRODUCER_WARPS: gl.constexpr, PRODUCER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr, TMA: gl.constexpr,
    BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr, HAS_MASK_MOD: gl.constexpr, MASK_MOD: gl.constexpr,
    ROW_STATS: gl.constexpr, HAS_DLSE: gl.constexpr, LSE_ALIGN: gl.constexpr,
):
    """dQ = scale * sum_j dS_j K_j, inputs and masks as gluon_attention_dkdv_kernel's (the row
    statistics padded to R >= cdiv(Nq, BLOCK_M) * BLOCK_M rows); DQ [B, Nq, Hq, D]. Grid
    (cdiv(Nq, BLOCK_M), Hq, B); launch with num_warps=4. BLOCK_M: 128 (two consumers); BLOCK_N:
    the key block, 64 or 128. TMA: K and V are tensor descriptors over [B, Nkv, Hkv, D] with
    [1, BLOCK_N, 1, D] blocks (descriptor_layout). BLOCK_MAP: the program walks its map row's lists
    (MAP_COUNTS [B, H, nQ, 2], MAP_INDICES [B, H, nQ, 2, nK], map blocks BLOCK_M queries high and
    MAP_STEPS * BLOCK_N keys wide), masking the partial blocks as gluon_attention_dkdv_kernel
    does; otherwise those arrays and strides are unused. ROW_STATS (launched before dK/dV, as the
    portable dQ's DQ_ROW_STATS): each consumer computes its rows' statistics from O [B, Nq, Hq, D]
    (rows contiguous), LSE [B, Hq, Nq] (contiguous rows) and, with HAS_DLSE, DLSE (LSE's shape and
    strides), uses them and writes them into DELTA_OUT and LSE_LOG2_OUT (DELTA's shape), the
    grid's rows covering R; otherwise those are unused and LSE_LOG2 and DELTA are read."""
    NUM_CONSUMERS: gl.constexpr = BLOCK_M // QUERY_BLOCK
    gl.static_assert(NUM_CONSUMERS == 2)
    gl.static_assert(HEAD_DIM == 64 or HEAD_DIM == 128)
    dtype: gl.constexpr = DQ.dtype.element_ty
    A: gl.constexpr = STRIDE_ALIGN
    stride_qb, stride_qn, stride_qh = _aligned_strides(stride_qb, stride_qn, stride_qh, A)
    stride_kb, stride_kn, stride_kh = _aligned_strides(stride_kb, stride_kn, stride_kh, A)
    stride_vb, stride_vn, stride_vh = _aligned_strides(stride_vb, stride_vn, stride_vh, A)
    stride_dob, stride_don, stride_doh = _aligned_strides(stride_dob, stride_don, stride_doh, A)
    stride_dqb, stride_dqn, stride_dqh = _aligned_strides(stride_dqb, stride_dqn, stride_dqh, A)
    stride_ob, stride_on, stride_oh = _aligned_strides(stride_ob, stride_on, stride_oh, A)
    stride_rb, stride_rh = _aligned(stride_rb, ROW_ALIGN), _aligned(stride_rh, ROW_ALIGN)
    stride_lb, stride_lh = _aligned(stride_lb, LSE_ALIGN), _aligned(stride_lh, LSE_ALIGN)
    diag_offset = (seqlen_kv - seqlen_q) * bottom_right

    k_smem, v_smem = _ring_buffers(dtype, STAGES, BLOCK_N, HEAD_DIM, TMA)
    # TMA: the producer's expect, the bytes completing the phase; cp.async: every producer thread.
    COPY_ARRIVALS: gl.constexpr = 1 if TMA else 32 * PRODUCER_WARPS
    rows_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([QUERY_BLOCK, HEAD_DIM], dtype)
    qdo_smem = gl.allocate_shared_memory(dtype, [2 * NUM_CONSUMERS, QUERY_BLOCK, HEAD_DIM], rows_layout)
    k_ready, v_ready, k_empty, v_empty = _ring(STAGES, COPY_ARRIVALS, NUM_CONSUMERS)

    qk_scale_log2 = sm_scale.to(gl.float32) * LOG2_E  # jax-triton passes Python floats as fp64
    scale = sm_scale.to(gl.float32)
    sizes = (seqlen_q, seqlen_kv, diag_offset, window_left, gqa_group)
    rings = (k_smem, v_smem, k_ready, v_ready, k_empty, v_empty)
    copy_strides = (stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh)
    strides = (stride_qb, stride_qn, stride_qh, stride_dob, stride_don, stride_doh, stride_dqb, stride_dqn, stride_dqh,
               stride_rb, stride_rh)
    map_q = (MAP_COUNTS, MAP_INDICES, stride_cb, stride_ch, stride_cq, stride_ib, stride_ih, stride_iq, stride_ik)
    row_stats = (O, LSE, DLSE, DELTA_OUT, LSE_LOG2_OUT, stride_ob, stride_on, stride_oh, stride_lb, stride_lh)
    gl.warp_specialize(
        [(_dq_consumer, (Q, DO, DQ, LSE_LOG2, DELTA, strides, sizes, qk_scale_log2, scale, rings, qdo_smem, map_q,
                         row_stats, 0, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP,
                         MAP_STEPS, HAS_MASK_MOD, MASK_MOD, ROW_STATS, HAS_DLSE)),
         (_dq_consumer, (Q, DO, DQ, LSE_LOG2, DELTA, strides, sizes, qk_scale_log2, scale, rings, qdo_smem, map_q,
                         row_stats, 1, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP,
                         MAP_STEPS, HAS_MASK_MOD, MASK_MOD, ROW_STATS, HAS_DLSE)),
         (_dq_producer, (K, V, copy_strides, sizes, rings, map_q, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, PRODUCER_WARPS,
                         LIMIT_RIGHT, LIMIT_LEFT, TMA, BLOCK_MAP, MAP_STEPS))],
        [CONSUMER_WARPS, PRODUCER_WARPS],
        [CONSUMER_REGS, PRODUCER_REGS],
    )
