#!/usr/bin/env python3
"""Forward attention throughput: flashx (torch and JAX frontends) beside torch SDPA's FA2 and
cuDNN, FlexAttention, jax.nn.dot_product_attention's cuDNN and JAX's Pallas GPU attention.

Shapes, bf16 by default:
- the dense sweep: B*N = 16k tokens, H*D = 2048, D in {64, 128, 256}, N = Nq = Nkv in
  {1k, 4k, 16k} (B = 16k / N, H = 2048 / D), causal and not;
- short sequences (the issue's target, flashx >= 1.5x FA2): B = 64, H = 16, D = 128,
  N in {256, 512}, causal (run first, so a spent --budget-s skips sweep shapes instead).
Every torch system gets the very same q, k, v of shape (B, H, N, D): SDPA's native layout, and
flashx's layout="bhnd" (no copies; flashx's JAX frontend sees the same buffers through DLPack).
The JAX peers take (B, N, H, D) only: they get a copy in that layout, made once per shape,
outside the timing.

Systems (the JAX ones jitted):
- FlexAttention: torch.compile(flex_attention, dynamic=False), causal through a block mask from
  create_block_mask(causal), built once per shape;
- jax.nn cuDNN: jax.nn.dot_product_attention(implementation="cudnn");
- Pallas GPU: jax.experimental.pallas.ops.gpu.attention.mha (Triton lowering, default block
  sizes, sm_scale = 1/sqrt(D)); with --device cpu in Pallas' interpret mode.

FLOPs: 4 * B * H * Nq * Nkv * D, halved when causal.
Timing: torch with triton.testing.do_bench (median, L2 flushed between calls); JAX with a
jitted function, warm-up (compile included) excluded: calls issued back to back on the same
random inputs, block_until_ready on the last of each ~20 ms sample, median ms a call
(common.time_jax says why not a jitted loop). flashx's JAX frontend is timed so in turns with its
torch frontend's same call timed the same way, round by round (common.time_back_to_back_in_turns):
the like-for-like `b2b` ratio.

A system that fails on a shape (a backend not available, an error, out of memory) is shown as
"-" and its reason is printed and listed under the table; the run goes on. Every system's output
is checked against SDPA's (FA2's, else cuDNN's) once per shape (relative Frobenius error): flashx's
is in the table, the peers' are printed, and any above the dtype's limit is listed under the
table, so a fast but wrong kernel shows.

Writes DIR/forward.md (tables with a header naming the date, GPU, driver and versions),
DIR/forward.json (raw numbers) and DIR/forward.png (the sweep's TFLOP/s vs N, one panel per D
and causal flag), DIR defaulting to benchmarks/results/h200; prints the markdown tables last.

    python benchmarks/bench_forward.py            # short shapes and the full sweep (2 + 18 shapes)
    python benchmarks/bench_forward.py --quick    # short shapes, D in {64, 128} at N = 4k; ~2 minutes on an H200
    python benchmarks/bench_forward.py --short    # the short shapes only
    python benchmarks/bench_forward.py --device cpu   # debug pass: interpreter, tiny shapes

Needs a CUDA GPU (but --device cpu); importing this module does no work (no framework is
imported). FLASHX_BENCH_TRACEBACK=1 prints the full traceback of each failure. Shared helpers
(environment, timing, failure capture) live in benchmarks/common.py.
"""
from __future__ import annotations

import argparse
import functools
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
QUICK_SEQLENS = (4096,)
# Short sequences, the issue's target (flashx >= 1.5x FA2's forward): B = 64, D = 128, causal.
SHORT_BATCH, SHORT_HEAD_DIM, SHORT_SEQLENS = 64, 128, (256, 512)
# --device cpu (debug): tiny shapes the interpreter gets through quickly.
CPU_TOKENS, CPU_HIDDEN, CPU_HEAD_DIMS, CPU_SEQLENS = common.CPU_TOKENS, common.CPU_HIDDEN, (16,), (32,)
CPU_SHORT_BATCH, CPU_SHORT_HEAD_DIM, CPU_SHORT_SEQLENS = 4, 16, (16, 32)
QUICK_BUDGET_S = 120.0  # alone; run_all.sh --quick passes its own --budget-s (caps there)

