// sharded_graph.h — a plan applied to a model for tp size T, before anything runs: what every rank
// holds, the layout of every activation, the collectives the plan implies, per-rank memory, and
// every mismatch Transformers would not repair (as error diagnostics with a fix hint).
//
// Semantics: Transformers' no-grad inference path (hf-tp-semantics.md §1.1, §8): collectives happen
// only where a style says so; colwise leaves the output sharded on its last dim; rowwise expects
// exactly that shard and all-reduces; *_gather_output all-gathers; nothing else moves data.
//
// Sequence parallelism (a style whose input is Shard(seq) on a norm: `sequence_parallel`) is
// Megatron's TP+SP, the Ultra-Scale Playbook's: the residual stream between the norms is split by
// token rows; a reduction whose result only meets sequence-sharded consumers (the residual add, the
// norm) is a reduce-scatter of rows instead of an all-reduce; norms and adds run on the rank's rows;
// where a consumer needs every row (the projections after a norm) the rows are all-gathered.
//
//   ShardedGraph g = shardModel(spec, plan, {.batch = 1, .seq = 512});
//   for (const Collective& c : g.collectives) c.bytes(1, 512, 2);
#pragma once

#include "tp/core/diagnostic.h"
#include "tp/graph/layer_graph.h"
#include "tp/model/model_spec.h"
#include "tp/plan/plan.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tp {

// One parameter on every rank.
struct ParamShard
{
    std::string path;                              // full parameter name
    int module = -1;
    int param = -1;
    Placement placement;                           // None/Replicate: whole on every rank
    int dim = -1;                                  // the split dimension, -1 when whole
    std::vector<std::vector<Interval>> slices;     // per rank, along `dim` (strided: one per packed block)
    std::vector<std::vector<std::int64_t>> shapes; // per rank local shape
    std::vector<std::int64_t> bytes;               // per rank
    bool tied = false;                             // shares storage with an earlier parameter
    // > 1: ranks share slices, this many holding each (k_proj / v_proj under Plan::replicateKvHeads: rank r has KV
    // head floor(r · KV / T), whole); 1: the slices are disjoint.
    int replicas = 1;
};

// An activation on every rank: its layout and per-rank width of the last dim.
struct TensorLayout
{
    Layout layout = Layout::Replicate;             // Replicate, ShardLast, ShardSeq or Partial
    // Per rank features. ShardSeq: every rank has all of them for its rows (sequenceRows).
    std::vector<std::int64_t> local;
    int packedBlocks = 1;                          // >1: a strided shard of a packed [gate; up] output
};

struct Collective
{
    CollectiveKind kind = CollectiveKind::None;
    int node = -1;                                 // graph node after which it runs
    std::string where;                             // module path
    int layer = -1;
    std::int64_t featuresPerToken = 0;             // full (gathered / reduced) width
    std::int64_t tokensPerToken = 1;               // rows per token: top-k for expert dispatch
    std::string style;                             // the style that issues it
    // Per rank, the columns of the full tensor that rank holds: all_gather, what it contributes (the
    // output is the pieces side by side in rank order); reduce_scatter, what it keeps. Empty for
    // all_reduce (every rank holds everything), all_to_all and the sequence's collectives.
    std::vector<Interval> pieces;
    // The pieces are token rows, not columns (sequence parallelism): rank r contributes or keeps
    // sequenceRows(rows, T, r) of the forward's rows, all features.
    bool sequence = false;
    int bias = -1;                                 // index into ShardedGraph::params of a bias added after the reduction
    // After a node that runs only at each sequence's last position (ShardOptions::lastPositionLogits:
    // the head's all-gather): one row per sequence, whatever the forward's new tokens.
    bool lastPositions = false;
    // > 0: a size that does not grow with the tokens (an expert dispatch's all-to-all of the
    // per-expert counts: E int64 per rank, as Transformers sends them).
    std::int64_t fixedBytes = 0;

