// advisor_page.cpp — see advisor_page.h.
#include "widgets/advisor_page.h"
#include "widgets/theme.h"

#include "models/background.h"
#include "models/format.h"
#include "models/plan_document.h"

#include "tp/cost/cost_model.h"
#include "tp/plan/plan_io.h"

#include <qcustomplot.h>

#include <QAbstractTableModel>
#include <QCoreApplication>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableView>
#include <QTimer>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <map>

namespace tpui {

namespace {

// "8", "8×2" with pipeline stages, "16 across nodes" for a TP group larger than a node.
QString meshText(const tp::PlanCandidate& c)
{
    QString t = c.pp > 1 ? QStringLiteral("%1×%2").arg(c.tp).arg(c.pp) : QString::number(c.tp);
    return c.spansNodes ? QCoreApplication::translate("AdvisorPage", "%1 across nodes").arg(t) : t;
}


QString qs(const std::string& s) { return QString::fromStdString(s); }

QIcon themeIcon(const char* name, const char* fallback)
{
    return QIcon::fromTheme(QString::fromLatin1(name), QIcon(QString::fromLatin1(fallback)));
}

// Colours of the tp sizes, in ascending order of T.
QColor seriesColor(std::size_t i)
{
    static const QColor colors[] = {QColor(31, 119, 180), QColor(255, 127, 14), QColor(44, 160, 44), QColor(214, 39, 40),
                                    QColor(148, 103, 189), QColor(140, 86, 75), QColor(227, 119, 194), QColor(23, 190, 207),
                                    QColor(188, 189, 34), QColor(127, 127, 127)};
    return colors[i % std::size(colors)];
}

// The device memory of a profile in bytes, as the search compares it.
double deviceBytes(const tp::HardwareProfile& hw) { return double(hw.usableMemoryBytes()); }

} // namespace

// The candidates, one row each in the search's order; Qt::UserRole carries the number to sort by.
class CandidateTableModel final : public QAbstractTableModel
{
public:
    enum Column { NameColumn, TpColumn, TtftColumn, ItlColumn, ThroughputColumn, MemoryColumn, HeadroomColumn, ParetoColumn,
                  DescriptionColumn, NUM_COLUMNS };
    static constexpr int SortRole = Qt::UserRole;

    using QAbstractTableModel::QAbstractTableModel;

