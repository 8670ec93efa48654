// tst_backend_ops — every op of every backend present against a double-precision reference written
// here, on fresh random inputs (TP_TEST_SEED replays a run) and many shapes: each catalog model's
// per-rank shapes at T = 1, 2, 4 and 8 (scaled down), plus one-row, odd-width and empty-shard
// cases. Errors are normalised mean squared errors (ggml's test-backend-ops measure) with a
// threshold per storage dtype; a failure prints the shape and the error.
//
//   tst_backend_ops cpu     the CPU backend (f32 against the reference, bf16 and f16 storage)
//   tst_backend_ops cuda    the CUDA backend on device 0; exits 77 (ctest: Skipped) without one
#include "tp/model/catalog.h"
#include "tp/model/config.h"
#include "tp/runtime/backend.h"
#include "tp/runtime/gpu.h"
#include "testutils.h"

#include <QtTest>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

using namespace tp;

namespace {

DeviceKind g_device = DeviceKind::Cpu;

// --- data ---------------------------------------------------------------------------------------

// Seeded from TP_TEST_SEED when set, else at random; the seed is printed, so that a failing run
// replays with the same seed and the same test functions. Empty when TP_TEST_SEED is not a seed
// (initTestCase fails then).
const std::optional<std::uint32_t>& seed()
{
    static const std::optional<std::uint32_t> s = []() -> std::optional<std::uint32_t> {
        const char* env = std::getenv("TP_TEST_SEED");
        if (!env)
            return std::random_device{}();
        std::uint32_t v = 0;
        const char* end = env + std::strlen(env);
        if (const auto [at, ec] = std::from_chars(env, end, v); ec != std::errc{} || at != end || at == env)
            return std::nullopt;
        return v;
    }();
    return s;
}

std::mt19937& rng()
{
    static std::mt19937 r(seed().value_or(0));
    return r;
}

// v rounded to `dt`, so that the reference sees exactly what the backend stores.
std::vector<float> rounded(std::vector<float> v, DType dt)
{
    const auto n = static_cast<std::int64_t>(v.size());
    std::vector<unsigned char> raw(static_cast<std::size_t>(dtypeBytes(dt, n)));
    fromFloat(v.data(), dt, raw.data(), n);
    toFloat(raw.data(), dt, v.data(), n);
    return v;
}

// Random values in [-scale, scale], rounded to `dt`.
std::vector<float> randomValues(std::int64_t n, DType dt, float scale = 1.0f)
{
    std::uniform_real_distribution<float> d(-scale, scale);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v)
        x = d(rng());
    return rounded(std::move(v), dt);
}

// A router's weights as the models make them: probabilities (a sigmoid or a softmax), not values
// near 0 or negative. A pick weighted 1e-5 makes an output below f16's normal range, whose
// relative error is the format's, not the op's.
std::vector<float> routerWeights(std::int64_t n)
{
    std::uniform_real_distribution<float> d(-3.0f, 3.0f);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v)
        x = 1.0f / (1.0f + std::exp(-d(rng())));
    return v;
}

double nmse(const std::vector<float>& got, const std::vector<double>& want)
{
    if (got.size() != want.size())
        return 1e30;
    double err = 0, ref = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (!std::isfinite(got[i]))
            return 1e30;
        err += (got[i] - want[i]) * (got[i] - want[i]);
        ref += want[i] * want[i];
    }
    return ref > 0 ? err / ref : err;
}

double threshold(DType dt) { return dt == DType::BF16 ? 1e-4 : dt == DType::F16 ? 1e-5 : 1e-9; }

// Tensors of one backend, each in its own allocation (the executor uses one arena; ops do not care).
class Bench
{
public:
    explicit Bench(Backend& be)
        : m_be(be)
    {
    }
    Tensor make(std::int64_t rows, std::int64_t cols, DType dt)
    {
        auto buf = m_be.allocate(std::max<std::int64_t>(dtypeBytes(dt, rows * cols), 1));
        if (!buf)
            qFatal("allocate: %s", buf.status().message().c_str());
        m_bufs.push_back(std::move(*buf));
        return Tensor::contiguous(m_bufs.back().data(), dt, rows, cols, m_be.device());
    }
    Tensor put(const std::vector<float>& v, std::int64_t rows, std::int64_t cols, std::optional<DType> dt = {})
    {
        Tensor t = make(rows, cols, dt.value_or(m_be.storage()));
        std::vector<unsigned char> raw(static_cast<std::size_t>(t.bytes()));
        fromFloat(v.data(), t.dtype, raw.data(), t.numel());
        check(m_be.upload(raw.data(), t));
        return t;
    }
    Tensor ints(const std::vector<std::int32_t>& v)
    {
        Tensor t = make(1, std::int64_t(v.size()), DType::I32);
        check(m_be.upload(v.data(), t));
        return t;
    }
    // A tensor filled with NaN, so that an element the op does not write shows.
    Tensor poisoned(std::int64_t rows, std::int64_t cols, std::optional<DType> dt = {})
    {
        return put(std::vector<float>(static_cast<std::size_t>(rows * cols), std::nanf("")), rows, cols, dt);
    }
    Tensor scratch(std::int64_t bytes) { return make(1, std::max<std::int64_t>(bytes, 1), DType::U8); }
    std::vector<float> get(const Tensor& t)
    {
        check(m_be.synchronize());
        std::vector<unsigned char> raw(static_cast<std::size_t>(t.bytes()));
        check(m_be.download(t, raw.data()));
        std::vector<float> v(static_cast<std::size_t>(t.numel()));
        toFloat(raw.data(), t.dtype, v.data(), t.numel());
        return v;
    }
    static void check(const Status& st)
    {
        if (!st.ok())
            qFatal("%s", st.message().c_str());
    }

private:
    Backend& m_be;
    std::vector<DeviceBuffer> m_bufs;
};

// --- shapes ---------------------------------------------------------------------------------------

// One rank's dimensions of a model at a tp size, scaled down so that every op runs in microseconds.
struct Dims
{
    std::string name;
    std::int64_t tokens = 0, hidden = 0, headDim = 0, heads = 0, kvHeads = 0, inter = 0, vocab = 0;
    std::int64_t experts = 0, localExperts = 0, topK = 0, expertInter = 0;
};

std::int64_t shard(std::int64_t n, int t) { return (n + t - 1) / t; }

std::vector<Dims> shapes()
{
    std::vector<Dims> out;
    for (const CatalogEntry& e : catalog()) {
        auto c = parseConfig(e.configJson, e.id, nullptr);
        if (!c)
            qFatal("catalog %s: %s", e.id.c_str(), c.status().message().c_str());
        // Reduced (the sanitizer subset): T=1 (whole widths, MoE rows) and T=8 (the smallest shards, experts split).
        for (int t : tptest::reducedRun() ? std::vector<int>{1, 8} : std::vector<int>{1, 2, 4, 8}) {
            Dims d;
            d.name = QStringLiteral("%1 T=%2").arg(QString::fromStdString(e.id)).arg(t).toStdString();
            d.tokens = 5 + t;                                          // odd and even row counts
            d.headDim = std::min<std::int64_t>(c->headDim > 0 ? c->headDim : 64, 32);
            d.hidden = std::max<std::int64_t>(c->hiddenSize / 64, 8);
            d.heads = std::min<std::int64_t>(shard(c->numHeads, t), 6);
            d.kvHeads = std::max<std::int64_t>(1, std::min(d.heads, shard(c->numKvHeads, t)));
            while (d.heads % d.kvHeads)
                --d.kvHeads;
            d.inter = std::max<std::int64_t>(shard(c->intermediateSize, t) / 64, 1);
            d.vocab = std::max<std::int64_t>(shard(c->vocabSize, t) / 256, 3);
            if (c->isMoe()) {
                d.experts = std::min<std::int64_t>(c->numExperts, 16);
                d.topK = std::min(c->expertsPerToken, d.experts);
                d.localExperts = t > 1 && d.experts % t == 0 ? d.experts / t : d.experts; // EP split or TP rows
                d.expertInter = std::max<std::int64_t>(shard(std::max<std::int64_t>(c->moeIntermediateSize, 64), t) / 32, 1);
            }
            out.push_back(d);
        }
    }
    // One row, odd widths, an empty shard (a rank with no columns of a 16-wide tensor at T=14).
    out.push_back({"one row", 1, 24, 8, 3, 1, 40, 11, 4, 2, 2, 6});
    out.push_back({"odd widths", 7, 37, 6, 5, 5, 53, 13, 5, 5, 3, 7});
    out.push_back({"empty shard", 4, 16, 8, 0, 0, 0, 0, 4, 0, 2, 0});
    return out;
}

// --- references (double) -------------------------------------------------------------------------

std::vector<double> refGemm(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* b,
                            std::int64_t n, std::int64_t in, std::int64_t out)
{
    std::vector<double> y(static_cast<std::size_t>(n * out));
    for (std::int64_t t = 0; t < n; ++t)
        for (std::int64_t j = 0; j < out; ++j) {
            double s = b ? (*b)[static_cast<std::size_t>(j)] : 0.0;
            for (std::int64_t k = 0; k < in; ++k)
                s += double(x[static_cast<std::size_t>(t * in + k)]) * w[static_cast<std::size_t>(j * in + k)];
            y[static_cast<std::size_t>(t * out + j)] = s;
        }
    return y;
}

double act(Activation a, double v)
{
    switch (a) {
    case Activation::Silu: return v / (1 + std::exp(-v));
    case Activation::Gelu: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case Activation::Relu2: return v > 0 ? v * v : 0;
    case Activation::Sigmoid: return 1 / (1 + std::exp(-v));
    case Activation::Softplus: return std::log1p(std::exp(v));
    case Activation::Tanh: return std::tanh(v);
    case Activation::Identity: return v;
    case Activation::GeluTanh: break;
    }
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
}
constexpr Activation kComputed[] = {Activation::Silu, Activation::GeluTanh, Activation::Gelu, Activation::Relu2,
                                    Activation::Sigmoid, Activation::Softplus, Activation::Tanh, Activation::Identity};

