// layer_graph.cpp — per-family forward dataflow, as the *ForCausalLM forward of Transformers v5
// computes it (modeling_llama.py and its siblings; MLA per modeling_deepseek_v3.py).
#include "tp/graph/layer_graph.h"

#include "tp/model/arch_traits.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numbers>
#include <tuple>

namespace tp {

const char* opKindName(OpKind k)
{
    switch (k) {
    case OpKind::Embedding: return "embedding";
    case OpKind::Norm: return "norm";
    case OpKind::HeadNorm: return "head_norm";
    case OpKind::Linear: return "linear";
    case OpKind::Split: return "split";
    case OpKind::Rope: return "rope";
    case OpKind::Attention: return "attention";
    case OpKind::GatedAct: return "gated_act";
    case OpKind::Router: return "router";
    case OpKind::Experts: return "experts";
    case OpKind::Mixer: return "mixer";
    case OpKind::Add: return "add";
    case OpKind::Logits: return "logits";
    }
    return "?";
}

const char* activationName(Activation a)
{
    switch (a) {
    case Activation::Silu: return "silu";
    case Activation::GeluTanh: return "gelu_pytorch_tanh";
    case Activation::Gelu: return "gelu";
    case Activation::Relu2: return "relu2";
    case Activation::Sigmoid: return "sigmoid";
    case Activation::Softplus: return "softplus";
    case Activation::Tanh: return "tanh";
    case Activation::Identity: return "identity";
    }
    return "?";
}

std::vector<double> RopeTable::frequencies(std::int64_t L) const
{
    if (kind == Kind::LongRope && L > switchAt)
        return longInvFreq;
    if (kind == Kind::DynamicNtk && L > switchAt) {
        const double d = static_cast<double>(headDim);
        const double base = theta * std::pow(factor * static_cast<double>(L) / static_cast<double>(switchAt) - (factor - 1), d / (d - 2));
        std::vector<double> f;
        for (std::int64_t i = 0; i < headDim / 2; ++i)
            f.push_back(1.0 / std::pow(base, static_cast<double>(2 * i) / d));
        return f;
    }
    return invFreq;
}

double RopeTable::scaling(std::int64_t L) const
{
    return kind == Kind::LongRope && L > switchAt && longAttentionScaling > 0 ? longAttentionScaling : attentionScaling;
}

std::vector<float> RopeTable::cosSin(std::int64_t positions, std::int64_t prefill) const
{
    const std::int64_t half = headDim / 2;
    std::vector<float> t(static_cast<std::size_t>(positions * headDim));
    const std::vector<double> prefillFreq = frequencies(prefill);
    for (std::int64_t p = 0; p < positions; ++p) {
        const bool own = kind != Kind::Fixed && p >= prefill; // a later position: its own length p + 1
        const std::vector<double> freq = own ? frequencies(p + 1) : std::vector<double>{};
        const std::vector<double>& f = own ? freq : prefillFreq;
        const double scale = scaling(own ? p + 1 : prefill), sinScale = reversed ? -scale : scale;
        for (std::int64_t j = 0; j < half; ++j) {
            const double a = static_cast<double>(p) * f[static_cast<std::size_t>(j)];
            t[static_cast<std::size_t>(p * headDim + j)] = static_cast<float>(scale * std::cos(a));
            t[static_cast<std::size_t>(p * headDim + half + j)] = static_cast<float>(sinScale * std::sin(a));
        }
    }
    return t;
}

namespace {

// yarn_get_mscale.
double mscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

// YaRN (_compute_yarn_parameters): each frequency between its extrapolated (1 / θ^(2i/d)) and its
// interpolated (that / factor) value by a linear ramp over the correction range of beta_fast and
// beta_slow rotations in the original context; cos and sin scaled by the attention factor.
void yarn(RopeTable& t, double theta, const RopeScaling& s, std::int64_t maxPositions)
{
    const double d = static_cast<double>(t.headDim);
    const double factor = s.factor > 0 ? s.factor : 1;
    const double original = s.originalMaxPositions > 0 ? static_cast<double>(s.originalMaxPositions) : static_cast<double>(maxPositions);
    if (s.attentionFactor)
        t.attentionScaling = *s.attentionFactor;
    else if (s.mscale != 0 && s.mscaleAllDim != 0)
        t.attentionScaling = mscale(factor, s.mscale) / mscale(factor, s.mscaleAllDim);
    else
        t.attentionScaling = mscale(factor, 1);
    auto correctionDim = [&](double rotations) { return d * std::log(original / (rotations * 2 * std::numbers::pi)) / (2 * std::log(theta)); };
    double low = correctionDim(s.betaFast > 0 ? s.betaFast : 32), high = correctionDim(s.betaSlow > 0 ? s.betaSlow : 1);
    if (s.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, d - 1);
    if (low == high)
        high += 0.001; // as Transformers: no division by zero
    for (std::size_t i = 0; i < t.invFreq.size(); ++i) {
        const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        const double extrapolation = 1 - ramp;
        t.invFreq[i] = t.invFreq[i] / factor * (1 - extrapolation) + t.invFreq[i] * extrapolation;
    }
}

// inv_freq of every rope init function of Transformers (ROPE_INIT_FUNCTIONS): default, "linear", "llama3", "yarn",
// "longrope", "dynamic" and "proportional", over the rotated dims int(head_dim · partial_rotary_factor).
RopeTable ropeTable(double theta, const RopeScaling& s, std::int64_t fullHeadDim, std::int64_t maxPositions)
{
    RopeTable t;
    const bool proportional = s.type == "proportional"; // head_dim / 2 frequencies, the unrotated ones 0
    const std::int64_t headDim = proportional ? fullHeadDim : static_cast<std::int64_t>(static_cast<double>(fullHeadDim) * s.partialRotaryFactor);
    t.headDim = headDim;
    const std::int64_t rotated = proportional ? static_cast<std::int64_t>(s.partialRotaryFactor * static_cast<double>(fullHeadDim)) / 2 : headDim / 2;
    if (s.type == "longrope") {
        const double original = static_cast<double>(s.originalMaxPositions > 0 ? s.originalMaxPositions : maxPositions);
        const double factor = s.factorGiven ? s.factor : static_cast<double>(maxPositions) / original;
        t.attentionScaling = s.attentionFactor ? *s.attentionFactor
                           : factor <= 1       ? 1.0
                                               : std::sqrt(1 + std::log(factor) / std::log(original));
        t.kind = RopeTable::Kind::LongRope;
        t.switchAt = static_cast<std::int64_t>(original);
        for (std::int64_t i = 0; i < headDim / 2; ++i) {
            const double base = std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(headDim));
            const auto at = static_cast<std::size_t>(i);
            t.invFreq.push_back(1.0 / ((at < s.shortFactor.size() ? s.shortFactor[at] : 1.0) * base));
            t.longInvFreq.push_back(1.0 / ((at < s.longFactor.size() ? s.longFactor[at] : 1.0) * base));
        }
        if (s.shortMscale && s.longMscale) { // PhiMoE
            t.attentionScaling = *s.shortMscale;
            t.longAttentionScaling = *s.longMscale;
            t.longInvFreq = t.invFreq;
        }
        return t;
    }
    if (s.type == "dynamic") {
        t.kind = RopeTable::Kind::DynamicNtk;
        t.switchAt = maxPositions;
        t.theta = theta;
        t.factor = s.factor;
    }
    for (std::int64_t i = 0; i < headDim / 2; ++i) {
        double f = i >= rotated ? 0.0 : 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(headDim));
        if (proportional)
            f /= s.factor;
        if (s.type == "llama3") {
            const double low = static_cast<double>(s.originalMaxPositions) / s.lowFreqFactor;
            const double high = static_cast<double>(s.originalMaxPositions) / s.highFreqFactor;
            const double wavelen = 2 * std::numbers::pi / f;
            if (wavelen > low) {
                f /= s.factor;
            } else if (wavelen >= high && s.highFreqFactor > s.lowFreqFactor) { // equal factors: no band between
                const double smooth = (static_cast<double>(s.originalMaxPositions) / wavelen - s.lowFreqFactor)
                    / (s.highFreqFactor - s.lowFreqFactor);
                f = (1 - smooth) * f / s.factor + smooth * f;
            }
        } else if (s.type == "linear") {
            f /= s.factor;
        }
        t.invFreq.push_back(f);
    }
    if (s.type == "yarn")
        yarn(t, theta, s, maxPositions);
    return t;
}

