#!/usr/bin/env bash
# End-to-end checks of `tessel validate`: every shipped published run predicted, today's error as a regression
# guard (bounds = the figures of the last accepted change plus a margin; tighten them as the model improves),
# leave-one-group-out, refused records listed, bad files exit 2 with the pointer.
source "$(dirname "$0")/lib.sh"

# 1. The shipped set: 85 runs, none refused, error within the guard.
"$TESSEL" validate --json >"$tmp/v.json" 2>"$tmp/err"; check "validate exits 0" $?
python3 - "$tmp/v.json" <<'PY'; check "shipped set within the regression guard" $?
import json, sys
d = json.load(open(sys.argv[1]))
o = d["overall"]
assert o["records"] == 85 and o["predicted"] == 85, o
# Guard: median and max |step error| over all records and per group (measured 2026-11-29 with the fitted
# sustained tensor-core share on the A100, the measured power curve on the H100, llm-foundry's Triton rows without
# flash_attn_fn's unpadding and Composer's training metrics costed: 3.6% / 19.7%; groups 3.8 / 2.1 / 3.3 / 4.0%;
# docs/validation.md).
assert o["median_abs_step_error"] <= 0.04, o["median_abs_step_error"]
assert o["max_abs_step_error"] <= 0.20, o["max_abs_step_error"]
bounds = {"megatron_sc21_table1": 0.05, "korthikanti_table5": 0.03,
          "megascale_table2_175B_strong_scaling": 0.045, "mosaicml_llm_foundry_mpt_benchmarks": 0.045}
for g in d["groups"]:
    assert g["median_abs_step_error"] <= bounds[g["group"]], (g["group"], g["median_abs_step_error"])
for r in d["results"]:
    assert r["predicted"] and r["dominant_term"] and r["assumptions"], r["id"]
    assert abs(r["predicted_step_seconds"] / r["measured_step_seconds"] - 1 - r["step_error"]) < 1e-9
    assert r["predicted_fits"], r["id"] + ": every published run ran, so it must be predicted to fit"
PY

# 2. The table: every record, the per-group summary, the worst record named.
"$TESSEL" validate >"$tmp/table" 2>&1; check "table exits 0" $?
check "table lists a record" "$(contains "$tmp/table" 'megatron-sc21-t1-1.7B')"
check "table has the group summary" "$(contains "$tmp/table" 'mosaicml_llm_foundry_mpt_benchmarks')"
"$TESSEL" validate --summary --assumptions >"$tmp/summary" 2>&1; check "summary exits 0" $?

