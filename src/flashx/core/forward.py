"""The FlashAttention-2 forward kernel: one kernel, every variant chosen by constexpr flags.

Argument order follows jax-triton's convention (input arrays, scalars, output arrays, then
constexprs); the plan builds the argument list by name from this signature.
"""
from . import runtime  # noqa: F401, I001  (first: decides compiled vs interpreted before triton loads)

import triton
import triton.language as tl

from .scores import (
    LN_2, LOG2_E, aligned_strides, block_is_masked, dot, dropout_kept, dropout_scale, key_spans, load_tile, map_row,
    score_inputs, span_block, span_is_masked, span_size, store_tile, transform_scores, visible_pairs,
)


@triton.jit
def program_tile(HEAD_GROUP: tl.constexpr, LONGEST_LAST: tl.constexpr, x, programs):
    """(block, head, batch) of program x of `programs` (blocks * HEAD_GROUP) along the grid's
    first axis; grid (programs, H / HEAD_GROUP, B), or more along the first axis when another
    kind of program shares it (the backward's).

    Within a group of HEAD_GROUP heads the order is block-major, longest blocks first (under
    causal masks the last query blocks, LONGEST_LAST, or the first key blocks see the most),
    so each group's longest programs start together and the last wave is short; the few
    heads of a group share K and V in L2. No runtime division: the indices stay on the
    uniform datapath (a 1-D decode by runtime division cost 50 registers at D = 64).
    """
    block = x // HEAD_GROUP
    head = tl.program_id(1) * HEAD_GROUP + x % HEAD_GROUP
    if LONGEST_LAST:
        block = programs // HEAD_GROUP - 1 - block
    return block, head, tl.program_id(2)


@triton.jit
def sequence_bounds(
    CU_SEQLENS, SEQUSED, batch, seqlen,
    VARLEN: tl.constexpr, HAS_SEQUSED: tl.constexpr,
):
    """(start row, rows that take part, rows owned) of one sequence.

    Varlen: rows [cu[b], cu[b+1]) of the packed tensor, clamped into [0, seqlen] so that
    decreasing or overrunning offsets never read outside it. Otherwise every batch owns seqlen
    rows; SEQUSED limits how many of them take part (the rest are padding).
    """
    start = 0
    owned = seqlen
    if VARLEN:
        start = tl.minimum(tl.maximum(tl.load(CU_SEQLENS + batch), 0), seqlen)
        end = tl.minimum(tl.maximum(tl.load(CU_SEQLENS + batch + 1), start), seqlen)
        owned = end - start
    used = owned
    if HAS_SEQUSED:
        used = tl.minimum(tl.maximum(tl.load(SEQUSED + batch), 0), owned)
    return start, used, owned


@triton.jit
def paged_rows(table_row, kv_idx, m_n, page_count, stride_page, stride_row, PAGE_SIZE: tl.constexpr, MASKED: tl.constexpr):
    """Element offsets (int64) of logical keys kv_idx in a paged KV cache: key j lives in row
    j % PAGE_SIZE of page table_row[j // PAGE_SIZE]. Page numbers are clamped into
    [0, page_count), so a bad table reads wrong rows of the cache, never outside it."""
    p_page = table_row + kv_idx // PAGE_SIZE
    if MASKED:  # keys past the sequence may lie past the table's row
        page = tl.load(p_page, mask=m_n, other=0)
    else:
        page = tl.load(p_page)
    return cache_page(page, page_count) * stride_page + (kv_idx % PAGE_SIZE) * stride_row


@triton.jit
def cache_page(page, page_count):
    """A block table's page number clamped into [0, page_count), as int64: a bad table reads
    wrong rows of the cache, never outside it."""
    return tl.minimum(tl.maximum(page, 0), page_count - 1).to(tl.int64)


