#!/usr/bin/env bash
# Rehearses scripts/gpu-checks.sh on a Debian build machine as the lent GPU machine will see it: in a private
# mount namespace (unshare, as root) the Debian development packages the build uses (nlohmann-json, Eigen,
# CLI11, GoogleTest, Google Benchmark, OpenMPI, Qt 6) are hidden, and so are the CUDA toolkit's NCCL and
# cuBLAS, which come instead from a folder laid out as the pip wheels lay them out (nvidia/nccl,
# nvidia/cu13) on python3's path. Then, in that namespace: the build without the kit (it must fail, naming
# what is missing), and `gpu-checks.sh build check` with it (the build must succeed; without a GPU the check
# stage must stop saying so). Nothing outside the namespace changes.
#
#   sudo bash scripts/gpu-rehearsal.sh [OUT_DIR]      (default /tmp/tessel-gpu-rehearsal)
#
# OUT_DIR is emptied first; TESSEL_REHEARSAL_KEEP_BUILD=1 keeps its build/ (an unchanged tree then skips the
# compile).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rehearsal="${1:-/tmp/tessel-gpu-rehearsal}"
[ "$(id -u)" -eq 0 ] || { echo "gpu-rehearsal: needs root (unshare --mount)" >&2; exit 2; }
[ -f "$root/.gpukit/kit.json" ] || { echo "gpu-rehearsal: make the kit first: bash scripts/gpu-kit.sh" >&2; exit 2; }
cuda="$(readlink -f /usr/local/cuda)"
[ -x "$cuda/bin/nvcc" ] || { echo "gpu-rehearsal: needs the CUDA toolkit at /usr/local/cuda" >&2; exit 2; }

if [ "${TESSEL_REHEARSAL_INSIDE:-}" != 1 ]; then
  mkdir -p "$rehearsal"
  for e in "$rehearsal"/* "$rehearsal"/build-checks; do
    [ -e "$e" ] || continue
    { [ "${TESSEL_REHEARSAL_KEEP_BUILD:-}" = 1 ] && [ "$(basename "$e")" = build ]; } && continue
    rm -rf "$e"
  done
  exec unshare --mount --propagation private env TESSEL_REHEARSAL_INSIDE=1 bash "$0" "$rehearsal"
fi

say() { echo "+ $*"; }
empty_dir="$rehearsal/empty-dir"
empty_file="$rehearsal/empty-file"
mkdir -p "$empty_dir"
: >"$empty_file"
chmod 644 "$empty_file"
hide() { # path: an empty folder or a non-executable empty file in its place
  local p
  for p in "$@"; do
    if [ -d "$p" ] && [ ! -L "$p" ]; then mount --bind "$empty_dir" "$p"
    elif [ -e "$p" ]; then mount --bind "$empty_file" "$p"
    fi
  done
}

# 1. The Debian development packages: every file they install outside /usr/share/doc (folders they own
#    wholly are hidden as a whole; files in shared folders one by one).
multiarch="/usr/lib/$(gcc -print-multiarch)"
hide /usr/include/nlohmann /usr/include/eigen3 /usr/include/CLI /usr/include/gtest /usr/include/gmock \
     /usr/include/benchmark /usr/src/googletest /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 \
     /usr/share/eigen3 "$multiarch/cmake/GTest" "$multiarch/cmake/benchmark" "$multiarch/openmpi" \
     /usr/include/"$(gcc -print-multiarch)"/qt6 /usr/lib/"$(gcc -print-multiarch)"/cmake/Qt6*
for pkg in nlohmann-json3-dev libeigen3-dev libcli11-dev libgtest-dev libgmock-dev googletest libbenchmark-dev \
           libopenmpi-dev openmpi-bin qt6-base-dev; do
  dpkg -L "$pkg" 2>/dev/null | while IFS= read -r f; do
    case "$f" in /usr/share/doc/*) continue ;; esac
    { [ -f "$f" ] && [ -s "$f" ]; } && hide "$f" || true
  done
done

# 2. NCCL and cuBLAS out of the toolkit (the GPU machine's toolkit may lack them), into wheel-shaped folders.
site="$rehearsal/site"
mkdir -p "$site/nvidia/nccl/include" "$site/nvidia/nccl/lib" "$site/nvidia/cu13/include" "$site/nvidia/cu13/lib"
cp -a "$cuda"/include/nccl*.h "$site/nvidia/nccl/include/"
cp -a "$cuda"/include/nccl_device "$site/nvidia/nccl/include/" 2>/dev/null || true
cp -a "$(readlink -f "$cuda/lib/libnccl.so.2")" "$site/nvidia/nccl/lib/libnccl.so.2"
cp -a "$cuda"/include/cublas*.h "$site/nvidia/cu13/include/"
cp -a "$(readlink -f "$cuda/lib/libcublasLt.so.13")" "$site/nvidia/cu13/lib/libcublasLt.so.13"
cp -a "$(readlink -f "$cuda/lib/libcublas.so.13")" "$site/nvidia/cu13/lib/libcublas.so.13"
# The toolkit's include folder without them, and its lib folder as links to everything else.
mkdir -p "$rehearsal/cuda-include" "$rehearsal/cuda-lib-real" "$rehearsal/cuda-lib"
cp -a "$cuda/include/." "$rehearsal/cuda-include/"
rm -rf "$rehearsal"/cuda-include/nccl* "$rehearsal"/cuda-include/cublas*
mount --bind "$cuda/lib" "$rehearsal/cuda-lib-real"
for f in "$rehearsal"/cuda-lib-real/*; do
  case "$(basename "$f")" in libnccl* | libcublas*) continue ;; esac
  ln -s "$f" "$rehearsal/cuda-lib/$(basename "$f")"
done
mount --bind "$rehearsal/cuda-include" "$cuda/include"
mount --bind "$rehearsal/cuda-lib" "$cuda/lib"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

# 3. What is left, for the transcript.
say "hidden: the development packages' files (count of non-empty files still readable, per package)"
for pkg in nlohmann-json3-dev libeigen3-dev libcli11-dev googletest libgtest-dev libopenmpi-dev openmpi-bin qt6-base-dev; do
  n=$(dpkg -L "$pkg" 2>/dev/null | while IFS= read -r f; do
        case "$f" in /usr/share/doc/*) continue ;; esac
        if [ -f "$f" ] && [ -s "$f" ]; then echo "$f"; fi
      done | wc -l)
  echo "  $pkg: $n"
done
for p in mpirun mpicxx; do
  if [ -x "$(readlink -f "/usr/bin/$p")" ] && [ -s "$(readlink -f "/usr/bin/$p")" ]; then echo "  $p: still runnable"; else echo "  $p: not runnable"; fi
done
say "toolkit: $(ls "$cuda/include" | grep -c -E '^(nccl|cublas)') NCCL/cuBLAS headers, $(ls "$cuda/lib" | grep -c -E '^(libnccl|libcublas)') NCCL/cuBLAS libraries left"
say "python3 finds: $(python3 -c 'import nvidia, os; print(sorted(os.listdir(list(nvidia.__path__)[0])))')"

# 4. Without the kit: the build must stop, naming what is missing.
say "TESSEL_KIT=$rehearsal/no-kit bash scripts/gpu-checks.sh build --out $rehearsal/out-nokit"
set +e
cd "$root"
TESSEL_KIT="$rehearsal/no-kit" GPU_CHECKS_BUILD_DIR="$rehearsal/build-nokit" \
  bash scripts/gpu-checks.sh build --out "$rehearsal/out-nokit" 2>&1 | tail -n 6
echo "  exit status ${PIPESTATUS[0]}"
say "a plain configure without the kit (the error CMake gives):"
cmake -S "$root" -B "$rehearsal/build-plain" -G Ninja -DTESSEL_CUDA=OFF -DTESSEL_GUI=OFF -DTESSEL_MPI=OFF \
  >"$rehearsal/plain-configure.log" 2>&1
echo "  exit status $?: $(grep -m1 -A2 'CMake Error' "$rehearsal/plain-configure.log" | tr -s ' \n' ' ' | cut -c1-220)"

# 5. With the kit: build, then the GPU stages.
say "bash scripts/gpu-checks.sh build check --out $rehearsal/out"
GPU_CHECKS_BUILD_DIR="$rehearsal/build" bash scripts/gpu-checks.sh build check --out "$rehearsal/out"
rc=$?
echo "  exit status $rc"
say "ls $rehearsal/out"
ls -la "$rehearsal/out"
say "what the programs load (the wheels' folders are in their RUNPATH; no MPI, no Qt):"
ldd "$rehearsal/build/executor/tessel-worker" | grep -E "nccl|cublas|cudart|mpi|Qt|not found" | sed 's/ (0x[0-9a-f]*)//'
readelf -d "$rehearsal/build/executor/tessel-worker" | grep -E "RUNPATH|RPATH" | sed 's/^ *//'

