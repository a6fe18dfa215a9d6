"""Per-sequence lengths (seqused_q / seqused_k) and paged KV caches (block_table), in both frontends.

What inference code calls: a batch whose rows and keys are padded to one length, each sequence
using its own prefix (seqused_*); and a decode or chunked-prefill step over a paged cache, whose
pages a block table lists per sequence (shared prefixes share pages). Every result is compared
with a float64 NumPy reference on the gathered, cut sequences; paged calls also with flashx's
own dense call on the gathered cache, which runs the same kernel and must agree bit for bit.
"""
from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

import flashx  # noqa: F401, I001  (first: decides compiled vs interpreted before triton loads)
from conftest import INTERPRETED
from variants_common import GRAD_TOL, OUT_TOL, assert_close, assert_lse, window_visible

torch = pytest.importorskip("torch")
import flashx.torch  # noqa: E402

DEVICE = "cpu" if INTERPRETED else "cuda"
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


# ----------------------------------------------------------------------------------------------
# The float64 reference: each sequence cut to its lengths, gradients by the softmax's formulas
# ----------------------------------------------------------------------------------------------


def reference(q, k, v, dout=None, *, used_q=None, used_k=None, causal=False, window=None, softcap=None,
              slopes=None, scale=None):
    """q (B, Nq, Hq, D), k (B, Nkv, Hkv, D), v (B, Nkv, Hkv, Dv), float64 NumPy. Batch b's first
    used_q[b] rows attend to its first used_k[b] keys (causal and windows aligned bottom-right on
    those lengths); padding rows give 0 and lse -inf, padding keys no gradient. Returns out, lse
    (B, Hq, Nq) and, given dout, (dq, dk, dv)."""
    b_, nq, hq, d = q.shape
    nkv, hkv, dv_ = k.shape[1], k.shape[2], v.shape[3]
    group = hq // hkv
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    out = np.zeros((b_, nq, hq, dv_))
    lse = np.full((b_, hq, nq), -np.inf)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for b in range(b_):
        m = nq if used_q is None else int(used_q[b])
        n = nkv if used_k is None else int(used_k[b])
        visible = window_visible(m, n, window, causal)
        i = np.arange(m)[:, None] + n - m
        for h in range(hq):
            qh, kh, vh = q[b, :m, h], k[b, :n, h // group], v[b, :n, h // group]
            raw = scale * qh @ kh.T
            tanh = np.tanh(raw / softcap) if softcap else None
            s = softcap * tanh if softcap else raw
            if slopes is not None:
                s = s - slopes[h] * np.abs(i - np.arange(n)[None, :])
            s = np.where(visible, s, -np.inf)
            row_max = s.max(axis=1, initial=-np.inf, keepdims=True)
            seen = np.isfinite(row_max)
            p = np.where(seen, np.exp(s - np.where(seen, row_max, 0.0)), 0.0)
            total = p.sum(axis=1, keepdims=True)
            p = np.divide(p, total, out=np.zeros_like(p), where=total > 0)
            out[b, :m, h] = p @ vh
            lse[b, h, :m] = np.where(seen[:, 0], (row_max + np.log(np.where(total > 0, total, 1.0)))[:, 0], -np.inf)
            if dout is not None:
                do = dout[b, :m, h]
                dv[b, :n, h // group] += p.T @ do
                dp = do @ vh.T
                ds = p * (dp - (do * out[b, :m, h]).sum(axis=1, keepdims=True))
                if softcap:
                    ds = ds * (1.0 - tanh ** 2)
                dq[b, :m, h] = scale * ds @ kh
                dk[b, :n, h // group] += scale * ds.T @ qh
    return (out, lse) if dout is None else (out, lse, (dq, dk, dv))


def gathered(cache: np.ndarray, table: np.ndarray) -> np.ndarray:
    """(B, pages_per_seq * page_size, H, ·): each sequence's pages, in its table's order."""
    pages = cache[table]  # (B, pages_per_seq, page_size, H, ·)
    return pages.reshape(table.shape[0], -1, *cache.shape[2:])


def random_lengths(rng, batch: int, full: int) -> np.ndarray:
    """int32 lengths in [0, full], the extremes included once the batch has room for them."""
    lengths = rng.integers(1, full + 1, size=batch)
    lengths[0] = full
    if batch > 2:
        lengths[-1] = 0
    return lengths.astype(np.int32)


def np64(t) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


def tensor(x: np.ndarray, dtype: str = "float32") -> torch.Tensor:
    if x.dtype.kind in "iu":
        return torch.from_numpy(x).to(DEVICE)
    return torch.from_numpy(x).to(DEVICE, TORCH_DTYPES[dtype])


# ----------------------------------------------------------------------------------------------
# seqused_q / seqused_k on a padded batch (torch), forward and backward
# ----------------------------------------------------------------------------------------------

SEQUSED_CASES = [
    pytest.param(dict(causal=True), "float32", id="causal-fp32"),
    pytest.param(dict(window=(5, 2)), "float32", id="window-fp32"),
    pytest.param(dict(causal=True, softcap=3.0), "bfloat16", id="causal-softcap-bf16"),
    pytest.param(dict(slopes=True), "float16", id="alibi-fp16"),
    pytest.param(dict(), "float32", id="plain-fp32"),
]


@pytest.mark.parametrize("opts, dtype", SEQUSED_CASES)
@pytest.mark.parametrize("layout", ["bnhd", "bhnd"])
def test_seqused_torch(rng, opts, dtype, layout):
    """Padded batch (B=4, Nq=13, Nkv=37, GQA 6/2, D=24, Dv=40): out, lse, dq, dk, dv match the
    float64 reference on each sequence cut to its lengths (padding: out 0, lse -inf, no gradient)."""
    b, nq, nkv, hq, hkv, d, dv = 4, 13, 37, 6, 2, 24, 40
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((b, nq, hq, d), (b, nkv, hkv, d), (b, nkv, hkv, dv)))
    used_q, used_k = random_lengths(rng, b, nq), random_lengths(rng, b, nkv)
    used_q[1], used_k[1] = 11, 4  # more rows than keys: causal leaves the first rows without a key
    slopes = rng.uniform(0.05, 0.5, hq).astype(np.float32) if opts.get("slopes") else None
    kwargs = {n: x for n, x in opts.items() if n != "slopes"}

    def arranged(x):  # bnhd <-> the layout under test (a swap of dims 1 and 2 either way)
        return x.transpose(1, 2) if layout == "bhnd" else x

    tq, tk, tv = (arranged(tensor(x, dtype)).requires_grad_() for x in (q, k, v))
    out, lse = flashx.torch.attention(
        tq, tk, tv, layout=layout, seqused_q=tensor(used_q), seqused_k=tensor(used_k), return_lse=True,
        alibi_slopes=None if slopes is None else tensor(slopes), **kwargs)
    dout = rng.standard_normal((b, nq, hq, dv)).astype(np.float32)
    out.backward(arranged(tensor(dout, dtype)))
    q64, k64, v64 = (np64(arranged(x)) for x in (tq, tk, tv))  # the inputs as the kernel reads them
    want_out, want_lse, want_grads = reference(q64, k64, v64, np64(tensor(dout, dtype)), used_q=used_q,
                                               used_k=used_k, slopes=slopes, **kwargs)
    got_out = np64(arranged(out))
    assert_close(got_out, want_out, OUT_TOL[dtype], "out")
    assert_lse(np64(lse), want_lse)
    for name, x, want in zip(("dq", "dk", "dv"), (tq, tk, tv), want_grads):
        got = np64(arranged(x.grad))
        assert_close(got, want, GRAD_TOL[dtype], name)
    for bi in range(b):  # padding exactly 0, not merely small
        assert not got_out[bi, used_q[bi]:].any(), f"out past seqused_q[{bi}] is not 0"
        for name, x in (("dk", tk), ("dv", tv)):
            grad = np64(arranged(x.grad))
            assert not grad[bi, used_k[bi]:].any(), f"{name} past seqused_k[{bi}] is not 0"


def test_seqused_k_with_varlen(rng):
    """Varlen: seqused_k cuts each packed sequence's keys (the rest of its rows are padding)."""
    cu_q, cu_k = np.array([0, 5, 12, 20], np.int32), np.array([0, 9, 9, 30], np.int32)
    used_k = np.array([6, 0, 17], np.int32)
    hq, hkv, d = 4, 2, 16
    q = rng.standard_normal((20, hq, d)).astype(np.float32)
    k, v = (rng.standard_normal((30, hkv, d)).astype(np.float32) for _ in range(2))
    out, lse = flashx.torch.attention(
        tensor(q), tensor(k), tensor(v), cu_seqlens_q=tensor(cu_q), cu_seqlens_k=tensor(cu_k), max_seqlen_q=8,
        max_seqlen_k=21, seqused_k=tensor(used_k), causal=True, return_lse=True)
    for s in range(3):
        rows, keys = slice(cu_q[s], cu_q[s + 1]), slice(cu_k[s], cu_k[s] + used_k[s])
        want_out, want_lse = reference(q[None, rows].astype(np.float64), k[None, keys].astype(np.float64),
                                       v[None, keys].astype(np.float64), causal=True)
        assert_close(np64(out[rows])[None], want_out, OUT_TOL["float32"], f"out of sequence {s}")
        assert_lse(np64(lse[:, rows])[None], want_lse, what=f"lse of sequence {s}")


# ----------------------------------------------------------------------------------------------
# Paged KV caches (torch)
# ----------------------------------------------------------------------------------------------


def paged_inputs(rng, *, batch, nq, hq, hkv, d, page_size, pages_per_seq, num_pages, dtype, layout="bnhd"):
    """q, a paged k/v cache and a block table whose sequences share some pages (a common prefix),
    plus each sequence's cache length. Cache: (pages, page_size, Hkv, D) ("bhnd": heads second)."""
    q = rng.standard_normal((batch, nq, hq, d)).astype(np.float32)
    k_cache, v_cache = (rng.standard_normal((num_pages, page_size, hkv, d)).astype(np.float32) for _ in range(2))
    table = np.stack([rng.permutation(num_pages)[:pages_per_seq] for _ in range(batch)]).astype(np.int32)
    table[1:, 0] = table[0, 0]  # a prefix page shared by every sequence
    used_k = random_lengths(rng, batch, pages_per_seq * page_size)
    used_k[-1] = max(used_k[-1], nq)
    return q, k_cache, v_cache, table, used_k


def arrange(x: np.ndarray, layout: str) -> np.ndarray:
    return np.ascontiguousarray(x.swapaxes(1, 2)) if layout == "bhnd" else x


PAGED_CASES = [
    # batch, nq, hq, hkv, d, page_size, pages_per_seq, num_pages, options
    pytest.param(3, 1, 4, 1, 32, 16, 4, 13, dict(), id="decode-mqa-page16"),
    pytest.param(3, 6, 4, 2, 24, 16, 3, 9, dict(causal=True), id="chunk-causal-gqa-page16"),
    pytest.param(2, 3, 2, 2, 16, 5, 7, 17, dict(causal=True), id="page5"),
    pytest.param(2, 4, 4, 2, 40, 64, 2, 5, dict(causal=True, window=(30, -1), softcap=4.0), id="page64-window-softcap"),
]


@pytest.mark.parametrize("batch, nq, hq, hkv, d, page_size, pages_per_seq, num_pages, opts", PAGED_CASES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("layout", ["bnhd", "bhnd"])
def test_paged_torch(rng, batch, nq, hq, hkv, d, page_size, pages_per_seq, num_pages, opts, dtype, layout):
    """A decode / chunked-prefill step over a paged cache matches the float64 reference on the
    gathered sequences, and flashx's dense call on the gathered cache bit for bit."""
    q, k_cache, v_cache, table, used_k = paged_inputs(
        rng, batch=batch, nq=nq, hq=hq, hkv=hkv, d=d, page_size=page_size, pages_per_seq=pages_per_seq,
        num_pages=num_pages, dtype=dtype)
    tq, tk, tv = (tensor(arrange(x, layout), dtype) for x in (q, k_cache, v_cache))
    out, lse = flashx.torch.attention(tq, tk, tv, layout=layout, block_table=tensor(table), seqused_k=tensor(used_k),
                                      return_lse=True, **opts)
    q64, k64, v64 = (np64(x.transpose(1, 2)) if layout == "bhnd" else np64(x) for x in (tq, tk, tv))
    want_out, want_lse = reference(q64, gathered(k64, table), gathered(v64, table), used_k=used_k, **opts)
    assert_close(np64(out.transpose(1, 2) if layout == "bhnd" else out), want_out, OUT_TOL[dtype], "out")
    assert_lse(np64(lse), want_lse)
    dense_k, dense_v = (tensor(arrange(gathered(np64(x.transpose(1, 2)) if layout == "bhnd" else np64(x), table), layout),
                               dtype) for x in (tk, tv))
    dense_out, dense_lse = flashx.torch.attention(tq, dense_k, dense_v, layout=layout, seqused_k=tensor(used_k),
                                                  return_lse=True, **opts)
    assert torch.equal(out, dense_out) and torch.equal(lse, dense_lse), "paged and dense calls differ"


def test_paged_with_alibi(rng):
    """ALiBi's distances are of logical positions (|i' - j| within the sequence), not of cache rows."""
    q, k_cache, v_cache, table, used_k = paged_inputs(rng, batch=2, nq=3, hq=4, hkv=2, d=16, page_size=8,
                                                      pages_per_seq=4, num_pages=9, dtype="float32")
    slopes = rng.uniform(0.05, 0.5, 4).astype(np.float32)
    out = flashx.torch.attention(tensor(q), tensor(k_cache), tensor(v_cache), block_table=tensor(table),
                                 seqused_k=tensor(used_k), causal=True, alibi_slopes=tensor(slopes))
    want, _ = reference(q.astype(np.float64), gathered(k_cache, table).astype(np.float64),
                        gathered(v_cache, table).astype(np.float64), used_k=used_k, causal=True, slopes=slopes)
    assert_close(np64(out), want, OUT_TOL["float32"], "out")


def test_paged_full_table_without_seqused(rng):
    """Without seqused_k every sequence is all its pages' rows (Nkv = pages_per_seq * page_size)."""
    q, k_cache, v_cache, table, _ = paged_inputs(rng, batch=2, nq=3, hq=2, hkv=1, d=16, page_size=8,
                                                 pages_per_seq=3, num_pages=6, dtype="float32")
    out = flashx.torch.attention(tensor(q), tensor(k_cache), tensor(v_cache), block_table=tensor(table), causal=True)
    want, _ = reference(q.astype(np.float64), gathered(k_cache, table).astype(np.float64),
                        gathered(v_cache, table).astype(np.float64), causal=True)
    assert_close(np64(out), want, OUT_TOL["float32"], "out")


def test_paged_out_of_range_pages_are_clamped(rng):
    """Page numbers outside [0, pages) read the first or last page, never outside the cache."""
    q, k_cache, v_cache, table, used_k = paged_inputs(rng, batch=2, nq=2, hq=2, hkv=2, d=16, page_size=8,
                                                      pages_per_seq=3, num_pages=5, dtype="float32")
    bad = table.copy()
    bad[0, 1], bad[1, 2] = -7, 1000
    clamped = np.clip(bad, 0, 4)
    args = tensor(q), tensor(k_cache), tensor(v_cache)
    out = flashx.torch.attention(*args, block_table=tensor(bad), seqused_k=tensor(used_k))
    want, _ = reference(q.astype(np.float64), gathered(k_cache, clamped).astype(np.float64),
                        gathered(v_cache, clamped).astype(np.float64), used_k=used_k)
    assert_close(np64(out), want, OUT_TOL["float32"], "out")


@pytest.mark.parametrize("paged", [False, True], ids=["dense", "paged"])
def test_out_of_range_lengths_are_clamped(rng, paged):
    """seqused_q / seqused_k are not checked on the host: the kernel clamps them into [0, Nq] /
    [0, Nkv], so a negative length is 0 (out 0, lse -inf) and a longer one the whole cache."""
    b, nq, hq, hkv, d = 3, 5, 4, 2, 16
    if paged:
        q, k_cache, v_cache, table, _ = paged_inputs(rng, batch=b, nq=nq, hq=hq, hkv=hkv, d=d, page_size=8,
                                                     pages_per_seq=3, num_pages=7, dtype="float32")
        k, v = gathered(k_cache, table), gathered(v_cache, table)
        args, extra = (tensor(q), tensor(k_cache), tensor(v_cache)), dict(block_table=tensor(table))
    else:
        q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((b, nq, hq, d), (b, 21, hkv, d), (b, 21, hkv, d)))
        args, extra = (tensor(q), tensor(k), tensor(v)), {}
    nkv = k.shape[1]
    used_q, used_k = np.array([nq, -3, 4], np.int32), np.array([-1, nkv + 9, 2**31 - 1], np.int32)
    out, lse = flashx.torch.attention(*args, seqused_q=tensor(used_q), seqused_k=tensor(used_k), causal=True,
                                      return_lse=True, **extra)
    want, want_lse = reference(*(x.astype(np.float64) for x in (q, k, v)), used_q=np.clip(used_q, 0, nq),
                               used_k=np.clip(used_k, 0, nkv), causal=True)
    assert_close(np64(out), want, OUT_TOL["float32"], "out")
    assert_lse(np64(lse), want_lse)
    assert (np64(out)[:2] == 0).all()  # batch 0 sees no key, batch 1 has no query row


def test_paged_with_mask_mod_and_vmap(rng):
    """A mask_mod sees logical key positions (its block map built on them): the paged call equals
    the dense call on the gathered cache bit for bit. Under torch.func.vmap over q (the cache
    shared), each slice matches the float64 reference."""
    from torch.func import vmap
    from variants_common import document_mask

    q, k_cache, v_cache, table, used_k = paged_inputs(rng, batch=2, nq=5, hq=2, hkv=1, d=16, page_size=8,
                                                      pages_per_seq=4, num_pages=9, dtype="float32")
    tq, tk, tv, tt, tu = (tensor(x) for x in (q, k_cache, v_cache, table, used_k))
    paged_out = flashx.torch.attention(tq, tk, tv, block_table=tt, seqused_k=tu, mask_mod=document_mask)
    dense_out = flashx.torch.attention(tq, tensor(gathered(k_cache, table)), tensor(gathered(v_cache, table)),
                                       seqused_k=tu, mask_mod=document_mask)
    assert torch.equal(paged_out, dense_out)
    scales = (1.0, -0.5)
    mapped = vmap(lambda q: flashx.torch.attention(q, tk, tv, block_table=tt, seqused_k=tu, causal=True))(
        torch.stack([tq * s for s in scales]))
    for i, s in enumerate(scales):
        want, _ = reference(q.astype(np.float64) * s, gathered(k_cache, table).astype(np.float64),
                            gathered(v_cache, table).astype(np.float64), used_k=used_k, causal=True)
        assert_close(np64(mapped[i]), want, OUT_TOL["float32"], f"vmapped slice {i}")


def test_paged_backward_raises(rng):
    q, k_cache, v_cache, table, used_k = paged_inputs(rng, batch=2, nq=2, hq=2, hkv=1, d=16, page_size=8,
                                                      pages_per_seq=2, num_pages=4, dtype="float32")
    tq = tensor(q).requires_grad_()
    out = flashx.torch.attention(tq, tensor(k_cache), tensor(v_cache), block_table=tensor(table))
    with pytest.raises(NotImplementedError, match="block_table"):
        out.sum().backward()


def test_paged_under_torch_compile(rng):
    """A compiled decode step (fullgraph) gives the eager call's result bit for bit."""
    q, k_cache, v_cache, table, used_k = paged_inputs(rng, batch=2, nq=1, hq=4, hkv=2, d=16, page_size=16,
                                                      pages_per_seq=2, num_pages=5, dtype="float32")
    args = tuple(tensor(x) for x in (q, k_cache, v_cache, table, used_k))

    def step(q, k, v, table, used):
        return flashx.torch.attention(q, k, v, block_table=table, seqused_k=used, causal=True)

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True)
    assert torch.equal(compiled(*args), step(*args))


@pytest.mark.gpu
def test_paged_decode_reduce_overhead_gpu(rng, monkeypatch):
    """torch.compile(mode="reduce-overhead"): Inductor records the compiled decode step (a paged,
    split forward and its combine) in CUDA graphs and replays them; three steps on fresh inputs
    against float64 (a graph that baked in the first inputs would repeat its result). Run as a
    process's first flashx call would be: nothing kept from earlier calls (the SM count is asked
    in the trace; the placeholder of absent inputs is made in the graph's pool, where a kept
    tensor failed cudagraph trees' check, H100, 2026-12-05)."""
    from flashx.core import plan, runtime

    monkeypatch.setattr(runtime, "_multiprocessors", None)
    importlib.import_module("flashx.torch.attention")._placeholder_on.cache_clear()
    plan.clear_plan_cache()

    def step(q, k, v, table, used):
        return flashx.torch.attention(q, k, v, block_table=table, seqused_k=used, causal=True)

    torch._dynamo.reset()
    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    for call in range(3):
        q, k_cache, v_cache, table, used_k = paged_inputs(
            rng, batch=2, nq=1, hq=32, hkv=8, d=128, page_size=64, pages_per_seq=32, num_pages=64, dtype="bfloat16")
        args = [tensor(x, "bfloat16") for x in (q, k_cache, v_cache)] + [tensor(table), tensor(used_k)]
        out = compiled(*args).clone()  # the graph's output buffer is reused by the next replay
        want_out, _ = reference(np64(args[0]), gathered(np64(args[1]), table), gathered(np64(args[2]), table),
                                used_k=used_k, causal=True)
        assert_close(np64(out), want_out, OUT_TOL["bfloat16"], f"out of call {call}")


def _bad_paged(**change):
    def make(rng):
        q, k_cache, v_cache, table, used_k = paged_inputs(rng, batch=2, nq=2, hq=2, hkv=1, d=16, page_size=8,
                                                          pages_per_seq=2, num_pages=4, dtype="float32")
        args = dict(q=tensor(q), k=tensor(k_cache), v=tensor(v_cache), block_table=tensor(table),
                    seqused_k=tensor(used_k))
        for name, value in change.items():
            args[name] = value(args) if callable(value) else value
        return args
    return make


BAD_PAGED = [
    pytest.param(_bad_paged(block_table=lambda a: a["block_table"].float()), TypeError, r"block_table.*int32", id="float-table"),
    pytest.param(_bad_paged(block_table=lambda a: a["block_table"][0]), ValueError, r"block_table must be 2-D", id="1d-table"),
    pytest.param(_bad_paged(block_table=lambda a: a["block_table"][:1]), ValueError, r"block_table.*batch", id="short-table"),
    pytest.param(_bad_paged(v=lambda a: a["v"][:3]), ValueError, r"paged alike", id="v-fewer-pages"),
    pytest.param(_bad_paged(seqused_k=lambda a: a["seqused_k"][:1]), ValueError, r"seqused_k must have shape", id="short-seqused"),
    pytest.param(_bad_paged(seqused_k=lambda a: a["seqused_k"].long()), TypeError, r"seqused_k.*int32", id="int64-seqused"),
    pytest.param(_bad_paged(block_table=lambda a: [[0, 1], [2, 3]]), TypeError, r"block_table must be a torch.Tensor", id="list-table"),
]


@pytest.mark.parametrize("make, error, match", BAD_PAGED)
def test_paged_bad_input_raises(rng, make, error, match):
    args = make(rng)
    with pytest.raises(error, match=match):
        flashx.torch.attention(args.pop("q"), args.pop("k"), args.pop("v"), **args)


def test_paged_with_cu_seqlens_k_raises(rng):
    """A paged cache's sequences are its table's rows: cu_seqlens_k beside block_table is refused."""
    q = tensor(rng.standard_normal((5, 2, 16)).astype(np.float32))
    cache = tensor(rng.standard_normal((4, 8, 2, 16)).astype(np.float32))
    cu = tensor(np.array([0, 5], np.int32))
    with pytest.raises(ValueError, match="cu_seqlens_q alone"):
        flashx.torch.attention(q, cache, cache, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=5,
                               block_table=tensor(np.zeros((1, 2), np.int32)))


@pytest.mark.parametrize("split", [False, True])
def test_paged_with_varlen_queries(rng, monkeypatch, forward_launches, split):
    """A serving step's mixed batch: packed queries (decode rows of one query, prefill chunks of
    several, causal) against each sequence's pages, its key count in seqused_k; split over the
    keys too. Each sequence matches float64 on its gathered keys; a row past every sequence stays 0."""
    from flashx.core import plan

    if split:
        _split_small_calls(monkeypatch)
    plan.clear_plan_cache()
    hq, hkv, d, page = 4, 2, 16, 8
    _, k_cache, v_cache, table, _ = paged_inputs(rng, batch=3, nq=1, hq=hq, hkv=hkv, d=d, page_size=page,
                                                 pages_per_seq=20, num_pages=45, dtype="float32")
    cu_q = np.array([0, 1, 6, 7], np.int32)  # a decode row, a 5-query chunk, a decode row
    used_k = np.array([17, 150, 3], np.int32)
    q = rng.standard_normal((8, hq, d)).astype(np.float32)  # row 7: no sequence
    out, lse = flashx.torch.attention(tensor(q), tensor(k_cache), tensor(v_cache), cu_seqlens_q=tensor(cu_q),
                                      max_seqlen_q=5, block_table=tensor(table), seqused_k=tensor(used_k), causal=True,
                                      return_lse=True)
    plan.clear_plan_cache()
    assert forward_launches == [2 if split else 1]
    keys, values = gathered(k_cache, table).astype(np.float64), gathered(v_cache, table).astype(np.float64)
    for b in range(3):
        rows = slice(cu_q[b], cu_q[b + 1])
        want_out, want_lse = reference(q[None, rows].astype(np.float64), keys[b:b + 1, :used_k[b]],
                                       values[b:b + 1, :used_k[b]], causal=True)
        assert_close(np64(out[rows])[None], want_out, OUT_TOL["float32"], f"out of sequence {b}")
        assert_lse(np64(lse[:, rows])[None], want_lse, what=f"lse of sequence {b}")
    assert not np64(out[7]).any() and not np64(lse[:, 7]).any(), "the row past every sequence is not 0"


@pytest.mark.gpu
@pytest.mark.parametrize("page_size", [16, 256])
def test_paged_decode_gpu(rng, page_size):
    """A realistic bf16 decode step: B=5, Hq=32 over Hkv=8, D=128, caches up to 4k keys."""
    pages_per_seq = 4096 // page_size
    q, k_cache, v_cache, table, used_k = paged_inputs(
        rng, batch=5, nq=1, hq=32, hkv=8, d=128, page_size=page_size, pages_per_seq=pages_per_seq,
        num_pages=5 * pages_per_seq, dtype="bfloat16")
    tq, tk, tv = (tensor(x, "bfloat16") for x in (q, k_cache, v_cache))
    out, lse = flashx.torch.attention(tq, tk, tv, block_table=tensor(table), seqused_k=tensor(used_k), causal=True,
                                      return_lse=True)
    want_out, want_lse = reference(np64(tq), gathered(np64(tk), table), gathered(np64(tv), table), used_k=used_k,
                                   causal=True)
    assert_close(np64(out), want_out, OUT_TOL["bfloat16"], "out")
    assert_lse(np64(lse), want_lse)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("d", [64, 128, 192, 256])
def test_decode_tile_every_head_dim_gpu(rng, dtype, d):
    """Decode-shaped calls (a few query rows) take their own forward tile where it fits in shared
    memory (tuning.DECODE_FORWARD_TILE): one query of 8 heads over 2 kv heads (packed: each kv
    head's 4 query heads as 4 rows of a tile), at B = 1 against 4100 keys, causal, and at B = 3
    against 1000 with softcap, each against float64. Wide float32 calls keep their own tile: the
    decode tile asked 276 KiB of shared memory at float32 D = 192 and 256 (OutOfResources)."""
    for batch, nkv, options in ((1, 4100, dict(causal=True)), (3, 1000, dict(softcap=30.0))):
        q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((batch, 1, 8, d), (batch, nkv, 2, d), (batch, nkv, 2, d)))
        tq, tk, tv = (tensor(x, dtype) for x in (q, k, v))
        out, lse = flashx.torch.attention(tq, tk, tv, return_lse=True, **options)
        want_out, want_lse = reference(np64(tq), np64(tk), np64(tv), **options)
        assert_close(np64(out), want_out, OUT_TOL[dtype], f"out (B = {batch}, {nkv} keys)")
        assert_lse(np64(lse), want_lse, what=f"lse (B = {batch}, {nkv} keys)")


