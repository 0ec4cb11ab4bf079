#!/usr/bin/env bash
# scripts/a100_unaligned_head_fit.py derives the A100 presets' gemm_model.unaligned_per_head_efficiency from
# BigScience's head-count pairs: the shipped figure lies in the pairs' fitted range, and a preset moved out of it is
# caught by --check.
source "$(dirname "$0")/../cli/lib.sh" # TESSEL, $tmp, check, finish
root="$(cd "$(dirname "$0")/../.." && pwd)"

(cd "$root" && python3 scripts/a100_unaligned_head_fit.py --tessel "$TESSEL" --check) >"$tmp/out" 2>&1; rc=$?
cat "$tmp/out"
check "every A100 preset's per-head figure lies in the fitted range" $rc
grep -q "^median 0.04" "$tmp/out"; check "the pairs' median is about 0.04" $?
[ "$(grep -c 'measured ratio' "$tmp/out")" -eq 4 ]; check "four pairs fitted" $?

# A copy of the repository's inputs with one preset's figure moved to 0.05: --check exits 1 and names it.
mkdir -p "$tmp/repo/data/validation" "$tmp/repo/scripts"
cp -r "$root/scenarios" "$tmp/repo/scenarios"
cp "$root/data/validation/check_bigscience_zero1.json" "$tmp/repo/data/validation/"
cp "$root/scripts/a100_unaligned_head_fit.py" "$tmp/repo/scripts/"
python3 - "$tmp/repo/scenarios/clusters/dgx-a100-80g.json" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    doc = json.load(f)
doc["gpu"]["gemm_model"]["unaligned_per_head_efficiency"] = {"fp16": 0.05, "bf16": 0.05}
with open(sys.argv[1], "w") as f:
    json.dump(doc, f, indent=2)
PY
(cd "$tmp/repo" && python3 scripts/a100_unaligned_head_fit.py --tessel "$TESSEL" --check) >"$tmp/out" 2>&1; rc=$?
check "a preset outside the range: --check exits 1" $([ $rc -eq 1 ]; echo $?)
grep -q "dgx-a100-80g.json: ships 0.05 -> OUTSIDE" "$tmp/out"; check "--check names the preset" $?
finish
