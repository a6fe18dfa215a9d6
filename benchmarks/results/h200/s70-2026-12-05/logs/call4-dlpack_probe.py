"""JAX flashx forward at D = 128, N = 16k non-causal (B = 1, H = 16, bhnd): native JAX arrays vs
DLPack views of torch tensors, and torch's own call, back to back in turns (common)."""
import os, sys
sys.path.insert(0, "benchmarks")
import torch, jax, jax.numpy as jnp, numpy as np
import common
import flashx.jax as fj, flashx.torch as ft
common.set_rounds(3)
b, h, n, d = 1, 16, 16384, 128
rng = np.random.default_rng(0)
arrays = [rng.standard_normal((b, h, n, d), dtype=np.float32) for _ in range(3)]
tq, tk, tv = (torch.tensor(a, device="cuda", dtype=torch.bfloat16) for a in arrays)
native = tuple(jnp.asarray(a, dtype=jnp.bfloat16) for a in arrays)
viewed = tuple(common.jax_from_torch(jax, t) for t in (tq, tk, tv))
f = jax.jit(lambda q, k, v: fj.attention(q, k, v, layout="bhnd"))
tf = lambda: ft.attention(tq, tk, tv, layout="bhnd")
flops = 4 * b * h * n * n * d
ms = common.settled_medians_in_turns([common._torch_back_to_back(tf, 25, 300, "cuda"),
                                      common._jax_back_to_back(f, native, 25, 300),
                                      common._jax_back_to_back(f, viewed, 25, 300)])
for name, m in zip(("torch", "jax native", "jax dlpack"), ms):
    print(f"{name:>11}: {m * 1e3:8.1f} us  {flops / m / 1e9:6.1f} TFLOP/s  /torch {ms[0] / m:.3f}")
for name, x in (("native", native[0]), ("dlpack", viewed[0])):
    ptr = x.unsafe_buffer_pointer()
    print(name, "ptr % 1024 =", ptr % 1024, "committed", getattr(x, "committed", "?"), x.sharding)
