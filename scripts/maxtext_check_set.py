"""Writes data/validation/check_dgxc_maxtext_h100.json: MaxText (JAX/XLA) Llama 2 70B and Llama 3 70B on DGX H100.

Source: NVIDIA/dgxc-benchmarking, maxtext/README_70b.md, configure.sh and launch.sh at two releases:
- v25.01 (143b90d): Llama 2 70B, sequence 4096, the ghcr.io/nvidia/jax:maxtext-2024-12-09 container; 64-2048 GPUs.
- v25.02 (8f5cbb3): Llama 3 70B, sequence 8192, the maxtext 25.01 container; 128-2048 GPUs.
Both: per_device_batch_size 2 (one micro-batch a step: the global batch is GPUs x 2), FSDP over ici_fsdp 8 x
dcn_fsdp = the nodes up to 16 (from 64 nodes on, dcn_fsdp 16 and dcn_data = nodes / 16: the weights sharded over 128
GPUs and replicated over the rest), no tensor or pipeline parallelism, attention=cudnn_flash_te (NVTE_FUSED_ATTN=1),
scan_layers, XLA's latency-hiding scheduler with a profile (PGLE) and pipelined all-gather / reduce-scatter /
all-reduce, weights in MaxText's default weight_dtype float32 with bf16 compute, quantization fp8 for the FP8 rows.
Rematerialisation: v25.01 remat_policy custom saving the query, key, value and output projections (and, in BF16, the
MLP's output projection), v25.02 save_qkv_proj. The step is the README's 'Training step time (seconds per step)'.
Run from the repository root: python3 scripts/maxtext_check_set.py
"""
from check_set_io import write_check_set

REPO = "NVIDIA/dgxc-benchmarking"

RELEASES = {
    "v25.01": {
        "commit": "143b90d", "model": "Llama 2 70B", "vocab": 32000, "seq": 4096, "container": "2024.12.09",
        "gpus": [64, 128, 256, 512, 1024, 2048],
        "steps": {"bf16": [6.999, 7.072, 7.153, 7.091, 7.084, 7.066],
                  "fp8": [4.324, 4.556, 4.959, 5.043, 5.062, 4.93]},
        "policy": {"bf16": {"remat_policy": "custom", "query_proj": "device", "value_proj": "device",
                            "key_proj": "device", "qkv_proj": "device", "out_proj": "device", "mlpwo": "device"},
                   "fp8": {"remat_policy": "custom", "query_proj": "device", "value_proj": "device",
                           "key_proj": "device", "qkv_proj": "device", "out_proj": "device"}},
        "remat": {"bf16": "remat_policy custom: query_proj, key_proj, value_proj, qkv_proj, out_proj and mlpwo kept "
                          "on device, everything else rematerialised",
                  "fp8": "remat_policy custom: query_proj, key_proj, value_proj, qkv_proj and out_proj kept on device, "
                         "everything else rematerialised"},
    },
    "v25.02": {
        "commit": "8f5cbb3", "model": "Llama 3 70B", "vocab": 128256, "seq": 8192, "container": "25.01",
        "gpus": [128, 256, 512, 1024, 2048],
        "steps": {"bf16": [15.563, 15.444, 15.519, 15.603, 15.898],
                  "fp8": [9.074, 9.488, 9.244, 9.483, 9.339]},
        "policy": {"bf16": {"remat_policy": "save_qkv_proj"}, "fp8": {"remat_policy": "save_qkv_proj"}},
        "remat": {"bf16": "remat_policy save_qkv_proj: the query, key and value projections kept, everything else "
                          "rematerialised",
                  "fp8": "remat_policy save_qkv_proj: the query, key and value projections kept, everything else "
                         "rematerialised"},
    },
}


