#!/usr/bin/env bash
# End-to-end checks of `tessel predict`: exit codes, JSON shape, every bad-input problem listed by pointer/flag.
source "$(dirname "$0")/lib.sh"

# 1. The default scenario: JSON with the promised keys, 8 stages, fits.
"$TESSEL" predict --json >"$tmp/default.json" 2>"$tmp/err"; rc=$?
check "default exits 0" $rc
python3 - "$tmp/default.json" <<'PY'; check "default JSON shape" $?
import json, sys
d = json.load(open(sys.argv[1]))
m = d["memory"]
assert len(m["stages"]) == 8, len(m["stages"])
for s in m["stages"]:
    for k in ("stage", "weights_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "other_bytes", "total_bytes", "fits", "headroom_bytes"):
        assert k in s, k
    parts = s["weights_bytes"] + s["grads_bytes"] + s["optimizer_bytes"] + s["activations_bytes"] + s["other_bytes"]
    assert abs(parts - s["total_bytes"]) <= 1e-6 * parts
assert m["fits"] is True and m["capacity_bytes"] == 85899345920
assert m["peak_bytes"] == max(s["total_bytes"] for s in m["stages"])
assert d["scenario"]["plan"]["tp"] == 8 and d["scenario"]["plan"]["pp"] == 8 and d["scenario"]["plan"]["dp"] == 16
assert any(c["group"] == "tp" for c in d["communication"]["per_layer"])
t = d["time"]
for k in ("step_seconds", "bubble_fraction", "mfu", "hfu", "tokens_per_second", "breakdown", "stages"):
    assert k in t, k
assert 0 < t["mfu"] <= t["hfu"] < 1 and 0 <= t["bubble_fraction"] < 1
b = t["breakdown"]
assert abs(sum(b.values()) - t["step_seconds"]) < 1e-9 * t["step_seconds"]
assert abs(t["tokens_per_second"] - 1536 * 2048 / t["step_seconds"]) < 1e-6 * t["tokens_per_second"]
PY

# 2. Flags override the scenario.
"$TESSEL" predict --json --tp 4 --pp 16 --zero 1 >"$tmp/o.json"; check "override exits 0" $?
python3 -c "
import json,sys; d=json.load(open('$tmp/o.json')); p=d['scenario']['plan']
assert p['tp']==4 and p['pp']==16 and p['zero_stage']==1 and len(d['memory']['stages'])==16" ; check "overrides applied" $?

# Hybrid sharding: the default plan (dp 16) with its optimizer state in 4 replicas of 4 ranks holds 4x the
# optimizer state of full sharding; a replica count that does not divide dp is named by its flag.
"$TESSEL" predict --json --zero 1 >"$tmp/z1.json" && "$TESSEL" predict --json --zero 1 --zero-replicas 4 >"$tmp/z4.json"
check "zero-replicas exits 0" $?
python3 -c "
import json; a=json.load(open('$tmp/z1.json')); b=json.load(open('$tmp/z4.json'))
assert b['scenario']['plan']['zero_replicas']==4
oa=a['memory']['stages'][0]['optimizer_bytes']; ob=b['memory']['stages'][0]['optimizer_bytes']
assert abs(ob-4*oa) < 1e-6*ob, (oa, ob)" ; check "four replicas hold four times the optimizer state" $?
"$TESSEL" predict --zero 1 --zero-replicas 3 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "bad zero-replicas exits 2" $([ $rc -eq 2 ]; echo $?)
check "names --zero-replicas" "$(contains "$tmp/err" '--zero-replicas (/plan/zero_replicas)')"

# NeMo 1's distributed optimizer (container 24.07) keeps the fp32 master as 16-bit remainders: 10 B of optimizer
# state per parameter over the shards instead of 12, and predict says so where it names the framework's settings.
"$TESSEL" predict --json --zero 1 --framework nemo --framework-version 24.07 >"$tmp/nemo.json" &&
  "$TESSEL" predict --zero 1 --framework nemo --framework-version 24.07 >"$tmp/nemo.txt"; check "nemo plan exits 0" $?
python3 -c "
import json; a=json.load(open('$tmp/z1.json')); b=json.load(open('$tmp/nemo.json'))
oa=a['memory']['stages'][1]['optimizer_bytes']; ob=b['memory']['stages'][1]['optimizer_bytes']
assert abs(ob - oa * 10 / 12) < 1e-6 * oa, (oa, ob)" ; check "remainders hold 10 of 12 bytes" $?
check "says the master is remainders" "$(contains "$tmp/nemo.txt" 'fp32 master as 16-bit remainders')"
# NeMo 24.01-24.07 ran flash-attn 2 on Hopper (its launcher's NVTE_FUSED_ATTN=0), later NeMo cuDNN's attention: on
# the H100 plan the earlier container is slower, and predict says why.
"$TESSEL" predict llama3-8b-h100 --json --framework nemo --framework-version 24.07 >"$tmp/nemo2407.json" &&
  "$TESSEL" predict llama3-8b-h100 --json --framework nemo --framework-version 24.09 >"$tmp/nemo2409.json" &&
  "$TESSEL" predict llama3-8b-h100 --framework nemo --framework-version 24.07 >"$tmp/nemo2407.txt"; check "nemo H100 plans exit 0" $?
python3 -c "
import json; a=json.load(open('$tmp/nemo2407.json'))['time']['step_seconds']; b=json.load(open('$tmp/nemo2409.json'))['time']['step_seconds']
assert a > 1.05 * b, (a, b)" ; check "flash-attn 2 under NeMo 24.07 is slower than cuDNN's under 24.09" $?
check "says the launcher's attention" "$(contains "$tmp/nemo2407.txt" 'NVTE_FUSED_ATTN=0')"

# DeepSpeed's pipeline engine under tp 8 without SP: its sends are split over TP and all-gathered (scatter-gather),
# and bf16 runs on its BF16 optimizer, 2 B of bf16 gradients beside the 4 B fp32 ones; predict names both.
"$TESSEL" predict --json --zero 1 --framework deepspeed --sequence-parallel off >"$tmp/ds.json" &&
  "$TESSEL" predict --zero 1 --framework deepspeed --sequence-parallel off >"$tmp/ds.txt"; check "deepspeed plan exits 0" $?
check "says the sends are scatter-gather" "$(contains "$tmp/ds.txt" 'pipeline sends split over TP and all-gathered')"
check "says the BF16 optimizer keeps both gradients" "$(contains "$tmp/ds.txt" "DeepSpeed's BF16 optimizer")"
check "says they are all-reduced in bf16" "$(contains "$tmp/ds.txt" "all-reduced in bf16")"
python3 -c "
import json; d=json.load(open('$tmp/ds.json'))
ops=[o for o in d['communication']['data_parallel'][0]['ops'] if o['name'] == 'dp_all_reduce_grads_dense']
st=d['memory']['stages'][0]
assert ops and abs(ops[0]['bytes'] - 2.0 * st['parameters']) < 1e-6 * ops[0]['bytes'], (ops[:1], st['parameters'])" ; check "two bytes a parameter on the wire" $?
python3 -c "
import json; d=json.load(open('$tmp/ds.json'))
st=d['memory']['stages'][1]
assert abs(st['grads_bytes'] - 6.0 * st['parameters']) < 1e-6 * st['grads_bytes'], st" ; check "six bytes of gradients a parameter" $?

# 3. Bad flags: every problem listed, exit 2, named by flag.
"$TESSEL" predict --tp 7 --pp 5 --global-batch 100 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "bad plan exits 2" $([ $rc -eq 2 ]; echo $?)
check "names --tp" "$(contains "$tmp/err" '--tp (/plan/tp)')"
check "names --pp" "$(contains "$tmp/err" '--pp (/plan/pp)')"
check "names world size" "$(contains "$tmp/err" 'ranks, but the cluster has')"
check "names --global-batch" "$(contains "$tmp/err" '--global-batch')"

# 4. A scenario file with an unknown key, a negative number and a bad enum: all three listed with pointers.
cat >"$tmp/bad.json" <<'JSON'
{"schema_version": 1, "model": "gpt3-175b", "cluster": "dgx-a100-80g", "nodes": 128,
 "plan": {"tp": -8, "pp": 8, "dp": 16, "schedule": "2f2b", "micro_batchs": 1}}
JSON
"$TESSEL" predict "$tmp/bad.json" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "bad file exits 2" $([ $rc -eq 2 ]; echo $?)
check "pointer tp" "$(contains "$tmp/err" '#/plan/tp')"
check "pointer schedule" "$(contains "$tmp/err" '#/plan/schedule')"
check "pointer unknown key" "$(contains "$tmp/err" '#/plan/micro_batchs: unknown key')"

# 4a. A trainer's metrics over the logits (Composer's two, train_metric_losses): said in the framework line and apart
# in the LM head's forward; absent, neither.
cat >"$tmp/metrics.json" <<'JSON'
{"schema_version": 1, "model": "gpt2-124m", "cluster": "dgx-a100-80g", "nodes": 1,
 "plan": {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 8, "global_batch": 64, "zero_stage": 3, "precision": "fsdp",
          "framework": "fsdp", "train_metric_losses": 2}}
JSON
"$TESSEL" predict "$tmp/metrics.json" >"$tmp/metrics" 2>&1; check "metrics plan exits 0" $?
check "says the trainer's metrics" "$(contains "$tmp/metrics" "2 training-metric cross-entropies a micro-batch")"
check "shows their time in the head's forward" "$(contains "$tmp/metrics" "(training metrics [0-9.]* ms of it)")"
python3 -c "import json; d=json.load(open('$tmp/metrics.json')); del d['plan']['train_metric_losses']; json.dump(d, open('$tmp/nometrics.json', 'w'))"
"$TESSEL" predict "$tmp/nometrics.json" >"$tmp/nometrics" 2>&1; check "plain plan exits 0" $?
check "no metrics unless stated" "$([ "$(contains "$tmp/nometrics" 'training metrics')" != 0 ]; echo $?)"

# 4b. A whole-model compiled graph on one GPU (compile_whole_model, KempnerForge's 7B): from the second micro-batch its
# backward's gradients, returned at once, sit beside the accumulated ones; the peak is that phase, said as such, and
# the same plan on two DDP ranks (whose buckets split the graph) has none of it.
cat >"$tmp/whole.json" <<'JSON'
{"schema_version": 1, "model": "llama3-8b", "cluster": "h200-single", "nodes": 1, "gpus_per_node": 1,
 "plan": {"tp": 1, "pp": 1, "dp": 1, "micro_batch": 1, "global_batch": 4, "zero_stage": 0, "precision": "bf16_no_master",
          "framework": "torchtitan", "recompute": "full", "compile_whole_model": true}}
JSON
"$TESSEL" predict "$tmp/whole.json" >"$tmp/whole.out" 2>&1; check "a whole-model compiled plan predicts" $?
check "says the phase after the backward" "$(contains "$tmp/whole.out" "^  after the backward, its activations freed: the compiled graph's gradients, returned at once")"
"$TESSEL" predict "$tmp/whole.json" --json >"$tmp/whole.json.out" 2>/dev/null
python3 -c "import json; d=json.load(open('$tmp/whole.json')); d['plan']['compile_whole_model']=False; json.dump(d, open('$tmp/notwhole.json', 'w'))"
"$TESSEL" predict "$tmp/notwhole.json" --json >"$tmp/notwhole.json.out" 2>/dev/null
python3 -c "
import json
w, n = (json.load(open(f))['memory'] for f in ('$tmp/whole.json.out', '$tmp/notwhole.json.out'))
sw, sn = w['stages'][0], n['stages'][0]
extra = sw['other']['step_copy_bytes']
assert extra > 0 and sn['other']['step_copy_bytes'] == 0, (sw['other'], sn['other'])
assert abs(w['peak_bytes'] - n['peak_bytes'] - extra) < 1, (w['peak_bytes'], n['peak_bytes'], extra)
backward = sn['activations_bytes'] + sn['other']['logits_loss_bytes'] + sn['other']['backward_working_bytes']
assert abs(extra - (sn['grads_bytes'] - backward)) < 1, (extra, sn['grads_bytes'], backward)" ; check "its peak: the gradients past the backward's" $?

# nodes x GPUs a node past 2^20 is named at the flag, and the count is not wrapped to 0.
"$TESSEL" predict --nodes 1048576 --gpus-per-node 1048576 >/dev/null 2>"$tmp/err"; rc=$?
check "a 2^40-GPU cluster exits 2" $([ $rc -eq 2 ]; echo $?)
check "names --nodes" "$(contains "$tmp/err" '--nodes: 1048576 nodes x 1048576 GPUs = 1099511627776 GPUs')"
check "no wrapped count" "$([ "$(contains "$tmp/err" '= 0 GPUs')" = 1 ]; echo $?)"
# 4b. The share of their benchmarked rate the layer's tensor cores run at: the measured power curve on an H100 (at the
# layer's duty), the fitted constant on an A100 (FORMULAS.md §3.3).
"$TESSEL" predict --model llama3-8b --cluster dgx-h100-80g --nodes 1 --tp 8 --pp 1 --dp 1 --global-batch 8 >"$tmp/h100" 2>&1
check "H100: the power curve at the layer's duty" "$(contains "$tmp/h100" "tensor cores at 0\.8[0-9]* of their benchmarked rate (the GPU's measured power curve at the layer's tensor-core duty 0\.[0-9]*)")"
"$TESSEL" predict --model llama3-8b --cluster dgx-a100-80g --nodes 1 --tp 8 --pp 1 --dp 1 --global-batch 8 >"$tmp/a100" 2>&1
check "A100: the fitted constant" "$(contains "$tmp/a100" 'tensor cores at 0.910 of their benchmarked rate (gpu.sustained_tensor_fraction)')"
# fp32 GEMMs run on the CUDA cores, which held their rate at the power limit (measured on a lent H200): no share.
"$TESSEL" predict --model gpt2-124m --cluster h200-single --nodes 1 --tp 1 --pp 1 --dp 1 --sequence-parallel off \
  --global-batch 4 --micro-batch 4 --precision fp32 >"$tmp/fp32" 2>&1
check "fp32: on the CUDA cores, no share" "$(contains "$tmp/fp32" 'fp32 GEMMs on the CUDA cores at their benchmarked rate (no tensor-core share)')"

# 4b'. The PCIe cards (scenarios/clusters/pcie-*.json): PCIe inside the server, so the same 8-GPU data-parallel plan is
# slower than on the NVSwitch part; the H100 card's share is the GH100 curve moved to its 350 W; their error band is
# the one over every published run (no run on them in a check set), not the SXM parts'.
P="--model llama3-8b --nodes 1 --tp 1 --pp 1 --dp 8 --sequence-parallel off --micro-batch 1 --global-batch 64 --zero 1 --recompute full"
for c in dgx-a100-80g pcie-a100-80g dgx-h100-80g pcie-h100-80g; do
  "$TESSEL" predict $P --cluster $c --json >"$tmp/$c.json" 2>/dev/null; check "$c predicts" $?
done
"$TESSEL" predict $P --cluster pcie-a100-80g >"$tmp/pcie.out" 2>&1
check "the PCIe tier is named" "$(contains "$tmp/pcie.out" 'PCIe 4.0 x16 through the host')"
check "the band is every published run's" "$(contains "$tmp/pcie.out" 'on [0-9]* published runs of every kind (none of this kind)')"
python3 -c "
import json
t = {n: json.load(open('$tmp/%s.json' % n))['time']['step_seconds'] for n in ('dgx-a100-80g', 'pcie-a100-80g', 'dgx-h100-80g', 'pcie-h100-80g')}
assert t['pcie-a100-80g'] > 1.05 * t['dgx-a100-80g'], t
assert t['pcie-h100-80g'] > 1.3 * t['dgx-h100-80g'], t" ; check "the PCIe cards are slower than the SXM parts" $?

# 4b''. Blocking launches (plan key launch_blocking, CUDA_LAUNCH_BLOCKING=1): said on the "runs on" line, the host's
# time a layer shown, and the step slower than with asynchronous launches.
"$TESSEL" predict --model gpt3-1.3b --cluster dgx-a100-80g --nodes 1 --tp 1 --pp 1 --dp 8 --sequence-parallel off \
    --global-batch 64 --micro-batch 8 --recompute full --json >"$tmp/noblock.json" 2>/dev/null
cat >"$tmp/block.json" <<'JSON'
{"schema_version": 1, "name": "blocking", "model": "gpt3-1.3b", "cluster": "dgx-a100-80g", "nodes": 1,
 "plan": {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 8, "global_batch": 64, "recompute": "full", "sequence_parallel": false,
          "launch_blocking": true}}
JSON
"$TESSEL" predict "$tmp/block.json" >"$tmp/block.out" 2>&1; check "a blocking plan predicts" $?
check "says the launches block" "$(contains "$tmp/block.out" 'blocking kernel launches (CUDA_LAUNCH_BLOCKING=1)')"
check "shows the host's time a layer" "$(contains "$tmp/block.out" 'launches block (CUDA_LAUNCH_BLOCKING=1): [0-9.]* ms a layer and micro-batch')"
"$TESSEL" predict "$tmp/block.json" --json >"$tmp/block.json.out" 2>/dev/null
python3 -c "
import json
a = json.load(open('$tmp/noblock.json'))['time']['step_seconds']
b = json.load(open('$tmp/block.json.out'))['time']['step_seconds']
assert b > a * 1.01, (a, b)" ; check "blocking launches are slower" $?

# 4b'''. NCCL user buffers (plan key nccl_ub, Megatron-core's --nccl-ub): said on the "runs on" line, and a ZeRO-3 plan
# on an H100 node (its contention probe's curve) is faster: its gathers and reduce-scatters hold 4-5 SMs, not 32.
cat >"$tmp/ub.json" <<'JSON'
{"schema_version": 1, "name": "user buffers", "model": "llama3-8b", "cluster": "dgx-h100-80g", "nodes": 1,
 "plan": {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 64, "zero_stage": 3, "framework": "megatron",
          "nccl_ub": true}}
JSON
python3 -c "
import json
s = json.load(open('$tmp/ub.json')); s['plan']['nccl_ub'] = False
json.dump(s, open('$tmp/noub.json', 'w'))"
"$TESSEL" predict "$tmp/ub.json" >"$tmp/ub.out" 2>&1; check "a plan on NCCL user buffers predicts" $?
check "says the collectives run on NCCL user buffers" "$(contains "$tmp/ub.out" 'data-parallel collectives on NCCL user buffers')"
"$TESSEL" predict "$tmp/ub.json" --json >"$tmp/ub.json.out" 2>/dev/null
"$TESSEL" predict "$tmp/noub.json" --json >"$tmp/noub.json.out" 2>/dev/null
python3 -c "
import json
a = json.load(open('$tmp/noub.json.out'))['time']['step_seconds']
b = json.load(open('$tmp/ub.json.out'))['time']['step_seconds']
assert b < a * 0.995, (a, b)" ; check "user buffers cost the compute less contention" $?

# 4c. A cluster given by flag takes the place of the scenario's before the scenario is read: a scenario naming a
# cluster file that is not here (written on another machine) predicts with --cluster, and without it the error
# names the scenario's field.
cat >"$tmp/elsewhere.json" <<'JSON'
{"schema_version": 1, "name": "elsewhere", "model": "gpt2-124m", "cluster": "/nonexistent/cluster.json", "nodes": 3,
 "plan": {"tp": 1, "pp": 1, "dp": 1, "sequence_parallel": false, "micro_batch": 4, "global_batch": 4}}
JSON
"$TESSEL" predict "$tmp/elsewhere.json" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "a missing cluster file is an error" $([ $rc -eq 2 ]; echo $?)
check "the error names the scenario's cluster" "$(contains "$tmp/err" 'elsewhere.json#/cluster: file "/nonexistent/cluster.json" does not exist')"
"$TESSEL" predict "$tmp/elsewhere.json" --cluster h200-single >"$tmp/out" 2>"$tmp/err"
check "--cluster replaces it before it is read" $?
check "the flag's cluster brings its own node count" "$(contains "$tmp/out" 'cluster  h200-single: 1 x 1 NVIDIA H200')"

# 5. Malformed JSON and a missing file.
printf '{"schema_version": 1, "model": ' >"$tmp/broken.json"
"$TESSEL" predict "$tmp/broken.json" >/dev/null 2>"$tmp/err"; rc=$?
check "malformed exits 2" $([ $rc -eq 2 ]; echo $?)
check "malformed says so" "$(contains "$tmp/err" 'malformed JSON')"
"$TESSEL" predict /nonexistent/scenario.json >/dev/null 2>"$tmp/err"; rc=$?
check "missing file exits 2" $([ $rc -eq 2 ]; echo $?)
"$TESSEL" predict --model no-such-model >/dev/null 2>"$tmp/err"; rc=$?
check "unknown preset exits 2" $([ $rc -eq 2 ]; echo $?)
check "unknown preset lists presets" "$(contains "$tmp/err" 'llama3-8b')"

# 6. An OOM plan is a verdict, not an error.
"$TESSEL" predict --json --tp 1 --pp 1 --dp 1024 --global-batch 1024 --sequence-parallel off >"$tmp/oom.json" 2>"$tmp/err"; rc=$?
check "oom exits 0" $rc
python3 -c "import json; d=json.load(open('$tmp/oom.json')); assert d['memory']['fits'] is False and d['memory']['stages'][0]['headroom_bytes'] < 0"; check "oom verdict" $?

# 7. A HuggingFace checkpoint folder is accepted as a model.
if [ -n "${TESSEL_TEST_DATA:-}" ] && [ -d "$TESSEL_TEST_DATA/hf/llama3-8b" ]; then
  "$TESSEL" predict --json --model "$TESSEL_TEST_DATA/hf/llama3-8b" --cluster dgx-h100-80g --nodes 1 --tp 8 --pp 1 --dp 1 --global-batch 8 >"$tmp/hf.json" 2>"$tmp/err"; rc=$?
  check "hf folder exits 0" $rc
  # --seq-len trains it at another length than its 8192-row position table; predict and search both take it.
  "$TESSEL" predict --json --model "$TESSEL_TEST_DATA/hf/qwen3-8b" --seq-len 4096 --cluster dgx-h100-80g --nodes 1 \
    --tp 8 --pp 1 --dp 1 --global-batch 8 >"$tmp/seq.json" 2>"$tmp/err"; rc=$?
  check "--seq-len exits 0" $rc
  python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['time']; assert abs(t['tokens_per_second'] - 8 * 4096 / t['step_seconds']) < 1e-6 * t['tokens_per_second'], t" \
    "$tmp/seq.json"; check "--seq-len: tokens of 4096" $?
  "$TESSEL" search --model "$TESSEL_TEST_DATA/hf/qwen3-8b" --seq-len 4096 --cluster dgx-h100-80g --gpus 8 \
    --global-batch 64 --top 1 --json --no-progress >"$tmp/seqs.json" 2>"$tmp/err"; rc=$?
  check "search --seq-len exits 0" $rc
  python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['top'][0]; assert abs(t['tokens_per_second'] - t['global_batch'] * 4096 / t['step_seconds']) < 1e-6 * t['tokens_per_second'], t" \
    "$tmp/seqs.json"; check "search --seq-len: tokens of 4096" $?
  # Phi-3-mini windows its attention at 2047 keys: the model line says so (and pythia's quarter rotary).
  "$TESSEL" predict --model "$TESSEL_TEST_DATA/hf/phi3-mini" --cluster dgx-h100-80g --nodes 1 --tp 8 --pp 1 --dp 1 \
    --global-batch 8 >"$tmp/phi3.txt" 2>"$tmp/err"; rc=$?
  check "phi3 exits 0" $rc
  check "phi3: its window on the model line" "$(contains "$tmp/phi3.txt" "seq 4096, sliding window 2047")"
  # Qwen2 windowing the layers from max_window_layers on: the rest attend in full, each kind costed and said.
  python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c.update(use_sliding_window=True, sliding_window=4096, max_window_layers=14); json.dump(c, open(sys.argv[2], 'w'))" \
    "$TESSEL_TEST_DATA/hf/qwen2-7b/config.json" "$tmp/qwen2-window.json"
  "$TESSEL" predict --model "$tmp/qwen2-window.json" --cluster dgx-h100-80g --nodes 1 --tp 4 --pp 2 --dp 1 \
    --global-batch 8 --seq-len 32768 >"$tmp/qwen2w.txt" 2>"$tmp/err"; rc=$?
  check "qwen2 windowed exits 0" $rc
  check "qwen2: its pattern on the model line" "$(contains "$tmp/qwen2w.txt" "sliding window 4096 (14 layers full)")"
  check "qwen2: the full-attention layers' own line" "$(contains "$tmp/qwen2w.txt" "full-attention layers (14 of 28, the rest windowed at 4096)")"
  # Gemma 3 1B: norms after each block and a 512-key window in five layers of six, on its model line.
  "$TESSEL" predict --model "$TESSEL_TEST_DATA/hf/gemma-3-1b" --cluster dgx-h100-80g --nodes 1 --tp 1 --pp 1 --dp 8 \
    --global-batch 64 --seq-len 8192 >"$tmp/gemma3.txt" 2>"$tmp/err"; rc=$?
  check "gemma3 exits 0" $rc
  check "gemma3: its model line" "$(contains "$tmp/gemma3.txt" "gemma3_text: 1.00 B parameters, 26 layers, hidden 1152, 4 heads / 1 kv, ffn 6912 (norms before and after each block), vocab 262144 (embedding x sqrt(hidden)), seq 8192, sliding window 512 (4 layers full)")"
  # Gemma 2 9B (the preset): its soft-capping on the model line, the scores' inside the flash kernel said to be uncosted;
  # with flash off, costed, and no such note.
  "$TESSEL" predict --model gemma2-9b --cluster dgx-h100-80g --nodes 1 --tp 1 --pp 1 --dp 8 --global-batch 64 \
    >"$tmp/gemma2.txt" 2>"$tmp/err"; rc=$?
  check "gemma2-9b exits 0" $rc
  check "gemma2-9b: its caps on the model line" "$(contains "$tmp/gemma2.txt" "tanh soft-capping of the scores at 50.0 (inside flash2: not costed) and the logits at 30.0")"
  check "gemma2-9b: flash2 in place of the H100's cuDNN, said" "$(contains "$tmp/gemma2.txt" "attention flash2 (the model soft-caps its scores")"
  # cuDNN's fused attention takes no soft-cap: named, it is refused at its field.
  "$TESSEL" predict --model gemma2-9b --cluster dgx-h100-80g --nodes 1 --tp 1 --pp 1 --dp 8 --global-batch 64 \
    --attention-kernel cudnn >/dev/null 2>"$tmp/err"; rc=$?
  check "gemma2-9b on cudnn: refused" "$([ $rc -ne 0 ] && grep -q '/plan/attention_kernel' "$tmp/err" && grep -q 'soft-caps' "$tmp/err"; echo $?)"
  "$TESSEL" predict --model gemma2-9b --cluster dgx-h100-80g --nodes 1 --tp 1 --pp 1 --dp 8 --global-batch 64 --flash-attention off \
    >"$tmp/gemma2u.txt" 2>"$tmp/err"; rc=$?
  check "gemma2-9b unfused exits 0" $rc
  check "gemma2-9b unfused: the scores' cap is an op" "$(contains "$tmp/gemma2u.txt" "attention_softcap")"
  "$TESSEL" predict --model "$TESSEL_TEST_DATA/hf/pythia-160m" --cluster dgx-h100-80g --nodes 1 --tp 1 --pp 1 --dp 8 \
    --global-batch 64 >"$tmp/pythia.txt" 2>"$tmp/err"; rc=$?
  check "pythia exits 0" $rc
  check "pythia: its rotary on the model line" "$(contains "$tmp/pythia.txt" "rotary on 16 of 64 per head")"
  "$TESSEL" predict --model "$TESSEL_TEST_DATA/hf/qwen3-8b" --seq-len 0 >/dev/null 2>"$tmp/err"; rc=$?
  check "--seq-len 0 exits 2" $([ $rc -eq 2 ]; echo $?)
  check "--seq-len 0 names the flag" "$(contains "$tmp/err" "--seq-len: must be between 1")"
fi

# 8. trace: a Chrome trace with one process per stage; never overwrites without --force.
"$TESSEL" trace --tp 8 --pp 4 --dp 32 -o "$tmp/trace.json" 2>/dev/null; check "trace exits 0" $?
python3 - "$tmp/trace.json" <<'PY'; check "trace shape" $?
import json, sys
d = json.load(open(sys.argv[1]))
ev = [e for e in d["traceEvents"] if e["ph"] == "X"]
assert len({e["pid"] for e in ev}) == 4
names = {e["name"] for e in ev}
assert {"forward", "backward", "send_activation", "recv_activation", "optimizer_step"} <= names, names
assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in ev)
PY
echo keep >"$tmp/mine.json"
"$TESSEL" trace -o "$tmp/mine.json" >/dev/null 2>"$tmp/err"; rc=$?
check "trace refuses to overwrite" $([ $rc -eq 2 ]; echo $?)
check "user file kept" "$([ "$(cat "$tmp/mine.json")" = keep ]; echo $?)"
"$TESSEL" trace -o "$tmp/mine.json" --force --check >/dev/null 2>&1; check "trace --force --check" $?

# FP8: MFU is of the BF16 peak, and the output says which peak (an FP8 run can pass 100% of it).
"$TESSEL" predict llama3-8b-h100 --precision fp8 >"$tmp/fp8" 2>&1; check "fp8 predict exits 0" $?
check "fp8 names its MFU peak" "$(contains "$tmp/fp8" 'MFU and HFU are of the bf16 peak (990 TFLOP/s); the fp8 GEMMs')"
"$TESSEL" predict llama3-8b-h100 >"$tmp/bf16" 2>&1
check "bf16 needs no such line" "$([ "$(contains "$tmp/bf16" 'MFU and HFU are of the')" -ne 0 ]; echo $?)"

# 9. Latent attention (a model's mla): predicted through its projections and said; a grouped kv count is refused by
# its pointer.
python3 - "$(dirname "$0")/../../scenarios/models/llama3-8b.json" "$tmp/mla.json" "$tmp/mla-gqa.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["name"] = "llama3-8b-mla"; m["kv_heads"] = m["heads"]; m.pop("head_dim", None)
m["mla"] = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}
json.dump(m, open(sys.argv[2], "w"))
m["kv_heads"] = 8
json.dump(m, open(sys.argv[3], "w"))
PY
"$TESSEL" predict llama3-8b-h100 --model "$tmp/mla.json" >"$tmp/mla.out" 2>&1; check "mla predicts" $?
check "mla said" "$(contains "$tmp/mla.out" 'latent attention (q latent 1536, kv latent 512, heads 192 / 128 wide)')"
check "mla projections" "$(contains "$tmp/mla.out" 'kv_up ')"
"$TESSEL" predict llama3-8b-h100 --model "$tmp/mla-gqa.json" >"$tmp/mla-gqa.out" 2>&1; rc=$?
check "mla with grouped kv refused" $([ $rc -eq 2 ]; echo $?)
check "names kv_heads" "$(contains "$tmp/mla-gqa.out" '/kv_heads')"
# DeepSeek-V3 (the preset): its three dense layers costed and said, in the JSON too.
"$TESSEL" predict --model deepseek-v3 --cluster dgx-h100-80g --nodes 64 --tp 1 --micro-batch 1 --pp 8 --dp 64 --ep 64 --zero 1 --recompute full \
    --sequence-parallel off --pipeline-split balanced --global-batch 4096 >"$tmp/dsv3.out" 2>&1; check "deepseek-v3 predicts" $?
