#!/usr/bin/env python3
"""Measures, through PyTorch on the lent GPU, the kernel figures tessel's cluster presets take from papers and
datasheets, so each can be checked against this GPU (docs/validation.md, docs/cuda.md "probe" stage):

- device-to-device copy bandwidth (bytes read + written over time; the HBM ceiling);
- bf16 GEMM throughput over a MAMF-style sweep (squares 512-16384, transformer layer shapes at hidden
  2048-12288, short-k and short-m shapes), and fp8 (e4m3, torch._scaled_mm, with and without fast
  accumulation) where the GPU has it: the
  preset's gemm_model (max efficiency, k overhead, tiles) is checked against these;
- attention through scaled_dot_product_attention with the FlashAttention-2 backend and the cuDNN backend
  (what Transformer Engine runs on Hopper), forward and backward, head dims 64/128/256, causal and not,
  sequence 512-16k at 16k tokens and hidden 2048: the setup of FlashAttention-3's Figs. 5-6 (Shah et al.
  2024), whose bars the presets carry; and the same kernels with attention dropout 0.1 (head dim 128, causal,
  2k and 8k), which NeMo's GPT-3 recipes run (attention_dropout 0.1) and the papers' bars leave out;
- contention (FORMULAS.md §6.2, the constant kappa the presets take from user reports): a bf16 GEMM loop on one
  stream beside a persistent copy kernel on another that holds n SMs (8-64, NCCL's channel counts) and streams
  HBM as a collective does. Seconds of GEMM lost per second of copy is what kappa stands for; a one-GPU proxy:
  the SM and HBM share a collective takes, without its link;
- soft-capping (Gemma 2's cap * tanh(x / cap), FORMULAS.md §3 "Soft-capping"): the three eager ops over a bf16
  tensor of logits' size, forward and backward, against the bytes tessel charges them (6e an element forward, 7e
  backward) for the bandwidth they reach; and FlexAttention (torch.compile'd flex_attention) with the tanh as its
  score_mod against the same kernel without, head dim 128 and 256, causal, 8k at 16k tokens (45 s of compiles at
  most): the time the in-kernel tanh adds, which tessel does not cost;
- gradient accumulation under torch.compile (docs/validation.md, KempnerForge's 7B on one GPU): a stack of four
  checkpointed bf16 blocks at hidden 2048 (0.34 B parameters, 512 tokens a micro-batch) run for micro-batches of
  accumulation eager, compiled whole (one graph, as KempnerForge's `torch.compile(model)` without FSDP and nanoGPT's
  compile) and compiled block by block (as torchtitan): each micro-batch's peak over what it started with. A
  whole-model graph's backward is one autograd Function that returns every parameter's gradient at once, so a later
  micro-batch would hold a second full set beside the accumulated one (about 1 in units of the model's gradient
  bytes), the per-block graphs one block's and eager one tensor's beside the activations (well under 1 here);
- attention's batched GEMMs over heads as Megatron's unfused attention runs them (FORMULAS.md §3.1, "Batched over
  heads"): a fused QKV tensor [s, b, heads, 3 d] split into query, key and value views, the scores baddbmm and the
  context bmm over b x heads, forward and backward, fp16 and bf16, at head dimensions 96-160 and 450 (BigScience's
  108 and 450 among them, not multiples of 8): TFLOP/s by head dimension, against which the presets'
  unaligned_per_head_efficiency is read (the A100's is derived from BigScience's runs; a Hopper figure is the plain
  GEMM's until this measures it);
- host dispatch of PyTorch eager (autocast bf16 over fp32 parameters, as Composer runs MPT): GPT blocks at hidden
  768-2048, forward + backward per layer from 64 to 16k tokens; at 64 tokens the time is the host's, the floor
  tessel's kernel sums do not see (docs/validation.md: the small models are predicted too fast).

FLOP conventions: GEMM 2 m n k; attention forward 4 b s^2 h d (halved when causal), backward 2.5 x forward
(the FlashAttention papers' convention). Times are medians of triton.testing.do_bench (CUDA events, L2 flushed
between repeats) on random data, never zeros (METHOD.md). Prints a short table last, writes every point to
--out as JSON.

  python3 bench/gpu_kernels_probe.py --out probe.json [--quick]
"""
import argparse
import sys
import time

import torch
import torch.nn.functional as F

from probe_common import run_probe

