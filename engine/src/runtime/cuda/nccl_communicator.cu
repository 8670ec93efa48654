// nccl_communicator.cu — NCCL collectives on device tensors, enqueued on each rank's communication
// stream. Two ways to make the ranks: threads of this process with one GPU each (ncclCommInitRank
// for every rank inside one group call), or one process per GPU under mpirun (rank 0's unique id
// broadcast through the MPI communicator's host exchange).
//
// NCCL's own all-gather and reduce-scatter need equal counts; uneven pieces are grouped rooted
// collectives (a broadcast or a reduce per piece) and all-to-all is grouped sends and receives.
// Nothing here waits for the device except synchronize(), which polls the stream and NCCL's
// asynchronous error under the watchdog. A collective past the watchdog, or an abort from any rank,
// marks the group aborted: every rank's next call or poll aborts its own communicator
// (ncclCommAbort), which also frees a kernel stuck waiting for a partner that never came.
#include "cuda_check.h"
#include "tp/runtime/backend.h"
#include "tp/runtime/communicator.h"

#include <nccl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>

namespace tp {

namespace {

using cuda::cat;

Status ncclStatus(ncclResult_t r, const char* call, const char* file, int line)
{
    if (r == ncclSuccess)
        return {};
    return Status(StatusCode::Internal, cat(call, " failed at ", file, ":", line, ": ", ncclGetErrorString(r)));
}
#define TP_NCCL(call) TP_RETURN_IF_ERROR(ncclStatus((call), #call, __FILE__, __LINE__))

Result<ncclDataType_t> ncclType(DType t)
{
    switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I64: return ncclInt64; // moved, not reduced: an expert dispatch's counts
    default: return invalidArgument(cat("NCCL: no collectives on ", dtypeName(t), " tensors"));
    }
}

// What the ranks of one group share: the abort, and why.
struct AbortState
{
    std::atomic<bool> aborted{false};
    std::mutex mutex;
    std::string why;

    void set(const std::string& w)
    {
        std::lock_guard lock(mutex);
        if (!aborted.exchange(true))
            why = w;
    }
    std::string reason()
    {
        std::lock_guard lock(mutex);
        return why;
    }
};

class NcclRank final : public Communicator
{
public:
    // `host` carries exchange() and barrier(); `abort` is shared by the ranks of this process.
    NcclRank(ncclComm_t comm, int rank, int size, Backend& backend, Communicator& host, std::shared_ptr<AbortState> abort,
             std::chrono::milliseconds timeout)
        : m_comm(comm)
        , m_rank(rank)
        , m_size(size)
        , m_device(backend.ordinal())
        , m_stream(static_cast<cudaStream_t>(backend.nativeStream(Stream::Comm)))
        , m_host(host)
        , m_abort(std::move(abort))
        , m_timeout(timeout)
    {
    }
    ~NcclRank() override
    {
        cudaSetDevice(m_device);
        if (m_comm)
            m_abort->aborted ? ncclCommAbort(m_comm) : ncclCommDestroy(m_comm);
    }
    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    std::string kind() const override { return "nccl"; }

    Status init()
    {
        TP_RETURN_IF_ERROR(cuda::useDevice(m_device));
        for (auto& e : m_pending)
            TP_CUDA(cudaEventCreateWithFlags(e.event.out(), cudaEventDisableTiming));
        return {};
    }

    Status allReduce(const Tensor& in, const Tensor& out) override
    {
        TP_RETURN_IF_ERROR(begin("all_reduce", {&in, &out}));
        if (in.numel() != out.numel() || in.dtype != out.dtype)
            return invalidArgument(cat("all_reduce: rank ", m_rank, ": ", in.numel(), " elements in, ", out.numel(), " out"));
        TP_ASSIGN_OR_RETURN(const ncclDataType_t t, ncclType(in.dtype));
        TP_NCCL(ncclAllReduce(in.data, out.data, std::size_t(in.numel()), t, ncclSum, m_comm, m_stream));
        return enqueued("all_reduce");
    }