@pytest.mark.gpu
@pytest.mark.parametrize("paged", [False, True], ids=["dense", "paged-256"])
def test_decode_in_cuda_graph_gpu(rng, paged):
    """A decode step captured in a CUDA graph (as serving engines run decode) and replayed on new
    queries, cache contents and lengths copied into the captured buffers: each replay against
    float64. Both steps, the dense one (whole caches, packed GQA) and the paged one (cache
    lengths), take the split tl forward and its combine kernel (B = 2: a few tiles, so the keys
    split). A launch that
    allocated or synchronized on the host inside the capture would fail it; one that baked an
    input's values into the graph would give the first replay's result again."""
    batch, hq, hkv, d, page_size, pages_per_seq = 2, 32, 8, 128, 256, 8
    num_pages = batch * pages_per_seq

    def fresh_inputs():
        q, k_cache, v_cache, table, used_k = paged_inputs(
            rng, batch=batch, nq=1, hq=hq, hkv=hkv, d=d, page_size=page_size, pages_per_seq=pages_per_seq,
            num_pages=num_pages, dtype="bfloat16")
        if not paged:  # the same sequences as a dense cache, each its gathered pages
            k_cache, v_cache = gathered(k_cache, table), gathered(v_cache, table)
        return q, k_cache, v_cache, table, used_k

    first = fresh_inputs()
    static = [tensor(x, "bfloat16") for x in first[:3]] + [tensor(x) for x in first[3:]]

    def step():  # the dense step reads whole caches: with seqused_k it would leave the Gluon route
        q, k, v, table, used = static
        return flashx.torch.attention(q, k, v, block_table=table if paged else None, seqused_k=used if paged else None,
                                      causal=True, return_lse=True)

    step()  # compiles the kernels and fills flashx's plan caches outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = step()
    for replay in range(3):
        inputs = first if replay == 0 else fresh_inputs()
        for buffer, x in zip(static, inputs):
            buffer.copy_(tensor(x, "bfloat16") if x.dtype.kind == "f" else tensor(x))
        graph.replay()
        torch.cuda.synchronize()
        q, k_cache, v_cache, table, used_k = (np64(t) if t.is_floating_point() else t.cpu().numpy() for t in static)
        keys, values = (gathered(x, table) if paged else x for x in (k_cache, v_cache))
        want_out, want_lse = reference(q, keys, values, used_k=used_k if paged else None, causal=True)
        assert_close(np64(out), want_out, OUT_TOL["bfloat16"], f"out of replay {replay}")
        assert_lse(np64(lse), want_lse, what=f"lse of replay {replay}")


