// tst_status — Status, Result<T> and the propagation macros.
#include "tp/core/status.h"

#include <QtTest>

using namespace tp;

namespace {
Result<int> half(int v)
{
    if (v % 2 != 0)
        return invalidArgument("odd: " + std::to_string(v));
    return v / 2;
}
Result<int> quarter(int v)
{
    TP_ASSIGN_OR_RETURN(int h, half(v));
    TP_ASSIGN_OR_RETURN(int q, half(h));
    return q;
}
Status check(int v)
{
    TP_RETURN_IF_ERROR(quarter(v).status());
    return {};
}
} // namespace

class TestStatus : public QObject
{
    Q_OBJECT
private slots:
    void propagation_data()
    {
        QTest::addColumn<int>("input");
        QTest::addColumn<bool>("ok");
        QTest::addColumn<int>("value");
        QTest::addColumn<QString>("message");
        QTest::addRow("8") << 8 << true << 2 << "";
        QTest::addRow("6 fails in second half") << 6 << false << 0 << "odd: 3";
        QTest::addRow("5 fails at once") << 5 << false << 0 << "odd: 5";
    }
    void propagation()
    {
        QFETCH(int, input);
        QFETCH(bool, ok);
        QFETCH(int, value);
        QFETCH(QString, message);
        auto r = quarter(input);
        QCOMPARE(r.ok(), ok);
        QCOMPARE(check(input).ok(), ok);
        if (ok) {
            QCOMPARE(*r, value);
        } else {
            QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
            QCOMPARE(QString::fromStdString(r.status().message()), message);
        }
    }
    void okStatusInResultBecomesInternal()
    {
        Result<int> r{Status{}};
        QVERIFY(!r.ok());
        QCOMPARE(r.status().code(), StatusCode::Internal);
    }
    void context()
    {
        Status s = notFound("x.json: cannot open");
        s.withContext("opening model");
        QCOMPARE(QString::fromStdString(s.toString()), QString("not found: opening model: x.json: cannot open"));
        Status okS;
        okS.withContext("ignored");
        QCOMPARE(QString::fromStdString(okS.toString()), QString("ok"));
    }
};

QTEST_GUILESS_MAIN(TestStatus)
#include "tst_status.moc"
