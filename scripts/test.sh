#!/usr/bin/env bash
# Installs what is missing (Debian 12), makes the pinned Python the Transformers checks run in
# (scripts/python-env.sh: about 5.6 GB and 5-10 minutes the first time, reused after), builds
# everything and runs the whole test suite. TP_SKIP_TRANSFORMERS=1 leaves the Python out: the
# Transformers checks are then reported Skipped, with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stage.sh
bash scripts/install-deps.sh
if [ "${TP_SKIP_TRANSFORMERS:-0}" = 1 ]; then
  echo "test: TP_SKIP_TRANSFORMERS=1: transformers_accepts_export," \
       "transformers_collective_audit, transformers_audit_catches_wrong_preview and fixtures_are_transformers_own" \
       "run without torch and transformers, and are skipped (and so is tst_gui's verifyWithTransformersEndToEnd)"
  python="$(command -v python3)"
else
  python="$(stage "pinned python (scripts/python-env.sh)" bash scripts/python-env.sh)"
fi
stage "dev configure" cmake --preset dev -DTP_TRANSFORMERS_PYTHON="$python"
stage "dev build" cmake --build --preset dev
stage "dev ctest" ctest --preset dev -j "$(nproc)"
