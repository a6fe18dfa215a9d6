"""Which tile, pipeline depth and route each kernel takes, by head dim, causality, length and
hardware, with the measurements behind each choice (benchmarks/NOTES.md has the runs).

The plan (core/plan.py) reads these tables when it plans a call; benchmarks/tune.py and
benchmarks/jax_vs_torch.py change them in place to time candidates. Framework-free.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Mapping, NamedTuple, Optional

from . import runtime

# Split-KV forward (flash-decoding): where a call's tiles fill too few SMs, the portable forward
# splits each tile's keys over up to KV_SPLIT_MAX programs, each of at least KV_SPLIT_MIN_BLOCKS
# key blocks, and a combine kernel merges them (kv_splits).
KV_SPLIT_MAX = 16
KV_SPLIT_MIN_BLOCKS = 4
COMBINE_BLOCK_M = 16


@dataclass(frozen=True)
class KernelTiles:
    """One kernel's tile (BLOCK_M query rows x BLOCK_N keys) and launch options; one_loop (the
    forward's): walk every key block in one loop, masking per block at run time, rather than in
    spans of masked and full blocks, each its own pipeline to fill (see ONE_LOOP)."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    one_loop: bool = False

    @property
    def options(self) -> dict:
        return dict(num_warps=self.num_warps, num_stages=self.num_stages, **LAUNCH_OPTIONS)


# Compile options of every launch. fma contraction is what FOLD_SCALE's one fma per score and the
# backward's exp2(qk * scale - lse) rely on: Triton's default today (and jax-triton's), but Triton
# warns that 3.10 will turn it off by default.
LAUNCH_OPTIONS = dict(enable_fp_fusion=True)

# The Gluon forward's tiles (core/gluon_forward.py, on Hopper), named as in
# benchmarks/gluon_forward_check.py, which checks each against float64 and times it beside the tl
# forward, FA2 and cuDNN on the H200. The figures behind each tile and route are in
# benchmarks/NOTES.md (the version in each comment); a tile that a newer one replaced stays here,
# unrouted, so that jax_vs_torch.py --route can time it beside its successor in both frontends.
GLUON_FORWARD_TILES = {
    # cp.async tiles (any launcher, broadcast axes included; NOTES v0.12-v0.14): "pp", two
    # consumers at D = 128; "pp-qp-persist", the same persistent, with Q by the producer (short
    # non-causal calls); "d64-c3-turns", three consumers taking turns at D = 64; "d256-pp", 64-key
    # blocks at D = 256.
    "pp": dict(BLOCK_M=128, BLOCK_N=128, STAGES=2, TURNS=False, PERSISTENT=False, Q_BY_PRODUCER=False,
               TMA=False, PRODUCER_WARPS=4, PRODUCER_REGS=80, CONSUMER_REGS=200, TRIM_DIAGONAL=False, OVERLAP=False, TMA_STORE=False, ACROSS_TILES=False),
    "pp-qp-persist": dict(BLOCK_M=128, BLOCK_N=128, STAGES=2, TURNS=False, PERSISTENT=True, Q_BY_PRODUCER=True,
                          TMA=False, PRODUCER_WARPS=4, PRODUCER_REGS=96, CONSUMER_REGS=192, TRIM_DIAGONAL=False, OVERLAP=False, TMA_STORE=False, ACROSS_TILES=False),
    "d64-c3-turns": dict(BLOCK_M=192, BLOCK_N=128, STAGES=2, TURNS=True, PERSISTENT=False, Q_BY_PRODUCER=False,
                         TMA=False, PRODUCER_WARPS=4, PRODUCER_REGS=56, CONSUMER_REGS=152, TRIM_DIAGONAL=False, OVERLAP=False, TMA_STORE=False, ACROSS_TILES=False),
    "d256-pp": dict(BLOCK_M=128, BLOCK_N=64, STAGES=2, TURNS=False, PERSISTENT=False, Q_BY_PRODUCER=False,
                    TMA=False, PRODUCER_WARPS=4, PRODUCER_REGS=64, CONSUMER_REGS=224, TRIM_DIAGONAL=False, OVERLAP=False, TMA_STORE=False, ACROSS_TILES=False),
    # TMA tiles (Q, K and V by tensor descriptors, one producer thread issuing the copies, so the
    # consumers get the registers; NOTES v0.15-v0.21), all with O stored by TMA ("-ts", v0.20).
    # D = 64: 256-key blocks, half the steps' bookkeeping, lead at 1k-2k keys non-causal (v0.23);
    # two consumers with trimmed diagonals lead causal at 1k-4k keys (v0.34).
    "d64-tma-persist-n256-ts": dict(BLOCK_M=128, BLOCK_N=256, STAGES=2, TURNS=False, PERSISTENT=True,
                                    Q_BY_PRODUCER=True, TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=48,
                                    CONSUMER_REGS=232, TRIM_DIAGONAL=False, OVERLAP=False, TMA_STORE=True,
                                    ACROSS_TILES=False),
    "d64-tma-persist-trim-ts": dict(BLOCK_M=128, BLOCK_N=128, STAGES=2, TURNS=False, PERSISTENT=True,
                                    Q_BY_PRODUCER=True, TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=48,
                                    CONSUMER_REGS=232, TRIM_DIAGONAL=True, OVERLAP=False, TMA_STORE=True,
                                    ACROSS_TILES=False),
    # D = 64, three consumers: with turns (routed until v0.36); without turns, each free to run its
    # softmax while another's products hold the tensor cores (non-causal from 2k keys, v0.36); and
    # that tile trimmed by whole blocks (causal from 4k keys, v0.37: its half-block steps
    # miscompiled with three consumers, see gluon_forward.HALF_BLOCKS).
    "d64-c3-turns-tma-persist-ts": dict(BLOCK_M=192, BLOCK_N=128, STAGES=2, TURNS=True, PERSISTENT=True,
                                        Q_BY_PRODUCER=True, TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=32,
                                        CONSUMER_REGS=160, TRIM_DIAGONAL=False, OVERLAP=False, TMA_STORE=True,
                                        ACROSS_TILES=False),
    "d64-c3-tma-persist-ts": dict(BLOCK_M=192, BLOCK_N=128, STAGES=2, TURNS=False, PERSISTENT=True,
                                  Q_BY_PRODUCER=True, TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=32,
                                  CONSUMER_REGS=160, TRIM_DIAGONAL=False, OVERLAP=False, TMA_STORE=True,
                                  ACROSS_TILES=False),
    "d64-c3-tma-persist-trim-ts": dict(BLOCK_M=192, BLOCK_N=128, STAGES=2, TURNS=False, PERSISTENT=True,
                                       Q_BY_PRODUCER=True, TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=32,
                                       CONSUMER_REGS=160, TRIM_DIAGONAL=True, OVERLAP=False, TMA_STORE=True,
                                       ACROSS_TILES=False),
    # D = 128: OVERLAP (each consumer's softmax under its own previous P V, v0.19), persistent
    # (causal tiles in heavy/light pairs of one head, v0.25), or per tile at 240 registers (the
    # causal route until v0.25; a test's route override names it); trimmed diagonals for short
    # causal calls (v0.20).
    "pp-tma-persist-ovl-ts": dict(BLOCK_M=128, BLOCK_N=128, STAGES=2, TURNS=False, PERSISTENT=True, Q_BY_PRODUCER=True,
                                  TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=48, CONSUMER_REGS=232, TRIM_DIAGONAL=False,
                                  OVERLAP=True, TMA_STORE=True, ACROSS_TILES=False),
    "pp-tma-c240-ovl-ts": dict(BLOCK_M=128, BLOCK_N=128, STAGES=2, TURNS=False, PERSISTENT=False, Q_BY_PRODUCER=True,
                               TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=32, CONSUMER_REGS=240, TRIM_DIAGONAL=False,
                               OVERLAP=True, TMA_STORE=True, ACROSS_TILES=False),
    "pp-tma-persist-trim-ts": dict(BLOCK_M=128, BLOCK_N=128, STAGES=2, TURNS=False, PERSISTENT=True, Q_BY_PRODUCER=True,
                                   TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=48, CONSUMER_REGS=232, TRIM_DIAGONAL=True,
                                   OVERLAP=False, TMA_STORE=True, ACROSS_TILES=False),
    # D = 256: 64-key blocks, O stored in two 128-column halves (v0.20-v0.21); the trimmed
    # per-tile tile and the tile without the TMA store were routed until v0.29.
    "d256-tma-persist-ovl-ts": dict(BLOCK_M=128, BLOCK_N=64, STAGES=2, TURNS=False, PERSISTENT=True, Q_BY_PRODUCER=True,
                                    TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=24, CONSUMER_REGS=240, TRIM_DIAGONAL=False,
                                    OVERLAP=True, TMA_STORE=True, ACROSS_TILES=False),
    "d256-tma-trim-ts": dict(BLOCK_M=128, BLOCK_N=64, STAGES=2, TURNS=False, PERSISTENT=False, Q_BY_PRODUCER=True,
                             TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=24, CONSUMER_REGS=240, TRIM_DIAGONAL=True,
                             OVERLAP=False, TMA_STORE=True, ACROSS_TILES=False),
    "d256-tma-persist-ovl": dict(BLOCK_M=128, BLOCK_N=64, STAGES=2, TURNS=False, PERSISTENT=True, Q_BY_PRODUCER=True,
                                 TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=24, CONSUMER_REGS=240, TRIM_DIAGONAL=False,
                                 OVERLAP=True, TMA_STORE=False, ACROSS_TILES=False),
}

