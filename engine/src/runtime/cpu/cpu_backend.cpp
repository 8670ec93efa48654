// cpu_backend.cpp — the reference backend: host memory, fp32 arithmetic, f32/bf16/f16 storage.
//
// Math follows Transformers' modeling code (modeling_llama.py and siblings): RMSNorm, rotate_half
// rotary embedding, causal GQA attention, gated activations, softmax top-k routing with fused
// experts. Prefill attention is blocked (flash-style): query tiles against key tiles up to the
// diagonal, an online softmax, never the whole S×S square. Element-wise work in fp32 and the
// attention tiles run on the vector kernels of cpu_kernels.h (AVX-512, AVX2 or SSE2, picked for the
// CPU at hand). GEMMs are oneDNN's SGEMM (its kernels picked by oneDNN for the CPU; one-row
// products OpenBLAS SGEMV), one thread per rank; with 16-bit storage the operands
// are widened to fp32 in scratch panels first (no bf16 GEMM in either C API), so a bf16 run
// computes what a GPU computes: 16-bit values, fp32 accumulation, one rounding per stored result.
// The two streams are the calling thread: every op is done when it returns, and an event is a
// host timestamp.
#include "tp/core/json.h"
#include "tp/runtime/backend.h"

#include "cpu_kernels.h"

#include <cblas.h>
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
extern "C" char* openblas_get_corename(); // OpenBLAS's, not in its cblas.h
#include <sys/resource.h>
#include <unistd.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <fstream>
#include <limits>
#include <new>
#include <numeric>
#include <string>
#include <vector>

namespace tp {

namespace {

// --- element access per storage dtype: load as fp32, store rounded ------------------------------

struct F32
{
    using T = float;
    static float get(const T* p, std::int64_t i) { return p[i]; }
    static void put(T* p, std::int64_t i, float v) { p[i] = v; }
};
struct BF16
{
    using T = std::uint16_t;
    static float get(const T* p, std::int64_t i) { return bf16ToFloat(p[i]); }
    static void put(T* p, std::int64_t i, float v) { p[i] = floatToBf16(v); }
};
struct F16
{
    using T = std::uint16_t;
    static float get(const T* p, std::int64_t i) { return halfToFloat(p[i]); }
    static void put(T* p, std::int64_t i, float v) { p[i] = floatToHalf(v); }
};

template<typename Fn> Status withStorage(DType t, Fn&& fn)
{
    switch (t) {
    case DType::F32: fn(F32{}); return {};
    case DType::BF16: fn(BF16{}); return {};
    case DType::F16: fn(F16{}); return {};
    default: return Status(StatusCode::Unimplemented, fmt::format("the CPU backend stores F32, BF16 or F16, not {}", dtypeName(t)));
    }
}

template<typename S> typename S::T* rowOf(const Tensor& t, std::int64_t r) { return t.as<typename S::T>() + r * t.stride; }

// Element i of a tensor in a storage dtype (F32, BF16 or F16: isStorageDtype), as fp32.
float storedValue(const Tensor& t, std::int64_t i)
{
    switch (t.dtype) {
    case DType::BF16: return BF16::get(t.as<BF16::T>(), i);
    case DType::F16: return F16::get(t.as<F16::T>(), i);
    default: return F32::get(t.as<F32::T>(), i);
    }
}

// Row `r` of `bias` (storage type S) added to each of the n rows of fp32 y [n, w].
template<typename S> void addRow(float* y, std::int64_t n, std::int64_t w, const Tensor& bias, std::int64_t r)
{
    const auto* b = rowOf<S>(bias, r);
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t c = 0; c < w; ++c)
            y[i * w + c] += S::get(b, c);
}

float* floats(const Tensor& scratch, std::int64_t offset = 0) { return scratch.as<float>() + offset; }

// Rows of a tensor as contiguous fp32 (no copy when it already is).
template<typename S> const float* widened(const Tensor& t, float* buf)
{
    if constexpr (std::is_same_v<S, F32>) {
        if (t.isContiguous())
            return t.as<float>();
    }
    for (std::int64_t r = 0; r < t.rows; ++r)
        for (std::int64_t c = 0; c < t.cols; ++c)
            buf[r * t.cols + c] = S::get(rowOf<S>(t, r), c);
    return buf;
}

// GEMMs are oneDNN's SGEMM, one thread per rank: oneDNN runs its OpenMP teams with the calling
// thread's omp_set_num_threads, set once per thread (libgomp comes with libdnnl, so it is looked up
// rather than linked).
void oneOmpThread()
{
    static thread_local const bool once = [] {
        if (auto set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads")))
            set(1);
        return true;
    }();
    (void)once;
}

Status dnnlGemm(char transB, std::int64_t n, std::int64_t out, std::int64_t in, const float* x, std::int64_t ldx,
                const float* w, std::int64_t ldw, float beta, float* y, std::int64_t ldy)
{
    oneOmpThread();
    const dnnl_status_t st = dnnl_sgemm('N', transB, n, out, in, 1.0f, x, ldx, w, ldw, beta, y, ldy);
    if (st != dnnl_success)
        return Status(StatusCode::Internal, fmt::format("oneDNN sgemm {}×{}×{} (ld {}, {}, {}) failed: status {}", n, out, in,
                                                        ldx, ldw, ldy, static_cast<int>(st)));
    return {};
}

// y[n, out] = x[n, in] · w[in, out] (weights stored as x · W uses them: gpt-oss's experts).
[[nodiscard]] Status sgemmNN(std::int64_t n, std::int64_t out, std::int64_t in, const float* x, std::int64_t ldx, const float* w,
                             std::int64_t ldw, float* y, std::int64_t ldy)
{
    return dnnlGemm('N', n, out, in, x, ldx, w, ldw, 0.0f, y, ldy);
}

// y[n, out] = x[n, in] · w[out, in]ᵀ + beta · y. One row (a decode step of one sequence) is a
// matrix-vector product: OpenBLAS's SGEMV streams the weight once, where SGEMM would pack it first.
[[nodiscard]] Status sgemmNT(std::int64_t n, std::int64_t out, std::int64_t in, const float* x, std::int64_t ldx, const float* w,
                             std::int64_t ldw, float beta, float* y, std::int64_t ldy)
{
    if (n == 1) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(out), static_cast<blasint>(in), 1.0f, w,
                    static_cast<blasint>(ldw), x, 1, beta, y, 1);
        return {};
    }
    return dnnlGemm('T', n, out, in, x, ldx, w, ldw, beta, y, ldy);
}

// Weight rows converted per panel: about 1 MiB of fp32 at a time.
std::int64_t panelRows(std::int64_t in) { return std::clamp<std::int64_t>((std::int64_t(1) << 18) / std::max<std::int64_t>(in, 1), 16, 1024); }

float silu(float v) { return v / (1.0f + std::exp(-v)); }
float geluTanh(float v)
{
    const float k = 0.7978845608028654f; // sqrt(2/pi)
    return 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
}
float activate(Activation a, float v)
{
    switch (a) {
    case Activation::Silu: return silu(v);
    case Activation::Gelu: return 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f));
    case Activation::Relu2: return v > 0 ? v * v : 0.0f;
    case Activation::Sigmoid: return 1.0f / (1.0f + std::exp(-v));
    case Activation::Softplus: return v > 20.0f ? v : std::log1p(std::exp(v)); // torch's threshold
    case Activation::Tanh: return std::tanh(v);
    case Activation::Identity: return v;
    case Activation::GeluTanh: break;
    }
    return geluTanh(v);
}

// The vector kernels' activation index (CpuKernels::gatedAct), or -1 for the scalar path.
int actIndex(Activation a) { return a == Activation::Silu ? 0 : a == Activation::GeluTanh ? 1 : -1; }

std::int64_t alignUp(std::int64_t n, std::int64_t a) { return (n + a - 1) / a * a; }

// Prefill attention tiles: kQueryTile queries against kKeyTile keys at a time (scores, the
// accumulator and a key and value tile of 64-wide heads stay within a 512 KiB L2).
constexpr std::int64_t kQueryTile = 64;
constexpr std::int64_t kKeyTile = 256;
std::int64_t attentionTileFloats(std::int64_t headDim) { return kQueryTile * kKeyTile + kQueryTile * headDim + 2 * kQueryTile; }
// Attention's working floats: one query tile's scores, accumulator and softmax state, then one KV
// head's keys packed for the kernels' scoreTile (rows rounded up to 32 keys); a decode step uses the
// start as one row of scores.
std::int64_t attentionWorkFloats(const AttentionShape& s)
{
    return std::max(attentionTileFloats(std::max(s.headDim, s.vDim())) + s.headDim * alignUp(s.rows(), 32), s.rows());
}

