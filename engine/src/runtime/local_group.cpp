// local_group.cpp — the in-process communicator on host memory: ranks are threads, buffers shared.
//
// Every collective is: publish my buffer, barrier, read the others' (each rank reduces its own part
// of every rank's buffer, so the traffic per rank matches a ring: 2(T-1)/T of the data for an
// all-reduce), barrier. 16-bit values are summed in fp32 and rounded once. Barriers wait at most the
// group's timeout; the first failure aborts the group for every rank.
//
// All-reduce: rank r owns part r of the buffer (parts whole cache lines long) and, chunk by chunk
// (kChunk elements, an L1-sized fp32 accumulator), sums that chunk of every rank's input in rank
// order and writes the result into every rank's output: each element is computed once, by one
// rank, so every rank ends with the same bits. A rank only ever reads and writes the elements of
// its own part, so when outputs and inputs are either the same buffers or disjoint, no barrier is
// needed between reading and writing: two barriers per call (publish, done). Buffers that overlap
// otherwise fall back to summing the whole part first, with a barrier before anyone writes.
#include "tp/runtime/communicator.h"

#include "cpu/cpu_kernels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <span>

namespace tp {

namespace {

// Elements per chunk of a reduction: the fp32 accumulator (16 KiB) and the chunk of each input stay
// in L1/L2 while the chunk is summed and written out (the sum and the rounding are the CPU
// backend's vector kernels, cpu_kernels.h).
constexpr std::int64_t kChunk = 4096;

cpu::Storage storageOf(DType t) { return t == DType::F32 ? cpu::Storage::F32 : t == DType::BF16 ? cpu::Storage::BF16 : cpu::Storage::F16; }

// Whether writing element i of `dst` can only touch element i of `src` (the same buffer at the same
// element index) or nothing of it (disjoint), given that dst element i stands for src element
// `shift` + i.
bool writesOnlyOwnIndex(const void* dst, std::int64_t dstBytes, const void* src, std::int64_t srcBytes, std::int64_t shiftBytes)
{
    const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
    if (dstBytes <= 0 || srcBytes <= 0 || d + static_cast<std::uintptr_t>(dstBytes) <= s || s + static_cast<std::uintptr_t>(srcBytes) <= d)
        return true;
    return d == s + static_cast<std::uintptr_t>(shiftBytes);
}

} // namespace

Status Communicator::allGatherColumns(const Tensor&, std::span<const std::int64_t>)
{
    return Status(StatusCode::Unimplemented, "all_gather of column pieces: the " + kind() + " communicator gathers flat pieces");
}

std::vector<std::int64_t> pieceOffsets(std::span<const std::int64_t> counts)
{
    std::vector<std::int64_t> off(counts.size() + 1, 0);
    for (std::size_t i = 0; i < counts.size(); ++i)
        off[i + 1] = off[i] + counts[i];
    return off;
}

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
    Status allReduce(const Tensor& in, const Tensor& out) override;
    Status allGather(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts) override;
    bool gathersColumns() const override { return true; }
    Status allGatherColumns(const Tensor& out, std::span<const std::int64_t> offsets) override;
    Status reduceScatter(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts) override;
    Status broadcast(const Tensor& data, int root) override;
    Status allToAll(const Tensor& in, std::span<const std::int64_t> sendCounts, const Tensor& out,
                    std::span<const std::int64_t> recvCounts) override;
    Status synchronize() override { return {}; }
    Status exchange(std::span<const std::int64_t> mine, std::vector<std::int64_t>& all, std::vector<std::int64_t>& counts) override;
    Status barrier() override;
    void abort(const std::string& why) override;
    bool aborted() const override;

private:
    // `ints`: I64 too (an all-to-all moves them: an expert dispatch's counts).
    Status check(const char* what, const Tensor& t, bool ints = false) const;
    // m_sum[i] = Σ over ranks of rank p's buffer at element `from + i`, for n elements, in fp32;
    // then rounded into `out` unless it is null.
    void sumInto(DType t, std::int64_t from, std::int64_t n, void* out);
    // Chunk by chunk over [from, from + n) of every rank's published input: the sum, rounded once,
    // copied into each of `outs` at element `outFrom` + (i - from).
    void sumChunked(DType t, std::int64_t from, std::int64_t n, std::span<void* const> outs, std::int64_t outFrom);

