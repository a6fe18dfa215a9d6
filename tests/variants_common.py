"""Shared pieces of the variant tests (test_variants.py, test_variants_jax.py), framework-free.

- The @triton.jit mask_mod / score_mod functions under test, each with a NumPy twin that
  evaluates the same formula on broadcast index arrays (b, h, q_idx, kv_idx).
- NumPy visibility masks (window/causal, bottom-right or top-left), the expected block map of a
  visibility pattern, and cu_seqlens bounds clamped exactly as the kernels clamp them.
- Error bounds per dtype for outputs and gradients against a float64 reference.

flashx is imported before triton: without a GPU, flashx switches Triton to its interpreter at
import, which must happen before the first @triton.jit below is decorated.
"""
from __future__ import annotations

import flashx  # noqa: F401, I001  (first: decides compiled vs interpreted before triton loads)

import numpy as np
import triton
import triton.language as tl

from conftest import rel_error

# ----------------------------------------------------------------------------------------------
# Error bounds (relative Frobenius error against the float64 reference; NaN never passes)
# ----------------------------------------------------------------------------------------------

# Outputs: conftest's hard caps. fp32 runs full-precision ("ieee") dots, so errors are ~1e-7.
OUT_TOL = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 2e-2}
# Gradients: P and dS are rounded to the input dtype before their products (as in
# FlashAttention), so half-precision gradients err a few times more than the output.
GRAD_TOL = {"float32": 3e-5, "float16": 3e-3, "bfloat16": 3e-2}
LSE_TOL = 1e-5


def assert_close(got, want, tol: float, what: str) -> None:
    """Relative Frobenius error of `got` (must be finite everywhere) against `want` within `tol`."""
    err = rel_error(got, want)
    assert err <= tol, f"{what}: relative error {err:.3e} > {tol:.1e}"


def assert_lse(got, want, tol: float = LSE_TOL, what: str = "lse") -> None:
    """lse: -inf exactly where the reference is -inf (rows that see no key), close elsewhere."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what} shape {got.shape} != {want.shape}"
    assert not np.isnan(got).any() and not np.isposinf(got).any(), f"{what} has NaN or +inf"
    empty = np.isneginf(want)
    np.testing.assert_array_equal(np.isneginf(got), empty, err_msg=f"{what}: -inf exactly on rows without keys")
    if (~empty).any():
        assert_close(got[~empty], want[~empty], tol, what)


# ----------------------------------------------------------------------------------------------
# Visibility
# ----------------------------------------------------------------------------------------------


def normalize_window(window, causal: bool) -> tuple:
    left, right = (-1, -1) if window is None else window
    if causal:
        right = 0 if right == -1 else min(right, 0)
    return left, right


def window_visible(nq: int, nkv: int, window=None, causal: bool = False, bottom_right: bool = True) -> np.ndarray:
    """[Nq, Nkv] bool: query i sees key j iff i' - left <= j <= i' + right, i' = i + (Nkv - Nq if bottom-right)."""
    left, right = normalize_window(window, causal)
    i = np.arange(nq)[:, None] + ((nkv - nq) if bottom_right else 0)
    j = np.arange(nkv)[None, :]
    visible = np.ones((nq, nkv), bool)
    if left >= 0:
        visible &= j >= i - left
    if right >= 0:
        visible &= j <= i + right
    return visible


def alibi_distance(nq: int, nkv: int, bottom_right: bool = True) -> np.ndarray:
    """[Nq, Nkv] float: |i' - j|, the distance ALiBi multiplies by the slope."""
    i = np.arange(nq)[:, None] + ((nkv - nq) if bottom_right else 0)
    return np.abs(i - np.arange(nkv)[None, :]).astype(np.float64)


def index_grids(b, h, nq: int, nkv: int) -> tuple:
    """Broadcastable (b, h, q_idx, kv_idx) NumPy index arrays for a (B, H, Nq, Nkv) score tensor."""
    b = np.asarray(b).reshape(-1, 1, 1, 1)
    h = np.asarray(h).reshape(1, -1, 1, 1)
    return b, h, np.arange(nq).reshape(1, 1, -1, 1), np.arange(nkv).reshape(1, 1, 1, -1)


# ----------------------------------------------------------------------------------------------
# mask_mods (with NumPy twins)
# ----------------------------------------------------------------------------------------------

DOC_STARTS = (11, 19, 34)  # document boundaries: positions [0, 11), [11, 19), [19, 34), [34, ...)
PREFIX = 12


@triton.jit
def _doc_id(pos):
    return (pos >= 11).to(tl.int32) + (pos >= 19).to(tl.int32) + (pos >= 34).to(tl.int32)