    void setResult(std::shared_ptr<const tp::SearchResult> r)
    {
        beginResetModel();
        m_result = std::move(r);
        endResetModel();
    }
    int rowCount(const QModelIndex& parent = {}) const override
    {
        return parent.isValid() || !m_result ? 0 : int(m_result->candidates.size());
    }
    int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : NUM_COLUMNS; }
    QVariant headerData(int section, Qt::Orientation o, int role) const override
    {
        if (o != Qt::Horizontal)
            return {};
        static const char* names[] = {QT_TR_NOOP("Plan"),        QT_TR_NOOP("TP×PP"),      QT_TR_NOOP("TTFT"),
                                      QT_TR_NOOP("ITL"),         QT_TR_NOOP("Tokens/s/GPU"), QT_TR_NOOP("Memory/rank"),
                                      QT_TR_NOOP("Headroom"),    QT_TR_NOOP("Pareto"),     QT_TR_NOOP("What it is")};
        static const char* tips[] = {
            QT_TR_NOOP("The candidate plan"),
            QT_TR_NOOP("Tensor-parallel size (GPUs each layer is sharded over) × pipeline stages (the layers split across "
                       "that many groups; DistributedConfig pp_size); \"across nodes\": the TP group spans nodes and every "
                       "collective crosses the network"),
            QT_TR_NOOP("Time to first token: the prefill of batch × prompt tokens"),
            QT_TR_NOOP("Inter-token latency: one decode step of the batch at the decode context"),
            QT_TR_NOOP("Decode throughput per GPU: batch ÷ ITL ÷ (TP × PP)"),
            QT_TR_NOOP("The largest rank's memory: weights, KV cache at batch × context, activation peak"),
            QT_TR_NOOP("Device memory left on the largest rank"),
            QT_TR_NOOP("On the Pareto front: no other candidate is at least as good on TTFT, ITL and tokens/s per GPU and "
                       "better on one"),
            QT_TR_NOOP("What the plan does and where it comes from: built in, shipped (plans/…), the editor's, or your file")};
        if (role == Qt::DisplayRole)
            return QAbstractTableModel::tr(names[section]);
        if (role == Qt::ToolTipRole)
            return QAbstractTableModel::tr(tips[section]);
        return {};
    }
    QVariant data(const QModelIndex& index, int role) const override
    {
        if (!index.isValid() || !m_result)
            return {};
        const tp::PlanCandidate& c = m_result->candidates[std::size_t(index.row())];
        if (role == Qt::TextAlignmentRole)
            return index.column() == NameColumn || index.column() == DescriptionColumn ? QVariant()
                                                                                        : QVariant(int(Qt::AlignRight | Qt::AlignVCenter));
        if (role == Qt::ToolTipRole && (index.column() == NameColumn || index.column() == DescriptionColumn))
            return qs(c.description);
        if (role == SortRole) {
            switch (index.column()) {
            case NameColumn: return qs(c.name);
            case TpColumn: return c.tp * 1000 + c.pp;
            case TtftColumn: return c.ttftSeconds;
            case ItlColumn: return c.itlSeconds;
            case ThroughputColumn: return c.tokensPerSecondPerGpu;
            case MemoryColumn: return qlonglong(c.memoryBytes);
            case HeadroomColumn: return qlonglong(c.headroomBytes);
            case ParetoColumn: return int(c.pareto);
            case DescriptionColumn: return qs(c.description);
            }
        }
        if (role == Qt::FontRole && c.pareto) {
            QFont f;
            f.setBold(true);
            return f;
        }
        if (role != Qt::DisplayRole)
            return {};
        switch (index.column()) {
        case NameColumn: return qs(c.name);
        case TpColumn: return meshText(c);
        case TtftColumn: return humanSeconds(c.ttftSeconds);
        case ItlColumn: return humanSeconds(c.itlSeconds);
        case ThroughputColumn: return QString::number(c.tokensPerSecondPerGpu, 'f', 1);
        case MemoryColumn: return humanBytes(double(c.memoryBytes));
        case HeadroomColumn: return humanBytes(double(c.headroomBytes));
        case ParetoColumn: return c.pareto ? QAbstractTableModel::tr("yes") : QAbstractTableModel::tr("no");
        case DescriptionColumn: return qs(c.description);
        }
        return {};
    }

private:
    std::shared_ptr<const tp::SearchResult> m_result;
};

