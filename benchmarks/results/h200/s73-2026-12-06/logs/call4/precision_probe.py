"""float32 at each float32_precision (s73): for each case, the first call's wall time (compiles
included), forward and forward + backward by do_bench, SDPA's float32 forward and forward +
backward beside them (torch's default: full float32 matmuls), and the errors of out, dq, dk, dv
against float64 SDPA. Arguments: precisions to run (default all), then optionally "--d 192 256".
One line per case; an exception (e.g. OutOfResources) is printed, not raised."""
import sys
import time

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import flashx.torch

args = sys.argv[1:]
dims = (64, 128, 192, 256)
if "--d" in args:
    dims = tuple(int(x) for x in args[args.index("--d") + 1:])
    args = args[:args.index("--d")]
precisions = args or ["ieee", "tf32x3", "tf32"]
for d in dims:
    for causal in (True, False):
        torch.manual_seed(0)
        b, n, hq, hkv = 2, 2048, 8, 2
        q = torch.randn(b, n, hq, d, device="cuda", requires_grad=True)
        k, v = (torch.randn(b, n, hkv, d, device="cuda", requires_grad=True) for _ in range(2))
        grad = torch.randn(b, n, hq, d, device="cuda")
        ref_in = [x.detach().double().transpose(1, 2).requires_grad_() for x in (q, k, v)]
        ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal, enable_gqa=True)
        ref_grads = [g.transpose(1, 2) for g in torch.autograd.grad(ref, ref_in, grad.double().transpose(1, 2))]
        ref = ref.transpose(1, 2)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        sdpa = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=True)
        sdpa_fwd = do_bench(sdpa, warmup=50, rep=200)
        sdpa_both = do_bench(lambda: torch.autograd.grad(sdpa(), (q, k, v), grad.transpose(1, 2)), warmup=50, rep=200)
        for precision in precisions:
            call = lambda: flashx.torch.attention(q, k, v, causal=causal, float32_precision=precision)
            line = f"{precision:6s} D={d} {'causal' if causal else 'full  '}"
            try:
                start = time.perf_counter()
                out = call()
                grads = torch.autograd.grad(out, (q, k, v), grad)
                torch.cuda.synchronize()
                first = time.perf_counter() - start
                errs = [((a.double() - r).abs().max() / r.abs().max()).item() for a, r in zip((out, *grads), (ref, *ref_grads))]
                fwd = do_bench(call, warmup=50, rep=200)
                both = do_bench(lambda: torch.autograd.grad(call(), (q, k, v), grad), warmup=50, rep=200)
                print(f"| {line} | first fwd+bwd {first:5.1f} s | fwd {fwd:7.3f} ms | fwd+bwd {both:7.3f} ms | SDPA {sdpa_fwd:7.3f} / "
                      f"{sdpa_both:7.3f} ms | rel err out/dq/dk/dv {' '.join(f'{e:.1e}' for e in errs)} |", flush=True)
            except Exception as e:  # noqa: BLE001 - reported, the next case still runs
                print(f"| {line} | {type(e).__name__}: {str(e)[:160]} |", flush=True)
