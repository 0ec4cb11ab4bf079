#!/usr/bin/env bash
# GPT-2 124M (seq 1024, bf16 with fp32 master weights) on one GPU: tessel's cuda backend (`tessel run
# --backend cuda`, one rank) against plain PyTorch eager and torch.compile (bench/gpt2_pytorch.py),
# same micro-batch, global batch and steps; prints tokens/s and MFU side by side. Needs a GPU, a CUDA build of
# tessel (TESSEL_CUDA=ON) and PyTorch with CUDA.
#
#   bench/gpt2_cuda_vs_pytorch.sh [BUILD_DIR] [--micro-batch 8] [--global-batch 8] [--steps 20] [--warmup 5]
#                                 [--peak-tflops 989] [--cluster h200-single] [--keep RUN_DIR] [--json FILE]
#                                 [--profile-dir DIR]
#
# --keep leaves tessel's run folder (losses, measurements, trace, memory, versions: a `tessel run` folder that
# `tessel compare` and `tessel calibrate` read) in RUN_DIR; --json writes the three sides and the ratios as one
# JSON object; --profile-dir has each PyTorch side profile 3 more steps and write its GPU time per kernel class
# (DIR/eager.json, DIR/compile.json, with the GPU events as Chrome traces beside them).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$root/build/cuda"
if [[ $# -gt 0 && "$1" != --* ]]; then build="$1"; shift; fi
micro=8 global=8 steps=20 warmup=5 peak=989 cluster=h200-single keep="" json_out="" profile_dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --keep) keep="$2"; shift 2 ;;
    --json) json_out="$2"; shift 2 ;;
    --profile-dir) profile_dir="$2"; shift 2 ;;
    --micro-batch) micro="$2"; shift 2 ;;
    --global-batch) global="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --peak-tflops) peak="$2"; shift 2 ;;
    --cluster) cluster="$2"; shift 2 ;;   # the one-GPU cluster the run folder names (h100-single on an H100)
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
tessel="$build/cli/tessel"
[[ -x "$tessel" ]] || { echo "no tessel at $tessel (build with -DTESSEL_CUDA=ON)" >&2; exit 2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
run="${keep:-$tmp/run}"
# The gpt2-124m shape with dropout 0 (the executor does not run dropout), the "mixed" recipe on one GPU.
cat > "$tmp/scenario.json" <<JSON
{
  "schema_version": 1,
  "name": "gpt2-124m-cuda-bench",
  "model": {
    "schema_version": 1, "name": "gpt2-124m-nodrop", "layers": 12, "hidden": 768, "heads": 12, "kv_heads": 12,
    "ffn_hidden": 3072, "vocab": 50257, "seq_len": 1024, "activation": "gelu", "norm": "layernorm",
    "position_embedding": "learned", "tied_embeddings": true, "linear_bias": true, "dropout": 0.0
  },
  "cluster": "$cluster",
  "nodes": 1,
  "plan": {
    "tp": 1, "pp": 1, "dp": 1, "micro_batch": $micro, "global_batch": $global, "zero_stage": 0,
    "recompute": "none", "sequence_parallel": false, "flash_attention": true, "schedule": "1f1b",
    "precision": "mixed", "dtype": "bf16"
  }
}
JSON
"$tessel" run "$tmp/scenario.json" --ranks 1 --backend cuda --steps "$steps" --timeout 600 --out "$run" >&2

# tessel: the median span of a step's actions (steps after the warm-up), from the rank's measurements.
tessel_json="$(python3 - "$run/measurements.jsonl" "$warmup" "$global" "$peak" <<'PY'
import json, statistics, sys
path, warmup, global_batch, peak = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
spans = {}
for line in open(path):
    r = json.loads(line)
    lo, hi = spans.get(r["step"], (float("inf"), 0.0))
    spans[r["step"]] = (min(lo, r["start_seconds"]), max(hi, r["start_seconds"] + r["duration_seconds"]))
steps = sorted(spans)[warmup:]
step_seconds = statistics.median(spans[s][1] - spans[s][0] for s in steps)
seq, layers, hidden, params = 1024, 12, 768, 124439808
n_flops = params - seq * hidden                                  # without the position embedding
flops_per_token = 6 * n_flops + 12 * layers * hidden * seq       # PaLM appendix B, as gpt2_pytorch.py
tps = global_batch * seq / step_seconds
print(json.dumps({"side": "tessel-cuda", "step_seconds": step_seconds, "tokens_per_second": tps,
                  "mfu": tps * flops_per_token / (peak * 1e12)}))
PY
)"
profile() { [[ -z "$profile_dir" ]] || echo "--profile=$profile_dir/$1.json"; }
[[ -z "$profile_dir" ]] || mkdir -p "$profile_dir"
eager_json="$(python3 "$here/gpt2_pytorch.py" --mode eager --micro-batch "$micro" --global-batch "$global" \
  --steps "$steps" --warmup "$warmup" --peak-tflops "$peak" $(profile eager))"
compile_json="$(python3 "$here/gpt2_pytorch.py" --mode compile --micro-batch "$micro" --global-batch "$global" \
  --steps "$steps" --warmup "$warmup" --peak-tflops "$peak" $(profile compile))"

python3 - "$tessel_json" "$eager_json" "$compile_json" "$run/versions.json" "$json_out" <<'PY'
import json, sys
rows = [json.loads(a) for a in sys.argv[1:4]]
try:
    versions = json.load(open(sys.argv[4]))
except OSError:
    versions = {}
print(f"device: {rows[1].get('device', versions.get('device', '?'))}   tessel cuda {versions.get('cuda', '?')}, "
      f"cuBLAS {versions.get('cublas', '?')}, driver {versions.get('driver', '?')}; torch {rows[1].get('torch', '?')}")
print(f"{'side':<18}{'step s':>10}{'tokens/s':>14}{'MFU':>8}")
for r in rows:
    print(f"{r['side']:<18}{r['step_seconds']:>10.4f}{r['tokens_per_second']:>14.0f}{100 * r['mfu']:>7.1f}%")
t, e, c = (r["tokens_per_second"] for r in rows)
print(f"tessel / eager {t / e:.2f}x, tessel / compile {t / c:.2f}x (target: >= 1.00x and >= 0.90x)")
if sys.argv[5]:
    json.dump({"sides": rows, "versions": versions, "tessel_over_eager": t / e, "tessel_over_compile": t / c,
               "targets": {"tessel_over_eager": 1.0, "tessel_over_compile": 0.9, "mfu": 0.4}},
              open(sys.argv[5], "w"), indent=2)
PY
