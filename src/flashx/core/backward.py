"""The FlashAttention-2 backward: per-row statistics (delta = rowsum(dO * O), and lse in log2
units), then dK/dV over key blocks and dQ over query blocks, two kinds of programs of one kernel
(attention_backward_kernel), launched together or one after the other (see its docstring). The
statistics come from their own pass over O and dO (the preprocess), or, where dQ launches alone
before dK/dV, from dQ's programs, which load dO anyway (DQ_ROW_STATS).

No atomics: each dK/dV program owns one key block of one kv head and loops over the q heads
of its GQA group; each dQ program owns one query block. Gradients are therefore bitwise
deterministic (dQ by float32 atomics from dK/dV measured 0.68-0.92x on the H200: NOTES v0.7).
P is recomputed from q, k and the saved lse; nothing of size Nq x Nkv is allocated (except the
bias gradient, when an additive bias needs one).
"""
from . import runtime  # noqa: F401, I001  (first: decides compiled vs interpreted before triton loads)

import triton
import triton.language as tl

from .forward import program_tile, sequence_bounds
from .scores import (
    LOG2_E, aligned, aligned_strides, dot, dropout_kept, dropout_scale, grad_through_transforms, key_spans, load_tile,
    map_row, query_range, score_inputs, span_block, span_is_masked, span_size, store_tile, transform_scores, visible_pairs,
)


@triton.jit
def attention_backward_preprocess_kernel(
    O, DO, LSE, DLSE, CU_SEQLENS_Q,
    seqlen_q,
    stride_ob, stride_on, stride_oh, stride_od,
    stride_dob, stride_don, stride_doh, stride_dod,
    stride_lb, stride_lh, stride_ln,
    stride_rb, stride_rh, stride_rn,
    DELTA_OUT, LSE_LOG2_OUT,
    HEAD_DIM_V: tl.constexpr, BLOCK_DV: tl.constexpr, BLOCK_M: tl.constexpr, VARLEN: tl.constexpr,
    HAS_DLSE: tl.constexpr, STRIDE_ALIGN: tl.constexpr, LSE_ALIGN: tl.constexpr, Q_ALIGN: tl.constexpr,
    PADDED_ROW_STATS: tl.constexpr, ROW_ALIGN: tl.constexpr,
):
    """The backward's row statistics, float32, into DELTA_OUT and LSE_LOG2_OUT: delta =
    rowsum(dO * O) - dlse, and lse_log2 (see _row_stats). For the launches where no dQ launch
    comes first to write them (AttentionPlan.backward_calls; attention_backward_kernel's
    DQ_ROW_STATS).

    Shapes: the plan's row_stats_shape, lse's [B, Hq, Nq] (varlen [Hq, total_q]) with each row
    padded when PADDED_ROW_STATS. Grid (cdiv(rows, BLOCK_M), Hq, B) over every row of it.
    """
    stride_ob, stride_on, stride_oh = aligned_strides(stride_ob, stride_on, stride_oh, STRIDE_ALIGN)
    stride_dob, stride_don, stride_doh = aligned_strides(stride_dob, stride_don, stride_doh, STRIDE_ALIGN)
    stride_lb, stride_lh = aligned(stride_lb, LSE_ALIGN), aligned(stride_lh, LSE_ALIGN)
    stride_rb, stride_rh = aligned(stride_rb, ROW_ALIGN), aligned(stride_rh, ROW_ALIGN)
    seqlen_q = aligned(seqlen_q, Q_ALIGN)
    pid_m = tl.program_id(0)
    head = tl.program_id(1)
    batch = tl.program_id(2)
    q_start, _, q_owned = sequence_bounds(CU_SEQLENS_Q, CU_SEQLENS_Q, batch, seqlen_q, VARLEN, False)
    q_idx = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_dv = tl.arange(0, BLOCK_DV)
    rows = (q_start + q_idx).to(tl.int64)
    b64 = batch.to(tl.int64)
    h64 = head.to(tl.int64)
    p_o = O + b64 * stride_ob + h64 * stride_oh + rows[:, None] * stride_on + offs_dv[None, :] * stride_od
    p_do = DO + b64 * stride_dob + h64 * stride_doh + rows[:, None] * stride_don + offs_dv[None, :] * stride_dod
    m_rows = q_idx < q_owned
    m_dv = offs_dv < HEAD_DIM_V
    b_o = load_tile(p_o, m_rows, m_dv, True, HEAD_DIM_V != BLOCK_DV)
    b_do = load_tile(p_do, m_rows, m_dv, True, HEAD_DIM_V != BLOCK_DV)
    delta, lse_log2 = _row_stats(b_o, b_do, LSE, DLSE, b64 * stride_lb + h64 * stride_lh + rows * stride_ln, m_rows, HAS_DLSE)
    _store_row_stats(DELTA_OUT, LSE_LOG2_OUT, b64 * stride_rb + h64 * stride_rh + rows * stride_rn, delta, lse_log2,
                     m_rows, PADDED_ROW_STATS)


@triton.jit
def _row_stats(b_o, b_do, LSE, DLSE, lse_offsets, m_rows, HAS_DLSE: tl.constexpr):
    """(delta, lse_log2) of some rows, float32, from their O and dO tiles (zeros past the sequence).

    d lse / d score = P, so an lse gradient enters dS = P * (dP - delta) through delta.
    lse_log2 is lse in log2 units with +inf for rows that saw no key (lse = -inf) and for
    rows past the sequence, so that P = exp2(score - lse_log2) = 0 for them.
    """
    delta = tl.sum(b_o.to(tl.float32) * b_do.to(tl.float32), 1)
    if HAS_DLSE:
        delta -= tl.load(DLSE + lse_offsets, mask=m_rows, other=0.0)
    lse = tl.load(LSE + lse_offsets, mask=m_rows, other=float("-inf"))
    return delta, tl.where(lse == float("-inf"), float("inf"), lse * LOG2_E)