# Which Gluon tile a call takes, by (head dim, causal): (fewest keys, tile name) pairs in rising
# order; a call takes the last whose fewest keys its Nkv reaches (a name of None: no tile from
# this route there; where GLUON_TMA_ROUTE gives none, GLUON_FORWARD_ROUTE decides), and the tl
# forward below the first (where the tl forward led, or nothing was measured). GLUON_FORWARD_ROUTE
# holds cp.async tiles, for any launcher; GLUON_TMA_ROUTE holds TMA tiles, for launchers that pass
# host tensor descriptors (Triton's; jax-triton's cannot, see GLUON_DEVICE_DESCRIPTORS) and inputs
# with no broadcast axis. A call that the TMA route leaves out falls back to GLUON_FORWARD_ROUTE.
GLUON_FORWARD_ROUTE = {
    (64, False): ((2048, "d64-c3-turns"),),
    (64, True): ((16384, "d64-c3-turns"),),
    (128, False): ((256, "pp-qp-persist"), (2048, "pp")),
    (128, True): ((2048, "pp"),),
    (256, False): ((1024, "d256-pp"),),
    (256, True): ((1024, "d256-pp"),),
}
GLUON_TMA_ROUTE = {
    # D = 64 (NOTES v0.34-v0.37): 256-key blocks at 1k-2k keys, then three consumers; causal, two
    # consumers trimmed at 1k-4k keys (three read 229 against 283 TFLOP/s at 1k and level at 2k,
    # where 192-row tiles waste more on the diagonal and the last wave), then three trimmed: 622-631
    # us a launch at 4k under ncu against cuDNN's 635 and FA2's 972-986.
    (64, False): ((1024, "d64-tma-persist-n256-ts"), (2048, "d64-c3-tma-persist-ts")),
    (64, True): ((1024, "d64-tma-persist-trim-ts"), (4096, "d64-c3-tma-persist-trim-ts")),
    # D = 128: the persistent OVERLAP tile from 256 keys (causal from 1k, v0.25: 380 / 552 / 603
    # TFLOP/s against the per-tile tile's 347 / 511 / 605 at 1k / 4k / 16k), trimmed diagonals for
    # causal 512-1k keys (v0.20).
    (128, False): ((256, "pp-tma-persist-ovl-ts"),),
    (128, True): ((512, "pp-tma-persist-trim-ts"), (1024, "pp-tma-persist-ovl-ts")),
    # D = 256 from 1k keys, causal too since the pairs walk (v0.29: 147-149 us against the trimmed
    # per-tile tile's 168 at 1k, 1489-1492 against d256-tma-persist-ovl's 1523-1525 at 16k).
    (256, False): ((1024, "d256-tma-persist-ovl-ts"),),
    (256, True): ((1024, "d256-tma-persist-ovl-ts"),),
}
# Sliding windows and block maps in the Gluon forward (LIMIT_LEFT, BLOCK_MAP; OVERLAP tiles
# without TRIM_DIAGONAL or ACROSS_TILES, whose BLOCK_M is the map's block height and whose BLOCK_N
# divides its width), by (head dim, "window" | "map"), for launchers with descriptors; the rest
# keep the tl forward. H200, 2026-12-02 17:19-17:26 UTC, torch, causal, N = 16k, H * D = 2048,
# TFLOP/s on visible entries, benchmarks/ab.py (2 rounds, A B B A), tl -> Gluon: D = 128 window
# 1024 318.8 -> 422.3, 8 documents 325.6 -> 449.0, a causal map 438.7 -> 576.1; D = 256 window
# 318.3 -> 480.6, documents 308.7 -> 505.6; D = 64 documents 219.8 -> 340.2, but the window
# 286.3 -> 284.4 (level: not routed then). Logs: results/h200/logs/2026-12-02-s36-*. D = 64 windows
# routed since 2026-12-07 (H100, NOTES v0.74): the same A/B on that day's kernels read tl 311.9
# -> Gluon 322.1 TFLOP/s (+3.3%; 2 rounds, spread 1.9%, an identical control tree 0.997).
# Windows of either alignment: top-left ones with Nq != Nkv (the jax.nn drop-in's) since their GPU
# test passed (2026-12-02 20:0x UTC, test_dropins.py, NOTES v0.31).
GLUON_MASKED_TMA_ROUTE = {
    (64, "window"): "pp-tma-persist-ovl-ts",
    (64, "map"): "pp-tma-persist-ovl-ts",
    (128, "window"): "pp-tma-persist-ovl-ts",
    (128, "map"): "pp-tma-persist-ovl-ts",
    (256, "window"): "d256-tma-persist-ovl-ts",
    (256, "map"): "d256-tma-persist-ovl-ts",
}
# Q's block in a TMA descriptor: one consumer's rows (the K and V blocks are the tile's BLOCK_N).
GLUON_TMA_Q_ROWS = 64
# Launchers without host descriptors (jax-triton's) may take GLUON_TMA_ROUTE's tiles with
# DEVICE_DESCRIPTORS: each program builds Q's, K's and V's descriptors (and with TMA_STORE each
# consumer O's) in at most GLUON_DESCRIPTOR_BYTES of scratch, which flashx/jax/gluon.py points at
# the kernel's DESCRIPTOR_SCRATCH output. First run on
# the H200 2026-11-30 (NOTES v0.16): 24 of 24 checks against float64 from JAX.
GLUON_DEVICE_DESCRIPTORS = True
GLUON_DESCRIPTOR_BYTES = 6 * 128  # CUtensorMaps a program: Q, K, V and up to three consumers' O
# Where launchers with device-built descriptors take another route than GLUON_TMA_ROUTE's (an
# entry replaces the whole route of its (head dim, causal)). D = 128 causal from 256 keys (NOTES
# v0.38): at B = 64, N = 256 the trimmed tile's kernel runs 76-82 us under ncu against the tl
# forward's 95-96, and JAX's jitted loop reads 186 against 170 TFLOP/s. Torch's calls below 512
# keys take it too (HOST_DESCRIPTORS_FROM_KEYS; v0.39: do_bench 99-107 us against tl's 118).
GLUON_DEVICE_TMA_ROUTE: dict = {
    (128, True): ((256, "pp-tma-persist-trim-ts"), (1024, "pp-tma-persist-ovl-ts")),
}
# Triton's own launcher (torch's) can do either: pass host descriptors, or give a kernel that
# builds its own the global scratch it asks of an allocator (launch.KernelCall.launch's). Host
# descriptors cost host time a call: at 512 keys, D = 128, 41-47 us more than the tl forward's
# launch (H200, 2026-12-03, dobench_gap.py --breakdown, two readings: the 4 descriptors built in
# Python 27-30 us, then encoded by the launcher 14-18 us), which limits short calls; device ones
# cost a scratch allocation, and nothing measurable in the kernel since all programs share one slot
# (core.compile_hook; NOTES v0.40: 84.0-85.4 us at N = 256 either way). Such a launcher takes device
# descriptors for calls with fewer keys than this (at 512 keys and at 1k the two read level within
# do_bench's 3-12% spread, v0.39-v0.40).
HOST_DESCRIPTORS_FROM_KEYS = 512