# ----------------------------------------------------------------------------------------------
# The JAX frontend
# ----------------------------------------------------------------------------------------------


def test_seqused_and_paged_jax(rng):
    """Inside jax.jit: seqused_q/k's forward and gradients, and a paged chunk's forward, match the
    float64 reference; a paged call's gradient raises."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    import flashx.jax

    b, nq, nkv, hq, hkv, d = 3, 7, 21, 4, 2, 16
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((b, nq, hq, d), (b, nkv, hkv, d), (b, nkv, hkv, d)))
    used_q, used_k = random_lengths(rng, b, nq), random_lengths(rng, b, nkv)
    dout = rng.standard_normal((b, nq, hq, d)).astype(np.float32)

    def loss(q, k, v, used_q, used_k):
        out, lse = flashx.jax.attention(q, k, v, causal=True, seqused_q=used_q, seqused_k=used_k, return_lse=True)
        return (out * dout).sum(), (out, lse)

    grads, (out, lse) = jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))(
        *map(jnp.asarray, (q, k, v, used_q, used_k)))
    want_out, want_lse, want_grads = reference(*(x.astype(np.float64) for x in (q, k, v, dout)), used_q=used_q,
                                               used_k=used_k, causal=True)
    assert_close(out, want_out, OUT_TOL["float32"], "out")
    assert_lse(lse, want_lse)
    for name, got, want in zip(("dq", "dk", "dv"), grads, want_grads):
        assert_close(got, want, GRAD_TOL["float32"], name)

    q, k_cache, v_cache, table, used_k = paged_inputs(rng, batch=3, nq=4, hq=4, hkv=1, d=16, page_size=8,
                                                      pages_per_seq=3, num_pages=7, dtype="float32")
    step = jax.jit(lambda q, k, v, t, u: flashx.jax.attention(q, k, v, block_table=t, seqused_k=u, causal=True,
                                                               return_lse=True))
    out, lse = step(*map(jnp.asarray, (q, k_cache, v_cache, table, used_k)))
    want_out, want_lse = reference(q.astype(np.float64), gathered(k_cache, table).astype(np.float64),
                                   gathered(v_cache, table).astype(np.float64), used_k=used_k, causal=True)
    assert_close(out, want_out, OUT_TOL["float32"], "paged out")
    assert_lse(lse, want_lse, what="paged lse")
    with pytest.raises(NotImplementedError, match="block_table"):
        jax.grad(lambda q: flashx.jax.attention(q, *map(jnp.asarray, (k_cache, v_cache)),
                                                block_table=jnp.asarray(table)).sum())(jnp.asarray(q))


def test_jax_grad_of_numpy_inputs(rng):
    """jax.grad at NumPy arrays (JAX converts them; its rule then sees NumPy-like literals) gives
    the float64 reference's gradient."""
    jax = pytest.importorskip("jax")
    import flashx.jax

    q, k, v = (rng.standard_normal((2, 5, 2, 8)).astype(np.float32) for _ in range(3))
    grads = jax.grad(lambda q, k, v: flashx.jax.attention(q, k, v, causal=True).sum(), argnums=(0, 1, 2))(q, k, v)
    _, _, want = reference(*(x.astype(np.float64) for x in (q, k, v)), np.ones((2, 5, 2, 8)), causal=True)
    for name, got, expected in zip(("dq", "dk", "dv"), grads, want):
        assert_close(got, expected, GRAD_TOL["float32"], name)