@triton.jit
def block_page(table_row, start_n, seqlen_kv, page_count, PAGE_SIZE: tl.constexpr):
    """The page (int64) holding keys [start_n, start_n + BLOCK_N) where PAGE_SIZE is a multiple of
    BLOCK_N: table_row[start_n // PAGE_SIZE], its index kept within the sequence's keys (a block
    wholly past them reads its last page; its loads are masked) and the page clamped (cache_page)."""
    index = tl.maximum(tl.minimum(start_n, seqlen_kv - 1), 0) // PAGE_SIZE
    return cache_page(tl.load(table_row + index), page_count)


@triton.jit
def split_spans(lo, full_lo, full_hi, hi, split, kv_splits, BLOCK_N: tl.constexpr):
    """key_spans' (lo, full_lo, full_hi, hi) cut to split `split` of kv_splits: an equal share of
    the blocks of [lo, hi), block-aligned, the full span clamped into it (possibly empty)."""
    share = tl.cdiv(tl.cdiv(hi - lo, BLOCK_N), kv_splits) * BLOCK_N
    split_lo = tl.minimum(lo + split * share, hi)
    split_hi = tl.minimum(split_lo + share, hi)
    full_lo = tl.minimum(tl.maximum(full_lo, split_lo), split_hi)
    full_hi = tl.maximum(tl.minimum(full_hi, split_hi), full_lo)
    return split_lo, full_lo, full_hi, split_hi


