set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
/usr/local/cuda/bin/ptxas --version | tail -2; python3 -c "import triton.backends.nvidia.compiler as c; print(c.get_ptxas_version(90).splitlines()[-1])"
git log --oneline -1 2>/dev/null
date -u +%H:%M:%S
( timeout -s INT -k 20 300 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider tests/test_variants.py -k "torch_compile or by_id or gpu_host" > $OUT/t_compile_variants.log 2>&1; echo "rc $?" >> $OUT/t_compile_variants.log
  timeout -s INT -k 20 150 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider tests/test_torch.py -k compile > $OUT/t_compile_torch.log 2>&1; echo "rc $?" >> $OUT/t_compile_torch.log ) &
python3 scripts/gpu_tests.py --processes 8 --deadline 330 --log /tmp/tests_gpu.log -m gpu tests > $OUT/tests_gpu_summary.log 2>&1
wait
grep -h "^FAILED\|^ERROR\|passed\|failed" /tmp/tests_gpu.log | tail -n 40 > $OUT/tests_gpu_tail.log
date -u +%H:%M:%S
timeout -s INT 90 python3 benchmarks/jax_vs_torch.py --n 16384 --cases fwd128c > $OUT/jvt_16k.log 2>&1; echo "jvt rc $?"
date -u +%H:%M:%S
timeout -s INT 100 python3 benchmarks/ab.py --cases n1k fwd --rounds 2 host=src ptxas13=.scratch/p13/src > $OUT/ab_ptxas.log 2>&1; echo "ab rc $?"
date -u +%H:%M:%S
echo "== compile tests"; tail -n 3 $OUT/t_compile_variants.log $OUT/t_compile_torch.log; grep -h "^FAILED\|^ERROR" $OUT/t_compile_*.log
echo "== gpu tests"; tail -n 12 $OUT/tests_gpu_summary.log
echo "== jvt"; grep "fwd D128\|kernels" $OUT/jvt_16k.log
echo "== ab"; tail -n 13 $OUT/ab_ptxas.log
