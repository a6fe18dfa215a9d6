#!/usr/bin/env python3
"""What a device-built TMA descriptor lacks against a host-encoded one, and what it costs.

flashx's JAX launches build their Gluon kernels' tensor maps on the device (jax-triton passes no
host descriptors): Triton zeroes a 128-byte template in shared memory and sets its fields with
PTX's tensormap.replace; torch's launches pass maps encoded by the driver (cuTensorMapEncodeTiled,
which Triton's launcher asks for 128-byte L2 promotion, a field tensormap.replace cannot set).
The JAX Gluon kernels read a few percent slower than torch's on some shapes by their own GPU time
(NOTES v0.24 item 4, v0.26).

    python benchmarks/tma_template_probe.py compare       # a device-built map's words vs host encodes
    python benchmarks/tma_template_probe.py encodings     # which words the driver's encodes change, by field
    python benchmarks/tma_template_probe.py descriptors [--rounds 4]   # host vs device descriptors, one launcher

compare: a tl kernel builds a descriptor over a (1024, 128) bf16 matrix (64 x 64 boxes) from
torch, with a scratch buffer of ours, so that the map it built can be read back; printed beside
the driver's encodes of the same matrix with L2 promotion none and 128 bytes, where they differ.
encodings: host encodes that each change one parameter (box, swizzle, L2 promotion, rank, dtype)
from a base, printing the words that moved, to read the driver's layout of the fields off them.
descriptors: the routed Gluon forward tiles launched from torch with host descriptors and with
descriptors built in the kernel (as JAX's launches build them, gluon_forward_check.launch_torch),
timed alternately (host, device, device, host, ...) after common.settle, `rounds` times each.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# cuda.h's enums (CUtensorMapDataType, CUtensorMapSwizzle, CUtensorMapL2promotion).
FLOAT16, FLOAT32, BFLOAT16 = 6, 7, 9
ELEMENT_BYTES = {FLOAT16: 2, FLOAT32: 4, BFLOAT16: 2}


def host_tensor_map(address: int = 1 << 20, shape=(1024, 128), box=(64, 64), dtype: int = BFLOAT16,
                    swizzle: int = 3, promotion: int = 2) -> tuple:
    """The 32 words of the tensor map the driver's cuTensorMapEncodeTiled builds for a dense
    row-major array of `shape` (outermost first) in `box`es; swizzle 3 = 128 bytes, promotion 0
    = none, 2 = 128 bytes (what Triton's launcher passes). Only encodes: nothing is launched."""
    cuda = ctypes.CDLL("libcuda.so.1")
    if cuda.cuInit(0) != 0:
        raise RuntimeError("cuInit failed")
    rank = len(shape)
    dims = list(reversed(shape))  # the driver's order: innermost first
    strides, stride = [], ELEMENT_BYTES[dtype]
    for extent in dims[:-1]:
        stride *= extent
        strides.append(stride)
    words = (ctypes.c_uint32 * 32)()
    status = cuda.cuTensorMapEncodeTiled(
        ctypes.byref(words), ctypes.c_int(dtype), ctypes.c_uint32(rank), ctypes.c_void_p(address),
        (ctypes.c_uint64 * rank)(*dims), (ctypes.c_uint64 * max(rank - 1, 1))(*strides),
        (ctypes.c_uint32 * rank)(*reversed(box)), (ctypes.c_uint32 * rank)(*[1] * rank), ctypes.c_int(0),
        ctypes.c_int(swizzle), ctypes.c_int(promotion), ctypes.c_int(0))
    if status != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed ({status})")
    return tuple(words)


def print_words(columns: dict) -> None:
    """The words where the named maps differ, one column a map."""
    names = list(columns)
    print("word  " + "  ".join(f"{name:>12}" for name in names))
    for word in range(32):
        values = [columns[name][word] for name in names]
        if len(set(values)) > 1:
            print(f"{word:4d}  " + "  ".join(f"{v:#12x}" for v in values))


def compare() -> int:
    import torch
    import triton
    import triton.language as tl

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
    device_map = tuple(w & 0xFFFFFFFF for w in scratch[0][:128].view(torch.int32).tolist())
    host = {p: host_tensor_map(x.data_ptr(), promotion=p) for p in (0, 2)}
    print_words({"device": device_map, "host none": host[0], "host L2_128B": host[2]})
    print(f"device-built map == host encode without L2 promotion: {device_map == host[0]}")
    return 0


def encodings() -> int:
    import torch

    torch.zeros(1, device="cuda")  # the driver encodes within a context (else 201, CUDA_ERROR_INVALID_CONTEXT)
    base = dict(shape=(1024, 128), box=(64, 64), dtype=BFLOAT16, swizzle=3, promotion=2)
    changes = {
        "base": {}, "box 128x64": dict(box=(128, 64)), "box 32x64": dict(box=(32, 64)),
        "box 64x32, 64B": dict(box=(64, 32), swizzle=2),
        "swizzle none": dict(swizzle=0), "L2 none": dict(promotion=0), "L2 256B": dict(promotion=3),
        "fp16": dict(dtype=FLOAT16), "rows 2048": dict(shape=(2048, 128)),
        "rank 4": dict(shape=(4, 1024, 16, 128), box=(1, 64, 1, 64)),
        "rank 4, box 128": dict(shape=(4, 1024, 16, 128), box=(1, 128, 1, 64)),
    }
    maps = {}
    for name, change in changes.items():
        try:
            maps[name] = host_tensor_map(**{**base, **change})
        except RuntimeError as err:
            print(f"{name:>16}: {err}")
    for name, words in maps.items():
        moved = {w: words[w] for w in range(32) if words[w] != maps["base"][w]}
        print(f"{name:>16}: " + ", ".join(f"w{w}={v:#x} (base {maps['base'][w]:#x})" for w, v in moved.items()))
    print("words 14-20 of each:")
    for name, words in maps.items():
        print(f"{name:>16}: " + " ".join(f"{words[w]:#010x}" for w in range(14, 21)))
    return 0


def descriptors(rounds: int) -> int:
    import torch
    import triton

    sys.path.insert(0, HERE)
    import common
    from gluon_forward_check import launch_torch

    # (B, N, H, D, tile): the tiles torch's plan routes there, all persistent.
    cases = ((4, 4096, 16, 128, "pp-tma-persist-ovl-ts"), (16, 1024, 16, 128, "pp-tma-persist-ovl-ts"),
             (4, 4096, 32, 64, "d64-c3-turns-tma-persist-ts"))
    print("| case | host descriptors (each round) | device descriptors | device / host (medians) |")
    print("|---|---|---|---|")
    for b, n, h, d, tile in cases:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for causal in (False, True):
            flops = 4 * b * h * n * n * d / (2 if causal else 1)
            calls = {dev: (lambda dev=dev: launch_torch(q, k, v, tile, causal, device_descriptors=dev))
                     for dev in (False, True)}
            (o_host, l_host), (o_dev, l_dev) = calls[False](), calls[True]()
            assert torch.equal(o_host, o_dev) and torch.equal(l_host, l_dev), "the two builds differ"
            seen = {False: [], True: []}
            for r in range(rounds):
                for dev in ((False, True) if r % 2 == 0 else (True, False)):
                    common.settle()
                    seen[dev].append(flops / triton.testing.do_bench(calls[dev], warmup=25, rep=100) * 1e-9)
            host, dev = (statistics.median(seen[x]) for x in (False, True))
            print(f"| B={b} N={n} H={h} D={d} {'causal' if causal else 'full'} {tile} | "
                  + " / ".join(f"{x:.0f}" for x in seen[False]) + " | " + " / ".join(f"{x:.0f}" for x in seen[True])
                  + f" | {dev / host:.3f} |", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("compare", "encodings", "descriptors"))
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    return {"compare": compare, "encodings": encodings}.get(args.what, lambda: descriptors(args.rounds))()


if __name__ == "__main__":
    sys.exit(main())