# ----------------------------------------------------------------------------------------------
# Split-KV forward (flash-decoding): a few tiles over long caches split their keys
# ----------------------------------------------------------------------------------------------


def test_kv_splits_rule():
    """kv_splits: no split where the tiles nearly fill the SMs or the keys are few; the most that
    fit in one wave; else the fewest splits that fill the waves (32 tiles on 132 SMs: 4 splits,
    128 programs in one wave)."""
    from flashx.core.tuning import KV_SPLIT_MAX, KV_SPLIT_MIN_BLOCKS, kv_splits

    assert kv_splits(programs=132, key_blocks=1000, multiprocessors=132) == 1
    assert kv_splits(programs=106, key_blocks=1000, multiprocessors=132) == 1
    assert kv_splits(programs=32, key_blocks=64, multiprocessors=132) == 4
    assert kv_splits(programs=32, key_blocks=2 * KV_SPLIT_MIN_BLOCKS - 1, multiprocessors=132) == 1
    assert kv_splits(programs=32, key_blocks=3 * KV_SPLIT_MIN_BLOCKS, multiprocessors=132) == 3
    assert kv_splits(programs=1, key_blocks=10**6, multiprocessors=132) == KV_SPLIT_MAX
    assert kv_splits(programs=8, key_blocks=10**6, multiprocessors=132) == KV_SPLIT_MAX  # 128 programs: one wave
    # 50 blocks: 12 or 11 splits take shares of 5, as 10 do (their last programs empty): 10.
    assert kv_splits(programs=1, key_blocks=50, multiprocessors=132) == 10


