// cost_model.cpp — roofline compute and alpha-beta communication per node (docs/metrics.md).
#include "tp/cost/cost_model.h"

#include "tp/core/units.h"
#include "tp/model/arch_traits.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>

namespace tp {

namespace {

class Estimator
{
public:
    Estimator(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw, const Workload& w)
        : m_spec(spec)
        , m_g(g)
        , m_hw(hw)
        , m_w(w)
        , m_T(g.tpSize)
        , m_tokens(static_cast<double>(w.tokens()))
        , m_e(static_cast<double>(g.elementBytes()))
        , m_kv(static_cast<double>(g.kvElementBytes()))
        // Ranks beyond the machine's devices share them.
        , m_share(std::max(1.0, static_cast<double>(g.tpSize) / std::max(hw.totalDevices(), 1)))
        , m_cal(hw.calibratedFor(std::min(g.tpSize, std::max(hw.devices, 1))))
    {
    }

    CostReport run()
    {
        CostReport c;
        c.workload = m_w;
        c.layers.resize(layerSlots(m_g.graph));
        for (std::size_t i = 0; i < c.layers.size(); ++i)
            c.layers[i].layer = static_cast<int>(i) - 1;
        c.nodes.reserve(m_g.graph.nodes.size());
        c.collectives.reserve(m_g.collectives.size());
        for (std::size_t ni = 0; ni < m_g.graph.nodes.size(); ++ni) {
            NodeCost nc = node(static_cast<int>(ni));
            c.computeSeconds += nc.computeSeconds;
            c.layers[static_cast<std::size_t>(nc.layer + 1)].computeSeconds += nc.computeSeconds;
            c.nodes.push_back(nc);
        }
        for (std::size_t ci = 0; ci < m_g.collectives.size(); ++ci) {
            const Collective& col = m_g.collectives[ci];
            CollectiveCost cc;
            cc.collective = static_cast<int>(ci);
            cc.bytes = col.bytes(m_w.batch, m_w.queryTokens, m_g.elementBytes());
            cc.seconds = m_hw.collectiveSeconds(col.kind, cc.bytes, m_T);
            c.commSeconds += cc.seconds;
            c.layers[static_cast<std::size_t>(col.layer + 1)].commSeconds += cc.seconds;
            c.collectives.push_back(cc);
        }
        return c;
    }

private:
    const ParamShard* param(int module, const char* name) const { return m_g.param(module, name); }

    // Roofline: the slower of math at the size-dependent efficiency and memory traffic.
    double roofline(double flops, double bytes, double gemmFlops) const
    {
        const double peak = m_hw.peakFlops(m_g.activationDtype);
        const double tMath = flops > 0 && peak > 0 ? flops / (peak * m_hw.gemmEfficiencyAt(gemmFlops)) : 0.0;
        const double bw = m_hw.memoryBandwidthGBps * 1e9 * m_hw.memoryEfficiency;
        const double tMem = bw > 0 ? bytes / bw : 0.0;
        return std::max(tMath, tMem) * m_share;
    }

    // Σ over this forward's queries i = 1…q (at position past + i) of the keys it sees:
    // min(past + i, window). Prefill (past 0, no window): q(q + 1)/2; a decode step: min(context, window).
    double attendedPairs(std::int64_t window) const
    {
        const double P = static_cast<double>(m_w.pastTokens), q = static_cast<double>(m_w.queryTokens);
        // Queries whose causal span fits in the window: i ≤ window − past.
        const double full = window > 0 ? std::clamp(static_cast<double>(window) - P, 0.0, q) : q;
        return full * P + full * (full + 1) / 2 + (q - full) * static_cast<double>(window);
    }

    // Cached positions (before this forward's tokens) that some query sees: past, or window − 1.
    double cachedPositionsRead(std::int64_t window) const
    {
        const double P = static_cast<double>(m_w.pastTokens);
        return window > 0 ? std::min(P, static_cast<double>(window - 1)) : P;
    }

    // One token's k and v in rank r's cache for this attention node — the same sum as
    // ShardedGraph::memory's kvCacheBytesPerToken, node by node (MLA: the latent and the rope key).
    double cacheBytesPerToken(const GraphNode& n, std::size_t r) const
    {
        if (n.mlaRope > 0)
            return static_cast<double>(n.mlaLatent) * m_kv;
        return (width(n.inputs[1], r) + width(n.inputs[2], r)) * m_kv;
    }

