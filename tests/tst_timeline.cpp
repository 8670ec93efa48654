// tst_timeline — the Results page's timeline (TimelineView): lanes, labels, zoom and fit, search,
// the wait/transfer split, the empty state, and a span click selecting its module in the main window.
#include "models/module_tree_model.h"
#include "widgets/main_window.h"
#include "widgets/results_page.h"
#include "widgets/run_page.h"
#include "widgets/timeline_view.h"

#include <QApplication>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTreeView>
#include <QWheelEvent>
#include <QtTest>

using namespace tpui;

namespace {

tp::RecordedSpan span(int rank, const char* name, const char* kind, const char* op, int layer, double a, double b, double wait = 0,
                      std::int64_t bytes = 0)
{
    tp::RecordedSpan s;
    s.rank = rank;
    s.name = name;
    s.kind = kind;
    s.op = op;
    s.layer = layer;
    s.startUs = a;
    s.endUs = b;
    s.waitUs = wait;
    s.bytes = bytes;
    return s;
}

// Two ranks, two layers: rank 0 reaches the all_reduce 40 µs before rank 1 and waits for it.
std::vector<tp::RecordedSpan> twoRanks()
{
    return {span(0, "model.layers.0.self_attn.q_proj", "compute", "linear", 0, 0, 100),
            span(0, "model.layers.0.self_attn.o_proj/all_reduce", "comm", "all_reduce", 0, 100, 200, 40, 4096),
            span(0, "model.layers.1.mlp.down_proj", "compute", "linear", 1, 200, 600),
            span(0, "model.layers.1:residual_mlp", "compute", "add", 1, 600, 612),
            span(1, "model.layers.0.self_attn.q_proj", "compute", "linear", 0, 0, 140),
            span(1, "model.layers.0.self_attn.o_proj/all_reduce", "comm", "all_reduce", 0, 140, 200, 0, 4096),
            span(1, "model.layers.1.mlp.down_proj", "compute", "linear", 1, 200, 600),
            span(1, "model.layers.1:residual_mlp", "compute", "add", 1, 600, 612)};
}

QPoint centre(const QRectF& r) { return r.center().toPoint(); }

} // namespace