@pytest.fixture
def forward_launches(monkeypatch) -> list:
    """The returned list gets each forward's number of launches (2 where it splits its keys)."""
    from flashx.core import AttentionPlan

    counts, forward_calls = [], AttentionPlan.forward_calls

    def counted(self, *args, **kwargs):
        calls = forward_calls(self, *args, **kwargs)
        counts.append(len(calls))
        return calls

    monkeypatch.setattr(AttentionPlan, "forward_calls", counted)
    return counts


def _split_small_calls(monkeypatch) -> None:
    """The plan sees a device of 512 SMs, so small calls split their keys (as a decode step on a
    GPU does); on a GPU, whose key blocks are 128 wide (the interpreter's 16), a split may also
    take a single block, or these tests' few hundred keys would not split."""
    from flashx.core import runtime, tuning

    monkeypatch.setattr(runtime, "multiprocessor_count", lambda: 512)
    if not runtime.INTERPRETER:
        monkeypatch.setattr(tuning, "KV_SPLIT_MIN_BLOCKS", 1)


@pytest.fixture
def split_launches(monkeypatch, forward_launches) -> list:
    """forward_launches, with small calls split over their keys (_split_small_calls)."""
    from flashx.core import plan

    _split_small_calls(monkeypatch)
    plan.clear_plan_cache()
    yield forward_launches
    plan.clear_plan_cache()