    Group& m_g;
    int m_rank;
    std::vector<float> m_sum; // grows to the largest part once, then is reused (overlapping buffers)
    std::vector<float> m_acc = std::vector<float>(static_cast<std::size_t>(kChunk));
    std::vector<std::uint16_t> m_rounded = std::vector<std::uint16_t>(static_cast<std::size_t>(kChunk));
};

class Group final : public CommGroup
{
public:
    Group(int n, std::chrono::milliseconds timeout)
        : m_n(n)
        , m_timeout(timeout)
        , m_ptr(static_cast<std::size_t>(n), nullptr)
        , m_out(static_cast<std::size_t>(n), nullptr)
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
        m_reached[static_cast<std::size_t>(rank)].store(gen + 1, std::memory_order_relaxed); // for the watchdog's message
        if (m_arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == m_n) {
            m_arrived.store(0, std::memory_order_relaxed); // before the release: the next barrier starts clean
            {
                std::lock_guard lock(m_mutex);
                m_generation.store(gen + 1, std::memory_order_release);
            }
            m_cv.notify_all();
            return {};
        }
        // Partners are usually microseconds away: poll briefly before sleeping on the condition. How
        // long adapts per rank (as an adaptive mutex does): halved each time the poll ran out, grown
        // by an eighth each time the partners came while polling. Where the ranks' threads share
        // cores (an oversubscribed machine, a VM), polling only keeps the partner from running.
        int& spinUs = m_spinUs[static_cast<std::size_t>(rank)].us;
        const auto spinUntil = std::chrono::steady_clock::now() + std::chrono::microseconds(spinUs);
        for (int i = 0;; ++i) {
            if (m_generation.load(std::memory_order_acquire) != gen) {
                spinUs = std::min(kMaxSpinUs, spinUs + spinUs / 8 + 1);
                return m_aborted.load(std::memory_order_acquire) ? abortedStatus(rank, what) : Status();
            }
            if (m_aborted.load(std::memory_order_acquire))
                return abortedStatus(rank, what);
            if ((i & 63) == 63 && std::chrono::steady_clock::now() > spinUntil) {
                spinUs = std::max(kMinSpinUs, spinUs / 2);
                break;
            }
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
        }
        std::unique_lock lock(m_mutex);
        if (!m_cv.wait_for(lock, m_timeout, [&] {
                return m_generation.load(std::memory_order_acquire) != gen || m_aborted.load(std::memory_order_acquire);
            })) {
            std::vector<int> missing; // the ranks that never reached this barrier
            for (int p = 0; p < m_n; ++p)
                if (m_reached[static_cast<std::size_t>(p)].load(std::memory_order_relaxed) <= gen)
                    missing.push_back(p);
            m_why = fmt::format("rank {} waited {} ms in {} for rank{} {} (watchdog)", rank, m_timeout.count(), what,
                                missing.size() == 1 ? "" : "s", fmt::join(missing, ", "));
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

    // A failure every rank must see: the group is aborted with it.
    Status fail(int rank, const char* what, const std::string& why)
    {
        abort(fmt::format("{}: rank {}: {}", what, rank, why));
        return abortedStatus(rank, what);
    }

    void publish(int r, const void* p, std::int64_t n, DType t)
    {
        m_ptr[static_cast<std::size_t>(r)] = p;
        m_count[static_cast<std::size_t>(r)] = n;
        m_dtype[static_cast<std::size_t>(r)] = t;
    }

    const int m_n;
    const std::chrono::milliseconds m_timeout;
    std::vector<const void*> m_ptr;
    std::vector<void*> m_out;                      // all_reduce: where each rank wants its sum
    std::vector<std::int64_t> m_stride = std::vector<std::int64_t>(static_cast<std::size_t>(m_n), 0); // column gathers
    std::vector<std::int64_t> m_count;
    std::vector<DType> m_dtype = std::vector<DType>(static_cast<std::size_t>(m_n), DType::F32);
    std::vector<std::vector<std::int64_t>> m_counts;
    std::vector<std::unique_ptr<LocalCommunicator>> m_ranks;

private:
    static constexpr int kMinSpinUs = 2, kMaxSpinUs = 50;
    struct alignas(64) Spin // each rank's own, on a line of its own
    {
        int us = kMaxSpinUs;
    };
    std::vector<Spin> m_spinUs = std::vector<Spin>(static_cast<std::size_t>(m_n));
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::atomic<int> m_arrived{0};
    std::vector<std::atomic<std::uint64_t>> m_reached = std::vector<std::atomic<std::uint64_t>>(static_cast<std::size_t>(m_n));
    std::atomic<std::uint64_t> m_generation{0};
    std::atomic<bool> m_aborted{false};
    std::string m_why;
};

int LocalCommunicator::size() const { return m_g.m_n; }

void LocalCommunicator::abort(const std::string& why) { m_g.abort(why); }

bool LocalCommunicator::aborted() const { return m_g.isAborted(); }

Status LocalCommunicator::barrier() { return m_g.wait(m_rank, "barrier"); }

Status LocalCommunicator::check(const char* what, const Tensor& t, bool ints) const
{
    if (t.device != DeviceKind::Cpu || !t.isContiguous() || !(isStorageDtype(t.dtype) || (ints && t.dtype == DType::I64)))
        return invalidArgument(fmt::format("{}: rank {}: the local communicator moves contiguous host tensors of "
                                           "f32/bf16/f16, not [{}, {}] {} on {}",
                                           what, m_rank, t.rows, t.cols, dtypeName(t.dtype), deviceKindName(t.device)));
    return {};
}

void LocalCommunicator::sumInto(DType t, std::int64_t from, std::int64_t n, void* out)
{
    if (m_sum.size() < static_cast<std::size_t>(n))
        m_sum.resize(static_cast<std::size_t>(n));
    std::fill_n(m_sum.begin(), n, 0.0f);
    for (int p = 0; p < m_g.m_n; ++p) {
        const void* src = m_g.m_ptr[static_cast<std::size_t>(p)];
        if (t == DType::F32) {
            const float* s = static_cast<const float*>(src) + from;
            for (std::int64_t i = 0; i < n; ++i)
                m_sum[static_cast<std::size_t>(i)] += s[i];
        } else {
            const auto* s = static_cast<const std::uint16_t*>(src) + from;
            for (std::int64_t i = 0; i < n; ++i)
                m_sum[static_cast<std::size_t>(i)] += t == DType::BF16 ? bf16ToFloat(s[i]) : halfToFloat(s[i]);
        }
    }
    if (out)
        fromFloat(m_sum.data(), t, out, n);
}

void LocalCommunicator::sumChunked(DType t, std::int64_t from, std::int64_t n, std::span<void* const> outs, std::int64_t outFrom)
{
    const std::int64_t eb = dtypeBytes(t, 1);
    const void* const* src = m_g.m_ptr.data();
    for (std::int64_t c = 0; c < n; c += kChunk) {
        const std::int64_t k = std::min(kChunk, n - c);
        const cpu::Kernels& vk = cpu::kernels();
        vk.sumChunk(storageOf(t), src, m_g.m_n, from + c, k, m_acc.data());
        const void* result = m_acc.data();
        if (t != DType::F32) {
            vk.round16(storageOf(t), m_acc.data(), k, m_rounded.data());
            result = m_rounded.data();
        }
        for (void* o : outs)
            std::memcpy(static_cast<char*>(o) + (outFrom + c) * eb, result, static_cast<std::size_t>(k * eb));
    }
}

// Part [begin, end) of n elements owned by rank r: ceil(n / size) rounded up to whole 64-byte lines,
// so that no two ranks write the same cache line of an output (when it is line-aligned).
std::pair<std::int64_t, std::int64_t> chunkOf(std::int64_t n, int size, int r, std::int64_t elementBytes)
{
    const std::int64_t line = std::max<std::int64_t>(1, 64 / elementBytes);
    const std::int64_t c = ((n + size - 1) / size + line - 1) / line * line;
    const std::int64_t b = std::min<std::int64_t>(n, r * c);
    return {b, std::min<std::int64_t>(n, b + c)};
}

Status LocalCommunicator::allReduce(const Tensor& in, const Tensor& out)
{
    TP_RETURN_IF_ERROR(check("all_reduce", in));
    TP_RETURN_IF_ERROR(check("all_reduce", out));
    if (out.numel() != in.numel() || out.dtype != in.dtype)
        return invalidArgument(fmt::format("all_reduce: rank {}: {} elements in, {} out", m_rank, in.numel(), out.numel()));
    const std::int64_t n = in.numel(), eb = in.elementBytes();
    m_g.publish(m_rank, in.data, n, in.dtype);
    m_g.m_out[static_cast<std::size_t>(m_rank)] = out.data;
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "all_reduce"));
    for (int p = 0; p < m_g.m_n; ++p)
        if (m_g.m_count[static_cast<std::size_t>(p)] != n || m_g.m_dtype[static_cast<std::size_t>(p)] != in.dtype)
            return m_g.fail(m_rank, "all_reduce",
                            fmt::format("{} elements of {}, rank {} has {} of {}", n, dtypeName(in.dtype), p,
                                        m_g.m_count[static_cast<std::size_t>(p)], dtypeName(m_g.m_dtype[static_cast<std::size_t>(p)])));
    // Every rank decides from the same published pointers, so all take the same path (and barriers).
    bool ownIndexOnly = true;
    for (int q = 0; q < m_g.m_n && ownIndexOnly; ++q)
        for (int p = 0; p < m_g.m_n && ownIndexOnly; ++p)
            ownIndexOnly = writesOnlyOwnIndex(m_g.m_out[static_cast<std::size_t>(q)], n * eb, m_g.m_ptr[static_cast<std::size_t>(p)], n * eb, 0);
    const auto [b, e] = chunkOf(n, m_g.m_n, m_rank, eb);
    if (ownIndexOnly) {
        // Nobody else reads or writes my part: sum it chunk by chunk straight into every output.
        sumChunked(in.dtype, b, e - b, m_g.m_out, b);
        return m_g.wait(m_rank, "all_reduce");
    }
    // Outputs overlap inputs at other offsets: sum my whole part over every rank's input first (into
    // m_sum), and write it into every rank's output once everybody has read.
    sumInto(in.dtype, b, e - b, nullptr);
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "all_reduce"));
    for (int p = 0; p < m_g.m_n; ++p)
        fromFloat(m_sum.data(), in.dtype, static_cast<char*>(m_g.m_out[static_cast<std::size_t>(p)]) + b * eb, e - b);
    return m_g.wait(m_rank, "all_reduce");
}