class GraphBuilder
{
public:
    GraphBuilder(const ModelSpec& spec, LayerGraph& g)
        : m_spec(spec)
        , m_g(g)
        , m_c(spec.config)
        , m_t(archTraits(spec.config.family))
    {
    }

    void build()
    {
        // Transformers' ACT2FN names: gelu_new and gelu_fast are the tanh form's formula.
        static constexpr std::pair<const char*, Activation> kActs[] = {
            {"silu", Activation::Silu},         {"swish", Activation::Silu},        {"gelu_pytorch_tanh", Activation::GeluTanh},
            {"gelu_new", Activation::GeluTanh}, {"gelu_fast", Activation::GeluTanh}, {"gelu", Activation::Gelu},
            {"relu2", Activation::Relu2}};
        const auto* a = std::find_if(std::begin(kActs), std::end(kActs), [&](const auto& e) { return m_c.hiddenAct == e.first; });
        if (a != std::end(kActs))
            m_act = a->second;
        else
            m_g.unsupported = fmt::format("activation '{}' (hidden_act) is not one the engine computes (silu, swish, "
                                          "gelu_pytorch_tanh, gelu_new, gelu_fast, gelu, relu2)",
                                          m_c.hiddenAct);
        static constexpr std::string_view kRopes[] = {"", "linear", "llama3", "yarn", "longrope", "dynamic", "proportional"};
        for (const RopeScaling* rs : {&m_c.ropeScaling, m_c.slidingRope ? &m_c.slidingRope->scaling : nullptr}) {
            if (!rs)
                continue;
            const auto rotated = static_cast<std::int64_t>(static_cast<double>(m_c.headDim) * rs->partialRotaryFactor);
            if (std::find(std::begin(kRopes), std::end(kRopes), rs->type) == std::end(kRopes))
                m_g.unsupported = fmt::format("rope scaling '{}' is not one of Transformers' that the engine computes (default, "
                                              "linear, llama3, yarn, longrope, dynamic, proportional)",
                                              rs->type);
            else if (rotated < 2 || rotated % 2 != 0 || rotated > m_c.headDim)
                m_g.unsupported = fmt::format("partial_rotary_factor {} rotates {} of a head's {} dims; the engine rotates an "
                                              "even number of at least 2",
                                              rs->partialRotaryFactor, rotated, m_c.headDim);
            else if (rs->type == "longrope"
                     && (rs->shortFactor.size() != static_cast<std::size_t>(rotated / 2) || rs->longFactor.size() != rs->shortFactor.size()))
                m_g.unsupported = fmt::format("longrope's short_factor and long_factor must each have {} values (half the rotated "
                                              "dims), found {} and {}",
                                              rotated / 2, rs->shortFactor.size(), rs->longFactor.size());
        }
        if (m_c.bidirectionalAttention)
            m_g.unsupported = "use_bidirectional_attention: the engine computes causal language models only";
        using M = LayerLayout::Mixer;
        const M mx = m_c.layout.mixer;
        if (mx != M::None && !((mx == M::Mamba2 && m_c.mixer.norm) || mx == M::GatedDeltaNet || mx == M::GatedDeltaNetSplit || mx == M::ShortConv))
            m_g.unsupported = fmt::format("the engine does not compute {} layers ('{}'{}); they are planned only", mixerTitle(mx),
                                          m_c.layout.mixerName, m_c.mixer.norm ? "" : " without their gated norm");
        m_g.ropes.push_back(ropeTable(m_c.ropeTheta, m_c.ropeScaling, m_c.headDim, m_c.maxPositionEmbeddings));
        if (m_c.slidingRope) // rope 1: the sliding layers' own
            m_g.ropes.push_back(ropeTable(m_c.slidingRope->theta, m_c.slidingRope->scaling, m_c.headDim, m_c.maxPositionEmbeddings));
        for (RopeTable& t : m_g.ropes)
            t.reversed = m_c.layout.ropeReversed;
        const int ids = tensor("input_ids", 1, -1);
        int h = module(OpKind::Embedding, "model.embed_tokens", {ids}, m_c.hiddenSize);
        if (m_t.scaledEmbeddings || m_c.layout.scaledEmbeddings)
            m_g.nodes.back().scale = std::sqrt(static_cast<double>(m_c.hiddenSize));
        else if (m_c.embeddingMultiplier)
            m_g.nodes.back().scale = *m_c.embeddingMultiplier;
        if (m_c.perLayerInputSize > 0)
            perLayerInputs(ids, h);
        if (m_c.layout.inkling || m_c.layout.inkling2) // InklingNormedEmbedding: the lookup's rows normed inside the embedding's forward
            h = module(OpKind::Norm, "model.embed_tokens.embed_norm", {h}, m_c.hiddenSize);
        if (m_c.layout.normedEmbeddings) // nanochat: model.norm before the layers too
            h = module(OpKind::Norm, "model.norm", {h}, m_c.hiddenSize, "model.norm:embeddings");
        if (m_c.layout.altUp) // Gemma 3n: the other streams, projections of the embedding
            for (std::int64_t i = 0; i + 1 < m_c.altUpInputs; ++i)
                h = op(OpKind::Add, fmt::format("model:altup_stream_{}", i + 1), {h, module(OpKind::Linear, fmt::format("model.altup_projections.{}", i), {h}, m_c.hiddenSize)},
                       m_c.hiddenSize);
        if (m_c.layout.hierarchicalStacks) {
            h = hierarchicalStacks(h);
        } else if (m_c.layout.inkling2) {
            h = inkling2Layers(h);
            h = module(OpKind::Norm, "model.norm", {depthAttention("model.final_input", h)}, m_c.hiddenSize);
        } else if (m_c.layout.hyperConnections == LayerLayout::HyperConnections::Qwen4) {
            // Qwen4-Exp: hc_count copies of the embedding, the layers on them, the mixer back to one (no final norm).
            h = op(OpKind::Add, "model:hc_expand", {h, h}, m_c.hcMult * m_c.hiddenSize);
            for (int l = 0; l < static_cast<int>(m_c.numLayers); ++l)
                h = layer(l, h);
            h = gatedResidual("model.hyper_connection_mixer", h).first;
        } else {
            for (int l = 0; l < static_cast<int>(m_c.numLayers); ++l)
                h = layer(l, h);
            if (m_c.layout.altUp) // Gemma 3n: the streams projected back and averaged
                for (std::int64_t i = 0; i + 1 < m_c.altUpInputs; ++i)
                    h = op(OpKind::Add, fmt::format("model:altup_unembed_{}", i + 1),
                           {h, module(OpKind::Linear, fmt::format("model.altup_unembed_projections.{}", i), {h}, m_c.hiddenSize)}, m_c.hiddenSize);
            h = module(OpKind::Norm, "model.norm", {h}, m_c.hiddenSize);
        }
        const int logits = module(OpKind::Linear, "lm_head", {h}, m_c.headRows());
        GraphNode& out = node(OpKind::Logits, "logits", -1, {logits});
        out.softcap = m_c.finalLogitSoftcap.value_or(0);
        out.scale = m_c.logitsScaling ? 1.0 / *m_c.logitsScaling : m_c.logitScale.value_or(0); // Granite's, Cohere's
    }

private:
    int tensor(std::string name, std::int64_t features, int producer)
    {
        m_g.tensors.push_back({std::move(name), features, producer});
        return static_cast<int>(m_g.tensors.size()) - 1;
    }

    // The module at a template path (model.layers.0.self_attn) under the model type's names.
    int indexOf(const std::string& templatePath) const { return m_spec.indexOf(modulePath(m_c.layout, templatePath)); }

    GraphNode& node(OpKind kind, std::string name, int moduleIndex, std::vector<int> inputs)
    {
        GraphNode n;
        n.kind = kind;
        n.name = m_c.layout.renames ? modulePath(m_c.layout, name) : std::move(name);
        n.module = moduleIndex;
        n.layer = m_layer;
        n.inputs = std::move(inputs);
        m_g.nodes.push_back(std::move(n));
        return m_g.nodes.back();
    }

