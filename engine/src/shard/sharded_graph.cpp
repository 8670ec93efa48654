// sharded_graph.cpp — layout propagation over the layer graph for one plan and tp size.
//
// Every finding is reported once per generic name ("model.layers.*.self_attn.o_proj"), not once
// per layer. An error marks the tensors its node makes; an error at a node that reads a marked
// tensor follows from the one that marked it (Diagnostic::follows), and its hint points there. The
// mark passes through every op until a residual add or a norm takes its input without complaint.
#include "tp/shard/sharded_graph.h"

#include "tp/core/units.h"
#include "tp/model/arch_traits.h"
#include "tp/model/loader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace tp {

std::int64_t ShardedGraph::elementBytes() const { return dtypeBytes(activationDtype, 1); }
std::int64_t ShardedGraph::kvElementBytes() const { return dtypeBytes(options.kvCacheDtype.value_or(activationDtype), 1); }

const ParamShard* ShardedGraph::param(int module, std::string_view name) const
{
    if (module < 0 || static_cast<std::size_t>(module) >= moduleFirstParam.size() || moduleFirstParam[static_cast<std::size_t>(module)] < 0)
        return nullptr;
    for (std::size_t i = static_cast<std::size_t>(moduleFirstParam[static_cast<std::size_t>(module)]);
         i < params.size() && params[i].module == module; ++i) {
        const std::string& p = params[i].path;
        if (p.size() > name.size() && p.ends_with(name) && p[p.size() - name.size() - 1] == '.')
            return &params[i];
    }
    return nullptr;
}

// The convolution keeps `kernel` columns of every channel it convolves; the recurrent state is float32.
std::int64_t mixerStateBytes(const ModelConfig& c, std::int64_t act)
{
    using M = LayerLayout::Mixer;
    const MixerSizes& m = c.mixer;
    switch (c.layout.mixer) {
    case M::None: return 0;
    case M::GatedDeltaNet:
    case M::GatedDeltaNetSplit:
    case M::GatedDeltaNetOwn: // q, k and v convolved; a [key, value] state per value head
        return (2 * m.keyHeads * m.keyDim + m.heads * m.valueDim) * m.kernel * act + m.heads * m.keyDim * m.valueDim * 4;
    case M::Mamba1: return m.inner * m.kernel * act + m.inner * m.state * 4;
    case M::Mamba2: // x, B and C convolved; a [head_dim, state] state per head
        return (m.inner + 2 * m.groups * m.state) * m.kernel * act + m.inner * m.state * 4;
    case M::ShortConv: return c.hiddenSize * m.kernel * act;
    case M::KimiDelta:
    case M::KimiDeltaFull: return 3 * m.heads * m.valueDim * m.kernel * act + m.heads * m.valueDim * m.valueDim * 4;
    case M::Lightning: return m.heads * m.valueDim * m.valueDim * act;
    }
    return 0;
}

namespace {

// A weight matrix of a Linear, Embedding or Experts module that stays whole on every rank (biases and vectors do not
// count).
bool isWholeWeight(const ModelSpec& spec, const ParamShard& p)
{
    const ModuleSpec& m = spec.modules[static_cast<std::size_t>(p.module)];
    return p.dim < 0 && !p.tied && !p.bytes.empty()
        && (m.kind == ModuleKind::Linear || m.kind == ModuleKind::Embedding || m.kind == ModuleKind::Experts)
        && m.params[static_cast<std::size_t>(p.param)].shape.size() >= 2;
}

ParamShard shardParam(std::string path, const ParamSpec& p, const Placement& pl, int T)
{
    ParamShard s;
    s.path = std::move(path);
    s.placement = pl;
    const int rank = static_cast<int>(p.shape.size());
    const std::size_t nT = static_cast<std::size_t>(T);
    s.shapes.assign(nT, p.shape);
    s.slices.assign(nT, {});
    if (pl.shards() && rank > 0 && T > 1) { // tp_size 1: Transformers applies no plan
        const int d = pl.resolvedDim(rank);
        if (d >= 0 && d < rank) {
            s.dim = d;
            const std::int64_t n = p.shape[static_cast<std::size_t>(d)];
            if (pl.kind == Placement::Kind::Shard) {
                const auto c = chunkSizes(n, T);
                for (std::size_t r = 0; r < nT; ++r)
                    s.slices[r] = {c[r]};
            } else {
                s.slices = stridedChunks(n, std::max(pl.splitFactor, 1), T);
            }
            for (std::size_t r = 0; r < nT; ++r) {
                std::int64_t sz = 0;
                for (const auto& iv : s.slices[r])
                    sz += iv.size;
                s.shapes[r][static_cast<std::size_t>(d)] = sz;
            }
        }
    }
    // An AWQ / GPTQ weight is buffers Transformers' plan never lists: every rank loads all of it (checkPackedWeights).
    s.bytes.resize(nT);
    for (std::size_t r = 0; r < nT; ++r)
        s.bytes[r] = p.packBits > 0 ? p.bytes() : p.bytesOf(s.shapes[r]);
    return s;
}

// vLLM's KV-head replication (Plan::replicateKvHeads): with T a multiple of the KV heads, rank r holds head
// floor(r · KV / T), so T / KV consecutive ranks share each head, and rank r's query heads [r·H/T, (r+1)·H/T) all read it.
std::int64_t kvHeadOfRank(std::int64_t rank, std::int64_t kvHeads, std::int64_t tp) { return rank * kvHeads / tp; }

// The shard of a k_proj / v_proj parameter split by heads on dim 0 re-cut so that every rank holds one whole head of
// `headRows` rows; its bytes follow.
void replicateHeads(ParamShard& s, const ParamSpec& p, std::int64_t kvHeads, int T)
{
    const std::int64_t headRows = p.shape[0] / kvHeads;
    for (int r = 0; r < T; ++r) {
        const std::size_t i = static_cast<std::size_t>(r);
        s.slices[i] = {{kvHeadOfRank(r, kvHeads, T) * headRows, headRows}};
        s.shapes[i][0] = headRows;
        s.bytes[i] = p.bytesOf(s.shapes[i]);
    }
    s.replicas = T / static_cast<int>(kvHeads);
}

std::string sizesText(const std::vector<std::int64_t>& v) { return fmt::format("{}", fmt::join(v, ", ")); }

// "model.layers.3:residual_mlp" → "model.layers.*:residual_mlp"
std::string genericNode(const std::string& name)
{
    const auto colon = name.find(':');
    return colon == std::string::npos ? genericName(name) : genericName(name.substr(0, colon)) + name.substr(colon);
}

// Where a finding is reported: a node's generic name, made on first use (most nodes report
// nothing, and making one per node was a large share of propagation), or a given string.
class Where
{
public:
    static Where ofNode(const GraphNode& n) { return Where(&n.name, true); }
    Where(const std::string& s) : m_source(&s), m_generic(false) {} // NOLINT: implicit on purpose
    Where(const char* s) : m_source(nullptr), m_generic(true), m_made(true), m_value(s) {} // NOLINT

    const std::string& str() const
    {
        if (!m_generic)
            return *m_source;
        if (!m_made) {
            m_value = genericNode(*m_source);
            m_made = true;
        }
        return m_value;
    }
    operator const std::string&() const { return str(); } // NOLINT

private:
    Where(const std::string* s, bool generic) : m_source(s), m_generic(generic) {}
    const std::string* m_source;
    bool m_generic;
    mutable bool m_made = false;
    mutable std::string m_value;
};

class Propagator
{
public:
    Propagator(const ModelSpec& spec, const Plan& plan, ShardedGraph& g)
        : m_spec(spec)
        , m_plan(plan)
        , m_g(g)
        , m_T(plan.tpSize)
    {
    }

    void run()
    {
        for (std::size_t i = 0; i < m_g.diagnostics.size(); ++i)
            m_reported.emplace(reportKey(m_g.diagnostics[i].where, m_g.diagnostics[i].message), static_cast<int>(i));
        m_headDivisibilityError = std::any_of(m_g.diagnostics.begin(), m_g.diagnostics.end(), [](const Diagnostic& d) {
            return d.severity == Severity::Error && (d.where == "num_attention_heads" || d.where == "num_key_value_heads");
        });
        buildParams();
        checkParams();
        m_g.tensors.resize(m_g.graph.tensors.size());
        for (std::size_t t = 0; t < m_g.graph.tensors.size(); ++t)
            setWhole(static_cast<int>(t), m_g.graph.tensors[t].features);
        m_g.nodes.assign(m_g.graph.nodes.size(), {});
        m_cause.assign(m_g.graph.tensors.size(), -1);
        if (m_g.options.lastPositionLogits) {
            const std::vector<bool> last = lastPositionNodes(m_g.graph);
            for (std::size_t n = 0; n < last.size(); ++n)
                m_g.nodes[n].lastPositions = last[n];
        }
        sequenceTensors();
        blockEnds();
        for (std::size_t n = 0; n < m_g.graph.nodes.size(); ++n)
            visit(static_cast<int>(n));
        memory();
        checkPlanScope();
    }

private:
    // --- parameters ---------------------------------------------------------------------------
    void buildParams()
    {
        m_g.moduleFirstParam.assign(m_spec.modules.size(), -1);
        // Only parameters that another one is tied to need finding by path (usually one: the
        // embedding), so only those go in the index.
        std::unordered_set<std::string> tieTargets;
        for (const auto& a : m_g.match.params) {
            const ParamSpec& p = m_spec.modules[static_cast<std::size_t>(a.module)].params[static_cast<std::size_t>(a.param)];
            if (!p.tiedTo.empty())
                tieTargets.insert(p.tiedTo);
        }
        std::unordered_map<std::string, int> byPath;
        m_g.params.reserve(m_g.match.params.size());
        for (const auto& a : m_g.match.params) {
            const ModuleSpec& m = m_spec.modules[static_cast<std::size_t>(a.module)];
            const ParamSpec& p = m.params[static_cast<std::size_t>(a.param)];
            Placement pl = a.style ? a.placement : Placement::none();
            const std::string path = m.paramPath(p);
            // Split in the checkpoint's interleaved layout and de-interleaved per rank on load: each rank's rows of
            // both halves, as a packed split gives (Inkling 2's colwise experts.gate_up_proj).
            if (pl.kind == Placement::Kind::Shard)
                for (const auto& [suffix, dim] : m_spec.interleavedOnLoad)
                    if (path.ends_with("." + suffix) && pl.resolvedDim(static_cast<int>(p.shape.size())) == dim) {
                        pl = Placement::strided(dim, 2);
                        report(Severity::Info, genericName(path),
                               fmt::format("'{}' splits the checkpoint's interleaved tensor, which Transformers "
                                           "de-interleaves on each rank: every rank holds matching rows of both halves "
                                           "(a packed split)",
                                           a.style->name),
                               "a checkpoint that stores this parameter already de-interleaved would need 'packed_colwise'");
                    }
            ParamShard s = shardParam(path, p, pl, m_T);
            s.module = a.module;
            s.param = a.param;
            if (const std::int64_t kv = replicatedKvHeads(m, p, s, a.style); kv > 0) {
                replicateHeads(s, p, kv, m_T);
                m_g.kvHeadReplicas = std::max(m_g.kvHeadReplicas, s.replicas);
            }
            if (m_g.moduleFirstParam[static_cast<std::size_t>(a.module)] < 0)
                m_g.moduleFirstParam[static_cast<std::size_t>(a.module)] = static_cast<int>(m_g.params.size());
            if (!p.tiedTo.empty()) {
                s.tied = true;
                auto it = byPath.find(p.tiedTo);
                if (it != byPath.end())
                    checkTied(s, m_g.params[static_cast<std::size_t>(it->second)]);
            }
            if (!tieTargets.empty() && tieTargets.contains(s.path))
                byPath.emplace(s.path, static_cast<int>(m_g.params.size()));
            m_g.params.push_back(std::move(s));
        }
    }

