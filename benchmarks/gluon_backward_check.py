"""The Gluon backward kernels (flashx/core/gluon_backward.py): launched directly, dK and dV
(dK/dV kernel) and dQ (dQ kernel) against float64 on odd shapes (dense, causal, GQA, windows,
Nq != Nkv, ragged lengths), and flashx's backward with the plan's Gluon routes switched on for
every kind (dK/dV by cp.async, and by TMA from host descriptors); then their times beside
flashx's whole backward (portable, with the Gluon dK/dV launch by cp.async or TMA, with the Gluon
dQ launch too), FA2's and cuDNN's, in one process.

Run it under a timeout: a wrong barrier protocol hangs rather than fails.

    timeout 300 python benchmarks/gluon_backward_check.py [--checks-only] [--kernel-only] [--timings-only]
        [--no-tma --cregs 232 --pregs 48] [--variants cp-s2 cp-s3 tma-s2 tma-s3]

The timing table counts each system's own FLOPs: the dK/dV kernel's four matmuls (S, dP, dV,
dK: 8 * B * H * Nq * Nkv * D, over the visible pairs), the dQ kernel's three (S, dP, dQ), the
whole backward's five (2.5x the forward's). "gluon dK/dV share" is the dK/dV kernel's time over
flashx's portable backward's.
"""
import argparse
import math
import sys

import torch
import triton

import flashx.torch as ft
from flashx.core import gluon_backward, plan, tuning


def timed(fn) -> float:
    """do_bench's mean ms of fn (warm-up 25 ms, 100 ms), the card loaded first (common.settle)."""
    import common  # benchmarks/, this script's folder

    fn()  # compiled before the card is loaded
    common.settle()
    return triton.testing.do_bench(fn, warmup=25, rep=100)

LOG2_E = 1.4426950408889634
# The kernels launched directly walk no block map (the plan's launches do, through the route).
NO_MAP = dict(BLOCK_MAP=False, MAP_STEPS=1, HAS_MASK_MOD=False, MASK_MOD=None)
NO_MAP_STRIDES = (0,) * 7


