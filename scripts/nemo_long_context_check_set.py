#!/usr/bin/env python3
"""Writes data/validation/check_nemo_long_context.json: NeMo's long-sequence pre-training tables (context parallelism).

The rows are transcribed from NVIDIA/NeMo docs/source/performance/performance_long_sequence.md at commit a2c4cc8ee6
(2025-05-08), the "With CP" half of each table (the "Without CP" half names no plan): Llama 2 7B in FP8 on DGX H100
(NeMo 24.03.01), sequences 4K-1M on 4-1024 GPUs, and Llama 3 8B in FP8 on DGX B200 (NeMo 25.04.rc2), 8K-1M. The
tables print TFLOPS per GPU; the step time is NeMo's own FLOP count of the step over that rate. NeMo counted a
causal model's attention whole until 2025-08-09 (nemo/utils/flops_formulas.py, 6251117f4c "Discount FLOPs in
dot-product att"): checked on NeMo 24.07's performance summary, whose Llama 2 7B row (16634 tokens/s/GPU at
sequence 4096) prints 767 TFLOP/s, which the whole-attention count gives (766.5) and the halved one does not (712.9).
Run from the repository root: python3 scripts/nemo_long_context_check_set.py
"""
from check_set_io import write_check_set

URL = "https://github.com/NVIDIA/NeMo/blob/a2c4cc8ee6/docs/source/performance/performance_long_sequence.md"
SOURCE = ("NVIDIA NeMo, docs/source/performance/performance_long_sequence.md at commit a2c4cc8ee6 (2025-05-08): "
          "'{table}', the 'With CP' columns (TP, PP, DP, CP, TFLOPS / GPU), {container}, {system}")

