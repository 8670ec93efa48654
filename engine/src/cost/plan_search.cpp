// plan_search.cpp — candidate plans, costed and filtered (see plan_search.h).
#include "tp/cost/plan_search.h"

#include "tp/cost/cost_model.h"
#include "tp/plan/plan_io.h"
#include "tp/plan/shipped.h"
#include "tp/shard/sharded_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace tp {

namespace {

bool hasKey(const Plan& p, const std::string& key)
{
    return std::any_of(p.entries.begin(), p.entries.end(), [&](const PlanEntry& e) { return e.key == key; });
}

// The default plan with every attention key replicated; nullopt when it has none.
std::optional<Plan> attentionReplicated(Plan p)
{
    bool changed = false;
    for (auto& e : p.entries)
        if (e.key.find(".self_attn.") != std::string::npos && e.style != "replicate") {
            e.style = "replicate";
            changed = true;
        }
    return changed ? std::optional<Plan>(std::move(p)) : std::nullopt;
}

// The norms of the residual stream (each layer's outside the attention, and the final one)
// sequence-parallel; nullopt without such norms.
std::optional<Plan> sequenceParallel(const ModelSpec& spec, Plan p)
{
    std::set<std::string> keys;
    for (const ModuleSpec& m : spec.modules)
        if (m.kind == ModuleKind::RmsNorm && m.path.find(".self_attn.") == std::string::npos
            && (m.path == "model.norm" || m.path.ends_with("layernorm")))
            keys.insert(wildcardName(m.path, p.profile));
    if (keys.empty())
        return std::nullopt;
    for (const std::string& k : keys)
        if (!hasKey(p, k))
            p.entries.push_back({k, "sequence_parallel"});
    return p;
}

// The experts split by id as Transformers 5.24's ep_plan runs them (grouped_gemm on every expert
// parameter, ep_dispatch_experts on the experts module), the rest as the default; nullopt without experts.
std::optional<Plan> expertParallel(const ModelSpec& spec, Plan p)
{
    std::set<std::string> modules, params;
    for (const ModuleSpec& m : spec.modules)
        if (m.kind == ModuleKind::Experts) {
            modules.insert(wildcardName(m.path, p.profile));
            for (const ParamSpec& w : m.params)
                params.insert(wildcardName(m.paramPath(w), p.profile));
        }
    if (modules.empty())
        return std::nullopt;
    std::erase_if(p.entries, [&](const PlanEntry& e) { return modules.contains(e.key) || params.contains(e.key); });
    for (const std::string& k : params)
        p.entries.push_back({k, "grouped_gemm"});
    for (const std::string& k : modules)
        p.entries.push_back({k, "ep_dispatch_experts"});
    return p;
}

// The head replicated: every rank computes all logits, no gather; nullopt when the plan does not shard it.
std::optional<Plan> headReplicated(Plan p)
{
    for (auto& e : p.entries)
        if (e.key == "lm_head" && e.style != "replicate") {
            e.style = "replicate";
            return p;
        }
    return std::nullopt;
}

// The default with KV heads replicated (Plan::replicateKvHeads) where T is a multiple of the key/value heads and above
// them; nullopt elsewhere (and for MLA, whose latent is whole on every rank).
std::optional<Plan> kvHeadsReplicated(const ModelSpec& spec, Plan p)
{
    const std::int64_t kv = spec.config.numKvHeads;
    if (spec.config.isMla() || kv <= 0 || p.tpSize <= kv || p.tpSize % kv != 0)
        return std::nullopt;
    p.replicateKvHeads = true;
    return p;
}

// The plan as exported (every default key it drops written as "replicate"), its lines sorted: equal
// for two plans Transformers loads alike, whatever their key order.
std::string canonical(const ModelSpec& spec, const Plan& p)
{
    const std::string text = planToJson(p, &spec);
    std::vector<std::string_view> lines;
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        lines.push_back(std::string_view(text).substr(at, end - at));
        at = end + 1;
    }
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const std::string_view l : lines)
        out.append(l).append(1, '\n');
    return out;
}