@triton.jit
def _store_row_stats(DELTA_OUT, LSE_LOG2_OUT, row_offsets, delta, lse_log2, m_rows, PADDED_ROW_STATS: tl.constexpr):
    """Stores some rows' statistics. Padded (PADDED_ROW_STATS), every row of the block is a row
    of the buffer, padding included, and takes delta 0 and lse_log2 +inf past the sequence: the
    dK/dV and dQ loops then load both without a mask or a fix-up (which cost their D = 128 step
    8-23% more SASS instructions, mostly predicates packed into registers for the masked loads'
    fill values)."""
    m_store = None if PADDED_ROW_STATS else m_rows
    tl.store(DELTA_OUT + row_offsets, tl.where(m_rows, delta, 0.0), mask=m_store)
    tl.store(LSE_LOG2_OUT + row_offsets, tl.where(m_rows, lse_log2, float("inf")), mask=m_store)


@triton.jit
def _score_grads(
    qk, dp, lse_log2, delta, batch, head, q2, kv2, seqlen_q, seqlen_kv, diag_offset, window_left, window_right,
    sm_scale, qk_scale_log2, softcap, slope, bias_base, stride_bq, stride_bk, mask_base, stride_mq, stride_mk,
    DROPOUT_SEED, start_m, start_n,
    MASKED: tl.constexpr, LIMIT_LEFT: tl.constexpr, LIMIT_RIGHT: tl.constexpr,
    MASK_MOD: tl.constexpr, HAS_MASK_MOD: tl.constexpr, HAS_DENSE_MASK: tl.constexpr,
    SCORE_MOD: tl.constexpr, SCORE_MOD_GRAD: tl.constexpr, HAS_SCORE_MOD: tl.constexpr,
    SOFTCAP_FORM: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_BIAS: tl.constexpr, BOUND_ROWS: tl.constexpr,
    DROPOUT_P: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, QUERIES_DOWN: tl.constexpr,
):
    """(P, dS, d qk) of one tile, in whichever orientation q2/kv2, lse and delta broadcast to.

    P = exp(score - lse); dS = P * (dP - delta) is the gradient wrt the final score (and so
    the bias's); d qk follows it back through softcap and score_mod, short of the scale (the
    kernels scale dK and dQ once, at the end). With dropout (the forward's O = (P * Z) V, Z the
    kept pairs over 1 - DROPOUT_P) the P returned is P * Z, for dV, and dP is dO V^T * Z; delta,
    rowsum(dO * O), is then rowsum(P * dP) as without.
    """
    if HAS_SCORE_MOD or SOFTCAP_FORM or HAS_ALIBI or HAS_BIAS:
        s = transform_scores(
            qk, batch, head, q2, kv2, seqlen_q, seqlen_kv, diag_offset, sm_scale, softcap, slope,
            bias_base, stride_bq, stride_bk, SCORE_MOD, HAS_SCORE_MOD, SOFTCAP_FORM, HAS_ALIBI, HAS_BIAS,
        ) * LOG2_E
    else:
        s = qk * qk_scale_log2
    if MASKED:
        visible = visible_pairs(
            batch, head, q2, kv2, seqlen_q, seqlen_kv, diag_offset, window_left, window_right,
            mask_base, stride_mq, stride_mk, MASK_MOD, LIMIT_LEFT, LIMIT_RIGHT, HAS_MASK_MOD, HAS_DENSE_MASK,
            BOUND_ROWS,
        )
        s = tl.where(visible, s, float("-inf"))
    p = tl.math.exp2(s - lse_log2)
    if DROPOUT_P > 0:
        kept = dropout_kept(DROPOUT_SEED, DROPOUT_P, batch, head, start_m, start_n, BLOCK_M, BLOCK_N, QUERIES_DOWN)
        dp = tl.where(kept, dp * dropout_scale(DROPOUT_P), 0.0)
    ds = p * (dp - delta)
    dqk = grad_through_transforms(
        ds, qk, batch, head, q2, kv2, sm_scale, softcap, SCORE_MOD, SCORE_MOD_GRAD, HAS_SCORE_MOD, SOFTCAP_FORM
    )
    if DROPOUT_P > 0:
        p = tl.where(kept, p * dropout_scale(DROPOUT_P), 0.0)
    return p, ds, dqk


@triton.jit
def _load_row_stats(p_lse_log2, p_delta, m_rows, PADDED_ROW_STATS: tl.constexpr):
    """(lse_log2, delta) of some rows; those past the sequence read +inf and 0 (so P = 0), from
    the padding when PADDED_ROW_STATS, else through the load's mask."""
    if PADDED_ROW_STATS:
        return tl.load(p_lse_log2), tl.load(p_delta)
    return tl.load(p_lse_log2, mask=m_rows, other=float("inf")), tl.load(p_delta, mask=m_rows, other=0.0)


