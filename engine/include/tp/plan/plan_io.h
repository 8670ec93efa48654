// plan_io.h — plans in the JSON form Transformers loads.
//
// Export: {"tp_size": N, "tp_plan": {key: style, ...}}, loadable with
// DistributedConfig(**json.load(f)); parameter keys come before their module key (the loader's
// regex alternation takes the first match). Import accepts that form or a bare {key: style} dict.
#pragma once

#include "tp/core/status.h"
#include "tp/plan/plan.h"

#include <string>
#include <string_view>

namespace tp {

Result<Plan> parsePlanJson(std::string_view text, const std::string& source, VersionProfile profile);
Result<Plan> loadPlanFile(const std::string& path, VersionProfile profile);

// Entries reordered so that every parameter key precedes its module key; otherwise file order.
std::vector<PlanEntry> exportOrder(const std::vector<PlanEntry>& entries);
// The Transformers form, pretty-printed.
std::string planToJson(const Plan& plan);

} // namespace tp
