#!/usr/bin/env bash
# The CPU math library choice, measured on the engine's shapes: OpenBLAS, BLIS and oneDNN SGEMM side
# by side (scripts/gemm_libraries.cpp), rounds interleaved. The engine links oneDNN (its GEMMs) and
# OpenBLAS (one-row SGEMV); BLIS is for this comparison: apt-get install libblis4-pthread (whichever
# is absent is left out of the table).
#   bash scripts/bench_gemm_libraries.sh [ROUNDS]
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
g++ -O2 -std=c++20 "$(dirname "$0")/gemm_libraries.cpp" -o "$dir/gemm_libraries" -ldl
"$dir/gemm_libraries" "${1:-3}"
