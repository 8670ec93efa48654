// cuda_kernels.cuh — the CUDA backend's kernels (cuda_backend.cu launches them; cuBLAS does the
// GEMMs). Every kernel loads its storage type as fp32, computes in fp32 and rounds once when it
// stores; each writes every element of its output, so no op leaves stale memory behind.
//
// Launch shapes, two kinds:
//   - row-wise elementwise: blockIdx.x·blockDim.x + threadIdx.x is the column, blockIdx.y the first
//     row, rows advance by gridDim.y (at most 65535 rows of blocks; see rowGrid in the backend);
//   - one warp per row (norms, softmaxes, routing): 8 warps per block of 256 threads, a warp
//     returns as a whole when its row is past the end, so the shuffles always see 32 lanes.
// Element counts and offsets are 64-bit; widths that the backend has checked to fit are int.
// Nothing here is __restrict__: rms_norm, rope, add and softmax allow y to be x.
#pragma once

#include "tp/graph/activation.h"
#include "tp/runtime/backend.h" // splitmix64

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;                    // threads of every block
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp;  // warp-per-row kernels
constexpr unsigned kAllLanes = 0xffffffffu;

// --- storage types: load as fp32, store rounded to nearest even ---------------------------------

template<typename T> struct Num;
template<> struct Num<float>
{
    __device__ __forceinline__ static float load(float v) { return v; }
    __device__ __forceinline__ static float store(float v) { return v; }
};
template<> struct Num<__nv_bfloat16>
{
    __device__ __forceinline__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
    __device__ __forceinline__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};
template<> struct Num<__half>
{
    __device__ __forceinline__ static float load(__half v) { return __half2float(v); }
    __device__ __forceinline__ static __half store(float v) { return __float2half_rn(v); }
};

template<typename T> __device__ __forceinline__ float load(T v) { return Num<T>::load(v); }
template<typename T> __device__ __forceinline__ T store(float v) { return Num<T>::store(v); }

__device__ __forceinline__ float quietNan() { return __int_as_float(0x7fc00000); }

// --- warp reductions (every lane ends with the result) ------------------------------------------

template<typename V> __device__ __forceinline__ V warpSum(V v)
{
    for (int o = kWarp / 2; o > 0; o >>= 1)
        v += __shfl_xor_sync(kAllLanes, v, o);
    return v;
}

__device__ __forceinline__ float warpMax(float v)
{
    for (int o = kWarp / 2; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(kAllLanes, v, o));
    return v;
}

// --- activations (Transformers' silu, gelu_pytorch_tanh, gelu and relu2, in fp32) --------------------

__device__ __forceinline__ float activate(Activation a, float v)
{
    if (a == Activation::Silu)
        return v / (1.0f + expf(-v));
    if (a == Activation::Gelu)
        return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
    if (a == Activation::Relu2)
        return v > 0 ? v * v : 0.0f;
    if (a == Activation::Sigmoid)
        return 1.0f / (1.0f + expf(-v));
    if (a == Activation::Softplus)
        return v > 20.0f ? v : log1pf(expf(v)); // torch's threshold
    if (a == Activation::Identity)
        return v;
    if (a == Activation::Tanh)
        return tanhf(v);
    const float k = 0.7978845608028654f; // sqrt(2/pi)
    return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
}

// --- gemm: the bias row broadcast into y before cuBLAS adds x·wᵀ to it (beta = 1) -----------------

// y's rows are `ldy` elements apart (a column view of a gathered output).
template<typename Tb, typename Ty>
__global__ void broadcastRowKernel(const Tb* bias, Ty* y, std::int64_t rows, std::int64_t cols, std::int64_t ldy)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (c >= cols)
        return;
    const Ty v = store<Ty>(load(bias[c])); // exact: Ty is Tb or fp32
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y)
        y[r * ldy + c] = v;
}

// --- rms_norm -------------------------------------------------------------------------------------

// One warp per group of `group` features (per-head norms and rows up to 1024 wide).
template<typename T>
__global__ void rmsNormWarpKernel(const T* x, const T* w, std::int64_t wGroups, T* y, std::int64_t groups, int group, float eps,
                                  float offset)
{
    const std::int64_t g = std::int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    const int lane = int(threadIdx.x % kWarp);
    if (g >= groups)
        return;
    if (w) // a weight across the row: this group's part of it
        w += g % wGroups * group;
    const T* xg = x + g * group;
    T* yg = y + g * group;
    float ss = 0;
    for (int j = lane; j < group; j += kWarp) {
        const float v = load(xg[j]);
        ss += v * v;
    }
    ss = warpSum(ss); // every lane's reads of xg are done before any lane writes yg
    const float inv = 1.0f / sqrtf(ss / float(group) + eps);
    for (int j = lane; j < group; j += kWarp)
        yg[j] = store<T>((w ? offset + load(w[j]) : 1.0f) * (load(xg[j]) * inv));
}

