#!/usr/bin/env bash
# End-to-end checks of `tessel export`: each format's content, exit 2 when inexpressible, -o never clobbers.
source "$(dirname "$0")/lib.sh"

exits() { [ "$1" -eq "$2" ]; echo $?; } # actual, expected

# 1. Megatron-LM: the default scenario is GPT-3 175B, TP8 PP8 DP16, as a torchrun launch of pretrain_gpt.py.
"$TESSEL" export --format megatron >"$tmp/megatron.sh" 2>"$tmp/err"; rc=$?
check "megatron exits 0" $rc
check "megatron launches pretrain_gpt.py" "$(contains "$tmp/megatron.sh" 'torchrun --nproc_per_node 8 --nnodes 128 .*pretrain_gpt.py \\$')"
check "megatron tp" "$(contains "$tmp/megatron.sh" '^    --tensor-model-parallel-size 8 \\$')"
check "megatron pp" "$(contains "$tmp/megatron.sh" '^    --pipeline-model-parallel-size 8 \\$')"
check "megatron global batch" "$(contains "$tmp/megatron.sh" '^    --global-batch-size 1536 \\$')"
check "megatron sequence parallel" "$(contains "$tmp/megatron.sh" '^    --sequence-parallel \\$')"
check "megatron no distributed optimizer" "$([ "$(contains "$tmp/megatron.sh" 'use-distributed-optimizer')" -ne 0 ]; echo $?)"
check "megatron is valid shell" "$(bash -n "$tmp/megatron.sh"; echo $?)"
"$TESSEL" export llama3-8b-h100 --format megatron >"$tmp/llama.sh" 2>"$tmp/err"; rc=$?
check "megatron llama exits 0" $rc
check "megatron llama gqa" "$(contains "$tmp/llama.sh" '^    --num-query-groups 8 \\$')"
check "megatron llama distributed optimizer" "$(contains "$tmp/llama.sh" '^    --use-distributed-optimizer \\$')"

# 2. DeepSpeed: a data-parallel Llama 3 8B plan as ds_config.json; batch sizes multiply out.
"$TESSEL" export llama3-8b-h100 --format deepspeed --tp 1 --dp 8 --sequence-parallel off >"$tmp/ds.json" 2>"$tmp/err"; rc=$?
check "deepspeed exits 0" $rc
python3 - "$tmp/ds.json" <<'PY'; check "deepspeed JSON" $?
import json, sys
d = json.load(open(sys.argv[1]))
assert d["train_batch_size"] == d["train_micro_batch_size_per_gpu"] * d["gradient_accumulation_steps"] * 8, d
assert d["train_batch_size"] == 32
assert d["zero_optimization"]["stage"] == 1
assert d["bf16"]["enabled"] is True
PY

# 3. torchtitan: FSDP (ZeRO-3) over dp 4 with TP 2 as a TOML job config, in the recipe torchtitan runs (the
# scenario names none, so --framework torchtitan takes torchtitan's: fp32 shards gathered in bf16); costed under
# Megatron-LM's recipe instead, the plan is refused naming the one to use.
"$TESSEL" export llama3-8b-h100 --format torchtitan --zero 3 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "torchtitan megatron recipe exits 2" "$(exits $rc 2)"
check "torchtitan names precision and fsdp" "$(contains "$tmp/err" '/plan/precision: .*use precision fsdp')"
"$TESSEL" export llama3-8b-h100 --format torchtitan --zero 3 --framework torchtitan >"$tmp/titan.toml" 2>"$tmp/err"; rc=$?
check "torchtitan exits 0" $rc
check "torchtitan gathers bf16" "$(contains "$tmp/titan.toml" '^mixed_precision_param = "bfloat16"$')"
check "torchtitan shard degree" "$(contains "$tmp/titan.toml" '^data_parallel_shard_degree = 4$')"
check "torchtitan tp degree" "$(contains "$tmp/titan.toml" '^tensor_parallel_degree = 2$')"
check "torchtitan pp degree" "$(contains "$tmp/titan.toml" '^pipeline_parallel_degree = 1$')"
if python3 -c 'import tomllib' 2>/dev/null; then
  python3 - "$tmp/titan.toml" <<'PY'; check "torchtitan TOML parses" $?
import sys, tomllib
t = tomllib.load(open(sys.argv[1], "rb"))
p = t["parallelism"]
assert p["data_parallel_shard_degree"] == 4 and p["data_parallel_replicate_degree"] == 1 and p["tensor_parallel_degree"] == 2
assert t["training"]["global_batch_size"] == 32 and t["model"]["flavor"] == "8B"
PY
fi

