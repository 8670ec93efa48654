// bench_comm.cpp — `tpstudio-cli bench comm`: the nccl-tests table for TP Studio's communicators
// on their backends' buffers (local: one thread per rank, host memory; nccl: one thread per GPU,
// device memory; mpi: one process per rank under mpirun).
//
// Columns as nccl-tests prints them: size (full buffer bytes), count (elements), type, redop, root,
// then time (µs, mean of the ranks' per-iteration means), algbw = size/time and
// busbw = algbw × factor (all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n;
// broadcast 1), and #wrong from a data check, for out-of-place and in-place where the operation
// has both forms. On host memory, each row also times a plain memcpy of the same size by every rank
// at once (same threads or processes, same buffers), and gives the out-of-place busbw as a fraction
// of one rank's memcpy bandwidth: the ceiling a shared-memory collective is measured against.
#include "commands.h"
#include "tp/core/json.h"

#include "tp/core/units.h"
#include "tp/cost/hardware.h"
#include "tp/runtime/backend.h"
#include "tp/runtime/communicator.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <thread>

namespace tpcli {

namespace {

struct CommOpts
{
    std::string comm = "local";
    int ranks = 2;
    std::int64_t minBytes = 8, maxBytes = 64 << 20;
    int factor = 2, iters = 20, warmup = 5;
    std::string op = "all_reduce";
    std::string dtype = "f32";
    bool check = true, json = false, memcpy = true;
};

struct Cell
{
    double us = 0;
    std::int64_t wrong = 0;
    bool present = false;
};

struct Row
{
    std::string op;
    std::int64_t bytes = 0, count = 0;
    Cell outOfPlace, inPlace;
    Cell memcpy; // every rank copying `bytes` of its own at the same time (host memory only)
};

// Small integers, so that sums over ranks are exact in every dtype (bf16 holds integers to 256).
float pattern(int rank, std::int64_t i) { return static_cast<float>((rank + 1) * (i % 7 + 1)); }

tp::DType dtypeOf(const std::string& name) { return name == "bf16" ? tp::DType::BF16 : name == "f16" ? tp::DType::F16 : tp::DType::F32; }
const char* typeColumn(tp::DType t) { return t == tp::DType::BF16 ? "bfloat16" : t == tp::DType::F16 ? "half" : "float"; }

// One rank of the benchmark, on its backend's tensors: the send and receive buffers are allocated
// once at the largest size; data is written and checked through the host.
class Bench
{
public:
    Bench(tp::Communicator& c, tp::Backend& be, const CommOpts& o)
        : m_c(c)
        , m_be(be)
        , m_o(o)
        , m_n(c.size())
        , m_r(c.rank())
        , m_dt(be.storage())
    {
    }

