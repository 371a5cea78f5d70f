#!/bin/bash
# scripts/decode_profile.sh - a lab script for the GPU machine (not shipped):
# where the time of a decode call goes. nsys (when present) gives the kernel
# and API summaries of the bf16 decode suite; ncu the speed-of-light and
# occupancy of the first decode point's kernels (M=1, K=4096, N=14336, 50%).
#   usage: bash scripts/decode_profile.sh [TILEDB_DIR]   (run from the tree root)
# Expects build-gpu/ (bin, lib) carried along; output under $OUT (or ./gpu-out).
set -uo pipefail
out="${OUT:-$PWD/gpu-out}"; mkdir -p "$out"
root="$PWD"; tdb="${1:-$root/tiledb}"
export LD_LIBRARY_PATH="$root/build-gpu/lib:${LD_LIBRARY_PATH:-}" PIT_TILEDB_DIR="$tdb" PIT_BACKEND=cuda
export PIT_CACHE_DIR=/tmp/pit-cache
pit="$root/build-gpu/bin/pit"
if command -v nsys >/dev/null; then
  nsys profile -o "$out/decode" --force-overwrite true "$pit" bench --suite decode --dtype bf16 > "$out/nsys_run.log" 2>&1
  nsys stats -r cuda_gpu_kern_sum,cuda_api_sum "$out/decode.nsys-rep" > "$out/nsys_stats.txt" 2>&1
  rm -f "$out"/decode.nsys-rep "$out"/decode.sqlite
  head -60 "$out/nsys_stats.txt"
else
  echo "nsys: not installed"
fi
ncu --kernel-name regex:"pit_(matmul|compact|convert_f32|detect)" --launch-skip 24 --launch-count 8 \
    --section SpeedOfLight --section Occupancy --section LaunchStats \
    "$pit" bench --suite decode --dtype bf16 > "$out/ncu_decode.txt" 2>&1
grep -E "pit_|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Grid Size|Block Size|Registers Per|Dynamic Shared" "$out/ncu_decode.txt" | head -80