// One integer from a small /proc or /sys file; -1 when absent or not a number ("max").
std::int64_t readSysInt(const std::string& path)
{
    std::ifstream in(path);
    std::int64_t v = -1;
    if (!(in >> v))
        return -1;
    return v;
}

// What the memory cgroup still allows (v2, then v1); -1 without a limit.
std::int64_t cgroupHeadroom()
{
    std::ifstream in("/proc/self/cgroup");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("0::", 0) == 0) { // v2: one unified hierarchy
            const std::string dir = "/sys/fs/cgroup" + line.substr(3);
            const std::int64_t max = readSysInt(dir + "/memory.max"), cur = readSysInt(dir + "/memory.current");
            if (max > 0 && cur >= 0)
                return std::max<std::int64_t>(max - cur, 0);
        } else if (line.find(":memory:") != std::string::npos) { // v1
            const std::string dir = "/sys/fs/cgroup/memory" + line.substr(line.find(":memory:") + 8);
            const std::int64_t max = readSysInt(dir + "/memory.limit_in_bytes");
            const std::int64_t cur = readSysInt(dir + "/memory.usage_in_bytes");
            if (max > 0 && max < (std::int64_t(1) << 60) && cur >= 0)
                return std::max<std::int64_t>(max - cur, 0);
        }
    }
    return -1;
}

