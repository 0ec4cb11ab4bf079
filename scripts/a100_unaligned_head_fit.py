#!/usr/bin/env python3
"""Derives the A100's `gemm_model.unaligned_per_head_efficiency` from BigScience's head-count pairs.

BigScience ran the same 182B Megatron-DeepSpeed job (hidden 13824, 78 layers, fp16, unfused attention, Jean Zay's
A100 80 GB) at 96 and at 128 heads, four times with four plans (chronicles-prequel.md at 9e64ede, 'NHEADs comparison'
and 'Another round of NHEADS'; data/validation/check_bigscience_zero1.json). Between the two head counts every op
moves the same bytes and FLOPs but the two GEMMs batched over the heads, whose head dimension goes from 144 to 108,
which is not a multiple of 8 fp16 elements. The ratio of each pair's iteration times, 128 heads over 96, is then the
ratio those GEMMs' rate sets: this script finds the efficiency at which tessel's ratio equals the measured one, pair
by pair, by bisection, and prints the median. The absolute times, which DeepSpeed's pipeline runs miss by 8-15% at
any head count, do not enter.

Run from the repository root after building: python3 scripts/a100_unaligned_head_fit.py [--tessel build/dev/cli/tessel]
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import tempfile

CHECK = "data/validation/check_bigscience_zero1.json"
PAIRS = [  # (96 heads, 128 heads): the same date, plan and micro-batch
    ("bigscience-02-23-h13824-l78-a96-tp8-pp6-dp8-mbs4", "bigscience-02-23-h13824-l78-a128-tp8-pp6-dp8-mbs4"),
    ("bigscience-02-26-h13824-l78-a96-tp4-pp12-dp8-mbs2", "bigscience-02-26-h13824-l78-a128-tp4-pp12-dp8-mbs2"),
    ("bigscience-02-26-h13824-l78-a96-tp4-pp12-dp8-mbs4", "bigscience-02-26-h13824-l78-a128-tp4-pp12-dp8-mbs4"),
    ("bigscience-02-26-h13824-l78-a96-tp8-pp6-dp8-mbs4", "bigscience-02-26-h13824-l78-a128-tp8-pp6-dp8-mbs4"),
]


def predicted_steps(tessel, scenarios, efficiency):
    """Each pair record's predicted step with the A100 presets' per-head figure set to `efficiency`."""
    for path in glob.glob(os.path.join(scenarios, "clusters", "*a100*.json")):
        with open(path) as f:
            doc = json.load(f)
        doc["gpu"]["gemm_model"]["unaligned_per_head_efficiency"] = {"fp16": efficiency, "bf16": efficiency}
        with open(path, "w") as f:
            json.dump(doc, f, indent=2)
    env = dict(os.environ, TESSEL_SCENARIOS=scenarios)
    out = subprocess.run([tessel, "validate", CHECK, "--json"], env=env, check=True, capture_output=True, text=True)
    return {r["id"]: r["predicted_step_seconds"] for r in json.loads(out.stdout)["results"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessel", default="build/dev/cli/tessel")
    args = parser.parse_args()
    with open(CHECK) as f:
        measured = {r["id"]: r["measured"]["iteration_time_s"] for r in json.load(f)}
    with tempfile.TemporaryDirectory() as tmp:
        scenarios = os.path.join(tmp, "scenarios")
        shutil.copytree("scenarios", scenarios)
        fits = []
        for aligned, unaligned in PAIRS:
            target = measured[unaligned] / measured[aligned]
            lo, hi = 0.005, 1.0  # a lower efficiency gives a larger ratio
            for _ in range(30):
                mid = (lo * hi) ** 0.5
                steps = predicted_steps(args.tessel, scenarios, mid)
                if steps[unaligned] / steps[aligned] > target:
                    lo = mid
                else:
                    hi = mid
            fits.append(mid)
            print(f"{unaligned}: measured ratio {target:.4f} -> efficiency {mid:.4f}")
    print(f"median {statistics.median(fits):.4f} (range {min(fits):.4f}-{max(fits):.4f})")


if __name__ == "__main__":
    main()
