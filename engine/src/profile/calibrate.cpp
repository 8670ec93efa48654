// calibrate.cpp — the engine's ops timed on this machine's backends (see calibrate.h).
#include "tp/profile/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace tp {

namespace {

using Clock = std::chrono::steady_clock;

// The last-level cache: the host's (sysfs, at least 8 MiB), or 64 MiB for a GPU (an H100's L2 is 50 MB).
std::int64_t lastLevelCacheBytes(DeviceKind device)
{
    if (device != DeviceKind::Cpu)
        return std::int64_t(64) << 20;
    std::int64_t most = 0;
    for (int i = 0; i < 8; ++i) {
        std::ifstream f(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", i));
        std::string v;
        if (!(f >> v) || v.empty())
            continue;
        const std::int64_t unit = v.back() == 'K' ? 1024 : v.back() == 'M' ? 1 << 20 : 1;
        most = std::max<std::int64_t>(most, std::atoll(v.c_str()) * unit);
    }
    return std::max<std::int64_t>(most, std::int64_t(8) << 20);
}

// One rank's backend and the buffers of the measurement at hand (set up before it is timed).
struct Rank
{
    std::unique_ptr<Backend> be;
    std::vector<DeviceBuffer> buffers;
    // Weights are read cold, as a forward reads each layer's once: every call takes its weight at
    // the next place in a pool larger than the last-level cache.
    DeviceBuffer pool;
    std::int64_t poolBytes = 0;

    Tensor weight(DType t, std::int64_t out, std::int64_t in, int call) const
    {
        const std::int64_t bytes = dtypeBytes(t, out * in);
        const std::int64_t places = std::max<std::int64_t>(1, (poolBytes - bytes) / 256 + 1);
        const std::int64_t offset = (static_cast<std::int64_t>(call) * ((bytes + 255) / 256)) % places * 256;
        return Tensor::contiguous(static_cast<char*>(pool.data()) + offset, t, out, in, be->device());
    }

    Result<Tensor> tensor(DType t, std::int64_t rows, std::int64_t cols, std::uint64_t key)
    {
        TP_ASSIGN_OR_RETURN(DeviceBuffer b, be->allocate(std::max<std::int64_t>(dtypeBytes(t, rows * cols), 1)));
        Tensor x = Tensor::contiguous(b.data(), t, rows, cols, be->device());
        buffers.push_back(std::move(b));
        if (t != DType::I32 && t != DType::U8 && rows * cols > 0) {
            UniformFill f{.key = key, .base = 0, .scale = 1, .runs = {{0, 0, rows * cols}}};
            TP_RETURN_IF_ERROR(be->fillUniform(x, f));
        }
        return x;
    }
    Status upload(const Tensor& t, const void* host) { return be->upload(host, t); }
};

class Timer
{
public:
    Timer(std::vector<Rank>& ranks, const CalibrateOptions& o)
        : m_ranks(ranks)
        , m_o(o)
    {
    }

    // The median over repetitions of the slowest of `n` ranks running `op` at once (each after a
    // barrier), in seconds. One untimed call first on every rank; repetitions fill the target time.
    Result<double> time(int n, const std::function<Status(int rank, int call)>& op)
    {
        std::vector<Status> status(static_cast<std::size_t>(n));
        const auto t0 = Clock::now();
        TP_RETURN_IF_ERROR(together(n, [&](int r) { return once(r, 0, op); }, status));
        const double pilot = std::chrono::duration<double>(Clock::now() - t0).count();
        const double target = m_o.quick ? 0.01 : 0.05;
        const int reps = static_cast<int>(std::clamp(target / std::max(pilot, 1e-7), 5.0, m_o.quick ? 30.0 : 200.0));
        std::vector<std::vector<double>> seconds(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(reps)));
        std::barrier sync(n);
        TP_RETURN_IF_ERROR(together(
            n,
            [&](int r) -> Status {
                for (int i = 0; i < reps; ++i) {
                    sync.arrive_and_wait();
                    const auto a = Clock::now();
                    Status st = once(r, i + 1, op);
                    seconds[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)]
                        = std::chrono::duration<double>(Clock::now() - a).count();
                    if (!st.ok()) {
                        sync.arrive_and_drop();
                        return st;
                    }
                }
                return Status();
            },
            status));
        std::vector<double> slowest(static_cast<std::size_t>(reps), 0.0);
        for (const auto& s : seconds)
            for (std::size_t i = 0; i < s.size(); ++i)
                slowest[i] = std::max(slowest[i], s[i]);
        std::nth_element(slowest.begin(), slowest.begin() + reps / 2, slowest.end());
        return slowest[static_cast<std::size_t>(reps / 2)];
    }

private:
    Status once(int r, int call, const std::function<Status(int, int)>& op)
    {
        TP_RETURN_IF_ERROR(op(r, call));
        return m_ranks[static_cast<std::size_t>(r)].be->synchronize();
    }