check "dense layers said" "$(contains "$tmp/dsv3.out" 'dense layers (3 of 61, from layer 0)')"
check "mtp said" "$(contains "$tmp/dsv3.out" 'multi-token prediction: 1 module on stage 7')"
"$TESSEL" predict --json --model deepseek-v3 --cluster dgx-h100-80g --nodes 64 --tp 1 --micro-batch 1 --pp 8 --dp 64 --ep 64 --zero 1 \
    --recompute full --sequence-parallel off --pipeline-split balanced --global-batch 4096 >"$tmp/dsv3.json"
python3 -c "
import json; d=json.load(open('$tmp/dsv3.json'))
assert d['model']['parameters'] == 671026404352, d['model']['parameters']
assert d['compute']['dense_layer']['forward']['seconds'] > 0
assert d['compute']['mtp_module']['modules'] == 1 and d['compute']['mtp_module']['stage'] == 7
assert d['compute']['mtp_module']['forward']['seconds'] > 0" ; check "dense layer and mtp module in the JSON" $?

# Volta: a bf16 plan is refused naming the way out; with --half-dtype fp16 it predicts, and a flash plan on a GPU
# without fused attention kernels says how its attention was costed.
"$TESSEL" predict --cluster dgx1-v100 --nodes 128 >"$tmp/v100bf16.out" 2>&1; rc=$?
check "bf16 on a V100 refused" $([ $rc -eq 2 ]; echo $?)
check "names --half-dtype" "$(contains "$tmp/v100bf16.out" '--half-dtype fp16')"
"$TESSEL" predict --cluster dgx1-v100 --nodes 128 --half-dtype fp16 >"$tmp/v100.out" 2>&1; check "fp16 on a V100 predicts" $?
check "says no fused attention kernel" "$(contains "$tmp/v100.out" 'has no fused attention kernel in its preset')"
"$TESSEL" predict --json --cluster dgx1-v100 --nodes 128 --half-dtype fp16 >"$tmp/v100.json"
python3 -c "
import json; d=json.load(open('$tmp/v100.json'))
p = d['scenario']['plan']; assert p['dtype'] == 'fp16' and p['half_dtype'] == 'fp16', p" ; check "fp16 in the JSON plan" $?

