#!/usr/bin/env python3
"""Writes data/validation/check_kempnerforge_h200.json: KempnerForge's published benchmarks on 4-GPU H200 nodes.

KempnerForge (KempnerInstitute/KempnerForge) is a PyTorch-native trainer: FSDP2 (`fully_shard` per block and once
over the model), DTensor tensor parallelism with sequence parallelism (`parallelize_module`, ColwiseParallel /
RowwiseParallel / SequenceParallel), full activation checkpointing per block (non-reentrant), torch.compile of the
whole model, fused AdamW, PyTorch 2.11 (cu128, its uv.lock). Its benchmark reports print, for Llama-3-shaped models
on the Kempner cluster's nodes of 4 H200 (141 GB) with NVLink inside a node and InfiniBand NDR 400 Gb/s between
(benchmarks/config_validation/config_validation.md), the step time, tokens/s over all GPUs and rank 0's
`torch.cuda.max_memory_allocated` in GiB (kempnerforge/metrics/memory.py: / 1024**3; the logs' "mem=36.2/140GB").

Two reports are read, each with the run scripts of its commit:

- benchmarks/mfu_scaling/mfu_scaling_2026-04-05.md (git 01b461a; mfu_bench.sh at 9f3f03a): 14 runs of 7B / 13B / 70B
  on 1-32 GPUs, FSDP, TP and both; steady state averaged over the last 5 of 20 steps.
- benchmarks/weak_scaling_160gpu/README.md (2026-06-30, git 3ad9d9a; weak_scaling_160gpu_bench.sh and the 13 logs
  under results/ at e9f9189): 13B and 70B at TP 4 x FSDP 2-40 on 8-160 GPUs; the median over the back half of each
  run (the 160-GPU rows are the mean of two repeats).

What the code runs that the reports do not print, read from kempnerforge at those commits:

- The model is built in bf16 and kept so (distributed/parallel.py build_parallel_model: `model.to(dtype=param_dtype)`,
  bf16): bf16 FSDP shards, no fp32 master; torch.optim.AdamW(fused=True) keeps its moments in the parameters' dtype.
- FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) (default_mp_policy; the logs print it), and
  reshard_after_forward left at True (scripts/train.py).
- Gradient accumulation under FSDP2's `set_requires_gradient_sync(False)` on every micro-step but the last
  (training/grad.py maybe_no_sync): one reduce-scatter a step.
- The loss: `F.cross_entropy` over the model's bf16 logits (training/loss.py, loss_fn 'cross_entropy',
  ce_chunk_size 0), outside the compiled model; with TP the logits are gathered to every rank first
  (ColwiseParallel(output_layouts=Replicate()) on the head) and the token embedding is left whole on each.
- The logits stay referenced through the backward (scripts/train.py: `logits = model(input_ids)`, then
  `scaled_loss.backward()`), so they outlive the loss's backward.
- With TP on, the mesh always has a dp_shard dimension (distributed/setup.py, "even if dp_shard=1") and fully_shard
  is applied over it: the TP-only rows run FSDP2 over one rank (its no-sync fp32 gradient and all).
- On one GPU the same function returns no mesh (world size 1), so nothing is FSDP2-wrapped and `torch.compile(model)`
  compiles the whole model as one graph: its backward returns every gradient at once (compile_whole_model).
- SDPA with the backend left to PyTorch (sdpa_backend 'auto'): the 13B profile of 2026-04-07
  (benchmarks/profiling/13b_24gpu_profiling.md) shows `aten::_cudnn_attention_backward`, cuDNN's fused attention.

Run from the repository root: python3 scripts/kempnerforge_check_set.py
"""
from check_set_io import write_check_set

REPO = "https://github.com/KempnerInstitute/KempnerForge/blob"

MODELS = {
    # dim, layers, heads, kv_heads, ffn (Llama's rule at ffn_dim_multiplier 1.3, multiple_of 256, or stated), params
    "7b": ("Llama 3 8B shape (KempnerForge 7B)", 4096, 32, 32, 8, 14336, 8.03e9),
    "13b": ("Llama 3 shape, 13B (KempnerForge 13B)", 5120, 40, 40, 8, 17920, 14.84e9),
    "70b": ("Llama 3 70B shape (KempnerForge 70B)", 8192, 80, 64, 8, 28672, 70.55e9),
}

