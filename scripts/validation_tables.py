"""Writes docs/validation.md's two summary tables (the shared set by group, the check sets) from `tessel validate --json`.

The tables are the figures a reader quotes; written by hand they fell behind the model (2026-12-06: eleven of the
check-set rows were stale by up to 9 points). Run from the repository root:

    python3 scripts/validation_tables.py --tessel build/dev/cli/tessel --write docs/validation.md
    python3 scripts/validation_tables.py --tessel build/dev/cli/tessel --check docs/validation.md   # what ctest runs

Each table sits between `<!-- validation_tables: NAME -->` and `<!-- validation_tables: end -->` in the document;
--write replaces what is between them, --check exits 1 with a diff where it differs.
"""
import argparse
import difflib
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys

SHARED = os.path.join("data", "validation", "runs.json")  # the shared set as shipped (a copy of ../shared/validation)

# The shared set's groups, as the issue names their sources.
SHARED_GROUPS = [
    ("megatron_sc21_table1", "Megatron-LM SC'21 Table 1 (A100, 1.7B-1T)"),
    ("korthikanti_table5", "Korthikanti 2022 Table 5 (A100, 22B-1T)"),
    ("megascale_table2_175B_strong_scaling", "MegaScale Table 2 (175B, 256-12288 GPUs)"),
    ("mosaicml_llm_foundry_mpt_benchmarks", "MosaicML llm-foundry MPT (A100 40/80 GB, H100)"),
]

