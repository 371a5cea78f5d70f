#!/bin/sh
# Runs `pit conformance` on one backend. Exit 77 (ctest: skipped) when the
# backend has no device here; the reason is printed.
pit="$1"; backend="$2"; shift 2
out=$(PIT_BACKEND="$backend" "$pit" conformance "$@" 2>&1); rc=$?
printf '%s\n' "$out"
if printf '%s\n' "$out" | grep -q "^$backend: SKIPPED: "; then
  echo "conformance on $backend: SKIPPED (reason above)"
  exit 77
fi
exit $rc
