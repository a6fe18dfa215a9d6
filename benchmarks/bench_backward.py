#!/usr/bin/env python3
"""Backward attention throughput: flashx (torch and JAX frontends) beside torch SDPA's FA2 and
cuDNN backends, FlexAttention, jax.nn.dot_product_attention's cuDNN and JAX's Pallas GPU
attention, with flashx's gradient error and peak extra memory.

Shapes: those of bench_forward.py: B*N = 16k tokens, H*D = 2048, D in {64, 128, 256},
N = Nq = Nkv in {1k, 4k, 16k} (B = 16k / N, H = 2048 / D), causal and not, bf16 by default.
Every torch system gets the very same q, k, v, dO of shape (B, H, N, D) (flashx: layout="bhnd";
flashx's JAX frontend sees the same buffers through DLPack). The JAX peers take (B, N, H, D)
only: they get a copy in that layout, made once per shape, outside the timing.

Two timings per system:
- fwd+bwd: out = attention(q, k, v); torch.autograd.grad(out, (q, k, v), dO), counted as
  3.5x the forward's FLOPs;
- bwd: torch.autograd.grad(out, (q, k, v), dO, retain_graph=True) on one saved forward,
  counted as 2.5x the forward's FLOPs (the convention of FlashAttention's papers);
forward FLOPs: 4 * B * H * N * N * D, halved when causal. torch: triton.testing.do_bench
(median, L2 flushed). JAX: fwd+bwd is one jitted jax.vjp of the forward whose pullback is
applied to dO (torch's computation; until 2026-12-03 it was jax.grad of sum(out * dO), which
adds a product and a reduction over out); bwd is the jitted application of the vjp function of
one saved forward; both timed with block_until_ready, median. The JAX peers are timed the same
way. flashx's JAX frontend is timed so in turns with its torch frontend's same call timed the same
way, round by round (common.time_back_to_back_in_turns): the like-for-like `b2b` ratio.

FlexAttention: torch.nn.attention.flex_attention under torch.compile (dynamic=False), with a
block mask from create_block_mask(causal) when causal, None otherwise, built once per shape.
jax.nn cuDNN: jax.nn.dot_product_attention(implementation="cudnn"). Pallas GPU:
jax.experimental.pallas.ops.gpu.attention.mha (Triton lowering, default block sizes, its own
Triton backward; sm_scale = 1/sqrt(D)), with --device cpu in Pallas' interpret mode.

Checks: every system's dQ, dK, dV against SDPA's (FA2's, else cuDNN's, else the efficient
backend's) once per shape, as relative Frobenius errors; the largest of the three is in the
table (the peers' errors are the yardstick for flashx's).

Memory (torch systems): peak of torch.cuda.max_memory_allocated() during one forward, less the
memory allocated before it and less the output; and during one backward, less the memory before
it and less the gradients. So it counts what the system keeps for the backward (flashx: the
float32 lse) and its scratch; printed beside the O(B*H*N) unit of one float32 per query row
and head, 4*B*H*N bytes (the lse; flashx's backward keeps two such arrays, delta and lse_log2,
each row padded to whole 128-row blocks at D > 64).

A system that fails on a shape is shown as "-" with its reason, listed under the tables; the
run goes on. Writes DIR/backward.md (tables, with the date, GPU, driver and versions),
DIR/backward.json and DIR/backward.png (TFLOP/s vs N per D and causal flag); DIR defaults to
benchmarks/results/h200. Prints the markdown last.

    python benchmarks/bench_backward.py            # full sweep (18 shapes)
    python benchmarks/bench_backward.py --quick    # D in {64, 128}, N = 4k: ~3 minutes on an H200
    python benchmarks/bench_backward.py --device cpu   # debug pass: interpreter, tiny shapes

Needs a CUDA GPU (but --device cpu); importing this module does no work.
FLASHX_BENCH_TRACEBACK=1 prints the full traceback of each failure.
"""
from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

try:  # python -m benchmarks.bench_backward
    from . import common
except ImportError:  # python benchmarks/bench_backward.py
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import common  # sets XLA_PYTHON_CLIENT_PREALLOCATE=false: torch and JAX share this process

Result = common.Result
Shape = common.Shape

