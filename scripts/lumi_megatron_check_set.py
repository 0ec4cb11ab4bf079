"""Writes data/validation/check_lumi_megatron_mi250x.json: ROCm Megatron-LM's Llama 2 7B on LUMI-G's MI250X GCDs.

Source: Lumi-supercomputer/lumi-reframe-tests at a6d79840e3, checks/apps/megatron-lm/megatron.py (the ReFrame
performance references, 'tokens/GPU/s' per node count, each met within -5%) and torch_llama2.sh (AMD's launch script
it runs: ROCm/Megatron-LM with megatron-core models and Transformer Engine). The job's line in megatron.py:
MBS=2 BS=256 TP=2 TE_FP8=0 SEQ_LENGTH=4096 MODEL_SIZE=7 USE_FLASH_ATTN=1 GEMM_TUNING=1, container
rocm-6.2.4-python-3.12-pytorch-v2.6.0, 8 GCDs a node (num_gpus_per_node = 8; Slurm and HIP count GCDs).
torch_llama2.sh's defaults: PP=1 CP=1 SEQ_PARALLEL=1 RECOMPUTE=0, --bf16, --use-distributed-optimizer
--overlap-param-gather --overlap-grad-reduce, --no-async-tensor-model-parallel-allreduce,
--no-gradient-accumulation-fusion, --untie-embeddings-and-output-weights, --swiglu, RMSNorm, rope, no biases.
Run from the repository root: python3 scripts/lumi_megatron_check_set.py
"""
from check_set_io import write_check_set

SOURCE = ("Lumi-supercomputer/lumi-reframe-tests checks/apps/megatron-lm/megatron.py and torch_llama2.sh (a6d79840e3): "
          "LUMI's ReFrame performance references for ROCm/Megatron-LM's Llama 2 7B pre-training on LUMI-G, container "
          "rocm-6.2.4 / PyTorch 2.6.0 (2025)")
URL = "https://github.com/Lumi-supercomputer/lumi-reframe-tests/blob/main/checks/apps/megatron-lm/megatron.py"
GBS, SEQ = 256, 4096

# (nodes, tokens/s per GCD as referenced, TFLOP/s per GCD as referenced, the file's comment)
ROWS = [
    (2, 1950, 91, ""),
    (8, 1880, 88, ""),
    (16, 1820, 83, "the file's comment: 16-node runs 'varied from 74 to 104' TFLOP/s, 1700-2000 tokens/s"),
]


def record(nodes, tokens, tflops, comment):
    gcds = 8 * nodes
    step = GBS * SEQ / (tokens * gcds)
    return {
        "id": f"lumi-megatron-llama2-7b-{gcds}gcd",
        "group": "lumi_megatron_rocm_mi250x",
        "kind": "training_throughput",
        "source": SOURCE,
        "source_url": URL,
        "source_quality": "regression references (the site's expected throughput, each met within -5%), not single "
                          "measurements",
        "model": {"name": "Llama 2 7B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32,
                  "ffn_hidden": 11008, "vocab": 32000, "seq": SEQ, "activation": "swiglu", "norm": "rmsnorm",
                  "position_embedding": "rope", "tied_embeddings": False, "biases": False, "dropout": 0.0},
        "system": {"gpu": "AMD Instinct MI250X, one GCD a GPU (Slurm and HIP count GCDs)", "gpus_per_node": 8,
                   "nodes": nodes, "total_gpus": gcds,
                   "intra_node_link": "Infinity Fabric between the 8 GCDs of 4 MI250X (LUMI-G node)",
                   "inter_node_link": "4x Slingshot-11 200 Gb/s per node (one NIC per MI250X)",
                   "precision": "bf16 (--bf16)"},
        "plan": {"tp": 2, "pp": 1, "cp": 1, "dp": gcds // 2, "micro_batch": 2, "global_batch": GBS,
                 "recompute": "none (RECOMPUTE=0)", "sequence_parallel": True, "zero": 1,
                 "distributed_optimizer": True, "overlap_grad_reduce": True, "overlap_param_gather": True,
                 "async_tp_grad_reduce": False, "gradient_accumulation_fusion": False,
                 "framework": "Megatron-LM (ROCm/Megatron-LM, megatron-core models, Transformer Engine)",
                 "attention": "flash attention 2 (--use-flash-attn, ROCm's Composable Kernel backend)"},
        "measured": {"iteration_time_s": None, "tokens_per_s_per_gpu": tokens, "tflops_per_gpu": tflops},
        "derived": {"iteration_time_s": step,
                    "how": f"INFERRED: global batch {GBS} x sequence {SEQ} / ({tokens} tokens/s/GCD x {gcds} GCDs)"},
        "inferred_fields": {
            "plan.dp": "GCDs / tp",
            "model.vocab": "the HuggingFace tokenizer NousResearch/Llama-2-7b-chat-hf (TOKENIZER_MODEL default): 32000",
        },
        "notes": "torch_llama2.sh passes --no-gradient-accumulation-fusion: each micro-batch's bf16 weight gradient is "
                 "added into the fp32 main_grad (the plan's gradient_accumulation_fusion false). Not costed: GEMM_TUNING=1 "
                 "(hipBLASLt's per-shape tuning, which the MAMF plateau stands for)." +
                 (" " + comment if comment else ""),
    }


write_check_set("check_lumi_megatron_mi250x.json", [record(*row) for row in ROWS])
