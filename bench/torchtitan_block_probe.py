#!/usr/bin/env python3
"""Times torchtitan's Llama 3 block on the lent GPU, as torchtitan runs it, so the per-layer costs tessel predicts
for its torchtitan records (data/validation/check_torchtitan_h100.json, FORMULAS.md §3.2-3.4) can be compared
with one GPU of the same kind (docs/validation.md, "torchtitan's block measured on an H100"):

- blocks: the code of torchtitan's models/llama/model.py at 9dec370 (2024-12; what the records ran), eager:
  torchtitan's own RMSNorm (x.float(), pow, mean, rsqrt, type_as, * weight), RoPE through complex64, repeat_kv,
  F.scaled_dot_product_attention (causal, the FlashAttention-2 backend), SwiGLU, residuals. Parameters are bf16,
  as FSDP2's MixedPrecisionPolicy(param_dtype=bf16) gathers them; no optimizer and no collectives: per layer,
  forward and backward (recompute included) are timed with CUDA events over a stack of identical blocks, and
  per-layer = stack / layers. Recompute as torchtitan's activation checkpointing: none, selective "op" (keep mm
  and SDPA outputs except every second mm, torch.utils.checkpoint.create_selective_checkpoint_contexts) and
  full (whole block). Each case also records the peak allocated memory above the parameters (activations kept
  per layer, checked against tessel's memory model) and a profiler breakdown of the kernels (GEMM, attention,
  the rest) of one step;
- ring attention as torch.distributed's context parallelism runs it per rank (load-balanced: each rank holds
  chunks i and 2c-1-i of 2c): one causal call over the rank's S/c tokens and c-1 non-causal calls of S/c queries
  against S/2c keys (or S/2c queries against S/c keys), forward and backward, plus the fp32 merge of each block's
  output by its log-sum-exp; the shapes of Llama 3.1 8B (32 query heads after repeat_kv, head dim 128);
- the last stage's piece, final norm, output projection and torchtitan's eager loss on fp32 logits (time and
  peak bytes per logit), and AdamW (foreach and fused) over one FSDP rank's fp32 shards of the 8B model at dp 8;
- power and clocks: nvidia-smi sampled every 100 ms through the whole run, each phase's mean power, SM clock and
  throttle reasons, and a sustained 8192^3 bf16 GEMM loop as the tensor cores' own figure at this card's limit.

Prints a short table last; writes every point to --out as JSON.

  python3 bench/torchtitan_block_probe.py --out block.json [--quick] [--only gemm|blocks|ring|head|optimizer]
"""
import argparse
import sys
import time
from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F

from probe_common import PowerLog, probe_document, profile_step, run_parts, write


# ---- torchtitan's Llama 3 block (models/llama/model.py, norms.py at 9dec370) ----

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self._norm(x.float()).type_as(x) * self.weight


def precompute_freqs_cis(dim, end, theta=500000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    fc = freqs_cis[: xq_.shape[1]].view(1, xq_.shape[1], 1, xq_.shape[-1])
    return torch.view_as_real(xq_ * fc).flatten(3).type_as(xq), torch.view_as_real(xk_ * fc).flatten(3).type_as(xk)


def repeat_kv(x, n_rep):
    bs, slen, n_kv, hd = x.shape
    if n_rep == 1:
        return x
    return torch.unsqueeze(x, dim=3).expand(bs, slen, n_kv, n_rep, hd).reshape(bs, slen, n_kv * n_rep, hd)


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.hd, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(heads * self.hd, dim, bias=False)

    def forward(self, x, freqs_cis):
        bs, s, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq, xk, xv = xq.view(bs, s, -1, self.hd), xk.view(bs, s, -1, self.hd), xv.view(bs, s, -1, self.hd)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        keys, values = repeat_kv(xk, self.heads // self.kv_heads), repeat_kv(xv, self.heads // self.kv_heads)
        out = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
                                             is_causal=True)
        return self.wo(out.transpose(1, 2).contiguous().view(bs, s, -1))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, ffn):
        super().__init__()
        self.attention = Attention(dim, heads, kv_heads)
        self.feed_forward = FeedForward(dim, ffn)
        self.attention_norm, self.ffn_norm = RMSNorm(dim), RMSNorm(dim)

    def forward(self, x, freqs_cis):
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))


