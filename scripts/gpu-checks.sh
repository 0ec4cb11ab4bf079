#!/usr/bin/env bash
# The GPU checks in one command, for a bare GPU machine (nvcc, CMake, ninja, Python with PyTorch and the NCCL
# and cuBLAS wheels; no Debian packages, no MPI): builds tessel for sm_90 (Release, CUDA on, MPI off, the
# dependency kit of scripts/gpu-kit.sh, or the programs scripts/gpu-prebuild.sh built ahead), runs the owed
# checks 1-6 and 8 of docs/cuda.md, GPT-2 124M against PyTorch eager and torch.compile, the calibration sweep
# (`tessel bench --backend cuda`), `tessel calibrate`, and held-out plans predicted with the calibrated cluster
# and run, and writes a report. Run from anywhere; it works in the repository it belongs to.
#
#   bash scripts/gpu-checks.sh [STAGE...] [--out DIR]
#
#   STAGE   build | check | bench | calibrate | holdout | probe | power | all (default: all = the seven in
#           that order).
#           Every stage builds first (a no-op when the build is there), so any stage runs on a fresh machine.
#           probe: bench/gpu_kernels_probe.py, the presets' paper figures (HBM copy, bf16/fp8 GEMM sweep,
#           FlashAttention-2 and cuDNN attention curves, Gemma 2's soft-capping eager and inside FlexAttention,
#           attention GEMMs over unaligned heads, GEMM/copy contention) measured through PyTorch.
#           power: bench/power_probe.py, each kernel class (bf16/fp8 GEMM, attention, HBM copy, GEMMs at 75/50/25%
#           duty between idle or HBM-copy gaps) held at the power limit: first ~40 ms against sustained rate, power
#           and SM clock.
#   --out   where the report goes (default: $OUT when set, else build/gpu-checks/out): report.md, report.json,
#           gpu-checks.log, artifacts.tar.gz (test output, run folders, bench points) and, after calibrate,
#           <cluster>-calibrated.json. Five files, none deeper than the folder itself.
#
# Settings (environment): TESSEL_KIT (default .gpukit), TESSEL_NCCL_ROOT / TESSEL_CUBLAS_ROOT (default: the
# CUDA toolkit's, else the pip wheels nvidia-nccl-cu13 / nvidia-cublas found by python3), CUDA_ARCHITECTURES
# (90), GPU_CHECKS_BUILD_DIR (build/gpu), GPU_CHECKS_PREBUILT (.gpubin when it holds manifest.json; 0: build
# here), GPT2_MICRO_BATCH / GPT2_GLOBAL_BATCH / GPT2_STEPS (8 / 8 / 20), GPT2_LARGE_MICRO_BATCH (32: a second
# comparison at that micro-batch and global batch; empty: none), GPU_CHECKS_CHECK_SECONDS (300: each GoogleTest
# check), HOLDOUT_STEPS (8), HOLDOUT_CLUSTER (the calibrated cluster the held-out plans are predicted with;
# default: this call's calibrate output), HOLDOUT_ONLY (held-out plan names to run, space-separated; empty: all six),
# GPU_CHECKS_BUDGET_SECONDS (540: a stage that would start later is left for the next call) and
# GPU_CHECKS_LIMIT_SECONDS (585: no step runs past it, so one call fits the lent machine's 10-minute command
# limit; a check with too little time left is reported "not run", and the report is rewritten after every
# check, so a call stopped from outside still leaves one).
#
# Exit status: 0 every check run passed; 1 a check failed; 2 a piece is missing (named on the last lines);
# 3 no GPU answers (the GPU stages need one; the build stage needs none).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
start=$(date +%s)

stages=()
out="${OUT:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    build | check | bench | calibrate | holdout | probe | power) stages+=("$1"); shift ;;
    all) stages+=(build check bench calibrate holdout probe power); shift ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    -h | --help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "gpu-checks: unknown argument '$1' (stages: build check bench calibrate holdout probe power all; --out DIR)" >&2; exit 2 ;;
  esac
