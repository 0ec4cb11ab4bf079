#!/usr/bin/env python3
"""Writes data/validation/check_megatron_bridge_2026.json: Megatron-Bridge's 2026 dense Llama pre-training rows.

The rows are transcribed from NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md at commit 067f987df
(2026-08): the LLAMA3_70B and LLAMA3.1_405B pre-training tables of the 26.02, 26.02.01, 26.04, 26.04.01 and 26.06
NeMo containers, their FP8 and MXFP8 rows on DGX-GB300, DGX-GB200 and DGX-H100 that no other check set holds (the
26.02 FP8 rows are in check_megatron_bridge_gb200_fp8.json, check_megatron_bridge_gb300_fp8.json and
check_nemo_h100_fp8.json, the 26.04.01 H100 rows in check_nemo_h100_fp8.json). NVFP4 rows are left out: tessel
has no 4-bit recipe. The tables print tokens per second per GPU; the step time is GBS x sequence / (that x GPUs).

"FP8" in these tables is fp8_cs, per-tensor current scaling (the scripts' --compute_dtype since 2025-11,
NVIDIA-NeMo/Megatron-Bridge#1279, has no delayed scaling), "MXFP8" fp8_mx. What the tables do not print is taken
from the recipes (scripts/performance/configs/llama/llama3_workload_base_configs.py and
llama31_workload_base_configs.py at f09aa703a, 2026-07-02): the 70B FP8 rows with Megatron FSDP offload 20 layers'
activations to Grace on the GB300 and 40 on the GB200 (LLAMA3_70B_PRETRAIN_CONFIG_GB300_FP8_CS_V2, _GB200_FP8_CS_V2),
no other row offloads or recomputes, and the distributed optimizer runs where FSDP is 0.
Run from the repository root: python3 scripts/megatron_bridge_2026_check_set.py
"""
from check_set_io import write_check_set

URL = "https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/main/docs/performance-summary-archive.md"

MODELS = {
    # Public model cards: Llama 3 70B (80 layers, 8192 hidden, 64 heads / 8 kv, 28672 ffn) and Llama 3.1 405B
    # (126 layers, 16384 hidden, 128 heads / 8 kv, 53248 ffn), vocabulary 128256, sequence 8192 in these tables.
    "llama3-70b": {"name": "Llama 3 70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
                   "ffn_hidden": 28672, "vocab": 128256, "seq": 8192},
    "llama31-405b": {"name": "Llama 3.1 405B", "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8,
                     "ffn_hidden": 53248, "vocab": 128256, "seq": 8192},
}
TABLE_MODEL = {"llama3-70b": "LLAMA3_70B", "llama31-405b": "LLAMA3.1_405B"}

SYSTEMS = {
    "gb300": {"gpu": "GB300 (DGX GB300, NVL72)", "gpus_per_node": 4, "intra_node_link": "NVLink 5 (NVL72)",
              "inter_node_link": "ConnectX-8 800 Gb/s", "table": "DGX-GB300"},
    "gb200": {"gpu": "GB200 (DGX GB200, NVL72)", "gpus_per_node": 4, "intra_node_link": "NVLink 5 (NVL72)",
              "inter_node_link": "InfiniBand NDR 400 Gb/s", "table": "DGX-GB200"},
    "h100": {"gpu": "H100 80GB SXM", "gpus_per_node": 8, "intra_node_link": "NVLink",
             "inter_node_link": "InfiniBand NDR 400 Gb/s", "table": "DGX-H100"},
}

# The 70B FP8 recipes' activation offload under Megatron FSDP (layers to the Grace CPU).
FSDP_OFFLOAD_LAYERS = {"gb300": 20, "gb200": 40}

