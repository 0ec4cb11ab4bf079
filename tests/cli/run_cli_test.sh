#!/usr/bin/env bash
# End-to-end checks of `tessel run` (under mpirun, or with TESSEL_WORKER set to a worker without MPI, every rank a
# thread of one process): outputs, predicted vs measured actions, bad plans rejected before any rank starts, a
# rank that dies ending the whole run with its rank named, and checkpoints/--resume. TESSEL_EXPECT_LAUNCHER, when
# set, is the launcher the run must have used.
source "$(dirname "$0")/lib.sh"

# 1. A 2-stage pipeline on 2 ranks: every output is there and the loss falls.
"$TESSEL" run tiny-cpu --ranks 2 --steps 4 --out "$tmp/run" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "run exits 0" $rc
for f in losses.jsonl measurements.jsonl trace.json memory.json scenario.json versions.json; do
  check "run wrote $f" "$([ -s "$tmp/run/$f" ]; echo $?)"
done
python3 - "$tmp/run" <<'PY'; check "losses fall, records complete" $?
import json, sys
d = sys.argv[1]
losses = [json.loads(l)["loss"] for l in open(d + "/losses.jsonl")]
assert len(losses) == 4 and losses[-1] < losses[0], losses
recs = [json.loads(l) for l in open(d + "/measurements.jsonl")]
for r in recs:
    for k in ("rank", "action", "micro_batch", "chunk", "start_seconds", "duration_seconds", "device"):
        assert k in r, k
assert {r["rank"] for r in recs} == {0, 1}
mem = json.load(open(d + "/memory.json"))
assert len(mem["ranks"]) == 2 and all(r["peak_total_bytes"] > 0 for r in mem["ranks"])
PY
if [ -n "${TESSEL_EXPECT_LAUNCHER:-}" ]; then
  check "ran with the $TESSEL_EXPECT_LAUNCHER launcher" "$(grep -q "\"launcher\": \"$TESSEL_EXPECT_LAUNCHER\"" "$tmp/run/versions.json"; echo $?)"
fi
if [ "${TESSEL_EXPECT_LAUNCHER:-}" = in-process ]; then
  # A worker without MPI cannot run under mpirun: refused before any rank starts, naming --launcher.
  "$TESSEL" run tiny-cpu --ranks 2 --steps 1 --launcher mpirun --out "$tmp/nompi" >/dev/null 2>"$tmp/err"; rc=$?
  check "mpirun without MPI exits 2" $([ $rc -eq 2 ]; echo $?)
  check "names --launcher" "$(contains "$tmp/err" '--launcher.*built without MPI')"
  python3 - "$tmp/run" <<'PY'; check "ranks sharing a process leave out the process peak" $?
import json, sys
mem = json.load(open(sys.argv[1] + "/memory.json"))
assert all("process_peak_resident_bytes" not in r and r["ranks_in_process"] == 2 for r in mem["ranks"]), mem["ranks"]
PY
fi
"$TESSEL" run tiny-cpu --ranks 2 --steps 1 --launcher bogus --out "$tmp/bogus" >/dev/null 2>"$tmp/err"; rc=$?
check "unknown launcher exits 2" $([ $rc -eq 2 ]; echo $?)
check "names the launcher" "$(contains "$tmp/err" 'unknown launcher "bogus"')"

# 2. The measured trace holds exactly the predicted actions (step 0), rank by rank.
"$TESSEL" trace tiny-cpu --ranks 0,1 -o "$tmp/predicted.json" 2>/dev/null; check "trace exits 0" $?
python3 - "$tmp/predicted.json" "$tmp/run/trace.json" <<'PY'; check "predicted == measured actions" $?
import json, sys
from collections import Counter
def actions(path, step_filter):
    c = Counter()
    for e in json.load(open(path))["traceEvents"]:
        if e["ph"] != "X": continue
        a = e["args"]
        if step_filter and a.get("step", 0) != 0: continue
        c[(e["pid"], e["name"], a.get("micro_batch", -1), a["chunk"], a["index"])] += 1
    return c
p, m = actions(sys.argv[1], False), actions(sys.argv[2], True)
assert p == m, (p - m, m - p)
assert len(p) > 20
PY

