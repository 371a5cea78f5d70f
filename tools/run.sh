#!/bin/sh
# tools/run.sh - the README's two commands: set up a fresh machine, build, and
#   run the main job:  sh tools/run.sh bench [pit bench options]
#   run the tests:     sh tools/run.sh test
# Installs Debian packages when run as root (or with sudo available), builds
# every backend whose toolchain is present into ./build, installs the Python
# package (pip install ./python, with pytest) into the virtual environment
# build/python, then runs: the main job, or ctest and pytest.
set -eu
cd "$(dirname "$0")/.."
what="${1:-}"
[ $# -gt 0 ] && shift
case "$what" in bench|test) ;; *) echo "usage: sh tools/run.sh bench|test [options]" >&2; exit 2;; esac

PACKAGES="cmake make gcc pkg-config ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo \
libclblast-dev libdlpack-dev gnuplot-nox valgrind hipcc libamdhip64-dev librocsparse0 clang-14 \
libclang-rt-14-dev clang-19 lld-19 locales python3-venv"

install_packages() {
    missing=""
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "run.sh: installing:$missing" >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q || return 1
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing && return 0
    # One package this distribution lacks must not stop the others.
    for p in $missing; do
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$p" ||
            echo "run.sh: could not install $p" >&2
    done
}

# A machine without a package registry (an air-gapped GPU node) builds with
# what it has: configure says which backends that enables.
if command -v apt-get >/dev/null 2>&1; then
    install_packages || echo "run.sh: package installation failed; building with what is installed" >&2
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPIT_WERROR=ON
cmake --build build -j"$jobs"

# The Python package in its own environment; its build runs the project's
# CMake again (python/pyproject.toml) and takes its packages from PyPI.
python_setup() {
    [ -x build/python/bin/python ] || python3 -m venv build/python || return 1
    CMAKE_BUILD_PARALLEL_LEVEL="$jobs" build/python/bin/pip install -q ./python pytest
}

case "$what" in
bench)
    python_setup || echo "run.sh: the Python package could not be installed (no PyPI?); the tool runs without it" >&2
    ./build/bin/pit info
    exec ./build/bin/pit bench "$@"
    ;;
test)
    python_setup
    (cd build && ctest --output-on-failure --timeout 3000 "$@")
    exec build/python/bin/python -m pytest python/tests -q -rs
    ;;
esac
