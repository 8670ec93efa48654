// config.h — a Hugging Face `config.json`, read with each family's real field names and defaults.
//
// Supported families (model_type): llama, mistral, qwen2, qwen3, gemma2, gemma3 / gemma3_text,
// phi3, mixtral, qwen3_moe, deepseek_v3, gpt_oss, llama4 / llama4_text. A multimodal wrapper
// (gemma3, llama4) is read through its `text_config`, as the *ForCausalLM text model sees it.
// Unknown model types parse into the common fields with `family == Family::Unknown`.
#pragma once

#include "tp/core/diagnostic.h"
#include "tp/core/status.h"
#include "tp/model/dtype.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tp {

enum class Family {
    Unknown,
    Llama,
    Mistral,
    Qwen2,
    Qwen3,
    Gemma2,
    Gemma3,
    Phi3,
    Mixtral,
    Qwen3Moe,
    DeepseekV3,
    GptOss,
    Llama4,
};

const char* familyName(Family f);             // the model_type, e.g. "qwen3_moe"
const char* causalLmClassName(Family f);      // e.g. "Qwen3MoeForCausalLM"
std::vector<Family> allFamilies();            // every known family (not Unknown)

// A model_type TP Studio opens: its own, or one whose *ForCausalLM builds the module tree and
// default plan of a template family under its own class names (exaone, internlm3 and iquestcoder
// are LlamaForCausalLM itself; gemma is Llama's tree as GemmaForCausalLM). Its config is read with
// its own config class's defaults (resources/model_types.json, made by scripts/make-model-types.py).
struct KnownModelType
{
    std::string modelType;
    Family family;             // the template
    std::string causalLmClass; // "GemmaForCausalLM"
    std::string engineLacks;   // why the engine does not run it; empty when it does
};
const std::vector<KnownModelType>& knownModelTypes();
// The model types of Transformers' pinned version that can be tensor-parallelised, as
// resources/model_types.json lists them (116 in 5.24), and that version.
std::vector<std::string> transformersTpModelTypes();
std::string pinnedTransformersVersion();
// "unknown model_type 'x': TP Studio opens N model types (… `tpstudio-cli families` lists them)": what an
// unknown type's messages say, with what to do.
std::string unknownModelTypeText(const std::string& modelType);
// The plans a model type's classes declare in the pinned Transformers, as [key, style] pairs in
// their order: the config class's base_model_tp_plan and base_model_ep_plan, the head class's
// _tp_plan. Empty lists for a model type it does not list.
struct ClassPlans
{
    std::vector<std::pair<std::string, std::string>> baseTp, baseEp, head;
    // Parameters (path suffixes) the loader de-interleaves along a dim after splitting the checkpoint's tensor.
    std::vector<std::pair<std::string, int>> interleavedOnLoad;
    // The checkpoint names Transformers renames on load, in order: each renaming's [source regex, target] pairs.
    std::vector<std::vector<std::pair<std::string, std::string>>> checkpointRenames;
};
ClassPlans transformersClassPlans(const std::string& modelType);

struct RopeScaling
{
    std::string type;            // "llama3", "yarn", "linear", "dynamic", "longrope", "proportional" (empty: none)
    double factor = 1.0;
    bool factorGiven = false;    // longrope: without one, max_position_embeddings / original_max_position_embeddings
    std::vector<double> shortFactor, longFactor;  // longrope: per-frequency divisors within and past the original context
    double partialRotaryFactor = 1.0;             // the rotated share of each head (the first int(head_dim · it) dims)
    std::int64_t originalMaxPositions = 0;
    double lowFreqFactor = 0, highFreqFactor = 0; // llama3
    double betaFast = 0, betaSlow = 0;            // yarn (0: Transformers' 32 and 1)
    bool truncate = true;                         // yarn: correction range rounded outwards
    std::optional<double> attentionFactor;        // yarn: cos/sin scaling; none: from factor, mscale
    double mscale = 0, mscaleAllDim = 0;          // yarn (DeepSeek)
    // PhiMoE's rotary embedding: cos and sin times short_mscale within the original context, long_mscale past it, and
    // its frequencies always the short ones (it calls the longrope init without the length).
    std::optional<double> shortMscale, longMscale;
};

// The rotary embedding of one kind of layer: its base and scaling.
struct LayerRope
{
    double theta = 10000.0;
    RopeScaling scaling;
};