# 6. The later stages on the same machine: no rebuild, the same stop.
say "bash scripts/gpu-checks.sh bench calibrate --out $rehearsal/out2"
GPU_CHECKS_BUILD_DIR="$rehearsal/build" bash scripts/gpu-checks.sh bench calibrate --out "$rehearsal/out2" | tail -n 6
echo "  exit status ${PIPESTATUS[0]}"

# 7. The stages' bookkeeping past the gate (GPU_CHECKS_PAST_THE_GATE=1): without a GPU every check must come
#    out skipped or failed, never passed, and the call must fail.
say "GPU_CHECKS_PAST_THE_GATE=1 bash scripts/gpu-checks.sh check bench calibrate --out $rehearsal/out3"
GPU_CHECKS_PAST_THE_GATE=1 GPU_CHECKS_BUILD_DIR="$rehearsal/build" \
  bash scripts/gpu-checks.sh check bench calibrate --out "$rehearsal/out3" | tail -n 16
echo "  exit status ${PIPESTATUS[0]}"

# 8. A call with too little time left (GPU_CHECKS_LIMIT_SECONDS=15): every check is reported "not run" with the
#    command to run next, and the call fails.
say "GPU_CHECKS_LIMIT_SECONDS=15 GPU_CHECKS_PAST_THE_GATE=1 bash scripts/gpu-checks.sh check --out $rehearsal/out4"
GPU_CHECKS_LIMIT_SECONDS=15 GPU_CHECKS_PAST_THE_GATE=1 GPU_CHECKS_BUILD_DIR="$rehearsal/build" \
  bash scripts/gpu-checks.sh check --out "$rehearsal/out4" | tail -n 12
echo "  exit status ${PIPESTATUS[0]}"
exit $rc
