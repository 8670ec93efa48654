// program.cpp — lowering a sharded graph for one rank (see program.h).
#include "program.h"

#include "tp/model/arch_traits.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <limits>

#include <numeric>

namespace tp::detail {

namespace {

constexpr std::int64_t kAlignment = 256;

class Lowering
{
public:
    Lowering(const ModelSpec& spec, const ShardedGraph& g, int rank, std::int64_t batch, std::int64_t seq,
             std::int64_t decodeSteps, bool lastPositionLogits, const Backend& be, bool columnGather)
        : m_columnGather(columnGather)
        , m_lastPositionLogits(lastPositionLogits)
        , m_spec(spec)
        , m_g(g)
        , m_r(rank)
        , m_batch(batch)
        , m_seq(seq)
        , m_decode(decodeSteps)
        , m_be(be)
    {
    }

    Result<RankProgram> run()
    {
        m_p.rank = m_r;
        m_p.context = m_seq + m_decode;
        weights();
        const auto& nodes = m_g.graph.nodes;
        m_p.collectiveOf.assign(nodes.size(), -1);
        for (std::size_t c = 0; c < m_g.collectives.size(); ++c) {
            const int node = m_g.collectives[c].node;
            if (const int d = m_g.nodes[static_cast<std::size_t>(node)].dispatch; d >= 0 && static_cast<int>(c) >= d && static_cast<int>(c) < d + 3)
                continue; // the counts', dispatch and combine all-to-alls, inside the experts node's op
            if (m_p.collectiveOf[static_cast<std::size_t>(node)] >= 0)
                return fail(nodes[static_cast<std::size_t>(node)],
                            "issues more than one collective (expert dispatch), which the engine does not execute");
            m_p.collectiveOf[static_cast<std::size_t>(node)] = static_cast<int>(c);
        }
        // Steps of the arena's timeline: prefill's nodes, then a decode step's; the KV caches span both.
        const int steps = static_cast<int>(nodes.size()) + 1;
        caches(m_decode > 0 ? 2 * steps : steps);
        if (m_lastPositionLogits != m_g.options.lastPositionLogits)
            return Status(StatusCode::FailedPrecondition,
                          fmt::format("rank {}: the run keeps the logits at {} but the graph was sharded for {}", m_r,
                                      m_lastPositionLogits ? "the last positions" : "every position",
                                      m_g.options.lastPositionLogits ? "the last positions" : "every position"));
        m_p.phases.reserve(2);
        TP_RETURN_IF_ERROR(phase(m_batch * m_seq, m_seq, 0, m_lastPositionLogits));
        if (m_decode > 0)
            TP_RETURN_IF_ERROR(phase(m_batch, 1, steps, false));
        m_p.arenaBytes = planArena(m_p.blocks, kAlignment);
        return std::move(m_p);
    }

private:
    // --- weights ------------------------------------------------------------------------------
    void weights()
    {
        std::int64_t at = 0;
        std::vector<int> ownerOf(m_g.params.size(), -1);
        for (std::size_t i = 0; i < m_g.params.size(); ++i) {
            const ParamShard& s = m_g.params[i];
            const auto& shape = s.shapes[static_cast<std::size_t>(m_r)];
            std::int64_t rows = 1, cols = shape.empty() ? 1 : shape.back();
            for (std::size_t d = 0; d + 1 < shape.size(); ++d)
                rows *= shape[d];
            m_p.weightShapes.push_back({rows, cols});
            m_p.weightOffsets.push_back(-1);
            const ParamSpec& p = paramSpec(s);
            if (!p.tiedTo.empty())
                for (std::size_t j = 0; j < i; ++j)
                    if (m_g.params[j].path == p.tiedTo)
                        m_p.weightOffsets[i] = m_p.weightOffsets[j];
            if (m_p.weightOffsets[i] < 0) {
                m_p.weightOffsets[i] = at;
                at += align(dtypeBytes(m_be.storage(), rows * cols));
            }
        }
        m_p.weightBytes = at;
    }

