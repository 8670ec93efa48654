// weights.h — one rank's slice of every parameter: read from safetensors as fp32 (only the bytes of
// the slice: pread of each contiguous run; bf16/f16/f32; fused experts assembled from per-expert
// tensors), or seeded random values that depend only on the global element index, so that every tp
// size and every backend sees the same model.
#pragma once

#include "tp/core/status.h"
#include "tp/model/model_spec.h"
#include "tp/model/safetensors.h"
#include "tp/runtime/backend.h"
#include "tp/shard/sharded_graph.h"

#include <cstdint>
#include <vector>

namespace tp {

struct WeightSource
{
    const Checkpoint* checkpoint = nullptr;  // null: random weights from `seed`
    std::uint64_t seed = 0x5eed;
};

// Rank r's local tensor of parameter `index` (ShardedGraph::params order) from the checkpoint, as
// fp32, row-major in its local shape, into out[0 … numel).
Status readParamShard(const ModelSpec& spec, const ShardedGraph& g, std::size_t index, int rank, const Checkpoint& ck,
                      float* out);

// The seeded values of parameter `index` on rank r (uniform in ±1/sqrt(fan_in); norm weights 1 ±
// 0.1), as a fill any backend computes: local element i holds global element g(i)'s value.
UniformFill randomParamShard(const ModelSpec& spec, const ShardedGraph& g, std::size_t index, int rank, std::uint64_t seed);

// Checks, before any rank starts, that every parameter has its tensors in the checkpoint with the
// expected shape and a readable dtype; the error names the parameter and the tensor.
Status checkWeights(const ModelSpec& spec, const WeightSource& source);

} // namespace tp