# DeepSpeed ZeRO-3 says it gathers module by module, with the coordinator limits its gather memory walked (DeepSpeed's
# defaults here). For Llama 3 8B that is more than FSDP's two whole layers: the prefetch runs ahead until 1e9 elements
# are live (2 GB in bf16), and the last layers stay gathered from forward to backward, within the 1e9 reuse distance.
"$TESSEL" predict llama3-8b-h100 --framework deepspeed --tp 1 --pp 1 --vpp 1 --dp 8 --zero 3 --precision mixed --schedule 1f1b --sequence-parallel off \
    --nodes 1 >"$tmp/ds3.out" 2>&1; check "DeepSpeed ZeRO-3 predicts" $?
check "names its coordinator limits" "$(contains "$tmp/ds3.out" 'ZeRO-3 gathers module by module (max live 1e+09, prefetch 5e+07, reuse distance 1e+09 elements)')"
for fw in deepspeed fsdp; do
    "$TESSEL" predict llama3-8b-h100 --framework $fw --tp 1 --pp 1 --vpp 1 --dp 8 --zero 3 --precision mixed --schedule 1f1b --sequence-parallel off \
        --nodes 1 --json >"$tmp/z3-$fw.json" 2>/dev/null
done
python3 -c "
import json
g = {fw: json.load(open('$tmp/z3-%s.json' % fw))['memory']['stages'][0]['other']['zero3_gather_bytes'] for fw in ('deepspeed', 'fsdp')}
assert g['deepspeed'] >= 2e9 and g['deepspeed'] > g['fsdp'], g" ; check "DeepSpeed's live set reaches max_live_parameters" $?