    // The KV heads of layer `m.layer` when Plan::replicateKvHeads replicates parameter `p` of `m`: a k_proj or v_proj
    // split by heads (dim 0, plain colwise, the output kept split), fewer KV heads than T, T a multiple of them and
    // of the query heads a divisor (else the match's error stands and nothing is re-cut); 0 otherwise.
    std::int64_t replicatedKvHeads(const ModuleSpec& m, const ParamSpec& p, const ParamShard& s, const Style* style) const
    {
        if (!m_plan.replicateKvHeads || m_T <= 1 || s.dim != 0 || s.placement.kind != Placement::Kind::Shard
            || m.kind != ModuleKind::Linear || (m.name != "k_proj" && m.name != "v_proj") || p.packBits > 0 || p.shape.empty()
            || (style && style->forward == CollectiveKind::AllGather) || m_spec.config.isMla())
            return 0;
        const ModelConfig& c = m_spec.config;
        const std::int64_t kv = c.kvHeadsAt(m.layer), heads = c.headsAt(m.layer);
        if (kv <= 0 || kv % m_T == 0 || m_T % kv != 0 || heads % m_T != 0 || p.shape[0] % kv != 0)
            return 0;
        return kv;
    }

    void checkTied(const ParamShard& tied, const ParamShard& owner)
    {
        const bool same = tied.dim == owner.dim && tied.placement.kind == owner.placement.kind
            && (tied.dim < 0 || tied.placement.splitFactor == owner.placement.splitFactor);
        if (same)
            return;
        report(Severity::Error, tied.path,
               fmt::format("'{}' shares its storage with '{}' (tie_word_embeddings), but the plan places them "
                           "differently: {} vs {}; one tensor cannot have two layouts (with 5.14.1 this gave "
                           "logits T× too wide)",
                           tied.path, owner.path, placementText(tied), placementText(owner)),
               "shard the vocab rows of both: 'embedding_rowwise' on embed_tokens with 'colwise_gather_output' "
               "on lm_head, or shard neither");
    }

    static std::string placementText(const ParamShard& s)
    {
        return s.dim < 0 ? std::string("whole") : fmt::format("{} on dim {}", s.placement.toString(), s.dim);
    }

    void checkParams()
    {
        std::set<std::string> seen;
        for (const auto& s : m_g.params) {
            if (s.dim < 0 || s.tied || s.replicas > 1) // a replicated KV head is whole on its ranks
                continue;
            const ParamSpec& p = paramSpec(s);
            const std::int64_t n = p.shape[static_cast<std::size_t>(s.dim)];
            const std::string g = genericName(s.path);
            if (!seen.insert(g).second)
                continue;
            if (s.placement.kind == Placement::Kind::StridedShard) {
                const int sf = std::max(s.placement.splitFactor, 1);
                if (n % sf != 0 || (n / sf) % m_T != 0)
                    report(Severity::Error, g,
                           fmt::format("packed dim of {} rows holds {} blocks of {} rows, which do not split evenly "
                                       "over tp_size {}: Transformers ≤ 5.15 drops the remainder rows, newer ones "
                                       "give ranks unequal gate/up pieces",
                                       n, sf, n / sf, m_T),
                           validSizesHint(n / sf));
            } else if (n % m_T != 0) {
                std::vector<std::int64_t> sizes;
                for (const auto& iv : s.slices)
                    sizes.push_back(iv.empty() ? 0 : iv[0].size);
                report(Severity::Warning, g,
                       fmt::format("uneven shard: {} over {} ranks gives {} (DTensor paths that infer the global "
                                   "size from the local one mis-size it; pytorch#150336)",
                                   n, m_T, sizesText(sizes)),
                       validSizesHint(n));
            }
        }
    }

    std::string validSizesHint(std::int64_t n) const
    {
        std::vector<int> ok;
        for (int t = 1; t <= 64; ++t)
            if (n % t == 0)
                ok.push_back(t);
        return fmt::format("tp sizes that divide {}: {}", n, fmt::join(ok, ", "));
    }

    const ParamSpec& paramSpec(const ParamShard& s) const
    {
        return m_spec.modules[static_cast<std::size_t>(s.module)].params[static_cast<std::size_t>(s.param)];
    }

    const ParamShard* param(int module, std::string_view name) const { return m_g.param(module, name); }

    // Per-rank size along the split dim (the whole size when not split along `dim`).
    std::vector<std::int64_t> localAlong(const ParamShard& s, int dim) const
    {
        std::vector<std::int64_t> out(static_cast<std::size_t>(m_T));
        for (std::size_t r = 0; r < out.size(); ++r)
            out[r] = s.shapes[r][static_cast<std::size_t>(dim)];
        return out;
    }

    // --- layouts ------------------------------------------------------------------------------
    TensorLayout sharded(std::vector<std::int64_t> local, int blocks = 1) const
    {
        TensorLayout t;
        t.layout = m_T > 1 ? Layout::ShardLast : Layout::Replicate;
        t.local = std::move(local);
        t.packedBlocks = blocks;
        return t;
    }
    // In place (the tensor's per-rank vector is reused, not reallocated).
    void setWhole(int t, std::int64_t features)
    {
        TensorLayout& l = lay(t);
        l.layout = Layout::Replicate;
        l.local.assign(static_cast<std::size_t>(m_T), features);
        l.packedBlocks = 1;
    }
    void setPartial(int t, std::int64_t features)
    {
        setWhole(t, features);
        lay(t).layout = m_T > 1 ? Layout::Partial : Layout::Replicate;
    }

    const GraphTensor& gt(int t) const { return m_g.graph.tensors[static_cast<std::size_t>(t)]; }
    TensorLayout& lay(int t) { return m_g.tensors[static_cast<std::size_t>(t)]; }

    std::string producerName(int t) const
    {
        const int p = gt(t).producer;
        return p < 0 ? std::string("the input ids") : genericNode(m_g.graph.nodes[static_cast<std::size_t>(p)].name);
    }

    // The hint for a tensor left sharded on its last dim: a module's own output names that module; an
    // op's (model.layers.*.mlp:act) names the module upstream whose style split it, since a style can
    // only go on a module.
    std::string lastDimHint(int t, const std::string& consumer) const
    {
        int at = t;
        for (int hops = 0; hops < 64; ++hops) {
            const int p = gt(at).producer;
            if (p < 0)
                break;
            const GraphNode& n = m_g.graph.nodes[static_cast<std::size_t>(p)];
            if (n.module >= 0) {
                const std::string module = genericNode(n.name);
                if (at == t)
                    return fmt::format("make '{}' rowwise after a colwise, or use colwise_gather_output on it", module);
                const std::string reader = consumer.find(':') == std::string::npos
                    ? fmt::format("'{}'", consumer) : std::string("the module that reads it");
                return fmt::format("'{}' carries the split of colwise '{}': make {} rowwise", producerName(t), module, reader);
            }
            if (n.inputs.empty())
                break;
            at = n.inputs[0];
        }
        return "";
    }

    // The module whose projection tensor `t` is, through the ops that keep a layout (rope, head norms).
    std::string projectionOf(int t) const
    {
        for (int hops = 0; hops < 8; ++hops) {
            const int p = gt(t).producer;
            if (p < 0)
                break;
            const GraphNode& n = m_g.graph.nodes[static_cast<std::size_t>(p)];
            if (n.module >= 0 && n.kind == OpKind::Linear)
                return genericNode(n.name);
            if ((n.kind != OpKind::Rope && n.kind != OpKind::HeadNorm) || n.inputs.empty())
                break;
            t = n.inputs[static_cast<std::size_t>(std::find(n.outputs.begin(), n.outputs.end(), t) - n.outputs.begin())
                          % n.inputs.size()];
        }
        return producerName(t);
    }

    // The style every other projection reading the same input has (k_proj and v_proj beside q_proj,
    // up_proj beside gate_proj), as a hint to restore it, when they agree and this one differs; else
    // `otherwise`. Siblings sit within a few nodes of their input's producer.
    std::string siblingsHint(const GraphNode& n, std::string otherwise) const
    {
        const int in = n.inputs[0], producer = gt(in).producer;
        const std::string mine = entryStyleName(n.module);
        std::string style;
        std::vector<std::string> names;
        const std::size_t end = std::min(m_g.graph.nodes.size(), static_cast<std::size_t>(producer + 1) + 64);
        for (std::size_t i = static_cast<std::size_t>(producer + 1); i < end; ++i) {
            const GraphNode& o = m_g.graph.nodes[i];
            if (&o == &n || o.kind != OpKind::Linear || o.inputs.empty() || o.inputs[0] != in)
                continue;
            const std::string theirs = entryStyleName(o.module);
            if (theirs.empty() || (!style.empty() && theirs != style))
                return otherwise;
            style = theirs;
            names.push_back(fmt::format("'{}'", genericNode(o.name)));
        }
        if (style.empty() || style == mine)
            return otherwise;
        return fmt::format("make it '{}', like {} (they read the same input)", style, fmt::join(names, " and "));
    }

    std::string entryStyleName(int module) const
    {
        const int e = module < 0 ? -1 : m_g.match.moduleEntry[static_cast<std::size_t>(module)];
        const Style* s = e < 0 ? nullptr : styleOfEntry(e);
        return s ? s->name : std::string();
    }

