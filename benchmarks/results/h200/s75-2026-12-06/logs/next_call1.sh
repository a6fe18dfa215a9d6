# s75 (prepared for the next session; the H200 wanted; ~7 min; carry [".whl"]).
# (1) bench_float32.py on the H200 with s75's final float32 tiles (the README's table is an H100's,
#     s75 call 4, taken before "tf32" got its tiles); (2) test_precision.py's GPU tests on the final
#     tiles (s75 ran them on a candidate whose D = 128 "tf32" forward differed); (3) issue 5's
#     D = 64 1k causal forward cell (1.51x FA2 on the H200 in s75, 1.496x in s74).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
mkdir -p $OUT/f32 $OUT/fwd
timeout -s INT -k 10 330 python3 benchmarks/bench_float32.py --quick --out $OUT/f32 > $OUT/f32/log.txt 2>&1; echo "f32 rc $?"
timeout -s INT -k 10 150 python3 -m pytest -q -m gpu tests/test_precision.py > $OUT/tests.log 2>&1; echo "tests rc $?"
timeout -s INT -k 10 100 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
date -u +%H:%M:%S
tail -2 $OUT/tests.log; grep "^|" $OUT/f32/float32.md; grep "^|" $OUT/fwd/forward.md | head -4
