#include "widgets/results_page.h"

#include "widgets/timeline_view.h"

#include "tp/cost/cost_model.h"

#include <qcustomplot.h>

#include <QComboBox>
#include <QFile>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QLabel>
#include <QPainter>
#include <QPdfWriter>
#include <QProcess>
#include <QPushButton>
#include <QStandardPaths>
#include <QSvgGenerator>
#include <QTabWidget>
#include <QToolTip>
#include <QVBoxLayout>

#include <map>

namespace tpui {

namespace {

QColor computeColor() { return QColor(70, 130, 180); }
QColor commColor() { return QColor(230, 140, 40); }

QCustomPlot* makePlot()
{
    auto* p = new QCustomPlot;
    p->setMinimumHeight(280);
    p->legend->setVisible(true);
    p->legend->setBrush(QColor(255, 255, 255, 200));
    p->setBackground(p->palette().color(QPalette::Base));
    for (QCPAxis* a : {p->xAxis, p->yAxis, p->xAxis2, p->yAxis2}) {
        a->setBasePen(QPen(p->palette().color(QPalette::Text)));
        a->setTickPen(QPen(p->palette().color(QPalette::Text)));
        a->setSubTickPen(QPen(p->palette().color(QPalette::Text)));
        a->setTickLabelColor(p->palette().color(QPalette::Text));
        a->setLabelColor(p->palette().color(QPalette::Text));
    }
    return p;
}

// Per layer (index layer + 1; 0 = outside the layers) compute and communication µs of one rank.
void layerTotals(const QJsonObject& run, int rank, QVector<double>& compute, QVector<double>& comm)
{
    const QJsonArray layers = run.value(QStringLiteral("layers")).toArray();
    compute.fill(0.0, layers.size());
    comm.fill(0.0, layers.size());
    for (const auto& v : run.value(QStringLiteral("spans")).toArray()) {
        const QJsonObject s = v.toObject();
        if (rank >= 0 && s.value(QStringLiteral("rank")).toInt() != rank)
            continue;
        const int l = s.value(QStringLiteral("layer")).toInt() + 1;
        if (l < 0 || l >= compute.size())
            continue;
        const double d = s.value(QStringLiteral("end_us")).toDouble() - s.value(QStringLiteral("start_us")).toDouble();
        (s.value(QStringLiteral("kind")).toString() == QLatin1String("comm") ? comm : compute)[l] += d;
    }
}

// Tp sizes are whole numbers: one tick per size.
QSharedPointer<QCPAxisTickerFixed> tpTicker()
{
    QSharedPointer<QCPAxisTickerFixed> t(new QCPAxisTickerFixed);
    t->setTickStep(1.0);
    t->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
    return t;
}

QSharedPointer<QCPAxisTickerText> layerTicker(int n)
{
    QSharedPointer<QCPAxisTickerText> t(new QCPAxisTickerText);
    const int step = std::max(1, n / 16);
    for (int i = 0; i < n; i += step)
        t->addTick(i, i == 0 ? QObject::tr("other") : QString::number(i - 1));
    return t;
}

} // namespace

ResultsPage::ResultsPage(QWidget* parent)
    : QWidget(parent)
    , m_tabs(new QTabWidget)
    , m_layers(makePlot())
    , m_speedup(makePlot())
    , m_latency(makePlot())
    , m_timeline(new TimelineView)
    , m_compare(makePlot())
    , m_bench(makePlot())
    , m_tpBox(new QComboBox)
    , m_rankBox(new QComboBox)
    , m_phaseBox(new QComboBox)
    , m_commBox(new QComboBox)
    , m_info(new QLabel(tr("Run a plan on the Run page; its results appear here.")))
{
    m_tabs->setDocumentMode(true);
    m_tabs->addTab(m_layers, tr("Per layer"));
    m_tabs->addTab(m_speedup, tr("Speedup"));
    m_tabs->addTab(m_latency, tr("Latency"));
    m_tabs->addTab(m_timeline, tr("Timeline"));
    m_tabs->addTab(m_compare, tr("Baseline vs current"));
    m_tabs->addTab(m_bench, tr("Collectives"));

    auto* baseline = new QPushButton(tr("Set as &Baseline"));
    auto* bench = new QPushButton(tr("Benchmark &Collectives"));
    bench->setToolTip(tr("tpstudio-cli bench comm over the chosen communicator (2 ranks, 8 B – 16 MiB)"));
    m_commBox->addItem(tr("local (threads)"), QStringLiteral("local"));
    if (!QStandardPaths::findExecutable(QStringLiteral("mpirun")).isEmpty())
        m_commBox->addItem(tr("MPI (mpirun -n 2)"), QStringLiteral("mpi"));
    m_commBox->addItem(tr("NCCL (one GPU per rank)"), QStringLiteral("nccl"));
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel(tr("TP size:")));
    bar->addWidget(m_tpBox);
    bar->addWidget(new QLabel(tr("Rank:")));
    bar->addWidget(m_rankBox);
    m_phaseBox->addItem(tr("Prefill"), QStringLiteral("prefill"));
    m_phaseBox->addItem(tr("Decode step"), QStringLiteral("decode"));
    m_phaseBox->setToolTip(tr("Per layer, timeline and comparison: the prefill forward, or the decode step whose time "
                              "was the median of the last iteration"));
    bar->addWidget(new QLabel(tr("Phase:")));
    bar->addWidget(m_phaseBox);
    bar->addWidget(baseline);
    bar->addWidget(m_commBox);
    bar->addWidget(bench);
    bar->addStretch(1);
    auto* lay = new QVBoxLayout(this);
    lay->addLayout(bar);
    lay->addWidget(m_info);
    lay->addWidget(m_tabs, 1);

