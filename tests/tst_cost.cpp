// tst_cost — hardware profiles and the cost model (formulas in docs/metrics.md; anchors from
// peer-tools-and-numbers.md B1–B4).
#include "tp/cost/cost_model.h"
#include "tp/cost/plan_search.h"
#include "tp/model/catalog.h"
#include "tp/model/loader.h"
#include "tp/plan/plan_io.h"
#include "tp/profile/calibrate.h"

#include "testutils.h"

#include <QtTest>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <chrono>
#include <set>
#include <thread>

using namespace tp;

namespace {

// The CPU backend with a slow phase: while `slow` is set, every GEMM, attention and add takes
// kSlowSeconds longer (a neighbour on the core, a clock dip). Every other call is the CPU backend's.
constexpr double kSlowSeconds = 0.01;
class Phased final : public Backend
{
public:
    Phased(std::unique_ptr<Backend> inner, const std::atomic<bool>& slow)
        : Backend(inner->storage())
        , m_in(std::move(inner))
        , m_slow(slow)
    {
    }
    DeviceKind device() const override { return m_in->device(); }
    int ordinal() const override { return m_in->ordinal(); }
    std::string name() const override { return "phased " + m_in->name(); }
    std::int64_t availableBytes() const override { return m_in->availableBytes(); }
    Result<DeviceBuffer> allocate(std::int64_t bytes) override { return m_in->allocate(bytes); }
    Status reserveEvents(int n) override { return m_in->reserveEvents(n); }
    Status record(int event, Stream s) override { return m_in->record(event, s); }
    Status wait(Stream s, int event) override { return m_in->wait(s, event); }
    Status synchronize() override { return m_in->synchronize(); }
    Result<double> elapsedUs(int from, int to) const override { return m_in->elapsedUs(from, to); }
    void* nativeStream(Stream s) override { return m_in->nativeStream(s); }
    std::int64_t gemmScratchBytes(std::int64_t n, std::int64_t in, std::int64_t out) const override
    {
        return m_in->gemmScratchBytes(n, in, out);
    }
    std::int64_t attentionScratchBytes(const AttentionShape& s) const override { return m_in->attentionScratchBytes(s); }
    std::int64_t expertsScratchBytes(std::int64_t t, std::int64_t h, const ExpertsShape& s) const override
    {
        return m_in->expertsScratchBytes(t, h, s);
    }
    std::int64_t routeScratchBytes(const ExpertsShape& s) const override { return m_in->routeScratchBytes(s); }

protected:
    Status doUpload(const void* host, const Tensor& dst) override { return m_in->upload(host, dst); }
    Status doDownload(const Tensor& src, void* host) override { return m_in->download(src, host); }
    Status doGemm(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y, const Tensor& scratch) override
    {
        phase();
        return m_in->gemm(x, w, bias, y, scratch);
    }
    Status doRmsNorm(const Tensor& x, const Tensor* w, const Tensor& y, std::int64_t group, float eps, float offset) override
    {
        return m_in->rmsNorm(x, w, y, group, eps, offset);
    }
    Status doLayerNorm(const Tensor& x, const Tensor* w, const Tensor* b, const Tensor& y, float eps, float offset) override
    {
        return m_in->layerNorm(x, w, b, y, eps, offset);
    }
    Status doRope(const Tensor& x, const Tensor& y, std::int64_t headDim, const Tensor& positions, const Tensor& table,
                  bool interleaved, bool leading) override
    {
        return m_in->rope(x, y, headDim, positions, table, interleaved, leading);
    }
    Status doAttention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y, const AttentionShape& s,
                       const Tensor& scratch, const Tensor* sinks) override
    {
        phase();
        return m_in->attention(q, k, v, y, s, scratch, sinks);
    }
    Status doTemperature(const Tensor& x, const Tensor& y, const Tensor& positions, float floorScale, float attnScale) override
    {
        return m_in->temperature(x, y, positions, floorScale, attnScale);
    }
    Status doMlaKv(const Tensor& kv, const Tensor& rope, const Tensor& k, const Tensor& v, std::int64_t heads,
                   std::int64_t nope) override
    {
        return m_in->mlaKv(kv, rope, k, v, heads, nope);
    }
    Status doGatedAct(const Tensor& gate, const Tensor& up, const Tensor& y, Activation act, std::int64_t span) override
    {
        return m_in->gatedAct(gate, up, y, act, span);
    }
    Status doActivation(const Tensor& x, const Tensor& y, Activation act) override { return m_in->activation(x, y, act); }
    Status doCausalConv(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& state, const Tensor& y,
                        std::optional<Activation> act, bool fresh) override
    {
        return m_in->causalConv(x, w, bias, state, y, act, fresh);
    }
    Status doSsmScan(const Tensor& x, const Tensor& dt, const Tensor& B, const Tensor& C, const Tensor& aLog, const Tensor& D,
                     const Tensor& dtBias, const Tensor& state, const Tensor& y, const ScanShape& s) override
    {
        return m_in->ssmScan(x, dt, B, C, aLog, D, dtBias, state, y, s);
    }
    Status doDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& a, const Tensor& aLog,
                       const Tensor& dtBias, const Tensor& state, const Tensor& y, const DeltaShape& s) override
    {
        return m_in->deltaRule(q, k, v, b, a, aLog, dtBias, state, y, s);
    }
    Status doEmbedding(const Tensor& ids, const Tensor& w, const Tensor& y, std::int64_t firstRow) override
    {
        return m_in->embedding(ids, w, y, firstRow);
    }
    Status doAdd(const Tensor& a, const Tensor& b, const Tensor& y) override
    {
        phase();
        return m_in->add(a, b, y);
    }
    Status doCopy(const Tensor& src, const Tensor& dst) override { return m_in->copy(src, dst); }
    Status doScale(const Tensor& x, const Tensor& y, float factor, float cap) override { return m_in->scale(x, y, factor, cap); }
    Status doSoftmax(const Tensor& x, const Tensor& y) override { return m_in->softmax(x, y); }
    Status doSigmoid(const Tensor& x, const Tensor& y) override { return m_in->sigmoid(x, y); }
    Status doExperts(const Tensor& x, const Tensor& scores, const Tensor& gateUp, const Tensor& down, const Tensor& y,
                     const ExpertsShape& s, const Tensor& scratch, const Tensor* gateUpBias, const Tensor* downBias,
                     const Tensor* scoreBias) override
    {
        return m_in->experts(x, scores, gateUp, down, y, s, scratch, gateUpBias, downBias, scoreBias);
    }
    Status doRoute(const Tensor& scores, const ExpertsShape& s, const Tensor& ids, const Tensor& weights, const Tensor& scratch,
                   const Tensor* scoreBias) override
    {
        return m_in->route(scores, s, ids, weights, scratch, scoreBias);
    }
    Status doCombine(const Tensor& z, const Tensor& slotIds, const Tensor& weights, const Tensor& y) override
    {
        return m_in->combine(z, slotIds, weights, y);
    }
    Status doSumBlocks(const Tensor& z, const Tensor& y) override { return m_in->sumBlocks(z, y); }
    Status doArgmax(const Tensor& x, const Tensor& ids) override { return m_in->argmax(x, ids); }
    Status doFillUniform(const Tensor& dst, const UniformFill& f) override { return m_in->fillUniform(dst, f); }

private:
    void phase() const
    {
        if (m_slow.load())
            std::this_thread::sleep_for(std::chrono::duration<double>(kSlowSeconds));
    }
    std::unique_ptr<Backend> m_in;
    const std::atomic<bool>& m_slow;
};

} // namespace

class TestCost : public QObject
{
    Q_OBJECT
private slots:
    void builtinProfilesParse()
    {
        const auto ids = builtinHardwareIds();
        for (const char* id : {"h100-sxm-8", "h200-sxm-8", "a100-sxm-8", "pcie-h100-8", "local-cpu"}) {
            QVERIFY2(std::find(ids.begin(), ids.end(), id) != ids.end(), id);
            auto hw = findHardware(id);
            QVERIFY2(hw.ok(), hw.status().message().c_str());
            QVERIFY(hw->devices >= 1);
            QVERIFY(hw->peakFlops(DType::BF16) > 0);
            QVERIFY(!hw->sources.empty());
        }
        QCOMPARE(findHardware("h100-sxm-8")->peakFlops(DType::BF16), 989.5e12);
        // Device memory as the device reports it (nvidia-smi's MiB), less what the plan may not use.
        for (const auto& [id, mib] : {std::pair{"h100-sxm-8", 81559}, {"pcie-h100-8", 81559}, {"h200-sxm-8", 143771}, {"a100-sxm-8", 81920}}) {
            const HardwareProfile hw = findHardware(id).value();
            QVERIFY2(std::abs(hw.memoryGiB - mib / 1024.0) < 0.01, id);
            QCOMPARE(hw.memoryReserveGiB, 2.0);
            QCOMPARE(hw.usableMemoryBytes(), std::int64_t((hw.memoryGiB - 2.0) * double(1 << 30)));
            QVERIFY(QString::fromStdString(hw.usableMemoryText()).contains(QStringLiteral(" kept back)")));
        }
        QCOMPARE(findHardware("local-cpu")->memoryReserveGiB, 0.0);
        QCOMPARE(findHardware("h200-sxm-8")->memoryBandwidthGBps, 4800.0);
    }

