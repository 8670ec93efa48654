#include "widgets/editor_pages.h"

#include "models/format.h"
#include "models/plan_document.h"
#include "models/preview_models.h"
#include "widgets/custom_style_dialog.h"
#include "widgets/dataflow_view.h"
#include "widgets/memory_bars.h"
#include "widgets/placeholder_view.h"
#include "widgets/scaling_table.h"
#include "widgets/style_delegate.h"

#include "tp/cost/cost_model.h"
#include "tp/model/loader.h"

#include <QComboBox>
#include <QFrame>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QIcon>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>

namespace tpui {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QIcon themeIcon(const char* name, const char* fallback)
{
    return QIcon::fromTheme(QString::fromLatin1(name), QIcon(QString::fromLatin1(fallback)));
}

} // namespace

// --- Summary --------------------------------------------------------------------------------------

SummaryPage::SummaryPage(QWidget* parent) : QTextBrowser(parent)
{
    setOpenLinks(false);
    setPlaceholderText(tr("No model open."));
}

void SummaryPage::showModel(const tp::ModelSpec& spec, std::size_t checkpointFiles, std::size_t checkpointTensors, std::int64_t checkpointBytes)
{
    const tp::ModelSpec& s = spec;
    const tp::ModelConfig& c = s.config;
    QString h;
    auto row = [&h](const QString& k, const QString& v) {
        h += QStringLiteral("<tr><td style='padding-right:16px'><b>%1</b></td><td>%2</td></tr>").arg(k, v);
    };
    h += QStringLiteral("<h3>%1</h3><table>").arg(qs(s.className).toHtmlEscaped());
    row(tr("Source"), qs(s.source).toHtmlEscaped());
    row(tr("model_type"), qs(c.modelType) + (c.wrapperModelType.empty() ? QString() : tr(" (text model of %1)").arg(qs(c.wrapperModelType))));
    row(tr("Parameters"), tr("%1 (%2)").arg(QLocale(QLocale::English).toString(qlonglong(s.parameterCount())), humanBytes(double(s.parameterBytes()))));
    for (const auto& [t, b] : s.bytesByDtype())
        row(QStringLiteral("&nbsp;&nbsp;%1").arg(dtypeText(t)), humanBytes(double(b)));
    row(tr("Layers"), QString::number(c.numLayers));
    row(tr("Hidden / intermediate"), QStringLiteral("%1 / %2").arg(c.hiddenSize).arg(c.intermediateSize));
    row(tr("Vocabulary"), QString::number(c.vocabSize));
    row(tr("Heads"), tr("%1 query, %2 key/value, head_dim %3%4").arg(c.numHeads).arg(c.numKvHeads).arg(c.headDim).arg(c.headDimGiven ? QString() : tr(" (derived)")));
    if (c.isMoe())
        row(tr("Experts"), tr("%1, %2 per token, intermediate %3%4").arg(c.numExperts).arg(c.expertsPerToken).arg(c.moeIntermediateSize)
                                .arg(c.numSharedExperts ? tr(", %1 shared").arg(c.numSharedExperts) : QString()));
    if (c.isMla())
        row(tr("MLA"), tr("kv_lora_rank %1, q_lora_rank %2, rope %3, nope %4, v %5").arg(c.kvLoraRank)
                           .arg(c.qLoraRank ? QString::number(*c.qLoraRank) : tr("none")).arg(c.qkRopeHeadDim).arg(c.qkNopeHeadDim).arg(c.vHeadDim));
    row(tr("Embeddings"), c.tieWordEmbeddings ? tr("tied to lm_head") : tr("untied"));
    QStringList tps;
    for (int t : tp::tpSizesDividingHeads(c, 64))
        tps << QString::number(t);
    row(tr("Valid tp sizes"), tps.join(QStringLiteral(", ")));
    row(tr("supports_tp_plan"), s.supportsTpPlan ? tr("yes") : tr("no"));
    if (checkpointBytes >= 0)
        row(tr("Checkpoint"), tr("%1 file(s), %2 tensors, %3").arg(checkpointFiles)
                                  .arg(QLocale(QLocale::English).toString(qlonglong(checkpointTensors))).arg(humanBytes(double(checkpointBytes))));
    else
        row(tr("Checkpoint"), tr("none (config only; runs use seeded random weights)"));
    h += QStringLiteral("</table>");
    if (!s.defaultEpPlan.empty()) {
        // The class's ep_plan is not what the editor starts from: Transformers applies it only with ep_size > 1.
        const bool tpExperts = std::any_of(s.defaultTpPlan.begin(), s.defaultTpPlan.end(),
                                           [](const tp::PlanEntry& e) { return e.style == "moe_tp_experts"; });
        h += tr("<p><b>The class's expert-parallel plan</b> (ep_plan, applied by Transformers only with "
                "<code>ep_size</code> &gt; 1; the plan edited here starts from its tp_plan%1): ")
                 .arg(tpExperts ? tr(", whose experts are sharded by <code>moe_tp_experts</code>")
                                : tr(", which leaves the experts whole"));
        QStringList eps;
        for (const auto& e : s.defaultEpPlan)
            eps << QStringLiteral("%1 → %2").arg(qs(e.key), qs(e.style)).toHtmlEscaped();
        h += eps.join(QStringLiteral(", "))
           + tr(". The Advisor's <i>expert parallel</i> candidate and the shipped <code>expert-parallel.json</code> plans "
                "use it.</p>");
    }
    m_model = h;
    m_plan.clear();
    render();
}

