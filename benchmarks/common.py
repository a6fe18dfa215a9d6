"""Helpers shared by flashx's benchmark scripts (bench_forward.py, bench_backward.py, bench_variants.py,
bench_compile.py).

Importing this module does no work: no framework is imported until a function needs it. It
only sets XLA_PYTHON_CLIENT_PREALLOCATE=false (JAX would otherwise take most of the GPU's memory
from torch, which shares the process), which must happen before JAX is imported.

Conventions every script follows:
- a system that fails on a case is shown as "-" and its reason is logged and listed under the table;
- timing: torch with triton.testing.do_bench (median), JAX jitted, calls back to back on the same
  random inputs, block_until_ready on the last (median);
- results: DIR/<name>.md (header with date, GPU, driver, versions), DIR/<name>.json, maybe a .png
  (write_report, which prints the table last);
- --device cpu is a debug mode (Triton's interpreter, tiny shapes, wall-clock timing): it runs
  the code paths without a GPU; its numbers mean nothing.
"""
from __future__ import annotations

import datetime
import functools
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

# JAX preallocates most of the GPU's memory by default; torch shares these processes.
os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "h200"
DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
# Relative Frobenius error above which a flashx result is flagged (vs a peer in the same dtype).
ERR_LIMITS = {"bf16": 2e-2, "fp16": 5e-3}
GRAD_ERR_LIMITS = {"bf16": 5e-2, "fp16": 1e-2}


# The dense sweep of bench_forward.py and bench_backward.py.
TOKENS = 16 * 1024  # B * N
HIDDEN = 2048  # H * D
HEAD_DIMS = (64, 128, 256)
SEQLENS = (1024, 4096, 16384)
# --device cpu (debug): tiny sizes Triton's interpreter gets through quickly.
CPU_TOKENS, CPU_HIDDEN = 64, 32

# The systems of bench_forward.py and bench_backward.py: name -> label, flashx first, peers after.
DENSE_SYSTEMS = {
    "flashx_torch": "flashx (torch)",
    "flashx_jax": "flashx (jax)",
    "sdpa_flash": "SDPA FA2",
    "sdpa_cudnn": "SDPA cuDNN",
    "flex": "FlexAttention",
    "jax_cudnn": "jax.nn cuDNN",
    "pallas": "Pallas GPU",
}
JAX_SYSTEMS = ("flashx_jax", "jax_cudnn", "pallas")
# (system, peer, label): the system's TFLOP/s over the peer's.
DENSE_RATIOS = (
    ("flashx_torch", "sdpa_flash", "flashx/FA2"),
    ("flashx_torch", "sdpa_cudnn", "flashx/cuDNN"),
    ("flashx_torch", "flex", "flashx/Flex"),
    ("flashx_jax", "flashx_torch", "flashx jax/torch"),
    ("flashx_jax", "jax_cudnn", "flashx jax/jax cuDNN"),
    ("flashx_jax", "pallas", "flashx jax/Pallas"),
)


@dataclass(frozen=True)
class Shape:
    """One dense case: q, k, v of shape (B, H, N, D), Nq = Nkv = N."""

    batch: int
    heads: int
    seqlen: int  # Nq = Nkv
    head_dim: int
    causal: bool

    @property
    def flops(self) -> float:
        """Forward FLOPs: 4 * B * H * N * N * D, halved when causal."""
        f = 4.0 * self.batch * self.heads * self.seqlen * self.seqlen * self.head_dim
        return f / 2 if self.causal else f

    @property
    def name(self) -> str:
        return f"D={self.head_dim} N={self.seqlen} B={self.batch} H={self.heads} causal={self.causal}"


def parse_shape(text: str) -> tuple:
    """B,N,H,D,causal -> (B, N, H, D, causal): one shape on a probe's command line (an argparse type)."""
    import argparse

    try:
        b, n, h, d, causal = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected B,N,H,D,causal (five integers)")
    return b, n, h, d, bool(causal)


