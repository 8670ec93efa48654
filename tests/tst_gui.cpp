// tst_gui — the module tree model (checked by QAbstractItemModelTester) and the main window.
#include "models/background.h"
#include "models/format.h"
#include "models/job_tracker.h"
#include "models/module_tree_model.h"
#include "models/preview_models.h"
#include "widgets/advisor_page.h"
#include "widgets/calibrate_dialog.h"
#include "widgets/custom_style_dialog.h"
#include "widgets/dataflow_view.h"
#include "widgets/editor_pages.h"
#include "widgets/jobs_button.h"
#include "guitestutils.h"
#include "widgets/main_window.h"
#include "widgets/placeholder_view.h"
#include "widgets/results_page.h"
#include "widgets/shard_view.h"
#include "widgets/theme.h"
#include "widgets/verify_dialog.h"

#include "tp/cost/plan_search.h"
#include "tp/model/catalog.h"
#include "tp/model/loader.h"
#include "tp/plan/plan_io.h"
#include "tp/runtime/gpu.h"

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QLineEdit>
#include <QMimeData>
#include <QSignalSpy>
#include <QCheckBox>
#include <QComboBox>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTableView>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTimer>
#include <QTreeView>
#include <qcustomplot.h>
#include "testutils.h"

#include <QDialog>
#include <QLabel>
#include <QScrollBar>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextDocument>
#include <QToolButton>
#include <QMenu>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QProcess>
#include <QPushButton>
#include <QTableWidget>
#include <QStandardItemModel>
#include <QtTest>

#include <set>
#include <signal.h>

using namespace tpui;
using tptest::openAndPreview;
using tptest::openOn;
using tptest::settle;

