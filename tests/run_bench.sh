#!/bin/sh
# `pit bench --quick` on PoCL: a suite (default: all of them, with a plot)
# runs, bench exits non-zero on a wrong result, and check_bench_json.py checks
# the JSON's points and floors. only: `--only` runs one kind of the attention
# suite or one model of the moe suite, and refuses a name that is neither or
# that the suite asked does not have.
pit="$1"; out="$2"; suite="${3:-all}"
here=$(dirname "$0")
mkdir -p "$out"; rm -f "$out"/bench.json "$out"/bench.png
export PIT_BACKEND=opencl
if ! "$pit" info >/dev/null 2>&1; then echo "opencl: SKIPPED: no device"; exit 77; fi
# refused NAME SUITE TEXT: `pit bench --suite SUITE --only NAME` exits 2 saying TEXT
refused() {
  "$pit" bench --suite "$2" --only "$1" > "$out/only.txt" 2>&1
  rc=$?
  [ $rc -eq 2 ] && grep -q "$3" "$out/only.txt" || { echo "--only $1 --suite $2: rc $rc"; cat "$out/only.txt"; exit 1; }
}
if [ "$suite" = only ]; then
  # --only: one kind's or one model's points alone
  "$pit" bench --quick --suite attention --only decode --json "$out/attention.json" || exit 1
  "$pit" bench --quick --suite moe --only qwen3-30b-a3b --json "$out/moe.json" || exit 1
  python3 - "$out/attention.json" "$out/moe.json" <<'PY' || exit 1
import json, sys
rows = json.load(open(sys.argv[1]))["attention"]
kinds = sorted({r["kind"] for r in rows})
assert rows and kinds == ["decode"], f"--only decode ran {kinds}"
print(f"--only decode: {len(rows)} decode points, nothing else")
rows = json.load(open(sys.argv[2]))["moe"]
models = sorted({r["model"] for r in rows})
assert rows and models == ["qwen3-30b-a3b"], f"--only qwen3-30b-a3b ran {models}"
print(f"--only qwen3-30b-a3b: {len(rows)} points of that model, nothing else")
PY
  refused nope attention "'nope' is neither an attention kind"
  refused mixtral-8x7b attention "a MoE model (--suite moe or all), not one of the attention suite's"
  refused decode moe "an attention kind (--suite attention or all), not one of the moe suite's"
  refused decode matmul "not one of the matmul suite's"
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
