#!/usr/bin/env python3
"""Measures, on one lent GPU, what one rank of context-parallel ring attention computes, against the causal
attention it stands for: the term tessel's cost model had as one causal kernel over s/cp queries and s keys.

PyTorch's context parallelism (torch.distributed.tensor.experimental._attention, what torchtitan runs) with the
round-robin load balance: the sequence is cut into 2 cp chunks and rank r holds chunks r and 2cp-1-r. Step 0 is a
causal kernel over the rank's own s/cp queries and keys; each later step one non-causal kernel, over all s/cp
queries against the first half of the arriving keys (steps i <= r), or over the second half of the queries
against all the arriving keys (i > r): s/cp x s/(2cp) products either way. Around every kernel the merge runs in
fp32 (out - sigmoid(lse_b - lse) (out - out_b), lse - logsigmoid(lse - lse_b), the partial steps through chunk +
cat), the send buffer is a cat of K and V; the backward accumulates dq, dk, dv in fp32 and concatenates dk, dv for
the next rank every step. This script runs exactly those local operations for rank 0 and rank cp-1 (the two ends
of the step pattern) and leaves out only the transfers, so the time is the rank's compute.

Per configuration it reports, forward and backward: the rank's ring time; the same kernels without the merges and
accumulations (kernels only); and the ideal, one causal kernel over the whole sequence divided by cp (measured
with fewer heads where the sequence is long, then scaled by heads: the kernel's rate does not move with the head
count once the GPU is full, s/128 query tiles per head). A small case first checks that the emulated ring gives
the causal attention's output and dq (relative error, bf16 bounds from METHOD.md).

FLOPs: forward 4 b h sq sk d (halved when causal), backward 2.5 x forward. Times: CUDA events, warm-up first,
median of --reps, random data. Prints a short table last, writes every point to --out.

  python3 bench/ring_attention_probe.py --out ring.json [--quick]
"""
import argparse
import sys

import torch
import torch.nn.functional as F

from probe_common import run_probe

aten = torch.ops.aten


def timed(fn, reps):
    """Median seconds of fn() over reps after one warm-up, by CUDA events."""
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return sorted(ts)[len(ts) // 2]


def flash_fwd(q, k, v, causal):
    out, lse, cq, ck, mq, mk, seed, off, _ = aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)
    return out, lse, (cq, ck, mq, mk, seed, off)


def flash_bwd(dout, q, k, v, out, lse, rest, causal):
    cq, ck, mq, mk, seed, off = rest
    dq, dk, dv = aten._scaled_dot_product_flash_attention_backward(dout, q, k, v, out, lse, cq, ck, mq, mk, 0.0,
                                                                   causal, seed, off)
    return dq, dk, dv


def partial_update(original, new, idx, add):
    chunks = list(original.chunk(2, dim=2))
    if add:
        chunks[idx] += new
    else:
        chunks[idx] = new
    return torch.cat(chunks, dim=2)


def step_inputs(r, i, cp, q, k, v):
    """(q, k, v, causal, partial) of rank r's step i, as _templated_ring_attention picks them."""
    if i == 0:
        return q, k, v, True, False
    if i <= r:
        return q, k.chunk(2, dim=2)[0], v.chunk(2, dim=2)[0], False, False
    return q.chunk(2, dim=2)[1], k, v, False, True


