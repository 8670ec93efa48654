// layer_graph.h — the forward dataflow of a model as Transformers runs it: one node per operation
// (embedding, norms, projections, attention, gated activation, router, experts, residual adds),
// over activations whose shape is [B, S, features] (symbolic in batch B and sequence S).
//
// The graph covers the whole model; `GraphNode::layer` says which decoder layer a node is in, so
// "one layer" is a filter. Nodes that belong to a module carry its index in ModelSpec::modules.
//
//   LayerGraph g = buildLayerGraph(spec);
//   for (const GraphNode& n : g.nodes) if (n.layer == 0) …
#pragma once

#include "tp/graph/activation.h"
#include "tp/model/model_spec.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tp {

enum class OpKind {
    Embedding,    // token ids → hidden
    Norm,         // RMSNorm (or LayerNorm: GraphNode::layerNorm) over the whole feature vector
    HeadNorm,     // RMSNorm per head (Qwen3/Gemma3 q_norm/k_norm; without a module: Llama 4's L2 norm)
    Linear,       // nn.Linear (also the MoE router's projection)
    Split,        // a fused output cut by global sizes (Phi-3 qkv, MLA kv_a)
    Rope,         // rotary embedding on q and k, per head
    Attention,    // softmax(q·kᵀ)·v with GQA (MLA: q, per-head kv, shared rope key)
    GatedAct,     // act(gate) · up; one packed input (Phi-3 gate_up) or two; one unpacked input: act(x)
    Router,       // top-k routing scores
    Experts,      // fused routed experts
    Mixer,        // a sequence mixer in place of attention (Mamba 2, gated delta rule, short convolution): its
                  // input projections in, the input of out_proj out; whole on every rank (computed: Mamba 2)
    Add,          // residual or shared-expert sum
    Logits,       // the model output: must be whole on every rank
};
const char* opKindName(OpKind k);

// Rotary embedding of one head size: inv_freq[j] for j < head_dim / 2, scaling applied (default,
// linear, llama3, yarn), as Transformers' rope init functions compute it, and the factor its cos and
// sin are multiplied by (yarn's attention factor; 1 otherwise).
struct RopeTable
{
    std::int64_t headDim = 0;    // the rotated dims of a head (partial rotary: fewer than the head's)
    std::vector<double> invFreq;
    double attentionScaling = 1;
    bool reversed = false;       // the sines negated: a turn by −angle (LayerLayout::ropeReversed)
    double longAttentionScaling = 0; // LongRope past switchAt, where not attentionScaling (PhiMoE's long_mscale)
    // Frequencies that depend on the forward's length L (its last position + 1), as Transformers'
    // dynamic_rope_update recomputes them: longrope takes longInvFreq once L passes switchAt; dynamic
    // NTK raises the base for L past switchAt (max_position_embeddings): theta · (factor · L / switchAt −
    // factor + 1)^(d / (d − 2)).
    enum class Kind { Fixed, LongRope, DynamicNtk } kind = Kind::Fixed;
    std::vector<double> longInvFreq;
    std::int64_t switchAt = 0;
    double theta = 0, factor = 1;

    // [positions, headDim] row-major: scaling · cos(p·inv_freq[j]) for j < headDim/2, then the sines. A
    // prefill of `prefill` tokens computes its rows with L = prefill, and each later position p, a decode
    // step's, with L = p + 1 (0: every row with the fixed frequencies).
    std::vector<float> cosSin(std::int64_t positions, std::int64_t prefill = 0) const;
    // The frequencies of a forward of length L, and its cos/sin scaling.
    std::vector<double> frequencies(std::int64_t L) const;
    double scaling(std::int64_t L) const;
};

struct GraphTensor
{
    std::string name;            // "model.layers.0.self_attn.q_proj:out"
    std::int64_t features = 0;   // global size of the last dim
    int producer = -1;           // node index, -1 for the token ids
};

