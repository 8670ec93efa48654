// architecture.cpp — module trees and default plans of the supported *ForCausalLM classes.
//
// Names, shapes, module order and plans follow Transformers v5 (checked against 5.24 by
// tests/fixtures/make_fixtures.py, which records what Transformers itself builds).
#include "tp/model/arch_traits.h"
#include "tp/model/model_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>
#include <map>
#include <string_view>

#include <algorithm>

namespace tp {

const char* moduleKindName(ModuleKind k)
{
    switch (k) {
    case ModuleKind::CausalLM: return "CausalLM";
    case ModuleKind::Model: return "Model";
    case ModuleKind::ModuleList: return "ModuleList";
    case ModuleKind::DecoderLayer: return "DecoderLayer";
    case ModuleKind::Attention: return "Attention";
    case ModuleKind::Mlp: return "MLP";
    case ModuleKind::Moe: return "MoE";
    case ModuleKind::Experts: return "Experts";
    case ModuleKind::Router: return "Router";
    case ModuleKind::Linear: return "Linear";
    case ModuleKind::Embedding: return "Embedding";
    case ModuleKind::RmsNorm: return "RMSNorm";
    case ModuleKind::L2Norm: return "L2Norm";
    case ModuleKind::RotaryEmbedding: return "RotaryEmbedding";
    case ModuleKind::Other: return "Other";
    }
    return "?";
}

std::int64_t ParamSpec::numel() const
{
    // Saturates instead of wrapping; buildModelSpec refuses any model where that could matter.
    std::int64_t n = 1;
    for (auto d : shape)
        if (__builtin_mul_overflow(n, d, &n))
            return std::numeric_limits<std::int64_t>::max();
    return n;
}

std::int64_t ParamSpec::scaleBytes(const std::vector<std::int64_t>& s) const
{
    if (scaleBlock.size() != 2 || s.size() < 2 || (dtype != DType::F8E4M3 && dtype != DType::F4))
        return 0;
    auto blocks = [](std::int64_t n, std::int64_t b) { return (n + b - 1) / b; };
    std::int64_t n = blocks(s[s.size() - 2], scaleBlock[0]) * blocks(s[s.size() - 1], scaleBlock[1]);
    for (std::size_t i = 0; i + 2 < s.size(); ++i)
        n *= s[i]; // experts: one grid per expert (sizes are bounded by buildModelSpec's parameter cap)
    return n * dtypeBytes(scaleDtype(), 1);
}

std::map<DType, std::int64_t> ParamSpec::packedBytes(const std::vector<std::int64_t>& s) const
{
    if (packBits <= 0 || s.size() != 2)
        return {};
    auto ceilDiv = [](std::int64_t n, std::int64_t d) { return (n + d - 1) / d; };
    const std::int64_t out = s[0], in = s[1], b = packBits, groups = ceilDiv(in, packGroup > 0 ? packGroup : in);
    const std::int64_t words = packGptq ? ceilDiv(in * b, 32) * out : in * ceilDiv(out * b, 32);
    return {{DType::I32, (words + groups * ceilDiv(out * b, 32) + (packGptq ? in : 0)) * 4}, {DType::F16, groups * out * 2}};
}

std::int64_t ParamSpec::bytesOf(const std::vector<std::int64_t>& s) const
{
    if (packBits > 0) {
        std::int64_t n = 0;
        for (const auto& [t, b] : packedBytes(s))
            n += b;
        return n;
    }
    std::int64_t n = 1;
    for (auto d : s)
        if (__builtin_mul_overflow(n, d, &n))
            return std::numeric_limits<std::int64_t>::max();
    return dtypeBytes(dtype, n) + scaleBytes(s);
}

const ModuleSpec* ModelSpec::find(const std::string& path) const
{
    int i = indexOf(path);
    return i < 0 ? nullptr : &modules[static_cast<std::size_t>(i)];
}

int ModelSpec::indexOf(const std::string& path) const
{
    auto it = m_index.find(path);
    return it == m_index.end() ? -1 : it->second;
}

void ModelSpec::finalize()
{
    m_index.clear();
    m_index.reserve(modules.size());
    for (std::size_t i = 0; i < modules.size(); ++i)
        m_index.emplace(modules[i].path, static_cast<int>(i));
}

std::int64_t ModelSpec::parameterCount() const
{
    std::int64_t n = 0;
    for (const auto& m : modules)
        for (const auto& p : m.params)
            if (p.tiedTo.empty() && !p.buffer)
                n += p.numel();
    return n;
}

std::int64_t ModelSpec::parameterBytes() const
{
    std::int64_t n = 0;
    for (const auto& [t, b] : bytesByDtype())
        n += b;
    return n;
}

std::map<DType, std::int64_t> ModelSpec::bytesByDtype() const
{
    std::map<DType, std::int64_t> out;
    for (const auto& m : modules)
        for (const auto& p : m.params)
            if (p.tiedTo.empty() && p.packBits > 0) {
                for (const auto& [t, b] : p.packedBytes(p.shape))
                    out[t] += b;
            } else if (p.tiedTo.empty()) {
                out[p.dtype] += dtypeBytes(p.dtype, p.numel());
                if (const std::int64_t scales = p.scaleBytes(p.shape))
                    out[p.scaleDtype()] += scales;
            }
    return out;
}

std::vector<std::pair<std::string, const ParamSpec*>> ModelSpec::allParams() const
{
    std::vector<std::pair<std::string, const ParamSpec*>> out;
    for (const auto& m : modules)
        for (const auto& p : m.params)
            out.emplace_back(m.paramPath(p), &p);
    return out;
}

std::vector<int> tpSizesDividingHeads(const ModelConfig& c, int maxT)
{
    std::vector<int> out;
    const bool perLayer = !c.headsPerLayer.empty() || !c.kvHeadsPerLayer.empty(); // Laguna, Gemma 4, Dots 3
    for (int t = 1; t <= maxT; ++t) {
        bool divides = c.numHeads % t == 0 && c.numKvHeads % t == 0;
        for (std::int64_t l = 0; perLayer && divides && l < c.numLayers; ++l)
            divides = c.headsAt(l) % t == 0 && c.kvHeadsAt(l) % t == 0;
        if (divides)
            out.push_back(t);
    }
    return out;
}

namespace {

struct Names
{
    std::string prefix;      // class-name prefix: "Llama", "Qwen3Moe", "Llama4Text"
    std::string model;       // base model class
    std::string embedding = "Embedding";
    std::string moe;         // sparse block class
    std::string router;
};

Names namesFor(Family f)
{
    switch (f) {
    case Family::Llama: return {"Llama", "LlamaModel"};
    case Family::Mistral: return {"Mistral", "MistralModel"};
    case Family::Qwen2: return {"Qwen2", "Qwen2Model"};
    case Family::Qwen3: return {"Qwen3", "Qwen3Model"};
    case Family::Gemma2: return {"Gemma2", "Gemma2Model", "Gemma2TextScaledWordEmbedding"};
    case Family::Gemma3: return {"Gemma3", "Gemma3TextModel", "Gemma3TextScaledWordEmbedding"};
    case Family::Phi3: return {"Phi3", "Phi3Model"};
    case Family::Mixtral: return {"Mixtral", "MixtralModel", "Embedding", "MixtralSparseMoeBlock", "MixtralTopKRouter"};
    case Family::Qwen3Moe:
        return {"Qwen3Moe", "Qwen3MoeModel", "Embedding", "Qwen3MoeSparseMoeBlock", "Qwen3MoeTopKRouter"};
    case Family::DeepseekV3:
        return {"DeepseekV3", "DeepseekV3Model", "Embedding", "DeepseekV3MoE", "DeepseekV3TopkRouter"};
    case Family::GptOss: return {"GptOss", "GptOssModel", "Embedding", "GptOssMLP", "GptOssTopKRouter"};
    case Family::Llama4: return {"Llama4Text", "Llama4TextModel", "Embedding", "Llama4TextMoe", "Llama4Router"};
    case Family::Unknown: break;
    }
    return {"", ""};
}

// Calls f on each part of `text` between separators (the layout strings' lists and paths).
template <class F>
void forEachPart(std::string_view text, char separator, F&& f)
{
    while (!text.empty()) {
        const std::size_t at = text.find(separator);
        f(text.substr(0, at));
        text = at == std::string_view::npos ? std::string_view{} : text.substr(at + 1);
    }
}

// "a=b,c=d" into pairs (LayerLayout::renames); a malformed pair is skipped.
std::map<std::string, std::string> parseRenames(const char* text)
{
    std::map<std::string, std::string> out;
    forEachPart(text ? text : "", ',', [&](std::string_view pair) {
        if (const std::size_t eq = pair.find('='); eq != std::string_view::npos)
            out.emplace(std::string(pair.substr(0, eq)), std::string(pair.substr(eq + 1)));
    });
    return out;
}

// A module's own name under LayerLayout::renames, given its parent's template name.
std::string renamed(const std::map<std::string, std::string>& renames, const std::string& parent, const std::string& name)
{
    if (renames.empty())
        return name;
    if (auto it = renames.find(parent + "." + name); it != renames.end())
        return it->second;
    if (auto it = renames.find(name); it != renames.end())
        return it->second;
    return name;
}

class TreeBuilder
{
public:
    TreeBuilder(ModelSpec& spec, DType dtype, const char* renames = nullptr)
        : m_spec(spec)
        , m_dtype(dtype)
        , m_renames(parseRenames(renames))
    {
    }

    int add(int parent, const std::string& name, std::string className, ModuleKind kind, int layer = -1)
    {
        ModuleSpec m;
        m.name = renamed(m_renames, parent >= 0 ? m_template[static_cast<std::size_t>(parent)] : std::string(), name);
        m_template.push_back(name);
        if (parent >= 0) {
            const auto& pp = m_spec.modules[static_cast<std::size_t>(parent)].path;
            m.path = pp.empty() ? m.name : pp + "." + m.name;
        }
        m.className = std::move(className);
        m.kind = kind;
        m.parent = parent;
        m.layer = layer;
        const int idx = static_cast<int>(m_spec.modules.size());
        m_spec.modules.push_back(std::move(m));
        if (parent >= 0)
            m_spec.modules[static_cast<std::size_t>(parent)].children.push_back(idx);
        return idx;
    }

