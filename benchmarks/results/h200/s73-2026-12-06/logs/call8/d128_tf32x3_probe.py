"""float32 "tf32x3" at D = 128 (s73 call 8): HEAD's tiles (swept for "ieee": forward 32 x 64 / 8
warps, dK/dV 32 x 32 / 8, dQ 32 x 64 / 8, all 2 stages) against the tiles that spilled least
offline in tf32x3 (Triton 3.6, sm_90; call8/offline_sweep_d128.txt), in one process; forward and
forward + backward ms by do_bench, max-abs relative errors against float64."""
import dataclasses

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import flashx.torch
from flashx import core

tuning = core.tuning
KT = tuning.KernelTiles
head = tuning.FLOAT32_TILES[256]
small_bwd = dataclasses.replace(head, dkdv=KT(16, 16, 4, 2), dq=KT(16, 32, 4, 2))
variants = {
    "head": head,
    "bwd 16x16/4, 16x32/4": small_bwd,
    "bwd 32x16/4, 32x32/8": dataclasses.replace(head, dkdv=KT(32, 16, 4, 2), dq=KT(32, 32, 8, 2)),
    "+ fwd 64x32/4": dataclasses.replace(small_bwd, forward=KT(64, 32, 4, 2)),
    "+ fwd 32x32/4": dataclasses.replace(small_bwd, forward=KT(32, 32, 4, 2)),
    "head again": head,
}
for causal in (True, False):
    torch.manual_seed(0)
    b, n, hq, hkv, d = 2, 2048, 8, 2, 128
    q = torch.randn(b, n, hq, d, device="cuda", requires_grad=True)
    k, v = (torch.randn(b, n, hkv, d, device="cuda", requires_grad=True) for _ in range(2))
    grad = torch.randn(b, n, hq, d, device="cuda")
    ref_in = [x.detach().double().transpose(1, 2).requires_grad_() for x in (q, k, v)]
    ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal, enable_gqa=True)
    ref_grads = [g.transpose(1, 2) for g in torch.autograd.grad(ref, ref_in, grad.double().transpose(1, 2))]
    ref = ref.transpose(1, 2)
    for label, tiles in variants.items():
        tuning.FLOAT32_TILES[256] = tiles
        core.plan.clear_plan_cache()
        call = lambda: flashx.torch.attention(q, k, v, causal=causal)
        try:
            out = call()
            grads = torch.autograd.grad(out, (q, k, v), grad)
            errs = [((a.double() - r).abs().max() / r.abs().max()).item() for a, r in zip((out, *grads), (ref, *ref_grads))]
            fwd = do_bench(call, warmup=50, rep=200)
            both = do_bench(lambda: torch.autograd.grad(call(), (q, k, v), grad), warmup=50, rep=200)
            print(f"| D=128 {'causal' if causal else 'full  '} | {label:22s} | fwd {fwd:6.3f} ms | fwd+bwd {both:6.3f} ms | "
                  f"rel err {' '.join(f'{e:.1e}' for e in errs)} |", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"| D=128 {label} | {type(e).__name__}: {str(e)[:160]} |", flush=True)
