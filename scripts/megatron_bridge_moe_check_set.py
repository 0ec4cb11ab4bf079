#!/usr/bin/env python3
"""Writes data/validation/check_megatron_bridge_moe_h100.json: Megatron-Bridge's Qwen3 MoE pre-training rows on H100.

The rows are transcribed from NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md at commit 067f987df
(2026-08): the Qwen3_30B_a3B and Qwen3_235B_a22B DGX-H100 FP8 rows of the 26.02-26.04.01 NeMo containers whose
printed plan is the recipe's at that commit (src/megatron/bridge/perf_recipes/qwen/h100/qwen3_moe.py,
qwen3_30b_a3b_pretrain_16gpu_h100_fp8cs_config and qwen3_235b_a22b_pretrain_256gpu_h100_fp8cs_config, on
recipes/qwen/h100/qwen3_moe.py and perf_recipes/_common.py). Left out: 26.02 and 26.02.01's Qwen3-30B rows (PP 2 x
VP 12 x EP 8, a plan that recipe no longer holds), 26.06's (FSDP 1: Megatron FSDP, another recipe), the 25.x rows
(their recipes are not at this commit), GPT-OSS 120B (attention sinks and a cuDNN regression the table footnotes),
Nemotron 3 (Mamba layers, which tessel does not cost). The tables print tokens per second per GPU; the step time is
GBS x sequence / (that x GPUs).

What the tables do not print, from those recipes: FP8 is fp8_cs (per-tensor current scaling); no activation
recompute; experts not split over TP (expert_tensor_parallel_size 1: the 235B's experts over tp x dp); the distributed optimizer with overlapped gradient reduction and parameter gather (the 235B's gather
with the optimizer step); gradients reduced in bf16 (_benchmark_common: grad_reduce_in_fp32 False); Transformer
Engine's cross-entropy; routing forced to balance (moe_router_force_load_balancing, as tessel routes); the 30B with
HybridEP's flex dispatcher (32 SMs) and no batch-level overlap; the 235B with the all-to-all dispatcher, Megatron-core's
batch-level EP overlap (overlap_moe_expert_parallel_comm) and the embedding and the loss each counted as a layer in the
pipeline split (recipes/qwen/h100/qwen3_moe.py: account_for_embedding/loss_in_pipeline_split; 94 + 2 = 32 x 3). The
CUDA graphs of the 30B's attention and router (cuda_graph_scope) are not costed.

Beside them, one controlled pair from the repository's own expert-parallel overlap skill (2026-07-25, the commit that
turned the overlap on for this recipe, 7ded17dae: skills/nemo-mbridge-perf-expert-parallel-overlap/SKILL.md and
card.yaml, examples/model_verification_cards/qwen3-30b-a3b/card.yaml): Qwen3-30B-A3B pre-training on 16 H100 in BF16,
TP 1, PP 1, EP 16, MBS 1, GBS 1024, sequence 4096, HybridEP, forced-balance routing, CUDA graphs of the router and
the HybridEP preprocessing, delayed weight gradients off, with only overlap_moe_expert_parallel_comm switched: 24.7138
s a step without (iterations 5-20), 20.99203 s with (iterations 41-50 of an independent run; the search run's 5-20:
21.0725 s). The plan is that commit's perf recipe (perf_recipes/qwen/h100/qwen3_moe.py,
qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config on recipes/qwen/h100/qwen3_moe.py: moe_hybridep_num_sms 32, the
distributed optimizer, gradients reduced in bf16, no recompute). The same skill's plain all-to-all pair (an SFT run of
41.25 / 31.31 s) is left out: its sequence length is not given.
Run from the repository root: python3 scripts/megatron_bridge_moe_check_set.py
"""
from check_set_io import write_check_set

URL = "https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/main/docs/performance-summary-archive.md"

MODELS = {
    # Hugging Face configs (Qwen/Qwen3-30B-A3B, Qwen/Qwen3-235B-A22B): every layer an MoE layer (decoder_sparse_step
    # 1, no mlp_only_layers), 128 experts, top 8, no shared expert, QK norm, untied embeddings; sequence 4096 here.
    "qwen3-30b-a3b": {"name": "Qwen3-30B-A3B", "layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4,
                      "head_dim": 128, "ffn_hidden": 6144, "vocab": 151936, "seq": 4096, "num_experts": 128,
                      "num_experts_per_tok": 8, "moe_intermediate_size": 768, "activation": "swiglu",
                      "norm": "rmsnorm", "qk_norm": True, "position_embedding": "rope", "tied_embeddings": False},
    "qwen3-235b-a22b": {"name": "Qwen3-235B-A22B", "layers": 94, "hidden": 4096, "heads": 64, "kv_heads": 4,
                        "head_dim": 128, "ffn_hidden": 12288, "vocab": 151936, "seq": 4096, "num_experts": 128,
                        "num_experts_per_tok": 8, "moe_intermediate_size": 1536, "activation": "swiglu",
                        "norm": "rmsnorm", "qk_norm": True, "position_embedding": "rope", "tied_embeddings": False},
}
TABLE_MODEL = {"qwen3-30b-a3b": "Qwen3_30B_a3B", "qwen3-235b-a22b": "Qwen3_235B_a22B"}