// The sum of v over the block, returned to every thread; partial: kThreads / kWarp floats of shared memory. Its
// barriers also order every thread's earlier reads before any later write.
__device__ inline float blockSum(float v, float* partial)
{
    const int lane = int(threadIdx.x % kWarp), warp = int(threadIdx.x / kWarp);
    v = warpSum(v);
    if (lane == 0)
        partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < int(blockDim.x / kWarp) ? partial[lane] : 0.0f;
        v = warpSum(v);
        if (lane == 0)
            partial[0] = v;
    }
    __syncthreads();
    const float total = partial[0];
    __syncthreads(); // every thread has read it before partial is reused
    return total;
}

// One block per group (rows wider than 1024).
template<typename T>
__global__ void rmsNormBlockKernel(const T* x, const T* w, std::int64_t wGroups, T* y, std::int64_t group, float eps, float offset)
{
    __shared__ float partial[kThreads / kWarp];
    if (w)
        w += std::int64_t(blockIdx.x) % wGroups * group;
    const T* xg = x + std::int64_t(blockIdx.x) * group;
    T* yg = y + std::int64_t(blockIdx.x) * group;
    float ss = 0;
    for (std::int64_t j = threadIdx.x; j < group; j += blockDim.x) {
        const float v = load(xg[j]);
        ss += v * v;
    }
    const float inv = 1.0f / sqrtf(blockSum(ss, partial) / float(group) + eps); // its barriers order every read of xg before the writes (y may be x)
    for (std::int64_t j = threadIdx.x; j < group; j += blockDim.x)
        yg[j] = store<T>((w ? offset + load(w[j]) : 1.0f) * (load(xg[j]) * inv));
}

// LayerNorm, a block per row: the mean, then the biased variance about it (two passes over x, in fp32).
template<typename T>
__global__ void layerNormKernel(const T* x, const T* w, const T* b, T* y, std::int64_t cols, float eps, float offset)
{
    __shared__ float partial[kThreads / kWarp];
    const T* xr = x + std::int64_t(blockIdx.x) * cols;
    T* yr = y + std::int64_t(blockIdx.x) * cols;
    float s = 0;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        s += load(xr[j]);
    const float mean = blockSum(s, partial) / float(cols);
    float ss = 0;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const float c = load(xr[j]) - mean;
        ss += c * c;
    }
    const float inv = 1.0f / sqrtf(blockSum(ss, partial) / float(cols) + eps); // also orders every read of xr before the writes (y may be x)
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        yr[j] = store<T>((w ? offset + load(w[j]) : 1.0f) * ((load(xr[j]) - mean) * inv) + (b ? load(b[j]) : 0.0f));
}

// Llama 4's attention temperature: row t times log1p(floor((position + 1) / floorScale)) · attnScale + 1.
template<typename T>
__global__ void temperatureKernel(const T* x, T* y, std::int64_t rows, std::int64_t cols, const std::int32_t* positions,
                                  float floorScale, float attnScale)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (c >= cols)
        return;
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float f = log1pf(floorf((float(positions[r]) + 1.0f) / floorScale)) * attnScale + 1.0f;
        y[r * cols + c] = store<T>(load(x[r * cols + c]) * f);
    }
}

// --- rope -----------------------------------------------------------------------------------------

// Thread per (row, pair p = head·half + j): rotate_half of x[j] and x[j + half] of its head. A
// position outside the table gives NaN (the CPU backend refuses it; a device op cannot without a
// synchronisation, and NaN cannot go unnoticed).
// A thread per rotated pair or passed column of a head: each head's first headDim − d columns pass
// (MLA's nope part), its last d turn, in pairs (j, j + d/2) or, interleaved, (2j, 2j + 1).
template<typename T>
__global__ void ropeKernel(const T* x, T* y, std::int64_t rows, std::int64_t width, int headDim, int d, bool interleaved, bool leading,
                           const std::int32_t* positions, const float* table, std::int64_t tableRows, std::int64_t tableStride)
{
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    const int half = d / 2, pass = headDim - d, perHead = pass + half;
    if (p >= width / headDim * perHead)
        return;
    const std::int64_t head = p / perHead;
    // The rotated dims start at rotAt (the head's end for MLA's rope part, its start with `leading`); the passed ones at keptAt.
    const int jj = int(p % perHead), j = jj - pass, rotAt = leading ? 0 : pass, keptAt = leading ? d : 0;
    const std::int64_t i1 = head * headDim + rotAt + (interleaved ? 2 * j : j), i2 = i1 + (interleaved ? 1 : half);
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const T* xr = x + r * width;
        T* yr = y + r * width;
        if (j < 0) {
            yr[head * headDim + keptAt + jj] = xr[head * headDim + keptAt + jj];
            continue;
        }
        const float x1 = load(xr[i1]), x2 = load(xr[i2]);
        const std::int64_t pos = positions[r];
        float y1 = quietNan(), y2 = quietNan();
        if (pos >= 0 && pos < tableRows) {
            const float* cs = table + pos * tableStride; // cos[half] then sin[half]
            const float c = cs[j], s = cs[half + j];
            y1 = x1 * c - x2 * s;
            y2 = x2 * c + x1 * s;
        }
        yr[i1] = store<T>(y1);
        yr[i2] = store<T>(y2);
    }
}

