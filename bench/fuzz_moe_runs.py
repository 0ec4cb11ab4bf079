#!/usr/bin/env python3
"""Random mixture-of-experts plans through `tessel run --launcher in-process`: each must run with both losses equal
to one rank's of the same global batch (1e-9 relative) or be refused naming a field; never crash or hang.

Usage: python3 bench/fuzz_moe_runs.py [--seed 1] [--plans 30] [--tessel build/ci/cli/tessel]   (from the repo root)
The models: scenarios/models/tiny-moe.json at sequence 16, and the same with a dense first layer and shared experts;
each with and without linear_bias (every expert's, the shared experts' and the dense layer's biases).
"""
import argparse, json, os, random, shutil, subprocess, sys, tempfile

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--plans", type=int, default=30)
ap.add_argument("--tessel", default="build/ci/cli/tessel")
args = ap.parse_args()
random.seed(args.seed)
work = tempfile.mkdtemp(prefix="tessel-moe-fuzz-")
base = json.load(open("scenarios/models/tiny-moe.json"))


def model_file(mixed, bias):
    m = json.loads(json.dumps(base))
    m["seq_len"] = 16
    m["linear_bias"] = bias
    if mixed:
        m["moe"]["dense_layers"] = [0]
        m["moe"]["shared_ffn_hidden"] = 64
    path = os.path.join(work, ("mixed" if mixed else "moe") + ("-bias" if bias else "") + ".json")
    json.dump(m, open(path, "w"))
    return path


models = {(mixed, bias): model_file(mixed, bias) for mixed in (False, True) for bias in (False, True)}


def run(flags, ranks):
    out = os.path.join(work, "run")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [args.tessel, "run", "tiny-cpu", "--launcher", "in-process", "--steps", "2", "--ranks", str(ranks),
           "--nodes", "1", "--gpus-per-node", str(ranks), "--out", out] + flags
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "hang", None, ""
    if p.returncode != 0:
        return ("refused" if p.returncode in (1, 2) else "rc%d" % p.returncode), None, p.stderr.strip()
    return "ran", [json.loads(l)["loss"] for l in open(os.path.join(out, "losses.jsonl"))], ""


reference, counts, bad = {}, {}, 0
for _ in range(args.plans):
    mixed = (random.random() < 0.5, random.random() < 0.5)  # (dense layer and shared experts, linear_bias)
    tp, cp, pp, dp = random.choice([1, 1, 2]), random.choice([1, 1, 2]), random.choice([1, 1, 2]), random.choice([1, 2, 4])
    ranks = tp * cp * pp * dp
    if ranks > 8:
        continue
    mb = random.choice([1, 2])
    gb = dp * mb * random.choice([1, 2])
    flags = ["--model", models[mixed], "--tp", str(tp), "--cp", str(cp), "--pp", str(pp), "--dp", str(dp),
             "--ep", str(random.choice([1, 2, 4])), "--zero", str(random.choice([0, 1, 2, 3])), "--micro-batch", str(mb),
             "--global-batch", str(gb), "--sequence-parallel", "on" if tp > 1 else "off"]
    etp = random.choice([None, None, 1, 2])
    if etp is not None:
        flags += ["--etp", str(etp)]
    if random.random() < 0.3:
        flags += ["--recompute", "full"]
    if (mixed, gb, mb) not in reference:
        reference[(mixed, gb, mb)] = run(["--model", models[mixed], "--pp", "1", "--global-batch", str(gb),
                                          "--micro-batch", str(mb)], 1)[1]
    status, losses, err = run(flags, ranks)
    shown = " ".join(f for f in flags if not f.startswith(work))
    if status == "ran":
        ref = reference[(mixed, gb, mb)]
        if not all(abs(a - b) <= 1e-9 * abs(b) for a, b in zip(losses, ref)):
            status = "ran-different"
            print("DIFFERENT", shown, losses, ref)
            bad += 1
    elif status == "refused":
        if "/" not in err:
            print("NO FIELD", shown, err[-300:])
            bad += 1
    else:
        print(status.upper(), shown, err[-300:])
        bad += 1
    counts[status] = counts.get(status, 0) + 1
shutil.rmtree(work, ignore_errors=True)
print(json.dumps(counts))
sys.exit(1 if bad else 0)