struct GraphNode
{
    OpKind kind = OpKind::Linear;
    std::string name;            // module path, or path + ":op" for ops without a module
    int module = -1;             // index into ModelSpec::modules, -1: no module
    int layer = -1;
    std::vector<int> inputs;     // tensor indices
    std::vector<int> outputs;
    // Attention: heads and head sizes. Split: the part sizes. Experts/Router: E and top-k.
    std::int64_t heads = 0, kvHeads = 0, headDim = 0, vHeadDim = 0;
    std::vector<std::int64_t> parts;
    std::int64_t splitGroups = 0; // Split: the fused tensor is that many groups of [parts] (GPT-NeoX: one per head)
    std::int64_t experts = 0, topK = 0;
    bool packed = false;         // GatedAct on one packed [gate; up] input
    std::int64_t gateSpan = 1;   // GatedAct: each gate value scales that many up values (Laguna's per-head gate: head_dim)
    int ownerModule = -1;        // Attention: the attention module (owner of sinks); Mixer: its gated norm (-1: none)
    // Op attributes, so that whoever executes the node needs nothing but the node.
    double eps = 0;              // Norm, HeadNorm: RMSNorm epsilon
    double normOffset = 0;       // Norm, HeadNorm: the weight is (normOffset + w) (Gemma: 1)
    bool layerNorm = false;      // Norm: a LayerNorm (mean-centred, with the module's bias when it has one), not an RMSNorm
    int rope = -1;               // Rope, MLA's Attention: index into LayerGraph::ropes
    bool interleavedRope = false; // Rope, MLA's Attention: rotary pairs (2j, 2j + 1) (rope_interleave)
    bool ropeLeading = false;    // Rope: the table's dims turn at the head's start (partial rotary), not at its end (MLA)
    // MLA's Attention (inputs q, kv, k_pe): the width of the rope key all heads share; its heads'
    // keys are [k_nope | k_pe] with rope on the last mlaRope columns of q and k. 0: not MLA.
    std::int64_t mlaRope = 0;
    std::int64_t mlaLatent = 0;  // MLA's Attention: what its KV cache holds per token, kv_lora_rank + the rope key
    // Attention: softmax scale of q·kᵀ; Embedding: factor of its rows; Add: factor of its second input (Granite's
    // residual_multiplier); Logits: their factor (Granite's 1 / logits_scaling, Cohere's logit_scale). 0: none.
    double scale = 0;
    std::int64_t window = 0;     // Attention: sliding window (a query sees the last `window` keys), 0: none
    double softcap = 0;          // Attention: scores, Logits: logits, capped to c·tanh(x / c); 0: none
    std::int64_t chunk = 0;      // Attention: chunked attention (Llama 4), 0: none
    // Attention: Llama 4's temperature of the queries on NoPE layers (Backend::temperature); floor 0: none.
    double temperatureFloor = 0, temperatureScale = 0;
    Activation act = Activation::Silu; // GatedAct, Experts
    bool normalizeTopK = false;  // Experts: renormalise the top-k router weights to sum to 1
    bool sigmoid = false;        // Router: sigmoid scores (DeepSeek, Llama 4) rather than a softmax
    bool weightInputs = false;   // Experts: the router weight scales the input (Llama 4; ExpertsShape)
    std::int64_t groups = 1, topkGroup = 1; // Experts: DeepSeek's group-limited choice (ExpertsShape)
    double routedScale = 1;      // Experts: factor of the routed weights (routed_scaling_factor)
    bool groupByMax = false;     // Experts: groups scored by their best expert (ExpertsShape)
    bool sparseMixer = false;    // Experts: PhiMoE's sparsemixer over the router's logits (ExpertsShape); Router: no softmax
    double jitterEps = 0;        // Experts: the sparsemixer's router_jitter_noise
    bool logitChoice = false;    // Experts: chosen by logit + bias, weighed by sigmoid(logit) (ExpertsShape); Router: no softmax
    double swigluAlpha = 0, swigluLimit = 0; // Experts: gpt-oss's clamped SwiGLU (limit 0: `act`)
    // Mixer: which one. Mamba 2: `heads` heads of headDim channels in `groups` B/C groups, ssmState values a channel,
    // its prefill's time-step limits (ScanShape). The gated delta rule (inputs q, k, v, z, b, a): `heads` value heads of
    // vHeadDim over kvHeads key heads of headDim. Both: a causal convolution of convKernel taps, a gated norm of `eps`.
    // LFM2's short convolution (input [B | C | x]): one head of headDim = hidden channels, convKernel taps.
    LayerLayout::Mixer mixer = LayerLayout::Mixer::None;
    std::int64_t ssmState = 0, convKernel = 0;
    double dtMin = 0, dtMax = std::numeric_limits<double>::infinity();
};

struct LayerGraph
{
    std::vector<GraphTensor> tensors;
    std::vector<GraphNode> nodes;  // in execution order
    std::vector<RopeTable> ropes;  // the rotary tables Rope nodes name
    // Why this graph cannot be executed as Transformers computes it (an activation or rope scaling
    // the ops do not have); empty when it can. Planning ignores it.
    std::string unsupported;
};

// Per-layer figures (cost, measured spans, spreads) have one slot per decoder layer and slot 0 for
// what lies outside the layers (embedding, final norm, head): layer l is slot l + 1.
std::size_t layerSlots(const LayerGraph& g);

// Every known family has a graph; an unknown one gets an empty graph.
LayerGraph buildLayerGraph(const ModelSpec& spec);

} // namespace tp