AdvisorPage::AdvisorPage(PlanDocument* doc, QWidget* parent)
    : QWidget(parent)
    , m_doc(doc)
    , m_batch(new QSpinBox)
    , m_seq(new QSpinBox)
    , m_context(new QSpinBox)
    , m_maxTp(new QSpinBox)
    , m_objective(new QComboBox)
    , m_status(new QLabel)
    , m_empty(new QLabel)
    , m_stack(new QStackedWidget)
    , m_plot(new QCustomPlot)
    , m_table(new QTableView)
    , m_model(new CandidateTableModel(this))
    , m_proxy(new QSortFilterProxyModel(this))
    , m_apply(new QPushButton(themeIcon("dialog-ok-apply", ":/icons/plan.svg"), tr("&Apply")))
    , m_export(new QPushButton(themeIcon("document-export", ":/icons/document-open.svg"), tr("E&xport…")))
    , m_calibrate(new QPushButton(themeIcon("preferences-system", ":/icons/plan.svg"), tr("&Calibrate This Machine…")))
    , m_plans(new QToolButton)
    , m_debounce(new QTimer(this))
{
    // --- inputs ---------------------------------------------------------------------------------
    m_batch->setRange(1, int(std::min<std::int64_t>(tp::kMaxWorkloadBatch, 1 << 20)));
    m_batch->setToolTip(tr("Sequences decoded together"));
    m_seq->setRange(1, int(tp::kMaxWorkloadContext));
    m_seq->setToolTip(tr("Prompt tokens per sequence: the prefill that gives the first token"));
    m_context->setRange(0, int(tp::kMaxWorkloadContext));
    m_context->setSpecialValueText(tr("= prompt"));
    m_context->setToolTip(tr("Decode context per sequence: the KV cache it needs and the step it times"));
    m_maxTp->setRange(0, 64);
    m_maxTp->setSpecialValueText(tr("all GPUs"));
    m_maxTp->setToolTip(tr("Largest tp size tried; by default the machine's device count"));
    m_objective->addItem(tr("time to first token"), TtftObjective);
    m_objective->addItem(tr("inter-token latency"), ItlObjective);
    m_objective->addItem(tr("tokens/s per GPU"), ThroughputObjective);
    m_objective->setCurrentIndex(ThroughputObjective);
    m_objective->setToolTip(tr("What the best candidate minimises (or maximises): the table is sorted by it and its best "
                               "candidate selected"));
    const PreviewSettings& s = doc->settings();
    m_batch->setValue(int(s.batch));
    m_seq->setValue(int(s.seq));
    m_barBatch = s.batch;
    m_barSeq = s.seq;
    auto* inputs = new QHBoxLayout;
    auto add = [inputs](const QString& label, QWidget* w) {
        auto* l = new QLabel(label);
        l->setBuddy(w);
        inputs->addWidget(l);
        inputs->addWidget(w);
    };
    add(tr("&Batch:"), m_batch);
    add(tr("&Prompt:"), m_seq);
    add(tr("C&ontext:"), m_context);
    add(tr("&Max T:"), m_maxTp);
    add(tr("O&bjective:"), m_objective);
    // Beside the built-in candidates, the shipped plans of the model's type and the editor's plan, the
    // user's own files.
    auto* plansMenu = new QMenu(m_plans);
    plansMenu->addAction(themeIcon("document-open", ":/icons/document-open.svg"), tr("Add Plan Files…"), this, [this] {
        const QStringList files = QFileDialog::getOpenFileNames(this, tr("Plans to try"), QString(), tr("Plan JSON (*.json);;All files (*)"));
        if (!files.isEmpty())
            addPlanFiles(files);
    });
    m_forgetPlans = plansMenu->addAction(tr("Forget Added Plans"), this, [this] { addPlanFiles({}, true); });
    m_plans->setMenu(plansMenu);
    m_plans->setPopupMode(QToolButton::InstantPopup);
    m_plans->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    m_plans->setIcon(themeIcon("document-open", ":/icons/document-open.svg"));
    inputs->addWidget(m_plans);
    addPlanFiles({});
    inputs->addStretch(1);
    m_calibrate->setToolTip(tr("Measure this machine (GEMMs, memory bandwidth, collectives) and add it to the hardware list"));

    // --- plot -----------------------------------------------------------------------------------
    m_plot->setMinimumHeight(260);
    m_plot->yAxis->setLabel(tr("Decode tokens/s per GPU"));
    m_plot->legend->setVisible(true);
    // Beside the plot, not over it: candidates can lie in any corner (the front runs from low latency
    // and throughput at large T to high at small T, dominated ones lie below and right of it).
    auto* side = new QCPLayoutGrid; // the legend at the top of a column of its own
    m_plot->plotLayout()->addElement(0, 1, side);
    m_plot->plotLayout()->setColumnStretchFactor(1, 0.001);
    side->addElement(0, 0, m_plot->legend);
    side->addElement(1, 0, new QCPLayoutElement(m_plot));
    side->setRowStretchFactor(0, 0.001);
    m_plot->legend->setMargins(QMargins(6, 4, 6, 4));
    themePlot(m_plot);
    m_plot->setMouseTracking(true);
    connect(m_plot, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
        if (const int i = candidateAt(e->position()); i >= 0)
            selectCandidate(i);
    });
    connect(m_plot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
        const int i = candidateAt(e->position());
        if (i < 0) {
            QToolTip::hideText();
            m_plot->setCursor(Qt::ArrowCursor);
            return;
        }
        const tp::PlanCandidate& c = m_result->candidates[std::size_t(i)];
        m_plot->setCursor(Qt::PointingHandCursor);
        QToolTip::showText(e->globalPosition().toPoint(),
                           tr("<b>%1</b> at %2%3<br>TTFT %4 · ITL %5<br>%6 tokens/s per GPU<br>%7 per rank, %8 free")
                               .arg(qs(c.name).toHtmlEscaped())
                               .arg(meshText(c))
                               .arg(c.pareto ? tr(" · Pareto front") : QString())
                               .arg(humanSeconds(c.ttftSeconds), humanSeconds(c.itlSeconds))
                               .arg(c.tokensPerSecondPerGpu, 0, 'f', 1)
                               .arg(humanBytes(double(c.memoryBytes)), humanBytes(double(c.headroomBytes))),
                           m_plot);
    });

    // --- table ----------------------------------------------------------------------------------
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(CandidateTableModel::SortRole);
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->setAlternatingRowColors(true);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setWordWrap(false);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 8);
    m_table->horizontalHeader()->setHighlightSections(false);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setSectionResizeMode(CandidateTableModel::DescriptionColumn, QHeaderView::Stretch);
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& cur) {
        m_selected = cur.isValid() ? m_proxy->mapToSource(cur).row() : -1;
        m_apply->setEnabled(m_selected >= 0);
        m_export->setEnabled(m_selected >= 0);
        markSelection();
    });
    connect(m_table, &QTableView::activated, this, &AdvisorPage::applySelected);

    // --- layout ---------------------------------------------------------------------------------
    m_empty->setAlignment(Qt::AlignCenter);
    m_empty->setWordWrap(true);
    m_empty->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_empty->setMargin(24);
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(m_plot);
    split->addWidget(m_table);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    m_stack->addWidget(m_empty);
    m_stack->addWidget(split);
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_apply->setToolTip(tr("Load the selected candidate's plan and tp size into the editor (one undo step)"));
    m_export->setToolTip(tr("Write the selected candidate's plan as Transformers JSON"));
    m_apply->setEnabled(false);
    m_export->setEnabled(false);
    connect(m_apply, &QPushButton::clicked, this, &AdvisorPage::applySelected);
    connect(m_export, &QPushButton::clicked, this, &AdvisorPage::exportDialog);
    connect(m_calibrate, &QPushButton::clicked, this, &AdvisorPage::calibrateRequested);
    auto* bottom = new QHBoxLayout;
    bottom->addWidget(m_status, 1);
    bottom->addWidget(m_calibrate);
    bottom->addWidget(m_apply);
    bottom->addWidget(m_export);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 4, 0, 0);
    lay->addLayout(inputs);
    lay->addWidget(m_stack, 1);
    lay->addLayout(bottom);

    // --- when to search -------------------------------------------------------------------------
    m_debounce->setSingleShot(true);
    m_debounce->setInterval(250);
    connect(m_debounce, &QTimer::timeout, this, &AdvisorPage::search);
    for (QSpinBox* b : {m_batch, m_seq, m_context, m_maxTp})
        connect(b, &QSpinBox::valueChanged, this, &AdvisorPage::invalidate);
    connect(m_objective, &QComboBox::currentIndexChanged, this, &AdvisorPage::sortByObjective);
    connect(doc, &PlanDocument::planChanged, this, &AdvisorPage::invalidate); // the editor's plan is a candidate
    connect(doc, &PlanDocument::modelChanged, this, [this] {
        // The candidates shown belong to the model before: gone at once.
        clearResult(m_doc->spec() ? tr("Searching…") : tr("Open a model to compare its candidate plans."));
        invalidate();
    });
    connect(doc, &PlanDocument::settingsChanged, this, [this] {
        // The toolbar's batch and sequence carry over when they change; T does not matter here.
        const PreviewSettings& s = m_doc->settings();
        if (s.batch != m_barBatch)
            m_batch->setValue(int(m_barBatch = s.batch));
        if (s.seq != m_barSeq)
            m_seq->setValue(int(m_barSeq = s.seq));
        if (s.hardware != m_lastHardware || s.activationDtype() != m_lastDtype || s.kvDtype != m_lastKvDtype)
            invalidate();
    });
    connect(&m_watcher, &QFutureWatcher<Outcome>::finished, this, &AdvisorPage::finished);
    showEmpty(tr("Open a model to compare its candidate plans."));
}