// What an address-space limit (ulimit -v) still allows; -1 without one.
std::int64_t addressSpaceHeadroom()
{
    struct rlimit rl {};
    if (::getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return -1;
    std::ifstream statm("/proc/self/statm");
    std::int64_t pages = 0;
    statm >> pages;
    const std::int64_t used = pages * ::sysconf(_SC_PAGESIZE);
    return std::max<std::int64_t>(static_cast<std::int64_t>(rl.rlim_cur) - used, 0);
}

class CpuBackend final : public Backend
{
public:
    explicit CpuBackend(DType storage)
        : Backend(storage)
    {
    }

    DeviceKind device() const override { return DeviceKind::Cpu; }
    int ordinal() const override { return 0; }
    std::string name() const override { return "cpu"; }

    std::int64_t availableBytes() const override { return hostMemoryAvailable(); }

    Result<DeviceBuffer> allocate(std::int64_t bytes) override
    {
        const std::size_t n = static_cast<std::size_t>(alignUp(std::max<std::int64_t>(bytes, 1), 64));
        void* p = ::operator new(n, std::align_val_t(64), std::nothrow);
        if (!p)
            return Status(StatusCode::ResourceExhausted, fmt::format("cannot allocate {} bytes of host memory", bytes));
        countAllocation(bytes);
        return DeviceBuffer(p, bytes, [](void* q) { ::operator delete(q, std::align_val_t(64)); });
    }

    Status reserveEvents(int n) override
    {
        m_events.assign(static_cast<std::size_t>(std::max(n, 0)), {});
        return {};
    }
    Status record(int event, Stream) override
    {
        if (event < 0 || static_cast<std::size_t>(event) >= m_events.size())
            return invalidArgument(fmt::format("event {} outside the {} reserved", event, m_events.size()));
        m_events[static_cast<std::size_t>(event)] = std::chrono::steady_clock::now();
        return {};
    }
    Status wait(Stream, int) override { return {}; }
    Status synchronize() override { return {}; }
    Result<double> elapsedUs(int from, int to) const override
    {
        const std::size_t n = m_events.size();
        if (from < 0 || to < 0 || static_cast<std::size_t>(from) >= n || static_cast<std::size_t>(to) >= n)
            return invalidArgument(fmt::format("events {} and {} outside the {} reserved", from, to, n));
        return std::chrono::duration<double, std::micro>(m_events[static_cast<std::size_t>(to)]
                                                         - m_events[static_cast<std::size_t>(from)])
            .count();
    }
    void* nativeStream(Stream) override { return nullptr; }

    std::int64_t gemmScratchBytes(std::int64_t n, std::int64_t in, std::int64_t out) const override
    {
        if (storage() == DType::F32)
            return 0;
        const std::int64_t p = std::min(panelRows(in), out);
        return 4 * (n * in + p * in + n * p);
    }

    std::int64_t attentionScratchBytes(const AttentionShape& s) const override
    {
        // attentionWorkFloats; in 16-bit storage also q, y and each sequence's keys and values widened
        // to fp32 (sized by the rows the keys may fill, so that a cache's scratch fits every step).
        std::int64_t floats = attentionWorkFloats(s);
        if (storage() != DType::F32)
            floats += s.batch * (s.seq * s.heads + s.rows() * s.kvHeads) * (s.headDim + s.vDim());
        return 4 * floats;
    }

    std::int64_t expertsScratchBytes(std::int64_t tokens, std::int64_t hidden, const ExpertsShape& s) const override
    {
        const std::int64_t I = s.intermediate, M = tokens;
        std::int64_t floats = M * hidden /* routed x */ + M * 2 * I + M * I + M * hidden /* expert out */ + tokens * hidden /* sum */;
        if (storage() != DType::F32)
            floats += 2 * I * hidden + hidden * I; // one expert's weights widened
        const std::int64_t routed = tokens * s.topK;
        // tables 8-aligned: bucket counts, the experts by score, each pick's token and weight, one
        // token's choice scores and group scores
        return alignUp(4 * floats, 64)
            + alignUp(8 * (s.localExperts + 1) + 8 * s.experts + 12 * routed + 4 * s.experts + 4 * s.groups, 64);
    }

    std::int64_t routeScratchBytes(const ExpertsShape& s) const override
    {
        return 8 * s.experts + 4 * s.experts + 4 * s.groups; // the experts by score, one token's choice and group scores
    }

protected:
    Status doUpload(const void* host, const Tensor& dst) override
    {
        std::memcpy(dst.data, host, static_cast<std::size_t>(dst.bytes()));
        return {};
    }
    Status doDownload(const Tensor& src, void* host) override
    {
        std::memcpy(host, src.data, static_cast<std::size_t>(src.bytes()));
        return {};
    }

    Status doGemm(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y, const Tensor& scratch) override
    {
        const std::int64_t n = x.rows, in = x.cols, out = w.rows;
        if (storage() == DType::F32) {
            float* Y = y.as<float>();
            for (std::int64_t t = 0; t < n; ++t) // the bias (or zeros when there is no input), added to below
                if (bias)
                    std::copy_n(bias->as<float>(), out, Y + t * y.stride);
                else if (in == 0)
                    std::fill_n(Y + t * y.stride, out, 0.0f);
            if (in > 0)
                return sgemmNT(n, out, in, x.as<float>(), x.stride, w.as<float>(), in, bias ? 1.0f : 0.0f, Y, y.stride);
            return {};
        }
        Status gemm;
        TP_RETURN_IF_ERROR(withStorage(storage(), [&](auto s) {
            using S = decltype(s);
            float* X = floats(scratch);
            widened<S>(x, X);
            const std::int64_t P = std::min(panelRows(in), out);
            float* Wp = X + n * in;
            float* C = Wp + P * in;
            for (std::int64_t j0 = 0; j0 < out; j0 += P) {
                const std::int64_t p = std::min(P, out - j0);
                const auto* W = w.as<typename S::T>() + j0 * in;
                for (std::int64_t i = 0; i < p * in; ++i)
                    Wp[i] = S::get(W, i);
                if (in > 0)
                    gemm = sgemmNT(n, p, in, X, in, Wp, in, 0.0f, C, p);
                else
                    std::fill_n(C, n * p, 0.0f);
                if (!gemm.ok())
                    return;
                for (std::int64_t t = 0; t < n; ++t)
                    for (std::int64_t j = 0; j < p; ++j) {
                        float v = C[t * p + j];
                        if (bias)
                            v += S::get(bias->as<typename S::T>(), j0 + j);
                        if (y.dtype == DType::F32)
                            y.as<float>()[t * y.stride + j0 + j] = v;
                        else
                            S::put(y.as<typename S::T>(), t * y.stride + j0 + j, v);
                    }
            }
        }));
        return gemm;
    }

    Status doRmsNorm(const Tensor& x, const Tensor* w, const Tensor& y, std::int64_t d, float eps, float offset) override
    {
        // A weight across the row (w [1, cols] wider than a group): group g's part of it.
        const std::int64_t perRow = w ? w->cols / d : 1;
        auto weightAt = [&](std::int64_t g) { return (g % perRow) * d; };
        if (storage() == DType::F32 && w) {
            for (std::int64_t g = 0, groups = x.numel() / d; g < groups; ++g)
                m_vk.rmsNorm(x.as<float>() + g * d, w->as<float>() + weightAt(g), y.as<float>() + g * d, d, eps, offset);
            return {};
        }
        return withStorage(storage(), [&](auto s) {
            using S = decltype(s);
            const auto* X = x.as<typename S::T>();
            auto* Y = y.as<typename S::T>();
            const std::int64_t groups = x.numel() / d;
            for (std::int64_t g = 0; g < groups; ++g) {
                const auto* Wt = w ? w->as<typename S::T>() + weightAt(g) : nullptr; // none: a weight of 1
                double ss = 0;
                for (std::int64_t j = 0; j < d; ++j) {
                    const float v = S::get(X, g * d + j);
                    ss += double(v) * v;
                }
                const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(d)) + eps);
                for (std::int64_t j = 0; j < d; ++j)
                    S::put(Y, g * d + j, (Wt ? offset + S::get(Wt, j) : 1.0f) * (S::get(X, g * d + j) * inv));
            }
        });
    }

    Status doLayerNorm(const Tensor& x, const Tensor* w, const Tensor* b, const Tensor& y, float eps, float offset) override
    {
        return withStorage(storage(), [&](auto s) {
            using S = decltype(s);
            const auto* X = x.as<typename S::T>();
            const auto* Wt = w ? w->as<typename S::T>() : nullptr; // none: a weight of 1
            const auto* Bt = b ? b->as<typename S::T>() : nullptr; // none: no bias
            auto* Y = y.as<typename S::T>();
            const std::int64_t d = x.cols;
            for (std::int64_t r = 0; r < x.rows; ++r) {
                double sum = 0, ss = 0;
                for (std::int64_t j = 0; j < d; ++j)
                    sum += S::get(X, r * d + j);
                const double mean = sum / static_cast<double>(d);
                for (std::int64_t j = 0; j < d; ++j) {
                    const double c = S::get(X, r * d + j) - mean;
                    ss += c * c;
                }
                const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(d)) + eps);
                for (std::int64_t j = 0; j < d; ++j)
                    S::put(Y, r * d + j,
                           (Wt ? offset + S::get(Wt, j) : 1.0f) * ((S::get(X, r * d + j) - static_cast<float>(mean)) * inv)
                               + (Bt ? S::get(Bt, j) : 0.0f));
            }
        });
    }

    Status doActivation(const Tensor& x, const Tensor& y, Activation act) override
    {
        return withStorage(storage(), [&](auto s) {
            using S = decltype(s);
            auto* Y = y.as<typename S::T>();
            for (std::int64_t r = 0; r < y.rows; ++r) {
                const auto* X = rowOf<S>(x, r);
                for (std::int64_t c = 0; c < y.cols; ++c)
                    S::put(Y, r * y.cols + c, activate(act, S::get(X, c)));
            }
        });
    }

    Status doRope(const Tensor& x, const Tensor& y, std::int64_t hd, const Tensor& positions, const Tensor& table,
                  bool interleaved, bool leading) override
    {
        const std::int32_t* pos = positions.as<std::int32_t>();
        for (std::int64_t t = 0; t < x.rows; ++t)
            if (pos[t] < 0 || pos[t] >= table.rows)
                return invalidArgument(fmt::format("rope: position {} outside the table of {}", pos[t], table.rows));
        return withStorage(storage(), [&](auto s) {
            using S = decltype(s);
            const auto* X = x.as<typename S::T>();
            auto* Y = y.as<typename S::T>();
            // The rotated part of each head: its last d columns (or its first: leading); pair j is (j, j + d/2) or (2j, 2j + 1).
            const std::int64_t d = table.cols, half = d / 2, pass = hd - d, W = x.cols, rot = leading ? 0 : pass, kept = leading ? d : 0;
            const std::int64_t second = interleaved ? 1 : half, step = interleaved ? 2 : 1;
            for (std::int64_t t = 0; t < x.rows; ++t) {
                const float* cs = table.as<float>() + pos[t] * d; // cos[half] then sin[half]
                for (std::int64_t h = 0; h < W / hd; ++h) {
                    const std::int64_t b = t * W + h * hd;
                    if (Y != X)
                        for (std::int64_t j = 0; j < pass; ++j)
                            Y[b + kept + j] = X[b + kept + j];
                    for (std::int64_t j = 0; j < half; ++j) {
                        const std::int64_t i1 = b + rot + step * j, i2 = i1 + second;
                        const float x1 = S::get(X, i1), x2 = S::get(X, i2);
                        S::put(Y, i1, x1 * cs[j] - x2 * cs[half + j]);
                        S::put(Y, i2, x2 * cs[j] + x1 * cs[half + j]);
                    }
                }
            }
        });
    }

    Status doTemperature(const Tensor& x, const Tensor& y, const Tensor& positions, float floorScale, float attnScale) override
    {
        const std::int32_t* pos = positions.as<std::int32_t>();
        return withStorage(storage(), [&](auto s) {
            using S = decltype(s);
            for (std::int64_t t = 0; t < x.rows; ++t) {
                const float f = std::log1p(std::floor((static_cast<float>(pos[t]) + 1.0f) / floorScale)) * attnScale + 1.0f;
                const auto* in = rowOf<S>(x, t);
                auto* out = rowOf<S>(y, t);
                for (std::int64_t c = 0; c < x.cols; ++c)
                    S::put(out, c, S::get(in, c) * f);
            }
        });
    }

    Status doAttention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y, const AttentionShape& sh,
                       const Tensor& scratch, const Tensor* sinks) override
    {
        const std::int64_t S = sh.seq, L = sh.keys(), hd = sh.headDim, vd = sh.vDim(), qw = q.cols, kw = k.cols,
                           vw = v.cols, yw = y.cols;
        const std::int64_t group = sh.kvHeads > 0 ? sh.heads / sh.kvHeads : 1;
        const float scale = static_cast<float>(sh.scale), cap = static_cast<float>(sh.softcap);
        float* p = floats(scratch);
        float* Y = nullptr;
        Status st = withStorage(storage(), [&](auto st) {
            using St = decltype(st);
            // q, then each sequence's first L key and value rows, as fp32 (views of q, k and v
            // themselves in f32), then y.
            float* buf = p + attentionWorkFloats(sh);
            float* kp = p + attentionTileFloats(std::max(hd, vd));
            const float* Q = widened<St>(q, buf);
            buf += q.numel();
            float* kvBuf = buf;
            const std::int64_t perSeq = L * (kw + vw);
            Y = std::is_same_v<St, F32> ? y.as<float>() : buf + sh.batch * perSeq;
            for (std::int64_t b = 0; b < sh.batch; ++b) {
                const float* Kb = widened<St>(k.rowRange(b * sh.rows(), L), kvBuf + b * perSeq);
                const float* Vb = widened<St>(v.rowRange(b * sh.rows(), L), kvBuf + b * perSeq + L * kw);
                for (std::int64_t h = 0; h < sh.heads; ++h) {
                    const float* qh = Q + b * S * qw + h * hd;
                    const float* kh = Kb + (h / group) * hd;
                    const float* vh = Vb + (h / group) * vd;
                    float* yh = Y + b * S * yw + h * vd;
                    const float sink = sinks ? St::get(sinks->as<typename St::T>(), h) : -std::numeric_limits<float>::infinity();
                    const HeadDims dims{hd, vd, qw, kw, vw, yw, sh.window, sh.chunk};
                    if (S == 1) {
                        decodeHead(qh, kh, vh, yh, L, dims, scale, cap, sink, p, m_vk);
                        continue;
                    }
                    if (stopRequested())
                        return;
                    if (h % group == 0) // the group's keys packed once
                        m_vk.packKeys(kh, kw, L, hd, kp);
                    prefillHead(qh, kp, vh, yh, S, sh.past, dims, scale, cap, sink, p, m_vk, this);
                }
            }
        });
        TP_RETURN_IF_ERROR(st);
        if (stopRequested())
            return Status(StatusCode::Cancelled, "attention cancelled");
        if (storage() != DType::F32)
            fromFloat(Y, storage(), y.data, y.numel());
        return {};
    }

    // Scores soft-capped in place: c · tanh(s / c).
    static void softcap(float* row, std::int64_t n, float cap)
    {
        if (cap > 0)
            for (std::int64_t j = 0; j < n; ++j)
                row[j] = cap * std::tanh(row[j] / cap);
    }

    // One head's sizes, the row strides of q, k, v and y, and which keys a query sees.
    struct HeadDims
    {
        std::int64_t hd, vd, qw, kw, vw, yw;
        std::int64_t window, chunk;
        // The oldest key position `pos` sees: the last `window`, and only its own chunk.
        std::int64_t firstKey(std::int64_t pos) const
        {
            std::int64_t f = window > 0 ? std::max<std::int64_t>(0, pos - window + 1) : 0;
            return chunk > 0 ? std::max(f, pos - pos % chunk) : f;
        }
    };

    // One query (a decode step) over the keys it sees of L: matrix-vector products and one softmax
    // row (over the sink logit too; −∞: none).
    static void decodeHead(const float* qh, const float* kh, const float* vh, float* yh, std::int64_t L, const HeadDims& dm,
                           float scale, float cap, float sink, float* p, const cpu::Kernels& vk)
    {
        const std::int64_t hd = dm.hd, kw = dm.kw;
        const std::int64_t first = dm.firstKey(L - 1), n = L - first;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(n), static_cast<blasint>(hd), scale, kh + first * kw,
                    static_cast<blasint>(kw), qh, 1, 0.0f, p, 1);
        softcap(p, n, cap);
        const float mx = std::max(vk.maxOf(p, n), sink);
        const float sum = vk.expShiftSum(p, n, mx) + std::exp(sink - mx);
        vk.scale(p, n, 1.0f / sum);
        cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<blasint>(n), static_cast<blasint>(dm.vd), 1.0f, vh + first * dm.vw,
                    static_cast<blasint>(dm.vw), p, 1, 0.0f, yh, 1);
    }

    // S queries of one head, causal (query i sees keys 0 … past + i, the last `window` of them with
    // a sliding window), in tiles: for each query tile the key tiles from its first query's oldest
    // key to its last query's diagonal (from a whole key panel), scores by the kernels' scoreTile
    // against the packed keys kp, an online softmax (running max m and sum l per row; the
    // accumulator rescaled by exp(m_old − m_new) when the max grows), the accumulator updated by
    // weightedSum, divided by l at the end. Tiles wholly outside are never computed; in a tile each
    // row's unseen keys get weight 0. A sink logit (finite) starts each row's max and sum as a
    // key of value 0 would.
    static void prefillHead(const float* qh, const float* kp, const float* vh, float* yh, std::int64_t S, std::int64_t past,
                            const HeadDims& dm, float scale, float cap, float sink, float* p, const cpu::Kernels& vk,
                            const Backend* cancel = nullptr)
    {
        const std::int64_t hd = dm.hd, vd = dm.vd, qw = dm.qw, panel = vk.keyPanel;
        float* sc = p;                          // [kQueryTile × kKeyTile] scores, then weights
        float* acc = sc + kQueryTile * kKeyTile; // [kQueryTile × vd]
        float* m = acc + kQueryTile * std::max(hd, vd); // [kQueryTile] running max
        float* l = m + kQueryTile;               // [kQueryTile] running sum
        auto firstKey = [&](std::int64_t pos) { return dm.firstKey(pos); };
        for (std::int64_t i0 = 0; i0 < S; i0 += kQueryTile) {
            if (cancel && i0 % (16 * kQueryTile) == 0 && cancel->stopRequested())
                return; // the caller returns Cancelled
            const std::int64_t rq = std::min(kQueryTile, S - i0), keyEnd = past + i0 + rq;
            std::fill_n(m, rq, sink);
            std::fill_n(l, rq, std::isfinite(sink) ? 1.0f : 0.0f);
            std::fill_n(acc, rq * vd, 0.0f);
            for (std::int64_t j0 = firstKey(past + i0) / panel * panel; j0 < keyEnd; j0 += kKeyTile) {
                const std::int64_t ck = std::min(kKeyTile, keyEnd - j0);
                vk.scoreTile(qh + i0 * qw, qw, kp + j0 * hd, rq, ck, hd, scale, sc, kKeyTile);
                for (std::int64_t r = 0; r < rq; ++r) {
                    float* row = sc + r * kKeyTile;
                    const std::int64_t pos = past + i0 + r;
                    const std::int64_t from = std::clamp<std::int64_t>(firstKey(pos) - j0, 0, ck);
                    const std::int64_t to = std::clamp<std::int64_t>(pos + 1 - j0, from, ck);
                    if (to > from) {
                        softcap(row + from, to - from, cap);
                        const float mx = std::max(m[r], vk.maxOf(row + from, to - from));
                        if (mx > m[r]) {
                            const float alpha = std::exp(m[r] - mx); // 0 on the first tile without a sink (m = −∞)
                            l[r] *= alpha;
                            vk.scale(acc + r * vd, vd, alpha);
                            m[r] = mx;
                        }
                        l[r] += vk.expShiftSum(row + from, to - from, m[r]);
                    }
                    std::fill(row, row + from, 0.0f);
                    std::fill(row + to, row + ck, 0.0f);
                }
                vk.weightedSum(sc, kKeyTile, vh + j0 * dm.vw, dm.vw, rq, ck, vd, acc, vd);
            }
            for (std::int64_t r = 0; r < rq; ++r) {
                float* out = yh + (i0 + r) * dm.yw;
                const float inv = 1.0f / l[r];
                for (std::int64_t d = 0; d < vd; ++d)
                    out[d] = acc[r * vd + d] * inv;
            }
        }
    }

    Status doMlaKv(const Tensor& kv, const Tensor& rope, const Tensor& k, const Tensor& v, std::int64_t heads,
                   std::int64_t nope) override
    {
        const std::int64_t eb = kv.elementBytes(), d = rope.cols, vd = kv.cols / heads - nope;
        for (std::int64_t t = 0; t < kv.rows; ++t) {
            const char* in = kv.as<char>() + t * kv.cols * eb;
            const char* r = rope.as<char>() + t * rope.stride * eb;
            char* ko = k.as<char>() + t * k.cols * eb;
            char* vo = v.as<char>() + t * v.cols * eb;
            for (std::int64_t h = 0; h < heads; ++h) {
                const char* head = in + h * (nope + vd) * eb;
                std::memcpy(ko + h * (nope + d) * eb, head, static_cast<std::size_t>(nope * eb));
                std::memcpy(ko + (h * (nope + d) + nope) * eb, r, static_cast<std::size_t>(d * eb));
                std::memcpy(vo + h * vd * eb, head + nope * eb, static_cast<std::size_t>(vd * eb));
            }
        }
        return {};
    }

    Status doGatedAct(const Tensor& gate, const Tensor& up, const Tensor& y, Activation act, std::int64_t span) override
    {
        if (storage() == DType::F32 && actIndex(act) >= 0 && span == 1) {
            for (std::int64_t r = 0; r < y.rows; ++r)
                m_vk.gatedAct(rowOf<F32>(gate, r), rowOf<F32>(up, r), y.as<float>() + r * y.cols, y.cols, actIndex(act));
            return {};
        }
        return withStorage(storage(), [&](auto s) {
            using S = decltype(s);
            auto* Y = y.as<typename S::T>();
            for (std::int64_t r = 0; r < y.rows; ++r) {
                const auto* g = rowOf<S>(gate, r);
                const auto* u = rowOf<S>(up, r);
                for (std::int64_t c = 0; c < y.cols; ++c)
                    S::put(Y, r * y.cols + c, activate(act, S::get(g, c / span)) * S::get(u, c));
            }
        });
    }

    Status doCausalConv(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& state, const Tensor& y,
                        std::optional<Activation> act, bool fresh) override
    {
        const std::int64_t K = w.cols, C = x.cols, batch = state.rows / K, S = x.rows / batch;
        return withStorage(storage(), [&](auto s) {
            using St = decltype(s);
            for (std::int64_t b = 0; b < batch; ++b)
                for (std::int64_t c = 0; c < C; ++c) {
                    // Element i of the channel's stream: its K cached inputs, then this forward's S.
                    auto stream = [&](std::int64_t i) {
                        return i >= K ? St::get(rowOf<St>(x, b * S + i - K), c) : fresh ? 0.0f : St::get(rowOf<St>(state, b * K + i), c);
                    };
                    const auto* wc = w.as<typename St::T>() + c * K;
                    const float b0 = bias ? St::get(bias->as<typename St::T>(), c) : 0.0f;
                    for (std::int64_t t = 0; t < S; ++t) {
                        float v = b0;
                        for (std::int64_t k = 0; k < K; ++k)
                            v += St::get(wc, k) * stream(t + 1 + k);
                        St::put(rowOf<St>(y, b * S + t), c, act ? activate(*act, v) : v);
                    }
                    for (std::int64_t i = 0; i < K; ++i) // row i takes stream[S + i]: a row not yet overwritten
                        St::put(rowOf<St>(state, b * K + i), c, stream(S + i));
                }
        });
    }

    Status doSsmScan(const Tensor& x, const Tensor& dt, const Tensor& B, const Tensor& C, const Tensor& aLog, const Tensor& D,
                     const Tensor& dtBias, const Tensor& state, const Tensor& y, const ScanShape& sh) override
    {
        const std::int64_t S = y.rows / sh.batch, P = sh.headDim, N = sh.state, perGroup = sh.heads / sh.groups;
        const float dtMax = static_cast<float>(sh.dtMax);
        float* st = state.as<float>();
        if (sh.fresh)
            std::fill(st, st + state.numel(), 0.0f);
        return withStorage(storage(), [&](auto s) {
            using St = decltype(s);
            auto* Y = y.as<typename St::T>();
            for (std::int64_t b = 0; b < sh.batch; ++b)
                for (std::int64_t h = 0; h < sh.heads; ++h) {
                    const std::int64_t g = h / perGroup;
                    const float a = -std::exp(St::get(aLog.as<typename St::T>(), h)), d = St::get(D.as<typename St::T>(), h);
                    const float bias = St::get(dtBias.as<typename St::T>(), h);
                    float* sh0 = st + (b * sh.heads + h) * P * N;
                    for (std::int64_t t = 0; t < S; ++t) {
                        const std::int64_t r = b * S + t;
                        const float step = std::clamp(activate(Activation::Softplus, St::get(rowOf<St>(dt, r), h) + bias),
                                                      static_cast<float>(sh.dtMin), dtMax);
                        const float decay = std::exp(a * step);
                        const auto* Br = rowOf<St>(B, r) + g * N;
                        const auto* Cr = rowOf<St>(C, r) + g * N;
                        const auto* Xr = rowOf<St>(x, r) + h * P;
                        for (std::int64_t p = 0; p < P; ++p) {
                            const float xp = St::get(Xr, p), dx = step * xp;
                            float* sp = sh0 + p * N;
                            float out = 0;
                            for (std::int64_t n = 0; n < N; ++n) {
                                sp[n] = decay * sp[n] + dx * St::get(Br, n);
                                out += St::get(Cr, n) * sp[n];
                            }
                            St::put(Y, r * y.cols + h * P + p, out + d * xp);
                        }
                    }
                }
        });
    }

    Status doDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& a, const Tensor& aLog,
                       const Tensor& dtBias, const Tensor& state, const Tensor& y, const DeltaShape& sh) override
    {
        const std::int64_t S = y.rows / sh.batch, dk = sh.keyDim, dv = sh.valueDim, perKey = sh.valueHeads / sh.keyHeads;
        const float qScale = 1.0f / std::sqrt(static_cast<float>(dk));
        float* st = state.as<float>();
        if (sh.fresh)
            std::fill(st, st + state.numel(), 0.0f);
        return withStorage(storage(), [&](auto s) {
            using St = decltype(s);
            auto* Y = y.as<typename St::T>();
            for (std::int64_t sq = 0; sq < sh.batch; ++sq)
                for (std::int64_t h = 0; h < sh.valueHeads; ++h) {
                    const std::int64_t kh = h / perKey;
                    const float decayRate = -std::exp(St::get(aLog.as<typename St::T>(), h));
                    const float bias = St::get(dtBias.as<typename St::T>(), h);
                    float* Sh = st + (sq * sh.valueHeads + h) * dv * dk; // [dv][dk]
                    for (std::int64_t t = 0; t < S; ++t) {
                        const std::int64_t r = sq * S + t;
                        const auto* Q = rowOf<St>(q, r) + kh * dk;
                        const auto* Kr = rowOf<St>(k, r) + kh * dk;
                        const auto* V = rowOf<St>(v, r) + h * dv;
                        float qq = 0, kk = 0;
                        for (std::int64_t i = 0; i < dk; ++i) {
                            qq += St::get(Q, i) * St::get(Q, i);
                            kk += St::get(Kr, i) * St::get(Kr, i);
                        }
                        const float qn = qScale / std::sqrt(qq + 1e-6f), kn = 1.0f / std::sqrt(kk + 1e-6f);
                        const float beta = activate(Activation::Sigmoid, St::get(rowOf<St>(b, r), h));
                        const float decay = std::exp(decayRate * activate(Activation::Softplus, St::get(rowOf<St>(a, r), h) + bias));
                        for (std::int64_t j = 0; j < dv; ++j) { // column j of S alone: its decay, delta, update and read
                            float* col = Sh + j * dk;
                            float mem = 0;
                            for (std::int64_t i = 0; i < dk; ++i) {
                                col[i] *= decay;
                                mem += col[i] * St::get(Kr, i) * kn;
                            }
                            const float delta = (St::get(V, j) - mem) * beta;
                            float out = 0;
                            for (std::int64_t i = 0; i < dk; ++i) {
                                col[i] += St::get(Kr, i) * kn * delta;
                                out += col[i] * St::get(Q, i) * qn;
                            }
                            St::put(Y, r * y.cols + h * dv + j, out);
                        }
                    }
                }
        });
    }

    Status doEmbedding(const Tensor& ids, const Tensor& w, const Tensor& y, std::int64_t first) override
    {
        const std::int64_t eb = y.elementBytes(), rowBytes = y.cols * eb;
        for (std::int64_t t = 0; t < y.rows; ++t) {
            const std::int64_t local = std::int64_t(ids.as<std::int32_t>()[t]) - first;
            char* dst = y.as<char>() + t * y.stride * eb;
            if (local >= 0 && local < w.rows)
                std::memcpy(dst, w.as<char>() + local * rowBytes, static_cast<std::size_t>(rowBytes));
            else
                std::memset(dst, 0, static_cast<std::size_t>(rowBytes)); // another rank's vocab rows (or 0.0 in every dtype)
        }
        return {};
    }

    Status doAdd(const Tensor& a, const Tensor& b, const Tensor& y) override
    {
        if (storage() == DType::F32) {
            for (std::int64_t r = 0, W = a.cols; r < a.rows; ++r)
                m_vk.add(a.as<float>() + r * W, b.as<float>() + (b.rows == 1 ? 0 : r) * W, y.as<float>() + r * W, W);
            return {};
        }
        return withStorage(storage(), [&](auto s) {
            using S = decltype(s);
            const auto* A = a.as<typename S::T>();
            const auto* B = b.as<typename S::T>();
            auto* Y = y.as<typename S::T>();
            const std::int64_t W = a.cols;
            for (std::int64_t r = 0; r < a.rows; ++r) {
                const std::int64_t br = b.rows == 1 ? 0 : r;
                for (std::int64_t c = 0; c < W; ++c)
                    S::put(Y, r * W + c, S::get(A, r * W + c) + S::get(B, br * W + c));
            }
        });
    }

    Status doCopy(const Tensor& src, const Tensor& dst) override
    {
        const std::int64_t eb = src.elementBytes();
        for (std::int64_t r = 0; r < src.rows; ++r)
            std::memmove(dst.as<char>() + r * dst.stride * eb, src.as<char>() + r * src.stride * eb,
                         static_cast<std::size_t>(src.cols * eb));
        return {};
    }

    Status doScale(const Tensor& x, const Tensor& y, float factor, float cap) override
    {
        return withStorage(storage(), [&](auto s) {
            using S = decltype(s);
            for (std::int64_t r = 0; r < x.rows; ++r) {
                const auto* in = rowOf<S>(x, r);
                auto* out = rowOf<S>(y, r);
                for (std::int64_t c = 0; c < x.cols; ++c) {
                    const float v = factor * S::get(in, c);
                    S::put(out, c, cap > 0 ? cap * std::tanh(v / cap) : v);
                }
            }
        });
    }

    Status doSoftmax(const Tensor& x, const Tensor& y) override
    {
        const std::int64_t E = x.cols;
        for (std::int64_t t = 0; t < x.rows; ++t) {
            const float* in = x.as<float>() + t * E;
            float* out = y.as<float>() + t * E;
            const float mx = *std::max_element(in, in + E);
            double sum = 0;
            for (std::int64_t e = 0; e < E; ++e)
                sum += (out[e] = std::exp(in[e] - mx));
            for (std::int64_t e = 0; e < E; ++e)
                out[e] = static_cast<float>(out[e] / sum);
        }
        return {};
    }

    Status doSigmoid(const Tensor& x, const Tensor& y) override
    {
        const float* in = x.as<float>();
        float* out = y.as<float>();
        for (std::int64_t i = 0, n = x.numel(); i < n; ++i)
            out[i] = 1.0f / (1.0f + std::exp(-in[i]));
        return {};
    }

    Status doArgmax(const Tensor& x, const Tensor& ids) override
    {
        auto* out = ids.as<std::int32_t>();
        auto pick = [&](auto s) {
            using S = decltype(s);
            for (std::int64_t r = 0; r < x.rows; ++r) {
                const auto* row = rowOf<S>(x, r);
                std::int64_t best = 0;
                float bv = -std::numeric_limits<float>::infinity();
                bool any = false;
                for (std::int64_t c = 0; c < x.cols; ++c)
                    if (const float v = S::get(row, c); v > bv || (!any && v == bv)) { // NaN never compares greater
                        bv = v;
                        best = c;
                        any = true;
                    }
                out[r] = static_cast<std::int32_t>(best);
            }
        };
        return withStorage(x.dtype, pick);
    }

    Status doExperts(const Tensor& x, const Tensor& scores, const Tensor& gateUp, const Tensor& down, const Tensor& y,
                     const ExpertsShape& s, const Tensor& scratch, const Tensor* gateUpBias, const Tensor* downBias,
                     const Tensor* scoreBias) override
    {
        // I2: the gate_up rows an expert has ([gate; up], or up alone: ungated)
        const std::int64_t N = x.rows, H = x.cols, I = s.intermediate, I2 = (s.gated ? 2 : 1) * I, El = s.localExperts, E = s.experts;
        // Scratch: fp32 work arrays, then the routing tables.
        float* xe = floats(scratch);
        float* h = xe + N * H;
        float* a = h + N * I2;
        float* o = a + N * I;
        float* acc = o + N * H;
        float* wgu = acc + N * H;
        float* wdn = wgu + (storage() == DType::F32 ? 0 : I2 * H);
        const float* floatsEnd = wdn + (storage() == DType::F32 ? 0 : H * I);
        char* tables = scratch.as<char>() + alignUp(reinterpret_cast<const char*>(floatsEnd) - scratch.as<char>(), 64);
        auto* counts = reinterpret_cast<std::int64_t*>(tables);          // [El + 1] → offsets
        auto* order = counts + (El + 1);                                   // [E] expert ids by score
        auto* tokenOf = order + E;                                         // [N·K]
        auto* weightOf = reinterpret_cast<float*>(tokenOf + N * s.topK);   // [N·K]
        float* choice = weightOf + N * s.topK;                             // [E]
        float* groupScore = choice + E;                                    // [groups]

        // Top-k per token (ties to the lower expert id, as torch.topk on CPU), bucketed by local
        // expert; or the one expert a dispatched row was sent to, weight 1.
        std::fill_n(counts, El + 1, 0);
        auto topK = [&](std::int64_t t, auto&& visit) {
            if (s.givenExperts) {
                const std::int64_t e = scores.as<std::int32_t>()[t];
                if (e >= 0 && e < El)
                    visit(e, 1.0f);
                return;
            }
            pickTopK(scores.as<float>() + t * E, s, scoreBias, choice, groupScore, order, [&](std::int64_t g, float w) {
                if (g - s.firstExpert >= 0 && g - s.firstExpert < El)
                    visit(g - s.firstExpert, w);
            });
        };
        for (std::int64_t t = 0; t < N; ++t)
            topK(t, [&](std::int64_t e, float) { ++counts[e + 1]; });
        std::partial_sum(counts, counts + El + 1, counts);
        for (std::int64_t t = 0; t < N; ++t)
            topK(t, [&](std::int64_t e, float wgt) {
                const std::int64_t at = counts[e]++;
                tokenOf[at] = t;
                weightOf[at] = wgt;
            });
        // counts[e] is now the end of bucket e, i.e. the start of bucket e + 1; bucket e starts at counts[e - 1].
        std::fill_n(acc, N * H, 0.0f);
        Status gemm;
        TP_RETURN_IF_ERROR(withStorage(storage(), [&](auto st) {
            using S = decltype(st);
            if (s.perExpertRows) // every expert's rows, zeros where a token did not pick it
                for (std::int64_t i = 0; i < El * N * H; ++i)
                    S::put(y.as<typename S::T>(), i, 0.0f);
            for (std::int64_t e = 0; e < El; ++e) {
                const std::int64_t begin = e == 0 ? 0 : counts[e - 1], M = counts[e] - begin;
                if (M == 0)
                    continue;
                for (std::int64_t i = 0; i < M; ++i) {
                    // Llama 4: the expert's input is weight · x, both in the storage dtype as Transformers has them.
                    const float w = s.weightInputs ? roundedTo(storage(), weightOf[begin + i]) : 1.0f;
                    for (std::int64_t j = 0; j < H; ++j) {
                        const float v = S::get(rowOf<S>(x, tokenOf[begin + i]), j);
                        xe[i * H + j] = s.weightInputs ? roundedTo(storage(), w * v) : v;
                    }
                }
                const float* GU;
                const float* D;
                if constexpr (std::is_same_v<S, F32>) {
                    GU = gateUp.as<float>() + e * I2 * H;
                    D = down.as<float>() + e * H * I;
                } else {
                    for (std::int64_t i = 0; i < I2 * H; ++i)
                        wgu[i] = S::get(gateUp.as<typename S::T>() + e * I2 * H, i);
                    for (std::int64_t i = 0; i < H * I; ++i)
                        wdn[i] = S::get(down.as<typename S::T>() + e * H * I, i);
                    GU = wgu;
                    D = wdn;
                }
                if (I > 0) {
                    gemm = s.transposed ? sgemmNN(M, I2, H, xe, H, GU, I2, h, I2) // x · W as stored: [H, 2I] and [I, H]
                                        : sgemmNT(M, I2, H, xe, H, GU, H, 0.0f, h, I2);
                    if (!gemm.ok())
                        return;
                    if (gateUpBias)
                        addRow<S>(h, M, I2, *gateUpBias, e);
                    if (!s.gated) {
                        for (std::int64_t i = 0; i < M * I; ++i)
                            a[i] = activate(s.act, h[i]);
                    } else if (s.interleaved || s.swigluLimit > 0) {
                        // gate and up of column c: 2c and 2c + 1 (interleaved), or c and I + c.
                        const std::int64_t gs = s.interleaved ? 2 : 1, us = s.interleaved ? 1 : I;
                        const float lim = static_cast<float>(s.swigluLimit), alpha = static_cast<float>(s.swigluAlpha);
                        for (std::int64_t i = 0; i < M; ++i)
                            for (std::int64_t c = 0; c < I; ++c) {
                                float g = h[i * I2 + gs * c], u = h[i * I2 + gs * c + us];
                                if (lim > 0) { // gpt-oss: (clamp(u, ±limit) + 1) · g·σ(alpha·g), g clamped above
                                    g = std::min(g, lim);
                                    u = std::clamp(u, -lim, lim);
                                    a[i * I + c] = (u + 1.0f) * (g / (1.0f + std::exp(-alpha * g)));
                                } else {
                                    a[i * I + c] = activate(s.act, g) * u;
                                }
                            }
                    } else if (actIndex(s.act) >= 0) {
                        for (std::int64_t i = 0; i < M; ++i)
                            m_vk.gatedAct(h + i * I2, h + i * I2 + I, a + i * I, I, actIndex(s.act));
                    } else {
                        for (std::int64_t i = 0; i < M; ++i)
                            for (std::int64_t c = 0; c < I; ++c)
                                a[i * I + c] = activate(s.act, h[i * I2 + c]) * h[i * I2 + I + c];
                    }
                    gemm = s.transposed ? sgemmNN(M, H, I, a, I, D, H, o, H) : sgemmNT(M, H, I, a, I, D, I, 0.0f, o, H);
                    if (!gemm.ok())
                        return;
                } else {
                    std::fill_n(o, M * H, 0.0f);
                }
                if (downBias && I > 0)
                    addRow<S>(o, M, H, *downBias, e);
                for (std::int64_t i = 0; i < M; ++i) {
                    const std::int64_t t = tokenOf[begin + i];
                    if (s.perExpertRows) { // row e·N + t, as the expert computed it
                        for (std::int64_t j = 0; j < H; ++j)
                            S::put(y.as<typename S::T>(), (e * N + t) * H + j, o[i * H + j]);
                        continue;
                    }
                    const float wgt = s.weightInputs ? 1.0f : weightOf[begin + i];
                    for (std::int64_t j = 0; j < H; ++j)
                        acc[t * H + j] += wgt * o[i * H + j];
                }
            }
            if (!s.perExpertRows)
                for (std::int64_t i = 0; i < N * H; ++i)
                    S::put(y.as<typename S::T>(), i, acc[i]);
        }));
        return gemm;
    }

    // One token's top-k from its scores row (ties to the lower expert id, as torch.topk on CPU):
    // visit(expert, weight) for each pick in order. The choice is over score + bias, the experts
    // outside the best groups at −∞; the weight is the score (renormalised, times the routed scale).
    // choice [E], groupScore [groups], order [E]: work space.
    template<typename Visit>
    static void pickTopK(const float* row, const ExpertsShape& s, const Tensor* scoreBias, float* choice, float* groupScore,
                         std::int64_t* order, Visit&& visit)
    {
        const std::int64_t E = s.experts, G = s.groups, perGroup = E / G;
        auto byValue = [](const float* v) {
            return [v](std::int64_t p, std::int64_t q) { return v[p] > v[q] || (v[p] == v[q] && p < q); };
        };
        if (s.sparseMixer) {
            sparseMixer(row, E, s.jitterEps, visit);
            return;
        }
        const float* pick = row;
        if (scoreBias || G > 1) {
            for (std::int64_t e = 0; e < E; ++e)
                choice[e] = row[e] + (scoreBias ? storedValue(*scoreBias, e) : 0.0f);
            if (G > 1) { // a group's score: the sum of its two best choices (or its best)
                for (std::int64_t g = 0; g < G; ++g) {
                    const float* c = choice + g * perGroup;
                    float a = -std::numeric_limits<float>::infinity(), b = a;
                    for (std::int64_t e = 0; e < perGroup; ++e)
                        if (c[e] > a) {
                            b = a;
                            a = c[e];
                        } else if (c[e] > b) {
                            b = c[e];
                        }
                    groupScore[g] = s.groupByMax ? a : a + b;
                }
                std::iota(order, order + G, std::int64_t(0));
                std::partial_sort(order, order + s.topkGroup, order + G, byValue(groupScore));
                for (std::int64_t j = s.topkGroup; j < G; ++j)
                    std::fill_n(choice + order[j] * perGroup, perGroup, -std::numeric_limits<float>::infinity());
            }
            pick = choice;
        }
        std::iota(order, order + E, std::int64_t(0));
        std::partial_sort(order, order + s.topK, order + E, byValue(pick));
        // The picks' weights: their scores, or (logitChoice) the sigmoid of their logits.
        auto score = [&](std::int64_t e) { return s.logitChoice ? 1 / (1 + std::exp(-static_cast<double>(row[e]))) : row[e]; };
        double sum = 0;
        for (std::int64_t j = 0; j < s.topK; ++j)
            sum += score(order[j]);
        for (std::int64_t j = 0; j < s.topK; ++j) {
            const double w = s.normalize ? score(order[j]) / sum : score(order[j]);
            visit(order[j], static_cast<float>(w * s.routedScale));
        }
    }

    // PhiMoE's sparsemixer as Transformers evaluates it: the best logit's expert (the first of equal ones), weighed by
    // its softmax over the experts whose logit s is within the relative gap (best − s) / max(|s|, best) ≤ 2·eps; then
    // the best of the other experts, weighed likewise among them.
    template<typename Visit>
    static void sparseMixer(const float* logits, std::int64_t E, double eps, Visit&& visit)
    {
        std::int64_t first = -1;
        for (int pick = 0; pick < 2; ++pick) {
            std::int64_t best = -1;
            for (std::int64_t e = 0; e < E; ++e)
                if (e != first && (best < 0 || logits[e] > logits[best]))
                    best = e;
            const float m = logits[best];
            double sum = 0;
            for (std::int64_t e = 0; e < E; ++e) {
                const float factor = std::max(std::abs(logits[e]), m);
                if (e != first && !((m - logits[e]) / factor > static_cast<float>(2 * eps)))
                    sum += std::exp(static_cast<double>(logits[e]) - m);
            }
            visit(best, static_cast<float>(1.0 / sum));
            first = best;
        }
    }

    Status doRoute(const Tensor& scores, const ExpertsShape& s, const Tensor& ids, const Tensor& weights,
                   const Tensor& scratch, const Tensor* scoreBias) override
    {
        auto* order = reinterpret_cast<std::int64_t*>(scratch.data);
        float* choice = reinterpret_cast<float*>(order + s.experts);
        float* groupScore = choice + s.experts;
        for (std::int64_t t = 0; t < scores.rows; ++t) {
            std::int64_t j = 0;
            pickTopK(scores.as<float>() + t * s.experts, s, scoreBias, choice, groupScore, order, [&](std::int64_t e, float w) {
                ids.as<std::int32_t>()[t * s.topK + j] = static_cast<std::int32_t>(e);
                weights.as<float>()[t * s.topK + j++] = w;
            });
        }
        return {};
    }

    Status doSumBlocks(const Tensor& z, const Tensor& y) override
    {
        const std::int64_t n = y.rows, H = y.cols, blocks = z.rows / n;
        return withStorage(storage(), [&](auto st) {
            using S = decltype(st);
            for (std::int64_t t = 0; t < n; ++t)
                for (std::int64_t c = 0; c < H; ++c) {
                    float acc = 0.0f;
                    for (std::int64_t b = 0; b < blocks; ++b)
                        acc += S::get(rowOf<S>(z, b * n + t), c);
                    S::put(y.as<typename S::T>(), t * H + c, acc);
                }
        });
    }

    Status doCombine(const Tensor& z, const Tensor& slots, const Tensor& weights, const Tensor& y) override
    {
        const std::int64_t K = weights.cols, H = y.cols;
        return withStorage(storage(), [&](auto st) {
            using S = decltype(st);
            for (std::int64_t t = 0; t < y.rows; ++t)
                for (std::int64_t c = 0; c < H; ++c) {
                    float acc = 0.0f;
                    for (std::int64_t j = 0; j < K; ++j)
                        if (const std::int32_t slot = slots.as<std::int32_t>()[t * K + j]; slot >= 0 && slot < z.rows)
                            acc += weights.as<float>()[t * K + j] * S::get(rowOf<S>(z, slot), c);
                    S::put(y.as<typename S::T>(), t * H + c, acc);
                }
        });
    }

    Status doFillUniform(const Tensor& dst, const UniformFill& f) override
    {
        return withStorage(storage(), [&](auto s) {
            using S = decltype(s);
            auto* out = dst.as<typename S::T>();
            for (const FillRun& r : f.runs)
                for (std::int64_t i = 0; i < r.count; ++i) {
                    const double u = static_cast<double>(splitmix64(f.key ^ splitmix64(static_cast<std::uint64_t>(r.global + i))) >> 11)
                        * (1.0 / 9007199254740992.0);
                    S::put(out, r.local + i, f.base + f.scale * static_cast<float>(2 * u - 1));
                }
        });
    }