SYSTEMS, JAX_SYSTEMS, RATIOS = common.DENSE_SYSTEMS, common.JAX_SYSTEMS, common.DENSE_RATIOS
ERR_COLUMNS = ("flashx_torch", "flashx_jax")  # the table's err columns; the peers' errors are printed
GROUPS = {
    "short": "Short sequences: B = {batch}, H = {heads}, D = {head_dim}, causal (the issue's target: flashx >= 1.5x FA2)",
    "sweep": "Dense sweep: B*N = {tokens} tokens, H*D = {hidden}",
}


@dataclass
class Row:
    shape: Shape
    group: str  # a key of GROUPS
    results: dict = field(default_factory=dict)  # system -> Result
    reference: Optional[str] = None  # which SDPA backend the errors are measured against

    def fill(self, systems, why: str) -> None:
        """Systems not measured (yet) get `why` as their reason."""
        for system in systems:
            self.results.setdefault(system, Result(reason=why))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Forward attention TFLOP/s: flashx (torch, JAX) vs torch SDPA's FA2 and cuDNN backends, "
        "FlexAttention, jax.nn.dot_product_attention (cuDNN) and JAX's Pallas GPU attention.",
        epilog=f"Shapes: short: B={SHORT_BATCH}, H={HIDDEN // SHORT_HEAD_DIM}, D={SHORT_HEAD_DIM}, N in {SHORT_SEQLENS}, "
        f"causal; sweep: B*N={TOKENS}, H*D={HIDDEN}, D in {HEAD_DIMS}, N in {SEQLENS} (--quick: D in {QUICK_HEAD_DIMS}, "
        f"N in {QUICK_SEQLENS}), causal and not. --d/--n replace the sweep's and drop the short shapes.",
    )
    common.add_common_args(p, "forward", "the short shapes, a subset of the sweep and shorter timing (~2 minutes on an H200)",
                           QUICK_BUDGET_S)
    p.add_argument("--short", action="store_true", help="only the short shapes (B=64, N in {256, 512}, D=128, causal)")
    p.add_argument("--d", type=int, nargs="+", metavar="D", help="head dims to run (overrides the sweep's)")
    p.add_argument("--n", type=int, nargs="+", metavar="N", help="sequence lengths to run (overrides the sweep's)")
    p.add_argument("--causal", choices=("both", "yes", "no"), default="both", help="causal shapes to run (default: %(default)s)")
    p.add_argument(
        "--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS), help="systems to run (default: all)"
    )
    args = p.parse_args(argv)
    if args.short and (args.d or args.n):
        p.error("--short runs the short shapes only: it takes no --d or --n")
    return args


