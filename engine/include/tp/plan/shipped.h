// shipped.h — the plans shipped in plans/<model_type>/ (embedded in the binaries), each with the
// description plans/index.json gives it, ready to try as candidates.
//
//   for (const ShippedPlan& p : shippedPlans(spec).value()) searchOptions.plans.push_back({p.name, p.description, p.plan});
#pragma once

#include "tp/core/status.h"
#include "tp/model/model_spec.h"
#include "tp/plan/plan.h"

#include <string>
#include <vector>

namespace tp {

struct ShippedPlan
{
    std::string file;        // under plans/: "deepseek_v3/mla-sharded.json"
    std::string name;        // the file's stem: "mla-sharded"
    std::string description; // index.json's
    Plan plan;               // resolved against the spec as `--plan FILE` resolves it (G3)
};

// Every plan of the directory named after the model's type (or the outer type its text config was read
// through: gemma3 for gemma3_text) except default.json (the class's own
// plan, which every caller has already), in file order. DataLoss for an embedded file that does not
// parse (a build from a broken tree).
Result<std::vector<ShippedPlan>> shippedPlans(const ModelSpec& spec);

} // namespace tp