done
[ ${#stages[@]} -gt 0 ] || stages=(build check bench calibrate holdout probe power)

build="${GPU_CHECKS_BUILD_DIR:-build/gpu}"
work="$build-checks"   # one result file per check, and the artifacts (build/gpu-checks by default)
out="${out:-$work/out}"
kit="${TESSEL_KIT:-$root/.gpukit}"
budget="${GPU_CHECKS_BUDGET_SECONDS:-540}"
limit="${GPU_CHECKS_LIMIT_SECONDS:-585}"
py="${PYTHON:-python3}"
results="$work/results"
art="$work/artifacts"
mkdir -p "$results" "$art" "$out"
log="$out/gpu-checks.log"
: >"$log"
exec > >(tee -a "$log") 2>&1
report() { "$py" "$root/scripts/gpu_checks_report.py" "$@"; }
elapsed() { echo $(($(date +%s) - start)); }
say() { echo "[gpu-checks $(printf '%4d' "$(elapsed)")s] $*"; }
missing=()
notes=()
# A missing piece: named now, in the report and on the last lines, and the call exits 2.
miss() { say "MISSING: $*"; missing+=("$*"); notes+=("missing: $*"); }

# Seconds a step may run: its own bound ($1), cut to what is left of the call; fails with under 20 s left.
allow() {
  local left=$((limit - $(elapsed)))
  [ $left -ge 20 ] || return 1
  echo $(($1 < left ? $1 : left))
}
# The report as it stands, rewritten after every check.
progress() {
  local args=()
  for n in "${notes[@]}"; do args+=(--note "$n"); done
  report summary --results "$results" --env "$work/env.json" --out "$out" --quiet "${args[@]}" || true
}
# A check left out for want of time in this call.
not_run() { # id, name
  report skip --id "$1" --name "$2" --reason "not run: $(elapsed) s of this call's $limit s were used; run 'bash scripts/gpu-checks.sh check' again" \
    --out "$results/$1.json"
  progress
}

finish() {
  local rc=$1
  say "writing the report to $out"
  # Checkpoints stay behind (GPT-2's are gigabytes); the tool brings back files of up to 16 MiB.
  tar -czf "$out/artifacts.tar.gz" -C "$work" --exclude=checkpoints artifacts results 2>/dev/null || true
  if [ "$(stat -c %s "$out/artifacts.tar.gz" 2>/dev/null || echo 0)" -gt $((15 << 20)) ]; then
    say "artifacts.tar.gz is over 15 MiB: leaving the per-action measurements and traces out of it"
    tar -czf "$out/artifacts.tar.gz" -C "$work" --exclude=checkpoints --exclude=measurements.jsonl \
      --exclude=trace.json --exclude='rank-*' artifacts results 2>/dev/null || true
  fi
  local args=()
  for n in "${notes[@]}"; do args+=(--note "$n"); done
  report summary --results "$results" --env "$work/env.json" --out "$out" "${args[@]}" || rc=$((rc == 0 ? 1 : rc))
  for m in "${missing[@]}"; do echo "gpu-checks: missing: $m"; done
  exit "$rc"
}

# ---- the machine: tools and versions ----
nvcc="$(command -v nvcc || true)"
[ -n "$nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc; }
toolkit=""
[ -n "$nvcc" ] && toolkit="$(cd "$(dirname "$nvcc")/.." && pwd)"
command -v "$py" >/dev/null || { echo "gpu-checks: MISSING: $py (python3 runs the report)"; exit 2; }

# NCCL and cuBLASLt: a folder with include/<header> and lib/<library>, from the environment, the toolkit, or a
# pip wheel under python3's nvidia namespace package (nvidia/nccl, nvidia/cublas or nvidia/cu13 layouts).
wheel_root() { # header, library glob
  "$py" - "$1" "$2" <<'PY' 2>/dev/null
import glob, os, sys
header, lib = sys.argv[1], sys.argv[2]
try:
    import nvidia
except ImportError:
    sys.exit(1)
for base in list(nvidia.__path__):
    for inc in sorted(glob.glob(os.path.join(base, "**", "include", header), recursive=True)):
        d = os.path.dirname(os.path.dirname(inc))
        if glob.glob(os.path.join(d, "lib", lib)):
            print(d)
            sys.exit(0)
sys.exit(1)
PY
}
nccl_root="${TESSEL_NCCL_ROOT:-}"
if [ -z "$nccl_root" ]; then
  if [ -n "$toolkit" ] && [ -f "$toolkit/include/nccl.h" ] && ls "$toolkit"/lib64/libnccl.so* >/dev/null 2>&1; then
    nccl_root="$toolkit"
  else
    nccl_root="$(wheel_root nccl.h 'libnccl.so*' || true)"
  fi
fi
cublas_root="${TESSEL_CUBLAS_ROOT:-}"
if [ -z "$cublas_root" ] && { [ -z "$toolkit" ] || [ ! -f "$toolkit/include/cublasLt.h" ] ||
                               ! ls "$toolkit"/lib64/libcublasLt.so* >/dev/null 2>&1; }; then
  cublas_root="$(wheel_root cublasLt.h 'libcublasLt.so*' || true)"
  [ -n "$cublas_root" ] || cublas_root="none"
fi

# Programs built ahead (scripts/gpu-prebuild.sh, carried as .gpubin): used instead of a build here when they
# are there and GPU_CHECKS_PREBUILT is not 0, so the lease's minutes go to the checks. They hold the absolute
# path of the checkout they were built in (built-in scenarios, the shipped text): that path is made a link to
# this copy when it is absent. NCCL and cuBLASLt come from the folders found above (LD_LIBRARY_PATH).
prebuilt="${GPU_CHECKS_PREBUILT:-$root/.gpubin}"
prebuilt_used=0
if [ "$prebuilt" != 0 ] && [ -f "$prebuilt/manifest.json" ] && [ -z "${GPU_CHECKS_BUILD_DIR:-}" ]; then
  prebuilt_used=1
  build="$prebuilt"
  work="$root/build/gpu-checks"
  results="$work/results"; art="$work/artifacts"
  mkdir -p "$results" "$art"
  src="$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["source_dir"])' "$prebuilt/manifest.json")"
  if [ -n "$src" ] && [ "$src" != "$root" ] && [ ! -e "$src" ]; then
    mkdir -p "$(dirname "$src")" && ln -s "$root" "$src" && echo "[gpu-checks] linked $src -> $root (the prebuilt programs' source path)"
  fi
  for d in "$nccl_root" "$cublas_root"; do
    case "$d" in "" | none) ;; *) export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
  done
fi

"$py" - "$work/env.json" "$nvcc" "$nccl_root" "$cublas_root" "$kit" <<'PY'
import json, platform, subprocess, sys
path, nvcc, nccl_root, cublas_root, kit = sys.argv[1:6]
def run(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception:
        return ""
env = {"host": platform.node(), "python": platform.python_version(), "machine": platform.machine()}
smi = run("nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader")
if smi:
    env["nvidia_smi"] = smi.splitlines()
nv = run(nvcc, "--version") if nvcc else ""
env["nvcc"] = nv.splitlines()[-1] if nv else "not found"
env["cmake"] = (run("cmake", "--version").splitlines() or ["not found"])[0]
env["ninja"] = run("ninja", "--version") or "not found"
env["cxx"] = (run("c++", "--version").splitlines() or ["not found"])[0]
try:
    import torch
    env["torch"] = torch.__version__
    env["torch_cuda"] = torch.version.cuda
except Exception as e:
    env["torch"] = f"not importable ({type(e).__name__})"
for pkg in ("nvidia-nccl-cu13", "nvidia-cublas"):
    v = run(sys.executable, "-m", "pip", "show", pkg)
    env[pkg] = next((l.split(":", 1)[1].strip() for l in v.splitlines() if l.startswith("Version:")), "not installed")
env["nccl_root"] = nccl_root or "not found"
env["cublas_root"] = cublas_root or "the CUDA toolkit's"
try:
    env["kit"] = json.load(open(kit + "/kit.json"))["packages"]
except Exception:
    env["kit"] = "not found"
json.dump(env, open(path, "w"), indent=2)
PY

# GPUs that answer (tessel-worker --devices; any CUDA error counts as none).
gpu_count() {
  "$build/executor/tessel-worker" --devices 2>/dev/null |
    "$py" -c 'import json,sys; print(json.load(sys.stdin)["cuda_devices"])' 2>/dev/null || echo 0
}
# Where a GPU answers, the host tests' one no-GPU test (a DeviceError without a GPU) cannot run: left out by
# name rather than reported as skipped.
host_test_filter() { [ "$(gpu_count)" -ge 1 ] && echo "--gtest_filter=-NoGpu.*"; }

# ---- build ----
# The carried programs: every library resolves, and the host-side CUDA tests pass (check 0).
stage_prebuilt() {
  say "build: prebuilt programs in $build ($("$py" -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["commit"], "made on", m["made_on"], m["nvcc"])' "$build/manifest.json"))"
  notes+=("programs built ahead: $(tr -d '\n' <"$build/manifest.json" | sed 's/  */ /g')")
  local unresolved lib dir
  unresolved() {
    ldd "$build/executor/tessel-worker" "$build/tests/executor/cuda/tessel_cuda_gpu_tests" "$build/cli/tessel" 2>&1 |
      grep -E "not found" | sort -u || true
  }
  unresolved="$(unresolved)"
  # A CUDA library the toolkit here lacks (libcudart.so.13, say) is looked for in python3's nvidia wheels.
  for lib in $(echo "$unresolved" | awk '/=> not found/ {print $1}' | sort -u); do
    dir="$("$py" - "$lib" <<'PY' 2>/dev/null
import glob, os, sys
import nvidia
for base in list(nvidia.__path__):
    for f in sorted(glob.glob(os.path.join(base, "**", sys.argv[1]), recursive=True)):
        print(os.path.dirname(f)); sys.exit(0)
sys.exit(1)
PY
)" && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$dir" && say "build: $lib from $dir"
  done
  unresolved="$(unresolved)"
  if [ -n "$unresolved" ]; then
    echo "$unresolved"
    if [ -f "$kit/kit.json" ]; then
      say "build: the prebuilt programs do not load here (above): building from the sources instead"
      notes+=("prebuilt programs did not load: $unresolved")
      prebuilt_used=0
      build="${GPU_CHECKS_BUILD_DIR:-build/gpu}"
      stage_build
      return $?
    fi
    miss "shared libraries the prebuilt programs need and this machine cannot load (above), and no kit to build with"
    return 2
  fi
  ldd "$build/executor/tessel-worker" | grep -E "nccl|cublas|cudart|libstdc|libc.so" >"$art/ldd.log" 2>&1 || true
  cat "$art/ldd.log"
  "$build/tests/executor/cuda/tessel_cuda_host_tests" $(host_test_filter) --gtest_output="json:$art/host-tests.json" >"$art/host-tests.log" 2>&1
  local rc=$?
  report gtest --id 0 --name "CUDA host-side tests (allocator, launch plans, NCCL bootstrap, staged comm), prebuilt programs" \
    --json "$art/host-tests.json" --log "$art/host-tests.log" --rc $rc --out "$results/0.json"
  say "build: prebuilt programs load; host-side tests rc $rc"
  return 0
}

stage_build() {
  if [ $prebuilt_used = 1 ]; then stage_prebuilt; return $?; fi
  say "build: $build (Release, sm_${CUDA_ARCHITECTURES:-90}, CUDA on, MPI off, kit $kit)"
  [ -n "$nvcc" ] || miss "nvcc (not on PATH, not at /usr/local/cuda/bin/nvcc): the CUDA toolkit's compiler"
  command -v cmake >/dev/null || miss "cmake (pip install cmake, or the image's)"
  command -v ninja >/dev/null || miss "ninja (pip install ninja, or the image's)"
  command -v c++ >/dev/null || command -v g++ >/dev/null || miss "a C++ compiler (c++ or g++) for nvcc's host code"
  [ -f "$kit/kit.json" ] || miss "the dependency kit $kit (make it on a Debian machine with 'bash scripts/gpu-kit.sh' and carry .gpukit with the repository)"
  [ -n "$nccl_root" ] || miss "NCCL: no TESSEL_NCCL_ROOT, no nccl.h in the CUDA toolkit, and python3 finds no nvidia-nccl-cu13 wheel (import nvidia)"
  [ "$cublas_root" != none ] || miss "cuBLASLt: not in the CUDA toolkit and python3 finds no nvidia-cublas wheel (import nvidia)"
  [ ${#missing[@]} -eq 0 ] || return 2
  local flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSEL_CUDA=ON -DTESSEL_MPI=OFF -DTESSEL_GUI=OFF
               -DTESSEL_BENCH=OFF -DTESSEL_TESTS=ON "-DTESSEL_KIT=$kit" "-DTESSEL_NCCL_ROOT=$nccl_root"
               "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES:-90}"
               # CMake 4 refuses CMake files that ask for policies older than 3.5 (the kit's are from
               # CMake 3 and name ranges up to 3.19-3.22); this keeps any such file working.
               -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
  [ -z "$cublas_root" ] || flags+=("-DTESSEL_CUBLAS_ROOT=$cublas_root")
  if ! cmake -S "$root" -B "$build" "${flags[@]}" >"$art/configure.log" 2>&1; then
    tail -n 30 "$art/configure.log"
    miss "a dependency CMake could not find (the lines above; $art/configure.log)"
    return 2
  fi
  local targets=(tessel tessel-worker tessel_cuda_gpu_tests tessel_cuda_host_tests)
  if ! cmake --build "$build" --target "${targets[@]}" -j "$(nproc)" >"$art/build.log" 2>&1; then
    grep -E "error|Error" "$art/build.log" | head -n 20
    say "build: FAILED ($art/build.log)"
    report build --id 0 --name "build (configure, compile, link)" --log "$art/build.log" --out "$results/0.json"
    return 1
  fi
  # Every shared library the programs need must resolve here (the wheels' folders are in their RUNPATH).
  local unresolved
  unresolved="$(ldd "$build/executor/tessel-worker" "$build/tests/executor/cuda/tessel_cuda_gpu_tests" 2>&1 |
                grep "not found" | sort -u || true)"
  if [ -n "$unresolved" ]; then
    echo "$unresolved"
    miss "shared libraries the build links but this machine cannot load (above)"
    return 2
  fi
  "$build/tests/executor/cuda/tessel_cuda_host_tests" $(host_test_filter) --gtest_output="json:$art/host-tests.json" >"$art/host-tests.log" 2>&1
  local rc=$?
  report gtest --id 0 --name "CUDA host-side tests (allocator, launch plans, NCCL bootstrap, staged comm)" \
    --json "$art/host-tests.json" --log "$art/host-tests.log" --rc $rc --out "$results/0.json"
  say "build: done ($(grep -c . "$art/build.log") lines of build log)"
  return 0
}

# ---- GPU discovery: any CUDA error at discovery counts as no GPU (DESIGN.md §6) ----
require_gpu() {
  local devices
  devices="$(gpu_count)"
  if [ "${devices:-0}" -lt 1 ]; then
    say "no GPU answers on this machine (tessel-worker --devices: 0; any CUDA error at discovery counts as none)."
    say "The $1 stage needs the lent GPU machine: run 'bash scripts/gpu-checks.sh $1' there (docs/cuda.md)."
    notes+=("stopped before the $1 stage: no GPU answers on this machine")
    # For rehearsing the stages' bookkeeping where there is no GPU: every check must then come out failed or
    # skipped, never passed.
    [ "${GPU_CHECKS_PAST_THE_GATE:-}" = 1 ] && { say "GPU_CHECKS_PAST_THE_GATE=1: running the $1 stage anyway"; return 0; }
    return 3
  fi
  say "$devices GPU(s) answer"
}

gtest_check() { # id, name, filter
  local t0=$(date +%s) t
  t=$(allow "${GPU_CHECKS_CHECK_SECONDS:-300}") || { not_run "$1" "$2"; return; }
  say "check $1: $2"
  rm -f "$art/check$1.json"
  timeout "$t" "$build/tests/executor/cuda/tessel_cuda_gpu_tests" --gtest_filter="$3" \
    --gtest_output="json:$art/check$1.json" >"$art/check$1.log" 2>&1
  local rc=$?
  report gtest --id "$1" --name "$2" --json "$art/check$1.json" --log "$art/check$1.log" --rc $rc --limit "$t" \
    --seconds $(($(date +%s) - t0)) --out "$results/$1.json"
  progress
}

stage_check() {
  require_gpu check || return $?
  gtest_check 1 "kernels against the CPU float64 backend (fp32 and bf16; attention: cuBLASLt and tiled), master weights" 'Dtypes/Kernels.*:CudaBackend.AttentionImplementationIsSelectable'
  gtest_check 2 "CUDA events per region, provenance" 'CudaBackend.TimedRegionsAndProvenance'
  gtest_check 3 "4 steps of the tiny model against CPU float64" 'GpuTraining.TinyModelMatchesTheCpuFloat64Run'
  gtest_check 4 "peak memory per category within 5% of predictMemory (mixed)" 'GpuTraining.PeakMemoryWithinFivePercentOfTheMixedRecipe'
  gtest_check 5 "mixed-precision resume bitwise equal" 'GpuTraining.MixedPrecisionResumeIsBitwiseEqual'
  gtest_check 6 "multi-rank plans through the staged comm equal one rank" 'Plans/GpuMultiRank.*'

  # 8a: tessel run --backend cuda end to end (one rank: NCCL over the in-process comm; two ranks on one GPU:
  # the staged comm), measured actions in a Chrome trace.
  local t0=$(date +%s) rc1 rc2 t
  local name8a="tessel run --backend cuda end to end, Chrome trace of measured actions"
  t=$(allow 300) || { not_run 8a "$name8a"; not_run 8b "GPT-2 124M against PyTorch eager and torch.compile"; return; }
  say "check 8a: tessel run --backend cuda, 1 rank (NCCL) and pp 2 (staged comm)"
  rm -rf "$art/run-cuda-1" "$art/run-cuda-pp2"
  # The plans are checked against a cluster of as many GPUs as ranks: two ranks share the one GPU here.
  "$py" - "$root/scenarios/clusters/$(single_cluster).json" "$art/two-ranks-one-gpu.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["name"] = c["name"] + "-two-ranks"
c["gpus_per_node"] = 2
c["sources"]["/gpus_per_node"] = "two ranks sharing the one lent GPU through the staged comm (gpu-checks.sh check 8a)"
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
  timeout "$((t / 2))" "$build/cli/tessel" run tiny-cpu --cluster "$(single_cluster)" --nodes 1 --backend cuda --precision mixed \
    --ranks 1 --pp 1 --steps 6 --timeout 120 --out "$art/run-cuda-1" >"$art/check8a.log" 2>&1
  rc1=$?
  timeout "$((t / 2))" "$build/cli/tessel" run tiny-cpu --cluster "$art/two-ranks-one-gpu.json" --nodes 1 --backend cuda \
    --precision mixed --ranks 2 --pp 2 --steps 6 --timeout 120 --out "$art/run-cuda-pp2" >>"$art/check8a.log" 2>&1
  rc2=$?
  report run --id 8a --name "$name8a" \
    --runs "$art/run-cuda-1" "$art/run-cuda-pp2" --rcs $rc1 $rc2 --log "$art/check8a.log" \
    --seconds $(($(date +%s) - t0)) --out "$results/8a.json"
  progress

  # 8b: GPT-2 124M against PyTorch eager and torch.compile, same GPU, same call; 8b-<mb> at a second micro-batch
  # (GPT2_LARGE_MICRO_BATCH, default 32; empty: left out).
  gpt2_check 8b "${GPT2_MICRO_BATCH:-8}" "${GPT2_GLOBAL_BATCH:-8}" "$art/run-gpt2"
  local large="${GPT2_LARGE_MICRO_BATCH-32}"
  [ -z "$large" ] || gpt2_check "8b-$large" "$large" "$large" "$art/run-gpt2-mb$large"
}

gpt2_check() { # id, micro-batch, global batch, run folder
  local t0=$(date +%s) t rc peak
  local name="GPT-2 124M (micro-batch $2, global batch $3) tokens/s and MFU against PyTorch eager and torch.compile"
  t=$(allow 480) || { not_run "$1" "$name"; return; }
  say "check $1: GPT-2 124M at micro-batch $2, tessel against PyTorch eager and torch.compile"
  peak="$(report peak --cluster "$(base_cluster)")"
  rm -rf "$4"
  timeout "$t" bash "$root/bench/gpt2_cuda_vs_pytorch.sh" "$build" --micro-batch "$2" --global-batch "$3" \
    --steps "${GPT2_STEPS:-20}" --peak-tflops "$peak" --cluster "$(single_cluster)" --keep "$4" \
    --json "$art/gpt2-$1.json" --profile-dir "$4-torch-profile" >"$art/check$1.log" 2>&1
  rc=$?
  report gpt2 --id "$1" --name "$name" --json "$art/gpt2-$1.json" --log "$art/check$1.log" --rc $rc --limit "$t" \
    --profile-dir "$4-torch-profile" --seconds $(($(date +%s) - t0)) --out "$results/$1.json"
  progress
}

# The built-in one-GPU cluster of this machine's GPU, which its one-rank runs name.
single_cluster() {
  case "$(base_cluster)" in
    dgx-h100-80g) echo h100-single ;;
    *) echo h200-single ;;
  esac
}

