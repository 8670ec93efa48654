#include "widgets/results_page.h"

#include "models/format.h"
#include "widgets/theme.h"
#include "widgets/timeline_view.h"
#include "tp/cost/cost_model.h"
#include "tp/cost/hardware.h"

#include <qcustomplot.h>

#include <QComboBox>
#include <QFile>
#include <QFileInfo>
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

#include <algorithm>
#include <cmath>
#include <map>

namespace tpui {

namespace {

QColor computeColor() { return QColor(70, 130, 180); }
QColor commColor() { return QColor(230, 140, 40); }
// Readable on light and dark backgrounds alike.
QColor fasterColor() { return QColor(46, 160, 90); }
QColor slowerColor() { return QColor(215, 70, 60); }

const char* kEmptyName = "empty-state";
const char* kNoteName = "profile-note";

QCustomPlot* makePlot()
{
    auto* p = new QCustomPlot;
    p->setMinimumHeight(280);
    p->legend->setVisible(true);
    themePlot(p); // colours from the palette, light or dark, and again when it changes
    return p;
}

// A centred line over the axis rect saying why the chart is empty and what to do.
void showEmpty(QCustomPlot* p, const QString& text, bool hideLegend = true)
{
    auto* t = new QCPItemText(p);
    t->setObjectName(QLatin1String(kEmptyName));
    t->position->setType(QCPItemPosition::ptAxisRectRatio);
    t->position->setCoords(0.5, 0.5);
    t->setPositionAlignment(Qt::AlignCenter);
    t->setTextAlignment(Qt::AlignCenter);
    t->setText(text);
    t->setColor(p->palette().color(QPalette::Text));
    t->setProperty("themed", true);
    QFont f = p->font();
    if (f.pointSizeF() > 0)
        f.setPointSizeF(f.pointSizeF() * 1.15);
    t->setFont(f);
    t->setClipToAxisRect(false);
    if (hideLegend)
        p->legend->setVisible(false); // an empty legend box says nothing
}

// A line above the chart (a row of its layout, so it never covers the curves or the legend), e.g.
// which profile predicted; removed by clearNote.
void clearNote(QCustomPlot* p)
{
    for (int i = p->plotLayout()->elementCount() - 1; i >= 0; --i)
        if (auto* t = qobject_cast<QCPTextElement*>(p->plotLayout()->elementAt(i)); t && t->objectName() == QLatin1String(kNoteName))
            p->plotLayout()->remove(t);
    p->plotLayout()->simplify();
}

// Another line above the chart (above those already there).
void addNote(QCustomPlot* p, const QString& text, bool warning)
{
    p->plotLayout()->insertRow(0);
    auto* t = new QCPTextElement(p, text);
    t->setObjectName(QLatin1String(kNoteName));
    t->setTextColor(warning ? slowerColor() : p->palette().color(QPalette::Text));
    p->plotLayout()->addElement(0, 0, t);
}

// A caveat (in the warning colour) over an information line (in the text colour); either may be "".
void showNotes(QCustomPlot* p, const QString& caveat, const QString& info)
{
    clearNote(p);
    if (!info.isEmpty())
        addNote(p, info, false);
    if (!caveat.isEmpty())
        addNote(p, caveat, true);
}

// Min–max whiskers around `g`'s points (errors below and above each value).
QCPErrorBars* whiskers(QCustomPlot* p, QCPAbstractPlottable* on, QCPAxis* y, const QVector<double>& minus, const QVector<double>& plus,
                       const QColor& c)
{
    auto* e = new QCPErrorBars(p->xAxis, y);
    e->removeFromLegend();
    e->setDataPlottable(on);
    e->setData(minus, plus);
    e->setPen(QPen(c, 1.2));
    e->setWhiskerWidth(6);
    return e;
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

// Log ticks that read as sizes: 8 B, 1 KiB, 16 MiB.
class BytesTicker final : public QCPAxisTickerLog
{
protected:
    QString getTickLabel(double tick, const QLocale&, QChar, int) override
    {
        static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        int u = 0;
        while (tick >= 1024.0 && u < 4) {
            tick /= 1024.0;
            ++u;
        }
        return QStringLiteral("%1 %2").arg(tick, 0, 'g', 3).arg(QLatin1String(units[u]));
    }
};

// A prediction's error against a measurement, as a signed percentage ("+12%", "−3%").
QString errorText(double predicted, double measured)
{
    if (!(measured > 0) || !std::isfinite(predicted))
        return QStringLiteral("—");
    const double e = 100 * (predicted - measured) / measured;
    return (e < 0 ? QStringLiteral("−") : QStringLiteral("+")) + QString::number(std::abs(e), 'f', std::abs(e) < 10 ? 1 : 0)
           + QLatin1Char('%');
}

// A small label beside a measured point saying how far the prediction is from it: on the side away
// from the predicted point (above when the prediction is lower), right of it or (left) left of it.
void errorLabel(QCustomPlot* p, QCPAxis* y, double x, double value, double predicted, const QString& text, const QColor& c,
                bool left = false)
{
    auto* t = new QCPItemText(p);
    t->position->setAxes(p->xAxis, y);
    t->position->setCoords(x, value);
    t->setPositionAlignment((left ? Qt::AlignRight : Qt::AlignLeft) | (predicted > value ? Qt::AlignTop : Qt::AlignBottom));
    t->setPadding(QMargins(9, 2, 9, 2)); // clear of the whiskers
    t->setText(text);
    t->setColor(c);
}

double minOf(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }
double maxOf(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

// Per layer slot (layer + 1) one rank's compute and communication µs, from the phase's spans.
void rankTotals(const std::vector<tp::LayerTiming>& layers, const std::vector<tp::RecordedSpan>& spans, int rank,
                QVector<double>& compute, QVector<double>& comm)
{
    compute.fill(0.0, qsizetype(layers.size()));
    comm.fill(0.0, qsizetype(layers.size()));
    for (const auto& s : spans) {
        if (s.rank != rank)
            continue;
        const int l = s.layer + 1;
        if (l < 0 || l >= compute.size())
            continue;
        (s.kind == "comm" ? comm : compute)[l] += s.endUs - s.startUs;
    }
}

tp::DType dtypeOf(const std::string& d) { return d == "bf16" ? tp::DType::BF16 : d == "f16" ? tp::DType::F16 : tp::DType::F32; }

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
    , m_warning(new QLabel)
    , m_benchButton(new QPushButton(tr("Benchmark &Collectives")))
{
    m_tabs->setDocumentMode(true);
    m_tabs->addTab(m_layers, tr("Per layer"));
    m_tabs->addTab(m_speedup, tr("Speedup"));
    m_tabs->addTab(m_latency, tr("Latency"));
    m_tabs->addTab(m_timeline, tr("Timeline"));
    m_tabs->addTab(m_compare, tr("Baseline vs current"));
    m_tabs->addTab(m_bench, tr("Collectives"));

    auto* baseline = new QPushButton(tr("Set as &Baseline"));
    QPushButton* bench = m_benchButton;
    bench->setToolTip(tr("tpstudio-cli bench comm over the chosen communicator (2 ranks, 8 B – 16 MiB, about 10 s)"));
    m_commBox->addItem(tr("local (threads)"), QStringLiteral("local"));
    if (!QStandardPaths::findExecutable(QStringLiteral("mpirun")).isEmpty())
        m_commBox->addItem(tr("MPI (mpirun -n 2)"), QStringLiteral("mpi"));
    m_commBox->addItem(tr("NCCL (one GPU per rank)"), QStringLiteral("nccl"));
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel(tr("TP size:")));
    bar->addWidget(m_tpBox);
    bar->addWidget(new QLabel(tr("Rank:")));
    m_rankBox->setToolTip(tr("Per layer: the slowest rank of each layer (with the spread over iterations), or one rank's "
                             "figures of the last iteration"));
    m_rankBox->setSizeAdjustPolicy(QComboBox::AdjustToContents);
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
    m_warning->setWordWrap(true);
    m_warning->setTextFormat(Qt::PlainText);
    m_warning->setStyleSheet(QStringLiteral("color: %1").arg(slowerColor().name()));
    m_warning->hide();
    lay->addWidget(m_warning);
    lay->addWidget(m_tabs, 1);

    connect(m_tpBox, &QComboBox::currentIndexChanged, this, [this] {
        if (!m_run)
            return;
        const int tp = m_tpBox->currentData().toInt();
        const int was = m_rankBox->currentData().toInt();
        m_rankBox->blockSignals(true);
        m_rankBox->clear();
        m_rankBox->addItem(tr("slowest rank"), -1);
        for (int r = 0; r < tp; ++r)
            m_rankBox->addItem(tr("rank %1").arg(r), r);
        m_rankBox->setCurrentIndex(std::max(0, m_rankBox->findData(was)));
        m_rankBox->blockSignals(false);
        refresh();
    });
    connect(m_rankBox, &QComboBox::currentIndexChanged, this, &ResultsPage::refresh);
    connect(m_phaseBox, &QComboBox::currentIndexChanged, this, &ResultsPage::refresh);
    connect(baseline, &QPushButton::clicked, this, [this] {
        if (!m_run) {
            emit message(tr("No run to set as baseline: run a plan first"));
            return;
        }
        setBaseline(m_run);
        emit message(tr("Baseline set: the next run is compared with this one"));
    });
    connect(bench, &QPushButton::clicked, this, [this] { runBenchmark(m_commBox->currentData().toString()); });

    connect(m_timeline, &TimelineView::spanActivated, this, &ResultsPage::moduleActivated);
    for (auto* p : {m_speedup, m_latency, m_layers, m_compare, m_bench}) {
        p->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    }
    // Per layer and comparison: tooltips with the layer's figures in units by magnitude.
    for (QCustomPlot* p : {m_layers, m_compare})
        connect(p, &QCustomPlot::mouseMove, this, [this, p](QMouseEvent* e) {
            const int idx = int(std::lround(p->xAxis->pixelToCoord(e->position().x())));
            const tp::TpRun* run = m_run ? typedRun(*m_run) : nullptr;
            const auto* layers = m_run ? typedLayers(*m_run) : nullptr;
            if (!run || !layers || idx < 0 || idx >= int(layers->size()) || !p->axisRect()->rect().contains(e->position().toPoint())) {
                QToolTip::hideText();
                return;
            }
            const tp::LayerTiming& l = (*layers)[std::size_t(idx)];
            QString tip = tr("%1 · slowest rank, last iteration\ncompute %2 · communication %3")
                              .arg(l.layer < 0 ? tr("outside the layers") : tr("layer %1").arg(l.layer), humanSeconds(l.computeUs / 1e6),
                                   humanSeconds(l.commUs / 1e6));
            if (l.hasSpread)
                tip += tr("\nmin %1 · median %2 · max %3 (compute + communication over the samples)")
                           .arg(humanSeconds(l.minUs / 1e6), humanSeconds(l.medianUs / 1e6), humanSeconds(l.maxUs / 1e6));
            if (const tp::PhaseComparison* c = p == m_layers && m_rankBox->currentData().toInt() < 0 ? comparedPhase() : nullptr;
                c && idx < int(c->layers.size())) {
                const tp::LayerComparison& lc = c->layers[std::size_t(idx)];
                tip += tr("\npredicted: compute %1 · communication %2 (%3 against the measured median)")
                           .arg(humanSeconds(lc.predictedComputeUs / 1e6), humanSeconds(lc.predictedCommUs / 1e6),
                                errorText(lc.predictedUs, lc.measuredUs));
            }
            if (p == m_compare && m_baseline)
                if (const auto* b = typedLayers(*m_baseline); b && idx < int(b->size()))
                    tip += tr("\nbaseline: %1").arg(humanSeconds(((*b)[std::size_t(idx)].computeUs + (*b)[std::size_t(idx)].commUs) / 1e6));
            QToolTip::showText(e->globalPosition().toPoint(), tip, p);
        });
    // The collective benchmark's legend beside the curves, never over them.
    m_bench->axisRect()->insetLayout()->take(m_bench->legend);
    auto* side = new QCPLayoutGrid;
    m_bench->plotLayout()->addElement(0, 1, side);
    m_bench->plotLayout()->setColumnStretchFactor(1, 0.001);
    side->addElement(0, 0, m_bench->legend);
    side->addElement(1, 0, new QCPLayoutElement(m_bench)); // the legend at the top, the rest empty
    side->setRowStretchFactor(0, 0.001);
    side->setRowStretchFactor(1, 1);
    m_bench->legend->setMargins(QMargins(6, 6, 6, 6));
    refresh();
    plotBenchmark();
}

void ResultsPage::setRun(std::shared_ptr<const RunData> run)
{
    m_run = std::move(run);
    m_userProfiles = tp::userHardwareProfiles();
    const tp::RunRecord& rec = m_run->record;
    m_tpBox->blockSignals(true);
    m_tpBox->clear();
    int maxTp = 1;
    for (const tp::TpRun& r : rec.runs) {
        m_tpBox->addItem(QStringLiteral("T=%1").arg(r.tp), r.tp);
        maxTp = std::max(maxTp, r.tp);
    }
    m_tpBox->setCurrentIndex(m_tpBox->count() - 1);
    m_tpBox->blockSignals(false);
    m_rankBox->blockSignals(true);
    m_rankBox->clear();
    m_rankBox->addItem(tr("slowest rank"), -1);
    for (int r = 0; r < m_tpBox->currentData().toInt(); ++r)
        m_rankBox->addItem(tr("rank %1").arg(r), r);
    m_rankBox->blockSignals(false);
    const tp::RunSettings& s = rec.settings;
    const int steps = s.decodeSteps;
    m_phaseBox->blockSignals(true);
    m_phaseBox->setEnabled(steps > 0);
    if (steps == 0)
        m_phaseBox->setCurrentIndex(0);
    m_phaseBox->blockSignals(false);
    const QString devices = QString::fromStdString(rec.provenance.devices);
    auto q = [](const std::string& x) { return QString::fromStdString(x); };
    m_info->setText(tr("%1 · %2 · batch %3 × seq %4%5 · %6 iterations · %7 · %8 · %9 storage%10")
                        .arg(q(s.modelClass), q(s.plan))
                        .arg(s.batch)
                        .arg(s.seq)
                        .arg(steps > 0 ? tr(" + %1 decode steps").arg(steps) : QString())
                        .arg(s.iterations)
                        .arg(q(s.weights), devices.isEmpty() || devices == QLatin1String("cpu") ? q(rec.provenance.cpuModel) : devices,
                             q(s.dtype),
                             s.emulated ? tr(" · EMULATED on one device, communication modelled with %1").arg(q(s.commModel))
                                        : QString()));
    const std::string busy = tp::hostLoadWarning(rec);
    QString warning = q(busy);
    if (!warning.isEmpty())
        warning[0] = warning[0].toUpper();
    m_warning->setText(busy.empty() ? QString() : tr("⚠ %1.").arg(warning));
    m_warning->setVisible(!busy.empty());
    compare();
    refresh();
}

QString ResultsPage::infoText() const { return m_info->text(); }

QString ResultsPage::warningText() const { return m_warning->text(); }

void ResultsPage::setModelConfig(std::shared_ptr<const tp::ModelSpec> spec, std::string configText)
{
    m_configSpec = std::move(spec);
    m_configText = std::move(configText);
}

void ResultsPage::setPreview(std::shared_ptr<const PreviewResult> preview)
{
    m_preview = std::move(preview);
    compare();
    plotLayers();
    plotSpeedup();
    plotLatency();
}

void ResultsPage::compare()
{
    m_cmp.clear();
    m_cmpNote.clear();
    if (!m_run || !m_preview || !m_preview->spec || !m_preview->graph.plan)
        return;
    const auto hw = predictionProfile();
    if (!hw)
        return; // profileNote says so
    // The config text belongs to the model it was read with; for another spec the digest check says the model differs.
    const std::string_view config = m_configSpec == m_preview->spec ? std::string_view(m_configText) : std::string_view();
    auto c = tp::compareRecord(m_run->record, *m_preview->spec, config, *m_preview->graph.plan, *hw);
    if (!c) {
        m_cmpNote = tr("No prediction beside this run: %1").arg(QString::fromStdString(c.status().message()));
        return;
    }
    m_cmp = std::move(*c);
}

void ResultsPage::setBaseline(std::shared_ptr<const RunData> run)
{
    m_baseline = std::move(run);
    plotCompare();
}

const tp::TpRun* ResultsPage::typedRun(const RunData& d) const
{
    const int tp = m_tpBox->currentData().toInt();
    for (const tp::TpRun& r : d.record.runs)
        if (r.tp == tp)
            return &r;
    return nullptr;
}

bool ResultsPage::decodePhase() const { return m_phaseBox->currentData().toString() == QLatin1String("decode"); }

const std::vector<tp::LayerTiming>* ResultsPage::typedLayers(const RunData& d) const
{
    const tp::TpRun* r = typedRun(d);
    if (!r)
        return nullptr;
    if (decodePhase())
        return r->decode.steps > 0 ? &r->decode.layers : nullptr; // a baseline that did not decode has no step
    return &r->layers;
}

std::optional<tp::HardwareProfile> ResultsPage::predictionProfile() const
{
    if (!m_run)
        return m_preview ? m_preview->hardware : std::nullopt;
    const tp::RunRecord& rec = m_run->record;
    if (rec.settings.backend != "cpu")
        return m_preview ? m_preview->hardware : std::nullopt;
    // A CPU run: a calibrated profile of this CPU, else any calibrated CPU profile, else local-cpu.
    const tp::HardwareProfile* any = nullptr;
    for (const tp::HardwareProfile& p : m_userProfiles) {
        if (p.calibrated.empty() || p.name.find("(cpu,") == std::string::npos)
            continue;
        if (!rec.provenance.cpuModel.empty() && p.name.find(rec.provenance.cpuModel) != std::string::npos)
            return p;
        if (!any)
            any = &p;
    }
    if (any)
        return *any;
    if (auto cpu = tp::findHardware("local-cpu"); cpu.ok())
        return *cpu;
    return std::nullopt;
}

QString ResultsPage::profileNote() const
{
    if (!m_run)
        return {};
    const auto used = predictionProfile();
    const QString toolbar = m_preview && m_preview->hardware ? QString::fromStdString(m_preview->hardware->id) : QString();
    const QString backend = QString::fromStdString(m_run->record.settings.backend);
    if (!used)
        return tr("no prediction: no hardware profile for this %1 run").arg(backend.toUpper());
    const QString id = QString::fromStdString(used->id);
    if (toolbar.isEmpty() || toolbar == id)
        return {};
    return m_run->record.settings.backend == "cpu"
               ? tr("predicted on %1 for this CPU run; the toolbar's %2 applies to GPUs").arg(id, toolbar)
               : tr("predicted on %1 (the toolbar's profile) for this %2 run").arg(id, backend.toUpper());
}

QString ResultsPage::exportTitle() const
{
    if (m_tabs->currentWidget() == m_bench) {
        QStringList comms;
        for (const auto& [comm, rows] : m_benchRows)
            comms << comm;
        return tr("Collectives — tpstudio-cli bench comm, 2 ranks, over %1")
            .arg(comms.isEmpty() ? tr("nothing yet") : comms.join(QStringLiteral(", ")));
    }
    if (!m_run)
        return m_tabs->tabText(m_tabs->currentIndex()).remove(QLatin1Char('&'));
    const tp::RunSettings& s = m_run->record.settings;
    const auto hw = predictionProfile();
    return tr("%1 — %2 · T=%3 · %4 · batch %5 × seq %6 · %7 · %8 · predicted on %9")
        .arg(m_tabs->tabText(m_tabs->currentIndex()).remove(QLatin1Char('&')),
             QFileInfo(QString::fromStdString(s.model)).fileName().isEmpty() ? QString::fromStdString(s.modelClass)
                                                                              : QFileInfo(QString::fromStdString(s.model)).fileName())
        .arg(m_tpBox->currentData().toInt())
        .arg(QString::fromStdString(s.backend) + (s.emulated ? tr(" (emulated)") : QString()))
        .arg(s.batch)
        .arg(s.seq)
        .arg(QString::fromStdString(s.dtype), decodePhase() ? tr("decode step") : tr("prefill"),
             hw ? QString::fromStdString(hw->id) : tr("no profile"));
}

void ResultsPage::changeEvent(QEvent* event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange)
        QMetaObject::invokeMethod(this, [this] { refresh(); plotBenchmark(); }, Qt::QueuedConnection);
}

void ResultsPage::refresh()
{
    plotLayers();
    plotSpeedup();
    plotLatency();
    plotTimeline();
    plotCompare();
}

const tp::PhaseComparison* ResultsPage::comparedPhase() const
{
    const tp::TpRun* run = m_run ? typedRun(*m_run) : nullptr;
    if (!run)
        return nullptr;
    const bool decode = decodePhase() && run->decode.steps > 0;
    for (const tp::RunComparison& c : m_cmp)
        if (c.tp == run->tp)
            return decode ? (c.decode ? &*c.decode : nullptr) : &c.prefill;
    return nullptr;
}

void ResultsPage::plotLayers()
{
    m_layers->clearPlottables();
    m_layers->clearItems();
    m_layers->legend->setVisible(true);
    clearNote(m_layers);
    const tp::TpRun* run = m_run ? typedRun(*m_run) : nullptr;
    if (!run) {
        showEmpty(m_layers, tr("No run yet: run a plan on the Run page (Run ▶); per-layer compute and communication appear here"));
        return m_layers->replot();
    }
    const bool decode = decodePhase() && run->decode.steps > 0;
    const auto& layers = decode ? run->decode.layers : run->layers;
    const auto& spans = decode ? run->decode.spans : run->spans;
    const int rank = m_rankBox->currentData().toInt();
    QVector<double> compute, comm;
    if (rank < 0) {
        for (const auto& l : layers) {
            compute << l.computeUs;
            comm << l.commUs;
        }
    } else {
        rankTotals(layers, spans, rank, compute, comm);
    }
    // The cost model's figures for the same layers (slowest rank), drawn beside the measured ones.
    const tp::PhaseComparison* cmp = rank < 0 ? comparedPhase() : nullptr;
    if (cmp && cmp->layers.size() != layers.size())
        cmp = nullptr;
    QVector<double> pCompute, pComm;
    if (cmp)
        for (const auto& l : cmp->layers) {
            pCompute << l.predictedComputeUs;
            pComm << l.predictedCommUs;
        }
    double top = 0;
    for (int i = 0; i < compute.size(); ++i)
        top = std::max(top, compute[i] + comm[i]);
    for (int i = 0; i < pCompute.size(); ++i)
        top = std::max(top, pCompute[i] + pComm[i]);
    bool spread = rank < 0;
    for (const auto& l : layers) {
        spread = spread && l.hasSpread;
        if (rank < 0)
            top = std::max(top, l.maxUs);
    }
    const TimeUnit u = timeUnitFor(top / 1e6);
    const double k = u.perSecond / 1e6; // µs → the unit
    // Side by side when there is a prediction: measured left of the layer's tick, predicted right.
    const double width = cmp ? 0.4 : 0.75, shift = cmp ? -0.21 : 0.0;
    QVector<double> keys(compute.size()), total(compute.size());
    for (int i = 0; i < keys.size(); ++i) {
        keys[i] = i + shift;
        compute[i] *= k;
        comm[i] *= k;
        total[i] = compute[i] + comm[i];
    }
    auto stack = [&](const QString& what, const QVector<double>& x, const QVector<double>& low, const QVector<double>& high,
                     bool pale) {
        auto* c = new QCPBars(m_layers->xAxis, m_layers->yAxis);
        auto* m = new QCPBars(m_layers->xAxis, m_layers->yAxis);
        for (auto [bars, name, colour, values] : {std::tuple{c, tr("compute"), computeColor(), &low}, std::tuple{m, tr("communication"), commColor(), &high}}) {
            bars->setName(what.isEmpty() ? name : what.arg(name));
            bars->setWidth(width);
            QColor fill = colour;
            if (pale)
                fill.setAlpha(90);
            bars->setBrush(fill);
            bars->setPen(pale ? QPen(colour, 1) : QPen(Qt::NoPen));
            bars->setData(x, *values, true);
        }
        m->moveAbove(c);
    };
    stack(cmp ? tr("%1 measured") : QString(), keys, compute, comm, false);
    if (cmp) {
        QVector<double> pkeys(keys.size());
        for (int i = 0; i < keys.size(); ++i) {
            pkeys[i] = i - shift;
            pCompute[i] *= k;
            pComm[i] *= k;
        }
        stack(tr("%1 predicted"), pkeys, pCompute, pComm, true);
    }
    const int samples = decode ? int(std::min<std::size_t>(64, std::size_t(run->decode.steps))) : int(run->iterationSeconds.size());
    if (spread) {
        // The whiskers hang on the stack's top (an invisible series of the totals).
        auto* t = new QCPGraph(m_layers->xAxis, m_layers->yAxis);
        t->removeFromLegend();
        t->setLineStyle(QCPGraph::lsNone);
        t->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssNone));
        t->setData(keys, total, true);
        QVector<double> minus(keys.size()), plus(keys.size());
        for (int i = 0; i < keys.size(); ++i) {
            minus[i] = std::max(0.0, total[i] - layers[std::size_t(i)].minUs * k);
            plus[i] = std::max(0.0, layers[std::size_t(i)].maxUs * k - total[i]);
        }
        auto* e = whiskers(m_layers, t, m_layers->yAxis, minus, plus, m_layers->palette().color(QPalette::Text));
        e->setName(tr("min–max over %1").arg(decode ? tr("the sampled steps") : tr("%1 iterations").arg(samples)));
        e->addToLegend();
    }
    m_layers->xAxis->setTicker(layerTicker(int(keys.size())));
    m_layers->xAxis->setLabel(
        rank < 0 ? tr("layer (T=%1, slowest rank per layer; bars: %2%3)")
                       .arg(run->tp)
                       .arg(decode ? tr("decode step %1 of the last iteration").arg(run->decode.spanStep) : tr("last iteration"),
                            spread ? tr(", whiskers: min–max of compute + communication") : tr(", no spread in this record"))
                 : tr("layer (T=%1, rank %2 only, %3; spread and prediction: choose the slowest rank)")
                       .arg(run->tp)
                       .arg(rank)
                       .arg(decode ? tr("decode step %1 of the last iteration").arg(run->decode.spanStep) : tr("last iteration")));
    m_layers->yAxis->setLabel(decode ? tr("%1 per decode step").arg(u.name) : tr("%1 per forward").arg(u.name));
    m_layers->rescaleAxes();
    m_layers->xAxis->setRange(-1, keys.size());
    m_layers->yAxis->setRange(0, std::max(top * k, 1e-9) * 1.3); // headroom: the legend sits above the bars
    if (cmp) {
        // The error figure: the phase's and the worst layer's (medians over the samples against the prediction).
        int worst = -1;
        for (std::size_t i = 0; i < cmp->layers.size(); ++i)
            if (worst < 0 || std::abs(cmp->layers[i].error()) > std::abs(cmp->layers[std::size_t(worst)].error()))
                worst = int(i);
        const auto& w = cmp->layers[std::size_t(worst)];
        showNotes(m_layers, profileNote(),
                 tr("Predicted on %1 (pale bars): %2 %3 measured, %4 predicted (%5); worst layer: %6, %7")
                     .arg(QString::fromStdString(predictionProfile()->id), decode ? tr("median step") : tr("median forward"),
                          humanSeconds(cmp->measuredUs / 1e6), humanSeconds(cmp->predictedUs / 1e6),
                          errorText(cmp->predictedUs, cmp->measuredUs),
                          w.layer < 0 ? tr("other") : QString::number(w.layer), errorText(w.predictedUs, w.measuredUs)));
    } else if (rank < 0) {
        showNotes(m_layers, profileNote(), m_cmpNote);
    }
    m_layers->replot();
}

