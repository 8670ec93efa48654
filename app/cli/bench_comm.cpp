// bench_comm.cpp — `tpstudio-cli bench comm`: the nccl-tests table for TP Studio's communicators
// (local: one thread per rank; mpi: one process per rank under mpirun).
//
// Columns as nccl-tests prints them: size (full buffer bytes), count (elements), type, redop, root,
// then time (µs, mean of the ranks' per-iteration means), algbw = size/time and
// busbw = algbw × factor (all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n;
// broadcast 1), and #wrong from a data check, for out-of-place and in-place where the operation
// has both forms.
#include "commands.h"

#include "tp/cost/hardware.h"
#include "tp/runtime/communicator.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
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
    bool check = true, json = false;
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
};

float pattern(int rank, std::int64_t i) { return static_cast<float>((rank + 1) * (i % 7 + 1)); }

class Bench
{
public:
    Bench(tp::Communicator& c, const CommOpts& o)
        : m_c(c)
        , m_o(o)
        , m_n(c.size())
        , m_r(c.rank())
    {
    }

    tp::Status run(const std::string& op, std::vector<Row>& rows)
    {
        for (std::int64_t bytes = m_o.minBytes; bytes <= m_o.maxBytes; bytes *= std::max(m_o.factor, 2)) {
            // The full buffer holds a whole number of floats per rank.
            const std::int64_t per = std::max<std::int64_t>(1, bytes / 4 / m_n);
            const std::int64_t count = per * m_n;
            Row row{op, count * 4, count, {}, {}};
            if (op == "all_reduce") {
                TP_RETURN_IF_ERROR(time(row.outOfPlace, [&] { fill(m_send, count); }, [&] { return allReduce(false); },
                                        [&] { return wrongSum(m_recv, 0); }));
                TP_RETURN_IF_ERROR(time(row.inPlace, [&] { fill(m_send, count); }, [&] { return allReduce(true); },
                                        [&] { return wrongSum(m_send, 0); }));
            } else if (op == "all_gather") {
                TP_RETURN_IF_ERROR(time(row.outOfPlace, [&] { prepareGather(per, false); }, [&] { return allGather(per, false); },
                                        [&] { return wrongGather(per); }));
                TP_RETURN_IF_ERROR(time(row.inPlace, [&] { prepareGather(per, true); }, [&] { return allGather(per, true); },
                                        [&] { return wrongGather(per); }));
            } else if (op == "reduce_scatter") {
                TP_RETURN_IF_ERROR(time(row.outOfPlace, [&] { fill(m_send, per * m_n); m_recv.resize(static_cast<std::size_t>(per)); },
                                        [&] { return reduceScatter(per); }, [&] { return wrongSum(m_recv, per * m_r); }));
            } else if (op == "broadcast") {
                TP_RETURN_IF_ERROR(time(row.inPlace, [&] { fill(m_send, count); }, [&] { return m_c.broadcast(m_send, 0); },
                                        [&] { return wrongBroadcast(count); }));
            } else if (op == "all_to_all") {
                TP_RETURN_IF_ERROR(time(row.outOfPlace, [&] { prepareAllToAll(per); }, [&] { return allToAll(per); },
                                        [&] { return wrongAllToAll(per); }));
            }
            rows.push_back(row);
        }
        return {};
    }

private:
    // Warm-up and timed iterations of the bare collective (time = mean over ranks), then one more on
    // freshly filled buffers whose result is checked (#wrong, summed over ranks).
    tp::Status time(Cell& cell, const std::function<void()>& prepare, const std::function<tp::Status()>& once,
                    const std::function<std::int64_t()>& wrong)
    {
        prepare();
        for (int i = 0; i < m_o.warmup; ++i)
            TP_RETURN_IF_ERROR(once());
        TP_RETURN_IF_ERROR(m_c.barrier());
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < m_o.iters; ++i)
            TP_RETURN_IF_ERROR(once());
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count()
            / std::max(m_o.iters, 1);
        std::int64_t bad = 0;
        if (m_o.check) {
            prepare();
            TP_RETURN_IF_ERROR(once());
            bad = wrong();
        }
        std::vector<float> stats{static_cast<float>(us), static_cast<float>(bad)};
        TP_RETURN_IF_ERROR(m_c.allReduce(stats));
        cell.us = stats[0] / m_n;
        cell.wrong = static_cast<std::int64_t>(stats[1]);
        cell.present = true;
        return {};
    }

    void fill(std::vector<float>& v, std::int64_t n, std::int64_t offset = 0)
    {
        v.resize(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i)
            v[static_cast<std::size_t>(i)] = pattern(m_r, offset + i);
    }
    std::int64_t wrongSum(const std::vector<float>& v, std::int64_t offset) const
    {
        const float ranksSum = static_cast<float>(m_n * (m_n + 1) / 2);
        std::int64_t bad = 0;
        for (std::size_t i = 0; i < v.size(); ++i)
            bad += v[i] != ranksSum * static_cast<float>((offset + static_cast<std::int64_t>(i)) % 7 + 1);
        return bad;
    }

    tp::Status allReduce(bool inPlace)
    {
        if (inPlace)
            return m_c.allReduce(m_send);
        m_recv.resize(m_send.size()); // out-of-place: the result lands in another buffer
        std::memcpy(m_recv.data(), m_send.data(), m_send.size() * sizeof(float));
        return m_c.allReduce(m_recv);
    }

    void prepareGather(std::int64_t per, bool inPlace)
    {
        m_recv.assign(static_cast<std::size_t>(per * m_n), 0.0f);
        fill(m_send, per);
        if (inPlace) // the contribution sits at this rank's place in the output
            std::memcpy(m_recv.data() + per * m_r, m_send.data(), static_cast<std::size_t>(per) * sizeof(float));
    }
    tp::Status allGather(std::int64_t per, bool inPlace)
    {
        const float* src = inPlace ? m_recv.data() + per * m_r : m_send.data();
        return m_c.allGather(std::span<const float>(src, static_cast<std::size_t>(per)), m_recv);
    }
    std::int64_t wrongGather(std::int64_t per) const
    {
        std::int64_t bad = 0;
        for (int p = 0; p < m_n; ++p)
            for (std::int64_t i = 0; i < per; ++i)
                bad += m_recv[static_cast<std::size_t>(p * per + i)] != pattern(p, i);
        return bad;
    }
    tp::Status reduceScatter(std::int64_t per)
    {
        const std::vector<std::int64_t> counts(static_cast<std::size_t>(m_n), per);
        return m_c.reduceScatter(m_send, m_recv, counts);
    }
    std::int64_t wrongBroadcast(std::int64_t count) const
    {
        std::int64_t bad = 0;
        for (std::int64_t i = 0; i < count; ++i)
            bad += m_send[static_cast<std::size_t>(i)] != pattern(0, i);
        return bad;
    }
    void prepareAllToAll(std::int64_t per)
    {
        // To rank p: per elements of value 1000·rank + p.
        m_send.resize(static_cast<std::size_t>(per * m_n));
        for (int p = 0; p < m_n; ++p)
            std::fill_n(m_send.begin() + p * per, per, static_cast<float>(1000 * m_r + p));
    }
    tp::Status allToAll(std::int64_t per)
    {
        const std::vector<std::int64_t> counts(static_cast<std::size_t>(m_n), per);
        return m_c.allToAll(m_send, counts, m_recv);
    }
    std::int64_t wrongAllToAll(std::int64_t per) const
    {
        std::int64_t bad = static_cast<std::int64_t>(m_recv.size()) != per * m_n;
        if (!bad)
            for (int p = 0; p < m_n; ++p)
                for (std::int64_t i = 0; i < per; ++i)
                    bad += m_recv[static_cast<std::size_t>(p * per + i)] != static_cast<float>(1000 * p + m_r);
        return bad;
    }

    tp::Communicator& m_c;
    const CommOpts& m_o;
    const int m_n, m_r;
    std::vector<float> m_send, m_recv;
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

