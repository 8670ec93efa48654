// nccl_communicator.cu — NCCL collectives for ranks that are threads of this process, one GPU each.
//
// Uneven pieces (all-gather, reduce-scatter, all-to-all with per-rank counts) are built from NCCL's
// point-to-point and rooted collectives inside ncclGroupStart/End, as NCCL's own collectives need
// equal counts. Every wait is a poll of the stream and of ncclCommGetAsyncError under the timeout.
#include "tp/runtime/communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <sstream>

#include <numeric>
#include <thread>

namespace tp {

namespace {

// nvcc cannot compile fmt in C++20 mode: messages are built with a stream.
template <typename... A> std::string cat(const A&... a)
{
    std::ostringstream s;
    (s << ... << a);
    return s.str();
}

Status ncclStatus(ncclResult_t r, const char* call, const char* file, int line)
{
    if (r == ncclSuccess)
        return {};
    return Status(StatusCode::Internal, cat(call, " failed at ", file, ":", line, ": ", ncclGetErrorString(r)));
}
Status cudaCall(cudaError_t e, const char* call, const char* file, int line)
{
    if (e == cudaSuccess)
        return {};
    return Status(StatusCode::Internal, cat(call, " failed at ", file, ":", line, ": ", cudaGetErrorString(e)));
}
#define TP_NCCL(call) TP_RETURN_IF_ERROR(ncclStatus((call), #call, __FILE__, __LINE__))
#define TP_CUDA_CALL(call) TP_RETURN_IF_ERROR(cudaCall((call), #call, __FILE__, __LINE__))

class NcclRank final : public Communicator
{
public:
    NcclRank(ncclComm_t comm, int rank, int size, int device, std::chrono::milliseconds timeout)
        : m_comm(comm)
        , m_rank(rank)
        , m_size(size)
        , m_device(device)
        , m_timeout(timeout)
    {
    }
    ~NcclRank() override
    {
        cudaSetDevice(m_device);
        if (m_buf)
            cudaFree(m_buf);
        if (m_stream)
            cudaStreamDestroy(m_stream);
        if (m_comm)
            m_aborted ? ncclCommAbort(m_comm) : ncclCommDestroy(m_comm);
    }
    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    std::string kind() const override { return "nccl"; }