# The check sets, never fitted: (label, file under data/validation/, the record group the row takes, a group prefix
# ending in "*", or None for all).
CHECK_SETS = [
    ("NVIDIA NeMo 24.07 / Megatron-Bridge 25.x-26.x, H100 FP8", "check_nemo_h100_fp8.json", None),
    ("NeMo's long-sequence tables, H100 (24.03.01) and B200 (25.04), FP8, cp 1-32", "check_nemo_long_context.json", None),
    ("Megatron-LM README weak and strong scaling, H100 BF16", "check_megatron_lm_h100.json", None),
    ("Megatron-LM's CI functional runs (peaks only)", "check_megatron_functional_memory_speed.json", None),
    ("MosaicML MPT rows the shared set does not hold (A100, H100)", "check_mpt_llm_foundry.json", None),
    ("torchtitan, Grand Teton H100 (500 W)", "check_torchtitan_h100.json", None),
    ("torchtitan, H200 (700 W), June 2025", "check_torchtitan_h200.json", None),
    ("PyTorch GPT-2 124M measured here, H100", "check_pytorch_gpt2_h100.json", None),
    ("PyTorch GPT-2 124M measured here, H200", "check_pytorch_gpt2_h200.json", None),
    ("Megatron-Bridge, B200 FP8", "check_megatron_bridge_b200_fp8.json", None),
    ("Megatron-Bridge, GB200 NVL72 FP8", "check_megatron_bridge_gb200_fp8.json", None),
    ("Megatron-Bridge, GB300 NVL72 FP8", "check_megatron_bridge_gb300_fp8.json", None),
    ("Megatron-Bridge 2026 tables, GB300 / GB200 / H100, FP8 and MXFP8", "check_megatron_bridge_2026.json", None),
    ("NVIDIA DGX Cloud benchmarking recipes, H100 BF16 and FP8", "check_dgxc_h100.json", None),
    ("DGX Cloud's MaxText (JAX/XLA) Llama 2 70B recipe, 64-2048 H100, BF16 and FP8 (v25.01)",
     "check_dgxc_maxtext_h100.json", "dgxc_maxtext_h100_v25_01"),
    ("DGX Cloud's MaxText (JAX/XLA) Llama 3 70B recipe, 128-2048 H100, BF16 and FP8 (v25.02)",
     "check_dgxc_maxtext_h100.json", "dgxc_maxtext_h100_v25_02"),
    ("DGX Cloud's Llama 3.1 405B recipe of May 2025, GB200", "check_dgxc_405b_2505.json", "dgxc_llama31_405b_gb200_2505"),
    ("DGX Cloud's Llama 3.1 405B recipe of May 2025, H100", "check_dgxc_405b_2505.json", "dgxc_llama31_405b_h100_2505"),
    ("DGX Cloud's Grok-1 314B recipe (mixture of experts), H100", "check_dgxc_grok1_moe.json", None),
    ("The Llama 3 paper's 405B pre-training stages, 8192-16384 H100", "check_llama3_405b_paper.json", None),
    ("Megatron-Bridge's Qwen3 MoE rows, H100 FP8, and its BF16 overlap A/B", "check_megatron_bridge_moe_h100.json", None),
    ("MLPerf Training GPT-3 175B, NVIDIA-stack submissions v3.0-v4.1 (256-11616 H100, 64 B200), FP8",
     "check_mlperf_training.json", "mlperf_gpt3_*"),
    ("MLPerf Training v5.0 Llama 3.1 405B, NVIDIA on 512-8192 H100, FP8", "check_mlperf_training.json",
     "mlperf_llama31_405b_v5.0_h100"),
    ("MLPerf Training v5.0 Llama 3.1 405B, NVIDIA and CoreWeave on 256-2496 GB200, FP8", "check_mlperf_training.json",
     "mlperf_llama31_405b_v5.0_gb200"),
    ("MLPerf Training v5.1 Llama 3.1 405B, Nebius on 512-1024 H200, FP8", "check_mlperf_training.json",
     "mlperf_llama31_405b_v5.1_h200"),
    ("MLPerf Training v5.1 Llama 3.1 405B, University of Florida on 256-448 B200, FP8 current scaling",
     "check_mlperf_training.json", "mlperf_llama31_405b_v5.1_b200"),
    ("MLPerf Training v5.1 Llama 3.1 8B, Cisco on 64-128 H100 over RoCE, FP8 delayed scaling",
     "check_mlperf_training.json", "mlperf_llama31_8b_v5.1_h100"),
    ("MLPerf Training v5.1 Llama 3.1 8B, HPE on 64 H200, FP8 current scaling", "check_mlperf_training.json",
     "mlperf_llama31_8b_v5.1_h200"),
    ("MLPerf Training v5.1 Llama 3.1 8B, four submitters on 8-256 B200, FP8 current scaling",
     "check_mlperf_training.json", "mlperf_llama31_8b_v5.1_b200"),
    ("MLPerf Training v5.1 Llama 3.1 8B, Dell and Supermicro on one B300 node, FP8 current scaling",
     "check_mlperf_training.json", "mlperf_llama31_8b_v5.1_b300"),
    ("MLPerf Training v5.1 Llama 3.1 8B, NVIDIA on 72-512 GB200, FP8 current scaling", "check_mlperf_training.json",
     "mlperf_llama31_8b_v5.1_gb200"),
    ("MLPerf Training v5.1 Llama 3.1 8B, NVIDIA and Lambda on 72-512 GB300, FP8 current scaling",
     "check_mlperf_training.json", "mlperf_llama31_8b_v5.1_gb300"),
    ("MLPerf Training v5.1 Llama 3.1 8B, seven submitters on one or two B200 / B300 / GB200 / GB300 nodes, NVFP4",
     "check_nvfp4_blackwell.json", "mlperf_llama31_8b_v5.1_nvfp4_*"),
    ("MLPerf Training v5.1 Llama 3.1 405B, NVIDIA on 512-5120 GB200 / GB300, NVFP4", "check_nvfp4_blackwell.json",
     "mlperf_llama31_405b_v5.1_nvfp4_*"),
    ("Megatron-Bridge 2026 tables, Llama 3 70B and 3.1 405B on 64-256 GB300 / GB200, NVFP4", "check_nvfp4_blackwell.json",
     "megatron_bridge_nvfp4_*"),
    ("Nemotron-4 340B technical report, batch ramp-up on 1536-6144 H100", "check_nemotron4_340b_h100.json", None),
    ("BigScience BLOOM under DeepSpeed's pipeline engine, A100 80 GB", "check_bigscience_bloom.json", None),
    ("BigScience's fp16 ZeRO-1 topology rounds before BLOOM (2022-02-17 to 02-27)", "check_bigscience_zero1.json", None),
    ("EleutherAI GPT-NeoX-20B under DeepSpeed's pipeline engine, A100 40 GB", "check_eleutherai_gpt_neox.json", None),
    ("DeepSpeed ZeRO-3 on Azure A100 80 GB (the DeepSpeed team's 2022 blog)", "check_deepspeed_azure_zero3.json", None),
    ("Megatron-LM 2019 on V100 (DGX-2H), fp16", "check_megatron_lm_2019_v100.json", None),
    ("AI2's OLMo-core on one H100 node, BF16 and torchao Float8", "check_olmo_core_h100.json", None),
    ("NVIDIA NeMo AutoModel (PyTorch FSDP2), H100 BF16", "check_automodel_h100.json", None),
    ("KempnerForge (FSDP2 + DTensor TP), H200 on nodes of 4, 1-160 GPUs", "check_kempnerforge_h200.json", None),
    ("LUMI's ROCm Megatron-LM, MI250X GCDs", "check_lumi_megatron_mi250x.json", None),
]


def fail(message):
    """A usage or input error: exit 2, so --check's 1 means only "the tables differ"."""
    print(f"validation_tables.py: {message}", file=sys.stderr)
    sys.exit(2)


CACHE = None  # --cache DIR: each validate's output kept there and reused (the test runs the script three times)


def validate(tessel, files, logo=False):
    cmd = [tessel, "validate", "--json"] + (["--leave-one-group-out"] if logo else []) + files
    cached = os.path.join(CACHE, hashlib.sha256("\0".join(cmd).encode()).hexdigest() + ".json") if CACHE else None
    if cached and os.path.exists(cached):
        with open(cached) as f:
            return json.load(f)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()}")
    if cached:
        with open(cached, "w") as f:
            f.write(out.stdout)
    return json.loads(out.stdout)


def pct(x, signed=False):
    return f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%"


