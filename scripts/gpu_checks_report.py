#!/usr/bin/env python3
"""The bookkeeping of scripts/gpu-checks.sh: one result file per check (verdict and figures), read from what the
check left (GoogleTest JSON and output, run folders, benchmark points, the calibrated cluster file), and the
report (report.md and report.json, and a short table printed last).

  gpu_checks_report.py build|gtest|run|gpt2|bench|calibrate|holdout|probe|power|skip --id ID --name TEXT ... --out RESULT.json
  gpu_checks_report.py peak --cluster NAME          (the cluster's dense bf16 peak in TFLOP/s)
  gpu_checks_report.py verdicts --results DIR       (exit 1 when a check failed)
  gpu_checks_report.py summary --results DIR --env ENV.json --out DIR [--note TEXT ...]

A verdict is "pass", "fail" (the check ran and found a fault, or did not finish), "skipped" (a GoogleTest
skipped: no GPU answered, which counts against the run), "not run" (no time was left in the call: run it
again; counts against the call too), or "below target" (GPT-2 ran, a speed target was missed: a finding to
act on, not a failure of the recipe).
"""
import argparse
import json
import math
import os
import re
import statistics
import sys
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def write(path, result):
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    print(f"  {result['id']}: {result['verdict']}" + (f" ({result['detail']})" if result.get("detail") else ""))


def log_figures(log):
    """Figures the GPU tests print: 'LABEL step N loss A reference B' and 'memory LABEL ROW ... error E%'."""
    losses, memory = {}, []
    try:
        text = open(log, errors="replace").read()
    except OSError:
        return {}
    for m in re.finditer(r"^(.+?)\s+step (\d+) loss (\S+) reference (\S+)$", text, re.M):
        label, got, want = m.group(1).strip(), float(m.group(3)), float(m.group(4))
        rel = abs(got - want) / abs(want) if want else abs(got)
        losses[label] = max(losses.get(label, 0.0), rel)
    for m in re.finditer(r"^memory (.+?) predicted\s+(\S+) measured\s+(\S+) error\s+(\S+)%$", text, re.M):
        memory.append({"row": m.group(1).strip(), "predicted_bytes": float(m.group(2)),
                       "measured_bytes": float(m.group(3)), "error_percent": float(m.group(4))})
    figures = {}
    if losses:
        figures["max_relative_loss_difference"] = losses
    if memory:
        figures["memory_rows"] = len(memory)
        figures["max_abs_memory_error_percent"] = max(abs(r["error_percent"]) for r in memory)
        figures["memory"] = memory
    return figures


def cmd_build(a):
    r = {"id": a.id, "name": a.name, "seconds": a.seconds, "log": os.path.basename(a.log), "verdict": "fail",
         "detail": "the build failed (the compiler's errors are in the log's tail)", "log_tail": tail(a.log, 25)}
    write(a.out, r)


def cmd_gtest(a):
    r = {"id": a.id, "name": a.name, "seconds": a.seconds, "log": os.path.basename(a.log)}
    counts = {"tests": 0, "failed": 0, "skipped": 0}
    if a.json and os.path.exists(a.json):
        doc = json.load(open(a.json))
        for suite in doc.get("testsuites", []):
            for t in suite.get("testsuite", []):
                counts["tests"] += 1
                if t.get("failures"):
                    counts["failed"] += 1
                elif t.get("result") == "SKIPPED":
                    counts["skipped"] += 1
    else:
        # No JSON (the host-side tests run with --gtest_brief): read GoogleTest's closing lines.
        text = open(a.log, errors="replace").read() if os.path.exists(a.log) else ""
        m = re.search(r"\[==========\] (\d+) tests? from", text)
        counts["tests"] = int(m.group(1)) if m else 0
        m = re.search(r"\[  FAILED  \] (\d+) tests?", text)
        counts["failed"] = int(m.group(1)) if m else 0
        m = re.search(r"\[  SKIPPED \] (\d+) tests?", text)
        counts["skipped"] = int(m.group(1)) if m else 0
    r["figures"] = dict(counts, **log_figures(a.log))
    if a.rc == 124:
        r["verdict"], r["detail"] = "fail", f"did not finish in {a.limit} s"
    elif counts["tests"] == 0:
        r["verdict"], r["detail"] = "fail", f"no test ran (exit {a.rc})"
    elif counts["failed"] or a.rc != 0:
        r["verdict"], r["detail"] = "fail", f"{counts['failed']} of {counts['tests']} failed (exit {a.rc})"
    elif counts["skipped"]:
        r["verdict"], r["detail"] = "skipped", f"{counts['skipped']} of {counts['tests']} skipped: no GPU answered"
    else:
        r["verdict"], r["detail"] = "pass", f"{counts['tests']} tests"
    if r["verdict"] != "pass":
        r["log_tail"] = tail(a.log)
    write(a.out, r)


