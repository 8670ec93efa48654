#include "widgets/main_window.h"

#include "models/background.h"
#include "models/format.h"
#include "models/job_tracker.h"
#include "models/module_tree_model.h"
#include "models/preview_models.h"
#include "models/settings.h"
#include "widgets/advisor_page.h"
#include "widgets/calibrate_dialog.h"
#include "widgets/custom_style_dialog.h"
#include "widgets/dataflow_view.h"
#include "widgets/editor_pages.h"
#include "widgets/jobs_button.h"
#include "widgets/placeholder_view.h"
#include "widgets/results_page.h"
#include "widgets/shard_view.h"
#include "widgets/style_delegate.h"
#include "widgets/theme.h"
#include "widgets/tree_expander.h"
#include "widgets/verify_dialog.h"

#include "tp/cost/hardware.h"
#include "tp/model/catalog.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QComboBox>
#include <QCoreApplication>
#include <QDialog>
#include <QDragEnterEvent>
#include <QElapsedTimer>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QDir>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPointer>
#include <QProgressBar>
#include <QScreen>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextTable>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <QTreeView>
#include <QUndoStack>
#include <QVBoxLayout>

// The icons live in tp_widgets, a static library: register its resources explicitly.
static void initWidgetResources() { Q_INIT_RESOURCE(tpstudio); }

