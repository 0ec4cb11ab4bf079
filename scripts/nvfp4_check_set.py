#!/usr/bin/env python3
"""Writes data/validation/check_nvfp4_blackwell.json: published NVFP4 (4-bit) pre-training runs on Blackwell.

Three sources, each row read from its own files; none of these rows is in another check set.

MLPerf Training v5.1's Llama 3.1 8B NVFP4 rows (mlcommons/training_results_v5.1 at 441d65f; the 13 closed-division
result directories whose configs source config_common_fp4.sh: NVIDIA on 8 GB300 and 8 GB200, Dell, Lenovo, Nebius,
Oracle and Supermicro on one to four B200 / B300 nodes), read exactly as scripts/mlperf_training_check_set.py reads
the FP8 8B rows (whose model, network constants and median it imports): the plan from the submission's config_*.sh
(and, where the log prints it, the resolved config in the log: Nebius, Oracle, Supermicro), the global batch and
gradient accumulation from the log's MLLOG events, the step time as the median over the result files of each file's
median training block (a block's wall time over its samples / global batch; in this 25.09 code a `block_stop`'s
`samples_count` is the block's size and its `step` metadata agrees), the logs' train_step_time (mlperf-common's
custom_callbacks entries, those carrying a step) in the notes. All run NVIDIA's 25.09 code (pytorch:25.09,
Transformer Engine release_v2.8, Megatron-core and NeMo 25.09-alpha.rc1): FP4=True, FP8=False, FP4_RECIPE nvfp4
(pretrain.py forbids FP8 and FP4 together), so every transformer layer's linears (QKV, out-projection, fc1, fc2) run
NVFP4 in all three GEMMs (no config sets FIRST_LAST_LAYERS_BF16), the embedding and the output layer BF16
(Megatron-core builds them outside the per-layer FP4 context); weights gathered in BF16 (FP8_PARAM_GATHER=False, no
FP4 parameter gather); TP_COMM_OVERLAP=False; the distributed optimizer with both overlaps; TP 1, no pipeline, no
context parallelism, one micro-batch of two sequences of 8192 a step (Nebius's two- and four-node rows: micro-batches
of one, two a step on two nodes). The NVTE_NVFP4_* switches net to: no random Hadamard transform (RHT), stochastic
rounding of the gradients on, 2D (16x16) weight scaling on -- config_common_fp4.sh's "vanilla recipe" disables all
three and config_common_8b.sh, sourced after it, re-enables the last two -- but for Nebius's B300, whose config
sources config_common_fp4.sh last (all three off). Core attention runs in FP8 (config_common_fp8attn.sh:
FP8_DPA=True; NVTE_DPA_FP8_RECIPE=Float8CurrentScaling, cuDNN's fused attention). Nebius's two- and four-node logs
name a config (DGXB200_2x8x2xtp1pp1cp1_8b, ..._4x8x1...) and hyperparameters the submission's files do not hold;
their NVFP4 switches are those of the files it does hold.

MLPerf Training v5.1's Llama 3.1 405B NVFP4 rows (NVIDIA's four: theia_ngpu512 on GB300, tyche_ngpu512, hsg_ngpu2560
and hsg_ngpu5120 on GB200; no other submitter's 405B result sources an _fp4 config), read as that script reads its
405B rows (the same model constants: 126 layers, Mixtral 8x22B's vocabulary of 32000; the embedding and the loss
counted as a layer each in the pipeline split, ASYM_PP_EMBED / ASYM_PP_LOSS: (126 + 2) / (8 x 8) = 2 layers a virtual
stage; CP 2 by Megatron-core's default ring; TP_PP_DP_MAPPING=True): NVFP4 as the 8B rows but the vanilla recipe (no
RHT, no stochastic rounding, 1D weight scaling: config_common_405b.sh re-enables nothing) and BF16 attention (no 405B
config sets FP8_DPA; NVTE_DPA_FP8_RECIPE only picks the recipe of an FP8 attention the NVFP4 recipe's fp8_dpa
switches on). Each file holds one long block from the run's start (240 or 300 steps) and 15-20-step blocks between
evaluations, the short ones slower a step on the 2560- and 5120-GPU runs (the notes print both); the row's step is
the same median as every other MLPerf row's.

Megatron-Bridge's dense Llama NVFP4 rows (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md at
067f987df; docs/performance-summary.md, the 26.08 tables, has NVFP4 rows only for Nemotron_3_Super, a mixture of
experts): Llama 3 70B on 64 and Llama 3.1 405B on 256 DGX-GB300 / DGX-GB200 GPUs in the 26.02, 26.02.01, 26.04,
26.04.01 and 26.06 containers, transcribed as scripts/megatron_bridge_2026_check_set.py transcribes the FP8 rows
(whose model shapes and system constants it imports; step = GBS x sequence / (tokens/s/GPU x GPUs)). What the tables
do not print is read from the performance scripts of the Megatron-Bridge release each container ships
(docs/releases/software-versions.md: 26.02 = 0.3.0, 26.04 = 0.4.0, 26.06 = 0.5.0; known-issues.md: 26.02.01 = r0.3.1;
docs/fern/docs.yml: 26.04.01 = 0.4.2): the V2 presets of scripts/performance/configs/llama/
llama3_workload_base_configs.py and llama31_workload_base_configs.py (no recompute, no offload, no CUDA graphs:
cuda_graph_impl "none"); tp_comm_overlap off for nvfp4 (llama3_llm_pretrain.py, llama31_llm_pretrain.py);
bf16_with_nvfp4_mixed() (mixed_precision.py: every transformer layer NVFP4, fp8_dot_product_attention False, so BF16
attention); no NVTE_NVFP4_* variable set (perf_plugins.py sets only NVTE_USE_FAST_MATH=1), so Transformer Engine's
defaults: RHT on the wgrad operands, stochastic rounding of the gradients, 2D weight scaling. The FP4 parameter
gather (fp4_param_gather, Megatron's --fp4-param-gather) came with Megatron-Bridge#3364 (2026-04-21): on in 0.4.2 and
0.5.0 (26.04.01, 26.06), absent before; the GB200 405B preset turns the parameter-gather overlap off from 0.4.2 on
(disable_param_gather_overlap, #3713). The 26.02.01 GB300 70B row is left out (below).

Not costed: the CUDA graphs of the MLPerf rows (Megatron-core's per-layer graphs, MCORE_CUDA_GRAPH=1 with
FULL_CUDA_GRAPH=0, on the 8B rows but Nebius's multi-node and B300 ones, which capture the whole iteration as the
405B rows do); NVTE_USE_FAST_MATH (Megatron-Bridge); NCCL's communicator configuration and Slurm segments (MLPerf).
Left out: Megatron-Bridge's 26.02.01 DGX-GB300 70B NVFP4 row (7002 tokens/s/GPU), whose printed plan (MBS 2, FSDP 0,
TP 1, PP 1, no virtual stages: the FP8 row's but for FSDP) is not its release's preset
(LLAMA3_70B_PRETRAIN_CONFIG_GB300_NVFP4_V2: PP 4 x VP 5, MBS 1, in every 2026 release) and could not have run: a 70B
model's BF16 weights and gradients, unsharded (no FSDP, TP or PP; 0.3.1 has no FP4 parameter gather), take 280 GB of
a GB300's 298 GB (284208 MiB) before two micro-batches' activations (the 2026 set leaves out the same release's GB300
MXFP8 row for a printed plan that is not its preset); the MLPerf llama2_70b_lora NVFP4 rows (fine-tuning); the
Nemotron_3_Super rows (a mixture of experts).
Run from the repository root: python3 scripts/nvfp4_check_set.py
"""
from check_set_io import write_check_set
from megatron_bridge_2026_check_set import MODELS, SYSTEMS, TABLE_MODEL, URL
from mlperf_training_check_set import GB200, LLAMA405B, LLAMA8B, ONE_NODE_B300, REPO, THEIA, gpu_kind, median