# The Gluon backward kernels (core/gluon_backward.py, dK/dV and dQ): their tiles, and which calls
# take one, by (head dim, "dense" | "causal" | "window" | "map"); a call without a route runs the
# portable kernel for that half. First run on the H200 2026-11-30 (NOTES v0.17): every check
# against float64 passed (kernels, and through the plan from torch, windows and documents
# included). cp.async tiles (no descriptors: both frontends launch them alike; at 232 / 48
# registers neither producer spills). "dkdv-tma" streams Q and dO by TMA from host descriptors
# (torch's launcher; GLUON_DKDV_TMA_ROUTE comes first there).
GLUON_DKDV_TILES = {
    "dkdv": dict(BLOCK_N=128, STAGES=2, TMA=False, PRODUCER_WARPS=4, PRODUCER_REGS=48, CONSUMER_REGS=232,
                 PERSISTENT=False, TMA_STORE=False),
    "dkdv-tma": dict(BLOCK_N=128, STAGES=3, TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=24, CONSUMER_REGS=240,
                     PERSISTENT=False, TMA_STORE=False),
    # "dkdv-tma" storing dK and dV by TMA from the consumer's own K and V buffers (TMA_STORE, no
    # shared memory added). The dK/dV kernel alone, 2026-12-01 04:10 UTC, TFLOP/s, with / without:
    # 520 / 460 at 1k dense (B = 16), 419 / 353 1k causal, 610 / 595 4k dense, 561 / 518 4k causal,
    # 636 / 610 16k causal, 497 / 495 GQA 32/8 4k causal, 475 / 441 16k window 1024, 396 / 373 D = 64
    # 4k causal (10 of 10 kernel checks against float64 from torch, 04:00 UTC).
    # Its producer at 32 registers, not 24: the producer that builds its own descriptors (JAX's
    # launcher) lost 12% at 4k dense under CUDA 13.0's ptxas, which jaxlib assembles with, and
    # nothing under Triton's 12.8. dK/dV kernel alone, us, 24 -> 32 (2026-12-02 13:59 and 14:05
    # UTC, B = 4, N = 4k, H = 16, device time; NOTES v0.28): JAX 1892 -> 1674 / 1695 dense,
    # 992 -> 1012 / 1043 causal (a loss there); torch 1706 -> 1698 / 1718, 938 -> 931 / 923.
    "dkdv-tma-ts": dict(BLOCK_N=128, STAGES=3, TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=32, CONSUMER_REGS=240,
                        PERSISTENT=False, TMA_STORE=True),
    # Not routed: one program a multiprocessor walking key blocks (under causal masks the first
    # blocks, which the most queries see, first), so that a block's K/V staging and dK/dV stores
    # overlap the producer's next copies; correct, and slower than a program a key block
    # everywhere it was timed (NOTES v0.17-v0.18). Nor does it help JAX, whose maps it builds
    # once an SM: with TMA_STORE, 1k causal (B 16, H 16), us, JAX / torch: 365 / 368 against the
    # routed tile's 368 / 329 (H100, 2026-12-07, NOTES v0.82).
    "dkdv-tma-persist": dict(BLOCK_N=128, STAGES=3, TMA=True, PRODUCER_WARPS=4, PRODUCER_REGS=24,
                             CONSUMER_REGS=240, PERSISTENT=True, TMA_STORE=False),
}
GLUON_DQ_TILES = {
    "dq": dict(BLOCK_M=128, BLOCK_N=64, STAGES=2, TMA=False, PRODUCER_WARPS=4, PRODUCER_REGS=48, CONSUMER_REGS=232),
}
# 2026-11-30 22:10 UTC, whole backward TFLOP/s, portable / Gluon dK/dV / Gluon dK/dV + dQ (D = 128):
# 4k dense 407 / 423 / 416; 4k causal 371 / 377 / 370; 16k causal 391 / 416 / 426; GQA 32/8 4k
# causal 343 / 365 / 361; 16k window 1024 275 / 287 / 297; 16k 8 documents 286 / 299 / 325. D = 64
# (4k causal) 337 / 326 / 326: not routed. The dQ kernel only where it won by more than noise:
# windows and maps until it stored 16 bytes a thread (s88). Since then, H100, 2026-12-07 16:44-16:53
# UTC (B 16 H 16 at 1k, B 4 H 16 at 4k), the dQ kernel alone, us, tl / Gluon: 1k dense 441 / 407, 1k
# causal 290 / 268; whole backward, Gluon dQ / tl dQ, 3 rounds (control beside): 1k dense 1.028
# (1.004), 1k causal 1.055 (1.013), 4k dense 1.052 (0.986), 4k causal 0.995 (0.995).
GLUON_DKDV_ROUTE: dict = {(128, kind): "dkdv" for kind in ("dense", "causal", "window", "map")}
GLUON_DQ_ROUTE: dict = {(128, kind): "dq" for kind in ("dense", "causal", "window", "map")}
# Same run, the dK/dV kernel alone, TMA (3 stages) / cp.async (2 stages): 599 / 576 (4k dense),
# 530 / 517 (4k causal), 612 / 606 (16k causal), 502 / 482 (GQA), 449 / 403 (window).
GLUON_DKDV_TMA_ROUTE: dict = {(128, kind): "dkdv-tma-ts" for kind in ("dense", "causal", "window", "map")}