# (container, model, GPUs, GBS, MBS, TP, PP, VP or None, EP, tokens / s / GPU), every row FP8 on DGX-H100, FSDP 0, CP 1.
ROWS = [
    ("26.04", "qwen3-30b-a3b", 16, 1024, 1, 1, 1, None, 16, 8901),
    ("26.04.01", "qwen3-30b-a3b", 16, 1024, 1, 1, 1, None, 16, 8960),
    ("26.02", "qwen3-235b-a22b", 256, 8192, 1, 2, 8, 4, 32, 1633),
    ("26.02.01", "qwen3-235b-a22b", 256, 8192, 1, 2, 8, 4, 32, 1611),
    ("26.04", "qwen3-235b-a22b", 256, 8192, 1, 2, 8, 4, 32, 1686),
    ("26.04.01", "qwen3-235b-a22b", 256, 8192, 1, 2, 8, 4, 32, 1712),
]


def record(row):
    container, model, gpus, gbs, mbs, tp, pp, vp, ep, tokens = row
    m = MODELS[model]
    assert gpus % (tp * pp) == 0, row
    dp = gpus // (tp * pp)
    assert gbs % (dp * mbs) == 0 and (tp * dp) % ep == 0, row
    step = gbs * m["seq"] / (tokens * gpus)
    version = ".".join(container.split(".")[:2])
    rid = f"mb{container.replace('.', '')}-h100-{model}-fp8-{gpus}"
    plan = {
        "tp": tp, "pp": pp, "dp": dp, "cp": 1, "ep": ep, "vpp": vp or 1,
        "micro_batch": mbs, "global_batch": gbs, "recompute": "none", "sequence_parallel": tp > 1,
        "zero": 1, "distributed_optimizer": True, "grad_reduce_in_fp32": False, "cross_entropy": "te",
        "framework": "Megatron-Bridge", "framework_version": version,
    }
    if model == "qwen3-30b-a3b":
        plan["moe_token_dispatcher_type"] = "flex"
        plan["moe_flex_dispatcher_backend"] = "hybridep"
    else:
        plan["moe_token_dispatcher_type"] = "alltoall"
        plan["expert_tensor_parallel_size"] = 1  # the recipe's: experts over tp x dp = 32 ranks (MoE parallel folding)
        plan["overlap_moe_expert_parallel_comm"] = True
        plan["pipeline_split"] = "ends_as_layers"
    notes = (f"Generated by scripts/megatron_bridge_moe_check_set.py. '{container} NeMo Container', {TABLE_MODEL[model]}, "
             f"DGX-H100 FP8 row: {gpus} GPUs, GBS {gbs}, MBS {mbs}, FSDP 0, TP {tp}, PP {pp}, CP 1, "
             f"VP {vp if vp else 'n/a'}, EP {ep}, {tokens} tokens/s/GPU as printed; step time = GBS x sequence / "
             "(tokens/s/GPU x GPUs). FP8 is fp8_cs (per-tensor current scaling); no activation recompute; the "
             "distributed optimizer, gradients reduced in bf16; routing forced to balance (the recipe).")
    if model == "qwen3-30b-a3b":
        notes += " HybridEP's flex dispatcher, no batch-level EP overlap; the attention's and router's CUDA graphs not costed."
    else:
        notes += (" The all-to-all dispatcher with Megatron-core's batch-level EP overlap; the embedding and the loss "
                  "counted as a layer each in the pipeline split (94 + 2 = 32 virtual stages x 3).")
    return {
        "id": rid,
        "group": "megatron_bridge_moe_h100",
        "kind": "training_throughput",
        "source": (f"NVIDIA-NeMo/Megatron-Bridge, docs/performance-summary-archive.md (067f987df): '{container} NeMo "
                   f"Container', Pre-Training Performance, Model: {TABLE_MODEL[model]}, DGX-H100 FP8 row"),
        "source_url": URL,
        "source_quality": "primary (NVIDIA's published Megatron-Bridge performance table)",
        "model": dict(m),
        "system": {
            "gpu": "H100 80GB SXM", "gpus_per_node": 8, "nodes": gpus // 8, "total_gpus": gpus,
            "intra_node_link": "NVLink", "inter_node_link": "InfiniBand NDR 400 Gb/s", "precision": "FP8",
        },
        "plan": plan,
        "measured": {"iteration_time_s": None, "tokens_per_s_per_gpu": tokens},
        "derived": {"iteration_time_s": step, "how": "INFERRED: GBS x seq / (tokens/s/GPU x GPUs)"},
        "notes": notes,
    }


