// local_group.cpp — the in-process communicator: ranks are threads, buffers are shared.
//
// Every collective is: publish my buffer, barrier, read the others' (each rank works on its own
// chunk, so the traffic per rank matches a ring: 2(T-1)/T of the data for an all-reduce), barrier.
// Barriers wait at most the group's timeout; the first failure aborts the group for every rank.
#include "tp/runtime/communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>

namespace tp {

namespace {

class Group;

class LocalCommunicator final : public Communicator
{
public:
    LocalCommunicator(Group& g, int r)
        : m_g(g)
        , m_rank(r)
    {
    }
    int rank() const override { return m_rank; }
    int size() const override;
    std::string kind() const override { return "local"; }
    Status allReduce(std::span<float> data) override;
    Status allGather(std::span<const float> in, std::span<float> out) override;
    Status reduceScatter(std::span<const float> in, std::span<float> out, std::span<const std::int64_t> counts) override;
    Status broadcast(std::span<float> data, int root) override;
    Status allToAll(std::span<const float> in, std::span<const std::int64_t> sendCounts, std::vector<float>& out) override;
    Status barrier() override;
    void abort(const std::string& why) override;
    bool aborted() const override;

private:
    Group& m_g;
    int m_rank;
    std::vector<float> m_tmp;
};

class Group final : public LocalGroup
{
public:
    Group(int n, std::chrono::milliseconds timeout)
        : m_n(n)
        , m_timeout(timeout)
        , m_ptr(static_cast<std::size_t>(n), nullptr)
        , m_count(static_cast<std::size_t>(n), 0)
        , m_counts(static_cast<std::size_t>(n))
    {
        for (int r = 0; r < n; ++r)
            m_ranks.push_back(std::make_unique<LocalCommunicator>(*this, r));
    }
    Communicator& rank(int r) override { return *m_ranks[static_cast<std::size_t>(r)]; }
    int size() const override { return m_n; }

    Status wait(int rank, const char* what)
    {
        if (m_aborted.load(std::memory_order_acquire))
            return abortedStatus(rank, what);
        const std::uint64_t gen = m_generation.load(std::memory_order_acquire);
        if (m_arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == m_n) {
            m_arrived.store(0, std::memory_order_relaxed); // before the release: the next barrier starts clean
            {
                std::lock_guard lock(m_mutex);
                m_generation.store(gen + 1, std::memory_order_release);
            }
            m_cv.notify_all();
            return {};
        }
        // Partners are usually microseconds away: poll briefly before sleeping on the condition.
        const auto spinUntil = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
        for (int i = 0;; ++i) {
            if (m_generation.load(std::memory_order_acquire) != gen)
                return m_aborted.load(std::memory_order_acquire) ? abortedStatus(rank, what) : Status();
            if (m_aborted.load(std::memory_order_acquire))
                return abortedStatus(rank, what);
            if ((i & 63) == 63 && std::chrono::steady_clock::now() > spinUntil)
                break;
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
        }
        std::unique_lock lock(m_mutex);
        if (!m_cv.wait_for(lock, m_timeout, [&] {
                return m_generation.load(std::memory_order_acquire) != gen || m_aborted.load(std::memory_order_acquire);
            })) {
            m_why = fmt::format("rank {} waited {} ms in {} for the other ranks (watchdog)", rank, m_timeout.count(), what);
            m_aborted.store(true, std::memory_order_release);
            m_cv.notify_all();
            return Status(StatusCode::DeadlineExceeded, m_why);
        }
        if (m_aborted.load(std::memory_order_acquire))
            return abortedStatus(rank, what);
        return {};
    }

    void abort(const std::string& why)
    {
        {
            std::lock_guard lock(m_mutex);
            if (!m_aborted.load(std::memory_order_acquire)) {
                m_why = why;
                m_aborted.store(true, std::memory_order_release);
            }
        }
        m_cv.notify_all();
    }

