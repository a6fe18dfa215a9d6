#!/usr/bin/env python3
"""float32 attention: flashx at each float32_precision beside torch SDPA in float32.

Shapes: B = 2, N = 2048, 8 query heads over 2 kv heads (GQA; --shape), D in {64, 128, 256} (--d),
causal and not, float32 inputs. For each flashx precision (core.FLOAT32_PRECISIONS, --precisions) and for
SDPA (torch's default float32 backend, enable_gqa): the forward's and the forward + backward's
times (ms), and the errors of out, dq, dk and dv against float64 SDPA (the largest absolute
difference over the reference's largest element), so that each row gives speed and accuracy
together. The first flashx call at a precision (compiles included) is timed by the wall clock.

--tiles adds, for each precision, a system per spec that runs on other tiles: "f=BM,BN,W,S;k=...;
q=..." names the forward's, dK/dV's and dQ's (BLOCK_M, BLOCK_N, warps, stages), the kernels left
out keeping the tables'. tune.py's `_tiles_in_table` puts them where the plan reads them, at every
grid size, for that system's calls only (the plan cache cleared around them): the forward +
backward beside the tables' tiles in one process, where tune.py times each kernel alone.

    python benchmarks/bench_float32.py                       # all of it
    python benchmarks/bench_float32.py --quick --d 128       # shorter timing, one head dim
    python benchmarks/bench_float32.py --d 128 --precisions tf32x3 --no-sdpa --shape 8 2048 16 16 \
        --tiles "k=32,32,4,1" "k=64,32,8,1;q=32,32,4,2"      # tiles beside the tables' at one shape
    python benchmarks/bench_float32.py --device cpu          # debug pass: interpreter, tiny shapes

Writes DIR/float32.md and DIR/float32.json (DIR: --out, default benchmarks/results/h200); prints
the markdown last. Needs a CUDA GPU (but --device cpu); importing this module does no work.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

try:  # python -m benchmarks.bench_float32
    from . import common, tune
except ImportError:  # python benchmarks/bench_float32.py
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import common
    import tune

BATCH, SEQLEN, HEADS_Q, HEADS_KV = 2, 2048, 8, 2
HEAD_DIMS = (64, 128, 256)
PRECISIONS = ("tf32x3", "ieee", "tf32", "bf16x3")  # core.FLOAT32_PRECISIONS (checked in main)


TILE_KERNELS = {"f": "forward", "k": "dkdv", "q": "dq"}


def parse_tiles(spec: str) -> dict:
    """'f=BM,BN,W,S;k=...;q=...' -> {kernel: (BLOCK_M, BLOCK_N, warps, stages)}."""
    tiles = {}
    for part in spec.split(";"):
        name, _, numbers = part.strip().partition("=")
        values = numbers.split(",")
        if name not in TILE_KERNELS or TILE_KERNELS[name] in tiles or len(values) != 4:
            raise argparse.ArgumentTypeError(f"tiles {spec!r}: expected 'f=BM,BN,W,S;k=...;q=...' (each kernel once)")
        try:
            tiles[TILE_KERNELS[name]] = tuple(int(x) for x in values)
        except ValueError:
            raise argparse.ArgumentTypeError(f"tiles {spec!r}: {numbers!r} are not four integers") from None
        if min(tiles[TILE_KERNELS[name]]) < 1:
            raise argparse.ArgumentTypeError(f"tiles {spec!r}: {numbers!r} must be positive")
    return tiles


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="shorter timing")
    parser.add_argument("--d", type=int, nargs="+", default=list(HEAD_DIMS), help="head dims (default: %(default)s)")
    parser.add_argument("--causal", choices=("yes", "no", "both"), default="both")
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    parser.add_argument("--no-sdpa", action="store_true", help="leave torch SDPA out")
    parser.add_argument("--shape", type=int, nargs=4, metavar=("B", "N", "HQ", "HKV"),
                        default=[BATCH, SEQLEN, HEADS_Q, HEADS_KV], help="GPU shape (default: %(default)s)")
    parser.add_argument("--tiles", type=parse_tiles, nargs="+", default=[], metavar="SPEC",
                        help="also each precision on these tiles: 'f=BM,BN,W,S;k=...;q=...' (see above)")
    parser.add_argument("--warmup-ms", type=float, default=None)
    parser.add_argument("--rep-ms", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=1, help="settled timings a figure, their median kept")
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


def max_rel_err(out, ref) -> float:
    """The largest absolute difference over ref's largest magnitude (float64)."""
    return float((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300))