def shared_table(tessel):
    plain, logo = validate(tessel, [SHARED]), validate(tessel, [SHARED], logo=True)
    groups = {g["group"]: g for g in plain["groups"]}
    assert sorted(groups) == sorted(g for g, _ in SHARED_GROUPS), sorted(groups)
    rows = ["| group | records | median \\|err\\| | max \\|err\\| | mean err | worst record |", "|---|---|---|---|---|---|"]

    def row(label, g, bold=False):
        b = "**" if bold else ""
        return (f"| {label} | {g['records']} | {b}{pct(g['median_abs_step_error'])}{b} | "
                f"{b}{pct(g['max_abs_step_error'])}{b} | {pct(g['mean_signed_step_error'], True)} | `{g['worst']}` |")

    rows += [row(label, groups[g]) for g, label in SHARED_GROUPS]
    rows.append(row("all", plain["overall"], bold=True))
    rows.append(row("all, leave one group out", logo["overall"], bold=True))
    return rows


def check_table(tessel, root):
    rows = ["| check set | file | records | step: median \\|err\\| | max \\|err\\| | mean err | peaks: records, median \\|err\\| |",
            "|---|---|---|---|---|---|---|"]
    cache = {}
    for label, name, group in CHECK_SETS:
        if name not in cache:
            cache[name] = validate(tessel, [os.path.join(root, "data", "validation", name)])["results"]
        results = [r for r in cache[name] if group is None or r["group"] == group or
                   (group.endswith("*") and r["group"].startswith(group[:-1]))]
        assert results, (name, group)
        steps = [r["step_error"] for r in results if r.get("step_error") is not None]
        peaks = [abs(r["memory_error"]) for r in results if r.get("memory_error") is not None]
        ooms = [r for r in results if r.get("measured_out_of_memory")]
        called = sum(1 for r in ooms if r.get("predicted_fits") is False)
        count = f"{len(results)}" + (f" ({len(ooms)} ran out of memory, {called} predicted so)" if ooms else "")
        if steps:
            errs = [abs(e) for e in steps]
            step = f"{pct(statistics.median(errs))} | {pct(max(errs))} | {pct(statistics.mean(steps), True)}"
        else:
            step = "- | - | -"
        peak = f"{len(peaks)}, {pct(statistics.median(peaks))}" if peaks else "-"
        rows.append(f"| {label} | `{name}` | {count} | {step} | {peak} |")
    every = validate(tessel, [SHARED] + [os.path.join(root, "data", "validation", n) for n in sorted(cache)])["results"]
    steps = [r["step_error"] for r in every if r.get("step_error") is not None]
    peaks = [abs(r["memory_error"]) for r in every if r.get("memory_error") is not None]
    errs = [abs(e) for e in steps]
    rows.append(f"| **every record, the shared set's and the check sets'** | | {len(every)} ({len(steps)} with a step time) | "
                f"**{pct(statistics.median(errs))}** | {pct(max(errs))} | {pct(statistics.mean(steps), True)} | "
                f"{len(peaks)}, {pct(statistics.median(peaks))} |")
    covered = {name for _, name, _ in CHECK_SETS}
    on_disk = {f for f in os.listdir(os.path.join(root, "data", "validation")) if re.match(r"check_.*\.json$", f)}
    missing = sorted(on_disk - covered)
    if missing:
        fail(f"check sets without a row in scripts/validation_tables.py: {', '.join(missing)}")
    return rows


def splice(doc, name, rows):
    begin, end = f"<!-- validation_tables: {name} -->", "<!-- validation_tables: end -->"
    start = doc.find(begin)
    if start < 0:
        fail(f"no '{begin}' marker in the document")
    stop = doc.find(end, start)
    if stop < 0:
        fail(f"no '{end}' after '{begin}'")
    return doc[: start + len(begin)] + "\n" + "\n".join(rows) + "\n" + doc[stop:]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tessel", default="build/dev/cli/tessel", help="the tessel binary")
    p.add_argument("--root", default=".", help="the repository root")
    p.add_argument("--cache", metavar="DIR", help="keep each `tessel validate` output in DIR and reuse it")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", metavar="DOC", help="replace the tables in DOC")
    mode.add_argument("--check", metavar="DOC", help="exit 1 where DOC's tables differ from the model's figures")
    a = p.parse_args()
    global SHARED, CACHE
    SHARED = os.path.join(a.root, SHARED)
    CACHE = a.cache
    tables = {"shared": shared_table(a.tessel), "check_sets": check_table(a.tessel, a.root)}
    if not (a.write or a.check):
        for name, rows in tables.items():
            print(f"{name}:\n" + "\n".join(rows) + "\n")
        return 0
    path = a.write or a.check
    with open(path) as f:
        doc = f.read()
    new = doc
    for name, rows in tables.items():
        new = splice(new, name, rows)
    if a.write:
        if new != doc:
            with open(path, "w") as f:
                f.write(new)
        print(f"{path}: tables {'rewritten' if new != doc else 'already in step'}")
        return 0
    if new == doc:
        print(f"{path}: tables in step with the model")
        return 0
    sys.stdout.writelines(difflib.unified_diff(doc.splitlines(True), new.splitlines(True), path, "the model's figures"))
    print(f"\n{path}: tables differ from the model's figures; rerun with --write {path} (and say in the commit "
          "which figures moved)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