@triton.jit
def _attend_block(
    acc, l_i, m_i, b_q, k_base, v_base, start_n, page,
    stride_kn, stride_kd, stride_vn, stride_vd, table_row, page_count, stride_kb, stride_vb,
    batch, head, q_idx, seqlen_q, seqlen_kv, diag_offset, window_left, window_right,
    sm_scale, qk_scale_log2, softcap, slope, bias_base, stride_bq, stride_bk, mask_base, stride_mq, stride_mk,
    DROPOUT_SEED, start_m,
    needs_mask, HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
    LIMIT_LEFT: tl.constexpr, LIMIT_RIGHT: tl.constexpr,
    MASK_MOD: tl.constexpr, HAS_MASK_MOD: tl.constexpr, HAS_DENSE_MASK: tl.constexpr,
    SCORE_MOD: tl.constexpr, HAS_SCORE_MOD: tl.constexpr, SOFTCAP_FORM: tl.constexpr,
    HAS_ALIBI: tl.constexpr, HAS_BIAS: tl.constexpr, FOLD_SCALE: tl.constexpr,
    UPCAST_DOT: tl.constexpr, DOT_PRECISION: tl.constexpr, BOUND_ROWS: tl.constexpr, DROPOUT_P: tl.constexpr,
    PAGE_SIZE: tl.constexpr, PAGE_AHEAD: tl.constexpr,
):
    """One step of the online softmax over keys [start_n, start_n + BLOCK_N).

    page: with PAGE_AHEAD, the cache page holding the block (block_page), loaded a step ahead.

    MASKED blocks may hold invisible pairs (past the sequence, outside the window, mask_mod,
    dense mask); unmasked blocks are visible to every query row and skip the mask. needs_mask:
    whether this MASKED block takes the mask, decided at run time in a ONE_LOOP walk.
    """
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    kv_idx = start_n + offs_n
    m_n = kv_idx < seqlen_kv
    # [BD, BN]: k transposed, so that q @ k is [BM, BN] = [BM, BD] @ [BD, BN]
    if PAGE_SIZE > 0 and PAGE_SIZE % BLOCK_N == 0:
        # Block starts are multiples of BLOCK_N (key_range), so the block lies in one page: one
        # table entry, and rows as affine in offs_n as a dense cache's (vectorized, pipelined loads).
        if not PAGE_AHEAD:
            page = block_page(table_row, start_n, seqlen_kv, page_count, PAGE_SIZE)
        first_row = start_n % PAGE_SIZE
        p_k = k_base + page * stride_kb + (first_row + offs_n[None, :]) * stride_kn + offs_d[:, None] * stride_kd
        p_v = v_base + page * stride_vb + (first_row + offs_n[:, None]) * stride_vn + offs_dv[None, :] * stride_vd
    elif PAGE_SIZE > 0:  # a paged cache: each key's row through the block table
        rows_k = paged_rows(table_row, kv_idx, m_n, page_count, stride_kb, stride_kn, PAGE_SIZE, MASKED)
        rows_v = paged_rows(table_row, kv_idx, m_n, page_count, stride_vb, stride_vn, PAGE_SIZE, MASKED)
        p_k = k_base + rows_k[None, :] + offs_d[:, None] * stride_kd
        p_v = v_base + rows_v[:, None] + offs_dv[None, :] * stride_vd
    else:
        # Block start in 64 bits (it can pass 2^31 elements); offsets inside a block stay 32-bit.
        start_n64 = tl.cast(start_n, tl.int64)
        p_k = k_base + start_n64 * stride_kn + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd
        p_v = v_base + start_n64 * stride_vn + offs_n[:, None] * stride_vn + offs_dv[None, :] * stride_vd
    b_k = load_tile(p_k, offs_d < HEAD_DIM, m_n, HEAD_DIM != BLOCK_D, MASKED)
    qk = dot(b_q, b_k, UPCAST_DOT, DOT_PRECISION)
    if FOLD_SCALE:
        # Scores are qk * qk_scale_log2 (the scale folded into exp2's base change), but with a
        # positive scale the row max can be taken of raw qk and scaled once per row; the
        # exponent then is one fma per score.
        b_s = qk
        s_scale = qk_scale_log2
    else:
        b_s = transform_scores(
            qk, batch, head, q_idx[:, None], kv_idx[None, :], seqlen_q, seqlen_kv, diag_offset,
            sm_scale, softcap, slope, bias_base, stride_bq, stride_bk,
            SCORE_MOD, HAS_SCORE_MOD, SOFTCAP_FORM, HAS_ALIBI, HAS_BIAS,
        ) * LOG2_E
        s_scale = 1.0
    if MASKED:
        if needs_mask:  # known at compile time, or per block (ONE_LOOP)
            visible = visible_pairs(
                batch, head, q_idx[:, None], kv_idx[None, :], seqlen_q, seqlen_kv, diag_offset,
                window_left, window_right, mask_base, stride_mq, stride_mk,
                MASK_MOD, LIMIT_LEFT, LIMIT_RIGHT, HAS_MASK_MOD, HAS_DENSE_MASK, BOUND_ROWS,
            )
            # Masked before the row max, so invisible keys never set the max.
            b_s = tl.where(visible, b_s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(b_s, 1) * s_scale)
        # A row with no visible key so far keeps m = -inf; subtracting 0 instead keeps its
        # p and alpha at 0 rather than NaN (-inf - -inf).
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_new = tl.maximum(m_i, tl.max(b_s, 1) * s_scale)
        m_ref = m_new
    b_p = tl.math.exp2(b_s * s_scale - m_ref[:, None])
    # The running sum and output were accumulated against the old max: rescale them to the
    # new one before adding this block, or earlier blocks would be over-weighted.
    alpha = tl.math.exp2(m_i - m_ref)
    l_i = l_i * alpha + tl.sum(b_p, 1)
    acc = acc * alpha[:, None]
    if DROPOUT_P > 0:  # the row sums keep every weight; V sees the kept ones (scaled at the end)
        kept = dropout_kept(DROPOUT_SEED, DROPOUT_P, batch, head, start_m, start_n, BLOCK_M, BLOCK_N, True)
        b_p = tl.where(kept, b_p, 0.0)
    b_v = load_tile(p_v, m_n, offs_dv < HEAD_DIM_V, MASKED, HEAD_DIM_V != BLOCK_DV)
    acc += dot(b_p.to(b_v.dtype), b_v, UPCAST_DOT, DOT_PRECISION)  # [BM, BDV] = [BM, BN] @ [BN, BDV]
    return acc, l_i, m_new