    bool isAborted() const { return m_aborted.load(std::memory_order_acquire); }

    Status abortedStatus(int rank, const char* what) const
    {
        return Status(StatusCode::Cancelled, fmt::format("rank {}: {} abandoned: {}", rank, what, m_why));
    }

    void publish(int r, const float* p, std::int64_t n)
    {
        m_ptr[static_cast<std::size_t>(r)] = p;
        m_count[static_cast<std::size_t>(r)] = n;
    }

    const int m_n;
    const std::chrono::milliseconds m_timeout;
    std::vector<const float*> m_ptr;
    std::vector<std::int64_t> m_count;
    std::vector<std::vector<std::int64_t>> m_counts;
    std::vector<std::unique_ptr<LocalCommunicator>> m_ranks;

private:
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::atomic<int> m_arrived{0};
    std::atomic<std::uint64_t> m_generation{0};
    std::atomic<bool> m_aborted{false};
    std::string m_why;
};

int LocalCommunicator::size() const { return m_g.m_n; }

void LocalCommunicator::abort(const std::string& why) { m_g.abort(why); }

bool LocalCommunicator::aborted() const { return m_g.isAborted(); }

Status LocalCommunicator::barrier() { return m_g.wait(m_rank, "barrier"); }

// Chunk [begin, end) of n elements owned by rank r.
std::pair<std::int64_t, std::int64_t> chunkOf(std::int64_t n, int size, int r)
{
    const std::int64_t c = (n + size - 1) / size;
    const std::int64_t b = std::min<std::int64_t>(n, r * c);
    return {b, std::min<std::int64_t>(n, b + c)};
}

Status LocalCommunicator::allReduce(std::span<float> data)
{
    const std::int64_t n = static_cast<std::int64_t>(data.size());
    m_g.publish(m_rank, data.data(), n);
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "all_reduce"));
    for (int p = 0; p < m_g.m_n; ++p)
        if (m_g.m_count[static_cast<std::size_t>(p)] != n)
            return invalidArgument(fmt::format("all_reduce: rank {} has {} elements, rank {} has {}", m_rank, n, p,
                                               m_g.m_count[static_cast<std::size_t>(p)]));
    // Reduce my chunk over every rank's buffer, then write it into every buffer.
    const auto [b, e] = chunkOf(n, m_g.m_n, m_rank);
    m_tmp.assign(static_cast<std::size_t>(e - b), 0.0f);
    for (int p = 0; p < m_g.m_n; ++p) {
        const float* src = m_g.m_ptr[static_cast<std::size_t>(p)] + b;
        for (std::int64_t i = 0; i < e - b; ++i)
            m_tmp[static_cast<std::size_t>(i)] += src[i];
    }
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "all_reduce"));
    for (int p = 0; p < m_g.m_n; ++p)
        std::memcpy(const_cast<float*>(m_g.m_ptr[static_cast<std::size_t>(p)]) + b, m_tmp.data(),
                    m_tmp.size() * sizeof(float));
    return m_g.wait(m_rank, "all_reduce");
}

Status LocalCommunicator::allGather(std::span<const float> in, std::span<float> out)
{
    m_g.publish(m_rank, in.data(), static_cast<std::int64_t>(in.size()));
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "all_gather"));
    std::int64_t total = 0;
    for (int p = 0; p < m_g.m_n; ++p)
        total += m_g.m_count[static_cast<std::size_t>(p)];
    if (total != static_cast<std::int64_t>(out.size())) {
        m_g.abort(fmt::format("all_gather: rank {} expects {} elements, the ranks send {}", m_rank, out.size(), total));
        return m_g.abortedStatus(m_rank, "all_gather");
    }
    std::int64_t off = 0;
    for (int p = 0; p < m_g.m_n; ++p) {
        const auto c = m_g.m_count[static_cast<std::size_t>(p)];
        if (out.data() + off != m_g.m_ptr[static_cast<std::size_t>(p)]) // in place: my piece is already there
            std::memcpy(out.data() + off, m_g.m_ptr[static_cast<std::size_t>(p)], static_cast<std::size_t>(c) * sizeof(float));
        off += c;
    }
    return m_g.wait(m_rank, "all_gather");
}

