#!/usr/bin/env python3
"""Compile cost of flashx: its first calls in a fresh process, and no recompile at a new sequence length.

Each case, a frontend and (D, flags) with the dtype of --dtype (bf16 by default), runs in a FRESH
Python subprocess, so that Triton's in-memory caches are empty, with TRITON_CACHE_DIR set to a new
empty temp folder, so that its on-disk cache is empty too. Cases, in order (a spent --budget-s
skips the last ones; --quick runs the first four):

    torch D=128 causal, jax D=128 causal, torch D=128 causal + window (255, 0), torch D=64 non-causal,
    torch D=128 non-causal, torch D=64 causal, jax D=64 non-causal, jax D=128 causal + window (255, 0),
    torch D=256 causal, jax D=256 causal

Inputs q, k, v, dO of shape (B, H, N, D) = (1, 16, 2048, D) (flashx: layout="bhnd"), q, k, v
requiring grad; then a NEW sequence length, N = 3072 (a multiple of 16 like 2048, so Triton's own
integer specialization stays the same, and in the same tile bucket: flashx must not compile
anything for it; sequences up to 1024 have their own forward tile, compiled once). Per case:

- torch: the first flashx.torch.attention forward (torch.cuda.synchronize after it), the first
  backward torch.autograd.grad(out, (q, k, v), dO), the same two again (warm), then the first
  forward and backward at the new N. Recompiled? The number of files in the Triton cache folder
  before and after the new N's calls.
- jax: the same with jax.jit(flashx.jax.attention) and jax.jit(jax.grad(sum(out * dO))) (whose
  first call traces and compiles the forward and the backward again in one XLA program), each
  ended by block_until_ready. jax-triton keeps its kernels in memory (flashx's builder, for the
  Gluon kernels, too): recompiled? counts the kernels in both caches before and after the new N's
  calls.
  jit specializes on shapes, so the new N's calls include an expected XLA retrace and compile.

Times are wall clock of one call each (the compile plus one small kernel run); "compile s" is
the first forward and backward less the warm ones. Import time (flashx and the framework) is
apart. A case that fails is shown as "-" with its reason, listed under the table; a recompile at
the new N is listed there too.

Writes DIR/compile.md (the table, with the date, GPU, driver and versions) and DIR/compile.json,
DIR defaulting to benchmarks/results/h200; prints the markdown last.

    python benchmarks/bench_compile.py            # all ten cases (~2.5 minutes on an H200)
    python benchmarks/bench_compile.py --quick    # the first four
    python benchmarks/bench_compile.py --device cpu   # debug pass: interpreter, tiny shapes
    python benchmarks/bench_compile.py --quick --profile prof/   # where each first call's time goes

Needs a CUDA GPU (but --device cpu); importing this module does no work. flashx must be importable
by a plain `python` in the same environment (installed, or src/ on PYTHONPATH, as run_all.sh sets).
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

try:  # python -m benchmarks.bench_compile
    from . import common
except ImportError:  # python benchmarks/bench_compile.py
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import common  # sets XLA_PYTHON_CLIENT_PREALLOCATE=false (inherited by the workers)

WINDOW = (255, 0)  # flashx's window=(left, right): query i sees keys i-255 .. i


@dataclass(frozen=True)
class Case:
    """One fresh process: a frontend ("torch" or "jax") and the flags its kernels are compiled for."""

    frontend: str
    head_dim: int
    causal: bool
    window: Optional[tuple] = None

    @property
    def flags(self) -> str:
        text = "causal" if self.causal else "non-causal"
        return text + (f", window {self.window}" if self.window else "")


# In order of interest: a spent budget skips the last ones.
CASES = (
    Case("torch", 128, True),
    Case("jax", 128, True),
    Case("torch", 128, True, WINDOW),
    Case("torch", 64, False),
    Case("torch", 128, False),
    Case("torch", 64, True),
    Case("jax", 64, False),
    Case("jax", 128, True, WINDOW),
    Case("torch", 256, True),  # D = 256's backward compiles four kernels (row statistics, dV, dK, dQ)
    Case("jax", 256, True),
)
QUICK_CASES = 4  # the first four
# (B, H, N, new N): N and the new N keep Triton's integer specialization (multiples of 16), and
# both lie above flashx's short-sequence buckets (up to tuning.SHORT_SEQLEN = 1024), whose own forward tiles
# compile once per bucket when a process first goes below it (a bucketed key, by design).
SIZES = (1, 16, 2048, 3072)
CPU_SIZES = (1, 2, 32, 48)  # --device cpu (debug): tiny, through the interpreter
CASE_TIMEOUT_S = 300  # one case's process is killed after this long
QUICK_BUDGET_S = 45.0  # run_all.sh --quick runs four scripts in about six minutes
RESULT_MARK = "FLASHX_COMPILE_RESULT "  # a worker's last stdout line: this, then its JSON
# (key in a worker's result, column): times in ms unless said.
COLUMNS = (
    ("import_s", "import s"),
    ("compile_s", "compile s"),
    ("fwd_first", "fwd 1st"),
    ("fwd_warm", "fwd warm"),
    ("bwd_first", "bwd 1st"),
    ("bwd_warm", "bwd warm"),
    ("fwd_new_n", "fwd new N"),
    ("bwd_new_n", "bwd new N"),
)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="flashx's compile cost: first forward and backward in a fresh process (empty Triton caches), "
        "and whether a new sequence length recompiles; torch and JAX frontends.",
        epilog=f"(B, H, N, new N) = {SIZES}; --device cpu: {CPU_SIZES}.",
    )
    # The options every script takes (run_all.sh passes the same ones to all); --warmup-ms and --rep-ms
    # are unused here: each call is timed once.
    common.add_common_args(p, "compile", f"the first {QUICK_CASES} cases", QUICK_BUDGET_S)
    p.add_argument("--frontends", nargs="+", choices=("torch", "jax"), default=["torch", "jax"],
                   help="frontends to run (default: both)")
    p.add_argument("--d", type=int, nargs="+", default=None, help="only the cases of these head dims")
    p.add_argument("--profile", type=Path, metavar="DIR", default=None,
                   help="diagnostic: profile each case's first forward and backward (cProfile, main thread) into "
                        "DIR/<case>-fwd|bwd.txt; the profiler slows the Python side, so the table's times are then not figures")
    p.add_argument("--worker", metavar="JSON", help=argparse.SUPPRESS)  # internal: run one case, print its result
    return p.parse_args(argv)


# ----------------------------------------------------------------------------------------------
# Worker: one case, in its own process


def count_files(folder: Optional[str]) -> int:
    if not folder or not os.path.isdir(folder):
        return 0
    return sum(len(files) for _, _, files in os.walk(folder))


def _ms(begin: float) -> float:
    return (time.perf_counter() - begin) * 1e3


def _profiled(spec: dict, phase: str):
    """A context that profiles one first call with cProfile where --profile asked for it, and writes
    to PROFILE/<case>-<phase>.txt each triton.compile call's stage times (Triton's compilation
    listener), the 40 costliest functions by cumulative time and the 15 by own time (main thread
    only), and who called the 5 costliest by own time."""
    folder = spec.get("profile")
    if not folder:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def profiled():
        import cProfile
        import pstats

        import triton

        # Every kernel that goes through triton.compile (not jax-triton's tl kernels, which it
        # lowers itself) reports its stage times here, from whichever thread compiled it.
        compiled = []
        knobs = getattr(triton, "knobs", None)
        listening = knobs is not None and hasattr(knobs.compilation, "listener")

        def listener(src, metadata, metadata_group, times, cache_hit):
            stages = " ".join(f"{stage} {us / 1e6:.2f}" for stage, us in times.lowering_stages)
            compiled.append(f"{metadata.get('name', '?')}: {'cache hit' if cache_hit else 'compiled'}, "
                            f"IR {times.ir_initialization / 1e6:.2f} s, stages (s): {stages}, "
                            f"store {times.store_results / 1e6:.2f} s")

        if listening:
            knobs.compilation.listener = listener
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            yield
        finally:
            profiler.disable()
            if listening:
                knobs.compilation.listener = None
            flags = ("causal" if spec["causal"] else "full") + (f"-window{spec['window'][0]}" if spec["window"] else "")
            name = re.sub(r"[^A-Za-z0-9_.-]", "", f"{spec['frontend']}-d{spec['head_dim']}-{flags}-{phase}")
            with open(Path(folder) / f"{name}.txt", "w") as f:
                f.write("triton.compile calls:\n" + "".join(f"  {line}\n" for line in compiled) + "\n")
                stats = pstats.Stats(profiler, stream=f)
                stats.sort_stats("cumulative").print_stats(40)
                stats.sort_stats("tottime").print_stats(15)
                for func in stats.fcn_list[:5]:  # fcn_list: the order of the last sort
                    stats.print_callers(re.escape(pstats.func_std_string(func)))

    return profiled()


def torch_worker(spec: dict, out: dict) -> None:
    """Fill out with the torch frontend's first, warm and new-N call times (see the module's docstring)."""
    begin = time.perf_counter()
    import flashx.torch  # first: it decides compiled vs interpreted before triton loads
    import torch

    out["import_s"] = time.perf_counter() - begin
    device, cache = spec["device"], os.environ.get("TRITON_CACHE_DIR")
    dtype = getattr(torch, common.DTYPES[spec["dtype"]])
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    window = tuple(spec["window"]) if spec["window"] else None
    attention = functools.partial(flashx.torch.attention, causal=spec["causal"], window=window, layout="bhnd")

    def calls(n: int, tag: str) -> None:
        size = (spec["batch"], spec["heads"], n, spec["head_dim"])
        q, k, v, dout = (torch.randn(size, device=device, dtype=dtype) for _ in range(4))
        inputs = tuple(t.requires_grad_() for t in (q, k, v))
        sync()  # CUDA context, allocations and the random kernels before the clock starts
        begin = time.perf_counter()
        with _profiled(spec, "fwd") if tag == "first" else contextlib.nullcontext():
            o = attention(*inputs)
            sync()
        out[f"fwd_{tag}"] = _ms(begin)
        begin = time.perf_counter()
        with _profiled(spec, "bwd") if tag == "first" else contextlib.nullcontext():
            torch.autograd.grad(o, inputs, dout)
            sync()
        out[f"bwd_{tag}"] = _ms(begin)

    calls(spec["seqlen"], "first")
    calls(spec["seqlen"], "warm")
    before = count_files(cache)
    calls(spec["new_seqlen"], "new_n")
    out["new_compiles"] = count_files(cache) - before
    out["compiles_counted"] = "files in the Triton cache folder"


def jax_worker(spec: dict, out: dict) -> None:
    """Fill out with the JAX frontend's first, warm and new-N call times (see the module's docstring)."""
    begin = time.perf_counter()
    import flashx.jax  # first: it decides compiled vs interpreted before triton loads
    import jax
    import jax.numpy as jnp

    out["import_s"] = time.perf_counter() - begin
    dtype = jnp.dtype(common.DTYPES[spec["dtype"]])
    window = tuple(spec["window"]) if spec["window"] else None
    attention = functools.partial(flashx.jax.attention, causal=spec["causal"], window=window, layout="bhnd")

    def loss(q, k, v, dout):
        return jnp.sum(attention(q, k, v).astype(jnp.float32) * dout.astype(jnp.float32))

    forward = jax.jit(attention)
    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))

    def kernels() -> Optional[int]:
        """Kernels compiled in this process: jax-triton's (tl) and flashx's builder's (Gluon); None
        without jax-triton (the interpreter)."""
        lib = sys.modules.get("jax_triton.triton_lib")
        if not hasattr(lib, "_COMPILED_KERNEL_CACHE"):
            return None
        from flashx.jax import gluon

        return len(lib._COMPILED_KERNEL_CACHE) + gluon.compiled_kernel_count()

    def calls(n: int, tag: str) -> None:
        size = (spec["batch"], spec["heads"], n, spec["head_dim"])
        keys = jax.random.split(jax.random.key(n), 4)
        q, k, v, dout = jax.block_until_ready([jax.random.normal(key, size, dtype) for key in keys])
        begin = time.perf_counter()
        with _profiled(spec, "fwd") if tag == "first" else contextlib.nullcontext():
            jax.block_until_ready(forward(q, k, v))
        out[f"fwd_{tag}"] = _ms(begin)
        begin = time.perf_counter()
        with _profiled(spec, "bwd") if tag == "first" else contextlib.nullcontext():
            jax.block_until_ready(grad(q, k, v, dout))
        out[f"bwd_{tag}"] = _ms(begin)

    calls(spec["seqlen"], "first")
    calls(spec["seqlen"], "warm")
    before = kernels()
    calls(spec["new_seqlen"], "new_n")
    if before is not None:
        out["new_compiles"] = kernels() - before
        out["compiles_counted"] = "kernels in jax-triton's and flashx's caches"


def worker(spec_json: str) -> int:
    """Run one case; print its result (partial, with a reason, if a step failed) as the last stdout line."""
    spec = json.loads(spec_json)
    out = {}
    try:
        (torch_worker if spec["frontend"] == "torch" else jax_worker)(spec, out)
    except Exception as err:  # noqa: BLE001 (reported to the parent, which shows "-")
        out["reason"] = common.reason(err)
        if common.verbose_errors():
            import traceback

            traceback.print_exc()
    if "fwd_warm" in out and "bwd_warm" in out:
        out["compile_s"] = (out["fwd_first"] - out["fwd_warm"] + out["bwd_first"] - out["bwd_warm"]) / 1e3
    out["cache_files"] = count_files(os.environ.get("TRITON_CACHE_DIR"))
    print(RESULT_MARK + json.dumps(out), flush=True)
    return 0


# ----------------------------------------------------------------------------------------------
# Parent: one fresh process per case


def run_case(case: Case, spec: dict, log) -> dict:
    """The worker's result for one case, run in a fresh process with an empty Triton cache folder."""
    cache = tempfile.mkdtemp(prefix="flashx-triton-cache-")
    env = dict(os.environ, TRITON_CACHE_DIR=cache)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps({**spec, **asdict(case)})]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=CASE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"reason": f"timed out after {CASE_TIMEOUT_S} s"}
    finally:  # also on Ctrl-C or SIGTERM, after subprocess.run has killed the worker
        shutil.rmtree(cache, ignore_errors=True)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if spec.get("verbose"):
        log(proc.stderr)
    return {"reason": f"worker exited with code {proc.returncode}: " + (lines[-1] if lines else "no output")}