    // A group-major fused tensor (GraphNode::splitGroups) sharded on whole groups splits on each
    // rank without communication: every rank cuts its own groups into their parts.
    bool splitsLocally(const GraphNode& n)
    {
        const TensorLayout& in = lay(n.inputs[0]);
        const std::int64_t features = gt(n.inputs[0]).features;
        if (n.splitGroups < 1 || in.layout != Layout::ShardLast || features % n.splitGroups)
            return false;
        const std::int64_t group = features / n.splitGroups;
        if (std::any_of(in.local.begin(), in.local.end(), [&](std::int64_t l) { return l % group; }))
            return false;
        const std::vector<std::int64_t> local = in.local;
        for (int o : n.outputs) {
            std::vector<std::int64_t> part(local.size());
            for (std::size_t r = 0; r < local.size(); ++r)
                part[r] = gt(o).features / n.splitGroups * (local[r] / group);
            lay(o) = sharded(std::move(part));
        }
        return true;
    }

    const Style* installed(int module) const
    {
        if (module < 0)
            return nullptr;
        const int e = m_g.match.moduleEntry[static_cast<std::size_t>(module)];
        if (e < 0)
            return nullptr;
        const Style* s = styleOfEntry(e);
        return s && s->installsForward ? s : nullptr;
    }

    const Style* styleOfEntry(int e) const { return m_g.match.entryStyles[static_cast<std::size_t>(e)]; }

    static std::string reportKey(const std::string& where, const std::string& message)
    {
        std::string k;
        k.reserve(where.size() + 1 + message.size());
        k.append(where).append(1, '\0').append(message);
        return k;
    }

    // Once per (where, message): a hash map, not a scan of every diagnostic so far (100,000 keys
    // that match nothing are 100,000 diagnostics before propagation starts). While a node is visited
    // whose input an earlier error marked, what it reports follows from that error.
    void report(Severity sev, const std::string& where, std::string message, std::string hint)
    {
        const auto [it, fresh] = m_reported.try_emplace(reportKey(where, message), static_cast<int>(m_g.diagnostics.size()));
        if (fresh) {
            Diagnostic d{sev, where, std::move(message), std::move(hint), {}};
            if (m_inputCause >= 0 && sev != Severity::Info) {
                d.follows = m_g.diagnostics[static_cast<std::size_t>(m_inputCause)].where;
                d.hint = fmt::format("fix '{}' first: this follows from its error", d.follows);
                m_consequenceOf.emplace(it->second, m_inputCause);
            }
            m_g.diagnostics.push_back(std::move(d));
        }
        if (m_visiting && sev == Severity::Error && m_nodeCause < 0) {
            const auto root = m_consequenceOf.find(it->second); // reported again, in another layer
            m_nodeCause = m_inputCause >= 0 ? m_inputCause : root != m_consequenceOf.end() ? root->second : it->second;
        }
    }

    // Adds a collective after node `n` (none at tp_size 1). `local`: per-rank widths of the pieces
    // an all_gather joins or a reduce_scatter leaves.
    void collective(CollectiveKind kind, const GraphNode& n, std::int64_t features, const Style* s,
                    std::int64_t rows = 1, const std::vector<std::int64_t>& local = {}, const ParamShard* bias = nullptr,
                    bool sequence = false)
    {
        if (m_T <= 1)
            return;
        Collective c;
        c.sequence = sequence;
        std::int64_t offset = 0;
        for (const std::int64_t w : local) {
            c.pieces.push_back({offset, w});
            offset += w;
        }
        if (bias)
            c.bias = static_cast<int>(bias - m_g.params.data());
        c.kind = kind;
        c.node = static_cast<int>(&n - m_g.graph.nodes.data());
        c.where = n.module >= 0 ? m_spec.modules[static_cast<std::size_t>(n.module)].path : n.name;
        c.layer = n.layer;
        c.featuresPerToken = features;
        c.tokensPerToken = rows;
        c.style = s ? s->name : std::string();
        c.lastPositions = m_g.nodes[static_cast<std::size_t>(c.node)].lastPositions;
        m_g.collectives.push_back(std::move(c));
    }

    // Requires a whole (replicated) input; reports why not. Returns false on a mismatch.
    bool requireWhole(int t, const Where& consumer, const std::string& what)
    {
        const TensorLayout& l = lay(t);
        if (l.layout == Layout::Replicate)
            return true;
        if (l.layout == Layout::Partial)
            report(Severity::Error, consumer,
                   fmt::format("partial sums from '{}' reach '{}' unreduced", producerName(t), consumer.str()),
                   fmt::format("give '{}' a style that reduces its output ('rowwise', 'moe_tp_experts', 'all_reduce')",
                               producerName(t)));
        else if (l.layout == Layout::ShardSeq) // sequenceTensors() gathers rows for such consumers
            report(Severity::Error, consumer,
                   fmt::format("'{}' {}, but '{}' leaves its output split by token rows", consumer.str(), what,
                               producerName(t)),
                   "");
        else
            report(Severity::Error, consumer,
                   fmt::format("'{}' {}, but '{}' leaves its output sharded on the last dim; Transformers does not "
                               "gather it",
                               consumer.str(), what, producerName(t)),
                   lastDimHint(t, consumer.str()));
        return false;
    }

    // Visits node `ni` and marks its outputs with the error they follow from: one reported here,
    // else its inputs' (kept by every op but a residual add or a norm, which end a mistake's reach
    // when they take their input without complaint).
    void visit(int ni)
    {
        const GraphNode& n = m_g.graph.nodes[static_cast<std::size_t>(ni)];
        m_inputCause = -1;
        for (int t : n.inputs)
            if (const int c = m_cause[static_cast<std::size_t>(t)]; c >= 0) {
                m_inputCause = c;
                break;
            }
        m_nodeCause = -1;
        m_visiting = true;
        propagate(ni);
        m_visiting = false;
        const int mark = m_nodeCause >= 0 ? m_nodeCause : n.kind == OpKind::Add || n.kind == OpKind::Norm ? -1 : m_inputCause;
        for (int t : n.outputs)
            m_cause[static_cast<std::size_t>(t)] = mark;
        m_inputCause = -1;
    }

    void propagate(int ni)
    {
        const GraphNode& n = m_g.graph.nodes[static_cast<std::size_t>(ni)];
        const Where where = Where::ofNode(n);
        switch (n.kind) {
        case OpKind::Embedding: embedding(n); break;
        case OpKind::Linear: linear(n, where); break;
        case OpKind::Norm:
            embeddingNorm(n, where);
            if (const ParamShard* w = param(n.module, "weight"); w && w->dim >= 0)
                report(Severity::Error, where, fmt::format("norm weight of '{}' is sharded; RMSNorm needs it whole", where.str()),
                       "remove the key or use 'replicated_with_grad_allreduce'");
            if (sequenceNorm(ni)) {
                if (lay(n.inputs[0]).layout != Layout::ShardSeq)
                    requireWhole(n.inputs[0], where, "normalizes the whole feature vector");
                onRows(ni, n.outputs[0]);
            } else {
                requireWhole(n.inputs[0], where, "normalizes the whole feature vector");
                setWhole(n.outputs[0], gt(n.outputs[0]).features);
            }
            break;
        case OpKind::HeadNorm:
        case OpKind::Rope:
            for (std::size_t i = 0; i < n.outputs.size(); ++i)
                lay(n.outputs[i]) = lay(n.inputs[i]);
            break;
        case OpKind::Split:
            if (splitsLocally(n))
                break;
            requireWhole(n.inputs[0], where,
                         fmt::format("cuts the fused output by its global sizes [{}]", fmt::join(n.parts, ", ")));
            for (int o : n.outputs)
                setWhole(o, gt(o).features);
            break;
        case OpKind::Attention: attention(n); break;
        case OpKind::GatedAct: gatedAct(n, where); break;
        case OpKind::Router:
            requireWhole(n.inputs[0], where, "routes on the whole hidden state");
            if (const ParamShard* w = param(n.module, "weight"); w && w->dim >= 0)
                report(Severity::Error, where,
                       fmt::format("router '{}' is sharded; every rank needs all {} expert scores for top-{}", where.str(),
                                   n.experts, n.topK),
                       "keep the router replicated (no key)");
            setWhole(n.outputs[0], gt(n.outputs[0]).features);
            break;
        case OpKind::Experts: experts(n, where); break;
        case OpKind::Mixer: // its convolution, state and gated norm run over whole heads on every rank
            for (int t : n.inputs)
                requireWhole(t, where, "runs its convolution and recurrent state over all channels");
            setWhole(n.outputs[0], gt(n.outputs[0]).features);
            break;
        case OpKind::Add: addNode(n, ni, where); break;
        case OpKind::Logits:
            if (lay(n.inputs[0]).layout == Layout::ShardLast)
                report(Severity::Error, producerName(n.inputs[0]),
                       fmt::format("logits are left vocab-sharded: '{}' is colwise without a gather, so every rank "
                                   "returns {} of {} vocab columns",
                                   producerName(n.inputs[0]), lay(n.inputs[0]).local[0], gt(n.inputs[0]).features),
                       "use 'colwise_gather_output' on lm_head");
            else
                requireWhole(n.inputs[0], "logits", "must be whole on every rank");
            break;
        }
        if (const int block = m_blockEnd.empty() ? -1 : m_blockEnd[static_cast<std::size_t>(ni)]; block >= 0)
            blockReduction(n, block);
    }

    // --- block styles -------------------------------------------------------------------------
    // A style that sums a whole block's partial output (all_reduce; G1's gather) on a block module
    // (an attention or MLP block, not a projection or the experts, whose ops reduce themselves): its
    // output is the output of the block's last node, found by name (every node of block P is named
    // P.… or P:…).
    void blockEnds()
    {
        std::unordered_map<std::string_view, int> blocks;
        for (std::size_t m = 0; m < m_spec.modules.size(); ++m) {
            const ModuleSpec& mod = m_spec.modules[m];
            const Style* s = installed(static_cast<int>(m));
            if (s && s->input == Layout::Partial && s->forward == CollectiveKind::AllReduce && mod.kind != ModuleKind::Linear
                && mod.kind != ModuleKind::Embedding && mod.kind != ModuleKind::Experts && mod.kind != ModuleKind::Router)
                blocks.emplace(mod.path, static_cast<int>(m));
        }
        if (blocks.empty())
            return;
        m_blockEnd.assign(m_g.graph.nodes.size(), -1);
        std::vector<int> last(m_spec.modules.size(), -1);
        for (std::size_t ni = 0; ni < m_g.graph.nodes.size(); ++ni) {
            std::string_view name = m_g.graph.nodes[ni].name;
            for (std::size_t cut = name.find_last_of(".:"); cut != std::string_view::npos && cut > 0;
                 cut = name.find_last_of(".:", cut - 1))
                if (auto it = blocks.find(name.substr(0, cut)); it != blocks.end())
                    last[static_cast<std::size_t>(it->second)] = static_cast<int>(ni);
        }
        for (const auto& [path, m] : blocks)
            if (last[static_cast<std::size_t>(m)] >= 0)
                m_blockEnd[static_cast<std::size_t>(last[static_cast<std::size_t>(m)])] = m;
    }

