#!/bin/sh
# tests/test_cache_tool.sh PIT_TOOL WORKDIR - `pit cache show|clear` on a
# folder of pit's kernel entries (current, legacy CUDA, a writer's temporary
# file) and foreign files (notes, a tuned tile database, look-alike names, a
# FIFO named as an entry): show counts pit's entries only and prints the
# folder and the cap; clear exits 0, says what it removed and leaves every
# foreign file; show then counts none. Without any folder (PIT_CACHE_DIR and
# HOME unset) both succeed and say so. Needs no device.
set -u
pit="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work/tiledb"
export PIT_CACHE_DIR="$work" PIT_CACHE_MAX_MB=64
fail=0

bytes() { head -c "$2" /dev/urandom >"$work/$1"; }
bytes opencl-0123456789abcdef0123456789abcdef.bin 1000
bytes cuda-4567456745674567abcdabcdabcdabcd.bin 2000
bytes cuda-sm90-0123456789abcdef.cubin 3000
bytes opencl-0123456789abcdef0123456789abcdef.bin.tmp.77.1 500
foreign="notes.txt opencl-notes.bin OPENCL-0123456789abcdef0123456789abcdef.bin
opencl-0123456789abcdef0123456789abcdef.bin.bak tiledb/device.tiledb"
for f in $foreign; do bytes "$f" 700; done
mkfifo "$work/opencl-ffffffffffffffffffffffffffffffff.bin"

expect() { # expect WHAT EXIT_WANTED EXIT_GOT OUTPUT_FILE REGEX
    if [ "$3" -ne "$2" ] || ! grep -q "$5" "$4"; then
        echo "FAIL $1: exit $3 (want $2), output:"; cat "$4"; fail=1
    else
        echo "ok   $1"
    fi
}

"$pit" cache show >"$work/show1.log" 2>&1; rc=$?
expect "show: folder" 0 $rc "$work/show1.log" "^folder:  $work\$"
expect "show: 4 entries" 0 $rc "$work/show1.log" "^entries: 4\$"
expect "show: 6500 bytes" 0 $rc "$work/show1.log" "^bytes:   6500 "
expect "show: cap" 0 $rc "$work/show1.log" "^cap:     64 MB (PIT_CACHE_MAX_MB=64)"

"$pit" cache clear >"$work/clear.log" 2>&1; rc=$?
expect "clear" 0 $rc "$work/clear.log" "^removed 4 entries (6500 bytes) from $work\$"
for f in $foreign; do
    [ "$(wc -c <"$work/$f")" -eq 700 ] || { echo "FAIL clear removed or changed $f"; fail=1; }
done
[ -p "$work/opencl-ffffffffffffffffffffffffffffffff.bin" ] || { echo "FAIL clear removed a FIFO"; fail=1; }
left=$(ls "$work" | grep -c -e '^opencl-0123' -e '^cuda-' || true)
[ "$left" -eq 1 ] || { echo "FAIL clear left $left of pit's entries (the .bak is foreign)"; fail=1; }

"$pit" cache show >"$work/show2.log" 2>&1; rc=$?
expect "show after clear: 0 entries" 0 $rc "$work/show2.log" "^entries: 0\$"

PIT_CACHE_MAX_MB=0 "$pit" cache show >"$work/show3.log" 2>&1; rc=$?
expect "show: cap off" 0 $rc "$work/show3.log" "^cap:     0: off"

env -u PIT_CACHE_DIR -u HOME "$pit" cache show >"$work/show4.log" 2>&1; rc=$?
expect "show without a folder" 0 $rc "$work/show4.log" "^folder:  none"
env -u PIT_CACHE_DIR -u HOME "$pit" cache clear >"$work/clear2.log" 2>&1; rc=$?
expect "clear without a folder" 0 $rc "$work/clear2.log" "nothing to clear"

[ $fail -eq 0 ] && echo "pit cache: PASS" || echo "pit cache: FAIL"
exit $fail