namespace tpui {

namespace {

const QString kStyleMime = QStringLiteral("application/x-tpstudio-style");

std::atomic<int> g_opensRunning{0};

QIcon themeIcon(const char* name, const char* fallback)
{
    return QIcon::fromTheme(QString::fromLatin1(name), QIcon(QString::fromLatin1(fallback)));
}

QString qs(const std::string& s) { return QString::fromStdString(s); }

// Filters on the full path, keeping the ancestors of every match.
// The tree's filter: the model decides each row in one lookup (ModuleTreeModel::computeVerdicts made
// the verdicts in one pass), so a filter over 100,000 layers is not a path built and searched per row
// per ancestor.
class PathFilterProxy final : public QSortFilterProxyModel
{
public:
    explicit PathFilterProxy(ModuleTreeModel* model, QObject* parent)
        : QSortFilterProxyModel(parent)
        , m_model(model)
    {
        setSourceModel(model);
    }
    void setVerdicts(ModuleTreeModel::FilterVerdicts v)
    {
        m_model->setFilterVerdicts(std::move(v));
        invalidate(); // the mappings dropped, not refiltered row by row (with a filter's expansions, thousands of removals)
    }

protected:
    bool filterAcceptsRow(int row, const QModelIndex& parent) const override
    {
        return m_model->accepts(m_model->index(row, 0, parent));
    }

private:
    ModuleTreeModel* m_model;
};

// The style palette: drag a style onto a module of the tree.
class StylePalette final : public QListWidget
{
public:
    StylePalette()
    {
        setDragEnabled(true);
        setDragDropMode(QAbstractItemView::DragOnly);
        setToolTip(QObject::tr("Drag a style onto a module or parameter of the tree"));
        setFlow(QListView::LeftToRight);
        setWrapping(true);
        setResizeMode(QListView::Adjust);
        setSpacing(2);
        setMaximumHeight(fontMetrics().height() * 5 + 12);
    }

protected:
    QMimeData* mimeData(const QList<QListWidgetItem*>& items) const override
    {
        auto* m = new QMimeData;
        if (!items.isEmpty())
            m->setData(kStyleMime, items.first()->text().toUtf8());
        return m;
    }
    QStringList mimeTypes() const override { return {kStyleMime}; }
};

// The module tree accepts styles dropped from the palette.
class StyleDropTree final : public PlaceholderTree
{
public:
    std::function<void(const QModelIndex&, const QString&)> onDrop;
    std::function<void(const QModelIndex&)> onExpandAll; // * on a row: its subtree, a slice at a time
    StyleDropTree()
    {
        setAcceptDrops(true);
        setDropIndicatorShown(true);
        setDragDropMode(QAbstractItemView::DropOnly);
    }

protected:
    void keyPressEvent(QKeyEvent* e) override
    {
        if (e->key() == Qt::Key_Asterisk && onExpandAll && currentIndex().isValid()) {
            onExpandAll(currentIndex());
            return e->accept();
        }
        PlaceholderTree::keyPressEvent(e);
    }
    void dragEnterEvent(QDragEnterEvent* e) override
    {
        if (e->mimeData()->hasFormat(kStyleMime))
            e->acceptProposedAction();
        else
            PlaceholderTree::dragEnterEvent(e);
    }
    void dragMoveEvent(QDragMoveEvent* e) override
    {
        if (e->mimeData()->hasFormat(kStyleMime) && indexAt(e->position().toPoint()).isValid())
            e->acceptProposedAction();
        else
            e->ignore();
    }
    void dropEvent(QDropEvent* e) override
    {
        const QModelIndex idx = indexAt(e->position().toPoint());
        if (!e->mimeData()->hasFormat(kStyleMime) || !idx.isValid() || !onDrop)
            return e->ignore();
        onDrop(idx, QString::fromUtf8(e->mimeData()->data(kStyleMime)));
        e->acceptProposedAction();
    }
};


} // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent)
    , m_doc(new PlanDocument(this))
    , m_previews(new PreviewService(m_doc, this))
{
    initWidgetResources();
    setWindowTitle(tr("TP Studio"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/tpstudio.svg")));
    setAcceptDrops(true);

    // --- module tree ------------------------------------------------------------------------
    m_treeModel = new ModuleTreeModel(this);
    auto* proxy = new PathFilterProxy(m_treeModel, this);
    m_proxy = proxy;
    m_proxy->setSortRole(ModuleTreeModel::SortRole);

    m_filter = new QLineEdit;
    m_filter->setPlaceholderText(tr("Filter modules and parameters (e.g. layers.3.mlp, q_proj)"));
    m_filter->setClearButtonEnabled(true);
    // Folded first: the proxy then drops its mappings instead of removing the last filter's expanded
    // rows one by one; the matches open a slice at a time. A tree of more than kSyncFilterModules
    // modules gets its verdicts from a worker (walking 100,000 layers' paths takes longer than a frame).
    auto applyFilter = [this, proxy](ModuleTreeModel::FilterVerdicts v) {
        const QString text = v.text;
        m_expander->cancel();
        {
            const QSignalBlocker quiet(m_tree); // not the user folding: m_fold stays
            m_tree->collapseAll();
        }
        proxy->setVerdicts(std::move(v));
        if (!text.isEmpty()) {
            m_expander->expand({}, 7);
            return;
        }
        // No filter: the fold the user had before it comes back, and the current row stays in view.
        for (const QPersistentModelIndex& i : std::as_const(m_fold))
            if (i.isValid())
                m_tree->expand(m_proxy->mapFromSource(i));
        m_tree->scrollTo(m_tree->currentIndex());
    };
    connect(m_filter, &QLineEdit::textChanged, this, [this, applyFilter](const QString& text) {
        const quint64 gen = ++m_filterGeneration;
        const ModuleTreeModel::FilterInput in = m_treeModel->filterInput();
        if (text.isEmpty() || !in.spec || in.spec->modules.size() <= kSyncFilterModules) {
            applyFilter(ModuleTreeModel::computeVerdicts(in, text));
            return;
        }
        struct Done
        {
            std::shared_ptr<const tp::ModelSpec> spec;
            ModuleTreeModel::FilterVerdicts verdicts;
        };
        auto* watcher = new QFutureWatcher<Done>(this);
        connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, gen, applyFilter] {
            watcher->deleteLater();
            // Only the newest text, on the tree it was computed for.
            if (gen == m_filterGeneration && m_treeModel->filterInput().spec == watcher->result().spec)
                applyFilter(watcher->result().verdicts);
        });
        watcher->setFuture(runInBackground([in, text] { return Done{in.spec, ModuleTreeModel::computeVerdicts(in, text)}; }));
    });
    m_everyLayer = new QCheckBox(tr("Apply to every &layer"));
    m_everyLayer->setChecked(true);
    m_everyLayer->setToolTip(tr("On: an edit writes the wildcard key (model.layers.*.…). Off: the exact, indexed key of "
                                "that one layer (honoured by current Transformers only)."));

    auto* tree = new StyleDropTree;
    // What the empty tree says: no model yet, or a filter that matches nothing of the open one.
    auto placeholder = [this, tree] {
        const QString text = m_filter->text();
        tree->setPlaceholderText(m_treeModel->rowCount() > 0 && !text.isEmpty()
                                     ? tr("No module or parameter path contains “%1”. Clear the filter to see the whole "
                                          "tree.")
                                           .arg(text)
                                     : tr("No model open. File → Open Folder… or Open File… reads a Hugging Face model "
                                          "(config.json, safetensors); the catalog button in the toolbar lists built-in "
                                          "models."));
    };
    placeholder();
    connect(m_filter, &QLineEdit::textChanged, this, placeholder);
    connect(m_treeModel, &QAbstractItemModel::modelReset, this, placeholder);
    tree->onDrop = [this](const QModelIndex& idx, const QString& style) {
        editStyle(idx.data(ModuleTreeModel::PathRole).toString(), style);
    };
    m_tree = tree;
    m_tree->setModel(m_proxy);
    m_expander = new TreeExpander(m_tree);
    tree->onExpandAll = [this](const QModelIndex& i) { m_expander->expand(i, -1); };
    connect(m_expander, &TreeExpander::finished, this, [this](int expanded, bool capped, int wide) {
        if (capped)
            report(tr("Expanded %1 rows; the rest stay folded (expand them one at a time, or narrow the filter)").arg(expanded));
        else if (wide)
            report(tr("%n row(s) of more than %1 entries (a fold of many layers) stay folded: expand them yourself",
                      nullptr, wide)
                       .arg(TreeExpander::kWideRows));
    });
    connect(m_treeModel, &QAbstractItemModel::modelAboutToBeReset, m_expander, &TreeExpander::cancel);
    // The fold without a filter (source rows), kept while a filter opens its matches.
    connect(m_tree, &QTreeView::expanded, this, [this](const QModelIndex& i) {
        if (m_filter->text().isEmpty())
            m_fold.insert(m_proxy->mapToSource(i));
    });
    connect(m_tree, &QTreeView::collapsed, this, [this](const QModelIndex& i) {
        if (m_filter->text().isEmpty())
            m_fold.remove(m_proxy->mapToSource(i));
    });
    connect(m_treeModel, &QAbstractItemModel::modelAboutToBeReset, this, [this] { m_fold.clear(); });
    m_tree->setUniformRowHeights(true);
    m_tree->setAlternatingRowColors(true);
    m_tree->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::SelectedClicked | QAbstractItemView::EditKeyPressed);
    m_tree->header()->setStretchLastSection(false);
    m_tree->header()->setResizeContentsPrecision(200); // fitting a column measures 200 rows, not 1,000
    m_tree->header()->setSectionResizeMode(QHeaderView::Interactive);
    const int em = m_tree->fontMetrics().horizontalAdvance(QLatin1Char('M'));
    const std::pair<int, int> widths[] = {{ModuleTreeModel::NameColumn, 20}, {ModuleTreeModel::TypeColumn, 13},
                                          {ModuleTreeModel::StyleColumn, 14}, {ModuleTreeModel::KeyColumn, 18},
                                          {ModuleTreeModel::ShapeColumn, 10}, {ModuleTreeModel::LocalShapeColumn, 10},
                                          {ModuleTreeModel::SizeColumn, 7}};
    for (const auto& [c, w] : widths)
        m_tree->header()->resizeSection(c, w * em);
    // The style beside the module's name (what the tree is for), the class after it: with Type in
    // between, the pane's width cut Style off (issue 41). Visual order only; the model's columns stay.
    m_tree->header()->moveSection(m_tree->header()->visualIndex(ModuleTreeModel::StyleColumn), 1);
    // Columns fit what they show (styles such as colwise_gather_output, keys such as
    // model.layers.*.self_attn.q_proj), up to 48 em; a user's drag then holds until the next model.
    // The name column gives way (down to 12 em) so that Style stays in the pane.
    auto fitColumns = [this, em] {
        QHeaderView* h = m_tree->header();
        bool grewName = false;
        for (int c = ModuleTreeModel::NameColumn; c <= ModuleTreeModel::LocalShapeColumn; ++c) {
            const int want = std::min(std::max(static_cast<QAbstractItemView*>(m_tree)->sizeHintForColumn(c), h->sectionSizeHint(c)), 48 * em);
            if (want > h->sectionSize(c)) {
                h->resizeSection(c, want);
                grewName = grewName || c == ModuleTreeModel::NameColumn;
            }
        }
        const int room = m_tree->viewport()->width() - h->sectionSize(ModuleTreeModel::StyleColumn);
        if (grewName && h->sectionSize(ModuleTreeModel::NameColumn) > room)
            h->resizeSection(ModuleTreeModel::NameColumn, std::max(room, 12 * em));
    };
    // Once per burst: expanding to a depth (a filter, Expand All) emits expanded() for every row it
    // opens, and measuring every column once per row was quadratic in the rows (a 70B model's filter
    // held the window for seconds).
    auto* fitLater = new QTimer(this);
    fitLater->setSingleShot(true);
    fitLater->setInterval(0);
    connect(fitLater, &QTimer::timeout, this, fitColumns);
    connect(m_treeModel, &QAbstractItemModel::layoutChanged, fitLater, qOverload<>(&QTimer::start));
    connect(m_treeModel, &QAbstractItemModel::modelReset, fitLater, qOverload<>(&QTimer::start));
    connect(m_tree, &QTreeView::expanded, fitLater, qOverload<>(&QTimer::start));
    m_tree->setColumnHidden(ModuleTreeModel::DTypeColumn, true);
    m_tree->setColumnHidden(ModuleTreeModel::ParamsColumn, true);
    auto styleNames = [this] { return this->styleNames(); };
    m_tree->setItemDelegateForColumn(ModuleTreeModel::StyleColumn, new StyleDelegate(styleNames, this));
    connect(m_treeModel, &ModuleTreeModel::styleEditRequested, this, &MainWindow::editStyle);