    int output(GraphNode& n, std::int64_t features, const std::string& suffix = "out")
    {
        const int producer = static_cast<int>(&n - m_g.nodes.data());
        const int t = tensor(n.name + ":" + suffix, features, producer);
        n.outputs.push_back(t);
        return t;
    }

    // A node for the module at `path` (named `name` where the module runs twice: nanochat's model.norm); its single
    // output has `features`.
    int module(OpKind kind, const std::string& path, std::vector<int> inputs, std::int64_t features, const std::string& name = {})
    {
        GraphNode& n = node(kind, name.empty() ? path : name, indexOf(path), std::move(inputs));
        if (kind == OpKind::Norm) {
            n.eps = m_c.layout.normEps > 0 ? m_c.layout.normEps : m_c.rmsNormEps;
            n.normOffset = m_t.unitOffsetNorms ? 1 : m_c.layout.normOffset;
            n.layerNorm = m_c.layout.layerNorms;
        }
        return output(n, features);
    }

    int op(OpKind kind, const std::string& name, std::vector<int> inputs, std::int64_t features)
    {
        GraphNode& n = node(kind, name, -1, std::move(inputs));
        return output(n, features);
    }

    int add(const std::string& name, int a, int b) { return op(OpKind::Add, name, {a, b}, m_c.hiddenSize); }
    // h + block, the block's output × residual_multiplier first (Granite).
    int residual(const std::string& name, int h, int block)
    {
        const int y = add(name, h, block);
        m_g.nodes.back().scale = m_c.residualMultiplier.value_or(0);
        return y;
    }

    // HRM: z_L from z_L_init; H_cycles times, L_cycles runs of z_L = L_module(z_L + z_H), then z_H = H_module(z_H + z_L).
    // Each run of a stack's layer is graph layer (run · num_layers_per_stack + its index), its KV cache slot.
    int hierarchicalStacks(int zH)
    {
        const std::int64_t H = m_c.hiddenSize;
        int zL = tensor("model.z_L_init", H, -1);
        for (std::int64_t run = 0; run < m_c.hCycles * (m_c.lCycles + 1); ++run) {
            const int first = static_cast<int>(run * m_c.layersPerStack);
            const std::string stack = fmt::format("model.{}", m_c.stackLayerAt(first).first);
            const bool high = m_c.stackLayerAt(first).first == std::string_view("H_module");
            m_layer = first;
            int x = add(fmt::format("{}:input_{}", stack, run), high ? zH : zL, high ? zL : zH);
            for (std::int64_t i = 0; i < m_c.layersPerStack; ++i)
                x = layer(first + static_cast<int>(i), x, fmt::format("{}.layers.{}", stack, i));
            m_layer = first + static_cast<int>(m_c.layersPerStack) - 1;
            (high ? zH : zL) = module(OpKind::Norm, stack + ".final_norm", {x}, H);
            m_layer = -1;
        }
        return zH;
    }

    // Inkling 2's depth attention at `p`: learned queries over the block states and h (an op on h; the block states are
    // not carried).
    int depthAttention(const std::string& p, int h) { return op(OpKind::Add, p, {h, h}, m_c.hiddenSize); }

    // Inkling 2: the layers in order; Inkling 2 Loop's loop layers loopPasses times, each visit a graph layer (and KV
    // cache slot) of its own, the later passes mixing in messages from the previous one (model.message_input).
    int inkling2Layers(int h)
    {
        int slot = 0;
        auto run = [&](std::int64_t from, std::int64_t to, bool messages) {
            for (std::int64_t l = from; l < to; ++l)
                h = inkling2Layer(static_cast<int>(l), slot++, h, messages);
        };
        if (m_c.loopEnd == 0) {
            run(0, m_c.numLayers, false);
            return h;
        }
        run(0, m_c.loopStart, false);
        for (std::int64_t pass = 0; pass < m_c.loopPasses; ++pass)
            run(m_c.loopStart, m_c.loopEnd, pass > 0);
        run(m_c.loopEnd, m_c.numLayers, false);
        return h;
    }

    // Inkling 2 Loop's message gate at `p`: (1 - tanh(forget)) · x + tanh(message gate) · message, both gates from
    // down_proj([norm(x) | norm(message)]).
    int messageGate(const std::string& p, int x, int message)
    {
        const int d = module(OpKind::Linear, p + ".down_proj", {x, message}, m_c.loopGateRank);
        const int f = module(OpKind::Linear, p + ".forget_gate_proj", {d}, m_c.hiddenSize);
        const int m = module(OpKind::Linear, p + ".message_gate_proj", {d}, m_c.hiddenSize);
        return op(OpKind::Add, p + ":mix", {gated(p + ":forget", f, x, Activation::Tanh, 1), gated(p + ":message", m, message, Activation::Tanh, 1)},
                  m_c.hiddenSize);
    }

    // Inkling 2 decoder layer `l`, graph layer `slot`: its block inputs by depth attention, attention over q/k/v_proj's
    // linears (the convolutions, clips and the relative-position bias act on them in place), the gated o_proj, the f32
    // short convolution after each block (in place), the experts.
    int inkling2Layer(int l, int slot, int h, bool messages)
    {
        m_layer = slot;
        const std::string p = fmt::format("model.layers.{}", l), a = p + ".self_attn";
        const std::int64_t H = m_c.hiddenSize, heads = m_c.headsAt(l), kv = m_c.kvHeadsAt(l), hd = m_c.headDimAt(l);
        const bool sliding = m_c.slidingLayer(l);
        const int in = l > 0 ? depthAttention(p + ".attention_input", h) : h;
        int message = -1;
        if (messages) // this layer's four messages from the previous pass
            message = op(OpKind::Add, "model.message_input", {h, h}, H);
        // The inputs of q, k and v: a full layer's own norm each, a sliding layer's input_layernorm (once for all three
        // without messages); a loop layer's messages gated in before the norm.
        std::array<int, 3> qkv{};
        for (std::size_t i = 0; i < qkv.size(); ++i) {
            const char* which = i == 0 ? "q" : i == 1 ? "k" : "v";
            if (sliding && message < 0 && i > 0) {
                qkv[i] = qkv[0];
                continue;
            }
            const int x = message >= 0 ? messageGate(fmt::format("{}.{}_message_gate", p, which), in, message) : in;
            const std::string norm = sliding ? p + ".input_layernorm" : fmt::format("{}.{}_input_layernorm", p, which);
            GraphNode& n = node(OpKind::Norm, sliding && i > 0 ? fmt::format("{}:{}", norm, which) : norm, indexOf(norm), {x});
            n.eps = m_c.rmsNormEps;
            qkv[i] = output(n, H);
        }
        const int q = module(OpKind::Linear, a + ".q_proj.linear", {qkv[0]}, heads * hd);
        std::array<int, 2> kvOut{};
        for (int i = 0; i < 2; ++i) {
            const std::string m = a + (i == 0 ? ".k_proj" : ".v_proj");
            kvOut[static_cast<std::size_t>(i)] = module(OpKind::Linear, m + ".linear", {qkv[static_cast<std::size_t>(i) + 1]}, kv * hd);
            if (!sliding) // the dynamic convolution's taps, per key/value head
                module(OpKind::Linear, m + ".sconv.weight_proj", {qkv[static_cast<std::size_t>(i) + 1]}, kv * m_c.convKernel);
        }
        module(OpKind::Linear, a + ".relative_position_bias.linear", {qkv[0]}, heads * m_c.dRel);
        module(OpKind::Linear, a + ".sink_proj", {qkv[0]}, heads);
        GraphNode& at = attentionNode(a, {q, kvOut[0], kvOut[1]}, hd, hd, kv);
        at.heads = heads;
        at.window = sliding ? m_c.slidingWindow.value_or(0) : 0;
        int o = output(at, heads * hd);
        o = gated(a + ":gate", module(OpKind::Linear, a + ".o_proj.gate_proj", {qkv[0]}, heads * hd), o, Activation::Sigmoid, 1);
        o = module(OpKind::Linear, a + ".o_proj.linear", {o}, H);
        h = add(p + ":residual_attn", h, o);
        int x = depthAttention(p + ".mlp_input", h);
        if (message >= 0)
            x = messageGate(p + ".mlp_message_gate", x, message);
        x = module(OpKind::Norm, p + ".post_attention_layernorm", {x}, H);
        h = add(p + ":residual_mlp", h, moe(p + ".mlp", *m_spec.find(p + ".mlp"), x));
        m_layer = -1;
        return h;
    }