// Nothing to wait for: a search in flight holds copies and shared pointers only.
AdvisorPage::~AdvisorPage() = default;

tp::SearchOptions AdvisorPage::options() const
{
    tp::SearchOptions o;
    o.batch = m_batch->value();
    o.seq = m_seq->value();
    o.context = m_context->value();
    o.maxTp = m_maxTp->value();
    o.activationDtype = m_doc->settings().activationDtype();
    o.kvCacheDtype = m_doc->settings().kvCacheDtype();
    // The editor's plan (one equal to a built-in candidate, the default say, folds into it in the search).
    if (m_doc->spec())
        o.plans.push_back({tr("editor's plan").toStdString(),
                           tr("the plan in the editor as it is now (its T is tried at every size)").toStdString(), m_doc->plan()});
    return o;
}

void AdvisorPage::addPlanFiles(const QStringList& files, bool forget)
{
    if (forget)
        m_planFiles.clear();
    for (const QString& f : files)
        if (!m_planFiles.contains(f))
            m_planFiles << f;
    m_plans->setText(m_planFiles.isEmpty() ? tr("Plans") : tr("Plans (+%1)").arg(m_planFiles.size()));
    m_plans->setToolTip(m_planFiles.isEmpty()
                            ? tr("The search tries the built-in candidates, the plans shipped for the model's type and "
                                 "the editor's plan; add your own plan files here")
                            : tr("Also tried: %1").arg(m_planFiles.join(QStringLiteral(", "))));
    m_forgetPlans->setEnabled(!m_planFiles.isEmpty());
    if (!files.isEmpty() || forget)
        invalidate();
}

