# s77 call 1 (an H100 came for the H200 kind; ~8 min; carry [".whl"]):
# (1) the whole GPU-marked suite on HEAD 9cd15b2 (s76's refactors since 98681c5 ran on the CPU only);
# (2) float32 "tf32x3" D = 128 backward tiles (FLOAT32_TILES[256], which tf32x3 takes there), s75's probe.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
P=benchmarks/results/h200/s77-2026-12-06/logs/tile_probe.py
python3 scripts/gpu_tests.py --processes 8 --deadline 330 --rerun-failed 40 \
  --balance benchmarks/results/h200/s76-2026-12-06/logs/call2/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -8
date -u +%H:%M:%S
for c in head "k=64,32,8,2" "k=32,32,4,2" "k=32,64,8,2" "q=64,32,8,2" "q=32,32,8,2" head; do
  timeout 60 python3 $P tf32x3 "$c" "$c" 128 2>&1 | grep "^|" | tee -a $OUT/probe.md
done
date -u +%H:%M:%S