    connect(m_tpBox, &QComboBox::currentIndexChanged, this, [this] {
        if (!m_run)
            return;
        const int tp = m_tpBox->currentData().toInt();
        m_rankBox->blockSignals(true);
        m_rankBox->clear();
        for (int r = 0; r < tp; ++r)
            m_rankBox->addItem(tr("rank %1").arg(r), r);
        m_rankBox->blockSignals(false);
        refresh();
    });
    connect(m_rankBox, &QComboBox::currentIndexChanged, this, &ResultsPage::refresh);
    connect(m_phaseBox, &QComboBox::currentIndexChanged, this, &ResultsPage::refresh);
    connect(baseline, &QPushButton::clicked, this, [this] {
        setBaseline(m_run);
        emit message(tr("Baseline set: the next run is compared with this one"));
    });
    connect(bench, &QPushButton::clicked, this, [this] { runBenchmark(m_commBox->currentData().toString()); });

    connect(m_timeline, &TimelineView::spanActivated, this, &ResultsPage::moduleActivated);
    for (auto* p : {m_speedup, m_latency, m_layers, m_compare, m_bench}) {
        p->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    }
}

void ResultsPage::setRun(std::shared_ptr<const RunData> run)
{
    m_run = std::move(run);
    m_tpBox->blockSignals(true);
    m_tpBox->clear();
    int maxTp = 1;
    for (const auto& v : m_run->record.value(QStringLiteral("runs")).toArray()) {
        const int tp = v.toObject().value(QStringLiteral("tp")).toInt();
        m_tpBox->addItem(QStringLiteral("T=%1").arg(tp), tp);
        maxTp = std::max(maxTp, tp);
    }
    m_tpBox->setCurrentIndex(m_tpBox->count() - 1);
    m_tpBox->blockSignals(false);
    m_rankBox->blockSignals(true);
    m_rankBox->clear();
    for (int r = 0; r < maxTp; ++r)
        m_rankBox->addItem(tr("rank %1").arg(r), r);
    m_rankBox->blockSignals(false);
    const QJsonObject s = m_run->record.value(QStringLiteral("settings")).toObject();
    const int steps = s.value(QStringLiteral("decode_steps")).toInt();
    m_phaseBox->blockSignals(true);
    m_phaseBox->setEnabled(steps > 0);
    if (steps == 0)
        m_phaseBox->setCurrentIndex(0);
    m_phaseBox->blockSignals(false);
    const QJsonObject prov = m_run->record.value(QStringLiteral("provenance")).toObject();
    const QString devices = prov.value(QStringLiteral("devices")).toString();
    m_info->setText(tr("%1 · %2 · batch %3 × seq %4%5 · %6 iterations · %7 · %8 · %9 storage%10")
                        .arg(s.value(QStringLiteral("class")).toString(), s.value(QStringLiteral("plan")).toString())
                        .arg(s.value(QStringLiteral("batch")).toInt())
                        .arg(s.value(QStringLiteral("seq")).toInt())
                        .arg(steps > 0 ? tr(" + %1 decode steps").arg(steps) : QString())
                        .arg(s.value(QStringLiteral("iterations")).toInt())
                        .arg(s.value(QStringLiteral("weights")).toString(),
                             devices.isEmpty() || devices == QLatin1String("cpu") ? prov.value(QStringLiteral("cpu")).toString() : devices,
                             s.value(QStringLiteral("storage_dtype")).toString(QStringLiteral("f32")),
                             s.value(QStringLiteral("emulated")).toBool()
                                 ? tr(" · EMULATED on one device, communication modelled with %1").arg(s.value(QStringLiteral("comm_model")).toString())
                                 : QString()));
    refresh();
}