    double width(int tensor, std::size_t r) const
    {
        return static_cast<double>(m_g.tensors[static_cast<std::size_t>(tensor)].local[r]);
    }

    // A calibrated machine: the measured efficiency of the engine's own op at this size, which holds
    // its memory traffic too (no roofline); 0 when the calibration did not measure such an op.
    double calibratedMath(double flops, double efficiency) const
    {
        const double peak = m_hw.peakFlops(m_g.activationDtype);
        return flops > 0 && peak > 0 && efficiency > 0 ? flops / (peak * efficiency) * m_share : 0.0;
    }
    // One query per sequence reads a cache: decode's curve when measured.
    const Curve& attentionCurve() const
    {
        return m_w.queryTokens == 1 && !m_cal->attentionDecode.empty() ? m_cal->attentionDecode : m_cal->attention;
    }
    // A memory-bound op on a calibrated machine: its overhead plus its bytes at the measured rate.
    double calibratedStream(OpKind kind, double bytes) const
    {
        const auto it = m_cal->ops.find(kind);
        return (it->second.first * 1e-6 + bytes / (it->second.second * 1e9)) * m_share;
    }

    NodeCost node(int ni) const
    {
        const GraphNode& n = m_g.graph.nodes[static_cast<std::size_t>(ni)];
        NodeCost best;
        best.node = ni;
        best.layer = n.layer;
        // Looked up once per node, not once per rank.
        const bool hasWeight = n.kind == OpKind::Linear || n.kind == OpKind::Router || n.kind == OpKind::Embedding;
        const ParamShard* w = hasWeight ? param(n.module, "weight") : nullptr;
        const ParamShard* b = w && n.kind != OpKind::Embedding ? param(n.module, "bias") : nullptr;
        // The final norm and the head at each sequence's last position only (lastPositionLogits): B rows.
        const bool lastOnly = static_cast<std::size_t>(ni) < m_g.nodes.size() && m_g.nodes[static_cast<std::size_t>(ni)].lastPositions;
        // A norm or add of sequence parallelism: the rank's token rows (rank 0 has the most).
        const bool onRows = static_cast<std::size_t>(ni) < m_g.nodes.size() && m_g.nodes[static_cast<std::size_t>(ni)].sequenceRows;
        const double tokens = lastOnly ? std::min(m_tokens, static_cast<double>(m_w.batch))
                            : onRows   ? std::ceil(m_tokens / m_T)
                                       : m_tokens;
        for (std::size_t r = 0; r < static_cast<std::size_t>(m_T); ++r) {
            double flops = 0, bytes = 0, gemm = 0, expertRows = 0, expertInter = 0;
            switch (n.kind) {
            case OpKind::Linear:
            case OpKind::Router:
                if (w) {
                    const double out = static_cast<double>(w->shapes[r][0]), in = static_cast<double>(w->shapes[r][1]);
                    flops = gemm = 2 * tokens * in * out;
                    bytes = static_cast<double>(w->bytes[r]) + tokens * (in + out) * m_e;
                    if (b)
                        bytes += static_cast<double>(b->bytes[r]);
                }
                break;
            case OpKind::Embedding:
                if (w)
                    bytes = m_tokens * static_cast<double>(w->shapes[r][1]) * m_e;
                break;
            case OpKind::Attention: {
                const double heads = width(n.outputs[0], r) / static_cast<double>(std::max<std::int64_t>(n.vHeadDim, 1));
                const double B = static_cast<double>(m_w.batch);
                // q·kᵀ and p·v at 2 FLOP per MAC over the (query, key) pairs the causal mask and the
                // window leave.
                flops = 2 * B * attendedPairs(n.window) * heads * static_cast<double>(n.headDim + n.vHeadDim);
                gemm = flops / std::max(1.0, B * heads);
                // This forward's q, k, v and output, then the cached k and v of the past positions
                // the queries see.
                for (int t : n.inputs)
                    bytes += m_tokens * width(t, r) * m_e;
                bytes += m_tokens * width(n.outputs[0], r) * m_e;
                bytes += B * cachedPositionsRead(n.window) * cacheBytesPerToken(n, r);
                if (n.mlaRope > 0) { // Transformers expands the cached latents through kv_b_proj at every forward
                    const double past = B * cachedPositionsRead(n.window), kv = width(n.inputs[1], r);
                    flops += 2 * past * static_cast<double>(n.mlaLatent - n.mlaRope) * kv;
                    bytes += 2 * past * kv * m_e; // the expanded keys and values written, then read
                }
                break;
            }
            case OpKind::Experts: expertCost(n, r, flops, bytes, gemm, expertRows, expertInter); break;
            case OpKind::Logits: break;
            case OpKind::Mixer: // its projections in and out, and each sequence's state read and written once
                for (int t : n.inputs)
                    bytes += tokens * width(t, r) * m_e;
                bytes += tokens * width(n.outputs[0], r) * m_e;
                bytes += 2 * static_cast<double>(m_w.batch) * static_cast<double>(mixerStateBytes(m_spec.config, static_cast<std::int64_t>(m_e)));
                break;
            default:
                for (int t : n.inputs)
                    bytes += tokens * width(t, r) * m_e;
                for (int t : n.outputs)
                    bytes += tokens * width(t, r) * m_e;
                break;
            }
            double t = roofline(flops, bytes, gemm);
            if (m_cal) {
                if ((n.kind == OpKind::Linear || n.kind == OpKind::Router) && w && !m_cal->gemm.empty())
                    t = calibratedMath(flops, m_cal->gemmEfficiency(tokens, static_cast<double>(w->shapes[r][0]),
                                                                    static_cast<double>(w->shapes[r][1])));
                else if (n.kind == OpKind::Attention && !attentionCurve().empty())
                    t = calibratedMath(flops, curveAt(attentionCurve(), gemm / 1e9));
                else if (n.kind == OpKind::Experts && !m_cal->gemm.empty() && flops > 0)
                    t = std::max(calibratedMath(flops, m_cal->gemmEfficiency(expertRows, 2 * expertInter,
                                                                             static_cast<double>(m_spec.config.hiddenSize))),
                                 t);
                else if (m_cal->ops.contains(n.kind))
                    t = calibratedStream(n.kind, bytes);
            }
            if (t >= best.computeSeconds) {
                best.computeSeconds = t;
                best.flops = flops;
                best.bytes = bytes;
            }
        }
        return best;
    }