// --- attention: causal softmax of one chunk's scores ------------------------------------------------

// Warp per score row. Row r is query i = firstQuery + r % rowsPerSlot of its head and sees keys
// [0, i] (the last `window` of them when window > 0); the row holds `keys` fp32 scores (already
// scaled by cuBLAS), soft-capped here to cap·tanh(s / cap) when cap > 0. Writes the row's
// probabilities over all `keys` columns, zeros where unseen, so that P·V reads only written values.
// probs may be scores (fp32 storage): each lane reads and writes only its own columns.
__device__ inline float capped(float v, float cap) { return cap > 0 ? cap * tanhf(v / cap) : v; }

// Where the sink logit of a row's head is (gpt-oss): rows are [unit][inner head][query]; unit u
// of the chunk is (sequence, slot o = (firstUnit + u) % outer); with kvInner the inner index is the
// kv head g and o the query slot j, else o is g and the inner index j; the head is g·group + j.
struct SinkMap
{
    const void* sinks = nullptr;           // [heads] in the storage type, nullptr: none
    std::int64_t firstUnit = 0;
    int outer = 1, inner = 1, group = 1;
    bool kvInner = true;
    template<typename P> __device__ float of(std::int64_t row, int rowsPerSlot) const
    {
        if (!sinks)
            return -INFINITY;
        const std::int64_t slot = row / rowsPerSlot, u = slot / inner;
        const int i = int(slot % inner), o = int((firstUnit + u) % outer);
        const int head = kvInner ? i * group + o : o * group + i;
        return load(static_cast<const P*>(sinks)[head]);
    }
};

template<typename P>
__global__ void causalSoftmaxKernel(const float* scores, P* probs, std::int64_t rows, int rowsPerSlot, int keys, int firstQuery,
                                    int window, int chunk, float cap, SinkMap sinkMap)
{
    const std::int64_t r = std::int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    const int lane = int(threadIdx.x % kWarp);
    if (r >= rows)
        return;
    const int seen = firstQuery + int(r % rowsPerSlot) + 1; // ≤ keys
    int from = window > 0 && seen > window ? seen - window : 0;
    if (chunk > 0) // Llama 4: only the query's own chunk
        from = max(from, (seen - 1) - (seen - 1) % chunk);
    const float* s = scores + r * keys;
    P* p = probs + r * keys;
    // Online max and sum per lane, then merged across the warp; lane 0 starts from the sink.
    const float sink = sinkMap.template of<P>(r, rowsPerSlot);
    float m = -INFINITY, sum = 0.0f;
    if (lane == 0 && sink > -INFINITY) {
        m = sink;
        sum = 1.0f;
    }
    for (int j = from + lane; j < seen; j += kWarp) {
        const float v = capped(s[j], cap);
        if (v > m) {
            sum = sum * expf(m - v) + 1.0f;
            m = v;
        } else {
            sum += expf(v - m);
        }
    }
    for (int o = kWarp / 2; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(kAllLanes, m, o), s2 = __shfl_xor_sync(kAllLanes, sum, o);
        const float mx = fmaxf(m, m2);
        sum = (m == -INFINITY ? 0.0f : sum * expf(m - mx)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - mx));
        m = mx;
    }
    const float inv = 1.0f / sum;
    for (int j = lane; j < keys; j += kWarp)
        p[j] = store<P>(j >= from && j < seen ? expf(capped(s[j], cap) - m) * inv : 0.0f);
}

// y = factor · x, or cap · tanh(factor · x / cap); strided rows (column views).
template<typename T>
__global__ void scaleKernel(const T* x, std::int64_t ldx, T* y, std::int64_t ldy, std::int64_t rows, std::int64_t cols,
                            float factor, float cap)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (c >= cols)
        return;
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y)
        y[r * ldy + c] = store<T>(capped(factor * load(x[r * ldx + c]), cap));
}