SPLIT_CASES = [
    # batch, nq, hq, hkv, nkv, options
    pytest.param(2, 1, 4, 1, 300, dict(causal=True), id="decode-mqa"),
    pytest.param(3, 4, 4, 2, 257, dict(causal=True, window=(100, -1), slopes=True), id="window-alibi"),
    pytest.param(2, 6, 2, 2, 190, dict(causal=True, softcap=5.0), id="softcap-seqused"),
]


@pytest.mark.parametrize("batch, nq, hq, hkv, nkv, opts", SPLIT_CASES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_split_keys_torch(rng, split_launches, batch, nq, hq, hkv, nkv, opts, dtype):
    """Split over the keys (two launches), out, lse and the gradients through them match the
    float64 reference; splits that see no key (windows, short caches) merge to nothing."""
    d = 16
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((batch, nq, hq, d), (batch, nkv, hkv, d), (batch, nkv, hkv, d)))
    used_k = random_lengths(rng, batch, nkv) if opts.get("softcap") else None
    slopes = rng.uniform(0.01, 0.1, hq).astype(np.float32) if opts.get("slopes") else None
    kwargs = {n: x for n, x in opts.items() if n != "slopes"}
    tq, tk, tv = (tensor(x, dtype).requires_grad_() for x in (q, k, v))
    out, lse = flashx.torch.attention(tq, tk, tv, return_lse=True, alibi_slopes=None if slopes is None else tensor(slopes),
                                      seqused_k=None if used_k is None else tensor(used_k), **kwargs)
    assert split_launches == [2], "the forward did not split its keys"
    dout = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(tensor(dout, dtype))
    want_out, want_lse, want_grads = reference(np64(tq), np64(tk), np64(tv), np64(tensor(dout, dtype)), used_k=used_k,
                                               slopes=slopes, **kwargs)
    assert_close(np64(out), want_out, OUT_TOL[dtype], "out")
    assert_lse(np64(lse), want_lse)
    for name, x, want in zip(("dq", "dk", "dv"), (tq, tk, tv), want_grads):
        assert_close(np64(x.grad), want, GRAD_TOL[dtype], name)


def test_split_keys_paged_and_varlen_torch(rng, split_launches):
    """A paged decode step and a varlen batch, split over the keys, match the float64 reference."""
    q, k_cache, v_cache, table, used_k = paged_inputs(rng, batch=2, nq=1, hq=4, hkv=2, d=16, page_size=16,
                                                      pages_per_seq=12, num_pages=30, dtype="float32")
    out = flashx.torch.attention(tensor(q), tensor(k_cache), tensor(v_cache), block_table=tensor(table),
                                 seqused_k=tensor(used_k), causal=True)
    want, _ = reference(q.astype(np.float64), gathered(k_cache, table).astype(np.float64),
                        gathered(v_cache, table).astype(np.float64), used_k=used_k, causal=True)
    assert_close(np64(out), want, OUT_TOL["float32"], "paged out")
    cu_q, cu_k = np.array([0, 2, 3, 6], np.int32), np.array([0, 150, 150, 400], np.int32)
    q = rng.standard_normal((7, 4, 16)).astype(np.float32)  # a last row that belongs to no sequence
    k, v = (rng.standard_normal((400, 2, 16)).astype(np.float32) for _ in range(2))
    out, lse = flashx.torch.attention(tensor(q), tensor(k), tensor(v), cu_seqlens_q=tensor(cu_q),
                                      cu_seqlens_k=tensor(cu_k), max_seqlen_q=3, max_seqlen_k=250, causal=True,
                                      return_lse=True)
    assert split_launches == [2, 2]
    for s in range(3):
        rows, keys = slice(cu_q[s], cu_q[s + 1]), slice(cu_k[s], cu_k[s + 1])
        want_out, want_lse = reference(q[None, rows].astype(np.float64), k[None, keys].astype(np.float64),
                                       v[None, keys].astype(np.float64), causal=True)
        assert_close(np64(out[rows])[None], want_out, OUT_TOL["float32"], f"out of sequence {s}")
        assert_lse(np64(lse[:, rows])[None], want_lse, what=f"lse of sequence {s}")
    assert not np64(out[6]).any() and not np64(lse[:, 6]).any(), "the row past every sequence is not 0"


