// backend.h — one rank's device as the executor sees it: its memory, two streams with events, and
// the op set a Transformer forward needs. The CPU backend is the reference; the CUDA backend
// implements the same contract, and tests hold every op of every backend to the CPU's fp32 result.
//
// Contract of every op:
//   - Tensors live on this backend's device and are stored in its storage dtype unless the op says
//     otherwise; arithmetic accumulates in fp32 and rounds once, when the result is stored.
//   - Ops are enqueued on the compute stream and may return before the device is done (the CPU runs
//     them at once). They never allocate: every buffer comes from allocate(), called before the
//     first iteration; an op that needs working memory takes a `scratch` tensor of at least the
//     bytes its *ScratchBytes() asks for.
//   - Shapes are checked here, before the backend sees them (InvalidArgument naming the op); empty
//     tensors are legal (a rank whose shard is empty computes nothing, or zeros).
//
//   auto be = makeCpuBackend(DType::BF16).value();
//   auto mem = be->allocate(bytes).value();
//   TP_RETURN_IF_ERROR(be->gemm(x, w, &bias, y, scratch));
#pragma once

#include "tp/core/status.h"
#include "tp/graph/activation.h"
#include "tp/runtime/tensor.h"

#include <cstdint>
#include <limits>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace tp {

// Memory from Backend::allocate, freed when the last owner goes.
class DeviceBuffer
{
public:
    DeviceBuffer() = default;
    DeviceBuffer(void* data, std::int64_t bytes, std::function<void(void*)> release)
        : m_data(data, std::move(release))
        , m_bytes(bytes)
    {
    }
    void* data() const { return m_data.get(); }
    std::int64_t bytes() const { return m_bytes; }

private:
    std::unique_ptr<void, std::function<void(void*)>> m_data{nullptr, [](void*) {}};
    std::int64_t m_bytes = 0;
};

enum class Stream {
    Compute,   // ops
    Comm,      // the communicator's collectives
};

struct BackendStats
{
    std::int64_t allocations = 0;        // calls of allocate() (and any other device allocation)
    std::int64_t allocatedBytes = 0;
};

// q [B·S, heads·headDim] → y [B·S, heads·vDim()] over keys k [B·R, kvHeads·headDim] and values
// v [B·R, kvHeads·vDim()] (R = rows(): each sequence's rows of a KV cache, or its S tokens; vDim():
// the value head size, headDim unless MLA's vHeadDim differs): query i of sequence b is at
// position past + i and sees keys 0 … past + i of its sequence (causal; with a sliding window W only
// the last W of them, past + i − W < j; with chunks of C only those of its own chunk, j / C =
// (past + i) / C); query head h reads key/value head h / (heads / kvHeads).
// Scores are scale · q·k, soft-capped to c·tanh(s / c) when softcap c > 0, before the softmax.
// With sinks (gpt-oss: one logit per query head, [1, heads]) each row's softmax also runs over its
// head's sink logit, whose probability is then dropped (the weights sum to less than 1).
// Prefill: past = 0; a decode step: S = 1, past = tokens already cached.
struct AttentionShape
{
    std::int64_t batch = 1;
    std::int64_t seq = 0;                // queries per sequence
    std::int64_t heads = 0;              // this rank's query heads
    std::int64_t kvHeads = 0;            // this rank's key/value heads (heads is a multiple)
    std::int64_t headDim = 0;            // of q and k
    std::int64_t vHeadDim = 0;           // of v and y; 0: headDim
    double scale = 0;                    // softmax(scale · q·kᵀ)
    std::int64_t past = 0;               // keys before the first query, per sequence
    std::int64_t keyRows = 0;            // rows per sequence in k and v; 0: seq
    std::int64_t window = 0;             // sliding window in keys; 0: none
    double softcap = 0;                  // 0: none
    std::int64_t chunk = 0;              // chunked attention in positions (Llama 4); 0: none