def op_policy_context():
    """torchtitan's selective "op" policy (parallelize_llama.py at 9dec370): save mm and SDPA outputs, except
    every second mm of the block, recompute the rest."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    save = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_efficient_attention.default,
            torch.ops.aten._scaled_dot_product_flash_attention.default, torch.ops.aten.abs.default,
            torch.ops.aten.max.default}
    meta = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        keep = func in save and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


class Stack(nn.Module):
    def __init__(self, layers, dim, heads, kv_heads, ffn, seq, recompute):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, heads, kv_heads, ffn) for _ in range(layers))
        self.freqs_cis = None   # set after the cast to bf16, which would drop a complex buffer's imaginary part
        self.recompute, self.compiled = recompute, False

    def compile_blocks(self):
        """torchtitan's apply_compile: each (checkpointed) block compiled on its own, fullgraph."""
        self.compiled = True
        self.step_fns = [torch.compile(self._one(b), fullgraph=True) for b in self.blocks]

    def _one(self, b):
        from torch.utils.checkpoint import checkpoint
        if self.recompute == "none":
            return lambda x, fc: b(x, fc)
        if self.recompute == "full":
            return lambda x, fc: checkpoint(b, x, fc, use_reentrant=False, preserve_rng_state=False)
        return lambda x, fc: checkpoint(b, x, fc, use_reentrant=False, preserve_rng_state=False,
                                        context_fn=op_policy_context)

    def forward(self, x):
        fns = self.step_fns if self.compiled else [self._one(b) for b in self.blocks]
        for fn in fns:
            x = fn(x, self.freqs_cis)
        return x