void AdvisorPage::invalidate()
{
    ++m_generation;
    m_stale = true;
    if (isVisible())
        m_debounce->start();
}

void AdvisorPage::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    if (m_stale) // now, once the page is on screen
        QMetaObject::invokeMethod(this, &AdvisorPage::search, Qt::QueuedConnection);
}

void AdvisorPage::search()
{
    m_debounce->stop();
    if (!m_doc->spec()) {
        m_stale = false;
        clearResult(tr("Open a model to compare its candidate plans."));
        emit searchFinished();
        return;
    }
    if (m_watcher.isRunning()) { // one at a time: the newest inputs run when this one ends
        m_pending = true;
        return;
    }
    m_pending = false;
    m_stale = false;
    m_status->setText(tr("Searching: every candidate plan at every tp size…"));
    m_lastHardware = m_doc->settings().hardware;
    m_lastDtype = m_doc->settings().activationDtype();
    m_lastKvDtype = m_doc->settings().kvDtype;
    m_searchSpec = m_doc->specPtr();
    emit searchStarted();
    m_watcher.setFuture(runInBackground([spec = m_doc->specPtr(), hardware = m_lastHardware.toStdString(), o = options(),
                                         files = m_planFiles, gen = m_generation]() mutable {
        Outcome out;
        out.generation = gen;
        for (const QString& f : files) { // a file that does not load is left out, and said so
            auto p = tp::loadPlanFile(f.toStdString(), tp::VersionProfile::G3);
            if (!p.ok()) {
                out.skipped << qs(p.status().message());
                continue;
            }
            o.plans.push_back({QFileInfo(f).completeBaseName().toStdString(), tr("your plan %1").arg(f).toStdString(),
                               tp::resolveOverrides(*spec, *p)});
        }
        auto hw = tp::findHardware(hardware);
        if (!hw.ok()) {
            out.error = qs(hw.status().message());
            return out;
        }
        out.hardwareName = qs(hw->name);
        out.deviceBytes = deviceBytes(*hw);
        auto r = tp::searchPlans(*spec, *hw, o);
        if (r.ok())
            out.result = std::make_shared<const tp::SearchResult>(std::move(*r));
        else
            out.error = qs(r.status().message());
        return out;
    }));
}

