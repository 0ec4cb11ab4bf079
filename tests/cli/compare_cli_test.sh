#!/usr/bin/env bash
# End-to-end checks of `tessel compare`: a real 2-step, 2-rank run of tiny-cpu compared with its scenario and
# with its predicted trace (every predicted action matched, the JSON's shape), the table, and bad input
# (missing folder, a file that is not a trace, a run of another plan, -o without --force) exiting 2.
source "$(dirname "$0")/lib.sh"

"$TESSEL" run tiny-cpu --ranks 2 --steps 2 --out "$tmp/run" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "run exits 0" $rc

# 1. Scenario against the run folder, as JSON.
"$TESSEL" compare tiny-cpu "$tmp/run" --json --top 5 >"$tmp/c.json" 2>"$tmp/err"; rc=$?
check "compare --json exits 0" $rc
"$TESSEL" trace tiny-cpu --ranks 0,1 -o "$tmp/predicted.json" 2>/dev/null; check "trace exits 0" $?
python3 - "$tmp/c.json" "$tmp/predicted.json" <<'PY'; check "JSON shape, every predicted action matched" $?
import json, sys
c = json.load(open(sys.argv[1]))
for k in ("schema_version", "step", "summary", "actions", "most_wrong", "unmatched", "ranks", "categories", "memory"):
    assert k in c, k
step = c["step"]
assert step["compared_steps"] == [1], step                 # two steps: the first is the warm-up
assert [s["step"] for s in step["per_step"]] == [0, 1] and step["per_step"][0]["compared"] is False
assert step["predicted_seconds"] > 0 and step["measured_seconds"] > 0 and step["error"] is not None
# Every predicted action (one list per stage) was measured, and nothing measured is left over.
predicted = [e for e in json.load(open(sys.argv[2]))["traceEvents"] if e["ph"] == "X"]
assert c["unmatched"]["predicted"] == [] and c["unmatched"]["measured"] == [], c["unmatched"]
assert c["summary"]["unmatched_measured_events"] == 0
assert len(c["actions"]) == len(predicted) == c["summary"]["matched_actions"], (len(c["actions"]), len(predicted))
for a in c["actions"]:
    for k in ("stage", "index", "name", "category", "micro_batch", "chunk", "predicted_seconds",
              "measured_mean_seconds", "measured_min_seconds", "measured_max_seconds", "ranks", "error_seconds", "error"):
        assert k in a, k
    assert a["ranks"] == 1 and a["measured_min_seconds"] <= a["measured_mean_seconds"] <= a["measured_max_seconds"]
    assert a["measured_mean_seconds"] > 0
# The most wrong come first by absolute seconds.
mw = c["most_wrong"]
assert len(mw) == 5 and all(abs(mw[i]["error_seconds"]) >= abs(mw[i + 1]["error_seconds"]) for i in range(4))
assert {r["rank"] for r in c["ranks"]} == {0, 1} and {r["stage"] for r in c["ranks"]} == {0, 1}
assert "compute" in c["ranks"][0]["busy_seconds_per_step"]
mem = c["memory"]["stages"]
assert [m["stage"] for m in mem] == [0, 1]
for m in mem:
    assert m["measured_peak_bytes"] > 0 and m["predicted_allocated_bytes"] > 0 and m["error"] is not None
    cats = {x["category"]: x for x in m["categories"]}
    assert set(cats) == {"weights", "grads", "optimizer", "activations", "other"}
    assert cats["weights"]["measured_bytes"] > 0 and abs(cats["weights"]["error"]) < 0.05, cats["weights"]
PY

# 2. The table, and the predicted trace with predicted memory from `tessel predict --json`.
"$TESSEL" compare tiny-cpu "$tmp/run" --top 3 >"$tmp/table" 2>"$tmp/err"; rc=$?
check "compare table exits 0" $rc
for word in "Step time" "Peak memory per stage" "Most wrong actions" "Per stage and category" "Per rank" "actions matched"; do
  check "table has '$word'" "$(contains "$tmp/table" "$word")"
