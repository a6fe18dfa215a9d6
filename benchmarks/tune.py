"""Sweep the tiles and launch options of flashx's three kernels on the GPU; print the best.

For each head dim and causal flag, every candidate `KernelTiles` of the forward, dK/dV and dQ
kernels is compiled first, in parallel worker processes that only fill Triton's on-disk cache,
then timed in this process in --rounds rounds, every other round in reverse order (each a
triton.testing.do_bench median; a candidate keeps the median of its rounds) at B*N = 16k,
H*D = 2048, in the memory layout of bench_*.py and ab.py, (B, H, N, D) (--layout bnhd: (B, N, H,
D); until 2026-12-03 sweeps ran in that one). Each candidate's outputs are checked against those of the
current table's entry (a wrong or failing config never wins). The winners are printed as
`flashx.core.tuning.TUNED_TILES` entries and written to OUT/tune.md and tune.json; copying them
into core/tuning.py is a reviewed step, so a sweep never changes the library by itself.

    python benchmarks/tune.py [--d 64 128 256] [--n 4096] [--workers 12] [--budget-s 400]
    python benchmarks/tune.py --d 128 --n 256 1024 --kernels forward   # the short-sequence bucket
    python benchmarks/tune.py --d 128 --n 16384 --window 1023 --kernels dkdv dq   # a causal sliding window
    python benchmarks/tune.py --dtype float32 --float32-precision tf32x3 --d 128 256 --n 2048   # float32

float32 sweeps `tuning.FLOAT32_PRECISION_TILES` for the precision (over FLOAT32_TILES, keyed by
`tuning.tile_width`), on FLOAT32_CANDIDATES, checked against the table's outputs to 1e-4 ("tf32":
1e-2), and prints the winners as that table's entries.

At N <= SHORT_SEQLEN the forward candidates stand in for the SHORT_FORWARD_TILES entry of N's
bucket (tuning.short_bucket) where the plan has one, else for TUNED_TILES.

TFLOP/s per kernel count its matmuls: forward 2 (4*B*H*N^2*D FLOPs, halved when causal), dK/dV
4 (2x), dQ 3 (1.5x). --device cpu runs the code paths through the interpreter (tiles ignored).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import multiprocessing
import statistics
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

KERNELS = ("forward", "dkdv", "dq")
MATMULS = {"forward": 1.0, "dkdv": 2.0, "dq": 1.5}  # in units of the forward's FLOPs


# Forward candidates added at N <= 512 (the short bucket), D = 128: smaller register and shared
# memory footprints, for more programs an SM where short causal calls wait on loads (NOTES v0.32).
# Offline (Triton 3.6, sm_90, 2026-12-02), registers / KiB: 64 x 16 / 4 warps / 3 and 2 stages
# 119 / 40 and 116 / 32 (4 programs an SM by registers), 64 x 32 / 8 / 2 and 3 115 / 52 and 68
# (2 of 8 warps), against the table's 64 x 32 / 4 / 3 at 143 / 64 (3 programs).
SHORT_FORWARD_EXTRA = {128: [(64, 16, 4, 3), (64, 16, 4, 2), (64, 32, 8, 2), (64, 32, 8, 3)]}


# float32 candidates by tile width (tuning.tile_width: twice D). Its tiles are far smaller than
# 16-bit ones (each thread holds float32 operands, and "tf32x3" their high and low parts); offline
# stack bytes misjudged them (NOTES v0.70: a dK/dV that spilled more ran 15% faster), so the lists
# hold every neighbour of the tables' tiles, one and two stages.
FLOAT32_CANDIDATES = {
    128: dict(forward=[(64, 64, 4, 2), (64, 32, 4, 2), (64, 32, 8, 2), (64, 64, 8, 2), (64, 64, 4, 1), (128, 32, 8, 2),
                       (64, 64, 4, 3)],
              dkdv=[(64, 32, 8, 2), (64, 32, 8, 1), (64, 32, 4, 2), (32, 64, 4, 2), (64, 64, 8, 2), (64, 64, 8, 1),
                    (128, 32, 8, 1), (32, 32, 4, 2)],
              dq=[(64, 64, 4, 2), (64, 32, 4, 2), (64, 32, 8, 2), (64, 64, 8, 2), (64, 64, 4, 1), (128, 32, 8, 2)]),
    256: dict(forward=[(64, 32, 8, 2), (64, 32, 4, 2), (64, 64, 8, 2), (64, 64, 4, 2), (64, 32, 8, 1), (128, 32, 8, 2),
                       (32, 64, 8, 2)],
              dkdv=[(64, 32, 8, 1), (64, 32, 8, 2), (32, 32, 8, 2), (32, 32, 4, 1), (64, 16, 8, 1), (64, 32, 4, 1),
                    (128, 32, 8, 1), (64, 64, 8, 1), (32, 64, 8, 1)],
              dq=[(32, 64, 8, 2), (32, 64, 8, 1), (64, 32, 8, 2), (64, 32, 8, 1), (32, 32, 8, 2), (32, 32, 4, 2),
                  (64, 64, 8, 1), (16, 64, 4, 2)]),
    512: dict(forward=[(32, 64, 8, 2), (32, 32, 8, 2), (32, 32, 4, 2), (64, 32, 8, 2), (16, 64, 4, 2), (32, 64, 8, 1)],
              dkdv=[(16, 16, 4, 1), (16, 16, 4, 2), (16, 32, 4, 1), (32, 16, 4, 1), (32, 16, 8, 1), (16, 16, 2, 1),
                    (32, 32, 8, 1), (16, 64, 8, 1)],
              dq=[(16, 32, 4, 1), (16, 32, 4, 2), (32, 32, 8, 1), (16, 64, 4, 1), (32, 16, 4, 1), (16, 16, 4, 1),
                  (32, 32, 4, 1)]),
}


def candidates(d: int, kernel: str, seqlen: int = 4096, float32: bool = False) -> list:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) to try; dK/dV's program owns BLOCK_N keys.
    float32: d is the tile width (tuning.tile_width), the FLOAT32_CANDIDATES' key."""
    if float32:
        return FLOAT32_CANDIDATES[d][kernel]
    if kernel == "forward":
        from flashx.core import tuning

        extra = SHORT_FORWARD_EXTRA.get(d, []) if seqlen <= tuning.SHORT_BUCKETS[0] else []
        return extra + {
            64: [(128, 64, 4, 3), (128, 64, 4, 4), (128, 128, 4, 3), (128, 128, 8, 3), (128, 64, 8, 3), (64, 64, 4, 3),
                 (64, 32, 4, 3), (256, 64, 8, 3), (256, 64, 8, 2), (128, 64, 8, 4), (128, 64, 8, 2), (128, 128, 8, 2),
                 (64, 128, 4, 3), (256, 32, 8, 3)],
            128: [(128, 64, 8, 3), (128, 128, 8, 3), (128, 128, 8, 2), (128, 64, 4, 3), (64, 128, 4, 3),
                  (128, 64, 8, 4), (128, 32, 8, 3), (64, 32, 4, 3), (64, 64, 4, 3), (64, 32, 4, 4),
                  (64, 32, 4, 2), (64, 64, 4, 2), (128, 32, 4, 2)],
            256: [(64, 64, 4, 2), (64, 64, 4, 3), (128, 64, 8, 2), (64, 32, 4, 3), (128, 32, 8, 2), (64, 128, 8, 2),
                  (64, 64, 8, 3), (64, 64, 8, 2), (128, 32, 8, 3), (64, 32, 4, 4), (128, 64, 8, 1), (64, 32, 8, 3)],
        }[d]
    if kernel == "dkdv":
        return {
            64: [(128, 64, 4, 2), (64, 128, 8, 2), (64, 128, 4, 2), (32, 128, 4, 3), (64, 64, 4, 3),
                 (128, 128, 8, 2), (64, 128, 8, 3)],
            128: [(128, 64, 8, 2), (64, 128, 8, 2), (32, 128, 4, 3), (64, 64, 4, 3), (128, 128, 8, 1),
                  (64, 128, 8, 3), (32, 128, 8, 2), (32, 128, 8, 3), (32, 128, 8, 4), (32, 128, 4, 4)],
            256: [(64, 64, 8, 1), (64, 64, 4, 2), (32, 64, 4, 2), (64, 128, 8, 1), (32, 128, 8, 1), (64, 64, 8, 2),
                  (32, 64, 8, 2), (32, 64, 8, 3), (16, 64, 8, 2), (16, 64, 8, 3), (16, 64, 8, 4),
                  (32, 128, 8, 2), (32, 128, 8, 3), (16, 128, 8, 3), (32, 64, 4, 3)],
        }[d]
    return {
        64: [(128, 64, 4, 2), (128, 32, 4, 3), (64, 64, 4, 3), (128, 64, 8, 2), (128, 128, 8, 2), (64, 128, 4, 2)],
        128: [(128, 64, 8, 2), (128, 32, 4, 3), (128, 32, 8, 2), (64, 64, 4, 3), (128, 128, 8, 2),
              (64, 128, 8, 2), (128, 64, 8, 3)],
        256: [(64, 64, 8, 1), (64, 32, 4, 2), (64, 64, 4, 2), (128, 32, 8, 2), (128, 64, 8, 1), (64, 64, 8, 2),
              (64, 32, 8, 3), (64, 32, 8, 2), (128, 32, 8, 3)],
    }[d]


