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
[--check]. With --check it exits 1 unless the figure every A100 preset ships lies within the pairs' fitted range
(ctest scripts.a100_unaligned_head_fit), so the preset and its derivation cannot part.
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


def a100_presets(scenarios):
    return sorted(glob.glob(os.path.join(scenarios, "clusters", "*a100*.json")))


def shipped_figures():
    """The per-head figure each A100 preset of the repository ships, by preset file."""
    out = {}
    for path in a100_presets("scenarios"):
        with open(path) as f:
            figure = json.load(f)["gpu"]["gemm_model"].get("unaligned_per_head_efficiency", {})
        out[os.path.basename(path)] = figure.get("fp16")
    return out


def predicted_steps(tessel, scenarios, records, efficiency):
    """Each pair record's predicted step with the A100 presets' per-head figure set to `efficiency`."""
    for path in a100_presets(scenarios):
        with open(path) as f:
            doc = json.load(f)
        doc["gpu"]["gemm_model"]["unaligned_per_head_efficiency"] = {"fp16": efficiency, "bf16": efficiency}
        with open(path, "w") as f:
            json.dump(doc, f, indent=2)
    env = dict(os.environ, TESSEL_SCENARIOS=scenarios)
    out = subprocess.run([tessel, "validate", records, "--json"], env=env, check=True, capture_output=True, text=True)
    return {r["id"]: r["predicted_step_seconds"] for r in json.loads(out.stdout)["results"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessel", default="build/dev/cli/tessel")
    parser.add_argument("--check", action="store_true", help="exit 1 unless every A100 preset's figure lies in the fitted range")
    args = parser.parse_args()
    with open(CHECK) as f:
        runs = json.load(f)
    wanted = {i for pair in PAIRS for i in pair}
    measured = {r["id"]: r["measured"]["iteration_time_s"] for r in runs if r["id"] in wanted}
    with tempfile.TemporaryDirectory() as tmp:
        scenarios = os.path.join(tmp, "scenarios")
        shutil.copytree("scenarios", scenarios)
        records = os.path.join(tmp, "pairs.json")  # the eight records alone: each bisection step validates only them
        with open(records, "w") as f:
            json.dump([r for r in runs if r["id"] in wanted], f)
        fits = []
        for aligned, unaligned in PAIRS:
            target = measured[unaligned] / measured[aligned]
            lo, hi = 0.005, 1.0  # a lower efficiency gives a larger ratio
            for _ in range(16):  # the geometric bracket 200x wide, to 1e-4 of its value
                mid = (lo * hi) ** 0.5
                steps = predicted_steps(args.tessel, scenarios, records, mid)
                if steps[unaligned] / steps[aligned] > target:
                    lo = mid
                else:
                    hi = mid
            fits.append(mid)
            print(f"{unaligned}: measured ratio {target:.4f} -> efficiency {mid:.4f}")
    print(f"median {statistics.median(fits):.4f} (range {min(fits):.4f}-{max(fits):.4f})")
    if args.check:
        failed = False
        for preset, figure in shipped_figures().items():
            inside = figure is not None and min(fits) <= figure <= max(fits)
            print(f"{preset}: ships {figure} -> {'inside' if inside else 'OUTSIDE'} the fitted range")
            failed = failed or not inside
        if failed:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