// How a model type's decoder layer is laid out where it differs from its template family's: the
// blocks and options a row of kTemplates (config.cpp) composes. Planning, memory and export use it;
// the engine runs only the defaults.
struct LayerLayout
{
    // Where the norms sit. Pre: input_layernorm before attention, post_attention_layernorm before the
    // MLP (Llama). Post: after each block, inside the residual (OLMo 2: post_attention_layernorm,
    // post_feedforward_layernorm). Parallel: one input_layernorm feeding attention and MLP, summed
    // into the residual (Cohere). PreFeedforward: Pre with the second named pre_feedforward_layernorm
    // (VaultGemma). Peri: Pre plus post_norm1 / post_norm2 after attention and MLP (HyperCLOVA X).
    // Sandwich: Pre plus post_self_attn_layernorm / post_mlp_layernorm (GLM-4; a config's use_sandwich_norm:
    // false makes it Pre, LFM3). Gemma: input_layernorm,
    // post_attention_layernorm after attention, pre_/post_feedforward_layernorm around the MLP (Gemma 2, Beam).
    // None: no norm of the residual stream in the layer (Qwen4-Exp: its hyper-connections norm the streams).
    enum class Norms { Pre, Post, Parallel, PreFeedforward, Peri, Sandwich, Gemma, None } norms = Norms::Pre;
    // The norms' parameters: weight (RMSNorm), weight and bias (LayerNorm), none (OLMo's LayerNorm
    // without affine parameters).
    enum class NormParams { Weight, WeightAndBias, None } normParams = NormParams::Weight;
    // The layers' and the final norm are LayerNorms (mean-centred; their eps is rms_norm_eps's reading), not RMSNorms.
    bool layerNorms = false;
    bool interleavedRope = false;         // rotary pairs (2j, 2j + 1), as rope_interleave (Helium, ERNIE 4.5, GLM, Cohere)
    bool ropeReversed = false;            // rotate_half is cat(x2, −x1): the rope turns by −angle (nanochat)
    bool normedEmbeddings = false;        // the final norm also norms the embeddings before the layers (nanochat)
    // Rope on the sliding layers only, the full ones NoPE, and none without a sliding_window (Cohere 2); with
    // ropeWithoutWindow every layer has rope when the config has no sliding_window (EXAONE 4).
    bool ropeOnSlidingOnly = false;
    bool ropeWithoutWindow = false;
    bool qkNormAfterRope = false;         // q_norm / k_norm on the rotated q and k (HunYuan), not before the rope
    bool normalizeTopK = false;           // the router's top-k weights sum to 1 (Granite MoE: a softmax over the top-k logits)
    double normEps = 0;                   // the layers' and the final norm's eps where the class hard-codes it (OLMo: 1e-5)
    double normOffset = 0;                // those norms scale by (normOffset + w) (Gemma's RMSNorm, Nemotron's LayerNorm1P: 1)
    bool scaledEmbeddings = false;        // embeddings times sqrt(hidden_size) in the weights' dtype (Gemma)
    // q_norm / k_norm: the family's own (Qwen3: per head), none, per head [head_dim], or over the
    // whole projection [heads · head_dim] (OLMo 2).
    enum class QkNorm { Family, None, PerHead, Whole } qkNorm = QkNorm::Family;
    bool gatedMlp = true;                 // false: up → act → down (no gate), the experts' too (up_proj [E, I, H])
    bool fusedGateUp = false;             // one gate_up_proj [2·I, H], chunked in two (GLM)
    bool attentionBiasOnO = true;         // attention_bias puts a bias on o_proj too (false: q/k/v only, GLM)
    const char* upName = "up_proj";       // the ungated MLP's projections: up_proj/down_proj, c_fc/c_proj, fc1/fc2
    const char* downName = "down_proj";
    bool sinks = false;                   // a learned sink logit per head (self_attn.sinks)
    const char* outputGate = nullptr;     // a projection [heads · head_dim, H] whose sigmoid gates the attention output (AFMoE, Beam)
    // The output gate has one value per head, [heads, H] (LFM3); softplus(g_proj(x)) instead of a sigmoid,
    // per head when the config's `gating` is true or "per-head", else per element (Laguna). A config's
    // use_attention_gate: false leaves the gate out (LFM3).
    bool headGate = false;
    bool softplusGate = false;
    bool swaKvSinks = false;              // sliding layers have twice the key/value heads, and sinks (MiMo-V2-Flash)
    bool ownValueHeadDim = false;         // values are v_head_dim wide per head, not head_dim (MiMo-V2-Flash)
    bool qkvBias = false;                 // q/k/v always have a bias (Qwen2's attention)
    bool oProjFromHidden = false;         // o_proj is [hidden, hidden] whatever head_dim is (Helium)
    bool gqaAttention = false;            // DeepSeek-V3's MoE with standard attention, not MLA (Solar Open)
    // Mixture of experts: the layer's feed-forward attribute (nullptr: the family's), the router's
    // name (nullptr: the family's), the shared experts' name (nullptr: the family's; size
    // shared_expert_intermediate_size) and a sigmoid gate on them (Qwen2-MoE's shared_expert_gate).
    const char* ffnBlock = nullptr;
    const char* router = nullptr;
    const char* shared = nullptr;
    bool sharedGate = false;
    // DeepSeek's e_score_correction_bias: where the family has it (DeepSeek-V3: the router), on the
    // router, on the MoE block (MiniMax-M2), none (DeepSeek-V2), or a [1, E] parameter of the router's
    // moe_statics child (ERNIE 4.5).
    enum class ScoreBias { Family, Router, Block, None, Statics } scoreBias = ScoreBias::Family;
    // The shared experts' width: shared_expert_intermediate_size (Key), intermediate_size (HunYuan),
    // intermediate_size × shared experts (Aria), moe_intermediate_size × shared experts (ERNIE 4.5).
    // moe_shared_expert_intermediate_size (Nemotron-H).
    // shared_experts_intermediate_size × shared experts (Dots 3).
    enum class SharedWidth { Key, Intermediate, IntermediatePerShared, MoePerShared, MoeSharedKey, SharedKeyPerShared } sharedWidth = SharedWidth::Key;
    const char* routerLinear = nullptr;   // the router's projection is its child Linear of that name (HunYuan's gate.wg)
    bool routerF32 = false;               // the router's weight is f32 whatever the model's dtype (HunYuan, Beam)
    bool scoreBiasParam = false;          // the score bias is a parameter, not a buffer (AFMoE's expert_bias, Laguna)
    bool expertsLastPacked = false;       // experts stored [E, H, 2I] / [E, I, H] (Aria), as gpt-oss and Llama 4 store them
    const char* denseWidthKey = nullptr;  // the dense layers' MLP width under this key (MiniMax-M3's dense_intermediate_size)
    bool expertsUseIntermediate = false;  // the experts are intermediate_size wide; moe_intermediate_size is not read (HunYuan, Aria)
    bool fusedQkv = false;                // one qkv_proj [q + 2·kv, H] (CodeGen, GPT-NeoX)
    int qkvGroups = 0;                    // …as groups of [q; k; v] parts: -1 one per head (GPT-NeoX), 4 (CodeGen)
    bool qkvValuesFirst = false;          // …each group [q; v; k] (CodeGen)
    // use_parallel_residual (default true) makes the Pre norms parallel: h + attn(input_layernorm(h)) +
    // mlp(post_attention_layernorm(h)) (GPT-NeoX).
    bool parallelResidualKey = false;
    // How the router's scores choose experts where the family's way is not the model's: Sigmoid, sigmoid scores with a
    // top-k over score + bias (renormalised by normalizeTopK or norm_topk_prob; MiniMax-M2, Flint); Greedy, DeepSeek-V2's softmax top-k (within the topk_group best
    // of n_group groups, each scored by its best expert, when topk_method is group_limited_greedy), never renormalised,
    // times routed_scaling_factor; SparseMixer, PhiMoE's sparsemixer over the logits; LogitChoice, Kolibri's top-k over
    // logit + bias weighed by sigmoid(logit), renormalised like Sigmoid (ExpertsShape).
    enum class Routing { Family, Sigmoid, Greedy, SparseMixer, LogitChoice } routing = Routing::Family;
    bool alwaysAttentionBias = false;     // q/k/v/o have biases whatever attention_bias says (Phi)
    // Doge's dynamic mask: dt_proj [kv heads, kv heads · head_dim] over the values and A [kv heads] (its CDMoE,
    // is_moe, is refused).
    bool dynamicMask = false;
    bool alwaysMlpBias = false;           // the MLP's projections have biases (GPT-J, Phi, GPT-NeoX)
    // MiniCPM's scales as Granite's multipliers: embeddings × scale_emb, each residual branch × scale_depth /
    // sqrt(num_hidden_layers), the head's input ÷ hidden_size / dim_model_base.
    bool miniCpmScales = false;
    bool moeOutputNorm = false;           // an RMSNorm on the MoE block's output, mlp.post_mlp_layernorm (A.X K1)
    bool lmHeadBias = false;              // lm_head has a bias (Phi, GPT-J, CodeGen)
    bool lmHeadScale = false;             // lm_head has a logit_scale [vocab] (Dory)
    // The model type's own names for the template's modules: "from=to" pairs, comma-separated; from
    // is a module's name, or "parent.name" to rename it under that parent only (GPT-J: model=transformer,
    // layers=h, self_attn=attn, o_proj=out_proj).
    const char* renames = nullptr;
    // Parameters the template does not have: "module:name[dims],name[dims];module:…", the module a path
    // under the decoder layer (made if missing: a Linear when it holds a 2-D weight). Dims are products
    // of an integer and at most one size: H hidden_size, hd head_dim, nh heads, kv key/value heads,
    // I intermediate_size, S shared_intermediate_size, E experts, Q the query width (heads · head_dim), qr q_lora_rank, xq, xd and xn a
    // sparse-attention indexer's query width (index_n_heads · index_head_dim), head size and heads; [] is a scalar; ~name a buffer. A
    // group written "type?module:…" is made only on the layers whose layer_types entry is type, or
    // with routed experts (sparse) or without (dense). A module with a zero
    // dimension is left out (GraniteMoeShared's shared_mlp when shared_intermediate_size is 0).
    const char* extras = nullptr;
    // A sequence mixer in place of attention on the layers whose layer_types entry is mixerLayer:
    // Mamba (Jamba), Mamba 2 (Bamba, Granite 4), the gated delta rule with fused (Qwen3-Next) or separate (Qwen3.5)
    // input projections or with q/k/v/a/b/g_proj and o_proj of their own (OLMo-Hybrid), LFM2's short convolution,
    // MiniMax's lightning attention, or Kimi delta attention with low-rank (Kimi Linear) or full (Bailing) gate
    // projections. All are planned (shards, collectives, memory); the engine computes Mamba 2 (its convolution and scan
    // states beside the KV cache), the others not yet.
    enum class Mixer {
        None, Mamba1, Mamba2, GatedDeltaNet, GatedDeltaNetSplit, GatedDeltaNetOwn, ShortConv, Lightning, KimiDelta, KimiDeltaFull
    } mixer = Mixer::None;
    const char* mixerName = nullptr;  // the layer's attribute: mamba, linear_attn, conv
    const char* mixerLayer = nullptr; // its layer_types value: linear_attention, conv
    bool mixerPreNorms = false;       // the mixer layers have Pre norms, the attention layers `norms` (OLMo-Hybrid: Post)
    bool noDenseMlp = false;          // a layer without experts has no MLP of its own (Granite 4's dense models)
    bool parallelMixer = false;       // every layer has the mixer beside attention, their outputs summed (Falcon-H1)
    // Each layer is one block, norm → block → residual, of the kind its layer_types entry names: mixerLayer (the
    // mixer), full_attention, mlp or moe (Nemotron-H). Its norm is input_layernorm's.
    bool blockPerLayer = false;
    // Gemma 4: per_layer_config's head sizes, attention_k_eq_v, shared key/value layers, double-wide MLPs, per-layer
    // embeddings (hidden_size_per_layer_input) and an experts block beside every layer's MLP (enable_moe_block).
    bool gemma4 = false;
    // LongCat-Flash: each layer runs two attention + MLP sublayers (self_attn, mlps, and both norms are lists of two)
    // and a shortcut MoE from the first sublayer's MLP input, added after the second.
    bool dualSublayers = false;
    bool gatedQuery = false;          // q_proj also yields a sigmoid gate on the attention output, per head [2·q, H] (Qwen3-Next)
    // MLA's query and a sigmoid gate on the attention output from one q_gate_proj [heads · (qk + v), 2 · q_lora_rank] over
    // [q_a_layernorm(q_a) | q_a], per head [q | gate] (A.X K2).
    bool mlaQueryGate = false;
    // input_layernorm, and post_attention_layernorm on the layers with experts, are RMSNorms gated by a low-rank MLP of their
    // output: y · sigmoid(fc2(silu(fc1(y)))), y = norm(x), fc1 [gated_norm_rank, H] (A.X K2's GatedRMSNorm).
    bool gatedNorms = false;
    // Dots 3: per_layer_config's MLA sizes (or the swa_* keys' on sliding layers), a per-head sigmoid gate g_proj on MLA's
    // output (outputGate, headGate) and an RMSNorm of the shared rope key (k_rope_only_layernorm).
    bool mlaPerLayer = false;
    bool mlaRopeNorm = false;
    // MLA's q_a_layernorm and kv_a_layernorm take rms_norm_eps (Dots 3); the DeepSeek-style ones keep their class's
    // default eps, 1e-6, whatever the config says.
    bool mlaNormsConfigEps = false;
    // HRM: two stacks of num_layers_per_stack layers, model.L_module and model.H_module (parameterless norms, a
    // parameterless final_norm each), run as H_cycles × (L_cycles runs of L_module, one of H_module); each run of a layer
    // is a decoder layer of its own in the graph and the KV cache (num_hidden_layers counts them, as Transformers does).
    bool hierarchicalStacks = false;
    // Gemma 3n: AltUp's altup_num_inputs streams of the hidden state (altup_projections in, altup_unembed_projections out;
    // per layer a router predicting the streams and correcting them), a LAuReL low-rank branch beside attention, per-layer
    // embeddings and MLP widths, v_norm without a weight.
    bool altUp = false;
    // Hyper-connections: the residual stream is hc_mult copies of the hidden state; each layer's attn_hc and ffn_hc weigh
    // them into the block's input and spread its output back (HY-V4: fn [2·hc_mult, hc_mult·H], base [2·hc_mult], scale
    // [2], f32), and the model's hc_head collapses them before the final norm (hc_fn [hc_mult, hc_mult·H], hc_base,
    // hc_scale [1]). Planned as parameters; their mixing is not costed. Qwen4-Exp's gated residuals (Qwen4): per layer
    // attn_ and mlp_hyper_connection, hc_norm [k·H], input_mix_weight_down [hc_lowrank, k·H] and _up back, and
    // block_inject_weight [k, k·H]; the model's hyper_connection_mixer (without block_inject_weight) in place of the
    // final norm. The graph carries the k·H-wide streams through them.
    // DeepSeek-V4 (DeepseekV4): fn [(2 + hc_mult)·hc_mult, hc_mult·H] (pre, post and comb weights), base, scale [3].
    enum class HyperConnections { None, HyV4, Qwen4, DeepseekV4 } hyperConnections = HyperConnections::None;
    bool qsaIndexer = false; // Qwen4-Exp's indexer: index_qk_proj [(heads + kv heads) · head size, H] and its q/k norms
    bool indexerKeysF32 = false; // the indexer's cached keys are float32 (dots3's k_norm returns float32)
    // Inkling: a normed embedding (embed_tokens.embed_norm), sliding layers ("hybrid_sliding") with heads and head size
    // of their own (swa_*), short convolutions on k, v and both blocks' outputs, a relative-position bias from r_proj,
    // and a MoE block whose router also scores the shared experts, stored as [n_shared, I, H] parameters.
    bool inkling = false;
    // Inkling 2: no rope; per layer q/k/v_proj modules of a Linear with a per-head scaled L2 clip (q) or a short
    // convolution over its output (k, v: on full layers, taps from a projection of the input too), a gated o_proj, a
    // per-token sink per head, a relative-position bias; f32 short convolutions after both blocks; depth attention over
    // the block states (attention_input, mlp_input, the model's final_input: learned f32 queries); full layers' own
    // q/k/v_input_layernorm. Only the routed experts and lm_head (over unpadded_vocab_size rows) are in its plan.
    // Inkling 2 Loop: layers [loopStart, loopEnd) run loopPasses times, later passes through message gates.
    bool inkling2 = false;
    // DeepSeek-V4's attention: q through q_lora_rank (q_a_proj, q_a_norm, q_b_proj), one key head that is also the value
    // (kv_proj, kv_norm), f32 sinks, a grouped low-rank output (o_a_proj per o_groups group, o_b_proj); on compressed
    // layers a compressor of every compress_rate tokens into one more key (heavily_compressed_attention: kv_proj and
    // gate_proj of head_dim; compressed_sparse_attention: twice that, overlapping windows, and a lightning indexer that
    // picks index_topk of them). Its routers are hash-routed (tid2eid) on hash_moe layers.
    bool compressedAttention = false;
    // Phi-4-multimodal: the model's embed_tokens_extend holds a SigLIP image encoder and a Conformer audio encoder
    // (vision_config, audio_config) with their projections; replicated, they run only on image and audio inputs.
    bool multimodalEncoders = false;
};

