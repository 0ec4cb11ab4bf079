#!/usr/bin/env bash
# The bookkeeping of scripts/gpu-checks.sh (scripts/gpu_checks_report.py) on synthetic check outputs, since no
# GPU runs it in CI: GoogleTest results that pass, skip (no GPU) and fail; a check that timed out; a run folder
# measured on the CPU (not the GPU); GPT-2 figures above and below target, with PyTorch's profile; the kernel
# probe and the power probe; verdicts and the report.
TESSEL="${TESSEL:-unused}" source "$(dirname "$0")/../cli/lib.sh"
rep="$(dirname "$0")/../../scripts/gpu_checks_report.py"
mkdir -p "$tmp/res" "$tmp/out"

gtest_json() { # file, result of the one test (COMPLETED|SKIPPED|FAILED)
  python3 - "$1" "$2" <<'PY'
import json, sys
t = {"name": "Case", "status": "RUN", "result": "SKIPPED" if sys.argv[2] == "SKIPPED" else "COMPLETED"}
if sys.argv[2] == "FAILED":
    t["failures"] = [{"failure": "expected 1, got 2"}]
json.dump({"testsuites": [{"name": "Suite", "testsuite": [t, {"name": "Other", "status": "RUN", "result": "COMPLETED"}]}]},
          open(sys.argv[1], "w"))
PY
}
printf 'fp32 gelu                      step 0 loss 5.000000 reference 5.010000\n' >"$tmp/log"
verdict() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['verdict'])" "$1"; }

gtest_json "$tmp/pass.json" COMPLETED
python3 "$rep" gtest --id 1 --name one --json "$tmp/pass.json" --log "$tmp/log" --rc 0 --out "$tmp/res/1.json" >/dev/null
check "all tests ran and passed: pass" "$([ "$(verdict "$tmp/res/1.json")" = pass ]; echo $?)"
check "loss figures read from the log" "$(grep -q '"fp32 gelu": 0.00199' "$tmp/res/1.json"; echo $?)"
gtest_json "$tmp/skip.json" SKIPPED
python3 "$rep" gtest --id 2 --name two --json "$tmp/skip.json" --log "$tmp/log" --rc 0 --out "$tmp/res/2.json" >/dev/null
check "a skipped test (no GPU): skipped" "$([ "$(verdict "$tmp/res/2.json")" = skipped ]; echo $?)"
gtest_json "$tmp/fail.json" FAILED
python3 "$rep" gtest --id 3 --name three --json "$tmp/fail.json" --log "$tmp/log" --rc 1 --out "$tmp/res/3.json" >/dev/null
check "a failed test: fail" "$([ "$(verdict "$tmp/res/3.json")" = fail ]; echo $?)"
python3 "$rep" gtest --id 4 --name four --json "$tmp/absent.json" --log "$tmp/log" --rc 124 --limit 300 \
  --out "$tmp/res/4.json" >/dev/null
check "timed out: fail" "$([ "$(verdict "$tmp/res/4.json")" = fail ] && grep -q 'did not finish in 300 s' "$tmp/res/4.json"; echo $?)"

# A run folder whose actions were measured on the CPU is not a GPU run.
mkdir -p "$tmp/run"
python3 - "$tmp/run" <<'PY'
import json, sys
d = sys.argv[1]
open(d + "/losses.jsonl", "w").write('{"step": 0, "loss": 5.5}\n{"step": 1, "loss": 5.2}\n')
open(d + "/measurements.jsonl", "w").write("".join(json.dumps(
    {"rank": 0, "step": s, "start_seconds": s * 1.0, "duration_seconds": 0.5, "device": "cpu"}) + "\n" for s in (0, 1)))
