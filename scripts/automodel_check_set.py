#!/usr/bin/env python3
"""Writes data/validation/check_automodel_h100.json: NVIDIA NeMo AutoModel's pre-training benchmarks on DGX H100.

NeMo AutoModel trains Hugging Face-style models with PyTorch FSDP2 (NVIDIA-NeMo/Automodel). Its
docs/performance-summary.md prints, for DGX-H100 in BF16, the time per global step of benchmark recipes whose YAML
files the same repository holds. Three rows are read here, each with the recipe of the commit that published it:

- Qwen3 MoE 30B (Qwen3-30B-A3B) on 8 GPUs, 21.773 s: docs/performance-summary.md at 89e3a9fdd (2025-10-06, the table's
  first version) and examples/benchmark/configs/qwen3_moe_30b_te_deepep.yaml at the same commit: FSDP2 over 8 ranks
  with expert parallelism 8, local batch 4 (the table: GBS 512, MBS 4, GA 16), activation checkpointing, Transformer
  Engine attention, linears and RMSNorm, DeepEP as the token dispatcher, `fake_balanced_gate: true`, MaskedCrossEntropy
  with `fp32_upcast: false`, torch.optim.Adam. The YAML's global_batch_size is 256; the table's 512 (GA 16) is what
  was timed and is read.
- Llama 3.1 70B on 64 GPUs, 18.90 s: docs/performance-summary.md at 2013a4dd6 (2026-04-10, "FSDP2 w weight
  prefetching") and examples/llm_pretrain/custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml at the same commit:
  FSDP2 over dp 32 x cp 2 (sequence 8192), local batch 1 (GA 4, GBS 128), activation checkpointing, torch.compile,
  SDPA attention (context parallelism needs it), the Hugging Face Llama code, MaskedCrossEntropy (fp32_upcast
  default true), Transformer Engine's FusedAdam, FSDP2 prefetching, gradient sync every micro-batch
  (defer_fsdp_grad_sync false).
- DeepSeek-V3 671B on 256 GPUs, 8.18 s: the table of 89e3a9fdd and examples/benchmark/configs/deepseek_v3_te_deepep.yaml
  at the same commit: pp 4 (AutoPipeline, interleaved 1F1B, 32 virtual stages), EP 64, FSDP2 over 64, the Qwen3 row's
  kernels, gate, loss and optimizer, the shared expert on its own stream.

What the recipes run that tessel reads in its own words is listed in each record's inferred_fields.
Run from the repository root: python3 scripts/automodel_check_set.py
"""
from check_set_io import write_check_set

REPO = "https://github.com/NVIDIA-NeMo/Automodel/blob"
H100 = {"gpu": "H100 80GB SXM", "gpus_per_node": 8, "intra_node_link": "NVLink",
        "inter_node_link": "InfiniBand NDR 400 Gb/s", "precision": "bf16"}


