// mpi_communicator.cpp — the MPI communicator (OpenMPI): one process per rank, host memory.
//
// 16-bit tensors are reduced through an fp32 copy (summed in fp32, rounded once), as the local
// communicator does; everything else moves as bytes. MPI counts are ints: a collective of more than
// INT_MAX elements or bytes is refused rather than truncated.
#include "tp/runtime/communicator.h"

#include <fmt/format.h>
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <numeric>
#include <thread>

namespace tp {

namespace {

class MpiCommunicator final : public Communicator
{
public:
    explicit MpiCommunicator(std::chrono::milliseconds timeout)
        : m_timeout(timeout)
    {
        MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &m_size);
    }
    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    std::string kind() const override { return "mpi"; }

    Status allReduce(const Tensor& in, const Tensor& out) override
    {
        TP_RETURN_IF_ERROR(check("all_reduce", in));
        TP_RETURN_IF_ERROR(check("all_reduce", out));
        if (out.numel() != in.numel() || out.dtype != in.dtype)
            return invalidArgument(fmt::format("all_reduce: rank {}: {} elements in, {} out", m_rank, in.numel(), out.numel()));
        int n = 0;
        TP_RETURN_IF_ERROR(count("all_reduce", in.numel(), n));
        MPI_Request req;
        if (in.dtype == DType::F32) {
            MPI_Iallreduce(in.data == out.data ? MPI_IN_PLACE : in.data, out.data, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
            return wait(req, "all_reduce");
        }
        widen(in, 0, in.numel());
        MPI_Iallreduce(MPI_IN_PLACE, m_wide.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        TP_RETURN_IF_ERROR(wait(req, "all_reduce"));
        fromFloat(m_wide.data(), out.dtype, out.data, out.numel());
        return {};
    }
    Status allGather(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts) override
    {
        TP_RETURN_IF_ERROR(check("all_gather", in));
        TP_RETURN_IF_ERROR(check("all_gather", out));
        const auto off = pieceOffsets(counts);
        if (static_cast<int>(counts.size()) != m_size || counts[static_cast<std::size_t>(m_rank)] != in.numel()
            || off.back() != out.numel() || in.dtype != out.dtype)
            return invalidArgument(fmt::format("all_gather: rank {}: counts do not match the buffers", m_rank));
        std::vector<int> bytes, displs;
        TP_RETURN_IF_ERROR(byteCounts("all_gather", counts, in.elementBytes(), bytes, displs));
        const bool inPlace = static_cast<const char*>(in.data) == out.as<char>() + displs[static_cast<std::size_t>(m_rank)];
        MPI_Request req;
        MPI_Iallgatherv(inPlace ? MPI_IN_PLACE : in.data, bytes[static_cast<std::size_t>(m_rank)], MPI_BYTE, out.data,
                        bytes.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD, &req);
        return wait(req, "all_gather");
    }
    Status reduceScatter(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts) override
    {
        TP_RETURN_IF_ERROR(check("reduce_scatter", in));
        TP_RETURN_IF_ERROR(check("reduce_scatter", out));
        const auto off = pieceOffsets(counts);
        if (static_cast<int>(counts.size()) != m_size || off.back() != in.numel()
            || counts[static_cast<std::size_t>(m_rank)] != out.numel() || in.dtype != out.dtype)
            return invalidArgument(fmt::format("reduce_scatter: rank {}: counts do not match the buffers", m_rank));
        std::vector<int> c;
        for (const auto x : counts) {
            int v = 0;
            TP_RETURN_IF_ERROR(count("reduce_scatter", x, v));
            c.push_back(v);
        }
        MPI_Request req;
        if (in.dtype == DType::F32) {
            MPI_Ireduce_scatter(in.data, out.data, c.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
            return wait(req, "reduce_scatter");
        }
        widen(in, 0, in.numel());
        m_wideOut.resize(static_cast<std::size_t>(std::max<std::int64_t>(out.numel(), 1)));
        MPI_Ireduce_scatter(m_wide.data(), m_wideOut.data(), c.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        TP_RETURN_IF_ERROR(wait(req, "reduce_scatter"));
        fromFloat(m_wideOut.data(), out.dtype, out.data, out.numel());
        return {};
    }
    Status broadcast(const Tensor& data, int root) override
    {
        TP_RETURN_IF_ERROR(check("broadcast", data));
        if (root < 0 || root >= m_size)
            return invalidArgument(fmt::format("broadcast: root {} outside 0..{}", root, m_size - 1));
        int n = 0;
        TP_RETURN_IF_ERROR(count("broadcast", data.bytes(), n));
        MPI_Request req;
        MPI_Ibcast(data.data, n, MPI_BYTE, root, MPI_COMM_WORLD, &req);
        return wait(req, "broadcast");
    }
    Status allToAll(const Tensor& in, std::span<const std::int64_t> sendCounts, const Tensor& out,
                    std::span<const std::int64_t> recvCounts) override
    {
        TP_RETURN_IF_ERROR(check("all_to_all", in, true));
        TP_RETURN_IF_ERROR(check("all_to_all", out, true));
        if (static_cast<int>(sendCounts.size()) != m_size || static_cast<int>(recvCounts.size()) != m_size
            || pieceOffsets(sendCounts).back() != in.numel() || pieceOffsets(recvCounts).back() != out.numel()
            || in.dtype != out.dtype)
            return invalidArgument(fmt::format("all_to_all: rank {}: counts do not match the buffers", m_rank));
        std::vector<int> sc, sd, rc, rd;
        TP_RETURN_IF_ERROR(byteCounts("all_to_all", sendCounts, in.elementBytes(), sc, sd));
        TP_RETURN_IF_ERROR(byteCounts("all_to_all", recvCounts, in.elementBytes(), rc, rd));
        MPI_Request req;
        MPI_Ialltoallv(in.data, sc.data(), sd.data(), MPI_BYTE, out.data, rc.data(), rd.data(), MPI_BYTE, MPI_COMM_WORLD, &req);
        return wait(req, "all_to_all");
    }
    Status synchronize() override { return {}; }

    Status exchange(std::span<const std::int64_t> mine, std::vector<std::int64_t>& all, std::vector<std::int64_t>& counts) override
    {
        std::int64_t n = static_cast<std::int64_t>(mine.size());
        counts.assign(static_cast<std::size_t>(m_size), 0);
        MPI_Request req;
        MPI_Iallgather(&n, 1, MPI_INT64_T, counts.data(), 1, MPI_INT64_T, MPI_COMM_WORLD, &req);
        TP_RETURN_IF_ERROR(wait(req, "exchange"));
        std::vector<int> c, d;
        TP_RETURN_IF_ERROR(byteCounts("exchange", counts, 1, c, d)); // counts in elements of MPI_INT64_T
        all.assign(static_cast<std::size_t>(std::accumulate(counts.begin(), counts.end(), std::int64_t(0))), 0);
        MPI_Iallgatherv(mine.data(), static_cast<int>(n), MPI_INT64_T, all.data(), c.data(), d.data(), MPI_INT64_T,
                        MPI_COMM_WORLD, &req);
        return wait(req, "exchange");
    }
    Status barrier() override
    {
        MPI_Request req;
        MPI_Ibarrier(MPI_COMM_WORLD, &req);
        return wait(req, "barrier");
    }
    void abort(const std::string& why) override
    {
        if (m_why.empty())
            m_why = why;
    }
    bool aborted() const override { return !m_why.empty(); }

private:
    // `ints`: I64 too (an all-to-all moves them: an expert dispatch's counts).
    Status check(const char* what, const Tensor& t, bool ints = false) const
    {
        if (t.device != DeviceKind::Cpu || !t.isContiguous() || !(isStorageDtype(t.dtype) || (ints && t.dtype == DType::I64)))
            return invalidArgument(fmt::format("{}: rank {}: the MPI communicator moves contiguous host tensors", what, m_rank));
        return {};
    }
    Status count(const char* what, std::int64_t n, int& out) const
    {
        if (n < 0 || n > INT_MAX)
            return invalidArgument(fmt::format("{}: rank {}: {} exceeds what one MPI call can move ({})", what, m_rank, n, INT_MAX));
        out = static_cast<int>(n);
        return {};
    }
    Status byteCounts(const char* what, std::span<const std::int64_t> counts, std::int64_t elementBytes,
                      std::vector<int>& bytes, std::vector<int>& displs) const
    {
        std::int64_t at = 0;
        for (const auto c : counts) {
            int b = 0, d = 0;
            TP_RETURN_IF_ERROR(count(what, c * elementBytes, b));
            TP_RETURN_IF_ERROR(count(what, at, d));
            bytes.push_back(b);
            displs.push_back(d);
            at += c * elementBytes;
        }
        return {};
    }
    void widen(const Tensor& t, std::int64_t from, std::int64_t n)
    {
        m_wide.resize(static_cast<std::size_t>(std::max<std::int64_t>(n, 1)));
        toFloat(t.as<char>() + from * t.elementBytes(), t.dtype, m_wide.data(), n);
    }

    Status wait(MPI_Request& req, const char* what)
    {
        if (!m_why.empty())
            return Status(StatusCode::Cancelled, fmt::format("rank {}: {} abandoned: {}", m_rank, what, m_why));
        const auto deadline = std::chrono::steady_clock::now() + m_timeout;
        for (int spins = 0;; ++spins) {
            int done = 0;
            MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            if (done)
                return {};
            if (std::chrono::steady_clock::now() > deadline)
                return Status(StatusCode::DeadlineExceeded,
                              fmt::format("rank {} waited {} ms in {} for the other ranks (watchdog)", m_rank,
                                          m_timeout.count(), what));
            if (spins > 1000)
                std::this_thread::yield();
        }
    }

    std::chrono::milliseconds m_timeout;
    int m_rank = 0, m_size = 1;
    std::string m_why;
    std::vector<float> m_wide, m_wideOut; // fp32 copies of 16-bit tensors, reused
};

} // namespace

std::unique_ptr<Communicator> makeMpiCommunicator(std::chrono::milliseconds timeout)
{
    return std::make_unique<MpiCommunicator>(timeout);
}

bool mpiInit(int* argc, char*** argv)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    }
    return true;
}

void mpiFinalize()
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Finalize();
}

void mpiAbortJob(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

int mpiLocalRank()
{
    for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
        if (const char* v = std::getenv(var))
            return std::atoi(v);
    return 0;
}

bool haveMpi() { return true; }

} // namespace tp