    void badProfiles_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("message");
        const QString ok = R"("schema": "tpstudio.hardware/1", "id": "x", "name": "x", "devices": 8, "memory_gib": 80,
            "memory_bandwidth_gbps": 3000, "peak_tflops": {"bf16": 100})";
        QTest::addRow("not json") << "{" << "not valid JSON";
        QTest::addRow("schema") << R"({"id": "x"})" << "key 'schema'";
        QTest::addRow("schema not a string (fuzz crash)") << R"({"schema": 3})" << "key 'schema'";
        QTest::addRow("absurd devices")
            << R"({"schema": "tpstudio.hardware/1", "id": "x", "name": "x", "devices": 1e300, "memory_gib": 80,
                   "memory_bandwidth_gbps": 1, "peak_tflops": {"bf16": 1}, "collectives": {}})" << "key 'devices' must be a number from 0 and at most 65536";
        QTest::addRow("fractional devices")
            << R"({"schema": "tpstudio.hardware/1", "id": "x", "name": "x", "devices": 2.5, "memory_gib": 80,
                   "memory_bandwidth_gbps": 1, "peak_tflops": {"bf16": 1}, "collectives": {}})" << "key 'devices' must be a whole number";
        QTest::addRow("no collectives") << "{" + ok + "}" << "key 'collectives'";
        QTest::addRow("negative bandwidth")
            << "{" + ok + R"(, "collectives": {"all_reduce": {"base_latency_us": 1, "hop_latency_us": 1, "bus_bandwidth_gbps": -3}}})"
            << "collectives.all_reduce: key 'bus_bandwidth_gbps' must be a number from 0.001 and at most 1e+06, found -3";
        QTest::addRow("zero bandwidth (infinitely fast)")
            << "{" + ok + R"(, "collectives": {"all_reduce": {"base_latency_us": 1, "hop_latency_us": 1, "bus_bandwidth_gbps": 0}}})"
            << "key 'bus_bandwidth_gbps' must be a number from 0.001 and at most 1e+06, found 0";
        QTest::addRow("absurd latency")
            << "{" + ok + R"(, "collectives": {"all_reduce": {"base_latency_us": 1e308, "hop_latency_us": 1, "bus_bandwidth_gbps": 3}}})"
            << "key 'base_latency_us' must be a number from 0 and at most 1e+06, found 1e+308";
        QTest::addRow("unknown collective")
            << "{" + ok + R"(, "collectives": {"broadcast_all": {}}})" << "collectives.broadcast_all: unknown collective";
        QTest::addRow("unknown dtype")
            << R"({"schema": "tpstudio.hardware/1", "id": "x", "name": "x", "devices": 8, "memory_gib": 80,
                   "memory_bandwidth_gbps": 3000, "peak_tflops": {"int3": 1}, "collectives": {}})"
            << "key 'peak_tflops.int3'";
        QTest::addRow("reserve as large as the memory")
            << "{" + ok + R"(, "memory_reserve_gib": 80, "collectives": {}})" << "key 'memory_reserve_gib' (80) must be less than 'memory_gib' (80)";
        QTest::addRow("negative reserve")
            << "{" + ok + R"(, "memory_reserve_gib": -1, "collectives": {}})" << "key 'memory_reserve_gib' must be a number from 0";
        QTest::addRow("curve not ascending")
            << "{" + ok + R"(, "gemm_efficiency": [[10, 0.5], [1, 0.6]], "collectives": {}})" << "gflop values must ascend";
        const QString ar = R"("collectives": {"all_reduce": {"base_latency_us": 1, "hop_latency_us": 0, "bus_bandwidth_gbps": 3)";
        QTest::addRow("busbw curve descending sizes")
            << "{" + ok + ", " + ar + R"(, "bus_bandwidth_curve": [[1024, 2], [8, 3]]}}})"
            << "collectives.all_reduce.bus_bandwidth_curve: bytes values must ascend";
        QTest::addRow("busbw curve zero rate")
            << "{" + ok + ", " + ar + R"(, "bus_bandwidth_curve": [[1024, 0]]}}})" << "1e-3 <= GB/s <= 1e6";
        const QString cal = "{" + ok + ", " + ar + "}}, \"calibrated\": ";
        QTest::addRow("calibrated not a list") << cal + "{}}" << "calibrated must be a list";
        QTest::addRow("calibrated ranks descending")
            << cal + R"([{"ranks": 2}, {"ranks": 1}]})" << "key 'ranks' must be a whole number, ascending";
        QTest::addRow("gemm efficiency above 1")
            << cal + R"([{"ranks": 1, "gemm": [{"out": 8, "in": 8, "rows": [[1, 1.5]]}]}]})"
            << "calibrated[0].gemm[0].rows: each point is [rows from 1 to 1e+12, 0 < fraction <= 1]";
        QTest::addRow("gemm shape fractional")
            << cal + R"([{"ranks": 1, "gemm": [{"out": 8.5, "in": 8, "rows": [[1, 0.5]]}]}]})" << "'out' and 'in' must be whole numbers";
        QTest::addRow("gemm without rows") << cal + R"([{"ranks": 1, "gemm": [{"out": 8, "in": 8}]}]})" << "missing key 'rows'";
        QTest::addRow("op not memory-bound")
            << cal + R"([{"ranks": 1, "ops": {"linear": {"overhead_us": 1, "bandwidth_gbps": 5}}}]})" << "ops.linear: not a memory-bound op";
        QTest::addRow("op bandwidth zero")
            << cal + R"([{"ranks": 1, "ops": {"norm": {"overhead_us": 1, "bandwidth_gbps": 0}}}]})" << "key 'bandwidth_gbps'";
        QTest::addRow("attention curve empty") << cal + R"([{"ranks": 1, "attention": []}]})" << "attention must be 1 to 4096 points";
        // Several nodes: the network between them is required, whole.
        const QString net = R"("collectives": {"all_reduce": {"base_latency_us": 6, "hop_latency_us": 1, "bus_bandwidth_gbps": 300}})";
        QTest::addRow("nodes without network") << "{" + ok + ", " + net + R"(, "nodes": 2})" << "key 'network' must be an object";
        QTest::addRow("nodes fractional") << "{" + ok + ", " + net + R"(, "nodes": 1.5})" << "key 'nodes' must be a whole number";
        QTest::addRow("nodes zero") << "{" + ok + ", " + net + R"(, "nodes": 0})" << "key 'nodes' must be a number from 1";
        QTest::addRow("nodes absurd") << "{" + ok + ", " + net + R"(, "nodes": 5000})" << "key 'nodes' must be a number from 1 and at most 4096";
        QTest::addRow("network without p2p")
            << "{" + ok + ", " + net + R"(, "nodes": 2, "network": {"name": "ib", )" + net + "}}" << "key 'network.p2p' must be an object";
        QTest::addRow("network without collectives")
            << "{" + ok + ", " + net + R"(, "nodes": 2, "network": {"name": "ib", "p2p": {"latency_us": 5, "bandwidth_gbps": 40}}})"
            << "key 'network.collectives' must be an object";
        QTest::addRow("network p2p bandwidth zero")
            << "{" + ok + ", " + net + R"(, "nodes": 2, "network": {"name": "ib", "p2p": {"latency_us": 5, "bandwidth_gbps": 0}, )" + net + "}}"
            << "network.p2p: key 'bandwidth_gbps'";
    }
    void badProfiles()
    {
        QFETCH(QString, json);
        QFETCH(QString, message);
        auto hw = parseHardwareJson(json.toStdString(), "bad.json");
        QVERIFY(!hw.ok());
        QVERIFY2(hw.status().message().find("bad.json") == 0, hw.status().message().c_str());
        QVERIFY2(hw.status().message().find(message.toStdString()) != std::string::npos, hw.status().message().c_str());
        QVERIFY(!findHardware("no-such-machine").ok());
    }

    // Issue 38: a profile of nodes. A group within a node takes the node's figures, one larger than a node the
    // network's (its slowest links); the figures are the file's.
    void multiNodeProfile()
    {
        const HardwareProfile hw = findHardware("h100-sxm-2x8").value();
        const nlohmann::json j = nlohmann::json::parse(std::ifstream(TP_SOURCE_DIR "/plans/hardware/h100-sxm-2x8.json"));
        QCOMPARE(hw.devices, 8);
        QCOMPARE(hw.nodes, 2);
        QCOMPARE(hw.totalDevices(), 16);
        QVERIFY(!hw.spansNodes(8) && hw.spansNodes(9) && hw.spansNodes(16));
        const std::int64_t bytes = 4 << 20;
        const auto& net = j["network"]["collectives"]["all_reduce"];
        const double want16 = (net["base_latency_us"].get<double>() + 30 * net["hop_latency_us"].get<double>()) * 1e-6
                            + 2.0 * 15 / 16 * bytes / (net["bus_bandwidth_gbps"].get<double>() * 1e9);
        QCOMPARE(hw.collectiveSeconds(CollectiveKind::AllReduce, bytes, 16), want16);
        const HardwareProfile one = findHardware("h100-sxm-8").value();
        QCOMPARE(hw.collectiveSeconds(CollectiveKind::AllReduce, bytes, 8), one.collectiveSeconds(CollectiveKind::AllReduce, bytes, 8));
        const double p2p = j["network"]["p2p"]["latency_us"].get<double>() * 1e-6 + bytes / (j["network"]["p2p"]["bandwidth_gbps"].get<double>() * 1e9);
        QCOMPARE(hw.p2pSeconds(bytes, true), p2p);
        QVERIFY(hw.p2pSeconds(bytes, false) < p2p);
        // plan validate --hardware: a TP group across nodes is a warning that names the network and the cost.
        const ModelSpec s = tptest::openSpec("deepseek-v3");
        const ShardedGraph g16 = shardModel(s, defaultPlan(s, 16), {.batch = 1, .seq = 512});
        QVERIFY(g16.valid());
        const auto d = feasibilityDiagnostics(s, g16, hw, 512);
        QVERIFY(std::any_of(d.begin(), d.end(), [&](const Diagnostic& x) {
            return x.severity == Severity::Warning && x.message.find("tp_size 16 spans 2 nodes of 8 GPUs") != std::string::npos
                && x.message.find(hw.network) != std::string::npos;
        }));
        const ShardedGraph g8 = shardModel(s, defaultPlan(s, 8), {.batch = 1, .seq = 512});
        for (const Diagnostic& x : feasibilityDiagnostics(s, g8, hw, 512))
            QVERIFY2(x.message.find("spans") == std::string::npos, x.message.c_str());
    }

    // Issue 38: on 2 × 8 H100, Llama 3.1 405B's front is TP 8 × PP 2 (TP 16 only with a plan that Transformers can run
    // at 16, and then flagged across nodes); a pipeline's decode at batch 1 is the whole model's step at TP 8 plus one
    // send between the nodes; its memory is a stage's.
    void meshSearchOnTwoNodes()
    {
        const HardwareProfile hw = findHardware("h100-sxm-2x8").value();
        const ModelSpec s = tptest::openSpec("llama-3.1-405b");
        const SearchOptions o{.batch = 1, .seq = 512, .shipped = false};
        const auto r = searchPlans(s, hw, o);
        QVERIFY2(r.ok(), r.status().message().c_str());
        const PlanCandidate* mesh = nullptr;
        for (const PlanCandidate& c : r->candidates) {
            QCOMPARE(c.spansNodes, c.tp > 8);
            QVERIFY(c.tp * c.pp <= 16);
            if (c.pareto && c.tp == 8 && c.pp == 2 && c.name == "default")
                mesh = &c;
        }
        QVERIFY(mesh);
        QVERIFY(std::none_of(r->candidates.begin(), r->candidates.end(), [](const PlanCandidate& c) { return c.tp == 8 && c.pp == 1; }));
        const ShardedGraph g8 = shardModel(s, mesh->plan, {.batch = 1, .seq = 512, .lastPositionLogits = true});
        const double step = decodeStepSeconds(s, g8, hw, 1, 512).value();
        const double send = hw.p2pSeconds(s.config.hiddenSize * 2, true); // one row of bf16 hidden states
        QVERIFY2(std::abs(mesh->itlSeconds - (step + send)) < 1e-9 * step, qPrintable(QString::number(mesh->itlSeconds)));
        QCOMPARE(mesh->tokensPerSecondPerGpu, 1.0 / mesh->itlSeconds / 16);
        QCOMPARE(mesh->bubble, 1 - step / (2 * (step + send))); // one micro-batch: each stage waits while the other works
        const MemoryFit whole = memoryFit(g8, hw, 1, 512).value();
        QVERIFY(mesh->memoryBytes < whole.neededBytes && mesh->memoryBytes > whole.weightBytes / 2);
        QCOMPARE(mesh->headroomBytes, hw.usableMemoryBytes() - mesh->memoryBytes);
        // Written for DistributedConfig: pp_size beside tp_size.
        QCOMPARE(mesh->plan.ppSize, 2);
        const nlohmann::json j = nlohmann::json::parse(planToJson(mesh->plan, &s));
        QCOMPARE(j["tp_size"], 8);
        QCOMPARE(j["pp_size"], 2);
        // With more sequences than stages, micro-batches fill the pipeline: no bubble, and more tokens/s per GPU.
        const auto busy = searchPlans(s, hw, {.batch = 16, .seq = 512, .context = 2048, .shipped = false});
        QVERIFY2(busy.ok(), busy.status().message().c_str());
        for (const PlanCandidate& c : busy->candidates)
            if (c.pp == 2)
                QVERIFY2(c.bubble < 0.1, qPrintable(QString::number(c.bubble)));
        // KV heads replicated (vLLM's and SGLang's way, not loadable by the pinned Transformers) open TP 16 to the
        // 8-KV-head model: a candidate across the nodes, only when asked.
        QVERIFY(std::none_of(r->candidates.begin(), r->candidates.end(), [](const PlanCandidate& c) { return c.plan.replicateKvHeads; }));
        SearchOptions rep = o;
        rep.replicateKvHeads = true;
        const auto withRep = searchPlans(s, hw, rep);
        QVERIFY2(withRep.ok(), withRep.status().message().c_str());
        QVERIFY(std::any_of(withRep->candidates.begin(), withRep->candidates.end(), [](const PlanCandidate& c) {
            return c.name == "KV heads replicated" && c.tp == 16 && c.pp == 1 && c.spansNodes && c.plan.replicateKvHeads;
        }));
        // Stages laid out node by node: no layout whose TP group would straddle two nodes (T = 3 on nodes of 8).
        const auto odd = searchPlans(s, hw, {.batch = 1, .seq = 512, .maxTp = 12, .maxPp = 5, .shipped = false});
        QVERIFY2(odd.ok(), odd.status().message().c_str());
        for (const PlanCandidate& c : odd->candidates)
            QVERIFY2(c.pp == 1 || c.tp % 8 == 0 || 8 % c.tp == 0, qPrintable(QStringLiteral("%1x%2").arg(c.tp).arg(c.pp)));
        // One node: no pipeline is tried unless asked.
        const auto single = searchPlans(s, findHardware("h100-sxm-8").value(), {.batch = 1, .seq = 512, .shipped = false});
        QVERIFY(single.ok() && std::all_of(single->candidates.begin(), single->candidates.end(), [](const PlanCandidate& c) { return c.pp == 1; }));
    }

    void alphaBeta()
    {
        QCOMPARE(busBandwidthFactor(CollectiveKind::AllReduce, 8), 1.75);
        QCOMPARE(busBandwidthFactor(CollectiveKind::AllGather, 8), 0.875);
        QCOMPARE(busBandwidthFactor(CollectiveKind::AllReduce, 1), 0.0);
        const HardwareProfile hw = *findHardware("h100-sxm-8");
        // NCCL's tuning model, 8 ranks, Ring/LL: 6.6 + 14 × 0.6 = 15.0 µs (peer-tools B4).
        QVERIFY(std::abs(hw.collectiveSeconds(CollectiveKind::AllReduce, 8, 8) - 15.0e-6) < 1e-9);
        // 4 MiB all-reduce: + 1.75 · 4 MiB / 370 GB/s.
        const double t = hw.collectiveSeconds(CollectiveKind::AllReduce, 4 << 20, 8);
        QVERIFY(std::abs(t - (15.0e-6 + 1.75 * (4 << 20) / 370e9)) < 1e-12);
        QCOMPARE(hw.collectiveSeconds(CollectiveKind::AllReduce, 4 << 20, 1), 0.0);
        // The same message on PCIe costs several times more.
        QVERIFY(findHardware("pcie-h100-8")->collectiveSeconds(CollectiveKind::AllReduce, 4 << 20, 8) > 5 * t);
    }

    void efficiencyCurve()
    {
        const HardwareProfile hw = *findHardware("h100-sxm-8");
        QCOMPARE(hw.gemmEfficiencyAt(17.2e9), 0.68);
        QCOMPARE(hw.gemmEfficiencyAt(1e3), hw.gemmEfficiency.front().second);  // clamped below
        QCOMPARE(hw.gemmEfficiencyAt(1e16), hw.gemmEfficiency.back().second); // clamped above
        const double mid = hw.gemmEfficiencyAt(std::sqrt(2.15e9 * 17.2e9)); // log-midpoint
        QVERIFY(std::abs(mid - (0.18 + 0.68) / 2) < 1e-9);
    }

    void computeIsBoundedByPeak()
    {
        // Llama-3.1-8B prefill, B=1, S=2048, bf16 at T=1: at least 2·N·tokens / peak.
        const ModelSpec s = tptest::openSpec("llama-3.1-8b");
        const HardwareProfile hw = *findHardware("h100-sxm-8");
        const ShardOptions o{.batch = 1, .seq = 2048, .activationDtype = DType::BF16};
        const CostReport c = estimateCost(s, shardModel(s, defaultPlan(s, 1), o), hw);
        const double lower = 2.0 * double(s.parameterCount()) * 2048 / hw.peakFlops(DType::BF16);
        QVERIFY2(c.computeSeconds > lower && c.computeSeconds < 3 * lower, qPrintable(QString::number(c.computeSeconds)));
        QCOMPARE(c.commSeconds, 0.0);
        QCOMPARE(int(c.layers.size()), 33);
    }

    void scaling()
    {
        // Llama-3.1-70B prefill 1×512 on 8×H100: faster with every valid T, communication share grows,
        // and PCIe spends a larger share communicating than NVLink.
        const ModelSpec s = tptest::openSpec("llama-3.1-70b");
        const ShardOptions o{.batch = 1, .seq = 512, .activationDtype = DType::BF16};
        const auto nv = predictScaling(s, defaultPlan(s, 1), o, *findHardware("h100-sxm-8"), 8);
        const auto pcie = predictScaling(s, defaultPlan(s, 1), o, *findHardware("pcie-h100-8"), 8);
        QCOMPARE(int(nv.size()), 8);
        QVERIFY(!nv[2].valid); // 64 heads / 3
        QVERIFY(nv[2].reason.find("num_attention_heads") != std::string::npos);
        double last = 0, lastShare = -1;
        for (int t : {1, 2, 4, 8}) {
            const auto& p = nv[std::size_t(t - 1)];
            QVERIFY(p.valid);
            QVERIFY2(p.speedup > last, qPrintable(QString("T=%1 speedup %2").arg(t).arg(p.speedup)));
            QVERIFY(p.commShare > lastShare);
            last = p.speedup;
            lastShare = p.commShare;
        }
        QCOMPARE(nv[0].speedup, 1.0);
        QVERIFY(nv[7].speedup < 8.0);
        QVERIFY(pcie[7].commShare > nv[7].commShare);
    }

    void oversubscribedRanksShareDevices()
    {
        // On a machine of D devices, T > D ranks cannot beat T = D.
        HardwareProfile cpu = *findHardware("local-cpu");
        cpu.devices = 2;
        const ModelSpec s = tptest::openSpec("example");
        const auto pts = predictScaling(s, defaultPlan(s, 1), {.batch = 1, .seq = 512}, cpu, 4);
        QVERIFY(pts[1].valid && pts[3].valid);
        QVERIFY(pts[1].speedup > 1.0);
        QVERIFY(pts[3].speedup < pts[1].speedup);
    }

    // --- decode -------------------------------------------------------------------------------

    // One decode step of the example (fp32) at T=2 by hand on a machine whose math is free: each
    // rank streams its projection and lm_head shards once (the embedding reads one row), reads the
    // cached k and v, and every collective costs its latency (2 KiB all-reduces, a 125 KiB gather).
    void sizeDependentBusBandwidth()
    {
        HardwareProfile hw = *findHardware("h100-sxm-8");
        CollectiveFigures& f = hw.collectives[CollectiveKind::AllReduce];
        f.busBandwidthCurve = {{1 << 20, 100.0}, {16 << 20, 400.0}};
        const double alpha = (f.baseLatencyUs + 14 * f.hopLatencyUs) * 1e-6;
        // At the curve's points, their busbw; below and above, the nearest point's; between, log-linear.
        QVERIFY(std::abs(hw.collectiveSeconds(CollectiveKind::AllReduce, 1 << 20, 8) - (alpha + 1.75 * (1 << 20) / 100e9)) < 1e-15);
        QVERIFY(std::abs(hw.collectiveSeconds(CollectiveKind::AllReduce, 1 << 10, 8) - (alpha + 1.75 * (1 << 10) / 100e9)) < 1e-15);
        QVERIFY(std::abs(hw.collectiveSeconds(CollectiveKind::AllReduce, 64 << 20, 8) - (alpha + 1.75 * (64 << 20) / 400e9)) < 1e-15);
        QVERIFY(std::abs(hw.collectiveSeconds(CollectiveKind::AllReduce, 4 << 20, 8) - (alpha + 1.75 * (4 << 20) / 250e9)) < 1e-15);
        // A large message on the curve is faster than the small ones' rate would make it.
        QVERIFY(curveAt(f.busBandwidthCurve, 8 << 20) > curveAt(f.busBandwidthCurve, 2 << 20));
    }

    void calibratedGemmLookup()
    {
        CalibratedFigures c;
        c.gemm = {{512, 512, {{1, 0.1}, {64, 0.5}, {1024, 0.9}}}, {2048, 512, {{1, 0.2}, {64, 0.6}}}};
        QCOMPARE(c.gemmEfficiency(1, 512, 512), 0.1);       // a measured shape is exact
        QCOMPARE(c.gemmEfficiency(64, 2048, 512), 0.6);
        QCOMPARE(c.gemmEfficiency(4096, 2048, 512), 0.6);   // clamped beyond the largest rows measured
        QVERIFY(std::abs(c.gemmEfficiency(8, 512, 512) - 0.3) < 1e-12); // log-midpoint of 1 and 64
        // Between the two shapes (1024 is their log-midpoint in out): the mean of both.
        QVERIFY(std::abs(c.gemmEfficiency(64, 1024, 512) - 0.55) < 1e-12);
        QCOMPARE(CalibratedFigures{}.gemmEfficiency(64, 512, 512), 0.0);
        HardwareProfile hw;
        hw.calibrated = {{.ranks = 1}, {.ranks = 4}};
        QCOMPARE(hw.calibratedFor(1)->ranks, 1);
        QCOMPARE(hw.calibratedFor(3)->ranks, 1);
        QCOMPARE(hw.calibratedFor(8)->ranks, 4);
        QVERIFY(HardwareProfile{}.calibratedFor(2) == nullptr);
    }

    // calibrate takes every measurement in two passes and keeps the faster: a slow phase through one
    // pass (either) leaves the profile as a calm machine's, and one through both passes shows in it
    // (so the check can fail). One rank, quick; a point tells only where a calm machine takes well
    // under kSlowSeconds (a slow time is at least kSlowSeconds: efficiency ≤ flops / (peak · kSlowSeconds)).
    void calibrationKeepsTheFasterPass()
    {
        auto calibrate = [](int slowPass) { // 0 or 1: that pass is slow; 2: both; -1: neither
            std::atomic<bool> slow{false};
            CalibrateOptions o{.ranks = 1, .quick = true};
            o.progress = [&](double fraction, const std::string&) {
                slow = slowPass == 2 || (slowPass == 0 && fraction < 0.5) || (slowPass == 1 && fraction >= 0.5);
                return true;
            };
            auto cal = calibrateOps(
                [&](int) -> Result<std::unique_ptr<Backend>> {
                    TP_ASSIGN_OR_RETURN(auto cpu, makeCpuBackend(DType::F32));
                    return std::unique_ptr<Backend>(std::make_unique<Phased>(std::move(cpu), slow));
                },
                o);
            if (!cal)
                qFatal("calibrate: %s", cal.status().message().c_str());
            return *cal;
        };
        const Calibration calm = calibrate(-1);
        // Each point's efficiency at which it is slow at most: (GEMMs by shape and rows, then
        // attention's and decode attention's by work), for the points a calm machine does in a tenth
        // of kSlowSeconds or less.
        auto slowAtMost = [&](const Calibration& c) {
            std::vector<std::pair<double, double>> points; // (efficiency, the most a slow time gives)
            const CalibratedFigures& f = c.figures.at(0), &k = calm.figures.at(0);
            for (std::size_t g = 0; g < f.gemm.size(); ++g)
                for (std::size_t i = 0; i < f.gemm[g].rows.size(); ++i) {
                    const double flops = 2 * f.gemm[g].rows[i].first * double(f.gemm[g].out) * double(f.gemm[g].in);
                    if (flops / (k.gemm[g].rows[i].second * calm.peakTflops * 1e12) < kSlowSeconds / 10)
                        points.emplace_back(f.gemm[g].rows[i].second, flops / (c.peakTflops * 1e12 * kSlowSeconds));
                }
            for (auto [curve, calmCurve] : {std::pair{&f.attention, &k.attention}, {&f.attentionDecode, &k.attentionDecode}})
                for (std::size_t i = 0; i < curve->size(); ++i) {
                    const double flops = (*curve)[i].first * 1e9 * 8; // GFLOP per head, 8 heads
                    if (flops / ((*calmCurve)[i].second * calm.peakTflops * 1e12) < kSlowSeconds / 10)
                        points.emplace_back((*curve)[i].second, flops / (c.peakTflops * 1e12 * kSlowSeconds));
                }
            return points;
        };
        const auto calmPoints = slowAtMost(calm);
        QVERIFY2(calmPoints.size() >= 10, qPrintable(QString("only %1 points tell").arg(calmPoints.size())));
        const double addOverheadUs = calm.figures[0].ops.at(OpKind::Add).first;
        QVERIFY(addOverheadUs < kSlowSeconds * 1e6 / 10);
        for (int slowPass : {0, 1}) {
            const Calibration c = calibrate(slowPass);
            const auto points = slowAtMost(c);
            QCOMPARE(points.size(), calmPoints.size());
            for (const auto& [eff, slowest] : points)
                QVERIFY2(eff > slowest, qPrintable(QString("pass %1 slow: efficiency %2, a slow time gives at most %3")
                                                       .arg(slowPass).arg(eff).arg(slowest)));
            QVERIFY(c.figures[0].ops.at(OpKind::Add).first < kSlowSeconds * 1e6 / 2);
        }
        const Calibration both = calibrate(2);
        for (const auto& [eff, slowest] : slowAtMost(both))
            QVERIFY2(eff <= slowest, qPrintable(QString("both passes slow: efficiency %1 above %2").arg(eff).arg(slowest)));
        QVERIFY(both.figures[0].ops.at(OpKind::Add).first > kSlowSeconds * 1e6 / 2);
    }

    // A calibrated profile times each op of a forward by what was measured: a Linear at its shape's
    // efficiency at its rows, attention by its curve (decode's for one query), norms and adds by
    // overhead + bytes / bandwidth; the figures of the ranks that run at once.
    void calibratedCostByHand()
    {
        const ModelSpec s = tptest::openSpec("example");
        HardwareProfile hw = *findHardware("local-cpu");
        hw.devices = 2;
        hw.peakTflops = {{DType::F32, 0.05}};
        auto figures = [](int ranks, double e) {
            CalibratedFigures c;
            c.ranks = ranks;
            for (auto [out, in] : {std::pair{256, 512}, {128, 512}, {512, 256}, {768, 512}, {512, 768}, {16000, 512}, {512, 512},
                                   {1536, 512}, {512, 1536}, {32000, 512}})
                c.gemm.push_back({out, in, {{1, e / 4}, {128, e}}});
            c.attention = {{1e-6, 0.2}, {1.0, 0.2}};
            c.attentionDecode = {{1e-6, 0.05}, {1.0, 0.05}};
            for (OpKind k : {OpKind::Norm, OpKind::Add, OpKind::Rope, OpKind::GatedAct, OpKind::Embedding})
                c.ops[k] = {3.0, 10.0};
            return c;
        };
        hw.calibrated = {figures(1, 0.8), figures(2, 0.6)};
        for (int T : {1, 2}) {
            const double e = T == 1 ? 0.8 : 0.6;
            const ShardedGraph g = shardModel(s, defaultPlan(s, T), {.batch = 1, .seq = 128, .activationDtype = DType::F32});
            QVERIFY(g.valid());
            const CostReport prefill = estimateCost(s, g, hw);
            const CostReport step = *estimateDecodeStep(s, g, hw, 1, 160);
            int linears = 0, norms = 0, attention = 0;
            for (const CostReport* c : {&prefill, &step})
                for (const NodeCost& n : c->nodes) {
                    const GraphNode& gn = g.graph.nodes[std::size_t(n.node)];
                    const double rowsE = c == &prefill ? e : e / 4; // 128 rows or 1
                    if (gn.kind == OpKind::Linear) {
                        QVERIFY(std::abs(n.computeSeconds - n.flops / (0.05e12 * rowsE)) < 1e-12);
                        ++linears;
                    } else if (gn.kind == OpKind::Norm) {
                        QVERIFY(std::abs(n.computeSeconds - (3e-6 + n.bytes / 10e9)) < 1e-12);
                        ++norms;
                    } else if (gn.kind == OpKind::Attention) {
                        QVERIFY(std::abs(n.computeSeconds - n.flops / (0.05e12 * (c == &prefill ? 0.2 : 0.05))) < 1e-12);
                        ++attention;
                    }
                }
            QCOMPARE(linears, 2 * (8 * 7 + 1));
            QCOMPARE(norms, 2 * (8 * 2 + 1));
            QCOMPARE(attention, 2 * 8);
        }
    }

    void decodeStepByHand()
    {
        const ModelSpec s = tptest::openSpec("example");
        HardwareProfile hw = *findHardware("local-cpu");
        hw.devices = 2;
        hw.peakTflops = {{DType::F32, 1e5}};
        hw.memoryBandwidthGBps = 20;
        hw.memoryEfficiency = 1.0;
        for (auto& [kind, f] : hw.collectives)
            f = {.baseLatencyUs = 10, .hopLatencyUs = 1, .busBandwidthGBps = 1e6};
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2), {.batch = 1, .seq = 128, .activationDtype = DType::F32});
        QVERIFY(g.valid());
        auto step = estimateDecodeStep(s, g, hw, 1, 160);
        QVERIFY2(step.ok(), step.status().message().c_str());
        QCOMPARE(step->workload.queryTokens, std::int64_t(1));
        QCOMPARE(step->workload.pastTokens, std::int64_t(159));

        // Per layer and rank: q 256×512, k and v 128×512, o 512×256, gate and up 768×512, down 512×768.
        const double layerWeights = 4.0 * (256 * 512 + 2 * 128 * 512 + 512 * 256 + 3 * 768 * 512);
        const double lmHead = 4.0 * 16000 * 512;
        const double kvRead = 159.0 * 8 * (128 + 128) * 4; // 159 cached positions, 8 layers, k and v of 2 KV heads
        const double streamed = (8 * layerWeights + lmHead + kvRead) / 20e9;
        // 17 all-reduces: 10 + 2·1 µs; one all-gather: 10 + 1 µs; β of 2 KiB / 125 KiB at 1e6 GB/s.
        const double comm = 17 * (12e-6 + 1.0 * 2048 / 1e15) + (11e-6 + 0.5 * 128000 / 1e15);
        QVERIFY(std::abs(step->commSeconds - comm) < 1e-12);
        // What is left is one token's activations, in and out of every node: 62 KB a layer, under 1%.
        QVERIFY2(step->computeSeconds >= streamed && step->computeSeconds < streamed * 1.01,
                 qPrintable(QString("%1 vs %2").arg(step->computeSeconds).arg(streamed)));
        // The embedding reads its row, not its table; the lm_head streams its shard.
        for (const NodeCost& n : step->nodes) {
            const GraphNode& gn = g.graph.nodes[std::size_t(n.node)];
            if (gn.kind == OpKind::Embedding)
                QCOMPARE(n.bytes, 512.0 * 4);
            if (gn.name == "lm_head")
                QCOMPARE(n.bytes, lmHead + (512 + 16000) * 4.0);
        }
        QCOMPARE(*decodeStepSeconds(s, g, hw, 1, 160), step->totalSeconds());
    }

    void kvCachePerToken_data()
    {
        QTest::addColumn<int>("tp");
        QTest::addColumn<qint64>("perToken");
        // Llama-3.1-8B, bf16: 32 layers × (k + v) × 8 KV heads × 128 × 2 bytes = 128 KiB at T=1.
        QTest::addRow("T=1") << 1 << qint64(128) * 1024;
        QTest::addRow("T=2") << 2 << qint64(64) * 1024;
        QTest::addRow("T=8") << 8 << qint64(16) * 1024;
    }
    void kvCachePerToken()
    {
        QFETCH(int, tp);
        QFETCH(qint64, perToken);
        const ModelSpec s = tptest::openSpec("llama-3.1-8b");
        const ShardedGraph g = shardModel(s, defaultPlan(s, tp), {.batch = 1, .seq = 512, .activationDtype = DType::BF16});
        QCOMPARE(kvCacheBytesPerToken(g), perToken);
        for (const RankMemory& m : g.memory)
            QCOMPARE(m.kvCacheBytesPerToken, perToken); // the sharded graph's figure, not a second formula
        QCOMPARE(*kvCacheBytes(g, 4, 4096), perToken * 4 * 4096);
        const auto pts = predictScaling(s, defaultPlan(s, 1), {.batch = 4, .seq = 512, .activationDtype = DType::BF16},
                                        *findHardware("h200-sxm-8"), 8, 4096);
        QCOMPARE(pts[std::size_t(tp - 1)].kvCacheBytesPerToken, perToken);
        QCOMPARE(pts[std::size_t(tp - 1)].kvCacheBytes, perToken * 4 * 4096);
    }

    // Issue 41: the KV figures name the layout they assume, and an fp8 cache (vLLM, SGLang) halves the cache
    // of a bf16 model, in memory and in what a decode step reads; the activations stay as they are.
    // DeepSeek-V3 caches Transformers 5.24's compressed latent + rope key, 576 values a layer, whole on every rank.
    void kvCacheLayoutAndFp8()
    {
        const ModelSpec s = tptest::openSpec("llama-3.1-8b");
        const HardwareProfile hw = *findHardware("h100-sxm-8");
        const ShardedGraph bf = shardModel(s, defaultPlan(s, 8), {.batch = 4, .seq = 512, .activationDtype = DType::BF16});
        const ShardedGraph f8 = shardModel(s, defaultPlan(s, 8),
                                           {.batch = 4, .seq = 512, .activationDtype = DType::BF16, .kvCacheDtype = DType::F8E4M3});
        QCOMPARE(kvCacheBytesPerToken(f8) * 2, kvCacheBytesPerToken(bf));
        QCOMPARE(f8.memory[0].activationPeakBytes, bf.memory[0].activationPeakBytes);
        const auto stepBf = estimateDecodeStep(s, bf, hw, 64, 32768), stepF8 = estimateDecodeStep(s, f8, hw, 64, 32768);
        QVERIFY(stepBf.ok() && stepF8.ok());
        QVERIFY2(stepF8->totalSeconds() < 0.8 * stepBf->totalSeconds(), // the cache dominates a long-context step
                 qPrintable(QString("%1 vs %2").arg(stepF8->totalSeconds()).arg(stepBf->totalSeconds())));
        QCOMPARE(QString::fromStdString(kvCacheLayoutText(s, bf)),
                 QStringLiteral("Transformers' layout: each rank's k and v heads per layer; BF16, the activations'"));
        QVERIFY(QString::fromStdString(kvCacheLayoutText(s, f8)).endsWith(QStringLiteral("fp8 (a serving engine's --kv-cache-dtype fp8)")));
        const ModelSpec ds = tptest::openSpec("deepseek-v3");
        const ShardedGraph mla = shardModel(ds, defaultPlan(ds, 8), {.batch = 1, .seq = 512});
        QCOMPARE(kvCacheBytesPerToken(mla), std::int64_t(61) * (512 + 64) * 2);
        QVERIFY(QString::fromStdString(kvCacheLayoutText(ds, mla)).contains(QStringLiteral("compressed latent and rope key (512 + 64")));
        SearchOptions o{.batch = 64, .seq = 2048, .context = 32768};
        const auto plain = searchPlans(s, hw, o);
        o.kvCacheDtype = DType::F8E4M3;
        const auto fp8 = searchPlans(s, hw, o);
        QVERIFY(plain.ok() && fp8.ok());
        QVERIFY(fp8->candidates.size() > plain->candidates.size()); // more fit with half the cache
    }

    // Issue 38: the KV cache by layer kind at 128k context, against a count from the public config's
    // own fields: a sliding-window layer keeps its last window − 1 tokens (Transformers'
    // DynamicSlidingWindowLayer), a full layer every token, MLA its latent and rope key on every rank.
    void kvCacheByLayerKindAt128k()
    {
        const std::int64_t ctx = 131072;
        {
            const nlohmann::json c = nlohmann::json::parse(findCatalogEntry("gpt-oss-120b")->configJson);
            const std::int64_t window = c["sliding_window"], kvHeads = c["num_key_value_heads"], headDim = c["head_dim"];
            std::int64_t sliding = 0, full = 0;
            for (const auto& t : c["layer_types"])
                (t == "sliding_attention" ? sliding : full) += 1;
            QVERIFY(sliding > 0 && full > 0);
            const ModelSpec s = tptest::openSpec("gpt-oss-120b");
            // The shipped attention-sharded plan splits the kv heads (the class's default leaves attention whole).
            const auto shipped = loadPlanFile(TP_SOURCE_DIR "/plans/gpt_oss/attention-sharded.json", VersionProfile::G3);
            QVERIFY2(shipped.ok(), shipped.status().message().c_str());
            for (const int T : {1, 4, 8}) {
                Plan p = resolveOverrides(s, *shipped);
                p.tpSize = T;
                const ShardedGraph g = shardModel(s, p, {.batch = 1, .seq = 512, .activationDtype = DType::BF16});
                QVERIFY(g.valid());
                const std::int64_t perLayerToken = 2 * (kvHeads / T) * headDim * 2; // k and v, bf16
                const std::int64_t want = full * perLayerToken * ctx + sliding * perLayerToken * (window - 1);
                QCOMPARE(kvCacheBytes(g, 1, ctx).value(), want);
                QCOMPARE(kvCacheBytes(g, 3, ctx).value(), 3 * want);
                // Below the window every layer holds every token.
                QCOMPARE(kvCacheBytes(g, 1, 100).value(), (full + sliding) * perLayerToken * 100);
                QVERIFY2(QString::fromStdString(kvCacheLayoutText(s, g)).contains(QStringLiteral("%1 sliding-window layers keep the last %2 tokens").arg(sliding).arg(window - 1)),
                         kvCacheLayoutText(s, g).c_str());
                const auto mem = memoryPerRank(g, *findHardware("h200-sxm-8"), 2, ctx);
                QVERIFY(mem.ok());
                QCOMPARE((*mem)[0].kvCacheBytes, 2 * want);
            }
        }
        {
            const nlohmann::json c = nlohmann::json::parse(findCatalogEntry("deepseek-v3")->configJson);
            const std::int64_t layers = c["num_hidden_layers"], latent = c["kv_lora_rank"], rope = c["qk_rope_head_dim"];
            const ModelSpec s = tptest::openSpec("deepseek-v3");
            for (const int T : {1, 8}) {
                const ShardedGraph g = shardModel(s, defaultPlan(s, T), {.batch = 1, .seq = 512});
                QCOMPARE(kvCacheBytes(g, 1, ctx).value(), layers * (latent + rope) * 2 * ctx); // bf16, whole on every rank
            }
        }
        {
            // Qwen3-Next (a hybrid): its full layers cache k and v per token, its gated-delta-rule layers a convolution
            // state of kernel columns of q, k and v (bf16) and a float32 [key, value] state per value head, per
            // sequence, whatever the context — Transformers' LinearAttentionLayer (tst_model cacheMatchesTransformers).
            const nlohmann::json c = nlohmann::json::parse(findCatalogEntry("qwen3-next-defaults")->configJson);
            std::int64_t linear = 0, full = 0;
            for (const auto& t : c["layer_types"])
                (t == "linear_attention" ? linear : full) += 1;
            QVERIFY(linear > 0 && full > 0);
            const std::int64_t kvHeads = c["num_key_value_heads"], headDim = c["head_dim"], keyHeads = c["linear_num_key_heads"],
                               keyDim = c["linear_key_head_dim"], valueHeads = c["linear_num_value_heads"],
                               valueDim = c["linear_value_head_dim"], kernel = c["linear_conv_kernel_dim"];
            const std::int64_t state = (2 * keyHeads * keyDim + valueHeads * valueDim) * kernel * 2 + valueHeads * keyDim * valueDim * 4;
            const ModelSpec s = tptest::openSpec("qwen3-next-defaults");
            for (const int T : {1, 2}) {
                const ShardedGraph g = shardModel(s, defaultPlan(s, T), {.batch = 1, .seq = 512});
                QVERIFY(g.valid());
                const std::int64_t want = full * 2 * (kvHeads / T) * headDim * 2 * ctx + linear * state;
                QCOMPARE(kvCacheBytes(g, 1, ctx).value(), want);
                QCOMPARE(kvCacheBytes(g, 4, ctx).value(), 4 * want);
                QCOMPARE(g.memory[0].stateBytes, linear * state);
                // A decode step reads and writes every sequence's state, at every mixer.
                const auto step = estimateDecodeStep(s, g, *findHardware("h100-sxm-8"), 4, ctx);
                QVERIFY2(step.ok(), step.status().message().c_str());
                int mixers = 0;
                for (const NodeCost& n : step->nodes)
                    if (g.graph.nodes[static_cast<std::size_t>(n.node)].kind == OpKind::Mixer) {
                        ++mixers;
                        QVERIFY2(n.bytes >= 2.0 * 4 * static_cast<double>(state) && n.bytes < 2.1 * 4 * static_cast<double>(state),
                                 qPrintable(QString::number(n.bytes)));
                    }
                QCOMPARE(mixers, linear);
                const std::string text = kvCacheLayoutText(s, g);
                QVERIFY2(text.find(fmt::format("{} linear-attention layers keep a state", linear)) != std::string::npos, text.c_str());
            }
        }
    }

    // Issue 38: "what fits" is where the memory check turns: the longest context (and the largest
    // batch) that fits, one more does not — or the model's own limit ends it.
    void whatFitsIsWhereTheMemoryCheckTurns_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("tp");
        QTest::addColumn<QString>("hardware");
        QTest::addColumn<qint64>("batch");
        QTest::addColumn<qint64>("context");
        QTest::addRow("llama-3.1-70b T=8 h100") << "llama-3.1-70b" << 8 << "h100-sxm-8" << qint64(4) << qint64(32768);
        QTest::addRow("llama-3.1-70b T=2 h100") << "llama-3.1-70b" << 2 << "h100-sxm-8" << qint64(1) << qint64(8192);
        QTest::addRow("gpt-oss-120b T=4 h100 (sliding)") << "gpt-oss-120b" << 4 << "h100-sxm-8" << qint64(8) << qint64(131072);
        QTest::addRow("deepseek-v3 T=8 h200 (MLA)") << "deepseek-v3" << 8 << "h200-sxm-8" << qint64(16) << qint64(4096);
        QTest::addRow("llama-4-scout T=8 h100 (chunked)") << "llama-4-scout" << 8 << "h100-sxm-8" << qint64(1) << qint64(131072);
        QTest::addRow("deepseek-v3 T=8 h100 (nothing fits)") << "deepseek-v3" << 8 << "h100-sxm-8" << qint64(1) << qint64(4096);
    }
    void whatFitsIsWhereTheMemoryCheckTurns()
    {
        QFETCH(QString, model);
        QFETCH(int, tp);
        QFETCH(QString, hardware);
        QFETCH(qint64, batch);
        QFETCH(qint64, context);
        const ModelSpec s = tptest::openSpec(model.toStdString().c_str());
        const HardwareProfile hw = *findHardware(hardware.toStdString());
        const ShardedGraph g = shardModel(s, defaultPlan(s, tp), {.batch = batch, .seq = 512});
        QVERIFY(g.valid());
        const std::int64_t limit = s.config.maxPositionEmbeddings;
        const auto f = whatFits(g, hw, batch, context, limit);
        QVERIFY2(f.ok(), f.status().message().c_str());
        auto fits = [&](std::int64_t b, std::int64_t c) { return memoryFit(g, hw, b, c).value().fits(); };
        if (f->maxContext > 0)
            QVERIFY(fits(batch, f->maxContext));
        if (f->contextCapped)
            QCOMPARE(f->maxContext, limit);
        else
            QVERIFY(!fits(batch, f->maxContext + 1));
        if (f->maxBatch > 0)
            QVERIFY(fits(f->maxBatch, context));
        if (!f->batchCapped)
            QVERIFY(!fits(f->maxBatch + 1, context));
        if (model == QLatin1String("deepseek-v3") && hardware == QLatin1String("h100-sxm-8")) {
            QCOMPARE(f->maxContext, std::int64_t(0)); // its fp8 weights alone are over 77.65 GiB a rank at T=8
            QVERIFY(QString::fromStdString(whatFitsText(*f, batch, context, limit)).startsWith(QStringLiteral("not one token")));
        } else {
            QVERIFY(f->maxContext > 0 && f->maxBatch > 0);
        }
    }

    // Memory per rank: every rank's weights, KV cache, activation peak and communication buffer from
    // the sharded graph; memoryFit is the rank that needs the most of them.
    void memoryPerRankSumsToMemoryFit()
    {
        const ModelSpec s = tptest::openSpec("llama-3.1-8b");
        const HardwareProfile hw = *findHardware("h100-sxm-8");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 8), {.batch = 4, .seq = 512, .activationDtype = DType::BF16});
        QVERIFY(g.valid());
        const auto ranks = memoryPerRank(g, hw, 4, 4096);
        QVERIFY2(ranks.ok(), ranks.status().message().c_str());
        QCOMPARE(int(ranks->size()), 8);
        // The largest collective is the head's all-gather of the logits: B·S·vocab·2 bytes.
        const std::int64_t comm = std::int64_t(4) * 512 * 128256 * 2;
        QCOMPARE(*commBufferBytes(g), comm);
        std::int64_t most = 0;
        for (const RankMemoryUse& u : *ranks) {
            const RankMemory& m = g.memory[std::size_t(u.rank)];
            QCOMPARE(u.weightBytes, m.weightBytes);
            QCOMPARE(u.kvCacheBytes, m.kvCacheBytesPerToken * 4 * 4096);
            QCOMPARE(u.activationBytes, m.activationPeakBytes);
            QCOMPARE(u.commBufferBytes, comm);
            QCOMPARE(u.deviceBytes, hw.usableMemoryBytes()); // what nvidia-smi reports less the reserve
            QCOMPARE(u.neededBytes(), u.weightBytes + u.kvCacheBytes + u.activationBytes + u.commBufferBytes);
            QCOMPARE(u.headroomBytes(), u.deviceBytes - u.neededBytes());
            QVERIFY(u.fits());
            most = std::max(most, u.neededBytes());
        }
        const auto fit = memoryFit(g, hw, 4, 4096);
        QVERIFY(fit.ok());
        const RankMemoryUse& r = (*ranks)[std::size_t(fit->rank)];
        QCOMPARE(fit->neededBytes, most);
        QCOMPARE(fit->weightBytes + fit->kvCacheBytes + fit->activationBytes + fit->commBufferBytes, most);
        QCOMPARE(fit->weightBytes, r.weightBytes);
        QCOMPARE(fit->kvCacheBytes, r.kvCacheBytes);
        QCOMPARE(fit->activationBytes, r.activationBytes);
        QCOMPARE(fit->commBufferBytes, r.commBufferBytes);

        // KV cache: linear in context and batch; the attention heads split over T divide it by T.
        QCOMPARE((*memoryPerRank(g, hw, 4, 8192))[3].kvCacheBytes, 2 * r.kvCacheBytes);
        QCOMPARE((*memoryPerRank(g, hw, 12, 4096))[3].kvCacheBytes, 3 * r.kvCacheBytes);
        const ShardedGraph one = shardModel(s, defaultPlan(s, 1), {.batch = 4, .seq = 512, .activationDtype = DType::BF16});
        const auto single = memoryPerRank(one, hw, 4, 4096);
        QVERIFY(single.ok());
        QCOMPARE(int(single->size()), 1);
        QCOMPARE((*single)[0].kvCacheBytes, 8 * r.kvCacheBytes);
        QCOMPARE((*single)[0].kvCacheBytes, std::int64_t(128) * 1024 * 4 * 4096); // 128 KiB per token
        QCOMPARE((*single)[0].commBufferBytes, std::int64_t(0));                  // no collectives at T = 1
        QVERIFY((*single)[0].weightBytes > 7 * r.weightBytes);

        // Hostile inputs: beyond the workload bounds, a profile without memory.
        QVERIFY(!memoryPerRank(g, hw, 0, 4096).ok());
        QVERIFY(!memoryPerRank(g, hw, 1, kMaxWorkloadContext + 1).ok());
        HardwareProfile none = hw;
        none.memoryGiB = 0;
        QVERIFY(!memoryPerRank(g, none, 1, 4096).ok());
        QVERIFY(!memoryFit(g, none, 1, 4096).ok());
    }

    // A vocabulary of 100 rows over 3 ranks is chunked 34, 34, 32: with the embedding sharded the
    // ranks differ, rank 0 needs the most; replicated, every rank holds the whole table. (The head
    // stays replicated: a gathered head needs a divisible vocabulary.)
    void memoryPerRankDiffersWhereTheShardsDo()
    {
        const ModelSpec s = tptest::specFromConfig(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
            "num_attention_heads": 3, "num_key_value_heads": 3, "head_dim": 8, "num_hidden_layers": 1, "vocab_size": 100,
            "torch_dtype": "float32"})");
        const HardwareProfile hw = *findHardware("h100-sxm-8");
        Plan sharded = defaultPlan(s, 3);
        const bool hasEmbedding = std::any_of(sharded.entries.begin(), sharded.entries.end(),
                                              [](const PlanEntry& e) { return e.key == "model.embed_tokens"; });
        if (!hasEmbedding)
            sharded.entries.push_back({"model.embed_tokens", "embedding_rowwise"});
        std::erase_if(sharded.entries, [](const PlanEntry& p) { return p.key == "lm_head"; });
        const ShardedGraph g = shardModel(s, sharded, {.batch = 1, .seq = 16});
        QVERIFY(g.valid());
        const auto ranks = *memoryPerRank(g, hw, 1, 16);
        QCOMPARE(int(ranks.size()), 3);
        const std::int64_t e = g.elementBytes();
        // The embedding: 34 vs 32 rows of 64 on rank 0 vs rank 2.
        QCOMPARE(ranks[0].weightBytes - ranks[2].weightBytes, 2 * 64 * e);
        QCOMPARE(ranks[0].weightBytes, ranks[1].weightBytes);
        QCOMPARE(memoryFit(g, hw, 1, 16)->rank, 0);

        Plan replicated = sharded;
        std::erase_if(replicated.entries, [](const PlanEntry& p) { return p.key == "model.embed_tokens"; });
        const ShardedGraph rg = shardModel(s, replicated, {.batch = 1, .seq = 16});
        QVERIFY(rg.valid());
        const auto rranks = *memoryPerRank(rg, hw, 1, 16);
        QCOMPARE(rranks[0].weightBytes, rranks[2].weightBytes);
        // The whole table instead of rank 0's 34 rows.
        QCOMPARE(rranks[0].weightBytes - ranks[0].weightBytes, 66 * 64 * e);
        // The KV cache splits by heads either way: one head of k and v, 8 wide, per rank.
        for (const RankMemoryUse& u : rranks)
            QCOMPARE(u.kvCacheBytes, 2 * 8 * e * 16);
    }

    // predictScaling carries each T's memory need (memoryFit) and bytes communicated per forward.
    void scalingCarriesMemoryAndBytes()
    {
        const ModelSpec s = tptest::openSpec("llama-3.1-8b");
        const HardwareProfile hw = *findHardware("h100-sxm-8");
        const ShardOptions o{.batch = 2, .seq = 512, .activationDtype = DType::BF16};
        const auto pts = predictScaling(s, defaultPlan(s, 1), o, hw, 8, 2048);
        QCOMPARE(int(pts.size()), 8);
        for (const ScalingPoint& p : pts) {
            if (!p.valid) {
                QVERIFY(!p.reason.empty());
                QCOMPARE(p.memoryBytes, std::int64_t(0));
                continue;
            }
            const ShardedGraph g = shardModel(s, defaultPlan(s, p.tp), o);
            const auto fit = memoryFit(g, hw, 2, 2048);
            QCOMPARE(p.memoryBytes, fit->neededBytes);
            QCOMPARE(p.memoryRank, fit->rank);
            QCOMPARE(p.deviceBytes, fit->deviceBytes);
            QCOMPARE(p.fits, fit->fits());
            std::int64_t bytes = 0;
            for (const CollectiveCost& c : estimateCost(s, g, hw).collectives)
                bytes += c.bytes;
            QCOMPARE(p.commBytes, bytes);
            QCOMPARE(p.commBytes == 0, p.tp == 1);
            QVERIFY(p.decodeCommBytes < p.commBytes || p.tp == 1);
            QCOMPARE(p.efficiency(), p.speedup / p.tp);
        }
        QCOMPARE(pts[0].efficiency(), 1.0);
        // T=1 holds the 16 GB of weights on one 80-GiB device; T=8 an eighth of the layers.
        QVERIFY(pts[0].fits);
        QVERIFY(pts[7].memoryBytes < pts[0].memoryBytes / 4);
    }

    // The cached k and v a decode step reads are, summed over the attention nodes, the sharded
    // graph's KV bytes per token times the cached positions (MLA and sliding windows included). MLA caches
    // its latent, kv_lora_rank + the rope key, whole on every rank, and Transformers expands every cached
    // position through kv_b_proj at each step: its FLOPs, and the expanded keys and values written and read.
    void decodeReadsTheCacheTheGraphHolds_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("tp");
        QTest::addColumn<int>("past");
        QTest::addRow("llama-3.1-8b T=8") << "llama-3.1-8b" << 8 << 4095;
        QTest::addRow("deepseek-v3 (MLA) T=8") << "deepseek-v3" << 8 << 1000;
        QTest::addRow("mixtral-8x7b T=2") << "mixtral-8x7b" << 2 << 300;
        QTest::addRow("gpt-oss-120b inside its window") << "gpt-oss-120b" << 4 << 100;
    }
    void decodeReadsTheCacheTheGraphHolds()
    {
        QFETCH(QString, model);
        QFETCH(int, tp);
        QFETCH(int, past);
        const ModelSpec s = tptest::openSpec(qPrintable(model));
        const ShardedGraph g = shardModel(s, defaultPlan(s, tp), {.batch = 1, .seq = 512});
        QVERIFY(g.valid());
        const HardwareProfile hw = *findHardware("h100-sxm-8");
        const Workload w0{.batch = 3, .queryTokens = 1, .pastTokens = 0};
        const Workload wp{.batch = 3, .queryTokens = 1, .pastTokens = past};
        const CostReport a = *estimateCost(s, g, hw, w0), b = *estimateCost(s, g, hw, wp);
        // Rank 0 holds the most (ceil chunking), and the estimator reports the slowest rank.
        double extra = 0, expanded = 0, extraFlops = 0, expandFlops = 0;
        const double e = static_cast<double>(dtypeBytes(g.activationDtype, 1));
        for (std::size_t i = 0; i < a.nodes.size(); ++i) {
            const GraphNode& n = g.graph.nodes[i];
            if (n.kind == OpKind::Attention) {
                extra += b.nodes[i].bytes - a.nodes[i].bytes;
                extraFlops += b.nodes[i].flops - a.nodes[i].flops;
                if (n.mlaRope > 0) {
                    const double kv = static_cast<double>(g.tensors[static_cast<std::size_t>(n.inputs[1])].local[0]);
                    expanded += 2 * kv * e;
                    expandFlops += 2.0 * static_cast<double>(s.config.kvLoraRank) * kv;
                }
            } else {
                QCOMPARE(b.nodes[i].bytes, a.nodes[i].bytes); // only attention depends on the past
            }
        }
        QCOMPARE(extra, 3.0 * past * (double(g.memory[0].kvCacheBytesPerToken) + expanded));
        if (s.config.isMla()) {
            QCOMPARE(g.memory[0].kvCacheBytesPerToken, s.config.numLayers * (s.config.kvLoraRank + s.config.qkRopeHeadDim) * std::int64_t(e));
            QVERIFY(extraFlops >= 3.0 * past * expandFlops); // and the attention over the expanded keys
        }
    }

    void slidingWindowBoundsDecodeAttention()
    {
        // gpt-oss-120b: sliding layers (window 128) see 128 keys at any context; full layers all of them.
        const ModelSpec s = tptest::openSpec("gpt-oss-120b");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 1), {.batch = 1, .seq = 512});
        const CostReport c = *estimateDecodeStep(s, g, *findHardware("h100-sxm-8"), 2, 4096);
        int sliding = 0, full = 0;
        for (const NodeCost& n : c.nodes) {
            const GraphNode& gn = g.graph.nodes[std::size_t(n.node)];
            if (gn.kind != OpKind::Attention)
                continue;
            const double keys = gn.window > 0 ? 128.0 : 4096.0;
            QCOMPARE(n.flops, 2 * 2 * keys * 64 * double(gn.headDim + gn.vHeadDim));
            ++(gn.window > 0 ? sliding : full);
        }
        QCOMPARE(sliding, 18);
        QCOMPARE(full, 18);
    }

    void decodeCollectiveBytes_data()
    {
        QTest::addColumn<int>("batch");
        QTest::addRow("B=1") << 1;
        QTest::addRow("B=32") << 32;
    }
    void decodeCollectiveBytes()
    {
        // Llama-3.1-8B bf16 at T=8: a decode step moves B tokens' features: B·4096·2 per all-reduce,
        // B·128256·2 for the logits gather; the same 65 + 1 collectives as the forward.
        QFETCH(int, batch);
        const ModelSpec s = tptest::openSpec("llama-3.1-8b");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 8), {.batch = batch, .seq = 2048, .activationDtype = DType::BF16});
        const HardwareProfile hw = *findHardware("h200-sxm-8");
        const CostReport c = *estimateDecodeStep(s, g, hw, batch, 4096);
        QCOMPARE(c.collectives.size(), g.collectives.size());
        int allReduces = 0;
        double comm = 0;
        for (const CollectiveCost& cc : c.collectives) {
            const Collective& col = g.collectives[std::size_t(cc.collective)];
            const std::int64_t expect = col.kind == CollectiveKind::AllReduce ? std::int64_t(batch) * 4096 * 2
                                                                              : std::int64_t(batch) * 128256 * 2;
            QCOMPARE(cc.bytes, expect);
            QCOMPARE(cc.seconds, hw.collectiveSeconds(col.kind, expect, 8));
            allReduces += col.kind == CollectiveKind::AllReduce;
            comm += cc.seconds;
        }
        QCOMPARE(allReduces, 65);
        QCOMPARE(c.commSeconds, comm);
        // Small messages: latency dominates (all-reduce α = 6.6 + 14·0.6 µs of NCCL's Ring/LL model,
        // all-gather 6.6 + 7·0.6 µs).
        if (batch == 1)
            QVERIFY2(c.commSeconds > 65 * 15.0e-6 + 10.8e-6 && c.commSeconds < 1.01 * (65 * 15.0e-6 + 10.8e-6),
                     qPrintable(QString::number(c.commSeconds)));
    }

    void decodeIsMemoryBound()
    {
        // Llama-3.1-8B bf16 at T=8 on 8×H200, B=1, context 4096 (the docs/metrics.md example): the
        // step streams each rank's weights at the derated HBM bandwidth, and communication, a few µs per
        // all-reduce, is a large share of it.
        const ModelSpec s = tptest::openSpec("llama-3.1-8b");
        const HardwareProfile hw = *findHardware("h200-sxm-8");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 8), {.batch = 1, .seq = 4096, .activationDtype = DType::BF16});
        const CostReport c = *estimateDecodeStep(s, g, hw, 1, 4096);
        const ParamShard* embed = nullptr;
        for (const auto& p : g.params)
            if (p.path == "model.embed_tokens.weight")
                embed = &p;
        QVERIFY(embed);
        const double streamed = double(g.memory[0].weightBytes - embed->bytes[0]) + 4095.0 * double(g.memory[0].kvCacheBytesPerToken);
        const double bw = hw.memoryBandwidthGBps * 1e9 * hw.memoryEfficiency;
        // (+2.5%: attention over 4096 keys at the curve's 1% of peak for 2-MFLOP GEMMs is math-bound.)
        QVERIFY2(c.computeSeconds > streamed / bw && c.computeSeconds < 1.05 * streamed / bw,
                 qPrintable(QString("%1 vs %2").arg(c.computeSeconds).arg(streamed / bw)));
        QVERIFY(c.commShare() > 0.3 && c.commShare() < 0.7);
        // The scaling table carries the same step.
        const auto pts = predictScaling(s, defaultPlan(s, 1), g.options, hw, 8);
        QCOMPARE(pts[7].decodeStepSeconds, c.totalSeconds());
        QCOMPARE(pts[7].decodeCommShare, c.commShare());
        QCOMPARE(pts[7].decodeTokensPerSecond, 1.0 / c.totalSeconds());
        QCOMPARE(pts[0].decodeSpeedup, 1.0);
        QVERIFY(pts[7].decodeSpeedup > 1.0 && pts[7].decodeSpeedup < pts[7].speedup); // decode scales worse than prefill
    }

    void prefillIsTheZeroPastWorkload()
    {
        // The graph's own forward is Workload{B, S, 0}, node by node; attention counts the causal
        // pairs S(S+1)/2, and a prefill split into two chunks (the second after the first is
        // cached) does the same attention work as the whole.
        const ModelSpec s = tptest::openSpec("llama-3.1-8b");
        const HardwareProfile hw = *findHardware("h100-sxm-8");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 8), {.batch = 2, .seq = 512, .activationDtype = DType::BF16});
        const CostReport a = estimateCost(s, g, hw);
        const CostReport b = *estimateCost(s, g, hw, Workload::prefill(g.options));
        QCOMPARE(a.workload.queryTokens, std::int64_t(512));
        QCOMPARE(a.workload.pastTokens, std::int64_t(0));
        QCOMPARE(a.totalSeconds(), b.totalSeconds());
        QCOMPARE(a.nodes.size(), b.nodes.size());
        const CostReport first = *estimateCost(s, g, hw, {.batch = 2, .queryTokens = 200, .pastTokens = 0});
        const CostReport second = *estimateCost(s, g, hw, {.batch = 2, .queryTokens = 312, .pastTokens = 200});
        for (std::size_t i = 0; i < a.nodes.size(); ++i) {
            QCOMPARE(a.nodes[i].computeSeconds, b.nodes[i].computeSeconds);
            const GraphNode& n = g.graph.nodes[i];
            if (n.kind != OpKind::Attention)
                continue;
            const double heads = 32.0 / 8;
            QCOMPARE(a.nodes[i].flops, 2.0 * 512 * 513 * heads * 256);
            QCOMPARE(first.nodes[i].flops + second.nodes[i].flops, a.nodes[i].flops);
        }
        for (std::size_t i = 0; i < a.collectives.size(); ++i)
            QCOMPARE(a.collectives[i].bytes, g.collectives[i].bytes(2, 512, 2));
    }

    void localCpuDecodeAnchor()
    {
        // The local-cpu profile against the engine: decoding the example (fp32, B=1, 64 steps after a
        // 128-token prompt) had an ITL median of 11.75 ms at T=1 and 6.65 ms at T=2 on the 2-core CI
        // machine (2026-12-01, the profile's sources); the median step runs at context 128 + 32.
        HardwareProfile hw = *findHardware("local-cpu");
        hw.devices = 2;
        const ModelSpec s = tptest::openSpec("example");
        for (auto [tp, measured] : {std::pair{1, 11.75e-3}, std::pair{2, 6.65e-3}}) {
            const ShardedGraph g = shardModel(s, defaultPlan(s, tp), {.batch = 1, .seq = 128, .activationDtype = DType::F32});
            const double t = *decodeStepSeconds(s, g, hw, 1, 160);
            QVERIFY2(std::abs(t / measured - 1) < 0.25, qPrintable(QString("T=%1: %2 ms").arg(tp).arg(t * 1e3)));
        }
    }

    void badWorkloads_data()
    {
        QTest::addColumn<qint64>("batch");
        QTest::addColumn<qint64>("query");
        QTest::addColumn<qint64>("past");
        QTest::addColumn<QString>("message");
        QTest::addRow("no batch") << qint64(0) << qint64(1) << qint64(0) << "batch must be from 1";
        QTest::addRow("huge batch") << qint64(kMaxWorkloadBatch + 1) << qint64(1) << qint64(0) << "batch must be from 1";
        QTest::addRow("no query") << qint64(1) << qint64(0) << qint64(0) << "query tokens per sequence must be at least 1";
        QTest::addRow("negative past") << qint64(1) << qint64(1) << qint64(-1) << "at least 0, found -1";
        QTest::addRow("context beyond 2^24") << qint64(1) << qint64(1) << qint64(kMaxWorkloadContext) << "context (cached + new tokens per sequence) must be at most";
        QTest::addRow("past near int64 max") << qint64(1) << qint64(2) << std::numeric_limits<qint64>::max() << "must be at most";
        QTest::addRow("query near int64 max") << qint64(1) << std::numeric_limits<qint64>::max() << qint64(0) << "must be at most";
        QTest::addRow("batch × context") << qint64(kMaxWorkloadBatch) << qint64(1) << qint64(kMaxWorkloadContext - 1) << "batch × context must be at most";
    }
    void badWorkloads()
    {
        QFETCH(qint64, batch);
        QFETCH(qint64, query);
        QFETCH(qint64, past);
        QFETCH(QString, message);
        const ModelSpec s = tptest::openSpec("example");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2));
        const HardwareProfile hw = *findHardware("local-cpu");
        const Workload w{.batch = batch, .queryTokens = query, .pastTokens = past};
        const Status st = checkWorkload(w);
        QCOMPARE(st.code(), StatusCode::InvalidArgument);
        QVERIFY2(st.message().find(message.toStdString()) != std::string::npos, st.message().c_str());
        auto c = estimateCost(s, g, hw, w);
        QVERIFY(!c.ok());
        QCOMPARE(c.status().message(), st.message());
    }

    void badDecodeContexts()
    {
        const ModelSpec s = tptest::openSpec("example");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2));
        const HardwareProfile hw = *findHardware("local-cpu");
        for (std::int64_t ctx : {std::int64_t(0), std::int64_t(-5), std::numeric_limits<std::int64_t>::min()}) {
            auto d = estimateDecodeStep(s, g, hw, 1, ctx);
            QVERIFY(!d.ok());
            QVERIFY2(d.status().message().find("at least 1 token") != std::string::npos, d.status().message().c_str());
            QVERIFY(!decodeStepSeconds(s, g, hw, 1, ctx).ok());
            QVERIFY(!kvCacheBytes(g, 1, ctx).ok());
        }
        QVERIFY(!estimateDecodeStep(s, g, hw, 1, kMaxWorkloadContext + 1).ok());
        QVERIFY(!kvCacheBytes(g, kMaxWorkloadBatch, kMaxWorkloadContext).ok()); // 2^44 tokens
        QVERIFY(kvCacheBytes(g, 1, kMaxWorkloadContext).ok());
        // predictScaling leaves the decode fields at 0 rather than inventing a number.
        const auto pts = predictScaling(s, defaultPlan(s, 1), {.batch = 1, .seq = 16}, hw, 2, kMaxWorkloadContext + 1);
        QVERIFY(pts[1].valid && pts[1].seconds > 0);
        QCOMPARE(pts[1].decodeStepSeconds, 0.0);
        QCOMPARE(pts[1].kvCacheBytes, std::int64_t(0));
    }

    // plan search: every candidate kept is valid at its T and fits the device; the front is exactly
    // the candidates no other one dominates (TTFT, ITL lower, tokens/s per GPU higher); the
    // candidate kinds that apply appear; at T = 1 only the default.
    void planSearchKeepsValidFittingCandidatesAndTheirFront()
    {
        const ModelSpec s = tptest::openSpec("mixtral-8x7b");
        const HardwareProfile hw = findHardware("h200-sxm-8").value();
        auto r = searchPlans(s, hw, {.batch = 8, .seq = 2048, .context = 4096});
        QVERIFY2(r.ok(), r.status().message().c_str());
        QVERIFY(!r->candidates.empty());
        QVERIFY(r->invalid > 0); // T = 3, 5, 6, 7: 8 KV heads do not split
        std::set<std::string> names;
        int front = 0;
        const std::int64_t device = hw.usableMemoryBytes();
        for (const PlanCandidate& c : r->candidates) {
            names.insert(c.name);
            QCOMPARE(c.plan.tpSize, c.tp);
            QVERIFY(c.tp > 1 || c.name == "default");
            const ShardedGraph g = shardModel(s, c.plan, {.batch = 8, .seq = 2048, .lastPositionLogits = true});
            QVERIFY2(g.valid(), qPrintable(QString::fromStdString(c.name) + QString(" at T=%1").arg(c.tp)));
            QVERIFY(c.memoryBytes > 0 && c.headroomBytes >= 0 && c.memoryBytes + c.headroomBytes == device);
            QVERIFY(c.ttftSeconds > 0 && c.itlSeconds > 0);
            QCOMPARE(c.tokensPerSecondPerGpu, 8.0 / c.itlSeconds / c.tp);
            QCOMPARE(c.itlSeconds, decodeStepSeconds(s, g, hw, 8, 4096).value());
            bool dominated = false;
            for (const PlanCandidate& o : r->candidates)
                dominated = dominated
                    || (o.ttftSeconds <= c.ttftSeconds && o.itlSeconds <= c.itlSeconds
                        && o.tokensPerSecondPerGpu >= c.tokensPerSecondPerGpu
                        && (o.ttftSeconds < c.ttftSeconds || o.itlSeconds < c.itlSeconds
                            || o.tokensPerSecondPerGpu > c.tokensPerSecondPerGpu));
            QCOMPARE(c.pareto, !dominated);
            front += c.pareto;
        }
        QVERIFY(front > 0);
        for (const char* n : {"default", "attention replicated", "sequence parallel", "expert parallel", "head replicated"})
            QVERIFY2(names.contains(n), n);

        // A device too small for any candidate: nothing kept, the least demanding one reported.
        HardwareProfile tiny = hw;
        tiny.memoryGiB = 1;
        auto none = searchPlans(s, tiny, {.batch = 8, .seq = 2048, .context = 4096});
        QVERIFY(none.ok());
        QVERIFY(none->candidates.empty());
        QVERIFY(none->tooLarge > 0 && none->smallestTooLarge);
        QCOMPARE(none->smallestTooLarge->tp, 8);
        // Workloads the cost model does not take are refused, naming the phase.
        auto bad = searchPlans(s, hw, {.batch = 0});
        QVERIFY(!bad.ok());
        QVERIFY2(bad.status().message().find("prefill") != std::string::npos, bad.status().message().c_str());

        // DeepSeek-V3 in its checkpoint's fp8 fits 8 x H200 at T=8 (in bf16 it would need 1.22 TiB).
        auto ds = searchPlans(tptest::openSpec("deepseek-v3"), hw, {});
        QVERIFY2(ds.ok(), ds.status().message().c_str());
        QVERIFY(!ds->candidates.empty());
        QVERIFY(std::any_of(ds->candidates.begin(), ds->candidates.end(), [](const PlanCandidate& c) { return c.pareto; }));
        for (const PlanCandidate& c : ds->candidates)
            QVERIFY(c.tp == 8 && c.headroomBytes >= 0);
    }

    // Issue 41: the search tries the plans shipped for the model's type, each described and tried once
    // (one equal to a built-in candidate folds into it), and a given plan takes a shipped one's name.
    // DeepSeek-V3 on 8 x H200 at batch 16 x 2048: the shipped mla-sharded fits and leads on latency.
    void planSearchTriesShippedPlans()
    {
        const ModelSpec s = tptest::openSpec("deepseek-v3");
        const HardwareProfile hw = findHardware("h200-sxm-8").value();
        const SearchOptions o{.batch = 16, .seq = 2048};
        auto r = searchPlans(s, hw, o);
        QVERIFY2(r.ok(), r.status().message().c_str());
        const auto mla = std::find_if(r->candidates.begin(), r->candidates.end(),
                                      [](const PlanCandidate& c) { return c.name == "mla-sharded"; });
        QVERIFY(mla != r->candidates.end());
        QCOMPARE(mla->tp, 8);
        QVERIFY(mla->headroomBytes >= 0);
        QVERIFY2(mla->description.starts_with("plans/deepseek_v3/mla-sharded.json: DeepSeek-V3 with MLA sharded"),
                 mla->description.c_str());
        std::set<std::string> plansAtT;
        for (const PlanCandidate& c : r->candidates) {
            QVERIFY2(!c.description.empty(), c.name.c_str());
            QVERIFY(mla->itlSeconds <= c.itlSeconds);
            QVERIFY2(plansAtT.insert(std::to_string(c.tp) + planToJson(c.plan, &s)).second, c.name.c_str()); // tried once
        }
        // plans/deepseek_v3/expert-parallel.json is the built-in "expert parallel": one candidate, both named.
        const auto ep = std::find_if(r->candidates.begin(), r->candidates.end(),
                                     [](const PlanCandidate& c) { return c.name == "expert parallel"; });
        QVERIFY(ep != r->candidates.end());
        QVERIFY2(ep->description.find("the same as 'expert-parallel'") != std::string::npos, ep->description.c_str());

        SearchOptions without = o;
        without.shipped = false;
        auto bare = searchPlans(s, hw, without);
        QVERIFY(bare.ok());
        QVERIFY(std::none_of(bare->candidates.begin(), bare->candidates.end(), [](const PlanCandidate& c) { return c.name == "mla-sharded"; }));

        SearchOptions given = o;
        given.plans.push_back({"mla-sharded", "mine", defaultPlan(s, 8)}); // a given plan replaces the shipped one of its name
        auto mine = searchPlans(s, hw, given);
        QVERIFY(mine.ok());
        QVERIFY(std::none_of(mine->candidates.begin(), mine->candidates.end(),
                             [](const PlanCandidate& c) { return c.description.starts_with("plans/deepseek_v3/mla-sharded"); }));
    }
};

QTEST_GUILESS_MAIN(TestCost)
#include "tst_cost.moc"