    int layer(int l, int h, std::string p = {})
    {
        m_layer = l;
        if (p.empty())
            p = fmt::format("model.layers.{}", l);
        using N = LayerLayout::Norms;
        const N norms = m_c.layout.mixerPreNorms && m_c.isMixerLayer(l) ? N::Pre : m_c.layout.norms;
        const std::int64_t H = m_c.hiddenSize;
        if (m_c.layout.dualSublayers) { // LongCat-Flash: two attention + MLP sublayers; the MoE from the first MLP's input
            int shortcut = -1;
            for (const char* i : {"0", "1"}) {
                int x = module(OpKind::Norm, p + ".input_layernorm." + i, {h}, H);
                h = add(p + ":residual_attn_" + i, h, attention(p + ".self_attn." + i, x));
                x = module(OpKind::Norm, p + ".post_attention_layernorm." + i, {h}, H);
                if (shortcut < 0)
                    shortcut = moe(p + ".mlp", *m_spec.find(modulePath(m_c.layout, p + ".mlp")), x);
                h = add(p + ":residual_mlp_" + i, h, denseMlp(p + ".mlps." + i, x, m_c.intermediateSize));
            }
            h = add(p + ":shortcut", h, shortcut);
            m_layer = -1;
            return h;
        }
        if (m_c.layout.hyperConnections == LayerLayout::HyperConnections::Qwen4) { // streams + inject(block(mix(streams)))
            const std::int64_t streams = m_c.hcMult * H;
            for (const char* block : {"attn", "mlp"}) {
                const auto [x, weights] = gatedResidual(fmt::format("{}.{}_hyper_connection", p, block), h);
                const int y = block == std::string_view("attn") ? attention(p + ".self_attn", x) : feedForward(p, x);
                const int injected = op(OpKind::Add, fmt::format("{}:{}_inject", p, block), {y, weights}, streams);
                h = op(OpKind::Add, fmt::format("{}:residual_{}", p, block), {h, injected}, streams);
            }
            m_layer = -1;
            return h;
        }
        if (m_c.layout.blockPerLayer) { // Nemotron-H: h + block(norm(h)), the block the layer's type names
            const int x = module(OpKind::Norm, p + ".input_layernorm", {h}, H);
            const std::string& type = m_c.layerTypes[static_cast<std::size_t>(l)];
            const int y = type == "mlp" || type == "moe" ? feedForward(p, x) : attention(p + ".self_attn", x);
            h = add(p + ":residual", h, y);
            m_layer = -1;
            return h;
        }
        if (norms == N::Post) { // OLMo 2: each block's output normed inside the residual
            int a = module(OpKind::Norm, p + ".post_attention_layernorm", {attention(p + ".self_attn", h)}, H);
            h = add(p + ":residual_attn", h, a);
            int f = module(OpKind::Norm, p + ".post_feedforward_layernorm", {feedForward(p, h)}, H);
            h = add(p + ":residual_mlp", h, f);
            m_layer = -1;
            return h;
        }
        if (norms == N::Parallel || (norms == N::Pre && m_c.parallelResidual)) {
            // Cohere: h + attn(x) + mlp(x), x = input_layernorm(h); GPT-NeoX: the MLP's x = post_attention_layernorm(h)
            const int x = module(OpKind::Norm, p + ".input_layernorm", {h}, H);
            const int a = attention(p + ".self_attn", x);
            const int f = feedForward(p, norms == N::Parallel ? x : module(OpKind::Norm, p + ".post_attention_layernorm", {h}, H));
            h = add(p + ":residual_mlp", add(p + ":residual_attn", h, a), f);
            m_layer = -1;
            return h;
        }
        if (norms == N::Peri || norms == N::PreFeedforward || norms == N::Sandwich) {
            const bool after = norms != N::PreFeedforward; // a norm after each block, inside the residual
            int x = module(OpKind::Norm, p + ".input_layernorm", {h}, H);
            int a = attention(p + ".self_attn", x);
            if (after)
                a = module(OpKind::Norm, p + (norms == N::Peri ? ".post_norm1" : ".post_self_attn_layernorm"), {a}, H);
            h = add(p + ":residual_attn", h, a);
            x = module(OpKind::Norm, p + (after ? ".post_attention_layernorm" : ".pre_feedforward_layernorm"), {h}, H);
            int f = feedForward(p, x);
            if (after)
                f = module(OpKind::Norm, p + (norms == N::Peri ? ".post_norm2" : ".post_mlp_layernorm"), {f}, H);
            h = add(p + ":residual_mlp", h, f);
            m_layer = -1;
            return h;
        }
        const bool gemma = m_t.sandwichNorms || norms == N::Gemma;
        if (m_c.layout.altUp)
            h = altUpMix(p, true, h);
        int x = residualNorm(p, "input_layernorm", h);
        int a = attention(p + ".self_attn", x);
        if (gemma)
            a = module(OpKind::Norm, p + ".post_attention_layernorm", {a}, m_c.hiddenSize);
        h = residual(p + ":residual_attn", h, a);
        if (m_c.layout.altUp) { // LAuReL: norm(right(left(x))) of the attention's input beside it
            const int left = module(OpKind::Linear, p + ".laurel.linear_left", {x}, m_c.laurelRank);
            const int right = module(OpKind::Linear, p + ".laurel.linear_right", {left}, m_c.hiddenSize);
            h = add(p + ":laurel_sum", h, module(OpKind::Norm, p + ".laurel.post_laurel_norm", {right}, m_c.hiddenSize));
        }
        x = residualNorm(p, gemma ? "pre_feedforward_layernorm" : "post_attention_layernorm", h);
        int f = m_c.layout.gemma4 && m_c.isMoeLayer(l) ? gemma4Experts(p, h, x) : feedForward(p, x);
        if (gemma)
            f = module(OpKind::Norm, p + ".post_feedforward_layernorm", {f}, m_c.hiddenSize);
        h = residual(p + ":residual_mlp", h, f);
        if (m_c.layout.altUp)
            h = altUpMix(p, false, h);
        if (!m_perLayerInputs.empty()) { // Gemma 4: h + norm(proj(act(gate(h)) · this layer's embedding))
            const std::int64_t P = m_c.perLayerInputSize;
            const int g = module(OpKind::Linear, p + ".per_layer_input_gate", {h}, P);
            GraphNode& act = node(OpKind::GatedAct, p + ":per_layer_act", -1, {g, m_perLayerInputs[static_cast<std::size_t>(l)]});
            act.act = m_act;
            int y = module(OpKind::Linear, p + ".per_layer_projection", {output(act, P)}, m_c.hiddenSize);
            y = module(OpKind::Norm, p + ".post_per_layer_input_norm", {y}, m_c.hiddenSize);
            h = add(p + ":residual_per_layer_input", h, y);
        }
        m_layer = -1;
        return h;
    }

    // Qwen4-Exp's gated residual at `p` over the streams: the block's input, mean(sigmoid(up(silu(down(n)))) · n) over the
    // streams of n = hc_norm(streams), and the block's injection weights (-1 for the model's mixer, which has none).
    std::pair<int, int> gatedResidual(const std::string& p, int streams)
    {
        const std::int64_t width = m_c.hcMult * m_c.hiddenSize;
        const int n = module(OpKind::Norm, p + ".hc_norm", {streams}, width);
        GraphNode& act = node(OpKind::GatedAct, p + ":act", -1, {module(OpKind::Linear, p + ".input_mix_weight_down", {n}, m_c.hcLowRank)});
        act.act = Activation::Silu;
        const int up = module(OpKind::Linear, p + ".input_mix_weight_up", {output(act, m_c.hcLowRank)}, width);
        const int mixed = op(OpKind::Add, p + ":mix", {up, n}, m_c.hiddenSize);
        const bool inject = m_spec.find(modulePath(m_c.layout, p + ".block_inject_weight")) != nullptr;
        return {mixed, inject ? module(OpKind::Linear, p + ".block_inject_weight", {n}, m_c.hcMult) : -1};
    }