def gluon_forward_tile(head_dim: int, causal: bool, seqlen_kv: int, route: Mapping = GLUON_FORWARD_ROUTE) -> Optional[str]:
    """The name of the Gluon forward tile (GLUON_FORWARD_TILES) that `route` (GLUON_FORWARD_ROUTE
    or GLUON_TMA_ROUTE) gives a dense call, or None."""
    chosen = None
    for fewest_keys, name in route.get((head_dim, causal), ()):
        if seqlen_kv >= fewest_keys:
            chosen = name
    return chosen


@dataclass(frozen=True)
class TileConfig:
    """Tiles of the forward, dK/dV and dQ kernels (the backward's preprocess uses the forward's).

    one_backward_launch: whether dK/dV's and dQ's programs may share one launch with these tiles
    (where AttentionPlan.fused_backward's other conditions hold); measured per table entry.

    dkdv_passes: 1, dK and dV in one pass over the queries; 2, a dV pass then a dK pass, each
    holding one [BLOCK_N, D] float32 accumulator (launched apart: needs one_backward_launch False).
    At D = 256 two accumulators of 64 keys fill the registers and leave the tile too short for 8
    warps: Triton then gives the score tiles warpsPerCTA [8, 1] on 64 rows, and both warpgroups
    compute every score (1.5x the tensor work). One accumulator fits 128 keys, where 8 warps split
    the scores; the dV pass skips dO V^T and dS.
    """

    forward: KernelTiles
    dkdv: KernelTiles
    dq: KernelTiles
    one_backward_launch: bool = True
    dkdv_passes: int = 1


# Dense calls on the GPU, by (BLOCK_D, causal): the fastest of benchmarks/tune.py's candidates on
# the H200 at N = 4k (2026-11-29; the sweep is in benchmarks/results/h200/tune.md). Since the
# forward takes the row max before scaling (FOLD_SCALE), 128 x 128 beats the sweep's 128 x 64 for
# causal D = 128: 429 vs 418 TFLOP/s at N = 4k, 503 vs 481 at 16k (benchmarks/ab.py, same run).
# D = 256's forward, swept again on today's kernel (2026-11-30, results/h200/tune-d256.md): 128 x 32
# at 3 stages beats 128 x 64 at 2 at every N, causal or not: 468 vs 431 TFLOP/s at N = 4k, 479 vs
# 442 at 16k, 402 vs 363 at 1k (non-causal); causal 439 vs 405, 470 vs 454, 290 vs 263. Its dQ
# (results/h200/tune-d256-backward.md, N = 4k): 128 x 32 at 3 stages, 1.38 vs 2.88 ms non-causal
# (128 x 64 at 1 stage spilled 352 bytes; this one none), 0.74 vs 0.98 ms causal. Its dK/dV and dQ
# take two launches: their shared kernel spills as much as dK/dV's (~500 bytes) while dQ alone
# spills none; two launches measured +1.3% / +2.6% over one (non-causal / causal, N = 4k, spread
# 0.6%; 2026-11-30). Its dK/dV in two passes of 128 keys (TileConfig.dkdv_passes): offline no
# spills in either (64 x 64 in one pass: 448-480 bytes) and no score tile computed twice; timed
# (2026-11-30, ab.py, N = 4k) +42% / +34% on the whole backward (non-causal / causal) at 2 stages,
# and tune.py (results/h200/tune-d256-passes.md) puts 3 stages ahead: dK/dV 2.61 vs 3.52 ms
# non-causal, 1.44 vs 1.55 ms causal.
TUNED_TILES: dict = {
    (64, False): TileConfig(KernelTiles(128, 64, 8, 3), KernelTiles(64, 64, 4, 3), KernelTiles(64, 64, 4, 3)),
    (64, True): TileConfig(KernelTiles(128, 64, 8, 3), KernelTiles(64, 64, 4, 3), KernelTiles(64, 64, 4, 3)),
    (128, False): TileConfig(KernelTiles(128, 128, 8, 3), KernelTiles(64, 128, 8, 3), KernelTiles(128, 64, 8, 3)),
    (128, True): TileConfig(KernelTiles(128, 128, 8, 3), KernelTiles(64, 128, 8, 3), KernelTiles(128, 64, 8, 3)),
    (256, False): TileConfig(KernelTiles(128, 32, 8, 3), KernelTiles(32, 128, 8, 3), KernelTiles(128, 32, 8, 3),
                             one_backward_launch=False, dkdv_passes=2),
    (256, True): TileConfig(KernelTiles(128, 32, 8, 3), KernelTiles(32, 128, 8, 3), KernelTiles(128, 32, 8, 3),
                            one_backward_launch=False, dkdv_passes=2),
}