    // fn(r) on ranks 0 … n-1, each on a thread of its own (rank 0 on this one when n = 1).
    static Status together(int n, const std::function<Status(int)>& fn, std::vector<Status>& status)
    {
        if (n == 1)
            return fn(0);
        std::vector<std::thread> threads;
        for (int r = 0; r < n; ++r)
            threads.emplace_back([&, r] {
                try {
                    status[static_cast<std::size_t>(r)] = fn(r);
                } catch (const std::bad_alloc&) {
                    status[static_cast<std::size_t>(r)] = Status(StatusCode::ResourceExhausted, "out of memory");
                }
            });
        for (auto& t : threads)
            t.join();
        for (int r = 0; r < n; ++r)
            if (!status[static_cast<std::size_t>(r)].ok())
                return Status(status[static_cast<std::size_t>(r)].code(),
                              fmt::format("rank {}: {}", r, status[static_cast<std::size_t>(r)].message()));
        return Status();
    }

    std::vector<Rank>& m_ranks;
    const CalibrateOptions& m_o;
};

// (x, y) points sorted by x; points closer than 1% in x are averaged, so that x ascends strictly.
Curve sortedCurve(std::vector<std::pair<double, double>> pts)
{
    std::sort(pts.begin(), pts.end());
    Curve out;
    int merged = 1;
    for (const auto& p : pts) {
        if (!out.empty() && p.first <= out.back().first * 1.01) {
            out.back().second = (out.back().second * merged + p.second) / (merged + 1);
            ++merged;
        } else {
            out.push_back(p);
            merged = 1;
        }
    }
    return out;
}

// Least squares of t = a + bytes / bw over the points; a ≥ 0 and bw > 0.
std::pair<double, double> overheadAndBandwidth(const std::vector<std::pair<double, double>>& pts)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    const double n = static_cast<double>(pts.size());
    for (const auto& [x, y] : pts) {
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
    }
    const double den = n * sxx - sx * sx;
    double b = den > 0 ? (n * sxy - sx * sy) / den : 0, a = n > 0 ? (sy - b * sx) / n : 0;
    if (b <= 0 || a < 0) { // a noisy fit: the largest point's rate, the smallest point's time
        const auto big = *std::max_element(pts.begin(), pts.end());
        const auto small = *std::min_element(pts.begin(), pts.end());
        b = big.second > 0 ? big.second / big.first : 1e-9;
        a = std::max(0.0, small.second - small.first * b);
    }
    return {a * 1e6, 1.0 / b / 1e9};
}

class Calibrator
{
public:
    Calibrator(std::vector<Rank>& ranks, const CalibrateOptions& o)
        : m_ranks(ranks)
        , m_o(o)
        , m_timer(ranks, o)
        , m_dt(ranks.front().be->storage())
        , m_e(static_cast<double>(dtypeBytes(m_dt, 1)))
    {
    }

