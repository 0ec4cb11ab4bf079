#!/usr/bin/env bash
# Runs tessel's own CUDA executor on the plans named (scenario files), one GPU each, and prints each action's
# median device time over the steps after the first: for runs a calibration or a question needs beyond the GPU
# recipe's fixed ones (scripts/gpu-checks.sh). On the lent GPU machine, with the programs built ahead (.gpubin):
#
#   bash bench/gpu_executor_runs.sh [--steps N] [--out DIR] SCENARIO.json...
#
# Each run's folder (trace.json, measurements.jsonl, memory.json, losses) goes to DIR/run-NAME (default: $OUT, else
# build/gpu-executor-runs). Uses the prebuilt programs the way gpu-checks.sh does: their source path linked to this
# copy, NCCL from python3's nvidia wheel where the toolkit has none.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
steps=8
out="${OUT:-$root/build/gpu-executor-runs}"
scenarios=()
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="${2:?--steps needs a count}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
    *) scenarios+=("$1"); shift ;;
  esac
done
[ ${#scenarios[@]} -gt 0 ] || { echo "gpu_executor_runs: name one or more scenario files" >&2; exit 2; }
bin="$root/.gpubin"
[ -f "$bin/manifest.json" ] || { echo "gpu_executor_runs: no prebuilt programs in $bin (bash scripts/gpu-prebuild.sh)" >&2; exit 2; }
src="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["source_dir"])' "$bin/manifest.json")"
[ -e "$src" ] || { mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"; }
nccl="$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)"
[ -n "$nccl" ] && export LD_LIBRARY_PATH="$nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$out"
rc=0
for scen in "${scenarios[@]}"; do
  name="$(basename "$scen" .json)"
  if ! "$bin/cli/tessel" run "$scen" --ranks 1 --backend cuda --steps "$steps" --timeout 120 --out "$out/run-$name" \
      >"$out/run-$name.log" 2>&1; then
    echo "$name: tessel run failed (last lines of $out/run-$name.log):"; tail -n 5 "$out/run-$name.log"; rc=1; continue
  fi
  rm -rf "$out/run-$name/checkpoints"
  python3 - "$out/run-$name/trace.json" "$name" <<'PY'
import json, statistics, sys
t = json.load(open(sys.argv[1]))
by = {}
for e in (t["traceEvents"] if isinstance(t, dict) else t):
    if e.get("ph") == "X" and e.get("args", {}).get("step", 0) >= 1:
        by.setdefault(e["name"], []).append(e["dur"] / 1e3)
print(f"{sys.argv[2]:<24}", "  ".join(f"{k} {statistics.median(v):.2f} ms (x{len(v)})" for k, v in sorted(by.items())))
PY
done
exit $rc