json.dump({"traceEvents": [{"ph": "X"}, {"ph": "X"}]}, open(d + "/trace.json", "w"))
json.dump({"tessel": "0.1.0"}, open(d + "/versions.json", "w"))
json.dump({"ranks": [{"rank": 0}]}, open(d + "/memory.json", "w"))
PY
python3 "$rep" run --id 8a --name run --runs "$tmp/run" --rcs 0 --log "$tmp/log" --out "$tmp/res/8a.json" >/dev/null
check "a CPU-measured run: fail" "$([ "$(verdict "$tmp/res/8a.json")" = fail ]; echo $?)"
check "names the device and the missing versions" "$(grep -q "not cuda" "$tmp/res/8a.json" && grep -q "lacks driver" "$tmp/res/8a.json"; echo $?)"

# GPT-2: below target, then above.
gpt2() { # file, tessel tokens/s, mfu
  python3 - "$@" <<'PY'
import json, sys
t, mfu = float(sys.argv[2]), float(sys.argv[3])
sides = [{"side": "tessel-cuda", "step_seconds": 1, "tokens_per_second": t, "mfu": mfu},
         {"side": "pytorch-eager", "step_seconds": 1, "tokens_per_second": 100.0, "mfu": 0.4, "torch": "2.11"},
         {"side": "pytorch-compile", "step_seconds": 1, "tokens_per_second": 120.0, "mfu": 0.5}]
json.dump({"sides": sides, "tessel_over_eager": t / 100.0, "tessel_over_compile": t / 120.0,
           "targets": {"tessel_over_eager": 1.0, "tessel_over_compile": 0.9, "mfu": 0.4}}, open(sys.argv[1], "w"))
PY
}
gpt2 "$tmp/g1.json" 90 0.36
python3 "$rep" gpt2 --id 8b --name gpt2 --json "$tmp/g1.json" --log "$tmp/log" --rc 0 --out "$tmp/g1.res" >/dev/null
check "GPT-2 under target: below target" "$([ "$(verdict "$tmp/g1.res")" = "below target" ] && grep -q "0.90x eager" "$tmp/g1.res"; echo $?)"
gpt2 "$tmp/g2.json" 110 0.44
python3 "$rep" gpt2 --id 8b --name gpt2 --json "$tmp/g2.json" --log "$tmp/log" --rc 0 --out "$tmp/res/8b.json" >/dev/null
check "GPT-2 on target: pass" "$([ "$(verdict "$tmp/res/8b.json")" = pass ]; echo $?)"

# The GPT-2 check carries PyTorch's GPU time per kernel class where the sides were profiled.
mkdir -p "$tmp/prof"
echo '{"side": "pytorch-compile", "steps": 3, "wall_seconds_per_step": 0.05, "gpu_busy_seconds_per_step": 0.048,
       "kernels_per_step": 600, "seconds_per_step_by_class": {"gemm": 0.03, "attention": 0.01}, "top_kernels": []}' \
  >"$tmp/prof/compile.json"
python3 "$rep" gpt2 --id 8b --name gpt2 --json "$tmp/g2.json" --log "$tmp/log" --rc 0 --profile-dir "$tmp/prof" \
  --out "$tmp/g3.res" >/dev/null
check "the profile's classes are in the GPT-2 figures" "$(python3 -c "
import json,sys; f=json.load(open(sys.argv[1]))['figures']
assert f['pytorch_compile_profile']['seconds_per_step_by_class']['gemm'] == 0.03 and 'pytorch_eager_profile' not in f
" "$tmp/g3.res"; echo $?)"