    auto* left = new QWidget;
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addWidget(m_filter);
    leftLayout->addWidget(m_tree, 1);
    leftLayout->addWidget(m_everyLayer);
    m_palette = new StylePalette;
    leftLayout->addWidget(new QLabel(tr("Styles — drag onto a module:")));
    leftLayout->addWidget(m_palette);

    // --- pages ------------------------------------------------------------------------------
    m_summary = new tpui::SummaryPage;
    m_planPage = new tpui::PlanPage(m_doc, styleNames);
    connect(m_planPage, &tpui::PlanPage::pathActivated, this, &MainWindow::selectPath);
    connect(m_planPage, &tpui::PlanPage::keyRefused, this, [this](const QString& why) {
        if (m_showErrorDialogs)
            QMessageBox::warning(this, tr("Add key"), why);
        report(why);
    });
    m_shardView = new ShardView;
    m_dataflowPage = new tpui::DataflowPage;
    connect(m_dataflowPage->view(), &DataflowView::moduleActivated, this, &MainWindow::selectPath);
    m_collectivesPage = new tpui::CollectivesPage;
    connect(m_collectivesPage, &tpui::CollectivesPage::pathActivated, this, &MainWindow::selectPath);
    connect(m_collectivesPage, &tpui::CollectivesPage::tpActivated, this, [this](int t) { m_tp->setValue(t); });
    connect(m_collectivesPage, &tpui::CollectivesPage::kvDtypeChosen, this, [this](const QString& kv) {
        PreviewSettings s = m_doc->settings();
        s.kvDtype = kv;
        m_doc->setSettings(s);
    });
    m_diagnosticsPage = new tpui::DiagnosticsPage;
    connect(m_diagnosticsPage, &tpui::DiagnosticsPage::pathActivated, this, &MainWindow::selectPath);

    m_runPage = new RunPage(m_doc);
    m_results = new ResultsPage;
    connect(m_runPage, &RunPage::runFinished, this, [this](std::shared_ptr<const RunData> d) {
        m_results->setRun(d);
        m_tabs->setCurrentIndex(ResultsPageIndex);
        report(tr("Run finished"));
    });
    connect(m_runPage, &RunPage::runFailed, this, [this](const QString& m) { report(m); });
    connect(m_results, &ResultsPage::message, this, &MainWindow::report);
    connect(m_results, &ResultsPage::moduleActivated, this, [this](const QString& path) {
        m_tabs->setCurrentIndex(PlanPage);
        selectPath(path);
    });
    m_advisor = new AdvisorPage(m_doc);
    connect(m_advisor, &AdvisorPage::message, this, &MainWindow::report);

    m_tabs = new QTabWidget;
    m_tabs->setDocumentMode(true);
    m_tabs->addTab(m_summary, themeIcon("dialog-information", ":/icons/info.svg"), tr("Summary"));
    m_tabs->addTab(m_planPage, QIcon(QStringLiteral(":/icons/plan.svg")), tr("Plan"));
    m_tabs->addTab(m_shardView, themeIcon("view-grid", ":/icons/shards.svg"), tr("Shards"));
    m_tabs->addTab(m_dataflowPage, themeIcon("view-list-tree", ":/icons/dataflow.svg"), tr("Layer dataflow"));
    m_tabs->addTab(m_collectivesPage, themeIcon("network-transmit-receive", ":/icons/plan.svg"), tr("Collectives && memory"));
    m_tabs->addTab(m_diagnosticsPage, themeIcon("dialog-warning", ":/icons/warning.svg"), tr("Diagnostics"));
    m_tabs->addTab(m_runPage, QIcon(QStringLiteral(":/icons/run.svg")), tr("Run"));
    m_tabs->addTab(m_results, themeIcon("x-office-spreadsheet", ":/icons/plan.svg"), tr("Results"));
    m_tabs->addTab(m_advisor, themeIcon("system-search", ":/icons/info.svg"), tr("Advisor"));

    auto* split = new QSplitter;
    split->addWidget(left);
    split->addWidget(m_tabs);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 4);
    setCentralWidget(split);

    split->setSizes({460, 980}); // every page's tab in view at the default width

    // --- style palette under the tree: drag a style onto a module -------------------------------
    auto fillPalette = [this, styleNames] {
        m_palette->clear();
        for (const QString& n : styleNames()) {
            auto* item = new QListWidgetItem(n, m_palette);
            if (const tp::Style* s = tp::StyleRegistry::builtin().find(n.toStdString(), m_doc->plan().profile))
                item->setToolTip(qs(s->description));
        }
    };
    connect(m_doc, &PlanDocument::planChanged, this, fillPalette);

    m_statusLabel = new QLabel;
    m_previewLabel = new QLabel;
    statusBar()->addWidget(m_statusLabel, 1);
    m_jobs = new JobTracker(this);
    m_jobsButton = new JobsButton(m_jobs);
    statusBar()->addPermanentWidget(m_jobsButton);
    statusBar()->addPermanentWidget(m_previewLabel);
    const auto runEnded = track(m_runPage, &RunPage::runStarted, &RunPage::runFinished, tr("Running the plan"),
                                [this] { m_runPage->cancel(); });
    connect(m_runPage, &RunPage::runFailed, this, runEnded);
    track(m_results, &ResultsPage::benchmarkStarted, &ResultsPage::benchmarkFinished, tr("Benchmarking collectives"),
          [this] { m_results->stopBenchmark(); });
    connect(m_advisor, &AdvisorPage::searchStarted, this, [this] {
        if (!m_advisorJob)
            m_advisorJob = m_jobs->start(tr("Advisor search"));
    });
    connect(m_advisor, &AdvisorPage::searchFinished, this, [this] {
        m_jobs->finish(m_advisorJob);
        m_advisorJob = 0;
    });

    // Tree selection drives the shard view and the dataflow layer.
    connect(m_tree->selectionModel(), &QItemSelectionModel::currentChanged, this, [this](const QModelIndex& cur) {
        const QString path = cur.data(ModuleTreeModel::PathRole).toString();
        m_shardView->setParameter(path);
        const QRegularExpression layer(QStringLiteral("^model\\.layers\\.(\\d+)\\."));
        if (const auto m = layer.match(path); m.hasMatch())
            m_dataflowPage->layerBox()->setValue(m.captured(1).toInt());
    });

    connect(m_previews, &PreviewService::ready, this, &MainWindow::applyPreview);
    connect(&m_watcher, &QFutureWatcher<LoadResult>::finished, this, &MainWindow::loadFinished);

    setupActions();
    setupPreviewBar();

    // While a model opens: a busy bar and a Cancel button beside the status line. The window stays
    // usable with the model it shows.
    m_busy = new QProgressBar;
    m_busy->setRange(0, 0); // busy, no percentage: the engine reports no progress
    m_busy->setTextVisible(false);
    m_busy->setMaximumWidth(m_statusLabel->fontMetrics().horizontalAdvance(QLatin1Char('M')) * 10);
    m_busy->setMaximumHeight(m_statusLabel->fontMetrics().height() + 4);
    m_busy->setAccessibleName(tr("Opening a model"));
    m_cancelButton = new QToolButton;
    m_cancelButton->setDefaultAction(m_cancelOpenAction);
    m_cancelButton->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    m_cancelButton->setAutoRaise(true);
    statusBar()->addWidget(m_busy);
    statusBar()->addWidget(m_cancelButton);
    m_busy->hide();
    m_cancelButton->hide();
    m_openingTick = new QTimer(this);
    m_openingTick->setInterval(1000);
    connect(m_openingTick, &QTimer::timeout, this, [this] {
        const qint64 s = m_openingTimer.elapsed() / 1000;
        if (m_opening && s >= 1)
            m_statusLabel->setText(tr("Opening %1… %2 s").arg(m_openingWhat).arg(s));
    });
    // 1440 × 900, or the screen's available area when smaller (a 1280 × 800 laptop).
    const QRect avail = screen() ? screen()->availableGeometry() : QRect(0, 0, 1440, 900);
    resize(std::min(1440, avail.width()), std::min(900, avail.height()));
    restoreGeometry(Settings::windowGeometry());
    restoreState(Settings::windowState());
}

