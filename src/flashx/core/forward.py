"""The FlashAttention-2 forward kernel: one kernel, variants chosen by constexpr flags.

Argument order follows jax-triton's convention: input arrays, scalars, output arrays, then
constexprs, so both frontends launch it with `ForwardPlan.kernel_args`.
"""
from . import runtime  # noqa: F401, I001  (first: decides compiled vs interpreted before triton loads)

import triton
import triton.language as tl

LN_2: tl.constexpr = tl.constexpr(0.6931471805599453)


@triton.jit
def _dot(a, b, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    """a @ b with float32 accumulation; UPCAST works around the interpreter's bf16 dot."""
    if UPCAST:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def _load_tile(ptrs, m_rows, m_cols, CHECK_ROWS: tl.constexpr, CHECK_COLS: tl.constexpr):
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
def _attend_key_blocks(
    acc, l_i, m_i, q,
    k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
    q_idx, seqlen_kv, kv_start, kv_end, qk_scale_log2, causal_offset,
    HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr,
    UPCAST_DOT: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """Online softmax over key blocks [kv_start, kv_end).

    MASKED blocks may hold keys past seqlen_kv or past the causal diagonal; unmasked blocks
    are fully visible to every query row of the tile and skip the per-element mask.
    """
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    m_d = offs_d < HEAD_DIM
    m_dv = offs_dv < HEAD_DIM_V
    for start_n in range(kv_start, kv_end, BLOCK_N):
        kv_idx = start_n + offs_n
        # Block start in 64 bits (it can pass 2^31 elements); offsets inside a block stay 32-bit.
        start_n64 = tl.cast(start_n, tl.int64)
        # [BD, BN]: k transposed, so that q @ k is [BM, BN] = [BM, BD] @ [BD, BN]
        p_k = k_base + start_n64 * stride_kn + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd
        p_v = v_base + start_n64 * stride_vn + offs_n[:, None] * stride_vn + offs_dv[None, :] * stride_vd
        m_n = kv_idx < seqlen_kv
        b_k = _load_tile(p_k, m_d, m_n, HEAD_DIM != BLOCK_D, MASKED)
        b_s = _dot(q, b_k, UPCAST_DOT, DOT_PRECISION) * qk_scale_log2  # log2 units
        if MASKED:
            visible = m_n[None, :]
            if CAUSAL:
                visible = visible & (kv_idx[None, :] <= q_idx[:, None] + causal_offset)
            # Masked before the row max, so invisible keys never set the max.
            b_s = tl.where(visible, b_s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(b_s, 1))
            # A row with no visible key so far keeps m = -inf; subtracting 0 instead keeps
            # its p and alpha at 0 rather than NaN (-inf - -inf).
            m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        else:
            m_new = tl.maximum(m_i, tl.max(b_s, 1))
            m_ref = m_new
        b_p = tl.math.exp2(b_s - m_ref[:, None])
        # The running sum and output were accumulated against the old max: rescale them to
        # the new one before adding this block, or earlier blocks would be over-weighted.
        alpha = tl.math.exp2(m_i - m_ref)
        l_i = l_i * alpha + tl.sum(b_p, 1)
        acc = acc * alpha[:, None]
        b_v = _load_tile(p_v, m_n, m_dv, MASKED, HEAD_DIM_V != BLOCK_DV)
        acc += _dot(b_p.to(b_v.dtype), b_v, UPCAST_DOT, DOT_PRECISION)  # [BM, BDV] = [BM, BN] @ [BN, BDV]
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attention_forward_kernel(
    Q, K, V,
    qk_scale_log2, seqlen_q, seqlen_kv, gqa_group,
    stride_qb, stride_qn, stride_qh, stride_qd,
    stride_kb, stride_kn, stride_kh, stride_kd,
    stride_vb, stride_vn, stride_vh, stride_vd,
    stride_ob, stride_on, stride_oh, stride_od,
    O, LSE,
    HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, UPCAST_DOT: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """One program: BLOCK_M query rows of one (batch, q head). Grid (cdiv(Nq, BLOCK_M), Hq, B).

    Q [B, Nq, Hq, D], K [B, Nkv, Hkv, D], V [B, Nkv, Hkv, Dv], O [B, Nq, Hq, Dv] through their
    strides (any layout); LSE [B, Hq, Nq] float32, dense.
    """
    # jax-triton passes Python floats as fp64; keep the score arithmetic in fp32.
    qk_scale_log2 = tl.cast(qk_scale_log2, tl.float32)
    pid_m = tl.program_id(0)
    head = tl.program_id(1)
    batch = tl.program_id(2)
    heads_q = tl.num_programs(1)
    head_kv = head // gqa_group  # GQA/MQA: a group of q heads shares one kv head
    start_m = pid_m * BLOCK_M

    # 64-bit base offsets: batch * stride can pass 2^31 on large tensors.
    b64 = batch.to(tl.int64)
    m64 = start_m.to(tl.int64)
    q_base = Q + b64 * stride_qb + head.to(tl.int64) * stride_qh + m64 * stride_qn
    k_base = K + b64 * stride_kb + head_kv.to(tl.int64) * stride_kh
    v_base = V + b64 * stride_vb + head_kv.to(tl.int64) * stride_vh
    o_base = O + b64 * stride_ob + head.to(tl.int64) * stride_oh + m64 * stride_on

    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    q_idx = start_m + offs_m
    m_m = q_idx < seqlen_q
    p_q = q_base + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd
    b_q = _load_tile(p_q, m_m, offs_d < HEAD_DIM, True, HEAD_DIM != BLOCK_D)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)

    # Bottom-right causal alignment: query i sees key j iff j <= i + causal_offset.
    causal_offset = seqlen_kv - seqlen_q
    if CAUSAL:
        # Keys past the last row's diagonal are never loaded; keys up to the first row's
        # diagonal are visible to the whole tile and take the unmasked path.
        kv_end = tl.maximum(tl.minimum(start_m + BLOCK_M + causal_offset, seqlen_kv), 0)
        full_end = tl.maximum(tl.minimum(start_m + causal_offset + 1, seqlen_kv), 0)
    else:
        kv_end = seqlen_kv
        full_end = seqlen_kv
    full_end = (full_end // BLOCK_N) * BLOCK_N

    acc, l_i, m_i = _attend_key_blocks(
        acc, l_i, m_i, b_q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        q_idx, seqlen_kv, 0, full_end, qk_scale_log2, causal_offset,
        HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, BLOCK_N,
        False, CAUSAL, UPCAST_DOT, DOT_PRECISION,
    )
    acc, l_i, m_i = _attend_key_blocks(
        acc, l_i, m_i, b_q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        q_idx, seqlen_kv, full_end, kv_end, qk_scale_log2, causal_offset,
        HEAD_DIM, HEAD_DIM_V, BLOCK_D, BLOCK_DV, BLOCK_N,
        True, CAUSAL, UPCAST_DOT, DOT_PRECISION,
    )

    # A row that saw no key (causal with Nq > Nkv, or Nkv = 0) gives 0 and lse = -inf.
    empty = l_i == 0.0
    b_o = acc / tl.where(empty, 1.0, l_i)[:, None]
    b_lse = tl.where(empty, float("-inf"), (m_i + tl.math.log2(l_i)) * LN_2)
    p_o = o_base + offs_m[:, None] * stride_on + offs_dv[None, :] * stride_od
    m_o = m_m[:, None]
    if HEAD_DIM_V != BLOCK_DV:
        m_o = m_o & (offs_dv[None, :] < HEAD_DIM_V)
    tl.store(p_o, b_o.to(O.dtype.element_ty), mask=m_o)
    p_lse = LSE + (b64 * heads_q + head) * seqlen_q + q_idx
    tl.store(p_lse, b_lse, mask=m_m)
