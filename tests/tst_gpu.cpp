// tst_gpu — every CUDA op against the CPU op on fresh random inputs, per storage dtype. Skips (and
// says why) when the build has no CUDA backend or no GPU is visible.
#include "tp/runtime/communicator.h"
#include "tp/runtime/cpu_ops.h"
#include "tp/runtime/gpu.h"

#include "testutils.h"

#include <QtTest>

#include <cmath>
#include <bit>
#include <random>
#include <thread>

using namespace tp;

namespace {

std::vector<float> randomVector(std::size_t n, std::uint32_t seed, float scale = 1.0f)
{
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-scale, scale);
    std::vector<float> v(n);
    for (auto& x : v)
        x = d(rng);
    return v;
}

using tptest::relError;

double tolerance(gpu::Storage s) { return s == gpu::Storage::BF16 ? 2e-2 : 1e-4; }

} // namespace

class TestGpu : public QObject
{
    Q_OBJECT
private slots:
    void initTestCase()
    {
        if (!gpu::built())
            QSKIP("this build has no CUDA backend; the CUDA sources are compiled where nvcc exists");
        auto inv = gpu::probe();
        if (!inv.ok())
            QSKIP(qPrintable(QStringLiteral("no GPU to test on: %1").arg(QString::fromStdString(inv.status().message()))));
        for (const auto& d : inv->devices)
            qInfo("GPU %d: %s, sm_%d%d, %lld MiB", d.index, d.name.c_str(), d.major, d.minor, (long long)(d.memoryBytes >> 20));
    }

    void ops_data()
    {
        QTest::addColumn<int>("storage");
        QTest::addRow("fp32") << int(gpu::Storage::F32);
        QTest::addRow("bf16") << int(gpu::Storage::BF16);
    }
    void ops()
    {
        QFETCH(int, storage);
        const auto s = gpu::Storage(storage);
        const double tol = tolerance(s);
        // Round the inputs through bf16 first so that both sides see the same values.
        auto round = [s](std::vector<float> v) {
            if (s == gpu::Storage::BF16)
                for (auto& x : v)
                    x = std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) & 0xffff0000u);
            return v;
        };
        const std::int64_t n = 37, in = 96, out = 80, d = 64, heads = 4, kv = 2, hd = 16, seq = 24, batch = 2;
        {
            const auto x = round(randomVector(std::size_t(n * in), 1)), w = round(randomVector(std::size_t(out * in), 2, 0.1f));
            std::vector<float> ref(std::size_t(n * out));
            cpu::gemm(x.data(), w.data(), ref.data(), n, in, out);
            auto g = gpu::gemm(x, w, n, in, out, s);
            QVERIFY2(g.ok(), g.status().message().c_str());
            QVERIFY2(relError(*g, ref) < tol, "gemm");
        }
        {
            const auto x = round(randomVector(std::size_t(n * d), 3)), w = round(randomVector(std::size_t(d), 4));
            std::vector<float> ref(x.size());
            cpu::rmsNorm(x.data(), w.data(), ref.data(), n, d, 1e-6f);
            auto g = gpu::rmsNorm(x, w, n, d, 1e-6f, s);
            QVERIFY2(g.ok() && relError(*g, ref) < tol, "rms_norm");
        }
        {
            const auto a = round(randomVector(1000, 5, 4)), b = round(randomVector(1000, 6, 4));
            std::vector<float> ref(a.size());
            cpu::siluMul(a.data(), b.data(), ref.data(), 1000);
            auto g = gpu::siluMul(a, b, s);
            QVERIFY2(g.ok() && relError(*g, ref) < tol, "silu_mul");
        }
        {
            std::vector<double> freq;
            for (std::int64_t i = 0; i < hd / 2; ++i)
                freq.push_back(1.0 / std::pow(10000.0, double(2 * i) / double(hd)));
            const auto x = round(randomVector(std::size_t(batch * seq * heads * hd), 7));
            std::vector<float> ref(x.size());
            cpu::rope(x.data(), ref.data(), batch * seq, heads * hd, hd, seq, freq);
            auto g = gpu::rope(x, batch * seq, heads * hd, hd, seq, freq, s);
            QVERIFY2(g.ok() && relError(*g, ref) < tol, "rope");
        }
        {
            const auto q = round(randomVector(std::size_t(batch * seq * heads * hd), 8));
            const auto k = round(randomVector(std::size_t(batch * seq * kv * hd), 9));
            const auto v = round(randomVector(std::size_t(batch * seq * kv * hd), 10));
            std::vector<float> ref(q.size()), scratch;
            cpu::attention(q.data(), k.data(), v.data(), ref.data(), batch, seq, heads, kv, hd, scratch);
            auto g = gpu::attention(q, k, v, batch, seq, heads, kv, hd, s);
            QVERIFY2(g.ok() && relError(*g, ref) < tol, "attention");
        }
        {
            const std::int64_t vocab = 50, rows = 20, cols = 12, first = 20;
            const std::vector<std::int32_t> ids{0, 19, 20, 25, 39, 40, 49, 22};
            const auto w = round(randomVector(std::size_t(rows * cols), 11));
            std::vector<float> ref(ids.size() * std::size_t(cols));
            QVERIFY(cpu::embedding(ids.data(), std::int64_t(ids.size()), w.data(), rows, cols, first, vocab, ref.data()));
            auto g = gpu::embedding(ids, w, rows, cols, first, s);
            QVERIFY2(g.ok() && relError(*g, ref) < tol, "embedding (vocab shard, masked)");
        }
    }

    void ncclCollectives()
    {
        // One rank per visible GPU (at most 4), each in its own thread; uneven pieces as in the
        // local communicator's test.
        const int n = std::min<int>(4, int(gpu::probe()->devices.size()));
        auto group = NcclGroup::create(n, std::chrono::seconds(30));
        QVERIFY2(group.ok(), group.status().message().c_str());
        std::vector<std::string> errors(static_cast<std::size_t>(n));
        std::vector<std::thread> ts;
        for (int r = 0; r < n; ++r)
            ts.emplace_back([&, r] {
                Communicator& c = (*group)->rank(r);
                auto check = [&](bool ok, const char* what) {
                    if (!ok && errors[std::size_t(r)].empty())
                        errors[std::size_t(r)] = what;
                };
                std::vector<float> v(7, float(r + 1));
                check(c.allReduce(v).ok() && v == std::vector<float>(7, float(n * (n + 1) / 2)), "all_reduce");
                std::vector<float> mine(std::size_t(r + 1), float(r)), all(std::size_t(n * (n + 1) / 2));
                check(c.allGather(mine, all).ok(), "all_gather");
                std::size_t at = 0;
                for (int p = 0; p < n; ++p)
                    for (int i = 0; i <= p; ++i)
                        check(all[at++] == float(p), "all_gather value");
                std::vector<float> b(4, float(r));
                check(c.broadcast(b, 0).ok() && b == std::vector<float>(4, 0.0f), "broadcast");
                check(c.barrier().ok(), "barrier");
            });
        for (auto& t : ts)
            t.join();
        for (const auto& e : errors)
            QVERIFY2(e.empty(), e.c_str());
    }

    void gemmBenchmarkRuns()
    {
        auto t = gpu::benchGemmBf16(0, 1024, 1024, 1024, 5);
        QVERIFY2(t.ok(), t.status().message().c_str());
        QVERIFY(t->tflops > 0);
        qInfo("bf16 GEMM 1024^3: %.1f TFLOP/s", t->tflops);
    }
};

QTEST_GUILESS_MAIN(TestGpu)
#include "tst_gpu.moc"
