// compare.cpp — measured against predicted, layer by layer (compare.h).
#include "tp/cost/compare.h"

#include "tp/core/digest.h"
#include "tp/core/json.h"
#include "tp/cost/cost_model.h"
#include "tp/model/dtype.h"
#include "tp/plan/plan_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace tp {

double PhaseComparison::worstLayerError() const
{
    double worst = 0;
    for (const LayerComparison& l : layers)
        if (std::abs(l.error()) > std::abs(worst))
            worst = l.error();
    return worst;
}

namespace {

// A layer's measured time is its median over the run's samples (prefill iterations, sampled decode
// steps) where the record has them: one forward's spans are a single sample, and one preemption of a
// rank's thread on a busy host makes that layer several times slower than the phase's median. Records
// without samples fall back to the spans.
bool hasSamples(const std::vector<LayerTiming>& measured)
{
    return !measured.empty() && std::all_of(measured.begin(), measured.end(), [](const LayerTiming& t) { return t.hasSpread; });
}

PhaseComparison phase(const std::vector<LayerTiming>& measured, const CostReport& predicted, double measuredUs)
{
    PhaseComparison p;
    p.measuredUs = measuredUs;
    p.predictedUs = predicted.totalSeconds() * 1e6;
    const bool medians = hasSamples(measured);
    for (const LayerTiming& m : measured) {
        LayerComparison l;
        l.layer = m.layer;
        l.measuredUs = medians ? m.medianUs : m.computeUs + m.commUs;
        for (const LayerCost& c : predicted.layers)
            if (c.layer == m.layer) {
                l.predictedComputeUs = c.computeSeconds * 1e6;
                l.predictedCommUs = c.commSeconds * 1e6;
                l.predictedUs = l.predictedComputeUs + l.predictedCommUs;
            }
        p.layers.push_back(l);
    }
    return p;
}

} // namespace

std::string modelDigest(const ModelSpec& spec)
{
    Digest d;
    d.add(spec.className);
    for (const auto& m : spec.modules)
        for (const auto& p : m.params) {
            d.add(m.path).add(p.name).add(std::int64_t(p.dtype)).add(std::int64_t(p.shape.size()));
            for (auto x : p.shape)
                d.add(x);
        }
    return d.hex();
}

std::string configDigest(std::string_view configJson)
{
    const nlohmann::json j = nlohmann::json::parse(configJson, nullptr, false);
    return Digest().add(j.is_discarded() ? std::string(configJson) : j.dump()).hex(); // keys sorted, no layout
}

std::string planDigest(const Plan& plan, const ModelSpec& spec)
{
    Plan p = plan;
    p.tpSize = 1;
    return Digest().add(planToJson(p, &spec)).hex();
}

Result<std::vector<RunComparison>> compareRecord(const RunRecord& record, const ModelSpec& spec, std::string_view configJson,
                                                 const Plan& plan, const HardwareProfile& hw)
{
    const RunSettings& s = record.settings;
    if (!s.modelDigest.empty() && s.modelDigest != modelDigest(spec))
        return invalidArgument(fmt::format("the model at '{}' is not the one the record ran: its tensors differ (digest {} "
                                           "in the record, {} now)",
                                           terminalSafe(s.modelPath.empty() ? s.model : s.modelPath), s.modelDigest, modelDigest(spec)));
    if (!s.configDigest.empty() && s.configDigest != configDigest(configJson))
        return invalidArgument(fmt::format("the model at '{}' is not the one the record ran: its config differs (digest {} "
                                           "in the record, {} now)",
                                           terminalSafe(s.modelPath.empty() ? s.model : s.modelPath), s.configDigest,
                                           configDigest(configJson)));
    if (!s.planDigest.empty() && s.planDigest != planDigest(plan, spec))
        return invalidArgument(fmt::format("the plan '{}' is not the one the record ran: it shards otherwise (digest {} in "
                                           "the record, {} now)",
                                           terminalSafe(s.planPath.empty() ? s.plan : s.planPath), s.planDigest, planDigest(plan, spec)));
    const std::optional<DType> dtype = s.dtype == "bf16" ? std::optional(DType::BF16)
                                     : s.dtype == "f16"  ? std::optional(DType::F16)
                                                         : std::optional(DType::F32);
    const ShardOptions options{.batch = s.batch, .seq = s.seq, .activationDtype = dtype,
                               .lastPositionLogits = s.logits == "last"};
    TP_RETURN_IF_ERROR(checkWorkload(Workload::prefill(options)));
    std::vector<RunComparison> out;
    for (const TpRun& run : record.runs) {
        Plan p = plan;
        p.tpSize = run.tp;
        const ShardedGraph g = shardModel(spec, p, options);
        if (!g.valid())
            return invalidArgument(fmt::format("the plan is not valid at tp_size {} for {}", run.tp, s.model));
        RunComparison c;
        c.tp = run.tp;
        c.prefill = phase(run.layers, estimateCost(spec, g, hw), run.medianSeconds * 1e6);
        if (run.decode.steps > 0) {
            // Decode step i holds the prompt, the i tokens before it and its own: context seq + i + 1.
            // Layer medians over the sampled steps are predicted at the middle step's context, one
            // step's spans at that step's.
            c.decodeContext = s.seq + run.decode.steps / 2 + 1;
            const std::int64_t layerContext = hasSamples(run.decode.layers) ? c.decodeContext
                                                                            : s.seq + std::max(run.decode.spanStep, 0) + 1;
            TP_ASSIGN_OR_RETURN(CostReport layers, estimateDecodeStep(spec, g, hw, s.batch, layerContext));
            TP_ASSIGN_OR_RETURN(CostReport step, estimateDecodeStep(spec, g, hw, s.batch, c.decodeContext));
            PhaseComparison d = phase(run.decode.layers, layers, run.decode.itlSeconds * 1e6);
            d.predictedUs = step.totalSeconds() * 1e6;
            c.decode = std::move(d);
        }
        out.push_back(std::move(c));
    }
    return out;
}

} // namespace tp