# ----------------------------------------------------------------------------------------------
# One case: inputs, the default table's outputs, and a launch of one kernel with given tiles


_CASES: dict = {}


def case(torch, d: int, n: int, causal: bool, device: str, reference: bool = True, window_left: int = -1,
         layout: str = "bhnd", dtype: str = "bfloat16", precision: str = "tf32x3") -> dict:
    """Inputs of shape (B, N, H, D) in `dtype` (float32 multiplied as `precision`), and the outputs
    of the current table, cached per (d, n, causal, window, layout, dtype, precision); layout
    "bhnd": the inputs are (B, H, N, D) in memory (views of that shape transposed), "bnhd": contiguous.

    window_left >= 0: the causal sliding window (window_left, 0); FLOPs count visible entries.

    reference=False (compile workers): placeholders for the forward's outputs, whose values do not
    matter there, so that workers compile only their own candidates.
    """
    key = (d, n, causal, reference, window_left, layout, dtype, precision)
    if key in _CASES:
        return _CASES[key]
    tokens, hidden = (common.TOKENS, common.HIDDEN) if device == "cuda" else (2 * n, 2 * d)
    b, h = max(1, tokens // n), max(1, hidden // d)
    gen = torch.Generator(device=device).manual_seed(0)
    torch_dtype = getattr(torch, dtype)
    if layout == "bhnd":
        q, k, v, do = (torch.randn(b, h, n, d, device=device, dtype=torch_dtype, generator=gen).transpose(1, 2)
                       for _ in range(4))
    else:
        q, k, v, do = (torch.randn(b, n, h, d, device=device, dtype=torch_dtype, generator=gen) for _ in range(4))
    c = dict(q=q, k=k, v=v, do=do, shape=(b, n, h, d), causal=causal, window=(window_left, 0) if window_left >= 0 else None,
             precision=precision)
    visible = n * (n + 1) / 2 if causal else n * n
    if window_left >= 0:
        visible = sum(min(i, window_left) + 1 for i in range(n))
    c["flops"] = 4.0 * b * h * visible * d
    if reference:
        c["ref"] = reference_outputs(torch, c)
        c["sdpa_err"] = sdpa_errors(torch, c)
    else:
        lse = torch.zeros(b, h, n, device=device)
        # No row statistics: launcher() allocates them in each candidate plan's shape.
        c["ref"] = dict(out=torch.randn_like(q), lse=lse, delta=None, lse_log2=None)
    _CASES[key] = c
    return c


def sdpa_errors(torch, c: dict) -> dict:
    """Relative errors of the table's outputs and gradients against torch SDPA (same dtype; its
    float32 at full precision):
    the candidates are checked against the table, and the table against SDPA."""
    q, k, v = (c[name].detach().transpose(1, 2).requires_grad_() for name in ("q", "k", "v"))
    if c["window"] is None:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=c["causal"])
    else:
        i = torch.arange(q.shape[2], device=q.device)
        offset = i[:, None] - i[None, :]
        mask = (offset >= 0) & (offset <= c["window"][0])
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out.backward(c["do"].transpose(1, 2))
    ref = c["ref"]
    pairs = dict(out=(ref["out"], out), dq=(ref["dq"][0], q.grad), dk=(ref["dkdv"][0], k.grad), dv=(ref["dkdv"][1], v.grad))
    return {name: common.rel_err(mine, theirs.detach().transpose(1, 2)) for name, (mine, theirs) in pairs.items()}


