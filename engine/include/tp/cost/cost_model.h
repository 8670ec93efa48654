// cost_model.h — predicted time of a sharded graph on a hardware profile: compute per node by a
// roofline with a GEMM-size efficiency curve, communication per collective by alpha-beta with the
// nccl-tests bus-bandwidth factors, both for the slowest rank. Formulas: docs/metrics.md.
//
// One sharded graph answers every phase: a Workload says how many new tokens each sequence brings
// and how many it already holds in the KV cache, so prefill and a decode step are the same graph
// at two workloads — no resharding.
//
//   CostReport prefill = estimateCost(spec, graph, hw);               // B, S of graph.options
//   Result<CostReport> step = estimateDecodeStep(spec, graph, hw, 1, 4096);
//   step->totalSeconds(), step->commShare(), kvCacheBytes(graph, 1, 4096);
#pragma once

#include "tp/cost/hardware.h"
#include "tp/core/status.h"
#include "tp/shard/sharded_graph.h"

#include <cstdint>
#include <vector>

namespace tp {

// What one forward computes: `batch` sequences, each bringing `queryTokens` new tokens after
// `pastTokens` tokens already in its KV cache. Prefill of an S-token prompt is {B, S, 0}; one decode
// step at context C (C tokens in the cache once this step's token is in) is {B, 1, C − 1}: every
// GEMM is [B, in]·[out, in]ᵀ, attention reads the k and v of C positions, every collective moves B
// tokens' features.
struct Workload
{
    std::int64_t batch = 1;
    std::int64_t queryTokens = 1;  // new tokens per sequence in this forward
    std::int64_t pastTokens = 0;   // tokens per sequence already in the KV cache

    std::int64_t tokens() const { return batch * queryTokens; }        // rows every GEMM and collective sees
    std::int64_t context() const { return pastTokens + queryTokens; }  // cache positions after this forward

    static Workload prefill(const ShardOptions& o) { return {o.batch, o.seq, 0}; }
    static Workload decodeStep(std::int64_t batch, std::int64_t context) { return {batch, 1, context - 1}; }
};

// Bounds of a workload the cost model accepts, so that no byte count can overflow.
inline constexpr std::int64_t kMaxWorkloadBatch = std::int64_t(1) << 20;
inline constexpr std::int64_t kMaxWorkloadContext = std::int64_t(1) << 24;   // past + query, per sequence
inline constexpr std::int64_t kMaxWorkloadTokens = kMaxForwardTokens;          // batch · context

// InvalidArgument, naming the field, unless 1 ≤ batch ≤ 2^20, query ≥ 1, past ≥ 0,
// past + query ≤ 2^24 and batch · (past + query) ≤ 2^36.
Status checkWorkload(const Workload& w);

struct NodeCost
{
    int node = -1;
    int layer = -1;
    double flops = 0;          // slowest rank
    double bytes = 0;          // bytes it moves through memory (weights, activations, KV cache reads), slowest rank
    double computeSeconds = 0;
};

struct CollectiveCost
{
    int collective = -1;       // index into ShardedGraph::collectives
    std::int64_t bytes = 0;    // full tensor at the report's workload: B·query·rows·features·e
    double seconds = 0;
};

struct LayerCost
{
    int layer = -1;            // -1: outside the decoder layers (embedding, final norm, lm_head)
    double computeSeconds = 0;
    double commSeconds = 0;
};

struct CostReport
{
    Workload workload;                     // what was estimated
    std::vector<NodeCost> nodes;           // one per graph node
    std::vector<CollectiveCost> collectives;
    std::vector<LayerCost> layers;         // [0] is "outside layers", then layer 0, 1, …
    double computeSeconds = 0;
    double commSeconds = 0;

