// tst_gpu — the CUDA engine end to end: whole-model logits on the GPU against the CPU engine and
// against Transformers' fixtures, per family, dtype and tp size (real ranks where there are enough
// GPUs, single-GPU emulation otherwise); NCCL collectives with uneven pieces, abort of the whole
// group and the watchdog (two GPUs or more); the emulation group's collectives on one GPU.
// Exits 77 (ctest: Skipped) with the reason when the build has no CUDA or no GPU is visible.
#include "tp/cost/hardware.h"
#include "tp/model/loader.h"
#include "tp/plan/plan_io.h"
#include "tp/runtime/backend.h"
#include "tp/runtime/communicator.h"
#include "tp/runtime/executor.h"
#include "tp/runtime/gpu.h"

#include "testutils.h"

#include <QtTest>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <thread>

using namespace tp;

namespace {

const std::string kModels = tptest::sourceDir() + "/tests/fixtures/models/";
int g_gpus = 0;

using tptest::relError;

struct Reference
{
    std::int64_t batch = 0, seq = 0;
    std::vector<std::int32_t> tokens;
    std::vector<float> logits, logitsBf16;
};

Reference reference(const std::string& family)
{
    std::ifstream in(kModels + family + "/logits.json");
    const auto j = nlohmann::json::parse(in);
    return {j["batch"], j["seq"], j["tokens"].get<std::vector<std::int32_t>>(), j["logits"].get<std::vector<float>>(),
            j["logits_bf16"].get<std::vector<float>>()};
}

// The same run on the CPU engine, then on the GPU (emulated on one GPU where T exceeds the GPUs).
std::pair<Result<RunResult>, Result<RunResult>> cpuThenGpu(const ModelSpec& spec, const ShardedGraph& g,
                                                           const WeightSource& w, RunOptions o)
{
    static const HardwareProfile hw = findHardware("h200-sxm-8").value();
    auto cpu = runModel(spec, g, w, o);
    o.device = DeviceKind::Cuda;
    o.emulate = g.tpSize > g_gpus;
    o.commModel = &hw;
    return {std::move(cpu), runModel(spec, g, w, o)};
}

// Runs `body(rank, communicator, backend)` on one thread per rank and returns the first failure.
std::string onRanks(CommGroup& g, const std::vector<Backend*>& be,
                    const std::function<std::string(int, Communicator&, Backend&)>& body)
{
    return tptest::onRanks(int(be.size()), [&](int r) { return body(r, g.rank(r), *be[std::size_t(r)]); });
}

// A device tensor of floats (F32) with its own allocation.
struct DeviceFloats
{
    DeviceBuffer mem;
    Tensor t;
    DeviceFloats(Backend& be, const std::vector<float>& v)
        : mem(std::move(be.allocate(std::int64_t(std::max<std::size_t>(v.size(), 1) * 4)).value()))
        , t(Tensor::contiguous(mem.data(), DType::F32, 1, std::int64_t(v.size()), DeviceKind::Cuda))
    {
        if (!v.empty() && !be.upload(v.data(), t).ok())
            qFatal("upload failed");
    }
    std::vector<float> get(Backend& be) const
    {
        std::vector<float> v(std::size_t(t.numel()));
        if (!be.synchronize().ok() || (!v.empty() && !be.download(t, v.data()).ok()))
            qFatal("download failed");
        return v;
    }
};

// The collectives of the local communicator's test, on device tensors: uneven pieces everywhere.
std::string collectives(int r, Communicator& c, Backend& be)
{
    const int n = c.size();
    std::vector<float> v(7);
    for (int i = 0; i < 7; ++i)
        v[std::size_t(i)] = float(r * 10 + i);
    DeviceFloats a(be, v), b(be, std::vector<float>(7, -1));
    if (!c.allReduce(a.t, b.t).ok() || !c.synchronize().ok())
        return "all_reduce status";
    for (int i = 0; i < 7; ++i)
        if (b.get(be)[std::size_t(i)] != float(10 * n * (n - 1) / 2 + n * i))
            return "all_reduce value";
    std::vector<std::int64_t> counts;
    for (int p = 0; p < n; ++p)
        counts.push_back(p + 1);
    DeviceFloats mine(be, std::vector<float>(std::size_t(r + 1), float(r))), all(be, std::vector<float>(std::size_t(n * (n + 1) / 2), -1));
    if (!c.allGather(mine.t, all.t, counts).ok() || !c.synchronize().ok())
        return "all_gather status";
    const auto got = all.get(be);
    for (int p = 0, at = 0; p < n; ++p)
        for (int i = 0; i <= p; ++i)
            if (got[std::size_t(at++)] != float(p))
                return "all_gather value";
    DeviceFloats in(be, std::vector<float>(std::size_t(n * (n + 1) / 2), 1.0f)), out(be, std::vector<float>(std::size_t(r + 1), -1));
    if (!c.reduceScatter(in.t, out.t, counts).ok() || !c.synchronize().ok())
        return "reduce_scatter status";
    for (float x : out.get(be))
        if (x != float(n))
            return "reduce_scatter value";
    std::vector<float> send;
    std::vector<std::int64_t> sc, rc(std::size_t(n), r + 1);
    for (int p = 0; p < n; ++p) {
        sc.push_back(p + 1);
        send.insert(send.end(), std::size_t(p + 1), float(10 * r + p));
    }
    DeviceFloats s(be, send), recv(be, std::vector<float>(std::size_t(n * (r + 1)), -1));
    if (!c.allToAll(s.t, sc, recv.t, rc).ok() || !c.synchronize().ok())
        return "all_to_all status";
    const auto back = recv.get(be);
    for (int p = 0; p < n; ++p)
        for (int i = 0; i <= r; ++i)
            if (back[std::size_t(p * (r + 1) + i)] != float(10 * p + r))
                return "all_to_all value";
    DeviceFloats bc(be, std::vector<float>(4, float(r)));
    if (!c.broadcast(bc.t, n - 1).ok() || !c.synchronize().ok() || bc.get(be) != std::vector<float>(4, float(n - 1)))
        return "broadcast";
    return c.barrier().ok() ? std::string() : "barrier";
}

} // namespace

