#include "widgets/main_window.h"

#include "models/format.h"
#include "models/module_tree_model.h"

#include "tp/model/catalog.h"

#include <QAction>
#include <QApplication>
#include <QDragEnterEvent>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QTextBrowser>
#include <QToolBar>
#include <QTreeView>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

namespace tpui {

namespace {

QIcon themeIcon(const char* name, const char* fallback)
{
    return QIcon::fromTheme(QString::fromLatin1(name), QIcon(QString::fromLatin1(fallback)));
}

QString qs(const std::string& s) { return QString::fromStdString(s); }

// Filters on the full path, keeping the ancestors of every match.
class PathFilterProxy final : public QSortFilterProxyModel
{
public:
    using QSortFilterProxyModel::QSortFilterProxyModel;

protected:
    bool filterAcceptsRow(int row, const QModelIndex& parent) const override
    {
        const auto re = filterRegularExpression();
        if (re.pattern().isEmpty())
            return true;
        const QModelIndex idx = sourceModel()->index(row, 0, parent);
        return idx.data(ModuleTreeModel::PathRole).toString().contains(re);
    }
};

} // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent)
{
    setWindowTitle(tr("TP Studio"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/tpstudio.svg")));
    setAcceptDrops(true);

    m_treeModel = new ModuleTreeModel(this);
    m_proxy = new PathFilterProxy(this);
    m_proxy->setSourceModel(m_treeModel);
    m_proxy->setRecursiveFilteringEnabled(true);
    m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
    m_proxy->setSortRole(ModuleTreeModel::SortRole);

    m_filter = new QLineEdit;
    m_filter->setPlaceholderText(tr("Filter modules and parameters (e.g. layers.3.mlp, q_proj)"));
    m_filter->setClearButtonEnabled(true);
    connect(m_filter, &QLineEdit::textChanged, this, [this](const QString& text) {
        m_proxy->setFilterFixedString(text);
        if (!text.isEmpty())
            m_tree->expandToDepth(6);
    });

    m_tree = new QTreeView;
    m_tree->setModel(m_proxy);
    m_tree->setUniformRowHeights(true);
    m_tree->setAlternatingRowColors(true);
    m_tree->header()->setStretchLastSection(false);
    m_tree->header()->setSectionResizeMode(ModuleTreeModel::NameColumn, QHeaderView::Stretch);
    for (int c = ModuleTreeModel::TypeColumn; c < ModuleTreeModel::NUM_COLUMNS; ++c)
        m_tree->header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);

    auto* left = new QWidget;
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addWidget(m_filter);
    leftLayout->addWidget(m_tree);

    m_summary = new QTextBrowser;
    m_summary->setOpenLinks(false);
    m_plan = new QTableWidget(0, 2);
    m_plan->setHorizontalHeaderLabels({tr("Key"), tr("Style")});
    m_plan->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
    m_plan->horizontalHeader()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
    m_plan->verticalHeader()->hide();
    m_plan->verticalHeader()->setDefaultSectionSize(m_plan->fontMetrics().height() + 6);
    m_plan->setWordWrap(false);
    m_plan->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_plan->setAlternatingRowColors(true);
    m_diagnostics = new QTreeWidget;
    m_diagnostics->setHeaderLabels({tr("Severity"), tr("Where"), tr("Message")});
    m_diagnostics->setRootIsDecorated(false);
    m_diagnostics->setWordWrap(true);
    m_diagnostics->header()->setSectionResizeMode(2, QHeaderView::Stretch);
    connect(m_diagnostics, &QTreeWidget::itemActivated, this, [this](QTreeWidgetItem* item) {
        selectPath(item->data(1, Qt::UserRole).toString());
    });

    m_tabs = new QTabWidget;
    m_tabs->setDocumentMode(true);
    m_tabs->addTab(m_summary, themeIcon("dialog-information", ":/icons/info.svg"), tr("Summary"));
    m_tabs->addTab(m_plan, QIcon(QStringLiteral(":/icons/plan.svg")), tr("Default plan"));
    m_tabs->addTab(m_diagnostics, themeIcon("dialog-warning", ":/icons/warning.svg"), tr("Diagnostics"));

    auto* split = new QSplitter;
    split->addWidget(left);
    split->addWidget(m_tabs);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    setCentralWidget(split);

    m_statusLabel = new QLabel;
    statusBar()->addWidget(m_statusLabel, 1);

    connect(&m_watcher, &QFutureWatcher<LoadResult>::finished, this, [this] {
        const LoadResult r = m_watcher.result();
        if (r.generation != m_generation)
            return; // a newer request replaced this one
        if (!r.model) {
            m_statusLabel->setText(tr("Could not open %1").arg(r.what));
            emit loadFailed(r.error);
            if (m_showErrorDialogs)
                QMessageBox::warning(this, tr("Cannot open model"), r.error);
            return;
        }
        showModel(std::make_shared<const tp::ModelSpec>(r.model->spec), *r.model, r.ms);
        addRecent(r.what);
        emit modelLoaded(r.what);
    });

    setupActions();
    resize(1280, 800);
}

MainWindow::~MainWindow()
{
    m_watcher.waitForFinished();
}

void MainWindow::setupActions()
{
    auto* file = menuBar()->addMenu(tr("&File"));
    auto* tb = addToolBar(tr("Main"));
    tb->setObjectName(QStringLiteral("mainToolBar"));
    tb->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);

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
    auto* catalogMenu = file->addMenu(themeIcon("text-x-generic-template", ":/icons/plan.svg"), tr("Open from &Catalog"));
    for (const auto& e : tp::catalog()) {
        const QString id = qs(e.id);
        catalogMenu->addAction(qs(e.displayName), this, [this, id] { openModel(id); });
    }
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    rebuildRecentMenu();
    file->addSeparator();
    auto* quit = file->addAction(themeIcon("application-exit", ":/icons/quit.svg"), tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    auto* view = menuBar()->addMenu(tr("&View"));
    auto* find = view->addAction(tr("&Filter Modules"), this, [this] { m_filter->setFocus(); m_filter->selectAll(); });
    find->setShortcut(QKeySequence::Find);
    view->addAction(tr("&Expand All"), m_tree, &QTreeView::expandAll);
    view->addAction(tr("&Collapse All"), m_tree, &QTreeView::collapseAll);

    auto* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About TP Studio"), this, [this] {
        QMessageBox::about(this, tr("About TP Studio"),
                           tr("<b>TP Studio</b> %1<br>Plan and profile tensor parallelism for Transformer language "
                              "models.<br>Models open as Hugging Face Transformers builds them; weights are never "
                              "loaded to inspect a model and never downloaded.")
                               .arg(QApplication::applicationVersion()));
    });