// No wait: an open still running holds only its own copies and finishes unseen; told it is unwanted,
// it frees what it built on its own thread.
MainWindow::~MainWindow()
{
    if (m_loadCancelled)
        m_loadCancelled->store(true);
}

void MainWindow::setupPreviewBar()
{
    auto* tb = addToolBar(tr("Preview"));
    tb->setObjectName(QStringLiteral("previewToolBar"));
    m_tp = new QSpinBox;
    m_tp->setRange(1, 256);
    m_batch = new QSpinBox;
    m_batch->setRange(1, 1 << 16);
    m_seq = new QSpinBox;
    m_seq->setRange(1, 1 << 20);
    m_hardware = new QComboBox;
    // About 24 characters of the profile's name in the bar (the list shows them whole): the toolbar
    // then fits a 1280-pixel screen with the DType box in view.
    m_hardware->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_hardware->setMinimumContentsLength(24);
    connect(m_hardware, &QComboBox::currentIndexChanged, m_hardware, [this] { m_hardware->setToolTip(m_hardware->currentText()); });
    // A list that opens below the box with every entry in view (a popup centred on the current
    // entry pushed the first ones above the screen's edge).
    m_hardware->setStyleSheet(QStringLiteral("QComboBox { combobox-popup: 0; }"));
    m_hardware->setMaxVisibleItems(24);
    m_dtype = new QComboBox;
    m_dtype->addItem(tr("model dtype"), QStringLiteral("model"));
    for (const char* d : {"bf16", "f16", "f32"})
        m_dtype->addItem(QString::fromLatin1(d), QString::fromLatin1(d));
    refreshHardwareList();
    tb->addWidget(new QLabel(tr(" TP size ")));
    tb->addWidget(m_tp);
    tb->addWidget(new QLabel(tr("  Hardware ")));
    tb->addWidget(m_hardware);
    tb->addWidget(new QLabel(tr("  Batch ")));
    tb->addWidget(m_batch);
    tb->addWidget(new QLabel(tr("  Sequence ")));
    tb->addWidget(m_seq);
    tb->addWidget(new QLabel(tr("  DType ")));
    tb->addWidget(m_dtype);

    // Settings kept between runs.
    const PreviewSettings s = Settings::preview();
    m_tp->setValue(s.tpSize);
    m_batch->setValue(int(s.batch));
    m_seq->setValue(int(s.seq));
    m_dtype->setCurrentIndex(std::max(0, m_dtype->findData(s.dtype)));
    m_hardware->setCurrentIndex(std::max(0, m_hardware->findData(s.hardware)));
    m_doc->setSettings(s);
    for (auto* sb : {m_tp, m_batch, m_seq})
        connect(sb, &QSpinBox::valueChanged, this, &MainWindow::settingsFromBar);
    for (auto* cb : {m_hardware, m_dtype})
        connect(cb, &QComboBox::currentIndexChanged, this, &MainWindow::settingsFromBar);
    // The document can change them too (imported plans, sessions).
    connect(m_doc, &PlanDocument::settingsChanged, this, [this] {
        const PreviewSettings& s = m_doc->settings();
        const QSignalBlocker a(m_tp), b(m_batch), c(m_seq), d(m_hardware), e(m_dtype);
        m_tp->setValue(s.tpSize);
        m_batch->setValue(int(s.batch));
        m_seq->setValue(int(s.seq));
        m_dtype->setCurrentIndex(std::max(0, m_dtype->findData(s.dtype)));
        m_hardware->setCurrentIndex(std::max(0, m_hardware->findData(s.hardware)));
    });
}

void MainWindow::refreshHardwareList(const QString& select)
{
    const QString current = select.isEmpty() ? m_doc->settings().hardware : select;
    {
        const QSignalBlocker block(m_hardware);
        m_hardware->clear();
        for (const auto& id : tp::builtinHardwareIds()) {
            auto hw = tp::findHardware(id);
            m_hardware->addItem(hw.ok() ? qs(hw->name) : qs(id), qs(id));
        }
        std::vector<std::string> errors;
        for (const auto& hw : tp::userHardwareProfiles(&errors)) {
            m_hardware->addItem(themeIcon("preferences-system", ":/icons/plan.svg"), tr("%1 (calibrated)").arg(qs(hw.name)), qs(hw.id));
            m_hardware->setItemData(m_hardware->count() - 1, qs(hw.source), Qt::ToolTipRole);
        }
        for (const auto& e : errors)
            report(tr("Hardware profile left out: %1").arg(qs(e)));
        m_hardware->setCurrentIndex(std::max(0, m_hardware->findData(current)));
    }
    if (m_hardware->currentData().toString() != m_doc->settings().hardware)
        settingsFromBar();
}

void MainWindow::settingsFromBar()
{
    PreviewSettings s = m_doc->settings(); // what the bar does not show (the KV cache's dtype) stays
    s.tpSize = m_tp->value();
    s.batch = m_batch->value();
    s.seq = m_seq->value();
    s.dtype = m_dtype->currentData().toString();
    s.hardware = m_hardware->currentData().toString();
    m_doc->setSettings(s);
}

