// plan_io.h — plans in the JSON form Transformers loads, and as a ready Python script.
//
// JSON: {"tp_size": N, "tp_plan": {key: style, ...}}, loadable with DistributedConfig(**json.load(f));
// parameter keys come before their module key (the loader's regex alternation takes the first
// match). A plan that defines custom styles adds "custom_styles": {name: {"base": "colwise" |
// "rowwise", "input": "Replicate" | "Shard(-1)", "output": …}}; the Python export registers them
// with ALL_PARALLEL_STYLES before building the DistributedConfig. A plan that replicates KV heads
// (Plan::replicateKvHeads) adds "replicate_kv_heads": true, a TP Studio key no Transformers version
// knows (`plan export` refuses such a plan where it takes effect). Import accepts the wrapped form or
// a bare {key: style} dict.
#pragma once

#include "tp/core/status.h"
#include "tp/plan/plan.h"

#include <string>
#include <string_view>

namespace tp {

Result<Plan> parsePlanJson(std::string_view text, const std::string& source, VersionProfile profile);
Result<Plan> loadPlanFile(const std::string& path, VersionProfile profile);

// What Transformers applies when it is given `overrides` for this model (hf-tp-semantics §3.3):
// G3 merges them into the class's default plan (a key keeps its place, new keys follow); G1/G2
// replace the default plan.
Plan resolveOverrides(const ModelSpec& spec, const Plan& overrides);

// Whether planToJson writes entry `e` of `plan` into ep_plan rather than tp_plan (an expert key of a plan
// that dispatches with ep_dispatch_experts).
bool exportedToEpPlan(const Plan& plan, const PlanEntry& e);

// Entries reordered so that every parameter key precedes its module key; otherwise file order.
std::vector<PlanEntry> exportOrder(const std::vector<PlanEntry>& entries);

// The complete resolved plan in Transformers form, pretty-printed. With `spec` under G3, every
// default key the plan dropped is written as "replicate", so merge semantics cannot bring it back.
std::string planToJson(const Plan& plan, const ModelSpec* spec = nullptr);

// A ready script: registers custom styles, builds DistributedConfig(tp_size, tp_plan), and loads the
// model with from_pretrained under torchrun. `--check` verifies the plan without loading weights.
// `scriptPath`: where it will be written; its usage lines name the file (any directory dropped; a
// name of other characters than letters, digits and "._+-" reads "plan.py"). `writer`: what wrote it, for
// its docstring, trusted text (not from a model): "tpstudio-cli plan export --format python".
std::string planToPython(const Plan& plan, const ModelSpec& spec, std::string_view scriptPath = "plan.py",
                         std::string_view writer = "tpstudio-cli plan export --format python");

} // namespace tp