# (container, model, system, GPUs, precision, GBS, MBS, FSDP, TP, PP, CP, VP or None, tokens / s / GPU)
ROWS = [
    ("26.02", "llama3-70b", "gb300", 64, "MXFP8", 256, 1, 0, 1, 4, 1, 5, 4596),
    ("26.02", "llama3-70b", "gb200", 64, "MXFP8", 256, 1, 0, 2, 4, 1, 5, 3613),
    ("26.02", "llama31-405b", "gb300", 256, "MXFP8", 1536, 1, 0, 2, 8, 2, 4, 931),
    ("26.02", "llama31-405b", "gb200", 256, "MXFP8", 1536, 1, 0, 4, 16, 1, 8, 786),
    # Left out: 26.02.01's GB300 MXFP8 row prints MBS 2, PP 4 and VP n/a (4798 tokens/s/GPU). Eight micro-batches
    # on four stages without virtual stages idle 3/11 of the step in 1F1B's bubble; at 4798 it ran as fast as the
    # same release's and its neighbours' PP 4 x VP 5 rows (4596-4864), which the printed plan cannot, so the row's
    # plan is not the one that ran (the recipe, LLAMA3_70B_PRETRAIN_CONFIG_GB300_FP8_MX_V2, is PP 4 x VP 5).
    ("26.02.01", "llama3-70b", "gb200", 64, "MXFP8", 256, 1, 0, 2, 4, 1, 5, 3837),
    ("26.02.01", "llama3-70b", "gb300", 64, "FP8", 256, 2, 64, 1, 1, 1, None, 5243),
    ("26.02.01", "llama3-70b", "gb200", 64, "FP8", 256, 2, 64, 1, 1, 1, None, 4357),
    ("26.02.01", "llama3-70b", "h100", 64, "FP8", 256, 1, 0, 4, 8, 1, 5, 1639),
    ("26.02.01", "llama31-405b", "gb300", 256, "MXFP8", 1536, 1, 0, 2, 8, 2, 4, 949),
    ("26.02.01", "llama31-405b", "gb200", 256, "MXFP8", 1536, 1, 0, 4, 16, 1, 8, 775),
    ("26.02.01", "llama31-405b", "gb300", 256, "FP8", 1536, 1, 0, 2, 8, 2, 4, 1024),
    ("26.02.01", "llama31-405b", "gb200", 256, "FP8", 1536, 1, 0, 4, 16, 1, 4, 818),
    ("26.04", "llama3-70b", "gb300", 64, "MXFP8", 256, 1, 0, 1, 4, 1, 5, 4742),
    ("26.04", "llama3-70b", "gb200", 64, "MXFP8", 256, 1, 0, 2, 4, 1, 5, 3828),
    ("26.04", "llama3-70b", "gb300", 64, "FP8", 256, 2, 64, 1, 1, 1, None, 5243),
    ("26.04", "llama3-70b", "gb200", 64, "FP8", 256, 2, 64, 1, 1, 1, None, 4143),
    ("26.04", "llama3-70b", "h100", 64, "FP8", 256, 1, 0, 4, 8, 1, 5, 1633),
    ("26.04", "llama31-405b", "gb300", 256, "MXFP8", 1536, 1, 0, 2, 8, 2, 4, 968),
    ("26.04", "llama31-405b", "gb200", 256, "MXFP8", 1536, 1, 0, 4, 16, 1, 8, 793),
    ("26.04", "llama31-405b", "gb300", 256, "FP8", 1536, 1, 0, 4, 8, 1, 4, 1036),
    ("26.04", "llama31-405b", "gb200", 256, "FP8", 1536, 1, 0, 4, 16, 1, 4, 842),
    ("26.04.01", "llama3-70b", "gb300", 64, "FP8", 256, 2, 64, 1, 1, 1, None, 5248),
    ("26.04.01", "llama3-70b", "gb300", 64, "MXFP8", 256, 1, 0, 1, 4, 1, 5, 4864),
    ("26.04.01", "llama3-70b", "gb200", 64, "FP8", 256, 2, 64, 1, 1, 1, None, 4224),
    ("26.04.01", "llama3-70b", "gb200", 64, "MXFP8", 256, 1, 0, 2, 4, 1, 5, 3712),
    ("26.04.01", "llama31-405b", "gb300", 256, "FP8", 1536, 1, 0, 4, 8, 1, 4, 1024),
    ("26.04.01", "llama31-405b", "gb300", 256, "MXFP8", 1536, 1, 0, 2, 8, 2, 4, 960),
    ("26.04.01", "llama31-405b", "gb200", 256, "FP8", 1536, 1, 0, 4, 16, 1, 4, 864),
    ("26.04.01", "llama31-405b", "gb200", 256, "MXFP8", 1536, 1, 0, 4, 16, 1, 8, 800),
    ("26.06", "llama31-405b", "gb300", 256, "FP8", 1536, 1, 0, 4, 8, 1, 4, 1048),
    ("26.06", "llama31-405b", "gb300", 256, "MXFP8", 1536, 1, 0, 2, 8, 2, 4, 952),
    ("26.06", "llama31-405b", "gb200", 256, "FP8", 1536, 1, 0, 4, 16, 1, 4, 843),
    ("26.06", "llama31-405b", "gb200", 256, "MXFP8", 1536, 1, 0, 4, 16, 1, 8, 783),
    ("26.06", "llama31-405b", "h100", 1024, "FP8", 1536, 1, 0, 8, 8, 2, 8, 326),
]


