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
    python benchmarks/bench_forward.py --quick    # subset, about a minute on an H200 (mostly compiles)
    python benchmarks/bench_forward.py --device cpu   # debug pass: interpreter, tiny shapes

Needs a CUDA GPU (but --device cpu); importing this module does no work (no framework is
imported). FLASHX_BENCH_TRACEBACK=1 prints the full traceback of each failure. Shared helpers
(environment, timing, failure capture) live in benchmarks/common.py.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

try:  # python -m benchmarks.bench_forward
    from . import common
except ImportError:  # python benchmarks/bench_forward.py
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import common  # sets XLA_PYTHON_CLIENT_PREALLOCATE=false: torch and JAX share this process

Result = common.Result
Shape = common.Shape
shapes_for = common.shapes_for
DTYPES = common.DTYPES
# The dense sweep, shared with bench_backward.py: B*N tokens, H*D hidden, head dims, sequence lengths.
TOKENS, HIDDEN, HEAD_DIMS, SEQLENS = common.TOKENS, common.HIDDEN, common.HEAD_DIMS, common.SEQLENS
QUICK_HEAD_DIMS = (64, 128)
QUICK_SEQLENS = (1024, 4096)
# --device cpu (debug): tiny shapes the interpreter gets through quickly.
CPU_TOKENS, CPU_HIDDEN, CPU_HEAD_DIMS, CPU_SEQLENS = common.CPU_TOKENS, common.CPU_HIDDEN, (16,), (32,)
QUICK_BUDGET_S = 60.0  # run_all.sh --quick runs three scripts in about four minutes

# name -> label; flashx first, peers after. Ratios are flashx (torch) over each peer.
SYSTEMS = {
    "flashx_torch": "flashx (torch)",
    "flashx_jax": "flashx (jax)",
    "sdpa_flash": "SDPA FA2",
    "sdpa_cudnn": "SDPA cuDNN",
}
RATIOS = (("sdpa_flash", "flashx/FA2"), ("sdpa_cudnn", "flashx/cuDNN"))
@dataclass
class Row:
    shape: Shape
    results: dict = field(default_factory=dict)  # system -> Result
    reference: Optional[str] = None  # which SDPA backend the errors are measured against

    def fill(self, systems, why: str) -> None:
        """Systems not measured (yet) get `why` as their reason."""
        for system in systems:
            self.results.setdefault(system, Result(reason=why))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Forward attention TFLOP/s: flashx (torch, JAX) vs torch SDPA's FA2 and cuDNN backends.",
        epilog=f"Shapes: B*N={TOKENS}, H*D={HIDDEN}; full sweep D in {HEAD_DIMS}, N in {SEQLENS}; "
        f"--quick: D in {QUICK_HEAD_DIMS}, N in {QUICK_SEQLENS}; causal and not.",
    )
    common.add_common_args(p, "forward", "a subset of shapes and shorter timing (about a minute on an H200)", QUICK_BUDGET_S)
    p.add_argument("--d", type=int, nargs="+", metavar="D", help="head dims to run (overrides the sweep's)")
    p.add_argument("--n", type=int, nargs="+", metavar="N", help="sequence lengths to run (overrides the sweep's)")
    p.add_argument("--causal", choices=("both", "yes", "no"), default="both", help="causal shapes to run (default: %(default)s)")
    p.add_argument(
        "--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS), help="systems to run (default: all)"
    )
    return p.parse_args(argv)


# ----------------------------------------------------------------------------------------------
# One shape


def bench_shape(row: Row, dtype_name: str, systems: list, ctx: dict, warmup_ms: float, rep_ms: float, log) -> None:
    """Measure every system on row.shape, filling row in place (so an interrupted shape keeps what it measured)."""
    shape = row.shape
    torch = ctx["torch"]
    device = ctx["device"]
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import flashx.torch

    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device=device).manual_seed(0)
    size = (shape.batch, shape.heads, shape.seqlen, shape.head_dim)
    q, k, v = (torch.randn(size, device=device, dtype=dtype, generator=gen) for _ in range(3))
    outputs = {}

    def record(system, run):
        """Run one system; any failure becomes a '-' with its reason."""
        value, why = common.guarded(run, ctx)
        if why is None:
            ms, out = value
            res = common.measured(ms, shape.flops)
            if out is not None:
                outputs[system] = out
        else:
            res = Result(reason=why)
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
                return common.time_torch(fn, warmup_ms, rep_ms, device), out
        return run

    def flashx_torch():
        fn = lambda: flashx.torch.attention(q, k, v, causal=shape.causal, layout="bhnd")  # noqa: E731
        out = fn()
        return common.time_torch(fn, warmup_ms, rep_ms, device), out

    def flashx_jax():
        jax = common.require_jax(ctx)
        import flashx.jax

        if device == "cuda":
            torch.cuda.synchronize()  # the buffers below are torch's; make sure they are written
        jq, jk, jv = (common.jax_from_torch(jax, t) for t in (q, k, v))
        fn = jax.jit(functools.partial(flashx.jax.attention, causal=shape.causal, layout="bhnd"))
        ms = common.time_jax(fn, (jq, jk, jv), warmup_ms, rep_ms)
        out = fn(jq, jk, jv)
        out.block_until_ready()
        return ms, common.torch_from_jax(torch, out, device)

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
                log(f"  no SDPA reference for the error check: {common.reason(err)}")
    if ref is not None:
        for system in ("flashx_torch", "flashx_jax"):
            if system in outputs:
                err = common.rel_err(outputs[system], ref)
                row.results[system].err = err
                flag = "  <-- WRONG?" if not (err < ctx["err_limit"]) else ""
                log(f"  {SYSTEMS[system]:<15} rel err vs {row.reference}: {err:.2e}{flag}")
        if "sdpa_flash" in outputs and "sdpa_cudnn" in outputs:
            log(f"  (SDPA cuDNN vs FA2 rel err: {common.rel_err(outputs['sdpa_cudnn'], outputs['sdpa_flash']):.2e})")

    # the inputs and outputs go with this frame; main() then empties torch's cache