SKILL_URL = ("https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/main/skills/nemo-mbridge-perf-expert-parallel-overlap/"
             "SKILL.md")

# (overlap on, step seconds, steady window, model TFLOP/s/GPU as printed)
OVERLAP_PAIR = [(False, 24.7138, "iterations 5-20", 244.039), (True, 20.99203, "iterations 41-50", 287.305)]


def overlap_record(row):
    overlap, step, window, tflops = row
    plan = {
        "tp": 1, "pp": 1, "dp": 16, "cp": 1, "ep": 16, "vpp": 1,
        "micro_batch": 1, "global_batch": 1024, "recompute": "none", "sequence_parallel": False,
        "zero": 1, "distributed_optimizer": True, "grad_reduce_in_fp32": False, "cross_entropy": "te",
        "framework": "Megatron-Bridge", "framework_version": "26.06",
        "moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "hybridep",
        "overlap_moe_expert_parallel_comm": overlap,
    }
    notes = (f"Generated by scripts/megatron_bridge_moe_check_set.py. Megatron-Bridge's expert-parallel overlap skill "
             f"(7ded17dae, 2026-07-25), the HybridEP production-shape benchmark: Qwen3-30B-A3B pre-training, 16 H100, "
             f"BF16, TP 1, PP 1, CP 1, EP 16, MBS 1, GBS 1024, sequence 4096, forced-balance routing, HybridEP (32 SMs, "
             f"permutation fused into it), CUDA graphs of moe_router and moe_preprocess, delayed wgrad off; plain EP "
             f"overlap {'on' if overlap else 'off'}: {step} s a step over {window}, {tflops} model TFLOP/s/GPU as "
             f"printed. The skill's matched Nsight A/B of rank 0: communication concurrent with GEMM or attention 9.079 ms "
             f"(0.11% of communication time) off, 3958.997 ms (36.55%) on; GPU-active interval union 22.821 s off, "
             f"21.221 s on. The container is not named (the recipe at Megatron-Bridge 8198fd9cd, 2026-07-24): read "
             f"as 26.06's defaults. The CUDA graphs are not costed.")
    measured = {"iteration_time_s": step}
    if overlap:  # the skill's only memory figure, of the overlapped run
        measured.update({"memory_gb": 62.166, "memory_unit": "GiB",
                         "memory_kind": "peak allocated (rank 0's, 'rank0_peak_allocated_gib')"})
    return {
        "id": f"mb-skill-h100-qwen3-30b-a3b-bf16-16-epoverlap-{'on' if overlap else 'off'}",
        "group": "megatron_bridge_ep_overlap_h100",
        "kind": "training_throughput",
        "source": ("NVIDIA-NeMo/Megatron-Bridge, skills/nemo-mbridge-perf-expert-parallel-overlap/SKILL.md and card.yaml "
                   "(7ded17dae, 2026-07-25): 'HybridEP Production-Shape Benchmark', "
                   f"'overlap {'on, independent validation' if overlap else 'off'}'"),
        "source_url": SKILL_URL,
        "source_quality": "primary (NVIDIA's controlled A/B in the framework's own repository, step times as measured)",
        "model": dict(MODELS["qwen3-30b-a3b"]),
        "system": {
            "gpu": "H100 80GB SXM", "gpus_per_node": 8, "nodes": 2, "total_gpus": 16,
            "intra_node_link": "NVLink", "inter_node_link": "InfiniBand NDR 400 Gb/s", "precision": "BF16",
        },
        "plan": plan,
        "measured": measured,
        "notes": notes,
        "inferred_fields": {
            "plan.framework_version": "not named by the skill; the recipe is Megatron-Bridge's of 2026-07-24 (8198fd9cd), "
                                      "read under 26.06's defaults",
            "plan.zero": "the recipe's distributed optimizer (use_distributed_optimizer True)",
            "plan.grad_reduce_in_fp32": "the recipe's (grad_reduce_in_fp32 False)",
            "system.inter_node_link": "DGX H100 (one 400 Gb/s NDR port per GPU); the skill says 16xH100",
        },
    }


if __name__ == "__main__":
    write_check_set("check_megatron_bridge_moe_h100.json",
                    [record(r) for r in ROWS] + [overlap_record(r) for r in OVERLAP_PAIR])
