#!/usr/bin/env python3
"""Where a do_bench figure goes for one attention call: the host's time, the GPU's idle time
before the kernel, and the kernel itself.

triton.testing.do_bench (the suite's torch timer, as the issue prescribes) flushes L2 with a
256 MB write before each call and records a CUDA event before and after the call, without waiting
between calls: the host runs ahead while a call's host work (frontend, launcher) takes less than
the GPU's flush and kernel, and where it takes more the GPU idles between the start event and the
kernel and the idle time is counted (measured on the H200: NOTES v0.35 item 4). Per case and system (flashx's torch frontend, SDPA
FA2, SDPA cuDNN; inputs (B, H, N, D), bf16, flashx with layout="bhnd" as in bench_forward.py):
- host us: host time a call, 200 calls enqueued without waiting (the GPU lags behind, so nothing
  blocks);
- do_bench: triton.testing.do_bench's median;
- graph: do_bench of one CUDA graph replay of the call (host time near zero; L2 flushed alike);
- b2b: calls back to back, the wall clock over each sample (common.time_torch_back_to_back);
- traced: do_bench (rep 40 ms) under torch.profiler, of the call and of its graph's replay:
  do_bench's own figure, the median time from the end of each flush (a fill kernel) to the start
  of the next kernel (the table's flush-to-kernel column: the direct call's), and each kernel's
  count and median device time.
--delays: instead, do_bench of each system with a host busy-wait added before each call, to see
how much host time do_bench counts.

    python benchmarks/dobench_gap.py [--cases 4,4096,32,64,1 64,256,16,128,1] [--profile]
    python benchmarks/dobench_gap.py --delays 0 100 300 600   # do_bench with host time added
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
import common  # noqa: E402

DEFAULT_CASES = ((4, 4096, 32, 64, True), (64, 256, 16, 128, True), (4, 4096, 32, 64, False), (4, 4096, 16, 128, True))


def host_us(fn, torch, calls: int = 200) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def delayed(fn, us: float):
    """fn after a host busy-wait of `us` microseconds (the GPU sees only a later launch)."""
    def call():
        end = time.perf_counter() + us * 1e-6
        while time.perf_counter() < end:
            pass
        return fn()
    return call


def graph_of(fn, torch):
    """A CUDA graph of one call of fn, or None where the call cannot be captured."""
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return graph
    except Exception as err:  # noqa: BLE001 (reported, the case goes on)
        print(f"    graph capture failed: {type(err).__name__}: {err}")
        return None


def traced(bench, torch) -> tuple:
    """Runs bench() (a do_bench call) under torch.profiler: (bench's result in ms, median us from
    the end of each L2 flush (a fill kernel) to the start of the next kernel, {kernel name: (count,
    median device us)})."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        result = bench()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA and e.time_range.elapsed_us() > 0),
                     key=lambda e: e.time_range.start)
    gaps = [after.time_range.start - before.time_range.end for before, after in zip(kernels, kernels[1:])
            if "fill" in before.name.lower()]
    durations: dict = {}
    for k in kernels:
        durations.setdefault(k.name, []).append(k.time_range.elapsed_us())
    table = {name: (len(us), statistics.median(us)) for name, us in durations.items()}
    return result, (statistics.median(gaps) if gaps else float("nan")), table


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", type=common.parse_shape, default=list(DEFAULT_CASES),
                   metavar="B,N,H,D,causal", help="shapes, causal 1 or 0")
    p.add_argument("--rep-ms", type=float, default=200.0)
    p.add_argument("--delays", nargs="*", type=float, default=[],
                   help="host busy-waits (us) added to each call: do_bench of each system so delayed, a row per delay")
    p.add_argument("--profile", action="store_true", help="also print cProfile's 25 costliest functions (own time) over 200 flashx calls a case")
    args = p.parse_args()

    import torch
    from torch.nn.attention import SDPBackend
    from triton.testing import do_bench

    import flashx.torch

    rows = []
    for b, n, h, d, causal in args.cases:
        text = f"{b},{n},{h},{d},{int(causal)}"
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * b * h * n * n * d / (2 if causal else 1)

        systems = {"flashx": lambda: flashx.torch.attention(q, k, v, causal=causal, layout="bhnd"),
                   "FA2": common.sdpa_call(SDPBackend.FLASH_ATTENTION, q, k, v, is_causal=causal),
                   "cuDNN": common.sdpa_call(SDPBackend.CUDNN_ATTENTION, q, k, v, is_causal=causal)}
        for delay in args.delays:
            for name, fn in systems.items():
                common.settle()
                ms = do_bench(delayed(fn, delay), warmup=25, rep=args.rep_ms, return_mode="median")
                print(f"  host delay {delay:6.0f} us  {text}  {name:7s} do_bench {ms * 1e3:8.1f} us", flush=True)
        if args.delays:
            continue
        for name, fn in systems.items():
            fn()
            torch.cuda.synchronize()
            host = host_us(fn, torch)
            if args.profile and name == "flashx":
                import cProfile
                import pstats

                profiler = cProfile.Profile()
                profiler.runcall(host_us, fn, torch)
                print(f"== cProfile, 200 flashx calls, {text}")
                pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
            common.settle()
            bench = do_bench(fn, warmup=25, rep=args.rep_ms, return_mode="median")
            graph = graph_of(fn, torch)
            common.settle()
            graphed = do_bench(graph.replay, warmup=25, rep=args.rep_ms, return_mode="median") if graph else float("nan")
            b2b = common.time_torch_back_to_back(fn, 25, args.rep_ms)
            for label, call in (("direct", fn), ("graph", graph.replay if graph else None)):
                if call is None:
                    continue
                traced_ms, gap, table = traced(lambda: do_bench(call, warmup=25, rep=40, return_mode="median"), torch)
                print(f"    traced do_bench, {name} {label}: {traced_ms * 1e3:.1f} us; flush end to next kernel {gap:.1f} us")
                for kernel, (count, us) in sorted(table.items(), key=lambda kv: -kv[1][0] * kv[1][1])[:4]:
                    print(f"      {count:5d} x {us:8.1f} us  {kernel[:110]}")
                if label == "direct":
                    idle = gap
            row = (text, name, host, bench * 1e3, graphed * 1e3, b2b * 1e3, idle, flops / bench / 1e9)
            rows.append(row)
            print("  ".join(str(x) if isinstance(x, str) else f"{x:.1f}" for x in row), flush=True)
        del q, k, v
        torch.cuda.empty_cache()

    print()
    print("| case B,N,H,D,causal | system | host us | do_bench us | graph us | b2b us | flush-to-kernel us | do_bench TFLOP/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(str(x) if isinstance(x, str) else f"{x:.1f}" for x in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
