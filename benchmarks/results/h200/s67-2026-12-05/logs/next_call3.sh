# s67 (prepared): (1) dropout's D = 128 dQ on three stages (dropout-dq-3-stages.patch: the stage
# cut of DROPOUT_STAGES_FROM_WIDTH no longer at width 128, where dK/dV has its own tile since s67;
# offline, Triton 3.6: dQ 160 KiB, 214 / 226 registers, no stack; the one-launch backward 160 KiB,
# 8 bytes of stack causal as before) against HEAD with a control (next_call2 runs its GPU tests);
# predicted +2-5% on the dropout backward (dQ's share of it); (2) decode on HEAD, on the
# split-dense tree (s64's `ds`: B = 1 at 16k read 4x FA2's time, 8 unsplit programs) and on ds with
# s63's 16-row decode tile (`dsm16`), two rounds each, SDPA FA2 in every process. (s64's `dd`, device
# descriptors for decode, read within one round's spread in v0.57: after these.)
# Trees: L=benchmarks/results/h200; for t in dq3 ds dsm16; do rm -rf .scratch/$t; mkdir -p .scratch/$t
#   git archive HEAD src | tar -x -C .scratch/$t; done
#   (cd .scratch/dq3 && patch -p1 < ../../$L/s67-2026-12-05/logs/dropout-dq-3-stages.patch)
#   for t in ds dsm16; do (cd .scratch/$t && patch -p1 < ../../$L/s64-2026-12-05/logs/decode-dense-split.patch); done
#   (cd .scratch/dsm16 && patch -p1 < ../../$L/s63-2026-12-05/logs/decode-tile-m16.patch)
# carry [".whl", ".scratch/dq3", ".scratch/ds", ".scratch/dsm16"]; ~9 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
timeout -s INT -k 20 170 python3 benchmarks/ab.py head=src dq3=.scratch/dq3/src --cases dropout \
  --only "bwd dense B1 N16384 H16 D128" --rounds 2 --control > $OUT/ab_dropout_dq3.log 2>&1; echo "ab rc $?"
date -u +%H:%M:%S
for tree in head ds dsm16; do
  src=$PWD/src; [ "$tree" != head ] && src=$PWD/.scratch/$tree/src
  mkdir -p $OUT/$tree
  PYTHONPATH=/tmp/site:$src timeout -s INT -k 15 110 python3 benchmarks/bench_decode.py --quick --rounds 2 \
    --systems flashx_dense sdpa_flash --out $OUT/$tree > $OUT/$tree/decode.log 2>&1
  echo "decode $tree rc $?"
done
date -u +%H:%M:%S
tail -n 5 $OUT/ab_dropout_dq3.log; for t in head ds dsm16; do echo "== $t"; grep "^|" $OUT/$t/decode.md; done