void MainWindow::setupActions()
{
    auto* file = menuBar()->addMenu(tr("&File"));
    auto* tb = addToolBar(tr("Main"));
    tb->setObjectName(QStringLiteral("mainToolBar"));
    tb->setToolButtonStyle(Qt::ToolButtonIconOnly);

    auto* openFolder = file->addAction(themeIcon("folder-open", ":/icons/folder-open.svg"), tr("Open &Folder…"), this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Open model folder"));
        if (!dir.isEmpty())
            openModel(dir);
    });
    openFolder->setShortcut(QKeySequence::Open);
    auto* openFile = file->addAction(themeIcon("document-open", ":/icons/document-open.svg"), tr("Open &File…"), this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, tr("Open config.json or safetensors"), QString(),
                                                       tr("Model files (config.json *.safetensors *.index.json);;All files (*)"));
        if (!f.isEmpty())
            openModel(f);
    });
    auto* openHub = file->addAction(themeIcon("folder-download", ":/icons/hub.svg"), tr("Open from Hugging Face &Cache…"), this, [this] {
        bool ok = false;
        const QString id = QInputDialog::getText(this, tr("Open from the local Hugging Face cache"),
                                                 tr("Repo id (org/name), found in HF_HUB_CACHE or ~/.cache/huggingface — "
                                                    "nothing is downloaded:"),
                                                 QLineEdit::Normal, QString(), &ok);
        if (ok && !id.trimmed().isEmpty())
            openModel(id.trimmed());
    });
    auto* catalogMenu = file->addMenu(QIcon(QStringLiteral(":/icons/catalog.svg")), tr("Open from &Catalog"));
    for (const auto& e : tp::catalog()) {
        const QString id = qs(e.id);
        catalogMenu->addAction(qs(e.displayName), this, [this, id] { openModel(id); });
    }
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    rebuildRecentMenu();
    m_cancelOpenAction = file->addAction(themeIcon("process-stop", ":/icons/error.svg"), tr("Cancel &Opening"), this,
                                         &MainWindow::cancelOpening);
    m_cancelOpenAction->setShortcut(QKeySequence::Cancel);
    m_cancelOpenAction->setToolTip(tr("Stop waiting for the model being opened and keep the one shown"));
    m_cancelOpenAction->setEnabled(false);
    file->addSeparator();
    auto* importPlan = file->addAction(themeIcon("document-import", ":/icons/import.svg"), tr("&Import Plan…"), this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, tr("Import plan"), QString(), tr("Plans (*.json);;All files (*)"));
        if (f.isEmpty())
            return;
        if (auto st = m_doc->importPlan(f); !st.ok())
            QMessageBox::warning(this, tr("Cannot import plan"), qs(st.message()));
    });
    importPlan->setShortcut(QKeySequence(tr("Ctrl+I")));
    auto* exportPlan = file->addAction(themeIcon("document-export", ":/icons/export.svg"), tr("&Export Plan…"), this, [this] {
        QString selected;
        const QString f = QFileDialog::getSaveFileName(this, tr("Export plan"), QStringLiteral("tp_plan.json"),
                                                       tr("Transformers JSON (*.json);;Python script (*.py)"), &selected);
        if (f.isEmpty())
            return;
        const auto st = f.endsWith(QLatin1String(".py")) ? m_doc->exportPython(f) : m_doc->exportJson(f);
        if (!st.ok())
            QMessageBox::warning(this, tr("Cannot export plan"), qs(st.message()));
        else
            report(tr("Plan written to %1").arg(f));
    });
    exportPlan->setShortcut(QKeySequence(tr("Ctrl+E")));
    file->addSeparator();
    file->addAction(tr("Open &Session…"), this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, tr("Open session"), QString(), tr("TP Studio sessions (*.tpsession);;All files (*)"));
        if (!f.isEmpty())
            openSession(f);
    });
    file->addAction(tr("Restore &Last Session"), this, [this] {
        const QString last = Settings::lastSessionPath();
        if (QFile::exists(last))
            openSession(last);
        else
            report(tr("No session was saved at the last quit"));
    });
    auto* save = file->addAction(themeIcon("document-save", ":/icons/export.svg"), tr("&Save Session…"), this, [this] {
        const QString f = QFileDialog::getSaveFileName(this, tr("Save session"), QStringLiteral("plan.tpsession"),
                                                       tr("TP Studio sessions (*.tpsession)"));
        if (!f.isEmpty())
            saveSession(f);
    });
    save->setShortcut(QKeySequence::Save);
    file->addSeparator();
    auto* quit = file->addAction(themeIcon("application-exit", ":/icons/quit.svg"), tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    auto* edit = menuBar()->addMenu(tr("&Edit"));
    QAction* undo = m_doc->undoStack()->createUndoAction(this, tr("&Undo"));
    undo->setShortcut(QKeySequence::Undo);
    undo->setIcon(themeIcon("edit-undo", ":/icons/plan.svg"));
    QAction* redo = m_doc->undoStack()->createRedoAction(this, tr("&Redo"));
    redo->setShortcut(QKeySequence::Redo);
    redo->setIcon(themeIcon("edit-redo", ":/icons/plan.svg"));
    edit->addAction(undo);
    edit->addAction(redo);
    edit->addSeparator();
    edit->addAction(tr("Define &Custom Style…"), this, [this] {
        CustomStyleDialog dlg(this);
        if (dlg.exec() == QDialog::Accepted)
            if (auto s = dlg.style(); s.ok())
                m_doc->addCustomStyle(*s);
    });
    edit->addAction(tr("Reset to &Default Plan"), m_doc, &PlanDocument::resetToDefault);

    auto* view = menuBar()->addMenu(tr("&View"));
    auto* find = view->addAction(tr("&Filter Modules"), this, [this] { m_filter->setFocus(); m_filter->selectAll(); });
    find->setShortcut(QKeySequence::Find);
    view->addAction(tr("&Expand All"), this, [this] { m_expander->expand({}, -1); });
    view->addAction(tr("&Collapse All"), m_tree, &QTreeView::collapseAll);
    view->addSeparator();
    // Pages from anywhere in the window (the tree keeps focus otherwise): Ctrl+1…9, Ctrl+Tab.
    auto* pages = view->addMenu(tr("&Go to Page"));
    for (int i = 0; i < m_tabs->count(); ++i) {
        QAction* a = pages->addAction(m_tabs->tabIcon(i), m_tabs->tabText(i), this, [this, i] { m_tabs->setCurrentIndex(i); });
        a->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)));
        a->setShortcutContext(Qt::WindowShortcut);
        addAction(a);
        m_pageActions.push_back(a);
    }
    pages->addSeparator();
    auto* next = pages->addAction(tr("&Next Page"), this, [this] { m_tabs->setCurrentIndex((m_tabs->currentIndex() + 1) % m_tabs->count()); });
    next->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Tab), QKeySequence(Qt::CTRL | Qt::Key_PageDown)});
    auto* previous = pages->addAction(tr("&Previous Page"), this, [this] {
        m_tabs->setCurrentIndex((m_tabs->currentIndex() + m_tabs->count() - 1) % m_tabs->count());
    });
    previous->setShortcuts({QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Backtab), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Tab),
                            QKeySequence(Qt::CTRL | Qt::Key_PageUp)});
    for (QAction* a : {next, previous}) {
        a->setShortcutContext(Qt::WindowShortcut);
        addAction(a);
    }
    auto* themes = view->addMenu(tr("&Theme"));
    auto* themeGroup = new QActionGroup(this);
    for (const auto& [t, label] : {std::pair{Theme::System, tr("Follow &System")}, std::pair{Theme::Light, tr("&Light")},
                                   std::pair{Theme::Dark, tr("&Dark")}}) {
        QAction* a = themes->addAction(label);
        a->setCheckable(true);
        a->setChecked(currentTheme() == t);
        a->setData(themeName(t));
        themeGroup->addAction(a);
        connect(a, &QAction::triggered, this, [t] {
            applyTheme(t);
            Settings::setTheme(themeName(t));
        });
        m_themeActions.push_back(a);
    }

    auto* runMenu = menuBar()->addMenu(tr("&Run"));
    auto* run = runMenu->addAction(QIcon(QStringLiteral(":/icons/run.svg")), tr("&Run Plan"), this, [this] {
        m_tabs->setCurrentIndex(RunPageIndex);
        m_runPage->start();
    });
    run->setShortcut(QKeySequence(Qt::Key_F5));
    runMenu->addAction(tr("&Cancel Run"), m_runPage, &RunPage::cancel);
    m_verifyAction = runMenu->addAction(tr("&Verify with Transformers…"), this, [this] {
        if (!m_doc->spec())
            return;
        auto* dialog = new VerifyDialog(m_doc, m_tp->value(), this);
        dialog->setAttribute(Qt::WA_DeleteOnClose);
        track(dialog, &VerifyDialog::started, &VerifyDialog::done, tr("Verify with Transformers (T=%1)").arg(m_tp->value()),
              [dialog] { dialog->cancel(); });
        dialog->show();
    });
    m_verifyAction->setToolTip(tr("Run the plan in Hugging Face Transformers and compare its collectives and logits "
                                  "with the preview and the engine"));
    m_calibrateAction = runMenu->addAction(themeIcon("preferences-system", ":/icons/plan.svg"), tr("Calibrate This &Machine…"), this, [this] {
        if (auto* open = findChild<CalibrateDialog*>()) {
            open->raise();
            open->activateWindow();
            return;
        }
        auto* dialog = new CalibrateDialog(this);
        dialog->setAttribute(Qt::WA_DeleteOnClose);
        track(dialog, &CalibrateDialog::started, &CalibrateDialog::done, tr("Calibrating this machine"), [dialog] { dialog->stop(); });
        connect(dialog, &CalibrateDialog::done, this, [this](bool ok, const QString& id) {
            if (!ok)
                return;
            const bool again = id == m_doc->settings().hardware; // recalibrated: the same id, new figures
            refreshHardwareList(id);
            if (again) {
                m_previews->request();
                m_advisor->invalidate();
            }
            report(tr("Hardware profile %1 installed and selected").arg(id));
        });
        dialog->show();
    });
    m_calibrateAction->setToolTip(tr("Measure this machine and add its profile to the hardware list"));
    connect(m_advisor, &AdvisorPage::calibrateRequested, m_calibrateAction, &QAction::trigger);
    runMenu->addSeparator();
    runMenu->addAction(tr("Export &Chart…"), this, [this] {
        const QString f = QFileDialog::getSaveFileName(this, tr("Export chart"), QStringLiteral("chart.png"),
                                                       tr("PNG (*.png);;SVG (*.svg);;PDF (*.pdf)"));
        if (!f.isEmpty() && !m_results->exportChart(f))
            QMessageBox::warning(this, tr("Export chart"), tr("Cannot write %1").arg(f));
    });
    runMenu->addAction(tr("Export Run &Record…"), this, [this] {
        QString selected;
        const QString f = QFileDialog::getSaveFileName(this, tr("Export run record"), QStringLiteral("run.json"),
                                                       tr("Run record JSON (*.json);;Spans CSV (*.csv);;Chrome trace (*.trace.json)"),
                                                       &selected);
        if (f.isEmpty())
            return;
        const QString kind = f.endsWith(QLatin1String(".csv")) ? QStringLiteral("csv")
            : f.endsWith(QLatin1String(".trace.json")) || selected.startsWith(QLatin1String("Chrome")) ? QStringLiteral("trace")
                                                                                                        : QStringLiteral("json");
        if (!m_results->exportRecord(f, kind))
            QMessageBox::warning(this, tr("Export run record"), tr("No run to export, or cannot write %1").arg(f));
    });

    auto* help = menuBar()->addMenu(tr("&Help"));
    m_guideAction = help->addAction(themeIcon("help-contents", ":/icons/guide.svg"), tr("TP Studio &User Guide"), this, &MainWindow::showUserGuide);
    m_guideAction->setShortcut(QKeySequence::HelpContents);
    help->addSeparator();
    help->addAction(tr("&About TP Studio"), this, [this] {
        QMessageBox::about(this, tr("About TP Studio"),
                           tr("<b>TP Studio</b> %1<br>Plan and profile tensor parallelism for Transformer language "
                              "models.<br>Models open as Hugging Face Transformers builds them; weights are never "
                              "loaded to inspect a model and never downloaded.<br><br>Free software under the GNU "
                              "General Public License, version 3 or later (GPL-3.0-or-later); it comes with no "
                              "warranty. It uses Qt and QCustomPlot (GPL-3.0).")
                               .arg(QApplication::applicationVersion()));
    });

    for (QAction* a : {openFolder, openFile, openHub})
        tb->addAction(a);
    // The catalog in the toolbar: one click lists the built-in models.
    m_catalogButton = new QToolButton;
    m_catalogButton->setMenu(catalogMenu);
    m_catalogButton->setPopupMode(QToolButton::InstantPopup);
    m_catalogButton->setIcon(catalogMenu->icon());
    m_catalogButton->setToolTip(tr("Open a model from the built-in catalog (configs only, nothing downloaded)"));
    m_catalogButton->setAccessibleName(tr("Open from Catalog"));
    tb->addWidget(m_catalogButton);
    tb->addSeparator();
    tb->addAction(undo);
    tb->addAction(redo);
    tb->addAction(importPlan);
    tb->addAction(exportPlan);
    tb->addSeparator();
    // Run says what it does: a green start icon with its name beside it.
    tb->addAction(run);
    if (auto* runButton = qobject_cast<QToolButton*>(tb->widgetForAction(run)))
        runButton->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    run->setToolTip(tr("Run the plan on the embedded engine with the Run page's settings (F5)"));
}