def _spec(x):
    from flashx import core

    return core.ArraySpec(tuple(x.shape), tuple(x.stride()), str(x.dtype).removeprefix("torch."), str(x.device))


def _plan(c: dict):
    """The plan of case c as the tables stand."""
    from flashx import core

    return core.plan_attention(_spec(c["q"]), _spec(c["k"]), _spec(c["v"]), causal=c["causal"], window=c["window"],
                               float32_precision=c["precision"])


def _table_width(d: int, float32: bool) -> int:
    """The width the tile tables key head dim d by (tuning.tile_width of its head block)."""
    from flashx.core import tuning

    return tuning.tile_width(1 << (max(d, 16) - 1).bit_length(), 4 if float32 else 2)


@contextlib.contextmanager
def _tiles_in_table(c: dict, kernel: str, tiles):
    """The tables with `tiles` (BLOCK_M, BLOCK_N, warps, stages; None: as they are) in the entry
    that gives case c's `kernel` its tiles; a candidate keeps that entry's other choices (the short
    forward's one_loop). Restored on exit."""
    if tiles is None:
        yield
        return
    from flashx.core import tuning

    d, n = c["shape"][3], c["shape"][1]
    fields = dict(zip(("block_m", "block_n", "num_warps", "num_stages"), tiles))
    if c["q"].element_size() == 4:
        # FLOAT32_PRECISION_TILES[precision][width]: {kernel: KernelTiles} over FLOAT32_TILES[width].
        # The candidate goes into new tables, swapped in for the module's (whose dicts stay
        # untouched) and back on exit. It holds at every grid size: the precision's
        # FLOAT32_FEW_PROGRAMS_TILES entry loses this kernel at this width meanwhile.
        width, precision = _table_width(d, float32=True), c["precision"]
        tables, few_tables = tuning.FLOAT32_PRECISION_TILES, tuning.FLOAT32_FEW_PROGRAMS_TILES
        own, few = tables.get(precision, {}), few_tables.get(precision, {})
        entry = own.get(width, {})
        base = getattr(dataclasses.replace(tuning.FLOAT32_TILES[width], **entry), kernel)
        tuning.FLOAT32_PRECISION_TILES = {**tables, precision: {
            **own, width: {**entry, kernel: dataclasses.replace(base, **fields)}}}
        tuning.FLOAT32_FEW_PROGRAMS_TILES = {**few_tables, precision: {
            **few, width: {k: t for k, t in few.get(width, {}).items() if k != kernel}}}
        try:
            yield
        finally:
            tuning.FLOAT32_PRECISION_TILES, tuning.FLOAT32_FEW_PROGRAMS_TILES = tables, few_tables
        return
    key = (max(64, d), c["causal"])
    # The table the plan takes this kernel's tiles from; `single`: its entries are one KernelTiles.
    short_key = key + (tuning.short_bucket(n),)
    if kernel == "forward" and short_key in tuning.SHORT_FORWARD_TILES:
        table, key, single = tuning.SHORT_FORWARD_TILES, short_key, True
    elif kernel == "dkdv" and c["window"] is not None and key[0] in tuning.WINDOW_DKDV_TILES:
        table, key, single = tuning.WINDOW_DKDV_TILES, key[0], True
    else:
        table, single = tuning.TUNED_TILES, False
    saved = table[key]
    candidate = dataclasses.replace(saved if single else getattr(saved, kernel), **fields)
    table[key] = candidate if single else dataclasses.replace(saved, **{kernel: candidate})
    try:
        yield
    finally:
        table[key] = saved