def test_split_keys_jax(rng, split_launches):
    """The JAX frontend's split forward (two launches inside jax.jit) and its gradient."""
    jax = pytest.importorskip("jax")
    import flashx.jax

    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 4, 16), (2, 260, 2, 16), (2, 260, 2, 16)))
    dout = rng.standard_normal((2, 3, 4, 16)).astype(np.float32)

    def loss(q, k, v):
        out, lse = flashx.jax.attention(q, k, v, causal=True, return_lse=True)
        return (out * dout).sum(), (out, lse)

    grads, (out, lse) = jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))(*map(jax.numpy.asarray, (q, k, v)))
    assert 2 in split_launches, "the forward did not split its keys"
    want_out, want_lse, want_grads = reference(*(x.astype(np.float64) for x in (q, k, v, dout)), causal=True)
    assert_close(out, want_out, OUT_TOL["float32"], "out")
    assert_lse(lse, want_lse)
    for name, got, want in zip(("dq", "dk", "dv"), grads, want_grads):
        assert_close(got, want, GRAD_TOL["float32"], name)


def test_split_keys_dropout_keeps_the_mask(rng, monkeypatch, forward_launches):
    """Dropout's mask is drawn per (batch, head, query block, key block) position, so a split
    forward keeps it: the same seed gives the unsplit call's output to float32 rounding (the
    unsplit call is checked against its float64 reference in test_dropout.py)."""
    from flashx.core import plan, runtime, tuning

    q, k, v = (tensor(rng.standard_normal(s).astype(np.float32)) for s in ((1, 2, 4, 16), (1, 300, 2, 16), (1, 300, 2, 16)))
    if not runtime.INTERPRETER:  # the GPU's wider key blocks: see _split_small_calls
        monkeypatch.setattr(tuning, "KV_SPLIT_MIN_BLOCKS", 1)
    results = []
    for multiprocessors in (1, 512):  # one SM: no split; 512: split
        monkeypatch.setattr(runtime, "multiprocessor_count", lambda n=multiprocessors: n)
        plan.clear_plan_cache()
        torch.manual_seed(7)
        results.append(flashx.torch.attention(q, k, v, causal=True, dropout_p=0.3, return_lse=True))
    plan.clear_plan_cache()
    assert forward_launches == [1, 2]
    (whole, whole_lse), (split, split_lse) = results
    torch.testing.assert_close(split, whole, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(split_lse, whole_lse, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------------
# GQA decode packing: one query's q heads as rows of their kv head's tile
# ----------------------------------------------------------------------------------------------


def test_packed_query_heads_rule():
    """Packs one-query GQA calls (causal bottom-right, seqused_k, a paged cache, softcap); not
    where the heads or the query position must stay apart, or where the plan must name an error."""
    from flashx.core import CallOptions, packed_query_heads

    def group(q=(2, 1, 8, 16), k=(2, 50, 2, 16), optional=(), **options):
        return packed_query_heads(CallOptions(**options), q, k, optional)

    assert group() == 4
    assert group(causal=True, softcap=5.0, optional=("SEQUSED_K", "BLOCK_TABLE")) == 4
    assert group(q=(2, 8, 1, 16), k=(2, 2, 50, 16), layout="bhnd") == 4
    assert group(q=(2, 1, 2, 16)) == 1  # MHA
    assert group(q=(2, 3, 8, 16)) == 1  # three queries
    assert group(q=(2, 1, 7, 16)) == 1  # heads that do not divide (the plan names them)
    assert group(q=(1, 8, 16), k=(50, 2, 16)) == 1  # varlen
    assert group(causal=True, bottom_right=False) == 1  # top-left: query 0 sees key 0 only
    assert group(causal=0) == 1  # not a bool: the plan raises
    assert group(window=(10, 0)) == 1
    assert group(dropout_p=0.1) == 1
    assert group(optional=("SLOPES",)) == 1
    assert group(optional=("SEQUSED_Q",)) == 1
    assert group(layout="BNHD") == 1


PACKED_CASES = [
    pytest.param("bnhd", dict(causal=True), False, id="causal-bnhd"),
    pytest.param("bhnd", dict(causal=True, softcap=4.0), False, id="softcap-bhnd"),
    pytest.param("bnhd", dict(causal=True), True, id="paged-seqused"),
]


@pytest.mark.parametrize("layout, opts, paged", PACKED_CASES)
def test_packed_decode_torch(rng, forward_shapes, layout, opts, paged):
    """A one-query GQA 8/2 call runs as 4 query rows of each kv head (the plan's Nq and heads say
    so); out, lse and the gradients match the float64 reference in the caller's layout."""
    q = rng.standard_normal((3, 1, 8, 16)).astype(np.float32)
    if paged:
        _, k_cache, v_cache, table, used_k = paged_inputs(rng, batch=3, nq=1, hq=8, hkv=2, d=16, page_size=8,
                                                          pages_per_seq=5, num_pages=11, dtype="float32")
        out, lse = flashx.torch.attention(tensor(q), tensor(k_cache), tensor(v_cache), block_table=tensor(table),
                                          seqused_k=tensor(used_k), return_lse=True, **opts)
        want_out, want_lse = reference(q.astype(np.float64), gathered(k_cache, table).astype(np.float64),
                                       gathered(v_cache, table).astype(np.float64), used_k=used_k, **opts)
        assert_close(np64(out), want_out, OUT_TOL["float32"], "out")
        assert_lse(np64(lse), want_lse)
        assert forward_shapes == [(4, 2, 2)]
        return
    # Twice on fresh values: the second call takes attention's fast path (_PackedPlan) straight
    # to the packed call's cached plan.
    for call in range(2):
        q = rng.standard_normal((3, 1, 8, 16)).astype(np.float32)
        k, v = (rng.standard_normal((3, 45, 2, 16)).astype(np.float32) for _ in range(2))
        tq, tk, tv = (tensor(arrange(x, layout)).requires_grad_() for x in (q, k, v))
        out, lse = flashx.torch.attention(tq, tk, tv, layout=layout, return_lse=True, **opts)
        assert tuple(out.shape) == tuple(tq.shape) and tuple(lse.shape) == (3, 8, 1)
        # out is the packed call's (B, Hkv, g, D) out viewed, in either layout: no copy a call
        assert out._base is not None and tuple(out._base.shape) == (3, 2, 4, 16), "the packed out was copied"
        dout = rng.standard_normal((3, 1, 8, 16)).astype(np.float32)
        out.backward(tensor(arrange(dout, layout)))
        want_out, want_lse, want_grads = reference(*(x.astype(np.float64) for x in (q, k, v, dout)), **opts)
        got_out = np64(out).swapaxes(1, 2) if layout == "bhnd" else np64(out)
        assert_close(got_out, want_out, OUT_TOL["float32"], f"out of call {call}")
        assert_lse(np64(lse), want_lse, what=f"lse of call {call}")
        for name, x, want in zip(("dq", "dk", "dv"), (tq, tk, tv), want_grads):
            got = np64(x.grad)
            assert_close(got.swapaxes(1, 2) if layout == "bhnd" else got, want, GRAD_TOL["float32"], f"{name} of call {call}")
    assert forward_shapes == [(4, 2, 2)] * 2, "the calls were not packed"
    kept = sys.modules["flashx.torch.attention"]._DENSE_PLANS.values()
    assert any(type(plan).__name__ == "_PackedPlan" for plan in kept), "no fast path kept for the packed call"


@pytest.fixture
def forward_shapes(monkeypatch) -> list:
    """The returned list gets (Nq, Hq, Hkv) of each forward's plan."""
    from flashx.core import AttentionPlan

    shapes, forward_calls = [], AttentionPlan.forward_calls

    def recorded(self, *args, **kwargs):
        shapes.append((self.seqlen_q, self.heads_q, self.heads_kv))
        return forward_calls(self, *args, **kwargs)

    monkeypatch.setattr(AttentionPlan, "forward_calls", recorded)
    return shapes


def test_packed_decode_keeps_input_errors(rng):
    """A packable shape with a bad option still raises the plan's error naming it."""
    q, k = tensor(rng.standard_normal((2, 1, 4, 16)).astype(np.float32)), tensor(rng.standard_normal((2, 9, 2, 16)).astype(np.float32))
    with pytest.raises(TypeError, match="causal"):
        flashx.torch.attention(q, k, k, causal=1)
    with pytest.raises(ValueError, match="softcap"):
        flashx.torch.attention(q, k, k, softcap=-1.0)


@pytest.mark.parametrize("frontend", ["torch", "jax"])
def test_packed_decode_errors_show_the_callers_shapes(rng, frontend):
    """A packable one-query GQA call with a bad shape is refused naming the shapes as passed,
    q (2, 1, 4, 16), not the packed (2, 2, 2, 16) it would have run as."""
    if frontend == "jax":
        jnp = pytest.importorskip("jax").numpy
        attention, array = importlib.import_module("flashx.jax").attention, jnp.asarray
    else:
        attention, array = flashx.torch.attention, tensor
    q = array(rng.standard_normal((2, 1, 4, 16)).astype(np.float32))
    table = array(np.zeros((2, 3), np.int32))
    for k_shape, paged, message in (((2, 30, 2, 32), False, "head dim"), ((3, 30, 2, 16), False, "batch size"),
                                    ((6, 8, 2, 32), True, "head dim"), ((6, 0, 2, 16), True, "at least one row")):
        k = array(rng.standard_normal(k_shape).astype(np.float32))
        with pytest.raises(ValueError, match=message) as raised:
            attention(q, k, k, **(dict(block_table=table) if paged else {}))
        assert "q (2, 1, 4, 16)" in str(raised.value)


def test_packed_decode_jax(rng, forward_shapes):
    """The JAX frontend packs too (inside jit, with gradients), in both layouts."""
    jax = pytest.importorskip("jax")
    import flashx.jax

    q, dout = (rng.standard_normal((2, 1, 6, 16)).astype(np.float32) for _ in range(2))
    k, v = (rng.standard_normal((2, 33, 2, 16)).astype(np.float32) for _ in range(2))
    want_out, want_lse, want_grads = reference(*(x.astype(np.float64) for x in (q, k, v, dout)), causal=True)
    for layout in ("bnhd", "bhnd"):
        def loss(q, k, v):
            out, lse = flashx.jax.attention(q, k, v, layout=layout, causal=True, return_lse=True)
            return (out * jax.numpy.asarray(arrange(dout, layout))).sum(), (out, lse)

        grads, (out, lse) = jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))(
            *(jax.numpy.asarray(arrange(x, layout)) for x in (q, k, v)))
        assert_close(arrange(np.asarray(out), layout), want_out, OUT_TOL["float32"], f"{layout} out")
        assert_lse(lse, want_lse, what=f"{layout} lse")
        for name, got, want in zip(("dq", "dk", "dv"), grads, want_grads):
            assert_close(arrange(np.asarray(got), layout), want, GRAD_TOL["float32"], f"{layout} {name}")
    assert forward_shapes and all(shape == (3, 2, 2) for shape in forward_shapes), forward_shapes