SCRIPT = "scripts/nvfp4_check_set.py"

# --- MLPerf Training v5.1 -------------------------------------------------------------------------------------------

ONE_NODE_B200 = ("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (not used: one node)", "B200 180GB SXM")
NEBIUS_B200 = ("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (Nebius; the system file: 8x ConnectX-7 IB NDR 400Gb/s)",
               "B200 180GB SXM")

# The NVFP4 recipe each config nets to: (NVTE_NVFP4_DISABLE_RHT, _STOCHASTIC_ROUNDING, _2D_QUANTIZATION after the
# sourcing, FP8_DPA, NVTE_DPA_FP8_RECIPE, the sourcing order and why).
RECIPE_8B = {
    "rht": False, "sr": True, "w2d": True, "fp8_dpa": True, "dpa_recipe": "Float8CurrentScaling",
    "order": ("config_common.sh, config_common_fp4.sh, config_common_cg.sh, config_common_8b.sh, "
              "config_common_fp8attn.sh"),
    "why": ("config_common_fp4.sh's 'vanilla recipe' sets NVTE_NVFP4_DISABLE_RHT=1, _STOCHASTIC_ROUNDING=1 and "
            "_2D_QUANTIZATION=1; config_common_8b.sh, sourced after it, sets the last two back to 0 ('Enable 2D "
            "weights and stochastic rounding if using FP4')"),
}
RECIPE_8B_NEBIUS = dict(RECIPE_8B, order=("config_common.sh, config_common_fp4.sh, config_common_8b.sh, "
                                          "config_common_cg.sh, config_common_fp8attn.sh"))
RECIPE_8B_NEBIUS_B300 = dict(
    RECIPE_8B, sr=False, w2d=False,
    order="config_common.sh, config_common_8b.sh, config_common_cg.sh, config_common_fp8attn.sh, config_common_fp4.sh",
    why=("config_common_fp4.sh is sourced last, after config_common_8b.sh's re-enabling: its 'vanilla recipe' "
         "(NVTE_NVFP4_DISABLE_RHT=1, _STOCHASTIC_ROUNDING=1, _2D_QUANTIZATION=1) stands; it also sets "
         "NVTE_DPA_FP8_RECIPE back to Float8CurrentScaling over this folder's config_common.sh's F16"))
RECIPE_405B = {
    "rht": False, "sr": False, "w2d": False, "fp8_dpa": False, "dpa_recipe": None,
    "order": "config_common.sh, config_common_fp4.sh, config_common_405b.sh, config_common_cg.sh",
    "why": ("config_common_fp4.sh's 'vanilla recipe' (NVTE_NVFP4_DISABLE_RHT=1, _STOCHASTIC_ROUNDING=1, "
            "_2D_QUANTIZATION=1); nothing sourced after it re-enables a switch"),
}

LAYER_CG = (" Megatron-core's per-layer CUDA graphs (config_common_cg.sh's MCORE_CUDA_GRAPH=1 with the config's "
            "FULL_CUDA_GRAPH=0: cuda_graph_scope 'full', each transformer layer), not costed.")
ITER_CG = " A full-iteration CUDA graph (FULL_CUDA_GRAPH=1), not costed."
LOGGED = (" The log prints the resolved config: fp4 'e2m1', fp8 None, fp8_dot_product_attention True, "
          "fp8_param_gather false.")
