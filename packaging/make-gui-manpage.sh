#!/usr/bin/env bash
# Writes tpstudio.1 from the GUI's own --help (help2man), run on Qt's offscreen platform.
#   make-gui-manpage.sh TPSTUDIO OUTPUT
set -euo pipefail
gui="$1"
out="$2"
runtime="$(mktemp -d)"
include="$(mktemp)"
trap 'rm -rf "$runtime" "$include"' EXIT
{
  echo "[SEE ALSO]"
  echo "tpstudio-cli(1): the same planner, previews and engine from the command line."
} > "$include"
QT_QPA_PLATFORM=offscreen XDG_RUNTIME_DIR="$runtime" \
  help2man --no-info --name "graphical editor for tensor-parallel plans of Transformer language models" \
  --include "$include" --output "$out" "$gui"