    Status allGather(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts) override
    {
        TP_RETURN_IF_ERROR(begin("all_gather", {&in, &out}));
        const auto off = pieceOffsets(counts);
        if (int(counts.size()) != m_size || counts[std::size_t(m_rank)] != in.numel() || off.back() != out.numel()
            || in.dtype != out.dtype)
            return invalidArgument(cat("all_gather: rank ", m_rank, ": counts do not match the buffers"));
        TP_ASSIGN_OR_RETURN(const ncclDataType_t t, ncclType(in.dtype));
        const std::int64_t eb = in.elementBytes();
        if (std::all_of(counts.begin(), counts.end(), [&](std::int64_t c) { return c == counts[0]; })) {
            TP_NCCL(ncclAllGather(in.data, out.data, std::size_t(counts[0]), t, m_comm, m_stream));
            return enqueued("all_gather");
        }
        // Uneven: every rank broadcasts its piece into its place.
        TP_NCCL(ncclGroupStart());
        for (int p = 0; p < m_size; ++p) {
            char* dst = out.as<char>() + off[std::size_t(p)] * eb;
            const void* src = p == m_rank ? in.data : dst;
            if (counts[std::size_t(p)] > 0)
                TP_NCCL(ncclBroadcast(src, dst, std::size_t(counts[std::size_t(p)]), t, p, m_comm, m_stream));
        }
        TP_NCCL(ncclGroupEnd());
        return enqueued("all_gather");
    }

    Status reduceScatter(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts) override
    {
        TP_RETURN_IF_ERROR(begin("reduce_scatter", {&in, &out}));
        const auto off = pieceOffsets(counts);
        if (int(counts.size()) != m_size || off.back() != in.numel() || counts[std::size_t(m_rank)] != out.numel()
            || in.dtype != out.dtype)
            return invalidArgument(cat("reduce_scatter: rank ", m_rank, ": counts do not match the buffers"));
        TP_ASSIGN_OR_RETURN(const ncclDataType_t t, ncclType(in.dtype));
        if (std::all_of(counts.begin(), counts.end(), [&](std::int64_t c) { return c == counts[0]; })) {
            TP_NCCL(ncclReduceScatter(in.data, out.data, std::size_t(counts[0]), t, ncclSum, m_comm, m_stream));
            return enqueued("reduce_scatter");
        }
        // Uneven: piece p is reduced onto rank p (recvbuff is only written on the root).
        TP_NCCL(ncclGroupStart());
        for (int p = 0; p < m_size; ++p)
            if (counts[std::size_t(p)] > 0)
                TP_NCCL(ncclReduce(in.as<char>() + off[std::size_t(p)] * in.elementBytes(), out.data,
                                   std::size_t(counts[std::size_t(p)]), t, ncclSum, p, m_comm, m_stream));
        TP_NCCL(ncclGroupEnd());
        return enqueued("reduce_scatter");
    }

    Status broadcast(const Tensor& data, int root) override
    {
        TP_RETURN_IF_ERROR(begin("broadcast", {&data}));
        if (root < 0 || root >= m_size)
            return invalidArgument(cat("broadcast: root ", root, " outside 0..", m_size - 1));
        TP_ASSIGN_OR_RETURN(const ncclDataType_t t, ncclType(data.dtype));
        TP_NCCL(ncclBroadcast(data.data, data.data, std::size_t(data.numel()), t, root, m_comm, m_stream));
        return enqueued("broadcast");
    }

    Status allToAll(const Tensor& in, std::span<const std::int64_t> sendCounts, const Tensor& out,
                    std::span<const std::int64_t> recvCounts) override
    {
        TP_RETURN_IF_ERROR(begin("all_to_all", {&in, &out}));
        const auto so = pieceOffsets(sendCounts), ro = pieceOffsets(recvCounts);
        if (int(sendCounts.size()) != m_size || int(recvCounts.size()) != m_size || so.back() != in.numel()
            || ro.back() != out.numel() || in.dtype != out.dtype)
            return invalidArgument(cat("all_to_all: rank ", m_rank, ": counts do not match the buffers"));
        TP_ASSIGN_OR_RETURN(const ncclDataType_t t, ncclType(in.dtype));
        const std::int64_t eb = in.elementBytes();
        TP_NCCL(ncclGroupStart());
        for (int p = 0; p < m_size; ++p) {
            if (sendCounts[std::size_t(p)] > 0)
                TP_NCCL(ncclSend(in.as<char>() + so[std::size_t(p)] * eb, std::size_t(sendCounts[std::size_t(p)]), t, p, m_comm, m_stream));
            if (recvCounts[std::size_t(p)] > 0)
                TP_NCCL(ncclRecv(out.as<char>() + ro[std::size_t(p)] * eb, std::size_t(recvCounts[std::size_t(p)]), t, p, m_comm, m_stream));
        }
        TP_NCCL(ncclGroupEnd());
        return enqueued("all_to_all");
    }

