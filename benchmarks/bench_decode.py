#!/usr/bin/env python3
"""Decode steps over a KV cache: flashx (dense, and paged through a block table) beside torch
SDPA's FA2 and cuDNN backends and FlexAttention on the dense cache.

One query per sequence (Nq = 1), Hq = 32 query heads over Hkv = 8 kv heads, D = 128, bf16, every
sequence's cache full (so every system reads the same keys): B in {1, 8, 32} x Nkv in {4k, 16k}.
A decode step is bound by reading the cache: the table gives each system's time (us) and the
cache bandwidth it reached (K and V bytes read / time, GB/s), and flashx's speed beside FA2.

- flashx dense: flashx.torch.attention(q, k, v, layout="bhnd") on the (B, Hkv, Nkv, D) cache;
- flashx paged P: the same cache cut into pages of P rows, (pages, P, Hkv, D), shuffled, with a
  block table (B, Nkv / P) and seqused_k (every sequence full);
- flashx (jax) paged 256: the JAX frontend's jitted paged call on the same arrays;
- SDPA FA2 / cuDNN: scaled_dot_product_attention(q, k, v, enable_gqa=True) under one backend;
- FlexAttention: torch.compile'd flex_attention(q, k, v, enable_gqa=True), no block mask.
Checks: every output against SDPA's math backend in float32 (relative Frobenius error).
Timing: triton.testing.do_bench medians (common.time_torch; JAX: common.time_jax).

    python benchmarks/bench_decode.py             # all cases
    python benchmarks/bench_decode.py --quick     # shorter timing
    python benchmarks/bench_decode.py --device cpu   # debug pass: interpreter, tiny shapes
    python benchmarks/bench_decode.py --cuda-graphs  # torch's systems from CUDA graphs: device time only

Writes DIR/decode.md and DIR/decode.json (DIR: --out, default benchmarks/results/h200); prints
the markdown last. Needs a CUDA GPU (but --device cpu); importing this module does no work.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

try:  # python -m benchmarks.bench_decode
    from . import common
except ImportError:  # python benchmarks/bench_decode.py
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import common

HEADS_Q, HEADS_KV, HEAD_DIM = 32, 8, 128
BATCHES = (1, 8, 32)
CACHE_LENGTHS = (4096, 16384)
PAGE_SIZES = (256, 16)
GRAPH_COPIES_MAX = 16  # --cuda-graphs: at most this many copies of a case's inputs in one graph
SYSTEMS = ("flashx_dense", *(f"flashx_paged_{p}" for p in PAGE_SIZES), "flashx_jax_paged_256",
           "sdpa_flash", "sdpa_cudnn", "flex")
LABELS = {"flashx_dense": "flashx dense", **{f"flashx_paged_{p}": f"flashx paged {p}" for p in PAGE_SIZES},
          "flashx_jax_paged_256": "flashx (jax) paged 256", "sdpa_flash": "SDPA FA2", "sdpa_cudnn": "SDPA cuDNN",
          "flex": "FlexAttention"}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="shorter timing")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--warmup-ms", type=float, default=None)
    parser.add_argument("--rep-ms", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=common.ROUNDS)
    parser.add_argument("--cuda-graphs", action="store_true",
                        help="time the torch systems replayed from a CUDA graph (no host time; common.time_torch_graph)")
    parser.add_argument("--out", type=Path, default=common.DEFAULT_OUT)
    return parser.parse_args(argv)


def paged(cache, page_size: int, order):
    """A (B, Hkv, N, D) cache as pages (pages, page_size, Hkv, D), logical page i stored at order[i]."""
    batch, heads, n, d = cache.shape
    pages = cache.permute(0, 2, 1, 3).reshape(batch * n // page_size, page_size, heads, d)
    stored = pages.new_empty(pages.shape)
    stored[order] = pages
    return stored


def system_calls(torch, ctx: dict, q, k, v, used, generator, systems: list, keep_pages: bool) -> dict:
    """Each torch system's call on these arrays (the paged systems on their own shuffled copy of
    k and v, kept in ctx for the JAX system where keep_pages)."""
    import flashx.torch

    device, batch, n = ctx["device"], k.shape[0], k.shape[2]
    calls = {}
    if "flashx_dense" in systems:
        calls["flashx_dense"] = lambda: flashx.torch.attention(q, k, v, layout="bhnd")
    for p in PAGE_SIZES:
        name = f"flashx_paged_{p}"
        if name in systems or (p == 256 and "flashx_jax_paged_256" in systems and keep_pages):
            order = torch.randperm(batch * n // p, generator=generator).to(device)
            k_pages, v_pages = paged(k, p, order), paged(v, p, order)
            table = order.view(batch, n // p).to(torch.int32)  # sequence b's page j is stored at order[b, j]
            if keep_pages:
                ctx[f"pages_{p}"] = (k_pages, v_pages, table)
            if name in systems:
                calls[name] = (lambda kp=k_pages, vp=v_pages, t=table: flashx.torch.attention(
                    q.transpose(1, 2), kp, vp, block_table=t, seqused_k=used).transpose(1, 2))
    if "sdpa_flash" in systems or "sdpa_cudnn" in systems:
        from torch.nn.attention import SDPBackend

        for name, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION), ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
            if name in systems:
                calls[name] = common.sdpa_call(backend, q, k, v, enable_gqa=True)
    if "flex" in systems:
        if "flex" not in ctx:
            ctx["flex"] = common.flex_setup(torch)
        flex = ctx["flex"][0]
        calls["flex"] = lambda: flex(q, k, v, enable_gqa=True)
    return calls


def bench_case(torch, ctx: dict, batch: int, n: int, systems: list, warmup_ms: float, rep_ms: float, log) -> dict:
    """One (B, Nkv) case: each system checked against SDPA's math backend and timed (do_bench; with
    ctx["graphs"], replayed from a CUDA graph over enough copies of the inputs to pass L2)."""
    device = ctx["device"]
    generator = torch.Generator().manual_seed(batch * 100003 + n)

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(device, torch.bfloat16)

    heads_q, heads_kv, head_dim = ctx["heads"]

    def inputs():
        return randn(batch, heads_q, 1, head_dim), randn(batch, heads_kv, n, head_dim), randn(batch, heads_kv, n, head_dim)

    q, k, v = inputs()
    used = torch.full((batch,), n, dtype=torch.int32, device=device)
    reference = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=True)
    calls = system_calls(torch, ctx, q, k, v, used, generator, systems, keep_pages=True)
    cache_bytes = 2 * k.numel() * k.element_size()
    copies = [calls]
    if ctx["graphs"]:  # the other copies' inputs, so that a graph's calls together pass L2
        extra = min(GRAPH_COPIES_MAX, -(-common.GRAPH_WORKING_SET_BYTES // cache_bytes)) - 1
        copies += [system_calls(torch, ctx, *inputs(), used, generator, systems, keep_pages=False) for _ in range(extra)]
    row = {}
    for name, call in calls.items():
        def run(call=call, name=name):
            err = common.rel_err(call(), reference)
            if ctx["graphs"]:
                ms = common.time_torch_graph([c[name] for c in copies], warmup_ms, rep_ms, device)
            else:
                ms = common.time_torch(call, warmup_ms, rep_ms, device)
            return ms, err
        value, why = common.guarded(run, ctx)
        row[name] = dict(ms=value[0], err=value[1]) if value else dict(reason=why)
    if "flashx_jax_paged_256" in systems:
        row["flashx_jax_paged_256"] = jax_paged(ctx, q, used, reference, warmup_ms, rep_ms)
    for name, result in row.items():
        if "ms" in result:
            result["gbps"] = cache_bytes / (result["ms"] * 1e-3) / 1e9
            log(f"  {LABELS[name]:>24}: {result['ms'] * 1e3:9.1f} us  {result['gbps']:7.0f} GB/s  err {result['err']:.1e}")
        else:
            log(f"  {LABELS[name]:>24}: {result['reason']}")
    return row


def jax_paged(ctx: dict, q, used, reference, warmup_ms: float, rep_ms: float) -> dict:
    """The JAX frontend's jitted paged call on the torch arrays (DLPack views)."""
    def run():
        jax = common.require_jax(ctx)
        import flashx.jax

        k_pages, v_pages, table = ctx["pages_256"]
        args = tuple(common.jax_from_torch(jax, t) for t in (q.transpose(1, 2).contiguous(), k_pages, v_pages, table, used))
        step = jax.jit(lambda q, k, v, t, u: flashx.jax.attention(q, k, v, block_table=t, seqused_k=u))
        out = common.torch_from_jax(ctx["torch"], step(*args), ctx["device"]).transpose(1, 2)
        return common.time_jax(step, args, warmup_ms, rep_ms), common.rel_err(out, reference)
    value, why = common.guarded(run, ctx)
    return dict(ms=value[0], err=value[1]) if value else dict(reason=why)