void SummaryPage::setPreview(const PreviewResult& r)
{
    QString h;
    const auto& g = r.graph;
    const QString where = r.hardware ? qs(r.hardware->name).toHtmlEscaped() : r.settings.hardware.toHtmlEscaped();
    h += tr("<h3>The plan at T=%1 on %2</h3>").arg(g.tpSize).arg(where);
    if (!g.valid()) {
        h += tr("<p>The plan has errors at T=%1: see <b>Diagnostics</b>. Nothing is predicted for it.</p>").arg(g.tpSize);
    } else if (!r.cost || !r.decodeCost) {
        h += QStringLiteral("<p>%1</p>").arg((r.hardwareError.isEmpty() ? r.memoryError : r.hardwareError).toHtmlEscaped());
    } else {
        auto row = [&h](const QString& k, const QString& v) {
            h += QStringLiteral("<tr><td style='padding-right:16px'><b>%1</b></td><td>%2</td></tr>").arg(k, v);
        };
        h += QStringLiteral("<table>");
        if (!r.memory.empty()) {
            const auto most = std::max_element(r.memory.begin(), r.memory.end(), [](const auto& a, const auto& b) {
                return a.neededBytes() < b.neededBytes();
            });
            const QString usable = r.hardware ? qs(r.hardware->usableMemoryText()) : humanBytes(double(most->deviceBytes));
            row(tr("Fits"), most->fits() ? tr("yes: rank %1 needs %2 of %3, %4 free")
                                               .arg(most->rank)
                                               .arg(humanBytes(double(most->neededBytes())), usable, humanBytes(double(most->headroomBytes())))
                                         : tr("<span style='color:#d62728'>no</span>: rank %1 needs %2 of %3, %4 over")
                                               .arg(most->rank)
                                               .arg(humanBytes(double(most->neededBytes())), usable, humanBytes(double(-most->headroomBytes()))));
        }
        row(tr("Prefill"), tr("%1 for batch %2 × %3 tokens (%4% communicating)")
                               .arg(humanSeconds(r.cost->totalSeconds()))
                               .arg(r.settings.batch)
                               .arg(r.settings.seq)
                               .arg(r.cost->commShare() * 100, 0, 'f', 1));
        const double step = r.decodeCost->totalSeconds();
        row(tr("Decode step"), tr("%1 at context %2: %3 tokens/s (%4% communicating)")
                                   .arg(humanSeconds(step))
                                   .arg(r.settings.seq)
                                   .arg(step > 0 ? double(r.settings.batch) / step : 0.0, 0, 'f', 1)
                                   .arg(r.decodeCost->commShare() * 100, 0, 'f', 1));
        std::int64_t bytes = 0;
        for (const auto& c : g.collectives)
            bytes += c.bytes(g.options.batch, g.options.seq, g.elementBytes());
        row(tr("Collectives"), tr("%1 per forward, %2").arg(g.collectives.size()).arg(humanBytes(double(bytes))));
        row(tr("KV cache"), qs(tp::kvCacheLayoutText(*r.spec, g)).toHtmlEscaped());
        h += QStringLiteral("</table><p>Predicted by the cost model from the hardware profile (docs/metrics.md).</p>");
    }
    m_plan = h;
    render();
}

