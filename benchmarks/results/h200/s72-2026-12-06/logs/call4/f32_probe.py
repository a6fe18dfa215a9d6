"""float32 at D = 192 / 256 on the GPU, one tree per process (s72): the first call's wall time
(compiles included), then forward and forward + backward by do_bench, and errors against float64
SDPA. Arguments: the tree's label, then the first case to run (default 0). Prints one line per case; an exception (e.g. OutOfResources) is printed, not raised."""
import sys
import time

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import flashx.torch

tree = sys.argv[1]
cases = ((256, True), (256, False), (192, True), (128, True), (64, True), (128, False))
for d, causal in cases[int(sys.argv[2]):] if len(sys.argv) > 2 else cases:
    torch.manual_seed(0)
    b, n, hq, hkv = 2, 2048, 8, 2
    q = torch.randn(b, n, hq, d, device="cuda", requires_grad=True)
    k, v = (torch.randn(b, n, hkv, d, device="cuda", requires_grad=True) for _ in range(2))
    grad = torch.randn(b, n, hq, d, device="cuda")
    line = f"{tree:5s} D={d} {'causal' if causal else 'full  '}"
    try:
        start = time.perf_counter()
        out = flashx.torch.attention(q, k, v, causal=causal)
        torch.cuda.synchronize()
        first_fwd = time.perf_counter() - start
        start = time.perf_counter()
        grads = torch.autograd.grad(out, (q, k, v), grad)
        torch.cuda.synchronize()
        first_bwd = time.perf_counter() - start
        ref_in = [x.detach().double().transpose(1, 2).requires_grad_() for x in (q, k, v)]
        ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal, enable_gqa=True)
        ref_grads = torch.autograd.grad(ref, ref_in, grad.double().transpose(1, 2))
        ref = ref.transpose(1, 2)
        ref_grads = [g.transpose(1, 2) for g in ref_grads]
        errs = [((a.double() - r).abs().max() / r.abs().max()).item() for a, r in zip((out, *grads), (ref, *ref_grads))]
        fwd = do_bench(lambda: flashx.torch.attention(q, k, v, causal=causal), warmup=50, rep=300)
        both = do_bench(lambda: torch.autograd.grad(flashx.torch.attention(q, k, v, causal=causal), (q, k, v), grad),
                        warmup=50, rep=300)
        sdpa_fwd = do_bench(lambda: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                                    is_causal=causal, enable_gqa=True), warmup=50, rep=300)
        print(f"| {line} | first fwd {first_fwd:6.1f} s | first bwd {first_bwd:6.1f} s | fwd {fwd:7.3f} ms | fwd+bwd {both:7.3f} ms"
              f" | SDPA fwd {sdpa_fwd:7.3f} ms | rel err out/dq/dk/dv {' '.join(f'{e:.1e}' for e in errs)} |", flush=True)
    except Exception as e:  # noqa: BLE001 - reported, the next case still runs
        print(f"| {line} | {type(e).__name__}: {str(e)[:160]} |", flush=True)