done
check "table names the checked plan" "$(contains "$tmp/table" 'plan: the same as the run')"
check "table says which way its errors run" "$(contains "$tmp/table" '^Errors are measured / predicted - 1')"
# One argument, the run folder: the run against its own scenario.json, the same step as the preset's.
"$TESSEL" compare "$tmp/run" --json >"$tmp/own.json" 2>"$tmp/err"; check "compare RUN alone exits 0" $?
python3 - "$tmp/c.json" "$tmp/own.json" "$tmp/run/scenario.json" <<'PY'; check "compare RUN predicts from RUN/scenario.json" $?
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert b["predicted_source"] == sys.argv[3], b["predicted_source"]
assert abs(a["step"]["predicted_seconds"] - b["step"]["predicted_seconds"]) < 1e-12
assert a["step"]["measured_seconds"] == b["step"]["measured_seconds"]
PY
mkdir -p "$tmp/bare" && cp "$tmp/run/trace.json" "$tmp/bare/"
"$TESSEL" compare "$tmp/bare" >/dev/null 2>"$tmp/err"; rc=$?
check "a run folder without scenario.json alone exits 2" $([ $rc -eq 2 ]; echo $?)
check "and asks for PREDICTED" "$(contains "$tmp/err" 'without the scenario.json it ran')"
"$TESSEL" predict tiny-cpu --json >"$tmp/predict.json" 2>/dev/null; check "predict exits 0" $?
"$TESSEL" compare "$tmp/predicted.json" "$tmp/run" --predicted-memory "$tmp/predict.json" --json >"$tmp/t.json" 2>"$tmp/err"; rc=$?
check "compare a predicted trace exits 0" $rc
python3 - "$tmp/c.json" "$tmp/t.json" <<'PY'; check "trace and scenario predictions agree" $?
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert b["unmatched"]["predicted"] == [] and b["summary"]["matched_actions"] == a["summary"]["matched_actions"]
for x, y in zip(a["actions"], b["actions"]):
    assert (x["stage"], x["index"], x["name"]) == (y["stage"], y["index"], y["name"])
    assert abs(x["predicted_seconds"] - y["predicted_seconds"]) <= 1e-9 * max(1.0, x["predicted_seconds"])
for x, y in zip(a["memory"]["stages"], b["memory"]["stages"]):
    assert abs(x["predicted_allocated_bytes"] - y["predicted_allocated_bytes"]) < 1e-6 * x["predicted_allocated_bytes"]
PY
# A predicted trace is no scenario: any scenario flag beside it is refused by name, never ignored.
for flag in "--tp 2" "--seq-len 64" "--offload optimizer" "--framework fsdp"; do
  "$TESSEL" compare "$tmp/predicted.json" "$tmp/run" $flag >/dev/null 2>"$tmp/err"; rc=$?
  check "trace with $flag exits 2" $([ $rc -eq 2 ]; echo $?)
  check "trace with $flag says why" "$(contains "$tmp/err" "the scenario flags apply to a scenario only")"
done
"$TESSEL" compare tiny-cpu "$tmp/run/trace.json" --json >"$tmp/bytrace.json" 2>"$tmp/err"; rc=$?
check "MEASURED may be the run's trace.json" $rc
check "same result through trace.json" "$(python3 -c "
import json,sys; a=json.load(open('$tmp/c.json')); b=json.load(open('$tmp/bytrace.json'))
sys.exit(0 if a['actions']==b['actions'] and a['memory']==b['memory'] else 1)"; echo $?)"

