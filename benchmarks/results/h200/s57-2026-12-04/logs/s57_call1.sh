set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
( timeout -s INT -k 20 330 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider tests/test_variants.py -k "block_mask_under_torch_compile or registry_key or score_mod_under_torch_compile" > $OUT/t_compile_variants.log 2>&1; echo "rc $?" >> $OUT/t_compile_variants.log
  timeout -s INT -k 20 200 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider tests/test_torch.py -k compile > $OUT/t_compile_torch.log 2>&1; echo "rc $?" >> $OUT/t_compile_torch.log ) &
python3 scripts/gpu_tests.py --processes 8 --deadline 480 --log $OUT/tests_gpu.log -m gpu tests > $OUT/tests_gpu_summary.log 2>&1
wait
echo "== compile tests"; tail -n 4 $OUT/t_compile_variants.log $OUT/t_compile_torch.log; grep -h "^FAILED\|^ERROR" $OUT/t_compile_*.log
echo "== gpu tests"; cat $OUT/tests_gpu_summary.log | tail -n 30