# 4. Inexpressible plans: exit 2, every problem listed by pointer, nothing on stdout.
"$TESSEL" export --format megatron --zero 3 --schedule zero_bubble >"$tmp/out" 2>"$tmp/err"; rc=$?
check "megatron zero 3 exits 2" "$(exits $rc 2)"
check "megatron names zero_stage" "$(contains "$tmp/err" '/plan/zero_stage')"
check "megatron names schedule" "$(contains "$tmp/err" '/plan/schedule')"
check "refusal prints nothing" "$([ ! -s "$tmp/out" ]; echo $?)"
# Gemma's gated GELU: Megatron-LM's arguments have only SiLU's gate (--swiglu), so the export refuses at the model's key.
if [ -n "${TESSEL_TEST_DATA:-}" ] && [ -d "$TESSEL_TEST_DATA/hf/gemma-7b" ]; then
  "$TESSEL" export --format megatron --model "$TESSEL_TEST_DATA/hf/gemma-7b" --cluster dgx-h100-80g --nodes 1 --tp 8 --pp 1 \
    --dp 1 --global-batch 8 >"$tmp/out" 2>"$tmp/err"; rc=$?
  check "gemma megatron export exits 2" "$(exits $rc 2)"
  check "gemma: names /model/activation" "$(contains "$tmp/err" '/model/activation: Megatron-LM.s arguments have no gated GELU')"
  "$TESSEL" predict --model "$TESSEL_TEST_DATA/hf/gemma-7b" --cluster dgx-h100-80g --nodes 1 --tp 8 --pp 1 --dp 1 \
    --global-batch 8 >"$tmp/out" 2>"$tmp/err"; rc=$?
  check "gemma predicts" "$rc"
  check "gemma: its 8.54 B parameters" "$(contains "$tmp/out" 'gemma: 8.54 B parameters, 28 layers')"
fi
"$TESSEL" export llama3-8b-h100 --format torchtitan >"$tmp/out" 2>"$tmp/err"; rc=$?
check "torchtitan zero 1 exits 2" "$(exits $rc 2)"
check "torchtitan names zero_stage" "$(contains "$tmp/err" '/plan/zero_stage')"
"$TESSEL" export --format deepspeed >"$tmp/out" 2>"$tmp/err"; rc=$?
check "deepspeed megatron plan exits 2" "$(exits $rc 2)"
check "deepspeed names sequence_parallel" "$(contains "$tmp/err" '/plan/sequence_parallel')"
"$TESSEL" export --format horovod >"$tmp/out" 2>"$tmp/err"; rc=$?
check "unknown format exits 2" "$(exits $rc 2)"
"$TESSEL" export >"$tmp/out" 2>"$tmp/err"; rc=$?
check "missing --format exits 2" "$(exits $rc 2)"
"$TESSEL" export --format megatron --tp 7 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "bad plan exits 2" "$(exits $rc 2)"
check "bad plan names --tp" "$(contains "$tmp/err" '--tp (/plan/tp)')"

# 5. -o writes the file; a second -o to the same path is refused and leaves it unchanged; --force overwrites.
out="$tmp/ds_config.json"
"$TESSEL" export llama3-8b-h100 --format deepspeed --tp 1 --dp 8 --sequence-parallel off -o "$out" >"$tmp/stdout" 2>"$tmp/err"; rc=$?
check "-o exits 0" $rc
check "-o writes the file" "$(cmp -s "$out" "$tmp/ds.json"; echo $?)"
check "-o prints nothing on stdout" "$([ ! -s "$tmp/stdout" ]; echo $?)"
cp "$out" "$tmp/before.json"
"$TESSEL" export llama3-8b-h100 --format deepspeed --tp 1 --dp 8 --sequence-parallel off --zero 2 --precision mixed -o "$out" >"$tmp/stdout" 2>"$tmp/err"; rc=$?
check "second -o exits 2" "$(exits $rc 2)"
check "second -o says --force" "$(contains "$tmp/err" '--force')"
check "second -o leaves the file unchanged" "$(cmp -s "$out" "$tmp/before.json"; echo $?)"
"$TESSEL" export llama3-8b-h100 --format deepspeed --tp 1 --dp 8 --sequence-parallel off --zero 2 --precision mixed -o "$out" --force >"$tmp/stdout" 2>"$tmp/err"; rc=$?
check "--force exits 0" $rc
python3 -c "import json,sys; assert json.load(open('$out'))['zero_optimization']['stage'] == 2"; check "--force overwrote" $?
printf 'keep me\n' >"$tmp/mine.txt"
"$TESSEL" export --format megatron --zero 3 -o "$tmp/mine.txt" --force >/dev/null 2>"$tmp/err"; rc=$?
check "refused export with --force exits 2" "$(exits $rc 2)"
check "refused export leaves the file" "$(contains "$tmp/mine.txt" '^keep me$')"

