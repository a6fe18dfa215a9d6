"""The benchmark scripts measure what the library runs: the figures behind the plan's routes come
from them."""

import sys
from pathlib import Path

import pytest

from flashx.core import plan as plan_mod

pytest.importorskip("torch")  # the scripts launch through torch
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_gluon_tiles_are_the_measured_variants():
    """Each routed Gluon tile is, by name and in every constexpr, the variant that
    benchmarks/gluon_forward_check.py checks against float64 and times (the route's figures in
    plan.py and NOTES come from those runs), at the head dim it is routed for."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import gluon_forward_check as check
    finally:
        sys.path.pop(0)
    for name, tile in plan_mod.GLUON_FORWARD_TILES.items():
        measured = check._constexprs(check.VARIANTS[name], causal=False)
        assert {k: measured[k] for k in tile} == tile, name
    for table in (plan_mod.GLUON_FORWARD_ROUTE, plan_mod.GLUON_TMA_ROUTE):
        for (head_dim, _causal), route in table.items():
            assert all(check.VARIANTS[name].head_dim == head_dim for _, name in route)