    void blockReduction(const GraphNode& n, int block)
    {
        const Style* s = installed(block);
        const std::string& path = m_spec.modules[static_cast<std::size_t>(block)].path;
        const int out = n.outputs[0];
        if (lay(out).layout != Layout::Partial) {
            if (m_T > 1)
                report(Severity::Error, genericName(path),
                       fmt::format("'{}' all-reduces the output of '{}', but that output is {}: the sum would be {}× "
                                   "too large",
                                   s->name, genericName(path), lay(out).layout == Layout::ShardLast ? "sharded" : "whole", m_T),
                       fmt::format("leave the block's last projection ({}) without a reduction: 'local_rowwise' (G1), or "
                                   "a parameter key 'rowwise' without the module key",
                                   genericNode(n.name)));
            return;
        }
        // A rowwise bias of the last projection is added once, after the sum.
        const ParamShard* w = n.kind == OpKind::Linear ? param(n.module, "weight") : nullptr;
        const std::size_t before = m_g.collectives.size();
        reduce(n, out, s, w && w->dim == 1 ? param(n.module, "bias") : nullptr);
        if (m_g.collectives.size() > before)
            m_g.collectives.back().where = path;
    }


    // A norm inside an embedding's own forward (Inkling's embed_norm) runs before the style's reduction, which follows the
    // module's forward: on a vocabulary-split table it norms each rank's partial rows.
    void embeddingNorm(const GraphNode& n, const Where& where)
    {
        if (n.module < 0 || m_T <= 1)
            return;
        const int owner = m_spec.modules[static_cast<std::size_t>(n.module)].parent;
        if (owner < 0 || m_spec.modules[static_cast<std::size_t>(owner)].kind != ModuleKind::Embedding)
            return;
        if (const ParamShard* w = param(owner, "weight"); w && w->dim == 0)
            report(Severity::Error, where,
                   fmt::format("'{}' runs inside '{}''s forward, before the reduction its vocabulary split needs: it norms each "
                               "rank's partial rows (Transformers fails at tp_size > 1)",
                               where.str(), m_spec.modules[static_cast<std::size_t>(owner)].path),
                   fmt::format("keep '{}' replicated ('replicate')", m_spec.modules[static_cast<std::size_t>(owner)].path));
    }

    void embedding(const GraphNode& n)
    {
        const int out = n.outputs[0];
        const std::int64_t H = gt(out).features;
        const ParamShard* w = param(n.module, "weight");
        const Style* s = installed(n.module);
        if (!w || w->dim < 0) {
            setWhole(out, H);
        } else if (w->dim == 0) {
            setPartial(out, H);
            if (s && s->forward == CollectiveKind::AllReduce)
                reduce(n, out, s);
        } else {
            lay(out) = sharded(localAlong(*w, 1));
            if (s && s->forward != CollectiveKind::None) {
                collective(CollectiveKind::AllGather, n, H, s, 1, localAlong(*w, 1));
                setWhole(out, H);
            }
        }
    }

    void linear(const GraphNode& n, const Where& where)
    {
        const int in = n.inputs[0], out = n.outputs[0];
        const std::int64_t features = gt(out).features;
        const ParamShard* w = param(n.module, "weight");
        const Style* s = installed(n.module);
        const int dim = w ? w->dim : -1;
        const TensorLayout& inL = lay(in);
        if (dim == 1) { // rowwise: input features split
            const auto want = localAlong(*w, 1);
            const bool splitsLocally = s && s->input == Layout::Replicate;
            if (inL.layout == Layout::ShardLast) {
                if (splitsLocally)
                    report(Severity::Error, where,
                           fmt::format("'{}' splits a replicated input itself, but '{}' already delivers it sharded; "
                                       "it would be split twice",
                                       s->name, producerName(in)),
                           "use 'rowwise' here (it takes the sharded input as is)");
                else if (inL.local != want)
                    report(Severity::Error, where,
                           fmt::format("input shards [{}] from '{}' do not match the weight's input shards [{}]",
                                       sizesText(inL.local), producerName(in), sizesText(want)),
                           "shard the producer and this projection over the same dimension and tp size");
            } else if (inL.layout == Layout::Replicate && !splitsLocally && m_T > 1) {
                report(Severity::Error, where,
                       fmt::format("'{}' expects an input sharded on its last dim, but '{}' delivers it whole",
                                   s ? s->name : "rowwise weight", producerName(in)),
                       siblingsHint(n, "use 'rowwise_split_input' (splits locally, no communication), or shard the "
                                       "producer colwise"));
            } else if (inL.layout == Layout::Partial) {
                requireWhole(in, where, "");
            }
            if (splitsLocally && inL.layout == Layout::Replicate)
                for (std::size_t r = 0; r < static_cast<std::size_t>(m_T); ++r)
                    m_g.nodes[static_cast<std::size_t>(&n - m_g.graph.nodes.data())].inputSlice.push_back(w->slices[r][0]);
            // Transformers adds a rowwise bias once, to the reduced sum.
            const ParamShard* bias = param(n.module, "bias");
            setPartial(out, features);
            if (s && s->forward == CollectiveKind::AllReduce) {
                reduce(n, out, s, bias);
            } else if (s && s->forward == CollectiveKind::ReduceScatter) {
                std::vector<std::int64_t> local;
                for (const auto& iv : chunkSizes(features, m_T))
                    local.push_back(iv.size);
                collective(CollectiveKind::ReduceScatter, n, features, s, 1, local, bias);
                lay(out) = sharded(local);
            }
            return;
        }
        if (dim == 0) { // colwise: output features split
            if (inL.layout == Layout::ShardLast)
                report(Severity::Error, where,
                       fmt::format("colwise '{}' receives an input already sharded on its last dim from '{}' "
                                   "(colwise feeding colwise); Transformers does not gather it",
                                   where.str(), producerName(in)),
                       lastDimHint(in, where.str()));
            else if (inL.layout == Layout::Partial)
                requireWhole(in, where, "");
            const int blocks = w->placement.kind == Placement::Kind::StridedShard ? w->placement.splitFactor : 1;
            lay(out) = sharded(localAlong(*w, 0), blocks);
            if (s && s->forward == CollectiveKind::AllGather) {
                collective(CollectiveKind::AllGather, n, features, s, 1, localAlong(*w, 0));
                setWhole(out, features);
            }
            return;
        }
        requireWhole(in, where, "has a whole (replicated) weight");
        setWhole(out, features);
        if (s && s->forward == CollectiveKind::AllReduce && m_T > 1)
            report(Severity::Error, where,
                   fmt::format("'{}' all-reduces the output of a replicated weight: the result is {}× too large",
                               s->name, m_T),
                   "shard the weight (rowwise) or drop the style");
    }

    void attention(const GraphNode& n)
    {
        const bool mla = m_spec.config.isMla();
        const int q = n.inputs[0], k = n.inputs[1], v = n.inputs[2];
        const TensorLayout &Q = lay(q), &K = lay(k), &V = lay(v);
        const int out = n.outputs[0];
        const std::string block = genericName(n.name.substr(0, n.name.find(':')));
        for (int t : n.inputs)
            if (lay(t).layout == Layout::Partial) {
                requireWhole(t, block, "");
                setWhole(out, gt(out).features);
                return;
            }
        if (mla && K.layout == Layout::Replicate && lay(n.inputs[2]).layout != Layout::Replicate)
            requireWhole(n.inputs[2], block, "shares one rope key across all heads");
        const bool qs = Q.layout == Layout::ShardLast, ks = K.layout == Layout::ShardLast,
                   vs = mla ? ks : V.layout == Layout::ShardLast;
        if (!qs && !ks && !vs) {
            setWhole(out, gt(out).features);
            sinks(n, block, false, {});
            return;
        }
        if (!(qs && ks && vs)) {
            report(Severity::Error, block,
                   fmt::format("queries are {} while keys/values are {}: attention needs q, k and v split by the "
                               "same heads",
                               qs ? "sharded" : "replicated", ks || vs ? "sharded" : "replicated"),
                   mla ? fmt::format("shard {} and kv_b_proj alike (colwise), or neither",
                                     m_spec.config.layout.mlaQueryGate ? "q_gate_proj" : "q_b_proj")
                   : ks == vs ? fmt::format("give '{}' the style of '{}' and '{}' ({}), or make all three alike",
                                            projectionOf(q), projectionOf(k), projectionOf(v),
                                            ks ? "their heads are split" : "they are whole")
                              : "shard q_proj, k_proj and v_proj alike (colwise), or keep all three replicated");
            setWhole(out, gt(out).features);
            return;
        }
        // Local heads come from the shard size (view(*, -1, head_dim)); GQA groups use global counts.
        const std::int64_t kvWidth = mla ? n.headDim - n.mlaRope + n.vHeadDim : n.headDim;
        std::vector<std::int64_t> localHeads(static_cast<std::size_t>(m_T)), outLocal(localHeads.size());
        // KV heads replicated (Plan::replicateKvHeads): one whole KV head a rank, the one all its query heads read.
        const bool replicatedKv = m_plan.replicateKvHeads && !mla && n.kvHeads > 0 && n.kvHeads < m_T && m_T % n.kvHeads == 0
                               && n.heads % n.kvHeads == 0;
        bool ok = true;
        std::int64_t firstHead = 0; // of the rank's query heads
        for (std::size_t r = 0; r < localHeads.size() && ok; ++r) {
            const std::int64_t qh = Q.local[r] / n.headDim, kh = K.local[r] / kvWidth;
            ok = Q.local[r] % n.headDim == 0 && K.local[r] % kvWidth == 0
                && (mla || (V.local[r] % n.vHeadDim == 0 && V.local[r] / n.vHeadDim == kh)); // values v_head_dim wide per head
            if (ok && replicatedKv && kh == 1) {
                const std::int64_t group = n.heads / n.kvHeads, mine = kvHeadOfRank(static_cast<std::int64_t>(r), n.kvHeads, m_T);
                ok = qh > 0 && firstHead / group == mine && (firstHead + qh - 1) / group == mine;
            } else {
                ok = ok && qh * n.kvHeads == kh * n.heads;
            }
            firstHead += qh;
            localHeads[r] = qh;
            outLocal[r] = qh * n.vHeadDim;
        }
        if (!ok && !hasHeadDivisibilityError())
            report(Severity::Error, block,
                   fmt::format("per-rank q/k/v widths [{}] / [{}] are not whole heads of {} in groups of {}; "
                               "the forward fails in view(…, -1, head_dim)",
                               sizesText(Q.local), sizesText(K.local), n.headDim, n.heads / std::max<std::int64_t>(n.kvHeads, 1)),
                   fmt::format("valid tp sizes: {}", fmt::join(tpSizesDividingHeads(m_spec.config, 64), ", ")));
        if (!ok) { // reported once; continue with the even split so that o_proj does not repeat it
            outLocal.clear();
            for (const auto& iv : chunkSizes(gt(out).features, m_T))
                outLocal.push_back(iv.size);
        }
        lay(out) = sharded(outLocal);
        if (ok)
            sinks(n, block, true, localHeads);
        if (ok && n.inputs.size() > 3) {
            // Doge's dynamic mask: one bias per key/value head; a rank's attention adds only its heads'.
            const TensorLayout& M = lay(n.inputs[3]);
            std::vector<std::int64_t> kvLocal;
            for (std::int64_t r = 0; r < m_T; ++r)
                kvLocal.push_back(K.local[static_cast<std::size_t>(r)] / kvWidth);
            if (M.local != kvLocal)
                report(Severity::Error, block,
                       fmt::format("the dynamic mask (dt_proj) holds [{}] key/value heads per rank but the rank's attention has [{}]: "
                                   "Transformers fails adding it to the scores (a size mismatch)",
                                   sizesText(M.local), sizesText(kvLocal)),
                       "dt_proj mixes every head's values into every head's mask, which no tp style splits by heads: give "
                       "self_attn's q_proj, k_proj, v_proj, dt_proj and o_proj 'replicate'");
        }
    }

