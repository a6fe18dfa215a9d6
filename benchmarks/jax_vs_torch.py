#!/usr/bin/env python3
"""flashx's JAX frontend against its torch frontend: the same kernels, so the ratio is overhead.

One process, the same random bf16 inputs (B = 16k / N, N = 4k unless --n, H * D = 2048, layout "bhnd") in both
frameworks: forward at D = 64 and D = 128 (causal and not), and the D = 128 causal
backward (JAX: the jitted vjp function applied to dO; torch: autograd.grad of one saved
forward); --cases picks among these, the D = 128 non-causal backward, the D = 256 forward and
the D = 128 forward + backward (fb128, fb128c: JAX's one jitted jax.vjp applied to dO, and, by
device time only, jax.grad of sum(out * dO) beside it; torch: autograd.grad of a fresh forward);
--dkdv-tile forces the backward's dK/dV tile (or a variant of it, --dkdv-set) in both frontends,
--tile-set changes a field of any Gluon tile in place (both frontends), --torch-descriptors
device makes torch's Gluon launches, forward and backward, build their TMA descriptors on the
device as JAX's do (one shared slot; Triton's global scratch from torch's allocator), --route sets both
frontends' TMA forward route for a head dim and --device-route the JAX frontend's own
(GLUON_DEVICE_TMA_ROUTE); --window W (a causal sliding window of W keys) or --docs K (K equal
causal documents: mask_mod with a block mask built once in each frontend) masks every causal
forward case, FLOPs counted on the visible entries as bench_variants.py counts them. Six
timings per case:
- "single", as in the other scripts: triton.testing.do_bench medians for torch (CUDA events
  around each call, L2 flushed before it), one jitted call after another, timed by the wall
  clock around block_until_ready, for JAX: each JAX call pays its dispatch;
- "grouped": GROUP calls on GROUP distinct inputs per timed unit, in both frameworks (one jitted
  function returning GROUP results; torch: GROUP calls in one do_bench call), per call. The
  kernels then run back to back in both, so the ratio is the kernels' plus what each frontend
  adds between them;
- "wall": torch timed exactly as JAX is (common.time_jax's wall clock over back-to-back single
  calls, torch.cuda.synchronize in place of block_until_ready), against JAX's single figure;
- "device": the GPU time of the kernels one call launches, read from CUPTI through
  torch.profiler (which records every kernel of the process, JAX's launches included): no host
  time, no gaps between kernels, so what is left of the ratio is the kernels themselves. Each
  call is profiled in a session of its own, so the GPU idles between calls;
- "device back to back" and "span back to back": 30 calls issued back to back in one profiler
  session; their kernels' summed device time, and the first kernel's start to the last one's
  end, per call: the kernels at the sustained load's clock, and that plus the time between them.
Prints TFLOP/s and jax/torch per case and timing, and each kernel's median device time.
Each timing starts after 300 ms of the call it times, back to back (common.settle; after bf16
matmuls until 2026-12-04, NOTES v0.46).

    python benchmarks/jax_vs_torch.py [--n 1024]   # on the GPU, with jax-triton installed (B = 16384 // N)
    python benchmarks/jax_vs_torch.py --cases bwd128 bwd128c --dkdv-tile dkdv-tma-ts --dkdv-set PRODUCER_REGS=24
    python benchmarks/jax_vs_torch.py --n 1024 --cases fwd256 fwd256c --tile-set d256-tma-trim-ts:PRODUCER_REGS=32
    python benchmarks/jax_vs_torch.py --n 1024 --cases fwd256c --device-route 256c:1024=d256-tma-trim-ts,4096=d256-tma-persist-ovl
    python benchmarks/jax_vs_torch.py --n 16384 --cases fwd128c fwd256c --docs 8
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # torch shares the GPU

CASES = {"fwd64c": (64, True, "fwd"), "fwd64": (64, False, "fwd"), "fwd128c": (128, True, "fwd"),
         "fwd128": (128, False, "fwd"), "bwd128c": (128, True, "bwd"), "bwd128": (128, False, "bwd"),
         "fwd256c": (256, True, "fwd"), "fwd256": (256, False, "fwd"),
         "fb128c": (128, True, "fwd_bwd"), "fb128": (128, False, "fwd_bwd")}
DEFAULT_CASES = ("fwd64c", "fwd64", "fwd128c", "fwd128", "bwd128c")
N, HIDDEN = 4096, 2048  # B = 16384 // N
GROUP = 8


def device_ms(call, wait, label: str, calls: int = 30) -> float:
    """Median over `calls` calls of the GPU time of the kernels one call launches (ms), from
    CUPTI's kernel records through torch.profiler; NaN where it recorded none. Prints the last
    call's kernels (name: microseconds) after `label`."""
    import numpy as np
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    import common  # benchmarks/ (main put it on the path)

    wait(call())  # compiled and warm
    common.settle(load=call, wait=wait)
    per_call, per_kernel = [], {}
    for _ in range(calls):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            wait(call())
        kernels = [(e.name, e.device_time) for e in prof.events() if e.device_type == DeviceType.CUDA]
        if kernels:
            per_call.append(sum(t for _, t in kernels) * 1e-3)
        for name, t in kernels:
            per_kernel.setdefault(name, []).append(t)
    torch.cuda.synchronize()
    print(f"  {label} kernels (median us): " + ", ".join(f"{name[:48]}: {np.median(t):.0f}" for name, t in per_kernel.items()),
          flush=True)
    return float(np.median(per_call)) if per_call else float("nan")


