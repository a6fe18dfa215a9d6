#!/usr/bin/env python3
"""Forward attention throughput: flashx (torch and JAX frontends) beside torch SDPA's FA2 and cuDNN.

Shapes: B*N = 16k tokens, H*D = 2048, D in {64, 128, 256}, N = Nq = Nkv in {1k, 4k, 16k}
(B = 16k / N, H = 2048 / D), causal and not, bf16 by default. Every system gets the very same
q, k, v of shape (B, H, N, D): SDPA's native layout, and flashx's layout="bhnd" (no copies;
the JAX frontend sees the same buffers through DLPack).

FLOPs: 4 * B * H * Nq * Nkv * D, halved when causal.
Timing: torch with triton.testing.do_bench (median, L2 flushed between calls); JAX with a
jitted function, warm-up (compile included) excluded, median over samples, each sample a
few back-to-back calls ended by block_until_ready (so host dispatch is not counted as
kernel time).

A system that fails on a shape (a backend not available, an error, out of memory) is shown as
"-" and its reason is printed and listed under the table; the run goes on. flashx's output is
checked against SDPA's once per shape (relative Frobenius error), so a fast but wrong kernel
shows.

Writes DIR/forward.md (table with a header naming the date, GPU, driver and versions),
DIR/forward.json (raw numbers) and DIR/forward.png (TFLOP/s vs N, one panel per D and
causal flag), DIR defaulting to benchmarks/results/h200; prints the markdown table last.

    python benchmarks/bench_forward.py            # full sweep (18 shapes)
    python benchmarks/bench_forward.py --quick    # subset, ~2-3 minutes on an H200

Needs a CUDA GPU; importing this module does no work (no framework is imported).
FLASHX_BENCH_TRACEBACK=1 prints the full traceback of each failure.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

# JAX preallocates most of the GPU's memory by default; torch shares this process.
os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "h200"

TOKENS = 16 * 1024  # B * N
HIDDEN = 2048  # H * D
HEAD_DIMS = (64, 128, 256)
SEQLENS = (1024, 4096, 16384)
QUICK_HEAD_DIMS = (64, 128)
QUICK_SEQLENS = (1024, 4096)

# name -> label; flashx first, peers after. Ratios are flashx (torch) over each peer.
SYSTEMS = {
    "flashx_torch": "flashx (torch)",
    "flashx_jax": "flashx (jax)",
    "sdpa_flash": "SDPA FA2",
    "sdpa_cudnn": "SDPA cuDNN",
}
RATIOS = (("sdpa_flash", "flashx/FA2"), ("sdpa_cudnn", "flashx/cuDNN"))
DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


@dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    seqlen: int  # Nq = Nkv
    head_dim: int
    causal: bool

    @property
    def flops(self) -> float:
        f = 4.0 * self.batch * self.heads * self.seqlen * self.seqlen * self.head_dim
        return f / 2 if self.causal else f

    @property
    def name(self) -> str:
        return f"D={self.head_dim} N={self.seqlen} B={self.batch} H={self.heads} causal={self.causal}"


@dataclass
class Result:
    ms: Optional[float] = None
    tflops: Optional[float] = None
    err: Optional[float] = None  # relative error against the reference output (flashx only)
    reason: Optional[str] = None  # why it failed, if it did


@dataclass
class Row:
    shape: Shape
    results: dict = field(default_factory=dict)  # system -> Result
    reference: Optional[str] = None  # which SDPA backend the errors are measured against


def shapes_for(head_dims, seqlens, causal_flags) -> list:
    out = []
    for d in head_dims:
        if HIDDEN % d:
            raise SystemExit(f"D={d} does not divide H*D={HIDDEN}")
        for n in seqlens:
            if TOKENS % n:
                raise SystemExit(f"N={n} does not divide B*N={TOKENS}")
            for causal in causal_flags:
                out.append(Shape(batch=TOKENS // n, heads=HIDDEN // d, seqlen=n, head_dim=d, causal=causal))
    return out


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Forward attention TFLOP/s: flashx (torch, JAX) vs torch SDPA's FA2 and cuDNN backends.",
        epilog=f"Shapes: B*N={TOKENS}, H*D={HIDDEN}; full sweep D in {HEAD_DIMS}, N in {SEQLENS}; "
        f"--quick: D in {QUICK_HEAD_DIMS}, N in {QUICK_SEQLENS}; causal and not.",
    )
    p.add_argument("--quick", action="store_true", help="a subset of shapes and shorter timing (~2-3 minutes on an H200)")
    p.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="output folder for forward.md/.json/.png (default: benchmarks/results/h200)"
    )
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16", help="input dtype (default: %(default)s)")
    p.add_argument("--d", type=int, nargs="+", metavar="D", help="head dims to run (overrides the sweep's)")
    p.add_argument("--n", type=int, nargs="+", metavar="N", help="sequence lengths to run (overrides the sweep's)")
    p.add_argument("--causal", choices=("both", "yes", "no"), default="both", help="causal shapes to run (default: %(default)s)")
    p.add_argument(
        "--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS), help="systems to run (default: all)"
    )
    p.add_argument("--warmup-ms", type=float, default=None, help="do_bench warm-up per system (default 25, --quick 10)")
    p.add_argument("--rep-ms", type=float, default=None, help="timed time per system (default 100, --quick 50)")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------------------------
# Environment


def _run_quiet(cmd) -> Optional[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True).stdout.strip() or None
    except Exception:
        return None


def _version(module_name: str) -> str:
    try:
        from importlib.metadata import version

        return version(module_name)
    except Exception:
        return "not installed"


def environment(torch) -> dict:
    props = torch.cuda.get_device_properties(0)
    driver = _run_quiet(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    commit = _run_quiet(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"])
    if commit and _run_quiet(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"]):
        commit += " (modified)"
    import flashx

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": f"{props.name} ({props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB)",
        "driver": (driver.splitlines()[0] if driver else "unknown"),
        "cuda": torch.version.cuda or "unknown",
        "cudnn": str(cudnn) if cudnn else "unknown",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _version("triton"),
        "jax": _version("jax"),
        "jaxlib": _version("jaxlib"),
        "jax-triton": _version("jax-triton"),
        "flashx": f"{flashx.__version__}" + (f" @ {commit}" if commit else ""),
    }


# ----------------------------------------------------------------------------------------------
# Timing


def time_torch(fn: Callable, warmup_ms: float, rep_ms: float) -> float:
    """Median ms of `fn` by triton.testing.do_bench (CUDA events, L2 flushed between calls)."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


