// tst_cost — hardware profiles and the cost model (formulas in docs/metrics.md; anchors from
// peer-tools-and-numbers.md B1–B4).
#include "tp/cost/cost_model.h"
#include "tp/model/loader.h"

#include "testutils.h"

#include <QtTest>

using namespace tp;

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
        QTest::addRow("curve not ascending")
            << "{" + ok + R"(, "gemm_efficiency": [[10, 0.5], [1, 0.6]], "collectives": {}})" << "gflop values must ascend";
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
};

QTEST_GUILESS_MAIN(TestCost)
#include "tst_cost.moc"