def read_lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def check_run(folder):
    """A `tessel run --backend cuda` folder: losses finite, every action measured on the GPU, a trace of them."""
    problems, figures = [], {}
    try:
        losses = [l["loss"] for l in read_lines(os.path.join(folder, "losses.jsonl"))]
        figures["losses"] = losses
        if not losses or not all(math.isfinite(x) for x in losses):
            problems.append("losses missing or not finite")
        recs = read_lines(os.path.join(folder, "measurements.jsonl"))
        figures["measured_actions"] = len(recs)
        devices = {r.get("device") for r in recs}
        if devices != {"cuda"}:
            problems.append(f"measurements name devices {sorted(map(str, devices))}, not cuda")
        spans = {}
        for r in recs:
            lo, hi = spans.get((r["rank"], r["step"]), (float("inf"), 0.0))
            spans[(r["rank"], r["step"])] = (min(lo, r["start_seconds"]), max(hi, r["start_seconds"] + r["duration_seconds"]))
        later = [hi - lo for (rank, step), (lo, hi) in spans.items() if step > 0]
        if later:
            figures["median_step_seconds"] = statistics.median(later)
        trace = json.load(open(os.path.join(folder, "trace.json")))
        events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
        figures["trace_events"] = len(events)
        if len(events) < len(recs):
            problems.append(f"trace.json holds {len(events)} events for {len(recs)} measurements")
        versions = json.load(open(os.path.join(folder, "versions.json")))
        figures["versions"] = {k: versions.get(k) for k in ("device", "driver", "cuda", "cublas", "nccl", "launcher", "comm")}
        for k in ("device", "driver", "cuda", "cublas"):
            if not versions.get(k):
                problems.append(f"versions.json lacks {k}")
        mem = json.load(open(os.path.join(folder, "memory.json")))
        figures["device_peak_reserved_bytes"] = [r.get("device_peak_reserved_bytes") for r in mem.get("ranks", [])]
    except (OSError, ValueError, KeyError) as e:
        problems.append(f"{type(e).__name__}: {e}")
    return problems, figures


def cmd_run(a):
    r = {"id": a.id, "name": a.name, "seconds": a.seconds, "log": os.path.basename(a.log), "figures": {}}
    problems = []
    for folder, rc in zip(a.runs, a.rcs):
        label = os.path.basename(folder)
        if rc != 0:
            problems.append(f"{label}: tessel run exited {rc}")
            continue
        p, f = check_run(folder)
        problems += [f"{label}: {x}" for x in p]
        r["figures"][label] = f
    r["verdict"] = "fail" if problems else "pass"
    r["detail"] = "; ".join(problems) if problems else f"{len(a.runs)} runs, traces of measured actions"
    if problems:
        r["log_tail"] = tail(a.log)
    write(a.out, r)


