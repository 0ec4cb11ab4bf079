#!/usr/bin/env python3
"""Writes data/validation/check_mlperf_training.json: MLPerf Training's GPT-3 175B and Llama 3.1 405B pre-training
submissions on NVIDIA's NeMo stack.

Each row is one closed-division result directory of mlcommons/training_results_v3.1, v4.0, v4.1, v5.0 and v5.1, read
from its own files: the plan from the submission's config_*.sh and conf/*.yaml (or, where the log prints it, the
resolved config in the log), the global batch and gradient accumulation from the log's MLLOG events, the step time
from the log's training blocks. A block runs between a `block_start` and the next `block_stop` event (MLPerf's
training interval between two evaluations, which run outside it) over `epoch_count` tokens; its step time is its wall
time over its whole steps (tokens / sequence / global batch, rounded up). The row's step is the median over the
blocks of each result file, then over the submission's result files (printed in the notes). That is the wall time a
user sees, host work between steps included: where the log also prints NeMo's `train_step_timing` (v3.1), its median
is 1.3-3.5% lower (printed in the notes).

What every row runs (MLPerf's GPT-3 175B benchmark as NVIDIA implements it: conf/megatron_gpt_config_custom.yaml,
custom.yaml): 96 layers, hidden 12288, 96 heads, FFN 49152, sequence 2048, GELU, layernorm1p, biases, learned
positions, tied embeddings, dropout 0; the benchmark's SentencePiece vocabulary (c4_en_301_5Mexp2_spm.model) of
50257 tokens; FP8 as Transformer Engine's delayed scaling (config_fp8.sh: FP8_HYBRID, amax history 1024, max); no
activation recompute; sequence parallelism; Transformer Engine's TP communication overlap (TP_COMM_OVERLAP=True);
Apex's DistributedFusedAdam (USE_DIST_OPTIMIZER=True: optim/distributed_fused_adam.yaml, overlap_grad_sync and
overlap_param_sync true, grad_sync_dtype bf16); the interleaved schedule with p2p overlap (overlap_p2p_comm).
From v4.0 on the weights are gathered in FP8 (FP8_PARAMS=True). Not costed: per-layer CUDA graphs (LAYER_CUDA_GRAPH,
v4.0's largest rows and the B200 row), the embedding's deferred weight gradient (v4.1), VBOOST.

Llama 3.1 405B (v5.0, and v5.1's FP8 rows; NVIDIA's benchmarks/llama31_405b/implementations/*): the public model's shape (126 layers,
hidden 16384, 128 heads of which 8 key/value, FFN 53248, SwiGLU, RMSNorm, RoPE, untied embeddings) at sequence
8192 with the benchmark's Mixtral 8x22B tokenizer (vocabulary 32000, the MLCommons reference's; NeMo pads it);
FP8 delayed scaling; no recompute; TP communication overlap; the distributed optimizer with both overlaps and FP8
parameter gathers; the embedding and the loss counted as a layer each in the pipeline split (ASYM_PP_EMBED,
ASYM_PP_LOSS: 126 + 2 = 64 virtual stages x 2); context parallelism 2 by Megatron-core's default ring. Their blocks'
MLLOG events carry `samples_count` (at the block's start) rather than `epoch_count`: a block's steps are the samples
between its start and the next evaluation over the global batch. Their logs also carry `max_memory_usage`:
mlperf-common's LoggingCallback, round(torch.cuda.max_memory_allocated() / 2^30, 3) on the logging rank, global rank
0, the first pipeline stage (NVIDIA/mlperf-common 53f892f, 2025-02-27). Not costed: the GB200 rows' full-iteration
CUDA graphs (FULL_CUDA_GRAPH); those rows source a config_common_blackwell.sh the submission does not include, so
what else it set is not known (the plan's keys are read from the files that are there).
Run from the repository root: python3 scripts/mlperf_training_check_set.py
"""
from check_set_io import write_check_set