class TestGpu : public QObject
{
    Q_OBJECT

    std::vector<std::unique_ptr<Backend>> backends(int n, bool oneDevice)
    {
        std::vector<std::unique_ptr<Backend>> out;
        for (int r = 0; r < n; ++r)
            out.push_back(std::move(makeCudaBackend(oneDevice ? 0 : r, DType::F32).value()));
        return out;
    }
    static std::vector<Backend*> raw(const std::vector<std::unique_ptr<Backend>>& b)
    {
        std::vector<Backend*> r;
        for (const auto& x : b)
            r.push_back(x.get());
        return r;
    }

private slots:
    void initTestCase()
    {
        auto inv = gpu::probe();
        QVERIFY(inv.ok());
        for (const auto& d : inv->devices)
            qInfo("GPU %d: %s, sm_%d%d, %lld MiB", d.index, d.name.c_str(), d.major, d.minor, (long long)(d.memoryBytes >> 20));
    }

    void wholeModel_data()
    {
        QTest::addColumn<QString>("family");
        QTest::addColumn<int>("tp");
        QTest::addColumn<int>("dtype");
        for (const char* f : {"llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "phi3", "mixtral", "qwen3_moe", "deepseek_v3",
                              "gpt_oss", "llama4_text"})
            for (int tp : {1, 2, 4})
                for (DType dt : {DType::F32, DType::BF16})
                    QTest::addRow("%s T=%d %s", f, tp, std::string(dtypeName(dt)).c_str()) << f << tp << int(dt);
    }
    void wholeModel()
    {
        // The GPU's logits against the CPU engine's for the same storage dtype (the same arithmetic,
        // summed in another order), and against Transformers (fp32 within 1e-4; bf16 within the
        // bf16 tolerance of tst_engine). T larger than the GPU count runs emulated.
        QFETCH(QString, family);
        QFETCH(int, tp);
        QFETCH(int, dtype);
        const DType dt = DType(dtype);
        auto om = openModel(kModels + family.toStdString());
        QVERIFY2(om.ok(), om.status().message().c_str());
        const Reference ref = reference(family.toStdString());
        const ShardedGraph g = shardModel(om->spec, defaultPlan(om->spec, tp), {.batch = ref.batch, .seq = ref.seq, .activationDtype = dt});
        if (!g.valid())
            QSKIP("the default plan is not valid at this tp size");
        RunOptions o;
        o.batch = ref.batch;
        o.seq = ref.seq;
        o.tokens = ref.tokens;
        o.dtype = dt;
        auto [cpu, gpu] = cpuThenGpu(om->spec, g, {&*om->checkpoint}, o);
        QVERIFY2(cpu.ok(), cpu.status().message().c_str());
        QVERIFY2(gpu.ok(), gpu.status().message().c_str());
        const double vsCpu = relError(gpu->logits, cpu->logits);
        const auto& hf = dt == DType::F32 ? ref.logits : ref.logitsBf16;
        const double vsHf = relError(gpu->logits, hf);
        const double drift = relError(ref.logitsBf16, ref.logits);
        qInfo("%s: %.2e from the CPU engine, %.2e from Transformers%s", qPrintable(QTest::currentDataTag()), vsCpu, vsHf,
              gpu->emulated ? " (emulated)" : "");
        if (dt == DType::F32) {
            QVERIFY2(vsCpu < 1e-4 && vsHf < 1e-4, qPrintable(QString("%1 / %2").arg(vsCpu).arg(vsHf)));
        } else {
            const double tolerance = std::max(2e-2, 1.5 * drift);
            QVERIFY2(vsHf < tolerance, qPrintable(QString("%1 from Transformers bf16").arg(vsHf)));
        }
    }

