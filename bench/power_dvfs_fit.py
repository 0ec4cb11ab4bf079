#!/usr/bin/env python3
"""How the tensor cores' power grows with the SM clock, from bench/power_probe.py's calls: the exponent a GPU capped
below the limit its sustained-share curve was measured at needs (FORMULAS.md §3.3, gpu.sustained_share_power).

Each call held an 8192^3 bf16 GEMM at the power limit and ran the same GEMMs in ~3 ms bursts between idle kernels.
Per call:
- the GEMM's rate per MHz is the held phase's sustained rate over its SM clock, both over the phase's second half
  (the same windows as the sustained rate); a compute-bound GEMM's rate follows the clock, so each burst phase's
  clock during its GEMMs is its sustained rate over that slope (nvidia-smi's clock samples fall in the gaps too);
- each burst phase's duty is the share of its period the GEMMs filled: `duty_measured` where the probe recorded it,
  else its GEMM time per burst over its period (seconds / bursts; the 2026-11-28 calls' gaps ran short of plan);
- the power limit holds the phase's average power, so the GEMMs drew (P - (1 - duty) P_idle) / duty, P the mean
  draw over the phase's second half and P_idle the card's draw idle at its top clock (the log's first sample);
- dynamic power (over P_idle) against the GEMM clock, log against log, gives the exponent by least squares.
A part capped at P_cap instead of the measured P_lim then runs a throttled block's tensor-core kernels at
((P_cap - P_idle) / (P_lim - P_idle)) ^ (1 / exponent) of the clock, and of the share, the curve gives.

  python3 bench/power_dvfs_fit.py [--cap 500] [--limit 700] [POWER.json ...]   (default: the shipped calls)
"""
import argparse
import csv
import datetime
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = ["data/gpu/h200-2026-11-28/power.json", "data/gpu/h200-2026-11-28/power2.json",
           "data/gpu/h100-2026-11-28/power-h100.json", "data/gpu/h200-2026-11-28-tip/power.json"]
GEMM_FLOP = 2.0 * 8192 ** 3


def samples(path):
    """(unix seconds, watts, SM MHz) of the probe's nvidia-smi log."""
    out = []
    for r in csv.reader(open(path)):
        t = datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
        out.append((t.timestamp(), float(r[1]), float(r[2])))
    return out


def second_half(log, phase):
    """Mean watts and MHz over the second half of a phase, as power_probe.py's sustained rate is."""
    a, b = phase["start_unix"], phase["end_unix"]
    s = [x for x in log if a + (b - a) / 2 <= x[0] <= b]
    if not s:
        raise ValueError(f"no nvidia-smi samples in the second half of {phase['phase']}")
    return sum(x[1] for x in s) / len(s), sum(x[2] for x in s) / len(s)


def fit_call(path):
    doc = json.load(open(path))
    log = samples(path + ".smi.csv")
    idle_w = log[0][1]
    points = {p["phase"]: p for p in doc["points"] if "error" not in p}
    power = {p["phase"]: p for p in doc["power"] if p.get("samples")}
    held = points["gemm-bf16-8192"]
    held_w, held_mhz = second_half(log, power["gemm-bf16-8192"])
    per_mhz = held["sustained_rate"] / held_mhz
    rows = [(1.0, held_mhz, held_w)]
    for name in ("duty-75", "duty-50", "duty-25"):
        p = points.get(name)
        if p is None or name not in power:
            continue
        if "duty_measured" in p:
            duty = p["duty_measured"]
        else:
            gemm_s = p["gemm_calls_per_burst"] * GEMM_FLOP / (p["sustained_rate"] * 1e12)
            duty = gemm_s / (p["seconds"] / p["bursts"])
        watts, _ = second_half(log, power[name])
        rows.append((duty, p["sustained_rate"] / per_mhz, (watts - (1.0 - duty) * idle_w) / duty))
    xs = [math.log(mhz) for _, mhz, _ in rows]
    ys = [math.log(w - idle_w) for _, _, w in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    exponent = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return {"call": os.path.relpath(path, ROOT), "device": doc.get("device"), "idle_watts": idle_w,
            "tflops_per_mhz": per_mhz, "points": rows, "exponent": exponent}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("calls", nargs="*", help="power_probe.py JSON files (their .smi.csv beside them)")
    ap.add_argument("--cap", type=float, default=500.0, help="the capped part's limit, watts (default 500)")
    ap.add_argument("--limit", type=float, default=700.0, help="the limit the curve was measured at (default 700)")
    args = ap.parse_args()
    paths = args.calls or [os.path.join(ROOT, p) for p in SHIPPED]
    fits = []
    for path in paths:
        f = fit_call(path)
        fits.append(f)
        print(f"{f['call']} ({f['device']}): idle {f['idle_watts']:.1f} W, {f['tflops_per_mhz']:.4f} TFLOP/s per MHz")
        for duty, mhz, watts in f["points"]:
            print(f"  duty {duty:.2f}: GEMMs at {mhz:6.0f} MHz drawing {watts:5.0f} W")
        print(f"  exponent {f['exponent']:.2f}")
    exponent = sum(f["exponent"] for f in fits) / len(fits)
    idle = sum(f["idle_watts"] for f in fits) / len(fits)
    ratio = ((args.cap - idle) / (args.limit - idle)) ** (1.0 / exponent)
    print(f"mean exponent {exponent:.2f} over {len(fits)} calls (range {min(f['exponent'] for f in fits):.2f}-"
          f"{max(f['exponent'] for f in fits):.2f}), mean idle {idle:.1f} W")
    print(f"a throttled block at {args.cap:.0f} W instead of {args.limit:.0f} W: x{ratio:.3f} of the curve's share")
    return 0


if __name__ == "__main__":
    sys.exit(main())