// "Mamba", "Mamba 2", "gated delta rule", "short convolution" (none: "").
const char* mixerTitle(LayerLayout::Mixer m);
// The mixer's output projection: o_proj (OLMo-Hybrid, Kimi delta attention) or out_proj.
const char* mixerOutName(LayerLayout::Mixer m);

// The sizes of a LayerLayout::Mixer, read from the model type's keys.
struct MixerSizes
{
    std::int64_t heads = 0;      // value heads (gated delta rule), Mamba or Kimi delta attention heads
    std::int64_t keyHeads = 0, keyDim = 0, valueDim = 0; // gated delta rule (Kimi delta attention: valueDim its head size)
    std::int64_t inner = 0;      // Mamba's intermediate width (mamba_expand · hidden_size)
    std::int64_t state = 0, groups = 1;                  // Mamba's SSM state size and B/C groups
    std::int64_t dtRank = 0;     // Mamba 1's time-step rank (mamba_dt_rank; "auto": ceil(hidden_size / 16))
    std::int64_t kernel = 0;     // the causal convolution's width
    std::int64_t block = 0;      // lightning attention's block (block_size): its decay buffers are per block position
    bool convBias = false, projBias = false, outBias = false; // out_proj's bias: projBias, Falcon-H1's projectors_bias
    bool norm = true;            // Mamba's gated RMSNorm (Falcon-H1: mamba_rms_norm)
    // Mamba 2's time step clamped to [dtMin, dtMax] in a prefill (time_step_limit; Nemotron-H: [time_step_min, ∞)).
    // Transformers' decode step does not clamp it.
    double dtMin = 0, dtMax = std::numeric_limits<double>::infinity();
};

