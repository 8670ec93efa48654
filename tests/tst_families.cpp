// tst_families — the engine against Transformers on every model type of tests/fixtures/family_checks.json:
// tiny seeded checkpoints and their references that make_family_checks.py makes at test time with the
// pinned Transformers (ctest runs it, then this suite with TP_FAMILY_CHECKS naming its folder). Prefill
// logits within 1e-4 of Transformers' fp32 ones and greedy decode with the same tokens at every T = 1, 2, 4
// the default plan is valid at, the collectives each run issued equal to the preview's.
#include "tp/cost/hardware.h"
#include "tp/model/loader.h"
#include "tp/plan/plan.h"
#include "tp/runtime/executor.h"

#include "fidelity.h"
#include "testutils.h"

#include <QtTest>

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

using namespace tp;

namespace {

std::string checksFolder() { return qEnvironmentVariable("TP_FAMILY_CHECKS").toStdString(); }

void addTypes()
{
    QTest::addColumn<QString>("check");
    std::ifstream in(tptest::sourceDir() + "/tests/fixtures/family_checks.json");
    const nlohmann::json checks = nlohmann::json::parse(in);
    for (const auto& [name, check] : checks.at("checks").items())
        QTest::addRow("%s", name.c_str()) << QString::fromStdString(name);
}

} // namespace

class TestFamilies : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase()
    {
        if (checksFolder().empty())
            QFAIL("TP_FAMILY_CHECKS is not set: ctest runs this suite through tests/fixtures/make_family_checks.py, which "
                  "makes the references first");
    }

    void prefillMatchesTransformers_data() { addTypes(); }
    void prefillMatchesTransformers()
    {
        QFETCH(QString, check);
        const std::string folder = checksFolder() + "/" + check.toStdString();
        auto om = openModel(folder);
        QVERIFY2(om.ok(), om.status().message().c_str());
        const tptest::Reference ref = tptest::referenceIn(folder);
        const HardwareProfile hw = findHardware("local-cpu").value();
        std::set<int> ranAt;
        double worst = 0;
        for (int tp : {1, 2, 4}) {
            const ShardedGraph g = shardModel(om->spec, defaultPlan(om->spec, tp), {.batch = ref.batch, .seq = ref.seq});
            if (!g.valid())
                continue; // e.g. 2 KV heads at T = 4
            const QString at = QString("T=%1").arg(tp);
            auto r = runModel(om->spec, g, {&*om->checkpoint}, tptest::promptRun(ref));
            QVERIFY2(r.ok(), qPrintable(at + ": " + r.status().message().c_str()));
            const double err = tptest::relError(r->logits, ref.logits);
            QVERIFY2(err < 1e-4, qPrintable(at + QString(": relative error %1").arg(err)));
            worst = std::max(worst, err);
            QVERIFY2(tptest::issuedCollectives(g, r->spans) == tptest::previewedCollectives(om->spec, g, hw),
                     qPrintable(at + ": the collectives issued are not the preview's"));
            ranAt.insert(tp);
        }
        QVERIFY2(ranAt.contains(1), "runs at T = 1");
        QStringList sizes;
        for (int tp : ranAt)
            sizes << QString::number(tp);
        qInfo("worst prefill relative error %.1e (T = %s)", worst, qPrintable(sizes.join(", ")));
    }

    void decodeMatchesTransformersGenerate_data() { addTypes(); }
    void decodeMatchesTransformersGenerate()
    {
        QFETCH(QString, check);
        const std::string folder = checksFolder() + "/" + check.toStdString();
        auto om = openModel(folder);
        QVERIFY2(om.ok(), om.status().message().c_str());
        const tptest::Generation gen = tptest::generationIn(folder);
        const auto V = static_cast<std::size_t>(gen.vocab), B = static_cast<std::size_t>(gen.batch);
        double worst = 0;
        for (int tp : {1, 2, 4}) {
            const ShardedGraph g = shardModel(om->spec, defaultPlan(om->spec, tp), {.batch = gen.batch, .seq = gen.prompt});
            if (!g.valid())
                continue;
            const QString at = QString("T=%1").arg(tp);
            auto r = runModel(om->spec, g, {&*om->checkpoint}, tptest::decodeRun(gen));
            QVERIFY2(r.ok(), qPrintable(at + ": " + r.status().message().c_str()));
            QVERIFY2(tptest::generatedTokens(*r) == gen.tokens, qPrintable(at + ": generated tokens differ from Transformers'"));
            const std::vector<float> got = tptest::engineStepLogits(*r, gen.batch, gen.prompt);
            QCOMPARE(got.size(), gen.stepLogits.size());
            for (std::int64_t j = 0; j < gen.steps; ++j) {
                const auto from = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(j) * B * V), n = static_cast<std::ptrdiff_t>(B * V);
                const double err = tptest::relError(std::vector<float>(got.begin() + from, got.begin() + from + n),
                                                    std::vector<float>(gen.stepLogits.begin() + from, gen.stepLogits.begin() + from + n));
                QVERIFY2(err < 1e-4, qPrintable(at + QString(", step %1: relative error %2").arg(j).arg(err)));
                worst = std::max(worst, err);
            }
        }
        qInfo("worst decode step relative error %.1e", worst);
    }
};

QTEST_GUILESS_MAIN(TestFamilies)
#include "tst_families.moc"
