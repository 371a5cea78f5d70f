#!/bin/bash
# scripts/gpu_ab.sh - a lab script for the GPU machine (not shipped): checks a
# build and compares its speed with another build in the same run.
#   usage: bash scripts/gpu_ab.sh [conformance|conformance-cuda|conformance-opencl] [direct]
#                                 [hardening] [bench|bench-base] [sanitize] [tune] [tune-opencl]
#                                 [base-conformance]
#                                 [decode] [decode-kernel] [sanitize-decode] [moe] [moe-split]
#                                 [moe-ab] [conformance-ops] [graph]
# Expects, carried along with the tree:
#   build-gpu/           the build under test (bin/, lib/), built on a CPU machine
#   .carry/base/         the reference build: bin/, lib/, tiledb/
#   .carry/lib/          libclblast.so.1; .carry/include/ the DLPack header
# conformance: the whole suite on CUDA and on NVIDIA's OpenCL driver
#   (conformance-cuda: on CUDA only).
# bench: `pit bench --suite matmul` and `--suite layers`, reference and new
#   alternated twice, compared point by point (scripts/bench_compare.py).
# direct: the CUDA plug-in's direct tests (test_cuda_direct, test_cuda_detect,
#   test_cuda_ops) and the CUDA-graph capture test.
# hardening: the GPU-only checks of views, allocator, CUDA library loading
#   (the default search, the toolkit folder, a wheel folder next to torch).
# tune: `pit tune` with the new build (the tuned file comes back; its moe and
#   rows lines are printed). tune-opencl: the same on NVIDIA's OpenCL driver
#   (tuned-opencl.tiledb; its f16 lines are printed: the opencl-gpu family
#   file's f16 rows are generated until these measure them).
# bench also runs test_cuda_ops --bench (attention and MoE points) of both.
# sanitize: compute-sanitizer memcheck and racecheck on the quick suite of the
#   operators whose kernels moved.
# decode: `pit bench --suite decode` with the shipped database (and the
#   reference build's suite with its database, when there is one).
# decode-kernel: the decode kernels forced, beside cuBLAS and the floor
#   (test_cuda_direct --bench-decode), and both sanitizers on the direct
#   test's quick cases.
# moe: `pit bench --suite moe` and scripts/torch_moe.py beside PyTorch.
# moe-split: where one pit_moe_ffn call goes, per kernel (ncu of the moe
#   suite's first call, each kernel alone), at the first point of the model
#   MOE_MODEL names (default mixtral-8x7b).
# moe-ab: `pit bench --suite moe --only MODEL` of the reference build and the
#   new one alternated twice, for each model of MOE_MODELS (default
#   mixtral-8x7b qwen3-30b-a3b), MOE_REPEATS repeats (default 5).
# conformance-ops: the CUDA conformance of the operators PIT_CONF_OPS names.
# graph: the CUDA-graph capture test alone.
# PIT_NEW names another build under test than build-gpu/.
# Logs and JSON go to $OUT (or ./gpu-out); a summary table is printed last.
set -uo pipefail
out="${OUT:-$PWD/gpu-out}"; mkdir -p "$out"
export PIT_CACHE_DIR=/tmp/pit-cache
root="$PWD"
export LD_LIBRARY_PATH="$root/.carry/lib:${LD_LIBRARY_PATH:-}"
summary="$out/summary.txt"; : > "$summary"
note() { echo "$*" | tee -a "$summary"; }
step() { local name="$1"; shift; local t0=$SECONDS; "$@" > "$out/$name.log" 2>&1; local rc=$?;
         note "$(printf '%-26s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS-t0))" "$(tail -1 "$out/$name.log" | cut -c1-90)")"; return $rc; }
icd=$(ldconfig -p | grep -m1 'libnvidia-opencl.so.1' | awk '{print $NF}')
if [ -n "$icd" ]; then mkdir -p /tmp/icd && echo "$icd" > /tmp/icd/nvidia.icd && export OCL_ICD_VENDORS=/tmp/icd; fi
note "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)"

# run_in BUILD TILEDB cmd...: a build's libraries and tile databases, under a
# time limit (STEP_TIMEOUT seconds, default 420): a kernel that hangs costs
# one step, not the whole device call
run_in() { local b="$1" t="$2"; shift 2;
           timeout "${STEP_TIMEOUT:-420}" env LD_LIBRARY_PATH="$b/lib:$LD_LIBRARY_PATH" PIT_TILEDB_DIR="$t" "$@"; }
NEW="${PIT_NEW:-$root/build-gpu}"; BASE="$root/.carry/base"