private:
    const cpu::Kernels& m_vk = cpu::kernels(); // the vector kernels for this CPU
    std::vector<std::chrono::steady_clock::time_point> m_events;
};

} // namespace

std::int64_t hostMemoryAvailable()
{
    std::int64_t have = std::int64_t(1) << 40; // no /proc: do not refuse on a guess
    std::ifstream in("/proc/meminfo");
    for (std::string key; in >> key;) {
        std::int64_t kib = 0;
        in >> kib;
        if (key == "MemAvailable:") {
            have = kib * 1024;
            break;
        }
        in.ignore(1 << 20, '\n');
    }
    // TPSTUDIO_MAX_MEMORY (bytes, or with a K, M, G or T suffix) sets a budget below all of these.
    std::int64_t budget = -1;
    if (const char* env = std::getenv("TPSTUDIO_MAX_MEMORY"); env && *env) {
        char* end = nullptr;
        const double v = std::strtod(env, &end);
        const std::string unit(end);
        const double mult = unit.empty() ? 1 : unit == "K" ? 0x1p10 : unit == "M" ? 0x1p20 : unit == "G" ? 0x1p30 : unit == "T" ? 0x1p40 : 0;
        if (std::isfinite(v) && v > 0 && mult > 0 && v * mult < 0x1p62)
            budget = static_cast<std::int64_t>(v * mult);
    }
    for (std::int64_t limit : {cgroupHeadroom(), addressSpaceHeadroom(), budget})
        if (limit >= 0)
            have = std::min(have, limit);
    return have;
}

