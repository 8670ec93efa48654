// main_window.h — TP Studio's main window: the plan editor. Open a model, assign styles in the
// module tree (combo box, palette drag and drop, every layer at once), read the previews (plan
// table, shards, one layer's dataflow, collectives with predicted time, memory per rank,
// diagnostics), run the plan on the embedded engine and read the charts.
//
// Models open on a worker thread and previews are computed on one (newest request wins); the GUI
// thread only swaps results into the views.
#pragma once

#include "models/plan_document.h"
#include "models/preview_service.h"
#include "widgets/run_page.h"

#include "tp/model/loader.h"

#include <QFutureWatcher>
#include <QMainWindow>

#include <memory>
#include <optional>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QMenu;
class QSortFilterProxyModel;
class QSpinBox;
class QTabWidget;
class QTableView;
class QTextBrowser;
class QTreeView;

namespace tpui {

class CollectivesModel;
class DataflowView;
class DiagnosticsModel;
class MemoryModel;
class ModuleTreeModel;
class PlanTableModel;
class ResultsPage;
class ShardView;

class MainWindow final : public QMainWindow
{
    Q_OBJECT
public:
    enum Page { SummaryPage, PlanPage, ShardsPage, DataflowPage, CollectivesPage, DiagnosticsPage, RunPageIndex, ResultsPageIndex };

    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // Opens a folder, file, Hugging Face cache repo id or catalog id, asynchronously.
    void openModel(const QString& what);
    const tp::ModelSpec* spec() const { return m_doc->spec(); }
    PlanDocument* document() const { return m_doc; }
    PreviewService* previews() const { return m_previews; }
    ModuleTreeModel* treeModel() const { return m_treeModel; }
    PlanTableModel* planModel() const { return m_planModel; }
    CollectivesModel* collectivesModel() const { return m_collectivesModel; }
    MemoryModel* memoryModel() const { return m_memoryModel; }
    DiagnosticsModel* diagnosticsModel() const { return m_diagnosticsModel; }
    QTreeView* treeView() const { return m_tree; }
    QTableView* diagnosticsView() const { return m_diagnostics; }
    QTableView* planView() const { return m_planView; }
    QLineEdit* filterEdit() const { return m_filter; }
    QTabWidget* tabs() const { return m_tabs; }
    QCheckBox* everyLayerBox() const { return m_everyLayer; }
    QSpinBox* tpBox() const { return m_tp; }
    RunPage* runPage() const { return m_runPage; }
    ResultsPage* resultsPage() const { return m_results; }
    ShardView* shardView() const { return m_shardView; }
    DataflowView* dataflowView() const { return m_dataflow; }
    // GUI-thread milliseconds the last preview took to reach every view.
    double lastApplyMs() const { return m_lastApplyMs; }
    // Tests turn the modal error box off and read loadFailed instead.
    void setShowErrorDialogs(bool on) { m_showErrorDialogs = on; }
    // Selects a module or parameter by path (a generic path selects its first instance).
    void selectPath(const QString& path);
    // Session files: plan + settings + the model they belong to.
    bool saveSession(const QString& path);
    void openSession(const QString& path);

signals:
    void modelLoaded(const QString& source);
    void loadFailed(const QString& message);
    void previewApplied();

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void closeEvent(QCloseEvent* event) override;

private:
    void setupActions();
    void setupPreviewBar();
    QWidget* makePlanPage();
    QWidget* makeCollectivesPage();
    void showModel(const tp::OpenedModel& om, const QString& what, qint64 ms);
    void fillSummary(const tp::OpenedModel& om);
    void applyPreview(std::shared_ptr<const PreviewResult> r);
    void settingsFromBar();
    void addRecent(const QString& what);
    void rebuildRecentMenu();
    void editStyle(const QString& path, const QString& style);
    QStringList styleNames() const;
    void report(const QString& text);

    PlanDocument* m_doc;
    PreviewService* m_previews;
    ModuleTreeModel* m_treeModel = nullptr;
    PlanTableModel* m_planModel = nullptr;
    CollectivesModel* m_collectivesModel = nullptr;
    MemoryModel* m_memoryModel = nullptr;
    DiagnosticsModel* m_diagnosticsModel = nullptr;
    QSortFilterProxyModel* m_proxy = nullptr;
    QTreeView* m_tree = nullptr;
    QLineEdit* m_filter = nullptr;
    QCheckBox* m_everyLayer = nullptr;
    QListWidget* m_palette = nullptr;
    QTabWidget* m_tabs = nullptr;
    QTextBrowser* m_summary = nullptr;
    QTableView* m_planView = nullptr;
    QTableView* m_collectives = nullptr;
    QTableView* m_memory = nullptr;
    QTableView* m_diagnostics = nullptr;
    QLabel* m_scaling = nullptr;
    ShardView* m_shardView = nullptr;
    DataflowView* m_dataflow = nullptr;
    QSpinBox* m_layerBox = nullptr;
    RunPage* m_runPage = nullptr;
    ResultsPage* m_results = nullptr;
    QSpinBox *m_tp = nullptr, *m_batch = nullptr, *m_seq = nullptr;
    QComboBox *m_hardware = nullptr, *m_dtype = nullptr;
    QMenu* m_recentMenu = nullptr;
    QLabel* m_statusLabel = nullptr;
    QLabel* m_previewLabel = nullptr;
    std::vector<tp::Diagnostic> m_modelDiagnostics;
    double m_lastApplyMs = 0;

    // What a worker hands back to the GUI thread.
    struct LoadResult
    {
        std::optional<tp::OpenedModel> model;
        QString error;
        QString what;
        qint64 ms = 0;
        quint64 generation = 0;
    };
    QFutureWatcher<LoadResult> m_watcher;
    quint64 m_generation = 0;
    bool m_showErrorDialogs = true;
    QByteArray m_pendingSession;
};

} // namespace tpui