namespace {
std::shared_ptr<const tp::ModelSpec> catalogSpec(const char* id)
{
    return std::make_shared<const tp::ModelSpec>(tptest::openSpec(id));
}

// A folder with the llama fixture's config.json and num_hidden_layers = `layers` (no weights).
QString layersFolder(const QTemporaryDir& dir, qint64 layers)
{
    QFile in(QStringLiteral(TP_SOURCE_DIR "/tests/fixtures/models/llama/config.json"));
    if (!in.open(QIODevice::ReadOnly))
        return {};
    QJsonObject config = QJsonDocument::fromJson(in.readAll()).object();
    config[QStringLiteral("num_hidden_layers")] = layers;
    const QString folder = dir.filePath(QStringLiteral("layers-%1").arg(layers));
    QDir().mkpath(folder);
    QFile out(folder + QStringLiteral("/config.json"));
    if (!out.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return {};
    out.write(QJsonDocument(config).toJson());
    return folder;
}

// Opens the example at T=2 and Run → Verify with Transformers… on it.
bool openVerifyDialog(MainWindow& w, VerifyDialog*& dialog)
{
    w.setShowErrorDialogs(false);
    if (!openAndPreview(w, QStringLiteral("example")))
        return false;
    w.tpBox()->setValue(2);
    w.verifyAction()->trigger();
    dialog = w.findChild<VerifyDialog*>();
    return dialog != nullptr;
}

// Opens `what` on `hardware`, shows the Advisor page and waits for its candidates.
bool openAdvisor(MainWindow& w, const QString& what, const QString& hardware)
{
    w.setShowErrorDialogs(false);
    PreviewSettings s = w.document()->settings();
    s.hardware = hardware;
    w.document()->setSettings(s);
    if (!openAndPreview(w, what))
        return false;
    QSignalSpy found(w.advisorPage(), &AdvisorPage::searchFinished);
    w.show();
    w.tabs()->setCurrentIndex(MainWindow::AdvisorPageIndex); // shown: the search starts by itself
    return found.wait(120000) && !w.advisorPage()->searching();
}

QString planStyle(const MainWindow& w, const std::string& key)
{
    for (const auto& e : w.document()->plan().entries)
        if (e.key == key)
            return QString::fromStdString(e.style);
    return {};
}
} // namespace

class TestGui : public QObject
{
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true); // settings and sessions go to a test location
        QCoreApplication::setOrganizationName(QStringLiteral("TP Studio Tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_gui"));
        qputenv("TPSTUDIO_CLI", TP_CLI_PATH);
        QVERIFY(m_dir.isValid());
        // Calibrated hardware profiles: none of this user's, only what the tests install.
        qputenv("TPSTUDIO_HARDWARE_DIR", m_dir.filePath(QStringLiteral("hardware")).toLocal8Bit());
        // Opening 20,000 layers takes long enough (a second or more, not microseconds) to be watched.
        m_big = layersFolder(m_dir, 20000);
        m_huge = layersFolder(m_dir, 100000);
        QVERIFY(!m_big.isEmpty() && !m_huge.isEmpty());
    }
    void cleanupTestCase()
    {
        // Opens and previews left running by closed windows end on their own; none is left behind.
        QVERIFY(waitForBackgroundTasks(240000));
    }

    void previewModelsAreValid_data()
    {
        QTest::addColumn<QString>("id");
        QTest::addColumn<int>("tp");
        QTest::addRow("llama-3.1-8b T=8") << "llama-3.1-8b" << 8;
        QTest::addRow("qwen3-30b-a3b T=8 (invalid)") << "qwen3-30b-a3b" << 8;
        QTest::addRow("deepseek-v3 T=4") << "deepseek-v3" << 4;
    }
    void previewModelsAreValid()
    {
        QFETCH(QString, id);
        QFETCH(int, tp);
        auto spec = catalogSpec(id.toLatin1().constData());
        PreviewSettings s;
        s.tpSize = tp;
        auto r = computePreview(spec, tp::defaultPlan(*spec, tp), s);
        ModuleTreeModel tree;
        PlanTableModel plan;
        CollectivesModel coll;
        MemoryModel mem;
        DiagnosticsModel diag;
        std::vector<std::unique_ptr<QAbstractItemModelTester>> testers;
        for (QAbstractItemModel* m : std::initializer_list<QAbstractItemModel*>{&tree, &plan, &coll, &mem, &diag})
            testers.push_back(std::make_unique<QAbstractItemModelTester>(m, QAbstractItemModelTester::FailureReportingMode::QtTest));
        tree.setSpec(spec);
        tree.setPreview(r);
        plan.setPreview(r);
        coll.setPreview(r);
        mem.setPreview(r);
        diag.setDiagnostics(r->graph.diagnostics);
        QCOMPARE(plan.rowCount(), int(spec->defaultTpPlan.size()));
        QCOMPARE(mem.rowCount(), tp);
        QCOMPARE(coll.rowCount(), int(r->graph.collectives.size()));
        QCOMPARE(diag.count(tp::Severity::Error) > 0, !r->graph.valid());
        // Every cell answers (the testers check the roles' types on the way).
        for (QAbstractItemModel* m : std::initializer_list<QAbstractItemModel*>{&plan, &coll, &mem, &diag})
            for (int row = 0; row < m->rowCount(); ++row)
                for (int c = 0; c < m->columnCount(); ++c)
                    (void)m->index(row, c).data();
        // The tree's style and key columns follow the plan.
        const QModelIndex down = tree.indexForPath(QStringLiteral("model.layers.0.mlp.down_proj"));
        if (id == QLatin1String("llama-3.1-8b")) {
            QCOMPARE(down.siblingAtColumn(ModuleTreeModel::StyleColumn).data().toString(), QStringLiteral("rowwise"));
            QCOMPARE(down.siblingAtColumn(ModuleTreeModel::KeyColumn).data().toString(), QStringLiteral("model.layers.*.mlp.down_proj"));
            const QModelIndex w = tree.indexForPath(QStringLiteral("model.layers.0.mlp.down_proj.weight"));
            QCOMPARE(w.siblingAtColumn(ModuleTreeModel::LocalShapeColumn).data().toString(), QStringLiteral("[4096, 1792]"));
        }
    }

    void treeModelIsValid_data()
    {
        QTest::addColumn<QString>("id");
        QTest::addRow("example") << "example";
        QTest::addRow("deepseek-v3") << "deepseek-v3";
        QTest::addRow("gemma (tied)") << "gemma-3-27b";
    }
    void treeModelIsValid()
    {
        QFETCH(QString, id);
        ModuleTreeModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        auto spec = catalogSpec(id.toLatin1().constData());
        model.setSpec(spec);
        QCOMPARE(model.rowCount(), 1);
        // Walk everything once; the tester checks every index on the way.
        int badParents = 0, groups = 0;
        std::function<int(const QModelIndex&)> walk = [&](const QModelIndex& parent) -> int {
            int n = 0;
            for (int r = 0; r < model.rowCount(parent); ++r) {
                const QModelIndex i = model.index(r, 0, parent);
                badParents += model.parent(i) != parent;
                const bool group = i.data(ModuleTreeModel::IsGroupRole).toBool();
                groups += group;
                n += (group ? 0 : 1) + walk(i);
            }
            return n;
        };
        std::size_t params = 0;
        for (const auto& m : spec->modules)
            params += m.params.size();
        // Every module and parameter once, folds of identical layers besides.
        QCOMPARE(std::size_t(walk({})), spec->modules.size() + params);
        QCOMPARE(badParents, 0);
        QVERIFY(groups > 0);
    }

    void pathsRoundTrip()
    {
        ModuleTreeModel model;
        model.setSpec(catalogSpec("qwen3-30b-a3b"));
        for (const char* p : {"", "model.layers.7.mlp.experts", "model.layers.7.mlp.experts.gate_up_proj", "lm_head.weight"}) {
            const QModelIndex i = model.indexForPath(QString::fromLatin1(p));
            QVERIFY2(i.isValid(), p);
            QCOMPARE(i.data(ModuleTreeModel::PathRole).toString(), QString::fromLatin1(p));
        }
        const QModelIndex fused = model.indexForPath(QStringLiteral("model.layers.7.mlp.experts.gate_up_proj"));
        QCOMPARE(fused.siblingAtColumn(ModuleTreeModel::ShapeColumn).data().toString(), QStringLiteral("[128, 1536, 2048]"));
        QCOMPARE(fused.siblingAtColumn(ModuleTreeModel::DTypeColumn).data().toString(), QStringLiteral("BF16"));
        QVERIFY(!model.indexForPath(QStringLiteral("model.nothing")).isValid());
        // The root's Params column sums the whole model.
        QCOMPARE(model.index(0, 0).siblingAtColumn(ModuleTreeModel::ParamsColumn).data(ModuleTreeModel::SortRole).toLongLong(),
                 qlonglong(30532122624));
    }

    void windowOpensExampleAndFilters()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.openModel(QStringLiteral("example"));
        QVERIFY(loaded.wait(10000));
        QVERIFY(w.spec());
        QCOMPARE(QString::fromStdString(w.spec()->className), QStringLiteral("LlamaForCausalLM"));
        QAbstractItemModel* view = w.treeView()->model();
        QCOMPARE(view->rowCount(), 1);
        w.filterEdit()->setText(QStringLiteral("layers.3.mlp.down_proj"));
        // Only the ancestors of the match stay: root → model → layers → 3 → mlp → down_proj.
        QModelIndex i = view->index(0, 0);
        QStringList chain;
        while (i.isValid()) {
            chain << i.data().toString();
            i = view->rowCount(i) ? view->index(0, 0, i) : QModelIndex();
        }
        QCOMPARE(chain, (QStringList{"LlamaForCausalLM", "model", "layers", "layers 0–7 ×8", "3", "mlp", "down_proj", "weight"}));
        QCOMPARE(view->rowCount(view->index(0, 0, view->index(0, 0))), 1);
    }

    // Issue 41: clearing the filter brings back the fold the user had, not every match still open.
    // Issue 41: the tree's Style column sits beside the module's name and in view at the window's
    // size on a 1280 × 800 screen, for a module as deep as a layer's mlp.down_proj.
    void styleColumnIsInView()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        w.resize(1280, 760);
        w.show();
        QVERIFY(openAndPreview(w, QStringLiteral("llama-3.1-70b")));
        QTreeView* v = w.treeView();
        QHeaderView* h = v->header();
        QCOMPARE(h->visualIndex(ModuleTreeModel::NameColumn), 0);
        QCOMPARE(h->visualIndex(ModuleTreeModel::StyleColumn), 1);
        w.selectPath(QStringLiteral("model.layers.0.mlp.down_proj"));
        for (int i = 0; i < 20; ++i)
            QCoreApplication::processEvents(); // the columns' fit
        const int right = h->sectionViewportPosition(ModuleTreeModel::StyleColumn) + h->sectionSize(ModuleTreeModel::StyleColumn);
        QVERIFY2(right <= v->viewport()->width(), qPrintable(QStringLiteral("Style ends at %1 of %2 px").arg(right).arg(v->viewport()->width())));
        const int need = v->fontMetrics().horizontalAdvance(QStringLiteral("colwise_gather_output"));
        QVERIFY2(h->sectionSize(ModuleTreeModel::StyleColumn) >= need, qPrintable(QString::number(h->sectionSize(ModuleTreeModel::StyleColumn))));
    }

    void clearingTheFilterRestoresTheFold()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        w.show();
        QVERIFY(openAndPreview(w, QStringLiteral("llama-3.1-70b")));
        QTreeView* v = w.treeView();
        QAbstractItemModel* m = v->model();
        v->collapseAll();
        const QModelIndex root = m->index(0, 0), model = m->index(0, 0, root);
        v->expand(root);
        v->expand(model);
        std::function<int(const QModelIndex&)> expandedUnder = [&](const QModelIndex& p) {
            int n = 0;
            for (int r = 0; r < m->rowCount(p); ++r)
                if (const QModelIndex i = m->index(r, 0, p); v->isExpanded(i))
                    n += 1 + expandedUnder(i);
            return n;
        };
        auto expandedRows = [&] { return expandedUnder({}); };
        QCOMPARE(expandedRows(), 2);
        w.filterEdit()->setText(QStringLiteral("o_proj"));
        for (int i = 0; i < 50; ++i)
            QCoreApplication::processEvents(); // the expander's slices
        QVERIFY(expandedRows() > 10);
        w.filterEdit()->clear();
        QCOMPARE(expandedRows(), 2);
        QVERIFY(v->isExpanded(m->index(0, 0, m->index(0, 0))));
    }

    // Issue 41: typing into the module filter, clearing it and expanding everything keep the window
    // responsive on the largest catalog model and on a 100,000-layer one. A 1 ms heartbeat timer
    // measures the event loop's longest gap (a stall) while each keystroke is delivered and its
    // queued work runs (before: 0.41 s on 405B, a hang of minutes on 100,000 layers; now ~20 ms each:
    // verdicts from a worker for large trees, the proxy's mappings dropped, the matches opened a slice
    // at a time, a fold of more than 256 layers left folded).
    void filterAndExpandKeepTheWindowResponsive_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<double>("boundMs");
        QTest::newRow("llama-3.1-405b") << QStringLiteral("llama-3.1-405b") << 50.0;
        QTest::newRow("100,000 layers") << QStringLiteral("100k") << 50.0;
    }
    void filterAndExpandKeepTheWindowResponsive()
    {
        QFETCH(QString, model);
        QFETCH(double, boundMs);
        QTemporaryDir dir;
        if (model == QLatin1String("100k")) {
            QFile in(QStringLiteral(TP_SOURCE_DIR "/tests/fixtures/models/llama/config.json"));
            QVERIFY(in.open(QIODevice::ReadOnly));
            QJsonObject c = QJsonDocument::fromJson(in.readAll()).object();
            c[QStringLiteral("num_hidden_layers")] = 100000;
            QFile out(dir.filePath(QStringLiteral("config.json")));
            QVERIFY(out.open(QIODevice::WriteOnly) && out.write(QJsonDocument(c).toJson()) > 0);
            out.close();
            model = dir.path();
        }
        MainWindow w;
        w.setShowErrorDialogs(false);
        w.show();
        QVERIFY(openAndPreview(w, model, 240000)); // 100,000 layers open and preview in ~10 s alone, longer beside other tests
        QElapsedTimer beat;
        double worst = 0;
        QString worstWhat;
        QTimer heart;
        heart.setInterval(1);
        QString doing;
        connect(&heart, &QTimer::timeout, [&] {
            const double gap = double(beat.nsecsElapsed()) / 1e6;
            if (gap > worst) {
                worst = gap;
                worstWhat = doing;
            }
            beat.restart();
        });
        auto drain = [&] { // lets the heartbeat and the queued work run for a while
            QElapsedTimer t;
            t.start();
            while (t.elapsed() < 100)
                QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
        };
        beat.start();
        heart.start();
        drain();
        worst = 0;
        for (const QChar c : QStringLiteral("o_proj")) {
            doing = QStringLiteral("typing '%1'").arg(c);
            QTimer::singleShot(0, w.filterEdit(), [&w, c] { QTest::keyClick(w.filterEdit(), c.toLatin1()); });
            drain();
        }
        QCOMPARE(w.filterEdit()->text(), QStringLiteral("o_proj"));
        QVERIFY(w.treeView()->isExpanded(w.treeView()->model()->index(0, 0)));
        doing = QStringLiteral("clearing");
        QTimer::singleShot(0, w.filterEdit(), [&w] { w.filterEdit()->clear(); });
        drain();
        doing = QStringLiteral("expand all");
        QTimer::singleShot(0, w.treeView(), [&w] {
            w.treeView()->setFocus();
            w.treeView()->setCurrentIndex(w.treeView()->model()->index(0, 0));
            QTest::keyClick(w.treeView(), Qt::Key_Asterisk);
        });
        for (int i = 0; i < 20; ++i)
            drain();
        // Expanded breadth-first down to the parameters' modules (or up to the cap on 100,000 layers).
        QAbstractItemModel* m = w.treeView()->model();
        QModelIndex deepest = m->index(0, 0);
        while (m->rowCount(deepest) && w.treeView()->isExpanded(deepest))
            deepest = m->index(m->rowCount(deepest) - 1, 0, deepest);
        QVERIFY2(!deepest.data(ModuleTreeModel::PathRole).toString().isEmpty(), "nothing expanded");
        qInfo("deepest expanded row: %s", qPrintable(deepest.data(ModuleTreeModel::PathRole).toString()));
        heart.stop();
        qInfo("longest stall: %.1f ms (%s)", worst, qPrintable(worstWhat));
        QVERIFY2(worst < boundMs, qPrintable(QStringLiteral("%1 ms while %2").arg(worst).arg(worstWhat)));
    }

    void diagnosticsSelectModules()
    {
        MainWindow w;
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.openModel(QStringLiteral(TP_SOURCE_DIR "/tests/fixtures/models/llama"));
        QVERIFY(loaded.wait(10000));
        w.openModel(QStringLiteral("deepseek-v3"));
        QVERIFY(loaded.wait(10000));
        // A plan error names a generic module; activating it selects its first instance.
        QVERIFY(settle(w));
        w.document()->setStyle(QStringLiteral("model.layers.*.mlp.experts"), QString()); // experts left unreduced
        QVERIFY(settle(w));
        QTableView* d = w.diagnosticsView();
        int row = -1;
        for (int r = 0; r < d->model()->rowCount(); ++r)
            if (d->model()->index(r, 0).data(DiagnosticsModel::WhereRole).toString() == QLatin1String("model.layers.*.mlp.experts"))
                row = r;
        QVERIFY(row >= 0);
        emit d->activated(d->model()->index(row, DiagnosticsModel::MessageColumn));
        QCOMPARE(w.treeView()->currentIndex().data(ModuleTreeModel::PathRole).toString(), QStringLiteral("model.layers.3.mlp.experts")); // layers 0-2 are dense
    }

    // Issue 41: q_proj made rowwise sets off two more errors; the list leads with the cause (bold, the
    // count of what follows), the others are dimmed and name it. Activating the cause while the filter
    // hides its module still selects it.
    void diagnosticsMarkTheirCause()
    {
        MainWindow w;
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.openModel(QStringLiteral("llama-3.1-8b"));
        QVERIFY(loaded.wait(10000));
        w.tpBox()->setValue(2);
        QVERIFY(settle(w));
        w.document()->setStyle(QStringLiteral("model.layers.*.self_attn.q_proj"), QStringLiteral("rowwise"));
        QVERIFY(settle(w));
        const QString cause = QStringLiteral("model.layers.*.self_attn.q_proj");
        QAbstractItemModel* m = w.diagnosticsView()->model();
        QVERIFY(m->rowCount() >= 3);
        QCOMPARE(m->index(0, 0).data(DiagnosticsModel::WhereRole).toString(), cause);
        QVERIFY(m->index(0, 0).data(DiagnosticsModel::FollowsRole).toString().isEmpty());
        QVERIFY(m->index(0, DiagnosticsModel::MessageColumn).data(Qt::FontRole).value<QFont>().bold());
        QVERIFY2(m->index(0, DiagnosticsModel::MessageColumn).data().toString().contains(QStringLiteral("2 more errors")),
                 qPrintable(m->index(0, DiagnosticsModel::MessageColumn).data().toString()));
        for (int r = 1; r < 3; ++r) {
            QCOMPARE(m->index(r, 0).data(DiagnosticsModel::FollowsRole).toString(), cause);
            QVERIFY(m->index(r, 0).data().toString().contains(QStringLiteral("follows")));
            QVERIFY(m->index(r, DiagnosticsModel::MessageColumn).data(Qt::ForegroundRole).isValid());
        }
        w.filterEdit()->setText(QStringLiteral("mlp.down_proj"));
        QVERIFY(!w.treeView()->model()->match(w.treeView()->model()->index(0, 0), ModuleTreeModel::PathRole,
                                              QStringLiteral("model.layers.0.self_attn.q_proj"), 1,
                                              Qt::MatchExactly | Qt::MatchRecursive)
                     .size());
        emit w.diagnosticsView()->activated(m->index(0, DiagnosticsModel::MessageColumn));
        QCOMPARE(w.treeView()->currentIndex().data(ModuleTreeModel::PathRole).toString(),
                 QStringLiteral("model.layers.0.self_attn.q_proj"));
    }

    void dropFolderOpensIt()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        QMimeData mime;
        mime.setUrls({QUrl::fromLocalFile(QStringLiteral(TP_SOURCE_DIR "/tests/fixtures/models/phi3"))});
        QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(&w, &enter);
        QVERIFY(enter.isAccepted());
        QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(&w, &drop);
        QVERIFY(loaded.wait(10000));
        QCOMPARE(QString::fromStdString(w.spec()->className), QStringLiteral("Phi3ForCausalLM"));
        QVERIFY(w.treeModel()->indexForPath(QStringLiteral("model.layers.1.self_attn.qkv_proj.weight")).isValid());
    }

    void undoRedoMergesRepeats()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openAndPreview(w, QStringLiteral("llama-3.1-8b")));
        PlanDocument* doc = w.document();
        QUndoStack* undo = doc->undoStack();
        const QString key = QStringLiteral("model.layers.*.mlp.down_proj");
        doc->setStyle(key, QStringLiteral("colwise"));
        doc->setStyle(key, QStringLiteral("rowwise_split_input"));
        doc->setStyle(key, QStringLiteral("replicate"));
        QCOMPARE(undo->count(), 1); // three edits of one key: one step
        QCOMPARE(planStyle(w, key.toStdString()), QStringLiteral("replicate"));
        doc->setStyle(QStringLiteral("lm_head"), QStringLiteral("colwise"));
        QCOMPARE(undo->count(), 2);
        undo->undo();
        QCOMPARE(planStyle(w, "lm_head"), QStringLiteral("colwise_gather_output"));
        undo->undo();
        QCOMPARE(planStyle(w, key.toStdString()), QStringLiteral("rowwise"));
        undo->redo();
        QCOMPARE(planStyle(w, key.toStdString()), QStringLiteral("replicate"));
        // Removing another key and undoing it restores it at its place.
        const auto before = doc->plan().entries;
        doc->setStyle(QStringLiteral("model.layers.*.mlp.up_proj"), QString());
        QVERIFY(planStyle(w, "model.layers.*.mlp.up_proj").isEmpty());
        undo->undo();
        QVERIFY(doc->plan().entries == before);
        // A removal right after edits of the same key merges with them: one undo restores the original.
        doc->setStyle(key, QString());
        undo->undo();
        QCOMPARE(planStyle(w, key.toStdString()), QStringLiteral("rowwise"));
        undo->redo();
        QVERIFY(planStyle(w, key.toStdString()).isEmpty());
        undo->undo();
        QVERIFY(settle(w));
        QCOMPARE(w.treeModel()->indexForPath(QStringLiteral("model.layers.5.mlp.down_proj")).siblingAtColumn(ModuleTreeModel::StyleColumn).data().toString(),
                 QStringLiteral("rowwise"));
    }

    void editThroughDelegateAndEveryLayer()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openAndPreview(w, QStringLiteral("llama-3.1-8b")));
        QVERIFY(settle(w));
        auto styleCell = [&](const char* path) {
            w.selectPath(QString::fromLatin1(path));
            return w.treeView()->currentIndex().siblingAtColumn(ModuleTreeModel::StyleColumn);
        };
        auto editWith = [&](const QModelIndex& cell, const QString& style) {
            QAbstractItemDelegate* del = w.treeView()->itemDelegateForColumn(ModuleTreeModel::StyleColumn);
            QStyleOptionViewItem opt;
            std::unique_ptr<QWidget> editor(del->createEditor(w.treeView()->viewport(), opt, cell));
            auto* combo = qobject_cast<QComboBox*>(editor.get());
            QVERIFY(combo);
            del->setEditorData(combo, cell);
            QCOMPARE(combo->currentText(), cell.data(Qt::EditRole).toString().isEmpty() ? QStringLiteral("(none)") : cell.data(Qt::EditRole).toString());
            combo->setCurrentText(style);
            del->setModelData(combo, const_cast<QAbstractItemModel*>(cell.model()), cell);
        };
        // Every layer: the wildcard key.
        editWith(styleCell("model.layers.3.self_attn.o_proj"), QStringLiteral("rowwise_split_input"));
        QCOMPARE(planStyle(w, "model.layers.*.self_attn.o_proj"), QStringLiteral("rowwise_split_input"));
        QVERIFY(settle(w));
        QVERIFY(!w.previews()->latest()->graph.valid()); // q/k/v colwise feed it sharded: split twice
        // One layer only: an indexed key for layer 3.
        w.everyLayerBox()->setChecked(false);
        editWith(styleCell("model.layers.3.mlp.up_proj"), QStringLiteral("colwise_gather_output"));
        QCOMPARE(planStyle(w, "model.layers.3.mlp.up_proj"), QStringLiteral("colwise_gather_output"));
        QVERIFY(planStyle(w, "model.layers.*.mlp.up_proj") == QStringLiteral("colwise"));
        // "(none)" removes the key.
        editWith(styleCell("model.layers.3.mlp.up_proj"), QStringLiteral("(none)"));
        QVERIFY(planStyle(w, "model.layers.3.mlp.up_proj").isEmpty());
        // The plan table edits keys directly.
        QAbstractItemModel* pm = w.planView()->model();
        int row = -1;
        for (int r = 0; r < pm->rowCount(); ++r)
            if (pm->index(r, PlanTableModel::KeyColumn).data().toString() == QLatin1String("model.layers.*.self_attn.o_proj"))
                row = r;
        QVERIFY(row >= 0);
        QVERIFY(pm->setData(pm->index(row, PlanTableModel::StyleColumn), QStringLiteral("rowwise")));
        QCOMPARE(planStyle(w, "model.layers.*.self_attn.o_proj"), QStringLiteral("rowwise"));
        QVERIFY(settle(w));
        QVERIFY(w.previews()->latest()->graph.valid());
    }

    void paletteDropAssignsStyle()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        w.resize(1400, 900);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY(openAndPreview(w, QStringLiteral("llama-3.1-8b")));
        w.selectPath(QStringLiteral("model.layers.0.mlp.gate_proj"));
        const QModelIndex idx = w.treeView()->currentIndex();
        QTRY_VERIFY(w.treeView()->visualRect(idx).isValid()); // after the view's delayed layout
        const QRect r = w.treeView()->visualRect(idx);
        QMimeData mime;
        mime.setData(QStringLiteral("application/x-tpstudio-style"), "colwise_gather_output");
        QDragEnterEvent enter(r.center(), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(w.treeView()->viewport(), &enter);
        QDropEvent drop(r.center(), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(w.treeView()->viewport(), &drop);
        QCOMPARE(planStyle(w, "model.layers.*.mlp.gate_proj"), QStringLiteral("colwise_gather_output"));
    }

    void tpChangeRefreshesEveryView()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openAndPreview(w, QStringLiteral("llama-3.1-70b")));
        for (int tp : {2, 4, 8}) {
            w.tpBox()->setValue(tp);
            QVERIFY(settle(w));
            auto p = w.previews()->latest();
            QCOMPARE(p->graph.tpSize, tp);
            QCOMPARE(w.memoryModel()->rowCount(), tp);
            QCOMPARE(w.collectivesModel()->rowCount(), 80 * 2 + 2);
            QVERIFY(p->cost.has_value());
            QVERIFY(w.lastApplyMs() > 0);
            qInfo("T=%d: preview %lld ms on the worker, %.2f ms on the GUI thread", tp, p->workerMs, w.lastApplyMs());
        }
        // T=3 breaks the heads: the diagnostics say so and the collectives are still listed.
        w.tpBox()->setValue(3);
        QVERIFY(settle(w));
        QVERIFY(w.diagnosticsModel()->count(tp::Severity::Error) > 0);
        // Views draw with real data.
        w.selectPath(QStringLiteral("model.layers.2.mlp.gate_proj.weight"));
        QCOMPARE(w.shardView()->parameter(), QStringLiteral("model.layers.2.mlp.gate_proj.weight"));
        QVERIFY(!w.shardView()->grab().isNull());
        QCOMPARE(w.dataflowView()->layer(), 2);
        QVERIFY(w.dataflowView()->sizeHint().height() > 400);
    }

    void importKeepsTheEpImplementation()
    {
        // A plan's ep_implementation (all-to-all dispatch) survives import and export: the editor has
        // no control for it, and loses nothing.
        QTemporaryDir dir;
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openAndPreview(w, QStringLiteral("mixtral-8x7b")));
        PlanDocument* doc = w.document();
        QVERIFY(doc->importPlan(QStringLiteral(TP_SOURCE_DIR "/plans/mixtral/expert-parallel-all-to-all.json")).ok());
        QCOMPARE(doc->plan().epImplementation, tp::EpImplementation::AllToAll);
        const QString json = dir.filePath(QStringLiteral("plan.json"));
        QVERIFY(doc->exportJson(json).ok());
        auto reread = tp::loadPlanFile(json.toStdString(), tp::VersionProfile::G3);
        QVERIFY2(reread.ok(), reread.status().message().c_str());
        QCOMPARE(reread->epImplementation, tp::EpImplementation::AllToAll);
    }

    void importExportAndSession()
    {
        QTemporaryDir dir;
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openAndPreview(w, QStringLiteral("example")));
        PlanDocument* doc = w.document();
        // Import a plan with custom styles: one undoable step.
        const int before = doc->undoStack()->count();
        QVERIFY(doc->importPlan(QStringLiteral(TP_SOURCE_DIR "/tests/fixtures/plans/custom-styles.json")).ok());
        QCOMPARE(doc->undoStack()->count(), before + 1);
        QCOMPARE(planStyle(w, "lm_head"), QStringLiteral("vocab_gather"));
        QCOMPARE(int(doc->plan().customStyles.size()), 2);
        QCOMPARE(doc->settings().tpSize, 2);
        // Export: JSON and Python.
        const QString json = dir.filePath(QStringLiteral("plan.json")), py = dir.filePath(QStringLiteral("plan.py"));
        QVERIFY(doc->exportJson(json).ok());
        QVERIFY(doc->exportPython(py).ok());
        QFile pf(py);
        QVERIFY(pf.open(QIODevice::ReadOnly));
        const QByteArray script = pf.readAll();
        QVERIFY(script.contains("ALL_PARALLEL_STYLES.register("));
        QVERIFY(script.contains("Written by the TP Studio GUI (File > Export Plan).")); // not by the CLI
        auto reread = tp::loadPlanFile(json.toStdString(), tp::VersionProfile::G3);
        QVERIFY(reread.ok());
        QCOMPARE(int(reread->customStyles.size()), 2);
        // A bad file names itself and changes nothing.
        QFile bad(dir.filePath(QStringLiteral("bad.json")));
        QVERIFY(bad.open(QIODevice::WriteOnly));
        bad.write("{\"tp_plan\": {\"lm_head\": 3}}");
        bad.close();
        const auto st = doc->importPlan(bad.fileName());
        QVERIFY(!st.ok());
        QVERIFY(QString::fromStdString(st.message()).contains(QStringLiteral("bad.json")));
        QCOMPARE(planStyle(w, "lm_head"), QStringLiteral("vocab_gather"));
        // Session round trip into a fresh window.
        w.tpBox()->setValue(4);
        const QString session = dir.filePath(QStringLiteral("s.tpsession"));
        QVERIFY(w.saveSession(session));
        MainWindow w2;
        w2.setShowErrorDialogs(false);
        QSignalSpy loaded(&w2, &MainWindow::modelLoaded);
        w2.openSession(session);
        QVERIFY(loaded.wait(30000));
        QCOMPARE(w2.document()->settings().tpSize, 4);
        QCOMPARE(planStyle(w2, "lm_head"), QStringLiteral("vocab_gather"));
        QCOMPARE(int(w2.document()->plan().customStyles.size()), 2);
    }

    void customStyleDialogShowsRegistration()
    {
        CustomStyleDialog dlg;
        dlg.setSpec({"qkv_gather", "colwise", tp::Layout::Replicate, tp::Layout::Replicate});
        QVERIFY(dlg.style().ok());
        QCOMPARE(dlg.style()->forward, tp::CollectiveKind::AllGather);
        QVERIFY(dlg.registrationText().contains(
            QStringLiteral("ALL_PARALLEL_STYLES.register(\"qkv_gather\", ColwiseParallel(input_layouts=Replicate(), output_layouts=Replicate()))")));
        dlg.setSpec({"colwise", "colwise", tp::Layout::Replicate, tp::Layout::Replicate}); // a built-in name
        QVERIFY(!dlg.style().ok());
    }

    void fullRunFromRunPage()
    {
        QTemporaryDir dir;
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openAndPreview(w, QStringLiteral(TP_SOURCE_DIR "/tests/fixtures/models/llama")));
        RunPage* run = w.runPage();
        run->tpSizes()->setText(QStringLiteral("1,2"));
        run->seqBox()->setValue(8);
        run->decodeBox()->setValue(4);
        QSignalSpy done(run, &RunPage::runFinished);
        QSignalSpy failed(run, &RunPage::runFailed);
        run->start();
        QVERIFY(run->running());
        QVERIFY2(done.wait(120000), qPrintable(run->log()->toPlainText()));
        QCOMPARE(failed.count(), 0);
        ResultsPage* res = w.resultsPage();
        QVERIFY(res->run());
        QCOMPARE(res->run()->record.runs.size(), std::size_t(2));
        QCOMPARE(w.tabs()->currentIndex(), int(MainWindow::ResultsPageIndex));
        QVERIFY(res->itemCount(0) > 0); // per-layer bars
        QVERIFY(res->itemCount(1) > 0); // speedup points
        // TTFT and ITL measured at T = 1, 2 (and predicted beside them when the preview has a profile).
        QVERIFY(res->itemCount(2) >= 4);
        const int prefillSpans = res->itemCount(3);
        QVERIFY(prefillSpans > 2 * 10); // timeline spans
        // The decode step: its own per-layer bars and timeline, the same ops as a prefill forward.
        QVERIFY(res->phaseBox()->isEnabled());
        res->phaseBox()->setCurrentIndex(1);
        QVERIFY(res->itemCount(0) > 0);
        QCOMPARE(res->itemCount(3), prefillSpans);
        QVERIFY(res->infoText().contains(QStringLiteral("+ 4 decode steps")));
        QVERIFY(run->log()->toPlainText().contains(QStringLiteral("T=2 decode: TTFT")));
        res->phaseBox()->setCurrentIndex(0);
        // Baseline, then a second run compared against it.
        res->setBaseline(res->run());
        QVERIFY(res->itemCount(4) > 0);
        // Charts and records export.
        for (const char* name : {"chart.png", "chart.svg", "chart.pdf"}) {
            res->tabs()->setCurrentIndex(0);
            const QString f = dir.filePath(QString::fromLatin1(name));
            QVERIFY2(res->exportChart(f), name);
            QVERIFY(QFileInfo(f).size() > 500);
        }
        for (const auto& [name, kind] : {std::pair{"run.json", "json"}, std::pair{"spans.csv", "csv"}, std::pair{"run.trace.json", "trace"}}) {
            const QString f = dir.filePath(QString::fromLatin1(name));
            QVERIFY(res->exportRecord(f, QString::fromLatin1(kind)));
            QVERIFY(QFileInfo(f).size() > 100);
        }
        // Collective benchmark curves from a child bench comm, per communicator.
        QSignalSpy bench(res, &ResultsPage::benchmarkFinished);
        res->runBenchmark(QStringLiteral("local"));
        QVERIFY(bench.wait(120000));
        const int localPoints = res->itemCount(5);
        QVERIFY(localPoints > 20);
