#!/usr/bin/env bash
# Builds tessel's GPU programs here (a Debian machine with the CUDA toolkit and the packages) and leaves them,
# stripped, in one git-ignored folder (default .gpubin/) that the device tool carries, so the lent GPU machine
# spends none of its few minutes compiling. scripts/gpu-checks.sh uses the folder when it is there.
#
#   bash scripts/gpu-prebuild.sh [BIN_DIR]        (BUILD_DIR: GPU_PREBUILD_DIR, default build/gpu-prebuilt)
#
# Why this runs where it does: the lent machine's CPU time counts against a 15-minute lease, and a full CUDA
# build there takes minutes of it. Binaries made here run there because this machine's C library and libstdc++
# are older than the lent machine's (both are checked below and written to manifest.json), the CUDA runtime
# is linked statically, and cuBLASLt and NCCL are found there from the toolkit or the pip wheels
# (gpu-checks.sh sets LD_LIBRARY_PATH). The programs hold this checkout's absolute path (built-in scenarios,
# the shipped training text); gpu-checks.sh links that path to the copy it runs in when the path is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
bin="${1:-.gpubin}"
build="${GPU_PREBUILD_DIR:-build/gpu-prebuilt}"
limit_mib=40   # the device tool carries 64 MiB in all (repository, kit and these programs)

die() { echo "gpu-prebuild: $*" >&2; exit 1; }
nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
[ -x "$nvcc" ] || die "nvcc not found (the CUDA toolkit builds the GPU programs)"
toolkit="$(cd "$(dirname "$nvcc")/.." && pwd)"
[ -f "$toolkit/include/nccl.h" ] || die "no nccl.h in $toolkit/include (NCCL is needed to build the NCCL comm)"
if [ -e "$bin" ] && [ ! -f "$bin/manifest.json" ] && [ -n "$(ls -A "$bin" 2>/dev/null)" ]; then
  die "$bin exists and is not a prebuilt folder (no manifest.json): refusing to overwrite it"
fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSEL_CUDA=ON -DTESSEL_MPI=OFF -DTESSEL_GUI=OFF \
  -DTESSEL_BENCH=OFF -DTESSEL_TESTS=ON "-DCMAKE_CUDA_COMPILER=$nvcc" \
  "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES:-90}" "-DTESSEL_NCCL_ROOT=$toolkit" >/dev/null
programs=(cli/tessel executor/tessel-worker tests/executor/cuda/tessel_cuda_gpu_tests
          tests/executor/cuda/tessel_cuda_host_tests)
cmake --build "$build" --target tessel tessel-worker tessel_cuda_gpu_tests tessel_cuda_host_tests -j "$(nproc)"

rm -rf "$bin"
for p in "${programs[@]}"; do
  mkdir -p "$bin/$(dirname "$p")"
  strip -o "$bin/$p" "$build/$p"
done
# The newest C library and libstdc++ symbol versions the programs ask for: the lent machine must have these.
glibc="$(objdump -T "${programs[@]/#/$bin/}" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)"
glibcxx="$(objdump -T "${programs[@]/#/$bin/}" | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -n 1)"
needed="$(for p in "${programs[@]}"; do objdump -p "$bin/$p" | awk '/NEEDED/ {print $2}'; done | sort -u | tr '\n' ' ')"
bytes="$(du -sb "$bin" | cut -f1)"
cat >"$bin/manifest.json" <<JSON
{
  "schema_version": 1,
  "what": "tessel GPU programs built ahead (scripts/gpu-prebuild.sh) for scripts/gpu-checks.sh on the lent GPU machine",
  "commit": "$(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo '+local changes')",
  "created_utc": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "made_on": "$(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -m), $(c++ --version | head -n 1)",
  "nvcc": "$("$nvcc" --version | tail -n 1)",
  "cuda_architectures": "${CUDA_ARCHITECTURES:-90}",
  "source_dir": "$root",
  "needs_glibc": "$glibc",
  "needs_glibcxx": "$glibcxx",
  "needed_libraries": "$needed",
  "programs": [$(printf '"%s",' "${programs[@]}" | sed 's/,$//')],
  "bytes": $bytes
}
JSON
mib=$((bytes / 1048576))
echo "gpu-prebuild: wrote $bin ($mib MiB; needs $glibc, $glibcxx; links $needed)"
[ "$mib" -lt "$limit_mib" ] || die "the programs take $mib MiB, over the $limit_mib MiB they may take of the 64 MiB carried"
