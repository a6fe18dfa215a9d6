#!/usr/bin/env python3
"""Attention variants' throughput: sliding window, document mask and GQA, flashx beside
FlexAttention and (where they apply) torch SDPA's FA2 and cuDNN backends.

Cases (bf16 by default, q/k/v/dO of shape (B, H, N, D); flashx: layout="bhnd"):
- window: causal sliding window of 1024 keys (query i sees keys i-1023 .. i), N = 16k, B = 1,
  H = 16, D = 128. flashx: causal=True, window=(1023, 0). Flex: mask_mod
  (q >= kv) & (q - kv < 1024), block mask built once. SDPA has no window: n/a.
- documents: 8 equal documents of N/8 tokens, causal inside each, same sizes. flashx:
  mask_mod=document_mask (a @triton.jit function) with causal=True and a block mask built
  once by flashx.torch.create_block_mask and reused; Flex: the same mask in torch, its
  create_block_mask built once. SDPA: n/a.
- causal: dense causal at the same sizes, for reference (all systems; Flex with
  create_block_mask(causal)).
- gqa: 32 q heads sharing 8 kv heads, B = 4, N = 4k, D = 128, causal. SDPA with enable_gqa=True,
  Flex with enable_gqa=True.
- dropout (only when asked: --cases dropout): dense causal at the window's sizes with dropout_p =
  0.1: flashx (torch: a fresh seed a call; JAX: one dropout_key), SDPA's FA2 and cuDNN with
  dropout_p; FlexAttention has no dropout: n/a. No error check (each system draws its own mask).
- alibi (only when asked: --cases alibi): dense causal at the window's sizes with learned ALiBi
  slopes (float32 (H,), requiring grad): the backward also gives the slopes' gradient. flashx:
  alibi_slopes=slopes; Flex: score_mod subtracting slopes[h] * |q - kv| (a captured tensor that
  requires grad) with the causal block mask; SDPA's FA2 and cuDNN take no ALiBi: n/a. Checked
  against SDPA with ALiBi and the causal mask as a float bias (its gradient reaching the slopes),
  dslopes included.
- frozen-kv (only when asked: --cases frozen-kv): dense causal at the window's sizes where k and
  v take no gradient (a frozen encoder's, a cache's): the backward is torch.autograd.grad(out,
  q, dO) (JAX: the vjp in q alone). flashx runs only its dQ pass; each peer runs what its
  backward does for it. FLOPs counted as a full backward's (2.5x the forward), so the cells
  compare times; dQ alone is checked.

FLOPs are counted on the VISIBLE score entries, exactly: window: sum over rows of
min(i + 1, 1024); documents: 8 * L * (L + 1) / 2 with L = N / 8; causal: N * (N + 1) / 2;
forward 4 * D * visible per (batch, q head), backward 2.5x that. (The visible count is checked
against the dense mask used for the reference.)

Timing: forward = one call (inputs require grad, as in training); backward =
torch.autograd.grad(out, (q, k, v), dO, retain_graph=True) on one saved forward; both with
triton.testing.do_bench (median). JAX (flashx's JAX frontend, opt-in with --quick): jitted
forward and the jitted vjp function of one saved forward, block_until_ready, median.

Checks: every system's output and gradients against SDPA with the explicit dense boolean mask
(memory-efficient backend; k and v repeated for GQA), as relative Frobenius errors.

A system that fails is shown as "-" with its reason under the table; a system that does not
support a case is "n/a". Writes DIR/variants.md (with the date, GPU, driver and versions) and
DIR/variants.json, DIR defaulting to benchmarks/results/h200; prints the markdown last.

    python benchmarks/bench_variants.py            # all cases, all systems
    python benchmarks/bench_variants.py --quick    # all cases, shorter timing, no JAX: ~1 minute on an H200
    python benchmarks/bench_variants.py --device cpu   # debug pass: interpreter, tiny shapes

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

try:  # python -m benchmarks.bench_variants
    from . import common
except ImportError:  # python benchmarks/bench_variants.py
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import common  # sets XLA_PYTHON_CLIENT_PREALLOCATE=false: torch and JAX share this process

Result = common.Result

BWD_FACTOR = 2.5
DROPOUT_P = 0.1  # the dropout case's
MODES = ("fwd", "bwd")
QUICK_BUDGET_S = 95.0  # alone; run_all.sh --quick passes its own --budget-s (caps there)

SYSTEMS = {
    "flashx_torch": "flashx (torch)",
    "flashx_jax": "flashx (jax)",
    "sdpa_flash": "SDPA FA2",
    "sdpa_cudnn": "SDPA cuDNN",
    "flex": "FlexAttention",
}
QUICK_SYSTEMS = ("flashx_torch", "sdpa_flash", "sdpa_cudnn", "flex")
RUN_ORDER = ("flex", "sdpa_flash", "sdpa_cudnn", "flashx_torch", "flashx_jax")
RATIOS = (("flex", "flashx/Flex"), ("sdpa_flash", "flashx/FA2"), ("sdpa_cudnn", "flashx/cuDNN"))
CHECKED = ("out", "dq", "dk", "dv", "dslopes")  # dslopes: the alibi case's only
NOT_APPLICABLE = "n/a"


@dataclass(frozen=True)
class Case:
    key: str  # "window", "documents", "causal", "gqa", "dropout", "alibi", "frozen-kv"
    batch: int
    heads_q: int
    heads_kv: int
    seqlen: int
    head_dim: int
    window: int = 0  # keys a query sees in the sliding window (the query's own included)
    docs: int = 0

    @property
    def doc_len(self) -> int:
        return self.seqlen // self.docs if self.docs else 0

    @property
    def visible(self) -> int:
        """Visible (query, key) pairs of one (batch, q head), counted exactly."""
        n = self.seqlen
        if self.key == "window":
            w = min(self.window, n)
            return w * (w + 1) // 2 + (n - w) * w  # rows 0..w-1 see i+1 keys, the rest w
        if self.key == "documents":
            length = self.doc_len
            return self.docs * length * (length + 1) // 2
        return n * (n + 1) // 2  # causal, gqa, dropout, alibi, frozen-kv

    @property
    def flops(self) -> float:
        """Forward FLOPs on the visible entries: 4 * D * visible per (batch, q head)."""
        return 4.0 * self.head_dim * self.visible * self.batch * self.heads_q

    @property
    def label(self) -> str:
        return {
            "window": f"causal window {self.window}",
            "documents": f"{self.docs} docs causal",
            "causal": "dense causal",
            "gqa": f"GQA {self.heads_q}/{self.heads_kv} causal",
            "dropout": f"dense causal, dropout {DROPOUT_P}",
            "alibi": "dense causal, learned ALiBi",
            "frozen-kv": "dense causal, k and v frozen",
        }[self.key]

    @property
    def name(self) -> str:
        return f"{self.label}: B={self.batch} H={self.heads_q}/{self.heads_kv} N={self.seqlen} D={self.head_dim}"

    def applies(self, system: str) -> bool:
        if self.key == "dropout":
            return system != "flex"
        if self.key == "alibi":
            return not system.startswith("sdpa")
        return not (system.startswith("sdpa") and self.key in ("window", "documents"))


@dataclass
class Row:
    case: Case
    results: dict = field(default_factory=dict)  # system -> {"fwd": Result, "bwd": Result}
    errors: dict = field(default_factory=dict)  # system -> {"out"/"dq"/"dk"/"dv": err}
    reference: Optional[str] = None
    mask_visible: Optional[int] = None  # visible pairs counted on the reference's dense mask

    def fill(self, systems, why: str) -> None:
        """Systems and modes not measured (yet) get `why` as their reason."""
        for system in systems:
            done = self.results.setdefault(system, {})
            for mode in MODES:
                done.setdefault(mode, Result(reason=why))


def cases_for(args) -> list:
    cpu = args.device == "cpu"
    n = args.n or (64 if cpu else 16384)
    heads, d = (2, 16) if cpu else (2048 // (args.d or 128), args.d or 128)
    window = args.window or (16 if cpu else 1024)
    docs = args.docs
    if n % docs:
        raise SystemExit(f"--docs {docs} does not divide N={n}")
    gqa_b, gqa_hq, gqa_hkv, gqa_n = (1, 4, 2, 32) if cpu else (4, 32, 8, args.gqa_n or 4096)
    all_cases = {
        "window": Case("window", 1, heads, heads, n, d, window=window),
        "documents": Case("documents", 1, heads, heads, n, d, docs=docs),
        "causal": Case("causal", 1, heads, heads, n, d),
        "gqa": Case("gqa", gqa_b, gqa_hq, gqa_hkv, gqa_n, d),
        "dropout": Case("dropout", 1, heads, heads, n, d),
        "alibi": Case("alibi", 1, heads, heads, n, d),
        "frozen-kv": Case("frozen-kv", 1, heads, heads, n, d),
    }
    return [all_cases[k] for k in args.cases]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Variant attention TFLOP/s (forward and backward, on visible score entries): causal sliding "
        "window, causal document mask, dense causal and GQA; flashx vs FlexAttention and torch SDPA.",
        epilog="Cases: window (1024 keys, N=16k, B=1, H=16, D=128), documents (8 docs, same sizes), causal (same "
        "sizes), gqa (32/8 heads, B=4, N=4k, D=128, causal). --quick: shorter timing and no JAX (all cases).",
    )
    common.add_common_args(p, "variants", "shorter timing, flashx's JAX frontend left out (~1 minute on an H200)",
                           QUICK_BUDGET_S)
    p.add_argument("--cases", nargs="+",
                   choices=("window", "documents", "causal", "gqa", "dropout", "alibi", "frozen-kv"),
                   default=["window", "documents", "causal", "gqa"],
                   help="cases to run, in order (default: all but dropout, alibi and frozen-kv)")
    p.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=None,
                   help="systems to run (default: all; --quick: all but flashx_jax)")
    p.add_argument("--n", type=int, default=None, help="N of the window, documents and causal cases (default 16384)")
    p.add_argument("--gqa-n", type=int, default=None, help="N of the GQA case (default 4096)")
    p.add_argument("--window", type=int, default=None, help="keys in the sliding window (default 1024)")
    p.add_argument("--d", type=int, default=None,
                   help="head dim of the window, documents and causal cases, with H = 2048 // D (default 128)")
    p.add_argument("--docs", type=int, default=8, help="documents in the document mask (default: %(default)s)")
    args = p.parse_args(argv)
    if args.systems is None:
        args.systems = list(QUICK_SYSTEMS if args.quick else SYSTEMS)
    return args


# ----------------------------------------------------------------------------------------------
# Masks

# Module globals that document_mask reads, set on first use (triton must be imported after flashx):
# Triton wants triton.language among a jitted function's globals, and the document length as a
# global tl.constexpr.
tl = None
_DOC_LEN = None


@functools.lru_cache(maxsize=None)
def document_mask_for(doc_len: int):
    """flashx's mask_mod for equal documents of doc_len tokens: a @triton.jit function.

    Made on first use (triton must be imported after flashx); the length is a global constexpr,
    which Triton allows in a jitted function, fixed for the process (one length per run).
    """
    global tl, _DOC_LEN
    if _DOC_LEN is not None and _DOC_LEN.value != doc_len:
        raise ValueError(f"document_mask was made for documents of {_DOC_LEN.value} tokens, not {doc_len}")
    import triton
    import triton.language

    tl = triton.language
    _DOC_LEN = tl.constexpr(doc_len)

    @triton.jit
    def document_mask(b, h, q_idx, kv_idx):
        return (q_idx // _DOC_LEN) == (kv_idx // _DOC_LEN)

    return document_mask


def flex_mask_mod(case: Case):
    """FlexAttention's mask_mod (torch) for a case, or None for dense causal."""
    if case.key == "window":
        window = case.window

        def window_mask(b, h, q_idx, kv_idx):
            return (q_idx >= kv_idx) & (q_idx - kv_idx < window)

        return window_mask
    if case.key == "documents":
        doc_len = case.doc_len

        def document_causal_mask(b, h, q_idx, kv_idx):
            return (q_idx // doc_len == kv_idx // doc_len) & (q_idx >= kv_idx)

        return document_causal_mask

    def causal_mask(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    return causal_mask


def dense_mask(torch, case: Case, device):
    """(N, N) bool: which pairs are visible (no N x N integer temporaries)."""
    i = torch.arange(case.seqlen, device=device)[:, None]
    j = torch.arange(case.seqlen, device=device)[None, :]
    visible = j <= i
    if case.key == "window":
        visible &= j > i - case.window
    elif case.key == "documents":
        visible &= (i // case.doc_len) == (j // case.doc_len)
    return visible


# ----------------------------------------------------------------------------------------------
# One case


def bench_case(row: Row, dtype_name: str, systems: list, ctx: dict, warmup_ms: float, rep_ms: float, log) -> None:
    """Measure every system on row.case, filling row in place (so an interrupted case keeps what it measured)."""
    case = row.case
    torch = ctx["torch"]
    device = ctx["device"]
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import flashx.torch

    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device=device).manual_seed(0)
    q_size = (case.batch, case.heads_q, case.seqlen, case.head_dim)
    kv_size = (case.batch, case.heads_kv, case.seqlen, case.head_dim)
    q = torch.randn(q_size, device=device, dtype=dtype, generator=gen)
    k, v = (torch.randn(kv_size, device=device, dtype=dtype, generator=gen) for _ in range(2))
    dout = torch.randn(q_size, device=device, dtype=dtype, generator=gen)
    # frozen-kv: k and v take no gradient (the backward differentiates q alone).
    inputs = tuple(t.requires_grad_() for t in ((q,) if case.key == "frozen-kv" else (q, k, v)))
    slopes = None
    if case.key == "alibi":  # learned slopes: differentiated with q, k and v
        slopes = (torch.rand(case.heads_q, device=device, generator=gen) * 0.05 + 0.01).requires_grad_()
        inputs += (slopes,)
    gqa = case.heads_q != case.heads_kv
    flops = {"fwd": case.flops, "bwd": BWD_FACTOR * case.flops}
    values = {}  # system -> (out, dq, dk, dv)

    def show(system):
        for mode in MODES:
            res = row.results[system][mode]
            if res.reason:
                log(f"  {SYSTEMS[system]:<15} {mode}  -  ({res.reason})")
            else:
                log(f"  {SYSTEMS[system]:<15} {mode}  {res.tflops:7.1f} TFLOP/s  {res.ms:8.3f} ms")

    def timed(mode, run):
        value, why = common.guarded(run, ctx)
        return common.measured(value, flops[mode]) if why is None else Result(reason=why)

    def torch_system(system, make_fwd):
        def warm():
            fwd = make_fwd()
            out = fwd()
            return fwd, (out.detach(),) + torch.autograd.grad(out, inputs, dout)

        value, why = common.guarded(warm, ctx)
        if why is not None:
            row.results[system] = {mode: Result(reason=why) for mode in MODES}
            return
        fwd, values[system] = value

        def bwd_only():
            out = fwd()
            return common.time_torch(lambda: torch.autograd.grad(out, inputs, dout, retain_graph=True), warmup_ms, rep_ms, device)

        row.results[system] = {
            "fwd": timed("fwd", lambda: common.time_torch(fwd, warmup_ms, rep_ms, device)),
            "bwd": timed("bwd", bwd_only),
        }

    # flashx's options for this case (both frontends).
    options = dict(causal=True, layout="bhnd")
    if case.key == "window":
        options["window"] = (case.window - 1, 0)
    elif case.key == "documents":
        options["mask_mod"] = document_mask_for(case.doc_len)
    elif case.key == "dropout":
        options["dropout_p"] = DROPOUT_P
    elif case.key == "alibi":
        options["alibi_slopes"] = slopes
    sdpa_options = dict(dropout_p=DROPOUT_P) if case.key == "dropout" else {}

    def flashx_fwd():
        block_mask = None
        if case.key == "documents":  # built once, reused by every call
            block_mask = flashx.torch.create_block_mask(
                options["mask_mod"], None, None, case.seqlen, case.seqlen, causal=True, device=device
            )
        return lambda: flashx.torch.attention(q, k, v, block_mask=block_mask, **options)

    def flex_fwd():
        if "flex" not in ctx:
            ctx["flex"] = common.flex_setup(torch)  # once: a failure here is this system's reason
        flex, create_block_mask = ctx["flex"]
        block_mask = create_block_mask(flex_mask_mod(case), None, None, case.seqlen, case.seqlen, device=device)
        def alibi(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx - kv_idx).abs()

        score_mod = alibi if case.key == "alibi" else None
        return lambda: flex(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=gqa)

    def sdpa(backend):
        return lambda: common.sdpa_call(backend, q, k, v, is_causal=True, enable_gqa=gqa, **sdpa_options)

    def flashx_jax():
        jax = common.require_jax(ctx)
        import flashx.jax

        if device == "cuda":
            torch.cuda.synchronize()
        jq, jk, jv, jdo = (common.jax_from_torch(jax, t) for t in (q, k, v, dout))
        jslopes = None if slopes is None else common.jax_from_torch(jax, slopes.detach())
        block_mask = None
        if case.key == "documents":  # built once (a pytree: passed into jit as an argument)
            block_mask = flashx.jax.create_block_mask(options["mask_mod"], None, None, case.seqlen, case.seqlen, causal=True)

        jax_options = dict(options, dropout_key=jax.random.key(0)) if case.key == "dropout" else dict(options)
        jax_options.pop("alibi_slopes", None)  # an argument: the alibi case differentiates it

        def attn(q_, k_, v_, bm, s=None):
            return flashx.jax.attention(q_, k_, v_, block_mask=bm, alibi_slopes=s, **jax_options)

        fwd = jax.jit(attn)
        results = {"fwd": timed("fwd", lambda: common.time_jax(fwd, (jq, jk, jv, block_mask, jslopes), warmup_ms, rep_ms))}
        saved = {}
        # The differentiated arguments, and the others (jit arguments, not constants): frozen-kv
        # takes the vjp in q alone.
        primals, fixed = ((jq, jk, jv) + (() if jslopes is None else (jslopes,)), ())
        if case.key == "frozen-kv":
            primals, fixed = (jq,), (jk, jv)

        def bwd_only():
            out, vjp_fn = jax.jit(lambda p, c, bm: jax.vjp(lambda *x: attn(*(x + c)[:3], bm, *(x + c)[3:]), *p))(
                primals, fixed, block_mask)
            apply = jax.jit(lambda f, ct: f(ct))
            ms = common.time_jax(apply, (vjp_fn, jdo), warmup_ms, rep_ms)
            saved["values"] = (out,) + tuple(apply(vjp_fn, jdo))
            return ms

        results["bwd"] = timed("bwd", bwd_only)
        row.results["flashx_jax"] = results
        if "values" in saved:
            values["flashx_jax"] = tuple(common.torch_from_jax(torch, x, device) for x in jax.block_until_ready(saved["values"]))

    runners = {
        "flex": lambda: torch_system("flex", flex_fwd),
        "sdpa_flash": lambda: torch_system("sdpa_flash", sdpa(SDPBackend.FLASH_ATTENTION)),
        "sdpa_cudnn": lambda: torch_system("sdpa_cudnn", sdpa(SDPBackend.CUDNN_ATTENTION)),
        "flashx_torch": lambda: torch_system("flashx_torch", flashx_fwd),
        "flashx_jax": flashx_jax,
    }
    for system in sorted(systems, key=RUN_ORDER.index):
        if not case.applies(system):
            row.results[system] = {mode: Result(reason=NOT_APPLICABLE) for mode in MODES}
            continue
        _, why = common.guarded(runners[system], ctx)  # set-up failures outside the timed parts
        if why is not None:
            row.results[system] = {mode: Result(reason=why) for mode in MODES}
            values.pop(system, None)
        show(system)

    # The reference: SDPA with the explicit dense mask (k and v repeated for GQA).
    def reference():
        mask = dense_mask(torch, case, device)
        row.mask_visible = int(mask.sum())
        group = case.heads_q // case.heads_kv
        kk, vv = (t.repeat_interleave(group, dim=1) if gqa else t for t in (k, v))
        small = case.batch * case.heads_q * case.seqlen ** 2 <= 2**26
        backends = [SDPBackend.EFFICIENT_ATTENTION] + ([SDPBackend.MATH] if small else [])
        if slopes is not None:
            return alibi_reference(mask, backends)
        with sdpa_kernel(backends):
            out = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
        return (out.detach(),) + torch.autograd.grad(out, inputs, dout)

    def alibi_reference(mask, backends):
        """ALiBi and the mask as a float bias, one head at a time (a (H, N, N) bias would not fit
        at N = 16k): (out, dq, dk, dv, dslopes)."""
        positions = torch.arange(case.seqlen, device=device, dtype=torch.float32)
        distance = (positions[:, None] - positions[None, :]).abs()
        out = torch.empty_like(q)
        grads = [torch.zeros_like(t) for t in inputs]
        for h in range(case.heads_q):
            bias = (-(slopes[h] * distance)).masked_fill(~mask, float("-inf")).to(dtype)
            with sdpa_kernel(backends):
                out_h = F.scaled_dot_product_attention(q[:, h:h + 1], k[:, h:h + 1], v[:, h:h + 1], attn_mask=bias)
            out[:, h:h + 1] = out_h.detach()
            for total, part in zip(grads, torch.autograd.grad(out_h, inputs, dout[:, h:h + 1])):
                total += part
            del bias, out_h
        return (out,) + tuple(grads)

    if case.key == "dropout":
        log("  no error check: each system draws its own dropout mask")
        return
    ref, why = common.guarded(reference, ctx)
    if why is not None:
        log(f"  no reference for the error check: {why}")
        return
    row.reference = "SDPA efficient, dense mask"
    if row.mask_visible != case.visible:
        log(f"  !! visible pairs: formula {case.visible}, dense mask {row.mask_visible}: the FLOP count is off")
    for system, got in values.items():
        errs = {name: common.rel_err(a, b) for name, a, b in zip(CHECKED, got, ref)}
        row.errors[system] = errs
        worst = max(errs.values())
        flag = "  <-- WRONG?" if system.startswith("flashx") and not (worst < ctx["err_limit"]) else ""
        log(f"  {SYSTEMS[system]:<15} rel err: " + ", ".join(f"{n} {e:.1e}" for n, e in errs.items()) + flag)


# ----------------------------------------------------------------------------------------------
# Reports


def _cell(res: dict) -> str:
    if res is None:
        return "-"
    if res["fwd"].reason == NOT_APPLICABLE:
        return NOT_APPLICABLE
    return " / ".join(common.fmt(res[m].tflops, ".1f") for m in MODES)


def markdown(rows: list, env: dict, args: argparse.Namespace, settings: dict) -> str:
    systems = [s for s in SYSTEMS if s in args.systems]
    lines = common.header_lines("flashx attention variants", env) + [
        f"- {settings['dtype']}; q/k/v/dO (B, H, N, D) for every system (flashx: layout=\"bhnd\", same buffers)",
        "- cells: forward / backward TFLOP/s, counted on the VISIBLE score entries: forward 4*D*visible per (batch, q head),"
        " backward 2.5x that; visible counted exactly (window: sum over rows of min(i+1, W); documents: docs*L*(L+1)/2;"
        " causal: N*(N+1)/2)",
        "- forward: one call (inputs require grad); backward: torch.autograd.grad(out, (q, k, v), dO, retain_graph=True)"
        " on one saved forward (JAX: the jitted vjp function)",
        f"- timing: triton.testing.do_bench median (warmup {settings['warmup_ms']:g} ms, rep {settings['rep_ms']:g} ms);"
        f" {common.JAX_TIMING_NOTE}; {common.SETTLE_NOTE};"
        f" {common.rounds_note(settings['rounds'])}",
        "- flashx: window=(W-1, 0) with causal=True; documents: mask_mod=document_mask with causal=True and a block mask"
        " built once by flashx.torch.create_block_mask; FlexAttention: torch.compile(flex_attention, dynamic=False), the"
        " same masks as mask_mod, create_block_mask built once; SDPA: is_causal (enable_gqa for GQA); n/a: no such mask"
        " in SDPA",
        "- ratios: flashx (torch) over the peer, forward / backward; err: largest relative Frobenius error of flashx"
        " (torch)'s output, dQ, dK, dV against SDPA with the dense boolean mask (memory-efficient backend); learned"
        " ALiBi: the slopes' gradient too (backward time includes it), against SDPA with a float bias",
        "",
    ]
    ratios = [(peer, label) for peer, label in RATIOS if peer in systems and "flashx_torch" in systems]
    errs = [s for s in ("flashx_torch", "flashx_jax", "flex") if s in systems]
    head = ["case", "B", "Hq/Hkv", "N", "D", "visible"] + [SYSTEMS[s] for s in systems]
    head += [label for _, label in ratios] + [f"err {SYSTEMS[s]}" for s in errs]
    body = []
    failures = common.Failures(n_modes=len(MODES))
    for row in rows:
        c, r = row.case, row.results
        dense = c.seqlen * c.seqlen
        cells = [c.label, str(c.batch), f"{c.heads_q}/{c.heads_kv}", str(c.seqlen), str(c.head_dim), f"{c.visible / dense:.1%}"]
        cells += [_cell(r.get(s)) for s in systems]
        mine = r.get("flashx_torch")
        for peer, _ in ratios:
            theirs = r.get(peer)
            if theirs is not None and theirs["fwd"].reason == NOT_APPLICABLE:
                cells.append(NOT_APPLICABLE)
            elif mine is None or theirs is None:
                cells.append("-")
            else:
                cells.append(" / ".join(common.ratio(mine[m], theirs[m]) for m in MODES))
        cells += [common.fmt(max(row.errors[s].values()), ".1e") if s in row.errors else "-" for s in errs]
        body.append(cells)
        for k, res in r.items():
            for m in MODES:
                if res[m].reason and res[m].reason != NOT_APPLICABLE:
                    failures.add(c.name, SYSTEMS[k], res[m].reason, m)
        for k, e in row.errors.items():
            if k.startswith("flashx") and not max(e.values()) < settings["err_limit"]:
                failures.add(c.name, SYSTEMS[k], f"error {max(e.values()):.2e} above {settings['err_limit']:g}: check correctness")
        if row.mask_visible is not None and row.mask_visible != c.visible:
            failures.add(c.name, "FLOP count", f"formula {c.visible} visible pairs, dense mask {row.mask_visible}")
    lines += common.md_table(head, body)
    lines += failures.lines()
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    args = parse_args(argv)
    device = args.device
    warmup_ms, rep_ms = common.timing_defaults(args)
    cases = cases_for(args)
    deadline = common.Deadline(args.budget_s if args.budget_s is not None else (QUICK_BUDGET_S if args.quick else None))

    log = common.log

    torch = common.start("bench_variants.py", device, log)
    if torch is None:
        return 2
    ctx = {"torch": torch, "device": device, "verbose_errors": common.verbose_errors(),
           "err_limit": common.GRAD_ERR_LIMITS[args.dtype]}
    if "flashx_jax" in args.systems:
        common.init_jax(ctx, device, log)

    env = common.environment(torch, device)
    settings = dict(
        dtype=common.DTYPES[args.dtype], warmup_ms=warmup_ms, rep_ms=rep_ms, rounds=common.ROUNDS,
        err_limit=ctx["err_limit"],
        gpu=env["gpu"].split(" (")[0], budget_s=deadline.seconds, device=device, bwd_factor=BWD_FACTOR,
    )
    log(f"{common.environment_line(env)}; {len(cases)} cases, {settings['dtype']}")

    rows = []
    start = time.perf_counter()
    stop = None
    for case in cases:
        if stop is None and deadline.expired:
            stop = deadline.why()
        if stop is not None:
            log(f"{case.name}: {stop}")
            rows.append(Row(case, results={s: {m: Result(reason=stop) for m in MODES} for s in args.systems}))
            continue
        log(f"{case.name}  (visible {case.visible / case.seqlen ** 2:.1%}, forward {case.flops / 1e12:.3f} TFLOP)")
        row = Row(case)
        rows.append(row)
        try:
            bench_case(row, settings["dtype"], args.systems, ctx, warmup_ms, rep_ms, log)
        except KeyboardInterrupt:  # e.g. run_all.sh's timeout: keep what was measured, skip the rest
            stop = common.INTERRUPTED
            row.fill(args.systems, stop)
            log("  interrupted; the remaining cases are skipped")
        except Exception as err:  # noqa: BLE001
            why = f"case failed: {common.reason(err)}"
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
                "case": r.case.label, "key": r.case.key, "B": r.case.batch, "H": r.case.heads_q, "Hk": r.case.heads_kv,
                "N": r.case.seqlen, "D": r.case.head_dim, "window": r.case.window or None, "docs": r.case.docs or None,
                "visible": r.case.visible, "mask_visible": r.mask_visible, "fwd_flops": r.case.flops,
                "reference": r.reference,
                **{k: {**{m: res.to_json() for m, res in v.items()}, "err": r.errors.get(k)} for k, v in r.results.items()},
            }
            for r in rows
        ],
    }
    common.write_report(common.output_dir(args), "variants", table, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