@triton.jit
def _dkdv_program(
    x, programs,
    Q, K, V, DO, LSE_LOG2, DELTA, SLOPES, BIAS, MASK, CU_SEQLENS_Q, CU_SEQLENS_K, SEQUSED_Q, SEQUSED_K, DROPOUT_SEED,
    MAP_COUNTS, MAP_INDICES,
    sm_scale, softcap, window_left, window_right, bottom_right, seqlen_q, seqlen_kv, gqa_group,
    stride_qb, stride_qn, stride_qh, stride_qd,
    stride_kb, stride_kn, stride_kh, stride_kd,
    stride_vb, stride_vn, stride_vh, stride_vd,
    stride_dob, stride_don, stride_doh, stride_dod,
    stride_rb, stride_rh, stride_rn,
    stride_sb, stride_sh,
    stride_bb, stride_bh, stride_bq, stride_bk,
    stride_mb, stride_mh, stride_mq, stride_mk,
    stride_cb, stride_ch, stride_cq,
    stride_ib, stride_ih, stride_iq, stride_ik,
    stride_dkb, stride_dkn, stride_dkh, stride_dkd,
    stride_dvb, stride_dvn, stride_dvh, stride_dvd,
    DK, DV,
    HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGES: tl.constexpr,
    LIMIT_LEFT: tl.constexpr, LIMIT_RIGHT: tl.constexpr, VARLEN: tl.constexpr,
    HAS_SEQUSED_Q: tl.constexpr, HAS_SEQUSED_K: tl.constexpr,
    MASK_MOD: tl.constexpr, HAS_MASK_MOD: tl.constexpr, HAS_DENSE_MASK: tl.constexpr, BLOCK_MAP: tl.constexpr,
    MAP_SPLIT: tl.constexpr, MAP_STEPS: tl.constexpr,
    SCORE_MOD: tl.constexpr, SCORE_MOD_GRAD: tl.constexpr, HAS_SCORE_MOD: tl.constexpr, SOFTCAP_FORM: tl.constexpr,
    HAS_ALIBI: tl.constexpr, HAS_BIAS: tl.constexpr,
    UPCAST_DOT: tl.constexpr, DOT_PRECISION: tl.constexpr, STRIDE_ALIGN: tl.constexpr, BOUND_ROWS: tl.constexpr,
    HEAD_GROUP: tl.constexpr, ROWS_DOWN: tl.constexpr, ROW_ALIGN: tl.constexpr, PADDED_ROW_STATS: tl.constexpr,
    Q_ALIGN: tl.constexpr, KV_ALIGN: tl.constexpr, EDGES_TOGETHER: tl.constexpr,
    WRITE_DK: tl.constexpr, WRITE_DV: tl.constexpr, DROPOUT_P: tl.constexpr,
):
    """dK, dV of BLOCK_N keys of one kv head, summed over its GQA group: program x of `programs`
    (cdiv(Nkv, BLOCK_N) * HEAD_GROUP) along the grid's first axis, its second axis Hkv / HEAD_GROUP,
    decoded by program_tile.

    Tiles are transposed ([BN, BM]: keys down, queries across) so dK and dV accumulate
    without a transpose of P. MAP_* is the transposed block map (query blocks per key block).
    WRITE_DK / WRITE_DV: which of the two this program computes and stores; with one, the other's
    products, loads and accumulator fall away at compile time (dV alone needs no V, dO V^T or dS),
    so a wide head's pass holds one [BN, BD] float32 accumulator instead of two.
    """
    sm_scale = tl.cast(sm_scale, tl.float32)
    softcap = tl.cast(softcap, tl.float32)
    qk_scale_log2 = sm_scale * LOG2_E
    stride_qb, stride_qn, stride_qh = aligned_strides(stride_qb, stride_qn, stride_qh, STRIDE_ALIGN)
    stride_kb, stride_kn, stride_kh = aligned_strides(stride_kb, stride_kn, stride_kh, STRIDE_ALIGN)
    stride_vb, stride_vn, stride_vh = aligned_strides(stride_vb, stride_vn, stride_vh, STRIDE_ALIGN)
    stride_dob, stride_don, stride_doh = aligned_strides(stride_dob, stride_don, stride_doh, STRIDE_ALIGN)
    stride_dkb, stride_dkn, stride_dkh = aligned_strides(stride_dkb, stride_dkn, stride_dkh, STRIDE_ALIGN)
    stride_dvb, stride_dvn, stride_dvh = aligned_strides(stride_dvb, stride_dvn, stride_dvh, STRIDE_ALIGN)
    stride_rb, stride_rh = aligned(stride_rb, ROW_ALIGN), aligned(stride_rh, ROW_ALIGN)
    seqlen_q, seqlen_kv = aligned(seqlen_q, Q_ALIGN), aligned(seqlen_kv, KV_ALIGN)
    pid_n, head_kv, batch = program_tile(HEAD_GROUP, False, x, programs)
    start_n = pid_n * BLOCK_N

    q_start, seqlen_q_b, q_owned = sequence_bounds(CU_SEQLENS_Q, SEQUSED_Q, batch, seqlen_q, VARLEN, HAS_SEQUSED_Q)
    k_start, seqlen_kv_b, k_owned = sequence_bounds(CU_SEQLENS_K, SEQUSED_K, batch, seqlen_kv, VARLEN, HAS_SEQUSED_K)
    if start_n >= k_owned:
        return
    diag_offset = (seqlen_kv_b - seqlen_q_b) * bottom_right

    b64 = batch.to(tl.int64)
    hk64 = head_kv.to(tl.int64)
    row0 = (k_start + start_n).to(tl.int64)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    kv_idx = start_n + offs_n
    m_n = kv_idx < k_owned
    m_d = offs_d < HEAD_DIM
    m_dv = offs_dv < HEAD_DIM_V
    p_k = K + b64 * stride_kb + hk64 * stride_kh + row0 * stride_kn + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
    p_v = V + b64 * stride_vb + hk64 * stride_vh + row0 * stride_vn + offs_n[:, None] * stride_vn + offs_dv[None, :] * stride_vd
    b_k = load_tile(p_k, m_n, m_d, True, HEAD_DIM != BLOCK_D)  # [BN, BD]
    b_v = load_tile(p_v, m_n, m_dv, True, HEAD_DIM_V != BLOCK_DV)  # [BN, BDV]
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], dtype=tl.float32)

    lo, full_lo, full_hi, hi = query_range(
        start_n, seqlen_q_b, diag_offset, window_left, window_right, BLOCK_M, BLOCK_N, LIMIT_LEFT, LIMIT_RIGHT
    )
    if HAS_MASK_MOD or HAS_DENSE_MASK:
        full_hi = full_lo  # without a block map every block takes the mask
    # A key block that runs past the sequence is masked for every query block.
    full_hi = tl.where(start_n + BLOCK_N > seqlen_kv_b, full_lo, full_hi)

    for g in range(0, gqa_group):
        head = head_kv * gqa_group + g
        h64 = head.to(tl.int64)
        q_base = Q + b64 * stride_qb + h64 * stride_qh + tl.cast(q_start, tl.int64) * stride_qn
        do_base = DO + b64 * stride_dob + h64 * stride_doh + tl.cast(q_start, tl.int64) * stride_don
        lse_base = LSE_LOG2 + b64 * stride_rb + h64 * stride_rh + tl.cast(q_start, tl.int64) * stride_rn
        delta_base = DELTA + b64 * stride_rb + h64 * stride_rh + tl.cast(q_start, tl.int64) * stride_rn
        bias_base, mask_base, slope = score_inputs(
            BIAS, MASK, SLOPES, batch, head, stride_bb, stride_bh, stride_mb, stride_mh, stride_sb, stride_sh, HAS_ALIBI,
        )
        p_counts, p_indices = map_row(
            MAP_COUNTS, MAP_INDICES, batch, head, pid_n, stride_cb, stride_ch, stride_cq, stride_ib, stride_ih, stride_iq,
            MAP_SPLIT,
        )
        for span in tl.static_range(2 if BLOCK_MAP or EDGES_TOGETHER else 3):
            first, n_blocks = span_size(span, p_counts, lo, full_lo, full_hi, hi, BLOCK_M, BLOCK_MAP, MAP_STEPS, False, EDGES_TOGETHER)
            for i in tl.range(0, n_blocks, num_stages=STAGES):
                start_m = span_block(span, i, p_indices, stride_ik, first, BLOCK_M, BLOCK_MAP, MAP_STEPS, EDGES_TOGETHER, full_lo, full_hi)
                q_idx = start_m + offs_m
                m_m = q_idx < q_owned
                m64 = tl.cast(start_m, tl.int64)
                p_q = q_base + m64 * stride_qn + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd
                p_do = do_base + m64 * stride_don + offs_m[:, None] * stride_don + offs_dv[None, :] * stride_dod
                b_q = load_tile(p_q, m_m, m_d, True, HEAD_DIM != BLOCK_D)  # [BM, BD]
                b_do = load_tile(p_do, m_m, m_dv, True, HEAD_DIM_V != BLOCK_DV)  # [BM, BDV]
                lse_log2, delta = _load_row_stats(
                    lse_base + q_idx.to(tl.int64) * stride_rn, delta_base + q_idx.to(tl.int64) * stride_rn, m_m,
                    PADDED_ROW_STATS,
                )
                # Queries down and keys across (ROWS_DOWN) keeps lse and delta per row, a few
                # registers per thread where across they take 32; P and dS then reach dV and dK
                # transposed, through shared memory. Worth it at D = 64; at D = 128 Triton's
                # layouts for the transposed P cost more registers than it saves.
                if ROWS_DOWN:
                    qk = dot(b_q, tl.trans(b_k), UPCAST_DOT, DOT_PRECISION)  # [BM, BN] = [BM, BD] @ [BD, BN]
                    dp = dot(b_do, tl.trans(b_v), UPCAST_DOT, DOT_PRECISION)  # [BM, BN] = [BM, BDV] @ [BDV, BN]
                    q2, kv2, lse2, delta2 = q_idx[:, None], kv_idx[None, :], lse_log2[:, None], delta[:, None]
                else:
                    qk = dot(b_k, tl.trans(b_q), UPCAST_DOT, DOT_PRECISION)  # [BN, BM] = [BN, BD] @ [BD, BM]
                    dp = dot(b_v, tl.trans(b_do), UPCAST_DOT, DOT_PRECISION)  # [BN, BM] = [BN, BDV] @ [BDV, BM]
                    q2, kv2, lse2, delta2 = q_idx[None, :], kv_idx[:, None], lse_log2[None, :], delta[None, :]
                p, _ds, dqk = _score_grads(
                    qk, dp, lse2, delta2, batch, head, q2, kv2,
                    seqlen_q_b, seqlen_kv_b, diag_offset, window_left, window_right,
                    sm_scale, qk_scale_log2, softcap, slope, bias_base, stride_bq, stride_bk, mask_base, stride_mq, stride_mk,
                    DROPOUT_SEED, start_m, start_n,
                    span_is_masked(span, BLOCK_MAP, False, EDGES_TOGETHER), LIMIT_LEFT, LIMIT_RIGHT,
                    MASK_MOD, HAS_MASK_MOD, HAS_DENSE_MASK, SCORE_MOD, SCORE_MOD_GRAD, HAS_SCORE_MOD,
                    SOFTCAP_FORM, HAS_ALIBI, HAS_BIAS, BOUND_ROWS, DROPOUT_P, BLOCK_M, BLOCK_N, ROWS_DOWN,
                )
                # (Each transpose right before its product: taken together first, they cost D = 64
                # 8 KiB more shared memory.)
                if ROWS_DOWN:
                    if WRITE_DV:
                        dv += dot(tl.trans(p.to(b_do.dtype)), b_do, UPCAST_DOT, DOT_PRECISION)  # [BN, BDV]
                    if WRITE_DK:
                        dk += dot(tl.trans(dqk.to(b_q.dtype)), b_q, UPCAST_DOT, DOT_PRECISION)  # [BN, BD]
                else:
                    if WRITE_DV:
                        dv += dot(p.to(b_do.dtype), b_do, UPCAST_DOT, DOT_PRECISION)  # [BN, BDV] = [BN, BM] @ [BM, BDV]
                    if WRITE_DK:
                        dk += dot(dqk.to(b_q.dtype), b_q, UPCAST_DOT, DOT_PRECISION)  # [BN, BD] = [BN, BM] @ [BM, BD]

    p_dk = DK + b64 * stride_dkb + hk64 * stride_dkh + row0 * stride_dkn + offs_n[:, None] * stride_dkn + offs_d[None, :] * stride_dkd
    p_dv = DV + b64 * stride_dvb + hk64 * stride_dvh + row0 * stride_dvn + offs_n[:, None] * stride_dvn + offs_dv[None, :] * stride_dvd
    if WRITE_DK:
        store_tile(p_dk, (dk * sm_scale).to(DK.dtype.element_ty), m_n, m_d, HEAD_DIM != BLOCK_D)
    if WRITE_DV:
        store_tile(p_dv, dv.to(DV.dtype.element_ty), m_n, m_dv, HEAD_DIM_V != BLOCK_DV)


