#!/usr/bin/env bash
# Installs what is missing (Debian 12), builds, and starts the GUI on the built-in example model.
# Extra arguments go to tpstudio (e.g. a model folder or a catalog id such as llama-3.1-70b).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset dev
cmake --build --preset dev --target tpstudio tpstudio-cli
if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  echo "run-gui: no display; starting under xvfb-run (use --screenshot FILE to capture the window)" >&2
  exec xvfb-run -a -s "-screen 0 1400x900x24" ./build/dev/app/tpstudio "$@"
fi
exec ./build/dev/app/tpstudio "$@"