# 3. -o writes the report and never overwrites without --force.
"$TESSEL" compare tiny-cpu "$tmp/run" --json -o "$tmp/report.json" >/dev/null 2>"$tmp/err"; rc=$?
check "-o exits 0" $rc
check "-o wrote JSON" "$(python3 -c "import json; json.load(open('$tmp/report.json'))"; echo $?)"
"$TESSEL" compare tiny-cpu "$tmp/run" -o "$tmp/report.json" >/dev/null 2>"$tmp/err"; rc=$?
check "-o over an existing file exits 2" $([ $rc -eq 2 ]; echo $?)
check "names --output" "$(contains "$tmp/err" '--output')"
check "file untouched" "$(python3 -c "import json; json.load(open('$tmp/report.json'))"; echo $?)"
"$TESSEL" compare tiny-cpu "$tmp/run" -o "$tmp/report.json" --force >/dev/null 2>"$tmp/err"; rc=$?
check "--force overwrites" $rc
check "now the table" "$(contains "$tmp/report.json" 'Most wrong actions')"

# 4. Bad input exits 2 with the problem and its pointer.
"$TESSEL" compare tiny-cpu "$tmp/nothing-here" >/dev/null 2>"$tmp/err"; rc=$?
check "missing folder exits 2" $([ $rc -eq 2 ]; echo $?)
check "names the missing folder" "$(contains "$tmp/err" "$tmp/nothing-here: no such run folder")"
mkdir -p "$tmp/notrace"; echo '{"foo": 1}' >"$tmp/notrace/trace.json"
"$TESSEL" compare tiny-cpu "$tmp/notrace" >/dev/null 2>"$tmp/err"; rc=$?
check "not a trace exits 2" $([ $rc -eq 2 ]; echo $?)
check "names #/traceEvents" "$(contains "$tmp/err" 'notrace/trace.json#/traceEvents')"
"$TESSEL" compare tiny-cpu "$tmp/run" --pp 1 --dp 2 >/dev/null 2>"$tmp/err"; rc=$?
check "a run of another plan exits 2" $([ $rc -eq 2 ]; echo $?)
check "names /plan/pp" "$(contains "$tmp/err" 'scenario.json#/plan/pp: the run has 2, the prediction has 1')"
check "names /plan/dp" "$(contains "$tmp/err" 'scenario.json#/plan/dp: the run has 1, the prediction has 2')"
"$TESSEL" compare tiny-cpu "$tmp/run" --model tiny-moe >/dev/null 2>"$tmp/err"; rc=$?
check "a run of another model exits 2" $([ $rc -eq 2 ]; echo $?)
check "names /model/activation" "$(contains "$tmp/err" 'scenario.json#/model/activation: the run has "gelu"')"
python3 -c "
import json; m = json.load(open('$tmp/run/scenario.json'))['model']; m['name'] = 'renamed'; m['sources'] = ['elsewhere']
json.dump(m, open('$tmp/renamed.json', 'w'))"
"$TESSEL" compare tiny-cpu "$tmp/run" --model "$tmp/renamed.json" >/dev/null 2>"$tmp/err"; rc=$?
check "a renamed but identical model is the same model" $rc
"$TESSEL" compare "$tmp/predicted.json" "$tmp/run" --tp 2 >/dev/null 2>"$tmp/err"; rc=$?
check "scenario flags with a trace exit 2" $([ $rc -eq 2 ]; echo $?)
"$TESSEL" compare tiny-cpu "$tmp/run" --top 0 >/dev/null 2>"$tmp/err"; rc=$?
check "--top 0 exits 2" $([ $rc -eq 2 ]; echo $?)
"$TESSEL" compare tiny-cpu >/dev/null 2>"$tmp/err"; rc=$?
check "no MEASURED exits 2" $([ $rc -eq 2 ]; echo $?)

