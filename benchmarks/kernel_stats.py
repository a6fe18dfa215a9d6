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
    python benchmarks/kernel_stats.py --offline [--jax] [--d 64 128] [--n 1024] [--tile NAME] [--sass DIR] [--alibi]
        [--float32 tf32x3|ieee|tf32|bf16x3]    # no GPU needed

On the GPU it reads Triton's per-device kernel cache (`JITFunction.device_caches`, internal API
of Triton 3.6 to 3.9). --offline compiles the same kernels for sm_90 on any machine
(`triton.compile` with the plan's tiles and options, integer arguments specialized as Triton's
launcher does: 1 becomes a constant, multiples of 16 are marked; --jax: as the JAX frontend's
launches are built, floats as fp64 and integers marked only in Gluon kernels: flashx's builder
marks them, jax-triton's own, the tl kernels', does not) and reads registers and stack (spill)
bytes from ptxas's output through the cuobjdump Triton bundles. Where the H200 runs the Gluon forward instead
(core.tuning.GLUON_FORWARD_ROUTE), a "Gluon forward" line follows the forward's: its registers are
the launch's, which the kernel then splits between its warp groups (setmaxnreg); where torch's
launches take a TMA tile with host descriptors (core.tuning.GLUON_TMA_ROUTE; needs torch for the
descriptors), a "Gluon TMA fwd" line. Below core.tuning.HOST_DESCRIPTORS_FROM_KEYS keys torch's
launches build the descriptors on the device instead, which this mode does not compile: --jax
compiles that build (but for JAX's scratch pointer and specialization). A kernel whose wgmma ptxas serializes (warning C7514: an instruction reads
a wgmma's accumulator while it is in flight, which undoes any overlap) is flagged "WGMMA
SERIALIZED". With the GPU's Triton (3.6.0) installed it gives
the H200's figures exactly (checked on main at 03f9c36: 126/127 and 255 registers, the same
spills); another Triton version compiles differently.
"""
from __future__ import annotations

import argparse
import inspect
import os


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


# Pointer element types of the kernels' array arguments (the rest are the inputs' dtype); the
# backward's row statistics, float32 too, by core's names for them (offline's float32_arrays).
_FLOAT32_ARRAYS = ("LSE", "DLSE", "DBIAS", "SLOPES", "O_SPLIT", "LSE_SPLIT")
_INT32_ARRAYS = ("BLOCK_TABLE", "CU_SEQLENS_Q", "CU_SEQLENS_K", "SEQUSED_Q", "SEQUSED_K", "MAP_COUNTS", "MAP_INDICES", "MAP_T_COUNTS",
                 "MAP_T_INDICES", "MASK", "DROPOUT_SEED")


def normalized_ptx(ptx: str) -> str:
    """PTX without what changes when nothing a kernel does changes: comments, line info, debug
    sections, register and label numbers, and parameter declarations and numbering (a new unused
    argument shifts them)."""
    import re

    ptx = ptx.split(".section")[0]  # the debug sections carry line numbers
    ptx = re.sub(r"//.*|\.loc.*|\.file.*", "", ptx)
    ptx = re.sub(r"%(r|rd|f|fd|p|rs)\d+", r"%\1", ptx)
    ptx = re.sub(r"\$L__\w+", "L", ptx)
    ptx = re.sub(r"_param_\d+", "_param_N", ptx)
    lines = (line.strip() for line in ptx.splitlines())
    return "\n".join(line for line in lines if line not in ("", "L:") and not line.startswith(".param"))


def sass_loops(sass: str, top: int = 8, fewest: int = 16) -> list:
    """The innermost loops of a kernel's SASS (cuobjdump -sass): (first address, branch address,
    instruction count, [(opcode, count)] of the `top` commonest) for each backward branch whose
    body (its target to the branch) holds at least `fewest` instructions and no other such loop.
    What a kernel's hot loops hold, counted statically: a block a step may branch over (a masked
    step's selects) counts as if taken. Left out: few-instruction loops (barrier spin-waits) and
    bodies holding an EXIT (an out-of-line wait stub past the kernel's end that branches back
    into it)."""
    import re
    from collections import Counter

    line = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)[^;]*?(?:\s0x([0-9a-f]+))?\s*;")
    code = [(int(m.group(1), 16), m.group(2), m.group(3)) for m in map(line.search, sass.splitlines()) if m]
    loops = []
    for address, opcode, target in code:
        if opcode == "BRA" and target is not None and int(target, 16) < address:
            body = Counter(op for at, op, _ in code if int(target, 16) <= at <= address)
            if sum(body.values()) >= fewest and "EXIT" not in body:
                loops.append((int(target, 16), address, sum(body.values()), body.most_common(top)))
    return [loop for loop in loops
            if not any(other is not loop and loop[0] <= other[0] and other[1] <= loop[1] for other in loops)]


def offline(d_list, jax_like: bool, window=None, ptx_hash: bool = False, documents: bool = False,
            seqlen: int = 4096, tile: str = None, sass_dir: str = None, other_ptxas: str = None,
            softcap: float = None, dropout_p: float = 0.0, decode: bool = False, alibi: bool = False,
            float32: str = None) -> None:
    """Compile each config's forward, the backward's dK/dV and dQ apart (split) and together ("both"),
    for sm_90 without a GPU; print their resources (ptx_hash: and a hash of normalized_ptx, to
    compare two trees' kernels).

    window: a left window size; then only the causal sliding window (window=(window, 0)) is built.
    documents: only the causal document mask (mask_mod, 8 documents, its block map) is built.
    softcap: every config with this softcap (the tl kernels' path: the Gluon ones take none).
    dropout_p: every config with dropout (the tl kernels' path too).
    alibi: every config with per-head ALiBi slopes (the tl kernels' path too), and the backward's
    dQ and fused launches once more with the slopes' gradient ("dQ slopes", "both slopes").
    float32: every config in float32 with this float32_precision (the tl kernels: the plan routes
    no float32 call to Gluon), instead of bf16.
    decode: instead, a decode step (B = 1, Nq = 1, 32 q heads over 8, N keys) on a cache paged in
    pages of 256 rows, packed (4 query rows per kv head) and split over the keys (on 132 SMs) as
    the frontends run it, and its combine; then the same step on a dense cache.
    seqlen: N of the (16384 // N, N, 2048 // D, D) shape planned (the routes differ by N).
    tile: a gluon_forward_check.py variant that the TMA route then gives every call of its head
    dim (its "Gluon TMA fwd" line), to read a prepared tile's resources before it runs.
    sass_dir: write each kernel's SASS there and print its loops' instruction mix (sass_loops).
    other_ptxas: also assemble each kernel's PTX with this ptxas (as jaxlib assembles JAX's, with
    the one it finds) and print that cubin's registers, stack and (sass_dir) loops on a second line."""
    import hashlib
    import re
    import subprocess
    import sys
    import tempfile
    import types

    # flashx picks Triton's interpreter when no GPU is present; here the kernels must be built
    # as GPU kernels (only compiled, never launched), so its runtime module is replaced first.
    stub = types.ModuleType("flashx.core.runtime")
    stub.INTERPRETER = False
    stub.warn_once_if_interpreted = lambda: None
    stub.repair_triton_cache_dir = lambda: None
    stub.multiprocessor_count = lambda: 132  # the H200's
    gluon_on = [False]  # the Gluon forward's route: off but for its own line
    stub.hopper_gluon = lambda: gluon_on[0]
    sys.modules["flashx.core.runtime"] = stub
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    global _document_mask
    if not hasattr(_document_mask, "fn"):  # a plain function until triton is importable here
        _document_mask = triton.jit(_document_mask)
    from triton.experimental.gluon._runtime import GluonASTSource

    from flashx import core
    from flashx.core.launch import kernel_params
    # The row statistics as written (DELTA_OUT, LSE_LOG2_OUT) and as read (DELTA, LSE_LOG2).
    float32_arrays = _FLOAT32_ARRAYS + tuple(core.ROW_STATS_INPUTS) + tuple(core.ROW_STATS_INPUTS.values())

    if tile is not None:  # routed for its head dim, causal or not, at any length
        from gluon_forward_check import VARIANTS, _constexprs

        constexprs = _constexprs(VARIANTS[tile], causal=False)
        core.tuning.GLUON_FORWARD_TILES[tile] = {key: constexprs[key] for key in core.tuning.GLUON_FORWARD_TILES["pp"]}
        for causal in (False, True):
            core.tuning.GLUON_TMA_ROUTE[(VARIANTS[tile].head_dim, causal)] = ((0, tile),)

    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    ptxas = os.path.join(os.path.dirname(cuobjdump), "ptxas")

    def tma_arrays(shape):
        """Q, K, V and dO as (CPU) torch tensors, for host descriptors that are only compiled."""
        import torch

        return {name: torch.empty(shape, dtype=torch.bfloat16) for name in ("Q", "K", "V", "DO")}

    def tma_call(plan, shape):
        """(call, outputs): the plan's TMA forward, its descriptors over (CPU) torch tensors (only
        compiled), and its outputs as torch's frontend binds them (a TMA_STORE tile's O is a
        descriptor)."""
        import torch

        call = plan.forward_call(tma_arrays(shape), None, descriptors="host")
        outputs = dict(O=torch.empty(plan.out_shape, dtype=torch.bfloat16),
                       LSE=torch.empty(plan.lse_shape, dtype=torch.float32))
        return call, plan.launch_outputs(call, outputs, torch.empty(1))

    def tma_gradients(plan, call):
        """A host-descriptor dK/dV launch's outputs as torch's frontend binds them (a TMA_STORE
        tile's DK and DV are descriptors over CPU tensors, only compiled)."""
        import torch

        outputs = dict(DK=torch.empty(plan.k_shape, dtype=torch.bfloat16),
                       DV=torch.empty(plan.v_shape, dtype=torch.bfloat16))
        return plan.launch_outputs(call, outputs, torch.empty(1))

    def resources(call, dtype: str, outputs: tuple = (), sass_name: str = None) -> str:
        """outputs: the launch's bound outputs where they matter to the signature (descriptors);
        else its outputs are pointers."""
        from triton.runtime.jit import mangle_type

        names, constexpr_names = kernel_params(call.kernel)
        gluon = call.kernel.__class__.__name__ == "GluonJITFunction"
        values = list(call.args) + list(outputs or (None,) * len(call.outputs))
        signature, attrs, constants = {}, {}, {}
        # The kernel's own names for its outputs (a split forward binds O_SPLIT in O's place).
        params = [n for n in inspect.signature(call.kernel.fn).parameters if n not in constexpr_names]
        for i, (name, role) in enumerate(zip(params, list(names) + list(call.outputs))):
            value = values[i]
            if hasattr(value, "block_shape"):  # a TMA descriptor
                signature[name] = mangle_type(value)
            elif name.isupper():  # an array
                signature[name] = "*" + ("fp32" if role in float32_arrays else "i32" if role in _INT32_ARRAYS else dtype)
                attrs[(i,)] = [["tt.divisibility", 16]]
            elif isinstance(value, float):
                signature[name] = "fp64" if jax_like else "fp32"
            elif value == 1:  # both launchers turn integer 1s into constants
                signature[name] = "constexpr"
                constants[(i,)] = 1
            else:
                signature[name] = "i64" if abs(value) >= 2**31 else "i32"
                # flashx's JAX builder (flashx/jax/gluon.py) marks Gluon kernels' integers as
                # Triton's launcher does; jax-triton's own builder, the tl kernels', marks none.
                if value % 16 == 0 and value != 0 and (gluon or not jax_like):
                    attrs[(i,)] = [["tt.divisibility", 16]]
        first = len(names) + len(call.outputs)
        for j, name in enumerate(constexpr_names):
            signature[name] = "constexpr"
            constants[(first + j,)] = call.constexprs[name]
        source = GluonASTSource if gluon else ASTSource
        compiled = triton.compile(source(call.kernel, signature, constants, attrs),
                                  target=GPUTarget("cuda", 90, 32), options=dict(call.options))
        def cubin_stats(cubin: bytes, name: str) -> tuple:
            """(registers, stack bytes, its loops' instruction mix where sass_name asks)."""
            with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
                f.write(cubin)
                f.flush()
                usage = subprocess.run([cuobjdump, "--dump-resource-usage", f.name], capture_output=True,
                                       text=True).stdout
                sass = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True).stdout if name else ""
            found = re.search(r"REG:(\d+) STACK:(\d+)", usage)
            loops = ""
            if name:
                with open(os.path.join(sass_dir, name + ".sass"), "w") as f:
                    f.write(sass)
                loops = "".join(f"\n    loop {start:#06x}-{end:#06x}: {count} instructions: "
                                + ", ".join(f"{op} {n}" for op, n in mix) for start, end, count, mix in sass_loops(sass))
            return found.group(1), found.group(2), loops

        registers, stack, loops = cubin_stats(compiled.asm["cubin"], sass_name)
        # ptxas serializes every wgmma of a kernel where other instructions read a wgmma's
        # accumulator while it is in flight (warning C7514): correct, and without any overlap.
        with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
            f.write(compiled.asm["ptx"])
            f.flush()
            log = subprocess.run([ptxas, "-v", "-arch=sm_90a", f.name, "-o", os.devnull], capture_output=True,
                                 text=True).stderr
        serialized = "  WGMMA SERIALIZED (ptxas C7514)" if "C7514" in log else ""
        md = compiled.metadata
        digest = hashlib.sha1(normalized_ptx(compiled.asm["ptx"]).encode()).hexdigest()[:12] if ptx_hash else ""
        other = ""
        if other_ptxas:
            with tempfile.TemporaryDirectory() as folder:
                ptx_file, cubin_file = os.path.join(folder, "k.ptx"), os.path.join(folder, "k.cubin")
                with open(ptx_file, "w") as f:
                    f.write(compiled.asm["ptx"])
                subprocess.run([other_ptxas, "-arch=sm_90a", ptx_file, "-o", cubin_file], check=True)
                with open(cubin_file, "rb") as f:
                    other_registers, other_stack, other_loops = cubin_stats(
                        f.read(), sass_name and sass_name + "-other-ptxas")
            other = f"\n  {other_ptxas}: registers {other_registers:>3}  stack {other_stack} bytes" + other_loops
        return (f"warps {md.num_warps}  stages {md.num_stages}  shared {md.shared // 1024:4d} KiB  "
                f"registers {registers:>3}  stack {stack} bytes" + (f"  ptx {digest}" if digest else "")
                + serialized + loops + other)

    print(f"Triton {triton.__version__}, sm_90, {'jax-triton' if jax_like else 'torch (Triton launcher)'} specialization")
    if decode:
        for d in d_list:
            page_rows = 256
            # As the frontends plan it: the one query's 4 q heads per kv head packed as 4 rows
            # (core.packed_query_heads), causal dropped (a no-op for one query).
            q = core.ArraySpec((1, 4, 8, d), (32 * d, d, 4 * d, 1), "bfloat16", "cuda:0")
            cache_shape = (seqlen // page_rows, page_rows, 8, d)
            cache = core.ArraySpec(cache_shape, core.dense_strides(cache_shape), "bfloat16", "cuda:0")
            table = core.ArraySpec((1, seqlen // page_rows), (seqlen // page_rows, 1), "int32", "cuda:0")
            lengths = core.ArraySpec((1,), (1,), "int32", "cuda:0")
            # The same step on a dense cache (1, N, 8, D) beside it: what the pages cost.
            dense_shape = (1, seqlen, 8, d)
            dense = core.ArraySpec(dense_shape, core.dense_strides(dense_shape), "bfloat16", "cuda:0")
            for cache_name, plan in (("paged", core.plan_attention(q, cache, cache, block_table=table, seqused_k=lengths)),
                                     ("dense", core.plan_attention(q, dense, dense))):
                for call in plan.forward_calls({}, None):
                    name = "split forward" if call.outputs[0] == "O_SPLIT" else "combine" if call.kernel.fn.__name__.startswith(
                        "attention_combine") else "forward"
                    sass_name = f"decode-{cache_name}-{name.replace(' ', '-')}-d{d}" if sass_dir else None
                    print(f"D={d:3d} decode {cache_name} N={seqlen} splits {plan.scalars['kv_splits']:2d} {name:13s} "
                          f"{resources(call, 'bf16', sass_name=sass_name)}", flush=True)
        return
    for d in d_list:
        for causal in (False, True) if window is None and not documents else (True,):
            shape = (max(16384 // seqlen, 1), seqlen, 2048 // d, d)
            spec = core.ArraySpec(shape, core.dense_strides(shape), "float32" if float32 else "bfloat16", "cuda:0")
            options = dict(causal=causal, window=None if window is None else (window, 0), softcap=softcap)
            if float32:
                options["float32_precision"] = float32
            if dropout_p:
                options.update(dropout_p=dropout_p, dropout_seed=core.ArraySpec((2,), (1,), "int32", "cuda:0"))
            if alibi:
                options["alibi_slopes"] = core.ArraySpec((shape[2],), (1,), "float32", "cuda:0")
            if documents:  # with its block map, as the frontends plan it once they have built it
                options["block_mask"] = core.plan.plan_block_mask(_document_mask, None, None, shape[1], shape[1], causal=True)
                options["mask_mod"] = _document_mask
            plan = core.plan_attention(spec, spec, spec, **options)
            label = (f"window {window:<4d}" if window is not None else "documents " if documents
                     else "causal    " if causal else "non-causal")
            calls = [("forward", plan.forward_call({}, None))]
            gluon_on[0] = True
            if plan.gluon_forward:  # what an H200 runs instead, at this shape (core.tuning.GLUON_FORWARD_ROUTE)
                calls.append(("Gluon forward", plan.forward_call({}, None)))
            tma_tile = plan.gluon_forward_tile(descriptors="host")
            if not jax_like and tma_tile != plan.gluon_tile:  # torch's TMA tile (core.tuning.GLUON_TMA_ROUTE)
                calls.append(("Gluon TMA fwd", *tma_call(plan, shape)))
            if jax_like and plan.gluon_forward_tile(descriptors="device") != plan.gluon_tile:
                # JAX's TMA tile: its descriptors built by each program (DEVICE_DESCRIPTORS)
                calls.append(("Gluon TMA fwd", plan.forward_call({}, None, descriptors="device")))
            kind = plan._gluon_backward_kind()
            if kind is not None:  # the Gluon backward kernels, routed here at every head dim for these lines
                names = ("GLUON_DKDV_ROUTE", "GLUON_DKDV_TMA_ROUTE", "GLUON_DQ_ROUTE")
                routes = tuple(getattr(core.tuning, name) for name in names)
                for name, tile in zip(names, ("dkdv", "dkdv-tma", "dq")):
                    setattr(core.tuning, name, {(d, kind): tile})
                try:
                    launches = plan.backward_calls({}, None, False, spec)  # dQ's may come first (row statistics)
                    (gluon_dkdv,) = [c for c in launches if "DK" in c.writes]
                    (gluon_dq,) = [c for c in launches if "DQ" in c.writes]
                    calls.append(("Gluon dK/dV", gluon_dkdv))
                    # Its TMA tiles: host descriptors (torch's, over CPU tensors), or built on the device (JAX's).
                    routed_tma = routes[1].get((d, kind), "dkdv-tma-ts")  # the tile GLUON_DKDV_TMA_ROUTE gives
                    for tile, line in ((routed_tma, "Gluon dK/dV TMA"), ("dkdv-tma-persist", "Gluon dK/dV TMA p")):
                        core.tuning.GLUON_DKDV_TMA_ROUTE = {(d, kind): tile}
                        launches = (
                            plan.backward_calls({}, None, False, spec, descriptors="device") if jax_like
                            else plan.backward_calls(tma_arrays(shape), None, False, spec, descriptors="host"))
                        (gluon_tma,) = [c for c in launches if "DK" in c.writes]
                        calls.append((line, gluon_tma) if jax_like else (line, gluon_tma, tma_gradients(plan, gluon_tma)))
                    calls.append(("Gluon dQ", gluon_dq))
                finally:
                    for name, route in zip(names, routes):
                        setattr(core.tuning, name, route)
            gluon_on[0] = False
            split = plan.backward_calls({}, None, False, spec, split=True)
            dkdv = [call for call in split if call.constexprs.get("RUN_DKDV")]
            (dq,) = [call for call in split if call.constexprs.get("RUN_DQ")]  # it may write the row statistics
            # dK/dV in two passes (TileConfig.dkdv_passes) compiles once per pass.
            calls += [("dV" if call.writes == ("DV",) else "dK" if call.writes == ("DK",) else "dK/dV", call) for call in dkdv]
            calls.append(("dQ", dq))
            fusable = len({launch.options["num_warps"] for launch in (*dkdv, dq)}) == 1  # else never launched as one
            if fusable:
                calls.append(("both", plan.backward_calls({}, None, False, spec, split=False)[1]))
            if alibi:
                calls.append(("dQ slopes", [c for c in plan.backward_calls({}, None, False, spec, split=True, slopes_grad=True)
                                            if c.constexprs.get("RUN_DQ")][0]))
                if fusable:
                    calls.append(("both slopes", plan.backward_calls({}, None, False, spec, split=False, slopes_grad=True)[1]))
            for name, call, *outputs in calls:
                sass_name = f"d{d}-{label.strip().replace(' ', '')}-{name.replace(' ', '-').replace('/', '')}" if sass_dir else None
                print(f"D={d:3d} {label} {name:13s} {resources(call, 'fp32' if float32 else 'bf16', *outputs, sass_name=sass_name)}",
                      flush=True)


def _document_mask(b, h, q_idx, kv_idx):
    """8 documents of 512 tokens (N = 4096), as bench_variants.py's document mask; made a
    @triton.jit function where it is used (triton is imported late, see offline)."""
    return (q_idx // 512) == (kv_idx // 512)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, nargs="+", default=[64, 128])
    p.add_argument("--lengths", type=int, nargs="*", default=[2048, 3072, 2050, 4096])
    p.add_argument("--offline", action="store_true", help="compile for sm_90 without a GPU (see above)")
    p.add_argument("--jax", action="store_true", help="--offline: the JAX frontend's specialization (floats fp64; integers marked in Gluon kernels only)")
    p.add_argument("--window", type=int, default=None, help="--offline: the causal sliding window (LEFT, 0) instead")
    p.add_argument("--documents", action="store_true", help="--offline: the causal document mask instead")
    p.add_argument("--softcap", type=float, default=None, help="--offline: every config with this softcap")
    p.add_argument("--dropout", type=float, default=0.0, help="--offline: every config with this dropout_p")
    p.add_argument("--alibi", action="store_true", help="--offline: every config with ALiBi, and the slopes' gradient")
    p.add_argument("--decode", action="store_true", help="--offline: a paged decode step's split forward and combine instead")
    p.add_argument("--float32", metavar="PRECISION", choices=("tf32x3", "ieee", "tf32", "bf16x3"),
                   help="--offline: float32 inputs with this float32_precision instead of bf16")
    p.add_argument("--n", type=int, default=4096, help="--offline: plan (16384 // N, N, 2048 // D, D) (default 4096)")
    p.add_argument("--tile", help="--offline: route this gluon_forward_check.py (TMA) variant")
    p.add_argument("--ptx-hash", action="store_true",
                   help="--offline: also a hash of each kernel's normalized PTX (equal on two trees: the same instructions)")
    p.add_argument("--sass", metavar="DIR", help="--offline: write each kernel's SASS to DIR and print its loops' instruction mix")
    p.add_argument("--other-ptxas", metavar="PATH",
                   help="--offline: also assemble each kernel with this ptxas (e.g. CUDA 13.0's, as jaxlib does)")
    args = p.parse_args(argv)
    if args.offline:
        if args.sass:
            os.makedirs(args.sass, exist_ok=True)
        offline(args.d, args.jax, args.window, args.ptx_hash, args.documents, args.n, args.tile, args.sass,
                args.other_ptxas, args.softcap, args.dropout, args.decode, args.alibi, args.float32)
        return 0

    import torch

    import flashx.torch as ft
    from flashx.core import backward, forward

    kernels = {"forward": forward.attention_forward_kernel, "backward": backward.attention_backward_kernel}
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