class Rank:
    """Rank r of cp: its local q (chunks r and 2cp-1-r), and the K, V it meets at each step (step i: source
    rank (r - i) mod cp), as tensors of shape (b, h, s/cp, d)."""

    def __init__(self, r, cp, q, kvs):
        self.r, self.cp, self.q, self.kvs = r, cp, q, kvs

    def kv(self, i):
        return self.kvs[(self.r - i) % self.cp]

    def forward(self, merges=True):
        r, cp, query = self.r, self.cp, self.q
        out = lse = None
        saved = []
        for i in range(cp):
            key, value = self.kv(i)
            if merges and i < cp - 1:
                torch.cat([key.flatten(), value.flatten()])  # the send buffer
            q, k, v, causal, partial = step_inputs(r, i, cp, query, key, value)
            o_b, l_b, rest = flash_fwd(q, k, v, causal)
            saved.append((q, k, v, causal, partial, rest))
            if not merges:
                continue
            o_b, l_b = o_b.float(), l_b.float().unsqueeze(-1)
            if out is None:
                out, lse = o_b, l_b
                continue
            lo = lse.chunk(2, dim=2)[1] if partial else lse
            oo = out.chunk(2, dim=2)[1] if partial else out
            oo = oo - torch.sigmoid(l_b - lo) * (oo - o_b)
            lo = lo - F.logsigmoid(lo - l_b)
            if partial:
                lse = partial_update(lse, lo, 1, False)
                out = partial_update(out, oo, 1, False)
            else:
                out, lse = oo, lo
        if not merges:
            return None, None, saved
        return out.to(query.dtype), lse.squeeze(-1), saved

    def backward(self, dout, out, lse, received, merges=True):
        """received: fp32 buffers standing for the dk, dv that arrive from rank r-1 at each step."""
        r, cp, query = self.r, self.cp, self.q
        key0, value0 = self.kv(0)
        gq = torch.zeros_like(query, dtype=torch.float32)
        gk = torch.zeros_like(key0, dtype=torch.float32)
        gv = torch.zeros_like(value0, dtype=torch.float32)
        for i in range(cp):
            key, value = self.kv(i)
            if merges and i != cp - 1:
                torch.cat([key.flatten(), value.flatten()])
            q, k, v, causal, partial = step_inputs(r, i, cp, query, key, value)
            if i == 0 or not partial:
                o_, d_, l_ = out, dout, lse
            else:
                o_, d_, l_ = out.chunk(2, dim=2)[1], dout.chunk(2, dim=2)[1], lse.chunk(2, dim=2)[1].contiguous()
            dq_, dk_, dv_ = flash_bwd(d_, q, k, v, o_, l_, self.rest[i], causal)
            if not merges:
                continue
            if i == 0:
                gk += dk_
                gv += dv_
            else:
                gk = received[: gk.numel()].view(gk.shape)
                gv = received[gk.numel():].view(gv.shape)
                if i <= r:
                    gk = partial_update(gk, dk_, 0, True)
                    gv = partial_update(gv, dv_, 0, True)
                else:
                    gk += dk_
                    gv += dv_
            torch.cat([gk.flatten(), gv.flatten()])  # the send buffer of dk, dv
            if i <= r:
                gq += dq_
            else:
                gq = partial_update(gq, dq_, 1, True)
        if not merges:
            return None
        return gq.to(query.dtype)


def make_rank(r, cp, b, h, s, d, full=None):
    """Rank r's tensors: slices of `full` (q, k, v over the whole sequence) when given, else random."""
    n = s // (2 * cp)
    def local(t, j):
        return torch.cat([t[:, :, j * n:(j + 1) * n], t[:, :, (2 * cp - 1 - j) * n:(2 * cp - j) * n]], dim=2)
    if full is None:
        rnd = lambda: torch.randn(b, h, 2 * n, d, device="cuda", dtype=torch.bfloat16)
        q = rnd()
        kvs = [(rnd(), rnd()) for _ in range(cp)]
    else:
        fq, fk, fv = full
        q = local(fq, r)
        kvs = [(local(fk, j).contiguous(), local(fv, j).contiguous()) for j in range(cp)]
    return Rank(r, cp, q, kvs)


def forward_saving(rank):
    out, lse, saved = rank.forward(merges=True)
    # the backward needs the forward's rng state per step (unused without dropout) and the merged out/lse
    rank.rest = [sv[5] for sv in saved]
    return out, lse


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def check(points, quick):
    b, h, d = 1, 4, 128
    for cp in (2, 4):
        s = 2048 * cp
        fq, fk, fv = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        ref = F.scaled_dot_product_attention(fq, fk, fv, is_causal=True)
        dref = torch.randn_like(ref)
        ref.backward(dref)
        n = s // (2 * cp)
        for r in (0, cp - 1):
            rank = make_rank(r, cp, b, h, s, d, full=(fq.detach(), fk.detach(), fv.detach()))
            out, lse = forward_saving(rank)
            rows = list(range(r * n, (r + 1) * n)) + list(range((2 * cp - 1 - r) * n, (2 * cp - r) * n))
            idx = torch.tensor(rows, device="cuda")
            dout = dref.index_select(2, idx).contiguous()
            # dq from the ring; dk, dv leave the rank, so dq is what one rank can check alone
            received = torch.zeros(2 * rank.kv(0)[0].numel(), device="cuda", dtype=torch.float32)
            gq = rank.backward(dout, out, lse, received)
            points.append({"kind": "ring_check", "cp": cp, "rank": r, "seq": s, "heads": h, "head_dim": d,
                           "out_rel_err": rel(out, ref.detach().index_select(2, idx)),
                           "dq_rel_err": rel(gq, fq.grad.index_select(2, idx))})


