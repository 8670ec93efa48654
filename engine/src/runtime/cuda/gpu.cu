// gpu.cu — the CUDA op set: bf16 (or fp32) storage, fp32 accumulation. Every CUDA/cuBLAS call is
// checked and turned into a Status naming the call, file and line; device memory and handles are
// RAII objects, so an error path frees what it allocated.
#include "tp/runtime/gpu.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <sstream>

#include <algorithm>
#include <cmath>
#include <memory>

namespace tp::gpu {

namespace {

// nvcc cannot compile fmt in C++20 mode: messages are built with a stream.
template <typename... A> std::string cat(const A&... a)
{
    std::ostringstream s;
    (s << ... << a);
    return s.str();
}

Status cudaStatus(cudaError_t e, const char* call, const char* file, int line)
{
    if (e == cudaSuccess)
        return {};
    return Status(StatusCode::Internal, cat(call, " failed at ", file, ":", line, ": ", cudaGetErrorString(e), " (", cudaGetErrorName(e), ")"));
}
Status cublasStatus(cublasStatus_t e, const char* call, const char* file, int line)
{
    if (e == CUBLAS_STATUS_SUCCESS)
        return {};
    return Status(StatusCode::Internal, cat(call, " failed at ", file, ":", line, ": ", cublasGetStatusString(e)));
}
#define TP_CUDA(call) TP_RETURN_IF_ERROR(cudaStatus((call), #call, __FILE__, __LINE__))
#define TP_CUBLAS(call) TP_RETURN_IF_ERROR(cublasStatus((call), #call, __FILE__, __LINE__))

// Device memory owned by one object.
class Buffer
{
public:
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer()
    {
        if (m_p)
            cudaFree(m_p);
    }
    Status alloc(std::size_t bytes)
    {
        m_bytes = bytes;
        return cudaStatus(cudaMalloc(&m_p, std::max<std::size_t>(bytes, 1)), "cudaMalloc", __FILE__, __LINE__);
    }
    template <typename T> T* as() const { return static_cast<T*>(m_p); }
    std::size_t bytes() const { return m_bytes; }

private:
    void* m_p = nullptr;
    std::size_t m_bytes = 0;
};

class Blas
{
public:
    ~Blas()
    {
        if (m_h)
            cublasDestroy(m_h);
    }
    Status init() { return cublasStatus(cublasCreate(&m_h), "cublasCreate", __FILE__, __LINE__); }
    cublasHandle_t get() const { return m_h; }

private:
    cublasHandle_t m_h = nullptr;
};

class Event
{
public:
    ~Event()
    {
        if (m_e)
            cudaEventDestroy(m_e);
    }
    Status init() { return cudaStatus(cudaEventCreate(&m_e), "cudaEventCreate", __FILE__, __LINE__); }
    cudaEvent_t get() const { return m_e; }

private:
    cudaEvent_t m_e = nullptr;
};

Status requireDevice()
{
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return Status(StatusCode::FailedPrecondition,
                      cat("no CUDA device visible (", e == cudaSuccess ? "cudaGetDeviceCount returned 0"
                                                                                   : cudaGetErrorString(e), ")"));
    return {};
}

// --- storage: activations and weights live as bf16 or fp32 on the device ------------------------

__global__ void toStorage(const float* in, void* out, std::int64_t n, bool bf16)
{
    const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (i >= n)
        return;
    if (bf16)
        static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16(in[i]);
    else
        static_cast<float*>(out)[i] = in[i];
}

__device__ inline float load(const void* p, std::int64_t i, bool bf16)
{
    return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]) : static_cast<const float*>(p)[i];
}
__device__ inline void store(void* p, std::int64_t i, float v, bool bf16)
{
    if (bf16)
        static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
    else
        static_cast<float*>(p)[i] = v;
}

__global__ void fromStorage(const void* in, float* out, std::int64_t n, bool bf16)
{
    const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (i < n)
        out[i] = load(in, i, bf16);
}

unsigned blocks(std::int64_t n, unsigned threads = 256) { return unsigned((n + threads - 1) / threads); }

// A host vector as device storage (bf16 or fp32).
struct Tensor
{
    Buffer data;
    std::int64_t n = 0;
    bool bf16 = false;
};