# Offload (issue 18): DeepSpeed's offload_optimizer / offload_param / cpu_checkpointing; Megatron-LM offloads only the
# optimizer; predict shows the host memory.
"$TESSEL" export llama3-8b-h100 --format deepspeed --tp 1 --dp 8 --sequence-parallel off --zero 3 --precision mixed \
    --recompute full --offload optimizer+parameters+activations >"$tmp/dsoff.json" 2>"$tmp/err"; check "deepspeed offload exits 0" $?
python3 - "$tmp/dsoff.json" <<'PY'; check "deepspeed offload config" $?
import json, sys
d = json.load(open(sys.argv[1]))
z = d["zero_optimization"]
assert z["stage"] == 3 and z["offload_optimizer"]["device"] == "cpu" and z["offload_param"]["device"] == "cpu", z
assert d["activation_checkpointing"]["cpu_checkpointing"] is True, d
PY
"$TESSEL" export llama3-8b-h100 --format megatron --zero 1 --offload optimizer >"$tmp/moff.sh" 2>"$tmp/err"; check "megatron optimizer offload exits 0" $?
check "megatron optimizer offload flag" "$(contains "$tmp/moff.sh" 'optimizer-cpu-offload')"
"$TESSEL" export llama3-8b-h100 --format megatron --tp 1 --dp 8 --sequence-parallel off --zero 3 --offload optimizer+parameters >/dev/null 2>"$tmp/err"; rc=$?
check "megatron parameter offload exits 2" $([ $rc -eq 2 ]; echo $?)
check "megatron parameter offload names the field" "$(contains "$tmp/err" 'offload_parameters')"
"$TESSEL" predict llama3-8b-h100 --zero 1 --offload optimizer >"$tmp/poff.txt" 2>&1; check "predict offload exits 0" $?
check "predict shows host memory" "$(contains "$tmp/poff.txt" 'host memory per node')"
"$TESSEL" predict llama3-8b-h100 --zero 0 --offload optimizer >/dev/null 2>"$tmp/err"; rc=$?
check "offload without ZeRO exits 2" $([ $rc -eq 2 ]; echo $?)
check "offload without ZeRO names the flag" "$(contains "$tmp/err" '--offload')"
# Megatron-core's CPU offloading of N layers' activations (pp 1, no recompute): --offload activations:N.
"$TESSEL" export llama3-8b-h100 --format megatron --tp 1 --pp 1 --dp 8 --sequence-parallel off --recompute none --zero 1 \
    --offload activations:8 >"$tmp/lo.sh" 2>"$tmp/err"; check "megatron layer offload exits 0" $?
check "megatron layer offload flags" "$(contains "$tmp/lo.sh" '--cpu-offloading-num-layers 8')"
"$TESSEL" predict llama3-8b-h100 --tp 1 --pp 1 --dp 8 --sequence-parallel off --recompute none --zero 1 --offload activations:8 \
    >"$tmp/lo.txt" 2>&1; check "predict layer offload exits 0" $?
check "predict layer offload shows it" "$(contains "$tmp/lo.txt" 'offload activations:8')"
"$TESSEL" predict llama3-8b-h100 --offload activations:x >/dev/null 2>"$tmp/err"; rc=$?
check "bad layer count exits 2" $([ $rc -eq 2 ]; echo $?)
check "bad layer count names the flag" "$(contains "$tmp/err" 'activations:N')"
"$TESSEL" predict --framework megatron --zero 2 >"$tmp/pnote.txt" 2>&1; check "predict zero-2 on megatron exits 0" $?
check "predict notes megatron cannot run it" "$(contains "$tmp/pnote.txt" 'megatron cannot run this plan')"
"$TESSEL" predict >"$tmp/pok.txt" 2>&1
check "no note for a runnable plan" $([ "$(grep -c 'cannot run this plan' "$tmp/pok.txt")" -eq 0 ]; echo $?)
finish
