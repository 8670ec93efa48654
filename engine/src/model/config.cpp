// config.cpp — config.json → ModelConfig with each family's own field names and defaults.
//
// Defaults are those of the Transformers v5 configuration classes, so a config.json that omits a
// field means what it means to Transformers.
#include "tp/model/config.h"

#include "tp/core/file.h"
#include "tp/core/json.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace tp {

namespace {

// Plausibility caps, each some 8–30× the largest released model's value (Llama 3.1 405B: hidden
// 16384, 126 layers, vocab 128256; DeepSeek-V3: 256 experts; Gemma 3: vocab 262144). Together they
// keep every element count of one tensor below 2^55, so no per-tensor size can wrap; the total over
// all tensors is checked once the module tree is built (buildModelSpec).
constexpr std::int64_t kMaxVocab = std::int64_t(1) << 23;
constexpr std::int64_t kMaxWidth = std::int64_t(1) << 18;
constexpr std::int64_t kMaxFfn = std::int64_t(1) << 21;
constexpr std::int64_t kMaxLayers = std::int64_t(1) << 17;
constexpr std::int64_t kMaxHeads = std::int64_t(1) << 13;
constexpr std::int64_t kMaxHeadDim = std::int64_t(1) << 13;
constexpr std::int64_t kMaxExperts = std::int64_t(1) << 14;
constexpr std::int64_t kMaxSharedExperts = std::int64_t(1) << 8;

bool isPythonIdentifier(const std::string& s)
{
    if (s.empty() || s.size() > 200 || std::isdigit(static_cast<unsigned char>(s[0])))
        return false;
    return std::all_of(s.begin(), s.end(), [](char ch) {
        const auto u = static_cast<unsigned char>(ch);
        return u < 0x80 && (std::isalnum(u) || ch == '_');
    });
}

struct FamilyInfo
{
    Family family;
    const char* modelType;
    const char* causalLm;
};

constexpr FamilyInfo kFamilies[] = {
    {Family::Llama, "llama", "LlamaForCausalLM"},
    {Family::Mistral, "mistral", "MistralForCausalLM"},
    {Family::Qwen2, "qwen2", "Qwen2ForCausalLM"},
    {Family::Qwen3, "qwen3", "Qwen3ForCausalLM"},
    {Family::Gemma2, "gemma2", "Gemma2ForCausalLM"},
    {Family::Gemma3, "gemma3_text", "Gemma3ForCausalLM"},
    {Family::Phi3, "phi3", "Phi3ForCausalLM"},
    {Family::Mixtral, "mixtral", "MixtralForCausalLM"},
    {Family::Qwen3Moe, "qwen3_moe", "Qwen3MoeForCausalLM"},
    {Family::DeepseekV3, "deepseek_v3", "DeepseekV3ForCausalLM"},
    {Family::GptOss, "gpt_oss", "GptOssForCausalLM"},
    {Family::Llama4, "llama4_text", "Llama4ForCausalLM"},
};

Family familyFromModelType(const std::string& t)
{
    for (const auto& f : kFamilies)
        if (t == f.modelType)
            return f.family;
    return Family::Unknown;
}

// Reads typed fields from one JSON object and names the file and key in every error.
class FieldReader
{
public:
    FieldReader(const nlohmann::json& j, std::string source, std::string prefix)
        : m_j(j)
        , m_source(std::move(source))
        , m_prefix(std::move(prefix))
    {
    }

    bool has(const char* key) const { return m_j.contains(key) && !m_j.at(key).is_null(); }

    Status error(const char* key, const std::string& what) const
    {
        return invalidArgument(fmt::format("{}: key '{}{}' {}", m_source, m_prefix, key, what));
    }

    // Integer field: absent or null keeps `out`; present must be an integer in minValue..maxValue.
    Status readInt(const char* key, std::int64_t& out, std::int64_t minValue = 0,
                   std::int64_t maxValue = std::int64_t(1) << 40) const
    {
        if (!has(key))
            return {};
        const auto& v = m_j.at(key);
        if (v.is_number_float()) {
            const double d = v.get<double>();
            if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15)
                return error(key, fmt::format("must be an integer, found {}", jsonExcerpt(v)));
            out = static_cast<std::int64_t>(d);
        } else if (v.is_number_integer()) {
            if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
                return error(key, fmt::format("is out of range: {}", jsonExcerpt(v)));
            out = v.get<std::int64_t>();
        } else {
            return error(key, fmt::format("must be an integer, found {}", jsonExcerpt(v)));
        }
        if (out < minValue)
            return error(key, fmt::format("must be at least {}, found {}", minValue, out));
        if (out > maxValue)
            return error(key, fmt::format("is implausibly large: {} (at most {} is accepted)", out, maxValue));
        return {};
    }