    // Gemma 3n's AltUp step on the active stream h: tanh(modality_router(router_norm(h))) gives the coefficients, k² to
    // predict the streams from each other, or k to correct them by the layer's output.
    int altUpMix(const std::string& p, bool predict, int h)
    {
        const std::int64_t k = m_c.altUpInputs;
        const int r = module(OpKind::Norm, p + ".altup.router_norm", {h}, m_c.hiddenSize);
        const int m = module(OpKind::Linear, p + ".altup.modality_router", {r}, k);
        const int coefs = module(OpKind::Linear, p + (predict ? ".altup.prediction_coefs" : ".altup.correction_coefs"), {m}, predict ? k * k : k);
        return op(OpKind::Add, p + (predict ? ":altup_predict" : ":altup_correct"), {h, coefs}, m_c.hiddenSize);
    }

    // The layer's norm `name` of the residual stream h; A.X K2's gated ones: y · sigmoid(fc2(silu(fc1(y)))), y = norm(h).
    int residualNorm(const std::string& layerPath, const char* name, int h)
    {
        const std::string p = layerPath + "." + name;
        if (!m_c.gatedNormAt(m_layer, name))
            return module(OpKind::Norm, p, {h}, m_c.hiddenSize);
        const int y = module(OpKind::Norm, p + ".norm", {h}, m_c.hiddenSize);
        GraphNode& act = node(OpKind::GatedAct, p + ".mlp:act", -1, {module(OpKind::Linear, p + ".mlp.fc1", {y}, m_c.gatedNormRank)});
        act.act = Activation::Silu;
        const int g = module(OpKind::Linear, p + ".mlp.fc2", {output(act, m_c.gatedNormRank)}, m_c.hiddenSize);
        return gated(p + ":gate", g, y, Activation::Sigmoid, 1);
    }

    // x scaled elementwise by act(gate), one gate value for every `span` values of x.
    int gated(const std::string& name, int gate, int x, Activation act, std::int64_t span)
    {
        GraphNode& g = node(OpKind::GatedAct, name, -1, {gate, x});
        g.act = act;
        g.gateSpan = span;
        return output(g, m_g.tensors[static_cast<std::size_t>(x)].features);
    }

    // Gemma 4's experts beside the MLP: post_ff_norm_1(mlp(x)) + post_ff_norm_2(experts(pre_ff_norm_2(h))), routed
    // from the layer's residual stream h.
    int gemma4Experts(const std::string& p, int h, int x)
    {
        const std::int64_t H = m_c.hiddenSize;
        const int m = module(OpKind::Norm, p + ".post_feedforward_layernorm_1", {feedForward(p, x)}, H);
        const int scores = router(p + ".router.proj", h);
        const int in = module(OpKind::Norm, p + ".pre_feedforward_layernorm_2", {h}, H);
        const int e = module(OpKind::Norm, p + ".post_feedforward_layernorm_2", {experts(p + ".experts", in, scores, H)}, H);
        return add(p + ":experts_sum", m, e);
    }

    // Gemma 4's per-layer embeddings: embed_tokens_per_layer(ids) + norm(per_layer_model_projection(h)), one
    // slice a layer.
    void perLayerInputs(int ids, int h)
    {
        const std::int64_t P = m_c.perLayerInputSize, packed = m_c.numLayers * P;
        const int e = module(OpKind::Embedding, "model.embed_tokens_per_layer", {ids}, packed);
        const int proj = headNorm("model.per_layer_projection_norm", module(OpKind::Linear, "model.per_layer_model_projection", {h}, packed), P);
        GraphNode& s = node(OpKind::Split, "model:per_layer_inputs", -1, {op(OpKind::Add, "model:per_layer_sum", {proj, e}, packed)});
        s.parts.assign(static_cast<std::size_t>(m_c.numLayers), P);
        for (std::int64_t l = 0; l < m_c.numLayers; ++l)
            m_perLayerInputs.push_back(output(m_g.nodes.back(), P, fmt::format("layer{}", l)));
    }

    GraphNode& attentionNode(const std::string& p, std::vector<int> in, std::int64_t qkHeadDim, std::int64_t vHeadDim,
                             std::int64_t kvHeads)
    {
        GraphNode& n = node(OpKind::Attention, p + ":attention", -1, std::move(in));
        n.heads = m_c.headsAt(m_layer);
        n.kvHeads = kvHeads;
        n.headDim = qkHeadDim;
        n.vHeadDim = vHeadDim;
        n.ownerModule = indexOf(p);
        n.scale = m_c.attentionMultiplier ? *m_c.attentionMultiplier
                                          : 1.0 / std::sqrt(m_c.queryPreAttnScalar.value_or(static_cast<double>(qkHeadDim)));
        n.window = slidingLayer() ? m_c.slidingWindow.value_or(0) : 0;
        if (static_cast<std::size_t>(m_layer) < m_c.layerTypes.size()
            && m_c.layerTypes[static_cast<std::size_t>(m_layer)] == "chunked_attention")
            n.chunk = m_c.attentionChunkSize.value_or(0);
        n.softcap = m_c.attnLogitSoftcap.value_or(0);
        return n;
    }

    bool slidingLayer() const
    {
        return m_t.slidingWindowAllLayers || m_c.slidingLayer(m_layer);
    }

    // The layer's token mixing: attention, the layout's sequence mixer, or both summed (Falcon-H1).
    int attention(const std::string& p, int x)
    {
        if (!m_c.isMixerLayer(m_layer))
            return selfAttention(p, x);
        const std::string layerPath = p.substr(0, p.rfind('.'));
        const int m = mixer(layerPath + "." + m_c.layout.mixerName, x);
        return m_c.layout.parallelMixer ? add(layerPath + ":mixer_sum", selfAttention(p, x), m) : m;
    }

