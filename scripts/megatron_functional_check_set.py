#!/usr/bin/env python3
"""Writes data/validation/check_megatron_functional_memory_speed.json: Megatron-LM's own memory-and-speed CI runs.

Megatron-LM's functional tests gpt3_7b_tp1_pp4_memory_speed and gpt3_7b_tp4_pp1_memory_speed train a 7B GPT
(Llama 3 8B's attention shape, GeLU MLP of 4 x hidden) for 25 iterations on one 8-GPU node and keep what they
measured as golden values: the iteration time (Megatron's "elapsed time per iteration", every other iteration), the
allocated memory after each step and the allocator's peak (torch.cuda.memory_stats() "allocated_bytes.all.peak",
written to TensorBoard by the last rank, world_size - 1: the last pipeline stage). The runs are the regression tests
of Megatron-core's deterministic mode, not tuned for speed: NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, NCCL_ALGO=Ring,
--deterministic-mode, --no-gradient-accumulation-fusion. Values are read from the golden-value files at the commits
below (NVIDIA/Megatron-LM), the configuration from each test's model_config.yaml and the node from
tests/test_utils/recipes/{h100,gb200}/gpt.yaml (1 node x 8 GPUs; GB200: 2 trays x 4). The step time is the median
of the steady iterations (iteration 2, the warm-up, left out); A100's files keep iterations 10 and 20 only.
Run from the repository root: python3 scripts/megatron_functional_check_set.py
"""
from check_set_io import write_check_set

REPO = "https://github.com/NVIDIA/Megatron-LM/blob/{commit}/tests/functional_tests/test_cases/gpt/{case}/{file}"

MODEL = {
    # model_config.yaml: --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention
    # --num-query-groups 8 --seq-length 8192 --vocab-size 131073 (NullTokenizer) --untie-embeddings-and-output-weights;
    # no --swiglu, --normalization, --disable-bias-linear or --position-embedding-type: Megatron's defaults, GeLU
    # with ffn_hidden_size 4 x hidden, LayerNorm, biases, learned absolute positions (--max-position-embeddings
    # 8192), attention and hidden dropout 0.1.
    "name": "GPT 7B (Megatron-LM functional test: 32 layers, GQA 8, GeLU MLP)",
    "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 16384, "vocab": 131073, "seq": 8192,
    "activation": "gelu", "norm": "layernorm", "position_embedding": "learned", "bias": True, "dropout": 0.1,
    "tied_embeddings": False,
}

SYSTEMS = {
    "dgx_h100": {"gpu": "H100 80GB SXM", "gpus_per_node": 8, "nodes": 1, "total_gpus": 8,
                 "intra_node_link": "NVLink", "inter_node_link": "InfiniBand NDR 400 Gb/s"},
    "dgx_a100": {"gpu": "A100 80GB SXM", "gpus_per_node": 8, "nodes": 1, "total_gpus": 8,
                 "intra_node_link": "NVLink", "inter_node_link": "InfiniBand HDR 200 Gb/s"},
    "dgx_gb200": {"gpu": "GB200 (DGX GB200, NVL72)", "gpus_per_node": 4, "nodes": 2, "total_gpus": 8,
                  "intra_node_link": "NVLink 5 (NVL72)", "inter_node_link": "InfiniBand NDR 400 Gb/s"},
}

PLANS = {
    # tp1 pp4: --num-layers-per-virtual-pipeline-stage 1 (8 chunks a rank), micro-batch 1, global batch 8 over dp 2:
    # 4 micro-batches a step. tp4 pp1: micro-batch 2, global 8 over dp 2: 2 micro-batches. Both: the distributed
    # optimizer, --overlap-grad-reduce --overlap-param-gather, Transformer Engine, bf16, no recompute, no sequence
    # parallelism, CUDA_DEVICE_MAX_CONNECTIONS=1.
    "gpt3_7b_tp1_pp4_memory_speed": {"tp": 1, "pp": 4, "dp": 2, "cp": 1, "vpp": 8, "micro_batch": 1},
    "gpt3_7b_tp4_pp1_memory_speed": {"tp": 4, "pp": 1, "dp": 2, "cp": 1, "micro_batch": 2},
}

# (case, platform, golden-value commit and its date, step s (median of steady iterations), peak allocated bytes,
#  allocated bytes after the step)
ROWS = [
    ("gpt3_7b_tp1_pp4_memory_speed", "dgx_h100", "6e091e1b68", "2026-05-30", 1.1502, 60720852992, 24808996864),
    ("gpt3_7b_tp4_pp1_memory_speed", "dgx_h100", "6e091e1b68", "2026-05-30", 1.1149, 57143791616, 20663519232),
    ("gpt3_7b_tp1_pp4_memory_speed", "dgx_gb200", "7e6a045a2a", "2026-07-25", 0.7871, 60519342080, 24540168192),
    ("gpt3_7b_tp4_pp1_memory_speed", "dgx_gb200", "7e6a045a2a", "2026-07-25", 0.8526, 58217476096, 20663463936),
    ("gpt3_7b_tp1_pp4_memory_speed", "dgx_a100", "adc69dba2d", "2025-10-21", 2.9424, 60489064448, 24511029248),
    ("gpt3_7b_tp4_pp1_memory_speed", "dgx_a100", "adc69dba2d", "2025-10-21", 2.5868, 58188115968, 20634103808),
]


def record(case, platform, commit, date, step_s, peak_bytes, after_bytes):
    plan = dict(PLANS[case])
    plan.update({"global_batch": 8, "recompute": "none", "sequence_parallel": False, "distributed_optimizer": True,
                 "overlap_grad_reduce": True, "overlap_param_gather": True, "tp_comm_overlap": False,
                 "framework": "Megatron-LM", "framework_version": date[:4], "deterministic": True,
                 "gradient_accumulation_fusion": False})
    system = dict(SYSTEMS[platform])
    system["precision"] = "bf16"
    file = f"golden_values_dev_{platform}.json"
    short = case.replace("gpt3_7b_", "").replace("_memory_speed", "")
    return {
        "id": f"mlmft-7b-{short.replace('_', '-')}-{platform.replace('dgx_', '')}",
        "group": "megatron_lm_functional_memory_speed",
        "kind": "training_throughput",
        "source": (f"NVIDIA/Megatron-LM tests/functional_tests/test_cases/gpt/{case}/{file} at {commit} ({date}) "
                   "and model_config.yaml"),
        "source_url": REPO.format(commit=commit, case=case, file=file),
        "model": dict(MODEL),
        "system": system,
        "plan": plan,
        "measured": {
            "iteration_time_s": step_s,
            "max_memory_allocated_gib": round(peak_bytes / 2**30, 3),
            "memory_kind": "allocated (torch.cuda.memory_stats allocated_bytes.all.peak)",
            "memory_stage": "last",
            "memory_allocated_after_step_gib": round(after_bytes / 2**30, 3),
        },
        "notes": ("Megatron-LM's deterministic-mode memory and speed regression test, 25 iterations of mock data: "
                  "NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, NCCL_ALGO=Ring, --deterministic-mode, "
                  "--no-gradient-accumulation-fusion, CUBLAS_WORKSPACE_CONFIG=:4096:8, --log-params-norm, "
                  "--log-num-zeros-in-grad. Step: the median of the golden iteration times after the first logged "
                  "one. Memory: the last rank's (TensorBoard is written by rank world_size - 1)."),
    }


def main():
    write_check_set("check_megatron_functional_memory_speed.json", [record(*r) for r in ROWS])


if __name__ == "__main__":
    main()
