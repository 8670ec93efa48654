#!/usr/bin/env bash
# Takes the screenshots of every page in light and dark mode into docs/screenshots/ (PAGE-light.png,
# PAGE-dark.png), under Xvfb with the built GUI. The hardware list holds only the built-in profiles
# (a calibrated one of this machine would be listed and may be selected).
#
#   bash scripts/screenshots.sh [BUILD_DIR]      # default build/dev
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/dev}
gui="$build/app/tpstudio"
[ -x "$gui" ] || { echo "screenshots: $gui is not built (cmake --build --preset dev --target tpstudio tpstudio-cli)" >&2; exit 1; }
command -v xvfb-run >/dev/null || { echo "screenshots: xvfb-run is missing (apt-get install xvfb)" >&2; exit 1; }
out=docs/screenshots
mkdir -p "$out"
hw=$(mktemp -d)
trap 'rm -rf "$hw"' EXIT
shot() { # NAME THEME ARGS…
  local name=$1 theme=$2
  shift 2
  echo "screenshots: $name-$theme" >&2
  TPSTUDIO_HARDWARE_DIR="$hw" XDG_CONFIG_HOME="$hw/config" timeout 600 \
    xvfb-run -a -s "-screen 0 1600x1000x24" "$gui" --theme "$theme" "$@" --screenshot "$out/$name-$theme.png"
}
for theme in light dark; do
  shot summary "$theme" llama-3.1-70b --tp 8 --hardware h100-sxm-8 --tab summary
  shot plan "$theme" llama-3.1-70b --tp 8 --hardware h100-sxm-8 --tab plan --select model.layers.0.mlp.down_proj
  shot shards "$theme" llama-3.1-70b --tp 8 --hardware h100-sxm-8 --tab shards --select model.layers.0.self_attn.q_proj.weight
  shot dataflow "$theme" mixtral-8x7b --tp 4 --hardware h100-sxm-8 --tab dataflow --select model.layers.0.mlp.experts
  shot collectives "$theme" llama-3.1-70b --tp 8 --hardware h100-sxm-8 --tab collectives
  shot memory-does-not-fit "$theme" llama-3.1-70b --tp 1 --hardware h100-sxm-8 --tab collectives
  shot diagnostics "$theme" llama-3.1-70b --tp 1 --hardware h100-sxm-8 --tab diagnostics
  shot advisor "$theme" deepseek-v3 --hardware h200-sxm-8 --tab advisor
  shot run "$theme" example --tp 2 --run 1,2 --decode 16 --tab run
  for chart in layers speedup latency timeline compare collectives; do
    shot "results-$chart" "$theme" example --tp 2 --run 1,2 --decode 16 --tab results --chart "$chart"
  done
done
echo "screenshots: written to $out" >&2
