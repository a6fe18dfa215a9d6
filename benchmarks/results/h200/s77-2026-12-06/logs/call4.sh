# s77 call 4 (H100; carry [".whl"]): one stage for tf32x3's dQ at D = 128 and its backward at D = 256.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
L=benchmarks/results/h200/s77-2026-12-06/logs
for a in "tf32x3 head 128" "tf32x3 q=32,64,8,1 128" "tf32x3 q=32,32,8,1 128" "tf32x3 head 256" "tf32x3 k=16,16,4,1 256" "tf32x3 q=16,32,4,1 256"; do
  set -- $a
  timeout 60 python3 $L/tile_probe.py $1 "$2" "$2" $3 2>&1 | grep "^|" | tee -a $OUT/probe.md
done
date -u +%H:%M:%S
