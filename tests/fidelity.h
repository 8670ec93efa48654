// fidelity.h — what Transformers recorded for a checkpoint folder (tests/fixtures/make_fixtures.py's
// logits.json and generate.json, or make_family_checks.py's), read for the engine's fidelity tests.
#pragma once

#include "tp/cost/cost_model.h"
#include "tp/cost/hardware.h"
#include "tp/runtime/executor.h"

#include <QtGlobal>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace tptest {

// Transformers' prefill logits of folder's checkpoint over a fixed prompt.
struct Reference
{
    std::int64_t batch = 0, seq = 0, vocab = 0;
    std::vector<std::int32_t> tokens;
    std::vector<float> logits;        // Transformers in fp32
    std::vector<float> logitsBf16;    // with the checkpoint loaded in bf16 (the committed fixtures only)
};

inline Reference referenceIn(const std::string& folder)
{
    std::ifstream in(folder + "/logits.json");
    if (!in)
        qFatal("no %s/logits.json", folder.c_str());
    const auto j = nlohmann::json::parse(in);
    return {j["batch"], j["seq"], j["vocab"], j["tokens"].get<std::vector<std::int32_t>>(), j["logits"].get<std::vector<float>>(),
            j.value("logits_bf16", std::vector<float>{})};
}

// A run over the reference's prompt (its batch, sequence and token ids).
inline tp::RunOptions promptRun(const Reference& ref)
{
    tp::RunOptions o;
    o.batch = ref.batch;
    o.seq = ref.seq;
    o.tokens = ref.tokens;
    return o;
}

// Transformers' greedy generate() on the same prompt: its tokens and each step's raw logits.
struct Generation
{
    std::int64_t batch = 0, prompt = 0, steps = 0, vocab = 0;
    std::vector<std::int32_t> promptTokens, tokens;   // tokens: [batch, steps]
    std::vector<float> stepLogits;                    // [steps, batch, vocab]; step 0 from the prompt's last position
};

inline Generation generationIn(const std::string& folder)
{
    std::ifstream in(folder + "/generate.json");
    if (!in)
        qFatal("no %s/generate.json", folder.c_str());
    const auto j = nlohmann::json::parse(in);
    return {j["batch"], j["prompt"], j["steps"], j["vocab"], j["prompt_tokens"].get<std::vector<std::int32_t>>(),
            j["tokens"].get<std::vector<std::int32_t>>(), j["step_logits"].get<std::vector<float>>()};
}

// The options of a greedy decode of gen's prompt: its first token comes from prefill, the rest from steps.
inline tp::RunOptions decodeRun(const Generation& gen)
{
    tp::RunOptions o;
    o.batch = gen.batch;
    o.seq = gen.prompt;
    o.tokens = gen.promptTokens;
    o.decodeSteps = static_cast<int>(gen.steps) - 1;
    return o;
}

// A run's logits laid out as Generation::stepLogits: prefill's last position of each sequence,
// then each decode step's rows.
inline std::vector<float> engineStepLogits(const tp::RunResult& r, std::int64_t batch, std::int64_t seq)
{
    const auto V = static_cast<std::size_t>(r.vocab);
    std::vector<float> out;
    for (std::int64_t b = 0; b < batch; ++b) {
        const auto row = r.logits.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>((b + 1) * seq - 1) * V);
        out.insert(out.end(), row, row + static_cast<std::ptrdiff_t>(V));
    }
    out.insert(out.end(), r.stepLogits.begin(), r.stepLogits.end());
    return out;
}

// The tokens a run generated, [batch, steps] as Generation::tokens.
inline std::vector<std::int32_t> generatedTokens(const tp::RunResult& r)
{
    std::vector<std::int32_t> tokens;
    for (const auto& seq : r.decode.generated)
        tokens.insert(tokens.end(), seq.begin(), seq.end());
    return tokens;
}

// Collectives per kind: how many and their bytes, summed over the ranks.
using CollectiveTally = std::map<tp::CollectiveKind, std::pair<int, std::int64_t>>;

// What a run issued: its spans' collectives.
inline CollectiveTally issuedCollectives(const tp::ShardedGraph& g, const std::vector<tp::Span>& spans)
{
    CollectiveTally t;
    for (const tp::Span& sp : spans)
        if (sp.collective >= 0) {
            auto& [n, bytes] = t[g.collectives[static_cast<std::size_t>(sp.collective)].kind];
            ++n;
            bytes += sp.bytes;
        }
    return t;
}

// What the preview shows: the sharded graph's collectives on every rank, their bytes as the cost model counts them
// (none at T = 1).
inline CollectiveTally previewedCollectives(const tp::ModelSpec& spec, const tp::ShardedGraph& g, const tp::HardwareProfile& hw)
{
    CollectiveTally t;
    if (g.tpSize < 2)
        return t;
    const tp::CostReport cost = tp::estimateCost(spec, g, hw);
    for (std::size_t c = 0; c < g.collectives.size(); ++c) {
        auto& [n, bytes] = t[g.collectives[c].kind];
        n += g.tpSize;
        bytes += g.tpSize * cost.collectives[c].bytes;
    }
    return t;
}

} // namespace tptest