def test_packed_decode_through_the_drop_ins(rng, forward_shapes):
    """The SDPA and jax.nn drop-ins pack a GQA decode step too (as transformers' SDPA decode calls
    it: one query, no mask, not causal), matching the frameworks' own attention; is_causal (top-
    left: the one query sees key 0 only) does not pack."""
    q = torch.from_numpy(rng.standard_normal((2, 8, 1, 16)).astype(np.float32)).to(DEVICE).requires_grad_()
    k, v = (torch.from_numpy(rng.standard_normal((2, 2, 30, 16)).astype(np.float32)).to(DEVICE) for _ in range(2))
    out = flashx.torch.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    want = torch.nn.functional.scaled_dot_product_attention(*(x.detach().double() for x in (q, k, v)), enable_gqa=True)
    assert_close(np64(out), np64(want), OUT_TOL["float32"], "sdpa out")
    assert forward_shapes == [(4, 2, 2)]
    causal = flashx.torch.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=True)
    assert_close(np64(causal), np64(v).repeat(4, axis=1)[:, :, :1], OUT_TOL["float32"], "sdpa causal out (key 0 only)")
    assert forward_shapes[-1] == (1, 8, 2)

    jax = pytest.importorskip("jax")
    import flashx.jax as flashx_jax  # (binds no local `flashx`: the name above stays the module)

    forward_shapes.clear()
    jq, jk, jv = (jax.numpy.asarray(np64(x).swapaxes(1, 2).astype(np.float32)) for x in (q, k, v))  # (B, T, N, H)
    lengths = jax.numpy.asarray([30, 11])
    got = flashx_jax.dot_product_attention(jq, jk, jv, key_value_seq_lengths=lengths)
    # float64, not jax.nn's own float32 (on a GPU its matmuls run in TF32: 3.5e-4 off, H100).
    want, _ = reference(*(np.asarray(x, np.float64) for x in (jq, jk, jv)), used_k=np.asarray(lengths))
    assert_close(got, want, OUT_TOL["float32"], "jax.nn drop-in out")
    assert forward_shapes and all(shape == (4, 2, 2) for shape in forward_shapes), forward_shapes