# Sequences up to SHORT_SEQLEN keys and queries: the forward's best tile is smaller there (more
# programs for the few key blocks each sees). benchmarks/tune.py on the H200, 2026-11-29
# (results/h200/tune-short.md), B*N = 16k, ms of (64, 32, 4, 3) vs the long-sequence table's tile:
# D = 128 causal 0.109 vs 0.150 (N = 256), 0.147 vs 0.202 (512), 0.223 vs 0.264 (1k); non-causal
# 0.131 vs 0.165, 0.204 vs 0.226, 0.348 vs 0.345. D = 64 causal 0.118 vs 0.137, 0.162 vs 0.172,
# 0.252 vs 0.247; D = 64 non-causal: no gain. ab.py, 10 calls back to back, 4 rounds (2026-11-30):
# N = 512 +5.1% (D = 128) and +6.0% (D = 64), every round above main's best; N = 256 level within
# its rounds' noise (83-175 TFLOP/s in every tree). Swept again on today's kernel at N = 512 and
# 1024 (2026-11-30, results/h200/tune-n512-n1024-forward.md): 64 x 32 stays best at 512, while
# at 1024 64 x 64 / 4 / 3 leads: D = 128 0.340 vs 0.356 ms non-causal, 0.212 vs 0.215 causal;
# D = 64 causal 0.235 vs 0.249; ab.py (3 rounds, results/h200/ab/2026-11-30-s11-short-buckets.md):
# N = 1024 D = 64 causal +5.4% (spread 0.6%), D = 128 +7.1% / +5.0% (wide spreads, two rounds of
# three above main's best), N <= 512 level. So two buckets, by the longest sequence: <= 512 and <= 1024. One
# compiled variant per bucket and (D, flags), chosen by the bucket, never by the exact length.
# Causal programs here see a few key blocks: one loop (one_loop), not a span of full blocks and
# one of masked ones.
SHORT_SEQLEN = 1024
SHORT_BUCKETS = (512, SHORT_SEQLEN)
SHORT_FORWARD_TILES: dict = {
    (64, True, 512): KernelTiles(64, 32, 4, 3, one_loop=True),
    (128, False, 512): KernelTiles(64, 32, 4, 3),
    (128, True, 512): KernelTiles(64, 32, 4, 3, one_loop=True),
    (64, True, 1024): KernelTiles(64, 64, 4, 3, one_loop=True),
    (128, False, 1024): KernelTiles(64, 64, 4, 3),
    (128, True, 1024): KernelTiles(64, 64, 4, 3, one_loop=True),
}


def short_bucket(longest: int) -> Optional[int]:
    """The short-sequence bucket (a SHORT_BUCKETS limit) of a call whose longest sequence is
    `longest`; None above SHORT_SEQLEN."""
    return next((limit for limit in SHORT_BUCKETS if longest <= limit), None)


# Sliding windows (a left side, no block map), D = 128: dK/dV's loops are short (a window of
# 1024 gives each 128-key program ~18 query blocks over three spans), so a shallower pipeline
# fills and drains sooner. benchmarks/tune.py --window 1023 on the H200 (2026-11-30, N = 16k):
# 0.815 ms at 2 stages vs 0.842 at 3; ab.py, same run: window backward +2.2% (spread 0.1%),
# while the same change for every causal call cost documents 4.0% and dense causal 1.6%.
WINDOW_DKDV_TILES: dict = {
    128: KernelTiles(64, 128, 8, 2),
}


def default_blocks() -> tuple:
    """(BLOCK_M, BLOCK_N) of a block map: small tiles in the interpreter; on the GPU 128 x 128,
    a multiple of every kernel's tile in TUNED_TILES (each kernel then walks a map block in
    several of its own tiles)."""
    return (16, 16) if runtime.INTERPRETER else (128, 128)


# float32 inputs at D > 128 (BLOCK_D 256): the tiles of 16-bit D = 256 take twice the shared
# memory there, and float32's full-precision dots run on the FMA units, each thread holding its
# rows and columns over all of D in registers. (These tiles were sized for "ieee" dots, then
# float32's only ones; the tensor-core precisions take their own where they measured faster: see
# FLOAT32_PRECISION_TILES.) Offline (Triton 3.6, sm_90, D = 256, 2026-12-06,
# s72), registers / stack bytes / compile seconds: the former 64 x 64 tiles (forward 4 warps,
# 2 stages; dK/dV and dQ 8 warps, 1 stage, one launch) spilled 37 KB a thread in the forward
# (125 s to compile: decode-shaped tests ran past their deadline) and 26 KB in dK/dV, and asked
# 288 / 256 KiB of shared memory in dK/dV / dQ (over the 227 KiB an H200 block may have). These:
# forward 255 / 1008 / 8 s, dK/dV 255 / 1296 / 8 s, dQ 151 / 0 / 5 s; 168 / 100 / 132 KiB. Their
# GPU tests pass (H100, s72); timings in NOTES v0.65.
FLOAT32_WIDE_TILES = TileConfig(KernelTiles(32, 64, 8, 2), KernelTiles(16, 32, 4, 2), KernelTiles(32, 32, 8, 2),
                                one_backward_launch=False)
# float32 at D <= 128 took the 16-bit tiles of twice its width, and spilled the same way: offline
# (Triton 3.6, sm_90, s72, causal N = 4k), stack bytes of forward / dK/dV / dQ at D = 128 6920 /
# 6960 + 15000 (two passes) / 12136, at D = 64 0 / 1600 / 1760. These spill none at D = 64 and
# 32 / 304 / 0 bytes at D = 128 (compiles of 2-7 s against 7-14). Keyed by the 16-bit width.
# H100, 2026-12-06 (s72, B = 2, N = 2048, Hq 8 / Hkv 2), ms, forward and forward + backward:
# D = 128 causal 31.46 -> 1.78 and 145.9 -> 14.8; D = 64 causal 10.43 -> 1.10 and 19.4 -> 6.1.
FLOAT32_TILES: dict = {
    128: TileConfig(KernelTiles(64, 32, 8, 2), KernelTiles(64, 32, 8, 2), KernelTiles(64, 32, 8, 2),
                    one_backward_launch=False),
    256: TileConfig(KernelTiles(32, 64, 8, 2), KernelTiles(32, 32, 8, 2), KernelTiles(32, 64, 8, 2),
                    one_backward_launch=False),
    512: FLOAT32_WIDE_TILES,
}

