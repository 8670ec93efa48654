// plan_search.h — the planner as an advisor: candidate plans for a model on a machine, each sharded
// and costed at every valid tp size, those that do not fit the device memory dropped, and the
// Pareto front over time to first token, inter-token latency and decode tokens/s per GPU.
//
//   SearchOptions o{.batch = 8, .seq = 2048, .context = 4096};
//   Result<SearchResult> r = searchPlans(spec, findHardware("h200-sxm-8").value(), o);
//   for (const PlanCandidate& c : r->candidates) if (c.pareto) planToJson(c.plan, &spec);
#pragma once

#include "tp/core/status.h"
#include "tp/cost/hardware.h"
#include "tp/model/model_spec.h"
#include "tp/plan/plan.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tp {

// A candidate plan besides the built-in ones: shipped, the editor's, or the user's file.
struct NamedPlan
{
    std::string name;
    std::string description; // one line: what it does, or where it comes from
    Plan plan;
};

struct SearchOptions
{
    std::int64_t batch = 1;     // sequences decoded together
    std::int64_t seq = 2048;    // prompt tokens per sequence (the prefill that gives the first token)
    std::int64_t context = 0;   // decode context per sequence (the KV cache it needs, the step it times); 0: seq
    int maxTp = 0;              // largest T tried; 0: the hardware's device count (all nodes; at most 64)
    // Largest pipeline-parallel size tried (layers split into that many stages, each on its own T GPUs, T × PP at
    // most the profile's devices); 0: the profile's nodes (1 on one node: tensor parallelism only).
    int maxPp = 0;
    std::optional<DType> activationDtype; // default: the model's
    std::optional<DType> kvCacheDtype;    // default: the activations' (ShardOptions::kvCacheDtype)
    // More candidates, each tried at every T (its tpSize is overridden): the editor's or user plans.
    std::vector<NamedPlan> plans;
    // Also every plan shipped for the model's type (shippedPlans(), but one named as a plan above).
    bool shipped = true;
    // Also the default with key/value heads replicated at each T above them (Plan::replicateKvHeads: what vLLM and
    // SGLang run, which the pinned Transformers cannot load).
    bool replicateKvHeads = false;
};

struct PlanCandidate
{
    std::string name;                 // "default", "attention replicated", "sequence parallel", … or a plan's name
    std::string description;          // one line: what the plan does (NamedPlan's for a given one)
    Plan plan;                        // at its tp size, its ppSize the candidate's pp (planToJson writes pp_size)
    int tp = 1;
    // Pipeline stages (DistributedConfig pp_size): contiguous runs of layers, the embedding on the first, the final
    // norm and lm_head on the last; each stage's TP group holds its layers' shards. 1: no pipeline.
    int pp = 1;
    double bubble = 0;                // decode: the share of a stage's time idle (fewer micro-batches than stages)
    bool spansNodes = false;          // a TP group larger than a node: every collective crosses the network
    double ttftSeconds = 0;           // prefill of batch × seq, the head at the last positions (as generate())
    double itlSeconds = 0;            // one decode step of batch tokens at the context
    double tokensPerSecondPerGpu = 0; // batch / ITL / T
    std::int64_t memoryBytes = 0;     // the largest rank (of any stage): weights + KV cache at batch × context + activation peak
    std::int64_t headroomBytes = 0;   // device memory − memoryBytes (≥ 0 for every candidate kept)
    bool pareto = false;              // no other candidate is at least as good on all three and better on one
};

struct SearchResult
{
    std::vector<PlanCandidate> candidates; // valid and fitting, by T then name
    int invalid = 0;                       // (candidate, T) pairs the planner rejects
    int tooLarge = 0;                      // valid ones that do not fit the device memory
    // Of those, the one that needs the least (memoryBytes; its plan left empty): how far off the
    // machine is when nothing fits.
    std::optional<PlanCandidate> smallestTooLarge;
    // Tensor-parallel sizes asked for (options.maxTp) above the profile's device count: not tried,
    // as `plan validate --hardware` refuses them (feasibilityDiagnostics). 0 when none.
    int beyondDevices = 0;
};

// Candidates: the default plan; attention replicated; the residual stream's norms sequence-parallel;
// KV heads replicated (options.replicateKvHeads);
// the experts split by id (ep_plan: grouped_gemm + ep_dispatch_experts) where the model has experts;
// the head replicated; the plans shipped for the model's type (options.shipped); and `options.plans` — each at T = 1 …
// maxTp, at most the profile's devices, and each valid one also as PP = 2 … maxPp pipeline stages of T GPUs (T × PP
// at most the devices). InvalidArgument for a workload the cost model does not take (checkWorkload) or a profile
// without device memory.
//
// A pipeline (docs/metrics.md): stage s holds layers chunk(L, PP)[s] (the embedding on stage 0, the final norm and
// the head on the last), its time the sum of its layers' predicted time at T; a boundary sends each rank's hidden
// states to the next stage (HardwareProfile::p2pSeconds: over the network where it crosses nodes). Prefill: the
// stages in turn. Decode: the batch in m = min(batch, PP) micro-batches; a token takes max(Σ stages + Σ sends,
// m · (slowest stage + send)); the bubble is what stages wait. Memory: the stage's layers' weights, their share of
// the KV cache, the activation peak and the communication buffer.
//
// Cost: (candidates × maxTp) shardings and three cost estimates each, linear in the model's graph.
Result<SearchResult> searchPlans(const ModelSpec& spec, const HardwareProfile& hw, const SearchOptions& options);


} // namespace tp