def markdown(rows: list, env: dict, settings: dict) -> str:
    systems = [s for s in SYSTEMS if any(s in r["results"] for r in rows)]
    lines = common.header_lines("flashx decode steps over a KV cache", env) + [
        "- one query per sequence, Hq = {} over Hkv = {}, D = {}, bf16, every ".format(*settings["heads"]) +
        "cache full; us per call ({}; JAX back to back) and the cache bandwidth reached ".format(
            "torch's systems replayed from one CUDA graph over copies of the inputs that pass L2, median"
            " replay / copies (common.time_torch_graph): no host time" if settings.get("cuda_graphs") else "do_bench median") +
        "(K and V bytes / time), flashx dense / FA2 as a ratio of times",
        f"- warm-up {settings['warmup_ms']:g} ms, {settings['rep_ms']:g} ms reps, {settings['rounds']} round(s)",
        "",
        "| B | Nkv | " + " | ".join(LABELS[s] for s in systems) + " | FA2 / flashx dense |",
        "|---|---|" + "---|" * (len(systems) + 1),
    ]
    notes = []
    for r in rows:
        cells = []
        for s in systems:
            res = r["results"].get(s, {})
            if "ms" in res:
                cells.append(f"{res['ms'] * 1e3:.1f} us ({res['gbps']:.0f} GB/s)")
            else:
                cells.append("-")
                if res.get("reason"):
                    notes.append(f"- B={r['B']} Nkv={r['N']} {LABELS[s]}: {res['reason']}")
        dense, fa2 = r["results"].get("flashx_dense", {}), r["results"].get("sdpa_flash", {})
        ratio = f"{fa2['ms'] / dense['ms']:.2f}x" if "ms" in dense and "ms" in fa2 else "-"
        lines.append(f"| {r['B']} | {r['N']} | " + " | ".join(cells) + f" | {ratio} |")
    errors = [f"{LABELS[s]} {r['results'][s]['err']:.1e}" for r in rows[:1] for s in systems if "err" in r["results"].get(s, {})]
    lines += ["", "Errors against SDPA's math backend in float32 (first case): " + ", ".join(errors)] if errors else []
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    warmup_ms, rep_ms = common.timing_defaults(args)

    log = common.log

    torch = common.start("bench_decode.py", args.device, log)
    if torch is None:
        return 2
    cpu = args.device == "cpu"
    ctx = {"torch": torch, "device": args.device, "heads": (4, 2, 16) if cpu else (HEADS_Q, HEADS_KV, HEAD_DIM),
           "verbose_errors": common.verbose_errors(), "graphs": args.cuda_graphs}
    if "flashx_jax_paged_256" in args.systems:
        common.init_jax(ctx, args.device, log)
    systems = [s for s in args.systems if not (cpu and s in ("sdpa_flash", "sdpa_cudnn", "flex"))]
    env = common.environment(torch, args.device)
    settings = dict(warmup_ms=warmup_ms, rep_ms=rep_ms, rounds=common.ROUNDS, heads=ctx["heads"], cuda_graphs=args.cuda_graphs)
    shapes = [(1, 256), (2, 512)] if cpu else [(b, n) for n in CACHE_LENGTHS for b in BATCHES]
    rows = []
    start = time.perf_counter()
    for batch, n in shapes:
        log(f"B={batch} Nkv={n}")
        try:
            results = bench_case(torch, ctx, batch, n, systems, warmup_ms, rep_ms, log)
        except KeyboardInterrupt:
            log("  interrupted; the remaining cases are skipped")
            break
        rows.append(dict(B=batch, N=n, results=results))
        common.empty_cache(torch, args.device)
    log(f"done in {time.perf_counter() - start:.0f} s")
    common.write_report(common.output_dir(args), "decode", markdown(rows, env, settings),
                        {"environment": env, "settings": settings, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