# A power limit (nvidia-smi -pl) moves the H100's measured share curve by its kernels' power law (FORMULAS.md §3.3):
# said with the factor, slower; a GPU without the law, or a limit below its idle draw, is refused at the flag.
P="--model llama3-8b --cluster dgx-h100-80g --nodes 1 --tp 1 --pp 1 --dp 8 --micro-batch 2 --global-batch 16 --zero 3 --sequence-parallel off"
"$TESSEL" predict $P --json >"$tmp/pl700.json" 2>/dev/null; check "predict at the curve's own limit" $?
"$TESSEL" predict $P --power-limit 500 >"$tmp/pl500.out" 2>&1; check "predict at 500 W" $?
check "says the limit and the factor" "$(contains "$tmp/pl500.out" "the curve's 700 W moved to this part.s 500 W limit: x0.844")"
"$TESSEL" predict $P --power-limit 500 --json >"$tmp/pl500.json" 2>/dev/null
python3 -c "
import json
a, b = (json.load(open('$tmp/%s.json' % n))['time']['step_seconds'] for n in ('pl700', 'pl500'))
assert 1.05 < b / a < 1.2, (a, b)" ; check "500 W is slower by the tensor-core share" $?
# The GB300 preset runs the GB200's curve and rated clocks at its own 1400 W (gb300-nvl72.json): said, with the
# factor, and the same plan faster than on the GB200: every tensor-core op by that factor, attention's forward by
# more (the GB300's eta 0.662, the B200's 0.55 x cuDNN's measured GB300 / GB200 x1.204, docs/validation.md
# "Blackwell Ultra's attention", against the GB200's measured curve, 0.538 at 8k; the flat eta takes the s / (s + 128) ramp, the curve does not).
G="--model llama3-8b --nodes 1 --gpus-per-node 8 --tp 1 --pp 1 --dp 8 --micro-batch 2 --global-batch 128 --sequence-parallel off --precision fp8"
"$TESSEL" predict $G --cluster gb300-nvl72 >"$tmp/gb300.out" 2>&1; check "predict on the GB300" $?
check "says the curve's 1200 W and its 1400 W" "$(contains "$tmp/gb300.out" "the curve's 1200 W moved to this part.s 1400 W limit: x1.074")"
"$TESSEL" predict $G --cluster gb300-nvl72 --json >"$tmp/gb300.json" 2>/dev/null
"$TESSEL" predict $G --cluster gb200-nvl72 --json >"$tmp/gb200.json" 2>/dev/null
python3 -c "
import json
a, b = (json.load(open('$tmp/%s.json' % n))['time']['step_seconds'] for n in ('gb200', 'gb300'))
assert 1.0 < a / b <= 1.075 * 1.25, (a, b)
ops = {n: {o['name']: o['seconds'] for o in json.load(open('$tmp/%s.json' % n))['compute']['per_layer']['forward_ops']}
       for n in ('gb200', 'gb300')}