# The probe: every kind measured passes; a kind with no point, or a stopped probe, fails.
probe() { # file, kinds to leave out...
  python3 - "$@" <<'PY'
import json, sys
pts = [{"kind": "copy_d2d", "bytes": 2 << 30, "seconds": 0.001, "gb_per_s": 4100.0},
       {"kind": "gemm", "dtype": "bf16", "m": 8192, "n": 8192, "k": 8192, "seconds": 0.0014, "tflops": 780.0},
       {"kind": "gemm", "dtype": "fp8", "m": 8192, "n": 8192, "k": 8192, "error": "RuntimeError: no fp8"},
       {"kind": "attention", "backend": "flash2", "head_dim": 128, "causal": True, "seq": 8192, "batch": 2,
        "forward_tflops": 330.0, "backward_tflops": 250.0, "forward_seconds": 0.010, "backward_seconds": 0.033},
       {"kind": "attention_dropout", "backend": "flash2", "head_dim": 128, "causal": True, "seq": 8192, "batch": 2,
        "dropout_p": 0.1, "forward_tflops": 250.0, "backward_tflops": 200.0, "forward_seconds": 0.013,
        "backward_seconds": 0.0396},
       {"kind": "attention_dropout", "backend": "cudnn", "head_dim": 128, "causal": True, "seq": 8192, "batch": 2,
        "dropout_p": 0.1, "error": "no kernel"},
       {"kind": "attention", "backend": "cudnn", "head_dim": 256, "causal": True, "seq": 8192, "error": "no kernel"},
       {"kind": "contention", "ctas": 16, "sms": 132, "gemm_seconds_alone": 0.042, "copy_seconds_alone": 0.03,
        "gemm_seconds_together": 0.051, "copy_seconds_together": 0.033, "gemm_seconds_lost_per_copy_second": 0.3},
       {"kind": "contention", "order": "copy after, high priority", "ctas": 16, "sms": 132, "gemm_seconds_alone": 0.042,
        "copy_seconds_alone": 0.03, "gemm_seconds_together": 0.0426, "copy_seconds_together": 0.12},
       {"kind": "softcap_eager", "elements": 1 << 28, "forward_seconds": 0.0008, "backward_seconds": 0.001,
        "forward_gb_per_s": 3280.0, "backward_gb_per_s": 3690.0},
       {"kind": "softcap_flex", "head_dim": 128, "seq": 8192, "batch": 2, "heads": 16, "causal": True, "softcap": None,
        "forward_seconds": 0.010, "backward_seconds": 0.030},
       {"kind": "softcap_flex", "head_dim": 128, "seq": 8192, "batch": 2, "heads": 16, "causal": True, "softcap": 50.0,
        "forward_seconds": 0.0115, "backward_seconds": 0.0336},
       {"kind": "host_dispatch", "d_model": 768, "batch": 1, "seq": 64, "precision": "autocast bf16 over fp32 parameters",
        "ms_per_layer_forward_backward": 1.5},
       {"kind": "host_dispatch", "d_model": 768, "batch": 1, "seq": 64, "precision": "bf16 parameters, no autocast",
        "ms_per_layer_forward_backward": 1.2},
       {"kind": "compile_grads", "mode": "eager", "layers": 8, "grad_bytes": 1000, "later_peak_over_base_in_grad_bytes": 1.2},
       {"kind": "compile_grads", "mode": "compile_whole", "layers": 8, "grad_bytes": 1000,
        "later_peak_over_base_in_grad_bytes": 2.05},
       {"kind": "head_gemm", "dtype": "fp16", "head_dim": 128, "forward_tflops": 200.0, "forward_seconds": 0.01,
        "backward_seconds": 0.02, "aligned": True},
       {"kind": "head_gemm", "dtype": "fp16", "head_dim": 144, "forward_tflops": 220.0, "forward_seconds": 0.01,
        "backward_seconds": 0.02, "aligned": True},
       {"kind": "head_gemm", "dtype": "fp16", "head_dim": 108, "forward_tflops": 10.0, "forward_seconds": 0.2,
        "backward_seconds": 0.4, "aligned": False}]
pts = [p for p in pts if p["kind"] not in sys.argv[2:]]
json.dump({"device": "NVIDIA H200", "points": pts}, open(sys.argv[1], "w"))
PY
}
probe "$tmp/p1.json"
python3 "$rep" probe --id probe --name probe --json "$tmp/p1.json" --log "$tmp/log" --rc 0 --out "$tmp/p1.res" >/dev/null
check "a probe with every kind: pass, figures read" "$([ "$(verdict "$tmp/p1.res")" = pass ] && python3 -c "
import json,sys; f=json.load(open(sys.argv[1]))['figures']
assert f['gemm_bf16_best_tflops'] == 780.0 and f['gemm_fp8_best_tflops'] is None and f['points_with_errors'] == 3
assert f['attention_flash2_d128_causal_best_tflops'] == {'forward': 330.0, 'backward': 250.0}
assert f['attention_dropout_time_over_none'] == {'flash2_d128_s8192': {'forward': 1.3, 'backward': 1.2}}
assert f['contention_gemm_seconds_lost_per_copy_second_by_ctas'] == {'16': 0.3}
assert f['contention_after_high_priority_gemm_seconds_lost_by_ctas'] == {'16': 0.02}
assert f['host_dispatch_floor_ms_per_layer_by_hidden'] == {'768': 1.5}
assert f['compile_grads_later_peak_over_base_in_grad_bytes'] == {'eager': 1.2, 'compile_whole': 2.05}
assert f['softcap_eager_bandwidth_over_copy'] == {'268435456': {'forward': 0.8, 'backward': 0.9}}
assert f['flex_softcap_time_over_none'] == {'d128_s8192': {'forward': 1.15, 'backward': 1.12}}
assert f['head_gemm_tflops_by_head_dim'] == {'fp16': {'128': 200.0, '144': 220.0, '108': 10.0}}, f['head_gemm_tflops_by_head_dim']
assert f['head_gemm_unaligned_over_aligned'] == {'fp16': {'108': 0.048}}, f['head_gemm_unaligned_over_aligned']
" "$tmp/p1.res"; echo $?)"
probe "$tmp/p4.json" contention host_dispatch softcap_eager softcap_flex compile_grads head_gemm
python3 "$rep" probe --id probe --name probe --json "$tmp/p4.json" --log "$tmp/log" --rc 0 --out "$tmp/p4.res" >/dev/null
check "a probe without contention, host, softcap, compile or head points (extras): still pass" "$([ "$(verdict "$tmp/p4.res")" = pass ]; echo $?)"
probe "$tmp/p2.json" attention
python3 "$rep" probe --id probe --name probe --json "$tmp/p2.json" --log "$tmp/log" --rc 0 --out "$tmp/p2.res" >/dev/null
check "a probe without attention points: fail, named" "$([ "$(verdict "$tmp/p2.res")" = fail ] && grep -q 'no points for attention' "$tmp/p2.res"; echo $?)"
python3 "$rep" probe --id probe --name probe --json "$tmp/p1.json" --log "$tmp/log" --rc 124 --limit 180 --out "$tmp/p3.res" >/dev/null
check "a probe stopped by its limit: fail" "$([ "$(verdict "$tmp/p3.res")" = fail ] && grep -q 'did not finish in 180 s' "$tmp/p3.res"; echo $?)"

