# s84 call 2 (carry [".whl"]; ~4 min): on an H200, issue 5's open cells (s81's next_call2.sh); on
# any other card, the short causal forward at N = 256 that call 1's H100 quick suite read at 1.28x
# FA2 (H200 runs: 1.56-1.57x): where its do_bench time goes (host, flush, the kernel's device
# time) beside FA2 and cuDNN at N = 256 and 512, and the routed trimmed Gluon tile against the tl
# short tile there (a tree without GLUON_DEVICE_TMA_ROUTE's D = 128 causal entry), three rounds.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader)
if [[ "$name" == *H200* ]]; then exec bash benchmarks/results/h200/s81-2026-12-07/logs/next_call2.sh; fi
echo "$name"; date -u +%H:%M:%S
timeout -s INT -k 10 170 python3 benchmarks/dobench_gap.py --cases 64,256,16,128,1 64,512,16,128,1 \
  > $OUT/gap.log 2>&1; echo "gap rc $?"; tail -25 $OUT/gap.log | cut -c1-220
date -u +%H:%M:%S
rm -rf /tmp/tl256; mkdir -p /tmp/tl256; cp -r src /tmp/tl256/
sed -i '/^    (128, True): ((256, "pp-tma-persist-trim-ts"), (1024, "pp-tma-persist-ovl-ts")),$/d' /tmp/tl256/src/flashx/core/tuning.py
diff src/flashx/core/tuning.py /tmp/tl256/src/flashx/core/tuning.py
timeout -s INT -k 10 200 python3 benchmarks/ab.py trim=src tl=/tmp/tl256/src --cases short --only "N256 H16 D128" \
  --rounds 3 --control > $OUT/ab256.log 2>&1; echo "ab rc $?"; tail -8 $OUT/ab256.log | cut -c1-220
date -u +%H:%M:%S