void ResultsPage::plotSpeedup()
{
    m_speedup->clearPlottables();
    m_speedup->clearItems();
    m_speedup->legend->setVisible(true);
    clearNote(m_speedup);
    QVector<double> mx, my, lo, hi, px, py;
    const tp::RunRecord* rec = m_run ? &m_run->record : nullptr;
    double t1 = 0;
    if (rec)
        for (const tp::TpRun& r : rec->runs)
            if (r.tp == 1)
                t1 = r.medianSeconds;
    if (rec)
        for (const tp::TpRun& r : rec->runs)
            if (r.speedup > 0) {
                mx << r.tp;
                my << r.speedup;
                // Spread: T=1's median over this size's slowest and fastest iteration.
                const double mn = minOf(r.iterationSeconds), mxs = maxOf(r.iterationSeconds);
                lo << (t1 > 0 && mxs > 0 ? std::max(0.0, r.speedup - t1 / mxs) : 0.0);
                hi << (t1 > 0 && mn > 0 ? std::max(0.0, t1 / mn - r.speedup) : 0.0);
            }
    int maxRunT = 1;
    if (rec)
        for (const tp::TpRun& r : rec->runs)
            maxRunT = std::max(maxRunT, r.tp);
    // The axis runs to twice the largest T that ran (predictions show what the next sizes would give),
    // not to 8 when only T = 1, 2 ran.
    const int axisT = std::max(maxRunT, std::min(8, 2 * maxRunT));
    std::optional<tp::HardwareProfile> hw;
    if (rec && m_preview && m_preview->spec && m_preview->graph.plan) {
        // The prediction at the run's own settings, on a profile of the run's backend.
        hw = predictionProfile();
        if (hw) {
            const tp::RunSettings& s = rec->settings;
            tp::ShardOptions o{.batch = s.batch, .seq = s.seq};
            o.activationDtype = dtypeOf(s.dtype);
            o.lastPositionLogits = s.logits == "last";
            for (const auto& pt : tp::predictScaling(*m_preview->spec, *m_preview->graph.plan, o, *hw, axisT,
                                                     s.decodeSteps > 0 ? s.seq + s.decodeSteps / 2 : 0))
                if (pt.valid) {
                    px << pt.tp;
                    py << pt.speedup;
                }
        }
    }
    auto* ideal = m_speedup->addGraph();
    ideal->setName(tr("ideal"));
    ideal->setPen(QPen(m_speedup->palette().color(QPalette::Mid), 1, Qt::DashLine));
    const double maxT = axisT;
    ideal->setData({1, maxT}, {1, maxT});
    auto* pred = m_speedup->addGraph();
    pred->setName(hw ? tr("predicted on %1 at the run's settings").arg(QString::fromStdString(hw->id)) : tr("predicted"));
    pred->setPen(QPen(computeColor(), 2));
    pred->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 6));
    pred->setData(px, py);
    auto* meas = m_speedup->addGraph();
    meas->setName(tr("measured (median; whiskers: slowest–fastest iteration)"));
    meas->setPen(QPen(commColor(), 2));
    meas->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssSquare, 8));
    meas->setData(mx, my);
    if (!mx.isEmpty())
        whiskers(m_speedup, meas, m_speedup->yAxis, lo, hi, commColor());
    // The error figure: the prediction against each measured point.
    QStringList errors;
    for (int i = 0; i < mx.size(); ++i)
        for (int j = 0; j < px.size(); ++j)
            if (px[j] == mx[i] && mx[i] > 1) {
                const QString e = errorText(py[j], my[i]);
                errorLabel(m_speedup, m_speedup->yAxis, mx[i], my[i], py[j], tr("predicted %1").arg(e), commColor());
                errors << tr("T=%1 %2").arg(mx[i]).arg(e);
            }
    m_speedup->xAxis->setTicker(tpTicker());
    m_speedup->xAxis->setLabel(tr("tp size"));
    m_speedup->yAxis->setLabel(tr("speedup vs T=1"));
    m_speedup->xAxis->setRange(0.5, maxT + 0.5);
    // Up to the highest point drawn (the ideal line leaves the chart where the points do not reach).
    double top = 1;
    for (int i = 0; i < my.size(); ++i)
        top = std::max(top, my[i] + hi[i]);
    for (const double v : py)
        top = std::max(top, v);
    m_speedup->yAxis->setRange(0, std::min(maxT, top * 1.15) + 0.25);
    if (!rec)
        showEmpty(m_speedup, tr("No run yet: run the plan at T=1 and larger sizes (e.g. 1,2,4) to measure the speedup"));
    else if (mx.isEmpty())
        showEmpty(m_speedup, tr("No speedup: the run has no T=1 to compare with; include 1 in the tp sizes"), false);
    else
        showNotes(m_speedup, profileNote(),
                  errors.isEmpty() ? QString()
                                   : tr("Predicted speedup against measured, (predicted − measured) / measured: %1")
                                         .arg(errors.join(QStringLiteral(", "))));
    m_speedup->replot();
}