def record(row):
    container, model, system, gpus, precision, gbs, mbs, fsdp, tp, pp, cp, vp, tokens = row
    m = MODELS[model]
    s = SYSTEMS[system]
    assert gpus % (tp * pp * cp) == 0, row
    dp = gpus // (tp * pp * cp)
    assert gbs % (dp * mbs) == 0, row
    assert fsdp in (0, gpus // (tp * pp)), row
    step = gbs * m["seq"] / (tokens * gpus)
    version = ".".join(container.split(".")[:2])
    rid = f"mb{container.replace('.', '')}-{system}-{model}-{precision.lower()}-{gpus}"
    plan = {
        "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": 1, "vpp": vp or 1,
        "micro_batch": mbs, "global_batch": gbs, "recompute": "none", "sequence_parallel": tp > 1,
        "zero": 3 if fsdp else 1, "distributed_optimizer": True,
        "framework": "Megatron-Bridge (Megatron FSDP)" if fsdp else "Megatron-Bridge",
        "framework_version": version,
    }
    notes = (f"Generated by scripts/megatron_bridge_2026_check_set.py. '{container} NeMo Container', {TABLE_MODEL[model]}, "
             f"{s['table']} {precision} row: {gpus} GPUs, GBS {gbs}, MBS {mbs}, FSDP {fsdp}, TP {tp}, PP {pp}, CP {cp}, "
             f"VP {vp if vp else 'n/a'}, {tokens} tokens/s/GPU as printed; step time = GBS x sequence / (tokens/s/GPU x "
             "GPUs). FSDP > 0 = Megatron FSDP (ZeRO-3), 0 = the distributed optimizer. ")
    notes += ("FP8 is fp8_cs, per-tensor current scaling (the scripts' --compute_dtype from 25.11 has no delayed "
              "scaling); " if precision == "FP8" else "MXFP8 is fp8_mx, Transformer Engine's MXFP8 block scaling; ")
    notes += "no activation recompute, sequence parallel with TP > 1 (the recipes)."
    if fsdp:
        layers = FSDP_OFFLOAD_LAYERS[system]
        plan["cpu_offloading"] = True
        plan["cpu_offloading_num_layers"] = layers
        notes += (f" The recipe offloads {layers} layers' activations to the Grace CPU "
                  f"(llama3_workload_base_configs.py LLAMA3_70B_PRETRAIN_CONFIG_{system.upper()}_FP8_CS_V2).")
    if system in ("gb300", "gb200"):
        notes += " The NVL72 rack's 72 GPUs are one NVLink domain; NVIDIA counts 4-GPU compute trays."
    return {
        "id": rid,
        "group": f"megatron_bridge_2026_{system}",
        "kind": "training_throughput",
        "source": (f"NVIDIA-NeMo/Megatron-Bridge, docs/performance-summary-archive.md (067f987df): '{container} NeMo "
                   f"Container', Pre-Training Performance, Model: {TABLE_MODEL[model]}, {s['table']} {precision} row"),
        "source_url": URL,
        "source_quality": "primary (NVIDIA's published Megatron-Bridge performance table)",
        "model": dict(m),
        "system": {
            "gpu": s["gpu"], "gpus_per_node": s["gpus_per_node"], "nodes": gpus // s["gpus_per_node"],
            "total_gpus": gpus, "intra_node_link": s["intra_node_link"], "inter_node_link": s["inter_node_link"],
            "precision": precision,
        },
        "plan": plan,
        "measured": {"iteration_time_s": None, "tokens_per_s_per_gpu": tokens},
        "derived": {"iteration_time_s": step, "how": "INFERRED: GBS x seq / (tokens/s/GPU x GPUs)"},
        "notes": notes,
    }


if __name__ == "__main__":
    write_check_set("check_megatron_bridge_2026.json", [record(r) for r in ROWS])