    Status synchronize() override
    {
        TP_RETURN_IF_ERROR(cuda::useDevice(m_device));
        const auto deadline = std::chrono::steady_clock::now() + m_timeout;
        for (int spins = 0;; ++spins) {
            if (m_abort->aborted)
                return abandoned("a collective");
            const cudaError_t q = cudaStreamQuery(m_stream);
            if (q == cudaSuccess)
                return {};
            if (q != cudaErrorNotReady)
                return cuda::cudaStatus(q, "cudaStreamQuery", __FILE__, __LINE__);
            ncclResult_t async = ncclSuccess;
            TP_NCCL(ncclCommGetAsyncError(m_comm, &async));
            if (async != ncclSuccess) {
                const std::string why = cat("rank ", m_rank, ": NCCL error: ", ncclGetErrorString(async));
                abortGroup(why);
                return Status(StatusCode::Internal, why);
            }
            if (std::chrono::steady_clock::now() > deadline) {
                const std::string why = cat("rank ", m_rank, " waited ", m_timeout.count(), " ms for ", stuck(),
                                            " to finish (watchdog); every rank's NCCL communicator was aborted");
                abortGroup(why);
                return Status(StatusCode::DeadlineExceeded, why);
            }
            if (spins > 1000)
                std::this_thread::yield();
        }
    }

    Status exchange(std::span<const std::int64_t> mine, std::vector<std::int64_t>& all, std::vector<std::int64_t>& counts) override
    {
        return m_host.exchange(mine, all, counts);
    }
    Status barrier() override
    {
        if (m_abort->aborted)
            return abandoned("barrier");
        return m_host.barrier();
    }
    void abort(const std::string& why) override
    {
        m_abort->set(why);
        m_host.abort(why);
    }
    bool aborted() const override { return m_abort->aborted || m_host.aborted(); }

private:
    // The last collectives enqueued, each with an event recorded after it and what it was for.
    struct Pending
    {
        cuda::EventHandle event;
        std::string what;
    };

    Status enqueued(const char* what)
    {
        Pending& p = m_pending[m_next++ % m_pending.size()];
        p.what = m_label.empty() ? std::string(what) : m_label;
        TP_CUDA(cudaEventRecord(p.event.get(), m_stream));
        return {};
    }
    // The oldest enqueued collective that has not finished (the one the stream waits in).
    std::string stuck()
    {
        const std::size_t n = m_pending.size(), first = m_next > n ? m_next - n : 0;
        for (std::size_t i = first; i < m_next; ++i)
            if (cudaEventQuery(m_pending[i % n].event.get()) == cudaErrorNotReady)
                return cat("collective ", i + 1, " (", m_pending[i % n].what, ")");
        return "its collectives";
    }

    // Every call: the group is alive, the tensors are contiguous device tensors of this rank, the
    // device is current. An abort seen here aborts this rank's communicator.
    Status begin(const char* what, std::initializer_list<const Tensor*> tensors)
    {
        if (m_abort->aborted)
            return abandoned(what);
        for (const Tensor* t : tensors)
            if (t->device != DeviceKind::Cuda || !t->isContiguous())
                return invalidArgument(cat(what, ": rank ", m_rank, ": NCCL moves contiguous device tensors"));
        return cuda::useDevice(m_device);
    }
    void abortGroup(const std::string& why)
    {
        m_abort->set(why);
        m_host.abort(why);
        abortMine();
    }
    void abortMine()
    {
        std::lock_guard lock(m_commMutex);
        if (m_comm) {
            ncclCommAbort(m_comm);
            m_comm = nullptr;
        }
    }
    Status abandoned(const char* what)
    {
        abortMine();
        return Status(StatusCode::Cancelled, cat("rank ", m_rank, ": ", what, " abandoned: ", m_abort->reason()));
    }

