#!/bin/sh
# tests/test_kernel_cache.sh PIT_TOOL WORKDIR - the OpenCL on-disk kernel cache
# ($PIT_CACHE_DIR) under abuse:
#  1. two `pit conformance --quick --op matmul` processes fill an empty cache
#     at once: both pass, no temporary file is left, every entry is whole;
#  2. every entry corrupted (bytes flipped) or truncated (or emptied) between
#     runs: the next run detects it (checksum), recompiles, and passes;
#  3. the run after that loads every program from the rewritten cache;
#  4. every entry replaced by a FIFO (or a folder): the next run neither
#     blocks on them nor fails: it recompiles;
#  5. two processes fill a folder that is over its cap (PIT_CACHE_MAX_MB=4:
#     old entries and foreign files) at once, both trimming it: both pass,
#     no temporary file is left, the foreign files stay.
# Exit 77 (skipped) when there is no OpenCL device.
set -u
pit="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"
export PIT_BACKEND=opencl
unset PIT_LOG
cache="$work/cache"
export PIT_CACHE_DIR="$cache"
fail=0

if ! "$pit" info >"$work/info.log" 2>&1 || ! grep -q "opencl  *[1-9]" "$work/info.log"; then
    echo "kernel cache: SKIPPED: no OpenCL device"; exit 77
fi

conf() { "$pit" conformance --quick --op matmul >"$1" 2>&1; }

# 1. two processes on an empty cache at once
conf "$work/p1.log" & p1=$!
conf "$work/p2.log" & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
echo "concurrent fill: process 1 exit $r1, process 2 exit $r2"
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] || { fail=1; tail -n 5 "$work/p1.log" "$work/p2.log"; }
n=$(ls "$cache"/opencl-*.bin 2>/dev/null | wc -l)
tmp=$(ls "$cache" | grep -c '\.tmp\.' || true)
echo "cache entries: $n, temporary files left: $tmp"
[ "$n" -gt 0 ] && [ "$tmp" -eq 0 ] || fail=1
for f in "$cache"/opencl-*.bin; do
    [ "$(head -c 8 "$f")" = PITKERN1 ] || { echo "entry $f has no header"; fail=1; }
done

# 2. corrupt or truncate every entry, then run again
i=0
for f in "$cache"/opencl-*.bin; do
    size=$(wc -c <"$f")
    case $((i % 3)) in
    0) printf 'garbage!' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null ;;
    1) head -c $((size / 2)) "$f" >"$f.cut" && mv "$f.cut" "$f" ;;
    2) : >"$f" ;;
    esac
    i=$((i + 1))
done
echo "damaged $i entries (flipped bytes, truncated, emptied)"
PIT_LOG=debug "$pit" conformance --quick --op matmul >"$work/p3.log" 2>&1; r3=$?
bad=$(grep -c "corrupt, recompiling\|rejected, recompiling" "$work/p3.log" || true)
compiled=$(grep -c "opencl: compiled" "$work/p3.log" || true)
echo "run on the damaged cache: exit $r3, $bad corrupt entries detected, $compiled programs recompiled"
[ $r3 -eq 0 ] || { fail=1; grep -m 5 FAIL "$work/p3.log"; }
[ "$compiled" -gt 0 ] || fail=1

# 3. the rewritten cache serves every program
PIT_LOG=debug "$pit" conformance --quick --op matmul >"$work/p4.log" 2>&1; r4=$?
loaded=$(grep -c "loaded from" "$work/p4.log" || true)
compiled=$(grep -c "opencl: compiled" "$work/p4.log" || true)
echo "run on the repaired cache: exit $r4, $loaded programs loaded from disk, $compiled compiled"
[ $r4 -eq 0 ] && [ "$compiled" -eq 0 ] || fail=1

# 4. entries that are not regular files: FIFOs block a plain open() forever
i=0
for f in "$cache"/opencl-*.bin; do
    rm -f "$f"
    if [ $((i % 4)) -eq 3 ]; then mkdir "$f"; else mkfifo "$f"; fi
    i=$((i + 1))
done
timeout 300 "$pit" conformance --quick --op matmul >"$work/p5.log" 2>&1; r5=$?
echo "run on a cache of FIFOs and folders: exit $r5 (124: it blocked)"
[ $r5 -eq 0 ] || { fail=1; tail -n 5 "$work/p5.log"; }

# 5. two processes trimming one folder at once
capped="$work/capped"
mkdir -p "$capped"
i=0
while [ $i -lt 24 ]; do
    f="$capped/opencl-$(printf '%032x' $((i + 4096))).bin"
    head -c 262144 /dev/urandom >"$f"
    touch -d "@$(( $(date +%s) - 86400 + i * 60 ))" "$f"
    i=$((i + 1))
done
printf 'not pit'"'"'s\n' >"$capped/notes.txt"
head -c 1048576 /dev/urandom >"$capped/big-foreign.dat"
PIT_CACHE_DIR="$capped" PIT_CACHE_MAX_MB=4 conf "$work/p6.log" & p1=$!
PIT_CACHE_DIR="$capped" PIT_CACHE_MAX_MB=4 conf "$work/p7.log" & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
old=$(ls "$capped" | grep -c '^opencl-0\{28\}' || true)
tmp=$(ls "$capped" | grep -c '\.tmp\.' || true)
echo "two processes trimming at once: exit $r1 and $r2, $old of 24 old entries left, $tmp temporary files"
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ "$old" -lt 24 ] && [ "$tmp" -eq 0 ] || fail=1
[ -f "$capped/notes.txt" ] && [ "$(wc -c <"$capped/big-foreign.dat")" -eq 1048576 ] ||
    { echo "a foreign file was removed"; fail=1; }

[ $fail -eq 0 ] && echo "kernel cache: PASS" || echo "kernel cache: FAIL"
exit $fail
