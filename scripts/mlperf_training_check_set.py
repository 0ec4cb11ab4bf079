#!/usr/bin/env python3
"""Writes data/validation/check_mlperf_training.json: MLPerf Training's GPT-3 175B, Llama 3.1 405B and Llama 3.1 8B
pre-training submissions on NVIDIA's NeMo stack.

Each row is one closed-division result directory of mlcommons/training_results_v3.0, v3.1, v4.0, v4.1, v5.0 and v5.1, read
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

Llama 3.1 8B (v5.1's FP8 rows, every submitter's; NVIDIA's benchmarks/llama31_8b code and its forks): the public
model's shape (32 layers, hidden 4096, 32 heads of which 8 key/value, FFN 14336) with Llama 3.1's own vocabulary,
128256 (the logs print "Padded vocab_size: 128256, original vocab_size: 128256" and 8030261248 parameters on rank
(0, 0), the whole model), sequence 8192, trained from scratch; no pipeline; one micro-batch a step on every rank
(global batch = micro-batch x DP, accumulation 1), so each step carries the data-parallel traffic and optimizer
of one micro-batch. NVIDIA's 25.09 code: FP8 current scaling (FP8_RECIPE tensorwise), FP8 parameter gathers, the
distributed optimizer with both overlaps, cuDNN attention in BF16 (NVTE_DPA_FP8_RECIPE unset or "F16"), TP overlap
only at TP 2. Cisco's H100 rows ran an older fork (pytorch:25.01): delayed scaling (the yaml's default), TP overlap,
FP8 parameters. A block's steps are its samples over the global batch: in the 25.09 code the `samples_count` a
`block_stop` carries is the block's size (its `step` metadata agrees); in Cisco's fork, the next evaluation's
`samples_count` less the block's start. Not costed:
full-iteration CUDA graphs (every row but Cisco's and Supermicro's B300); the NCCL communicator configuration all of
NVIDIA's code from v4.0 on loads (conf/nccl/custom_communicator_cta.yaml: at most 8 CTAs for the data-parallel
communicators, 2 for the pipeline's, 1 for context parallelism's), which tessel's contention charge does not read;
Megatron-core's DDP bucket size (BUCKET_SIZE). Left out: the NVFP4 rows (13), which tessel does not cost.
Run from the repository root: python3 scripts/mlperf_training_check_set.py
"""
from check_set_io import write_check_set

