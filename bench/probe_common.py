"""What the PyTorch probes of the lent GPU share (bench/gpu_kernels_probe.py, bench/torchtitan_block_probe.py,
bench/fsdp_capacity_probe.py, bench/power_probe.py): the document every probe writes, nvidia-smi queries and a
background power and clock log, a profiler breakdown of kernels, and running parts one by one so that a call
stopped from outside still leaves what ran."""
import json
import subprocess
import time
from collections import defaultdict


def smi(query):
    """One nvidia-smi --query-gpu line, or "" where there is none."""
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30).stdout.strip()
    except Exception:
        return ""


def probe_document(torch, what, smi_query):
    """The header every probe's JSON starts with: what it is, when, and on which device and software."""
    return {"schema_version": 1, "what": what,
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "device": torch.cuda.get_device_name(), "capability": list(torch.cuda.get_device_capability()),
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "nvidia_smi": smi(smi_query), "points": []}


def run_parts(doc, parts, runners, out):
    """Runs each named part (runners[name](points)), recording its error rather than stopping, its seconds, and
    rewriting `out` after every part."""
    t0 = time.time()
    for part in parts:
        try:
            runners[part](doc["points"])
        except Exception as e:
            doc.setdefault("errors", []).append(f"{part}: {type(e).__name__}: {e}"[:400])
        doc.setdefault("seconds", {})[part] = round(time.time() - t0, 1)
        t0 = time.time()
        write(doc, out)


def run_probe(torch, name, what, parts, runners, out):
    """The kernel probes' whole run: None (said on stderr) where no GPU answers; else a seeded document with
    nvidia-smi before and after, every part run by run_parts and the document written to `out`."""
    import sys
    if not torch.cuda.is_available():
        print(f"{name}: no GPU answers (torch.cuda.is_available() is False)", file=sys.stderr)
        return None
    torch.manual_seed(0)
    doc = probe_document(torch, what, "name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu")
    run_parts(doc, parts, runners, out)
    doc["nvidia_smi_after"] = smi("clocks.sm,temperature.gpu")
    write(doc, out)
    return doc


class PowerLog:
    """nvidia-smi sampled every 100 ms in the background; phases mark their start and end on the host clock."""

    def __init__(self, path):
        self.path, self.phases, self.proc = path, [], None
        for reasons in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
            q = f"timestamp,power.draw,clocks.sm,clocks.mem,temperature.gpu,{reasons}"
            if smi(q) and "Field" not in smi(q):
                self.query = q
                break
        else:
            self.query = "timestamp,power.draw,clocks.sm,clocks.mem,temperature.gpu"

    def start(self):
        try:
            self.file = open(self.path, "w")
            self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={self.query}", "--format=csv,noheader,nounits",
                                          "-lms", "100"], stdout=self.file, stderr=subprocess.DEVNULL)
        except Exception:
            self.proc = None

    def mark(self, name, t0, t1):
        self.phases.append({"phase": name, "start_unix": t0, "end_unix": t1})

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.file.close()

    def summary(self):
        """Mean power, SM clock and the throttle reasons seen, per phase."""
        samples = []
        try:
            for line in open(self.path):
                f = [x.strip() for x in line.split(",")]
                try:
                    ts = time.mktime(time.strptime(f[0].split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + f[0].split(".")[1])
                    samples.append((ts, float(f[1]), float(f[2]), float(f[3]), float(f[4]), f[5] if len(f) > 5 else ""))
                except (ValueError, IndexError):
                    continue
        except OSError:
            return []
        out = []
        for ph in self.phases:
            s = [x for x in samples if ph["start_unix"] <= x[0] <= ph["end_unix"]]
            if not s:
                out.append(dict(ph, samples=0))
                continue
            out.append(dict(ph, samples=len(s), power_w_mean=sum(x[1] for x in s) / len(s),
                            power_w_max=max(x[1] for x in s), sm_mhz_mean=sum(x[2] for x in s) / len(s),
                            sm_mhz_min=min(x[2] for x in s), mem_mhz_mean=sum(x[3] for x in s) / len(s),
                            temperature_c_max=max(x[4] for x in s),
                            throttle_reasons=sorted({x[5] for x in s})))
        return out


def kernel_class(name):
    """gemm, attention or other, from a CUDA kernel's name."""
    n = name.lower()
    if "flash" in n or "fmha" in n or "attention" in n:
        return "attention"
    if any(k in n for k in ("gemm", "nvjet", "xmma", "cutlass", "sm90_", "sm80_", "ampere_", "hopper")):
        return "gemm"
    return "other"


def profile_step(torch, fn):
    """Kernel time by class for one call of fn, the 25 costliest kernels, and the 120 operators or scopes whose
    kernels took the most device time."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    per_class, per_name = defaultdict(float), defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type != DeviceType.CUDA:
            continue
        us = e.time_range.elapsed_us()
        per_class[kernel_class(e.name)] += us / 1e3
        per_name[e.name][0] += us / 1e3
        per_name[e.name][1] += 1
    top = sorted(per_name.items(), key=lambda kv: -kv[1][0])[:25]
    # the host-side operators and record_function scopes (FSDP's hooks name theirs) with the device time of the
    # kernels they launched, inclusive and their own
    ops = []
    for a in prof.key_averages():
        total = getattr(a, "device_time_total", None) or getattr(a, "cuda_time_total", 0)
        own = getattr(a, "self_device_time_total", None) or getattr(a, "self_cuda_time_total", 0)
        if total > 0:
            ops.append({"name": a.key[:160], "device_ms": total / 1e3, "self_device_ms": own / 1e3, "count": a.count})
    ops.sort(key=lambda o: -o["device_ms"])
    return {"ms_by_class": dict(per_class),
            "top_kernels": [{"name": k[:160], "ms": v[0], "count": v[1], "class": kernel_class(k)} for k, v in top],
            "top_ops": ops[:120]}


def write(doc, out):
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