gemm = ops['gb200']['qkv'] / ops['gb300']['qkv']
attention = ops['gb200']['attention_core_flash'] / ops['gb300']['attention_core_flash']
assert 1.0 < gemm <= 1.075 and abs(attention / gemm - 0.662 * 8192 / (8192 + 128) / (1211.140 / 2250)) < 0.002, (gemm, attention)" ; check "the GB300's 1400 W and its attention: faster than the GB200, by their factors" $?
"$TESSEL" predict --model llama3-8b --cluster dgx-a100-80g --nodes 1 --tp 1 --pp 1 --dp 8 --sequence-parallel off --power-limit 300 \
    >"$tmp/out" 2>"$tmp/err"; rc=$?
check "a GPU without the power law refuses the limit" $([ $rc -eq 2 ]; echo $?)
check "at the flag" "$(contains "$tmp/err" '^  --power-limit: .*carries no power law')"
"$TESSEL" predict $P --power-limit 50 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "a limit below the idle draw is refused" $([ $rc -eq 2 ]; echo $?)
check "naming the idle draw" "$(contains "$tmp/err" '^  --power-limit: 50 W is no limit this GPU runs at (it draws 78 W idle)')"
"$TESSEL" search --model llama3-8b --cluster dgx-h100-80g --gpus 8 --global-batch 16 --power-limit 500 --no-progress --top 1 --json \
    >"$tmp/s500.json" 2>/dev/null; check "search takes the limit" $?