NEBIUS_MULTI = (" The submission's config is not the one that ran: the log names DGXSYSTEM {logged} (no _fp4 suffix) "
                "and prints lr {lr}, warmup_steps {warmup} and cuda_graph_scope 'full_iteration', where the file "
                "holds LR=0.0004, WARMUP_STEPS=96 and FULL_CUDA_GRAPH=0; the log prints fp4 'e2m1', "
                "fp8_dot_product_attention True, micro_batch_size {mbs} and tensor/context parallel 1, but no "
                "environment, so the NVTE_NVFP4_* switches are the file's (the B300 folder's config, sourcing "
                "config_common_fp4.sh last, would turn stochastic rounding and 2D scaling off)." + ITER_CG)

# v5.1's Llama 3.1 8B NVFP4 rows: (submitter/result dir, system, nodes, GPUs a node, config path under the
# submitter's benchmarks/, TP, CP, MBS, GBS (logged), accumulation (logged), per-file block medians (s), per-file
# train_step_time medians (s), recipe, extra plan keys, note). Every row: container 25.09, no memory figure logged.
LLAMA8B_ROWS = [
    ("Dell/results/1xXE9680Lx8B200-SXM-180GB", ONE_NODE_B200, 1, 8,
     "llama31_8b/implementations/nemo/config_1xXE9680Lx8B200-SXM-180GB.sh", 1, 1, 2, 16, 1,
     [0.451, 0.4512, 0.4511, 0.4513, 0.4511, 0.4511, 0.451, 0.4512, 0.4513, 0.4511],
     [0.4504, 0.4504, 0.4505, 0.4504, 0.4503, 0.4506, 0.4501, 0.4504, 0.4507, 0.4505], RECIPE_8B, {},
     " The config named for the system (the same as the folder's config_DGXB200_1x8x2xtp1pp1cp1_8b_fp4.sh); the log "
     "prints no config." + LAYER_CG),
    ("Lenovo/results/SR680aV3-8xB200_SXM_180GB", ONE_NODE_B200, 1, 8,
     "llama31_8b/config_SR780aV3_SR680aV3_SR680aV4.sh", 1, 1, 2, 16, 1,
     [0.4445, 0.4446, 0.4443, 0.4444, 0.4443, 0.4443, 0.4445, 0.4443, 0.4444, 0.4444],
     [0.4437, 0.4436, 0.4437, 0.4437, 0.4438, 0.444, 0.444, 0.4437, 0.4437, 0.4437], RECIPE_8B, {},
     " Lenovo's one config for its three systems; the log prints no config." + LAYER_CG),
    ("Lenovo/results/SR680aV4-8xB300_SXM", ONE_NODE_B300, 1, 8,
     "llama31_8b/config_SR780aV3_SR680aV3_SR680aV4.sh", 1, 1, 2, 16, 1,
     [0.4061, 0.4067, 0.4069, 0.4068, 0.4068, 0.4069, 0.4069, 0.4067, 0.4068, 0.4069],
     [0.4053, 0.4054, 0.406, 0.406, 0.4057, 0.406, 0.4059, 0.4057, 0.406, 0.4059], RECIPE_8B, {},
     " Lenovo's one config for its three systems; the log prints no config, and its submission_platform "
     "'1xSR780aV3-8xB200_SXM_180GB' (the result folder and system file: SR680aV4, B300-SXM-270GB)." + LAYER_CG),
    ("Lenovo/results/SR780aV3-8xB200_SXM_180GB", ONE_NODE_B200, 1, 8,
     "llama31_8b/config_SR780aV3_SR680aV3_SR680aV4.sh", 1, 1, 2, 16, 1,
     [0.4517, 0.4517, 0.4517, 0.4516, 0.4517, 0.4518, 0.4517, 0.4518, 0.4518, 0.4517],
     [0.4509, 0.4511, 0.451, 0.4511, 0.4514, 0.4512, 0.4511, 0.451, 0.4513, 0.451], RECIPE_8B, {},
     " Lenovo's one config for its three systems; the log prints no config." + LAYER_CG),
    ("NVIDIA/results/theia_ngpu8_ngc25.09_nemo", THEIA, 2, 4,
     "llama31_8b/implementations/nemo/config_GB300_2x4x2xtp1pp1cp1_8b_fp4.sh", 1, 1, 2, 16, 1,
     [0.3459, 0.3453, 0.3452, 0.3485, 0.3486, 0.3472, 0.3472, 0.3469, 0.3468, 0.3466],
     [0.3456, 0.3451, 0.3449, 0.3482, 0.3483, 0.3469, 0.347, 0.3466, 0.3466, 0.3464], RECIPE_8B, {},
     " The config the submission's README names (README-theia_ngpu8_ngc25.09_nemo.md); two compute trays of one "
     "NVL72 rack." + LAYER_CG),
    ("NVIDIA/results/tyche_ngpu8_ngc25.09_nemo", GB200, 2, 4,
     "llama31_8b/implementations/nemo/config_GB200_2x4x2xtp1pp1cp1_8b_fp4.sh", 1, 1, 2, 16, 1,
     [0.4054, 0.41, 0.4066, 0.4101, 0.422, 0.4073, 0.4051, 0.4024, 0.4043, 0.4016],
     [0.4049, 0.4093, 0.4061, 0.4098, 0.4213, 0.4069, 0.4046, 0.4021, 0.4036, 0.4015], RECIPE_8B, {},
     " The config the submission's README names (README-tyche_ngpu8_ngc25.09_nemo.md); two compute trays of one "
     "NVL72 rack." + LAYER_CG),
    ("Nebius/results/nebius_b200_n1", ONE_NODE_B200, 1, 8,
     "llama31_8b/configs/nebius_b200_n1/config_DGXB200_1x8x2xtp1pp1cp1_8b_fp4.sh", 1, 1, 2, 16, 1,
     [0.4566, 0.4565, 0.4569, 0.4568, 0.4573, 0.4572, 0.4569, 0.4566, 0.4563, 0.4566],
     [0.4555, 0.455, 0.4559, 0.4557, 0.4566, 0.4562, 0.4557, 0.4556, 0.4555, 0.4558], RECIPE_8B_NEBIUS, {},
     " The config the log's DGXSYSTEM names (DGXB200_1x8x2xtp1pp1cp1_8b_fp4); its lr 0.0004 and warmup 16 agree."
     + LOGGED + " cuda_graph_scope 'full'." + LAYER_CG),
    ("Nebius/results/nebius_b200_n2", NEBIUS_B200, 2, 8,
     "llama31_8b/configs/nebius_b200_n2/config_DGXB200_2x8x2xtp1pp1cp1_8b_fp4.sh", 1, 1, 1, 32, 2,
     [0.4968, 0.4975, 0.4966, 0.498, 0.4968, 0.4978, 0.4978, 0.4969, 0.4968, 0.4978],
     [0.4946, 0.4958, 0.4951, 0.4966, 0.4953, 0.4961, 0.496, 0.4954, 0.4949, 0.4965], RECIPE_8B_NEBIUS, {},
     " Two micro-batches a step (MINIBS=2, MICRO_BATCH_SIZE=1; the log's accumulation 2)." +
     NEBIUS_MULTI.format(logged="DGXB200_2x8x2xtp1pp1cp1_8b", lr="0.0008", warmup="192", mbs="1")),
    ("Nebius/results/nebius_b200_n4", NEBIUS_B200, 4, 8,
     "llama31_8b/configs/nebius_b200_n4/config_DGXB200_4x8x1xtp1pp1cp1_8b_fp4.sh", 1, 1, 1, 32, 1,
     [0.2698, 0.2695, 0.2696, 0.2695, 0.2694, 0.2696, 0.2695, 0.2695, 0.2695, 0.2696],
     [0.2682, 0.2678, 0.2679, 0.2677, 0.2674, 0.2682, 0.2678, 0.2679, 0.268, 0.2678], RECIPE_8B_NEBIUS, {},
     NEBIUS_MULTI.format(logged="DGXB200_4x8x1xtp1pp1cp1_8b", lr="0.0008", warmup="96", mbs="1")),
    ("Nebius/results/nebius_b300_n1", ONE_NODE_B300, 1, 8,
     "llama31_8b/configs/nebius_b300_n1/config_DGXB200_1x8x2xtp1pp1cp1_8b.sh", 1, 1, 2, 16, 1,
     [0.3949, 0.395, 0.395, 0.395, 0.3952, 0.395, 0.3948, 0.3945, 0.3944, 0.3943],
     [0.3943, 0.3941, 0.3941, 0.3941, 0.3944, 0.3943, 0.3941, 0.3937, 0.3934, 0.3938], RECIPE_8B_NEBIUS_B300, {},
     " The config the log's DGXSYSTEM names (DGXB200_1x8x2xtp1pp1cp1_8b, run_nebius.sh's); its lr 0.0004 and warmup "
     "16 agree." + LOGGED + " cuda_graph_scope 'full_iteration' (the config leaves config_common_cg.sh's "
     "FULL_CUDA_GRAPH=1)." + ITER_CG),
    ("Oracle/results/1xBM.GPU.B200.8", ONE_NODE_B200, 1, 8,
     "llama31_8b/config_DGXB200_1x8x2xtp1pp1cp1_8b_fp4.sh", 1, 1, 2, 16, 1,
     [0.4541, 0.456, 0.4558, 0.4535, 0.4534, 0.4531, 0.453, 0.4526, 0.4516, 0.4547],
     [0.4539, 0.4553, 0.4549, 0.4531, 0.4531, 0.4525, 0.4524, 0.452, 0.4508, 0.454], RECIPE_8B, {},
     " The config the log's DGXSYSTEM names (DGXB200_1x8x2xtp1pp1cp1_8b_fp4)." + LOGGED + " cuda_graph_scope "
     "'full'." + LAYER_CG),
    ("Supermicro/results/AS-4126GS-NBR-LCC", ONE_NODE_B200, 1, 8,
     "llama31_8b/implementations/AS-4126GS-NBR-LCC/config_AS-4126GS-NBR-LCC_1x8x2xtp1pp1cp1_8b_fp4.sh", 1, 1, 2, 16, 1,
     [0.4502, 0.4502, 0.4501, 0.4501, 0.4502, 0.4501, 0.4499, 0.4501, 0.45, 0.4501],
     [0.4495, 0.4495, 0.4495, 0.4493, 0.4496, 0.4496, 0.4491, 0.4496, 0.4494, 0.4498], RECIPE_8B, {},
     " The config the log's DGXSYSTEM names (the same as the folder's config_DGXB200_1x8x2xtp1pp1cp1_8b_fp4.sh)."
     + LOGGED + " cuda_graph_scope 'full'." + LAYER_CG),
    ("Supermicro/results/SYS-422GS-NBRT-LCC", ONE_NODE_B200, 1, 8,
     "llama31_8b/implementations/SYS-422GS-NBRT-LCC/config_SYS-422GS-NBRT-LCC_1x8x2xtp1pp1cp1_8b_fp4.sh", 1, 1, 2, 16,
     1, [0.4513, 0.4513, 0.4512, 0.4513, 0.4513, 0.4512, 0.4512, 0.4513, 0.4512, 0.4512],
     [0.4508, 0.4505, 0.4508, 0.4503, 0.4505, 0.4506, 0.4508, 0.4509, 0.4503, 0.4508], RECIPE_8B, {},
     " The config the log's DGXSYSTEM names (the same as the folder's config_DGXB200_1x8x2xtp1pp1cp1_8b_fp4.sh)."
     + LOGGED + " cuda_graph_scope 'full'." + LAYER_CG),
]

