"""A warp-specialized attention forward in Gluon for Hopper (sm_90): the fast path of dense and
causal calls, sliding windows and block maps.

One tile is BLOCK_M = 64 * NUM_CONSUMERS query rows of one (batch, q head); a program runs
NUM_CONSUMERS + 1 partitions on it:
- the producer (PRODUCER_WARPS warps, few registers) streams K and V tiles of BLOCK_N keys into
  rings of STAGES shared-memory buffers with cp.async; each copy completes on its stage's
  `k_ready` / `v_ready` mbarrier (one arrival per producer thread);
- the consumers (one warpgroup and 64 rows each): S = Q K^T by wgmma, the online softmax in
  registers, O += P V by wgmma with P in registers, and each stage handed back on its `*_empty`
  barrier. Without TURNS the consumers are not synchronized with each other (one's softmax runs
  while another's wgmma holds the tensor cores, in whatever order they fall into). With TURNS
  they take turns on the tensor cores, FlashAttention-3's ping-pong: in its turn a consumer issues
  O += P_{j-1} V_{j-1} and S_j = Q K_j^T, hands the turn on, and runs block j's softmax while the
  next consumer's products run.
PERSISTENT: at most one program an SM (grid (programs, 1, 1)), each walking the tiles program,
program + programs, ... (causal: every other full round backwards, see _tile); ring stages and
turns carry from tile to tile, so a program's next K/V copies start while its consumers finish
the last tile, and no wave is left half full. Q_BY_PRODUCER: the producer also copies each tile's
Q, into one of two buffer sets (one at D = 256, _q_sets), so a persistent program's next Q arrives
while its consumers finish the last tile.
TRIM_DIAGONAL (without TURNS): each consumer computes only the key blocks its own 64 rows see
(one block where its rows are all past Nq), and with two consumers the last of them on its first
half alone where its rows see none of the second (a 128-row causal tile's first consumer on its
diagonal block); the blocks it leaves it hands straight back.
OVERLAP (without TURNS): each consumer issues S_j = Q K_j^T and
O += P_{j-1} V_{j-1} together and runs block j's softmax while the latter is in flight
(FlashAttention-3's overlap within a warpgroup); with TRIM_DIAGONAL over its full blocks, its
half block then a plain step after them.
ACROSS_TILES (with OVERLAP, PERSISTENT and Q_BY_PRODUCER): a consumer's tiles run as one stream
of overlapped steps; each tile's last O += P V is issued with the next tile's first S, and the
tile's rows are normalized and stored while the latter runs.
TMA_STORE (with TMA): O is a descriptor too (with DEVICE_DESCRIPTORS each consumer builds its
own); each consumer writes its 64 output rows into a shared buffer of its own and one TMA store
takes them to memory, so the consumer moves on to its next tile while the store drains
(FlashAttention-3's epilogue); at D = 256 in two 128-column halves (output_columns).

LIMIT_LEFT / BLOCK_MAP (OVERLAP tiles): a tile walks only the key blocks its rows see, from the
window's left edge, or its row of a block map (the partial blocks, then the full ones; mask_mod
on the partial ones); the producer and the consumers read the same walk (_tile_keys).

TMA: Q, K and V come as tensor descriptors, each over the array's [B, N, H, D] shape and
strides with a [1, rows, 1, D] block: the copy engine fills rows past N with zeros, and one
producer thread issues each copy, where cp.async spends every producer thread's registers on
addresses. Needs Q_BY_PRODUCER. torch's launcher passes host descriptors; jax-triton can pass
neither those nor the global scratch that descriptors built on the device (DEVICE_DESCRIPTORS)
live in, so for JAX flashx/jax/gluon.py points the compiled kernel's scratch at the
DESCRIPTOR_SCRATCH output (tuning.GLUON_DEVICE_DESCRIPTORS).

Q [B, Nq, Hq, D], K / V [B, Nkv, Hkv, D], O [B, Nq, Hq, D] through their strides (the last
axis contiguous, the others multiples of STRIDE_ALIGN elements); LSE [B, Hq, Nq] float32, natural
log, -inf for a row that sees no key. Causal (LIMIT_RIGHT) is aligned bottom-right when
bottom_right is 1. D is 64, 128 or 256 (BLOCK_D == HEAD_DIM), 16-bit inputs; any Nq, Nkv.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

LOG2_E = gl.constexpr(1.4426950408889634)
LN_2 = gl.constexpr(0.6931471805599453)
CONSUMER_WARPS = gl.constexpr(4)  # one warpgroup per consumer partition
CONSUMER_ROWS = gl.constexpr(64)  # query rows a consumer
# TMA_STORE: a consumer's output rows leave in blocks of at most this many columns (at D = 256 two,
# so that the output buffers fit beside the K / V rings and Q: 224 KB). The plan's O descriptor
# takes its block from output_columns too.
OUTPUT_COLUMNS = 128


@gluon.constexpr_function
def output_columns(block_d):
    """The columns of one TMA store of a consumer's output rows (TMA_STORE)."""
    return min(block_d, OUTPUT_COLUMNS)


