#!/usr/bin/env python3
"""What Triton compiled for flashx's kernels: registers, spills, shared memory, warps, stages.

Runs one forward + backward (torch frontend, bf16, B = 4, N = 4k, H * D = 2048) per head dim and
causal flag, then reads each new CompiledKernel's figures. Registers decide occupancy: at 8 warps
a kernel of more than 128 registers per thread fits one program per SM, not two (D = 64's
forward sits at 126-127), so a small code change can cost a quarter of its speed; spills mean
the kernel ran out of the 255 a thread can have. --lengths then calls the forward at each
sequence length in turn and prints how many variants of it Triton has compiled so far
(Triton specializes integer arguments equal to 1 or divisible by 16).

    python benchmarks/kernel_stats.py [--d 64 128] [--lengths 2048 3072 2050 4096]

Reads Triton's per-device kernel cache (`JITFunction.device_caches`, internal API of Triton
3.6 to 3.9); GPU only.
"""
from __future__ import annotations

import argparse


def compiled_kernels(kernel) -> list:
    """The CompiledKernels Triton holds for a @triton.jit function, in compile order."""
    found = []
    for entry in kernel.device_caches.values():
        cache = entry[0] if isinstance(entry, tuple) else entry
        found.extend(cache.values())
    return found


def describe(compiled) -> str:
    compiled._init_handles()  # loads the binary, which fills n_regs and n_spills
    md = compiled.metadata
    return (f"warps {md.num_warps}  stages {md.num_stages}  shared {md.shared // 1024:4d} KiB  "
            f"registers {compiled.n_regs:3d}  spills {compiled.n_spills}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, nargs="+", default=[64, 128])
    p.add_argument("--lengths", type=int, nargs="*", default=[2048, 3072, 2050, 4096])
    args = p.parse_args(argv)

    import torch

    import flashx.torch as ft
    from flashx.core import backward, forward

    kernels = {"forward": forward.attention_forward_kernel, "dK/dV": backward.attention_backward_dkdv_kernel,
               "dQ": backward.attention_backward_dq_kernel}
    seen = {name: 0 for name in kernels}
    torch.manual_seed(0)
    for d in args.d:
        for causal in (False, True):
            q, k, v = (torch.randn(4, 2048 // d, 4096, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            out = ft.attention(q, k, v, causal=causal, layout="bhnd")
            torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
            for name, kernel in kernels.items():
                for compiled in compiled_kernels(kernel)[seen[name]:]:
                    print(f"D={d:3d} {'causal    ' if causal else 'non-causal'} {name:7s} {describe(compiled)}")
                seen[name] = len(compiled_kernels(kernel))
    if args.lengths:
        d = args.d[0]
        before = len(compiled_kernels(kernels["forward"]))
        for n in args.lengths:
            q = torch.randn(1, 2048 // d, n, d, device="cuda", dtype=torch.bfloat16)
            ft.attention(q, q, q, causal=True, layout="bhnd")
            print(f"forward D={d} causal at N={n}: {len(compiled_kernels(kernels['forward'])) - before} variant(s) compiled so far")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