    double totalSeconds() const { return computeSeconds + commSeconds; }
    double commShare() const { return totalSeconds() > 0 ? commSeconds / totalSeconds() : 0; }
};

// The forward of the graph's own options: Workload::prefill(g.options).
CostReport estimateCost(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw);
// The same graph at another workload (a decode step, a prefill chunk after cached tokens).
// InvalidArgument when checkWorkload fails.
Result<CostReport> estimateCost(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw,
                                const Workload& w);
// One decode step of `batch` sequences at `context` (≥ 1) tokens: Workload::decodeStep(batch, context).
Result<CostReport> estimateDecodeStep(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw,
                                      std::int64_t batch, std::int64_t context);
// Its total: compute + communication of the slowest rank (the predicted ITL).
Result<double> decodeStepSeconds(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw,
                                 std::int64_t batch, std::int64_t context);

// KV cache of the rank that holds the most: ShardedGraph::memory's kvCacheBytesPerToken (all layers,
// while every window fills), and its cache of `batch` sequences of `context` tokens, a sliding-window
// or chunked layer's capped at the window − 1 tokens Transformers keeps (InvalidArgument beyond
// checkWorkload's bounds).
std::int64_t kvCacheBytesPerToken(const ShardedGraph& g);
// The cache layout and dtype the KV figures assume, in one line: "Transformers' layout: each rank's k and v heads,
// BF16" (MLA: the compressed latent and rope key, whole on every rank, as vLLM and SGLang also cache it; windowed
// layers and what they keep).
std::string kvCacheLayoutText(const ModelSpec& spec, const ShardedGraph& g);
Result<std::int64_t> kvCacheBytes(const ShardedGraph& g, std::int64_t batch, std::int64_t context);

// What one rank needs of its device (docs/metrics.md, "Memory per rank"): its weights, its KV cache
// at batch × context, the prefill's activation peak (the graph's options) and the communication
// buffer of the largest collective, against the profile's memory_gib.
struct RankMemoryUse
{
    int rank = 0;
    std::int64_t weightBytes = 0;
    std::int64_t kvCacheBytes = 0;       // the rank's kvCacheBytesPerToken × batch × context
    std::int64_t activationBytes = 0;    // RankMemory::activationPeakBytes
    std::int64_t commBufferBytes = 0;    // commBufferBytes(g): 0 at T = 1
    std::int64_t deviceBytes = 0;        // what a plan may use: memory_gib less memory_reserve_gib, in bytes
    std::int64_t neededBytes() const { return weightBytes + kvCacheBytes + activationBytes + commBufferBytes; }
    std::int64_t headroomBytes() const { return deviceBytes - neededBytes(); }   // < 0: overflow
    bool fits() const { return neededBytes() <= deviceBytes; }
};

// The staging buffer of a collective, on every rank alike: the full tensor (nccl-tests' size) of the
// largest collective at the graph's own options' B × S — an all-gather's or all-to-all's output, an
// all-reduce's or reduce-scatter's input, which the ranks hold while it runs. 0 without collectives
// (T = 1). InvalidArgument when it would not fit 62 bits.
Result<std::int64_t> commBufferBytes(const ShardedGraph& g);

// Every rank's use, rank order. InvalidArgument beyond checkWorkload's bounds (batch × context) or
// for a profile without device memory.
Result<std::vector<RankMemoryUse>> memoryPerRank(const ShardedGraph& g, const HardwareProfile& hw, std::int64_t batch,
                                                 std::int64_t context);

// What a plan needs of each device: memoryPerRank's rank that needs the most (the first of equals).
struct MemoryFit
{
    int rank = 0;                       // the rank that needs the most
    std::int64_t weightBytes = 0, kvCacheBytes = 0, activationBytes = 0, commBufferBytes = 0;
    std::int64_t neededBytes = 0;       // their sum
    std::int64_t deviceBytes = 0;
    bool fits() const { return neededBytes <= deviceBytes; }
};
// InvalidArgument as memoryPerRank.
Result<MemoryFit> memoryFit(const ShardedGraph& g, const HardwareProfile& hw, std::int64_t batch, std::int64_t context);

// What the largest rank of the largest of `pp` pipeline stages needs (Plan::ppSize; docs/metrics.md): its stage's layers'
// weights (chunk(L, pp) contiguous layers; the embedding on the first stage, the rest outside the layers on the last, a
// tied head on both), its share of `fit`'s KV cache and states by the attention and mixer layers it holds, and `fit`'s
// activation peak and communication buffer. pp 1: fit.neededBytes.
std::int64_t pipelineStageBytes(const ModelSpec& spec, const ShardedGraph& g, const MemoryFit& fit, int pp);
// The stage of decoder layer `layer` among `stages` (chunkSizes(L, PP): contiguous runs of layers); past the last: the last.
int pipelineStageOf(const std::vector<Interval>& stages, int layer);

// What fits a plan's ranks on the profile's devices (memoryFit, the activations of the graph's own
// prefill): the longest context of `batch` sequences, and the most sequences of `context` tokens.
// 0: not even one. Searched up to `contextLimit` (the model's max_position_embeddings, or
// checkWorkload's bound) and the batch checkWorkload allows; `…Capped` when the limit, not memory,
// ends the search (a cache whose every layer is windowed stops growing).
struct FitLimits
{
    std::int64_t maxContext = 0;
    bool contextCapped = false;
    std::int64_t maxBatch = 0;
    bool batchCapped = false;
};
Result<FitLimits> whatFits(const ShardedGraph& g, const HardwareProfile& hw, std::int64_t batch, std::int64_t context,
                           std::int64_t contextLimit);
// "context up to 1,234 tokens at batch 8 · batch up to 56 at context 4,096"; `maxPositions` > 0 names
// a context the model's limit ends.
std::string whatFitsText(const FitLimits& f, std::int64_t batch, std::int64_t context, std::int64_t maxPositions);

// Error diagnostics of a valid plan that cannot run on the machine: T above its device count, and
// a rank that does not fit its device (naming the smallest T up to 64 at which the plan is valid
// and fits, or that none does). Empty when it fits.
std::vector<Diagnostic> feasibilityDiagnostics(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw,
                                               std::int64_t context);

struct ScalingPoint
{
    int tp = 1;
    bool valid = false;        // the plan has no errors at this size
    std::string reason;        // first error when not valid
    // Prefill: one forward of the options' B × S tokens.
    double seconds = 0;
    double commShare = 0;
    double speedup = 0;        // time at T=1 / time at T
    // Decode: one step of B tokens at predictScaling's `decodeContext` (0 when it fails checkWorkload).
    double decodeStepSeconds = 0;
    double decodeCommShare = 0;
    double decodeTokensPerSecond = 0;     // B / step
    double decodeSpeedup = 0;             // step at T=1 / step at T
    std::int64_t kvCacheBytesPerToken = 0; // largest rank, all layers
    std::int64_t kvCacheBytes = 0;         // largest rank, at decodeContext × B
    // Memory: memoryFit at B × decodeContext (0 and fits false when the profile has no memory).
    int memoryRank = 0;                    // the rank that needs the most
    std::int64_t memoryBytes = 0;          // what that rank needs
    std::int64_t deviceBytes = 0;
    bool fits = false;
    // Communication: Σ of the collectives' full tensors (nccl-tests' size) in one prefill forward
    // and in one decode step.
    std::int64_t commBytes = 0;
    std::int64_t decodeCommBytes = 0;
    // What each rank sends in one prefill forward: Σ size × busBandwidthFactor (a ring all-reduce sends
    // 2(T−1)/T of its tensor, the others (T−1)/T), so it grows with T where commBytes stays.
    std::int64_t commBytesPerRank = 0;

    double efficiency() const { return tp > 0 ? speedup / tp : 0; }              // prefill speedup / T
    double decodeEfficiency() const { return tp > 0 ? decodeSpeedup / tp : 0; }
};

// The plan's predicted prefill forward and decode step at T = 1…maxTp (sizes beyond the machine's
// devices share them). `decodeContext` 0 means options.seq.
std::vector<ScalingPoint> predictScaling(const ModelSpec& spec, const Plan& plan, const ShardOptions& options,
                                         const HardwareProfile& hw, int maxTp = 8, std::int64_t decodeContext = 0);

} // namespace tp