@triton.jit
def documents(b, h, q_idx, kv_idx):
    """8 documents of 2048 tokens at N = 16k (the variants benchmark's); 4 of 256 at N = 1000."""
    return (q_idx // DOCUMENT) == (kv_idx // DOCUMENT)


DOCUMENT = triton.language.constexpr(2048)


def visible(nq, nkv, causal, window_left, device, document=None):
    """[Nq, Nkv] bool: bottom-right causal, keys from i' - window_left (-1: unbounded), and
    (document) the same document of that many tokens."""
    i = torch.arange(nq, device=device)[:, None] + (nkv - nq)
    j = torch.arange(nkv, device=device)[None, :]
    mask = torch.ones(nq, nkv, dtype=torch.bool, device=device)
    if causal:
        mask &= j <= i
    if window_left >= 0:
        mask &= j >= i - window_left
    if document:
        mask &= (torch.arange(nq, device=device)[:, None] // document) == (j // document)
    return mask


def reference(q, k, v, do, causal, window_left, document=None):
    """float64 out, lse [B, H, Nq] and dK, dV, dQ (GQA: k and v repeated, their gradients summed)."""
    b, nq, hq, d = q.shape
    group = hq // k.shape[2]
    q64, k64, v64 = (x.double().transpose(1, 2).requires_grad_() for x in (q, k, v))
    kr, vr = (x.repeat_interleave(group, dim=1) for x in (k64, v64))
    scores = (q64 @ kr.transpose(-1, -2)) * d ** -0.5
    scores = scores.masked_fill(~visible(nq, k.shape[1], causal, window_left, q.device, document), float("-inf"))
    lse = torch.logsumexp(scores, -1)
    p = torch.exp(scores - lse[..., None]).nan_to_num(0.0)  # rows that see no key: 0
    out = p @ vr
    dq, dk, dv = torch.autograd.grad(out, (q64, k64, v64), do.double().transpose(1, 2))
    return out.transpose(1, 2), lse, dk.transpose(1, 2), dv.transpose(1, 2), dq.transpose(1, 2)


def row_stats(out, do, lse):
    """The plan's padded row statistics: lse_log2 (+inf for rows without keys and padding) and
    delta = rowsum(dO * O), [B, H, R] float32 with R a multiple of 128."""
    b, nq, hq, _ = out.shape
    rows = math.ceil(nq / 128) * 128
    lse_log2 = torch.full((b, hq, rows), float("inf"), dtype=torch.float32, device=out.device)
    delta = torch.zeros((b, hq, rows), dtype=torch.float32, device=out.device)
    lse_log2[:, :, :nq] = torch.where(lse == float("-inf"), float("inf"), lse * LOG2_E).float()
    delta[:, :, :nq] = (do.float() * out.float()).sum(-1).transpose(1, 2)
    return lse_log2, delta


def copied(args, *arrays) -> tuple:
    """The arrays a kernel's producer copies: as they are, or (args.tma) as TMA descriptors over
    their (B, N, H, D) shapes with 64-row blocks."""
    if not args.tma:
        return arrays
    return tuple(plan.gluon_tma_descriptor(x, x.shape, x.stride(), 64, str(x.dtype).removeprefix("torch."))
                 for x in arrays)


def launch(q, k, v, do, lse_log2, delta, causal, window_left, args):
    """dK, dV of the Gluon kernel; q, do (B, Nq, Hq, D), k, v (B, Nkv, Hkv, D)."""
    b, nq, hq, d = q.shape
    nkv, hkv = k.shape[1], k.shape[2]
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    qs, dos = copied(args, q, do)
    persistent = getattr(args, "persistent", False)
    tma_store = getattr(args, "tma_store", False)  # dK and dV by TMA, from host descriptors
    dks, dvs = copied(argparse.Namespace(tma=True), dk, dv) if tma_store else (dk, dv)
    grid = (triton.cdiv(nkv, 128), hkv, b)
    if persistent:
        grid = (min(math.prod(grid), torch.cuda.get_device_properties(q.device).multi_processor_count),)
    gluon_backward.gluon_attention_dkdv_kernel[grid](
        qs, k, v, dos, lse_log2, delta, lse_log2, lse_log2,  # no block map: its arrays unused
        d ** -0.5, 1, window_left, nq, nkv, hq // hkv, hkv, b,
        *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], *lse_log2.stride()[:2],
        *NO_MAP_STRIDES, *dk.stride()[:3], *dv.stride()[:3],
        dks, dvs, dk,  # DESCRIPTOR_SCRATCH: unused (host descriptors)
        HEAD_DIM=d, BLOCK_N=128, LIMIT_RIGHT=causal, LIMIT_LEFT=window_left >= 0, STRIDE_ALIGN=8, ROW_ALIGN=16,
        STAGES=args.stages, PRODUCER_WARPS=4, PRODUCER_REGS=args.pregs, CONSUMER_REGS=args.cregs, TMA=args.tma,
        DEVICE_DESCRIPTORS=False, PERSISTENT=persistent, TMA_STORE=tma_store, **NO_MAP, num_warps=4,
    )
    return dk, dv


def launch_dq(q, k, v, do, lse_log2, delta, causal, window_left, args):
    """dQ of the Gluon dQ kernel (64-key blocks; args.tma: K and V by TMA)."""
    b, nq, hq, d = q.shape
    nkv, hkv = k.shape[1], k.shape[2]
    dq = torch.empty_like(q)
    ks, vs = copied(args, k, v)
    grid = (triton.cdiv(nq, 128), hq, b)
    gluon_backward.gluon_attention_dq_kernel[grid](
        q, ks, vs, do, lse_log2, delta, lse_log2, lse_log2,  # no block map: its arrays unused
        lse_log2, lse_log2, lse_log2,  # O, LSE, DLSE: unused (the statistics come computed: no ROW_STATS)
        d ** -0.5, 1, window_left, nq, nkv, hq // hkv,
        *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], *lse_log2.stride()[:2],
        *NO_MAP_STRIDES, 0, 0, 0, 0, 0, *dq.stride()[:3],
        dq, lse_log2, lse_log2,  # DELTA_OUT, LSE_LOG2_OUT: unused
        HEAD_DIM=d, BLOCK_M=128, BLOCK_N=64, LIMIT_RIGHT=causal, LIMIT_LEFT=window_left >= 0, STRIDE_ALIGN=8,
        ROW_ALIGN=16, STAGES=args.stages, PRODUCER_WARPS=4, PRODUCER_REGS=args.pregs, CONSUMER_REGS=args.cregs,
        TMA=args.tma, **NO_MAP, ROW_STATS=False, HAS_DLSE=False, LSE_ALIGN=1, num_warps=4,
    )
    return dq


