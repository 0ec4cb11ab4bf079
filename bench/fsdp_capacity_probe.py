#!/usr/bin/env python3
"""Runs one rank of an 8-GPU PyTorch FSDP job on the lent GPU, the way llm-foundry's MPT benchmarks ran it, to see
what the job's own memory does to its step (docs/validation.md, "MPT 30B seq 8192 on 8 H100"):

The shared set's worst record, MPT-30B at sequence 8192 on 8 H100 (measured 29.9% MFU where the same model on the
same GPUs reaches 35.9% at 4096 and 38.1% at 2048), is predicted 19.7% fast, at a predicted peak of 71 of 79.6 GiB.
PyTorch's caching allocator, near capacity, frees its cached blocks and retries cudaMalloc (a device-wide sync and
cudaFree per retry). One GPU cannot run the job, but it can run rank 0 of it: torch.distributed's fake process
group (torch.testing._internal.distributed.fake_pg; what torchtitan's memory estimation uses) answers every
collective at once without moving data, so FSDP shards, gathers into full-size buffers, reduce-scatters into shards
and frees exactly as on rank 0 of 8, and every kernel but the communication runs for real:

- the model: MPT-30B as llm-foundry builds it (mpt-30b.yaml: d 7168, 56 heads, 48 layers, expansion 4, vocab 50368,
  learned positions, no biases, tied embeddings; low_precision_layernorm; GELU), attention as its `flash` path
  (unpad gather, FlashAttention-2 through F.scaled_dot_product_attention, pad scatter), the loss on the tied
  logits under autocast;
- the job: Composer's FSDP (FSDP1: FULL_SHARD, mixed_precision DEFAULT = bf16 params, fp32 reduce and buffers,
  limit_all_gathers, BACKWARD_POST prefetch, use_orig_params false, activation checkpointing non-reentrant on
  every block after wrapping), amp_bf16, a single-tensor AdamW on the shards, gradient clipping at norm 1, no
  no_sync (Composer reduce-scatters every micro-batch);
- cases: the record's plan (seq 8192, micro-batch 1) with PyTorch's default allocator and with
  expandable_segments (which maps memory instead of splitting cached blocks), its neighbours in the same table
  (seq 4096 micro-batch 1, seq 2048 micro-batch 3), and the record's plan under FSDP2 (fully_shard); then the
  same with the allocator capped at 77-74 GiB, as a real job's NCCL buffers and communicators, which the fake
  group does not create, would leave it. Each case runs in its own process (the allocator's settings are read
  at start) under its own time limit.

Per case (with --profile, also the kernels of one more micro-batch and step by class, and the costliest ones):
seconds per micro-batch (CUDA events, mean over the timed steps), optimizer and clipping seconds, tokens/s
for this GPU, and the caching allocator's counters over the timed steps (num_alloc_retries, cudaMalloc/cudaFree
calls, peak allocated and reserved, inactive split bytes), with the power and SM clock sampled through them.

  python3 bench/fsdp_capacity_probe.py --out fsdp.json [--case NAME ...] [--layers 48] [--timed-steps 2] [--profile]
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

from probe_common import probe_document, profile_step, smi, write

# name: (seq, micro-batch, micro-batches per step, PYTORCH_CUDA_ALLOC_CONF, fsdp version, allocator cap GiB or 0)
CASES = {
    "s8192-mb1": (8192, 1, 2, "", 1, 0),
    "s8192-mb1-expandable": (8192, 1, 2, "expandable_segments:True", 1, 0),
    "s4096-mb1": (4096, 1, 3, "", 1, 0),
    "s2048-mb3": (2048, 3, 2, "", 1, 0),
    "s8192-mb1-fsdp2": (8192, 1, 2, "", 2, 0),
}
# the same with the caching allocator capped below the card (torch.cuda.set_per_process_memory_fraction), as the
# memory a real job's NCCL communicators and buffers hold outside PyTorch's allocator would leave it
for cap in (77, 76, 75, 74):
    CASES[f"s8192-mb1-cap{cap}"] = (8192, 1, 2, "", 1, cap)
CASES["s8192-mb1-cap74-expandable"] = (8192, 1, 2, "expandable_segments:True", 1, 74)
CASES["s4096-mb1-cap74"] = (4096, 1, 3, "", 1, 74)
CASES["s2048-mb3-cap74"] = (2048, 3, 2, "", 1, 74)
MPT30B = {"d": 7168, "heads": 56, "layers": 48, "ffn": 4 * 7168, "vocab": 50368}
WORLD = 8
COUNTERS = ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free", "num_sync_all_streams")


def build_model(torch, layers, seq):
    """MPT as llm-foundry's modeling_mpt.py builds it for mpt-30b.yaml (shapes only; no dropout, no padding)."""
    nn, F = torch.nn, torch.nn.functional

    def low_precision_layernorm(norm, x):
        # llm-foundry LPLayerNorm: input and weight cast to the autocast dtype, layer_norm with autocast off
        with torch.autocast("cuda", enabled=False):
            return F.layer_norm(x.to(torch.bfloat16), norm.normalized_shape, norm.weight.to(torch.bfloat16), None,
                                norm.eps)

    class Block(nn.Module):
        def __init__(self, d, heads, ffn):
            super().__init__()
            self.heads = heads
            self.norm_1 = nn.LayerNorm(d, bias=False)
            self.Wqkv = nn.Linear(d, 3 * d, bias=False)
            self.out_proj = nn.Linear(d, d, bias=False)
            self.norm_2 = nn.LayerNorm(d, bias=False)
            self.up_proj = nn.Linear(d, ffn, bias=False)
            self.down_proj = nn.Linear(ffn, d, bias=False)

        def forward(self, x):
            b, t, d = x.shape
            qkv = self.Wqkv(low_precision_layernorm(self.norm_1, x))
            # flash_attn_fn: bert_padding.unpad_input gathers the unmasked tokens (all of them here) ...
            rows = torch.arange(b * t, device=x.device)
            qkv = qkv.reshape(b * t, 3, self.heads, d // self.heads).index_select(0, rows)
            q, k, v = (u.view(b, t, self.heads, -1).transpose(1, 2) for u in qkv.unbind(1))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b * t, d)
            # ... and pad_input scatters the output back into a zeroed (b * t, d) tensor
            o = torch.zeros_like(o).index_copy(0, rows, o).view(b, t, d)
            x = x + self.out_proj(o)
            return x + self.down_proj(F.gelu(self.up_proj(low_precision_layernorm(self.norm_2, x))))

    class MPT(nn.Module):
        def __init__(self):
            super().__init__()
            m = MPT30B
            self.wte = nn.Embedding(m["vocab"], m["d"])
            self.wpe = nn.Embedding(seq, m["d"])
            self.blocks = nn.ModuleList(Block(m["d"], m["heads"], m["ffn"]) for _ in range(layers))
            self.norm_f = nn.LayerNorm(m["d"], bias=False)

        def forward(self, tokens):
            pos = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.wte(tokens) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            logits = F.linear(low_precision_layernorm(self.norm_f, x), self.wte.weight)
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), tokens.view(-1))

    return MPT, Block