    std::int64_t keys() const { return past + seq; }           // keys the last query sees
    std::int64_t rows() const { return keyRows > 0 ? keyRows : seq; }
    std::int64_t vDim() const { return vHeadDim > 0 ? vHeadDim : headDim; }
};

// This rank's part of a fused routed-experts layer: experts [firstExpert, firstExpert +
// localExperts) of `experts`, each with `intermediate` rows of gate and of up (a TP shard of the
// intermediate dim, or all of it).
// Expert groups an experts call may have (a bitmask of the chosen ones on the GPU).
inline constexpr std::int64_t kMaxExpertGroups = 64;

struct ExpertsShape
{
    std::int64_t experts = 0;            // E: router scores per token
    std::int64_t topK = 0;
    std::int64_t firstExpert = 0;
    std::int64_t localExperts = 0;
    std::int64_t intermediate = 0;
    bool normalize = false;              // renormalise the top-k weights to sum to 1
    Activation act = Activation::Silu;
    // gpt-oss's layout: gate_up [localExperts · H, 2·intermediate] and down [localExperts ·
    // intermediate, H] (x · W, as stored), gate and up alternating in each gate_up row.
    bool transposed = false, interleaved = false;
    double swigluAlpha = 0, swigluLimit = 0; // limit > 0: gpt-oss's clamped SwiGLU instead of `act`
    // false: ungated experts (Nemotron-H): gateUp holds each expert's up rows alone, [localExperts · intermediate, H], and
    // the expert computes down(act(up · x)).
    bool gated = true;
    // DeepSeek-V3's group-limited choice: the experts in `groups` equal groups, each group scored by
    // the sum of its best two choice scores (score + the score bias); only the experts of the best
    // `topkGroup` groups compete for the top-k. The weights are the scores themselves (without the
    // bias), times routedScale after any renormalisation.
    std::int64_t groups = 1, topkGroup = 1;
    double routedScale = 1;
    bool groupByMax = false; // DeepSeek-V2's group_limited_greedy: a group scores its best expert, not its best two
    // PhiMoE's sparsemixer (topK 2): the best expert of the scores (logits), weighed by the softmax over the experts
    // within 2·jitterEps of it, relatively (|best − s| / max(|s|, best)); then the same among the others.
    bool sparseMixer = false;
    double jitterEps = 0;
    bool logitChoice = false; // the scores are logits: chosen by logit + bias, each weighed by sigmoid(logit) (Kolibri)
    // Llama 4: each pick's weight scales the expert's input (the expert computes on weight · x,
    // rounded to the storage dtype), and the outputs add up unweighted.
    bool weightInputs = false;
    // Rows an all-to-all dispatch brought (Transformers' AllToAllEP): scores is I32 [n, 1], each
    // row's local expert, and every row runs that one expert with weight 1 (topK = 1); the router
    // weights are the sender's, applied by combine().
    bool givenExperts = false;
    // Transformers' Llama4TextExperts: y is [localExperts · n, H], expert e's output for token t at
    // row e·n + t and zeros where t did not pick e (each expert runs on every token, pre-scaled by
    // its weight: 0 when not picked), unsummed: the experts' reduction moves every expert's rows and
    // sumBlocks() adds them up after it.
    bool perExpertRows = false;
};

// Mamba 2's selective state-space scan over `batch` sequences of equal length (Backend::ssmScan): `heads` heads of
// `headDim` channels, each reading the B and C of group h / (heads / groups), `state` values per channel.
struct ScanShape
{
    std::int64_t batch = 1;
    std::int64_t heads = 0, headDim = 0, groups = 1, state = 0;
    double dtMin = 0, dtMax = std::numeric_limits<double>::infinity(); // the time step clamped to [dtMin, dtMax]
    bool fresh = true;                   // a prefill: the state starts at zeros (else: a decode step continues it)
};

// The gated delta rule over `batch` sequences of equal length (Backend::deltaRule): valueHeads heads of valueDim, each
// reading key head h / (valueHeads / keyHeads) of keyDim.
struct DeltaShape
{
    std::int64_t batch = 1;
    std::int64_t keyHeads = 0, valueHeads = 0, keyDim = 0, valueDim = 0;
    bool fresh = true;                   // a prefill: the state starts at zeros (else: a decode step continues it)
};