// TTFT and ITL against T: measured (squares, whiskers: TTFT min–max over iterations, ITL p10–p90)
// beside the cost model's prediction for the run's own batch, prompt and mean decode context, on the
// profile of the run's backend (discs).
void ResultsPage::plotLatency()
{
    m_latency->clearPlottables();
    m_latency->clearItems();
    m_latency->legend->setVisible(true);
    clearNote(m_latency);
    m_latency->yAxis2->setVisible(true);
    m_latency->xAxis->setTicker(tpTicker());
    m_latency->xAxis->setLabel(tr("tp size"));
    const tp::RunRecord* rec = m_run ? &m_run->record : nullptr;
    if (!rec || rec->settings.decodeSteps == 0) {
        m_latency->yAxis->setLabel(tr("time to first token"));
        m_latency->yAxis2->setLabel(tr("inter-token latency"));
        showEmpty(m_latency, !rec ? tr("No run yet: run with decode steps > 0 to measure time to first token and inter-token latency")
                                  : tr("This run did not decode: set Decode steps above 0 on the Run page and run again"));
        return m_latency->replot();
    }
    const tp::RunSettings& s = rec->settings;
    const int steps = s.decodeSteps;
    QVector<double> mt, ttft, ttftLo, ttftHi, itl, itlLo, itlHi, pt, pttft, pitl;
    int maxT = 1;
    for (const tp::TpRun& r : rec->runs) {
        maxT = std::max(maxT, r.tp);
        if (r.decode.steps == 0)
            continue;
        mt << r.tp;
        ttft << r.decode.ttftSeconds;
        ttftLo << std::max(0.0, r.decode.ttftSeconds - minOf(r.iterationSeconds));
        ttftHi << std::max(0.0, maxOf(r.iterationSeconds) - r.decode.ttftSeconds);
        itl << r.decode.itlSeconds;
        itlLo << std::max(0.0, r.decode.itlSeconds - r.decode.itlP10Seconds);
        itlHi << std::max(0.0, r.decode.itlP90Seconds - r.decode.itlSeconds);
    }
    QString predictedOn;
    const auto hw = predictionProfile();
    if (m_preview && m_preview->spec && hw && m_preview->graph.plan) {
        tp::ShardOptions o{.batch = s.batch, .seq = s.seq};
        o.activationDtype = dtypeOf(s.dtype);
        // Where the run computed prefill's logits (a decoding run: the last positions, as generate()).
        o.lastPositionLogits = s.logits == "last";
        for (const auto& p : tp::predictScaling(*m_preview->spec, *m_preview->graph.plan, o, *hw, maxT, s.seq + steps / 2))
            if (p.valid && std::find(mt.begin(), mt.end(), double(p.tp)) != mt.end()) {
                pt << p.tp;
                pttft << p.seconds;
                pitl << p.decodeStepSeconds;
            }
        predictedOn = tr(" on %1").arg(QString::fromStdString(hw->id));
    }
    double topTtft = 0, topItl = 0;
    for (int i = 0; i < ttft.size(); ++i) {
        topTtft = std::max(topTtft, ttft[i] + ttftHi[i]);
        topItl = std::max(topItl, itl[i] + itlHi[i]);
    }
    for (double x : pttft)
        topTtft = std::max(topTtft, x);
    for (double x : pitl)
        topItl = std::max(topItl, x);
    const TimeUnit u1 = timeUnitFor(topTtft), u2 = timeUnitFor(topItl);
    auto scaled = [](QVector<double> v, double k) {
        for (double& x : v)
            x *= k;
        return v;
    };
    auto series = [&](QCPAxis* y, const QString& name, const QColor& c, QCPScatterStyle::ScatterShape shape, Qt::PenStyle pen,
                      const QVector<double>& x, const QVector<double>& v) {
        auto* g = m_latency->addGraph(m_latency->xAxis, y);
        g->setName(name);
        g->setPen(QPen(c, 2, pen));
        g->setScatterStyle(QCPScatterStyle(shape, 8));
        g->setData(x, v);
        return g;
    };
    auto* mTtft = series(m_latency->yAxis, tr("TTFT measured (whiskers: min–max over iterations)"), computeColor(), QCPScatterStyle::ssSquare,
                         Qt::SolidLine, mt, scaled(ttft, u1.perSecond));
    whiskers(m_latency, mTtft, m_latency->yAxis, scaled(ttftLo, u1.perSecond), scaled(ttftHi, u1.perSecond), computeColor());
    series(m_latency->yAxis, tr("TTFT predicted%1").arg(predictedOn), computeColor(), QCPScatterStyle::ssDisc, Qt::DashLine, pt,
           scaled(pttft, u1.perSecond));
    auto* mItl = series(m_latency->yAxis2, tr("ITL measured (median; whiskers: p10–p90 of the steps)"), commColor(),
                        QCPScatterStyle::ssSquare, Qt::SolidLine, mt, scaled(itl, u2.perSecond));
    whiskers(m_latency, mItl, m_latency->yAxis2, scaled(itlLo, u2.perSecond), scaled(itlHi, u2.perSecond), commColor());
    series(m_latency->yAxis2, tr("ITL predicted%1 at context %2").arg(predictedOn).arg(s.seq + steps / 2), commColor(),
           QCPScatterStyle::ssDisc, Qt::DashLine, pt, scaled(pitl, u2.perSecond));
    // The error figure: the prediction against each measured point.
    QStringList ttftErrors, itlErrors;
    for (int i = 0; i < mt.size(); ++i)
        for (int j = 0; j < pt.size(); ++j)
            if (pt[j] == mt[i]) {
                const QString a = errorText(pttft[j], ttft[i]), b = errorText(pitl[j], itl[i]);
                errorLabel(m_latency, m_latency->yAxis, mt[i], ttft[i] * u1.perSecond, pttft[j] * u1.perSecond, a, computeColor());
                errorLabel(m_latency, m_latency->yAxis2, mt[i], itl[i] * u2.perSecond, pitl[j] * u2.perSecond, b, commColor(), true);
                ttftErrors << tr("T=%1 %2").arg(mt[i]).arg(a);
                itlErrors << tr("T=%1 %2").arg(mt[i]).arg(b);
            }
    m_latency->yAxis->setLabel(tr("time to first token (%1), blue").arg(u1.name));
    m_latency->yAxis2->setLabel(tr("inter-token latency (%1), orange").arg(u2.name));
    m_latency->xAxis->setRange(0.5, maxT + 0.5);
    m_latency->yAxis->setRange(0, topTtft > 0 ? topTtft * u1.perSecond * 1.15 : 1.0);
    m_latency->yAxis2->setRange(0, topItl > 0 ? topItl * u2.perSecond * 1.15 : 1.0);
    showNotes(m_latency, profileNote(),
              ttftErrors.isEmpty() ? QString()
                                   : tr("Prediction error, (predicted − measured) / measured: TTFT %1 · ITL %2")
                                         .arg(ttftErrors.join(QStringLiteral(", ")), itlErrors.join(QStringLiteral(", "))));
    m_latency->replot();
}

