# s84 call 3 (carry [".whl"]; ~3.5 min on an H200, ~2 min on an H100).
# On an H200: issue 5's open cells (s81's next_call2.sh). On any other card: the N = 256 short
# causal forward (B = 64, H = 16, D = 128) under Nsight Compute, one launch at a time: the routed
# trimmed Gluon tile, the tl short tile (a tree without GLUON_DEVICE_TMA_ROUTE's D = 128 causal
# entry), cuDNN and FA2, with DRAM bytes read and written beside the time. The question (NOTES
# v0.77 item 3): does flashx's kernel move more DRAM bytes than cuDNN's (K and V read again by a
# head's second query tile), or the same bytes at a lower rate?
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader)
if [[ "$name" == *H200* ]]; then exec bash benchmarks/results/h200/s81-2026-12-07/logs/next_call2.sh; fi
echo "$name"; date -u +%H:%M:%S
rm -rf /tmp/tl256; mkdir -p /tmp/tl256; cp -r src /tmp/tl256/
sed -i '/^    (128, True): ((256, "pp-tma-persist-trim-ts"), (1024, "pp-tma-persist-ovl-ts")),$/d' /tmp/tl256/src/flashx/core/tuning.py
diff src/flashx/core/tuning.py /tmp/tl256/src/flashx/core/tuning.py
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
for tree in trim:$PWD/src tl:/tmp/tl256/src; do
  label=${tree%%:*}; path=${tree#*:}
  PYTHONPATH=/tmp/site:$path timeout -s INT -k 10 150 ncu --csv --page raw --print-units base --clock-control none \
    --metrics $metrics -k "regex:^(?!.*(distribution|elementwise|vectorized|reduce|fill)).*" \
    python3 benchmarks/ncu_probe.py run 64,256,16,128,1 > $OUT/ncu-$label.csv 2> $OUT/ncu-$label.err
  echo "$label rc $?"
  python3 benchmarks/ncu_probe.py summarize $OUT/ncu-$label.csv | cut -c1-200
  python3 benchmarks/ncu_probe.py summarize $OUT/ncu-$label.csv --top "dram__bytes_(.*)\.sum" | tail -12 | cut -c1-200
done
date -u +%H:%M:%S
