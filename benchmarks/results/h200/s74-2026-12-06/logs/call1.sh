# s74 call 1 (prepared in s73; the H200 wanted: issue 5's cells are H200 figures; ~6 min;
# carry [".whl"]). On an H100 (s73, NOTES v0.66) the 1k causal D = 128 backward read 1.45x FA2,
# 1.04x Flex, 0.84x cuDNN and the D = 64 1k causal forward 1.53x FA2; the H200 last read 0.93x
# Flex / 0.74x cuDNN (s71) and 1.49-1.53x FA2 (s68, H100). (1) the backward cell, 3 rounds;
# (2) the forward cell, 5 rounds; (3) the README's decode table on page-ahead; (4) mid2 split vs
# unsplit (s72's next_call1.sh part 1); (5) the Gluon dQ kernel for dense and causal D = 128
# (GLUON_DQ_ROUTE; routed only for windows and maps: at 4k causal it read level in v0.17, at 1k
# it was never timed; offline 168 registers, no stack, against the tl dQ's 215) on bwd1k.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
mkdir -p $OUT/bwd $OUT/fwd $OUT/dec
timeout -s INT -k 10 120 python3 benchmarks/bench_backward.py --d 128 --n 1024 --rounds 3 --no-memory \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/bwd > $OUT/bwd/bwd.log 2>&1; echo "bwd rc $?"
timeout -s INT -k 10 80 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
timeout -s INT -k 10 100 python3 benchmarks/bench_decode.py --quick --rounds 2 --cuda-graphs \
  --systems flashx_dense flashx_paged_256 sdpa_flash --out $OUT/dec > $OUT/dec/decode.log 2>&1; echo "decode rc $?"
mkdir -p /tmp/unsplit && cp -r src /tmp/unsplit/ && sed -i 's/^KV_SPLIT_MAX = 16$/KV_SPLIT_MAX = 1/' /tmp/unsplit/src/flashx/core/tuning.py
timeout -s INT -k 10 150 python3 benchmarks/ab.py split=src unsplit=/tmp/unsplit/src --cases mid2 --rounds 2 --calls 20 \
  --cuda-graphs --json $OUT/mid2.json > $OUT/mid2.log 2>&1; echo "mid2 rc $?"
mkdir -p /tmp/gdq && cp -r src /tmp/gdq/ && sed -i 's/for kind in ("window", "map")}$/for kind in ("dense", "causal", "window", "map")}/' /tmp/gdq/src/flashx/core/tuning.py
grep -n "^GLUON_DQ_ROUTE" /tmp/gdq/src/flashx/core/tuning.py
timeout -s INT -k 10 120 python3 benchmarks/ab.py head=src gluon_dq=/tmp/gdq/src --cases bwd1k --rounds 2 \
  --json $OUT/gdq.json > $OUT/gdq.log 2>&1; echo "gluon dq rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/bwd/backward.md | head -8; grep "^|" $OUT/fwd/forward.md | head -4
grep "^|" $OUT/dec/decode.md; grep "^|" $OUT/mid2.log; grep "^|" $OUT/gdq.log