void ResultsPage::plotTimeline()
{
    const tp::TpRun* run = m_run ? typedRun(*m_run) : nullptr;
    if (!run)
        return m_timeline->setSpans({}, 1, {});
    const bool step = decodePhase() && run->decode.steps > 0;
    m_timeline->setSpans(step ? run->decode.spans : run->spans, run->tp,
                         step ? tr("Decode step %1 of the last iteration (T=%2)").arg(run->decode.spanStep).arg(run->tp)
                              : tr("The last timed iteration (T=%1)").arg(run->tp));
}

// Baseline vs current, per layer (slowest rank, compute + communication): a noise band (the union of
// both runs' min–max over their samples) behind the bars; a layer is coloured faster or slower only
// when the two runs' ranges do not overlap, otherwise it is within the noise.
void ResultsPage::plotCompare()
{
    m_compare->clearPlottables();
    m_compare->clearItems();
    m_compare->legend->setVisible(true);
    const auto* cur = m_run ? typedLayers(*m_run) : nullptr;
    const auto* base = m_baseline ? typedLayers(*m_baseline) : nullptr;
    if (!m_run || !m_baseline || !cur || !base) {
        m_compare->xAxis->setLabel(tr("layer"));
        m_compare->yAxis->setLabel(tr("time per forward"));
        showEmpty(m_compare, !m_baseline ? tr("No baseline: click Set as Baseline after a run, then run again to compare")
                                         : !m_run ? tr("No current run: run a plan to compare it with the baseline")
                                                  : tr("The baseline has no T=%1%2: choose a tp size and phase both runs measured")
                                                        .arg(m_tpBox->currentData().toInt())
                                                        .arg(decodePhase() ? tr(" decode step") : QString()));
        return m_compare->replot();
    }
    const int n = int(std::max(base->size(), cur->size()));
    auto total = [](const std::vector<tp::LayerTiming>& v, int i) {
        return i < int(v.size()) ? v[std::size_t(i)].computeUs + v[std::size_t(i)].commUs : 0.0;
    };
    auto range = [&](const std::vector<tp::LayerTiming>& v, int i) -> std::pair<double, double> {
        if (i >= int(v.size()))
            return {0, 0};
        const auto& l = v[std::size_t(i)];
        return l.hasSpread ? std::pair{l.minUs, l.maxUs} : std::pair{total(v, i), total(v, i)};
    };
    double top = 0;
    bool spread = true;
    for (int i = 0; i < n; ++i) {
        top = std::max({top, range(*base, i).second, range(*cur, i).second, total(*base, i), total(*cur, i)});
        spread = spread && i < int(base->size()) && i < int(cur->size()) && (*base)[std::size_t(i)].hasSpread
                 && (*cur)[std::size_t(i)].hasSpread;
    }
    const TimeUnit u = timeUnitFor(top / 1e6);
    const double k = u.perSecond / 1e6;
    QVector<double> keys, bandLo, bandHi, kb, vb, kf, vf, ks, vs, kn, vn;
    int faster = 0, slower = 0;
    for (int i = 0; i < n; ++i) {
        const auto [b0, b1] = range(*base, i);
        const auto [c0, c1] = range(*cur, i);
        keys << i;
        bandLo << std::min(b0, c0) * k;
        bandHi << (std::max(b1, c1) - std::min(b0, c0)) * k;
        kb << i - 0.2;
        vb << total(*base, i) * k;
        const double c = total(*cur, i) * k;
        // Without a spread for both, nothing can be told from noise: neutral.
        if (spread && c1 < b0) {
            kf << i + 0.2;
            vf << c;
            ++faster;
        } else if (spread && c0 > b1) {
            ks << i + 0.2;
            vs << c;
            ++slower;
        } else {
            kn << i + 0.2;
            vn << c;
        }
    }
    // The band: an invisible base up to the union's min, the band's height stacked on it.
    auto* below = new QCPBars(m_compare->xAxis, m_compare->yAxis);
    below->removeFromLegend();
    below->setWidth(0.9);
    below->setBrush(Qt::NoBrush);
    below->setPen(Qt::NoPen);
    below->setData(keys, bandLo, true);
    auto* band = new QCPBars(m_compare->xAxis, m_compare->yAxis);
    band->setName(spread ? tr("noise band: min–max of both runs") : tr("no spread in a record: nothing classified"));
    band->setWidth(0.9);
    QColor bandColor = m_compare->palette().color(QPalette::Highlight);
    bandColor.setAlpha(60);
    band->setBrush(bandColor);
    band->setPen(Qt::NoPen);
    band->setData(keys, bandHi, true);
    band->moveAbove(below);
    auto bars = [&](const QString& name, const QColor& color, const QVector<double>& x, const QVector<double>& v) {
        auto* b = new QCPBars(m_compare->xAxis, m_compare->yAxis);
        b->setName(name);
        b->setWidth(0.4);
        b->setBrush(color);
        b->setPen(Qt::NoPen);
        b->setData(x, v, true);
        return b;
    };
    bars(tr("baseline"), m_compare->palette().color(QPalette::Mid), kb, vb);
    bars(tr("current, within the noise"), computeColor(), kn, vn);
    bars(tr("current, faster beyond the noise (%1)").arg(faster), fasterColor(), kf, vf);
    bars(tr("current, slower beyond the noise (%1)").arg(slower), slowerColor(), ks, vs);
    m_compare->xAxis->setTicker(layerTicker(n));
    m_compare->xAxis->setLabel(tr("layer (T=%1, slowest rank per layer, compute + communication; coloured only where the "
                                  "ranges do not overlap)")
                                   .arg(m_tpBox->currentData().toInt()));
    m_compare->yAxis->setLabel(decodePhase() ? tr("%1 per decode step").arg(u.name) : tr("%1 per forward").arg(u.name));
    m_compare->xAxis->setRange(-1, n);
    m_compare->yAxis->setRange(0, std::max(top * k, 1e-9) * 1.45); // headroom: the five-row legend sits above the bars
    m_compare->replot();
}