    Result<Calibration> run()
    {
        std::vector<int> modes{1};
        if (m_o.ranks > 1)
            modes.push_back(m_o.ranks);
        // Every measurement is taken in two passes over the whole list, seconds apart, and keeps the
        // faster of its two medians: a shared machine's slow phase (a neighbour on the core, a clock
        // dip) outlasts one measurement's window of repetitions but seldom both passes.
        constexpr int passes = 2;
        m_total = passes * static_cast<int>(modes.size()) * countWork();
        Calibration cal;
        std::vector<std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, double>>> gemmRates;
        for (int n : modes) {
            CalibratedFigures f;
            f.ranks = n;
            // GEMMs: seconds per (out, in, rows); efficiencies once the peak is known.
            std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, double>> rates;
            m_best.clear();
            for (int pass = 0; pass < passes; ++pass) {
                m_slot = 0;
                rates.clear();
                for (const auto& [out, in] : shapes()) {
                    TP_RETURN_IF_ERROR(setUp(n, [&](Rank& r) -> Status {
                        const Tensor w = r.weight(m_dt, out, in, 0);
                        TP_ASSIGN_OR_RETURN(Tensor x, r.tensor(m_dt, maxRows(out, in), in, 2));
                        TP_ASSIGN_OR_RETURN(Tensor y, r.tensor(m_dt, maxRows(out, in), out, 3));
                        TP_ASSIGN_OR_RETURN(Tensor s, r.tensor(DType::U8, 1, r.be->gemmScratchBytes(maxRows(out, in), in, out), 4));
                        m_perRank.push_back({w, x, y, s});
                        return Status();
                    }));
                    for (std::int64_t rows : rowGrid(out, in)) {
                        TP_RETURN_IF_ERROR(step(fmt::format("gemm {}x{}x{} on {} rank{}", rows, out, in, n, n > 1 ? "s" : "")));
                        TP_ASSIGN_OR_RETURN(double t, time(n, [&](int r, int call) {
                            const auto& b = m_perRank[static_cast<std::size_t>(r)];
                            const Rank& rank = m_ranks[static_cast<std::size_t>(r)];
                            return rank.be->gemm(b[1].rowRange(0, rows), rank.weight(m_dt, out, in, call), nullptr,
                                                 b[2].rowRange(0, rows), b[3]);
                        }));
                        rates.emplace_back(out, in, rows, t);
                        if (n == 1) {
                            cal.peakTflops = std::max(cal.peakTflops, 2.0 * rows * out * in / t / 1e12);
                            if (rows == 1 && out * in >= m_largestWeight)
                                cal.memoryBandwidthGBps = static_cast<double>(out * in) * m_e / t / 1e9;
                        }
                    }
                }
                TP_RETURN_IF_ERROR(attention(n, f));
                TP_RETURN_IF_ERROR(memoryBound(n, f));
            }
            gemmRates.push_back(std::move(rates));
            cal.figures.push_back(std::move(f));
        }
        if (cal.peakTflops <= 0)
            return internalError("calibration measured no GEMM");
        for (std::size_t m = 0; m < modes.size(); ++m) {
            for (const auto& [out, in] : shapes()) {
                GemmSeries g{out, in, {}};
                for (const auto& [o, i, rows, t] : gemmRates[m])
                    if (o == out && i == in)
                        g.rows.emplace_back(static_cast<double>(rows), std::min(1.0, 2.0 * rows * out * in / t / 1e12 / cal.peakTflops));
                cal.figures[m].gemm.push_back(std::move(g));
            }
            for (Curve* c : {&cal.figures[m].attention, &cal.figures[m].attentionDecode})
                for (auto& p : *c)
                    p.second = std::min(1.0, p.second / cal.peakTflops);
        }
        cal.measurements = m_done;
        return cal;
    }

private:
    // Built-in weight shapes (out, in) and the options' own, at most 2^24 elements each.
    std::vector<std::pair<std::int64_t, std::int64_t>> shapes() const
    {
        std::vector<std::pair<std::int64_t, std::int64_t>> s;
        for (std::int64_t out : {256, 1024, 4096})
            for (std::int64_t in : {256, 1024, 4096})
                s.emplace_back(out, in);
        for (const auto& p : m_o.shapes)
            if (p.first > 0 && p.second > 0 && p.first * p.second <= (std::int64_t(1) << 24)
                && std::find(s.begin(), s.end(), p) == s.end())
                s.push_back(p);
        return s;
    }
    static constexpr std::int64_t m_largestWeight = 4096 * 4096;

