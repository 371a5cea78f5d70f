#!/bin/bash
# scripts/decode_lab.sh - a lab script for the GPU machine (not shipped): the
# decode kernels of the build under test (build-gpu/, or PIT_NEW) forced on
# the decode suite's shapes (test_cuda_direct --bench-decode, every result
# checked), their sanitizers, and the decode suite end to end with the
# shipped database and with the reference build in .carry/base
# (scripts/gpu_ab.sh decode). Logs under $OUT.
#   DECODE_CHECK=1      first the plug-in's direct tests, graph capture and
#                       the matmul conformance cases on CUDA
#   DECODE_PLUGINS="name=path ..."  other plug-in builds timed point by point
#   DECODE_ONLY=1       stop after the forced timings
#   DECODE_PROFILE=1    ncu of the tensor-core decode kernel and of the
#                       few-row detection at one point
#   DECODE_DTYPE=f16    the dtype of the forced timings (bf16)
set -u
root="$PWD"; out="${OUT:-$root/gpu-out}"; mkdir -p "$out"
NEW="${PIT_NEW:-$root/build-gpu}"
export PIT_CACHE_DIR=/tmp/pit-cache PIT_TILEDB_DIR="$root/tiledb" LD_LIBRARY_PATH="$NEW/lib" \
       PIT_CUDA_PLUGIN_PATH="$NEW/lib/libpit-cuda.so"
D="$NEW/bin/test_cuda_direct"
if [ -n "${DECODE_CHECK:-}" ]; then
  # the direct tests of the plug-in (decode and few-row detection among
  # them), CUDA-graph capture, and the matmul conformance cases on CUDA
  for t in test_cuda_direct test_cuda_detect test_cuda_graph; do
    timeout 240 "$NEW/bin/$t" > "$out/$t.log" 2>&1; echo "$t rc=$? $(tail -n1 "$out/$t.log")"
    grep -m5 FAIL "$out/$t.log"
  done
  PIT_BACKEND=cuda timeout 300 "$NEW/bin/pit" conformance --op matmul > "$out/conf_matmul.log" 2>&1
  echo "conformance matmul rc=$? $(grep -iE "passed|failed" "$out/conf_matmul.log" | tail -n2 | tr '\n' ' ')"
fi
timeout 150 "$D" --bench-decode "${DECODE_DTYPE:-bf16}" > "$out/bench_decode.log" 2>&1; echo "bench-decode rc=$?"
# DECODE_PLUGINS="name=path ...": other builds of the plug-in timed by the
# same program, point by point (kernel us)
for pl in ${DECODE_PLUGINS:-}; do
  name=${pl%%=*}
  PIT_CUDA_PLUGIN_PATH="${pl#*=}" timeout 150 "$D" --bench-decode "${DECODE_DTYPE:-bf16}" > "$out/bench_decode_$name.log" 2>&1
  echo "== $name rc=$?"
done
[ -n "${DECODE_PLUGINS:-}" ] && python3 - "$out" ${DECODE_PLUGINS:-} <<'PY'
import sys
out, names = sys.argv[1], ["new"] + [p.split("=")[0] for p in sys.argv[2:]]
def rows(f):
    return [l.split() for l in open(f) if l.split() and l.split()[0] in ("bf16", "f16", "f32")]
tabs = [rows(f"{out}/bench_decode.log")] + [rows(f"{out}/bench_decode_{n}.log") for n in names[1:]]
print("dtype M K s micro | kernel us: " + " ".join(names))
for i, r in enumerate(tabs[0]):
    print(" ".join([r[0], r[1], r[2], r[4], r[5], "|"] + [t[i][7] if i < len(t) else "-" for t in tabs]))
PY
[ -n "${DECODE_ONLY:-}" ] && exit 0
for tool in racecheck memcheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 "$D" --decode > "$out/$tool.log" 2>&1; echo "$tool rc=$?"
  grep -m1 -A12 -E "Race reported|Invalid|Error" "$out/$tool.log" | head -14
done
for k in ${DECODE_PROFILE:+pit_decode_mma pit_detect_cols}; do
  timeout 120 ncu --kernel-name $k --launch-skip 5 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section LaunchStats "$D" --bench-decode bf16 > "$out/ncu_$k.txt" 2>&1
  echo "== ncu $k"
  grep -E "Duration|DRAM Throughput|L2 Hit|Achieved Occupancy|Grid Size|Registers Per|Dynamic Shared|Warp Cycles Per Issued" "$out/ncu_$k.txt"
done
echo "== forced (us): dtype M K N s micro detect kernel total dense floor x_floor dense/x"
grep -E "^(bf16|f16|f32) |FAIL" "$out/bench_decode.log"
OUT="$out/ab" PIT_NEW="$NEW" bash "$root/scripts/gpu_ab.sh" decode | grep -vE "^(base|new): "