    // Bytes of the full tensor (nccl-tests' "size"): B·S·rows·features·elementBytes (B·1·… at the
    // last positions only), or the fixed size.
    std::int64_t bytes(std::int64_t batch, std::int64_t seq, std::int64_t elementBytes) const
    {
        return fixedBytes > 0 ? fixedBytes : batch * (lastPositions ? 1 : seq) * tokensPerToken * featuresPerToken * elementBytes;
    }
};

// What a node does on each rank beyond its op.
struct NodeSharding
{
    // Per rank, the columns of the node's first input it computes with, when a style splits a whole
    // input locally (rowwise_split_input); empty when the node takes its inputs as they are.
    std::vector<Interval> inputSlice;
    // The node runs at each sequence's last position only (ShardOptions::lastPositionLogits: the
    // final norm and the head): B rows in prefill instead of B·S.
    bool lastPositions = false;
    // The node computes on its rank's token rows only (sequence parallelism: sequenceRows); a whole
    // input is read at those rows.
    bool sequenceRows = false;
    // Experts dispatched with all-to-all (ep_dispatch_experts under ep_implementation "all_to_all":
    // Transformers' AllToAllEP): the index in ShardedGraph::collectives of the all-to-all of the
    // per-expert counts; the rows' dispatch and combine all-to-alls and the all-gather of the
    // token-row slices follow it. -1: none.
    int dispatch = -1;
};

// The token rows rank `rank` holds of a sequence-sharded tensor of `rows` rows (B·S in prefill, B in
// a decode step): torch.chunk's split, so the last ranks may hold fewer, or none.
Interval sequenceRows(std::int64_t rows, int tp, int rank);

struct RankMemory
{
    std::int64_t weightBytes = 0;
    std::int64_t kvCacheBytesPerToken = 0;         // per token of context, all layers (while every window fills)
    // The part of kvCacheBytesPerToken that sliding-window and chunked layers hold, by the tokens each
    // keeps at most: window − 1 (chunk − 1), as Transformers' DynamicSlidingWindowLayer stores them.
    // {tokens kept, bytes per token}, ascending by tokens, one entry per distinct window.
    std::vector<std::pair<std::int64_t, std::int64_t>> kvWindows;
    // Per sequence, whatever its length: the linear-attention and SSM layers' convolution state (the activations'
    // dtype) and recurrent state (float32; lightning attention's in the activations' dtype), as Transformers 5.24's
    // torch path keeps them; whole on every rank, as the mixers are planned.
    std::int64_t stateBytes = 0;
    std::int64_t activationPeakBytes = 0;          // for the options' batch and sequence
    // The rank's cache for one sequence of `context` tokens: every layer's tokens, a windowed layer's
    // capped at what it keeps, and the mixers' states.
    std::int64_t kvCacheBytesAt(std::int64_t context) const;
};

// One mixer layer's state for one sequence (RankMemory::stateBytes), `act` bytes an activation: what Transformers 5.24's
// LinearAttentionLayer (MiniMax: MiniMaxCache's linear_cache) holds after a forward (fixtures/cache.json). 0 without a mixer.
std::int64_t mixerStateBytes(const ModelConfig& c, std::int64_t act);

// At most this many tokens (batch · seq) in one forward: with the config's caps, no activation byte
// count can wrap. More is an error diagnostic of the sharded graph.
inline constexpr std::int64_t kMaxForwardTokens = std::int64_t(1) << 36;

struct ShardOptions
{
    std::int64_t batch = 1;
    std::int64_t seq = 512;
    std::optional<DType> activationDtype;          // default: the model's dtype
    // What the KV cache stores: by default the activations' dtype, as Transformers' DynamicCache does; F8E4M3 for a
    // serving engine's fp8 cache (vLLM and SGLang's --kv-cache-dtype fp8). The layout is Transformers 5.24's: each
    // rank's k and v heads per layer; MLA's compressed latent and rope key, whole on every rank (as vLLM caches it).
    std::optional<DType> kvCacheDtype;
    // Prefill computes the logits only at each sequence's last position, as generate() does
    // (Transformers' logits_to_keep=1): the final norm, the head and the head's collective see B
    // rows, not B·S. What the engine runs with RunOptions::lastPositionLogits; the preview's bytes,
    // times and memory then count those rows.
    bool lastPositionLogits = false;
};