def cmd_gpt2(a):
    r = {"id": a.id, "name": a.name, "seconds": a.seconds, "log": os.path.basename(a.log)}
    if a.rc != 0 or not os.path.exists(a.json):
        r["verdict"] = "fail"
        r["detail"] = f"did not finish in {a.limit} s" if a.rc == 124 else f"the comparison exited {a.rc}"
        r["log_tail"] = tail(a.log)
        return write(a.out, r)
    doc = json.load(open(a.json))
    sides = {s["side"]: s for s in doc["sides"]}
    t = sides["tessel-cuda"]
    r["figures"] = {
        "tokens_per_second": {k: v["tokens_per_second"] for k, v in sides.items()},
        "mfu": {k: v["mfu"] for k, v in sides.items()},
        "step_seconds": {k: v["step_seconds"] for k, v in sides.items()},
        "tessel_over_eager": doc["tessel_over_eager"],
        "tessel_over_compile": doc["tessel_over_compile"],
        "torch": sides["pytorch-eager"].get("torch"),
        "targets": doc["targets"],
    }
    # PyTorch's GPU time per kernel class (bench/gpt2_pytorch.py --profile), where the sides were profiled.
    for side in ("eager", "compile"):
        path = os.path.join(a.profile_dir, side + ".json") if a.profile_dir else ""
        if path and os.path.exists(path):
            prof = json.load(open(path))
            r["figures"][f"pytorch_{side}_profile"] = {
                "wall_seconds_per_step": prof["wall_seconds_per_step"],
                "gpu_busy_seconds_per_step": prof["gpu_busy_seconds_per_step"],
                "seconds_per_step_by_class": prof["seconds_per_step_by_class"]}
    missed = []
    if doc["tessel_over_eager"] < doc["targets"]["tessel_over_eager"]:
        missed.append(f"{doc['tessel_over_eager']:.2f}x eager (target >= 1.00x)")
    if doc["tessel_over_compile"] < doc["targets"]["tessel_over_compile"]:
        missed.append(f"{doc['tessel_over_compile']:.2f}x torch.compile (target >= 0.90x)")
    if t["mfu"] < doc["targets"]["mfu"]:
        missed.append(f"MFU {100 * t['mfu']:.1f}% (target >= 40%)")
    r["verdict"] = "below target" if missed else "pass"
    r["detail"] = "; ".join(missed) if missed else (
        f"{doc['tessel_over_eager']:.2f}x eager, {doc['tessel_over_compile']:.2f}x compile, MFU {100 * t['mfu']:.1f}%")
    write(a.out, r)


def cmd_bench(a):
    r = {"id": a.id, "name": a.name, "seconds": a.seconds, "log": os.path.basename(a.log)}
    path = os.path.join(a.dir, "bench.jsonl")
    if a.rc != 0 or not os.path.exists(path):
        r["verdict"] = "fail"
        r["detail"] = f"did not finish in {a.limit} s" if a.rc == 124 else f"tessel bench exited {a.rc}"
        r["log_tail"] = tail(a.log)
        return write(a.out, r)
    pts = read_lines(path)
    by = {}
    for p in pts:
        by.setdefault(p["kernel"], []).append(p)

    def best(kernel, key):
        return max((p[key] / p["median_seconds"] for p in by.get(kernel, []) if p[key] > 0), default=None)

    def largest(kernel, **shape):
        sel = [p for p in by.get(kernel, []) if all(p["shape"].get(k) == v for k, v in shape.items())]
        if not sel:
            return None
        p = max(sel, key=lambda p: p["bytes"])
        return p["bytes"] / p["median_seconds"]

    figures = {"points": len(pts), "kernels": {k: len(v) for k, v in sorted(by.items())}}
    for k in ("gemm", "attention_forward", "attention_backward"):
        if best(k, "flops"):
            figures[f"{k}_best_tflops"] = best(k, "flops") / 1e12
    for k in ("norm_forward", "gelu_forward", "residual_forward", "adamw", "cross_entropy_forward"):
        if best(k, "bytes"):
            figures[f"{k}_best_gb_per_s"] = best(k, "bytes") / 1e9
    bw = {"device_to_device": largest("copy_device_to_device"),
          "host_to_device_pageable": largest("copy_host_to_device", pinned=0),
          "host_to_device_pinned": largest("copy_host_to_device", pinned=1),
          "device_to_host_pageable": largest("copy_device_to_host", pinned=0),
          "device_to_host_pinned": largest("copy_device_to_host", pinned=1)}
    figures["copy_gb_per_s_at_largest_size"] = {k: v / 1e9 for k, v in bw.items() if v}
    try:
        figures["provenance"] = json.load(open(os.path.join(a.dir, "provenance.json")))
    except (OSError, ValueError):
        pass
    r["figures"] = figures
    lacking = [k for k in ("gemm", "attention_forward", "norm_forward", "copy_device_to_device", "copy_host_to_device")
               if k not in by]
    r["verdict"] = "fail" if lacking else "pass"
    r["detail"] = f"no points for {', '.join(lacking)}" if lacking else f"{len(pts)} points"
    write(a.out, r)


