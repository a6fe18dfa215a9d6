#!/usr/bin/env python3
"""A/B: the same flashx shapes timed from several source trees, in one GPU run.

Each tree runs in its own process (fresh imports, its own Triton cache keys), one after the
other, on the same shapes; the table puts them side by side with the ratio to the first. For
a kernel or host-path change: predict, then measure it against the tree it replaces.

    git worktree add /tmp/base HEAD~1   # or copy an old src/ anywhere
    python benchmarks/ab.py base=/tmp/base/src new=src [--cases fwd bwd variants host short]

Cases (bf16, torch frontend, layout "bhnd", B*N = 16k and H*D = 2048 unless said):
- fwd: forward at N = 4k, D = 64 and 128, causal and not; dense causal N = 16k, D = 128.
- bwd: backward (autograd.grad of one saved forward) at N = 4k, D = 64 and 128, causal and not.
- variants: causal window 1024 and 8 causal documents (a block mask built once), N = 16k,
  D = 128, forward and backward; FLOPs counted on visible entries as in bench_variants.py;
  and a causal block mask whose mask_mod keeps every pair (a block map's long programs, to
  set beside dense causal).
- variants-d: the window and documents forward at D = 64 (H = 32) and D = 256 (H = 8).
- gqa: 32 q heads sharing 8 kv heads, B = 4, N = 4k, D = 128, causal, forward and backward.
- short: B = 64, N = 256 and 512, H * D = 2048, D = 128 and 64, causal forward.
- d64c: D = 64 causal forward (H = 32, B*N = 16k) at N = 1k, 2k, 4k and 8k.
- d256: D = 256 (H = 8, B*N = 16k), forward at N = 1k, 4k, 16k and backward at 4k, causal and not.
- n1k: B*N = 16k, forward at N = 1024 (D = 64 and 128, causal and not) and N = 512 (D = 128, non-causal).
- dropout: dense causal N = 16k, D = 64 (H = 32) and 128 (H = 16), forward and backward, with
  dropout_p = 0.1 and 0 (the tl kernels' draw against the same call without it; run a tree with
  --env LABEL:FLASHX_GLUON=0 for the dropout-free tl kernels).
- bwd1k: backward at N = 1k, D = 128 (B = 16, H = 16), causal and not.
- paged: forward through a block table (pages of 256, shuffled; Hq 32 / Hkv 8, D = 128, bf16,
  "bnhd"): a prefill chunk of 512 causal queries (bottom-right) against 4k and 16k keys, B = 4, and
  a decode step (one query) at B = 8; FLOPs on the visible entries.
- mid: forward, B = 1, D = 128, causal and not, at (H, N) whose tiles fill under 80% of the SMs
  (tuning.kv_splits: the split tl forward, not Gluon; H200 splits 2-4): (1, 2k), (1, 8k),
  (2, 1k), (2, 4k), (4, 1k), (4, 2k). Set beside a tree whose tuning.KV_SPLIT_MAX is 1 (every call unsplit).
- mid2: mid's question at D = 64 and 256 ((1, 4k), (2, 2k)), and for chunks of 128 and 512
  queries (bottom-right) against 8k keys (B = 1, H 4 and 8, D = 128), causal and not.
- host: host time per call (wall clock, tiny shape, the GPU never the limit): forward without
  and with inputs that require grad, and forward + backward.
Timing: triton.testing.do_bench medians (L2 flushed between timings), so a host-bound call shows
its host time; --calls N times N calls back to back and reports per call, so that a call
shorter than the host's launch path (the short cases, ~0.1 ms) shows the GPU's time. Where even
that leaves the host the limit (calls of a few microseconds: s71's mid cases read 11-75% apart
between rounds), --cuda-graphs times the forward cases replayed from one CUDA graph of N calls
(common.time_torch_graph; the same inputs each call, so L2 holds what fits): device time only.
Backward cases keep do_bench.
TFLOP/s: 4*B*H*visible*D forward, 2.5x that backward.

Order matters: identical kernels have differed by up to 4.5% between two trees of one run, the
first slower (NOTES v0.5). --rounds 2 runs the trees in order, then in reverse (A B B A), and
reports each tree's mean over its rounds, with the largest spread of one tree over its rounds
beside each case: a difference smaller than that spread is not a result. Nor is one smaller than
what two trees of identical kernels read apart: 0.968 at a short shape whose kernel two trees
shared, with a spread of 0.2% (NOTES v0.49). --control times a copy of the first tree as one
more tree ("control"), so that each case's control/first ratio shows that in the same run.
--env LABEL:VAR=VALUE sets an environment variable in one tree's processes, so that two labels
on one tree compare a setting, e.g. Triton assembling with jaxlib's ptxas (CUDA 13.0's):

    python benchmarks/ab.py host=src ptxas13=src --env ptxas13:TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas --control

--only TEXT ... keeps the groups' cases whose name holds one of the strings (a change that
reaches one kernel, timed without the rest): --cases dropout --only "bwd dense B1 N16384 H16 D128".
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

CASE_GROUPS = ("fwd", "bwd", "variants", "variants-d", "gqa", "short", "n1k", "d64c", "d256", "dropout", "bwd1k", "paged", "mid", "mid2", "host")


def _dense_cases(groups):
    cases = []
    if "fwd" in groups:
        for d in (64, 128):
            for causal in (False, True):
                cases.append(dict(kind="fwd", b=4, n=4096, h=2048 // d, d=d, causal=causal))
        cases.append(dict(kind="fwd", b=1, n=16384, h=16, d=128, causal=True))
    if "bwd" in groups:
        for d in (64, 128):
            for causal in (False, True):
                cases.append(dict(kind="bwd", b=4, n=4096, h=2048 // d, d=d, causal=causal))
    if "variants" in groups:
        for mask in ("window", "documents"):
            for kind in ("fwd", "bwd"):
                cases.append(dict(kind=kind, b=1, n=16384, h=16, d=128, causal=True, mask=mask))
        for kind in ("fwd", "bwd"):
            cases.append(dict(kind=kind, b=1, n=16384, h=16, d=128, causal=True, mask="causal-map"))
    if "variants-d" in groups:
        for d in (64, 256):
            for mask in ("window", "documents"):
                cases.append(dict(kind="fwd", b=1, n=16384, h=2048 // d, d=d, causal=True, mask=mask))
    if "gqa" in groups:
        for kind in ("fwd", "bwd"):
            cases.append(dict(kind=kind, b=4, n=4096, h=32, hkv=8, d=128, causal=True))
    if "d64c" in groups:
        for n in (1024, 2048, 4096, 8192):
            cases.append(dict(kind="fwd", b=16384 // n, n=n, h=32, d=64, causal=True))
    if "d256" in groups:
        for n in (1024, 4096, 16384):
            for causal in (False, True):
                cases.append(dict(kind="fwd", b=16384 // n, n=n, h=8, d=256, causal=causal))
        for causal in (False, True):
            cases.append(dict(kind="bwd", b=4, n=4096, h=8, d=256, causal=causal))
    if "short" in groups:
        for d in (128, 64):
            for n in (256, 512):
                cases.append(dict(kind="fwd", b=64, n=n, h=2048 // d, d=d, causal=True))
    if "dropout" in groups:
        for d in (64, 128):
            for kind in ("fwd", "bwd"):
                for p in (0.1, 0.0):
                    cases.append(dict(kind=kind, b=1, n=16384, h=2048 // d, d=d, causal=True, dropout_p=p))
    if "n1k" in groups:
        for d in (64, 128):
            for causal in (False, True):
                cases.append(dict(kind="fwd", b=16, n=1024, h=2048 // d, d=d, causal=causal))
        cases.append(dict(kind="fwd", b=32, n=512, h=16, d=128, causal=False))
    if "bwd1k" in groups:
        for causal in (False, True):
            cases.append(dict(kind="bwd", b=16, n=1024, h=16, d=128, causal=causal))
    if "paged" in groups:
        for n in (4096, 16384):
            for rows, b in ((512, 4), (1, 8)):
                cases.append(dict(kind="fwd", b=b, n=n, rows=rows, h=32, hkv=8, d=128, causal=rows > 1, paged=256))
    if "mid" in groups:
        for h, n in ((1, 2048), (1, 8192), (2, 1024), (2, 4096), (4, 1024), (4, 2048)):
            for causal in (False, True):
                cases.append(dict(kind="fwd", b=1, n=n, h=h, d=128, causal=causal))
    if "mid2" in groups:
        for causal in (False, True):
            for d in (64, 256):
                for h, n in ((1, 4096), (2, 2048)):
                    cases.append(dict(kind="fwd", b=1, n=n, h=h, d=d, causal=causal))
            for rows, h in ((128, 8), (512, 4)):
                cases.append(dict(kind="fwd", b=1, n=8192, rows=rows, h=h, d=128, causal=causal))
    return cases


def _visible(case) -> int:
    n = case["n"]
    if case.get("rows") is not None:  # rows queries at the end of n keys, causal bottom-right
        rows = case["rows"]
        return rows * n - (rows * (rows - 1) // 2 if case["causal"] else 0)
    mask = case.get("mask")
    if mask == "window":
        return sum(min(i + 1, 1024) for i in range(n))
    if mask == "documents":
        length = n // 8
        return 8 * length * (length + 1) // 2
    return n * (n + 1) // 2 if case["causal"] else n * n


_DOC_LEN = None


def _document_mask(doc_len):
    import triton
    import triton.language as tl

    global _DOC_LEN
    _DOC_LEN = tl.constexpr(doc_len)

    @triton.jit
    def document_mask(b, h, q_idx, kv_idx):
        return (q_idx // _DOC_LEN) == (kv_idx // _DOC_LEN)

    return document_mask


def _every_pair_mask():
    import triton

    @triton.jit
    def every_pair(b, h, q_idx, kv_idx):
        return q_idx >= 0

    return every_pair


def _case_name(case) -> str:
    h, hkv = case["h"], case.get("hkv", case["h"])
    heads = f"H{h}/{hkv}" if hkv != h else f"H{h}"
    if case.get("paged"):
        name = f'fwd paged {case["paged"]} B{case["b"]} Nq{case["rows"]} Nkv{case["n"]} {heads} D{case["d"]}'
    else:
        rows = f'Nq{case["rows"]} Nkv{case["n"]}' if case.get("rows") is not None else f'N{case["n"]}'
        name = f'{case["kind"]} {case.get("mask", "dense")} B{case["b"]} {rows} {heads} D{case["d"]}'
    name += " causal" if case["causal"] else ""
    if case.get("dropout_p") is not None:
        name += f' dropout {case["dropout_p"]}'
    return name


def _dense_call(torch, ft, case):
    """The case's call on random (B, H, N, D) inputs ("bhnd") that require grad, q of `rows` rows
    where the case has them: the forward, or (kind "bwd") the backward of one saved forward
    (autograd.grad, graph retained)."""
    b, n, h, d = case["b"], case["n"], case["h"], case["d"]
    hkv = case.get("hkv", h)
    q = torch.randn(b, h, case.get("rows", n), d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    kwargs = dict(causal=case["causal"], layout="bhnd")
    if case.get("mask") == "window":
        kwargs["window"] = (1023, 0)
    elif case.get("mask") == "documents":
        kwargs["block_mask"] = ft.create_block_mask(_document_mask(n // 8), None, None, n, n, causal=True)
    elif case.get("mask") == "causal-map":
        kwargs["block_mask"] = ft.create_block_mask(_every_pair_mask(), None, None, n, n, causal=True)
    if case.get("dropout_p") is not None:
        kwargs["dropout_p"] = case["dropout_p"]
    if case["kind"] == "fwd":
        return lambda: ft.attention(q, k, v, **kwargs)
    out = ft.attention(q, k, v, **kwargs)
    grad = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)


def _paged_call(torch, ft, case):
    """A forward through a block table: q (B, rows, Hq, D), the cache (pages, 256, Hkv, D) with
    each sequence's pages shuffled over it, every sequence n keys long."""
    b, n, rows, h, hkv, d, page = case["b"], case["n"], case["rows"], case["h"], case["hkv"], case["d"], case["paged"]
    q = torch.randn(b, rows, h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b * n // page, page, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    table = torch.randperm(b * n // page, device="cuda").view(b, n // page).to(torch.int32)
    used = torch.full((b,), n, device="cuda", dtype=torch.int32)
    return lambda: ft.attention(q, k, v, causal=case["causal"], block_table=table, seqused_k=used)


def worker(groups, calls: int = 1, only=None, graphs: bool = False) -> dict:
    """Runs in the tree's process: every case of `groups` (with `only`, those whose name holds
    one of its strings), results by case name; each timing runs `calls` calls back to back
    (per-call figures; with graphs, forward cases replayed from one CUDA graph of them)."""
    import common  # benchmarks/, this script's folder
    import flashx.torch as ft
    import torch
    from triton.testing import do_bench

    torch.manual_seed(0)
    results = {}
    for case in _dense_cases(groups):
        name = _case_name(case)
        if only and not any(text in name for text in only):
            continue
        flops = 4.0 * case["b"] * case["h"] * _visible(case) * case["d"] * (2.5 if case["kind"] == "bwd" else 1.0)
        call = (_paged_call if case.get("paged") else _dense_call)(torch, ft, case)
        call()  # compiled before the card is loaded
        common.settle(load=call)
        if graphs and case["kind"] == "fwd":
            ms = common.time_torch_graph([call] * calls, warmup_ms=25, rep_ms=100)
        else:
            ms = do_bench(lambda: [call() for _ in range(calls)], warmup=25, rep=100, return_mode="median") / calls
        results[name] = dict(ms=ms, tflops=flops / ms * 1e-9)
        call = None  # frees its inputs before the next case draws its own
    if "host" in groups:
        q, k, v = (torch.randn(1, 1, 128, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))

        def per_call_us(fn, calls=2000):
            for _ in range(50):
                fn()
            torch.cuda.synchronize()
            begin = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            return (time.perf_counter() - begin) / calls * 1e6

        results["host fwd no-grad (us)"] = dict(us=per_call_us(lambda: ft.attention(q, k, v, causal=True, layout="bhnd")))
        qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
        results["host fwd requires-grad (us)"] = dict(us=per_call_us(lambda: ft.attention(qg, kg, vg, causal=True, layout="bhnd")))
        grad = torch.randn_like(q)
        results["host fwd+bwd (us)"] = dict(us=per_call_us(lambda: torch.autograd.grad(
            ft.attention(qg, kg, vg, causal=True, layout="bhnd"), (qg, kg, vg), grad)))
        results["host sdpa fwd no-grad (us)"] = dict(us=per_call_us(
            lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)))
    return results