#if !defined(__SANITIZE_ADDRESS__) // under ASan, OpenMPI's own leaks fail the child (see mpi_run)
        if (!QStandardPaths::findExecutable(QStringLiteral("mpirun")).isEmpty()) {
            res->runBenchmark(QStringLiteral("mpi"));
            QVERIFY(bench.wait(120000));
            QVERIFY(res->itemCount(5) >= 2 * localPoints); // the MPI curves join the local ones
        }
#endif
    }

    void runPageBackendsDtypesAndEmulation()
    {
        // The devices the child lists; CUDA selectable only with a GPU; an emulated bf16 run passes
        // --emulate-tp, the dtype and the toolbar's hardware profile, and its results say emulated.
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openAndPreview(w, QStringLiteral("example")));
        RunPage* run = w.runPage();
        QTRY_VERIFY_WITH_TIMEOUT(run->devicesLabel()->text().startsWith(QStringLiteral("CPU: ")), 30000);
        const bool gpu = tp::gpu::probe().ok();
        auto* model = qobject_cast<QStandardItemModel*>(run->backendBox()->model());
        QCOMPARE(model->item(1)->isEnabled(), gpu);
        QVERIFY(gpu || run->devicesLabel()->text().contains(QStringLiteral("CUDA: ")));
        run->backendBox()->setCurrentIndex(1);
        QCOMPARE(run->dtypeBox()->currentData().toString(), QStringLiteral("bf16")); // GPU runs default to bf16
        run->backendBox()->setCurrentIndex(0);
        QCOMPARE(run->dtypeBox()->currentData().toString(), QStringLiteral("f32"));
        run->dtypeBox()->setCurrentIndex(1);
        run->emulateBox()->setChecked(true);
        run->tpSizes()->setText(QStringLiteral("1,4"));
        run->seqBox()->setValue(8);
        const QStringList args = run->arguments(QStringLiteral("plan.json"), QStringLiteral("/tmp"));
        QVERIFY(args.contains(QStringLiteral("--emulate-tp")) && !args.contains(QStringLiteral("--tp")));
        QCOMPARE(args.at(args.indexOf(QStringLiteral("--dtype")) + 1), QStringLiteral("bf16"));
        QCOMPARE(args.at(args.indexOf(QStringLiteral("--hardware")) + 1), w.document()->settings().hardware);
        QSignalSpy done(run, &RunPage::runFinished);
        run->start();
        QVERIFY2(done.wait(120000), qPrintable(run->log()->toPlainText()));
        const tp::RunSettings& settings = w.resultsPage()->run()->record.settings;
        QCOMPARE(settings.emulated, true);
        QCOMPARE(settings.dtype, std::string("bf16"));
        QVERIFY(run->log()->toPlainText().contains(QStringLiteral("emulated: communication modelled")));
        QVERIFY(w.resultsPage()->infoText().contains(QStringLiteral("EMULATED")));
    }

    // A window destroyed while its run goes on (the GUI closed, or interrupted: SIGTERM quits the
    // event loop) stops the child and hears nothing more from it: its finished() once reached the
    // half-destroyed window and crashed it.
    void windowDestroyedDuringARunStopsIt()
    {
        auto w = std::make_unique<MainWindow>();
        w->setShowErrorDialogs(false);
        QVERIFY(openAndPreview(*w, QStringLiteral("example")));
        RunPage* run = w->runPage();
        run->tpSizes()->setText(QStringLiteral("1,2"));
        run->seqBox()->setValue(64);
        run->decodeBox()->setValue(4096);
        run->start();
        QVERIFY(run->running());
        QProcess* proc = nullptr;
        for (auto* p : run->findChildren<QProcess*>())
            if (p->arguments().value(0) == QLatin1String("run"))
                proc = p;
        QVERIFY(proc);
        QTRY_VERIFY_WITH_TIMEOUT(proc->processId() > 0, 10000);
        const qint64 pid = proc->processId();
        QTest::qWait(500);
        w.reset(); // no crash
        QVERIFY(::kill(pid_t(pid), 0) != 0); // the child is gone (reaped)
    }

    void crashedOrCancelledChildLosesNothing()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openAndPreview(w, QStringLiteral("example")));
        const auto entries = w.document()->plan().entries;
        RunPage* run = w.runPage();
        // A first run that succeeds: its results must survive the failures below.
        run->tpSizes()->setText(QStringLiteral("1"));
        run->seqBox()->setValue(4);
        QSignalSpy done(run, &RunPage::runFinished);
        run->start();
        QVERIFY(done.wait(60000));
        const auto earlier = w.resultsPage()->run();
        QVERIFY(earlier);
        // Cancel a long run.
        run->tpSizes()->setText(QStringLiteral("1"));
        run->seqBox()->setValue(2048);
        QSignalSpy failed(run, &RunPage::runFailed);
        run->start();
        QCOMPARE(run->progressBar()->maximum(), 0); // busy while the weights load: no 0% standing still
        QTest::qWait(300);
        run->cancel();
        QVERIFY(failed.count() > 0 || failed.wait(30000));
        QVERIFY(failed.last().first().toString().contains(QStringLiteral("cancelled")));
        QCOMPARE(run->progressBar()->value(), 0); // not left part way
        QVERIFY(run->progressBar()->maximum() > 0);
        // A child that dies without a record is reported; the plan is untouched.
        qputenv("TPSTUDIO_CLI", "/bin/false");
        run->start();
        QVERIFY(failed.wait(30000));
        qputenv("TPSTUDIO_CLI", TP_CLI_PATH);
        QVERIFY(failed.last().first().toString().contains(QStringLiteral("exited with code 1")));
        // A plan invalid at the run's T (8 heads over 3 ranks): the engine's error is logged once.
        run->tpSizes()->setText(QStringLiteral("3"));
        run->seqBox()->setValue(4);
        run->start();
        QVERIFY(failed.wait(30000));
        QVERIFY(failed.last().first().toString().contains(QStringLiteral("the plan has errors at tp_size 3")));
        QCOMPARE(run->log()->toPlainText().count(QStringLiteral("the plan has errors at tp_size 3")), 1);
        QVERIFY(w.document()->plan().entries == entries);
        QVERIFY(w.spec());
        QCOMPARE(w.resultsPage()->run(), earlier); // earlier results intact
    }

    // Opening runs off the GUI thread: the event loop turns while the model opens, the window shows
    // that it is opening, and Cancel returns it to what it showed before (nothing, or a model).
    void openingKeepsEventLoopAndCancels_data()
    {
        QTest::addColumn<QString>("before");
        QTest::addRow("empty window") << QString();
        QTest::addRow("a model shown") << QStringLiteral("example");
    }
    void openingKeepsEventLoopAndCancels()
    {
        QFETCH(QString, before);
        MainWindow w;
        w.setShowErrorDialogs(false);
        if (!before.isEmpty())
            QVERIFY(openAndPreview(w, before));
        const QString statusBefore = w.statusText();
        const std::string sourceBefore = w.spec() ? w.spec()->source : std::string();
        QSignalSpy loaded(&w, &MainWindow::modelLoaded), failed(&w, &MainWindow::loadFailed),
            cancelled(&w, &MainWindow::loadCancelled);
        QVERIFY(!w.cancelOpenAction()->isEnabled());
        w.openModel(m_big);
        QVERIFY(w.isOpening());
        QCOMPARE(w.openingSource(), m_big);
        QVERIFY(w.cancelOpenAction()->isEnabled());
        QVERIFY(w.statusText().startsWith(QStringLiteral("Opening ")));
        // A timer keeps firing while the worker opens the model.
        int ticks = 0;
        QTimer timer;
        connect(&timer, &QTimer::timeout, &w, [&] { ticks += w.isOpening() && MainWindow::opensRunning() > 0; });
        timer.start(0);
        QTRY_VERIFY_WITH_TIMEOUT(ticks >= 5 || !w.isOpening(), 60000);
        QVERIFY2(w.isOpening(), "20,000 layers opened within five turns of the event loop");
        timer.stop();
        w.cancelOpenAction()->trigger();
        QVERIFY(!w.isOpening());
        QCOMPARE(cancelled.count(), 1);
        QCOMPARE(cancelled.first().first().toString(), m_big);
        QVERIFY(!w.cancelOpenAction()->isEnabled());
        QCOMPARE(w.statusText(), statusBefore);
        // The abandoned open's result, when it comes, is dropped.
        QVERIFY(waitForBackgroundTasks(240000));
        QCoreApplication::processEvents();
        QTest::qWait(50);
        QCOMPARE(loaded.count(), 0);
        QCOMPARE(failed.count(), 0);
        QCOMPARE(w.spec() ? w.spec()->source : std::string(), sourceBefore);
        QCOMPARE(w.statusText(), statusBefore);
    }

    // A second open while the first still runs does not wait for it: the window ends with the second.
    void secondOpenSupersedesFirst_data()
    {
        QTest::addColumn<QString>("second");
        QTest::addColumn<QString>("className");
        QTest::addRow("catalog id") << QStringLiteral("example") << QStringLiteral("LlamaForCausalLM");
        QTest::addRow("fixture folder") << QStringLiteral(TP_SOURCE_DIR "/tests/fixtures/models/phi3") << QStringLiteral("Phi3ForCausalLM");
    }
    void secondOpenSupersedesFirst()
    {
        QFETCH(QString, second);
        QFETCH(QString, className);
        MainWindow w;
        w.setShowErrorDialogs(false);
        QSignalSpy loaded(&w, &MainWindow::modelLoaded), failed(&w, &MainWindow::loadFailed);
        w.openModel(m_huge);
        QTRY_COMPARE_WITH_TIMEOUT(MainWindow::opensRunning(), 1, 60000); // the engine is at work on it
        w.openModel(second);
        // The second call returned without waiting: the first (seconds of work) still runs.
        QVERIFY2(MainWindow::opensRunning() >= 1, "openModel waited for the open in progress");
        QCOMPARE(w.openingSource(), second);
        QVERIFY(loaded.wait(60000));
        QCOMPARE(loaded.first().first().toString(), second);
        QCOMPARE(QString::fromStdString(w.spec()->className), className);
        QVERIFY(!w.isOpening());
        // The first open still finishes on its worker; its model never reaches the window.
        QVERIFY(waitForBackgroundTasks(240000));
        QCoreApplication::processEvents();
        QTest::qWait(50);
        QCOMPARE(loaded.count(), 1);
        QCOMPARE(failed.count(), 0);
        QCOMPARE(QString::fromStdString(w.spec()->className), className);
        QVERIFY(w.spec()->config.numLayers < 100);
    }

    // A session's plan belongs to the session's model: a plain open that supersedes it opens with its
    // own default plan.
    void supersededSessionIsNotApplied()
    {
        QTemporaryDir dir;
        const QString key = QStringLiteral("model.layers.*.mlp.down_proj");
        QString session = dir.filePath(QStringLiteral("big.tpsession"));
        {
            MainWindow w;
            w.setShowErrorDialogs(false);
            QVERIFY(openAndPreview(w, QStringLiteral("example")));
            w.document()->setStyle(key, QStringLiteral("replicate"));
            QVERIFY(w.saveSession(session));
        }
        QFile f(session);
        QVERIFY(f.open(QIODevice::ReadWrite));
        QJsonObject o = QJsonDocument::fromJson(f.readAll()).object();
        o[QStringLiteral("model")] = m_big;
        f.resize(0);
        f.write(QJsonDocument(o).toJson());
        f.close();
        MainWindow w;
        w.setShowErrorDialogs(false);
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.openSession(session);
        QVERIFY(w.isOpening());
        w.openModel(QStringLiteral("example"));
        QVERIFY(loaded.wait(60000));
        QCOMPARE(planStyle(w, key.toStdString()), QStringLiteral("rowwise")); // the class default, not the session's
        QVERIFY(waitForBackgroundTasks(240000));
        QCoreApplication::processEvents();
        QCOMPARE(loaded.count(), 1);
        QCOMPARE(planStyle(w, key.toStdString()), QStringLiteral("rowwise"));
    }

    // Closing a window while it opens a model does not wait for the open; the worker finishes alone.
    void closingWhileOpeningDoesNotWait()
    {
        auto* w = new MainWindow;
        w->setShowErrorDialogs(false);
        w->openModel(m_huge);
        QVERIFY(w->isOpening());
        QTRY_COMPARE_WITH_TIMEOUT(MainWindow::opensRunning(), 1, 60000); // the engine is at work on it
        delete w;
        QVERIFY2(MainWindow::opensRunning() == 1, "the window's destructor waited for the open");
        QVERIFY(waitForBackgroundTasks(240000));
    }

    // The tree of a 100,000-layer model is computed from the spec: rows, parents and paths of the
    // last layer answer without a search of the layer list.
    void treeModelOfManyLayers()
    {
        auto om = tp::openModel(m_huge.toStdString());
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        auto spec = std::make_shared<const tp::ModelSpec>(std::move(om->spec));
        ModuleTreeModel model;
        model.setSpec(spec);
        const QModelIndex layers = model.indexForPath(QStringLiteral("model.layers"));
        QVERIFY(layers.isValid());
        QCOMPARE(model.rowCount(layers), 1); // 100,000 identical layers fold into one row
        const QModelIndex fold = model.index(0, 0, layers);
        QCOMPARE(fold.data().toString(), QStringLiteral("layers 0–99999 ×100000"));
        QCOMPARE(model.rowCount(fold), 100000);
        const QModelIndex last = model.index(99999, 0, fold);
        QCOMPARE(last.data(ModuleTreeModel::PathRole).toString(), QStringLiteral("model.layers.99999"));
        QCOMPARE(model.parent(last), fold);
        QCOMPARE(model.parent(fold), layers);
        const QModelIndex w = model.indexForPath(QStringLiteral("model.layers.99999.mlp.down_proj.weight"));
        QVERIFY(w.isValid());
        QModelIndex up = w;
        for (int i = 0; i < 3; ++i)
            up = model.parent(up);
        QCOMPARE(up, last);
        QCOMPARE(model.indexForPath(QStringLiteral("model.layers.99999")), last);
    }

    // Identical layers fold into one row per run of equal structure; the fold expands to its layers
    // and sums them; a path inside still selects its module.
    void identicalLayersFold_data()
    {
        QTest::addColumn<QString>("id");
        QTest::addColumn<QStringList>("folds");
        QTest::addColumn<QList<int>>("members");
        QTest::addRow("example") << "example" << QStringList{"layers 0–7 ×8"} << QList<int>{8};
        QTest::addRow("deepseek-v3: dense 0-2, MoE 3-60") << "deepseek-v3" << QStringList{"layers 0–2 ×3", "layers 3–60 ×58"}
                                                         << QList<int>{3, 58};
    }
    void identicalLayersFold()
    {
        QFETCH(QString, id);
        QFETCH(QStringList, folds);
        QFETCH(QList<int>, members);
        auto spec = catalogSpec(id.toLatin1().constData());
        ModuleTreeModel model;
        model.setSpec(spec);
        const QModelIndex layers = model.indexForPath(QStringLiteral("model.layers"));
        QCOMPARE(model.rowCount(layers), int(folds.size()));
        qlonglong sum = 0;
        for (int r = 0; r < int(folds.size()); ++r) {
            const QModelIndex fold = model.index(r, 0, layers);
            QVERIFY(fold.data(ModuleTreeModel::IsGroupRole).toBool());
            QCOMPARE(fold.data().toString(), folds[r]);
            QCOMPARE(model.rowCount(fold), members[r]);
            QCOMPARE(fold.data(ModuleTreeModel::PathRole).toString(), QStringLiteral("model.layers.*"));
            QVERIFY(!(model.flags(fold.siblingAtColumn(ModuleTreeModel::StyleColumn)) & Qt::ItemIsEditable));
            sum += fold.siblingAtColumn(ModuleTreeModel::ParamsColumn).data(ModuleTreeModel::SortRole).toLongLong();
        }
        QCOMPARE(sum, layers.siblingAtColumn(ModuleTreeModel::ParamsColumn).data(ModuleTreeModel::SortRole).toLongLong());
        const QModelIndex five = model.indexForPath(QStringLiteral("model.layers.5"));
        QVERIFY(model.parent(five).data(ModuleTreeModel::IsGroupRole).toBool());
        QCOMPARE(model.parent(model.parent(five)), layers);

        MainWindow w;
        QVERIFY(openAndPreview(w, id));
        w.selectPath(QStringLiteral("model.layers.5.self_attn"));
        QCOMPARE(w.treeView()->currentIndex().data(ModuleTreeModel::PathRole).toString(), QStringLiteral("model.layers.5.self_attn"));
    }

    // Add Key takes keys that name something of the model, generic or indexed, and refuses the rest.
    void addKeyChecksTheModel()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openAndPreview(w, QStringLiteral("example")));
        const auto before = w.document()->plan().entries;
        for (const char* bad : {"model.layers.*.mlp:act", "model.layers.*.mlp.gate", "hello world", "model.layers.99.mlp.up_proj"})
            QVERIFY2(w.planPage()->addKey(QString::fromLatin1(bad)).contains(QStringLiteral("names no module or parameter")), bad);
        QVERIFY(w.document()->plan().entries == before);
        QVERIFY(w.planPage()->addKey(QStringLiteral("model.layers.*.input_layernorm")).isEmpty());
        QVERIFY(w.planPage()->addKey(QStringLiteral("model.layers.3.mlp.up_proj.weight")).isEmpty());
        QCOMPARE(planStyle(w, "model.layers.*.input_layernorm"), QStringLiteral("replicate"));
        QCOMPARE(w.document()->plan().entries.size(), before.size() + 2);
    }

    // Background work is listed while it runs and can be stopped from the list.
    void jobTrackerListsBackgroundWork()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        w.show();
        QVERIFY(w.jobs()->jobs().empty());
        QVERIFY(!w.jobsButton()->isVisible());
        QSignalSpy cancelled(&w, &MainWindow::loadCancelled);
        w.openModel(m_big);
        QCOMPARE(int(w.jobs()->jobs().size()), 1);
        QVERIFY(w.jobs()->jobs().front().title.startsWith(QStringLiteral("Opening ")));
        QVERIFY(w.jobsButton()->isVisible());
        QVERIFY(w.jobs()->cancel(w.jobs()->jobs().front().id));
        QCOMPARE(cancelled.count(), 1);
        QVERIFY(w.jobs()->jobs().empty());
        QVERIFY(!w.jobsButton()->isVisible());
        // An advisor search is listed until its result shows.
        QVERIFY(openAndPreview(w, QStringLiteral("example")));
        QVERIFY(w.jobs()->jobs().empty());
        QSignalSpy found(w.advisorPage(), &AdvisorPage::searchFinished);
        QSignalSpy listed(w.jobs(), &JobTracker::changed);
        w.tabs()->setCurrentIndex(MainWindow::AdvisorPageIndex);
        QVERIFY(found.wait(120000));
        QVERIFY(listed.count() >= 2); // listed, then gone
        QVERIFY(w.jobs()->jobs().empty());
        // A run is listed, and Stop in the list cancels it.
        w.runPage()->tpSizes()->setText(QStringLiteral("1"));
        w.runPage()->seqBox()->setValue(2048);
        QSignalSpy failed(w.runPage(), &RunPage::runFailed);
        w.runPage()->start();
        QCOMPARE(int(w.jobs()->jobs().size()), 1);
        QCOMPARE(w.jobs()->jobs().front().title, QStringLiteral("Running the plan"));
        QVERIFY(w.jobs()->cancel(w.jobs()->jobs().front().id));
        QVERIFY(failed.count() > 0 || failed.wait(30000));
        QVERIFY(failed.last().first().toString().contains(QStringLiteral("cancelled")));
        QVERIFY(w.jobs()->jobs().empty());
    }

    // Every table and the tree say why they are empty.
    void emptyViewsSayWhy()
    {
        MainWindow w;
        auto* tree = dynamic_cast<PlaceholderTree*>(w.treeView());
        QVERIFY(tree);
        QVERIFY(tree->showsPlaceholder());
        QVERIFY(tree->placeholderText().contains(QStringLiteral("No model open")));
        for (QTableView* v : {w.planView(), w.diagnosticsView()}) {
            auto* t = dynamic_cast<PlaceholderTable*>(v);
            QVERIFY(t);
            QVERIFY(!t->placeholderText().isEmpty());
            QVERIFY(t->showsPlaceholder());
        }
        QVERIFY(openAndPreview(w, QStringLiteral("example")));
        QVERIFY(!tree->showsPlaceholder());
        // A filter that matches nothing says so, not "No model open" (issue 41, item 7).
        w.filterEdit()->setText(QStringLiteral("no_such_module"));
        QVERIFY(tree->showsPlaceholder());
        QVERIFY2(tree->placeholderText().contains(QStringLiteral("No module or parameter path contains “no_such_module”")),
                 qPrintable(tree->placeholderText()));
        w.filterEdit()->clear();
        QVERIFY(!tree->showsPlaceholder());
        QVERIFY(!dynamic_cast<PlaceholderTable*>(w.planView())->showsPlaceholder());
        // The example's default plan at T=2 on 8×H100 has nothing to report.
        QCOMPARE(w.diagnosticsModel()->rowCount(), 0);
        QVERIFY(dynamic_cast<PlaceholderTable*>(w.diagnosticsView())->showsPlaceholder());
        // Painting it draws the text (the grab differs from an empty table's).
        w.show();
        w.tabs()->setCurrentIndex(MainWindow::DiagnosticsPage);
        const QImage with = w.diagnosticsView()->viewport()->grab().toImage();
        dynamic_cast<PlaceholderTable*>(w.diagnosticsView())->setPlaceholderText({});
        const QImage without = w.diagnosticsView()->viewport()->grab().toImage();
        QVERIFY(with != without);
    }

    // View → Theme switches the whole application, charts included, and back.
    void darkModeFollowsTheMenu()
    {
        MainWindow w;
        QVERIFY(openAndPreview(w, QStringLiteral("example")));
        w.show();
        QCOMPARE(w.themeActions().size(), 3);
        auto* plot = w.advisorPage()->findChild<QCustomPlot*>();
        QVERIFY(plot);
        const auto trigger = [&](const QString& name) {
            for (QAction* a : w.themeActions())
                if (a->data().toString() == name)
                    a->trigger();
            QCoreApplication::processEvents();
        };
        trigger(QStringLiteral("dark"));
        QCOMPARE(currentTheme(), Theme::Dark);
        QVERIFY(isDark(QApplication::palette()));
        QVERIFY(isDark(w.treeView()->palette()));
        QCOMPARE(plot->toPixmap(200, 120).toImage().pixelColor(2, 2), plot->palette().color(QPalette::Base));
        QVERIFY(plot->toPixmap(200, 120).toImage().pixelColor(2, 2).lightness() < 80);
        QVERIFY(plot->xAxis->tickLabelColor().lightness() > 160);
        // Issue 41: the hardware box (a style-sheeted combo) turns dark with the rest, not white.
        QCoreApplication::processEvents();
        const QImage hw = w.hardwareBox()->grab().toImage();
        QVERIFY2(hw.pixelColor(hw.width() / 2, hw.height() - 4).lightness() < 110,
                 qPrintable(hw.pixelColor(hw.width() / 2, hw.height() - 4).name()));
        trigger(QStringLiteral("light"));
        QVERIFY(!isDark(QApplication::palette()));
        QVERIFY(plot->toPixmap(200, 120).toImage().pixelColor(2, 2).lightness() > 200);
        QVERIFY(plot->xAxis->tickLabelColor().lightness() < 100);
        trigger(QStringLiteral("system"));
        QCOMPARE(currentTheme(), Theme::System);
    }

    // Pages switch from the keyboard wherever the focus is (the tree too); Help opens the guide; the
    // toolbar's icons differ and it lists the catalog.
    void navigationAndHelp()
    {
        MainWindow w;
        QVERIFY(openAndPreview(w, QStringLiteral("example")));
        w.show();
        QVERIFY(QTest::qWaitForWindowActive(&w));
        w.treeView()->setFocus();
        QCOMPARE(w.pageActions().size(), w.tabs()->count());
        QTest::keyClick(w.treeView(), Qt::Key_3, Qt::ControlModifier);
        QCOMPARE(w.tabs()->currentIndex(), int(MainWindow::ShardsPage));
        QTest::keyClick(w.treeView(), Qt::Key_Tab, Qt::ControlModifier);
        QCOMPARE(w.tabs()->currentIndex(), int(MainWindow::DataflowPage));
        QTest::keyClick(w.treeView(), Qt::Key_PageUp, Qt::ControlModifier);
        QCOMPARE(w.tabs()->currentIndex(), int(MainWindow::ShardsPage));
        QTest::keyClick(w.treeView(), Qt::Key_9, Qt::ControlModifier);
        QCOMPARE(w.tabs()->currentIndex(), int(MainWindow::AdvisorPageIndex));

        QVERIFY(QFileInfo::exists(MainWindow::userGuidePath()));
        w.guideAction()->trigger();
        auto* guide = w.findChild<QDialog*>(QStringLiteral("userGuide"));
        QVERIFY(guide);
        auto* text = guide->findChild<QTextBrowser*>();
        QVERIFY(text);
        QVERIFY(text->toPlainText().contains(QStringLiteral("TP Studio user guide")));
        QVERIFY(text->toPlainText().contains(QStringLiteral("Advisor")));
        // Issue 41: its screenshots fit the page's width (they were 1440 px in a 900 px dialog, cut at
        // the right edge), at the dialog's size and after a resize.
        for (const int width : {900, 640}) {
            guide->resize(width, 700);
            QApplication::processEvents();
            int images = 0;
            for (QTextBlock b = text->document()->begin(); b.isValid(); b = b.next())
                for (auto it = b.begin(); !it.atEnd(); ++it)
                    if (it.fragment().charFormat().isImageFormat()) {
                        const QTextImageFormat img = it.fragment().charFormat().toImageFormat();
                        QVERIFY2(img.width() > 100 && img.width() <= text->viewport()->width(),
                                 qPrintable(QStringLiteral("%1: %2 px in %3").arg(img.name()).arg(img.width()).arg(text->viewport()->width())));
                        ++images;
                    }
            QVERIFY(images >= 5);
            // The whole document laid out (the tables of Light | Dark pictures at its end included):
            // at the dialog's own width nothing is wider than the page (at 640 px the longest command
            // lines of the code blocks are, which do not wrap).
            text->verticalScrollBar()->setValue(text->verticalScrollBar()->maximum());
            QApplication::processEvents();
            if (width == 900) {
                QCOMPARE(text->horizontalScrollBar()->maximum(), 0);
                QVERIFY(text->document()->size().width() <= text->viewport()->width() + 1);
            }
        }

        QCOMPARE(w.catalogButton()->menu()->actions().size(), int(tp::catalog().size()));
        QAction *import = nullptr, *exportPlan = nullptr;
        for (QAction* a : w.findChildren<QAction*>()) {
            if (a->text() == QStringLiteral("&Import Plan…"))
                import = a;
            if (a->text() == QStringLiteral("&Export Plan…"))
                exportPlan = a;
        }
        QVERIFY(import && exportPlan);
        QVERIFY(import->icon().pixmap(16).toImage() != exportPlan->icon().pixmap(16).toImage());
    }

    // Run → Verify with Transformers… opens the dialog on the plan at the toolbar's T; a Python that
    // does not exist is named, and the editor keeps working.
    void verifyDialogNamesAMissingPython()
    {
        MainWindow w;
        VerifyDialog* dialog = nullptr;
        QVERIFY(openVerifyDialog(w, dialog));
        dialog->pythonEdit()->setText(m_dir.filePath(QStringLiteral("no-such-python")));
        QSignalSpy done(dialog, &VerifyDialog::done);
        dialog->startButton()->click();
        QVERIFY(done.wait(60000));
        QCOMPARE(done.at(0).at(0).toBool(), false);
        QVERIFY2(dialog->verdict()->text().contains(QStringLiteral("cannot run the Python")), qPrintable(dialog->verdict()->text()));
        QCOMPARE(dialog->table()->rowCount(), 0);
        QVERIFY(dialog->startButton()->isEnabled());
    }

    // The whole way: the example at T=2 verified by Transformers from the dialog, every kind agreeing.
    void verifyWithTransformersEndToEnd()
    {
        const QString python = qEnvironmentVariable("TPSTUDIO_PYTHON");
        QProcess probe;
        probe.start(python, {QStringLiteral("-c"), QStringLiteral("import torch, transformers, safetensors, accelerate")});
        if (python.isEmpty() || !probe.waitForFinished(120000) || probe.exitStatus() != QProcess::NormalExit || probe.exitCode() != 0)
            QSKIP("TPSTUDIO_PYTHON names no Python with torch, transformers, safetensors and accelerate "
                  "(scripts/test.sh makes one)");
        MainWindow w;
        VerifyDialog* dialog = nullptr;
        QVERIFY(openVerifyDialog(w, dialog));
        dialog->pythonEdit()->setText(python);
        QSignalSpy done(dialog, &VerifyDialog::done);
        dialog->startButton()->click();
        QVERIFY(dialog->running());
        QVERIFY(done.wait(600000));
        QVERIFY2(done.at(0).at(0).toBool(), qPrintable(dialog->verdict()->text() + "\n" + dialog->log()->toPlainText()));
        QVERIFY(dialog->verdict()->text().contains(QStringLiteral("Verified")));
        QStringList kinds;
        for (int r = 0; r < dialog->table()->rowCount(); ++r) {
            kinds << dialog->table()->item(r, 0)->text();
            QCOMPARE(dialog->table()->item(r, 1)->text(), dialog->table()->item(r, 2)->text());
            QCOMPARE(dialog->table()->item(r, 5)->text(), QStringLiteral("agree"));
        }
        QCOMPARE(kinds, (QStringList{QStringLiteral("all_gather"), QStringLiteral("all_reduce")}));
    }

    // The Advisor on a dense and a MoE model: the table holds every candidate tp::searchPlans keeps
    // with the same inputs, all fitting; the status counts the front; plot and table select together;
    // Apply loads a candidate's plan and T as one undo step, Export writes it.
    void advisorSearchesSelectsAndApplies_data()
    {
        QTest::addColumn<QString>("id");
        QTest::newRow("dense") << QStringLiteral("example");
        QTest::newRow("moe") << QStringLiteral("mixtral-8x7b");
    }
    void advisorSearchesSelectsAndApplies()
    {
        QFETCH(QString, id);
        MainWindow w;
        QVERIFY(openAdvisor(w, id, QStringLiteral("h200-sxm-8")));
        AdvisorPage* page = w.advisorPage();
        QVERIFY(page->result());
        const tp::SearchResult& shown = *page->result();
        auto expected = tp::searchPlans(*w.spec(), tp::findHardware("h200-sxm-8").value(), page->options());
        QVERIFY2(expected.ok(), expected.status().message().c_str());
        QVERIFY(!expected->candidates.empty());
        const auto front = std::count_if(expected->candidates.begin(), expected->candidates.end(), [](auto& c) { return c.pareto; });
        QVERIFY(front > 0);
        QCOMPARE(shown.candidates.size(), expected->candidates.size());
        QCOMPARE(std::count_if(shown.candidates.begin(), shown.candidates.end(), [](auto& c) { return c.pareto; }), front);
        QAbstractItemModel* table = page->table()->model();
        QCOMPARE(table->rowCount(), int(expected->candidates.size()));
        std::set<std::string> names;
        int paretoRows = 0;
        for (int r = 0; r < table->rowCount(); ++r) {
            QVERIFY(table->index(r, 6).data(Qt::UserRole).toLongLong() >= 0); // headroom: every row fits
            paretoRows += table->index(r, 7).data().toString() == QLatin1String("yes");
            names.insert(table->index(r, 0).data().toString().toStdString());
        }
        QCOMPARE(paretoRows, int(front));
        if (w.spec()->config.isMoe())
            QVERIFY(names.contains("expert parallel"));
        QVERIFY2(page->statusLabel()->text().startsWith(
                     QStringLiteral("%1 candidates, %2 on the Pareto front; %3 invalid, %4 too large")
                         .arg(expected->candidates.size()).arg(front).arg(expected->invalid).arg(expected->tooLarge)),
                 qPrintable(page->statusLabel()->text()));
        QVERIFY(page->plot()->xAxis->label().startsWith(QStringLiteral("Inter-token latency (")));
        // The objective (tokens/s per GPU) selects its best candidate, at the top of the table.
        QVERIFY(page->selectedIndex() >= 0);
        for (const auto& c : shown.candidates)
            QVERIFY(c.tokensPerSecondPerGpu <= shown.candidates[std::size_t(page->selectedIndex())].tokensPerSecondPerGpu);
        page->objectiveBox()->setCurrentIndex(AdvisorPage::TtftObjective);
        for (const auto& c : shown.candidates)
            QVERIFY(c.ttftSeconds >= shown.candidates[std::size_t(page->selectedIndex())].ttftSeconds);

        // A click on a point selects its row; a row selects its point.
        PlanDocument* doc = w.document();
        const int startTp = doc->settings().tpSize;
        int pick = -1;
        for (std::size_t i = 0; i < shown.candidates.size(); ++i)
            if (shown.candidates[i].tp != startTp && shown.candidates[i].tp > 1
                && (pick < 0 || shown.candidates[i].pareto))
                pick = int(i);
        QVERIFY(pick >= 0);
        const tp::PlanCandidate& c = shown.candidates[std::size_t(pick)];
        page->plot()->replot(); // the axes at the plot's current size
        const QPoint at = page->pixelOf(pick).toPoint();
        QVERIFY(page->plot()->rect().contains(at));
        const int under = page->candidateAt(at); // `pick`, or one drawn at the same place
        QVERIFY(under >= 0);
        QTest::mouseClick(page->plot(), Qt::LeftButton, {}, at);
        QCOMPARE(page->selectedIndex(), under);
        page->selectCandidate(pick);
        QCOMPARE(page->selectedIndex(), pick);
        const QModelIndex cur = page->table()->currentIndex();
        QCOMPARE(cur.siblingAtColumn(0).data().toString(), QString::fromStdString(c.name));
        QCOMPARE(cur.siblingAtColumn(1).data().toInt(), c.tp);

        // Export: the candidate's plan as plan JSON, at its T.
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("candidate.json"));
        QVERIFY(page->exportSelected(file).ok());
        auto reread = tp::loadPlanFile(file.toStdString(), tp::VersionProfile::G3);
        QVERIFY2(reread.ok(), reread.status().message().c_str());
        QCOMPARE(reread->tpSize, c.tp);

        // Apply: the editor takes the plan and T; one undo brings both back.
        const std::vector<tp::PlanEntry> before = doc->plan().entries;
        const int steps = doc->undoStack()->count();
        page->applyButton()->click();
        QCOMPARE(doc->undoStack()->count(), steps + 1);
        QCOMPARE(doc->settings().tpSize, c.tp);
        QCOMPARE(w.tpBox()->value(), c.tp);
        QVERIFY(doc->plan().entries == c.plan.entries);
        QCOMPARE(doc->plan().epImplementation, c.plan.epImplementation);
        QVERIFY(settle(w)); // the other pages show it
        QCOMPARE(w.previews()->latest()->graph.tpSize, c.tp);
        QVERIFY(w.previews()->latest()->graph.valid());
        doc->undoStack()->undo();
        QCOMPARE(doc->settings().tpSize, startTp);
        QVERIFY(doc->plan().entries == before);
        doc->undoStack()->redo();
        QCOMPARE(doc->settings().tpSize, c.tp);
    }

    // Nothing fits (a 70 B model on the local CPU's 8 GiB): the page says so and names the least
    // demanding candidate and how far off it is.
    // Issue 16: a plan that cannot run on the toolbar's hardware is an error diagnostic naming the
    // smallest T that fits, and T above the machine's devices is flagged; the prediction stays.
    // Issue 41: the memory page names the KV cache layout it assumes and offers an fp8 cache; the choice
    // halves the cache figures, survives a toolbar change and is saved with the session.
    void kvCacheDtypeOnTheMemoryPage()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openOn(w, QStringLiteral("llama-3.1-8b"), QStringLiteral("h100-sxm-8"), 8));
        tpui::CollectivesPage* page = w.collectivesPage();
        const qint64 bf16 = w.previews()->latest()->graph.memory[0].kvCacheBytesPerToken;
        QCOMPARE(bf16, qint64(16) * 1024);
        QVERIFY2(page->kvLayoutLabel()->text().contains(QStringLiteral("each rank's k and v heads per layer; BF16")),
                 qPrintable(page->kvLayoutLabel()->text()));
        QCOMPARE(page->kvDtypeBox()->currentData().toString(), QStringLiteral("model"));
        // Issue 38: what fits, as the engine's whatFits says for the toolbar's batch and sequence.
        const auto p = w.previews()->latest();
        QVERIFY(p->fits && p->fits->maxContext > 0 && p->fits->maxBatch > 0);
        const QString fits = QString::fromStdString(tp::whatFitsText(*p->fits, p->settings.batch, p->settings.seq,
                                                                     p->spec->config.maxPositionEmbeddings));
        QVERIFY2(page->kvLayoutLabel()->text().contains(QStringLiteral("What fits")) && page->kvLayoutLabel()->text().contains(fits),
                 qPrintable(page->kvLayoutLabel()->text()));
        page->kvDtypeBox()->setCurrentIndex(page->kvDtypeBox()->findData(QStringLiteral("fp8")));
        emit page->kvDtypeBox()->activated(page->kvDtypeBox()->currentIndex());
        QVERIFY(settle(w));
        QCOMPARE(w.document()->settings().kvDtype, QStringLiteral("fp8"));
        QCOMPARE(w.previews()->latest()->graph.memory[0].kvCacheBytesPerToken, bf16 / 2);
        QVERIFY(page->kvLayoutLabel()->text().contains(QStringLiteral("fp8")));
        w.tpBox()->setValue(4); // the toolbar's own settings leave the KV cache's alone
        QVERIFY(settle(w));
        QCOMPARE(w.document()->settings().kvDtype, QStringLiteral("fp8"));
        QCOMPARE(page->kvDtypeBox()->currentData().toString(), QStringLiteral("fp8"));
        QVERIFY(w.document()->sessionJson().contains("\"kv_dtype\": \"fp8\""));
        // Coverage: what the default plan leaves whole on every rank (the norms are not weight matrices: none
        // here), then the MLP replicated: its three projections listed with the default plan's styles.
        QTableWidget* whole = page->wholeWeightsTable();
        const int before = whole->rowCount();
        tp::Plan p2 = w.document()->plan();
        for (auto& e : p2.entries)
            if (e.key.find(".mlp.") != std::string::npos)
                e.style = "replicate";
        w.document()->replacePlan(p2, QStringLiteral("replicate the MLP"));
        QVERIFY(settle(w));
        QCOMPARE(whole->rowCount(), before + 3);
        QStringList keys;
        for (int i = 0; i < whole->rowCount(); ++i)
            keys << whole->item(i, 0)->text();
        for (const char* k : {"model.layers.*.mlp.gate_proj", "model.layers.*.mlp.up_proj", "model.layers.*.mlp.down_proj"})
            QVERIFY2(keys.contains(QLatin1String(k)), qPrintable(keys.join(", ")));
        QCOMPARE(whole->item(keys.indexOf(QStringLiteral("model.layers.*.mlp.down_proj")), 4)->text(), QStringLiteral("rowwise"));
    }

    // Issue 41: the Summary says the class's ep_plan is not the plan edited (Mixtral's tp_plan shards the
    // experts with moe_tp_experts), and the Plan page marks the keys that export into ep_plan.
    void epPlanIsToldApart()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openOn(w, QStringLiteral("mixtral-8x7b"), QStringLiteral("h100-sxm-8"), 2));
        const QString summary = w.summaryPage()->toPlainText();
        QVERIFY2(summary.contains(QStringLiteral("applied by Transformers only with ep_size > 1"))
                     && summary.contains(QStringLiteral("whose experts are sharded by moe_tp_experts")),
                 qPrintable(summary));
        QVERIFY(w.document()->importPlan(QStringLiteral(TP_SOURCE_DIR "/plans/mixtral/expert-parallel.json")).ok());
        QVERIFY(settle(w));
        QAbstractItemModel* pm = w.planView()->model();
        int marked = 0;
        for (int r = 0; r < pm->rowCount(); ++r) {
            const QString style = pm->index(r, PlanTableModel::StyleColumn).data(Qt::EditRole).toString();
            const QString shown = pm->index(r, PlanTableModel::StyleColumn).data().toString();
            const bool ep = style == QLatin1String("grouped_gemm") || style == QLatin1String("ep_dispatch_experts");
            QCOMPARE(shown, ep ? style + QStringLiteral(" (ep_plan)") : style);
            marked += ep;
        }
        QCOMPARE(marked, 3); // experts.gate_up_proj, experts.down_proj, experts
    }

    void memoryFeasibilityIsADiagnostic()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openOn(w, QStringLiteral("llama-3.1-70b"), QStringLiteral("h100-sxm-8"), 1));
        auto p = w.previews()->latest();
        QCOMPARE(p->graph.tpSize, 1);
        QVERIFY(p->cost.has_value());
        QCOMPARE(int(p->feasibility.size()), 1);
        QCOMPARE(p->feasibility[0].where, std::string("memory"));
        QVERIFY2(p->feasibility[0].message.find("the smallest tp size that fits is 2") != std::string::npos,
                 p->feasibility[0].message.c_str());
        QCOMPARE(w.diagnosticsModel()->count(tp::Severity::Error), 1);
        // The tab's text (and so every tab's place) stays; its tooltip counts.
        QCOMPARE(w.tabs()->tabText(MainWindow::DiagnosticsPage), QStringLiteral("Diagnostics"));
        QVERIFY(w.tabs()->tabToolTip(MainWindow::DiagnosticsPage).startsWith(QStringLiteral("1 error")));
        // Issue 41: the Summary says it at the top, with the figures for this T and machine.
        QString summary = w.summaryPage()->toPlainText();
        QVERIFY2(summary.startsWith(QStringLiteral("The plan at T=1 on 8x H100"))
                     && summary.contains(QStringLiteral("no: rank 0 needs 131.71 GiB of 77.65 GiB (79.65 GiB less 2.00 GiB kept back)"))
                     && summary.contains(QStringLiteral("Decode step")),
                 qPrintable(summary));
        w.tpBox()->setValue(2);
        QVERIFY(settle(w));
        summary = w.summaryPage()->toPlainText();
        QVERIFY2(summary.startsWith(QStringLiteral("The plan at T=2")) && summary.contains(QStringLiteral("Fits\nyes: rank")),
                 qPrintable(summary));
        QVERIFY(w.previews()->latest()->feasibility.empty());
        QCOMPARE(w.diagnosticsModel()->count(tp::Severity::Error), 0);
        QCOMPARE(w.tabs()->tabText(MainWindow::DiagnosticsPage), QStringLiteral("Diagnostics"));
        QVERIFY(w.tabs()->tabToolTip(MainWindow::DiagnosticsPage).startsWith(QStringLiteral("0 error")));
        // T=2 at a long context: the KV cache and activations count too (batch 1 × 131072 tokens).
        w.seqBox()->setValue(131072);
        QVERIFY(settle(w));
        p = w.previews()->latest();
        QVERIFY(p->graph.valid());
        QCOMPARE(int(p->feasibility.size()), 1);
        QVERIFY2(p->feasibility[0].message.find("context 131072") != std::string::npos, p->feasibility[0].message.c_str());
    }

    void advisorExplainsWhenNothingFits()
    {
        MainWindow w;
        QVERIFY(openAdvisor(w, QStringLiteral("llama-3.1-70b"), QStringLiteral("local-cpu")));
        AdvisorPage* page = w.advisorPage();
        QVERIFY(page->result());
        QVERIFY(page->result()->candidates.empty());
        QVERIFY(page->result()->smallestTooLarge);
        QCOMPARE(page->table()->model()->rowCount(), 0);
        QVERIFY(page->emptyLabel()->isVisible());
        const QString text = page->emptyLabel()->text();
        QVERIFY2(text.contains(QStringLiteral("Nothing fits")), qPrintable(text));
        const auto& m = *page->result()->smallestTooLarge;
        QVERIFY2(text.contains(QString::fromStdString(m.name)) && text.contains(QStringLiteral("T=%1").arg(m.tp))
                     && text.contains(humanBytes(double(-m.headroomBytes))),
                 qPrintable(text));
        QVERIFY(page->statusLabel()->text().startsWith(QStringLiteral("0 candidates, 0 on the Pareto front")));
        QVERIFY(!page->applyButton()->isEnabled());
        // A machine it fits on: the same page fills.
        QSignalSpy found(page, &AdvisorPage::searchFinished);
        w.hardwareBox()->setCurrentIndex(w.hardwareBox()->findData(QStringLiteral("h200-sxm-8")));
        QVERIFY(found.wait(120000));
        QVERIFY(page->table()->model()->rowCount() > 0);
        QVERIFY(!page->emptyLabel()->isVisible());
        // Another model: the candidates of the one before go at once, the new ones come.
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.openModel(QStringLiteral("example"));
        QVERIFY(loaded.wait(30000));
        QVERIFY(!page->result() || page->searching());
        QVERIFY(page->result() || found.wait(120000));
        QCOMPARE(page->table()->model()->rowCount(), int(page->result()->candidates.size()));
        QVERIFY(page->selectedIndex() >= 0);
        QVERIFY(!page->result()->candidates[std::size_t(page->selectedIndex())].name.empty());
    }

    // The hardware list: the built-in profiles, then the calibrated ones of TPSTUDIO_HARDWARE_DIR,
    // marked; a profile that does not parse is left out; selecting one drives the previews.
    void hardwareListHasCalibratedProfiles()
    {
        const QString dir = qEnvironmentVariable("TPSTUDIO_HARDWARE_DIR");
        QVERIFY(QDir().mkpath(dir));
        QFile in(QStringLiteral(TP_SOURCE_DIR "/plans/hardware/local-cpu.json"));
        QVERIFY(in.open(QIODevice::ReadOnly));
        QJsonObject profile = QJsonDocument::fromJson(in.readAll()).object();
        profile[QStringLiteral("id")] = QStringLiteral("test-box");
        profile[QStringLiteral("name")] = QStringLiteral("Test box");
        QFile out(dir + QStringLiteral("/test-box.json")), bad(dir + QStringLiteral("/broken.json"));
        QVERIFY(out.open(QIODevice::WriteOnly | QIODevice::Truncate) && bad.open(QIODevice::WriteOnly | QIODevice::Truncate));
        out.write(QJsonDocument(profile).toJson());
        out.close();
        bad.write("{");
        bad.close();
        MainWindow w;
        w.setShowErrorDialogs(false);
        QComboBox* box = w.hardwareBox();
        const int builtin = int(tp::builtinHardwareIds().size());
        QCOMPARE(box->count(), builtin + 1);
        QCOMPARE(box->itemData(builtin).toString(), QStringLiteral("test-box"));
        QCOMPARE(box->itemText(builtin), QStringLiteral("Test box (calibrated)"));
        QVERIFY(openAndPreview(w, QStringLiteral("example")));
        box->setCurrentIndex(builtin);
        QCOMPARE(w.document()->settings().hardware, QStringLiteral("test-box"));
        QVERIFY(settle(w));
        QVERIFY(w.previews()->latest()->hardware);
        QCOMPARE(QString::fromStdString(w.previews()->latest()->hardware->name), QStringLiteral("Test box"));
        // Gone from the folder: listed no more, and the selection falls back to the first built-in.
        QVERIFY(QFile::remove(out.fileName()) && QFile::remove(bad.fileName()));
        w.refreshHardwareList();
        QCOMPARE(box->count(), builtin);
        QCOMPARE(w.document()->settings().hardware, box->itemData(0).toString());
    }

    // The calibration dialog runs tpstudio-cli; one it cannot start says so, and installs nothing.
    void calibrateDialogNamesAMissingCli()
    {
        const QByteArray cli = qgetenv("TPSTUDIO_CLI");
        qputenv("TPSTUDIO_CLI", "/no/such/tpstudio-cli");
        MainWindow w;
        w.calibrateAction()->trigger();
        auto* dialog = w.findChild<CalibrateDialog*>();
        QVERIFY(dialog);
        QVERIFY(dialog->idEdit()->text().startsWith(QStringLiteral("calibrated-")));
        QVERIFY(dialog->arguments().contains(QStringLiteral("--json-stream")));
        QSignalSpy done(dialog, &CalibrateDialog::done);
        dialog->startButton()->click();
        QVERIFY(done.count() > 0 || done.wait(10000));
        qputenv("TPSTUDIO_CLI", cli);
        QCOMPARE(done.first().first().toBool(), false);
        QVERIFY2(dialog->stepLabel()->text().contains(QStringLiteral("/no/such/tpstudio-cli")), qPrintable(dialog->stepLabel()->text()));
        QVERIFY(dialog->startButton()->isEnabled());
        QVERIFY(!dialog->stopButton()->isEnabled());
        QCOMPARE(w.hardwareBox()->count(), int(tp::builtinHardwareIds().size()));
    }

    // Calibrate This Machine end to end: tpstudio-cli calibrate --quick installs a profile into
    // TPSTUDIO_HARDWARE_DIR (a temporary folder here), the progress bar follows its stream, and the
    // profile appears in the hardware list, selected, and drives the previews. Stop installs nothing.
    void calibrateInstallsAndSelectsAProfile()
    {
        const QString dir = qEnvironmentVariable("TPSTUDIO_HARDWARE_DIR");
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openAndPreview(w, QStringLiteral("example")));
        w.calibrateAction()->trigger();
        auto* dialog = w.findChild<CalibrateDialog*>();
        QVERIFY(dialog);
        dialog->quickBox()->setChecked(true);

        // Stopped after its first measurement: no profile.
        dialog->idEdit()->setText(QStringLiteral("gui-stopped"));
        QSignalSpy done(dialog, &CalibrateDialog::done);
        dialog->start();
        QVERIFY(dialog->running());
        QTRY_VERIFY_WITH_TIMEOUT(dialog->progress()->value() > 0 || dialog->stepLabel()->text().startsWith(QStringLiteral("Measuring")), 60000);
        dialog->stopButton()->click(); // returns at once; the child's end reports it
        QVERIFY(!dialog->stopButton()->isEnabled());
        QVERIFY(done.count() == 1 || done.wait(10000));
        QCOMPARE(done.count(), 1);
        QCOMPARE(done.first().first().toBool(), false);
        QCOMPARE(dialog->stepLabel()->text(), QStringLiteral("Stopped; nothing was installed."));
        QVERIFY(!dialog->running());
        QVERIFY(!QFile::exists(dir + QStringLiteral("/gui-stopped.json")));
        QVERIFY(w.hardwareBox()->findData(QStringLiteral("gui-stopped")) < 0);

        // Run to the end: installed, listed, selected.
        done.clear();
        dialog->idEdit()->setText(QStringLiteral("gui-calibrated"));
        QVERIFY(dialog->arguments().contains(QStringLiteral("--quick")));
        dialog->startButton()->click();
        QVERIFY(done.wait(240000));
        QVERIFY2(done.first().first().toBool(), qPrintable(dialog->stepLabel()->text()));
        QCOMPARE(done.first().at(1).toString(), QStringLiteral("gui-calibrated"));
        QCOMPARE(dialog->progress()->value(), dialog->progress()->maximum());
        QVERIFY(QFile::exists(dir + QStringLiteral("/gui-calibrated.json")));
        QComboBox* box = w.hardwareBox();
        QCOMPARE(box->currentData().toString(), QStringLiteral("gui-calibrated"));
        QVERIFY(box->currentText().endsWith(QStringLiteral("(calibrated)")));
        QCOMPARE(w.document()->settings().hardware, QStringLiteral("gui-calibrated"));
        QVERIFY(settle(w));
        QVERIFY2(w.previews()->latest()->hardware, qPrintable(w.previews()->latest()->hardwareError));
        QCOMPARE(QString::fromStdString(w.previews()->latest()->hardware->id), QStringLiteral("gui-calibrated"));
        QVERIFY(w.previews()->latest()->cost.has_value());
        // The Advisor searches on it.
        QSignalSpy found(w.advisorPage(), &AdvisorPage::searchFinished);
        w.show();
        w.tabs()->setCurrentIndex(MainWindow::AdvisorPageIndex);
        QVERIFY(found.wait(120000));
        QVERIFY2(w.advisorPage()->result(), qPrintable(w.advisorPage()->statusLabel()->text()));
        QVERIFY(w.advisorPage()->statusLabel()->text().contains(QString::fromStdString(tp::findHardware("gui-calibrated")->name)));
        QVERIFY(QFile::remove(dir + QStringLiteral("/gui-calibrated.json")));
    }

    // Issue 41: the Advisor tries the shipped plans of the model's type, the editor's plan and the user's
    // files, each described. DeepSeek-V3 on 8 x H200 at batch 16 x 2048: the shipped mla-sharded fits.
    void advisorTriesShippedEditedAndUserPlans()
    {
        MainWindow w;
        QVERIFY(openAdvisor(w, QStringLiteral("deepseek-v3"), QStringLiteral("h200-sxm-8")));
        AdvisorPage* page = w.advisorPage();
        QSignalSpy found(page, &AdvisorPage::searchFinished);
        auto searched = [&] { return found.wait(120000) && !page->searching() && page->result(); };
        page->batchBox()->setValue(16);
        page->seqBox()->setValue(2048);
        QVERIFY(searched());
        auto row = [&](const QString& name) {
            QAbstractItemModel* t = page->table()->model();
            for (int r = 0; r < t->rowCount(); ++r)
                if (t->index(r, 0).data().toString() == name)
                    return r;
            return -1;
        };
        QAbstractItemModel* t = page->table()->model();
        const int mla = row(QStringLiteral("mla-sharded"));
        QVERIFY(mla >= 0);
        QVERIFY(t->index(mla, 6).data(Qt::UserRole).toLongLong() >= 0); // it fits
        QVERIFY2(t->index(mla, 8).data().toString().startsWith(QStringLiteral("plans/deepseek_v3/mla-sharded.json: ")),
                 qPrintable(t->index(mla, 8).data().toString()));
        QCOMPARE(t->index(mla, 0).data(Qt::ToolTipRole).toString(), t->index(mla, 8).data().toString());
        for (int r = 0; r < t->rowCount(); ++r)
            QVERIFY(!t->index(r, 8).data().toString().isEmpty());
        QCOMPARE(row(QStringLiteral("editor's plan")), -1); // the editor holds the default

        // The editor's plan, once it differs from the default: the embedding replicated.
        w.document()->setStyle(QStringLiteral("model.embed_tokens"), QStringLiteral("replicate"));
        QVERIFY(searched());
        const int edited = row(QStringLiteral("editor's plan"));
        QVERIFY(edited >= 0);
        QVERIFY(t->index(edited, 8).data().toString().contains(QStringLiteral("the plan in the editor")));
        w.document()->undoStack()->undo();
        QVERIFY(searched());
        QCOMPARE(row(QStringLiteral("editor's plan")), -1);

        // A user's file equal to mla-sharded takes its place (one candidate, both named); a broken one is said.
        QTemporaryDir dir;
        const QString mine = dir.filePath(QStringLiteral("my-mla.json")), bad = dir.filePath(QStringLiteral("broken.json"));
        QVERIFY(QFile::copy(QStringLiteral(TP_SOURCE_DIR "/plans/deepseek_v3/mla-sharded.json"), mine));
        QFile b(bad);
        QVERIFY(b.open(QIODevice::WriteOnly) && b.write("{\"tp_plan\": [") > 0);
        b.close();
        page->addPlanFiles({mine, bad});
        QVERIFY(searched());
        QCOMPARE(row(QStringLiteral("mla-sharded")), -1);
        const int my = row(QStringLiteral("my-mla"));
        QVERIFY(my >= 0);
        QVERIFY2(t->index(my, 8).data().toString().contains(QStringLiteral("the same as 'mla-sharded'")),
                 qPrintable(t->index(my, 8).data().toString()));
        QVERIFY2(page->statusLabel()->text().contains(QStringLiteral("not tried: ")) && page->statusLabel()->text().contains(bad),
                 qPrintable(page->statusLabel()->text()));
        QCOMPARE(page->plansButton()->text(), QStringLiteral("Plans (+2)"));
        page->addPlanFiles({}, true);
        QVERIFY(searched());
        QVERIFY(row(QStringLiteral("mla-sharded")) >= 0);
        QCOMPARE(page->plansButton()->text(), QStringLiteral("Plans"));
    }

    // A workload the cost model does not take: the page shows the engine's reason instead of candidates.
    void advisorNamesAWorkloadItCannotCost()
    {
        MainWindow w;
        QVERIFY(openAdvisor(w, QStringLiteral("example"), QStringLiteral("h200-sxm-8")));
        AdvisorPage* page = w.advisorPage();
        QVERIFY(page->table()->model()->rowCount() > 0);
        QSignalSpy found(page, &AdvisorPage::searchFinished);
        page->batchBox()->setValue(page->batchBox()->maximum());
        page->contextBox()->setValue(page->contextBox()->maximum());
        QVERIFY(found.wait(120000));
        QVERIFY(!page->result());
        QCOMPARE(page->table()->model()->rowCount(), 0);
        auto expected = tp::searchPlans(*w.spec(), tp::findHardware("h200-sxm-8").value(), page->options());
        QVERIFY(!expected.ok());
        QVERIFY2(page->emptyLabel()->text().startsWith(QStringLiteral("Cannot search: ")), qPrintable(page->emptyLabel()->text()));
        QVERIFY(page->statusLabel()->text().contains(QString::fromStdString(expected.status().message()).left(20)));
        QVERIFY(!page->applyButton()->isEnabled());
    }

    // Without a model the page says what to do.
    void advisorWithoutModel()
    {
        MainWindow w;
        w.show();
        QSignalSpy found(w.advisorPage(), &AdvisorPage::searchFinished);
        w.tabs()->setCurrentIndex(MainWindow::AdvisorPageIndex);
        QVERIFY(found.wait(5000));
        QVERIFY(w.advisorPage()->emptyLabel()->text().contains(QStringLiteral("Open a model")));
    }

    void badModelReportsAndKeepsPrevious()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        QSignalSpy failed(&w, &MainWindow::loadFailed);
        w.openModel(QStringLiteral("example"));
        QVERIFY(loaded.wait(10000));
        w.openModel(QStringLiteral("/no/such/folder"));
        QVERIFY(failed.wait(10000));
        QVERIFY(failed.first().first().toString().contains(QStringLiteral("/no/such/folder")));
        QCOMPARE(QString::fromStdString(w.spec()->source), QStringLiteral("catalog:example")); // nothing lost
        QVERIFY(!w.isOpening());
    }

private:
    QTemporaryDir m_dir;
    QString m_big, m_huge;
};

QTEST_MAIN(TestGui)
#include "tst_gui.moc"
