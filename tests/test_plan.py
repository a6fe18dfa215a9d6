"""The plan's own rules, framework-free: stride alignment, how kernel tiles divide block maps, the
tile table's lookups, and the plan cache (which must never let a bad call through)."""

import ast
import dataclasses
import math
import os
import warnings

import pytest

from flashx import core
from flashx.core import plan as plan_mod
from flashx.core import tuning
from flashx.core.launch import kernel_params

from conftest import gradient_launches


# Plans check that arrays live where the kernels run: the CPU under the interpreter, else the GPU.
DEVICE = "cpu" if core.runtime.INTERPRETER else "cuda:0"


def spec(shape, dtype="bfloat16", strides=None):
    return core.ArraySpec(tuple(shape), tuple(strides or core.dense_strides(shape)), dtype, DEVICE)


@pytest.mark.parametrize(
    "strides, expected",
    [((0, 4096, 64), 16), ((24, 8, 0), 8), ((6, 12), 2), ((3, 96), 1), ((), 16), ((1,), 1)],
)
def test_stride_alignment(strides, expected):
    assert plan_mod.stride_alignment(*strides) == expected


@pytest.mark.parametrize(
    "shape, strides, expected",
    [
        pytest.param((2, 45, 3, 64), None, 16, id="dense-d64"),
        pytest.param((2, 45, 3, 40), None, 8, id="dense-d40"),
        pytest.param((2, 45, 3, 33), None, 1, id="dense-d33-odd"),
        # a view of every other head of a (2, 45, 6, 64) tensor: row stride 384, head stride 128
        pytest.param((2, 45, 3, 64), (17280, 384, 128, 1), 16, id="strided-heads"),
        # rows 12 elements apart (a slice of a packed last axis): only 4-aligned
        pytest.param((2, 45, 1, 8), (540, 12, 8, 1), 4, id="packed-rows"),
    ],
)
def test_plan_stride_alignment_covers_inputs_and_outputs(shape, strides, expected):
    """STRIDE_ALIGN divides every (batch, row, head) stride of the inputs and of the dense outputs."""
    q = spec(shape, strides=strides)
    plan = core.plan_attention(q, q, q)
    assert plan.flags["STRIDE_ALIGN"] == expected


def test_padded_row_statistics_only_for_the_transposed_dkdv_tile():
    """The backward's row statistics are padded (and read unmasked) for dense calls whose dK/dV
    tile is transposed (D > 64, or float32); D <= 64 (queries down) and varlen keep lse's shape."""
    wide = core.plan_attention(spec((2, 45, 3, 128)), spec((2, 45, 3, 128)), spec((2, 45, 3, 128)))
    assert wide.flags["PADDED_ROW_STATS"] and not wide.flags["ROWS_DOWN"]
    assert wide.row_stats_shape[:2] == (2, 3) and wide.row_stats_shape[2] % 128 == 0 and wide.row_stats_shape[2] >= 45
    narrow = core.plan_attention(spec((2, 45, 3, 64)), spec((2, 45, 3, 64)), spec((2, 45, 3, 64)))
    assert not narrow.flags["PADDED_ROW_STATS"] and narrow.flags["ROWS_DOWN"]
    assert narrow.row_stats_shape == narrow.lse_shape


BOTH, DKDV, DV, DK, DQ = {"DK", "DV", "DQ", "DBIAS"}, {"DK", "DV"}, {"DV"}, {"DK"}, {"DQ", "DBIAS"}
ROW_STATS = set(core.ROW_STATS_OUTPUTS)  # the backward's row statistics (its first launch writes them)
DQ_STATS = DQ | ROW_STATS


def _dkdv_and_dq(calls) -> tuple:
    """The launches that write dK (one dK/dV pass) and dQ, from backward_calls' launches in any order."""
    (dkdv,) = [c for c in calls if "DK" in c.writes]
    (dq,) = [c for c in calls if "DQ" in c.writes]
    return dkdv, dq


@pytest.mark.parametrize(
    "d, hkv, writes",
    [(128, 3, [ROW_STATS, BOTH]), (256, 3, [DQ_STATS, DV, DK]), (128, 1, [DQ_STATS, DKDV]), (64, 3, [DQ_STATS, DKDV])],
    ids=["d128", "d256", "gqa", "d64-four-warps"],
)
def test_backward_launches_where_measured_faster(d, hkv, writes):
    """With the GPU tables, dK/dV's and dQ's programs share one launch at 64 < D <= 128 without
    GQA (the grids' second axes must agree), after the preprocess, which writes the row
    statistics; D = 64's 4-warp tiles and GQA take two launches, D = 256 three (dK/dV in a dV pass
    and a dK pass, TileConfig.dkdv_passes), where dQ's launch comes first and writes the row
    statistics (tuning.DQ_ROW_STATS), over every row of them, padding included."""
    q, kv = spec((2, 300, 3, d)), spec((2, 300, hkv, d))
    plan = core.plan_attention(q, kv, kv, causal=True)
    gpu_tiles = tuning.TUNED_TILES[(d, True)]
    plan = dataclasses.replace(plan, tiles=gpu_tiles, _memo={})
    fused = writes[1] == BOTH
    assert plan.fused_backward is fused
    launches = plan.backward_calls({}, None, False, q, gluon=False)  # the portable kernel's (Hopper: Gluon's, apart)
    assert [set(c.writes) for c in launches] == writes
    dkdv_programs = plan.dkdv_grid[0]
    if fused:
        assert launches[0].kernel is plan_mod.attention_backward_preprocess_kernel
        assert launches[1].grid == (dkdv_programs + plan.dq_grid[0],) + plan.dq_grid[1:]
        assert launches[1].args[list(kernel_params(launches[1].kernel)[0]).index("dkdv_programs")] == dkdv_programs
        assert not launches[1].constexprs["DQ_ROW_STATS"]
    else:
        assert launches[0].constexprs["DQ_ROW_STATS"] and not launches[0].constexprs["RUN_DKDV"]
        rows = plan.row_stats_shape[-1] if plan.flags["PADDED_ROW_STATS"] else 300
        assert launches[0].grid == plan.dq_grid_of(rows) and rows >= 300
        assert [c.grid for c in launches[1:]] == [plan.dkdv_grid] * (len(writes) - 1)


def test_backward_row_statistics_from_the_preprocess_when_asked(monkeypatch):
    """With tuning.DQ_ROW_STATS off, split launches run as before it: the preprocess, dK/dV's,
    then dQ's, which reads the row statistics."""
    monkeypatch.setattr(tuning, "DQ_ROW_STATS", False)
    q, kv = spec((2, 300, 3, 64)), spec((2, 300, 3, 64))
    plan = dataclasses.replace(core.plan_attention(q, kv, kv, causal=True), tiles=tuning.TUNED_TILES[(64, True)], _memo={})
    launches = plan.backward_calls({}, None, False, q, gluon=False)
    assert [set(c.writes) for c in launches] == [ROW_STATS, DKDV, DQ]
    assert launches[0].kernel is plan_mod.attention_backward_preprocess_kernel
    assert launches[2].grid == plan.dq_grid and not launches[2].constexprs["DQ_ROW_STATS"]


@pytest.mark.parametrize(
    "d, dv, dtype, fused",
    [(128, 128, "bfloat16", True), (128, 256, "bfloat16", False), (128, 128, "float32", False), (256, 256, "float16", False)],
    ids=["d128", "d128-dv256", "d128-fp32", "d256-fp16"],
)
def test_one_backward_launch_follows_the_tile_entry(monkeypatch, d, dv, dtype, fused):
    """The GPU plan takes one backward launch or two as the tile entry it uses says: D = 256's
    entry, which a wider Dv and float32 D = 128 use too, takes two."""
    monkeypatch.setattr(plan_mod.runtime, "INTERPRETER", False)
    plan_mod.clear_plan_cache()
    q, v = ((2, 300, 3, d), (2, 300, 3, dv))
    q, v = (core.ArraySpec(s, core.dense_strides(s), dtype, "cuda:0") for s in (q, v))
    try:
        plan = core.plan_attention(q, q, v, causal=True)
        assert plan.tiles.one_backward_launch is fused and plan.fused_backward is fused
    finally:
        plan_mod.clear_plan_cache()


@pytest.mark.parametrize(
    "n, causal, window, one_loop",
    [(512, True, None, True), (1024, True, None, True), (1025, True, None, False), (512, False, None, False),
     (4096, True, None, False), (4096, False, (255, 0), True)],
    ids=["short-causal", "short-causal-edge", "past-short", "short-non-causal", "long-causal", "window"],
)
def test_forward_one_loop_where_measured_faster(monkeypatch, n, causal, window, one_loop):
    """With the GPU tables the forward walks its key blocks in one loop for windows and the short
    causal tiles, and in spans for dense calls (block maps: always one loop, see ONE_LOOP)."""
    monkeypatch.setattr(plan_mod.runtime, "INTERPRETER", False)
    plan_mod.clear_plan_cache()
    q = core.ArraySpec((2, n, 4, 128), core.dense_strides((2, n, 4, 128)), "bfloat16", "cuda:0")
    try:
        assert core.plan_attention(q, q, q, causal=causal, window=window).flags["ONE_LOOP"] is one_loop
    finally:
        plan_mod.clear_plan_cache()


def test_split_backward_launches_keep_each_tiles_options():
    """Two backward launches take each kind's own warps and stages, so tiles whose warp counts
    differ (as tune.py sweeps them) still launch; one launch of both needs one warp count."""
    q = spec((2, 300, 3, 128))
    plan = core.plan_attention(q, q, q, causal=True)
    tiles = tuning.TileConfig(tuning.KernelTiles(128, 128, 8, 3), tuning.KernelTiles(64, 128, 8, 2),
                                tuning.KernelTiles(128, 32, 4, 3))
    plan = dataclasses.replace(plan, tiles=tiles, _memo={})
    dq, dkdv = plan.backward_calls({}, None, False, q, split=True, gluon=False)  # the portable kernel's
    assert (dkdv.options["num_warps"], dkdv.options["num_stages"]) == (8, 2)
    assert (dq.options["num_warps"], dq.options["num_stages"]) == (4, 3)
    with pytest.raises(ValueError, match="one warp count"):
        plan.backward_calls({}, None, False, q, split=False, gluon=False)


