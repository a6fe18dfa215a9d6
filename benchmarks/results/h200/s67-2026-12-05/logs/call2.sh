# s67 call 2: the row sums on the tensor cores (s62's two forms of the ones block: mmak K-major,
# mmaw 16 columns) checked under Triton's ptxas 12.8 (torch, the four routed D = 64 tiles), then
# whichever pass timed beside HEAD and s59's form under CUDA 13.0's ptxas (d64c, n1k).
# Trees: .scratch/mma = HEAD + s59 logs' row-sum-mma.patch; mmak / mmaw = mma + s62's patches.
# carry [".whl", ".scratch/mma", ".scratch/mmak", ".scratch/mmaw"]; ~8 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
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
P13=/usr/local/cuda/bin/ptxas
timeout -s INT -k 20 300 python3 benchmarks/ab.py head=src mma13=.scratch/mma/src $ok \
  --env mma13:TRITON_PTXAS_PATH=$P13 --cases d64c n1k --rounds 2 --control > $OUT/ab_mma.log 2>&1; echo "ab mma rc $?"
date -u +%H:%M:%S
tail -n 16 $OUT/ab_mma.log