void print(const CommOpts& o, const std::string& kind, int n, const std::vector<Row>& rows)
{
    if (o.json) {
        auto arr = nlohmann::ordered_json::array();
        for (const auto& r : rows) {
            nlohmann::ordered_json x = {{"op", r.op}, {"size", r.bytes}, {"count", r.count}, {"type", "float"}};
            for (const auto& [name, c] : {std::pair{"out_of_place", r.outOfPlace}, std::pair{"in_place", r.inPlace}})
                if (c.present) {
                    const double alg = static_cast<double>(r.bytes) / (c.us * 1e3);
                    x[name] = {{"time_us", c.us}, {"algbw_gbps", alg}, {"busbw_gbps", alg * busFactor(r.op, n)}, {"wrong", c.wrong}};
                }
            arr.push_back(x);
        }
        std::cout << nlohmann::ordered_json({{"bench", "comm"}, {"communicator", kind}, {"ranks", n}, {"rows", arr}}).dump(2) << "\n";
        return;
    }
    fmt::print("# tpstudio-cli bench comm: {} communicator, {} ranks, {} iterations ({} warm-up), check {}\n#\n", kind, n,
               o.iters, o.warmup, o.check ? "on" : "off");
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
            fmt::print("#{:>11} {:>12} {:>6} {:>6} {:>5} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>7} {:>6}\n", "size", "count",
                       "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
            fmt::print("#{:>11} {:>12} {:>6} {:>6} {:>5} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>7} {:>6}\n", "(B)",
                       "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
        }
        const bool reduces = r.op == "all_reduce" || r.op == "reduce_scatter";
        fmt::print(" {:>11} {:>12} {:>6} {:>6} {:>5} {} {}\n", r.bytes, r.count, "float", reduces ? "sum" : "none",
                   r.op == "broadcast" ? 0 : -1, cell(r, r.outOfPlace), cell(r, r.inPlace));
    }
    fmt::print("# Out of bounds values : {} {}\n# Avg bus bandwidth    : {:.3f}\n", wrong, wrong ? "FAILED" : "OK",
               busN ? busSum / busN : 0.0);
}

