#!/usr/bin/env bash
# Installs what is missing (Debian 12), builds everything and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset dev
cmake --build --preset dev
ctest --preset dev -j "$(nproc)"