void SummaryPage::render() { setHtml(m_plan + m_model); }

// --- Plan -----------------------------------------------------------------------------------------

PlanPage::PlanPage(PlanDocument* doc, std::function<QStringList()> styleNames, QWidget* parent)
    : QWidget(parent)
    , m_doc(doc)
    , m_model(new PlanTableModel(this))
    , m_view(makeTable(m_model, tr("The plan has no keys: every module is replicated on every rank. Drag a style from "
                                   "the palette onto a module, Add Key…, or Reset to Default.")))
{
    connect(m_model, &PlanTableModel::styleEditRequested, this, [this](const QString& key, const QString& style) {
        m_doc->setStyle(key, style);
    });
    m_view->setEditTriggers(QAbstractItemView::AllEditTriggers);
    m_view->horizontalHeader()->setSectionResizeMode(PlanTableModel::KeyColumn, QHeaderView::Stretch);
    for (int c = PlanTableModel::StyleColumn; c < PlanTableModel::NUM_COLUMNS; ++c)
        m_view->horizontalHeader()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
    m_view->setItemDelegateForColumn(PlanTableModel::StyleColumn, new StyleDelegate(std::move(styleNames), this));
    connect(m_view, &QTableView::activated, this, [this](const QModelIndex& i) {
        if (i.column() == PlanTableModel::KeyColumn)
            emit pathActivated(m_model->keyAt(i.row()));
    });
    auto* add = new QPushButton(themeIcon("list-add", ":/icons/plan.svg"), tr("&Add Key…"));
    auto* remove = new QPushButton(themeIcon("list-remove", ":/icons/plan.svg"), tr("&Remove Key"));
    auto* custom = new QPushButton(tr("&Custom Style…"));
    auto* reset = new QPushButton(themeIcon("edit-undo", ":/icons/plan.svg"), tr("Reset to &Default"));
    connect(add, &QPushButton::clicked, this, [this] {
        bool ok = false;
        const QString key = QInputDialog::getText(this, tr("Add key"), tr("Full key from the loaded class ('*' = one layer index):"),
                                                  QLineEdit::Normal, QStringLiteral("model.layers.*."), &ok);
        if (!ok || key.trimmed().isEmpty())
            return;
        if (const QString why = addKey(key.trimmed()); !why.isEmpty())
            emit keyRefused(why);
    });
    connect(remove, &QPushButton::clicked, this, [this] {
        const QModelIndex i = m_view->currentIndex();
        if (i.isValid())
            m_doc->setStyle(m_model->keyAt(i.row()), QString());
    });
    connect(custom, &QPushButton::clicked, this, [this] {
        CustomStyleDialog dlg(this);
        if (dlg.exec() == QDialog::Accepted)
            if (auto s = dlg.style(); s.ok())
                m_doc->addCustomStyle(*s);
    });
    connect(reset, &QPushButton::clicked, m_doc, &PlanDocument::resetToDefault);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 4, 0, 0);
    auto* bar = new QHBoxLayout;
    for (auto* b : {add, remove, custom, reset})
        bar->addWidget(b);
    bar->addStretch(1);
    lay->addLayout(bar);
    lay->addWidget(m_view, 1);
}

void PlanPage::setPreview(std::shared_ptr<const PreviewResult> preview) { m_model->setPreview(std::move(preview)); }