    void expertsDispatchedAllToAll_data()
    {
        QTest::addColumn<QString>("family");
        QTest::addColumn<int>("tp");
        for (const char* f : {"mixtral", "qwen3_moe", "deepseek_v3", "gpt_oss"})
            for (int tp : {2, 4})
                QTest::addRow("%s T=%d", f, tp) << f << tp;
    }
    void expertsDispatchedAllToAll()
    {
        // The class's ep_plan with its tokens dispatched all-to-all (AllToAllEP) on the GPU in fp32:
        // route and combine kernels, the experts on received rows, the all-to-alls and the row
        // all-gather (NCCL, or emulated on one GPU), against the CPU engine and Transformers.
        QFETCH(QString, family);
        QFETCH(int, tp);
        auto om = openModel(kModels + family.toStdString());
        QVERIFY2(om.ok(), om.status().message().c_str());
        const Reference ref = reference(family.toStdString());
        const std::optional<Plan> plan = tptest::allToAllExperts(om->spec, tp);
        QVERIFY(plan.has_value());
        const ShardedGraph g = shardModel(om->spec, *plan, {.batch = ref.batch, .seq = ref.seq, .activationDtype = DType::F32});
        if (!g.valid())
            QSKIP("the plan is not valid at this tp size");
        RunOptions o;
        o.batch = ref.batch;
        o.seq = ref.seq;
        o.tokens = ref.tokens;
        o.dtype = DType::F32;
        auto [cpu, gpu] = cpuThenGpu(om->spec, g, {&*om->checkpoint}, o);
        QVERIFY2(cpu.ok(), cpu.status().message().c_str());
        QVERIFY2(gpu.ok(), gpu.status().message().c_str());
        const double vsCpu = relError(gpu->logits, cpu->logits), vsHf = relError(gpu->logits, ref.logits);
        qInfo("%s all-to-all experts: %.2e from the CPU engine, %.2e from Transformers%s", qPrintable(QTest::currentDataTag()),
              vsCpu, vsHf, gpu->emulated ? " (emulated)" : "");
        QVERIFY2(vsCpu < 1e-4 && vsHf < 1e-4, qPrintable(QString("%1 / %2").arg(vsCpu).arg(vsHf)));
    }