def cmd_calibrate(a):
    r = {"id": a.id, "name": a.name, "seconds": a.seconds, "log": os.path.basename(a.log)}
    if a.rc != 0 or not os.path.exists(a.file):
        r["verdict"] = "fail"
        r["detail"] = f"tessel calibrate exited {a.rc}" if os.path.exists(a.log) and a.log.endswith("calibrate.log") \
            else "no sweep to calibrate from: the bench stage did not leave bench.jsonl"
        r["log_tail"] = tail(a.log)
        return write(a.out, r)
    doc = json.load(open(a.file))
    cal = doc.get("calibration", {})
    gpu = doc.get("gpu", {})
    r["figures"] = {
        "file": os.path.basename(a.file),
        "terms": len(cal.get("terms", [])),
        "uncalibrated": cal.get("uncalibrated", []),
        "gemm_efficiency": gpu.get("gemm_efficiency"),
        "measured": {t["term"]: t["values"] for t in cal.get("measured", [])},
        "worst_rms_residual": max((t["rms_relative_residual"] for t in cal.get("terms", [])), default=None),
        "inputs": cal.get("inputs"),
    }
    r["verdict"] = "pass" if cal.get("terms") else "fail"
    r["detail"] = f"{len(cal.get('terms', []))} terms fitted, {len(cal.get('uncalibrated', []))} left as they were"
    write(a.out, r)


def cmd_holdout(a):
    """Plans the calibration never saw, run and compared (`tessel compare --json` in each run folder): step time
    and the stage's allocated peak against the calibrated prediction, target within 5%."""
    r = {"id": a.id, "name": a.name, "seconds": a.seconds, "log": os.path.basename(a.log)}
    rows, problems = {}, []
    for name in sorted(os.listdir(a.dir)) if os.path.isdir(a.dir) else []:
        path = os.path.join(a.dir, name, "compare.json")
        if not name.startswith("run-"):
            continue
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            problems.append(f"{name[4:]}: no comparison (the run or tessel compare failed; see the log)")
            continue
        doc = json.load(open(path))
        stage = doc["memory"]["stages"][0]
        rows[name[4:]] = {"step_error": doc["step"]["error"], "predicted_step_seconds": doc["step"]["predicted_seconds"],
                          "measured_step_seconds": doc["step"]["measured_seconds"], "memory_error": stage["error"],
                          "predicted_allocated_bytes": stage["predicted_allocated_bytes"],
                          "measured_peak_bytes": stage["measured_peak_bytes"],
                          "categories": {c["category"]: c["error"] for c in stage["categories"]}}
    r["figures"] = rows
    if not rows:
        r["verdict"] = "fail"
        r["detail"] = "; ".join(problems) or "no held-out run"
        r["log_tail"] = tail(a.log)
        return write(a.out, r)
    missed = [f"{k} step {100 * v['step_error']:+.1f}%" for k, v in rows.items() if abs(v["step_error"]) > 0.05]
    missed += [f"{k} memory {100 * v['memory_error']:+.1f}%" for k, v in rows.items() if abs(v["memory_error"]) > 0.05]
    if problems:
        r["verdict"] = "fail"
        r["log_tail"] = tail(a.log)
    else:
        r["verdict"] = "below target" if missed else "pass"
    r["detail"] = "; ".join(problems + missed) if problems or missed else \
        f"{len(rows)} plans, step and memory within 5%"
    r["table"] = [f"{k:<22} step {1e3 * v['predicted_step_seconds']:9.2f} ms predicted {1e3 * v['measured_step_seconds']:9.2f} "
                  f"measured {100 * v['step_error']:+6.1f}%   memory {v['predicted_allocated_bytes'] / 2**20:9.1f} MiB predicted "
                  f"{v['measured_peak_bytes'] / 2**20:9.1f} measured {100 * v['memory_error']:+6.1f}%" for k, v in rows.items()]
    for line in r["table"]:
        print("    " + line)
    write(a.out, r)


