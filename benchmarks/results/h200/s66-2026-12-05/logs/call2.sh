# s66: the two GPU failures of call 1 (H100, whole suite on fa90b0a), with the fxdbg plugin:
# (A) the two failing tests alone; (B) process 4's order up to its failure; (C) test_kv_cache.py's
# never-GPU-run cases. A and C run beside B (correctness only, no timings).
set -u; set -f
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/.scratch/dbg
date -u +%H:%M:%S
timeout -k 10 400 python3 -m pytest -q -p no:cacheprovider -p fxdbg $(cat .scratch/dbg/p4.txt) > $OUT/B_p4_order.log 2>&1 &
B=$!
timeout -k 10 200 python3 -m pytest -q -p no:cacheprovider -p fxdbg tests/test_torch.py -k "new_sequence_length_compiles_nothing or repeated_calls_through" > $OUT/A_alone.log 2>&1
echo "A rc $?"; grep -E "FXDBG|passed|failed|Error" $OUT/A_alone.log | head -20
K="split_keys or kv_splits or packed or jax or cuda_graph or reduce_overhead or paged_decode_gpu or varlen_queries or bad_input"
timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider tests/test_kv_cache.py -k "$K" > $OUT/C_kv_cache.log 2>&1
echo "C rc $?"; tail -n 3 $OUT/C_kv_cache.log
wait $B; echo "B rc $?"; date -u +%H:%M:%S
grep -E "FXDBG|passed|failed" $OUT/B_p4_order.log | head -30