    void ncclCollectives()
    {
        if (g_gpus < 2)
            QSKIP("NCCL runs one rank per GPU and this machine has one: the multi-rank NCCL checks need two GPUs");
        const int n = std::min(g_gpus, 4);
        auto be = backends(n, false);
        auto g = makeNcclGroup(raw(be), std::chrono::seconds(30));
        QVERIFY2(g.ok(), g.status().message().c_str());
        const std::string e = onRanks(**g, raw(be), collectives);
        QVERIFY2(e.empty(), e.c_str());
    }

    void ncclAbortReachesEveryRank()
    {
        if (g_gpus < 2)
            QSKIP("needs two GPUs (NCCL: one rank per GPU)");
        auto be = backends(2, false);
        auto g = makeNcclGroup(raw(be), std::chrono::seconds(30));
        QVERIFY(g.ok());
        // Rank 1 aborts; rank 0, waiting for its all-reduce, is released with Cancelled.
        const std::string e = onRanks(**g, raw(be), [](int r, Communicator& c, Backend& b) -> std::string {
            DeviceFloats v(b, std::vector<float>(1024, 1.0f));
            if (r == 1) {
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                c.abort("rank 1 gave up");
                return {};
            }
            if (!c.allReduce(v.t).ok())
                return {};
            const Status st = c.synchronize();
            return st.code() == StatusCode::Cancelled && st.message().find("rank 1 gave up") != std::string::npos
                ? std::string()
                : "rank 0: " + st.message();
        });
        QVERIFY2(e.empty(), e.c_str());
    }

    void ncclWatchdog()
    {
        if (g_gpus < 2)
            QSKIP("needs two GPUs (NCCL: one rank per GPU)");
        auto be = backends(2, false);
        auto g = makeNcclGroup(raw(be), std::chrono::milliseconds(500));
        QVERIFY(g.ok());
        // Rank 1 never calls: rank 0's collective passes the watchdog, every communicator is aborted.
        const std::string e = onRanks(**g, raw(be), [](int r, Communicator& c, Backend& b) -> std::string {
            if (r == 1) {
                while (!c.aborted())
                    std::this_thread::sleep_for(std::chrono::milliseconds(5));
                return {};
            }
            DeviceFloats v(b, std::vector<float>(1024, 1.0f));
            if (!c.allReduce(v.t).ok())
                return "enqueue failed";
            const Status st = c.synchronize();
            return st.code() == StatusCode::DeadlineExceeded ? std::string() : "rank 0: " + st.message();
        });
        QVERIFY2(e.empty(), e.c_str());
    }

    void emulationGroupCollectives()
    {
        // Three ranks on one GPU, the same checks with uneven pieces.
        auto be = backends(3, true);
        auto g = makeDeviceGroup(raw(be), std::chrono::seconds(30));
        QVERIFY2(g.ok(), g.status().message().c_str());
        const std::string e = onRanks(**g, raw(be), collectives);
        QVERIFY2(e.empty(), e.c_str());
    }