QString PlanPage::addKey(const QString& key)
{
    const tp::ModelSpec* spec = m_doc->spec();
    if (!spec)
        return tr("Open a model before adding plan keys");
    const std::string k = key.toStdString();
    // Transformers matches a key against module and parameter names with each layer index as '*'
    // (and, in current versions, the exact indexed name first).
    const auto names = [&](const std::string& path) { return path == k || tp::genericName(path) == k; };
    const bool matches = std::any_of(spec->modules.begin(), spec->modules.end(), [&](const tp::ModuleSpec& m) {
        return (!m.path.empty() && names(m.path))
            || std::any_of(m.params.begin(), m.params.end(), [&](const tp::ParamSpec& p) { return names(m.paramPath(p)); });
    });
    if (!matches)
        return tr("'%1' names no module or parameter of %2: keys are full paths from the loaded class, with '*' for the "
                  "layer index (e.g. model.layers.*.mlp.down_proj)")
            .arg(key.size() > 200 ? key.left(200) + QStringLiteral("…") : key, qs(spec->className));
    m_doc->setStyle(key, QStringLiteral("replicate"));
    return {};
}

// --- Layer dataflow -------------------------------------------------------------------------------

DataflowPage::DataflowPage(QWidget* parent) : QWidget(parent), m_view(new DataflowView), m_layer(new QSpinBox)
{
    m_layer->setPrefix(tr("layer "));
    connect(m_layer, &QSpinBox::valueChanged, m_view, &DataflowView::setLayer);
    auto* dl = new QVBoxLayout(this);
    dl->setContentsMargins(0, 4, 0, 0);
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel(tr("Decoder layer:")));
    bar->addWidget(m_layer);
    bar->addStretch(1);
    dl->addLayout(bar);
    auto* scroll = new QScrollArea;
    scroll->setWidget(m_view);
    scroll->setWidgetResizable(true);
    dl->addWidget(scroll, 1);
}

void DataflowPage::setLayerCount(int layers) { m_layer->setRange(0, std::max(0, layers - 1)); }

// --- Collectives & memory -------------------------------------------------------------------------

