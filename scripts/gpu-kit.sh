#!/usr/bin/env bash
# Gathers the header-only and source dependencies of tessel's GPU build into one git-ignored folder (default
# .gpukit/), for a machine that has none of the Debian packages (the lent GPU machine: nvcc, CMake, ninja and
# Python with the NCCL and cuBLAS wheels, nothing else). Run it on a Debian machine; copy the folder along
# (the device tool's `carry`) and configure with -DTESSEL_KIT=<folder> (scripts/gpu-checks.sh does).
#
#   bash scripts/gpu-kit.sh [KIT_DIR]          (GPU_KIT_FROM=apt: download every package, installed or not)
#
# Each package's files come from the installed package (the paths `dpkg -L` lists) or, where it is not
# installed, from `apt-get download` + `dpkg -x`; either way they keep their Debian paths under KIT_DIR/usr, so
# the packages' own CMake config files (which locate the headers relative to themselves) work there.
# GoogleTest travels as sources (package googletest, /usr/src/googletest), built with the project on the GPU
# machine: its prebuilt static libraries would tie the build to this machine's compiler and C library. MPI,
# Qt and Google Benchmark are not needed there (TESSEL_MPI=OFF, TESSEL_GUI=OFF, TESSEL_BENCH=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."

kit="${1:-.gpukit}"
limit_mib=48   # the device tool carries 64 MiB in all, the repository included
packages=(nlohmann-json3-dev libeigen3-dev libcli11-dev googletest)

die() { echo "gpu-kit: $*" >&2; exit 1; }
command -v dpkg-query >/dev/null || die "needs a Debian machine (dpkg-query not found)"

case "$kit" in
  /*) ;;
  *) kit="$PWD/$kit" ;;
esac
if [ -e "$kit" ] && [ ! -f "$kit/kit.json" ] && [ -n "$(ls -A "$kit" 2>/dev/null)" ]; then
  die "$kit exists and is not a kit (no kit.json): refusing to overwrite it"
fi
rm -rf "$kit"
mkdir -p "$kit"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# Documentation beyond the copyright file is left out; so are pkg-config files (CMake reads the config files).
keep() {
  case "$1" in
    /usr/share/doc/*/copyright) return 0 ;;
    /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/* | /usr/share/pkgconfig/* | */pkgconfig/*) return 1 ;;
  esac
  return 0
}

manifest="$work/packages.json"
echo "[" >"$manifest"
first=1
for p in "${packages[@]}"; do
  if installed "$p" && [ "${GPU_KIT_FROM:-}" != apt ]; then
    version="$(dpkg-query -W -f='${Version}' "$p")"
    how="installed"
    # Regular files and symbolic links listed by the package, copied with their paths.
    while IFS= read -r f; do
      [ -f "$f" ] || [ -L "$f" ] || continue
      keep "$f" || continue
      mkdir -p "$kit$(dirname "$f")"
      cp -a "$f" "$kit$f"
    done < <(dpkg -L "$p")
  else
    command -v apt-get >/dev/null || die "$p is not installed and apt-get is missing"
    how="apt-get download"
    (cd "$work" && apt-get -o APT::Sandbox::User=root download "$p" >/dev/null) || die "apt-get download $p failed (run apt-get update first?)"
    deb="$(ls "$work"/"${p}"_*.deb | head -n 1)"
    version="$(dpkg-deb -f "$deb" Version)"
    mkdir -p "$work/x-$p"
    dpkg -x "$deb" "$work/x-$p"
    while IFS= read -r f; do
      f="${f#.}"
      keep "$f" || continue
      mkdir -p "$kit$(dirname "$f")"
      cp -a "$work/x-$p$f" "$kit$f"
    done < <(cd "$work/x-$p" && find . \( -type f -o -type l \))
  fi
  [ $first -eq 1 ] || echo "," >>"$manifest"
  first=0
  printf '  {"name": "%s", "version": "%s", "from": "%s"}' "$p" "$version" "$how" >>"$manifest"
  echo "gpu-kit: $p $version ($how)"
done
echo "" >>"$manifest"
echo "]" >>"$manifest"

# What the GPU build needs from the kit, checked here rather than found missing there.
for f in usr/include/nlohmann/json.hpp usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake \
         usr/include/eigen3/Eigen/Core usr/share/eigen3/cmake/Eigen3Config.cmake \
         usr/include/CLI/CLI.hpp usr/share/cmake/CLI11/CLI11Config.cmake \
         usr/src/googletest/CMakeLists.txt usr/src/googletest/googletest/src/gtest-all.cc \
         usr/src/googletest/googletest/include/gtest/gtest.h; do
  [ -e "$kit/$f" ] || die "the kit lacks $f"
done

bytes="$(du -sb "$kit" | cut -f1)"
cat >"$kit/kit.json" <<JSON
{
  "schema_version": 1,
  "what": "tessel dependency kit for a machine without the Debian packages (scripts/gpu-kit.sh); configure with -DTESSEL_KIT=<this folder>",
  "created_utc": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "made_on": "$(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -m)",
  "bytes": $bytes,
  "packages": $(cat "$manifest")
}
JSON
mib=$((bytes / 1048576))
echo "gpu-kit: wrote $kit ($mib MiB, $(find "$kit" -type f | wc -l) files)"
[ "$mib" -lt "$limit_mib" ] || die "the kit is $mib MiB, over the $limit_mib MiB it may take of the 64 MiB carried"