@pytest.mark.parametrize("slopes_shape, axes", [((3,), (0, 2)), ((2, 3), (2,))], ids=["h", "bh"])
def test_slopes_gradient_launch(slopes_shape, axes):
    """slopes_grad: the dQ launch (alone, or fused with dK/dV) writes the slopes' per-block parts
    into DBIAS, (B, Hq, query blocks of dQ's tile) with dense strides, under SLOPES_GRAD, and
    never as a bias gradient; the plan's reduce axes give the slopes' shape. Asked without
    slopes, or with a bias gradient in the same call, it raises ValueError."""
    q = spec((2, 300, 3, 64))
    plan = core.plan_attention(q, q, q, causal=True, alibi_slopes=spec(slopes_shape, dtype="float32"))
    blocks = -(-300 // plan.tiles.dq.block_m)
    assert plan.slopes_grad_shape == (2, 3, blocks) and plan.slopes_reduce_axes == axes
    launches = plan.backward_calls({}, None, False, q, gluon=False, slopes_grad=True)
    dq_launch = next(c for c in launches if "DQ" in c.writes)
    assert "DBIAS" in dq_launch.writes
    assert dq_launch.constexprs["SLOPES_GRAD"] and not dq_launch.constexprs["BIAS_GRAD"]
    names = list(kernel_params(dq_launch.kernel)[0])
    strides = [dq_launch.args[names.index(f"stride_g{a}")] for a in "bhqk"]
    assert strides == [3 * blocks, blocks, 1, 0]
    assert not any(c.constexprs.get("SLOPES_GRAD") for c in plan.backward_calls({}, None, False, q, gluon=False))
    with pytest.raises(ValueError, match="slopes_grad"):
        plan.backward_calls({}, None, True, q, gluon=False, slopes_grad=True)
    plain = core.plan_attention(q, q, q, causal=True)
    with pytest.raises(ValueError, match="slopes_grad"):
        plain.backward_calls({}, None, False, q, gluon=False, slopes_grad=True)


@pytest.mark.parametrize("d, hkv, dkdv_writes", [(128, 3, [DKDV]), (64, 3, [DKDV]), (256, 3, [DV, DK]), (128, 1, [DKDV])],
                         ids=["d128-fused", "d64", "d256", "gqa"])
def test_backward_launches_only_the_needed_passes(d, hkv, dkdv_writes):
    """need_dkdv=False leaves dK/dV's programs out (one dQ launch, which writes the row statistics
    itself, also where dK/dV and dQ would share one); need_dq=False leaves dQ's out (after the
    preprocess; D = 256's two dK/dV passes stay), unless a bias or slopes gradient needs dQ's
    programs; asking for nothing raises ValueError."""
    q, kv = spec((2, 300, 3, d)), spec((2, 300, hkv, d))
    plan = core.plan_attention(q, kv, kv, causal=True, alibi_slopes=spec((3,), dtype="float32"))
    plan = dataclasses.replace(plan, tiles=tuning.TUNED_TILES[(d, True)], _memo={})
    dq_only = [set(c.writes) for c in plan.backward_calls({}, None, False, q, gluon=False, need_dkdv=False)]
    dkdv_only = [set(c.writes) for c in plan.backward_calls({}, None, False, q, gluon=False, need_dq=False)]
    assert dq_only == [DQ_STATS] and dkdv_only == [ROW_STATS, *dkdv_writes]
    slopes_only = plan.backward_calls({}, None, False, q, gluon=False, slopes_grad=True, need_dq=False, need_dkdv=False)
    assert [set(c.writes) for c in slopes_only] == [DQ_STATS] and slopes_only[0].constexprs["SLOPES_GRAD"]
    with pytest.raises(ValueError, match="needs some gradient"):
        plan.backward_calls({}, None, False, q, gluon=False, need_dq=False, need_dkdv=False)


def test_backward_alignment_includes_grad_out():
    """A gradient with odd strides lowers the backward's STRIDE_ALIGN, not the forward's."""
    q = spec((1, 16, 2, 64))
    plan = core.plan_attention(q, q, q)
    odd = spec((1, 16, 2, 64), strides=(3000, 150, 70, 1))
    calls = plan.backward_calls({}, None, False, odd)
    assert plan.flags["STRIDE_ALIGN"] == 16
    assert {c.constexprs["STRIDE_ALIGN"] for c in calls} == {2}


@pytest.mark.parametrize(
    "map_blocks, kernel, transposed, expected",
    [
        ((128, 128), (128, 64), False, dict(MAP_SPLIT=1, MAP_STEPS=2)),
        ((128, 128), (64, 32), False, dict(MAP_SPLIT=2, MAP_STEPS=4)),
        # dK/dV: programs own key blocks and step over query blocks
        ((128, 128), (64, 128), True, dict(MAP_SPLIT=1, MAP_STEPS=2)),
        ((128, 64), (64, 32), True, dict(MAP_SPLIT=2, MAP_STEPS=2)),
    ],
)
def test_map_ratios(map_blocks, kernel, transposed, expected):
    bm = core.BlockMaskSpec(None, 1, 1, 300, 300, *map_blocks, -1, -1)
    tiles = tuning.KernelTiles(*kernel, 4, 3)
    assert plan_mod._map_ratios(bm, tiles, transposed) == expected
    assert plan_mod._map_ratios(None, tiles, transposed) == dict(MAP_SPLIT=1, MAP_STEPS=1)


def test_gpu_tile_table_lookups(monkeypatch):
    """The GPU table: float32 takes the entry twice as wide, short sequences their own forward,
    and a block map's blocks bound every kernel's tile (so that the tiles divide them)."""
    monkeypatch.setattr(plan_mod.runtime, "INTERPRETER", False)
    table = tuning.TUNED_TILES
    assert tuning.tile_config(128, 2, False, 4096, None) == table[(128, False)]
    # float32: its own tiles by the 16-bit width (twice D), none of the 16-bit overrides.
    # "tf32x3" (the default) takes its own forward and dQ at D <= 64, dK/dV at D = 128 and
    # backward tiles above D = 128, "bf16x3" its own tiles at D <= 128 and tf32x3's backward tiles
    # above (on two stages, not one), "tf32" bf16x3's at D <= 64 and its backward tiles at D = 128;
    # "ieee" FLOAT32_TILES alone.
    for d, width in ((32, 128), (64, 128), (128, 256), (256, 512)):
        tf32x3 = dataclasses.replace(tuning.FLOAT32_TILES[width], **tuning.TF32X3_TILES.get(width, {}))
        bf16x3 = dataclasses.replace(tuning.FLOAT32_TILES[width], **tuning.BF16X3_TILES.get(width, {}))
        tf32 = dataclasses.replace(tuning.FLOAT32_TILES[width], **tuning.TF32_TILES.get(width, {}))
        for options in (dict(), dict(window=True), dict(dropout=True)):
            assert tuning.tile_config(d, 4, True, 4096, None, float32_precision="ieee", **options) == tuning.FLOAT32_TILES[width]
            assert tuning.tile_config(d, 4, True, 4096, None, float32_precision="tf32", **options) == tf32
            assert tuning.tile_config(d, 4, True, 4096, None, **options) == tf32x3
            assert tuning.tile_config(d, 4, True, 4096, None, float32_precision="bf16x3", **options) == bf16x3
        assert tuning.tile_config(d, 4, True, 300, None) == tf32x3  # no short tile
    assert tuning.FLOAT32_TILES[512] == tuning.FLOAT32_WIDE_TILES
    assert tuning.tile_config(256, 4, True, 4096, None).dkdv != tuning.FLOAT32_WIDE_TILES.dkdv
    assert tuning.tile_config(128, 4, True, 4096, None, float32_precision="bf16x3").forward != tuning.FLOAT32_TILES[256].forward
    wide = {p: tuning.tile_config(256, 4, True, 4096, None, float32_precision=p) for p in ("tf32x3", "bf16x3")}
    for kernel in ("dkdv", "dq"):
        tf32x3_tile, bf16x3_tile = (getattr(wide[p], kernel) for p in ("tf32x3", "bf16x3"))
        assert bf16x3_tile == dataclasses.replace(tf32x3_tile, num_stages=2) and tf32x3_tile.num_stages == 1
    assert tuning.tile_config(128, 4, True, 4096, None).dkdv != tuning.FLOAT32_TILES[256].dkdv
    assert tuning.tile_config(64, 4, True, 4096, None).forward != tuning.FLOAT32_TILES[128].forward
    tf32_128 = tuning.tile_config(128, 4, True, 4096, None, float32_precision="tf32")
    assert tf32_128.forward == tuning.FLOAT32_TILES[256].forward and tf32_128.dkdv == tuning.BF16X3_TILES[256]["dkdv"]
    # Short sequences: a forward tile per bucket of the longest sequence, at each bucket's edges.
    for longest, bucket in ((1, 512), (512, 512), (513, 1024), (tuning.SHORT_SEQLEN, 1024)):
        short = tuning.tile_config(128, 2, True, longest, None)
        assert short == dataclasses.replace(table[(128, True)], forward=tuning.SHORT_FORWARD_TILES[(128, True, bucket)])
    assert tuning.tile_config(128, 2, True, tuning.SHORT_SEQLEN + 1, None) == table[(128, True)]
    assert tuning.tile_config(64, 2, False, 512, None) == table[(64, False)]  # no short entry there
    # A sliding window's left side: its own dK/dV tiles at D = 128, not with a block map, not at D = 64.
    window = tuning.tile_config(128, 2, True, 16384, None, window=True)
    assert window == dataclasses.replace(table[(128, True)], dkdv=tuning.WINDOW_DKDV_TILES[128])
    assert window.dkdv != table[(128, True)].dkdv
    assert tuning.tile_config(128, 2, True, 16384, (128, 128), window=True).dkdv == table[(128, True)].dkdv
    assert tuning.tile_config(64, 2, True, 16384, None, window=True) == table[(64, True)]
    # Dropout at D = 128: dK/dV its own tile (taking the window's place), dQ as tuned; at D = 256
    # dQ one stage less; D = 64 unchanged.
    for causal, window in ((False, False), (True, False), (True, True)):
        dropped = tuning.tile_config(128, 2, causal, 16384, None, window=window, dropout=True)
        assert dropped.dkdv == tuning.DROPOUT_DKDV_TILES[128]
        assert dropped.forward == table[(128, causal)].forward
        assert dropped.dq == table[(128, causal)].dq
        wide = tuning.tile_config(256, 2, causal, 16384, None, dropout=True)
        assert wide.dq.num_stages == max(table[(256, causal)].dq.num_stages - 1, 1)
    assert tuning.tile_config(64, 2, True, 16384, None, dropout=True) == table[(64, True)]
    assert tuning.tile_config(128, 2, True, 16384, (64, 64), dropout=True).dkdv.block_m == 32
    # Decode-shaped calls: the 16-row forward tile for 16-bit D <= 256 and float32 D <= 128 (the
    # wide float32 tiles keep theirs: shared memory), never with a block map; other kernels as tuned.
    for d, itemsize, tiles in ((64, 2, table[(64, True)]), (256, 2, table[(256, True)]),
                               (128, 4, dataclasses.replace(tuning.FLOAT32_TILES[256], **tuning.TF32X3_TILES[256]))):
        decode = tuning.tile_config(d, itemsize, True, 16384, None, decode=True)
        assert decode == dataclasses.replace(tiles, forward=tuning.DECODE_FORWARD_TILE)
    assert tuning.tile_config(256, 4, True, 16384, None, decode=True, float32_precision="ieee") == tuning.FLOAT32_WIDE_TILES
    assert tuning.tile_config(128, 2, True, 16384, (128, 128), decode=True).forward.block_m == 128
    mapped = tuning.tile_config(128, 2, False, 4096, (64, 32))
    for tiles in (mapped.forward, mapped.dkdv, mapped.dq):
        assert 64 % tiles.block_m == 0 and 32 % tiles.block_n == 0
    tuned = list(table.values()) + list(tuning.SHORT_FORWARD_TILES.values()) + list(tuning.WINDOW_DKDV_TILES.values())
    tuned += list(tuning.DROPOUT_DKDV_TILES.values())
    for entry in tuned:
        for tiles in (entry.forward, entry.dkdv, entry.dq) if isinstance(entry, tuning.TileConfig) else (entry,):
            # every tuned tile divides the default 128 x 128 block map
            assert 128 % tiles.block_m == 0 and 128 % tiles.block_n == 0


@pytest.mark.parametrize("batch, heads_kv, group, n, few", [
    # programs: dK/dV batch * kv heads * key blocks (32 keys); forward batch * q heads * query blocks (128)
    (2, 2, 4, 2048, {"forward", "dkdv"}),  # 256 / 256: under FEW_PROGRAMS_WAVES waves of 132 SMs
    (4, 4, 4, 1024, {"forward", "dkdv"}),  # 512 / 512: under 4 * 132 = 528
    (4, 4, 4, 1025, set()),  # 528 (4 waves, not fewer) / 576
    (2, 4, 2, 2200, {"forward"}),  # 552 / 288
    (1, 1, 32, 4096, {"dkdv"}),  # 128 / 1024 (MQA)
    (8, 16, 4, 2048, set()),
])
def test_gpu_float32_small_grid_takes_its_own_tiles(monkeypatch, batch, heads_kv, group, n, few):
    """A causal tf32x3 call at D = 128 takes FLOAT32_FEW_PROGRAMS_TILES' tile for each kernel whose
    grid on TF32X3_TILES' (forward: batch * q heads * query blocks; dK/dV: batch * kv heads * key
    blocks) fills fewer than FEW_PROGRAMS_WAVES waves of the SMs, through the plan too (`group` q
    heads over each kv head); non-causal calls, other precisions, widths and 16-bit calls never."""
    monkeypatch.setattr(plan_mod.runtime, "INTERPRETER", False)
    monkeypatch.setattr(tuning.runtime, "multiprocessor_count", lambda: 132)
    large = dataclasses.replace(tuning.FLOAT32_TILES[256], **tuning.TF32X3_TILES[256])
    own = tuning.FLOAT32_FEW_PROGRAMS_TILES["tf32x3"][256]
    assert set(own) == {"forward", "dkdv"} and all(own[k] != getattr(large, k) for k in own)
    expected = dataclasses.replace(large, **{k: own[k] for k in few})
    grid = tuning.CallGrid(batch * group * heads_kv, n, batch * heads_kv, n)
    assert tuning.tile_config(128, 4, True, n, None, grid=grid) == expected
    assert tuning.tile_config(128, 4, True, n, None) == large  # grid not given
    assert tuning.tile_config(128, 4, False, n, None, grid=grid) == tuning.tile_config(128, 4, False, n, None) == large
    for precision in ("bf16x3", "tf32", "ieee"):
        assert tuning.tile_config(128, 4, True, n, None, float32_precision=precision, grid=grid) == \
            tuning.tile_config(128, 4, True, n, None, float32_precision=precision)
    assert tuning.tile_config(64, 4, True, n, None, grid=grid) == tuning.tile_config(64, 4, True, n, None)
    assert tuning.tile_config(128, 2, True, n, None, grid=grid) == tuning.tile_config(128, 2, True, n, None)
    q, k = (core.ArraySpec(shape, core.dense_strides(shape), "float32", "cuda")
            for shape in ((batch, n, group * heads_kv, 128), (batch, n, heads_kv, 128)))
    assert core.plan_call(core.CallOptions(causal=True), q, k, k, {}).tiles == expected
    assert core.plan_call(core.CallOptions(), q, k, k, {}).tiles == large


def test_plan_cache_returns_one_plan_and_keeps_validating():
    """Equal calls share one plan; a call that differs only in an option's type (1 for True) is
    still validated and refused."""
    q = spec((1, 33, 2, 64))
    options = core.CallOptions(causal=True)
    first = core.plan_call(options, q, q, q, {})
    assert core.plan_call(core.CallOptions(causal=True), q, q, q, {}) is first
    with pytest.raises(TypeError, match="causal"):
        core.plan_call(core.CallOptions(causal=1), q, q, q, {})
    # the same for the items of a tuple option: (True, 0) == (1, 0), but a bool is no window size
    core.plan_call(core.CallOptions(window=(1, 0)), q, q, q, {})
    with pytest.raises(ValueError, match="window"):
        core.plan_call(core.CallOptions(window=(True, 0)), q, q, q, {})
    # unhashable options (a list window) are planned without the cache, with the same checks
    listed = core.plan_call(core.CallOptions(window=[4, 0]), q, q, q, {})
    assert listed.flags["LIMIT_LEFT"] and listed.flags["LIMIT_RIGHT"]


class _FakeArray:
    """Just what the launch path reads of an array: its dtype and address."""

    def __init__(self, address, dtype="bf16"):
        self.address, self.dtype = address, dtype

    def data_ptr(self):
        return self.address


class _FakeKernel:
    """Records launches: through Triton's dispatch (kernel[grid](...)) or a compiled runner."""

    def __init__(self):
        self.log = []

    def __getitem__(self, grid):
        def dispatch(*args, **kwargs):
            self.log.append(("dispatch", grid, args, kwargs))
            return self  # stands in for the CompiledKernel that Triton returns

        return dispatch

    def runner(self, grid):
        return lambda *args: self.log.append(("runner", grid, args))


def test_kernel_call_reuses_the_compiled_runner_per_alignment(monkeypatch):
    kernel = _FakeKernel()
    runners = core.launch.CompiledRunners()
    runners.enabled = True  # as on a GPU
    monkeypatch.setattr(core.launch.CompiledRunners, "key", staticmethod(
        lambda arrays: tuple((a.dtype, a.data_ptr() % 16 == 0) for a in arrays)))
    compiled_grids = []

    def remember(key, compiled, grid):
        compiled_grids.append(grid)
        runners._runners[key] = compiled.runner(grid)

    monkeypatch.setattr(runners, "remember", remember)
    constexprs = dict(BLOCK_M=64, FLAG=True)

    def call(q_address):
        q = _FakeArray(q_address)
        out = _FakeArray(4096)
        core.KernelCall(kernel, (3, 2, 1), (q, 7, 1.5), ("O",), constexprs, dict(num_warps=4),
                        arrays=(q,), runners=runners).launch((out,))

    call(1024)  # first call: Triton's dispatch, with constexprs and options as keywords
    call(2048)  # same alignment: the runner, all arguments positional, constexprs last
    call(1026)  # a misaligned q: Triton specializes differently, so its dispatch again
    call(1026)
    kinds = [entry[0] for entry in kernel.log]
    assert kinds == ["dispatch", "runner", "dispatch", "runner"]
    assert kernel.log[0][3] == dict(BLOCK_M=64, FLAG=True, num_warps=4)
    assert kernel.log[1][2][1:] == (7, 1.5, kernel.log[1][2][3], 64, True)
    assert kernel.log[1][2][0].address == 2048
    assert compiled_grids == [(3, 2, 1), (3, 2, 1)]


def test_first_launch_repairs_the_cache_dir_before_the_key_starts_the_driver(monkeypatch):
    """A runner key asks Triton's driver for the current device, and a first such call starts the
    driver, which builds a module in the cache dir: jax_triton's empty TRITON_CACHE_DIR must be
    undone before it (as on the GPU: torch, then jax_triton's import, then torch), on a plan's
    first launch and in compile_together alike."""
    def key(arrays):
        if os.environ.get("TRITON_CACHE_DIR") == "":
            raise RuntimeError("Could not create or locate cache dir")  # Triton's driver, starting
        return tuple((a.dtype, a.data_ptr() % 16 == 0) for a in arrays)

    monkeypatch.setattr(core.launch.CompiledRunners, "key", staticmethod(key))
    monkeypatch.setattr(core.launch, "_async_compile_active", lambda: False)
    kernel = _FakeKernel()

    def first_call():
        runners = core.launch.CompiledRunners()
        runners.enabled = True  # as on a GPU
        q = _FakeArray(1024)
        return core.KernelCall(kernel, (1, 1, 1), (q, 7), ("O",), {}, {}, arrays=(q,), runners=runners)

    monkeypatch.setenv("TRITON_CACHE_DIR", "")
    first_call().launch((_FakeArray(2048),))
    assert "TRITON_CACHE_DIR" not in os.environ
    assert [entry[0] for entry in kernel.log] == ["dispatch"]
    monkeypatch.setenv("TRITON_CACHE_DIR", "")
    core.launch.compile_together([(first_call(), (_FakeArray(2048),), ())])  # keyed, then left to its launch
    assert "TRITON_CACHE_DIR" not in os.environ


class _FakeFuture:
    """What warmup returns under Triton's AsyncCompileMode: a compile still on the pool."""

    def __init__(self, compiled):
        self.compiled = compiled

    def result(self):
        return self.compiled


def test_compile_together_keeps_a_runner_per_pending_launch(monkeypatch):
    """compile_together compiles (warmup, no launch) the kernels of the launches that have no
    runner yet, then builds their runners (Triton's launchers) one after another on the caller's
    thread, and the launches then go straight to those runners; a launch with a runner, or a lone
    pending one, is left to its launch; a compile error reaches the caller."""
    import threading

    monkeypatch.setattr(core.launch.CompiledRunners, "key", staticmethod(
        lambda arrays: tuple((a.dtype, a.data_ptr() % 16 == 0) for a in arrays)))
    built_on = []  # the thread that built each runner
    monkeypatch.setattr(core.launch, "_async_compile_active", lambda: False)

    class Compiled:
        """A CompiledKernel: compiled[grid] is its runner."""

        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            built_on.append(threading.current_thread().name)
            return self.kernel.runner(grid)

    class Kernel(_FakeKernel):
        def __init__(self, fail=False, future=True):
            super().__init__()
            self.fail, self.future = fail, future

        def warmup(self, *args, grid, **kwargs):
            if self.fail:
                raise RuntimeError("does not compile")
            self.log.append(("warmup", grid, args, kwargs))
            return _FakeFuture(Compiled(self)) if self.future else Compiled(self)

    def launch_of(kernel, grid):
        q = _FakeArray(1024)
        runners = core.launch.CompiledRunners()
        runners.enabled = True  # as on a GPU
        call = core.KernelCall(kernel, grid, (q, 5), ("O",), dict(BLOCK=16), dict(num_warps=8), arrays=(q,),
                               runners=runners)
        return call, (_FakeArray(2048),), ()

    kernels = [Kernel(), Kernel(future=False), Kernel()]
    launches = [launch_of(k, (i + 1, 1, 1)) for i, k in enumerate(kernels)]
    ready, bound, _ = launches[2]  # this one has its runner already: not compiled again
    ready.runners.remember(ready.runners.key((*ready.arrays, *bound)), Compiled(kernels[2]), ready.grid)
    core.launch.compile_together(launches)
    for i, kernel in enumerate(kernels[:2]):
        assert kernel.log == [("warmup", (i + 1, 1, 1), launches[i][0].args + launches[i][1],
                               dict(BLOCK=16, num_warps=8))]
    assert kernels[2].log == []
    assert built_on == [threading.current_thread().name] * 3  # the ready launch's, then the two new
    for (call, bound, _), kernel in zip(launches, kernels):
        call.launch(bound)
        assert kernel.log[-1] == ("runner", call.grid, (*call.args, *bound, 16))

    # Kernels Triton had compiled already: their runners are kept the same way.
    built_on.clear()
    cached = [launch_of(Kernel(future=False), (1, 1, 1)), launch_of(Kernel(future=False), (2, 1, 1))]
    core.launch.compile_together(cached)
    assert built_on == [threading.current_thread().name] * 2
    assert all(call.runners.get(call.runners.key((*call.arrays, *bound))) for call, bound, _ in cached)

    lone = launch_of(Kernel(), (1, 1, 1))
    core.launch.compile_together([lone])
    assert lone[0].kernel.log == []
    with pytest.raises(RuntimeError, match="does not compile"):
        core.launch.compile_together([launch_of(Kernel(fail=True), (1, 1, 1)), launch_of(Kernel(), (2, 1, 1))])


def test_kernel_params_requires_constexprs_last():
    import triton
    import triton.language as tl

    @triton.jit
    def misordered(X, BLOCK: tl.constexpr, n):
        pass

    with pytest.raises(TypeError, match="constexpr parameters must come after"):
        core.launch.kernel_params(misordered)
    names, constexprs = core.launch.kernel_params(core.plan.attention_forward_kernel)
    assert names[:3] == ("Q", "K", "V") and "O" not in names and constexprs[0] == "HEAD_DIM"


def _gluon_kernel():
    from flashx.core.gluon_forward import gluon_attention_forward_kernel

    return gluon_attention_forward_kernel


@pytest.mark.parametrize(
    "change, tile",
    [
        pytest.param({}, "pp", id="dense"),
        pytest.param(dict(causal=True), "pp", id="causal"),
        pytest.param(dict(persistent=True), "pp", id="persistent"),
        pytest.param(dict(causal=True, persistent=True, hq=100), "pp", id="persistent-more-tiles-than-sms"),
        pytest.param(dict(window=(-1, 0)), "pp", id="window-as-causal"),
        pytest.param(dict(hkv=2), "pp", id="gqa"),
        pytest.param(dict(dtype="float16"), "pp", id="fp16"),
        pytest.param(dict(nq=17, hq=64, hkv=64), "pp", id="short-q"),
        pytest.param(dict(nkv=2047), "pp-qp-persist", id="short-kv"),
        pytest.param(dict(nq=300, nkv=256, hq=100), "pp-qp-persist", id="short-kv-more-tiles-than-sms"),
        pytest.param(dict(nkv=255), None, id="shorter-kv"),
        pytest.param(dict(nkv=2047, causal=True), None, id="short-kv-causal"),
        pytest.param(dict(d=64, dv=64), "d64-c3-turns", id="d64"),
        pytest.param(dict(d=64, dv=64, nkv=2047), None, id="d64-short-kv"),
        pytest.param(dict(d=64, dv=64, causal=True), None, id="d64-causal-4k"),
        pytest.param(dict(d=64, dv=64, causal=True, nkv=16384), "d64-c3-turns", id="d64-causal-16k"),
        pytest.param(dict(d=256, dv=256), "d256-pp", id="d256"),
        pytest.param(dict(d=256, dv=256, causal=True, hkv=1), "d256-pp", id="d256-causal-mqa"),
        pytest.param(dict(d=256, dv=256, nkv=1024), "d256-pp", id="d256-1k-keys"),
        pytest.param(dict(d=256, dv=256, nkv=1023, causal=True), None, id="d256-causal-short-kv"),
        pytest.param(dict(d=96, dv=96), None, id="d96"),
        pytest.param(dict(dv=64), None, id="dv64"),
        pytest.param(dict(dtype="float32"), None, id="fp32"),
        pytest.param(dict(window=(256, 0)), None, id="window"),
        pytest.param(dict(window=(-1, 3)), None, id="window-right"),
        pytest.param(dict(softcap=20.0), None, id="softcap"),
        pytest.param(dict(scale=-0.1), None, id="negative-scale"),
        pytest.param(dict(row_stride=2 * 128 + 4), None, id="rows-4-aligned"),
        pytest.param(dict(d_stride=2), None, id="strided-d"),
    ],
)
def test_gluon_forward_route(monkeypatch, change, tile):
    """Where the device allows it (runtime.hopper_gluon), dense 16-bit calls with D = Dv and 16-byte
    rows take the Gluon tile that GLUON_FORWARD_ROUTE gives their head dim, causality and Nkv;
    every other call keeps the tl kernel. The launch has the tile's constexprs and grid (one
    program per tile, or at most one per SM when persistent), and its template finds every kernel
    argument."""
    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: True)
    monkeypatch.setattr(core.runtime, "multiprocessor_count", lambda: 132)
    c = dict(nq=2100, nkv=2100, hq=4, hkv=4, d=128, dv=128, dtype="bfloat16", row_stride=None, d_stride=1,
             persistent=None)
    c.update(change)
    if tile is not None and c["persistent"] is not None:
        monkeypatch.setitem(tuning.GLUON_FORWARD_TILES, tile,
                            dict(tuning.GLUON_FORWARD_TILES[tile], PERSISTENT=c["persistent"]))
    options = {k: c[k] for k in ("causal", "window", "softcap", "scale") if k in c}

    def array(n, h, d):
        if c["row_stride"] is None and c["d_stride"] == 1:
            return spec((2, n, h, d), c["dtype"])
        row = c["row_stride"] or h * d * c["d_stride"]
        return spec((2, n, h, d), c["dtype"], (n * row, row, d * c["d_stride"], c["d_stride"]))

    plan = core.plan_attention(array(c["nq"], c["hq"], c["d"]), array(c["nkv"], c["hkv"], c["d"]),
                               array(c["nkv"], c["hkv"], c["dv"]), **options)
    assert plan.gluon_tile == tile
    assert plan.gluon_forward == (tile is not None)
    call = plan.forward_call({}, None)
    assert (call.kernel is _gluon_kernel()) == (tile is not None)
    if tile is not None:
        constexprs = tuning.GLUON_FORWARD_TILES[tile]
        tiles = (-(-c["nq"] // constexprs["BLOCK_M"]), c["hq"], 2)
        persistent = constexprs["PERSISTENT"]
        assert call.grid == ((min(tiles[0] * tiles[1] * tiles[2], 132), 1, 1) if persistent else tiles)
        args = dict(zip(kernel_params(call.kernel)[0], call.args))
        assert (args["num_heads"], args["num_batches"], args["seqlen_q"]) == (c["hq"], 2, c["nq"])
        assert {k: call.constexprs[k] for k in constexprs} == constexprs
        assert call.constexprs["HEAD_DIM"] == c["d"]
        assert call.constexprs["LIMIT_RIGHT"] == ("causal" in c or "window" in c)
        # The caller may decline it (a torch view that starts off a 16-byte boundary).
        assert plan.forward_call({}, None, gluon=False).kernel is not _gluon_kernel()
    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: False)
    assert not plan.gluon_forward


def test_gluon_forward_route_table():
    """Every routed tile exists and names only the Gluon kernel's constexprs; the fewest keys of a
    (head dim, causal) route rise, so each tile (or None, the tl forward) owns a span of Nkv."""
    constexprs = set(kernel_params(_gluon_kernel())[1])
    for name, tile in tuning.GLUON_FORWARD_TILES.items():
        assert set(tile) <= constexprs, name
    tables = ((tuning.GLUON_FORWARD_ROUTE, False), (tuning.GLUON_TMA_ROUTE, True),
              (tuning.GLUON_DEVICE_TMA_ROUTE, True))
    for table, tma in tables:
        for (head_dim, causal), route in table.items():
            fewest = [n for n, _ in route]
            assert fewest == sorted(set(fewest)), (head_dim, causal)
            for n, name in route:
                assert name is None or tuning.GLUON_FORWARD_TILES[name]["TMA"] == tma, name
                assert tuning.gluon_forward_tile(head_dim, causal, n, table) == name
                assert tuning.gluon_forward_tile(head_dim, causal, n - 1, table) != name


@pytest.mark.parametrize(
    "change, tile",
    [
        pytest.param({}, "pp-tma-persist-ovl-ts", id="dense"),
        pytest.param(dict(nkv=1024, hkv=1), "pp-tma-persist-ovl-ts", id="1k-keys-mqa"),
        pytest.param(dict(nkv=256, layout="bhnd"), "pp-tma-persist-ovl-ts", id="short-kv-bhnd"),
        pytest.param(dict(nkv=255), None, id="shorter-kv"),
        pytest.param(dict(causal=True), "pp-tma-persist-ovl-ts", id="causal"),
        pytest.param(dict(causal=True, nkv=1023), "pp-tma-persist-trim-ts", id="causal-512-keys"),
        # Under 512 keys only JAX's launcher takes the trimmed tile (GLUON_DEVICE_TMA_ROUTE).
        pytest.param(dict(causal=True, nkv=511), (None, "pp-tma-persist-trim-ts"), id="causal-short-kv"),
        pytest.param(dict(causal=True, nkv=256, layout="bhnd"), (None, "pp-tma-persist-trim-ts"), id="causal-256-keys"),
        pytest.param(dict(causal=True, nkv=255), None, id="causal-shorter-kv"),
        pytest.param(dict(d=64), "d64-tma-persist-n256-ts", id="d64-1k-keys"),
        pytest.param(dict(d=64, nkv=2048), "d64-c3-tma-persist-ts", id="d64-2k-keys"),
        pytest.param(dict(d=64, nkv=1023), None, id="d64-short-kv"),
        pytest.param(dict(d=64, causal=True, nkv=16384), "d64-c3-tma-persist-trim-ts", id="d64-causal-16k"),
        pytest.param(dict(d=64, causal=True, nkv=4096), "d64-c3-tma-persist-trim-ts", id="d64-causal-4k"),
        pytest.param(dict(d=64, causal=True, nkv=4095), "d64-tma-persist-trim-ts", id="d64-causal-under-4k"),
        pytest.param(dict(d=64, causal=True, nkv=1024), "d64-tma-persist-trim-ts", id="d64-causal-1k"),
        pytest.param(dict(d=64, causal=True, nkv=1023), None, id="d64-causal-short-kv"),
        pytest.param(dict(d=256), "d256-tma-persist-ovl-ts", id="d256"),
        pytest.param(dict(d=256, causal=True), "d256-tma-persist-ovl-ts", id="d256-causal"),
        pytest.param(dict(d=256, causal=True, nkv=1023), None, id="d256-causal-short-kv"),
        pytest.param(dict(d=256, causal=True, nkv=4096), "d256-tma-persist-ovl-ts", id="d256-causal-4k"),
        # No TMA tile: the cp.async route's tile.
        pytest.param(dict(d=256, broadcast_k=True), "d256-pp", id="d256-broadcast-k"),
        pytest.param(dict(broadcast_k=True), "pp", id="broadcast-k"),
        # A left window: GLUON_MASKED_TMA_ROUTE's tile, with descriptors only.
        pytest.param(dict(window=(256, 0)), "pp-tma-persist-ovl-ts", id="window"),
        pytest.param(dict(window=(300, -1), nq=1000), "pp-tma-persist-ovl-ts", id="window-left-only"),
        pytest.param(dict(window=(256, 0), broadcast_k=True), None, id="window-broadcast-k"),
        pytest.param(dict(window=(256, 0), d=64), "pp-tma-persist-ovl-ts", id="d64-window"),
        pytest.param(dict(window=(256, 0), d=256), "d256-tma-persist-ovl-ts", id="d256-window"),
        pytest.param(dict(window=(256, 3)), None, id="window-right"),
        pytest.param(dict(window=(256, 0), bottom_right=False, nq=1000), "pp-tma-persist-ovl-ts", id="window-top-left"),
        pytest.param(dict(window=(256, 0), bottom_right=False), "pp-tma-persist-ovl-ts", id="window-top-left-square"),
    ],
)
def test_gluon_tma_route(monkeypatch, change, tile):
    """A launcher that passes tensor descriptors (torch's) takes GLUON_TMA_ROUTE's tile where it
    gives one and no input has a broadcast axis, else GLUON_FORWARD_ROUTE's; one that builds them
    on the device (JAX's) takes the same tile while GLUON_DEVICE_DESCRIPTORS is on, else the
    latter, or GLUON_DEVICE_TMA_ROUTE's where it has one; off Hopper none takes a Gluon tile."""
    tile, device_tile = tile if isinstance(tile, tuple) else (tile, tile)
    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: True)
    c = dict(dict(nq=2100, nkv=2100, d=128, causal=False, window=None, layout="bnhd", broadcast_k=False,
                  bottom_right=True), **change)
    if c["nkv"] == 2100 and c["d"] == 64:
        c["nkv"] = 1024

    def shape(n, h):
        return (2, h, n, c["d"]) if c["layout"] == "bhnd" else (2, n, h, c["d"])

    q, kv = spec(shape(c["nq"], 4)), spec(shape(c["nkv"], 2))
    k = spec(kv.shape, "bfloat16", (0,) + kv.strides[1:]) if c["broadcast_k"] else kv
    options = dict(causal=c["causal"]) if c["window"] is None else dict(window=c["window"])
    plan = core.plan_attention(q, k, kv, layout=c["layout"], bottom_right=c["bottom_right"], **options)
    assert plan.gluon_forward_tile(descriptors="host") == tile
    assert plan.gluon_forward_tile() == plan.gluon_tile
    assert plan.gluon_tile is None or not tuning.GLUON_FORWARD_TILES[plan.gluon_tile]["TMA"]
    # Descriptors built on the device (JAX's launcher) take the same route while enabled.
    monkeypatch.setattr(tuning, "GLUON_DEVICE_DESCRIPTORS", False)
    assert plan.gluon_forward_tile(descriptors="device") == plan.gluon_tile
    monkeypatch.setattr(tuning, "GLUON_DEVICE_DESCRIPTORS", True)
    assert plan.gluon_forward_tile(descriptors="device") == device_tile
    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: False)
    assert plan.gluon_forward_tile(descriptors="host") is None
    assert plan.gluon_forward_tile(descriptors="device") is None
    with pytest.raises(ValueError, match="descriptors"):
        plan.gluon_forward_tile(descriptors=True)