def _run_tree(path: str, cases: list, label: str, calls: int = 1, env_vars: dict | None = None,
              only=None, graphs: bool = False) -> dict:
    """One worker process on the tree at `path`, with `env_vars` added to its environment: its
    results by case name ({} if it failed)."""
    # The tree's flashx first, and no other flashx on the path (the caller's tree, say).
    others = [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep)
              if x and not os.path.isdir(os.path.join(x, "flashx"))]
    env = dict(os.environ, **(env_vars or {}), PYTHONPATH=os.pathsep.join([os.path.abspath(path)] + others))
    proc = subprocess.run([sys.executable, __file__, "--worker", "--calls", str(calls), "--cases", *cases,
                           *(["--cuda-graphs"] if graphs else []),
                           *(["--only", *only] if only else [])],
                          env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULTS ")]
    if proc.returncode or not lines:
        print(f"{label}: failed (rc {proc.returncode})\n{proc.stderr[-3000:]}", file=sys.stderr)
        return {}
    return json.loads(lines[-1][len("RESULTS "):])


def _value(result: dict):
    return result.get("tflops", result.get("us"))


def _mean_over_rounds(rounds: list) -> dict:
    """Each case's result averaged over the rounds that measured it."""
    merged = {}
    for name in dict.fromkeys(n for r in rounds for n in r):
        values = [_value(r[name]) for r in rounds if name in r]
        key = "tflops" if "tflops" in next(r[name] for r in rounds if name in r) else "us"
        merged[name] = {key: sum(values) / len(values)}
    return merged


def _spread(rounds: list, name: str):
    """max/min - 1 of one tree's value for `name` over its rounds; None with fewer than two."""
    values = [_value(r[name]) for r in rounds if name in r]
    return max(values) / min(values) - 1 if len(values) > 1 else None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trees", nargs="*", help="label=path/to/src (the folder that holds flashx/)")
    p.add_argument("--cases", nargs="+", choices=CASE_GROUPS, default=list(CASE_GROUPS))
    p.add_argument("--only", nargs="+", default=None, metavar="TEXT",
                   help="time only the cases whose name holds one of these, e.g. 'bwd dense B1 N16384 H16 D128'")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--rounds", type=int, default=1,
                   help="run the trees this many times, alternating forward and reverse order (default 1)")
    p.add_argument("--calls", type=int, default=1,
                   help="calls back to back per timing, for calls shorter than the host's time per launch (default 1)")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="forward cases: replay the --calls calls from one CUDA graph (device time only)")
    p.add_argument("--control", action="store_true",
                   help="also time a copy of the first tree, labelled control (identical kernels' tree-to-tree ratio)")
    p.add_argument("--env", action="append", default=[], metavar="LABEL:VAR=VALUE",
                   help="set VAR in that tree's processes (and its control's), e.g. two labels on one tree "
                        "with ptxas13:TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas (repeatable)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.tree_env = {}
    labels = [t.partition("=")[0] for t in args.trees]
    for item in args.env:
        label, _, assignment = item.partition(":")
        var, equals, value = assignment.partition("=")
        if label not in labels or not var or not equals:
            p.error(f"--env {item!r}: expected LABEL:VAR=VALUE with LABEL one of {labels}")
        args.tree_env.setdefault(label, {})[var] = value
    if args.worker:
        print("RESULTS " + json.dumps(worker(args.cases, args.calls, args.only, args.cuda_graphs)))
        return 0
    if args.control:
        if not args.trees:
            p.error("--control copies the first tree: name one")
        with tempfile.TemporaryDirectory(prefix="ab-control-") as folder:
            copy = os.path.join(folder, "src")
            shutil.copytree(args.trees[0].partition("=")[2], copy, ignore=shutil.ignore_patterns("__pycache__"))
            args.tree_env["control"] = args.tree_env.get(args.trees[0].partition("=")[0], {})
            return _compare(args, args.trees + [f"control={copy}"])
    return _compare(args, args.trees)


def _compare(args, trees: list) -> int:
    """Time `trees` (label=path) over args.rounds rounds and print the table."""
    runs = {t.partition("=")[0]: [] for t in trees}
    for round_ in range(args.rounds):
        for tree in trees if round_ % 2 == 0 else trees[::-1]:
            label, _, path = tree.partition("=")
            runs[label].append(_run_tree(path, args.cases, label, args.calls, args.tree_env.get(label), args.only,
                                         args.cuda_graphs))
    table = {label: _mean_over_rounds(results) for label, results in runs.items()}
    labels = [t.partition("=")[0] for t in trees]
    names = list(dict.fromkeys(name for label in labels for name in table[label]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(means=table, rounds=runs), f, indent=1)
    spread_col = args.rounds > 1
    print("| case | " + " | ".join(labels) + " | " + " | ".join(f"{x}/{labels[0]}" for x in labels[1:])
          + (" | spread |" if spread_col else " |"))
    print("|---" * (1 + 2 * len(labels) - 1 + spread_col) + "|")
    for name in names:
        cells, values = [], []
        for label in labels:
            r = table[label].get(name)
            value = None if r is None else r.get("tflops", r.get("us"))
            values.append(value)
            cells.append("-" if value is None else f"{value:.1f}")
        ratios = ["-" if None in (v, values[0]) else f"{v / values[0]:.3f}" for v in values[1:]]
        spread = [_spread(runs[label], name) for label in labels] if spread_col else []
        spread = [x for x in spread if x is not None]
        print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios)
              + (f" | {max(spread):.3f} |" if spread else " | - |" if spread_col else " |"))
    print("(TFLOP/s, higher is better; host rows: microseconds per call, lower is better"
          + (f"; means over {args.rounds} rounds in alternating order, spread: the largest max/min - 1 of one"
             " tree over its rounds)" if spread_col else ")"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
