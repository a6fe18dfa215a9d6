"""DRAFT (branch exp/gluon-forward, compiled for sm_90 offline, never run): a warp-specialized
attention forward in Gluon for Hopper, the lever NOTES v0.11 item 9 names.

One program: BLOCK_M query rows of one (batch, head), dense and non-causal for now.
- worker partition (1 warp, few registers): the producer. Streams K and V tiles of BLOCK_N keys
  into a ring of STAGES shared-memory buffers with cp.async; each stage's copies complete on
  `kv_ready[stage]` (cp.async.mbarrier.arrive.noinc, one arrival per producer thread).
- default partition (num_warps, 8 = two warpgroups of 64 rows each): the consumers. Q stays in
  shared memory; per key block: S = Q K^T by wgmma, the online softmax in registers, P (in
  registers, the wgmma A operand) times V into the float32 accumulator; then the stage is
  handed back on `kv_empty[stage]`.
No TMA (jaxlib cannot pass host descriptors nor give device descriptors their global scratch),
so the same kernel launches from torch and, through the Gluon-aware kernel builder of
benchmarks/gluon_jax_probe.py, from JAX.

Q [B, Nq, H, D], K/V [B, Nkv, H, D], O [B, Nq, H, D] through strides; LSE [B, H, Nq] float32.
Requires Nq % BLOCK_M == 0, Nkv % BLOCK_N == 0 and D == BLOCK_D in this draft (no masks).

Offline (Triton 3.6, sm_90, D = 128, 2 stages): 164 KB shared memory; launched at 168 registers
x 384 threads, the PTX hands registers over with setmaxnreg: the workers drop to 24 while the
consumers take 240 for the prologue, then inside the region the consumers drop to 208 and the
producer rises to PRODUCER_REGS (80): 208 x 256 + 80 x 128 fits the 64512 launched. No stack at
80 (96 bytes at 64, 1960-2896 with a one-warp producer). Gluon puts a bar.sync over the 256
consumer threads before each mbarrier.arrive (one elected thread arrives), so the two consumer
warpgroups still meet once a step. PINGPONG gives each consumer warpgroup its own partition and
64 rows instead (no barrier between them; at producer 80 / consumers 200 registers, no stack).
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)

LOG2_E = gl.constexpr(1.4426950408889634)
LN_2 = gl.constexpr(0.6931471805599453)


@gluon.jit
def _producer(K, V, stride_kn, stride_vn, k_base, v_base, seqlen_kv, k_smem, v_smem, kv_ready, kv_empty,
              BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr, STAGES: gl.constexpr, PRODUCER_WARPS: gl.constexpr):
    """PRODUCER_WARPS warps: cp.async K and V tiles of BLOCK_N keys into the ring, stage after stage."""
    # 16-byte chunks (8 half-precision values) a thread, rows across the lanes and warps.
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 * 8 // BLOCK_D, BLOCK_D // 8], [PRODUCER_WARPS, 1], [1, 0])
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
    offs_d = gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, layout))
    p_k = K + k_base + offs_n[:, None] * stride_kn + offs_d[None, :]
    p_v = V + v_base + offs_n[:, None] * stride_vn + offs_d[None, :]
    for j in range(0, seqlen_kv // BLOCK_N):
        stage = j % STAGES
        # A fresh barrier counts its phase before 0 as complete: the first pass does not wait.
        mbarrier.wait(kv_empty.index(stage), ((j // STAGES) & 1) ^ 1)
        async_copy.async_copy_global_to_shared(k_smem.index(stage), p_k + j * BLOCK_N * stride_kn)
        async_copy.async_copy_global_to_shared(v_smem.index(stage), p_v + j * BLOCK_N * stride_vn)
        async_copy.mbarrier_arrive(kv_ready.index(stage), increment_count=False)


@gluon.jit
def _consumer(Q, O, LSE, stride_qn, stride_on, q_base, o_base, lse_base, seqlen_kv, qk_scale_log2,
              q_smem, k_smem, v_smem, kv_ready, kv_empty,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr, STAGES: gl.constexpr,
              NUM_WARPS: gl.constexpr):
    dtype: gl.constexpr = Q.dtype.element_ty
    # Scores and output: wgmma accumulators, one warpgroup per 64 rows.
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, BLOCK_D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    # Q once, through registers into shared memory (the wgmma A operand for S).
    load_layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 * 8 // BLOCK_D, BLOCK_D // 8], [NUM_WARPS, 1], [1, 0])
    offs_m = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, load_layout))
    offs_d = gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, load_layout))
    q_smem.store(gl.load(Q + q_base + offs_m[:, None] * stride_qn + offs_d[None, :]))
    fence_async_shared()

    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=row_s)
    l_i = gl.zeros([BLOCK_M], gl.float32, layout=row_s)
    acc = gl.zeros([BLOCK_M, BLOCK_D], gl.float32, layout=o_layout)
    for j in range(0, seqlen_kv // BLOCK_N):
        stage = j % STAGES
        mbarrier.wait(kv_ready.index(stage), (j // STAGES) & 1)
        s = warpgroup_mma(q_smem, k_smem.index(stage).permute((1, 0)),
                          gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout), use_acc=False, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        # The row max of raw scores, scaled once (as the tl kernel's FOLD_SCALE).
        m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale_log2)
        p = gl.exp2(s * qk_scale_log2 - m_new[:, None])
        alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, 1)
        acc = acc * gl.convert_layout(alpha, row_o)[:, None]
        m_i = m_new
        p_op = gl.convert_layout(p.to(dtype), p_layout)
        acc = warpgroup_mma(p_op, v_smem.index(stage), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(kv_empty.index(stage))

    l_o = gl.convert_layout(l_i, row_o)
    out = acc / l_o[:, None]
    offs_mo = gl.arange(0, BLOCK_M, layout=row_o)
    offs_do = gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, o_layout))
    gl.store(O + o_base + offs_mo[:, None] * stride_on + offs_do[None, :], out.to(dtype))
    gl.store(LSE + lse_base + gl.arange(0, BLOCK_M, layout=row_s), (m_i + gl.log2(l_i)) * LN_2)


@gluon.jit
def gluon_attention_forward_kernel(
    Q, K, V, sm_scale, seqlen_q, seqlen_kv, heads,
    stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh,
    stride_ob, stride_on, stride_oh,
    O, LSE,
    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_D: gl.constexpr, STAGES: gl.constexpr,
    NUM_WARPS: gl.constexpr, PRODUCER_WARPS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
    PINGPONG: gl.constexpr = False, CONSUMER_REGS: gl.constexpr = 232,
):
    """Grid (Nq / BLOCK_M, H, B); launch with num_warps=NUM_WARPS (the consumers'; 4 with PINGPONG,
    whose second consumer warpgroup is a worker partition with CONSUMER_REGS), plus the producer's
    PRODUCER_WARPS, which Triton adds."""
    dtype: gl.constexpr = Q.dtype.element_ty
    pid_m = gl.program_id(0)
    head = gl.program_id(1)
    batch = gl.program_id(2)
    b64 = batch.to(gl.int64)
    h64 = head.to(gl.int64)
    row0 = (pid_m * BLOCK_M).to(gl.int64)
    q_base = b64 * stride_qb + h64 * stride_qh + row0 * stride_qn
    o_base = b64 * stride_ob + h64 * stride_oh + row0 * stride_on
    k_base = b64 * stride_kb + h64 * stride_kh
    v_base = b64 * stride_vb + h64 * stride_vh
    lse_base = (b64 * heads + h64) * seqlen_q + row0

    smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_D], dtype)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, BLOCK_D], smem_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, BLOCK_D], smem_layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for stage in gl.static_range(STAGES):
        mbarrier.init(kv_ready.index(stage), count=32 * PRODUCER_WARPS)  # one cp.async arrival a producer thread
        # PINGPONG: each consumer warpgroup hands a stage back on its own.
        mbarrier.init(kv_empty.index(stage), count=2 if PINGPONG else 1)

    qk_scale_log2 = sm_scale.to(gl.float32) * LOG2_E  # jax-triton passes Python floats as fp64
    if PINGPONG:
        # Two consumer partitions of one warpgroup and BLOCK_M / 2 rows each, with no barrier
        # between them: while one runs its softmax the other's wgmma can use the tensor cores.
        HALF: gl.constexpr = BLOCK_M // 2
        q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HALF, BLOCK_D], dtype)
        q_smem = gl.allocate_shared_memory(dtype, [2, HALF, BLOCK_D], q_layout)
        gl.warp_specialize(
            [
                (_consumer, (Q, O, LSE, stride_qn, stride_on, q_base, o_base, lse_base, seqlen_kv, qk_scale_log2,
                             q_smem.index(0), k_smem, v_smem, kv_ready, kv_empty, HALF, BLOCK_N, BLOCK_D, STAGES, 4)),
                (_consumer, (Q, O, LSE, stride_qn, stride_on, q_base + HALF * stride_qn, o_base + HALF * stride_on,
                             lse_base + HALF, seqlen_kv, qk_scale_log2,
                             q_smem.index(1), k_smem, v_smem, kv_ready, kv_empty, HALF, BLOCK_N, BLOCK_D, STAGES, 4)),
                (_producer, (K, V, stride_kn, stride_vn, k_base, v_base, seqlen_kv, k_smem, v_smem, kv_ready,
                             kv_empty, BLOCK_N, BLOCK_D, STAGES, PRODUCER_WARPS)),
            ],
            [4, PRODUCER_WARPS],
            [CONSUMER_REGS, PRODUCER_REGS],
        )
    else:
        q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_D], dtype)
        q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, BLOCK_D], q_layout)
        gl.warp_specialize(
            [
                (_consumer, (Q, O, LSE, stride_qn, stride_on, q_base, o_base, lse_base, seqlen_kv, qk_scale_log2,
                             q_smem, k_smem, v_smem, kv_ready, kv_empty, BLOCK_M, BLOCK_N, BLOCK_D, STAGES, NUM_WARPS)),
                (_producer, (K, V, stride_kn, stride_vn, k_base, v_base, seqlen_kv, k_smem, v_smem, kv_ready,
                             kv_empty, BLOCK_N, BLOCK_D, STAGES, PRODUCER_WARPS)),
            ],
            [PRODUCER_WARPS],
            [PRODUCER_REGS],
        )

def launch_torch(q, k, v, sm_scale=None, block_n=128, stages=2, producer_warps=4, producer_regs=80, pingpong=False,
                 consumer_regs=232):
    """q, k, v: torch (B, N, H, D) CUDA tensors, 16-bit, D in {64, 128}, N a multiple of 128.
    Returns (out, lse). The draft's own launcher, for benchmarks/gluon_forward_check.py."""
    import torch

    batch, seqlen_q, heads, head_dim = q.shape
    seqlen_kv = k.shape[1]
    if seqlen_q % 128 or seqlen_kv % block_n or head_dim not in (64, 128) or q.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError("the draft takes N a multiple of 128, D 64 or 128, 16-bit inputs")
    out = torch.empty_like(q)
    lse = torch.empty((batch, heads, seqlen_q), dtype=torch.float32, device=q.device)
    scale = head_dim ** -0.5 if sm_scale is None else sm_scale
    gluon_attention_forward_kernel[(seqlen_q // 128, heads, batch)](
        q, k, v, scale, seqlen_q, seqlen_kv, heads,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), out.stride(0), out.stride(1), out.stride(2),
        out, lse,
        BLOCK_M=128, BLOCK_N=block_n, BLOCK_D=head_dim, STAGES=stages, NUM_WARPS=4 if pingpong else 8,
        PRODUCER_WARPS=producer_warps, PRODUCER_REGS=producer_regs, PINGPONG=pingpong, CONSUMER_REGS=consumer_regs,
        num_warps=4 if pingpong else 8,
    )
    return out, lse