int benchComm(const CommOpts& o)
{
    const std::vector<std::string> ops = o.op == "all"
        ? std::vector<std::string>{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"}
        : std::vector<std::string>{o.op};
    std::vector<Row> rows;
    if (o.comm == "mpi") {
        if (!tp::haveMpi()) {
            fmt::print(stderr, "tpstudio-cli bench comm: this build has no MPI\n");
            return kBadInput;
        }
        tp::mpiInit(nullptr, nullptr);
        auto comm = tp::makeMpiCommunicator(std::chrono::seconds(120));
        tp::Status st;
        Bench b(*comm, o);
        for (const auto& op : ops)
            if (st.ok())
                st = b.run(op, rows);
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
    // Threads in this process: the local communicator, or NCCL with one GPU per rank.
    std::shared_ptr<tp::LocalGroup> local;
    std::shared_ptr<tp::NcclGroup> nccl;
    if (o.comm == "nccl") {
        auto g = tp::NcclGroup::create(o.ranks, std::chrono::seconds(120));
        if (!g) {
            fmt::print(stderr, "tpstudio-cli bench comm: {}\n", g.status().message());
            return kBadInput;
        }
        nccl = *g;
    } else {
        local = tp::LocalGroup::create(o.ranks, std::chrono::seconds(120));
    }
    auto rankComm = [&](int r) -> tp::Communicator& { return nccl ? nccl->rank(r) : local->rank(r); };
    std::vector<tp::Status> status(static_cast<std::size_t>(o.ranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < o.ranks; ++r)
        threads.emplace_back([&, r] {
            std::vector<Row> mine;
            Bench b(rankComm(r), o);
            for (const auto& op : ops) {
                tp::Status st = b.run(op, mine);
                if (!st.ok()) {
                    rankComm(r).abort(st.message());
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
        if (!st.ok()) {
            fmt::print(stderr, "tpstudio-cli bench comm: {}\n", st.message());
            return kBadInput;
        }
    print(o, o.comm, o.ranks, rows);
    return kOk;
}

} // namespace

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
        cmd->add_option_function<std::string>(
               flags,
               [&target](const std::string& v) {
                   std::size_t pos = 0;
                   double x = std::stod(v, &pos);
                   const std::string unit = v.substr(pos);
                   const double mult = unit.empty() ? 1 : unit == "K" ? 1024.0 : unit == "M" ? 1048576.0 : unit == "G" ? 1073741824.0 : -1;
                   if (mult < 0 || x <= 0)
                       throw CLI::ValidationError(v, "a size is a number with an optional K, M or G suffix");
                   target = static_cast<std::int64_t>(x * mult);
               },
               help)
            ->type_name("SIZE");
    };
    sizeOption("-b,--minbytes", o->minBytes, "Smallest size in bytes (K/M/G suffixes), default 8");
    sizeOption("-e,--maxbytes", o->maxBytes, "Largest size in bytes (K/M/G suffixes), default 64M");
    cmd->add_option("-f,--stepfactor", o->factor, "Size multiplier")->check(CLI::Range(2, 1024))->capture_default_str();
    cmd->add_option("-n,--iters", o->iters, "Timed iterations")->check(CLI::Range(1, 100000))->capture_default_str();
    cmd->add_option("-w,--warmup_iters", o->warmup, "Warm-up iterations")->check(CLI::Range(0, 100000))->capture_default_str();
    cmd->add_option("-o,--op", o->op, "all_reduce, all_gather, reduce_scatter, broadcast, all_to_all or all")
        ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "all"}))
        ->capture_default_str();
    cmd->add_option("-c,--check", o->check, "Check the data (1) or not (0)")->capture_default_str();
    cmd->add_flag("--json", o->json, "Print JSON");
    return [o, cmd] { return cmd->parsed() ? benchComm(*o) : -1; };
}

} // namespace tpcli
