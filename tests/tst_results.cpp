// tst_results.cpp — the Results page against real runs of the CLI: spread whiskers that bound the
// bars, predictions on the run's own settings and a profile of its backend (with the mismatch
// stated), the baseline's noise band, empty states, units by magnitude and titled exports.
#include "models/preview_service.h"
#include "widgets/results_page.h"
#include "widgets/timeline_view.h"
#include "tp/cost/cost_model.h"
#include "tp/model/loader.h"
#include "tp/plan/plan.h"
#include "testutils.h"

#include <QApplication>
#include <QFile>
#include <QJsonDocument>
#include <QProcess>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QtTest>
#include <qcustomplot.h>

using namespace tpui;

namespace {

QCustomPlot* plotOf(ResultsPage& p, int tab) { return qobject_cast<QCustomPlot*>(p.tabs()->widget(tab)); }

template<typename T> std::vector<T*> plottables(QCustomPlot* p)
{
    std::vector<T*> out;
    for (int i = 0; i < p->plottableCount(); ++i)
        if (auto* x = qobject_cast<T*>(p->plottable(i)))
            out.push_back(x);
    return out;
}

QCPBars* barsNamed(QCustomPlot* p, const QString& prefix)
{
    for (auto* b : plottables<QCPBars>(p))
        if (b->name().startsWith(prefix))
            return b;
    return nullptr;
}

// The lines above a chart, top first.
QString noteOf(QCustomPlot* p)
{
    QStringList lines;
    for (int i = 0; i < p->plotLayout()->elementCount(); ++i)
        if (auto* t = qobject_cast<QCPTextElement*>(p->plotLayout()->elementAt(i)); t && t->objectName() == QLatin1String("profile-note"))
            lines << t->text();
    return lines.join(QLatin1Char('\n'));
}

QStringList itemTexts(QCustomPlot* p)
{
    QStringList out;
    for (int i = 0; i < p->itemCount(); ++i)
        if (auto* t = qobject_cast<QCPItemText*>(p->item(i)))
            out << t->text();
    return out;
}

// (predicted − measured) / measured as the charts write it.
QString percent(double predicted, double measured)
{
    const double e = 100 * (predicted - measured) / measured;
    return (e < 0 ? QStringLiteral("−") : QStringLiteral("+")) + QString::number(std::abs(e), 'f', std::abs(e) < 10 ? 1 : 0)
           + QLatin1Char('%');
}

QCPGraph* graphNamed(QCustomPlot* p, const QString& prefix)
{
    for (auto* g : plottables<QCPGraph>(p))
        if (g->name().startsWith(prefix))
            return g;
    return nullptr;
}

} // namespace

class TestResults : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir, m_hwDir;
    std::shared_ptr<RunData> m_run;
    std::shared_ptr<const tp::ModelSpec> m_spec;

    std::string m_configText;

    std::shared_ptr<const PreviewResult> preview(const QString& hardware, std::optional<tp::Plan> plan = std::nullopt)
    {
        PreviewSettings s;
        s.tpSize = 2;
        s.hardware = hardware;
        return computePreview(m_spec, plan ? *plan : tp::defaultPlan(*m_spec, 2), s);
    }

