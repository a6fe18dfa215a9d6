# s76 (prepared for the next session; the H200 wanted: the command runs nothing on another card;
# ~8 min; carry [".whl"]). Nothing of s75-s76's float32 work has run on an H200: s75's tf32x3
# D = 64, bf16x3 D = 128 and "tf32" tiles, and s76's integer split at D <= 128.
# (1) the whole GPU-marked suite on them (188 passed, 2 skipped on an H100 in s76);
# (2) the float32 table (README's is the H100's, s76 call 3);
# (3) issue 5's D = 64 1k causal forward cell (H200: 1.496x FA2 in s74, 1.514x in s75).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
case "$G" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0;; esac
mkdir -p $OUT/f32 $OUT/fwd
python3 scripts/gpu_tests.py --processes 8 --deadline 330 --rerun-failed 40 \
  --balance benchmarks/results/h200/s76-2026-12-06/logs/call2/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -10
date -u +%H:%M:%S
timeout -s INT -k 10 110 python3 benchmarks/bench_float32.py --quick --out $OUT/f32 > $OUT/f32/log.txt 2>&1; echo "f32 rc $?"
timeout -s INT -k 10 90 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/f32/float32.md | cut -d'|' -f2-8; grep "^|" $OUT/fwd/forward.md | head -3