struct ModelConfig
{
    Family family = Family::Unknown;        // the template family whose tree the model type has
    std::string modelType;                  // as written (the text config's, when nested)
    std::string causalLmClass;              // e.g. "GemmaForCausalLM"; empty for an unknown model type
    LayerLayout layout;                     // the model type's layer, where it differs from the family's
    std::string engineLacks;                // why the engine does not run this model type; empty when it does
    std::string wrapperModelType;           // the outer model_type when read through text_config
    std::vector<std::string> architectures; // as written in the outer config

    std::int64_t vocabSize = 0;
    std::int64_t hiddenSize = 0;
    std::int64_t intermediateSize = 0;
    std::int64_t numLayers = 0;
    std::int64_t numHeads = 0;
    std::vector<std::int64_t> headsPerLayer; // num_attention_heads_per_layer (Laguna); empty: numHeads on every layer
    // Gemma 4's per_layer_config: a layer's own head_dim and num_key_value_heads (0: the global value); the last
    // kvSharedLayers layers reuse an earlier layer's keys and values (no k/v_proj); attention_k_eq_v: full layers'
    // values are their keys (no v_proj); use_double_wide_mlp: the shared layers' MLPs twice as wide; per-layer
    // embeddings of perLayerInputSize per layer from a vocabulary of perLayerInputVocab (0: none).
    std::vector<std::int64_t> headDimPerLayer, kvHeadsPerLayer;
    std::int64_t kvSharedLayers = 0;
    bool kEqV = false, doubleWideMlp = false;
    std::int64_t perLayerInputSize = 0, perLayerInputVocab = 0;
    bool gatePerHead = false;              // the output gate has one value per head (LayerLayout::headGate, softplusGate)
    std::int64_t numKvHeads = 0;
    std::int64_t headDim = 0;
    bool headDimGiven = false;             // false: derived as hidden / heads
    std::int64_t maxPositionEmbeddings = 0;
    double rmsNormEps = 1e-6;
    double ropeTheta = 10000.0;
    RopeScaling ropeScaling;
    bool tieWordEmbeddings = false;
    bool attentionBias = false;            // bias on q/k/v (qwen2: always; gpt_oss: q/k/v/o)
    bool mlpBias = false;
    std::optional<bool> attentionOutBias;  // o_proj's bias, where a key of its own says (else attention_bias)
    std::string hiddenAct = "silu";      // hidden_act / hidden_activation ("silu", "gelu_pytorch_tanh", …)
    std::optional<std::int64_t> slidingWindow;
    std::vector<std::string> layerTypes;   // "full_attention" / "sliding_attention" per layer
    // The sliding layers' own rope, when it differs from rope_theta/ropeScaling (Gemma 3's local base:
    // rope_parameters.sliding_attention, or rope_local_base_freq).
    std::optional<LayerRope> slidingRope;
    // Gemma: softmax scale query_pre_attn_scalar^-1/2 instead of head_dim^-1/2, and tanh soft-capping
    // of the attention scores and of the logits (cap · tanh(x / cap); none when unset).
    std::optional<double> queryPreAttnScalar;
    std::optional<double> attnLogitSoftcap, finalLogitSoftcap;
    // Granite's multipliers: embeddings × embedding_multiplier, the softmax scale attention_multiplier (instead of
    // head_dim^-1/2), each block's output × residual_multiplier before the residual sum, logits / logits_scaling;
    // Cohere's logits × logit_scale. None: the Llama forward.
    std::optional<double> embeddingMultiplier, attentionMultiplier, residualMultiplier, logitsScaling, logitScale;
    bool bidirectionalAttention = false;   // use_bidirectional_attention (Gemma encoders)
    // Llama 4: the layers with rope (no_rope_layers[l] = 1; the others are NoPE), chunked attention
    // on the layers layer_types names "chunked_attention", the L2 norm of q and k on rope layers
    // (use_qk_norm), and on NoPE layers the queries scaled by log1p(floor((pos + 1) / floor_scale))
    // · attn_scale + 1 (attn_temperature_tuning).
    std::vector<std::int64_t> noRopeLayers;
    std::optional<std::int64_t> attentionChunkSize;
    bool useQkNorm = false;
    bool attnTemperatureTuning = false;
    double floorScale = 8192, attnScale = 0.1;
    DType dtype = DType::F32;              // torch_dtype / dtype; float32 when absent
    bool dtypeGiven = false;

