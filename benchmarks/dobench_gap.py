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
--breakdown: instead, the host time a call of each step of flashx's torch forward takes on its
own (the steps _forward_impl makes, with the descriptors it takes, each timed over 200 calls,
median of 7; shapes with one batch and two heads, so that the GPU keeps up and no launch waits on
a full queue), beside SDPA's calls, a pure-Python calibration loop and Triton's launch of a
one-pointer kernel; and each step's host time while the GPU runs a sleep kernel queued before it,
which shows a step that waits for the GPU.
--loop: instead, do_bench's timed loop replayed with the host's clock read between its steps and
one more event before each flush, so that each iteration's host time can be set beside the GPU's
(medians of the call as do_bench times it, the flush, the GPU's idle time before each flush, both
iterations, the host's steps, and the share of iterations the host took longer than the GPU),
after one shorter pass of the same loop that is not reported.
--flush-kinds: instead, do_bench of each system as it stands (its L2 flush writes 256 MB of
zeros, which leave L2 full of dirty lines that the call's own reads must first write back to
DRAM) beside do_bench with a flush that reads the same 256 MB (L2 left holding clean lines, which
are dropped without a write), and calls back to back; `--rounds` rounds, the systems alternated.
--jax-init: instead, flashx's call with TMA descriptors built on the host and on the device (the
plan's HOST_DESCRIPTORS_FROM_KEYS set around the call, which the plan reads at each call) beside
FA2: host us a call and do_bench (settled, the median of `--rounds`), first with torch alone in
the process, then again after JAX is initialized in it, as the suite's processes have it.

    python benchmarks/dobench_gap.py [--cases 4,4096,32,64,1 64,256,16,128,1] [--profile]
    python benchmarks/dobench_gap.py --delays 0 100 300 600   # do_bench with host time added
    python benchmarks/dobench_gap.py --breakdown --cases 64,256,16,128,1   # host time by step
    python benchmarks/dobench_gap.py --loop --cases 64,256,16,128,1   # do_bench's loop, host beside GPU
    python benchmarks/dobench_gap.py --flush-kinds --cases 64,256,16,128,1   # dirty vs clean L2 flush
    python benchmarks/dobench_gap.py --jax-init --cases 64,512,16,128,1   # JAX's presence, host / device descriptors
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
import common  # noqa: E402

DEFAULT_CASES = ((4, 4096, 32, 64, True), (64, 256, 16, 128, True), (4, 4096, 32, 64, False), (4, 4096, 16, 128, True))


def host_us(fn, torch, calls: int = 200, sleep_cycles: int = 0) -> float:
    """Host time a call of fn over `calls` calls, started on an idle GPU, or (sleep_cycles) while
    the GPU still runs a sleep kernel of that many cycles queued before."""
    torch.cuda.synchronize()
    if sleep_cycles:
        torch.cuda._sleep(sleep_cycles)
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


def per_call_us(fn, torch, calls: int = 200, rounds: int = 7) -> float:
    """Median over `rounds` of the host time a call of fn, `calls` calls a round."""
    fn()
    return statistics.median(host_us(fn, torch, calls) for _ in range(rounds))


def busy_us(fn, torch) -> float:
    """Host time a call of fn, 20 calls, while the GPU still runs a ~10 ms sleep kernel queued
    before: a call that waits for the GPU (a synchronizing driver call) takes ~0.5 ms."""
    fn()
    return host_us(fn, torch, calls=20, sleep_cycles=20_000_000)


def breakdown(case: tuple, torch) -> list:
    """(step, host us a call, host us a call with the GPU busy) of flashx's torch forward at
    (1, N, 2, D) of `case`, step by step (see --breakdown)."""
    import triton
    import triton.language as tl
    from torch.nn.attention import SDPBackend

    import flashx.torch  # noqa: F401 (the module below, whose name its function shadows)

    fta = sys.modules["flashx.torch.attention"]

    _, n, _, d, causal = case
    q, k, v = (torch.randn(1, 2, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    call = lambda: fta.attention(q, k, v, causal=causal, layout="bhnd")  # noqa: E731
    call()
    plan = fta._DENSE_PLANS[fta._dense_key(q, k, v, causal, None, "bhnd", None, None)]
    placeholder = fta._placeholder(q)
    out = torch.empty(plan.out_shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(plan.lse_shape, dtype=torch.float32, device=q.device)
    arrays = dict(zip(fta._OPTIONAL_INPUTS, fta._NO_TENSORS), Q=q, K=k, V=v, BIAS=None)
    descriptors = plan.either_descriptors  # as _forward_impl takes them
    gluon = plan.gluon_forward_tile(descriptors) is not None

    def forward_call():
        (kernel_call,) = plan.forward_calls(arrays, placeholder, gluon=gluon, descriptors=descriptors)  # one launch (no key split)
        return kernel_call, plan.launch_outputs(kernel_call, dict(O=out, LSE=lse), placeholder)

    kernel_call, bound = forward_call()
    allocator = fta._scratch_allocator(q.device) if kernel_call.constexprs.get("DEVICE_DESCRIPTORS") else None
    kernel_call.launch(bound, allocator=allocator)
    key_arrays = (*kernel_call.arrays, *bound)
    runner = kernel_call.runners.get(kernel_call.runners.key(key_arrays))
    args = (*kernel_call.args, *bound, *kernel_call.constexprs.values())
    placeholders_as_ints = tuple(a.data_ptr() if a is placeholder else a for a in args)
    as_ints = tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args)

    @triton.jit
    def one_pointer(X, n: tl.constexpr):
        tl.store(X + tl.arange(0, n), tl.zeros((n,), tl.int32))

    one_pointer[(1,)](placeholder, 1)
    tiny = one_pointer[(1,)]

    def with_allocator(fn):
        if allocator is None:
            return fn
        return lambda: triton.set_allocator(allocator) or fn()  # this process only times

    def python_loop():
        total = 0
        for i in range(100):
            total += {i: i}.get(i, 0)
        return total

    def empties():
        torch.empty(plan.out_shape, dtype=q.dtype, device=q.device)
        torch.empty(plan.lse_shape, dtype=torch.float32, device=q.device)

    def device_context():
        with fta._on_device(q):
            pass

    flash = common.sdpa_call(SDPBackend.FLASH_ATTENTION, q, k, v, is_causal=causal)
    with torch.nn.attention.sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        bare_flash = per_call_us(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal), torch)
    steps = [
        ("python calibration loop (100 dict builds)", python_loop),
        ("flashx.torch.attention, whole call", call),
        ("  _run_eager(plan, ...)", lambda: fta._run_eager(plan, q, k, v, None, fta._NO_TENSORS, False)),
        ("  _forward_impl(plan, ...)", lambda: fta._forward_impl(plan, q, k, v, None, fta._NO_TENSORS)),
        ("  torch.empty of O and LSE", empties),
        ("  q.new_empty of O and LSE", lambda: (q.new_empty(plan.out_shape), q.new_empty(plan.lse_shape, dtype=torch.float32))),
        ("  torch.cuda.current_device()", torch.cuda.current_device),
        ("  torch.cuda.device(q.device) entered and left", device_context),
        ("  _dense_key", lambda: fta._dense_key(q, k, v, causal, None, "bhnd", None, None)),
        ("  plan.forward_calls + launch_outputs", forward_call),
        ("  CompiledRunners.key", lambda: kernel_call.runners.key(key_arrays)),
        ("  KernelCall.launch (key, runner, launch)", lambda: kernel_call.launch(bound, allocator=allocator)),
        ("  Triton runner (launch)", with_allocator(lambda: runner(*args))),
        ("  Triton runner, placeholders as ints", with_allocator(lambda: runner(*placeholders_as_ints))),
        ("  Triton runner, every array as an int", with_allocator(lambda: runner(*as_ints))),
        ("cuDNN (SDPA), its backend entered a call", common.sdpa_call(SDPBackend.CUDNN_ATTENTION, q, k, v, is_causal=causal)),
        ("Triton runner of a one-pointer kernel", lambda: tiny(placeholder, 1)),
        ("SDPA FA2, its backend entered a call", flash),
    ]
    rows = [(name, per_call_us(fn, torch), busy_us(fn, torch)) for name, fn in steps]
    rows.append(("SDPA FA2, inside its backend", bare_flash, float("nan")))
    return rows


def loop_timeline(fn, torch, rep_ms: float) -> dict:
    """do_bench's timed loop (L2 flush, start event, fn, end event) over ~rep_ms, with host clock
    readings between its steps and one more event before each flush: medians (us) of the call as
    do_bench times it, the flush on the GPU, the GPU's idle time from one call's end to the next
    flush, the host's time an iteration and each of its steps, and the share of iterations whose
    host time exceeds the GPU's (then the GPU waits for the host)."""
    from triton import runtime

    driver = runtime.driver.active
    cache = driver.get_empty_cache_for_benchmark()
    fn()
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(5):
        driver.clear_cache(cache)
        fn()
    end.record()
    torch.cuda.synchronize()
    count = max(10, int(rep_ms / (begin.elapsed_time(end) / 5)))
    events = [[torch.cuda.Event(enable_timing=True) for _ in range(3)] for _ in range(count)]
    clock = [[0.0] * 5 for _ in range(count)]
    for _ in range(count // 4):  # warm-up, as do_bench's
        fn()
    for i in range(count):
        stamps, (before, start, stop) = clock[i], events[i]
        stamps[0] = time.perf_counter()
        before.record()
        driver.clear_cache(cache)
        stamps[1] = time.perf_counter()
        start.record()
        stamps[2] = time.perf_counter()
        fn()
        stamps[3] = time.perf_counter()
        stop.record()
        stamps[4] = time.perf_counter()
    torch.cuda.synchronize()
    med = lambda xs: statistics.median(xs)  # noqa: E731
    call = [start.elapsed_time(stop) * 1e3 for _, start, stop in events]
    flush = [before.elapsed_time(start) * 1e3 for before, start, _ in events]
    idle = [events[i][2].elapsed_time(events[i + 1][0]) * 1e3 for i in range(count - 1)]
    host = [(clock[i + 1][0] - clock[i][0]) * 1e6 for i in range(count - 1)]
    gpu = [events[i][0].elapsed_time(events[i + 1][0]) * 1e3 for i in range(count - 1)]
    step = lambda a, b: med([(c[b] - c[a]) * 1e6 for c in clock])  # noqa: E731
    return dict(iterations=count, call=med(call), flush=med(flush), gpu_idle=med(idle), host_iteration=med(host),
                gpu_iteration=med(gpu), host_flush=step(0, 1), host_start_event=step(1, 2), host_call=step(2, 3),
                host_end_event=step(3, 4), host_bound_share=sum(h > g for h, g in zip(host, gpu)) / len(host))


def graph_of(fn):
    """A CUDA graph of one call of fn, or None where the call cannot be captured."""
    try:
        return common.cuda_graph([fn], warmups=3)
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


@contextlib.contextmanager
def reading_flush(torch, driver=None):
    """do_bench, inside, flushes L2 by reading its 256 MB buffer instead of zeroing it: the same
    bytes pass through L2, but what they leave there is clean (--flush-kinds). driver: Triton's
    active one unless given."""
    if driver is None:
        import triton

        driver = triton.runtime.driver.active

    def clear_cache(cache):
        return torch.amax(cache)  # reads every byte, writes one element elsewhere

    driver.clear_cache = clear_cache  # shadows the class's cache.zero_()
    try:
        yield
    finally:
        del driver.clear_cache


def flush_kinds(text: str, systems: dict, flops: float, torch, rep_ms: float, rounds: int) -> None:
    """Print a row per round and system: do_bench with its own (writing) flush, with a reading
    flush, and back to back, us; then the medians and each system's time over FA2's by each."""
    times: dict = {name: ([], [], []) for name in systems}
    for r in range(rounds):
        for name, fn in systems.items():
            fn()
            writing = common.time_torch(fn, 25, rep_ms) * 1e3
            with reading_flush(torch):
                reading = common.time_torch(fn, 25, rep_ms) * 1e3
            b2b = common.time_torch_back_to_back(fn, 25, rep_ms) * 1e3
            for column, us in zip(times[name], (writing, reading, b2b)):
                column.append(us)
            print(f"| {text} | {name} | {r + 1} | {writing:.1f} | {reading:.1f} | {b2b:.1f} |", flush=True)
    medians = {name: [statistics.median(c) for c in columns] for name, columns in times.items()}
    for name, (writing, reading, b2b) in medians.items():
        over = [fa2 / us for us, fa2 in zip((writing, reading, b2b), medians["FA2"])]
        print(f"| {text} | {name} | median | {writing:.1f} | {reading:.1f} | {b2b:.1f} | "
              f"{flops / writing * 1e-6:.1f} / {flops / reading * 1e-6:.1f} TFLOP/s | "
              + " / ".join(f"{x:.2f}x" for x in over) + " FA2 |", flush=True)


@contextlib.contextmanager
def descriptors_from(keys: int):
    """Torch's launches take host-built TMA descriptors from `keys` keys (tuning.HOST_DESCRIPTORS_FROM_KEYS)
    inside the block; the value before is back after it."""
    from flashx.core import tuning

    before = tuning.HOST_DESCRIPTORS_FROM_KEYS
    tuning.HOST_DESCRIPTORS_FROM_KEYS = keys
    try:
        yield
    finally:
        tuning.HOST_DESCRIPTORS_FROM_KEYS = before


def jax_presence(cases, torch, rep_ms: float) -> None:
    """--jax-init: each case's flashx call with host and with device descriptors (where the route has
    a TMA tile for them), and FA2: host us a call and do_bench (common.time_torch), with torch alone
    in the process, then with JAX initialized in it."""
    from torch.nn.attention import SDPBackend

    import flashx.torch

    print("| case | process | system | host us | do_bench us | FA2 / system |\n|---|---|---|---:|---:|---:|")
    inputs = [(case, [torch.randn(case[0], case[2], case[1], case[3], device="cuda", dtype=torch.bfloat16)
                      for _ in range(3)]) for case in cases]
    for phase in ("torch only", "JAX initialized"):
        if phase == "JAX initialized":
            import jax.numpy as jnp

            x = jnp.ones((1024, 1024), jnp.float32)
            (x @ x).block_until_ready()  # XLA's client, its streams and threads, up
        for (b, n, h, d, causal), (q, k, v) in inputs:
            flashx_call = functools.partial(flashx.torch.attention, q, k, v, causal=causal, layout="bhnd")
            # (system, call, HOST_DESCRIPTORS_FROM_KEYS while it is timed)
            systems = (("flashx, host descriptors", flashx_call, 0), ("flashx, device descriptors", flashx_call, 1 << 30),
                       ("FA2", common.sdpa_call(SDPBackend.FLASH_ATTENTION, q, k, v, is_causal=causal), None))
            times = {}
            for name, fn, keys in systems:
                with descriptors_from(keys) if keys is not None else contextlib.nullcontext():
                    fn()
                    torch.cuda.synchronize()
                    times[name] = (host_us(fn, torch), common.time_torch(fn, 25, rep_ms) * 1e3)
            for name, (host, bench) in times.items():
                print(f"| {b},{n},{h},{d},{int(causal)} | {phase} | {name} | {host:.1f} | {bench:.1f} | "
                      f"{times['FA2'][1] / bench:.3f} |", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", type=common.parse_shape, default=list(DEFAULT_CASES),
                   metavar="B,N,H,D,causal", help="shapes, causal 1 or 0")
    p.add_argument("--rep-ms", type=float, default=200.0)
    p.add_argument("--delays", nargs="*", type=float, default=[],
                   help="host busy-waits (us) added to each call: do_bench of each system so delayed, a row per delay")
    p.add_argument("--breakdown", action="store_true", help="the host time of each step of a flashx call (see above)")
    p.add_argument("--loop", action="store_true", help="do_bench's timed loop with host and GPU timelines (see above)")
    p.add_argument("--flush-kinds", action="store_true",
                   help="do_bench with its writing L2 flush beside a reading one, and back to back (see above)")
    p.add_argument("--jax-init", action="store_true",
                   help="host and device descriptors beside FA2, before and after JAX is initialized (see above)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of --flush-kinds; --jax-init's do_bench: the median of this many")
    p.add_argument("--profile", action="store_true", help="also print cProfile's 25 costliest functions (own time) over 200 flashx calls a case")
    args = p.parse_args()
    common.set_rounds(1)  # each figure one do_bench (common.time_torch): what this script accounts for

    import torch
    from torch.nn.attention import SDPBackend
    from triton.testing import do_bench

    import flashx.torch

    if args.jax_init:
        common.set_rounds(args.rounds)
        jax_presence(args.cases, torch, args.rep_ms)
        return 0
    if args.breakdown:
        for case in args.cases:
            print(f"\n| host us a call, (1, {case[1]}, 2, {case[3]}) causal {int(case[4])} | us | with the GPU busy |\n"
                  "|---|---:|---:|")
            for name, us, busy in breakdown(case, torch):
                print(f"| {name} | {us:.1f} | {busy:.1f} |", flush=True)
        return 0
    rows = []
    if args.flush_kinds:
        print("| case | system | round | do_bench (writing flush) | do_bench (reading flush) | back to back "
              "| TFLOP/s writing / reading | over FA2: writing / reading / b2b |\n|---|---|---|---:|---:|---:|---|---|")
    if args.loop:
        print("| case | system | iterations | call (do_bench) | flush | GPU idle | GPU iteration | host iteration "
              "| host: flush | start event | call | end event | host-bound share |\n|---|---|" + "---:|" * 11)
    for b, n, h, d, causal in args.cases:
        text = f"{b},{n},{h},{d},{int(causal)}"
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * b * h * n * n * d / (2 if causal else 1)

        systems = {"flashx": lambda: flashx.torch.attention(q, k, v, causal=causal, layout="bhnd"),
                   "FA2": common.sdpa_call(SDPBackend.FLASH_ATTENTION, q, k, v, is_causal=causal),
                   "cuDNN": common.sdpa_call(SDPBackend.CUDNN_ATTENTION, q, k, v, is_causal=causal)}
        if args.flush_kinds:
            flush_kinds(text, systems, flops, torch, args.rep_ms, args.rounds)
            del q, k, v
            torch.cuda.empty_cache()
            continue
        for delay in args.delays:
            for name, fn in systems.items():
                ms = common.time_torch(delayed(fn, delay), 25, args.rep_ms)
                print(f"  host delay {delay:6.0f} us  {text}  {name:7s} do_bench {ms * 1e3:8.1f} us", flush=True)
        if args.delays:
            continue
        if args.loop:
            for name, fn in systems.items():
                # A first pass discarded: in session 47's run the process's first system ran its
                # estimate calls slowly (46 iterations where later cases ran 185-460; NOTES v0.40).
                loop_timeline(fn, torch, min(args.rep_ms, 20.0))
                common.settle()
                t = loop_timeline(fn, torch, args.rep_ms)
                print(f"| {text} | {name} | {t['iterations']} | " + " | ".join(
                    f"{t[key]:.1f}" for key in ("call", "flush", "gpu_idle", "gpu_iteration", "host_iteration", "host_flush",
                                                "host_start_event", "host_call", "host_end_event"))
                      + f" | {t['host_bound_share']:.2f} |", flush=True)
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
            bench = common.time_torch(fn, 25, args.rep_ms)
            graph = graph_of(fn)
            graphed = common.time_torch(graph.replay, 25, args.rep_ms) if graph else float("nan")
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

    if args.flush_kinds:
        return 0
    print()
    print("| case B,N,H,D,causal | system | host us | do_bench us | graph us | b2b us | flush-to-kernel us | do_bench TFLOP/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(str(x) if isinstance(x, str) else f"{x:.1f}" for x in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