    Status readOptInt(const char* key, std::optional<std::int64_t>& out, std::int64_t minValue = 0,
                      std::int64_t maxValue = std::int64_t(1) << 40) const
    {
        if (!m_j.contains(key))
            return {};
        if (m_j.at(key).is_null()) {
            out.reset();
            return {};
        }
        std::int64_t v = 0;
        TP_RETURN_IF_ERROR(readInt(key, v, minValue, maxValue));
        out = v;
        return {};
    }

    Status readDouble(const char* key, double& out) const
    {
        if (!has(key))
            return {};
        const auto& v = m_j.at(key);
        if (!v.is_number())
            return error(key, fmt::format("must be a number, found {}", jsonExcerpt(v)));
        const double d = v.get<double>();
        if (!std::isfinite(d))
            return error(key, "must be finite");
        out = d;
        return {};
    }

    // Number or null: absent keeps `out`, null clears it.
    Status readOptDouble(const char* key, std::optional<double>& out) const
    {
        if (!m_j.contains(key))
            return {};
        if (m_j.at(key).is_null()) {
            out.reset();
            return {};
        }
        double v = 0;
        TP_RETURN_IF_ERROR(readDouble(key, v));
        out = v;
        return {};
    }

    Status readBool(const char* key, bool& out) const
    {
        if (!has(key))
            return {};
        const auto& v = m_j.at(key);
        if (!v.is_boolean())
            return error(key, fmt::format("must be true or false, found {}", jsonExcerpt(v)));
        out = v.get<bool>();
        return {};
    }

    Status readString(const char* key, std::string& out) const
    {
        if (!has(key))
            return {};
        const auto& v = m_j.at(key);
        if (!v.is_string())
            return error(key, fmt::format("must be a string, found {}", jsonExcerpt(v)));
        if (const std::string why = badName(v.get<std::string>()); !why.empty())
            return error(key, why);
        out = v.get<std::string>();
        return {};
    }

    Status readIntList(const char* key, std::vector<std::int64_t>& out) const
    {
        if (!has(key))
            return {};
        const auto& v = m_j.at(key);
        if (!v.is_array())
            return error(key, "must be a list of integers");
        if (v.size() > static_cast<std::size_t>(kMaxLayers))
            return error(key, fmt::format("has {} entries, more than the {} layers a model may have", v.size(), kMaxLayers));
        out.clear();
        for (const auto& e : v) {
            if (!e.is_number_integer())
                return error(key, fmt::format("must be a list of integers, found element {}", jsonExcerpt(e)));
            out.push_back(e.get<std::int64_t>());
        }
        return {};
    }

    Status readStringList(const char* key, std::vector<std::string>& out) const
    {
        if (!has(key))
            return {};
        const auto& v = m_j.at(key);
        if (!v.is_array())
            return error(key, "must be a list of strings");
        if (v.size() > static_cast<std::size_t>(kMaxLayers))
            return error(key, fmt::format("has {} entries, more than the {} layers a model may have", v.size(), kMaxLayers));
        out.clear();
        for (const auto& e : v) {
            if (!e.is_string())
                return error(key, fmt::format("must be a list of strings, found element {}", jsonExcerpt(e)));
            if (const std::string why = badName(e.get<std::string>()); !why.empty())
                return error(key, "element " + why);
            out.push_back(e.get<std::string>());
        }
        return {};
    }

    const nlohmann::json& json() const { return m_j; }
    const std::string& source() const { return m_source; }
    const std::string& prefix() const { return m_prefix; }

private:
    const nlohmann::json& m_j;
    std::string m_source;
    std::string m_prefix;
};