    Status allReduce(std::span<float> data) override
    {
        TP_RETURN_IF_ERROR(stage(data.size(), data.data()));
        TP_NCCL(ncclAllReduce(m_buf, m_buf, data.size(), ncclFloat, ncclSum, m_comm, m_stream));
        return unstage(data.data(), 0, data.size(), "all_reduce");
    }
    Status allGather(std::span<const float> in, std::span<float> out) override
    {
        std::vector<std::int64_t> counts;
        TP_RETURN_IF_ERROR(gatherCounts(static_cast<std::int64_t>(in.size()), counts));
        const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t(0));
        if (total != static_cast<std::int64_t>(out.size()))
            return invalidArgument(cat("all_gather: rank ", m_rank, " expects ", out.size(), " elements, the ranks send ", total));
        std::vector<float> staged(out.size());
        const std::int64_t mine = std::accumulate(counts.begin(), counts.begin() + m_rank, std::int64_t(0));
        std::copy(in.begin(), in.end(), staged.begin() + mine);
        TP_RETURN_IF_ERROR(stage(staged.size(), staged.data()));
        // Each rank broadcasts its piece into its place.
        TP_NCCL(ncclGroupStart());
        std::int64_t off = 0;
        for (int p = 0; p < m_size; ++p) {
            TP_NCCL(ncclBroadcast(m_buf + off, m_buf + off, std::size_t(counts[std::size_t(p)]), ncclFloat, p, m_comm, m_stream));
            off += counts[std::size_t(p)];
        }
        TP_NCCL(ncclGroupEnd());
        return unstage(out.data(), 0, out.size(), "all_gather");
    }
    Status reduceScatter(std::span<const float> in, std::span<float> out, std::span<const std::int64_t> counts) override
    {
        if (int(counts.size()) != m_size || counts[std::size_t(m_rank)] != std::int64_t(out.size()))
            return invalidArgument(cat("reduce_scatter: rank ", m_rank, ": counts do not match the buffers"));
        TP_RETURN_IF_ERROR(stage(in.size(), in.data()));
        // Chunk p is reduced onto rank p.
        TP_NCCL(ncclGroupStart());
        std::int64_t off = 0;
        for (int p = 0; p < m_size; ++p) {
            TP_NCCL(ncclReduce(m_buf + off, m_buf + off, std::size_t(counts[std::size_t(p)]), ncclFloat, ncclSum, p, m_comm, m_stream));
            off += counts[std::size_t(p)];
        }
        TP_NCCL(ncclGroupEnd());
        const std::int64_t mine = std::accumulate(counts.begin(), counts.begin() + m_rank, std::int64_t(0));
        return unstage(out.data(), std::size_t(mine), out.size(), "reduce_scatter");
    }
    Status broadcast(std::span<float> data, int root) override
    {
        TP_RETURN_IF_ERROR(stage(data.size(), data.data()));
        TP_NCCL(ncclBroadcast(m_buf, m_buf, data.size(), ncclFloat, root, m_comm, m_stream));
        return unstage(data.data(), 0, data.size(), "broadcast");
    }
    Status allToAll(std::span<const float> in, std::span<const std::int64_t> sendCounts, std::vector<float>& out) override
    {
        // Every rank's send counts, then matched sends and receives.
        std::vector<float> mine(sendCounts.begin(), sendCounts.end()), all(static_cast<std::size_t>(m_size * m_size));
        TP_RETURN_IF_ERROR(stage(all.size(), nullptr));
        TP_CUDA_CALL(cudaMemcpyAsync(m_buf + m_rank * m_size, mine.data(), mine.size() * sizeof(float), cudaMemcpyHostToDevice, m_stream));
        TP_NCCL(ncclAllGather(m_buf + m_rank * m_size, m_buf, std::size_t(m_size), ncclFloat, m_comm, m_stream));
        TP_RETURN_IF_ERROR(unstage(all.data(), 0, all.size(), "all_to_all counts"));
        std::vector<std::int64_t> recv(static_cast<std::size_t>(m_size));
        for (int p = 0; p < m_size; ++p)
            recv[std::size_t(p)] = std::int64_t(all[std::size_t(p * m_size + m_rank)]);
        const std::int64_t sendTotal = std::int64_t(in.size()), recvTotal = std::accumulate(recv.begin(), recv.end(), std::int64_t(0));
        TP_RETURN_IF_ERROR(stage(std::size_t(sendTotal + recvTotal), nullptr));
        TP_CUDA_CALL(cudaMemcpyAsync(m_buf, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice, m_stream));
        TP_NCCL(ncclGroupStart());
        std::int64_t so = 0, ro = sendTotal;
        for (int p = 0; p < m_size; ++p) {
            TP_NCCL(ncclSend(m_buf + so, std::size_t(sendCounts[std::size_t(p)]), ncclFloat, p, m_comm, m_stream));
            TP_NCCL(ncclRecv(m_buf + ro, std::size_t(recv[std::size_t(p)]), ncclFloat, p, m_comm, m_stream));
            so += sendCounts[std::size_t(p)];
            ro += recv[std::size_t(p)];
        }
        TP_NCCL(ncclGroupEnd());
        out.resize(std::size_t(recvTotal));
        return unstage(out.data(), std::size_t(sendTotal), out.size(), "all_to_all");
    }
    Status barrier() override
    {
        float one = 1;
        return allReduce(std::span<float>(&one, 1));
    }
    void abort(const std::string& why) override
    {
        if (!m_aborted.exchange(true))
            m_why = why;
    }
    bool aborted() const override { return m_aborted; }

