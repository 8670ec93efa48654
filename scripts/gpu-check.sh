#!/usr/bin/env bash
# The GPU check (DEVELOPERS.md: run it first whenever a task has a GPU).
#
# The GPU machine has nvcc, CMake, a python3 with PyTorch and Transformers, cuBLAS and NCCL (in the
# CUDA install and PyTorch's wheels), and none of this project's Debian packages. So the binaries are
# built here, into a self-contained bundle: tpstudio-cli and the GPU test suites (release, CUDA for
# sm_80/sm_90, the CUDA runtime linked statically, no MPI) with every shared library they need
# beside them except the C runtime, the driver, cuBLAS and NCCL; compressed to
# build/gpu-bundle.tar.xz, which must stay under the 64 MiB a device call carries.
#
#   bash scripts/gpu-check.sh --dry-run     here: build the bundle, then run every step that needs no GPU
#   bash scripts/gpu-check.sh --build-only  here: build the bundle
#   bash scripts/gpu-check.sh               on the GPU machine (carry build/gpu-bundle.tar.xz): the check,
#                                           one table, in at most 8 minutes
# The steps and the table: scripts/gpu_check.py. PYTHON names the python3 with torch (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-device}
bundle=build/gpu-bundle
archive=build/gpu-bundle.tar.xz

build_bundle() {
  command -v nvcc > /dev/null || { echo "gpu-check: nvcc is not on PATH: the bundle needs the CUDA toolkit" >&2; exit 1; }
  cmake -S . -B build/gpu-bundle-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTP_BUILD_GUI=OFF -DTP_ENABLE_MPI=OFF \
        -DTP_ENABLE_CUDA=ON > build/gpu-bundle-configure.log
  grep -q "CUDA parts ON" build/gpu-bundle-configure.log || { echo "gpu-check: CMake did not enable CUDA" >&2; exit 1; }
  cmake --build build/gpu-bundle-build --target tpstudio-cli tst_backend_ops tst_gpu
  rm -rf "$bundle" && mkdir -p "$bundle/bin" "$bundle/lib"
  cp build/gpu-bundle-build/app/tpstudio-cli build/gpu-bundle-build/tests/tst_backend_ops build/gpu-bundle-build/tests/tst_gpu "$bundle/bin/"
  # Every resolved library except the ones the GPU machine has (C runtime, driver, cuBLAS, NCCL).
  provided='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libcublas\.so|libcublasLt\.so|libnccl\.so)'
  for b in "$bundle"/bin/*; do
    ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
  done | sort -u | while read -r name path; do
    [[ $name =~ $provided ]] || cp -L "$path" "$bundle/lib/$name"
  done
  strip --strip-unneeded "$bundle"/bin/* 2> /dev/null || true
  tar -C build -cJf "$archive" gpu-bundle
  local size
  size=$(stat -c %s "$archive")
  echo "gpu-check: $archive is $((size / 1048576)) MiB ($(ls "$bundle/lib" | wc -l) libraries)"
  if (( size > 56 * 1048576 )); then
    echo "gpu-check: the bundle is over 56 MiB; with the tree it would not fit the 64 MiB a device call carries" >&2
    exit 1
  fi
}

case "$mode" in
  --build-only) build_bundle ;;
  --dry-run)
    build_bundle
    exec python3 scripts/gpu_check.py --bundle "$bundle" --dry-run ${PYTHON:+--python "$PYTHON"} ;;
  device)
    if [ ! -x "$bundle/bin/tpstudio-cli" ]; then
      [ -f "$archive" ] || { echo "gpu-check: no $archive: build it with 'bash scripts/gpu-check.sh --build-only' and carry it" >&2; exit 1; }
      tar -C build -xJf "$archive"
    fi
    exec python3 scripts/gpu_check.py --bundle "$bundle" ${PYTHON:+--python "$PYTHON"} ;;
  *) echo "usage: bash scripts/gpu-check.sh [--dry-run | --build-only]" >&2; exit 2 ;;
esac