def cmd_probe(a):
    r = {"id": a.id, "name": a.name, "seconds": a.seconds, "log": os.path.basename(a.log)}
    doc = json.load(open(a.json)) if os.path.exists(a.json) else {"points": []}
    pts = doc.get("points", [])

    def most(kind, key, **match):
        vals = [p[key] for p in pts if p["kind"] == kind and key in p and all(p.get(k) == v for k, v in match.items())]
        return max(vals) if vals else None

    figures = {"points": len(pts), "device": doc.get("device"), "torch": doc.get("torch"),
               "cudnn": doc.get("cudnn"), "nvidia_smi": doc.get("nvidia_smi"),
               "copy_d2d_best_gb_per_s": most("copy_d2d", "gb_per_s"),
               "gemm_bf16_best_tflops": most("gemm", "tflops", dtype="bf16"),
               "gemm_fp8_best_tflops": most("gemm", "tflops", dtype="fp8")}
    for be in ("flash2", "cudnn"):
        for d in (64, 128, 256):
            f = most("attention", "forward_tflops", backend=be, head_dim=d, causal=True)
            b = most("attention", "backward_tflops", backend=be, head_dim=d, causal=True)
            if f:
                figures[f"attention_{be}_d{d}_causal_best_tflops"] = {"forward": f, "backward": b}
    # Attention dropout (p 0.1) against the same shape without it: time with over time without, forward and
    # backward, per backend and sequence. A probe from before 2026-11-27 has none and still passes.
    slow = {}
    for p in pts:
        if p["kind"] != "attention_dropout" or "backward_seconds" not in p:
            continue
        base = [q for q in pts if q["kind"] == "attention" and "backward_seconds" in q and
                all(q.get(k) == p.get(k) for k in ("backend", "head_dim", "causal", "seq", "batch"))]
        if base:
            slow[f"{p['backend']}_d{p['head_dim']}_s{p['seq']}"] = {
                "forward": round(p["forward_seconds"] / base[0]["forward_seconds"], 3),
                "backward": round(p["backward_seconds"] / base[0]["backward_seconds"], 3)}
    if slow:
        figures["attention_dropout_time_over_none"] = slow
    # Soft-capping (a probe from before 2026-12-05 has none and still passes): the eager ops' bandwidth at the bytes
    # tessel charges them, over the copy's (1 = tessel's time); FlexAttention with the tanh as its score_mod over the
    # same kernel without (the in-kernel cost tessel leaves out).
    copy = figures["copy_d2d_best_gb_per_s"]
    eager = {str(p["elements"]): {"forward": round(p["forward_gb_per_s"] / copy, 3), "backward": round(p["backward_gb_per_s"] / copy, 3)}
             for p in pts if p["kind"] == "softcap_eager" and "backward_gb_per_s" in p and copy}
    if eager:
        figures["softcap_eager_bandwidth_over_copy"] = eager
    capped = {}
    for p in pts:
        if p["kind"] != "softcap_flex" or not p.get("softcap") or "backward_seconds" not in p:
            continue
        base = [q for q in pts if q["kind"] == "softcap_flex" and not q.get("softcap") and "backward_seconds" in q and
                q.get("head_dim") == p.get("head_dim") and q.get("seq") == p.get("seq")]
        if base:
            capped[f"d{p['head_dim']}_s{p['seq']}"] = {"forward": round(p["forward_seconds"] / base[0]["forward_seconds"], 3),
                                                      "backward": round(p["backward_seconds"] / base[0]["backward_seconds"], 3)}
    if capped:
        figures["flex_softcap_time_over_none"] = capped
    # Contention (kappa's one-GPU proxy): GEMM seconds lost per second of a copy holding n SMs, by n, for each
    # order the probe ran (the copy first, as a collective in flight; after, on a high-priority stream; a probe
    # before 2026-11-26 names no order). Host dispatch: the eager floor per layer by hidden size. Both extras: a
    # probe without them still passes (older probes, a GPU without Triton).
    for order, key in (("copy first", "contention_gemm_seconds_lost_per_copy_second_by_ctas"),
                       ("copy after, high priority", "contention_after_high_priority_gemm_seconds_lost_by_ctas")):
        # per second of the copy's isolated time, as kappa is defined (FORMULAS.md §6.2), from the raw times
        lost = {str(p["ctas"]): round((p["gemm_seconds_together"] - p["gemm_seconds_alone"]) / p["copy_seconds_alone"], 3)
                for p in pts if p["kind"] == "contention" and p.get("order", "copy first") == order
                and all(k in p for k in ("gemm_seconds_together", "gemm_seconds_alone", "copy_seconds_alone"))}
        if lost:
            figures[key] = lost
    floor = {str(p["d_model"]): round(p["ms_per_layer_forward_backward"], 3) for p in pts
             if p["kind"] == "host_dispatch" and p.get("seq") == 64 and p.get("precision", "").startswith("autocast")}
    if floor:
        figures["host_dispatch_floor_ms_per_layer_by_hidden"] = floor
    # Gradient accumulation under torch.compile: a later micro-batch's peak over its start, in the model's gradient
    # bytes, by mode (eager, compiled whole, compiled per block); whole - per block is the whole graph's gradients
    # returned at once (docs/validation.md, KempnerForge's 7B on one GPU).
    held = {p["mode"]: round(p["later_peak_over_base_in_grad_bytes"], 3) for p in pts
            if p["kind"] == "compile_grads" and "later_peak_over_base_in_grad_bytes" in p}
    if held:
        figures["compile_grads_later_peak_over_base_in_grad_bytes"] = held
    # Attention's GEMMs over heads (Megatron's unfused layout): forward + backward TFLOP/s by dtype and head
    # dimension, and each unaligned one over the mean of the aligned ones of its dtype: the GPU's per-head figure is
    # that ratio times its aligned efficiency (FORMULAS.md §3.1, "Batched over heads").
    by_head = {}
    for p in pts:
        if p["kind"] == "head_gemm" and "backward_seconds" in p:
            by_head.setdefault(p["dtype"], {})[str(p["head_dim"])] = round(
                3 * p["forward_tflops"] * p["forward_seconds"] / (p["forward_seconds"] + p["backward_seconds"]), 1)
    if by_head:
        figures["head_gemm_tflops_by_head_dim"] = by_head
        ratio = {}
        for dt, row in by_head.items():
            aligned = [v for d, v in row.items() if int(d) % 8 == 0]
            if aligned:
                mean = sum(aligned) / len(aligned)
                ratio[dt] = {d: round(v / mean, 3) for d, v in row.items() if int(d) % 8 != 0}
        figures["head_gemm_unaligned_over_aligned"] = ratio
    errors = [p for p in pts if "error" in p] + [{"error": e} for e in doc.get("errors", [])]
    figures["points_with_errors"] = len(errors)
    r["figures"] = figures
    lacking = [k for k in ("copy_d2d", "gemm", "attention") if not any(p["kind"] == k and "error" not in p for p in pts)]
    probe_verdict(a, r, f"no points for {', '.join(lacking)}" if lacking else "",
                  lambda: f"{len(pts)} points ({len(errors)} refused by their backend); bf16 GEMM best "
                          f"{figures['gemm_bf16_best_tflops']:.0f} TFLOP/s, copy {figures['copy_d2d_best_gb_per_s']:.0f} GB/s")