    Status init()
    {
        TP_CUDA_CALL(cudaSetDevice(m_device));
        TP_CUDA_CALL(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
        return {};
    }

private:
    Status gatherCounts(std::int64_t mine, std::vector<std::int64_t>& counts)
    {
        std::vector<float> all(static_cast<std::size_t>(m_size));
        TP_RETURN_IF_ERROR(stage(all.size(), nullptr));
        const float v = float(mine);
        TP_CUDA_CALL(cudaMemcpyAsync(m_buf + m_rank, &v, sizeof(float), cudaMemcpyHostToDevice, m_stream));
        TP_NCCL(ncclAllGather(m_buf + m_rank, m_buf, 1, ncclFloat, m_comm, m_stream));
        TP_RETURN_IF_ERROR(unstage(all.data(), 0, all.size(), "all_gather counts"));
        counts.assign(all.begin(), all.end());
        return {};
    }

    // Device buffer of at least n floats, optionally filled from host.
    Status stage(std::size_t n, const float* host)
    {
        if (m_aborted)
            return Status(StatusCode::Cancelled, cat("rank ", m_rank, ": communicator aborted: ", m_why));
        TP_CUDA_CALL(cudaSetDevice(m_device));
        if (n > m_capacity) {
            if (m_buf)
                TP_CUDA_CALL(cudaFree(m_buf));
            TP_CUDA_CALL(cudaMalloc(&m_buf, n * sizeof(float)));
            m_capacity = n;
        }
        if (host && n)
            TP_CUDA_CALL(cudaMemcpyAsync(m_buf, host, n * sizeof(float), cudaMemcpyHostToDevice, m_stream));
        return {};
    }
    // Copies device [offset, offset + n) back and waits for the stream under the watchdog.
    Status unstage(float* host, std::size_t offset, std::size_t n, const char* what)
    {
        if (n)
            TP_CUDA_CALL(cudaMemcpyAsync(host, m_buf + offset, n * sizeof(float), cudaMemcpyDeviceToHost, m_stream));
        const auto deadline = std::chrono::steady_clock::now() + m_timeout;
        for (;;) {
            const cudaError_t q = cudaStreamQuery(m_stream);
            if (q == cudaSuccess)
                return {};
            if (q != cudaErrorNotReady)
                return cudaCall(q, "cudaStreamQuery", __FILE__, __LINE__);
            ncclResult_t async = ncclSuccess;
            TP_NCCL(ncclCommGetAsyncError(m_comm, &async));
            if (async != ncclSuccess)
                return Status(StatusCode::Internal, cat("rank ", m_rank, ": NCCL error in ", what, ": ", ncclGetErrorString(async)));
            if (m_aborted || std::chrono::steady_clock::now() > deadline) {
                const bool timedOut = !m_aborted.exchange(true);
                ncclCommAbort(m_comm);
                m_comm = nullptr;
                return Status(timedOut ? StatusCode::DeadlineExceeded : StatusCode::Cancelled,
                              cat("rank ", m_rank, " waited ", m_timeout.count(), " ms in ", what, " (watchdog); the NCCL communicator was aborted"));
            }
            std::this_thread::yield();
        }
    }

    ncclComm_t m_comm;
    int m_rank, m_size, m_device;
    std::chrono::milliseconds m_timeout;
    cudaStream_t m_stream = nullptr;
    float* m_buf = nullptr;
    std::size_t m_capacity = 0;
    std::atomic<bool> m_aborted{false};
    std::string m_why;
};

class Group final : public NcclGroup
{
public:
    Communicator& rank(int r) override { return *m_ranks[std::size_t(r)]; }
    int size() const override { return int(m_ranks.size()); }
    std::vector<std::unique_ptr<NcclRank>> m_ranks;
};

} // namespace

bool haveNccl() { return true; }

Result<std::shared_ptr<NcclGroup>> NcclGroup::create(int size, std::chrono::milliseconds timeout)
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < size)
        return Status(StatusCode::FailedPrecondition,
                      cat("NCCL needs one GPU per rank: ", size, " rank(s), ", devices, " GPU(s) visible"));
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(size));
    std::vector<int> devs(static_cast<std::size_t>(size));
    std::iota(devs.begin(), devs.end(), 0);
    TP_NCCL(ncclCommInitAll(comms.data(), size, devs.data()));
    auto g = std::make_shared<Group>();
    for (int r = 0; r < size; ++r) {
        g->m_ranks.push_back(std::make_unique<NcclRank>(comms[std::size_t(r)], r, size, r, timeout));
        TP_RETURN_IF_ERROR(g->m_ranks.back()->init());
    }
    return std::shared_ptr<NcclGroup>(g);
}

} // namespace tp
