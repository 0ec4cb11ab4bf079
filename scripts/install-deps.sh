#!/usr/bin/env bash
# Installs every Debian package tessel needs to build and test, skipping what is already there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3
  nlohmann-json3-dev libeigen3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  # tessel-gui: Qt 6 Widgets and Test (libgl-dev because Qt6Gui's CMake config needs the OpenGL headers),
  # QtSvg for SVG chart export, and a font so headless (offscreen) screenshots have legible text.
  qt6-base-dev libgl-dev qt6-svg-dev fonts-dejavu-core
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