// --- gated_act, embedding, add, softmax ---------------------------------------------------------------

template<typename T>
__global__ void gatedActKernel(const T* gate, std::int64_t gateStride, const T* up, std::int64_t upStride, T* y,
                               std::int64_t rows, std::int64_t cols, Activation act, std::int64_t span)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (c >= cols)
        return;
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y)
        y[r * cols + c] = store<T>(activate(act, load(gate[r * gateStride + c / span])) * load(up[r * upStride + c]));
}

// --- causal convolution and the selective scan (Mamba 2) ---------------------------------------------

// A thread per (sequence, channel): its stream is the channel's K cached inputs (zeros when fresh), then its S rows
// of x; the thread alone reads and then rewrites its channel of the state.
template<typename T>
__global__ void causalConvKernel(const T* x, std::int64_t xStride, const T* w, const T* bias, T* state, std::int64_t stateStride, T* y,
                                 std::int64_t yStride, std::int64_t batch, std::int64_t S, std::int64_t C, int K, bool silu, bool fresh)
{
    const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (i >= batch * C)
        return;
    const std::int64_t b = i / C, c = i % C;
    auto stream = [&](std::int64_t j) {
        return j >= K ? load(x[(b * S + j - K) * xStride + c]) : fresh ? 0.0f : load(state[(b * K + j) * stateStride + c]);
    };
    const float b0 = bias ? load(bias[c]) : 0.0f;
    for (std::int64_t t = 0; t < S; ++t) {
        float v = b0;
        for (int k = 0; k < K; ++k)
            v += load(w[c * K + k]) * stream(t + 1 + k);
        y[(b * S + t) * yStride + c] = store<T>(silu ? activate(Activation::Silu, v) : v);
    }
    for (int j = 0; j < K; ++j) // row j takes stream[S + j]: a row not yet overwritten
        state[(b * K + j) * stateStride + c] = store<T>(stream(S + j));
}

// A thread per (sequence, head, channel p): its `state` values (F32, in the state tensor) through the S tokens.
template<typename T>
__global__ void ssmScanKernel(const T* x, std::int64_t xStride, const T* dt, std::int64_t dtStride, const T* B, std::int64_t bStride,
                              const T* C, std::int64_t cStride, const T* aLog, const T* D, const T* dtBias, float* state, T* y,
                              std::int64_t batch, std::int64_t S, std::int64_t heads, std::int64_t P, std::int64_t perGroup,
                              std::int64_t N, float dtMin, float dtMax, bool fresh)
{
    const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (i >= batch * heads * P)
        return;
    const std::int64_t b = i / (heads * P), h = i / P % heads, p = i % P, g = h / perGroup;
    float* s = state + i * N; // [b][h][p][n]
    if (fresh)
        for (std::int64_t n = 0; n < N; ++n)
            s[n] = 0.0f;
    const float a = -expf(load(aLog[h])), d = load(D[h]), bias = load(dtBias[h]);
    for (std::int64_t t = 0; t < S; ++t) {
        const std::int64_t r = b * S + t;
        const float step = fminf(fmaxf(activate(Activation::Softplus, load(dt[r * dtStride + h]) + bias), dtMin), dtMax);
        const float decay = expf(a * step), xp = load(x[r * xStride + h * P + p]), dx = step * xp;
        float out = 0;
        for (std::int64_t n = 0; n < N; ++n) {
            s[n] = decay * s[n] + dx * load(B[r * bStride + g * N + n]);
            out += load(C[r * cStride + g * N + n]) * s[n];
        }
        y[r * heads * P + h * P + p] = store<T>(out + d * xp);
    }
}

