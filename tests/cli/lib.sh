#!/usr/bin/env bash
# Shared helpers for the CLI end-to-end scripts: a temporary folder, pass/fail counting and a summary line.
set -u
: "${TESSEL:?set TESSEL to the tessel binary}"
fail=0
passed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # name, condition (0 = pass)
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else echo "FAIL: $1"; fail=$((fail + 1)); fi
}
contains() { grep -q -- "$2" "$1"; echo $?; }
# Prints the summary line ctest logs and exits non-zero on any failure.
finish() {
    echo "$passed passed, $fail failed"
    [ "$fail" -eq 0 ]
}
