set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
timeout -s INT 480 python3 benchmarks/ab.py --cases n1k fwd --rounds 3 --control --json $OUT/ab_desc.json host=src device=.scratch/dev/src > $OUT/ab_desc.log 2>&1; echo "ab rc $?"
date -u +%H:%M:%S
tail -n 30 $OUT/ab_desc.log