// The gated delta rule: a thread per (sequence, value head, value channel j), owning column j of its head's state (dk
// F32 values, contiguous); each recomputes its token's q and k norms.
template<typename T>
__global__ void deltaRuleKernel(const T* q, std::int64_t qStride, const T* k, std::int64_t kStride, const T* v, std::int64_t vStride,
                                const T* b, std::int64_t bStride, const T* a, std::int64_t aStride, const T* aLog, const T* dtBias,
                                float* state, T* y, std::int64_t batch, std::int64_t S, std::int64_t valueHeads, std::int64_t perKey,
                                std::int64_t dk, std::int64_t dv, bool fresh)
{
    const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (i >= batch * valueHeads * dv)
        return;
    const std::int64_t sq = i / (valueHeads * dv), h = i / dv % valueHeads, j = i % dv, kh = h / perKey;
    float* col = state + i * dk; // [b][h][j][dk]
    if (fresh)
        for (std::int64_t e = 0; e < dk; ++e)
            col[e] = 0.0f;
    const float decayRate = -expf(load(aLog[h])), bias = load(dtBias[h]), qScale = rsqrtf(float(dk));
    for (std::int64_t t = 0; t < S; ++t) {
        const std::int64_t r = sq * S + t;
        const T* Q = q + r * qStride + kh * dk;
        const T* K = k + r * kStride + kh * dk;
        float qq = 0, kk = 0;
        for (std::int64_t e = 0; e < dk; ++e) {
            qq += load(Q[e]) * load(Q[e]);
            kk += load(K[e]) * load(K[e]);
        }
        const float qn = qScale / sqrtf(qq + 1e-6f), kn = 1.0f / sqrtf(kk + 1e-6f);
        const float beta = activate(Activation::Sigmoid, load(b[r * bStride + h]));
        const float decay = expf(decayRate * activate(Activation::Softplus, load(a[r * aStride + h]) + bias));
        float mem = 0;
        for (std::int64_t e = 0; e < dk; ++e) {
            col[e] *= decay;
            mem += col[e] * load(K[e]) * kn;
        }
        const float delta = (load(v[r * vStride + h * dv + j]) - mem) * beta;
        float out = 0;
        for (std::int64_t e = 0; e < dk; ++e) {
            col[e] += load(K[e]) * kn * delta;
            out += col[e] * load(Q[e]) * qn;
        }
        y[r * valueHeads * dv + h * dv + j] = store<T>(out);
    }
}

template<typename T>
__global__ void activationKernel(const T* x, std::int64_t xStride, T* y, std::int64_t rows, std::int64_t cols, Activation act)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (c >= cols)
        return;
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y)
        y[r * cols + c] = store<T>(activate(act, load(x[r * xStride + c])));
}

// Raw element bits (U: an unsigned type of the element's size): rows of a vocab shard, zeros for
// ids outside it.
template<typename U>
__global__ void embeddingKernel(const std::int32_t* ids, const U* w, std::int64_t wRows, std::int64_t firstRow, U* y,
                                std::int64_t rows, std::int64_t cols, std::int64_t ldy)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (c >= cols)
        return;
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const std::int64_t local = std::int64_t(ids[r]) - firstRow;
        y[r * ldy + c] = local >= 0 && local < wRows ? w[local * cols + c] : U(0);
    }
}

template<typename T>
__global__ void addKernel(const T* a, const T* b, bool bIsRow, T* y, std::int64_t rows, std::int64_t cols)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (c >= cols)
        return;
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y)
        y[r * cols + c] = store<T>(load(a[r * cols + c]) + load(b[(bIsRow ? 0 : r) * cols + c]));
}

// MLA's keys and values: a thread per column of k [heads·(nope + d)] and then of v [heads·vd].
template<typename T>
__global__ void mlaKvKernel(const T* kv, const T* rope, std::int64_t ropeStride, T* k, T* v, std::int64_t rows, int heads,
                            int nope, int d, int vd)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    const std::int64_t kw = std::int64_t(heads) * (nope + d), vw = std::int64_t(heads) * vd, kvw = std::int64_t(heads) * (nope + vd);
    if (c >= kw + vw)
        return;
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        if (c < kw) {
            const std::int64_t h = c / (nope + d), j = c % (nope + d);
            k[r * kw + c] = j < nope ? kv[r * kvw + h * (nope + vd) + j] : rope[r * ropeStride + (j - nope)];
        } else {
            const std::int64_t h = (c - kw) / vd, j = (c - kw) % vd;
            v[r * vw + (c - kw)] = kv[r * kvw + h * (nope + vd) + nope + j];
        }
    }
}

__global__ void sigmoidKernel(const float* x, float* y, std::int64_t n)
{
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
        y[i] = 1.0f / (1.0f + expf(-x[i]));
}

// Router softmax, warp per row, as the CPU computes it: fp32 exponentials, a double sum, the
// quotient in double.
__global__ void softmaxRowsKernel(const float* x, float* y, std::int64_t rows, int cols)
{
    const std::int64_t r = std::int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    const int lane = int(threadIdx.x % kWarp);
    if (r >= rows)
        return;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float m = -INFINITY;
    for (int j = lane; j < cols; j += kWarp)
        m = fmaxf(m, xr[j]);
    m = warpMax(m);
    double sum = 0;
    for (int j = lane; j < cols; j += kWarp)
        sum += double(expf(xr[j] - m));
    sum = warpSum(sum);
    for (int j = lane; j < cols; j += kWarp)
        yr[j] = float(double(expf(xr[j] - m)) / sum);
}