    void decodeMatchesGenerate_data()
    {
        QTest::addColumn<QString>("family");
        QTest::addColumn<int>("tp");
        for (const char* f : {"llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "phi3", "mixtral", "qwen3_moe", "deepseek_v3",
                              "gpt_oss", "llama4_text"})
            for (int tp : {1, 2})
                QTest::addRow("%s T=%d", f, tp) << f << tp;
    }
    void decodeMatchesGenerate()
    {
        // Greedy decode on the GPU in fp32 (KV cache, attention over cached keys, argmax on the
        // device): Transformers' generate() tokens, and every step's logits within 1e-4 of it and of
        // the CPU engine's. T beyond the GPU count runs emulated.
        QFETCH(QString, family);
        QFETCH(int, tp);
        auto om = openModel(kModels + family.toStdString());
        QVERIFY2(om.ok(), om.status().message().c_str());
        std::ifstream in(kModels + family.toStdString() + "/generate.json");
        const auto ref = nlohmann::json::parse(in);
        const std::int64_t B = ref["batch"], S = ref["prompt"], steps = ref["steps"];
        const ShardedGraph g = shardModel(om->spec, defaultPlan(om->spec, tp), {.batch = B, .seq = S, .activationDtype = DType::F32});
        if (!g.valid())
            QSKIP("the default plan is not valid at this tp size");
        RunOptions o;
        o.batch = B;
        o.seq = S;
        o.tokens = ref["prompt_tokens"].get<std::vector<std::int32_t>>();
        o.decodeSteps = static_cast<int>(steps) - 1;
        o.dtype = DType::F32;
        auto [cpu, gpu] = cpuThenGpu(om->spec, g, {&*om->checkpoint}, o);
        QVERIFY2(cpu.ok(), cpu.status().message().c_str());
        QVERIFY2(gpu.ok(), gpu.status().message().c_str());
        std::vector<std::int32_t> tokens;
        for (const auto& seq : gpu->decode.generated)
            tokens.insert(tokens.end(), seq.begin(), seq.end());
        QVERIFY2(tokens == ref["tokens"].get<std::vector<std::int32_t>>(), "generated tokens differ from Transformers'");
        const double vsCpu = relError(gpu->stepLogits, cpu->stepLogits);
        // Transformers' steps 1… are the engine's decode steps (step 0 is prefill's last position).
        const auto want = ref["step_logits"].get<std::vector<float>>();
        const std::size_t first = static_cast<std::size_t>(B) * static_cast<std::size_t>(ref["vocab"].get<std::int64_t>());
        const double vsHf = relError(gpu->stepLogits, std::vector<float>(want.begin() + static_cast<std::ptrdiff_t>(first), want.end()));
        qInfo("%s decode: %.2e from the CPU engine, %.2e from Transformers%s", qPrintable(QTest::currentDataTag()), vsCpu,
              vsHf, gpu->emulated ? " (emulated)" : "");
        QVERIFY2(vsCpu < 1e-4 && vsHf < 1e-4, qPrintable(QString("%1 / %2").arg(vsCpu).arg(vsHf)));
    }

    void emulatedRunIsLabelledAndExact()
    {
        // The example model at T=4 on one GPU: the logits of T=1, and the record says emulated.
        const ModelSpec s = tptest::openSpec("example");
        const HardwareProfile hw = findHardware("h200-sxm-8").value();
        RunOptions o;
        o.seq = 16;
        o.device = DeviceKind::Cuda;
        o.dtype = DType::F32;
        auto one = runModel(s, shardModel(s, defaultPlan(s, 1)), {}, o);
        o.emulate = true;
        o.commModel = &hw;
        auto four = runModel(s, shardModel(s, defaultPlan(s, 4)), {}, o);
        QVERIFY2(one.ok() && four.ok(), (one.ok() ? four.status() : one.status()).message().c_str());
        QVERIFY(four->emulated);
        QVERIFY(relError(four->logits, one->logits) < 1e-4);
    }
};

int main(int argc, char** argv)
{
    if (!haveCudaBackend()) {
        std::printf("SKIP: this build has no CUDA backend (nvcc was not found at configure time)\n");
        return 77;
    }
    auto inv = gpu::probe();
    if (!inv) {
        std::printf("SKIP: no GPU to test on: %s\n", inv.status().message().c_str());
        return 77;
    }
    g_gpus = int(inv->devices.size());
    QCoreApplication app(argc, argv);
    TestGpu t;
    return QTest::qExec(&t, argc, argv);
}

#include "tst_gpu.moc"
