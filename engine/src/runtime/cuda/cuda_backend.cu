// cuda_backend.cu — the CUDA backend: one device, f32/bf16/f16 storage, fp32 arithmetic, the CPU
// backend's results (cpu_backend.cpp is the reference; tst_backend_ops holds both to it).
//
// Per backend: a compute stream (every op) and a communication stream (the communicator's), both
// non-blocking; one cuBLAS handle bound to the compute stream with a workspace allocated at
// creation; CUDA events for record/wait/elapsedUs; a small pinned buffer for the experts op's
// bucket sizes. Every entry point makes the device current first: rank threads are not the thread
// that made the backend. Ops never allocate and, but for experts, never synchronise.
//
// GEMMs are cuBLAS with CUBLAS_COMPUTE_32F in the default math mode (no TF32: f32 storage is true
// fp32) with reduced-precision split-K reductions disallowed. A bias is broadcast into y first and added by cuBLAS with beta = 1: the bias is stored in
// the storage dtype, so y holds it exactly and the result is rounded once.
//
// Attention (causal GQA) is cuBLAS as well. Query head h = kv·G + j reads kv head kv (G = H/KV);
// the heads of one (sequence, kv) or (sequence, j) — whichever is more — form one strided batched
// GEMM, so a (b, unit) launch covers `inner` = max(KV, G) heads with constant strides:
//   scores = scale · K·Qᵀ (fp32, scratch) → causal softmax (a warp per row, writes P in the storage
//   dtype with zeros above the diagonal; in place for f32) → y = P·V (ld H·hd, rounded once).
// Scratch holds the scores (and P) of a chunk of units and of query rows [i0, i0 + R), at positions
// past + i, whose keys are [0, past + i0 + R). Keys of sequence b start at row b·K of k and v (K =
// AttentionShape::rows(): the S tokens, or a KV cache's capacity). With rowBytes = K·(4 + p), p = 0
// for f32 and 2 otherwise:
//   all rows (R = S) and C = min(units, ⌊512 MiB / (inner·S·rowBytes)⌋) units per chunk when one
//   unit fits in 512 MiB, else C = 1 and R = max(1, ⌊512 MiB / (inner·rowBytes)⌋);
//   attentionScratchBytes = 256 + align(4·C·inner·R·K) + align(p·C·inner·R·K)   (align: 256).
// At S = 512 (Llama-3.1-8B, T = 1, bf16) that is one chunk: 4 + 4 GEMMs and one softmax.
//
// Experts (top-k routing, sparse like the CPU), per chunk of Nt tokens:
//   route (a warp per token: top-k, ties to the lower id, renormalised in double; counts per local
//   expert) → offsets → bucket rows → copy the El + 1 offsets to pinned memory and synchronise the
//   compute stream, once per chunk (one chunk unless the scratch below passes 512 MiB): the host
//   needs the bucket sizes as GEMM shapes → gather the routed rows → per expert with M > 0, gate_up
//   GEMM into fp32 → act(gate)·up for all rows (stored in the storage dtype: the down GEMM's
//   operand) → per expert the down GEMM into fp32 → each token sums its picks' weight · out in
//   pick order (no atomics: the result is deterministic) and rounds once.
//   With k = top-k, kl = min(k, El), hw = max(2I, H), e = storage bytes, Nt = clamp(⌊512 MiB /
//   (12k + kl·(4 + H·e + 4·hw + I·e))⌋, 1, tokens), rows = Nt·kl:
//   expertsScratchBytes = 256 + 2·align(4·El) + align(4·(El+1)) + 3·align(4·Nt·k) + align(4·rows)
//                         + align(e·rows·H) + align(4·rows·hw) + align(e·rows·I).
//   (The fp32 gate_up rows and the fp32 down rows share one buffer: the first is read before the
//   second is written.)
#include "cuda_check.h"
#include "cuda_kernels.cuh"

#include "tp/runtime/backend.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace tp {