// Every lane's (value, index) merged across the warp: the largest value, the lower index among equal
// ones; every lane ends with the result.
__device__ __forceinline__ void warpBest(float& best, int& at)
{
    for (int o = kWarp / 2; o > 0; o >>= 1) {
        const float b2 = __shfl_xor_sync(kAllLanes, best, o);
        const int a2 = __shfl_xor_sync(kAllLanes, at, o);
        if (b2 > best || (b2 == best && a2 < at)) {
            best = b2;
            at = a2;
        }
    }
}

// Greedy sampling, warp per row: the column of the row's largest value, the first of equal ones,
// NaN never winning (as the CPU backend; torch.argmax also takes the first maximum).
template<typename T>
__global__ void argmaxRowsKernel(const T* x, std::int64_t stride, std::int64_t rows, int cols, std::int32_t* ids)
{
    const std::int64_t r = std::int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    const int lane = int(threadIdx.x % kWarp);
    if (r >= rows)
        return;
    const T* xr = x + r * stride;
    float best = -INFINITY;
    int at = INT_MAX;
    for (int j = lane; j < cols; j += kWarp) {
        const float v = load(xr[j]);
        if (v > best || (v == best && j < at)) {
            best = v;
            at = j;
        }
    }
    warpBest(best, at);
    if (lane == 0)
        ids[r] = at == INT_MAX ? 0 : at;
}

// --- experts --------------------------------------------------------------------------------------------

// Warp per token: the top-k of its E scores, best first, ties to the lower expert id (torch.topk
// on CPU, the CPU backend). Round j takes the best expert strictly after round j-1's pick in that
// order, so no mask is needed. Writes, per pick, the local expert (or -1 when another rank holds
// it) and its weight (renormalised over the k picks, in double, when asked; times routedScale), and
// counts the tokens of each local expert. DeepSeek's choice (groups > 1 or a bias): the picks are by
// score + bias among the experts of the topkGroup groups whose two best choices (or best: groupByMax)
// sum highest (the others at −∞), the weights the scores. PhiMoE's sparsemixer (sparseMixer, topK 2):
// ExpertsShape says it, lane 0 alone.
template<typename T>
__global__ void routeTopKKernel(const float* scores, std::int64_t tokens, int experts, int topK, int firstExpert,
                                int localExperts, bool normalize, const T* bias, int groups, int topkGroup,
                                float routedScale, bool groupByMax, bool sparseMixer, float jitterEps, bool logitChoice,
                                std::int32_t* expertOf, float* weightOf, std::int32_t* counts)
{
    const std::int64_t t = std::int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    const int lane = int(threadIdx.x % kWarp);
    if (t >= tokens)
        return;
    const float* row = scores + t * experts;
    std::int32_t* eOut = expertOf + t * topK;
    float* wOut = weightOf + t * topK;
    auto emit = [&](int j, int e, float w) {
        const int local = e - firstExpert;
        const bool mine = local >= 0 && local < localExperts;
        eOut[j] = mine ? local : -1;
        wOut[j] = w;
        if (mine && counts)
            atomicAdd(&counts[local], 1);
    };
    if (sparseMixer) {
        if (lane == 0)
            for (int j = 0, first = -1; j < 2; ++j) {
                int best = -1;
                for (int e = 0; e < experts; ++e)
                    if (e != first && (best < 0 || row[e] > row[best]))
                        best = e;
                const float m = row[best];
                double sum = 0;
                for (int e = 0; e < experts; ++e)
                    if (e != first && !((m - row[e]) / fmaxf(fabsf(row[e]), m) > 2 * jitterEps))
                        sum += exp(double(row[e]) - double(m));
                emit(j, best, float(1.0 / sum));
                first = best;
            }
        return;
    }
    constexpr int kNone = 0x7fffffff;
    const int perGroup = experts / groups;
    auto choiceOf = [&](int e) { return row[e] + (bias ? load(bias[e]) : 0.0f); };
    std::uint64_t chosen = ~0ull; // groups (at most 64) whose experts compete
    if (groups > 1) {
        float gs[2] = {-INFINITY, -INFINITY}; // this lane's groups: lane, lane + 32
        for (int i = 0; i < 2; ++i) {
            const int g = lane + i * kWarp;
            if (g >= groups)
                continue;
            float a = -INFINITY, b = -INFINITY;
            for (int e = g * perGroup; e < (g + 1) * perGroup; ++e) {
                const float c = choiceOf(e);
                if (c > a) {
                    b = a;
                    a = c;
                } else if (c > b) {
                    b = c;
                }
            }
            gs[i] = groupByMax ? a : a + b;
        }
        chosen = 0;
        for (int j = 0; j < topkGroup; ++j) {
            float best = -INFINITY;
            int bestG = kNone;
            for (int i = 0; i < 2; ++i) {
                const int g = lane + i * kWarp;
                if (g < groups && !((chosen >> g) & 1ull) && (gs[i] > best || (gs[i] == best && g < bestG))) {
                    best = gs[i];
                    bestG = g;
                }
            }
            warpBest(best, bestG);
            if (bestG == kNone)
                break;
            chosen |= 1ull << bestG;
        }
    }
    auto pickValue = [&](int e) { return (chosen >> (e / perGroup)) & 1ull ? choiceOf(e) : -INFINITY; };
    float prevS = INFINITY;
    int prevE = -1;
    double sum = 0;
    for (int j = 0; j < topK; ++j) {
        float bestS = -INFINITY;
        int bestE = kNone;
        for (int e = lane; e < experts; e += kWarp) {
            const float v = pickValue(e);
            const bool after = v < prevS || (v == prevS && e > prevE);
            if (after && (v > bestS || (v == bestS && e < bestE))) {
                bestS = v;
                bestE = e;
            }
        }
        warpBest(bestS, bestE);
        if (bestE == kNone) { // only NaN scores are left: no pick
            if (lane == 0) {
                eOut[j] = -1;
                wOut[j] = 0.0f;
            }
            continue;
        }
        prevS = bestS;
        prevE = bestE;
        const float w = logitChoice ? float(1.0 / (1.0 + exp(-double(row[bestE])))) : row[bestE]; // Kolibri: sigmoid(logit)
        sum += double(w);
        if (lane == 0)
            emit(j, bestE, w);
    }
    if (lane == 0)
        for (int j = 0; j < topK; ++j)
            wOut[j] = float((normalize ? double(wOut[j]) / sum : double(wOut[j])) * routedScale);
}