def back_to_back_ms(call, wait, label: str, calls: int = 30) -> tuple:
    """(kernel time, span) per call (ms) of `calls` calls issued back to back inside one
    profiler session, from CUPTI's kernel records: the kernels' summed device time and the
    time from the first kernel's start to the last one's end, each over `calls`. Against
    device_ms (one call a session, the GPU idle between them) this tells a kernel slowed by the
    sustained load's clock (kernel time up) from time between kernels (span above kernel time).
    Prints each kernel's median device time and the median gap between consecutive kernels."""
    import numpy as np
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    import common

    wait(call())
    common.settle(load=call, wait=wait)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            out = call()
        wait(out)
    kernels = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                     if e.device_type == DeviceType.CUDA)
    if not kernels:
        return float("nan"), float("nan")
    per_kernel = {}
    for start, end, name in kernels:
        per_kernel.setdefault(name, []).append(end - start)
    gaps = [b[0] - a[1] for a, b in zip(kernels, kernels[1:])]
    busy = sum(end - start for start, end, _ in kernels)
    span = kernels[-1][1] - kernels[0][0]
    print(f"  {label} back to back ({len(kernels)} kernels, median gap {np.median(gaps) if gaps else 0:.1f} us): "
          + ", ".join(f"{name[:48]}: {np.median(t):.0f} x{len(t)}" for name, t in per_kernel.items()), flush=True)
    return busy * 1e-3 / calls, span * 1e-3 / calls


def int_fields(tile: dict, assignments, flag: str) -> dict:
    """{KEY: int(VALUE)} for each "KEY=VALUE" of `assignments`; every KEY must be a field of `tile`."""
    fields = {}
    for assignment in assignments:
        key, _, value = assignment.partition("=")
        if key not in tile:
            raise SystemExit(f"{flag}: {assignment!r} names no field of the tile")
        fields[key] = int(value)
    return fields


def force_dkdv_tile(name: str, overrides) -> None:
    """Route every kind's D = 128 dK/dV through one tile, in this process only: `name` from
    GLUON_DKDV_TILES, with `overrides` ("KEY=VALUE", integers) changed in a copy of it; "cpasync"
    empties GLUON_DKDV_TMA_ROUTE, so that GLUON_DKDV_ROUTE's cp.async tile runs."""
    from flashx.core import tuning

    if name == "cpasync":
        tuning.GLUON_DKDV_TMA_ROUTE.clear()
    else:
        fields = int_fields(tuning.GLUON_DKDV_TILES[name], overrides, "--dkdv-set")
        tile = f"{name}+{','.join(overrides)}" if fields else name
        tuning.GLUON_DKDV_TILES[tile] = {**tuning.GLUON_DKDV_TILES[name], **fields}
        for key in tuning.GLUON_DKDV_TMA_ROUTE:
            tuning.GLUON_DKDV_TMA_ROUTE[key] = tile
    print("dK/dV TMA route at D = 128:", tuning.GLUON_DKDV_TMA_ROUTE.get((128, "dense")), flush=True)


