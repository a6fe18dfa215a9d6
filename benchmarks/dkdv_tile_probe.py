#!/usr/bin/env python3
"""jax_vs_torch.py with the D = 128 dK/dV tile forced, to time a tile (or a tile's variant) from both
frontends by device time without editing the plan:

    python benchmarks/dkdv_tile_probe.py TILE [KEY=VALUE ...] CASE ...     # on the GPU, jax-triton installed

TILE: "route" keeps flashx's routes; "cpasync" empties GLUON_DKDV_TMA_ROUTE (the cp.async tile of
GLUON_DKDV_ROUTE runs); "variant" is dkdv-tma-ts with the KEY=VALUE overrides (integers, e.g.
PRODUCER_REGS=32); any other name of GLUON_DKDV_TILES is routed for every kind. CASEs are
jax_vs_torch.py's (bwd128, bwd128c). NOTES v0.28 chose dkdv-tma-ts's producer registers this way.
"""
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    tile, rest = sys.argv[1], sys.argv[2:]
    overrides = {key: int(value) for key, value in (a.split("=") for a in rest if "=" in a)}
    cases = [a for a in rest if "=" not in a]
    from flashx.core import plan

    if tile == "cpasync":
        plan.GLUON_DKDV_TMA_ROUTE.clear()
    elif tile != "route":
        if tile == "variant":
            plan.GLUON_DKDV_TILES[tile] = {**plan.GLUON_DKDV_TILES["dkdv-tma-ts"], **overrides}
        for key in plan.GLUON_DKDV_TMA_ROUTE:
            plan.GLUON_DKDV_TMA_ROUTE[key] = tile
    print("dK/dV TMA route at D = 128 dense:", plan.GLUON_DKDV_TMA_ROUTE.get((128, "dense")), overrides, flush=True)
    sys.argv = ["jax_vs_torch.py", "--cases", *cases]
    runpy.run_path(os.path.join(HERE, "jax_vs_torch.py"), run_name="__main__")


if __name__ == "__main__":
    main()