MODELS = {
    # Public model cards: Llama 2 7B (config.json: 32 layers, 4096 hidden, 32 heads, 11008 ffn, vocab 32000) and
    # Llama 3 8B (32 layers, 4096 hidden, 32 heads / 8 kv heads, 14336 ffn, vocab 128256).
    "llama2-7b": {"name": "Llama 2 7B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32,
                  "ffn_hidden": 11008, "vocab": 32000},
    "llama3-8b": {"name": "Llama 3 8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                  "ffn_hidden": 14336, "vocab": 128256},
}

TABLES = [
    {
        "model": "llama2-7b",
        "table": "LLAMA2-7B (FP8) - H100",
        "container": "NeMo 24.03.01 container",
        "system": "DGX-H100",
        "gpu": "H100 80GB SXM",
        "version": "24.03",
        # (sequence K, GPUs, batch, TP, PP, DP, CP, TFLOPS / GPU with CP)
        "rows": [
            (4, 4, 1024, 1, 1, 4, 1, 768),
            (8, 8, 512, 1, 2, 4, 1, 730),
            (16, 16, 256, 2, 1, 8, 1, 660),
            (32, 32, 128, 2, 1, 8, 2, 610),
            (64, 64, 64, 4, 1, 8, 2, 574),
            (128, 128, 32, 4, 1, 8, 4, 555),
            (256, 256, 16, 4, 1, 8, 8, 549),
            (512, 512, 8, 8, 1, 4, 16, 549),
            (1024, 1024, 4, 8, 1, 4, 32, 536),
        ],
    },
    {
        "model": "llama3-8b",
        "table": "LLAMA3-8B (FP8) - B200",
        "container": "NeMo 25.04.rc2 container",
        "system": "DGX-B200",
        "gpu": "B200",
        "version": "25.04",
        # The '# of GPUs' column reads 4 x TP x PP x DP x CP on every row of this table (8K: 8 GPUs at DP 2); the
        # table's first version (14d427f575, 2025-04-28) printed 2, 4, 8, ... 256 GPUs for the same TP / CP / DP,
        # which is TP x PP x DP x CP. The plan is read from TP, PP, DP and CP; the step time uses that world size.
        "rows": [
            (8, 8, 512, 1, 1, 2, 1, 1671),
            (16, 16, 256, 1, 1, 4, 1, 1717),
            (32, 32, 128, 1, 1, 4, 2, 1624),
            (64, 64, 64, 1, 1, 4, 4, 1600),
            (128, 128, 32, 2, 1, 4, 4, 1588),
            (256, 256, 16, 4, 1, 4, 4, 1590),
            (512, 512, 8, 4, 1, 4, 8, 1619),
            (1024, 1024, 4, 4, 1, 4, 16, 1608),
        ],
    },
]


def nemo_flops_per_step(m, gbs, seq):
    """nemo/utils/flops_formulas.py llama2 / llama3 before 2025-08-09: attention counted whole (no causal half)."""
    h, layers = m["hidden"], m["layers"]
    return gbs * seq * layers * h * h * (
        12 + 12 * m["kv_heads"] / m["heads"] + 18 * m["ffn_hidden"] / h + 12 * seq / h + 6 * m["vocab"] / (layers * h))


def record(table, row):
    seq_k, gpus_printed, gbs, tp, pp, dp, cp, tflops = row
    m = dict(MODELS[table["model"]])
    seq = seq_k * 1024
    m["seq"] = seq
    world = tp * pp * dp * cp
    if table["model"] == "llama2-7b":
        assert world == gpus_printed, row
    else:
        assert world * 4 == gpus_printed, row
    step = nemo_flops_per_step(m, gbs, seq) / (tflops * 1e12 * world)
    rid = f"nemo{table['version'].replace('.', '')}-longseq-{table['model']}-{seq_k}k-tp{tp}-pp{pp}-dp{dp}-cp{cp}"
    notes = (f"'# of GPUs' {gpus_printed}, batch size {gbs} sequences of {seq_k}K tokens, TP {tp}, PP {pp}, DP {dp}, "
             f"CP {cp}, {tflops} TFLOPS / GPU as printed. Step time = NeMo's FLOPs of the step (attention counted "
             "whole, as NeMo did before 2025-08-09) / (TFLOPS / GPU x TP x PP x DP x CP). Not stated, taken as the "
             "recipes' usual: micro-batch 1, sequence parallel with TP > 1, distributed optimizer, no virtual "
             "pipeline stages, no activation recompute, Transformer Engine's FP8 with BF16 attention.")
    if table["model"] == "llama3-8b":
        notes += (" The table's '# of GPUs' is 4 x TP x PP x DP x CP on every row; its first version (14d427f575) "
                  "printed TP x PP x DP x CP GPUs for the same columns, which this record uses.")
    return {
        "id": rid,
        "group": "nemo_long_context_cp_fp8",
        "kind": "training_throughput",
        "source": SOURCE.format(table=table["table"], container=table["container"], system=table["system"]),
        "source_url": URL,
        "source_quality": "primary (NVIDIA's published NeMo performance table)",
        "model": m,
        "system": {
            "gpu": table["gpu"],
            "gpus_per_node": 8,
            "nodes": max(1, world // 8),
            "total_gpus": world,
            "intra_node_link": "NVLink",
            "inter_node_link": "InfiniBand NDR 400 Gb/s",
            "precision": "fp8",
        },
        "plan": {
            "tp": tp,
            "pp": pp,
            "dp": dp,
            "cp": cp,
            "ep": 1,
            "vpp": 1,
            "micro_batch": 1,
            "global_batch": gbs,
            "recompute": "none",
            "sequence_parallel": tp > 1,
            "zero": 1,
            "distributed_optimizer": True,
            "framework": "NeMo",
            "framework_version": table["version"],
        },
        "measured": {
            "iteration_time_s": None,
            "tflops_per_gpu": tflops,
            "tflops_kind": "model (NeMo flops_formulas, causal attention counted whole)",
        },
        "derived": {
            "iteration_time_s": step,
            "how": "INFERRED: NeMo FLOPs per step / (TFLOPS per GPU x GPUs)",
        },
        "inferred_fields": {
            "plan.micro_batch": "not printed; 1, NeMo's long-context recipes' micro_batch_size (llama3_8b_16k/64k/128k)",
            "plan.recompute": "not printed; none, NeMo's pre-training recipes' default",
            "plan.sequence_parallel": "Megatron's sequence parallelism with TP > 1, as NeMo's recipes set it",
        },
        "notes": notes,
    }


def main():
    write_check_set("check_nemo_long_context.json", [record(t, r) for t in TABLES for r in t["rows"]])


if __name__ == "__main__":
    main()
