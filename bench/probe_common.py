"""What the PyTorch probes of the lent GPU share (bench/gpu_kernels_probe.py, bench/torchtitan_block_probe.py):
the document every probe writes, nvidia-smi queries, and running parts one by one so that a call stopped from
outside still leaves what ran."""
import json
import subprocess
import time


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


def write(doc, out):
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