# The built-in cluster the calibration starts from: the GPU's own where tessel has one.
base_cluster() {
  local name
  name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
  [ -n "$name" ] || name="$("$py" -c 'import torch; print(torch.cuda.get_device_name())' 2>/dev/null)"
  case "$name" in
    *H200*) echo h200-single ;;
    *H100*) echo dgx-h100-80g ;;
    *) echo h200-single ;;
  esac
}

bench_ran=0
stage_bench() {
  bench_ran=1
  require_gpu bench || return $?
  local t0=$(date +%s) cluster t rc
  cluster="$(base_cluster)"
  # The sweep the calibration fits: bf16 with fp32 master weights, as training runs.
  t=$(allow 420) || { not_run bench "calibration sweep (tessel bench --backend cuda --dtype mixed)"; return 1; }
  say "bench: tessel bench --backend cuda (GEMMs, attention, memory-bound kernels, copies) at gpt2-124m and gpt3-1.3b shapes"
  rm -rf "$art/bench"
  timeout "$t" "$build/cli/tessel" bench --backend cuda --dtype mixed --ranks 1 --cluster "$cluster" \
    --model gpt2-124m --model gpt3-1.3b --out "$art/bench" >"$art/bench.log" 2>&1
  rc=$?
  report bench --id bench --name "calibration sweep (tessel bench --backend cuda --dtype mixed)" --dir "$art/bench" \
    --log "$art/bench.log" --rc $rc --limit "$t" --seconds $(($(date +%s) - t0)) --out "$results/bench.json"
  progress
  # The same kernels in fp32 (GEMMs without TF32), quick: measured against the fp32 peak, not fitted (a
  # calibration fits one dtype).
  t0=$(date +%s)
  t=$(allow 180) || { not_run bench-fp32 "fp32 sweep (tessel bench --backend cuda --dtype fp32 --quick)"; return $rc; }
  rm -rf "$art/bench-fp32"
  timeout "$t" "$build/cli/tessel" bench --backend cuda --dtype fp32 --quick --ranks 1 --cluster "$cluster" \
    --model gpt2-124m --out "$art/bench-fp32" >"$art/bench-fp32.log" 2>&1
  report bench --id bench-fp32 --name "fp32 sweep (tessel bench --backend cuda --dtype fp32 --quick)" \
    --dir "$art/bench-fp32" --log "$art/bench-fp32.log" --rc $? --limit "$t" --seconds $(($(date +%s) - t0)) \
    --out "$results/bench-fp32.json"
  progress
  return $rc
}

