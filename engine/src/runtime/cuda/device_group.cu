// device_group.cu — single-GPU emulation of T ranks: every rank's backend lives on the same device,
// so a collective is copies and reductions between the ranks' own buffers on that device. The data
// is exact (sums in fp32, rounded once); the time is not meant to be: emulated runs take the
// collectives' time from the hardware profile's model.
//
// Every collective runs in three steps on each rank's communication stream:
//   1. record `ready` (everything this rank enqueued so far, its input included), host barrier;
//   2. wait for every rank's `ready`, then do this rank's share: reduce its chunk of every rank's
//      input into every rank's output, or copy its piece into every rank's output;
//      record `done`, host barrier;
//   3. wait for every rank's `done`: this rank's output is complete for what follows on its stream.
// The host barrier, the integer exchange and the abort are a local group's.
#include "cuda_check.h"
#include "tp/runtime/backend.h"
#include "tp/runtime/communicator.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <functional>
#include <mutex>
#include <numeric>
#include <string_view>
#include <thread>

namespace tp {

namespace {

using cuda::cat;

constexpr int kMaxRanks = 64;

// Kernel arguments: every rank's buffer (by value: at most kMaxRanks of each).
struct Buffers
{
    const void* in[kMaxRanks];
    void* out[kMaxRanks];
};

template<typename T> __device__ float toF(T v);
template<> __device__ float toF<float>(float v) { return v; }
template<> __device__ float toF<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template<> __device__ float toF<__half>(__half v) { return __half2float(v); }
template<typename T> __device__ T fromF(float v);
template<> __device__ float fromF<float>(float v) { return v; }
template<> __device__ __nv_bfloat16 fromF<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template<> __device__ __half fromF<__half>(float v) { return __float2half_rn(v); }

// out[o][outFirst + i] = Σ_r in[r][inFirst + i] for i < n, for every output o < outs.
template<typename T>
__global__ void sumKernel(Buffers b, int ranks, int outs, std::int64_t inFirst, std::int64_t outFirst, std::int64_t n)
{
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
        float s = 0;
        for (int r = 0; r < ranks; ++r)
            s += toF<T>(static_cast<const T*>(b.in[r])[inFirst + i]);
        const T v = fromF<T>(s);
        for (int o = 0; o < outs; ++o)
            static_cast<T*>(b.out[o])[outFirst + i] = v;
    }
}

class Shared;

class DeviceRank final : public Communicator
{
public:
    DeviceRank(Shared& g, int rank, Backend& backend, Communicator& host);
    int rank() const override { return m_rank; }
    int size() const override;
    std::string kind() const override { return "emulated"; }

    Status allReduce(const Tensor& in, const Tensor& out) override;
    Status allGather(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts) override;
    Status reduceScatter(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts) override;
    Status broadcast(const Tensor& data, int root) override;
    Status allToAll(const Tensor& in, std::span<const std::int64_t> sendCounts, const Tensor& out,
                    std::span<const std::int64_t> recvCounts) override;
    Status synchronize() override;
    Status exchange(std::span<const std::int64_t> mine, std::vector<std::int64_t>& all, std::vector<std::int64_t>& counts) override
    {
        return m_host.exchange(mine, all, counts);
    }
    Status barrier() override { return m_host.barrier(); }
    void abort(const std::string& why) override { m_host.abort(why); }
    bool aborted() const override { return m_host.aborted(); }

    Status init();

private:
    // Steps 1 and 3 around this rank's share (step 2).
    Status collective(const char* what, std::initializer_list<const Tensor*> tensors, const std::function<Status()>& share);
    // Every rank's input at [inFirst, +n), summed, into each of `outs` at [outFirst, +n).
    Status sum(DType t, const std::vector<void*>& outs, std::int64_t inFirst, std::int64_t outFirst, std::int64_t n);

