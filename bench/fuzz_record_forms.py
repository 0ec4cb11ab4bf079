#!/usr/bin/env python3
"""Rewrites each field of the shipped validation records in equivalent written forms and checks that every
prediction stays the same: the record reader's robustness to how a source writes a value.

Usage: python3 bench/fuzz_record_forms.py [--tessel build/ci/cli/tessel]   (from the repository root)
Prints each variant whose prediction moved or whose record was refused, then a count per form.
"""
import argparse, copy, glob, json, os, re, subprocess, sys, tempfile
from collections import Counter

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--tessel", default="build/ci/cli/tessel")
ap.add_argument("--shared", default="../shared/validation/runs.json")
args = ap.parse_args()

files = [args.shared] + sorted(glob.glob("data/validation/check_*.json"))
recs = []
for f in files:
    d = json.load(open(f))
    recs += d if isinstance(d, list) else d.get("runs") or []

# Equivalent forms of a canonical value, per field (None: the key left out, which for vpp/cp/ep means "not
# stated" and is read as the framework's default).
FORMS = {
    ("plan", "zero"): {0: ["0", "stage 0", "ZeRO-0", "ZeRO stage 0", "none", "off", "disabled", False, 0.0],
                       1: ["1", "ZeRO-1", "stage 1", "ZeRO stage 1", "zero1", 1.0],
                       2: ["2", "ZeRO-2", "stage 2"], 3: ["3", "ZeRO-3", "stage 3", 3.0]},
    ("plan", "recompute"): {"none": ["no", "off", False, "disabled", "None", "no recompute"],
                            "full": ["Full", "full recompute", True, "full (every layer)", "activation checkpointing"],
                            "selective": ["Selective", "selective (attention)", "selective recompute"]},
    ("plan", "sequence_parallel"): {True: ["true", "yes", "on", "enabled", 1], False: ["false", "no", "off", 0]},
    ("plan", "distributed_optimizer"): {True: ["true", "yes", 1], False: ["false", "no", 0]},
    ("system", "precision"): {"bf16": ["BF16", "bfloat16", "BF16 mixed precision"], "fp8": ["FP8", "FP8 hybrid"]},
    ("plan", "tp"): {k: [str(k), float(k)] for k in (1, 2, 4, 8)},
    ("plan", "pp"): {k: [str(k), float(k)] for k in (1, 2, 4, 8, 16)},
    ("plan", "micro_batch"): {k: [str(k), float(k)] for k in (1, 2, 4)},
}


def gpu_forms(g):
    out = {g.upper(), g.lower(), "NVIDIA " + g, g.replace(" ", "-"), re.sub(r"(\d+)\s*GB", r"\1 GB", g),
           re.sub(r"(\d+)\s+GB", r"\1GB", g)}
    out.discard(g)
    return sorted(out)


jobs = []
for r in recs:
    def add(sec, key, value):
        q = copy.deepcopy(r)
        q[sec][key] = value
        q["id"] = r["id"] + "|%s.%s=%r" % (sec, key, value)
        jobs.append((r["id"], q))
    for (sec, key), table in FORMS.items():
        v = (r.get(sec) or {}).get(key, "<absent>")
        for canon, alts in table.items():
            if type(v) == type(canon) and v == canon:
                for a in alts:
                    add(sec, key, a)
    sy, me, mo = r.get("system", {}), r.get("measured", {}), r.get("model", {})
    if isinstance(sy.get("gpu"), str):
        for a in gpu_forms(sy["gpu"]):
            add("system", "gpu", a)
    for k in ("iteration_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "tflops_per_gpu"):
        v = me.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            add("measured", k, str(v))
    for k in ("layers", "hidden", "heads", "vocab", "seq"):
        if isinstance(mo.get(k), int):
            add("model", k, str(mo[k]))


def run(records):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(records, f)
    p = subprocess.run([args.tessel, "validate", f.name, "--json"], capture_output=True, text=True)
    os.unlink(f.name)
    if not p.stdout.strip():
        sys.exit("tessel validate failed: " + p.stderr[-800:])
    return {x["id"]: x for x in json.loads(p.stdout)["results"]}


base = run(recs)
out = {}
for i in range(0, len(jobs), 500):
    out.update(run([q for _, q in jobs[i:i + 500]]))
key = lambda x: (x["predicted"], x.get("predicted_step_seconds"), x.get("predicted_peak_memory_bytes"),
                 x.get("measured_step_seconds"), x.get("measured_memory_bytes"))
moved = Counter()
for rid, q in jobs:
    x, b = out[q["id"]], base[rid]
    if key(x) != key(b):
        form = q["id"].split("|")[1]
        moved[form] += 1
        print("MOVED", q["id"], key(b), "->", key(x))
print(len(jobs), "variants,", sum(moved.values()), "moved")
sys.exit(1 if moved else 0)
