#!/usr/bin/env bash
# The GPU report's evidence stays what the code gives (docs/gpu-report.md, data/gpu/h100-2026-11-25): the shipped
# preset h100-single-calibrated is what `tessel calibrate` makes of the committed H100 sweep and runs, and each
# held-out run, opened by `tessel compare`, gives the step and memory errors the report states.
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
# The GPT-2 run of the fit, and the tiny pipeline run through the staged comm, open too.
"$TESSEL" compare "$D/run-gpt2-mb8/scenario.json" "$D/run-gpt2-mb8" --cluster h100-single-calibrated >"$tmp/gpt2.txt" 2>&1
check "compare opens the GPT-2 run" $?
check "the GPT-2 run is within 5% in-sample" "$(python3 -c "
import re,sys; m=re.search(r'error ([+-][0-9.]+)%', open('$tmp/gpt2.txt').read()); sys.exit(0 if m and abs(float(m.group(1))) < 5 else 1)"; echo $?)"
finish