# v5.1's Llama 3.1 405B NVFP4 rows, NVIDIA's (each README-<dir>.md names its config under
# llama31_405b/implementations/<dir>/): (result dir, system, nodes, GPUs a node, config file, TP, PP, VP, CP, MBS, GBS
# (logged), accumulation (logged), per-file block medians (s), per-file train_step_time medians (s), each file's
# first (long) block's step (s) and steps, the short blocks' range (s) and steps, note). No memory figure logged.
LLAMA405B_ROWS = [
    ("NVIDIA/results/theia_ngpu512_ngc25.09_nemo", THEIA, 128, 4, "config_GB300_128x4x72xtp2pp8cp2_cg_fp4.sh",
     2, 8, 8, 2, 1, 1152, 72, [13.16, 13.1798, 13.1664], [13.1399, 13.1704, 13.1447],
     ([13.1463, 13.1744, 13.1499], 240), ((13.1595, 13.1806), 16),
     " NVTE_DPA_FP8_RECIPE=\"F16\" in the config."),
    ("NVIDIA/results/tyche_ngpu512_ngc25.09_nemo", GB200, 128, 4, "config_GB200_128x4x144xtp4pp8cp2_cg_fp4.sh",
     4, 8, 8, 2, 1, 1152, 144, [17.2616, 17.4009, 17.3358], [17.2371, 17.3723, 17.2602],
     ([17.2747, 17.4005, 17.3815], 240), ((17.2581, 17.4156), 16),
     " NVTE_DPA_FP8_RECIPE=\"F16\" in the config."),
    ("NVIDIA/results/hsg_ngpu2560_ngc25.09_nemo", GB200, 640, 4, "config_GB200_640x4x24xtp4pp8cp2_cg_fp4.sh",
     4, 8, 8, 2, 1, 960, 24, [3.3238, 3.3138, 3.2956], [3.1953, 3.1901, 3.1796],
     ([3.2479, 3.2475, 3.2245], 300), ((3.2956, 3.3935), 20),
     " NVTE_DPA_FP8_RECIPE stays config_common_fp4.sh's Float8CurrentScaling, without FP8_DPA. The config also sets "
     "TP_COMM_OVERLAP=False, UB_SKIPMC=1, NCCL_NVLS_ENABLE=0 and 16 SMs for the QKV / fc1 dgrad and wgrad "
     "(QKV_DGRAD_SM ... FC1_WGRAD_SM, userbuffers settings, unused without the TP overlap)."),
    ("NVIDIA/results/hsg_ngpu5120_ngc25.09_nemo", GB200, 1280, 4, "config_GB200_1280x4x16xtp4pp8cp2_cg_fp4.sh",
     4, 8, 8, 2, 1, 1280, 16, [2.5814, 2.4444, 2.4499], [2.2272, 2.2323, 2.2228],
     ([2.2967, 2.3044, 2.2973], 240), ((2.5814, 2.6025), 15),
     " NVTE_DPA_FP8_RECIPE stays config_common_fp4.sh's Float8CurrentScaling, without FP8_DPA. The config also sets "
     "TP_COMM_OVERLAP=False, UB_SKIPMC=1, NCCL_NVLS_ENABLE=0 and 16 SMs for the QKV / fc1 dgrad and wgrad "
     "(userbuffers settings, unused without the TP overlap)."),
]