// DeepSeek's routing on a shape: the top-k among the best half of the groups (when E splits into
// groups of 2 or more), scaled.
void groupLimited(ExpertsShape& s)
{
    const std::int64_t E = s.experts;
    s.groups = E % 4 == 0 && E >= 8 ? 4 : E % 2 == 0 && E >= 4 ? 2 : 1;
    s.topkGroup = std::max<std::int64_t>(1, s.groups / 2);
    while (s.topK > s.topkGroup * (E / s.groups))
        ++s.topkGroup;
    s.routedScale = 2.5;
}

// One token's picks from its scores row, as Transformers' routers make them: (expert, weight) pairs.
std::vector<std::pair<std::int64_t, double>> refPicks(const float* row, const std::vector<float>* bias, const ExpertsShape& s)
{
    const std::int64_t E = s.experts;
    std::vector<std::pair<std::int64_t, double>> picks;
    if (s.sparseMixer) { // PhimoeTopKRouter: twice the best remaining logit, its softmax over the logits near it
        std::int64_t first = -1;
        for (int j = 0; j < 2; ++j) {
            std::int64_t best = -1;
            for (std::int64_t e = 0; e < E; ++e)
                if (e != first && (best < 0 || row[e] > row[best]))
                    best = e;
            const double m = row[best];
            double sum = 0;
            for (std::int64_t e = 0; e < E; ++e)
                if (e != first && (m - row[e]) / std::max<double>(std::abs(row[e]), m) <= 2 * s.jitterEps)
                    sum += std::exp(row[e] - m);
            picks.push_back({best, 1 / sum});
            first = best;
        }
        return picks;
    }
    // The choice: score + bias (in fp32, as the backends add it), −∞ outside the chosen groups
    // (DeepseekV3TopkRouter: a group scores its best two; DeepseekV2's group_limited_greedy: its best); the weights the
    // scores, or the sigmoid of the logits (Kolibri1TopKRouter).
    std::vector<float> choice(row, row + E);
    if (bias)
        for (std::int64_t e = 0; e < E; ++e)
            choice[static_cast<std::size_t>(e)] += (*bias)[static_cast<std::size_t>(e)];
    if (s.groups > 1) {
        const std::int64_t per = E / s.groups;
        std::vector<std::pair<double, std::int64_t>> groups;
        for (std::int64_t g = 0; g < s.groups; ++g) {
            std::vector<float> c(choice.begin() + g * per, choice.begin() + (g + 1) * per);
            std::sort(c.rbegin(), c.rend());
            groups.push_back({s.groupByMax ? double(c[0]) : double(c[0]) + c[1], g});
        }
        std::stable_sort(groups.begin(), groups.end(), [](auto p, auto q) { return p.first > q.first; });
        for (std::size_t j = static_cast<std::size_t>(s.topkGroup); j < groups.size(); ++j)
            std::fill_n(choice.begin() + groups[j].second * per, per, -INFINITY);
    }
    std::vector<std::int64_t> order(static_cast<std::size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto p, auto q) { return choice[p] > choice[q]; });
    auto score = [&](std::int64_t e) { return s.logitChoice ? 1 / (1 + std::exp(-double(row[e]))) : double(row[e]); };
    double sum = 0;
    for (std::int64_t j = 0; j < s.topK; ++j)
        sum += score(order[static_cast<std::size_t>(j)]);
    for (std::int64_t j = 0; j < s.topK; ++j) {
        const std::int64_t e = order[static_cast<std::size_t>(j)];
        picks.push_back({e, (s.normalize ? score(e) / sum : score(e)) * s.routedScale});
    }
    return picks;
}

// The experts op in double: each token's picks (refPicks), the local experts' SwiGLU outputs weighted
// (or, Llama 4, their inputs).
std::vector<double> refExperts(const std::vector<float>& x, const std::vector<float>& scores, const std::vector<float>* bias,
                               const std::vector<float>& gu, const std::vector<float>& dn, const ExpertsShape& s,
                               std::int64_t N, std::int64_t H, DType dt)
{
    const std::int64_t E = s.experts, I = s.intermediate;
    std::vector<double> ref(static_cast<std::size_t>(N * H), 0.0);
    for (std::int64_t t = 0; t < N; ++t) {
        for (const auto& [picked, wgt] : refPicks(scores.data() + t * E, bias, s)) {
            const std::int64_t e = picked - s.firstExpert;
            if (e < 0 || e >= s.localExperts)
                continue;
            // Llama 4: the input times the weight, as the storage dtype holds them.
            const float wIn = roundedTo(dt, float(wgt));
            auto xin = [&](std::int64_t k) {
                const float v = x[static_cast<std::size_t>(t * H + k)];
                return s.weightInputs ? double(roundedTo(dt, wIn * v)) : double(v);
            };
            std::vector<double> a(static_cast<std::size_t>(I));
            for (std::int64_t i = 0; i < I; ++i) {
                double g = 0, u = 0;
                if (!s.gated) { // up alone: act(up)
                    for (std::int64_t k = 0; k < H; ++k)
                        u += xin(k) * gu[static_cast<std::size_t>((e * I + i) * H + k)];
                    a[static_cast<std::size_t>(i)] = act(s.act, u);
                    continue;
                }
                for (std::int64_t k = 0; k < H; ++k) {
                    g += xin(k) * gu[static_cast<std::size_t>((e * 2 * I + i) * H + k)];
                    u += xin(k) * gu[static_cast<std::size_t>((e * 2 * I + I + i) * H + k)];
                }
                a[static_cast<std::size_t>(i)] = act(Activation::Silu, g) * u;
            }
            for (std::int64_t j2 = 0; j2 < H; ++j2) {
                double o = 0;
                for (std::int64_t i = 0; i < I; ++i)
                    o += a[static_cast<std::size_t>(i)] * dn[static_cast<std::size_t>((e * H + j2) * I + i)];
                ref[static_cast<std::size_t>(t * H + j2)] += (s.weightInputs ? 1.0 : wgt) * o;
            }
        }
    }
    return ref;
}

} // namespace

class TestBackendOps : public QObject
{
    Q_OBJECT

    std::unique_ptr<Backend> m_be[3];
    const std::vector<Dims> m_shapes = shapes();

    Backend& be(DType dt) { return *m_be[dt == DType::F32 ? 0 : dt == DType::BF16 ? 1 : 2]; }

    void rows()
    {
        QTest::addColumn<int>("dtype");
        for (DType dt : {DType::F32, DType::BF16, DType::F16})
            QTest::addRow("%s", std::string(dtypeName(dt)).c_str()) << int(dt);
    }

