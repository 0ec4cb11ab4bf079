#!/usr/bin/env bash
# `tessel import` end to end (issue 17) on committed data nobody here wrote: a real Megatron-LM log imports into a
# scenario `tessel predict` accepts and `tessel compare` sets against a prediction; real PyTorch CPU traces of two
# plans calibrate cpu-host, and the calibrated prediction of a third plan (other batch and sequence) is within 10%
# of its step measured by the same script (tests/data/torch/step_times.json); bad logs and traces exit 2 naming the
# line or the JSON pointer. No timing happens here: every figure is committed.
source "$(dirname "$0")/lib.sh"
data="$(dirname "$0")/../data"
meg="$data/megatron/gpt2-124m-1gpu-fp16.log"

# 1. Megatron-LM: import, predict, compare.
"$TESSEL" import megatron "$meg" --cluster dgx-a100-80g -o "$tmp/meg" >"$tmp/meg.out" 2>&1
check "megatron: imports" $?
for f in scenario.json trace.json memory.json import.json; do
    check "megatron: wrote $f" $([ -s "$tmp/meg/$f" ] && echo 0 || echo 1)
done
check "megatron: names what tessel does not express" $(contains "$tmp/meg.out" "masked_softmax_fusion = True (line")
check "megatron: states the step" $(contains "$tmp/meg.out" "measured step 849.8 ms")
"$TESSEL" predict "$tmp/meg/scenario.json" >"$tmp/meg.predict" 2>&1
check "megatron: predict accepts the scenario as written" $?
"$TESSEL" compare "$tmp/meg/scenario.json" "$tmp/meg" >"$tmp/meg.cmp" 2>&1
check "megatron: compare runs" $?
check "megatron: compare prints predicted vs measured step" $(contains "$tmp/meg.cmp" "measured 849.800 (as the run states it)")
check "megatron: compare prints measured memory" $(contains "$tmp/meg.cmp" "total allocated")
# The log states totals only: no line says which moment per-category rows are of, since none was measured.
check "megatron: no moment line without measured categories" $(grep -q "^categories: " "$tmp/meg.cmp" && echo 1 || echo 0)
"$TESSEL" import megatron "$meg" --cluster dgx-a100-80g -o "$tmp/meg" >"$tmp/err" 2>&1
check "megatron: an existing import needs --force" $([ $? -eq 2 ] && echo 0 || echo 1)