# 3. Leave one group out: every group predicted with the share fitted without it (measured 4.0% median).
"$TESSEL" validate --leave-one-group-out --json >"$tmp/logo.json" 2>/dev/null; check "leave-one-group-out exits 0" $?
check "says what is refitted" "$(contains "$tmp/logo.json" 'sustained_tensor_fraction without megatron_sc21_table1: 0.9')"
python3 -c "
import json; d=json.load(open('$tmp/logo.json')); o=d['overall']
assert o['predicted']==85 and o['median_abs_step_error'] <= 0.045, o['median_abs_step_error']
assert len(d['fitted_constants'])==4, d['fitted_constants']"; check "out of sample within the guard" $?
"$TESSEL" validate --fit >"$tmp/fit" 2>&1; check "fit exits 0" $?
# Runs never fitted on: NeMo / Megatron-Bridge H100 FP8 (23 runs; measured 4.8% median, 12.8% max; NeMo 24.07's 12
# 4.0% since its launcher's flash-attn 2 and its MLPerf-config 175B row are read, 6.0% before). Every one of them ran, so every one must
# be predicted to fit (five were predicted OOM before bf16 main gradients and ZeRO over dp x cp, and Nemotron-4 340B
# on 128 GPUs, 87.3 GiB, before its optim.dtype bf16 and NeMo 1's 16-bit master remainders: 65.8 GiB now).
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_nemo_h100_fp8.json" >"$tmp/nemo.json" 2>/dev/null; check "check set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/nemo.json')); o=d['overall']
assert o['records']==23 and o['predicted']==23 and o['median_abs_step_error'] <= 0.09, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]" ; check "check set within its guard" $?
# torchtitan's own H100 benchmarks: Tables 1 and 3 (FSDP, eager and compiled, BF16 and Float8) and Tables 2, 4-6
# (CP, TP, PP: 8B to 405B on 8-512 GPUs), and the June 2025 async-TP benchmark (70B on 256 GPUs and 8B on 64,
# vanilla and async TP, BF16 and Float8); measured 4.6% median step error, max 20.2% (5.2% / 22.7% before PyTorch's
# ring carried torchtitan's repeated K and V and fp32 gradients, 2026-12-07; 14.6% before the 500 W limit moved the
# power curve, 2026-11-30), 4.3% median peak-memory error (3.3% when every last-stage peak summed the loss's backward
# with the last layer's, docs/validation.md), every run predicted to fit; the 405B's context-parallel rows over RoCE
# -2.7% / +4.0% / -5.7% at cp 2 / 4 / 8 (-11..-23% before the ring's traffic was PyTorch's).
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_torchtitan_h100.json" >"$tmp/tt.json" 2>/dev/null; check "torchtitan set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/tt.json')); o=d['overall']
assert o['records']==26 and o['median_abs_step_error'] <= 0.055, o
assert o['max_abs_step_error'] <= 0.23, o
cp405 = {r['id']: r['step_error'] for r in d['results'] if r['id'].startswith('tt-405b-512gpu-cp') and not r['id'].endswith('cp1-seq32k')}
assert len(cp405) == 3 and all(abs(e) <= 0.10 for e in cp405.values()), cp405
assert o['median_abs_memory_error'] <= 0.06, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]" ; check "torchtitan set within its guard" $?
# torchtitan's June 2025 Llama 3.1 8B runs on 32 and 64 H200 (compile, float8, selective recompute): a 700 W part,
# a compiled loss; measured -3.7% / -4.6% step, +3.8% / +2.0% peak (was +36% with the loss read as eager).
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_torchtitan_h200.json" >"$tmp/tt200.json" 2>/dev/null; check "torchtitan H200 set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/tt200.json')); o=d['overall']
assert o['records']==2 and o['max_abs_step_error'] <= 0.07, o
assert o['median_abs_memory_error'] <= 0.06, o" ; check "torchtitan H200 set within its guard" $?
# KempnerForge's 2026 reports (FSDP2 + DTensor TP, torch.compile, 1-160 H200 on nodes of 4; docs/validation.md): a
# framework tessel had not read, never fitted; measured 7.9% median, 19.7% max (70B on 8 GPUs, read from its log as
# it ran: one sequence a micro-batch, eight of them, eager; -35.1% when read as the campaign's 2 x 4 compiled),
# every record read with the HGX 4-GPU board's NVLink mesh; peaks (rank 0's max_memory_allocated) 3.3% at the median
# (47.7% low before its gathered logits, whole embedding, eager 16-bit loss and fp32 no-sync gradients were costed;
# 7.9% before the last stage's two moments, the logits held through the backward and FSDP2 over one rank at TP only);
# the 7B on one GPU, compiled whole with no FSDP, -4.9% with its backward's gradients returned at once (-13.5% before);
# DTensor's sequence-parallel copies (2026-12-07) took the max to 17.9% (8.4% median, the 13B rows slower).
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_kempnerforge_h200.json" >"$tmp/kf.json" 2>/dev/null; check "KempnerForge set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/kf.json')); o=d['overall']
assert o['records']==25 and o['predicted']==25 and o['median_abs_step_error'] <= 0.10 and o['max_abs_step_error'] <= 0.21, o
pre = [r for r in d['results'] if r['id'] == 'kf2606-70b-8gpu-tp4-fsdp2'][0]
f, i = pre['record'].split('#/')
assert ' mb1 gb16 ' in ' ' + pre['plan'] + ' ' and json.load(open(f))[int(i)]['plan']['compile'] is False, pre
one = [r for r in d['results'] if r['id'] == 'kf2604-7b-1gpu'][0]
f, i = one['record'].split('#/')
assert json.load(open(f))[int(i)]['plan']['compile_whole_model'] is True and -0.08 <= one['memory_error'] <= 0.0, one
assert o['median_abs_memory_error'] <= 0.05 and all(r['predicted_fits'] for r in d['results']), o
assert sum('HGX 4-GPU board' in ' '.join(r['assumptions']) for r in d['results']) == 25, 'every record: 4 GPUs a node'" ; check "KempnerForge set within its guard" $?
# The Llama 3 paper's 405B pre-training stages (Table 4: TP 8 x PP 16 with 126 layers, FSDP that does not reshard
# after forward under its pipeline, CP 16 at 128K on 16384 H100; arXiv:2407.21783), never fitted: measured -0.5% and
# +6.2% at 8K, -13.1% at 128K; +74.5% / +42.2% / +14.5% while the generic framework regathered every micro-batch.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_llama3_405b_paper.json" >"$tmp/llama3.json" 2>/dev/null; check "Llama 3 paper set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/llama3.json')); r={x['id']:x for x in d['results']}
assert len(r)==3 and all(x['step_error'] is not None for x in r.values()), r.keys()
assert all(abs(x['step_error']) <= 0.10 for k,x in r.items() if '-cp1-' in k), {k:x['step_error'] for k,x in r.items()}
assert all(abs(x['step_error']) <= 0.16 for x in r.values()), {k:x['step_error'] for k,x in r.items()}
assert all(x['dominant_term'] == 'compute' for x in r.values()), {k:x['dominant_term'] for k,x in r.items()}
assert all('pipeline split as stated (ends_as_layers)' in ' '.join(x['assumptions']) for x in r.values())" ; check "Llama 3 paper set within its guard" $?
# Megatron-Bridge's Qwen3 MoE rows on H100 (26.02-26.04.01 tables, FP8; check_megatron_bridge_moe_h100.json), never
# fitted and not explained: the 30B-A3B on 16 GPUs (HybridEP) -32.3% / -31.9%, the 235B-A22B on 256 (the all-to-all
# under batch-level overlap) +22.5% to +30.2% (docs/validation.md, "Megatron-Bridge's Qwen3 MoE on H100"); and the
# repository's own A/B of the batch-level overlap on the 30B in BF16 (2026-07-25), off -15.6%, on -4.1%, where tessel
# saves 3.4% of the step and the run 15.1% ("The batch-level overlap, switched alone"). The guard holds today's
# figures with a margin, and the overlap must save something; they are in the MoE band, which MoE plans are shown.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_megatron_bridge_moe_h100.json" >"$tmp/mbmoe.json" 2>/dev/null; check "Megatron-Bridge MoE set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/mbmoe.json')); r={x['id']:x['step_error'] for x in d['results']}
assert len(r)==8 and all(v is not None for v in r.values()), r
assert all(abs(v) <= 0.33 for k,v in r.items() if '30b' in k and 'fp8' in k), r
assert all(abs(v) <= 0.33 for k,v in r.items() if '235b' in k), r
assert abs(r['mb-skill-h100-qwen3-30b-a3b-bf16-16-epoverlap-off']) <= 0.18, r
assert abs(r['mb-skill-h100-qwen3-30b-a3b-bf16-16-epoverlap-on']) <= 0.08, r
p={x['id']:x['predicted_step_seconds'] for x in d['results']}
assert p['mb-skill-h100-qwen3-30b-a3b-bf16-16-epoverlap-on'] < p['mb-skill-h100-qwen3-30b-a3b-bf16-16-epoverlap-off'], p" ; check "Megatron-Bridge MoE set within its guard" $?
# MLPerf Training's NVIDIA-stack submissions (check_mlperf_training.json: GPT-3 175B v3.0-v4.1, Llama 3.1 405B
# v5.0 and v5.1's FP8 rows, Nebius's H200 -0.7% / -0.4% with peaks -0.1%, the University of Florida's B200 +4.5% /
# +3.3%; step times from the logs' training blocks, peaks from mlperf-common's max_memory_usage), never fitted:
# GPT-3 -8.1% .. +9.8%, the 405B on H100 -1.3% .. -4.5% (peaks +0.3%), on GB200 -6.3% .. -11.9% (peaks -1.4% ..
# +4.6% since Blackwell's FP8 weights carry no transpose; +10.6% .. +16.5% before, docs/validation.md "MLPerf
# Training"). v5.1's twenty FP8 Llama 3.1 8B rows (one micro-batch a step, 8-512 GPUs of six kinds): Cisco's two
# H100 rows over RoCE -15.3% / -30.6% (peaks -6.1% / -6.2%), the B200 and B300 single-micro-batch rows of two
# sequences -2.6% .. -7.3%, the context-parallel B200 rows +7.2% .. +17.3%, HPE's H200 -1.8%, GB200 and GB300 -14.7%
# .. +8.5% (with Blackwell's memory-bound kernels at 0.75 of the HBM). v3.0's five GPT-3 rows (NeMo 1.17, TE 0.8,
# FlashAttention-1; 512-3584 H100 of NVIDIA and CoreWeave) -3.7% .. -7.5%. The guard holds today's figures with a margin.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_mlperf_training.json" >"$tmp/mlperf.json" 2>/dev/null; check "MLPerf set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/mlperf.json')); r={x['id']:x for x in d['results']}
assert len(r) == 57 and all(x['step_error'] is not None for x in r.values()), len(r)
big = {k:x for k,x in r.items() if '-8b-' not in k}
small = {k:x for k,x in r.items() if '-8b-' in k}
assert len(small) == 20, len(small)
assert all(abs(x['step_error']) <= 0.12 for k,x in big.items() if 'gpt3' in k), {k:x['step_error'] for k,x in big.items() if 'gpt3' in k}
assert all(abs(x['step_error']) <= 0.07 for k,x in big.items() if 'eos-dfw-llama31' in k or 'mlperf51' in k), {k:x['step_error'] for k,x in big.items()}
assert all(abs(x['step_error']) <= 0.14 for x in big.values()), {k:x['step_error'] for k,x in big.items()}
assert all(abs(x['step_error']) <= 0.20 for k,x in small.items() if 'cisco' not in k), {k:x['step_error'] for k,x in small.items()}
assert all(abs(x['step_error']) <= 0.34 for x in small.values()), {k:x['step_error'] for k,x in small.items()}
assert all(abs(x['memory_error']) <= 0.02 for k,x in big.items() if 'eos-dfw-llama31' in k or 'h200' in k), {k:x['memory_error'] for k,x in big.items()}
assert all(abs(x['memory_error']) <= 0.07 for k,x in r.items() if x.get('memory_error') is not None), {k:x['memory_error'] for k,x in r.items()}
assert all(x['predicted_fits'] for x in r.values()), [k for k,x in r.items() if not x['predicted_fits']]" ; check "MLPerf set within its guard" $?
# NVFP4 on Blackwell (check_nvfp4_blackwell.json: MLPerf v5.1's thirteen Llama 3.1 8B rows and NVIDIA's four 405B rows,
# Megatron-Bridge's seventeen 70B / 405B rows on GB300 and GB200), never fitted: the 8B rows +0.9% .. +8.5%, the
# MLPerf 405B rows -4.9% .. +8.2%, Megatron-Bridge's -14.4% .. +24.8% (its GB200 405B rows at pp 16 x vp 8 carry
# 5-7 s of exposed pipeline sends between racks; docs/validation.md "NVFP4 on Blackwell"); median 6.3%. The guard holds today's
# figures with a margin, and every row is predicted to fit.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_nvfp4_blackwell.json" >"$tmp/nvfp4.json" 2>/dev/null; check "NVFP4 set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/nvfp4.json')); r={x['id']:x for x in d['results']}; o=d['overall']
assert len(r) == 34 and o['predicted'] == 34 and all(x['step_error'] is not None for x in r.values()), o
assert all('NVFP4 as Transformer Engine runs it' in ' '.join(x['assumptions']) for x in r.values())
assert all(abs(x['step_error']) <= 0.10 for k,x in r.items() if k.startswith('mlperf51')), {k:x['step_error'] for k,x in r.items()}
assert all(abs(x['step_error']) <= 0.27 for x in r.values()), {k:x['step_error'] for k,x in r.items()}
assert o['median_abs_step_error'] <= 0.08, o
assert all(x['predicted_fits'] for x in r.values()), [k for k,x in r.items() if not x['predicted_fits']]" ; check "NVFP4 set within its guard" $?
# AI2's OLMo-core throughput table (2024-09 to 2024-11; OLMo 2 1B/7B/13B and a Llama 3 8B shape, BF16 and torchao
# Float8, FSDP2 and torch.compile on one 8-GPU H100 node): a framework tessel had not read, never fitted; measured
# 4.1% median, 12.3% max (the 13B Float8 row), mean -1.0%.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_olmo_core_h100.json" >"$tmp/olmo.json" 2>/dev/null; check "OLMo-core set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/olmo.json')); o=d['overall']
assert o['records']==8 and o['predicted']==8 and o['median_abs_step_error'] <= 0.05 and o['max_abs_step_error'] <= 0.14, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]
assert all('OLMo-core read as torchtitan' in ' '.join(r['assumptions']) for r in d['results'])" ; check "OLMo-core set within its guard" $?
# NVIDIA's DGX Cloud 405B recipe of 25.05 on GB200 and H100 (one recipe, two GPUs): measured H100 -5.4% / -4.0%,
# GB200 -11.7..-14.9% (BF16) and -16.1..-20.5% (FP8); the guard holds the H100 rows and the GB200 spread.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_dgxc_405b_2505.json" >"$tmp/dgxc2505.json" 2>/dev/null; check "DGX Cloud 405B 25.05 set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/dgxc2505.json')); r={x['id']:x['step_error'] for x in d['results']}
assert len(r)==8, r
assert all(abs(v) <= 0.07 for k,v in r.items() if '-h100-' in k), r
assert all(abs(v) <= 0.23 for k,v in r.items() if '-gb200-' in k), r" ; check "DGX Cloud 405B 25.05 set within its guard" $?
# The MPT rows the shared set does not hold (158, scripts/mpt_check_set.py; measured 3.2% median, 24.3% max;
# per-size medians within 4.5%; every one predicted to fit since flash-attn's loss is read as llm-foundry runs it):
# what the shared rows taught, on other sizes.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_mpt_llm_foundry.json" >"$tmp/mpt.json" 2>/dev/null; check "MPT set exits 0" $?
python3 -c "
import json, re, statistics
d=json.load(open('$tmp/mpt.json')); o=d['overall']
assert o['records']==158 and o['predicted']==158 and o['median_abs_step_error'] <= 0.05 and o['max_abs_step_error'] <= 0.28, o
# every run ran, so every run must be predicted to fit
unfit = [r['id'] for r in d['results'] if not r['predicted_fits']]
assert not unfit, unfit
by={}
for r in d['results']: by.setdefault(re.match(r'mpt-\w+?-(\w+)-seq', r['id']).group(1), []).append(r['step_error'])
assert all(abs(statistics.median(v)) <= 0.055 for v in by.values()), {k: statistics.median(v) for k, v in by.items()}" ; check "MPT set within its guard, per model size too" $?
# Megatron-LM's own H100 weak-scaling table (9 GPT runs, 1.7B-462B on 48-6144 GPUs; measured 7.0% median,
# 23.4% max: the 32B run at dp 48, too slow; every run predicted to fit) and the two ends of its strong-scaling
# text (177B on 96 and 4608 GPUs, -16.4% / -5.8%). Its pipelined runs name no schedule and are read as
# interleaved, as Megatron-LM runs the pipeline overlap the README states (6.6% median as 1F1B).
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_megatron_lm_h100.json" >"$tmp/mlm.json" 2>/dev/null; check "Megatron-LM set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/mlm.json')); o=d['overall']
assert o['records']==11 and o['predicted']==11 and o['median_abs_step_error'] <= 0.09 and o['max_abs_step_error'] <= 0.25, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]" ; check "Megatron-LM set within its guard" $?
# The Nemotron-4 340B technical report's batch ramp-up (Table 2: 1536-6144 H100, tp 8 x pp 12 interleaved, the
# iteration time and MFU of each size), never fitted: measured +0.3..+0.4%.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_nemotron4_340b_h100.json" >"$tmp/nemotron.json" 2>/dev/null; check "Nemotron-4 340B set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/nemotron.json')); o=d['overall']
assert o['records']==3 and o['predicted']==3 and o['max_abs_step_error'] <= 0.03, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]" ; check "Nemotron-4 340B set within its guard" $?
# NeMo's long-sequence tables (context parallelism, 4K-1M tokens; Llama 2 7B on 4-1024 H100, Llama 3 8B on 8-256
# B200, FP8), never fitted: measured 7.1% median, 33.4% max, every run predicted to fit without recompute, as NeMo's
# recipes run them. The H100 rows (NeMo 24.03.01, flash-attn 2 under its launcher's NVTE_FUSED_ATTN=0) split at the
# context-parallel ring over the network: cp 1-2 within -2..+8%, cp 4-32 (the ring across nodes) 26-34% slow; the
# B200 rows within -17..+8% (docs/validation.md, "NeMo's launcher ran FlashAttention-2").
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_nemo_long_context.json" >"$tmp/longseq.json" 2>/dev/null; check "NeMo long-context set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/longseq.json')); o=d['overall']
assert o['records']==17 and o['predicted']==17 and o['median_abs_step_error'] <= 0.09 and o['max_abs_step_error'] <= 0.36, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]
h100 = [r['step_error'] for r in d['results'] if 'llama2' in r['id']]
b200 = [r['step_error'] for r in d['results'] if 'llama3' in r['id']]
assert len(h100) == 9 and all(-0.03 <= e <= 0.09 for e in h100[:5]) and all(0.24 <= e <= 0.36 for e in h100[5:]), h100
assert len(b200) == 8 and all(-0.17 <= e <= 0.08 for e in b200), b200" ; check "NeMo long-context set within its guard" $?
# DGX Cloud's Grok-1 314B recipe (NeMo 24.12, a mixture of experts: 8 experts, top-2, ep 2-8; BF16 and FP8 on 8-2048
# H100), never fitted: measured 6.4% median, 23.6% max (4.3% before 2026-12-04, when the cp 2 runs took NeMo 24.12's
# Megatron-core 0.10 expert layout, EP over CP ranks first: 1.9-2.6% faster; 8.7% median, 22.2% max since the
# presets' all-to-all shares are NVIDIA's measured ones, 2026-12-07: 2-3 points faster). The runs of 128 GPUs and more
# (16-64 layers, pp 2-8 with virtual stages) within 11%; the small proxies of 2-8 layers without a pipeline (8-64 GPUs)
# 9-23% fast, about the same seconds a micro-batch in BF16 and FP8. Every run predicted to fit.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_dgxc_grok1_moe.json" >"$tmp/grok.json" 2>/dev/null; check "Grok-1 MoE set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/grok.json')); o=d['overall']
assert o['records']==18 and o['predicted']==18 and o['median_abs_step_error'] <= 0.10 and o['max_abs_step_error'] <= 0.26, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]
big = [r['step_error'] for r in d['results'] if int(r['id'].split('-')[3]) >= 128]
small = [r['step_error'] for r in d['results'] if int(r['id'].split('-')[3]) < 128]
assert len(big) == 10 and all(abs(e) <= 0.12 for e in big), big
assert len(small) == 8 and all(-0.26 <= e <= -0.04 for e in small), small" ; check "Grok-1 MoE set within its guard" $?
# NeMo AutoModel's H100 benchmarks (PyTorch FSDP2, docs/validation.md "NeMo AutoModel"), never fitted: Qwen3-30B-A3B
# on 8 GPUs with DeepEP and the benchmark's balanced gate within 8% (+25% before DeepEP's per-rank dispatch was
# costed, 2026-12-04), DeepSeek-V3 on 256 GPUs within 15% and fitting (predicted out of memory at 99.5 GiB before its
# bf16 parameters and Adam state were read), the dense Llama 3.1 70B on 64 GPUs (FSDP2 over dp 32 x cp 2) 18% slow on
# its exposed gathers (its ring at the 8 kv heads, repeat_kv false: +23.5% with them repeated, 2026-12-07); all read
# (none refused) and fitting.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_automodel_h100.json" >"$tmp/automodel.json" 2>/dev/null; check "AutoModel set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/automodel.json')); o=d['overall']
assert o['records']==3 and o['predicted']==3, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]
e = {r['id']: r['step_error'] for r in d['results']}
assert abs(e['automodel-qwen3-moe-30b-8gpu']) <= 0.08, e
assert abs(e['automodel-deepseek-v3-256gpu']) <= 0.15, e
assert 0.0 <= e['automodel-llama31-70b-64gpu'] <= 0.20, e" ; check "AutoModel set within its guard" $?
# LUMI's ReFrame references for ROCm Megatron-LM's Llama 2 7B on 16-128 MI250X GCDs (the first AMD runs; their
# records count GCDs): the frontier-mi250x preset, from AMD's and LUMI's figures, never fitted, predicts them 18-21%
# fast at every scale (19-22% before their --no-gradient-accumulation-fusion was costed) (docs/validation.md "AMD Instinct"). Guarded so that they stay read (none refused, the GCDs
# counted, every run fitting) and their scaling flat: within 16-25% fast, the three within 4 points of each other.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_lumi_megatron_mi250x.json" >"$tmp/lumi.json" 2>/dev/null; check "LUMI MI250X set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/lumi.json')); o=d['overall']
assert o['records']==3 and o['predicted']==3, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]
e = [r['step_error'] for r in d['results']]
assert all(-0.25 <= x <= -0.16 for x in e) and max(e) - min(e) <= 0.04, e" ; check "LUMI MI250X set within its guard" $?
# Megatron-LM's own memory-and-speed CI runs (a 7B GPT at tp1 pp4 with 8 virtual stages and at tp4 pp1 on 8 H100,
# GB200 and A100; docs/validation.md "Megatron-LM's own memory"): the last rank's allocated peak within 2.5% on each
# (-2.3% at worst, the tp4 pp1 rows, since the last stage's peak is one of its two moments),
# the deterministic mode's step kept out of the comparison and said, every run fitting.
"$TESSEL" validate --json --assumptions "$(dirname "$0")/../../data/validation/check_megatron_functional_memory_speed.json" >"$tmp/mlmft.json" 2>/dev/null; check "Megatron-LM functional set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/mlmft.json')); rs=d['results']
assert len(rs)==6 and all(r['predicted'] and r['step_error'] is None for r in rs), rs
assert all(abs(r['memory_error']) <= 0.025 for r in rs), [(r['id'], r['memory_error']) for r in rs]
assert all(r['predicted_fits'] for r in rs)
assert all(any('not compared: plan/deterministic' in a for a in r['assumptions']) for r in rs)
assert all(any('compared on pipeline stage ' + ('3' if 'pp4' in r['id'] else '0') in a for a in r['assumptions']) for r in rs)" ; check "Megatron-LM functional set within its guard" $?
# NVIDIA's own B200 runs (Megatron-Bridge 25.09 / 25.11, FP8; docs/validation.md): the dgx-b200 preset from the
# datasheet, the MAMF table and Hopper's power curve (its full-load end confirmed on a B200), never fitted,
# predicts them 8-13% fast (the H100 FP8 runs of the same tables: 2-16%). Guarded at 15%, every run fitting.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_megatron_bridge_b200_fp8.json" >"$tmp/b200.json" 2>/dev/null; check "B200 set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/b200.json')); o=d['overall']
assert o['records']==4 and o['predicted']==4 and o['max_abs_step_error'] <= 0.15, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]" ; check "B200 set within its guard" $?
# The GB200 NVL72 rows of the same tables (25.09, 25.11, 26.02; 8 runs): 7-14% fast, as the B200's (guard 16%). The Megatron
# FSDP ones offload 40 (70B) and 95 (405B) layers' activations to Grace (offload_activation_layers, from the
# recipes' GB200 entries); every run ran, so every run must be predicted to fit.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_megatron_bridge_gb200_fp8.json" >"$tmp/gb200.json" 2>/dev/null; check "GB200 set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/gb200.json')); o=d['overall']
assert o['records']==8 and o['predicted']==8 and o['max_abs_step_error'] <= 0.16, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]" ; check "GB200 set within its guard" $?
# The DGX-GB300 rows of the same tables (25.11, 26.02; 5 dense FP8 runs) on gb300-nvl72, a preset of datasheet and
# benchmark figures never fitted to them: measured within 8% (median 5.4%, +2.7..+7.7% slow, one -2.7%); guard 10%.
# Each ran, so each must be predicted to fit (the 70B offloads 20 layers' activations to Grace, the GB300 entry's).
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_megatron_bridge_gb300_fp8.json" >"$tmp/gb300.json" 2>/dev/null; check "GB300 set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/gb300.json')); o=d['overall']
assert o['records']==5 and o['predicted']==5 and o['max_abs_step_error'] <= 0.10, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]" ; check "GB300 set within its guard" $?
# Megatron-Bridge's 2026 tables (26.02-26.06; scripts/megatron_bridge_2026_check_set.py): 34 dense Llama rows on
# GB300, GB200 and H100 in FP8 (current scaling) and MXFP8, none fitted (the GB300's 1400 W was costed before they
# were read: its 15 rows 6.9% -> 5.0% at the median). Measured 5.5% median, 18.2% max; guard 20%. The GB200's
# 405B MXFP8 plan (pp 16 x vp 8 = 128 virtual stages for 126 layers, the embedding and the loss counted as
# layers, so each has a virtual stage of its own) is read as 0,1x126,0 (-3.6..-6.6%; not predicted before 2026-12-02).
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_megatron_bridge_2026.json" >"$tmp/mb26.json" 2>/dev/null; check "Megatron-Bridge 2026 set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/mb26.json')); o=d['overall']
assert o['records']==34 and o['predicted']==34 and o['max_abs_step_error'] <= 0.20, o
ends=[r for r in d['results'] if 'gb200-llama31-405b-mxfp8' in r['id']]
assert len(ends)==5 and all(any('(0,1x126,0)' in a for a in r['assumptions']) and abs(r['step_error']) <= 0.10 for r in ends), ends
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]" ; check "Megatron-Bridge 2026 set within its guard" $?
# NVIDIA's DGX Cloud benchmarking recipes on H100 (24 runs: Llama 3.1 8B/70B/405B, Nemotron-4 15B/340B, GPT-3 175B,
# BF16 and FP8, at the smallest and largest GPU count of each table; measured 7.1% median, 15.4% max). Every run
# ran, so every run must be predicted to fit (the 340B FP8 one on 128 GPUs was 87.3 GiB before its recipe's FP8
# parameters, bf16 optimizer state and NeMo 1's master remainders were read: 61.5 GiB).
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_dgxc_h100.json" >"$tmp/dgxc.json" 2>/dev/null; check "DGX Cloud set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/dgxc.json')); o=d['overall']
assert o['records']==24 and o['predicted']==24 and o['median_abs_step_error'] <= 0.09 and o['max_abs_step_error'] <= 0.18, o
assert all(r['predicted_fits'] for r in d['results']), [r['id'] for r in d['results'] if not r['predicted_fits']]" ; check "DGX Cloud set within its guard" $?
# DGX Cloud's MaxText (JAX/XLA) recipes on 64-2048 H100 (22 runs: Llama 2 70B at 4k and Llama 3 70B at 8k, FSDP,
# BF16 and FP8; docs/validation.md "MaxText under XLA"): read from their remat_policy (v25.01's custom policy as
# core_attn and mlp, v25.02's save_qkv_proj as full recompute, both stopping before fc2), the framework generic and
# its runs of the sharded-data-parallel kind. Every run ran, so every run predicted to fit; the Llama 3 BF16 rows
# 4-7% slow, the Llama 2 BF16 rows 15-16% slow (the contention share of their FSDP traffic) and the FP8 rows 14-30%
# slow (Transformer Engine's FP8 costs for XLA's fused casts), as measured when the set was written.
"$TESSEL" validate --json --assumptions "$(dirname "$0")/../../data/validation/check_dgxc_maxtext_h100.json" >"$tmp/maxtext.json" 2>/dev/null; check "MaxText set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/maxtext.json')); o=d['overall']; rs=d['results']
assert o['records']==22 and o['predicted']==22, o
assert all(r['predicted_fits'] for r in rs), [r['id'] for r in rs if not r['predicted_fits']]
assert all(any('read from remat_policy \"custom\"' in a and 'rerun: core_attn and mlp' in a for a in r['assumptions']) for r in rs if '-2-70b-' in r['id'])
assert all(any('recompute full read from remat_policy \"save_qkv_proj\"' in a for a in r['assumptions']) for r in rs if '-3-70b-' in r['id'])
e = {r['id']: r['step_error'] for r in rs}
assert all(0.0 <= v <= 0.10 for k, v in e.items() if '-3-70b-' in k and k.endswith('bf16')), e
assert all(0.12 <= v <= 0.19 for k, v in e.items() if '-2-70b-' in k and k.endswith('bf16')), e
assert all(0.10 <= v <= 0.34 for k, v in e.items() if k.endswith('fp8')), e" ; check "MaxText set within its guard" $?
# BigScience's BLOOM runs on Jean Zay (DeepSpeed's pipeline engine with Megatron's tensor parallelism, bf16
# optimizer, blocking launches, Megatron's default dropout of 0.1; nine topologies of 2022-02-28 and the 176B training
# log): predicted 7-17% fast (median 9.2%; 10.9% with the records' dropout read as 0, 13.3% before the blocking
# launches were costed), memory 2-8% under nvidia-smi's (4-11% without the dropout masks, 20-26% before the BF16
# optimizer's whole-gradient copy for its all-reduce and the allocator's segment for it, 9-16% before NCCL's own
# buffers; docs/validation.md).
# Every run that ran must be predicted to fit, and the two tp 4 x pp 6 x dp 16 runs that ran out of memory the same
# day not to (86.1 and 86.3 GiB of 80); the third (14336 x 82 layers, 68.5 GiB reserved predicted, as much on stage 0
# as the 13312 x 94 run that ran at 67) is a miss shipped and named. Their peaks are within -5% .. +1% since BLOOM's
# norm over the embedding (2026-12-05). Their DeepSpeed pipeline band is their own.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_bigscience_bloom.json" >"$tmp/bloom.json" 2>/dev/null; check "BLOOM set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/bloom.json')); o=d['overall']
ran = [r for r in d['results'] if r['measured_step_seconds']]
assert o['records']==13 and len(ran)==10 and o['median_abs_step_error'] <= 0.11 and o['max_abs_step_error'] <= 0.19, o
assert all(r['predicted_fits'] for r in ran), [r['id'] for r in ran if not r['predicted_fits']]
assert sum(r['measured_out_of_memory'] is True for r in d['results']) == 3
oom = sorted(r['id'] for r in d['results'] if r['measured_out_of_memory'] and not r['predicted_fits'])
assert oom == ['bloom-prequel-h12288-l100-tp4-pp6-dp16-mbs1-oom', 'bloom-prequel-h12288-l100-tp4-pp6-dp16-mbs2-oom'], oom
mem = [r['memory_error'] for r in ran if r['memory_error'] is not None]
assert len(mem) == 9 and all(-0.06 <= e <= 0.01 for e in mem), mem
assert [b['kind'] for b in d['error_bands']['kinds'] if b['kind'].endswith('DeepSpeed pipeline')] == ['A100 / DeepSpeed pipeline'], d['error_bands']" ; check "BLOOM set within its guard" $?
# BigScience's fp16 ZeRO-1 rounds before BLOOM (2022-02-17 to 02-27, chronicles-prequel.md; 75 runs, 45 with
# nvidia-smi's memory): predicted 1-34% fast as every DeepSpeed pipeline source is (median 12.6%; 15.6% before ZeRO-1's
# all-reduce of 2021-2023, 17.0% with the records' dropout read as 0), memory 8-23% under nvidia-smi's with ZeRO-1's step-time copies of the gradient partition
# (19-32% under without them), 2-17% with NCCL's own buffers (FORMULAS.md §2), 0-14% with the dropout masks, +2% ..
# -12% with BLOOM's norm over the embedding, +6% .. -10% with ZeRO-1's reduce bucket, but one snapshot that reads 65 GB
# at micro-batch 2 beside 56 GB at 4 (-32%). Every run ran, so every one must be predicted to fit. The head-count rounds
# (02-23/24/26) ran one 182B job at 96 and 128 heads (head dimension 144 and 108); the A100's per-head unaligned GEMM
# figure is derived from those four pairs (scripts/a100_unaligned_head_fit.py), so each 128-head row must sit within 3
# points of its 96-head twin. The 02-17 rows at hidden 14400 (heads of 450 and 150, not in that fit) were -25..-30% before
# the figure; the one-node row (20B, tp 8, no pipeline, no network) is now -5.0% (memory -1.0%) and must stay within 10%.
# Unexplained and kept: 112 heads at hidden 14336 and 96 at 12288 (-24%, -26%: head dimension 128, aligned) and the
# 02-26 micro-batch-1 row (-34%). The 02-25 rounds (global batches 1568-2048, tp 1-8, pp 1-48) add 22 runs and three
# that ran out of memory: two predicted so, the third (tp 2 x pp 6, micro-batch 1) predicted at 79.5 of 80 GiB, fitting.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_bigscience_zero1.json" >"$tmp/z1.json" 2>/dev/null; check "BigScience ZeRO-1 set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/z1.json')); o=d['overall']
assert o['records']==78 and o['predicted']==75 and o['median_abs_step_error'] <= 0.14 and o['max_abs_step_error'] <= 0.37, o
ran = [r for r in d['results'] if not r['measured_out_of_memory']]
assert all(r['predicted_fits'] for r in ran), [r['id'] for r in ran if not r['predicted_fits']]
oom = sorted(r['id'] for r in d['results'] if r['measured_out_of_memory'] and not r['predicted_fits'])
assert oom == ['bigscience-02-25-h14336-l72-a64-tp2-pp6-dp32-mbs2-oom', 'bigscience-02-25-h14336-l72-a64-tp8-pp1-dp48-mbs1-gbs2016-oom'], oom
mem = sorted(r['memory_error'] for r in ran if r['memory_error'] is not None)
# the one low outlier (65 GB at micro-batch 2 beside 56 at 4) and the one high (the same plan run twice, 44 and 38 GB)
assert len(mem) == 45 and mem[0] < -0.3 and mem[-1] > 0.2 and all(-0.12 <= e <= 0.07 for e in mem[1:-1]), mem
err = {r['id']: r['step_error'] for r in d['results']}
for day, plan in [('02-23', 'tp8-pp6-dp8-mbs4'), ('02-26', 'tp4-pp12-dp8-mbs2'), ('02-26', 'tp4-pp12-dp8-mbs4'), ('02-26', 'tp8-pp6-dp8-mbs4')]:
    a96, a128 = (err[f'bigscience-{day}-h13824-l78-a{h}-{plan}'] for h in (96, 128))
    assert abs(a128 - a96) <= 0.03, (day, plan, a96, a128)
