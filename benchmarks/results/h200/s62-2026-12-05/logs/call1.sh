# s62 call 1: (1) the dropout GPU tests (first run of the D = 256 case); (2) s61's four D = 128 dropout
# dK/dV tiles against HEAD's (trees: s61 logs' make_dropout_tile_trees.sh), the D = 128 dropout rows only;
# (3) the row sums on the tensor cores: two new forms checked under Triton's ptxas 12.8 (mmak: the ones
# block K-major, 128-byte swizzle; mmaw: 16 columns, 32-byte swizzle; s59's form faulted there with its
# 8-column unswizzled block), then timed beside s59's form under CUDA 13.0's ptxas.
# Trees: .scratch/mma = HEAD + s59 logs' row-sum-mma.patch; mmak / mmaw = mma with its one line changed.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
timeout -s INT -k 10 100 python3 -m pytest -q -m gpu tests/test_dropout.py > $OUT/tests_dropout.log 2>&1; echo "dropout gpu tests rc $?: $(tail -n 1 $OUT/tests_dropout.log)"
date -u +%H:%M:%S
TILES64="d64-tma-persist-trim-ts d64-tma-persist-n256-ts d64-c3-tma-persist-ts d64-c3-tma-persist-trim-ts"
ok=""
for x in mmak mmaw; do
  PYTHONPATH=/tmp/site:$PWD/.scratch/$x/src timeout -s INT -k 10 80 python3 benchmarks/gluon_forward_check.py \
    --only torch --d 64 --variants $TILES64 > $OUT/check_${x}_torch.log 2>&1; rc=$?
  echo "check $x torch rc $rc: $(grep -c ' OK$' $OUT/check_${x}_torch.log) OK, $(grep -c 'WRONG' $OUT/check_${x}_torch.log) wrong, $(grep -c 'illegal' $OUT/check_${x}_torch.log) illegal"
  if [ $rc = 0 ]; then ok="$ok $x=.scratch/$x/src"; fi
done
date -u +%H:%M:%S
timeout -s INT -k 20 200 python3 benchmarks/ab.py head=src a=.scratch/t_32_128_8_2/src b=.scratch/t_32_128_8_3/src \
  c=.scratch/t_32_64_8_3/src d=.scratch/t_64_64_8_2/src --cases dropout --only "bwd dense B1 N16384 H16 D128" \
  --rounds 2 > $OUT/ab_dropout_tiles.log 2>&1; echo "ab tiles rc $?"
date -u +%H:%M:%S
P13=/usr/local/cuda/bin/ptxas
timeout -s INT -k 20 190 python3 benchmarks/ab.py base13=src mma13=.scratch/mma/src base=src $ok \
  --env base13:TRITON_PTXAS_PATH=$P13 --env mma13:TRITON_PTXAS_PATH=$P13 --cases d64c --rounds 2 > $OUT/ab_mma.log 2>&1; echo "ab mma rc $?"
date -u +%H:%M:%S
tail -n 3 $OUT/tests_dropout.log; tail -n 5 $OUT/ab_dropout_tiles.log; tail -n 7 $OUT/ab_mma.log
