#!/usr/bin/env python3
"""What a device-built TMA descriptor lacks against a host-encoded one, and what that costs JAX.

flashx's JAX launches build their Gluon kernels' tensor maps on the device (jax-triton passes no
host descriptors): Triton zeroes a 128-byte template in shared memory and sets its fields with
PTX's tensormap.replace, which has no L2-promotion field; torch's launches pass maps encoded by
the driver (Triton's launcher asks for 128-byte L2 promotion). The JAX Gluon kernels read 4-5%
slower than torch's on some non-causal shapes by their own GPU time (NOTES v0.24 item 4).

    python benchmarks/tma_template_probe.py compare   # words of a device-built map vs host encodes
    python benchmarks/tma_template_probe.py ab [--rounds 2]   # JAX timed without / with the L2 bits

compare: a tl kernel builds a descriptor over a (1024, 128) bf16 matrix (64 x 64 boxes) from
torch, with a scratch buffer of our own, so that the map it built can be read back; printed
beside the driver's encodes of the same matrix with L2 promotion none and 128 bytes, word by
word where they differ, with flashx.jax.gluon.l2_promotion_bits().
ab: each setting of FLASHX_TMA_TEMPLATE_BITS ("" = none, "l2") in its own process, in the order
A B (B A for a second round), each timing the JAX frontend (the sweep's jitted loop of calls,
and the kernels' GPU time through CUPTI) and the torch frontend beside it, on the same shapes.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SETTINGS = {"none": "", "l2": "l2"}
# (B, N, H, D, causal, kind): the shapes where JAX's Gluon kernels read slowest against torch's.
CASES = ((16, 1024, 16, 128, False, "fwd"), (4, 4096, 16, 128, False, "fwd"), (4, 4096, 32, 64, False, "fwd"),
         (4, 4096, 16, 128, True, "fwd"), (16, 1024, 16, 128, True, "bwd"))


def compare() -> int:
    import torch
    import triton
    import triton.language as tl

    from flashx.jax import gluon

    @triton.jit
    def load_a_box(X, OUT, ROWS: tl.constexpr, COLUMNS: tl.constexpr, BLOCK: tl.constexpr):
        descriptor = tl.make_tensor_descriptor(X, shape=[ROWS, COLUMNS], strides=[COLUMNS, 1],
                                               block_shape=[BLOCK, BLOCK])
        b_x = descriptor.load([BLOCK, 0])  # [BLOCK, BLOCK], the second row of boxes
        o_rows = tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
        tl.store(OUT + o_rows, b_x)

    x = torch.randn(1024, 128, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
    scratch = []

    def allocate(size, align, stream):
        scratch.append(torch.zeros(size + align, dtype=torch.uint8, device="cuda"))
        return scratch[-1]

    triton.set_allocator(allocate)
    load_a_box[(1,)](x, out, ROWS=1024, COLUMNS=128, BLOCK=64)
    torch.cuda.synchronize()
    assert torch.equal(out, x[64:128, :64]), "the device-built descriptor loaded the wrong box"
    device_map = tuple(scratch[0][:128].view(torch.int32).tolist())
    device_map = tuple(w & 0xFFFFFFFF for w in device_map)
    host = {p: gluon.host_tensor_map(p, address=x.data_ptr()) for p in (0, 2)}
    print("word  device      host none   host L2_128B")
    for word in range(32):
        values = (device_map[word], host[0][word], host[2][word])
        if len(set(values)) > 1:
            print(f"{word:4d}  " + "  ".join(f"{v:#010x}" for v in values))
    same = device_map == host[0]
    print(f"device-built map == host encode without L2 promotion: {same}")
    print(f"l2_promotion_bits(): {gluon.l2_promotion_bits()}")
    print(f"FLASHX_TMA_TEMPLATE_BITS=\"" + ",".join(f"{w}:{m:#x}" for w, m in gluon.l2_promotion_bits()) + "\"")
    return 0


def child(setting: str) -> int:
    """Time every case from JAX and torch in this process; one JSON line of results last."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    from triton.testing import do_bench

    sys.path.insert(0, HERE)
    import common
    from jax_vs_torch import device_ms

    import flashx.jax as fj
    import flashx.torch as ft

    results = {}
    for b, n, h, d, causal, kind in CASES:
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal((b, h, n, d), dtype=np.float32) for _ in range(4)]
        jq, jk, jv, jdo = (jnp.asarray(a, dtype=jnp.bfloat16) for a in arrays)
        tq, tk, tv, tdo = (torch.tensor(a, device="cuda", dtype=torch.bfloat16) for a in arrays)
        flops = 4.0 * b * h * n * n * d * (0.5 if causal else 1.0) * (2.5 if kind == "bwd" else 1.0)

        def attend(q, k, v):
            return fj.attention(q, k, v, causal=causal, layout="bhnd")

        if kind == "fwd":
            jitted = jax.jit(attend)
            jax_ms = common.time_jax(jitted, (jq, jk, jv), 100, 500, feed=0)
            jax_dev = device_ms(lambda: jitted(jq, jk, jv), jax.block_until_ready, "jax")
            ref = ft.attention(tq, tk, tv, causal=causal, layout="bhnd")
            got = common.torch_from_jax(torch, jitted(jq, jk, jv), "cuda")

            def torch_call():
                return ft.attention(tq, tk, tv, causal=causal, layout="bhnd")
        else:
            _, vjp_fn = jax.jit(lambda q, k, v: jax.vjp(attend, q, k, v))(jq, jk, jv)
            jitted = jax.jit(lambda fn, ct: fn(ct))
            jax_ms = common.time_jax(jitted, (vjp_fn, jdo), 100, 500)
            jax_dev = device_ms(lambda: jitted(vjp_fn, jdo), jax.block_until_ready, "jax")
            q, k, v = (t.clone().requires_grad_() for t in (tq, tk, tv))
            out = ft.attention(q, k, v, causal=causal, layout="bhnd")

            def torch_call():
                return torch.autograd.grad(out, (q, k, v), tdo, retain_graph=True)

            ref = torch_call()[0]
            got = common.torch_from_jax(torch, jitted(vjp_fn, jdo)[0], "cuda")
        common.settle()
        torch_ms = do_bench(torch_call, warmup=25, rep=200)
        torch_dev = device_ms(torch_call, lambda _: torch.cuda.synchronize(), "torch")
        name = f"{kind} B{b} N{n} H{h} D{d} {'causal' if causal else 'full'}"
        results[name] = dict(jax=flops / jax_ms * 1e-9, jax_device=flops / jax_dev * 1e-9,
                             torch=flops / torch_ms * 1e-9, torch_device=flops / torch_dev * 1e-9,
                             jax_vs_torch_err=common.rel_err(got.float(), ref.float()))
        print(setting or "none", name, {k: round(v, 4 if k.endswith("err") else 1) for k, v in results[name].items()},
              flush=True)
    print("RESULTS " + json.dumps(results), flush=True)
    return 0