    // Runs `one` for every shape and fails on the first error above the threshold (the storage
    // dtype's unless given), naming it.
    void forShapes(DType dt, const std::function<double(const Dims&)>& one, std::optional<double> limit = {})
    {
        const double max = limit.value_or(threshold(dt));
        double worst = 0;
        std::string at;
        for (const Dims& d : m_shapes) {
            const double e = one(d);
            if (e > worst) {
                worst = e;
                at = d.name;
            }
            QVERIFY2(e <= max, qPrintable(QStringLiteral("%1: NMSE %2 > %3").arg(QString::fromStdString(d.name)).arg(e).arg(max)));
        }
        qInfo("%s: worst NMSE %.3g (%s)", dtypeName(dt).data(), worst, at.c_str());
    }

private slots:
    void initTestCase()
    {
        QVERIFY2(seed(), qPrintable(QStringLiteral("TP_TEST_SEED=%1: not a seed (an integer from 0 to 4294967295)")
                                        .arg(QString::fromLocal8Bit(qgetenv("TP_TEST_SEED")))));
        for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
            auto b = g_device == DeviceKind::Cuda ? makeCudaBackend(0, dt) : makeCpuBackend(dt);
            QVERIFY2(b.ok(), b.status().message().c_str());
            m_be[dt == DType::F32 ? 0 : dt == DType::BF16 ? 1 : 2] = std::move(*b);
        }
        qInfo("backend %s, %zu shapes, TP_TEST_SEED=%u", m_be[0]->name().c_str(), m_shapes.size(), *seed());
    }

    void gemm_data() { rows(); }
    void gemm()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            double worst = 0;
            // The model's projections at this rank: q (colwise), o (rowwise), gate/down, the vocab shard, no input.
            const std::vector<std::array<std::int64_t, 2>> io{{d.hidden, d.heads * d.headDim}, {d.heads * d.headDim, d.hidden},
                                                              {d.hidden, d.inter}, {d.inter, d.hidden}, {d.hidden, d.vocab}, {0, 5}};
            for (const auto& [in, out] : io)
                for (bool bias : {false, true})
                    for (DType outType : {be(dt).storage(), DType::F32}) {
                        Bench b(be(dt));
                        const auto x = randomValues(d.tokens * in, dt), w = randomValues(out * in, dt, 0.2f), bv = randomValues(out, dt);
                        const Tensor X = b.put(x, d.tokens, in), W = b.put(w, out, in), B = b.put(bv, 1, out);
                        const Tensor Y = b.poisoned(d.tokens, out, outType);
                        Bench::check(be(dt).gemm(X, W, bias ? &B : nullptr, Y, b.scratch(be(dt).gemmScratchBytes(d.tokens, in, out))));
                        worst = std::max(worst, nmse(b.get(Y), refGemm(x, w, bias ? &bv : nullptr, d.tokens, in, out)));
                    }
            // y as a rank's columns of a gathered output: written there, and nowhere else.
            {
                Bench b(be(dt));
                const std::int64_t in = d.hidden, out = d.inter, left = 3, wideY = left + out + 2;
                const auto x = randomValues(d.tokens * in, dt), w = randomValues(out * in, dt, 0.2f), bv = randomValues(out, dt);
                const Tensor Y = b.poisoned(d.tokens, wideY);
                Bench::check(be(dt).gemm(b.put(x, d.tokens, in), b.put(w, out, in), nullptr, Y.columns(left, out),
                                         b.scratch(be(dt).gemmScratchBytes(d.tokens, in, out))));
                const auto got = b.get(Y);
                std::vector<float> inside;
                for (std::int64_t t = 0; t < d.tokens; ++t)
                    for (std::int64_t j = 0; j < wideY; ++j) {
                        const float v = got[static_cast<std::size_t>(t * wideY + j)];
                        if (j >= left && j < left + out)
                            inside.push_back(v);
                        else if (!std::isnan(v))
                            return 1e30; // written outside its columns
                    }
                worst = std::max(worst, nmse(inside, refGemm(x, w, nullptr, d.tokens, in, out)));
            }
            // x as a column view of a wider tensor (rowwise_split_input).
            Bench b(be(dt));
            const std::int64_t wide = d.hidden + 3, in = d.hidden, out = d.inter;
            const auto xw = randomValues(d.tokens * wide, dt), w = randomValues(out * in, dt, 0.2f);
            std::vector<float> x;
            for (std::int64_t t = 0; t < d.tokens; ++t)
                x.insert(x.end(), xw.begin() + t * wide + 2, xw.begin() + t * wide + 2 + in);
            const Tensor Y = b.poisoned(d.tokens, out);
            Bench::check(be(dt).gemm(b.put(xw, d.tokens, wide).columns(2, in), b.put(w, out, in), nullptr, Y,
                                     b.scratch(be(dt).gemmScratchBytes(d.tokens, in, out))));
            return std::max(worst, nmse(b.get(Y), refGemm(x, w, nullptr, d.tokens, in, out)));
        });
    }

    void rmsNorm_data() { rows(); }
    void rmsNorm()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            double worst = 0;
            // The whole vector, or per head (q_norm); weights w, or (1 + w) (Gemma), or none (Llama 4's
            // L2 norm: offset 2 is ignored without a weight); or per head with a weight across the row (Mamba 2's
            // grouped norm: offset 3 here).
            for (std::int64_t group : {d.hidden, d.headDim})
            for (const double offset : {0.0, 1.0, 2.0, 3.0}) {
                const bool weighted = offset != 2, acrossRow = offset == 3;
                const std::int64_t W = group == d.hidden ? d.hidden : std::max<std::int64_t>(d.heads, 1) * d.headDim;
                const std::int64_t wCols = acrossRow ? W : group;
                Bench b(be(dt));
                const auto x = randomValues(d.tokens * W, dt, 3.0f), w = randomValues(wCols, dt);
                const Tensor Y = b.poisoned(d.tokens, W), wT = b.put(w, 1, wCols);
                const double off = acrossRow ? 0 : offset;
                Bench::check(be(dt).rmsNorm(b.put(x, d.tokens, W), weighted ? &wT : nullptr, Y, group, 1e-5, off));
                std::vector<double> ref(x.size());
                for (std::int64_t g = 0; g < d.tokens * W / group; ++g) {
                    double ss = 0;
                    for (std::int64_t j = 0; j < group; ++j)
                        ss += double(x[static_cast<std::size_t>(g * group + j)]) * x[static_cast<std::size_t>(g * group + j)];
                    const double inv = 1 / std::sqrt(ss / double(group) + 1e-5);
                    for (std::int64_t j = 0; j < group; ++j) {
                        const std::int64_t wj = acrossRow ? (g * group + j) % W : j;
                        ref[static_cast<std::size_t>(g * group + j)] = (weighted ? off + w[static_cast<std::size_t>(wj)] : 1.0)
                            * x[static_cast<std::size_t>(g * group + j)] * inv;
                    }
                }
                worst = std::max(worst, nmse(b.get(Y), ref));
            }
            return worst;
        });
    }

    void layerNorm_data() { rows(); }
    void layerNorm()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            double worst = 0;
            // Weight and bias; weight only (Cohere); neither (OLMo); (1 + w) and bias (Nemotron's LayerNorm1P). The
            // rows are offset from zero so that a norm that forgets the mean is far off.
            for (const auto& [weighted, biased, offset] : {std::tuple{true, true, 0.0}, {true, false, 0.0}, {false, false, 0.0}, {true, true, 1.0}}) {
                Bench b(be(dt));
                const std::int64_t H = d.hidden;
                auto x = randomValues(d.tokens * H, dt, 3.0f);
                for (float& v : x)
                    v += 2.0f;
                x = rounded(std::move(x), dt);
                const auto w = randomValues(H, dt), bias = randomValues(H, dt);
                const Tensor Y = b.poisoned(d.tokens, H), wT = b.put(w, 1, H), bT = b.put(bias, 1, H);
                Bench::check(be(dt).layerNorm(b.put(x, d.tokens, H), weighted ? &wT : nullptr, biased ? &bT : nullptr, Y, 1e-5, offset));
                std::vector<double> ref(x.size());
                for (std::int64_t t = 0; t < d.tokens; ++t) {
                    double mean = 0, var = 0;
                    for (std::int64_t j = 0; j < H; ++j)
                        mean += x[static_cast<std::size_t>(t * H + j)];
                    mean /= double(H);
                    for (std::int64_t j = 0; j < H; ++j)
                        var += (x[static_cast<std::size_t>(t * H + j)] - mean) * (x[static_cast<std::size_t>(t * H + j)] - mean);
                    const double inv = 1 / std::sqrt(var / double(H) + 1e-5);
                    for (std::int64_t j = 0; j < H; ++j)
                        ref[static_cast<std::size_t>(t * H + j)] = (weighted ? offset + w[static_cast<std::size_t>(j)] : 1.0)
                                * (x[static_cast<std::size_t>(t * H + j)] - mean) * inv
                            + (biased ? bias[static_cast<std::size_t>(j)] : 0.0);
                }
                worst = std::max(worst, nmse(b.get(Y), ref));
            }
            return worst;
        });
    }

    void activation_data() { rows(); }
    void activation()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            double worst = 0;
            for (Activation a : kComputed) { // from a column view of a wider tensor, as an ungated MLP's up output may be
                Bench b(be(dt));
                const std::int64_t I = d.inter;
                const auto x = randomValues(d.tokens * 2 * I, dt, 4.0f);
                const Tensor X = b.put(x, d.tokens, 2 * I).columns(I, I), Y = b.poisoned(d.tokens, I);
                Bench::check(be(dt).activation(X, Y, a));
                std::vector<double> ref(static_cast<std::size_t>(d.tokens * I));
                for (std::int64_t t = 0; t < d.tokens; ++t)
                    for (std::int64_t j = 0; j < I; ++j)
                        ref[static_cast<std::size_t>(t * I + j)] = act(a, x[static_cast<std::size_t>(t * 2 * I + I + j)]);
                worst = std::max(worst, nmse(b.get(Y), ref));
            }
            return worst;
        });
    }

    void rope_data() { rows(); }
    void rope()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        // The whole head turned (rotate_half pairs, or interleaved pairs as DeepSeek and Llama 4 lay
        // them out), or only its last part (MLA: the rope part after the nope part passes as it is).
        forShapes(dt, [&](const Dims& d) {
            double worst = 0;
            const std::int64_t hd = d.headDim, W = d.heads * hd, positions = 64;
            for (const std::int64_t rd : {hd, std::max<std::int64_t>(2, hd / 2 / 2 * 2)})
                for (const bool interleaved : {false, true})
                for (const bool leading : {false, true}) { // the rotated part last (MLA) or first (partial rotary)
                    if (leading && rd == hd)
                        continue;
                    const std::int64_t half = rd / 2, pass = hd - rd, rot = leading ? 0 : pass;
                    Bench b(be(dt));
                    const auto x = randomValues(d.tokens * W, dt);
                    std::vector<std::int32_t> pos;
                    for (std::int64_t t = 0; t < d.tokens; ++t)
                        pos.push_back(std::int32_t((t * 13 + 5) % positions));
                    std::vector<float> table(static_cast<std::size_t>(positions * rd));
                    for (std::int64_t p = 0; p < positions; ++p)
                        for (std::int64_t j = 0; j < half; ++j) {
                            const double a = double(p) / std::pow(10000.0, double(2 * j) / double(rd));
                            table[static_cast<std::size_t>(p * rd + j)] = float(std::cos(a));
                            table[static_cast<std::size_t>(p * rd + half + j)] = float(std::sin(a));
                        }
                    const Tensor Y = b.poisoned(d.tokens, W);
                    Bench::check(be(dt).rope(b.put(x, d.tokens, W), Y, hd, b.ints(pos), b.put(table, positions, rd, DType::F32),
                                             interleaved, leading));
                    std::vector<double> ref(x.begin(), x.end());
                    for (std::int64_t t = 0; t < d.tokens; ++t)
                        for (std::int64_t h = 0; h < d.heads; ++h)
                            for (std::int64_t j = 0; j < half; ++j) {
                                const std::size_t i = static_cast<std::size_t>(t * W + h * hd + rot + (interleaved ? 2 * j : j)),
                                                  k = i + static_cast<std::size_t>(interleaved ? 1 : half);
                                const double c = table[static_cast<std::size_t>(pos[std::size_t(t)] * rd + j)],
                                             s = table[static_cast<std::size_t>(pos[std::size_t(t)] * rd + half + j)];
                                ref[i] = x[i] * c - x[k] * s;
                                ref[k] = x[k] * c + x[i] * s;
                            }
                    worst = std::max(worst, nmse(b.get(Y), ref));
                }
            return worst;
        });
    }

    void attention_data() { rows(); }
    // Prefill (keys are the queries' own tokens), prefill into a larger KV cache, and decode steps of
    // one and of two queries after `past` cached keys.
    void attention()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            double worst = 0;
            struct Case { std::int64_t seq, past, keyRows; };
            const std::int64_t S = d.tokens + 6;
            for (const Case cs : {Case{S, 0, 0}, Case{S, 0, S + 3}, Case{1, S - 1, S + 3}, Case{2, S, S + 3}})
                for (std::int64_t batch : {1, 2})
                    // Plain causal; a sliding window shorter than the keys with soft-capped scores (Gemma 2);
                    // chunks of 4 (Llama 4). Sinks with or without a window (gpt-oss alternates).
                    for (const auto& [window, cap, chunk] : {std::tuple<std::int64_t, double, std::int64_t>{0, 0, 0}, {3, 0.3, 0}, {0, 0, 4}})
                        for (const bool sinks : {false, true})
                            // Values of the keys' head size, or of another (MLA: v_head_dim ≠ qk_head_dim).
                            for (const std::int64_t vd : {std::int64_t(0), d.headDim / 2 + 1}) {
                                AttentionShape sh{batch, cs.seq, d.heads, d.kvHeads, d.headDim, vd, 1 / std::sqrt(double(d.headDim)),
                                                  cs.past, cs.keyRows, window, cap};
                                sh.chunk = chunk;
                                worst = std::max(worst, attentionError(dt, sh, sinks));
                            }
            return worst;
        });
    }

    // Prefill attention is tiled (64 queries × 256 keys): sequences of several query and key tiles,
    // lengths one off a tile, a chunk after cached keys (past > 0) whose diagonal crosses tile
    // edges, large scores (the online softmax's rescaling), sliding windows whose edge crosses
    // tiles, and soft-capped scores.
    void attentionTiles_data()
    {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<int>("seq");
        QTest::addColumn<int>("past");
        QTest::addColumn<int>("keyRows");
        QTest::addColumn<int>("headDim");
        QTest::addColumn<double>("scale");
        QTest::addColumn<int>("window");
        QTest::addColumn<double>("softcap");
        QTest::addColumn<bool>("sinks");
        QTest::addColumn<int>("vHeadDim");
        QTest::addColumn<int>("chunk");
        struct Row { const char* name; int seq, past, keyRows, headDim; double scale; int window = 0; double softcap = 0; bool sinks = false; int vHeadDim = 0; int chunk = 0; };
        for (DType dt : {DType::F32, DType::BF16})
            for (const Row r : {Row{"S=300", 300, 0, 0, 64, 0.125}, Row{"S=64", 64, 0, 0, 32, 0.18}, Row{"S=65", 65, 0, 0, 16, 0.25},
                                Row{"S=257", 257, 0, 0, 8, 0.35}, Row{"chunk 129 after 70", 129, 70, 260, 40, 0.16},
                                Row{"chunk 65 after 191", 65, 191, 300, 64, 0.125}, Row{"large scores", 200, 0, 0, 64, 4.0},
                                Row{"S=600 window 300", 600, 0, 0, 32, 0.18, 300},
                                Row{"S=300 window 64", 300, 0, 0, 16, 0.25, 64},
                                Row{"chunk 129 after 300 window 100", 129, 300, 430, 32, 0.18, 100},
                                Row{"large scores capped", 200, 0, 0, 64, 4.0, 0, 20.0},
                                Row{"window 1", 70, 0, 0, 8, 0.35, 1},
                                Row{"S=300 window 128 sinks", 300, 0, 0, 16, 0.25, 128, 0, true},
                                Row{"large scores sinks", 200, 0, 0, 64, 4.0, 0, 0, true},
                                Row{"chunk 129 after 70 values 24 of keys 40", 129, 70, 260, 40, 0.16, 0, 0, false, 24},
                                Row{"S=300 values 48 of keys 16", 300, 0, 0, 16, 0.25, 0, 0, false, 48},
                                Row{"S=600 chunks 256", 600, 0, 0, 32, 0.18, 0, 0, false, 0, 256},
                                Row{"chunk 129 after 300 chunks 100", 129, 300, 430, 32, 0.18, 0, 0, false, 0, 100},
                                Row{"S=300 chunks 7", 300, 0, 0, 16, 0.25, 0, 0, false, 0, 7}})
                QTest::addRow("%s %s", std::string(dtypeName(dt)).c_str(), r.name) << int(dt) << r.seq << r.past << r.keyRows
                                                                                   << r.headDim << r.scale << r.window
                                                                                   << r.softcap << r.sinks << r.vHeadDim
                                                                                   << r.chunk;
    }
    void attentionTiles()
    {
        QFETCH(int, dtype);
        QFETCH(int, seq);
        QFETCH(int, past);
        QFETCH(int, keyRows);
        QFETCH(int, headDim);
        QFETCH(double, scale);
        QFETCH(int, window);
        QFETCH(double, softcap);
        QFETCH(bool, sinks);
        QFETCH(int, vHeadDim);
        QFETCH(int, chunk);
        const DType dt = DType(dtype);
        AttentionShape sh{1, seq, 4, 2, headDim, vHeadDim, scale, past, keyRows, window, softcap};
        sh.chunk = chunk;
        const double e = attentionError(dt, sh, sinks);
        QVERIFY2(e <= threshold(dt), qPrintable(QStringLiteral("normalised squared error %1").arg(e)));
    }

    // The backend's attention against a double reference; key rows past the last key are NaN: reading
    // one would show.
    double attentionError(DType dt, const AttentionShape& s, bool withSinks = false)
    {
        const std::int64_t Sq = s.seq, batch = s.batch, N = batch * Sq, hd = s.headDim, vd = s.vDim(), H = s.heads, KV = s.kvHeads;
        const std::int64_t R = s.rows(), qw = H * hd, kw = KV * hd, vw = KV * vd, yw = H * vd;
        Bench b(be(dt));
        const auto q = randomValues(N * qw, dt);
        auto k = randomValues(batch * R * kw, dt), v = randomValues(batch * R * vw, dt);
        for (std::int64_t bb = 0; bb < batch; ++bb)
            for (std::int64_t r = s.keys(); r < R; ++r) {
                for (std::int64_t e = 0; e < kw; ++e)
                    k[static_cast<std::size_t>((bb * R + r) * kw + e)] = std::nanf("");
                for (std::int64_t e = 0; e < vw; ++e)
                    v[static_cast<std::size_t>((bb * R + r) * vw + e)] = std::nanf("");
            }
        const Tensor Y = b.poisoned(N, yw);
        // gpt-oss's sinks: one logit per head, some above every score (most of the mass dropped).
        const auto sinks = randomValues(H, dt, 3.0f);
        const Tensor sinkT = withSinks ? b.put(sinks, 1, H) : Tensor{};
        Bench::check(be(dt).attention(b.put(q, N, qw), b.put(k, batch * R, kw), b.put(v, batch * R, vw), Y, s,
                                      b.scratch(be(dt).attentionScratchBytes(s)), withSinks ? &sinkT : nullptr));
        std::vector<double> ref(static_cast<std::size_t>(N * yw));
        for (std::int64_t bb = 0; bb < batch; ++bb)
            for (std::int64_t h = 0; h < H; ++h)
                for (std::int64_t i = 0; i < Sq; ++i) {
                    // Keys [first, past + i]: all of them, or the last `window`, or those of its chunk.
                    const std::int64_t seen = s.past + i + 1, g = h / (H / KV);
                    std::int64_t first = s.window > 0 ? std::max<std::int64_t>(0, seen - s.window) : 0;
                    if (s.chunk > 0)
                        first = std::max(first, (seen - 1) / s.chunk * s.chunk);
                    std::vector<double> p(static_cast<std::size_t>(seen), 0.0);
                    double mx = -1e300, sum = 0;
                    for (std::int64_t j = first; j < seen; ++j) {
                        double dot = 0;
                        for (std::int64_t e = 0; e < hd; ++e)
                            dot += double(q[static_cast<std::size_t>((bb * Sq + i) * qw + h * hd + e)])
                                * k[static_cast<std::size_t>((bb * R + j) * kw + g * hd + e)];
                        dot *= s.scale;
                        if (s.softcap > 0)
                            dot = s.softcap * std::tanh(dot / s.softcap);
                        mx = std::max(mx, p[static_cast<std::size_t>(j)] = dot);
                    }
                    const double sink = withSinks ? double(sinks[static_cast<std::size_t>(h)]) : -1e300;
                    mx = std::max(mx, sink);
                    if (withSinks)
                        sum += std::exp(sink - mx);
                    for (std::int64_t j = first; j < seen; ++j)
                        sum += (p[static_cast<std::size_t>(j)] = std::exp(p[static_cast<std::size_t>(j)] - mx));
                    for (std::int64_t e = 0; e < vd; ++e) {
                        double acc = 0;
                        for (std::int64_t j = first; j < seen; ++j)
                            acc += p[static_cast<std::size_t>(j)] / sum * v[static_cast<std::size_t>((bb * R + j) * vw + g * vd + e)];
                        ref[static_cast<std::size_t>((bb * Sq + i) * yw + h * vd + e)] = acc;
                    }
                }
        return nmse(b.get(Y), ref);
    }

    // Greedy sampling over logits rows (every other row of a wider tensor, as prefill's last
    // positions are), with ties and NaN: exact.
    void argmax_data() { rows(); }
    void argmax()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            const std::int64_t V = d.vocab, n = d.tokens;
            double wrong = 0;
            if (V == 0) // no logits to pick from: an error, not a pick
                return be(dt).argmax(Bench(be(dt)).make(n, 0, dt), Bench(be(dt)).ints(std::vector<std::int32_t>(std::size_t(n)))).ok() ? 1.0 : 0.0;
            for (DType xt : {dt, DType::F32}) {
                Bench b(be(dt));
                auto x = randomValues(2 * n * V, xt, 4.0f);
                for (std::int64_t r = 0; r < n; ++r) { // a tie on odd rows, NaN in front on every third
                    float* row = x.data() + 2 * r * V;
                    if (r % 2 && V > 2)
                        row[V - 1] = row[1] = 5.0f;
                    if (r % 3 == 0)
                        row[0] = std::nanf("");
                }
                Tensor X = b.put(x, 2 * n, V, xt);
                X.rows = n;
                X.stride = 2 * V;
                const Tensor ids = b.ints(std::vector<std::int32_t>(static_cast<std::size_t>(n), -1));
                Bench::check(be(dt).argmax(X, ids));
                Bench::check(be(dt).synchronize());
                std::vector<std::int32_t> got(static_cast<std::size_t>(n));
                Bench::check(be(dt).download(ids, got.data()));
                for (std::int64_t r = 0; r < n; ++r) {
                    const float* row = x.data() + 2 * r * V;
                    std::int64_t best = -1;
                    for (std::int64_t c = 0; c < V; ++c)
                        if (!std::isnan(row[c]) && (best < 0 || row[c] > row[best]))
                            best = c;
                    wrong += got[static_cast<std::size_t>(r)] != std::max<std::int64_t>(best, 0);
                }
            }
            return wrong;
        }, 0.0);
    }

    void gatedAct_data() { rows(); }
    void gatedAct()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            double worst = 0;
            for (Activation a : kComputed)
                for (bool packed : {false, true}) { // two tensors, or the halves of one packed [gate | up]
                    Bench b(be(dt));
                    const std::int64_t I = d.inter;
                    const auto x = randomValues(d.tokens * 2 * I, dt, 4.0f);
                    std::vector<double> ref(static_cast<std::size_t>(d.tokens * I));
                    Tensor G, U;
                    if (packed) {
                        const Tensor P = b.put(x, d.tokens, 2 * I);
                        G = P.columns(0, I);
                        U = P.columns(I, I);
                        for (std::int64_t t = 0; t < d.tokens; ++t)
                            for (std::int64_t j = 0; j < I; ++j)
                                ref[static_cast<std::size_t>(t * I + j)] = act(a, x[static_cast<std::size_t>(t * 2 * I + j)]) * x[static_cast<std::size_t>(t * 2 * I + I + j)];
                    } else {
                        const std::vector<float> g(x.begin(), x.begin() + d.tokens * I), u(x.begin() + d.tokens * I, x.end());
                        G = b.put(g, d.tokens, I);
                        U = b.put(u, d.tokens, I);
                        for (std::size_t i = 0; i < ref.size(); ++i)
                            ref[i] = act(a, g[i]) * u[i];
                    }
                    const Tensor Y = b.poisoned(d.tokens, I);
                    Bench::check(be(dt).gatedAct(G, U, Y, a));
                    worst = std::max(worst, nmse(b.get(Y), ref));
                }
            // A gate value per `span` up values (a per-token gate: span = I; a per-head one: a divisor of I).
            for (const std::int64_t span : {d.inter, std::int64_t(1) + (d.inter % 2 == 0)}) {
                if (span < 1)
                    continue;
                Bench b(be(dt));
                const std::int64_t I = d.inter;
                const auto g = randomValues(d.tokens * I / span, dt, 4.0f), u = randomValues(d.tokens * I, dt);
                const Tensor Y = b.poisoned(d.tokens, I);
                Bench::check(be(dt).gatedAct(b.put(g, d.tokens, I / span), b.put(u, d.tokens, I), Y, Activation::Sigmoid, span));
                std::vector<double> ref(u.size());
                for (std::int64_t t = 0; t < d.tokens; ++t)
                    for (std::int64_t j = 0; j < I; ++j)
                        ref[static_cast<std::size_t>(t * I + j)] = act(Activation::Sigmoid, g[static_cast<std::size_t>(t * (I / span) + j / span)])
                            * u[static_cast<std::size_t>(t * I + j)];
                worst = std::max(worst, nmse(b.get(Y), ref));
            }
            return worst;
        });
    }

    void embedding_data() { rows(); }
    void embedding()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            // Rank 1's vocab rows [vocab, 2·vocab) of 3·vocab: ids elsewhere give zero rows.
            Bench b(be(dt));
            const std::int64_t rows = d.vocab, first = d.vocab, H = d.hidden;
            const auto w = randomValues(rows * H, dt);
            std::vector<std::int32_t> ids;
            for (std::int64_t t = 0; t < d.tokens + 3; ++t)
                ids.push_back(std::int32_t((t * 7 + 1) % std::max<std::int64_t>(3 * d.vocab, 1)));
            // y as columns [1, 1 + H) of a wider tensor (a hidden shard's place in a gathered output).
            const Tensor wide = b.poisoned(std::int64_t(ids.size()), H + 2);
            const Tensor Y = wide.columns(1, H);
            Bench::check(be(dt).embedding(b.ints(ids), b.put(w, rows, H), Y, first));
            std::vector<double> ref(static_cast<std::size_t>(std::int64_t(ids.size()) * H), 0.0);
            for (std::size_t t = 0; t < ids.size(); ++t)
                if (ids[t] >= first && ids[t] < first + rows)
                    for (std::int64_t j = 0; j < H; ++j)
                        ref[t * std::size_t(H) + std::size_t(j)] = w[static_cast<std::size_t>((ids[t] - first) * H + j)];
            const auto all = b.get(wide);
            std::vector<float> got;
            for (std::size_t t = 0; t < ids.size(); ++t) {
                if (!std::isnan(all[t * std::size_t(H + 2)]) || !std::isnan(all[t * std::size_t(H + 2) + std::size_t(H) + 1]))
                    return 1e30; // written outside its columns
                got.insert(got.end(), all.begin() + std::ptrdiff_t(t * std::size_t(H + 2) + 1),
                           all.begin() + std::ptrdiff_t(t * std::size_t(H + 2) + 1 + std::size_t(H)));
            }
            return nmse(got, ref) + (std::equal(got.begin(), got.end(), ref.begin()) ? 0.0 : 1.0); // a copy: exact
        });
    }

    void addAndCopy_data() { rows(); }
    void addAndCopy()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            Bench b(be(dt));
            const std::int64_t W = d.hidden;
            const auto a = randomValues(d.tokens * W, dt), c = randomValues(d.tokens * W, dt), row = randomValues(W, dt);
            const Tensor A = b.put(a, d.tokens, W), Y = b.poisoned(d.tokens, W), Z = b.poisoned(d.tokens, W);
            Bench::check(be(dt).add(A, b.put(c, d.tokens, W), Y));
            Bench::check(be(dt).add(A, b.put(row, 1, W), Z)); // a bias row added to every row
            std::vector<double> ry(a.size()), rz(a.size());
            for (std::size_t i = 0; i < a.size(); ++i) {
                ry[i] = double(a[i]) + c[i];
                rz[i] = double(a[i]) + row[i % std::size_t(W)];
            }
            // copy: columns [2, W) of A into columns [0, W-2) of a wider tensor (split and concat).
            const Tensor wide = b.poisoned(d.tokens, W + 1);
            Bench::check(be(dt).copy(A.columns(2, W - 2), wide.columns(0, W - 2)));
            const auto w = b.get(wide);
            double copyErr = 0;
            for (std::int64_t t = 0; t < d.tokens; ++t)
                for (std::int64_t j = 0; j < W - 2; ++j)
                    copyErr += w[static_cast<std::size_t>(t * (W + 1) + j)] != a[static_cast<std::size_t>(t * W + 2 + j)];
            return std::max(nmse(b.get(Y), ry), nmse(b.get(Z), rz)) + copyErr;
        });
    }

    // y = f·x and c·tanh(f·x / c): from columns of one tensor into columns of another, and in place.
    void scale_data() { rows(); }
    void scale()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            const std::int64_t W = d.hidden;
            double worst = 0;
            for (const auto& [factor, cap] : {std::pair{5.65625, 0.0}, std::pair{1.0, 0.3}, std::pair{2.0, 30.0}}) {
                Bench b(be(dt));
                const auto x = randomValues(d.tokens * (W + 3), dt, 2.0f);
                const Tensor X = b.put(x, d.tokens, W + 3), Y = b.poisoned(d.tokens, W + 1);
                Bench::check(be(dt).scale(X.columns(3, W), Y.columns(1, W), factor, cap));
                Bench::check(be(dt).scale(X, X, factor, cap));
                auto f = [&](float v) { return cap > 0 ? cap * std::tanh(factor * v / cap) : factor * double(v); };
                std::vector<double> ry, rx;
                std::vector<float> gy, gx = b.get(X);
                const auto yAll = b.get(Y);
                for (std::int64_t t = 0; t < d.tokens; ++t)
                    for (std::int64_t j = 0; j < W; ++j) {
                        ry.push_back(f(x[static_cast<std::size_t>(t * (W + 3) + 3 + j)]));
                        gy.push_back(yAll[static_cast<std::size_t>(t * (W + 1) + 1 + j)]);
                    }
                for (const float v : x)
                    rx.push_back(f(v));
                worst = std::max({worst, nmse(gy, ry), nmse(gx, rx)});
            }
            return worst;
        });
    }

    // The router's scores: a row-wise softmax, or an elementwise sigmoid.
    void routerScores_data() { rows(); }
    void routerScores()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            const std::int64_t E = std::max<std::int64_t>(d.experts, 1);
            Bench b(be(dt));
            const auto x = randomValues(d.tokens * E, DType::F32, 8.0f);
            const Tensor Y = b.poisoned(d.tokens, E, DType::F32);
            const Tensor X = b.put(x, d.tokens, E, DType::F32);
            Bench::check(be(dt).softmax(X, Y));
            // DeepSeek's and Llama 4's sigmoid scores, in place.
            const Tensor Z = b.put(x, d.tokens, E, DType::F32);
            Bench::check(be(dt).sigmoid(Z, Z));
            std::vector<double> ref(x.size()), sig(x.size());
            for (std::size_t i = 0; i < x.size(); ++i)
                sig[i] = 1 / (1 + std::exp(-double(x[i])));
            for (std::int64_t t = 0; t < d.tokens; ++t) {
                double mx = -1e300, sum = 0;
                for (std::int64_t e = 0; e < E; ++e)
                    mx = std::max(mx, double(x[static_cast<std::size_t>(t * E + e)]));
                for (std::int64_t e = 0; e < E; ++e)
                    sum += ref[static_cast<std::size_t>(t * E + e)] = std::exp(x[static_cast<std::size_t>(t * E + e)] - mx);
                for (std::int64_t e = 0; e < E; ++e)
                    ref[static_cast<std::size_t>(t * E + e)] /= sum;
            }
            return std::max(nmse(b.get(Y), ref), nmse(b.get(Z), sig));
        }, threshold(DType::F32)); // F32 in and out whatever the storage dtype
    }

    // Llama 4's query temperature: each row times log1p(floor((position + 1) / floor)) · scale + 1.
    void temperature_data() { rows(); }
    void temperature()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            const std::int64_t W = std::max<std::int64_t>(d.heads, 1) * d.headDim;
            Bench b(be(dt));
            const auto x = randomValues(d.tokens * W, dt);
            std::vector<std::int32_t> pos;
            for (std::int64_t t = 0; t < d.tokens; ++t)
                pos.push_back(std::int32_t(t * 37 % 50));
            const Tensor Y = b.poisoned(d.tokens, W);
            Bench::check(be(dt).temperature(b.put(x, d.tokens, W), Y, b.ints(pos), 3.0, 0.5));
            std::vector<double> ref(x.size());
            for (std::int64_t t = 0; t < d.tokens; ++t)
                for (std::int64_t c = 0; c < W; ++c)
                    ref[static_cast<std::size_t>(t * W + c)] = x[static_cast<std::size_t>(t * W + c)]
                        * (std::log1p(std::floor((pos[static_cast<std::size_t>(t)] + 1.0) / 3.0)) * 0.5 + 1);
            return nmse(b.get(Y), ref);
        });
    }

    // MLA's per-head keys [k_nope | k_pe] and values from kv [heads · (nope + v)] and one shared
    // k_pe (a column view of a wider tensor, as the split leaves it); exact (a copy), written into
    // rows of a larger cache whose other rows stay as they were.
    void mlaKv_data() { rows(); }
    void mlaKv()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            if (d.heads == 0)
                return 0.0;
            const std::int64_t n = d.tokens, H = d.heads, nope = d.headDim + 1, vd = d.headDim / 2 + 1, rd = d.headDim;
            Bench b(be(dt));
            const auto kv = randomValues(n * H * (nope + vd), dt), wide = randomValues(n * (rd + 5), dt);
            const Tensor wideT = b.put(wide, n, rd + 5);
            const Tensor K = b.poisoned(n + 3, H * (nope + rd)), V = b.poisoned(n + 3, H * vd);
            Bench::check(be(dt).mlaKv(b.put(kv, n, H * (nope + vd)), wideT.columns(5, rd), K.rowRange(2, n), V.rowRange(2, n), H, nope));
            const auto k = b.get(K), v = b.get(V);
            double bad = 0;
            for (std::int64_t t = 0; t < n + 3; ++t)
                for (std::int64_t h = 0; h < H; ++h) {
                    const bool written = t >= 2 && t < n + 2;
                    for (std::int64_t j = 0; j < nope + rd; ++j) {
                        const float got = k[static_cast<std::size_t>((t * H + h) * (nope + rd) + j)];
                        const float want = !written ? std::nanf("")
                            : j < nope ? kv[static_cast<std::size_t>(((t - 2) * H + h) * (nope + vd) + j)]
                                       : wide[static_cast<std::size_t>((t - 2) * (rd + 5) + 5 + j - nope)];
                        bad += !(got == want || (std::isnan(got) && std::isnan(want)));
                    }
                    for (std::int64_t j = 0; j < vd; ++j) {
                        const float got = v[static_cast<std::size_t>((t * H + h) * vd + j)];
                        const float want = written ? kv[static_cast<std::size_t>(((t - 2) * H + h) * (nope + vd) + nope + j)] : std::nanf("");
                        bad += !(got == want || (std::isnan(got) && std::isnan(want)));
                    }
                }
            return bad;
        }, 0.0);
    }

    void experts_data() { rows(); }
    void experts()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            if (d.experts == 0)
                return 0.0;
            double worst = 0;
            // This rank's experts: the first ones (TP rows: all of them), or the last `local` (EP).
            // Softmax-style routing with or without renormalisation; DeepSeek's: a score bias, the
            // top-k among the best half of the groups (when E splits into groups of 2 or more),
            // renormalised, scaled.
            // Llama 4's: the weights on the experts' inputs (each rounded to the storage dtype).
            // DeepSeek-V2's: groups scored by their best, no bias, scaled. PhiMoE's sparsemixer on
            // logits (two picks, each weighed among the logits near it). Kolibri's: logits + bias
            // choose, sigmoid(logit) weighs, renormalised. Nemotron-H's: DeepSeek's routing over ungated ReLU² experts.
            for (int variant : {0, 1, 2, 3, 4, 5, 6, 7}) {
                const bool ungated = variant == 7;
                const bool normalize = variant == 1 || variant == 2 || variant == 6 || ungated, deepseek = variant == 2 || ungated;
                const bool llama4 = variant == 3, v2 = variant == 4, mixer = variant == 5, kolibri = variant == 6;
                if (mixer && d.experts < 2)
                    continue;
                Bench b(be(dt));
                const std::int64_t N = d.tokens, H = d.hidden, E = d.experts, El = d.localExperts, I = d.expertInter;
                const std::int64_t first = E - El;
                ExpertsShape s{E, mixer ? 2 : d.topK, first, El, I, normalize, ungated ? Activation::Relu2 : Activation::Silu};
                s.gated = !ungated;
                const std::int64_t upRows = (ungated ? 1 : 2) * I;
                if (deepseek || v2)
                    groupLimited(s);
                s.groupByMax = v2;
                s.sparseMixer = mixer;
                s.jitterEps = 0.3;
                s.logitChoice = kolibri;
                s.weightInputs = llama4;
                const auto x = randomValues(N * H, dt);
                const auto scores = mixer || kolibri ? randomValues(N * E, DType::F32, 2.0f) : routerWeights(N * E);
                const auto bias = randomValues(E, dt, 0.3f);
                const Tensor biasT = b.put(bias, 1, E);
                const auto gu = randomValues(El * upRows * H, dt, 0.3f), dn = randomValues(El * H * I, dt, 0.3f);
                const Tensor Y = b.poisoned(N, H);
                Bench::check(be(dt).experts(b.put(x, N, H), b.put(scores, N, E, DType::F32), b.put(gu, El * upRows, H),
                                            b.put(dn, El * H, I), Y, s, b.scratch(be(dt).expertsScratchBytes(N, H, s)), nullptr,
                                            nullptr, deepseek || kolibri ? &biasT : nullptr));
                const std::vector<double> ref = refExperts(x, scores, deepseek || kolibri ? &bias : nullptr, gu, dn, s, N, H, dt);
                worst = std::max(worst, nmse(b.get(Y), ref));
            }
            return worst;
        });
    }

    // Llama 4's experts as Transformers reduces them: every expert's rows unsummed (zeros where a
    // token did not pick the expert), then sumBlocks(): the experts op's sum. Each token has at most
    // top-k nonzero rows.
    void expertsPerExpertRows_data() { rows(); }
    void expertsPerExpertRows()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            if (d.experts == 0)
                return 0.0;
            Bench b(be(dt));
            const std::int64_t N = d.tokens, H = d.hidden, E = d.experts, I = d.expertInter;
            ExpertsShape s{E, d.topK, 0, E, I, false, Activation::Silu};
            s.weightInputs = true;
            s.perExpertRows = true;
            const auto x = randomValues(N * H, dt), scores = routerWeights(N * E);
            const auto gu = randomValues(E * 2 * I * H, dt, 0.3f), dn = randomValues(E * H * I, dt, 0.3f);
            const Tensor Z = b.poisoned(E * N, H), Y = b.poisoned(N, H);
            Bench::check(be(dt).experts(b.put(x, N, H), b.put(scores, N, E, DType::F32), b.put(gu, E * 2 * I, H),
                                        b.put(dn, E * H, I), Z, s, b.scratch(be(dt).expertsScratchBytes(N, H, s))));
            const std::vector<float> z = b.get(Z);
            for (std::int64_t t = 0; t < N; ++t) {
                std::int64_t picked = 0;
                for (std::int64_t e = 0; e < E; ++e)
                    picked += std::any_of(z.begin() + (e * N + t) * H, z.begin() + (e * N + t + 1) * H, [](float v) { return v != 0.0f; });
                if (picked > d.topK)
                    return 1.0; // more rows than picks: not zeros where the token did not pick the expert
            }
            Bench::check(be(dt).sumBlocks(Z, Y));
            s.perExpertRows = false;
            return nmse(b.get(Y), refExperts(x, scores, nullptr, gu, dn, s, N, H, dt));
        });
    }

    // y[t] = Σ_b z[b·n + t]: against the double sum of the stored values.
    void sumBlocks_data() { rows(); }
    void sumBlocks()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            Bench b(be(dt));
            const std::int64_t n = d.tokens, H = d.hidden, blocks = 5;
            const auto z = randomValues(blocks * n * H, dt);
            const Tensor Y = b.poisoned(n, H);
            Bench::check(be(dt).sumBlocks(b.put(z, blocks * n, H), Y));
            std::vector<double> ref(static_cast<std::size_t>(n * H), 0.0);
            for (std::int64_t i = 0; i < blocks * n * H; ++i)
                ref[static_cast<std::size_t>(i % (n * H))] += z[static_cast<std::size_t>(i)];
            return nmse(b.get(Y), ref);
        });
    }

    // An all-to-all dispatch's ops on one rank holding every expert: route() picks, the picked rows
    // gathered (embedding) in reverse pick order, experts() on them with given experts (top-1,
    // weight 1), combine() back by slot with the weights: the experts op's result.
    void expertsDispatched_data() { rows(); }
    void expertsDispatched()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            if (d.experts == 0)
                return 0.0;
            double worst = 0;
            for (int variant : {0, 1, 2}) {
                const bool normalize = variant >= 1, deepseek = variant == 2;
                Bench b(be(dt));
                const std::int64_t N = d.tokens, H = d.hidden, E = d.experts, K = d.topK, I = d.expertInter, M = N * K;
                ExpertsShape s{E, K, 0, E, I, normalize, Activation::Silu};
                if (deepseek)
                    groupLimited(s);
                const auto x = randomValues(N * H, dt), scores = routerWeights(N * E);
                const auto bias = randomValues(E, dt, 0.3f);
                const Tensor biasT = b.put(bias, 1, E);
                const auto gu = randomValues(E * 2 * I * H, dt, 0.3f), dn = randomValues(E * H * I, dt, 0.3f);
                const Tensor X = b.put(x, N, H), GU = b.put(gu, E * 2 * I, H), DN = b.put(dn, E * H, I);
                const Tensor ids = b.make(N, K, DType::I32), weights = b.make(N, K, DType::F32);
                Bench::check(be(dt).route(b.put(scores, N, E, DType::F32), s, ids, weights, b.scratch(be(dt).routeScratchBytes(s)),
                                          deepseek ? &biasT : nullptr));
                Bench::check(be(dt).synchronize());
                std::vector<std::int32_t> picked(static_cast<std::size_t>(M)), sendIndex(picked.size()), slotOf(picked.size()),
                    given(picked.size());
                Bench::check(be(dt).download(ids, picked.data()));
                for (std::int64_t i = 0; i < M; ++i) {
                    const auto at = static_cast<std::size_t>(M - 1 - i);
                    sendIndex[at] = static_cast<std::int32_t>(i / K);
                    given[at] = picked[static_cast<std::size_t>(i)];
                    slotOf[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(at);
                }
                const Tensor sent = b.poisoned(M, H), out = b.poisoned(M, H), Y = b.poisoned(N, H);
                Bench::check(be(dt).embedding(b.ints(sendIndex), X, sent, 0));
                ExpertsShape one = s;
                one.givenExperts = true;
                one.topK = 1;
                one.groups = one.topkGroup = 1;
                one.routedScale = 1;
                Bench::check(be(dt).experts(sent, b.ints(given).reshaped(M, 1), GU, DN, out, one,
                                            b.scratch(be(dt).expertsScratchBytes(M, H, one))));
                Bench::check(be(dt).combine(out, b.ints(slotOf), weights, Y));
                worst = std::max(worst, nmse(b.get(Y), refExperts(x, scores, deepseek ? &bias : nullptr, gu, dn, s, N, H, dt)));
            }
            return worst;
        });
    }

    // Mamba 2's convolution: a prefill from a fresh state, then decode steps that continue it, each against the stream
    // written out in double; x a column view (the mixer's [z | x B C | dt]), prompts shorter and longer than the kernel.
    void causalConv_data() { rows(); }
    void causalConv()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            double worst = 0;
            const std::int64_t C = d.hidden + 3;
            // The state and y whole, or column views of wider tensors (the gated delta rule's q, k and v apart), whose
            // other columns must stay untouched.
            auto inside = [](const std::vector<float>& all, std::int64_t cols, std::int64_t from, std::int64_t count) {
                std::vector<float> in;
                for (std::size_t r = 0; r < all.size() / static_cast<std::size_t>(cols); ++r)
                    for (std::int64_t c = 0; c < cols; ++c) {
                        const float v = all[r * static_cast<std::size_t>(cols) + static_cast<std::size_t>(c)];
                        if (c >= from && c < from + count)
                            in.push_back(v);
                        else if (!std::isnan(v))
                            in.push_back(std::nanf("")); // written outside its columns: fails the comparison
                    }
                return in;
            };
            for (const std::int64_t K : {4, 1})
                for (const std::int64_t S : {d.tokens, std::int64_t(2)})
                    for (const bool silu : {true, false}) {
                        const std::int64_t batch = 2, steps = 2, wide = C + 5, pad = silu ? 0 : 3; // views: 3 columns either side
                        Bench b(be(dt));
                        const auto w = randomValues(C * K, dt), bias = randomValues(C, dt);
                        const Tensor W = b.put(w, C, K), Bias = b.put(bias, 1, C);
                        const Tensor stateAll = b.poisoned(batch * K, C + 2 * pad), state = stateAll.columns(pad, C);
                        std::vector<std::vector<float>> inputs; // each sequence's rows, over every call
                        std::vector<std::vector<double>> streams(static_cast<std::size_t>(batch), std::vector<double>(
                                                                     static_cast<std::size_t>(K * C), 0.0)); // K zero rows first
                        for (std::int64_t call = 0; call <= steps; ++call) {
                            const std::int64_t rows = call == 0 ? S : 1;
                            const auto xw = randomValues(batch * rows * wide, dt);
                            const Tensor Yall = b.poisoned(batch * rows, C + 2 * pad);
                            Bench::check(be(dt).causalConv(b.put(xw, batch * rows, wide).columns(2, C), W, &Bias, state,
                                                           Yall.columns(pad, C), silu ? std::optional(Activation::Silu) : std::nullopt,
                                                           call == 0));
                            std::vector<double> ref;
                            for (std::int64_t q = 0; q < batch; ++q) {
                                auto& st = streams[static_cast<std::size_t>(q)];
                                for (std::int64_t t = 0; t < rows; ++t) {
                                    for (std::int64_t c = 0; c < C; ++c)
                                        st.push_back(xw[static_cast<std::size_t>((q * rows + t) * wide + 2 + c)]);
                                    const std::int64_t last = static_cast<std::int64_t>(st.size()) / C - 1; // this row's place
                                    for (std::int64_t c = 0; c < C; ++c) {
                                        double v = bias[static_cast<std::size_t>(c)];
                                        for (std::int64_t k = 0; k < K; ++k)
                                            v += w[static_cast<std::size_t>(c * K + k)] * st[static_cast<std::size_t>((last - K + 1 + k) * C + c)];
                                        ref.push_back(silu ? act(Activation::Silu, v) : v);
                                    }
                                }
                            }
                            worst = std::max(worst, nmse(inside(b.get(Yall), C + 2 * pad, pad, C), ref));
                        }
                        std::vector<double> stateRef; // each sequence's last K rows
                        for (const auto& st : streams)
                            stateRef.insert(stateRef.end(), st.end() - K * C, st.end());
                        worst = std::max(worst, nmse(inside(b.get(stateAll), C + 2 * pad, pad, C), stateRef));
                    }
            return worst;
        });
    }

    // Mamba 2's selective scan: a prefill (time step clamped where the limits bite) from a fresh state, then decode
    // steps that continue it, against the recurrence in double; the final state too.
    void ssmScan_data() { rows(); }
    void ssmScan()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            double worst = 0;
            const std::int64_t batch = 2, heads = 4, P = 3, N = std::max<std::int64_t>(d.headDim / 4, 2), steps = 2;
            for (const std::int64_t groups : {1, 2})
                for (const auto& [dtMin, dtMax] : {std::pair{0.0, std::numeric_limits<double>::infinity()}, {0.2, 1.5}, {0.0, 0.0}}) {
                    Bench b(be(dt));
                    const std::int64_t width = heads * P, gs = groups * N, wide = width + heads + 2 * gs; // [x | dt | B | C]
                    const auto aLog = randomValues(heads, dt), D = randomValues(heads, dt), dtBias = randomValues(heads, dt);
                    const Tensor ALog = b.put(aLog, 1, heads), Dt = b.put(D, 1, heads), DtBias = b.put(dtBias, 1, heads);
                    const Tensor state = b.poisoned(batch, width * N, DType::F32);
                    std::vector<double> s(static_cast<std::size_t>(batch * width * N), 0.0);
                    for (std::int64_t call = 0; call <= steps; ++call) {
                        const std::int64_t rows = call == 0 ? d.tokens : 1;
                        const auto in = randomValues(batch * rows * wide, dt, 3.0f);
                        const Tensor In = b.put(in, batch * rows, wide), Y = b.poisoned(batch * rows, width);
                        ScanShape sh{.batch = batch, .heads = heads, .headDim = P, .groups = groups, .state = N, .fresh = call == 0};
                        if (call == 0) {
                            sh.dtMin = dtMin;
                            sh.dtMax = dtMax;
                        }
                        Bench::check(be(dt).ssmScan(In.columns(0, width), In.columns(width, heads), In.columns(width + heads, gs),
                                                    In.columns(width + heads + gs, gs), ALog, Dt, DtBias, state, Y, sh));
                        std::vector<double> ref(static_cast<std::size_t>(batch * rows * width));
                        auto at = [&](std::int64_t r, std::int64_t c) { return double(in[static_cast<std::size_t>(r * wide + c)]); };
                        for (std::int64_t q = 0; q < batch; ++q)
                            for (std::int64_t t = 0; t < rows; ++t) {
                                const std::int64_t r = q * rows + t;
                                for (std::int64_t h = 0; h < heads; ++h) {
                                    const std::int64_t g = h / (heads / groups);
                                    double step = at(r, width + h) + dtBias[static_cast<std::size_t>(h)];
                                    step = step > 20 ? step : std::log1p(std::exp(step));
                                    step = std::min(std::max(step, sh.dtMin), sh.dtMax);
                                    const double decay = std::exp(-std::exp(double(aLog[static_cast<std::size_t>(h)])) * step);
                                    for (std::int64_t p = 0; p < P; ++p) {
                                        const double x = at(r, h * P + p);
                                        double out = 0;
                                        for (std::int64_t n = 0; n < N; ++n) {
                                            double& v = s[static_cast<std::size_t>(((q * heads + h) * P + p) * N + n)];
                                            v = decay * v + step * at(r, width + heads + g * N + n) * x;
                                            out += at(r, width + heads + gs + g * N + n) * v;
                                        }
                                        ref[static_cast<std::size_t>(r * width + h * P + p)] = out + D[static_cast<std::size_t>(h)] * x;
                                    }
                                }
                            }
                        worst = std::max(worst, nmse(b.get(Y), ref));
                    }
                    worst = std::max(worst, nmse(b.get(state), s));
                }
            return worst;
        });
    }

    // The gated delta rule: a prefill from a fresh state, then decode steps that continue it, against the recurrence in
    // double (value heads sharing key heads, q, k and v as column views of one tensor, as the executor hands them).
    void deltaRule_data() { rows(); }
    void deltaRule()
    {
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        forShapes(dt, [&](const Dims& d) {
            double worst = 0;
            const std::int64_t batch = 2, steps = 2, dk = std::max<std::int64_t>(d.headDim / 2, 2), dv = 3;
            for (const auto& [keyHeads, valueHeads] : {std::pair<std::int64_t, std::int64_t>{2, 2}, {1, 3}}) {
                Bench b(be(dt));
                const std::int64_t keys = keyHeads * dk, values = valueHeads * dv, wide = 2 * keys + values + 2 * valueHeads;
                const auto aLog = randomValues(valueHeads, dt), dtBias = randomValues(valueHeads, dt);
                const Tensor ALog = b.put(aLog, 1, valueHeads), DtBias = b.put(dtBias, 1, valueHeads);
                const Tensor state = b.poisoned(batch, values * dk, DType::F32);
                std::vector<double> S(static_cast<std::size_t>(batch * valueHeads * dk * dv), 0.0); // [b][h][i][j]
                for (std::int64_t call = 0; call <= steps; ++call) {
                    const std::int64_t rows = call == 0 ? d.tokens : 1;
                    const auto in = randomValues(batch * rows * wide, dt, 2.0f); // [q | k | v | b | a]
                    const Tensor In = b.put(in, batch * rows, wide), Y = b.poisoned(batch * rows, values);
                    const DeltaShape sh{.batch = batch, .keyHeads = keyHeads, .valueHeads = valueHeads, .keyDim = dk, .valueDim = dv,
                                        .fresh = call == 0};
                    Bench::check(be(dt).deltaRule(In.columns(0, keys), In.columns(keys, keys), In.columns(2 * keys, values),
                                                  In.columns(2 * keys + values, valueHeads),
                                                  In.columns(2 * keys + values + valueHeads, valueHeads), ALog, DtBias, state, Y, sh));
                    auto at = [&](std::int64_t r, std::int64_t c) { return double(in[static_cast<std::size_t>(r * wide + c)]); };
                    std::vector<double> ref(static_cast<std::size_t>(batch * rows * values));
                    for (std::int64_t q = 0; q < batch; ++q)
                        for (std::int64_t t = 0; t < rows; ++t) {
                            const std::int64_t r = q * rows + t;
                            for (std::int64_t h = 0; h < valueHeads; ++h) {
                                const std::int64_t kh = h / (valueHeads / keyHeads);
                                double qq = 0, kk = 0;
                                for (std::int64_t i = 0; i < dk; ++i) {
                                    qq += at(r, kh * dk + i) * at(r, kh * dk + i);
                                    kk += at(r, keys + kh * dk + i) * at(r, keys + kh * dk + i);
                                }
                                const double qn = 1 / std::sqrt(qq + 1e-6) / std::sqrt(double(dk)), kn = 1 / std::sqrt(kk + 1e-6);
                                const double beta = 1 / (1 + std::exp(-at(r, 2 * keys + values + h)));
                                const double av = at(r, 2 * keys + values + valueHeads + h) + dtBias[static_cast<std::size_t>(h)];
                                const double g = -std::exp(double(aLog[static_cast<std::size_t>(h)])) * (av > 20 ? av : std::log1p(std::exp(av)));
                                double* Sh = S.data() + (q * valueHeads + h) * dk * dv;
                                for (std::int64_t e = 0; e < dk * dv; ++e)
                                    Sh[e] *= std::exp(g);
                                for (std::int64_t j = 0; j < dv; ++j) {
                                    double mem = 0;
                                    for (std::int64_t i = 0; i < dk; ++i)
                                        mem += Sh[i * dv + j] * at(r, keys + kh * dk + i) * kn;
                                    const double delta = (at(r, 2 * keys + h * dv + j) - mem) * beta;
                                    double out = 0;
                                    for (std::int64_t i = 0; i < dk; ++i) {
                                        Sh[i * dv + j] += at(r, keys + kh * dk + i) * kn * delta;
                                        out += Sh[i * dv + j] * at(r, kh * dk + i) * qn;
                                    }
                                    ref[static_cast<std::size_t>(r * values + h * dv + j)] = out;
                                }
                            }
                        }
                    worst = std::max(worst, nmse(b.get(Y), ref));
                }
                std::vector<double> stateRef; // the op's layout: [b][h][j][i]
                for (std::int64_t q = 0; q < batch; ++q)
                    for (std::int64_t h = 0; h < valueHeads; ++h)
                        for (std::int64_t j = 0; j < dv; ++j)
                            for (std::int64_t i = 0; i < dk; ++i)
                                stateRef.push_back(S[static_cast<std::size_t>(((q * valueHeads + h) * dk + i) * dv + j)]);
                worst = std::max(worst, nmse(b.get(state), stateRef));
            }
            return worst;
        });
    }

    void fillUniform_data() { rows(); }
    void fillUniform()
    {
        // Seeded weights are the same bits on every backend: the fp32 values of the formula,
        // rounded once to the storage dtype.
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        Bench b(be(dt));
        UniformFill f{0x1234abcdull, 1.0f, 0.1f, {{0, 1000, 37}, {37, 5, 11}, {48, 1 << 30, 16}}};
        const Tensor t = b.poisoned(1, 64);
        Bench::check(be(dt).fillUniform(t, f));
        const auto got = b.get(t);
        for (const FillRun& r : f.runs)
            for (std::int64_t i = 0; i < r.count; ++i) {
                const double u = double(splitmix64(f.key ^ splitmix64(std::uint64_t(r.global + i))) >> 11) / 9007199254740992.0;
                float want = f.base + f.scale * float(2 * u - 1);
                std::uint16_t h = 0;
                if (dt != DType::F32) {
                    fromFloat(&want, dt, &h, 1);
                    toFloat(&h, dt, &want, 1);
                }
                QCOMPARE(got[static_cast<std::size_t>(r.local + i)], want);
            }
    }

    void shapeErrorsAreStatuses()
    {
        // A wrong shape is an InvalidArgument naming the op, never a crash.
        Backend& b32 = be(DType::F32);
        Bench b(b32);
        const Tensor x = b.make(4, 8, DType::F32), w = b.make(6, 9, DType::F32), y = b.make(4, 6, DType::F32);
        const Status st = b32.gemm(x, w, nullptr, y, b.scratch(1));
        QCOMPARE(st.code(), StatusCode::InvalidArgument);
        QVERIFY2(st.message().starts_with("gemm: "), st.message().c_str());
        const Status dt = b32.add(x, b.make(4, 8, DType::BF16), x);
        QCOMPARE(dt.code(), StatusCode::InvalidArgument);
        // A dispatch's ops: picks that do not fit the top-k, slots that do not cover every pick,
        // given experts with top-2.
        const ExpertsShape s{8, 2, 0, 8, 4, true, Activation::Silu};
        const Status route = b32.route(b.make(4, 8, DType::F32), s, b.make(4, 3, DType::I32), b.make(4, 2, DType::F32), b.scratch(256));
        QVERIFY2(route.code() == StatusCode::InvalidArgument && route.message().starts_with("route: "), route.message().c_str());
        ExpertsShape mixer = s; // the sparsemixer takes two experts, never renormalised
        mixer.sparseMixer = true;
        const Status mixed = b32.route(b.make(4, 8, DType::F32), mixer, b.make(4, 2, DType::I32), b.make(4, 2, DType::F32), b.scratch(256));
        QVERIFY2(mixed.code() == StatusCode::InvalidArgument && mixed.message().find("sparsemixer") != std::string::npos,
                 mixed.message().c_str());
        const Status combine = b32.combine(x, b.make(1, 7, DType::I32), b.make(4, 2, DType::F32), x);
        QVERIFY2(combine.code() == StatusCode::InvalidArgument && combine.message().starts_with("combine: "), combine.message().c_str());
        const Status blocks = b32.sumBlocks(b.make(7, 8, DType::F32), b.make(2, 8, DType::F32)); // 7 rows are not blocks of 2
        QVERIFY2(blocks.code() == StatusCode::InvalidArgument && blocks.message().starts_with("sum_blocks: "), blocks.message().c_str());
        ExpertsShape given = s;
        given.givenExperts = true;
        const Status experts = b32.experts(x, b.make(4, 1, DType::I32), b.make(8 * 8, 8, DType::F32), b.make(8 * 8, 4, DType::F32), x,
                                           given, b.scratch(b32.expertsScratchBytes(4, 8, given)));
        QVERIFY2(experts.code() == StatusCode::InvalidArgument && experts.message().find("given experts with top-2") != std::string::npos,
                 experts.message().c_str());
        // Mamba 2: 7 rows are not two sequences; a scan state that is not F32; a lower time-step limit above the upper.
        const Status conv = b32.causalConv(b.make(7, 8, DType::F32), b.make(8, 4, DType::F32), nullptr, b.make(2 * 4, 8, DType::F32),
                                           b.make(7, 8, DType::F32), Activation::Silu, true);
        QVERIFY2(conv.code() == StatusCode::InvalidArgument && conv.message().find("2 sequences") != std::string::npos, conv.message().c_str());
        const Tensor h = b.make(1, 2, DType::F32), xs = b.make(4, 6, DType::F32), g = b.make(4, 2, DType::F32);
        ScanShape scan{.batch = 2, .heads = 2, .headDim = 3, .groups = 1, .state = 2};
        const Status state = b32.ssmScan(xs, g, g, g, h, h, h, b.make(2, 12, DType::BF16), xs, scan);
        QVERIFY2(state.code() == StatusCode::InvalidArgument && state.message().starts_with("ssm_scan: state"), state.message().c_str());
        scan.dtMin = 2;
        scan.dtMax = 1;
        const Status limits = b32.ssmScan(xs, g, g, g, h, h, h, b.make(2, 12, DType::F32), xs, scan);
        QVERIFY2(limits.code() == StatusCode::InvalidArgument && limits.message().find("time step limits") != std::string::npos,
                 limits.message().c_str());
    }
};

int main(int argc, char** argv)
{
    std::vector<char*> args(argv, argv + argc);
    if (argc > 1 && (std::strcmp(argv[1], "cuda") == 0 || std::strcmp(argv[1], "cpu") == 0)) {
        g_device = std::strcmp(argv[1], "cuda") == 0 ? DeviceKind::Cuda : DeviceKind::Cpu;
        args.erase(args.begin() + 1);
    }
    if (g_device == DeviceKind::Cuda) {
        // ctest counts exit code 77 as Skipped; say why.
        if (!haveCudaBackend()) {
            std::printf("SKIP: this build has no CUDA backend (nvcc was not found at configure time)\n");
            return 77;
        }
        if (auto inv = gpu::probe(); !inv) {
            std::printf("SKIP: no GPU to test the CUDA backend on: %s\n", inv.status().message().c_str());
            return 77;
        }
    }
    QCoreApplication app(argc, argv);
    TestBackendOps t;
    int n = static_cast<int>(args.size());
    return QTest::qExec(&t, n, args.data());
}

#include "tst_backend_ops.moc"
