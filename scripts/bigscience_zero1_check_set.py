#!/usr/bin/env python3
"""Writes data/validation/check_bigscience_zero1.json: BigScience's fp16 ZeRO-1 topology rounds before BLOOM.

The rows are transcribed from bigscience-workshop/bigscience train/tr11-176B-ml/chronicles-prequel.md (commit
9e64ede): 'Best TFLOPs' (2022-02-17, the fp16 20B row on one node and 200B rows), '48 node contenders' (02-21), 'Final round comparison'
(02-23), 'NHEADs comparison' (02-23/24: one model and plan at 16 to 256 heads), 'GBS Variations', 'some more configs
with lower PP' and 'Tweaking TP' (02-25: global batches of 1568-2048, tp 1-8, pp 1-48, three runs out of memory),
'Another round of NHEADS' (02-26) and 'Re-do' (02-27). Until 02-28 the recipe (train/tr11-200B-ml/tr11-200B-ml.slurm at a16f0ea, fd852d7,
523069f) ran --fp16 with ZERO_STAGE=1 (DeepSpeed's ZeRO-1 optimizer over 16-bit gradients), --checkpoint-activations,
ALiBi, --embed-layernorm and Megatron-DeepSpeed's default partition method 'type:transformer' (layers / pp on every
stage, the tied embedding beside the first and last); the 02-28 rows (BF16 optimizer) are check_bigscience_bloom.json.
Run from the repository root: python3 scripts/bigscience_zero1_check_set.py
"""
from check_set_io import write_check_set

SOURCE = ("BigScience, bigscience-workshop/bigscience train/tr11-176B-ml/chronicles-prequel.md (commit 9e64ede), "
          "section '{section}' ({date}): throughput of candidate topologies on Jean Zay, the 2nd iteration's "
          "'elapsed time per iteration', Megatron-DeepSpeed with DeepSpeed's ZeRO-1 optimizer in fp16 (2022)")
OMNIPATH = "4x Omni-Path 100 Gb/s per node (tr11 README: '4 OmniPath links'; Omni-Path Architecture, dedicated NCCL subnet)"