def time_jax(fn: Callable, args: tuple, warmup_ms: float, rep_ms: float) -> float:
    """Median ms of a jitted `fn(*args)`; compile and warm-up excluded.

    Each sample runs `inner` calls back to back and waits for the last with block_until_ready,
    so the host's dispatch overlaps the GPU's work as it does in a real program.
    """
    fn(*args).block_until_ready()  # compile
    t0 = time.perf_counter()
    calls = 0
    while calls < 3 or (time.perf_counter() - t0) * 1e3 < warmup_ms:
        fn(*args).block_until_ready()
        calls += 1
    estimate_s = max((time.perf_counter() - t0) / calls, 1e-6)
    inner = max(1, min(50, int(2e-3 / estimate_s)))  # samples of at least ~2 ms
    samples = max(10, int(rep_ms * 1e-3 / (inner * estimate_s)))
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(inner):
            out = fn(*args)
        out.block_until_ready()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times) * 1e3


# ----------------------------------------------------------------------------------------------
# One shape


def _reason(err: BaseException, caught_warnings=()) -> str:
    text = f"{type(err).__name__}: {err}".strip().replace("\n", " ")
    notes = [str(w.message).strip().replace("\n", " ") for w in caught_warnings]
    if notes:  # SDPA explains why a backend was not used only through warnings
        text += " [" + "; ".join(dict.fromkeys(notes)) + "]"
    return text if len(text) < 400 else text[:397] + "..."