// Seeded random weights that do not depend on the device or the tp size: local element
// `local + i` of run r takes the value of global element `global + i`,
//   base + scale · (2u − 1),  u = (splitmix64(key ^ splitmix64(global + i)) >> 11) · 2⁻⁵³.
struct FillRun
{
    std::int64_t local = 0;
    std::int64_t global = 0;
    std::int64_t count = 0;
};
struct UniformFill
{
    std::uint64_t key = 0;
    float base = 0;
    float scale = 1;
    std::vector<FillRun> runs;
};

class Backend
{
public:
    virtual ~Backend() = default;
    Backend(const Backend&) = delete;
    Backend& operator=(const Backend&) = delete;

    virtual DeviceKind device() const = 0;
    virtual int ordinal() const = 0;             // the device's index among its kind (CUDA device; 0 on the CPU)
    virtual std::string name() const = 0;        // "cpu", "cuda:0 NVIDIA H200"
    DType storage() const { return m_storage; }

    // --- memory -------------------------------------------------------------------------------
    // Bytes that allocate() could still get (free device memory; available host memory).
    virtual std::int64_t availableBytes() const = 0;
    virtual Result<DeviceBuffer> allocate(std::int64_t bytes) = 0;
    BackendStats stats() const { return m_stats; }
    // Cancellation that a long op honours inside itself (the CPU's prefill attention checks it every
    // few query tiles and returns Cancelled), so that a stop reaches a running op within a second.
    void setStop(std::stop_token stop) { m_stop = std::move(stop); }
    bool stopRequested() const { return m_stop.stop_requested(); }
    // Raw bytes between host and a contiguous tensor (its dtype), complete when the call returns.
    Status upload(const void* host, const Tensor& dst);
    Status download(const Tensor& src, void* host);

    // --- streams and events ---------------------------------------------------------------------
    // Event slots 0…n-1, reserved once. record() marks how far a stream has come, wait() holds a
    // stream until an event recorded on the other is reached, elapsedUs() reads the time between
    // two recorded events once synchronize() has returned.
    virtual Status reserveEvents(int n) = 0;
    virtual Status record(int event, Stream s) = 0;
    virtual Status wait(Stream s, int event) = 0;
    virtual Status synchronize() = 0;
    virtual Result<double> elapsedUs(int from, int to) const = 0;
    // The device's handle of a stream for a communicator (cudaStream_t); nullptr on the CPU.
    virtual void* nativeStream(Stream s) = 0;

