#!/bin/bash
# scripts/gpu_check.sh - a GPU lab script (not shipped, not run by CI): every
# check that needs an NVIDIA GPU, in one command run from the repository root:
# build (CUDA + OpenCL), tests, conformance on CUDA and on NVIDIA's OpenCL,
# CUDA-graph capture, compute-sanitizer, and the benches. Logs and JSON go to
# $OUT (or build-gpu/lab-out). Optional: .carry/lib (libclblast.so.1) and
# .carry/include (the DLPack header), for a GPU machine without them.
#   usage: bash scripts/gpu_check.sh [quick|full|model|ops|sweep|kernels|anchors]
# anchors: the attention and MoE points of docs/PERF.md: the operator tests,
# conformance of the masked operators, the sanitizers on attention, the CUDA
# direct benches, and scripts/torch_anchors.py (pit through ctypes beside
# SDPA, FlexAttention and torch's MoE ways, on one stream, in the same run);
# then `pit bench --suite moe` and scripts/torch_moe.py (pit_moe_ffn beside
# PyTorch's composed MoE expert layer).
# kernels: after a kernel change: direct tests, conformance, sanitizers, benches.
# (After an attention kernel change: scripts/attention_lab.sh.)
# sweep: the MoE grouped-GEMM tile sweep (one tile-database file a tile), the
# matmul bench, CUDA conformance.
# ops: the operator tests and benches, CUDA conformance, graph capture, and
# compute-sanitizer on the attention conformance cases.
# model: pit tune on CUDA, then with the freshly tuned database the select
# (cost model accuracy) and matmul benches, the operator tests and benches,
# and the CUDA conformance suite.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1  # paths below are relative to the repository root
mode="${1:-full}"
out="${OUT:-$PWD/build-gpu/lab-out}"; mkdir -p "$out"
export PIT_CACHE_DIR=/tmp/pit-cache
carry="$PWD/.carry"
[ -d "$carry/lib" ] && export LD_LIBRARY_PATH="$carry/lib:${LD_LIBRARY_PATH:-}"
summary="$out/summary.txt"; : > "$summary"
note() { echo "$*" | tee -a "$summary"; }
step() { local name="$1"; shift; local t0=$SECONDS; "$@" > "$out/$name.log" 2>&1; local rc=$?;
         note "$(printf '%-28s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS-t0))" "$(tail -1 "$out/$name.log" | cut -c1-80)")"; return $rc; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1
note "gpu: $(cat "$out/gpu.txt")  commit: $(git rev-parse --short HEAD 2>/dev/null)"
# NVIDIA's OpenCL driver for the ICD loader.
icd=$(ldconfig -p | grep -m1 'libnvidia-opencl.so.1' | awk '{print $NF}')
if [ -n "$icd" ]; then mkdir -p /tmp/icd && echo "$icd" > /tmp/icd/nvidia.icd && export OCL_ICD_VENDORS=/tmp/icd; fi

# Built on the CPU machine and carried (build-gpu/) to save device time; the
# build tree's absolute paths differ here, so libraries and tile databases are
# found through the environment.
if [ ! -x build-gpu/bin/pit ]; then
  dlpack=""; [ -f "$carry/include/dlpack/dlpack.h" ] && dlpack="-DPIT_DLPACK_INCLUDE=$carry/include"
  step configure cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DPIT_WITH_HIP=OFF $dlpack
  step build cmake --build build-gpu -j16 || { grep -E "error" "$out/build.log" | head; exit 1; }
fi
export LD_LIBRARY_PATH="$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-}" PIT_TILEDB_DIR="$PWD/tiledb"
B=build-gpu/bin
export PIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ "$mode" = ops ]; then
  step cuda_ops $B/test_cuda_ops
  step bench_ops $B/test_cuda_ops --bench
  step conformance_cuda env PIT_BACKEND=cuda $B/pit conformance
  step cuda_graph_capture $B/test_cuda_graph
  step memcheck_attention env PIT_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 3 $B/pit conformance --quick --op attention
  step racecheck_attention env PIT_BACKEND=cuda compute-sanitizer --tool racecheck --error-exitcode 3 $B/pit conformance --quick --op attention
  step bench_layers env PIT_BACKEND=cuda $B/pit bench --suite layers
  rm -f "$out/gpu.txt"
  echo; cat "$summary"; exit 0
fi
if [ "$mode" = anchors ]; then
  step cuda_ops $B/test_cuda_ops
  step conformance_masked sh -c "for op in sddmm softmax attention; do PIT_BACKEND=cuda $B/pit conformance --op \$op || exit 1; done"
  step memcheck_attention env PIT_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 3 $B/pit conformance --quick --op attention
  step racecheck_attention env PIT_BACKEND=cuda compute-sanitizer --tool racecheck --error-exitcode 3 $B/pit conformance --quick --op attention
  step bench_ops $B/test_cuda_ops --bench
  grep -h "^attention\|^moe" "$out/bench_ops.log" >> "$summary"
  step torch_anchors env PYTHONUNBUFFERED=1 python3 scripts/torch_anchors.py --lib build-gpu/lib/libpit.so
  cat "$out/torch_anchors.log" >> "$summary"
  step bench_moe env PIT_BACKEND=cuda $B/pit bench --suite moe --json "$out/bench_moe.json"
  grep -h "^[a-z].* | " "$out/bench_moe.log" >> "$summary"
  step torch_moe env PYTHONUNBUFFERED=1 python3 scripts/torch_moe.py --lib build-gpu/lib/libpit.so --json "$out/torch_moe.json"
  cat "$out/torch_moe.log" >> "$summary"
  rm -f "$out/gpu.txt"
  echo; cat "$summary"; exit 0