    // Also the rows each touched expert computes and its intermediate size: its GEMMs' shapes.
    void expertCost(const GraphNode& n, std::size_t r, double& flops, double& bytes, double& gemm, double& rowsPerExpert,
                    double& inter) const
    {
        const ParamShard* gu = m_g.expertsUp(n.module);
        const ParamShard* dn = param(n.module, "down_proj");
        if (!gu || !dn)
            return;
        const bool lastPacked = expertsLastPacked(m_spec.config), gated = param(n.module, "gate_up_proj") != nullptr;
        const double H = static_cast<double>(m_g.graph.tensors[static_cast<std::size_t>(n.outputs[0])].features); // latent or hidden
        const double localExperts = static_cast<double>(gu->shapes[r][0]);
        inter = static_cast<double>(gu->shapes[r][lastPacked ? 2 : 1]) / (gated ? 2 : 1);
        // Routed rows this rank computes: all of them under TP, its experts' share under EP.
        const double rows = m_tokens * static_cast<double>(n.topK) * localExperts / static_cast<double>(std::max<std::int64_t>(n.experts, 1));
        flops = (gated ? 6 : 4) * rows * H * inter;
        const double touched = std::min(localExperts, rows);
        const double perExpert = localExperts > 0 ? static_cast<double>(gu->bytes[r] + dn->bytes[r]) / localExperts : 0;
        bytes = touched * perExpert + rows * (H + (gated ? 3 : 2) * inter + H) * m_e;
        gemm = localExperts > 0 ? flops / std::max(1.0, touched) : 0;
        rowsPerExpert = rows / std::max(1.0, touched);
    }

