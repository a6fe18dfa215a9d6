"""float32 "tf32x3" above D = 128 (s73 call 6): forward + backward with HEAD's rule (the backward
in "ieee" on FLOAT32_WIDE_TILES) against a tf32x3 backward on the two tiles that spilled least
offline (Triton 3.6, sm_90: dK/dV 16 x 16 / 4 warps / 2 stages in one pass, 0.9-1.0 KB; dQ 16 x 32
/ 4 / 2, 0.7 KB), in one process; ms by do_bench and max-abs relative errors against float64."""
import dataclasses

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import flashx.torch
from flashx import core

tuning = core.tuning
head_wide = tuning.FLOAT32_TILES[512]
trial_wide = dataclasses.replace(head_wide, dkdv=tuning.KernelTiles(16, 16, 4, 2), dq=tuning.KernelTiles(16, 32, 4, 2))
for d in (192, 256):
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
        for label, wide, max_d in (("head (ieee bwd)", head_wide, 128), ("tf32x3 bwd, 16x16 / 16x32", trial_wide, 256),
                                   ("head again", head_wide, 128)):
            tuning.FLOAT32_TILES[512] = wide
            tuning.TF32X3_BACKWARD_MAX_BLOCK_D = max_d
            core.plan.clear_plan_cache()
            call = lambda: flashx.torch.attention(q, k, v, causal=causal)
            try:
                out = call()
                grads = torch.autograd.grad(out, (q, k, v), grad)
                errs = [((a.double() - r).abs().max() / r.abs().max()).item() for a, r in zip((out, *grads), (ref, *ref_grads))]
                both = do_bench(lambda: torch.autograd.grad(call(), (q, k, v), grad), warmup=50, rep=300)
                print(f"| D={d} {'causal' if causal else 'full  '} | {label:26s} | fwd+bwd {both:7.3f} ms | "
                      f"rel err {' '.join(f'{e:.1e}' for e in errs)} |", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"| D={d} {label} | {type(e).__name__}: {str(e)[:160]} |", flush=True)