def blocks(points, log, quick):
    torch.backends.cuda.matmul.allow_tf32 = False
    from torch.nn.attention import SDPBackend, sdpa_kernel
    cases = [  # name, dim, heads, kv, ffn, seq, micro-batch, layers, recompute, compiled
        ("llama3-8b s8192 mb2", 4096, 32, 8, 14336, 8192, 2, 4, "op", False),
        ("llama3-8b s8192 mb2", 4096, 32, 8, 14336, 8192, 2, 4, "none", False),
        ("llama3-8b s8192 mb2", 4096, 32, 8, 14336, 8192, 2, 4, "full", False),
        ("llama3-8b s32768 mb1", 4096, 32, 8, 14336, 32768, 1, 2, "full", False),
        ("llama3-8b s8192 mb2", 4096, 32, 8, 14336, 8192, 2, 2, "op", True),
    ]
    if quick:
        cases = [("llama3-8b s2048 mb1", 4096, 32, 8, 14336, 2048, 1, 2, "op", False),
                 ("llama3-8b s2048 mb1", 4096, 32, 8, 14336, 2048, 1, 2, "op", True)]
    for name, dim, heads, kv, ffn, seq, mb, layers, rc, compiled in cases:
        point = {"kind": "block", "case": name, "dim": dim, "heads": heads, "kv_heads": kv, "ffn": ffn, "seq": seq,
                 "micro_batch": mb, "layers": layers, "recompute": rc, "compiled": compiled,
                 "attention_backend": "flash (FlashAttention-2)"}
        try:
            torch.manual_seed(0)
            model = Stack(layers, dim, heads, kv, ffn, seq, rc).cuda()
            with torch.no_grad():
                for p in model.parameters():
                    if p.dim() > 1:
                        p.normal_(0.0, 0.02)
            model = model.to(torch.bfloat16)
            model.freqs_cis = precompute_freqs_cis(dim // heads, seq).cuda()
            if compiled:
                model.compile_blocks()
            torch.cuda.synchronize()
            param_bytes = torch.cuda.memory_allocated()
            x = torch.randn(mb, seq, dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            g = torch.randn(mb, seq, dim, device="cuda", dtype=torch.bfloat16)
            evs = [torch.cuda.Event(enable_timing=True) for _ in range(3)]

            kept = []

            def step():
                for p in model.parameters():
                    p.grad = None
                x.grad = None
                before = torch.cuda.memory_allocated()
                evs[0].record()
                y = model(x)
                evs[1].record()
                kept.append(torch.cuda.memory_allocated() - before - y.numel() * y.element_size())
                y.backward(g)
                evs[2].record()

            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                tc = time.time()
                for _ in range(3 if compiled else 2):
                    step()
                torch.cuda.synchronize()
                point["warmup_seconds"] = round(time.time() - tc, 1)
                torch.cuda.synchronize()
                for p in model.parameters():
                    p.grad = None
                x.grad = None
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                base_reserved = torch.cuda.memory_reserved()
                fw, bw = [], []
                reps = 2 if quick else 10
                t0 = time.time()
                for _ in range(reps):
                    step()
                    evs[2].synchronize()
                    fw.append(evs[0].elapsed_time(evs[1]))
                    bw.append(evs[1].elapsed_time(evs[2]))
                t1 = time.time()
                log.mark(f"block {name} {rc}{' compiled' if compiled else ''}", t0, t1)
                peak = torch.cuda.max_memory_allocated()
                peak_reserved = torch.cuda.max_memory_reserved()
                prof = profile_step(torch, step)
            fw.sort(), bw.sort()
            point.update({"forward_ms_per_layer": fw[len(fw) // 2] / layers, "backward_ms_per_layer": bw[len(bw) // 2] / layers,
                          "forward_ms_all": fw, "backward_ms_all": bw, "parameter_bytes": param_bytes,
                          "peak_above_start_bytes_per_layer": (peak - base) / layers,
                          "activation_bytes_per_layer": kept[-1] / layers,
                          "peak_allocated_bytes": peak, "peak_reserved_bytes": peak_reserved,
                          "reserved_at_start_bytes": base_reserved,
                          "profile_ms_per_layer": {k: v / layers for k, v in prof["ms_by_class"].items()},
                          "top_kernels": prof["top_kernels"]})
            del model, x, g
        except Exception as e:
            point["error"] = f"{type(e).__name__}: {e}"[:400]
        points.append(point)
        torch.cuda.empty_cache()


def head(points, log, quick):
    """torchtitan's last stage piece: final RMSNorm, the output projection and the eager loss on fp32 logits
    (train.py: loss_fn = cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1)); pred deleted before
    backward), micro-batch 2 x 8192 of Llama 3.1 8B: time and the memory above what was live before."""
    dim, vocab, mb, seq = 4096, 128256, (1 if quick else 2), (2048 if quick else 8192)
    norm = RMSNorm(dim).cuda().to(torch.bfloat16)
    out = nn.Linear(dim, vocab, bias=False).cuda().to(torch.bfloat16)
    with torch.no_grad():
        out.weight.normal_(0.0, 0.02)
    h = torch.randn(mb, seq, dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (mb, seq), device="cuda")
    e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
    fw, bw, peaks, t0 = [], [], [], time.time()
    for i in range(7):
        h.grad = norm.weight.grad = out.weight.grad = None
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        e[0].record()
        pred = out(norm(h))
        loss = F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
        del pred
        e[1].record()
        loss.backward()
        e[2].record()
        e[2].synchronize()
        if i >= 2:
            fw.append(e[0].elapsed_time(e[1]))
            bw.append(e[1].elapsed_time(e[2]))
            peaks.append(torch.cuda.max_memory_allocated() - base)
    log.mark("head: output + eager loss", t0, time.time())
    points.append({"kind": "head", "dim": dim, "vocab": vocab, "micro_batch": mb, "seq": seq,
                   "forward_ms": sorted(fw)[len(fw) // 2], "backward_ms": sorted(bw)[len(bw) // 2],
                   "peak_above_start_bytes": max(peaks), "logits": mb * seq * vocab,
                   "peak_bytes_per_logit": max(peaks) / (mb * seq * vocab)})


def optimizer(points, log, quick):
    """AdamW over one FSDP rank's fp32 shards of Llama 3.1 8B at dp 8 (every weight split 8 ways on its first
    dimension), foreach (torchtitan's default then) and fused."""
    shapes = [(128256 // 8, 4096), (128256 // 8, 4096), (4096 // 8,)]
    for _ in range(2 if quick else 32):
        shapes += [(4096 // 8, 4096), (1024 // 8, 4096), (1024 // 8, 4096), (4096 // 8, 4096),
                   (14336 // 8, 4096), (4096 // 8, 14336), (14336 // 8, 4096), (4096 // 8,), (4096 // 8,)]
    params = [torch.randn(*s, device="cuda", dtype=torch.float32, requires_grad=True) for s in shapes]
    n = sum(p.numel() for p in params)
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    for impl in ("foreach", "fused"):
        t0 = time.time()
        try:
            opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1, **{impl: True})
            e = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
            ts = []
            for i in range(7):
                e[0].record()
                opt.step()
                e[1].record()
                e[1].synchronize()
                if i >= 2:
                    ts.append(e[0].elapsed_time(e[1]))
            points.append({"kind": "optimizer", "implementation": impl, "parameters": n, "tensors": len(params),
                           "step_ms": sorted(ts)[len(ts) // 2],
                           "bytes_per_second_at_28_bytes_per_parameter": 28 * n / (sorted(ts)[len(ts) // 2] / 1e3)})
            del opt
        except Exception as ex:
            points.append({"kind": "optimizer", "implementation": impl, "error": f"{type(ex).__name__}: {ex}"[:400]})
        log.mark(f"optimizer AdamW {impl}", t0, time.time())
        torch.cuda.empty_cache()


def sdpa_fwd_bwd(q, k, v, causal, reps):
    """Median forward and backward ms of one flash SDPA call with these shapes, CUDA events."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    g = torch.randn_like(q)
    e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
    fw, bw = [], []
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for i in range(reps + 2):
            q.grad = k.grad = v.grad = None
            e[0].record()
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            e[1].record()
            o.backward(g)
            e[2].record()
            e[2].synchronize()
            if i >= 2:
                fw.append(e[0].elapsed_time(e[1]))
                bw.append(e[1].elapsed_time(e[2]))
    fw.sort(), bw.sort()
    return fw[len(fw) // 2], bw[len(bw) // 2]


def ring(points, log, quick):
    """Per rank of torch's load-balanced ring attention over Llama 3.1 8B: the three block shapes it computes."""
    heads, hd = 32, 128
    local = 8192 if quick else 32768
    reps = 2 if quick else 5

    def qkv(sq, skv):
        mk = lambda s: torch.randn(1, heads, s, hd, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        return mk(sq), mk(skv), mk(skv)

    t0 = time.time()
    shapes = {}
    for label, sq, skv, causal in (("causal local", local, local, True), ("full q, half kv", local, local // 2, False),
                                   ("half q, full kv", local // 2, local, False)):
        try:
            q, k, v = qkv(sq, skv)
            f, b = sdpa_fwd_bwd(q, k, v, causal, reps)
            flops = 4 * heads * sq * skv * hd * (0.5 if causal else 1.0)
            shapes[label] = (f, b)
            points.append({"kind": "ring_block", "shape": label, "s_q": sq, "s_kv": skv, "heads": heads, "head_dim": hd,
                           "causal": causal, "forward_ms": f, "backward_ms": b, "forward_tflops": flops / f / 1e9,
                           "backward_tflops": 2.5 * flops / b / 1e9})
            del q, k, v
        except Exception as e:
            points.append({"kind": "ring_block", "shape": label, "error": f"{type(e).__name__}: {e}"[:400]})
    # The fp32 merge of one block's output into the running one (torch's _SDPAMerger): out, lse over the local
    # queries, forward; the backward accumulates dq, dk, dv in fp32 per block.
    try:
        out = torch.randn(1, heads, local, hd, device="cuda", dtype=torch.float32)
        lse = torch.randn(1, heads, local, device="cuda", dtype=torch.float32)
        ob = torch.randn(1, heads, local, hd, device="cuda", dtype=torch.bfloat16)
        lb = torch.randn(1, heads, local, device="cuda", dtype=torch.float32)
        acc = [torch.zeros(1, heads, local, hd, device="cuda", dtype=torch.float32) for _ in range(3)]
        grads = [torch.randn(1, heads, local, hd, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
        e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        ms_m, ms_a = [], []
        for i in range(reps + 2):
            e[0].record()
            o2 = out - torch.sigmoid(lb - lse).unsqueeze(-1) * (out - ob.float())
            l2 = lse - F.logsigmoid(lse - lb)
            e[1].record()
            for a, gr in zip(acc, grads):
                a.add_(gr)
            e[2].record()
            e[2].synchronize()
            if i >= 2:
                ms_m.append(e[0].elapsed_time(e[1]))
                ms_a.append(e[1].elapsed_time(e[2]))
        del o2, l2
        points.append({"kind": "ring_merge", "local_tokens": local, "heads": heads, "head_dim": hd,
                       "forward_merge_ms": sorted(ms_m)[len(ms_m) // 2], "backward_accumulate_ms": sorted(ms_a)[len(ms_a) // 2]})
    except Exception as ex:
        points.append({"kind": "ring_merge", "error": f"{type(ex).__name__}: {ex}"[:400]})
    log.mark("ring attention blocks", t0, time.time())
    # Per rank and layer at cp = c (S = c x local): one causal block and c - 1 half blocks, merges and accumulations.
    if len(shapes) == 3:
        merge = next((p for p in points if p["kind"] == "ring_merge" and "error" not in p), None)
        for c in (1, 2, 4, 8):
            f = shapes["causal local"][0] + (c - 1) * shapes["full q, half kv"][0]
            b = shapes["causal local"][1] + (c - 1) * shapes["full q, half kv"][1]
            if merge and c > 1:
                f += (c - 1) * merge["forward_merge_ms"]
                b += (c - 1) * merge["backward_accumulate_ms"]
            points.append({"kind": "ring_rank", "cp": c, "seq": c * local, "forward_ms_per_layer": f,
                           "backward_ms_per_layer": b, "note": "compute only: one causal block, c-1 half blocks, "
                           "c-1 fp32 merges (forward) and gradient accumulations (backward); no transfers"})


def sustained_gemm(points, log, quick):
    """An 8192^3 bf16 GEMM held for seconds: the tensor cores' rate and power at this card's limit."""
    n = 8192
    a = [torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    for i in range(20):
        torch.mm(a[i % 4], b, out=c)
    torch.cuda.synchronize()
    windows = []
    t0 = time.time()
    for w in range(3 if quick else 8):   # about 0.6 s each at 700 TFLOP/s
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for i in range(500):
            torch.mm(a[i % 4], b, out=c)
        e1.record()
        e1.synchronize()
        windows.append(2 * n ** 3 * 500 / (e0.elapsed_time(e1) / 1e3) / 1e12)
    log.mark("sustained gemm 8192^3 bf16", t0, time.time())
    points.append({"kind": "sustained_gemm", "m": n, "n": n, "k": n, "tflops_per_window": windows,
                   "seconds": time.time() - t0})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON file for every point")
    ap.add_argument("--quick", action="store_true", help="small shapes (rehearsals)")
    ap.add_argument("--only", choices=["gemm", "blocks", "ring", "head", "optimizer"], action="append",
                    help="parts to run (default all)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torchtitan_block_probe: no GPU answers (torch.cuda.is_available() is False)", file=sys.stderr)
        return 3
    doc = probe_document(torch, "torchtitan's Llama 3 block and ring attention timed through PyTorch "
                                "(bench/torchtitan_block_probe.py)",
                         "name,driver_version,clocks.max.sm,power.limit,power.max_limit,temperature.gpu")
    log = PowerLog(args.out + ".smi.csv")
    log.start()
    parts = {"gemm": sustained_gemm, "blocks": blocks, "ring": ring, "head": head, "optimizer": optimizer}
    run_parts(doc, args.only or list(parts),
              {name: (lambda points, fn=fn: fn(points, log, args.quick)) for name, fn in parts.items()}, args.out)
    log.stop()
    doc["power"] = log.summary()
    doc["smi_query"] = log.query
    write(doc, args.out)

    print(f"device {doc['device']}, torch {doc['torch']}, {doc['nvidia_smi']}")
    for p in doc["points"]:
        if "error" in p:
            print(f"{p['kind']} {p.get('case', p.get('shape', ''))}: {p['error'][:200]}")
        elif p["kind"] == "sustained_gemm":
            print("sustained gemm 8192^3: " + " ".join(f"{t:.0f}" for t in p["tflops_per_window"]) + " TFLOP/s")
        elif p["kind"] == "block":
            pr = p["profile_ms_per_layer"]
            print(f"block {p['case']:<22} rc {p['recompute']:<4}{' compiled' if p['compiled'] else ' eager   '} fwd {p['forward_ms_per_layer']:7.2f} bwd "
                  f"{p['backward_ms_per_layer']:7.2f} ms/layer; peak {p['peak_above_start_bytes_per_layer'] / 2**30:5.2f} "
                  f"GiB/layer, kept {p.get('activation_bytes_per_layer', 0) / 2**30:5.2f} GiB/layer, reserved peak "
                  f"{p.get('peak_reserved_bytes', 0) / 2**30:5.1f} of allocated {p.get('peak_allocated_bytes', 0) / 2**30:5.1f} GiB; kernels gemm {pr.get('gemm', 0):6.2f} attn {pr.get('attention', 0):6.2f} "
                  f"other {pr.get('other', 0):6.2f} ms/layer")
        elif p["kind"] == "ring_block":
            print(f"ring {p['shape']:<16} q {p['s_q']:>6} kv {p['s_kv']:>6} fwd {p['forward_ms']:7.2f} ms "
                  f"({p['forward_tflops']:5.0f} TFLOP/s) bwd {p['backward_ms']:7.2f} ms ({p['backward_tflops']:5.0f})")
        elif p["kind"] == "head":
            print(f"head mb{p['micro_batch']} s{p['seq']} vocab {p['vocab']}: fwd {p['forward_ms']:.2f} bwd {p['backward_ms']:.2f} ms, "
                  f"peak {p['peak_above_start_bytes'] / 2**30:.2f} GiB = {p['peak_bytes_per_logit']:.2f} B per logit")
        elif p["kind"] == "optimizer":
            print(f"AdamW {p['implementation']:<7} {p['parameters'] / 1e9:.3f} B fp32 parameters in {p['tensors']} tensors: "
                  f"{p['step_ms']:.2f} ms ({p['bytes_per_second_at_28_bytes_per_parameter'] / 1e9:.0f} GB/s at 28 B each)")
        elif p["kind"] == "ring_merge":
            print(f"ring merge {p['local_tokens']} tokens: fwd {p['forward_merge_ms']:.2f} ms, bwd accumulate "
                  f"{p['backward_accumulate_ms']:.2f} ms")
        elif p["kind"] == "ring_rank":
            print(f"ring rank cp {p['cp']} seq {p['seq']:>6}: fwd {p['forward_ms_per_layer']:8.2f} bwd "
                  f"{p['backward_ms_per_layer']:8.2f} ms/layer")
    for ph in doc["power"]:
        if ph.get("samples"):
            print(f"power {ph['phase']:<36} {ph['power_w_mean']:5.0f} W (max {ph['power_w_max']:4.0f}), SM "
                  f"{ph['sm_mhz_mean']:5.0f} MHz (min {ph['sm_mhz_min']:4.0f}), {ph['temperature_c_max']:.0f} C, "
                  f"reasons {','.join(ph['throttle_reasons'])[:60]}")
    print(f"errors: {doc.get('errors', 'none')}; seconds per part: {doc['seconds']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