class routed:
    """The plan's Gluon backward routes, inside a with block, switched on for every head dim and
    kind for the halves named (a dK/dV tile of GLUON_DKDV_TILES: "dkdv" by cp.async, "dkdv-tma" or
    "dkdv-tma-persist" by TMA where the launcher passes host descriptors; "dq"), and off for the
    others; () is the portable backward."""

    ROUTES = {"dkdv": "GLUON_DKDV_ROUTE", "dkdv-tma": "GLUON_DKDV_TMA_ROUTE",
              "dkdv-tma-persist": "GLUON_DKDV_TMA_ROUTE", "dq": "GLUON_DQ_ROUTE"}

    def __init__(self, halves=("dkdv", "dq")):
        self.halves = halves

    def __enter__(self):
        names = sorted(set(self.ROUTES.values()))
        self.saved = {name: getattr(tuning, name) for name in names}
        keys = [(d, kind) for d in (64, 128) for kind in ("dense", "causal", "window", "map")]
        for name in names:
            setattr(tuning, name, {})
        for half in self.halves:
            setattr(tuning, self.ROUTES[half], {key: half for key in keys})

    def __exit__(self, *exc):
        for name, saved in self.saved.items():
            setattr(tuning, name, saved)


def rel_errors(got, want) -> list:
    return [((g.double() - w).norm() / w.norm()).item() for g, w in zip(got, want)]


def check(args) -> int:
    torch.manual_seed(0)
    failures = 0
    shapes = [  # (B, Nq, Nkv, Hq, Hkv, D, causal, window_left)
        (2, 1000, 1000, 3, 3, 128, False, -1), (2, 1000, 1000, 3, 3, 128, True, -1),
        (1, 333, 1111, 4, 2, 128, True, -1), (1, 777, 300, 2, 1, 128, True, -1),
        (2, 517, 517, 4, 1, 128, False, -1), (1, 1500, 1500, 2, 2, 128, True, 200),
        (1, 700, 1300, 2, 1, 128, True, 333), (2, 1000, 1000, 3, 3, 64, True, -1),
        (1, 900, 1100, 4, 2, 64, False, -1), (1, 1200, 1200, 2, 1, 64, True, 150),
    ]
    for b, nq, nkv, hq, hkv, d, causal, left in shapes:
        q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, nkv, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        do = torch.randn_like(q)
        out, lse, dk_ref, dv_ref, dq_ref = reference(q, k, v, do, causal, left)
        lse_log2, delta = row_stats(out, do, lse)
        name = f"B={b} Nq={nq} Nkv={nkv} Hq={hq} Hkv={hkv} D={d} causal={causal} left={left}"
        refs = (dq_ref, dk_ref, dv_ref)

        def kernels():
            dk, dv = launch(q, k, v, do, lse_log2, delta, causal, left, args)
            return launch_dq(q, k, v, do, lse_log2, delta, causal, left, args), dk, dv

        failures += compared(f"kernel {name}", kernels, refs)
        if args.kernel_only:
            continue
        # Through the plan (the routes switched on): flashx's backward with the Gluon launches.
        window = None if left < 0 else (left, 0 if causal else -1)
        for halves in PLAN_HALVES:
            failures += compared(f"plan {'+'.join(halves)} {name}", lambda: routed_grads(
                q, k, v, do, halves, causal=causal and window is None, window=window), refs)
    if not args.kernel_only:
        failures += check_documents()
    return failures