    // Mixture of experts (numExperts == 0: dense model).
    std::int64_t numExperts = 0;
    std::int64_t expertsPerToken = 0;
    std::int64_t moeIntermediateSize = 0;  // per-expert intermediate size
    std::int64_t zeroExperts = 0;          // LongCat-Flash's zero_expert_num: identity experts the router also scores
    std::int64_t altUpInputs = 0, laurelRank = 0;            // LayerLayout::altUp
    std::int64_t hcMult = 0;                                   // LayerLayout::hyperConnections: the streams (hc_mult, hc_count)
    std::int64_t hcLowRank = 0;                                // Qwen4-Exp's hc_lowrank
    std::int64_t dRel = 0, relExtent = 0, convKernel = 0;      // LayerLayout::inkling: d_rel, rel_extent, conv_kernel_size
    std::int64_t oGroups = 0, oLoraRank = 0;                   // LayerLayout::compressedAttention's grouped output
    std::int64_t compressRateCsa = 0, compressRateHca = 0;     // …its compressors' windows (compress_rates)
    std::vector<std::string> routerTypes;                      // "hash_moe" / "moe" per layer (DeepSeek-V4's mlp_layer_types)
    std::int64_t unpaddedVocab = 0;                            // lm_head's rows, when fewer than vocab_size (Inkling 2); 0: vocab_size
    std::int64_t loopStart = 0, loopEnd = 0, loopPasses = 1, loopGateRank = 0; // LayerLayout::inkling2's loop (none: loopEnd 0)
    // LayerLayout::multimodalEncoders: the sizes of Phi-4-multimodal's vision_config and audio_config.
    struct VisionEncoder
    {
        std::int64_t hidden = 0, intermediate = 0, layers = 0, channels = 0, patch = 0, imageSize = 0;
    } vision;
    struct AudioEncoder
    {
        std::int64_t hidden = 0, intermediate = 0, blocks = 0, heads = 0, inputSize = 0, timeReduction = 0, convChannels = 0,
                     finalSize = 0, depthwiseMultiplier = 0, depthwiseOut = 0, extPwOut = 0, kernel = 0, biasBuckets = 0,
                     downsample = 0;
    } audio;
    std::vector<std::string> indexerTypes;                     // "full" / "shared" per layer: its own indexer or the last one's (HY-V4)
    std::vector<std::int64_t> intermediatePerLayer;            // intermediate_size as a list, one a layer (Gemma 3n)
    std::int64_t layersPerStack = 0, hCycles = 0, lCycles = 0; // LayerLayout::hierarchicalStacks
    // LayerLayout::hierarchicalStacks: the stack ("L_module" / "H_module") and its layer that graph layer `layer` runs.
    std::pair<const char*, std::int64_t> stackLayerAt(std::int64_t layer) const
    {
        const std::int64_t run = layer / layersPerStack; // h · (L_cycles + 1) + l
        return {run % (lCycles + 1) == lCycles ? "H_module" : "L_module", layer % layersPerStack};
    }
    std::int64_t gatedNormRank = 0;        // LayerLayout::gatedNorms: the gate's rank (gated_norm_rank)
    std::int64_t moeLatentSize = 0;        // the routed experts' width between fc1/fc2_latent_proj (Nemotron-H); 0: hidden_size
    std::int64_t numSharedExperts = 0;     // deepseek_v3 n_shared_experts; llama4: 1
    std::int64_t sharedIntermediateSize = 0;
    std::int64_t firstKDenseReplace = 0;   // deepseek_v3
    std::int64_t decoderSparseStep = 1;    // qwen3_moe (ERNIE 4.5's moe_layer_interval)
    std::int64_t lastMoeLayer = -1;        // ERNIE 4.5's moe_layer_end_index: no experts after it (-1: none)
    std::vector<std::int64_t> mlpOnlyLayers; // qwen3_moe
    std::vector<std::string> mlpLayerTypes; // "dense" / "sparse" per layer (mlp_layer_types); before the family's rule
    MixerSizes mixer;                       // LayerLayout::mixer's sizes
    std::int64_t interleaveMoeLayerStep = 1; // llama4
    std::int64_t intermediateSizeMlp = 0;  // llama4 dense layers (LayerLayout::denseWidthKey)
    std::int64_t indexHeads = 0, indexHeadDim = 0; // a sparse-attention indexer's heads and head size (MiniMax-M3)
    std::int64_t indexKvHeads = 0;                 // …and its key heads (Qwen4-Exp's indexer_kv_heads)
    bool normTopkProb = false;             // renormalize the top-k router weights (qwen3_moe's norm_topk_prob)
    // DeepSeek-V3's router: sigmoid scores, the top-k among the experts of the topk_group best of
    // n_group groups (chosen by score + e_score_correction_bias), weights times routed_scaling_factor.
    std::int64_t nGroup = 1, topkGroup = 1;
    double routedScalingFactor = 1;
    double routerJitterNoise = 0;          // PhiMoE's sparsemixer eps (router_jitter_noise)
    bool parallelResidual = false;         // LayerLayout::parallelResidualKey's use_parallel_residual
    // generate() drops the KV cache and recomputes every position at the step whose length first passes this one
    // (Phi-3's, Phi-4-multimodal's and PhiMoE's prepare_inputs_for_generation, by a top-level
    // original_max_position_embeddings); 0: never.
    std::int64_t recomputeCacheAfter = 0;
    // gpt-oss's experts: (clamp(up, ±limit) + 1) · g·σ(alpha·g), g = min(gate, limit).
    double swigluAlpha = 1.702, swigluLimit = 7.0;