@pytest.mark.parametrize("nq", [1, 17])
def test_split_forward_keeps_the_tl_kernel(monkeypatch, nq):
    """A call of few tiles (a decode step) whose tl forward splits its keys over the SMs runs
    that split forward, not the Gluon route's one program per tile; the same call on a device of
    one SM does not split and takes the Gluon tile."""
    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: True)
    q, kv = spec((2, nq, 4, 128)), spec((2, 2100, 4, 128))
    for multiprocessors, split in ((132, True), (1, False)):
        monkeypatch.setattr(core.runtime, "multiprocessor_count", lambda n=multiprocessors: n)
        plan_mod.clear_plan_cache()
        plan = core.plan_attention(q, kv, kv)
        assert plan.gluon_tile == "pp" and plan.flags["SPLIT_KEYS"] == split
        assert plan.gluon_forward == (not split)
        assert (plan.gluon_forward_tile(descriptors="host") is None) == split
        assert (plan.forward_call({}, None).kernel is _gluon_kernel()) == (not split)
    plan_mod.clear_plan_cache()


@pytest.mark.parametrize("nkv, descriptors, tile", [
    (200, "device", None), (256, "device", "pp-tma-persist-trim-ts"), (511, "device", "pp-tma-persist-trim-ts"),
    (512, "host", "pp-tma-persist-trim-ts"), (4096, "host", "pp-tma-persist-ovl-ts"),
])
def test_either_descriptors(monkeypatch, nkv, descriptors, tile):
    """A launcher that can pass either (Triton's: torch's) takes device-built descriptors below
    HOST_DESCRIPTORS_FROM_KEYS keys and host ones from there; at D = 128 causal that gives it
    the trimmed TMA tile from 256 keys (GLUON_DEVICE_TMA_ROUTE, then GLUON_TMA_ROUTE)."""
    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: True)
    kv = spec((3, nkv, 2, 128))
    plan = core.plan_attention(spec((3, 300, 4, 128)), kv, kv, causal=True)
    assert plan.either_descriptors == descriptors
    assert plan.gluon_forward_tile(plan.either_descriptors) == tile