// Family defaults, from the Transformers configuration classes.
void applyDefaults(ModelConfig& c)
{
    auto dense = [&](std::int64_t vocab, std::int64_t hidden, std::int64_t inter, std::int64_t layers,
                     std::int64_t heads, std::int64_t kv, std::int64_t maxPos, double eps, double theta, bool tie) {
        c.vocabSize = vocab;
        c.hiddenSize = hidden;
        c.intermediateSize = inter;
        c.numLayers = layers;
        c.numHeads = heads;
        c.numKvHeads = kv; // 0: same as heads
        c.maxPositionEmbeddings = maxPos;
        c.rmsNormEps = eps;
        c.ropeTheta = theta;
        c.tieWordEmbeddings = tie;
    };
    switch (c.family) {
    case Family::Unknown:
    case Family::Llama: dense(32000, 4096, 11008, 32, 32, 0, 2048, 1e-6, 10000.0, false); break;
    case Family::Mistral:
        dense(32000, 4096, 14336, 32, 32, 8, 4096 * 32, 1e-6, 10000.0, false);
        c.slidingWindow = 4096;
        break;
    case Family::Qwen2:
        dense(151936, 4096, 22016, 32, 32, 32, 32768, 1e-6, 10000.0, false);
        c.attentionBias = true; // Qwen2 always has q/k/v biases
        break;
    case Family::Qwen3:
        dense(151936, 4096, 22016, 32, 32, 32, 32768, 1e-6, 10000.0, false);
        c.headDim = 128;
        break;
    case Family::Gemma2:
        dense(256000, 2304, 9216, 26, 8, 4, 8192, 1e-6, 10000.0, true);
        c.headDim = 256;
        c.slidingWindow = 4096;
        c.hiddenAct = "gelu_pytorch_tanh";
        c.queryPreAttnScalar = 256;
        c.attnLogitSoftcap = 50.0;
        c.finalLogitSoftcap = 30.0;
        break;
    case Family::Gemma3:
        dense(262208, 2304, 9216, 26, 8, 4, 131072, 1e-6, 1000000.0, true);
        c.headDim = 256;
        c.slidingWindow = 4096;
        c.hiddenAct = "gelu_pytorch_tanh";
        c.queryPreAttnScalar = 256;
        break;
    case Family::Phi3: dense(32064, 3072, 8192, 32, 32, 0, 4096, 1e-5, 10000.0, false); break;
    case Family::Mixtral:
        dense(32000, 4096, 14336, 32, 32, 8, 4096 * 32, 1e-5, 1000000.0, false);
        c.numExperts = 8;
        c.expertsPerToken = 2;
        break;
    case Family::Qwen3Moe:
        dense(151936, 2048, 6144, 24, 32, 4, 32768, 1e-6, 10000.0, false);
        c.headDim = 128;
        c.numExperts = 128;
        c.expertsPerToken = 8;
        c.moeIntermediateSize = 768;
        break;
    case Family::DeepseekV3:
        dense(129280, 7168, 18432, 61, 128, 128, 4096, 1e-6, 10000.0, false);
        c.numExperts = 256;
        c.expertsPerToken = 8;
        c.moeIntermediateSize = 2048;
        c.numSharedExperts = 1;
        c.firstKDenseReplace = 3;
        c.qLoraRank = 1536;
        c.kvLoraRank = 512;
        c.qkRopeHeadDim = 64;
        c.qkNopeHeadDim = 128;
        c.vHeadDim = 128;
        c.nGroup = 8;
        c.topkGroup = 4;
        c.routedScalingFactor = 2.5;
        c.normTopkProb = true;
        c.ropeInterleave = true;
        break;
    case Family::GptOss:
        dense(201088, 2880, 2880, 36, 64, 8, 131072, 1e-5, 150000.0, false);
        c.headDim = 64;
        c.numExperts = 128;
        c.expertsPerToken = 4;
        c.slidingWindow = 128;
        c.attentionBias = true;
        break;
    case Family::Llama4:
        dense(202048, 5120, 8192, 48, 40, 8, 4096 * 32, 1e-5, 500000.0, false);
        c.headDim = 128;
        c.numExperts = 16;
        c.expertsPerToken = 1;
        c.intermediateSizeMlp = 16384;
        c.numSharedExperts = 1;
        c.attentionChunkSize = 8192;
        c.useQkNorm = true;
        c.attnTemperatureTuning = true;
        c.ropeInterleave = true; // Llama4TextRotaryEmbedding's complex form: pairs (2j, 2j + 1)
        break;
    }
}

// One rope object: its type, scaling fields and theta.
Status readRope(const FieldReader& sub, double& theta, RopeScaling& rs)
{
    std::string type;
    TP_RETURN_IF_ERROR(sub.readString("rope_type", type));
    if (type.empty())
        TP_RETURN_IF_ERROR(sub.readString("type", type));
    if (type != "default")
        rs.type = type;
    TP_RETURN_IF_ERROR(sub.readDouble("factor", rs.factor));
    TP_RETURN_IF_ERROR(sub.readInt("original_max_position_embeddings", rs.originalMaxPositions));
    TP_RETURN_IF_ERROR(sub.readDouble("low_freq_factor", rs.lowFreqFactor));
    TP_RETURN_IF_ERROR(sub.readDouble("high_freq_factor", rs.highFreqFactor));
    TP_RETURN_IF_ERROR(sub.readDouble("beta_fast", rs.betaFast));
    TP_RETURN_IF_ERROR(sub.readDouble("beta_slow", rs.betaSlow));
    TP_RETURN_IF_ERROR(sub.readBool("truncate", rs.truncate));
    TP_RETURN_IF_ERROR(sub.readOptDouble("attention_factor", rs.attentionFactor));
    TP_RETURN_IF_ERROR(sub.readDouble("mscale", rs.mscale));
    TP_RETURN_IF_ERROR(sub.readDouble("mscale_all_dim", rs.mscaleAllDim));
    return sub.readDouble("rope_theta", theta);
}