# The attention kernel each container's Transformer Engine picks, none of the configs forcing one (but the B200 row's
# NVTE_FUSED_ATTN=1, NVTE_FLASH_ATTN=0): at v3.1's TE_REVISION 09ba842 DotProductAttention returns flash-attn
# whenever it is available, cuDNN's fused attention only without it; from v1.6 (v4.0's TE_REVISION v1.6rc1, and the
# 24.09 container's) it selects "FusedAttention on sm90 and FlashAttention on others for performance".
ATTENTION = {
    "23.04": ("flash1", "Transformer Engine release_v0.8 (the Dockerfile's TE_REVISION) runs flash-attn whenever it is "
                       "installed (DotProductAttention, NVTE_FLASH_ATTN defaulting to 1), at >= 1.0.2 through "
                       "FlashAttention-1's flash_attn_unpadded_func; FlashAttention-2 came two months after this round"),
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
    "v3.0": ("mlcommons/training_results_v3.0", "63e326c"),
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
DGXH100 = ("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (NVIDIA's DGX H100 cluster of 2023)", "H100 80GB SXM")
COREWEAVE = ("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (CoreWeave HGX H100)", "H100 80GB SXM")
V30_NOTE = (" v3.0's logs hold one block over the whole run with the evaluations inside it: a step is read between an "
            "evaluation's end and the next one's start (the first from the block's start), over the tokens between "
            "them (epoch_num / (global batch x 2048)). NeMo 1.17 on pytorch:23.04, Transformer Engine release_v0.8 "
            "(its userbuffers for the TP overlap); FP8 weights were not gathered in FP8 until v4.0.")
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
    # v3.0 (63e326c): the first GPT-3 round on H100, NVIDIA's and CoreWeave's with the same code and configs.
    ("v3.0", "NVIDIA/results/dgxh100_n64_nemo", DGXH100, 64, "23.04", "config_DGXH100_64x8x128x4x8_mbs1.sh",
     4, 8, 12, 1, 2048, 128, [12.1133, 12.1031, 12.1045], [12.0827, 12.0713, 12.0741], {}, V30_NOTE),
    ("v3.0", "NVIDIA/results/dgxh100_n96_nemo", DGXH100, 96, "23.04", "config_DGXH100_96x8x128x4x8_mbs1.sh",
     4, 8, 12, 1, 3072, 128, [12.1606, 12.1606, 12.1574], [12.1282, 12.1274, 12.1236], {}, V30_NOTE),
    ("v3.0", "NVIDIA_CoreWeave/results/coreweave_hgxh100_n96_ngc23.04_pytorch", COREWEAVE, 96, "23.04",
     "config_DGXH100_96x8x128x4x8_mbs1.sh", 4, 8, 12, 1, 3072, 128, [12.3625, 12.3208, 12.3443],
     [12.3223, 12.2857, 12.3049], {}, V30_NOTE),
    ("v3.0", "NVIDIA_CoreWeave/results/coreweave_hgxh100_n192_ngc23.04_pytorch", COREWEAVE, 192, "23.04",
     "config_DGXH100_192x8x64x4x8_mbs1.sh", 4, 8, 12, 1, 3072, 64, [6.3788, 6.4105, 6.3916],
     [6.3264, 6.3573, 6.3397], {}, V30_NOTE),
    ("v3.0", "NVIDIA_CoreWeave/results/coreweave_hgxh100_n448_ngc23.04_pytorch", COREWEAVE, 448, "23.04",
     "config_DGXH100_448x8x24x4x8_mbs1.sh", 4, 8, 12, 1, 2688, 24, [2.6312, 2.6414, 2.6399],
     [2.5943, 2.6005, 2.6021], {}, V30_NOTE),
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
LLAMA8B = {"name": "Llama 3.1 8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
           "vocab": 128256, "seq": 8192, "activation": "swiglu", "norm": "rmsnorm", "position_embedding": "rope",
           "tied_embeddings": False}
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

# v5.1's Llama 3.1 8B FP8 rows (441d65f): (submitter/result dir, system, nodes, GPUs a node, container, config path
# under the submitter's benchmarks/, TP, CP, MBS, GBS (logged), accumulation (logged), per-file block medians (s),
# per-file train_step_time medians (s), max_memory_usage GiB or None, extra plan keys, note)
CISCO = ("RoCE, 8x ConnectX-7 400 Gb/s a node (BlueField-3, on Cisco's Silicon One G200 Ethernet fabric)", "H100 80GB SXM")
HPE = ("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (HPE Cray XD670: MCX75310AAS-NEAT; its eight Slingshot 200 Gb/s "
       "NICs are not NCCL's: the configs load no network plugin)", "H200 141GB SXM")
DELL = ("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (assumed: the system file leaves the network blank)",
        "B200 180GB SXM")
ONE_NODE_B300 = ("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (not used: one node)", "B300 270GB SXM")
THEIA = ("4x ConnectX-8 InfiniBand XDR 800 Gb/s per node (a GB300 NVL72 compute tray of 4 GPUs)", "GB300 NVL72")
OCI_B200 = ("RoCE v2, 8x 400 Gb/s a node (OCI BM.GPU.B200.8)", "B200 180GB SXM")
VERDA = ("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (assumed: the system file says '100GbE InfiniBand', the "
         "management network's)", "B200 180GB SXM")
TP2 = {"sequence_parallel": True, "tp_comm_overlap": True}
FULL_CG = " A full-iteration CUDA graph (FULL_CUDA_GRAPH=1), not costed."
UF8B_NOTE = " Its configs source the b200_nemo folder's config_common*.sh (the README's 'refer to ../b200_nemo')." + FULL_CG
CISCO_NOTE = (" Cisco's fork on pytorch:25.01 (its Dockerfile; the system file says 23.09): FP8=True with the yaml's "
              "delayed scaling, FP8_PARAMS, TP_COMM_OVERLAP=True, MCORE_CUDA_GRAPH=False.")
CISCO_PLAN = {"fp8_recipe": "delayed"}
CISCO_TP2 = {**CISCO_PLAN, **TP2}
LLAMA8B_ROWS = [
    ("Cisco/results/hpf_n16", CISCO, 16, 8, "25.01",
     "llama31_8b/implementations/nemo/config_DGXH100_16x8x1xtp2pp1cp1.sh",
     2, 1, 1, 64, 1, [0.5242, 0.5288, 0.5275, 0.5278, 0.5253, 0.5312, 0.5284, 0.5273, 0.5268, 0.5245],
     [0.483, 0.485, 0.4865, 0.483, 0.4853, 0.4844, 0.4869, 0.485, 0.4868, 0.4831], 35.706, CISCO_TP2, CISCO_NOTE),
    ("Cisco/results/hpf_n8", CISCO, 8, 8, "25.01",
     "llama31_8b/implementations/nemo/config_DGXH100_8x8x1xtp1pp1cp1.sh",
     1, 1, 1, 64, 1, [0.7405, 0.7423, 0.7437, 0.7431, 0.7408, 0.7415, 0.7422, 0.7433, 0.7406, 0.7408],
     [0.7198, 0.7207, 0.7211, 0.7208, 0.72, 0.7203, 0.7209, 0.7212, 0.7202, 0.7202], 71.229, CISCO_PLAN, CISCO_NOTE),
    ("Dell/results/1xXE9780x8B300-SXM-270GB", ONE_NODE_B300, 1, 8, "25.09",
     "llama31_8b/implementations/nemo/config_XE9780x8B300-SXM-270GB_1x8x2xtp1pp1cp1_8b.sh",
     1, 1, 2, 16, 1, [0.5486, 0.5485, 0.5486, 0.5485, 0.5483, 0.5483, 0.5481, 0.5485, 0.5486, 0.5487],
     [0.548, 0.548, 0.5481, 0.5479, 0.5477, 0.5476, 0.5475, 0.548, 0.548, 0.5479], None, {}, FULL_CG),
    ("Dell/results/2xXE9680Lx8B200-SXM-180GB", DELL, 2, 8, "25.09",
     "llama31_8b/implementations/nemo/config_2xXE9680Lx8B200-SXM-180GB_2x8x2xtp1pp1cp1_8b.sh",
     1, 1, 2, 32, 1, [0.5943, 0.5917, 0.5915, 0.591, 0.5908, 0.5909, 0.5919, 0.5926, 0.5936, 0.5921],
     [0.5814, 0.5824, 0.5808, 0.5802, 0.5814, 0.5805, 0.5813, 0.5813, 0.5815, 0.5812], None, {}, FULL_CG),
    ("Dell/results/2xXE9685Lx8B200-SXM-180GB", DELL, 2, 8, "25.09",
     "llama31_8b/implementations/nemo/config_XE9685Lx8B200-SXM-180GB_2x8x2xtp1pp1cp1.sh",
     1, 1, 2, 32, 1, [0.5864, 0.5874, 0.5865, 0.5862, 0.5898, 0.5868, 0.5859, 0.5882, 0.5874, 0.585],
     [0.5731, 0.575, 0.5757, 0.5732, 0.5799, 0.5757, 0.5749, 0.5762, 0.574, 0.5731], None, {}, FULL_CG),
    ("HPE/results/HPE-Cray-XD670-H200-SXM5-141GB_n8_25.09", HPE, 8, 8, "25.08",
     "llama3_8b/implementations/nemo-x86_64/config_XD670_8x8x1xtp1pp1cp2_8b.sh",
     1, 2, 1, 32, 1, [0.3539, 0.3539, 0.3538, 0.3539, 0.3539, 0.354, 0.354, 0.3539, 0.354, 0.354],
     [0.353, 0.3531, 0.3529, 0.3529, 0.3529, 0.353, 0.353, 0.3529, 0.3528, 0.3532], None, {}, FULL_CG),
    ("Lambda/results/gb300_n18_ngc25.04_nemo", THEIA, 18, 4, "25.09",
     "llama31_8b/implementations/gb300_0922/config_GB300_18x4x1xtp1pp1cp2_8b.sh",
     1, 2, 1, 36, 1, [0.1631, 0.1635, 0.1632, 0.1628, 0.1633, 0.1635, 0.1633, 0.1627, 0.163, 0.1628],
     [0.1611, 0.1616, 0.1612, 0.1609, 0.1612, 0.1613, 0.1613, 0.1608, 0.1611, 0.1606], None, {}, FULL_CG),
    ("NVIDIA/results/theia_ngpu512_ngc25.09_nemo", THEIA, 128, 4, "25.09",
     "llama31_8b/implementations/nemo/config_GB300_128x4x1xtp2pp1cp4_8b.sh",
     2, 4, 1, 64, 1, [0.0865, 0.0867, 0.0867, 0.0867, 0.0866, 0.0866, 0.0866, 0.0866, 0.0866, 0.0867],
     [0.0854, 0.0853, 0.0854, 0.0854, 0.0854, 0.0854, 0.0853, 0.0853, 0.0853, 0.0854], None, TP2, FULL_CG),
    ("NVIDIA/results/theia_ngpu72_ngc25.09_nemo", THEIA, 18, 4, "25.09",
     "llama31_8b/implementations/nemo/config_GB300_18x4x1xtp1pp1cp2_8b.sh",
     1, 2, 1, 36, 1, [0.1478, 0.1477, 0.1478, 0.1487, 0.1491, 0.1488, 0.149, 0.1485, 0.1486, 0.1486],
     [0.1472, 0.1471, 0.1472, 0.1482, 0.1485, 0.1483, 0.1484, 0.1479, 0.148, 0.148], None, {}, FULL_CG),
    ("NVIDIA/results/tyche_ngpu512_ngc25.09_nemo", GB200, 128, 4, "25.09",
     "llama31_8b/implementations/nemo/config_GB200_128x4x1xtp2pp1cp4_8b.sh",
     2, 4, 1, 64, 1, [0.0902, 0.0903, 0.0902, 0.09, 0.0901, 0.09, 0.0902, 0.09, 0.0901, 0.0902],
     [0.0889, 0.089, 0.0889, 0.0888, 0.0889, 0.0887, 0.0888, 0.0888, 0.0888, 0.0889], None, TP2, FULL_CG),
    ("NVIDIA/results/tyche_ngpu72_ngc25.09_nemo", GB200, 18, 4, "25.09",
     "llama31_8b/implementations/nemo/config_GB200_18x4x1xtp1pp1cp2_8b.sh",
     1, 2, 1, 36, 1, [0.1695, 0.1716, 0.1722, 0.1734, 0.1715, 0.1731, 0.1714, 0.1695, 0.1713, 0.1741],
     [0.1685, 0.171, 0.1712, 0.1727, 0.1706, 0.1724, 0.1705, 0.1687, 0.1704, 0.1734], None, {}, FULL_CG),
    ("Oracle/results/8xBM.GPU.B200.8", OCI_B200, 8, 8, "25.09",
     "llama31_8b/config_DGXB200_8x8x1xtp1pp1cp2_8b.sh",
     1, 2, 1, 32, 1, [0.1922, 0.1908, 0.1909, 0.1912, 0.191, 0.191, 0.1922, 0.1909, 0.1907, 0.1911],
     [0.1911, 0.1898, 0.1899, 0.1902, 0.19, 0.1901, 0.1911, 0.1896, 0.1897, 0.1897], None, {}, FULL_CG),
    ("Supermicro/results/AS-8126GS-NB3RT", ONE_NODE_B300, 1, 8, "25.09",
     "llama31_8b/implementations/AS-8126GS-NB3RT/config_DGXB200_1x8x2xtp1pp1cp1_8b.sh",
     1, 1, 2, 16, 1, [0.5513, 0.5514, 0.5511, 0.5509, 0.5501, 0.5499, 0.5499, 0.5505, 0.5505, 0.5502],
     [0.5508, 0.551, 0.5505, 0.5502, 0.5495, 0.5496, 0.5494, 0.5501, 0.5501, 0.5497], None, {}, " No CUDA graphs (the log's enable_cuda_graph False)."),
    ("University-of-Florida/results/hpg.dgxb200x8.n1", UF, 1, 8, "25.09",
     "llama31_8b/implementations/hpg.dgxb200x8/config_DGXB200_1x8x2xtp1pp1cp1_8b.sh",
     1, 1, 2, 16, 1, [0.5445, 0.5446, 0.5459, 0.546, 0.5444, 0.546, 0.5443, 0.546, 0.5491, 0.5439],
     [0.5435, 0.5436, 0.5442, 0.5451, 0.5428, 0.5446, 0.5429, 0.5453, 0.5479, 0.5429], None, {}, UF8B_NOTE),
    ("University-of-Florida/results/hpg.dgxb200x8.n16", UF, 16, 8, "25.09",
     "llama31_8b/implementations/hpg.dgxb200x8/config_DGXB200_16x8x1xtp1pp1cp2_8b.sh",
     1, 2, 1, 64, 1, [0.1942, 0.1944, 0.1943, 0.1942, 0.1942, 0.1942, 0.1943, 0.1943, 0.1943, 0.1942],
     [0.1927, 0.1926, 0.1926, 0.1927, 0.1926, 0.1927, 0.1923, 0.1927, 0.1921, 0.1927], None, {}, UF8B_NOTE),
    ("University-of-Florida/results/hpg.dgxb200x8.n2", UF, 2, 8, "25.09",
     "llama31_8b/implementations/hpg.dgxb200x8/config_DGXB200_2x8x2xtp1pp1cp1_8b.sh",
     1, 1, 2, 32, 1, [0.5723, 0.5739, 0.5763, 0.5772, 0.5776, 0.5724, 0.5739, 0.5766, 0.5771, 0.5776],
     [0.5711, 0.5725, 0.5744, 0.5757, 0.5762, 0.5703, 0.5725, 0.5751, 0.5763, 0.5761], None, {}, UF8B_NOTE),
    ("University-of-Florida/results/hpg.dgxb200x8.n32", UF, 32, 8, "25.09",
     "llama31_8b/implementations/hpg.dgxb200x8/config_DGXB200_32x8x1xtp1pp1cp2_8b.sh",
     1, 2, 1, 128, 1, [0.2226, 0.2226, 0.2226, 0.2226, 0.2226, 0.2227, 0.2227, 0.2226, 0.2226, 0.2225],
     [0.2212, 0.2208, 0.221, 0.2209, 0.2208, 0.2208, 0.2208, 0.2209, 0.2211, 0.2211], None, {}, UF8B_NOTE),
    ("University-of-Florida/results/hpg.dgxb200x8.n4", UF, 4, 8, "25.09",
     "llama31_8b/implementations/hpg.dgxb200x8/config_DGXB200_4x8x1xtp1pp1cp2_8b.sh",
     1, 2, 1, 16, 1, [0.1885, 0.1885, 0.19, 0.1885, 0.1901, 0.1885, 0.19, 0.19, 0.19, 0.1899],
     [0.1875, 0.1874, 0.1884, 0.1874, 0.1888, 0.1875, 0.189, 0.1888, 0.1881, 0.1888], None, {}, UF8B_NOTE),
    ("University-of-Florida/results/hpg.dgxb200x8.n8", UF, 8, 8, "25.09",
     "llama31_8b/implementations/hpg.dgxb200x8/config_DGXB200_8x8x1xtp1pp1cp2_8b.sh",
     1, 2, 1, 32, 1, [0.1906, 0.1905, 0.1905, 0.1906, 0.1907, 0.1906, 0.1906, 0.1907, 0.1906, 0.1907],
     [0.1892, 0.1892, 0.1889, 0.1892, 0.1895, 0.1892, 0.1893, 0.1894, 0.189, 0.1893], None, {}, UF8B_NOTE),
    ("Verda/results/b200_8x8_ngc25.09", VERDA, 8, 8, "25.09",
     "llama31_8b/implementations/b200_8x8_ngc25.09/config_DGXB200_8x8x1xtp1pp1cp2_8b.sh",
     1, 2, 1, 32, 1, [0.192, 0.1917, 0.1932, 0.1925, 0.1928, 0.1921, 0.1921, 0.1922, 0.1915, 0.1924],
     [0.1908, 0.1907, 0.1921, 0.1909, 0.1913, 0.1906, 0.1906, 0.1908, 0.1901, 0.1906], None, {}, FULL_CG),
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


def gpu_kind(gpu):
    for kind in ("GB300", "GB200", "B300", "B200", "H200", "H100"):
        if kind in gpu:
            return kind.lower()
    raise ValueError(gpu)


def llama_record(row):
    """A Llama 3.1 405B row (v5.0, v5.1): pipeline-parallel, the embedding and the loss as a layer each."""
    (rnd, result_dir, system, nodes, per_node, container, config, tp, pp, vp, cp, mbs, gbs, accum, blocks,
     step_time, memory_gib, extra, note) = row
    assert (LLAMA405B["layers"] + 2) % (pp * vp) == 0, row
    submitter = result_dir.split("/", 1)[0]
    plan = {"pp": pp, "vpp": vp, "sequence_parallel": True, "tp_comm_overlap": True,
            "pipeline_split": "ends_as_layers", **extra}
    return llama_common(LLAMA405B, "llama31_405b", rnd, result_dir, system, nodes, per_node, container,
                        f"{submitter}/benchmarks/llama31_405b ({config})", config, tp, cp, mbs, gbs, accum, blocks,
                        step_time, memory_gib, plan, f"PP {pp}, VP {vp}, ", note)


def llama8b_record(row):
    """A Llama 3.1 8B row (v5.1): no pipeline, TP 1 or 2, one micro-batch a step."""
    (result_dir, system, nodes, per_node, container, config_path, tp, cp, mbs, gbs, accum, blocks, step_time,
     memory_gib, extra, note) = row
    submitter = result_dir.split("/", 1)[0]
    config = config_path.rsplit("/", 1)[-1]
    fuser, why = te_op_fuser_8b(submitter, config)
    plan = {"pp": 1, "vpp": 1, "sequence_parallel": False, "tp_comm_overlap": False, "fp8_recipe": "tensorwise",
            "te_op_fuser": fuser, **extra}
    record = llama_common(LLAMA8B, "llama31_8b", "v5.1", result_dir, system, nodes, per_node, container,
                          f"{submitter}/benchmarks/{config_path}", config, tp, cp, mbs, gbs, accum, blocks, step_time,
                          memory_gib, plan, "", note)
    record["inferred_fields"]["plan.te_op_fuser"] = why
    return record


def te_op_fuser_8b(submitter, config):
    """Megatron-core's use_transformer_engine_op_fuser as a v5.1 8B config leaves it (conf/custom.yaml reads USE_TE_OPS,
    default False), with why: read by following each config's `source` lines in the submission's folder."""
    if submitter == "Cisco":
        return False, ("false: Cisco's fork (pytorch:25.01) has no use_transformer_engine_op_fuser in its conf and no "
                       "USE_TE_OPS in its configs")
    if "128x4x1xtp2" in config:
        return False, "false: the config sets USE_TE_OPS=False after sourcing config_common_8b.sh"
    return True, ("true: USE_TE_OPS=True from config_common_8b.sh, which the config sources (conf/custom.yaml: "
                  "use_transformer_engine_op_fuser: ${oc.env:USE_TE_OPS,False}); Lambda's GB300 config sources NVIDIA's "
                  "GB200 one, which sources it")


def llama_common(model, bench, rnd, result_dir, system, nodes, per_node, container, config_source, config, tp, cp,
                 mbs, gbs, accum, blocks, step_time, memory_gib, plan_keys, pipeline_text, note):
    network, gpu = system
    pp = plan_keys["pp"]
    gpus = nodes * per_node
    assert gpus % (tp * pp * cp) == 0, result_dir
    dp = gpus // (tp * pp * cp)
    assert gbs == mbs * accum * dp, (result_dir, mbs * accum * dp)
    step = median(blocks)
    repo, commit = REPO[rnd]
    submitter, _, system_dir = result_dir.split("/", 2)
    plan = {
        "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": 1, "vpp": plan_keys["vpp"], "micro_batch": mbs,
        "global_batch": gbs, "recompute": "none", "sequence_parallel": plan_keys["sequence_parallel"], "zero": 1,
        "distributed_optimizer": True, "grad_reduce_in_fp32": False, "tp_comm_overlap": plan_keys["tp_comm_overlap"],
        "fp8_param_gather": True, "attention": "cudnn",
    }
    if "pipeline_split" in plan_keys:
        plan["pipeline_split"] = plan_keys["pipeline_split"]
    plan.update({"framework": "NeMo", "framework_version": container})
    plan.update({k: v for k, v in plan_keys.items() if k not in plan or k in ("tp_comm_overlap", "sequence_parallel")})
    if pp == 1:
        del plan["vpp"]
    measured = {"iteration_time_s": step}
    if memory_gib is not None:
        measured.update({"max_memory_allocated_gib": memory_gib,
                         "memory_kind": "allocated (torch.cuda.max_memory_allocated, mlperf-common's LoggingCallback)",
                         "memory_stage": "first"})
    notes = (f"Generated by scripts/mlperf_training_check_set.py. MLPerf Training {rnd}, closed division, {submitter}, "
             f"{system_dir} ({gpus} GPUs, {per_node} a node), {model['name']}, NeMo {container}; plan from {config}: "
             f"TP {tp}, {pipeline_text}CP {cp}, MBS {mbs}; the log's global batch {gbs} and gradient accumulation "
             f"{accum} (= MBS x accumulation x DP {dp}). Step time: median of the training blocks' wall time a step, "
             f"per result file {blocks} s, their median {step} s" +
             (f"; the log's train_step_time medians {step_time} s." if step_time else "."))
    if memory_gib is not None:
        notes += f" Peak: max_memory_usage {memory_gib} GiB allocated on global rank 0" + \
                 (" (pipeline stage 0)." if pp > 1 else ".")
    notes += note
    short = system_dir.split("_")[0].split(".")[0].lower()
    kind = gpu_kind(gpu)
    if short == submitter.lower():
        short = kind
    size = bench.split("_", 1)[1]
    inferred = {
        "plan.attention": "cudnn: no config forces a kernel; the containers' Transformer Engine gives FusedAttention "
                          "(cuDNN) preference on Hopper and later (get_attention_backend)",
    }
    if bench == "llama31_405b":
        inferred["model.vocab"] = ("32000: the benchmark's Mixtral 8x22B tokenizer (the MLCommons reference README; the "
                                   "configs' mock_tokenizer_vocab_size default); NeMo pads it to a multiple of 128 x TP")
    if cp > 1:
        inferred["plan.cp_comm_type"] = "not stated by the configs: Megatron-core's default ring (p2p)"
    if "without a rate" in network:
        inferred["system.inter_node_link"] = ("the DGX B200's eight ConnectX-7 NDR 400 Gb/s: the system file names "
                                              "InfiniBand without a rate")
    elif "assumed" in network:
        inferred["system.inter_node_link"] = network
    return {
        "id": f"mlperf{rnd[1:].replace('.', '')}-{submitter.split('+')[-1].lower()}-{short}-llama31-{size}-{gpus}",
        "group": f"mlperf_{bench}_{rnd}_{'gb200' if bench == 'llama31_405b' and per_node == 4 else kind}",
        "kind": "training_throughput",
        "source": (f"{repo} at {commit}: {result_dir}/{bench}/result_*.txt (MLLOG), {config_source}, "
                   f"{submitter}/systems/{system_dir}.json"),
        "source_url": f"https://github.com/{repo}/tree/main/{result_dir}/{bench}",
        "source_quality": "primary (the submission's own logs and configuration)",
        "model": dict(model),
        "system": {
            "gpu": gpu, "gpus_per_node": per_node, "nodes": nodes, "total_gpus": gpus, "intra_node_link": "NVLink",
            "inter_node_link": network, "precision": "FP8",
        },
        "plan": plan,
        "measured": measured,
        "notes": notes,
        "inferred_fields": inferred,
    }


def records():
    return ([gpt3_record(r) for r in ROWS] + [llama_record(r) for r in LLAMA_ROWS] +
            [llama8b_record(r) for r in LLAMA8B_ROWS])


if __name__ == "__main__":
    write_check_set("check_mlperf_training.json", records())
