"""s61 call 5: why ab read the dropout-free D = 64 causal backward 0.88x in the trees with the new draw
(identical kernels offline): time it fresh, right after 2 s of the dropout backward, and after 5 s idle."""
import sys
import time

sys.path.insert(0, "benchmarks")
import common  # noqa: E402
import torch  # noqa: E402
from triton.testing import do_bench  # noqa: E402

import flashx.torch as ft  # noqa: E402

torch.manual_seed(0)
b, n, h, d = 1, 16384, 32, 64
q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
flops = 4.0 * b * h * n * (n + 1) / 2 * d * 2.5


def bwd(p):
    out = ft.attention(q, k, v, causal=True, layout="bhnd", dropout_p=p)
    grad = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)


plain, dropped = bwd(0.0), bwd(0.1)
plain(), dropped()


def timed(fn, label):
    common.settle(load=fn)
    ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
    print(f"{sys.argv[1]:5s} {label:34s} {flops / ms * 1e-9:7.1f} TFLOP/s", flush=True)


timed(plain, "p=0 fresh")
timed(dropped, "p=0.1")
timed(plain, "p=0 right after p=0.1")
t = time.time()
while time.time() - t < 2.0:
    dropped()
torch.cuda.synchronize()
timed(plain, "p=0 right after 2 s of p=0.1")
time.sleep(5)
timed(plain, "p=0 after 5 s idle")
timed(plain, "p=0 again")
