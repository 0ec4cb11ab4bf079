#!/usr/bin/env python3
"""Records real PyTorch profiler traces (and unprofiled step times) of a GPT-2 style training step on the CPU,
as test data for `tessel import torch` and `tessel calibrate` (issue 17).

The model is nanoGPT's GPT-2 block written out (learned positions, pre-LayerNorm, fused QKV linear, causal
attention as two batched matmuls around a masked softmax, GELU MLP of 4h, tied LM head, cross-entropy, AdamW),
in float32 on one thread: one CPU core stands for one "GPU" of scenarios/clusters/cpu-host.json.

  python3 bench/make_torch_traces.py --out tests/data/torch            # traces + step_times.json
  python3 bench/make_torch_traces.py --out DIR --ddp                   # also the 2-process gloo DDP traces

Writes, per plan NAME (batch B, sequence S):
  NAME.trace.json      torch.profiler Chrome/Kineto trace of 2 steps (record_shapes, profile_memory)
  step_times.json      per plan: the median over repetitions of unprofiled step times (perf_counter around
                       forward + backward + optimizer), measured in interleaved passes over all plans
Needs Debian's python3-torch (1.13) or any torch >= 1.13; on Debian also libopenblas0-pthread (the reference BLAS
runs GEMMs ~10x slower than a training script would see). Run it with /usr/bin/python3 where another python3 is first.
"""
import argparse
import json
import math
import os
import statistics
import time

# One BLAS thread: torch.set_num_threads does not reach OpenBLAS's own pool (Debian's torch links the system BLAS).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn as nn
import torch.nn.functional as F

# The model: small enough that a step takes ~0.1-0.3 s on one core, large enough that the GEMMs dominate.
CONFIG = dict(layers=4, hidden=128, heads=4, vocab=512, max_seq=256)
# Plans: two seen (calibrated from), one unseen (predicted), differing in batch and sequence length.
PLANS = {"seen-b2-s128": (2, 128), "seen-b8-s64": (8, 64), "unseen-b4-s96": (4, 96)}


class Block(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(h)
        self.c_attn = nn.Linear(h, 3 * h)
        self.c_proj = nn.Linear(h, h)
        self.ln_2 = nn.LayerNorm(h)
        self.c_fc = nn.Linear(h, 4 * h)
        self.mlp_proj = nn.Linear(4 * h, h)

    def forward(self, x, mask):
        b, s, h = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(h, dim=2)
        q = q.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        k = k.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        v = v.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(h // self.heads))
        att = att.masked_fill(mask[:, :, :s, :s] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, s, h)
        x = x + self.c_proj(y)
        x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))
        return x


class GPT(nn.Module):
    def __init__(self, layers, hidden, heads, vocab, max_seq):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.register_buffer("mask", torch.tril(torch.ones(max_seq, max_seq)).view(1, 1, max_seq, max_seq))

    def forward(self, idx, targets):
        b, s = idx.shape
        pos = torch.arange(0, s, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x, self.mask)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied LM head
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def make(seed=0):
    torch.manual_seed(seed)
    model = GPT(**CONFIG)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt


def batch(b, s, gen):
    idx = torch.randint(0, CONFIG["vocab"], (b, s + 1), generator=gen)
    return idx[:, :-1].contiguous(), idx[:, 1:].contiguous()


def step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = model(x, y)
    loss.backward()
    opt.step()
    return loss


def timed_steps(b, s, n, warmup=3):
    model, opt = make()
    gen = torch.Generator().manual_seed(1)
    data = [batch(b, s, gen) for _ in range(4)]
    for i in range(warmup):
        step(model, opt, *data[i % 4])
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        step(model, opt, *data[i % 4])
        out.append(time.perf_counter() - t0)
    return out


# Views, metadata and scalar reads, always nested inside the ops that use them: left out to keep the committed
# traces small (the generic BLAS path of Debian's torch issues one aten::select per batched-GEMM slice).
METADATA_OPS = {"aten::as_strided", "aten::select", "aten::resolve_conj", "aten::empty_strided", "aten::empty",
                "aten::_reshape_alias", "aten::view", "aten::t", "aten::expand", "aten::slice", "aten::narrow",
                "aten::detach", "detach", "aten::item", "aten::_local_scalar_dense", "aten::_unsafe_view"}