    // --- phases and caches ----------------------------------------------------------------------
    Status phase(std::int64_t tokens, std::int64_t seq, int firstStep, bool lastPositions)
    {
        const std::size_t nodes = m_g.graph.nodes.size();
        m_ph = &m_p.phases.emplace_back();
        m_ph->tokens = m_n = tokens;
        m_ph->seq = seq;
        m_ph->rows = sequenceRows(tokens, m_g.tpSize, m_r);
        m_ph->lastPositions.assign(nodes, false);
        if (lastPositions)
            for (std::size_t i = 0; i < nodes && i < m_g.nodes.size(); ++i)
                m_ph->lastPositions[i] = m_g.nodes[i].lastPositions;
        m_ph->gathered.assign(nodes, -1);
        m_t0 = firstStep;
        m_ph->opOutput.assign(nodes, -1);
        m_ph->scratch.assign(nodes, -1);
        m_ph->collectives.assign(m_g.collectives.size(), {});
        m_ph->attention.assign(nodes, {});
        m_ph->experts.assign(nodes, {});
        m_ph->dispatch.assign(nodes, {});
        graphTensors();
        for (std::size_t i = 0; i < nodes; ++i)
            TP_RETURN_IF_ERROR(node(static_cast<int>(i)));
        return {};
    }

    // Rows of what node ni writes: B·S, or B where it runs at the last positions only.
    bool atLast(int ni) const { return ni >= 0 && m_ph->lastPositions[static_cast<std::size_t>(ni)]; }
    std::int64_t rowsOf(int ni) const { return atLast(ni) ? m_batch : m_n; }

    // Keys and values of every position of the run, per attention node: [B · context, kv width]; the mixers' states.
    void caches(int steps)
    {
        m_p.kvCache.assign(m_g.graph.nodes.size(), {-1, -1});
        for (std::size_t i = 0; i < m_g.graph.nodes.size(); ++i) {
            const GraphNode& n = m_g.graph.nodes[i];
            if (n.kind != OpKind::Attention)
                continue;
            int kv[2];
            // MLA caches each head's expanded key [k_nope | k_pe] and value, as Transformers' expand_kv
            // makes them.
            const std::int64_t mlaHeads = n.mlaRope > 0 ? m_g.tensors[static_cast<std::size_t>(n.inputs[0])].local[static_cast<std::size_t>(m_r)] / n.headDim : 0;
            for (int j = 0; j < 2; ++j) {
                const std::int64_t cols = n.mlaRope > 0 ? mlaHeads * (j == 0 ? n.headDim : n.vHeadDim)
                                                        : m_g.tensors[static_cast<std::size_t>(n.inputs[1 + j])].local[static_cast<std::size_t>(m_r)];
                const std::int64_t rows = m_batch * m_p.context, bytes = dtypeBytes(m_be.storage(), rows * cols);
                m_p.blocks.push_back({bytes, 0, steps - 1, -1});
                m_p.cache.push_back({static_cast<int>(m_p.blocks.size()) - 1, 0, rows, cols, m_be.storage(), 0});
                m_p.cacheBytes += align(bytes);
                kv[j] = static_cast<int>(m_p.cache.size()) - 1;
            }
            m_p.kvCache[i] = {kv[0], kv[1]};
        }
        // The mixers' recurrent states (a sequence mixer runs whole on every rank).
        m_p.mixerState.assign(m_g.graph.nodes.size(), {-1, -1});
        for (std::size_t i = 0; i < m_g.graph.nodes.size(); ++i) {
            const GraphNode& n = m_g.graph.nodes[i];
            if (n.kind != OpKind::Mixer || n.convKernel < 1)
                continue;
            int st[2] = {-1, -1};
            for (int j = 0; j < (scanStateWidth(n) > 0 ? 2 : 1); ++j) {
                const std::int64_t rows = j == 0 ? m_batch * n.convKernel : m_batch;
                const std::int64_t cols = j == 0 ? convChannels(n) : scanStateWidth(n);
                const DType t = j == 0 ? m_be.storage() : DType::F32;
                const std::int64_t bytes = dtypeBytes(t, rows * cols);
                m_p.blocks.push_back({bytes, 0, steps - 1, -1});
                m_p.cache.push_back({static_cast<int>(m_p.blocks.size()) - 1, 0, rows, cols, t, 0});
                m_p.cacheBytes += align(bytes);
                st[j] = static_cast<int>(m_p.cache.size()) - 1;
            }
            m_p.mixerState[i] = {st[0], st[1]};
        }
    }