def qwen3_moe_30b():
    return {
        "id": "automodel-qwen3-moe-30b-8gpu",
        "group": "automodel_h100",
        "kind": "training_throughput",
        "source": ("NVIDIA-NeMo/Automodel docs/performance-summary.md at 89e3a9fdd (2025-10-06): 'Pre-Training "
                   "Performance', System: DGX-H100, Precision: BF16, Qwen3 MoE 30B, 'Time per Global Step (s)'; recipe "
                   "examples/benchmark/configs/qwen3_moe_30b_te_deepep.yaml at 89e3a9fdd"),
        "source_url": f"{REPO}/89e3a9fdd/docs/performance-summary.md",
        "model": {
            "name": "Qwen3-30B-A3B", "layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4, "head_dim": 128,
            "ffn_hidden": 6144, "vocab": 151936, "seq": 4096, "num_experts": 128, "num_experts_per_tok": 8,
            "moe_intermediate_size": 768, "activation": "swiglu", "norm": "rmsnorm", "qk_norm": True,
            "position_embedding": "rope", "routing_groups": 16, "groups_per_token": 1,
        },
        "system": dict(H100, nodes=1, total_gpus=8,
                       precision="bf16 (FSDP2 MixedPrecisionPolicy: param_dtype bf16, reduce_dtype fp32)"),
        "plan": {
            "tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 8, "vpp": 1, "micro_batch": 4, "global_batch": 512,
            "recompute": "full (activation_checkpointing: true)", "sequence_parallel": False, "zero": 3,
            "fsdp_sharding": "FULL_SHARD", "framework": "NeMo AutoModel (PyTorch FSDP2)", "framework_version": "2025",
            "attention": "cudnn", "fused_kernels": True, "cross_entropy": "eager_16bit",
            "moe_token_dispatcher_type": "deepep", "foreach_optimizer": True, "torch_dtype": "bf16",
            "optimizer_dtype": "bf16", "logits_held_through_backward": True,
        },
        "measured": {"iteration_time_s": 21.773, "tokens_per_s_per_gpu": 12040},
        "inferred_fields": {
            "model.routing_groups": ("fake_balanced_gate: true (the table's notes: 'Fake balanced gate is enabled'): "
                                     "FakeBalancedGate (nemo_automodel/components/moe/layers.py) gives token t the "
                                     "experts 8t .. 8t + 7 mod 128, one aligned block of 8; read as group-limited "
                                     "routing over 16 groups of 8, one a token, so each token's experts sit on one "
                                     "rank of 16 experts"),
            "model.groups_per_token": "as routing_groups",
            "plan.attention": ("BackendConfig attn: te: Transformer Engine's DotProductAttention, which takes cuDNN's "
                               "fused attention on H100"),
            "plan.fused_kernels": "rms_norm: te and linear: te (Transformer Engine's fused RMSNorm and linears)",
            "plan.cross_entropy": ("MaskedCrossEntropy(fp32_upcast=False): cross_entropy over the 16-bit logits as they "
                                   "are, no fp32 copy: tessel's eager_16bit"),
            "plan.moe_token_dispatcher_type": "enable_deepep: true: DeepEP's normal kernels (tessel's flex dispatcher)",
            "plan.foreach_optimizer": "torch.optim.Adam with its defaults: the foreach implementation on CUDA",
            "plan.recompute": "parallelizer activation_checkpointing: true: every block checkpointed",
            "plan.zero": "FSDP2Manager: every rank shards (dp_replicate_size 1)",
            "plan.torch_dtype": ("the model is cast to bf16 (Qwen3MoeForCausalLM init_weights: self.to(dtype), bf16 by "
                                 "default) and FSDP2 keeps its shards so (MixedPrecisionPolicy param_dtype bf16, "
                                 "reduce_dtype fp32, nemo_automodel/components/moe/parallelizer.py): no fp32 master"),
            "plan.optimizer_dtype": "torch.optim.Adam keeps its moments in the parameters' dtype (zeros_like(p)): bf16",
            "plan.logits_held_through_backward": ("nemo_automodel/engine/_engine.py _forward_backward_window (read at 1e8e58f1, 2026; the 2025 recipe's own loop was not read): `output = self.model(...)`, `loss_fn(output, ...)` and `.backward()` in one scope, the output and its logits referenced through the backward"),
        },
        "notes": ("Mock data, no gradient clipping, 989 TFLOP/s peak (the table's notes). The gradients are "
                  "reduce-scattered in fp32 (reduce_dtype, 4 B a parameter over the links) and kept in bf16. The table does not state the memory."),
    }


