#!/bin/sh
# tests/sanitize.sh asan [--full] | valgrind BUILD_DIR [--full]
#
#  asan:     builds ./build-asan (or $PIT_ASAN_BUILD): libpit, the OpenCL
#            plug-in, the tool and the tests with ASan + UBSan
#            (tests/sanitize.cmake, -DPIT_SANITIZE=ON), then runs the unit,
#            API and reliability tests and `pit conformance --quick` on
#            OpenCL (--full: the whole conformance suite). LeakSanitizer
#            suppresses third-party frames only (tests/lsan.supp).
#  valgrind: memcheck on `pit info` (--full: also `pit conformance --quick
#            --op matmul` and test_faults) from an ordinary build;
#            fails when pit has any "definitely lost" byte or memory error
#            (third-party internals suppressed by tests/valgrind.supp).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
mode="${1:-asan}"
[ $# -gt 0 ] && shift
export PIT_BACKEND=opencl
unset PIT_LOG PIT_TILEDB

case "$mode" in
asan)
    full=""
    [ "${1:-}" = --full ] && full=1
    build="${PIT_ASAN_BUILD:-$root/build-asan}"
    mkdir -p "$build"
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_PROJECT_INCLUDE="$root/tests/sanitize.cmake" -DPIT_SANITIZE=ON \
        -DPIT_WITH_CUDA=OFF -DPIT_WITH_HIP=OFF >"$build/configure.log" 2>&1 ||
        { cat "$build/configure.log"; exit 1; }
    nice cmake --build "$build" -j"${PIT_JOBS:-2}"
    export PIT_CACHE_DIR="$build/cache"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
    # use_tls=0: LeakSanitizer's stop-the-world otherwise crashes ("Tracer
    # caught signal 11") scanning the TLS of PoCL's worker threads at exit.
    # It can only add false reports (pointers held in TLS), never hide a leak.
    export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0:use_tls=0:${LSAN_OPTIONS:-}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
    (cd "$build" && ctest --output-on-failure -j1 -R 'unit_|api_|reliability_test|reliability_cache_|tool_cache')
    if [ -n "$full" ]; then
        "$build/bin/pit" conformance
    else
        "$build/bin/pit" conformance --quick
    fi
    echo "sanitize: ASan + UBSan clean"
    ;;
valgrind)
    build="${1:?usage: sanitize.sh valgrind BUILD_DIR [--full]}"
    full="${2:-}"
    export PIT_CACHE_DIR="$build/cache"
    vg="valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite --error-exitcode=99 --suppressions=$root/tests/valgrind.supp"
    status=0
    run() {
        name="$1"; shift
        log="$build/valgrind-$name.log"
        # shellcheck disable=SC2086
        if $vg "$@" >"$log" 2>&1; then rc=0; else rc=$?; fi
        lost=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "$log" | tail -n 1)
        errs=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$log" | tail -n 1)
        echo "valgrind $name: exit $rc, definitely lost ${lost:-0} bytes, ${errs:-?} errors (log: $log)"
        [ "$rc" -eq 0 ] || { status=1; grep -m 3 -B 2 -A 20 "definitely lost in\|Invalid \|uninitialised" "$log" || true; }
    }
    # Warm the kernel cache outside valgrind: memcheck then checks pit, not LLVM.
    "$build/bin/pit" conformance --quick --op matmul >/dev/null 2>&1 || true
    run info "$build/bin/pit" info
    # PoCL under memcheck is slow (minutes per kernel-running program on 2
    # cores): CI checks `pit info`; --full adds a matmul conformance run and
    # the fault-injection test.
    if [ "$full" = --full ]; then
        run conformance "$build/bin/pit" conformance --quick --op matmul
        run test_faults "$build/bin/test_faults"
    fi
    exit $status
    ;;
*)
    echo "usage: sh tests/sanitize.sh asan [--full] | valgrind BUILD_DIR [--full]" >&2
    exit 2
    ;;
esac