def set_tile_fields(specs) -> None:
    """Each "TILE:KEY=VALUE" changes an integer field of a Gluon forward or dK/dV tile in place, in
    this process only (before anything compiles, so both frontends build the changed tile)."""
    from flashx.core import tuning

    for spec in specs:
        name, _, assignment = spec.partition(":")
        tile = next((t[name] for t in (tuning.GLUON_FORWARD_TILES, tuning.GLUON_DKDV_TILES) if name in t), None)
        if tile is None:
            raise SystemExit(f"--tile-set: no Gluon forward or dK/dV tile {name!r}")
        tile.update(int_fields(tile, [assignment], f"--tile-set {name}"))
        print(f"tile {name}: {assignment}", flush=True)


def torch_device_descriptors() -> None:
    """In this process only, torch's launches ask the plan for device-built descriptors (as JAX's
    launches do) where they ask for host ones: the backward's directly, the forward's through
    HOST_DESCRIPTORS_FROM_KEYS (torch's launcher takes device ones below it: now every length).
    Triton's launcher takes their global scratch from torch's allocator. What of JAX's kernel
    time is the in-kernel build rather than JAX."""
    import torch

    from flashx import core
    from flashx.core import tuning
    from flashx.torch.attention import _scratch_allocator

    tuning.HOST_DESCRIPTORS_FROM_KEYS = 1 << 62
    backward_calls = core.AttentionPlan.backward_calls

    def on_device(self, *args, **kwargs):
        if kwargs.get("descriptors") == "host":
            kwargs["descriptors"] = "device"
        return backward_calls(self, *args, **kwargs)

    core.AttentionPlan.backward_calls = on_device
    # Not triton.set_allocator: its context variable does not reach autograd's backward thread.
    launch = core.launch.KernelCall.launch
    scratch = _scratch_allocator(torch.device("cuda", torch.cuda.current_device()))  # the forward's own

    def with_scratch(self, outputs, inputs=(), allocator=None):
        return launch(self, outputs, inputs, allocator or scratch)

    core.launch.KernelCall.launch = with_scratch
    print("torch's forward and backward: descriptors built on the device", flush=True)