    int selfAttention(const std::string& p, int x)
    {
        const std::int64_t H = m_c.headsAt(m_layer), KV = m_c.kvHeadsAt(m_layer), hd = m_c.headDimAt(m_layer);
        const std::int64_t vd = m_c.valueHeadDimAt(m_layer);
        if (m_c.layout.compressedAttention)
            return compressedAttention(p, x);
        if (m_c.isMla())
            return mla(p, x);
        // Gemma 4: a shared layer attends over the keys and values its type's last computing layer stored.
        const std::string& type = static_cast<std::size_t>(m_layer) < m_c.layerTypes.size() ? m_c.layerTypes[static_cast<std::size_t>(m_layer)] : p;
        const bool shared = m_c.kvSharedAt(m_layer) && m_storedKv.contains(type);
        int q, k, v, gate = -1;
        if (m_t.fusedQkv || m_c.layout.fusedQkv) {
            const int qkv = module(OpKind::Linear, p + ".qkv_proj", {x}, (H + 2 * KV) * hd);
            GraphNode& s = node(OpKind::Split, p + ":split_qkv", -1, {qkv});
            s.parts = {H * hd, KV * hd, KV * hd};
            s.splitGroups = m_c.layout.qkvGroups < 0 ? H : m_c.layout.qkvGroups;
            q = output(s, H * hd, "q");
            const bool vk = m_c.layout.qkvValuesFirst; // CodeGen: [q; v; k]
            k = output(m_g.nodes.back(), KV * hd, vk ? "v" : "k");
            v = output(m_g.nodes.back(), KV * hd, vk ? "k" : "v");
            if (vk)
                std::swap(k, v);
        } else {
            q = module(OpKind::Linear, p + ".q_proj", {x}, (m_c.layout.gatedQuery ? 2 : 1) * H * hd);
            if (m_c.layout.gatedQuery) { // per head [q | gate] (Qwen3-Next)
                GraphNode& s = node(OpKind::Split, p + ":split_gate", -1, {q});
                s.parts = {H * hd, H * hd};
                s.splitGroups = H;
                q = output(s, H * hd, "q");
                gate = output(m_g.nodes.back(), H * hd, "gate");
            }
            if (shared) {
                std::tie(k, v) = m_storedKv[type];
            } else {
                k = module(OpKind::Linear, p + ".k_proj", {x}, KV * hd);
                v = m_c.valuesAreKeys(m_layer) ? k : module(OpKind::Linear, p + ".v_proj", {x}, KV * vd); // Gemma 4's k_eq_v
            }
        }
        // q_norm and k_norm, before the rope (or after it: LayerLayout::qkNormAfterRope).
        const bool fused = m_t.fusedQkv || m_c.layout.fusedQkv;
        auto qkNorms = [&] {
            using Q = LayerLayout::QkNorm;
            if (fused)
                return;
            if (m_c.layout.qkNorm == Q::Whole) { // OLMo 2: one norm over all heads' q (and k)
                q = module(OpKind::Norm, p + ".q_norm", {q}, H * hd);
                k = module(OpKind::Norm, p + ".k_norm", {k}, KV * hd);
            } else if ((m_t.qkNorm && m_c.layout.qkNorm == Q::Family) || m_c.layout.qkNorm == Q::PerHead) {
                q = headNorm(p + ".q_norm", q, hd);
                if (!shared)
                    k = headNorm(p + ".k_norm", k, hd);
            }
        };
        if (!m_c.layout.qkNormAfterRope)
            qkNorms();
        // Llama 4's NoPE layers have no rope; its rope layers L2-normalise q and k after it.
        const bool rope = m_c.noRopeLayers.empty() || m_c.noRopeLayers[static_cast<std::size_t>(m_layer)] != 0;
        if (rope) {
            GraphNode& r = node(OpKind::Rope, p + ":rope", -1, shared ? std::vector<int>{q} : std::vector<int>{q, k});
            r.headDim = hd;
            r.rope = m_c.slidingRope && slidingLayer() ? 1 : 0;
            r.interleavedRope = m_c.ropeInterleave || m_c.layout.interleavedRope;
            r.ropeLeading = m_g.ropes[static_cast<std::size_t>(r.rope)].headDim < hd; // partial rotary: the first dims turn
            q = output(r, H * hd, "q");
            if (!shared)
                k = output(m_g.nodes.back(), KV * hd, "k");
            if (m_c.useQkNorm) {
                q = l2Norm(p + ":q_norm", q, hd);
                k = l2Norm(p + ":k_norm", k, hd);
            }
        }
        if (m_c.layout.qkNormAfterRope)
            qkNorms();
        if (m_c.kvSharedLayers > 0 && !shared)
            m_storedKv[type] = {k, v};
        if (m_c.layout.inkling) // Inkling: the relative-position bias's states, d_rel per head
            module(OpKind::Linear, p + ".r_proj", {x}, H * m_c.dRel);
        if (m_c.layout.qsaIndexer) // Qwen4-Exp: the indexer's queries and keys from the layer input (it selects key blocks)
            module(OpKind::Linear, p + ".indexer.index_qk_proj", {x}, (m_c.indexHeads + m_c.indexKvHeads) * m_c.indexHeadDim);
        std::vector<int> in = {q, k, v};
        if (m_c.layout.dynamicMask) // Doge: a bias per key/value head and key position from all heads' values
            in.push_back(module(OpKind::Linear, p + ".dt_proj", {v}, KV));
        GraphNode& at = attentionNode(p, std::move(in), hd, vd, KV);
        if (!rope && m_c.attnTemperatureTuning) {
            at.temperatureFloor = m_c.floorScale;
            at.temperatureScale = m_c.attnScale;
        }
        int o = output(at, H * vd);
        if (m_c.layout.outputGate) // AFMoE, Beam, Laguna: a projection of the layer input gates the output
            gate = module(OpKind::Linear, p + "." + m_c.layout.outputGate, {x}, m_c.gatePerHead ? H : H * hd);
        if (gate >= 0) // attention · sigmoid(gate) (Laguna: softplus, one value per head)
            o = gated(p + ":gate", gate, o, m_c.layout.softplusGate ? Activation::Softplus : Activation::Sigmoid, m_c.gatePerHead ? vd : 1);
        return module(OpKind::Linear, p + ".o_proj", {o}, m_c.hiddenSize);
    }

    // LayerLayout::mixer at module path `p`: its input projections, the mixer, out_proj.
    int mixer(const std::string& p, int x)
    {
        using M = LayerLayout::Mixer;
        const MixerSizes& m = m_c.mixer;
        const std::int64_t H = m_c.hiddenSize;
        std::vector<int> in;
        auto proj = [&](const char* name, std::int64_t features) { in.push_back(module(OpKind::Linear, p + "." + name, {x}, features)); };
        std::int64_t inner = H;
        switch (m_c.layout.mixer) {
        case M::None: return x;
        case M::GatedDeltaNet:
        case M::GatedDeltaNetSplit:
        case M::GatedDeltaNetOwn: {
            const std::int64_t key = m.keyHeads * m.keyDim;
            inner = m.heads * m.valueDim;
            // Cut into q, k, v, z, b and a: Qwen3-Next's fused projections hold them per key head.
            // `parts` the part names, one letter each ("qkvz": the outputs q, k, v and z).
            auto split = [&](const std::string& parts, int fused, std::vector<std::int64_t> sizes, std::int64_t groups) {
                GraphNode& s = node(OpKind::Split, p + ":split_" + parts, -1, {fused});
                s.parts = sizes;
                s.splitGroups = groups;
                for (std::size_t i = 0; i < sizes.size(); ++i)
                    in.push_back(output(m_g.nodes.back(), sizes[i], parts.substr(i, 1)));
            };
            if (m_c.layout.mixer == M::GatedDeltaNet) {
                const int qkvz = module(OpKind::Linear, p + ".in_proj_qkvz", {x}, 2 * key + 2 * inner);
                const int ba = module(OpKind::Linear, p + ".in_proj_ba", {x}, 2 * m.heads);
                split("qkvz", qkvz, {key, key, inner, inner}, m.keyHeads);
                split("ba", ba, {m.heads, m.heads}, m.keyHeads);
            } else if (m_c.layout.mixer == M::GatedDeltaNetSplit) {
                split("qkv", module(OpKind::Linear, p + ".in_proj_qkv", {x}, 2 * key + inner), {key, key, inner}, 1);
                proj("in_proj_z", inner);
                proj("in_proj_b", m.heads);
                proj("in_proj_a", m.heads);
            } else {
                for (auto [name, features] : {std::pair{"q_proj", key}, {"k_proj", key}, {"v_proj", inner}, {"a_proj", m.heads},
                                              {"b_proj", m.heads}, {"g_proj", inner}})
                    proj(name, features);
            }
            break;
        }
        case M::Mamba1: // x_proj and dt_proj act inside the mixer, on whole channels
            inner = m.inner;
            proj("in_proj", 2 * m.inner);
            break;
        case M::Mamba2:
            inner = m.inner;
            proj("in_proj", 2 * m.inner + 2 * m.groups * m.state + m.heads);
            break;
        case M::ShortConv: proj("in_proj", 3 * H); break;
        case M::KimiDelta: // q, k, v, the forget gate, beta and the output gate (low rank: through head_dim)
        case M::KimiDeltaFull: {
            inner = m.heads * m.valueDim;
            for (const char* name : {"q_proj", "k_proj", "v_proj"})
                proj(name, inner);
            const bool lowRank = m_c.layout.mixer == M::KimiDelta;
            auto gate = [&](const std::string& a, const std::string& b, const std::string& full) {
                if (!lowRank)
                    return proj(full.c_str(), inner);
                const int r = module(OpKind::Linear, p + "." + a, {x}, m.valueDim);
                in.push_back(module(OpKind::Linear, p + "." + b, {r}, inner));
            };
            gate("forget_gate.f_a_proj", "forget_gate.f_b_proj", "forget_gate.f_proj");
            proj("b_proj", m.heads);
            gate("g_a_proj", "g_b_proj", "g_proj");
            break;
        }
        case M::Lightning: // its sigmoid output gate joins inside, after the norm
            inner = m.heads * m.valueDim;
            proj("qkv_proj", 3 * inner);
            proj("output_gate", inner);
            break;
        }
        GraphNode& n = node(OpKind::Mixer, p, indexOf(p), std::move(in));
        n.heads = m.heads;
        n.mixer = m_c.layout.mixer;
        if (m_c.layout.mixer == M::GatedDeltaNet || m_c.layout.mixer == M::GatedDeltaNetSplit) { // inputs q, k, v, z, b, a
            n.kvHeads = m.keyHeads;
            n.headDim = m.keyDim;
            n.vHeadDim = m.valueDim;
            n.convKernel = m.kernel;
            n.eps = m_c.rmsNormEps;
            n.ownerModule = indexOf(p + ".norm");
        }
        if (m_c.layout.mixer == M::ShortConv) { // input [B | C | x]: one "head" of the hidden channels
            n.heads = 1;
            n.headDim = H;
            n.convKernel = m.kernel;
        }
        if (m_c.layout.mixer == M::Mamba2) {
            n.headDim = m.inner / m.heads;
            n.groups = m.groups;
            n.ssmState = m.state;
            n.convKernel = m.kernel;
            n.dtMin = m.dtMin;
            n.dtMax = m.dtMax;
            n.eps = m_c.rmsNormEps;
            n.ownerModule = m.norm ? indexOf(p + ".norm") : -1;
        }
        const int y = output(n, inner);
        return module(OpKind::Linear, p + "." + mixerOutName(m_c.layout.mixer), {y}, H);
    }