def shard(torch, model, Block, fsdp):
    """Wraps as Composer's FSDP does (FSDP1) or as torchtitan does (FSDP2), both with activation checkpointing."""
    from functools import partial
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (CheckpointImpl, apply_activation_checkpointing,
                                                                             checkpoint_wrapper)
    ac = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    if fsdp == 1:
        from torch.distributed.fsdp import BackwardPrefetch, MixedPrecision, ShardingStrategy
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}), sharding_strategy=ShardingStrategy.FULL_SHARD,
                     mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32,
                                                    buffer_dtype=torch.float32),
                     backward_prefetch=BackwardPrefetch.BACKWARD_POST, limit_all_gathers=True, use_orig_params=False,
                     device_id=torch.cuda.current_device(), sync_module_states=False)
        apply_activation_checkpointing(model, checkpoint_wrapper_fn=ac, check_fn=lambda m: isinstance(m, Block))
        return model, model.clip_grad_norm_
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=ac, check_fn=lambda m: isinstance(m, Block))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for blk in model.blocks:
        fully_shard(blk, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    model.to_empty(device="cuda")
    with torch.no_grad():
        for p in model.parameters():
            (p.to_local() if hasattr(p, "to_local") else p).normal_(0.0, 0.02)
    return model, lambda norm: torch.nn.utils.clip_grad_norm_(model.parameters(), norm)


class Sampler:
    """power.draw and clocks.sm every second while the timed steps run."""

    def __init__(self):
        self.samples, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.wait(1.0):
            line = smi("power.draw,clocks.sm")
            try:
                self.samples.append([float(x.split()[0]) for x in line.split(",")])
            except Exception:
                pass

    def mean(self):
        if not self.samples:
            return None, None
        return (round(sum(s[0] for s in self.samples) / len(self.samples), 1),
                round(sum(s[1] for s in self.samples) / len(self.samples)))


def child(name, layers, timed_steps, profile, out):
    """One case in this process: rank 0 of WORLD under the fake process group."""
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    seq, mb, per_step, alloc_conf, fsdp, cap_gib = CASES[name]
    point = {"kind": "fsdp_rank", "case": name, "seq": seq, "micro_batch": mb, "micro_batches_per_step": per_step,
             "alloc_conf": alloc_conf, "fsdp": fsdp, "world": WORLD, "layers": layers,
             "capacity_bytes": torch.cuda.get_device_properties(0).total_memory}
    torch.cuda.set_device(0)
    if cap_gib:
        point["allocator_cap_bytes"] = cap_gib * 2**30
        torch.cuda.set_per_process_memory_fraction(cap_gib * 2**30 / point["capacity_bytes"])
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)
    t0 = time.time()
    MPT, Block = build_model(torch, layers, seq)
    with torch.device("meta"):
        model = MPT()
    point["parameters"] = sum(p.numel() for p in model.parameters())
    model, clip = shard(torch, model, Block, fsdp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0,
                            foreach=False)
    point["init_seconds"] = round(time.time() - t0, 1)
    tokens = torch.randint(0, MPT30B["vocab"], (mb, seq), device="cuda")

    losses = []

    def step(micro_batches, times):
        for _ in range(micro_batches):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(tokens)
            loss.backward()
            b.record()
            losses.append(loss.detach())
            times["micro_batch"].append((a, b))
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        clip(1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        b.record()
        times["optimizer"].append((a, b))

    warm = {"micro_batch": [], "optimizer": []}
    step(1, warm)  # the optimizer's state is allocated in the first step
    torch.cuda.synchronize()
    point["after_first_step"] = {k: torch.cuda.memory_stats().get(k, 0) for k in COUNTERS}
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_stats()
    sampler = Sampler()
    sampler.thread.start()
    times = {"micro_batch": [], "optimizer": []}
    w0 = time.time()
    for _ in range(timed_steps):
        step(per_step, times)
    torch.cuda.synchronize()
    wall = time.time() - w0
    sampler.stop.set()
    after = torch.cuda.memory_stats()
    ms = {k: [a.elapsed_time(b) for a, b in v] for k, v in times.items()}
    point.update({
        "micro_batch_seconds": [round(x / 1e3, 4) for x in ms["micro_batch"]],
        "optimizer_seconds": [round(x / 1e3, 4) for x in ms["optimizer"]],
        "seconds_per_micro_batch": round(sum(ms["micro_batch"]) / len(ms["micro_batch"]) / 1e3, 4),
        "step_wall_seconds": round(wall / timed_steps, 3),
        "tokens_per_second": round(timed_steps * per_step * mb * seq / wall, 1),
        "timed": {k: after.get(k, 0) - before.get(k, 0) for k in COUNTERS},
        "peak_allocated_bytes": after.get("allocated_bytes.all.peak", 0),
        "peak_reserved_bytes": after.get("reserved_bytes.all.peak", 0),
        "peak_inactive_split_bytes": after.get("inactive_split_bytes.all.peak", 0),
        "reserved_bytes_end": after.get("reserved_bytes.all.current", 0),
        "last_loss": float(losses[-1].float().item()),
    })
    point["power_w"], point["sm_clock_mhz"] = sampler.mean()
    if profile:  # one more micro-batch under the profiler: kernel time by class (GEMM, attention, the rest)
        point["profile_one_micro_batch"] = profile_step(torch, lambda: step(1, {"micro_batch": [], "optimizer": []}))
    with open(out, "w") as f:
        json.dump(point, f, indent=1)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON file for every point")
    ap.add_argument("--case", choices=list(CASES), action="append", help="cases to run (default all, in order)")
    ap.add_argument("--layers", type=int, default=MPT30B["layers"], help="transformer layers (48: MPT-30B)")
    ap.add_argument("--timed-steps", type=int, default=2, help="optimizer steps timed after the first")
    ap.add_argument("--profile", action="store_true", help="profile one more micro-batch and step of each case")
    ap.add_argument("--case-seconds", type=int, default=150, help="time limit of each case's process")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.layers, args.timed_steps, args.profile, args.out)
        return 0
    import torch
    if not torch.cuda.is_available():
        print("fsdp_capacity_probe: no GPU answers (torch.cuda.is_available() is False)", file=sys.stderr)
        return 3
    doc = probe_document(torch, "rank 0 of llm-foundry's 8-GPU FSDP MPT-30B job under a fake process group "
                                "(bench/fsdp_capacity_probe.py)",
                         "name,driver_version,clocks.max.sm,power.limit,memory.total")
    del torch
    for name in args.case or list(CASES):
        part = args.out + f".{name}.json"
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if CASES[name][3]:
            env["PYTORCH_CUDA_ALLOC_CONF"] = CASES[name][3]
        t0, stderr = time.time(), ""
        try:
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, "--out", part,
                                "--layers", str(args.layers), "--timed-steps", str(args.timed_steps)]
                               + (["--profile"] if args.profile else []),
                               env=env, capture_output=True, text=True, timeout=args.case_seconds)
            stderr = r.stderr
            if r.returncode != 0:
                raise RuntimeError(f"exit status {r.returncode}")
            with open(part) as f:
                doc["points"].append(json.load(f))
        except Exception as e:
            if isinstance(e, subprocess.TimeoutExpired) and e.stderr:
                stderr = e.stderr if isinstance(e.stderr, str) else e.stderr.decode(errors="replace")
            doc["points"].append({"kind": "fsdp_rank", "case": name, "error": f"{type(e).__name__}: {e}"[:300],
                                  "stderr_tail": stderr[-2000:]})
        doc.setdefault("seconds", {})[name] = round(time.time() - t0, 1)
        write(doc, args.out)

    print(f"device {doc['device']}, torch {doc['torch']}, {doc['nvidia_smi']}")
    for p in doc["points"]:
        if "error" in p:
            print(f"{p['case']}: {p['error']}\n{p.get('stderr_tail', '')}")
            continue
        t = p["timed"]
        print(f"{p['case']:<22} {p['seconds_per_micro_batch']:7.3f} s/micro-batch, optimizer "
              f"{sum(p['optimizer_seconds']) / len(p['optimizer_seconds']):6.3f} s, {p['tokens_per_second']:8.1f} tok/s; "
              f"peak alloc {p['peak_allocated_bytes'] / 2**30:5.1f} reserved {p['peak_reserved_bytes'] / 2**30:5.1f} GiB "
              f"of {p['capacity_bytes'] / 2**30:5.1f}; retries {t['num_alloc_retries']} cudaMalloc {t['num_device_alloc']} "
              f"cudaFree {t['num_device_free']} ooms {t['num_ooms']}; {p['power_w']} W {p['sm_clock_mhz']} MHz")
        if "profile_one_micro_batch" in p:
            pr = p["profile_one_micro_batch"]
            print("  profiled micro-batch and step, ms: " + " ".join(f"{k} {v:.1f}" for k, v in pr["ms_by_class"].items()))
            for k in pr["top_kernels"][:14]:
                print(f"    {k['ms']:8.1f} ms {k['count']:5d}x {k['class']:<9} {k['name'][:110]}")
            print("  operators and scopes by device time (inclusive / own ms):")
            kernels = ("void", "nvjet", "cudnn", "Memcpy", "Memset", "at::native", "sm90", "cutlass")
            for o in [o for o in pr.get("top_ops", []) if not o["name"].startswith(kernels)][:40]:
                print(f"    {o['device_ms']:8.1f} {o['self_device_ms']:8.1f} {o['count']:5d}x {o['name'][:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