def set_routes(table_name: str, specs) -> None:
    """Each "DIM[c]:KEYS=TILE[,KEYS=TILE...]" (c: causal) sets plan.`table_name`'s entry for that
    head dim, in this process only ("None" as TILE: no TMA tile from that length on).
    GLUON_TMA_ROUTE is both frontends' forward route, GLUON_DEVICE_TMA_ROUTE the JAX frontend's
    own spans over it."""
    from flashx.core import tuning

    table = getattr(tuning, table_name)
    for spec in specs:
        key, _, spans = spec.partition(":")
        route = tuple((int(n), None if tile == "None" else tile)
                      for n, tile in (span.split("=") for span in spans.split(",")))
        unknown = [tile for _, tile in route if tile is not None and tile not in tuning.GLUON_FORWARD_TILES]
        if unknown:
            raise SystemExit(f"{table_name}: no Gluon forward tile {unknown}")
        table[(int(key.rstrip("c")), key.endswith("c"))] = route
    if specs:
        print(f"{table_name}:", table, flush=True)


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=N, help="sequence length; B = 16384 // N")
    parser.add_argument("--cases", nargs="+", choices=tuple(CASES), default=DEFAULT_CASES)
    parser.add_argument("--dkdv-tile", help='the D = 128 dK/dV tile for every kind: a name of GLUON_DKDV_TILES, '
                        'or "cpasync" (GLUON_DKDV_ROUTE\'s tile); default: flashx\'s routes')
    parser.add_argument("--dkdv-set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="with --dkdv-tile NAME: that tile with these integer fields changed (PRODUCER_REGS=32)")
    parser.add_argument("--tile-set", nargs="+", default=[], metavar="TILE:KEY=VALUE",
                        help="change an integer field of a Gluon forward or dK/dV tile in place (both frontends)")
    parser.add_argument("--route", nargs="+", default=[], metavar="DIM[c]:KEYS=TILE,...",
                        help="both frontends' TMA forward route for a head dim (c: causal), "
                             "e.g. 256c:1024=d256-tma-persist-ovl-ts,4096=d256-tma-persist-ovl")
    parser.add_argument("--device-route", nargs="+", default=[], metavar="DIM[c]:KEYS=TILE,...",
                        help="the JAX frontend's own forward route for a head dim (c: causal), "
                             "e.g. 256c:1024=d256-tma-trim-ts")
    parser.add_argument("--torch-descriptors", choices=("host", "device"), default="host",
                        help="device: torch's Gluon kernels build their TMA descriptors on the device, as JAX's")
    masks = parser.add_mutually_exclusive_group()
    masks.add_argument("--window", type=int, default=None, help="causal cases: a sliding window of this many keys")
    masks.add_argument("--docs", type=int, default=None, help="causal cases: this many equal documents (mask_mod)")
    args = parser.parse_args()
    n = args.n
    if args.docs and n % args.docs:
        parser.error(f"--docs {args.docs} does not divide N = {n}")
    b = max(16384 // n, 1)
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common

    import flashx.jax as fj
    import flashx.torch as ft
    from bench_variants import Case as MaskedCase, document_mask_for  # after flashx (it makes a @triton.jit function)

    set_tile_fields(args.tile_set)
    set_routes("GLUON_TMA_ROUTE", args.route)
    set_routes("GLUON_DEVICE_TMA_ROUTE", args.device_route)
    if args.dkdv_tile:
        force_dkdv_tile(args.dkdv_tile, args.dkdv_set)
    if args.torch_descriptors == "device":
        torch_device_descriptors()

    for d, causal, kind in (CASES[case] for case in args.cases):
        h = HIDDEN // d
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal((b, h, n, d), dtype=np.float32) for _ in range(3 + GROUP)]
        jq, jk, jv, *jdos = (jnp.asarray(a, dtype=jnp.bfloat16) for a in arrays)
        tq, tk, tv, *tdos = (torch.tensor(a, device="cuda", dtype=torch.bfloat16) for a in arrays)
        visible = n * n * (0.5 if causal else 1.0)
        jax_options, torch_options = {}, {}
        if causal and kind == "fwd" and (args.window or args.docs):
            masked = MaskedCase("window" if args.window else "documents", b, h, h, n, d, window=args.window or 0,
                                docs=args.docs or 0)
            visible = masked.visible  # counted as bench_variants.py counts them
            if args.window:
                jax_options = torch_options = dict(window=(args.window - 1, 0))
            else:
                mask_mod = document_mask_for(masked.doc_len)
                jax_options = dict(block_mask=fj.create_block_mask(mask_mod, None, None, n, n, causal=True))
                torch_options = dict(block_mask=ft.create_block_mask(mask_mod, None, None, n, n, causal=True))
        flops = 4.0 * b * h * visible * d * {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}[kind]

        def attend(q, k, v):
            return fj.attention(q, k, v, causal=causal, layout="bhnd", **jax_options)

        if kind == "fwd":
            # The grouped calls take GROUP distinct query arrays (dO's arrays, same shape).
            def torch_call():
                return ft.attention(tq, tk, tv, causal=causal, layout="bhnd", **torch_options)

            jax_ms = common.time_jax(jax.jit(attend), (jq, jk, jv), 200, 1000)
            torch_ms = common.time_torch(torch_call, 25, 200)
            jax_group = common.time_jax(jax.jit(lambda qs, k, v: [attend(q, k, v) for q in qs]), (tuple(jdos), jk, jv), 200, 1000)

            def torch_group_call():
                return [ft.attention(q, tk, tv, causal=causal, layout="bhnd", **torch_options) for q in tdos]
            torch_group = common.time_torch(torch_group_call, 25, 400)
        elif kind == "fwd_bwd":
            def forward_backward(q, k, v, do):
                return jax.vjp(attend, q, k, v)[1](do)

            jax_ms = common.time_jax(jax.jit(forward_backward), (jq, jk, jv, jdos[0]), 200, 1000)
            # Grouped: each call its own queries (dO's arrays), or XLA would compute one forward for all.
            jax_group = common.time_jax(jax.jit(lambda k, v, dos: [forward_backward(do, k, v, do) for do in dos]),
                                        (jk, jv, tuple(jdos)), 200, 1000)
            q, k, v = (t.clone().requires_grad_() for t in (tq, tk, tv))
            group_qs = [t.clone().requires_grad_() for t in tdos]

            def torch_call():
                return torch.autograd.grad(ft.attention(q, k, v, causal=causal, layout="bhnd"), (q, k, v), tdos[0])

            def torch_group_call():
                return [torch.autograd.grad(ft.attention(gq, k, v, causal=causal, layout="bhnd"), (gq, k, v), g)
                        for gq, g in zip(group_qs, tdos)]
            torch_ms = common.time_torch(torch_call, 25, 200)
            torch_group = common.time_torch(torch_group_call, 25, 400)
        else:
            _, vjp_fn = jax.jit(lambda q, k, v: jax.vjp(attend, q, k, v))(jq, jk, jv)
            jax_ms = common.time_jax(jax.jit(lambda fn, ct: fn(ct)), (vjp_fn, jdos[0]), 200, 1000)
            jax_group = common.time_jax(jax.jit(lambda fn, cts: [fn(ct) for ct in cts]), (vjp_fn, tuple(jdos)), 200, 1000)
            q, k, v = (t.clone().requires_grad_() for t in (tq, tk, tv))
            out = ft.attention(q, k, v, causal=causal, layout="bhnd")
            def torch_call():
                return torch.autograd.grad(out, (q, k, v), tdos[0], retain_graph=True)

            def torch_group_call():
                return [torch.autograd.grad(out, (q, k, v), g, retain_graph=True) for g in tdos]
            torch_ms = common.time_torch(torch_call, 25, 200)
            torch_group = common.time_torch(torch_group_call, 25, 400)
        common.settle(load=torch_call)
        torch_wall = common.time_wall(torch_call, lambda _: torch.cuda.synchronize(), 200, 1000)
        if kind == "fwd":
            jitted = jax.jit(attend)
            jitted_args = (jq, jk, jv)
            jax_device = device_ms(lambda: jitted(*jitted_args), jax.block_until_ready, "jax")
        elif kind == "fwd_bwd":
            jitted = jax.jit(forward_backward)
            jitted_args = (jq, jk, jv, jdos[0])
            jax_device = device_ms(lambda: jitted(*jitted_args), jax.block_until_ready, "jax")

            def loss(q, k, v, do):
                return jnp.sum(attend(q, k, v).astype(jnp.float32) * do.astype(jnp.float32))

            grad_of_sum = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
            sum_device = device_ms(lambda: grad_of_sum(*jitted_args), jax.block_until_ready, "jax grad of sum")
            print(f"fwd_bwd D{d} {'causal' if causal else 'non-causal'} device, jax.grad of sum(out * dO): "
                  f"{flops / sum_device * 1e-9:.1f} TFLOP/s ({sum_device * 1e3:.1f} us)", flush=True)
        else:
            jitted = jax.jit(lambda fn, ct: fn(ct))
            jitted_args = (vjp_fn, jdos[0])
            jax_device = device_ms(lambda: jitted(*jitted_args), jax.block_until_ready, "jax")
        torch_device = device_ms(torch_call, lambda _: torch.cuda.synchronize(), "torch")
        jax_b2b, jax_span = back_to_back_ms(lambda: jitted(*jitted_args), jax.block_until_ready, "jax")
        torch_b2b, torch_span = back_to_back_ms(torch_call, lambda _: torch.cuda.synchronize(), "torch")
        jax_group, torch_group = jax_group / GROUP, torch_group / GROUP
        mask = f" window {args.window}" if "window" in torch_options else f" {args.docs} docs" if torch_options else ""
        name = f"{kind} D{d} {'causal' if causal else 'non-causal'}{mask}"
        for timing, jms, tms in (("single", jax_ms, torch_ms), (f"grouped x{GROUP}", jax_group, torch_group),
                                 ("wall", jax_ms, torch_wall), ("device", jax_device, torch_device),
                                 ("device back to back", jax_b2b, torch_b2b), ("span back to back", jax_span, torch_span)):
            print(f"{name} {timing}: jax {flops / jms * 1e-9:.1f}  torch {flops / tms * 1e-9:.1f}  "
                  f"jax/torch {tms / jms:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