    tb->addAction(openFolder);
    tb->addAction(openFile);
    tb->addAction(openHub);
}

void MainWindow::openModel(const QString& what)
{
    const quint64 gen = ++m_generation;
    m_statusLabel->setText(tr("Opening %1…").arg(what));
    // Newest wins: an older request still running finishes unseen (openModel has no side effects).
    m_watcher.waitForFinished();
    m_watcher.setFuture(QtConcurrent::run([what, gen] {
        QElapsedTimer timer;
        timer.start();
        LoadResult out;
        out.what = what;
        out.generation = gen;
        auto r = tp::openModel(what.toStdString());
        if (r.ok())
            out.model = std::move(r).value();
        else
            out.error = QString::fromStdString(r.status().message());
        out.ms = timer.elapsed();
        return out;
    }));
}

void MainWindow::showModel(std::shared_ptr<const tp::ModelSpec> spec, const tp::OpenedModel& om, qint64 ms)
{
    m_spec = std::move(spec);
    m_treeModel->setSpec(m_spec);
    m_tree->expandToDepth(1);
    m_tree->setCurrentIndex(m_proxy->index(0, 0));
    fillSummary(om);
    fillPlan(*m_spec);
    fillDiagnostics(*m_spec);
    setWindowTitle(tr("%1 — TP Studio").arg(qs(m_spec->source)));
    m_statusLabel->setText(tr("%1: %2 modules, %3 parameters, opened in %4 ms")
                               .arg(qs(m_spec->className))
                               .arg(m_spec->modules.size())
                               .arg(humanCount(m_spec->parameterCount()))
                               .arg(ms));
}

