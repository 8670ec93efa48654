// model_json.h — ModelSpec as JSON (what `tpstudio-cli inspect --json` prints).
#pragma once

#include "tp/model/model_spec.h"

#include <nlohmann/json.hpp>

namespace tp {

// Summary: architecture, sizes, parameter count, bytes per dtype, valid tp sizes, default plans,
// diagnostics; with `tree`, every module with its parameters.
nlohmann::ordered_json modelSpecToJson(const ModelSpec& spec, bool tree);

// Diagnostics as an array of {severity, where, message, hint[, follows]}: `follows` (a consequence's
// cause) only where set.
nlohmann::ordered_json diagnosticsJson(const std::vector<Diagnostic>& ds);

// Layers whose structure (generic names, shapes, dtypes) equals the previous layer's, for compact
// displays: returns, for each layer, the first layer of its run of identical layers.
std::vector<int> layerRunStarts(const ModelSpec& spec);

} // namespace tp