    // Rows of x measured per shape: up to 2 GFLOP a call (0.25 quick) and 2^23 elements of x or y.
    std::vector<std::int64_t> rowGrid(std::int64_t out, std::int64_t in) const
    {
        std::vector<std::int64_t> rows;
        const double cap = m_o.quick ? 0.25e9 : 2e9;
        for (std::int64_t m = 1; m <= 2048; m *= m_o.quick ? 4 : 2)
            if (m == 1 || (2.0 * m * out * in <= cap && m * std::max(out, in) <= (std::int64_t(1) << 23)))
                rows.push_back(m);
        return rows;
    }
    std::int64_t maxRows(std::int64_t out, std::int64_t in) const { return rowGrid(out, in).back(); }

    int countWork() const
    {
        int n = 0;
        for (const auto& [out, in] : shapes())
            n += static_cast<int>(rowGrid(out, in).size());
        return n + static_cast<int>(attentionCases().size()) + 7 * static_cast<int>(elementRows().size());
    }

    // The measurement's time (Timer::time), or the faster of it and the same measurement's time in
    // an earlier pass: measurements come in the same order in every pass.
    Result<double> time(int n, const std::function<Status(int rank, int call)>& op)
    {
        TP_ASSIGN_OR_RETURN(const double t, m_timer.time(n, op));
        if (m_slot == m_best.size())
            m_best.push_back(t);
        m_best[m_slot] = std::min(m_best[m_slot], t);
        return m_best[m_slot++];
    }

    Status step(const std::string& what)
    {
        ++m_done;
        if (m_o.progress && !m_o.progress(static_cast<double>(m_done - 1) / std::max(m_total, 1), what))
            return Status(StatusCode::Cancelled, "calibration stopped");
        return Status();
    }

    // Fresh buffers on ranks 0 … n-1, made by `make` (which appends rank r's tensors to m_perRank).
    Status setUp(int n, const std::function<Status(Rank&)>& make)
    {
        m_perRank.clear();
        for (int r = 0; r < n; ++r) {
            m_ranks[static_cast<std::size_t>(r)].buffers.clear();
            TP_RETURN_IF_ERROR(make(m_ranks[static_cast<std::size_t>(r)]));
        }
        return Status();
    }

    struct AttentionCase
    {
        std::int64_t seq, past, headDim;
    };
    std::vector<AttentionCase> attentionCases() const
    {
        std::vector<AttentionCase> c;
        for (std::int64_t hd : m_o.quick ? std::vector<std::int64_t>{64} : std::vector<std::int64_t>{64, 128}) {
            for (std::int64_t s : m_o.quick ? std::vector<std::int64_t>{16, 128, 512} : std::vector<std::int64_t>{16, 64, 256, 1024})
                c.push_back({s, 0, hd});
            for (std::int64_t p : m_o.quick ? std::vector<std::int64_t>{128, 1024} : std::vector<std::int64_t>{64, 512, 4096})
                c.push_back({1, p, hd});
        }
        return c;
    }

