#!/bin/sh
# `pit tune --quick` writes this device's tile database, and the next run
# (pit info) loads it first. Exit 77 (skipped) when OpenCL has no device.
pit="$1"; cache="$2"
rm -rf "$cache"
export PIT_CACHE_DIR="$cache" PIT_BACKEND=opencl
if ! "$pit" info >/dev/null 2>&1; then echo "opencl: SKIPPED: no device"; exit 77; fi
"$pit" tune --quick || exit 1
db=$(ls "$cache"/tiledb/*.tiledb 2>/dev/null | head -1)
[ -n "$db" ] || { echo "no tile database written under $cache/tiledb"; exit 1; }
grep -q "measured by pit tune --quick" "$db" || { echo "$db lacks the tune header"; exit 1; }
"$pit" info | grep "tile database: $db" || { echo "pit info does not load $db"; exit 1; }
echo "tuned database picked up: $db"
