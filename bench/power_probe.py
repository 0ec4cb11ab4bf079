#!/usr/bin/env python3
"""What a GPU sustains at its power limit, kernel class by kernel class: the measurement the sustained-power term
of tessel's cost model waits for (docs/validation.md, "Seen and left alone": runs on Blackwell, torchtitan's
500 W H100s and FP8 runs predicted 5-20% fast; FORMULAS.md §3.1, sustained_tensor_fraction).

The GEMM plateaus tessel uses (data/validation/gemm.json, the MAMF table) time one shape for about a second after
a warm-up; a training step runs tensor cores for minutes at the power limit, and the 700 W H100 lent before held
an 8192^3 bf16 GEMM at 1.37 GHz and 671-685 TFLOP/s against 717 in its first window
(data/gpu/h100-2026-11-26/call4-torchtitan-block/block.json). Each phase below is held for --seconds after an
idle second, and records its rate in the first ~40 ms (the burst a short benchmark sees) and in every window
after, beside nvidia-smi's power, SM clock and throttle reasons sampled every 100 ms:

- gemm-bf16-8192: torch.mm, 8192^3, bf16 (the dense plateau);
- gemm-bf16-mamf: the MAMF table's best bf16 shape for this GPU family (H100/H200 2048x2048x13312, A100
  1024x10240x5120, B200 1792x16128x3072, GB200 4096x9728x2048; else 4096^3);
- gemm-fp8-8192: torch._scaled_mm, e4m3, 8192^3, split accumulators (what Transformer Engine's backward runs);
- gemm-fp32-8192 / gemm-fp32-layer: torch.mm in fp32 with TF32 off (CUDA-core FFMA, as tessel's executor runs
  its fp32 recipe) at 8192^3 and at GPT-2's fc1 shape, 4096x3072x768: whether work that leaves the tensor cores
  idle is held back at the power limit as tensor-core work is (FORMULAS.md §3.3 applies the curve to
  tensor-core kernels);
- attention: scaled_dot_product_attention, causal, batch 2 x 32 heads x 8192 x 128, forward and backward;
- copy: a 2 GiB device-to-device copy (HBM bound, the other end of the power range);
- duty-75 / duty-50 / duty-25: 8192^3 bf16 GEMM bursts of about 3 ms alternating with an idle kernel
  (torch.cuda._sleep) so the GEMMs fill that share of each period, the GEMMs timed alone, and the share they did
  fill read back from CUDA events (`duty_measured`): how the clock the GEMMs get depends on the average power, as
  a layer's GEMMs between its attention and elementwise kernels;
- duty-copy-75 / -50 / -25: the same bursts with the gaps filled by an HBM copy: whether memory-bound time lets the
  clock recover as idle time does (tessel's block duty assumes it does);
- window-2ms / -8ms / -32ms / -128ms: 4096^3 GEMM bursts and idle gaps of equal length, at those periods: how long
  the power limiter averages over (the clock a rank regains while it waits on communication).

Fitting what the clock costs per watt (the DVFS curve) from these rates is for the session that reads them;
nothing here is fitted. Prints a table last; writes every point to --out as JSON.

  python3 bench/power_probe.py --out power.json [--seconds 4] [--quick] [--only gemm-bf16-8192 ...]
"""
import argparse
import sys
import time

import torch
import torch.nn.functional as F

from probe_common import PowerLog, probe_document, run_parts, write

# The MAMF table's best bf16 shape per GPU family (stas00/ml-engineering compute/accelerator/README.md).
MAMF_SHAPES = [("GB200", (4096, 9728, 2048)), ("B200", (1792, 16128, 3072)), ("H200", (2048, 2048, 13312)),
               ("H100", (2048, 2048, 13312)), ("GH200", (1024, 15360, 4096)), ("A100", (1024, 10240, 5120))]