# The loss kernel from the command line (plan key cross_entropy): Liger's fused linear cross-entropy keeps the input
# and weight gradients, not the 128k-vocabulary logits; a kernel tessel does not cost, or tp > 1 with Liger's, is
# refused at the flag; search takes it too.
P="--model llama3-8b --cluster dgx-h100-80g --nodes 1 --tp 1 --pp 1 --dp 8 --micro-batch 4 --global-batch 32 --zero 3 --recompute full --sequence-parallel off --framework fsdp"
"$TESSEL" predict $P --cross-entropy compiled --json >"$tmp/ce-compiled.json" 2>/dev/null; check "predict with torch.compile's loss" $?
"$TESSEL" predict $P --cross-entropy fused_linear >"$tmp/ce-liger.out" 2>&1; check "predict with Liger's loss" $?
check "says the loss kernel" "$(contains "$tmp/ce-liger.out" "Liger-Kernel's fused linear")"
# cross_entropy over the 16-bit logits, no upcast: said as itself (6 B a logit at its backward, 1.5 times the
# compiled kernels' 4, where the trainer lets go of the logits; 8 B where it holds them, logits_held_through_backward).
"$TESSEL" predict $P --cross-entropy eager_16bit >"$tmp/ce-16.out" 2>&1; check "predict with the 16-bit eager loss" $?
check "says that loss kernel" "$(contains "$tmp/ce-16.out" "eager PyTorch, over the 16-bit logits (no upcast), cross-entropy")"
# The last stage's peak is one of its two moments (FORMULAS.md §2): with 4 x 8192 tokens of 128k-vocabulary logits
# the loss's backward, which the text names with what the other moment holds.
check "names the peak's moment" "$(contains "$tmp/ce-16.out" "^  at the loss's backward (no layer rebuilt yet")"
"$TESSEL" predict $P --cross-entropy eager_16bit --json >"$tmp/ce-16.json" 2>/dev/null
python3 -c "
import json
a, b = (json.load(open('$tmp/ce-%s.json' % n)) for n in ('compiled', '16'))
la, lb = (x['memory']['stages'][-1]['loss_backward_bytes'] for x in (a, b))
assert abs(lb / la - 1.5) < 1e-9, (la, lb)" ; check "the 16-bit eager loss keeps 1.5 times the compiled loss's bytes" $?
"$TESSEL" predict $P --cross-entropy fused_linear --json >"$tmp/ce-liger.json" 2>/dev/null
python3 -c "
import json
a, b = (json.load(open('$tmp/ce-%s.json' % n)) for n in ('compiled', 'liger'))
la, lb = (x['memory']['stages'][-1]['loss_backward_bytes'] for x in (a, b))
assert la > 10 * lb and lb > 1e9, (la, lb)
ta, tb = (x['time']['step_seconds'] for x in (a, b))
assert abs(tb / ta - 1) < 0.05, (ta, tb)" ; check "the logits gone from the last stage, the step about the same" $?
"$TESSEL" predict $P --cross-entropy liger >"$tmp/out" 2>"$tmp/err"; rc=$?
check "an unknown loss kernel is refused" $([ $rc -eq 2 ]; echo $?)
check "at the flag, with the kinds" "$(contains "$tmp/err" '^  --cross-entropy (/plan/cross_entropy): must be one of fused|unfused|te|eager|flash_attn|compiled|fused_linear|eager_16bit')"
"$TESSEL" predict ${P/--tp 1 --pp 1 --dp 8/--tp 2 --pp 1 --dp 4} --cross-entropy fused_linear >"$tmp/out" 2>"$tmp/err"; rc=$?
check "Liger's loss with tp 2 is refused" $([ $rc -eq 2 ]; echo $?)
check "saying why" "$(contains "$tmp/err" 'needs tp 1, got tp=2')"
"$TESSEL" search --model llama3-8b --cluster dgx-h100-80g --gpus 8 --global-batch 32 --cross-entropy fused_linear --no-progress --top 1 --json \
    >"$tmp/sce.json" 2>/dev/null; check "search takes the loss kernel" $?
python3 -c "
import json
d = json.load(open('$tmp/sce.json'))
assert d['top'] and all(p['plan']['tp'] == 1 and p['plan']['cross_entropy'] == 'fused_linear' for p in d['top']), d['top']" ; check "and keeps to tp 1" $?
"$TESSEL" search --model llama3-8b --cluster dgx-h100-80g --gpus 8 --cross-entropy nope --no-progress >"$tmp/out" 2>"$tmp/err"; rc=$?
check "search refuses an unknown kernel at the flag" "$([ $rc -eq 2 ] && contains "$tmp/err" '^  --cross-entropy: must be one of')"