namespace {
// The instruction set of an OpenBLAS kernel (DYNAMIC_ARCH core names of 0.3.2x).
std::string blasIsa(const std::string& core)
{
    for (const char* c : {"SkylakeX", "Cooperlake", "SapphireRapids"})
        if (core == c)
            return "avx512";
    for (const char* c : {"Haswell", "Zen"})
        if (core == c)
            return "avx2";
    return "sse2";
}

// The instruction set oneDNN dispatches to (capped by ONEDNN_MAX_CPU_ISA), in the vector kernels'
// terms, and its own name for it.
std::pair<std::string, std::string> dnnlIsa()
{
    const int isa = static_cast<int>(dnnl_get_effective_cpu_isa());
    const auto has = [isa](dnnl_cpu_isa_t f) { return (isa & static_cast<int>(f)) == static_cast<int>(f); };
    const char* name = has(dnnl_cpu_isa_avx512_core_bf16) ? "avx512_core_bf16"
        : has(dnnl_cpu_isa_avx512_core_vnni)              ? "avx512_core_vnni"
        : has(dnnl_cpu_isa_avx512_core)                   ? "avx512_core"
        : has(dnnl_cpu_isa_avx2_vnni)                     ? "avx2_vnni"
        : has(dnnl_cpu_isa_avx2)                          ? "avx2"
        : has(dnnl_cpu_isa_avx)                           ? "avx"
                                                          : "sse41";
    return {has(dnnl_cpu_isa_avx512_core) ? "avx512" : has(dnnl_cpu_isa_avx2) ? "avx2" : "sse2", name};
}

std::string dnnlVersion()
{
    const dnnl_version_t* v = dnnl_version();
    return fmt::format("oneDNN v{}.{}.{}", v->major, v->minor, v->patch);
}
} // namespace

