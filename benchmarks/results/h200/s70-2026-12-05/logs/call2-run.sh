set -u
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 6 --deadline 190 --log $OUT/rerun_tests.log -m gpu $(cat .scratch/s70_rerun.txt) > $OUT/rerun_summary.log 2>&1
echo "rerun rc $?"
date -u +%H:%M:%S
mkdir -p $OUT/decode
timeout -s INT -k 10 110 python3 benchmarks/bench_decode.py --quick --cuda-graphs \
  --systems flashx_dense flashx_paged_256 sdpa_flash sdpa_cudnn --out $OUT/decode > $OUT/decode/decode.log 2>&1
echo "decode rc $?"
date -u +%H:%M:%S
tail -n 12 $OUT/rerun_summary.log
grep "^|" $OUT/decode/decode.md | head -9; tail -5 $OUT/decode/decode.log
