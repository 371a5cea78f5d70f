#!/bin/bash
# scripts/python_gpu.sh - a lab script for the GPU machine (not shipped): the
# Python package's tests on the device. The machine has no package registry,
# so the package comes as a wheel built beside the tree (`pip wheel
# --no-deps ./python -w .whl`, carried as .whl/); it holds no Python
# extension, so it is unpacked onto PYTHONPATH whatever the machine's Python
# version. Runs python/tests on each backend named (default: cuda, then
# opencl through NVIDIA's driver), with PyTorch where the machine has it.
# Logs under $OUT; the pytest summaries last.
set -u
root="$PWD"; out="${OUT:-$root/gpu-out}"; mkdir -p "$out"
whl=$(ls "$root"/.whl/pit_sparse-*.whl 2>/dev/null | head -n1)
[ -n "$whl" ] || { echo "python_gpu.sh: no wheel in .whl/ (pip wheel --no-deps ./python -w .whl)"; exit 2; }
pkg=/tmp/pit-wheel; rm -rf "$pkg"; python3 -m zipfile -e "$whl" "$pkg" || exit 2
icd=$(ldconfig -p | grep -m1 'libnvidia-opencl.so.1' | awk '{print $NF}')
if [ -n "$icd" ]; then mkdir -p /tmp/icd && echo "$icd" > /tmp/icd/nvidia.icd && export OCL_ICD_VENDORS=/tmp/icd; fi
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" 2>&1 | tail -n1
for backend in ${PIT_PYTHON_BACKENDS:-cuda opencl}; do
  PYTHONPATH="$pkg" PIT_BACKEND=$backend PIT_CACHE_DIR=/tmp/pit-cache timeout 500 \
    python3 -m pytest "$root/python/tests" -q -rs -p no:cacheprovider > "$out/pytest_$backend.log" 2>&1
  echo "$backend: rc=$? $(tail -n1 "$out/pytest_$backend.log")"
done
