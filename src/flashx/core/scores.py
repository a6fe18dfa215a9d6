"""Tile helpers shared by the forward, backward and block-map kernels.

The score of one (query, key) pair, in a fixed and documented order:
    x = q . k * scale -> score_mod -> softcap -> alibi -> + bias -> masks
Masks (each optional): keys past the sequence, the window (causal is its right edge at 0),
mask_mod, a dense boolean mask. Invisible pairs get -inf before the row max is taken.
"""
from . import runtime  # noqa: F401, I001  (first: decides compiled vs interpreted before triton loads)
from .tuning import TF32X3_BY_INTEGERS as _TF32X3_BY_INTEGERS

import triton
import triton.language as tl

LOG2_E: tl.constexpr = tl.constexpr(1.4426950408889634)
LN_2: tl.constexpr = tl.constexpr(0.6931471805599453)
# dot's PRECISION for float32 "tf32x3" with the split done by integer ops (see dot).
TF32X3_BY_INTEGERS: tl.constexpr = tl.constexpr(_TF32X3_BY_INTEGERS)


@triton.jit
def load_tile(ptrs, m_rows, m_cols, CHECK_ROWS: tl.constexpr, CHECK_COLS: tl.constexpr):
    """Load a 2-D tile, masking only the axes that can run out of bounds.

    Unneeded masks are left out at compile time: a per-element mask along the contiguous
    axis would stop the compiler from vectorizing the load.
    """
    if CHECK_ROWS and CHECK_COLS:
        tile = tl.load(ptrs, mask=m_rows[:, None] & m_cols[None, :], other=0.0)
    elif CHECK_ROWS:
        tile = tl.load(ptrs, mask=m_rows[:, None], other=0.0)
    elif CHECK_COLS:
        tile = tl.load(ptrs, mask=m_cols[None, :], other=0.0)
    else:
        tile = tl.load(ptrs)
    return tile