def probe_verdict(a, r, missing, passed):
    """A probe's verdict, written to a.out: fail when it was stopped, exited non-zero or lacks what `missing`
    names, with its log's tail; else pass, with passed()'s line."""
    if a.rc != 0 or missing:
        r["verdict"] = "fail"
        r["detail"] = f"did not finish in {a.limit} s" if a.rc == 124 else f"exited {a.rc}" if a.rc else missing
        r["log_tail"] = tail(a.log)
    else:
        r["verdict"] = "pass"
        r["detail"] = passed()
    write(a.out, r)


def cmd_power(a):
    """bench/power_probe.py: each kernel class held at the power limit, its first ~40 ms against its sustained rate,
    with the mean power and SM clock nvidia-smi saw. Pass when it finished and both GEMM and copy phases ran (an fp8
    phase a GPU refuses is said, not failed)."""
    r = {"id": a.id, "name": a.name, "seconds": a.seconds, "log": os.path.basename(a.log)}
    doc = json.load(open(a.json)) if os.path.exists(a.json) else {"points": []}
    pts = [p for p in doc.get("points", []) if p.get("kind") == "sustained"]
    power = {ph["phase"]: ph for ph in doc.get("power", []) if ph.get("samples")}
    phases = {}
    for p in pts:
        if "error" in p:
            phases[p["phase"]] = {"error": p["error"]}
            continue
        ph = power.get(p["phase"], {})
        phases[p["phase"]] = {"unit": p["unit"], "burst": round(p["burst_rate"], 1), "sustained": round(p["sustained_rate"], 1),
                              "sustained_over_burst": round(p["sustained_rate"] / p["burst_rate"], 3),
                              "power_w": round(ph["power_w_mean"], 1) if ph else None,
                              "sm_mhz": round(ph["sm_mhz_mean"]) if ph else None}
        if "duty_measured" in p:  # the duty a burst phase achieved, beside the one it planned
            phases[p["phase"]]["duty_planned"] = p.get("duty_planned")
            phases[p["phase"]]["duty_measured"] = round(p["duty_measured"], 3)
    r["figures"] = {"device": doc.get("device"), "nvidia_smi": doc.get("nvidia_smi"), "phases": phases}
    # The clock-power law of this call (bench/power_dvfs_fit.py: dynamic power against the GEMMs' clock over the held
    # and burst phases), beside the exponent the Hopper presets carry (gpu.sustained_share_power).
    try:
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        import power_dvfs_fit
        fit = power_dvfs_fit.fit_call(a.json)
        r["figures"]["dvfs"] = {"exponent": round(fit["exponent"], 3), "idle_watts": round(fit["idle_watts"], 1),
                                "points_duty_mhz_watts": [[round(d, 3), round(f), round(w)] for d, f, w in fit["points"]]}
    except Exception as e:  # a call without the burst phases or its nvidia-smi log has no law to fit
        r["figures"]["dvfs"] = {"not_fitted": f"{type(e).__name__}: {e}"[:200]}
    lacking = [k for k in ("gemm-bf16-8192", "copy") if "sustained" not in phases.get(k, {})]
    g = phases.get("gemm-bf16-8192", {})
    probe_verdict(a, r, f"no sustained rate for {', '.join(lacking)}" if lacking else "",
                  lambda: f"{len(phases)} phases; bf16 8192^3 GEMM {g['burst']:.0f} -> {g['sustained']:.0f} TFLOP/s "
                          f"({g['sustained_over_burst']:.3f}) at {g['sm_mhz']} MHz, {g['power_w']} W")