    Shared& m_g;
    const int m_rank;
    const int m_device;
    const cudaStream_t m_stream;
    Communicator& m_host;
    cuda::EventHandle m_ready, m_done;
};

// What the ranks publish to each other for one collective.
class Shared final : public CommGroup
{
public:
    Shared(int n, std::chrono::milliseconds timeout)
        : host(makeLocalGroup(n, timeout))
        , timeout(timeout)
        , in(std::size_t(n))
        , out(std::size_t(n))
        , counts(std::size_t(n))
        , ready(std::size_t(n))
        , done(std::size_t(n))
    {
    }
    Communicator& rank(int r) override { return *ranks[std::size_t(r)]; }
    int size() const override { return int(ranks.size()); }

    std::shared_ptr<CommGroup> host;
    std::chrono::milliseconds timeout;
    std::vector<const void*> in;
    std::vector<void*> out;
    std::vector<std::vector<std::int64_t>> counts; // all_to_all: each rank's send counts
    std::vector<cudaEvent_t> ready, done;
    std::vector<std::unique_ptr<DeviceRank>> ranks;
};

DeviceRank::DeviceRank(Shared& g, int rank, Backend& backend, Communicator& host)
    : m_g(g)
    , m_rank(rank)
    , m_device(backend.ordinal())
    , m_stream(static_cast<cudaStream_t>(backend.nativeStream(Stream::Comm)))
    , m_host(host)
{
}

int DeviceRank::size() const { return m_g.size(); }

Status DeviceRank::init()
{
    TP_RETURN_IF_ERROR(cuda::useDevice(m_device));
    TP_CUDA(cudaEventCreateWithFlags(m_ready.out(), cudaEventDisableTiming));
    TP_CUDA(cudaEventCreateWithFlags(m_done.out(), cudaEventDisableTiming));
    m_g.ready[std::size_t(m_rank)] = m_ready.get();
    m_g.done[std::size_t(m_rank)] = m_done.get();
    return {};
}

Status DeviceRank::collective(const char* what, std::initializer_list<const Tensor*> tensors, const std::function<Status()>& share)
{
    if (m_host.aborted())
        return Status(StatusCode::Cancelled, cat("rank ", m_rank, ": ", what, " abandoned: the group was aborted"));
    for (const Tensor* t : tensors)
        if (t->device != DeviceKind::Cuda || !t->isContiguous()
            || !(isStorageDtype(t->dtype) || (t->dtype == DType::I64 && std::string_view(what) == "all_to_all")))
            return invalidArgument(cat(what, ": rank ", m_rank, ": the emulated group moves contiguous device tensors"));
    TP_RETURN_IF_ERROR(cuda::useDevice(m_device));
    TP_CUDA(cudaEventRecord(m_ready.get(), m_stream));
    TP_RETURN_IF_ERROR(m_host.barrier());
    for (cudaEvent_t e : m_g.ready)
        TP_CUDA(cudaStreamWaitEvent(m_stream, e, 0));
    TP_RETURN_IF_ERROR(share());
    TP_CUDA(cudaEventRecord(m_done.get(), m_stream));
    TP_RETURN_IF_ERROR(m_host.barrier());
    for (cudaEvent_t e : m_g.done)
        TP_CUDA(cudaStreamWaitEvent(m_stream, e, 0));
    return m_host.barrier(); // the published pointers may change only after every rank has read them
}

Status DeviceRank::sum(DType t, const std::vector<void*>& outputs, std::int64_t inFirst, std::int64_t outFirst, std::int64_t n)
{
    if (n <= 0)
        return {};
    Buffers b{};
    for (int r = 0; r < size(); ++r)
        b.in[r] = m_g.in[std::size_t(r)];
    for (std::size_t o = 0; o < outputs.size(); ++o)
        b.out[o] = outputs[o];
    const int outs = int(outputs.size());
    const unsigned threads = 256, blocks = unsigned(std::min<std::int64_t>((n + threads - 1) / threads, 4096));
    switch (t) {
    case DType::F32: sumKernel<float><<<blocks, threads, 0, m_stream>>>(b, size(), outs, inFirst, outFirst, n); break;
    case DType::BF16: sumKernel<__nv_bfloat16><<<blocks, threads, 0, m_stream>>>(b, size(), outs, inFirst, outFirst, n); break;
    case DType::F16: sumKernel<__half><<<blocks, threads, 0, m_stream>>>(b, size(), outs, inFirst, outFirst, n); break;
    default: return invalidArgument(cat("emulated collective on ", dtypeName(t)));
    }
    TP_CUDA_LAUNCHED();
    return {};
}

Status DeviceRank::allReduce(const Tensor& in, const Tensor& out)
{
    if (in.numel() != out.numel() || in.dtype != out.dtype)
        return invalidArgument(cat("all_reduce: rank ", m_rank, ": ", in.numel(), " elements in, ", out.numel(), " out"));
    m_g.in[std::size_t(m_rank)] = in.data;
    m_g.out[std::size_t(m_rank)] = out.data;
    return collective("all_reduce", {&in, &out}, [&] {
        // My chunk of every rank's sum, written into every rank's output.
        const std::int64_t n = in.numel(), c = (n + size() - 1) / size();
        const std::int64_t b = std::min(n, m_rank * c), e = std::min(n, b + c);
        return sum(in.dtype, m_g.out, b, b, e - b);
    });
}

Status DeviceRank::allGather(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts)
{
    const auto off = pieceOffsets(counts);
    if (int(counts.size()) != size() || counts[std::size_t(m_rank)] != in.numel() || off.back() != out.numel() || in.dtype != out.dtype)
        return invalidArgument(cat("all_gather: rank ", m_rank, ": counts do not match the buffers"));
    m_g.in[std::size_t(m_rank)] = in.data;
    m_g.out[std::size_t(m_rank)] = out.data;
    return collective("all_gather", {&in, &out}, [&]() -> Status {
        // My piece into its place in every rank's output.
        const std::int64_t eb = in.elementBytes(), bytes = counts[std::size_t(m_rank)] * eb;
        for (int p = 0; p < size(); ++p) {
            char* dst = static_cast<char*>(m_g.out[std::size_t(p)]) + off[std::size_t(m_rank)] * eb;
            if (bytes > 0 && dst != in.data)
                TP_CUDA(cudaMemcpyAsync(dst, in.data, std::size_t(bytes), cudaMemcpyDeviceToDevice, m_stream));
        }
        return {};
    });
}

Status DeviceRank::reduceScatter(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts)
{
    const auto off = pieceOffsets(counts);
    if (int(counts.size()) != size() || off.back() != in.numel() || counts[std::size_t(m_rank)] != out.numel() || in.dtype != out.dtype)
        return invalidArgument(cat("reduce_scatter: rank ", m_rank, ": counts do not match the buffers"));
    m_g.in[std::size_t(m_rank)] = in.data;
    m_g.out[std::size_t(m_rank)] = out.data;
    return collective("reduce_scatter", {&in, &out}, [&] {
        // My piece of every rank's input, summed into my output only.
        return sum(in.dtype, {out.data}, off[std::size_t(m_rank)], 0, out.numel());
    });
}

Status DeviceRank::broadcast(const Tensor& data, int root)
{
    if (root < 0 || root >= size())
        return invalidArgument(cat("broadcast: root ", root, " outside 0..", size() - 1));
    m_g.in[std::size_t(m_rank)] = data.data;
    m_g.out[std::size_t(m_rank)] = data.data;
    return collective("broadcast", {&data}, [&]() -> Status {
        if (m_rank != root && data.bytes() > 0)
            TP_CUDA(cudaMemcpyAsync(data.data, m_g.in[std::size_t(root)], std::size_t(data.bytes()), cudaMemcpyDeviceToDevice, m_stream));
        return {};
    });
}

Status DeviceRank::allToAll(const Tensor& in, std::span<const std::int64_t> sendCounts, const Tensor& out,
                            std::span<const std::int64_t> recvCounts)
{
    const auto ro = pieceOffsets(recvCounts);
    if (int(sendCounts.size()) != size() || int(recvCounts.size()) != size() || pieceOffsets(sendCounts).back() != in.numel()
        || ro.back() != out.numel() || in.dtype != out.dtype)
        return invalidArgument(cat("all_to_all: rank ", m_rank, ": counts do not match the buffers"));
    m_g.in[std::size_t(m_rank)] = in.data;
    m_g.out[std::size_t(m_rank)] = out.data;
    m_g.counts[std::size_t(m_rank)].assign(sendCounts.begin(), sendCounts.end());
    return collective("all_to_all", {&in, &out}, [&]() -> Status {
        // Pull my piece of every rank's input.
        const std::int64_t eb = in.elementBytes();
        for (int p = 0; p < size(); ++p) {
            const auto& c = m_g.counts[std::size_t(p)];
            if (c[std::size_t(m_rank)] != recvCounts[std::size_t(p)])
                return invalidArgument(cat("all_to_all: rank ", m_rank, " expects ", recvCounts[std::size_t(p)],
                                           " elements from rank ", p, ", which sends ", c[std::size_t(m_rank)]));
            const std::int64_t from = std::accumulate(c.begin(), c.begin() + m_rank, std::int64_t(0));
            if (c[std::size_t(m_rank)] > 0)
                TP_CUDA(cudaMemcpyAsync(out.as<char>() + ro[std::size_t(p)] * eb,
                                        static_cast<const char*>(m_g.in[std::size_t(p)]) + from * eb,
                                        std::size_t(c[std::size_t(m_rank)] * eb), cudaMemcpyDeviceToDevice, m_stream));
        }
        return {};
    });
}

Status DeviceRank::synchronize()
{
    TP_RETURN_IF_ERROR(cuda::useDevice(m_device));
    const auto deadline = std::chrono::steady_clock::now() + m_g.timeout;
    for (int spins = 0;; ++spins) {
        const cudaError_t q = cudaStreamQuery(m_stream);
        if (q == cudaSuccess)
            return {};
        if (q != cudaErrorNotReady)
            return cuda::cudaStatus(q, "cudaStreamQuery", __FILE__, __LINE__);
        if (m_host.aborted())
            return Status(StatusCode::Cancelled, cat("rank ", m_rank, ": collectives abandoned: the group was aborted"));
        if (std::chrono::steady_clock::now() > deadline) {
            const std::string why = cat("rank ", m_rank, " waited ", m_g.timeout.count(), " ms for its collectives (watchdog)");
            m_host.abort(why);
            return Status(StatusCode::DeadlineExceeded, why);
        }
        if (spins > 1000)
            std::this_thread::yield();
    }
}

} // namespace

Result<std::shared_ptr<CommGroup>> makeDeviceGroup(const std::vector<Backend*>& backends, std::chrono::milliseconds timeout)
{
    const int n = int(backends.size());
    if (n > kMaxRanks)
        return invalidArgument(cat("emulation of ", n, " ranks: at most ", kMaxRanks));
    for (int r = 0; r < n; ++r)
        if (backends[std::size_t(r)]->device() != DeviceKind::Cuda || backends[std::size_t(r)]->ordinal() != backends[0]->ordinal())
            return failedPrecondition(cat("emulation runs every rank on one GPU; rank ", r, " is on ", backends[std::size_t(r)]->name()));
    auto g = std::make_shared<Shared>(n, timeout);
    for (int r = 0; r < n; ++r) {
        g->ranks.push_back(std::make_unique<DeviceRank>(*g, r, *backends[std::size_t(r)], g->host->rank(r)));
        TP_RETURN_IF_ERROR(g->ranks.back()->init());
    }
    return std::shared_ptr<CommGroup>(g);
}

} // namespace tp