# The attention kernel each container's Transformer Engine picks, none of the configs forcing one (but the B200 row's
# NVTE_FUSED_ATTN=1, NVTE_FLASH_ATTN=0): at v3.1's TE_REVISION 09ba842 DotProductAttention returns flash-attn
# whenever it is available, cuDNN's fused attention only without it; from v1.6 (v4.0's TE_REVISION v1.6rc1, and the
# 24.09 container's) it selects "FusedAttention on sm90 and FlashAttention on others for performance".
ATTENTION = {
    "23.09": ("flash2", "Transformer Engine at 09ba842 (the Dockerfile's TE_REVISION) runs flash-attn when it is "
                       "available (DotProductAttention.forward returns self.flash_attention first)"),
    "24.04": ("cudnn", "Transformer Engine v1.6rc1 (the Dockerfile's TE_REVISION) selects FusedAttention (cuDNN) on "
                      "sm90 when both backends are available"),
    "24.09": ("cudnn", "the 24.09 container's Transformer Engine gives FusedAttention (cuDNN) preference on Hopper+ "
                      "(get_attention_backend)"),
}

LLAMA405B = {"name": "Llama 3.1 405B", "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8,
             "ffn_hidden": 53248, "vocab": 32000, "seq": 8192, "activation": "swiglu", "norm": "rmsnorm",
             "position_embedding": "rope", "tied_embeddings": False}

REPO = {
    "v3.1": ("mlcommons/training_results_v3.1", "d06288b"),
    "v4.0": ("mlcommons/training_results_v4.0", "6fe9543"),
    "v4.1": ("mlcommons/training_results_v4.1", "b87b9e3"),
    "v5.0": ("mlcommons/training_results_v5.0", "0fdc28f"),
    "v5.1": ("mlcommons/training_results_v5.1", "441d65f"),
}

GPT3 = {"name": "GPT3 175B", "layers": 96, "hidden": 12288, "heads": 96, "kv_heads": 96, "ffn_hidden": 49152,
        "vocab": 50257, "seq": 2048, "dropout": 0.0, "activation": "gelu", "norm": "layernorm",
        "position_embedding": "learned", "tied_embeddings": True}

EOS = ("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (Eos)", "H100 80GB SXM")
AZURE = ("InfiniBand NDR 400 Gb/s, 8x Quantum-2 CX7 a node (Azure ND H100 v5)", "H100 80GB SXM")
OCI = ("RoCE v2, 400 Gb/s a GPU (OCI BM.GPU.H100.8)", "H100 80GB SXM")
GB200 = ("4x ConnectX-7 InfiniBand NDR 400 Gb/s per node (a GB200 NVL72 compute tray of 4 GPUs)", "GB200 NVL72")
DGXB200 = ("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (DGX B200; the system file leaves the network blank)",
           "B200 180GB SXM")

ORACLE_NOTE = (" NVIDIA's v4.0 code (defaults as v4.0's) on the 24.09 early-access PyTorch container (the "
               "benchmark's Dockerfile: nvcr.io/nvdlfwea/pytorch:24.09-py3; the system file says 24.04).")

