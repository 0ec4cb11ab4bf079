#!/usr/bin/env bash
# One entry point for a fresh machine: install dependencies, build, then either run the default
# prediction (`bootstrap.sh predict`) or the whole test suite (`bootstrap.sh test`).
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-predict}"
# The ci preset (warnings as errors) where CI=true is set, as CI does; dev elsewhere; TESSEL_PRESET overrides.
if [ "${CI:-}" = "true" ]; then default_preset=ci; else default_preset=dev; fi
preset="${TESSEL_PRESET:-$default_preset}"
case "$mode" in
  predict|test) ;;
  *) echo "usage: scripts/bootstrap.sh predict|test" >&2; exit 2 ;;
esac

bash scripts/install-deps.sh
cmake --preset "$preset"
cmake --build --preset "$preset"

if [ "$mode" = predict ]; then
  # GPT-3 175B on 128 DGX A100 80GB nodes, Megatron's TP8 PP8 DP16 plan (scenarios/plans/gpt3-175b-megatron.json).
  "build/$preset/cli/tessel" predict
else
  ctest --preset "$preset"
fi
