// tst_scaling — the Collectives & memory page's T-side-by-side table and memory bars (offscreen).
#include "guitestutils.h"
#include "widgets/main_window.h"
#include "widgets/memory_bars.h"
#include "widgets/scaling_table.h"

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QComboBox>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableView>
#include <QTabWidget>
#include <QtTest>

using namespace tpui;
using tptest::openAndPreview;
using tptest::openOn;
using tptest::settle;

namespace {
QString cell(const QAbstractItemModel* m, int row, int column, int role = Qt::DisplayRole)
{
    return m->index(row, column).data(role).toString();
}
} // namespace

class TestScaling : public QObject
{
    Q_OBJECT
private slots:
    // Llama-3.1-8B on h100-sxm-8: rows T = 1…8, efficiency = speedup / T, T=3 (8 KV heads) invalid
    // with its reason, the current T highlighted, a row click sets the toolbar's T.
    void tableRowsAndRowClick()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openOn(w, QStringLiteral("llama-3.1-8b"), QStringLiteral("h100-sxm-8"), 2));
        ScalingTable* t = w.scalingTable();
        QVERIFY(t);
        auto* m = t->scalingModel();
        QAbstractItemModelTester tester(m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(m->rowCount(), 8);
        const auto p = w.previews()->latest();
        QCOMPARE(int(p->scaling.size()), 8);
        int invalid = 0;
        for (int row = 0; row < 8; ++row) {
            QCOMPARE(m->index(row, 0).data(ScalingTableModel::TpRole).toInt(), row + 1);
            QCOMPARE(cell(m, row, ScalingTableModel::TpColumn), QString::number(row + 1));
            const tp::ScalingPoint& pt = p->scaling[std::size_t(row)];
            if (!pt.valid) {
                ++invalid;
                QCOMPARE(cell(m, row, ScalingTableModel::ValidColumn), QStringLiteral("invalid"));
                const QString why = cell(m, row, ScalingTableModel::PrefillColumn, Qt::ToolTipRole);
                QVERIFY2(!why.isEmpty() && why == QString::fromStdString(pt.reason), qPrintable(why));
                QCOMPARE(cell(m, row, ScalingTableModel::SpeedupColumn), QStringLiteral("–"));
                // Greyed: the palette's disabled text.
                QCOMPARE(m->index(row, 1).data(Qt::ForegroundRole).value<QColor>(),
                         QGuiApplication::palette().color(QPalette::Disabled, QPalette::Text));
                continue;
            }
            QCOMPARE(cell(m, row, ScalingTableModel::ValidColumn), QStringLiteral("valid"));
            const double speedup = m->index(row, ScalingTableModel::SpeedupColumn).data(ScalingTableModel::ValueRole).toDouble();
            const double eff = m->index(row, ScalingTableModel::EfficiencyColumn).data(ScalingTableModel::ValueRole).toDouble();
            QVERIFY(speedup > 0);
            QCOMPARE(speedup, pt.speedup);
            QVERIFY(qAbs(eff - speedup / (row + 1)) < 1e-12);
            QCOMPARE(cell(m, row, ScalingTableModel::EfficiencyColumn), QStringLiteral("%1 %").arg(eff * 100, 0, 'f', 0));
            QCOMPARE(m->index(row, ScalingTableModel::MemoryColumn).data(ScalingTableModel::ValueRole).toLongLong(),
                     qint64(pt.memoryBytes));
            QCOMPARE(cell(m, row, ScalingTableModel::FitsColumn), QStringLiteral("yes")); // 8 B fits 80 GiB at any T
            QCOMPARE(m->index(row, ScalingTableModel::BytesColumn).data(ScalingTableModel::ValueRole).toLongLong() > 0, row > 0);
            // Issue 41: what each rank sends grows with T (ring: 2(T-1)/T of each all-reduce) where the tensors'
            // total does not; decode has its own speedup.
            QCOMPARE(m->index(row, ScalingTableModel::BytesColumn).data(ScalingTableModel::ValueRole).toLongLong(),
                     qint64(pt.commBytesPerRank));
            if (row > 0) {
                const auto& t2 = p->scaling[1];
                QVERIFY2(pt.commBytesPerRank >= t2.commBytesPerRank && pt.commBytes == t2.commBytes,
                         qPrintable(QString("%1 vs %2").arg(pt.commBytesPerRank).arg(t2.commBytesPerRank)));
            }
            QCOMPARE(m->index(row, ScalingTableModel::DecodeSpeedupColumn).data(ScalingTableModel::ValueRole).toDouble(),
                     pt.decodeSpeedup);
            QCOMPARE(cell(m, row, ScalingTableModel::DecodeSpeedupColumn), QStringLiteral("%1×").arg(pt.decodeSpeedup, 0, 'f', 2));
            QVERIFY(!cell(m, row, ScalingTableModel::DecodeColumn).isEmpty());
        }
        QCOMPARE(cell(m, 0, ScalingTableModel::EfficiencyColumn), QStringLiteral("100 %"));
        // 8 KV heads: T = 3, 5, 6, 7 cannot split them.
        QCOMPARE(invalid, 4);
        QVERIFY(!p->scaling[2].valid);
        // The current T's row is highlighted (bold), no other.
        for (int row = 0; row < 8; ++row)
            QCOMPARE(m->index(row, 0).data(Qt::FontRole).value<QFont>().bold(), row == 1);

        // A click on T=4's row sets the toolbar's T and the preview follows.
        w.tabs()->setCurrentIndex(MainWindow::CollectivesPage);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QSignalSpy activated(t, &ScalingTable::tpActivated);
        const QRect r = t->visualRect(m->index(3, ScalingTableModel::PrefillColumn));
        QVERIFY(r.isValid());
        QTest::mouseClick(t->viewport(), Qt::LeftButton, {}, r.center());
        QVERIFY(activated.count() >= 1);
        QCOMPARE(activated.first().at(0).toInt(), 4);
        QCOMPARE(w.tpBox()->value(), 4);
        QVERIFY(settle(w));
        QCOMPARE(w.previews()->latest()->graph.tpSize, 4);
        QVERIFY(m->index(3, 0).data(Qt::FontRole).value<QFont>().bold());
        QVERIFY(!m->index(1, 0).data(Qt::FontRole).value<QFont>().bold());
        // An invalid row's click sets T too (its errors are then in Diagnostics).
        QTest::mouseClick(t->viewport(), Qt::LeftButton, {}, t->visualRect(m->index(2, ScalingTableModel::TpColumn)).center());
        QCOMPARE(w.tpBox()->value(), 3);
    }

    // Llama-3.1-70B on h100-sxm-8 at T=1: one bar, over the device's usable 77.65 GiB; at T=8, 8 bars with
    // headroom. The bars are the preview's memoryPerRank, its largest rank memoryFit's.
    void memoryBarsOverflowAndHeadroom()
    {
        MainWindow w;
        w.setShowErrorDialogs(false);
        QVERIFY(openOn(w, QStringLiteral("llama-3.1-70b"), QStringLiteral("h100-sxm-8"), 1));
        MemoryBars* bars = w.memoryBars();
        QVERIFY(bars);
        QCOMPARE(bars->barCount(), 1);
        QVERIFY(bars->emptyText().isEmpty());
        const tp::RankMemoryUse one = bars->ranks()[0];
        QCOMPARE(one.deviceBytes, tp::findHardware("h100-sxm-8")->usableMemoryBytes()); // 79.65 GiB less the 2 GiB reserve
        QVERIFY(one.weightBytes > std::int64_t(130) << 30); // 70.6 B parameters in bf16
        QVERIFY(!one.fits());
        QVERIFY2(bars->label(0).endsWith(QStringLiteral("GiB over")), qPrintable(bars->label(0)));
        const double over = double(one.neededBytes() - one.deviceBytes) / double(std::int64_t(1) << 30);
        QCOMPARE(bars->label(0), QStringLiteral("%1 GiB over").arg(over, 0, 'f', 1));
        // The scaling table agrees: T=1 does not fit, its headroom is negative.
        auto* m = w.scalingTable()->scalingModel();
        QCOMPARE(cell(m, 0, ScalingTableModel::FitsColumn), QStringLiteral("no"));
        QVERIFY(cell(m, 0, ScalingTableModel::HeadroomColumn).contains(QStringLiteral("over")));
        QCOMPARE(m->index(0, ScalingTableModel::MemoryColumn).data(ScalingTableModel::ValueRole).toLongLong(),
                 qint64(one.neededBytes()));

        w.tpBox()->setValue(8);
        QVERIFY(settle(w));
        QCOMPARE(bars->barCount(), 8);
        std::int64_t most = 0;
        for (int r = 0; r < 8; ++r) {
            const tp::RankMemoryUse& u = bars->ranks()[std::size_t(r)];
            QCOMPARE(u.rank, r);
            QVERIFY(u.fits());
            QVERIFY(u.headroomBytes() > std::int64_t(40) << 30); // ~17 GiB of weights per rank
            QVERIFY2(bars->label(r).endsWith(QStringLiteral("GiB free")), qPrintable(bars->label(r)));
            QVERIFY(u.commBufferBytes > 0);
            most = std::max(most, u.neededBytes());
        }
        QCOMPARE(m->index(7, ScalingTableModel::MemoryColumn).data(ScalingTableModel::ValueRole).toLongLong(), qint64(most));
        QCOMPARE(cell(m, 7, ScalingTableModel::FitsColumn), QStringLiteral("yes"));
        // It paints (offscreen) without trouble at both sizes.
        bars->resize(600, 300);
        QVERIFY(!bars->grab().isNull());
    }

    // Without a hardware profile the bars say why; a fresh widget asks for a model.
    void memoryBarsEmptyStates()
    {
        MemoryBars fresh;
        QCOMPARE(fresh.barCount(), 0);
        QVERIFY(fresh.emptyText().contains(QStringLiteral("Open a model")));
        auto r = std::make_shared<PreviewResult>();
        r->spec = std::make_shared<const tp::ModelSpec>();
        r->hardwareError = QStringLiteral("unknown hardware profile 'nope'");
        fresh.setPreview(r);
        QCOMPARE(fresh.barCount(), 0);
        QVERIFY2(fresh.emptyText().contains(QStringLiteral("nope")), qPrintable(fresh.emptyText()));
        QVERIFY(!fresh.grab().isNull());
        ScalingTable table;
        table.setPreview(r);
        QCOMPARE(table.model()->rowCount(), 0);
    }
};

QTEST_MAIN(TestScaling)
#include "tst_scaling.moc"