# 3. Bad plans exit 2 with every problem listed, before any rank starts (no run folder is made).
"$TESSEL" run tiny-cpu --ranks 3 --tp 3 --steps 1 --out "$tmp/bad" >/dev/null 2>"$tmp/err"; rc=$?
check "bad plan exits 2" $([ $rc -eq 2 ]; echo $?)
check "names --tp" "$(contains "$tmp/err" '--tp (/plan/tp)')"
check "no folder made" "$([ ! -e "$tmp/bad" ]; echo $?)"
"$TESSEL" run tiny-cpu --ranks 4 --steps 1 --out "$tmp/bad2" >/dev/null 2>"$tmp/err"; rc=$?
check "rank mismatch exits 2" $([ $rc -eq 2 ]; echo $?)
check "names --ranks" "$(contains "$tmp/err" '--ranks')"
"$TESSEL" run /nonexistent/plan.json --ranks 2 --out "$tmp/bad3" >/dev/null 2>"$tmp/err"; rc=$?
check "missing scenario exits 2" $([ $rc -eq 2 ]; echo $?)
"$TESSEL" run tiny-cpu --ranks 2 --steps 1 --out "$tmp/run" >/dev/null 2>"$tmp/err"; rc=$?
check "non-empty --out refused" $([ $rc -eq 2 ]; echo $?)

# 4. A rank that dies mid-run ends the whole run with an error naming it, within the timeout.
start=$(date +%s)
"$TESSEL" run tiny-cpu --ranks 2 --steps 3 --timeout 5 --fail-rank 1 --fail-at-step 1 --out "$tmp/crash" >/dev/null 2>"$tmp/err"; rc=$?
end=$(date +%s)
check "crash exits 1" $([ $rc -eq 1 ]; echo $?)
check "crash names rank 1" "$(grep -q -E 'rank 1|rank: 1|process rank 1' "$tmp/err"; echo $?)"
check "crash ends in time" $([ $((end - start)) -lt 60 ]; echo $?)
check "nothing left running" "$(! pgrep -f "tessel-worker --run-dir $tmp/crash" >/dev/null; echo $?)"

# 5. Checkpoints: 2 steps, then --resume up to 4 in the same folder, gives byte for byte the losses of 4 steps
# in one go (which also saves every step, keeping the last 2 checkpoints); --resume needs a checkpoint.
"$TESSEL" run tiny-cpu --ranks 2 --steps 4 --checkpoint-every 1 --out "$tmp/whole" >/dev/null 2>"$tmp/err"; rc=$?
check "uninterrupted run exits 0" $rc
check "keeps the last 2 checkpoints" "$([ -f "$tmp/whole/checkpoints/step-4/manifest.json" ] &&
  [ -f "$tmp/whole/checkpoints/step-3/manifest.json" ] && [ ! -e "$tmp/whole/checkpoints/step-2" ] &&
  [ -f "$tmp/whole/checkpoints/step-4/rank-1.bin" ]; echo $?)"
"$TESSEL" run tiny-cpu --ranks 2 --steps 2 --out "$tmp/split" >/dev/null 2>"$tmp/err"; rc=$?
check "first half exits 0" $rc
check "first half saved step 2" "$([ -f "$tmp/split/checkpoints/step-2/manifest.json" ]; echo $?)"
"$TESSEL" run tiny-cpu --ranks 2 --steps 4 --out "$tmp/split" >/dev/null 2>"$tmp/err"; rc=$?
check "no --resume: non-empty --out still refused" $([ $rc -eq 2 ]; echo $?)
check "refusal mentions --resume" "$(contains "$tmp/err" '--resume')"
"$TESSEL" run tiny-cpu --ranks 2 --steps 4 --resume --out "$tmp/split" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "resume exits 0" $rc
check "resume says where it starts" "$(contains "$tmp/err" 'resuming from .*step-2')"
check "losses identical byte for byte" "$(cmp -s "$tmp/whole/losses.jsonl" "$tmp/split/losses.jsonl"; echo $?)"
check "resumed run saved step 4" "$([ -f "$tmp/split/checkpoints/step-4/manifest.json" ]; echo $?)"
python3 - "$tmp/split" <<'PY'; check "resumed measurements hold the resumed steps" $?
import json, sys
steps = {json.loads(l)["step"] for l in open(sys.argv[1] + "/measurements.jsonl")}
assert steps == {2, 3}, steps
PY
"$TESSEL" run tiny-cpu --ranks 2 --steps 4 --resume --out "$tmp/split" >/dev/null 2>"$tmp/err"; rc=$?
check "nothing left to train exits 2" $([ $rc -eq 2 ]; echo $?)
check "names --steps" "$(contains "$tmp/err" '--steps')"
"$TESSEL" run tiny-cpu --ranks 2 --steps 6 --pp 1 --dp 2 --resume --out "$tmp/split" >/dev/null 2>"$tmp/err"; rc=$?
check "resume with another plan exits 2" $([ $rc -eq 2 ]; echo $?)
check "names the plans" "$(contains "$tmp/err" 'written by tp=1 pp=2 dp=1.*this run is tp=1 pp=1 dp=2')"
# A run that dies after its step-3 checkpoint resumes from it, to the same losses.
"$TESSEL" run tiny-cpu --ranks 2 --steps 4 --checkpoint-every 1 --timeout 5 --fail-rank 1 --fail-at-step 3 \
  --out "$tmp/died" >/dev/null 2>"$tmp/err"; rc=$?
