// arch_traits.cpp — the per-architecture table (Transformers 5.24's modeling files are the source).
#include "tp/model/arch_traits.h"

namespace tp {

namespace {

ArchTraits row(Family f)
{
    ArchTraits t;
    t.family = f;
    switch (f) {
    case Family::Llama:
    case Family::Qwen2: break;
    case Family::Mistral: t.slidingWindowAllLayers = true; break;
    case Family::Qwen3: t.qkNorm = true; break;
    case Family::Phi3:
        t.fusedQkv = true;
        t.fusedGateUp = true;
        t.slidingWindowAllLayers = true;
        break;
    case Family::Mixtral:
        t.alwaysNormalizeTopK = true;
        t.slidingWindowAllLayers = true;
        break;
    case Family::Qwen3Moe: t.qkNorm = true; break;
    case Family::Gemma2:
        t.sandwichNorms = true;
        t.unitOffsetNorms = true;
        t.scaledEmbeddings = true;
        break;
    case Family::Gemma3:
        t.sandwichNorms = true;
        t.qkNorm = true;
        t.unitOffsetNorms = true;
        t.scaledEmbeddings = true;
        break;
    case Family::DeepseekV3: t.sigmoidRouter = true; break;
    case Family::GptOss:
        t.expertsLastPacked = true;
        t.expertsInterleaved = true;
        t.clampedSwiglu = true;
        t.alwaysNormalizeTopK = true; // softmax over the top-k logits = the top-k of the softmax, renormalised
        break;
    case Family::Llama4:
        t.ffnBlock = "feed_forward";
        t.expertsLastPacked = true;
        t.sigmoidRouter = true;
        t.routerScalesInputs = true;
        break;
    case Family::Unknown: t.engineLacks = "a known architecture"; break;
    }
    return t;
}

} // namespace

const ArchTraits& archTraits(Family f)
{
    static const ArchTraits table[] = {
        row(Family::Unknown), row(Family::Llama),    row(Family::Mistral),    row(Family::Qwen2),
        row(Family::Qwen3),   row(Family::Gemma2),   row(Family::Gemma3),     row(Family::Phi3),
        row(Family::Mixtral), row(Family::Qwen3Moe), row(Family::DeepseekV3), row(Family::GptOss),
        row(Family::Llama4),
    };
    static_assert(sizeof(table) / sizeof(table[0]) == static_cast<std::size_t>(Family::Llama4) + 1);
    return table[static_cast<std::size_t>(f)];
}

bool expertsLastPacked(const ModelConfig& c) { return archTraits(c.family).expertsLastPacked || c.layout.expertsLastPacked; }

} // namespace tp