Status readRopeScaling(const FieldReader& r, ModelConfig& c)
{
    // v5 writes `rope_parameters` (with rope_theta inside), per layer type where the layer types
    // differ (Gemma 3: {"full_attention": {…}, "sliding_attention": {…}}); v4 wrote `rope_scaling`,
    // which Gemma 3 applies to its full layers only.
    if (c.family == Family::Gemma3) {
        LayerRope local;
        TP_RETURN_IF_ERROR(r.readDouble("rope_local_base_freq", local.theta));
        c.slidingRope = local;
    }
    for (const char* key : {"rope_scaling", "rope_parameters"}) {
        if (!r.has(key))
            continue;
        const auto& rs = r.json().at(key);
        if (!rs.is_object())
            return r.error(key, "must be an object or null");
        const bool perLayerType = rs.contains("full_attention") || rs.contains("sliding_attention");
        if (!perLayerType) {
            TP_RETURN_IF_ERROR(readRope(FieldReader(rs, r.source(), r.prefix() + key + "."), c.ropeTheta, c.ropeScaling));
            continue;
        }
        for (const char* type : {"full_attention", "sliding_attention"}) {
            if (!rs.contains(type) || rs.at(type).is_null())
                continue;
            const std::string prefix = fmt::format("{}{}.{}.", r.prefix(), key, type);
            if (!rs.at(type).is_object())
                return invalidArgument(fmt::format("{}: key '{}' must be an object or null", r.source(),
                                                   prefix.substr(0, prefix.size() - 1)));
            const FieldReader sub(rs.at(type), r.source(), prefix);
            if (std::string_view(type) == "full_attention") {
                TP_RETURN_IF_ERROR(readRope(sub, c.ropeTheta, c.ropeScaling));
            } else {
                LayerRope local = c.slidingRope.value_or(LayerRope{c.ropeTheta, {}});
                TP_RETURN_IF_ERROR(readRope(sub, local.theta, local.scaling));
                c.slidingRope = local;
            }
        }
    }
    return {};
}

Status readDType(const FieldReader& r, ModelConfig& c, std::vector<Diagnostic>* diags)
{
    for (const char* key : {"dtype", "torch_dtype"}) {
        if (!r.has(key))
            continue;
        std::string name;
        TP_RETURN_IF_ERROR(r.readString(key, name));
        auto t = dtypeFromTorch(name);
        if (!t)
            return r.error(key, fmt::format("names an unknown dtype '{}'", name));
        c.dtype = *t;
        c.dtypeGiven = true;
        return {};
    }
    if (diags && !c.dtypeGiven)
        diags->push_back({Severity::Info, r.source(), "no 'torch_dtype'/'dtype' given; assuming float32", ""});
    return {};
}

