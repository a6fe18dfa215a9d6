# s73 call 3 (either card; carry [".whl"]; ~5.5 min).
# (1) float32 dots at tf32x3 and tf32 against HEAD's ieee (plan.py's DOT_PRECISION edited in
#     copies of src): s72's f32_probe.py cases D = 128 causal, 64 causal, 128 non-causal (B = 2,
#     N = 2048, GQA 8/2): first-call time, forward and forward + backward ms, errors against
#     float64. Question: is an opt-in (or default) tensor-core precision for float32 worth it?
#     Predicted: tf32 several times faster than ieee (FMA dots), errors ~1e-3; tf32x3 between,
#     errors near ieee's.
# (2) D = 64 1k causal forward beside the peers, 5 rounds (issue 5's 1.5x FA2 cell), with the
#     SM clock and power logged every 200 ms beside it.
set -u
P=benchmarks/results/h200/s72-2026-12-06/logs/call4/f32_probe.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
for prec in tf32x3 tf32; do
  mkdir -p /tmp/$prec && cp -r src /tmp/$prec/
  sed -i "s/DOT_PRECISION=\"ieee\" if q.dtype == \"float32\" else \"tf32\"/DOT_PRECISION=\"$prec\"/" /tmp/$prec/src/flashx/core/plan.py
  grep -c "DOT_PRECISION=\"$prec\"" /tmp/$prec/src/flashx/core/plan.py
done
timeout -s INT -k 5 80 python3 $P ieee 3 > $OUT/probe_ieee.log 2>&1; echo "ieee rc $?"
for prec in tf32x3 tf32; do
  PYTHONPATH=/tmp/site:/tmp/$prec/src timeout -s INT -k 5 80 python3 $P $prec 3 > $OUT/probe_$prec.log 2>&1; echo "$prec rc $?"
done
date -u +%H:%M:%S
mkdir -p $OUT/fwd
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > $OUT/fwd/smi.csv 2>&1 &
SMI=$!
timeout -s INT -k 10 150 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
kill $SMI
date -u +%H:%M:%S
grep -h "^|" $OUT/probe_*.log | cut -c1-260
grep "^|" $OUT/fwd/forward.md | head -8