    // Whether the Router node whose scores Experts node `n` reads has the 'ep_router' style.
    bool epRouter(const GraphNode& n) const
    {
        const int router = gt(n.inputs[1]).producer;
        const Style* s = router >= 0 ? installed(m_g.graph.nodes[static_cast<std::size_t>(router)].module) : nullptr;
        return s && s->name == "ep_router";
    }

    // Llama4, gpt-oss and Aria store experts as [E, H, 2I] / [E, I, H]; the others [E, 2I, H] / [E, H, I].
    bool lastPackedExperts() const { return expertsLastPacked(m_spec.config); }


    // Set by the match (before propagation), so looked up once.
    bool hasHeadDivisibilityError() const { return m_headDivisibilityError; }

    // gpt-oss attention sinks: one logit per head, so they must follow the head split.
    void sinks(const GraphNode& n, const std::string& block, bool headsSharded, const std::vector<std::int64_t>& heads)
    {
        const ParamShard* s = param(n.ownerModule, "sinks");
        if (!s)
            return;
        const bool sinksSharded = s->dim >= 0;
        if (headsSharded && !sinksSharded)
            report(Severity::Error, block + ".sinks",
                   "attention heads are sharded but the per-head sinks stay whole on every rank",
                   fmt::format("shard '{}.sinks' (colwise) and give '{}' the 'local_params' style", block, block));
        else if (!headsSharded && sinksSharded)
            report(Severity::Error, block + ".sinks", "sinks are sharded but the heads they belong to are not",
                   "shard q/k/v colwise too, or leave the sinks whole");
        else if (headsSharded && localAlong(*s, 0) != heads)
            report(Severity::Error, block + ".sinks",
                   fmt::format("sink shards [{}] do not match the local heads [{}]", sizesText(localAlong(*s, 0)),
                               sizesText(heads)),
                   "shard the sinks with the same tp size as the heads");
    }

    void gatedAct(const GraphNode& n, const Where& where)
    {
        const int out = n.outputs[0];
        if (n.packed) {
            const TensorLayout& in = lay(n.inputs[0]);
            if (in.layout == Layout::ShardLast && in.packedBlocks != 2) {
                report(Severity::Error, producerName(n.inputs[0]),
                       fmt::format("a plain colwise split of the packed [gate; up] output gives rank 0 only gate rows "
                                   "and the last rank only up rows; chunk(2) in '{}' then pairs the wrong halves",
                                   where.str()),
                       "use 'packed_colwise' (strided: every rank keeps matching gate and up rows) or "
                       "'colwise_gather_output'");
                setWhole(out, gt(out).features);
            } else if (in.layout == Layout::ShardLast) {
                std::vector<std::int64_t> half(in.local.size());
                for (std::size_t r = 0; r < half.size(); ++r)
                    half[r] = in.local[r] / 2;
                lay(out) = sharded(half);
            } else {
                requireWhole(n.inputs[0], where, "");
                setWhole(out, gt(out).features);
            }
            return;
        }
        if (n.inputs.size() == 1) { // act(x), elementwise: any split but a partial sum passes through
            if (lay(n.inputs[0]).layout == Layout::Partial) {
                requireWhole(n.inputs[0], where, "");
                setWhole(out, gt(out).features);
            } else {
                lay(out) = lay(n.inputs[0]);
                lay(out).packedBlocks = 1;
            }
            return;
        }
        const TensorLayout &g = lay(n.inputs[0]), &u = lay(n.inputs[1]);
        // Each gate value scales gateSpan up values (a per-head gate: head_dim of them).
        const bool matching = g.local.size() == u.local.size()
                           && std::ranges::equal(g.local, u.local, [&](std::int64_t a, std::int64_t b) { return a * n.gateSpan == b; });
        if (g.layout == u.layout && matching && g.layout != Layout::Partial) {
            lay(out) = u;
            lay(out).packedBlocks = 1;
            return;
        }
        if (g.layout == Layout::Partial || u.layout == Layout::Partial)
            requireWhole(g.layout == Layout::Partial ? n.inputs[0] : n.inputs[1], where, "");
        else
            report(Severity::Error, where,
                   fmt::format("gate ({} [{}]) and up ({} [{}]) are split differently; act(gate)·up needs matching "
                               "elements",
                               layoutName(g.layout), sizesText(g.local), layoutName(u.layout), sizesText(u.local)),
                   "give gate_proj and up_proj the same style");
        setWhole(out, gt(out).features);
    }

    void experts(const GraphNode& n, const Where& where)
    {
        const int out = n.outputs[0];
        const std::int64_t H = gt(out).features;
        requireWhole(n.inputs[0], where, "needs every token's whole hidden state");
        const bool lastPacked = lastPackedExperts();
        const int guDim = lastPacked ? 2 : 1, downDim = lastPacked ? 1 : 2;
        const ParamShard* gu = m_g.expertsUp(n.module);
        const bool gated = param(n.module, "gate_up_proj") != nullptr; // else up → act → down (Nemotron-H)
        const std::string up = gated ? "gate_up_proj" : "up_proj";
        const ParamShard* dn = param(n.module, "down_proj");
        const Style* s = installed(n.module);
        setWhole(out, H);
        if (!gu || !dn)
            return;
        const bool ep = gu->dim == 0 && dn->dim == 0;
        const bool tp = gu->dim == guDim && dn->dim == downDim;
        if (gu->dim < 0 && dn->dim < 0)
            return; // whole experts everywhere: moe_tp_experts passes through
        if (ep) {
            if (n.experts % m_T != 0)
                report(Severity::Error, where,
                       fmt::format("{} experts do not split over tp_size {}: Transformers sets num_experts = E // T "
                                   "and the remainder experts are never run",
                                   n.experts, m_T),
                       validSizesHint(n.experts));
            // 5.24: grouped_gemm only sets num_experts = E // T; the routes are remapped to each rank's
            // experts by ep_dispatch_experts alone. Without it every rank runs its local weights under
            // the global ids below E // T (measured: the Mixtral fixture's logits 6.1e-2 off,
            // Qwen3-MoE's 1.2e-2).
            // 5.1–5.15 (G2; G1 alike): ep_router on the router masks the other ranks' routes and
            // makes the ids local, and moe_tp_experts sums the partial outputs (masked routing with
            // a reduction: what the engine's experts compute for an expert split).
            if (m_T > 1 && m_g.plan->profile != VersionProfile::G3 && !epRouter(n))
                report(Severity::Error, where,
                       "the experts are split by id (grouped_gemm) but their router is not 'ep_router': Transformers "
                       "then runs each rank's own experts under the global expert ids, and its output is not the model's",
                       "give the router (the block's gate) 'ep_router' and the experts 'moe_tp_experts'");
            if (m_T > 1 && m_g.plan->profile == VersionProfile::G3 && (!s || s->name != "ep_dispatch_experts"))
                report(Severity::Error, where,
                       fmt::format("the experts are split by id (grouped_gemm) but '{}' is not ep_dispatch_experts: "
                                   "Transformers then runs each rank's own experts under the global expert ids, "
                                   "and its output is not the model's",
                                   where.str()),
                       "put grouped_gemm and 'ep_dispatch_experts' (on the experts) in ep_plan, as "
                       "plans/mixtral/expert-parallel.json does");
        } else if (tp) {
            if (epRouter(n))
                report(Severity::Error, where,
                       "the router is 'ep_router', which remaps the routes to each rank's experts, but the experts "
                       "are not split by id",
                       fmt::format("split {} and down_proj with 'grouped_gemm', or drop ep_router", up));
            if (gated && gu->placement.kind != Placement::Kind::StridedShard)
                report(Severity::Error, where.str() + ".gate_up_proj",
                       "a plain split of the packed gate_up_proj separates gate rows from up rows",
                       "use 'packed_colwise' (or 'packed_rowwise' for [E, H, 2I] layouts)");
            else {
                std::vector<std::int64_t> rows = localAlong(*gu, guDim); // packed: gate rows = up rows per rank
                for (auto& h : rows)
                    h /= gated ? 2 : 1;
                if (rows != localAlong(*dn, downDim))
                    report(Severity::Error, where,
                           fmt::format("{} keeps [{}] intermediate rows per rank but down_proj [{}]", up, sizesText(rows),
                                       sizesText(localAlong(*dn, downDim))),
                           "split both over the same tp size");
            }
        } else {
            report(Severity::Error, where,
                   fmt::format("{} ({}) and down_proj ({}) of the experts are split differently", up,
                               placementText(*gu), placementText(*dn)),
                   "use packed_colwise + rowwise on the intermediate dim (the default), or grouped_gemm on both");
            return;
        }
        setPartial(out, H);
        if (!s) {
            report(Severity::Error, where,
                   "the experts' parameters are sharded but no style on the experts module sums the partial outputs",
                   "add 'moe_tp_experts' on the experts module");
            setWhole(out, H);
            return;
        }
        if (ep && m_T > 1 && s->name == "ep_dispatch_experts" && m_g.plan->epImplementation == EpImplementation::AllToAll) {
            // AllToAllEP: each rank takes its torch.chunk slice of the token rows; an all-to-all of
            // the per-expert counts (E int64 per rank, as Transformers), then each (token, expert) pair goes to the
            // expert's owner and its output comes back (two all-to-alls; size: the whole exchange,
            // every pair once); the sender weights and sums them, and the slices are all-gathered.
            if (n.weightInputs)
                report(Severity::Error, where,
                       "these experts take every token pre-scaled by its router score (Llama 4), so there is nothing "
                       "to dispatch: Transformers has no ep_plan for them",
                       "shard the experts with the tensor-parallel plan (packed_colwise + rowwise, moe_tp_experts)");
            m_g.nodes[static_cast<std::size_t>(&n - m_g.graph.nodes.data())].dispatch = static_cast<int>(m_g.collectives.size());
            collective(CollectiveKind::AllToAll, n, n.experts, s);
            m_g.collectives.back().fixedBytes = 8 * n.experts; // E int64, as Transformers sends them
            collective(CollectiveKind::AllToAll, n, H, s, n.topK);
            collective(CollectiveKind::AllToAll, n, H, s, n.topK);
            collective(CollectiveKind::AllGather, n, H, s, 1, {}, nullptr, true);
            setWhole(out, H);
        } else if (s->forward == CollectiveKind::AllToAll) {
            // Token dispatch: each rank sends its tokens' top-k rows out and gets the results back.
            collective(CollectiveKind::AllToAll, n, H, s, n.topK);
            collective(CollectiveKind::AllToAll, n, H, s, n.topK);
            setWhole(out, H);
        } else if (s->forward == CollectiveKind::AllReduce) {
            const std::size_t before = m_g.collectives.size();
            reduce(n, out, s);
            // Llama 4 (Llama4TextExperts): every expert's output rows are reduced before their sum
            // over the experts, [E · B·S, H] (what the collective audit measured in Transformers).
            if (n.weightInputs && m_g.collectives.size() > before && m_g.collectives.back().kind == CollectiveKind::AllReduce)
                m_g.collectives.back().tokensPerToken = n.experts;
        }
    }