def tiles_name(tiles: dict) -> str:
    """--tiles' spec of `tiles`, for a system's name."""
    short = {kernel: name for name, kernel in TILE_KERNELS.items()}
    return ";".join(f"{short[k]}=" + ",".join(map(str, t)) for k, t in tiles.items())


@contextlib.contextmanager
def tiles_placed(tiles: dict, case: dict):
    """The tile tables with `tiles` where the plan reads them for `case` (tune.py's case keys:
    shape (B, N, H, D), q, causal, window, precision), plans made fresh inside and after."""
    from flashx.core import plan

    with contextlib.ExitStack() as stack:
        for kernel, kernel_tiles in tiles.items():
            stack.enter_context(tune._tiles_in_table(case, kernel, kernel_tiles))
        plan.clear_plan_cache()
        try:
            yield
        finally:
            plan.clear_plan_cache()


def bench_case(torch, ctx: dict, d: int, causal: bool, precisions: list, sdpa: bool, warmup_ms: float,
               rep_ms: float, log, tile_specs: tuple = ()) -> dict:
    """One (D, causal) case: {system: {fwd_ms, fwd_bwd_ms, first_s (flashx), errors [out, dq, dk, dv]}};
    a system per precision and tile spec besides ("flashx P [spec]")."""
    import torch.nn.functional as F

    import flashx.torch

    device, (batch, n, hq, hkv) = ctx["device"], ctx["shape"]
    gen = torch.Generator().manual_seed(d * 2 + causal)
    q, k, v = (torch.randn(batch, n, h, d, generator=gen).to(device).requires_grad_()
               for h in (hq, hkv, hkv))
    grad = torch.randn(batch, n, hq, d, generator=gen).to(device)
    wrt = (q, k, v)
    ref_in = [x.detach().double().transpose(1, 2).requires_grad_() for x in wrt]
    ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal, enable_gqa=True)
    refs = [ref.transpose(1, 2)] + [g.transpose(1, 2) for g in torch.autograd.grad(ref, ref_in, grad.double().transpose(1, 2))]

    calls, placed = {}, {}
    for p in precisions:
        calls[f"flashx {p}"] = lambda p=p: flashx.torch.attention(q, k, v, causal=causal, float32_precision=p)
        for tiles in tile_specs:
            name = f"flashx {p} [{tiles_name(tiles)}]"
            calls[name] = calls[f"flashx {p}"]
            placed[name] = (tiles, dict(shape=(batch, n, hq, d), q=q, causal=causal, window=None, precision=p))
    if sdpa:
        qt, kt, vt, gt = (x.transpose(1, 2) for x in (q, k, v, grad))
        calls["SDPA"] = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=True).transpose(1, 2)

    def measure(call, name):
        begin = time.perf_counter()
        out = call()
        grads = torch.autograd.grad(out, wrt, grad)
        if device == "cuda":
            torch.cuda.synchronize()
        first = time.perf_counter() - begin
        errors = [max_rel_err(a, r) for a, r in zip((out, *grads), refs)]
        fwd = common.time_torch(call, warmup_ms, rep_ms, device)
        both = common.time_torch(lambda: torch.autograd.grad(call(), wrt, grad), warmup_ms, rep_ms, device)
        return dict(fwd_ms=fwd, fwd_bwd_ms=both, errors=errors, **({"first_s": first} if name != "SDPA" else {}))

    row = {}
    for name, call in calls.items():
        def run(call=call, name=name):
            with tiles_placed(*placed[name]) if name in placed else contextlib.nullcontext():
                return measure(call, name)
        value, why = common.guarded(run, ctx)
        row[name] = value if value else dict(reason=why)
        res = row[name]
        if "fwd_ms" in res:
            log(f"  {name:>14}: fwd {res['fwd_ms']:8.3f} ms  fwd+bwd {res['fwd_bwd_ms']:8.3f} ms  errors "
                + " ".join(f"{e:.1e}" for e in res["errors"]))
        else:
            log(f"  {name:>14}: {res['reason']}")
    return row