def _teach_jax_triton_gluon() -> None:
    """Let jax-triton's kernel builder compile Gluon functions (benchmarks/gluon_jax_probe.py
    showed the mechanism on the H200): it hands jaxlib only PTX, a name, warps and shared memory."""
    from jax._src.lib import gpu_triton
    from jax_triton import triton_lib
    from triton.backends.compiler import GPUTarget
    from triton.compiler import compile as triton_compile
    from triton.experimental.gluon._runtime import GluonASTSource

    original = triton_lib.get_or_create_triton_kernel
    if getattr(original, "flashx_gluon", False):
        return

    def build(backend_init_func, platform, fn, arg_dtypes, scalar_args, *, num_warps, num_stages, num_ctas,
              compute_capability, enable_fp_fusion, metaparams, dump):
        if not (hasattr(fn, "is_gluon") and fn.is_gluon()):
            return original(backend_init_func, platform, fn, arg_dtypes, scalar_args, num_warps=num_warps,
                            num_stages=num_stages, num_ctas=num_ctas, compute_capability=compute_capability,
                            enable_fp_fusion=enable_fp_fusion, metaparams=metaparams, dump=dump)
        cc = compute_capability or gpu_triton.get_compute_capability(0)
        signature = {fn.arg_names[i]: v for i, v in enumerate(arg_dtypes)}
        constexprs = dict(metaparams)
        signature.update({name: "constexpr" for name in constexprs})
        attrs = {(i,): [["tt.divisibility", 16]] for i, v in enumerate(arg_dtypes) if v.startswith("*")}
        source = GluonASTSource(fn, signature, {(fn.arg_names.index(k),): v for k, v in constexprs.items()}, attrs)
        compiled = triton_compile(source, target=GPUTarget("cuda", cc, 32), options=dict(num_warps=num_warps))
        md = compiled.metadata
        # md.num_warps counts the worker partitions' warps: the launch needs them all.
        kernel = gpu_triton.TritonKernel(md.name, md.num_warps, num_ctas, md.shared, compiled.asm["ptx"], "", cc)
        return kernel, attrs

    build.flashx_gluon = True
    triton_lib.get_or_create_triton_kernel = build