    ncclComm_t m_comm;
    std::mutex m_commMutex;
    const int m_rank, m_size, m_device;
    const cudaStream_t m_stream;
    Communicator& m_host;
    std::shared_ptr<AbortState> m_abort;
    const std::chrono::milliseconds m_timeout;
    std::array<Pending, 64> m_pending;
    std::size_t m_next = 0;
};

class NcclThreads final : public CommGroup
{
public:
    Communicator& rank(int r) override { return *m_ranks[std::size_t(r)]; }
    int size() const override { return int(m_ranks.size()); }

    std::shared_ptr<CommGroup> host;   // barrier and exchange between the rank threads
    std::vector<std::unique_ptr<NcclRank>> m_ranks;
};

} // namespace

bool haveNccl() { return true; }

Result<std::shared_ptr<CommGroup>> makeNcclGroup(const std::vector<Backend*>& backends, std::chrono::milliseconds timeout)
{
    const int n = int(backends.size());
    for (int r = 0; r < n; ++r) {
        if (backends[std::size_t(r)]->device() != DeviceKind::Cuda)
            return failedPrecondition(cat("NCCL needs a CUDA backend for every rank; rank ", r, " is on ",
                                          backends[std::size_t(r)]->name()));
        for (int p = 0; p < r; ++p)
            if (backends[std::size_t(p)]->ordinal() == backends[std::size_t(r)]->ordinal())
                return failedPrecondition(cat("NCCL needs one GPU per rank; ranks ", p, " and ", r, " are both on ",
                                              backends[std::size_t(r)]->name(), " (emulate that tp size on one GPU instead)"));
    }
    ncclUniqueId id;
    TP_NCCL(ncclGetUniqueId(&id));
    std::vector<ncclComm_t> comms(std::size_t(n), nullptr);
    TP_NCCL(ncclGroupStart());
    for (int r = 0; r < n; ++r) {
        TP_RETURN_IF_ERROR(cuda::useDevice(backends[std::size_t(r)]->ordinal()));
        TP_NCCL(ncclCommInitRank(&comms[std::size_t(r)], n, id, r));
    }
    TP_NCCL(ncclGroupEnd());
    auto g = std::make_shared<NcclThreads>();
    g->host = makeLocalGroup(n, timeout);
    auto abort = std::make_shared<AbortState>();
    for (int r = 0; r < n; ++r) {
        g->m_ranks.push_back(std::make_unique<NcclRank>(comms[std::size_t(r)], r, n, *backends[std::size_t(r)], g->host->rank(r),
                                                        abort, timeout));
        TP_RETURN_IF_ERROR(g->m_ranks.back()->init());
    }
    return std::shared_ptr<CommGroup>(g);
}

Result<std::unique_ptr<Communicator>> makeNcclCommunicator(Communicator& bootstrap, Backend& backend,
                                                           std::chrono::milliseconds timeout)
{
    if (backend.device() != DeviceKind::Cuda)
        return failedPrecondition(cat("NCCL needs a CUDA backend; rank ", bootstrap.rank(), " is on ", backend.name()));
    // Rank 0's unique id to every process, as integers through the host exchange.
    constexpr std::size_t kWords = (sizeof(ncclUniqueId) + 7) / 8;
    std::vector<std::int64_t> mine, all, counts;
    if (bootstrap.rank() == 0) {
        ncclUniqueId id;
        TP_NCCL(ncclGetUniqueId(&id));
        mine.assign(kWords, 0);
        std::memcpy(mine.data(), &id, sizeof id);
    }
    TP_RETURN_IF_ERROR(bootstrap.exchange(mine, all, counts));
    if (counts.empty() || counts[0] != std::int64_t(kWords))
        return Status(StatusCode::Internal, "NCCL bootstrap: rank 0 did not send its unique id");
    ncclUniqueId id;
    std::memcpy(&id, all.data(), sizeof id);
    TP_RETURN_IF_ERROR(cuda::useDevice(backend.ordinal()));
    ncclComm_t comm = nullptr;
    TP_NCCL(ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()));
    auto rank = std::make_unique<NcclRank>(comm, bootstrap.rank(), bootstrap.size(), backend, bootstrap,
                                           std::make_shared<AbortState>(), timeout);
    TP_RETURN_IF_ERROR(rank->init());
    return std::unique_ptr<Communicator>(std::move(rank));
}

} // namespace tp
