# Builds /tmp/w64: a copy of src/ and tests/ whose tuning routes D = 64 sliding windows to the Gluon
# overlap tile that D = 64 block maps take, and whose GLUON_MASKED_CASES hold three D = 64 windows.
set -eu
rm -rf /tmp/w64; mkdir -p /tmp/w64; cp -r src tests /tmp/w64/
sed -i 's/^    (64, "map"): "pp-tma-persist-ovl-ts",/&\n    (64, "window"): "pp-tma-persist-ovl-ts",/' /tmp/w64/src/flashx/core/tuning.py
python3 - <<'PY'
p = "/tmp/w64/tests/variants_common.py"
s = open(p).read()
anchor = '    ("d64-documents-causal",'
extra = ('    ("d64-gqa-window-200", (2, 1000, 1000, 8, 2, 64, 64), dict(window=(200, 0)), "bfloat16"),\n'
         '    ("d64-q1000-kv600-window-100-rows-without-keys-bhnd", (1, 1000, 600, 4, 2, 64, 64),\n'
         '     dict(window=(100, 0), layout="bhnd"), "float16"),\n'
         '    ("d64-q900-kv1100-window-150-left-only", (1, 900, 1100, 4, 2, 64, 64), dict(window=(150, -1)), "bfloat16"),\n')
assert s.count(anchor) == 1
open(p, "w").write(s.replace(anchor, extra + anchor))
PY
grep -c '(64, "window")' /tmp/w64/src/flashx/core/tuning.py
grep -c '"d64-.*window' /tmp/w64/tests/variants_common.py