    tp::Status run(const std::string& op, std::vector<Row>& rows)
    {
        const std::int64_t eb = tp::dtypeBytes(m_dt, 1);
        if (!m_send.data()) {
            const std::int64_t capacity = std::max<std::int64_t>(m_o.maxBytes / eb, m_n) + m_n;
            TP_ASSIGN_OR_RETURN(m_send, m_be.allocate(capacity * eb));
            TP_ASSIGN_OR_RETURN(m_recv, m_be.allocate(capacity * eb));
        }
        for (std::int64_t bytes = m_o.minBytes; bytes <= m_o.maxBytes; bytes *= std::max(m_o.factor, 2)) {
            // The full buffer holds a whole number of elements per rank.
            const std::int64_t per = std::max<std::int64_t>(1, bytes / eb / m_n);
            const std::int64_t count = per * m_n;
            if (!rows.empty() && rows.back().op == op && rows.back().count == count)
                continue; // many ranks, small sizes: the same buffer as the row before
            Row row{op, count * eb, count, {}, {}};
            const std::vector<std::int64_t> counts(static_cast<std::size_t>(m_n), per);
            const tp::Tensor send = view(m_send, count), recv = view(m_recv, count);
            const tp::Tensor mySend = view(m_send, per), myRecvPiece = view(m_recv, per, per * m_r);
            if (op == "all_reduce") {
                TP_RETURN_IF_ERROR(time(row.outOfPlace, [&] { return fill(send, 0); }, [&] { return m_c.allReduce(send, recv); },
                                        [&] { return wrongSum(recv, 0); }));
                TP_RETURN_IF_ERROR(time(row.inPlace, [&] { return fill(send, 0); }, [&] { return m_c.allReduce(send, send); },
                                        [&] { return wrongSum(send, 0); }));
            } else if (op == "all_gather") {
                TP_RETURN_IF_ERROR(time(row.outOfPlace, [&] { return fill(mySend, 0); }, [&] { return m_c.allGather(mySend, recv, counts); },
                                        [&] { return wrongGather(recv, per); }));
                TP_RETURN_IF_ERROR(time(row.inPlace, [&] { return fill(myRecvPiece, 0); },
                                        [&] { return m_c.allGather(myRecvPiece, recv, counts); }, [&] { return wrongGather(recv, per); }));
            } else if (op == "reduce_scatter") {
                TP_RETURN_IF_ERROR(time(row.outOfPlace, [&] { return fill(send, 0); },
                                        [&] { return m_c.reduceScatter(send, view(m_recv, per), counts); },
                                        [&] { return wrongSum(view(m_recv, per), per * m_r); }));
            } else if (op == "broadcast") {
                TP_RETURN_IF_ERROR(time(row.inPlace, [&] { return fill(send, 0); }, [&] { return m_c.broadcast(send, 0); },
                                        [&] { return wrongBroadcast(send); }));
            } else if (op == "all_to_all") {
                TP_RETURN_IF_ERROR(time(row.outOfPlace, [&] { return fillAllToAll(send, per); },
                                        [&] { return m_c.allToAll(send, counts, recv, counts); },
                                        [&] { return wrongAllToAll(recv, per); }));
            }
            if (m_o.memcpy && m_be.device() == tp::DeviceKind::Cpu)
                TP_RETURN_IF_ERROR(time(row.memcpy, [] { return tp::Status(); }, [&] {
                    std::memcpy(recv.data, send.data, static_cast<std::size_t>(send.bytes()));
                    return tp::Status();
                }, nullptr));
            rows.push_back(row);
        }
        return {};
    }

private:
    tp::Tensor view(const tp::DeviceBuffer& b, std::int64_t n, std::int64_t offset = 0) const
    {
        return tp::Tensor::contiguous(static_cast<char*>(b.data()) + offset * tp::dtypeBytes(m_dt, 1), m_dt, 1, n, m_be.device());
    }

    // Warm-up and timed iterations of the bare collective (time = mean over ranks; device work is
    // waited for inside the timed region), then one more on freshly filled buffers whose result is
    // checked (#wrong, summed over ranks) unless there is nothing to check (`wrong` null).
    tp::Status time(Cell& cell, const std::function<tp::Status()>& prepare, const std::function<tp::Status()>& once,
                    const std::function<tp::Result<std::int64_t>()>& wrong)
    {
        TP_RETURN_IF_ERROR(prepare());
        for (int i = 0; i < m_o.warmup; ++i)
            TP_RETURN_IF_ERROR(once());
        TP_RETURN_IF_ERROR(m_c.synchronize());
        TP_RETURN_IF_ERROR(m_c.barrier());
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < m_o.iters; ++i)
            TP_RETURN_IF_ERROR(once());
        TP_RETURN_IF_ERROR(m_c.synchronize());
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count()
            / std::max(m_o.iters, 1);
        std::int64_t bad = 0;
        if (m_o.check && wrong) {
            TP_RETURN_IF_ERROR(prepare());
            TP_RETURN_IF_ERROR(once());
            TP_RETURN_IF_ERROR(m_c.synchronize());
            TP_ASSIGN_OR_RETURN(bad, wrong());
        }
        // Mean time in ns and the wrong count, exchanged as integers.
        std::vector<std::int64_t> all, counts;
        TP_RETURN_IF_ERROR(m_c.exchange(std::vector<std::int64_t>{std::llround(us * 1e3), bad}, all, counts));
        double sum = 0;
        cell.wrong = 0;
        for (std::size_t i = 0; i + 1 < all.size(); i += 2) {
            sum += static_cast<double>(all[i]) / 1e3;
            cell.wrong += all[i + 1];
        }
        cell.us = sum / m_n;
        cell.present = true;
        return {};
    }

