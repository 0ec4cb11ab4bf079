#!/usr/bin/env bash
# End-to-end checks of `tessel` itself: an unknown subcommand is an error (exit 2, named), even with --help.
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
finish