    ParamSpec& param(int module, std::string name, std::vector<std::int64_t> shape, DType dtype)
    {
        ParamSpec p;
        // A parameter renamed by ".name=to" (LFM2-MoE's expert_bias is DeepSeek's e_score_correction_bias).
        const auto it = m_renames.find("." + name);
        p.name = it == m_renames.end() ? std::move(name) : it->second;
        p.shape = std::move(shape);
        p.dtype = dtype;
        auto& params = m_spec.modules[static_cast<std::size_t>(module)].params;
        params.push_back(std::move(p));
        return params.back();
    }
    ParamSpec& param(int module, std::string name, std::vector<std::int64_t> shape)
    {
        return param(module, std::move(name), std::move(shape), m_dtype);
    }

    int linear(int parent, const std::string& name, std::int64_t out, std::int64_t in, bool bias, int layer)
    {
        int m = add(parent, name, "Linear", ModuleKind::Linear, layer);
        param(m, "weight", {out, in});
        if (bias)
            param(m, "bias", {out});
        return m;
    }

    int norm(int parent, const std::string& name, std::int64_t dim, const std::string& cls, int layer)
    {
        int m = add(parent, name, cls, ModuleKind::RmsNorm, layer);
        param(m, "weight", {dim});
        return m;
    }

    // A norm of the residual stream, with the parameters the model type's layout gives it.
    int layerNorm(int parent, const std::string& name, std::int64_t dim, const std::string& cls, int layer,
                  LayerLayout::NormParams params)
    {
        int m = add(parent, name, cls, ModuleKind::RmsNorm, layer);
        if (params != LayerLayout::NormParams::None)
            param(m, "weight", {dim});
        if (params == LayerLayout::NormParams::WeightAndBias)
            param(m, "bias", {dim});
        return m;
    }

    ModuleSpec& at(int i) { return m_spec.modules[static_cast<std::size_t>(i)]; }