template <class Source, class Started, class Done>
std::function<void()> MainWindow::track(Source* source, Started started, Done done, const QString& title, std::function<void()> cancel)
{
    auto id = std::make_shared<quint64>(0);
    // A dialog still open when the window closes is destroyed after the tracker (its sibling).
    const QPointer<JobTracker> jobs = m_jobs;
    auto end = [jobs, id] {
        if (jobs)
            jobs->finish(*id);
        *id = 0;
    };
    connect(source, started, this, [jobs, id, end, title, cancel] {
        end();
        if (jobs)
            *id = jobs->start(title, cancel);
    });
    connect(source, done, this, end);
    connect(source, &QObject::destroyed, this, end);
    return end;
}

QString MainWindow::userGuidePath()
{
    const QString exeDir = QCoreApplication::applicationDirPath();
    for (const QString& f : {exeDir + QStringLiteral("/../share/doc/tpstudio/user-guide.md"),
                             QStringLiteral(TP_SOURCE_DIR "/docs/user-guide.md")})
        if (QFileInfo::exists(f))
            return QFileInfo(f).canonicalFilePath();
    return QStringLiteral(":/docs/user-guide.md");
}

namespace {

// The guide's screenshots (1440 px windows) scaled to the page's width, never cut at its right edge;
// again whenever the dialog is resized. Never wider than the picture itself.
class GuideBrowser final : public QTextBrowser
{
public:
    using QTextBrowser::QTextBrowser;
    void fitImages()
    {
        const double room = std::max(120, viewport()->width() - 2 * int(document()->documentMargin()) - 4);
        QTextCursor c(document());
        for (QTextBlock b = document()->begin(); b.isValid(); b = b.next())
            for (auto it = b.begin(); !it.atEnd(); ++it) {
                const QTextFragment f = it.fragment();
                if (!f.charFormat().isImageFormat())
                    continue;
                QTextImageFormat img = f.charFormat().toImageFormat();
                const QImage native = document()->resource(QTextDocument::ImageResource, QUrl(img.name())).value<QImage>();
                if (native.isNull() || native.width() <= 0)
                    continue;
                // In a table (the guide's Light | Dark rows), a column's share of the page.
                c.setPosition(f.position());
                const QTextTable* table = c.currentTable();
                const double share = table ? room / table->columns() - 2 * (table->format().cellPadding() + table->format().border()) - 4
                                           : room;
                const double w = std::min(double(native.width()), std::max(60.0, share));
                if (std::abs(img.width() - w) < 0.5)
                    continue;
                img.setWidth(w);
                img.setHeight(native.height() * w / native.width());
                c.setPosition(f.position() + f.length(), QTextCursor::KeepAnchor);
                c.setCharFormat(img);
            }
    }

protected:
    void resizeEvent(QResizeEvent* e) override
    {
        QTextBrowser::resizeEvent(e);
        fitImages();
    }
};

} // namespace