    tp::Status upload(const tp::Tensor& t, const std::vector<float>& values)
    {
        std::vector<unsigned char> raw(static_cast<std::size_t>(t.bytes()));
        tp::fromFloat(values.data(), m_dt, raw.data(), t.numel());
        return m_be.upload(raw.data(), t);
    }
    tp::Result<std::vector<float>> download(const tp::Tensor& t)
    {
        std::vector<unsigned char> raw(static_cast<std::size_t>(t.bytes()));
        TP_RETURN_IF_ERROR(m_be.download(t, raw.data()));
        std::vector<float> v(static_cast<std::size_t>(t.numel()));
        tp::toFloat(raw.data(), m_dt, v.data(), t.numel());
        return v;
    }
    tp::Status fill(const tp::Tensor& t, std::int64_t offset)
    {
        std::vector<float> v(static_cast<std::size_t>(t.numel()));
        for (std::size_t i = 0; i < v.size(); ++i)
            v[i] = pattern(m_r, offset + static_cast<std::int64_t>(i));
        return upload(t, v);
    }
    tp::Status fillAllToAll(const tp::Tensor& t, std::int64_t per)
    {
        // To rank p: per elements of value 10·rank + p.
        std::vector<float> v(static_cast<std::size_t>(t.numel()));
        for (int p = 0; p < m_n; ++p)
            std::fill_n(v.begin() + p * per, per, static_cast<float>(10 * m_r + p));
        return upload(t, v);
    }
    tp::Result<std::int64_t> wrongSum(const tp::Tensor& t, std::int64_t offset)
    {
        TP_ASSIGN_OR_RETURN(const auto v, download(t));
        const float ranksSum = static_cast<float>(m_n * (m_n + 1) / 2);
        std::int64_t bad = 0;
        for (std::size_t i = 0; i < v.size(); ++i)
            bad += v[i] != ranksSum * static_cast<float>((offset + static_cast<std::int64_t>(i)) % 7 + 1);
        return bad;
    }
    tp::Result<std::int64_t> wrongGather(const tp::Tensor& t, std::int64_t per)
    {
        TP_ASSIGN_OR_RETURN(const auto v, download(t));
        std::int64_t bad = 0;
        for (int p = 0; p < m_n; ++p)
            for (std::int64_t i = 0; i < per; ++i)
                bad += v[static_cast<std::size_t>(p * per + i)] != pattern(p, i);
        return bad;
    }
    tp::Result<std::int64_t> wrongBroadcast(const tp::Tensor& t)
    {
        TP_ASSIGN_OR_RETURN(const auto v, download(t));
        std::int64_t bad = 0;
        for (std::size_t i = 0; i < v.size(); ++i)
            bad += v[i] != pattern(0, static_cast<std::int64_t>(i));
        return bad;
    }
    tp::Result<std::int64_t> wrongAllToAll(const tp::Tensor& t, std::int64_t per)
    {
        TP_ASSIGN_OR_RETURN(const auto v, download(t));
        std::int64_t bad = 0;
        for (int p = 0; p < m_n; ++p)
            for (std::int64_t i = 0; i < per; ++i)
                bad += v[static_cast<std::size_t>(p * per + i)] != static_cast<float>(10 * p + m_r);
        return bad;
    }