one = [r for r in d['results'] if r['id'] == 'bigscience-02-17-h14400-l8-a32-tp8-pp1-dp1-mbs1']
assert len(one) == 1 and -0.10 <= one[0]['step_error'] <= 0.0 and abs(one[0]['memory_error']) <= 0.05, one" ; check "BigScience ZeRO-1 set within its guard" $?
# GPT-NeoX-20B's training (DeepSpeed's pipeline engine again, fp16, tp 2 x pp 4 on 96 A100 40 GB): 117 teraFLOPS per
# GPU with the codebase's own FLOP count, predicted 23.3% fast (its parallel block reduced once over TP), as the BLOOM
# and MT-NLG runs are; it shares their band.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_eleutherai_gpt_neox.json" >"$tmp/neox.json" 2>/dev/null; check "GPT-NeoX set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/neox.json')); o=d['overall']
assert o['records']==1 and o['predicted']==1 and o['max_abs_step_error'] <= 0.26, o
assert all(r['predicted_fits'] for r in d['results'])
assert [b['kind'] for b in d['error_bands']['kinds'] if b['kind'].endswith('DeepSpeed pipeline')] == ['A100 / DeepSpeed pipeline'], d['error_bands']" ; check "GPT-NeoX set within its guard" $?
# Megatron-LM of 2019 on V100s (DGX-2H): the 1.2B single-GPU baseline (39 TFLOP/s) and the 8.3B on 512 GPUs
# (15.1 PFLOP/s), fp16 on Volta (half_dtype), unfused attention as the code of the time ran it. The FLOP count behind
# the figures is not printed: read with tessel's model count, -8% and +8%; with the hardware count, -31% and -19%.
# Both must be predicted (a V100 record was refused before the presets) and fit.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_megatron_lm_2019_v100.json" >"$tmp/v100.json" 2>/dev/null; check "Megatron-LM 2019 V100 set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/v100.json')); o=d['overall']
assert o['records']==2 and o['predicted']==2 and o['max_abs_step_error'] <= 0.12, o
assert all(r['predicted_fits'] for r in d['results'])" ; check "Megatron-LM 2019 V100 set within its guard" $?
# DeepSpeed ZeRO-3 as pure data parallelism on Azure NDm A100 v4 (the DeepSpeed team's 2022 blog: 175B at 204.49
# TFLOP/s on 256 GPUs, 1T at 165.36 on 1024 with CPU optimizer offload; Megatron's formula, recompute counted):
# predicted 11% and 24% fast; both ran, and both are predicted to fit: the 1T run with its activation checkpoints in
# host memory (the blog's setup) and DeepSpeed's module-by-module gathering (docs/validation.md); without the
# offload its 128 checkpointed inputs alone are 50 GiB, and it is predicted not to fit.
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_deepspeed_azure_zero3.json" >"$tmp/dsaz.json" 2>/dev/null; check "DeepSpeed Azure ZeRO-3 set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/dsaz.json')); o=d['overall']; r={x['id']: x for x in d['results']}
assert o['records']==2 and o['predicted']==2 and o['max_abs_step_error'] <= 0.26, o
assert r['ds-azure-175b-256gpu-seq512-mb32']['predicted_fits']
assert r['ds-azure-1t-1024gpu-mb8']['predicted_fits'], r['ds-azure-1t-1024gpu-mb8']" ; check "DeepSpeed Azure ZeRO-3 set within its guard" $?
python3 - "$(dirname "$0")/../../data/validation/check_deepspeed_azure_zero3.json" "$tmp/dsaz-no-offload.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))
for r in runs:
    r["plan"].pop("offload_activations", None)