    // The child of `parent` named `name` (after renames), or -1.
    int child(int parent, const std::string& name) const
    {
        for (int c : m_spec.modules[static_cast<std::size_t>(parent)].children)
            if (m_spec.modules[static_cast<std::size_t>(c)].name == name)
                return c;
        return -1;
    }

private:
    ModelSpec& m_spec;
    DType m_dtype;
    std::map<std::string, std::string> m_renames;
    std::vector<std::string> m_template; // each module's name in the template's tree
};

// One dimension of LayerLayout::extras: an integer, a size symbol, or their product ("2S"); -1 when
// it reads as neither.
std::int64_t extraDim(std::string_view d, const ModelConfig& c, int layer)
{
    std::int64_t k = 1;
    std::size_t i = 0;
    if (i < d.size() && d[i] >= '0' && d[i] <= '9') {
        k = 0;
        for (; i < d.size() && d[i] >= '0' && d[i] <= '9'; ++i)
            k = k * 10 + (d[i] - '0');
    }
    const std::string_view sym = d.substr(i);
    const std::pair<std::string_view, std::int64_t> sizes[] = {
        {"", 1}, {"H", c.hiddenSize}, {"hd", c.headDimAt(layer)}, {"nh", c.headsAt(layer)}, {"kv", c.kvHeadsAt(layer)},
        {"Q", c.headsAt(layer) * c.headDimAt(layer)}, {"kvd", c.kvHeadsAt(layer) * c.headDimAt(layer)}, {"rq", c.headsAt(layer) * c.dRel},
        {"dr", c.dRel}, {"rx", c.slidingLayer(layer) ? c.slidingWindow.value_or(0) : c.relExtent}, {"K", c.convKernel},
        {"I", c.intermediateSize}, {"S", c.sharedIntermediateSize}, {"E", c.numExperts}, {"xq", c.indexHeads * c.indexHeadDim},
        {"xd", c.indexHeadDim}, {"xn", c.indexHeads}, {"xqk", (c.indexHeads + c.indexKvHeads) * c.indexHeadDim}, {"qr", c.mlaAt(layer).qLoraRank.value_or(0)}};
    for (const auto& [name, v] : sizes)
        if (sym == name)
            return k * v;
    return -1;
}

// LayerLayout::extras under one decoder layer; the text is the source's own (config.cpp), so a
// malformed entry is a programming error that tst_model's fixtures catch, and is skipped here.
void buildExtras(TreeBuilder& b, const ModelConfig& c, int layerModule, int layer)
{
    forEachPart(c.layout.extras ? c.layout.extras : "", ';', [&](std::string_view group) {
        if (const std::size_t q = group.find('?'); q != std::string_view::npos) { // "type?…": that layer type's only
            const std::string_view type = group.substr(0, q);
            const auto l = static_cast<std::size_t>(layer);
            const bool match = type == "sparse" ? c.isMoeLayer(layer)
                             : type == "dense"  ? !c.isMoeLayer(layer)
                                                : (l < c.layerTypes.size() && c.layerTypes[l] == type)
                                                      || (l < c.indexerTypes.size() && c.indexerTypes[l] == type);
            if (!match)
                return;
            group.remove_prefix(q + 1);
        }
        const std::size_t colon = group.find(':');
        if (colon == std::string_view::npos)
            return;
        // The parameters first, so a module with a zero dimension is not made at all.
        std::vector<std::pair<std::string, std::vector<std::int64_t>>> params;
        bool empty = false;
        for (std::string_view p = group.substr(colon + 1); !p.empty();) {
            const std::size_t open = p.find('['), close = p.find(']');
            if (open == std::string_view::npos || close == std::string_view::npos || close < open)
                break;
            std::vector<std::int64_t> shape;
            forEachPart(p.substr(open + 1, close - open - 1), ',', [&](std::string_view d) {
                shape.push_back(extraDim(d, c, layer));
                empty = empty || shape.back() <= 0;
            });
            params.emplace_back(std::string(p.substr(0, open)), std::move(shape));
            p = p.substr(close + 1);
            if (!p.empty() && p.front() == ',')
                p.remove_prefix(1);
        }
        if (empty || params.empty())
            return;
        int m = layerModule;
        const std::string_view path = group.substr(0, colon);
        forEachPart(path, '.', [&](std::string_view part) {
            const std::string name(part);
            int next = b.child(m, name);
            if (next < 0) {
                const bool last = part.end() == path.end();
                const bool linear = last && params.size() <= 2 && params[0].first == "weight" && params[0].second.size() == 2;
                next = b.add(m, name, linear ? "Linear" : "Module", linear ? ModuleKind::Linear : ModuleKind::Other, layer);
            }
            m = next;
        });
        for (auto& [name, shape] : params) {
            const bool buffer = name.starts_with('~');
            b.param(m, name.substr(buffer ? 1 : 0), std::move(shape)).buffer = buffer;
        }
    });
}

// An RMSNorm whose weight stays f32 whatever the model's dtype (DeepSeek-V4's _keep_in_fp32_modules_strict).
void normF32(TreeBuilder& b, int parent, const std::string& name, std::int64_t dim, const std::string& cls, int layer)
{
    b.param(b.add(parent, name, cls, ModuleKind::RmsNorm, layer), "weight", {dim}, DType::F32);
}

// DeepSeek-V4's attention (LayerLayout::compressedAttention) under module `a`, and its compressor on compressed layers.
void buildCompressedAttention(TreeBuilder& b, const ModelConfig& c, const Names& n, int a, int layer)
{
    const std::int64_t H = c.hiddenSize, hd = c.headDim, heads = c.numHeads, qr = *c.qLoraRank;
    const std::string norm = n.prefix + "RMSNorm", unweighted = n.prefix + "UnweightedRMSNorm";
    b.linear(a, "q_a_proj", qr, H, false, layer);
    normF32(b, a, "q_a_norm", qr, norm, layer);
    b.linear(a, "q_b_proj", heads * hd, qr, false, layer);
    b.add(a, "q_b_norm", unweighted, ModuleKind::Other, layer);
    b.linear(a, "kv_proj", hd, H, false, layer);
    normF32(b, a, "kv_norm", hd, norm, layer);
    b.at(b.linear(a, "o_a_proj", c.oGroups * c.oLoraRank, heads * hd / c.oGroups, false, layer)).className = n.prefix + "GroupedLinear";
    b.linear(a, "o_b_proj", H, c.oGroups * c.oLoraRank, false, layer);
    b.param(a, "sinks", {heads}, DType::F32);
    const std::string& type = c.layerTypes[static_cast<std::size_t>(layer)];
    if (type == "sliding_attention")
        return;
    // A compressor: kv_proj and gate_proj (the softmax weights within a window), a position bias per window slot, kv_norm;
    // the compressed sparse one's projections are twice as wide (two overlapping windows) and it has an indexer.
    auto compressor = [&](int parent, const char* name, const std::string& cls, std::int64_t dim, std::int64_t rate, bool overlap) {
        const int m = b.add(parent, name, cls, ModuleKind::Other, layer);
        const std::int64_t width = overlap ? 2 * dim : dim;
        b.linear(m, "kv_proj", width, H, false, layer);
        b.linear(m, "gate_proj", width, H, false, layer);
        b.param(m, "position_bias", {rate, width}, DType::F32);
        normF32(b, m, "kv_norm", dim, norm, layer);
        b.add(m, "rotary_emb", n.prefix + "RotaryEmbedding", ModuleKind::RotaryEmbedding, layer);
        return m;
    };
    if (type == "heavily_compressed_attention") {
        compressor(a, "compressor", n.prefix + "HCACompressor", hd, c.compressRateHca, false);
        return;
    }
    const int m = compressor(a, "compressor", n.prefix + "CSACompressor", hd, c.compressRateCsa, true);
    const int indexer = compressor(m, "indexer", n.prefix + "Indexer", c.indexHeadDim, c.compressRateCsa, true);
    b.linear(indexer, "q_b_proj", c.indexHeads * c.indexHeadDim, qr, false, layer);
    b.linear(b.add(indexer, "scorer", n.prefix + "IndexerScorer", ModuleKind::Other, layer), "weights_proj", c.indexHeads, H, false, layer);
}

void buildAttention(TreeBuilder& b, const ModelConfig& c, const Names& n, int layerModule, int layer, const std::string& name = "self_attn")
{
    const std::int64_t H = c.hiddenSize, hd = c.headDimAt(layer), heads = c.headsAt(layer), q = heads * hd, kv = c.kvHeadsAt(layer) * hd;
    const std::int64_t v = c.kvHeadsAt(layer) * c.valueHeadDimAt(layer);
    const bool shared = c.kvSharedAt(layer); // Gemma 4: keys and values from an earlier layer
    const std::string norm = n.prefix + "RMSNorm";
    int a = b.add(layerModule, name, n.prefix + "Attention", ModuleKind::Attention, layer);
    if (c.layout.compressedAttention)
        return buildCompressedAttention(b, c, n, a, layer);
    switch (c.family) {
    case Family::Phi3:
        b.linear(a, "o_proj", H, q, false, layer);
        b.linear(a, "qkv_proj", q + 2 * kv, H, false, layer);
        return;
    case Family::DeepseekV3: {
        if (!c.isMla())
            break;
        const ModelConfig::MlaSizes m = c.mlaAt(layer);
        const std::int64_t qkHead = m.qkNopeHeadDim + m.qkRopeHeadDim;
        if (m.qLoraRank) {
            b.linear(a, "q_a_proj", *m.qLoraRank, H, c.attentionBias, layer);
            b.norm(a, "q_a_layernorm", *m.qLoraRank, norm, layer);
            if (c.layout.mlaQueryGate)
                b.linear(a, "q_gate_proj", heads * (qkHead + m.vHeadDim), 2 * *m.qLoraRank, false, layer);
            else
                b.linear(a, "q_b_proj", heads * qkHead, *m.qLoraRank, false, layer);
        } else {
            b.linear(a, "q_proj", heads * qkHead, H, false, layer);
        }
        b.linear(a, "kv_a_proj_with_mqa", m.kvLoraRank + m.qkRopeHeadDim, H, c.attentionBias, layer);
        b.norm(a, "kv_a_layernorm", m.kvLoraRank, norm, layer);
        b.linear(a, "kv_b_proj", heads * (m.qkNopeHeadDim + m.vHeadDim), m.kvLoraRank, false, layer);
        b.linear(a, "o_proj", H, heads * m.vHeadDim, c.attentionBias, layer);
        if (c.layout.mlaRopeNorm)
            b.norm(a, "k_rope_only_layernorm", m.qkRopeHeadDim, norm, layer);
        if (c.sinksAt(layer)) // HY-V4 keeps them in f32 (_keep_in_fp32_modules_strict)
            b.param(a, "sinks", {heads}, DType::F32);
        if (c.layout.outputGate)
            b.linear(a, c.layout.outputGate, c.gatePerHead ? heads : heads * m.vHeadDim, H, false, layer);
        return;
    }
    default: break;
    }
    if (c.sinksAt(layer))
        b.param(a, "sinks", {heads});
    const bool always = c.layout.alwaysAttentionBias;
    const bool qkvBias = c.attentionBias || c.layout.qkvBias || always;
    // Qwen2's biases are on q/k/v only; llama-style attention_bias covers o_proj too.
    const bool oBias =
        always || c.attentionOutBias.value_or(c.attentionBias && c.family != Family::Qwen2 && c.layout.attentionBiasOnO);
    if (c.layout.fusedQkv) {
        b.linear(a, "qkv_proj", q + 2 * kv, H, qkvBias, layer);
    } else {
        b.linear(a, "q_proj", c.layout.gatedQuery ? 2 * q : q, H, qkvBias, layer);
        if (!shared)
            b.linear(a, "k_proj", kv, H, qkvBias, layer);
        if (!shared && !c.valuesAreKeys(layer))
            b.linear(a, "v_proj", v, H, qkvBias, layer);
    }
    b.linear(a, "o_proj", H, c.layout.oProjFromHidden ? H : heads * c.valueHeadDimAt(layer), oBias, layer);
    if (c.layout.outputGate)
        b.linear(a, c.layout.outputGate, c.gatePerHead ? heads : q, H, false, layer);
    if (c.layout.dynamicMask) {
        b.param(a, "A", {c.kvHeadsAt(layer)});
        b.linear(a, "dt_proj", c.kvHeadsAt(layer), v, qkvBias, layer);
    }
    using Q = LayerLayout::QkNorm;
    using P = LayerLayout::NormParams; // norms without parameters have q/k norms without them (nanochat)
    const P qkParams = c.layout.normParams == P::None ? P::None : P::Weight;
    if (c.layout.qkNorm == Q::Whole) {
        b.layerNorm(a, "q_norm", q, norm, layer, qkParams);
        b.layerNorm(a, "k_norm", kv, norm, layer, qkParams);
    } else if (c.layout.qkNorm == Q::PerHead
               || (c.layout.qkNorm == Q::Family
                   && (c.family == Family::Qwen3 || c.family == Family::Qwen3Moe || c.family == Family::Gemma3))) {
        b.layerNorm(a, "q_norm", hd, norm, layer, qkParams);
        if (!shared)
            b.layerNorm(a, "k_norm", hd, norm, layer, qkParams);
    }
    if (c.layout.altUp && !shared) // Gemma 3n: an RMSNorm of the values without a weight
        b.add(a, "v_norm", norm, ModuleKind::RmsNorm, layer);
}

// Gemma 4's experts beside the layer's MLP: a router (a scale per channel and per expert around its proj), the
// experts, and their norms.
void buildGemma4Experts(TreeBuilder& b, const ModelConfig& c, const Names& n, int layerModule, int layer)
{
    const std::int64_t H = c.hiddenSize, E = c.numExperts, I = c.moeIntermediateSize;
    int r = b.add(layerModule, "router", n.prefix + "Router", ModuleKind::Other, layer);
    b.at(b.linear(r, "proj", E, H, false, layer)).kind = ModuleKind::Router;
    b.param(r, "scale", {H});
    b.param(r, "per_expert_scale", {E});
    int e = b.add(layerModule, "experts", n.prefix + "Experts", ModuleKind::Experts, layer);
    b.param(e, "gate_up_proj", {E, 2 * I, H});
    b.param(e, "down_proj", {E, H, I});
    for (const char* name : {"post_feedforward_layernorm_1", "post_feedforward_layernorm_2", "pre_feedforward_layernorm_2"})
        b.norm(layerModule, name, H, n.prefix + "RMSNorm", layer);
}

// Gemma 4's per-layer input: gate (H → per-layer width), its projection back and a norm.
void buildPerLayerInput(TreeBuilder& b, const ModelConfig& c, const Names& n, int layerModule, int layer)
{
    const std::int64_t H = c.hiddenSize, P = c.perLayerInputSize;
    b.linear(layerModule, "per_layer_input_gate", P, H, false, layer);
    b.linear(layerModule, "per_layer_projection", H, P, false, layer);
    b.norm(layerModule, "post_per_layer_input_norm", H, n.prefix + "RMSNorm", layer);
}

// LayerLayout::mixer in place of attention, with Transformers' parameter shapes.
void buildMixer(TreeBuilder& b, const ModelConfig& c, const Names& n, int layerModule, int layer)
{
    using M = LayerLayout::Mixer;
    const MixerSizes& m = c.mixer;
    const std::int64_t H = c.hiddenSize;
    const char* cls = c.layout.mixer == M::Mamba1 || c.layout.mixer == M::Mamba2 ? "MambaMixer"
                    : c.layout.mixer == M::ShortConv                             ? "ShortConv"
                    : c.layout.mixer == M::Lightning                             ? "LightningAttention"
                    : c.layout.mixer == M::KimiDelta || c.layout.mixer == M::KimiDeltaFull ? "DeltaAttention"
                                                                                 : "GatedDeltaNet";
    int x = b.add(layerModule, c.layout.mixerName, n.prefix + cls, ModuleKind::Other, layer);
    auto conv = [&](const char* name, std::int64_t channels, bool bias) {
        int k = b.add(x, name, "Conv1d", ModuleKind::Other, layer);
        b.param(k, "weight", {channels, 1, m.kernel});
        if (bias)
            b.param(k, "bias", {channels});
    };
    switch (c.layout.mixer) {
    case M::None: break;
    case M::GatedDeltaNet:
    case M::GatedDeltaNetSplit:
    case M::GatedDeltaNetOwn: {
        const std::int64_t key = m.keyHeads * m.keyDim, value = m.heads * m.valueDim;
        b.param(x, "dt_bias", {m.heads});
        b.param(x, "A_log", {m.heads});
        conv("conv1d", 2 * key + value, false);
        if (c.layout.mixer == M::GatedDeltaNet) {
            b.linear(x, "in_proj_qkvz", 2 * key + 2 * value, H, false, layer);
            b.linear(x, "in_proj_ba", 2 * m.heads, H, false, layer);
        } else if (c.layout.mixer == M::GatedDeltaNetOwn) { // OLMo-Hybrid: every projection its own, o_proj, o_norm
            for (auto [name, rows] : {std::pair{"q_proj", key}, {"k_proj", key}, {"v_proj", value}, {"a_proj", m.heads},
                                      {"b_proj", m.heads}, {"g_proj", value}})
                b.linear(x, name, rows, H, false, layer);
            b.norm(x, "o_norm", m.valueDim, n.prefix + "RMSNormGated", layer);
            b.linear(x, mixerOutName(c.layout.mixer), H, value, false, layer);
            break;
        } else {
            b.linear(x, "in_proj_qkv", 2 * key + value, H, false, layer);
            b.linear(x, "in_proj_z", value, H, false, layer);
            b.linear(x, "in_proj_b", m.heads, H, false, layer);
            b.linear(x, "in_proj_a", m.heads, H, false, layer);
        }
        b.norm(x, "norm", m.valueDim, n.prefix + "RMSNormGated", layer);
        b.linear(x, "out_proj", H, value, false, layer);
        break;
    }
    case M::Mamba1: // in_proj [x; z], x_proj → [dt; B; C] (each normed), dt_proj, A [inner, state], D
        conv("conv1d", m.inner, m.convBias);
        b.linear(x, "in_proj", 2 * m.inner, H, m.projBias, layer);
        b.linear(x, "x_proj", m.dtRank + 2 * m.state, m.inner, false, layer);
        b.linear(x, "dt_proj", m.inner, m.dtRank, true, layer);
        b.param(x, "A_log", {m.inner, m.state});
        b.param(x, "D", {m.inner});
        b.linear(x, "out_proj", H, m.inner, m.outBias, layer);
        b.norm(x, "dt_layernorm", m.dtRank, n.prefix + "RMSNorm", layer);
        b.norm(x, "b_layernorm", m.state, n.prefix + "RMSNorm", layer);
        b.norm(x, "c_layernorm", m.state, n.prefix + "RMSNorm", layer);
        break;
    case M::Mamba2: {
        const std::int64_t convDim = m.inner + 2 * m.groups * m.state;
        conv("conv1d", convDim, m.convBias);
        b.linear(x, "in_proj", m.inner + convDim + m.heads, H, m.projBias, layer);
        b.param(x, "dt_bias", {m.heads});
        b.param(x, "A_log", {m.heads});
        if (m.norm)
            b.norm(x, "norm", m.inner, n.prefix + "RMSNormGated", layer);
        b.param(x, "D", {m.heads});
        b.linear(x, "out_proj", H, m.inner, m.outBias, layer);
        break;
    }
    case M::Lightning: { // qkv_proj, output_gate, a norm over all heads, out_proj; the decays are buffers
        const std::int64_t inner = m.heads * m.valueDim;
        b.norm(x, "norm", inner, n.prefix + "RMSNorm", layer);
        b.linear(x, "qkv_proj", 3 * inner, H, false, layer);
        b.linear(x, "out_proj", H, inner, false, layer);
        b.linear(x, "output_gate", inner, H, false, layer);
        for (auto [name, shape] : {std::pair<const char*, std::vector<std::int64_t>>{"slope_rate", {m.heads, 1, 1}},
                                   {"query_decay", {m.heads, m.block, 1}},
                                   {"key_decay", {m.heads, m.block, 1}},
                                   {"diagonal_decay", {1, m.heads, m.block, m.block}}})
            b.param(x, name, std::move(shape)).buffer = true;
        break;
    }
    case M::KimiDelta:
    case M::KimiDeltaFull: { // q/k/v_proj and one conv over them, a forget gate, b_proj, an output gate, o_norm per head
        const std::int64_t qkv = m.heads * m.valueDim;
        for (const char* name : {"q_proj", "k_proj", "v_proj"})
            b.linear(x, name, qkv, H, false, layer);
        conv("conv1d", 3 * qkv, false);
        int f = b.add(x, "forget_gate", n.prefix + "ForgetGate", ModuleKind::Other, layer);
        if (c.layout.mixer == M::KimiDelta) { // low rank: H → head_dim → q/k/v width
            b.linear(f, "f_a_proj", m.valueDim, H, false, layer);
            b.linear(f, "f_b_proj", qkv, m.valueDim, false, layer);
            b.param(f, "A_log", {1, 1, m.heads, 1});
        } else {
            b.linear(f, "f_proj", qkv, H, false, layer);
            b.param(f, "A_log", {m.heads}, DType::F32);
        }
        b.param(f, "dt_bias", {qkv}, DType::F32);
        b.linear(x, "b_proj", m.heads, H, false, layer);
        if (c.layout.mixer == M::KimiDelta) {
            b.linear(x, "g_a_proj", m.valueDim, H, false, layer);
            b.linear(x, "g_b_proj", qkv, m.valueDim, false, layer);
        } else {
            b.linear(x, "g_proj", qkv, H, false, layer);
        }
        b.norm(x, "o_norm", m.valueDim, n.prefix + "RMSNormGated", layer);
        b.linear(x, mixerOutName(c.layout.mixer), H, qkv, false, layer);
        break;
    }
    case M::ShortConv:
        conv("conv", H, m.convBias);
        b.linear(x, "in_proj", 3 * H, H, m.convBias, layer);
        b.linear(x, "out_proj", H, H, m.convBias, layer);
        break;
    }
}

void buildGatedMlp(TreeBuilder& b, int parent, const std::string& name, const std::string& cls, std::int64_t H,
                   std::int64_t I, bool bias, int layer)
{
    int m = b.add(parent, name, cls, ModuleKind::Mlp, layer);
    b.linear(m, "gate_proj", I, H, bias, layer);
    b.linear(m, "up_proj", I, H, bias, layer);
    b.linear(m, "down_proj", H, I, bias, layer);
}

// up → act → down under the layout's names (Arcee, Nemotron-H).
void buildUngatedMlp(TreeBuilder& b, const ModelConfig& c, int parent, const std::string& name, const std::string& cls, std::int64_t I,
                     int layer)
{
    int m = b.add(parent, name, cls, ModuleKind::Mlp, layer);
    const bool bias = c.mlpBias || c.layout.alwaysMlpBias;
    b.linear(m, c.layout.upName, I, c.hiddenSize, bias, layer);
    b.linear(m, c.layout.downName, c.hiddenSize, I, bias, layer);
}

void buildMoe(TreeBuilder& b, const ModelConfig& c, const Names& n, int layerModule, int layer)
{
    const std::int64_t H = c.hiddenSize, E = c.numExperts, I = c.moeIntermediateSize;
    const std::string blockName = c.layout.ffnBlock ? c.layout.ffnBlock : c.family == Family::Llama4 ? "feed_forward" : "mlp";
    int moe = b.add(layerModule, blockName, n.moe, ModuleKind::Moe, layer);
    const std::int64_t R = E + c.zeroExperts; // the router scores LongCat-Flash's zero experts too
    const std::int64_t scored = R + (c.layout.inkling ? c.numSharedExperts : 0); // …and Inkling's shared experts
    auto router = [&](const char* name, bool bias) {
        const char* wg = c.layout.routerLinear;
        const int outer = b.add(moe, c.layout.router ? c.layout.router : name, n.router, wg ? ModuleKind::Other : ModuleKind::Router, layer);
        const int r = wg ? b.add(outer, wg, "Linear", ModuleKind::Router, layer) : outer;
        if (c.layout.routerF32)
            b.param(r, "weight", {scored, H}, DType::F32);
        else
            b.param(r, "weight", {scored, H});
        if (bias)
            b.param(r, "bias", {R});
        using SB = LayerLayout::ScoreBias;
        // DeepSeek-V4's hash_moe layers pick experts by token id (tid2eid [vocab, top-k]), without a score bias.
        const bool hash = static_cast<std::size_t>(layer) < c.routerTypes.size() && c.routerTypes[static_cast<std::size_t>(layer)] == "hash_moe";
        if (hash) {
            b.at(outer).className = n.prefix + "HashRouter";
            b.param(outer, "tid2eid", {c.vocabSize, c.expertsPerToken}, DType::I64).buffer = true;
        }
        // The score bias sits on the router module: f32, or (a child projection's router, LongCat-Flash) the model's dtype.
        if (!hash && ((c.family == Family::DeepseekV3 && c.layout.scoreBias == SB::Family) || c.layout.scoreBias == SB::Router))
            b.param(outer, "e_score_correction_bias", {R}, wg ? c.dtype : DType::F32).buffer = !c.layout.scoreBiasParam;
        if (c.layout.scoreBias == SB::Statics) // a parameter, not a buffer
            b.param(b.add(r, "moe_statics", n.prefix + "Statics", ModuleKind::Other, layer), "e_score_correction_bias", {1, E}, DType::F32);
    };
    const std::int64_t X = c.moeLatentSize > 0 ? c.moeLatentSize : H; // the experts' input and output width
    auto experts = [&] {
        int e = b.add(moe, "experts", n.prefix + "Experts", ModuleKind::Experts, layer);
        if (!c.layout.gatedMlp) { // up → act → down (Nemotron-H)
            b.param(e, "up_proj", {E, I, X});
            b.param(e, "down_proj", {E, X, I});
        } else if (expertsLastPacked(c)) {
            // [E, H, 2I] / [E, I, H]: used with bmm, gate/up split on the last dim
            b.param(e, "gate_up_proj", {E, H, 2 * I});
            if (c.family == Family::GptOss)
                b.param(e, "gate_up_proj_bias", {E, 2 * I});
            b.param(e, "down_proj", {E, I, H});
            if (c.family == Family::GptOss)
                b.param(e, "down_proj_bias", {E, H});
        } else {
            // [E, 2I, H] / [E, H, I]: gate is the first half of dim 1; LongCat-Flash's gate_up_proj has rows for its
            // zero experts too, and an identity expert without parameters.
            b.param(e, "gate_up_proj", {R, 2 * I, H});
            b.param(e, "down_proj", {E, H, I});
            if (c.zeroExperts > 0)
                b.add(e, "identity_expert", "Identity", ModuleKind::Other, layer);
        }
    };
    switch (c.family) {
    case Family::Mixtral: router("gate", false); experts(); break;
    case Family::Qwen3Moe:
        experts();
        router("gate", false);
        if (c.layout.inkling) { // the shared experts as stacked parameters, applied to every token
            const int s = b.add(moe, "shared_experts", n.prefix + "SharedExperts", ModuleKind::Experts, layer);
            b.param(s, "gate_proj", {c.numSharedExperts, I, H});
            b.param(s, "up_proj", {c.numSharedExperts, I, H});
            b.param(s, "down_proj", {c.numSharedExperts, H, I});
        } else if (c.layout.shared && c.sharedIntermediateSize > 0 && c.layout.fusedGateUp) { // MiniMax-M3's
            int s = b.add(moe, c.layout.shared, n.prefix + "MLP", ModuleKind::Mlp, layer);
            b.linear(s, "gate_up_proj", 2 * c.sharedIntermediateSize, H, false, layer);
            b.linear(s, "down_proj", H, c.sharedIntermediateSize, false, layer);
        } else if (c.layout.shared && c.sharedIntermediateSize > 0) { // 0: ERNIE 4.5 without shared experts
            buildGatedMlp(b, moe, c.layout.shared, n.prefix + "MLP", H, c.sharedIntermediateSize, false, layer);
            if (c.layout.sharedGate)
                b.linear(moe, std::string(c.layout.shared) + "_gate", 1, H, false, layer);
        }
        break;
    case Family::DeepseekV3:
        experts();
        router("gate", false);
        if (c.sharedIntermediateSize == 0) { // none (LongCat-Flash)
        } else if (c.layout.gatedMlp) {
            buildGatedMlp(b, moe, "shared_experts", "DeepseekV3MLP", H, c.sharedIntermediateSize, false, layer);
        } else {
            buildUngatedMlp(b, c, moe, "shared_experts", n.prefix + "MLP", c.sharedIntermediateSize, layer);
        }
        if (X != H) { // Nemotron-H's latent projections around the routed experts
            b.linear(moe, "fc1_latent_proj", X, H, c.mlpBias, layer);
            b.linear(moe, "fc2_latent_proj", H, X, c.mlpBias, layer);
        }
        break;
    case Family::GptOss: router("router", true); experts(); break;
    case Family::Llama4:
        experts();
        router("router", false);
        buildGatedMlp(b, moe, "shared_expert", "Llama4TextMLP", H, c.sharedIntermediateSize, false, layer);
        break;
    default: break;
    }
    if (c.layout.scoreBias == LayerLayout::ScoreBias::Block)
        b.param(moe, "e_score_correction_bias", {E}, DType::F32).buffer = !c.layout.scoreBiasParam;
}

// Qwen4-Exp's gated residual over the k·H-wide streams: hc_norm, the low-rank input mix and, inside a layer, the block's
// injection weights.
void buildGatedResidual(TreeBuilder& b, const ModelConfig& c, const Names& n, int parent, const char* name, bool inject, int layer)
{
    const std::int64_t streams = c.hcMult * c.hiddenSize;
    const int g = b.add(parent, name, n.prefix + "TextGatedResidual", ModuleKind::Other, layer);
    b.norm(g, "hc_norm", streams, n.prefix + "TextRMSNorm", layer);
    b.linear(g, "input_mix_weight_down", c.hcLowRank, streams, false, layer);
    b.linear(g, "input_mix_weight_up", streams, c.hcLowRank, false, layer);
    if (inject)
        b.linear(g, "block_inject_weight", c.hcMult, streams, false, layer);
}

// Phi-4-multimodal's embed_tokens_extend: the SigLIP image encoder with its pooling head and projections, and the
// Conformer audio encoder (mean/variance input norm, convolutional subsampling, relative-position bias) with its
// projections, as Phi4MultimodalFeatureEmbedding builds them.
void buildPhi4Encoders(TreeBuilder& b, const ModelConfig& c, int model)
{
    const std::int64_t H = c.hiddenSize;
    using NP = LayerLayout::NormParams;
    auto module = [&](int parent, const std::string& name) { return b.add(parent, name, "Module", ModuleKind::Other); };
    auto layerNorm = [&](int parent, const char* name, std::int64_t d) { b.layerNorm(parent, name, d, "LayerNorm", -1, NP::WeightAndBias); };
    auto conv = [&](int parent, const std::string& name, std::vector<std::int64_t> shape) {
        const int m = b.add(parent, name, "Conv", ModuleKind::Other);
        const std::int64_t out = shape[0];
        b.param(m, "weight", std::move(shape));
        b.param(m, "bias", {out});
    };
    const int extend = b.add(model, "embed_tokens_extend", "Phi4MultimodalFeatureEmbedding", ModuleKind::Other);

    const ModelConfig::VisionEncoder& v = c.vision;
    const int image = module(extend, "image_embed");
    const int processor = module(image, "img_processor");
    const int embeddings = module(processor, "embeddings");
    conv(embeddings, "patch_embedding", {v.hidden, v.channels, v.patch, v.patch});
    b.param(b.add(embeddings, "position_embedding", "Embedding", ModuleKind::Other), "weight", {(v.imageSize / v.patch) * (v.imageSize / v.patch), v.hidden});
    const int vlayers = b.add(module(processor, "encoder"), "layers", "ModuleList", ModuleKind::ModuleList);
    auto visionMlp = [&](int parent) {
        const int m = module(parent, "mlp");
        b.linear(m, "fc1", v.intermediate, v.hidden, true, -1);
        b.linear(m, "fc2", v.hidden, v.intermediate, true, -1);
    };
    for (std::int64_t l = 0; l < v.layers; ++l) {
        const int layer = module(vlayers, std::to_string(l));
        layerNorm(layer, "layer_norm1", v.hidden);
        layerNorm(layer, "layer_norm2", v.hidden);
        visionMlp(layer);
        const int attn = module(layer, "self_attn");
        for (const char* p : {"k_proj", "v_proj", "q_proj", "out_proj"})
            b.linear(attn, p, v.hidden, v.hidden, true, -1);
    }
    layerNorm(processor, "post_layernorm", v.hidden);
    const int head = module(processor, "head");
    b.param(head, "probe", {1, 1, v.hidden});
    const int mha = module(head, "attention");
    b.param(mha, "in_proj_weight", {3 * v.hidden, v.hidden});
    b.param(mha, "in_proj_bias", {3 * v.hidden});
    b.linear(mha, "out_proj", v.hidden, v.hidden, true, -1);
    layerNorm(head, "layernorm", v.hidden);
    visionMlp(head);
    b.linear(image, "img_projection_up", H, v.hidden, true, -1);
    b.linear(image, "img_projection_down", H, H, true, -1);
    b.param(image, "global_img_feature_extensor", {1, 1, v.hidden});
    b.param(image, "sub_img_feature_extensor", {1, 1, 1, v.hidden});

    const ModelConfig::AudioEncoder& a = c.audio;
    const int audio = module(extend, "audio_embed");
    const int encoder = module(audio, "encoder");
    const int norm = module(encoder, "encoder_embedding");
    for (const char* p : {"global_mean", "global_invstd"})
        b.param(norm, p, {a.inputSize}).buffer = true;
    const int embed = module(encoder, "embed");
    const int convs = b.add(embed, "conv", "Sequential", ModuleKind::Other);
    conv(convs, "0", {a.convChannels, 1, 3, 3});
    int index = 2; // after each convolution stage, its activation
    for (std::int64_t t = a.timeReduction; t >= 4; t /= 2, index += 3) { // log2(time_reduction) - 1 more stages
        conv(convs, std::to_string(index), {a.convChannels, 1, 3, 3});
        conv(convs, std::to_string(index + 1), {a.convChannels, a.convChannels, 1, 1});
    }
    b.linear(embed, "out", a.hidden, a.convChannels * a.finalSize, true, -1);
    b.param(b.add(module(encoder, "relative_attention_bias_layer"), "bias_values", "Embedding", ModuleKind::Other), "weight",
            {a.biasBuckets, a.heads});
    const int blocks = b.add(encoder, "encoders", "ModuleList", ModuleKind::ModuleList);
    auto feedForward = [&](int parent, const char* name) {
        const int m = module(parent, name);
        layerNorm(m, "layer_norm", a.hidden);
        b.linear(m, "gate_up_proj", 2 * a.intermediate, a.hidden, true, -1);
        b.linear(m, "down_proj", a.hidden, a.intermediate, true, -1);
    };
    for (std::int64_t l = 0; l < a.blocks; ++l) {
        const int block = module(blocks, std::to_string(l));
        feedForward(block, "feed_forward_in");
        const int attn = module(block, "self_attn");
        for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"})
            b.linear(attn, p, a.hidden, a.hidden, true, -1);
        const int convModule = module(block, "conv");
        layerNorm(convModule, "layer_norm", a.hidden);
        const int glu = module(convModule, "glu");
        conv(glu, "ext_pw_conv_1d", {2 * a.extPwOut, a.hidden, 1});
        b.param(glu, "b1", {1, a.extPwOut, 1});
        b.param(glu, "b2", {1, a.extPwOut, 1});
        const int separable = module(convModule, "dw_sep_conv_1d");
        conv(separable, "dw_conv", {a.hidden * a.depthwiseMultiplier, 1, a.kernel});
        conv(separable, "pw_conv", {a.depthwiseOut, a.hidden * a.depthwiseMultiplier, 1});
        conv(convModule, "ext_pw_conv_1d", {a.extPwOut, a.hidden, 1});
        feedForward(block, "feed_forward_out");
        layerNorm(block, "layer_norm_att", a.hidden);
        layerNorm(block, "layer_norm", a.hidden);
    }
    for (const char* kind : {"speech", "vision_speech"}) {
        b.linear(audio, fmt::format("up_proj_for_{}", kind), H, a.hidden * a.downsample, true, -1);
        b.linear(audio, fmt::format("down_proj_for_{}", kind), H, H, true, -1);
    }
}

// Inkling 2's depth attention over the block states: learned f32 queries, `shape` of them, and an unweighted norm.
void buildBlockAttention(TreeBuilder& b, const Names& n, int parent, const char* name, std::vector<std::int64_t> shape, int layer,
                         const char* cls = "BlockAttentionResidual")
{
    const int m = b.add(parent, name, n.prefix + cls, ModuleKind::Other, layer);
    b.param(m, "query", std::move(shape), DType::F32);
    b.add(m, "norm", n.prefix + "UnweightedRMSNorm", ModuleKind::Other, layer);
}

// An Inkling 2 decoder layer (LayerLayout::inkling2), as Inkling2SlidingDecoderLayer / Inkling2FullDecoderLayer and
// Inkling 2 Loop's loop layers build it.
void buildInkling2Layer(TreeBuilder& b, const ModelConfig& c, const Names& n, int l, int layer)
{
    const std::int64_t H = c.hiddenSize, K = c.convKernel;
    const bool sliding = c.slidingLayer(layer);
    const std::int64_t heads = c.headsAt(layer), kv = c.kvHeadsAt(layer), hd = c.headDimAt(layer);
    const std::string norm = n.prefix + "RMSNorm";
    if (layer > 0)
        buildBlockAttention(b, n, l, "attention_input", sliding ? std::vector<std::int64_t>{H} : std::vector<std::int64_t>{3, H}, layer);
    buildBlockAttention(b, n, l, "mlp_input", {H}, layer);
    const int a = b.add(l, "self_attn", n.prefix + (sliding ? "SlidingAttention" : "FullAttention"), ModuleKind::Attention, layer);
    // A per-head scale [heads, dim] and an L2 clip, log-scaled with the position on full layers.
    auto scaledClip = [&](int parent, std::int64_t dim) {
        const int m = b.add(parent, "norm", n.prefix + (sliding ? "ScaledL2Clip" : "LogScaledL2Clip"), ModuleKind::Other, layer);
        b.param(m, "scale", {heads, dim});
        if (!sliding) {
            b.add(m, "l2_clip", n.prefix + "L2Clip", ModuleKind::Other, layer);
            b.add(m, "log_scale", n.prefix + "LogScale", ModuleKind::Other, layer);
        }
    };
    const int q = b.add(a, "q_proj", n.prefix + "QueryProjection", ModuleKind::Other, layer);
    b.linear(q, "linear", heads * hd, H, false, layer);
    scaledClip(q, hd);
    for (const char* name : {"k_proj", "v_proj"}) {
        const int m = b.add(a, name, n.prefix + "KeyValueProjection", ModuleKind::Other, layer);
        b.linear(m, "linear", kv * hd, H, false, layer);
        if (sliding) { // a depthwise f32 convolution
            const int conv = b.add(m, "sconv", n.prefix + "ShortConvolution", ModuleKind::Other, layer);
            b.param(b.add(conv, "conv1d", "Conv1d", ModuleKind::Other, layer), "weight", {kv * hd, 1, K}, DType::F32);
        } else { // static taps plus taps per key/value head projected from the input
            const int conv = b.add(m, "sconv", n.prefix + "DynamicShortConvolution", ModuleKind::Other, layer);
            b.param(conv, "static_weight", {K, kv * hd});
            b.linear(conv, "weight_proj", kv * K, H, false, layer);
        }
        b.add(m, "norm", n.prefix + (name == std::string_view("k_proj") ? "L2Clip" : "UnweightedRMSNorm"), ModuleKind::Other, layer);
    }
    const int o = b.add(a, "o_proj", n.prefix + "GatedOutputProjection", ModuleKind::Other, layer);
    b.linear(o, "gate_proj", heads * hd, H, false, layer);
    b.linear(o, "linear", H, heads * hd, false, layer);
    b.linear(a, "sink_proj", heads, H, false, layer);
    const int rel = b.add(a, "relative_position_bias", n.prefix + "RelativePositionBias", ModuleKind::Other, layer);
    b.linear(rel, "linear", heads * c.dRel, H, false, layer);
    scaledClip(rel, c.dRel);
    b.param(rel, "proj", {c.dRel, sliding ? c.slidingWindow.value_or(0) : c.relExtent});
    buildMoe(b, c, n, l, layer);
    for (const char* name : sliding ? std::vector<const char*>{"input_layernorm"}
                                    : std::vector<const char*>{"q_input_layernorm", "k_input_layernorm", "v_input_layernorm"})
        b.norm(l, name, H, norm, layer);
    b.norm(l, "post_attention_layernorm", H, norm, layer);
    for (const char* name : {"post_attention_convolution", "post_mlp_convolution"}) {
        const int conv = b.add(l, name, n.prefix + "ShortConvolution", ModuleKind::Other, layer);
        b.param(b.add(conv, "conv1d", "Conv1d", ModuleKind::Other, layer), "weight", {H, 1, K}, DType::F32);
    }
    if (layer >= c.loopStart && layer < c.loopEnd) // a loop layer's gates mixing in the previous pass's messages
        for (const char* name : {"q_message_gate", "k_message_gate", "v_message_gate", "mlp_message_gate"}) {
            const int g = b.add(l, name, n.prefix + "MessageGate", ModuleKind::Other, layer);
            b.add(g, "norm", n.prefix + "UnweightedRMSNorm", ModuleKind::Other, layer);
            b.linear(g, "down_proj", c.loopGateRank, 2 * H, false, layer);
            for (const char* proj : {"forget_gate_proj", "message_gate_proj"})
                b.param(b.add(g, proj, "Linear", ModuleKind::Linear, layer), "weight", {H, c.loopGateRank}, DType::F32);
        }
}

void buildLayer(TreeBuilder& b, const ModelConfig& c, const Names& n, int layers, int layer)
{
    const std::int64_t H = c.hiddenSize;
    const std::string norm = n.prefix + "RMSNorm";
    int l = b.add(layers, std::to_string(layer), n.prefix + "DecoderLayer", ModuleKind::DecoderLayer, layer);
    if (c.layout.inkling2)
        return buildInkling2Layer(b, c, n, l, layer);
    const auto params = c.layout.normParams;
    auto layerNorm = [&](const char* name) {
        if (!c.gatedNormAt(layer, name))
            return b.layerNorm(l, name, H, norm, layer, params);
        const int g = b.add(l, name, n.prefix + "GatedRMSNorm", ModuleKind::Other, layer);
        b.norm(g, "norm", H, norm, layer);
        const int m = b.add(g, "mlp", n.prefix + "GateMLP", ModuleKind::Other, layer);
        b.linear(m, "fc1", c.gatedNormRank, H, false, layer);
        b.linear(m, "fc2", H, c.gatedNormRank, false, layer);
        return g;
    };
    if (c.layout.dualSublayers) { // LongCat-Flash: lists of two attentions, MLPs and norms of each kind, one MoE
        buildMoe(b, c, n, l, layer);
        for (const char* list : {"self_attn", "mlps", "input_layernorm", "post_attention_layernorm"}) {
            const int m = b.add(l, list, "ModuleList", ModuleKind::ModuleList, layer);
            for (const char* i : {"0", "1"}) {
                if (list == std::string("self_attn"))
                    buildAttention(b, c, n, m, layer, i);
                else if (list == std::string("mlps"))
                    buildGatedMlp(b, m, i, n.prefix + "MLP", H, c.intermediateSize, false, layer);
                else
                    b.norm(m, i, H, norm, layer);
            }
        }
        return;
    }
    if (c.layout.blockPerLayer) { // one block: the mixer, attention or the feed-forward block
        layerNorm("input_layernorm");
        if (c.isMixerLayer(layer))
            buildMixer(b, c, n, l, layer);
        else if (c.layerTypes[static_cast<std::size_t>(layer)] == "full_attention")
            buildAttention(b, c, n, l, layer);
        else if (c.isMoeLayer(layer))
            buildMoe(b, c, n, l, layer);
        else
            buildUngatedMlp(b, c, l, "mlp", n.prefix + "MLP", c.intermediateSize, layer);
        return;
    }
    if (c.isMixerLayer(layer))
        buildMixer(b, c, n, l, layer);
    if (!c.isMixerLayer(layer) || c.layout.parallelMixer)
        buildAttention(b, c, n, l, layer);
    if (c.layout.gemma4) {
        buildGatedMlp(b, l, "mlp", n.prefix + "MLP", H, c.denseIntermediateSizeAt(layer), false, layer);
        if (c.isMoeLayer(layer))
            buildGemma4Experts(b, c, n, l, layer);
        if (c.perLayerInputSize > 0)
            buildPerLayerInput(b, c, n, l, layer);
        b.param(l, "layer_scalar", {1}).buffer = true;
    } else if (c.isMoeLayer(layer)) {
        buildMoe(b, c, n, l, layer);
    } else if (c.layout.noDenseMlp) {
    } else if (c.family == Family::Phi3) {
        int m = b.add(l, "mlp", "Phi3MLP", ModuleKind::Mlp, layer);
        b.linear(m, "gate_up_proj", 2 * c.intermediateSize, H, false, layer);
        b.linear(m, "down_proj", H, c.intermediateSize, false, layer);
    } else if (c.family == Family::Llama4) {
        buildGatedMlp(b, l, "feed_forward", "Llama4TextMLP", H, c.intermediateSizeMlp, false, layer);
    } else if (c.layout.fusedGateUp) {
        int m = b.add(l, "mlp", n.prefix + "MLP", ModuleKind::Mlp, layer);
        b.linear(m, "gate_up_proj", 2 * c.denseIntermediateSize(), H, c.mlpBias, layer);
        b.linear(m, "down_proj", H, c.denseIntermediateSize(), c.mlpBias, layer);
    } else if (!c.layout.gatedMlp) {
        buildUngatedMlp(b, c, l, "mlp", n.prefix + "MLP", c.intermediateSize, layer);
    } else {
        buildGatedMlp(b, l, "mlp", n.prefix + "MLP", H, c.denseIntermediateSizeAt(layer), c.mlpBias, layer);
    }
    using N = LayerLayout::Norms;
    switch (c.layout.mixerPreNorms && c.isMixerLayer(layer) ? N::Pre : c.layout.norms) {
    case N::Pre:
    case N::Peri:
    case N::Sandwich:
        layerNorm("input_layernorm");
        layerNorm("post_attention_layernorm");
        if (c.layout.norms == N::Peri) {
            layerNorm("post_norm1");
            layerNorm("post_norm2");
        } else if (c.layout.norms == N::Sandwich) {
            layerNorm("post_self_attn_layernorm");
            layerNorm("post_mlp_layernorm");
        }
        break;
    case N::Post:
        layerNorm("post_attention_layernorm");
        layerNorm("post_feedforward_layernorm");
        break;
    case N::Parallel: layerNorm("input_layernorm"); break;
    case N::PreFeedforward:
        layerNorm("input_layernorm");
        layerNorm("pre_feedforward_layernorm");
        break;
    case N::Gemma:
        for (const char* name : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"})
            layerNorm(name);
        break;
    case N::None: break;
    }
    if (c.family == Family::Gemma2 || c.family == Family::Gemma3) {
        b.norm(l, "pre_feedforward_layernorm", H, norm, layer);
        b.norm(l, "post_feedforward_layernorm", H, norm, layer);
    }
    if (c.layout.altUp) { // Gemma 3n: AltUp's router and coefficients, LAuReL's low-rank branch, the per-layer input
        const std::int64_t k = c.altUpInputs;
        const int a = b.add(l, "altup", n.prefix + "TextAltUp", ModuleKind::Other, layer);
        b.param(a, "correct_output_scale", {H});
        b.linear(a, "correction_coefs", k, k, false, layer);
        b.linear(a, "prediction_coefs", k * k, k, false, layer);
        b.linear(a, "modality_router", k, H, false, layer);
        b.norm(a, "router_norm", H, norm, layer);
        const int lr = b.add(l, "laurel", n.prefix + "TextLaurelBlock", ModuleKind::Other, layer);
        b.linear(lr, "linear_left", c.laurelRank, H, false, layer);
        b.linear(lr, "linear_right", H, c.laurelRank, false, layer);
        b.norm(lr, "post_laurel_norm", H, norm, layer);
        buildPerLayerInput(b, c, n, l, layer);
    }
    using HC = LayerLayout::HyperConnections;
    if (c.layout.hyperConnections == HC::HyV4 || c.layout.hyperConnections == HC::DeepseekV4) // f32 whatever the model's dtype
        for (const char* name : {"attn_hc", "ffn_hc"}) {
            const bool v4 = c.layout.hyperConnections == HC::DeepseekV4; // pre, post and comb (hc_mult²) weights
            const std::int64_t weights = v4 ? (2 + c.hcMult) * c.hcMult : 2 * c.hcMult;
            const int hc = b.add(l, name, n.prefix + "HyperConnection", ModuleKind::Other, layer);
            if (v4)
                b.add(hc, "input_norm", n.prefix + "UnweightedRMSNorm", ModuleKind::Other, layer);
            b.param(hc, "fn", {weights, c.hcMult * H}, DType::F32);
            b.param(hc, "base", {weights}, DType::F32);
            b.param(hc, "scale", {v4 ? 3 : 2}, DType::F32);
        }
    if (c.layout.compressedAttention) // DeepSeek-V4 keeps its layer norms in f32
        for (const char* name : {"input_layernorm", "post_attention_layernorm"})
            b.at(b.child(l, name)).params[0].dtype = DType::F32;
    if (c.layout.hyperConnections == LayerLayout::HyperConnections::Qwen4)
        for (const char* name : {"attn_hyper_connection", "mlp_hyper_connection"})
            buildGatedResidual(b, c, n, l, name, true, layer);
    buildExtras(b, c, l, layer);
}

// base_model_tp_plan of each family's config class (keys relative to the base model), in order.
std::vector<PlanEntry> baseTpPlan(const ModelConfig& c)
{
    const std::vector<PlanEntry> qkv = {{"layers.*.self_attn.q_proj", "colwise"},
                                        {"layers.*.self_attn.k_proj", "colwise"},
                                        {"layers.*.self_attn.v_proj", "colwise"}};
    const std::vector<PlanEntry> qkNorm = {{"layers.*.self_attn.q_norm", "replicated_with_grad_allreduce"},
                                           {"layers.*.self_attn.k_norm", "replicated_with_grad_allreduce"}};
    const PlanEntry o = {"layers.*.self_attn.o_proj", "rowwise"};
    auto mlp = [](const std::string& p) {
        return std::vector<PlanEntry>{{p + ".gate_proj", "colwise"}, {p + ".up_proj", "colwise"},
                                      {p + ".down_proj", "rowwise"}};
    };
    auto experts = [](const std::string& p) {
        return std::vector<PlanEntry>{{p + ".experts.gate_up_proj", "packed_colwise"},
                                      {p + ".experts.down_proj", "rowwise"},
                                      {p + ".experts", "moe_tp_experts"}};
    };
    std::vector<PlanEntry> plan;
    auto append = [&](const std::vector<PlanEntry>& v) { plan.insert(plan.end(), v.begin(), v.end()); };
    switch (c.family) {
    case Family::Llama:
    case Family::Mistral:
    case Family::Qwen2:
    case Family::Gemma2:
        append(qkv);
        plan.push_back(o);
        append(mlp("layers.*.mlp"));
        break;
    case Family::Qwen3:
    case Family::Gemma3:
        append(qkv);
        append(qkNorm);
        plan.push_back(o);
        append(mlp("layers.*.mlp"));
        break;
    case Family::Phi3:
        plan = {{"layers.*.self_attn.qkv_proj", "colwise_gather_output"},
                {"layers.*.self_attn.o_proj", "rowwise_split_input"},
                {"layers.*.mlp.gate_up_proj", "colwise_gather_output"},
                {"layers.*.mlp.down_proj", "rowwise_split_input"}};
        break;
    case Family::Mixtral:
        append(qkv);
        plan.push_back(o);
        append(experts("layers.*.mlp"));
        break;
    case Family::Qwen3Moe:
        append(qkv);
        append(qkNorm);
        plan.push_back(o);
        append(experts("layers.*.mlp"));
        append(mlp("layers.*.mlp"));
        break;
    case Family::DeepseekV3:
        // As Transformers 5.24 ships it: attention (MLA) is not in the plan.
        append(experts("layers.*.mlp"));
        append(mlp("layers.*.mlp.shared_experts"));
        append(mlp("layers.*.mlp"));
        break;
    case Family::GptOss:
        plan = {{"embed_tokens", "embedding_rowwise"}};
        break;
    case Family::Llama4:
        append(qkv);
        plan.push_back(o);
        append(mlp("layers.*.feed_forward.shared_expert"));
        plan.push_back({"layers.*.feed_forward.experts.gate_up_proj", "packed_rowwise"}); // [E, H, 2D]
        plan.push_back({"layers.*.feed_forward.experts.down_proj", "colwise"});           // [E, D, H]
        plan.push_back({"layers.*.feed_forward.experts", "moe_tp_experts"});
        append(mlp("layers.*.feed_forward"));
        break;
    case Family::Unknown: break;
    }
    return plan;
}

std::vector<PlanEntry> baseEpPlan(const ModelConfig& c)
{
    if (!c.isMoe() || c.family == Family::Llama4)
        return {};
    std::vector<PlanEntry> plan = {{"layers.*.mlp.experts.gate_up_proj", "grouped_gemm"}};
    if (c.family == Family::GptOss)
        plan.push_back({"layers.*.mlp.experts.gate_up_proj_bias", "grouped_gemm"});
    plan.push_back({"layers.*.mlp.experts.down_proj", "grouped_gemm"});
    if (c.family == Family::GptOss)
        plan.push_back({"layers.*.mlp.experts.down_proj_bias", "grouped_gemm"});
    plan.push_back({"layers.*.mlp.experts", "ep_dispatch_experts"});
    return plan;
}

// Dict-update semantics: an existing key keeps its position and takes the new value.
void mergeInto(std::vector<PlanEntry>& plan, const std::vector<PlanEntry>& add, const std::string& prefix)
{
    for (const auto& e : add) {
        const std::string key = prefix + e.key;
        auto it = std::find_if(plan.begin(), plan.end(), [&](const PlanEntry& p) { return p.key == key; });
        if (it != plan.end())
            it->style = e.style;
        else
            plan.push_back({key, e.style});
    }
}

// DistributedMixin.init_parallel_plans, as Transformers resolves `model.tp_plan` for the head class.
std::vector<PlanEntry> planEntries(const std::vector<std::pair<std::string, std::string>>& v)
{
    std::vector<PlanEntry> out;
    for (const auto& [k, style] : v)
        out.push_back({k, style});
    return out;
}

// The base model's plan under its name, with its input embeddings sharded on the vocabulary unless the plan names them,
// merged into the head's (Transformers' init_parallel_plans).
void mergeBasePlan(ModelSpec& s, std::vector<PlanEntry> base, const std::string& baseName, const std::string& embedName)
{
    if (!base.empty() && std::none_of(base.begin(), base.end(), [&](const PlanEntry& e) { return e.key == embedName; }))
        base.insert(base.begin(), {embedName, "embedding_rowwise"});
    mergeInto(s.defaultTpPlan, base, baseName + ".");
}

// DistributedMixin.init_parallel_plans, as Transformers resolves `model.tp_plan` for the head class.
void resolveDefaultPlans(ModelSpec& s, const std::string& baseName, const std::string& embedName)
{
    const ModelConfig& c = s.config;
    std::vector<PlanEntry> base = baseTpPlan(c);
    std::vector<PlanEntry> head = {{"lm_head", "colwise_gather_output"}};
    std::vector<PlanEntry> baseEp = baseEpPlan(c);
    // A model type on a template's tree: the plans its own classes declare (resources/model_types.json).
    if (c.modelType != familyName(c.family) && c.family != Family::Llama4) {
        const ClassPlans p = transformersClassPlans(c.modelType);
        base = planEntries(p.baseTp);
        head = planEntries(p.head);
        baseEp = planEntries(p.baseEp);
        s.interleavedOnLoad = p.interleavedOnLoad;
    }
    s.defaultTpPlan = head;
    if (c.family == Family::Llama4) {
        // Llama4ForCausalLM declares base_model_prefix "language_model" but keeps its base model in
        // `model`, so Transformers treats the head class as its own base model and merges the config
        // plan unprefixed as well.
        mergeInto(s.defaultTpPlan, base, "");
        s.diagnostics.push_back(
            {Severity::Info, "Llama4ForCausalLM",
             fmt::format("Transformers' resolved default plan repeats {} keys without the 'model.' prefix; they match "
                         "no module and are harmless",
                         base.size()),
             "base_model_prefix is 'language_model' but the base model lives in 'model'"});
    }
    mergeBasePlan(s, base, baseName, embedName);
    s.defaultEpPlan.clear();
    mergeInto(s.defaultEpPlan, baseEp, baseName + ".");
    s.supportsTpPlan = !s.defaultTpPlan.empty();
    const bool attentionPlanned = std::any_of(s.defaultTpPlan.begin(), s.defaultTpPlan.end(),
                                              [](const PlanEntry& e) { return e.key.find(".self_attn.") != std::string::npos; });
    if (c.family == Family::GptOss || (c.family == Family::DeepseekV3 && !attentionPlanned)) {
        s.diagnostics.push_back(
            {Severity::Info, s.className,
             c.family == Family::GptOss
                 ? "the default tp_plan shards only the embeddings and lm_head: attention and experts stay replicated"
                 : fmt::format("the default tp_plan leaves {}attention replicated; only experts and MLPs are sharded",
                               c.isMla() ? "MLA " : c.layout.compressedAttention ? "the compressed " : ""),
             c.isMoe() ? "for the experts, use expert parallelism (ep_size = tp_size) or edit the plan" : ""});
    }
}

// The per-key caps of the config reader bound each tensor; the sum over every tensor is bounded
// here, in checked arithmetic, so no later count of elements or bytes can wrap.
Status checkPlausibleSize(const ModelSpec& s)
{
    constexpr std::int64_t kMaxParameters = std::int64_t(1) << 45; // 35.2 trillion
    std::int64_t total = 0;
    const ParamSpec* largest = nullptr;
    const ModuleSpec* largestOwner = nullptr;
    bool wrapped = false;
    for (const auto& m : s.modules)
        for (const auto& p : m.params) {
            const std::int64_t n = p.numel();
            if (!largest || n > largest->numel()) {
                largest = &p;
                largestOwner = &m;
            }
            wrapped = wrapped || n < 0 || __builtin_add_overflow(total, n, &total);
        }
    if (!wrapped && total <= kMaxParameters)
        return {};
    return invalidArgument(fmt::format(
        "the config describes {} parameters, more than the {} (2^45) accepted; the largest tensor is '{}{}{}' [{}] "
        "(num_hidden_layers {}, hidden_size {}, intermediate_size {}, vocab_size {}, experts {})",
        wrapped ? std::string("over 9.2e18") : fmt::format("{}", total), kMaxParameters, largestOwner->path,
        largestOwner->path.empty() ? "" : ".", largest->name, fmt::join(largest->shape, ", "), s.config.numLayers,
        s.config.hiddenSize, s.config.intermediateSize, s.config.vocabSize, s.config.numExperts));
}

// What a quantized checkpoint stores, for a model opened from its config alone (a checkpoint's own
// dtypes replace these when it is read): quant_method "fp8" (DeepSeek-V3's e4m3 with 128 x 128 block
// scales) stores the decoder layers' Linear and expert weights in one byte; "mxfp4" (gpt-oss) the
// experts' in four bits. Embeddings, the head, norms and routers keep the model's dtype. Block scales
// count with their weights (ParamSpec::scaleBlock): fp8's weight_block_size, a float32 per block;
// mxfp4's, one E8M0 byte per 32 inputs.
void applyQuantizedStorage(ModelSpec& s)
{
    const std::optional<std::string>& q = s.config.quantization;
    if (q && (*q == "awq" || *q == "gptq")) {
        // Every Linear of the decoder layers (the quantizer leaves lm_head out) but modules_to_not_convert, matched as
        // Transformers' should_convert_module does for a plain key: a prefix of the path up to a module boundary, or
        // a suffix of it ("gate" matches "mlp.gate", not "mlp.gate_proj"). A key meant as a regex is read literally.
        const auto skipped = [&](const std::string& path) {
            return std::any_of(s.config.quantSkip.begin(), s.config.quantSkip.end(), [&](const std::string& k) {
                return !k.empty() && (path.ends_with(k) || (path.starts_with(k) && (path.size() == k.size() || path[k.size()] == '.')));
            });
        };
        for (ModuleSpec& m : s.modules)
            if (m.layer >= 0 && m.kind == ModuleKind::Linear && !skipped(m.path))
                for (ParamSpec& p : m.params)
                    if (p.name == "weight" && p.shape.size() == 2) {
                        p.packBits = s.config.quantBits;
                        p.packGroup = s.config.quantGroup;
                        p.packGptq = *q == "gptq";
                    }
        return;
    }
    if (!q || (*q != "fp8" && *q != "mxfp4"))
        return;
    for (ModuleSpec& m : s.modules) {
        const bool expert = m.kind == ModuleKind::Experts;
        if (m.layer < 0 || !(expert || (*q == "fp8" && m.kind == ModuleKind::Linear)))
            continue;
        for (ParamSpec& p : m.params)
            if (p.shape.size() == (expert ? 3u : 2u)) { // the weights, not the experts' [E, out] biases
                p.dtype = *q == "fp8" ? DType::F8E4M3 : DType::F4;
                // fp8: weight_scale_inv per weight_block_size block of [out, in]; mxfp4: gpt-oss's experts are [E, in, out]
                // with one E8M0 scale per 32 inputs (the checkpoint's *_scales [E, out, in/32]).
                p.scaleBlock = *q == "fp8" ? s.config.quantBlock : std::vector<std::int64_t>{32, 1};
            }
    }
}

} // namespace

std::string modulePath(const LayerLayout& layout, std::string_view templatePath)
{
    if (!layout.renames)
        return std::string(templatePath);
    // The graph asks for every node: parse a layout's renames once per thread, not once per path.
    thread_local const char* parsed = nullptr;
    thread_local std::map<std::string, std::string> renames;
    if (parsed != layout.renames) {
        renames = parseRenames(layout.renames);
        parsed = layout.renames;
    }
    std::string out, parent;
    forEachPart(templatePath, '.', [&](std::string_view part) {
        const std::size_t colon = part.find(':'); // an op's name: model.layers.0.self_attn:rope
        std::string seg(part.substr(0, colon));
        out += (out.empty() ? "" : ".") + renamed(renames, parent, seg);
        if (colon != std::string_view::npos)
            out += part.substr(colon);
        parent = std::move(seg);
    });
    return out;
}

void applyClassPlans(ModelSpec& s, const ClassPlans& p)
{
    // The base model: the top-level module that holds the decoder layers (Transformers' base_model_prefix).
    std::string baseName = "model", embedName = "embed_tokens";
    for (const ModuleSpec& m : s.modules)
        if (!m.path.empty() && m.path.find('.') == std::string::npos && s.find(m.path + ".layers")) {
            baseName = m.path;
            break;
        }
    for (const ModuleSpec& m : s.modules)
        if (m.kind == ModuleKind::Embedding && m.path.starts_with(baseName + ".") && m.path.find('.', baseName.size() + 1) == std::string::npos) {
            embedName = m.name;
            break;
        }
    s.defaultTpPlan = planEntries(p.head);
    mergeBasePlan(s, planEntries(p.baseTp), baseName, embedName);
    s.defaultEpPlan.clear();
    mergeInto(s.defaultEpPlan, planEntries(p.baseEp), baseName + ".");
    s.interleavedOnLoad = p.interleavedOnLoad;
    s.supportsTpPlan = !s.defaultTpPlan.empty();
}

Result<ModelSpec> buildModelSpec(const ModelConfig& c)
{
    if (c.family == Family::Unknown)
        return unimplemented(fmt::format("no module template for model_type '{}'", c.modelType));
    ModelSpec s;
    s.config = c;
    s.className = causalLmClassName(c.family);
    Names n = namesFor(c.family);
    if (!c.causalLmClass.empty() && c.causalLmClass != s.className) {
        // A model type with the template's tree under its own class names (GemmaForCausalLM: GemmaModel,
        // GemmaAttention, …).
        const std::string ours = c.causalLmClass.substr(0, c.causalLmClass.rfind("ForCausalLM"));
        auto rename = [&](std::string& name) {
            if (name.starts_with(n.prefix))
                name = ours + name.substr(n.prefix.size());
        };
        for (std::string* name : {&n.model, &n.moe, &n.router})
            rename(*name);
        n.prefix = ours;
        s.className = c.causalLmClass;
    }
    TreeBuilder b(s, c.dtype, c.layout.renames);

    const std::int64_t H = c.hiddenSize, V = c.vocabSize;
    int root = b.add(-1, "", s.className, ModuleKind::CausalLM);
    int model = b.add(root, "model", n.model, ModuleKind::Model);
    int embed = b.add(model, "embed_tokens", n.embedding, ModuleKind::Embedding);
    b.param(embed, "weight", {V, H});
    if (c.layout.inkling || c.layout.inkling2) // InklingNormedEmbedding: its forward norms the rows it looks up
        b.norm(embed, "embed_norm", H, n.prefix + "RMSNorm", -1);
    if (c.layout.hierarchicalStacks) { // HRM: the two stacks, their layers numbered by the stack's own index
        for (const char* name : {"L_module", "H_module"}) {
            const int stack = b.add(model, name, n.prefix + "Stack", ModuleKind::Other);
            const int layers = b.add(stack, "layers", "ModuleList", ModuleKind::ModuleList);
            for (int l = 0; l < c.layersPerStack; ++l)
                buildLayer(b, c, n, layers, l);
            b.layerNorm(stack, "final_norm", H, n.prefix + "RMSNorm", -1, c.layout.normParams);
        }
        b.param(model, "z_L_init", {H});
    } else {
        const int layers = b.add(model, "layers", "ModuleList", ModuleKind::ModuleList);
        for (int l = 0; l < c.numLayers; ++l)
            buildLayer(b, c, n, layers, l);
    }
    if (c.perLayerInputSize > 0) { // Gemma 4's per-layer embeddings, packed: every layer's in one row
        const std::int64_t packed = c.numLayers * c.perLayerInputSize;
        b.param(b.add(model, "embed_tokens_per_layer", n.embedding, ModuleKind::Other), "weight", {c.perLayerInputVocab, packed});
        b.linear(model, "per_layer_model_projection", packed, H, false, -1);
        b.norm(model, "per_layer_projection_norm", c.perLayerInputSize, n.prefix + "RMSNorm", -1);
    }
    if (c.layout.multimodalEncoders)
        buildPhi4Encoders(b, c, model);
    if (c.layout.altUp) // Gemma 3n: the embedding into the other AltUp streams, and back
        for (const char* list : {"altup_projections", "altup_unembed_projections"}) {
            const int m = b.add(model, list, "ModuleList", ModuleKind::ModuleList);
            for (std::int64_t i = 0; i + 1 < c.altUpInputs; ++i)
                b.linear(m, std::to_string(i), H, H, false, -1);
        }
    if (c.layout.hyperConnections == LayerLayout::HyperConnections::HyV4 || c.layout.hyperConnections == LayerLayout::HyperConnections::DeepseekV4) {
        const int hc = b.add(model, "hc_head", n.prefix + "HyperHead", ModuleKind::Other);
        if (c.layout.hyperConnections == LayerLayout::HyperConnections::DeepseekV4)
            b.add(hc, "input_norm", n.prefix + "UnweightedRMSNorm", ModuleKind::Other);
        b.param(hc, "hc_fn", {c.hcMult, c.hcMult * H}, DType::F32);
        b.param(hc, "hc_base", {c.hcMult}, DType::F32);
        b.param(hc, "hc_scale", {1}, DType::F32);
    }
    if (c.layout.hyperConnections == LayerLayout::HyperConnections::Qwen4)
        buildGatedResidual(b, c, n, model, "hyper_connection_mixer", false, -1);
    else if (c.layout.compressedAttention)
        normF32(b, model, "norm", H, n.prefix + "RMSNorm", -1);
    else if (!c.layout.hierarchicalStacks) // HRM's stacks end in their own norms
        b.layerNorm(model, "norm", H, n.prefix + "RMSNorm", -1, c.layout.normParams);
    if (c.layout.inkling2) { // depth attention into the final norm; the loop's messages; no rope
        buildBlockAttention(b, n, model, "final_input", {H}, -1);
        if (c.loopEnd > 0)
            buildBlockAttention(b, n, model, "message_input", {c.loopEnd - c.loopStart, 4, H}, -1, "MessageAttentionResidual");
    } else {
        b.add(model, "rotary_emb", n.prefix + "RotaryEmbedding", ModuleKind::RotaryEmbedding);
    }
    int head = b.linear(root, "lm_head", c.headRows(), H, c.layout.lmHeadBias, -1);
    if (c.layout.lmHeadScale)
        b.param(head, "logit_scale", {V});
    if (c.layout.inkling2)
        b.add(root, "logit_softcap", n.prefix + "Softcap", ModuleKind::Other);
    if (c.tieWordEmbeddings)
        b.at(head).params[0].tiedTo = b.at(embed).path + ".weight";
    applyQuantizedStorage(s);

    const std::string baseName = b.at(model).name, embedName = b.at(embed).name;
    s.finalize();
    TP_RETURN_IF_ERROR(checkPlausibleSize(s));
    resolveDefaultPlans(s, baseName, embedName);
    return s;
}

} // namespace tp