def cmd_skip(a):
    write(a.out, {"id": a.id, "name": a.name, "seconds": 0, "verdict": "not run", "detail": a.reason})


def cmd_peak(a):
    path = os.path.join(ROOT, "scenarios", "clusters", a.cluster + ".json")
    print(f"{json.load(open(path))['gpu']['peak_flops_per_second']['bf16'] / 1e12:.1f}")


def load_results(folder):
    out = []
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        if name.endswith(".json"):
            out.append(json.load(open(os.path.join(folder, name))))
    order = ["0", "1", "2", "3", "4", "5", "6", "8a", "8b", "8b-32", "8b-tiles", "bench", "bench-fp32", "calibrate",
             "holdout", "probe", "power"]
    return sorted(out, key=lambda r: order.index(r["id"]) if r["id"] in order else 99)


def cmd_verdicts(a):
    bad = [r for r in load_results(a.results) if r["verdict"] in ("fail", "skipped", "not run")]
    sys.exit(1 if bad else 0)


def versions_of(results, env):
    """Device, driver, CUDA, cuBLAS and NCCL as the CUDA backend reported them (a run's versions.json)."""
    v = {}
    for r in results:
        if r["id"] == "8a":
            for f in r.get("figures", {}).values():
                for k, x in (f.get("versions") or {}).items():
                    if x and k not in v:
                        v[k] = x
        if r["id"] == "bench":
            sw = r.get("figures", {}).get("provenance", {}).get("software", {})
            for k in ("device", "driver", "cuda", "cublas", "nccl"):
                if sw.get(k) and k not in v:
                    v[k] = sw[k]
    v.setdefault("nvidia_smi", env.get("nvidia_smi"))
    return v


