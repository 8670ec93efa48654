// loader.h — opening a model the way Transformers sees it, without loading its weights.
//
// `openModel` takes a folder, a config.json, a .safetensors file or index, a Hugging Face repo id
// found in the local cache, or a catalog id. It parses the config, builds the module tree, reads
// every safetensors header and reconciles the two; what does not fit becomes a Diagnostic.
#pragma once

#include "tp/core/status.h"
#include "tp/model/model_spec.h"
#include "tp/model/safetensors.h"

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace tp {

struct OpenedModel
{
    ModelSpec spec;
    std::string configPath;              // empty for catalog entries
    std::optional<Checkpoint> checkpoint; // absent when there are no safetensors
};

Result<OpenedModel> openModel(const std::string& what);
// The config text the model was built from: its config.json (read again), or the catalog entry's.
// NotFound for a tree read from tensor names alone.
Result<std::string> configText(const OpenedModel& om);

// Where an unknown model type's class plans come from: the apps set one that asks the user's own Transformers
// (TPSTUDIO_PYTHON). It returns the plans and a line saying where they came from ("Qwen9Config of Transformers 5.30 at
// /venv/bin/python (TPSTUDIO_PYTHON)"), or why there are none. Unset, or for a model type TP Studio knows, none is asked.
struct ExternalClassPlans
{
    ClassPlans plans;
    std::string origin;
};
using ClassPlanSource = std::function<Result<ExternalClassPlans>(const std::string& modelType)>;
void setClassPlanSource(ClassPlanSource source);

// Resolves "org/name" in the local Hugging Face cache (HF_HUB_CACHE, then HF_HOME/hub, then
// ~/.cache/huggingface/hub) to its snapshot folder. Never downloads. On failure the Status lists
// the folders that were searched.
Result<std::string> resolveHubCache(const std::string& repoId);

// Matches checkpoint tensors to the tree: per-expert tensors onto fused expert parameters,
// legacy names (Mixtral's block_sparse_moe.*.w1/w2/w3) onto v5 names, tied heads. Mismatches are
// appended to spec.diagnostics; parameter dtypes take the checkpoint's.
void reconcileCheckpoint(ModelSpec& spec, const Checkpoint& ck);

// A per-expert checkpoint tensor of a fused expert parameter ("…experts.3.up_proj.weight", Mixtral's
// "…block_sparse_moe.experts.3.w3.weight"): the fused parameter's full name, the expert, and the
// part (0 gate rows, 1 up rows of gate_up_proj [E, 2I, H]; 2 down_proj [E, H, I]).
struct ExpertTensor
{
    std::string fused;
    std::int64_t expert = 0;
    int part = 0;
};
std::optional<ExpertTensor> expertTensorOf(const std::string& tensorName, const ModelConfig& config);

// For an unknown architecture: a tree from tensor names alone (modules from dotted paths,
// kinds guessed from names and ranks).
ModelSpec specFromTensorNames(const ModelConfig& config, const Checkpoint& ck);

// The generic form of a name: numeric path segments become '*' (Transformers' rule).
std::string genericName(const std::string& name);
// Appends genericName's form of `name` to `out`; atStart false: `name` follows a dot, so that its
// first segment is a wildcard too when numeric (the form of a + "." + name, built in pieces).
void appendGenericName(std::string& out, std::string_view name, bool atStart);

} // namespace tp
