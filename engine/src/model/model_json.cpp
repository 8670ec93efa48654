#include "tp/model/model_json.h"

#include "tp/model/loader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tp {

nlohmann::ordered_json diagnosticsJson(const std::vector<Diagnostic>& ds)
{
    auto arr = nlohmann::ordered_json::array();
    for (const auto& d : ds) {
        nlohmann::ordered_json j{{"severity", severityName(d.severity)}, {"where", d.where}, {"message", d.message},
                                 {"hint", d.hint}};
        if (!d.follows.empty())
            j["follows"] = d.follows;
        arr.push_back(std::move(j));
    }
    return arr;
}

namespace {

nlohmann::ordered_json planJson(const std::vector<PlanEntry>& plan)
{
    auto o = nlohmann::ordered_json::object();
    for (const auto& e : plan)
        o[e.key] = e.style;
    return o;
}
} // namespace

nlohmann::ordered_json modelSpecToJson(const ModelSpec& s, bool tree)
{
    const ModelConfig& c = s.config;
    nlohmann::ordered_json j;
    j["schema"] = "tpstudio.model/1";
    j["source"] = s.source;
    j["class"] = s.className;
    j["model_type"] = c.modelType;
    j["parameters"] = s.parameterCount();
    j["parameter_bytes"] = s.parameterBytes();
    auto bytes = nlohmann::ordered_json::object();
    for (const auto& [t, b] : s.bytesByDtype())
        bytes[std::string(dtypeName(t))] = b;
    j["bytes_by_dtype"] = bytes;
    j["config"] = {{"vocab_size", c.vocabSize},
                   {"hidden_size", c.hiddenSize},
                   {"intermediate_size", c.intermediateSize},
                   {"num_hidden_layers", c.numLayers},
                   {"num_attention_heads", c.numHeads},
                   {"num_key_value_heads", c.numKvHeads},
                   {"head_dim", c.headDim},
                   {"head_dim_given", c.headDimGiven},
                   {"tie_word_embeddings", c.tieWordEmbeddings},
                   {"dtype", std::string(dtypeName(c.dtype))},
                   {"rope_theta", c.ropeTheta},
                   {"rope_scaling", c.ropeScaling.type.empty() ? nlohmann::ordered_json(nullptr)
                                                               : nlohmann::ordered_json{{"type", c.ropeScaling.type},
                                                                                        {"factor", c.ropeScaling.factor}}}};
    if (c.isMoe())
        j["config"]["moe"] = {{"num_experts", c.numExperts},
                              {"experts_per_token", c.expertsPerToken},
                              {"moe_intermediate_size", c.moeIntermediateSize},
                              {"shared_experts", c.numSharedExperts}};
    if (c.isMla())
        j["config"]["mla"] = {{"q_lora_rank", c.qLoraRank ? nlohmann::ordered_json(*c.qLoraRank) : nullptr},
                              {"kv_lora_rank", c.kvLoraRank},
                              {"qk_rope_head_dim", c.qkRopeHeadDim},
                              {"qk_nope_head_dim", c.qkNopeHeadDim},
                              {"v_head_dim", c.vHeadDim}};
    j["valid_tp_sizes"] = tpSizesDividingHeads(c, 64);
    j["supports_tp_plan"] = s.supportsTpPlan;
    j["default_tp_plan"] = planJson(s.defaultTpPlan);
    j["default_ep_plan"] = planJson(s.defaultEpPlan);
    j["diagnostics"] = diagnosticsJson(s.diagnostics);
    if (tree) {
        auto mods = nlohmann::ordered_json::array();
        for (const auto& m : s.modules) {
            nlohmann::ordered_json mj = {{"path", m.path}, {"class", m.className}, {"kind", moduleKindName(m.kind)}};
            if (!m.params.empty()) {
                auto ps = nlohmann::ordered_json::array();
                for (const auto& p : m.params) {
                    nlohmann::ordered_json pj = {{"name", p.name},
                                                 {"shape", p.shape},
                                                 {"dtype", std::string(dtypeName(p.dtype))},
                                                 {"bytes", p.bytes()}};
                    if (!p.tiedTo.empty())
                        pj["tied_to"] = p.tiedTo;
                    if (p.buffer)
                        pj["buffer"] = true;
                    if (!p.checkpointTensors.empty())
                        pj["checkpoint_tensors"] = p.checkpointTensors.size();
                    ps.push_back(std::move(pj));
                }
                mj["params"] = std::move(ps);
            }
            mods.push_back(std::move(mj));
        }
        j["modules"] = std::move(mods);
    }
    return j;
}

std::vector<int> layerRunStarts(const ModelSpec& s)
{
    const int L = static_cast<int>(s.config.numLayers);
    std::vector<std::string> sig(static_cast<std::size_t>(std::max(L, 0)));
    for (const auto& m : s.modules) {
        if (m.layer < 0 || m.layer >= L)
            continue;
        auto& out = sig[static_cast<std::size_t>(m.layer)];
        // Path relative to the layer, then its params.
        const std::string prefix = fmt::format("layers.{}", m.layer);
        auto pos = m.path.find(prefix);
        out += pos == std::string::npos ? m.path : m.path.substr(pos + prefix.size());
        out += ':';
        out += m.className;
        for (const auto& p : m.params)
            out += fmt::format("|{}{}{}", p.name, fmt::join(p.shape, "x"), dtypeName(p.dtype));
        out += ';';
    }
    std::vector<int> starts(sig.size());
    for (int l = 0; l < L; ++l)
        starts[static_cast<std::size_t>(l)] = (l > 0 && sig[static_cast<std::size_t>(l)] == sig[static_cast<std::size_t>(l - 1)])
            ? starts[static_cast<std::size_t>(l - 1)]
            : l;
    return starts;
}

} // namespace tp