Status LocalCommunicator::reduceScatter(std::span<const float> in, std::span<float> out,
                                        std::span<const std::int64_t> counts)
{
    if (static_cast<int>(counts.size()) != m_g.m_n
        || std::accumulate(counts.begin(), counts.end(), std::int64_t(0)) != static_cast<std::int64_t>(in.size())
        || counts[static_cast<std::size_t>(m_rank)] != static_cast<std::int64_t>(out.size()))
        return invalidArgument(fmt::format("reduce_scatter: rank {}: counts do not match the buffers", m_rank));
    m_g.publish(m_rank, in.data(), static_cast<std::int64_t>(in.size()));
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "reduce_scatter"));
    const std::int64_t b = std::accumulate(counts.begin(), counts.begin() + m_rank, std::int64_t(0));
    std::fill(out.begin(), out.end(), 0.0f);
    for (int p = 0; p < m_g.m_n; ++p) {
        const float* src = m_g.m_ptr[static_cast<std::size_t>(p)] + b;
        for (std::size_t i = 0; i < out.size(); ++i)
            out[i] += src[i];
    }
    return m_g.wait(m_rank, "reduce_scatter");
}

Status LocalCommunicator::broadcast(std::span<float> data, int root)
{
    if (root < 0 || root >= m_g.m_n)
        return invalidArgument(fmt::format("broadcast: root {} outside 0..{}", root, m_g.m_n - 1));
    m_g.publish(m_rank, data.data(), static_cast<std::int64_t>(data.size()));
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "broadcast"));
    if (m_rank != root) {
        if (m_g.m_count[static_cast<std::size_t>(root)] != static_cast<std::int64_t>(data.size())) {
            m_g.abort(fmt::format("broadcast: rank {} expects {} elements, root sends {}", m_rank, data.size(),
                                  m_g.m_count[static_cast<std::size_t>(root)]));
            return m_g.abortedStatus(m_rank, "broadcast");
        }
        std::memcpy(data.data(), m_g.m_ptr[static_cast<std::size_t>(root)], data.size() * sizeof(float));
    }
    return m_g.wait(m_rank, "broadcast");
}

Status LocalCommunicator::allToAll(std::span<const float> in, std::span<const std::int64_t> sendCounts,
                                   std::vector<float>& out)
{
    if (static_cast<int>(sendCounts.size()) != m_g.m_n
        || std::accumulate(sendCounts.begin(), sendCounts.end(), std::int64_t(0)) != static_cast<std::int64_t>(in.size()))
        return invalidArgument(fmt::format("all_to_all: rank {}: send counts do not match the buffer", m_rank));
    m_g.publish(m_rank, in.data(), static_cast<std::int64_t>(in.size()));
    m_g.m_counts[static_cast<std::size_t>(m_rank)].assign(sendCounts.begin(), sendCounts.end());
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "all_to_all"));
    out.clear();
    for (int p = 0; p < m_g.m_n; ++p) {
        const auto& c = m_g.m_counts[static_cast<std::size_t>(p)];
        const std::int64_t off = std::accumulate(c.begin(), c.begin() + m_rank, std::int64_t(0));
        const float* src = m_g.m_ptr[static_cast<std::size_t>(p)] + off;
        out.insert(out.end(), src, src + c[static_cast<std::size_t>(m_rank)]);
    }
    return m_g.wait(m_rank, "all_to_all");
}

} // namespace

std::shared_ptr<LocalGroup> LocalGroup::create(int size, std::chrono::milliseconds timeout)
{
    return std::make_shared<Group>(std::max(size, 1), timeout);
}

} // namespace tp