def ab(rounds: int) -> int:
    order = list(SETTINGS) + list(reversed(SETTINGS)) * (rounds > 1)
    runs = {name: [] for name in SETTINGS}
    for name in order:
        env = dict(os.environ, FLASHX_TMA_TEMPLATE_BITS=SETTINGS[name])
        done = subprocess.run([sys.executable, __file__, "child", SETTINGS[name]], env=env, capture_output=True,
                              text=True)
        sys.stdout.write(done.stdout[-4000:])
        if done.returncode != 0:
            print(f"{name}: exit {done.returncode}\n{done.stderr[-3000:]}", flush=True)
            return 1
        runs[name].append(json.loads(done.stdout.rsplit("RESULTS ", 1)[1]))
    print("\n| case | timing | " + " | ".join(f"{name} (rounds)" for name in SETTINGS) + " | l2 / none |")
    print("|---|---|" + "---|" * (len(SETTINGS) + 1))
    for case in runs["none"][0]:
        for timing in ("jax", "jax_device", "torch", "torch_device"):
            means = {}
            cells = []
            for name in SETTINGS:
                values = [r[case][timing] for r in runs[name]]
                means[name] = sum(values) / len(values)
                cells.append(" / ".join(f"{v:.0f}" for v in values))
            print(f"| {case} | {timing} | " + " | ".join(cells) + f" | {means['l2'] / means['none']:.3f} |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("compare", "ab", "child"))
    parser.add_argument("setting", nargs="?", default="")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    if args.what == "compare":
        return compare()
    if args.what == "child":
        return child(args.setting)
    return ab(args.rounds)


if __name__ == "__main__":
    sys.exit(main())