    // Llama4TextL2Norm: per head, no weight.
    int l2Norm(const std::string& name, int in, std::int64_t hd)
    {
        GraphNode& n = node(OpKind::HeadNorm, name, -1, {in});
        n.headDim = hd;
        n.eps = m_c.rmsNormEps;
        return output(n, m_g.tensors[static_cast<std::size_t>(in)].features);
    }

    int headNorm(const std::string& path, int in, std::int64_t hd)
    {
        GraphNode& n = node(OpKind::HeadNorm, path, indexOf(path), {in});
        n.headDim = hd;
        n.eps = m_c.rmsNormEps;
        n.normOffset = m_t.unitOffsetNorms ? 1 : m_c.layout.normOffset;
        return output(n, m_g.tensors[static_cast<std::size_t>(in)].features);
    }

    // DeepSeek-V4's attention: q from q_lora_rank, one key head read as the value too (so the cache holds it twice, as
    // Transformers' does), attention within the sliding window and over the compressed keys, the grouped o_a_proj and
    // o_b_proj. The compressor and its indexer project the layer input beside it (their pooling is not costed).
    int compressedAttention(const std::string& p, int x)
    {
        const std::int64_t heads = m_c.headsAt(m_layer), hd = m_c.headDim, qr = *m_c.qLoraRank;
        int qa = module(OpKind::Linear, p + ".q_a_proj", {x}, qr);
        qa = module(OpKind::Norm, p + ".q_a_norm", {qa}, qr);
        const int q = module(OpKind::Linear, p + ".q_b_proj", {qa}, heads * hd);
        const int kv = module(OpKind::Norm, p + ".kv_norm", {module(OpKind::Linear, p + ".kv_proj", {x}, hd)}, hd);
        const std::string& type = m_c.layerTypes[static_cast<std::size_t>(m_layer)];
        if (type != "sliding_attention") {
            const bool sparse = type == "compressed_sparse_attention";
            const std::int64_t width = sparse ? 2 * hd : hd;
            for (const char* proj : {".compressor.kv_proj", ".compressor.gate_proj"})
                module(OpKind::Linear, p + proj, {x}, width);
            if (sparse) {
                const std::string ix = p + ".compressor.indexer";
                for (const char* proj : {".kv_proj", ".gate_proj"})
                    module(OpKind::Linear, ix + proj, {x}, 2 * m_c.indexHeadDim);
                module(OpKind::Linear, ix + ".q_b_proj", {qa}, m_c.indexHeads * m_c.indexHeadDim);
                module(OpKind::Linear, ix + ".scorer.weights_proj", {x}, m_c.indexHeads);
            }
        }
        GraphNode& at = attentionNode(p, {q, kv, kv}, hd, hd, 1);
        at.window = m_c.slidingWindow.value_or(0);
        const int o = module(OpKind::Linear, p + ".o_a_proj", {output(at, heads * hd)}, m_c.oGroups * m_c.oLoraRank);
        return module(OpKind::Linear, p + ".o_b_proj", {o}, m_c.hiddenSize);
    }

    // MLA's low-rank norms: rms_norm_eps only where the family passes it (LayerLayout::mlaNormsConfigEps).
    int mlaNorm(const std::string& path, int x, std::int64_t features)
    {
        const int y = module(OpKind::Norm, path, {x}, features);
        if (!m_c.layout.mlaNormsConfigEps)
            m_g.nodes.back().eps = 1e-6;
        return y;
    }

    int mla(const std::string& p, int x)
    {
        const ModelConfig::MlaSizes m = m_c.mlaAt(m_layer);
        const std::int64_t H = m_c.headsAt(m_layer), nope = m.qkNopeHeadDim, rope = m.qkRopeHeadDim, vd = m.vHeadDim;
        int q, gate = -1;
        if (m_c.layout.mlaQueryGate) { // A.X K2: q_gate_proj([norm(q_a) | q_a]), per head [q | gate]
            const int qa = module(OpKind::Linear, p + ".q_a_proj", {x}, *m.qLoraRank);
            const int qn = mlaNorm(p + ".q_a_layernorm", qa, *m.qLoraRank);
            const int qg = module(OpKind::Linear, p + ".q_gate_proj", {qn, qa}, H * (nope + rope + vd));
            GraphNode& s = node(OpKind::Split, p + ":split_gate", -1, {qg});
            s.parts = {H * (nope + rope), H * vd};
            s.splitGroups = H;
            q = output(s, H * (nope + rope), "q");
            gate = output(m_g.nodes.back(), H * vd, "gate");
        } else if (m.qLoraRank) {
            int qa = module(OpKind::Linear, p + ".q_a_proj", {x}, *m.qLoraRank);
            qa = mlaNorm(p + ".q_a_layernorm", qa, *m.qLoraRank);
            q = module(OpKind::Linear, p + ".q_b_proj", {qa}, H * (nope + rope));
        } else {
            q = module(OpKind::Linear, p + ".q_proj", {x}, H * (nope + rope));
        }
        const int kva = module(OpKind::Linear, p + ".kv_a_proj_with_mqa", {x}, m.kvLoraRank + rope);
        GraphNode& s = node(OpKind::Split, p + ":split_kv_a", -1, {kva});
        s.parts = {m.kvLoraRank, rope};
        int ckv = output(s, m.kvLoraRank, "compressed_kv");
        int kpe = output(m_g.nodes.back(), rope, "k_pe");
        ckv = mlaNorm(p + ".kv_a_layernorm", ckv, m.kvLoraRank);
        if (m_c.layout.mlaRopeNorm) // Dots 3: the shared rope key normed before its rotation
            kpe = module(OpKind::Norm, p + ".k_rope_only_layernorm", {kpe}, rope);
        const int kv = module(OpKind::Linear, p + ".kv_b_proj", {ckv}, H * (nope + vd));
        // q (per head nope+rope), kv (per head k_nope + v), k_pe (one rope key shared by all heads).
        GraphNode& at = attentionNode(p, {q, kv, kpe}, nope + rope, vd, H);
        at.mlaRope = rope;
        at.mlaLatent = m.kvLoraRank + rope;
        at.rope = 0;
        at.interleavedRope = m_c.ropeInterleave || m_c.layout.interleavedRope;
        // YaRN's mscale_all_dim scales the softmax too (yarn_apply_mscale), by mscale².
        if (const RopeScaling& rs = m_c.ropeScaling; !rs.type.empty() && rs.mscaleAllDim != 0)
            at.scale *= mscale(rs.factor, rs.mscaleAllDim) * mscale(rs.factor, rs.mscaleAllDim);
        int o = output(at, H * vd);
        if (m_c.layout.outputGate) // Dots 3: a sigmoid of g_proj(x) per head
            gate = module(OpKind::Linear, p + "." + m_c.layout.outputGate, {x}, m_c.gatePerHead ? H : H * vd);
        if (gate >= 0)
            o = gated(p + ":gate", gate, o, Activation::Sigmoid, m_c.layout.outputGate && m_c.gatePerHead ? vd : 1);
        return module(OpKind::Linear, p + ".o_proj", {o}, m_c.hiddenSize);
    }

    int denseMlp(const std::string& p, int x, std::int64_t I)
    {
        const int g = module(OpKind::Linear, p + ".gate_proj", {x}, I);
        const int u = module(OpKind::Linear, p + ".up_proj", {x}, I);
        GraphNode& act = node(OpKind::GatedAct, p + ":act", -1, {g, u});
        act.act = m_act;
        const int a = output(act, I);
        return module(OpKind::Linear, p + ".down_proj", {a}, m_c.hiddenSize);
    }

