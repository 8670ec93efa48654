// tst_gui — the module tree model (checked by QAbstractItemModelTester) and the main window.
#include "models/module_tree_model.h"
#include "widgets/main_window.h"

#include "tp/model/loader.h"

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QLineEdit>
#include <QMimeData>
#include <QSignalSpy>
#include <QTreeView>
#include <QTreeWidget>
#include "testutils.h"

#include <QtTest>

using namespace tpui;

namespace {
std::shared_ptr<const tp::ModelSpec> catalogSpec(const char* id)
{
    return std::make_shared<const tp::ModelSpec>(tptest::openSpec(id));
}
} // namespace

class TestGui : public QObject
{
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QCoreApplication::setOrganizationName(QStringLiteral("TP Studio Tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_gui"));
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
        int badParents = 0;
        std::function<int(const QModelIndex&)> walk = [&](const QModelIndex& parent) -> int {
            int n = 0;
            for (int r = 0; r < model.rowCount(parent); ++r) {
                const QModelIndex i = model.index(r, 0, parent);
                badParents += model.parent(i) != parent;
                n += 1 + walk(i);
            }
            return n;
        };
        std::size_t params = 0;
        for (const auto& m : spec->modules)
            params += m.params.size();
        QCOMPARE(std::size_t(walk({})), spec->modules.size() + params);
        QCOMPARE(badParents, 0);
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
        QCOMPARE(chain, (QStringList{"LlamaForCausalLM", "model", "layers", "3", "mlp", "down_proj", "weight"}));
        QCOMPARE(view->rowCount(view->index(0, 0, view->index(0, 0))), 1);
    }

    void diagnosticsSelectModules()
    {
        MainWindow w;
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.openModel(QStringLiteral(TP_SOURCE_DIR "/tests/fixtures/models/llama"));
        QVERIFY(loaded.wait(10000));
        w.openModel(QStringLiteral("deepseek-v3"));
        QVERIFY(loaded.wait(10000));
        QTreeWidget* d = w.diagnosticsView();
        QVERIFY(d->topLevelItemCount() > 0);
        QTreeWidgetItem* item = d->topLevelItem(0);
        item->setData(1, Qt::UserRole, QStringLiteral("model.layers.*.mlp.experts"));
        emit d->itemActivated(item, 0);
        QCOMPARE(w.treeView()->currentIndex().data(ModuleTreeModel::PathRole).toString(), QStringLiteral("model.layers.3.mlp.experts")); // layers 0-2 are dense
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
    }
};

QTEST_MAIN(TestGui)
#include "tst_gui.moc"
