r"""Workloads for Nsight Compute (ncu), and a summary of its CSV.

`run` launches flashx's forward (torch frontend, layout "bhnd", routed as the plan routes it),
then SDPA's cuDNN and flash (FA2) kernels on the same inputs, at each shape given as
B,N,H,D,causal: one warm-up call of flashx and three calls of each system, in that order, so
that ncu reads each kernel at the card's own clock, one launch at a time. --short-tiles instead
launches flashx under each given tile of the short bucket's D = 128 causal entry
(SHORT_FORWARD_TILES), a warm-up and three calls each, in the order given. At short shapes
(B = 64, N = 256) ncu's per-launch times agree within 2% where do_bench's rounds spread 27%
(NOTES v0.33).

    ncu --csv --page raw --print-units base --clock-control none \
        --metrics gpu__time_duration.sum,lts__t_bytes.sum,dram__bytes_read.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
        -k "regex:^(?!.*(distribution|elementwise|vectorized|reduce|fill)).*" \
        python benchmarks/ncu_probe.py run 4,4096,32,64,1 64,256,16,128,1 > ncu.csv
    ncu ... python benchmarks/ncu_probe.py run 64,256,16,128,1 --short-tiles 64x32/4/3/one 128x64/8/2/two > ncu.csv
    python benchmarks/ncu_probe.py summarize ncu.csv     # one markdown row a launch
    python benchmarks/ncu_probe.py summarize ncu.csv --top "issue_stalled_(.*)_per_issue_active"
        # and each launch's five largest metrics of that pattern (its group names them), e.g. of
        # --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
"""
from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

COLUMNS = (  # (CSV metric in base units, header, scale, format)
    ("gpu__time_duration.sum", "us", 1e-3, ".1f"),
    ("launch__registers_per_thread", "registers", 1.0, ".0f"),
    ("lts__t_bytes.sum", "L2 MB", 1e-6, ".0f"),
    ("dram__bytes_read.sum", "DRAM read MB", 1e-6, ".0f"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "warps active %", 1.0, ".1f"),
)


def parse_tile(text: str):
    """BMxBN/warps/stages/one|two -> KernelTiles (one: the one-loop walk)."""
    from flashx.core import tuning

    try:
        blocks, warps, stages, walk = text.split("/")
        block_m, block_n = (int(x) for x in blocks.split("x"))
        if walk not in ("one", "two"):
            raise ValueError
    except ValueError:
        raise SystemExit(f"tile {text!r}: expected BMxBN/warps/stages/one|two, e.g. 64x32/4/3/one")
    return tuning.KernelTiles(block_m, block_n, int(warps), int(stages), one_loop=walk == "one")


def run(shapes: list, short_tiles: list) -> int:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not torch.cuda.is_available():
        print("ncu_probe.py run: needs a CUDA GPU", file=sys.stderr)
        return 2
    import flashx.torch as fx
    from flashx.core import plan, tuning

    for b, n, h, d, causal in shapes:
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))

        def flashx_calls(count: int) -> None:
            for _ in range(count):
                fx.attention(q, k, v, causal=causal, layout="bhnd")
            torch.cuda.synchronize()

        if short_tiles:
            key = (128, True, tuning.short_bucket(n))
            if d != 128 or not causal or key not in tuning.SHORT_FORWARD_TILES:
                raise SystemExit(f"--short-tiles: shape {(b, n, h, d, causal)} takes no short D = 128 causal tile")
            saved = tuning.SHORT_FORWARD_TILES[key]
            try:
                for i, tile in enumerate(short_tiles):
                    tuning.SHORT_FORWARD_TILES[key] = tile
                    plan.clear_plan_cache()
                    flashx_calls(4)
                    print(f"shape {(b, n, h, d, causal)} tile {i}: {tile}: 4 launches", flush=True)
            finally:
                tuning.SHORT_FORWARD_TILES[key] = saved
                plan.clear_plan_cache()
            continue
        flashx_calls(4)
        for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
            with sdpa_kernel(backend):
                for _ in range(3):
                    torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
        print(f"shape {(b, n, h, d, causal)}: flashx 4 launches, cuDNN 3, FA2 3", flush=True)
    return 0


def _number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return float("nan")


def summarize(path: str, top: str = None) -> int:
    """One markdown row per profiled launch of an `ncu --csv --page raw --print-units base` log;
    top: also the five largest metrics whose names match this pattern (named by its first group)."""
    text = open(path).read()
    start = text.find('"ID"')
    if start < 0:
        print(f"{path}: no ncu CSV table in it", file=sys.stderr)
        return 1
    rows = [r for r in csv.DictReader(io.StringIO(text[start:])) if r.get("ID", "").isdigit()]
    present = [c for c in COLUMNS if rows and c[0] in rows[0]]
    pattern = re.compile(top) if top else None
    head = ["#", "kernel"] + [header for _, header, _, _ in present] + (["top " + top] if top else [])
    table = []
    for r in rows:
        cells = [r["ID"], r["Kernel Name"][:48]]
        for metric, _, scale, spec in present:
            value = _number(r[metric])
            cells.append(format(value * scale, spec) if value == value else r[metric])  # NaN: not a number, as written
        if pattern:
            found = [(m.group(1) if m.groups() else name, _number(value))
                     for name, value in r.items() if name and (m := pattern.search(name))]
            found = sorted((f for f in found if f[1] == f[1]), key=lambda f: -f[1])[:5]
            cells.append(", ".join(f"{name} {value:.2f}" for name, value in found))
        table.append(cells)
    print("\n".join(common.md_table(head, table)))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="the workloads, for ncu to profile")
    r.add_argument("shapes", nargs="+", type=common.parse_shape, metavar="B,N,H,D,causal")
    r.add_argument("--short-tiles", nargs="+", default=[], metavar="BMxBN/warps/stages/one|two",
                   help="flashx only, under each of these short-bucket tiles")
    s = sub.add_parser("summarize", help="a markdown table of ncu's CSV")
    s.add_argument("csv")
    s.add_argument("--top", metavar="REGEX", help="also each launch's five largest metrics matching REGEX")
    args = p.parse_args(argv)
    if args.what == "summarize":
        return summarize(args.csv, args.top)
    return run(args.shapes, [parse_tile(t) for t in args.short_tiles])


if __name__ == "__main__":
    sys.exit(main())
