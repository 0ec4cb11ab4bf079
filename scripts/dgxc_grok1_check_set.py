#!/usr/bin/env python3
"""Writes data/validation/check_dgxc_grok1_moe.json: NVIDIA's DGX Cloud Grok-1 314B recipe, a mixture of experts on H100.

The step times are transcribed from NVIDIA/dgxc-benchmarking grok1/README_314b.md at commit 1b9bb6b (2025-05-21,
release v25.03), 'Expected Performance': 'Training step time (seconds per step)' on 8 to 2048 H100 in BF16 and FP8.
The plan of each GPU count is the recipe's own (grok1/configure.sh at the same commit; it also sets the layer count,
which the table prints): tp 4 with sequence parallelism, pp 1-8 with 8 virtual stages where pp > 1, cp 1-2, ep 2-8,
micro-batch 1, no activation recompute, TP communication overlap (model.ub_tp_comm_overlap=true), FP8 parameters in
FP8 runs, and NVTE_FUSED_ATTN=0 (Transformer Engine falls back to FlashAttention-2). grok1_314b.yaml: hidden 6144, 48
heads and 8 key/value groups, expert ffn 32768 with fast-geglu, 8 experts, top-2, the all-to-all dispatcher with
capacity factor 1.0 (padded), mcore's distributed optimizer overlapping its gradient and parameter collectives, the
Llama 3 tokenizer (vocabulary 128256); NeMo 24.12 (launch.sh FW_VERSION).
Run from the repository root: python3 scripts/dgxc_grok1_check_set.py
"""
from check_set_io import write_check_set

URL = "https://github.com/NVIDIA/dgxc-benchmarking/blob/1b9bb6b/grok1/README_314b.md"

# GPUs: (sequence, layers, tp, pp, cp, ep, vpp, global batch, BF16 seconds, FP8 seconds); the README's table and
# configure.sh (GBS 1024 to 512 GPUs, 16 a node above).
ROWS = {
    8: (4096, 2, 4, 1, 1, 2, 1, 1024, 24.00, 19.71),
    16: (4096, 4, 4, 1, 1, 4, 1, 1024, 21.71, 17.80),
    32: (4096, 4, 4, 1, 1, 8, 1, 1024, 10.70, 8.70),
    64: (8192, 8, 4, 1, 2, 8, 1, 1024, 21.42, 17.53),
    128: (8192, 16, 4, 2, 2, 8, 8, 1024, 20.73, 16.70),
    256: (8192, 32, 4, 4, 2, 8, 8, 1024, 20.83, 16.75),
    512: (8192, 64, 4, 8, 2, 8, 8, 1024, 21.01, 16.90),
    1024: (8192, 64, 4, 8, 2, 8, 8, 2048, 21.20, 17.01),
    2048: (8192, 64, 4, 8, 2, 8, 8, 4096, 21.29, 17.30),
}


def record(gpus, precision):
    seq, layers, tp, pp, cp, ep, vpp, gbs, bf16_s, fp8_s = ROWS[gpus]
    dp = gpus // (tp * pp * cp)
    assert tp * pp * cp * dp == gpus and dp % ep == 0, gpus
    fp8 = precision == "fp8"
    plan = {
        "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "vpp": vpp, "micro_batch": 1, "global_batch": gbs,
        "recompute": "none", "sequence_parallel": True, "zero": 1, "distributed_optimizer": True,
        "framework": "NeMo", "framework_version": "24.12", "attention": "flash2", "tp_comm_overlap": True,
    }
    if fp8:
        plan["fp8_param_gather"] = True
    return {
        "id": f"dgxc-grok1-314b-{gpus}-{precision}",
        "group": "dgxc_grok1_moe_h100",
        "kind": "training_throughput",
        "source": (f"NVIDIA DGX Cloud benchmarking recipes (NVIDIA/dgxc-benchmarking) grok1/README_314b.md at 1b9bb6b: "
                   f"'Expected Performance', training step time on {gpus}x H100, {precision.upper()}"),
        "source_url": URL,
        "model": {
            "name": f"Grok-1 314B ({layers} of its 64 layers)" if layers < 64 else "Grok-1 314B",
            "layers": layers, "hidden": 6144, "heads": 48, "kv_heads": 8, "ffn_hidden": 32768, "vocab": 128256,
            "seq": seq, "experts": 8, "top_k": 2, "activation": "fast-geglu", "norm": "rmsnorm",
            "position_embedding": "rope",
        },
        "system": {
            "gpu": "H100 80GB SXM", "gpus_per_node": 8, "nodes": gpus // 8, "total_gpus": gpus,
            "intra_node_link": "NVLink", "inter_node_link": "InfiniBand NDR 400 Gb/s", "precision": precision,
        },
        "plan": plan,
        "measured": {"iteration_time_s": fp8_s if fp8 else bf16_s},
        "inferred_fields": {
            "plan.dp": "the GPUs over tp x pp x cp; the table's DP column is that over ep (the expert data parallelism)",
            "model.vocab": "tokenizer meta-llama/Meta-Llama-3-70B (grok1_314b.yaml), 128256 tokens, a multiple of 128",
        },
        "notes": ("Table title and columns as printed: GPUs, sequence, layers, TP, PP, CP, EP, DP (= GPUs / (TP PP CP "
                  "EP)), VP, MBS, GBS and 'Training step time (seconds per step)', the last of 50 steps "
                  "(train_step_timing). The recipe's files at the same commit give the rest: configure.sh (layers, "
                  "pp, cp, ep, vp and GBS per node count; ub_tp_comm_overlap=true, sequence_parallel=true, fp8_params "
                  "with FP8; NVTE_FUSED_ATTN=0), grok1_314b.yaml (no activation checkpointing, moe_grouped_gemm false, "
                  "alltoall dispatcher, moe_pad_expert_input_to_capacity with capacity factor 1.0, "
                  "mcore_distributed_optim with overlap_grad_sync and overlap_param_sync, grad_sync_dtype bf16, "
                  "overlap_p2p_comm true), launch.sh (FW_VERSION 24.12). The smaller runs carry 2-32 of Grok-1's 64 "
                  "layers, as the recipe sets them."),
    }


def main():
    write_check_set("check_dgxc_grok1_moe.json", [record(g, p) for p in ("bf16", "fp8") for g in ROWS])


if __name__ == "__main__":
    main()