    tp::Communicator& m_c;
    tp::Backend& m_be;
    const CommOpts& m_o;
    const int m_n, m_r;
    const tp::DType m_dt;
    tp::DeviceBuffer m_send, m_recv;
};

tp::CollectiveKind kindOf(const std::string& op)
{
    if (op == "all_reduce")
        return tp::CollectiveKind::AllReduce;
    if (op == "all_gather")
        return tp::CollectiveKind::AllGather;
    if (op == "reduce_scatter")
        return tp::CollectiveKind::ReduceScatter;
    if (op == "all_to_all")
        return tp::CollectiveKind::AllToAll;
    return tp::CollectiveKind::None; // broadcast: factor 1
}

double busFactor(const std::string& op, int n) { return op == "broadcast" ? 1.0 : tp::busBandwidthFactor(kindOf(op), n); }

// GB/s of one rank's memcpy of the row's size while every rank copies (0 when not measured).
double memcpyGbps(const Row& r) { return r.memcpy.present && r.memcpy.us > 0 ? static_cast<double>(r.bytes) / (r.memcpy.us * 1e3) : 0.0; }

void print(const CommOpts& o, const std::string& kind, int n, const std::vector<Row>& rows)
{
    if (o.json) {
        auto arr = nlohmann::ordered_json::array();
        for (const auto& r : rows) {
            nlohmann::ordered_json x = {{"op", r.op}, {"size", r.bytes}, {"count", r.count}, {"type", typeColumn(dtypeOf(o.dtype))}};
            for (const auto& [name, c] : {std::pair{"out_of_place", r.outOfPlace}, std::pair{"in_place", r.inPlace}})
                if (c.present) {
                    const double alg = static_cast<double>(r.bytes) / (c.us * 1e3);
                    x[name] = {{"time_us", c.us}, {"algbw_gbps", alg}, {"busbw_gbps", alg * busFactor(r.op, n)}, {"wrong", c.wrong}};
                    if (const double mem = memcpyGbps(r); mem > 0)
                        x[name]["busbw_fraction_of_memcpy"] = alg * busFactor(r.op, n) / mem;
                }
            if (const double mem = memcpyGbps(r); mem > 0) // per rank, and all ranks together
                x["memcpy"] = {{"time_us", r.memcpy.us}, {"gbps", mem}, {"total_gbps", mem * n}};
            arr.push_back(x);
        }
        std::cout << nlohmann::ordered_json({{"bench", "comm"}, {"communicator", kind}, {"ranks", n}, {"rows", arr}}).dump(2, ' ', false, tp::kReplaceInvalidUtf8) << "\n";
        return;
    }
    fmt::print("# tpstudio-cli bench comm: {} communicator, {} ranks, {} iterations ({} warm-up), check {}\n#\n", kind, n,
               o.iters, o.warmup, o.check ? "on" : "off");
    const bool mem = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.memcpy.present; });
    if (mem)
        fmt::print("# memcpy: GB/s of one rank copying `size` bytes while all {} copy at once (same threads, same buffers);\n"
                   "# bus/mem: out-of-place busbw (in-place where that is the only form) / memcpy\n#\n", n);
    std::string op;
    double busSum = 0;
    int busN = 0;
    std::int64_t wrong = 0;
    auto cell = [&](const Row& r, const Cell& c) {
        if (!c.present)
            return fmt::format("{:>9} {:>7} {:>7} {:>6}", "n/a", "", "", "");
        const double alg = static_cast<double>(r.bytes) / (c.us * 1e3), bus = alg * busFactor(r.op, n);
        busSum += bus;
        ++busN;
        wrong += c.wrong;
        return fmt::format("{:>9.2f} {:>7.2f} {:>7.2f} {:>6}", c.us, alg, bus, c.wrong);
    };
    for (const auto& r : rows) {
        if (r.op != op) {
            op = r.op;
            fmt::print("# {}\n#{:>38}{:>33}{:>33}\n", op, "", "out-of-place", "in-place");
            fmt::print("#{:>11} {:>12} {:>8} {:>6} {:>5} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>7} {:>6}{}\n", "size", "count",
                       "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
                       mem ? fmt::format(" {:>7} {:>7}", "memcpy", "bus/mem") : "");
            fmt::print("#{:>11} {:>12} {:>8} {:>6} {:>5} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>7} {:>6}{}\n", "(B)",
                       "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
                       mem ? fmt::format(" {:>7} {:>7}", "(GB/s)", "") : "");
        }
        const bool reduces = r.op == "all_reduce" || r.op == "reduce_scatter";
        std::string memCols;
        if (const double m = memcpyGbps(r); m > 0) {
            const Cell& c = r.outOfPlace.present ? r.outOfPlace : r.inPlace;
            memCols = fmt::format(" {:>7.2f} {:>7.2f}", m, static_cast<double>(r.bytes) / (c.us * 1e3) * busFactor(r.op, n) / m);
        }
        fmt::print(" {:>11} {:>12} {:>8} {:>6} {:>5} {} {}{}\n", r.bytes, r.count, typeColumn(dtypeOf(o.dtype)), reduces ? "sum" : "none",
                   r.op == "broadcast" ? 0 : -1, cell(r, r.outOfPlace), cell(r, r.inPlace), memCols);
    }
    fmt::print("# Out of bounds values : {} {}\n# Avg bus bandwidth    : {:.3f}\n", wrong, wrong ? "FAILED" : "OK",
               busN ? busSum / busN : 0.0);
}