namespace {

using cuda::cat;
using cuda::useDevice;
using namespace cuda; // kernels and launch constants

constexpr std::int64_t kAlign = 256;                               // scratch sub-buffers
constexpr std::int64_t kScratchBudget = std::int64_t(512) << 20;   // attention and experts chunking
constexpr std::size_t kBlasWorkspaceBytes = std::size_t(32) << 20; // cuBLAS's recommendation for Hopper
constexpr std::int64_t kMaxLocalExperts = 16383;                   // the pinned readback holds El + 1 offsets
constexpr std::size_t kPinnedBytes = std::size_t(kMaxLocalExperts + 1) * sizeof(std::int32_t);
constexpr std::int64_t kMaxGridY = 65535;

std::int64_t alignUp(std::int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
bool fitsInt(std::int64_t v) { return v >= 0 && v <= INT_MAX; }

struct PinnedRelease
{
    void operator()(void* p) const { cudaFreeHost(p); }
};
using PinnedMemory = cuda::Owned<void*, PinnedRelease>;

// Frees device memory of `device` from whichever thread drops the last owner, and leaves that
// thread's current device as it was.
void releaseOn(int device, void* p)
{
    int previous = -1;
    const bool known = cudaGetDevice(&previous) == cudaSuccess;
    cudaSetDevice(device);
    cudaFree(p);
    if (known && previous != device)
        cudaSetDevice(previous);
}

// --- storage types -------------------------------------------------------------------------------

template<typename T> struct Tag
{
    using type = T;
};

// Calls fn(Tag<T>{}) with T the device type of a storage dtype.
template<typename Fn> Status withStorage(DType t, const char* op, Fn&& fn)
{
    switch (t) {
    case DType::F32: return fn(Tag<float>{});
    case DType::BF16: return fn(Tag<__nv_bfloat16>{});
    case DType::F16: return fn(Tag<__half>{});
    default: return invalidArgument(cat(op, ": the CUDA backend stores F32, BF16 or F16, not ", dtypeName(t)));
    }
}

cudaDataType_t blasType(DType t)
{
    return t == DType::BF16 ? CUDA_R_16BF : t == DType::F16 ? CUDA_R_16F : CUDA_R_32F;
}

// --- launch shapes ---------------------------------------------------------------------------------

struct Launch
{
    dim3 grid;
    dim3 block;
};

// Row-wise elementwise kernels: a thread per column, rows strided by gridDim.y.
Launch rowLaunch(std::int64_t rows, std::int64_t cols)
{
    return {dim3(static_cast<unsigned>((cols + kThreads - 1) / kThreads), static_cast<unsigned>(std::min(rows, kMaxGridY))),
            dim3(kThreads)};
}

// Warp-per-row kernels.
unsigned warpRowBlocks(std::int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

// Whether `rows` rows of `cols` fit the launch shapes above (grid x below 2³¹).
Status launchable(const char* op, std::int64_t rows, std::int64_t cols)
{
    if (rows < 0 || cols < 0 || cols > INT_MAX || rows / kRowsPerBlock >= INT_MAX)
        return invalidArgument(cat(op, ": ", rows, " × ", cols, " is beyond the CUDA backend's launch shapes"));
    return {};
}

// --- scratch ---------------------------------------------------------------------------------------

// Sub-buffers of a scratch tensor, each aligned to 256 bytes; *ScratchBytes adds 256 for the base.
class Carver
{
public:
    explicit Carver(const Tensor& scratch)
        : m_at(reinterpret_cast<std::uintptr_t>(scratch.data))
        , m_end(m_at + static_cast<std::uintptr_t>(std::max<std::int64_t>(scratch.bytes(), 0)))
    {
    }
    template<typename T> T* take(std::int64_t count)
    {
        const std::uintptr_t p = (m_at + kAlign - 1) / kAlign * kAlign;
        m_at = p + static_cast<std::uintptr_t>(count) * sizeof(T);
        return reinterpret_cast<T*>(p);
    }
    Status check(const char* op) const
    {
        return m_at <= m_end ? Status() : Status(StatusCode::Internal, cat(op, ": scratch carved past its end"));
    }

private:
    std::uintptr_t m_at;
    std::uintptr_t m_end;
};

// --- attention plan (a pure function of the shape) ---------------------------------------------------

struct AttentionPlan
{
    bool kvInner = true;            // one GEMM batches the kv heads of a query slot j (else the G heads of a kv head)
    std::int64_t inner = 0;         // heads per GEMM
    std::int64_t outer = 0;         // GEMMs per sequence
    std::int64_t units = 0;         // batch · outer
    std::int64_t unitsPerChunk = 0;
    std::int64_t rowsPerBlock = 0;  // query rows per pass
    std::int64_t scoreElems = 0;    // scores (and probabilities) of one chunk
};

// Sized by the rows each sequence's keys may fill (a KV cache's capacity), not by the keys of this
// call, so that a decode step's scratch, planned once, fits every step.
AttentionPlan planAttention(const AttentionShape& s, std::int64_t probBytes)
{
    AttentionPlan p;
    if (s.batch <= 0 || s.seq <= 0 || s.heads <= 0 || s.kvHeads <= 0 || s.heads % s.kvHeads != 0)
        return p;
    const std::int64_t G = s.heads / s.kvHeads, keys = s.rows();
    p.kvInner = s.kvHeads >= G;
    p.inner = p.kvInner ? s.kvHeads : G;
    p.outer = p.kvInner ? G : s.kvHeads;
    p.units = s.batch * p.outer;
    const std::int64_t unitRow = p.inner * keys * (4 + probBytes); // one query row of a unit's heads
    if (unitRow <= kScratchBudget / s.seq) {
        p.rowsPerBlock = s.seq;
        p.unitsPerChunk = std::clamp<std::int64_t>(kScratchBudget / (unitRow * s.seq), 1, p.units);
    } else {
        p.unitsPerChunk = 1;
        p.rowsPerBlock = std::clamp<std::int64_t>(kScratchBudget / unitRow, 1, s.seq);
    }
    p.scoreElems = p.unitsPerChunk * p.inner * p.rowsPerBlock * keys;
    return p;
}

// --- experts plan ------------------------------------------------------------------------------------

struct ExpertsPlan
{
    std::int64_t chunkTokens = 0;
    std::int64_t rows = 0;      // routed rows of a chunk at most: chunkTokens · min(k, El)
    std::int64_t hWidth = 0;    // max(2I, H): the shared fp32 gate_up / down buffer's row
};

ExpertsPlan planExperts(std::int64_t tokens, std::int64_t hidden, const ExpertsShape& s, std::int64_t eb)
{
    ExpertsPlan p;
    if (tokens <= 0 || hidden <= 0 || s.topK <= 0 || s.localExperts <= 0 || s.intermediate <= 0)
        return p;
    const std::int64_t K = s.topK, kl = std::min(K, s.localExperts), I = s.intermediate;
    p.hWidth = std::max(2 * I, hidden);
    const std::int64_t perToken = 12 * K + kl * (4 + hidden * eb + 4 * p.hWidth + I * eb);
    p.chunkTokens = std::clamp<std::int64_t>(kScratchBudget / perToken, 1, tokens);
    p.rows = p.chunkTokens * kl;
    return p;
}

// =====================================================================================================

class CudaBackend final : public Backend
{
public:
    CudaBackend(int device, DType storage)
        : Backend(storage)
        , m_device(device)
    {
    }

    ~CudaBackend() override
    {
        // Work still queued must not outlive the workspace and the streams it uses.
        if (useDevice(m_device).ok()) {
            if (m_compute.get())
                cudaStreamSynchronize(m_compute.get());
            if (m_comm.get())
                cudaStreamSynchronize(m_comm.get());
        }
    }

    Status init()
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        cudaDeviceProp prop{};
        TP_CUDA(cudaGetDeviceProperties(&prop, m_device));
        m_name = cat("cuda:", m_device, " ", prop.name);
        TP_CUDA(cudaStreamCreateWithFlags(m_compute.out(), cudaStreamNonBlocking));
        TP_CUDA(cudaStreamCreateWithFlags(m_comm.out(), cudaStreamNonBlocking));
        TP_CUDA(cudaMalloc(m_workspace.out(), kBlasWorkspaceBytes));
        countAllocation(static_cast<std::int64_t>(kBlasWorkspaceBytes));
        TP_CUBLAS(cublasCreate(m_blas.out()));
        TP_CUBLAS(cublasSetStream(m_blas.get(), m_compute.get())); // first: setting a stream resets the workspace
        TP_CUBLAS(cublasSetWorkspace(m_blas.get(), m_workspace.get(), kBlasWorkspaceBytes));
        // Never TF32 (the default math mode), and split-K partial sums kept in fp32, not in a
        // 16-bit output type: a result is rounded once.
        TP_CUBLAS(cublasSetMathMode(m_blas.get(), static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH
                                                                            | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
        TP_CUDA(cudaHostAlloc(m_pinned.out(), kPinnedBytes, cudaHostAllocDefault));
        return {};
    }

    // Pure getters: no CUDA call, so no device to make current.
    DeviceKind device() const override { return DeviceKind::Cuda; }
    int ordinal() const override { return m_device; }
    std::string name() const override { return m_name; }

    // --- memory -----------------------------------------------------------------------------------

    std::int64_t availableBytes() const override
    {
        std::size_t free = 0, total = 0;
        if (!useDevice(m_device).ok() || cudaMemGetInfo(&free, &total) != cudaSuccess) {
            cudaGetLastError(); // handled here; not a later launch's error
            return 0;
        }
        return static_cast<std::int64_t>(free);
    }

    Result<DeviceBuffer> allocate(std::int64_t bytes) override
    {
        if (bytes < 0)
            return invalidArgument(cat("allocate: ", bytes, " bytes"));
        TP_RETURN_IF_ERROR(useDevice(m_device));
        void* p = nullptr;
        if (const cudaError_t e = cudaMalloc(&p, static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1))); e != cudaSuccess) {
            cudaGetLastError();
            return Status(e == cudaErrorMemoryAllocation ? StatusCode::ResourceExhausted : StatusCode::Internal,
                          cat("cannot allocate ", bytes, " bytes on ", m_name, ": ", cudaGetErrorString(e)));
        }
        countAllocation(bytes);
        const int device = m_device;
        return DeviceBuffer(p, bytes, [device](void* q) { releaseOn(device, q); });
    }

    // --- streams and events -----------------------------------------------------------------------

    Status reserveEvents(int n) override
    {
        if (n < 0)
            return invalidArgument(cat("reserve_events: ", n, " events"));
        TP_RETURN_IF_ERROR(useDevice(m_device));
        m_events.reserve(static_cast<std::size_t>(n));
        while (m_events.size() < static_cast<std::size_t>(n)) { // existing events stay valid
            cuda::EventHandle e;
            TP_CUDA(cudaEventCreateWithFlags(e.out(), cudaEventDefault)); // timing enabled
            m_events.push_back(std::move(e));
        }
        return {};
    }

    Status record(int event, Stream s) override
    {
        TP_RETURN_IF_ERROR(checkEvent(event));
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_CUDA(cudaEventRecord(m_events[static_cast<std::size_t>(event)].get(), stream(s)));
        return {};
    }

    Status wait(Stream s, int event) override
    {
        TP_RETURN_IF_ERROR(checkEvent(event));
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_CUDA(cudaStreamWaitEvent(stream(s), m_events[static_cast<std::size_t>(event)].get(), 0));
        return {};
    }

    Status synchronize() override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_CUDA(cudaStreamSynchronize(m_compute.get()));
        TP_CUDA(cudaStreamSynchronize(m_comm.get()));
        return {};
    }

    Result<double> elapsedUs(int from, int to) const override
    {
        TP_RETURN_IF_ERROR(checkEvent(from));
        TP_RETURN_IF_ERROR(checkEvent(to));
        TP_RETURN_IF_ERROR(useDevice(m_device));
        float ms = 0;
        const cudaError_t e = cudaEventElapsedTime(&ms, m_events[static_cast<std::size_t>(from)].get(),
                                                   m_events[static_cast<std::size_t>(to)].get());
        if (e != cudaSuccess) {
            cudaGetLastError();
            return failedPrecondition(cat("elapsed time from event ", from, " to ", to, ": ", cudaGetErrorString(e),
                                          " (both must be recorded and reached; synchronize() first)"));
        }
        return static_cast<double>(ms) * 1000.0;
    }

    void* nativeStream(Stream s) override
    {
        (void)useDevice(m_device); // the caller enqueues on it next
        return static_cast<void*>(stream(s));
    }

    // --- scratch ----------------------------------------------------------------------------------

    std::int64_t gemmScratchBytes(std::int64_t, std::int64_t, std::int64_t) const override { return 0; }

    std::int64_t attentionScratchBytes(const AttentionShape& s) const override
    {
        const std::int64_t pb = probBytes();
        const AttentionPlan p = planAttention(s, pb);
        if (p.scoreElems == 0)
            return 0;
        return kAlign + alignUp(4 * p.scoreElems) + (pb > 0 ? alignUp(pb * p.scoreElems) : 0);
    }

    std::int64_t routeScratchBytes(const ExpertsShape&) const override { return 0; }

    std::int64_t expertsScratchBytes(std::int64_t tokens, std::int64_t hidden, const ExpertsShape& s) const override
    {
        const std::int64_t eb = dtypeBytes(storage(), 1);
        const ExpertsPlan p = planExperts(tokens, hidden, s, eb);
        if (p.chunkTokens == 0)
            return 0;
        const std::int64_t El = s.localExperts, picks = p.chunkTokens * s.topK;
        return kAlign + 2 * alignUp(4 * El) + alignUp(4 * (El + 1)) + 3 * alignUp(4 * picks) + 2 * alignUp(4 * p.rows)
            + alignUp(eb * p.rows * hidden) + alignUp(4 * p.rows * p.hWidth) + alignUp(eb * p.rows * s.intermediate);
    }

protected:
    // --- upload / download: complete on return ----------------------------------------------------

    Status doUpload(const void* host, const Tensor& dst) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_CUDA(cudaMemcpyAsync(dst.data, host, static_cast<std::size_t>(dst.bytes()), cudaMemcpyHostToDevice, m_compute.get()));
        TP_CUDA(cudaStreamSynchronize(m_compute.get()));
        return {};
    }