    void addNode(const GraphNode& n, int ni, const Where& where)
    {
        const int a = n.inputs[0], b = n.inputs[1], out = n.outputs[0];
        const TensorLayout &A = lay(a), &B = lay(b);
        if (A.layout == Layout::Partial && B.layout == Layout::Partial) {
            setPartial(out, gt(out).features); // a sum of partial sums stays partial
            return;
        }
        if (A.layout == Layout::ShardSeq || B.layout == Layout::ShardSeq) { // the residual stream's rows
            for (int t : {a, b})
                if (lay(t).layout != Layout::ShardSeq)
                    requireWhole(t, where, "adds to the residual stream, which must be whole");
            onRows(ni, out);
            return;
        }
        requireWhole(a, where, "adds to the residual stream, which must be whole");
        requireWhole(b, where, "adds to the residual stream, which must be whole");
        setWhole(out, gt(out).features);
    }

    // --- sequence parallelism -----------------------------------------------------------------
    // A norm whose installed style takes a sequence-sharded input (sequence_parallel), except at the
    // last positions only (the final norm before a head that keeps B rows: nothing to split).
    bool sequenceNorm(int ni) const
    {
        const GraphNode& n = m_g.graph.nodes[static_cast<std::size_t>(ni)];
        if (m_T <= 1 || n.kind != OpKind::Norm || m_g.nodes[static_cast<std::size_t>(ni)].lastPositions)
            return false;
        const Style* s = installed(n.module);
        return s && s->input == Layout::ShardSeq;
    }

    // Which tensors stay split by token rows: those whose every consumer can work on rows (a
    // sequence-parallel norm, or a residual add) and that meet a sequence-parallel norm, directly or
    // through adds whose outputs stay split. One pass from the last node back (consumers come after
    // their producers). A sequence style on a module that is not a norm over the hidden state is an
    // error.
    void sequenceTensors()
    {
        m_rows.assign(m_g.graph.tensors.size(), 0);
        m_soleAdd.assign(m_g.graph.tensors.size(), -1);
        std::vector<char> norms(m_spec.modules.size(), 0);
        bool any = false;
        for (std::size_t ni = 0; ni < m_g.graph.nodes.size(); ++ni) {
            const GraphNode& n = m_g.graph.nodes[ni];
            if (n.kind == OpKind::Norm && n.module >= 0)
                norms[static_cast<std::size_t>(n.module)] = 1;
            if (sequenceNorm(static_cast<int>(ni)) && !m_sequenceStyle)
                m_sequenceStyle = installed(n.module);
            any = any || sequenceNorm(static_cast<int>(ni));
        }
        for (std::size_t m = 0; m < m_spec.modules.size(); ++m)
            if (const Style* s = installed(static_cast<int>(m)); s && s->input == Layout::ShardSeq && !norms[m])
                report(Severity::Error, genericName(m_spec.modules[m].path),
                       fmt::format("'{}' splits the token rows of '{}', which is not a norm of the hidden state: the "
                                   "engine and this preview split the residual stream's norms only",
                                   s->name, genericName(m_spec.modules[m].path)),
                       "put it on the layers' norms (input_layernorm, post_attention_layernorm, …) and the final norm");
        if (!any)
            return;
        const std::size_t nt = m_g.graph.tensors.size();
        std::vector<int> consumers(nt, 0);
        std::vector<char> allOnRows(nt, 1), meetsNorm(nt, 0);
        for (int ni = static_cast<int>(m_g.graph.nodes.size()) - 1; ni >= 0; --ni) {
            const GraphNode& n = m_g.graph.nodes[static_cast<std::size_t>(ni)];
            for (int t : n.outputs) {
                const auto i = static_cast<std::size_t>(t);
                m_rows[i] = consumers[i] > 0 && allOnRows[i] && meetsNorm[i];
                if (consumers[i] != 1 || !allOnRows[i])
                    m_soleAdd[i] = -1;
            }
            const bool norm = sequenceNorm(ni);
            const bool add = n.kind == OpKind::Add && !m_g.nodes[static_cast<std::size_t>(ni)].lastPositions;
            for (int t : n.inputs) {
                const auto i = static_cast<std::size_t>(t);
                ++consumers[i];
                allOnRows[i] = allOnRows[i] && (norm || add);
                meetsNorm[i] = meetsNorm[i] || norm || (add && m_rows[static_cast<std::size_t>(n.outputs[0])]);
                if (add)
                    m_soleAdd[i] = ni;
            }
        }
        // What Transformers does with the same plan (hf-tp-semantics.md §1.1, §1.2).
        if (m_plan.profile != VersionProfile::G2)
            report(Severity::Warning, m_sequenceStyle->name,
                   fmt::format("Transformers does not run '{}' as this preview does: its SequenceParallel (torch's "
                               "in 4.5x, its own in 5.24) takes "
                               "each rank's whole input as that rank's sequence shard (DTensor.from_local), so the "
                               "norm runs on every row on every rank and the projections around it still all-reduce "
                               "(the same logits, no saving); the engine runs Megatron's TP+SP shown here",
                               m_sequenceStyle->name),
                   "measure sequence parallelism on the engine; loaded by from_pretrained, the plan runs as plain TP");
        else
            report(Severity::Warning, m_sequenceStyle->name,
                   fmt::format("Transformers 5.0–5.15 does not run '{}' as this preview does: its "
                               "SequenceParallel all-gathers the input and reduce-scatters the output along the last "
                               "dim, which gives a norm T times its features",
                               m_sequenceStyle->name),
                   "measure sequence parallelism on the engine; do not load this plan with from_pretrained");
    }

    // Node `ni` computes `out` on its rank's token rows; gathered at once unless every consumer
    // takes rows.
    void onRows(int ni, int out)
    {
        const GraphNode& n = m_g.graph.nodes[static_cast<std::size_t>(ni)];
        m_g.nodes[static_cast<std::size_t>(ni)].sequenceRows = true;
        setWhole(out, gt(out).features);
        lay(out).layout = Layout::ShardSeq;
        if (!m_rows[static_cast<std::size_t>(out)]) {
            collective(CollectiveKind::AllGather, n, gt(out).features, m_sequenceStyle, 1, {}, nullptr, true);
            setWhole(out, gt(out).features);
        }
    }

    // Sums a partial output: a reduce-scatter of token rows where it stays split (sequence
    // parallelism) or its one consumer is a residual add whose other input is split already (the
    // last layer's, when the stream is gathered after it), else an all-reduce. `bias`: added once,
    // after the sum.
    void reduce(const GraphNode& n, int out, const Style* s, const ParamShard* bias = nullptr)
    {
        const std::int64_t features = gt(out).features;
        bool rows = m_rows[static_cast<std::size_t>(out)] != 0;
        if (const int add = m_soleAdd[static_cast<std::size_t>(out)]; !rows && add >= 0) {
            const GraphNode& a = m_g.graph.nodes[static_cast<std::size_t>(add)];
            rows = lay(a.inputs[a.inputs[0] == out ? 1 : 0]).layout == Layout::ShardSeq;
        }
        collective(rows ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, n, features, s, 1, {}, bias, rows);
        setWhole(out, features);
        if (rows)
            lay(out).layout = Layout::ShardSeq;
    }