# float32_precision "tf32x3" (core.plan.FLOAT32_PRECISIONS) splits each dot's operands into high
# and low tf32 parts. Above D = 128 (width 512) FLOAT32_WIDE_TILES' backward then ran out of
# registers: offline (Triton 3.6, sm_90, D = 256, s73) dK/dV spilled 9.2 KB a thread and dQ 7.5 KB,
# and on an H100 (2026-12-06, B = 2, N = 2048, Hq 8 / Hkv 2) forward + backward took 107-111 ms
# causal and 299-310 non-causal at D = 192 / 256, against 33 / 46 ms for "ieee". Of 13 tiles swept
# offline these spilled least (dK/dV 0.9-1.0 KB, dQ 0.7 KB): forward + backward 10.1-10.2 ms causal
# and 19.5-19.9 non-causal (H100, same shapes; the "ieee" backward on the wide tiles: 31.2-31.6 /
# 42.6-42.8), errors against float64 at most 3.4e-6 relative. On one stage each (H100, s77, same
# shapes) they took 7.72-7.74 / 15.65 ms against 10.21 / 19.68 on two (bf16x3 lost on one: 4.20 /
# 8.40 -> 5.60 / 11.42; "tf32" and "ieee" on FLOAT32_WIDE_TILES' one stage level or slower).
# At D = 64 (width 128) the forward and dQ take 64 x 64 on 4 warps (offline, s75: 16-40 bytes of
# stack, FLOAT32_TILES' 64 x 32 / 8 none): H100, 2026-12-06 (s75, same shapes, one process a tile),
# ms forward / forward + backward: 0.565 / 1.878 -> 0.290 / 1.288 causal, 0.924 / 3.314 -> 0.380 /
# 2.200 non-causal (64 x 32 / 4: 0.345 / 1.355, 0.450 / 2.221); errors unchanged (<= 1.2e-6).
# At D = 128 (width 256) its dK/dV takes 32 x 32 on 4 warps, one stage, and its dQ 32 x 32 on 4
# warps, two stages (tune.py --dtype float32, H100, s78: B = 8, N = 2048, 16 heads, dK/dV 17.74 ->
# 15.39 ms non-causal, 8.79 -> 7.14 causal; dQ 10.66 -> 10.00, 5.82 -> 5.08). Forward + backward
# (H100, 2026-12-06, s78, tile_probe.py, N = 2048, ms causal / non-causal, s77's tiles -> these):
# B = 8, 16 heads 18.74 / 35.74 -> 16.25 / 32.70; B = 8, 32 q heads over 8 36.51 / 72.83 ->
# 32.37 / 66.27; B = 2, 16 heads 4.71 / 9.24 -> 4.13 / 8.48; B = 4, 16 over 4 9.23 / 18.43 -> 8.17
# / 16.98; B = 8, 8 over 2 9.10 / 18.41 -> 8.82 / 16.98; but B = 2, 8 over 2 (a dK/dV grid of 256
# programs, under two waves of SMs) 2.31 / 4.68 -> 3.12 / 4.36: there, and wherever the dK/dV
# grid fills fewer than FEW_PROGRAMS_WAVES waves, dK/dV keeps s77's 64 x 32 on 8 warps, one stage
# (FLOAT32_FEW_PROGRAMS_TILES). Errors against float64 the same to two digits (<= 2.8e-6).
# Its forward at D = 128 takes 128 x 32 on 8 warps, two stages (tune.py, s78: B = 8, 16 heads, 7.51
# -> 6.54 ms non-causal, 4.10 -> 3.60 causal). H100, 2026-12-06 (s79, bench_float32.py --tiles, N =
# 2048, 8 q heads over 2, forward ms non-causal, 32 x 64 -> 128 x 32): B = 2 0.981 -> 0.849, B = 4
# 1.925 -> 1.675, B = 8 3.812 -> 3.306 (and B = 8, 16 heads 7.584 -> 6.609); causal B = 8 2.028 ->
# 1.934, 16 heads 4.149 -> 3.637, but on small grids slower: B = 2 0.516 -> 0.675, B = 4 1.020 ->
# 1.088 (B = 6 level, 1.524 / 1.518). There the causal forward keeps 32 x 64 (FLOAT32_FEW_PROGRAMS_TILES).
TF32X3_TILES: dict = {
    128: dict(forward=KernelTiles(64, 64, 4, 2), dq=KernelTiles(64, 64, 4, 2)),
    256: dict(forward=KernelTiles(128, 32, 8, 2), dkdv=KernelTiles(32, 32, 4, 1), dq=KernelTiles(32, 32, 4, 2)),
    512: dict(dkdv=KernelTiles(16, 16, 4, 1), dq=KernelTiles(16, 32, 4, 1)),
}
# float32_precision "bf16x3" (two bfloat16 parts an operand, three products) at D <= 128: its
# operands take half tf32's registers, and a forward of 64 x 32 on 4 warps spilled none offline
# (Triton 3.6, sm_90, s74; FLOAT32_TILES' 64 x 32 on 8 warps: none either) and its dQ 8-56 bytes.
# H200, 2026-12-06 (s74, B = 2, N = 2048, Hq 8 / Hkv 2, one process a tile), ms forward / forward +
# backward on FLOAT32_TILES: 0.410 / 1.717 causal, 0.810 / 3.446 non-causal; forward 64 x 32 / 4:
# 0.307 / 1.615, 0.415 / 3.056; dQ 64 x 32 / 4: 0.412 / 1.607, 0.808 / 2.989. (For tf32x3 the same
# forward read 1.3-1.5x slower: s73.)
# At D = 64 (H100, same shapes and probe, s74): FLOAT32_TILES 0.361 / 1.097 causal, 0.599 / 1.776
# non-causal; forward 64 x 64 / 4: 0.159 / 0.882, 0.207 / 1.391; dQ 64 x 64 / 4: 0.361 / 0.885,
# 0.598 / 1.498 (64 x 32 / 4: 0.203 / 0.925 forward, 0.375 / 0.899 dQ, causal).
# Above D = 128 (width 512) it takes tf32x3's backward tiles on two stages: offline (s74) they
# spilled 72-184 bytes a thread against 336-464 on FLOAT32_WIDE_TILES'; H200, 2026-12-06 (s75, same
# probe, D = 256), forward + backward ms causal / non-causal: 6.261 / 8.960 -> 4.278 / 8.592 (dK/dV
# 16 x 16 alone: 4.618 / 9.242).
# Its dK/dV at D = 128 takes 64 x 32 on 8 warps (offline, s75: 8-24 bytes of stack; FLOAT32_TILES'
# 32 x 32 / 8 none): H100, 2026-12-06 (s75, same probe), forward + backward ms causal /
# non-causal 1.521 / 2.540 -> 1.261 / 2.057 (32 x 32 / 4: 1.672 / 1.872). At D = 64 none of 32 x
# 64 / 4 (0.985 / 1.181) and 64 x 32 / 4 (0.789 / 0.915) beat FLOAT32_TILES' (0.670 / 1.118) on
# both.
BF16X3_TILES: dict = {
    128: dict(forward=KernelTiles(64, 64, 4, 2), dq=KernelTiles(64, 64, 4, 2)),
    256: dict(forward=KernelTiles(64, 32, 4, 2), dkdv=KernelTiles(64, 32, 8, 2), dq=KernelTiles(64, 32, 4, 2)),
    512: dict(dkdv=KernelTiles(16, 16, 4, 2), dq=KernelTiles(16, 32, 4, 2)),
}
# "tf32" (one tf32 product) takes bf16x3's tiles at D = 64 and its backward tiles at D = 128 (offline,
# s75: no spill at D = 64; at D = 128 dK/dV none, dQ 40-120 bytes). H100, 2026-12-06 (s75, same
# shapes and probe, two processes a tile set, each within 1.3% of its other reading), ms
# forward / forward + backward, FLOAT32_TILES -> BF16X3_TILES': D = 64 causal 0.245 / 0.846 ->
# 0.177 / 0.652, non-causal 0.320 / 1.448 -> 0.223 / 1.098; D = 128 causal 0.313 / 1.449 -> 0.347 /
# 1.333, non-causal 0.472 / 2.853 -> 0.442 / 2.167. The D = 128 forward stays (11% slower causal,
# 6% faster non-causal on bf16x3's); the backward kernels do not depend on the forward's tile.
TF32_TILES: dict = {
    128: BF16X3_TILES[128],
    256: dict(dkdv=BF16X3_TILES[256]["dkdv"], dq=BF16X3_TILES[256]["dq"]),
}
# Each float32_precision's own tiles over FLOAT32_TILES, by width.
FLOAT32_PRECISION_TILES: dict = {"tf32x3": TF32X3_TILES, "bf16x3": BF16X3_TILES, "tf32": TF32_TILES}
# A precision's tiles over those, by width and kernel, for causal calls (a right-bounded window)
# whose grid for that kernel under the precision's tile (forward: batch * q heads * query blocks;
# dK/dV: batch * kv heads * key blocks) fills fewer than FEW_PROGRAMS_WAVES waves of the GPU's SMs:
# a small causal grid's tail is its heaviest programs, which a tile of more warps runs faster one
# at a time. tf32x3 at D = 128: s77's forward (32 x 64 on 8 warps, FLOAT32_TILES') and dK/dV (64 x
# 32 on 8 warps, one stage); see TF32X3_TILES. H100, 2026-12-06 (s79, bench_float32.py --tiles, N =
# 2048, 8 q heads over 2, forward + backward ms, causal, this dK/dV -> TF32X3_TILES'): 256 dK/dV
# programs (B = 2) 2.424 -> 3.093, 512 (B = 4) 4.604 -> 5.040, 768 6.827 -> 6.913, 1024 9.018 ->
# 8.994; non-causal calls take TF32X3_TILES' at every size (256: 4.676 -> 4.415, 512: 9.287 -> 8.724).
FLOAT32_FEW_PROGRAMS_TILES: dict = {
    "tf32x3": {256: dict(forward=KernelTiles(32, 64, 8, 2), dkdv=KernelTiles(64, 32, 8, 1))},
}
FEW_PROGRAMS_WAVES = 4