# The power probe: a GEMM and a copy held at the limit pass, with each phase's burst, sustained rate, power and
# clock; an fp8 phase the GPU refuses is said; without the copy phase, or stopped, it fails.
power() { # file, phases to leave out...
  python3 - "$@" <<'PY'
import json, sys
pts = [{"kind": "sustained", "phase": "gemm-bf16-8192", "unit": "TFLOP/s", "burst_rate": 720.0, "sustained_rate": 676.8},
       {"kind": "sustained", "phase": "gemm-fp8-8192", "error": "no fp8 GEMM on this GPU or torch"},
       {"kind": "sustained", "phase": "copy", "unit": "GB/s", "burst_rate": 2900.0, "sustained_rate": 2880.0}]
power = [{"phase": "gemm-bf16-8192", "samples": 30, "power_w_mean": 698.0, "sm_mhz_mean": 1371.0},
         {"phase": "copy", "samples": 30, "power_w_mean": 420.0, "sm_mhz_mean": 1980.0}]
pts = [p for p in pts if p["phase"] not in sys.argv[2:]]
json.dump({"device": "NVIDIA H100 80GB HBM3", "points": pts, "power": power}, open(sys.argv[1], "w"))
PY
}
power "$tmp/w1.json"
python3 "$rep" power --id power --name power --json "$tmp/w1.json" --log "$tmp/log" --rc 0 --out "$tmp/w1.res" >/dev/null
check "a power probe with GEMM and copy: pass, phases read" "$([ "$(verdict "$tmp/w1.res")" = pass ] && python3 -c "
import json,sys; f=json.load(open(sys.argv[1]))['figures']['phases']
assert f['gemm-bf16-8192'] == {'unit': 'TFLOP/s', 'burst': 720.0, 'sustained': 676.8, 'sustained_over_burst': 0.94,
                               'power_w': 698.0, 'sm_mhz': 1371}, f