def test_launch_gives_its_allocator_for_the_launch_only():
    """KernelCall.launch's allocator is the one Triton's launcher sees during that launch (for a
    kernel's global scratch); before and after, and after a launch that raised, the process's own."""
    import triton

    from flashx.core import launch

    if not launch.scratch_allocator_settable():
        pytest.skip("this Triton keeps no allocator flashx can set for one launch")
    seen = []

    def own(size, alignment, stream):
        raise AssertionError("not called")

    def ours(size, alignment, stream):
        raise AssertionError("not called")

    class Kernel:
        def __init__(self, fail):
            self.fail = fail

        def __getitem__(self, grid):
            def run(*args, **kwargs):
                seen.append(launch._ALLOCATOR.get())
                if self.fail:
                    raise RuntimeError("launch failed")
            return run

    before = launch._ALLOCATOR.get()
    triton.set_allocator(own)
    try:
        launch.KernelCall(Kernel(False), (1,), (), (), {}, {}).launch((), allocator=ours)
        assert seen == [ours] and launch._ALLOCATOR.get() is own
        with pytest.raises(RuntimeError, match="launch failed"):
            launch.KernelCall(Kernel(True), (1,), (), (), {}, {}).launch((), allocator=ours)
        assert seen == [ours, ours] and launch._ALLOCATOR.get() is own
        launch.KernelCall(Kernel(False), (1,), (), (), {}, {}).launch(())
        assert seen == [ours, ours, own]
    finally:
        triton.set_allocator(before)