std::string cpuMathLibrary()
{
    return fmt::format("{} (SGEMM, {}) + {} (SGEMV)", dnnlVersion(), dnnlIsa().second, openblas_get_config());
}

Result<double> cpuSgemmGflops(std::int64_t m, std::int64_t n, std::int64_t k, int iters)
{
    constexpr std::int64_t kMaxDim = std::int64_t(1) << 24; // so that no product below can overflow
    if (m <= 0 || n <= 0 || k <= 0 || iters <= 0 || m > kMaxDim || n > kMaxDim || k > kMaxDim)
        return invalidArgument(fmt::format("sgemm {}×{}×{}: sizes out of range (1 to 2^24 each)", m, n, k));
    const std::int64_t floats = m * k + n * k + m * n;
    if (floats > (std::int64_t(1) << 32))
        return invalidArgument(fmt::format("sgemm {}×{}×{}: sizes out of range", m, n, k));
    std::vector<float> buf;
    try {
        buf.assign(static_cast<std::size_t>(floats), 0.0f);
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::ResourceExhausted, fmt::format("sgemm {}×{}×{}: cannot allocate {} floats", m, n, k, floats));
    }
    for (std::size_t i = 0; i < buf.size(); ++i)
        buf[i] = static_cast<float>(static_cast<int>(i % 17) - 8) * 0.01f;
    openblas_set_num_threads(1);
    const float* x = buf.data();
    const float* w = x + m * k;
    float* y = buf.data() + m * k + n * k;
    // The backend's own product (oneDNN; SGEMV for one row) and OpenBLAS's SGEMM: the faster one.
    double best = 0;
    for (int lib = 0; lib < 2; ++lib) {
        std::vector<double> seconds;
        for (int i = -1; i < iters; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            if (lib == 0)
                TP_RETURN_IF_ERROR(sgemmNT(m, n, k, x, k, w, k, 0.0f, y, n));
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(n),
                            static_cast<blasint>(k), 1.0f, x, static_cast<blasint>(k), w, static_cast<blasint>(k), 0.0f, y,
                            static_cast<blasint>(n));
            if (i >= 0)
                seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
        best = std::max(best, 2.0 * double(m) * double(n) * double(k) / seconds[seconds.size() / 2] / 1e9);
    }
    return best;
}