void MainWindow::showUserGuide()
{
    if (auto* open = findChild<QDialog*>(QStringLiteral("userGuide"))) {
        open->raise();
        open->activateWindow();
        return;
    }
    auto* dialog = new QDialog(this);
    dialog->setObjectName(QStringLiteral("userGuide"));
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->setWindowTitle(tr("TP Studio User Guide"));
    auto* browser = new GuideBrowser(dialog);
    browser->setOpenExternalLinks(true);
    const QString path = userGuidePath();
    QFile f(path);
    if (f.open(QIODevice::ReadOnly)) {
        browser->setSearchPaths({QFileInfo(path).absolutePath()}); // its screenshots sit beside it
        browser->setMarkdown(QString::fromUtf8(f.readAll()));
        browser->fitImages();
    } else {
        browser->setPlainText(tr("The user guide cannot be read from %1.").arg(path));
    }
    auto* layout = new QVBoxLayout(dialog);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(browser);
    dialog->resize(900, 760);
    dialog->show();
}

PlanTableModel* MainWindow::planModel() const { return m_planPage->model(); }
QTableView* MainWindow::planView() const { return m_planPage->view(); }
CollectivesModel* MainWindow::collectivesModel() const { return m_collectivesPage->collectivesModel(); }
MemoryModel* MainWindow::memoryModel() const { return m_collectivesPage->memoryModel(); }
ScalingTable* MainWindow::scalingTable() const { return m_collectivesPage->scalingTable(); }
MemoryBars* MainWindow::memoryBars() const { return m_collectivesPage->memoryBars(); }
DiagnosticsModel* MainWindow::diagnosticsModel() const { return m_diagnosticsPage->model(); }
QTableView* MainWindow::diagnosticsView() const { return m_diagnosticsPage->view(); }
DataflowView* MainWindow::dataflowView() const { return m_dataflowPage->view(); }

void MainWindow::openModel(const QString& what) { startOpen(what, {}); }

void MainWindow::startOpen(const QString& what, const QByteArray& session)
{
    // Newest wins. tp::openModel has no cancellation point, so an open still running cannot be
    // stopped: it is told it is unwanted (it then frees its model on its own thread) and its result,
    // of an older generation, is dropped if it still arrives. Nothing here waits for it.
    if (m_loadCancelled)
        m_loadCancelled->store(true);
    auto cancelled = std::make_shared<std::atomic<bool>>(false);
    m_loadCancelled = cancelled;
    const quint64 gen = ++m_generation;
    m_pendingSession = session;
    m_openingWhat = what;
    setOpening(true);
    m_watcher.setFuture(runInBackground([what, gen, cancelled] {
        LoadResult out;
        out.what = what;
        out.generation = gen;
        if (cancelled->load())
            return out; // superseded before it started
        QElapsedTimer timer;
        timer.start();
        g_opensRunning.fetch_add(1);
        auto r = tp::openModel(what.toStdString());
        g_opensRunning.fetch_sub(1);
        if (cancelled->load())
            return out; // unwanted: the model is freed here, not on the GUI thread
        if (r.ok()) {
            tp::OpenedModel om = std::move(r).value();
            if (om.checkpoint) {
                out.checkpointFiles = om.checkpoint->files.size();
                out.checkpointTensors = om.checkpoint->tensors.size();
                out.checkpointBytes = std::int64_t(om.checkpoint->totalBytes);
            }
            if (auto text = tp::configText(om); text.ok())
                out.configText = std::move(*text);
            out.spec = std::make_shared<const tp::ModelSpec>(std::move(om.spec));
        } else {
            out.error = QString::fromStdString(r.status().message());
        }
        out.ms = timer.elapsed();
        return out;
    }));
}

void MainWindow::loadFinished()
{
    const LoadResult r = m_watcher.result();
    if (r.generation != m_generation)
        return; // superseded or cancelled
    setOpening(false);
    if (!r.spec) {
        m_statusLabel->setText(tr("Could not open %1").arg(r.what));
        m_pendingSession.clear();
        emit loadFailed(r.error);
        if (m_showErrorDialogs)
            QMessageBox::warning(this, tr("Cannot open model"), r.error);
        return;
    }
    showModel(r);
    addRecent(r.what);
    emit modelLoaded(r.what);
}

void MainWindow::cancelOpening()
{
    if (!m_opening)
        return;
    const QString what = m_openingWhat;
    if (m_loadCancelled)
        m_loadCancelled->store(true);
    ++m_generation; // its result, if it still comes, is stale
    m_pendingSession.clear();
    setOpening(false);
    m_statusLabel->setText(m_idleStatus);
    report(tr("Stopped opening %1").arg(what));
    emit loadCancelled(what);
}

void MainWindow::setOpening(bool on)
{
    m_jobs->finish(m_openJob); // done, cancelled or superseded
    m_openJob = on ? m_jobs->start(tr("Opening %1").arg(m_openingWhat), [this] { cancelOpening(); }) : 0;
    m_opening = on;
    if (!on)
        m_openingWhat.clear();
    m_cancelOpenAction->setEnabled(on);
    m_busy->setVisible(on);
    m_cancelButton->setVisible(on);
    if (on) {
        statusBar()->clearMessage(); // a passing message would hide the busy bar and Cancel
        m_openingTimer.start();
        m_openingTick->start();
        m_statusLabel->setText(tr("Opening %1…").arg(m_openingWhat));
    } else {
        m_openingTick->stop();
    }
}

void MainWindow::showModel(const LoadResult& r)
{
    const std::shared_ptr<const tp::ModelSpec>& spec = r.spec;
    const QString& what = r.what;
    m_modelDiagnostics = spec->diagnostics;
    m_treeModel->setSpec(spec);
    m_doc->setModel(spec, what);
    m_results->setModelConfig(spec, r.configText);
    if (!m_pendingSession.isEmpty()) {
        if (auto st = m_doc->restoreSession(m_pendingSession, nullptr); !st.ok())
            report(tr("Session not restored: %1").arg(qs(st.message())));
        m_pendingSession.clear();
    }
    m_tree->expandToDepth(1);
    m_tree->setCurrentIndex(m_proxy->index(0, 0));
    m_dataflowPage->setLayerCount(int(std::min<std::int64_t>(spec->config.numLayers, std::numeric_limits<int>::max())));
    m_summary->showModel(*r.spec, r.checkpointFiles, r.checkpointTensors, r.checkpointBytes);
    setWindowTitle(tr("%1 — TP Studio").arg(qs(spec->source)));
    m_idleStatus = tr("%1: %2 modules, %3 parameters, opened in %4 ms")
                       .arg(qs(spec->className))
                       .arg(spec->modules.size())
                       .arg(humanCount(spec->parameterCount()))
                       .arg(r.ms);
    m_statusLabel->setText(m_idleStatus);
    m_previewLabel->setText(tr("Computing the preview…"));
}