json.dump([r for r in runs if "1t" in r["id"]], open(sys.argv[2], "w"))
PY
"$TESSEL" validate --json "$tmp/dsaz-no-offload.json" >"$tmp/dsaz-no-offload-out.json" 2>/dev/null
python3 -c "
import json; d=json.load(open('$tmp/dsaz-no-offload-out.json')); r=d['results'][0]
assert not r['predicted_fits'], r" ; check "DeepSpeed 1T at micro-batch 8 does not fit without its activation offload" $?
# PyTorch on one H100 and one H200, measured by tessel (docs/validation.md), read as autocast over fp32
# parameters (recipe amp). Eager runs multiply by GPT-2's 50257-word vocabulary unpadded, on cuBLAS's unaligned
# fallback (-40% before that term); torch.compile pads it (-1%, +10%: its fused loss moves fewer bytes than
# tessel's). At micro-batch 8 the eager runs' layers are shorter than their launches: the host-bound floor
# (FORMULAS.md §3.8) takes them from -15% / -23% to +2% / -3% (H100 / H200); micro-batch 32 eager stays -10% / -12%.
# The H200's compiled micro-batch 8 run also waits on the host (GPU busy 19 of 27 ms, torch-profile/), for which no
# host time a compiled kernel is measured: -25%; micro-batch 32 compiled +6%. GPT-2's small GEMMs between eager
# kernels load the tensor cores for 40-49% of its kernel time, so the H100's power curve runs them at 0.92-0.95 of
# their benchmarked rate (2-3 points faster than σ 0.924).
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_pytorch_gpt2_h100.json" >"$tmp/pt.json" 2>/dev/null; check "PyTorch set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/pt.json')); r={x['id']: x['step_error'] for x in d['results']}
assert len(r)==4, r
assert all(abs(v) <= 0.17 for v in r.values()), r
assert abs(r['pytorch-gpt2-124m-h100-mb8-eager']) <= 0.05, r
assert r['pytorch-gpt2-124m-h100-mb32-eager'] <= -0.03, r" ; check "PyTorch set within its guard" $?
"$TESSEL" validate --json "$(dirname "$0")/../../data/validation/check_pytorch_gpt2_h200.json" >"$tmp/pt200.json" 2>/dev/null; check "PyTorch H200 set exits 0" $?
python3 -c "
import json; d=json.load(open('$tmp/pt200.json')); r={x['id']: x['step_error'] for x in d['results']}
assert len(r)==4, r
assert all(abs(v) <= 0.27 for v in r.values()), r
assert all(abs(v) <= 0.14 for k, v in r.items() if 'mb32' in k), r
assert abs(r['pytorch-gpt2-124m-h200-mb8-eager']) <= 0.05, r" ; check "PyTorch H200 set within its guard" $?
check "fit prints the value and the shipped one" "$(contains "$tmp/fit" 'shipped in dgx-a100-80g: 0.910')"
check "fit says a measured curve replaces it on the H100" "$(contains "$tmp/fit" 'shipped in dgx-h100-80g: none (the measured gpu.sustained_share_by_duty')"
check "fit leaves the H100's records out" "$(contains "$tmp/fit" 'fitted on 63 records')"
cat >"$tmp/nostep.json" <<'J'
[{"id": "no-step", "group": "mine", "model": {"layers": 2, "hidden": 64, "heads": 2, "vocab": 100, "seq": 32},
  "system": {"gpu": "A100 80GB", "total_gpus": 8}, "plan": {"global_batch": 8}, "measured": {}}]