CollectivesPage::CollectivesPage(QWidget* parent)
    : QWidget(parent)
    , m_collectivesModel(new CollectivesModel(this))
    , m_memoryModel(new MemoryModel(this))
    , m_scalingTable(new ScalingTable)
    , m_memoryBars(new MemoryBars)
    , m_caption(new QLabel)
    , m_kvDtype(new QComboBox)
    , m_kvLayout(new QLabel)
    , m_whole(new QTableWidget)
    , m_wholeCaption(new QLabel)
{
    auto* proxy = new QSortFilterProxyModel(this);
    proxy->setSourceModel(m_collectivesModel);
    proxy->setSortRole(CollectivesModel::SortRole);
    QTableView* collectives = m_collectivesView = makeTable(proxy, tr("No collectives: at T=1, or with a plan that keeps every module whole, the ranks "
                                                  "never communicate. Raise the TP size in the toolbar."));
    collectives->setSortingEnabled(true);
    collectives->sortByColumn(-1, Qt::AscendingOrder);
    collectives->horizontalHeader()->setSectionResizeMode(CollectivesModel::WhereColumn, QHeaderView::Stretch);
    connect(collectives, &QTableView::activated, this, [this](const QModelIndex& i) {
        emit pathActivated(i.data(CollectivesModel::PathRole).toString());
    });
    QTableView* memory = makeTable(m_memoryModel, tr("Open a model to see what each rank holds."));
    // Whole headers ("KV cache (B×S)", "Activation peak"); the table scrolls when narrow.
    memory->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    memory->horizontalHeader()->setStretchLastSection(true);
    m_caption->setWordWrap(true);
    m_caption->setTextInteractionFlags(Qt::TextSelectableByMouse);
    // T side by side; a click sets the toolbar's T.
    connect(m_scalingTable, &ScalingTable::tpActivated, this, &CollectivesPage::tpActivated);
    auto* bars = new QScrollArea;
    bars->setWidget(m_memoryBars);
    bars->setWidgetResizable(true);
    bars->setFrameShape(QFrame::NoFrame);

    auto* scaling = new QWidget;
    auto* sl = new QVBoxLayout(scaling);
    sl->setContentsMargins(0, 0, 0, 0);
    sl->addWidget(m_caption);
    sl->addWidget(m_scalingTable, 1);
    auto* memoryPart = new QWidget;
    auto* ml = new QVBoxLayout(memoryPart);
    ml->setContentsMargins(0, 0, 0, 0);
    // The KV figures depend on how the serving engine caches: say which layout, and offer an fp8 cache.
    m_kvDtype->addItem(tr("as the activations (Transformers)"), QStringLiteral("model"));
    m_kvDtype->addItem(tr("fp8 (vLLM, SGLang --kv-cache-dtype fp8)"), QStringLiteral("fp8"));
    m_kvDtype->setToolTip(tr("What the KV cache stores: Transformers keeps k and v in the activations' dtype; serving "
                             "engines can keep them in fp8, half of bf16"));
    connect(m_kvDtype, &QComboBox::activated, this, [this] { emit kvDtypeChosen(m_kvDtype->currentData().toString()); });
    m_kvLayout->setWordWrap(true);
    m_kvLayout->setTextFormat(Qt::RichText);
    m_kvLayout->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* head = new QHBoxLayout;
    head->addWidget(new QLabel(tr("<b>Memory per rank</b> (batch × sequence tokens in the KV cache)")), 1);
    auto* kvLabel = new QLabel(tr("&KV cache:"));
    kvLabel->setBuddy(m_kvDtype);
    head->addWidget(kvLabel);
    head->addWidget(m_kvDtype);
    ml->addLayout(head);
    ml->addWidget(m_kvLayout);
    auto* memorySplit = new QSplitter(Qt::Horizontal);
    memorySplit->addWidget(bars);
    memorySplit->addWidget(memory);
    // Coverage: what stays whole on every rank, the largest first, with the default plan's style for it.
    m_whole->setColumnCount(5);
    m_whole->setHorizontalHeaderLabels({tr("Whole on every rank"), tr("Modules"), tr("Per rank"), tr("Of its weights"), tr("Default plan")});
    m_whole->horizontalHeaderItem(0)->setToolTip(tr("Weight matrices of Linear, Embedding and Experts modules that no key of "
                                                     "this plan shards, by plan key"));
    m_whole->horizontalHeaderItem(4)->setToolTip(tr("The style the class's default tp_plan gives this key (or a key under "
                                                     "it): what would shard it"));
    m_whole->verticalHeader()->hide();
    m_whole->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_whole->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_whole->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_whole->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
    memorySplit->setStretchFactor(0, 1);
    memorySplit->setStretchFactor(1, 1);
    memorySplit->setSizes({500, 600});
    ml->addWidget(memorySplit, 1);
    // Below: the coverage line, and the table when something is whole.
    m_wholeCaption->setWordWrap(true);
    ml->addWidget(m_wholeCaption);
    ml->addWidget(m_whole, 1);

    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(collectives);
    split->addWidget(scaling);
    split->addWidget(memoryPart);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setStretchFactor(2, 2);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addWidget(split);
}