QString ResultsPage::infoText() const { return m_info->text(); }

void ResultsPage::setPreview(std::shared_ptr<const PreviewResult> preview)
{
    m_preview = std::move(preview);
    plotSpeedup();
}

void ResultsPage::setBaseline(std::shared_ptr<const RunData> run)
{
    m_baseline = std::move(run);
    plotCompare();
}

QJsonObject ResultsPage::selectedRun(const RunData& d) const
{
    const int tp = m_tpBox->currentData().toInt();
    for (const auto& v : d.record.value(QStringLiteral("runs")).toArray())
        if (v.toObject().value(QStringLiteral("tp")).toInt() == tp)
            return v.toObject();
    return {};
}

QJsonObject ResultsPage::selectedPhase(const RunData& d) const
{
    const QJsonObject run = selectedRun(d);
    if (m_phaseBox->currentData().toString() == QLatin1String("decode") && run.contains(QStringLiteral("decode"))) {
        QJsonObject step = run.value(QStringLiteral("decode")).toObject();
        step.insert(QStringLiteral("tp"), run.value(QStringLiteral("tp")));
        return step;
    }
    return run;
}

void ResultsPage::refresh()
{
    plotLayers();
    plotSpeedup();
    plotLatency();
    plotTimeline();
    plotCompare();
}

void ResultsPage::plotLayers()
{
    m_layers->clearPlottables();
    if (!m_run)
        return m_layers->replot();
    const int rank = m_rankBox->currentData().toInt();
    QVector<double> compute, comm;
    layerTotals(selectedPhase(*m_run), rank, compute, comm);
    QVector<double> keys(compute.size());
    for (int i = 0; i < keys.size(); ++i)
        keys[i] = i;
    auto* c = new QCPBars(m_layers->xAxis, m_layers->yAxis);
    c->setName(tr("compute"));
    c->setBrush(computeColor());
    c->setPen(Qt::NoPen);
    c->setData(keys, compute, true);
    auto* m = new QCPBars(m_layers->xAxis, m_layers->yAxis);
    m->setName(tr("communication"));
    m->setBrush(commColor());
    m->setPen(Qt::NoPen);
    m->setData(keys, comm, true);
    m->moveAbove(c);
    m_layers->xAxis->setTicker(layerTicker(int(keys.size())));
    m_layers->xAxis->setLabel(tr("layer (T=%1, rank %2)").arg(m_tpBox->currentData().toInt()).arg(rank));
    m_layers->yAxis->setLabel(m_phaseBox->currentIndex() == 1 ? tr("µs per decode step") : tr("µs per forward"));
    m_layers->rescaleAxes();
    m_layers->xAxis->setRange(-1, keys.size());
    m_layers->yAxis->setRangeLower(0);
    m_layers->replot();
}

