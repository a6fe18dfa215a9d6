# Builds .scratch/t_BM_BN_W_S: HEAD's src with the D = 128 dropout dK/dV tile replaced (plan._tile_config), for
# next_call2.sh. Offline (Triton 3.6, sm_90, kernel_stats --offline --d 128 --n 16384 --dropout 0.1), dK/dV stack
# non-causal / causal: HEAD's 64 x 128, 8 warps, 2 stages 168 / 176 bytes; 32 x 128 at 2 stages 8 / 16; at 3 stages
# 8 / 8 (113 KiB); 32 x 64 at 3 stages 0 / 0 (81 KiB); 64 x 64 at 2 stages 56 / 128. (4-warp tiles cannot share
# the one backward launch with dQ's 8 warps.)
set -eu
for cfg in "32 128 8 2" "32 128 8 3" "32 64 8 3" "64 64 8 2"; do
  set -- $cfg; name=t_$1_$2_$3_$4; rm -rf .scratch/$name; mkdir -p .scratch/$name
  git archive HEAD src | tar -x -C .scratch/$name
  python3 - "$name" $1 $2 $3 $4 <<'PY'
import sys
name, bm, bn, w, st = sys.argv[1], *map(int, sys.argv[2:])
p = f".scratch/{name}/src/flashx/core/plan.py"
s = open(p).read()
old = '''for kind, t in (("dkdv", tiles.dkdv), ("dq", tiles.dq))})'''
assert old in s
s = s.replace(old, old + f"""
            if width == 128:
                tiles = dataclasses.replace(tiles, dkdv=dataclasses.replace(
                    tiles.dkdv, block_m={bm}, block_n={bn}, num_warps={w}, num_stages={st}))""")
open(p, "w").write(s)
PY
done