// The candidate's times and memory as `pp` pipeline stages of the sharded graph `g` (pp 1: the graph as it is); see
// plan_search.h. `prefill` is g's prefill estimate, `fit` its memory at batch × context.
Status pipeline(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw, std::int64_t batch, std::int64_t context,
                const CostReport& prefill, const MemoryFit& fit, PlanCandidate& c)
{
    const int pp = c.pp, T = c.tp;
    const std::int64_t micro = std::min<std::int64_t>(batch, pp), rows = (batch + micro - 1) / micro;
    TP_ASSIGN_OR_RETURN(const CostReport decode, estimateDecodeStep(spec, g, hw, rows, context));
    const auto stageOf = [&, stages = chunkSizes(std::max<std::int64_t>(spec.config.numLayers, 1), pp)](int layer) {
        return pipelineStageOf(stages, layer);
    };
    // Seconds per stage: its layers, and what is outside them (embedding, final norm, head) on the last.
    auto perStage = [&](const CostReport& r) {
        std::vector<double> t(static_cast<std::size_t>(pp), 0.0);
        for (const LayerCost& l : r.layers)
            t[static_cast<std::size_t>(l.layer < 0 ? pp - 1 : stageOf(l.layer))] += l.computeSeconds + l.commSeconds;
        return t;
    };
    const std::vector<double> pre = perStage(prefill), dec = perStage(decode);
    // Each boundary: every rank sends its (replicated) hidden states to its peer of the next stage.
    const double e = static_cast<double>(g.elementBytes()), H = static_cast<double>(spec.config.hiddenSize);
    double ttft = 0, latency = 0, slowest = 0, busy = 0;
    for (int s = 0; s < pp; ++s) {
        const bool last = s == pp - 1;
        const bool across = T >= hw.devices || ((s + 1) * T) % std::max(hw.devices, 1) == 0;
        const double sendPrefill = last ? 0 : hw.p2pSeconds(static_cast<std::int64_t>(static_cast<double>(batch * g.options.seq) * H * e), across);
        const double sendDecode = last ? 0 : hw.p2pSeconds(static_cast<std::int64_t>(static_cast<double>(rows) * H * e), across);
        ttft += pre[static_cast<std::size_t>(s)] + sendPrefill;
        latency += dec[static_cast<std::size_t>(s)] + sendDecode;
        slowest = std::max(slowest, dec[static_cast<std::size_t>(s)] + sendDecode);
        busy += dec[static_cast<std::size_t>(s)];
    }
    c.ttftSeconds = ttft;
    c.itlSeconds = std::max(latency, static_cast<double>(micro) * slowest);
    c.bubble = pp > 1 && c.itlSeconds > 0 ? std::max(0.0, 1.0 - static_cast<double>(micro) * busy / pp / c.itlSeconds) : 0.0;
    c.tokensPerSecondPerGpu = c.itlSeconds > 0 ? static_cast<double>(batch) / c.itlSeconds / (T * pp) : 0;
    if (pp == 1) {
        c.memoryBytes = fit.neededBytes;
        c.headroomBytes = fit.deviceBytes - fit.neededBytes;
        return {};
    }
    c.memoryBytes = pipelineStageBytes(spec, g, fit, pp);
    c.headroomBytes = fit.deviceBytes - c.memoryBytes;
    return {};
}

// a is at least as good as b on every objective and better on one.
bool dominates(const PlanCandidate& a, const PlanCandidate& b)
{
    const bool noWorse = a.ttftSeconds <= b.ttftSeconds && a.itlSeconds <= b.itlSeconds
        && a.tokensPerSecondPerGpu >= b.tokensPerSecondPerGpu;
    const bool better = a.ttftSeconds < b.ttftSeconds || a.itlSeconds < b.itlSeconds
        || a.tokensPerSecondPerGpu > b.tokensPerSecondPerGpu;
    return noWorse && better;
}

} // namespace