check "dying run exits 1" $([ $rc -eq 1 ]; echo $?)
check "dying run left step 3" "$([ -f "$tmp/died/checkpoints/step-3/manifest.json" ] &&
  [ "$(wc -l <"$tmp/died/losses.jsonl")" -eq 3 ]; echo $?)"
"$TESSEL" run tiny-cpu --ranks 2 --steps 4 --resume --out "$tmp/died" >/dev/null 2>"$tmp/err"; rc=$?
check "resume after a crash exits 0" $rc
check "losses after a crash identical" "$(cmp -s "$tmp/whole/losses.jsonl" "$tmp/died/losses.jsonl"; echo $?)"
"$TESSEL" run tiny-cpu --ranks 2 --steps 4 --resume --out "$tmp/nockpt" >/dev/null 2>"$tmp/err"; rc=$?
check "resume without a checkpoint exits 2" $([ $rc -eq 2 ]; echo $?)
check "says there is no checkpoint" "$(contains "$tmp/err" 'no complete checkpoint')"
check "no folder made" "$([ ! -e "$tmp/nockpt" ]; echo $?)"
mkdir -p "$tmp/incomplete/checkpoints/step-2"; touch "$tmp/incomplete/checkpoints/step-2/rank-0.bin"
"$TESSEL" run tiny-cpu --ranks 2 --steps 4 --resume --out "$tmp/incomplete" >/dev/null 2>"$tmp/err"; rc=$?
check "resume from an incomplete checkpoint exits 2" $([ $rc -eq 2 ]; echo $?)
"$TESSEL" run tiny-cpu --ranks 2 --steps 1 --force --out "$tmp/split" >/dev/null 2>"$tmp/err"; rc=$?
check "--force starts afresh" $rc
check "--force replaced the checkpoints" "$([ -f "$tmp/split/checkpoints/step-1/manifest.json" ] &&
  [ ! -e "$tmp/split/checkpoints/step-4" ]; echo $?)"

# A latent-attention model (DeepSeek's MLA) trains over TP with SP and Megatron-Bridge's DeepSeek-V3 module set, and
# with context parallelism's all-to-all; with q/k norms, which it does not have, it is refused at the field.
cat >"$tmp/mla.json" <<'JSON'
{"schema_version": 1, "name": "tiny-mla", "layers": 4, "hidden": 64, "heads": 4, "kv_heads": 4, "ffn_hidden": 128,
 "vocab": 256, "seq_len": 64, "activation": "swiglu", "norm": "rmsnorm", "position_embedding": "rope",
 "tied_embeddings": false, "linear_bias": false, "dropout": 0.0,
 "mla": {"q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 10},
 "sources": ["a tiny latent-attention model for tessel run"]}
JSON
"$TESSEL" run tiny-cpu --model "$tmp/mla.json" --ranks 2 --tp 2 --pp 1 --sequence-parallel on --recompute selective \
  --recompute-modules mla_up_proj,mlp --steps 3 --out "$tmp/mla" >/dev/null 2>"$tmp/err"; rc=$?
check "an MLA model runs" $rc
python3 - "$tmp/mla" <<'PY'; check "its loss falls" $?
import json, sys
losses = [json.loads(l)["loss"] for l in open(sys.argv[1] + "/losses.jsonl")]
assert len(losses) == 3 and losses[-1] < losses[0], losses
PY
"$TESSEL" run tiny-cpu --model "$tmp/mla.json" --ranks 2 --cp 2 --cp-comm-type a2a --pp 1 --steps 2 --out "$tmp/mlacp" \
  >/dev/null 2>"$tmp/err"; rc=$?
check "an MLA model runs with cp a2a" $rc
sed 's/"dropout": 0.0,/"dropout": 0.0, "qk_norm": true,/' "$tmp/mla.json" >"$tmp/mlaqk.json"
"$TESSEL" run tiny-cpu --model "$tmp/mlaqk.json" --ranks 2 --pp 1 --steps 1 --out "$tmp/mlaqk" >/dev/null 2>"$tmp/err"; rc=$?
check "MLA with qk_norm refused (exit 2)" $([ $rc -eq 2 ]; echo $?)
check "... at the model's qk_norm" "$(contains "$tmp/err" 'mlaqk.json#/qk_norm')"

finish