# 5. CPU ranks beyond the host's hardware threads: compare says the times include the sharing (versions.json of
# the run records both; here one thread, as a 1-core host would have written).
cp -r "$tmp/run" "$tmp/shared"
python3 - "$tmp/shared/versions.json" <<'PY'; check "versions.json records ranks and host threads" $?
import json, sys
v = json.load(open(sys.argv[1]))
assert v["ranks"] == 2 and v["host_threads"] >= 1, v
v["host_threads"] = 1
json.dump(v, open(sys.argv[1], "w"))
PY
"$TESSEL" compare tiny-cpu "$tmp/shared" >"$tmp/shared.txt" 2>"$tmp/err"; check "compare of a shared-core run exits 0" $?
check "names the sharing" "$(contains "$tmp/shared.txt" "host: the run put 2 CPU ranks on 1 hardware threads")"
"$TESSEL" compare tiny-cpu "$tmp/shared" --json 2>/dev/null | python3 -c "import json,sys; h = json.load(sys.stdin)['host']; assert h == {'ranks': 2, 'host_threads': 1, 'oversubscribed': True}, h"
check "JSON host block" $?
# A hand-edited versions.json whose counts are not integers says nothing of the host (it had thrown an internal error).
echo '{"ranks": "two", "host_threads": 1}' >"$tmp/shared/versions.json"
"$TESSEL" compare tiny-cpu "$tmp/shared" >"$tmp/shared2.txt" 2>"$tmp/err"; check "compare with non-integer counts exits 0" $?
check "and says nothing of sharing" "$(! grep -q "host: the run put" "$tmp/shared2.txt"; echo $?)"

# 3. A model with dropout: `tessel run` records that its executor keeps no masks (dropout_masks_kept false), and
# compare, predicting from a scenario that does not say so, predicts the activations the run has.
python3 -c "
import json; m = json.load(open('$(dirname "$0")/../../scenarios/models/tiny.json')); m['name'] = 'tiny-dropout'; m['dropout'] = 0.1
json.dump(m, open('$tmp/tiny-dropout.json', 'w'))"
"$TESSEL" run tiny-cpu --model "$tmp/tiny-dropout.json" --ranks 2 --steps 2 --out "$tmp/drop" >/dev/null 2>"$tmp/err"
check "a run with dropout exits 0" $?
check "its scenario says the masks were not kept" \
  "$(python3 -c "import json,sys; sys.exit(0 if json.load(open('$tmp/drop/scenario.json'))['plan']['dropout_masks_kept'] is False else 1)"; echo $?)"
"$TESSEL" compare tiny-cpu "$tmp/drop" --model "$tmp/tiny-dropout.json" --json >"$tmp/drop.json" 2>"$tmp/err"
check "compare of the dropout run exits 0" $?
python3 - "$tmp/drop.json" <<'PY'; check "its activations predicted as run, without mask bytes" $?
import json, sys
for m in json.load(open(sys.argv[1]))["memory"]["stages"]:
    # The run records what each category held when its total peaked; the model's categories are set against it at
    # its peak's moment (on the last stage, its last layer's backward: FORMULAS.md §2). Compared with the last
    # stage's activations at their own peak, the loss's backward, they had read -16.6%.
    assert m["categories_at"] == "total_peak", m
    act = {x["category"]: x for x in m["categories"]}["activations"]
    assert abs(act["error"]) < 0.005, (m["stage"], act)   # stage 0 with the masks counted: -2.1%
PY
check "the memory table says which moment its categories are of" \
  "$("$TESSEL" compare tiny-cpu "$tmp/drop" --model "$tmp/tiny-dropout.json" 2>/dev/null | grep -c "categories: what each held when the total peaked" | grep -qx 1; echo $?)"
# What the run records of its executor is read as a boolean or named: a hand-edited "yes" exits 2 at its key.
cp -r "$tmp/drop" "$tmp/drop-bad"
python3 -c "
import json; p = '$tmp/drop-bad/scenario.json'; s = json.load(open(p)); s['plan']['logits_held_through_backward'] = 'yes'
json.dump(s, open(p, 'w'))"
"$TESSEL" compare tiny-cpu "$tmp/drop-bad" --model "$tmp/tiny-dropout.json" >/dev/null 2>"$tmp/err"; rc=$?
check "a run's executor key that is no boolean exits 2" $([ $rc -eq 2 ]; echo $?)
check "named at its pointer" "$(contains "$tmp/err" 'scenario.json#/plan/logits_held_through_backward: expected true or false, got "yes"')"

finish