# The backward's row statistics (delta = rowsum(dO * O), lse in log2 units) written by dQ's tl
# programs, launched first where they launch alone, instead of by a preprocess pass over O and dO
# before them (AttentionPlan.backward_calls). The preprocess took 50 us of an H100's D = 128 1k
# backward (B = 16, H = 16): 5% non-causal, 8% causal (2026-12-07, s85).
DQ_ROW_STATS = True
# The same for the Gluon dQ kernel (GLUON_DQ_ROUTE): each consumer warpgroup computes its rows'
# statistics while the producer's first K and V copies are in flight. H100, 2026-12-07 (s87), the
# D = 128 16k backward with the preprocess / without, TFLOP/s: window 1024 309.5 / 313.4, documents
# 321.9 / 326.2, causal block map 429.0 / 438.8 (the preprocess was ~1% of these; within the run's
# 1-3% noise). At 1k (B 16, H 16, dense) its dQ kernel took 421 us where the tl dQ took 443 (407
# once it stored 16 bytes a thread, s88).
GLUON_DQ_ROW_STATS = True

# The kernels' DOT_PRECISION for float32 "tf32x3" where core.scores.dot splits the operands itself:
# the high part by an integer add and a mask, then three "tf32" dots. Triton's own tf32x3 rounds
# each split operand through an emulated cvt.rna.tf32, with an extra compare and select an element:
# offline (Triton 3.6, sm_90, s75) a D = 128 dK/dV loop held 160 FSETP and 104 SEL beside 288
# HMMA, and the integer split cut loop instructions 17-26% at D <= 128 with the same HMMA.
# H100, 2026-12-06 (s76, B = 2, N = 2048, Hq 8 / Hkv 2, two processes each, alternating), ms
# forward + backward, Triton's split -> this one: D = 64 causal 1.271 / 1.272 -> 1.241 / 1.234,
# non-causal 2.219 / 2.220 -> 2.112 / 2.112; D = 128 causal 2.789 / 2.790 -> 2.685 / 2.673,
# non-causal 5.863 / 5.858 -> 5.501 / 5.481 (forward alone level at D = 64, 3.6-3.9% less at D =
# 128); errors against float64 the same to two digits. At D = 256 (width 512) ptxas gave the split
# forward 32 registers and 7.6 KB of stack (non-causal forward 2.6 -> 45 ms, the backward level
# or slower): that width keeps Triton's.
TF32X3_BY_INTEGERS = "tf32x3_by_integers"
TF32X3_BY_INTEGERS_WIDTHS = frozenset({128, 256})


def dot_precision(dtype: str, block_d: int, float32_precision: str) -> str:
    """The kernels' DOT_PRECISION constexpr (core.scores.dot) for inputs of `dtype` and head
    block block_d: 16-bit dots ignore it ("tf32"); float32's as the caller chose (a tl.dot
    input precision, core.plan.FLOAT32_PRECISIONS), or TF32X3_BY_INTEGERS for "tf32x3" at the
    widths it was measured faster. Triton's interpreter multiplies float32 in full whatever the
    precision and takes no "bf16x3": "ieee" there, and no integer split (it would only slow it)."""
    if dtype != "float32":
        return "tf32"
    if runtime.INTERPRETER:
        return "ieee" if float32_precision == "bf16x3" else float32_precision
    if float32_precision == "tf32x3" and tile_width(block_d, 4) in TF32X3_BY_INTEGERS_WIDTHS:
        return TF32X3_BY_INTEGERS
    return float32_precision


# Dropout's draw (scores.dropout_kept) takes shared memory where its numbers must move between
# threads: in the D = 256 backward kernels the tuned tiles, near the H200's 227 KiB, then ran out
# (dK and dQ asked 228 KiB offline; before the draw followed the MMA layout the D = 128 forward at
# 8k keys asked 240: OutOfResources on the H200, 2026-12-05). They pipeline one stage less. The
# forward's draw moves nothing (offline, Triton 3.6: the D = 128 forward at 16k keys asks 224 KiB
# on its tuned three stages) and keeps its tiles. D = 128's dQ keeps its three stages (160 KiB
# offline, no spill; the cut was from D = 128 until s68): ab.py on an H100 (2026-12-05, dense
# causal N = 16k, H = 16, dropout 0.1, with a control): backward 261.2 -> 280.7 TFLOP/s (+7.4%,
# spread 0.2%); its dK/dV has its own tile (DROPOUT_DKDV_TILES).
DROPOUT_STAGES_FROM_WIDTH = 256
# With dropout, the D = 128 dK/dV tile of 64 query rows spilled (offline, Triton 3.6: 168 / 176
# bytes non-causal / causal); 32 rows on three stages spill 8 and fit in 113 KiB. ab.py on an
# H100 (2026-12-05, s67, dense causal N = 16k, H = 16, dropout 0.1): backward +12.2% (233.2 ->
# 261.7 TFLOP/s, spread 0.1%); 32 x 128 on 2 stages +9.7%, 32 x 64 on 3 -28%, 64 x 64 on 2 -23%.
DROPOUT_DKDV_TILES: dict = {
    128: KernelTiles(32, 128, 8, 3),
}