@triton.jit
def _dq_program(
    x, programs,
    Q, K, V, DO, LSE_LOG2, DELTA, SLOPES, BIAS, MASK, CU_SEQLENS_Q, CU_SEQLENS_K, SEQUSED_Q, SEQUSED_K, DROPOUT_SEED,
    MAP_COUNTS, MAP_INDICES, O, LSE, DLSE,
    sm_scale, softcap, window_left, window_right, bottom_right, seqlen_q, seqlen_kv, gqa_group,
    stride_qb, stride_qn, stride_qh, stride_qd,
    stride_kb, stride_kn, stride_kh, stride_kd,
    stride_vb, stride_vn, stride_vh, stride_vd,
    stride_dob, stride_don, stride_doh, stride_dod,
    stride_rb, stride_rh, stride_rn,
    stride_sb, stride_sh,
    stride_bb, stride_bh, stride_bq, stride_bk,
    stride_mb, stride_mh, stride_mq, stride_mk,
    stride_cb, stride_ch, stride_cq,
    stride_ib, stride_ih, stride_iq, stride_ik,
    stride_dqb, stride_dqn, stride_dqh, stride_dqd,
    stride_gb, stride_gh, stride_gq, stride_gk,
    stride_ob, stride_on, stride_oh, stride_od,
    stride_lb, stride_lh, stride_ln,
    DQ, DBIAS, DELTA_OUT, LSE_LOG2_OUT,
    HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGES: tl.constexpr,
    LIMIT_LEFT: tl.constexpr, LIMIT_RIGHT: tl.constexpr, VARLEN: tl.constexpr,
    HAS_SEQUSED_Q: tl.constexpr, HAS_SEQUSED_K: tl.constexpr,
    MASK_MOD: tl.constexpr, HAS_MASK_MOD: tl.constexpr, HAS_DENSE_MASK: tl.constexpr, BLOCK_MAP: tl.constexpr,
    MAP_SPLIT: tl.constexpr, MAP_STEPS: tl.constexpr,
    SCORE_MOD: tl.constexpr, SCORE_MOD_GRAD: tl.constexpr, HAS_SCORE_MOD: tl.constexpr, SOFTCAP_FORM: tl.constexpr,
    HAS_ALIBI: tl.constexpr, HAS_BIAS: tl.constexpr, BIAS_GRAD: tl.constexpr, SLOPES_GRAD: tl.constexpr,
    UPCAST_DOT: tl.constexpr, DOT_PRECISION: tl.constexpr, STRIDE_ALIGN: tl.constexpr, BOUND_ROWS: tl.constexpr,
    HEAD_GROUP: tl.constexpr, ROW_ALIGN: tl.constexpr, PADDED_ROW_STATS: tl.constexpr,
    Q_ALIGN: tl.constexpr, KV_ALIGN: tl.constexpr, EDGES_TOGETHER: tl.constexpr, DROPOUT_P: tl.constexpr,
    ROW_STATS: tl.constexpr, HAS_DLSE: tl.constexpr, LSE_ALIGN: tl.constexpr,
):
    """dQ of BLOCK_M query rows of one (batch, q head), and in DBIAS either dBias [B, Hq, Nq, Nkv]
    (BIAS_GRAD) or the block's part of ALiBi's slope gradient [B, Hq, cdiv(Nq, BLOCK_M)]
    (SLOPES_GRAD: the score holds -slope * |i' - j|, so d slope = -sum(dS * |i' - j|); one value
    per program, summed by the caller, so the result does not depend on program order):
    program x of `programs` along the grid's first axis (cdiv(Nq, BLOCK_M) * HEAD_GROUP), decoded
    by program_tile; walks the same key blocks as the forward.

    ROW_STATS: the program computes its rows' statistics (_row_stats: delta from O and the dO
    tile it loads anyway, lse_log2 from LSE) instead of loading them, and stores them in
    DELTA_OUT and LSE_LOG2_OUT for a dK/dV launch after it; the grid then also covers the padding
    of row_stats_shape (PADDED_ROW_STATS), whose programs only store it. That saves the
    preprocess's pass over O and dO (attention_backward_preprocess_kernel).
    """
    sm_scale = tl.cast(sm_scale, tl.float32)
    softcap = tl.cast(softcap, tl.float32)
    qk_scale_log2 = sm_scale * LOG2_E
    stride_qb, stride_qn, stride_qh = aligned_strides(stride_qb, stride_qn, stride_qh, STRIDE_ALIGN)
    stride_kb, stride_kn, stride_kh = aligned_strides(stride_kb, stride_kn, stride_kh, STRIDE_ALIGN)
    stride_vb, stride_vn, stride_vh = aligned_strides(stride_vb, stride_vn, stride_vh, STRIDE_ALIGN)
    stride_dob, stride_don, stride_doh = aligned_strides(stride_dob, stride_don, stride_doh, STRIDE_ALIGN)
    stride_dqb, stride_dqn, stride_dqh = aligned_strides(stride_dqb, stride_dqn, stride_dqh, STRIDE_ALIGN)
    stride_ob, stride_on, stride_oh = aligned_strides(stride_ob, stride_on, stride_oh, STRIDE_ALIGN)
    stride_rb, stride_rh = aligned(stride_rb, ROW_ALIGN), aligned(stride_rh, ROW_ALIGN)
    stride_lb, stride_lh = aligned(stride_lb, LSE_ALIGN), aligned(stride_lh, LSE_ALIGN)
    seqlen_q, seqlen_kv = aligned(seqlen_q, Q_ALIGN), aligned(seqlen_kv, KV_ALIGN)
    pid_m, head, batch = program_tile(HEAD_GROUP, True, x, programs)
    head_kv = head // gqa_group
    start_m = pid_m * BLOCK_M

    q_start, seqlen_q_b, q_owned = sequence_bounds(CU_SEQLENS_Q, SEQUSED_Q, batch, seqlen_q, VARLEN, HAS_SEQUSED_Q)
    k_start, seqlen_kv_b, _k_owned = sequence_bounds(CU_SEQLENS_K, SEQUSED_K, batch, seqlen_kv, VARLEN, HAS_SEQUSED_K)
    b64 = batch.to(tl.int64)
    h64 = head.to(tl.int64)
    offs_m = tl.arange(0, BLOCK_M)
    q_idx = start_m + offs_m
    rows = (q_start + q_idx).to(tl.int64)
    row_offsets = b64 * stride_rb + h64 * stride_rh + rows * stride_rn
    if start_m >= q_owned:
        if ROW_STATS and PADDED_ROW_STATS:  # a block of padding rows only
            m_none = q_idx < 0
            _store_row_stats(DELTA_OUT, LSE_LOG2_OUT, row_offsets, tl.zeros([BLOCK_M], tl.float32),
                             tl.zeros([BLOCK_M], tl.float32), m_none, True)
        return
    diag_offset = (seqlen_kv_b - seqlen_q_b) * bottom_right

    row0 = (q_start + start_m).to(tl.int64)
    k_base = K + b64 * stride_kb + head_kv.to(tl.int64) * stride_kh + tl.cast(k_start, tl.int64) * stride_kn
    v_base = V + b64 * stride_vb + head_kv.to(tl.int64) * stride_vh + tl.cast(k_start, tl.int64) * stride_vn
    bias_base, mask_base, slope = score_inputs(
        BIAS, MASK, SLOPES, batch, head, stride_bb, stride_bh, stride_mb, stride_mh, stride_sb, stride_sh, HAS_ALIBI,
    )
    dbias_base = DBIAS + b64 * stride_gb + h64 * stride_gh

    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    m_m = q_idx < q_owned
    m_d = offs_d < HEAD_DIM
    m_dv = offs_dv < HEAD_DIM_V
    p_q = Q + b64 * stride_qb + h64 * stride_qh + row0 * stride_qn + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd
    p_do = DO + b64 * stride_dob + h64 * stride_doh + row0 * stride_don + offs_m[:, None] * stride_don + offs_dv[None, :] * stride_dod
    b_q = load_tile(p_q, m_m, m_d, True, HEAD_DIM != BLOCK_D)  # [BM, BD]
    b_do = load_tile(p_do, m_m, m_dv, True, HEAD_DIM_V != BLOCK_DV)  # [BM, BDV]
    if ROW_STATS:
        p_o = O + b64 * stride_ob + h64 * stride_oh + row0 * stride_on + offs_m[:, None] * stride_on + offs_dv[None, :] * stride_od
        b_o = load_tile(p_o, m_m, m_dv, True, HEAD_DIM_V != BLOCK_DV)
        delta, lse_log2 = _row_stats(b_o, b_do, LSE, DLSE, b64 * stride_lb + h64 * stride_lh + rows * stride_ln, m_m, HAS_DLSE)
        _store_row_stats(DELTA_OUT, LSE_LOG2_OUT, row_offsets, delta, lse_log2, m_m, PADDED_ROW_STATS)
    else:
        lse_log2, delta = _load_row_stats(LSE_LOG2 + row_offsets, DELTA + row_offsets, m_m, PADDED_ROW_STATS)
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    slope_sums = tl.zeros([BLOCK_M], dtype=tl.float32)  # per row: sum of dS * |i' - j| (SLOPES_GRAD)

    lo, full_lo, full_hi, hi = key_spans(
        start_m, seqlen_q_b, q_owned, seqlen_kv_b, diag_offset, window_left, window_right,
        BLOCK_M, BLOCK_N, LIMIT_LEFT, LIMIT_RIGHT, HAS_MASK_MOD or HAS_DENSE_MASK,
    )
    p_counts, p_indices = map_row(
        MAP_COUNTS, MAP_INDICES, batch, head, pid_m, stride_cb, stride_ch, stride_cq, stride_ib, stride_ih, stride_iq, MAP_SPLIT,
    )
    for span in tl.static_range(2 if BLOCK_MAP or EDGES_TOGETHER else 3):
        first, n_blocks = span_size(span, p_counts, lo, full_lo, full_hi, hi, BLOCK_N, BLOCK_MAP, MAP_STEPS, False, EDGES_TOGETHER)
        for i in tl.range(0, n_blocks, num_stages=STAGES):
            start_n = span_block(span, i, p_indices, stride_ik, first, BLOCK_N, BLOCK_MAP, MAP_STEPS, EDGES_TOGETHER, full_lo, full_hi)
            kv_idx = start_n + offs_n
            m_n = kv_idx < seqlen_kv_b
            n64 = tl.cast(start_n, tl.int64)
            # [BD, BN] and [BDV, BN]: k and v transposed for q @ k^T and dO @ v^T
            p_kt = k_base + n64 * stride_kn + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd
            p_vt = v_base + n64 * stride_vn + offs_n[None, :] * stride_vn + offs_dv[:, None] * stride_vd
            # Keys past the sequence only occur in masked blocks (the span logic keeps full blocks in range).
            b_kt = load_tile(p_kt, m_d, m_n, HEAD_DIM != BLOCK_D, span_is_masked(span, BLOCK_MAP, False, EDGES_TOGETHER))
            b_vt = load_tile(p_vt, m_dv, m_n, HEAD_DIM_V != BLOCK_DV, span_is_masked(span, BLOCK_MAP, False, EDGES_TOGETHER))
            qk = dot(b_q, b_kt, UPCAST_DOT, DOT_PRECISION)  # [BM, BN] = [BM, BD] @ [BD, BN]
            dp = dot(b_do, b_vt, UPCAST_DOT, DOT_PRECISION)  # [BM, BN] = [BM, BDV] @ [BDV, BN]
            _probs, ds, dqk = _score_grads(
                qk, dp, lse_log2[:, None], delta[:, None], batch, head, q_idx[:, None], kv_idx[None, :],
                seqlen_q_b, seqlen_kv_b, diag_offset, window_left, window_right,
                sm_scale, qk_scale_log2, softcap, slope, bias_base, stride_bq, stride_bk, mask_base, stride_mq, stride_mk,
                DROPOUT_SEED, start_m, start_n,
                span_is_masked(span, BLOCK_MAP, False, EDGES_TOGETHER), LIMIT_LEFT, LIMIT_RIGHT,
                MASK_MOD, HAS_MASK_MOD, HAS_DENSE_MASK, SCORE_MOD, SCORE_MOD_GRAD, HAS_SCORE_MOD,
                SOFTCAP_FORM, HAS_ALIBI, HAS_BIAS, BOUND_ROWS, DROPOUT_P, BLOCK_M, BLOCK_N, True,
            )
            if BIAS_GRAD:
                p_db = dbias_base + q_idx[:, None].to(tl.int64) * stride_gq + kv_idx[None, :] * stride_gk
                tl.store(p_db, ds, mask=m_m[:, None] & m_n[None, :])
            if SLOPES_GRAD:  # dS is 0 wherever P is: masked pairs and rows past the sequence add nothing
                distance = tl.abs(q_idx[:, None] + diag_offset - kv_idx[None, :]).to(tl.float32)
                slope_sums += tl.sum(ds * distance, 1)
            dq += dot(dqk.to(b_kt.dtype), tl.trans(b_kt), UPCAST_DOT, DOT_PRECISION)  # [BM, BD] = [BM, BN] @ [BN, BD]

    p_dq = DQ + b64 * stride_dqb + h64 * stride_dqh + row0 * stride_dqn + offs_m[:, None] * stride_dqn + offs_d[None, :] * stride_dqd
    store_tile(p_dq, (dq * sm_scale).to(DQ.dtype.element_ty), m_m, m_d, HEAD_DIM != BLOCK_D)
    if SLOPES_GRAD:
        tl.store(dbias_base + pid_m * stride_gq, -tl.sum(slope_sums, 0))


