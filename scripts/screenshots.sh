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
# Ctrl-C stops here (the GUI under Xvfb stays in this process group, so it gets the signal too);
# every picture already taken is whole, the one being taken keeps its previous version.
trap 'echo "screenshots: interrupted; nothing half written" >&2; exit 130' INT TERM
shot() { # NAME THEME ARGS…: written beside, then moved over the old one (an interrupted shot
  local name=$1 theme=$2 # leaves the previous picture, never half a file)
  shift 2
  echo "screenshots: $name-$theme" >&2
  TPSTUDIO_HARDWARE_DIR="$hw" XDG_CONFIG_HOME="$hw/config" timeout --foreground 600 \
    xvfb-run -a -s "-screen 0 ${SCREEN:-1600x1000}x24" "$gui" --theme "$theme" "$@" --screenshot "$hw/shot.png"
  mv -f "$hw/shot.png" "$out/$name-$theme.png"
}
for theme in light dark; do
  shot summary "$theme" llama-3.1-70b --tp 8 --hardware h100-sxm-8 --tab summary
  shot plan "$theme" llama-3.1-70b --tp 8 --hardware h100-sxm-8 --tab plan --select model.layers.0.mlp.down_proj
  shot deepseek-v4-diagnostics "$theme" deepseek-v4-defaults --tp 2 --hardware h100-sxm-8 --tab diagnostics
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
  # A 1280 × 800 laptop screen: the window fits it, the toolbar's boxes stay in view.
  SCREEN=1280x800 shot small-summary "$theme" llama-3.1-70b --tp 8 --hardware h100-sxm-8 --tab summary
  SCREEN=1280x800 shot small-advisor "$theme" deepseek-v3 --hardware h200-sxm-8 --tab advisor
  SCREEN=1280x800 shot small-plan "$theme" llama-3.1-70b --tp 8 --hardware h100-sxm-8 --tab plan --select model.layers.0.mlp.down_proj
done
# Single shots (light): opening a large model, an emulated run, decode, a checkpoint, DeepSeek-V3's
# default plan, the Advisor when nothing fits, and (with TPSTUDIO_PYTHON set to a Python with torch
# and transformers) Verify with Transformers.
# A (small) Llama config with 100,000 layers opens for long enough to be caught opening.
mkdir -p "$hw/llama-100000-layers"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["num_hidden_layers"]=100000; json.dump(c,open(sys.argv[2],"w"))' \
  tests/fixtures/models/llama/config.json "$hw/llama-100000-layers/config.json"
shot opening light "$hw/llama-100000-layers" --tab summary --screenshot-opening 400
shot emulated light example --tp 4 --hardware h100-sxm-8 --run 1,2,4 --emulate --tab results --chart timeline
shot decode-layers light example --tp 2 --run 1,2 --decode 16 --phase decode --tab results --chart layers
shot decode-timeline light example --tp 2 --run 1,2 --decode 16 --phase decode --tab results --chart timeline
shot checkpoint light tests/fixtures/models/mixtral --tp 2 --tab plan --select model.layers.0.mlp.experts.gate_up_proj
shot default-plan light deepseek-v3 --tp 8 --hardware h200-sxm-8 --tab plan --select model.layers.3.mlp.experts
shot advisor-nothing-fits light deepseek-v3 --hardware h100-sxm-8 --tab advisor
if [ -n "${TPSTUDIO_PYTHON:-}" ]; then
  shot verify light mixtral-8x7b --tp 2 --verify
else
  echo "screenshots: verify-light.png left as it is (set TPSTUDIO_PYTHON to retake it)" >&2
fi
echo "screenshots: written to $out" >&2