    // Multi-head latent attention (deepseek_v3).
    std::optional<std::int64_t> qLoraRank; // none: a plain q_proj
    std::int64_t kvLoraRank = 0;
    std::int64_t qkRopeHeadDim = 0;
    std::int64_t qkNopeHeadDim = 0;
    std::int64_t vHeadDim = 0;
    bool ropeInterleave = false;           // rope_interleave: rotary pairs (2j, 2j + 1) (DeepSeek's default)
    // One layer's MLA sizes: the global ones, or its own (LayerLayout::mlaPerLayer; heads as headsAt).
    struct MlaSizes
    {
        std::optional<std::int64_t> qLoraRank;
        std::int64_t kvLoraRank = 0, qkRopeHeadDim = 0, qkNopeHeadDim = 0, vHeadDim = 0;
    };
    std::vector<MlaSizes> mlaPerLayer;     // empty: every layer the global sizes
    MlaSizes mlaAt(std::int64_t layer) const
    {
        if (layer >= 0 && static_cast<std::size_t>(layer) < mlaPerLayer.size())
            return mlaPerLayer[static_cast<std::size_t>(layer)];
        return {qLoraRank, kvLoraRank, qkRopeHeadDim, qkNopeHeadDim, vHeadDim};
    }

    std::optional<std::string> quantization; // quantization_config.quant_method, if any
    // fp8's quantization_config.weight_block_size: one scale per [out × in] block of a weight's last two
    // dims (DeepSeek-V3: 128 × 128); empty: none given (per-tensor or per-channel scales).
    std::vector<std::int64_t> quantBlock;
    // AWQ / GPTQ (quant_method "awq" / "gptq"): bits per weight and the input rows that share a scale and a zero
    // (group_size; -1 reads as the whole input); modules_to_not_convert keep the model's dtype.
    int quantBits = 0;
    std::int64_t quantGroup = 0;
    std::vector<std::string> quantSkip;