Status readFields(const FieldReader& r, ModelConfig& c, std::vector<Diagnostic>* diags)
{
    TP_RETURN_IF_ERROR(r.readInt("vocab_size", c.vocabSize, 1, kMaxVocab));
    TP_RETURN_IF_ERROR(r.readInt("hidden_size", c.hiddenSize, 1, kMaxWidth));
    TP_RETURN_IF_ERROR(r.readInt("intermediate_size", c.intermediateSize, 0, kMaxFfn));
    TP_RETURN_IF_ERROR(r.readInt("num_hidden_layers", c.numLayers, 1, kMaxLayers));
    TP_RETURN_IF_ERROR(r.readInt("num_attention_heads", c.numHeads, 1, kMaxHeads));
    if (r.has("num_key_value_heads"))
        TP_RETURN_IF_ERROR(r.readInt("num_key_value_heads", c.numKvHeads, 1, kMaxHeads));
    if (r.json().contains("head_dim") && !r.json().at("head_dim").is_null()) {
        TP_RETURN_IF_ERROR(r.readInt("head_dim", c.headDim, 1, kMaxHeadDim));
    }
    TP_RETURN_IF_ERROR(r.readInt("max_position_embeddings", c.maxPositionEmbeddings, 0));
    for (const char* eps : {"rms_norm_eps", "layer_norm_eps"})
        TP_RETURN_IF_ERROR(r.readDouble(eps, c.rmsNormEps));
    TP_RETURN_IF_ERROR(r.readDouble("rope_theta", c.ropeTheta));
    TP_RETURN_IF_ERROR(readRopeScaling(r, c));
    TP_RETURN_IF_ERROR(r.readBool("tie_word_embeddings", c.tieWordEmbeddings));
    TP_RETURN_IF_ERROR(r.readBool("norm_topk_prob", c.normTopkProb));
    if (c.family != Family::Qwen2) // Qwen2 has no switch: its q/k/v always carry biases
        TP_RETURN_IF_ERROR(r.readBool("attention_bias", c.attentionBias));
    TP_RETURN_IF_ERROR(r.readBool("mlp_bias", c.mlpBias));
    for (const char* k : {"hidden_act", "hidden_activation"})
        TP_RETURN_IF_ERROR(r.readString(k, c.hiddenAct));
    TP_RETURN_IF_ERROR(r.readOptInt("sliding_window", c.slidingWindow, 0));
    TP_RETURN_IF_ERROR(r.readStringList("layer_types", c.layerTypes));
    if (c.layerTypes.empty() && (c.family == Family::Gemma2 || c.family == Family::Gemma3)) {
        // As Gemma's configs derive them: every pattern-th layer full, the others sliding.
        std::int64_t pattern = c.family == Family::Gemma2 ? 2 : 6;
        if (c.family == Family::Gemma3)
            TP_RETURN_IF_ERROR(r.readInt("sliding_window_pattern", pattern, 1, kMaxLayers));
        for (std::int64_t l = 0; l < c.numLayers; ++l)
            c.layerTypes.push_back((l + 1) % pattern ? "sliding_attention" : "full_attention");
    }
    TP_RETURN_IF_ERROR(r.readOptDouble("query_pre_attn_scalar", c.queryPreAttnScalar));
    TP_RETURN_IF_ERROR(r.readOptDouble("attn_logit_softcapping", c.attnLogitSoftcap));
    TP_RETURN_IF_ERROR(r.readOptDouble("final_logit_softcapping", c.finalLogitSoftcap));
    TP_RETURN_IF_ERROR(r.readBool("use_bidirectional_attention", c.bidirectionalAttention));
    if (c.family == Family::Llama4) {
        TP_RETURN_IF_ERROR(r.readIntList("no_rope_layers", c.noRopeLayers));
        std::int64_t interval = 4;
        TP_RETURN_IF_ERROR(r.readInt("no_rope_layer_interval", interval, 1, kMaxLayers));
        if (c.noRopeLayers.empty()) // as Llama4TextConfig derives them: every interval-th layer NoPE
            for (std::int64_t l = 0; l < c.numLayers; ++l)
                c.noRopeLayers.push_back((l + 1) % interval != 0 ? 1 : 0);
        TP_RETURN_IF_ERROR(r.readOptInt("attention_chunk_size", c.attentionChunkSize, 1));
        TP_RETURN_IF_ERROR(r.readBool("use_qk_norm", c.useQkNorm));
        TP_RETURN_IF_ERROR(r.readBool("attn_temperature_tuning", c.attnTemperatureTuning));
        TP_RETURN_IF_ERROR(r.readDouble("floor_scale", c.floorScale));
        TP_RETURN_IF_ERROR(r.readDouble("attn_scale", c.attnScale));
        if (c.layerTypes.empty())
            for (const std::int64_t rope : c.noRopeLayers)
                c.layerTypes.push_back(rope && c.attentionChunkSize ? "chunked_attention" : "full_attention");
    }
    TP_RETURN_IF_ERROR(readDType(r, c, diags));

    // MoE: every family spells the expert count its own way.
    for (const char* k : {"num_local_experts", "num_experts", "n_routed_experts"})
        TP_RETURN_IF_ERROR(r.readInt(k, c.numExperts, 0, kMaxExperts));
    for (const char* k : {"num_experts_per_tok", "experts_per_token"})
        TP_RETURN_IF_ERROR(r.readInt(k, c.expertsPerToken, 0, kMaxExperts));
    TP_RETURN_IF_ERROR(r.readInt("moe_intermediate_size", c.moeIntermediateSize, 0, kMaxFfn));
    TP_RETURN_IF_ERROR(r.readInt("n_shared_experts", c.numSharedExperts, 0, kMaxSharedExperts));
    TP_RETURN_IF_ERROR(r.readInt("first_k_dense_replace", c.firstKDenseReplace, 0, kMaxLayers));
    TP_RETURN_IF_ERROR(r.readInt("decoder_sparse_step", c.decoderSparseStep, 1, kMaxLayers));
    TP_RETURN_IF_ERROR(r.readIntList("mlp_only_layers", c.mlpOnlyLayers));
    TP_RETURN_IF_ERROR(r.readInt("interleave_moe_layer_step", c.interleaveMoeLayerStep, 1, kMaxLayers));
    TP_RETURN_IF_ERROR(r.readInt("intermediate_size_mlp", c.intermediateSizeMlp, 0, kMaxFfn));
    TP_RETURN_IF_ERROR(r.readDouble("swiglu_alpha", c.swigluAlpha));
    TP_RETURN_IF_ERROR(r.readDouble("swiglu_limit", c.swigluLimit));
    if (c.family == Family::Llama4 && r.has("moe_layers")) {
        std::vector<std::int64_t> moeLayers;
        TP_RETURN_IF_ERROR(r.readIntList("moe_layers", moeLayers));
        std::vector<char> isMoe(static_cast<std::size_t>(c.numLayers), 0);
        for (auto l : moeLayers)
            if (l >= 0 && l < c.numLayers)
                isMoe[static_cast<std::size_t>(l)] = 1;
        c.mlpOnlyLayers.clear(); // reuse as "dense layers": everything not listed
        for (std::int64_t l = 0; l < c.numLayers; ++l)
            if (!isMoe[static_cast<std::size_t>(l)])
                c.mlpOnlyLayers.push_back(l);
    }

    std::sort(c.mlpOnlyLayers.begin(), c.mlpOnlyLayers.end()); // isMoeLayer() searches it

    // MLA.
    TP_RETURN_IF_ERROR(r.readOptInt("q_lora_rank", c.qLoraRank, 1, kMaxWidth));
    TP_RETURN_IF_ERROR(r.readInt("kv_lora_rank", c.kvLoraRank, 0, kMaxWidth));
    TP_RETURN_IF_ERROR(r.readInt("qk_rope_head_dim", c.qkRopeHeadDim, 0, kMaxHeadDim));
    TP_RETURN_IF_ERROR(r.readInt("qk_nope_head_dim", c.qkNopeHeadDim, 0, kMaxHeadDim));
    TP_RETURN_IF_ERROR(r.readInt("v_head_dim", c.vHeadDim, 0, kMaxHeadDim));
    TP_RETURN_IF_ERROR(r.readBool("rope_interleave", c.ropeInterleave));
    TP_RETURN_IF_ERROR(r.readInt("n_group", c.nGroup, 1, kMaxExperts));
    TP_RETURN_IF_ERROR(r.readInt("topk_group", c.topkGroup, 1, kMaxExperts));
    TP_RETURN_IF_ERROR(r.readDouble("routed_scaling_factor", c.routedScalingFactor));

    if (r.has("quantization_config")) {
        const auto& q = r.json().at("quantization_config");
        if (q.is_object() && q.contains("quant_method") && q.at("quant_method").is_string())
            c.quantization = terminalSafe(q.at("quant_method").get<std::string>());
        else
            c.quantization = "unknown";
    }
    return {};
}