// Rows an all-to-all dispatch brought: each row's local expert given (ids[t]), weight 1.
__global__ void givenRouteKernel(const std::int32_t* ids, std::int64_t tokens, int localExperts, std::int32_t* expertOf,
                                 float* weightOf, std::int32_t* counts)
{
    const std::int64_t t = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (t >= tokens)
        return;
    const std::int32_t e = ids[t];
    const bool mine = e >= 0 && e < localExperts;
    expertOf[t] = mine ? e : -1;
    weightOf[t] = 1.0f;
    if (mine)
        atomicAdd(&counts[e], 1);
}

// offsets[e] = Σ counts[< e] (offsets[El] = all routed rows), and each expert's fill cursor. One
// thread: El is at most a few hundred, and this runs once per experts call.
__global__ void bucketOffsetsKernel(const std::int32_t* counts, std::int32_t* offsets, std::int32_t* cursor, int localExperts)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    std::int32_t at = 0;
    for (int e = 0; e < localExperts; ++e) {
        offsets[e] = at;
        cursor[e] = at;
        at += counts[e];
    }
    offsets[localExperts] = at;
}

// Each local pick takes a row of its expert's bucket. The order within a bucket is arbitrary;
// results do not depend on it (a GEMM row's sum does not depend on its place, and tokens sum
// their picks in pick order).
__global__ void bucketAssignKernel(const std::int32_t* expertOf, const float* weightOf, std::int64_t picks, int topK,
                                   std::int32_t* cursor, std::int32_t* slotOf, std::int32_t* rowToken, float* rowWeight)
{
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p >= picks)
        return;
    const std::int32_t e = expertOf[p];
    if (e < 0) {
        slotOf[p] = -1;
        return;
    }
    const std::int32_t slot = atomicAdd(&cursor[e], 1);
    slotOf[p] = slot;
    rowToken[slot] = std::int32_t(p / topK);
    rowWeight[slot] = weightOf[p];
}

// The routed rows; with `weighted` (Llama 4) each times its pick's weight, both rounded to T.
template<typename T>
__global__ void gatherRowsKernel(const T* x, const std::int32_t* rowToken, const float* rowWeight, bool weighted, T* xe,
                                 std::int64_t rows, std::int64_t cols)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (c >= cols)
        return;
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const T v = x[std::int64_t(rowToken[r]) * cols + c];
        xe[r * cols + c] = weighted ? store<T>(load(store<T>(rowWeight[r])) * load(v)) : v;
    }
}

