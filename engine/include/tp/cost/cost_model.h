// cost_model.h — predicted time of a sharded graph on a hardware profile: compute per node by a
// roofline with a GEMM-size efficiency curve, communication per collective by alpha-beta with the
// nccl-tests bus-bandwidth factors, both for the slowest rank. Formulas: docs/metrics.md.
//
//   CostReport c = estimateCost(spec, graph, hw);
//   c.totalSeconds(), c.commShare();
#pragma once

#include "tp/cost/hardware.h"
#include "tp/shard/sharded_graph.h"

#include <vector>

namespace tp {

struct NodeCost
{
    int node = -1;
    int layer = -1;
    double flops = 0;          // slowest rank
    double bytes = 0;          // bytes it moves through memory (weights + activations), slowest rank
    double computeSeconds = 0;
};

struct CollectiveCost
{
    int collective = -1;       // index into ShardedGraph::collectives
    std::int64_t bytes = 0;
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
    std::vector<NodeCost> nodes;           // one per graph node
    std::vector<CollectiveCost> collectives;
    std::vector<LayerCost> layers;         // [0] is "outside layers", then layer 0, 1, …
    double computeSeconds = 0;
    double commSeconds = 0;

    double totalSeconds() const { return computeSeconds + commSeconds; }
    double commShare() const { return totalSeconds() > 0 ? commSeconds / totalSeconds() : 0; }
};

CostReport estimateCost(const ModelSpec& spec, const ShardedGraph& g, const HardwareProfile& hw);

struct ScalingPoint
{
    int tp = 1;
    bool valid = false;        // the plan has no errors at this size
    std::string reason;        // first error when not valid
    double seconds = 0;
    double commShare = 0;
    double speedup = 0;        // time at T=1 / time at T
};

// The plan's predicted forward time at T = 1…maxTp (sizes beyond the machine's devices share them).
std::vector<ScalingPoint> predictScaling(const ModelSpec& spec, const Plan& plan, const ShardOptions& options,
                                         const HardwareProfile& hw, int maxTp = 8);

} // namespace tp