INFERRED = {
    "plan.repeat_kv": ("kempnerforge/model/attention.py at 01b461a: k and v repeat_interleave(n_rep) to every query "
                       "head before F.scaled_dot_product_attention"),
    "plan.torch_dtype": ("build_parallel_model casts the model to bf16 (model.to(dtype=param_dtype)) before "
                         "training: bf16 FSDP shards, no fp32 master"),
    "plan.optimizer_dtype": "torch.optim.AdamW(fused=True) keeps exp_avg / exp_avg_sq in the parameters' dtype: bf16",
    "plan.grad_sync_each_micro_batch": ("training/grad.py maybe_no_sync: FSDP2 set_requires_gradient_sync(False) on "
                                        "every micro-step but the last"),
    "plan.cross_entropy": ("training/loss.py cross_entropy_loss: F.cross_entropy over the model's bf16 logits, no fp32 "
                           "upcast, outside torch.compile (ce_chunk_size 0): tessel's eager_16bit"),
    "plan.attention": ("SDPA, backend 'auto': cuDNN's fused attention on the H200 "
                       "(benchmarks/profiling/13b_24gpu_profiling.md: aten::_cudnn_attention_backward)"),
    "plan.fused_kernels": "train.compile_model: torch.compile of the whole model where true, eager ops where false",
    "plan.loss_parallel": ("distributed/tensor_parallel.py apply_tensor_parallel: output_head.proj is "
                           "ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()) and the loss runs outside "
                           "any loss_parallel context: the logits gathered to every TP rank, the loss over the whole "
                           "vocabulary on each"),
    "plan.vocab_parallel_embedding": ("apply_tensor_parallel leaves token_embedding unsharded (only a forward hook that "
                                      "marks its output Replicate): the whole table on every TP rank"),
    "plan.zero": ("distributed/setup.py builds the mesh with a dp_shard dimension whenever TP is on, of size 1 where "
                  "every GPU is in the TP group ('always include dp_shard when TP is active, even if dp_shard=1'), and "
                  "parallel.py applies fully_shard over it: FSDP2 over one rank"),
    "plan.logits_held_through_backward": ("scripts/train.py binds `logits = model(input_ids)` and calls "
                                          "scaled_loss.backward() with it still referenced: the logits outlive the "
                                          "loss's backward"),
    "plan.compile_whole_model": ("distributed/setup.py init_distributed returns no device mesh when the world size is "
                                 "1 (at 01b461a, the campaign's commit), so build_parallel_model wraps nothing in FSDP2 "
                                 "and scripts/train.py's torch.compile(model) compiles the whole model as one graph, "
                                 "whose backward returns every gradient at once (FSDP2's hooks split every other row's "
                                 "graph at each block)"),
    "system.inter_node_link": "config_validation.md: 'InfiniBand (NDR 400Gbps) inter-node', read as one NIC a GPU",
}