Status LocalCommunicator::allGather(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts)
{
    TP_RETURN_IF_ERROR(check("all_gather", in));
    TP_RETURN_IF_ERROR(check("all_gather", out));
    const auto off = pieceOffsets(counts);
    if (static_cast<int>(counts.size()) != m_g.m_n || counts[static_cast<std::size_t>(m_rank)] != in.numel()
        || off.back() != out.numel() || in.dtype != out.dtype)
        return invalidArgument(fmt::format("all_gather: rank {}: {} elements in, {} out, counts do not match", m_rank,
                                           in.numel(), out.numel()));
    m_g.publish(m_rank, in.data, in.numel(), in.dtype);
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "all_gather"));
    const std::int64_t eb = out.elementBytes();
    for (int p = 0; p < m_g.m_n; ++p) {
        const auto c = m_g.m_count[static_cast<std::size_t>(p)];
        if (c != counts[static_cast<std::size_t>(p)] || m_g.m_dtype[static_cast<std::size_t>(p)] != out.dtype)
            return m_g.fail(m_rank, "all_gather",
                            fmt::format("expects {} elements of {} from rank {}, which sends {}", counts[static_cast<std::size_t>(p)],
                                        dtypeName(out.dtype), p, c));
        char* dst = out.as<char>() + off[static_cast<std::size_t>(p)] * eb;
        if (dst != m_g.m_ptr[static_cast<std::size_t>(p)]) // in place: my piece is already there
            std::memcpy(dst, m_g.m_ptr[static_cast<std::size_t>(p)], static_cast<std::size_t>(c * eb));
    }
    return m_g.wait(m_rank, "all_gather");
}