def timed(fn, calls):
    """Seconds for `calls` calls of fn, by CUDA events."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(calls):
        fn()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) / 1e3


def hold(name, fn, work, unit, log, seconds, points):
    """fn held for `seconds` after an idle second: the first ~40 ms and then windows of about 0.25 s."""
    fn()
    torch.cuda.synchronize()
    per_call = timed(fn, 3) / 3
    time.sleep(1.0)  # let the clocks come back up
    t0 = time.time()
    burst_calls = max(1, int(0.04 / per_call))
    burst = burst_calls * work / timed(fn, burst_calls)
    window_calls = max(1, int(0.25 / per_call))
    windows = []
    while time.time() - t0 < seconds:
        windows.append(window_calls * work / timed(fn, window_calls))
    log.mark(name, t0, time.time())
    tail = windows[len(windows) // 2:] or windows
    points.append({"kind": "sustained", "phase": name, "unit": unit, "work_per_call": work,
                   "seconds_per_call_cold": per_call, "burst_rate": burst, "window_rates": windows,
                   "sustained_rate": sum(tail) / len(tail), "seconds": time.time() - t0})


def gemm_bf16(shape):
    m, n, k = shape
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return (lambda: torch.mm(a, b, out=c)), 2.0 * m * n * k


def mamf_shape():
    name = torch.cuda.get_device_name()
    for family, shape in MAMF_SHAPES:
        if family in name:
            return shape
    return (4096, 4096, 4096)


def part_gemm_bf16_8192(points, log, seconds):
    fn, work = gemm_bf16((8192, 8192, 8192))
    hold("gemm-bf16-8192", fn, work / 1e12, "TFLOP/s", log, seconds, points)


def part_gemm_bf16_mamf(points, log, seconds):
    shape = mamf_shape()
    fn, work = gemm_bf16(shape)
    hold("gemm-bf16-mamf", fn, work / 1e12, "TFLOP/s", log, seconds, points)
    points[-1]["shape"] = list(shape)


def gemm_fp32_simt(shape, name, points, log, seconds):
    """fp32 GEMM on the CUDA cores: TF32 switched off for the phase and restored after."""
    m, n, k = shape
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        a = torch.randn(m, k, device="cuda", dtype=torch.float32)
        b = torch.randn(k, n, device="cuda", dtype=torch.float32)
        c = torch.empty(m, n, device="cuda", dtype=torch.float32)
        hold(name, lambda: torch.mm(a, b, out=c), 2.0 * m * n * k / 1e12, "TFLOP/s", log, seconds, points)
        points[-1]["shape"] = list(shape)
        points[-1]["tf32"] = False
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def part_gemm_fp32_8192(points, log, seconds):
    gemm_fp32_simt((8192, 8192, 8192), "gemm-fp32-8192", points, log, seconds)


def part_gemm_fp32_layer(points, log, seconds):
    gemm_fp32_simt((4096, 3072, 768), "gemm-fp32-layer", points, log, seconds)


def part_gemm_fp8_8192(points, log, seconds):
    if not hasattr(torch, "_scaled_mm") or torch.cuda.get_device_capability() < (8, 9):
        points.append({"kind": "sustained", "phase": "gemm-fp8-8192", "error": "no fp8 GEMM on this GPU or torch"})
        return
    n = 8192
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    fn = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=False)
    hold("gemm-fp8-8192", fn, 2.0 * n ** 3 / 1e12, "TFLOP/s", log, seconds, points)


def part_attention(points, log, seconds):
    b, h, s, d = 2, 32, 8192, 128
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)

    def step():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.backward(g)
        q.grad = k.grad = v.grad = None

    # forward 4 b s^2 h d / 2 (causal), backward 2.5 x that
    hold("attention", step, 3.5 * 4 * b * s * s * h * d / 2 / 1e12, "TFLOP/s", log, seconds, points)


def part_copy(points, log, seconds):
    n = 2 ** 30  # 2 GiB of bf16
    src = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    hold("copy", lambda: dst.copy_(src), 2.0 * 2 * n / 1e9, "GB/s", log, seconds, points)


def duty_cycles(points, log, seconds, phase, gap_for, shape=(8192, 8192, 8192), burst=0.003, duties=(75, 50, 25),
                name=None):
    """bf16 GEMM bursts of about `burst` seconds (8192^3, 3 ms by default), each after a gap that gap_for(gap
    seconds) returns as (a callable that enqueues the gap, fields for the point), so the GEMMs fill each of `duties`
    percent of each period; the GEMMs timed alone. `name(duty)` names each phase (default PHASE-DUTY)."""
    fn, work = gemm_bf16(shape)
    fn()
    torch.cuda.synchronize()
    per_call = timed(fn, 5) / 5
    calls = max(1, int(round(burst / per_call)))
    burst_seconds = calls * per_call
    for duty in duties:
        label = name(duty) if name else f"{phase}-{duty}"
        gap, fields = gap_for(burst_seconds * (100 - duty) / duty)
        time.sleep(1.0)
        t0 = time.time()
        rates, duties = [], []
        while time.time() - t0 < seconds:
            e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            e[0].record()
            gap()
            e[1].record()
            for _ in range(calls):
                fn()
            e[2].record()
            e[2].synchronize()
            gemm_ms, period_ms = e[1].elapsed_time(e[2]), e[0].elapsed_time(e[2])
            rates.append(calls * work / 1e12 / (gemm_ms / 1e3))
            duties.append(gemm_ms / period_ms)
        log.mark(label, t0, time.time())
        tail = rates[len(rates) // 2:] or rates
        tail_duty = duties[len(duties) // 2:] or duties
        # The duty the bursts achieved on the GPU's clock (GEMMs over gap + GEMMs), beside the one planned: the
        # 2026-11-28 calls planned 75/50/25% and, their sleep kernel timed without a warm-up, got about 94/86/70%.
        points.append({"kind": "sustained", "phase": label, "unit": "TFLOP/s", "gemm_calls_per_burst": calls,
                       "gemm_shape": list(shape), "burst_seconds_planned": burst_seconds,
                       **fields, "duty_planned": duty / 100, "duty_measured": sum(tail_duty) / len(tail_duty),
                       "burst_rate": rates[0], "sustained_rate": sum(tail) / len(tail),
                       "bursts": len(rates), "seconds": time.time() - t0})


def idle_gaps():
    """A gap builder for duty_cycles: idle kernels (torch.cuda._sleep) of a requested length, calibrated at the
    clock the GPU idles at (a throttled clock stretches them; the phases record the duty achieved)."""
    cycles = 1_000_000
    # Warmed first: the first launch of the sleep kernel loads its module (CUDA's lazy loading), which timed with
    # it made a call look several times longer and the gaps built from it several times shorter than planned.
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    sleep_seconds = timed(lambda: torch.cuda._sleep(cycles), 5) / 5

    def idle_gap(idle):
        idle_cycles = max(1, int(cycles * idle / sleep_seconds))
        return (lambda: torch.cuda._sleep(idle_cycles)), {"idle_seconds_per_burst": idle}

    return idle_gap


def part_duty(points, log, seconds):
    """GEMM bursts with idle kernels (torch.cuda._sleep) between them."""
    duty_cycles(points, log, seconds, "duty", idle_gaps())


def part_window(points, log, seconds):
    """How long the power limiter averages: 4096^3 GEMM bursts and idle gaps of equal length (duty 50%) with periods
    of 2, 8, 32 and 128 ms. Periods well inside the limiter's window keep the rate a 50% average draw allows (the
    burst rate, where that draw is under the limit); periods well beyond it throttle each burst as a held GEMM is.
    Where the rate falls between them is the window tessel's share would need to credit a layer's idle waits (the
    clock recovering while a rank waits on its collectives: docs/validation.md, what is left)."""
    gap_for = idle_gaps()
    for period_ms in (2, 8, 32, 128):
        duty_cycles(points, log, seconds, "window", gap_for, shape=(4096, 4096, 4096), burst=period_ms / 2e3,
                    duties=(50,), name=lambda duty, p=period_ms: f"window-{p}ms")


def part_duty_copy(points, log, seconds):
    """As part_duty, the gaps filled with an HBM copy instead of an idle kernel: whether memory-bound time (a
    layer's norms and elementwise kernels, NCCL's copies beside exposed communication) lets the clock recover as
    idle time does. tessel's block duty counts memory-bound kernels as no tensor-core load (FORMULAS.md §3.3).
    On a lent H200 (2026-11-28) these bursts ran as planned and sustained 0.907 / 0.992 / 1.001 at 0.74 / 0.50 / 0.25,
    where the idle-gap bursts, whose gaps ran short, sustained 0.99 at 0.66-0.70 and 0.91 at 0.84-0.86."""
    n = 2 ** 28  # 512 MiB of bf16; a gap copies a slice of it, or all of it several times
    src = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    dst.copy_(src)
    copy_seconds = timed(lambda: dst.copy_(src), 5) / 5

    def copy_gap(idle):
        elements = min(n, max(1, int(n * idle / copy_seconds)))
        repeats = max(1, round(idle / copy_seconds)) if elements == n else 1

        def gap():
            for _ in range(repeats):
                dst[:elements].copy_(src[:elements])

        return gap, {"copy_seconds_per_burst": idle, "copy_gb_per_s": 2.0 * 2 * n / 1e9 / copy_seconds}

    duty_cycles(points, log, seconds, "duty-copy", copy_gap)


PARTS = {"gemm-bf16-8192": part_gemm_bf16_8192, "gemm-bf16-mamf": part_gemm_bf16_mamf,
         "gemm-fp8-8192": part_gemm_fp8_8192, "gemm-fp32-8192": part_gemm_fp32_8192,
         "gemm-fp32-layer": part_gemm_fp32_layer, "attention": part_attention, "copy": part_copy, "duty": part_duty,
         "duty-copy": part_duty_copy, "window": part_window}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON file for every point")
    ap.add_argument("--seconds", type=float, default=4.0, help="how long each phase is held (default 4)")
    ap.add_argument("--quick", action="store_true", help="hold each phase 1 s (rehearsals)")
    ap.add_argument("--only", choices=list(PARTS), action="append", help="parts to run (default all)")
    args = ap.parse_args()
    if args.seconds <= 0:
        ap.error(f"--seconds must be positive, not {args.seconds}")
    if not torch.cuda.is_available():
        print("power_probe: no GPU answers (torch.cuda.is_available() is False)", file=sys.stderr)
        return 3
    seconds = 1.0 if args.quick else args.seconds
    doc = probe_document(torch, "rates, power and SM clocks of kernel classes held at the power limit "
                                "(bench/power_probe.py)",
                         "name,driver_version,clocks.max.sm,power.limit,power.max_limit,temperature.gpu")
    log = PowerLog(args.out + ".smi.csv")
    log.start()
    run_parts(doc, args.only or list(PARTS),
              {name: (lambda points, fn=fn: fn(points, log, seconds)) for name, fn in PARTS.items()}, args.out)
    log.stop()
    doc["power"] = log.summary()
    doc["smi_query"] = log.query
    write(doc, args.out)

    print(f"device {doc['device']}, torch {doc['torch']}, {doc['nvidia_smi']}")
    power = {ph["phase"]: ph for ph in doc["power"] if ph.get("samples")}
    print(f"{'phase':<16} {'unit':>8} {'burst':>8} {'sustained':>10} {'ratio':>6} {'W':>5} {'MHz':>6}")
    for p in doc["points"]:
        if "error" in p:
            print(f"{p['phase']:<16} {p['error'][:100]}")
            continue
        ph = power.get(p["phase"], {})
        duty = f" duty {p['duty_measured']:.2f}" if "duty_measured" in p else ""
        print(f"{p['phase']:<16} {p['unit']:>8} {p['burst_rate']:8.1f} {p['sustained_rate']:10.1f} "
              f"{p['sustained_rate'] / p['burst_rate']:6.3f} {ph.get('power_w_mean', 0):5.0f} {ph.get('sm_mhz_mean', 0):6.0f}{duty}")
    print(f"errors: {doc.get('errors', 'none')}; seconds per part: {doc['seconds']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
