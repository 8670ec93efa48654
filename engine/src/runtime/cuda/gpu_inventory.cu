// gpu_inventory.cu — the CUDA devices this process sees (with the driver, runtime, cuBLAS and NCCL
// versions), and a cuBLAS bf16 GEMM benchmark with fp32 accumulation timed by CUDA events.
#include "cuda_check.h"

#include "tp/runtime/backend.h" // splitmix64
#include "tp/runtime/gpu.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <library_types.h>
#include <nccl.h>

#include <algorithm>
#include <climits>
#include <vector>

namespace tp::gpu {

namespace {

using cuda::cat;

constexpr int kThreads = 256;
constexpr std::size_t kWorkspaceBytes = std::size_t(32) << 20;
constexpr int kWarmup = 3;

// Uniform bf16 values in [-1, 1) from a counter hash: GEMM operands must not be zeros (the tensor
// cores' power, and so their clocks, depend on the data).
__global__ void randomBf16Kernel(__nv_bfloat16* dst, std::int64_t n, std::uint64_t seed)
{
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
        const std::uint64_t bits = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(i)));
        dst[i] = __float2bfloat16_rn(static_cast<float>(static_cast<double>(bits >> 11) * (2.0 / 9007199254740992.0) - 1.0));
    }
}

Status randomFill(__nv_bfloat16* dst, std::int64_t n, std::uint64_t seed, cudaStream_t st)
{
    const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 1 << 16));
    randomBf16Kernel<<<blocks, kThreads, 0, st>>>(dst, n, seed);
    TP_CUDA_LAUNCHED();
    return {};
}

// At least one device, or FailedPrecondition with CUDA's reason.
Result<int> deviceCount()
{
    int n = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
        cudaGetLastError(); // handled: not a later call's error
        // Without any NVIDIA driver the runtime says "insufficient driver": say what that means here.
        const char* hint = e == cudaErrorInsufficientDriver ? "no NVIDIA driver, or one older than this build's CUDA runtime: " : "";
        return failedPrecondition(cat("no CUDA device is visible (", hint, cudaGetErrorString(e), ", ", cudaGetErrorName(e), ")"));
    }
    if (n == 0)
        return failedPrecondition("no CUDA device is visible (cudaGetDeviceCount found none)");
    return n;
}

} // namespace

bool built() { return true; }

Result<Inventory> probe()
{
    TP_ASSIGN_OR_RETURN(const int n, deviceCount());
    Inventory inv;
    TP_CUDA(cudaDriverGetVersion(&inv.driverVersion));
    TP_CUDA(cudaRuntimeGetVersion(&inv.runtimeVersion));
    for (int d = 0; d < n; ++d) {
        cudaDeviceProp p{};
        TP_CUDA(cudaGetDeviceProperties(&p, d));
        inv.devices.push_back({d, p.name, p.major, p.minor, static_cast<std::int64_t>(p.totalGlobalMem), p.multiProcessorCount});
    }
    // The cuBLAS library loaded (not the header compiled against), spelled as CUBLAS_VERSION.
    int major = 0, minor = 0, patch = 0;
    TP_CUBLAS(cublasGetProperty(MAJOR_VERSION, &major));
    TP_CUBLAS(cublasGetProperty(MINOR_VERSION, &minor));
    TP_CUBLAS(cublasGetProperty(PATCH_LEVEL, &patch));
    inv.cublasVersion = major * 10000 + minor * 100 + patch;
    if (const ncclResult_t r = ncclGetVersion(&inv.ncclVersion); r != ncclSuccess)
        return Status(StatusCode::Internal, cat("ncclGetVersion failed: ", ncclGetErrorString(r)));
    return inv;
}

