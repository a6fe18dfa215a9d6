# s77 call 7 (H100; carry [".whl"]): one stage for FLOAT32_WIDE_TILES' backward (D > 128 "tf32" and "ieee").
set -u
L=benchmarks/results/h200/s77-2026-12-06/logs
for a in "tf32 head 256" "tf32 k=16,32,4,1;q=32,32,8,1 256" "ieee head 256" "ieee k=16,32,4,1;q=32,32,8,1 256"; do
  set -- $a
  timeout 50 python3 $L/tile_probe.py $1 "$2" "$2" $3 2>&1 | grep "^|" | tee -a $OUT/probe.md
done