Status LocalCommunicator::allGatherColumns(const Tensor& out, std::span<const std::int64_t> offsets)
{
    if (out.device != DeviceKind::Cpu || !isStorageDtype(out.dtype) || static_cast<int>(offsets.size()) != m_g.m_n + 1
        || offsets.front() != 0 || offsets.back() != out.cols)
        return invalidArgument(fmt::format("all_gather of column pieces: rank {}: {} offsets for {} ranks and {} columns",
                                           m_rank, offsets.size(), m_g.m_n, out.cols));
    m_g.publish(m_rank, out.data, out.numel(), out.dtype);
    m_g.m_stride[static_cast<std::size_t>(m_rank)] = out.stride;
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "all_gather"));
    for (int p = 0; p < m_g.m_n; ++p)
        if (m_g.m_count[static_cast<std::size_t>(p)] != out.numel() || m_g.m_dtype[static_cast<std::size_t>(p)] != out.dtype
            || m_g.m_stride[static_cast<std::size_t>(p)] != out.stride)
            return m_g.fail(m_rank, "all_gather", fmt::format("rank {} gathers another shape or dtype", p));
    // My piece into every other rank's tensor, row by row.
    const std::int64_t eb = out.elementBytes(), first = offsets[static_cast<std::size_t>(m_rank)];
    const std::size_t bytes = static_cast<std::size_t>((offsets[static_cast<std::size_t>(m_rank) + 1] - first) * eb);
    for (int p = 0; p < m_g.m_n; ++p) {
        if (p == m_rank || bytes == 0)
            continue;
        char* dst = static_cast<char*>(const_cast<void*>(m_g.m_ptr[static_cast<std::size_t>(p)]));
        for (std::int64_t r = 0; r < out.rows; ++r)
            std::memcpy(dst + (r * out.stride + first) * eb, out.as<char>() + (r * out.stride + first) * eb, bytes);
    }
    return m_g.wait(m_rank, "all_gather");
}