Result<GemmTiming> benchGemmBf16(int device, std::int64_t m, std::int64_t n, std::int64_t k, int iterations)
{
    if (m <= 0 || n <= 0 || k <= 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return invalidArgument(cat("bench gemm: ", m, " × ", n, " × ", k, " is not a GEMM cuBLAS takes"));
    if (iterations < 1)
        return invalidArgument(cat("bench gemm: ", iterations, " iterations"));
    TP_ASSIGN_OR_RETURN(const int count, deviceCount());
    if (device < 0 || device >= count)
        return failedPrecondition(cat("bench gemm: CUDA device ", device, " does not exist (", count, " visible)"));
    TP_RETURN_IF_ERROR(cuda::useDevice(device));

    cuda::StreamHandle stream;
    TP_CUDA(cudaStreamCreateWithFlags(stream.out(), cudaStreamNonBlocking));
    cuda::DeviceMemory a, b, c, workspace;
    const std::size_t e = sizeof(__nv_bfloat16);
    TP_CUDA(cudaMalloc(a.out(), static_cast<std::size_t>(m * k) * e));
    TP_CUDA(cudaMalloc(b.out(), static_cast<std::size_t>(n * k) * e));
    TP_CUDA(cudaMalloc(c.out(), static_cast<std::size_t>(m * n) * e));
    TP_CUDA(cudaMalloc(workspace.out(), kWorkspaceBytes));
    TP_RETURN_IF_ERROR(randomFill(static_cast<__nv_bfloat16*>(a.get()), m * k, 0x5eed0001ull, stream.get()));
    TP_RETURN_IF_ERROR(randomFill(static_cast<__nv_bfloat16*>(b.get()), n * k, 0x5eed0002ull, stream.get()));

    cuda::BlasHandle blas;
    TP_CUBLAS(cublasCreate(blas.out()));
    TP_CUBLAS(cublasSetStream(blas.get(), stream.get())); // before the workspace: a stream resets it
    TP_CUBLAS(cublasSetWorkspace(blas.get(), workspace.get(), kWorkspaceBytes));
    // The engine's math mode (cuda_backend.cu): fp32 split-K reductions.
    TP_CUBLAS(cublasSetMathMode(blas.get(), static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH
                                                                      | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));

    // Row-major C[m, n] = A[m, k]·B[n, k]ᵀ is column-major Cᵀ = B·Aᵀ.
    const float one = 1.0f, zero = 0.0f;
    auto once = [&]() -> Status {
        TP_CUBLAS(cublasGemmEx(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                               &one, b.get(), CUDA_R_16BF, static_cast<int>(k), a.get(), CUDA_R_16BF, static_cast<int>(k), &zero,
                               c.get(), CUDA_R_16BF, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return {};
    };
    for (int i = 0; i < kWarmup; ++i)
        TP_RETURN_IF_ERROR(once());

    // Every timed GEMM between its own two events, queued back to back and read after one
    // synchronisation, so that no host gap falls inside a measurement.
    std::vector<cuda::EventHandle> events(static_cast<std::size_t>(2 * iterations));
    for (auto& ev : events)
        TP_CUDA(cudaEventCreateWithFlags(ev.out(), cudaEventDefault));
    for (int i = 0; i < iterations; ++i) {
        TP_CUDA(cudaEventRecord(events[static_cast<std::size_t>(2 * i)].get(), stream.get()));
        TP_RETURN_IF_ERROR(once());
        TP_CUDA(cudaEventRecord(events[static_cast<std::size_t>(2 * i + 1)].get(), stream.get()));
    }
    TP_CUDA(cudaStreamSynchronize(stream.get()));
    std::vector<double> seconds;
    for (int i = 0; i < iterations; ++i) {
        float ms = 0;
        TP_CUDA(cudaEventElapsedTime(&ms, events[static_cast<std::size_t>(2 * i)].get(), events[static_cast<std::size_t>(2 * i + 1)].get()));
        seconds.push_back(static_cast<double>(ms) / 1e3);
    }
    std::sort(seconds.begin(), seconds.end());
    const std::size_t mid = seconds.size() / 2;
    GemmTiming t;
    t.m = m;
    t.n = n;
    t.k = k;
    t.seconds = seconds.size() % 2 ? seconds[mid] : 0.5 * (seconds[mid - 1] + seconds[mid]);
    t.tflops = t.seconds > 0 ? 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / t.seconds / 1e12 : 0.0;
    return t;
}

} // namespace tp::gpu