void MainWindow::applyPreview(std::shared_ptr<const PreviewResult> r)
{
    QElapsedTimer timer;
    timer.start();
    m_treeModel->setPreview(r);
    m_planPage->setPreview(r);
    m_collectivesPage->setPreview(r);
    std::vector<tp::Diagnostic> all = m_modelDiagnostics;
    all.insert(all.end(), r->graph.diagnostics.begin(), r->graph.diagnostics.end());
    all.insert(all.end(), r->feasibility.begin(), r->feasibility.end());
    m_diagnosticsPage->setDiagnostics(std::move(all));
    m_shardView->setPreview(r);
    m_summary->setPreview(*r);
    m_dataflowPage->view()->setPreview(r);
    m_results->setPreview(r);

    const int errors = diagnosticsModel()->count(tp::Severity::Error), warnings = diagnosticsModel()->count(tp::Severity::Warning);
    // The tab keeps its width (a count in its text shifted every tab after it): the icon tells errors,
    // warnings or neither, the tooltip and the status bar count them.
    m_tabs->setTabIcon(DiagnosticsPage, errors     ? themeIcon("dialog-error", ":/icons/error.svg")
                                        : warnings ? themeIcon("dialog-warning", ":/icons/warning.svg")
                                                   : themeIcon("dialog-information", ":/icons/info.svg"));
    m_tabs->setTabToolTip(DiagnosticsPage, tr("%n error(s)", nullptr, errors) + tr(", %n warning(s)", nullptr, warnings));
    m_lastApplyMs = double(timer.nsecsElapsed()) / 1e6;
    m_previewLabel->setText(tr("T=%1 · %2 collectives · %3 errors, %4 warnings · preview %5 ms worker + %6 ms GUI")
                                .arg(r->graph.tpSize)
                                .arg(r->graph.collectives.size())
                                .arg(errors)
                                .arg(warnings)
                                .arg(r->workerMs)
                                .arg(m_lastApplyMs, 0, 'f', 1));
    emit previewApplied();
}

QStringList MainWindow::styleNames() const
{
    // The current generation's built-in names, then the plan's custom styles.
    QStringList names;
    for (const auto& n : tp::StyleRegistry::builtin().names(m_doc->plan().profile))
        names << qs(n);
    for (const auto& c : m_doc->plan().customStyles)
        names << qs(c.name);
    return names;
}

void MainWindow::editStyle(const QString& path, const QString& style)
{
    if (path.isEmpty())
        return;
    m_doc->setStyle(PlanDocument::keyFor(path, m_everyLayer->isChecked()), style);
}

void MainWindow::report(const QString& text) { statusBar()->showMessage(text, 8000); }

QString MainWindow::statusText() const { return m_statusLabel->text(); }

int MainWindow::opensRunning() { return g_opensRunning.load(); }

void MainWindow::selectPath(const QString& path)
{
    const tp::ModelSpec* spec = m_doc->spec();
    QModelIndex src = m_treeModel->indexForPath(path);
    if (!src.isValid() && spec && path.contains(QLatin1Char('*'))) {
        // A generic path ("model.layers.*.mlp.experts") selects its first instance: a parameter
        // first, else a module; the search stops there (no list of every parameter is built).
        const std::string pattern = path.section(QLatin1Char(':'), 0, 0).toStdString();
        for (const auto& m : spec->modules) {
            for (const auto& p : m.params)
                if (tp::genericName(m.paramPath(p)) == pattern) {
                    src = m_treeModel->indexForPath(qs(m.paramPath(p)));
                    break;
                }
            if (src.isValid())
                break;
        }
        for (const auto& m : spec->modules)
            if (!src.isValid() && tp::genericName(m.path) == pattern) {
                src = m_treeModel->indexForPath(qs(m.path));
                break;
            }
    }
    if (!src.isValid())
        return;
    m_filter->clear();
    const QModelIndex idx = m_proxy->mapFromSource(src);
    for (QModelIndex p = idx.parent(); p.isValid(); p = p.parent())
        m_tree->expand(p);
    m_tree->scrollTo(idx);
    m_tree->setCurrentIndex(idx);
}

bool MainWindow::saveSession(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(m_doc->sessionJson()) < 0) {
        report(tr("Cannot write %1").arg(path));
        return false;
    }
    report(tr("Session saved to %1").arg(path));
    return true;
}

void MainWindow::openSession(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        report(tr("Cannot read %1").arg(path));
        return;
    }
    const QByteArray json = f.readAll();
    auto model = PlanDocument::sessionModel(json);
    if (!model.ok()) {
        const QString msg = tr("%1: %2").arg(path, qs(model.status().message()));
        if (m_showErrorDialogs)
            QMessageBox::warning(this, tr("Cannot open session"), msg);
        emit loadFailed(msg);
        return;
    }
    startOpen(*model, json);
}

void MainWindow::addRecent(const QString& what)
{
    Settings::addRecentModel(what);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu()
{
    m_recentMenu->clear();
    const QStringList recent = Settings::recentModels();
    for (const QString& r : recent)
        m_recentMenu->addAction(r, this, [this, r] { openModel(r); });
    m_recentMenu->setEnabled(!recent.isEmpty());
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasUrls() && event->mimeData()->urls().first().isLocalFile())
        event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event)
{
    const auto urls = event->mimeData()->urls();
    if (!urls.isEmpty() && urls.first().isLocalFile()) {
        const QString f = urls.first().toLocalFile();
        if (f.endsWith(QLatin1String(".tpsession")))
            openSession(f);
        else
            openModel(f);
        event->acceptProposedAction();
    }
}

// A theme switched at run time: the style-sheeted hardware box keeps the palette it was polished
// with (it stayed white in dark mode) until its sheet is set again.
void MainWindow::changeEvent(QEvent* event)
{
    QMainWindow::changeEvent(event);
    if (m_hardware && (event->type() == QEvent::PaletteChange || event->type() == QEvent::StyleChange)) {
        const QString sheet = m_hardware->styleSheet();
        m_hardware->setStyleSheet({});
        m_hardware->setStyleSheet(sheet);
    }
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    Settings::setWindow(saveGeometry(), saveState());
    Settings::setPreview(m_doc->settings());
    // The plan survives a quit: the session is saved next to the settings.
    if (m_doc->spec()) {
        QFile f(Settings::lastSessionPath());
        if (f.open(QIODevice::WriteOnly | QIODevice::Truncate))
            f.write(m_doc->sessionJson());
    }
    QMainWindow::closeEvent(event);
}

} // namespace tpui