    // --- ops --------------------------------------------------------------------------------------
    // y[n, out] = x[n, in] · w[out, in]ᵀ (+ bias[1, out]). x and y may be column views (y: a rank's
    // columns of a gathered output); y may be F32 (router logits) while x and w are in the storage
    // dtype. in = 0 gives bias or 0.
    Status gemm(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y, const Tensor& scratch);
    virtual std::int64_t gemmScratchBytes(std::int64_t n, std::int64_t in, std::int64_t out) const = 0;
    // RMSNorm of every group of `group` features (group = cols: the whole row; = head_dim: per head):
    // y = (offset + w) · x / sqrt(mean(x²) + eps), w [1, group] (offset 1: Gemma's norms) or [1, cols] (a weight
    // across the row, the mean over each group: Mamba 2's grouped norm), or without a weight (w null: Llama 4's
    // L2 norm of q and k) y = x / sqrt(mean(x²) + eps). y may be x.
    Status rmsNorm(const Tensor& x, const Tensor* w, const Tensor& y, std::int64_t group, double eps, double offset = 0);
    // LayerNorm of every row: y = (x − mean) / sqrt(var + eps) · (offset + w) + b, the variance biased; w and b
    // [1, cols] or null (OLMo's parameterless norm, Cohere's without bias; offset 1: Nemotron's LayerNorm1P).
    // y may be x.
    Status layerNorm(const Tensor& x, const Tensor* w, const Tensor* b, const Tensor& y, double eps, double offset = 0);
    // Rotary embedding of every head of x [n, heads·headDim] at positions[0, t] (I32 [1, n]); table
    // (F32 [positions, d]) holds cos in its first half, sin in its second. The last d columns of each
    // head turn (d = headDim but for MLA's rope part), or with `leading` its first d (partial rotary:
    // GLM, Phi, GPT-NeoX); the others pass. Pairs (j, j + d/2) (rotate_half), or with `interleaved`
    // (DeepSeek, Llama 4, GPT-J) the pairs (2j, 2j + 1) — by the angle of frequency j either way. y may be x.
    Status rope(const Tensor& x, const Tensor& y, std::int64_t headDim, const Tensor& positions, const Tensor& table,
                bool interleaved = false, bool leading = false);
    Status attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y, const AttentionShape& s,
                     const Tensor& scratch, const Tensor* sinks = nullptr);
    // Llama 4's attention temperature (NoPE layers): y[t] = x[t] · (log1p(floor((positions[0, t] + 1) /
    // floorScale)) · attnScale + 1), positions I32 [1, n]. y may be x.
    Status temperature(const Tensor& x, const Tensor& y, const Tensor& positions, double floorScale, double attnScale);
    virtual std::int64_t attentionScratchBytes(const AttentionShape& s) const = 0;
    // MLA's keys and values from its latent expansion: kv [n, heads·(nope + vd)] holds per head
    // [k_nope | v], rope [n, d] the one rotary key all heads share; k [n, heads·(nope + d)] gets per
    // head [k_nope | rope], v [n, heads·vd]. rope may have a row stride; k and v may be row ranges
    // of a cache.
    Status mlaKv(const Tensor& kv, const Tensor& rope, const Tensor& k, const Tensor& v, std::int64_t heads,
                 std::int64_t nope);
    // y = act(gate) · up, elementwise; gate and up may be column views of one packed tensor. With span > 1 each gate
    // value scales `span` up values, gate [n, cols / span] (a per-token or per-head gate: Qwen2-MoE's shared expert).
    Status gatedAct(const Tensor& gate, const Tensor& up, const Tensor& y, Activation act, std::int64_t span = 1);
    // y = act(x), elementwise (an ungated MLP's activation). y may be x.
    Status activation(const Tensor& x, const Tensor& y, Activation act);
    // Depthwise causal convolution of each sequence (Mamba 2's and LFM2's conv1d): sequence b's stream is its K
    // rows of `state` (the inputs before it; zeros when `fresh`) followed by its S rows of x, and y's row t of it
    // is act(bias[c] + Σ_k w[c, k] · stream[t + 1 + k]) per channel c (K = w.cols; no act: the sum itself); then
    // `state` holds the stream's last K rows. x [B·S, C], w [C, K], bias [1, C] or null, state [B·K, C], y [B·S, C]
    // (B = state.rows / K), all in the storage dtype, summed in fp32; x, state and y may be column views (a part of
    // the channels: the gated delta rule convolves q, k and v apart).
    Status causalConv(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& state, const Tensor& y,
                      std::optional<Activation> act, bool fresh);
    // Mamba 2's selective scan (ScanShape), per sequence b, token t, head h of group g, channel p and state n, in fp32:
    //   dt = clamp(softplus(dt[t, h] + dtBias[h]), dtMin, dtMax)    (softplus(v) = v above 20, as torch's)
    //   s[h, p, n] ← exp(−exp(aLog[h]) · dt) · s[h, p, n] + dt · B[t, g, n] · x[t, h, p]
    //   y[t, h, p] = Σ_n C[t, g, n] · s[h, p, n] + D[h] · x[t, h, p]
    // x [B·S, heads·headDim], dt [B·S, heads], B and C [B·S, groups·state] (each may be a column view), aLog, D
    // and dtBias [1, heads], y [B·S, heads·headDim] in the storage dtype; state F32 [B, heads·headDim·state],
    // zeros first when s.fresh, and left as the last token made it.
    Status ssmScan(const Tensor& x, const Tensor& dt, const Tensor& B, const Tensor& C, const Tensor& aLog, const Tensor& D,
                   const Tensor& dtBias, const Tensor& state, const Tensor& y, const ScanShape& s);
    // The gated delta rule (Qwen3-Next's Gated DeltaNet, Transformers' torch_recurrent_gated_delta_rule with its q/k
    // L2 norm), per sequence, token t and value head h reading key head h / (valueHeads / keyHeads), in fp32:
    //   q̂ = q / sqrt(Σq² + 1e-6) / sqrt(keyDim),  k̂ = k / sqrt(Σk² + 1e-6),  β = sigmoid(b[t, h]),
    //   g = −exp(aLog[h]) · softplus(a[t, h] + dtBias[h])
    //   S ← exp(g) · S;  S[i, j] += k̂[i] · β · (v[j] − Σ_i' S[i', j] · k̂[i']);  y[t, h, j] = Σ_i S[i, j] · q̂[i]
    // q, k [B·S, keyHeads·keyDim], v [B·S, valueHeads·valueDim], b, a [B·S, valueHeads] (each may be a column view),
    // aLog, dtBias [1, valueHeads], y [B·S, valueHeads·valueDim] in the storage dtype; state F32 [B, valueHeads ·
    // valueDim · keyDim] (S transposed: each j's keyDim values together), zeros first when s.fresh, left as the last
    // token made it.
    Status deltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& a, const Tensor& aLog,
                     const Tensor& dtBias, const Tensor& state, const Tensor& y, const DeltaShape& s);
    // y[t] = w[ids[0, t] − firstRow] where that row is in w, else zeros (a vocab shard); ids I32 [1, n];
    // y may be a column view.
    Status embedding(const Tensor& ids, const Tensor& w, const Tensor& y, std::int64_t firstRow);
    // y = a + b; b has a's shape or one row (added to every row). y may be a.
    Status add(const Tensor& a, const Tensor& b, const Tensor& y);
    // dst = src, element for element (same shape and dtype; either may be a column view).
    Status copy(const Tensor& src, const Tensor& dst);
    // y = factor · x, or with cap > 0 cap · tanh(factor · x / cap) (Gemma's scaled embeddings and
    // soft-capped logits). Same shape; either may be a column view; y may be x.
    Status scale(const Tensor& x, const Tensor& y, double factor, double cap);
    // Row-wise softmax of router logits, in fp32 (x, y F32 [n, E]). y may be x.
    Status softmax(const Tensor& x, const Tensor& y);
    // y = 1 / (1 + exp(−x)), in fp32 (x, y F32 [n, E]: DeepSeek's router scores). y may be x.
    Status sigmoid(const Tensor& x, const Tensor& y);
    // y[n, H] = Σ over each token's top-k experts that are local of weight · down(act(gate)·up)(x)
    // (ungated, ExpertsShape::gated false: down(act(up)(x))), with the top-k taken from scores (F32 [n, E], ties to
    // the lower expert; group-limited with ExpertsShape::groups, over score + scoreBias [1, E] when given). gateUp is
    // [localExperts · 2·intermediate, H] (each expert's gate rows, then its up rows; ungated: its up rows), down
    // [localExperts · H, intermediate] (or ExpertsShape::transposed). Biases (gpt-oss), when given:
    // gateUpBias [localExperts, 2·intermediate] (in gate_up's column order), downBias
    // [localExperts, H], added before the router weight. A partial sum when experts or their rows
    // are sharded.
    Status experts(const Tensor& x, const Tensor& scores, const Tensor& gateUp, const Tensor& down, const Tensor& y,
                   const ExpertsShape& s, const Tensor& scratch, const Tensor* gateUpBias = nullptr,
                   const Tensor* downBias = nullptr, const Tensor* scoreBias = nullptr);
    virtual std::int64_t expertsScratchBytes(std::int64_t tokens, std::int64_t hidden, const ExpertsShape& s) const = 0;
    // The picks experts() makes, every expert taken as local: ids I32 [n, K] (global expert ids; −1
    // where only NaN scores were left) and weights F32 [n, K] (renormalised, times the routed scale),
    // from scores F32 [n, E] and scoreBias as experts() takes them. What an all-to-all dispatch
    // sends each token by.
    Status route(const Tensor& scores, const ExpertsShape& s, const Tensor& ids, const Tensor& weights,
                 const Tensor& scratch, const Tensor* scoreBias = nullptr);
    virtual std::int64_t routeScratchBytes(const ExpertsShape& s) const = 0;
    // The sender's combine after an all-to-all dispatch: y[t] = Σ_j weights[t, j] · z[slots[0, t·K + j]]
    // in fp32, in pick order (K = weights.cols; slot −1 adds nothing). z [m, H] and y [n, H] in the
    // storage dtype, slots I32 [1, n·K], weights F32 [n, K].
    Status combine(const Tensor& z, const Tensor& slots, const Tensor& weights, const Tensor& y);
    // y[t] = Σ_b z[b·n + t] over the z.rows / n blocks of n = y.rows rows, in fp32, rounded once to
    // the storage dtype (torch's sum over a leading dim): Llama 4's per-expert rows after their
    // reduction. z [blocks · n, H], y [n, H].
    Status sumBlocks(const Tensor& z, const Tensor& y);
    // Greedy sampling: ids[0, t] = the column of row t's largest value (the first of equal ones;
    // NaN never wins). x [n, V] in the storage dtype or F32, may have a row stride (every S-th row
    // of prefill logits); ids I32 [1, n].
    Status argmax(const Tensor& x, const Tensor& ids);
    // Seeded random values into a contiguous tensor (see UniformFill). Setup only: may allocate.
    Status fillUniform(const Tensor& dst, const UniformFill& f);