// a[r, i] = act(h[r, i]) · h[r, I + i], h the fp32 gate_up rows of the routed tokens.
template<typename T>
__global__ void expertActKernel(const float* h, T* a, std::int64_t rows, std::int64_t inter, Activation act, bool interleaved,
                                float alpha, float limit, bool gated)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (c >= inter)
        return;
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        if (!gated) { // up alone: act(up)
            a[r * inter + c] = store<T>(activate(act, h[r * inter + c]));
            continue;
        }
        const float* hr = h + r * 2 * inter;
        // gate and up of column c: 2c and 2c + 1 (gpt-oss), or c and inter + c.
        float g = interleaved ? hr[2 * c] : hr[c], u = interleaved ? hr[2 * c + 1] : hr[inter + c];
        if (limit > 0) { // gpt-oss: (clamp(u, ±limit) + 1) · g·σ(alpha·g), g clamped above
            g = fminf(g, limit);
            u = fminf(fmaxf(u, -limit), limit);
            a[r * inter + c] = store<T>((u + 1.0f) * (g / (1.0f + expf(-alpha * g))));
        } else {
            a[r * inter + c] = store<T>(activate(act, g) * u);
        }
    }
}

// Llama 4's per-expert rows (ExpertsShape::perExpertRows): each pick p = t·topK + j of a local
// expert e writes o[slot] to row e·tokens + t0 + t of y; the rest of y stays as it was (zeros).
template<typename T>
__global__ void perExpertRowsKernel(const float* o, const std::int32_t* expertOf, const std::int32_t* slotOf, T* y,
                                    std::int64_t picks, int topK, std::int64_t tokens, std::int64_t t0, std::int64_t cols)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (c >= cols)
        return;
    for (std::int64_t p = blockIdx.y; p < picks; p += gridDim.y) {
        const std::int32_t e = expertOf[p], slot = slotOf[p];
        if (e >= 0 && slot >= 0)
            y[(std::int64_t(e) * tokens + t0 + p / topK) * cols + c] = store<T>(o[std::int64_t(slot) * cols + c]);
    }
}

// y[t] = Σ_b z[b·tokens + t], in fp32, rounded once (sumBlocks).
template<typename T>
__global__ void sumBlocksKernel(const T* z, T* y, std::int64_t tokens, std::int64_t blocks, std::int64_t cols)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (c >= cols)
        return;
    for (std::int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
        float acc = 0.0f;
        for (std::int64_t b = 0; b < blocks; ++b)
            acc += load(z[(b * tokens + t) * cols + c]);
        y[t * cols + c] = store<T>(acc);
    }
}

// y[t] = Σ over t's local picks, in pick order, of weight · o[slot], in fp32; zeros for a token
// with none. o: the experts' fp32 rows, or (an all-to-all's combine) the returned rows in T.
template<typename T, typename O>
__global__ void combineKernel(const O* o, const std::int32_t* slotOf, const float* weightOf, bool weighted, T* y,
                              std::int64_t tokens, int topK, std::int64_t cols)
{
    const std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (c >= cols)
        return;
    for (std::int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
        float acc = 0.0f;
        for (int j = 0; j < topK; ++j) {
            const std::int32_t slot = slotOf[t * topK + j];
            if (slot >= 0)
                acc += (weighted ? weightOf[t * topK + j] : 1.0f) * load(o[std::int64_t(slot) * cols + c]);
        }
        y[t * cols + c] = store<T>(acc);
    }
}

// --- fill_uniform -----------------------------------------------------------------------------------

// A run of FillRun with `start`, the sum of the counts before it (runs of count 0 left out).
struct DeviceRun
{
    std::int64_t local = 0, global = 0, count = 0, start = 0;
};

// Bit-equal to the CPU: u in double, 2u − 1 rounded to float, base + scale·v in float with no
// contraction, one rounding to the storage type. Either `runs` (n of them) or the one run `only`.
template<typename T>
__global__ void fillUniformKernel(T* dst, const DeviceRun* runs, std::int64_t n, DeviceRun only, std::int64_t total,
                                  std::uint64_t key, float base, float scale)
{
    for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < total;
         k += std::int64_t(gridDim.x) * blockDim.x) {
        DeviceRun run = only;
        if (runs) { // the last run starting at or before k
            std::int64_t lo = 0, hi = n - 1;
            while (lo < hi) {
                const std::int64_t mid = (lo + hi + 1) / 2;
                if (runs[mid].start <= k)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            run = runs[lo];
        }
        const std::int64_t i = k - run.start;
        const std::uint64_t bits = splitmix64(key ^ splitmix64(static_cast<std::uint64_t>(run.global + i)));
        const double u = __dmul_rn(static_cast<double>(bits >> 11), 1.0 / 9007199254740992.0);
        const float v = __double2float_rn(__dsub_rn(__dmul_rn(2.0, u), 1.0));
        dst[run.local + i] = store<T>(__fadd_rn(base, __fmul_rn(scale, v)));
    }
}

} // namespace
} // namespace tp::cuda