# (section, date, hidden, layers, heads, tp, pp, dp, mb, memory GiB or None, seconds, nodes, split, note)
ROWS = [
    ("Best TFLOPs", "2022-02-17", 14400, 8, 32, 8, 1, 1, 1, 67, 769.99, 1, "type:transformer",
     "the section's one-node row, '20B model: TP=8, PP=1, NLAYERS=8, NHIDDEN=14400, NHEADS=32' ('to measure best "
     "TFLOPs possible use a single [node], so that it uses all the intra-node connections (NVLink) and doesn't touch "
     "the network'): the same recipe with no pipeline and no network"),
    ("Best TFLOPs", "2022-02-17", 14400, 80, 96, 8, 10, 1, 1, 73, 844.81, 10, "type:transformer", None),
    ("Best TFLOPs", "2022-02-17", 14400, 80, 96, 8, 10, 2, 1, 51, 430.21, 20, "type:transformer", None),
    ("48 node contenders", "2022-02-21", 14336, 72, 64, 8, 12, 4, 1, 29, 143.31, 48, "type:transformer", None),
    ("48 node contenders", "2022-02-21", 14336, 72, 64, 8, 12, 4, 2, 37, 134.02, 48, "type:transformer", None),
    ("48 node contenders", "2022-02-21", 14336, 72, 64, 8, 12, 4, 4, 49, 123.69, 48, "type:transformer", None),
    ("48 node contenders", "2022-02-21", 14336, 72, 64, 8, 12, 4, 8, 69, 129.26, 48, "type:transformer", None),
    ("48 node contenders", "2022-02-21", 14336, 72, 64, 8, 6, 8, 1, 38, 139.82, 48, "type:transformer", None),
    ("48 node contenders", "2022-02-21", 14336, 72, 64, 8, 6, 8, 2, 44, 131.02, 48, "type:transformer", None),
    ("48 node contenders", "2022-02-21", 14336, 72, 64, 8, 6, 8, 4, 56, 121.48, 48, "type:transformer", None),
    ("48 node contenders", "2022-02-21", 13824, 84, 64, 8, 12, 4, 2, 39, 143.89, 48, "type:transformer", None),
    ("48 node contenders", "2022-02-21", 13824, 84, 64, 8, 12, 4, 4, 52, 133.12, 48, "type:transformer", None),
    ("48 node contenders", "2022-02-21", 13824, 84, 64, 8, 6, 8, 2, 65, 141.41, 48, "type:transformer",
     "the table's micro-batch 2 row reads 65GB against 56GB at micro-batch 4, the reverse of every other pair: "
     "one nvidia-smi snapshot ('the data isn't exact and can fluctuate a bit'), kept as published"),
    ("48 node contenders", "2022-02-21", 13824, 84, 64, 8, 6, 8, 4, 56, 130.31, 48, "type:transformer", None),
    ("Final round comparison", "2022-02-23", 12288, 96, 64, 8, 6, 8, 2, None, 136.73, 48, "type:transformer", None),
    ("Final round comparison", "2022-02-23", 12288, 96, 64, 8, 6, 8, 4, None, 122.96, 48, "type:transformer", None),
    ("Final round comparison", "2022-02-23", 13312, 84, 64, 8, 12, 4, 4, None, 125.52, 48, "type:transformer", None),
    ("Final round comparison", "2022-02-23", 13312, 84, 64, 8, 6, 8, 2, None, 135.55, 48, "type:transformer", None),
    ("Final round comparison", "2022-02-23", 13312, 84, 64, 8, 6, 8, 4, None, 122.93, 48, "type:transformer", None),
    ("Re-do", "2022-02-27", 13824, 78, 96, 8, 6, 8, 2, None, 133.57, 48, "type:transformer", None),
    ("Re-do", "2022-02-27", 13824, 78, 96, 8, 6, 8, 4, 59, 118.24, 48, "type:transformer", None),
    ("Re-do", "2022-02-27", 13824, 78, 96, 4, 6, 16, 4, 75, 115.55, 48, "type:transformer", None),
    ("Re-do", "2022-02-27", 12288, 106, 96, 4, 12, 8, 2, 44, 112.69, 48, "type:transformer|embed", None),
    ("Re-do", "2022-02-27", 12288, 106, 64, 4, 12, 8, 2, None, 110.96, 48, "type:transformer|embed", None),
    # The head-count rounds: the same model and plan at several head counts. Their 64-head rows of hidden 12288
    # and 13312 are the 'Final round comparison' rows above (the same runs) and are not repeated.
    ("NHEADs comparison", "2022-02-24", 14336, 72, 16, 8, 6, 8, 4, 54, 121.03, 48, "type:transformer", None),
    ("NHEADs comparison", "2022-02-23", 14336, 72, 32, 8, 6, 8, 4, 55, 124.01, 48, "type:transformer", None),
    ("NHEADs comparison", "2022-02-23", 14336, 72, 64, 8, 6, 8, 4, 55, 120.18, 48, "type:transformer", None),
    ("NHEADs comparison", "2022-02-23", 14336, 72, 112, 8, 6, 8, 4, 53, 138.72, 48, "type:transformer", None),
    ("NHEADs comparison", "2022-02-23", 14336, 72, 128, 8, 6, 8, 4, 55, 124.89, 48, "type:transformer", None),
    ("NHEADs comparison", "2022-02-24", 14336, 72, 256, 8, 6, 8, 4, 54, 132.85, 48, "type:transformer", None),
    ("NHEADs comparison", "2022-02-23", 13824, 78, 64, 8, 6, 8, 4, None, 121.28, 48, "type:transformer", None),
    ("NHEADs comparison", "2022-02-23", 13824, 78, 96, 8, 6, 8, 4, 59, 124.75, 48, "type:transformer", None),
    ("NHEADs comparison", "2022-02-23", 13824, 78, 128, 8, 6, 8, 4, 54, 162.72, 48, "type:transformer", None),
    ("NHEADs comparison", "2022-02-23", 13312, 84, 128, 8, 6, 8, 4, None, 129.17, 48, "type:transformer", None),
    ("NHEADs comparison", "2022-02-24", 12288, 96, 96, 8, 6, 8, 4, None, 145.40, 48, "type:transformer", None),
    ("NHEADs comparison", "2022-02-24", 12288, 96, 128, 8, 6, 8, 4, None, 129.42, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 13824, 78, 64, 4, 12, 8, 1, None, 148.24, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 13824, 78, 64, 4, 12, 8, 2, 48, 103.51, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 13824, 78, 96, 4, 12, 8, 2, 48, 107.12, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 13824, 78, 128, 4, 12, 8, 2, None, 147.41, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 13824, 78, 64, 4, 12, 8, 4, None, 106.72, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 13824, 78, 96, 4, 12, 8, 4, None, 110.31, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 13824, 78, 128, 4, 12, 8, 4, None, 153.90, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 13824, 78, 96, 8, 6, 8, 4, None, 118.12, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 13824, 78, 128, 8, 6, 8, 4, None, 156.84, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 14336, 72, 64, 4, 12, 8, 2, None, 110.42, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 14336, 72, 128, 4, 12, 8, 2, None, 114.02, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 14336, 72, 128, 4, 12, 8, 4, None, 137.53, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 14336, 72, 64, 8, 6, 8, 4, None, 113.95, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 14336, 72, 128, 8, 6, 8, 4, None, 116.06, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 13312, 84, 64, 4, 12, 8, 2, None, 103.82, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 13312, 84, 64, 4, 12, 8, 4, None, 113.21, 48, "type:transformer", None),
    ("Another round of NHEADS", "2022-02-26", 13312, 84, 64, 8, 6, 8, 2, None, 129.61, 48, "type:transformer", None),
    # 02-25 ('GBS Variations', 'some more configs with lower PP', 'Tweaking TP'): hidden 14336, 72 layers, 64 heads,
    # global batches of 1568-2048 (the 15th field; 2048 where absent); no seconds: the table's 'OOM'.
    ("GBS Variations", "2022-02-25", 14336, 72, 64, 8, 6, 8, 4, 56, 113.01, 48, "type:transformer",
     ("measured.iteration_time_s", "at global batch 1568 the table reads 113.01 s beside 114.11 s at 2048 for the same plan, where its pp 12 pair "
     "scales with the batch (92.75 / 117.07 s): one snapshot, kept as published"), 1568),
    ("GBS Variations", "2022-02-25", 14336, 72, 64, 8, 6, 8, 4, 55, 114.11, 48, "type:transformer", None),
    ("GBS Variations", "2022-02-25", 14336, 72, 64, 8, 6, 8, 6, 66, 123.57, 48, "type:transformer", None, 2016),
    ("GBS Variations", "2022-02-25", 14336, 72, 64, 8, 12, 4, 4, None, 92.75, 48, "type:transformer", None, 1568),
    ("GBS Variations", "2022-02-25", 14336, 72, 64, 8, 12, 4, 4, 49, 117.07, 48, "type:transformer", None),
    ("GBS Variations", "2022-02-25", 14336, 72, 64, 8, 12, 4, 2, None, 99.93, 48, "type:transformer", None, 1568),
    ("GBS Variations", "2022-02-25", 14336, 72, 64, 8, 12, 4, 2, None, 128.82, 48, "type:transformer", None),
    ("some more configs with lower PP", "2022-02-25", 14336, 72, 64, 8, 8, 6, 4, 52, 113.16, 48, "type:transformer", None, 2016),
    ("some more configs with lower PP", "2022-02-25", 14336, 72, 64, 8, 4, 12, 2, 53, 125.52, 48, "type:transformer", None, 2016),
    ("some more configs with lower PP", "2022-02-25", 14336, 72, 64, 8, 4, 12, 4, 59, 114.81, 48, "type:transformer", None, 2016),
    ("some more configs with lower PP", "2022-02-25", 14336, 72, 64, 8, 2, 24, 1, 65, 145.45, 48, "type:transformer", None, 2016),
    ("some more configs with lower PP", "2022-02-25", 14336, 72, 64, 8, 2, 24, 2, 76, 136.13, 48, "type:transformer", None, 2016),
    ("some more configs with lower PP", "2022-02-25", 14336, 72, 64, 8, 1, 48, 1, None, None, 48, "type:transformer", None, 2016),
    ("Tweaking TP", "2022-02-25", 14336, 72, 64, 4, 12, 8, 4, 60, 111.89, 48, "type:transformer", None),
    ("Tweaking TP", "2022-02-25", 14336, 72, 64, 4, 12, 8, 2, 44, 110.48, 48, "type:transformer",
     ("measured.iteration_time_s", "the table runs this plan twice, 110.48 s at 44GB and 113.54 s at 38GB: both kept")),
    ("Tweaking TP", "2022-02-25", 14336, 72, 64, 4, 12, 8, 2, 38, 113.54, 48, "type:transformer",
     ("measured.iteration_time_s", "the second run of the plan above (110.48 s at 44GB)")),
    ("Tweaking TP", "2022-02-25", 14336, 72, 64, 4, 6, 16, 4, 75, 117.11, 48, "type:transformer", None),
    ("Tweaking TP", "2022-02-25", 14336, 72, 64, 4, 6, 16, 2, 57, 111.71, 48, "type:transformer", None),
    ("Tweaking TP", "2022-02-25", 14336, 72, 64, 2, 12, 16, 2, 63, 112.50, 48, "type:transformer", None),
    ("Tweaking TP", "2022-02-25", 14336, 72, 64, 2, 6, 32, 2, None, None, 48, "type:transformer", None),
    ("Tweaking TP", "2022-02-25", 14336, 72, 64, 2, 6, 32, 1, None, None, 48, "type:transformer", None),
    ("Tweaking TP", "2022-02-25", 14336, 72, 64, 2, 24, 8, 1, 44, 119.53, 48, "type:transformer", None),
    ("Tweaking TP", "2022-02-25", 14336, 72, 64, 2, 24, 8, 2, 53, 122.75, 48, "type:transformer", None),
    ("Tweaking TP", "2022-02-25", 14336, 72, 64, 4, 24, 4, 1, None, 130.60, 48, "type:transformer", None),
    ("Tweaking TP", "2022-02-25", 12288, 96, 64, 1, 48, 8, 1, 58, 142.17, 48, "type:transformer",
     ("model.heads", "the section's last table, 'NHIDDEN=12288 / NLAYERS=96', names no head count: the rounds' 64 "
                     "(the 'Final round comparison': 'all NHEADS=64')")),
]