@triton.jit
def attention_forward_kernel(
    Q, K, V, SLOPES, BIAS, MASK, CU_SEQLENS_Q, CU_SEQLENS_K, SEQUSED_Q, SEQUSED_K, DROPOUT_SEED, MAP_COUNTS, MAP_INDICES,
    sm_scale, softcap, window_left, window_right, bottom_right, seqlen_q, seqlen_kv, gqa_group,
    stride_qb, stride_qn, stride_qh, stride_qd,
    stride_kb, stride_kn, stride_kh, stride_kd,
    stride_vb, stride_vn, stride_vh, stride_vd,
    stride_ob, stride_on, stride_oh, stride_od,
    stride_lb, stride_lh, stride_ln,
    stride_sb, stride_sh,
    stride_bb, stride_bh, stride_bq, stride_bk,
    stride_mb, stride_mh, stride_mq, stride_mk,
    stride_cb, stride_ch, stride_cq,
    stride_ib, stride_ih, stride_iq, stride_ik,
    BLOCK_TABLE, page_count, stride_tb, stride_os, stride_ls, kv_splits,
    O, LSE,
    HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    LIMIT_LEFT: tl.constexpr, LIMIT_RIGHT: tl.constexpr, VARLEN: tl.constexpr,
    HAS_SEQUSED_Q: tl.constexpr, HAS_SEQUSED_K: tl.constexpr,
    MASK_MOD: tl.constexpr, HAS_MASK_MOD: tl.constexpr, HAS_DENSE_MASK: tl.constexpr, BLOCK_MAP: tl.constexpr,
    MAP_SPLIT: tl.constexpr, MAP_STEPS: tl.constexpr,
    SCORE_MOD: tl.constexpr, HAS_SCORE_MOD: tl.constexpr, SOFTCAP_FORM: tl.constexpr,
    HAS_ALIBI: tl.constexpr, HAS_BIAS: tl.constexpr, FOLD_SCALE: tl.constexpr,
    UPCAST_DOT: tl.constexpr, DOT_PRECISION: tl.constexpr, STRIDE_ALIGN: tl.constexpr, ONE_LOOP: tl.constexpr,
    BOUND_ROWS: tl.constexpr, HEAD_GROUP: tl.constexpr, DROPOUT_P: tl.constexpr, PAGE_SIZE: tl.constexpr,
    SPLIT_KEYS: tl.constexpr,
):
    """One program: BLOCK_M query rows of one (batch, q head).

    Grid (cdiv(Nq, BLOCK_M) * HEAD_GROUP, Hq / HEAD_GROUP, B), decoded by program_tile.

    Q [B, Nq, Hq, D], K [B, Nkv, Hkv, D], V [B, Nkv, Hkv, Dv], O [B, Nq, Hq, Dv] through their
    strides (any layout; varlen: B strides 0 and rows offset by cu_seqlens); LSE [B, Hq, Nq].
    DROPOUT_P > 0: each weight kept with probability 1 - DROPOUT_P (scores.dropout_kept) and O
    scaled by 1 / (1 - DROPOUT_P), as FlashAttention's; lse is of every weight. A constexpr: each
    dropout probability compiles its own kernels (a float argument, even unused, cost the D = 128
    backward's registers and stack under ptxas).
    PAGE_SIZE > 0: K and V are a paged cache [pages, PAGE_SIZE, Hkv, ·] (page_count pages; the
    batch strides step pages) and batch b's key j lives in page BLOCK_TABLE[b, j // PAGE_SIZE]
    (table row stride stride_tb).
    SPLIT_KEYS: each (query block, head, batch) is kv_splits programs (the grid's first axis
    times kv_splits), each over its share of the tile's key blocks, writing its own normalized O
    and lse (O, LSE then hold kv_splits of each, stride_os / stride_ls apart, float32) for
    attention_combine_kernel to merge: a decode step's few tiles then fill the GPU. The count is
    a runtime argument: a new sequence length that changes it compiles nothing.
    """
    # jax-triton passes Python floats as fp64; keep the score arithmetic in fp32.
    sm_scale = tl.cast(sm_scale, tl.float32)
    softcap = tl.cast(softcap, tl.float32)
    qk_scale_log2 = sm_scale * LOG2_E
    stride_qb, stride_qn, stride_qh = aligned_strides(stride_qb, stride_qn, stride_qh, STRIDE_ALIGN)
    stride_kb, stride_kn, stride_kh = aligned_strides(stride_kb, stride_kn, stride_kh, STRIDE_ALIGN)
    stride_vb, stride_vn, stride_vh = aligned_strides(stride_vb, stride_vn, stride_vh, STRIDE_ALIGN)
    stride_ob, stride_on, stride_oh = aligned_strides(stride_ob, stride_on, stride_oh, STRIDE_ALIGN)
    # Last query blocks first: under causal masks they see the most keys, and starting the
    # longest programs first keeps the last wave short.
    if SPLIT_KEYS:  # a tile's splits are neighbours along the grid's first axis
        split = tl.program_id(0) % kv_splits
        pid_m, head, batch = program_tile(HEAD_GROUP, True, tl.program_id(0) // kv_splits,
                                          tl.num_programs(0) // kv_splits)
    else:
        split = 0
        pid_m, head, batch = program_tile(HEAD_GROUP, True, tl.program_id(0), tl.num_programs(0))
    head_kv = head // gqa_group  # GQA/MQA: a group of q heads shares one kv head
    start_m = pid_m * BLOCK_M

    q_start, seqlen_q_b, q_owned = sequence_bounds(CU_SEQLENS_Q, SEQUSED_Q, batch, seqlen_q, VARLEN, HAS_SEQUSED_Q)
    if PAGE_SIZE > 0:  # a paged cache's sequences are its table's rows, each from its key 0 (varlen or not)
        k_start, seqlen_kv_b, _k_owned = sequence_bounds(CU_SEQLENS_K, SEQUSED_K, batch, seqlen_kv, False, HAS_SEQUSED_K)
    else:
        k_start, seqlen_kv_b, _k_owned = sequence_bounds(CU_SEQLENS_K, SEQUSED_K, batch, seqlen_kv, VARLEN, HAS_SEQUSED_K)
    if start_m >= q_owned:
        return
    # Causal and windows align on this diagonal: bottom-right (key i + Nkv - Nq for query i) or top-left.
    diag_offset = (seqlen_kv_b - seqlen_q_b) * bottom_right

    # 64-bit base offsets: batch * stride can pass 2^31 on large tensors.
    b64 = batch.to(tl.int64)
    h64 = head.to(tl.int64)
    row0 = (q_start + start_m).to(tl.int64)
    q_base = Q + b64 * stride_qb + h64 * stride_qh + row0 * stride_qn
    o_base = O + b64 * stride_ob + h64 * stride_oh + row0 * stride_on
    if SPLIT_KEYS:
        o_base += tl.cast(split, tl.int64) * stride_os
    table_row = BLOCK_TABLE + b64 * stride_tb
    if PAGE_SIZE > 0:  # each block finds its rows through the table (paged_rows)
        k_base = K + head_kv.to(tl.int64) * stride_kh
        v_base = V + head_kv.to(tl.int64) * stride_vh
    else:
        k_base = K + b64 * stride_kb + head_kv.to(tl.int64) * stride_kh + tl.cast(k_start, tl.int64) * stride_kn
        v_base = V + b64 * stride_vb + head_kv.to(tl.int64) * stride_vh + tl.cast(k_start, tl.int64) * stride_vn
    bias_base, mask_base, slope = score_inputs(
        BIAS, MASK, SLOPES, batch, head, stride_bb, stride_bh, stride_mb, stride_mh, stride_sb, stride_sh, HAS_ALIBI,
    )

    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    q_idx = start_m + offs_m
    p_q = q_base + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd
    b_q = load_tile(p_q, q_idx < q_owned, offs_d < HEAD_DIM, True, HEAD_DIM != BLOCK_D)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)

    # Keys outside [lo, hi) are never loaded; [full_lo, full_hi) is visible to the whole tile.
    lo, full_lo, full_hi, hi = key_spans(
        start_m, seqlen_q_b, q_owned, seqlen_kv_b, diag_offset, window_left, window_right,
        BLOCK_M, BLOCK_N, LIMIT_LEFT, LIMIT_RIGHT, HAS_MASK_MOD or HAS_DENSE_MASK,
    )
    if SPLIT_KEYS:
        lo, full_lo, full_hi, hi = split_spans(lo, full_lo, full_hi, hi, split, kv_splits, BLOCK_N)
    p_counts, p_indices = map_row(
        MAP_COUNTS, MAP_INDICES, batch, head, pid_m, stride_cb, stride_ch, stride_cq, stride_ib, stride_ih, stride_iq, MAP_SPLIT,
    )
    # A paged block's table entry loaded a step ahead of the block: where its K and V loads
    # depend on a load of the same step, Triton's pipeliner spends a stage on that load and K and
    # V lose their double buffers (H200, s72: prefill chunks 13.5-18.5% faster this way than on two
    # more stages; NOTES v0.65). A block map's next block is itself a load: not ahead.
    PAGE_AHEAD: tl.constexpr = PAGE_SIZE > 0 and PAGE_SIZE % BLOCK_N == 0 and not BLOCK_MAP
    for span in tl.static_range(1 if ONE_LOOP else (2 if BLOCK_MAP else 3)):
        first, n_blocks = span_size(span, p_counts, lo, full_lo, full_hi, hi, BLOCK_N, BLOCK_MAP, MAP_STEPS, ONE_LOOP)
        next_page = 0
        if PAGE_AHEAD:
            next_page = block_page(table_row, first, seqlen_kv_b, page_count, PAGE_SIZE)
        for i in range(0, n_blocks):
            start_n = span_block(span, i, p_indices, stride_ik, first, BLOCK_N, BLOCK_MAP, MAP_STEPS, ONE_LOOP=ONE_LOOP)
            page = next_page
            if PAGE_AHEAD:  # past the span's last block: clamped into the sequence (block_page), never used
                next_page = block_page(table_row, start_n + BLOCK_N, seqlen_kv_b, page_count, PAGE_SIZE)
            acc, l_i, m_i = _attend_block(
                acc, l_i, m_i, b_q, k_base, v_base, start_n, page,
                stride_kn, stride_kd, stride_vn, stride_vd, table_row, page_count, stride_kb, stride_vb,
                batch, head, q_idx, seqlen_q_b, seqlen_kv_b, diag_offset, window_left, window_right,
                sm_scale, qk_scale_log2, softcap, slope, bias_base, stride_bq, stride_bk, mask_base, stride_mq, stride_mk,
                DROPOUT_SEED, start_m,
                block_is_masked(span, i, first, start_n, full_lo, full_hi, BLOCK_MAP, ONE_LOOP),
                HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, BLOCK_N, span_is_masked(span, BLOCK_MAP, ONE_LOOP),
                LIMIT_LEFT, LIMIT_RIGHT, MASK_MOD, HAS_MASK_MOD, HAS_DENSE_MASK,
                SCORE_MOD, HAS_SCORE_MOD, SOFTCAP_FORM, HAS_ALIBI, HAS_BIAS, FOLD_SCALE, UPCAST_DOT, DOT_PRECISION,
                BOUND_ROWS, DROPOUT_P, PAGE_SIZE, PAGE_AHEAD,
            )

    # A row that saw no key (causal with Nq > Nkv, an empty window, padding) gives 0 and lse = -inf.
    empty = l_i == 0.0
    l_safe = tl.where(empty, 1.0, l_i)
    b_o = acc / l_safe[:, None]
    if DROPOUT_P > 0:
        b_o = b_o * dropout_scale(DROPOUT_P)
    b_lse = tl.where(empty, float("-inf"), (m_i + tl.math.log2(l_safe)) * LN_2)
    p_o = o_base + offs_m[:, None] * stride_on + offs_dv[None, :] * stride_od
    store_tile(p_o, b_o.to(O.dtype.element_ty), q_idx < q_owned, offs_dv < HEAD_DIM_V, HEAD_DIM_V != BLOCK_DV)
    p_lse = LSE + b64 * stride_lb + h64 * stride_lh + (q_start + q_idx).to(tl.int64) * stride_ln
    if SPLIT_KEYS:
        p_lse += tl.cast(split, tl.int64) * stride_ls
    tl.store(p_lse, b_lse, mask=q_idx < q_owned)