def configs(quick):
    # (name, b, heads after repeat_kv, seq, cp); d = 128
    if quick:
        return [("quick-8b", 1, 32, 16384, 2), ("quick-8b", 1, 32, 32768, 4)]
    rows = []
    for name, h in (("llama3-8b tp1", 32), ("llama3-405b tp8", 16)):
        for s, cp in ((32768, 1), (65536, 2), (131072, 4), (262144, 8)):
            rows.append((name, 1, h, s, cp))
    rows += [("llama3-8b tp1", 1, 32, 8192, 2), ("llama3-70b/405b tp4/8", 1, 16, 8192, 2),
             ("llama3-8b tp1", 1, 32, 16384, 4), ("llama3-8b tp1", 1, 32, 32768, 8)]
    return rows


def ring(points, quick, reps):
    d = 128
    for name, b, h, s, cp in configs(quick):
        row = {"kind": "ring", "model": name, "batch": b, "heads": h, "head_dim": d, "seq": s, "cp": cp}
        try:
            causal_fwd_flops = 4 * b * h * s * s * d / 2 / cp  # one rank's share
            row["rank_forward_flops"] = causal_fwd_flops
            for r in sorted({0, cp - 1}):
                rank = make_rank(r, cp, b, h, s, d)
                out, lse = forward_saving(rank)
                dout = torch.randn_like(out)
                received = torch.randn(2 * rank.kv(0)[0].numel(), device="cuda", dtype=torch.float32)
                tag = f"rank{'0' if r == 0 else '_last'}"
                row[f"{tag}_forward_s"] = timed(lambda: rank.forward(True), reps)
                row[f"{tag}_forward_kernels_s"] = timed(lambda: rank.forward(False), reps)
                row[f"{tag}_backward_s"] = timed(lambda: rank.backward(dout, out, lse, received), reps)
                row[f"{tag}_backward_kernels_s"] = timed(lambda: rank.backward(dout, out, lse, received, False), reps)
                del rank, out, lse, dout, received
                torch.cuda.empty_cache()
            # the ideal: one causal kernel over the whole sequence, / cp; heads cut where it is long, then scaled
            hh = max(1, min(h, int(h * (32768 / s) ** 2)))
            q, k, v = (torch.randn(b, hh, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            o, l_, rest = flash_fwd(q, k, v, True)
            dout = torch.randn_like(o)
            tf = timed(lambda: flash_fwd(q, k, v, True), reps)
            tb = timed(lambda: flash_bwd(dout, q, k, v, o, l_, rest, True), reps)
            row.update(ideal_heads_measured=hh, ideal_forward_s=tf * h / hh / cp, ideal_backward_s=tb * h / hh / cp)
            del q, k, v, o, l_, dout
            torch.cuda.empty_cache()
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        points.append(row)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    doc = run_probe(torch, "ring_attention_probe",
                    "one rank of ring attention against its causal share (bench/ring_attention_probe.py)",
                    ["check", "ring"], {"check": lambda p: check(p, args.quick),
                                        "ring": lambda p: ring(p, args.quick, args.reps)}, args.out)
    if doc is None:
        return 3
    print(f"device {doc['device']}, torch {doc['torch']}, {doc['nvidia_smi']}")
    for p in doc["points"]:
        if p["kind"] == "ring_check":
            print(f"check cp{p['cp']} rank {p['rank']}: out rel err {p['out_rel_err']:.2e}, dq {p['dq_rel_err']:.2e}")
    print(f"{'model':<22}{'seq':>7}{'cp':>3}  {'fwd ring/ideal':>15}{'kern/ideal':>11}  {'bwd ring/ideal':>15}"
          f"{'kern/ideal':>11}   ideal fwd+bwd ms")
    for p in doc["points"]:
        if p["kind"] != "ring":
            continue
        if "error" in p:
            print(f"{p['model']:<22}{p['seq']:>7}{p['cp']:>3}  {p['error'][:80]}")
            continue
        worst = lambda key: max(p[k] for k in p if k.endswith(key) and k.startswith("rank"))
        f, fk = worst("_forward_s") / p["ideal_forward_s"], worst("_forward_kernels_s") / p["ideal_forward_s"]
        bw, bk = worst("_backward_s") / p["ideal_backward_s"], worst("_backward_kernels_s") / p["ideal_backward_s"]
        print(f"{p['model']:<22}{p['seq']:>7}{p['cp']:>3}  {f:15.3f}{fk:11.3f}  {bw:15.3f}{bk:11.3f}   "
              f"{(p['ideal_forward_s'] + p['ideal_backward_s']) * 1e3:8.1f}")
    print(f"errors: {doc.get('errors', 'none')}; seconds per part: {doc['seconds']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