# (round, submitter/result dir, system, nodes, container, config file, tp, pp, vp, mbs, gbs (logged), accumulation
#  (logged), per-file block medians (s), per-file train_step_timing medians (s) or None, extra plan keys, note)
ROWS = [
    ("v3.1", "NVIDIA/results/eos_n64_ngc23.09_nemo", EOS, 64, "23.09",
     "config_DGXH100_64x8x192x4x8_mbs1.sh (MINIBS overridden: the log's batch is 2048)", 4, 8, 12, 1, 2048, 128,
     [11.0661, 11.0719, 11.0744], [11.0453, 11.055, 11.0539], {}, ""),
    ("v3.1", "NVIDIA/results/eos_n96_ngc23.09_nemo", EOS, 96, "23.09", "config_DGXH100_96x8x128x4x8_mbs1.sh",
     4, 8, 12, 1, 3072, 128, [11.0896, 11.0935, 11.0959], [11.0723, 11.0779, 11.0754], {}, ""),
    ("v3.1", "NVIDIA/results/eos-dfw_n512_ngc23.09_nemo", EOS, 512, "23.09", "config_DGXH100_512x8x16x4x8_mbs1.sh",
     4, 8, 12, 1, 2048, 16, [1.628, 1.6276, 1.6304], [1.6084, 1.6081, 1.6098], {}, ""),
    ("v3.1", "NVIDIA/results/eos-dfw_n768_ngc23.09_nemo", EOS, 768, "23.09", "config_DGXH100_768x8x16x4x8_mbs1.sh",
     4, 8, 12, 1, 3072, 16, [1.6342, 1.6364, 1.6367], [1.6159, 1.6152, 1.615], {}, ""),
    ("v3.1", "NVIDIA/results/eos-dfw_n1024_ngc23.09_nemo", EOS, 1024, "23.09",
     "config_DGXH100_1024x8x16x4x8_mbs1.sh", 4, 8, 12, 1, 4096, 16, [1.6413, 1.6402, 1.6402],
     [1.6193, 1.6192, 1.6192], {}, ""),
    ("v3.1", "NVIDIA/results/eos-dfw_n1280_ngc23.09_nemo", EOS, 1280, "23.09",
     "config_DGXH100_1280x8x8x4x8_mbs1.sh", 4, 8, 12, 1, 2560, 8, [0.9477, 0.9459, 0.9475],
     [0.9256, 0.9255, 0.9256], {}, ""),
    ("v3.1", "NVIDIA/results/eos-dfw_n1344_ngc23.09_nemo", EOS, 1344, "23.09",
     "config_DGXH100_1344x8x8x4x8_mbs1.sh", 4, 8, 12, 1, 2688, 8, [0.9524, 0.9519, 0.9518],
     [0.9296, 0.9296, 0.9296], {}, ""),
    ("v3.1", "Azure+NVIDIA/results/ND_H100_v5_n1344_pytorch", AZURE, 1344, "23.09",
     "config_DGXH100_1344x8x8x4x8_mbs1.sh (Azure+NVIDIA's copy, the same plan)", 4, 8, 12, 1, 2688, 8,
     [0.9775, 0.9795, 0.9833], [0.9451, 0.9451, 0.9546], {}, ""),
    ("v4.0", "NVIDIA/results/eos_n64_ngc24.04_nemo", EOS, 64, "24.04", "config_DGXH100_64x8x128x4x8_mbs2.sh",
     4, 8, 4, 2, 2304, 72, [10.903, 10.9832, 10.9822], None, {"fp8_param_gather": True}, ""),
    ("v4.0", "NVIDIA/results/eos-dfw_n1344_ngc24.04_nemo", EOS, 1344, "24.04",
     "config_DGXH100_1344x8x6x4x6_mbs1_cg.sh", 4, 6, 8, 1, 2688, 6, [0.9207, 0.9206, 0.921], None,
     {"fp8_param_gather": True}, " Per-layer CUDA graphs (LAYER_CUDA_GRAPH=1), not costed."),
    ("v4.0", "NVIDIA/results/eos-dfw_n1452_ngc24.04_nemo", EOS, 1452, "24.04",
     "config_DGXH100_1452x8x6x4x6_mbs1_cg.sh", 4, 6, 8, 1, 2904, 6, [0.9224, 0.9214, 0.9214], None,
     {"fp8_param_gather": True}, " Per-layer CUDA graphs (LAYER_CUDA_GRAPH=1), not costed."),
    ("v4.1", "NVIDIA/results/eos_n32_ngc24.09_nemo", EOS, 32, "24.09", "config_DGXH100_32x8x256x4x8_mbs2.sh",
     4, 8, 6, 2, 2048, 128, [18.4076, 18.4069, 18.4602], None, {"fp8_param_gather": True},
     " The embedding's weight gradient deferred (DEFER_EMBEDDING_WGRAD_COMPUTE), not costed."),
    ("v4.1", "NVIDIA/results/eos_n64_ngc24.09_nemo", EOS, 64, "24.09", "config_DGXH100_64x8x128x4x8_mbs2.sh",
     4, 8, 6, 2, 2048, 64, [9.5351, 9.7072, 9.5407], None, {"fp8_param_gather": True},
     " The embedding's weight gradient deferred (DEFER_EMBEDDING_WGRAD_COMPUTE), not costed."),
    ("v4.1", "NVIDIA/results/b200_n8_preview_nemo", DGXB200, 8, "24.09",
     "config_DGXB200_8x8x1024x4x8_mbs2_cg.sh (preview category)", 4, 8, 6, 2, 2048, 512,
     [36.0646, 36.2551, 36.2874], None, {"fp8_param_gather": True, "attention": "cudnn"},
     " cuDNN's fused attention (NVTE_FUSED_ATTN=1, NVTE_FLASH_ATTN=0); per-layer CUDA graphs, not costed."),
    ("v4.1", "Oracle/results/1536xBM.GPU.H100.8", OCI, 192, "24.09",
     "the resolved config the log prints (tensor 4, pipeline 8, virtual 4, micro-batch 2, fp8_params true)",
     4, 8, 4, 2, 3072, 32, [5.2235, 5.2366, 5.237], None, {"fp8_param_gather": True}, ORACLE_NOTE),
    ("v4.1", "Oracle/results/3072xBM.GPU.H100.8", OCI, 384, "24.09",
     "the resolved config the log prints (tensor 4, pipeline 8, virtual 4, micro-batch 2, fp8_params true)",
     4, 8, 4, 2, 3072, 16, [3.3203, 3.2878, 3.3637], None, {"fp8_param_gather": True}, ORACLE_NOTE),
]