Result<SearchResult> searchPlans(const ModelSpec& spec, const HardwareProfile& hw, const SearchOptions& o)
{
    const std::int64_t context = o.context > 0 ? o.context : o.seq;
    TP_RETURN_IF_ERROR(checkWorkload({o.batch, o.seq, 0}).withContext("prefill"));
    TP_RETURN_IF_ERROR(checkWorkload(Workload::decodeStep(o.batch, context)).withContext("decode"));
    if (!(hw.memoryGiB > 0))
        return invalidArgument(fmt::format("hardware profile '{}' gives no device memory (memory_gib)", hw.id));
    const int asked = o.maxTp > 0 ? o.maxTp : std::clamp(hw.totalDevices(), 1, 64);
    const int maxTp = std::min(asked, std::max(hw.totalDevices(), 1)); // one feasibility rule: T needs T devices
    const int maxPp = static_cast<int>(std::clamp<std::int64_t>(o.maxPp > 0 ? o.maxPp : hw.nodes, 1, std::max<std::int64_t>(spec.config.numLayers, 1)));

    // The given plans, then each shipped one not given under its name.
    std::vector<NamedPlan> extra = o.plans;
    if (o.shipped) {
        TP_ASSIGN_OR_RETURN(std::vector<ShippedPlan> shipped, shippedPlans(spec));
        for (ShippedPlan& p : shipped)
            if (std::none_of(extra.begin(), extra.end(), [&](const NamedPlan& e) { return e.name == p.name; }))
                extra.push_back({p.name, fmt::format("plans/{}: {}", p.file, p.description), std::move(p.plan)});
    }

    SearchResult out;
    out.beyondDevices = asked - maxTp;
    LayerGraph graph = buildLayerGraph(spec); // the model's alone: moved into each sharding and back
    ShardOptions so;
    so.batch = o.batch;
    so.seq = o.seq;
    so.activationDtype = o.activationDtype;
    so.kvCacheDtype = o.kvCacheDtype;
    so.lastPositionLogits = true; // as generate() computes the prompt
    for (int t = 1; t <= maxTp; ++t) {
        const Plan base = defaultPlan(spec, t);
        struct Tried
        {
            std::string name, description;
            std::optional<Plan> plan;
        };
        std::vector<Tried> plans;
        plans.push_back({"default", "the class's default tp_plan, as Transformers resolves it", base});
        plans.push_back({"attention replicated",
                         "the default with every attention projection replicated: no collective in attention, every rank "
                         "keeps all KV heads",
                         attentionReplicated(base)});
        plans.push_back({"sequence parallel",
                         "the default with the residual stream's norms sequence_parallel: a reduce-scatter and an "
                         "all-gather for each all-reduce, norms and adds on token-row shards",
                         sequenceParallel(spec, base)});
        plans.push_back({"expert parallel",
                         "the experts split by id as Transformers' ep_plan runs them (grouped_gemm, ep_dispatch_experts), "
                         "the rest as the default",
                         expertParallel(spec, base)});
        plans.push_back({"head replicated", "the default with lm_head replicated: every rank computes all logits, no gather",
                         headReplicated(base)});
        plans.push_back({"KV heads replicated",
                         "the default with each key/value head on T / KV ranks, as vLLM and SGLang run T above the KV heads "
                         "(replicate_kv_heads: the pinned Transformers cannot load it)",
                         o.replicateKvHeads ? kvHeadsReplicated(spec, base) : std::nullopt});
        for (const NamedPlan& p : extra)
            plans.push_back({p.name, p.description, p.plan});
        std::vector<std::pair<std::string, int>> seen; // this T's plans so far: canonical form → candidate index or -1
        for (auto& [name, description, plan] : plans) {
            if (!plan || (t == 1 && name != "default"))
                continue; // at T = 1 nothing is split: every candidate is the default
            plan->tpSize = t;
            // A plan equal to an earlier one (a shipped file of a built-in candidate) is tried once, named once.
            std::string form = canonical(spec, *plan);
            if (const auto same = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == form; });
                same != seen.end()) {
                if (same->second >= 0)
                    out.candidates[static_cast<std::size_t>(same->second)].description += fmt::format("; the same as '{}'", name);
                continue;
            }
            seen.emplace_back(std::move(form), -1);
            ShardedGraph g = shardModel(spec, *plan, so, std::move(graph));
            if (!g.valid()) {
                ++out.invalid;
                graph = std::move(g.graph);
                continue;
            }
            const CostReport prefill = estimateCost(spec, g, hw);
            TP_ASSIGN_OR_RETURN(const MemoryFit fit, memoryFit(g, hw, o.batch, context));
            for (int pp = 1; pp <= maxPp && t * pp <= hw.totalDevices(); ++pp) {
                // Stages of T GPUs laid out node by node: a layout where a stage's TP group would straddle two nodes
                // (T = 3 on nodes of 8) is not tried.
                if (pp > 1 && t < hw.devices && hw.devices % t != 0)
                    continue;
                PlanCandidate c;
                c.name = name;
                c.description = description;
                c.tp = t;
                c.pp = pp;
                c.spansNodes = hw.spansNodes(t);
                TP_RETURN_IF_ERROR(pipeline(spec, g, hw, o.batch, context, prefill, fit, c));
                if (c.headroomBytes < 0) {
                    ++out.tooLarge;
                    if (!out.smallestTooLarge || c.memoryBytes < out.smallestTooLarge->memoryBytes)
                        out.smallestTooLarge = std::move(c);
                    continue;
                }
                c.plan = *plan;
                c.plan.ppSize = pp;
                if (pp == 1)
                    seen.back().second = static_cast<int>(out.candidates.size());
                out.candidates.push_back(std::move(c));
            }
            graph = std::move(g.graph);
        }
    }
    for (PlanCandidate& c : out.candidates)
        c.pareto = std::none_of(out.candidates.begin(), out.candidates.end(),
                                [&](const PlanCandidate& other) { return dominates(other, c); });
    return out;
}

} // namespace tp