def check_documents() -> int:
    """A causal document mask through the plan (its block map, mask_mod on the partial blocks):
    documents of 2048 tokens on N = 5000, GQA 4:2."""
    b, n, hq, hkv, d = 1, 5000, 4, 2, 128
    q = torch.randn(b, n, hq, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, n, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    do = torch.randn_like(q)
    _, _, dk_ref, dv_ref, dq_ref = reference(q, k, v, do, True, -1, document=DOCUMENT.value)
    return sum(compared(f"plan {'+'.join(halves)} documents of {DOCUMENT.value} B={b} N={n} Hq={hq} Hkv={hkv} D={d} causal",
                        lambda: routed_grads(q, k, v, do, halves, causal=True, mask_mod=documents), (dq_ref, dk_ref, dv_ref))
               for halves in PLAN_HALVES)


# The Gluon launches checked through the plan: dK/dV by cp.async, by TMA and by TMA on a
# persistent grid, each with dQ.
PLAN_HALVES = (("dkdv", "dq"), ("dkdv-tma", "dq"), ("dkdv-tma-persist", "dq"))


def routed_grads(q, k, v, do, halves, **options) -> tuple:
    """dQ, dK, dV of flashx's attention with the Gluon backward routes of `halves` switched on."""
    qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
    with routed(halves):
        return torch.autograd.grad(ft.attention(qg, kg, vg, **options), (qg, kg, vg), do)


def compared(label: str, run, refs: tuple) -> int:
    """Run `run` (giving dQ, dK, dV), compare with the float64 refs, print one line; 1 on a failure."""
    try:
        grads = run()
        torch.cuda.synchronize()
        errs = rel_errors(grads, refs)
        ok = all(e < 1e-2 for e in errs)  # bf16 gradients land near 3e-3 against float64
    except Exception as e:  # noqa: BLE001
        errs, ok = [float("nan")] * 3, False
        print(f"FAILED {type(e).__name__}: {str(e)[:400]}", flush=True)
    print(f"{label}: dQ err {errs[0]:.1e} dK err {errs[1]:.1e} dV err {errs[2]:.1e} {'OK' if ok else 'WRONG'}",
          flush=True)
    return 0 if ok else 1


# Tiles to time side by side (--variants): copies, stages, consumer / producer registers, a
# persistent grid. "cp-s2", "tma-s3", "tma-s3-persist" and "tma-s3-ts-p32" are the plan's
# (GLUON_DKDV_TILES "dkdv", "dkdv-tma", "dkdv-tma-persist", "dkdv-tma-ts"); the first three compile
# offline without a spill in their loops (the fourth was not checked so).
VARIANTS = {
    "cp-s2": dict(tma=False, stages=2, cregs=232, pregs=48),
    "cp-s3": dict(tma=False, stages=3, cregs=232, pregs=48),
    "tma-s2": dict(tma=True, stages=2, cregs=240, pregs=24),
    "tma-s3": dict(tma=True, stages=3, cregs=240, pregs=24),
    "tma-s3-persist": dict(tma=True, stages=3, cregs=240, pregs=24, persistent=True),
    # dK and dV stored by TMA from the consumers' K and V buffers (session 20, prepared; torch's
    # host descriptors only): the forward's TMA_STORE bought 11-13% at 1k.
    "tma-s3-ts": dict(tma=True, stages=3, cregs=240, pregs=24, tma_store=True),
    # The plan's "dkdv-tma-ts" (NOTES v0.28): its producer at 32 registers, which the producer that
    # builds its own descriptors (JAX's launcher) needs under CUDA 13.0's ptxas.
    "tma-s3-ts-p32": dict(tma=True, stages=3, cregs=240, pregs=32, tma_store=True),
}


def bench(args) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rows = []
    shapes = [(16, 1024, 16, 16, 128, False, -1), (16, 1024, 16, 16, 128, True, -1),
              (4, 4096, 16, 16, 128, False, -1), (4, 4096, 16, 16, 128, True, -1), (1, 16384, 16, 16, 128, True, -1),
              (4, 4096, 32, 8, 128, True, -1), (1, 16384, 16, 16, 128, True, 1023), (4, 4096, 32, 32, 64, True, -1)]
    for b, n, hq, hkv, d, causal, left in shapes:
        q = torch.randn(b, n, hq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k, v = (torch.randn(b, n, hkv, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
        do = torch.randn_like(q)
        pairs = visible(n, n, causal, left, "cuda").sum().item()
        name = f"B={b} N={n} H={hq}/{hkv} D={d} {'causal' if causal else 'full'}" + (f" window {left + 1}" if left >= 0 else "")
        window = (left, 0) if left >= 0 else None
        out, lse = ft.attention(q, k, v, causal=causal and window is None, window=window, return_lse=True)
        lse_log2, delta = row_stats(out.detach(), do, lse.detach())
        ms_variants = {}
        for variant in args.variants:
            tile = argparse.Namespace(**VARIANTS[variant])
            ms_variants[variant] = timed(lambda tile=tile: launch(q, k, v, do, lse_log2, delta, causal, left, tile))
        ms_gluon = ms_variants[args.variants[0]]
        ms_dq = timed(lambda: launch_dq(q, k, v, do, lse_log2, delta, causal, left, args))
        ms_routed = {}
        for halves in ROUTED_HALVES:  # the same backward with Gluon launches in place of portable ones
            with routed(halves):
                ms_routed[halves] = timed(lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True))
        row = {**{f"gluon dK/dV {v}": 8 * b * hq * pairs * d / ms / 1e9 for v, ms in ms_variants.items()},
               "gluon dQ": 6 * b * hq * pairs * d / ms_dq / 1e9,
               **{label: 10 * b * hq * pairs * d / ms_routed[halves] / 1e9 for halves, label in ROUTED_HALVES.items()},
               "gluon dK/dV share": ms_gluon / ms_routed[()]}  # the first variant's
        if left < 0 and hq == hkv:
            qt, kt, vt = (x.detach().transpose(1, 2).requires_grad_() for x in (q, k, v))
            for label, backend in (("FA2 bwd", SDPBackend.FLASH_ATTENTION), ("cuDNN bwd", SDPBackend.CUDNN_ATTENTION)):
                with sdpa_kernel(backend):
                    o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                ms = timed(lambda o=o: torch.autograd.grad(o, (qt, kt, vt), do.transpose(1, 2), retain_graph=True))
                row[label] = 10 * b * hq * pairs * d / ms / 1e9
        rows.append((name, row))
    rows.append(bench_documents())
    names = list(dict.fromkeys(key for _, row in rows for key in row))
    print("| case | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for name, row in rows:
        print(f"| {name} | " + " | ".join(f"{row.get(n, float('nan')):.{2 if n.endswith('share') else 0}f}"
                                          for n in names) + " |")


# flashx's whole backward timed with these Gluon launches (the columns' labels).
ROUTED_HALVES = {
    (): "flashx bwd",
    ("dkdv",): "flashx bwd, Gluon dK/dV",
    ("dkdv-tma",): "flashx bwd, Gluon dK/dV TMA",
    ("dkdv-tma-persist",): "flashx bwd, Gluon dK/dV TMA persistent",
    ("dkdv", "dq"): "flashx bwd, Gluon dK/dV + dQ",
    ("dkdv-tma", "dq"): "flashx bwd, Gluon dK/dV TMA + dQ",
}


def bench_documents() -> tuple:
    """(name, row): the variants benchmark's causal document mask (8 documents on N = 16k, H = 16,
    D = 128), flashx's backward portable and with the Gluon launches (through its block map)."""
    b, n, h, d = 1, 16384, 16, 128
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn_like(q)
    pairs = visible(n, n, True, -1, "cuda", document=DOCUMENT.value).sum().item()
    bm = ft.create_block_mask(documents, None, None, n, n, causal=True, device="cuda")
    out = ft.attention(q, k, v, causal=True, block_mask=bm)
    row = {}
    for halves, label in ROUTED_HALVES.items():
        with routed(halves):
            ms = timed(lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True))
        row[label] = 10 * b * h * pairs * d / ms / 1e9
    return f"B={b} N={n} H={h} D={d} causal, {n // DOCUMENT.value} documents", row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timings-only", action="store_true")
    parser.add_argument("--checks-only", action="store_true")
    parser.add_argument("--kernel-only", action="store_true", help="check the kernel alone, not through the plan")
    parser.add_argument("--stages", type=int, default=2)
    parser.add_argument("--cregs", type=int, default=240)
    parser.add_argument("--pregs", type=int, default=24)
    parser.add_argument("--no-tma", dest="tma", action="store_false", help="Q and dO by cp.async (--pregs 48 or more)")
    parser.add_argument("--tma-store", action="store_true", help="dK and dV by TMA (TMA_STORE) in the checks")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["cp-s2", "tma-s2"],
                        help="tiles to time (the checks use --stages/--cregs/--pregs/--no-tma)")
    args = parser.parse_args()
    failures = 0
    if not args.timings_only:
        failures = check(args)
        print(f"correctness failures: {failures}", flush=True)
    if not args.checks_only:
        bench(args)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