J
"$TESSEL" validate --fit "$tmp/nostep.json" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "fit with nothing to fit on exits 2" $([ $rc -eq 2 ]; echo $?)
check "and says why" "$(contains "$tmp/err" 'nothing to fit')"

# 4. A record that cannot be read is listed with its reason; a file that is not records is exit 2.
cat >"$tmp/runs.json" <<'J'
[{"id": "tpu-run", "group": "mine", "model": {"layers": 2, "hidden": 64, "heads": 2, "vocab": 100, "seq": 32},
  "system": {"gpu": "TPU v4", "total_gpus": 8}, "plan": {"global_batch": 8}, "measured": {"iteration_time_s": 1.0}}]
J
"$TESSEL" validate "$tmp/runs.json" >"$tmp/one" 2>"$tmp/one.err"; rc=$?
check "a file of nothing but refused records exits 2" $([ $rc -eq 2 ]; echo $?)
check "and says nothing was predicted" "$(contains "$tmp/one.err" 'the record was not predicted')"
check "names the refused record and field" "$(contains "$tmp/one" 'tpu-run: .*runs.json#/0/system/gpu')"
check "a group with nothing predicted shows no error, not 0.0%" "$(contains "$tmp/one" '^mine  *1  *0  *-  *-  *-  *-$')"
check "nor an empty band table" "$(contains "$tmp/one" 'none: no record here has a step-time comparison')"
python3 -c "
import json; r=json.load(open('$tmp/runs.json'))[0]; ok=dict(r, id='a100-run', system={'gpu': 'A100 80GB', 'total_gpus': 8})
json.dump([r, ok], open('$tmp/runs2.json', 'w'))"
"$TESSEL" validate "$tmp/runs2.json" >"$tmp/two" 2>&1; check "a refused record beside a predicted one is not an error" $?
check "and is still named" "$(contains "$tmp/two" 'tpu-run: .*runs2.json#/0/system/gpu')"
check "validate says which way its errors run" "$(contains "$tmp/two" 'error: predicted / measured - 1')"
echo '{"not": "records"}' >"$tmp/bad.json"
"$TESSEL" validate "$tmp/bad.json" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "not records exits 2" $([ $rc -eq 2 ]; echo $?)
check "names the file" "$(contains "$tmp/err" 'bad.json#')"
"$TESSEL" validate "$tmp/missing.json" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "missing file exits 2" $([ $rc -eq 2 ]; echo $?)