void AdvisorPage::finished()
{
    const Outcome out = m_watcher.result();
    if (m_pending || out.generation != m_generation) {
        // Stale: the inputs changed meanwhile. Search again now (if shown) or when shown.
        m_stale = true;
        if (m_pending || isVisible())
            search();
        return;
    }
    m_result = out.result;
    m_resultSpec = m_searchSpec;
    m_selected = -1; // a model reset leaves the selection without a signal
    m_model->setResult(m_result);
    if (!m_result) {
        m_status->setText(tr("Cannot search: %1").arg(out.error));
        showEmpty(tr("Cannot search: %1").arg(out.error.toHtmlEscaped()));
        emit searchFinished();
        return;
    }
    const tp::SearchResult& r = *m_result;
    const auto front = std::count_if(r.candidates.begin(), r.candidates.end(), [](const auto& c) { return c.pareto; });
    QString status = tr("%1 candidates, %2 on the Pareto front; %3 invalid, %4 too large")
                         .arg(r.candidates.size())
                         .arg(front)
                         .arg(r.invalid)
                         .arg(r.tooLarge);
    if (!out.skipped.isEmpty())
        status += tr(" · not tried: %1").arg(out.skipped.join(QStringLiteral("; ")));
    if (r.candidates.empty()) {
        QString why;
        const tp::SearchOptions o = options();
        if (const auto& m = r.smallestTooLarge) {
            why = tr("<p><b>Nothing fits</b> on %1 (%2 per device) at batch %3 × context %4.</p>"
                     "<p>The least demanding candidate, <i>%5</i> at T=%6, needs %7 per rank: %8 more than the device "
                     "has.</p><p>%9</p>")
                      .arg(out.hardwareName.toHtmlEscaped(), humanBytes(out.deviceBytes))
                      .arg(o.batch)
                      .arg(o.context > 0 ? o.context : o.seq)
                      .arg(qs(m->name).toHtmlEscaped())
                      .arg(m->tp)
                      .arg(humanBytes(double(m->memoryBytes)), humanBytes(double(-m->headroomBytes)))
                      .arg(o.maxTp > 0 ? tr("Raise Max T, lower the batch or the context, or choose a machine with more memory.")
                                       : tr("Lower the batch or the context, or choose a machine with more memory."));
            status += tr(" · the least demanding, %1 at T=%2, needs %3 (%4 over)")
                          .arg(qs(m->name))
                          .arg(m->tp)
                          .arg(humanBytes(double(m->memoryBytes)), humanBytes(double(-m->headroomBytes)));
        } else {
            why = tr("<p><b>No valid candidate</b>: the planner rejects every plan at every tp size up to the maximum "
                     "(see Diagnostics for the default plan's errors).</p>");
        }
        m_status->setText(status);
        showEmpty(why);
        emit searchFinished();
        return;
    }
    status += tr(" · on %1, %2 per device").arg(out.hardwareName, humanBytes(out.deviceBytes));
    m_status->setText(status);
    m_stack->setCurrentIndex(1);
    plotResult();
    sortByObjective();
    emit searchFinished();
}