# Llama 3.1 405B, v5.0: (result dir, system, nodes, GPUs a node, container, config file, tp, pp, vp, cp, mbs, gbs
#  (logged), accumulation (logged), per-file block medians (s), per-file train_step_time medians (s), max_memory_usage
#  (GiB, every file the same) or None, extra plan keys, note). H100 rows: NeMo 25.01 (pytorch:25.01, NeMo v2.2.0,
#  Megatron-core core_r0.11.0); GB200 rows: 25.04 (NeMo and Megatron-core 25.04-alpha.rc2, Transformer Engine v2.2.1).
GB_NOTE = " Full-iteration CUDA graphs (FULL_CUDA_GRAPH=True), not costed."
NEBIUS = ("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (Nebius)", "H200 141GB SXM")
NEBIUS_NOTE = " The train_step_time median is over the three files together."
UF = ("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (DGX B200's; the system file names InfiniBand without a rate)",
      "B200 180GB SXM")
UF_PLAN = {"fp8_recipe": "tensorwise", "tp_comm_overlap": False}
UF_NOTE = (" Its configs source the b200_nemo folder's config_common*.sh (the README's 'refer to ../b200_nemo'). A "
           "full-iteration CUDA graph (FULL_CUDA_GRAPH=1), not costed.")
# TP_PP_DP_MAPPING=True (use_tp_pp_dp_mapping): Megatron-core's rank order tp-cp-ep-pp-dp.
MAPPED = ({"rank_order": "tp-cp-ep-pp-dp"}, GB_NOTE + " TP_PP_DP_MAPPING=True.")
LLAMA_ROWS = [
    ("v5.0", "NVIDIA/results/eos-dfw_n64_ngc25.01_nemo", EOS, 64, 8, "25.01", "config_DGXH100_64x8x288xtp8pp8cp2.sh",
     8, 8, 8, 2, 1, 1152, 288, [55.1793, 55.2354, 55.219], [55.0998, 55.1608, 55.1406], 58.817, {}, ""),
    ("v5.0", "NVIDIA/results/eos-dfw_n256_ngc25.01_nemo", EOS, 256, 8, "25.01", "config_DGXH100_256x8x72xtp8pp8cp2.sh",
     8, 8, 8, 2, 1, 1152, 72, [14.2332, 14.2529, 14.2755], [14.2054, 14.2263, 14.2212], 52.484, {}, ""),
    ("v5.0", "NVIDIA/results/eos-dfw_n304_ngc25.01_nemo", EOS, 304, 8, "25.01", "config_DGXH100_304x8x64xtp8pp8cp2.sh",
     8, 8, 8, 2, 1, 1216, 64, [12.7424, 12.7449, 12.9487], [12.7001, 12.7113, 12.8644], 52.151, {}, ""),
    ("v5.0", "NVIDIA/results/eos-dfw_n320_ngc25.01_nemo", EOS, 320, 8, "25.01", "config_DGXH100_320x8x56xtp8pp8cp2.sh",
     8, 8, 8, 2, 1, 1120, 56, [11.4201, 11.2265, 11.3349], [11.1839, 11.1727, 11.1643], 52.062, {}, ""),
    ("v5.0", "NVIDIA/results/eos-dfw_n1024_ngc25.01_nemo", EOS, 1024, 8, "25.01", "config_DGXH100_1024x8x24xtp8pp8cp2.sh",
     8, 8, 8, 2, 1, 1536, 24, [5.2592, 5.2546, 5.2568], [5.1804, 5.1776, 5.175], 50.901, {}, ""),
    ("v5.0", "NVIDIA/results/tyche_ngpu256_ngc25.04_nemo", GB200, 64, 4, "25.04", "config_GB200_64x4x112xtp4pp8cp2_cg.sh",
     4, 8, 8, 2, 1, 448, 112, [19.0982, 19.176, 19.1883], [19.0932, 19.1684, 19.1871], None, {},
     " It also sources a config_common_cg.sh not in the submission (CUDA graphs by its name, not costed). Its log has"
     " one block_stop, at the end: each block is read to its first validation step's event."),
    ("v5.0", "NVIDIA/results/tyche_ngpu512_ngc25.04_nemo", GB200, 128, 4, "25.04",
     "config_GB200_128x4x112xtp4pp8cp2_cg_dplast.sh", 4, 8, 8, 2, 1, 896, 112, [19.6374, 19.4377, 19.4223],
     [19.5997, 19.4324, 19.4282], None, {"rank_order": "tp-cp-ep-pp-dp"},
     GB_NOTE + " TP_PP_DP_MAPPING=True. One block_stop, at the end: blocks read to their first validation event."),
    ("v5.0", "IBM+CoreWeave+NVIDIA/results/carina_ngpu512_ngc25.04_nemo", GB200, 128, 4, "25.04",
     "config_GB200_128x4x112xtp4pp8cp2.sh", 4, 8, 8, 2, 1, 896, 112, [19.4312, 19.3218, 19.2554],
     [19.4294, 19.2782, 19.253], 93.521, *MAPPED),
    ("v5.0", "IBM+CoreWeave+NVIDIA/results/carina_ngpu1024_ngc25.04_nemo", GB200, 256, 4, "25.04",
     "config_GB200_256x4x48xtp4pp8cp2.sh", 4, 8, 8, 2, 1, 768, 48, [8.4721, 8.4745, 8.4725],
     [8.4482, 8.4521, 8.4454], 92.1, *MAPPED),
    ("v5.0", "IBM+CoreWeave+NVIDIA/results/carina_ngpu1536_ngc25.04_nemo", GB200, 384, 4, "25.04",
     "config_GB200_384x4x48xtp4pp8cp2.sh", 4, 8, 8, 2, 1, 1152, 48, [8.5172, 8.5272, 8.5967],
     [8.4904, 8.4992, 8.5244], 91.631, *MAPPED),
    ("v5.0", "IBM+CoreWeave+NVIDIA/results/carina_ngpu2048_ngc25.04_nemo", GB200, 512, 4, "25.04",
     "config_GB200_512x4x40xtp4pp8cp2.sh", 4, 8, 8, 2, 1, 1280, 40, [7.1848, 7.1766, 7.1926],
     [7.1515, 7.1584, 7.1779], 92.802, *MAPPED),
    ("v5.0", "IBM+CoreWeave+NVIDIA/results/carina_ngpu2496_ngc25.04_nemo", GB200, 624, 4, "25.04",
     "config_GB200_624x4x32xtp4pp8cp2.sh", 4, 8, 8, 2, 1, 1248, 32, [5.8279, 5.8293, 5.8478],
     [5.8223, 5.8193, 5.836], 92.422, *MAPPED),
    # v5.1 (441d65f): the FP8 rows of other submitters on NVIDIA's 405B code (NVIDIA's own ran NVFP4, which tessel
    # does not cost). Nebius's H200 ran v5.0's code on pytorch:25.01 (its Dockerfile), delayed scaling, its log
    # printing the resolved NeMo config; the University of Florida's DGX B200 ran 25.09's with current scaling
    # (FP8_RECIPE tensorwise), TP_COMM_OVERLAP commented out (the yaml's false) and a full-iteration CUDA graph.
    ("v5.1", "Nebius/results/nebius_h200_n64", NEBIUS, 64, 8, "25.01", "config_DGXH200_64x8x144xtp4pp8cp2.sh",
     4, 8, 8, 2, 1, 1152, 144, [50.1018, 50.124, 50.0789], [50.0126], 109.067, {}, NEBIUS_NOTE),
    ("v5.1", "Nebius/results/nebius_h200_n128", NEBIUS, 128, 8, "25.01", "config_DGXH200_128x8x72xtp4pp8cp2.sh",
     4, 8, 8, 2, 1, 1152, 72, [25.4606, 25.3991, 25.3991], [25.3559], 104.846, {}, NEBIUS_NOTE),
    ("v5.1", "University-of-Florida/results/hpg.dgxb200x8.n32", UF, 32, 8, "25.09",
     "config_DGXB200_32x8x144xtp4pp8cp2_cg.sh", 4, 8, 8, 2, 1, 576, 144, [27.6127, 27.6403, 27.7372], [27.6457],
     None, UF_PLAN, UF_NOTE),
    ("v5.1", "University-of-Florida/results/hpg.dgxb200x8.n56", UF, 56, 8, "25.09",
     "config_DGXB200_56x8x144xtp4pp8cp2_cg.sh", 4, 8, 8, 2, 1, 1008, 144, [27.985, 27.9905, 28.0078], None,
     None, UF_PLAN, UF_NOTE),
]


