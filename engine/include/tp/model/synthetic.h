// synthetic.h — checkpoints with the tensor layout Transformers' save_pretrained writes for a
// ModelSpec (per-expert tensors for fused experts, legacy names, tied heads left out), with the
// data left as sparse holes. Used by tests and by `tpstudio-cli bench load` to exercise header
// reading at full model scale without writing the weights.
#pragma once

#include "tp/core/status.h"
#include "tp/model/model_spec.h"
#include "tp/model/safetensors.h"

#include <stop_token>
#include <string>
#include <vector>

namespace tp {

struct SyntheticOptions
{
    // Add `<weight>_scale_inv` F32 tensors (block 128×128) and store 2-D Linear weights as
    // F8_E4M3, as DeepSeek-V3's FP8 release does.
    bool fp8BlockScales = false;
    std::int64_t extraLayers = 0;                     // layers past num_hidden_layers (MTP)
    std::uint64_t maxShardBytes = 5ull * 1000 * 1000 * 1000; // as save_pretrained's default
};

// The checkpoint tensor list (names, dtypes, shapes) for `spec`.
std::vector<TensorToWrite> checkpointLayout(const ModelSpec& spec, const SyntheticOptions& opt = {});

// Writes `dir/model-0000i-of-0000n.safetensors` and `dir/model.safetensors.index.json` (or one
// `model.safetensors` when everything fits one shard), plus `dir/config.json` when given. A stop
// request is seen between shards (Cancelled; what was written stays for the caller to remove).
Status writeSyntheticCheckpoint(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                                std::uint64_t maxShardBytes, const std::string& configJson = {},
                                std::stop_token stop = {});

} // namespace tp
