// arch_traits.h — what each architecture does differently from the Llama pattern, in one table.
//
// The graph builder, the sharded graph, the cost model and the engine read these facts here instead
// of testing families one by one. A new family is one row; a fact that only one place needs stays
// in that place (the module tree's class names, the config's defaults).
//
//   const ArchTraits& t = archTraits(spec.config.family);
//   if (t.fusedQkv) …   // Phi-3: one qkv_proj, cut into q, k, v
#pragma once

#include "tp/model/config.h"

namespace tp {

struct ArchTraits
{
    Family family = Family::Unknown;
    const char* ffnBlock = "mlp";         // the decoder layer's feed-forward attribute
    bool sandwichNorms = false;           // norms after attention and around the MLP (Gemma)
    bool fusedQkv = false;                // one qkv_proj cut into q, k and v (Phi-3)
    bool fusedGateUp = false;             // one gate_up_proj chunked in two (Phi-3)
    bool qkNorm = false;                  // RMSNorm per head on q and k (Qwen3, Gemma 3)
    bool unitOffsetNorms = false;         // RMSNorm scales by (1 + w), w stored around 0 (Gemma)
    bool scaledEmbeddings = false;        // embeddings times sqrt(hidden), in the activation dtype (Gemma)
    // Fused experts stored [E, H, 2I] / [E, I, H] (used with bmm) rather than [E, 2I, H] / [E, H, I].
    bool expertsLastPacked = false;
    // gate and up alternate along the last dim of gate_up_proj (gpt-oss: [..., ::2], [..., 1::2]).
    bool expertsInterleaved = false;
    bool clampedSwiglu = false;           // gpt-oss's experts (ModelConfig::swigluAlpha, swigluLimit)
    bool alwaysNormalizeTopK = false;     // the router renormalises its top-k weights (Mixtral)
    // DeepSeek's router: sigmoid scores, a group-limited choice biased by e_score_correction_bias,
    // routed_scaling_factor (ModelConfig::nGroup, topkGroup, routedScalingFactor).
    bool sigmoidRouter = false;
    // Llama 4: the router weight scales each expert's input, not its output.
    bool routerScalesInputs = false;
    // sliding_window applies to every layer (Mistral, Mixtral, Phi-3); otherwise only to the layers
    // layer_types names "sliding_attention".
    bool slidingWindowAllLayers = false;
    // Why the engine does not run this architecture yet; empty when it does.
    const char* engineLacks = "";
};

const ArchTraits& archTraits(Family f);

// Whether the model's fused experts are stored [E, H, 2I] / [E, I, H]: its family's or its layout's.
bool expertsLastPacked(const ModelConfig& c);

} // namespace tp