def export_kineto_style(prof, path, rank=None, world=None):
    """Writes the profiler's events in the Chrome/Kineto layout torch >= 1.8 writes with Kineto: "X" events with
    cat "cpu_op" (or "user_annotation" for record_function ranges) and args "Input Dims" / "Input type", and
    "[memory]" instant events with args "Bytes". Debian's torch 1.13 is built without Kineto, and its legacy
    export_chrome_trace drops the shapes that record_shapes recorded; this writes the same events with them.
    Every number is the profiler's own: names, start, duration, thread, shapes, bytes."""
    events = []
    pid = os.getpid()
    for e in prof.events():
        if e.name in METADATA_OPS:
            continue
        if e.name == "[memory]":
            events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": pid,
                           "tid": e.thread, "ts": e.time_range.start,
                           "args": {"Device Type": 0, "Device Id": -1, "Bytes": e.cpu_memory_usage}})
            continue
        annotation = not (e.name.startswith("aten::") or e.name.startswith("autograd::") or
                          e.name.startswith("torch::") or e.name.endswith("Backward0") or e.name == "detach")
        args = {"External id": e.id}
        if e.sequence_nr >= 0:
            args["Sequence number"] = e.sequence_nr
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
        name = getattr(e, "trace_name", None) or e.name  # "ProfilerStep#3" rather than "ProfilerStep*"
        events.append({"ph": "X", "cat": "user_annotation" if annotation else "cpu_op", "name": name, "pid": pid,
                       "tid": e.thread, "ts": e.time_range.start, "dur": e.time_range.elapsed_us(), "args": args})
    doc = {"schemaVersion": 1, "traceName": os.path.basename(path),
           "exporter": "bench/make_torch_traces.py export_kineto_style, torch " + torch.__version__,
           "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": world}
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))


def profile(b, s, path, model=None, opt=None, rank=None, world=None):
    from torch.profiler import ProfilerActivity, profile as prof, schedule
    if model is None:
        model, opt = make()
    gen = torch.Generator().manual_seed(1 + (rank or 0))
    data = [batch(b, s, gen) for _ in range(4)]
    sched = schedule(wait=1, warmup=2, active=2, repeat=1)
    with prof(activities=[ProfilerActivity.CPU], schedule=sched, record_shapes=True, profile_memory=True,
              on_trace_ready=lambda p: export_kineto_style(p, path, rank, world)) as p:
        for i in range(5):
            step(model, opt, *data[i % 4])
            p.step()


def ddp_worker(rank, world, out, b, s):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model, _ = make()
    ddp = DDP(model, bucket_cap_mb=1)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)

    profile(b, s, os.path.join(out, f"ddp-b{b}-s{s}.rank{rank}.trace.json"), ddp, opt, rank, world)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--no-timing", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    for name, (b, s) in PLANS.items():
        profile(b, s, os.path.join(a.out, f"{name}.trace.json"))
    if a.ddp:
        import torch.multiprocessing as mp
        mp.spawn(ddp_worker, args=(2, a.out, 2, 64), nprocs=2, join=True)
    if a.no_timing:
        return
    # Unprofiled step times: interleaved passes (alternate passes reversed), so a slow spell of a shared
    # machine is spread over the plans; a plan's figure is the median of all its steps.
    samples = {name: [] for name in PLANS}
    names = list(PLANS)
    for p in range(a.passes):
        for name in (names if p % 2 == 0 else names[::-1]):
            samples[name] += timed_steps(*PLANS[name], a.steps)
    doc = {"script": "bench/make_torch_traces.py", "torch": torch.__version__, "threads": torch.get_num_threads(),
           "model": CONFIG, "plans": {}}
    for name, (b, s) in PLANS.items():
        v = sorted(samples[name])
        doc["plans"][name] = {"micro_batch": b, "seq_len": s, "step_seconds_median": statistics.median(v),
                              "step_seconds_p10": v[len(v) // 10], "step_seconds_p90": v[(9 * len(v)) // 10],
                              "samples": len(v)}
    with open(os.path.join(a.out, "step_times.json"), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
