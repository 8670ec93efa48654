// weights.h — one rank's slice of every parameter, as fp32: read from safetensors (only the bytes of
// the slice: pread of each contiguous run; bf16/f16/f32; fused experts assembled from per-expert
// tensors), or seeded random values that depend only on the global element index, so that every tp
// size sees the same model.
#pragma once

#include "tp/core/status.h"
#include "tp/model/model_spec.h"
#include "tp/model/safetensors.h"
#include "tp/shard/sharded_graph.h"

#include <cstdint>
#include <vector>

namespace tp {

struct WeightSource
{
    const Checkpoint* checkpoint = nullptr;  // null: random weights from `seed`
    std::uint64_t seed = 0x5eed;
};

// Rank r's local tensor of parameter `index` (ShardedGraph::params order), row-major in its local shape.
Result<std::vector<float>> loadParamShard(const ModelSpec& spec, const ShardedGraph& g, std::size_t index, int rank,
                                          const WeightSource& source);

// Checks, before any rank starts, that every parameter has its tensors in the checkpoint with the
// expected shape and a readable dtype; the error names the parameter and the tensor.
Status checkWeights(const ModelSpec& spec, const WeightSource& source);

} // namespace tp