def shapes_for(head_dims, seqlens, causal_flags, tokens: int = TOKENS, hidden: int = HIDDEN) -> list:
    """B = tokens / N and H = hidden / D for every (D, N, causal)."""
    out = []
    for d in head_dims:
        if hidden % d:
            raise SystemExit(f"D={d} does not divide H*D={hidden}")
        for n in seqlens:
            if tokens % n:
                raise SystemExit(f"N={n} does not divide B*N={tokens}")
            for causal in causal_flags:
                out.append(Shape(batch=tokens // n, heads=hidden // d, seqlen=n, head_dim=d, causal=causal))
    return out


@dataclass
class Result:
    """One measurement of one system: time and throughput, or why there is none."""

    ms: Optional[float] = None
    tflops: Optional[float] = None
    err: Optional[float] = None  # relative error against the reference (SDPA FA2's, else cuDNN's)
    reason: Optional[str] = None  # why it failed or was skipped, if it was
    # flashx's torch frontend only: ms a call back to back by the wall clock (time_back_to_back_in_turns),
    # the method JAX's timing shares, for a like-for-like JAX / torch ratio (ratio_back_to_back).
    wall_ms: Optional[float] = None

    def to_json(self) -> dict:
        return {"tflops": self.tflops, "ms": self.ms, "err": self.err, "reason": self.reason, "wall_ms": self.wall_ms}


def measured(ms: float, flops: float) -> Result:
    return Result(ms=ms, tflops=flops / (ms * 1e-3) / 1e12)


# ----------------------------------------------------------------------------------------------
# Environment


def run_quiet(cmd) -> Optional[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True).stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def version(module_name: str) -> str:
    try:
        from importlib.metadata import version as _v

        return _v(module_name)
    except Exception:  # noqa: BLE001
        return "not installed"


def source_fingerprint(package_dir: Path) -> str:
    """12 hex digits of a sha256 over the package's .py files (relative path and bytes, sorted):
    names the code a run timed even where git cannot (a copied tree, stale git metadata).
    The same for a commit: `git archive REV src | tar -x -C DIR`, then this on DIR/src/flashx."""
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def environment(torch, device: str = "cuda") -> dict:
    """Date, GPU, driver and versions, for the reports' headers."""
    import flashx

    package_dir = Path(flashx.__file__).resolve().parent
    if package_dir == REPO_ROOT / "src" / "flashx":
        commit = run_quiet(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"])
        if commit and run_quiet(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"]):
            commit += " (modified)"
    else:  # a tree outside this checkout (an A/B copy): its commit is not the checkout's
        commit = f"imported from {package_dir.parent}"
    source = f"source {source_fingerprint(package_dir)}"

    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        gpu = f"{props.name} ({props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB)"
        driver = run_quiet(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        driver = driver.splitlines()[0] if driver else "unknown"
    else:
        gpu, driver = f"CPU ({platform.processor() or platform.machine()}; debug run, Triton interpreter)", "none"
    cudnn = None
    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:  # noqa: BLE001
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": gpu,
        "driver": driver,
        "cuda": torch.version.cuda or "unknown",
        "cudnn": str(cudnn) if cudnn else "unknown",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": version("triton"),
        "jax": version("jax"),
        "jaxlib": version("jaxlib"),
        "jax-triton": version("jax-triton"),
        "flashx": f"{flashx.__version__}" + (f" @ {commit}" if commit else "") + f", {source}",
    }


def environment_line(env: dict) -> str:
    """GPU, driver and versions in one line: how a script's log starts (the report's header has more)."""
    return (f"{env['gpu']}, driver {env['driver']}; torch {env['torch']}, triton {env['triton']}, jax {env['jax']}, "
            f"jax-triton {env['jax-triton']}")


def header_lines(title: str, env: dict) -> list:
    """The first lines of a report: title, date, GPU, driver, versions."""
    return [
        f"# {title}",
        "",
        f"- date: {env['date']}",
        f"- GPU: {env['gpu']}, driver {env['driver']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}",
        f"- versions: python {env['python']}, torch {env['torch']}, triton {env['triton']}, jax {env['jax']} "
        f"(jaxlib {env['jaxlib']}), jax-triton {env['jax-triton']}, flashx {env['flashx']}",
    ]


def log(msg: str) -> None:
    """A line of a script's progress, flushed: run_all.sh's logs and a timeout's cut keep it."""
    print(msg, flush=True)


def verbose_errors() -> bool:
    """FLASHX_BENCH_TRACEBACK set: each failure's full traceback is printed, not only its reason."""
    return bool(os.environ.get("FLASHX_BENCH_TRACEBACK"))


_INTERRUPTED = False  # set by the signal handler: guarded() then stops the run even if a
# library caught the KeyboardInterrupt and raised something else in its place


def _interrupt_on_signals() -> None:
    """SIGTERM and SIGINT raise KeyboardInterrupt, which the scripts catch to write what they
    measured before stopping (run_all.sh's timeout sends SIGTERM). SIGINT is re-armed because a
    process started in the background by a non-interactive shell inherits it ignored."""
    import signal

    def interrupt(signum, frame):
        global _INTERRUPTED
        _INTERRUPTED = True
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        signal.signal(signal.SIGTERM, interrupt)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except (ValueError, OSError):  # not the main thread
        pass


def start(script: str, device: str, log: Callable) -> Optional[Any]:
    """Import flashx (first: it decides compiled vs interpreted before triton loads), then torch.

    Returns torch, or None (after saying why) when the requested device cannot run.
    """
    import flashx  # noqa: F401

    import torch

    global _DEBUG_TIMING
    _DEBUG_TIMING = device == "cpu"
    _interrupt_on_signals()
    interpreted = flashx.core.runtime.INTERPRETER
    if device == "cuda" and (not torch.cuda.is_available() or interpreted):
        log(f"{script} needs a CUDA GPU (and flashx compiled for it, TRITON_INTERPRET unset); "
            "--device cpu runs a debug pass on tiny shapes")
        return None
    if device == "cpu" and not interpreted:
        log(f"{script} --device cpu needs Triton's interpreter: set TRITON_INTERPRET=1 (a GPU is present)")
        return None
    return torch


def init_jax(ctx: dict, device: str, log: Callable) -> None:
    """Put jax in ctx["jax"], or the reason it cannot run in ctx["jax_missing"]."""
    try:
        import jax
        import jax.dlpack  # noqa: F401

        want = "gpu" if device == "cuda" else "cpu"
        if jax.default_backend() != want:
            raise RuntimeError(f"JAX's default backend is {jax.default_backend()!r}, not {want!r}")
        ctx["jax"] = jax
    except Exception as err:  # noqa: BLE001
        ctx["jax_missing"] = f"JAX unavailable: {reason(err)}"
        log(ctx["jax_missing"])


def require_jax(ctx: dict):
    jax = ctx.get("jax")
    if jax is None:
        raise RuntimeError(ctx.get("jax_missing", "JAX not initialised"))
    return jax


def jax_from_torch(jax, t):
    """A zero-copy JAX view of a torch tensor (detached: DLPack refuses tensors that need grad)."""
    return jax.dlpack.from_dlpack(t.detach())


def jax_bnhd_from_torch(jax, t):
    """A JAX (B, N, H, D) array from a torch (B, H, N, D) tensor, for the JAX peers that take only
    that layout: one copy on torch's side (made outside any timed call), then a DLPack view."""
    return jax_from_torch(jax, t.detach().transpose(1, 2).contiguous())


def torch_bhnd_from_jax(torch, x, device: str):
    """The torch (B, H, N, D) view of a JAX (B, N, H, D) array (for the checks only)."""
    return torch_from_jax(torch, x, device).transpose(1, 2)


def sdpa_call(backend, q, k, v, **kwargs) -> Callable:
    """A call of torch's scaled_dot_product_attention(q, k, v, **kwargs) (is_causal, enable_gqa)
    under one SDPA backend (SDPBackend.FLASH_ATTENTION: FA2; CUDNN_ATTENTION: cuDNN), entered at
    each call: how the scripts time the peers, but bench_forward.py, which times inside it."""
    import torch
    from torch.nn.attention import sdpa_kernel

    def call():
        with sdpa_kernel([backend]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, **kwargs)
    return call


def jax_peer(name: str, causal: bool, head_dim: int, device: str) -> Callable:
    """A JAX peer's attention (q, k, v) -> out, all (B, N, H, D), scale 1/sqrt(D); jit it.

    - "jax_cudnn": jax.nn.dot_product_attention(implementation="cudnn"), which raises where cuDNN
      cannot run the case (and on the CPU);
    - "pallas": jax.experimental.pallas.ops.gpu.attention.mha, JAX's Pallas (Triton lowering)
      FlashAttention with its default block sizes; on the CPU in Pallas' interpret mode.
    """
    import jax

    if name == "jax_cudnn":
        return functools.partial(jax.nn.dot_product_attention, is_causal=causal, implementation="cudnn")
    if name == "pallas":
        from jax.experimental.pallas.ops.gpu import attention as pallas_attention

        # mha's segment_ids has no default, and its sm_scale defaults to 1.0.
        return functools.partial(pallas_attention.mha, segment_ids=None, sm_scale=head_dim ** -0.5, causal=causal,
                                 interpret=device == "cpu")
    raise ValueError(f"unknown JAX peer {name!r}")


def torch_from_jax(torch, x, device: str):
    """A torch view of a JAX array (DLPack), or a copy through the host if DLPack refuses."""
    try:
        return torch.from_dlpack(x)
    except Exception:  # noqa: BLE001 (a copy through the host is fine for a one-off check)
        import numpy as np

        return torch.from_numpy(np.asarray(x.astype("float32"))).to(device)


# ----------------------------------------------------------------------------------------------
# Timing


# Every GPU timing starts from one state of the card: SETTLE_MS of load first. The H200 runs at
# 700 W most of the time under flashx's and cuDNN's long shapes, and its SM clock follows the load
# within a tenth of a second: 2026-12-01 14:36 UTC (order_probe.py), flashx at B=4 N=4k H=16
# D=128 read 673 TFLOP/s first after 5 s idle (1980 MHz), 607-616 in the next three timings
# (1725 MHz), 539 in the sixth (1455 MHz), so whatever was timed first, or after a slow peer, read
# high. 300 ms of bf16 matmuls before each timing (14:39 UTC) evened that out (cuDNN 582-596).
# But matmuls hold the card at its power limit, and a lighter call then runs slow until the clock
# climbs back: H200, 2026-12-04 (settle_probe.py, NOTES v0.46), calls timed alone after the
# matmuls ran 8-33% over their steady time for the first ~10 ms and reached it by 100-200 ms
# (B = 64, N = 512 causal: flashx 253-271 us in the --quick window of 10-60 ms against 224-231
# from 300 ms on, FA2 412-474 against 356-361), by how much differing round to round. So the
# timings' settle load is the timed call itself, back to back for SETTLE_MS: each system is
# timed at the clock its own load holds, not partway through a climb from the matmuls' clock
# (the same probe, settled so: the --quick window within 0-4% of the steady figure, cuDNN 4-7%
# at N = 512).
SETTLE_MS = 300.0
SETTLE_NOTE = (f"every timing after {SETTLE_MS:g} ms of the timed call itself, back to back (common.settle:"
               " the card's clock follows its load)")
_settle_operands = None


def _load_for(ms: float, load: Callable, wait: Callable) -> None:
    """Call load() back to back for `ms` of wall clock, in batches of ~5 ms (by one waited call's
    time) each ended by one wait(last result): the GPU's queue stays short (JAX's outputs of queued
    calls stay allocated until they run) and never runs dry for long."""
    begin = time.perf_counter()
    wait(load())
    batch = max(1, min(200, int(5e-3 / max(time.perf_counter() - begin, 1e-6))))
    while (time.perf_counter() - begin) * 1e3 < ms:
        for _ in range(batch):
            out = load()
        wait(out)


def settle(ms: float = SETTLE_MS, load: Callable | None = None, wait: Callable | None = None) -> None:
    """Load the GPU for `ms` (wall clock) so that the timing that follows starts from a loaded
    card's clock and not from whatever ran (or idled) before it: with `load` (the call about to be
    timed, `wait(out)` waiting for its result; torch.cuda.synchronize by default), that call back
    to back; without, bf16 matmuls (the probes' common start)."""
    global _settle_operands
    import torch

    if ms <= 0 or _DEBUG_TIMING or not torch.cuda.is_available():
        return
    if load is None:
        if _settle_operands is None:
            _settle_operands = [torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        a, b = _settle_operands
        load = lambda: torch.mm(a, b)  # noqa: E731 (~0.2 ms each on the H200)
    _load_for(ms, load, wait or (lambda out: torch.cuda.synchronize()))


# Settled timings a measurement takes the median of (the scripts' --rounds; set_rounds).
ROUNDS = 1


def set_rounds(rounds: int) -> int:
    """Time each system `rounds` times (each after settle()) and keep the median; returns it."""
    global ROUNDS
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    ROUNDS = rounds
    return rounds


def rounds_note(rounds: int) -> str:
    """The reports' words for --rounds."""
    return "each figure one such timing" if rounds == 1 else f"each figure the median of {rounds} such timings (--rounds)"


def settled_median(measure: Callable[[], float], load: Callable | None = None, wait: Callable | None = None) -> float:
    """The median of ROUNDS readings of `measure()` (ms), each after settle(load=load, wait=wait);
    one on the CPU.

    One do_bench reads the card in whatever state its ~0.1 s leaves: on the H200, 2026-12-04
    (NOTES v0.44), single timings of SDPA FA2 at D = 64, N = 4k causal spread 1063-1281 us over
    five processes, where each of four processes' three-round medians read 1097-1125 us."""
    return settled_medians_in_turns([(measure, load, wait)])[0]


def settled_medians_in_turns(measures: list) -> list:
    """settled_median of each (measure, load, wait) in `measures`, the measures taking turns: each
    round times every one, in the given order, then reversed the next round (A B, B A, ...), so
    that the card's drift over the rounds reaches each alike. One round on the CPU."""
    times = [[] for _ in measures]
    for round_ in range(1 if _DEBUG_TIMING else ROUNDS):
        order = range(len(measures)) if round_ % 2 == 0 else reversed(range(len(measures)))
        for i in order:
            measure, load, wait = measures[i]
            settle(load=load, wait=wait)
            times[i].append(measure())
    return [statistics.median(t) for t in times]


def time_torch(fn: Callable, warmup_ms: float, rep_ms: float, device: str = "cuda") -> float:
    """Median ms of `fn`: triton.testing.do_bench on the GPU (CUDA events, L2 flushed between
    calls), after settle() with fn as its load, the median of ROUNDS such timings
    (settled_median); a wall-clock median on the CPU (debug runs only)."""
    if device != "cuda":
        return time_wall(fn, lambda out: None, warmup_ms, rep_ms)
    from triton.testing import do_bench

    return settled_median(lambda: float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")), load=fn)


# What time_torch_graph reads from the device: do_bench's L2 flush (a 256 MB write) is host work
# between calls, so a captured run instead walks at least this many bytes of distinct inputs.
GRAPH_WORKING_SET_BYTES = 256 << 20


def cuda_graph(calls: list, warmups: int = 1):
    """A CUDA graph of `calls` in turn, captured after `warmups` rounds of them on a side stream, so
    that compiles, plans and allocations happen outside the capture (which forbids them)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            for call in calls:
                call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    return graph


def time_torch_graph(calls: list, warmup_ms: float, rep_ms: float, device: str = "cuda") -> float:
    """Median ms a call of `calls` (each on its own inputs) replayed from one CUDA graph that
    holds them all in turn: no host time in it, which is how a decode loop under CUDA graphs
    (torch.compile's reduce-overhead, vLLM's captured steps) runs. With enough distinct inputs
    (GRAPH_WORKING_SET_BYTES) no call finds the previous one's data in L2, as a model's layers each
    read their own cache. Each replay timed by CUDA events, after settle() with replays as the
    load; the median replay over len(calls). CPU (debug runs): time_wall of the calls in turn."""
    if device != "cuda":
        return time_wall(lambda: [call() for call in calls], lambda out: None, warmup_ms, rep_ms) / len(calls)
    import torch

    graph = cuda_graph(calls)
    torch.cuda.synchronize()

    def measure() -> float:
        events = []
        begin = time.perf_counter()
        while len(events) < 5 or (time.perf_counter() - begin) * 1e3 < rep_ms:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            events.append((start, end))
            if len(events) % 20 == 0:
                torch.cuda.synchronize()  # keep the queue short: the wall clock above bounds the run
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in events) / len(calls)

    for _ in range(3):
        graph.replay()
    return settled_median(measure, load=graph.replay)


def time_torch_back_to_back(fn: Callable, warmup_ms: float, rep_ms: float, device: str = "cuda") -> float:
    """Median ms of `fn` called back to back, by the wall clock over samples of ~20 ms each ended by
    one synchronize (time_wall), after settle() with fn as its load (settled_median): what
    time_jax measures, for torch.

    do_bench flushes L2 with a 256 MB write before each call and times each call alone; how far
    that lands from back-to-back calls depends on the shape and the card's clock. On the H200,
    2026-12-02: jax_vs_torch.py (22:44 UTC, 200 ms reps) read flashx's torch forward at D = 128
    N = 4k 7.9% / 8.6% (non-causal / causal) faster by do_bench than back to back, with its
    kernels 11-15% longer back to back than one at a time; the --quick suite (23:05, 50 ms reps)
    read it 0.2% faster / 1.4% slower by do_bench, and the other forward shapes 3-9% slower. A
    JAX / torch ratio of do_bench against time_jax's back-to-back calls carries that difference; timed alike
    (ratio_back_to_back), it holds only what each frontend adds and how its kernels run."""
    if device != "cuda":
        return time_wall(fn, lambda out: None, warmup_ms, rep_ms)
    return settled_median(*_torch_back_to_back(fn, warmup_ms, rep_ms, device))


def _torch_back_to_back(fn: Callable, warmup_ms: float, rep_ms: float, device: str) -> tuple:
    """time_torch_back_to_back's timing of `fn` as (measure, load, wait) for settled_median(s_in_turns)."""
    if device == "cuda":
        import torch

        wait = lambda out: torch.cuda.synchronize()  # noqa: E731
    else:
        wait = lambda out: None  # noqa: E731
    return lambda: time_wall(fn, wait, warmup_ms, rep_ms), fn, wait


# How time_jax times, for the reports' timing lines.
JAX_TIMING_NOTE = ("JAX: jitted, compile and warm-up excluded, calls issued back to back on the same random inputs,"
                   " block_until_ready on the last of each sample of ~20 ms, median ms a call (common.time_jax)")


def time_jax(fn: Callable, args: tuple, warmup_ms: float, rep_ms: float) -> float:
    """Median ms of a jitted `fn(*args)` (any pytree output): compile and warm-up excluded, calls
    issued back to back from the host on the same inputs, each sample of ~20 ms ended by
    block_until_ready (time_wall); after settle() with the call as its load, the median of ROUNDS such timings
    (settled_median). JAX dispatches asynchronously, so the host stays ahead of any call the suite
    times (H200, 2026-12-04: 96.7 us a call at B = 64, N = 256, against 98.6 in a jitted loop).

    Not a jitted loop of calls: XLA would merge or hoist calls on unchanged inputs, so such a loop
    must feed each call's outputs to the next call, and then every call but the first runs on
    outputs, not random inputs. Measured on the H200 (NOTES v0.45): in a forward + backward loop,
    q and k fell to ~1e-20 within three calls and the softmax went flat; the forward kernel ran
    822 and 1020 us there (two rounds) against 888-895 and 1063-1098 on random inputs, and a
    backward loop ran 3-5% faster than on random inputs. Kept unchanged, the inputs stay the
    random ones every system is timed on.
    """
    return settled_median(*_jax_back_to_back(fn, args, warmup_ms, rep_ms))


def _jax_back_to_back(fn: Callable, args: tuple, warmup_ms: float, rep_ms: float) -> tuple:
    """time_jax's timing of `fn(*args)`, compiled here, as (measure, load, wait) for
    settled_median(s_in_turns)."""
    import jax

    jax.block_until_ready(fn(*args))  # compile
    call = lambda: fn(*args)  # noqa: E731
    return lambda: time_wall(call, jax.block_until_ready, warmup_ms, rep_ms), call, jax.block_until_ready


# Set by start() for --device cpu: one warm-up call and one timed call (the interpreter is slow
# and the numbers mean nothing there).
_DEBUG_TIMING = False


def time_back_to_back_in_turns(torch_fn: Callable, jax_fn: Callable, jax_args: tuple, warmup_ms: float, rep_ms: float,
                               device: str = "cuda") -> tuple:
    """(torch ms, JAX ms) of flashx's two frontends on one call, both timed as time_jax times JAX
    (back-to-back calls, the wall clock over samples ended by one wait, after settle() with the
    call itself), in turns (settled_medians_in_turns): the like-for-like JAX / torch ratio
    (ratio_back_to_back). Timed one after the other, each in its own rounds, the same kernel read
    up to 5% apart at a power-bound shape where timed in turns in one process it read level (H200,
    2026-12-04, NOTES v0.51 item 3: D = 128, N = 16k causal, 0.95 in the sweep, 0.997 in turns)."""
    torch_ms, jax_ms = settled_medians_in_turns([_torch_back_to_back(torch_fn, warmup_ms, rep_ms, device),
                                                  _jax_back_to_back(jax_fn, jax_args, warmup_ms, rep_ms)])
    return torch_ms, jax_ms


def time_wall(call: Callable, wait: Callable, warmup_ms: float, rep_ms: float) -> float:
    """Median ms per call of `call()` by wall clock: samples of back-to-back calls, each ended by
    one `wait(last result)` (time_jax's method; jax_vs_torch.py times torch this way too)."""
    if _DEBUG_TIMING:
        wait(call())
        begin = time.perf_counter()
        wait(call())
        return (time.perf_counter() - begin) * 1e3
    t0 = time.perf_counter()
    calls = 0
    while calls < 3 or (time.perf_counter() - t0) * 1e3 < warmup_ms:
        wait(call())
        calls += 1
    estimate_s = max((time.perf_counter() - t0) / calls, 1e-6)
    # Samples of at least ~20 ms: each ends in one host-device round trip (a fraction of a ms
    # with JAX), which must be spread over many calls, as in a real program's stream of calls.
    inner = max(1, min(200, int(20e-3 / estimate_s)))
    samples = max(10 if estimate_s < 0.1 else 3, int(rep_ms * 1e-3 / (inner * estimate_s)))
    times = []
    for _ in range(samples):
        begin = time.perf_counter()
        for _ in range(inner):
            out = call()
        wait(out)
        times.append((time.perf_counter() - begin) / inner)
    return statistics.median(times) * 1e3


def timing_defaults(args, quick_warmup: float = 10.0, quick_rep: float = 50.0,
                    full_warmup: float = 25.0, full_rep: float = 100.0) -> tuple:
    """(warmup_ms, rep_ms) from --warmup-ms/--rep-ms or the mode's defaults; --rounds set (set_rounds;
    one for --device cpu, whose timings are single calls)."""
    warmup = args.warmup_ms if args.warmup_ms is not None else (quick_warmup if args.quick else full_warmup)
    rep = args.rep_ms if args.rep_ms is not None else (quick_rep if args.quick else full_rep)
    set_rounds(1 if args.device == "cpu" else args.rounds)
    return warmup, rep


INTERRUPTED = "skipped: interrupted"


class Deadline:
    """A soft time budget: once spent, scripts skip the cases not yet started (and say so)."""

    def __init__(self, seconds: Optional[float]):
        self.seconds = seconds
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    @property
    def expired(self) -> bool:
        return self.seconds is not None and self.elapsed() > self.seconds

    def why(self) -> str:
        return f"skipped: time budget of {self.seconds:g} s spent (--budget-s)"


# ----------------------------------------------------------------------------------------------
# Failures


def reason(err: BaseException, caught_warnings=()) -> str:
    """One line: the error, and any warnings (SDPA explains why a backend was not used only there)."""
    text = f"{type(err).__name__}: {err}".strip().replace("\n", " ")
    notes = [str(w.message).strip().replace("\n", " ") for w in caught_warnings]
    if notes:
        text += " [" + "; ".join(dict.fromkeys(notes)) + "]"
    return text if len(text) < 400 else text[:397] + "..."


def guarded(run: Callable, ctx: dict) -> tuple:
    """(value, None) from run(), or (None, reason) if it raised; never raises (but on Ctrl-C).

    Synchronizes the GPU afterwards, so an asynchronous error is charged to this system.
    """
    torch = ctx["torch"]
    if _INTERRUPTED:
        raise KeyboardInterrupt("interrupted")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value, why = run(), None
        except Exception as err:  # noqa: BLE001 (every failure is reported, none stops the run)
            if _INTERRUPTED:
                raise KeyboardInterrupt("interrupted") from err
            value, why = None, reason(err, caught)
            if ctx.get("verbose_errors"):
                traceback.print_exc()
    if ctx.get("device", "cuda") == "cuda":
        try:
            torch.cuda.synchronize()
        except Exception as err:  # noqa: BLE001 (a broken CUDA context: later systems will say so too)
            value, why = None, reason(err)
    return value, why


def rel_err(out, ref) -> float:
    """Relative Frobenius error of out against ref (as float32)."""
    out, ref = out.float(), ref.float()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def empty_cache(torch, device: str) -> None:
    if device == "cuda":
        try:
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass


# ----------------------------------------------------------------------------------------------
# FlexAttention


def causal_mask(b, h, q_idx, kv_idx):
    """FlexAttention's mask_mod for causal attention (Nq = Nkv)."""
    return q_idx >= kv_idx


def flex_setup(torch) -> tuple:
    """(compiled flex_attention, create_block_mask), with torch.compile set up for a sweep.

    - one compile per shape and mask: raise dynamo's recompile limit (default 8), or later shapes
      would fall back to eager flex (which materializes the scores);
    - no donated buffers, so the compiled backward can be run again with retain_graph=True
      (backward-only timing).
    """
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    import torch._dynamo

    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(cfg, name):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                setattr(cfg, name, max(int(getattr(cfg, name)), 256))
    try:
        import torch._functorch.config as functorch_config

        if hasattr(functorch_config, "donated_buffer"):
            functorch_config.donated_buffer = False
    except Exception:  # noqa: BLE001
        pass
    return torch.compile(flex_attention, dynamic=False), create_block_mask


def flex_for(ctx: dict, causal: bool, seqlen: int) -> Callable:
    """FlexAttention (q, k, v) -> out for one shape, all (B, H, N, D): the compiled flex_attention
    (set up once per process, kept in ctx: a failure there is this system's reason), causal through
    a block mask from create_block_mask(causal_mask), built here once per shape."""
    if "flex" not in ctx:
        ctx["flex"] = flex_setup(ctx["torch"])
    flex, create_block_mask = ctx["flex"]
    block_mask = None
    if causal:
        block_mask = create_block_mask(causal_mask, None, None, seqlen, seqlen, device=ctx["device"])
    return lambda q, k, v: flex(q, k, v, block_mask=block_mask)


# ----------------------------------------------------------------------------------------------
# Reports


class Failures:
    """The list under a report's tables: one line per (case, reason), naming every system it hit."""

    def __init__(self, n_modes: int = 1):
        self.n_modes = n_modes  # a system failing in every mode is named without its modes
        self._by = {}  # (case, reason) -> {system label: [modes]}

    def add(self, case: str, label: str, why: str, mode: Optional[str] = None) -> None:
        modes = self._by.setdefault((case, why), {}).setdefault(label, [])
        if mode is not None and mode not in modes:
            modes.append(mode)

    def lines(self, title: str = 'Not measured or suspect ("-" above):') -> list:
        if not self._by:
            return []
        out = ["", title, ""]
        for (case, why), systems in self._by.items():
            who = ", ".join(f"{label} ({', '.join(m)})" if m and len(m) < self.n_modes else label
                            for label, m in systems.items())
            out.append(f"- {case}, {who}: {why}")
        return out


def fmt(x: Optional[float], spec: str) -> str:
    if x is None:
        return "-"
    return "NaN" if math.isnan(x) else format(x, spec)


def ratio(a: Optional[Result], b: Optional[Result]) -> str:
    ok = a is not None and b is not None and a.tflops and b.tflops
    return f"{a.tflops / b.tflops:.2f}" if ok else "-"


BACK_TO_BACK_LABEL = "flashx jax/torch b2b"
BACK_TO_BACK_NOTE = ("flashx's JAX frontend over its torch frontend with both timed back to back (torch: calls issued"
                     " back to back, the wall clock over samples of ~20 ms each ended by one synchronize), the two"
                     " frontends in turns, round by round (common.time_back_to_back_in_turns), where the"
                     " jax/torch column sets JAX's back-to-back calls against do_bench (each call alone after an L2 flush), a method"
                     " that read up to 9% either side of back-to-back calls on 2026-12-02 (common.time_torch_back_to_back)")


def ratio_back_to_back(jax_result: Optional[Result], torch_result: Optional[Result]) -> str:
    """JAX over torch (flashx's frontends) with both timed back to back: the JAX result's ms against
    the torch result's wall_ms (time_back_to_back_in_turns)."""
    ok = jax_result is not None and torch_result is not None and jax_result.ms and torch_result.wall_ms
    return f"{torch_result.wall_ms / jax_result.ms:.2f}" if ok else "-"


def md_table(head: list, rows: list) -> list:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" for _ in head) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return lines


def write_json(path: Path, raw: dict) -> None:
    path.write_text(json.dumps(raw, indent=1, default=str) + "\n")


def write_md_json(out_dir: Path, name: str, text: str, raw: dict) -> list:
    """Write DIR/<name>.md (the report) and DIR/<name>.json (the raw numbers); their paths."""
    md, raw_json = out_dir / f"{name}.md", out_dir / f"{name}.json"
    md.write_text(text)
    write_json(raw_json, raw)
    return [md, raw_json]


def write_report(out_dir: Path, name: str, table: str, raw: dict,
                 plot: Optional[Callable[[Path], bool]] = None) -> list:
    """Write a script's results (write_md_json, and DIR/<name>.png where plot(path) draws it), log
    the paths and print the table last, so that it ends the output; the paths written."""
    written = write_md_json(out_dir, name, table, raw)
    png = out_dir / f"{name}.png"
    if plot is not None and plot(png):
        written.append(png)
    log(f"wrote {', '.join(map(str, written))}\n")
    print(table, flush=True)
    return written


def pyplot(log: Callable):
    """matplotlib.pyplot with the Agg backend, or None (after saying why)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt
    except Exception as err:  # noqa: BLE001
        log(f"no plot: {reason(err)}")
        return None


def output_dir(args) -> Path:
    """--out, else results/h200 (GPU) or a temp folder (CPU debug runs never overwrite GPU results)."""
    if args.out is not None:
        out = Path(args.out)
    elif args.device == "cpu":
        import tempfile

        out = Path(tempfile.gettempdir()) / "flashx-bench-cpu"
    else:
        out = DEFAULT_OUT
    out.mkdir(parents=True, exist_ok=True)
    return out


def add_common_args(p, name: str, quick_note: str, budget_quick: float) -> None:
    """Options every script takes."""
    p.add_argument("--quick", action="store_true", help=quick_note)
    p.add_argument("--out", type=Path, default=None,
                   help=f"output folder for {name}.md/.json (default: benchmarks/results/h200; "
                   "with --device cpu: flashx-bench-cpu in the temp folder)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16", help="input dtype (default: %(default)s)")
    p.add_argument("--warmup-ms", type=float, default=None, help="warm-up per timing (default 25, --quick 10)")
    p.add_argument("--rep-ms", type=float, default=None, help="timed time per timing (default 100, --quick 50)")
    p.add_argument("--rounds", type=int, default=3,
                   help="settled timings per system and shape, their median kept (default: %(default)s; 1 on the CPU)")
    p.add_argument("--budget-s", type=float, default=None,
                   help=f"soft time budget: cases not started once it is spent are skipped and reported "
                   f"(default: {budget_quick:g} s with --quick, none otherwise)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: a debug pass through Triton's interpreter on tiny shapes (numbers mean nothing)")
