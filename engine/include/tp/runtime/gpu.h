// gpu.h — the CUDA side of the engine: device inventory, the GPU op set (bf16 or fp32 storage, fp32
// accumulation; cuBLAS GEMMs; kernels for RMSNorm, RoPE, causal GQA attention, SiLU·mul and the
// masked vocab-parallel embedding) and a cuBLAS GEMM benchmark.
//
// The ops here take and return host buffers (upload, run, download) so that tests can check every
// kernel against the CPU op of cpu_ops.h. Builds without the CUDA toolkit, or machines without a
// visible GPU, get a clear Status instead (Unimplemented / FailedPrecondition), never a crash.
#pragma once

#include "tp/core/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tp::gpu {

struct Device
{
    int index = 0;
    std::string name;
    int major = 0, minor = 0;       // compute capability
    std::int64_t memoryBytes = 0;
    int multiprocessors = 0;
};

struct Inventory
{
    std::vector<Device> devices;
    int driverVersion = 0, runtimeVersion = 0, cublasVersion = 0;
};

// Whether this build has the CUDA backend compiled in.
bool built();
// Every visible device; FailedPrecondition (with CUDA's reason) when there is none.
Result<Inventory> probe();

enum class Storage { F32, BF16 };

Result<std::vector<float>> gemm(const std::vector<float>& x, const std::vector<float>& w, std::int64_t n, std::int64_t in,
                                std::int64_t out, Storage storage);
Result<std::vector<float>> rmsNorm(const std::vector<float>& x, const std::vector<float>& w, std::int64_t rows,
                                   std::int64_t d, float eps, Storage storage);
Result<std::vector<float>> siluMul(const std::vector<float>& g, const std::vector<float>& u, Storage storage);
Result<std::vector<float>> rope(const std::vector<float>& x, std::int64_t tokens, std::int64_t width, std::int64_t headDim,
                                std::int64_t seq, const std::vector<double>& invFreq, Storage storage);
Result<std::vector<float>> attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                     std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t kvHeads,
                                     std::int64_t headDim, Storage storage);
Result<std::vector<float>> embedding(const std::vector<std::int32_t>& ids, const std::vector<float>& w, std::int64_t rows,
                                     std::int64_t cols, std::int64_t first, Storage storage);

struct GemmTiming
{
    std::int64_t m = 0, n = 0, k = 0;
    double seconds = 0;   // per GEMM, median of the timed runs (CUDA events)
    double tflops = 0;
};
// C[m, n] = A[m, k] · B[n, k]ᵀ in bf16 with fp32 accumulation on `device`.
Result<GemmTiming> benchGemmBf16(int device, std::int64_t m, std::int64_t n, std::int64_t k, int iterations);

} // namespace tp::gpu
