// gpu_none.cpp — the GPU entry points of a build without the CUDA toolkit.
#include "tp/runtime/gpu.h"

namespace tp::gpu {

namespace {
Status notBuilt()
{
    return Status(StatusCode::Unimplemented, "this build has no CUDA backend (the CUDA toolkit was not found at configure time)");
}
} // namespace

bool built() { return false; }
Result<Inventory> probe() { return notBuilt(); }
Result<std::vector<float>> gemm(const std::vector<float>&, const std::vector<float>&, std::int64_t, std::int64_t, std::int64_t, Storage) { return notBuilt(); }
Result<std::vector<float>> rmsNorm(const std::vector<float>&, const std::vector<float>&, std::int64_t, std::int64_t, float, Storage) { return notBuilt(); }
Result<std::vector<float>> siluMul(const std::vector<float>&, const std::vector<float>&, Storage) { return notBuilt(); }
Result<std::vector<float>> rope(const std::vector<float>&, std::int64_t, std::int64_t, std::int64_t, std::int64_t, const std::vector<double>&, Storage) { return notBuilt(); }
Result<std::vector<float>> attention(const std::vector<float>&, const std::vector<float>&, const std::vector<float>&, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, Storage) { return notBuilt(); }
Result<std::vector<float>> embedding(const std::vector<std::int32_t>&, const std::vector<float>&, std::int64_t, std::int64_t, std::int64_t, Storage) { return notBuilt(); }
Result<GemmTiming> benchGemmBf16(int, std::int64_t, std::int64_t, std::int64_t, int) { return notBuilt(); }

} // namespace tp::gpu

#include "tp/runtime/communicator.h"

namespace tp {

bool haveNccl() { return false; }

Result<std::shared_ptr<NcclGroup>> NcclGroup::create(int, std::chrono::milliseconds)
{
    return Status(StatusCode::Unimplemented, "this build has no NCCL communicator (the CUDA toolkit was not found)");
}

} // namespace tp
