// cost_model.cpp — roofline compute and alpha-beta communication per node (docs/metrics.md).
#include "tp/cost/cost_model.h"

#include "tp/model/arch_traits.h"

#include <algorithm>

namespace tp {

namespace {

class Estimator
{
public:
    Estimator(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw)
        : m_spec(spec)
        , m_g(g)
        , m_hw(hw)
        , m_T(g.tpSize)
        , m_tokens(static_cast<double>(g.options.batch * g.options.seq))
        , m_e(static_cast<double>(g.elementBytes()))
        // Ranks beyond the machine's devices share them.
        , m_share(std::max(1.0, static_cast<double>(g.tpSize) / std::max(hw.devices, 1)))
    {
    }

    CostReport run()
    {
        CostReport c;
        int maxLayer = -1;
        for (const auto& n : m_g.graph.nodes)
            maxLayer = std::max(maxLayer, n.layer);
        c.layers.resize(static_cast<std::size_t>(maxLayer + 2));
        for (std::size_t i = 0; i < c.layers.size(); ++i)
            c.layers[i].layer = static_cast<int>(i) - 1;
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
            cc.bytes = col.bytes(m_g.options.batch, m_g.options.seq, m_g.elementBytes());
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

    double width(int tensor, std::size_t r) const
    {
        return static_cast<double>(m_g.tensors[static_cast<std::size_t>(tensor)].local[r]);
    }

    NodeCost node(int ni) const
    {
        const GraphNode& n = m_g.graph.nodes[static_cast<std::size_t>(ni)];
        NodeCost best;
        best.node = ni;
        best.layer = n.layer;
        for (std::size_t r = 0; r < static_cast<std::size_t>(m_T); ++r) {
            double flops = 0, bytes = 0, gemm = 0;
            switch (n.kind) {
            case OpKind::Linear:
            case OpKind::Router:
                if (const ParamShard* w = param(n.module, "weight")) {
                    const double out = static_cast<double>(w->shapes[r][0]), in = static_cast<double>(w->shapes[r][1]);
                    flops = gemm = 2 * m_tokens * in * out;
                    bytes = static_cast<double>(w->bytes[r]) + m_tokens * (in + out) * m_e;
                    if (const ParamShard* b = param(n.module, "bias"))
                        bytes += static_cast<double>(b->bytes[r]);
                }
                break;
            case OpKind::Embedding:
                if (const ParamShard* w = param(n.module, "weight"))
                    bytes = m_tokens * static_cast<double>(w->shapes[r][1]) * m_e;
                break;
            case OpKind::Attention: {
                const double heads = width(n.outputs[0], r) / static_cast<double>(std::max<std::int64_t>(n.vHeadDim, 1));
                const double B = static_cast<double>(m_g.options.batch), S = static_cast<double>(m_g.options.seq);
                // q·kᵀ and p·v, 2 FLOP per MAC, half of the square under the causal mask.
                flops = B * S * S * heads * static_cast<double>(n.headDim + n.vHeadDim);
                gemm = flops / std::max(1.0, B * heads);
                for (int t : n.inputs)
                    bytes += m_tokens * width(t, r) * m_e;
                bytes += m_tokens * width(n.outputs[0], r) * m_e;
                break;
            }
            case OpKind::Experts: expertCost(n, r, flops, bytes, gemm); break;
            case OpKind::Logits: break;
            default:
                for (int t : n.inputs)
                    bytes += m_tokens * width(t, r) * m_e;
                for (int t : n.outputs)
                    bytes += m_tokens * width(t, r) * m_e;
                break;
            }
            const double t = roofline(flops, bytes, gemm);
            if (t >= best.computeSeconds) {
                best.computeSeconds = t;
                best.flops = flops;
                best.bytes = bytes;
            }
        }
        return best;
    }

    void expertCost(const GraphNode& n, std::size_t r, double& flops, double& bytes, double& gemm) const
    {
        const ParamShard* gu = param(n.module, "gate_up_proj");
        const ParamShard* dn = param(n.module, "down_proj");
        if (!gu || !dn)
            return;
        const bool lastPacked = archTraits(m_spec.config.family).expertsLastPacked;
        const double H = static_cast<double>(m_spec.config.hiddenSize);
        const double localExperts = static_cast<double>(gu->shapes[r][0]);
        const double inter = static_cast<double>(gu->shapes[r][lastPacked ? 2 : 1]) / 2;
        // Routed rows this rank computes: all of them under TP, its experts' share under EP.
        const double rows = m_tokens * static_cast<double>(n.topK) * localExperts / static_cast<double>(std::max<std::int64_t>(n.experts, 1));
        flops = 6 * rows * H * inter;
        const double touched = std::min(localExperts, rows);
        const double perExpert = localExperts > 0 ? static_cast<double>(gu->bytes[r] + dn->bytes[r]) / localExperts : 0;
        bytes = touched * perExpert + rows * (H + 3 * inter + H) * m_e;
        gemm = localExperts > 0 ? flops / std::max(1.0, touched) : 0;
    }

    const ModelSpec& m_spec;
    const ShardedGraph& m_g;
    const HardwareProfile& m_hw;
    const int m_T;
    const double m_tokens, m_e, m_share;
};

} // namespace

CostReport estimateCost(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw)
{
    return Estimator(spec, g, hw).run();
}

std::vector<ScalingPoint> predictScaling(const ModelSpec& spec, const Plan& plan, const ShardOptions& options,
                                         const HardwareProfile& hw, int maxTp)
{
    std::vector<ScalingPoint> out;
    double base = 0;
    for (int t = 1; t <= maxTp; ++t) {
        Plan p = plan;
        p.tpSize = t;
        const ShardedGraph g = shardModel(spec, p, options);
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
            pt.commShare = c.commShare();
            if (t == 1)
                base = pt.seconds;
            pt.speedup = base > 0 && pt.seconds > 0 ? base / pt.seconds : 0;
        }
        out.push_back(std::move(pt));
    }
    return out;
}

} // namespace tp