def record(release, dtype, gpus, step):
    rel = RELEASES[release]
    nodes = gpus // 8
    dcn_fsdp = 16 if nodes >= 64 else nodes
    shard = 8 * dcn_fsdp
    replicas = gpus // shard
    url = f"https://github.com/{REPO}/blob/{rel['commit']}/maxtext/README_70b.md"
    return {
        "id": f"dgxc-maxtext-{rel['model'].split()[1]}-70b-{gpus}-{dtype}",
        "group": f"dgxc_maxtext_h100_{release.replace('.', '_')}",
        "kind": "training_throughput",
        "source": f"{REPO} maxtext/README_70b.md at {rel['commit']} ({release}): 'Expected Performance', training step "
                  f"time of MaxText {rel['model']} on {gpus}x H100, {dtype.upper()}",
        "source_url": url,
        "source_quality": "primary (NVIDIA's published expected performance of its own recipe)",
        "model": {"name": rel["model"], "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
                  "ffn_hidden": 28672, "vocab": rel["vocab"], "seq": rel["seq"], "activation": "swiglu",
                  "norm": "rmsnorm", "position_embedding": "rope", "tied_embeddings": False, "biases": False,
                  "dropout": 0.0},
        "system": {"gpu": "H100 80GB SXM", "gpus_per_node": 8, "nodes": nodes, "total_gpus": gpus,
                   "intra_node_link": "NVLink", "inter_node_link": "InfiniBand NDR 400 Gb/s",
                   "precision": dtype},
        "plan": {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "dp": gpus, "micro_batch": 2, "global_batch": 2 * gpus,
                 "zero": 3, "zero_replicas": replicas,
                 "sharding_note": f"MaxText's fsdp axis over {shard} GPUs (ici_fsdp 8 x dcn_fsdp {dcn_fsdp})" +
                 (f", its data axis over {replicas} replicas (dcn_data {replicas})" if replicas > 1 else ""),
                 **rel["policy"][dtype],
                 "recompute_note": rel["remat"][dtype],
                 "framework": "MaxText (JAX/XLA)", "framework_version": rel["container"],
                 "attention": "cudnn (attention=cudnn_flash_te, NVTE_FUSED_ATTN=1)"},
        "measured": {"iteration_time_s": step},
        "inferred_fields": {
            **({"plan.remat_policy": "configure.sh's CONFIG_OVERRIDES, the custom policy's named tensors as stated; what XLA reruns that the policy does not keep: the attention core (its "
                                          "output 'context' is rematerialised), the norm before the MLP, the MLP's gate "
                                          "and up projections and its activation (the input of its output projection): "
                                          "Megatron-core's core_attn and mlp modules"} if release == "v25.01" else
               {"plan.remat_policy": "configure.sh's POLICY; save_qkv_proj keeps the query, key and value projections and the layer's input and "
                                  "reruns the rest: read as full recompute stopping before the MLP's output projection, "
                                  "which reruns the QKV GEMM XLA keeps (a tenth of the layer's forward GEMM FLOPs) and "
                                  "keeps only the layer's input (not q, k and v, 2.5 h bytes a token a layer in bf16); "
                                  "tessel's selective modules would keep what XLA drops (the norm outputs, the "
                                  "attention output and the residual beside q, k and v: 134 of 80 GiB predicted for "
                                  "runs that ran)"}),
            "plan.zero_replicas": "dcn_data_parallelism: nodes / 16 from 64 nodes on (configure.sh)",
            "plan.dp": "every GPU: no tensor, pipeline or context parallelism (ici_tensor and dcn_tensor 1)",
        },
        "notes": "MaxText's weight_dtype default float32 (fp32 sharded weights, cast to bf16 for the GEMMs); XLA flags "
                 "as configure.sh: latency-hiding scheduler with a PGLE profile, pipelined all-gather, reduce-scatter "
                 "and all-reduce, while-loop double buffering, combine thresholds 8 GiB / 4 (all-gather, all-reduce) "
                 "and 8 GiB / 128-2048 (reduce-scatter); CUDA_DEVICE_MAX_CONNECTIONS 16; synthetic data.",
    }


records = [record(rel, dtype, g, s)
           for rel, info in RELEASES.items()
           for dtype in ("bf16", "fp8")
           for g, s in zip(info["gpus"], info["steps"][dtype])]
write_check_set("check_dgxc_maxtext_h100.json", records)