    const ModelSpec& m_spec;
    const ShardedGraph& m_g;
    const HardwareProfile& m_hw;
    const Workload m_w;
    const int m_T;
    const double m_tokens, m_e, m_kv, m_share;
    const CalibratedFigures* m_cal;
};

} // namespace

Status checkWorkload(const Workload& w)
{
    if (w.batch < 1 || w.batch > kMaxWorkloadBatch)
        return invalidArgument(fmt::format("batch must be from 1 to {}, found {}", kMaxWorkloadBatch, w.batch));
    if (w.queryTokens < 1)
        return invalidArgument(fmt::format("query tokens per sequence must be at least 1, found {}", w.queryTokens));
    if (w.pastTokens < 0)
        return invalidArgument(fmt::format("cached (past) tokens per sequence must be at least 0, found {}", w.pastTokens));
    if (w.queryTokens > kMaxWorkloadContext || w.pastTokens > kMaxWorkloadContext - w.queryTokens)
        return invalidArgument(fmt::format("context (cached + new tokens per sequence) must be at most {}, found {} + {}",
                                           kMaxWorkloadContext, w.pastTokens, w.queryTokens));
    if (w.batch > kMaxWorkloadTokens / w.context())
        return invalidArgument(fmt::format("batch × context must be at most {} tokens, found {} × {}", kMaxWorkloadTokens,
                                           w.batch, w.context()));
    return okStatus();
}

CostReport estimateCost(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw)
{
    return Estimator(spec, g, hw, Workload::prefill(g.options)).run();
}

Result<CostReport> estimateCost(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw,
                                const Workload& w)
{
    TP_RETURN_IF_ERROR(checkWorkload(w));
    // Collective sizes are B·q·rows·features·e in 64 bits: refuse what would not fit.
    for (const Collective& c : g.collectives) {
        const double bytes = static_cast<double>(w.tokens()) * static_cast<double>(c.tokensPerToken)
            * static_cast<double>(c.featuresPerToken) * static_cast<double>(g.elementBytes());
        if (bytes > 0x1p62)
            return invalidArgument(fmt::format("{}: {} of {} tokens would be {:.3g} bytes, too large to model",
                                               c.where, collectiveName(c.kind), w.tokens(), bytes));
    }
    return Estimator(spec, g, hw, w).run();
}

Result<CostReport> estimateDecodeStep(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw,
                                      std::int64_t batch, std::int64_t context)
{
    if (context < 1)
        return invalidArgument(fmt::format("decode context must be at least 1 token, found {}", context));
    return estimateCost(spec, g, hw, Workload::decodeStep(batch, context));
}

Result<double> decodeStepSeconds(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw,
                                 std::int64_t batch, std::int64_t context)
{
    TP_ASSIGN_OR_RETURN(CostReport c, estimateDecodeStep(spec, g, hw, batch, context));
    return c.totalSeconds();
}

std::string kvCacheLayoutText(const ModelSpec& spec, const ShardedGraph& g)
{
    const DType t = g.options.kvCacheDtype.value_or(g.activationDtype);
    const std::string dtype = t == DType::F8E4M3 ? std::string("fp8 (a serving engine's --kv-cache-dtype fp8)")
                            : g.options.kvCacheDtype                 ? std::string(dtypeName(t))
                                                                     : fmt::format("{}, the activations'", dtypeName(t));
    // Windowed layers: how many and what they keep (any rank: every rank has the same layers).
    std::string windows;
    if (!g.memory.empty())
        for (const auto& [kept, perToken] : g.memory.front().kvWindows) {
            int layers = 0;
            bool chunked = false;
            for (const GraphNode& n : g.graph.nodes)
                if (n.kind == OpKind::Attention && (n.window > 0 ? n.window : n.chunk) - 1 == kept) {
                    ++layers;
                    chunked = n.window == 0;
                }
            windows += fmt::format("; {} {} layer{} keep{} the last {} tokens", layers, chunked ? "chunked-attention" : "sliding-window",
                                   layers == 1 ? "" : "s", layers == 1 ? "s" : "", kept);
        }
    // A sparse-attention indexer's keys; the linear-attention and SSM layers' states (per sequence, any context).
    if (std::any_of(spec.modules.begin(), spec.modules.end(), [](const ModuleSpec& m) {
            return m.path.ends_with(".indexer.wk") || m.path.ends_with(".indexer.k_proj") || m.path.ends_with(".indexer.index_qk_proj");
        }))
        windows += "; the sparse-attention indexer's keys, whole on every rank";
    if (!g.memory.empty() && g.memory.front().stateBytes > 0) {
        const auto mixers = std::count_if(g.graph.nodes.begin(), g.graph.nodes.end(), [](const GraphNode& n) { return n.kind == OpKind::Mixer; });
        const std::string bytes = humanBytes(static_cast<double>(g.memory.front().stateBytes));
        windows += mixers > 0 ? fmt::format("; {} linear-attention layer{} keep{} a state of {} per sequence, whatever its length (the "
                                            "convolution's last inputs, float32 recurrent state; whole on every rank)",
                                            mixers, mixers == 1 ? "" : "s", mixers == 1 ? "s" : "", bytes)
                              : fmt::format("; the short convolutions keep {} per sequence (float32)", bytes);
    }
    if (spec.config.isMla())
        return fmt::format("Transformers' layout: MLA's compressed latent and rope key ({} + {} values a token per layer), whole "
                           "on every rank, as vLLM and SGLang cache it too{}; {}",
                           spec.config.kvLoraRank, spec.config.qkRopeHeadDim, windows, dtype);
    if (g.kvHeadReplicas > 1) // not Transformers' (it cannot load the plan): vLLM's
        return fmt::format("vLLM's layout: one whole k and v head a rank per layer, each head on {} ranks (replicate_kv_heads){}; {}",
                           g.kvHeadReplicas, windows, dtype);
    return fmt::format("Transformers' layout: each rank's k and v heads per layer{}; {}", windows, dtype);
}

std::int64_t kvCacheBytesPerToken(const ShardedGraph& g)
{
    std::int64_t most = 0;
    for (const RankMemory& m : g.memory)
        most = std::max(most, m.kvCacheBytesPerToken);
    return most;
}

Result<std::int64_t> kvCacheBytes(const ShardedGraph& g, std::int64_t batch, std::int64_t context)
{
    if (context < 1)
        return invalidArgument(fmt::format("context must be at least 1 token, found {}", context));
    TP_RETURN_IF_ERROR(checkWorkload({.batch = batch, .queryTokens = context, .pastTokens = 0}));
    const std::int64_t perToken = kvCacheBytesPerToken(g);
    // batch · context ≤ 2^36 and a token's cache is far below 2^26 bytes, but check anyway.
    if (perToken > 0 && batch * context > std::numeric_limits<std::int64_t>::max() / perToken)
        return invalidArgument(fmt::format("KV cache of {} × {} tokens overflows", batch, context));
    std::int64_t most = 0;
    for (const RankMemory& m : g.memory)
        most = std::max(most, m.kvCacheBytesAt(context));
    return most * batch;
}

Result<std::int64_t> commBufferBytes(const ShardedGraph& g)
{
    double most = 0;
    for (const Collective& c : g.collectives) {
        const double bytes = c.fixedBytes > 0 ? static_cast<double>(c.fixedBytes)
                                              : static_cast<double>(g.options.batch) * static_cast<double>(c.lastPositions ? 1 : g.options.seq)
                * static_cast<double>(c.tokensPerToken) * static_cast<double>(c.featuresPerToken) * static_cast<double>(g.elementBytes());
        if (bytes > 0x1p62)
            return invalidArgument(fmt::format("{}: {} of {} × {} tokens would be {:.3g} bytes, too large to model", c.where,
                                               collectiveName(c.kind), g.options.batch, g.options.seq, bytes));
        most = std::max(most, bytes);
    }
    return static_cast<std::int64_t>(most);
}

Result<std::vector<RankMemoryUse>> memoryPerRank(const ShardedGraph& g, const HardwareProfile& hw, std::int64_t batch,
                                                 std::int64_t context)
{
    if (!(hw.memoryGiB > 0))
        return invalidArgument(fmt::format("hardware profile '{}' gives no device memory (memory_gib)", hw.id));
    // Bounds checked once, for the rank that holds the most cache: every rank's product fits then.
    TP_RETURN_IF_ERROR(kvCacheBytes(g, batch, context).status());
    TP_ASSIGN_OR_RETURN(const std::int64_t comm, commBufferBytes(g));
    const std::int64_t device = hw.usableMemoryBytes();
    std::vector<RankMemoryUse> out;
    out.reserve(g.memory.size());
    for (std::size_t r = 0; r < g.memory.size(); ++r) {
        const RankMemory& m = g.memory[r];
        RankMemoryUse u;
        u.rank = static_cast<int>(r);
        u.weightBytes = m.weightBytes;
        u.kvCacheBytes = m.kvCacheBytesAt(context) * batch;
        u.activationBytes = m.activationPeakBytes;
        u.commBufferBytes = comm;
        u.deviceBytes = device;
        out.push_back(u);
    }
    return out;
}

Result<MemoryFit> memoryFit(const ShardedGraph& g, const HardwareProfile& hw, std::int64_t batch, std::int64_t context)
{
    TP_ASSIGN_OR_RETURN(const std::vector<RankMemoryUse> ranks, memoryPerRank(g, hw, batch, context));
    MemoryFit f;
    f.deviceBytes = hw.usableMemoryBytes();
    const RankMemoryUse* most = nullptr;
    for (const RankMemoryUse& u : ranks)
        if (!most || u.neededBytes() > most->neededBytes())
            most = &u;
    if (most) {
        f.rank = most->rank;
        f.weightBytes = most->weightBytes;
        f.kvCacheBytes = most->kvCacheBytes;
        f.activationBytes = most->activationBytes;
        f.commBufferBytes = most->commBufferBytes;
        f.neededBytes = most->neededBytes();
    }
    return f;
}

namespace {

// The largest x in [1, hi] for which fits(x) holds, given that it holds for every smaller x (memory
// only grows with context and batch); 0 when fits(1) does not. The first error ends the search.
Result<std::int64_t> largestFitting(std::int64_t hi, const std::function<Result<bool>(std::int64_t)>& fits)
{
    TP_ASSIGN_OR_RETURN(const bool one, fits(1));
    if (!one)
        return std::int64_t(0);
    std::int64_t lo = 1; // fits
    TP_ASSIGN_OR_RETURN(const bool all, fits(hi));
    if (all)
        return hi;
    while (hi - lo > 1) { // fits(lo), not fits(hi)
        const std::int64_t mid = lo + (hi - lo) / 2;
        TP_ASSIGN_OR_RETURN(const bool ok, fits(mid));
        (ok ? lo : hi) = mid;
    }
    return lo;
}

} // namespace

Result<FitLimits> whatFits(const ShardedGraph& g, const HardwareProfile& hw, std::int64_t batch, std::int64_t context,
                           std::int64_t contextLimit)
{
    TP_RETURN_IF_ERROR(checkWorkload({.batch = batch, .queryTokens = context, .pastTokens = 0}));
    auto fitsAt = [&](std::int64_t b, std::int64_t c) -> Result<bool> {
        TP_ASSIGN_OR_RETURN(const MemoryFit f, memoryFit(g, hw, b, c));
        return f.fits();
    };
    FitLimits out;
    const std::int64_t contextHi = std::clamp<std::int64_t>(contextLimit, 1, std::min(kMaxWorkloadContext, kMaxWorkloadTokens / batch));
    TP_ASSIGN_OR_RETURN(out.maxContext, largestFitting(contextHi, [&](std::int64_t c) { return fitsAt(batch, c); }));
    out.contextCapped = out.maxContext == contextHi;
    const std::int64_t batchHi = std::min(kMaxWorkloadBatch, kMaxWorkloadTokens / context);
    TP_ASSIGN_OR_RETURN(out.maxBatch, largestFitting(batchHi, [&](std::int64_t b) { return fitsAt(b, context); }));
    out.batchCapped = out.maxBatch == batchHi;
    return out;
}

std::string whatFitsText(const FitLimits& f, std::int64_t batch, std::int64_t context, std::int64_t maxPositions)
{
    const std::string ctx = f.maxContext == 0 ? fmt::format("not one token of context at batch {}", batch)
                                              : fmt::format("context up to {} tokens at batch {}{}", f.maxContext, batch,
                                                            !f.contextCapped ? ""
                                                            : maxPositions > 0 ? " (the model's max_position_embeddings)"
                                                                               : " (the modelled bound)");
    const std::string bat = f.maxBatch == 0 ? fmt::format("not one sequence at context {}", context)
                                            : fmt::format("batch up to {} at context {}{}", f.maxBatch, context,
                                                          f.batchCapped ? " (the modelled bound)" : "");
    return ctx + " · " + bat;
}

int pipelineStageOf(const std::vector<Interval>& stages, int layer)
{
    for (std::size_t s = 0; s < stages.size(); ++s)
        if (layer < stages[s].offset + stages[s].size)
            return static_cast<int>(s);
    return static_cast<int>(stages.size()) - 1;
}

std::int64_t pipelineStageBytes(const ModelSpec& spec, const ShardedGraph& g, const MemoryFit& fit, int pp)
{
    if (pp <= 1)
        return fit.neededBytes;
    const auto stageOf = [&, stages = chunkSizes(std::max<std::int64_t>(spec.config.numLayers, 1), pp)](int layer) {
        return pipelineStageOf(stages, layer);
    };
    const std::size_t T = static_cast<std::size_t>(std::max(g.tpSize, 1));
    std::vector<std::vector<std::int64_t>> weights(static_cast<std::size_t>(pp), std::vector<std::int64_t>(T, 0));
    for (const ParamShard& p : g.params) {
        const ModuleSpec& m = spec.modules[static_cast<std::size_t>(p.module)];
        std::vector<int> on;
        if (m.layer >= 0)
            on = {stageOf(m.layer)};
        else if (m.kind == ModuleKind::Embedding)
            on = spec.config.tieWordEmbeddings ? std::vector<int>{0, pp - 1} : std::vector<int>{0};
        else if (!p.tied)
            on = {pp - 1};
        for (const int s : on)
            for (std::size_t r = 0; r < p.bytes.size() && r < T; ++r)
                weights[static_cast<std::size_t>(s)][r] += p.bytes[r];
    }
    std::vector<int> cached(static_cast<std::size_t>(pp), 0);
    int cachedAll = 0;
    for (const GraphNode& n : g.graph.nodes)
        if ((n.kind == OpKind::Attention || n.kind == OpKind::Mixer) && n.layer >= 0) {
            ++cached[static_cast<std::size_t>(stageOf(n.layer))];
            ++cachedAll;
        }
    std::int64_t most = 0;
    for (int s = 0; s < pp; ++s) {
        const auto& w = weights[static_cast<std::size_t>(s)];
        const std::int64_t kv = cachedAll > 0 ? fit.kvCacheBytes / cachedAll * cached[static_cast<std::size_t>(s)] : 0;
        most = std::max(most, *std::max_element(w.begin(), w.end()) + kv + fit.activationBytes + fit.commBufferBytes);
    }
    return most;
}

std::vector<Diagnostic> feasibilityDiagnostics(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw,
                                               std::int64_t context)
{
    std::vector<Diagnostic> out;
    if (!g.valid() || !g.plan)
        return out;
    if (g.tpSize > hw.totalDevices())
        out.push_back({Severity::Error, "tp_size",
                       fmt::format("tp_size {} needs {} devices; {} has {}", g.tpSize, g.tpSize, hw.name, hw.totalDevices()),
                       fmt::format("choose T up to {}, or a profile with more devices", hw.totalDevices())});
    else if (hw.spansNodes(g.tpSize)) {
        // Every collective of the group crosses the network: what that costs a forward, against the node's links.
        HardwareProfile oneNode = hw;
        oneNode.nodes = 1;
        oneNode.devices = g.tpSize;
        const double across = estimateCost(spec, g, hw).commSeconds, within = estimateCost(spec, g, oneNode).commSeconds;
        out.push_back({Severity::Warning, "tp_size",
                       fmt::format("tp_size {} spans {} nodes of {} GPU{}: each of its {} collectives a forward crosses {}, "
                                   "predicted {} of communication a forward ({:.1f}x what the same group would take inside one node)",
                                   g.tpSize, (g.tpSize + hw.devices - 1) / hw.devices, hw.devices, hw.devices == 1 ? "" : "s",
                                   g.collectives.size(), hw.network,
                                   humanSeconds(across), within > 0 ? across / within : 0.0),
                       fmt::format("keep tensor parallelism inside a node (T ≤ {}) and split the layers across nodes with "
                                   "pipeline parallelism (plan search shows TP × PP)",
                                   hw.devices)});
    }
    auto fit = memoryFit(g, hw, g.options.batch, context);
    if (!fit) {
        out.push_back({Severity::Error, "memory", fit.status().message(), ""});
        return out;
    }
    // A pipeline (pp_size): T × PP GPUs, and memory the largest stage's.
    if (const int pp = g.plan->ppSize; pp > 1) {
        if (static_cast<std::int64_t>(g.tpSize) * pp > hw.totalDevices())
            out.push_back({Severity::Error, "pp_size",
                           fmt::format("tp_size {} × pp_size {} needs {} devices; {} has {}", g.tpSize, pp, g.tpSize * pp, hw.name,
                                       hw.totalDevices()),
                           "lower tp_size or pp_size, or choose a profile with more devices"});
        const std::int64_t stage = pipelineStageBytes(spec, g, *fit, pp);
        if (stage > fit->deviceBytes)
            out.push_back({Severity::Error, "memory",
                           fmt::format("a rank of the largest of {} pipeline stages needs {} per device (its layers' weights, "
                                       "their share of the KV cache at batch {} × context {}, activations and communication "
                                       "buffers) and {} has {}",
                                       pp, humanBytes(static_cast<double>(stage)), g.options.batch, context, hw.id, hw.usableMemoryText()),
                           "raise tp_size or pp_size, lower batch or context, or choose a device with more memory"});
        return out;
    }
    if (fit->fits())
        return out;
    // The smallest T at which the same plan is valid and fits.
    std::string smallest = "no tp size up to 64 fits";
    LayerGraph graph = buildLayerGraph(spec);
    for (int t = 1; t <= 64; ++t) {
        if (t == g.tpSize)
            continue;
        Plan p = *g.plan;
        p.tpSize = t;
        ShardedGraph other = shardModel(spec, p, g.options, std::move(graph));
        bool ok = false;
        if (other.valid())
            if (auto f = memoryFit(other, hw, g.options.batch, context))
                ok = f->fits();
        graph = std::move(other.graph);
        if (ok) {
            smallest = t > hw.totalDevices() ? fmt::format("the smallest tp size that fits is {}, more than the {} devices of {}",
                                                           t, hw.totalDevices(), hw.id)
                                      : fmt::format("the smallest tp size that fits is {}", t);
            break;
        }
    }
    out.push_back({Severity::Error, "memory",
                   fmt::format("rank {} needs {} per device (weights {}, KV cache {} at batch {} × context {}, "
                               "activations {}, communication buffers {}) and {} has {}: {}",
                               fit->rank, humanBytes(static_cast<double>(fit->neededBytes)),
                               humanBytes(static_cast<double>(fit->weightBytes)), humanBytes(static_cast<double>(fit->kvCacheBytes)),
                               g.options.batch, context, humanBytes(static_cast<double>(fit->activationBytes)),
                               humanBytes(static_cast<double>(fit->commBufferBytes)), hw.id, hw.usableMemoryText(), smallest),
                   "raise tp_size, lower batch or context, or choose a device with more memory"});
    return out;
}

std::vector<ScalingPoint> predictScaling(const ModelSpec& spec, const Plan& plan, const ShardOptions& options,
                                         const HardwareProfile& hw, int maxTp, std::int64_t decodeContext)
{
    const std::int64_t context = decodeContext > 0 ? decodeContext : options.seq;
    std::vector<ScalingPoint> out;
    double base = 0, decodeBase = 0;
    // One layer graph for every T (it depends on the model only): moved into each sharding and back.
    LayerGraph graph = buildLayerGraph(spec);
    for (int t = 1; t <= maxTp; ++t) {
        Plan p = plan;
        p.tpSize = t;
        ShardedGraph g = shardModel(spec, p, options, std::move(graph));
        ScalingPoint pt;
        pt.tp = t;
        pt.valid = g.valid();
        if (!pt.valid) {
            for (const auto& d : g.diagnostics)
                if (d.severity == Severity::Error) {
                    pt.reason = d.where + ": " + d.message;
                    break;
                }
        } else {
            const CostReport c = estimateCost(spec, g, hw);
            pt.seconds = c.totalSeconds();
            for (const CollectiveCost& cc : c.collectives) {
                pt.commBytes += cc.bytes;
                pt.commBytesPerRank += static_cast<std::int64_t>(
                    busBandwidthFactor(g.collectives[static_cast<std::size_t>(cc.collective)].kind, t) * static_cast<double>(cc.bytes));
            }
            pt.commShare = c.commShare();
            if (t == 1)
                base = pt.seconds;
            pt.speedup = base > 0 && pt.seconds > 0 ? base / pt.seconds : 0;
            pt.kvCacheBytesPerToken = kvCacheBytesPerToken(g);
            if (auto d = estimateDecodeStep(spec, g, hw, options.batch, context)) {
                pt.decodeStepSeconds = d->totalSeconds();
                pt.decodeCommShare = d->commShare();
                for (const CollectiveCost& cc : d->collectives)
                    pt.decodeCommBytes += cc.bytes;
                pt.decodeTokensPerSecond = pt.decodeStepSeconds > 0 ? static_cast<double>(options.batch) / pt.decodeStepSeconds : 0;
                if (t == 1)
                    decodeBase = pt.decodeStepSeconds;
                pt.decodeSpeedup = decodeBase > 0 && pt.decodeStepSeconds > 0 ? decodeBase / pt.decodeStepSeconds : 0;
            }
            if (auto kv = kvCacheBytes(g, options.batch, context))
                pt.kvCacheBytes = *kv;
            if (auto fit = memoryFit(g, hw, options.batch, context)) {
                pt.memoryRank = fit->rank;
                pt.memoryBytes = fit->neededBytes;
                pt.deviceBytes = fit->deviceBytes;
                pt.fits = fit->fits();
            }
        }
        graph = std::move(g.graph);
        out.push_back(std::move(pt));
    }
    return out;
}

} // namespace tp
