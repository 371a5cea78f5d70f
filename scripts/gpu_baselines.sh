#!/bin/bash
# scripts/gpu_baselines.sh - a GPU lab script (not shipped, not run by CI): the
# CUDA backend with its cuSPARSE baselines, run from the repository root:
# build (only what runs), conformance, the operator test, pit tune, pit bench
# (all suites) and the operator bench. Logs, the tuned tile database and the
# bench JSON go to $OUT (or build-gpu/lab-out); a short table last. Optional:
# .carry/include (the DLPack header), for a GPU machine without it.
#   usage: bash scripts/gpu_baselines.sh [check|bench|all|build|extra]
#          check: build + tests + tune; extra: cuSPARSE checks (f32 BSR conversion, the
#          baseline's result against the reference) and ncu of the fused attention
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1  # paths below are relative to the repository root
phase="${1:-all}"
out="${OUT:-$PWD/build-gpu/lab-out}"; mkdir -p "$out"
export PIT_CACHE_DIR=/tmp/pit-cache
summary="$out/summary.txt"; touch "$summary"
note() { echo "$*" | tee -a "$summary"; }
# step NAME LIMIT_S CMD...: runs with a time limit, log in $OUT/NAME.log
step() { local name="$1" limit="$2"; shift 2; local t0=$SECONDS
         timeout "$limit" "$@" > "$out/$name.log" 2>&1; local rc=$?
         note "$(printf '%-14s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS-t0))" "$(tail -1 "$out/$name.log" | cut -c1-90)")"
         return $rc; }

B=build-gpu/bin
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"
if [ ! -f build-gpu/CMakeCache.txt ]; then
  dlpack=""; [ -f .carry/include/dlpack/dlpack.h ] && dlpack="-DPIT_DLPACK_INCLUDE=$PWD/.carry/include"
  step configure 120 cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DPIT_WITH_HIP=OFF \
       -DPIT_WITH_OPENCL=OFF -DBUILD_TESTING=OFF $dlpack || exit 1
fi
step build 240 cmake --build build-gpu -j16 --target pit-tool pit-cuda test_cuda_ops ||
  { grep -E "error" "$out/build.log" | head; exit 1; }
export PIT_TILEDB_DIR="$PWD/tiledb"

if [ "$phase" = check ] || [ "$phase" = all ]; then
  step conformance 150 env PIT_BACKEND=cuda $B/pit conformance --quick
  step cuda_ops 120 $B/test_cuda_ops
  step tune 200 env PIT_BACKEND=cuda $B/pit tune --output "$out/sm90.tiledb"
fi
if [ "$phase" = bench ] || [ "$phase" = all ]; then
  step bench 330 env PIT_BACKEND=cuda $B/pit bench --suite all --json "$out/bench.json"
  step ops_bench 120 $B/test_cuda_ops --bench
fi
if [ "$phase" = extra ]; then
  step convert_f32 90 env PIT_BACKEND=cuda $B/pit bench --suite convert --dtype f32 --repeats 5
  [ "${PIT_SKIP_MATMUL_CHECK:-0}" = 1 ] ||
    step matmul_chk 200 env PIT_BACKEND=cuda $B/pit bench --suite matmul --dtype f32,f16 --json "$out/matmul_chk.json"
  step ncu_attn 200 ncu --kernel-name regex:pit_op_attention --launch-count 1 \
       --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
       --section Occupancy --section WarpStateStats --section SourceCounters $B/test_cuda_ops --bench
fi
echo; cat "$summary"
# the bench tables (the reply carries the end of the output)
[ -f "$out/bench.log" ] && grep -E "^(==|f32|f16|bf16| *0\.|32x|1x64|cost)" "$out/bench.log" | tail -60
exit 0