void ResultsPage::plotSpeedup()
{
    m_speedup->clearGraphs();
    QVector<double> mx, my, px, py;
    if (m_run)
        for (const auto& v : m_run->record.value(QStringLiteral("runs")).toArray()) {
            const QJsonObject r = v.toObject();
            if (r.value(QStringLiteral("speedup")).toDouble() > 0) {
                mx << r.value(QStringLiteral("tp")).toInt();
                my << r.value(QStringLiteral("speedup")).toDouble();
            }
        }
    if (m_preview)
        for (const auto& pt : m_preview->scaling)
            if (pt.valid) {
                px << pt.tp;
                py << pt.speedup;
            }
    auto* ideal = m_speedup->addGraph();
    ideal->setName(tr("ideal"));
    ideal->setPen(QPen(m_speedup->palette().color(QPalette::Mid), 1, Qt::DashLine));
    const double maxT = std::max({8.0, mx.isEmpty() ? 1.0 : *std::max_element(mx.begin(), mx.end()), px.isEmpty() ? 1.0 : *std::max_element(px.begin(), px.end())});
    ideal->setData({1, maxT}, {1, maxT});
    auto* pred = m_speedup->addGraph();
    pred->setName(m_preview && m_preview->hardware ? tr("predicted (%1)").arg(QString::fromStdString(m_preview->hardware->id)) : tr("predicted"));
    pred->setPen(QPen(computeColor(), 2));
    pred->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 6));
    pred->setData(px, py);
    auto* meas = m_speedup->addGraph();
    meas->setName(tr("measured"));
    meas->setPen(QPen(commColor(), 2));
    meas->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssSquare, 8));
    meas->setData(mx, my);
    m_speedup->xAxis->setTicker(tpTicker());
    m_speedup->xAxis->setLabel(tr("tp size"));
    m_speedup->yAxis->setLabel(tr("speedup vs T=1"));
    m_speedup->xAxis->setRange(0.5, maxT + 0.5);
    m_speedup->yAxis->setRange(0, maxT + 0.5);
    m_speedup->replot();
}

// TTFT and ITL against T: measured (squares) beside the cost model's prediction for the run's own
// batch, prompt and mean decode context, on the preview's hardware profile (discs).
void ResultsPage::plotLatency()
{
    m_latency->clearGraphs();
    m_latency->yAxis2->setVisible(true);
    m_latency->xAxis->setTicker(tpTicker());
    m_latency->xAxis->setLabel(tr("tp size"));
    m_latency->yAxis->setLabel(tr("time to first token (ms), blue"));
    m_latency->yAxis2->setLabel(tr("inter-token latency (ms), orange"));
    if (!m_run)
        return m_latency->replot();
    const QJsonObject s = m_run->record.value(QStringLiteral("settings")).toObject();
    const std::int64_t batch = s.value(QStringLiteral("batch")).toInteger(1), seq = s.value(QStringLiteral("seq")).toInteger(1);
    const int steps = s.value(QStringLiteral("decode_steps")).toInt();
    QVector<double> mt, ttft, itl, pt, pttft, pitl;
    int maxT = 1;
    for (const auto& v : m_run->record.value(QStringLiteral("runs")).toArray()) {
        const QJsonObject d = v.toObject().value(QStringLiteral("decode")).toObject();
        const int tp = v.toObject().value(QStringLiteral("tp")).toInt();
        maxT = std::max(maxT, tp);
        if (d.isEmpty())
            continue;
        mt << tp;
        ttft << d.value(QStringLiteral("ttft_s")).toDouble() * 1e3;
        itl << d.value(QStringLiteral("itl_median_s")).toDouble() * 1e3;
    }
    QString predictedOn;
    if (m_preview && m_preview->spec && m_preview->hardware && m_preview->graph.plan && steps > 0) {
        const QString dt = s.value(QStringLiteral("storage_dtype")).toString(QStringLiteral("f32"));
        tp::ShardOptions o{.batch = batch, .seq = seq};
        o.activationDtype = dt == QLatin1String("bf16") ? tp::DType::BF16 : dt == QLatin1String("f16") ? tp::DType::F16 : tp::DType::F32;
        // Where the run computed prefill's logits (a decoding run: the last positions, as generate()).
        o.lastPositionLogits = s.value(QStringLiteral("logits")).toString(QStringLiteral("last")) == QLatin1String("last");
        for (const auto& p : tp::predictScaling(*m_preview->spec, *m_preview->graph.plan, o, *m_preview->hardware, maxT, seq + steps / 2))
            if (p.valid && std::find(mt.begin(), mt.end(), double(p.tp)) != mt.end()) {
                pt << p.tp;
                pttft << p.seconds * 1e3;
                pitl << p.decodeStepSeconds * 1e3;
            }
        predictedOn = tr(" (%1)").arg(QString::fromStdString(m_preview->hardware->id));
    }
    auto series = [&](QCPAxis* y, const QString& name, const QColor& c, QCPScatterStyle::ScatterShape shape, Qt::PenStyle pen,
                      const QVector<double>& x, const QVector<double>& v) {
        auto* g = m_latency->addGraph(m_latency->xAxis, y);
        g->setName(name);
        g->setPen(QPen(c, 2, pen));
        g->setScatterStyle(QCPScatterStyle(shape, 8));
        g->setData(x, v);
    };
    series(m_latency->yAxis, tr("TTFT measured"), computeColor(), QCPScatterStyle::ssSquare, Qt::SolidLine, mt, ttft);
    series(m_latency->yAxis, tr("TTFT predicted%1").arg(predictedOn), computeColor(), QCPScatterStyle::ssDisc, Qt::DashLine, pt, pttft);
    series(m_latency->yAxis2, tr("ITL measured"), commColor(), QCPScatterStyle::ssSquare, Qt::SolidLine, mt, itl);
    series(m_latency->yAxis2, tr("ITL predicted%1 at context %2").arg(predictedOn).arg(seq + steps / 2), commColor(),
           QCPScatterStyle::ssDisc, Qt::DashLine, pt, pitl);
    auto top = [](const QVector<double>& a, const QVector<double>& b) {
        double m = 0;
        for (double x : a + b)
            m = std::max(m, x);
        return m > 0 ? m * 1.15 : 1.0;
    };
    m_latency->xAxis->setRange(0.5, maxT + 0.5);
    m_latency->yAxis->setRange(0, top(ttft, pttft));
    m_latency->yAxis2->setRange(0, top(itl, pitl));
    m_latency->replot();
}