Status validate(const ModelConfig& c, const std::string& source)
{
    auto bad = [&](const std::string& m) { return invalidArgument(fmt::format("{}: {}", source, m)); };
    if (c.numKvHeads > c.numHeads || c.numHeads % c.numKvHeads != 0)
        return bad(fmt::format("num_attention_heads ({}) is not a multiple of num_key_value_heads ({})", c.numHeads,
                               c.numKvHeads));
    if (!c.headDimGiven && !c.isMla() && c.hiddenSize % c.numHeads != 0)
        return bad(fmt::format("hidden_size ({}) is not divisible by num_attention_heads ({}) and no head_dim is given",
                               c.hiddenSize, c.numHeads));
    if (c.isMoe() && (c.expertsPerToken < 1 || c.expertsPerToken > c.numExperts))
        return bad(fmt::format("num_experts_per_tok ({}) must be between 1 and the number of experts ({})",
                               c.expertsPerToken, c.numExperts));
    if (c.isMla() && (c.kvLoraRank < 1 || c.qkRopeHeadDim < 1 || c.vHeadDim < 1))
        return bad("deepseek_v3 needs kv_lora_rank, qk_rope_head_dim and v_head_dim of at least 1");
    if (c.isMla() && c.qkRopeHeadDim % 2 != 0)
        return bad(fmt::format("qk_rope_head_dim must be even (rotary pairs), found {}", c.qkRopeHeadDim));
    if (c.family == Family::DeepseekV3 && c.isMoe()) {
        // As DeepseekV3TopkRouter groups them: n_group equal groups, each scored by its best two.
        const std::int64_t per = c.numExperts % c.nGroup == 0 ? c.numExperts / c.nGroup : 0;
        if (per == 0 || (c.nGroup > 1 && per < 2) || c.nGroup > 64)
            return bad(fmt::format("n_group ({}) must divide n_routed_experts ({}) into groups of at least 2 (64 groups "
                                   "at most)",
                                   c.nGroup, c.numExperts));
        if (c.topkGroup > c.nGroup || c.expertsPerToken > c.topkGroup * per)
            return bad(fmt::format("topk_group ({}) must be at most n_group ({}) and leave num_experts_per_tok ({}) "
                                   "experts to choose from",
                                   c.topkGroup, c.nGroup, c.expertsPerToken));
        if (!(c.routedScalingFactor > 0 && c.routedScalingFactor <= 1e6))
            return bad(fmt::format("routed_scaling_factor must be above 0 and at most 1e6, found {}", c.routedScalingFactor));
    }
    if (c.family == Family::Llama4) {
        if (static_cast<std::int64_t>(c.noRopeLayers.size()) != c.numLayers)
            return bad(fmt::format("no_rope_layers has {} entries but num_hidden_layers is {}", c.noRopeLayers.size(),
                                   c.numLayers));
        // Bounds that keep the query temperature a finite fp32 factor at any position.
        if (!(c.floorScale >= 1e-3 && c.floorScale <= 1e12) || !(std::abs(c.attnScale) <= 1e3))
            return bad(fmt::format("floor_scale must be in 0.001..1e12 and attn_scale in -1000..1000, found {} and {}",
                                   c.floorScale, c.attnScale));
        for (const std::string& t : c.layerTypes)
            if (t == "chunked_attention" && !c.attentionChunkSize)
                return bad("layer_types has chunked_attention layers but attention_chunk_size is null");
    }
    if (!c.layerTypes.empty() && static_cast<std::int64_t>(c.layerTypes.size()) != c.numLayers)
        return bad(fmt::format("layer_types has {} entries but num_hidden_layers is {}", c.layerTypes.size(),
                               c.numLayers));
    for (auto l : c.mlpOnlyLayers)
        if (l < 0 || l >= c.numLayers)
            return bad(fmt::format("mlp_only_layers names layer {} outside 0..{}", l, c.numLayers - 1));
    if (c.intermediateSize < 1 && !(c.isMoe() && c.family != Family::DeepseekV3 && c.family != Family::Qwen3Moe
                                     && c.family != Family::Llama4))
        return bad("intermediate_size must be at least 1");
    // Values that make the forward NaN rather than fail: refused here, naming the key.
    if (!(c.ropeTheta > 0))
        return bad(fmt::format("rope_theta must be above 0, found {}", c.ropeTheta));
    if (!(c.rmsNormEps >= 0))
        return bad(fmt::format("rms_norm_eps must be 0 or more, found {}", c.rmsNormEps));
    for (const auto& [key, v] : {std::pair{"query_pre_attn_scalar", c.queryPreAttnScalar},
                                 {"attn_logit_softcapping", c.attnLogitSoftcap},
                                 {"final_logit_softcapping", c.finalLogitSoftcap}})
        if (v && !(*v > 0))
            return bad(fmt::format("{} must be above 0 (or null), found {}", key, *v));
    if (c.family == Family::GptOss && !(c.swigluLimit > 0))
        return bad(fmt::format("swiglu_limit must be above 0, found {}", c.swigluLimit));
    if (c.slidingRope && !(c.slidingRope->theta > 0))
        return bad(fmt::format("the sliding layers' rope_theta must be above 0, found {}", c.slidingRope->theta));
    const RopeScaling& rs = c.ropeScaling;
    if (!rs.type.empty() && !(rs.factor > 0))
        return bad(fmt::format("rope scaling '{}': factor must be above 0, found {}", rs.type, rs.factor));
    if (rs.type == "llama3"
        && !(rs.lowFreqFactor > 0 && rs.highFreqFactor >= rs.lowFreqFactor && rs.originalMaxPositions > 0))
        return bad(fmt::format("rope scaling 'llama3' needs 0 < low_freq_factor <= high_freq_factor and "
                               "original_max_position_embeddings > 0, found {}, {} and {}",
                               rs.lowFreqFactor, rs.highFreqFactor, rs.originalMaxPositions));
    return {};
}

} // namespace