for what in "$@"; do
  case "$what" in
  conformance|conformance-cuda|conformance-opencl)
    [ "$what" != conformance-opencl ] && step conf_cuda run_in "$NEW" "$root/tiledb" env PIT_BACKEND=cuda "$NEW/bin/pit" conformance
    [ "$what" != conformance-cuda ] && step conf_opencl run_in "$NEW" "$root/tiledb" env PIT_BACKEND=opencl "$NEW/bin/pit" conformance ;;
  hardening)
    step views run_in "$NEW" "$root/tiledb" "$NEW/bin/test_views"
    step cuda_views run_in "$NEW" "$root/tiledb" "$NEW/bin/test_cuda_views"
    step allocator_cuda run_in "$NEW" "$root/tiledb" "$NEW/bin/test_frameworks" allocator cuda
    step cuda_libs_load run_in "$NEW" "$root/tiledb" "$NEW/bin/test_cuda_libs" load
    step cuda_libs_driver run_in "$NEW" "$root/tiledb" "$NEW/bin/test_cuda_libs" driver
    step cuda_libs_dirs run_in "$NEW" "$root/tiledb" env PIT_CUDA_LIB_DIRS="/nonexistent:/usr/local/cuda/lib64" "$NEW/bin/test_cuda_libs" dirs /usr/local/cuda/lib64
    step info_debug run_in "$NEW" "$root/tiledb" env PIT_LOG=debug "$NEW/bin/pit" info
    grep -h "cuda: driver" "$out/info_debug.log" | tee -a "$summary"
    wheel=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)
    for d in "$wheel"/nvidia/cu13/lib "$wheel"/nvidia/cuda_nvrtc/lib; do
      [ -d "$d" ] || continue
      step wheel_conf run_in "$NEW" "$root/tiledb" env PIT_CUDA_LIB_DIRS="$d" PIT_LOG=debug PIT_CACHE_DIR=/tmp/pit-cache-wheel PIT_BACKEND=cuda "$NEW/bin/pit" conformance --quick --op matmul
      grep -h "cuda: driver" "$out/wheel_conf.log" | tee -a "$summary"; break
    done ;;
  direct)
    step cuda_direct run_in "$NEW" "$root/tiledb" env PIT_CUDA_PLUGIN_PATH="$NEW/lib/libpit-cuda.so" "$NEW/bin/test_cuda_direct"
    step cuda_detect run_in "$NEW" "$root/tiledb" env PIT_CUDA_PLUGIN_PATH="$NEW/lib/libpit-cuda.so" "$NEW/bin/test_cuda_detect"
    step cuda_ops run_in "$NEW" "$root/tiledb" env PIT_CUDA_PLUGIN_PATH="$NEW/lib/libpit-cuda.so" "$NEW/bin/test_cuda_ops"
    step cuda_graph run_in "$NEW" "$root/tiledb" "$NEW/bin/test_cuda_graph" ;;
  tune)
    step tune run_in "$NEW" "$root/tiledb" env PIT_BACKEND=cuda "$NEW/bin/pit" tune --output "$out/tuned.tiledb"
    grep -E "^[^#].* (moe|rows) " "$out/tuned.tiledb" | tee -a "$summary" ;;
  tune-opencl)
    step tune_opencl run_in "$NEW" "$root/tiledb" env PIT_BACKEND=opencl "$NEW/bin/pit" tune --output "$out/tuned-opencl.tiledb"
    grep -E "^[^#].* f16 " "$out/tuned-opencl.tiledb" | tee -a "$summary" ;;
  decode)
    # the decode suite with the shipped database, beside the reference build's
    step decode_shipped run_in "$NEW" "$root/tiledb" env PIT_BACKEND=cuda "$NEW/bin/pit" bench --suite decode --json "$out/decode_shipped.json"
    if [ -x "$BASE/bin/pit" ]; then
      step decode_base run_in "$BASE" "$BASE/tiledb" env PIT_BACKEND=cuda "$BASE/bin/pit" bench --suite decode --json "$out/decode_base.json"
      grep -hE "^ *(bf16|f16|f32) " "$out/decode_base.log" | sed 's/^/base: /' | head -40
      grep -hE "^ *(bf16|f16|f32) " "$out/decode_shipped.log" | sed 's/^/new:  /' | head -40
    fi
    ;;
  decode-kernel)
    # the decode kernels forced (no selection) beside cuBLAS and the floor,
    # each result checked first; then both sanitizers on the direct test's
    # quick cases (a tensor-core decode case among them)
    step decode_kernel run_in "$NEW" "$root/tiledb" env PIT_CUDA_PLUGIN_PATH="$NEW/lib/libpit-cuda.so" "$NEW/bin/test_cuda_direct" --bench-decode
    grep -E "^(f16|bf16|f32) " "$out/decode_kernel.log"
    for tool in memcheck racecheck; do
      step ${tool}_direct run_in "$NEW" "$root/tiledb" env PIT_CUDA_PLUGIN_PATH="$NEW/lib/libpit-cuda.so" compute-sanitizer --tool $tool --error-exitcode 3 "$NEW/bin/test_cuda_direct" --quick
    done ;;
  sanitize-decode)
    # the decode kernel and the split tile kernel under both tools (the quick
    # decode suite checks every result), and the quick matmul conformance
    for tool in memcheck racecheck; do
      step ${tool}_decode run_in "$NEW" /tmp/tdb-read env PIT_BACKEND=cuda timeout 240 compute-sanitizer --tool $tool --error-exitcode 3 "$NEW/bin/pit" bench --suite decode --quick
    done
    step memcheck_matmul run_in "$NEW" "$root/tiledb" env PIT_BACKEND=cuda timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 "$NEW/bin/pit" conformance --quick --op matmul ;;
  moe)
    step moe_suite run_in "$NEW" "${PIT_TDB:-$root/tiledb}" env PIT_BACKEND=cuda "$NEW/bin/pit" bench --suite moe --json "$out/moe_bf16.json"
    step torch_moe run_in "$NEW" "${PIT_TDB:-$root/tiledb}" python3 "$root/scripts/torch_moe.py" --lib "$NEW/lib/libpit.so" --json "$out/torch_moe.json"
    tail -25 "$out/moe_suite.log"; tail -20 "$out/torch_moe.log" ;;
  moe-split)
    # the first call's kernels: routing, marks, zeroing, plans, the two
    # products, the activation, the sums
    step moe_split run_in "$NEW" "${PIT_TDB:-$root/tiledb}" env PIT_BACKEND=cuda timeout 120 ncu --clock-control none \
      --launch-count 10 --kill on --section SpeedOfLight "$NEW/bin/pit" bench --suite moe --only "${MOE_MODEL:-mixtral-8x7b}"
    grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput" "$out/moe_split.log" | sed 's/  */ /g' | cut -c1-60 | paste - - - | tee -a "$summary" ;;
  moe-ab)
    for m in ${MOE_MODELS:-mixtral-8x7b qwen3-30b-a3b}; do
      for i in 1 2; do
        step moe_${m}_base_$i run_in "$BASE" "$BASE/tiledb" env PIT_BACKEND=cuda timeout 240 "$BASE/bin/pit" bench --suite moe --only $m --repeats ${MOE_REPEATS:-5}
        step moe_${m}_new_$i run_in "$NEW" "$root/tiledb" env PIT_BACKEND=cuda timeout 240 "$NEW/bin/pit" bench --suite moe --only $m --repeats ${MOE_REPEATS:-5}
        grep -hE "^ *$m" "$out/moe_${m}_base_$i.log" | sed "s/^/base $i: /" | tee -a "$summary"
        grep -hE "^ *$m" "$out/moe_${m}_new_$i.log" | sed "s/^/new  $i: /" | tee -a "$summary"
      done
    done ;;
  conformance-ops)
    for op in ${PIT_CONF_OPS:-moe_ffn}; do
      step conf_cuda_$op run_in "$NEW" "$root/tiledb" env PIT_BACKEND=cuda "$NEW/bin/pit" conformance --op $op
    done ;;
  graph)
    step cuda_graph run_in "$NEW" "$root/tiledb" "$NEW/bin/test_cuda_graph" ;;
  base-conformance)
    step base_conf_cuda run_in "$BASE" "$BASE/tiledb" env PIT_BACKEND=cuda "$BASE/bin/pit" conformance
    step base_conf_opencl run_in "$BASE" "$BASE/tiledb" env PIT_BACKEND=opencl "$BASE/bin/pit" conformance ;;
  sanitize)
    for op in ${PIT_SANITIZE_OPS:-attention moe moe_ffn sddmm softmax rows}; do
      step memcheck_$op run_in "$NEW" "$root/tiledb" env PIT_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 3 "$NEW/bin/pit" conformance --quick --op $op
      step racecheck_$op run_in "$NEW" "$root/tiledb" env PIT_BACKEND=cuda compute-sanitizer --tool racecheck --error-exitcode 3 "$NEW/bin/pit" conformance --quick --op $op
    done ;;
  bench|bench-base)
    for i in 1 2; do
      for b in base new; do
        [ "$what" = bench-base ] && [ $b = new ] && continue
        if [ $b = base ]; then B="$BASE"; T="$BASE/tiledb"; else B="$NEW"; T="$root/tiledb"; fi
        step ops_bench_${b}_$i run_in "$B" "$T" env PIT_CUDA_PLUGIN_PATH="$B/lib/libpit-cuda.so" "$B/bin/test_cuda_ops" --bench
        grep -hE "^(attention|moe)" "$out/ops_bench_${b}_$i.log" | sed "s/^/$b $i: /" >> "$out/ops_bench.txt"
        for suite in matmul layers; do
          step bench_${suite}_${b}_$i run_in "$B" "$T" env PIT_BACKEND=cuda "$B/bin/pit" bench --suite $suite --json "$out/bench_${suite}_${b}_$i.json"
        done
      done
    done
    [ "$what" = bench ] && { python3 "$root/scripts/bench_compare.py" --base "$out"/bench_*_base_*.json --new "$out"/bench_*_new_*.json > "$out/compare.txt" 2>&1; cat "$out/compare.txt"; cat "$out/ops_bench.txt"; } ;;
  esac
done
# the device hands back a few files only: the logs and JSON in one archive
(cd "$out" && tar czf logs.tgz --remove-files *.log *.json 2>/dev/null)
echo; cat "$summary"