# Calibrate from the log's step alone: one time scale on the compute phases; the run is then predicted at its step.
"$TESSEL" calibrate "$tmp/meg" --cluster dgx-a100-80g -o "$tmp/meg-cal.json" >"$tmp/meg-cal.out" 2>&1
check "megatron: calibrate fits the step" $?
cat "$tmp/meg-cal.out"
check "megatron: names the fitted term" $(contains "$tmp/meg-cal.out" "gpu/phase_fits/forward + gpu/phase_fits/backward")
check "megatron: one run has no held-out error" $(contains "$tmp/meg-cal.out" "- (one run)")
"$TESSEL" predict "$tmp/meg/scenario.json" --cluster "$tmp/meg-cal.json" --gpus-per-node 1 >"$tmp/meg.pred2" 2>&1
check "megatron: predict says the calibrated phases it applies" $(contains "$tmp/meg.pred2" "calibrated phases (tessel calibrate, the cluster file's calibration block): forward x5.85")
check "megatron: an uncalibrated cluster says none" $(grep -q "calibrated phases" "$tmp/meg.predict" && echo 1 || echo 0)
"$TESSEL" compare "$tmp/meg/scenario.json" "$tmp/meg" --cluster "$tmp/meg-cal.json" --gpus-per-node 1 >"$tmp/meg.cmp2" 2>&1
check "megatron: the calibrated cluster predicts the run at its step" $(grep -qE "measured 849.800 \(as the run states it\), error [+-]0\.0%" "$tmp/meg.cmp2" && echo 0 || echo 1)
check "compare says which way its errors run" "$(contains "$tmp/meg.cmp2" '^Errors are measured / predicted - 1')"
# A second run of the same plan 20% slower: each held out is predicted with the other's scale, +20.0% and -16.7%.
cp -r "$tmp/meg" "$tmp/meg-slow"
python3 -c "
import json,sys; p=sys.argv[1]; t=json.load(open(p)); t['otherData']['step_seconds']*=1.2; json.dump(t,open(p,'w'))" "$tmp/meg-slow/trace.json"
"$TESSEL" calibrate "$tmp/meg" "$tmp/meg-slow" --cluster dgx-a100-80g -o "$tmp/meg-cal2.json" >"$tmp/meg-cal2.out" 2>&1
check "megatron: calibrate fits two runs" $?
cat "$tmp/meg-cal2.out"
check "megatron: the faster run held out is predicted 20% slow" $(contains "$tmp/meg-cal2.out" "+20.0%")
check "megatron: the slower run held out is predicted 16.7% fast" $(contains "$tmp/meg-cal2.out" "-16.7%")
check "megatron: the block lists the runs" $(python3 -c "
import json,sys; r=json.load(open(sys.argv[1]))['calibration']['step_runs']; sys.exit(0 if len(r)==2 and 'error_held_out' in r[0] else 1)" "$tmp/meg-cal2.json" && echo 0 || echo 1)
"$TESSEL" calibrate "$tmp/meg" --cluster dgx-h100-80g -o "$tmp/x.json" >"$tmp/err" 2>&1
check "megatron: a run on another GPU exits 2" $([ $? -eq 2 ] && echo 0 || echo 1)
check "megatron: names the run's cluster" $(contains "$tmp/err" "meg/scenario.json#/cluster: the run ran on NVIDIA A100")
python3 -c "
import json,sys; p=sys.argv[1]; t=json.load(open(p)); t['otherData']['step_seconds']=1e-7; json.dump(t,open(p,'w'))" "$tmp/meg-slow/trace.json"
"$TESSEL" calibrate "$tmp/meg-slow" --cluster dgx-a100-80g -o "$tmp/x.json" >"$tmp/err" 2>&1
check "megatron: a step no compute scale reaches exits 2" $([ $? -eq 2 ] && echo 0 || echo 1)
check "megatron: says what is off is not the compute" $(contains "$tmp/err" "what is off is not the compute")
check "megatron: writes nothing then" $([ ! -e "$tmp/x.json" ] && echo 0 || echo 1)

# Records in the runs.json schema: each one with a step time is a run known by its step (two of Megatron-LM's
# published H100 runs here); a record on another GPU than --cluster's exits 2 naming it.
records="$(dirname "$0")/../../data/validation/check_megatron_lm_h100.json"
python3 -c "
import json,sys; r=json.load(open(sys.argv[1])); json.dump([x for x in r if x['id'] in ('mlm-weak-1.7B','mlm-weak-7.1B')], open(sys.argv[2],'w'))" \
    "$records" "$tmp/two.json"
"$TESSEL" calibrate "$tmp/two.json" --cluster dgx-h100-80g -o "$tmp/rec-cal.json" >"$tmp/rec-cal.out" 2>&1
check "records: calibrate fits their steps" $?
cat "$tmp/rec-cal.out"
check "records: each is a row" $(contains "$tmp/rec-cal.out" "mlm-weak-7.1B")
check "records: says how to predict them" $(contains "$tmp/rec-cal.out" "tessel validate FILE --scenarios DIR")
# Three runs held out make the calibrated cluster's own band, which predict shows in place of the published one.
python3 -c "
import json,sys; r=json.load(open(sys.argv[1])); json.dump([x for x in r if x['id'] in ('mlm-weak-1.7B','mlm-weak-7.1B','mlm-weak-16B')], open(sys.argv[2],'w'))" \
    "$records" "$tmp/three.json"
"$TESSEL" calibrate "$tmp/three.json" --cluster dgx-h100-80g -o "$tmp/rec-cal3.json" >"$tmp/rec-cal3.out" 2>&1
check "records: calibrate fits three" $?
"$TESSEL" predict llama3-8b-h100 --cluster "$tmp/rec-cal3.json" >"$tmp/rec-pred" 2>&1
check "records: predict trusts the held-out runs" $(contains "$tmp/rec-pred" "trust: on 3 runs this cluster was calibrated on, each held out")
check "records: and says where the figure comes from" $(contains "$tmp/rec-pred" "(tessel calibrate)")
"$TESSEL" calibrate "$tmp/two.json" --cluster dgx-a100-80g -o "$tmp/x.json" >"$tmp/err" 2>&1
check "records: a record on another GPU exits 2" $([ $? -eq 2 ] && echo 0 || echo 1)
check "records: names it" $(contains "$tmp/err" "two.json#/0: record mlm-weak-1.7B ran on NVIDIA H100")

# Bad logs: exit 2 naming the line.
head -n 30 "$meg" >"$tmp/cut.log"
"$TESSEL" import megatron "$tmp/cut.log" --cluster dgx-a100-80g -o "$tmp/x" >"$tmp/err" 2>&1
check "megatron: a log cut inside the arguments exits 2" $([ $? -eq 2 ] && echo 0 || echo 1)
check "megatron: names the block's line" $(contains "$tmp/err" "cut.log:5: the arguments block is not terminated")
head -c -40 "$meg" >"$tmp/cut2.log"
"$TESSEL" import megatron "$tmp/cut2.log" --cluster dgx-a100-80g -o "$tmp/x" >"$tmp/err" 2>&1
check "megatron: a log cut inside an iteration line exits 2" $([ $? -eq 2 ] && echo 0 || echo 1)
check "megatron: names that line" $(contains "$tmp/err" "cut2.log:$(wc -l <"$meg"): truncated iteration line")
sed 's/elapsed time per iteration (ms): 832.5/elapsed time per iteration (ms): 83x.5/' "$meg" >"$tmp/nan.log"
"$TESSEL" import megatron "$tmp/nan.log" --cluster dgx-a100-80g -o "$tmp/x" >"$tmp/err" 2>&1
check "megatron: a value that is no number exits 2" $([ $? -eq 2 ] && echo 0 || echo 1)
check "megatron: names its line" $(contains "$tmp/err" "nan.log:$(grep -n '83x.5' "$tmp/nan.log" | cut -d: -f1): \"elapsed time per iteration (ms)\" is not a number")

# 2. PyTorch traces: import the two seen plans with their unprofiled step times, calibrate, predict the unseen one.
step() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['plans'][sys.argv[2]]['step_seconds_median'])" "$data/torch/step_times.json" "$1"; }
for p in seen-b2-s128 seen-b8-s64 unseen-b4-s96; do
    "$TESSEL" import torch "$data/torch/$p.json" --trace "$data/torch/$p.trace.json" --step-seconds "$(step $p)" \
        -o "$tmp/$p" >"$tmp/$p.out" 2>&1
    check "torch: imports $p" $?