def recipe_text(recipe):
    """The notes' sentence on the NVFP4 switches and the attention precision a config nets to."""
    on = lambda flag: "on" if flag else "off"
    text = (f" NVFP4 switches (sourcing order {recipe['order']}): {recipe['why']}; net: RHT {on(recipe['rht'])}, "
            f"stochastic rounding {on(recipe['sr'])}, 2D weight scaling {on(recipe['w2d'])}.")
    if recipe["fp8_dpa"]:
        text += (f" Core attention in FP8: FP8_DPA=True (config_common_fp8attn.sh, NVTE_DPA_FP8_FORMAT=HYBRID, "
                 f"NVTE_DPA_FP8CS_O_in_F16=1) with NVTE_DPA_FP8_RECIPE={recipe['dpa_recipe']}, cuDNN's FP8 fused "
                 "attention.")
    else:
        text += " Core attention in BF16 (FP8_DPA unset: custom.yaml's fp8_dot_product_attention False)."
    return text


def mlperf_record(model, bench, result_dir, system, nodes, per_node, config_source, config, tp, cp, mbs,
                  gbs, accum, blocks, step_time, recipe, plan_keys, pipeline_text, note):
    """One MLPerf v5.1 NVFP4 row, built as mlperf_training_check_set.llama_common builds the FP8 rows (the FP8 keys
    replaced by the NVFP4 ones)."""
    network, gpu = system
    pp = plan_keys["pp"]
    gpus = nodes * per_node
    assert gpus % (tp * pp * cp) == 0, result_dir
    dp = gpus // (tp * pp * cp)
    assert gbs == mbs * accum * dp, (result_dir, mbs * accum * dp)
    step = median(blocks)
    repo, commit = REPO["v5.1"]
    submitter, _, system_dir = result_dir.split("/", 2)
    plan = {
        "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": 1, "vpp": plan_keys["vpp"], "micro_batch": mbs,
        "global_batch": gbs, "recompute": "none", "sequence_parallel": plan_keys["sequence_parallel"], "zero": 1,
        "distributed_optimizer": True, "grad_reduce_in_fp32": False, "tp_comm_overlap": False,
        "fp4_param_gather": False, "nvfp4_rht": recipe["rht"], "nvfp4_stochastic_rounding": recipe["sr"],
        "fp8_dot_product_attention": recipe["fp8_dpa"], "attention": "cudnn",
    }
    if "pipeline_split" in plan_keys:
        plan["pipeline_split"] = plan_keys["pipeline_split"]
    plan.update({"framework": "NeMo", "framework_version": "25.09"})
    plan.update({k: v for k, v in plan_keys.items() if k not in plan})
    if pp == 1:
        del plan["vpp"]
    notes = (f"Generated by {SCRIPT}. MLPerf Training v5.1, closed division, {submitter}, {system_dir} ({gpus} GPUs, "
             f"{per_node} a node), {model['name']}, NeMo 25.09, NVFP4; plan from {config}: TP {tp}, {pipeline_text}CP "
             f"{cp}, MBS {mbs}; the log's global batch {gbs} and gradient accumulation {accum} (= MBS x accumulation x "
             f"DP {dp}). Step time: median of the training blocks' wall time a step, per result file {blocks} s, "
             f"their median {step} s; the log's train_step_time medians {step_time} s. NVFP4 from "
             "config_common_fp4.sh: FP4=True, FP8=False, FP4_RECIPE nvfp4, FP8_PARAM_GATHER=False (weights gathered "
             "in BF16), TP_COMM_OVERLAP=False ('TP overlap not supported yet'); every transformer layer's linears "
             "NVFP4, the embedding and output layer BF16.")
    notes += recipe_text(recipe) + note
    short = system_dir.split("_")[0].split(".")[0].lower()
    kind = gpu_kind(gpu)
    if short == submitter.lower():
        short = kind
    size = bench.split("_", 1)[1]
    inferred = {
        "plan.attention": "cudnn: no config forces a kernel; the containers' Transformer Engine gives FusedAttention "
                          "(cuDNN) preference on Hopper and later (get_attention_backend)" +
                          ("; FP8 attention runs only in FusedAttention" if recipe["fp8_dpa"] else ""),
        "plan.fp4_param_gather": "false: FP8_PARAM_GATHER=False and no FP4 parameter switch in the 25.09 code's "
                                 "custom.yaml (Megatron-core's fp4_param defaults False)",
    }
    if bench == "llama31_405b":
        inferred["model.vocab"] = ("32000: the benchmark's Mixtral 8x22B tokenizer (the MLCommons reference README; the "
                                   "configs' mock_tokenizer_vocab_size default); NeMo pads it to a multiple of 128 x TP")
    if cp > 1:
        inferred["plan.cp_comm_type"] = "not stated by the configs: Megatron-core's default ring (p2p)"
    if "not the one that ran" in note:
        inferred["plan.nvfp4_stochastic_rounding"] = (
            "the submission's config file (its config_common_8b.sh re-enables stochastic rounding and 2D scaling "
            "after config_common_fp4.sh); the log names another config and prints no environment")
    return {
        "id": f"mlperf51-{submitter.split('+')[-1].lower()}-{short}-llama31-{size}-nvfp4-{gpus}",
        "group": f"mlperf_{bench}_v5.1_nvfp4_{kind}",
        "kind": "training_throughput",
        "source": (f"{repo} at {commit}: {result_dir}/{bench}/result_*.txt (MLLOG), {config_source}, "
                   f"{submitter}/systems/{system_dir}.json"),
        "source_url": f"https://github.com/{repo}/tree/main/{result_dir}/{bench}",
        "source_quality": "primary (the submission's own logs and configuration)",
        "model": dict(model),
        "system": {
            "gpu": gpu, "gpus_per_node": per_node, "nodes": nodes, "total_gpus": gpus, "intra_node_link": "NVLink",
            "inter_node_link": network, "precision": "nvfp4",
        },
        "plan": plan,
        "measured": {"iteration_time_s": step},
        "notes": notes,
        "inferred_fields": inferred,
    }


