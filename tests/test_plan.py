"""The plan's own rules, framework-free: stride alignment, how kernel tiles divide block maps, the
tile table's lookups, and the plan cache (which must never let a bad call through)."""
from __future__ import annotations

import dataclasses

import pytest

from flashx import core
from flashx.core import plan as plan_mod


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
    tiles = plan_mod.KernelTiles(*kernel, 4, 3)
    assert plan_mod._map_ratios(bm, tiles, transposed) == expected
    assert plan_mod._map_ratios(None, tiles, transposed) == dict(MAP_SPLIT=1, MAP_STEPS=1)


def test_gpu_tile_table_lookups(monkeypatch):
    """The GPU table: float32 takes the entry twice as wide, short sequences their own forward,
    and a block map's blocks bound every kernel's tile (so that the tiles divide them)."""
    monkeypatch.setattr(plan_mod.runtime, "INTERPRETER", False)
    table = plan_mod.TUNED_TILES
    assert plan_mod._tile_config(128, 2, False, 4096, None) == table[(128, False)]
    assert plan_mod._tile_config(64, 4, True, 4096, None) == table[(128, True)]
    assert plan_mod._tile_config(256, 4, True, 4096, None) == plan_mod.FLOAT32_WIDE_TILES
    short = plan_mod._tile_config(128, 2, True, plan_mod.SHORT_SEQLEN, None)
    assert short == dataclasses.replace(table[(128, True)], forward=plan_mod.SHORT_FORWARD_TILES[(128, True)])
    assert plan_mod._tile_config(128, 2, True, plan_mod.SHORT_SEQLEN + 1, None) == table[(128, True)]
    mapped = plan_mod._tile_config(128, 2, False, 4096, (64, 32))
    for tiles in (mapped.forward, mapped.dkdv, mapped.dq):
        assert 64 % tiles.block_m == 0 and 32 % tiles.block_n == 0
    for entry in list(table.values()) + list(plan_mod.SHORT_FORWARD_TILES.values()):
        for tiles in (entry.forward, entry.dkdv, entry.dq) if isinstance(entry, plan_mod.TileConfig) else (entry,):
            # every tuned tile divides the default 128 x 128 block map
            assert 128 % tiles.block_m == 0 and 128 % tiles.block_n == 0


def test_plan_cache_returns_one_plan_and_keeps_validating():
    """Equal calls share one plan; a call that differs only in an option's type (1 for True) is
    still validated and refused."""
    q = spec((1, 33, 2, 64))
    options = core.CallOptions(causal=True)
    first = core.plan_call(options, q, q, q, {})
    assert core.plan_call(core.CallOptions(causal=True), q, q, q, {}) is first
    with pytest.raises(TypeError, match="causal"):
        core.plan_call(core.CallOptions(causal=1), q, q, q, {})
    # unhashable options (a list window) are planned without the cache, with the same checks
    listed = core.plan_call(core.CallOptions(window=[4, 0]), q, q, q, {})
    assert listed.flags["LIMIT_LEFT"] and listed.flags["LIMIT_RIGHT"]