    // Prefill (a causal prompt) and decode (one query over a cache) attention of 8 query heads on
    // 4 key/value heads: efficiency against the peak, by GFLOP per sequence and head.
    Status attention(int n, CalibratedFigures& f)
    {
        std::vector<std::pair<double, double>> prefill, decode;
        for (const AttentionCase& c : attentionCases()) {
            AttentionShape s{.batch = 1, .seq = c.seq, .heads = 8, .kvHeads = 4, .headDim = c.headDim, .vHeadDim = 0,
                             .scale = 1.0 / std::sqrt(static_cast<double>(c.headDim)), .past = c.past,
                             .keyRows = c.past + c.seq};
            TP_RETURN_IF_ERROR(setUp(n, [&](Rank& r) -> Status {
                TP_ASSIGN_OR_RETURN(Tensor q, r.tensor(m_dt, c.seq, 8 * c.headDim, 5));
                TP_ASSIGN_OR_RETURN(Tensor k, r.tensor(m_dt, c.past + c.seq, 4 * c.headDim, 6));
                TP_ASSIGN_OR_RETURN(Tensor v, r.tensor(m_dt, c.past + c.seq, 4 * c.headDim, 7));
                TP_ASSIGN_OR_RETURN(Tensor y, r.tensor(m_dt, c.seq, 8 * c.headDim, 8));
                TP_ASSIGN_OR_RETURN(Tensor sc, r.tensor(DType::U8, 1, r.be->attentionScratchBytes(s), 9));
                m_perRank.push_back({q, k, v, y, sc});
                return Status();
            }));
            TP_RETURN_IF_ERROR(step(fmt::format("attention, {} queries after {} cached, head_dim {}", c.seq, c.past, c.headDim)));
            TP_ASSIGN_OR_RETURN(double t, time(n, [&](int r, int) {
                const auto& b = m_perRank[static_cast<std::size_t>(r)];
                return m_ranks[static_cast<std::size_t>(r)].be->attention(b[0], b[1], b[2], b[3], s, b[4]);
            }));
            const double pairs = static_cast<double>(c.seq) * static_cast<double>(c.past)
                + static_cast<double>(c.seq) * static_cast<double>(c.seq + 1) / 2;
            const double flopsPerHead = 2 * pairs * static_cast<double>(2 * c.headDim);
            // TFLOP/s for now; divided by the peak once it is known.
            (c.seq == 1 ? decode : prefill).emplace_back(flopsPerHead / 1e9, flopsPerHead * 8 / t / 1e12);
        }
        f.attention = sortedCurve(prefill);
        f.attentionDecode = sortedCurve(decode);
        return Status();
    }

    std::vector<std::int64_t> elementRows() const
    {
        return m_o.quick ? std::vector<std::int64_t>{1, 64, 1024} : std::vector<std::int64_t>{1, 16, 128, 1024, 4096};
    }

    // Norms, head norms, adds, SiLU gating, rope, a split's copy and embedding rows over 2048
    // features: overhead and bandwidth by least squares over the row counts, bytes counted as the
    // cost model counts them (every input and output once; embedding: its output).
    Status memoryBound(int n, CalibratedFigures& f)
    {
        constexpr std::int64_t cols = 2048, headDim = 128, vocab = 4096;
        const std::int64_t most = elementRows().back();
        TP_RETURN_IF_ERROR(setUp(n, [&](Rank& r) -> Status {
            std::vector<Tensor> t;
            for (int i = 0; i < 4; ++i) {
                TP_ASSIGN_OR_RETURN(Tensor x, r.tensor(m_dt, most, cols, 10 + static_cast<std::uint64_t>(i)));
                t.push_back(x);
            }
            TP_ASSIGN_OR_RETURN(Tensor w, r.tensor(m_dt, 1, cols, 14));
            TP_ASSIGN_OR_RETURN(Tensor table, r.tensor(DType::F32, vocab, headDim, 15)); // ids serve as positions too
            TP_ASSIGN_OR_RETURN(Tensor emb, r.tensor(m_dt, vocab, cols, 16));
            TP_ASSIGN_OR_RETURN(Tensor ids, r.tensor(DType::I32, 1, most, 17));
            std::vector<std::int32_t> host(static_cast<std::size_t>(most));
            for (std::size_t i = 0; i < host.size(); ++i)
                host[i] = static_cast<std::int32_t>((i * 7919) % vocab);
            TP_RETURN_IF_ERROR(r.upload(ids, host.data()));
            t.insert(t.end(), {w, table, emb, ids});
            m_perRank.push_back(t);
            return Status();
        }));
        struct Op
        {
            OpKind kind;
            double tensors;   // inputs + outputs of `cols` features a row
            std::function<Status(Backend&, const std::vector<Tensor>&, std::int64_t)> run;
        };
        const std::vector<Op> ops{
            {OpKind::Norm, 2, [](Backend& b, const std::vector<Tensor>& t, std::int64_t m) {
                 return b.rmsNorm(t[0].rowRange(0, m), &t[4], t[1].rowRange(0, m), cols, 1e-6);
             }},
            {OpKind::HeadNorm, 2, [](Backend& b, const std::vector<Tensor>& t, std::int64_t m) {
                 const Tensor w = t[4].columns(0, headDim);
                 return b.rmsNorm(t[0].rowRange(0, m), &w, t[1].rowRange(0, m), headDim, 1e-6);
             }},
            {OpKind::Add, 3, [](Backend& b, const std::vector<Tensor>& t, std::int64_t m) {
                 return b.add(t[0].rowRange(0, m), t[1].rowRange(0, m), t[2].rowRange(0, m));
             }},
            {OpKind::GatedAct, 3, [](Backend& b, const std::vector<Tensor>& t, std::int64_t m) {
                 return b.gatedAct(t[0].rowRange(0, m), t[1].rowRange(0, m), t[2].rowRange(0, m), Activation::Silu);
             }},
            {OpKind::Rope, 2, [](Backend& b, const std::vector<Tensor>& t, std::int64_t m) {
                 return b.rope(t[0].rowRange(0, m), t[1].rowRange(0, m), headDim, t[7].columns(0, m), t[5]);
             }},
            {OpKind::Split, 2, [](Backend& b, const std::vector<Tensor>& t, std::int64_t m) {
                 return b.copy(t[0].rowRange(0, m), t[1].rowRange(0, m));
             }},
            {OpKind::Embedding, 1, [](Backend& b, const std::vector<Tensor>& t, std::int64_t m) {
                 return b.embedding(t[7].columns(0, m), t[6], t[1].rowRange(0, m), 0);
             }},
        };
        for (const Op& op : ops) {
            std::vector<std::pair<double, double>> pts;
            for (std::int64_t m : elementRows()) {
                TP_RETURN_IF_ERROR(step(fmt::format("{} of {} rows", opKindName(op.kind), m)));
                TP_ASSIGN_OR_RETURN(double t, time(n, [&](int r, int) {
                    return op.run(*m_ranks[static_cast<std::size_t>(r)].be, m_perRank[static_cast<std::size_t>(r)], m);
                }));
                pts.emplace_back(op.tensors * static_cast<double>(m * cols) * m_e, t);
            }
            f.ops[op.kind] = overheadAndBandwidth(pts);
        }
        return Status();
    }

