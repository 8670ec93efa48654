// mpi_communicator.cpp — the MPI communicator (OpenMPI): one process per rank.
#include "tp/runtime/communicator.h"

#include <fmt/format.h>
#include <mpi.h>

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

    Status allReduce(std::span<float> data) override
    {
        MPI_Request req;
        MPI_Iallreduce(MPI_IN_PLACE, data.data(), count(data.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        return wait(req, "all_reduce");
    }
    Status allGather(std::span<const float> in, std::span<float> out) override
    {
        // Counts first (ranks may differ), then the data.
        std::vector<int> counts(static_cast<std::size_t>(m_size)), displs(counts.size());
        int mine = count(in.size());
        MPI_Request req;
        MPI_Iallgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD, &req);
        TP_RETURN_IF_ERROR(wait(req, "all_gather"));
        std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
        if (displs.back() + counts.back() != count(out.size()))
            return invalidArgument(fmt::format("all_gather: rank {} expects {} elements, the ranks send {}", m_rank,
                                               out.size(), displs.back() + counts.back()));
        MPI_Iallgatherv(in.data(), mine, MPI_FLOAT, out.data(), counts.data(), displs.data(), MPI_FLOAT, MPI_COMM_WORLD,
                        &req);
        return wait(req, "all_gather");
    }
    Status reduceScatter(std::span<const float> in, std::span<float> out, std::span<const std::int64_t> counts) override
    {
        std::vector<int> c;
        for (auto x : counts)
            c.push_back(static_cast<int>(x));
        if (static_cast<int>(c.size()) != m_size || c[static_cast<std::size_t>(m_rank)] != count(out.size()))
            return invalidArgument(fmt::format("reduce_scatter: rank {}: counts do not match the buffers", m_rank));
        MPI_Request req;
        MPI_Ireduce_scatter(in.data(), out.data(), c.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        return wait(req, "reduce_scatter");
    }
    Status broadcast(std::span<float> data, int root) override
    {
        MPI_Request req;
        MPI_Ibcast(data.data(), count(data.size()), MPI_FLOAT, root, MPI_COMM_WORLD, &req);
        return wait(req, "broadcast");
    }
    Status allToAll(std::span<const float> in, std::span<const std::int64_t> sendCounts, std::vector<float>& out) override
    {
        std::vector<int> sc, rc(static_cast<std::size_t>(m_size)), sd(static_cast<std::size_t>(m_size)), rd(rc.size());
        for (auto x : sendCounts)
            sc.push_back(static_cast<int>(x));
        MPI_Request req;
        MPI_Ialltoall(sc.data(), 1, MPI_INT, rc.data(), 1, MPI_INT, MPI_COMM_WORLD, &req);
        TP_RETURN_IF_ERROR(wait(req, "all_to_all"));
        std::exclusive_scan(sc.begin(), sc.end(), sd.begin(), 0);
        std::exclusive_scan(rc.begin(), rc.end(), rd.begin(), 0);
        out.resize(static_cast<std::size_t>(rd.back() + rc.back()));
        MPI_Ialltoallv(in.data(), sc.data(), sd.data(), MPI_FLOAT, out.data(), rc.data(), rd.data(), MPI_FLOAT,
                       MPI_COMM_WORLD, &req);
        return wait(req, "all_to_all");
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
    static int count(std::size_t n) { return static_cast<int>(n); }

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

bool haveMpi() { return true; }

} // namespace tp