    Status doDownload(const Tensor& src, void* host) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_CUDA(cudaMemcpyAsync(host, src.data, static_cast<std::size_t>(src.bytes()), cudaMemcpyDeviceToHost, m_compute.get()));
        TP_CUDA(cudaStreamSynchronize(m_compute.get()));
        return {};
    }

    // --- gemm -------------------------------------------------------------------------------------

    Status doGemm(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y, const Tensor&) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        const std::int64_t n = x.rows, in = x.cols, out = w.rows;
        if (!fitsInt(n) || !fitsInt(in) || !fitsInt(out) || !fitsInt(x.stride) || !fitsInt(y.stride))
            return invalidArgument(cat("gemm: [", n, ", ", in, "] · [", out, ", ", in, "]ᵀ exceeds cuBLAS's 32-bit sizes"));
        TP_RETURN_IF_ERROR(launchable("gemm", n, out));
        cudaStream_t st = m_compute.get();
        if (bias) {
            TP_RETURN_IF_ERROR(withStorage(storage(), "gemm", [&](auto tag) -> Status {
                using T = typename decltype(tag)::type;
                const Launch l = rowLaunch(n, out);
                if (y.dtype == DType::F32)
                    broadcastRowKernel<T, float><<<l.grid, l.block, 0, st>>>(bias->as<T>(), y.as<float>(), n, out, y.stride);
                else
                    broadcastRowKernel<T, T><<<l.grid, l.block, 0, st>>>(bias->as<T>(), y.as<T>(), n, out, y.stride);
                TP_CUDA_LAUNCHED();
                return {};
            }));
        }
        if (in == 0) { // no input features: the bias, or zeros (all-zero bits in every dtype)
            if (!bias) {
                const std::size_t eb = static_cast<std::size_t>(y.elementBytes());
                TP_CUDA(cudaMemset2DAsync(y.data, static_cast<std::size_t>(y.stride) * eb, 0, static_cast<std::size_t>(out) * eb,
                                          static_cast<std::size_t>(n), st));
            }
            return {};
        }
        // Row-major y[n, out] = x[n, in]·w[out, in]ᵀ is column-major yᵀ = w·xᵀ (x's and y's rows ld stride apart).
        const float one = 1.0f, beta = bias ? 1.0f : 0.0f;
        TP_CUBLAS(cublasGemmEx(m_blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(n),
                               static_cast<int>(in), &one, w.data, blasType(w.dtype), static_cast<int>(in), x.data,
                               blasType(x.dtype), static_cast<int>(x.stride), &beta, y.data, blasType(y.dtype),
                               static_cast<int>(y.stride), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return {};
    }

    // --- norms, rope ------------------------------------------------------------------------------

    Status doRmsNorm(const Tensor& x, const Tensor* w, const Tensor& y, std::int64_t group, float eps, float offset) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        const std::int64_t groups = x.numel() / group;
        TP_RETURN_IF_ERROR(launchable("rms_norm", groups, group));
        if (group > kWarp * kWarp && groups > INT_MAX) // a block per group
            return invalidArgument(cat("rms_norm: ", groups, " groups is beyond the CUDA backend's launch shapes"));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "rms_norm", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            const std::int64_t wGroups = w ? w->cols / group : 1; // a weight across the row: wGroups groups' parts
            if (group <= kWarp * kWarp) // up to 32 elements per lane: a warp per group
                rmsNormWarpKernel<T><<<warpRowBlocks(groups), kThreads, 0, st>>>(x.as<T>(), w ? w->as<T>() : nullptr, wGroups, y.as<T>(),
                                                                                 groups, static_cast<int>(group), eps, offset);
            else
                rmsNormBlockKernel<T><<<static_cast<unsigned>(groups), kThreads, 0, st>>>(x.as<T>(), w ? w->as<T>() : nullptr, wGroups,
                                                                                         y.as<T>(), group, eps, offset);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doLayerNorm(const Tensor& x, const Tensor* w, const Tensor* b, const Tensor& y, float eps, float offset) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_RETURN_IF_ERROR(launchable("layer_norm", x.rows, x.cols));
        if (x.rows > INT_MAX) // a block per row
            return invalidArgument(cat("layer_norm: ", x.rows, " rows is beyond the CUDA backend's launch shapes"));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "layer_norm", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            layerNormKernel<T><<<static_cast<unsigned>(x.rows), kThreads, 0, st>>>(x.as<T>(), w ? w->as<T>() : nullptr,
                                                                                   b ? b->as<T>() : nullptr, y.as<T>(), x.cols, eps,
                                                                                   offset);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doRope(const Tensor& x, const Tensor& y, std::int64_t headDim, const Tensor& positions, const Tensor& table,
                  bool interleaved, bool leading) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        const std::int64_t threads = x.cols / headDim * (headDim - table.cols / 2); // a pair or a passed column each
        TP_RETURN_IF_ERROR(launchable("rope", x.rows, threads));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "rope", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            const Launch l = rowLaunch(x.rows, threads);
            ropeKernel<T><<<l.grid, l.block, 0, st>>>(x.as<T>(), y.as<T>(), x.rows, x.cols, static_cast<int>(headDim),
                                                      static_cast<int>(table.cols), interleaved, leading, positions.as<std::int32_t>(),
                                                      table.as<float>(), table.rows, table.stride);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doTemperature(const Tensor& x, const Tensor& y, const Tensor& positions, float floorScale, float attnScale) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_RETURN_IF_ERROR(launchable("temperature", x.rows, x.cols));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "temperature", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            const Launch l = rowLaunch(x.rows, x.cols);
            temperatureKernel<T><<<l.grid, l.block, 0, st>>>(x.as<T>(), y.as<T>(), x.rows, x.cols, positions.as<std::int32_t>(),
                                                             floorScale, attnScale);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    // --- attention --------------------------------------------------------------------------------

    Status doAttention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y, const AttentionShape& s,
                       const Tensor& scratch, const Tensor* sinks) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        const std::int64_t pb = probBytes();
        const AttentionPlan p = planAttention(s, pb);
        const std::int64_t S = s.seq, rowsK = s.rows(), past = s.past, hd = s.headDim, vd = s.vDim(), qw = q.cols,
                           kw = k.cols, vw = v.cols, yw = y.cols, G = s.heads / s.kvHeads;
        if (!fitsInt(rowsK) || !fitsInt(qw) || !fitsInt(kw) || !fitsInt(vw) || !fitsInt(yw) || !fitsInt(p.inner))
            return invalidArgument(cat("attention: sequence ", S, " of ", s.heads, " heads exceeds cuBLAS's 32-bit sizes"));
        TP_RETURN_IF_ERROR(launchable("attention", p.unitsPerChunk * p.inner * p.rowsPerBlock, 1));
        Carver carve(scratch);
        float* scores = carve.take<float>(p.scoreElems);
        void* probs = pb > 0 ? carve.take<char>(pb * p.scoreElems) : static_cast<void*>(scores); // f32: in place
        TP_RETURN_IF_ERROR(carve.check("attention"));
        cudaStream_t st = m_compute.get();
        cublasHandle_t h = m_blas.get();
        const cudaDataType_t dt = blasType(storage());
        const std::int64_t eb = dtypeBytes(storage(), 1);
        const float scale = static_cast<float>(s.scale), one = 1.0f, zero = 0.0f;
        // Strides between the heads of one GEMM, in q, y, k and v.
        const long long strideQ = p.kvInner ? G * hd : hd, strideK = p.kvInner ? hd : 0;
        const long long strideY = p.kvInner ? G * vd : vd, strideV = p.kvInner ? vd : 0;

        for (std::int64_t i0 = 0; i0 < S; i0 += p.rowsPerBlock) {
            // queries [i0, i0 + R), at positions past + i, see keys [0, L)
            const std::int64_t R = std::min(p.rowsPerBlock, S - i0), L = past + i0 + R;
            const long long slotElems = R * L;
            for (std::int64_t u0 = 0; u0 < p.units; u0 += p.unitsPerChunk) {
                const std::int64_t units = std::min(p.unitsPerChunk, p.units - u0);
                // Offsets of unit u: its sequence b, and its slot o (the query slot j, or the kv head), in
                // a query-side tensor (q, y) or a key-side one (k, v) of row width w and head size d.
                auto queryOffset = [&](std::int64_t u, std::int64_t w, std::int64_t d) {
                    const std::int64_t b = (u0 + u) / p.outer, o = (u0 + u) % p.outer;
                    return (b * S + i0) * w + (p.kvInner ? o * d : o * G * d);
                };
                auto keyOffset = [&](std::int64_t u, std::int64_t w, std::int64_t d) {
                    const std::int64_t b = (u0 + u) / p.outer, o = (u0 + u) % p.outer;
                    return b * rowsK * w + (p.kvInner ? 0 : o * d);
                };
                for (std::int64_t u = 0; u < units; ++u) // scores[i, j] = scale · q_i·k_j, column-major Kᵀ·Q
                    TP_CUBLAS(cublasGemmStridedBatchedEx(
                        h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(L), static_cast<int>(R), static_cast<int>(hd), &scale,
                        static_cast<const char*>(k.data) + keyOffset(u, kw, hd) * eb, dt, static_cast<int>(kw), strideK,
                        static_cast<const char*>(q.data) + queryOffset(u, qw, hd) * eb, dt, static_cast<int>(qw), strideQ, &zero,
                        scores + u * p.inner * slotElems, CUDA_R_32F, static_cast<int>(L), slotElems,
                        static_cast<int>(p.inner), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                const std::int64_t rows = units * p.inner * R;
                TP_RETURN_IF_ERROR(withStorage(storage(), "attention", [&](auto tag) -> Status {
                    using T = typename decltype(tag)::type;
                    const SinkMap sinkMap{sinks ? sinks->data : nullptr, u0, static_cast<int>(p.outer), static_cast<int>(p.inner),
                                          static_cast<int>(G), p.kvInner};
                    causalSoftmaxKernel<T><<<warpRowBlocks(rows), kThreads, 0, st>>>(
                        scores, static_cast<T*>(probs), rows, static_cast<int>(R), static_cast<int>(L), static_cast<int>(past + i0),
                        static_cast<int>(std::min<std::int64_t>(s.window, INT_MAX)),
                        static_cast<int>(std::min<std::int64_t>(s.chunk, INT_MAX)), static_cast<float>(s.softcap), sinkMap);
                    TP_CUDA_LAUNCHED();
                    return {};
                }));
                for (std::int64_t u = 0; u < units; ++u) // y_i = Σ_j P[i, j]·v_j, column-major Vᵀ·Pᵀ
                    TP_CUBLAS(cublasGemmStridedBatchedEx(
                        h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(vd), static_cast<int>(R), static_cast<int>(L), &one,
                        static_cast<const char*>(v.data) + keyOffset(u, vw, vd) * eb, dt, static_cast<int>(vw), strideV,
                        static_cast<const char*>(probs) + u * p.inner * slotElems * (pb > 0 ? pb : 4), dt, static_cast<int>(L),
                        slotElems, &zero, static_cast<char*>(y.data) + queryOffset(u, yw, vd) * eb, dt, static_cast<int>(yw), strideY,
                        static_cast<int>(p.inner), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            }
        }
        return {};
    }

    // --- elementwise ------------------------------------------------------------------------------

    Status doMlaKv(const Tensor& kv, const Tensor& rope, const Tensor& k, const Tensor& v, std::int64_t heads,
                   std::int64_t nope) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_RETURN_IF_ERROR(launchable("mla_kv", kv.rows, k.cols + v.cols));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "mla_kv", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            const Launch l = rowLaunch(kv.rows, k.cols + v.cols);
            mlaKvKernel<T><<<l.grid, l.block, 0, st>>>(kv.as<T>(), rope.as<T>(), rope.stride, k.as<T>(), v.as<T>(), kv.rows,
                                                       static_cast<int>(heads), static_cast<int>(nope),
                                                       static_cast<int>(rope.cols), static_cast<int>(v.cols / heads));
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doGatedAct(const Tensor& gate, const Tensor& up, const Tensor& y, Activation act, std::int64_t span) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_RETURN_IF_ERROR(launchable("gated_act", y.rows, y.cols));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "gated_act", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            const Launch l = rowLaunch(y.rows, y.cols);
            gatedActKernel<T><<<l.grid, l.block, 0, st>>>(gate.as<T>(), gate.stride, up.as<T>(), up.stride, y.as<T>(), y.rows,
                                                          y.cols, act, span);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doActivation(const Tensor& x, const Tensor& y, Activation act) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_RETURN_IF_ERROR(launchable("activation", y.rows, y.cols));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "activation", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            const Launch l = rowLaunch(y.rows, y.cols);
            activationKernel<T><<<l.grid, l.block, 0, st>>>(x.as<T>(), x.stride, y.as<T>(), y.rows, y.cols, act);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doCausalConv(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& state, const Tensor& y,
                        std::optional<Activation> act, bool fresh) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        const std::int64_t K = w.cols, C = x.cols, batch = state.rows / K, threads = batch * C;
        if (K > INT_MAX || (threads + kThreads - 1) / kThreads > INT_MAX)
            return invalidArgument(cat("causal_conv: ", batch, " × ", C, " channels of ", K, " taps is beyond the CUDA backend's launch shapes"));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "causal_conv", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            causalConvKernel<T><<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, st>>>(
                x.as<T>(), x.stride, w.as<T>(), bias ? bias->as<T>() : nullptr, state.as<T>(), state.stride, y.as<T>(), y.stride, batch,
                x.rows / batch, C, static_cast<int>(K), act.has_value(), fresh);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doSsmScan(const Tensor& x, const Tensor& dt, const Tensor& B, const Tensor& C, const Tensor& aLog, const Tensor& D,
                     const Tensor& dtBias, const Tensor& state, const Tensor& y, const ScanShape& s) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        const std::int64_t threads = s.batch * s.heads * s.headDim;
        if ((threads + kThreads - 1) / kThreads > INT_MAX)
            return invalidArgument(cat("ssm_scan: ", threads, " channels is beyond the CUDA backend's launch shapes"));
        const float dtMax = static_cast<float>(s.dtMax);
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "ssm_scan", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            ssmScanKernel<T><<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, st>>>(
                x.as<T>(), x.stride, dt.as<T>(), dt.stride, B.as<T>(), B.stride, C.as<T>(), C.stride, aLog.as<T>(), D.as<T>(),
                dtBias.as<T>(), state.as<float>(), y.as<T>(), s.batch, y.rows / s.batch, s.heads, s.headDim, s.heads / s.groups, s.state,
                static_cast<float>(s.dtMin), dtMax, s.fresh);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& a, const Tensor& aLog,
                       const Tensor& dtBias, const Tensor& state, const Tensor& y, const DeltaShape& s) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        const std::int64_t threads = s.batch * s.valueHeads * s.valueDim;
        if ((threads + kThreads - 1) / kThreads > INT_MAX)
            return invalidArgument(cat("delta_rule: ", threads, " channels is beyond the CUDA backend's launch shapes"));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "delta_rule", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            deltaRuleKernel<T><<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, st>>>(
                q.as<T>(), q.stride, k.as<T>(), k.stride, v.as<T>(), v.stride, b.as<T>(), b.stride, a.as<T>(), a.stride, aLog.as<T>(),
                dtBias.as<T>(), state.as<float>(), y.as<T>(), s.batch, y.rows / s.batch, s.valueHeads, s.valueHeads / s.keyHeads,
                s.keyDim, s.valueDim, s.fresh);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doEmbedding(const Tensor& ids, const Tensor& w, const Tensor& y, std::int64_t firstRow) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_RETURN_IF_ERROR(launchable("embedding", y.rows, y.cols));
        const Launch l = rowLaunch(y.rows, y.cols);
        cudaStream_t st = m_compute.get();
        if (y.elementBytes() == 4)
            embeddingKernel<std::uint32_t><<<l.grid, l.block, 0, st>>>(ids.as<std::int32_t>(), w.as<std::uint32_t>(), w.rows,
                                                                       firstRow, y.as<std::uint32_t>(), y.rows, y.cols, y.stride);
        else
            embeddingKernel<std::uint16_t><<<l.grid, l.block, 0, st>>>(ids.as<std::int32_t>(), w.as<std::uint16_t>(), w.rows,
                                                                       firstRow, y.as<std::uint16_t>(), y.rows, y.cols, y.stride);
        TP_CUDA_LAUNCHED();
        return {};
    }

    Status doAdd(const Tensor& a, const Tensor& b, const Tensor& y) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_RETURN_IF_ERROR(launchable("add", y.rows, y.cols));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "add", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            const Launch l = rowLaunch(y.rows, y.cols);
            addKernel<T><<<l.grid, l.block, 0, st>>>(a.as<T>(), b.as<T>(), b.rows == 1, y.as<T>(), y.rows, y.cols);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doCopy(const Tensor& src, const Tensor& dst) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        const std::size_t eb = static_cast<std::size_t>(src.elementBytes());
        cudaStream_t st = m_compute.get();
        if (src.isContiguous() && dst.isContiguous())
            TP_CUDA(cudaMemcpyAsync(dst.data, src.data, static_cast<std::size_t>(src.bytes()), cudaMemcpyDeviceToDevice, st));
        else
            TP_CUDA(cudaMemcpy2DAsync(dst.data, static_cast<std::size_t>(dst.stride) * eb, src.data,
                                      static_cast<std::size_t>(src.stride) * eb, static_cast<std::size_t>(src.cols) * eb,
                                      static_cast<std::size_t>(src.rows), cudaMemcpyDeviceToDevice, st));
        return {};
    }

    Status doScale(const Tensor& x, const Tensor& y, float factor, float cap) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_RETURN_IF_ERROR(launchable("scale", y.rows, y.cols));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "scale", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            const Launch l = rowLaunch(y.rows, y.cols);
            scaleKernel<T><<<l.grid, l.block, 0, st>>>(x.as<T>(), x.stride, y.as<T>(), y.stride, y.rows, y.cols, factor, cap);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doSoftmax(const Tensor& x, const Tensor& y) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_RETURN_IF_ERROR(launchable("softmax", x.rows, x.cols));
        softmaxRowsKernel<<<warpRowBlocks(x.rows), kThreads, 0, m_compute.get()>>>(x.as<float>(), y.as<float>(), x.rows,
                                                                                   static_cast<int>(x.cols));
        TP_CUDA_LAUNCHED();
        return {};
    }

    Status doSigmoid(const Tensor& x, const Tensor& y) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        const std::int64_t n = x.numel();
        const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65535));
        sigmoidKernel<<<blocks, kThreads, 0, m_compute.get()>>>(x.as<float>(), y.as<float>(), n);
        TP_CUDA_LAUNCHED();
        return {};
    }

    Status doArgmax(const Tensor& x, const Tensor& ids) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        TP_RETURN_IF_ERROR(launchable("argmax", x.rows, x.cols));
        cudaStream_t st = m_compute.get();
        auto launch = [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            argmaxRowsKernel<T><<<warpRowBlocks(x.rows), kThreads, 0, st>>>(x.as<T>(), x.stride, x.rows, static_cast<int>(x.cols),
                                                                            ids.as<std::int32_t>());
            TP_CUDA_LAUNCHED();
            return {};
        };
        return x.dtype == DType::F32 ? launch(Tag<float>{}) : withStorage(storage(), "argmax", launch);
    }

    // --- experts ----------------------------------------------------------------------------------

    Status doExperts(const Tensor& x, const Tensor& scores, const Tensor& gateUp, const Tensor& down, const Tensor& y,
                     const ExpertsShape& s, const Tensor& scratch, const Tensor* gateUpBias, const Tensor* downBias,
                     const Tensor* scoreBias) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        cudaStream_t st = m_compute.get();
        const std::int64_t N = x.rows, H = x.cols, E = s.experts, K = s.topK, El = s.localExperts, I = s.intermediate;
        if (El == 0 || I == 0) { // no local expert rows: a zero partial sum
            TP_CUDA(cudaMemsetAsync(y.data, 0, static_cast<std::size_t>(y.bytes()), st));
            return {};
        }
        if (El > kMaxLocalExperts)
            return invalidArgument(cat("experts: ", El, " local experts, the CUDA backend takes at most ", kMaxLocalExperts));
        const std::int64_t eb = dtypeBytes(storage(), 1);
        const ExpertsPlan p = planExperts(N, H, s, eb);
        const std::int64_t I2 = (s.gated ? 2 : 1) * I; // gate_up's rows an expert: [gate; up], or up alone (ungated)
        if (!fitsInt(E) || !fitsInt(H) || !fitsInt(2 * I) || !fitsInt(p.rows) || !fitsInt(p.chunkTokens * K))
            return invalidArgument(cat("experts: ", N, " tokens of ", H, " features, top-", K, " of ", E, " experts of ", I,
                                       " rows exceed the CUDA backend's 32-bit sizes"));
        TP_RETURN_IF_ERROR(launchable("experts", p.chunkTokens, std::max(H, I)));

        Carver carve(scratch);
        auto* counts = carve.take<std::int32_t>(El);
        auto* cursor = carve.take<std::int32_t>(El);
        auto* offsets = carve.take<std::int32_t>(El + 1);
        auto* expertOf = carve.take<std::int32_t>(p.chunkTokens * K);
        auto* weightOf = carve.take<float>(p.chunkTokens * K);
        auto* slotOf = carve.take<std::int32_t>(p.chunkTokens * K);
        auto* rowToken = carve.take<std::int32_t>(p.rows);
        auto* rowWeight = carve.take<float>(p.rows);
        char* xe = carve.take<char>(eb * p.rows * H);
        float* hOut = carve.take<float>(p.rows * p.hWidth); // gate_up rows [M, 2I], then down rows [M, H]
        char* actBuf = carve.take<char>(eb * p.rows * I);
        TP_RETURN_IF_ERROR(carve.check("experts"));
        const auto* offsetsHost = static_cast<const std::int32_t*>(m_pinned.get());
        cublasHandle_t h = m_blas.get();
        const cudaDataType_t dt = blasType(storage());
        const float one = 1.0f;

        return withStorage(storage(), "experts", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            if (s.perExpertRows) // every expert's rows, zeros where a token did not pick it
                TP_CUDA(cudaMemsetAsync(y.data, 0, static_cast<std::size_t>(El * N * H) * sizeof(T), st));
            for (std::int64_t t0 = 0; t0 < N; t0 += p.chunkTokens) {
                const std::int64_t nt = std::min(p.chunkTokens, N - t0);
                // Routing and buckets, on the device.
                TP_CUDA(cudaMemsetAsync(counts, 0, static_cast<std::size_t>(El) * sizeof(std::int32_t), st));
                if (s.givenExperts)
                    givenRouteKernel<<<static_cast<unsigned>((nt + kThreads - 1) / kThreads), kThreads, 0, st>>>(
                        scores.as<std::int32_t>() + t0, nt, static_cast<int>(El), expertOf, weightOf, counts);
                else
                    routeTopKKernel<T><<<warpRowBlocks(nt), kThreads, 0, st>>>(
                        scores.as<float>() + t0 * E, nt, static_cast<int>(E), static_cast<int>(K), static_cast<int>(s.firstExpert),
                        static_cast<int>(El), s.normalize, scoreBias ? scoreBias->as<T>() : nullptr, static_cast<int>(s.groups),
                        static_cast<int>(s.topkGroup), static_cast<float>(s.routedScale), s.groupByMax, s.sparseMixer,
                        static_cast<float>(s.jitterEps), s.logitChoice, expertOf, weightOf, counts);
                TP_CUDA_LAUNCHED();
                bucketOffsetsKernel<<<1, 1, 0, st>>>(counts, offsets, cursor, static_cast<int>(El));
                TP_CUDA_LAUNCHED();
                const std::int64_t picks = nt * K;
                bucketAssignKernel<<<static_cast<unsigned>((picks + kThreads - 1) / kThreads), kThreads, 0, st>>>(
                    expertOf, weightOf, picks, static_cast<int>(K), cursor, slotOf, rowToken, rowWeight);
                TP_CUDA_LAUNCHED();
                // The op's one synchronisation: the bucket sizes are the GEMMs' shapes. The pinned
                // offsets are read below, before the next chunk's copy is enqueued.
                TP_CUDA(cudaMemcpyAsync(m_pinned.get(), offsets, static_cast<std::size_t>(El + 1) * sizeof(std::int32_t),
                                        cudaMemcpyDeviceToHost, st));
                TP_CUDA(cudaStreamSynchronize(st));
                const std::int64_t routed = offsetsHost[El];
                T* yc = y.as<T>() + t0 * H;
                if (routed == 0) { // no token of this chunk picked a local expert
                    if (!s.perExpertRows)
                        TP_CUDA(cudaMemsetAsync(yc, 0, static_cast<std::size_t>(nt * H) * sizeof(T), st));
                    continue;
                }
                T* xeT = reinterpret_cast<T*>(xe);
                T* actT = reinterpret_cast<T*>(actBuf);
                Launch l = rowLaunch(routed, H);
                gatherRowsKernel<T><<<l.grid, l.block, 0, st>>>(x.as<T>() + t0 * H, rowToken, rowWeight, s.weightInputs, xeT,
                                                                routed, H);
                TP_CUDA_LAUNCHED();
                // A bias (gpt-oss) is broadcast into the expert's rows first and the GEMM adds onto it.
                auto biasRows = [&](const Tensor* bias, std::int64_t e, float* rows, std::int64_t M, std::int64_t w) -> Status {
                    if (!bias)
                        return {};
                    const Launch bl = rowLaunch(M, w);
                    broadcastRowKernel<T, float><<<bl.grid, bl.block, 0, st>>>(bias->as<T>() + e * w, rows, M, w, w);
                    TP_CUDA_LAUNCHED();
                    return {};
                };
                // Weights as stored: [2I, H] / [H, I] per expert (x · Wᵀ), or [H, 2I] / [I, H] (x · W).
                const cublasOperation_t wop = s.transposed ? CUBLAS_OP_N : CUBLAS_OP_T;
                for (std::int64_t e = 0; e < El; ++e) { // h = x_e · gate_upᵀ (+ bias), fp32
                    const std::int64_t begin = offsetsHost[e], M = offsetsHost[e + 1] - begin;
                    if (M == 0)
                        continue;
                    TP_RETURN_IF_ERROR(biasRows(gateUpBias, e, hOut + begin * I2, M, I2));
                    const float beta = gateUpBias ? 1.0f : 0.0f;
                    TP_CUBLAS(cublasGemmEx(h, wop, CUBLAS_OP_N, static_cast<int>(I2), static_cast<int>(M), static_cast<int>(H),
                                           &one, gateUp.as<T>() + e * I2 * H, dt, static_cast<int>(s.transposed ? I2 : H),
                                           xeT + begin * H, dt, static_cast<int>(H), &beta, hOut + begin * I2, CUDA_R_32F,
                                           static_cast<int>(I2), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                }
                l = rowLaunch(routed, I);
                expertActKernel<T><<<l.grid, l.block, 0, st>>>(hOut, actT, routed, I, s.act, s.interleaved,
                                                               static_cast<float>(s.swigluAlpha), static_cast<float>(s.swigluLimit), s.gated);
                TP_CUDA_LAUNCHED();
                for (std::int64_t e = 0; e < El; ++e) { // o = a_e · downᵀ (+ bias), fp32, over h (read above)
                    const std::int64_t begin = offsetsHost[e], M = offsetsHost[e + 1] - begin;
                    if (M == 0)
                        continue;
                    TP_RETURN_IF_ERROR(biasRows(downBias, e, hOut + begin * H, M, H));
                    const float beta = downBias ? 1.0f : 0.0f;
                    TP_CUBLAS(cublasGemmEx(h, wop, CUBLAS_OP_N, static_cast<int>(H), static_cast<int>(M), static_cast<int>(I),
                                           &one, down.as<T>() + e * H * I, dt, static_cast<int>(s.transposed ? H : I),
                                           actT + begin * I, dt, static_cast<int>(I), &beta, hOut + begin * H, CUDA_R_32F,
                                           static_cast<int>(H), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                }
                if (s.perExpertRows) {
                    l = rowLaunch(picks, H);
                    perExpertRowsKernel<T><<<l.grid, l.block, 0, st>>>(hOut, expertOf, slotOf, y.as<T>(), picks,
                                                                       static_cast<int>(K), N, t0, H);
                } else {
                    l = rowLaunch(nt, H);
                    combineKernel<T, float><<<l.grid, l.block, 0, st>>>(hOut, slotOf, weightOf, !s.weightInputs, yc, nt,
                                                                        static_cast<int>(K), H);
                }
                TP_CUDA_LAUNCHED();
            }
            return {};
        });
    }

    // --- all-to-all dispatch: the picks, and the sender's combine ------------------------------------

    Status doRoute(const Tensor& scores, const ExpertsShape& s, const Tensor& ids, const Tensor& weights, const Tensor&,
                   const Tensor* scoreBias) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        if (!fitsInt(s.experts) || !fitsInt(scores.rows * s.topK))
            return invalidArgument(cat("route: ", scores.rows, " tokens, top-", s.topK, " of ", s.experts,
                                       " experts exceed the CUDA backend's 32-bit sizes"));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "route", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            // Every expert local (first 0, all E): the kernel writes global ids and counts nothing.
            routeTopKKernel<T><<<warpRowBlocks(scores.rows), kThreads, 0, st>>>(
                scores.as<float>(), scores.rows, static_cast<int>(s.experts), static_cast<int>(s.topK), 0,
                static_cast<int>(s.experts), s.normalize, scoreBias ? scoreBias->as<T>() : nullptr, static_cast<int>(s.groups),
                static_cast<int>(s.topkGroup), static_cast<float>(s.routedScale), s.groupByMax, s.sparseMixer,
                static_cast<float>(s.jitterEps), s.logitChoice, ids.as<std::int32_t>(), weights.as<float>(),
                nullptr);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doSumBlocks(const Tensor& z, const Tensor& y) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "sum_blocks", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            const Launch l = rowLaunch(y.rows, y.cols);
            sumBlocksKernel<T><<<l.grid, l.block, 0, st>>>(z.as<T>(), y.as<T>(), y.rows, z.rows / y.rows, y.cols);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    Status doCombine(const Tensor& z, const Tensor& slots, const Tensor& weights, const Tensor& y) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        cudaStream_t st = m_compute.get();
        return withStorage(storage(), "combine", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            const Launch l = rowLaunch(y.rows, y.cols);
            combineKernel<T, T><<<l.grid, l.block, 0, st>>>(z.as<T>(), slots.as<std::int32_t>(), weights.as<float>(), true,
                                                            y.as<T>(), y.rows, static_cast<int>(weights.cols), y.cols);
            TP_CUDA_LAUNCHED();
            return {};
        });
    }

    // --- fill_uniform (setup only: may allocate and synchronise) -------------------------------------

    Status doFillUniform(const Tensor& dst, const UniformFill& f) override
    {
        TP_RETURN_IF_ERROR(useDevice(m_device));
        std::vector<DeviceRun> runs;
        std::int64_t total = 0;
        for (const FillRun& r : f.runs)
            if (r.count > 0) {
                runs.push_back({r.local, r.global, r.count, total});
                total += r.count;
            }
        if (total == 0)
            return {};
        cudaStream_t st = m_compute.get();
        cuda::DeviceMemory table; // the runs, when there is more than one
        const DeviceRun* deviceRuns = nullptr;
        if (runs.size() > 1) {
            const std::size_t bytes = runs.size() * sizeof(DeviceRun);
            TP_CUDA(cudaMalloc(table.out(), bytes));
            countAllocation(static_cast<std::int64_t>(bytes));
            TP_CUDA(cudaMemcpyAsync(table.get(), runs.data(), bytes, cudaMemcpyHostToDevice, st));
            deviceRuns = static_cast<const DeviceRun*>(table.get());
        }
        const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 1 << 20));
        TP_RETURN_IF_ERROR(withStorage(storage(), "fill_uniform", [&](auto tag) -> Status {
            using T = typename decltype(tag)::type;
            fillUniformKernel<T><<<blocks, kThreads, 0, st>>>(dst.as<T>(), deviceRuns, static_cast<std::int64_t>(runs.size()),
                                                              runs.front(), total, f.key, f.base, f.scale);
            TP_CUDA_LAUNCHED();
            return {};
        }));
        TP_CUDA(cudaStreamSynchronize(st)); // before the table goes
        return {};
    }