def launcher(torch, c: dict, kernel: str, tiles):
    """(launch, outputs) for one kernel with `tiles` put in the table (None: the table as is)."""
    with _tiles_in_table(c, kernel, tiles):
        plan = _plan(c)
    q = c["q"]
    placeholder = torch.empty(1, dtype=torch.int32, device=q.device)
    arrays = dict(Q=q, K=c["k"], V=c["v"])
    if kernel == "forward":
        out = torch.empty(plan.out_shape, dtype=q.dtype, device=q.device)
        lse = torch.empty(plan.lse_shape, dtype=torch.float32, device=q.device)
        (call,) = plan.forward_calls(arrays, placeholder, gluon=False)  # the table's tl tiles, not a Gluon route; no key split
        return (lambda: call.launch((out, lse))), (out,)
    ref = c["ref"]
    delta, lse_log2 = ref["delta"], ref["lse_log2"]
    if delta is None:  # a compile worker: placeholders in this plan's shape
        delta = lse_log2 = torch.zeros(plan.row_stats_shape, dtype=torch.float32, device=q.device)
    if tuple(delta.shape) != plan.row_stats_shape:
        raise ValueError(f"the table's row statistics {tuple(delta.shape)} do not fit this candidate's plan {plan.row_stats_shape}")
    arrays.update(O=ref["out"], DO=c["do"], LSE=ref["lse"], DELTA=delta, LSE_LOG2=lse_log2)
    # The two kinds of the backward's programs as separate launches (split), each kind timed alone
    # (dK/dV: one launch, or its dV and dK passes back to back where the entry has two).
    # dQ's launch may write the row statistics too (tuning.DQ_ROW_STATS): into the table's, the same values.
    calls = plan.backward_calls(arrays, placeholder, False, _spec(c["do"]), split=True)
    dkdv = [call for call in calls if call.constexprs.get("RUN_DKDV")]
    (dq,) = [call for call in calls if call.constexprs.get("RUN_DQ")]
    grads = _gradients(torch, plan, q)
    if kernel == "dkdv":
        bound = [plan.launch_outputs(call, grads, placeholder) for call in dkdv]
        return (lambda: [call.launch(outs) for call, outs in zip(dkdv, bound)]), (grads["DK"], grads["DV"])
    bound_dq = plan.launch_outputs(dq, dict(grads, DELTA_OUT=delta, LSE_LOG2_OUT=lse_log2), placeholder)
    return (lambda: dq.launch(bound_dq)), (grads["DQ"],)