def test_gluon_device_tma_route(monkeypatch):
    """A launcher that builds descriptors on the device takes GLUON_DEVICE_TMA_ROUTE's spans where
    it has them (an entry replaces GLUON_TMA_ROUTE's whole route for its (head dim, causal); here
    one for D = 128 causal that differs from 1k keys, since flashx's own table is empty now):
    from 512 to 1k keys both launchers run the persistent trimmed tile, and below 512 the tl
    forward; non-causal calls take the same tile."""
    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: True)
    monkeypatch.setattr(tuning, "GLUON_DEVICE_DESCRIPTORS", True)
    override = ((512, "pp-tma-persist-trim-ts"), (1024, "pp-tma-c240-ovl-ts"))  # the whole (D, causal) route
    monkeypatch.setattr(tuning, "GLUON_DEVICE_TMA_ROUTE", {(128, True): override})
    for nkv in (1024, 1500, 16384):
        q, kv = spec((1, 1500, 4, 128)), spec((1, nkv, 2, 128))
        plan = core.plan_attention(q, kv, kv, causal=True)
        assert plan.gluon_forward_tile(descriptors="host") == "pp-tma-persist-ovl-ts"
        assert plan.gluon_forward_tile(descriptors="device") == "pp-tma-c240-ovl-ts"
    short = spec((1, 1000, 2, 128))
    plan = core.plan_attention(spec((1, 1500, 4, 128)), short, short, causal=True)
    assert plan.gluon_forward_tile(descriptors="host") == "pp-tma-persist-trim-ts"
    assert plan.gluon_forward_tile(descriptors="device") == "pp-tma-persist-trim-ts"
    shorter = spec((1, 500, 2, 128))
    plan = core.plan_attention(spec((1, 1500, 4, 128)), shorter, shorter, causal=True)
    assert plan.gluon_forward_tile(descriptors="device") is plan.gluon_forward_tile(descriptors="host") is None
    dense = core.plan_attention(spec((1, 1500, 4, 128)), spec((1, 1500, 2, 128)), spec((1, 1500, 2, 128)))
    assert dense.gluon_forward_tile(descriptors="device") == dense.gluon_forward_tile(descriptors="host")


@pytest.mark.parametrize("causal", [False, True])
def test_gluon_device_descriptors_call(monkeypatch, causal):
    """With GLUON_DEVICE_DESCRIPTORS, a launcher without host descriptors (JAX's) takes the TMA
    tile with DEVICE_DESCRIPTORS: Q, K and V stay arrays, and the call writes DESCRIPTOR_SCRATCH,
    sized for every program's three descriptors and a 128-byte round-up; without it, the
    cp.async tile, whose DESCRIPTOR_SCRATCH is never written."""
    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: True)
    monkeypatch.setattr(core.runtime, "multiprocessor_count", lambda: 132)
    plan = core.plan_attention(spec((2, 2100, 4, 128)), spec((2, 2100, 2, 128)), spec((2, 2100, 2, 128)), causal=causal)
    q, k, v = object(), object(), object()
    monkeypatch.setattr(tuning, "GLUON_DEVICE_DESCRIPTORS", False)
    plain = plan.forward_call(dict(Q=q, K=k, V=v), None, descriptors="device")
    assert not plain.constexprs["TMA"] and not plain.constexprs["DEVICE_DESCRIPTORS"]
    assert plain.outputs == ("O", "LSE", "DESCRIPTOR_SCRATCH") and plain.writes == ("O", "LSE")
    monkeypatch.setattr(tuning, "GLUON_DEVICE_DESCRIPTORS", True)
    call = plan.forward_call(dict(Q=q, K=k, V=v), None, descriptors="device")
    tile = tuning.GLUON_FORWARD_TILES[plan.gluon_forward_tile(descriptors="device")]
    assert tile["TMA"] and call.constexprs["DEVICE_DESCRIPTORS"]
    assert {name: call.constexprs[name] for name in tile} == tile
    assert call.writes == call.outputs == ("O", "LSE", "DESCRIPTOR_SCRATCH")
    args = dict(zip(kernel_params(call.kernel)[0], call.args))
    assert (args["Q"], args["K"], args["V"]) == (q, k, v)
    # A program per SM (persistent), else per 128 query rows of each (head, batch).
    assert call.grid == ((132, 1, 1) if tile["PERSISTENT"] else (17, 4, 2))
    assert plan_mod.descriptor_scratch_bytes(call.grid) == math.prod(call.grid) * tuning.GLUON_DESCRIPTOR_BYTES + 127
    # The host-descriptor launch of the same plan is a launch of its own.
    assert not plan.forward_call(dict(Q=q, K=k, V=v), None, descriptors=None).constexprs["DEVICE_DESCRIPTORS"]


class _FakeLibcuda:
    """libcuda's five calls that runtime asks devices with, answering from a list of capabilities
    (device i has 132 - 18 i SMs)."""

    def __init__(self, capabilities, init_status=0):
        self.capabilities, self.init_status = capabilities, init_status

    def cuInit(self, flags):
        return self.init_status

    def cuDeviceGetCount(self, count):
        count._obj.value = len(self.capabilities)
        return 0

    def cuDeviceGet(self, device, ordinal):
        device._obj.value = ordinal
        return 0

    def cuDeviceGetAttribute(self, value, attribute, device):
        major, minor = self.capabilities[device.value]
        runtime = core.runtime
        value._obj.value = {runtime._CU_CAPABILITY_MAJOR: major, runtime._CU_CAPABILITY_MINOR: minor,
                            runtime._CU_MULTIPROCESSOR_COUNT: 132 - 18 * device.value}[attribute]
        return 0


