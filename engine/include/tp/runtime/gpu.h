// gpu.h — the CUDA devices this build can see, and a cuBLAS GEMM benchmark. The CUDA op set itself is
// a Backend (backend.h: makeCudaBackend). Builds without the CUDA toolkit, or machines without a
// visible GPU, get a clear Status (Unimplemented / FailedPrecondition), never a crash.
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
    int driverVersion = 0, runtimeVersion = 0, cublasVersion = 0, ncclVersion = 0;
};

// Whether this build has the CUDA backend compiled in.
bool built();
// Every visible device; FailedPrecondition (with CUDA's reason) when there is none.
Result<Inventory> probe();

struct GemmTiming
{
    std::int64_t m = 0, n = 0, k = 0;
    double seconds = 0;   // per GEMM, median of the timed runs (CUDA events)
    double tflops = 0;
};
// C[m, n] = A[m, k] · B[n, k]ᵀ in bf16 with fp32 accumulation on `device`, on random data.
Result<GemmTiming> benchGemmBf16(int device, std::int64_t m, std::int64_t n, std::int64_t k, int iterations);

} // namespace tp::gpu