protected:
    explicit Backend(DType storage)
        : m_storage(storage)
    {
    }
    // The ops, after the checks above.
    virtual Status doUpload(const void* host, const Tensor& dst) = 0;
    virtual Status doDownload(const Tensor& src, void* host) = 0;
    virtual Status doGemm(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y, const Tensor& scratch) = 0;
    virtual Status doRmsNorm(const Tensor& x, const Tensor* w, const Tensor& y, std::int64_t group, float eps, float offset) = 0;
    virtual Status doLayerNorm(const Tensor& x, const Tensor* w, const Tensor* b, const Tensor& y, float eps, float offset) = 0;
    virtual Status doRope(const Tensor& x, const Tensor& y, std::int64_t headDim, const Tensor& positions,
                          const Tensor& table, bool interleaved, bool leading) = 0;
    virtual Status doAttention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y,
                               const AttentionShape& s, const Tensor& scratch, const Tensor* sinks) = 0;
    virtual Status doTemperature(const Tensor& x, const Tensor& y, const Tensor& positions, float floorScale,
                                 float attnScale) = 0;
    virtual Status doMlaKv(const Tensor& kv, const Tensor& rope, const Tensor& k, const Tensor& v, std::int64_t heads,
                           std::int64_t nope) = 0;
    virtual Status doGatedAct(const Tensor& gate, const Tensor& up, const Tensor& y, Activation act, std::int64_t span) = 0;
    virtual Status doActivation(const Tensor& x, const Tensor& y, Activation act) = 0;
    virtual Status doCausalConv(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& state, const Tensor& y,
                                std::optional<Activation> act, bool fresh) = 0;
    virtual Status doSsmScan(const Tensor& x, const Tensor& dt, const Tensor& B, const Tensor& C, const Tensor& aLog,
                             const Tensor& D, const Tensor& dtBias, const Tensor& state, const Tensor& y, const ScanShape& s) = 0;
    virtual Status doDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& a,
                               const Tensor& aLog, const Tensor& dtBias, const Tensor& state, const Tensor& y, const DeltaShape& s) = 0;
    virtual Status doEmbedding(const Tensor& ids, const Tensor& w, const Tensor& y, std::int64_t firstRow) = 0;
    virtual Status doAdd(const Tensor& a, const Tensor& b, const Tensor& y) = 0;
    virtual Status doCopy(const Tensor& src, const Tensor& dst) = 0;
    virtual Status doScale(const Tensor& x, const Tensor& y, float factor, float cap) = 0;
    virtual Status doSoftmax(const Tensor& x, const Tensor& y) = 0;
    virtual Status doSigmoid(const Tensor& x, const Tensor& y) = 0;
    virtual Status doExperts(const Tensor& x, const Tensor& scores, const Tensor& gateUp, const Tensor& down,
                             const Tensor& y, const ExpertsShape& s, const Tensor& scratch, const Tensor* gateUpBias,
                             const Tensor* downBias, const Tensor* scoreBias) = 0;
    virtual Status doRoute(const Tensor& scores, const ExpertsShape& s, const Tensor& ids, const Tensor& weights,
                           const Tensor& scratch, const Tensor* scoreBias) = 0;
    virtual Status doCombine(const Tensor& z, const Tensor& slots, const Tensor& weights, const Tensor& y) = 0;
    virtual Status doSumBlocks(const Tensor& z, const Tensor& y) = 0;
    virtual Status doArgmax(const Tensor& x, const Tensor& ids) = 0;
    virtual Status doFillUniform(const Tensor& dst, const UniformFill& f) = 0;

    void countAllocation(std::int64_t bytes)
    {
        ++m_stats.allocations;
        m_stats.allocatedBytes += bytes;
    }