def record(group, rid, source, url, model, gpus, tp, mb, accum, compile_model, step_s, tokens_s, mfu, mem_gib,
           notes):
    name, dim, layers, heads, kv, ffn, params = MODELS[model]
    dp = gpus // tp
    fsdp = dp > 1 or tp > 1  # fully_shard over dp_shard, of one rank where TP spans every GPU
    plan = {
        "tp": tp, "pp": 1, "dp": dp, "cp": 1, "ep": 1, "vpp": 1, "micro_batch": mb,
        "global_batch": mb * accum * dp, "recompute": "full (activation_checkpointing full, every TransformerBlock)",
        "sequence_parallel": tp > 1, "zero": 3 if fsdp else 0,
        "framework": "KempnerForge (PyTorch FSDP2 fully_shard, DTensor tensor parallelism)",
        "framework_version": "2026", "compile": compile_model, "fused_kernels": compile_model,
        "attention": "cudnn", "cross_entropy": "eager_16bit", "foreach_optimizer": False, "torch_dtype": "bf16",
        "optimizer_dtype": "bf16", "tp_comm_overlap": False, "logits_held_through_backward": True,
        "repeat_kv": True,
    }
    if fsdp:
        plan["fsdp_sharding"] = "FULL_SHARD"
        plan["reshard_after_forward"] = True
    if fsdp and accum > 1:
        plan["grad_sync_each_micro_batch"] = False
    if compile_model and not fsdp:
        plan["compile_whole_model"] = True
    if tp > 1:
        plan["loss_parallel"] = False
        plan["vocab_parallel_embedding"] = False
    inferred = {k: v for k, v in INFERRED.items() if not k.startswith("plan.") or k[len("plan."):] in plan}
    if not (tp > 1 and dp == 1):
        del inferred["plan.zero"]  # only the TP-only rows' FSDP2 over one rank is read from the code, not the report
    return {
        "id": rid, "group": group, "kind": "training_throughput", "source": source, "source_url": url,
        "model": {"name": name, "layers": layers, "hidden": dim, "heads": heads, "kv_heads": kv, "ffn_hidden": ffn,
                  "vocab": 128256, "seq": 4096, "params": params, "activation": "swiglu", "norm": "rmsnorm",
                  "position_embedding": "rope", "tie_embeddings": False},
        "system": {"gpu": "H200 (SXM, 141 GB HBM3e)", "gpus_per_node": 4, "nodes": max(1, gpus // 4),
                   "total_gpus": gpus, "intra_node_link": "NVLink", "inter_node_link": "InfiniBand NDR 400 Gb/s",
                   "precision": "bf16 (FSDP2 MixedPrecisionPolicy: param_dtype bf16, reduce_dtype fp32)"},
        "plan": plan,
        "measured": {"iteration_time_s": step_s, "tokens_per_s": tokens_s, "mfu": mfu / 100.0,
                     "memory_gb": mem_gib, "memory_unit": "GiB",
                     "memory_kind": "peak allocated (rank 0's torch.cuda.max_memory_allocated / 1024**3)"},
        "inferred_fields": inferred,
        "notes": notes,
    }


def records_of(rows, src, url, note, eager_note):
    """One record a row (id, model, gpus, tp, mb, accum, compile, step s, tok/s, MFU %, GiB); an eager run's notes say so."""
    return [record("kempnerforge_h200_2026", rid, src, url, model, gpus, tp, mb, accum, comp, step, tok, mfu, mem,
                   note if comp else note + eager_note)
            for rid, model, gpus, tp, mb, accum, comp, step, tok, mfu, mem in rows]


def mfu_scaling():
    src = ("KempnerInstitute/KempnerForge benchmarks/mfu_scaling/mfu_scaling_2026-04-05.md (git 01b461a), 'Full "
           "Results Table'; run arguments from benchmarks/mfu_scaling/mfu_bench.sh at 9f3f03a")
    url = f"{REPO}/9f3f03a070668192230c7c542a3ecebb22d9a20c/benchmarks/mfu_scaling/mfu_scaling_2026-04-05.md"
    note = ("Steady state: the last 5 of 20 steps. seq_len 4096, full activation checkpointing, fused AdamW, "
            "torch.compile unless stated. MFU is KempnerForge's (6 x active parameters with the LM head, plus 12 x "
            "layers x dim x seq) over 989 TFLOP/s.")
    rows = [
        # id, model, gpus, tp, mb, accum, compile, step, tok/s, mfu, mem
        ("kf2604-7b-1gpu", "7b", 1, 1, 2, 4, True, 3.13, 10471, 57.8, 80.7),
        ("kf2604-7b-2gpu-fsdp2", "7b", 2, 1, 2, 4, True, 3.50, 18728, 51.7, 62.4),
        ("kf2604-7b-2gpu-tp2", "7b", 2, 2, 4, 2, True, 2.49, 13163, 36.4, 57.8),
        ("kf2604-7b-4gpu-fsdp4", "7b", 4, 1, 4, 2, True, 3.36, 38983, 53.8, 61.1),
        ("kf2604-7b-4gpu-tp4", "7b", 4, 4, 4, 2, True, 1.30, 25135, 34.7, 39.4),
        ("kf2604-7b-4gpu-tp2-fsdp2", "7b", 4, 2, 4, 2, True, 2.52, 25980, 35.9, 45.9),
        ("kf2604-7b-8gpu-tp4-fsdp2", "7b", 8, 4, 4, 2, True, 1.48, 44299, 30.6, 32.7),
        ("kf2604-13b-8gpu-fsdp8-eager", "13b", 8, 1, 4, 4, False, 14.81, 35405, 44.4, 88.5),
        ("kf2604-13b-8gpu-tp4-fsdp2", "13b", 8, 4, 4, 4, True, 4.79, 27345, 34.3, 45.1),
        ("kf2604-7b-16gpu-tp4-fsdp4", "7b", 16, 4, 4, 2, True, 1.58, 82988, 28.6, 29.4),
        ("kf2604-13b-16gpu-tp4-fsdp4", "13b", 16, 4, 4, 4, True, 4.87, 53814, 33.7, 39.2),
        ("kf2604-7b-32gpu-tp4-fsdp8", "7b", 32, 4, 4, 2, True, 1.68, 155917, 26.9, 27.6),
        ("kf2604-13b-32gpu-tp4-fsdp8", "13b", 32, 4, 4, 4, True, 5.03, 104309, 32.7, 36.3),
        ("kf2604-70b-32gpu-tp4-fsdp8", "70b", 32, 4, 2, 4, True, 14.85, 17657, 25.4, 93.2),
    ]
    return records_of(rows, src, url, note, " This run: compile_model=false (eager).")


def weak_scaling():
    src = ("KempnerInstitute/KempnerForge benchmarks/weak_scaling_160gpu/README.md (2026-06-30, git 3ad9d9a), "
           "'Results'; run arguments from weak_scaling_160gpu_bench.sh and the logs in results/ at e9f9189")
    url = f"{REPO}/e9f91892905dc840f7048a01e8028083eb4033e7/benchmarks/weak_scaling_160gpu/README.md"
    note = ("Steady state: the median over the back half of each run (30 steps; 200 at 160 GPUs, the mean of two "
            "repeats). TP 4 inside a node (DeviceMesh dp_shard x tp) x FSDP across nodes; seq_len 4096, full "
            "activation checkpointing, fused AdamW, torch.compile. The 8-GPU rows are the 2-node pre-flights of the "
            "same configs.")
    # Each run's batch, accumulation and compile are its log's JobConfig line (results/<id>.log), not the README's
    # model table: the 70B pre-flight on 8 GPUs (results/preflight_70b_008gpu_tp4_fsdp2.log, SLURM job
    # kf-mfu-preflight) ran batch_size=1, grad_accum_steps=8, compile_model=False, where the README's table gives
    # the 70B campaign's 2 x 4 compiled; its 16 sequences a step are the same, its micro-batches and kernels are not.
    rows = [
        # id, model, gpus, tp, mb, accum, compile, step, tok/s, mfu, mem
        ("kf2606-13b-8gpu-tp4-fsdp2", "13b", 8, 4, 4, 4, True, 4.39, 29860, 35.9, 45.0),
        ("kf2606-13b-32gpu-tp4-fsdp8", "13b", 32, 4, 4, 4, True, 4.75, 110373, 33.2, 36.2),
        ("kf2606-13b-64gpu-tp4-fsdp16", "13b", 64, 4, 4, 4, True, 4.84, 216507, 32.6, 34.8),
        ("kf2606-13b-128gpu-tp4-fsdp32", "13b", 128, 4, 4, 4, True, 4.95, 423306, 31.8, 34.0),
        ("kf2606-13b-160gpu-tp4-fsdp40", "13b", 160, 4, 4, 4, True, 4.91, 534644, 32.2, 33.9),
        ("kf2606-70b-8gpu-tp4-fsdp2", "70b", 8, 4, 1, 8, False, 18.09, 3623, 20.6, 128.5),
        ("kf2606-70b-32gpu-tp4-fsdp8", "70b", 32, 4, 2, 4, True, 14.03, 18688, 26.5, 93.2),
        ("kf2606-70b-64gpu-tp4-fsdp16", "70b", 64, 4, 2, 4, True, 14.63, 35824, 25.4, 86.8),
        ("kf2606-70b-96gpu-tp4-fsdp24", "70b", 96, 4, 2, 4, True, 15.07, 52190, 24.7, 84.6),
        ("kf2606-70b-128gpu-tp4-fsdp32", "70b", 128, 4, 2, 4, True, 14.98, 69985, 24.8, 83.6),
        ("kf2606-70b-160gpu-tp4-fsdp40", "70b", 160, 4, 2, 4, True, 15.32, 85571, 24.3, 82.9),
    ]
    return records_of(rows, src, url, note, " This run, by its log (results/preflight_70b_008gpu_tp4_fsdp2.log): "
                      "batch_size=1, grad_accum_steps=8, compile_model=false (eager).")


if __name__ == "__main__":
    records = mfu_scaling() + weak_scaling()
    for r in records:  # every step is the tokens a step over the published tokens/s, to the table's rounding
        p = r["plan"]
        tokens = p["global_batch"] * r["model"]["seq"]
        assert abs(tokens / r["measured"]["tokens_per_s"] / r["measured"]["iteration_time_s"] - 1.0) < 0.01, r["id"]
    write_check_set("check_kempnerforge_h200.json", records)