const char* familyName(Family f)
{
    for (const auto& i : kFamilies)
        if (i.family == f)
            return i.modelType;
    return "unknown";
}

const char* causalLmClassName(Family f)
{
    for (const auto& i : kFamilies)
        if (i.family == f)
            return i.causalLm;
    return "AutoModelForCausalLM";
}

std::vector<Family> allFamilies()
{
    std::vector<Family> out;
    for (const auto& i : kFamilies)
        out.push_back(i.family);
    return out;
}

bool ModelConfig::isMoeLayer(std::int64_t layer) const
{
    if (!isMoe())
        return false;
    switch (family) {
    case Family::Qwen3Moe:
        return !std::binary_search(mlpOnlyLayers.begin(), mlpOnlyLayers.end(), layer)
            && (layer + 1) % decoderSparseStep == 0;
    case Family::DeepseekV3: return layer >= firstKDenseReplace;
    case Family::Llama4:
        if (!mlpOnlyLayers.empty() || interleaveMoeLayerStep < 1)
            return !std::binary_search(mlpOnlyLayers.begin(), mlpOnlyLayers.end(), layer);
        return layer % interleaveMoeLayerStep == interleaveMoeLayerStep - 1;
    default: return true;
    }
}

Result<ModelConfig> parseConfigJson(const nlohmann::json& outer, const std::string& source,
                                    std::vector<Diagnostic>* diags)
{
    if (!outer.is_object())
        return invalidArgument(fmt::format("{}: the top level must be a JSON object", source));

    ModelConfig c;
    FieldReader outerReader(outer, source, "");
    std::string modelType;
    TP_RETURN_IF_ERROR(outerReader.readString("model_type", modelType));
    TP_RETURN_IF_ERROR(outerReader.readStringList("architectures", c.architectures));
    // Class names reach generated Python (the export) and window titles: only identifiers pass.
    for (std::size_t i = 0; i < c.architectures.size(); ++i)
        if (!isPythonIdentifier(c.architectures[i]))
            return outerReader.error("architectures",
                                     fmt::format("entry {} must be a Python class name, found {}", i,
                                                 jsonExcerpt(nlohmann::json(c.architectures[i]))));

    // Multimodal wrappers: the causal LM is the text model.
    const nlohmann::json* body = &outer;
    std::string prefix;
    if ((modelType == "gemma3" || modelType == "llama4") && outer.contains("text_config")) {
        if (!outer.at("text_config").is_object())
            return outerReader.error("text_config", "must be an object");
        body = &outer.at("text_config");
        prefix = "text_config.";
        c.wrapperModelType = modelType;
        std::string inner = modelType + "_text";
        if (auto st = FieldReader(*body, source, prefix).readString("model_type", inner); !st.ok())
            return st;
        modelType = inner;
        if (diags)
            diags->push_back({Severity::Info, source,
                              fmt::format("'{}' is a multimodal wrapper; reading its text_config as {}",
                                          c.wrapperModelType, modelType),
                              "vision tower and projector are not part of the causal LM tree"});
    }
    if (modelType == "llama4")
        modelType = "llama4_text";
    if (modelType == "gemma3")
        modelType = "gemma3_text";

    c.modelType = modelType;
    c.family = familyFromModelType(modelType);
    if (c.family == Family::Unknown && diags)
        diags->push_back({Severity::Warning, source,
                          modelType.empty() ? "no 'model_type' in config"
                                            : fmt::format("unknown model_type '{}'", modelType),
                          "common fields are read; the module tree comes from the checkpoint's tensor names"});

    applyDefaults(c);
    FieldReader r(*body, source, prefix);
    TP_RETURN_IF_ERROR(readFields(r, c, diags));
    if (!c.dtypeGiven && body != &outer) // wrapper configs keep the dtype outside
        TP_RETURN_IF_ERROR(readDType(outerReader, c, nullptr));
    if (body != &outer && !r.has("tie_word_embeddings"))
        TP_RETURN_IF_ERROR(outerReader.readBool("tie_word_embeddings", c.tieWordEmbeddings));

    if (c.numKvHeads == 0)
        c.numKvHeads = c.numHeads;
    c.headDimGiven = c.headDim > 0 && r.has("head_dim");
    if (c.isMla()) {
        c.headDim = c.qkRopeHeadDim; // as Transformers' DeepseekV3Config sets it
        c.headDimGiven = true;
    } else if (c.headDim == 0 || (!r.has("head_dim") && c.family == Family::Unknown)) {
        c.headDim = c.numHeads > 0 ? c.hiddenSize / c.numHeads : 0;
    } else if (!r.has("head_dim")) {
        c.headDimGiven = true; // a family default (qwen3, gemma, gpt_oss, llama4)
    }
    if (c.family == Family::Llama4 && c.numSharedExperts == 0)
        c.numSharedExperts = 1;
    if (c.family == Family::DeepseekV3)
        c.sharedIntermediateSize = c.moeIntermediateSize * c.numSharedExperts;
    if (c.family == Family::Llama4)
        c.sharedIntermediateSize = c.intermediateSize;
    if (c.family == Family::Mixtral || c.family == Family::GptOss || c.family == Family::Llama4)
        c.moeIntermediateSize = c.intermediateSize;

    TP_RETURN_IF_ERROR(validate(c, source));
    return c;
}

Result<ModelConfig> parseConfig(std::string_view text, const std::string& source, std::vector<Diagnostic>* diags)
{
    TP_ASSIGN_OR_RETURN(nlohmann::json j, parseJson(text, source, "config"));
    return parseConfigJson(j, source, diags);
}

Result<ModelConfig> loadConfigFile(const std::string& path, std::vector<Diagnostic>* diags)
{
    TP_ASSIGN_OR_RETURN(const std::string text, readInputFile(path, std::int64_t(64) << 20, "a config.json"));
    return parseConfig(text, path, diags);
}

} // namespace tp
