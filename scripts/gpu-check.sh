#!/usr/bin/env bash
# The GPU check to run whenever a GPU is available: builds (release, CUDA for sm_80/sm_90), runs the
# GPU op tests against the CPU ops, and times cuBLAS bf16 GEMMs for Llama-3.1-8B's shapes at T=1 and
# T=8 against a measured 8192^3 peak; prints one summary. Target: under 8 minutes on one GPU.
#   scripts/gpu-check.sh
# Not covered yet (the GPU engine issue): the CUDA executor, the NCCL communicator, single-GPU
# emulation of T ranks and the PyTorch comparison of a whole forward.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
cmake --preset release -DTP_BUILD_GUI=OFF > /dev/null
cmake --build --preset release --target tst_gpu tpstudio-cli
echo "== GPU ops vs CPU ops"
./build/release/tests/tst_gpu -silent || { echo "GPU op tests FAILED"; exit 1; }
echo "== cuBLAS bf16 GEMMs, Llama-3.1-8B shapes, 512 tokens"
for t in 1 8; do
  ./build/release/app/tpstudio-cli bench gemm --model llama-3.1-8b --tp "$t" --tokens 512 --iters 20
done
echo "gpu-check: done in $(( $(date +%s) - start )) s"