void CollectivesPage::setPreview(std::shared_ptr<const PreviewResult> r)
{
    m_collectivesModel->setPreview(r);
    // The Style column as wide as its widest style (embedding_rowwise, moe_tp_experts), measured on the
    // plan's keys (a collective's style is its key's), not on 200,000 rows.
    int styleWidth = m_collectivesView->horizontalHeader()->sectionSizeHint(CollectivesModel::StyleColumn);
    if (r->graph.plan)
        for (const auto& e : r->graph.plan->entries)
            styleWidth = std::max(styleWidth, m_collectivesView->fontMetrics().horizontalAdvance(qs(e.style)) + 16);
    m_collectivesView->horizontalHeader()->resizeSection(CollectivesModel::StyleColumn, styleWidth);
    m_memoryModel->setPreview(r);
    m_scalingTable->setPreview(r);
    m_memoryBars->setPreview(r);
    QString scaling;
    if (r->cost)
        scaling = tr("<b>Predicted scaling</b> on %1, batch %2 × sequence %3 (decode at context %3). At T=%4: "
                     "forward %5 compute + %6 communication (%7% communicating). Click a row to set T.")
                      .arg(r->hardware ? qs(r->hardware->name) : QString())
                      .arg(r->settings.batch)
                      .arg(r->settings.seq)
                      .arg(r->graph.tpSize)
                      .arg(humanSeconds(r->cost->computeSeconds), humanSeconds(r->cost->commSeconds))
                      .arg(r->cost->commShare() * 100, 0, 'f', 1);
    else
        scaling = r->hardwareError.isEmpty() ? tr("<b>The plan has errors</b> at T=%1: see Diagnostics. Click a row to set T.").arg(r->graph.tpSize)
                                             : r->hardwareError.toHtmlEscaped();
    m_caption->setText(scaling);
    {
        const QSignalBlocker block(m_kvDtype);
        m_kvDtype->setCurrentIndex(std::max(0, m_kvDtype->findData(r->settings.kvDtype)));
    }
    QString kv = r->spec ? tr("KV cache per token: %1.").arg(qs(tp::kvCacheLayoutText(*r->spec, r->graph)).toHtmlEscaped()) : QString();
    if (r->spec && r->fits && r->hardware)
        kv += tr("<br><b>What fits</b> a rank of %1 (%2): %3.")
                  .arg(qs(r->hardware->id).toHtmlEscaped(), qs(r->hardware->usableMemoryText()).toHtmlEscaped(),
                       qs(tp::whatFitsText(*r->fits, r->settings.batch, r->settings.seq, r->spec->config.maxPositionEmbeddings))
                           .toHtmlEscaped());
    m_kvLayout->setText(kv);

    // At T = 1 every weight is whole: nothing to say.
    const std::vector<tp::WholeWeights> whole = r->spec && r->graph.tpSize > 1 && r->graph.plan
                                                    ? tp::wholeWeights(*r->spec, r->graph, r->graph.plan->profile)
                                                    : std::vector<tp::WholeWeights>{};
    const double total = r->graph.memory.empty() ? 0.0 : double(r->graph.memory.front().weightBytes);
    m_whole->setRowCount(int(whole.size()));
    m_whole->setVisible(!whole.empty());
    m_wholeCaption->setText(r->graph.tpSize <= 1 || !r->spec ? QString()
                            : whole.empty() ? tr("<b>Coverage:</b> every weight matrix is sharded at T=%1.").arg(r->graph.tpSize)
                                            : tr("<b>Coverage:</b> weight matrices whole on every rank at T=%1, by plan key "
                                                 "(the default plan's style for each says what would shard it).")
                                                  .arg(r->graph.tpSize));
    for (int i = 0; i < int(whole.size()); ++i) {
        const tp::WholeWeights& w = whole[std::size_t(i)];
        const QStringList cells = {qs(w.key), QString::number(w.modules), humanBytes(double(w.bytes)),
                                   total > 0 ? QStringLiteral("%1%").arg(100.0 * double(w.bytes) / total, 0, 'f', 1) : QString(),
                                   w.defaultStyle.empty() ? tr("(none)") : qs(w.defaultStyle)};
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (c > 0 && c < 4)
                item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            m_whole->setItem(i, c, item);
        }
    }
}

// --- Diagnostics ----------------------------------------------------------------------------------

DiagnosticsPage::DiagnosticsPage(QWidget* parent)
    : QWidget(parent)
    , m_model(new DiagnosticsModel(this))
    , m_view(makeTable(m_model, tr("No diagnostics: the plan matches the model and has no errors or warnings at "
                                   "this T on this hardware.")))
{
    m_view->horizontalHeader()->setSectionResizeMode(DiagnosticsModel::MessageColumn, QHeaderView::Stretch);
    m_view->horizontalHeader()->setSectionResizeMode(DiagnosticsModel::WhereColumn, QHeaderView::ResizeToContents);
    m_view->setWordWrap(true);
    m_view->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    connect(m_view, &QTableView::activated, this, [this](const QModelIndex& i) {
        emit pathActivated(i.data(DiagnosticsModel::WhereRole).toString());
    });
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addWidget(m_view);
}

void DiagnosticsPage::setDiagnostics(std::vector<tp::Diagnostic> diagnostics) { m_model->setDiagnostics(std::move(diagnostics)); }

} // namespace tpui
