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
    python benchmarks/tma_template_probe.py frontends [shared | program]  # JAX beside torch, JAX's maps in one slot or not

compare: a tl kernel builds a descriptor over a (1024, 128) bf16 matrix (64 x 64 boxes) from
torch, with a scratch buffer of ours, so that the map it built can be read back; printed beside
the driver's encodes of the same matrix with L2 promotion none and 128 bytes, where they differ.
encodings: host encodes that each change one parameter (box, swizzle, L2 promotion, rank, dtype)
from a base, printing the words that moved, to read the driver's layout of the fields off them.
descriptors: the routed Gluon forward tiles launched from torch with host descriptors, with
descriptors built in the kernel (as JAX's launches build them, gluon_forward_check.launch_torch),
and built in the kernel with the fields the driver derives stored in too (with_derived_fields:
box bytes and swizzle span, then also L2 promotion), timed in turn (the order reversed every
other round) after common.settle, `rounds` times each; and with every program's maps in one
scratch slot (flashx.core.compile_hook.with_one_scratch_slot, the form flashx's launches take); all must
give bit-equal outputs.
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


# Read off the driver's encodes (`encodings`, 2026-12-02): word 2 bits 17-18 the L2 promotion (2 =
# 128 bytes), word 16 the box's size in bytes, word 18 the swizzle span (16 bytes unswizzled, 512
# for 64-byte and 1024 for 128-byte swizzle); a device-built map leaves all three at 0.
PTX_ELEMENT_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 4, 9: 8, 10: 2, 11: 4, 12: 4}
SWIZZLE_SPAN = {0: 0x10, 2: 0x200, 3: 0x400}
L2_PROMOTION_128B = (2, 2 << 17)


def with_derived_fields(ptx: str, l2: bool) -> str:
    """ptx with each device-built tensor map given the words the driver's encode derives (box
    bytes, swizzle span; with l2, 128-byte L2 promotion), stored into its shared-memory template
    by the thread that set its fields, after the last field and before the copy to global memory."""
    import re

    replace = re.compile(r"^\s*@(%p\d+) tensormap\.replace\.tile\.(\w+)\.shared::cta\.b1024\.b(?:32|64) "
                         r"\[ (%rd\d+) \+ 0 \], (.*);$")
    copy = re.compile(r"^\s*@%p\d+ tensormap\.cp_fenceproxy\.global\.shared::cta\.tensormap::generic\.release\.gpu"
                      r"\.sync\.aligned \[ %rd\d+ \+ 0 \], \[ (%rd\d+) \+ 0 \], 0x80;$")
    out, fields, maps = [], {}, 0
    for line in ptx.split("\n"):
        found = replace.match(line)
        if found:
            predicate, field, template, operands = found.groups()
            fields.setdefault(template, {"predicate": predicate, "box": []})
            if field == "box_dim":
                fields[template]["box"].append(operands.split(", ")[1])
            elif field in ("elemtype", "swizzle_mode"):
                fields[template][field] = int(operands, 0)
        found = copy.match(line)
        if found and found.group(1) in fields:
            spec = fields.pop(found.group(1))
            template, predicate = found.group(1), spec["predicate"]
            box = " ".join(f"mul.lo.u32 %fx_bytes, %fx_bytes, {extent};" for extent in spec["box"])
            stores = (f"{{ .reg .b32 %fx_bytes, %fx_word; mov.b32 %fx_bytes, {PTX_ELEMENT_BYTES[spec['elemtype']]}; {box} "
                      f"@{predicate} st.shared.b32 [ {template} + 64 ], %fx_bytes; "
                      f"@{predicate} st.shared.b32 [ {template} + 72 ], {SWIZZLE_SPAN[spec['swizzle_mode']]};")
            if l2:
                word, bits = L2_PROMOTION_128B
                stores += (f" @{predicate} ld.shared.b32 %fx_word, [ {template} + {4 * word} ];"
                           f" or.b32 %fx_word, %fx_word, {bits}; @{predicate} st.shared.b32 [ {template} + {4 * word} ], %fx_word;")
            out.append("\t" + stores + " }")
            maps += 1
        out.append(line)
    if maps == 0:
        raise ValueError("no device-built tensor map in this PTX")
    return "\n".join(out)


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


DESCRIPTOR_VARIANTS = ("host", "device", "device+fields", "device+fields+l2", "device+one-slot")


def descriptors(rounds: int, variants: tuple = DESCRIPTOR_VARIANTS) -> int:
    """Each variant of DESCRIPTOR_VARIANTS compiled apart (its own in-memory kernel cache, no disk
    cache), the "+fields" ones through with_derived_fields, "+one-slot" through
    flashx.core.compile_hook.with_one_scratch_slot (a Triton stage hook on the PTX)."""
    from collections import defaultdict

    import torch
    import triton
    from triton import knobs

    sys.path.insert(0, HERE)
    import common
    from gluon_forward_check import launch_torch

    from flashx.core import compile_hook, gluon_forward

    kernel = gluon_forward.gluon_attention_forward_kernel
    compiling = ["host"]  # the variant whose kernel is being compiled

    def hook(*args):
        if not args:  # Triton >= 3.7 asks for the hook's part of the cache key
            return "", ""
        stages = args[1]
        make_ptx = stages["ptx"]
        if "+fields" in compiling[0]:
            stages["ptx"] = lambda src, md: with_derived_fields(make_ptx(src, md), l2=compiling[0].endswith("+l2"))
        elif compiling[0].endswith("+one-slot"):
            stages["ptx"] = lambda src, md: compile_hook.with_one_scratch_slot(make_ptx(src, md), md["name"],
                                                                        md["global_scratch_size"])

    knobs.runtime.add_stages_inspection_hook = hook
    knobs.compilation.always_compile = True  # the cache key does not know the hook
    variants = ("host",) + tuple(v for v in variants if v != "host")
    caches = {name: defaultdict(kernel.create_binder) for name in variants}

    def launcher(q, k, v, tile, causal, name):
        def call():
            kernel.device_caches = caches[name]
            compiling[0] = name
            return launch_torch(q, k, v, tile, causal, device_descriptors=name != "host")
        return call

    # (B, N, H, D, tile): the tiles torch's plan routes there, all persistent.
    cases = ((4, 4096, 16, 128, "pp-tma-persist-ovl-ts"), (16, 1024, 16, 128, "pp-tma-persist-ovl-ts"),
             (4, 4096, 32, 64, "d64-c3-turns-tma-persist-ts"))
    print("| case | " + " | ".join(variants) + " | each / host (medians) |")
    print("|---|" + "---|" * (len(variants) + 1))
    for b, n, h, d, tile in cases:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for causal in (False, True):
            flops = 4 * b * h * n * n * d / (2 if causal else 1)
            calls = {name: launcher(q, k, v, tile, causal, name) for name in variants}
            o_host, l_host = calls["host"]()
            for name in variants[1:]:
                o, lse = calls[name]()
                assert torch.equal(o, o_host) and torch.equal(lse, l_host), f"{name} differs from host"
            seen = {name: [] for name in variants}
            for r in range(rounds):
                for name in variants if r % 2 == 0 else reversed(variants):
                    common.settle()
                    seen[name].append(flops / triton.testing.do_bench(calls[name], warmup=25, rep=100) * 1e-9)
            medians = {name: statistics.median(x) for name, x in seen.items()}
            print(f"| B={b} N={n} H={h} D={d} {'causal' if causal else 'full'} {tile} | "
                  + " | ".join(" / ".join(f"{x:.0f}" for x in seen[name]) for name in variants) + " | "
                  + " / ".join(f"{medians[name] / medians['host']:.3f}" for name in variants[1:]) + " |",
                  flush=True)
    return 0


def frontends(slot: str) -> int:
    """JAX's frontend beside torch's on the descriptors cases and the D = 128 backward, device-built
    maps (JAX's, and torch's below tuning.HOST_DESCRIPTORS_FROM_KEYS) in one shared scratch slot
    (slot "shared", flashx's default) or in a slot a program ("program"); one line a case."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    sys.path.insert(0, HERE)
    import common

    import flashx.jax as fj
    import flashx.torch as ft
    from flashx.core import compile_hook

    if slot == "program":
        compile_hook.SHARED_SLOT_KERNELS = frozenset()
    for b, n, h, d, causal in ((4, 4096, 16, 128, False), (16, 1024, 16, 128, False), (4, 4096, 32, 64, False),
                               (4, 4096, 16, 128, True)):
        arrays = [np.random.default_rng(0).standard_normal((b, h, n, d), dtype=np.float32) for _ in range(3)]
        jq, jk, jv = (jnp.asarray(a, dtype=jnp.bfloat16) for a in arrays)
        tq, tk, tv = (torch.tensor(a, device="cuda", dtype=torch.bfloat16) for a in arrays)
        flops = 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)
        jitted = jax.jit(lambda q, k, v: fj.attention(q, k, v, causal=causal, layout="bhnd"))
        err = common.rel_err(common.torch_from_jax(torch, jitted(jq, jk, jv), "cuda").float(),
                             ft.attention(tq, tk, tv, causal=causal, layout="bhnd").float())
        jax_ms = common.time_jax(jitted, (jq, jk, jv), 100, 500)
        torch_ms = common.time_torch(lambda: ft.attention(tq, tk, tv, causal=causal, layout="bhnd"), 25, 200)
        print(f"slot {slot} B={b} N={n} H={h} D={d} {'causal' if causal else 'full'}: jax {flops / jax_ms * 1e-9:.0f} "
              f"torch {flops / torch_ms * 1e-9:.0f} jax/torch {torch_ms / jax_ms:.3f} err vs torch {err:.1e}", flush=True)
    # The D = 128 backward (JAX's dK/dV kernel builds its maps on the device too): JAX's jitted
    # vjp function applied to dO against torch's autograd.grad of one saved forward.
    for causal in (False, True):
        b, n, h, d = 4, 4096, 16, 128
        arrays = [np.random.default_rng(1).standard_normal((b, h, n, d), dtype=np.float32) for _ in range(4)]
        jq, jk, jv, jdo = (jnp.asarray(a, dtype=jnp.bfloat16) for a in arrays)
        tq, tk, tv, tdo = (torch.tensor(a, device="cuda", dtype=torch.bfloat16).requires_grad_() for a in arrays)
        flops = 2.5 * 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)
        _, vjp_fn = jax.jit(lambda q, k, v: jax.vjp(lambda *a: fj.attention(*a, causal=causal, layout="bhnd"), q, k, v))(jq, jk, jv)
        apply = jax.jit(lambda fn, ct: fn(ct))
        out = ft.attention(tq, tk, tv, causal=causal, layout="bhnd")
        torch_grads = torch.autograd.grad(out, (tq, tk, tv), tdo, retain_graph=True)
        err = max(common.rel_err(common.torch_from_jax(torch, g, "cuda").float(), t.float())
                  for g, t in zip(apply(vjp_fn, jdo), torch_grads))
        jax_ms = common.time_jax(apply, (vjp_fn, jdo), 100, 500)
        torch_ms = common.time_torch(lambda: torch.autograd.grad(out, (tq, tk, tv), tdo, retain_graph=True), 25, 200)
        print(f"slot {slot} backward B={b} N={n} H={h} D={d} {'causal' if causal else 'full'}: jax {flops / jax_ms * 1e-9:.0f} "
              f"torch {flops / torch_ms * 1e-9:.0f} jax/torch {torch_ms / jax_ms:.3f} max grad err vs torch {err:.1e}",
              flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("compare", "encodings", "descriptors", "frontends"))
    parser.add_argument("slot", nargs="?", choices=("shared", "program"), default="shared",
                        help="frontends: JAX's maps in one slot (flashx's default) or one a program")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--variants", nargs="+", choices=DESCRIPTOR_VARIANTS, help="descriptors: only these (host first)")
    args = parser.parse_args()
    if args.what == "compare":
        return compare()
    if args.what == "encodings":
        return encodings()
    if args.what == "frontends":
        return frontends(args.slot)
    return descriptors(args.rounds, tuple(args.variants or DESCRIPTOR_VARIANTS))


if __name__ == "__main__":
    sys.exit(main())