Status LocalCommunicator::reduceScatter(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts)
{
    TP_RETURN_IF_ERROR(check("reduce_scatter", in));
    TP_RETURN_IF_ERROR(check("reduce_scatter", out));
    const auto off = pieceOffsets(counts);
    if (static_cast<int>(counts.size()) != m_g.m_n || off.back() != in.numel()
        || counts[static_cast<std::size_t>(m_rank)] != out.numel() || in.dtype != out.dtype)
        return invalidArgument(fmt::format("reduce_scatter: rank {}: counts do not match the buffers", m_rank));
    m_g.publish(m_rank, in.data, in.numel(), in.dtype);
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "reduce_scatter"));
    for (int p = 0; p < m_g.m_n; ++p)
        if (m_g.m_count[static_cast<std::size_t>(p)] != in.numel() || m_g.m_dtype[static_cast<std::size_t>(p)] != in.dtype)
            return m_g.fail(m_rank, "reduce_scatter", fmt::format("rank {} reduces another size or dtype", p));
    // My piece is read by me alone: chunk by chunk unless `out` overlaps an input elsewhere than at
    // the piece itself (then the whole piece is summed before anything is written, as before).
    const std::int64_t eb = in.elementBytes(), from = off[static_cast<std::size_t>(m_rank)];
    bool ownIndexOnly = true;
    for (int p = 0; p < m_g.m_n && ownIndexOnly; ++p)
        ownIndexOnly = writesOnlyOwnIndex(out.data, out.bytes(), m_g.m_ptr[static_cast<std::size_t>(p)], in.numel() * eb, from * eb);
    if (ownIndexOnly) {
        void* const outs[] = {out.data};
        sumChunked(in.dtype, from, out.numel(), outs, 0);
    } else {
        sumInto(in.dtype, from, out.numel(), out.data);
    }
    return m_g.wait(m_rank, "reduce_scatter");
}

