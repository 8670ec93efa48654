// style.h — parallel styles as values: where each parameter goes, which activation layout a module
// expects and produces, and the forward collective that turns one into the other.
//
// Names and semantics follow Transformers' ALL_PARALLEL_STYLES (current main, "G3"), with the
// older generations as version profiles (reference: hf-tp-semantics.md §0, §1).
//
//   const Style* s = StyleRegistry::builtin().find("colwise", VersionProfile::G3);
//   s->weight2d  // Shard(0): output features
#pragma once

#include "tp/core/status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tp {

// How one parameter is split over the T ranks.
struct Placement
{
    enum class Kind { None, Replicate, Shard, StridedShard };
    Kind kind = Kind::None;  // None: the style does not touch this parameter
    int dim = 0;             // negative counts from the end, as torch does
    int splitFactor = 1;     // StridedShard: number of packed blocks (gate|up = 2)

    static Placement none() { return {}; }
    static Placement replicate() { return {Kind::Replicate, 0, 1}; }
    static Placement shard(int d) { return {Kind::Shard, d, 1}; }
    static Placement strided(int d, int sf) { return {Kind::StridedShard, d, sf}; }
    bool shards() const { return kind == Kind::Shard || kind == Kind::StridedShard; }
    // Concrete dimension for a tensor of `rank` dimensions.
    int resolvedDim(int rank) const { return dim < 0 ? dim + rank : dim; }
    std::string toString() const;  // "Replicate", "Shard(0)", "StridedShard(1, sf=2)", "-"
    bool operator==(const Placement&) const = default;
};

// Activation layout on a module's input or output.
enum class Layout {
    Any,         // the style does not constrain it
    Replicate,   // full tensor on every rank
    ShardLast,   // split on the last (feature) dim
    ShardSeq,    // split on the sequence dim
    Partial,     // every rank holds a partial sum
};
const char* layoutName(Layout l);

enum class CollectiveKind { None, AllReduce, AllGather, ReduceScatter, AllToAll };
const char* collectiveName(CollectiveKind c);

enum class VersionProfile { G1, G2, G3 };
const char* profileName(VersionProfile p);
std::optional<VersionProfile> profileFromName(std::string_view name);

struct Style
{
    std::string name;
    // Parameter placements by role. 2-D weights are [out, in]; 3-D expert weights [E, …].
    Placement weight2d;       // nn.Linear weight
    Placement bias;           // 1-D bias / 1-D params (sinks, norms)
    Placement param3d;        // fused experts
    Placement embedding;      // nn.Embedding weight [vocab, hidden]
    Layout input = Layout::Any;
    Layout output = Layout::Any;
    CollectiveKind forward = CollectiveKind::None;
    bool installsForward = true;   // false: parameter-only style (no forward wrapper)
    bool custom = false;
    std::string description;

    // Placement for a parameter of this rank on a module of this kind.
    Placement placementFor(int rank, bool isEmbedding) const;
    bool operator==(const Style&) const = default;
};

// A user-defined style in the form Transformers can register: ColwiseParallel or RowwiseParallel
// with explicit input/output layouts (Replicate or Shard(-1)). The forward collective follows:
//   colwise  out Replicate → all_gather;   out Shard(-1) → none
//   rowwise  out Replicate → all_reduce;   out Shard(-1) → reduce_scatter
// and rowwise with a Replicate input splits it locally (no communication).
struct CustomStyleSpec
{
    std::string name;
    std::string base;      // "colwise" | "rowwise"
    Layout input = Layout::Replicate;
    Layout output = Layout::Replicate;
};
// Validates the spec (name free of the built-in names of every profile, base, layouts) and makes the value.
Result<Style> makeCustomStyle(const CustomStyleSpec& spec);
// Back from a style made by makeCustomStyle.
CustomStyleSpec customStyleSpec(const Style& s);
// "Replicate" / "Shard(-1)" as written in plan files and in torch.
std::optional<Layout> layoutFromName(std::string_view name);

class StyleRegistry
{
public:
    // Every ALL_PARALLEL_STYLES name of every generation, plus the BC aliases.
    static const StyleRegistry& builtin();

    // A style legal under `profile` (aliases resolved), or nullptr.
    const Style* find(std::string_view name, VersionProfile profile) const;
    // Names legal under `profile`, in registry order.
    std::vector<std::string> names(VersionProfile profile) const;
    // The canonical name an alias stands for under `profile` ("colwise_rep" → "colwise_gather_output").
    std::string canonical(std::string_view name, VersionProfile profile) const;

    void add(Style s, std::vector<VersionProfile> profiles);
    void addAlias(std::string alias, std::string target, std::vector<VersionProfile> profiles);

private:
    struct Entry
    {
        Style style;
        std::vector<VersionProfile> profiles;
    };
    struct Alias
    {
        std::string alias, target;
        std::vector<VersionProfile> profiles;
    };
    std::vector<Entry> m_entries;
    std::vector<Alias> m_aliases;
};

// torch.chunk / DTensor Shard rule (all generations): chunk = ceil(n / T); rank r holds
// [r·chunk, min(n, (r+1)·chunk)), possibly empty. {offset, size} per rank.
struct Interval
{
    std::int64_t offset = 0;
    std::int64_t size = 0;
    bool operator==(const Interval&) const = default;
};
std::vector<Interval> chunkSizes(std::int64_t n, int tp);
// _StridedShard with split factor sf: each of the sf packed blocks of n/sf rows is chunked alike;
// rank r holds the r-th chunk of every block (gate rows and the matching up rows).
std::vector<std::vector<Interval>> stridedChunks(std::int64_t n, int sf, int tp);

} // namespace tp