QUICK_HEAD_DIMS = (64, 128)
QUICK_SEQLENS = (4096,)
CPU_HEAD_DIMS, CPU_SEQLENS = (16,), (32,)
QUICK_BUDGET_S = 140.0  # alone; run_all.sh --quick passes its own --budget-s (caps there)
BWD_FACTOR = 2.5  # backward FLOPs over forward FLOPs
MODES = {"fwd_bwd": "fwd+bwd", "bwd": "bwd"}
MEMORY_FLAG = 8  # flashx's extra memory above this many times 4*B*H*N bytes (plus 1 MiB) is flagged

SYSTEMS, JAX_SYSTEMS, RATIOS = common.DENSE_SYSTEMS, common.JAX_SYSTEMS, common.DENSE_RATIOS
PEERS_FIRST = ("sdpa_flash", "sdpa_cudnn", "flex", "flashx_torch", "flashx_jax", "jax_cudnn", "pallas")
TORCH_SYSTEMS = ("flashx_torch", "sdpa_flash", "sdpa_cudnn", "flex")
GRADS = ("dq", "dk", "dv")


@dataclass
class Memory:
    fwd: Optional[int] = None  # bytes
    bwd: Optional[int] = None
    reason: Optional[str] = None


@dataclass
class Row:
    shape: Shape
    results: dict = field(default_factory=dict)  # system -> {mode: Result}
    grad_err: dict = field(default_factory=dict)  # system -> {"dq": err, "dk": err, "dv": err}
    memory: dict = field(default_factory=dict)  # system -> Memory
    reference: Optional[str] = None  # which SDPA backend the gradient errors are measured against

    def fill(self, systems, why: str) -> None:
        """Systems and modes not measured (yet) get `why` as their reason."""
        for system in systems:
            done = self.results.setdefault(system, {})
            for mode in MODES:
                done.setdefault(mode, Result(reason=why))

    @property
    def bound_bytes(self) -> int:
        """One float32 per (batch, head, query row): the lse, or one of the backward's delta and lse_log2."""
        s = self.shape
        return 4 * s.batch * s.heads * s.seqlen


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Backward attention TFLOP/s (fwd+bwd and bwd only), gradient error and peak extra memory: "
        "flashx (torch, JAX) vs torch SDPA's FA2 and cuDNN backends, FlexAttention, jax.nn.dot_product_attention "
        "(cuDNN) and JAX's Pallas GPU attention.",
        epilog=f"Shapes: B*N={common.TOKENS}, H*D={common.HIDDEN}; full sweep D in {common.HEAD_DIMS}, "
        f"N in {common.SEQLENS}; --quick: D in {QUICK_HEAD_DIMS}, N in {QUICK_SEQLENS}; causal and not.",
    )
    common.add_common_args(p, "backward", "D in {64, 128}, N = 4k, shorter timing (~3 minutes on an H200)",
                           QUICK_BUDGET_S)
    p.add_argument("--d", type=int, nargs="+", metavar="D", help="head dims to run (overrides the sweep's)")
    p.add_argument("--n", type=int, nargs="+", metavar="N", help="sequence lengths to run (overrides the sweep's)")
    p.add_argument("--causal", choices=("both", "yes", "no"), default="both", help="causal shapes to run (default: %(default)s)")
    p.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS), help="systems to run (default: all)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurement")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------------------------
# One shape


def _nbytes(tensors) -> int:
    return sum(t.untyped_storage().nbytes() for t in tensors if t is not None)