# 5. Scenarios written for predict, never over a user's file without --force.
"$TESSEL" validate --summary --scenarios "$tmp/sc" >/dev/null 2>&1; check "scenarios written" $?
"$TESSEL" predict "$tmp/sc/korthikanti-t5-22B-full_recompute.json" >"$tmp/p" 2>&1; check "a written scenario predicts" $?
"$TESSEL" validate --summary --scenarios "$tmp/sc" >/dev/null 2>"$tmp/err"; rc=$?
check "existing scenarios kept without --force" $([ $rc -eq 2 ]; echo $?)
"$TESSEL" validate --summary --scenarios "$tmp/sc" --force >/dev/null 2>&1; check "--force replaces" $?

# 6. Error bands: written on request (never over a file without --force), shown by predict and search.
"$TESSEL" validate --summary --write-bands "$tmp/bands.json" >/dev/null 2>&1; check "bands written" $?
python3 -c "
import json; b=json.load(open('$tmp/bands.json')); assert b['overall']['records']==85 and len(b['kinds'])>=3" ; check "bands have every kind" $?
"$TESSEL" validate --summary --write-bands "$tmp/bands.json" >/dev/null 2>"$tmp/err"; rc=$?
check "bands kept without --force" $([ $rc -eq 2 ]; echo $?)
"$TESSEL" predict >"$tmp/p" 2>&1; check "predict exits 0" $?
check "predict shows the trust band" "$(contains "$tmp/p" 'trust: on .* published A100 / Megatron-style runs')"
"$TESSEL" predict --json >"$tmp/p.json" 2>&1
python3 -c "
import json; t=json.load(open('$tmp/p.json'))['time']; assert t['error_band']['kind']=='A100 / Megatron-style'" ; check "predict JSON has the band" $?
check "predict shows the Megatron-style peak band" "$(contains "$tmp/p" 'trust: on 21 published Megatron-style runs with a measured peak')"
python3 -c "
import json; m=json.load(open('$tmp/p.json'))['memory']
assert m['verdict']=='fits' and m['fits'] and m['error_band']['kind']=='Megatron-style' and m['error_band']['records']==21" ; check "predict JSON: the Megatron-style peak band, and the plan fits" $?
# The same plan at sequence 3008 under DeepSpeed's pipeline engine: BigScience's peaks ran 3% over tessel's device ones
# at the median (2026-12-05, with NCCL's buffers, the dropout masks, BLOOM's embedding norm, the pipe buffers and ZeRO-1's
# reduce bucket), so a 73 GiB peak, 78.6 GiB reserved with the allocator's gradient-copy segment, of 80 may not fit.
"$TESSEL" predict --framework deepspeed --seq-len 3008 >"$tmp/pd" 2>&1; check "deepspeed predict exits 0" $?
check "predict shows the peak's band" "$(contains "$tmp/pd" 'trust: on .* published DeepSpeed pipeline runs with a measured peak')"
check "predict says MAY NOT FIT" "$(contains "$tmp/pd" 'MAY NOT FIT')"
check "predict says how far the peak must come down" "$(contains "$tmp/pd" 'to fit at the band.s upper end the reserved peak must be at most')"
"$TESSEL" predict --framework deepspeed --seq-len 3008 --json >"$tmp/pd.json" 2>&1
python3 -c "
import json; m=json.load(open('$tmp/pd.json'))['memory']
assert m['verdict']=='may_not_fit' and m['fits'] and m['error_band']['kind']=='DeepSpeed pipeline'
r=m['reserved_peak_bytes']; assert m['peak_bytes'] <= r
assert m['error_band']['peak_low_bytes'] < r < m['capacity_bytes'] < m['error_band']['peak_high_bytes']
b=m['error_band']; assert abs(b['fits_band_below_bytes'] - m['capacity_bytes'] * (1 - b['median_abs_error'])) < 1
assert b['fits_band_below_bytes'] < r" ; check "predict JSON has the peak's band and verdict" $?
# BF16_Optimizer's whole-gradient copy for its all-reduce: the caching allocator's segment, shown as reserved memory.
check "predict says what the allocator reserves beyond the peak" "$(contains "$tmp/pd" 'reserved .* GiB: PyTorch.s caching allocator keeps DeepSpeed.s step-time gradient copies')"
check "a dense plan's band carries no MoE caveat" "$(python3 -c "
import json,sys; t=json.load(open('$tmp/p.json'))['time']; sys.exit('error_band_note' in t)"; echo $?)"
# A mixture-of-experts plan is shown the MoE runs' band (its own kind, not the dense H100 one) and which MoE runs
# that band holds.
"$TESSEL" predict "$(dirname "$0")/../../scenarios/plans/mixtral-8x7b-h100.json" >"$tmp/moe" 2>&1; check "MoE predict exits 0" $?
check "MoE predict is shown the MoE runs' band" "$(contains "$tmp/moe" 'published H100 / Megatron-style / mixture of experts runs')"
check "MoE predict says which MoE runs its band holds" "$(contains "$tmp/moe" 'the mixture-of-experts runs the band is measured on: DGX Cloud.s Grok-1')"
"$TESSEL" search --gpus 64 --global-batch 256 --fix tp=8,pp=8 --top 4 --no-progress >"$tmp/s" 2>&1; check "search exits 0" $?
check "search shows the band column" "$(contains "$tmp/s" '±%')"
finish