def markdown(rows: list, env: dict, settings: dict) -> str:
    batch, n, hq, hkv = settings["shape"]
    lines = common.header_lines("flashx float32: float32_precision beside torch SDPA", env) + [
        f"- float32, B = {batch}, N = {n}, {hq} q heads over {hkv}; ms (do_bench median, "
        f"{common.rounds_note(settings['rounds'])}, {common.SETTLE_NOTE}); errors of out / dq / dk / dv against "
        "float64 SDPA, the largest absolute difference over the reference's largest element",
        f"- warm-up {settings['warmup_ms']:g} ms, {settings['rep_ms']:g} ms reps; first call: the first forward + "
        "backward at that precision by the wall clock, compiles included",
        "",
        "| D | causal | system | fwd ms | fwd + bwd ms | fwd x SDPA | fwd + bwd x SDPA | errors out / dq / dk / dv | first call |",
        "|---:|---|---|---:|---:|---:|---:|---|---:|",
    ]
    notes = []
    for r in rows:
        sdpa = r["results"].get("SDPA", {})
        for name, res in r["results"].items():
            if "fwd_ms" not in res:
                notes.append(f"- D={r['D']} {'causal' if r['causal'] else 'non-causal'} {name}: {res['reason']}")
                continue
            speedups = [f"{sdpa[key] / res[key]:.2f}" if key in sdpa and name != "SDPA" else "-"
                        for key in ("fwd_ms", "fwd_bwd_ms")]
            first = f"{res['first_s']:.1f} s" if "first_s" in res else "-"
            lines.append(f"| {r['D']} | {'yes' if r['causal'] else 'no'} | {name} | {res['fwd_ms']:.3f} | "
                         f"{res['fwd_bwd_ms']:.3f} | {speedups[0]} | {speedups[1]} | "
                         f"{' / '.join(f'{e:.1e}' for e in res['errors'])} | {first} |")
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    warmup_ms, rep_ms = common.timing_defaults(args)

    log = common.log

    torch = common.start("bench_float32.py", args.device, log)
    if torch is None:
        return 2
    import flashx

    missing = set(args.precisions) - set(flashx.core.FLOAT32_PRECISIONS)
    if missing:  # PRECISIONS here fell behind core's
        log(f"flashx does not take float32_precision {sorted(missing)}")
        return 2
    cpu = args.device == "cpu"
    shape = (1, 40, 4, 2) if cpu else tuple(args.shape)
    ctx = {"torch": torch, "device": args.device, "shape": shape,
           "verbose_errors": common.verbose_errors()}
    env = common.environment(torch, args.device)
    settings = dict(warmup_ms=warmup_ms, rep_ms=rep_ms, rounds=common.ROUNDS, shape=shape)
    causals = {"yes": (True,), "no": (False,), "both": (True, False)}[args.causal]
    rows = []
    for d, causal in [(d, c) for d in ([24] if cpu else args.d) for c in causals]:
        log(f"D={d} {'causal' if causal else 'non-causal'}")
        try:
            results = bench_case(torch, ctx, d, causal, args.precisions, not args.no_sdpa, warmup_ms, rep_ms, log,
                                 args.tiles)
        except KeyboardInterrupt:
            log("  interrupted; the remaining cases are skipped")
            break
        rows.append(dict(D=d, causal=causal, results=results))
        common.empty_cache(torch, args.device)
    common.write_report(common.output_dir(args), "float32", markdown(rows, env, settings),
                        {"environment": env, "settings": settings, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