    std::vector<Rank>& m_ranks;
    const CalibrateOptions& m_o;
    Timer m_timer;
    const DType m_dt;
    const double m_e;
    int m_total = 0, m_done = 0;
    std::vector<double> m_best; // the fastest time of each measurement of this rank count so far
    std::size_t m_slot = 0;     // the next measurement's place in m_best
    std::vector<std::vector<Tensor>> m_perRank;
};

} // namespace

std::int64_t calibrationBytesPerRank(DeviceKind device)
{
    // Pool; then the largest of: GEMM x and y (2^23 elements each) and scratch, or the memory-bound
    // ops' four [4096, 2048] tensors, their table and an embedding of [4096, 2048].
    return dtypeBytes(DType::F32, std::int64_t(1) << 24) + 4 * lastLevelCacheBytes(device) + (std::int64_t(176) << 20);
}

Result<Calibration> calibrateOps(const BackendFactory& make, const CalibrateOptions& options)
{
    if (options.ranks < 1 || options.ranks > 1024)
        return invalidArgument(fmt::format("ranks must be from 1 to 1024, found {}", options.ranks));
    std::vector<Rank> ranks(static_cast<std::size_t>(options.ranks));
    for (int r = 0; r < options.ranks; ++r) {
        auto be = make(r);
        if (!be)
            return Status(be.status().code(), fmt::format("rank {}: {}", r, be.status().message()));
        Rank& rank = ranks[static_cast<std::size_t>(r)];
        rank.be = std::move(*be);
        // The largest weight measured (2^24 elements) plus four times the last-level cache.
        rank.poolBytes = dtypeBytes(rank.be->storage(), std::int64_t(1) << 24) + 4 * lastLevelCacheBytes(rank.be->device());
        TP_RETURN_IF_ERROR(rank.tensor(rank.be->storage(), 1, rank.poolBytes / dtypeBytes(rank.be->storage(), 1), 1).status());
        rank.pool = std::move(rank.buffers.back()); // filled once, read at every place
        rank.buffers.clear();
    }
    Calibrator c(ranks, options);
    return c.run();
}

} // namespace tp
