#!/usr/bin/env bash
# End-to-end checks of `tessel` itself: an unknown subcommand is an error (exit 2, named), even with --help; an empty
# option value is an error naming the option, not the option's default.
source "$(dirname "$0")/lib.sh"

"$TESSEL" frobnicate --help >"$tmp/o" 2>"$tmp/e"; rc=$?
check "unknown subcommand with --help exits 2" $([ $rc -eq 2 ]; echo $?)
check "the message names the subcommand" "$(contains "$tmp/e" 'unknown subcommand "frobnicate"')"
check "no main help on stdout" $([ ! -s "$tmp/o" ]; echo $?)
"$TESSEL" frobnicate >/dev/null 2>&1; rc=$?
check "unknown subcommand exits 2" $([ $rc -eq 2 ]; echo $?)
"$TESSEL" validate --help >"$tmp/v" 2>&1; check "known subcommand --help exits 0" $?
check "subcommand help is its own" "$(contains "$tmp/v" 'validate')"
"$TESSEL" --help >/dev/null 2>&1; check "main --help exits 0" $?
for cmd in "predict --tp" "trace --micro-batch" "search --max-gpus" "validate --write-bands" "calibrate --cluster"; do
    set -- $cmd
    "$TESSEL" "$@" "" >"$tmp/o" 2>"$tmp/e"; rc=$?
    check "$cmd '' exits 2" $([ $rc -eq 2 ]; echo $?)
    check "$cmd '' names the option" "$(contains "$tmp/e" "$2: empty value")"
    check "$cmd '' prints nothing on stdout" $([ ! -s "$tmp/o" ]; echo $?)
done
"$TESSEL" predict --tp 8 --pp 16 --dp 8 >/dev/null 2>&1; check "a value given still runs" $?
finish
