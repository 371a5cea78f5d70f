#!/bin/bash
# scripts/detect_speed.sh - a lab script for the GPU machine (not shipped):
# detection alone against the read bandwidth. Times one detection pass of
# the 8 sparse-A matmul candidates (and of the first 4, what a matmul plan
# detects) over a SIZE x SIZE (4096) bf16 and f16 operand, 32x1, 32x64 and
# 1x64 patterns at sparsity 0.5 / 0.9 / 0.99, beside a device copy of the
# same bytes in the same process; prints us, GB/s and % of the copy (the
# copy's GB/s counts read + write). The program is
# tests/backends/cuda/test_cuda_detect.c (--bench detect); its header says
# how each figure is taken.
#   usage: bash scripts/detect_speed.sh [check] [bench] [sanitize] [profile] [size N]
#   (no step: check bench)
# Expects, carried along with the tree:
#   build-gpu/bin/test_cuda_detect, build-gpu/bin/test_cuda_direct,
#   build-gpu/lib/libpit-cuda.so       the build under test (built on a CPU machine)
#   .carry/base/lib/libpit-cuda.so      optional: a reference build; the same
#                                       program times its detection as well
# check: both detection kernels against the host (test_cuda_detect), the
#   plug-in's direct test (quick), and the matmul conformance cases on CUDA
#   (a plan's candidates detected by the strip kernel, feeding the matmul
#   kernels; needs build-gpu/bin/pit and build-gpu/lib/libpit.so).
# bench: the table for the build under test, then for the reference build.
# sanitize: compute-sanitizer memcheck and racecheck on test_cuda_detect --quick.
# profile: ncu of the first pit_detect_strip launch of the bench, the plan's
#   4 candidates (speed of light, memory workload, warp states and stall
#   reasons, scheduler, instructions, source hot spots, occupancy).
# Logs go to $OUT (or ./gpu-out); a summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
out="${OUT:-$root/gpu-out}"; mkdir -p "$out"
export PIT_CACHE_DIR=/tmp/pit-cache
summary="$out/summary.txt"; : > "$summary"
note() { echo "$*" | tee -a "$summary"; }
step() { local name="$1"; shift; local t0=$SECONDS; "$@" > "$out/$name.log" 2>&1; local rc=$?;
         note "$(printf '%-22s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS-t0))" "$(tail -1 "$out/$name.log" | cut -c1-90)")"; return $rc; }
note "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)"

NEW="$root/build-gpu"; BASE="$root/.carry/base"
size=4096
steps=()
while [ $# -gt 0 ]; do
  case "$1" in
  size) size="$2"; shift ;;
  *) steps+=("$1") ;;
  esac
  shift
done
[ ${#steps[@]} -eq 0 ] && steps=(check bench)
# with_plugin LIB cmd...: the program with the plug-in LIB
with_plugin() { local lib="$1"; shift; env PIT_CUDA_PLUGIN_PATH="$lib" LD_LIBRARY_PATH="$(dirname "$lib"):${LD_LIBRARY_PATH:-}" "$@"; }

for what in "${steps[@]}"; do
  case "$what" in
  check)
    step detect_check with_plugin "$NEW/lib/libpit-cuda.so" "$NEW/bin/test_cuda_detect"
    step cuda_direct with_plugin "$NEW/lib/libpit-cuda.so" "$NEW/bin/test_cuda_direct" --quick
    step conf_matmul env LD_LIBRARY_PATH="$NEW/lib:${LD_LIBRARY_PATH:-}" PIT_TILEDB_DIR="$root/tiledb" \
      PIT_BACKEND=cuda "$NEW/bin/pit" conformance --quick --op matmul ;;
  bench)
    step bench_new with_plugin "$NEW/lib/libpit-cuda.so" "$NEW/bin/test_cuda_detect" --bench detect "$size"
    if [ -f "$BASE/lib/libpit-cuda.so" ]; then
      step bench_base with_plugin "$BASE/lib/libpit-cuda.so" "$NEW/bin/test_cuda_detect" --bench detect "$size"
    fi ;;
  sanitize)
    for tool in memcheck racecheck; do
      step ${tool} with_plugin "$NEW/lib/libpit-cuda.so" compute-sanitizer --tool $tool --error-exitcode 3 \
        "$NEW/bin/test_cuda_detect" --quick
    done ;;
  profile)
    step profile with_plugin "$NEW/lib/libpit-cuda.so" ncu --kernel-name pit_detect_strip --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
      --section WarpStateStats --section SchedulerStats --section InstructionStats --section SourceCounters \
      --section Occupancy --print-details all \
      "$NEW/bin/test_cuda_detect" --bench detect "$size" 4 ;;
  *) note "unknown step: $what (check, bench, sanitize, profile, size N)" ;;
  esac
done
for b in new base; do
  [ -f "$out/bench_$b.log" ] || continue
  echo; echo "== $b build =="; grep -vE "^(device|PASSED|FAILED|ok)" "$out/bench_$b.log"
done
echo; cat "$summary"