void AdvisorPage::clearResult(const QString& text)
{
    m_result.reset();
    m_resultSpec.reset();
    m_selected = -1;
    m_model->setResult(nullptr);
    m_status->clear();
    showEmpty(text);
}

void AdvisorPage::showEmpty(const QString& text)
{
    m_empty->setText(text);
    m_stack->setCurrentIndex(0);
    m_apply->setEnabled(false);
    m_export->setEnabled(false);
}

void AdvisorPage::plotResult()
{
    m_plot->clearGraphs();
    m_selectedGraph = nullptr;
    const auto& cs = m_result->candidates;
    double maxItl = 0;
    for (const auto& c : cs)
        maxItl = std::max(maxItl, c.itlSeconds);
    const TimeUnit unit = timeUnitFor(maxItl);
    m_itlScale = unit.perSecond;
    m_plot->xAxis->setLabel(tr("Inter-token latency (%1)").arg(unit.name));

    // One series per T (and pipeline size), named in the legend.
    std::map<std::pair<int, int>, QCPGraph*> byTp;
    for (const auto& c : cs)
        byTp[{c.tp, c.pp}] = nullptr;
    std::size_t n = 0;
    for (auto& [shape, g] : byTp) {
        g = m_plot->addGraph();
        g->setLineStyle(QCPGraph::lsNone);
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, seriesColor(n++), 8));
        g->setName(shape.second > 1 ? tr("T=%1 × PP=%2").arg(shape.first).arg(shape.second) : tr("T=%1").arg(shape.first));
    }
    for (const auto& c : cs)
        byTp[{c.tp, c.pp}]->addData(c.itlSeconds * m_itlScale, c.tokensPerSecondPerGpu);
    // The front: its points ringed and joined in order of ITL.
    std::vector<const tp::PlanCandidate*> front;
    for (const auto& c : cs)
        if (c.pareto)
            front.push_back(&c);
    std::sort(front.begin(), front.end(), [](auto* a, auto* b) { return a->itlSeconds < b->itlSeconds; });
    auto* pg = m_plot->addGraph();
    pg->setName(tr("Pareto front"));
    QPen fp(m_plot->palette().color(QPalette::Text));
    fp.setWidthF(1.2);
    fp.setStyle(Qt::DashLine);
    pg->setPen(fp);
    pg->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(m_plot->palette().color(QPalette::Text), 1.5), Qt::NoBrush, 12));
    for (const auto* c : front)
        pg->addData(c->itlSeconds * m_itlScale, c->tokensPerSecondPerGpu);
    // The selected candidate: a wide ring in the highlight colour, not in the legend.
    m_selectedGraph = m_plot->addGraph();
    m_selectedGraph->setLineStyle(QCPGraph::lsNone);
    m_selectedGraph->setScatterStyle(
        QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(m_plot->palette().color(QPalette::Highlight), 3), Qt::NoBrush, 20));
    m_selectedGraph->removeFromLegend();

    m_plot->rescaleAxes();
    for (QCPAxis* a : {m_plot->xAxis, m_plot->yAxis}) {
        QCPRange r = a->range();
        const double pad = r.size() > 0 ? r.size() * 0.12 : std::max(std::abs(r.center()) * 0.1, 1e-9);
        a->setRange(std::max(0.0, r.lower - pad), r.upper + pad);
    }
    m_plot->replot();
}

void AdvisorPage::markSelection()
{
    if (!m_selectedGraph || !m_result)
        return;
    m_selectedGraph->data()->clear();
    if (m_selected >= 0) {
        const tp::PlanCandidate& c = m_result->candidates[std::size_t(m_selected)];
        m_selectedGraph->addData(c.itlSeconds * m_itlScale, c.tokensPerSecondPerGpu);
    }
    m_plot->replot();
}