void ResultsPage::plotTimeline()
{
    if (!m_run)
        return m_timeline->setSpans({}, 1, {});
    const QJsonObject run = selectedPhase(*m_run);
    const int tp = run.value(QStringLiteral("tp")).toInt();
    std::vector<tp::RecordedSpan> spans;
    for (const auto& v : run.value(QStringLiteral("spans")).toArray()) {
        const QJsonObject s = v.toObject();
        tp::RecordedSpan x;
        x.rank = std::clamp(s.value(QStringLiteral("rank")).toInt(), 0, std::max(0, tp - 1));
        x.name = s.value(QStringLiteral("name")).toString().toStdString();
        x.kind = s.value(QStringLiteral("kind")).toString().toStdString();
        x.op = s.value(QStringLiteral("op")).toString().toStdString();
        x.layer = s.value(QStringLiteral("layer")).toInt(-1);
        x.startUs = s.value(QStringLiteral("start_us")).toDouble();
        x.endUs = s.value(QStringLiteral("end_us")).toDouble();
        x.bytes = s.value(QStringLiteral("bytes")).toInteger();
        x.waitUs = s.value(QStringLiteral("wait_us")).toDouble(); // absent in older records: 0
        spans.push_back(std::move(x));
    }
    m_timeline->setSpans(std::move(spans), tp,
                         run.contains(QStringLiteral("span_step"))
                             ? tr("Decode step %1 of the last iteration (T=%2)").arg(run.value(QStringLiteral("span_step")).toInt()).arg(tp)
                             : tr("The last timed iteration (T=%1)").arg(tp));
}

void ResultsPage::plotCompare()
{
    m_compare->clearPlottables();
    if (!m_run || !m_baseline) {
        m_compare->replot();
        return;
    }
    QVector<double> bc, bm, cc, cm;
    layerTotals(selectedPhase(*m_baseline), -1, bc, bm);
    layerTotals(selectedPhase(*m_run), -1, cc, cm);
    const int n = int(std::max(bc.size(), cc.size()));
    QVector<double> kb(n), kc(n), vb(n, 0), vc(n, 0);
    for (int i = 0; i < n; ++i) {
        kb[i] = i - 0.2;
        kc[i] = i + 0.2;
        if (i < bc.size())
            vb[i] = bc[i] + bm[i];
        if (i < cc.size())
            vc[i] = cc[i] + cm[i];
    }
    auto* b = new QCPBars(m_compare->xAxis, m_compare->yAxis);
    b->setName(tr("baseline"));
    b->setWidth(0.4);
    b->setBrush(m_compare->palette().color(QPalette::Mid));
    b->setPen(Qt::NoPen);
    b->setData(kb, vb, true);
    auto* c = new QCPBars(m_compare->xAxis, m_compare->yAxis);
    c->setName(tr("current"));
    c->setWidth(0.4);
    c->setBrush(computeColor());
    c->setPen(Qt::NoPen);
    c->setData(kc, vc, true);
    m_compare->xAxis->setTicker(layerTicker(n));
    m_compare->xAxis->setLabel(tr("layer (T=%1, all ranks, compute + communication)").arg(m_tpBox->currentData().toInt()));
    m_compare->yAxis->setLabel(tr("µs per forward"));
    m_compare->rescaleAxes();
    m_compare->xAxis->setRange(-1, n);
    m_compare->yAxis->setRangeLower(0);
    m_compare->replot();
}