def median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def gpt3_record(row):
    (rnd, result_dir, (network, gpu), nodes, container, config, tp, pp, vp, mbs, gbs, accum, blocks, step_timing,
     extra, note) = row
    gpus = nodes * 8
    assert gpus % (tp * pp) == 0, row
    dp = gpus // (tp * pp)
    assert gbs == mbs * accum * dp, (row, mbs * accum * dp)
    assert GPT3["layers"] % (pp * vp) == 0, row
    step = median(blocks)
    repo, commit = REPO[rnd]
    submitter, _, system_dir = result_dir.split("/", 2)
    plan = {
        "tp": tp, "pp": pp, "dp": dp, "cp": 1, "ep": 1, "vpp": vp, "micro_batch": mbs, "global_batch": gbs,
        "recompute": "none", "sequence_parallel": True, "zero": 1, "distributed_optimizer": True,
        "grad_reduce_in_fp32": False, "tp_comm_overlap": True, "framework": "NeMo", "framework_version": container,
    }
    attention, attention_why = ATTENTION[container]
    plan["attention"] = attention
    plan.update(extra)
    notes = (f"Generated by scripts/mlperf_training_check_set.py. MLPerf Training {rnd}, closed division, {submitter}, "
             f"{system_dir} ({gpus} GPUs), GPT-3 175B, NeMo {container}; plan from {config}: TP {tp}, PP {pp}, "
             f"VP {vp}, MBS {mbs}; the log's global batch {gbs} and gradient accumulation {accum} (= MBS x "
             f"accumulation x DP {dp}). Step time: median of the training blocks' wall time a step, per result file "
             f"{blocks} s, their median {step} s")
    if step_timing:
        notes += f"; the log's train_step_timing medians {step_timing} s"
    notes += "." + note
    rid = f"mlperf{rnd[1:].replace('.', '')}-{submitter.lower().replace('+', '-')}-gpt3-175b-{gpus}"
    if "b200" in system_dir:
        rid += "-b200"
    return {
        "id": rid,
        "group": f"mlperf_gpt3_{rnd}",
        "kind": "training_throughput",
        "source": (f"{repo}{' at ' + commit if commit else ''}: {result_dir}/gpt3/result_*.txt (MLLOG), "
                   f"{submitter}/benchmarks/gpt3 ({config}), {submitter}/systems/{system_dir}.json"),
        "source_url": f"https://github.com/{repo}/tree/main/{result_dir}/gpt3",
        "source_quality": "primary (the submission's own logs and configuration)",
        "model": dict(GPT3),
        "system": {
            "gpu": gpu, "gpus_per_node": 8, "nodes": nodes, "total_gpus": gpus, "intra_node_link": "NVLink",
            "inter_node_link": network, "precision": "FP8",
        },
        "plan": plan,
        "measured": {"iteration_time_s": step},
        "notes": notes,
        "inferred_fields": {
            "plan.attention": extra.get("attention") and "cudnn: the config sets NVTE_FUSED_ATTN=1, NVTE_FLASH_ATTN=0"
                              or f"{attention}: {attention_why}",
            "model.vocab": "50257: the benchmark's SentencePiece model (c4_en_301_5Mexp2_spm.model, as the Oracle "
                           "log's container mounts name it); NeMo pads it to a multiple of 128 x TP",
        },
    }