private:
    cudaStream_t stream(Stream s) const { return s == Stream::Comm ? m_comm.get() : m_compute.get(); }

    Status checkEvent(int event) const
    {
        if (event < 0 || static_cast<std::size_t>(event) >= m_events.size())
            return invalidArgument(cat("event ", event, " outside the ", m_events.size(), " reserved"));
        return {};
    }

    // Bytes of an attention probability, where it is not the fp32 score itself (f32 storage: 0).
    std::int64_t probBytes() const { return storage() == DType::F32 ? 0 : dtypeBytes(storage(), 1); }

    const int m_device;
    std::string m_name;
    // Declaration order is release order reversed: events and pinned memory, then the cuBLAS
    // handle, its workspace, and the streams last.
    cuda::StreamHandle m_compute;
    cuda::StreamHandle m_comm;
    cuda::DeviceMemory m_workspace;
    cuda::BlasHandle m_blas;
    PinnedMemory m_pinned;
    std::vector<cuda::EventHandle> m_events;
};

} // namespace

Result<std::unique_ptr<Backend>> makeCudaBackend(int device, DType storage)
{
    if (!isStorageDtype(storage))
        return invalidArgument(cat("the CUDA backend stores f32, bf16 or f16, not ", dtypeName(storage)));
    int count = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
        cudaGetLastError();
        return failedPrecondition(cat("no CUDA device for the CUDA backend: ", cudaGetErrorString(e), " (", cudaGetErrorName(e), ")"));
    }
    if (device < 0 || device >= count) {
        cudaDeviceProp prop{};
        const cudaError_t e = cudaGetDeviceProperties(&prop, device);
        cudaGetLastError();
        return failedPrecondition(cat("CUDA device ", device, " does not exist (", count, " visible): ",
                                      e == cudaSuccess ? "out of range" : cudaGetErrorString(e)));
    }
    auto be = std::make_unique<CudaBackend>(device, storage);
    TP_RETURN_IF_ERROR(be->init());
    return std::unique_ptr<Backend>(std::move(be));
}

bool haveCudaBackend() { return true; }

} // namespace tp
