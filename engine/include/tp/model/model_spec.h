// model_spec.h — a model as Transformers v5 builds it for its *ForCausalLM class: the module tree
// with every parameter's shape, dtype and bytes, and the class's default parallel plans.
//
//   ModelSpec spec = buildModelSpec(config).value();
//   const ModuleSpec* q = spec.find("model.layers.0.self_attn.q_proj");
//   q->params[0].shape  // [num_heads * head_dim, hidden_size]
#pragma once

#include "tp/core/diagnostic.h"
#include "tp/core/status.h"
#include "tp/model/config.h"

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace tp {

enum class ModuleKind {
    CausalLM,        // the head class (root)
    Model,           // the base model
    ModuleList,      // model.layers
    DecoderLayer,
    Attention,
    Mlp,             // dense gated MLP (also shared experts)
    Moe,             // sparse MoE block (router + experts)
    Experts,         // fused 3-D expert parameters
    Router,
    Linear,
    Embedding,
    RmsNorm,
    L2Norm,          // parameter-free norm (llama4 qk_norm)
    RotaryEmbedding,
    Other,
};
const char* moduleKindName(ModuleKind k);

struct ParamSpec
{
    std::string name;                 // local name: "weight", "bias", "gate_up_proj", "sinks"
    std::vector<std::int64_t> shape;
    DType dtype = DType::F32;
    std::string tiedTo;               // full name of the parameter this one shares storage with
    bool buffer = false;              // a persistent buffer (in state_dict and checkpoints, not a parameter)
    // Checkpoint reconciliation (filled by reconcileCheckpoint): the tensors that hold it.
    std::vector<std::string> checkpointTensors;
    bool inCheckpoint = false;
    // An fp8 weight's block scales (quantization_config.weight_block_size; Transformers' weight_scale_inv,
    // which the tree does not list): one float32 per [scaleBlock[0] × scaleBlock[1]] block of the last two
    // dims; an MXFP4 weight's (dtype F4): one E8M0 byte per block. Empty: none.
    std::vector<std::int64_t> scaleBlock;
    // An AWQ / GPTQ weight [out, in] (Transformers' quantized Linear holds it as buffers, not this parameter):
    // packBits-bit integers in int32 words — GPTQ's qweight [ceil(in·b/32), out], AWQ's [in, ceil(out·b/32)] —
    // with float16 scales [ceil(in/g), out] and int32 qzeros [ceil(in/g), ceil(out·b/32)] per group of g = packGroup
    // input rows, and GPTQ's int32 g_idx [in]. 0: not packed.
    int packBits = 0;
    std::int64_t packGroup = 0;
    bool packGptq = false;

    std::int64_t numel() const;
    // The scales' bytes for a tensor of `shape` (this parameter or a rank's shard of it); 0 without block scales.
    std::int64_t scaleBytes(const std::vector<std::int64_t>& shape) const;
    DType scaleDtype() const { return dtype == DType::F4 ? DType::F8E8M0 : DType::F32; } // MXFP4's E8M0, fp8's float32
    // A packed weight of `shape` (see packBits) by storage dtype: I32 (qweight, qzeros, g_idx), F16 (scales); empty
    // when not packed.
    std::map<DType, std::int64_t> packedBytes(const std::vector<std::int64_t>& shape) const;
    // Its storage for a tensor of `shape`: elements in its dtype and block scales, or the packed tensors.
    std::int64_t bytesOf(const std::vector<std::int64_t>& shape) const;
    std::int64_t bytes() const { return bytesOf(shape); }
};

struct ModuleSpec
{
    std::string name;                 // local name ("q_proj", "0", "model")
    std::string path;                 // full dotted path; "" for the root
    std::string className;            // e.g. "LlamaAttention", "Linear"
    ModuleKind kind = ModuleKind::Other;
    int parent = -1;
    std::vector<int> children;
    std::vector<ParamSpec> params;    // direct parameters only
    int layer = -1;                   // decoder layer index, -1 outside the layers

    std::string paramPath(const ParamSpec& p) const { return path.empty() ? p.name : path + "." + p.name; }
};

struct PlanEntry
{
    std::string key;                  // full key relative to the loaded class
    std::string style;
    bool operator==(const PlanEntry&) const = default;
};

struct ModelSpec
{
    ModelConfig config;
    std::string className;            // e.g. "LlamaForCausalLM"
    std::string source;               // where it came from (folder, file, catalog id)
    std::vector<ModuleSpec> modules;  // modules[0] is the root; parents come before children
    std::vector<PlanEntry> defaultTpPlan;  // as Transformers resolves `model.tp_plan`, in its order
    std::vector<PlanEntry> defaultEpPlan;
    // Parameters (path suffixes, e.g. mlp.experts.gate_up_proj) the loader de-interleaves along a dim after splitting the
    // checkpoint's tensor (Inkling 2's w13_weight): a plain split along that dim keeps each rank's two halves paired.
    std::vector<std::pair<std::string, int>> interleavedOnLoad;
    bool supportsTpPlan = false;      // Transformers' supports_tp_plan
    std::vector<Diagnostic> diagnostics;

    const ModuleSpec* find(const std::string& path) const;
    int indexOf(const std::string& path) const;
    // Distinct parameters (tied ones counted once), their bytes, bytes per dtype.
    std::int64_t parameterCount() const;
    std::int64_t parameterBytes() const;
    std::map<DType, std::int64_t> bytesByDtype() const;
    // Every parameter by full name, in tree order (tied parameters included, marked by tiedTo).
    std::vector<std::pair<std::string, const ParamSpec*>> allParams() const;

    // Builds the path index; called by the builders.
    void finalize();

private:
    std::unordered_map<std::string, int> m_index;
};

// The tree and default plans of a known family (config.family != Unknown).
Result<ModelSpec> buildModelSpec(const ModelConfig& config);
// Sets spec's default tp_plan / ep_plan from a class's plans (base model plan under the top-level module holding the
// layers, the head's plan) as Transformers resolves them: for a tree read from tensor names.
void applyClassPlans(ModelSpec& spec, const ClassPlans& plans);

// A module path of the template family's tree (model.layers.0.self_attn.o_proj) under the model
// type's own names (gpt_neox.layers.0.attention.dense): LayerLayout::renames, segment by segment.
std::string modulePath(const LayerLayout& layout, std::string_view templatePath);

// Tensor sizes a divides-check needs: which tp sizes split heads and KV heads evenly.
std::vector<int> tpSizesDividingHeads(const ModelConfig& config, int maxT = 64);

} // namespace tp
