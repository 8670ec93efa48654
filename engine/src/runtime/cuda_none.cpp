// cuda_none.cpp — the CUDA entry points of a build without the CUDA toolkit: each says so.
#include "tp/runtime/backend.h"
#include "tp/runtime/communicator.h"
#include "tp/runtime/gpu.h"

namespace tp {

namespace {
Status notBuilt()
{
    return Status(StatusCode::Unimplemented, "this build has no CUDA backend (the CUDA toolkit was not found at configure time)");
}
} // namespace

namespace gpu {
bool built() { return false; }
Result<Inventory> probe() { return notBuilt(); }
Result<GemmTiming> benchGemmBf16(int, std::int64_t, std::int64_t, std::int64_t, int) { return notBuilt(); }
} // namespace gpu

bool haveCudaBackend() { return false; }
Result<std::unique_ptr<Backend>> makeCudaBackend(int, DType) { return notBuilt(); }
bool haveNccl() { return false; }
Result<std::shared_ptr<CommGroup>> makeNcclGroup(const std::vector<Backend*>&, std::chrono::milliseconds) { return notBuilt(); }
Result<std::shared_ptr<CommGroup>> makeDeviceGroup(const std::vector<Backend*>&, std::chrono::milliseconds) { return notBuilt(); }
Result<std::unique_ptr<Communicator>> makeNcclCommunicator(Communicator&, Backend&, std::chrono::milliseconds) { return notBuilt(); }

} // namespace tp