def llama8b_record(row):
    """A Llama 3.1 8B NVFP4 row: no pipeline, TP 1, one micro-batch a step (two on Nebius's two nodes)."""
    (result_dir, system, nodes, per_node, config_path, tp, cp, mbs, gbs, accum, blocks, step_time, recipe, extra,
     note) = row
    submitter = result_dir.split("/", 1)[0]
    plan = {"pp": 1, "vpp": 1, "sequence_parallel": False, "te_op_fuser": True, **extra}
    record = mlperf_record(LLAMA8B, "llama31_8b", result_dir, system, nodes, per_node,
                           f"{submitter}/benchmarks/{config_path}", config_path.rsplit("/", 1)[-1], tp, cp, mbs, gbs,
                           accum, blocks, step_time, recipe, plan, "", note)
    record["inferred_fields"]["plan.te_op_fuser"] = (
        "true: USE_TE_OPS=True from config_common_8b.sh, which every 8B NVFP4 config here sources (conf/custom.yaml: "
        "use_transformer_engine_op_fuser: ${oc.env:USE_TE_OPS,False}); config_common_fp4.sh leaves it")
    return record


def llama405b_record(row):
    """A Llama 3.1 405B NVFP4 row: pipeline-parallel, the embedding and the loss as a layer each."""
    (result_dir, system, nodes, per_node, config, tp, pp, vp, cp, mbs, gbs, accum, blocks, step_time,
     (first, first_steps), ((lo, hi), short_steps), note) = row
    assert (LLAMA405B["layers"] + 2) % (pp * vp) == 0, row
    impl = result_dir.rsplit("/", 1)[-1]
    plan = {"pp": pp, "vpp": vp, "sequence_parallel": True, "pipeline_split": "ends_as_layers",
            "rank_order": "tp-cp-ep-pp-dp"}
    note = (f" The blocks: each file's first, from the run's start, {first_steps} steps at {first} s a step; the "
            f"{short_steps}-step blocks between evaluations after it at {lo}-{hi} s." + note +
            " ASYM_PP_EMBED=True, ASYM_PP_LOSS=True; TP_PP_DP_MAPPING=True (rank order tp-cp-ep-pp-dp); SEQ_PARALLEL "
            "unset (custom.yaml's True)." + ITER_CG)
    return mlperf_record(LLAMA405B, "llama31_405b", result_dir, system, nodes, per_node,
                         f"NVIDIA/benchmarks/llama31_405b/implementations/{impl}/{config}", config, tp, cp, mbs, gbs,
                         accum, blocks, step_time, RECIPE_405B, plan, f"PP {pp}, VP {vp}, ", note)