Status upload(const std::vector<float>& host, Storage s, Tensor& t)
{
    t.n = static_cast<std::int64_t>(host.size());
    t.bf16 = s == Storage::BF16;
    Buffer staging;
    TP_RETURN_IF_ERROR(staging.alloc(host.size() * sizeof(float)));
    TP_CUDA(cudaMemcpy(staging.as<float>(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    TP_RETURN_IF_ERROR(t.data.alloc(host.size() * (t.bf16 ? 2 : 4)));
    if (t.n > 0)
        toStorage<<<blocks(t.n), 256>>>(staging.as<float>(), t.data.as<void>(), t.n, t.bf16);
    TP_CUDA(cudaGetLastError());
    return {};
}

Status allocate(std::int64_t n, Storage s, Tensor& t)
{
    t.n = n;
    t.bf16 = s == Storage::BF16;
    return t.data.alloc(std::size_t(n) * (t.bf16 ? 2 : 4));
}

Result<std::vector<float>> download(const Tensor& t)
{
    Buffer staging;
    TP_RETURN_IF_ERROR(staging.alloc(std::size_t(t.n) * sizeof(float)));
    if (t.n > 0)
        fromStorage<<<blocks(t.n), 256>>>(t.data.as<void>(), staging.as<float>(), t.n, t.bf16);
    TP_CUDA(cudaGetLastError());
    std::vector<float> out(static_cast<std::size_t>(t.n));
    TP_CUDA(cudaMemcpy(out.data(), staging.as<float>(), out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
}

// --- kernels ------------------------------------------------------------------------------------

// One block per row: sum of squares reduced in shared memory, in fp32.
__global__ void rmsNormKernel(const void* x, const void* w, void* y, std::int64_t d, float eps, bool bf16)
{
    extern __shared__ float partial[];
    const std::int64_t row = blockIdx.x;
    float ss = 0;
    for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
        const float v = load(x, row * d + j, bf16);
        ss += v * v;
    }
    partial[threadIdx.x] = ss;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    const float inv = rsqrtf(partial[0] / float(d) + eps);
    for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x)
        store(y, row * d + j, load(w, j, bf16) * (load(x, row * d + j, bf16) * inv), bf16);
}

__global__ void siluMulKernel(const void* g, const void* u, void* y, std::int64_t n, bool bf16)
{
    const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (i >= n)
        return;
    const float a = load(g, i, bf16);
    store(y, i, a / (1.0f + __expf(-a)) * load(u, i, bf16), bf16);
}

// One thread per (token, head, pair j < hd/2): rotate_half with cos/sin of position · inv_freq[j].
__global__ void ropeKernel(const void* x, void* y, std::int64_t tokens, std::int64_t width, std::int64_t hd,
                           std::int64_t seq, const double* invFreq, bool bf16)
{
    const std::int64_t half = hd / 2, heads = width / hd;
    const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (i >= tokens * heads * half)
        return;
    const std::int64_t j = i % half, h = (i / half) % heads, t = i / (half * heads);
    const double a = double(t % seq) * invFreq[j];
    const float c = float(cos(a)), s = float(sin(a));
    const std::int64_t base = t * width + h * hd;
    const float x1 = load(x, base + j, bf16), x2 = load(x, base + j + half, bf16);
    store(y, base + j, x1 * c - x2 * s, bf16);
    store(y, base + j + half, x2 * c + x1 * s, bf16);
}

// One block per (batch, head, query row): causal softmax over the row's scores in shared memory,
// then the weighted sum of values; fp32 throughout.
__global__ void attentionKernel(const void* q, const void* k, const void* v, void* y, std::int64_t seq,
                                std::int64_t heads, std::int64_t kvHeads, std::int64_t hd, bool bf16)
{
    extern __shared__ float scores[];
    const std::int64_t i = blockIdx.x % seq, h = (blockIdx.x / seq) % heads, b = blockIdx.x / (seq * heads);
    const std::int64_t qw = heads * hd, kw = kvHeads * hd, kh = h / (heads / kvHeads);
    const float scale = rsqrtf(float(hd));
    const std::int64_t qRow = (b * seq + i) * qw + h * hd;
    for (std::int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
        const std::int64_t kRow = (b * seq + j) * kw + kh * hd;
        float d = 0;
        for (std::int64_t e = 0; e < hd; ++e)
            d += load(q, qRow + e, bf16) * load(k, kRow + e, bf16);
        scores[j] = d * scale;
    }
    __syncthreads();
    if (threadIdx.x == 0) { // rows are short next to the GEMMs; a serial max/sum keeps this exact
        float mx = -INFINITY;
        for (std::int64_t j = 0; j <= i; ++j)
            mx = fmaxf(mx, scores[j]);
        float sum = 0;
        for (std::int64_t j = 0; j <= i; ++j)
            sum += (scores[j] = __expf(scores[j] - mx));
        for (std::int64_t j = 0; j <= i; ++j)
            scores[j] /= sum;
    }
    __syncthreads();
    for (std::int64_t e = threadIdx.x; e < hd; e += blockDim.x) {
        float acc = 0;
        for (std::int64_t j = 0; j <= i; ++j)
            acc += scores[j] * load(v, (b * seq + j) * kw + kh * hd + e, bf16);
        store(y, qRow + e, acc, bf16);
    }
}

__global__ void embeddingKernel(const std::int32_t* ids, const void* w, void* y, std::int64_t tokens, std::int64_t rows,
                                std::int64_t cols, std::int64_t first, bool bf16)
{
    const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (i >= tokens * cols)
        return;
    const std::int64_t t = i / cols, c = i % cols, local = std::int64_t(ids[t]) - first;
    store(y, i, local >= 0 && local < rows ? load(w, local * cols + c, bf16) : 0.0f, bf16); // masked vocab shard
}

} // namespace

bool built() { return true; }

Result<Inventory> probe()
{
    TP_RETURN_IF_ERROR(requireDevice());
    Inventory inv;
    TP_CUDA(cudaDriverGetVersion(&inv.driverVersion));
    TP_CUDA(cudaRuntimeGetVersion(&inv.runtimeVersion));
    int n = 0;
    TP_CUDA(cudaGetDeviceCount(&n));
    for (int d = 0; d < n; ++d) {
        cudaDeviceProp p{};
        TP_CUDA(cudaGetDeviceProperties(&p, d));
        inv.devices.push_back({d, p.name, p.major, p.minor, static_cast<std::int64_t>(p.totalGlobalMem), p.multiProcessorCount});
    }
    Blas blas;
    TP_RETURN_IF_ERROR(blas.init());
    TP_CUBLAS(cublasGetVersion(blas.get(), &inv.cublasVersion));
    return inv;
}

Result<std::vector<float>> gemm(const std::vector<float>& x, const std::vector<float>& w, std::int64_t n, std::int64_t in,
                                std::int64_t out, Storage s)
{
    TP_RETURN_IF_ERROR(requireDevice());
    if (std::int64_t(x.size()) != n * in || std::int64_t(w.size()) != out * in)
        return invalidArgument("gemm: buffer sizes do not match n, in, out");
    Tensor X, W, Y;
    TP_RETURN_IF_ERROR(upload(x, s, X));
    TP_RETURN_IF_ERROR(upload(w, s, W));
    TP_RETURN_IF_ERROR(allocate(n * out, s, Y));
    Blas blas;
    TP_RETURN_IF_ERROR(blas.init());
    const float one = 1, zero = 0;
    const cudaDataType_t t = s == Storage::BF16 ? CUDA_R_16BF : CUDA_R_32F;
    // Row-major Y[n,out] = X[n,in]·W[out,in]ᵀ is column-major Yᵀ[out,n] = W · Xᵀ.
    TP_CUBLAS(cublasGemmEx(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, int(out), int(n), int(in), &one, W.data.as<void>(), t,
                           int(in), X.data.as<void>(), t, int(in), &zero, Y.data.as<void>(), t, int(out),
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return download(Y);
}

Result<std::vector<float>> rmsNorm(const std::vector<float>& x, const std::vector<float>& w, std::int64_t rows,
                                   std::int64_t d, float eps, Storage s)
{
    TP_RETURN_IF_ERROR(requireDevice());
    Tensor X, W, Y;
    TP_RETURN_IF_ERROR(upload(x, s, X));
    TP_RETURN_IF_ERROR(upload(w, s, W));
    TP_RETURN_IF_ERROR(allocate(X.n, s, Y));
    if (rows > 0)
        rmsNormKernel<<<unsigned(rows), 256, 256 * sizeof(float)>>>(X.data.as<void>(), W.data.as<void>(), Y.data.as<void>(),
                                                                     d, eps, Y.bf16);
    TP_CUDA(cudaGetLastError());
    return download(Y);
}

Result<std::vector<float>> siluMul(const std::vector<float>& g, const std::vector<float>& u, Storage s)
{
    TP_RETURN_IF_ERROR(requireDevice());
    Tensor G, U, Y;
    TP_RETURN_IF_ERROR(upload(g, s, G));
    TP_RETURN_IF_ERROR(upload(u, s, U));
    TP_RETURN_IF_ERROR(allocate(G.n, s, Y));
    if (G.n > 0)
        siluMulKernel<<<blocks(G.n), 256>>>(G.data.as<void>(), U.data.as<void>(), Y.data.as<void>(), G.n, Y.bf16);
    TP_CUDA(cudaGetLastError());
    return download(Y);
}

Result<std::vector<float>> rope(const std::vector<float>& x, std::int64_t tokens, std::int64_t width, std::int64_t headDim,
                                std::int64_t seq, const std::vector<double>& invFreq, Storage s)
{
    TP_RETURN_IF_ERROR(requireDevice());
    Tensor X, Y;
    TP_RETURN_IF_ERROR(upload(x, s, X));
    TP_RETURN_IF_ERROR(allocate(X.n, s, Y));
    Buffer freq;
    TP_RETURN_IF_ERROR(freq.alloc(invFreq.size() * sizeof(double)));
    TP_CUDA(cudaMemcpy(freq.as<double>(), invFreq.data(), invFreq.size() * sizeof(double), cudaMemcpyHostToDevice));
    const std::int64_t work = tokens * (width / headDim) * (headDim / 2);
    if (work > 0)
        ropeKernel<<<blocks(work), 256>>>(X.data.as<void>(), Y.data.as<void>(), tokens, width, headDim, seq,
                                          freq.as<double>(), Y.bf16);
    TP_CUDA(cudaGetLastError());
    return download(Y);
}

Result<std::vector<float>> attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                     std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t kvHeads,
                                     std::int64_t headDim, Storage s)
{
    TP_RETURN_IF_ERROR(requireDevice());
    if (seq * std::int64_t(sizeof(float)) > 48 * 1024)
        return invalidArgument(cat("attention: sequence ", seq, " exceeds this kernel's 12,288-token row"));
    Tensor Q, K, V, Y;
    TP_RETURN_IF_ERROR(upload(q, s, Q));
    TP_RETURN_IF_ERROR(upload(k, s, K));
    TP_RETURN_IF_ERROR(upload(v, s, V));
    TP_RETURN_IF_ERROR(allocate(Q.n, s, Y));
    const std::int64_t grid = batch * heads * seq;
    if (grid > 0)
        attentionKernel<<<unsigned(grid), 128, unsigned(seq * sizeof(float))>>>(Q.data.as<void>(), K.data.as<void>(),
                                                                              V.data.as<void>(), Y.data.as<void>(), seq,
                                                                              heads, kvHeads, headDim, Y.bf16);
    TP_CUDA(cudaGetLastError());
    return download(Y);
}

Result<std::vector<float>> embedding(const std::vector<std::int32_t>& ids, const std::vector<float>& w, std::int64_t rows,
                                     std::int64_t cols, std::int64_t first, Storage s)
{
    TP_RETURN_IF_ERROR(requireDevice());
    Tensor W, Y;
    TP_RETURN_IF_ERROR(upload(w, s, W));
    const std::int64_t tokens = std::int64_t(ids.size());
    TP_RETURN_IF_ERROR(allocate(tokens * cols, s, Y));
    Buffer dIds;
    TP_RETURN_IF_ERROR(dIds.alloc(ids.size() * sizeof(std::int32_t)));
    TP_CUDA(cudaMemcpy(dIds.as<std::int32_t>(), ids.data(), ids.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
    if (tokens * cols > 0)
        embeddingKernel<<<blocks(tokens * cols), 256>>>(dIds.as<std::int32_t>(), W.data.as<void>(), Y.data.as<void>(),
                                                        tokens, rows, cols, first, Y.bf16);
    TP_CUDA(cudaGetLastError());
    return download(Y);
}

Result<GemmTiming> benchGemmBf16(int device, std::int64_t m, std::int64_t n, std::int64_t k, int iterations)
{
    TP_RETURN_IF_ERROR(requireDevice());
    TP_CUDA(cudaSetDevice(device));
    Buffer A, B, C;
    TP_RETURN_IF_ERROR(A.alloc(std::size_t(m * k) * 2));
    TP_RETURN_IF_ERROR(B.alloc(std::size_t(n * k) * 2));
    TP_RETURN_IF_ERROR(C.alloc(std::size_t(m * n) * 2));
    TP_CUDA(cudaMemset(A.as<void>(), 0, A.bytes()));
    TP_CUDA(cudaMemset(B.as<void>(), 0, B.bytes()));
    Blas blas;
    TP_RETURN_IF_ERROR(blas.init());
    Event start, stop;
    TP_RETURN_IF_ERROR(start.init());
    TP_RETURN_IF_ERROR(stop.init());
    const float one = 1, zero = 0;
    auto once = [&]() -> Status {
        TP_CUBLAS(cublasGemmEx(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &one, B.as<void>(), CUDA_R_16BF,
                               int(k), A.as<void>(), CUDA_R_16BF, int(k), &zero, C.as<void>(), CUDA_R_16BF, int(n),
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return {};
    };
    for (int i = 0; i < 3; ++i)
        TP_RETURN_IF_ERROR(once());
    std::vector<double> times;
    for (int i = 0; i < std::max(iterations, 1); ++i) {
        TP_CUDA(cudaEventRecord(start.get()));
        TP_RETURN_IF_ERROR(once());
        TP_CUDA(cudaEventRecord(stop.get()));
        TP_CUDA(cudaEventSynchronize(stop.get()));
        float ms = 0;
        TP_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
        times.push_back(ms / 1e3);
    }
    std::sort(times.begin(), times.end());
    GemmTiming t{m, n, k, times[times.size() / 2], 0};
    t.tflops = 2.0 * double(m) * double(n) * double(k) / t.seconds / 1e12;
    return t;
}

} // namespace tp::gpu