def split(layers, pp, method):
    if method == "type:transformer":
        # Uneven counts fill every stage but the last: 78 layers on 12 stages, 'the last stage has 1 block, while
        # the rest have 7' (the chronicle's 'Re-do' section).
        per = -(-layers // pp)
        return [per] * (pp - 1) + [layers - per * (pp - 1)]
    # 'type:transformer|embed': the tied embedding takes a layer's slot on the first and last stage.
    per = (layers + 2) // pp
    return [per - 1] + [per] * (pp - 2) + [per - 1]


def record(row, repeat=0):
    section, date, hidden, layers, heads, tp, pp, dp, mb, mem, seconds, nodes, method, note, *rest = row
    gbs = rest[0] if rest else 2048
    assert tp * pp * dp == nodes * 8, row
    assert gbs % (dp * mb) == 0, row
    layout = split(layers, pp, method)
    assert sum(layout) == layers, (row, layout)
    rid = f"bigscience-{date[5:]}-h{hidden}-l{layers}-a{heads}-tp{tp}-pp{pp}-dp{dp}-mbs{mb}"
    rid += (f"-gbs{gbs}" if gbs != 2048 else "") + (f"-run{repeat + 1}" if repeat else "") + ("-oom" if seconds is None else "")
    measured = {"iteration_time_s": seconds} if seconds is not None else {"oom": True, "outcome": "OOM (the table's Mem column)"}
    if mem is not None:
        measured.update({
            "memory_gb": mem,
            "memory_unit": "GiB",
            "memory_kind": "nvidia-smi (reserved, with the CUDA context)",
            "memory_note": "'Mem' column: max memory used by the first (last) nodes, the ones with the word embedding, "
                           "read with nvidia-smi",
        })
    blocking = date >= "2022-02-20"
    inferred = {
        "system.precision": "--fp16 with ZERO_STAGE=1 in tr11-200B-ml.slurm until 2022-02-28 (a16f0ea, fd852d7, 523069f: "
                            "'#    --bf16'); the 02-28 section: the BF16 optimizer is 'compared to fp16 which grad "
                            "accumulates in fp16'",
        "plan.pipeline_layers": f"partition method '{method}'" + (
            " (Megatron-DeepSpeed's default before --pp-partition-method of 02-28): layers / pp on every stage"
            + ("" if layers % pp == 0 else f", {layout[0]} on all but the last, which holds {layout[-1]} ('Re-do': "
               "'78/12=6.5 - so the last stage has 1 block, while the rest have 7')")
            if method == "type:transformer" else ": the tied embedding in a layer's slot on the first and last stage"),
        "plan.recompute": "the recipe's --checkpoint-activations, every layer",
        "model.vocab": "the 250k tokenizer padded to a multiple of 128 x tp: 250880",
        "model.ffn_hidden": "Megatron's default 4 x hidden",
        "model.dropout": DROPOUT_SOURCE,
        "measured.memory_unit": "nvidia-smi prints MiB; the table's 'GB' read as MiB / 1024",
        "plan.launch_blocking": (
            "CUDA_LAUNCH_BLOCKING=1: without it 320 GPUs 'always hangs' ('dealing with JZ hanging on the large model', "
            "before these rounds of 40-48 nodes); the committed recipe keeps it commented out ('XXX: remove for main "
            "training!!!'), so the benchmark jobs' setting is read from the chronicle" if blocking else
            "not yet: the chronicle's hanging workaround comes after this round of 10 and 20 nodes"),
    }
    if isinstance(note, tuple):  # (the field it is about, the note)
        inferred[note[0]] = note[1]
    elif note and pp == 1:
        inferred["measured.iteration_time_s"] = note
    elif note:
        inferred["measured.memory_gb"] = note
    return {
        "id": rid,
        "group": "bigscience_tr11_prequel_zero1_fp16",
        "kind": "training_throughput",
        "source": SOURCE.format(section=section, date=date),
        "source_url": "https://github.com/bigscience-workshop/bigscience/blob/master/train/tr11-176B-ml/chronicles-prequel.md",
        "source_quality": "primary (the training team's own logs and notes)",
        "model": {
            "name": "BLOOM-style", "layers": layers, "hidden": hidden, "heads": heads, "kv_heads": heads,
            "ffn_hidden": 4 * hidden, "vocab": 250880, "seq": 2048, "position_embedding": "alibi",
            "dropout": 0.1, "activation": "gelu", "norm": "layernorm", "params": None,
        },
        "system": {
            "gpu": "A100-SXM4-80GB", "gpus_per_node": 8, "nodes": nodes, "total_gpus": nodes * 8,
            "intra_node_link": "8 A100 SXM4 80 GB per node, NVLink ('NVLink 4 inter-gpu connects', tr11 README)",
            "inter_node_link": OMNIPATH,
            "precision": "fp16 (--fp16; DeepSpeed fp16.enabled)",
        },
        "plan": {
            "tp": tp, "pp": pp, "dp": dp, "cp": 1, "ep": 1, "vpp": 1, "micro_batch": mb, "global_batch": gbs,
            "recompute": "full (--checkpoint-activations)", "sequence_parallel": False, "zero": 1,
            "distributed_optimizer": False, "framework": "deepspeed", "framework_version": "2022",
            "attention": "unfused: Megatron's fused scaled masked softmax with ALiBi (--abort-on-unmet-fused-kernel-constraints)",
            "pipeline_layers": layout, "pipeline_split": f"--pp-partition-method '{method}'",
            "launch_blocking": blocking,
        },
        "measured": measured,
        "inferred_fields": inferred,
        "notes": "One snapshot of iteration 2 per row ('I take the snapshot of a single iteration (always 2nd) the data "
                 "isn't exact and can fluctuate a bit'). Jean Zay's A100 80 GB partition." + (
                     " After the chronicle's 02-25 note: 'A100s PCI-Express/NUMA was improved today so all TFLOPs have "
                     "changed for the better (1-5%)'." if date >= "2022-02-25" else ""),
    }


# The recipes pass no dropout flag, so Megatron-DeepSpeed's defaults ran (arguments.py: --attention-dropout and
# --hidden-dropout default 0.1), as the tr11 README says of the final run.
DROPOUT_SOURCE = ("no --attention-dropout or --hidden-dropout in tr11-200B-ml.slurm, so Megatron-DeepSpeed's defaults "
                  "(0.1 each, megatron/arguments.py); tr11-176B-ml README: 'The default Megatron-LM dropout settings "
                  "are inherited: --attention-dropout 0.1, --hidden-dropout default=0.1'")


def main():
    records, seen = [], {}
    for r in ROWS:
        key = r[:9] + (r[14:],)  # a plan the table ran twice (same section, date, shape and batch)
        records.append(record(r, seen.get(key, 0)))
        seen[key] = seen.get(key, 0) + 1
    write_check_set("check_bigscience_zero1.json", records)


if __name__ == "__main__":
    main()