@triton.jit
def document_mask(b, h, q_idx, kv_idx):
    """Attend within one's own document (documents packed at positions DOC_STARTS)."""
    return _doc_id(q_idx) == _doc_id(kv_idx)


def document_mask_np(b, h, q, kv):
    doc = lambda p: sum((p >= s).astype(np.int32) for s in DOC_STARTS)  # noqa: E731
    return np.broadcast_to(doc(q) == doc(kv), np.broadcast_shapes(np.shape(b), np.shape(h), np.shape(q), np.shape(kv)))


@triton.jit
def prefix_lm_mask(b, h, q_idx, kv_idx):
    """Prefix-LM: the first 12 keys are seen by every query, the rest causally (top-left)."""
    return (kv_idx < 12) | (kv_idx <= q_idx)


def prefix_lm_mask_np(b, h, q, kv):
    return np.broadcast_to((kv < PREFIX) | (kv <= q), np.broadcast_shapes(np.shape(b), np.shape(h), np.shape(q), np.shape(kv)))


@triton.jit
def holes_mask(b, h, q_idx, kv_idx):
    """Depends on batch and head; rows with (q_idx + h) % 5 == 1 see no key at all."""
    return ((q_idx + h) % 5 != 1) & ((kv_idx + b) % 3 != 0)


def holes_mask_np(b, h, q, kv):
    return ((q + h) % 5 != 1) & ((kv + b) % 3 != 0)


@triton.jit
def nothing_mask(b, h, q_idx, kv_idx):
    """Masks every pair out."""
    return (q_idx < 0) & (kv_idx < 0)


def nothing_mask_np(b, h, q, kv):
    return np.zeros(np.broadcast_shapes(np.shape(b), np.shape(h), np.shape(q), np.shape(kv)), bool)


@triton.jit
def everything_mask(b, h, q_idx, kv_idx):
    """Keeps every pair."""
    return (q_idx >= 0) | (kv_idx >= 0)


def everything_mask_np(b, h, q, kv):
    return np.ones(np.broadcast_shapes(np.shape(b), np.shape(h), np.shape(q), np.shape(kv)), bool)


MASK_MODS = {
    "document": (document_mask, document_mask_np),
    "prefix_lm": (prefix_lm_mask, prefix_lm_mask_np),
    "holes": (holes_mask, holes_mask_np),
    "nothing": (nothing_mask, nothing_mask_np),
    "everything": (everything_mask, everything_mask_np),
}


# ----------------------------------------------------------------------------------------------
# score_mods (with their derivative in score; frameworks' twins live in the test files)
# ----------------------------------------------------------------------------------------------


@triton.jit
def wobble_score(score, b, h, q_idx, kv_idx):
    """Nonlinear in the score, and dependent on batch, head and both positions."""
    return score + 0.5 * tl.sin(score) + 0.1 * h + 0.05 * b - 0.02 * (q_idx - kv_idx)


@triton.jit
def wobble_score_grad(score, b, h, q_idx, kv_idx):
    return 1.0 + 0.5 * tl.cos(score)


def wobble_score_terms(b, h, q, kv):
    """The score-independent part of wobble_score, as float64 NumPy (b, h, q, kv broadcast)."""
    return 0.1 * h + 0.05 * b - 0.02 * (q - kv).astype(np.float64)


# ----------------------------------------------------------------------------------------------
# Block maps
# ----------------------------------------------------------------------------------------------