def launch_jax(q, k, v, sm_scale=None, block_n=128, stages=2, producer_warps=4, producer_regs=80, pingpong=False,
               consumer_regs=232):
    """The JAX twin of launch_torch, usable inside jax.jit: (out, lse) for (B, N, H, D) arrays."""
    import os

    import jax
    import jax.numpy as jnp
    import jax_triton as jt

    if os.environ.get("TRITON_CACHE_DIR") == "":  # jax_triton's empty value breaks triton.compile's cache
        del os.environ["TRITON_CACHE_DIR"]
    _teach_jax_triton_gluon()
    batch, seqlen_q, heads, head_dim = q.shape
    seqlen_kv = k.shape[1]
    if seqlen_q % 128 or seqlen_kv % block_n or head_dim not in (64, 128) or q.dtype not in (jnp.float16, jnp.bfloat16):
        raise ValueError("the draft takes N a multiple of 128, D 64 or 128, 16-bit inputs")
    scale = head_dim ** -0.5 if sm_scale is None else sm_scale
    q_strides = (seqlen_q * heads * head_dim, heads * head_dim, head_dim)
    kv_strides = (seqlen_kv * heads * head_dim, heads * head_dim, head_dim)
    warps = 4 if pingpong else 8
    return jt.triton_call(
        q, k, v, scale, seqlen_q, seqlen_kv, heads, *q_strides, *kv_strides, *kv_strides, *q_strides,
        kernel=gluon_attention_forward_kernel,
        out_shape=(jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((batch, heads, seqlen_q), jnp.float32)),
        grid=(seqlen_q // 128, heads, batch), num_warps=warps, num_stages=1,
        BLOCK_M=128, BLOCK_N=block_n, BLOCK_D=head_dim, STAGES=stages, NUM_WARPS=warps,
        PRODUCER_WARPS=producer_warps, PRODUCER_REGS=producer_regs, PINGPONG=pingpong, CONSUMER_REGS=consumer_regs,
    )
