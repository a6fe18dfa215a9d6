"""s75 (s78: shape from PROBE_SHAPE="B,Hq,Hkv", default 2,8,2, and named tiles at every grid size; s77: the precision's own table's entry replaced, so a candidate wins over it): float32 at D = 128 on other tiles.
argv: precision, then 'f=BM,BN,W,S;k=...;q=...' (kernels left out keep HEAD's tiles), 'head', or 'base'
(FLOAT32_TILES alone: the precision's own tiles dropped), then a label, then D (default 128).
B = 2, N = 2048, 8 q heads over 2; do_bench medians after 300 ms of the call; errors vs float64 SDPA."""
import os
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import flashx.torch
from flashx.core import tuning
from flashx.core.tuning import KernelTiles, TileConfig

precision, combo, label = sys.argv[1], sys.argv[2], sys.argv[3]
d = int(sys.argv[4]) if len(sys.argv) > 4 else 128
width = 2 * max(d, 64)
if combo == "base":
    tuning.FLOAT32_PRECISION_TILES.pop(precision, None)
elif combo != "head":
    tuning.FLOAT32_FEW_PROGRAMS_TILES = {}  # s78: the named tiles at every grid size
    t = {k: KernelTiles(*map(int, v.split(","))) for k, v in (p.split("=") for p in combo.split(";"))}
    table = tuning.FLOAT32_PRECISION_TILES.setdefault(precision, {})
    names = {"f": "forward", "k": "dkdv", "q": "dq"}
    table[width] = {**table.get(width, {}), **{names[n]: tiles for n, tiles in t.items()}}
for causal in (True, False):
    torch.manual_seed(0)
    b, hq, hkv = (int(x) for x in os.environ.get("PROBE_SHAPE", "2,8,2").split(",")); n = 2048
    q = torch.randn(b, n, hq, d, device="cuda", requires_grad=True)
    k, v = (torch.randn(b, n, hkv, d, device="cuda", requires_grad=True) for _ in range(2))
    grad = torch.randn(b, n, hq, d, device="cuda")
    ref_in = [x.detach().double().transpose(1, 2).requires_grad_() for x in (q, k, v)]
    ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal, enable_gqa=True)
    refs = [ref.transpose(1, 2)] + [g.transpose(1, 2) for g in torch.autograd.grad(ref, ref_in, grad.double().transpose(1, 2))]
    call = lambda: flashx.torch.attention(q, k, v, causal=causal, float32_precision=precision)
    both = lambda: torch.autograd.grad(call(), (q, k, v), grad)
    line = f"| {precision} | {label:28s} | B,Hq,Hkv={b},{hq},{hkv} D={d} {'causal' if causal else 'full  '}"
    try:
        out = call()
        errs = [((a.double() - r).abs().max() / r.abs().max()).item() for a, r in zip((out, *torch.autograd.grad(out, (q, k, v), grad)), refs)]
        times = []
        for fn in (call, both):
            do_bench(fn, warmup=300, rep=10)
            times.append(do_bench(fn, warmup=25, rep=100))
        print(f"{line} | fwd {times[0]:7.3f} ms | fwd+bwd {times[1]:7.3f} ms | err {' '.join(f'{e:.1e}' for e in errs)} |", flush=True)
    except Exception as e:  # noqa: BLE001 - reported; the next case runs
        print(f"{line} | {type(e).__name__}: {str(e)[:160]} |", flush=True)
