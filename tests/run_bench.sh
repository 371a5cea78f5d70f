#!/bin/sh
# `pit bench --quick` on PoCL: every suite runs, results are checked against
# the reference (bench exits non-zero on a wrong result), JSON and PNG written.
pit="$1"; out="$2"
mkdir -p "$out"; rm -f "$out"/bench.json "$out"/bench.png
export PIT_BACKEND=opencl
if ! "$pit" info >/dev/null 2>&1; then echo "opencl: SKIPPED: no device"; exit 77; fi
"$pit" bench --quick --suite all --json "$out/bench.json" --plot "$out/bench.png" || exit 1
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['matmul'] and all(r['correct'] for r in d['matmul']); print(len(d['matmul']), 'matmul points in', sys.argv[1])" "$out/bench.json" || exit 1
if command -v gnuplot >/dev/null 2>&1; then
  [ -s "$out/bench.png" ] || { echo "no plot written"; exit 1; }
fi