stage_calibrate() {
  if [ ! -s "$art/bench/bench.jsonl" ]; then
    if [ $bench_ran = 1 ]; then
      report calibrate --id calibrate --name "tessel calibrate" --file "$art/none" --log "$art/bench.log" --rc 1 \
        --out "$results/calibrate.json"
      return 1
    fi
    say "calibrate: no sweep in $art/bench (this machine has not run the bench stage): running it first"
    stage_bench || return $?
  fi
  local t0=$(date +%s) cluster runs=() t
  cluster="$(base_cluster)"
  # A second GPT-2 run with other launch steps where a GPU answers: 32 sequences of 256
  # (bench/executor_runs/gpt2-seq256-mb32.json), so that the phase fits see a step whose GEMM attention pays 32
  # launch steps a layer beside the check's 8 (FORMULAS.md §7.2; docs/gpu-report-h200-2026-11-28-tip.md §2:
  # the held-out plans 3.5% -> 3.3% mean, worst 8.5% -> 5.9%). About 20 s; without it the fit takes the others.
  if [ "$(gpu_count)" -ge 1 ] 2>/dev/null && t=$(allow 90); then
    rm -rf "$art/run-gpt2-seq256"
    timeout "$t" "$build/cli/tessel" run "$root/bench/executor_runs/gpt2-seq256-mb32.json" --ranks 1 --backend cuda \
      --steps 8 --timeout 120 --out "$art/run-gpt2-seq256" >"$art/calibrate-runs.log" 2>&1 ||
      say "calibrate: the sequence-256 run failed ($art/calibrate-runs.log); calibrating without it"
    rm -rf "$art/run-gpt2-seq256/checkpoints"
  fi
  for r in "$art/run-gpt2" "$art/run-gpt2-seq256" "$art/run-cuda-1"; do
    [ -s "$r/measurements.jsonl" ] && runs+=("$r")
  done
  say "calibrate: $cluster from the sweep${runs:+ and ${#runs[@]} training run(s)}"
  t=$(allow 120) || { not_run calibrate "tessel calibrate"; return 1; }
  timeout "$t" "$build/cli/tessel" calibrate "$art/bench" "${runs[@]}" --cluster "$cluster" \
    -o "$out/$cluster-calibrated.json" --force >"$art/calibrate.log" 2>&1
  local rc=$?
  cat "$art/calibrate.log"
  report calibrate --id calibrate --name "tessel calibrate -> $cluster-calibrated.json" \
    --file "$out/$cluster-calibrated.json" --log "$art/calibrate.log" --rc $rc --seconds $(($(date +%s) - t0)) \
    --out "$results/calibrate.json"
  progress
}