# Selective recompute by module (plan key recompute_modules, Megatron-core's --recompute-modules): Qwen3 30B-A3B with
# the experts' activation and the MoE norms rerun beside the attention core keeps less than the attention core alone
# and reruns more (memory-bound kernels: the same FLOPs, a longer step); names the
# model lacks, unknown names and another recompute are refused at the flag; search takes it and keeps it to its
# selective plans.
Q="--model qwen3-30b-a3b --cluster dgx-h100-80g --nodes 2 --tp 1 --pp 2 --dp 8 --ep 8 --micro-batch 1 --global-batch 256 --sequence-parallel off --framework megatron --zero 1 --recompute selective"
"$TESSEL" predict $Q --json >"$tmp/rm-core.json" 2>/dev/null; check "predict with the attention core recomputed" $?
"$TESSEL" predict $Q --recompute-modules moe_act,layernorm >"$tmp/rm.out" 2>&1; check "predict with modules" $?
check "the plan line names them" "$(contains "$tmp/rm.out" 'recompute selective (moe_act,layernorm)')"
"$TESSEL" predict $Q --recompute-modules core_attn,moe_act,layernorm --json >"$tmp/rm-mods.json" 2>/dev/null
python3 -c "
import json
a, b = (json.load(open('$tmp/rm-%s.json' % n)) for n in ('core', 'mods'))
assert b['scenario']['plan']['recompute_modules'] == ['core_attn', 'moe_act', 'layernorm'], b['scenario']['plan']
assert 'recompute_modules' not in a['scenario']['plan'], a['scenario']['plan']
aa, ab = (x['memory']['stages'][0]['activations_bytes'] for x in (a, b))
assert ab < aa, (aa, ab)
fa, fb = (x['time']['hardware_flops_per_step'] for x in (a, b))
assert fb == fa, (fa, fb)
sa, sb = (x['time']['step_seconds'] for x in (a, b))
assert sb > sa, (sa, sb)" ; check "keeps less, reruns memory-bound kernels: no FLOPs more, a longer step" $?
"$TESSEL" predict $Q --recompute-modules mla_up_proj >"$tmp/out" 2>"$tmp/err"; rc=$?
check "a module the model lacks is refused at the flag" "$([ $rc -eq 2 ] && contains "$tmp/err" '^  --recompute-modules (/plan/recompute_modules): mla_up_proj needs multi-latent attention')"
"$TESSEL" predict $Q --recompute-modules moe_act,attention >"$tmp/out" 2>"$tmp/err"; rc=$?
check "an unknown module is refused with the names" "$([ $rc -eq 2 ] && contains "$tmp/err" '^  --recompute-modules: must be none or module names joined by commas (core_attn, moe_act, layernorm')"
"$TESSEL" predict ${Q/--recompute selective/--recompute full} --recompute-modules moe_act >"$tmp/out" 2>"$tmp/err"; rc=$?
check "modules with full recompute are refused" "$([ $rc -eq 2 ] && contains "$tmp/err" 'needs recompute selective, got full')"
for rc in selective full; do
    "$TESSEL" search --model qwen3-30b-a3b --cluster dgx-h100-80g --gpus 16 --global-batch 256 --framework megatron --recompute-modules moe \
        --fix recompute=$rc --no-progress --top 10 --json >"$tmp/srm-$rc.json" 2>/dev/null; check "search takes the modules ($rc)" $?
done
python3 -c "
import json
sel, full = ([p['plan'] for p in json.load(open('$tmp/srm-%s.json' % n))['top']] for n in ('selective', 'full'))
assert sel and all(p['recompute_modules'] == ['moe'] for p in sel), sel[:2]
assert full and all('recompute_modules' not in p for p in full), full[:2]" ; check "on its selective plans only" $?
"$TESSEL" search --model llama3-8b --cluster dgx-h100-80g --gpus 8 --recompute-modules moe --no-progress >"$tmp/out" 2>"$tmp/err"; rc=$?
check "search refuses modules the model lacks at the flag" "$([ $rc -eq 2 ] && contains "$tmp/err" '^  --recompute-modules: moe needs a model with a moe block')"


# Megatron-core's shared-expert overlap (plan key moe_shared_expert_overlap) is said on the "runs on" line, and a model
# without shared experts is refused at the key.
cat >"$tmp/shared-overlap.json" <<'JSON'
{"schema_version": 1, "name": "deepseek-v3 shared-expert overlap", "model": "deepseek-v3", "cluster": "dgx-h100-80g",
 "plan": {"tp": 2, "pp": 8, "dp": 8, "ep": 8, "etp": 1, "micro_batch": 1, "global_batch": 64, "sequence_parallel": true,
          "zero_stage": 1, "recompute": "full", "pipeline_split": "balanced", "framework": "nemo",
          "moe_shared_expert_overlap": true}}
JSON
"$TESSEL" predict "$tmp/shared-overlap.json" --nodes 16 >"$tmp/out" 2>"$tmp/err"; check "predict with the shared-expert overlap" $?
check "says it" "$(contains "$tmp/out" 'shared experts beside the dispatch and combine')"
"$TESSEL" predict "$tmp/shared-overlap.json" --nodes 16 --model qwen3-30b-a3b --tp 1 --dp 16 --etp 1 --ep 16 --pp 8 --sequence-parallel off >"$tmp/out" 2>"$tmp/err"; rc=$?
check "refused without shared experts, at the key" "$([ $rc -eq 2 ] && contains "$tmp/err" '/plan/moe_shared_expert_overlap: moe_shared_expert_overlap runs the shared experts beside the dispatch; the model has none')"

# --gpus-per-node other than the cluster's node says what it did: tessel's node is the NVLink domain, so 64 GPUs of one
# GB200 NVL72 rack given as 16 nodes of 4 put the expert all-to-alls on InfiniBand (a slower step), and the note names
# the one-node form; the preset's own size, or the rack's 64 as one node, says nothing.
M="--model mixtral-8x7b --cluster gb200-nvl72 --tp 1 --pp 1 --dp 64 --ep 8 --micro-batch 2 --global-batch 256 --zero 1 --sequence-parallel off"
"$TESSEL" predict $M --nodes 16 --gpus-per-node 4 >"$tmp/split.txt" 2>"$tmp/err"; check "rack split into trays exits 0" $?
check "says the split and the one-node form" "$(contains "$tmp/split.txt" '^  note     nodes of 4 GPUs, where a node of gb200-nvl72 holds 72 behind NVLink 5.*: GPUs of different nodes talk over InfiniBand.*(the 64 GPUs in one node: --nodes 1 --gpus-per-node 64)')"
"$TESSEL" predict $M --nodes 16 --gpus-per-node 4 --json >"$tmp/split.json" 2>"$tmp/err"; check "split JSON exits 0" $?
"$TESSEL" predict $M --nodes 1 --gpus-per-node 64 --json >"$tmp/rack.json" 2>"$tmp/err"; check "one rack JSON exits 0" $?
python3 - "$tmp/split.json" "$tmp/rack.json" <<'PY'; check "the note in JSON, and the split costs the network" $?
import json, sys
split, rack = (json.load(open(f)) for f in sys.argv[1:3])
assert split["cluster_note"].startswith("nodes of 4 GPUs, where a node of gb200-nvl72 holds 72"), split["cluster_note"]
assert "cluster_note" not in rack, rack.get("cluster_note")
assert split["time"]["step_seconds"] > 1.5 * rack["time"]["step_seconds"], (split["time"]["step_seconds"], rack["time"]["step_seconds"])
PY
"$TESSEL" predict --model llama3-8b --cluster dgx-h100-80g --nodes 1 --gpus-per-node 16 --tp 8 --dp 2 --pp 1 --global-batch 16 >"$tmp/big.txt" 2>"$tmp/err"; check "a node larger than the cluster's exits 0" $?
check "says the larger node" "$(contains "$tmp/big.txt" '^  note     nodes of 16 GPUs, where a node of dgx-h100-80g holds 8 .*: tessel costs all 16 behind it')"
"$TESSEL" predict --model llama3-8b --cluster dgx-h100-80g --nodes 2 --gpus-per-node 8 --tp 8 --dp 2 --pp 1 --global-batch 16 >"$tmp/same.txt" 2>"$tmp/err"; check "the cluster's own node size exits 0" $?
check "no note for the cluster's own node size" "$([ -z "$(grep '^  note     nodes of' "$tmp/same.txt")" ]; echo $?)"