def _rel_err(out, ref) -> float:
    out, ref = out.float(), ref.float()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def bench_shape(shape: Shape, dtype_name: str, systems: list, ctx: dict, warmup_ms: float, rep_ms: float, log) -> Row:
    torch = ctx["torch"]
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import flashx.torch

    row = Row(shape)
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device="cuda").manual_seed(0)
    size = (shape.batch, shape.heads, shape.seqlen, shape.head_dim)
    q, k, v = (torch.randn(size, device="cuda", dtype=dtype, generator=gen) for _ in range(3))
    outputs = {}

    def record(system, run):
        """Run one system; any failure becomes a '-' with its reason."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                ms, out = run()
                res = Result(ms=ms, tflops=shape.flops / (ms * 1e-3) / 1e12)
                if out is not None:
                    outputs[system] = out
            except Exception as err:  # noqa: BLE001 (every failure is reported, none stops the run)
                res = Result(reason=_reason(err, caught))
                if ctx["verbose_errors"]:
                    traceback.print_exc()
        try:
            torch.cuda.synchronize()
        except Exception as err:  # noqa: BLE001 (a broken CUDA context: later systems will say so too)
            res = Result(reason=_reason(err))
        row.results[system] = res
        if res.reason:
            log(f"  {SYSTEMS[system]:<15} -  ({res.reason})")
        else:
            log(f"  {SYSTEMS[system]:<15} {res.tflops:7.1f} TFLOP/s  {res.ms:8.3f} ms")

    def sdpa(backend):
        def run():
            with sdpa_kernel([backend]):
                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=shape.causal)  # noqa: E731
                out = fn()
                return time_torch(fn, warmup_ms, rep_ms), out
        return run

    def flashx_torch():
        fn = lambda: flashx.torch.attention(q, k, v, causal=shape.causal, layout="bhnd")  # noqa: E731
        out = fn()
        return time_torch(fn, warmup_ms, rep_ms), out

    def flashx_jax():
        jax = ctx.get("jax")
        if jax is None:
            raise RuntimeError(ctx["jax_missing"])
        import functools

        import flashx.jax

        torch.cuda.synchronize()  # the buffers below are torch's; make sure they are written
        jq, jk, jv = (jax.dlpack.from_dlpack(t) for t in (q, k, v))
        fn = jax.jit(functools.partial(flashx.jax.attention, causal=shape.causal, layout="bhnd"))
        ms = time_jax(fn, (jq, jk, jv), warmup_ms, rep_ms)
        out = fn(jq, jk, jv)
        out.block_until_ready()
        try:
            out = torch.from_dlpack(out)
        except Exception:  # noqa: BLE001 (a copy through the host is fine for one check)
            import numpy as np

            out = torch.from_numpy(np.asarray(out.astype("float32"))).to("cuda")
        return ms, out

    runners = {
        "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION),
        "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
        "flashx_torch": flashx_torch,
        "flashx_jax": flashx_jax,
    }
    # Peers first, so the reference exists before flashx is checked against it.
    for system in sorted(systems, key=lambda s: (not s.startswith("sdpa"), list(SYSTEMS).index(s))):
        record(system, runners[system])

    # The reference: SDPA's FA2 output, else cuDNN's, else the mem-efficient backend's.
    for name, backend in (("SDPA FA2", "sdpa_flash"), ("SDPA cuDNN", "sdpa_cudnn"), ("SDPA efficient", None)):
        if backend in outputs:
            ref, row.reference = outputs[backend], name
            break
        if backend is None:
            try:
                with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
                    ref = F.scaled_dot_product_attention(q, k, v, is_causal=shape.causal)
                row.reference = name
            except Exception as err:  # noqa: BLE001
                ref = None
                log(f"  no SDPA reference for the error check: {_reason(err)}")
    if ref is not None:
        for system in ("flashx_torch", "flashx_jax"):
            if system in outputs:
                err = _rel_err(outputs[system], ref)
                row.results[system].err = err
                flag = "  <-- WRONG?" if not (err < ctx["err_limit"]) else ""
                log(f"  {SYSTEMS[system]:<15} rel err vs {row.reference}: {err:.2e}{flag}")
        if "sdpa_flash" in outputs and "sdpa_cudnn" in outputs:
            log(f"  (SDPA cuDNN vs FA2 rel err: {_rel_err(outputs['sdpa_cudnn'], outputs['sdpa_flash']):.2e})")

    return row  # the inputs and outputs go with this frame; main() then empties torch's cache


# ----------------------------------------------------------------------------------------------
# Reports


def _fmt(x: Optional[float], spec: str) -> str:
    if x is None:
        return "-"
    return "NaN" if math.isnan(x) else format(x, spec)


def markdown(rows: list, env: dict, args: argparse.Namespace, settings: dict) -> str:
    systems = [s for s in SYSTEMS if s in args.systems]
    lines = [
        "# flashx forward throughput",
        "",
        f"- date: {env['date']}",
        f"- GPU: {env['gpu']}, driver {env['driver']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}",
        f"- versions: python {env['python']}, torch {env['torch']}, triton {env['triton']}, jax {env['jax']} "
        f"(jaxlib {env['jaxlib']}), jax-triton {env['jax-triton']}, flashx {env['flashx']}",
        f"- {settings['dtype']}, B*N = {TOKENS} tokens, H*D = {HIDDEN}, Nq = Nkv = N, layout (B, H, N, D) for every system"
        " (flashx: layout=\"bhnd\", same buffers)",
        "- TFLOP/s = 4*B*H*N*N*D / time, halved when causal",
        f"- timing: torch: triton.testing.do_bench median (warmup {settings['warmup_ms']:g} ms, rep {settings['rep_ms']:g} ms);"
        " JAX: jitted, compile and warm-up excluded, median over samples of back-to-back calls ended by block_until_ready",
        "- ratios: flashx (torch) TFLOP/s over the peer's; err: relative Frobenius error of flashx's output vs SDPA's"
        " (FA2's, else cuDNN's)",
        "",
    ]
    head = ["D", "N", "B", "H", "causal"] + [SYSTEMS[s] for s in systems]
    ratios = [(peer, label) for peer, label in RATIOS if peer in systems and "flashx_torch" in systems]
    head += [label for _, label in ratios]
    errs = [s for s in ("flashx_torch", "flashx_jax") if s in systems]
    head += [f"err {SYSTEMS[s].split('(')[1].rstrip(')')}" for s in errs]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join("---:" for _ in head) + "|")
    failures = []
    for row in rows:
        s, r = row.shape, row.results
        cells = [str(s.head_dim), str(s.seqlen), str(s.batch), str(s.heads), "yes" if s.causal else "no"]
        cells += [_fmt(r[sys_].tflops, ".1f") if sys_ in r else "-" for sys_ in systems]
        mine = r.get("flashx_torch")
        for peer, _ in ratios:
            theirs = r.get(peer)
            ok = mine and theirs and mine.tflops and theirs.tflops
            cells.append(f"{mine.tflops / theirs.tflops:.2f}" if ok else "-")
        cells += [_fmt(r[e].err, ".1e") if e in r else "-" for e in errs]
        lines.append("| " + " | ".join(cells) + " |")
        failures += [f"- {s.name}, {SYSTEMS[k]}: {res.reason}" for k, res in r.items() if res.reason]
        failures += [
            f"- {s.name}, {SYSTEMS[k]}: relative error {res.err:.2e} (above {settings['err_limit']:g}: check correctness)"
            for k, res in r.items()
            if res.err is not None and not res.err < settings["err_limit"]
        ]
    if failures:
        lines += ["", "Not measured or suspect (\"-\" above):", ""] + failures
    return "\n".join(lines) + "\n"


def plot(rows: list, args: argparse.Namespace, settings: dict, path: Path, log) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as err:  # noqa: BLE001
        log(f"no plot: {_reason(err)}")
        return
    head_dims = sorted({r.shape.head_dim for r in rows})
    causal_flags = sorted({r.shape.causal for r in rows})
    fig, axes = plt.subplots(
        len(head_dims), len(causal_flags), figsize=(5.5 * len(causal_flags), 3.6 * len(head_dims)), squeeze=False
    )
    markers = dict(zip(SYSTEMS, "osD^", strict=True))
    for i, d in enumerate(head_dims):
        for j, causal in enumerate(causal_flags):
            ax = axes[i][j]
            mine = sorted((r for r in rows if r.shape.head_dim == d and r.shape.causal == causal), key=lambda r: r.shape.seqlen)
            for system in (s for s in SYSTEMS if s in args.systems):
                xs = [r.shape.seqlen for r in mine]
                ys = [getattr(r.results.get(system), "tflops", None) or float("nan") for r in mine]
                ax.plot(xs, ys, marker=markers[system], label=SYSTEMS[system])
            ax.set_xscale("log", base=2)
            ax.set_xticks([r.shape.seqlen for r in mine], [f"{r.shape.seqlen // 1024}k" for r in mine])
            ax.set_title(f"D={d}, {'causal' if causal else 'non-causal'}, B*N={TOKENS // 1024}k, H*D={HIDDEN}")
            ax.set_xlabel("N (Nq = Nkv)")
            ax.set_ylabel("TFLOP/s")
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(f"Forward attention, {settings['dtype']}, {settings['gpu']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    args = parse_args(argv)
    warmup_ms = args.warmup_ms if args.warmup_ms is not None else (10.0 if args.quick else 25.0)
    rep_ms = args.rep_ms if args.rep_ms is not None else (50.0 if args.quick else 100.0)
    head_dims = args.d or (QUICK_HEAD_DIMS if args.quick else HEAD_DIMS)
    seqlens = args.n or (QUICK_SEQLENS if args.quick else SEQLENS)
    causal_flags = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    shapes = shapes_for(head_dims, seqlens, causal_flags)

    def log(msg: str) -> None:
        print(msg, flush=True)

    import flashx  # first: decides compiled vs interpreted before triton is imported

    import torch

    if not torch.cuda.is_available() or flashx.core.runtime.INTERPRETER:
        print("bench_forward.py needs a CUDA GPU (and flashx compiled for it, TRITON_INTERPRET unset)", file=sys.stderr)
        return 2

    ctx = {"torch": torch, "verbose_errors": bool(os.environ.get("FLASHX_BENCH_TRACEBACK"))}
    ctx["err_limit"] = 2e-2 if args.dtype == "bf16" else 5e-3
    if "flashx_jax" in args.systems:
        try:
            import jax
            import jax.dlpack  # noqa: F401

            if jax.default_backend() != "gpu":
                raise RuntimeError(f"JAX's default backend is {jax.default_backend()!r}, not 'gpu'")
            ctx["jax"] = jax
        except Exception as err:  # noqa: BLE001
            ctx["jax_missing"] = f"JAX unavailable: {_reason(err)}"
            log(ctx["jax_missing"])

    env = environment(torch)
    settings = dict(
        dtype=DTYPES[args.dtype], warmup_ms=warmup_ms, rep_ms=rep_ms, err_limit=ctx["err_limit"], gpu=env["gpu"].split(" (")[0]
    )
    log(f"{env['gpu']}, driver {env['driver']}; torch {env['torch']}, triton {env['triton']}, jax {env['jax']}, "
        f"jax-triton {env['jax-triton']}; {len(shapes)} shapes, {settings['dtype']}")

    rows = []
    start = time.perf_counter()
    for shape in shapes:
        log(f"{shape.name}  ({shape.flops / 1e12:.3f} TFLOP)")
        try:
            rows.append(bench_shape(shape, settings["dtype"], args.systems, ctx, warmup_ms, rep_ms, log))
        except Exception as err:  # noqa: BLE001 (e.g. out of memory making the inputs: the row shows "-")
            log(f"  shape failed: {_reason(err)}")
            rows.append(Row(shape, results={s: Result(reason=f"shape failed: {_reason(err)}") for s in args.systems}))
        try:
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass
    log(f"done in {time.perf_counter() - start:.0f} s")

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = markdown(rows, env, args, settings)
    (out_dir / "forward.md").write_text(table)
    raw = {
        "environment": env,
        "settings": settings,
        "rows": [
            {
                "B": r.shape.batch, "H": r.shape.heads, "N": r.shape.seqlen, "D": r.shape.head_dim,
                "causal": r.shape.causal, "reference": r.reference,
                **{k: {"tflops": v.tflops, "ms": v.ms, "err": v.err, "reason": v.reason} for k, v in r.results.items()},
            }
            for r in rows
        ],
    }
    (out_dir / "forward.json").write_text(json.dumps(raw, indent=1) + "\n")
    plot(rows, args, settings, out_dir / "forward.png", log)
    log(f"wrote {out_dir / 'forward.md'}, {out_dir / 'forward.json'}, {out_dir / 'forward.png'}\n")
    print(table, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