struct ShardedGraph
{
    std::shared_ptr<const Plan> plan;              // the plan applied (match styles point into it)
    int tpSize = 1;
    ShardOptions options;
    DType activationDtype = DType::BF16;
    LayerGraph graph;
    PlanMatch match;
    std::vector<ParamShard> params;                // one per parameter, ModelSpec::allParams order
    std::vector<TensorLayout> tensors;             // one per graph tensor
    std::vector<Collective> collectives;           // in execution order
    std::vector<NodeSharding> nodes;               // one per graph node
    std::vector<RankMemory> memory;                // per rank
    std::vector<Diagnostic> diagnostics;           // the match's, then layout and shape findings

    std::vector<int> moduleFirstParam;             // per module: its first entry in `params`, or -1
    // How many ranks hold each key/value head: T / KV where Plan::replicateKvHeads replicates them (a rank's
    // k_proj and v_proj hold one whole head), else 1.
    int kvHeadReplicas = 1;

    bool valid() const { return !hasErrors(diagnostics); }
    std::int64_t elementBytes() const;
    std::int64_t kvElementBytes() const;           // one cached k or v value (ShardOptions::kvCacheDtype)
    // The shard of `module`'s direct parameter `name` ("weight", "gate_up_proj"), or nullptr.
    const ParamShard* param(int module, std::string_view name) const;
    // The routed experts' input projection: gate_up_proj, or up_proj where they have no gate (Nemotron-H).
    const ParamShard* expertsUp(int module) const
    {
        const ParamShard* gu = param(module, "gate_up_proj");
        return gu ? gu : param(module, "up_proj");
    }
};

// Weight matrices (of Linear, Embedding and Experts modules) that stay whole on every rank, grouped by plan key (the
// module's wildcard path under `profile`): how many modules, each rank's bytes of them, and the style the class's
// default plan gives that key (or a key under it; empty when it has none). Largest first.
struct WholeWeights
{
    std::string key;
    int modules = 0;
    std::int64_t bytes = 0;
    std::string defaultStyle;
};
std::vector<WholeWeights> wholeWeights(const ModelSpec& spec, const ShardedGraph& g, VersionProfile profile);

// Applies `plan` (its tpSize, profile, custom styles) to `spec`.
//
// Cost: linear. Matching is O(K·L + (M + P)·L) for K plan keys, M modules and P parameters whose
// names are at most L long (hash lookups, no key-by-module scan); the layer graph, layout
// propagation, shards and memory are O(N·T) for N graph nodes/tensors/parameters at tp size T.
// `tpstudio-cli bench plan --layers N --keys N` shows it.
ShardedGraph shardModel(const ModelSpec& spec, const Plan& plan, const ShardOptions& options = {});

// Wall time of shardModel's steps (`bench plan` prints them).
struct ShardTimings
{
    double matchSeconds = 0;      // matchPlan: keys against modules and parameters
    double propagateSeconds = 0;  // per-rank shards, layouts, collectives, memory, findings
};

// The same with `graph` = buildLayerGraph(spec) already built: the graph depends on the model
// alone, so a caller sharding one model at several tp sizes builds it once and moves it back out
// of each result (`std::move(g.graph)`). `timings`, when given, receives the steps' times.
ShardedGraph shardModel(const ModelSpec& spec, const Plan& plan, const ShardOptions& options, LayerGraph graph,
                        ShardTimings* timings = nullptr);

// The nodes that run only at each sequence's last position when the logits are kept there: the
// head (the Linear whose output is the logits) and the final norm before it when the head is its
// only consumer. Per graph node; all false when the graph has no logits.
std::vector<bool> lastPositionNodes(const LayerGraph& graph);

} // namespace tp
