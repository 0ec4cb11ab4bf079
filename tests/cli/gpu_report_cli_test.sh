#!/usr/bin/env bash
# The GPU reports' evidence stays what the code gives (docs/gpu-report.md, data/gpu/h100-2026-11-25; the H200's of
# 2026-11-28 and 2026-11-30, data/gpu/h200-2026-11-28-tip and h200-2026-11-30): the shipped preset
# h100-single-calibrated is what `tessel calibrate` makes of the committed H100 sweep and runs, and each held-out run, opened by `tessel compare`, gives the step and
# memory errors the report states.
source "$(dirname "$0")/lib.sh"
root="$(cd "$(dirname "$0")/../.." && pwd)"
D="$root/data/gpu/h100-2026-11-25"

"$TESSEL" calibrate "$D/bench" "$D/run-gpt2-mb8" "$D/run-tiny" --cluster h100-single -o "$tmp/cal.json" >"$tmp/cal.log" 2>&1
check "calibrate of the committed sweep and runs exits 0" $?
python3 - "$tmp/cal.json" "$root/scenarios/clusters/h100-single-calibrated.json" <<'PY'
import json, sys
made, shipped = (json.load(open(p)) for p in sys.argv[1:3])
for c in (made, shipped):
    c["calibration"].pop("created_utc", None)
    c["calibration"].pop("inputs", None)   # paths as given on the command line
    c["sources"].pop("/name", None)        # the shipped file says where it came from
assert made == shipped, "the shipped preset differs from what tessel calibrate makes of data/gpu/h100-2026-11-25"
PY
check "the shipped preset is what the command makes" $?