def measure_memory(torch, fwd, inputs: tuple, dout) -> Memory:
    """Peak extra bytes of one forward (less its output) and one backward (less the gradients)."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fwd()
    torch.cuda.synchronize()
    fwd_extra = torch.cuda.max_memory_allocated() - base - _nbytes([out])
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    grads = torch.autograd.grad(out, inputs, dout)
    torch.cuda.synchronize()
    bwd_extra = torch.cuda.max_memory_allocated() - base - _nbytes(grads)
    del out, grads
    return Memory(fwd=int(fwd_extra), bwd=int(bwd_extra))


def bench_shape(row: Row, dtype_name: str, systems: list, ctx: dict, warmup_ms: float, rep_ms: float, log) -> None:
    """Measure every system on row.shape, filling row in place (so an interrupted shape keeps what it measured)."""
    shape = row.shape
    torch = ctx["torch"]
    device = ctx["device"]
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import flashx.torch

    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device=device).manual_seed(0)
    size = (shape.batch, shape.heads, shape.seqlen, shape.head_dim)
    q, k, v, dout = (torch.randn(size, device=device, dtype=dtype, generator=gen) for _ in range(4))
    inputs = tuple(t.requires_grad_() for t in (q, k, v))
    fwd_flops = shape.flops
    flops = {"fwd_bwd": (1 + BWD_FACTOR) * fwd_flops, "bwd": BWD_FACTOR * fwd_flops}
    grads = {}  # system -> (dq, dk, dv)

    def show(system):
        for mode, label in MODES.items():
            res = row.results[system][mode]
            if res.reason:
                log(f"  {SYSTEMS[system]:<15} {label:<7} -  ({res.reason})")
            else:
                back_to_back = f"  (back to back {res.wall_ms:.3f} ms)" if res.wall_ms else ""
                log(f"  {SYSTEMS[system]:<15} {label:<7} {res.tflops:7.1f} TFLOP/s  {res.ms:8.3f} ms{back_to_back}")
        mem = row.memory.get(system)
        if mem is not None:
            if mem.reason:
                log(f"  {SYSTEMS[system]:<15} memory  -  ({mem.reason})")
            else:
                log(f"  {SYSTEMS[system]:<15} memory  fwd +{mem.fwd / 2**20:.2f} MiB, bwd +{mem.bwd / 2**20:.2f} MiB "
                    f"(4*B*H*N bytes = {row.bound_bytes / 2**20:.2f} MiB)")

    def time_mode(mode, run):
        value, why = common.guarded(run, ctx)
        return common.measured(value, flops[mode]) if why is None else Result(reason=why)

    jax_twin = "flashx_torch"  # the torch system whose calls flashx_jax is timed in turns with
    torch_calls = {}  # (jax_twin, mode) -> its timed call (a retained graph: the twin's only)

    def torch_system(system, make_fwd):
        """make_fwd() -> a callable running the forward. One warm-up pass (compiles, gradients for
        the check), memory, then the two timings; every failure becomes a '-' with its reason."""
        def warm():
            fwd = make_fwd()
            out = fwd()
            return fwd, torch.autograd.grad(out, inputs, dout)

        value, why = common.guarded(warm, ctx)
        if why is not None:
            row.results[system] = {mode: Result(reason=why) for mode in MODES}
            return
        fwd, grads[system] = value
        if device == "cuda" and not ctx["no_memory"]:
            mem, why = common.guarded(lambda: measure_memory(torch, fwd, inputs, dout), ctx)
            row.memory[system] = mem if why is None else Memory(reason=why)

        def fwd_bwd():
            return lambda: torch.autograd.grad(fwd(), inputs, dout)

        def bwd_only():
            out = fwd()
            return lambda: torch.autograd.grad(out, inputs, dout, retain_graph=True)

        results = {}
        for mode, make_call in (("fwd_bwd", fwd_bwd), ("bwd", bwd_only)):
            call = None

            def timed():
                nonlocal call
                call = make_call()
                return common.time_torch(call, warmup_ms, rep_ms, device)
            results[mode] = time_mode(mode, timed)
            if not results[mode].reason and system == jax_twin:
                torch_calls[system, mode] = call
        row.results[system] = results

    def sdpa(backend):
        return lambda: common.sdpa_call(backend, q, k, v, is_causal=shape.causal)

    def flashx_fwd():
        return lambda: flashx.torch.attention(q, k, v, causal=shape.causal, layout="bhnd")

    def flex_fwd():
        return functools.partial(common.flex_for(ctx, shape.causal, shape.seqlen), q, k, v)

    def jax_system(system, make_attention, bnhd: bool, torch_twin: Optional[str] = None):
        """make_attention() -> a JAX (q, k, v) -> out; bnhd: it takes (B, N, H, D) (a copy of the
        inputs and dO, made before the timings) rather than the torch buffers' (B, H, N, D).
        torch_twin: the torch system running the same kernels (flashx_torch): in each mode it ran,
        this system and its call are timed back to back in turns (common.time_back_to_back_in_turns):
        this system's figure from there, the twin's back-to-back time its wall_ms."""
        jax = common.require_jax(ctx)
        convert = common.jax_bnhd_from_torch if bnhd else common.jax_from_torch
        back = common.torch_bhnd_from_jax if bnhd else common.torch_from_jax
        jq, jk, jv, jdo = (convert(jax, t) for t in (q, k, v, dout))
        if device == "cuda":
            torch.cuda.synchronize()  # these buffers are torch's (and maybe copies): written before JAX reads them
        attn = make_attention()

        def forward_backward(q_, k_, v_, do_):
            # torch's autograd.grad(out, (q, k, v), dO) in JAX: dO is out's cotangent as it is,
            # where jax.grad of sum(out * dO) would add a product and a reduction over out.
            _, pullback = jax.vjp(attn, q_, k_, v_)
            return pullback(do_)

        def timed(mode, fn, args):
            """fn(*args)'s ms: in turns with the twin's call of this mode where there is one."""
            twin = torch_calls.get((torch_twin, mode))
            if twin is None:
                return common.time_jax(fn, args, warmup_ms, rep_ms)
            wall_ms, ms = common.time_back_to_back_in_turns(twin, fn, args, warmup_ms, rep_ms, device)
            row.results[torch_twin][mode].wall_ms = wall_ms
            log(f"  {SYSTEMS[torch_twin]:<15} {MODES[mode]:<7} back to back {wall_ms:.3f} ms (in turns with {SYSTEMS[system]})")
            return ms

        grad_fn = jax.jit(forward_backward)
        results = {}
        value, why = common.guarded(lambda: (timed("fwd_bwd", grad_fn, (jq, jk, jv, jdo)),
                                             grad_fn(jq, jk, jv, jdo)), ctx)
        if why is None:
            results["fwd_bwd"] = common.measured(value[0], flops["fwd_bwd"])
            grads[system] = tuple(back(torch, g, device) for g in jax.block_until_ready(value[1]))
        else:
            results["fwd_bwd"] = Result(reason=why)

        def bwd_only():
            _, vjp_fn = jax.jit(lambda a, b, c: jax.vjp(attn, a, b, c))(jq, jk, jv)
            apply = jax.jit(lambda f, ct: f(ct))
            return timed("bwd", apply, (vjp_fn, jdo))

        results["bwd"] = time_mode("bwd", bwd_only)
        row.results[system] = results

    def flashx_jax_attention():
        import flashx.jax

        return functools.partial(flashx.jax.attention, causal=shape.causal, layout="bhnd")

    def jax_peer(system):
        return lambda: common.jax_peer(system, shape.causal, shape.head_dim, device)

    runners = {
        "sdpa_flash": lambda: torch_system("sdpa_flash", sdpa(SDPBackend.FLASH_ATTENTION)),
        "sdpa_cudnn": lambda: torch_system("sdpa_cudnn", sdpa(SDPBackend.CUDNN_ATTENTION)),
        "flex": lambda: torch_system("flex", flex_fwd),
        "flashx_torch": lambda: torch_system("flashx_torch", flashx_fwd),
        "flashx_jax": lambda: jax_system("flashx_jax", flashx_jax_attention, bnhd=False, torch_twin=jax_twin),
        "jax_cudnn": lambda: jax_system("jax_cudnn", jax_peer("jax_cudnn"), bnhd=True),
        "pallas": lambda: jax_system("pallas", jax_peer("pallas"), bnhd=True),
    }
    # Peers first, so the reference exists before flashx is checked against it.
    for system in sorted(systems, key=PEERS_FIRST.index):
        _, why = common.guarded(runners[system], ctx)  # set-up failures outside the timed parts
        if why is not None:
            row.results[system] = {mode: Result(reason=why) for mode in MODES}
            grads.pop(system, None)
        show(system)

    # The reference: SDPA's FA2 gradients, else cuDNN's, else the efficient backend's.
    ref = None
    for name, system in (("SDPA FA2", "sdpa_flash"), ("SDPA cuDNN", "sdpa_cudnn")):
        if system in grads:
            ref, row.reference = grads[system], name
            break
    if ref is None:
        def efficient():
            with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=shape.causal)
            return torch.autograd.grad(out, inputs, dout)

        ref, why = common.guarded(efficient, ctx)
        row.reference = "SDPA efficient" if why is None else None
        if why is not None:
            log(f"  no SDPA reference for the gradient check: {why}")
    if ref is not None:
        for system, g in grads.items():
            if system == ref_system(row):
                continue
            errs = {name: common.rel_err(a, b) for name, a, b in zip(GRADS, g, ref, strict=True)}
            row.grad_err[system] = errs
            worst = max(errs.values())
            flag = "  <-- WRONG?" if system.startswith("flashx") and not (worst < ctx["err_limit"]) else ""
            log(f"  {SYSTEMS[system]:<15} grad rel err vs {row.reference}: "
                + ", ".join(f"{n} {e:.2e}" for n, e in errs.items()) + flag)
    # the inputs and gradients go with this frame; main() then empties torch's cache


def ref_system(row: Row) -> Optional[str]:
    return {"SDPA FA2": "sdpa_flash", "SDPA cuDNN": "sdpa_cudnn"}.get(row.reference or "")


# ----------------------------------------------------------------------------------------------
# Reports


def _mib(x: Optional[int]) -> str:
    return "-" if x is None else f"{x / 2**20:.1f}"


def markdown(rows: list, env: dict, args: argparse.Namespace, settings: dict) -> str:
    systems = [s for s in SYSTEMS if s in args.systems]
    lines = common.header_lines("flashx backward throughput", env) + [
        f"- {settings['dtype']}, B*N = {settings['tokens']} tokens, H*D = {settings['hidden']}, Nq = Nkv = N, "
        "q/k/v/dO of shape (B, H, N, D) for every torch system (flashx: layout=\"bhnd\", same buffers; flashx's JAX"
        " frontend: the same buffers through DLPack)",
        "- FLOPs: forward 4*B*H*N*N*D (halved when causal); backward 2.5x that; fwd+bwd 3.5x",
        "- fwd+bwd: out = attention(q, k, v) then torch.autograd.grad(out, (q, k, v), dO) (JAX: jit of jax.vjp(attention, q, k, v), its pullback applied to dO);"
        " bwd: torch.autograd.grad(..., retain_graph=True) on one saved forward (JAX: the jitted vjp function)",
        f"- timing: torch: triton.testing.do_bench median (warmup {settings['warmup_ms']:g} ms, rep {settings['rep_ms']:g} ms);"
        f" {common.JAX_TIMING_NOTE}; {common.SETTLE_NOTE};"
        f" {common.rounds_note(settings['rounds'])}",
        "- FlexAttention: torch.compile(flex_attention, dynamic=False), block mask from create_block_mask(causal) when causal;"
        " jax.nn cuDNN: jax.nn.dot_product_attention(implementation=\"cudnn\"); Pallas GPU:"
        " jax.experimental.pallas.ops.gpu.attention.mha (default block sizes); both on a (B, N, H, D) copy",
        "- ratios: TFLOP/s over the peer's (flashx: the torch frontend; flashx jax: the JAX frontend)",
    ]
    ratios = [(mine, peer, label) for mine, peer, label in RATIOS if mine in systems and peer in systems]
    like_for_like = {"flashx_torch", "flashx_jax"} <= set(systems)
    if like_for_like:
        lines.append(f"- {common.BACK_TO_BACK_LABEL}: {common.BACK_TO_BACK_NOTE}")
    lines.append("")
    failures = common.Failures(n_modes=len(MODES))
    for row in rows:
        for k, res in row.results.items():
            for mode in MODES:
                if res[mode].reason:
                    failures.add(row.shape.name, SYSTEMS[k], res[mode].reason, MODES[mode])
    for mode, title in (("bwd", "Backward only, TFLOP/s (2.5x forward FLOPs)"),
                        ("fwd_bwd", "Forward + backward, TFLOP/s (3.5x forward FLOPs)")):
        head = ["D", "N", "B", "H", "causal"] + [SYSTEMS[s] for s in systems] + [label for _, _, label in ratios]
        head += [common.BACK_TO_BACK_LABEL] if like_for_like else []
        body = []
        for row in rows:
            s, r = row.shape, row.results
            get = lambda system: r.get(system, {}).get(mode)  # noqa: E731
            cells = [str(s.head_dim), str(s.seqlen), str(s.batch), str(s.heads), "yes" if s.causal else "no"]
            cells += [common.fmt(getattr(get(sys_), "tflops", None), ".1f") for sys_ in systems]
            cells += [common.ratio(get(mine), get(peer)) for mine, peer, _ in ratios]
            cells += [common.ratio_back_to_back(get("flashx_jax"), get("flashx_torch"))] if like_for_like else []
            body.append(cells)
        lines += [f"## {title}", ""] + common.md_table(head, body) + [""]

    # Gradient errors and memory.
    errs = [s for s in ("flashx_torch", "flashx_jax", "sdpa_cudnn", "flex", "jax_cudnn", "pallas") if s in systems]
    mems = [s for s in TORCH_SYSTEMS if s in systems]
    lines += [
        "## Gradient error and peak extra memory",
        "",
        "- err: largest relative Frobenius error of dQ, dK, dV against the reference SDPA backend's"
        " (FA2's, else cuDNN's); peers' errors are the yardstick for the dtype",
        "- memory (MiB): peak allocated during one forward less the inputs and the output (what is kept for the"
        " backward, and scratch), and during one backward less the gradients; bound: 4*B*H*N bytes, one float32 per"
        " query row and head (O(B*H*N): the lse, the backward's delta); flashx's cell also gives both as multiples"
        " of the bound",
        "",
    ]
    head = ["D", "N", "causal", "ref"] + [f"err {SYSTEMS[s]}" for s in errs]
    head += [f"{SYSTEMS[s]} fwd / bwd" for s in mems] + ["bound 4BHN"]
    body = []
    for row in rows:
        s = row.shape
        cells = [str(s.head_dim), str(s.seqlen), "yes" if s.causal else "no", row.reference or "-"]
        for system in errs:
            e = row.grad_err.get(system)
            cells.append(common.fmt(max(e.values()), ".1e") if e else "-")
        for system in mems:
            m = row.memory.get(system)
            cell = f"{_mib(m.fwd)} / {_mib(m.bwd)}" if m and not m.reason else "-"
            if system == "flashx_torch" and m and not m.reason:
                cell += f" ({m.fwd / row.bound_bytes:.1f}x / {m.bwd / row.bound_bytes:.1f}x)"
            cells.append(cell)
        cells.append(_mib(row.bound_bytes))
        body.append(cells)
        for k, m in row.memory.items():
            if m.reason:
                failures.add(s.name, SYSTEMS[k] + " memory", m.reason)
            elif k.startswith("flashx") and max(m.fwd, m.bwd) > MEMORY_FLAG * row.bound_bytes + 2**20:
                failures.add(s.name, SYSTEMS[k] + " memory", f"{max(m.fwd, m.bwd) / 2**20:.1f} MiB extra, above "
                             f"{MEMORY_FLAG}x the O(B*H*N) bound ({row.bound_bytes / 2**20:.1f} MiB): check for a large buffer")
        for k, e in row.grad_err.items():
            if k.startswith("flashx") and not max(e.values()) < settings["err_limit"]:
                failures.add(s.name, SYSTEMS[k], f"gradient error {max(e.values()):.2e} (above {settings['err_limit']:g}: "
                             "check correctness)")
    lines += common.md_table(head, body)
    lines += failures.lines()
    return "\n".join(lines) + "\n"


def plot(rows: list, args: argparse.Namespace, settings: dict, path: Path, log) -> bool:
    """TFLOP/s vs N per D and causal flag; False if not drawn."""
    plt = common.pyplot(log)
    if plt is None:
        return False
    head_dims = sorted({r.shape.head_dim for r in rows})
    causal_flags = sorted({r.shape.causal for r in rows})
    fig, axes = plt.subplots(
        len(head_dims), len(causal_flags), figsize=(5.5 * len(causal_flags), 3.6 * len(head_dims)), squeeze=False
    )
    markers = dict(zip(SYSTEMS, "osD^v<>", strict=True))
    colors = {system: f"C{i}" for i, system in enumerate(SYSTEMS)}
    for i, d in enumerate(head_dims):
        for j, causal in enumerate(causal_flags):
            ax = axes[i][j]
            mine = sorted((r for r in rows if r.shape.head_dim == d and r.shape.causal == causal), key=lambda r: r.shape.seqlen)
            xs = [r.shape.seqlen for r in mine]
            for system in (s for s in SYSTEMS if s in args.systems):
                for mode, style in (("bwd", "-"), ("fwd_bwd", ":")):
                    ys = [getattr(r.results.get(system, {}).get(mode), "tflops", None) or float("nan") for r in mine]
                    ax.plot(xs, ys, style, marker=markers[system], color=colors[system],
                            label=f"{SYSTEMS[system]} {MODES[mode]}")
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [f"{n / 1024:g}k" for n in xs])
            ax.set_title(f"D={d}, {'causal' if causal else 'non-causal'}, B*N={settings['tokens']}, H*D={settings['hidden']}")
            ax.set_xlabel("N (Nq = Nkv)")
            ax.set_ylabel("TFLOP/s")
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=6, ncol=2)
    fig.suptitle(f"Backward (solid) and forward+backward (dotted) attention, {settings['dtype']}, {settings['gpu']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# ----------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    args = parse_args(argv)
    device = args.device
    warmup_ms, rep_ms = common.timing_defaults(args)
    if device == "cpu":
        tokens, hidden = common.CPU_TOKENS, common.CPU_HIDDEN
        head_dims, seqlens = args.d or CPU_HEAD_DIMS, args.n or CPU_SEQLENS
    else:
        tokens, hidden = common.TOKENS, common.HIDDEN
        head_dims = args.d or (QUICK_HEAD_DIMS if args.quick else common.HEAD_DIMS)
        seqlens = args.n or (QUICK_SEQLENS if args.quick else common.SEQLENS)
    causal_flags = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    shapes = common.shapes_for(head_dims, seqlens, causal_flags, tokens, hidden)
    deadline = common.Deadline(args.budget_s if args.budget_s is not None else (QUICK_BUDGET_S if args.quick else None))

    log = common.log

    torch = common.start("bench_backward.py", device, log)
    if torch is None:
        return 2
    ctx = {"torch": torch, "device": device, "verbose_errors": common.verbose_errors(),
           "err_limit": common.GRAD_ERR_LIMITS[args.dtype], "no_memory": args.no_memory}
    if any(s in args.systems for s in JAX_SYSTEMS):
        common.init_jax(ctx, device, log)

    env = common.environment(torch, device)
    settings = dict(
        dtype=common.DTYPES[args.dtype], warmup_ms=warmup_ms, rep_ms=rep_ms, rounds=common.ROUNDS,
        err_limit=ctx["err_limit"],
        gpu=env["gpu"].split(" (")[0], tokens=tokens, hidden=hidden, budget_s=deadline.seconds, device=device,
        bwd_factor=BWD_FACTOR,
    )
    log(f"{common.environment_line(env)}; {len(shapes)} shapes, {settings['dtype']}")

    rows = []
    start = time.perf_counter()
    stop = None  # why the remaining shapes are skipped, once they are
    for shape in shapes:
        if stop is None and deadline.expired:
            stop = deadline.why()
        if stop is not None:
            log(f"{shape.name}: {stop}")
            rows.append(Row(shape, results={s: {m: Result(reason=stop) for m in MODES} for s in args.systems}))
            continue
        log(f"{shape.name}  (forward {shape.flops / 1e12:.3f} TFLOP, backward {BWD_FACTOR * shape.flops / 1e12:.3f})")
        row = Row(shape)
        rows.append(row)
        try:
            bench_shape(row, settings["dtype"], args.systems, ctx, warmup_ms, rep_ms, log)
        except KeyboardInterrupt:  # e.g. run_all.sh's timeout: keep what was measured, skip the rest
            stop = common.INTERRUPTED
            row.fill(args.systems, stop)
            log("  interrupted; the remaining shapes are skipped")
        except Exception as err:  # noqa: BLE001 (e.g. out of memory making the inputs: the row shows "-")
            why = f"shape failed: {common.reason(err)}"
            log(f"  {why}")
            row.fill(args.systems, why)
        common.empty_cache(torch, device)
    log(f"done in {time.perf_counter() - start:.0f} s")

    table = markdown(rows, env, args, settings)
    raw = {
        "environment": env,
        "settings": settings,
        "rows": [
            {
                "B": r.shape.batch, "H": r.shape.heads, "N": r.shape.seqlen, "D": r.shape.head_dim,
                "causal": r.shape.causal, "fwd_flops": r.shape.flops, "reference": r.reference,
                "memory_bound_bytes": r.bound_bytes,
                **{
                    k: {
                        **{m: res.to_json() for m, res in v.items()},
                        "grad_err": r.grad_err.get(k),
                        "memory": vars(r.memory[k]) if k in r.memory else None,
                    }
                    for k, v in r.results.items()
                },
            }
            for r in rows
        ],
    }
    common.write_report(common.output_dir(args), "backward", table, raw,
                        plot=lambda path: plot(rows, args, settings, path, log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