    // A mixer's convolved channels (Mamba 2: x, B and C; the gated delta rule: q, k and v) and the width of a sequence's
    // F32 recurrent state (Mamba 2: [channel, state]; the gated delta rule: [value channel, key dim] per value head).
    static bool isDeltaRule(const GraphNode& n)
    {
        return n.mixer == LayerLayout::Mixer::GatedDeltaNet || n.mixer == LayerLayout::Mixer::GatedDeltaNetSplit;
    }
    static std::int64_t convChannels(const GraphNode& n)
    {
        return isDeltaRule(n) ? 2 * n.kvHeads * n.headDim + n.heads * n.vHeadDim : n.heads * n.headDim + 2 * n.groups * n.ssmState;
    }
    static std::int64_t scanStateWidth(const GraphNode& n) // 0: none (LFM2's short convolution)
    {
        return isDeltaRule(n) ? n.heads * n.vHeadDim * n.headDim : n.heads * n.headDim * n.ssmState;
    }

    // --- tensors ------------------------------------------------------------------------------
    static std::int64_t align(std::int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

    // A block live over steps [first, last] of the current phase.
    int block(std::int64_t bytes, int first, int last)
    {
        m_p.blocks.push_back({bytes, m_t0 + first, m_t0 + last, -1});
        return static_cast<int>(m_p.blocks.size()) - 1;
    }

    int tensor(int blockIndex, std::int64_t rows, std::int64_t cols, DType t, std::int64_t within = 0, std::int64_t stride = 0)
    {
        m_ph->tensors.push_back({blockIndex, within, rows, cols, t, stride});
        return static_cast<int>(m_ph->tensors.size()) - 1;
    }

    // One block per graph tensor, live from its producer to its last consumer (the logits to the end).
    void graphTensors()
    {
        const auto& gts = m_g.graph.tensors;
        const int end = static_cast<int>(m_g.graph.nodes.size());
        std::vector<int> last(gts.size(), -1);
        for (std::size_t i = 0; i < m_g.graph.nodes.size(); ++i)
            for (int t : m_g.graph.nodes[i].inputs)
                last[static_cast<std::size_t>(t)] = m_g.graph.nodes[i].kind == OpKind::Logits ? end : static_cast<int>(i);
        for (std::size_t t = 0; t < gts.size(); ++t) {
            const int producer = gts[t].producer;
            if (producer < 0) { // the token ids: uploaded with the inputs
                tensor(-1, 1, m_n, DType::I32);
                continue;
            }
            const GraphNode& pn = m_g.graph.nodes[static_cast<std::size_t>(producer)];
            const DType dt = pn.kind == OpKind::Router ? DType::F32 : m_be.storage(); // router scores stay fp32 for top-k
            const std::int64_t cols = m_g.tensors[t].local[static_cast<std::size_t>(m_r)];
            const int lastUse = std::max(last[t], producer);
            const std::int64_t rows = m_g.tensors[t].layout == Layout::ShardSeq ? m_ph->rows.size : rowsOf(producer);
            tensor(block(dtypeBytes(dt, rows * cols), producer, lastUse), rows, cols, dt);
        }
    }

    const ParamSpec& paramSpec(const ParamShard& s) const
    {
        return m_spec.modules[static_cast<std::size_t>(s.module)].params[static_cast<std::size_t>(s.param)];
    }

    const ParamShard* param(const GraphNode& n, std::string_view name) const { return m_g.param(n.module, name); }
    std::pair<std::int64_t, std::int64_t> wshape(const ParamShard* s) const
    {
        return m_p.weightShapes[static_cast<std::size_t>(s - m_g.params.data())];
    }
    std::int64_t width(int graphTensor) const { return m_ph->tensors[static_cast<std::size_t>(graphTensor)].cols; }

    Status fail(const GraphNode& n, const std::string& what) const
    {
        return Status(StatusCode::FailedPrecondition, fmt::format("rank {}, node {}: {}", m_r, n.name, what));
    }
    Status need(const GraphNode& n, bool ok, const std::function<std::string()>& what) const
    {
        return ok ? Status() : fail(n, what());
    }

    void addScratch(int ni, std::int64_t bytes)
    {
        if (bytes > 0)
            m_ph->scratch[static_cast<std::size_t>(ni)] = tensor(block(bytes, ni, ni), 1, bytes, DType::U8);
    }

    // A Split's output i from an input of `in` features: part i of each group the input holds (a group-major fused
    // tensor, GraphNode::splitGroups, may come as whole groups of it: each rank cuts its own); 0 when the input is not
    // whole groups.
    static std::int64_t splitPart(const GraphNode& n, std::size_t i, std::int64_t in)
    {
        const std::int64_t sum = std::accumulate(n.parts.begin(), n.parts.end(), std::int64_t(0));
        const std::int64_t groups = std::max<std::int64_t>(n.splitGroups, 1), group = sum / groups;
        if (group == 0 || sum % groups || n.parts[i] % groups || in % group || in / group > groups || (groups == 1 && in != sum))
            return 0;
        return n.parts[i] / groups * (in / group);
    }

    // The width the op computes for output 0, from its inputs and this rank's weights; checks the
    // inputs on the way.
    Result<std::int64_t> opWidth(const GraphNode& n, int ni)
    {
        auto in = [&](std::size_t i) { return width(n.inputs[i]); };
        switch (n.kind) {
        case OpKind::Embedding: {
            const ParamShard* w = param(n, "weight");
            TP_RETURN_IF_ERROR(need(n, w != nullptr, [] { return std::string("has no weight"); }));
            return wshape(w).second;
        }
        case OpKind::Norm:
        case OpKind::HeadNorm: {
            const ParamShard* w = param(n, "weight");
            const std::int64_t group = n.kind == OpKind::Norm ? in(0) : n.headDim;
            // Llama 4's L2 norm; a norm module without parameters (OLMo's LayerNorm, nanochat's RMSNorm)
            const bool weightless = n.module < 0 ? n.kind == OpKind::HeadNorm : m_spec.modules[static_cast<std::size_t>(n.module)].params.empty();
            TP_RETURN_IF_ERROR(need(n, (weightless || (w && wshape(w).second == group)) && group > 0 && in(0) % group == 0, [&] {
                return fmt::format("norm over groups of {} of {} features with a weight of {}", group, in(0),
                                   w ? wshape(w).second : 0);
            }));
            return in(0);
        }
        case OpKind::Linear:
        case OpKind::Router: {
            const ParamShard* w = param(n, "weight");
            TP_RETURN_IF_ERROR(need(n, w != nullptr, [] { return std::string("has no weight"); }));
            const std::int64_t out = wshape(w).first, inW = wshape(w).second;
            const auto& slice = m_g.nodes[static_cast<std::size_t>(ni)].inputSlice;
            const std::int64_t x = slice.empty() ? in(0) : slice[static_cast<std::size_t>(m_r)].size;
            TP_RETURN_IF_ERROR(need(n, x == inW && (slice.empty() || slice[static_cast<std::size_t>(m_r)].offset + x <= in(0)), [&] {
                return fmt::format("input has {} features, the weight slice expects {}", x, inW);
            }));
            const ParamShard* b = param(n, "bias");
            const int c = m_p.collectiveOf[static_cast<std::size_t>(ni)];
            const bool biasAfter = c >= 0 && m_g.collectives[static_cast<std::size_t>(c)].bias >= 0;
            TP_RETURN_IF_ERROR(need(n, !b || w->dim != 1 || biasAfter, [] {
                return std::string("a rowwise bias without a reduction would be added on every rank");
            }));
            addScratch(ni, m_be.gemmScratchBytes(rowsOf(ni), inW, out));
            return out;
        }
        case OpKind::Split: {
            const std::int64_t w = splitPart(n, 0, in(0));
            TP_RETURN_IF_ERROR(need(n, w > 0, [&] {
                return fmt::format("parts [{}] in {} groups do not cut an input of {}", fmt::join(n.parts, ", "),
                                   std::max<std::int64_t>(n.splitGroups, 1), in(0));
            }));
            return w;
        }
        case OpKind::Rope:
            return in(0);
        case OpKind::Attention: {
            const AttentionShape s = attentionShape(n);
            if (n.mlaRope > 0) // q [heads · (nope + rope)], kv [heads · (nope + v)], one shared k_pe [rope]
                TP_RETURN_IF_ERROR(need(n, s.heads * n.headDim == in(0) && s.heads * (n.headDim - n.mlaRope + n.vHeadDim) == in(1)
                                               && in(2) == n.mlaRope,
                                        [&] {
                                            return fmt::format("q of {}, kv of {} and k_pe of {} features are not {} heads",
                                                               in(0), in(1), in(2), s.heads);
                                        }));
            else
                TP_RETURN_IF_ERROR(need(n, s.heads * n.headDim == in(0) && s.kvHeads * n.headDim == in(1) && in(2) == in(1)
                                               && (s.kvHeads == 0 ? s.heads == 0 : s.heads == s.kvHeads * (n.heads / n.kvHeads)),
                                        [&] {
                                            return fmt::format("{} local q heads do not pair with {} kv heads in groups of {}",
                                                               in(0) / n.headDim, in(1) / n.headDim, n.heads / n.kvHeads);
                                        }));
            addScratch(ni, m_be.attentionScratchBytes(s));
            m_ph->attention[static_cast<std::size_t>(ni)] = s;
            return s.heads * n.vHeadDim;
        }
        case OpKind::GatedAct:
            if (n.packed) {
                TP_RETURN_IF_ERROR(need(n, in(0) % 2 == 0, [&] { return fmt::format("packed input of {} features", in(0)); }));
                return in(0) / 2;
            }
            if (n.inputs.size() == 1) // act(x), an ungated MLP
                return in(0);
            TP_RETURN_IF_ERROR(need(n, in(0) * n.gateSpan == in(1),
                                    [&] { return fmt::format("gate has {} features spanning {} each, up {}", in(0), n.gateSpan, in(1)); }));
            return in(1);
        case OpKind::Experts: {
            TP_ASSIGN_OR_RETURN(const ExpertsShape s, expertsShape(n));
            m_ph->experts[static_cast<std::size_t>(ni)] = s;
            if (const int d = m_g.nodes[static_cast<std::size_t>(ni)].dispatch; d >= 0)
                return dispatched(n, ni, d, s, in(0));
            addScratch(ni, m_be.expertsScratchBytes(m_n, in(0), s));
            return in(0);
        }
        case OpKind::Add:
            TP_RETURN_IF_ERROR(need(n, in(0) == in(1), [&] { return fmt::format("adds {} to {} features", in(1), in(0)); }));
            return in(0);
        case OpKind::Logits: return in(0);
        case OpKind::Mixer: { // the scratch holds its convolution's output (LFM2: B·x, then its convolution)
            TP_RETURN_IF_ERROR(need(n, n.convKernel > 0, [] { return std::string("a sequence mixer the engine does not compute"); }));
            const std::int64_t conv = convChannels(n), inner = n.heads * n.headDim;
            const bool shortConv = n.mixer == LayerLayout::Mixer::ShortConv;
            if (isDeltaRule(n)) { // q, k, v, z, b, a
                const std::int64_t keys = n.kvHeads * n.headDim, values = n.heads * n.vHeadDim;
                const std::vector<std::int64_t> want = {keys, keys, values, values, n.heads, n.heads};
                TP_RETURN_IF_ERROR(need(n, n.inputs.size() == want.size() && std::ranges::equal(n.inputs, want, {}, [&](int t) { return width(t); }),
                                        [&] { return fmt::format("inputs are not q, k, v, z, b and a of {}", fmt::join(want, ", ")); }));
            } else { // LFM2: [B | C | x]; Mamba 2: [z | x B C | dt]
                const std::int64_t want = shortConv ? 3 * conv : inner + conv + n.heads;
                TP_RETURN_IF_ERROR(need(n, in(0) == want, [&] {
                    return fmt::format("input of {} features, not {}: {}", in(0), shortConv ? "B, C and x" : "z, x, B, C and dt", want);
                }));
            }
            const std::int64_t cols = shortConv ? 2 * conv : conv;
            m_ph->scratch[static_cast<std::size_t>(ni)] = tensor(block(dtypeBytes(m_be.storage(), m_n * cols), ni, ni), m_n, cols, m_be.storage());
            return isDeltaRule(n) ? n.heads * n.vHeadDim : inner;
        }
        }
        return 0;
    }

    // The buffers of an experts node dispatched with all-to-all (DispatchProgram), live within it.
    Result<std::int64_t> dispatched(const GraphNode& n, int ni, int d, const ExpertsShape& s, std::int64_t H)
    {
        TP_RETURN_IF_ERROR(need(n, !s.weightInputs && m_g.collectives[static_cast<std::size_t>(d)].kind == CollectiveKind::AllToAll, [] {
            return std::string("an all-to-all dispatch of experts that take pre-scaled inputs");
        }));
        DispatchProgram& p = m_ph->dispatch[static_cast<std::size_t>(ni)];
        p.dispatch = d;
        p.given = s;
        p.given.givenExperts = true;
        p.given.topK = 1;
        p.given.normalize = false;
        p.given.groups = p.given.topkGroup = 1;
        p.given.routedScale = 1;
        const std::int64_t rows = m_ph->rows.size, K = s.topK, picks = m_n * K;
        const DType dt = m_be.storage();
        auto buffer = [&](std::int64_t rows, std::int64_t cols, DType t) {
            return tensor(block(dtypeBytes(t, rows * cols), ni, ni), rows, cols, t);
        };
        TP_RETURN_IF_ERROR(need(n, picks <= std::numeric_limits<std::int32_t>::max(), [&] {
            return fmt::format("{} picks do not fit the dispatch's 32-bit row indices", picks);
        }));
        p.counts = buffer(1, s.experts, DType::I64); // int64, as Transformers' AllToAllEP sends them
        p.received = buffer(1, m_g.tpSize * s.localExperts, DType::I64);
        p.ids = buffer(rows, K, DType::I32);
        p.weights = buffer(rows, K, DType::F32);
        p.sendIndex = buffer(1, rows * K, DType::I32);
        p.slots = buffer(1, rows * K, DType::I32);
        p.send = buffer(rows * K, H, dt);
        p.back = buffer(rows * K, H, dt);
        p.recvExperts = buffer(picks, 1, DType::I32);
        p.recv = buffer(picks, H, dt);
        p.out = buffer(picks, H, dt);
        addScratch(ni, std::max(m_be.expertsScratchBytes(picks, H, p.given), m_be.routeScratchBytes(s)));
        return H;
    }

    Status node(int ni)
    {
        const GraphNode& n = m_g.graph.nodes[static_cast<std::size_t>(ni)];
        TP_ASSIGN_OR_RETURN(const std::int64_t w, opWidth(n, ni));
        // The first node at the last positions reads its input's every seq-th row: the norm, whose op
        // takes a dense input, through a [batch, features] copy (a GEMM reads the rows in place).
        if (atLast(ni) && n.kind == OpKind::Norm && !atLast(m_g.graph.tensors[static_cast<std::size_t>(n.inputs[0])].producer)) {
            const ProgramTensor& x = m_ph->tensors[static_cast<std::size_t>(n.inputs[0])];
            m_ph->gathered[static_cast<std::size_t>(ni)] = tensor(block(dtypeBytes(x.dtype, m_batch * x.cols), ni, ni), m_batch, x.cols, x.dtype);
        }
        if (n.kind == OpKind::Logits)
            return {};
        const int out = n.outputs[0];
        const std::int64_t promised = width(out);
        const int ci = m_p.collectiveOf[static_cast<std::size_t>(ni)];
        m_ph->opOutput[static_cast<std::size_t>(ni)] = out;
        if (ci < 0) {
            for (std::size_t i = 0; i < n.outputs.size(); ++i) {
                const std::int64_t want = n.kind == OpKind::Split  ? splitPart(n, i, width(n.inputs[0]))
                                        : n.kind == OpKind::Rope ? width(n.inputs[i])
                                                                 : w;
                TP_RETURN_IF_ERROR(need(n, width(n.outputs[i]) == want, [&] {
                    return fmt::format("output has {} features, the sharded graph says {}", want, width(n.outputs[i]));
                }));
            }
            return {};
        }
        const Collective& c = m_g.collectives[static_cast<std::size_t>(ci)];
        CollectivePlan& p = m_ph->collectives[static_cast<std::size_t>(ci)];
        p.output = out;
        const DType dt = m_ph->tensors[static_cast<std::size_t>(out)].dtype;
        const std::int64_t eb = dtypeBytes(dt, 1);
        const std::int64_t full = c.featuresPerToken, rows = rowsOf(ni);
        if (c.sequence) { // token rows: each rank's piece is contiguous, every feature of its rows
            TP_RETURN_IF_ERROR(need(n, w == full && promised == full && (c.kind == CollectiveKind::AllGather || c.kind == CollectiveKind::ReduceScatter), [&] {
                return fmt::format("{} of token rows from {} features into {}, the collective says {}",
                                   collectiveName(c.kind), w, promised, full);
            }));
            const ProgramTensor& o = m_ph->tensors[static_cast<std::size_t>(out)];
            if (c.kind == CollectiveKind::AllGather) // the op writes its rows of the output; the gather fills the rest
                p.input = tensor(o.block, m_ph->rows.size, w, dt, m_ph->rows.offset * full * eb);
            else // the op's whole partial sum, of which the rank keeps its rows
                p.input = tensor(block(m_n * full * eb, ni, ni), m_n, full, dt);
            m_ph->opOutput[static_cast<std::size_t>(ni)] = p.input;
            return {};
        }
        switch (c.kind) {
        case CollectiveKind::AllReduce:
            TP_RETURN_IF_ERROR(need(n, w == full && promised == full, [&] {
                return fmt::format("all_reduce of {} features into {}, the collective says {}", w, promised, full);
            }));
            p.input = out;
            if (c.tokensPerToken > 1) { // Llama 4's experts: every expert's rows, reduced, then summed
                ExpertsShape& s = m_ph->experts[static_cast<std::size_t>(ni)];
                TP_RETURN_IF_ERROR(need(n, n.kind == OpKind::Experts && s.weightInputs && s.localExperts == c.tokensPerToken, [&] {
                    return fmt::format("an all_reduce of {} rows per token after {} local experts", c.tokensPerToken,
                                       s.localExperts);
                }));
                s.perExpertRows = true;
                p.input = tensor(block(c.tokensPerToken * rows * full * eb, ni, ni), c.tokensPerToken * rows, full, dt);
                m_ph->opOutput[static_cast<std::size_t>(ni)] = p.input;
            }
            return {};
        case CollectiveKind::AllGather: {
            TP_RETURN_IF_ERROR(need(n, c.pieces.size() == static_cast<std::size_t>(m_g.tpSize)
                                           && w == c.pieces[static_cast<std::size_t>(m_r)].size && promised == full
                                           && c.pieces.back().offset + c.pieces.back().size == full,
                                    [&] {
                                        return fmt::format("all_gather of {} features into {}, the collective joins "
                                                           "pieces into {}",
                                                           w, promised, full);
                                    }));
            const Interval& mine = c.pieces[static_cast<std::size_t>(m_r)];
            if (m_columnGather) { // the op writes its columns of the output; the gather fills the rest
                const ProgramTensor& o = m_ph->tensors[static_cast<std::size_t>(out)];
                p.input = tensor(o.block, rows, w, dt, mine.offset * eb, full);
                m_ph->opOutput[static_cast<std::size_t>(ni)] = p.input;
                return {};
            }
            // The op writes its piece straight into its place in the staging buffer (in place).
            const int staging = block(rows * full * eb, ni, ni);
            p.staging = tensor(staging, 1, rows * full, dt);
            p.input = tensor(staging, rows, w, dt, rows * mine.offset * eb);
            m_ph->opOutput[static_cast<std::size_t>(ni)] = p.input;
            return {};
        }
        case CollectiveKind::ReduceScatter: {
            TP_RETURN_IF_ERROR(need(n, c.pieces.size() == static_cast<std::size_t>(m_g.tpSize) && w == full
                                           && promised == c.pieces[static_cast<std::size_t>(m_r)].size,
                                    [&] {
                                        return fmt::format("reduce_scatter of {} features into {}, the collective "
                                                           "keeps {}",
                                                           w, promised, c.pieces[static_cast<std::size_t>(m_r)].size);
                                    }));
            p.input = tensor(block(rows * full * eb, ni, ni), rows, full, dt);
            p.staging = tensor(block(rows * full * eb, ni, ni), 1, rows * full, dt);
            m_ph->opOutput[static_cast<std::size_t>(ni)] = p.input;
            return {};
        }
        default:
            return fail(n, fmt::format("{} is not executable on the engine", collectiveName(c.kind)));
        }
    }

    AttentionShape attentionShape(const GraphNode& n) const
    {
        AttentionShape s;
        s.batch = m_batch;
        s.seq = m_ph->seq;
        s.headDim = n.headDim;
        s.heads = width(n.inputs[0]) / n.headDim;
        s.kvHeads = n.mlaRope > 0 ? s.heads : width(n.inputs[1]) / n.headDim;
        s.vHeadDim = n.vHeadDim;
        s.scale = n.scale;
        s.keyRows = m_p.context;
        s.window = n.window;
        s.softcap = n.softcap;
        s.chunk = n.chunk;
        return s;
    }

    Result<ExpertsShape> expertsShape(const GraphNode& n) const
    {
        const ParamShard* gu = m_g.expertsUp(n.module); // gate_up_proj, or up_proj alone (Nemotron-H)
        const ParamShard* dn = param(n, "down_proj");
        if (!gu || !dn)
            return fail(n, "has no gate_up_proj (or up_proj) / down_proj");
        const bool gated = param(n, "gate_up_proj") != nullptr;
        const std::int64_t rowsPer = gated ? 2 : 1; // gate_up's rows an intermediate row has
        const auto& gs = gu->shapes[static_cast<std::size_t>(m_r)];
        const auto& ds = dn->shapes[static_cast<std::size_t>(m_r)];
        const std::int64_t H = width(n.inputs[0]);
        const ArchTraits& t = archTraits(m_spec.config.family);
        ExpertsShape s;
        s.transposed = expertsLastPacked(m_spec.config); // [E, H, 2I] / [E, I, H]
        s.interleaved = t.expertsInterleaved;
        if (gs.size() != 3 || ds.size() != 3 || gs[0] != ds[0]
            || (s.transposed ? gs[1] != H || ds[2] != H || gs[2] != rowsPer * ds[1] : gs[2] != H || ds[1] != H || gs[1] != rowsPer * ds[2]))
            return fail(n, fmt::format("expert weights [{}] / [{}] are not {}", fmt::join(gs, ", "), fmt::join(ds, ", "),
                                       s.transposed ? fmt::format("[E, {}, {}I] / [E, I, {}]", H, gated ? "2" : "", H)
                                                    : fmt::format("[E, {}I, {}] / [E, {}, I]", gated ? "2" : "", H, H)));
        s.gated = gated;
        s.experts = n.experts;
        s.topK = n.topK;
        s.localExperts = gs[0];
        s.firstExpert = gu->dim == 0 ? gu->slices[static_cast<std::size_t>(m_r)][0].offset : 0;
        s.intermediate = s.transposed ? ds[1] : ds[2];
        s.normalize = n.normalizeTopK;
        s.act = n.act;
        s.swigluAlpha = n.swigluAlpha;
        s.swigluLimit = n.swigluLimit;
        s.groups = n.groups;
        s.topkGroup = n.topkGroup;
        s.routedScale = n.routedScale;
        s.groupByMax = n.groupByMax;
        s.sparseMixer = n.sparseMixer;
        s.jitterEps = n.jitterEps;
        s.logitChoice = n.logitChoice;
        s.weightInputs = n.weightInputs;
        // Each expert's down bias belongs to the rank holding its whole output: with its rows split
        // the partial sums would each carry it.
        if (param(n, "down_proj_bias") && dn->dim > 0)
            return fail(n, "down_proj_bias with the experts' intermediate rows split across ranks would be added on every "
                           "rank; keep the experts whole or split them by expert");
        return s;
    }

    const bool m_columnGather, m_lastPositionLogits;
    const ModelSpec& m_spec;
    const ShardedGraph& m_g;
    const int m_r;
    const std::int64_t m_batch, m_seq, m_decode;
    const Backend& m_be;
    RankProgram m_p;
    PhaseProgram* m_ph = nullptr;   // the phase being lowered
    std::int64_t m_n = 0;           // its rows
    int m_t0 = 0;                   // its first step on the arena's timeline
};

} // namespace

Result<RankProgram> lowerForRank(const ModelSpec& spec, const ShardedGraph& g, int rank, std::int64_t batch,
                                 std::int64_t seq, std::int64_t decodeSteps, bool lastPositionLogits,
                                 const Backend& backend, bool columnGather)
{
    return Lowering(spec, g, rank, batch, seq, decodeSteps, lastPositionLogits, backend, columnGather).run();
}

} // namespace tp::detail