void ResultsPage::setBenchmark(const QString& communicator, const QJsonArray& rows)
{
    m_benchRows[communicator] = rows;
    plotBenchmark();
}

void ResultsPage::plotBenchmark()
{
    m_bench->clearGraphs();
    m_bench->xAxis->setScaleType(QCPAxis::stLogarithmic);
    m_bench->xAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    m_bench->yAxis->setScaleType(QCPAxis::stLogarithmic);
    m_bench->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    m_bench->yAxis2->setVisible(true);
    m_bench->xAxis->setLabel(tr("message size (bytes)"));
    m_bench->yAxis->setLabel(tr("time (µs), solid"));
    m_bench->yAxis2->setLabel(tr("bus bandwidth (GB/s), dashed"));
    int hue = 0;
    double maxBw = 0, minT = 1e300, maxT = 0, minX = 1e300, maxX = 0;
    for (const auto& [comm, rows] : m_benchRows) {
        std::map<QString, std::pair<QVector<double>, std::pair<QVector<double>, QVector<double>>>> byOp;
        for (const auto& v : rows) {
            const QJsonObject r = v.toObject();
            const QJsonObject cell = r.contains(QStringLiteral("out_of_place")) ? r.value(QStringLiteral("out_of_place")).toObject()
                                                                               : r.value(QStringLiteral("in_place")).toObject();
            auto& series = byOp[r.value(QStringLiteral("op")).toString()];
            series.first << r.value(QStringLiteral("size")).toDouble();
            series.second.first << cell.value(QStringLiteral("time_us")).toDouble();
            series.second.second << cell.value(QStringLiteral("busbw_gbps")).toDouble();
            maxBw = std::max(maxBw, cell.value(QStringLiteral("busbw_gbps")).toDouble());
            const double t = cell.value(QStringLiteral("time_us")).toDouble(), x = r.value(QStringLiteral("size")).toDouble();
            if (t > 0) {
                minT = std::min(minT, t);
                maxT = std::max(maxT, t);
            }
            minX = std::min(minX, x);
            maxX = std::max(maxX, x);
        }
        for (const auto& [op, s] : byOp) {
            const QColor color = QColor::fromHsv((hue++ * 67) % 360, 170, 200);
            auto* t = m_bench->addGraph(m_bench->xAxis, m_bench->yAxis);
            t->setName(QStringLiteral("%1 %2").arg(comm, op));
            t->setPen(QPen(color, 2));
            t->setData(s.first, s.second.first);
            auto* b = m_bench->addGraph(m_bench->xAxis, m_bench->yAxis2);
            b->removeFromLegend();
            b->setPen(QPen(color, 1.5, Qt::DashLine));
            b->setData(s.first, s.second.second);
        }
    }
    if (maxT > 0) {
        m_bench->xAxis->setRange(minX / 1.5, maxX * 1.5);
        m_bench->yAxis->setRange(minT / 1.5, maxT * 1.5);
    }
    m_bench->yAxis2->setRange(0, std::max(0.1, maxBw * 1.1));
    m_bench->replot();
}

void ResultsPage::runBenchmark(const QString& communicator)
{
    if (m_benchProc)
        return;
    m_benchProc = new QProcess(this);
    connect(m_benchProc, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
        const QByteArray out = m_benchProc->readAllStandardOutput();
        const QString err = QString::fromUtf8(m_benchProc->readAllStandardError()).trimmed();
        m_benchProc->deleteLater();
        m_benchProc = nullptr;
        // Under mpirun only rank 0 prints; its JSON is the whole output.
        const QJsonDocument d = QJsonDocument::fromJson(out);
        if (status != QProcess::NormalExit || code != 0 || !d.isObject()) {
            emit message(tr("Collective benchmark failed: %1").arg(err.isEmpty() ? tr("exit code %1").arg(code) : err.section(QLatin1Char('\n'), -1)));
            emit benchmarkFinished();
            return;
        }
        setBenchmark(d.object().value(QStringLiteral("communicator")).toString(), d.object().value(QStringLiteral("rows")).toArray());
        m_tabs->setCurrentWidget(m_bench);
        emit benchmarkFinished();
    });
    const QStringList bench{QStringLiteral("bench"), QStringLiteral("comm"), QStringLiteral("--json"), QStringLiteral("-o"),
                            QStringLiteral("all"), QStringLiteral("-e"), QStringLiteral("16M"), QStringLiteral("-f"),
                            QStringLiteral("4"), QStringLiteral("-n"), QStringLiteral("5"), QStringLiteral("-w"),
                            QStringLiteral("1"), QStringLiteral("--comm"), communicator};
    if (communicator == QLatin1String("mpi")) {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("OMPI_ALLOW_RUN_AS_ROOT"), QStringLiteral("1")); // harmless when not root
        env.insert(QStringLiteral("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"), QStringLiteral("1"));
        m_benchProc->setProcessEnvironment(env);
        m_benchProc->start(QStandardPaths::findExecutable(QStringLiteral("mpirun")),
                           QStringList{QStringLiteral("-n"), QStringLiteral("2"), QStringLiteral("--oversubscribe"), RunPage::cliPath()} + bench);
    } else {
        m_benchProc->start(RunPage::cliPath(), bench);
    }
}