for scen in "$D"/holdout/*.json; do
    name="$(basename "$scen" .json)"
    "$TESSEL" compare "$scen" "$D/holdout/run-$name" --json >"$tmp/$name.json" 2>"$tmp/$name.err"
    check "compare opens the held-out run $name" $?
    python3 - "$tmp/$name.json" "$D/holdout-results.json" "$name" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))["plans"][sys.argv[3]]
stage = got["memory"]["stages"][0]
assert abs(got["step"]["error"] - want["step_error"]) < 1e-3, (got["step"]["error"], want["step_error"])
assert abs(stage["error"] - want["memory_error"]) < 1e-3, (stage["error"], want["memory_error"])
assert abs(stage["error"]) < 0.05, stage["error"]
PY
    check "$name: the step and memory errors of the report" $?
done
# The H200 calls of 2026-11-28 (docs/gpu-report-h200-2026-11-28-tip.md): the cluster calibrated from the sweep and the
# three runs the recipe's calibrate stage now reads predicts the six held-out runs with the errors
# data/gpu/h200-2026-11-28-tip/holdout-results.json states.
H="$root/data/gpu/h200-2026-11-28-tip"
"$TESSEL" calibrate "$H/bench" "$H/run-gpt2" "$H/run-gpt2-seq256-mb32" "$H/run-cuda-1" --cluster h200-single \
    -o "$tmp/h200.json" >"$tmp/h200.log" 2>&1
check "calibrate of the H200 sweep and runs exits 0" $?
for scen in "$H"/holdout/*.json; do
    name="$(basename "$scen" .json)"
    [ "$name" = cluster ] && continue
    "$TESSEL" compare "$scen" "$H/holdout/run-$name" --cluster "$tmp/h200.json" --gpus-per-node 1 --json \
        >"$tmp/h200-$name.json" 2>"$tmp/h200-$name.err"
    check "compare opens the H200 held-out run $name" $?
    python3 - "$tmp/h200-$name.json" "$H/holdout-results.json" "$name" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))["plans"][sys.argv[3]]
assert abs(got["step"]["error"] - want["step_error"]) < 1e-3, (got["step"]["error"], want["step_error"])
assert abs(got["memory"]["stages"][0]["error"] - want["memory_error"]) < 1e-3
assert abs(got["step"]["error"]) < 0.10, got["step"]["error"]
PY
    check "H200 $name: the step and memory errors of the report" $?
done
# The H200 calls of 2026-11-30 (docs/gpu-report-h200-2026-11-30.md): the recipe at b2c7d19, and the held-out runs
# measured twice by the same programs (call2/); the calibration made here is the one the GPU wrote, and each run
# gives the errors data/gpu/h200-2026-11-30/holdout-results.json states.
N="$root/data/gpu/h200-2026-11-30"
"$TESSEL" calibrate "$N/bench" "$N/run-gpt2" "$N/run-gpt2-seq256" "$N/run-cuda-1" --cluster h200-single \
    -o "$tmp/h200-30.json" >"$tmp/h200-30.log" 2>&1
check "calibrate of the 2026-11-30 H200 sweep and runs exits 0" $?
python3 - "$tmp/h200-30.json" "$N/h200-single-calibrated.json" "$root/scenarios/clusters/h200-single.json" <<'PY'
import json, sys
made, gpu, preset = (json.load(open(p)) for p in sys.argv[1:4])
for c in (made, gpu):
    c["calibration"].pop("created_utc", None)
    c["calibration"].pop("inputs", None)
# A source the calibration copied from the preset is the preset's words, which later sessions may correct; the
# figures and the calibration's own sources must be the GPU's.
for key, text in preset.get("sources", {}).items():
    if made.get("sources", {}).get(key) == text:
        made["sources"].pop(key)
        gpu.get("sources", {}).pop(key, None)
# A GPU field the preset gained after the call (gpu.sustained_share_power, 2026-11-30) is the preset's, copied as is.
for key, value in preset["gpu"].items():
    if key not in gpu["gpu"] and made["gpu"].get(key) == value:
        made["gpu"].pop(key)
# A link figure calibrate copies from the preset unfitted (the all-to-all shares, measured sources since 2026-12-07)
# is the preset's, as it stands now.
for tier in ("intra_node", "inter_node"):
    for key, value in preset["network"][tier].get("primitive_efficiency", {}).items():
        if made["network"][tier].get("primitive_efficiency", {}).get(key) == value:
            gpu["network"][tier]["primitive_efficiency"][key] = value
assert made == gpu, "tessel calibrate here differs from what the GPU machine wrote"
PY
check "the 2026-11-30 calibration made here is the GPU's" $?
for scen in "$N"/holdout/*.json; do
    name="$(basename "$scen" .json)"
    [ "$name" = cluster ] && continue
    for call in call1 call2; do
        run="$N/holdout/run-$name"
        [ "$call" = call2 ] && run="$N/call2/holdout/run-$name"
        "$TESSEL" compare "$scen" "$run" --cluster "$tmp/h200-30.json" --gpus-per-node 1 --json \
            >"$tmp/h200-30-$name-$call.json" 2>"$tmp/h200-30-$name-$call.err"
        check "compare opens the 2026-11-30 H200 run $name ($call)" $?
        python3 - "$tmp/h200-30-$name-$call.json" "$N/holdout-results.json" "$name" "$call" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))["plans"][sys.argv[3]][sys.argv[4]]
assert abs(got["step"]["error"] - want["step_error"]) < 1e-3, (got["step"]["error"], want["step_error"])
assert abs(got["memory"]["stages"][0]["error"] - want["memory_error"]) < 1e-3
assert abs(got["step"]["error"]) < 0.10, got["step"]["error"]
assert abs(got["memory"]["stages"][0]["error"]) < 0.05
PY
        check "2026-11-30 H200 $name ($call): the step and memory errors of the report" $?
    done
done
# The GPT-2 run of the fit, and the tiny pipeline run through the staged comm, open too.
"$TESSEL" compare "$D/run-gpt2-mb8/scenario.json" "$D/run-gpt2-mb8" --cluster h100-single-calibrated >"$tmp/gpt2.txt" 2>&1
check "compare opens the GPT-2 run" $?
check "the GPT-2 run is within 5% in-sample" "$(python3 -c "
import re,sys; m=re.search(r'error ([+-][0-9.]+)%', open('$tmp/gpt2.txt').read()); sys.exit(0 if m and abs(float(m.group(1))) < 5 else 1)"; echo $?)"
finish