def expected_block_map(visible: np.ndarray, block_m: int, block_n: int) -> tuple:
    """(counts [.., nQ, 2], lists [.., nQ] of (partial, full) key-block lists, and the transposes).

    visible: [B, H, Nq, Nkv] bool. A (query block, key block) pair is full when every key slot
    of the block exists and every in-range query row sees all of them; partial when some pair
    is visible; else empty (and listed nowhere).
    """
    bsz, heads, nq, nkv = visible.shape
    nqb, nkb = -(-nq // block_m), -(-nkv // block_n)
    state = np.zeros((bsz, heads, nqb, nkb), np.int8)
    for qb in range(nqb):
        rows = slice(qb * block_m, min((qb + 1) * block_m, nq))
        n_rows = rows.stop - rows.start
        for kb in range(nkb):
            cols = slice(kb * block_n, min((kb + 1) * block_n, nkv))
            seen = visible[:, :, rows, cols].sum(axis=(2, 3))
            full = seen == n_rows * block_n
            state[:, :, qb, kb] = np.where(full, 2, np.where(seen > 0, 1, 0))
    return state


def check_block_map(counts, indices, t_counts, t_indices, state: np.ndarray) -> None:
    """counts/indices (per query block) and t_counts/t_indices (per key block) agree with `state`."""
    counts, indices, t_counts, t_indices = (np.asarray(a) for a in (counts, indices, t_counts, t_indices))
    for kind, slot in ((1, 0), (2, 1)):
        want = (state == kind).sum(-1)
        np.testing.assert_array_equal(counts[..., slot], want, err_msg=f"counts[..., {slot}]")
        np.testing.assert_array_equal(t_counts[..., slot], (state == kind).sum(-2), err_msg=f"t_counts[..., {slot}]")
        for idx in np.ndindex(*state.shape[:3]):
            listed = indices[idx][slot][: want[idx]]
            np.testing.assert_array_equal(listed, np.flatnonzero(state[idx] == kind), err_msg=f"indices{idx}[{slot}]")
        for b, h, kb in np.ndindex(*state.shape[:2], state.shape[3]):
            n = (state[b, h, :, kb] == kind).sum()
            np.testing.assert_array_equal(t_indices[b, h, kb, slot, :n], np.flatnonzero(state[b, h, :, kb] == kind),
                                          err_msg=f"t_indices[{b}, {h}, {kb}][{slot}]")


# ----------------------------------------------------------------------------------------------
# Varlen
# ----------------------------------------------------------------------------------------------


def clamped_bounds(cu_seqlens, total: int) -> list:
    """[(start, end)] per sequence, clamped as the kernels clamp cu_seqlens (forward.sequence_bounds):
    start = clip(cu[b], 0, total), end = clip(cu[b + 1], start, total)."""
    cu = [int(c) for c in cu_seqlens]
    bounds = []
    for b in range(len(cu) - 1):
        start = min(max(cu[b], 0), total)
        end = min(max(cu[b + 1], start), total)
        bounds.append((start, end))
    return bounds


# ----------------------------------------------------------------------------------------------
# GPU: windows and block maps through the Gluon forward (both frontends' tests)
# ----------------------------------------------------------------------------------------------

# (id, (B, Nq, Nkv, Hq, Hkv, D, Dv), Variant's fields, dtype): the head dims and kinds to which
# tuning.GLUON_MASKED_TMA_ROUTE gives the Gluon forward on Hopper (windows and block maps at D = 64,
# 128 and 256; D = 256 walks each 128-key map block in two 64-key steps).
# Ragged lengths, GQA/MQA, rows without keys (bottom-right causal with Nq > Nkv, "holes"), a
# window without a right side, a map with the window folded in and one that depends on batch and head.
GLUON_MASKED_CASES = (
    ("gqa-window-200", (2, 1000, 1000, 8, 2, 128, 128), dict(window=(200, 0)), "bfloat16"),
    ("mqa-q700-kv1300-window-333", (1, 700, 1300, 4, 1, 128, 128), dict(window=(333, 0)), "bfloat16"),
    ("q1000-kv600-window-100-rows-without-keys-bhnd", (1, 1000, 600, 4, 2, 128, 128),
     dict(window=(100, 0), layout="bhnd"), "float16"),
    ("q900-kv1100-window-150-left-only", (1, 900, 1100, 4, 2, 128, 128), dict(window=(150, -1)), "bfloat16"),
    ("gqa-q777-kv1200-documents-causal", (2, 777, 1200, 4, 2, 128, 128), dict(mask="document", causal=True),
     "bfloat16"),
    ("documents-window-400", (1, 1000, 1000, 4, 4, 128, 128), dict(mask="document", window=(400, 0)), "bfloat16"),
    ("holes-rows-without-keys", (2, 900, 900, 4, 4, 128, 128), dict(mask="holes"), "bfloat16"),
    ("d64-gqa-window-200", (2, 1000, 1000, 8, 2, 64, 64), dict(window=(200, 0)), "bfloat16"),
    ("d64-q1000-kv600-window-100-rows-without-keys-bhnd", (1, 1000, 600, 4, 2, 64, 64),
     dict(window=(100, 0), layout="bhnd"), "float16"),
    ("d64-q900-kv1100-window-150-left-only", (1, 900, 1100, 4, 2, 64, 64), dict(window=(150, -1)), "bfloat16"),
    ("d64-documents-causal", (2, 900, 900, 4, 4, 64, 64), dict(mask="document", causal=True), "bfloat16"),
    ("d256-gqa-q800-kv1000-window-200", (1, 800, 1000, 4, 2, 256, 256), dict(window=(200, 0)), "bfloat16"),
    ("d256-documents-causal-fp16", (1, 1000, 1000, 4, 4, 256, 256), dict(mask="document", causal=True), "float16"),
    ("d256-holes", (1, 700, 700, 2, 2, 256, 256), dict(mask="holes"), "bfloat16"),
)