# Plans the calibration never saw (other sequence length and batch, recompute, hidden size and head size, a
# Llama-style model with GQA, fp32): each run on the GPU, then `tessel compare` against the calibrated cluster
# (a one-GPU copy of it). Target: step time and the allocated peak within 5% of measured.
stage_holdout() {
  require_gpu holdout || return $?
  local cluster cal dir t0=$(date +%s) t
  cluster="$(base_cluster)"
  cal="${HOLDOUT_CLUSTER:-$out/$cluster-calibrated.json}"
  dir="$art/holdout"
  if [ ! -s "$cal" ]; then
    report holdout --id holdout --name "held-out plans against the calibrated cluster" --dir "$dir" \
      --log "$art/none" --out "$results/holdout.json"
    return 1
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  "$py" - "$cal" "$dir" <<'PY'
import json, os, sys
cal, d = sys.argv[1], sys.argv[2]
c = json.load(open(cal))
c["name"] = c["name"] + "-one-gpu"
c["gpus_per_node"] = 1
c.setdefault("sources", {})["/gpus_per_node"] = "one GPU: the held-out plans of gpu-checks.sh run on one"
json.dump(c, open(os.path.join(d, "cluster.json"), "w"), indent=2)
gpt2 = {"schema_version": 1, "name": "gpt2-124m-nodrop", "layers": 12, "hidden": 768, "heads": 12, "kv_heads": 12,
        "ffn_hidden": 3072, "vocab": 50257, "seq_len": 1024, "activation": "gelu", "norm": "layernorm",
        "position_embedding": "learned", "tied_embeddings": True, "linear_bias": True, "dropout": 0.0}
def model(**kw):
    m = dict(gpt2); m.update(kw); return m
plans = {
    "gpt2-seq512-mb16": (model(seq_len=512), {"micro_batch": 16, "global_batch": 32}),
    "gpt2-recompute-full": (model(), {"micro_batch": 8, "global_batch": 8, "recompute": "full"}),
    # Megatron-LM's block method: the first 6 of the 12 layers recomputed, the rest kept whole (added 2026-11-26).
    "gpt2-recompute-layers6": (model(), {"micro_batch": 8, "global_batch": 8, "recompute": "full",
                                         "recompute_layers": 6}),
    "h1536-d128-mb4": (model(name="gpt-h1536", layers=8, hidden=1536, heads=12, kv_heads=12, ffn_hidden=6144),
                       {"micro_batch": 4, "global_batch": 8}),
    "llama-gqa-seq2048": (model(name="llama-style-0.3b", layers=12, hidden=1024, heads=16, kv_heads=4,
                                ffn_hidden=2816, vocab=32000, seq_len=2048, activation="swiglu", norm="rmsnorm",
                                position_embedding="rope", tied_embeddings=False, linear_bias=False),
                          {"micro_batch": 2, "global_batch": 4}),
    "gpt2-fp32-mb4": (model(), {"micro_batch": 4, "global_batch": 4, "precision": "fp32", "dtype": "fp32"}),
}
only = os.environ.get("HOLDOUT_ONLY", "").split()
for name, (m, p) in plans.items():
    if only and name not in only:
        continue
    plan = {"tp": 1, "pp": 1, "dp": 1, "zero_stage": 0, "recompute": "none", "sequence_parallel": False,
            "flash_attention": True, "schedule": "1f1b", "precision": "mixed", "dtype": "bf16"}
    plan.update(p)
    json.dump({"schema_version": 1, "name": name, "model": m, "cluster": os.path.join(d, "cluster.json"),
               "nodes": 1, "plan": plan}, open(os.path.join(d, name + ".json"), "w"), indent=2)
PY
  say "holdout: $(ls "$dir"/*.json | grep -vc cluster.json) plans against $cal"
  for scen in "$dir"/*.json; do
    local name
    name="$(basename "$scen" .json)"
    [ "$name" = cluster ] && continue
    t=$(allow 120) || break
    { timeout "$t" "$build/cli/tessel" run "$scen" --ranks 1 --backend cuda --steps "${HOLDOUT_STEPS:-8}" --timeout 120 \
        --out "$dir/run-$name" &&
      "$build/cli/tessel" compare "$scen" "$dir/run-$name" --json -o "$dir/run-$name/compare.json" &&
      "$build/cli/tessel" compare "$scen" "$dir/run-$name"; } >>"$art/holdout.log" 2>&1 ||
      echo "holdout $name: exited $?" >>"$art/holdout.log"
  done
  report holdout --id holdout --name "held-out plans (not in the fit) against the calibrated cluster, within 5%" \
    --dir "$dir" --log "$art/holdout.log" --seconds $(($(date +%s) - t0)) --out "$results/holdout.json"
  progress
}

# The figures the cluster presets take from papers and datasheets, measured here through PyTorch
# (bench/gpu_kernels_probe.py): HBM copy bandwidth, bf16 and fp8 GEMMs over a MAMF-style sweep, and attention
# (FlashAttention-2 and cuDNN through scaled_dot_product_attention) at the FlashAttention-3 paper's shapes, the
# unfused attention's GEMMs over aligned and unaligned heads, and the GEMM time a copy on n SMs takes away
# (contention, kappa's proxy).
stage_probe() {
  python_probe probe "kernel figures through PyTorch (HBM copy, bf16/fp8 GEMM sweep, FlashAttention-2 and cuDNN attention, soft-capping)" \
    240 gpu_kernels_probe.py
}

# What the GPU sustains at its power limit, kernel class by kernel class (bench/power_probe.py): the sustained
# rate against the first ~40 ms, power and SM clock, for the sustained-power term (docs/validation.md).
stage_power() {
  # Held 5 s, as the calls behind the shipped curve were (FORMULAS.md §3.3): at 3 s the second half the rate is read
  # over comes before the power controller settles (docs/gpu-report-h200-2026-11-28-tip.md §3).
  python_probe power "kernel classes held at the power limit (bf16/fp8/fp32 GEMM, attention, HBM copy, GEMM duty cycles, the limiter's window)" \
    180 power_probe.py --seconds 5
}

# One PyTorch probe as a stage: bounded by what the budget allows of SECONDS, the tail of its log shown, its JSON
# read by the report's subcommand of the same name.
python_probe() { # id, name, seconds wanted, bench/ script, its arguments...
  local id=$1 name=$2 want=$3 script=$4
  shift 4
  require_gpu "$id" || return $?
  local t0=$(date +%s) t rc
  t=$(allow "$want") || { not_run "$id" "$name"; return 1; }
  say "$id: $name"
  rm -f "$art/$id.json"
  timeout "$t" "$py" "$root/bench/$script" "$@" --out "$art/$id.json" >"$art/$id.log" 2>&1
  rc=$?
  tail -n 12 "$art/$id.log"
  report "$id" --id "$id" --name "$name" --json "$art/$id.json" --log "$art/$id.log" --rc $rc --limit "$t" \
    --seconds $(($(date +%s) - t0)) --out "$results/$id.json"
  progress
}

status=0
# A stage's earlier results go before it runs, so the report never shows a stale verdict as this call's.
declare -A stage_results=([build]="0" [check]="1 2 3 4 5 6 8a 8b 8b-*" [bench]="bench bench-fp32" [calibrate]="calibrate"
                          [holdout]="holdout" [probe]="probe" [power]="power")
for s in "${stages[@]}"; do
  if [ "$(elapsed)" -gt "$budget" ]; then
    say "stopping before '$s': $(elapsed) s of the ${budget} s budget used; run 'bash scripts/gpu-checks.sh $s' next"
    break
  fi
  # Every stage after build needs the build: on a fresh machine it is made here first.
  for id in ${stage_results[$s]}; do rm -f "$results"/$id.json; done
  if [ "$s" != build ] && { [ $prebuilt_used = 1 ] && [ ! -f "$results/0.json" ] ||
                            [ ! -x "$build/cli/tessel" -o ! -x "$build/tests/executor/cuda/tessel_cuda_gpu_tests" ]; }; then
    stage_build || { rc=$?; status=$rc; break; }
  fi
  "stage_$s"
  rc=$?
  if [ $rc -ne 0 ]; then
    status=$rc
    # A failed build, a missing piece or no GPU: nothing after this stage can run either.
    { [ $rc -ge 2 ] || [ "$s" = build ]; } && break
  fi
done
# A failed check makes the call fail too (the report says which).
if [ $status -eq 0 ] && ! report verdicts --results "$results"; then status=1; fi
finish $status
