#!/bin/bash
# scripts/engine.sh - a lab script for the GPU machine (not shipped): the sm_90
# tile engine of the sparse matmul along K (kernels/pit_matmul_wg.cu).
#   usage: bash scripts/engine.sh [check] [engine] [bench] [profile S] [sanitize] [suite] [tune] [conformance]
# check:    test_cuda_direct (every tile, the engine's included, against the
#           double reference)
# engine:   test_cuda_direct --engine-all: the engine's cases and tiles alone
#           (about a minute on an H200, a third of check)
# bench:    test_cuda_direct --bench N for bf16 and f16 on 32x64 at a full
#           index and s = 0.5 .. 0.99: the best of the forced tiles (the last
#           two are the engine) beside cuBLAS in the same process; N from
#           ENGINE_N (sizes, default 4096), each row prefixed with its N
# profile S: ncu of the two engine tiles at bf16 32x64 sparsity S
# sanitize: compute-sanitizer memcheck and racecheck of the engine's case
# tune:     pit tune of the engine's rows (a database of them, dense, detect
#           and call rows); the measured rows are printed
# conformance: PIT_BACKEND=cuda pit conformance, in full
# suite:    pit bench --suite matmul --dtype bf16 and f16 (end to end, the
#           selection on the shipped database)
# Expects build-gpu/ (bin/, lib/) carried with the tree (PIT_NEW: another
# build; PIT_PLUGIN: another CUDA plug-in for its programs). Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-$PWD/gpu-out}"; mkdir -p "$out"
B="${PIT_NEW:-$PWD/build-gpu}"
export PIT_CACHE_DIR=/tmp/pit-cache LD_LIBRARY_PATH="$B/lib:${LD_LIBRARY_PATH:-}" PIT_TILEDB_DIR="$PWD/tiledb"
export PIT_CUDA_PLUGIN_PATH="${PIT_PLUGIN:-$B/lib/libpit-cuda.so}"
direct() { stdbuf -oL "$B/bin/test_cuda_direct" "$@"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
while [ $# -gt 0 ]; do
  case "$1" in
  check) direct > "$out/check.log" 2>&1; echo "check rc=$? failures: $(grep -c FAIL "$out/check.log")"; tail -1 "$out/check.log" ;;
  engine) direct --engine-all > "$out/engine.log" 2>&1; echo "engine rc=$? failures: $(grep -c FAIL "$out/engine.log")" ;;
  bench)
    for n in ${ENGINE_N:-4096}; do
      for dt in bf16 f16; do
        for s in 0 0.5 0.9 0.95 0.99; do direct --bench $n $dt 32x64 $s | grep -E "^(device|$dt)" | sed "s/^/$n /"; done
      done
    done | tee -a "$out/bench.log" ;;
  profile)
    s="$2"; shift
    # the engine's tiles are the 5th and 6th timed (3 warm-ups + 20 runs each)
    for skip in 5 28; do
      ncu --kernel-name pit_matmul_wg --launch-skip $skip --launch-count 1 --section SpeedOfLight \
          --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats \
          --section Occupancy --section LaunchStats \
          --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum \
          "$B/bin/test_cuda_direct" --bench 4096 bf16 32x64 "$s" > "$out/ncu-$s-$skip.log" 2>&1
      grep -E "Duration|Throughput|gmma|lts__t_bytes|Stall|Registers|Block Limit|Achieved Occupancy|Warp Cycles Per Issued" "$out/ncu-$s-$skip.log" | head -40
    done ;;
  sanitize)
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool --kernel-name kns=pit_matmul_wg "$B/bin/test_cuda_direct" --engine > "$out/$tool.log" 2>&1
      echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$tool.log" | tail -1)"
    done ;;
  tune)
    # the engine's rows alone (with the rows their fit and selection need),
    # measured by pit tune
    grep -E "^sm_.* (dense|detect|call) |^sm_.* matmul_k .* 384 +[0-9] 2 " tiledb/nvidia-sm90.tiledb > "$out/engine-rows.tiledb"
    PIT_TILEDB="$out/engine-rows.tiledb" PIT_BACKEND=cuda "$B/bin/pit" tune --output "$out/engine-tuned.tiledb" > "$out/tune.log" 2>&1
    echo "tune rc=$?"; grep -E " 384 +[0-9] 2 " "$out/engine-tuned.tiledb" ;;
  conformance)
    PIT_BACKEND=cuda timeout "${CONF_TIMEOUT:-3000}" "$B/bin/pit" conformance > "$out/conformance.log" 2>&1; echo "conformance rc=$?"; tail -3 "$out/conformance.log" ;;
  suite)
    for dt in bf16 f16; do
      PIT_BACKEND=cuda "$B/bin/pit" bench --suite matmul --dtype $dt --json "$out/suite-$dt.json" > "$out/suite-$dt.log" 2>&1
      echo "suite $dt rc=$?"; grep -E "^\|" "$out/suite-$dt.log" | head -20
    done ;;
  esac
  shift
done
