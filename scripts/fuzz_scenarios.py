#!/usr/bin/env python3
"""Feeds tessel mutated scenarios and checks each ends in a result or a named error, never a crash or a hang.

Each case takes a shipped plan with its model and cluster inlined, changes one or two fields (deletes them, or sets
null, a string, a negative, zero, a huge or tiny number, an empty or odd list or object) and runs `tessel predict`,
`trace`, `export` or `search` on it. A case fails when tessel dies by a signal, aborts (an uncaught exception),
runs past the timeout, exits non-zero without naming a field (a JSON pointer, "#/...", the file's path aside) or prints NaN or inf.
Deterministic for a seed: `python3 scripts/fuzz_scenarios.py --tessel build/dev/cli/tessel --cases 2000 --seed 7`.
"""
import argparse
import copy
import json
import os
import random
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLANS = ["llama3-8b-h100", "llama3-70b-h100", "mixtral-8x7b-h100", "gpt3-175b-megatron"]
VALUES = [None, "x", "", "nan", -1, 0, 7, 0.5, -0.0, 1e-300, 1e308, -1e308, 2**62, 10**30, True, [], [1, 2], {},
          {"a": 1}]
COMMANDS = ["predict", "trace", "export", "search"]


def load(path):
    with open(path) as f:
        return json.load(f)


def base_scenarios():
    out = []
    for name in PLANS:
        s = load(os.path.join(ROOT, "scenarios", "plans", name + ".json"))
        for key, folder in (("model", "models"), ("cluster", "clusters")):
            if isinstance(s.get(key), str):
                s[key] = load(os.path.join(ROOT, "scenarios", folder, s[key] + ".json"))
        out.append(s)
    return out


def paths(x, prefix=()):
    out = [prefix]
    if isinstance(x, dict):
        for k, v in x.items():
            out += paths(v, prefix + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            out += paths(v, prefix + (i,))
    return out


def mutate(scenario, rng, tops):
    """One field of the scenario changed; returns the new scenario and what was done."""
    s = copy.deepcopy(scenario)
    candidates = [p for p in paths(s) if p and (not tops or p[0] in tops)]
    path = rng.choice(candidates)
    parent = s
    for k in path[:-1]:
        parent = parent[k]
    pointer = "/" + "/".join(str(k) for k in path)
    if isinstance(parent, dict) and rng.random() < 0.2:
        del parent[path[-1]]
        return s, pointer + " deleted"
    value = rng.choice(VALUES)
    parent[path[-1]] = value
    return s, pointer + " = " + json.dumps(value)


def run_case(tessel, command, scenario_path, out_dir, rng, timeout, wrote_nan_text):
    args = [tessel, command, scenario_path]
    if command == "trace":
        args += ["-o", os.path.join(out_dir, "trace.json"), "--force"]
    elif command == "export":
        args += ["--format", rng.choice(["megatron", "deepspeed", "torchtitan"])]
    elif command == "search":
        args += ["--top", "3"]
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang: no answer in %d s" % timeout
    err = r.stderr.strip()
    if r.returncode < 0 or r.returncode >= 128:
        return "killed by a signal (exit %d): %s" % (r.returncode, err[-300:])
    if "terminate called" in err or "Assertion" in err:
        return "aborted: " + err[-300:]
    # The pointer, not the file's path: tessel writes FILE#/pointer, so the path is taken out before looking.
    named = re.search(r"(?:^|[\s#'\"(])/\w", err.replace(scenario_path, "").replace(out_dir, ""))
    if r.returncode != 0 and not named:
        return "an error that names no field: " + err[-300:]
    # A field set to the text "nan" (a model's name) may be printed back as written; only then is the word allowed.
    if r.returncode == 0 and not wrote_nan_text and re.search(r"(?i)\b(nan|-?inf)\b", r.stdout):
        return "NaN or inf in the output"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tessel", required=True, help="the tessel binary")
    ap.add_argument("--cases", type=int, default=300, help="scenarios to try (default 300)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--commands", default=",".join(COMMANDS), help="comma-separated from " + ", ".join(COMMANDS))
    ap.add_argument("--fields", default="", help="mutate only under these top-level keys (comma-separated), "
                    "e.g. plan,model; default: anywhere")
    ap.add_argument("--timeout", type=int, default=60, help="seconds a case may take")
    a = ap.parse_args()
    commands = [c for c in a.commands.split(",") if c]
    for c in commands:
        if c not in COMMANDS:
            sys.exit("--commands: unknown command '%s' (one of %s)" % (c, ", ".join(COMMANDS)))
    tops = [t for t in a.fields.split(",") if t]
    rng = random.Random(a.seed)
    bases = base_scenarios()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        scenario_path = os.path.join(tmp, "scenario.json")
        for i in range(a.cases):
            s, what = mutate(rng.choice(bases), rng, tops)
            if rng.random() < 0.3:
                s, more = mutate(s, rng, tops)
                what += ", " + more
            with open(scenario_path, "w") as f:
                json.dump(s, f)
            command = commands[i % len(commands)]
            problem = run_case(a.tessel, command, scenario_path, tmp, rng, a.timeout, '"nan"' in what)
            if problem:
                failures += 1
                print("case %d, tessel %s, %s: %s" % (i, command, what, problem))
    print("%d cases, %d failed" % (a.cases, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
