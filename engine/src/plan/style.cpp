// style.cpp — the built-in style registry. Placements and layouts per
// hf-tp-semantics.md §1; names per generation as the installed Transformers registers them
// (G3 = current main, checked against 5.24 by tests/fixtures/styles.json).
#include "tp/plan/style.h"

#include <fmt/format.h>

#include <algorithm>

namespace tp {

std::string Placement::toString() const
{
    switch (kind) {
    case Kind::None: return "-";
    case Kind::Replicate: return "Replicate";
    case Kind::Shard: return fmt::format("Shard({})", dim);
    case Kind::StridedShard: return fmt::format("StridedShard({}, sf={})", dim, splitFactor);
    }
    return "?";
}

const char* layoutName(Layout l)
{
    switch (l) {
    case Layout::Any: return "any";
    case Layout::Replicate: return "Replicate";
    case Layout::ShardLast: return "Shard(-1)";
    case Layout::ShardSeq: return "Shard(seq)";
    case Layout::Partial: return "Partial";
    }
    return "?";
}

const char* collectiveName(CollectiveKind c)
{
    switch (c) {
    case CollectiveKind::None: return "none";
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllToAll: return "all_to_all";
    }
    return "?";
}

const char* profileName(VersionProfile p)
{
    switch (p) {
    case VersionProfile::G1: return "G1";
    case VersionProfile::G2: return "G2";
    case VersionProfile::G3: return "G3";
    }
    return "?";
}

std::optional<VersionProfile> profileFromName(std::string_view n)
{
    if (n == "G1" || n == "g1")
        return VersionProfile::G1;
    if (n == "G2" || n == "g2")
        return VersionProfile::G2;
    if (n == "G3" || n == "g3" || n == "current")
        return VersionProfile::G3;
    return std::nullopt;
}

Placement Style::placementFor(int rank, bool isEmbedding) const
{
    if (isEmbedding && rank == 2 && embedding.kind != Placement::Kind::None)
        return embedding;
    if (rank == 1)
        return bias;
    if (rank >= 3)
        return param3d;
    return weight2d;
}

std::optional<Layout> layoutFromName(std::string_view n)
{
    if (n == "Replicate" || n == "Replicate()")
        return Layout::Replicate;
    if (n == "Shard(-1)")
        return Layout::ShardLast;
    return std::nullopt;
}

Result<Style> makeCustomStyle(const CustomStyleSpec& spec)
{
    const bool col = spec.base == "colwise", row = spec.base == "rowwise";
    if (spec.name.empty() || spec.name.find_first_of(" \t\"'\\") != std::string::npos)
        return invalidArgument(fmt::format("custom style '{}': a name is one word without quotes", spec.name));
    for (auto p : {VersionProfile::G1, VersionProfile::G2, VersionProfile::G3})
        if (StyleRegistry::builtin().find(spec.name, p))
            return invalidArgument(fmt::format("custom style '{}': the name is a built-in style", spec.name));
    if (!col && !row)
        return invalidArgument(fmt::format("custom style '{}': base must be \"colwise\" or \"rowwise\", found \"{}\"",
                                           spec.name, spec.base));
    auto okLayout = [](Layout l) { return l == Layout::Replicate || l == Layout::ShardLast; };
    if (!okLayout(spec.input) || !okLayout(spec.output))
        return invalidArgument(fmt::format("custom style '{}': input and output layouts are Replicate or Shard(-1)",
                                           spec.name));
    if (col && spec.input != Layout::Replicate)
        return invalidArgument(fmt::format("custom style '{}': a colwise style takes a Replicate input (Transformers "
                                           "would all-gather a sharded one first)",
                                           spec.name));
    Style s;
    s.name = spec.name;
    s.custom = true;
    s.input = spec.input;
    s.output = spec.output;
    if (col) {
        s.weight2d = Placement::shard(-2);
        s.bias = Placement::shard(-1);
        s.param3d = Placement::shard(-2);
        s.embedding = Placement::shard(1);
        s.forward = spec.output == Layout::Replicate ? CollectiveKind::AllGather : CollectiveKind::None;
    } else {
        s.weight2d = Placement::shard(-1);
        s.bias = Placement::replicate();
        s.param3d = Placement::shard(-1);
        s.embedding = Placement::shard(0);
        s.forward = spec.output == Layout::Replicate ? CollectiveKind::AllReduce : CollectiveKind::ReduceScatter;
    }
    s.description = fmt::format("custom {}: input {}, output {}, forward {}", spec.base, layoutName(spec.input),
                                layoutName(spec.output), collectiveName(s.forward));
    return s;
}

CustomStyleSpec customStyleSpec(const Style& s)
{
    return {s.name, s.weight2d.dim == -2 ? "colwise" : "rowwise", s.input, s.output};
}

std::vector<Interval> chunkSizes(std::int64_t n, int tp)
{
    std::vector<Interval> out(static_cast<std::size_t>(std::max(tp, 1)));
    if (tp < 1)
        return out;
    const std::int64_t chunk = (n + tp - 1) / tp;
    for (int r = 0; r < tp; ++r) {
        const std::int64_t start = std::min<std::int64_t>(n, r * chunk);
        out[static_cast<std::size_t>(r)] = {start, std::min<std::int64_t>(n, start + chunk) - start};
    }
    return out;
}

std::vector<std::vector<Interval>> stridedChunks(std::int64_t n, int sf, int tp)
{
    // sf groups of ceil(n/sf) rows; inside each group this rank's ceil chunk.
    std::vector<std::vector<Interval>> out(static_cast<std::size_t>(std::max(tp, 1)));
    const std::int64_t group = (n + sf - 1) / sf;
    for (int g = 0; g < sf; ++g) {
        const std::int64_t gStart = std::min<std::int64_t>(n, g * group);
        const std::int64_t gSize = std::min<std::int64_t>(n, gStart + group) - gStart;
        const auto chunks = chunkSizes(gSize, tp);
        for (int r = 0; r < tp; ++r)
            out[static_cast<std::size_t>(r)].push_back({gStart + chunks[static_cast<std::size_t>(r)].offset,
                                                        chunks[static_cast<std::size_t>(r)].size});
    }
    return out;
}

void StyleRegistry::add(Style s, std::vector<VersionProfile> profiles)
{
    m_entries.push_back({std::move(s), std::move(profiles)});
}

void StyleRegistry::addAlias(std::string alias, std::string target, std::vector<VersionProfile> profiles)
{
    m_aliases.push_back({std::move(alias), std::move(target), std::move(profiles)});
}

namespace {
bool in(const std::vector<VersionProfile>& ps, VersionProfile p) { return std::find(ps.begin(), ps.end(), p) != ps.end(); }
} // namespace

std::string StyleRegistry::canonical(std::string_view name, VersionProfile profile) const
{
    for (const auto& a : m_aliases)
        if (a.alias == name && in(a.profiles, profile))
            return a.target;
    return std::string(name);
}

const Style* StyleRegistry::find(std::string_view name, VersionProfile profile) const
{
    const std::string c = canonical(name, profile);
    for (const auto& e : m_entries)
        if (e.style.name == c && (e.style.custom || in(e.profiles, profile)))
            return &e.style;
    return nullptr;
}

std::vector<std::string> StyleRegistry::names(VersionProfile profile) const
{
    std::vector<std::string> out;
    for (const auto& e : m_entries)
        if (e.style.custom || in(e.profiles, profile))
            out.push_back(e.style.name);
    for (const auto& a : m_aliases)
        if (in(a.profiles, profile))
            out.push_back(a.alias);
    return out;
}

const StyleRegistry& StyleRegistry::builtin()
{
    static const StyleRegistry reg = [] {
        using P = Placement;
        using V = VersionProfile;
        const std::vector<V> g123 = {V::G1, V::G2, V::G3}, g23 = {V::G2, V::G3}, g1 = {V::G1}, g2 = {V::G2},
                             g3 = {V::G3}, g13 = {V::G1, V::G3};
        StyleRegistry r;
        auto style = [](std::string name, P w, P b, P p3, P emb, Layout in, Layout out, CollectiveKind c,
                        std::string desc) {
            Style s;
            s.name = std::move(name);
            s.weight2d = w;
            s.bias = b;
            s.param3d = p3;
            s.embedding = emb;
            s.input = in;
            s.output = out;
            s.forward = c;
            s.description = std::move(desc);
            return s;
        };
        const P none = P::none(), rep = P::replicate();
        // Linear styles: weight [out, in] → Shard(-2) is the output dim, Shard(-1) the input dim.
        r.add(style("colwise", P::shard(-2), P::shard(-1), P::shard(-2), P::shard(1), Layout::Replicate,
                    Layout::ShardLast, CollectiveKind::None,
                    "Column parallel: output features split; output stays sharded on the last dim"),
              g123);
        r.add(style("colwise_gather_output", P::shard(-2), P::shard(-1), P::shard(-2), P::shard(1), Layout::Replicate,
                    Layout::Replicate, CollectiveKind::AllGather,
                    "Column parallel, output all-gathered on the last dim (out-features must divide by T)"),
              g23);
        r.add(style("rowwise", P::shard(-1), rep, P::shard(-1), P::shard(0), Layout::ShardLast, Layout::Replicate,
                    CollectiveKind::AllReduce,
                    "Row parallel: input features split; partial sums all-reduced; bias added once after"),
              g123);
        r.add(style("rowwise_split_input", P::shard(-1), rep, P::shard(-1), P::shard(0), Layout::Replicate,
                    Layout::Replicate, CollectiveKind::AllReduce,
                    "Row parallel on a replicated input: split locally (no comm), then all-reduce"),
              g23);
        r.add(style("embedding_rowwise", P::shard(0), none, none, P::shard(0), Layout::Replicate, Layout::Replicate,
                    CollectiveKind::AllReduce, "Vocab-parallel embedding: out-of-range ids masked, then all-reduce"),
              g23);
        r.add(style("embedding_colwise", P::shard(1), none, none, P::shard(1), Layout::Replicate, Layout::Replicate,
                    CollectiveKind::AllGather, "Hidden-parallel embedding: each rank looks up hidden/T, all-gathered"),
              g23);
        r.add(style("packed_colwise", P::strided(-2, 2), P::shard(-1), P::strided(-2, 2), none, Layout::Replicate,
                    Layout::ShardLast, CollectiveKind::None,
                    "Column parallel over a packed [gate; up] weight: each rank keeps matching gate and up rows"),
              g23);
        Style packedRow = style("packed_rowwise", P::strided(-1, 2), rep, P::strided(-1, 2), none, Layout::Any,
                                Layout::Any, CollectiveKind::None,
                                "Parameter-only strided split of a packed last dim (Llama4 experts [E, H, 2D])");
        packedRow.installsForward = false;
        r.add(packedRow, g23);
        r.add(style("sequence_parallel", rep, rep, none, none, Layout::ShardSeq, Layout::ShardSeq, CollectiveKind::None,
                    "Replicated params on a sequence-sharded activation (not wired up for inference)"),
              g123);
        r.add(style("replicated_with_grad_allreduce", rep, rep, none, none, Layout::Any, Layout::Any,
                    CollectiveKind::None, "Replicated parameter whose gradient is all-reduced (q/k norms)"),
              g23);
        r.add(style("mla_kv_a_proj", rep, rep, none, none, Layout::Replicate, Layout::Replicate, CollectiveKind::None,
                    "MLA kv_a projection, replicated; the rope slice's gradient is all-reduced"),
              g23);
        r.add(style("all_reduce", none, none, none, none, Layout::Partial, Layout::Replicate, CollectiveKind::AllReduce,
                    "All-reduce the module's output (a sync point after a partial-sum computation)"),
              g23);
        r.add(style("moe_tp_experts", none, none, none, none, Layout::Replicate, Layout::Replicate,
                    CollectiveKind::AllReduce,
                    "Experts block: per-rank partial expert outputs summed (only if a parameter is sharded)"),
              g23);
        r.add(style("moe_identity_expert", none, none, none, none, Layout::Replicate, Layout::Partial,
                    CollectiveKind::None, "Identity/zero expert: input divided by T to cancel the later all-reduce"),
              g23);
        r.add(style("local_params", none, none, none, none, Layout::Any, Layout::Any, CollectiveKind::None,
                    "Runs the module with its own sharded parameters as local tensors (e.g. owner of attention sinks)"),
              g3);
        r.add(style("replicate", rep, rep, rep, rep, Layout::Any, Layout::Any, CollectiveKind::None,
                    "Parameters replicated on every rank"),
              g13);
        // MoEParamShard(Shard(0), shards_expert_dim=True): dim 0 of every parameter it names, the 2-D
        // expert biases [E, 2I] / [E, H] (gpt-oss) as the 3-D weights.
        Style grouped = style("grouped_gemm", P::shard(0), P::shard(0), P::shard(0), none, Layout::Any, Layout::Any,
                              CollectiveKind::None, "Expert parallel: whole experts split over ranks (expert dim)");
        grouped.installsForward = false;
        r.add(grouped, g123);
        r.add(style("ep_router", none, none, none, none, Layout::Replicate, Layout::Replicate, CollectiveKind::None,
                    "Router for masked expert parallelism: non-local experts' scores zeroed, ids made local"),
              {V::G1, V::G2});
        r.add(style("megamoe_router", none, none, none, none, Layout::Replicate, Layout::Replicate,
                    CollectiveKind::None, "DeepGEMM Mega MoE router (global expert ids)"),
              g2);
        r.add(style("megamoe_experts", none, none, none, none, Layout::Replicate, Layout::Replicate,
                    CollectiveKind::AllToAll, "DeepGEMM Mega MoE experts: dispatch/combine inside the kernel"),
              g2);
        // Transformers 5.24's AutoEP runs AllReduceEP at inference when the expert group is the TP
        // group (ep_size = tp_size, the one mesh here): every rank runs its own experts on the whole
        // batch, the other ranks' routes masked, and the partial outputs are all-reduced. Its
        // all-to-all dispatch (AllToAllEP) is for training and for ranks with different batches.
        r.add(style("ep_dispatch_experts", none, none, none, none, Layout::Replicate, Layout::Replicate,
                    CollectiveKind::AllReduce,
                    "Expert parallel (ep_plan, ep_size = tp_size): each rank's experts on the whole batch, other "
                    "ranks' routes masked, outputs all-reduced (Transformers' AllReduceEP at inference)"),
              g3);
        // G1-only names.
        r.add(style("local_colwise", P::shard(-2), P::shard(-1), P::shard(-2), none, Layout::Replicate,
                    Layout::ShardLast, CollectiveKind::None, "colwise on plain tensors (a parent 'gather' reduces)"),
              g1);
        r.add(style("local_rowwise", P::shard(-1), rep, P::shard(-1), none, Layout::ShardLast, Layout::Partial,
                    CollectiveKind::None, "rowwise on plain tensors, no reduction (a parent 'gather' reduces)"),
              g1);
        r.add(style("local_packed_rowwise", P::strided(-1, 2), rep, P::strided(-1, 2), none, Layout::ShardLast,
                    Layout::Partial, CollectiveKind::None, "packed rowwise on plain tensors"),
              g1);
        r.add(style("local", none, none, none, none, Layout::Any, Layout::Any, CollectiveKind::None,
                    "IsolatedParallel: parameters divided by the mesh size, isolated compute"),
              g1);
        r.add(style("gather", none, none, none, none, Layout::Partial, Layout::Replicate, CollectiveKind::AllReduce,
                    "GatherParallel: output all-reduced (sum)"),
              g1);
        // G1 names colwise_rep / rowwise_rep are distinct styles; G3 restored them as aliases.
        Style colRep = *r.find("colwise_gather_output", V::G2);
        colRep.name = "colwise_rep";
        r.add(colRep, g1);
        Style rowRep = *r.find("rowwise_split_input", V::G2);
        rowRep.name = "rowwise_rep";
        r.add(rowRep, g1);
        r.addAlias("colwise_rep", "colwise_gather_output", g3);
        r.addAlias("rowwise_rep", "rowwise_split_input", g3);
        return r;
    }();
    return reg;
}

} // namespace tp
