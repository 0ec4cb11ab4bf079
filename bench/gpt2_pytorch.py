#!/usr/bin/env python3
"""GPT-2 124M trained with plain PyTorch (eager or torch.compile), the reference side of
bench/gpt2_cuda_vs_pytorch.sh: the same architecture as tessel's gpt2-124m model (12 layers, hidden 768,
12 heads, GELU tanh MLP 3072, LayerNorm, learned positions, tied embeddings, biases, no dropout), bf16 autocast
with fp32 master weights and AdamW (PyTorch's fused AdamW), causal flash attention through
scaled_dot_product_attention, gradient-norm clipping at 1.0. Prints one JSON line: tokens/s and MFU.

MFU counts 6 N + 12 L h s FLOPs per token (PaLM, Chowdhery et al. 2022, appendix B; nanoGPT estimate_mfu),
N the parameter count without the position embedding.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, h, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, ffn)
        self.fc2 = nn.Linear(ffn, h)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers=12, h=768, heads=12, ffn=3072, vocab=50257, seq=1024):
        super().__init__()
        self.wte = nn.Embedding(vocab, h)
        self.wpe = nn.Embedding(seq, h)
        self.blocks = nn.ModuleList(Block(h, heads, ffn) for _ in range(layers))
        self.lnf = nn.LayerNorm(h)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        logits = self.lnf(x) @ self.wte.weight.t()   # tied LM head
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def kernel_class(name):
    """The class of a CUDA kernel by its name: what tessel's step breakdown separates."""
    n = name.lower()
    if any(w in n for w in ("flash", "fmha", "attention", "cudnn")):
        return "attention"
    if any(w in n for w in ("gemm", "nvjet", "xmma", "cutlass", "cublas", "splitk")):
        return "gemm"
    if any(w in n for w in ("adam", "multi_tensor", "foreach")):
        return "optimizer"
    if n.startswith("triton_"):
        # Inductor's names: triton_poi (pointwise), triton_red / triton_per (reductions: norms, losses, sums)
        return "triton_" + (n.split("_")[1] if "_" in n else "other")
    if "memcpy" in n or "memset" in n:
        return "copy"
    return "other_elementwise_or_reduction"


def profile_steps(train_step, path, side, steps=3):
    """GPU time per kernel class and per kernel over `steps` training steps (torch.profiler's Chrome trace),
    and how much of each step the GPU was busy: the rest is host time the GPU waited for. Writes `path` and the
    GPU events as a Chrome trace beside it (path + .kernels.json.gz)."""
    import gzip
    import os
    from torch.profiler import ProfilerActivity, profile
    marks = []
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            torch.cuda.synchronize()
            marks.append(time.perf_counter())
            train_step()
            torch.cuda.synchronize()
        marks.append(time.perf_counter())
    trace = path + ".trace.json"
    prof.export_chrome_trace(trace)
    doc = json.load(open(trace))
    os.remove(trace)
    kernels = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X" and e.get("cat") in
               ("kernel", "gpu_memcpy", "gpu_memset")]
    # Only the GPU's events are kept (the host's make the trace tens of MiB): a Chrome trace still.
    with gzip.open(path + ".kernels.json.gz", "wt") as g:
        json.dump({"traceEvents": [{k: e[k] for k in ("ph", "cat", "name", "ts", "dur", "pid", "tid") if k in e}
                                   for e in kernels]}, g)
    per_class, per_kernel = {}, {}
    for e in kernels:
        c = kernel_class(e["name"]) if e["cat"] == "kernel" else "copy"
        per_class[c] = per_class.get(c, 0.0) + e["dur"] / 1e6 / steps
        k = per_kernel.setdefault(e["name"][:160], {"class": c, "seconds_per_step": 0.0, "launches_per_step": 0.0})
        k["seconds_per_step"] += e["dur"] / 1e6 / steps
        k["launches_per_step"] += 1.0 / steps
    # Busy time: the union of kernel intervals (one stream here, but unions are safe either way).
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in kernels)
    busy, end = 0.0, None
    for a, b in spans:
        if end is None or a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    top = sorted(per_kernel.items(), key=lambda kv: -kv[1]["seconds_per_step"])[:60]
    json.dump({"side": side, "steps": steps, "wall_seconds_per_step": (marks[-1] - marks[0]) / steps,
               "gpu_busy_seconds_per_step": busy / 1e6 / steps, "kernels_per_step": len(kernels) / steps,
               "seconds_per_step_by_class": dict(sorted(per_class.items(), key=lambda kv: -kv[1])),
               "top_kernels": [dict(name=n, **v) for n, v in top]}, open(path, "w"), indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5, help="steps left out of the timing (compilation, autotuning)")
    ap.add_argument("--profile", default="", help="after the timed steps, profile 3 more and write the GPU time "
                    "per kernel class to this JSON file (and the Chrome trace beside it, gzipped)")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak of the GPU (H100/H200 SXM: 989)")
    args = ap.parse_args()
    if args.global_batch % args.micro_batch:
        ap.error("--global-batch must be a multiple of --micro-batch")
    if args.steps <= args.warmup:
        ap.error("--steps must exceed --warmup")

    torch.manual_seed(1234)
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = "cuda"
    model = GPT(seq=args.seq).to(dev)
    params = sum(p.numel() for p in model.parameters())
    n_flops = params - model.wpe.weight.numel()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    step_model = torch.compile(model) if args.mode == "compile" else model
    accum = args.global_batch // args.micro_batch
    data = torch.randint(0, 50257, (accum, args.micro_batch, args.seq + 1), device=dev)

    def train_step():
        for mb in range(accum):
            x, y = data[mb, :, :-1], data[mb, :, 1:]
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = step_model(x, y) / accum
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times, losses = [], []
    for step in range(args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = train_step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item() * accum)
    # Peak memory of the timed steps, before any profiling: what tessel's `amp` recipe predicts (allocated) and
    # what the caching allocator held (reserved).
    peak_allocated = torch.cuda.max_memory_allocated()
    peak_reserved = torch.cuda.max_memory_reserved()
    if args.profile:
        try:
            profile_steps(train_step, args.profile, "pytorch-" + args.mode)
        except Exception as e:  # the profile is an extra: the timing above stands without it
            print(f"gpt2_pytorch: profiling failed ({type(e).__name__}: {e}); timings unaffected", file=sys.stderr)

    step_seconds = statistics.median(times[args.warmup:])
    tokens = args.global_batch * args.seq
    flops_per_token = 6 * n_flops + 12 * 12 * 768 * args.seq
    tokens_per_second = tokens / step_seconds
    mfu = tokens_per_second * flops_per_token / (args.peak_tflops * 1e12)
    print(json.dumps({
        "side": "pytorch-" + args.mode, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "parameters": params, "step_seconds": step_seconds, "tokens_per_second": tokens_per_second,
        "mfu": mfu, "final_loss": losses[-1] if math.isfinite(losses[-1]) else None,
        "peak_memory_allocated_bytes": peak_allocated, "peak_memory_reserved_bytes": peak_reserved,
    }))


if __name__ == "__main__":
    main()