# dkdv_programs grows with the sequence: specialized on divisibility by 16 like other integers, a
# new length would compile the kernel again (seqlen_q and seqlen_kv carry Q_ALIGN and KV_ALIGN).
@triton.jit(do_not_specialize=["dkdv_programs"])
def attention_backward_kernel(
    Q, K, V, DO, LSE_LOG2, DELTA, SLOPES, BIAS, MASK, CU_SEQLENS_Q, CU_SEQLENS_K, SEQUSED_Q, SEQUSED_K, DROPOUT_SEED,
    MAP_COUNTS, MAP_INDICES, MAP_T_COUNTS, MAP_T_INDICES, O, LSE, DLSE,
    sm_scale, softcap, window_left, window_right, bottom_right, seqlen_q, seqlen_kv, gqa_group, dkdv_programs,
    stride_qb, stride_qn, stride_qh, stride_qd,
    stride_kb, stride_kn, stride_kh, stride_kd,
    stride_vb, stride_vn, stride_vh, stride_vd,
    stride_dob, stride_don, stride_doh, stride_dod,
    stride_rb, stride_rh, stride_rn,
    stride_sb, stride_sh,
    stride_bb, stride_bh, stride_bq, stride_bk,
    stride_mb, stride_mh, stride_mq, stride_mk,
    stride_cb, stride_ch, stride_cq,
    stride_ib, stride_ih, stride_iq, stride_ik,
    stride_tcb, stride_tch, stride_tcq,
    stride_tib, stride_tih, stride_tiq, stride_tik,
    stride_dkb, stride_dkn, stride_dkh, stride_dkd,
    stride_dvb, stride_dvn, stride_dvh, stride_dvd,
    stride_dqb, stride_dqn, stride_dqh, stride_dqd,
    stride_gb, stride_gh, stride_gq, stride_gk,
    stride_ob, stride_on, stride_oh, stride_od,
    stride_lb, stride_lh, stride_ln,
    DK, DV, DQ, DBIAS, DELTA_OUT, LSE_LOG2_OUT,
    HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    RUN_DKDV: tl.constexpr, RUN_DQ: tl.constexpr, WRITE_DK: tl.constexpr, WRITE_DV: tl.constexpr,
    DKDV_BLOCK_M: tl.constexpr, DKDV_BLOCK_N: tl.constexpr, DKDV_STAGES: tl.constexpr,
    DKDV_MAP_SPLIT: tl.constexpr, DKDV_MAP_STEPS: tl.constexpr,
    DQ_BLOCK_M: tl.constexpr, DQ_BLOCK_N: tl.constexpr, DQ_STAGES: tl.constexpr,
    DQ_MAP_SPLIT: tl.constexpr, DQ_MAP_STEPS: tl.constexpr,
    LIMIT_LEFT: tl.constexpr, LIMIT_RIGHT: tl.constexpr, VARLEN: tl.constexpr,
    HAS_SEQUSED_Q: tl.constexpr, HAS_SEQUSED_K: tl.constexpr,
    MASK_MOD: tl.constexpr, HAS_MASK_MOD: tl.constexpr, HAS_DENSE_MASK: tl.constexpr, BLOCK_MAP: tl.constexpr,
    SCORE_MOD: tl.constexpr, SCORE_MOD_GRAD: tl.constexpr, HAS_SCORE_MOD: tl.constexpr, SOFTCAP_FORM: tl.constexpr,
    HAS_ALIBI: tl.constexpr, HAS_BIAS: tl.constexpr, BIAS_GRAD: tl.constexpr, SLOPES_GRAD: tl.constexpr,
    UPCAST_DOT: tl.constexpr, DOT_PRECISION: tl.constexpr, STRIDE_ALIGN: tl.constexpr, BOUND_ROWS: tl.constexpr,
    HEAD_GROUP: tl.constexpr, ROWS_DOWN: tl.constexpr, ROW_ALIGN: tl.constexpr, PADDED_ROW_STATS: tl.constexpr,
    Q_ALIGN: tl.constexpr, KV_ALIGN: tl.constexpr, EDGES_TOGETHER: tl.constexpr, DROPOUT_P: tl.constexpr,
    DQ_ROW_STATS: tl.constexpr, HAS_DLSE: tl.constexpr, LSE_ALIGN: tl.constexpr,
):
    """The gradients after the row statistics: dK and/or dV (RUN_DKDV; WRITE_DK, WRITE_DV say which)
    and dQ, dBias or the slopes' per-block gradient (RUN_DQ).

    With both, one launch holds both kinds of programs, as FlexAttention's backward does: grid
    (dkdv_programs + cdiv(Nq, DQ_BLOCK_M) * HEAD_GROUP, H / HEAD_GROUP, B) without GQA, the first
    dkdv_programs (cdiv(Nkv, DKDV_BLOCK_N) * HEAD_GROUP) along the first axis for dK/dV, the rest
    for dQ (see _dkdv_program and _dq_program). Both kinds read only the inputs and the row
    statistics, so dQ programs fill the SMs that dK/dV's last wave leaves idle, where a second
    launch would start only after it. Alone (dkdv_programs = 0 for dQ), each takes its own grid:
    the plan says when (AttentionPlan.fused_backward). MAP_T_* is the block map transposed
    (query blocks per key block), for dK/dV. DQ_ROW_STATS (dQ alone, launched before dK/dV): dQ's
    programs write the row statistics, DELTA_OUT and LSE_LOG2_OUT, from O, LSE and DLSE, in place
    of the preprocess (see _dq_program); otherwise they, like dK/dV's, read DELTA and LSE_LOG2.
    """
    x = tl.program_id(0)
    if RUN_DKDV:
        if x < dkdv_programs:
            _dkdv_program(
                x, dkdv_programs,
                Q, K, V, DO, LSE_LOG2, DELTA, SLOPES, BIAS, MASK, CU_SEQLENS_Q, CU_SEQLENS_K, SEQUSED_Q, SEQUSED_K,
                DROPOUT_SEED, MAP_T_COUNTS, MAP_T_INDICES,
                sm_scale, softcap, window_left, window_right, bottom_right, seqlen_q, seqlen_kv, gqa_group,
                stride_qb, stride_qn, stride_qh, stride_qd,
                stride_kb, stride_kn, stride_kh, stride_kd,
                stride_vb, stride_vn, stride_vh, stride_vd,
                stride_dob, stride_don, stride_doh, stride_dod,
                stride_rb, stride_rh, stride_rn,
                stride_sb, stride_sh,
                stride_bb, stride_bh, stride_bq, stride_bk,
                stride_mb, stride_mh, stride_mq, stride_mk,
                stride_tcb, stride_tch, stride_tcq,
                stride_tib, stride_tih, stride_tiq, stride_tik,
                stride_dkb, stride_dkn, stride_dkh, stride_dkd,
                stride_dvb, stride_dvn, stride_dvh, stride_dvd,
                DK, DV,
                HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, DKDV_BLOCK_M, DKDV_BLOCK_N, DKDV_STAGES,
                LIMIT_LEFT, LIMIT_RIGHT, VARLEN, HAS_SEQUSED_Q, HAS_SEQUSED_K,
                MASK_MOD, HAS_MASK_MOD, HAS_DENSE_MASK, BLOCK_MAP, DKDV_MAP_SPLIT, DKDV_MAP_STEPS,
                SCORE_MOD, SCORE_MOD_GRAD, HAS_SCORE_MOD, SOFTCAP_FORM, HAS_ALIBI, HAS_BIAS,
                UPCAST_DOT, DOT_PRECISION, STRIDE_ALIGN, BOUND_ROWS,
                HEAD_GROUP, ROWS_DOWN, ROW_ALIGN, PADDED_ROW_STATS, Q_ALIGN, KV_ALIGN, EDGES_TOGETHER,
                WRITE_DK, WRITE_DV, DROPOUT_P,
            )
            return
    if RUN_DQ:
        _dq_program(
            x - dkdv_programs, tl.num_programs(0) - dkdv_programs,
            Q, K, V, DO, LSE_LOG2, DELTA, SLOPES, BIAS, MASK, CU_SEQLENS_Q, CU_SEQLENS_K, SEQUSED_Q, SEQUSED_K,
            DROPOUT_SEED, MAP_COUNTS, MAP_INDICES, O, LSE, DLSE,
            sm_scale, softcap, window_left, window_right, bottom_right, seqlen_q, seqlen_kv, gqa_group,
            stride_qb, stride_qn, stride_qh, stride_qd,
            stride_kb, stride_kn, stride_kh, stride_kd,
            stride_vb, stride_vn, stride_vh, stride_vd,
            stride_dob, stride_don, stride_doh, stride_dod,
            stride_rb, stride_rh, stride_rn,
            stride_sb, stride_sh,
            stride_bb, stride_bh, stride_bq, stride_bk,
            stride_mb, stride_mh, stride_mq, stride_mk,
            stride_cb, stride_ch, stride_cq,
            stride_ib, stride_ih, stride_iq, stride_ik,
            stride_dqb, stride_dqn, stride_dqh, stride_dqd,
            stride_gb, stride_gh, stride_gq, stride_gk,
            stride_ob, stride_on, stride_oh, stride_od,
            stride_lb, stride_lh, stride_ln,
            DQ, DBIAS, DELTA_OUT, LSE_LOG2_OUT,
            HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, DQ_BLOCK_M, DQ_BLOCK_N, DQ_STAGES,
            LIMIT_LEFT, LIMIT_RIGHT, VARLEN, HAS_SEQUSED_Q, HAS_SEQUSED_K,
            MASK_MOD, HAS_MASK_MOD, HAS_DENSE_MASK, BLOCK_MAP, DQ_MAP_SPLIT, DQ_MAP_STEPS,
            SCORE_MOD, SCORE_MOD_GRAD, HAS_SCORE_MOD, SOFTCAP_FORM, HAS_ALIBI, HAS_BIAS, BIAS_GRAD, SLOPES_GRAD,
            UPCAST_DOT, DOT_PRECISION, STRIDE_ALIGN, BOUND_ROWS,
            HEAD_GROUP, ROW_ALIGN, PADDED_ROW_STATS, Q_ALIGN, KV_ALIGN, EDGES_TOGETHER, DROPOUT_P,
            DQ_ROW_STATS, HAS_DLSE, LSE_ALIGN,
        )