# Input a JSON parser would take silently: a key stated twice (the parser keeps the last) and a number past a double
# (1e999) are input errors naming the file (exit 2), not a plan read from the second value or an internal error.
cat >"$tmp/dup.json" <<'JSON'
{"schema_version": 1, "model": "tiny", "cluster": "cpu-host",
 "plan": {"tp": 0, "tp": 1, "pp": 2, "micro_batch": 2, "global_batch": 8, "precision": "cpu_fp64"}}
JSON
"$TESSEL" predict "$tmp/dup.json" >/dev/null 2>"$tmp/err"; rc=$?
check "duplicate key exits 2" $([ $rc -eq 2 ]; echo $?)
check "duplicate key named at its pointer" "$(contains "$tmp/err" 'dup.json#/plan/tp: duplicate key')"
sed 's/"tp": 0, "tp": 1/"tp": 1e999/' "$tmp/dup.json" >"$tmp/huge.json"
"$TESSEL" predict "$tmp/huge.json" >/dev/null 2>"$tmp/err"; rc=$?
check "1e999 exits 2" $([ $rc -eq 2 ]; echo $?)
check "1e999 named as out of range" "$(contains "$tmp/err" 'huge.json: a number is out of range')"
# A problem of a file's own plan, no flag changing it, names the file as the parser's problems do.
sed 's/"tp": 0, "tp": 1/"tp": 3/' "$tmp/dup.json" >"$tmp/tp3.json"
"$TESSEL" predict "$tmp/tp3.json" >/dev/null 2>"$tmp/err"; rc=$?
check "a file's plan problem exits 2" $([ $rc -eq 2 ]; echo $?)
check "names the file and the key" "$(contains "$tmp/err" "tp3.json#/plan/tp: tp=3 does not divide the model's 4 attention heads")"
# recompute_layers beyond a chunk's layers would recompute nothing more: refused with the chunk's size.
"$TESSEL" predict --model tiny --cluster cpu-host --tp 1 --pp 2 --dp 1 --micro-batch 2 --global-batch 8 --precision cpu_fp64 \
    --sequence-parallel off --recompute full --recompute-layers 99 >/dev/null 2>"$tmp/err"; rc=$?
check "recompute_layers past the chunk exits 2" $([ $rc -eq 2 ]; echo $?)
check "names the chunk's layers" "$(contains "$tmp/err" '--recompute-layers (/plan/recompute_layers): 99 layers recomputed a chunk, but a chunk has 2 at the most')"
# No part of a step is a negative time (a zero-bubble plan on one stage had left -1e-18 s of pipeline time).
"$TESSEL" predict "$(dirname "$0")/../../scenarios/plans/llama3-8b-h100.json" --schedule zero_bubble --json >"$tmp/zb.json" 2>"$tmp/err"
check "zero_bubble JSON exits 0" $?
python3 - "$tmp/zb.json" <<'PY'; check "no negative time in the breakdowns" $?
import json, sys
def walk(v, path):
    if isinstance(v, dict):
        for k, x in v.items(): walk(x, path + "/" + k)
    elif isinstance(v, list):
        for i, x in enumerate(v): walk(x, path + "/" + str(i))
    elif isinstance(v, float) and path.endswith("_seconds"):
        assert v >= 0.0, (path, v)
walk(json.load(open(sys.argv[1])), "")
PY

# Heads whose dimension is not a multiple of 8 fp16 elements on an A100 (BigScience's 182B at 128 heads, 108 wide):
# predict says the batched attention GEMMs run at the preset's per-head fallback figure; at 96 heads (144) it says
# nothing, and the 128-head layer is the slower.
"$TESSEL" validate "$(dirname "$0")/../../data/validation/check_bigscience_zero1.json" --scenarios "$tmp/bs" >/dev/null 2>&1
check "BigScience scenarios written" $?
"$TESSEL" predict "$tmp/bs/bigscience-02-23-h13824-l78-a128-tp8-pp6-dp8-mbs4.json" >"$tmp/a128.txt" 2>"$tmp/err" &&
  "$TESSEL" predict "$tmp/bs/bigscience-02-23-h13824-l78-a96-tp8-pp6-dp8-mbs4.json" >"$tmp/a96.txt" 2>"$tmp/err"
check "both head counts predict" $?
check "says the heads of 108 take the per-head fallback" \
  "$(contains "$tmp/a128.txt" 'heads of 108 (not a multiple of 8 fp16 elements): attention')"
check "names the figure" "$(contains "$tmp/a128.txt" 'unaligned_per_head_efficiency')"
grep -q 'heads of' "$tmp/a96.txt"; check "says nothing of aligned heads" $([ $? -ne 0 ]; echo $?)

# A degree of 1 on the command line takes the file's settings that exist only above it: sequence parallelism at
# --tp 1, the interleaved schedule and its virtual stages at --pp 1. Stated by a flag, they stay and are refused.
plans="$(dirname "$0")/../../scenarios/plans"
"$TESSEL" predict --tp 1 --dp 128 --json >"$tmp/tp1.json" 2>"$tmp/err"; check "--tp 1 on an SP scenario runs" $?
python3 -c "import json,sys; p=json.load(open('$tmp/tp1.json'))['scenario']['plan']; sys.exit(not (p['tp'] == 1 and p['sequence_parallel'] is False))"
check "--tp 1 runs without sequence parallelism" $?
"$TESSEL" predict --tp 1 --dp 128 --sequence-parallel on >/dev/null 2>"$tmp/err"; rc=$?
check "--tp 1 --sequence-parallel on exits 2" $([ $rc -eq 2 ]; echo $?)
check "and names the flag" "$(contains "$tmp/err" '--sequence-parallel (/plan/sequence_parallel): sequence parallelism needs tp > 1')"
"$TESSEL" predict "$plans/llama3-70b-h100.json" --pp 1 --dp 8 --json >"$tmp/pp1.json" 2>"$tmp/err"; check "--pp 1 on an interleaved scenario runs" $?
python3 -c "import json,sys; p=json.load(open('$tmp/pp1.json'))['scenario']['plan']; sys.exit(not (p['pp'] == 1 and p['vpp'] == 1 and p['schedule'] == '1f1b'))"
check "--pp 1 runs plain 1f1b, one chunk" $?
"$TESSEL" predict "$plans/llama3-70b-h100.json" --pp 1 --dp 8 --schedule interleaved_1f1b >/dev/null 2>"$tmp/err"; rc=$?
check "--pp 1 --schedule interleaved_1f1b exits 2" $([ $rc -eq 2 ]; echo $?)

finish
