# Prepared in session 61: the D = 128 dropout backward's dK/dV tile (0.85x FA2's dropout backward, s61 call 5),
# four tiles that spill less offline against HEAD's. First: bash benchmarks/results/h200/s61-2026-12-05/logs/make_dropout_tile_trees.sh
# carry [".whl", ".scratch"]; ~5 min. Landing one needs test_dropout.py -m gpu on it.
set -u
date -u +%H:%M:%S
timeout -s INT -k 20 420 python3 benchmarks/ab.py head=src a=.scratch/t_32_128_8_2/src b=.scratch/t_32_128_8_3/src \
  c=.scratch/t_32_64_8_3/src d=.scratch/t_64_64_8_2/src --cases dropout --rounds 2 > $OUT/ab_dropout_tiles.log 2>&1; echo "ab rc $?"
date -u +%H:%M:%S
tail -n 11 $OUT/ab_dropout_tiles.log