QCustomPlot* ResultsPage::currentPlot() const { return qobject_cast<QCustomPlot*>(m_tabs->currentWidget()); }

bool ResultsPage::exportChart(const QString& path) const
{
    if (m_tabs->currentWidget() == m_timeline) {
        // Not a QCustomPlot: the widget (search bar, lanes, axis) rendered as shown.
        QWidget* c = m_timeline;
        if (path.endsWith(QLatin1String(".png"), Qt::CaseInsensitive))
            return c->grab().save(path, "PNG");
        if (path.endsWith(QLatin1String(".svg"), Qt::CaseInsensitive)) {
            QSvgGenerator gen;
            gen.setFileName(path);
            gen.setSize(c->size());
            gen.setViewBox(c->rect());
            gen.setTitle(m_tabs->tabText(m_tabs->currentIndex()));
            QPainter painter;
            if (!painter.begin(&gen))
                return false;
            c->render(&painter);
            painter.end();
            return QFile::exists(path);
        }
        if (path.endsWith(QLatin1String(".pdf"), Qt::CaseInsensitive)) {
            QPdfWriter pdf(path);
            pdf.setPageSize(QPageSize(QSizeF(c->width(), c->height()), QPageSize::Point));
            pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
            pdf.setResolution(72);
            QPainter painter;
            if (!painter.begin(&pdf))
                return false;
            c->render(&painter);
            painter.end();
            return QFile::exists(path);
        }
        return c->grab().save(path);
    }
    QCustomPlot* p = currentPlot();
    if (!p)
        return false;
    const int w = std::max(p->width(), 800), h = std::max(p->height(), 500);
    if (path.endsWith(QLatin1String(".pdf"), Qt::CaseInsensitive))
        return p->savePdf(path, w, h);
    if (path.endsWith(QLatin1String(".svg"), Qt::CaseInsensitive)) {
        QSvgGenerator gen;
        gen.setFileName(path);
        gen.setSize(QSize(w, h));
        gen.setViewBox(QRect(0, 0, w, h));
        gen.setTitle(m_tabs->tabText(m_tabs->currentIndex()));
        QCPPainter painter;
        if (!painter.begin(&gen))
            return false;
        p->toPainter(&painter, w, h);
        painter.end();
        return QFile::exists(path);
    }
    return p->savePng(path, w, h);
}

bool ResultsPage::exportRecord(const QString& path, const QString& kind) const
{
    if (!m_run)
        return false;
    const QString src = kind == QLatin1String("csv") ? m_run->csvPath : kind == QLatin1String("trace") ? m_run->tracePath : m_run->jsonPath;
    QFile::remove(path);
    return QFile::copy(src, path);
}

int ResultsPage::itemCount(int tab) const
{
    if (m_tabs->widget(tab) == m_timeline)
        return static_cast<int>(m_timeline->spans().size());
    auto* p = qobject_cast<QCustomPlot*>(m_tabs->widget(tab));
    if (!p)
        return 0;
    int n = p->itemCount();
    for (int i = 0; i < p->plottableCount(); ++i)
        if (auto* g = qobject_cast<QCPGraph*>(p->plottable(i)))
            n += g->dataCount();
        else if (auto* b = qobject_cast<QCPBars*>(p->plottable(i)))
            n += b->dataCount();
    return n;
}

} // namespace tpui