class TestTimeline : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("TP Studio Tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_timeline"));
        qputenv("TPSTUDIO_CLI", TP_CLI_PATH);
    }

    void modulePaths()
    {
        QCOMPARE(TimelineView::modulePathOf(QStringLiteral("model.layers.3.self_attn.q_proj")), QStringLiteral("model.layers.3.self_attn.q_proj"));
        QCOMPARE(TimelineView::modulePathOf(QStringLiteral("model.layers.3.self_attn.o_proj/all_reduce")),
                 QStringLiteral("model.layers.3.self_attn.o_proj"));
        QCOMPARE(TimelineView::modulePathOf(QStringLiteral("model.layers.3:residual_attn")), QStringLiteral("model.layers.3"));
        QCOMPARE(TimelineView::modulePathOf(QStringLiteral("model.layers.3.self_attn:attention")), QStringLiteral("model.layers.3.self_attn"));
    }

    void lanesLabelsAndWait()
    {
        TimelineView v;
        v.resize(1000, 320);
        v.setSpans(twoRanks(), 2, QStringLiteral("test"));
        const QImage img = v.canvas()->grab().toImage();
        // Rank 0's lane above rank 1's, and each span in its rank's lane.
        QVERIFY(v.laneRect(0).bottom() <= v.laneRect(1).top());
        QVERIFY(v.spanRect(0).bottom() <= v.laneRect(0).bottom());
        QVERIFY(v.spanRect(4).top() >= v.laneRect(1).top());
        QVERIFY(v.spanRect(0).top() < v.spanRect(4).top());
        // Layer bands, labelled where they fit.
        QCOMPARE(v.drawnBandLabels(), (QStringList{QStringLiteral("L0"), QStringLiteral("L1")}));
        // Names: the wide span's in full, the 12-µs one elided (or left out) — never overflowing.
        const QStringList labels = v.drawnLabels();
        QVERIFY2(labels.contains(QStringLiteral("model.layers.1.mlp.down_proj")), qPrintable(labels.join(QLatin1Char('|'))));
        QVERIFY(!labels.contains(QStringLiteral("model.layers.1:residual_mlp")));
        bool elided = false;
        for (const QString& l : labels)
            elided |= l.contains(QChar(0x2026));
        QVERIFY2(elided, qPrintable(labels.join(QLatin1Char('|'))));
        // The wait: one comm span waited (rank 0, 40 of its 100 µs), drawn hatched and lighter
        // than its solid transfer part.
        QCOMPARE(v.drawnWaitParts(), 1);
        const QRectF comm = v.spanRect(1);
        const double xWait = comm.left() + comm.width() * 0.2, xTransfer = comm.left() + comm.width() * 0.8;
        const QColor solid = img.pixelColor(QPoint(int(xTransfer), int(comm.bottom()) - 2));
        QCOMPARE(solid, QColor(230, 140, 40));
        int differ = 0;
        for (int dy = 1; dy < int(comm.height()) - 1; ++dy)
            differ += img.pixelColor(QPoint(int(xWait), int(comm.top()) + dy)) != solid;
        QVERIFY(differ > 2);
        // Tooltips name the split and the bytes.
        const QString tip = v.toolTipFor(1);
        QVERIFY2(tip.contains(QStringLiteral("waiting for other ranks 40.0 µs")) && tip.contains(QStringLiteral("transfer 60.0 µs"))
                     && tip.contains(QStringLiteral("4.00 KiB")),
                 qPrintable(tip));
    }

    void zoomPanAndFit()
    {
        TimelineView v;
        v.resize(1000, 320);
        v.setSpans(twoRanks(), 2, QStringLiteral("test"));
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        QCOMPARE(v.visibleStartUs(), 0.0);
        QCOMPARE(v.visibleEndUs(), v.fullEndUs());
        // Wheel up zooms in around the cursor: the time under it stays put.
        QWidget* c = v.canvas();
        const QPointF at(v.spanRect(2).center().x(), v.spanRect(2).center().y());
        const double xBefore = v.spanRect(2).left();
        QWheelEvent wheel(at, c->mapToGlobal(at), QPoint(), QPoint(0, 240), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
        QApplication::sendEvent(c, &wheel);
        QVERIFY(v.visibleEndUs() - v.visibleStartUs() < 0.7 * v.fullEndUs());
        QVERIFY(v.spanRect(2).left() < xBefore); // the span grew to both sides of the cursor
        // Drag pans: the range keeps its width and moves.
        const double w = v.visibleEndUs() - v.visibleStartUs(), s0 = v.visibleStartUs();
        QTest::mousePress(c, Qt::LeftButton, {}, at.toPoint());
        QTest::mouseMove(c, at.toPoint() + QPoint(100, 0));
        QTest::mouseRelease(c, Qt::LeftButton, {}, at.toPoint() + QPoint(100, 0));
        QVERIFY(std::abs((v.visibleEndUs() - v.visibleStartUs()) - w) < 1e-6);
        QVERIFY(v.visibleStartUs() < s0);
        // Double-click: everything again.
        v.setVisibleRange(100, 200);
        QCOMPARE(v.visibleStartUs(), 100.0);
        QCOMPARE(v.visibleEndUs(), 200.0);
        QTest::mouseDClick(c, Qt::LeftButton, {}, QPoint(c->width() / 2, 4));
        QCOMPARE(v.visibleStartUs(), 0.0);
        QCOMPARE(v.visibleEndUs(), v.fullEndUs());
    }

    void searchCountsAndJumps()
    {
        TimelineView v;
        v.resize(1000, 320);
        v.setSpans(twoRanks(), 2, QStringLiteral("test"));
        v.searchBox()->setText(QStringLiteral("Q_PROJ"));
        QCOMPARE(v.matchCount(), 2);
        QCOMPARE(v.matchText(), QStringLiteral("2 matches"));
        v.searchBox()->setText(QStringLiteral("all_reduce"));
        QCOMPARE(v.matchCount(), 2);
        QTest::keyClick(v.searchBox(), Qt::Key_Return);
        QCOMPARE(v.matchText(), QStringLiteral("1 of 2"));
        // Zoomed onto the first match in time (rank 0's, at 100 µs), which is in view.
        QVERIFY(v.visibleEndUs() - v.visibleStartUs() < v.fullEndUs() / 2);
        QVERIFY(v.visibleStartUs() <= 100 && v.visibleEndUs() >= 200);
        QTest::keyClick(v.searchBox(), Qt::Key_Return);
        QCOMPARE(v.matchText(), QStringLiteral("2 of 2"));
        QVERIFY(v.visibleStartUs() <= 140 && v.visibleEndUs() >= 200);
        QTest::keyClick(v.searchBox(), Qt::Key_Return);
        QCOMPARE(v.matchText(), QStringLiteral("1 of 2")); // wraps
        v.searchBox()->setText(QStringLiteral("nothing like it"));
        QCOMPARE(v.matchCount(), 0);
        QCOMPARE(v.matchText(), QStringLiteral("no match"));
        v.searchBox()->clear();
        QCOMPARE(v.matchText(), QString());
    }

    void clickEmitsModule()
    {
        TimelineView v;
        v.resize(1000, 320);
        v.setSpans(twoRanks(), 2, QStringLiteral("test"));
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        QSignalSpy spy(&v, &TimelineView::spanActivated);
        QCOMPARE(v.spanAt(centre(v.spanRect(1))), 1);
        QTest::mouseClick(v.canvas(), Qt::LeftButton, {}, centre(v.spanRect(1)));
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.at(0).at(0).toString(), QStringLiteral("model.layers.0.self_attn.o_proj"));
        QTest::mouseClick(v.canvas(), Qt::LeftButton, {}, centre(v.spanRect(6)));
        QCOMPARE(spy.count(), 2);
        QCOMPARE(spy.at(1).at(0).toString(), QStringLiteral("model.layers.1.mlp.down_proj"));
        // The gutter is no span.
        QCOMPARE(v.spanAt(QPoint(2, int(v.spanRect(1).center().y()))), -1);
    }

    void emptyState()
    {
        TimelineView v;
        v.resize(600, 300);
        v.setSpans({}, 2, QStringLiteral("test"));
        const QImage img = v.canvas()->grab().toImage();
        QCOMPARE(v.emptyText(), QStringLiteral("Run the plan to see its timeline"));
        QVERIFY(v.drawnLabels().isEmpty());
        QCOMPARE(v.spanAt(QPoint(300, 150)), -1);
        // The text is drawn: the middle row is not one colour.
        const QColor bg = img.pixelColor(2, 2);
        int ink = 0;
        for (int y = img.height() / 2 - 8; y < img.height() / 2 + 8; ++y)
            for (int x = 0; x < img.width(); ++x)
                ink += img.pixelColor(x, y) != bg;
        QVERIFY(ink > 20);
    }

    void runThenClickSelectsModule()
    {
        // A real T=2 run from the Run page; a click on a timeline span selects its module in the
        // tree and shows the Plan page.
        MainWindow w;
        w.setShowErrorDialogs(false);
        w.resize(1400, 900);
        w.show();
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        QSignalSpy applied(&w, &MainWindow::previewApplied);
        w.openModel(QStringLiteral("example"));
        QVERIFY(loaded.wait(30000));
        QVERIFY(applied.count() > 0 || applied.wait(30000));
        RunPage* run = w.runPage();
        run->tpSizes()->setText(QStringLiteral("2"));
        run->seqBox()->setValue(8);
        QSignalSpy done(run, &RunPage::runFinished);
        run->start();
        QVERIFY2(done.wait(120000), qPrintable(run->log()->toPlainText()));
        ResultsPage* res = w.resultsPage();
        res->tabs()->setCurrentWidget(res->timeline());
        TimelineView* tl = res->timeline();
        QCOMPARE(tl->tpSize(), 2);
        QVERIFY(tl->spans().size() > 20);
        QCOMPARE(res->itemCount(res->tabs()->indexOf(tl)), int(tl->spans().size()));
        bool comm = false;
        for (const auto& s : tl->spans())
            if (s.kind == "comm") {
                comm = true;
                QVERIFY(s.waitUs >= 0 && s.waitUs <= s.endUs - s.startUs);
            }
        QVERIFY(comm);
        // The widest rank-1 span of a module (not an op of its own): zoom onto it and click it.
        int pick = -1;
        for (std::size_t i = 0; i < tl->spans().size(); ++i) {
            const auto& s = tl->spans()[i];
            if (s.rank == 1 && s.kind == "compute" && s.name.find(".self_attn.q_proj") != std::string::npos)
                pick = int(i);
        }
        QVERIFY(pick >= 0);
        const auto& s = tl->spans()[std::size_t(pick)];
        tl->setVisibleRange(s.startUs - (s.endUs - s.startUs), s.endUs + (s.endUs - s.startUs));
        const QRectF r = tl->spanRect(pick);
        QVERIFY(r.width() > 10);
        QCOMPARE(tl->spanAt(centre(r)), pick);
        QSignalSpy activated(res, &ResultsPage::moduleActivated);
        QTest::mouseClick(tl->canvas(), Qt::LeftButton, {}, centre(r));
        QCOMPARE(activated.count(), 1);
        const QString path = TimelineView::modulePathOf(QString::fromStdString(s.name));
        QCOMPARE(activated.at(0).at(0).toString(), path);
        QCOMPARE(w.tabs()->currentIndex(), int(MainWindow::PlanPage));
        QCOMPARE(w.treeView()->currentIndex().data(ModuleTreeModel::PathRole).toString(), path);
        // The timeline tab exports as an image.
        QTemporaryDir dir;
        w.tabs()->setCurrentIndex(MainWindow::ResultsPageIndex);
        for (const char* name : {"timeline.png", "timeline.svg", "timeline.pdf"}) {
            const QString f = dir.filePath(QString::fromLatin1(name));
            QVERIFY2(res->exportChart(f), name);
            QVERIFY2(QFileInfo(f).size() > 500, name);
        }
    }
};

QTEST_MAIN(TestTimeline)
#include "tst_timeline.moc"
