#!/bin/bash
# scripts/attention_lab.sh - a GPU lab script (not shipped): the attention
# suite (and the layers suite) of two builds on the same device
# (build-base/, a build of an older commit, beside build-gpu/), an ncu
# profile (full set) of the attention kernel at the target point of each
# kind (`pit bench --suite attention --only KIND`), PyTorch's peers at the
# target points and the Python tests. Each build keeps its own kernel cache.
# Logs go to $OUT/attention-lab.tgz (one file: the device returns few
# files). conf: every operator's conformance and the sanitizers on
# attention. opencl: every operator's conformance on NVIDIA's OpenCL driver
# (f16 stored as half on a device without cl_khr_fp16), build-gpu's plug-in.
# Every step runs under `timeout`: a kernel that hangs costs minutes, not
# the whole device call.
#   usage: bash scripts/attention_lab.sh [conf] [bench] [layers] [ncu] [torch] [pytest] [opencl]
set -u
cd "$(dirname "$0")/.." || exit 1
out="${OUT:-$PWD/build-gpu/lab-out}"; logs="$out/attention-lab"; mkdir -p "$logs"
carry="$PWD/.carry"
export PIT_TILEDB_DIR="$PWD/tiledb" PIT_BACKEND=cuda PYTHONUNBUFFERED=1
steps="${*:-bench ncu torch pytest}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/gpu.txt"
with_build() { local b="$1"; shift; LD_LIBRARY_PATH="$PWD/build-$b/lib:$carry/lib" PIT_CACHE_DIR="/tmp/pit-cache-$b" "$@"; }
torch_att() { with_build gpu env PYTHONPATH=python PIT_LIBRARY="$PWD/build-gpu/lib/libpit.so" "$@"; }
for step in $steps; do
  case "$step" in
  bench)
    for b in base gpu; do
      [ -x "build-$b/bin/pit" ] || continue
      with_build "$b" timeout 300 "build-$b/bin/pit" bench --suite attention > "$logs/bench_$b.log" 2>&1
      echo "== $b"; grep -E "^(kind|window|blocks|causal|decode) " "$logs/bench_$b.log"
    done ;;
  conf)
    # every operator's conformance on build-gpu (one process an operator),
    # then the sanitizers on the attention cases
    for op in matmul sddmm softmax attention moe moe_ffn rows ffn backward prune; do
      with_build gpu timeout 300 build-gpu/bin/pit conformance --op "$op" > "$logs/conf_$op.log" 2>&1 &
    done; wait
    grep -h "^conformance:" "$logs"/conf_*.log | awk '{p+=$2; f+=$4; s+=$6} END {print "conformance:", p, "passed,", f, "failed,", s, "skipped"}'
    with_build gpu timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 build-gpu/bin/pit conformance --quick --op attention > "$logs/memcheck.log" 2>&1
    echo "memcheck: rc=$? $(tail -n1 "$logs/memcheck.log")"
    with_build gpu timeout 540 compute-sanitizer --tool racecheck --error-exitcode 3 build-gpu/bin/pit conformance --quick --op attention > "$logs/racecheck.log" 2>&1
    echo "racecheck: rc=$? $(tail -n1 "$logs/racecheck.log")" ;;
  layers)
    for b in base gpu; do
      with_build "$b" timeout 300 "build-$b/bin/pit" bench --suite layers > "$logs/layers_$b.log" 2>&1
      echo "== layers $b"; grep -E "^attention|^moe|^[a-z]+ .*\| " "$logs/layers_$b.log" | head -12
    done ;;
  ncu)
    # the kind's target point comes first: the third launch of its attention
    # kernel (the fused one, or decode's), then the figures that say what bounds it
    for k in window blocks causal decode; do
      with_build gpu timeout 200 ncu --set full -k 'regex:pit_op_attention$|pit_op_attn_decode$' --launch-skip 2 \
        --launch-count 1 build-gpu/bin/pit bench --suite attention --only "$k" > "$logs/ncu_$k.log" 2>&1
      echo "ncu $k: rc=$?"
      grep -E "^  pit_op|Duration|Registers Per Thread|Achieved Occupancy|Eligible Warps Per Scheduler|Warp Cycles Per Issued|Issue Slots Busy|Compute \(SM\) Throughput|Memory Throughput|L2 Hit Rate|DRAM Throughput" \
        "$logs/ncu_$k.log" | head -14
      grep -oE "(On average, each warp|This kernel|The kernel)[^.]*stall[^.]*\." "$logs/ncu_$k.log" | head -3
    done ;;
  torch)
    torch_att timeout 360 python3 scripts/torch_attention.py --targets --json "$logs/torch_attention.json" \
      > "$logs/torch_attention.log" 2>&1
    tail -n 14 "$logs/torch_attention.log" ;;
  opencl)
    icd=$(ldconfig -p | grep -m1 'libnvidia-opencl.so.1' | awk '{print $NF}')
    if [ -z "$icd" ]; then echo "opencl: no libnvidia-opencl.so.1 on this machine"; continue; fi
    mkdir -p /tmp/icd && echo "$icd" > /tmp/icd/nvidia.icd
    with_build gpu env PIT_BACKEND=opencl OCL_ICD_VENDORS=/tmp/icd build-gpu/bin/pit conformance > "$logs/conf_opencl.log" 2>&1
    echo "opencl: rc=$? $(tail -n1 "$logs/conf_opencl.log")"
    grep -E "skipped|FAIL" "$logs/conf_opencl.log" | grep -v " 0 skipped" | head -8 ;;
  pytest)
    with_build gpu env OUT="$logs" PIT_PY_LIB="$PWD/build-gpu/lib/libpit.so" PIT_PYTHON_BACKENDS=cuda \
      bash scripts/python_gpu.sh
    grep -E "^(FAILED|ERROR)|Error|assert" "$logs/pytest_cuda.log" | head -30 ;;
  esac
  # after every step: a run cut short still brings back what it did
  tar czf "$out/attention-lab.tgz" -C "$out" attention-lab
done
rm -rf "$logs"