try:
    from triton.testing import do_bench as _do_bench

    def bench(fn, grad_to_none=None):
        return _do_bench(fn, warmup=25, rep=100, grad_to_none=grad_to_none, return_mode="median") / 1e3
except ImportError:  # without Triton: CUDA events around repeated calls, the median of 20
    def bench(fn, grad_to_none=None):
        for _ in range(3):
            fn()
        ts = []
        for _ in range(20):
            if grad_to_none:
                for t in grad_to_none:
                    t.grad = None
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) / 1e3)
        return sorted(ts)[len(ts) // 2]


def copy_bandwidth(points):
    for gib in (1, 4):
        n = gib << 30
        src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        t = bench(lambda: dst.copy_(src))
        points.append({"kind": "copy_d2d", "bytes": 2 * n, "seconds": t, "gb_per_s": 2 * n / t / 1e9})
        del src, dst


def gemm_shapes(quick):
    squares = [(s, s, s) for s in ((1024, 4096, 8192) if quick else (512, 1024, 2048, 3072, 4096, 6144, 8192, 12288,
                                                                         16384))]
    layers = []
    for h in ((4096,) if quick else (2048, 4096, 5120, 8192, 12288)):
        m = 8192
        layers += [(m, 3 * h, h), (m, h, h), (m, 4 * h, h), (m, h, 4 * h)]
    # tensor-parallel slices of a hidden-8192 layer (tp 8): short n or short k
    layers += [(8192, 3 * 8192 // 8, 8192), (8192, 8192, 8192 // 8), (8192, 4 * 8192 // 8, 8192),
               (8192, 8192, 4 * 8192 // 8)]
    shortk = [] if quick else [(8192, 8192, k) for k in (128, 256, 512, 1024, 2048)]
    shortm = [] if quick else [(m, 8192, 8192) for m in (256, 512, 1024, 2048)]
    return squares + layers + shortk + shortm


def gemm(points, quick):
    for (m, n, k) in gemm_shapes(quick):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        t = bench(lambda: a @ b)
        points.append({"kind": "gemm", "dtype": "bf16", "m": m, "n": n, "k": k, "seconds": t,
                       "tflops": 2 * m * n * k / t / 1e12})
        del a, b
    if not hasattr(torch, "_scaled_mm") or torch.cuda.get_device_capability() < (8, 9):
        return
    fp8 = [(s, s, s) for s in (2048, 4096, 8192, 16384)] + [(8192, 3 * 8192, 8192), (8192, 4 * 8192, 8192),
                                                            (8192, 8192, 4 * 8192), (8192, 4096, 4096)]
    # the k sweep that sizes the per-tile overhead (FORMULAS.md §3.1), as for bf16
    fp8 += [(8192, 8192, k) for k in (256, 512, 1024, 2048)]
    for (m, n, k) in (fp8[:2] if quick else fp8):
        try:
            a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()   # column-major, as _scaled_mm wants
            one = torch.ones((), device="cuda")
            # Transformer Engine runs the forward GEMM with fast (fp8-precision) accumulation and the backward
            # ones with split accumulators (fp32 promotion): both are measured.
            for fast in (False, True):
                t = bench(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                   use_fast_accum=fast))
                points.append({"kind": "gemm", "dtype": "fp8_fast_accum" if fast else "fp8", "m": m, "n": n, "k": k,
                               "seconds": t, "tflops": 2 * m * n * k / t / 1e12})
            del a, b
        except Exception as e:  # an fp8 GEMM this torch or GPU does not run: said, not fatal
            points.append({"kind": "gemm", "dtype": "fp8", "m": m, "n": n, "k": k, "error": f"{type(e).__name__}: {e}"[:200]})


def sdpa_point(row, backend, causal, dropout_p=0.0):
    """Times SDPA forward and backward on one backend at row's batch, heads, seq and head_dim; fills row, or says
    why the backend refused the shape (not fatal)."""
    from torch.nn.attention import sdpa_kernel
    b, heads, s, d = row["batch"], row["heads"], row["seq"], row["head_dim"]
    try:
        q, k, v = (torch.randn(b, heads, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        flops = 4 * b * s * s * heads * d / (2 if causal else 1)
        with sdpa_kernel(backend):
            fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout_p)
            t = bench(fwd)
            row.update(forward_seconds=t, forward_tflops=flops / t / 1e12)
            o = fwd()
            g = torch.randn_like(o)
            tb = bench(lambda: o.backward(g, retain_graph=True), grad_to_none=[q, k, v])
            row.update(backward_seconds=tb, backward_tflops=2.5 * flops / tb / 1e12)
        del q, k, v, o, g
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {e}"[:200]
    return row


def attention(points, quick):
    from torch.nn.attention import SDPBackend
    backends = {"flash2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    hidden, tokens = 2048, 16384
    seqs = (1024, 4096) if quick else (512, 1024, 2048, 4096, 8192, 16384)
    for name, be in backends.items():
        for d in (64, 128, 256):
            for causal in (True, False):
                for s in seqs:
                    points.append(sdpa_point({"kind": "attention", "backend": name, "head_dim": d, "causal": causal,
                                              "seq": s, "batch": tokens // s, "heads": hidden // d}, be, causal))
    # Attention dropout inside the fused kernel (Philox per score element, regenerated in the backward): the
    # same shapes as rows above, so the report divides the times point by point.
    for name, be in backends.items():
        for s in ((2048,) if quick else (2048, 8192)):
            points.append(sdpa_point({"kind": "attention_dropout", "backend": name, "head_dim": 128, "causal": True,
                                      "seq": s, "batch": tokens // s, "heads": hidden // 128, "dropout_p": 0.1},
                                     be, True, dropout_p=0.1))


def contention(points, quick):
    """A GEMM loop on one stream beside a copy that holds `ctas` SMs on another (a Triton persistent kernel, as
    NCCL's channels are CTAs), alone and together: the GEMM seconds lost per second of copy (kappa's proxy).

    The copy is one launch that loops over its buffer, so it holds its SMs for the whole overlap as a collective
    does. Two orders: the copy launched first (a collective in flight when the compute is issued), and the copy
    launched after the GEMMs on a high-priority stream (a collective issued while compute is queued). A first
    version (2026-11-26, H100) launched the GEMMs first at equal priority and a loop of short copies: the copies
    ran only after the 30 GEMMs, serialised, and measured nothing."""
    import triton
    import triton.language as tl

    @triton.jit
    def persistent_copy(src, dst, n, passes, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        step = tl.num_programs(0) * BLOCK
        for _ in range(passes):
            for start in range(pid * BLOCK, n, step):
                offs = start + tl.arange(0, BLOCK)
                mask = offs < n
                tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)

    def timed(*launches):
        """Each (stream, fn) is issued in this order after one event; the seconds each stream took from it."""
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        ends = []
        for stream, fn in launches:
            stream.wait_event(start)
            with torch.cuda.stream(stream):
                fn()
                e = torch.cuda.Event(enable_timing=True)
                e.record()
            ends.append(e)
        torch.cuda.synchronize()
        return [start.elapsed_time(e) / 1e3 for e in ends]

    def median(fn, reps=5):
        fn()
        return sorted(fn() for _ in range(reps))[reps // 2]

    size = 8192
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    src = torch.randn(64 << 20, device="cuda", dtype=torch.float16)   # 128 MiB, far beyond L2
    dst = torch.empty_like(src)
    gemm_stream, copy_stream = torch.cuda.Stream(), torch.cuda.Stream()
    urgent_stream = torch.cuda.Stream(priority=-1)
    gemms = 10 if quick else 30
    sms = torch.cuda.get_device_properties(0).multi_processor_count

    def gemm_loop():
        for _ in range(gemms):
            a @ b

    t_gemm = median(lambda: timed((gemm_stream, gemm_loop))[0])
    # 2 and 4: the few CTAs of NCCL's kernels on registered buffers (Megatron-core's nccl_ub, 4-5 in a node) and of a
    # send/recv over a communicator that spans nodes (2 channels a network peer), where the presets' curve is a
    # straight line from (0, 0) to its first measured point (FORMULAS.md §6.2).
    for ctas in ((16,) if quick else (2, 4, 8, 16, 32, 64)):
        t_pass = median(lambda: timed((copy_stream, lambda: persistent_copy[(ctas,)](
            src, dst, src.numel(), 1, BLOCK=4096, num_warps=4)))[0])
        passes = max(1, int(0.8 * t_gemm / t_pass))   # the copy ends inside the GEMM loop
        copy = lambda: persistent_copy[(ctas,)](src, dst, src.numel(), passes, BLOCK=4096, num_warps=4)
        t_copy = median(lambda: timed((copy_stream, copy))[0])
        copy_bytes = 2 * src.numel() * src.element_size() * passes
        for order, launches in (("copy first", lambda: timed((copy_stream, copy), (gemm_stream, gemm_loop))[::-1]),
                                ("copy after, high priority",
                                 lambda: timed((gemm_stream, gemm_loop), (urgent_stream, copy)))):
            both = sorted((launches() for _ in range(5)), key=lambda t: t[0])[2]
            overlap = min(both)   # both start at the same event
            points.append({"kind": "contention", "order": order, "ctas": ctas, "sms": sms,
                           "gemm": [size, size, size], "gemms": gemms, "gemm_seconds_alone": t_gemm,
                           "gemm_tflops_alone": 2 * size ** 3 * gemms / t_gemm / 1e12,
                           "copy_bytes": copy_bytes, "copy_seconds_alone": t_copy,
                           "copy_gb_per_s_alone": copy_bytes / t_copy / 1e9,
                           "gemm_seconds_together": both[0], "copy_seconds_together": both[1],
                           "copy_gb_per_s_together": copy_bytes / both[1] / 1e9,
                           "gemm_seconds_lost_per_copy_second": (both[0] - t_gemm) / t_copy,   # kappa's unit
                           "gemm_seconds_lost_per_overlap_second": (both[0] - t_gemm) / overlap,
                           "sm_share_held": ctas / sms})
    del a, b, src, dst

def host_dispatch(points, quick):
    """Host dispatch of PyTorch eager, as MPT's small models run (Composer: autocast bf16 over fp32 parameters): a
    stack of pre-norm GPT blocks (LayerNorm, fused QKV linear, causal SDPA, output linear, LayerNorm, 4x MLP with
    tanh GELU, two residual adds) forward + backward, wall-clock per layer over batch sizes. At 64 tokens the GPU
    work is microseconds, so the time is the host's: the floor below which no eager layer runs, whatever tessel's
    kernels say; the kernels launched per layer (torch.profiler) turn it into microseconds per launch."""
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
            return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))

    layers = 4

    def step(model, x, autocast=True):
        model.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            y = model(x)
        y.float().sum().backward()

    shapes = [(768, 12), (2048, 16)] if quick else [(768, 12), (1536, 12), (2048, 16)]
    for d, heads in shapes:
        model = nn.Sequential(*[Block(d, heads) for _ in range(layers)]).cuda()
        for batch, seq in ((1, 64), (1, 2048), (8, 2048)):
            x = torch.randn(batch, seq, d, device="cuda", requires_grad=True)
            for _ in range(3):
                step(model, x)
            torch.cuda.synchronize()
            reps = 5 if quick else 20
            t0 = time.perf_counter()
            for _ in range(reps):
                step(model, x)
            t_enqueue = time.perf_counter() - t0
            torch.cuda.synchronize()
            t_wall = time.perf_counter() - t0
            row = {"kind": "host_dispatch", "d_model": d, "heads": heads, "batch": batch, "seq": seq,
                   "layers": layers, "precision": "autocast bf16 over fp32 parameters",
                   "ms_per_layer_forward_backward": t_wall / reps / layers * 1e3,
                   "host_enqueue_ms_per_layer": t_enqueue / reps / layers * 1e3}
            if seq == 64:
                try:
                    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                        step(model, x)
                        torch.cuda.synchronize()
                    kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
                    row["kernels_per_step"] = kernels
                    row["us_per_kernel_launch"] = t_wall / reps / kernels * 1e6
                except Exception as e:  # the figure above stands without the count
                    row["profiler_error"] = f"{type(e).__name__}: {e}"[:200]
            points.append(row)
            del x
        # the same floor with bf16 parameters and no autocast: what autocast's casts add to the host's work
        model = model.to(torch.bfloat16)
        x = torch.randn(1, 64, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        for _ in range(3):
            step(model, x, autocast=False)
        torch.cuda.synchronize()
        reps = 5 if quick else 20
        t0 = time.perf_counter()
        for _ in range(reps):
            step(model, x, autocast=False)
        torch.cuda.synchronize()
        points.append({"kind": "host_dispatch", "d_model": d, "heads": heads, "batch": 1, "seq": 64,
                       "layers": layers, "precision": "bf16 parameters, no autocast",
                       "ms_per_layer_forward_backward": (time.perf_counter() - t0) / reps / layers * 1e3,
                       "host_enqueue_ms_per_layer": None})
        del model, x


def compile_grads(points, quick):
    """Peak memory of gradient accumulation eager, compiled whole and compiled block by block (docstring above)."""
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint

    # Few tokens against many parameters (512 tokens, 0.34 B parameters: about 0.67 GB of bf16 gradients against a few
    # hundred MB of activations and loss), so that a second set of gradients is the peak where it is held; four blocks
    # keep the whole graph's compile short inside the probe stage's budget.
    d, heads, ffn, vocab, layers = 2048, 16, 5632, 32000, 4
    batch, seq, micro = 1, 512, 3 if quick else 4

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.gate_up, self.down = nn.Linear(d, 2 * ffn, bias=False), nn.Linear(ffn, d, bias=False)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).view(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d))
            g, u = self.gate_up(self.n2(x)).chunk(2, dim=-1)
            return x + self.down(F.silu(g) * u)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm, self.head = nn.RMSNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, tokens):
            h = self.emb(tokens)
            for blk in self.blocks:
                h = checkpoint(blk, h, use_reentrant=False)
            return self.head(self.norm(h))

    tokens = torch.randint(0, vocab, (micro, batch, seq + 1), device="cuda")
    for mode in ("eager", "compile_whole", "compile_per_block"):
        torch._dynamo.reset()
        model = Model().to(device="cuda", dtype=torch.bfloat16)
        grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        run = model
        if mode == "compile_whole":
            run = torch.compile(model)
        elif mode == "compile_per_block":
            for blk in model.blocks:
                blk.compile()
        row = {"kind": "compile_grads", "mode": mode, "layers": layers, "d_model": d, "tokens": batch * seq,
               "micro_batches": micro, "grad_bytes": grad_bytes}
        for step in range(2):  # the first step compiles; the second is measured
            model.zero_grad(set_to_none=True)
            bases, peaks = [], []
            for m in range(micro):
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                bases.append(torch.cuda.memory_allocated())  # parameters, and from the second on the gradients
                logits = run(tokens[m, :, :-1])
                loss = F.cross_entropy(logits.view(-1, vocab), tokens[m, :, 1:].reshape(-1)) / micro
                del logits
                loss.backward()
                torch.cuda.synchronize()
                peaks.append(torch.cuda.max_memory_allocated())
        row["base_bytes_by_micro_batch"], row["peak_bytes_by_micro_batch"] = bases, peaks
        # what a later micro-batch adds over what it starts with, in the model's gradient bytes: about 1 where the
        # whole graph's gradients are held at once (compile_whole), the activations' and one block's or one tensor's
        # share, well under 1 at these sizes, eager and per block
        row["later_peak_over_base_in_grad_bytes"] = max(p - b for p, b in zip(peaks[1:], bases[1:])) / grad_bytes
        points.append(row)
        del model, run
        torch.cuda.empty_cache()


def heads(points, quick):
    """Megatron's unfused attention GEMMs over heads: aligned and unaligned head dimensions, fp16 and bf16."""
    seq, batch, heads_n = 2048, 4, 16  # BigScience's tp 8 x micro-batch 4 at 128 heads: 64 head-sequences
    for dtype, name in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
        for d in ((108, 128) if quick else (96, 104, 108, 112, 128, 144, 150, 160, 450)):
            row = {"kind": "head_gemm", "dtype": name, "head_dim": d, "seq": seq, "batch": batch, "heads": heads_n}
            try:
                mixed = torch.randn(seq, batch, heads_n, 3 * d, device="cuda", dtype=dtype, requires_grad=True)
                scale = 1.0 / d ** 0.5

                def fwd():
                    q, k, v = mixed.split(d, dim=-1)  # views, each head's d elements 3 d apart
                    q = q.reshape(seq, batch * heads_n, d).transpose(0, 1)
                    k = k.reshape(seq, batch * heads_n, d).transpose(0, 1)
                    v = v.reshape(seq, batch * heads_n, d).transpose(0, 1)
                    out = torch.empty(batch * heads_n, seq, seq, device="cuda", dtype=dtype)
                    scores = torch.baddbmm(out, q, k.transpose(1, 2), beta=0.0, alpha=scale)
                    return torch.bmm(torch.softmax(scores, dim=-1), v)

                t = bench(fwd)
                o = fwd()
                g = torch.randn_like(o)
                tb = bench(lambda: o.backward(g, retain_graph=True), grad_to_none=[mixed])
                # the softmax's time is in both: small beside the GEMMs at 2k keys, and the same at every head dimension
                flops = 2 * 2 * batch * heads_n * seq * seq * d  # scores and context, 2 m n k each
                row.update(forward_seconds=t, backward_seconds=tb, forward_tflops=flops / t / 1e12,
                           backward_tflops=2 * flops / tb / 1e12, aligned=d % 8 == 0)
                del mixed, o, g
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {e}"[:200]
            points.append(row)


def softcap(points, quick):
    """Gemma 2's soft-capping: the eager ops tessel costs, and the in-kernel tanh it does not."""
    cap = 30.0
    for n in ((1 << 28,) if quick else (1 << 26, 1 << 28)):  # 64 Mi and 256 Mi elements (8192 x 32k, x 256k vocab)
        row = {"kind": "softcap_eager", "elements": n}
        try:
            x = torch.randn(n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            fwd = lambda: cap * torch.tanh(x / cap)
            t = bench(fwd)
            y = fwd()
            g = torch.randn_like(y)
            tb = bench(lambda: y.backward(g, retain_graph=True), grad_to_none=[x])
            # tessel's bytes (kernel_cost::eagerSoftcapBytes): 6e forward, 7e backward, e = 2.
            row.update(forward_seconds=t, backward_seconds=tb, forward_gb_per_s=12.0 * n / t / 1e9,
                       backward_gb_per_s=14.0 * n / tb / 1e9)
            del x, y, g
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"[:200]
        points.append(row)
    try:
        from torch.nn.attention.flex_attention import flex_attention, create_block_mask
        flex = torch.compile(flex_attention)
    except Exception as e:
        points.append({"kind": "softcap_flex", "error": f"{type(e).__name__}: {e}"[:200]})
        return
    hidden, tokens, started = 2048, 16384, time.time()
    for d in (128, 256):
        for s_len in (8192,):
            for capped in (False, True):
                row = {"kind": "softcap_flex", "head_dim": d, "seq": s_len, "batch": tokens // s_len,
                       "heads": hidden // d, "causal": True, "softcap": 50.0 if capped else None}
                if time.time() - started > 45:  # compiles take most of it: the probe stage's budget is shared
                    row["error"] = "skipped: 45 s of FlexAttention compiles spent"
                    points.append(row)
                    continue
                try:
                    b, h = row["batch"], row["heads"]
                    q, k, v = (torch.randn(b, h, s_len, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                               for _ in range(3))
                    mask = create_block_mask(lambda b_, h_, qi, ki: qi >= ki, None, None, s_len, s_len)
                    mod = (lambda sc, b_, h_, qi, ki: 50.0 * torch.tanh(sc / 50.0)) if capped else None
                    fwd = lambda: flex(q, k, v, score_mod=mod, block_mask=mask)
                    o = fwd()
                    t = bench(fwd)
                    g = torch.randn_like(o)
                    tb = bench(lambda: o.backward(g, retain_graph=True), grad_to_none=[q, k, v])
                    flops = 4 * b * s_len * s_len * h * d / 2
                    row.update(forward_seconds=t, backward_seconds=tb, forward_tflops=flops / t / 1e12,
                               backward_tflops=2.5 * flops / tb / 1e12)
                    del q, k, v, o, g
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {e}"[:200]
                points.append(row)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON file for every point")
    ap.add_argument("--quick", action="store_true", help="a few points of each kind (rehearsals)")
    ap.add_argument("--only", choices=["copy", "gemm", "attention", "heads", "softcap", "contention", "host", "compile_grads"],
                    action="append",
                    help="parts to run (default all)")
    args = ap.parse_args()
    doc = run_probe(torch, "gpu_kernels_probe", "kernel figures measured through PyTorch (bench/gpu_kernels_probe.py)",
                    args.only or ["copy", "gemm", "attention", "heads", "softcap", "contention", "host", "compile_grads"],
                    {"copy": copy_bandwidth, "gemm": lambda p: gemm(p, args.quick),
                     "attention": lambda p: attention(p, args.quick),
                     "heads": lambda p: heads(p, args.quick),
                     "softcap": lambda p: softcap(p, args.quick),
                     "contention": lambda p: contention(p, args.quick),
                     "host": lambda p: host_dispatch(p, args.quick),
                     "compile_grads": lambda p: compile_grads(p, args.quick)}, args.out)
    if doc is None:
        return 3

    pts = doc["points"]
    print(f"device {doc['device']}, torch {doc['torch']}, {doc['nvidia_smi']}")
    for p in pts:
        if p["kind"] == "copy_d2d":
            print(f"copy d2d {p['bytes'] / 2**30:6.1f} GiB moved   {p['gb_per_s']:8.0f} GB/s")
    for p in pts:
        if p["kind"] == "gemm":
            fig = f"{p['tflops']:7.1f} TFLOP/s" if "tflops" in p else p["error"][:60]
            print(f"gemm {p['dtype']:<5}{p['m']:>6} x {p['n']:>6} x {p['k']:>6}  {fig}")
    for p in pts:
        if p["kind"] == "attention":
            fig = (f"fwd {p['forward_tflops']:6.1f}  bwd {p['backward_tflops']:6.1f} TFLOP/s"
                   if "backward_tflops" in p else p.get("error", "")[:60])
            print(f"attn {p['backend']:<7}d{p['head_dim']:<4}{'causal' if p['causal'] else 'full  '} s{p['seq']:<6} {fig}")
    for p in pts:
        if p["kind"] == "attention_dropout":
            fig = (f"fwd {p['forward_tflops']:6.1f}  bwd {p['backward_tflops']:6.1f} TFLOP/s"
                   if "backward_tflops" in p else p.get("error", "")[:60])
            print(f"attn {p['backend']:<7}d{p['head_dim']:<4}causal s{p['seq']:<6} dropout {p['dropout_p']}  {fig}")
    for p in pts:
        if p["kind"] == "head_gemm":
            fig = (f"fwd {p['forward_tflops']:6.1f}  bwd {p['backward_tflops']:6.1f} TFLOP/s"
                   if "backward_tflops" in p else p.get("error", "")[:60])
            print(f"heads {p['dtype']} d{p['head_dim']:<4}{'aligned  ' if p.get('aligned') else 'unaligned'} {fig}")
    for p in pts:
        if p["kind"] == "softcap_eager" and "backward_seconds" in p:
            print(f"softcap eager {p['elements'] / 2**20:5.0f} Mi  fwd {p['forward_gb_per_s']:6.0f}  "
                  f"bwd {p['backward_gb_per_s']:6.0f} GB/s at tessel's bytes")
        elif p["kind"] == "softcap_flex" and "backward_tflops" in p:
            print(f"flex d{p['head_dim']:<4}causal s{p['seq']:<6} softcap {p['softcap']}  fwd {p['forward_tflops']:6.1f}  "
                  f"bwd {p['backward_tflops']:6.1f} TFLOP/s")
    for p in pts:
        if p["kind"] == "contention":
            print(f"contention ({p.get('order', 'gemms first')}): copy on {p['ctas']:>3} of {p['sms']} SMs at "
                  f"{p['copy_gb_per_s_alone']:6.0f} GB/s alone; "
                  f"GEMM {p['gemm_tflops_alone']:5.0f} TFLOP/s alone, "
                  f"{p['gemm_seconds_lost_per_copy_second']:5.2f} s lost per s of copy")
    for p in pts:
        if p["kind"] == "host_dispatch":
            extra = (f", {p['kernels_per_step']} kernels per step, {p['us_per_kernel_launch']:.1f} us each"
                     if "kernels_per_step" in p else "")
            print(f"host d{p['d_model']:<5} b{p['batch']} s{p['seq']:<5} {p['ms_per_layer_forward_backward']:7.3f} ms per layer "
                  f"(enqueue {p['host_enqueue_ms_per_layer'] or float('nan'):.3f}; {p['precision']}){extra}")
    for p in pts:
        if p["kind"] == "compile_grads":
            print(f"grad accumulation {p['mode']:<18} {p['layers']} layers: peak by micro-batch "
                  f"{', '.join(f'{b / 2**30:.2f}' for b in p['peak_bytes_by_micro_batch'])} GiB; a later one's peak "
                  f"over its start {p['later_peak_over_base_in_grad_bytes']:.2f} x the gradients' "
                  f"{p['grad_bytes'] / 2**30:.2f} GiB")
    print(f"errors: {doc.get('errors', 'none')}; seconds per part: {doc['seconds']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