std::string cpuKernelsInUse()
{
    const std::string core = openblas_get_corename();
    const auto [isa, name] = dnnlIsa();
    return fmt::format("GEMM {} {} ({}), GEMV OpenBLAS kernel {} ({}), vector kernels {}; CPU: {}", dnnlVersion(), name, isa, core,
                       blasIsa(core), cpu::kernels().isa, cpu::cpuIsaList());
}

std::string cpuMathWarning()
{
    const std::string cpuIsas = cpu::cpuIsaList(), core = openblas_get_corename();
    const std::string best = cpuIsas.substr(0, cpuIsas.find(' '));
    const auto forced = [](const char* var) {
        const char* v = std::getenv(var);
        return v && *v ? fmt::format(", {}={}", var, v) : std::string();
    };
    std::vector<std::string> below;
    if (const auto [isa, name] = dnnlIsa(); isa != best && best != "sse2")
        below.push_back(fmt::format("oneDNN's GEMMs run {}{}{}", name, forced("ONEDNN_MAX_CPU_ISA"), forced("DNNL_MAX_CPU_ISA")));
    if (blasIsa(core) != best && best != "sse2")
        below.push_back(fmt::format("OpenBLAS (one-row products) runs its {} kernels ({}{})", core, blasIsa(core), forced("OPENBLAS_CORETYPE")));
    if (cpu::kernels().isa != best)
        below.push_back(fmt::format("the vector kernels run {} (TPSTUDIO_CPU_ISA)", cpu::kernels().isa));
    std::string ignored;
    if (const std::string cap = cpu::unknownIsaCap(); !cap.empty())
        ignored = fmt::format("TPSTUDIO_CPU_ISA={}{} is not avx512, avx2 or sse2, and caps nothing",
                              terminalSafe(cap.substr(0, 32)), cap.size() > 32 ? "…" : "");
    if (below.empty())
        return ignored;
    return fmt::format("{}{}this CPU has {} but {}: the CPU backend runs below the machine's peak", ignored,
                       ignored.empty() ? "" : "; ", best, fmt::join(below, " and "));
}

Result<std::unique_ptr<Backend>> makeCpuBackend(DType storage)
{
    if (!isStorageDtype(storage))
        return invalidArgument(fmt::format("the CPU backend stores f32, bf16 or f16, not {}", dtypeName(storage)));
    openblas_set_num_threads(1); // ranks are the threads: one BLAS thread each
    return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(storage));
}

} // namespace tp
