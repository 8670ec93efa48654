// tst_engine — the CPU engine against Transformers: logits of the fixture checkpoints at T = 1, 2
// and 4 (default plans and alternatives valid for each model) within 1e-4 relative of the fp32
// reference that tests/fixtures/make_fixtures.py recorded; the local communicator; faults.
#include "tp/cost/cost_model.h"
#include "tp/cost/hardware.h"
#include "tp/model/loader.h"
#include "tp/plan/plan_io.h"
#include "tp/profile/host_load.h"
#include "tp/profile/run_record.h"
#include "tp/runtime/arena.h"
#include "tp/runtime/communicator.h"
#include "tp/runtime/executor.h"

#include "fidelity.h"
#include "testutils.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

// Heap allocations through operator new, on every thread: a test reads the count before and after
// what it measures. Every unaligned form is replaced, so that each pair is malloc/free (under ASan a
// form left out would be its allocator's, and freeing it here a mismatch); the aligned forms are
// left to the runtime, which pairs them itself.
namespace {
std::atomic<std::int64_t> g_news{0};
void* counted(std::size_t n) noexcept
{
    g_news.fetch_add(1, std::memory_order_relaxed);
    return std::malloc(n == 0 ? 1 : n);
}
} // namespace
void* operator new(std::size_t n)
{
    if (void* p = counted(n))
        return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

using namespace tp;

namespace {

const std::string kModels = TP_SOURCE_DIR "/tests/fixtures/models/";

using tptest::engineStepLogits;
using tptest::Generation;
using tptest::promptRun;
using tptest::Reference;

Reference reference(const std::string& family) { return tptest::referenceIn(kModels + family); }
Generation generation(const std::string& family) { return tptest::generationIn(kModels + family); }

using tptest::relError;

// Rows seq − 1, 2·seq − 1, … of [B·seq, vocab] logits: each sequence's last position.
std::vector<float> lastRows(const std::vector<float>& logits, std::int64_t batch, std::int64_t seq, std::int64_t vocab)
{
    std::vector<float> out;
    for (std::int64_t b = 0; b < batch; ++b) {
        const auto row = logits.begin() + static_cast<std::ptrdiff_t>(((b + 1) * seq - 1) * vocab);
        out.insert(out.end(), row, row + static_cast<std::ptrdiff_t>(vocab));
    }
    return out;
}

Tensor host(std::vector<float>& v) { return Tensor::contiguous(v.data(), DType::F32, 1, std::int64_t(v.size()), DeviceKind::Cpu); }

// The default plan with the attention left whole (the shipped "mlp-only"/"experts-only" pattern).
Plan attentionReplicated(const ModelSpec& s, int tp)
{
    Plan p = defaultPlan(s, tp);
    for (auto& e : p.entries)
        if (e.key.find(".self_attn.") != std::string::npos)
            e.style = "replicate";
    return p;
}

// The default plan with the residual stream's norms sequence-parallel: every layer's norms outside
// the attention and the final norm (the shipped "sequence-parallel" pattern).
Plan sequenceParallel(const ModelSpec& s, int tp)
{
    Plan p = defaultPlan(s, tp);
    std::set<std::string> keys;
    for (const ModuleSpec& m : s.modules)
        if (m.kind == ModuleKind::RmsNorm && m.path.find(".self_attn.") == std::string::npos
            && (m.path == "model.norm" || m.path.ends_with("layernorm")))
            keys.insert(genericName(m.path));
    for (const std::string& k : keys)
        p.entries.push_back({k, "sequence_parallel"});
    return p;
}

using tptest::allToAllExperts;

// The plans every family runs at every valid T against Transformers (all-to-all expert dispatch:
// the families with an ep_plan).
enum class Variant { Default, AttentionReplicated, SequenceParallel, AllToAllExperts };
constexpr Variant kVariants[] = {Variant::Default, Variant::AttentionReplicated, Variant::SequenceParallel,
                                 Variant::AllToAllExperts};
std::optional<Plan> planOf(Variant v, const ModelSpec& s, int tp)
{
    return v == Variant::AttentionReplicated ? attentionReplicated(s, tp)
         : v == Variant::SequenceParallel    ? sequenceParallel(s, tp)
         : v == Variant::AllToAllExperts     ? allToAllExperts(s, tp)
                                             : defaultPlan(s, tp);
}
const char* variantText(Variant v)
{
    return v == Variant::AttentionReplicated ? " (attention replicated)"
         : v == Variant::SequenceParallel    ? " (sequence parallel)"
         : v == Variant::AllToAllExperts     ? " (experts dispatched all-to-all)"
                                             : "";
}

// Runs f(rank) on `size` threads at once; the first failure (a message) of any rank, or empty.
using tptest::onRanks;

// Storage bits of n values of `dt` (f32 as its 32-bit words), random of varied magnitude and sign so
// that the order of a sum shows in its last bits.
std::vector<std::uint32_t> randomStorage(DType dt, std::int64_t n, unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> val(0.0f, 1.0f);
    std::uniform_int_distribution<int> scale(-6, 6);
    std::vector<std::uint32_t> bits(static_cast<std::size_t>(n));
    for (auto& b : bits) {
        const float f = std::ldexp(val(rng), scale(rng));
        b = dt == DType::F32 ? std::bit_cast<std::uint32_t>(f) : dt == DType::BF16 ? floatToBf16(f) : floatToHalf(f);
    }
    return bits;
}

float storedToFloat(DType dt, std::uint32_t b)
{
    return dt == DType::F32 ? std::bit_cast<float>(b) : dt == DType::BF16 ? bf16ToFloat(std::uint16_t(b)) : halfToFloat(std::uint16_t(b));
}
std::uint32_t floatToStored(DType dt, float f)
{
    return dt == DType::F32 ? std::bit_cast<std::uint32_t>(f) : dt == DType::BF16 ? floatToBf16(f) : floatToHalf(f);
}

// A rank's buffer of n elements of dt with `pad` spare elements after it.
struct RankBuffer
{
    std::vector<unsigned char> bytes;
    DType dt;
    void fill(const std::vector<std::uint32_t>& bits, std::int64_t at = 0)
    {
        const std::size_t eb = std::size_t(dtypeBytes(dt, 1));
        for (std::size_t i = 0; i < bits.size(); ++i)
            std::memcpy(bytes.data() + (std::size_t(at) + i) * eb, &bits[i], eb); // little-endian: the low half for 16-bit
    }
    std::uint32_t at(std::int64_t i) const
    {
        std::uint32_t b = 0;
        std::memcpy(&b, bytes.data() + std::size_t(i) * std::size_t(dtypeBytes(dt, 1)), std::size_t(dtypeBytes(dt, 1)));
        return b;
    }
    Tensor view(std::int64_t from, std::int64_t n)
    {
        return Tensor::contiguous(bytes.data() + std::size_t(from * dtypeBytes(dt, 1)), dt, 1, n, DeviceKind::Cpu);
    }
};

const char* dtypeTag(DType dt) { return dt == DType::F32 ? "f32" : dt == DType::BF16 ? "bf16" : "f16"; }
} // namespace

class TestEngine : public QObject
{
    Q_OBJECT
private slots:
    void localCommunicator()
    {
        // 3 ranks with uneven pieces: all-reduce (in and out of place), all-gather, reduce-scatter,
        // broadcast, all-to-all, the integer exchange.
        auto group = makeLocalGroup(3, std::chrono::seconds(10));
        std::vector<std::string> errors(3);
        std::vector<std::thread> ts;
        for (int r = 0; r < 3; ++r)
            ts.emplace_back([&, r] {
                Communicator& c = group->rank(r);
                auto check = [&](bool ok, const char* what) {
                    if (!ok && errors[std::size_t(r)].empty())
                        errors[std::size_t(r)] = what;
                };
                std::vector<float> v(7), w(7);
                for (int i = 0; i < 7; ++i)
                    v[std::size_t(i)] = float(r * 10 + i);
                check(c.allReduce(host(v), host(w)).ok(), "all_reduce status");
                for (int i = 0; i < 7; ++i)
                    check(w[std::size_t(i)] == float(30 + 3 * i) && v[std::size_t(i)] == float(r * 10 + i), "all_reduce value");
                check(c.allReduce(host(v)).ok() && v == w, "all_reduce in place");
                std::vector<float> mine(std::size_t(r + 1), float(r)), all(6);
                const std::vector<std::int64_t> gather{1, 2, 3};
                check(c.allGather(host(mine), host(all), gather).ok(), "all_gather status");
                check(all == std::vector<float>{0, 1, 1, 2, 2, 2}, "all_gather value");
                const std::vector<std::int64_t> counts{3, 2, 0};
                std::vector<float> in(5, 1.0f), out(std::size_t(counts[std::size_t(r)]));
                check(c.reduceScatter(host(in), host(out), counts).ok(), "reduce_scatter status");
                for (float x : out)
                    check(x == 3.0f, "reduce_scatter value");
                std::vector<float> b(4, float(r));
                check(c.broadcast(host(b), 2).ok() && b == std::vector<float>(4, 2.0f), "broadcast");
                // rank r sends p+1 copies of (10r + p) to rank p.
                std::vector<float> send;
                std::vector<std::int64_t> sc, rc(3, r + 1);
                for (int p = 0; p < 3; ++p) {
                    sc.push_back(p + 1);
                    send.insert(send.end(), std::size_t(p + 1), float(10 * r + p));
                }
                std::vector<float> got(std::size_t(3 * (r + 1)));
                check(c.allToAll(host(send), sc, host(got), rc).ok(), "all_to_all status");
                std::vector<float> want;
                for (int p = 0; p < 3; ++p)
                    want.insert(want.end(), std::size_t(r + 1), float(10 * p + r));
                check(got == want, "all_to_all value");
                // An expert dispatch's per-expert counts travel as int64, as Transformers sends them:
                // rank r sends rank p the value 2^40 + 10r + p.
                std::vector<std::int64_t> counts64, got64(3, -1);
                for (int p = 0; p < 3; ++p)
                    counts64.push_back((std::int64_t(1) << 40) + 10 * r + p);
                const std::vector<std::int64_t> ones(3, 1);
                check(c.allToAll(Tensor::contiguous(counts64.data(), DType::I64, 1, 3, DeviceKind::Cpu), ones,
                                 Tensor::contiguous(got64.data(), DType::I64, 1, 3, DeviceKind::Cpu), ones)
                          .ok(),
                      "all_to_all int64 status");
                for (int p = 0; p < 3; ++p)
                    check(got64[std::size_t(p)] == (std::int64_t(1) << 40) + 10 * p + r, "all_to_all int64 value");
                // Column pieces of a [2, 6] tensor: ranks hold columns [0, 1), [1, 3), [3, 6).
                std::vector<float> cols(12, -1.0f);
                const std::vector<std::int64_t> offsets{0, 1, 3, 6};
                for (int row = 0; row < 2; ++row)
                    for (std::int64_t j = offsets[std::size_t(r)]; j < offsets[std::size_t(r) + 1]; ++j)
                        cols[std::size_t(row * 6 + j)] = float(100 * r + 10 * row + j);
                check(c.gathersColumns() && c.allGatherColumns(Tensor::contiguous(cols.data(), DType::F32, 2, 6, DeviceKind::Cpu), offsets).ok(),
                      "all_gather columns status");
                for (int row = 0; row < 2; ++row)
                    for (int j = 0; j < 6; ++j) {
                        const int owner = j < 1 ? 0 : j < 3 ? 1 : 2;
                        check(cols[std::size_t(row * 6 + j)] == float(100 * owner + 10 * row + j), "all_gather columns value");
                    }
                // Integers travel as integers: 2^53 + 1 is not a double, let alone a float.
                const std::int64_t big = (std::int64_t(1) << 53) + 1 + r;
                std::vector<std::int64_t> ints, lens;
                check(c.exchange(std::vector<std::int64_t>(std::size_t(r), big), ints, lens).ok(), "exchange status");
                check(lens == std::vector<std::int64_t>{0, 1, 2} && ints == std::vector<std::int64_t>{big - r + 1, big - r + 2, big - r + 2},
                      "exchange value");
                check(c.barrier().ok(), "barrier");
            });
        for (auto& t : ts)
            t.join();
        for (const auto& e : errors)
            QVERIFY2(e.empty(), e.c_str());
    }

    void localCommunicatorSumsHalvesInFloat_data()
    {
        QTest::addColumn<int>("dtype");
        QTest::addRow("bf16") << int(DType::BF16);
        QTest::addRow("f16") << int(DType::F16);
    }
    void localCommunicatorSumsHalvesInFloat()
    {
        // Rank 0 holds 2^8 (bf16) or 2^11 (f16), the others 1, where one step of the 16-bit type is 2:
        // added and rounded pairwise the sum stays 2^k; summed in fp32 and rounded once it is 2^k + 4.
        const bool bf16 = QTest::currentDataTag() == QLatin1String("bf16");
        const DType dt = bf16 ? DType::BF16 : DType::F16;
        const float big = bf16 ? 256.0f : 2048.0f;
        auto group = makeLocalGroup(4, std::chrono::seconds(10));
        std::vector<std::vector<std::uint16_t>> bufs(4, std::vector<std::uint16_t>(9));
        std::vector<std::thread> ts;
        std::vector<Status> st(4);
        for (int r = 0; r < 4; ++r)
            ts.emplace_back([&, r] {
                std::vector<float> v(9, r == 0 ? big : 1.0f);
                fromFloat(v.data(), dt, bufs[std::size_t(r)].data(), 9);
                st[std::size_t(r)] = group->rank(r).allReduce(Tensor::contiguous(bufs[std::size_t(r)].data(), dt, 1, 9, DeviceKind::Cpu));
            });
        for (auto& t : ts)
            t.join();
        for (int r = 0; r < 4; ++r) {
            QVERIFY2(st[std::size_t(r)].ok(), st[std::size_t(r)].message().c_str());
            std::vector<float> back(9);
            toFloat(bufs[std::size_t(r)].data(), dt, back.data(), 9);
            for (float x : back)
                QCOMPARE(x, big + 4);
        }
    }

    // All-reduce of random values over the sizes that meet the chunked path's edges (the local
    // communicator sums 4096-element chunks of each rank's part, parts whole 64-byte lines): every
    // rank ends with bit-identical results equal to the sum taken in rank order in fp32 and rounded
    // once. Out of place, in place, and with each output overlapping its input one element further
    // on (the fallback that sums a whole part before writing).
    void localAllReduceChunks_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addColumn<int>("dtype");
        QTest::addColumn<qint64>("n");
        QTest::addColumn<int>("layout"); // 0 out of place, 1 in place, 2 output overlapping the input shifted by one
        constexpr std::int64_t chunk = 4096;
        for (int t : {2, 3, 4})
            for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
                const std::int64_t eb = dtypeBytes(dt, 1);
                std::vector<std::int64_t> sizes{1, t - 1, t + 1, chunk - 1, chunk, chunk + 1, t * chunk - 1, t * chunk + 1, 2 * t * chunk + 3};
                if ((dt != DType::F16 || t == 2) && !tptest::reducedRun()) // (reduced: the chunk edges only)
                    sizes.push_back((8 << 20) / eb + 3); // 8 MiB + 3 elements
                for (std::int64_t n : sizes)
                    for (int layout : {0, 1, 2}) {
                        if (layout == 2 && n > 2 * t * chunk + 3)
                            continue;
                        QTest::addRow("T%d %s n=%lld %s", t, dtypeTag(dt), static_cast<long long>(n),
                                      layout == 0 ? "out" : layout == 1 ? "in place" : "overlap")
                            << t << int(dt) << qint64(n) << layout;
                    }
            }
    }
    void localAllReduceChunks()
    {
        QFETCH(int, ranks);
        QFETCH(int, dtype);
        QFETCH(qint64, n);
        QFETCH(int, layout);
        const DType dt = DType(dtype);
        std::vector<std::vector<std::uint32_t>> in;
        for (int r = 0; r < ranks; ++r)
            in.push_back(randomStorage(dt, n, unsigned(1000 * ranks + r)));
        std::vector<std::uint32_t> want(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) {
            float acc = storedToFloat(dt, in[0][std::size_t(i)]);
            for (int r = 1; r < ranks; ++r)
                acc += storedToFloat(dt, in[std::size_t(r)][std::size_t(i)]);
            want[std::size_t(i)] = floatToStored(dt, acc);
        }
        const std::int64_t eb = dtypeBytes(dt, 1);
        std::vector<RankBuffer> a, b;
        for (int r = 0; r < ranks; ++r) {
            a.push_back({std::vector<unsigned char>(std::size_t((n + 1) * eb)), dt});
            b.push_back({std::vector<unsigned char>(std::size_t(n * eb), 0xab), dt});
            a.back().fill(in[std::size_t(r)]);
        }
        auto group = makeLocalGroup(ranks, std::chrono::seconds(60));
        const std::string err = onRanks(ranks, [&](int r) -> std::string {
            RankBuffer& mine = a[std::size_t(r)];
            const Tensor src = mine.view(0, n);
            const Tensor dst = layout == 0 ? b[std::size_t(r)].view(0, n) : layout == 1 ? src : mine.view(1, n);
            const Status st = group->rank(r).allReduce(src, dst);
            return st.ok() ? std::string() : st.message();
        });
        QVERIFY2(err.empty(), err.c_str());
        for (int r = 0; r < ranks; ++r) {
            const RankBuffer& out = layout == 0 ? b[std::size_t(r)] : a[std::size_t(r)];
            const std::int64_t base = layout == 2 ? 1 : 0;
            std::int64_t bad = 0, first = -1;
            for (std::int64_t i = 0; i < n; ++i)
                if (out.at(base + i) != want[std::size_t(i)] && bad++ == 0)
                    first = i;
            QVERIFY2(bad == 0, qPrintable(QStringLiteral("rank %1: %2 elements differ, the first at %3").arg(r).arg(bad).arg(first)));
        }
    }

    void localAllReduceEveryF16AndBf16Value()
    {
        // One rank: the all-reduce is the round trip through fp32, for every 16-bit pattern (the
        // communicator's own branch-free f16 conversions against tp::halfToFloat / floatToHalf).
        for (DType dt : {DType::F16, DType::BF16}) {
            std::vector<std::uint16_t> v(65536), w(65536);
            for (std::size_t i = 0; i < v.size(); ++i)
                v[i] = std::uint16_t(i);
            auto group = makeLocalGroup(1);
            QVERIFY(group->rank(0).allReduce(Tensor::contiguous(v.data(), dt, 1, 65536, DeviceKind::Cpu),
                                             Tensor::contiguous(w.data(), dt, 1, 65536, DeviceKind::Cpu)).ok());
            for (std::size_t i = 0; i < v.size(); ++i) {
                const float f = dt == DType::F16 ? halfToFloat(v[i]) : bf16ToFloat(v[i]);
                const std::uint16_t want = dt == DType::F16 ? floatToHalf(f) : floatToBf16(f);
                QVERIFY2(w[i] == want, qPrintable(QStringLiteral("%1 0x%2: 0x%3, want 0x%4").arg(dtypeTag(dt)).arg(i, 4, 16, QLatin1Char('0'))
                                                       .arg(w[i], 4, 16, QLatin1Char('0')).arg(want, 4, 16, QLatin1Char('0'))));
            }
        }
        // Two ranks, sums that round: every float bit pattern's neighbourhood in f16 (subnormal,
        // normal, overflow to infinity) against floatToHalf.
        std::vector<std::uint16_t> x(65536), y(65536, 0x0001), z(65536); // + the smallest subnormal
        for (std::size_t i = 0; i < x.size(); ++i)
            x[i] = std::uint16_t(i);
        auto group = makeLocalGroup(2);
        const std::string err = onRanks(2, [&](int r) -> std::string {
            auto* src = r == 0 ? x.data() : y.data();
            std::vector<std::uint16_t> mine(65536);
            const Status st = group->rank(r).allReduce(Tensor::contiguous(src, DType::F16, 1, 65536, DeviceKind::Cpu),
                                                       Tensor::contiguous(r == 0 ? z.data() : mine.data(), DType::F16, 1, 65536, DeviceKind::Cpu));
            return st.ok() ? std::string() : st.message();
        });
        QVERIFY2(err.empty(), err.c_str());
        for (std::size_t i = 0; i < x.size(); ++i)
            QCOMPARE(z[i], floatToHalf(halfToFloat(x[i]) + halfToFloat(0x0001)));
    }

    void localReduceScatterChunks_data()
    {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<QString>("counts");
        for (DType dt : {DType::F32, DType::BF16})
            for (const char* c : {"1,0", "4097,4095", "1,4096,8193", "0,12289,3,4096"})
                QTest::addRow("%s %s", dtypeTag(dt), c) << int(dt) << QString::fromLatin1(c);
    }
    void localReduceScatterChunks()
    {
        QFETCH(int, dtype);
        QFETCH(QString, counts);
        const DType dt = DType(dtype);
        std::vector<std::int64_t> cs;
        for (const auto& c : counts.split(QLatin1Char(',')))
            cs.push_back(c.toLongLong());
        const int ranks = int(cs.size());
        const auto off = pieceOffsets(cs);
        const std::int64_t n = off.back();
        std::vector<std::vector<std::uint32_t>> in;
        std::vector<RankBuffer> a, b;
        for (int r = 0; r < ranks; ++r) {
            in.push_back(randomStorage(dt, n, unsigned(77 + r)));
            a.push_back({std::vector<unsigned char>(std::size_t(n * dtypeBytes(dt, 1))), dt});
            a.back().fill(in.back());
            b.push_back({std::vector<unsigned char>(std::size_t(cs[std::size_t(r)] * dtypeBytes(dt, 1))), dt});
        }
        auto group = makeLocalGroup(ranks);
        const std::string err = onRanks(ranks, [&](int r) -> std::string {
            const Status st = group->rank(r).reduceScatter(a[std::size_t(r)].view(0, n), b[std::size_t(r)].view(0, cs[std::size_t(r)]), cs);
            return st.ok() ? std::string() : st.message();
        });
        QVERIFY2(err.empty(), err.c_str());
        for (int r = 0; r < ranks; ++r)
            for (std::int64_t i = 0; i < cs[std::size_t(r)]; ++i) {
                const std::int64_t e = off[std::size_t(r)] + i;
                float acc = storedToFloat(dt, in[0][std::size_t(e)]);
                for (int p = 1; p < ranks; ++p)
                    acc += storedToFloat(dt, in[std::size_t(p)][std::size_t(e)]);
                if (b[std::size_t(r)].at(i) != floatToStored(dt, acc))
                    QFAIL(qPrintable(QStringLiteral("rank %1 element %2").arg(r).arg(i)));
            }
    }

    void watchdogAndAbort()
    {
        // One rank never arrives: the other gets DeadlineExceeded, not a hang.
        auto group = makeLocalGroup(2, std::chrono::milliseconds(200));
        std::vector<float> v(4, 1.0f);
        const Status st = group->rank(0).allReduce(host(v));
        QCOMPARE(st.code(), StatusCode::DeadlineExceeded);
        QVERIFY(st.message().find("watchdog") != std::string::npos);
        // After an abort every call fails at once.
        QVERIFY(!group->rank(1).barrier().ok());
    }

    // Every family's prefill logits within 1e-4 of Transformers' at every valid T = 1, 2, 4 of the
    // default, the attention-replicated and the sequence-parallel plans.
    void matchesTransformers_data()
    {
        QTest::addColumn<QString>("family");
        for (const char* f : {"llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "phi3", "mixtral", "qwen3_moe", "deepseek_v3",
                              "gpt_oss", "llama4_text"})
            QTest::addRow("%s", f) << f;
    }
    void matchesTransformers()
    {
        QFETCH(QString, family);
        const std::string fam = family.toStdString();
        auto om = openModel(kModels + fam);
        QVERIFY2(om.ok(), om.status().message().c_str());
        const Reference ref = reference(fam);
        const WeightSource weights{&*om->checkpoint};
        RunOptions o = promptRun(ref);
        std::vector<float> t1;
        std::set<int> ranAt, dispatchedAt;
        for (Variant variant : kVariants)
            for (int tp : {1, 2, 4}) {
                const std::optional<Plan> plan = planOf(variant, om->spec, tp);
                if (!plan)
                    continue;
                const ShardedGraph g = shardModel(om->spec, *plan, {.batch = ref.batch, .seq = ref.seq});
                if (!g.valid())
                    continue; // e.g. 2 KV heads at T=4 under the default plan
                auto r = runModel(om->spec, g, weights, o);
                QVERIFY2(r.ok(), r.status().message().c_str());
                const double err = relError(r->logits, ref.logits);
                QVERIFY2(err < 1e-4, qPrintable(QString("T=%1%2: relative error %3").arg(tp).arg(variantText(variant)).arg(err)));
                if (tp == 1 && variant == Variant::Default)
                    t1 = r->logits;
                else
                    QVERIFY(relError(r->logits, t1) < 1e-5);
                if (tp > 1)
                    QVERIFY(!r->spans.empty());
                if (variant == Variant::AllToAllExperts && tp > 1) {
                    // Each dispatched experts layer: its three all-to-alls (counts, rows, rows back) on every rank.
                    const auto isA2a = [&](const Span& sp) {
                        return sp.collective >= 0 && g.collectives[std::size_t(sp.collective)].kind == CollectiveKind::AllToAll;
                    };
                    const auto dispatchedLayers = std::count_if(g.nodes.begin(), g.nodes.end(), [](const NodeSharding& n) { return n.dispatch >= 0; });
                    QVERIFY(dispatchedLayers > 0);
                    QCOMPARE(std::count_if(r->spans.begin(), r->spans.end(), isA2a), 3 * tp * dispatchedLayers);
                    dispatchedAt.insert(tp);
                }
                ranAt.insert(tp);
            }
        QVERIFY2(ranAt == (std::set<int>{1, 2, 4}), "every family runs at T = 1, 2 and 4");
        QVERIFY2(om->spec.defaultEpPlan.empty() || dispatchedAt.contains(2), "a class with an ep_plan dispatches its experts all-to-all at T = 2");
    }

    // Every shipped plan (plans/index.json) of an architecture the engine runs, on that
    // architecture's fixture at T = 1, 2, 4 where the plan is valid for it: the logits are
    // Transformers' within 1e-4, and the collectives the run issued (its spans, per kind: how many
    // and their bytes) are the preview's (the sharded graph's collectives on every rank, their
    // bytes as the cost model counts them).
    void shippedPlansMatchTransformers()
    {
        const std::map<std::string, std::string> fixtureOf = {
            {"llama", "llama"}, {"mistral", "mistral"}, {"qwen2", "qwen2"},     {"qwen3", "qwen3"},
            {"phi3", "phi3"},   {"mixtral", "mixtral"}, {"qwen3_moe", "qwen3_moe"}, {"gemma3", "gemma3_text"},
            {"gpt_oss", "gpt_oss"}, {"deepseek_v3", "deepseek_v3"}, {"llama4", "llama4_text"}};
        std::ifstream in(TP_SOURCE_DIR "/plans/index.json");
        QVERIFY(in.good());
        const auto index = nlohmann::json::parse(in);
        std::set<std::string> files;
        for (const auto& e : index.at("plans"))
            files.insert(e.at("file").get<std::string>());
        const HardwareProfile hw = findHardware("local-cpu").value();
        int runs = 0;
        for (const std::string& file : files) {
            const std::string dir = file.substr(0, file.find('/'));
            QVERIFY2(fixtureOf.contains(dir), qPrintable(QString("no fixture for plans/%1").arg(file.c_str())));
            const std::string fam = fixtureOf.at(dir);
            auto om = openModel(kModels + fam);
            QVERIFY2(om.ok(), om.status().message().c_str());
            auto plan = loadPlanFile(std::string(TP_SOURCE_DIR "/plans/") + file, VersionProfile::G3);
            QVERIFY2(plan.ok(), plan.status().message().c_str());
            const Reference ref = reference(fam);
            RunOptions o;
            o.batch = ref.batch;
            o.seq = ref.seq;
            o.tokens = ref.tokens;
            std::set<int> ranAt;
            for (int tp : {1, 2, 4}) {
                Plan pl = resolveOverrides(om->spec, *plan);
                pl.tpSize = tp;
                const ShardedGraph g = shardModel(om->spec, pl, {.batch = ref.batch, .seq = ref.seq});
                if (!g.valid())
                    continue;
                const QString at = QString("plans/%1 on the %2 fixture at T=%3").arg(file.c_str(), fam.c_str()).arg(tp);
                auto r = runModel(om->spec, g, {&*om->checkpoint}, o);
                QVERIFY2(r.ok(), qPrintable(at + ": " + r.status().message().c_str()));
                const double err = relError(r->logits, ref.logits);
                QVERIFY2(err < 1e-4, qPrintable(at + QString(": relative error %1").arg(err)));
                const tptest::CollectiveTally issued = tptest::issuedCollectives(g, r->spans),
                                              previewed = tptest::previewedCollectives(om->spec, g, hw);
                QVERIFY2(issued == previewed, qPrintable(at + ": the collectives issued are not the preview's"));
                ranAt.insert(tp);
                ++runs;
            }
            QVERIFY2(ranAt.size() >= 2, qPrintable(QString("plans/%1 runs at T > 1 on its fixture").arg(file.c_str())));
        }
        QVERIFY(runs >= 30);
    }

    // Greedy decode with the KV cache against Transformers' generate(): the same tokens, each step's
    // logits within 1e-4, at every valid T of the default, the attention-replicated and the
    // sequence-parallel plans (a decode step's B rows split over T ranks leave some with none); and
    // decode after prefill equals one prefill over the whole sequence.
    void decodeMatchesTransformersGenerate_data() { matchesTransformers_data(); }
    void decodeMatchesTransformersGenerate()
    {
        QFETCH(QString, family);
        const std::string fam = family.toStdString();
        auto om = openModel(kModels + fam);
        QVERIFY2(om.ok(), om.status().message().c_str());
        const Generation ref = generation(fam);
        const auto V = static_cast<std::size_t>(ref.vocab), B = static_cast<std::size_t>(ref.batch);
        RunOptions o;
        o.batch = ref.batch;
        o.seq = ref.prompt;
        o.tokens = ref.promptTokens;
        o.decodeSteps = static_cast<int>(ref.steps) - 1; // the first token comes from prefill
        std::set<int> ranAt;
        std::vector<float> t1;
        for (Variant variant : kVariants)
            for (int tp : {1, 2, 4}) {
                const std::optional<Plan> plan = planOf(variant, om->spec, tp);
                if (!plan)
                    continue;
                const ShardedGraph g = shardModel(om->spec, *plan, {.batch = ref.batch, .seq = ref.prompt});
                if (!g.valid())
                    continue;
                auto r = runModel(om->spec, g, {&*om->checkpoint}, o);
                QVERIFY2(r.ok(), r.status().message().c_str());
                const QString at = QString("T=%1%2").arg(tp).arg(variantText(variant));
                std::vector<std::int32_t> tokens;
                for (const auto& seq : r->decode.generated)
                    tokens.insert(tokens.end(), seq.begin(), seq.end());
                QVERIFY2(tokens == ref.tokens, qPrintable(at + ": generated tokens differ from Transformers'"));
                const std::vector<float> got = engineStepLogits(*r, ref.batch, ref.prompt);
                QCOMPARE(got.size(), ref.stepLogits.size());
                for (std::int64_t j = 0; j < ref.steps; ++j) {
                    const auto from = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(j) * B * V), n = static_cast<std::ptrdiff_t>(B * V);
                    const double err = relError(std::vector<float>(got.begin() + from, got.begin() + from + n),
                                                std::vector<float>(ref.stepLogits.begin() + from, ref.stepLogits.begin() + from + n));
                    QVERIFY2(err < 1e-4, qPrintable(at + QString(", step %1: relative error %2").arg(j).arg(err)));
                }
                if (t1.empty())
                    t1 = got;
                else
                    QVERIFY(relError(got, t1) < 1e-5);
                // What was measured: every step of every timed iteration, one representative step's spans.
                QCOMPARE(r->decode.stepSeconds.size(), std::size_t(o.decodeSteps));
                QVERIFY(r->decode.spanStep >= 0 && r->decode.spanStep < o.decodeSteps);
                QCOMPARE(r->decode.spans.size(), r->spans.size());
                ranAt.insert(tp);
            }
        QVERIFY2(ranAt == (std::set<int>{1, 2, 4}), "every family decodes at T = 1, 2 and 4");

        // The head at the last positions only (as generate() computes prefill): the same logits there,
        // the same steps and tokens.
        RunOptions last = o;
        last.lastPositionLogits = true;
        auto r = runModel(om->spec,
                          shardModel(om->spec, defaultPlan(om->spec, 2), {.batch = ref.batch, .seq = ref.prompt, .lastPositionLogits = true}),
                          {&*om->checkpoint}, last);
        QVERIFY2(r.ok(), r.status().message().c_str());
        QCOMPARE(r->logits.size(), B * V);
        QVERIFY(relError(engineStepLogits(*r, ref.batch, 1), t1) < 1e-5);

        // One prefill over the prompt and the generated tokens gives, at the positions that picked
        // them, what the decode steps computed from the cache.
        const std::int64_t S = ref.prompt, L = S + o.decodeSteps;
        RunOptions whole;
        whole.batch = ref.batch;
        whole.seq = L;
        for (std::int64_t b = 0; b < ref.batch; ++b) {
            whole.tokens.insert(whole.tokens.end(), ref.promptTokens.begin() + b * S, ref.promptTokens.begin() + (b + 1) * S);
            whole.tokens.insert(whole.tokens.end(), ref.tokens.begin() + b * ref.steps, ref.tokens.begin() + b * ref.steps + o.decodeSteps);
        }
        auto full = runModel(om->spec, shardModel(om->spec, defaultPlan(om->spec, 2), {.batch = ref.batch, .seq = L}),
                             {&*om->checkpoint}, whole);
        QVERIFY2(full.ok(), full.status().message().c_str());
        std::vector<float> fromPrefill;
        for (std::int64_t j = 0; j < ref.steps; ++j)
            for (std::int64_t b = 0; b < ref.batch; ++b) {
                const auto row = full->logits.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(b * L + S - 1 + j) * V);
                fromPrefill.insert(fromPrefill.end(), row, row + static_cast<std::ptrdiff_t>(V));
            }
        QVERIFY2(relError(fromPrefill, t1) < 1e-5, qPrintable(QString("decode vs prefill: %1").arg(relError(fromPrefill, t1))));
    }

    void matchesTransformersInBf16_data() { matchesTransformers_data(); }
    void matchesTransformersInBf16()
    {
        // bf16 storage (weights rounded once, activations rounded after every op, fp32 accumulation)
        // against Transformers with the checkpoint loaded in bf16: each is a bf16 rounding of the
        // same fp32 model, so they must agree to bf16 precision, as far apart as Transformers' bf16
        // logits are from its fp32 ones.
        QFETCH(QString, family);
        const std::string fam = family.toStdString();
        auto om = openModel(kModels + fam);
        QVERIFY2(om.ok(), om.status().message().c_str());
        const Reference ref = reference(fam);
        RunOptions o = promptRun(ref);
        o.dtype = DType::BF16;
        const double hfDrift = relError(ref.logitsBf16, ref.logits);
        for (int tp : {1, 2, 4}) {
            const ShardedGraph g = shardModel(om->spec, defaultPlan(om->spec, tp), {.batch = ref.batch, .seq = ref.seq, .activationDtype = DType::BF16});
            if (!g.valid())
                continue;
            auto r = runModel(om->spec, g, {&*om->checkpoint}, o);
            QVERIFY2(r.ok(), r.status().message().c_str());
            const double vsHf = relError(r->logits, ref.logitsBf16), vsFp32 = relError(r->logits, ref.logits);
            qInfo("%s T=%d bf16: %.4f from Transformers bf16, %.4f from fp32 (Transformers bf16 is %.4f from fp32)",
                  fam.c_str(), tp, vsHf, vsFp32, hfDrift);
            // 2e-2 (Transformers' own bf16 drift reaches 1.95e-2 on the Gemma 2 fixture, whose
            // logits pass a √hidden scale, (1 + w) norms and a tanh cap), or 1.5× that drift where a
            // near tie in the router picks another expert in bf16.
            const double tolerance = std::max(2e-2, 1.5 * hfDrift);
            QVERIFY2(vsHf < tolerance, qPrintable(QString("T=%1: %2 from Transformers bf16").arg(tp).arg(vsHf)));
            QVERIFY2(vsFp32 < tolerance, qPrintable(QString("T=%1: %2 from fp32").arg(tp).arg(vsFp32)));
        }
    }

    // Transformers 5.1–5.15's expert parallelism (G2): the experts split by id (grouped_gemm, biases
    // too), 'ep_router' on the router (the other ranks' routes masked, the ids made local) and
    // moe_tp_experts' all-reduce: Transformers' logits at every T the experts split over, one
    // all-reduce per MoE layer beyond the plain plan's. Without ep_router the plan is an error.
    void maskedExpertParallelOfG2_data()
    {
        QTest::addColumn<QString>("family");
        for (const char* f : {"mixtral", "qwen3_moe", "gpt_oss", "deepseek_v3"})
            QTest::newRow(f) << f;
    }
    void maskedExpertParallelOfG2()
    {
        QFETCH(QString, family);
        const std::string fam = family.toStdString();
        auto om = openModel(kModels + fam);
        QVERIFY2(om.ok(), om.status().message().c_str());
        const Reference ref = reference(fam);
        RunOptions o = promptRun(ref);
        std::set<int> ranAt;
        for (int tp : {2, 4}) {
            Plan p = defaultPlan(om->spec, tp, VersionProfile::G2);
            std::set<std::string> keys; // generic keys of the routers and the experts' parameters
            for (const ModuleSpec& m : om->spec.modules)
                if (m.kind == ModuleKind::Router)
                    keys.insert(genericName(m.path) + "=ep_router");
                else if (m.kind == ModuleKind::Experts) {
                    keys.insert(genericName(m.path) + "=moe_tp_experts");
                    for (const ParamSpec& w : m.params)
                        keys.insert(genericName(m.paramPath(w)) + "=grouped_gemm");
                }
            std::erase_if(p.entries, [&](const PlanEntry& e) { return e.key.find(".experts") != std::string::npos || e.key.ends_with(".gate") || e.key.ends_with(".router"); });
            Plan withoutRouter = p;
            for (const std::string& k : keys) {
                const std::string key = k.substr(0, k.find('=')), style = k.substr(k.find('=') + 1);
                p.entries.push_back({key, style});
                if (style != "ep_router")
                    withoutRouter.entries.push_back({key, style});
            }
            const ShardedGraph g = shardModel(om->spec, p, {.batch = ref.batch, .seq = ref.seq});
            const ShardedGraph bad = shardModel(om->spec, withoutRouter, {.batch = ref.batch, .seq = ref.seq});
            QVERIFY2(!bad.valid(), "grouped_gemm experts without ep_router are an error under G2");
            if (!g.valid())
                continue; // experts that do not split over T (deepseek_v3's 6 at T = 4)
            const QString at = QString("%1 at T=%2").arg(family).arg(tp);
            auto r = runModel(om->spec, g, {&*om->checkpoint}, o);
            QVERIFY2(r.ok(), qPrintable(at + ": " + r.status().message().c_str()));
            const double err = relError(r->logits, ref.logits);
            QVERIFY2(err < 1e-4, qPrintable(at + QString(": relative error %1").arg(err)));
            int expertReductions = 0;
            for (const Collective& c : g.collectives)
                expertReductions += c.kind == CollectiveKind::AllReduce && c.style == "moe_tp_experts";
            QVERIFY(expertReductions > 0);
            ranAt.insert(tp);
        }
        QVERIFY2(ranAt.contains(2), "the experts split over 2 ranks");
    }

    // Block styles: a block's partial output summed by the style on the block module — all_reduce
    // (G3, over a down_proj whose weight a parameter key splits, without a module key) and G1's
    // gather over local_rowwise projections — give Transformers' logits with one all-reduce per
    // block; an all_reduce over a block that is reduced already is an error.
    void blockStylesSumTheBlock()
    {
        auto om = openModel(kModels + "llama");
        QVERIFY2(om.ok(), om.status().message().c_str());
        const Reference ref = reference("llama");
        RunOptions o = promptRun(ref);
        const std::int64_t layers = om->spec.config.numLayers;
        auto restyled = [&](Plan p, const std::vector<std::pair<std::string, std::string>>& edits) {
            for (const auto& [key, style] : edits) {
                std::erase_if(p.entries, [&](const PlanEntry& e) { return e.key == key; });
                if (!style.empty())
                    p.entries.push_back({key, style});
            }
            return p;
        };
        const Plan g3 = restyled(defaultPlan(om->spec, 2), {{"model.layers.*.mlp.down_proj", ""},
                                                            {"model.layers.*.mlp.down_proj.weight", "rowwise"},
                                                            {"model.layers.*.mlp", "all_reduce"}});
        Plan g1; // Transformers 4.5x's names: the embedding whole, the head colwise_rep
        g1.tpSize = 2;
        g1.profile = VersionProfile::G1;
        g1.entries = {{"lm_head", "colwise_rep"},
                      {"model.layers.*.self_attn.q_proj", "local_colwise"},
                      {"model.layers.*.self_attn.k_proj", "local_colwise"},
                      {"model.layers.*.self_attn.v_proj", "local_colwise"},
                      {"model.layers.*.self_attn.o_proj", "local_rowwise"},
                      {"model.layers.*.self_attn", "gather"},
                      {"model.layers.*.mlp.gate_proj", "local_colwise"},
                      {"model.layers.*.mlp.up_proj", "local_colwise"},
                      {"model.layers.*.mlp.down_proj", "local_rowwise"},
                      {"model.layers.*.mlp", "gather"}};
        for (const Plan* p : std::initializer_list<const Plan*>{&g3, &g1}) {
            const ShardedGraph g = shardModel(om->spec, *p, {.batch = ref.batch, .seq = ref.seq});
            QVERIFY2(g.valid(), g.diagnostics.empty() ? "" : g.diagnostics.front().message.c_str());
            std::map<std::string, int> reducedBy; // generic block → all-reduces
            for (const Collective& c : g.collectives)
                if (c.kind == CollectiveKind::AllReduce && (c.style == "all_reduce" || c.style == "gather"))
                    ++reducedBy[genericName(c.where)];
            QCOMPARE(reducedBy["model.layers.*.mlp"], int(layers));
            if (p == &g1)
                QCOMPARE(reducedBy["model.layers.*.self_attn"], int(layers));
            auto r = runModel(om->spec, g, {&*om->checkpoint}, o);
            QVERIFY2(r.ok(), r.status().message().c_str());
            const double err = relError(r->logits, ref.logits);
            QVERIFY2(err < 1e-4, qPrintable(QString("relative error %1").arg(err)));
        }
        const ShardedGraph twice = shardModel(om->spec, restyled(defaultPlan(om->spec, 2), {{"model.layers.*.mlp", "all_reduce"}}));
        QVERIFY(!twice.valid());
        QVERIFY(std::any_of(twice.diagnostics.begin(), twice.diagnostics.end(), [](const Diagnostic& d) {
            return d.where == "model.layers.*.mlp" && d.message.find("that output is whole: the sum would be 2× too large") != std::string::npos;
        }));
    }

    void hiddenShardedEmbeddingAndCustomReduceScatterFreeStyles()
    {
        // embedding_colwise (hidden split, all-gathered) and a custom colwise-gather head also run.
        auto om = openModel(kModels + "llama");
        QVERIFY(om.ok());
        const Reference ref = reference("llama");
        Plan p = defaultPlan(om->spec, 2);
        for (auto& e : p.entries) {
            if (e.key == "model.embed_tokens")
                e.style = "embedding_colwise";
            if (e.key == "lm_head")
                e.style = "head_gather";
        }
        p.customStyles.push_back(*makeCustomStyle({"head_gather", "colwise", Layout::Replicate, Layout::Replicate}));
        const ShardedGraph g = shardModel(om->spec, p, {.batch = ref.batch, .seq = ref.seq});
        QVERIFY(g.valid());
        RunOptions o = promptRun(ref);
        auto r = runModel(om->spec, g, {&*om->checkpoint}, o);
        QVERIFY2(r.ok(), r.status().message().c_str());
        QVERIFY(relError(r->logits, ref.logits) < 1e-4);
    }

    void randomWeightsAgreeAcrossTp()
    {
        // A config alone: seeded weights that depend on the global index, so T=2 equals T=1.
        const ModelSpec s = tptest::openSpec("example");
        RunOptions o;
        o.seq = 8;
        auto one = runModel(s, shardModel(s, defaultPlan(s, 1)), {}, o);
        auto two = runModel(s, shardModel(s, defaultPlan(s, 2)), {}, o);
        QVERIFY2(one.ok() && two.ok(), (one.ok() ? two.status() : one.status()).message().c_str());
        QCOMPARE(one->logits.size(), std::size_t(8 * 32000));
        QVERIFY(relError(two->logits, one->logits) < 1e-5);
    }

    void refusals()
    {
        const ModelSpec s = tptest::openSpec("example");
        // A plan with errors never starts.
        Plan bad = defaultPlan(s, 2);
        bad.entries.push_back({"lm_head", "colwise"});
        bad.entries.erase(bad.entries.begin()); // drop the gathered lm_head entry
        auto r = runModel(s, shardModel(s, bad), {}, {});
        QVERIFY(!r.ok());
        QVERIFY2(r.status().message().find("logits are left vocab-sharded") != std::string::npos, r.status().message().c_str());
        // A fixture whose config.json says `key: value` is refused by name with `expected`.
        auto refusedWith = [](const std::string& family, const char* key, const nlohmann::json& value, const std::string& expected) {
            QTemporaryDir dir;
            QVERIFY(dir.isValid());
            const std::string src = kModels + family + "/";
            auto cfg = nlohmann::json::parse(std::ifstream(src + "config.json"));
            cfg[key] = value;
            std::ofstream(dir.filePath("config.json").toStdString()) << cfg.dump();
            QVERIFY(QFile::copy(QString::fromStdString(src + "model.safetensors"), dir.filePath("model.safetensors")));
            auto q = openModel(dir.path().toStdString());
            QVERIFY2(q.ok(), q.status().message().c_str());
            auto r = runModel(q->spec, shardModel(q->spec, defaultPlan(q->spec, 1)), {&*q->checkpoint}, {});
            QCOMPARE(r.status().code(), StatusCode::Unimplemented);
            QVERIFY2(r.status().message().find(expected) != std::string::npos, r.status().message().c_str());
        };
        // A quantized checkpoint (gpt-oss's MXFP4) is refused naming its format, whatever its tensors.
        refusedWith("gpt_oss", "quantization_config", {{"quant_method", "mxfp4"}}, "quantized ('mxfp4'");
        // A forward the ops do not compute (an activation they lack).
        refusedWith("llama", "hidden_act", "xielu", "activation 'xielu'");

        // Phi-3's generate() recomputes its cache when decoding crosses longrope's original context: a decode that
        // crosses it is refused by name, one that stays short of it runs.
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        auto cfg = nlohmann::json::parse(std::ifstream(kModels + "phi3/config.json"));
        cfg["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 10000.0}, {"original_max_position_embeddings", 12},
                                  {"short_factor", {1.0, 1.5, 2.0, 3.0}}, {"long_factor", {1.0, 3.0, 6.0, 12.0}}};
        cfg["original_max_position_embeddings"] = 12;
        std::ofstream(dir.filePath("config.json").toStdString()) << cfg.dump();
        QVERIFY(QFile::copy(QString::fromStdString(kModels + "phi3/model.safetensors"), dir.filePath("model.safetensors")));
        auto phi = openModel(dir.path().toStdString());
        QVERIFY2(phi.ok(), phi.status().message().c_str());
        RunOptions o;
        o.seq = 10;
        o.decodeSteps = 3;
        const ShardedGraph g = shardModel(phi->spec, defaultPlan(phi->spec, 1), {.seq = 10});
        auto crossing = runModel(phi->spec, g, {&*phi->checkpoint}, o);
        QCOMPARE(crossing.status().code(), StatusCode::Unimplemented);
        QVERIFY2(crossing.status().message().find("at most 2 decode steps") != std::string::npos, crossing.status().message().c_str());
        o.decodeSteps = 2;
        QVERIFY(runModel(phi->spec, g, {&*phi->checkpoint}, o).ok());
    }

    void stylesTheEngineDoesNotModelAreRefused()
    {
        // Mega MoE (G2) names the kernel it needs and the plan that runs instead.
        const ModelSpec m = tptest::openSpec(std::string(kModels + "mixtral").c_str());
        Plan mega = defaultPlan(m, 2, VersionProfile::G2);
        for (auto& e : mega.entries)
            if (e.key.ends_with("mlp.experts"))
                e.style = "megamoe_experts";
        auto mr = runModel(m, shardModel(m, mega), {}, {});
        QCOMPARE(mr.status().code(), StatusCode::Unimplemented);
        QVERIFY2(mr.status().message().find("DeepGEMM's Mega MoE kernel") != std::string::npos, mr.status().message().c_str());
    }

    void arenaPlacesLiveBlocksApart()
    {
        // Random lifetimes and sizes: blocks live at the same step never overlap in memory, and the
        // plan lies between the peak of live bytes and their sum.
        std::mt19937 rng(7);
        for (int round = 0; round < 200; ++round) {
            std::vector<ArenaBlock> blocks;
            std::int64_t sum = 0;
            for (int i = 0; i < 40; ++i) {
                const int first = int(rng() % 30);
                blocks.push_back({std::int64_t(rng() % 5000), first, first + int(rng() % 6), -1});
                sum += (blocks.back().bytes + 255) / 256 * 256;
            }
            const std::int64_t total = planArena(blocks, 256);
            QVERIFY(total >= peakLiveBytes(blocks) && total <= sum);
            for (std::size_t i = 0; i < blocks.size(); ++i) {
                QCOMPARE(blocks[i].offset % 256, 0);
                for (std::size_t j = 0; j < i; ++j) {
                    const ArenaBlock &a = blocks[i], &b = blocks[j];
                    const bool together = a.first <= b.last && b.first <= a.last;
                    const bool apart = a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset;
                    QVERIFY2(!together || apart || a.bytes == 0 || b.bytes == 0,
                             qPrintable(QString("round %1: blocks %2 and %3 share memory while both live").arg(round).arg(i).arg(j)));
                }
            }
        }
    }

    void noAllocationPerIteration()
    {
        // Every rank allocates its weights, its arena and its inputs once: 3 allocations whether the
        // run has 1 iteration or 6, and the arena is far below the sum of the tensors it holds.
        const ModelSpec s = tptest::openSpec("example");
        std::vector<std::int64_t> allocations;
        for (int iterations : {1, 6}) {
            RunOptions o;
            o.seq = 16;
            o.warmup = 1;
            o.iterations = iterations;
            auto r = runModel(s, shardModel(s, defaultPlan(s, 2)), {}, o);
            QVERIFY2(r.ok(), r.status().message().c_str());
            QCOMPARE(r->footprint.size(), std::size_t(2));
            for (const RankFootprint& f : r->footprint) {
                allocations.push_back(f.allocations);
                QVERIFY(f.weightBytes > 0 && f.workspaceBytes > 0);
            }
        }
        QCOMPARE(allocations, (std::vector<std::int64_t>{3, 3, 3, 3}));
    }

    // Prefill's logits at the last positions only (--logits last, as generate()): the final norm and
    // the head over B rows give exactly the last rows of the logits at every position; every
    // collective moves what the preview and the cost model say for the same setting (the head's
    // all-gather B·vocab values instead of B·S·vocab), in both modes; the workspace shrinks.
    void lastPositionLogitsAreTheLastRows_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("tp");
        for (const char* m : {"example", "llama", "qwen3_moe"})
            for (int tp : {1, 2})
                QTest::addRow("%s T=%d", m, tp) << m << tp;
    }
    void lastPositionLogitsAreTheLastRows()
    {
        QFETCH(QString, model);
        QFETCH(int, tp);
        const bool example = model == "example";
        std::optional<OpenedModel> om;
        ModelSpec spec;
        RunOptions o;
        if (example) {
            spec = tptest::openSpec("example");
            o.batch = 2;
            o.seq = 8;
        } else {
            auto opened = openModel(kModels + model.toStdString());
            QVERIFY2(opened.ok(), opened.status().message().c_str());
            om = std::move(*opened);
            spec = om->spec;
            const Reference ref = reference(model.toStdString());
            o.batch = ref.batch;
            o.seq = ref.seq;
            o.tokens = ref.tokens;
        }
        const WeightSource weights{om ? &*om->checkpoint : nullptr};
        const HardwareProfile hw = findHardware("local-cpu").value();
        const std::int64_t V = spec.config.vocabSize;
        std::vector<float> all, last;
        std::int64_t workspace[2] = {0, 0};
        for (bool lastOnly : {false, true}) {
            const ShardedGraph g = shardModel(spec, defaultPlan(spec, tp),
                                              {.batch = o.batch, .seq = o.seq, .activationDtype = DType::F32, .lastPositionLogits = lastOnly});
            QVERIFY(g.valid());
            o.lastPositionLogits = lastOnly;
            auto r = runModel(spec, g, weights, o);
            QVERIFY2(r.ok(), r.status().message().c_str());
            QCOMPARE(r->logits.size(), std::size_t((lastOnly ? o.batch : o.batch * o.seq) * V));
            (lastOnly ? last : all) = r->logits;
            workspace[lastOnly] = r->footprint[0].workspaceBytes;
            // Measured = predicted, collective by collective: the spans' bytes are the cost model's.
            const CostReport cost = estimateCost(spec, g, hw);
            int comm = 0;
            for (const Span& sp : r->spans) {
                if (sp.collective < 0)
                    continue;
                ++comm;
                const Collective& c = g.collectives[std::size_t(sp.collective)];
                QCOMPARE(sp.bytes, cost.collectives[std::size_t(sp.collective)].bytes);
                QCOMPARE(c.lastPositions, lastOnly && g.graph.nodes[std::size_t(c.node)].name == "lm_head");
                if (g.graph.nodes[std::size_t(c.node)].name == "lm_head") // the gathered logits
                    QCOMPARE(sp.bytes, (lastOnly ? o.batch : o.batch * o.seq) * V * 4);
            }
            QCOMPARE(comm, tp == 1 ? 0 : tp * int(g.collectives.size()));
            // The final norm and the head at the last positions only, in the preview as in the run.
            for (std::size_t i = 0; i < g.nodes.size(); ++i) {
                const std::string& name = g.graph.nodes[i].name;
                QCOMPARE(g.nodes[i].lastPositions, lastOnly && (name == "lm_head" || name == "model.norm"));
            }
        }
        const double err = relError(last, lastRows(all, o.batch, o.seq, V));
        QVERIFY2(err < 1e-5, qPrintable(QString("last vs all's last rows: relative error %1").arg(err)));
        // The example's 32,000-word head dominates its arena; the fixtures' small vocabularies do not.
        QVERIFY2(example ? workspace[1] < workspace[0] : workspace[1] <= workspace[0],
                 qPrintable(QString("workspace %1 (last) vs %2 (all)").arg(workspace[1]).arg(workspace[0])));
        // The run and the graph must agree on where the logits are, else the spans would not be the preview's.
        o.lastPositionLogits = true;
        auto refused = runModel(spec, shardModel(spec, defaultPlan(spec, tp), {.batch = o.batch, .seq = o.seq}), weights, o);
        QCOMPARE(refused.status().code(), StatusCode::InvalidArgument);
        QVERIFY2(refused.status().message().find("lastPositionLogits") != std::string::npos, refused.status().message().c_str());
    }

    // Nothing is allocated on the heap inside the timed loop: from the warm-up's prefill to the last
    // step of the last iteration (whose logits, spans and tokens are kept) the executor allocates
    // nothing — no gathered-logits buffer, span list, collective count list or label grows there —
    // and neither does the CPU backend: not one allocation, whether the logits are kept
    // (--dump-logits) or not, in f32 and bf16.
    void nothingIsAllocatedInTheTimedLoop_data()
    {
        QTest::addColumn<bool>("keepLogits");
        QTest::addColumn<bool>("lastOnly");
        QTest::addColumn<bool>("bf16");
        QTest::addRow("logits kept") << true << false << false;
        QTest::addRow("logits kept, last positions") << true << true << false;
        QTest::addRow("logits checked only") << false << true << false;
        QTest::addRow("bf16, logits kept") << true << false << true;
    }
    void nothingIsAllocatedInTheTimedLoop()
    {
        QFETCH(bool, keepLogits);
        QFETCH(bool, lastOnly);
        QFETCH(bool, bf16);
        const ModelSpec s = tptest::openSpec("example");
        const int T = 2, steps = tptest::reducedRun() ? 2 : 5, iterations = tptest::reducedRun() ? 2 : 4;
        RunOptions o;
        o.batch = 2;
        o.seq = 16;
        o.warmup = 1;
        o.iterations = iterations;
        o.decodeSteps = steps;
        o.keepLogits = keepLogits;
        o.lastPositionLogits = lastOnly;
        o.dtype = bf16 ? DType::BF16 : DType::F32;
        const ShardedGraph g = shardModel(s, defaultPlan(s, T),
                                          {.batch = o.batch, .seq = o.seq, .activationDtype = o.dtype, .lastPositionLogits = lastOnly});
        // Rank 0 reports after each prefill and each decode step; the first report is the warm-up's
        // prefill, the last one the last iteration's last step (after its logits were read back).
        std::int64_t first = -1, lastSeen = -1;
        o.progress = [&](int, bool, double) {
            const std::int64_t now = g_news.load(std::memory_order_relaxed);
            if (first < 0)
                first = now;
            lastSeen = now;
        };
        o.stepProgress = [&](int, bool, int, double) { lastSeen = g_news.load(std::memory_order_relaxed); };
        auto r = runModel(s, g, {}, o);
        QVERIFY2(r.ok(), r.status().message().c_str());
        QVERIFY(first >= 0 && lastSeen > 0);
        // Forwards after the first report: the warm-up's steps, then each timed iteration's prefill and steps.
        const std::int64_t forwards = steps + iterations * (1 + steps);
        qInfo("%lld heap allocations in %lld forwards at T=%d", static_cast<long long>(lastSeen - first), static_cast<long long>(forwards), T);
        QCOMPARE(lastSeen - first, std::int64_t(0));
        QCOMPARE(r->decode.generated.size(), std::size_t(o.batch));
        QCOMPARE(r->decode.generated[0].size(), std::size_t(steps + 1));
        QCOMPARE(r->iterationSeconds.size(), std::size_t(iterations));
        QCOMPARE(r->decode.stepSeconds.size(), std::size_t(iterations * steps));
        QCOMPARE(r->stepLogits.size(), keepLogits ? std::size_t(steps * o.batch * s.config.vocabSize) : std::size_t(0));
    }

    // Per-layer spread: every timed prefill iteration's per-layer compute + comm (slowest rank) and
    // the last iteration's sampled decode steps; the record carries [min, median, max] per layer,
    // the last iteration's figure lies within it, it round-trips through JSON, and a hostile
    // spread is refused naming the key while a record without one (older versions) still reads.
    void layerSpreadOverIterations()
    {
        const ModelSpec s = tptest::openSpec("example");
        RunOptions o;
        o.seq = 8;
        o.warmup = 1;
        o.iterations = 4;
        o.decodeSteps = 3;
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2), {.batch = o.batch, .seq = o.seq});
        auto r = runModel(s, g, {}, o);
        QVERIFY2(r.ok(), r.status().message().c_str());
        QVERIFY(!r->layerSamplesUs.empty());
        for (const auto& samples : r->layerSamplesUs)
            QCOMPARE(samples.size(), std::size_t(4));
        QCOMPARE(r->decode.layerSamplesUs.size(), r->layerSamplesUs.size());
        for (const auto& samples : r->decode.layerSamplesUs)
            QCOMPARE(samples.size(), std::size_t(3)); // every step of the last iteration is sampled (3 < 64)
        RunRecord rec;
        rec.settings.batch = o.batch;
        rec.settings.seq = o.seq;
        rec.settings.decodeSteps = o.decodeSteps;
        rec.settings.iterations = o.iterations;
        rec.settings.warmup = o.warmup;
        addRun(rec, g, *r);
        QCOMPARE(rec.runs.size(), std::size_t(1));
        for (const auto* layers : {&rec.runs[0].layers, &rec.runs[0].decode.layers}) {
            QVERIFY(layers->size() >= 3);
            for (const LayerTiming& l : *layers) {
                QVERIFY2(l.hasSpread, qPrintable(QStringLiteral("layer %1").arg(l.layer)));
                QVERIFY(l.minUs <= l.medianUs && l.medianUs <= l.maxUs);
                if (l.layer >= 0)
                    QVERIFY(l.minUs > 0);
                // The last iteration's (or the representative step's) figure is one of the samples.
                const double last = l.computeUs + l.commUs;
                QVERIFY2(last >= l.minUs - 1e-6 && last <= l.maxUs + 1e-6,
                         qPrintable(QStringLiteral("layer %1: %2 outside [%3, %4]").arg(l.layer).arg(last).arg(l.minUs).arg(l.maxUs)));
            }
        }
        const std::string text = recordToJson(rec).dump();
        auto back = parseRunRecord(text, "spread.json");
        QVERIFY2(back.ok(), back.status().message().c_str());
        for (std::size_t i = 0; i < rec.runs[0].layers.size(); ++i) {
            const LayerTiming &a = rec.runs[0].layers[i], &b = back->runs[0].layers[i];
            QVERIFY(b.hasSpread);
            QCOMPARE(b.minUs, a.minUs);
            QCOMPARE(b.medianUs, a.medianUs);
            QCOMPARE(b.maxUs, a.maxUs);
        }
        QVERIFY(back->runs[0].decode.layers[1].hasSpread);
        // Older records: no spread_us, still read, no spread.
        nlohmann::json j = nlohmann::json::parse(text);
        for (auto& l : j["runs"][0]["layers"])
            l.erase("spread_us");
        auto old = parseRunRecord(j.dump(), "old.json");
        QVERIFY2(old.ok(), old.status().message().c_str());
        QVERIFY(!old->runs[0].layers[0].hasSpread);
        // Hostile spreads: refused, naming the key.
        for (const char* bad : {R"([1, 2])", R"([3, 2, 1])", R"([-1, 0, 1])", R"(["a", 1, 2])", R"([1, 2, 1e300])", R"({"min": 1})"}) {
            nlohmann::json h = nlohmann::json::parse(text);
            h["runs"][0]["layers"][1]["spread_us"] = nlohmann::json::parse(bad);
            auto e = parseRunRecord(h.dump(), "hostile.json");
            QVERIFY2(!e.ok(), bad);
            QVERIFY2(e.status().message().find("'spread_us'") != std::string::npos, e.status().message().c_str());
            QVERIFY(e.status().message().find("hostile.json") != std::string::npos);
        }
    }

    void hostLoadSeesAnotherProcess()
    {
#if defined(__SANITIZE_THREAD__)
        QSKIP("ThreadSanitizer cannot start a process from this multi-threaded one (QProcess forks); "
              "the sampler is checked against another process in the other builds");
#endif
        // Another process spinning on a core while we sleep: the sampler sees at least half a core of
        // others' work (the spinner has a core to itself unless the host is busier still).
        QProcess spinner;
        spinner.start(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), QStringLiteral("while :; do :; done")});
        QVERIFY(spinner.waitForStarted());
        const HostLoadSampler sampler;
        QThread::msleep(800);
        const double others = sampler.otherCores();
        spinner.kill();
        spinner.waitForFinished();
        QVERIFY2(others >= 0.5 && others <= std::thread::hardware_concurrency(), qPrintable(QString::number(others)));
    }

    void hostLoadIsMeasuredAndRecorded()
    {
        // A threaded run measures it; the record carries it and reads it back; MPI-style absence is -1.
        const ModelSpec s = tptest::openSpec("example");
        RunOptions o;
        o.seq = 8;
        o.iterations = 2;
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2), {.batch = o.batch, .seq = o.seq});
        auto r = runModel(s, g, {}, o);
        QVERIFY2(r.ok(), r.status().message().c_str());
        QVERIFY2(r->hostOtherCores >= 0 && r->hostOtherCores <= std::thread::hardware_concurrency(),
                 qPrintable(QString::number(r->hostOtherCores)));
        RunRecord rec;
        rec.settings.batch = o.batch;
        rec.settings.seq = o.seq;
        rec.provenance.logicalCores = 2;
        addRun(rec, g, *r);
        rec.runs[0].hostOtherCores = 1.25;
        const std::string text = recordToJson(rec).dump();
        auto back = parseRunRecord(text, "load.json");
        QVERIFY2(back.ok(), back.status().message().c_str());
        QCOMPARE(back->runs[0].hostOtherCores, 1.25);
        QCOMPARE(back->provenance.logicalCores, 2);
        const std::string warning = hostLoadWarning(*back);
        QVERIFY2(warning.find("kept 1.2 of its 2 cores busy during T=2") != std::string::npos,
                 warning.c_str());
        std::ostringstream console;
        writeConsole(*back, console);
        QVERIFY(console.str().find("warning: the host was busy") != std::string::npos);
        // Quiet, or not measured: no warning.
        for (const double quiet : {0.2, -1.0}) {
            RunRecord q = *back;
            q.runs[0].hostOtherCores = quiet;
            QCOMPARE(hostLoadWarning(q), std::string());
        }
        QVERIFY(!hostWasLoaded(0.25, 2) && hostWasLoaded(0.3, 2) && !hostWasLoaded(3, 64) && hostWasLoaded(3.5, 64));
        nlohmann::json j = nlohmann::json::parse(text);
        j["runs"][0].erase("host_other_cores");
        auto old = parseRunRecord(j.dump(), "old.json");
        QVERIFY2(old.ok(), old.status().message().c_str());
        QCOMPARE(old->runs[0].hostOtherCores, -1.0);
        for (const char* bad : {"-1", "1e300", "\"busy\"", "70000"}) {
            nlohmann::json h = nlohmann::json::parse(text);
            h["runs"][0]["host_other_cores"] = nlohmann::json::parse(bad);
            auto e = parseRunRecord(h.dump(), "hostile.json");
            QVERIFY2(!e.ok(), bad);
            QVERIFY2(e.status().message().find("'host_other_cores'") != std::string::npos, e.status().message().c_str());
            QVERIFY(e.status().message().find("hostile.json") != std::string::npos);
        }
    }

    void emulatedRanksAreExactAndModelled()
    {
        // T=2 emulated on this device: the same logits as T=1; every collective span lasts what the
        // hardware profile predicts for it; the iteration time is the re-timed timeline.
        const ModelSpec s = tptest::openSpec("example");
        const HardwareProfile hw = findHardware("h100-sxm-8").value();
        RunOptions o;
        o.seq = 8;
        o.iterations = 2;
        auto one = runModel(s, shardModel(s, defaultPlan(s, 1)), {}, o);
        o.emulate = true;
        o.commModel = &hw;
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2), {.batch = 1, .seq = 8, .activationDtype = DType::F32});
        auto two = runModel(s, g, {}, o);
        QVERIFY2(one.ok() && two.ok(), (one.ok() ? two.status() : one.status()).message().c_str());
        QVERIFY(two->emulated);
        QVERIFY(relError(two->logits, one->logits) < 1e-5);
        double end = 0;
        int collectives = 0;
        for (const Span& sp : two->spans) {
            end = std::max(end, sp.endUs);
            if (sp.collective < 0)
                continue;
            ++collectives;
            const Collective& c = g.collectives[std::size_t(sp.collective)];
            QCOMPARE(sp.bytes, c.bytes(1, 8, 4));
            QVERIFY(std::abs((sp.endUs - sp.startUs) - 1e6 * hw.collectiveSeconds(c.kind, sp.bytes, 2)) < 1e-6);
        }
        QCOMPARE(collectives, 2 * int(g.collectives.size()));
        QVERIFY(std::abs(two->iterationSeconds.back() - end / 1e6) < 1e-9);
        // Without a model of the collectives there is nothing to time them with.
        o.commModel = nullptr;
        QCOMPARE(runModel(s, g, {}, o).status().code(), StatusCode::InvalidArgument);
    }

    void commSpansSplitWaitFromTransfer()
    {
        // A measured T=2 run: every comm span's wait (for the other rank to arrive) lies in
        // [0, duration]; per collective the last rank to arrive waits ~0, and its wait is exactly
        // last arrival − own arrival. The record keeps it through JSON; hostile values are refused.
        const ModelSpec s = tptest::openSpec("example");
        RunOptions o;
        o.seq = 8;
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2), {.batch = 1, .seq = 8, .activationDtype = DType::F32});
        auto two = runModel(s, g, {}, o);
        QVERIFY2(two.ok(), two.status().message().c_str());
        RunRecord rec;
        rec.settings.model = "example";
        addRun(rec, g, *two);
        const auto& spans = rec.runs.back().spans;
        std::map<int, std::vector<std::size_t>> byCollective; // collective span index → its spans
        std::map<int, double> lastArrival;
        for (std::size_t i = 0, ci = 0; i < two->spans.size(); ++i) {
            const Span& sp = two->spans[i];
            const RecordedSpan& rs = spans[i];
            QCOMPARE(rs.kind == "comm", sp.collective >= 0);
            if (sp.collective < 0) {
                QCOMPARE(rs.waitUs, 0.0);
                continue;
            }
            ++ci;
            QVERIFY2(rs.waitUs >= 0 && rs.waitUs <= rs.endUs - rs.startUs, rs.name.c_str());
            byCollective[sp.collective].push_back(i);
            lastArrival[sp.collective] = std::max(lastArrival.count(sp.collective) ? lastArrival[sp.collective] : -1e300, sp.startUs);
        }
        QVERIFY(!byCollective.empty());
        for (const auto& [c, idx] : byCollective) {
            QCOMPARE(idx.size(), std::size_t(2)); // one per rank
            double least = 1e300;
            for (std::size_t i : idx) {
                least = std::min(least, spans[i].waitUs);
                const double expect = std::min(lastArrival[c] - spans[i].startUs, spans[i].endUs - spans[i].startUs);
                QVERIFY(std::abs(spans[i].waitUs - expect) < 1e-9);
            }
            QCOMPARE(least, 0.0); // the last to arrive did not wait
        }
        // Round trip: wait_us written for comm spans only, read back equal.
        const nlohmann::ordered_json j = recordToJson(rec);
        bool sawWait = false;
        for (const auto& x : j["runs"][0]["spans"]) {
            QCOMPARE(x.contains("wait_us"), x["kind"] == "comm");
            sawWait |= x.contains("wait_us");
        }
        QVERIFY(sawWait);
        auto back = parseRunRecord(j.dump(), "rec.json");
        QVERIFY2(back.ok(), back.status().message().c_str());
        QCOMPARE(back->runs[0].spans.size(), spans.size());
        for (std::size_t i = 0; i < spans.size(); ++i)
            QCOMPARE(back->runs[0].spans[i].waitUs, spans[i].waitUs);
        // Older records lack it: 0.
        std::size_t commAt = 0;
        while (j["runs"][0]["spans"][commAt]["kind"] != "comm")
            ++commAt;
        nlohmann::ordered_json old = j;
        old["runs"][0]["spans"][commAt].erase("wait_us");
        auto o2 = parseRunRecord(old.dump(), "old.json");
        QVERIFY2(o2.ok(), o2.status().message().c_str());
        QCOMPARE(o2->runs[0].spans[commAt].waitUs, 0.0);
        // Hostile: negative, beyond the span, not a number.
        const double dur = spans[commAt].endUs - spans[commAt].startUs;
        for (const nlohmann::json& bad : {nlohmann::json(-1.0), nlohmann::json(dur + 1.0), nlohmann::json("5"), nlohmann::json(1e300)}) {
            nlohmann::ordered_json h = j;
            h["runs"][0]["spans"][commAt]["wait_us"] = bad;
            auto r = parseRunRecord(h.dump(), "bad.json");
            QVERIFY(!r.ok());
            QVERIFY2(r.status().message().find("wait_us") != std::string::npos, r.status().message().c_str());
        }
        // The Chrome trace carries it in the comm events' args.
        std::ostringstream trace;
        writeChromeTrace(rec, trace);
        QVERIFY(trace.str().find("\"wait_us\"") != std::string::npos);
        // Emulated: every rank's collective starts when the last one arrives, so no span waits
        // (the wait is the gap before it).
        const HardwareProfile hw = findHardware("h100-sxm-8").value();
        o.emulate = true;
        o.commModel = &hw;
        auto emu = runModel(s, g, {}, o);
        QVERIFY2(emu.ok(), emu.status().message().c_str());
        RunRecord erec;
        addRun(erec, g, *emu);
        int comms = 0;
        for (const auto& sp : erec.runs.back().spans)
            if (sp.kind == "comm") {
                ++comms;
                QCOMPARE(sp.waitUs, 0.0);
            }
        QCOMPARE(comms, 2 * int(g.collectives.size()));
    }

    void emulatedTimeline()
    {
        // Two ranks: compute 10/30 µs, a collective modelled at 5 µs, compute 1/1 µs. The collective
        // starts when the slower rank arrives (30) and ends together (35).
        std::vector<Span> sp{{0, 0, -1, 0, 100, 110, 0}, {0, 0, 0, 0, 110, 111, 8}, {0, 1, -1, 0, 111, 112, 0},
                             {1, 0, -1, 0, 7, 37, 0},    {1, 0, 0, 0, 37, 40, 8},   {1, 1, -1, 0, 40, 41, 0}};
        const double end = emulateTimeline(sp, 2, [](const Span&) { return 5.0; });
        QCOMPARE(end, 36.0);
        QCOMPARE(sp[0].startUs, 0.0);
        QCOMPARE(sp[0].endUs, 10.0);
        QCOMPARE(sp[1].startUs, 30.0);
        QCOMPARE(sp[1].endUs, 35.0);
        QCOMPARE(sp[4].startUs, 30.0);
        QCOMPARE(sp[5].endUs, 36.0);
    }

    void refusedBeforeAllocatingWhatDoesNotFit()
    {
        // Llama-3.1-405B's fp32 weights at T=1 do not fit this machine: refused with the numbers,
        // before any allocation (a failed allocation would take as long as the check).
        const ModelSpec s = tptest::openSpec("llama-3.1-405b");
        RunOptions o;
        o.seq = 4;
        const auto t0 = std::chrono::steady_clock::now();
        auto r = runModel(s, shardModel(s, defaultPlan(s, 1)), {}, o);
        QCOMPARE(r.status().code(), StatusCode::ResourceExhausted);
        QVERIFY2(r.status().message().find("nothing was allocated") != std::string::npos, r.status().message().c_str());
        QVERIFY2(r.status().message().find("TiB weights") != std::string::npos, r.status().message().c_str());
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    }

    void valueChecksBeforeStorageAndAfterARun()
    {
        // What the engine refuses to store (f16 holds at most 65504; 65520 rounds to infinity) and
        // what it refuses to report (NaN, infinities).
        const std::vector<float> v{1.0f, 65504.0f, 65519.0f, 65520.0f, -1e6f, std::nanf(""), INFINITY};
        const ValueCheck f16 = checkValues(v.data(), std::int64_t(v.size()), DType::F16);
        QCOMPARE(f16.nonFinite, std::int64_t(2));
        QCOMPARE(f16.outOfRange, std::int64_t(2));
        QCOMPARE(f16.first, 65520.0f);
        const ValueCheck bf16 = checkValues(v.data(), std::int64_t(v.size()), DType::BF16);
        QCOMPARE(bf16.outOfRange, std::int64_t(0));
        QCOMPARE(bf16.nonFinite, std::int64_t(2));
        std::uint16_t h = 0;
        float back = 0;
        fromFloat(&v[2], DType::F16, &h, 1);
        toFloat(&h, DType::F16, &back, 1);
        QCOMPARE(back, 65504.0f); // below the limit: rounds to the largest f16
        fromFloat(&v[3], DType::F16, &h, 1);
        toFloat(&h, DType::F16, &back, 1);
        QVERIFY(std::isinf(back)); // at the limit: infinity, which checkValues reported
    }

    void cancellation()
    {
        const ModelSpec s = tptest::openSpec("example");
        std::stop_source stop;
        RunOptions o;
        o.seq = 8;
        o.iterations = 1000000; // would run for hours
        o.progress = [&](int it, bool, double) {
            if (it == 2)
                stop.request_stop();
        };
        o.stop = stop.get_token();
        auto r = runModel(s, shardModel(s, defaultPlan(s, 2)), {}, o);
        QCOMPARE(r.status().code(), StatusCode::Cancelled);
    }

    void faultOnOneRankEndsTheRun()
    {
        const ModelSpec s = tptest::openSpec("example");
        RunOptions o;
        o.seq = 8;
        o.failRank = 1;
        o.failNode = "model.layers.3.mlp.down_proj";
        const auto t0 = std::chrono::steady_clock::now();
        auto r = runModel(s, shardModel(s, defaultPlan(s, 2)), {}, o);
        QVERIFY(!r.ok());
        QVERIFY2(r.status().message().find("rank 1, node model.layers.3.mlp.down_proj: injected failure") != std::string::npos,
                 r.status().message().c_str());
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
    }

    void faultKinds_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<int>("code");
        QTest::addColumn<QString>("message");
        QTest::addRow("out of memory") << "oom" << int(StatusCode::ResourceExhausted) << "rank 1, node model.layers.2.self_attn.o_proj: out of memory";
        QTest::addRow("exception") << "exception" << int(StatusCode::Internal) << "rank 1, node model.layers.2.self_attn.o_proj: injected exception";
        QTest::addRow("hung rank") << "hang" << int(StatusCode::DeadlineExceeded) << "waited 300 ms";
    }
    void faultKinds()
    {
        QFETCH(QString, kind);
        QFETCH(int, code);
        QFETCH(QString, message);
        const ModelSpec s = tptest::openSpec("example");
        RunOptions o;
        o.seq = 8;
        o.failRank = 1;
        o.failNode = "model.layers.2.self_attn.o_proj";
        o.failKind = kind.toStdString();
        // Only the hung rank needs the watchdog; the others get a timeout no loaded machine reaches, so
        // that the cause (not a partner's watchdog) is what the run reports.
        o.collectiveTimeout = kind == QLatin1String("hang") ? std::chrono::milliseconds(300) : std::chrono::milliseconds(20000);
        const auto t0 = std::chrono::steady_clock::now();
        auto r = runModel(s, shardModel(s, defaultPlan(s, 2)), {}, o);
        QVERIFY(!r.ok());
        QCOMPARE(int(r.status().code()), code);
        QVERIFY2(QString::fromStdString(r.status().message()).contains(message), r.status().message().c_str());
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    }

    void oneRankThatHangsIsEndedByTheWatchdog()
    {
        // No collective notices a lone rank that stops (T=1, a decode run): the progress watchdog
        // ends it within the timeout, naming the node.
        const ModelSpec s = tptest::openSpec("example");
        RunOptions o;
        o.seq = 8;
        o.decodeSteps = 2;
        o.failRank = 0;
        o.failNode = "model.layers.5.mlp.down_proj";
        o.failKind = "hang";
        o.collectiveTimeout = std::chrono::milliseconds(2000); // loading a weight under TSan stays well inside it
        const auto t0 = std::chrono::steady_clock::now();
        auto r = runModel(s, shardModel(s, defaultPlan(s, 1)), {}, o);
        QVERIFY(!r.ok());
        QCOMPARE(r.status().code(), StatusCode::DeadlineExceeded);
        QVERIFY2(r.status().message() == "rank 0, node model.layers.5.mlp.down_proj: no progress for 2000 ms (watchdog)",
                 r.status().message().c_str());
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
        // A healthy one-rank run with the same timeout is not disturbed by it.
        o.failRank = -1;
        QVERIFY(runModel(s, shardModel(s, defaultPlan(s, 1)), {}, o).ok());
    }

    void wrongCheckpointIsRefusedBeforeAnyRankStarts()
    {
        // The llama fixture's tensors under a config with another hidden size: shape errors, no run.
        QTemporaryDir dir;
        std::ifstream cfgIn(kModels + "llama/config.json");
        auto cfg = nlohmann::json::parse(cfgIn);
        cfg["intermediate_size"] = 64;
        std::ofstream(dir.filePath("config.json").toStdString()) << cfg.dump();
        QVERIFY(QFile::copy(QString::fromStdString(kModels + "llama/model.safetensors"), dir.filePath("model.safetensors")));
        auto om = openModel(dir.path().toStdString());
        QVERIFY(om.ok());
        auto r = runModel(om->spec, shardModel(om->spec, defaultPlan(om->spec, 2)), {&*om->checkpoint}, {});
        QVERIFY(!r.ok());
        QVERIFY2(r.status().message().find("does not match") != std::string::npos, r.status().message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestEngine)
#include "tst_engine.moc"
