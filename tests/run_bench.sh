#!/bin/sh
# `pit bench --quick` on PoCL: a suite (default: all of them, with a plot)
# runs, bench exits non-zero on a wrong result, and check_bench_json.py checks
# the JSON's points and floors. attention-only: `--only` runs one kind of the
# attention suite and refuses a kind that is none.
pit="$1"; out="$2"; suite="${3:-all}"
here=$(dirname "$0")
mkdir -p "$out"; rm -f "$out"/bench.json "$out"/bench.png
export PIT_BACKEND=opencl
if ! "$pit" info >/dev/null 2>&1; then echo "opencl: SKIPPED: no device"; exit 77; fi
if [ "$suite" = attention-only ]; then
  # --only: one kind's points alone; a kind that is none exits 2 naming it
  "$pit" bench --quick --suite attention --only decode --json "$out/bench.json" || exit 1
  python3 - "$out/bench.json" <<'PY' || exit 1
import json, sys
rows = json.load(open(sys.argv[1]))["attention"]
kinds = sorted({r["kind"] for r in rows})
assert rows and kinds == ["decode"], f"--only decode ran {kinds}"
print(f"--only decode: {len(rows)} decode points, nothing else")
PY
  "$pit" bench --only nope > "$out/only.txt" 2>&1
  rc=$?
  [ $rc -eq 2 ] && grep -q "'nope' is not an attention kind" "$out/only.txt" || { echo "--only nope: rc $rc"; cat "$out/only.txt"; exit 1; }
  exit 0
fi
if [ "$suite" = all ]; then
  "$pit" bench --quick --suite all --json "$out/bench.json" --plot "$out/bench.png" || exit 1
  if command -v gnuplot >/dev/null 2>&1; then
    [ -s "$out/bench.png" ] || { echo "no plot written"; exit 1; }
  fi
else
  "$pit" bench --quick --suite "$suite" --json "$out/bench.json" || exit 1
fi
python3 "$here/check_bench_json.py" "$out/bench.json" "$suite" || exit 1