private:
    DType m_storage;
    BackendStats m_stats;
    std::stop_token m_stop;
};

// The reference backend: host memory, fp32 math (oneDNN SGEMM, OpenBLAS SGEMV for one row, one
// thread per rank), f32/bf16/f16 storage.
Result<std::unique_ptr<Backend>> makeCpuBackend(DType storage);
// Host memory this process may still use: MemAvailable, lowered to what the memory cgroup (v2 or
// v1) and an address-space limit (ulimit -v) leave, and to TPSTUDIO_MAX_MEMORY when it is set
// (bytes, or with a K, M, G or T suffix; an unreadable value is ignored).
std::int64_t hostMemoryAvailable();
// The CPU backend's math libraries and what they run ("oneDNN v2.6.3 (SGEMM, avx2) + OpenBLAS 0.3.21
// … Zen … (SGEMV)").
std::string cpuMathLibrary();
// The kernels the CPU backend runs and what the CPU could run: "GEMM oneDNN v2.6.3 avx2 (avx2), GEMV
// OpenBLAS kernel Zen (avx2), vector kernels avx2; CPU: avx2 sse2".
std::string cpuKernelsInUse();
// Why the CPU backend runs below what this CPU can do (e.g. oneDNN capped by ONEDNN_MAX_CPU_ISA, or
// OpenBLAS forced to its AVX2 kernels by OPENBLAS_CORETYPE on an AVX-512 CPU), or "" when it runs the
// widest kernels there are.
std::string cpuMathWarning();
// Plain SGEMM, y[m×n] = x[m×k]·w[n×k]ᵀ as the engine's Linear layers, one thread: the better of the
// CPU backend's product (oneDNN; one row: OpenBLAS SGEMV) and OpenBLAS SGEMM, each the median
// GFLOP/s of `iters` timed calls after one untimed.
Result<double> cpuSgemmGflops(std::int64_t m, std::int64_t n, std::int64_t k, int iters);
// A CUDA device (bf16/f16/f32 storage, cuBLAS GEMMs with fp32 accumulation, a compute and a
// communication stream, CUDA events). Unimplemented in builds without CUDA; FailedPrecondition when
// the device is not there.
Result<std::unique_ptr<Backend>> makeCudaBackend(int device, DType storage);
bool haveCudaBackend();

// The splitmix64 hash of UniformFill, shared by every backend so that seeded weights are bit-equal.
constexpr std::uint64_t splitmix64(std::uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

} // namespace tp