assert f['gemm-fp8-8192'] == {'error': 'no fp8 GEMM on this GPU or torch'}
" "$tmp/w1.res"; echo $?)"
power "$tmp/w2.json" copy
python3 "$rep" power --id power --name power --json "$tmp/w2.json" --log "$tmp/log" --rc 0 --out "$tmp/w2.res" >/dev/null
check "a power probe without its copy phase: fail, named" "$([ "$(verdict "$tmp/w2.res")" = fail ] && grep -q 'no sustained rate for copy' "$tmp/w2.res"; echo $?)"
check "a call without burst phases or a log says its clock-power law was not fitted" "$(python3 -c "
import json, sys; f = json.load(open('$tmp/w1.res'))['figures']['dvfs']; sys.exit(0 if 'not_fitted' in f else 1)"; echo $?)"
# The stored H100 call of 2026-11-28 (data/gpu/h100-2026-11-28): its law as bench/power_dvfs_fit.py fits it, the
# burst phases at the duties they ran at (0.70-0.95), the exponent the presets' mean (2.29) is one of four of.
python3 "$rep" power --id power --name power --json "$(dirname "$0")/../../data/gpu/h100-2026-11-28/power-h100.json" --rc 0 \
    --out "$tmp/wh.res" >/dev/null
check "the stored H100 call: its clock-power law fitted" "$(python3 -c "
import json, sys; f = json.load(open('$tmp/wh.res'))['figures']['dvfs']
d = [p[0] for p in f['points_duty_mhz_watts']]
sys.exit(0 if abs(f['exponent'] - 2.41) < 0.01 and f['idle_watts'] == 71.6 and d[0] == 1.0 and 0.69 < min(d) < 0.71 else 1)"; echo $?)"
python3 "$rep" power --id power --name power --json "$tmp/w1.json" --log "$tmp/log" --rc 124 --limit 90 --out "$tmp/w3.res" >/dev/null
check "a power probe stopped by its limit: fail" "$([ "$(verdict "$tmp/w3.res")" = fail ] && grep -q 'did not finish in 90 s' "$tmp/w3.res"; echo $?)"

# Verdicts: any fail or skip fails the call; the report lists every check and ends with the short table.
python3 "$rep" verdicts --results "$tmp/res"; check "a failed check fails the call" $([ $? -eq 1 ]; echo $?)
mkdir -p "$tmp/good" && cp "$tmp/res/1.json" "$tmp/res/8b.json" "$tmp/good/"
python3 "$rep" verdicts --results "$tmp/good"; check "all passed: the call passes" $?
mkdir -p "$tmp/late" && cp "$tmp/good/"*.json "$tmp/late/"
python3 "$rep" skip --id 5 --name five --reason "not run: no time left" --out "$tmp/late/5.json" >/dev/null
python3 "$rep" verdicts --results "$tmp/late"; check "a check left for want of time fails the call" $([ $? -eq 1 ]; echo $?)
echo '{"nvidia_smi": ["NVIDIA H100 80GB HBM3, 580.1, 81559 MiB"]}' >"$tmp/env.json"
python3 "$rep" summary --results "$tmp/res" --env "$tmp/env.json" --out "$tmp/out" --note "stopped before x" >"$tmp/table"
check "report.md lists every check" "$([ "$(grep -c '^| [0-9]' "$tmp/out/report.md")" -eq 6 ]; echo $?)"
check "report.json holds the checks and the note" "$(python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); assert len(d['checks']) == 6 and d['notes'] == ['stopped before x']" "$tmp/out/report.json"; echo $?)"
check "the table is printed last" "$(tail -n 2 "$tmp/table" | head -n 1 | grep -q 'stopped before x'; echo $?)"
finish