// The local or NCCL communicator: one thread per rank in this process, each with its backend.
tp::Result<std::vector<Row>> measureThreads(const CommOpts& o, const std::vector<std::string>& ops)
{
    const tp::DType dt = dtypeOf(o.dtype);
    std::vector<Row> rows;
    if (o.minBytes > o.maxBytes)
        return tp::invalidArgument(fmt::format("--minbytes {} is larger than --maxbytes {}", o.minBytes, o.maxBytes));
    // Per rank: a send and a receive buffer of the largest size on the device, and its values on the
    // host (fp32, and in the element type) while they are written or checked.
    const std::int64_t eb = tp::dtypeBytes(dt, 1), elements = o.maxBytes / eb + o.ranks;
    const std::int64_t hostPerRank = elements * (4 + eb) + (o.comm == "nccl" ? 0 : 2 * elements * eb);
    if (const std::int64_t have = tp::makeCpuBackend(dt).value()->availableBytes(); hostPerRank * o.ranks > have)
        return tp::invalidArgument(fmt::format("{} ranks with buffers of {} need {} of host memory, {} is available; nothing was allocated",
                                o.ranks, tp::humanBytes(static_cast<double>(o.maxBytes)),
                                tp::humanBytes(static_cast<double>(hostPerRank * o.ranks)), tp::humanBytes(static_cast<double>(have))));
    // Threads in this process, each with its backend: the local communicator on host memory, or
    // NCCL on device buffers with one GPU per rank.
    std::vector<std::unique_ptr<tp::Backend>> backends;
    std::vector<tp::Backend*> raw;
    for (int r = 0; r < o.ranks; ++r) {
        auto be = o.comm == "nccl" ? tp::makeCudaBackend(r, dt) : tp::makeCpuBackend(dt);
        if (!be)
            return tp::invalidArgument(fmt::format("rank {}: {}", r, be.status().message()));
        raw.push_back(be->get());
        backends.push_back(std::move(*be));
    }
    std::shared_ptr<tp::CommGroup> group;
    if (o.comm == "nccl") {
        auto g = tp::makeNcclGroup(raw, std::chrono::seconds(120));
        if (!g)
            return tp::invalidArgument(g.status().message());
        group = *g;
    } else {
        group = tp::makeLocalGroup(o.ranks, std::chrono::seconds(120));
    }
    std::vector<tp::Status> status(static_cast<std::size_t>(o.ranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < o.ranks; ++r)
        threads.emplace_back([&, r] {
            std::vector<Row> mine;
            Bench b(group->rank(r), *raw[static_cast<std::size_t>(r)], o);
            for (const auto& op : ops) {
                tp::Status st;
                try {
                    st = b.run(op, mine);
                } catch (const std::bad_alloc&) {
                    st = tp::Status(tp::StatusCode::ResourceExhausted, fmt::format("rank {}: out of host memory", r));
                }
                if (!st.ok()) {
                    group->rank(r).abort(st.message());
                    status[static_cast<std::size_t>(r)] = st;
                    return;
                }
            }
            if (r == 0)
                rows = std::move(mine);
        });
    for (auto& t : threads)
        t.join();
    for (const auto& st : status)
        if (!st.ok())
            return tp::invalidArgument(st.message());
    return rows;
}

int benchComm(const CommOpts& o)
{
    const std::vector<std::string> ops = o.op == "all"
        ? std::vector<std::string>{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"}
        : std::vector<std::string>{o.op};
    const tp::DType dt = dtypeOf(o.dtype);
    auto fail = [](const std::string& m) {
        fmt::print(stderr, "tpstudio-cli bench comm: {}\n", m);
        return kBadInput;
    };
    std::vector<Row> rows;
    if (o.comm == "mpi") {
        if (!tp::haveMpi())
            return fail("this build has no MPI");
        tp::mpiInit(nullptr, nullptr);
        auto comm = tp::makeMpiCommunicator(std::chrono::seconds(120));
        auto be = tp::makeCpuBackend(dt);
        tp::Status st = be.status();
        if (st.ok()) {
            Bench b(*comm, **be, o);
            for (const auto& op : ops)
                if (st.ok())
                    st = b.run(op, rows);
        }
        const int rank = comm->rank(), n = comm->size();
        if (!st.ok()) {
            fmt::print(stderr, "tpstudio-cli bench comm: rank {}: {}\n", rank, st.message());
            tp::mpiAbortJob(1);
            return kBadInput;
        }
        if (rank == 0)
            print(o, "mpi", n, rows);
        comm.reset();
        tp::mpiFinalize();
        return kOk;
    }
    auto measured = measureThreads(o, ops);
    if (!measured)
        return fail(measured.status().message());
    rows = std::move(*measured);
    print(o, o.comm, o.ranks, rows);
    return kOk;
}

} // namespace

tp::Result<std::vector<CollectiveTiming>> timeCollectives(const std::string& comm, int ranks, const std::string& dtype,
                                                          std::int64_t maxBytes, int factor, int iters)
{
    CommOpts o;
    o.comm = comm;
    o.ranks = ranks;
    o.dtype = dtype;
    o.maxBytes = maxBytes;
    o.factor = factor;
    o.iters = iters;
    o.warmup = std::max(1, iters / 4);
    o.memcpy = false;
    TP_ASSIGN_OR_RETURN(std::vector<Row> rows, measureThreads(o, {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}));
    std::vector<CollectiveTiming> out;
    for (const Row& r : rows) {
        const Cell& c = r.outOfPlace.present ? r.outOfPlace : r.inPlace;
        if (c.wrong != 0)
            return tp::internalError(fmt::format("{} of {} bytes gave {} wrong values", r.op, r.bytes, c.wrong));
        out.push_back({kindOf(r.op), r.bytes, c.us});
    }
    return out;
}

std::function<int()> addBenchComm(CLI::App* bench)
{
    auto o = std::make_shared<CommOpts>();
    auto* cmd = bench->add_subcommand(
        "comm", "The nccl-tests table for a communicator: time, algbw, busbw and #wrong per message size, "
                "out-of-place and in-place. MPI: mpirun -n N tpstudio-cli bench comm --comm mpi");
    cmd->add_option("--comm", o->comm, "local (threads), nccl (threads, one GPU each) or mpi (processes)")
        ->check(CLI::IsMember({"local", "nccl", "mpi"}))
        ->capture_default_str();
    cmd->add_option("-t,--ranks", o->ranks, "Ranks (threads) of the local or NCCL communicator")->check(CLI::Range(1, 256))->capture_default_str();
    // Sizes as nccl-tests takes them: 8, 64K, 128M, 1G.
    auto sizeOption = [&](const char* flags, std::int64_t& target, const char* help) {
        addSizeOption(cmd, flags, target, help);
    };
    sizeOption("-b,--minbytes", o->minBytes, "Smallest size in bytes (K/M/G suffixes), default 8");
    sizeOption("-e,--maxbytes", o->maxBytes, "Largest size in bytes (K/M/G suffixes), default 64M");
    cmd->add_option("-f,--stepfactor", o->factor, "Size multiplier")->check(CLI::Range(2, 1024))->capture_default_str();
    cmd->add_option("-n,--iters", o->iters, "Timed iterations")->check(CLI::Range(1, 100000))->capture_default_str();
    cmd->add_option("-w,--warmup_iters", o->warmup, "Warm-up iterations")->check(CLI::Range(0, 100000))->capture_default_str();
    cmd->add_option("-o,--op", o->op, "all_reduce, all_gather, reduce_scatter, broadcast, all_to_all or all")
        ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "all"}))
        ->capture_default_str();
    cmd->add_option("-d,--dtype", o->dtype, "Element type: f32, bf16 or f16")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}))
        ->capture_default_str();
    cmd->add_option("-c,--check", o->check, "Check the data (1) or not (0)")->check(CLI::IsMember(std::vector<std::string>{"0", "1"}))->capture_default_str();
    cmd->add_option("--memcpy", o->memcpy, "Also time every rank's memcpy of each size at once (host memory), 1 or 0")
        ->check(CLI::IsMember(std::vector<std::string>{"0", "1"}))
        ->capture_default_str();
    cmd->add_flag("--json", o->json, "Print JSON");
    return [o, cmd] { return cmd->parsed() ? benchComm(*o) : -1; };
}

} // namespace tpcli