Status LocalCommunicator::broadcast(const Tensor& data, int root)
{
    TP_RETURN_IF_ERROR(check("broadcast", data));
    if (root < 0 || root >= m_g.m_n)
        return invalidArgument(fmt::format("broadcast: root {} outside 0..{}", root, m_g.m_n - 1));
    m_g.publish(m_rank, data.data, data.numel(), data.dtype);
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "broadcast"));
    if (m_rank != root) {
        if (m_g.m_count[static_cast<std::size_t>(root)] != data.numel() || m_g.m_dtype[static_cast<std::size_t>(root)] != data.dtype)
            return m_g.fail(m_rank, "broadcast",
                            fmt::format("expects {} elements, root sends {}", data.numel(), m_g.m_count[static_cast<std::size_t>(root)]));
        std::memcpy(data.data, m_g.m_ptr[static_cast<std::size_t>(root)], static_cast<std::size_t>(data.bytes()));
    }
    return m_g.wait(m_rank, "broadcast");
}

Status LocalCommunicator::allToAll(const Tensor& in, std::span<const std::int64_t> sendCounts, const Tensor& out,
                                   std::span<const std::int64_t> recvCounts)
{
    TP_RETURN_IF_ERROR(check("all_to_all", in, true));
    TP_RETURN_IF_ERROR(check("all_to_all", out, true));
    const auto recvOff = pieceOffsets(recvCounts);
    if (static_cast<int>(sendCounts.size()) != m_g.m_n || static_cast<int>(recvCounts.size()) != m_g.m_n
        || pieceOffsets(sendCounts).back() != in.numel() || recvOff.back() != out.numel() || in.dtype != out.dtype)
        return invalidArgument(fmt::format("all_to_all: rank {}: counts do not match the buffers", m_rank));
    m_g.publish(m_rank, in.data, in.numel(), in.dtype);
    m_g.m_counts[static_cast<std::size_t>(m_rank)].assign(sendCounts.begin(), sendCounts.end());
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "all_to_all"));
    const std::int64_t eb = in.elementBytes();
    for (int p = 0; p < m_g.m_n; ++p) {
        const auto& c = m_g.m_counts[static_cast<std::size_t>(p)];
        if (c[static_cast<std::size_t>(m_rank)] != recvCounts[static_cast<std::size_t>(p)] || m_g.m_dtype[static_cast<std::size_t>(p)] != in.dtype)
            return m_g.fail(m_rank, "all_to_all",
                            fmt::format("expects {} elements from rank {}, which sends {}", recvCounts[static_cast<std::size_t>(p)],
                                        p, c[static_cast<std::size_t>(m_rank)]));
        const std::int64_t from = std::accumulate(c.begin(), c.begin() + m_rank, std::int64_t(0));
        std::memcpy(out.as<char>() + recvOff[static_cast<std::size_t>(p)] * eb,
                    static_cast<const char*>(m_g.m_ptr[static_cast<std::size_t>(p)]) + from * eb,
                    static_cast<std::size_t>(c[static_cast<std::size_t>(m_rank)] * eb));
    }
    return m_g.wait(m_rank, "all_to_all");
}

Status LocalCommunicator::exchange(std::span<const std::int64_t> mine, std::vector<std::int64_t>& all,
                                   std::vector<std::int64_t>& counts)
{
    m_g.publish(m_rank, mine.data(), static_cast<std::int64_t>(mine.size()), DType::I64);
    TP_RETURN_IF_ERROR(m_g.wait(m_rank, "exchange"));
    all.clear();
    counts.clear();
    for (int p = 0; p < m_g.m_n; ++p) {
        const auto* src = static_cast<const std::int64_t*>(m_g.m_ptr[static_cast<std::size_t>(p)]);
        all.insert(all.end(), src, src + m_g.m_count[static_cast<std::size_t>(p)]);
        counts.push_back(m_g.m_count[static_cast<std::size_t>(p)]);
    }
    return m_g.wait(m_rank, "exchange");
}

} // namespace

std::shared_ptr<CommGroup> makeLocalGroup(int size, std::chrono::milliseconds timeout)
{
    return std::make_shared<Group>(std::max(size, 1), timeout);
}

} // namespace tp