    // One projection to a packed [gate; up] of width 2·I, act(gate) · up, the down projection.
    int packedMlp(const std::string& p, const char* in, const char* out, int x, std::int64_t I)
    {
        const int gu = module(OpKind::Linear, p + "." + in, {x}, 2 * I);
        GraphNode& act = node(OpKind::GatedAct, p + ":act", -1, {gu});
        act.packed = true;
        act.act = m_act;
        const int a = output(act, I);
        return module(OpKind::Linear, p + "." + out, {a}, m_c.hiddenSize);
    }

    int feedForward(const std::string& layerPath, int x)
    {
        // Granite's shared_mlp beside (or, without experts, in place of) the layer's feed-forward block:
        // input_linear [gate; up] → act → output_linear.
        const std::string shared = layerPath + ".shared_mlp";
        if (m_spec.find(modulePath(m_c.layout, shared))) {
            const int s = packedMlp(shared, "input_linear", "output_linear", x, m_c.sharedIntermediateSize);
            if (!m_c.isMoeLayer(m_layer) && m_c.layout.noDenseMlp)
                return s;
            return add(layerPath + ":shared_mlp_sum", feedForwardBlock(layerPath, x), s);
        }
        return feedForwardBlock(layerPath, x);
    }

    int feedForwardBlock(const std::string& layerPath, int x)
    {
        const std::string ffn = layerPath + "." + (m_c.layout.ffnBlock && m_c.isMoeLayer(m_layer) ? m_c.layout.ffnBlock : m_t.ffnBlock);
        const ModuleSpec* block = m_spec.find(modulePath(m_c.layout, ffn));
        if (block && block->kind == ModuleKind::Moe)
            return moe(ffn, *block, x);
        if (m_t.fusedGateUp || (m_c.layout.fusedGateUp && !(block && block->kind == ModuleKind::Moe)))
            return packedMlp(ffn, "gate_up_proj", "down_proj", x, m_c.denseIntermediateSize());
        const std::int64_t I = m_c.denseIntermediateSizeAt(m_layer);
        return m_c.layout.gatedMlp ? denseMlp(ffn, x, I) : ungatedMlp(ffn, x, I);
    }

    // up → act → down.
    int ungatedMlp(const std::string& p, int x, std::int64_t I)
    {
        const int u = module(OpKind::Linear, p + "." + m_c.layout.upName, {x}, I);
        GraphNode& act = node(OpKind::GatedAct, p + ":act", -1, {u});
        act.act = m_act;
        const int a = output(act, I);
        return module(OpKind::Linear, p + "." + m_c.layout.downName, {a}, m_c.hiddenSize);
    }

    int moe(const std::string& p, const ModuleSpec& block, int x)
    {
        std::string routerPath, sharedPath;
        for (int ci : block.children) {
            const ModuleSpec& c = m_spec.modules[static_cast<std::size_t>(ci)];
            if (c.kind == ModuleKind::Router)
                routerPath = c.path;
            else if (c.kind == ModuleKind::Mlp)
                sharedPath = c.path;
            else // a router's projection one level down (HunYuan's gate.wg)
                for (int gi : c.children)
                    if (m_spec.modules[static_cast<std::size_t>(gi)].kind == ModuleKind::Router)
                        routerPath = m_spec.modules[static_cast<std::size_t>(gi)].path;
        }
        const int scores = router(routerPath, x);
        const bool latent = m_c.moeLatentSize > 0; // Nemotron-H: the experts work between two latent projections
        const int xe = latent ? module(OpKind::Linear, p + ".fc1_latent_proj", {x}, m_c.moeLatentSize) : x;
        int out = experts(p + ".experts", xe, scores, latent ? m_c.moeLatentSize : m_c.hiddenSize);
        if (m_c.layout.inkling) { // every shared expert on every token, weighed by its router score
            GraphNode& e = node(OpKind::Experts, p + ".shared_experts", indexOf(p + ".shared_experts"), {x, scores});
            e.experts = e.topK = m_c.numSharedExperts;
            e.act = m_act;
            out = add(p + ":shared_sum", out, output(e, m_c.hiddenSize));
        }
        if (latent)
            out = module(OpKind::Linear, p + ".fc2_latent_proj", {out}, m_c.hiddenSize);
        if (!sharedPath.empty()) {
            const std::int64_t I = m_c.sharedIntermediateSize;
            int s = m_c.layout.fusedGateUp ? packedMlp(sharedPath, "gate_up_proj", "down_proj", x, I)
                  : m_c.layout.gatedMlp    ? denseMlp(sharedPath, x, I)
                                           : ungatedMlp(sharedPath, x, I);
            if (m_c.layout.sharedGate) // Qwen2-MoE: the shared expert's output × sigmoid(shared_expert_gate(x)), one value a token
                s = gated(p + ":shared_gate", module(OpKind::Linear, sharedPath + "_gate", {x}, 1), s, Activation::Sigmoid, m_c.hiddenSize);
            out = add(p + ":shared_sum", out, s);
        }
        if (m_c.layout.moeOutputNorm)
            out = module(OpKind::Norm, p + ".post_mlp_layernorm", {out}, m_c.hiddenSize);
        return out;
    }

    // The router at `path` over x: each token's expert scores.
    int router(const std::string& path, int x)
    {
        GraphNode& r = node(OpKind::Router, path, indexOf(path), {x});
        r.experts = m_c.numExperts;
        r.topK = m_c.expertsPerToken;
        using R = LayerLayout::Routing;
        r.sigmoid = m_c.layout.routing == R::Sigmoid || (m_c.layout.routing == R::Family && m_t.sigmoidRouter);
        r.sparseMixer = m_c.layout.routing == R::SparseMixer;
        r.logitChoice = m_c.layout.routing == R::LogitChoice;
        return output(r, m_c.numExperts, "scores");
    }

    // The routed experts at `path` on x (width `width` in and out) under the router's scores.
    int experts(const std::string& path, int x, int scores, std::int64_t width)
    {
        GraphNode& e = node(OpKind::Experts, path, indexOf(path), {x, scores});
        e.experts = m_c.numExperts;
        e.topK = m_c.expertsPerToken;
        e.act = m_act;
        using R = LayerLayout::Routing;
        const R routing = m_c.layout.routing;
        e.normalizeTopK = (routing == R::Family && m_t.alwaysNormalizeTopK)
                       || ((routing == R::Family || routing == R::Sigmoid || routing == R::LogitChoice)
                           && (m_c.layout.normalizeTopK || m_c.normTopkProb));
        e.weightInputs = m_t.routerScalesInputs;
        if (routing == R::Greedy || (routing == R::Family && m_t.sigmoidRouter)) {
            e.groups = m_c.nGroup;
            e.topkGroup = m_c.topkGroup;
            e.groupByMax = routing == R::Greedy;
        }
        if (routing == R::Greedy || routing == R::Sigmoid || (routing == R::Family && m_t.sigmoidRouter))
            e.routedScale = m_c.routedScalingFactor;
        e.sparseMixer = routing == R::SparseMixer;
        e.logitChoice = routing == R::LogitChoice;
        e.jitterEps = m_c.routerJitterNoise;
        if (m_t.clampedSwiglu) {
            e.swigluAlpha = m_c.swigluAlpha;
            e.swigluLimit = m_c.swigluLimit;
        }
        return output(e, width);
    }

    const ModelSpec& m_spec;
    LayerGraph& m_g;
    const ModelConfig& m_c;
    const ArchTraits& m_t;
    Activation m_act = Activation::Silu;
    int m_layer = -1;
    std::map<std::string, std::pair<int, int>> m_storedKv; // Gemma 4: per layer type, the keys and values shared layers reuse
    std::vector<int> m_perLayerInputs;                      // Gemma 4: each layer's slice of the per-layer embeddings
};

} // namespace

std::size_t layerSlots(const LayerGraph& g)
{
    int maxLayer = -1;
    for (const auto& n : g.nodes)
        maxLayer = std::max(maxLayer, n.layer);
    return static_cast<std::size_t>(maxLayer + 2);
}

LayerGraph buildLayerGraph(const ModelSpec& spec)
{
    LayerGraph g;
    if (spec.config.family == Family::Unknown || spec.config.numLayers <= 0)
        return g;
    g.nodes.reserve(static_cast<std::size_t>(spec.config.numLayers) * 24 + 8);
    g.tensors.reserve(static_cast<std::size_t>(spec.config.numLayers) * 28 + 8);
    GraphBuilder(spec, g).build();
    return g;
}

} // namespace tp
