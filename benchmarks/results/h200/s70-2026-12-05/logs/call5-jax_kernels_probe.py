"""Which kernels one jitted JAX flashx call launches at D = 128, N = 16k non-causal, and their
device time, beside torch's call, from CUPTI (torch.profiler), 20 calls back to back each."""
import sys, collections
sys.path.insert(0, "benchmarks")
import torch, jax, jax.numpy as jnp, numpy as np
from torch.profiler import ProfilerActivity, profile
import flashx.jax as fj, flashx.torch as ft
b, h, n, d = 1, 16, 16384, 128
rng = np.random.default_rng(0)
arrays = [rng.standard_normal((b, h, n, d), dtype=np.float32) for _ in range(3)]
tq, tk, tv = (torch.tensor(a, device="cuda", dtype=torch.bfloat16) for a in arrays)
jq, jk, jv = (jnp.asarray(a, dtype=jnp.bfloat16) for a in arrays)
f = jax.jit(lambda q, k, v: fj.attention(q, k, v, layout="bhnd"))
for name, call, wait in (("jax", lambda: f(jq, jk, jv), lambda o: o.block_until_ready()),
                         ("torch", lambda: ft.attention(tq, tk, tv, layout="bhnd"), lambda o: torch.cuda.synchronize())):
    for _ in range(30):
        out = call()
    wait(out)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            out = call()
        wait(out)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    totals = collections.defaultdict(lambda: [0, 0.0])
    for e in kernels:
        totals[e.name][0] += 1
        totals[e.name][1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    start = min(e.time_range.start for e in kernels); end = max(e.time_range.end for e in kernels)
    print(f"== {name}: span {(end - start) / 20:.1f} us a call")
    for k, (c, t) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:8]:
        print(f"   {c:4d} x {k[:70]:70s} {t / c:9.1f} us each")