done
check "torch: points written" $(contains "$tmp/seen-b2-s128/bench.jsonl" '"kernel":"gemm"')
"$TESSEL" calibrate "$tmp/seen-b2-s128" "$tmp/seen-b8-s64" --cluster cpu-host -o "$tmp/cal.json" >"$tmp/cal.out" 2>&1
check "torch: calibrate fits the imported runs" $?
cat "$tmp/cal.out"
check "torch: the GEMM table is fitted" $(contains "$tmp/cal.out" "gpu/gemm_efficiency")
check "torch: the phases are fitted" $(contains "$tmp/cal.out" "gpu/phase_fits/backward")
"$TESSEL" predict "$data/torch/unseen-b4-s96.json" --cluster "$tmp/cal.json" --gpus-per-node 1 --json >"$tmp/unseen.json" 2>"$tmp/err"
check "torch: the calibrated cluster predicts the unseen plan" $?
python3 - "$tmp/unseen.json" "$data/torch/step_times.json" <<'PY'
import json, sys
pred = json.load(open(sys.argv[1]))["time"]["step_seconds"]
meas = json.load(open(sys.argv[2]))["plans"]["unseen-b4-s96"]["step_seconds_median"]
err = pred / meas - 1
print(f"unseen plan (batch 4, sequence 96): predicted {pred*1e3:.2f} ms, measured {meas*1e3:.2f} ms, error {err*100:+.1f}%")
sys.exit(0 if abs(err) < 0.10 else 1)
PY
check "torch: calibrated prediction of the unseen plan within 10% of its measured step" $?
# A run known by its step alone beside runs with their phases: the phases are the latter's, the step a check.
mkdir -p "$tmp/unseen-step" && cp "$tmp/unseen-b4-s96/scenario.json" "$tmp/unseen-b4-s96/trace.json" "$tmp/unseen-step/"
"$TESSEL" calibrate "$tmp/seen-b2-s128" "$tmp/seen-b8-s64" "$tmp/unseen-step" --cluster cpu-host -o "$tmp/cal-check.json" >"$tmp/cal-check.out" 2>&1
check "torch: a step-only run beside action runs calibrates" $?
check "torch: that run is a check" $(contains "$tmp/cal-check.out" "- (a check)")
check "torch: the phases come from the action runs alone" $(python3 -c "
import json,sys; a=json.load(open(sys.argv[1]))['gpu']['phase_fits']; b=json.load(open(sys.argv[2]))['gpu']['phase_fits']; sys.exit(0 if a==b else 1)" "$tmp/cal.json" "$tmp/cal-check.json" && echo 0 || echo 1)
"$TESSEL" compare "$data/torch/unseen-b4-s96.json" "$tmp/unseen-b4-s96" --cluster "$tmp/cal.json" --gpus-per-node 1 >"$tmp/cmp" 2>&1
check "torch: compare lays the imported run over the prediction" $?
check "torch: per phase" $(contains "$tmp/cmp" "optimizer_step")
"$TESSEL" import torch "$data/torch/ddp-b2-s64.json" --trace "$data/torch/ddp-b2-s64.rank0.trace.json" \
    --trace "$data/torch/ddp-b2-s64.rank1.trace.json" -o "$tmp/ddp" >"$tmp/ddp.out" 2>&1
check "torch: 2-rank gloo DDP imports" $?
check "torch: with its all-reduce points" $(contains "$tmp/ddp/bench.jsonl" '"kernel":"all_reduce"')

# Bad traces: exit 2 naming the JSON pointer.
head -c 5000 "$data/torch/seen-b2-s128.trace.json" >"$tmp/cut.json"
"$TESSEL" import torch "$data/torch/seen-b2-s128.json" --trace "$tmp/cut.json" -o "$tmp/x" >"$tmp/err" 2>&1
check "torch: a truncated trace exits 2" $([ $? -eq 2 ] && echo 0 || echo 1)
check "torch: names the file and byte" $(contains "$tmp/err" "cut.json#: not valid JSON (truncated?) at byte")
python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); d['traceEvents'][7]['dur']='slow'; json.dump(d, open(sys.argv[2],'w'))" \
    "$data/torch/seen-b2-s128.trace.json" "$tmp/bad.json"
"$TESSEL" import torch "$data/torch/seen-b2-s128.json" --trace "$tmp/bad.json" -o "$tmp/x" >"$tmp/err" 2>&1
check "torch: a bad field exits 2" $([ $? -eq 2 ] && echo 0 || echo 1)
check "torch: names its JSON pointer" $(contains "$tmp/err" "bad.json#/traceEvents/7/dur")
"$TESSEL" import torch "$data/torch/seen-b2-s128.json" --trace "$data/torch/ddp-b2-s64.rank0.trace.json" -o "$tmp/x" >"$tmp/err" 2>&1
check "torch: a trace of another world size exits 2" $([ $? -eq 2 ] && echo 0 || echo 1)
check "torch: names distributedInfo" $(contains "$tmp/err" "#/distributedInfo/world_size")
finish
