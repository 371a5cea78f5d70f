#!/bin/sh
# tests/fuzz/run.sh SECONDS [TARGET...] - builds the libFuzzer targets with
# clang + ASan + UBSan (a separate CMake configuration, ./build-fuzz or
# $PIT_FUZZ_BUILD) and runs each for SECONDS on a corpus kept in the build
# folder (seeded with the shipped tile databases). Prints, per target, the
# executions and the crashes; exits 1 when any target crashed, leaked or hung.
# Needs clang and libclang-rt-14-dev (Debian), and an OpenCL device (PoCL).
set -eu
secs="${1:-60}"
[ $# -gt 0 ] && shift
root=$(cd "$(dirname "$0")/../.." && pwd)
build="${PIT_FUZZ_BUILD:-$root/build-fuzz}"
targets="${*:-fuzz_tiledb fuzz_tensor fuzz_detect fuzz_plugin}"
cc="${PIT_FUZZ_CC:-clang}"

mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_PROJECT_INCLUDE="$root/tests/sanitize.cmake" -DPIT_FUZZ=ON \
    -DPIT_WITH_CUDA=OFF -DPIT_WITH_HIP=OFF >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; exit 1; }
# shellcheck disable=SC2086
nice cmake --build "$build" -j"${PIT_JOBS:-2}" --target pit-opencl $targets

export PIT_CACHE_DIR="$build/fuzz-kernel-cache"
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:handle_abort=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
unset PIT_LOG PIT_TILEDB PIT_BACKEND

status=0
summary=""
for t in $targets; do
    corpus="$build/fuzz-corpus/$t"
    arts="$build/fuzz-artifacts/$t"
    mkdir -p "$corpus" "$arts"
    seeds=""
    max_len=4096
    leaks=1
    # PoCL's worker threads make LeakSanitizer's stop-the-world crash ("Tracer
    # caught signal 11") in the targets that run kernels: their leaks are
    # checked by the ASan and valgrind runs of the tests (tests/sanitize.sh).
    [ "$t" = fuzz_tiledb ] || [ "$t" = fuzz_plugin ] || leaks=0
    # fuzz_detect compiles a kernel for every new micro-tile/tile/dtype: a
    # first compile by PoCL's LLVM on a loaded 2-core machine took > 120 s.
    timeout=120
    [ "$t" = fuzz_detect ] && timeout=900
    # Inputs that once broke a target are replayed first on every run.
    [ -d "$root/tests/fuzz/regressions/$t" ] && seeds="$root/tests/fuzz/regressions/$t"
    if [ "$t" = fuzz_tiledb ]; then
        seeds="$seeds $root/tiledb"
        max_len=8192
    fi
    log="$build/fuzz-$t.log"
    before=$(ls "$arts" | wc -l)
    # -fork=0 keeps one process; -timeout covers a first kernel compile on PoCL.
    # shellcheck disable=SC2086
    ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=$leaks" nice -n 19 "$build/bin/$t" \
        -detect_leaks="$leaks" -max_total_time="$secs" -print_final_stats=1 -timeout="$timeout" \
        -max_len="$max_len" -rss_limit_mb=4096 -artifact_prefix="$arts/" \
        "$corpus" $seeds >"$log" 2>&1 || status=1
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    after=$(ls "$arts" | wc -l)
    crashes=$((after - before))
    [ "$crashes" -gt 0 ] && status=1
    line="$t: ${execs:-?} executions in ${secs} s, corpus $(ls "$corpus" | wc -l) inputs, $crashes new crash(es)"
    [ "$crashes" -gt 0 ] && line="$line: $(ls -t "$arts" | head -n "$crashes" | tr '\n' ' ')"
    echo "$line"
    summary="$summary$line
"
    if grep -q "ERROR: \|property violated\|runtime error" "$log"; then
        status=1
        grep -m 5 -A 25 "ERROR: \|property violated\|runtime error" "$log" | head -n 60
    fi
done
printf '\nfuzz summary:\n%s' "$summary"
exit $status