fi
if [ "$mode" = kernels ]; then
  # after a kernel change: correctness first, then the benches it moves
  step cuda_direct $B/test_cuda_direct
  step cuda_ops $B/test_cuda_ops
  step conformance_cuda env PIT_BACKEND=cuda $B/pit conformance
  step memcheck_attention env PIT_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 3 $B/pit conformance --quick --op attention
  step racecheck_moe env PIT_BACKEND=cuda compute-sanitizer --tool racecheck --error-exitcode 3 $B/pit conformance --quick --op moe
  step memcheck_moe env PIT_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 3 $B/pit conformance --quick --op moe
  step bench_ops $B/test_cuda_ops --bench
  step bench_moe_ways sh -c "for l in one even; do $B/test_cuda_ops --bench moe \$l; done"
  grep -h "^moe" "$out/bench_moe_ways.log" | sed 's/^/moe ways: /' >> "$summary"
  grep -h "^attention\|^moe" "$out/bench_ops.log" >> "$summary"
  step cuda_graph_capture $B/test_cuda_graph
  step bench_matmul env PIT_BACKEND=cuda $B/pit bench --suite matmul
  rm -f "$out/gpu.txt"
  echo; cat "$summary"; exit 0
fi
# The moe rows of a tile database that name one tile, BMxBNxBKxSTAGES, for
# f16 and bf16 (warp-specialised on sm_90: 384 threads, tensor cores). Alone
# for its op and dtype in the first layer ($PIT_TILEDB), the row is the tile
# that runs; its cost (a nominal 700 TFLOP/s) only keeps the line well-formed.
moe_tile_rows() {
  local bm bn bk stages dt
  IFS=x read -r bm bn bk stages <<< "$1"
  for dt in f16 bf16; do
    awk -v dt="$dt" -v bm="$bm" -v bn="$bn" -v bk="$bk" -v st="$stages" 'BEGIN {
      gflops = 700000; us = 2 * bm * bn * bk / (gflops * 1e3)
      printf "sm_*  cuda  moe  %s  %d %d %d 384 %d 1 %.6g %.1f 0\n", dt, bm, bn, bk, st, us, gflops }'
  done
}
if [ "$mode" = sweep ]; then
  # the MoE grouped-GEMM tile, one tile-database file a candidate (PIT_TILEDB):
  # the MoE layer of `pit bench --suite layers` names the tile that ran. The
  # sm_90 f16/bf16 tiles: 128x128x64 with 3 to 5 stages, 128x256x64 with 3.
  # Then the matmul bench and the CUDA conformance suite.
  step cuda_ops $B/test_cuda_ops
  for t in ${PIT_SWEEP_TILES:-128x128x64x3 128x128x64x4 128x128x64x5 128x256x64x3}; do
    moe_tile_rows "$t" > "$out/moe_$t.tiledb"
    step "moe_$t" env PIT_BACKEND=cuda PIT_TILEDB="$out/moe_$t.tiledb" $B/pit bench --suite layers
    grep -h "^moe" "$out/moe_$t.log" | sed "s/^/$t: /" >> "$summary"
  done
  step bench_matmul env PIT_BACKEND=cuda $B/pit bench --suite matmul
  step conformance_cuda env PIT_BACKEND=cuda $B/pit conformance
  rm -f "$out/gpu.txt"
  echo; cat "$summary"; exit 0
fi
if [ "$mode" = model ]; then
  step tune env PIT_BACKEND=cuda $B/pit tune --output "$out/sm90.tiledb"
  export PIT_TILEDB="$out/sm90.tiledb"
  step bench_select env PIT_BACKEND=cuda $B/pit bench --suite select
  step bench_matmul env PIT_BACKEND=cuda $B/pit bench --suite matmul
  step cuda_ops $B/test_cuda_ops
  step bench_ops $B/test_cuda_ops --bench
  step conformance_cuda env PIT_BACKEND=cuda $B/pit conformance
  rm -f "$out/gpu.txt"  # already in summary.txt
  echo; cat "$summary"; exit 0
fi
# In order of what matters most, so a run cut short still brings back the most.
step info $B/pit info
step cuda_graph_capture $B/test_cuda_graph
step conformance_cuda env PIT_BACKEND=cuda $B/pit conformance
if [ "$mode" = full ]; then
  step bench_cuda env PIT_BACKEND=cuda $B/pit bench --suite all --json "$out/bench_cuda.json" --plot "$out/bench_cuda.png"
fi
step conformance_opencl_nvidia env PIT_BACKEND=opencl $B/pit conformance
step api_errors $B/test_api build-gpu/lib/libpit.so
if [ "$mode" = full ]; then
  step bench_ops $B/test_cuda_ops --bench
  # every operator's quick cases: ~1 and ~2 minutes on the H100
  step memcheck env PIT_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 3 $B/pit conformance --quick
  step racecheck env PIT_BACKEND=cuda compute-sanitizer --tool racecheck --error-exitcode 3 $B/pit conformance --quick
  step bench_opencl_nvidia env PIT_BACKEND=opencl $B/pit bench --suite matmul --size 2048 --repeats 10 --json "$out/bench_opencl.json"
fi
echo; cat "$summary"