private slots:
    void initTestCase()
    {
        qputenv("TPSTUDIO_CLI", TP_CLI_PATH);
        // No calibrated profiles: a CPU run's predictions use local-cpu.
        qputenv("TPSTUDIO_HARDWARE_DIR", m_hwDir.path().toUtf8());
        auto om = tp::openModel("example");
        QVERIFY2(om.ok(), om.status().message().c_str());
        m_configText = tp::configText(*om).value();
        m_spec = std::make_shared<const tp::ModelSpec>(std::move(om->spec));
        // A real run: T = 1, 2; 4 timed iterations, 4 decode steps.
        QProcess cli;
        const QString json = m_dir.filePath(QStringLiteral("run.json"));
        cli.start(QStringLiteral(TP_CLI_PATH),
                  {QStringLiteral("run"), QStringLiteral("--model"), QStringLiteral("example"), QStringLiteral("--tp"), QStringLiteral("1,2"),
                   QStringLiteral("--seq"), QStringLiteral("8"), QStringLiteral("--decode"), QStringLiteral("4"), QStringLiteral("--warmup"),
                   QStringLiteral("1"), QStringLiteral("--iters"), QStringLiteral("4"), QStringLiteral("--json"), json});
        QVERIFY(cli.waitForFinished(180000));
        QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());
        QFile f(json);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray text = f.readAll();
        auto rec = tp::parseRunRecord(std::string_view(text.constData(), std::size_t(text.size())), "run.json");
        QVERIFY2(rec.ok(), rec.status().message().c_str());
        m_run = std::make_shared<RunData>();
        m_run->record = std::move(*rec);
        m_run->jsonPath = json;
        QCOMPARE(m_run->record.runs.size(), std::size_t(2));
    }

    // Every chart with nothing to show says why and what to do.
    void emptyStatesBeforeARun_data()
    {
        QTest::addColumn<int>("tab");
        QTest::addColumn<QString>("says");
        QTest::addRow("per layer") << 0 << QStringLiteral("No run yet");
        QTest::addRow("speedup") << 1 << QStringLiteral("No run yet");
        QTest::addRow("latency") << 2 << QStringLiteral("No run yet");
        QTest::addRow("baseline") << 4 << QStringLiteral("No baseline: click Set as Baseline");
        QTest::addRow("collectives") << 5 << QStringLiteral("No collective benchmark yet: Benchmark Collectives");
    }
    void emptyStatesBeforeARun()
    {
        QFETCH(int, tab);
        QFETCH(QString, says);
        ResultsPage page;
        QVERIFY2(page.emptyText(tab).startsWith(says), qPrintable(page.emptyText(tab)));
        // With a run, the run's charts are no longer empty; the baseline's until one is set.
        page.setRun(m_run);
        if (tab <= 2)
            QCOMPARE(page.emptyText(tab), QString());
        if (tab == 4) {
            QVERIFY(!page.emptyText(tab).isEmpty());
            page.setBaseline(m_run);
            QCOMPARE(page.emptyText(tab), QString());
        }
    }

    // Per layer (slowest rank): min–max whiskers on the stack's top, bounding the bars; the y unit
    // chosen by magnitude.
    void spreadWhiskersBoundTheBars_data()
    {
        QTest::addColumn<int>("phase");
        QTest::addRow("prefill") << 0;
        QTest::addRow("decode step") << 1;
    }
    void spreadWhiskersBoundTheBars()
    {
        QFETCH(int, phase);
        ResultsPage page;
        page.setRun(m_run);
        page.phaseBox()->setCurrentIndex(phase);
        QCustomPlot* p = plotOf(page, 0);
        const auto errors = plottables<QCPErrorBars>(p);
        QCOMPARE(errors.size(), std::size_t(1));
        const auto& run = m_run->record.runs.back();
        const auto& layers = phase == 1 ? run.decode.layers : run.layers;
        auto* top = qobject_cast<QCPGraph*>(errors[0]->dataPlottable());
        QVERIFY(top);
        QCOMPARE(top->dataCount(), int(layers.size()));
        QCOMPARE(errors[0]->dataCount(), int(layers.size()));
        const QString label = p->yAxis->label();
        const double k = label.startsWith(QStringLiteral("µs")) ? 1.0 : label.startsWith(QStringLiteral("ms")) ? 1e-3 : 1e-6;
        QVERIFY2(label.contains(phase == 1 ? QStringLiteral("per decode step") : QStringLiteral("per forward")), qPrintable(label));
        QVERIFY(p->xAxis->label().contains(QStringLiteral("slowest rank")));
        for (int i = 0; i < top->dataCount(); ++i) {
            const auto& l = layers[std::size_t(i)];
            QVERIFY(l.hasSpread);
            const double v = top->data()->at(i)->value;
            QVERIFY(qAbs(v - (l.computeUs + l.commUs) * k) <= 1e-9 + 1e-9 * v);
            const QCPRange r = errors[0]->dataValueRange(i);
            QVERIFY2(r.lower <= v + 1e-12 && v <= r.upper + 1e-12, qPrintable(QStringLiteral("layer %1").arg(i)));
            QVERIFY(qAbs(r.lower - l.minUs * k) <= 1e-6 * std::max(1.0, l.maxUs * k));
            QVERIFY(qAbs(r.upper - l.maxUs * k) <= 1e-6 * std::max(1.0, l.maxUs * k));
        }
    }

    // Predictions use the run's settings (seq 8, not the toolbar's 512) and a CPU run's profile
    // (local-cpu here: no calibrated profile installed); a toolbar on a GPU profile is stated.
    void predictionsUseTheRunsBackend_data()
    {
        QTest::addColumn<QString>("toolbar");
        QTest::addColumn<bool>("note");
        QTest::addRow("toolbar h100") << QStringLiteral("h100-sxm-8") << true;
        QTest::addRow("toolbar local-cpu") << QStringLiteral("local-cpu") << false;
    }
    void predictionsUseTheRunsBackend()
    {
        QFETCH(QString, toolbar);
        QFETCH(bool, note);
        ResultsPage page;
        page.setPreview(preview(toolbar));
        page.setRun(m_run);
        QVERIFY(page.predictionProfile());
        QCOMPARE(QString::fromStdString(page.predictionProfile()->id), QStringLiteral("local-cpu"));
        QCustomPlot* p = plotOf(page, 1);
        QCPGraph* pred = graphNamed(p, QStringLiteral("predicted"));
        QVERIFY(pred);
        QVERIFY2(pred->name().contains(QStringLiteral("local-cpu")), qPrintable(pred->name()));
        // The points are the cost model's at the run's own batch × seq on local-cpu.
        const auto cpu = tp::findHardware("local-cpu");
        QVERIFY(cpu.ok());
        const tp::Plan plan = tp::defaultPlan(*m_spec, 2);
        tp::ShardOptions o{.batch = 1, .seq = 8};
        o.activationDtype = tp::DType::F32;
        o.lastPositionLogits = m_run->record.settings.logits == "last";
        // Issue 41: up to twice the largest T that ran (at most 8), not always 8; the axis as far.
        int ran = 1;
        for (const auto& r : m_run->record.runs)
            ran = std::max(ran, r.tp);
        const int axisT = std::max(ran, std::min(8, 2 * ran));
        QCOMPARE(p->xAxis->range().upper, axisT + 0.5);
        QVERIFY(p->yAxis->range().upper <= axisT + 0.25);
        std::vector<double> expect;
        for (const auto& pt : tp::predictScaling(*m_spec, plan, o, *cpu, axisT, 8 + 2))
            if (pt.valid)
                expect.push_back(pt.speedup);
        QCOMPARE(pred->dataCount(), int(expect.size()));
        for (int i = 0; i < pred->dataCount(); ++i)
            QVERIFY(qAbs(pred->data()->at(i)->value - expect[std::size_t(i)]) < 1e-9);
        // The measured speedup carries whiskers from the iterations.
        QCOMPARE(plottables<QCPErrorBars>(p).size(), std::size_t(1));
        QCPGraph* ttft = graphNamed(plotOf(page, 2), QStringLiteral("TTFT predicted"));
        QVERIFY(ttft && ttft->name().contains(QStringLiteral("local-cpu")));
        QCOMPARE(plottables<QCPErrorBars>(plotOf(page, 2)).size(), std::size_t(2)); // TTFT min–max, ITL p10–p90
        const QString shown = noteOf(p);
        // Re-plotting keeps one note, not one per refresh.
        page.phaseBox()->setCurrentIndex(0);
        page.setPreview(preview(toolbar));
        int notes = 0;
        for (int i = 0; i < p->plotLayout()->elementCount(); ++i)
            if (auto* t = qobject_cast<QCPTextElement*>(p->plotLayout()->elementAt(i)); t && t->objectName() == QLatin1String("profile-note"))
                ++notes;
        QCOMPARE(notes, note ? 2 : 1); // the profile's caveat when there is one, over the prediction's error
        QVERIFY2(shown.startsWith(page.profileNote()), qPrintable(shown));
        QVERIFY2(shown.contains(QStringLiteral("Predicted speedup against measured")), qPrintable(shown));
        if (note) {
            QVERIFY2(shown.contains(QStringLiteral("local-cpu")) && shown.contains(QStringLiteral("h100-sxm-8")), qPrintable(shown));
        } else {
            QCOMPARE(page.profileNote(), QString());
        }
    }

    // Issue 41: the prediction beside the measurement. Per layer: the cost model's compute and
    // communication as pale bars right of each measured stack, and the phase's and worst layer's
    // error; Speedup and Latency: each measured point labelled with the prediction's error.
    void predictionErrorsBesideTheMeasurement_data()
    {
        QTest::addColumn<int>("phase");
        QTest::addRow("prefill") << 0;
        QTest::addRow("decode step") << 1;
    }
    void predictionErrorsBesideTheMeasurement()
    {
        QFETCH(int, phase);
        ResultsPage page;
        page.setModelConfig(m_spec, m_configText);
        page.setPreview(preview(QStringLiteral("local-cpu")));
        page.setRun(m_run);
        page.phaseBox()->setCurrentIndex(phase);
        QCOMPARE(page.comparisonNote(), QString());
        const auto cmp = tp::compareRecord(m_run->record, *m_spec, m_configText, tp::defaultPlan(*m_spec, 2), tp::findHardware("local-cpu").value());
        QVERIFY2(cmp.ok(), cmp.status().message().c_str());
        QCOMPARE(page.comparison().size(), cmp->size());
        const tp::PhaseComparison& want = phase == 1 ? *cmp->back().decode : cmp->back().prefill;
        QCustomPlot* p = plotOf(page, 0);
        QCPBars *pc = barsNamed(p, QStringLiteral("compute predicted")), *pm = barsNamed(p, QStringLiteral("communication predicted"));
        QCPBars* mc = barsNamed(p, QStringLiteral("compute measured"));
        QVERIFY(pc && pm && mc);
        QCOMPARE(pc->dataCount(), int(want.layers.size()));
        const QString label = p->yAxis->label();
        const double k = label.startsWith(QStringLiteral("µs")) ? 1.0 : label.startsWith(QStringLiteral("ms")) ? 1e-3 : 1e-6;
        for (int i = 0; i < pc->dataCount(); ++i) {
            const auto& l = want.layers[std::size_t(i)];
            QVERIFY(qAbs(pc->data()->at(i)->value - l.predictedComputeUs * k) <= 1e-9 * std::max(1.0, l.predictedComputeUs));
            QVERIFY(qAbs(pm->data()->at(i)->value - l.predictedCommUs * k) <= 1e-9 * std::max(1.0, l.predictedCommUs));
            QVERIFY(l.predictedComputeUs > 0);
            // Side by side: measured left of the layer's tick, predicted right.
            QVERIFY(mc->data()->at(i)->key < i && pc->data()->at(i)->key > i);
        }
        const QString note = noteOf(p);
        QVERIFY2(note.contains(QStringLiteral("Predicted on local-cpu")) && note.contains(percent(want.predictedUs, want.measuredUs)),
                 qPrintable(note));
        // Speedup: T=2's point labelled; Latency: TTFT and ITL at T = 1, 2.
        const QStringList speedupLabels = itemTexts(plotOf(page, 1));
        QCOMPARE(speedupLabels.filter(QStringLiteral("predicted ")).size(), 1);
        QVERIFY2(noteOf(plotOf(page, 1)).contains(QStringLiteral("T=2 ") + speedupLabels.filter(QStringLiteral("predicted ")).first().mid(10)),
                 qPrintable(noteOf(plotOf(page, 1))));
        QCustomPlot* lat = plotOf(page, 2);
        QCPGraph *mt = graphNamed(lat, QStringLiteral("TTFT measured")), *pt = graphNamed(lat, QStringLiteral("TTFT predicted"));
        QVERIFY(mt && pt);
        QCOMPARE(pt->dataCount(), 2);
        const QString ttftError = percent(pt->data()->at(1)->value, mt->data()->at(1)->value);
        QVERIFY2(itemTexts(lat).contains(ttftError), qPrintable(itemTexts(lat).join(QLatin1Char(' '))));
        QCOMPARE(itemTexts(lat).size(), 4);
        QVERIFY2(noteOf(lat).contains(QStringLiteral("TTFT T=1 ")) && noteOf(lat).contains(QStringLiteral("T=2 ") + ttftError),
                 qPrintable(noteOf(lat)));
        // The tooltip figures come from the same comparison.
        QCOMPARE(page.comparison().back().tp, 2);
    }

    // A run is held to the model and plan it ran before a prediction goes beside it: another plan,
    // or a config the page cannot check, leaves the measured bars alone and says why.
    void noPredictionBesideAnotherPlansRun()
    {
        tp::Plan other = tp::defaultPlan(*m_spec, 2);
        other.entries.pop_back();
        for (const bool config : {true, false}) {
            ResultsPage page;
            if (config)
                page.setModelConfig(m_spec, m_configText);
            page.setPreview(preview(QStringLiteral("local-cpu"), config ? std::optional(other) : std::nullopt));
            page.setRun(m_run);
            QVERIFY(page.comparison().empty());
            QVERIFY2(page.comparisonNote().contains(config ? QStringLiteral("plan") : QStringLiteral("config differs")),
                     qPrintable(page.comparisonNote()));
            QCustomPlot* p = plotOf(page, 0);
            QVERIFY(!barsNamed(p, QStringLiteral("compute predicted")));
            QVERIFY(barsNamed(p, QStringLiteral("compute")));
            QVERIFY2(noteOf(p).contains(page.comparisonNote()), qPrintable(noteOf(p)));
        }
    }

    // Issue 41: a run on a busy host says so above the charts; a quiet one does not.
    void busyHostIsWarned()
    {
        auto busy = std::make_shared<RunData>(*m_run);
        busy->record.provenance.logicalCores = 2;
        for (auto& r : busy->record.runs) // the real run's own figures depend on what else this host ran
            r.hostOtherCores = 0.1;
        busy->record.runs.back().hostOtherCores = 1.5;
        ResultsPage page;
        page.setRun(busy);
        QVERIFY2(page.warningText().contains(QStringLiteral("The host was busy")) && page.warningText().contains(QStringLiteral("1.5 of its 2 cores busy during T=2")),
                 qPrintable(page.warningText()));
        busy->record.runs.back().hostOtherCores = 0.1;
        page.setRun(busy);
        QCOMPARE(page.warningText(), QString());
        // The real run measured it.
        for (const auto& r : m_run->record.runs)
            QVERIFY(r.hostOtherCores >= 0);
    }

    // Issue 41: the timeline's page holds, under the lanes, where the time went: spans folded over
    // the layers, the slowest rank's total of each, longest first; activating a row finds its spans.
    void timelineSaysWhereTheTimeWent()
    {
        QCOMPARE(TimelineView::foldedName(QStringLiteral("model.layers.13.mlp.down_proj/all_reduce")),
                 QStringLiteral("model.layers.*.mlp.down_proj/all_reduce"));
        QCOMPARE(TimelineView::foldedName(QStringLiteral("model.layers.1:residual_attn")), QStringLiteral("model.layers.*:residual_attn"));
        QCOMPARE(TimelineView::foldedName(QStringLiteral("lm_head")), QStringLiteral("lm_head"));
        QCOMPARE(TimelineView::foldedName(QStringLiteral("transformer.h.10.attn.c_proj")), QStringLiteral("transformer.h.*.attn.c_proj"));
        ResultsPage page;
        page.setRun(m_run);
        TimelineView* t = page.timeline();
        QTreeWidget* hot = t->hotspots();
        QVERIFY(hot->topLevelItemCount() > 3);
        // Each row's time: the slowest rank's sum of its spans, recomputed here.
        std::map<QString, std::map<int, double>> sums;
        for (const auto& s : t->spans())
            sums[TimelineView::foldedName(QString::fromStdString(s.name))][s.rank] += s.endUs - s.startUs;
        QCOMPARE(hot->topLevelItemCount(), int(sums.size()));
        double last = 1e300;
        for (int i = 0; i < hot->topLevelItemCount(); ++i) {
            QTreeWidgetItem* row = hot->topLevelItem(i);
            double slowest = 0;
            for (const auto& [rank, us] : sums.at(row->text(0)))
                slowest = std::max(slowest, us);
            const double shown = row->data(3, Qt::UserRole).toDouble();
            QVERIFY(qAbs(shown - slowest) <= 1e-9 * std::max(1.0, slowest));
            QVERIFY(shown <= last); // longest first
            last = shown;
        }
        QTreeWidgetItem* layered = nullptr;
        for (int i = 0; i < hot->topLevelItemCount() && !layered; ++i)
            if (hot->topLevelItem(i)->text(0).contains(QLatin1String(".*")))
                layered = hot->topLevelItem(i);
        QVERIFY(layered);
        emit hot->itemActivated(layered, 0);
        QVERIFY(!t->searchBox()->text().contains(QLatin1Char('*')));
        QVERIFY(layered->text(0).endsWith(t->searchBox()->text()));
        QVERIFY(t->matchCount() >= 2);
    }

    // Baseline vs current: an identical run, and one 2 % faster within the same spread, are all
    // within the noise; a run 100× faster beyond its spread is coloured faster, none slower.
    void baselineColoursOnlyBeyondTheNoise()
    {
        ResultsPage page;
        page.setRun(m_run);
        page.setBaseline(m_run);
        QCustomPlot* p = plotOf(page, 4);
        QVERIFY(barsNamed(p, QStringLiteral("noise band")));
        QCOMPARE(barsNamed(p, QStringLiteral("current, faster"))->dataCount(), 0);
        QCOMPARE(barsNamed(p, QStringLiteral("current, slower"))->dataCount(), 0);
        const int layers = int(m_run->record.runs.back().layers.size());
        QCOMPARE(barsNamed(p, QStringLiteral("current, within"))->dataCount(), layers);

        // 2 % faster in the last iteration but with the same spread: noise, not a gain.
        auto noisy = std::make_shared<RunData>(*m_run);
        for (auto& r : noisy->record.runs)
            for (auto& l : r.layers) {
                l.computeUs *= 0.98;
                l.commUs *= 0.98;
            }
        page.setRun(noisy);
        QCOMPARE(barsNamed(p, QStringLiteral("current, faster"))->dataCount(), 0);
        QCOMPARE(barsNamed(p, QStringLiteral("current, within"))->dataCount(), layers);

        auto faster = std::make_shared<RunData>(*m_run);
        for (auto& r : faster->record.runs)
            for (auto& l : r.layers) {
                l.computeUs *= 0.01;
                l.commUs *= 0.01;
                l.minUs *= 0.01;
                l.medianUs *= 0.01;
                l.maxUs *= 0.01;
            }
        page.setRun(faster);
        QVERIFY(barsNamed(p, QStringLiteral("current, faster"))->dataCount() > 0);
        QCOMPARE(barsNamed(p, QStringLiteral("current, slower"))->dataCount(), 0);
        // And the other way round: the faster one as baseline makes the real run slower.
        page.setBaseline(faster);
        page.setRun(m_run);
        QVERIFY(barsNamed(p, QStringLiteral("current, slower"))->dataCount() > 0);
        QCOMPARE(barsNamed(p, QStringLiteral("current, faster"))->dataCount(), 0);
    }

    // The collective chart: sizes in B/KiB/MiB, the legend beside the curves; a busy state while
    // the benchmark's child runs, then curves.
    void collectiveBenchmark()
    {
        ResultsPage page;
        page.resize(1000, 600);
        QJsonArray rows;
        for (double size = 8; size <= 16 * 1024 * 1024; size *= 4)
            rows.append(QJsonObject{{QStringLiteral("op"), QStringLiteral("all_reduce")},
                                    {QStringLiteral("size"), size},
                                    {QStringLiteral("out_of_place"), QJsonObject{{QStringLiteral("time_us"), 5 + size / 1e3},
                                                                                 {QStringLiteral("busbw_gbps"), size / 1e6}}}});
        page.setBenchmark(QStringLiteral("local"), rows);
        QCustomPlot* p = plotOf(page, 5);
        QCOMPARE(page.emptyText(5), QString());
        p->replot();
        const QVector<QString> labels = p->xAxis->tickVectorLabels();
        QVERIFY(!labels.isEmpty());
        QVERIFY2(std::any_of(labels.begin(), labels.end(), [](const QString& l) { return l.endsWith(QStringLiteral("MiB")); }),
                 qPrintable(QStringList(labels.begin(), labels.end()).join(QLatin1Char(','))));
        for (const QString& l : labels)
            QVERIFY2(!l.contains(QStringLiteral("1048576")) && !l.contains(QLatin1Char('e')), qPrintable(l));
        QVERIFY(p->yAxis->label().startsWith(QStringLiteral("time (ms)"))); // 16 MiB: 16.8 ms
        QVERIFY(!p->legend->outerRect().intersects(p->axisRect()->rect()));
        QVERIFY(p->legend->outerRect().height() < p->axisRect()->rect().height()); // at the top, not stretched

        QSignalSpy done(&page, &ResultsPage::benchmarkFinished);
        page.runBenchmark(QStringLiteral("local"));
        QVERIFY2(page.emptyText(5).startsWith(QStringLiteral("Benchmarking collectives")), qPrintable(page.emptyText(5)));
        QVERIFY(done.wait(120000));
        QCOMPARE(page.emptyText(5), QString());
        QVERIFY(page.itemCount(5) > 0);
    }

    // Exported charts carry a title: model, T, profile, batch × seq, dtype, phase; drawn into the
    // image and gone from the chart afterwards.
    void exportedChartIsTitled()
    {
        QTemporaryDir out;
        ResultsPage page;
        page.setPreview(preview(QStringLiteral("h100-sxm-8")));
        page.setRun(m_run);
        const QString title = page.exportTitle();
        for (const char* want : {"example", "T=2", "local-cpu", "batch 1", "seq 8", "f32", "prefill"})
            QVERIFY2(title.contains(QLatin1String(want)), qPrintable(title));
        QCustomPlot* p = plotOf(page, 0);
        const int rows = p->plotLayout()->rowCount();
        const QString svg = out.filePath(QStringLiteral("layers.svg"));
        QVERIFY(page.exportChart(svg));
        QCOMPARE(p->plotLayout()->rowCount(), rows);
        QFile f(svg);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray text = f.readAll();
        QVERIFY(text.contains("example"));
        QVERIFY(text.contains("local-cpu"));
        QVERIFY(text.contains("T=2"));
        QVERIFY(page.exportChart(out.filePath(QStringLiteral("layers.png"))));
    }
};

QTEST_MAIN(TestResults)
#include "tst_results.moc"