    bool isMoe() const { return numExperts > 0; }
    std::int64_t headRows() const { return unpaddedVocab > 0 ? unpaddedVocab : vocabSize; } // lm_head's rows, the logits' width
    bool isMla() const { return family == Family::DeepseekV3 && !layout.gqaAttention && !layout.compressedAttention; }
    // Whether decoder layer `layer` has a routed-expert block.
    bool isMoeLayer(std::int64_t layer) const;
    // LayerLayout::gatedNorms: whether the layer's norm of that name is gated.
    bool gatedNormAt(std::int64_t layer, std::string_view name) const;
    // Layer `layer`'s query heads, key/value heads, value head size and whether it has sinks (LayerLayout::swaKvSinks,
    // ownValueHeadDim, sinks).
    bool slidingLayer(std::int64_t layer) const
    {
        return layer >= 0 && static_cast<std::size_t>(layer) < layerTypes.size()
            && (layerTypes[static_cast<std::size_t>(layer)] == "sliding_attention" || layerTypes[static_cast<std::size_t>(layer)] == "hybrid_sliding");
    }
    std::int64_t headsAt(std::int64_t layer) const
    {
        return layer >= 0 && static_cast<std::size_t>(layer) < headsPerLayer.size() ? headsPerLayer[static_cast<std::size_t>(layer)] : numHeads;
    }
    std::int64_t kvHeadsAt(std::int64_t layer) const
    {
        const std::int64_t own = perLayer(kvHeadsPerLayer, layer);
        return (own ? own : numKvHeads) * (layout.swaKvSinks && slidingLayer(layer) ? 2 : 1);
    }
    std::int64_t headDimAt(std::int64_t layer) const
    {
        const std::int64_t own = perLayer(headDimPerLayer, layer);
        return own ? own : headDim;
    }
    std::int64_t valueHeadDim() const { return layout.ownValueHeadDim && vHeadDim > 0 ? vHeadDim : headDim; }
    std::int64_t valueHeadDimAt(std::int64_t layer) const { return layout.ownValueHeadDim && vHeadDim > 0 ? vHeadDim : headDimAt(layer); }
    // Gemma 4: the layer reuses an earlier layer's keys and values; its values are its keys.
    bool kvSharedAt(std::int64_t layer) const { return layer >= numLayers - kvSharedLayers; }
    bool valuesAreKeys(std::int64_t layer) const { return kEqV && !slidingLayer(layer); }
    bool sinksAt(std::int64_t layer) const { return family == Family::GptOss || layout.sinks || (layout.swaKvSinks && slidingLayer(layer)); }
    static std::int64_t perLayer(const std::vector<std::int64_t>& v, std::int64_t layer)
    {
        return layer >= 0 && static_cast<std::size_t>(layer) < v.size() ? v[static_cast<std::size_t>(layer)] : 0;
    }
    // Whether the layer has the layout's sequence mixer in place of attention (Falcon-H1: beside it).
    bool isMixerLayer(std::int64_t layer) const
    {
        return layout.mixer != LayerLayout::Mixer::None && layer >= 0
            && (layout.parallelMixer
                || (static_cast<std::size_t>(layer) < layerTypes.size() && layerTypes[static_cast<std::size_t>(layer)] == layout.mixerLayer));
    }
    // Intermediate size of the dense MLP layers (Llama 4 keeps it in intermediate_size_mlp, MiniMax-M3 in
    // dense_intermediate_size).
    std::int64_t denseIntermediateSize() const
    {
        return family == Family::Llama4 || layout.denseWidthKey ? intermediateSizeMlp : intermediateSize;
    }
    // …on layer `layer`: twice as wide on Gemma 4's shared key/value layers with use_double_wide_mlp.
    std::int64_t denseIntermediateSizeAt(std::int64_t layer) const
    {
        if (const std::int64_t own = perLayer(intermediatePerLayer, layer))
            return own;
        return denseIntermediateSize() * (doubleWideMlp && kvSharedAt(layer) ? 2 : 1);
    }
};

// Parses config.json text. `source` names the file in errors ("…/config.json: key 'hidden_size' …").
// Non-fatal findings (unknown model type, ignored fields) are appended to `diags`.
Result<ModelConfig> parseConfig(std::string_view text, const std::string& source, std::vector<Diagnostic>* diags);
Result<ModelConfig> parseConfigJson(const nlohmann::json& j, const std::string& source, std::vector<Diagnostic>* diags);
Result<ModelConfig> loadConfigFile(const std::string& path, std::vector<Diagnostic>* diags);

} // namespace tp