    // --- memory -------------------------------------------------------------------------------
    void memory()
    {
        const std::size_t nT = static_cast<std::size_t>(m_T);
        const std::int64_t e = m_g.elementBytes();
        // Clamped so that nothing wraps when batch · seq is out of range (an error diagnostic then).
        std::int64_t tokens = 0;
        if (__builtin_mul_overflow(std::max<std::int64_t>(m_g.options.batch, 0), std::max<std::int64_t>(m_g.options.seq, 0),
                                   &tokens)
            || tokens > kMaxForwardTokens)
            tokens = kMaxForwardTokens;
        m_g.memory.assign(nT, {});
        for (const auto& p : m_g.params)
            if (!p.tied)
                for (std::size_t r = 0; r < nT; ++r)
                    m_g.memory[r].weightBytes += p.bytes[r];
        // A sparse-attention indexer (replicated) caches its keys per token, whole on every rank: wk's or k_proj's
        // output (index_head_dim); Qwen4-Exp's the key heads of index_qk_proj and their 3 int64 position ids.
        for (const ModuleSpec& mod : m_spec.modules) {
            const ModelConfig& c = m_spec.config;
            std::int64_t bytes = 0;
            if ((mod.path.ends_with(".indexer.wk") || mod.path.ends_with(".indexer.k_proj")) && !mod.params.empty())
                bytes = mod.params.front().shape.front() * (c.layout.indexerKeysF32 ? 4 : m_g.kvElementBytes());
            else if (mod.path.ends_with(".indexer.index_qk_proj"))
                bytes = c.indexKvHeads * c.indexHeadDim * m_g.kvElementBytes() + 3 * 8;
            for (RankMemory& mem : m_g.memory)
                mem.kvCacheBytesPerToken += bytes;
        }
        for (std::size_t ni = 0; ni < m_g.graph.nodes.size(); ++ni) {
            const GraphNode& n = m_g.graph.nodes[ni];
            // The final norm and the head at the last positions only: one row per sequence.
            const std::int64_t rows = m_g.nodes[ni].lastPositions ? std::min(tokens, m_g.options.batch) : tokens;
            // Gemma 4's shared layers attend over another layer's cache and keep none of their own.
            const int keysFrom = n.kind == OpKind::Attention ? gt(n.inputs[1]).producer : -1;
            const bool ownCache = keysFrom < 0 || m_g.graph.nodes[static_cast<std::size_t>(keysFrom)].layer == n.layer;
            if (n.kind == OpKind::Attention && ownCache) {
                // The cache holds k and v after projection; MLA's the compressed latent and the shared rope key, whole on
                // every rank (Transformers expands them through kv_b_proj at every forward).
                const std::int64_t kv = m_g.kvElementBytes();
                const std::int64_t window = n.window > 0 ? n.window : n.chunk;
                for (std::size_t r = 0; r < nT; ++r) {
                    RankMemory& mem = m_g.memory[r];
                    const std::int64_t bytes = n.mlaRope > 0 ? n.mlaLatent * kv
                                                             : (lay(n.inputs[1]).local[r] + lay(n.inputs[2]).local[r]) * kv;
                    mem.kvCacheBytesPerToken += bytes;
                    // Inkling's short convolutions keep their last kernel inputs in float32: the rank's k and v heads,
                    // and the attention and MLP outputs (whole).
                    if (m_spec.config.layout.inkling || m_spec.config.layout.inkling2)
                        mem.stateBytes += (lay(n.inputs[1]).local[r] + lay(n.inputs[2]).local[r] + 2 * m_spec.config.hiddenSize)
                                        * m_spec.config.convKernel * 4;
                    if (window > 0) {
                        auto at = std::lower_bound(mem.kvWindows.begin(), mem.kvWindows.end(), window - 1,
                                                   [](const auto& w, std::int64_t t) { return w.first < t; });
                        if (at == mem.kvWindows.end() || at->first != window - 1)
                            at = mem.kvWindows.insert(at, {window - 1, 0});
                        at->second += bytes;
                    }
                }
            }
            if (n.kind == OpKind::Mixer)
                for (RankMemory& mem : m_g.memory)
                    mem.stateBytes += mixerStateBytes(m_spec.config, e);
            // Live at a node: the residual stream, its inputs and outputs (experts: routed rows too);
            // a tensor split by token rows holds the rank's rows only.
            for (std::size_t r = 0; r < nT; ++r) {
                const std::int64_t mine = sequenceRows(rows, m_T, static_cast<int>(r)).size;
                auto rowsOf = [&](int t) { return lay(t).layout == Layout::ShardSeq ? mine : rows; };
                std::int64_t elements = m_spec.config.hiddenSize * (m_g.nodes[ni].sequenceRows ? mine : rows);
                for (int t : n.inputs)
                    if (gt(t).producer >= 0)
                        elements += lay(t).local[r] * rowsOf(t);
                for (int t : n.outputs)
                    elements += lay(t).local[r] * rowsOf(t);
                std::int64_t bytes = elements * e;
                if (n.kind == OpKind::Experts)
                    if (const ParamShard* gu = m_g.expertsUp(n.module)) {
                        // Routed rows hold gate‖up, then act·up: 3/2 of the local packed width (ungated: up, then act(up)).
                        const std::int64_t packed = gu->shapes[r][lastPackedExperts() ? 2 : 1];
                        bytes += tokens * n.topK * (param(n.module, "gate_up_proj") ? packed + packed / 2 : 2 * packed) * e;
                        // An all-to-all dispatch's buffers: its rows' picks sent and returned, and
                        // received and computed as many as every rank's picks (the worst case).
                        if (m_g.nodes[ni].dispatch >= 0)
                            bytes += (2 * mine + 2 * rows) * n.topK * m_spec.config.hiddenSize * e;
                        // Llama 4's per-expert rows, reduced before their sum.
                        if (n.weightInputs && m_T > 1)
                            bytes += rows * n.experts * m_spec.config.hiddenSize * e;
                    }
                m_g.memory[r].activationPeakBytes = std::max(m_g.memory[r].activationPeakBytes, bytes);
            }
        }
    }

    // Findings about the plan as a whole.
    void checkPlanScope()
    {
        if (m_g.graph.nodes.empty() && !m_spec.modules.empty())
            report(Severity::Warning, m_spec.className,
                   fmt::format("no dataflow graph for model_type '{}' (its tree comes from tensor names): shards and "
                               "weight memory only; collectives, activation memory and times are not predicted",
                               m_spec.config.modelType),
                   "");
        bool shardsBeyondEmbedding = false;
        for (const auto& p : m_g.params)
            if (p.dim >= 0 && m_spec.modules[static_cast<std::size_t>(p.module)].layer >= 0)
                shardsBeyondEmbedding = true;
        if (!m_spec.defaultEpPlan.empty() && !shardsBeyondEmbedding && m_T > 1)
            report(Severity::Warning, m_spec.className,
                   fmt::format("{} has an expert-parallel plan but this TP plan shards no layer weights: every "
                               "rank holds every expert and repeats all compute",
                               m_spec.className),
                   "load with DistributedConfig(ep_size=…) to use its ep_plan, or add expert entries "
                   "(moe_tp_experts with packed_colwise + rowwise)");
        if (shardsBeyondEmbedding && m_T > 1)
            checkReplicatedWeights();
        checkQuantizationBlocks();
        checkPackedWeights();
        if (m_plan.entries.empty() && m_T > 1) {
            if (m_spec.config.family != Family::Unknown)
                report(Severity::Error, m_spec.className,
                       fmt::format("tp_size={} with an empty tp_plan: Transformers raises ValueError (no tp_plan)", m_T),
                       "start from the model's default plan");
            else // a tree read from tensor names: its class's default plan is not known here
                report(Severity::Error, m_spec.className,
                       fmt::format("tp_size={} with an empty tp_plan: TP Studio does not know model_type '{}', so it "
                                   "has no default plan for {} (Transformers' class may have one)",
                                   m_T, m_spec.config.modelType, m_spec.className),
                       "give a plan (--plan FILE on the command line, or assign styles in the GUI), or set TPSTUDIO_PYTHON "
                       "to a Python whose Transformers knows the model type: its class's default plan is then used");
        }
    }

    // Coverage: the weights of Linear, Embedding and Experts modules that stay whole on every rank,
    // by plan key. More than a quarter of a rank's weights whole is a warning naming the largest
    // groups, their bytes and the key (the class's default plan's, where it has one) that would shard
    // them — a plan whose experts match no key holds every expert on every rank.
    void checkReplicatedWeights()
    {
        // Summed first: the groups are made only for a plan that is warned about (shardModel is called for every
        // candidate of a search).
        std::int64_t wholeBytes = 0;
        for (const ParamShard& p : m_g.params)
            if (isWholeWeight(m_spec, p))
                wholeBytes += p.bytes[0];
        const std::int64_t total = m_g.memory.empty() ? 0 : m_g.memory[0].weightBytes;
        if (total <= 0 || wholeBytes * 4 <= total)
            return;
        const std::vector<WholeWeights> largest = wholeWeights(m_spec, m_g, m_plan.profile);
        std::string named, hint;
        for (std::size_t i = 0; i < std::min<std::size_t>(3, largest.size()); ++i) {
            const WholeWeights& g = largest[i];
            named += fmt::format("{}{} ({} module{}, {})", i ? ", " : "", g.key, g.modules, g.modules == 1 ? "" : "s",
                                 humanBytes(static_cast<double>(g.bytes)));
            for (const PlanEntry& d : m_spec.defaultTpPlan)
                if (d.key == g.key || d.key.starts_with(g.key + "."))
                    hint += fmt::format("{}'{}': '{}'", hint.empty() ? "" : ", ", d.key, d.style);
        }
        report(Severity::Warning, m_spec.className,
               fmt::format("{} of each rank's {} of weights ({:.0f}%) are whole on every rank at tp_size {}; the largest: {}",
                           humanBytes(static_cast<double>(wholeBytes)), humanBytes(static_cast<double>(total)),
                           100.0 * static_cast<double>(wholeBytes) / static_cast<double>(total), m_T, named),
               hint.empty() ? "add plan keys that shard them (colwise for projections into a layer, rowwise out of it; "
                              "moe_tp_experts for experts), or accept the memory"
                            : fmt::format("the class's default plan shards them: {}", hint));
    }

    // fp8 block scales (quantization_config.weight_block_size): Transformers shards a quantized
    // module's weight_scale_inv with the same style as its weight (the fp8 quantizer's
    // update_parallel_plan gives it the weight key's style; colwise: Shard(ndim − 2) of both,
    // rowwise: Shard(ndim − 1)), so a rank's rows (or columns) of the weight must be whole blocks or
    // its scales belong to other rows. A split that cuts a block is an error naming the module, the
    // sizes and the tp sizes that keep whole blocks.
    // MXFP4 (gpt-oss's experts, [E, in, out]): 32 values along the input share one E8M0 scale (scaleBlock {32, 1}); a
    // split of the input must keep whole blocks too.
    void checkQuantizationBlocks()
    {
        if (m_T < 2)
            return;
        std::set<std::string> reported;
        for (const ParamShard& p : m_g.params) {
            const ModuleSpec& m = m_spec.modules[static_cast<std::size_t>(p.module)];
            const ParamSpec& ps = m.params[static_cast<std::size_t>(p.param)];
            const int rank = static_cast<int>(ps.shape.size());
            const std::vector<std::int64_t>& block = ps.scaleBlock;
            if (p.dim < 0 || rank < 2 || block.size() != 2 || p.dim < rank - 2)
                continue;
            const std::int64_t b = block[p.dim == rank - 2 ? 0 : 1];
            auto cuts = [&](const std::vector<std::vector<Interval>>& slices) {
                for (const auto& rs : slices)
                    for (const Interval& iv : rs)
                        if (iv.offset % b != 0 || (iv.size % b != 0 && iv.offset + iv.size != ps.shape[static_cast<std::size_t>(p.dim)]))
                            return true;
                return false;
            };
            if (!cuts(p.slices))
                continue;
            const std::string where = wildcardName(p.path, m_plan.profile);
            if (!reported.insert(where).second)
                continue;
            const std::int64_t n = ps.shape[static_cast<std::size_t>(p.dim)];
            std::vector<int> good;
            for (int t = 1; t <= 64; ++t) {
                Placement pl = p.placement;
                if (!cuts(shardParam(p.path, ps, pl, t).slices))
                    good.push_back(t);
            }
            std::vector<std::int64_t> sizes;
            for (const auto& rs : p.slices) {
                std::int64_t sz = 0;
                for (const Interval& iv : rs)
                    sz += iv.size;
                sizes.push_back(sz);
            }
            const bool even = std::all_of(sizes.begin(), sizes.end(), [&](std::int64_t x) { return x == sizes.front(); });
            const bool mx = ps.dtype == DType::F4;
            const std::string parts = !even ? "[" + sizesText(sizes) + "]"
                                    : p.slices.front().size() > 1
                                        ? fmt::format("{} packed parts of {}", p.slices.front().size(), p.slices.front().front().size)
                                        : std::to_string(sizes.front());
            report(Severity::Error, where,
                   mx ? fmt::format("tp_size {} splits its {} input features into {} per rank, which cuts its MXFP4 blocks ({} "
                                    "values of the input share one E8M0 scale), so a rank's blocks would hold other ranks' values",
                                    m_T, n, parts, b)
                      : fmt::format("tp_size {} splits its {} {} features into {} per rank, which cuts its fp8 scale blocks "
                                    "({} wide: quantization_config.weight_block_size [{}, {}]); Transformers shards "
                                    "weight_scale_inv with the weight, so a rank's scales would belong to other features",
                                    m_T, n, p.dim == rank - 2 ? "output" : "input", parts, b, block[0], block[1]),
                   fmt::format("tp sizes that keep whole blocks here: {}", fmt::join(good, ", ")));
        }
    }