void AdvisorPage::sortByObjective()
{
    switch (m_objective->currentData().toInt()) {
    case TtftObjective: m_table->sortByColumn(CandidateTableModel::TtftColumn, Qt::AscendingOrder); break;
    case ItlObjective: m_table->sortByColumn(CandidateTableModel::ItlColumn, Qt::AscendingOrder); break;
    default: m_table->sortByColumn(CandidateTableModel::ThroughputColumn, Qt::DescendingOrder); break;
    }
    if (m_proxy->rowCount() > 0)
        selectCandidate(m_proxy->mapToSource(m_proxy->index(0, 0)).row());
}

void AdvisorPage::selectCandidate(int index)
{
    if (!m_result || index < 0 || index >= int(m_result->candidates.size()))
        return;
    const QModelIndex i = m_proxy->mapFromSource(m_model->index(index, 0));
    m_table->selectionModel()->setCurrentIndex(i, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    m_table->scrollTo(i);
}

QPointF AdvisorPage::pixelOf(int index) const
{
    const tp::PlanCandidate& c = m_result->candidates[std::size_t(index)];
    return {m_plot->xAxis->coordToPixel(c.itlSeconds * m_itlScale), m_plot->yAxis->coordToPixel(c.tokensPerSecondPerGpu)};
}

int AdvisorPage::candidateAt(const QPointF& pos) const
{
    if (!m_result || m_stack->currentIndex() != 1)
        return -1;
    int best = -1;
    double bestD2 = 8.0 * 8.0; // within 8 pixels
    for (int i = 0; i < int(m_result->candidates.size()); ++i) {
        const QPointF d = pixelOf(i) - pos;
        if (const double d2 = QPointF::dotProduct(d, d); d2 <= bestD2) {
            bestD2 = d2;
            best = i;
        }
    }
    return best;
}

void AdvisorPage::applySelected()
{
    if (!m_result || m_selected < 0 || m_resultSpec.get() != m_doc->spec())
        return;
    const tp::PlanCandidate& c = m_result->candidates[std::size_t(m_selected)];
    m_doc->replacePlan(c.plan, tr("Apply advisor's %1 at T=%2").arg(qs(c.name)).arg(c.tp));
    emit message(c.pp > 1 ? tr("Applied %1 at T=%2 (Undo restores the previous plan); its %3 pipeline stages are not part of a "
                               "tp_plan: load it with DistributedConfig(tp_size=%2, pp_size=%3)")
                                .arg(qs(c.name))
                                .arg(c.tp)
                                .arg(c.pp)
                          : tr("Applied %1 at T=%2 (Undo restores the previous plan)").arg(qs(c.name)).arg(c.tp));
}

tp::Status AdvisorPage::exportSelected(const QString& path) const
{
    if (!m_result || m_selected < 0 || m_resultSpec.get() != m_doc->spec())
        return tp::Status(tp::StatusCode::FailedPrecondition, "no candidate selected");
    return m_doc->writePlanJson(m_result->candidates[std::size_t(m_selected)].plan, path);
}

void AdvisorPage::exportDialog()
{
    if (!m_result || m_selected < 0)
        return;
    const tp::PlanCandidate& c = m_result->candidates[std::size_t(m_selected)];
    QString name = c.pp > 1 ? QStringLiteral("T%1xPP%2-%3.json").arg(c.tp).arg(c.pp).arg(qs(c.name))
                            : QStringLiteral("T%1-%2.json").arg(c.tp).arg(qs(c.name));
    name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9._-]")), QStringLiteral("-"));
    const QString f = QFileDialog::getSaveFileName(this, tr("Export candidate plan"), name, tr("Transformers JSON (*.json)"));
    if (f.isEmpty())
        return;
    if (const auto st = exportSelected(f); !st.ok())
        QMessageBox::warning(this, tr("Cannot export plan"), qs(st.message()));
    else
        emit message(tr("Plan written to %1").arg(f));
}

} // namespace tpui