void MainWindow::fillSummary(const tp::OpenedModel& om)
{
    const tp::ModelSpec& s = om.spec;
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
    if (om.checkpoint)
        row(tr("Checkpoint"), tr("%1 file(s), %2 tensors, %3").arg(om.checkpoint->files.size())
                                  .arg(QLocale(QLocale::English).toString(qlonglong(om.checkpoint->tensors.size()))).arg(humanBytes(double(om.checkpoint->totalBytes))));
    else
        row(tr("Checkpoint"), tr("none (config only)"));
    h += QStringLiteral("</table>");
    m_summary->setHtml(h);
}

void MainWindow::fillPlan(const tp::ModelSpec& s)
{
    m_plan->setRowCount(0);
    auto add = [this](const tp::PlanEntry& e, const QString& suffix) {
        const int r = m_plan->rowCount();
        m_plan->insertRow(r);
        m_plan->setItem(r, 0, new QTableWidgetItem(qs(e.key)));
        m_plan->setItem(r, 1, new QTableWidgetItem(qs(e.style) + suffix));
    };
    for (const auto& e : s.defaultTpPlan)
        add(e, QString());
    for (const auto& e : s.defaultEpPlan)
        add(e, tr("  (ep_plan)"));
}

void MainWindow::fillDiagnostics(const tp::ModelSpec& s)
{
    m_diagnostics->clear();
    int errors = 0, warnings = 0;
    for (const auto& d : s.diagnostics) {
        auto* item = new QTreeWidgetItem(m_diagnostics);
        const char* icon = d.severity == tp::Severity::Error ? "dialog-error"
            : d.severity == tp::Severity::Warning            ? "dialog-warning"
                                                             : "dialog-information";
        const char* fallback = d.severity == tp::Severity::Error ? ":/icons/error.svg"
            : d.severity == tp::Severity::Warning                ? ":/icons/warning.svg"
                                                                 : ":/icons/info.svg";
        item->setIcon(0, themeIcon(icon, fallback));
        item->setText(0, QString::fromLatin1(tp::severityName(d.severity)));
        item->setText(1, qs(d.where));
        item->setData(1, Qt::UserRole, qs(d.where));
        item->setText(2, qs(d.message) + (d.hint.empty() ? QString() : QStringLiteral("\n") + tr("Hint: %1").arg(qs(d.hint))));
        item->setToolTip(2, item->text(2));
        errors += d.severity == tp::Severity::Error;
        warnings += d.severity == tp::Severity::Warning;
    }
    m_tabs->setTabText(2, errors + warnings ? tr("Diagnostics (%1)").arg(errors + warnings) : tr("Diagnostics"));
}

void MainWindow::selectPath(const QString& path)
{
    QModelIndex src = m_treeModel->indexForPath(path);
    if (!src.isValid() && m_spec && path.contains(QLatin1Char('*'))) {
        // A generic path ("model.layers.*.mlp.experts") selects its first instance.
        const std::string pattern = path.toStdString();
        for (const auto& [name, p] : m_spec->allParams())
            if (tp::genericName(name) == pattern) {
                src = m_treeModel->indexForPath(qs(name));
                break;
            }
        for (const auto& m : m_spec->modules)
            if (!src.isValid() && tp::genericName(m.path) == pattern)
                src = m_treeModel->indexForPath(qs(m.path));
    }
    if (!src.isValid())
        return;
    m_filter->clear();
    const QModelIndex idx = m_proxy->mapFromSource(src);
    m_tree->scrollTo(idx);
    m_tree->setCurrentIndex(idx);
}

void MainWindow::addRecent(const QString& what)
{
    QSettings settings;
    QStringList recent = settings.value(QStringLiteral("recentModels")).toStringList();
    recent.removeAll(what);
    recent.prepend(what);
    while (recent.size() > 10)
        recent.removeLast();
    settings.setValue(QStringLiteral("recentModels"), recent);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu()
{
    m_recentMenu->clear();
    const QStringList recent = QSettings().value(QStringLiteral("recentModels")).toStringList();
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
        openModel(urls.first().toLocalFile());
        event->acceptProposedAction();
    }
}

} // namespace tpui