# Calls of at most DECODE_ROWS query rows (a decode step: one query, or a GQA group's packed
# heads) against many keys, where the long-sequence tiles of 64-128 rows compute mostly padding.
# bench_decode.py on an H100 (2026-12-05, s68; Hq 32 / Hkv 8, D = 128, bf16, 2 rounds, beside the
# split keys of gluon_forward_tile): B = 1 with 16k keys 80.8 -> 45.8 us (FA2 48.4), with 4k
# 121.8 -> 44.1 us; B = 8 at 4k 122.1 -> 107.4, at 16k 199.3 -> 194.0; B = 32 level.
# Its three stages of 64-key blocks fit in shared memory for 16-bit inputs to D = 256 and float32
# to D = 128; wider float32 calls (FLOAT32_WIDE_TILES) asked 276 KiB and keep their own tile.
DECODE_ROWS = 16
DECODE_FORWARD_TILE = KernelTiles(16, 64, 4, 3)
# A paged step takes the same tile: the forward loads each key block's page a step ahead
# (forward.py, PAGE_AHEAD). Loaded in the step, the table entry took a pipeline stage of its own
# and K and V lost their double buffers (s71 gave paged steps two more stages for it: NOTES v0.64).


class CallGrid(NamedTuple):
    """A call's (batch, head) pairs and longest sequence on each side: its kernels' grids, for
    any tiles."""

    query_heads: int  # batch * q heads
    longest_q: int
    key_heads: int  # batch * kv heads
    longest_kv: int

    def programs(self, kernel: str, tiles: KernelTiles) -> int:
        """Programs of `kernel` ("forward", "dkdv" or "dq") on `tiles`, one per block of rows."""
        if kernel == "dkdv":
            return self.key_heads * -(-self.longest_kv // tiles.block_n)
        return self.query_heads * -(-self.longest_q // tiles.block_m)


def tile_width(block_d: int, itemsize: int) -> int:
    """The width the tile tables are keyed by: the head block (at least 64) of a 16-bit call, and
    twice it for float32, whose tiles of width D take the shared memory of 16-bit ones of 2D."""
    return max(block_d, 64) * itemsize // 2


def tile_config(
    block_d: int, itemsize: int, causal: bool, longest: int, map_blocks: Optional[tuple], window: bool = False,
    dropout: bool = False, decode: bool = False, float32_precision: str = "tf32x3",
    grid: Optional[CallGrid] = None,
) -> TileConfig:
    """Tiles of one call; longest: the longest sequence (queries or keys) the grid covers;
    window: a sliding window's left side bounds the keys; dropout: see DROPOUT_STAGES_FROM_WIDTH;
    decode: at most DECODE_ROWS query rows (see DECODE_FORWARD_TILE); float32_precision: float32
    calls' dots (see FLOAT32_PRECISION_TILES); grid: the call's heads and longest sequences, for
    FLOAT32_FEW_PROGRAMS_TILES (None: not known, as if large)."""
    if runtime.INTERPRETER:
        # The interpreter runs tiles as NumPy arrays: small tiles, launch options do not matter.
        tiles = TileConfig(*(KernelTiles(16, 16, 1, 1),) * 3)
    else:
        # float32 has its own table by tile_width; the short, window and dropout tiles are 16-bit tunings.
        width = tile_width(block_d, itemsize)
        if itemsize == 2:
            tiles = TUNED_TILES[(width, causal)]
            short = SHORT_FORWARD_TILES.get((width, causal, short_bucket(longest)))
            if short is not None:
                tiles = dataclasses.replace(tiles, forward=short)
            window_dkdv = WINDOW_DKDV_TILES.get(width) if window and map_blocks is None else None
            if window_dkdv is not None:
                tiles = dataclasses.replace(tiles, dkdv=window_dkdv)
            if dropout and width >= DROPOUT_STAGES_FROM_WIDTH:
                tiles = dataclasses.replace(tiles, **{kind: dataclasses.replace(t, num_stages=max(t.num_stages - 1, 1))
                                                      for kind, t in (("dkdv", tiles.dkdv), ("dq", tiles.dq))})
            dropout_dkdv = DROPOUT_DKDV_TILES.get(width) if dropout else None
            if dropout_dkdv is not None:
                tiles = dataclasses.replace(tiles, dkdv=dropout_dkdv)
        else:
            tiles = FLOAT32_TILES[width]
            tiles = dataclasses.replace(tiles, **FLOAT32_PRECISION_TILES.get(float32_precision, {}).get(width, {}))
            if causal and grid is not None:
                few = FLOAT32_FEW_PROGRAMS_TILES.get(float32_precision, {}).get(width, {})
                small = FEW_PROGRAMS_WAVES * runtime.multiprocessor_count()
                tiles = dataclasses.replace(tiles, **{kernel: t for kernel, t in few.items()
                                                      if grid.programs(kernel, getattr(tiles, kernel)) < small})
        if decode and width <= 256 and map_blocks is None:
            tiles = dataclasses.replace(tiles, forward=DECODE_FORWARD_TILE)
    if map_blocks is None:
        return tiles
    # A block map's blocks must be whole multiples of each kernel's tiles (all powers of two).
    block_m, block_n = map_blocks
    forward, dkdv, dq = (
        dataclasses.replace(t, block_m=min(t.block_m, block_m), block_n=min(t.block_n, block_n))
        for t in (tiles.forward, tiles.dkdv, tiles.dq)
    )
    return dataclasses.replace(tiles, forward=forward, dkdv=dkdv, dq=dq)


def kv_splits(programs: int, key_blocks: int, multiprocessors: int) -> int:
    """How many programs share each forward tile's keys, each at least KV_SPLIT_MIN_BLOCKS of the
    tile's `key_blocks` blocks and at most KV_SPLIT_MAX of them: 1 where the tiles (`programs` of
    them) nearly fill the GPU's SMs; the most where all the splits fit in one wave; else the
    fewest whose waves fill the SMs within 85% of the best split count's (FlashAttention 2's rule).
    Only counts whose shares differ from one split fewer's count: 10 blocks in 6 shares of 2 leave
    the sixth program empty (split_spans), 5 splits doing the same work."""
    most = min(KV_SPLIT_MAX, key_blocks // KV_SPLIT_MIN_BLOCKS)
    if programs >= 0.8 * multiprocessors or most < 2:
        return 1
    counts = [s for s in range(1, most + 1) if s == 1 or -(-key_blocks // s) != -(-key_blocks // (s - 1))]
    if programs * counts[-1] <= multiprocessors:
        return counts[-1]

    def filled(splits: int) -> float:  # the fraction of the last wave's SMs busy, averaged over the waves
        waves = programs * splits / multiprocessors
        return waves / math.ceil(waves)
    best = max(filled(s) for s in counts)
    return next(s for s in counts if filled(s) >= 0.85 * best)