def _gradients(torch, plan, q) -> dict:
    """DK, DV, DQ as the frontends allocate them: contiguous in the plan's shapes, whatever the
    inputs' strides."""
    return {name: torch.empty(shape, dtype=q.dtype, device=q.device)
            for name, shape in (("DK", plan.k_shape), ("DV", plan.v_shape), ("DQ", plan.q_shape))}


def reference_outputs(torch, c: dict) -> dict:
    """The current table's forward, delta and gradients: the reference each candidate must match."""
    q = c["q"]
    plan = _plan(c)
    placeholder = torch.empty(1, dtype=torch.int32, device=q.device)
    out = torch.empty(plan.out_shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(plan.lse_shape, dtype=torch.float32, device=q.device)
    (call,) = plan.forward_calls(dict(Q=q, K=c["k"], V=c["v"]), placeholder, gluon=False)
    call.launch((out, lse))
    delta, lse_log2 = (torch.empty(plan.row_stats_shape, dtype=torch.float32, device=q.device) for _ in range(2))
    arrays = dict(Q=q, K=c["k"], V=c["v"], O=out, DO=c["do"], LSE=lse, DELTA=delta, LSE_LOG2=lse_log2)
    # Each launch takes the outputs it names (a Gluon dK/dV kernel: DK, DV and its descriptor
    # scratch; the first launch, the row statistics).
    grads = _gradients(torch, plan, q)
    dk, dv, dq_out = grads["DK"], grads["DV"], grads["DQ"]
    for call in plan.backward_calls(arrays, placeholder, False, _spec(c["do"]), split=True):
        call.launch(plan.launch_outputs(call, dict(grads, DELTA_OUT=delta, LSE_LOG2_OUT=lse_log2), placeholder))
    return dict(out=out, lse=lse, delta=delta, lse_log2=lse_log2, forward=(out,), dkdv=(dk, dv), dq=(dq_out,))


# ----------------------------------------------------------------------------------------------
# Compile workers: fill Triton's cache so that the timing process only loads binaries


def _compile_job(job: tuple) -> tuple:
    d, n, causal, kernel, tiles, device, window_left, layout, dtype, precision = job
    try:
        import flashx  # noqa: F401  (first: compiled vs interpreted)
        import torch

        c = case(torch, d, n, causal, device, reference=False, window_left=window_left, layout=layout, dtype=dtype,
                 precision=precision)
        launch, _ = launcher(torch, c, kernel, tiles)
        launch()
        if device == "cuda":
            torch.cuda.synchronize()
        return job, None
    except Exception as err:  # noqa: BLE001
        return job, common.reason(err)


def compile_all(jobs: list, workers: int, timeout_s: float, log) -> dict:
    """{job: error or None}; jobs not finished within timeout_s are missing."""
    results: dict = {}
    if workers <= 1:
        for job in jobs:
            results[job] = _compile_job(job)[1]
        return results
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(workers) as pool:
        pending = pool.imap_unordered(_compile_job, jobs)
        deadline = time.perf_counter() + timeout_s
        for _ in jobs:
            try:
                job, err = pending.next(timeout=max(1.0, deadline - time.perf_counter()))
            except multiprocessing.TimeoutError:
                log(f"compile phase stopped after {timeout_s:.0f} s: {len(jobs) - len(results)} jobs unfinished")
                break
            results[job] = err
            if err:
                log(f"compile failed {job[:5]}: {err}")
        pool.terminate()
    return results


# ----------------------------------------------------------------------------------------------


def measure(torch, c: dict, jobs: list, compiled: dict, args, best: dict, log) -> list:
    """Check and time the compiled candidates of one (case, kernel): one row each.

    Each candidate's outputs are checked against the table's first; the correct ones are then
    timed in args.rounds rounds, every other round in reverse order (A B C, C B A, ...), and each
    keeps the median of its rounds, so that neither a candidate's place in the order nor the card's
    clock drifting over the sweep picks the winner. The fastest correct one goes into `best`.
    """
    rows, launches = [], []
    for job in jobs:
        d, n, causal, kernel, tiles, *_ = job
        row = dict(d=d, n=n, causal=causal, kernel=kernel, tiles=tiles, ms=None, tflops=None, err=None,
                   spread=None, why=compiled.get(job, "not compiled in time"))
        rows.append(row)
        if row["why"] is not None:
            continue
        try:
            launch, outs = launcher(torch, c, kernel, tiles)
            launch()
            row["err"] = max(common.rel_err(o, r) for o, r in zip(outs, c["ref"][kernel]))
        except Exception as e:  # noqa: BLE001
            row["why"] = common.reason(e)
            log(f"D={d} N={n} causal={causal} {kernel} {tiles}: {row['why']}")
            continue
        if row["err"] >= args.tolerance:
            row["why"] = f"outputs differ from the table's (rel {row['err']:.1e})"
            log(f"D={d} N={n} causal={causal} {kernel} {tiles}: {row['why']}")
            continue
        launches.append((row, launch, []))
    for round_ in range(args.rounds):
        for row, launch, samples in launches if round_ % 2 == 0 else launches[::-1]:
            try:
                samples.append(common.time_torch(launch, 10.0, args.rep_ms, args.device))
            except Exception as e:  # noqa: BLE001
                row["why"] = common.reason(e)
    for row, _, samples in launches:
        if row["why"] is not None or not samples:
            continue
        ms = statistics.median(samples)
        row.update(ms=ms, tflops=MATMULS[row["kernel"]] * c["flops"] / (ms * 1e-3) / 1e12,
                   spread=max(samples) / min(samples) - 1)
        log(f"D={row['d']} N={row['n']} causal={row['causal']} {row['kernel']} {row['tiles']}: {ms:.3f} ms "
            f"{row['tflops']:.0f} TFLOP/s (spread {row['spread']:.1%} over {len(samples)}) err {row['err']:.1e}")
        key = (row["d"], row["n"], row["causal"], row["kernel"])
        if key not in best or ms < best[key]["ms"]:
            best[key] = row
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d", type=int, nargs="+", default=[64, 128, 256])
    p.add_argument("--n", type=int, nargs="+", default=[4096], help="sequence lengths (B*N = 16k each)")
    p.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    p.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS))
    p.add_argument("--workers", type=int, default=12, help="compile processes (default %(default)s)")
    p.add_argument("--compile-s", type=float, default=240.0, help="limit of the compile phase")
    p.add_argument("--budget-s", type=float, default=None, help="soft limit of the whole run")
    p.add_argument("--rep-ms", type=float, default=40.0)
    p.add_argument("--rounds", type=int, default=3,
                   help="timing rounds over a case's candidates, alternating order; medians (default %(default)s)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--window", type=int, default=-1, metavar="LEFT",
                   help="tune on the causal sliding window (LEFT, 0) instead of dense (implies --causal yes)")
    p.add_argument("--layout", choices=("bhnd", "bnhd"), default="bhnd",
                   help="the inputs' memory layout (default %(default)s, as bench_*.py and ab.py)")
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    p.add_argument("--float32-precision", default="tf32x3", help="float32's dots (core.FLOAT32_PRECISIONS)")
    args = p.parse_args(argv)
    float32 = args.dtype == "float32"
    if float32 and args.window >= 0:
        p.error("--window sweeps 16-bit tiles only (float32 has no window table)")
    # How far a candidate's outputs may stray from the table's: bf16's rounding, float32's own
    # precision ("tf32": one tf32 product, ~1e-3).
    args.tolerance = 1e-4 if float32 and args.float32_precision != "tf32" else 1e-2
    if args.window >= 0:
        args.causal = "yes"
    deadline = common.Deadline(args.budget_s)

    def log(msg: str) -> None:
        print(f"[tune {deadline.elapsed():6.1f}s] {msg}", flush=True)

    torch = common.start("tune.py", args.device, log)
    if torch is None:
        return 2
    out_dir = common.output_dir(args)
    seqlens = args.n if args.device == "cuda" else [32]
    head_dims = args.d if args.device == "cuda" else [16]
    causal_flags = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    width = {d: _table_width(d, float32) for d in head_dims}
    cand = {(d, n, k): candidates(width[d], k, n, float32) for d in head_dims for n in seqlens for k in args.kernels}
    if args.device == "cpu":
        cand = {key: tiles[:2] for key, tiles in cand.items()}
    jobs = [(d, n, causal, k, t, args.device, args.window, args.layout, args.dtype, args.float32_precision)
            for d in head_dims for n in seqlens for causal in causal_flags for k in args.kernels for t in cand[(d, n, k)]]
    log(f"{len(jobs)} candidates; compiling with {args.workers} workers")
    compiled = compile_all(jobs, args.workers if args.device == "cuda" else 1, args.compile_s, log)
    log(f"compiled {sum(e is None for e in compiled.values())} / {len(jobs)}")

    rows, best, sdpa_checks = [], {}, []
    cases = [(d, n, causal) for d in head_dims for n in seqlens for causal in causal_flags]
    # The budget is checked before each kernel's candidates, and an interrupt (a device call's
    # timeout -s INT) ends the measuring: either way the report below keeps what was measured.
    try:
        for d, n, causal in cases:
            c = None
            for kernel in args.kernels:
                if deadline.expired:
                    raise TimeoutError(deadline.why())
                if c is None:
                    c = case(torch, d, n, causal, args.device, window_left=args.window, layout=args.layout,
                             dtype=args.dtype, precision=args.float32_precision)
                    log(f"D={d} N={n} causal={causal}: table vs SDPA rel. errors "
                        + ", ".join(f"{k} {e:.1e}" for k, e in c["sdpa_err"].items()))
                    sdpa_checks.append((d, n, causal, c["sdpa_err"]))
                rows += measure(torch, c, [j for j in jobs if j[:4] == (d, n, causal, kernel)], compiled, args, best, log)
    except (TimeoutError, KeyboardInterrupt) as stop:
        log(f"stopped ({stop or 'interrupted'}); reporting the {len(rows)} candidates measured")

    env = common.environment(torch, args.device)
    lines = common.header_lines("flashx kernel tiles sweep (benchmarks/tune.py)", env)
    shape = "dense" if args.window < 0 else f"causal sliding window ({args.window}, 0), FLOPs on visible entries"
    dtype = f"float32 ({args.float32_precision})" if float32 else "bf16"
    lines += ["", f"{shape}; B*N = {common.TOKENS}, H*D = {common.HIDDEN}, {dtype}, layout {args.layout}; BLOCK_M x BLOCK_N / warps / stages; "
              "TFLOP/s per kernel from its matmuls (forward 1x, dK/dV 2x, dQ 1.5x the forward's FLOPs)", ""]
    lines += [f"Outputs and gradients of the table before the sweep, relative error vs torch SDPA in {args.dtype}"
              f" (candidates must match the table's to {args.tolerance:g}):", ""]
    lines += [f"- D={d} N={n} causal={causal}: " + ", ".join(f"{k} {e:.1e}" for k, e in errs.items())
              for d, n, causal, errs in sdpa_checks]
    lines += [""]
    table = []
    for r in rows:
        tag = "**best**" if best.get((r["d"], r["n"], r["causal"], r["kernel"])) is r else ""
        table.append([str(r["d"]), str(r["n"]), "yes" if r["causal"] else "no", r["kernel"], "%dx%d / %d / %d" % r["tiles"],
                      common.fmt(r["ms"], ".3f"), common.fmt(r["tflops"], ".0f"),
                      common.fmt(None if r["spread"] is None else 100 * r["spread"], ".1f"), r["why"] or tag])
    lines += common.md_table(["D", "N", "causal", "kernel", "tiles", "ms", "TFLOP/s", "spread %", "note"], table)
    if float32:
        winners = ["", f"Winners per (D, causal), one block per N (FLOAT32_PRECISION_TILES[{args.float32_precision!r}] entries"
                   " by width; the table has one entry for both causal flags, so choosing between them is a reviewed step):",
                   "", "```python"]
    else:
        winners = ["", "Winners per (D, causal), one block per N (TUNED_TILES entries; at N <= SHORT_SEQLEN the "
                   "forward's is a candidate for N's SHORT_FORWARD_TILES bucket, timed with that entry's one_loop, which it keeps):",
                   "", "```python"]
    for n in seqlens:
        winners.append(f"# N = {n}")
        for d in head_dims:
            for causal in causal_flags:
                picks = {k: best[(d, n, causal, k)] for k in KERNELS if (d, n, causal, k) in best}
                if not picks:  # not measured (budget or interrupt)
                    continue
                if float32:
                    text = ", ".join("%s=KernelTiles(%d, %d, %d, %d)" % (k, *r["tiles"]) for k, r in picks.items())
                    winners.append(f"    {width[d]}: dict({text}),  # D = {d}, causal={causal}")
                else:
                    text = ", ".join("KernelTiles(%d, %d, %d, %d)" % picks[k]["tiles"] if k in picks else "None" for k in KERNELS)
                    winners.append(f"    ({width[d]}, {causal}): TileConfig({text}),")
    winners += ["```"]
    lines += winners
    common.write_md_json(out_dir, "tune", "\n".join(lines) + "\n", dict(env=env, rows=rows))
    print("\n".join(winners))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        traceback.print_exc()
        sys.exit(130)
