#!/bin/bash
# scripts/python_gpu.sh - a lab script for the GPU machine (not shipped): the
# Python package's tests on the device. The machine has no package registry,
# so the package comes as a wheel built beside the tree (`pip wheel
# --no-deps ./python -w .whl`, carried as .whl/); it holds no Python
# extension, so it is unpacked whatever the machine's Python version. The
# tree's python/pit runs on the wheel's libpit and plug-ins (PIT_LIBRARY), so
# a change to the Python sources needs no new wheel. Runs python/tests on each backend named (default: cuda, then
# opencl through NVIDIA's driver), with PyTorch where the machine has it.
# Logs under $OUT; the pytest summaries last.
set -u
root="$PWD"; out="${OUT:-$root/gpu-out}"; mkdir -p "$out"
# PIT_PY_LIB: a build's libpit.so (its plug-ins beside it) instead of the wheel's
libpit="${PIT_PY_LIB:-}"
if [ -z "$libpit" ]; then
  whl=$(ls "$root"/.whl/pit_sparse-*.whl 2>/dev/null | head -n1)
  [ -n "$whl" ] || { echo "python_gpu.sh: no wheel in .whl/ (pip wheel --no-deps ./python -w .whl)"; exit 2; }
  pkg=/tmp/pit-wheel; rm -rf "$pkg"; python3 -m zipfile -e "$whl" "$pkg" || exit 2
  libpit="$pkg/pit/lib/libpit.so"
fi
# pytest, where the machine lacks it: wheels carried in .carry/pytest/
# (pip download pytest -d .carry/pytest), unpacked beside the package
extra=""
if ! python3 -c "import pytest" 2>/dev/null && ls "$root"/.carry/pytest/*.whl >/dev/null 2>&1; then
  extra=/tmp/pit-pytest; rm -rf "$extra"
  for w in "$root"/.carry/pytest/*.whl; do python3 -m zipfile -e "$w" "$extra"; done
fi
icd=$(ldconfig -p | grep -m1 'libnvidia-opencl.so.1' | awk '{print $NF}')
if [ -n "$icd" ]; then mkdir -p /tmp/icd && echo "$icd" > /tmp/icd/nvidia.icd && export OCL_ICD_VENDORS=/tmp/icd; fi
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" 2>&1 | tail -n1
for backend in ${PIT_PYTHON_BACKENDS:-cuda opencl}; do
  PYTHONPATH="$root/python${extra:+:$extra}" PIT_LIBRARY="$libpit" PIT_BACKEND=$backend PIT_CACHE_DIR=/tmp/pit-cache timeout 500 \
    python3 -m pytest "$root/python/tests" -q -rs -p no:cacheprovider > "$out/pytest_$backend.log" 2>&1
  echo "$backend: rc=$? $(tail -n1 "$out/pytest_$backend.log")"
done