@pytest.mark.parametrize(
    "capabilities, init_status, route",
    [
        pytest.param([(9, 0)], 0, True, id="h100"),
        pytest.param([(9, 0), (9, 0)], 0, True, id="two-h100"),
        pytest.param([(9, 0), (8, 0)], 0, False, id="h100-and-a100"),
        pytest.param([(10, 0)], 0, False, id="b200"),
        pytest.param([(8, 9)], 0, False, id="l4"),
        pytest.param([], 0, False, id="no-device"),
        pytest.param([(9, 0)], 100, False, id="driver-fails"),
    ],
)
def test_hopper_gluon_asks_the_driver_for_every_device(monkeypatch, capabilities, init_status, route):
    """The Gluon route is on only where every visible device is sm_90, asked of libcuda (not of
    Triton's driver, which imports torch); FLASHX_GLUON=0 and the interpreter keep it off."""
    runtime = core.runtime
    monkeypatch.setattr(runtime.ctypes, "CDLL", lambda name: _FakeLibcuda(capabilities, init_status))
    assert runtime.cuda_capabilities() == (capabilities if init_status == 0 else [])
    assert runtime._cuda_gpu_present() == bool(capabilities and init_status == 0)  # compiled kernels or not
    monkeypatch.setattr(runtime, "_multiprocessors", None)
    assert runtime.multiprocessor_count() == (132 - 18 * (len(capabilities) - 1) if capabilities and not init_status else 1)
    monkeypatch.setattr(runtime, "INTERPRETER", False)
    monkeypatch.delenv("FLASHX_GLUON", raising=False)
    monkeypatch.setattr(runtime, "triton_version", lambda: runtime.GLUON_TRITON)
    monkeypatch.setattr(runtime, "_hopper_gluon", None)
    assert runtime.hopper_gluon() == route
    # Another Triton's Gluon dialect differs (3.9 removed what the kernels use): the tl kernels,
    # with a warning where the devices would have taken the Gluon ones.
    monkeypatch.setattr(runtime, "triton_version", lambda: (3, 9))
    monkeypatch.setattr(runtime, "_hopper_gluon", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not runtime.hopper_gluon()
    assert [str(w.message) for w in caught if "Triton 3.9" in str(w.message)] == (
        ["flashx: its Hopper fast path (Gluon kernels) is written for Triton 3.6; with Triton 3.9 every call "
         "runs the portable Triton kernels (correct, slower on Hopper)"] if route else [])
    monkeypatch.setattr(runtime, "triton_version", lambda: runtime.GLUON_TRITON)
    monkeypatch.setenv("FLASHX_GLUON", "0")
    monkeypatch.setattr(runtime, "_hopper_gluon", None)
    assert not runtime.hopper_gluon()
    monkeypatch.delenv("FLASHX_GLUON")
    monkeypatch.setattr(runtime, "INTERPRETER", True)
    monkeypatch.setattr(runtime, "_hopper_gluon", None)
    assert not runtime.hopper_gluon()


@pytest.mark.gpu
def test_gpu_hopper_gluon_needs_no_torch():
    """A fresh process that imports no framework learns the device's capability from the driver
    and, on sm_90, turns the Gluon route on without importing torch (no torch CUDA context in a
    JAX process)."""
    import subprocess
    import sys

    probe = ("import sys; from flashx.core import runtime; "
             "print(runtime.cuda_capabilities()); print(runtime.hopper_gluon(), 'torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    capabilities, answer = result.stdout.strip().splitlines()[-2:]
    if set(ast.literal_eval(capabilities)) != {(9, 0)}:
        pytest.skip(f"the Gluon route needs sm_90 devices only; this host has {capabilities}")
    assert answer == "True False"


@pytest.fixture
def gpu_plans(monkeypatch):
    """Plans as on an H200 (GPU tiles, Hopper's Gluon route on), from a clean plan cache."""
    monkeypatch.setattr(plan_mod.runtime, "INTERPRETER", False)
    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: True)
    plan_mod.clear_plan_cache()
    yield
    plan_mod.clear_plan_cache()


def gpu_spec(shape, dtype="bfloat16"):
    return core.ArraySpec(shape, core.dense_strides(shape), dtype, "cuda:0")


@pytest.mark.parametrize(
    "options, d, dtype, kind",
    [
        (dict(), 128, "bfloat16", "dense"),
        (dict(causal=True), 128, "float16", "causal"),
        (dict(window=(255, 0)), 128, "bfloat16", "window"),
        (dict(window=(255, -1)), 128, "bfloat16", "window"),
        (dict(window=(255, 16)), 128, "bfloat16", None),  # a right window wider than causal
        (dict(causal=True, softcap=20.0), 128, "bfloat16", None),
        (dict(causal=True), 128, "float32", None),
        (dict(causal=True), 64, "bfloat16", None),  # D = 64's row statistics are not padded
        (dict(causal=True), 256, "bfloat16", None),  # wider than the kernels hold
    ],
    ids=["dense", "causal-fp16", "causal-window", "left-window", "right-window", "softcap", "fp32", "d64", "d256"],
)
def test_gluon_backward_route(monkeypatch, gpu_plans, options, d, dtype, kind):
    """A backward takes the Gluon dK/dV and dQ tiles that GLUON_DKDV_ROUTE and GLUON_DQ_ROUTE give
    its head dim and kind (dense, causal, or a left window with causal or no right limit), each on
    its own, for 16-bit calls with padded row statistics and nothing else the Gluon kernels do not
    do; with host descriptors, GLUON_DKDV_TMA_ROUTE's dK/dV tile first where Q has no broadcast
    axis; none while the routes are empty, and none off Hopper."""
    q, kv = gpu_spec((2, 700, 4, d), dtype), gpu_spec((2, 900, 2, d), dtype)
    for route in ("GLUON_DKDV_ROUTE", "GLUON_DQ_ROUTE", "GLUON_DKDV_TMA_ROUTE"):
        monkeypatch.setattr(tuning, route, {})
    assert core.plan_attention(q, kv, kv, **options).gluon_backward_tiles("host") == (None, None)
    plan_mod.clear_plan_cache()
    kinds = ("dense", "causal", "window")
    monkeypatch.setattr(tuning, "GLUON_DKDV_ROUTE", {(d, k): "dkdv" for k in kinds})
    plan = core.plan_attention(q, kv, kv, **options)
    assert plan.gluon_backward_tiles() == ((None, None) if kind is None else ("dkdv", None))
    monkeypatch.setattr(tuning, "GLUON_DQ_ROUTE", {(d, k): "dq" for k in kinds})
    assert plan.gluon_backward_tiles() == ((None, None) if kind is None else ("dkdv", "dq"))
    monkeypatch.setattr(tuning, "GLUON_DKDV_TMA_ROUTE", {(d, k): "dkdv-tma" for k in kinds})
    assert plan.gluon_backward_tiles("host") == ((None, None) if kind is None else ("dkdv-tma", "dq"))
    assert plan.gluon_backward_tiles() == ((None, None) if kind is None else ("dkdv", "dq"))
    broadcast = core.ArraySpec(q.shape, (0,) + tuple(q.strides[1:]), dtype, "cuda:0")  # one batch row for both
    assert core.plan_attention(broadcast, kv, kv, **options).gluon_backward_tiles("host")[0] == (None if kind is None else "dkdv")
    with pytest.raises(ValueError, match="descriptors"):
        plan.gluon_backward_tiles("devices")
    monkeypatch.setattr(tuning, "GLUON_DKDV_ROUTE", {})
    monkeypatch.setattr(tuning, "GLUON_DKDV_TMA_ROUTE", {})
    assert plan.gluon_backward_tiles() == ((None, None) if kind is None else (None, "dq"))
    monkeypatch.setattr(core.runtime, "hopper_gluon", lambda: False)
    assert plan.gluon_backward_tiles() == (None, None)


@pytest.mark.parametrize("window", [None, (300, 0)])
@pytest.mark.parametrize("halves", ["dkdv", "dq", "both"])
def test_gluon_backward_calls(monkeypatch, gpu_plans, window, halves):
    """Where Gluon backward tiles are routed, the backward is the row statistics, then dK/dV and
    dQ apart, each the Gluon kernel where its half is routed (dK/dV: grid (key blocks of 128, kv
    heads, batch), writing DK and DV; dQ: grid (query blocks of 128, q heads, batch), writing DQ;
    both binding Q, K, V, dO and the row statistics by name), else the portable kernel's programs
    alone; with gluon=False, a gradient whose rows are not contiguous, or a bias gradient, the
    portable launches."""
    from flashx.core.gluon_backward import gluon_attention_dkdv_kernel, gluon_attention_dq_kernel

    kinds = ("causal", "window")
    for route in ("GLUON_DKDV_ROUTE", "GLUON_DQ_ROUTE", "GLUON_DKDV_TMA_ROUTE"):
        monkeypatch.setattr(tuning, route, {})
    if halves in ("dkdv", "both"):
        monkeypatch.setattr(tuning, "GLUON_DKDV_ROUTE", {(128, k): "dkdv" for k in kinds})
    if halves in ("dq", "both"):
        monkeypatch.setattr(tuning, "GLUON_DQ_ROUTE", {(128, k): "dq" for k in kinds})
    q, kv = gpu_spec((2, 700, 4, 128)), gpu_spec((2, 900, 2, 128))
    plan = core.plan_attention(q, kv, kv, causal=window is None, window=window)
    arrays = {name: object() for name in ("Q", "K", "V", "O", "DO", "LSE", "DELTA", "LSE_LOG2")}
    dkdv, dq = _dkdv_and_dq(plan.backward_calls(arrays, None, False, q))
    assert (dkdv.kernel is gluon_attention_dkdv_kernel) is (halves != "dq")
    assert (dq.kernel is gluon_attention_dq_kernel) is (halves != "dkdv")
    # Either half alone (the other's inputs take no gradient): its own launch, Gluon or not.
    alone = [gradient_launches(plan.backward_calls(arrays, None, False, q, need_dkdv=need_dkdv, need_dq=not need_dkdv))
             for need_dkdv in (False, True)]
    assert [[c.kernel for c in calls] for calls in alone] == [[dq.kernel], [dkdv.kernel]]
    assert set(dkdv.writes) == DKDV and ROW_STATS | {"DQ"} <= set(dq.writes) <= DQ_STATS
    # dQ's launch, tl or Gluon (tuning.DQ_ROW_STATS, GLUON_DQ_ROW_STATS), comes first and writes
    # the row statistics, over every padded row; dK/dV's reads them.
    calls = plan.backward_calls(arrays, None, False, q)
    assert calls[0].kernel is dq.kernel and calls[1].kernel is dkdv.kernel and len(calls) == 2
    assert dq.grid[0] * dq.constexprs.get("BLOCK_M", plan.tiles.dq.block_m) >= plan.row_stats_shape[-1]
    if halves != "dkdv":  # without GLUON_DQ_ROW_STATS the Gluon dQ reads them after the preprocess
        monkeypatch.setattr(tuning, "GLUON_DQ_ROW_STATS", False)
        calls = plan.backward_calls(arrays, None, False, q)
        assert calls[0].kernel is plan_mod.attention_backward_preprocess_kernel and calls[2].writes == ("DQ",)
        assert not calls[2].constexprs["ROW_STATS"]
        monkeypatch.setattr(tuning, "GLUON_DQ_ROW_STATS", True)
    if halves != "dq":
        assert dkdv.outputs == ("DK", "DV", "DESCRIPTOR_SCRATCH") and dkdv.writes == ("DK", "DV")
        assert dkdv.grid == (8, 2, 2) and dkdv.options["num_warps"] == 4 and not dkdv.constexprs["DEVICE_DESCRIPTORS"]
        assert {n: dkdv.constexprs[n] for n in tuning.GLUON_DKDV_TILES["dkdv"]} == tuning.GLUON_DKDV_TILES["dkdv"]
    else:
        assert not dkdv.constexprs["RUN_DQ"]
    if halves != "dkdv":
        assert dq.outputs == ("DQ",) + core.ROW_STATS_OUTPUTS and dq.grid == (6, 4, 2) and dq.options["num_warps"] == 4
        assert dq.constexprs["ROW_STATS"] and not dq.constexprs["HAS_DLSE"]
        assert {n: dq.constexprs[n] for n in tuning.GLUON_DQ_TILES["dq"]} == tuning.GLUON_DQ_TILES["dq"]
    else:
        assert not dq.constexprs["RUN_DKDV"]
    for call in (c for c in (dkdv, dq) if c.kernel in (gluon_attention_dkdv_kernel, gluon_attention_dq_kernel)):
        assert call.constexprs["LIMIT_LEFT"] is (window is not None) and call.constexprs["LIMIT_RIGHT"]
        args = dict(zip(kernel_params(call.kernel)[0], call.args))
        assert all(args[n] is arrays[n] for n in ("Q", "K", "V", "DO", "LSE_LOG2", "DELTA"))
        assert (args["gqa_group"], args["seqlen_q"], args["seqlen_kv"], args["window_left"]) == (
            2, 700, 900, window[0] if window else 0)
        assert args["stride_rh"] == plan.row_stats_shape[2] and plan.row_stats_shape[2] % 128 == 0
    gluon_kernels = {gluon_attention_dkdv_kernel, gluon_attention_dq_kernel}
    odd = spec((2, 700, 4, 128), strides=(700 * 4 * 256, 4 * 256, 256, 2))
    for calls in (plan.backward_calls(arrays, None, False, q, gluon=False), plan.backward_calls(arrays, None, False, odd),
                  plan.backward_calls(arrays, None, True, q)):
        assert not gluon_kernels & {call.kernel for call in calls}


def test_gluon_backward_descriptors(monkeypatch, gpu_plans):
    """With host descriptors and a TMA dK/dV tile routed, only the Gluon dK/dV launch binds Q and
    dO as descriptors (over [B, Nq, Hq, D], dO with its own strides, 64-row blocks) with the
    tile's constexprs; the preprocess and dQ keep the arrays. With device descriptors (while
    GLUON_DEVICE_DESCRIPTORS), the launch keeps the arrays, builds the descriptors itself and
    writes DESCRIPTOR_SCRATCH. A dO with a broadcast axis, or a launcher without descriptors,
    takes the cp.async tile."""
    from flashx.core.gluon_backward import gluon_attention_dkdv_kernel

    described = []

    def fake_descriptor(array, shape, strides, rows, dtype):
        described.append((array, tuple(shape), tuple(strides), rows, dtype))
        return ("descriptor", array)

    monkeypatch.setattr(plan_mod, "gluon_tma_descriptor", fake_descriptor)
    monkeypatch.setattr(tuning, "GLUON_DKDV_ROUTE", {(128, "causal"): "dkdv"})
    monkeypatch.setattr(tuning, "GLUON_DKDV_TMA_ROUTE", {(128, "causal"): "dkdv-tma"})
    monkeypatch.setattr(tuning, "GLUON_DQ_ROUTE", {(128, "causal"): "dq"})  # first: it writes the row statistics
    q, kv = gpu_spec((2, 700, 4, 128)), gpu_spec((2, 900, 2, 128))
    plan = core.plan_attention(q, kv, kv, causal=True)
    arrays = {name: object() for name in ("Q", "K", "V", "O", "DO", "LSE", "DELTA", "LSE_LOG2")}
    grad_out = spec((2, 700, 4, 128), strides=(700 * 4 * 256, 4 * 256, 256, 1))  # dO in rows of 256
    calls = plan.backward_calls(arrays, None, False, grad_out, descriptors="host")
    dkdv, _ = _dkdv_and_dq(calls)
    assert dkdv.kernel is gluon_attention_dkdv_kernel
    tile = tuning.GLUON_DKDV_TILES["dkdv-tma"]
    assert tile["TMA"] and {n: dkdv.constexprs[n] for n in tile} == tile
    args = dict(zip(kernel_params(dkdv.kernel)[0], dkdv.args))
    assert args["Q"] == ("descriptor", arrays["Q"]) and args["DO"] == ("descriptor", arrays["DO"])
    assert args["K"] is arrays["K"] and args["V"] is arrays["V"]
    assert described == [(arrays["Q"], (2, 700, 4, 128), (700 * 512, 512, 128, 1), 64, "bfloat16"),
                         (arrays["DO"], (2, 700, 4, 128), (700 * 1024, 1024, 256, 1), 64, "bfloat16")]
    assert not dkdv.constexprs["DEVICE_DESCRIPTORS"] and dkdv.writes == ("DK", "DV")
    for call in (c for c in calls if c is not dkdv):
        bound = dict(zip(kernel_params(call.kernel)[0], call.args))
        assert all(bound[n] is arrays[n] for n in ("Q", "DO") if n in bound)
    described.clear()
    # On the device (jax-triton's launcher): the kernel builds them, in its DESCRIPTOR_SCRATCH.
    dkdv, _ = _dkdv_and_dq(plan.backward_calls(arrays, None, False, grad_out, descriptors="device"))
    assert dkdv.constexprs["TMA"] and dkdv.constexprs["DEVICE_DESCRIPTORS"]
    assert dkdv.writes == ("DK", "DV", "DESCRIPTOR_SCRATCH") == dkdv.outputs
    args = dict(zip(kernel_params(dkdv.kernel)[0], dkdv.args))
    assert args["Q"] is arrays["Q"] and args["DO"] is arrays["DO"]
    broadcast = spec((2, 700, 4, 128), strides=(0, 512, 128, 1))
    for calls in (plan.backward_calls(arrays, None, False, broadcast, descriptors="host"),
                  plan.backward_calls(arrays, None, False, broadcast, descriptors="device"),
                  plan.backward_calls(arrays, None, False, q)):
        assert calls[1].kernel is gluon_attention_dkdv_kernel and not calls[1].constexprs["TMA"]
        assert not calls[1].constexprs["DEVICE_DESCRIPTORS"] and calls[1].writes == ("DK", "DV")
    # dO whose rows are not contiguous: the portable kernels, and no descriptor built.
    columns = spec((2, 700, 4, 128), strides=(700 * 4 * 128, 1, 700, 700 * 4))
    calls = plan.backward_calls(arrays, None, False, columns, descriptors="host")
    assert gluon_attention_dkdv_kernel not in {call.kernel for call in calls}
    monkeypatch.setattr(tuning, "GLUON_DEVICE_DESCRIPTORS", False)
    assert plan.gluon_backward_tiles("device") == ("dkdv", "dq")
    assert described == []

@pytest.mark.parametrize("layout", ["bnhd", "bhnd"])
def test_gluon_backward_tma_store_binds_gradient_descriptors(monkeypatch, gpu_plans, layout):
    """A dK/dV tile with TMA_STORE ("dkdv-tma-ts") takes DK and DV as host descriptors over their
    logical [B, Nkv, Hkv, D] views with [1, 64, 1, D] blocks where the launcher passes
    descriptors (torch's), and as arrays where the kernel builds them (JAX's); the other outputs,
    and every output of a tile without it, stay as they are."""
    described = []

    def fake_descriptor(array, shape, strides, rows, dtype, columns=None):
        described.append((array, tuple(shape), tuple(strides), rows, dtype, columns))
        return ("descriptor", array)

    monkeypatch.setattr(plan_mod, "gluon_tma_descriptor", fake_descriptor)
    monkeypatch.setitem(tuning.GLUON_DKDV_TILES, "dkdv-tma-ts", dict(tuning.GLUON_DKDV_TILES["dkdv-tma"], TMA_STORE=True))
    monkeypatch.setattr(tuning, "GLUON_DKDV_TMA_ROUTE", {(128, "causal"): "dkdv-tma-ts"})
    b, nq, nkv, hq, hkv, d = 2, 700, 900, 4, 2, 128

    def shape(n, h):
        return (b, h, n, d) if layout == "bhnd" else (b, n, h, d)

    q, kv = gpu_spec(shape(nq, hq)), gpu_spec(shape(nkv, hkv))
    plan = core.plan_attention(q, kv, kv, causal=True, layout=layout)
    arrays = {name: object() for name in ("Q", "K", "V", "O", "DO", "LSE", "DELTA", "LSE_LOG2")}
    outputs = {name: object() for name in ("DK", "DV", "DQ")}
    placeholder = object()
    dkdv, dq = _dkdv_and_dq(plan.backward_calls(arrays, None, False, q, descriptors="host"))
    assert dkdv.constexprs["TMA_STORE"] and not dkdv.constexprs["DEVICE_DESCRIPTORS"]
    described.clear()  # Q's and dO's
    bound = plan.launch_outputs(dkdv, outputs, placeholder)
    assert bound == (("descriptor", outputs["DK"]), ("descriptor", outputs["DV"]), placeholder)
    row, head = (d, nkv * d) if layout == "bhnd" else (hkv * d, d)
    want = ((b, nkv, hkv, d), (nkv * hkv * d, row, head, 1), 64, "bfloat16", d)
    assert described == [(outputs["DK"], *want), (outputs["DV"], *want)]
    assert plan.launch_outputs(dq, outputs, placeholder) == tuple(outputs.get(n, placeholder) for n in dq.outputs)
    dkdv, _ = _dkdv_and_dq(plan.backward_calls(arrays, None, False, q, descriptors="device"))
    assert dkdv.constexprs["TMA_STORE"] and dkdv.constexprs["DEVICE_DESCRIPTORS"]
    assert plan.launch_outputs(dkdv, outputs, placeholder) == (outputs["DK"], outputs["DV"], placeholder)
    monkeypatch.setattr(tuning, "GLUON_DKDV_TMA_ROUTE", {(128, "causal"): "dkdv-tma"})
    dkdv, _ = _dkdv_and_dq(plan.backward_calls(arrays, None, False, q, descriptors="host"))
    assert plan.launch_outputs(dkdv, outputs, placeholder) == (outputs["DK"], outputs["DV"], placeholder)
    assert len(described) == 4  # the last two calls' Q and dO only


@pytest.mark.parametrize("kv_blocks, grid", [(8, (32, 1, 1)), (100, (132, 1, 1))])
def test_gluon_backward_persistent_grid(monkeypatch, gpu_plans, kv_blocks, grid):
    """The persistent dK/dV tile ("dkdv-tma-persist", not routed) launches one program per tile
    up to one per multiprocessor, and passes the kv heads and batches its walk decodes tiles by;
    host or device descriptors alike. The other tiles keep the (key blocks, kv heads, batch) grid."""
    monkeypatch.setattr(plan_mod, "gluon_tma_descriptor", lambda *a: "descriptor")
    monkeypatch.setattr(core.runtime, "multiprocessor_count", lambda: 132)
    monkeypatch.setattr(tuning, "GLUON_DKDV_ROUTE", {(128, "causal"): "dkdv"})
    monkeypatch.setattr(tuning, "GLUON_DKDV_TMA_ROUTE", {(128, "causal"): "dkdv-tma-persist"})
    q = gpu_spec((2, 128 * kv_blocks - 5, 4, 128))
    kv = gpu_spec((2, 128 * kv_blocks - 5, 2, 128))
    plan = core.plan_attention(q, kv, kv, causal=True)
    arrays = {name: object() for name in ("Q", "K", "V", "O", "DO", "LSE", "DELTA", "LSE_LOG2")}
    for descriptors in ("host", "device"):
        dkdv, _ = _dkdv_and_dq(plan.backward_calls(arrays, None, False, q, descriptors=descriptors))
        assert dkdv.constexprs["PERSISTENT"] and dkdv.constexprs["TMA"] and dkdv.grid == grid
        args = dict(zip(kernel_params(dkdv.kernel)[0], dkdv.args))
        assert (args["num_heads_kv"], args["num_batches"], args["gqa_group"]) == (2, 2, 2)
    dkdv, _ = _dkdv_and_dq(plan.backward_calls(arrays, None, False, q))  # no descriptors: the cp.async tile
    assert not dkdv.constexprs["PERSISTENT"] and dkdv.grid == (kv_blocks, 2, 2)

def test_gluon_backward_walks_block_maps(monkeypatch, gpu_plans):
    """A call with a 128 x 128 block map (mask_mod, causal folded in) is kind "map": its Gluon
    launches bind the map (dK/dV the transposed lists, dQ the rows' lists) with the map's strides,
    walk each map block in two 64-row (dK/dV) or 64-key (dQ) steps, and call mask_mod on its
    partial blocks; a map of other blocks, or mask_mod without a map, takes no Gluon kernel."""
    import triton

    from flashx.core.gluon_backward import gluon_attention_dkdv_kernel, gluon_attention_dq_kernel

    @triton.jit
    def documents(b, h, q_idx, kv_idx):
        return (q_idx // 300) == (kv_idx // 300)

    monkeypatch.setattr(tuning, "GLUON_DKDV_ROUTE", {(128, "map"): "dkdv"})
    monkeypatch.setattr(tuning, "GLUON_DQ_ROUTE", {(128, "map"): "dq"})
    q = gpu_spec((2, 900, 4, 128))
    bm = plan_mod.plan_block_mask(documents, None, 4, 900, 900, causal=True)
    plan = core.plan_attention(q, q, q, causal=True, mask_mod=documents, block_mask=bm)
    assert plan.gluon_backward_tiles() == ("dkdv", "dq")
    arrays = {name: object() for name in ("Q", "K", "V", "O", "DO", "LSE", "DELTA", "LSE_LOG2", "MAP_COUNTS",
                                          "MAP_INDICES", "MAP_T_COUNTS", "MAP_T_INDICES")}
    dkdv, dq = _dkdv_and_dq(plan.backward_calls(arrays, None, False, q))
    assert (dkdv.kernel, dq.kernel) == (gluon_attention_dkdv_kernel, gluon_attention_dq_kernel)
    for call, lists in ((dkdv, ("MAP_T_COUNTS", "MAP_T_INDICES")), (dq, ("MAP_COUNTS", "MAP_INDICES"))):
        assert call.constexprs["BLOCK_MAP"] and call.constexprs["MAP_STEPS"] == 2
        assert call.constexprs["HAS_MASK_MOD"] and call.constexprs["MASK_MOD"] is plan.flags["MASK_MOD"]
        args = dict(zip(kernel_params(call.kernel)[0], call.args))
        assert all(args[n] is arrays[n] for n in lists)
    args = dict(zip(kernel_params(dkdv.kernel)[0], dkdv.args))
    # The map broadcasts over the batch (B=None): its batch strides are 0, its head strides not.
    assert args["stride_tcb"] == 0 and args["stride_tch"] == 8 * 2 and args["stride_tcq"] == 2
    assert args["stride_tik"] == 8 and args["stride_tiq"] == 2 * 8
    args = dict(zip(kernel_params(dq.kernel)[0], dq.args))
    assert args["stride_cb"] == 0 and args["stride_ik"] == 8
    plan_mod.clear_plan_cache()
    other = plan_mod.plan_block_mask(documents, None, 4, 900, 900, causal=True, blocks=(64, 128))
    assert core.plan_attention(q, q, q, causal=True, mask_mod=documents, block_mask=other).gluon_backward_tiles() == (None, None)
    assert core.plan_attention(q, q, q, causal=True, mask_mod=documents).gluon_backward_tiles() == (None, None)


@pytest.mark.parametrize("window", [None, (200, 0)])
def test_gluon_forward_walks_block_maps_and_windows(gpu_plans, window):
    """A call with a 128 x 128 block map (mask_mod, causal or a window folded in) or a left window
    takes GLUON_MASKED_TMA_ROUTE's tile from launchers with descriptors (none from those without:
    the cp.async tiles walk no map); the launch binds the map's rows and strides and window_left,
    and its constexprs say how to walk and mask them. A map of other blocks keeps the tl forward."""
    import triton

    from flashx.core.gluon_forward import gluon_attention_forward_kernel

    @triton.jit
    def documents(b, h, q_idx, kv_idx):
        return (q_idx // 300) == (kv_idx // 300)

    q = gpu_spec((2, 900, 4, 128))
    mask = dict(causal=True) if window is None else dict(window=window)
    bm = plan_mod.plan_block_mask(documents, None, 4, 900, 900, **mask)
    arrays = {name: object() for name in ("Q", "K", "V", "MAP_COUNTS", "MAP_INDICES")}
    tile = tuning.GLUON_MASKED_TMA_ROUTE[(128, "map")]
    calls = [dict(mask, mask_mod=documents, block_mask=bm)] + ([dict(window=window)] if window else [])
    for options in calls:
        plan = core.plan_attention(q, q, q, **options)
        assert plan.gluon_forward_tile(descriptors="host") == tile
        assert plan.gluon_forward_tile(descriptors="device") == tile
        assert plan.gluon_forward_tile() is None
        call = plan.forward_call(arrays, None, descriptors="device")
        assert call.kernel is gluon_attention_forward_kernel
        args = dict(zip(kernel_params(call.kernel)[0], call.args))
        mapped = "block_mask" in options
        assert call.constexprs["BLOCK_MAP"] is mapped and call.constexprs["HAS_MASK_MOD"] is mapped
        assert call.constexprs["LIMIT_LEFT"] is (window is not None)
        assert call.constexprs["MAP_STEPS"] == 1 and args["window_left"] == (window or (0,))[0]
        if mapped:
            assert call.constexprs["MASK_MOD"] is plan.flags["MASK_MOD"]
            assert args["MAP_COUNTS"] is arrays["MAP_COUNTS"] and args["MAP_INDICES"] is arrays["MAP_INDICES"]
            # The map broadcasts over the batch (B=None): its batch strides are 0.
            assert args["stride_cb"] == 0 and args["stride_ch"] == 8 * 2 and args["stride_ik"] == 8
    plan_mod.clear_plan_cache()
    other = plan_mod.plan_block_mask(documents, None, 4, 900, 900, **mask, blocks=(64, 128))
    plan = core.plan_attention(q, q, q, **mask, mask_mod=documents, block_mask=other)
    assert plan.gluon_forward_tile(descriptors="host") is None


_COMPILE_HOOK_CHECK = '''
from flashx.core import compile_hook  # flashx first: without a GPU it sets up the interpreter

import threading

from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import compiler as triton_compiler
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import tma

# Triton 3.9 renamed the TMA store (3.6, the GPU image's, has the old name).
tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global


@gluon.jit
def store_through_device_map(X, rows):
    # A tile of zeros stored by TMA through a map built on the device, in Triton's global scratch.
    layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    desc = tma.make_tensor_descriptor(X, [rows, 64], [64, 1], [64, 64], layout)
    values = gl.zeros([64, 64], gl.float16, gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0]))
    tile = gl.allocate_shared_memory(gl.float16, [64, 64], layout, values)
    tma_store(desc, [0, 0], tile)
    tma.store_wait(0)


seen = []


def earlier_hook(*args):  # Triton >= 3.7 also calls it with nothing, for its part of a cache key
    if not args:
        return "earlier", "earlier"
    seen.append(args[1]["ptx"])


def compiled(variant, hook=True, ptx_only=False):
    source = GluonASTSource(store_through_device_map, {"X": "*fp16", "rows": "i32"}, {})
    # Each variant its own cache entry (Triton 3.6's key does not see the hook).
    env = {**triton_compiler.get_cache_invalidating_env_vars(), "FLASHX_CHECK_VARIANT": variant}
    options = dict(target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4), _env_vars=env)
    if not hook:
        return triton_compiler.compile(source, **options)
    with compile_hook.installed(ptx_only=ptx_only):
        assert knobs.runtime.add_stages_inspection_hook is compile_hook._stage_hook
        assert knobs.runtime.add_stages_inspection_hook()[0] == "earlier" + compile_hook.HOOK_KEY
        return triton_compiler.compile(source, **options)


knobs.runtime.add_stages_inspection_hook = earlier_hook
name = "store_through_device_map"
plain = compiled("plain", hook=False)
scratch = plain.metadata.global_scratch_size
assert scratch >= 128 and "%fxs" not in plain.asm["ptx"], scratch
assert compiled("not-shared").asm["ptx"] == plain.asm["ptx"]  # not in SHARED_SLOT_KERNELS: untouched
assert knobs.runtime.add_stages_inspection_hook is earlier_hook and len(seen) == 2  # chained, then put back

compile_hook.SHARED_SLOT_KERNELS = frozenset({name})
one_slot = compiled("one-slot")
assert one_slot.asm["ptx"] == compile_hook.with_one_scratch_slot(plain.asm["ptx"], name, scratch)
assert f"mul.wide.s32 %fxs_offset, %fxs5, {scratch};" in one_slot.asm["ptx"] and len(one_slot.asm["cubin"]) > 0
ptx_only = compiled("ptx-only", ptx_only=True)  # JAX's builder points the scratch elsewhere itself
assert ptx_only.asm["ptx"] == plain.asm["ptx"] and ptx_only.asm["cubin"] == b""

# Overlapping users: the hook stays until the last leaves; a thread's ptx_only is its own.
inside, leave = threading.Event(), threading.Event()
flags = []


def other_thread():
    with compile_hook.installed(ptx_only=True):
        flags.append(compile_hook._state.ptx_only)
        inside.set()
        leave.wait(60)


worker = threading.Thread(target=other_thread)
with compile_hook.installed():
    worker.start()
    inside.wait(60)
    assert flags == [True] and not compile_hook._state.ptx_only
assert knobs.runtime.add_stages_inspection_hook is compile_hook._stage_hook  # the thread is still inside
leave.set()
worker.join(60)
assert knobs.runtime.add_stages_inspection_hook is earlier_hook
print("checked")
'''


def test_compile_hook_puts_device_maps_in_one_slot(tmp_path):
    """core.compile_hook, installed while flashx compiles for Triton's own launcher: a
    SHARED_SLOT_KERNELS kernel that builds a TMA map on the device gets its PTX with every
    program's scratch in one slot (with_one_scratch_slot), others are untouched, a PTX-only compile
    (JAX's) keeps Triton's PTX and drops the cubin, the earlier hook runs first and is put back
    once the last user leaves. A small Gluon kernel compiled offline for sm_90 (Triton's own
    ptxas), in a fresh process: a kernel run through Triton's interpreter leaves the frontend patched."""
    from conftest import check_in_fresh_process

    check_in_fresh_process(tmp_path, "compile_hook_check", _COMPILE_HOOK_CHECK)


def _document_mask(b, h, q_idx, kv_idx):  # a stand-in: folds_mapped_axis only asks whether there is one
    return q_idx >= kv_idx


@pytest.mark.parametrize(
    "options, optional, folds",
    [
        pytest.param(core.CallOptions(causal=True, window=(8, 0), softcap=30.0), {}, True, id="plain-options"),
        pytest.param(core.CallOptions(), {"SLOPES": ((4,), False)}, True, id="slopes-per-head"),
        pytest.param(core.CallOptions(), {"SLOPES": ((2, 4), False)}, False, id="slopes-per-batch"),
        pytest.param(core.CallOptions(), {"SLOPES": ((4,), True)}, False, id="slopes-mapped"),
        pytest.param(core.CallOptions(), {"MASK": ((1, 1, 5, 7), False)}, True, id="mask-broadcast-batch"),
        pytest.param(core.CallOptions(), {"MASK": ((5, 7), False)}, True, id="mask-2d"),
        pytest.param(core.CallOptions(), {"MASK": ((2, 1, 5, 7), False)}, False, id="mask-per-batch"),
        pytest.param(core.CallOptions(), {"MASK": ((1, 1, 5, 7), True)}, False, id="mask-mapped"),
        pytest.param(core.CallOptions(), {"BIAS": ((1, 1, 5, 7), False)}, False, id="bias-gradient-per-slice"),
        pytest.param(core.CallOptions(), {"CU_SEQLENS_Q": ((3,), False), "CU_SEQLENS_K": ((3,), False)}, False, id="varlen"),
        pytest.param(core.CallOptions(), {"SEQUSED_K": ((2,), False)}, False, id="seqused"),
        pytest.param(core.CallOptions(mask_mod=_document_mask), {}, False, id="mask-mod-sees-the-batch"),
        pytest.param(core.CallOptions(score_mod=_document_mask), {}, False, id="score-mod-sees-the-batch"),
    ],
)
def test_folds_mapped_axis(options, optional, folds):
    """A vmapped call folds its mapped axis into the batch only where nothing else depends on the
    batch index (the frontends' vmap rules, tests/test_jax.py and test_torch.py, run both ways)."""
    assert core.folds_mapped_axis(options, optional) is folds


@pytest.mark.parametrize(
    "layout, options, optional, axes",
    [
        pytest.param("bnhd", core.CallOptions(causal=True, window=(8, 0), softcap=30.0), {}, (0, 2), id="bnhd-plain"),
        pytest.param("bhnd", core.CallOptions(), {"SLOPES": (4,)}, (0, 1), id="bhnd-slopes-per-head"),
        pytest.param("varlen", core.CallOptions(causal=True), {"CU_SEQLENS_Q": (3,), "CU_SEQLENS_K": (3,)}, (None, 1),
                     id="varlen-heads-only"),
        pytest.param("bnhd", core.CallOptions(), {"SLOPES": (2, 4)}, None, id="slopes-per-batch"),
        pytest.param("bnhd", core.CallOptions(), {"BIAS": (1, 1, 5, 7)}, None, id="bias"),
        pytest.param("bnhd", core.CallOptions(dropout_p=0.1), {"DROPOUT_SEED": (2,)}, None, id="dropout-draws-by-index"),
        pytest.param("bnhd", core.CallOptions(mask_mod=_document_mask), {}, None, id="mask-mod-sees-the-indices"),
        pytest.param("bnhd", core.CallOptions(score_mod=_document_mask), {}, None, id="score-mod-sees-the-indices"),
    ],
)
def test_splittable_axes(layout, options, optional, axes):
    """The (batch, heads) axes of q, k, v along which a call splits into independent calls (the
    JAX frontend's split over an Explicit mesh, tests/test_jax.py::test_shard_map), none where
    anything sees the global batch or head index."""
    if layout == "varlen":
        q, k = spec((5, 4, 16)), spec((5, 2, 16))
        plan = core.plan_attention(q, k, k, causal=True, cu_seqlens_q=spec((3,), "int32"),
                                   cu_seqlens_k=spec((3,), "int32"), max_seqlen_q=3, max_seqlen_k=3)
    else:
        shape_q, shape_k = ((2, 5, 4, 16), (2, 7, 2, 16)) if layout == "bnhd" else ((2, 4, 5, 16), (2, 2, 7, 16))
        plan = core.plan_attention(spec(shape_q), spec(shape_k), spec(shape_k), layout=layout)
    assert core.splittable_axes(plan, options, optional) == axes


def test_device_split_follows_q_batch_and_k_heads():
    """core.device_split, shared by JAX's Explicit meshes and torch's DTensors: an axis splitting
    q's batch splits q, k, v there; one splitting k's heads splits q's too (GQA); with one kv head
    an axis splitting q's heads splits q alone; a split whose sizes do not divide, one along the
    sequence, and any split of a call that sees the batch or head index are left whole."""
    Split = core.AxisSplit
    gqa = core.plan_attention(spec((4, 5, 8, 16)), spec((4, 7, 2, 16)), spec((4, 7, 2, 16)))
    options = core.CallOptions()
    axes = [("data", 2, 0, 0), ("model", 2, 2, 2), ("seq", 2, 1, 1)]
    assert core.device_split(gqa, options, {}, axes) == {"data": Split(0, 0, 0, False), "model": Split(2, 2, 1, True)}
    # k's heads split where q's are not: q follows k; a second 2-way heads split would not divide Hkv = 2.
    assert core.device_split(gqa, options, {}, [("a", 2, None, 2), ("b", 2, None, 2)]) == {"a": Split(2, 2, 1, True)}
    assert core.device_split(gqa, options, {}, [("a", 3, 0, 0)]) == {}  # B = 4
    mqa = core.plan_attention(spec((4, 8, 5, 16)), spec((4, 1, 7, 16)), spec((4, 1, 7, 16)), layout="bhnd")
    assert core.device_split(mqa, options, {"SLOPES": (8,)}, [("m", 4, 1, None)]) == {"m": Split(1, None, 1, True)}
    varlen = core.plan_attention(spec((9, 4, 16)), spec((9, 2, 16)), spec((9, 2, 16)), cu_seqlens_q=spec((3,), "int32"),
                                 cu_seqlens_k=spec((3,), "int32"), max_seqlen_q=5, max_seqlen_k=5)
    assert core.device_split(varlen, options, {"CU_SEQLENS_Q": (3,), "CU_SEQLENS_K": (3,)},
                             [("t", 2, 0, 0), ("m", 2, 1, 1)]) == {"m": Split(1, 1, 0, True)}
    assert core.device_split(gqa, core.CallOptions(mask_mod=_document_mask), {}, axes) == {}
    # Per-sequence lengths and a paged cache (its first axis pages, not the batch): heads only.
    lengths = {"SEQUSED_K": (4,)}
    assert core.device_split(gqa, options, lengths, axes) == {"model": Split(2, 2, 1, True)}
    paged = core.plan_attention(spec((4, 1, 8, 16)), spec((9, 16, 2, 16)), spec((9, 16, 2, 16)),
                                block_table=spec((4, 3), "int32"), seqused_k=spec((4,), "int32"))
    tables = {"BLOCK_TABLE": (4, 3), "SEQUSED_K": (4,)}
    assert core.device_split(paged, options, tables, [("data", 2, 0, 0), ("model", 2, 2, 2)]) == {"model": Split(2, 2, 1, True)}
    paged_varlen = core.plan_attention(spec((9, 8, 16)), spec((9, 16, 2, 16)), spec((9, 16, 2, 16)),
                                       cu_seqlens_q=spec((3,), "int32"), max_seqlen_q=5, block_table=spec((2, 3), "int32"))
    assert core.device_split(paged_varlen, options, {"CU_SEQLENS_Q": (3,), "BLOCK_TABLE": (2, 3)},
                             [("m", 2, 1, 2)]) == {}


@pytest.mark.parametrize("d", [64, 128, 256])
def test_dropout_backward_pipelines_one_stage_less_at_d256(gpu_plans, d):
    """Dropout's draw takes shared memory in the backward: at D = 256 its dK/dV and dQ kernels
    pipeline one stage less than the same call's without dropout; D = 128 has its own dK/dV tile
    (DROPOUT_DKDV_TILES) and keeps dQ's stages; the forward (whose draw moves nothing between
    threads) and D = 64 keep the tiles as tuned. Nothing else moves."""
    shape = (1, 16384, 2048 // d, d)
    plain = core.plan_attention(gpu_spec(shape), gpu_spec(shape), gpu_spec(shape), causal=True)
    seed = core.ArraySpec((2,), (1,), "int32", "cuda:0")
    dropped = core.plan_attention(gpu_spec(shape), gpu_spec(shape), gpu_spec(shape), causal=True,
                                  dropout_p=0.1, dropout_seed=seed)
    for kind in ("forward", "dkdv", "dq"):
        a, b = getattr(plain.tiles, kind), getattr(dropped.tiles, kind)
        backward = kind != "forward" and d >= tuning.DROPOUT_STAGES_FROM_WIDTH
        fewer = max(a.num_stages - 1, 1) if backward else a.num_stages
        own = tuning.DROPOUT_DKDV_TILES.get(d) if kind == "dkdv" else None
        assert b == (own or dataclasses.replace(a, num_stages=fewer)), kind
