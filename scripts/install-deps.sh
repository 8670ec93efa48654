#!/usr/bin/env bash
# Installs what TP Studio needs on Debian 12 (bookworm), and only what is missing. Idempotent.
# Run as root (or with sudo available). CUDA is optional: it comes from the system CUDA install.
#   bash scripts/install-deps.sh          install what is missing
#   bash scripts/install-deps.sh --list   print the packages, one a line, and change nothing
# Every package a build uses must be one of these or a dependency of one: ctest's
# install_deps_cover_build (scripts/check-deps.py) maps the files the build used to their packages.
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build ccache pkg-config git
  qt6-base-dev qt6-base-dev-tools libqt6opengl6-dev libgl-dev
  libqcustomplot-dev libqcustomplot2.1-qt6 qt6-svg-dev
  nlohmann-json3-dev libfmt-dev libcli11-dev
  # libdnnl-dev's CMake package (dnnl-config.cmake) needs OpenCL's headers and libOpenCL.so, which
  # Debian's libdnnl-dev does not depend on: ocl-icd-opencl-dev brings both.
  libopenblas-dev libdnnl-dev ocl-icd-opencl-dev libopenmpi-dev openmpi-bin
  qt6-qpa-plugins xvfb xauth adwaita-icon-theme
  clang libclang-rt-14-dev
  python3 python3-venv help2man appstream desktop-file-utils lintian man-db
)

if [ "${1:-}" = --list ]; then
  printf '%s\n' "${pkgs[@]}"
  exit 0
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
