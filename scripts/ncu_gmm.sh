#!/bin/bash
# scripts/ncu_gmm.sh - a lab script for the GPU machine (not shipped): the
# tensor-core gathered GEMM's DRAM and L2 traffic and the moe suite's times
# under each band size of PIT_CUDA_GMM_BAND (GMM_BANDS, default "1 16").
#   usage: bash scripts/ncu_gmm.sh    (MOE_MODELS, GMM_BANDS, NCU=0 to skip ncu)
cd "$(dirname "$0")/.." && out="${OUT:-$PWD/gpu-out}"; mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:$PWD/.carry/lib:${LD_LIBRARY_PATH:-} PIT_CACHE_DIR=/tmp/pit-cache
export PIT_BACKEND=cuda PIT_TILEDB_DIR=$PWD/tiledb
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum
pit=$PWD/build-gpu/bin/pit
for m in ${MOE_MODELS:-mixtral-8x7b qwen3-30b-a3b}; do
  for band in ${GMM_BANDS:-1 16}; do
    if [ "${NCU:-1}" = 1 ]; then
      PIT_CUDA_GMM_BAND=$band timeout 200 ncu --clock-control none --kernel-name regex:pit_op_gmm_tc --launch-count 2 --kill on \
        --metrics $M $pit bench --suite moe --only $m > "$out/ncu_${m}_$band.log" 2>&1
      echo "== $m band $band: $(grep -E 'dram__bytes_read|gpu__time' "$out/ncu_${m}_$band.log" | awk '{print $1, $3}' | paste -sd' ')"
    fi
  done
  for i in 1 2; do
    for band in ${GMM_BANDS:-1 16}; do
      PIT_CUDA_GMM_BAND=$band timeout 200 $pit bench --suite moe --only $m --repeats ${MOE_REPEATS:-5} > "$out/moe_${m}_${band}_$i.log" 2>&1
      grep -E "^ *$m" "$out/moe_${m}_${band}_$i.log" | cut -c1-120 | sed "s/^/band $band run $i: /"
    done
  done
done
