# s73 call 1 (H200 wanted; either card; carry [".whl"]; ~9 min).
# (1) The whole GPU-marked suite on HEAD (e5b3817: s72's page-ahead forward and float32 tiles;
#     its last full run was s70's, on an H100, before both): 12 processes, 300 s deadline, the
#     failures once more in a fresh process (60 s). JAX's float32 GPU tests run here for the first
#     time on float32's own tiles.
# (2) bench_decode.py --quick --rounds 2 --cuda-graphs with FA2: the README's decode table on the
#     page-ahead kernel (s72's next_call1.sh part 2).
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 12 --deadline 300 --rerun-failed 60 \
  --balance benchmarks/results/h200/s70-2026-12-05/logs/call1b-tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests > $OUT/tests_gpu_summary.log 2>&1
echo "gpu tests rc $?"
date -u +%H:%M:%S
mkdir -p $OUT/dec
timeout -s INT -k 10 170 python3 benchmarks/bench_decode.py --quick --rounds 2 --cuda-graphs \
  --systems flashx_dense flashx_paged_256 sdpa_flash --out $OUT/dec > $OUT/dec/decode.log 2>&1; echo "decode rc $?"
date -u +%H:%M:%S
tail -n 20 $OUT/tests_gpu_summary.log
grep "^|" $OUT/dec/decode.md