@triton.jit
def attention_combine_kernel(
    CU_SEQLENS_Q, SEQUSED_Q, O_SPLIT, LSE_SPLIT,
    seqlen_q,
    stride_ob, stride_on, stride_oh, stride_od,
    stride_lb, stride_lh, stride_ln,
    stride_os, stride_ls, kv_splits,
    O, LSE,
    HEAD_DIM_V: tl.constexpr, BLOCK_DV: tl.constexpr, BLOCK_M: tl.constexpr,
    VARLEN: tl.constexpr, HAS_SEQUSED_Q: tl.constexpr,
):
    """Merge a split forward's kv_splits partial results (attention_forward_kernel's SPLIT_KEYS):
    O = sum_s exp(lse_s - lse) O_s, lse = log sum_s exp(lse_s), split s's key share alone giving
    O_s and lse_s. A row no split saw a key for gives 0 and lse = -inf, as the forward does.

    Grid (cdiv(Nq, BLOCK_M), Hq, B). O_SPLIT [kv_splits, *O's shape] and LSE_SPLIT [kv_splits,
    *LSE's shape], float32, each split laid out as O and LSE (their strides), stride_os /
    stride_ls apart.
    """
    start_m = tl.program_id(0) * BLOCK_M
    head = tl.program_id(1)
    batch = tl.program_id(2)
    q_start, _used, q_owned = sequence_bounds(CU_SEQLENS_Q, SEQUSED_Q, batch, seqlen_q, VARLEN, HAS_SEQUSED_Q)
    if start_m >= q_owned:
        return
    rows = start_m + tl.arange(0, BLOCK_M)
    offs_dv = tl.arange(0, BLOCK_DV)
    m_rows = rows < q_owned
    b64, h64 = batch.to(tl.int64), head.to(tl.int64)
    row64 = (q_start + rows).to(tl.int64)
    lse_offsets = b64 * stride_lb + h64 * stride_lh + row64 * stride_ln
    o_offsets = b64 * stride_ob + h64 * stride_oh + row64[:, None] * stride_on + offs_dv[None, :] * stride_od
    m_o = m_rows[:, None] & (offs_dv < HEAD_DIM_V)[None, :]
    lse_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    for s in range(0, kv_splits):  # split offsets in 64 bits: kv_splits copies of O can pass 2^31 elements
        lse_max = tl.maximum(lse_max, tl.load(LSE_SPLIT + tl.cast(s, tl.int64) * stride_ls + lse_offsets, mask=m_rows,
                                              other=float("-inf")))
    # Rows no split saw a key for: weights against 0 rather than NaN (-inf - -inf).
    lse_ref = tl.where(lse_max == float("-inf"), 0.0, lse_max)
    total = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    for s in range(0, kv_splits):
        s64 = tl.cast(s, tl.int64)
        weight = tl.exp(tl.load(LSE_SPLIT + s64 * stride_ls + lse_offsets, mask=m_rows, other=float("-inf")) - lse_ref)
        total += weight
        acc += weight[:, None] * tl.load(O_SPLIT + s64 * stride_os + o_offsets, mask=m_o, other=0.0)
    empty = total == 0.0
    out = acc / tl.where(empty, 1.0, total)[:, None]
    lse = tl.where(empty, float("-inf"), lse_ref + tl.log(tl.where(empty, 1.0, total)))
    tl.store(O + o_offsets, out.to(O.dtype.element_ty), mask=m_o)
    tl.store(LSE + lse_offsets, lse, mask=m_rows)