@gluon.constexpr_function
def _copy_layout(block_d, warps):
    """16-byte chunks (8 16-bit values) a thread, a row's chunks across neighbouring lanes."""
    return gl.BlockedLayout([1, 8], [32 * 8 // block_d, block_d // 8], [warps, 1], [1, 0])


@gluon.constexpr_function
def _q_sets(block_d):
    """Q buffer sets with Q_BY_PRODUCER: two (the next tile's Q arrives while this one's is read),
    one at D = 256, where two would not fit beside the K and V rings (256 KB)."""
    return 2 if block_d <= 128 else 1


@gluon.constexpr_function
def descriptor_layout(rows, block_d, dtype):
    """The shared layout of a TMA block [1, rows, 1, block_d]: the kernel's buffers and the plan's
    host descriptors (plan.gluon_tma_descriptor) both take it from here."""
    return gl.NVMMASharedLayout.get_default_for([1, rows, 1, block_d], dtype)


@gluon.jit
def rows_descriptor(X, num_batches, seqlen, num_heads, stride_b, stride_n, stride_h, ROWS: gl.constexpr,
                    BLOCK_D: gl.constexpr, COLUMNS: gl.constexpr):
    """X (a pointer) as a TMA descriptor over [B, N, H, D] with the given (batch, row, head)
    strides and a [1, ROWS, 1, COLUMNS] block, built in this program's global scratch (for
    launchers that cannot pass host descriptors: jax-triton's). The backward's too."""
    return tma.make_tensor_descriptor(X, [num_batches, seqlen, num_heads, BLOCK_D], [stride_b, stride_n, stride_h, 1],
                                      [1, ROWS, 1, COLUMNS], descriptor_layout(ROWS, COLUMNS, X.dtype.element_ty))


@gluon.jit
def _device_descriptors(Q, K, V, strides, sizes, gqa_group, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr):
    """Q, K and V (pointers) as TMA descriptors over [B, N, H, D], built by this program in its
    global scratch (rows_descriptor)."""
    stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh = strides
    num_heads, num_batches, num_tiles, seqlen_q, seqlen_kv, diag_offset = sizes
    q = rows_descriptor(Q, num_batches, seqlen_q, num_heads, stride_qb, stride_qn, stride_qh, CONSUMER_ROWS, BLOCK_D,
                        BLOCK_D)
    heads_kv = num_heads // gqa_group
    k = rows_descriptor(K, num_batches, seqlen_kv, heads_kv, stride_kb, stride_kn, stride_kh, BLOCK_N, BLOCK_D, BLOCK_D)
    v = rows_descriptor(V, num_batches, seqlen_kv, heads_kv, stride_vb, stride_vn, stride_vh, BLOCK_N, BLOCK_D, BLOCK_D)
    return q, k, v


@gluon.jit
def _output_descriptor(O, strides, sizes, BLOCK_D: gl.constexpr):
    """O (a pointer) as a TMA descriptor over [B, Nq, Hq, D] with one consumer's [1, 64, 1,
    output_columns(D)] block, built in the program's global scratch (TMA_STORE for launchers
    without host descriptors)."""
    stride_qb, stride_qn, stride_qh, stride_ob, stride_on, stride_oh, stride_lb, stride_lh, stride_ln = strides
    num_heads, num_batches, num_tiles, seqlen_q, seqlen_kv, diag_offset = sizes
    return rows_descriptor(O, num_batches, seqlen_q, num_heads, stride_ob, stride_on, stride_oh, CONSUMER_ROWS, BLOCK_D,
                           output_columns(BLOCK_D))


@gluon.jit
def _aligned(x, ALIGN: gl.constexpr):
    """x, which the plan checked is a multiple of ALIGN, in a form whose divisibility the compiler sees."""
    return (x // ALIGN) * ALIGN


@gluon.jit
def _ring_slot(step, STAGES: gl.constexpr):
    """(stage, phase) of ring step `step`: its buffer, and the parity of the buffer's round that
    the step's barrier waits complete."""
    return step % STAGES, (step // STAGES) & 1


@gluon.jit
def _as_tile(buffer, ROWS: gl.constexpr, BLOCK_D: gl.constexpr, TMA: gl.constexpr):
    """A K, V or Q buffer as the [ROWS, BLOCK_D] tile wgmma reads (TMA's hold the descriptor's
    [1, ROWS, 1, BLOCK_D] block)."""
    tile = buffer
    if TMA:
        tile = buffer.reshape([ROWS, BLOCK_D])
    return tile


@gluon.constexpr_function
def _wgmma_layout(columns):
    """The register layout of a consumer's [64, columns] wgmma accumulator (S or O)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[CONSUMER_WARPS, 1], instr_shape=[16, columns, 16])


@gluon.constexpr_function
def _element_type(x, DESCRIPTOR):
    """The element type of an output (O, dK, dV): a descriptor's own, or a pointer's pointee."""
    return x.dtype if DESCRIPTOR else x.dtype.element_ty


@gluon.jit
def _tile_walk(num_tiles, seqlen, BLOCK: gl.constexpr, PERSISTENT: gl.constexpr, LIMIT_RIGHT: gl.constexpr):
    """(first, end, step) of this program's walk over tiles of BLOCK rows of `seqlen` (the values
    _tile takes): all of its share (causal: 0 up to its count of tiles, as _causal_walk counts
    them), or (not PERSISTENT) its one tile."""
    if PERSISTENT:
        if LIMIT_RIGHT:
            first = 0
            end = _causal_walk_length(num_tiles, gl.cdiv(seqlen, BLOCK))
            step = 1
        else:
            first = gl.program_id(0)
            end = num_tiles
            step = gl.num_programs(0)
    else:
        first = 0
        end = 1
        step = 1
    return first, end, step


@gluon.jit
def _causal_walk_sizes(num_tiles, num_blocks):
    """(programs, tail heads, whole rounds of pairs, pairs left over, tail items) of the causal
    persistent walk (_causal_walk). The tail holds enough heads for two tiles a program, and
    (odd block counts) leaves an even number of heads to the pairs, which pair two middles."""
    programs = gl.num_programs(0)
    head_batches = num_tiles // num_blocks
    tail = gl.minimum(head_batches, gl.cdiv(2 * programs, num_blocks))
    tail += (num_blocks % 2) * ((head_batches - tail) % 2)
    pairs = (head_batches - tail) * num_blocks // 2
    rounds = pairs // programs
    left = pairs - rounds * programs
    return programs, tail, rounds, left, left + tail * num_blocks


@gluon.jit
def _causal_walk_length(num_tiles, num_blocks):
    """How many tiles this program takes in _causal_walk."""
    programs, tail, rounds, left, items = _causal_walk_sizes(num_tiles, num_blocks)
    p = gl.program_id(0)
    full = items // programs
    rest = items - full * programs
    in_last = gl.where(full % 2 == 0, p < rest, p >= programs - rest).to(gl.int32)
    return 2 * rounds + full + in_last + (p < left).to(gl.int32)


@gluon.jit
def _paired_place(place, num_blocks):
    """(query block, head_batch) at `place` of the pairs' order: each (batch, head)'s blocks
    heaviest and lightest first, then the next heaviest and lightest, ...; with an odd block count
    every other head starts with its middle block, so that two middles pair up."""
    head_batch = place // num_blocks
    s = place - head_batch * num_blocks
    if (num_blocks % 2 == 1) and (head_batch % 2 == 1):
        s = s - 1
    if s < 0:
        block = (num_blocks - 1) // 2
    elif s % 2 == 0:
        block = num_blocks - 1 - s // 2
    else:
        block = s // 2
    return block, head_batch


@gluon.jit
def _causal_walk(k, num_tiles, num_blocks):
    """(query block, head_batch) of this program's k-th causal persistent tile. First the pairs:
    in each two rounds a program takes two neighbouring places of _paired_place's order (equal
    work, and the programs in flight on few heads, whose K and V they share in L2). The last heads
    (the tail, _causal_walk_sizes) go heaviest block first, over every head of the tail, to the
    programs in rounds of alternating direction, after the pairs left over from the last round of
    pairs, each to one program: a program's last tiles are its lightest, and the programs finish
    within a block or two of each other. Until NOTES v0.48 the leftover tiles went one or two a
    program in the pairs' order, heavy or light: the busiest program 3.1% above the mean at D = 64,
    N = 1k, against 1.0% now, by benchmarks/walk_balance.py's model of this walk (balance, every
    tile once; tests/test_benchmarks.py checks the kernel's walk against it on the GPU)."""
    programs, tail, rounds, left, items = _causal_walk_sizes(num_tiles, num_blocks)
    p = gl.program_id(0)
    j = k - 2 * rounds
    if k < 2 * rounds:
        block, head_batch = _paired_place((k // 2) * 2 * programs + 2 * p + k % 2, num_blocks)
    elif (p < left) and (j < 2):
        block, head_batch = _paired_place(2 * rounds * programs + 2 * p + j, num_blocks)
    else:
        turn = j - (p < left).to(gl.int32)  # the program's round of tail items (a leftover pair is its first)
        item = turn * programs + gl.where(turn % 2 == 1, programs - 1 - p, p)
        u = item - left  # the tail's tiles, heaviest first
        block = num_blocks - 1 - u // tail
        head_batch = num_tiles // num_blocks - tail + u % tail
    return block, head_batch


@gluon.jit
def _tile(t, num_tiles, num_heads, num_batches, seqlen_q, BLOCK_M: gl.constexpr, LIMIT_RIGHT: gl.constexpr,
          PERSISTENT: gl.constexpr):
    """(query block, head, batch) of tile t. Under causal masks the last query blocks see the most
    keys: they start first (not PERSISTENT); persistent programs walk as _causal_walk says, t its k."""
    if PERSISTENT:
        num_blocks = gl.cdiv(seqlen_q, BLOCK_M)
        if LIMIT_RIGHT:
            block, head_batch = _causal_walk(t, num_tiles, num_blocks)
        else:
            # Neighbouring programs on one head's blocks: they read the same K and V (L2).
            block = t % num_blocks
            head_batch = t // num_blocks
        head = head_batch % num_heads
        batch = head_batch // num_heads
    else:
        if LIMIT_RIGHT:
            block = gl.num_programs(0) - 1 - gl.program_id(0)
        else:
            block = gl.program_id(0)
        head = gl.program_id(1)
        batch = gl.program_id(2)
    return block, head, batch


@gluon.jit
def _kv_end(rows_end, seqlen_kv, diag_offset, LIMIT_RIGHT: gl.constexpr):
    """One past the last key that query rows before rows_end see: all of them, or (causal) up to
    the last row's diagonal."""
    if LIMIT_RIGHT:
        kv_end = gl.minimum(gl.maximum(rows_end + diag_offset, 0), seqlen_kv)
    else:
        kv_end = seqlen_kv
    return kv_end


@gluon.jit
def _key_blocks(row0, seqlen_q, seqlen_kv, diag_offset, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                LIMIT_RIGHT: gl.constexpr):
    """(key blocks, of which unmasked) of the BLOCK_M rows from query row0: all of them, or
    (causal) up to their last row's diagonal; those before their first row's diagonal and inside
    the sequence need no mask. At least one block, so that every barrier protocol runs; a row
    that sees none is masked."""
    kv_end = _kv_end(row0 + BLOCK_M, seqlen_kv, diag_offset, LIMIT_RIGHT)
    if LIMIT_RIGHT:
        n_unmasked = gl.maximum(row0 + diag_offset + 1, 0) // BLOCK_N
    else:
        n_unmasked = seqlen_kv // BLOCK_N
    n_blocks = gl.maximum(gl.cdiv(kv_end, BLOCK_N), 1)
    return n_blocks, gl.minimum(n_unmasked, seqlen_kv // BLOCK_N)


@gluon.jit
def _trimmed_key_blocks(row0, seqlen_q, seqlen_kv, diag_offset, BLOCK_N: gl.constexpr, LIMIT_RIGHT: gl.constexpr,
                        HALF_BLOCKS: gl.constexpr):
    """TRIM_DIAGONAL: (full blocks, 1 if a half block follows them else 0, unmasked blocks) of one
    consumer's 64 rows from row0. With HALF_BLOCKS the half block is the last block these rows
    see, on its first BLOCK_N // 2 keys, where they see none of the rest. Rows all past Nq (a
    192-row tile's last consumers when 192 does not divide Nq) compute one block, never stored."""
    n_visible, n_unmasked = _key_blocks(row0, seqlen_q, seqlen_kv, diag_offset, CONSUMER_ROWS, BLOCK_N, LIMIT_RIGHT)
    n_visible = gl.where(row0 < seqlen_q, n_visible, 1)
    half = 0
    if HALF_BLOCKS:
        kv_end = _kv_end(row0 + CONSUMER_ROWS, seqlen_kv, diag_offset, LIMIT_RIGHT)
        half = (kv_end - (n_visible - 1) * BLOCK_N <= BLOCK_N // 2).to(gl.int32)
    return n_visible - half, half, n_unmasked


# Windows and block maps (the forward's LIMIT_LEFT and BLOCK_MAP tiles, the backward's kernels):
# which key blocks a query block sees, and a block map's lists.


@gluon.jit
def _walk_block(i, p_list, MAP_STEPS: gl.constexpr, BLOCK_MAP: gl.constexpr):
    """The block (of the kernel's rows or keys) of walk step i: i itself, or with a block map the
    i-th step of a list of map blocks (each walked in MAP_STEPS steps)."""
    block = i
    if BLOCK_MAP:
        block = gl.load(p_list + i // MAP_STEPS) * MAP_STEPS + i % MAP_STEPS
    return block


@gluon.jit
def _map_walk(p_counts, MAP_STEPS: gl.constexpr):
    """(partial steps, full steps) of a block map's row: its two list lengths in walk steps."""
    return gl.load(p_counts) * MAP_STEPS, gl.load(p_counts + 1) * MAP_STEPS


@gluon.jit
def _map_row(map_arrays, batch, head, block):
    """(counts, list, the stride from the partial list to the full one) of one row of a block map
    (map_arrays: counts, indices and their (batch, head, row, kind) strides; 0 where it
    broadcasts)."""
    counts, indices, stride_cb, stride_ch, stride_cq, stride_ib, stride_ih, stride_iq, stride_ik = map_arrays
    b64 = batch.to(gl.int64)
    h64 = head.to(gl.int64)
    p_counts = counts + b64 * stride_cb + h64 * stride_ch + block.to(gl.int64) * stride_cq
    p_list = indices + b64 * stride_ib + h64 * stride_ih + block.to(gl.int64) * stride_iq
    return p_counts, p_list, stride_ik


@gluon.jit
def _key_blocks_seen(q0, rows, seqlen_kv, diag_offset, window_left, BLOCK_N: gl.constexpr,
                     LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr):
    """[first, end) of the key blocks that queries q0 .. q0 + rows see: up to the last row's
    diagonal (causal), from the first row's window start (left window). May be empty."""
    k_lo = 0
    k_hi = seqlen_kv  # exclusive
    if LIMIT_RIGHT:
        k_hi = gl.minimum(gl.maximum(q0 + rows + diag_offset, 0), seqlen_kv)
    if LIMIT_LEFT:
        k_lo = gl.maximum(q0 + diag_offset - window_left, 0)
    first = k_lo // BLOCK_N
    end = gl.maximum((k_hi + BLOCK_N - 1) // BLOCK_N, first)
    return first, end


@gluon.jit
def _unmasked_key_blocks(qc0, first, end, diag_offset, window_left, BLOCK_N: gl.constexpr,
                         LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr):
    """[lo, hi) within [first, end): the key blocks that all of queries qc0 .. qc0 + 64 see whole
    (those before lo cross the last row's window start, those from hi the first row's diagonal).
    Signed division truncates, so the negative cases are settled first."""
    lo = first
    hi = end
    if LIMIT_LEFT:  # block j is masked while j * BLOCK_N < qc0 + 63 + diag_offset - window_left
        x = qc0 + CONSUMER_ROWS - 1 + diag_offset - window_left
        lo = gl.minimum(gl.maximum(gl.where(x <= 0, 0, (x + BLOCK_N - 1) // BLOCK_N), first), end)
    if LIMIT_RIGHT:  # block j is masked once j * BLOCK_N + BLOCK_N - 1 > qc0 + diag_offset
        y = qc0 + diag_offset - (BLOCK_N - 1)
        hi = gl.minimum(gl.maximum(gl.where(y < 0, 0, y // BLOCK_N + 1), lo), end)
    return lo, hi


@gluon.jit
def _tile_keys(tile_row0, row0, block, head, batch, sizes, masks, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
               LIMIT_RIGHT: gl.constexpr, LIMIT_LEFT: gl.constexpr, BLOCK_MAP: gl.constexpr,
               MAP_STEPS: gl.constexpr):
    """(steps, walk) of the key blocks that tile `block` (rows tile_row0 .. + BLOCK_M) walks, for
    the consumer whose 64 rows start at row0 (the producer, which reads only the steps' blocks,
    passes tile_row0). masks: (window_left, the block map's arrays as _map_row takes them).
    walk: (first, lo, hi, map list, partial steps, stride to the full list), for _walk_key0 and
    _walk_masked:
    - dense or causal: blocks 0 .. steps, masked from hi on (the tile's first diagonal, a ragged
      last block: _key_blocks);
    - LIMIT_LEFT: blocks first .. first + steps, masked before lo (the consumer's last row's window
      start) and from hi on (its first row's diagonal, a ragged last block);
    - BLOCK_MAP (map blocks BLOCK_M rows high, MAP_STEPS * BLOCK_N keys wide): the map row's
      partial blocks, masked, then its full ones.
    At least one step, so that every barrier protocol runs: a tile that sees no key walks one
    block, all of it masked."""
    num_heads, num_batches, num_tiles, seqlen_q, seqlen_kv, diag_offset = sizes
    window_left, map_q = masks
    if BLOCK_MAP:
        p_counts, p_list, stride_kind = _map_row(map_q, batch, head, block)
        n_partial, n_full = _map_walk(p_counts, MAP_STEPS)
        seen = n_partial + n_full
        # hi: the steps the map gives (0: an empty row, whose one step _walk_key0 puts on block 0).
        walk = (0, 0, seen, p_list, gl.where(seen == 0, 1, n_partial), stride_kind)
        steps = gl.maximum(seen, 1)
    elif LIMIT_LEFT:
        first, end = _key_blocks_seen(tile_row0, BLOCK_M, seqlen_kv, diag_offset, window_left, BLOCK_N, LIMIT_RIGHT,
                                      LIMIT_LEFT)
        lo, hi = _unmasked_key_blocks(row0, first, end, diag_offset, window_left, BLOCK_N, LIMIT_RIGHT, LIMIT_LEFT)
        walk = (first, lo, gl.minimum(hi, seqlen_kv // BLOCK_N), 0, 0, 0)
        steps = gl.maximum(end - first, 1)
    else:
        steps, n_unmasked = _key_blocks(tile_row0, seqlen_q, seqlen_kv, diag_offset, BLOCK_M, BLOCK_N, LIMIT_RIGHT)
        walk = _plain_walk(n_unmasked)
    return steps, walk


@gluon.jit
def _plain_walk(n_unmasked):
    """The walk (_tile_keys') of a dense or causal tile: blocks 0, 1, ..., masked from n_unmasked on."""
    return (0, 0, n_unmasked, 0, 0, 0)


@gluon.jit
def _walk_key0(j, walk, BLOCK_N: gl.constexpr, LIMIT_LEFT: gl.constexpr, BLOCK_MAP: gl.constexpr,
               MAP_STEPS: gl.constexpr):
    """The first key of step j of a tile's walk (_tile_keys)."""
    first, lo, hi, p_list, n_partial, stride_kind = walk
    block = j
    if BLOCK_MAP:
        entry = j // MAP_STEPS
        partial_entries = n_partial // MAP_STEPS
        listed = gl.load(p_list + gl.where(entry < partial_entries, entry, stride_kind + entry - partial_entries))
        block = gl.where(hi > 0, listed, 0) * MAP_STEPS + j % MAP_STEPS
    elif LIMIT_LEFT:
        block = first + j
    return block * BLOCK_N


@gluon.jit
def _walk_masked(j, walk, LIMIT_LEFT: gl.constexpr, BLOCK_MAP: gl.constexpr):
    """Whether step j of a tile's walk (_tile_keys) needs its scores masked."""
    first, lo, hi, p_list, n_partial, stride_kind = walk
    if BLOCK_MAP:
        masked = j < n_partial
    elif LIMIT_LEFT:
        masked = (first + j < lo) | (first + j >= hi)
    else:
        masked = j >= hi
    return masked


@gluon.jit
def _copy_q(Q, stride_qb, stride_qn, stride_qh, row0, head, batch, seqlen_q, tile, q_buffers, q_ready, q_empty,
            layout: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_D: gl.constexpr, TMA: gl.constexpr):
    """Q rows row0 .. row0 + BLOCK_M into buffer set tile % Q_SETS (a consumer's 64 rows a slab; rows
    past Nq zero-filled) once every reader of its last use has handed it back."""
    NUM_CONSUMERS: gl.constexpr = BLOCK_M // CONSUMER_ROWS
    Q_SETS: gl.constexpr = _q_sets(BLOCK_D)
    buffer = tile % Q_SETS
    mbarrier.wait(q_empty.index(buffer), ((tile // Q_SETS) & 1) ^ 1)
    if TMA:
        mbarrier.expect(q_ready.index(buffer), NUM_CONSUMERS * Q.block_type.nbytes)
        for c in gl.static_range(NUM_CONSUMERS):
            tma.async_copy_global_to_shared(Q, [batch, row0 + c * CONSUMER_ROWS, head, 0], q_ready.index(buffer),
                                            q_buffers.index(buffer * NUM_CONSUMERS + c))
    else:
        _copy_q_async(Q, stride_qb, stride_qn, stride_qh, row0, head, batch, seqlen_q, buffer, q_buffers, q_ready,
                      layout, BLOCK_M, BLOCK_D)


@gluon.jit
def _copy_q_async(Q, stride_qb, stride_qn, stride_qh, row0, head, batch, seqlen_q, buffer, q_buffers, q_ready,
                  layout: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_D: gl.constexpr):
    """_copy_q by cp.async: every producer thread copies 16-byte chunks and arrives once."""
    NUM_CONSUMERS: gl.constexpr = BLOCK_M // CONSUMER_ROWS
    offs_m = gl.arange(0, CONSUMER_ROWS, layout=gl.SliceLayout(1, layout))
    offs_d = gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, layout))
    q_base = batch.to(gl.int64) * stride_qb + head.to(gl.int64) * stride_qh + row0.to(gl.int64) * stride_qn
    for c in gl.static_range(NUM_CONSUMERS):
        rows = c * CONSUMER_ROWS + offs_m
        async_copy.async_copy_global_to_shared(
            q_buffers.index(buffer * NUM_CONSUMERS + c),
            Q + q_base + rows.to(gl.int64)[:, None] * stride_qn + offs_d[None, :],
            mask=(row0 + rows)[:, None] < seqlen_q)
    async_copy.mbarrier_arrive(q_ready.index(buffer), increment_count=False)


@gluon.jit
def _copy_block(X, base, start, stride_n, offs, in_bounds, coord, buffers, ready, empty, stage, phase,
                TMA: gl.constexpr):
    """Rows start .. of one K or V block into ring buffer `stage` once the consumers have handed it
    back: by TMA (X a descriptor, coord the block's; rows past N arrive as zeros) or by cp.async
    (X a pointer; rows outside in_bounds zero-filled)."""
    mbarrier.wait(empty.index(stage), phase)
    if TMA:
        mbarrier.expect(ready.index(stage), X.block_type.nbytes)
        tma.async_copy_global_to_shared(X, coord, ready.index(stage), buffers.index(stage))
    else:
        async_copy.async_copy_global_to_shared(buffers.index(stage), X + (base + start * stride_n) + offs,
                                               mask=in_bounds)
        async_copy.mbarrier_arrive(ready.index(stage), increment_count=False)


@gluon.jit
def _producer(Q, K, V, strides, sizes, masks, gqa_group, q_ring, rings,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr, STAGES: gl.constexpr,
              PRODUCER_WARPS: gl.constexpr, LIMIT_RIGHT: gl.constexpr, PERSISTENT: gl.constexpr,
              Q_BY_PRODUCER: gl.constexpr, TMA: gl.constexpr, DEVICE_DESCRIPTORS: gl.constexpr,
              LIMIT_LEFT: gl.constexpr, BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr):
    """Copy K_j then V_j into ring step i's stage (i % STAGES) once the consumers have handed it back;
    with Q_BY_PRODUCER, first each tile's Q into one of its Q buffer sets (_q_sets). TMA: Q, K and V are tensor
    descriptors, each copy one message that completes on its barrier by byte count.

    strides: Q's, K's and V's (batch, row, head) strides; sizes, masks, q_ring and rings as
    _consumer's. The key blocks a tile walks: _tile_keys."""
    stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh = strides
    num_heads, num_batches, num_tiles, seqlen_q, seqlen_kv, diag_offset = sizes
    k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, _turns = rings  # the consumers' alone
    q_buffers, q_ready, q_empty = q_ring
    if DEVICE_DESCRIPTORS:
        Q, K, V = _device_descriptors(Q, K, V, strides, sizes, gqa_group, BLOCK_N, BLOCK_D)
    layout: gl.constexpr = _copy_layout(BLOCK_D, PRODUCER_WARPS)
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
    offs_d = gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, layout))
    k_offs = offs_n[:, None] * stride_kn + offs_d[None, :]
    v_offs = offs_n[:, None] * stride_vn + offs_d[None, :]
    first, end, step = _tile_walk(num_tiles, seqlen_q, BLOCK_M, PERSISTENT, LIMIT_RIGHT)
    i = 0  # ring steps so far, over all of this program's tiles
    tiles = 0  # tiles so far (Q_BY_PRODUCER: tile n's Q goes to buffer set n % _q_sets)
    for t in range(first, end, step):
        block, head, batch = _tile(t, num_tiles, num_heads, num_batches, seqlen_q, BLOCK_M, LIMIT_RIGHT, PERSISTENT)
        if Q_BY_PRODUCER:
            _copy_q(Q, stride_qb, stride_qn, stride_qh, block * BLOCK_M, head, batch, seqlen_q, tiles,
                    q_buffers, q_ready, q_empty, layout, BLOCK_M, BLOCK_D, TMA)
            tiles += 1
        kv_head32 = head // gqa_group
        kv_head = kv_head32.to(gl.int64)
        k_base = batch.to(gl.int64) * stride_kb + kv_head * stride_kh
        v_base = batch.to(gl.int64) * stride_vb + kv_head * stride_vh
        n_blocks, walk = _tile_keys(block * BLOCK_M, block * BLOCK_M, block, head, batch, sizes, masks, BLOCK_M,
                                    BLOCK_N, LIMIT_RIGHT, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS)
        for j in range(n_blocks):
            stage, phase = _ring_slot(i, STAGES)
            # A fresh barrier counts the phase before 0 as complete: the first round does not wait.
            phase = phase ^ 1
            key0 = _walk_key0(j, walk, BLOCK_N, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS)
            start = key0.to(gl.int64)
            # Keys past the sequence are zero-filled (TMA: by the copy engine): a stale V row would
            # turn 0 * garbage into NaN.
            in_bounds = (key0 + offs_n)[:, None] < seqlen_kv
            coord = (batch, key0, kv_head32, 0)  # TMA's, in the descriptor's [B, N, H, D]
            _copy_block(K, k_base, start, stride_kn, k_offs, in_bounds, coord, k_smem, k_ready, k_empty, stage, phase,
                        TMA)
            _copy_block(V, v_base, start, stride_vn, v_offs, in_bounds, coord, v_smem, v_ready, v_empty, stage, phase,
                        TMA)
            i += 1


@gluon.jit
def _mask_scores(s, col0, row0, diag_offset, seqlen_kv, s_layout: gl.constexpr,
                 KEYS: gl.constexpr, CAUSAL: gl.constexpr, OFFSET_COMPARE: gl.constexpr = True):
    """-inf where key col0 + c (of KEYS) is past the sequence or (CAUSAL) right of row r's diagonal."""
    return _mask_scores_with(s, col0, row0, diag_offset, seqlen_kv, (0, 0, 0), s_layout, KEYS, CAUSAL, False, False,
                             None, OFFSET_COMPARE)


@gluon.jit
def _mask_scores_with(s, col0, row0, diag_offset, seqlen_kv, masking, s_layout: gl.constexpr, KEYS: gl.constexpr,
                      CAUSAL: gl.constexpr, LIMIT_LEFT: gl.constexpr, HAS_MASK_MOD: gl.constexpr,
                      MASK_MOD: gl.constexpr, OFFSET_COMPARE: gl.constexpr = True):
    """-inf where key col0 + c (of KEYS) is past the sequence, (CAUSAL) right of row r's diagonal,
    (LIMIT_LEFT) more than window_left left of it, or (HAS_MASK_MOD) where MASK_MOD(batch, head,
    q_idx, kv_idx) is False; masking: (window_left, batch, head). CAUSAL folds the sequence's end
    into each row's diagonal, one compare and one select a score (two compares made ptxas select
    twice, NOTES v0.50); OFFSET_COMPARE compares the columns' offsets from col0 with each row's
    bound less col0, which spares an add a column (the loop of the D = 64 two-consumer tile:
    1,028 -> 861 instructions, against 971 without it) but spilled in the three-consumer tile,
    whose consumers have 128 registers a thread."""
    window_left, batch, head = masking
    rows = row0 + gl.arange(0, CONSUMER_ROWS, layout=gl.SliceLayout(1, s_layout))
    offs = gl.arange(0, KEYS, layout=gl.SliceLayout(0, s_layout))
    cols = col0 + offs
    if CAUSAL:
        last = gl.minimum(rows + diag_offset, seqlen_kv - 1)  # each row's last visible key
        if OFFSET_COMPARE:
            visible = offs[None, :] <= (last - col0)[:, None]
        else:
            visible = cols[None, :] <= last[:, None]
    else:
        visible = cols[None, :] < seqlen_kv
    if LIMIT_LEFT:
        visible = visible & (cols[None, :] >= rows[:, None] + (diag_offset - window_left))
    if HAS_MASK_MOD:
        visible = visible & (MASK_MOD(batch, head, rows[:, None], cols[None, :]) != 0)
    return gl.where(visible, s, float("-inf"))


@gluon.jit
def _softmax_step(s, m_i, l_i, qk_scale_log2):
    """The online softmax on one block's raw scores: (p, new max, new sum, rescale factor); all in log2 units.

    A row that has seen only masked keys keeps max -inf; it subtracts 0 instead, so p is 0, not NaN."""
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale_log2)
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)
    p = gl.exp2(s * qk_scale_log2 - m_safe[:, None])
    alpha = gl.exp2(m_i - m_safe)
    return p, m_new, l_i * alpha + gl.sum(p, 1), alpha


@gluon.jit
def _kv_step(q_tile, k_tile, v_tile, k_free, v_ready, v_phase, v_free, m_i, l_i, acc, col0, masked, row0, diag_offset,
             seqlen_kv, qk_scale_log2, s_layout: gl.constexpr, o_layout: gl.constexpr, KEYS: gl.constexpr,
             CAUSAL: gl.constexpr, OFFSET_COMPARE: gl.constexpr = True):
    """One consumer's step on KEYS keys from col0 without turns: S = Q K^T, the online softmax
    (masked: -inf right of the diagonal and past the sequence), O += P V; K's and V's stages handed
    back (k_free, v_free) once read. k_tile / v_tile [KEYS, D]; m_i, l_i [64] in s_layout's rows,
    acc [64, D] in o_layout: returned updated. OFFSET_COMPARE: as _mask_scores_with's."""
    s = warpgroup_mma(q_tile, k_tile.permute((1, 0)), gl.zeros([CONSUMER_ROWS, KEYS], gl.float32, layout=s_layout),
                      use_acc=False)
    mbarrier.arrive(k_free)
    if masked:
        s = _mask_scores(s, col0, row0, diag_offset, seqlen_kv, s_layout, KEYS, CAUSAL, OFFSET_COMPARE)
    p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, qk_scale_log2)
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    mbarrier.wait(v_ready, v_phase)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    acc = warpgroup_mma(gl.convert_layout(p.to(v_tile.dtype), p_layout), v_tile, acc)
    mbarrier.arrive(v_free)
    return m_i, l_i, acc


@gluon.jit
def _half_step(q_tile, k_tile, v_tile, k_free, v_ready, v_phase, v_free, m_i, l_i, acc, col0, row0, diag_offset,
               seqlen_kv, qk_scale_log2, s_layout: gl.constexpr, o_layout: gl.constexpr, BLOCK_N: gl.constexpr,
               CAUSAL: gl.constexpr, OFFSET_COMPARE: gl.constexpr = True):
    """TRIM_DIAGONAL's half block: _kv_step (masked) on the first BLOCK_N // 2 keys of k_tile /
    v_tile [BLOCK_N, D] from col0; m_i, l_i [64] in s_layout's rows, acc [64, D]: returned updated."""
    HALF: gl.constexpr = BLOCK_N // 2
    half_layout: gl.constexpr = _wgmma_layout(HALF)
    row_half: gl.constexpr = gl.SliceLayout(1, half_layout)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    m_h, l_h, acc = _kv_step(q_tile, k_tile.slice(0, HALF), v_tile.slice(0, HALF), k_free, v_ready, v_phase, v_free,
                             gl.convert_layout(m_i, row_half), gl.convert_layout(l_i, row_half), acc, col0, True, row0,
                             diag_offset, seqlen_kv, qk_scale_log2, half_layout, o_layout, HALF, CAUSAL,
                             OFFSET_COMPARE)
    return gl.convert_layout(m_h, row_s), gl.convert_layout(l_h, row_s), acc


@gluon.jit
def _hand_back(k_ready, v_ready, k_empty, v_empty, i, first, end, STAGES: gl.constexpr):
    """TRIM_DIAGONAL: key blocks first .. end - 1 from ring step i, past one consumer's rows,
    handed back once filled (an early hand-back would count towards the stage's previous round)."""
    for j in range(first, end):
        stage, phase = _ring_slot(i + j, STAGES)
        mbarrier.wait(k_ready.index(stage), phase)
        mbarrier.arrive(k_empty.index(stage))
        mbarrier.wait(v_ready.index(stage), phase)
        mbarrier.arrive(v_empty.index(stage))


@gluon.jit
def _overlapped_steps(q_tile, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, i, n_blocks, walk, masking, m_i,
                      l_i, acc, row0, diag_offset, seqlen_kv, qk_scale_log2, s_first, s_layout: gl.constexpr,
                      o_layout: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr, STAGES: gl.constexpr,
                      TMA: gl.constexpr, CAUSAL: gl.constexpr, CHAINED: gl.constexpr, LIMIT_LEFT: gl.constexpr,
                      BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr, HAS_MASK_MOD: gl.constexpr,
                      MASK_MOD: gl.constexpr):
    """OVERLAP: one consumer's steps over n_blocks key blocks from ring step i (walk: _tile_keys'),
    each block's softmax under the previous block's O += P V; masking: as _mask_scores_with's.
    acc [64, D] enters as zeros; (m_i, l_i, acc, P of the last block) out.

    Block j: S_j = Q K_j^T and O += P_{j-1} V_{j-1} are issued together (asynchronous wgmma);
    once S_j has retired its softmax runs while P_{j-1} V_{j-1} is still in flight; then O, which
    holds blocks up to j - 1, is rescaled by block j's factor, ready for P_j V_j. CHAINED
    (ACROSS_TILES): S_0 arrives issued (s_first, asynchronous), and the last O += P V leaves in
    flight, V's stage not yet handed back: the caller retires both (P stays live until then)."""
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    dtype: gl.constexpr = v_smem.dtype
    s_zero = gl.zeros([CONSUMER_ROWS, BLOCK_N], gl.float32, layout=s_layout)
    stage, phase = _ring_slot(i, STAGES)
    if CHAINED:
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s_first,))
    else:
        mbarrier.wait(k_ready.index(stage), phase)
        s = warpgroup_mma(q_tile, _as_tile(k_smem.index(stage), BLOCK_N, BLOCK_D, TMA).permute((1, 0)), s_zero,
                          use_acc=False)
    mbarrier.arrive(k_empty.index(stage))
    if _walk_masked(0, walk, LIMIT_LEFT, BLOCK_MAP):
        s = _mask_scores_with(s, _walk_key0(0, walk, BLOCK_N, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS), row0, diag_offset,
                              seqlen_kv, masking, s_layout, BLOCK_N, CAUSAL, LIMIT_LEFT, HAS_MASK_MOD, MASK_MOD)
    p, m_i, l_i, _ = _softmax_step(s, m_i, l_i, qk_scale_log2)  # O is 0: nothing to rescale
    p16 = gl.convert_layout(p.to(dtype), p_layout)
    for j in range(1, n_blocks):
        stage, phase = _ring_slot(i + j, STAGES)
        prev, prev_phase = _ring_slot(i + j - 1, STAGES)
        mbarrier.wait(k_ready.index(stage), phase)
        s_next = warpgroup_mma(q_tile, _as_tile(k_smem.index(stage), BLOCK_N, BLOCK_D, TMA).permute((1, 0)), s_zero,
                               use_acc=False, is_async=True)
        mbarrier.wait(v_ready.index(prev), prev_phase)
        acc_next = warpgroup_mma(p16, _as_tile(v_smem.index(prev), BLOCK_N, BLOCK_D, TMA), acc, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=1, deps=(s_next,))  # S_j retired; P_{j-1} V_{j-1} may run on
        mbarrier.arrive(k_empty.index(stage))
        if _walk_masked(j, walk, LIMIT_LEFT, BLOCK_MAP):
            s = _mask_scores_with(s, _walk_key0(j, walk, BLOCK_N, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS), row0,
                                  diag_offset, seqlen_kv, masking, s_layout, BLOCK_N, CAUSAL, LIMIT_LEFT, HAS_MASK_MOD,
                                  MASK_MOD)
        p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, qk_scale_log2)
        acc, p16 = warpgroup_mma_wait(num_outstanding=0, deps=(acc_next, p16))  # P_{j-1} stays live until here
        mbarrier.arrive(v_empty.index(prev))
        acc = acc * gl.convert_layout(alpha, row_o)[:, None]
        p16 = gl.convert_layout(p.to(dtype), p_layout)
    last, last_phase = _ring_slot(i + n_blocks - 1, STAGES)
    mbarrier.wait(v_ready.index(last), last_phase)
    if CHAINED:
        acc = warpgroup_mma(p16, _as_tile(v_smem.index(last), BLOCK_N, BLOCK_D, TMA), acc, is_async=True)
    else:
        acc = warpgroup_mma(p16, _as_tile(v_smem.index(last), BLOCK_N, BLOCK_D, TMA), acc)
        mbarrier.arrive(v_empty.index(last))
    return m_i, l_i, acc, p16


@gluon.jit
def _first_scores(q_buffers, q_ready, k_smem, k_ready, tiles, i, s_zero, CONSUMER: gl.constexpr,
                  NUM_CONSUMERS: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr, STAGES: gl.constexpr,
                  TMA: gl.constexpr):
    """ACROSS_TILES: the program's tiles-th tile's S_0 = Q K^T issued (asynchronous wgmma) once its
    Q (buffer set tiles % _q_sets) and ring step i's K have arrived; (S_0 in flight, Q's tile)."""
    Q_SETS: gl.constexpr = _q_sets(BLOCK_D)
    q_set = tiles % Q_SETS
    q_tile = _as_tile(q_buffers.index(q_set * NUM_CONSUMERS + CONSUMER), CONSUMER_ROWS, BLOCK_D, TMA)
    mbarrier.wait(q_ready.index(q_set), (tiles // Q_SETS) & 1)
    stage, phase = _ring_slot(i, STAGES)
    mbarrier.wait(k_ready.index(stage), phase)
    s = warpgroup_mma(q_tile, _as_tile(k_smem.index(stage), BLOCK_N, BLOCK_D, TMA).permute((1, 0)), s_zero,
                      use_acc=False, is_async=True)
    return s, q_tile


@gluon.jit
def _overlapped_tiles(O, LSE, strides, sizes, qk_scale_log2, q_ring, rings, o_smem, CONSUMER: gl.constexpr,
                      NUM_CONSUMERS: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr,
                      STAGES: gl.constexpr, CAUSAL: gl.constexpr, TMA: gl.constexpr, TMA_STORE: gl.constexpr):
    """ACROSS_TILES (OVERLAP, PERSISTENT, Q_BY_PRODUCER): one consumer's tiles as one stream of
    overlapped steps. A tile's last O += P V and the next tile's S_0 are issued together; once the
    former has retired the tile's rows are normalized and stored while S_0 runs, so the tensor
    cores do not wait for the epilogue. Arguments as _consumer's."""
    num_heads, num_batches, num_tiles, seqlen_q, seqlen_kv, diag_offset = sizes
    k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, _turns = rings
    q_buffers, q_ready, q_empty = q_ring
    Q_SETS: gl.constexpr = _q_sets(BLOCK_D)
    s_layout: gl.constexpr = _wgmma_layout(BLOCK_N)
    o_layout: gl.constexpr = _wgmma_layout(BLOCK_D)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    offsets = (gl.arange(0, CONSUMER_ROWS, layout=gl.SliceLayout(1, o_layout)),
               gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, o_layout)), gl.arange(0, CONSUMER_ROWS, layout=row_s))
    s_zero = gl.zeros([CONSUMER_ROWS, BLOCK_N], gl.float32, layout=s_layout)
    BLOCK_M: gl.constexpr = NUM_CONSUMERS * CONSUMER_ROWS

    first, end, step = _tile_walk(num_tiles, seqlen_q, BLOCK_M, True, CAUSAL)
    # A persistent program has at least one tile; all but its last hand over to a next one (the
    # last apart, so that no S_0 in flight merges with one that is not at a branch's end: ptxas
    # would serialize every wgmma).
    i = 0  # ring steps so far
    tiles = 0  # tiles so far (tile n's Q is in buffer set n % Q_SETS)
    t = first
    s_first, q_tile = _first_scores(q_buffers, q_ready, k_smem, k_ready, tiles, i, s_zero, CONSUMER, NUM_CONSUMERS,
                                    BLOCK_N, BLOCK_D, STAGES, TMA)
    for _ in range(gl.cdiv(end - first, step) - 1):
        m_i, l_i, pending, p16, n_blocks, row0, head, batch = _chained_tile(
            q_tile, s_first, t, i, sizes, qk_scale_log2, rings, CONSUMER, NUM_CONSUMERS, BLOCK_N, BLOCK_D, STAGES,
            CAUSAL, TMA)
        last = _ring_slot(i + n_blocks - 1, STAGES)[0]
        # Its last S = Q K^T has completed: Q's set is handed back before the next tile's Q is
        # awaited (with one set, at D = 256, the producer can copy it only then).
        mbarrier.arrive(q_empty.index(tiles % Q_SETS))
        i += n_blocks
        tiles += 1
        t += step
        s_first, q_tile = _first_scores(q_buffers, q_ready, k_smem, k_ready, tiles, i, s_zero, CONSUMER,
                                        NUM_CONSUMERS, BLOCK_N, BLOCK_D, STAGES, TMA)
        acc, p16 = warpgroup_mma_wait(num_outstanding=1, deps=(pending, p16))  # the next S_0 runs on
        mbarrier.arrive(v_empty.index(last))
        _store_rows(acc, m_i, l_i, O, LSE, o_smem, strides, offsets, row0, head, batch,
                    (batch.to(gl.int64), head.to(gl.int64), row0.to(gl.int64)), seqlen_q, o_layout, CONSUMER,
                    BLOCK_D, TMA_STORE)
    m_i, l_i, pending, p16, n_blocks, row0, head, batch = _chained_tile(
        q_tile, s_first, t, i, sizes, qk_scale_log2, rings, CONSUMER, NUM_CONSUMERS, BLOCK_N, BLOCK_D, STAGES,
        CAUSAL, TMA)
    acc, p16 = warpgroup_mma_wait(num_outstanding=0, deps=(pending, p16))
    mbarrier.arrive(v_empty.index(_ring_slot(i + n_blocks - 1, STAGES)[0]))
    mbarrier.arrive(q_empty.index(tiles % Q_SETS))
    _store_rows(acc, m_i, l_i, O, LSE, o_smem, strides, offsets, row0, head, batch,
                (batch.to(gl.int64), head.to(gl.int64), row0.to(gl.int64)), seqlen_q, o_layout, CONSUMER, BLOCK_D,
                TMA_STORE)
    if TMA_STORE:
        tma.store_wait(0)  # the program's shared memory outlives the last store's reads


@gluon.jit
def _chained_tile(q_tile, s_first, t, i, sizes, qk_scale_log2, rings, CONSUMER: gl.constexpr,
                  NUM_CONSUMERS: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr, STAGES: gl.constexpr,
                  CAUSAL: gl.constexpr, TMA: gl.constexpr):
    """ACROSS_TILES: one consumer's overlapped steps on persistent tile t from ring step i, its
    S_0 (s_first) in flight; (m_i, l_i, the last O += P V in flight, its P, the tile's key blocks,
    row0, head, batch)."""
    num_heads, num_batches, num_tiles, seqlen_q, seqlen_kv, diag_offset = sizes
    k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, _turns = rings
    BLOCK_M: gl.constexpr = NUM_CONSUMERS * CONSUMER_ROWS
    s_layout: gl.constexpr = _wgmma_layout(BLOCK_N)
    o_layout: gl.constexpr = _wgmma_layout(BLOCK_D)
    block, head, batch = _tile(t, num_tiles, num_heads, num_batches, seqlen_q, BLOCK_M, CAUSAL, True)
    n_blocks, n_unmasked = _key_blocks(block * BLOCK_M, seqlen_q, seqlen_kv, diag_offset, BLOCK_M, BLOCK_N, CAUSAL)
    row0 = block * BLOCK_M + CONSUMER * CONSUMER_ROWS
    m_i = gl.full([CONSUMER_ROWS], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([CONSUMER_ROWS], gl.float32, layout=gl.SliceLayout(1, s_layout))
    acc = gl.zeros([CONSUMER_ROWS, BLOCK_D], gl.float32, layout=o_layout)
    m_i, l_i, pending, p16 = _overlapped_steps(q_tile, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, i, n_blocks,
                                               _plain_walk(n_unmasked), (0, batch, head), m_i, l_i, acc, row0,
                                               diag_offset, seqlen_kv, qk_scale_log2, s_first, s_layout, o_layout,
                                               BLOCK_N, BLOCK_D, STAGES, TMA, CAUSAL, True, False, False, 1, False,
                                               None)
    return m_i, l_i, pending, p16, n_blocks, row0, head, batch


@gluon.jit
def _store_rows(acc, m_i, l_i, O, LSE, o_smem, strides, offsets, row0, head, batch, wide, seqlen_q,
                o_layout: gl.constexpr, CONSUMER: gl.constexpr, BLOCK_D: gl.constexpr, TMA_STORE: gl.constexpr):
    """One consumer's 64 output rows from row0 (acc / l_i, acc [64, D] in o_layout) and their lse
    (m_i, l_i [64] in its S layout's rows, log2 units); by TMA from its o_smem buffer with TMA_STORE.
    offsets: (O's rows, O's columns, the lse's rows) as aranges in their layouts; wide: (batch,
    head, row0) in int64. A row that saw no key (causal with Nq > Nkv) gives 0 and lse = -inf, as
    the tl kernel does."""
    stride_qb, stride_qn, stride_qh, stride_ob, stride_on, stride_oh, stride_lb, stride_lh, stride_ln = strides
    offs_mo, offs_do, offs_ml = offsets
    b64, h64, r64 = wide
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    empty = l_i == 0.0
    l_safe = gl.where(empty, 1.0, l_i)
    out = acc / gl.convert_layout(l_safe, row_o)[:, None]
    if TMA_STORE:
        o_tile = o_smem.index(CONSUMER)
        COLUMNS: gl.constexpr = output_columns(BLOCK_D)
        if COLUMNS == BLOCK_D:
            _store_block(O, o_tile, out, batch, row0, head, 0, COLUMNS)
        else:  # D = 256: two halves through the one buffer
            gl.static_assert(2 * COLUMNS == BLOCK_D)
            left, right = gl.split(out.reshape([CONSUMER_ROWS, 2, COLUMNS]).permute(0, 2, 1))
            _store_block(O, o_tile, left, batch, row0, head, 0, COLUMNS)
            _store_block(O, o_tile, right, batch, row0, head, COLUMNS, COLUMNS)
    else:
        o_base = b64 * stride_ob + h64 * stride_oh + r64 * stride_on
        gl.store(O + o_base + offs_mo[:, None] * stride_on + offs_do[None, :], out.to(O.dtype.element_ty),
                 mask=(row0 + offs_mo)[:, None] < seqlen_q)
    lse = gl.where(empty, float("-inf"), (m_i + gl.log2(l_safe)) * LN_2)
    lse_base = b64 * stride_lb + h64 * stride_lh + r64 * stride_ln
    gl.store(LSE + lse_base + offs_ml * stride_ln, lse, mask=row0 + offs_ml < seqlen_q)


@gluon.jit
def _store_block(O, o_tile, block, batch, row0, head, column, COLUMNS: gl.constexpr):
    """A consumer's [64, COLUMNS] output block from `column` on, by TMA through its buffer o_tile,
    once the buffer's previous store has read it; rows past Nq are clipped by the copy."""
    tma.store_wait(0)
    _as_tile(o_tile, CONSUMER_ROWS, COLUMNS, True).store(block.to(o_tile.dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(O, [batch, row0, head, column], o_tile)


@gluon.jit
def _take_turn(turns, turn, CONSUMER: gl.constexpr):
    """Wait until the tensor cores are this consumer's: its turn-th turn follows the previous
    consumer's (consumer 0's first turn, on a fresh barrier, does not wait)."""
    if CONSUMER == 0:
        mbarrier.wait(turns.index(0), (turn & 1) ^ 1)
    else:
        mbarrier.wait(turns.index(CONSUMER), turn & 1)


@gluon.jit
def _pass_turn(turns, CONSUMER: gl.constexpr, NUM_CONSUMERS: gl.constexpr):
    mbarrier.arrive(turns.index((CONSUMER + 1) % NUM_CONSUMERS))


@gluon.jit
def _consumer(Q, O, LSE, strides, sizes, masks, qk_scale_log2, q_ring, rings, o_smem,
              CONSUMER: gl.constexpr, NUM_CONSUMERS: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr,
              STAGES: gl.constexpr, CAUSAL: gl.constexpr, TURNS: gl.constexpr, PERSISTENT: gl.constexpr,
              Q_BY_PRODUCER: gl.constexpr, TMA: gl.constexpr, TRIM_DIAGONAL: gl.constexpr, OVERLAP: gl.constexpr,
              TMA_STORE: gl.constexpr, ACROSS_TILES: gl.constexpr, DEVICE_DESCRIPTORS: gl.constexpr,
              LIMIT_LEFT: gl.constexpr, BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr,
              HAS_MASK_MOD: gl.constexpr, MASK_MOD: gl.constexpr):
    """One warpgroup: rows CONSUMER * 64 .. + 64 of each of this program's tiles.

    strides: Q's, O's and LSE's (batch, row, head) strides; sizes: (num_heads, num_batches,
    num_tiles, seqlen_q, seqlen_kv, diag_offset); masks: (window_left, the block map's arrays as
    _map_row takes them), read with LIMIT_LEFT and BLOCK_MAP; q_ring: (Q buffers, a consumer's 64 rows each,
    and with Q_BY_PRODUCER _q_sets sets of them; q_ready, q_empty: a barrier a set); rings:
    (k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, turns); o_smem (TMA_STORE): a [1, 64, 1,
    output_columns(D)] output buffer a consumer (else unused). With TMA_STORE and DEVICE_DESCRIPTORS each consumer
    builds O's descriptor in its program's scratch (O comes as a pointer)."""
    if TMA_STORE and DEVICE_DESCRIPTORS:
        O = _output_descriptor(O, strides, sizes, BLOCK_D)
    if ACROSS_TILES:
        _overlapped_tiles(O, LSE, strides, sizes, qk_scale_log2, q_ring, rings, o_smem, CONSUMER, NUM_CONSUMERS,
                          BLOCK_N, BLOCK_D, STAGES, CAUSAL, TMA, TMA_STORE)
    else:
        _consumer_tiles(Q, O, LSE, strides, sizes, masks, qk_scale_log2, q_ring, rings, o_smem, CONSUMER,
                        NUM_CONSUMERS, BLOCK_N, BLOCK_D, STAGES, CAUSAL, TURNS, PERSISTENT, Q_BY_PRODUCER, TMA,
                        TRIM_DIAGONAL, OVERLAP, TMA_STORE, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)


@gluon.jit
def _consumer_tiles(Q, O, LSE, strides, sizes, masks, qk_scale_log2, q_ring, rings, o_smem,
                    CONSUMER: gl.constexpr, NUM_CONSUMERS: gl.constexpr, BLOCK_N: gl.constexpr,
                    BLOCK_D: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr, TURNS: gl.constexpr,
                    PERSISTENT: gl.constexpr, Q_BY_PRODUCER: gl.constexpr, TMA: gl.constexpr,
                    TRIM_DIAGONAL: gl.constexpr, OVERLAP: gl.constexpr, TMA_STORE: gl.constexpr,
                    LIMIT_LEFT: gl.constexpr, BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr,
                    HAS_MASK_MOD: gl.constexpr, MASK_MOD: gl.constexpr):
    """_consumer's tiles one after another (each tile's steps, then its rows stored). Windows and
    block maps (LIMIT_LEFT, BLOCK_MAP) with OVERLAP alone, walked as _tile_keys says."""
    stride_qb, stride_qn, stride_qh, stride_ob, stride_on, stride_oh, stride_lb, stride_lh, stride_ln = strides
    num_heads, num_batches, num_tiles, seqlen_q, seqlen_kv, diag_offset = sizes
    k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, turns = rings
    q_buffers, q_ready, q_empty = q_ring
    q_smem = q_buffers.index(CONSUMER)
    BLOCK_M: gl.constexpr = NUM_CONSUMERS * CONSUMER_ROWS
    Q_SETS: gl.constexpr = _q_sets(BLOCK_D)
    # Three trimmed consumers skip whole blocks only: with the half block's steps in their code
    # the 192-row tile computed garbage even where no step was half (non-causal), and read shared
    # memory out of range (causal), on the H200 (NOTES v0.36-v0.37).
    HALF_BLOCKS: gl.constexpr = TRIM_DIAGONAL and NUM_CONSUMERS == 2
    # The two trimmed consumers trade rows every persistent tile: a causal tile's second 64 rows
    # walk half a block more than its first, and the consumer that walks less waited on the ring
    # for the other at each tile's end. At D = 64 1k causal +1.9-2.3% in two A/Bs (H200, NOTES
    # v0.49); D = 128's trimmed tile (causal, 512 keys) read level, so it keeps its rows.
    ALTERNATE_ROWS: gl.constexpr = HALF_BLOCKS and PERSISTENT and Q_BY_PRODUCER and BLOCK_D == 64
    # The masks' cheaper compare (_mask_scores_with) spilled in the three-consumer tile; there it
    # read 0.979-0.983x at D = 64 8k causal, the column compare 1.009x (H200 A/Bs, NOTES v0.50).
    OFFSET_COMPARE: gl.constexpr = NUM_CONSUMERS < 3
    dtype: gl.constexpr = _element_type(O, TMA_STORE)
    s_layout: gl.constexpr = _wgmma_layout(BLOCK_N)
    o_layout: gl.constexpr = _wgmma_layout(BLOCK_D)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    load_layout: gl.constexpr = _copy_layout(BLOCK_D, CONSUMER_WARPS)
    offs_m = gl.arange(0, CONSUMER_ROWS, layout=gl.SliceLayout(1, load_layout))
    offs_d = gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, load_layout))
    offs_mo = gl.arange(0, CONSUMER_ROWS, layout=row_o)
    offs_do = gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, o_layout))
    offs_ml = gl.arange(0, CONSUMER_ROWS, layout=row_s)
    s_zero = gl.zeros([CONSUMER_ROWS, BLOCK_N], gl.float32, layout=s_layout)

    first, end, step = _tile_walk(num_tiles, seqlen_q, BLOCK_M, PERSISTENT, CAUSAL)
    i = 0  # ring steps so far, over all of this program's tiles
    turn = 0  # turns taken so far
    tiles = 0  # tiles so far (Q_BY_PRODUCER: tile n's Q is in buffer set n % Q_SETS)
    for t in range(first, end, step):
        block, head, batch = _tile(t, num_tiles, num_heads, num_batches, seqlen_q, BLOCK_M, CAUSAL, PERSISTENT)
        tile_row0 = block * BLOCK_M
        rows = CONSUMER  # which 64 rows of the tile this consumer takes
        if ALTERNATE_ROWS:
            rows = (CONSUMER + tiles) % 2
        n_blocks, walk = _tile_keys(tile_row0, tile_row0 + rows * CONSUMER_ROWS, block, head, batch, sizes, masks,
                                    BLOCK_M, BLOCK_N, CAUSAL, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS)
        n_unmasked = walk[2]  # dense and causal tiles: blocks from n_unmasked on are masked
        # row0 after the walk, as before windows and maps came: computed first, it changed the
        # dense and causal kernels' PTX (NOTES v0.30 item 2).
        row0 = tile_row0 + rows * CONSUMER_ROWS
        b64 = batch.to(gl.int64)
        h64 = head.to(gl.int64)
        r64 = row0.to(gl.int64)

        if Q_BY_PRODUCER:
            q_set = tiles % Q_SETS
            q_tile = _as_tile(q_buffers.index(q_set * NUM_CONSUMERS + rows), CONSUMER_ROWS, BLOCK_D, TMA)
            mbarrier.wait(q_ready.index(q_set), (tiles // Q_SETS) & 1)
        else:
            # Q through registers into shared memory (the wgmma A operand of S); rows past Nq read
            # 0. The last tile's products, the only readers of q_smem, have completed.
            q_tile = q_smem
            q_base = b64 * stride_qb + h64 * stride_qh + r64 * stride_qn
            q_rows_ok = (row0 + offs_m)[:, None] < seqlen_q
            q_tile.store(gl.load(Q + q_base + offs_m[:, None] * stride_qn + offs_d[None, :], mask=q_rows_ok,
                                 other=0.0))
            fence_async_shared()

        m_i = gl.full([CONSUMER_ROWS], float("-inf"), gl.float32, layout=row_s)
        l_i = gl.zeros([CONSUMER_ROWS], gl.float32, layout=row_s)
        acc = gl.zeros([CONSUMER_ROWS, BLOCK_D], gl.float32, layout=o_layout)
        if TURNS:
            # In its turn: O += P_{j-1} V_{j-1} (its rescale first), then S_j; the softmax of
            # block j after the turn, under the next consumer's products.
            p = gl.zeros([CONSUMER_ROWS, BLOCK_N], dtype, layout=p_layout)
            alpha = gl.full([CONSUMER_ROWS], 1.0, gl.float32, layout=row_s)
            for j in range(n_blocks):
                stage, phase = _ring_slot(i + j, STAGES)
                mbarrier.wait(k_ready.index(stage), phase)
                _take_turn(turns, turn, CONSUMER)
                if j > 0:
                    prev, prev_phase = _ring_slot(i + j - 1, STAGES)
                    mbarrier.wait(v_ready.index(prev), prev_phase)
                    acc = acc * gl.convert_layout(alpha, row_o)[:, None]
                    acc = warpgroup_mma(p, _as_tile(v_smem.index(prev), BLOCK_N, BLOCK_D, TMA), acc)
                s = warpgroup_mma(q_tile, _as_tile(k_smem.index(stage), BLOCK_N, BLOCK_D, TMA).permute((1, 0)), s_zero,
                                  use_acc=False)
                _pass_turn(turns, CONSUMER, NUM_CONSUMERS)
                turn += 1
                mbarrier.arrive(k_empty.index(stage))
                if j > 0:
                    mbarrier.arrive(v_empty.index(_ring_slot(i + j - 1, STAGES)[0]))
                if j >= n_unmasked:
                    s = _mask_scores(s, j * BLOCK_N, row0, diag_offset, seqlen_kv, s_layout, BLOCK_N, CAUSAL,
                                     OFFSET_COMPARE)
                p32, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, qk_scale_log2)
                p = gl.convert_layout(p32.to(dtype), p_layout)
            last, last_phase = _ring_slot(i + n_blocks - 1, STAGES)
            mbarrier.wait(v_ready.index(last), last_phase)
            _take_turn(turns, turn, CONSUMER)
            acc = acc * gl.convert_layout(alpha, row_o)[:, None]
            acc = warpgroup_mma(p, _as_tile(v_smem.index(last), BLOCK_N, BLOCK_D, TMA), acc)
            _pass_turn(turns, CONSUMER, NUM_CONSUMERS)
            turn += 1
            mbarrier.arrive(v_empty.index(last))
        elif OVERLAP:
            n_overlapped = n_blocks
            if TRIM_DIAGONAL:
                n_full, half, n_unmasked = _trimmed_key_blocks(row0, seqlen_q, seqlen_kv, diag_offset, BLOCK_N, CAUSAL,
                                                               HALF_BLOCKS)
                n_steps = n_full + half
                # A consumer whose only block is a half one runs it whole (masked): the overlapped
                # steps take at least one block.
                whole = (n_full == 0).to(gl.int32)
                n_overlapped = n_full + whole
                half = half - whole
                walk = _plain_walk(n_unmasked)
            m_i, l_i, acc, _ = _overlapped_steps(q_tile, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, i,
                                                 n_overlapped, walk, (masks[0], batch, head), m_i, l_i, acc, row0,
                                                 diag_offset, seqlen_kv, qk_scale_log2, s_zero, s_layout, o_layout,
                                                 BLOCK_N, BLOCK_D, STAGES, TMA, CAUSAL, False, LIMIT_LEFT, BLOCK_MAP,
                                                 MAP_STEPS, HAS_MASK_MOD, MASK_MOD)
            if HALF_BLOCKS:
                if half > 0:
                    stage, phase = _ring_slot(i + n_overlapped, STAGES)
                    mbarrier.wait(k_ready.index(stage), phase)
                    m_i, l_i, acc = _half_step(
                        q_tile, _as_tile(k_smem.index(stage), BLOCK_N, BLOCK_D, TMA),
                        _as_tile(v_smem.index(stage), BLOCK_N, BLOCK_D, TMA), k_empty.index(stage),
                        v_ready.index(stage), phase, v_empty.index(stage), m_i, l_i, acc, n_overlapped * BLOCK_N, row0,
                        diag_offset, seqlen_kv, qk_scale_log2, s_layout, o_layout, BLOCK_N, CAUSAL, OFFSET_COMPARE)
            if TRIM_DIAGONAL:
                _hand_back(k_ready, v_ready, k_empty, v_empty, i, n_steps, n_blocks, STAGES)
        else:
            n_steps = n_blocks  # the blocks this consumer computes (the others it only hands back)
            if TRIM_DIAGONAL:
                n_full, half, n_unmasked = _trimmed_key_blocks(row0, seqlen_q, seqlen_kv, diag_offset, BLOCK_N, CAUSAL,
                                                               HALF_BLOCKS)
                n_steps = n_full + half
            for j in range(n_steps):
                stage, phase = _ring_slot(i + j, STAGES)
                mbarrier.wait(k_ready.index(stage), phase)
                k_tile = _as_tile(k_smem.index(stage), BLOCK_N, BLOCK_D, TMA)
                v_tile = _as_tile(v_smem.index(stage), BLOCK_N, BLOCK_D, TMA)
                full_step = True
                if HALF_BLOCKS:
                    # The half block inside the loop of full ones: as a step after the loop,
                    # Triton 3.6's ptxas (12.8) read its Q operand's descriptors from registers
                    # that only the loop's entry set, wrong where the loop ran no step (seen in
                    # the SASS after an out-of-bounds shared read on the H200; CUDA 13.0's ptxas,
                    # which jaxlib's launches go through, did not).
                    full_step = j < n_full
                    if not full_step:
                        m_i, l_i, acc = _half_step(q_tile, k_tile, v_tile, k_empty.index(stage), v_ready.index(stage),
                                                   phase, v_empty.index(stage), m_i, l_i, acc, j * BLOCK_N, row0,
                                                   diag_offset, seqlen_kv, qk_scale_log2, s_layout, o_layout, BLOCK_N,
                                                   CAUSAL, OFFSET_COMPARE)
                if full_step:
                    m_i, l_i, acc = _kv_step(q_tile, k_tile, v_tile, k_empty.index(stage), v_ready.index(stage), phase,
                                             v_empty.index(stage), m_i, l_i, acc, j * BLOCK_N, j >= n_unmasked, row0,
                                             diag_offset, seqlen_kv, qk_scale_log2, s_layout, o_layout, BLOCK_N,
                                             CAUSAL, OFFSET_COMPARE)
            if TRIM_DIAGONAL:
                _hand_back(k_ready, v_ready, k_empty, v_empty, i, n_steps, n_blocks, STAGES)
        i += n_blocks
        if Q_BY_PRODUCER:
            mbarrier.arrive(q_empty.index(q_set))  # its last S = Q K^T has completed
            tiles += 1

        _store_rows(acc, m_i, l_i, O, LSE, o_smem, strides, (offs_mo, offs_do, offs_ml), row0, head, batch,
                    (b64, h64, r64), seqlen_q, o_layout, CONSUMER, BLOCK_D, TMA_STORE)
    if TMA_STORE:
        tma.store_wait(0)  # the program's shared memory outlives the last store's reads


@gluon.jit
def gluon_attention_forward_kernel(
    Q, K, V, MAP_COUNTS, MAP_INDICES,
    sm_scale, bottom_right, window_left, seqlen_q, seqlen_kv, gqa_group, num_heads, num_batches,
    stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh,
    stride_ob, stride_on, stride_oh, stride_lb, stride_lh, stride_ln,
    stride_cb, stride_ch, stride_cq, stride_ib, stride_ih, stride_iq, stride_ik,
    O, LSE, DESCRIPTOR_SCRATCH,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, LIMIT_RIGHT: gl.constexpr,
    STRIDE_ALIGN: gl.constexpr, STAGES: gl.constexpr, TURNS: gl.constexpr, PERSISTENT: gl.constexpr,
    Q_BY_PRODUCER: gl.constexpr, PRODUCER_WARPS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
    CONSUMER_REGS: gl.constexpr, TMA: gl.constexpr, DEVICE_DESCRIPTORS: gl.constexpr, TRIM_DIAGONAL: gl.constexpr,
    OVERLAP: gl.constexpr, TMA_STORE: gl.constexpr, ACROSS_TILES: gl.constexpr,
    LIMIT_LEFT: gl.constexpr, BLOCK_MAP: gl.constexpr, MAP_STEPS: gl.constexpr, HAS_MASK_MOD: gl.constexpr,
    MASK_MOD: gl.constexpr,
):
    """Grid (cdiv(Nq, BLOCK_M), Hq, B), or PERSISTENT (at most the SM count, 1, 1); launch with
    num_warps=4 (the first consumer's warpgroup: Triton adds the other partitions' warps).
    BLOCK_M: 128 or 192 (two or three consumers). LIMIT_RIGHT: causal. TMA: Q, K and V are tensor
    descriptors over [B, N, H, D] with blocks [1, 64, 1, D] (Q) and [1, BLOCK_N, 1, D] (K, V), and
    Q_BY_PRODUCER holds; with DEVICE_DESCRIPTORS, Q, K and V are pointers and the producer builds
    the descriptors in the program's global scratch (384 bytes a program, 640 or 768 with TMA_STORE's two or three
    O descriptors). DESCRIPTOR_SCRATCH:
    never touched by the kernel; for launchers that pass no global scratch (jax-triton's), at least
    programs * tuning.GLUON_DESCRIPTOR_BYTES + 127 bytes that flashx/jax/gluon.py points the compiled
    kernel's scratch at.

    LIMIT_LEFT: a query i sees keys from i + diag - window_left on (a sliding window; diag =
    Nkv - Nq when bottom_right is 1, else 0), causal at most on the right. BLOCK_MAP: each tile
    walks its row of a block map (MAP_COUNTS [B, H, nQ, 2], MAP_INDICES [B, H, nQ, 2, nK] through
    the stride_c* / stride_i* strides, 0 where they broadcast; map blocks BLOCK_M queries high and
    MAP_STEPS * BLOCK_N keys wide, causal and window folded in), its partial blocks masked (by
    MASK_MOD(batch, head, q_idx, kv_idx) with HAS_MASK_MOD, and the causal and window bounds),
    its full blocks not. Both with OVERLAP tiles only (not TURNS, TRIM_DIAGONAL or ACROSS_TILES);
    otherwise those arguments are unused."""
    NUM_CONSUMERS: gl.constexpr = BLOCK_M // CONSUMER_ROWS
    Q_SETS: gl.constexpr = _q_sets(HEAD_DIM)
    gl.static_assert(NUM_CONSUMERS * CONSUMER_ROWS == BLOCK_M)
    gl.static_assert(NUM_CONSUMERS == 2 or NUM_CONSUMERS == 3)
    gl.static_assert(not (TRIM_DIAGONAL and TURNS))  # a consumer that skips a step would skip its turn
    gl.static_assert(not (OVERLAP and TURNS))
    gl.static_assert(not (ACROSS_TILES and TRIM_DIAGONAL))
    gl.static_assert(not TMA_STORE or TMA)
    gl.static_assert(not ACROSS_TILES or (OVERLAP and PERSISTENT and Q_BY_PRODUCER))
    gl.static_assert(not (LIMIT_LEFT or BLOCK_MAP) or (OVERLAP and not (TRIM_DIAGONAL or ACROSS_TILES)))
    dtype: gl.constexpr = _element_type(O, TMA_STORE and not DEVICE_DESCRIPTORS)
    # jax-triton passes no divisibility hints, and cp.async needs 16-byte rows.
    A: gl.constexpr = STRIDE_ALIGN
    stride_qb, stride_qn, stride_qh = _aligned(stride_qb, A), _aligned(stride_qn, A), _aligned(stride_qh, A)
    stride_kb, stride_kn, stride_kh = _aligned(stride_kb, A), _aligned(stride_kn, A), _aligned(stride_kh, A)
    stride_vb, stride_vn, stride_vh = _aligned(stride_vb, A), _aligned(stride_vn, A), _aligned(stride_vh, A)
    stride_ob, stride_on, stride_oh = _aligned(stride_ob, A), _aligned(stride_on, A), _aligned(stride_oh, A)
    diag_offset = (seqlen_kv - seqlen_q) * bottom_right
    num_tiles = gl.cdiv(seqlen_q, BLOCK_M) * num_heads * num_batches

    if TMA:  # the descriptors' blocks and shared layouts
        gl.static_assert(Q_BY_PRODUCER)
        kv_layout: gl.constexpr = descriptor_layout(BLOCK_N, HEAD_DIM, dtype)
        k_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, BLOCK_N, 1, HEAD_DIM], kv_layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, BLOCK_N, 1, HEAD_DIM], kv_layout)
        q_smem = gl.allocate_shared_memory(dtype, [Q_SETS * NUM_CONSUMERS, 1, CONSUMER_ROWS, 1, HEAD_DIM],
                                           descriptor_layout(CONSUMER_ROWS, HEAD_DIM, dtype))
        COPY_ARRIVALS: gl.constexpr = 1  # the producer's expect; the bytes complete the phase
        if TMA_STORE:  # a consumer's output rows, on their way out
            O_COLUMNS: gl.constexpr = output_columns(HEAD_DIM)
            o_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS, 1, CONSUMER_ROWS, 1, O_COLUMNS],
                                               descriptor_layout(CONSUMER_ROWS, O_COLUMNS, dtype))
        else:
            o_smem = q_smem  # unused
    else:
        smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
        k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], smem_layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], smem_layout)
        q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([CONSUMER_ROWS, HEAD_DIM], dtype)
        if Q_BY_PRODUCER:  # Q_SETS sets of buffers: the next tile's Q may arrive while this one's is read
            q_smem = gl.allocate_shared_memory(dtype, [Q_SETS * NUM_CONSUMERS, CONSUMER_ROWS, HEAD_DIM], q_layout)
        else:
            q_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS, CONSUMER_ROWS, HEAD_DIM], q_layout)
        COPY_ARRIVALS: gl.constexpr = 32 * PRODUCER_WARPS  # one cp.async arrival a producer thread
        o_smem = q_smem  # unused (TMA_STORE needs TMA)
    q_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turns = gl.allocate_shared_memory(gl.int64, [NUM_CONSUMERS, 1], mbarrier.MBarrierLayout())
    for stage in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(stage), count=COPY_ARRIVALS)
        mbarrier.init(v_ready.index(stage), count=COPY_ARRIVALS)
        mbarrier.init(k_empty.index(stage), count=NUM_CONSUMERS)  # each consumer hands a stage back on its own
        mbarrier.init(v_empty.index(stage), count=NUM_CONSUMERS)
    for consumer in gl.static_range(NUM_CONSUMERS):
        mbarrier.init(turns.index(consumer), count=1)
    if Q_BY_PRODUCER:
        for q_set in gl.static_range(Q_SETS):
            mbarrier.init(q_ready.index(q_set), count=COPY_ARRIVALS)
            mbarrier.init(q_empty.index(q_set), count=NUM_CONSUMERS)

    qk_scale_log2 = sm_scale.to(gl.float32) * LOG2_E  # jax-triton passes Python floats as fp64
    strides = (stride_qb, stride_qn, stride_qh, stride_ob, stride_on, stride_oh, stride_lb, stride_lh, stride_ln)
    sizes = (num_heads, num_batches, num_tiles, seqlen_q, seqlen_kv, diag_offset)
    masks = (window_left, (MAP_COUNTS, MAP_INDICES, stride_cb, stride_ch, stride_cq, stride_ib, stride_ih, stride_iq,
                           stride_ik))
    rings = (k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, turns)
    copy_strides = (stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh)
    q_ring = (q_smem, q_ready, q_empty)
    # The consumers' arguments differ only in their index (constexprs written out: a tuple of
    # them built once would not stay constexpr).
    if NUM_CONSUMERS == 2:
        gl.warp_specialize(
            [(_consumer, (Q, O, LSE, strides, sizes, masks, qk_scale_log2, q_ring, rings, o_smem,
                          0, NUM_CONSUMERS, BLOCK_N, HEAD_DIM, STAGES, LIMIT_RIGHT, TURNS, PERSISTENT,
                          Q_BY_PRODUCER, TMA, TRIM_DIAGONAL, OVERLAP, TMA_STORE, ACROSS_TILES,
                          DEVICE_DESCRIPTORS, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)),
             (_consumer, (Q, O, LSE, strides, sizes, masks, qk_scale_log2, q_ring, rings, o_smem,
                          1, NUM_CONSUMERS, BLOCK_N, HEAD_DIM, STAGES, LIMIT_RIGHT, TURNS, PERSISTENT,
                          Q_BY_PRODUCER, TMA, TRIM_DIAGONAL, OVERLAP, TMA_STORE, ACROSS_TILES,
                          DEVICE_DESCRIPTORS, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)),
             (_producer, (Q, K, V, copy_strides, sizes, masks, gqa_group, q_ring, rings, BLOCK_M, BLOCK_N,
                          HEAD_DIM, STAGES, PRODUCER_WARPS, LIMIT_RIGHT, PERSISTENT, Q_BY_PRODUCER, TMA,
                          DEVICE_DESCRIPTORS, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS))],
            [CONSUMER_WARPS, PRODUCER_WARPS],
            [CONSUMER_REGS, PRODUCER_REGS],
        )
    else:
        gl.warp_specialize(
            [(_consumer, (Q, O, LSE, strides, sizes, masks, qk_scale_log2, q_ring, rings, o_smem,
                          0, NUM_CONSUMERS, BLOCK_N, HEAD_DIM, STAGES, LIMIT_RIGHT, TURNS, PERSISTENT,
                          Q_BY_PRODUCER, TMA, TRIM_DIAGONAL, OVERLAP, TMA_STORE, ACROSS_TILES,
                          DEVICE_DESCRIPTORS, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)),
             (_consumer, (Q, O, LSE, strides, sizes, masks, qk_scale_log2, q_ring, rings, o_smem,
                          1, NUM_CONSUMERS, BLOCK_N, HEAD_DIM, STAGES, LIMIT_RIGHT, TURNS, PERSISTENT,
                          Q_BY_PRODUCER, TMA, TRIM_DIAGONAL, OVERLAP, TMA_STORE, ACROSS_TILES,
                          DEVICE_DESCRIPTORS, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)),
             (_consumer, (Q, O, LSE, strides, sizes, masks, qk_scale_log2, q_ring, rings, o_smem,
                          2, NUM_CONSUMERS, BLOCK_N, HEAD_DIM, STAGES, LIMIT_RIGHT, TURNS, PERSISTENT,
                          Q_BY_PRODUCER, TMA, TRIM_DIAGONAL, OVERLAP, TMA_STORE, ACROSS_TILES,
                          DEVICE_DESCRIPTORS, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS, HAS_MASK_MOD, MASK_MOD)),
             (_producer, (Q, K, V, copy_strides, sizes, masks, gqa_group, q_ring, rings, BLOCK_M, BLOCK_N,
                          HEAD_DIM, STAGES, PRODUCER_WARPS, LIMIT_RIGHT, PERSISTENT, Q_BY_PRODUCER, TMA,
                          DEVICE_DESCRIPTORS, LIMIT_LEFT, BLOCK_MAP, MAP_STEPS))],
            [CONSUMER_WARPS, CONSUMER_WARPS, PRODUCER_WARPS],
            [CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS],
        )