def fmt(x):
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def cmd_summary(a):
    results = load_results(a.results)
    env = json.load(open(a.env)) if os.path.exists(a.env) else {}
    versions = versions_of(results, env)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = {"schema_version": 1, "created_utc": now, "command": "bash scripts/gpu-checks.sh", "versions": versions,
           "machine": env, "notes": a.note, "checks": results}
    with open(os.path.join(a.out, "report.json"), "w") as f:
        json.dump(doc, f, indent=2)
    md = [f"# tessel GPU checks ({now})", "",
          "Made by `bash scripts/gpu-checks.sh` (docs/cuda.md). Versions as the CUDA backend reported them:", ""]
    for k in ("device", "driver", "cuda", "cublas", "nccl", "nvidia_smi"):
        if versions.get(k):
            md.append(f"- {k}: {versions[k]}")
    for k in ("nvcc", "cmake", "cxx", "torch", "torch_cuda", "nvidia-nccl-cu13", "nvidia-cublas"):
        if env.get(k):
            md.append(f"- {k}: {env[k]}")
    if a.note:
        md += [""] + [f"**{n}**" for n in a.note]
    md += ["", "| check | what | verdict | detail | seconds |", "|---|---|---|---|---|"]
    for r in results:
        md.append(f"| {r['id']} | {r['name']} | {r['verdict']} | {r.get('detail', '')} | {r.get('seconds', '')} |")
    for r in results:
        md += ["", f"## {r['id']}: {r['name']}", "", f"Verdict: **{r['verdict']}**. {r.get('detail', '')}", ""]
        for k, v in (r.get("figures") or {}).items():
            if k in ("memory", "provenance"):
                continue
            md.append(f"- {k}: `{json.dumps(v) if not isinstance(v, (int, float, str)) else fmt(v)}`")
        if r.get("log_tail"):
            md += ["", "```", r["log_tail"].rstrip(), "```"]
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    if a.quiet:
        return
    # The short table, last.
    print("")
    print(f"device: {versions.get('device') or env.get('nvidia_smi') or 'none answered'}; driver {versions.get('driver', '?')}, "
          f"CUDA {versions.get('cuda', '?')}, cuBLAS {versions.get('cublas', '?')}, NCCL {versions.get('nccl', '?')}")
    print(f"{'check':<12}{'verdict':<14}detail")
    for r in results:
        print(f"{r['id']:<12}{r['verdict']:<14}{r.get('detail', '')[:90]}")
    if not results:
        print("(no check ran)")
    for n in a.note:
        print(n)
    print(f"report: {os.path.join(a.out, 'report.md')} and report.json")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--id", required=True)
        p.add_argument("--name", required=True)
        p.add_argument("--log", default="")
        p.add_argument("--seconds", type=int, default=0)
        p.add_argument("--limit", type=int, default=0, help="seconds the check was allowed")
        p.add_argument("--out", required=True)

    p = sub.add_parser("build"); common(p)
    p = sub.add_parser("gtest"); common(p); p.add_argument("--json", default=""); p.add_argument("--rc", type=int, required=True)
    p = sub.add_parser("run"); common(p); p.add_argument("--runs", nargs="+", required=True)
    p.add_argument("--rcs", nargs="+", type=int, required=True)
    p = sub.add_parser("gpt2"); common(p); p.add_argument("--json", required=True); p.add_argument("--rc", type=int, required=True)
    p.add_argument("--profile-dir", default="", help="bench/gpt2_pytorch.py --profile outputs (eager.json, compile.json)")
    p = sub.add_parser("probe"); common(p); p.add_argument("--json", required=True); p.add_argument("--rc", type=int, required=True)
    p = sub.add_parser("power"); common(p); p.add_argument("--json", required=True); p.add_argument("--rc", type=int, required=True)
    p = sub.add_parser("bench"); common(p); p.add_argument("--dir", required=True); p.add_argument("--rc", type=int, required=True)
    p = sub.add_parser("calibrate"); common(p); p.add_argument("--file", required=True); p.add_argument("--rc", type=int, required=True)
    p = sub.add_parser("holdout"); common(p); p.add_argument("--dir", required=True)
    p = sub.add_parser("skip"); common(p); p.add_argument("--reason", required=True)
    p = sub.add_parser("peak"); p.add_argument("--cluster", required=True)
    p = sub.add_parser("verdicts"); p.add_argument("--results", required=True)
    p = sub.add_parser("summary"); p.add_argument("--results", required=True); p.add_argument("--env", required=True)
    p.add_argument("--out", required=True); p.add_argument("--note", action="append", default=[])
    p.add_argument("--quiet", action="store_true", help="write the report, print nothing")
    a = ap.parse_args()
    {"build": cmd_build, "gtest": cmd_gtest, "run": cmd_run, "gpt2": cmd_gpt2, "bench": cmd_bench, "calibrate": cmd_calibrate,
     "holdout": cmd_holdout, "probe": cmd_probe, "power": cmd_power, "skip": cmd_skip, "peak": cmd_peak, "verdicts": cmd_verdicts, "summary": cmd_summary}[a.cmd](a)


if __name__ == "__main__":
    main()
