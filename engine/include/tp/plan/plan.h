// plan.h — a tp_plan and how Transformers matches its keys against a model.
//
// Matching follows the version profile (hf-tp-semantics.md §3):
//   G3/G2: only numeric path segments become '*'; a parameter looks up its own key, then its
//          module's; a module (its forward wrapper) looks up its own key only. G3 also honours
//          exact indexed keys ("model.layers.0.mlp.down_proj") before the wildcarded lookup.
//   G1:    every digit run becomes '*' ("w1" → "w*"), so names with digits never match.
#pragma once

#include "tp/core/diagnostic.h"
#include "tp/model/model_spec.h"
#include "tp/plan/style.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tp {

// How ep_dispatch_experts brings the tokens to the experts (Transformers' DistributedConfig.
// ep_implementation, expert_parallel.py): "auto" is "all_reduce" at inference when the EP group is
// the TP group (ep_size = tp_size, the one mesh here).
enum class EpImplementation
{
    Auto,      // every rank its own experts on the whole batch, other routes masked, all-reduced (AllReduceEP)
    AllReduce, // the same, named
    AllToAll,  // each rank's token-row slice: (token, expert) pairs to their owners and back, then all-gathered (AllToAllEP)
};
const char* epImplementationName(EpImplementation e);

struct Plan
{
    int tpSize = 1;
    EpImplementation epImplementation = EpImplementation::Auto;
    // Key/value heads fewer than tp_size: give each rank one whole KV head, each head on T / KV ranks, as vLLM and
    // SGLang do (transformers PR 47811 proposes it) — rank r holds head floor(r · KV / T) of every k_proj and v_proj.
    // Needs T a multiple of KV; no effect where KV heads split evenly. A TP Studio extension ("replicate_kv_heads" in
    // the plan file): the pinned Transformers 5.24 cannot load such a plan (it splits k_proj and v_proj colwise).
    bool replicateKvHeads = false;
    // Pipeline stages (DistributedConfig pp_size, written by plan search): the layers split into that many contiguous
    // runs, each on its own tp_size GPUs. The sharded graph is one stage's plan over the whole model; the cost model's
    // memory check takes the largest stage (pipelineStageBytes). 1: no pipeline.
    int ppSize = 1;
    VersionProfile profile = VersionProfile::G3;
    std::vector<PlanEntry> entries;    // in file order (parameter keys before module keys)
    std::vector<Style> customStyles;   // user-defined, saved with the plan
};

// The plan a model starts from: its class's resolved default tp_plan.
Plan defaultPlan(const ModelSpec& spec, int tpSize, VersionProfile profile = VersionProfile::G3);

// The lookup form of a module or parameter name under a profile.
std::string wildcardName(const std::string& name, VersionProfile profile);

struct ParamAssignment
{
    int module = -1;
    int param = -1;
    int entry = -1;          // index into Plan::entries, -1: not in the plan
    bool viaModuleKey = false;
    const Style* style = nullptr;
    Placement placement;     // resolved for this parameter's rank and module kind
};

struct PlanMatch
{
    std::vector<ParamAssignment> params;   // one per parameter, in ModelSpec::allParams order
    std::vector<int> moduleEntry;          // per module: entry installing its forward wrapper, or -1
    std::vector<int> entryMatches;         // per entry: modules + parameters it matched
    std::vector<const Style*> entryStyles; // per entry: its style, nullptr when unknown
    std::vector<Diagnostic> diagnostics;
    // Hash lookups of module and parameter names among the keys: at most 2·(modules + parameters)
    // whatever the number of keys (tests check that matching stays linear by counting them).
    std::int64_t keyLookups = 0;
};

// Matches every key, resolves styles (registry + the plan's custom styles), and reports unknown
// styles, keys that match nothing, indexed keys, linear styles on non-linear modules, and
// Linear/Embedding modules that no key shards.
//
// Cost: O(K·L + (M + P)·L) for K keys, M modules and P parameters with names of length ≤ L: the
// keys are hashed once, then each module and parameter does at most two hash lookups (its exact
// name under G3, then its wildcarded name). No key is compared with every module.
PlanMatch matchPlan(const ModelSpec& spec, const Plan& plan);

} // namespace tp