@triton.jit
def aligned(x, ALIGN: tl.constexpr):
    """x, marked as a multiple of ALIGN, which the plan checked it is.

    (x // ALIGN) * ALIGN is x itself, but the compiler can see its divisibility. Triton's
    launcher specializes integer arguments by divisibility (1, a multiple of 16); jax-triton's
    does not, and without the mark no load whose address or row mask depends on x vectorizes.
    """
    if ALIGN > 1:
        x = (x // ALIGN) * ALIGN
    return x


@triton.jit
def aligned_strides(stride_b, stride_n, stride_h, ALIGN: tl.constexpr):
    """The (batch, row, head) strides of one array, marked as multiples of ALIGN (STRIDE_ALIGN),
    so rows start aligned and loads along D vectorize."""
    return aligned(stride_b, ALIGN), aligned(stride_n, ALIGN), aligned(stride_h, ALIGN)


@triton.jit
def store_tile(ptrs, value, m_rows, m_cols, CHECK_COLS: tl.constexpr):
    """Store a 2-D tile whose rows may run out of bounds (and its columns when CHECK_COLS)."""
    if CHECK_COLS:
        tl.store(ptrs, value, mask=m_rows[:, None] & m_cols[None, :])
    else:
        tl.store(ptrs, value, mask=m_rows[:, None])


@triton.jit
def _tf32_high(x):
    """float32 x rounded to tf32's 10 mantissa bits (to nearest, ties away from zero), still
    float32: an integer add and a mask an element, where Triton's own tf32x3 split emulates
    cvt.rna.tf32 with a compare and a select besides (sm_90 SASS)."""
    bits = x.to(tl.uint32, bitcast=True)
    return ((bits + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)


@triton.jit
def dot(a, b, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    """a @ b with float32 accumulation; UPCAST works around the interpreter's bf16 dot.
    PRECISION: a tl.dot input precision, or TF32X3_BY_INTEGERS (tuning.dot_precision)."""
    if UPCAST:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    if PRECISION == TF32X3_BY_INTEGERS:
        # tf32x3 with the operands split here: three tf32 products over high and low parts, small
        # terms first (a tf32 dot reads an operand's top 19 bits: the low parts lose only their own
        # low bits).
        a_high = _tf32_high(a)
        b_high = _tf32_high(b)
        acc = tl.dot(a - a_high, b_high, input_precision="tf32")
        acc = tl.dot(a_high, b - b_high, acc, input_precision="tf32")
        acc = tl.dot(a_high, b_high, acc, input_precision="tf32")
    else:
        acc = tl.dot(a, b, input_precision=PRECISION)
    return acc


# SOFTCAP_FORM, a constexpr of the kernels: no softcap, softcap * tanh(x / softcap) as written, or
# with tanh's series near 0 (from softcaps of SOFTCAP_SERIES_FROM on; see softcapped).
NO_SOFTCAP = tl.constexpr(0)
SOFTCAP_TANH = tl.constexpr(1)
SOFTCAP_SERIES = tl.constexpr(2)
SOFTCAP_SERIES_FROM = 64.0  # a score's absolute error softcap x 1e-7 stays below ~6e-6 under it


@triton.jit
def tanh(x):
    """tanh through exp2, portable to the interpreter; saturates to +-1 without NaN. Near 0 it
    keeps only its absolute error (~1e-7): small arguments go through _tanh_ratio."""
    return 1.0 - 2.0 / (tl.math.exp2(x * (2.0 * LOG2_E)) + 1.0)


@triton.jit
def _tanh_ratio(y):
    """tanh(y) / y for |y| < 1/8 from its series, to float32's precision (the next term, 62/2835 y^8,
    is below 2e-9 there); 1 - 2 / (exp(2y) + 1) would lose every digit as y -> 0."""
    y2 = y * y
    return 1.0 - y2 * (1.0 / 3.0 - y2 * (2.0 / 15.0 - y2 * (17.0 / 315.0)))


@triton.jit
def softcapped(x, softcap, SOFTCAP_FORM: tl.constexpr):
    """softcap * tanh(x / softcap). tanh's absolute error (~1e-7) becomes softcap times that in the
    score: below SOFTCAP_SERIES_FROM harmless, above it (SOFTCAP_FORM == SOFTCAP_SERIES) the score
    takes x * tanh(y) / y from its series where y = x / softcap is small (softcap 1e4 had lost
    4e-4 of the output, 1e8 the scores altogether; NOTES v0.52). The series costs registers (the
    D = 128 backward spilled 40 -> 184 bytes offline), so common caps keep the plain form."""
    y = x / softcap
    if SOFTCAP_FORM == SOFTCAP_SERIES:
        return tl.where(tl.abs(y) < 0.125, x * _tanh_ratio(y), softcap * tanh(y))
    return softcap * tanh(y)


@triton.jit
def softcap_slope(x, softcap):
    """d softcapped(x) / dx = 1 - tanh(x / softcap)^2: tanh's absolute error (~1e-7) is all that
    reaches it, so the plain tanh serves."""
    t = tanh(x / softcap)
    return 1.0 - t * t


@triton.jit
def score_inputs(
    BIAS, MASK, SLOPES, batch, head, stride_bb, stride_bh, stride_mb, stride_mh, stride_sb, stride_sh,
    HAS_ALIBI: tl.constexpr,
):
    """What the scores of one (batch, q head) read besides q and k: the bias and dense-mask rows'
    base pointers (64-bit offsets) and the ALiBi slope (0 without ALiBi)."""
    b64 = batch.to(tl.int64)
    h64 = head.to(tl.int64)
    bias_base = BIAS + b64 * stride_bb + h64 * stride_bh
    mask_base = MASK + b64 * stride_mb + h64 * stride_mh
    slope = 0.0
    if HAS_ALIBI:
        slope = tl.load(SLOPES + batch * stride_sb + head * stride_sh).to(tl.float32)
    return bias_base, mask_base, slope


@triton.jit
def map_row(
    MAP_COUNTS, MAP_INDICES, batch, head, block, stride_cb, stride_ch, stride_cq, stride_ib, stride_ih, stride_iq,
    MAP_SPLIT: tl.constexpr,
):
    """Pointers to a block map's counts and index lists for the program's block of the grid's
    axis (MAP_SPLIT programs share one map block)."""
    p_counts = MAP_COUNTS + batch * stride_cb + head * stride_ch + (block // MAP_SPLIT) * stride_cq
    p_indices = MAP_INDICES + batch * stride_ib + head * stride_ih + (block // MAP_SPLIT) * stride_iq
    return p_counts, p_indices


@triton.jit
def visible_pairs(
    batch, head, q2, kv2, seqlen_q, seqlen_kv, diag_offset, window_left, window_right,
    mask_base, stride_mq, stride_mk,
    MASK_MOD: tl.constexpr, LIMIT_LEFT: tl.constexpr, LIMIT_RIGHT: tl.constexpr,
    HAS_MASK_MOD: tl.constexpr, HAS_DENSE_MASK: tl.constexpr, BOUND_ROWS: tl.constexpr,
):
    """Bool tile: which (query, key) pairs take part.

    q2 and kv2 are positions within the sequence as broadcastable 2-D tiles ([BM, 1] and
    [1, BN], or transposed for the backward). Query i sits on the diagonal at key
    i + diag_offset; the window keeps keys in [i + diag_offset - window_left, i + diag_offset + window_right].
    Keys past the sequence are never visible; rows past it only with BOUND_ROWS (the plan's
    flag says where a row past the end matters).
    """
    visible = kv2 < seqlen_kv
    if BOUND_ROWS:
        visible = visible & (q2 < seqlen_q)
    if LIMIT_LEFT:
        visible = visible & (kv2 >= q2 + diag_offset - window_left)
    if LIMIT_RIGHT:
        visible = visible & (kv2 <= q2 + diag_offset + window_right)
    if HAS_MASK_MOD:
        visible = visible & (MASK_MOD(batch, head, q2, kv2) != 0)
    if HAS_DENSE_MASK:
        p_mask = mask_base + q2.to(tl.int64) * stride_mq + kv2 * stride_mk
        visible = visible & (tl.load(p_mask, mask=visible, other=0) != 0)
    return visible


# Dropout's draw: Philox with 7 rounds, as FlashAttention 2's (Salmon et al. found Philox-4x32-7
# passes BigCrush; Triton's default of 10 keeps a margin that costs 3 more rounds of two 32-bit
# multiplies), each of its four 32-bit words giving two 16-bit numbers: eight pairs a call.
DROPOUT_ROUNDS: tl.constexpr = tl.constexpr(7)


@triton.constexpr_function
def dropout_threshold(dropout_p):
    """A pair's weight is dropped when its 16-bit number is below this: the drop probability is
    dropout_p rounded to a multiple of 2^-16 (FlashAttention 2 rounds it to 8 bits)."""
    return min(int(round(float(dropout_p) * 65536)), 65536)


@triton.constexpr_function
def dropout_scale(dropout_p):
    """What the kept weights are scaled by: 1 / (1 - dropout_p), a constant to multiply by (a
    division would be a full-precision divide a pair)."""
    return 1.0 / (1.0 - float(dropout_p))


@triton.jit
def _halves_kept(word, THRESHOLD: tl.constexpr):
    """Whether each 16-bit half of a Philox word keeps its pair, joined last ([..., h], h = key bit 0)."""
    return tl.join((word & 0xFFFF) >= THRESHOLD, (word >> 16) >= THRESHOLD)


@triton.jit
def dropout_kept(DROPOUT_SEED, DROPOUT_P: tl.constexpr, batch, head, q_start, k_start,
                 BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, QUERIES_DOWN: tl.constexpr):
    """Which (query, key) pairs of a tile keep their weight under dropout (probability
    1 - DROPOUT_P): queries q_start + [0, BLOCK_Q) and keys k_start + [0, BLOCK_K) (both starts
    multiples of 16), queries down the tile ([BLOCK_Q, BLOCK_K], QUERIES_DOWN) or across it.

    Philox (DROPOUT_ROUNDS) keyed by the call's 64-bit seed (DROPOUT_SEED: two int32 words) gives
    eight 16-bit numbers a counter (key group, query group, head, batch): the pairs that differ
    only in key bit 0 (a word's halves), query bit 3 and key bit 3 (its words) share a counter.
    Those three bits are the ones a thread holds in registers of a Hopper MMA accumulator with
    queries down (the forward's and dQ's scores), so there the numbers need not move between
    threads. The forward and both backward kernels draw the same number for a pair in any tile
    and orientation; varlen's batch is the sequence, its indices in-sequence.
    """
    tl.static_assert(BLOCK_Q % 16 == 0 and BLOCK_K % 16 == 0)
    THRESHOLD: tl.constexpr = dropout_threshold(DROPOUT_P)
    seed = (tl.load(DROPOUT_SEED).to(tl.uint32, bitcast=True).to(tl.uint64)
            | (tl.load(DROPOUT_SEED + 1).to(tl.uint32, bitcast=True).to(tl.uint64) << 32))
    # query q's group (q // 16) * 8 + q % 8 (its bit 3 dropped); key k's (k // 16) * 4 + (k // 2) % 4
    q_groups = (q_start // 16 + tl.arange(0, BLOCK_Q // 16))[:, None] * 8 + tl.arange(0, 8)[None, :]
    k_groups = (k_start // 16 + tl.arange(0, BLOCK_K // 16))[:, None] * 4 + tl.arange(0, 4)[None, :]
    if QUERIES_DOWN:  # [Q / 16, 8, K / 16, 4]
        q_groups, k_groups = q_groups[:, :, None, None], k_groups[None, None, :, :]
    else:  # [K / 16, 4, Q / 16, 8]
        q_groups, k_groups = q_groups[None, None, :, :], k_groups[:, :, None, None]
    zero = q_groups * 0 + k_groups * 0
    r0, r1, r2, r3 = tl.philox(seed, k_groups + zero, q_groups + zero, head + zero, batch + zero, DROPOUT_ROUNDS)
    kept = tl.join(tl.join(_halves_kept(r0, THRESHOLD), _halves_kept(r1, THRESHOLD)),
                   tl.join(_halves_kept(r2, THRESHOLD), _halves_kept(r3, THRESHOLD)))
    # kept [..., h, a, b]: word 2b + a's half h; a query bit 3, b key bit 3
    # [Q / 16, q % 8, K / 16, (k // 2) % 4, h, a, b]: query 16i + 8a + q % 8, key 16j + 8b + 2((k // 2) % 4) + h
    if QUERIES_DOWN:
        kept = tl.reshape(tl.permute(kept, (0, 5, 1, 2, 6, 3, 4)), [BLOCK_Q, BLOCK_K])
    else:  # [K / 16, (k // 2) % 4, Q / 16, q % 8, h, a, b] -> [BLOCK_K, BLOCK_Q]
        kept = tl.reshape(tl.permute(kept, (0, 6, 1, 4, 2, 5, 3)), [BLOCK_K, BLOCK_Q])
    return kept


@triton.jit
def transform_scores(
    qk, batch, head, q2, kv2, seqlen_q, seqlen_kv, diag_offset, sm_scale, softcap, slope,
    bias_base, stride_bq, stride_bk,
    SCORE_MOD: tl.constexpr, HAS_SCORE_MOD: tl.constexpr, SOFTCAP_FORM: tl.constexpr,
    HAS_ALIBI: tl.constexpr, HAS_BIAS: tl.constexpr,
):
    """Float32 scores in natural-log units, before masking (q2, kv2 as in visible_pairs)."""
    x = qk * sm_scale
    if HAS_SCORE_MOD:
        x = SCORE_MOD(x, batch, head, q2, kv2)
    if SOFTCAP_FORM:
        x = softcapped(x, softcap, SOFTCAP_FORM)
    if HAS_ALIBI:
        x = x - slope * tl.abs(q2 + diag_offset - kv2).to(tl.float32)
    if HAS_BIAS:
        p_bias = bias_base + q2.to(tl.int64) * stride_bq + kv2 * stride_bk
        in_bounds = (q2 < seqlen_q) & (kv2 < seqlen_kv)
        x = x + tl.load(p_bias, mask=in_bounds, other=0.0).to(tl.float32)
    return x


@triton.jit
def grad_through_transforms(
    ds, qk, batch, head, q2, kv2, sm_scale, softcap,
    SCORE_MOD: tl.constexpr, SCORE_MOD_GRAD: tl.constexpr, HAS_SCORE_MOD: tl.constexpr,
    SOFTCAP_FORM: tl.constexpr,
):
    """d loss / d (q . k * scale), given ds = d loss / d score (alibi and bias add constants: grad 1).

    The last factor, the scale itself, is left to the caller: dK and dQ are sums of these
    times q or k, so the scale is applied once to each sum rather than to every score.
    """
    if SOFTCAP_FORM or HAS_SCORE_MOD:
        x = qk * sm_scale
        if HAS_SCORE_MOD:
            ds = ds * SCORE_MOD_GRAD(x, batch, head, q2, kv2)
            x = SCORE_MOD(x, batch, head, q2, kv2)
        if SOFTCAP_FORM:
            ds = ds * softcap_slope(x, softcap)
    return ds


@triton.jit
def key_range(
    start_m, seqlen_kv, diag_offset, window_left, window_right,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LIMIT_LEFT: tl.constexpr, LIMIT_RIGHT: tl.constexpr,
):
    """Key blocks that query rows [start_m, start_m + BLOCK_M) can see, in three spans.

    Returns (lo, full_lo, full_hi, hi): [lo, full_lo) and [full_hi, hi) need the mask,
    [full_lo, full_hi) is visible to every row of the tile and skips it. Block starts are
    multiples of BLOCK_N; keys outside [lo, hi) are never loaded.
    """
    lo = 0
    full_lo = 0
    hi = seqlen_kv
    full_hi = seqlen_kv
    if LIMIT_LEFT:
        lo = tl.maximum(start_m + diag_offset - window_left, 0)
        full_lo = tl.maximum(start_m + BLOCK_M - 1 + diag_offset - window_left, 0)
    if LIMIT_RIGHT:
        hi = tl.minimum(start_m + BLOCK_M - 1 + diag_offset + window_right + 1, seqlen_kv)
        full_hi = tl.minimum(start_m + diag_offset + window_right + 1, seqlen_kv)
    hi = tl.maximum(hi, 0)
    lo = tl.minimum((lo // BLOCK_N) * BLOCK_N, hi)
    full_lo = tl.minimum(tl.maximum(tl.cdiv(full_lo, BLOCK_N) * BLOCK_N, lo), hi)
    full_hi = tl.maximum((tl.maximum(full_hi, 0) // BLOCK_N) * BLOCK_N, full_lo)
    return lo, full_lo, full_hi, hi


@triton.jit
def query_range(
    start_n, seqlen_q, diag_offset, window_left, window_right,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LIMIT_LEFT: tl.constexpr, LIMIT_RIGHT: tl.constexpr,
):
    """Query blocks that can see keys [start_n, start_n + BLOCK_N): the transpose of key_range.

    Key j is seen by query i iff j - diag_offset - window_right <= i <= j - diag_offset + window_left:
    key_range with queries and keys swapped, the diagonal negated and the window's sides exchanged.
    Returns (lo, full_lo, full_hi, hi) over query positions, block starts multiples of BLOCK_M.
    """
    return key_range(
        start_n, seqlen_q, -diag_offset, window_right, window_left, BLOCK_N, BLOCK_M, LIMIT_RIGHT, LIMIT_LEFT
    )


@triton.jit
def key_spans(
    start_m, seqlen_q, q_owned, seqlen_kv, diag_offset, window_left, window_right,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LIMIT_LEFT: tl.constexpr, LIMIT_RIGHT: tl.constexpr,
    MASK_EVERY_BLOCK: tl.constexpr,
):
    """key_range for the query tile at start_m, with every block masked where the tile needs it:
    mask_mod or a dense mask without a block map (MASK_EVERY_BLOCK), or padding rows (seqused)."""
    lo, full_lo, full_hi, hi = key_range(
        start_m, seqlen_kv, diag_offset, window_left, window_right, BLOCK_M, BLOCK_N, LIMIT_LEFT, LIMIT_RIGHT
    )
    if MASK_EVERY_BLOCK:
        full_hi = full_lo
    full_hi = tl.where(seqlen_q < q_owned, full_lo, full_hi)
    return lo, full_lo, full_hi, hi


@triton.jit
def span_size(
    span: tl.constexpr, p_counts, lo, full_lo, full_hi, hi, BLOCK: tl.constexpr, BLOCK_MAP: tl.constexpr,
    MAP_STEPS: tl.constexpr, ONE_LOOP: tl.constexpr = False, EDGES_TOGETHER: tl.constexpr = False,
):
    """(first block start, number of blocks) of one span of blocks to visit.

    With a block map, span 0 is its list of partial blocks and span 1 its list of full ones
    (empty blocks are in neither), each map block walked in MAP_STEPS blocks of BLOCK. Without,
    spans 0, 1, 2 are [lo, full_lo) masked, [full_lo, full_hi) unmasked and [full_hi, hi) masked;
    ONE_LOOP: a single span [lo, hi), each block masked or not at run time (block_is_masked);
    EDGES_TOGETHER: two spans, both masked edges in one loop (span_block jumps over the full
    blocks), then [full_lo, full_hi): one pipelined loop fewer to fill and drain.
    """
    if BLOCK_MAP and ONE_LOOP:  # the partial blocks, then the full ones; first: how many partial steps
        first = tl.load(p_counts) * MAP_STEPS
        count = first + tl.load(p_counts + 1) * MAP_STEPS
    elif BLOCK_MAP:
        first = 0
        count = tl.load(p_counts + span) * MAP_STEPS
    elif ONE_LOOP:
        first = lo
        count = tl.cdiv(hi - lo, BLOCK)
    elif EDGES_TOGETHER:
        if span == 0:
            first = lo
            count = tl.cdiv(full_lo - lo, BLOCK) + tl.cdiv(hi - full_hi, BLOCK)
        else:
            first = full_lo
            count = tl.cdiv(full_hi - full_lo, BLOCK)
    else:
        if span == 0:
            first = lo
            last = full_lo
        elif span == 1:
            first = full_lo
            last = full_hi
        else:
            first = full_hi
            last = hi
        count = tl.cdiv(last - first, BLOCK)
    return first, count


@triton.jit
def span_block(
    span: tl.constexpr, i, p_indices, stride_kind, first, BLOCK: tl.constexpr, BLOCK_MAP: tl.constexpr,
    MAP_STEPS: tl.constexpr, EDGES_TOGETHER: tl.constexpr = False, full_lo=0, full_hi=0, ONE_LOOP: tl.constexpr = False,
):
    """Start position of the i-th block of a span (see span_size)."""
    if BLOCK_MAP:
        if ONE_LOOP:  # past the partial list's `first` steps, on to the full list
            kind = tl.where(i < first, 0, stride_kind)
            step = tl.where(i < first, i, i - first)
        else:
            kind = span * stride_kind
            step = i
        start = tl.load(p_indices + kind + step // MAP_STEPS) * (BLOCK * MAP_STEPS) + (step % MAP_STEPS) * BLOCK
    else:
        start = first + i * BLOCK
        if EDGES_TOGETHER and span == 0:  # past the leading edge, on to the trailing one
            start += tl.where(start >= full_lo, full_hi - full_lo, 0)
    return start


@triton.jit
def span_is_masked(span: tl.constexpr, BLOCK_MAP: tl.constexpr, ONE_LOOP: tl.constexpr = False,
                   EDGES_TOGETHER: tl.constexpr = False):
    """Whether the blocks of a span may need the per-element mask (all but the full ones)."""
    return True if ONE_LOOP else ((span == 0) if (BLOCK_MAP or EDGES_TOGETHER) else (span != 1))


@triton.jit
def block_is_masked(span: tl.constexpr, i, first, start, full_lo, full_hi, BLOCK_MAP: tl.constexpr, ONE_LOOP: tl.constexpr):
    """Whether the block at `start` (the i-th of its span) needs the mask: known per span, or at
    run time with ONE_LOOP."""
    if ONE_LOOP and BLOCK_MAP:
        masked = i < first
    elif ONE_LOOP:
        masked = (start < full_lo) | (start >= full_hi)
    else:
        masked = span_is_masked(span, BLOCK_MAP)
    return masked