void ResultsPage::setBenchmark(const QString& communicator, const QJsonArray& rows)
{
    m_benchRows[communicator] = rows;
    plotBenchmark();
}

void ResultsPage::plotBenchmark()
{
    m_bench->clearPlottables();
    m_bench->clearItems();
    m_bench->legend->setVisible(true);
    m_bench->xAxis->setScaleType(QCPAxis::stLogarithmic);
    QSharedPointer<BytesTicker> bytes(new BytesTicker);
    bytes->setLogBase(4);
    bytes->setSubTickCount(1);
    m_bench->xAxis->setTicker(bytes);
    m_bench->yAxis->setScaleType(QCPAxis::stLogarithmic);
    m_bench->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    m_bench->yAxis2->setVisible(true);
    m_bench->xAxis->setLabel(tr("message size"));
    m_bench->yAxis2->setLabel(tr("bus bandwidth (GB/s), dashed"));
    int hue = 0;
    double maxBw = 0, minT = 1e300, maxT = 0, minX = 1e300, maxX = 0;
    for (const auto& [comm, rows] : m_benchRows)
        for (const auto& v : rows) {
            const QJsonObject r = v.toObject();
            const QJsonObject cell = r.contains(QStringLiteral("out_of_place")) ? r.value(QStringLiteral("out_of_place")).toObject()
                                                                               : r.value(QStringLiteral("in_place")).toObject();
            const double t = cell.value(QStringLiteral("time_us")).toDouble();
            if (t > 0 && std::isfinite(t))
                maxT = std::max(maxT, t);
        }
    const TimeUnit u = timeUnitFor(maxT / 1e6);
    const double k = u.perSecond / 1e6;
    m_bench->yAxis->setLabel(tr("time (%1), solid").arg(u.name));
    maxT = 0;
    for (const auto& [comm, rows] : m_benchRows) {
        std::map<QString, std::pair<QVector<double>, std::pair<QVector<double>, QVector<double>>>> byOp;
        for (const auto& v : rows) {
            const QJsonObject r = v.toObject();
            const QJsonObject cell = r.contains(QStringLiteral("out_of_place")) ? r.value(QStringLiteral("out_of_place")).toObject()
                                                                               : r.value(QStringLiteral("in_place")).toObject();
            const double t = cell.value(QStringLiteral("time_us")).toDouble() * k, x = r.value(QStringLiteral("size")).toDouble();
            const double bw = cell.value(QStringLiteral("busbw_gbps")).toDouble();
            if (!(t > 0 && x > 0 && std::isfinite(t) && std::isfinite(x)))
                continue;
            auto& series = byOp[r.value(QStringLiteral("op")).toString()];
            series.first << x;
            series.second.first << t;
            series.second.second << bw;
            maxBw = std::max(maxBw, std::isfinite(bw) ? bw : 0.0);
            minT = std::min(minT, t);
            maxT = std::max(maxT, t);
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
    } else {
        m_bench->xAxis->setRange(8, 16 << 20);
        m_bench->yAxis->setRange(1, 1e4);
    }
    m_bench->yAxis2->setRange(0, std::max(0.1, maxBw * 1.1));
    if (m_benchProc)
        showEmpty(m_bench,
                  tr("Benchmarking collectives over %1… (tpstudio-cli bench comm, about 10 s)")
                      .arg(m_benchProc->property("communicator").toString()),
                  maxT <= 0);
    else if (maxT <= 0)
        showEmpty(m_bench, tr("No collective benchmark yet: Benchmark Collectives runs bench comm (~10 s)"));
    m_bench->replot();
}

void ResultsPage::runBenchmark(const QString& communicator)
{
    if (m_benchProc)
        return;
    m_benchProc = new QProcess(this);
    m_benchProc->setProperty("communicator", communicator);
    m_benchButton->setEnabled(false);
    connect(m_benchProc, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
        const QByteArray out = m_benchProc->readAllStandardOutput();
        const QString err = QString::fromUtf8(m_benchProc->readAllStandardError()).trimmed();
        m_benchProc->deleteLater();
        m_benchProc = nullptr;
        m_benchButton->setEnabled(true);
        // Under mpirun only rank 0 prints; its JSON is the whole output.
        const QJsonDocument d = QJsonDocument::fromJson(out);
        if (status != QProcess::NormalExit || code != 0 || !d.isObject()) {
            plotBenchmark();
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
    emit benchmarkStarted(communicator);
    // Busy state while the child runs.
    m_tabs->setCurrentWidget(m_bench);
    plotBenchmark();
    emit message(tr("Benchmarking collectives over %1 (about 10 s)…").arg(communicator));
}

ResultsPage::~ResultsPage()
{
    if (m_benchProc) {
        m_benchProc->disconnect(this);
        m_benchProc->kill();
        m_benchProc->waitForFinished(3000);
    }
}

void ResultsPage::stopBenchmark()
{
    if (m_benchProc)
        m_benchProc->kill();
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
    // A title row for the export only: model, T, profile, batch × seq, dtype, phase.
    p->plotLayout()->insertRow(0);
    auto* title = new QCPTextElement(p, exportTitle());
    title->setObjectName(QStringLiteral("export-title"));
    title->setTextColor(p->palette().color(QPalette::Text));
    p->plotLayout()->addElement(0, 0, title);
    if (p->plotLayout()->columnCount() > 1) // the benchmark's legend column: the title spans the chart
        p->plotLayout()->setColumnStretchFactor(1, 0.001);
    struct Restore
    {
        QCustomPlot* p;
        QCPTextElement* title;
        ~Restore()
        {
            p->plotLayout()->remove(title);
            p->plotLayout()->simplify();
            p->replot();
        }
    } restore{p, title};
    const int w = std::max(p->width(), 800), h = std::max(p->height(), 500);
    if (path.endsWith(QLatin1String(".pdf"), Qt::CaseInsensitive))
        return p->savePdf(path, w, h, QCP::epAllowCosmetic, QStringLiteral("TP Studio"), exportTitle());
    if (path.endsWith(QLatin1String(".svg"), Qt::CaseInsensitive)) {
        QSvgGenerator gen;
        gen.setFileName(path);
        gen.setSize(QSize(w, h));
        gen.setViewBox(QRect(0, 0, w, h));
        gen.setTitle(exportTitle());
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
    int n = 0;
    for (int i = 0; i < p->itemCount(); ++i)
        if (p->item(i)->objectName() != QLatin1String(kEmptyName) && p->item(i)->objectName() != QLatin1String(kNoteName))
            ++n;
    for (int i = 0; i < p->plottableCount(); ++i)
        if (auto* g = qobject_cast<QCPGraph*>(p->plottable(i)))
            n += g->dataCount();
        else if (auto* b = qobject_cast<QCPBars*>(p->plottable(i)))
            n += b->dataCount();
    return n;
}

QString ResultsPage::emptyText(int tab) const
{
    auto* p = qobject_cast<QCustomPlot*>(m_tabs->widget(tab));
    if (!p)
        return {};
    for (int i = 0; i < p->itemCount(); ++i)
        if (p->item(i)->objectName() == QLatin1String(kEmptyName))
            if (auto* t = qobject_cast<QCPItemText*>(p->item(i)))
                return t->text();
    return {};
}

} // namespace tpui