# --- Megatron-Bridge -------------------------------------------------------------------------------------------------

# The Megatron-Bridge release each container ships, its tag's commit, and whether its bf16_with_nvfp4_mixed() gathers
# the parameters in FP4 (fp4_param_gather, Megatron-Bridge#3364, 2026-04-21).
RELEASES = {
    "26.02": ("0.3.0", "21b02e0cf", False),
    "26.02.01": ("0.3.1", "9c9dd8489", False),
    "26.04": ("0.4.0", "0fbfe7d3e", False),
    "26.04.01": ("0.4.2", "c81012934", True),
    "26.06": ("0.5.0", "fcbb60311", True),
}
PRESET = {
    ("llama3-70b", "gb300"): ("llama3_workload_base_configs.py", "LLAMA3_70B_PRETRAIN_CONFIG_GB300_NVFP4_V2",
                              "TP 1, PP 4, VP 5, MBS 1"),
    ("llama3-70b", "gb200"): ("llama3_workload_base_configs.py", "LLAMA3_70B_PRETRAIN_CONFIG_GB200_NVFP4_V2",
                              "TP 2, PP 4, VP 5, CP 1, MBS 1"),
    ("llama31-405b", "gb300"): ("llama31_workload_base_configs.py", "LLAMA31_405B_PRETRAIN_CONFIG_GB300_NVFP4_V2",
                                "TP 4, PP 8, VP 4, CP 1, MBS 1, GBS 1536"),
    ("llama31-405b", "gb200"): ("llama31_workload_base_configs.py", "LLAMA31_405B_PRETRAIN_CONFIG_GB200_NVFP4_V2",
                                "TP 4, PP 16, VP 8, CP 1, MBS 1, GBS 1536"),
}

# (container, model, system, GPUs, GBS, MBS, FSDP, TP, PP, CP, VP or None, tokens / s / GPU, note)
MB_ROWS = [
    ("26.02", "llama3-70b", "gb300", 64, 256, 1, 0, 1, 4, 1, 5, 6798, ""),
    ("26.02", "llama3-70b", "gb200", 64, 256, 1, 0, 2, 4, 1, 5, 4458, ""),
    ("26.02", "llama31-405b", "gb300", 256, 1536, 1, 0, 4, 8, 1, 4, 1333, ""),
    ("26.02", "llama31-405b", "gb200", 256, 1536, 1, 0, 4, 16, 1, 8, 1076, ""),
    # Left out: 26.02.01's GB300 70B row (MBS 2, FSDP 0, TP 1, PP 1, VP n/a, 7002 tokens/s/GPU), see the docstring.
    ("26.02.01", "llama3-70b", "gb200", 64, 256, 1, 0, 2, 4, 1, 5, 4557, ""),
    ("26.02.01", "llama31-405b", "gb300", 256, 1536, 1, 0, 4, 8, 1, 4, 1358, ""),
    ("26.02.01", "llama31-405b", "gb200", 256, 1536, 1, 0, 4, 16, 1, 4, 1083,
     " The table prints VP 4, the FP8 row's; the release's preset is VP 8 (as every other release's NVFP4 row "
     "prints): transcribed as printed."),
    ("26.04", "llama3-70b", "gb300", 64, 256, 1, 0, 1, 4, 1, 5, 7397, ""),
    ("26.04", "llama3-70b", "gb200", 64, 256, 1, 0, 2, 4, 1, 5, 4898, ""),
    ("26.04", "llama31-405b", "gb300", 256, 1536, 1, 0, 4, 8, 1, 4, 1424, ""),
    ("26.04", "llama31-405b", "gb200", 256, 1536, 1, 0, 4, 16, 1, 8, 1136, ""),
    ("26.04.01", "llama3-70b", "gb300", 64, 256, 1, 0, 1, 4, 1, 5, 7296, ""),
    ("26.04.01", "llama3-70b", "gb200", 64, 256, 1, 0, 2, 4, 1, 5, 4864, ""),
    ("26.04.01", "llama31-405b", "gb300", 256, 1536, 1, 0, 4, 8, 1, 4, 1440, ""),
    ("26.04.01", "llama31-405b", "gb200", 256, 1536, 1, 0, 4, 16, 1, 8, 1184, ""),
    ("26.06", "llama31-405b", "gb300", 256, 1536, 1, 0, 4, 8, 1, 4, 1413, ""),
    ("26.06", "llama31-405b", "gb200", 256, 1536, 1, 0, 4, 16, 1, 8, 1166, ""),
]