# ----------------------------------------------------------------------------------------------
# Reports


def recompiled_cell(res: dict, device: str) -> str:
    if device == "cpu":
        return "n/a (interpreter)"
    n = res.get("new_compiles")
    if n is None:
        return "-"
    unit = "files" if res["compiles_counted"].startswith("files") else "kernels"
    return f"YES (+{n} {unit})" if n else f"no (+0 {unit})"


def markdown(rows: list, env: dict, settings: dict) -> str:
    b, h, n, new_n = settings["sizes"]
    lines = common.header_lines("flashx compile cost", env) + [
        f"- {settings['dtype']}; q, k, v, dO of shape (B, H, N, D) = ({b}, {h}, {n}, D), layout=\"bhnd\", then a new"
        f" N = {new_n}; each case in a fresh Python process with an empty TRITON_CACHE_DIR",
        "- times: wall clock of one call (ms; import and compile in s), synchronized (torch.cuda.synchronize,"
        " block_until_ready): compile plus one small kernel run; compile s = (fwd 1st - fwd warm) + (bwd 1st - bwd warm)",
        "- torch: forward flashx.torch.attention, backward torch.autograd.grad(out, (q, k, v), dO); jax: forward"
        " jit(flashx.jax.attention), bwd jit(grad(sum(out * dO))) (forward and backward in one XLA program);"
        " new N under jax includes an expected XLA retrace and compile",
        "- recompiled at new N: new files in the Triton cache folder (torch), new kernels in jax-triton's and flashx's in-memory"
        " caches (jax); cache files: the folder's files at the end",
        "",
    ]
    head = ["frontend", "D", "flags"] + [label for _, label in COLUMNS] + ["recompiled at new N", "cache files"]
    body = []
    failures = common.Failures()
    for case, res in rows:
        cells = [case.frontend, str(case.head_dim), case.flags]
        cells += [common.fmt(res.get(key), ".2f" if key.endswith("_s") else ".1f") for key, _ in COLUMNS]
        cells += [recompiled_cell(res, settings["device"]), str(res.get("cache_files", "-"))]
        body.append(cells)
        name = f"{case.frontend} D={case.head_dim} {case.flags}"
        if res.get("reason"):
            failures.add(name, "flashx", res["reason"])
        if res.get("new_compiles") and settings["device"] == "cuda":
            failures.add(name, "flashx", f"compiled again at N = {new_n} (+{res['new_compiles']} "
                         f"{res['compiles_counted']}): a new sequence length should reuse the kernels")
    lines += common.md_table(head, body) + failures.lines()
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker(args.worker)
    device = args.device
    deadline = common.Deadline(args.budget_s if args.budget_s is not None else (QUICK_BUDGET_S if args.quick else None))
    cases = [c for c in (CASES[:QUICK_CASES] if args.quick else CASES)
             if c.frontend in args.frontends and (args.d is None or c.head_dim in args.d)]
    sizes = CPU_SIZES if device == "cpu" else SIZES

    log = common.log

    torch = common.start("bench_compile.py", device, log)
    if torch is None:
        return 2
    env = common.environment(torch, device)
    settings = {"dtype": common.DTYPES[args.dtype], "device": device, "sizes": sizes, "budget_s": deadline.seconds,
                "case_timeout_s": CASE_TIMEOUT_S}
    spec = {"dtype": args.dtype, "device": device, "batch": sizes[0], "heads": sizes[1], "seqlen": sizes[2],
            "new_seqlen": sizes[3], "verbose": common.verbose_errors(),
            "profile": str(args.profile.resolve()) if args.profile else None}
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    log(f"{common.environment_line(env)}; {len(cases)} cases, {settings['dtype']}, (B, H, N, new N) = {sizes}")

    rows = []
    stop = None  # why the remaining cases are skipped, once they are
    for case in cases:
        if stop is None and deadline.expired:
            stop = deadline.why()
        name = f"{case.frontend} D={case.head_dim} {case.flags}"
        if stop is not None:
            log(f"{name}: {stop}")
            rows.append((case, {"reason": stop}))
            continue
        begin = time.perf_counter()
        try:
            res = run_case(case, spec, log)
        except KeyboardInterrupt:  # e.g. run_all.sh's timeout: keep what was measured, skip the rest
            stop = common.INTERRUPTED
            res = {"reason": stop}
        rows.append((case, res))
        shown = ", ".join(f"{label} {common.fmt(res.get(key), '.2f' if key.endswith('_s') else '.1f')}"
                          for key, label in COLUMNS if key in res)
        log(f"{name}: {shown or '-'}; recompiled at new N: {recompiled_cell(res, device)}  "
            f"({time.perf_counter() - begin:.0f} s)" + (f"  [{res['reason']}]" if res.get("reason") else ""))
    log(f"done in {deadline.elapsed():.0f} s")

    common.write_report(common.output_dir(args), "compile", markdown(rows, env, settings), {
        "environment": env,
        "settings": settings,
        "rows": [{**asdict(case), **res} for case, res in rows],
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