    // AWQ / GPTQ weights under a plan that shards them (tp_size > 1): Transformers 5.24's quantizers give the plan no
    // entry for their buffers (qweight, qzeros, scales, g_idx are not parameters; update_parallel_plan adds only
    // parameters), so every rank loads them whole while the module's forward hook hands the GEMM a DTensor input: the
    // first forward raises. One error, at the first such module, with what a serving engine would need instead: vLLM's
    // AWQ/GPTQ layers need a row-parallel shard of whole groups (in/T a multiple of group_size) and a column-parallel
    // one of whole int32 words (out/T · bits a multiple of 32).
    void checkPackedWeights()
    {
        if (m_T < 2)
            return;
        const ParamShard* first = nullptr;
        int sharded = 0;
        std::set<int> good;
        for (int t = 1; t <= 64; ++t)
            good.insert(t);
        for (const ParamShard& p : m_g.params) {
            const ParamSpec& ps = m_spec.modules[static_cast<std::size_t>(p.module)].params[static_cast<std::size_t>(p.param)];
            if (ps.packBits <= 0 || p.dim < 0)
                continue;
            first = first ? first : &p;
            ++sharded;
            const std::int64_t n = ps.shape[static_cast<std::size_t>(p.dim)];
            for (auto it = good.begin(); it != good.end();) {
                const std::int64_t local = n / *it;
                const bool whole = n % *it == 0
                    && (p.dim == 0 ? local * ps.packBits % 32 == 0 : ps.packGroup <= 0 || local % ps.packGroup == 0);
                it = whole ? std::next(it) : good.erase(it);
            }
        }
        if (!first)
            return;
        const ParamSpec& ps = m_spec.modules[static_cast<std::size_t>(first->module)].params[static_cast<std::size_t>(first->param)];
        const std::string method = ps.packGptq ? "GPTQ" : "AWQ";
        report(Severity::Error, wildcardName(m_spec.modules[static_cast<std::size_t>(first->module)].path, m_plan.profile),
               fmt::format("{} {}-bit weight (group_size {}) that this plan shards ({} such weights in all): Transformers "
                           "5.24 does not split {} checkpoints — its quantized Linear keeps qweight, qzeros and scales as "
                           "buffers, which the tp_plan never lists — so every rank loads them whole and the first forward "
                           "fails ('aten.mm.default got mixed torch.Tensor and DTensor')",
                           ps.packGptq ? "a GPTQ" : "an AWQ", ps.packBits, ps.packGroup, sharded, method),
               fmt::format("for Transformers' TP use an unquantized or fp8 checkpoint; vLLM and SGLang split {} layers, {} "
                           "(a row-parallel shard of {}, a column-parallel one of whole int32 words)",
                           method, good.empty() ? std::string("but at no tp size up to 64 here") : fmt::format("at tp sizes {} here", fmt::join(good, ", ")),
                           ps.packGroup > 0 ? fmt::format("whole groups of {} input rows", ps.packGroup) : std::string("any inputs: one group per row")));
    }

    const ModelSpec& m_spec;
    const Plan& m_plan;
    ShardedGraph& m_g;
    const int m_T;
    std::unordered_map<std::string, int> m_reported; // reportKey of every diagnostic → its index
    std::unordered_map<int, int> m_consequenceOf; // consequence's index → its cause's
    std::vector<int> m_cause;                    // per tensor: the error whose consequence it carries, or -1
    bool m_visiting = false;                     // in visit(): errors mark the node's outputs
    int m_inputCause = -1;                       // the visited node's inputs' cause, or -1
    int m_nodeCause = -1;                        // what the visited node's outputs follow from, or -1
    bool m_headDivisibilityError = false;
    std::vector<char> m_rows;                    // per tensor: stays split by token rows (sequenceTensors)
    std::vector<int> m_soleAdd;                  // per tensor: the residual add that is its one consumer, or -1
    std::vector<int> m_blockEnd;                 // per node: the block whose output it makes and whose style sums it, or -1
    const Style* m_sequenceStyle = nullptr;      // the sequence-parallel style of the first such norm
};

DType defaultActivationDtype(const ModelConfig& c)
{
    switch (c.dtype) {
    case DType::F16:
    case DType::BF16:
    case DType::F32: return c.dtype;
    default: return DType::BF16;
    }
}

} // namespace

std::int64_t RankMemory::kvCacheBytesAt(std::int64_t context) const
{
    std::int64_t bytes = kvCacheBytesPerToken * context + stateBytes;
    for (const auto& [kept, perToken] : kvWindows)
        if (context > kept)
            bytes -= perToken * (context - kept);
    return bytes;
}

std::vector<WholeWeights> wholeWeights(const ModelSpec& spec, const ShardedGraph& g, VersionProfile profile)
{
    std::map<std::string, WholeWeights> groups;
    std::map<std::string, int> lastModule;
    for (const ParamShard& p : g.params) {
        if (!isWholeWeight(spec, p))
            continue;
        const std::string key = wildcardName(spec.modules[static_cast<std::size_t>(p.module)].path, profile);
        WholeWeights& w = groups[key];
        w.key = key;
        w.bytes += p.bytes[0];
        if (auto [it, fresh] = lastModule.try_emplace(key, p.module); fresh || it->second != p.module) {
            it->second = p.module;
            ++w.modules;
        }
    }
    std::vector<WholeWeights> out;
    for (auto& [key, w] : groups) {
        for (const PlanEntry& d : spec.defaultTpPlan)
            if (d.key == key || d.key.starts_with(key + ".")) {
                w.defaultStyle = d.style;
                break;
            }
        out.push_back(std::move(w));
    }
    std::sort(out.begin(), out.end(), [](const WholeWeights& a, const WholeWeights& b) { return a.bytes > b.bytes; });
    return out;
}

Interval sequenceRows(std::int64_t rows, int tp, int rank)
{
    return chunkSizes(rows, tp)[static_cast<std::size_t>(rank)];
}

std::vector<bool> lastPositionNodes(const LayerGraph& graph)
{
    std::vector<bool> last(graph.nodes.size(), false);
    const auto logits = std::find_if(graph.nodes.begin(), graph.nodes.end(), [](const GraphNode& n) { return n.kind == OpKind::Logits; });
    if (logits == graph.nodes.end() || logits->inputs.empty())
        return last;
    const int head = graph.tensors[static_cast<std::size_t>(logits->inputs[0])].producer;
    if (head < 0 || graph.nodes[static_cast<std::size_t>(head)].kind != OpKind::Linear)
        return last;
    last[static_cast<std::size_t>(head)] = true;
    // The final norm, when nothing but the head reads it (row-wise: its last rows are all the head needs).
    const int h = graph.nodes[static_cast<std::size_t>(head)].inputs[0];
    const int norm = graph.tensors[static_cast<std::size_t>(h)].producer;
    if (norm < 0 || graph.nodes[static_cast<std::size_t>(norm)].kind != OpKind::Norm)
        return last;
    int readers = 0;
    for (const GraphNode& n : graph.nodes)
        readers += static_cast<int>(std::count(n.inputs.begin(), n.inputs.end(), h));
    if (readers == 1 && graph.nodes[static_cast<std::size_t>(norm)].outputs.size() == 1)
        last[static_cast<std::size_t>(norm)] = true;
    return last;
}

ShardedGraph shardModel(const ModelSpec& spec, const Plan& plan, const ShardOptions& options)
{
    return shardModel(spec, plan, options, buildLayerGraph(spec));
}

// O(K·L + (M + P)·L) for the match (see matchPlan) plus O(N·T) for propagation, memory and the
// per-rank shards: N graph nodes, tensors and parameters, T the tp size. Each node is visited once
// and its findings are deduplicated through a hash set, so no step looks at every earlier node,
// diagnostic or parameter.
ShardedGraph shardModel(const ModelSpec& spec, const Plan& plan, const ShardOptions& options, LayerGraph graph,
                        ShardTimings* timings)
{
    using Clock = std::chrono::steady_clock;
    const auto seconds = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    ShardedGraph g;
    g.tpSize = std::max(plan.tpSize, 1);
    g.options = options;
    g.activationDtype = options.activationDtype.value_or(defaultActivationDtype(spec.config));
    auto p = std::make_shared<Plan>(plan);
    p->tpSize = g.tpSize;
    g.plan = p;
    g.graph = std::move(graph);
    auto t0 = Clock::now();
    g.match = matchPlan(spec, *p);
    g.diagnostics = g.match.diagnostics;
    if (options.batch < 1 || options.seq < 1 || options.batch > kMaxForwardTokens / options.seq)
        g.diagnostics.push_back({Severity::Error, "batch × seq",
                                 fmt::format("batch × seq must be from 1 to {} tokens, found {} × {}", kMaxForwardTokens,
                                             options.batch, options.seq),
                                 "use a smaller batch or sequence"});
    if (timings)
        timings->matchSeconds = seconds(t0);
    t0 = Clock::now();
    Propagator(spec, *p, g).run();
    if (timings)
        timings->propagateSeconds = seconds(t0);
    return g;
}

} // namespace tp