def mb_record(row):
    """One Megatron-Bridge NVFP4 row, built as megatron_bridge_2026_check_set.record builds the FP8 rows."""
    container, model, system, gpus, gbs, mbs, fsdp, tp, pp, cp, vp, tokens, note = row
    m = MODELS[model]
    s = SYSTEMS[system]
    assert gpus % (tp * pp * cp) == 0, row
    dp = gpus // (tp * pp * cp)
    assert gbs % (dp * mbs) == 0, row
    assert fsdp == 0, row
    step = gbs * m["seq"] / (tokens * gpus)
    version = ".".join(container.split(".")[:2])
    release, tag_commit, fp4_gather = RELEASES[container]
    preset_file, preset, preset_plan = PRESET[(model, system)]
    no_pg_overlap = model == "llama31-405b" and system == "gb200" and release in ("0.4.2", "0.5.0")
    plan = {
        "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": 1, "vpp": vp or 1,
        "micro_batch": mbs, "global_batch": gbs, "recompute": "none", "sequence_parallel": tp > 1,
        "zero": 1, "distributed_optimizer": True, "tp_comm_overlap": False,
        "fp4_param_gather": fp4_gather, "nvfp4_rht": True, "nvfp4_stochastic_rounding": True,
        "fp8_dot_product_attention": False,
        "framework": "Megatron-Bridge", "framework_version": version,
    }
    if no_pg_overlap:
        plan["overlap_param_gather"] = False
    notes = (f"Generated by {SCRIPT}. '{container} NeMo Container', {TABLE_MODEL[model]}, {s['table']} NVFP4 row: "
             f"{gpus} GPUs, GBS {gbs}, MBS {mbs}, FSDP {fsdp}, TP {tp}, PP {pp}, CP {cp}, VP {vp if vp else 'n/a'}, "
             f"{tokens} tokens/s/GPU as printed; step time = GBS x sequence / (tokens/s/GPU x GPUs). FSDP 0 = the "
             f"distributed optimizer. Megatron-Bridge {release} (tag v{release}, {tag_commit}): the preset {preset} "
             f"(scripts/performance/configs/llama/{preset_file}: {preset_plan}; no recompute, no offload, "
             "cuda_graph_impl 'none'), tp_comm_overlap False for nvfp4, bf16_with_nvfp4_mixed() (every transformer "
             "layer's linears NVFP4, the embedding and output layer BF16, fp8_dot_product_attention False: BF16 "
             "attention), no NVTE_NVFP4_* variable (Transformer Engine's defaults: RHT on the wgrad operands, "
             "stochastic rounding of the gradients, 2D weight scaling), NVTE_USE_FAST_MATH=1 (perf_plugins.py, not "
             "costed); ")
    notes += ("fp4_param_gather True (bf16_with_nvfp4_mixed(), Megatron-Bridge#3364: the parameters kept and "
              "all-gathered in NVFP4)." if fp4_gather else
              "no FP4 parameter gather (fp4_param_gather came with Megatron-Bridge#3364, in 0.4.2 and later): the "
              "parameters all-gathered in BF16.")
    if no_pg_overlap:
        notes += (" The parameter-gather overlap off (llama31_llm_pretrain.py's disable_param_gather_overlap for "
                  "the GB200 NVFP4 V2 preset, Megatron-Bridge#3713, 'to reduce training peak memory and avoid OOM').")
    notes += note + " The NVL72 rack's 72 GPUs are one NVLink domain; NVIDIA counts 4-GPU compute trays."
    inferred = {
        "plan.nvfp4_rht": "true: no NVTE_NVFP4_DISABLE_RHT in the release's performance scripts (Transformer Engine's "
                          "default)",
        "plan.nvfp4_stochastic_rounding": "true: no NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING in the release's "
                                          "performance scripts (Transformer Engine's default)",
        "plan.fp4_param_gather": f"{str(fp4_gather).lower()}: Megatron-Bridge {release}'s mixed_precision.py",
    }
    return {
        "id": f"mb{container.replace('.', '')}-{system}-{model}-nvfp4-{gpus}",
        "group": f"megatron_bridge_nvfp4_{system}",
        "kind": "training_throughput",
        "source": (f"NVIDIA-NeMo/Megatron-Bridge, docs/performance-summary-archive.md (067f987df): '{container} NeMo "
                   f"Container', Pre-Training Performance, Model: {TABLE_MODEL[model]}, {s['table']} NVFP4 row; "
                   f"v{release}:scripts/performance/configs/llama/{preset_file} ({preset}), "
                   f"v{release}:src/megatron/bridge/training/mixed_precision.py"),
        "source_url": URL,
        "source_quality": "primary (NVIDIA's published Megatron-Bridge performance table)",
        "model": dict(m),
        "system": {
            "gpu": s["gpu"], "gpus_per_node": s["gpus_per_node"], "nodes": gpus // s["gpus_per_node"],
            "total_gpus": gpus, "intra_node_link": s["intra_node_link"], "inter_node_link": s["inter_node_link"],
            "precision": "nvfp4",
        },
        "plan": plan,
        "measured": {"iteration_time_s": None, "tokens_per_s_per_gpu": tokens},
        "derived": {"iteration_time_s": step, "how": "INFERRED: GBS x seq / (tokens/s/GPU x GPUs)"},
        "notes": notes,
        "inferred_fields": inferred,
    }


def records():
    return ([llama8b_record(r) for r in LLAMA8B_ROWS] + [llama405b_record(r) for r in LLAMA405B_ROWS] +
            [mb_record(r) for r in MB_ROWS])


if __name__ == "__main__":
    write_check_set("check_nvfp4_blackwell.json", records())