def shapes_to_run(args: argparse.Namespace) -> list:
    """[(group, Shape)]: the short shapes first (causal only), then the sweep (unless --short)."""
    cpu = args.device == "cpu"
    causal_flags = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    out = []
    if True in causal_flags and (args.short or not (args.d or args.n)):
        batch, head_dim, seqlens = (CPU_SHORT_BATCH, CPU_SHORT_HEAD_DIM, CPU_SHORT_SEQLENS) if cpu else (
            SHORT_BATCH, SHORT_HEAD_DIM, SHORT_SEQLENS)
        hidden = CPU_HIDDEN if cpu else HIDDEN
        out += [("short", Shape(batch=batch, heads=hidden // head_dim, seqlen=n, head_dim=head_dim, causal=True))
                for n in seqlens]
    if args.short:
        if not out:
            raise SystemExit("--short: the short shapes are causal, and --causal no leaves none")
        return out
    if cpu:
        tokens, hidden = CPU_TOKENS, CPU_HIDDEN
        head_dims, seqlens = args.d or CPU_HEAD_DIMS, args.n or CPU_SEQLENS
    else:
        tokens, hidden = TOKENS, HIDDEN
        head_dims = args.d or (QUICK_HEAD_DIMS if args.quick else HEAD_DIMS)
        seqlens = args.n or (QUICK_SEQLENS if args.quick else SEQLENS)
    return out + [("sweep", shape) for shape in shapes_for(head_dims, seqlens, causal_flags, tokens, hidden)]


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
            ms, out, wall_ms = value
            res = common.measured(ms, shape.flops)
            res.wall_ms = wall_ms
            if out is not None:
                outputs[system] = out
        else:
            res = Result(reason=why)
        row.results[system] = res
        if res.reason:
            log(f"  {SYSTEMS[system]:<15} -  ({res.reason})")
        else:
            back_to_back = f"  (back to back {res.wall_ms:.3f} ms)" if res.wall_ms else ""
            log(f"  {SYSTEMS[system]:<15} {res.tflops:7.1f} TFLOP/s  {res.ms:8.3f} ms{back_to_back}")

    def sdpa(backend):
        def run():
            with sdpa_kernel([backend]):
                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=shape.causal)  # noqa: E731
                out = fn()
                return common.time_torch(fn, warmup_ms, rep_ms, device), out, None
        return run

    torch_calls = {}  # system -> its timed call, for flashx_jax's like-for-like timing

    def torch_system(system, make_attention):
        """make_attention() -> (q, k, v) -> out, called inside the guarded run (set-up failures are its reason)."""
        def run():
            fn = functools.partial(make_attention(), q, k, v)
            out = fn()
            ms = common.time_torch(fn, warmup_ms, rep_ms, device)
            torch_calls[system] = fn
            return ms, out, None
        return run

    def flashx_torch_attention():
        return functools.partial(flashx.torch.attention, causal=shape.causal, layout="bhnd")

    def jax_system(make_attention, bnhd: bool, torch_twin: Optional[str] = None):
        """make_attention() -> a JAX (q, k, v) -> out, jitted here; bnhd: it takes (B, N, H, D) (a copy of
        the inputs, made before the timing) rather than the torch buffers' (B, H, N, D). torch_twin:
        the torch system running the same kernels (flashx_torch): where it ran, this system and its
        call are timed back to back in turns (common.time_back_to_back_in_turns): this system's
        figure from there, the twin's back-to-back time its wall_ms (the like-for-like ratio)."""
        def run():
            jax = common.require_jax(ctx)
            convert = common.jax_bnhd_from_torch if bnhd else common.jax_from_torch
            args = tuple(convert(jax, t) for t in (q, k, v))
            if device == "cuda":
                torch.cuda.synchronize()  # these buffers are torch's (and maybe copies): written before JAX reads them
            fn = jax.jit(make_attention())
            twin = torch_calls.get(torch_twin)
            if twin is None:
                ms = common.time_jax(fn, args, warmup_ms, rep_ms)
            else:
                wall_ms, ms = common.time_back_to_back_in_turns(twin, fn, args, warmup_ms, rep_ms, device)
                row.results[torch_twin].wall_ms = wall_ms
                log(f"  {SYSTEMS[torch_twin]:<15} back to back {wall_ms:.3f} ms (in turns with {SYSTEMS['flashx_jax']})")
            out = jax.block_until_ready(fn(*args))
            back = common.torch_bhnd_from_jax if bnhd else common.torch_from_jax
            return ms, back(torch, out, device), None
        return run

    def flashx_jax_attention():
        import flashx.jax

        return functools.partial(flashx.jax.attention, causal=shape.causal, layout="bhnd")

    runners = {
        "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION),
        "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
        "flashx_torch": torch_system("flashx_torch", flashx_torch_attention),
        "flex": torch_system("flex", lambda: common.flex_for(ctx, shape.causal, shape.seqlen)),
        "flashx_jax": jax_system(flashx_jax_attention, bnhd=False, torch_twin="flashx_torch"),
        "jax_cudnn": jax_system(lambda: common.jax_peer("jax_cudnn", shape.causal, shape.head_dim, device), bnhd=True),
        "pallas": jax_system(lambda: common.jax_peer("pallas", shape.causal, shape.head_dim, device), bnhd=True),
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
        for system, out in outputs.items():
            if out is ref:
                continue
            err = common.rel_err(out, ref)
            row.results[system].err = err
            flag = "  <-- WRONG?" if not (err < ctx["err_limit"]) else ""
            log(f"  {SYSTEMS[system]:<15} rel err vs {row.reference}: {err:.2e}{flag}")

    # the inputs and outputs go with this frame; main() then empties torch's cache


# ----------------------------------------------------------------------------------------------
# Reports


_fmt = common.fmt


def markdown(rows: list, env: dict, args: argparse.Namespace, settings: dict) -> str:
    systems = [s for s in SYSTEMS if s in args.systems]
    lines = common.header_lines("flashx forward throughput", env) + [
        f"- {settings['dtype']}, Nq = Nkv = N; torch systems: q, k, v of shape (B, H, N, D) (flashx: layout=\"bhnd\", same"
        " buffers; flashx's JAX frontend: the same buffers through DLPack); jax.nn cuDNN and Pallas GPU: a (B, N, H, D) copy",
        "- TFLOP/s = 4*B*H*N*N*D / time, halved when causal",
        f"- timing: torch: triton.testing.do_bench median (warmup {settings['warmup_ms']:g} ms, rep {settings['rep_ms']:g} ms);"
        f" {common.JAX_TIMING_NOTE}; {common.SETTLE_NOTE};"
        f" {common.rounds_note(settings['rounds'])}",
        "- FlexAttention: torch.compile(flex_attention, dynamic=False), block mask from create_block_mask(causal) when causal;"
        " jax.nn cuDNN: jax.nn.dot_product_attention(implementation=\"cudnn\"); Pallas GPU:"
        " jax.experimental.pallas.ops.gpu.attention.mha (default block sizes)",
        "- ratios: TFLOP/s over the peer's (flashx: the torch frontend; flashx jax: the JAX frontend); err: relative"
        " Frobenius error of flashx's output vs SDPA's (FA2's, else cuDNN's); the peers' are in the log and the .json",
    ]
    ratios = [(mine, peer, label) for mine, peer, label in RATIOS if mine in systems and peer in systems]
    like_for_like = {"flashx_torch", "flashx_jax"} <= set(systems)
    if like_for_like:
        lines.append(f"- {common.BACK_TO_BACK_LABEL}: {common.BACK_TO_BACK_NOTE}")
    errs = [s for s in ERR_COLUMNS if s in systems]
    head = ["D", "N", "B", "H", "causal"] + [SYSTEMS[s] for s in systems] + [label for _, _, label in ratios]
    head += [common.BACK_TO_BACK_LABEL] if like_for_like else []
    head += [f"err {SYSTEMS[s].split('(')[1].rstrip(')')}" for s in errs]
    failures = common.Failures()
    for group, title in GROUPS.items():
        mine = [row for row in rows if row.group == group]
        if not mine:
            continue
        s0 = mine[0].shape
        title = title.format(batch=s0.batch, heads=s0.heads, head_dim=s0.head_dim, tokens=settings["tokens"],
                             hidden=settings["hidden"])
        body = []
        for row in mine:
            s, r = row.shape, row.results
            cells = [str(s.head_dim), str(s.seqlen), str(s.batch), str(s.heads), "yes" if s.causal else "no"]
            cells += [_fmt(r[sys_].tflops, ".1f") if sys_ in r else "-" for sys_ in systems]
            cells += [common.ratio(r.get(a), r.get(b)) for a, b, _ in ratios]
            cells += [common.ratio_back_to_back(r.get("flashx_jax"), r.get("flashx_torch"))] if like_for_like else []
            cells += [_fmt(r[e].err, ".1e") if e in r else "-" for e in errs]
            body.append(cells)
            for k, res in r.items():
                if res.reason:
                    failures.add(s.name, SYSTEMS[k], res.reason)
                if res.err is not None and not res.err < settings["err_limit"]:
                    failures.add(s.name, SYSTEMS[k], f"relative error {res.err:.2e} vs {row.reference} (above "
                                 f"{settings['err_limit']:g}: check correctness)")
        lines += ["", f"## {title}", ""] + common.md_table(head, body)
    lines += failures.lines()
    return "\n".join(lines) + "\n"


def plot(rows: list, args: argparse.Namespace, settings: dict, path: Path, log) -> bool:
    """The sweep's TFLOP/s vs N (the short shapes have their own B: not on these curves); False if none."""
    rows = [r for r in rows if r.group == "sweep"]
    plt = common.pyplot(log) if rows else None
    if plt is None:
        return False
    head_dims = sorted({r.shape.head_dim for r in rows})
    causal_flags = sorted({r.shape.causal for r in rows})
    fig, axes = plt.subplots(
        len(head_dims), len(causal_flags), figsize=(5.5 * len(causal_flags), 3.6 * len(head_dims)), squeeze=False
    )
    markers = dict(zip(SYSTEMS, "osD^v<>", strict=True))
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
    return True


# ----------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    args = parse_args(argv)
    device = args.device
    warmup_ms, rep_ms = common.timing_defaults(args)
    tokens, hidden = (CPU_TOKENS, CPU_HIDDEN) if device == "cpu" else (TOKENS, HIDDEN)
    shapes = shapes_to_run(args)
    deadline = common.Deadline(args.budget_s if args.budget_s is not None else (QUICK_BUDGET_S if args.quick else None))

    log = common.log

    torch = common.start("bench_forward.py", device, log)
    if torch is None:
        return 2

    ctx = {"torch": torch, "device": device, "verbose_errors": common.verbose_errors()}
    ctx["err_limit"] = common.ERR_LIMITS[args.dtype]
    if any(s in args.systems for s in JAX_SYSTEMS):
        common.init_jax(ctx, device, log)

    env = common.environment(torch, device)
    settings = dict(
        dtype=DTYPES[args.dtype], warmup_ms=warmup_ms, rep_ms=rep_ms, rounds=common.ROUNDS, err_limit=ctx["err_limit"],
        gpu=env["gpu"].split(" (")[0],
        tokens=tokens, hidden=hidden, budget_s=deadline.seconds, device=device,
    )
    log(f"{common.environment_line(env)}; {len(shapes)} shapes, {settings['dtype']}")

    rows = []
    start = time.perf_counter()
    stop = None  # why the remaining shapes are skipped, once they are
    for group, shape in shapes:
        if stop is None and deadline.expired:
            stop = deadline.why()
        if stop is not None:
            log(f"{shape.name}: {stop}")
            rows.append(Row(shape, group, results={s: Result(reason=stop) for s in args.systems}))
            continue
        log(f"{shape.name}  ({shape.flops / 1e12:.3f} TFLOP)")
        row = Row(shape, group)
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

    table = markdown(rows, env, args, settings)
    raw = {
        "environment": env,
        "settings": settings,
        "rows": [
            {
                "group": r.group, "B": r.shape.batch, "H": r.shape.heads, "N": r.shape.seqlen, "D": r.shape.head_dim,
                "causal": r.shape.causal, "reference": r.reference,
                **{k: v.to_json() for k, v in r.results.items()},
            }
            for r in rows
        ],
    }
    common.write_report(common.output_dir(args), "forward", table, raw,
                        plot=lambda path: plot(rows, args, settings, path, log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