def llama31_70b():
    return {
        "id": "automodel-llama31-70b-64gpu",
        "group": "automodel_h100",
        "kind": "training_throughput",
        "source": ("NVIDIA-NeMo/Automodel docs/performance-summary.md at 2013a4dd6 (2026-04-10): 'Pre-Training "
                   "Performance', System: DGX-H100, Precision: BF16, Llama3 70B, 'Time per Global Step (s)'; recipe "
                   "examples/llm_pretrain/custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml at 2013a4dd6"),
        "source_url": f"{REPO}/2013a4dd6/docs/performance-summary.md",
        "model": {
            "name": "Llama 3.1 70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
            "vocab": 128256, "seq": 8192, "activation": "swiglu", "norm": "rmsnorm", "position_embedding": "rope",
        },
        "system": dict(H100, nodes=8, total_gpus=64,
                       precision="bf16 (FSDP2 MixedPrecisionPolicy: param_dtype bf16, reduce_dtype bf16)"),
        "plan": {
            "tp": 1, "pp": 1, "dp": 32, "cp": 2, "ep": 1, "vpp": 1, "micro_batch": 1, "global_batch": 128,
            "recompute": "full (activation_checkpointing: True)", "sequence_parallel": False, "zero": 3,
            "fsdp_sharding": "FULL_SHARD",
            "framework": "NeMo AutoModel (PyTorch FSDP2, Hugging Face Llama model code, torch.compile)",
            "framework_version": "2026", "attention": "flash2", "fused_kernels": True, "cross_entropy": "eager",
            "foreach_optimizer": False, "torch_dtype": "bf16", "logits_held_through_backward": True,
            "repeat_kv": False,
        },
        "measured": {"iteration_time_s": 18.90, "tokens_per_s_per_gpu": 866.77},
        "inferred_fields": {
            "plan.dp": "the recipe's dp_size: null, 'auto: 64 / (tp1 * cp2 * pp1) = 32'",
            "plan.attention": "attn_implementation: sdpa ('required for cp>1'): PyTorch SDPA's flash backend, FlashAttention-2",
            "plan.repeat_kv": ("the Llama model (nemo_automodel/components/models/llama/model.py at 2013a4dd6) calls "
                               "transformers' sdpa_attention_forward (transformers 5.3, torch 2.6-2.10), which repeats K "
                               "and V only where use_gqa_in_sdpa is false (torch < 2.5 or an attention mask) and "
                               "otherwise passes enable_gqa; a causal batch without padding has no mask, and "
                               "cp_utils.attach_cp_sdpa_hooks passes enable_gqa on to the ring: K and V at the 8 kv heads"),
            "plan.fused_kernels": "enable_compile: True (torch.compile over the model's blocks)",
            "plan.cross_entropy": "MaskedCrossEntropy with its default fp32_upcast=True: cross_entropy(logits.float())",
            "plan.foreach_optimizer": "transformer_engine.pytorch.optimizers.FusedAdam: one fused kernel",
            "plan.logits_held_through_backward": "as the Qwen3 MoE record (nemo_automodel/engine/_engine.py at 1e8e58f1)",
            "plan.recompute": "activation_checkpointing: True: every block checkpointed",
            "plan.torch_dtype": ("the recipe's torch_dtype: bf16, FSDP2Config's default policy (param, reduce and "
                                 "output dtype bf16): bf16 shards, no fp32 master; Transformer Engine's FusedAdam keeps "
                                 "its moments in fp32 (exp_avg_dtype, exp_avg_sq_dtype default float32)"),
        },
        "notes": ("Mock data, 989 TFLOP/s peak. The context-parallel exchange is PyTorch's (the recipe states none); "
                  "tessel reads it as its ring. The table does not state the memory."),
    }


