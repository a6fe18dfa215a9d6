set -u
mkdir -p $OUT/tests
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton, jax; print(torch.__version__, triton.__version__, jax.__version__)"
( PYTHONPATH=/tmp/site:$PWD/.scratch/alt/src timeout 500 python3 benchmarks/gluon_forward_check.py --only torch --d 64 128 \
   --variants d64-tma-persist-trim-ts pp-tma-persist-trim-ts d64-c3-tma-persist-trim-ts > $OUT/check_alt.log 2>&1; echo "check_alt rc $?" >> $OUT/check_alt.log ) &
python3 .scratch/split_tests.py 8 520 $OUT/tests tests/
wait
tail -n 4 $OUT/check_alt.log
grep -h "^FAILED\|^ERROR" $OUT/tests/*.log | head -40