def llama_record(row):
    (rnd, result_dir, (network, gpu), nodes, per_node, container, config, tp, pp, vp, cp, mbs, gbs, accum, blocks,
     step_time, memory_gib, extra, note) = row
    gpus = nodes * per_node
    assert gpus % (tp * pp * cp) == 0, row
    dp = gpus // (tp * pp * cp)
    assert gbs == mbs * accum * dp, (row, mbs * accum * dp)
    assert (LLAMA405B["layers"] + 2) % (pp * vp) == 0, row
    step = median(blocks)
    repo, commit = REPO[rnd]
    submitter, _, system_dir = result_dir.split("/", 2)
    plan = {
        "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": 1, "vpp": vp, "micro_batch": mbs, "global_batch": gbs,
        "recompute": "none", "sequence_parallel": True, "zero": 1, "distributed_optimizer": True,
        "grad_reduce_in_fp32": False, "tp_comm_overlap": True, "fp8_param_gather": True, "attention": "cudnn",
        "pipeline_split": "ends_as_layers", "framework": "NeMo", "framework_version": container,
    }
    plan.update(extra)
    measured = {"iteration_time_s": step}
    if memory_gib is not None:
        measured.update({"max_memory_allocated_gib": memory_gib,
                         "memory_kind": "allocated (torch.cuda.max_memory_allocated, mlperf-common's LoggingCallback)",
                         "memory_stage": "first"})
    notes = (f"Generated by scripts/mlperf_training_check_set.py. MLPerf Training {rnd}, closed division, {submitter}, "
             f"{system_dir} ({gpus} GPUs, {per_node} a node), Llama 3.1 405B, NeMo {container}; plan from {config}: "
             f"TP {tp}, PP {pp}, VP {vp}, CP {cp}, MBS {mbs}; the log's global batch {gbs} and gradient accumulation "
             f"{accum} (= MBS x accumulation x DP {dp}). Step time: median of the training blocks' wall time a step, "
             f"per result file {blocks} s, their median {step} s" +
             (f"; the log's train_step_time medians {step_time} s." if step_time else "."))
    if memory_gib is not None:
        notes += f" Peak: max_memory_usage {memory_gib} GiB allocated on global rank 0 (pipeline stage 0)."
    notes += note
    short = system_dir.split("_")[0].split(".")[0]
    if short == submitter.lower():
        short = None
    kind = "gb200" if per_node == 4 else "h200" if "H200" in gpu else "b200" if "B200" in gpu else "h100"
    short = short or kind
    return {
        "id": f"mlperf{rnd[1:].replace('.', '')}-{submitter.split('+')[-1].lower()}-{short}-llama31-405b-{gpus}",
        "group": f"mlperf_llama31_405b_{rnd}_{kind}",
        "kind": "training_throughput",
        "source": (f"{repo} at {commit}: {result_dir}/llama31_405b/result_*.txt (MLLOG), "
                   f"{submitter}/benchmarks/llama31_405b ({config}), {submitter}/systems/{system_dir}.json"),
        "source_url": f"https://github.com/{repo}/tree/main/{result_dir}/llama31_405b",
        "source_quality": "primary (the submission's own logs and configuration)",
        "model": dict(LLAMA405B),
        "system": {
            "gpu": gpu, "gpus_per_node": per_node, "nodes": nodes, "total_gpus": gpus, "intra_node_link": "NVLink",
            "inter_node_link": network, "precision": "FP8",
        },
        "plan": plan,
        "measured": measured,
        "notes": notes,
        "inferred_fields": {
            "plan.attention": "cudnn: no config forces a kernel; the containers' Transformer Engine gives FusedAttention "
                              "(cuDNN) preference on Hopper and later (get_attention_backend)",
            "model.vocab": "32000: the benchmark's Mixtral 8x22B tokenizer (the MLCommons reference README; the "
                           "configs' mock_tokenizer_vocab_size default); NeMo pads it to a multiple of 128 x TP",
            "plan.cp_comm_type": "not stated by the configs: Megatron-core's default ring (p2p)",
            **({"system.inter_node_link": "the DGX B200's eight ConnectX-7 NDR 400 Gb/s: the system file names "
                                          "InfiniBand without a rate"} if "without a rate" in network else {}),
        },
    }


def records():
    return [gpt3_record(r) for r in ROWS] + [llama_record(r) for r in LLAMA_ROWS]


if __name__ == "__main__":
    write_check_set("check_mlperf_training.json", records())