def deepseek_v3_256():
    # AutoPipeline (nemo_automodel/components/distributed/pipelining/functional.py at 89e3a9fdd):
    # calculate_virtual_stages gives ceil(61 / layers_per_stage 2) + 1 = 32 stages (a multiple of pp 4, 8 a rank), and
    # generate_hf_model_split spreads the 61 layers as 61 // 32 = 1 a stage plus one more on the first 61 % 32 = 29,
    # the embedding on the first stage, the norm and head on the last.
    split = [2] * 29 + [1] * 3
    assert sum(split) == 61 and len(split) == 32
    return {
        "id": "automodel-deepseek-v3-256gpu",
        "group": "automodel_h100",
        "kind": "training_throughput",
        "source": ("NVIDIA-NeMo/Automodel docs/performance-summary.md at 89e3a9fdd (2025-10-06): 'Pre-Training "
                   "Performance', System: DGX-H100, Precision: BF16, DeepSeek V3 671B on 256 GPUs, 'Time per Global "
                   "Step (s)'; recipe examples/benchmark/configs/deepseek_v3_te_deepep.yaml at 89e3a9fdd"),
        "source_url": f"{REPO}/89e3a9fdd/docs/performance-summary.md",
        "model": {
            "name": "DeepSeek-V3 671B", "layers": 61, "hidden": 7168, "heads": 128, "kv_heads": 128,
            "ffn_hidden": 18432, "vocab": 129280, "seq": 4096, "n_routed_experts": 256, "num_experts_per_tok": 8,
            "moe_intermediate_size": 2048, "n_shared_experts": 1, "first_k_dense_replace": 3, "kv_lora_rank": 512,
            "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
            "activation": "swiglu", "norm": "rmsnorm", "position_embedding": "rope",
            "routing_groups": 32, "groups_per_token": 1,
        },
        "system": dict(H100, nodes=32, total_gpus=256,
                       precision="bf16 (FSDP2 MixedPrecisionPolicy: param_dtype bf16, reduce_dtype fp32)"),
        "plan": {
            "tp": 1, "pp": 4, "dp": 64, "cp": 1, "ep": 64, "vpp": 8, "micro_batch": 1, "global_batch": 512,
            "pipeline_layers": split, "pipeline_schedule": "Interleaved1F1B",
            "recompute": "full (activation_checkpointing: true)", "sequence_parallel": False, "zero": 3,
            "fsdp_sharding": "FULL_SHARD", "framework": "NeMo AutoModel (PyTorch FSDP2, torch.distributed.pipelining)",
            "framework_version": "2025", "attention": "cudnn", "fused_kernels": True, "cross_entropy": "eager_16bit",
            "moe_token_dispatcher_type": "deepep", "moe_shared_expert_overlap": True, "foreach_optimizer": True,
            "torch_dtype": "bf16", "optimizer_dtype": "bf16", "logits_held_through_backward": True,
        },
        "measured": {"iteration_time_s": 8.18, "tokens_per_s_per_gpu": 1002},
        "inferred_fields": {
            "plan.dp": "256 GPUs over pp 4 (the table's FSDP column, 64)",
            "plan.pipeline_layers": ("AutoPipeline with layers_per_stage 2, interleaved1f1b, "
                                     "round_virtual_stages_to_pp_multiple down: 32 virtual stages (the table's VP 8), "
                                     "2 layers on the first 29, 1 on the last 3"),
            "plan.micro_batch": "pp_microbatch_size 1: the local batch of 8 in 8 micro-batches (GA 1)",
            "model.routing_groups": ("fake_balanced_gate: true: token t takes experts 8t .. 8t + 7 mod 256, one aligned "
                                     "block of 8 (two ranks of 4 experts, one node of 32): read as 32 groups of 8, one "
                                     "a token"),
            "model.groups_per_token": "as routing_groups",
            "plan.moe_shared_expert_overlap": ("MoE.forward (nemo_automodel/components/moe/layers.py): the shared "
                                               "expert on its own CUDA stream beside the routed experts' dispatch"),
            "plan.attention": "BackendConfig attn: te: Transformer Engine's DotProductAttention (cuDNN's fused attention)",
            "plan.fused_kernels": "rms_norm: te and linear: te",
            "plan.cross_entropy": "MaskedCrossEntropy(fp32_upcast=False): eager_16bit",
            "plan.moe_token_dispatcher_type": "enable_deepep: true",
            "plan.foreach_optimizer": "torch.optim.Adam with its defaults",
            "plan.recompute": "parallelizer activation_checkpointing: true",
            "plan.torch_dtype": "as the Qwen3 MoE record: the model cast to bf16, FSDP2 shards in bf16, no fp32 master",
            "plan.optimizer_dtype": "torch.optim.Adam's moments in the parameters' dtype: bf16",
            "plan.logits_held_through_backward": ("nemo_automodel/engine/_engine.py _forward_backward_window (read at 1e8e58f1, 2026; the 2025 recipe's own loop was not read): `output = self.model(...)`, `loss_fn(output, ...)` and `.backward()` in one scope, the output and its logits referenced through the backward"),
        },
        "notes": ("Mock data, no gradient clipping. AutoModel's DeepSeek-V3 has no multi-token-prediction module. The "
                  "table does not state the memory."),
    }


if __name__ == "__main__":
    write_check_set("check_automodel_h100.json", [qwen3_moe_30b(), deepseek_v3_256(), llama31_70b()])