# ----------------------------------------------------------------------------------------------
# Reports


_fmt = common.fmt


def markdown(rows: list, env: dict, args: argparse.Namespace, settings: dict) -> str:
    systems = [s for s in SYSTEMS if s in args.systems]
    lines = common.header_lines("flashx forward throughput", env) + [
        f"- {settings['dtype']}, B*N = {settings['tokens']} tokens, H*D = {settings['hidden']}, Nq = Nkv = N, layout (B, H, N, D) for every system"
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
    failures = common.Failures()
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
        for k, res in r.items():
            if res.reason:
                failures.add(s.name, SYSTEMS[k], res.reason)
            if res.err is not None and not res.err < settings["err_limit"]:
                failures.add(s.name, SYSTEMS[k], f"relative error {res.err:.2e} (above {settings['err_limit']:g}: check correctness)")
    lines += failures.lines()
    return "\n".join(lines) + "\n"


def plot(rows: list, args: argparse.Namespace, settings: dict, path: Path, log) -> None:
    plt = common.pyplot(log)
    if plt is None:
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
            ax.set_xticks([r.shape.seqlen for r in mine], [f"{r.shape.seqlen / 1024:g}k" for r in mine])
            ax.set_title(f"D={d}, {'causal' if causal else 'non-causal'}, B*N={settings['tokens']}, H*D={settings['hidden']}")
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
    device = args.device
    warmup_ms, rep_ms = common.timing_defaults(args)
    if device == "cpu":
        tokens, hidden = CPU_TOKENS, CPU_HIDDEN
        head_dims, seqlens = args.d or CPU_HEAD_DIMS, args.n or CPU_SEQLENS
    else:
        tokens, hidden = TOKENS, HIDDEN
        head_dims = args.d or (QUICK_HEAD_DIMS if args.quick else HEAD_DIMS)
        seqlens = args.n or (QUICK_SEQLENS if args.quick else SEQLENS)
    causal_flags = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    shapes = shapes_for(head_dims, seqlens, causal_flags, tokens, hidden)
    deadline = common.Deadline(args.budget_s if args.budget_s is not None else (QUICK_BUDGET_S if args.quick else None))

    def log(msg: str) -> None:
        print(msg, flush=True)

    torch = common.start("bench_forward.py", device, log)
    if torch is None:
        return 2

    ctx = {"torch": torch, "device": device, "verbose_errors": bool(os.environ.get("FLASHX_BENCH_TRACEBACK"))}
    ctx["err_limit"] = common.ERR_LIMITS[args.dtype]
    if "flashx_jax" in args.systems:
        common.init_jax(ctx, device, log)

    env = common.environment(torch, device)
    settings = dict(
        dtype=DTYPES[args.dtype], warmup_ms=warmup_ms, rep_ms=rep_ms, err_limit=ctx["err_limit"], gpu=env["gpu"].split(" (")[0],
        tokens=tokens, hidden=hidden, budget_s=deadline.seconds, device=device,
    )
    log(f"{env['gpu']}, driver {env['driver']}; torch {env['torch']}, triton {env['triton']}, jax {env['jax']}, "
        f"jax-triton {env['jax-triton']}; {len(shapes)} shapes, {settings['dtype']}")

    rows = []
    start = time.perf_counter()
    stop = None  # why the remaining shapes are skipped, once they are
    for shape in shapes:
        if stop is None and deadline.expired:
            stop = deadline.why()
        if stop is not None:
            log(f"{shape.name}: {stop}")
            rows.append(Row(shape, results={s: Result(reason=stop) for s in args.systems}))
            continue
        log(f"{shape.name}  ({shape.flops / 1e12:.3f} TFLOP)")
        row = Row(shape)
        rows.append(row)
        try:
            bench_shape(row, settings["dtype"], args.systems, ctx, warmup_ms, rep_ms, log)
        except KeyboardInterrupt:  # e.g. run_all.sh's timeout: keep what was measured, skip the rest
            stop = common.INTERRUPTED
            row.fill(args.systems, stop)
            log("  interrupted; the remaining shapes are skipped")
        except Exception as err:  # noqa: BLE001 (e.g. out of memory making the inputs: the row shows "-")
            log(f"  shape failed: {common.reason(err)}")
            row.fill(args.systems, f"shape failed: {common.reason(err)}")
        common.empty_cache(torch, device)
    log(f"done in {time.perf_counter() - start:.0f} s")

    out_dir = common.output_dir(args)
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
    common.write_json(out_dir / "forward.json", raw)
    plot(rows, args, settings, out_dir / "forward.png", log)
    log(f"wrote {out_dir / 'forward.md'}, {out_dir / 'forward.json'}, {out_dir / 'forward.png'}\n")
    print(table, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
