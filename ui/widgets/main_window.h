// main_window.h — TP Studio's main window: the plan editor. Open a model, assign styles in the
// module tree (combo box, palette drag and drop, every layer at once), read the previews (plan
// table, shards, one layer's dataflow, collectives with predicted time, memory per rank,
// diagnostics), run the plan on the embedded engine and read the charts.
//
// Models open on a worker thread and previews are computed on one (newest request wins); the GUI
// thread only swaps results into the views and never waits for a worker: opening another model
// supersedes the one still opening, Cancel Opening returns to the model shown before, and a window
// closed mid-open leaves the worker to finish unseen (it holds nothing of the window).
#pragma once

#include "models/plan_document.h"
#include "models/preview_service.h"
#include "widgets/run_page.h"

#include "tp/model/loader.h"

#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QMainWindow>
#include <QPersistentModelIndex>
#include <QSet>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QMenu;
class QProgressBar;
class QSortFilterProxyModel;
class QSpinBox;
class QTabWidget;
class QTableView;
class QTextBrowser;
class QTimer;
class QToolButton;
class QTreeView;

namespace tpui {

class CollectivesModel;
class DataflowView;
class TreeExpander;
class DiagnosticsModel;
class MemoryModel;
class ModuleTreeModel;
class PlanTableModel;
class AdvisorPage;
class ResultsPage;
class ShardView;
class JobTracker;
class JobsButton;
class ScalingTable;
class MemoryBars;
class SummaryPage;
class PlanPage;
class DataflowPage;
class CollectivesPage;
class DiagnosticsPage;

class MainWindow final : public QMainWindow
{
    Q_OBJECT
public:
    enum Page { SummaryPage, PlanPage, ShardsPage, DataflowPage, CollectivesPage, DiagnosticsPage, RunPageIndex, ResultsPageIndex, AdvisorPageIndex };

    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // Opens a folder, file, Hugging Face cache repo id or catalog id, asynchronously. An open still
    // in progress is superseded: its result is dropped when it comes.
    void openModel(const QString& what);
    // Abandons the open in progress (if any): the window keeps the model it showed before.
    void cancelOpening();
    bool isOpening() const { return m_opening; }
    QString openingSource() const { return m_openingWhat; }
    QAction* cancelOpenAction() const { return m_cancelOpenAction; }
    // Run → Verify with Transformers…: opens a VerifyDialog on the plan at the toolbar's T.
    QAction* verifyAction() const { return m_verifyAction; }
    // Run → Calibrate This Machine…: opens a CalibrateDialog; the profile it installs is selected.
    QAction* calibrateAction() const { return m_calibrateAction; }
    // The toolbar's hardware list: the built-in profiles, then the user's calibrated ones.
    QComboBox* hardwareBox() const { return m_hardware; }
    // View → Go to Page: one action a page (Ctrl+1…9), in page order.
    const QList<QAction*>& pageActions() const { return m_pageActions; }
    // View → Theme: Follow System, Light, Dark (data: the theme's name).
    const QList<QAction*>& themeActions() const { return m_themeActions; }
    // Help → User Guide (F1) and the toolbar's catalog button.
    QAction* guideAction() const { return m_guideAction; }
    // Background work of this window (opening, runs, benchmarks, searches, calibrations,
    // verifications) and the status bar's list of it.
    JobTracker* jobs() const { return m_jobs; }
    JobsButton* jobsButton() const { return m_jobsButton; }
    QToolButton* catalogButton() const { return m_catalogButton; }
    // The user guide shown by Help: the installed one, else the source tree's, else the built-in text.
    static QString userGuidePath();
    // Lists the profiles again (after a calibration) and selects `select` ("" keeps the selection).
    void refreshHardwareList(const QString& select = {});
    // Opens of every window inside the engine right now, superseded and abandoned ones included
    // (tp::openModel cannot be interrupted; they end on their own).
    static int opensRunning();
    QString statusText() const;
    const tp::ModelSpec* spec() const { return m_doc->spec(); }
    PlanDocument* document() const { return m_doc; }
    PreviewService* previews() const { return m_previews; }
    ModuleTreeModel* treeModel() const { return m_treeModel; }
    // The pages, one class each, and what tests and the command line reach through them.
    tpui::SummaryPage* summaryPage() const { return m_summary; }
    tpui::PlanPage* planPage() const { return m_planPage; }
    tpui::DataflowPage* dataflowPage() const { return m_dataflowPage; }
    tpui::CollectivesPage* collectivesPage() const { return m_collectivesPage; }
    tpui::DiagnosticsPage* diagnosticsPage() const { return m_diagnosticsPage; }
    PlanTableModel* planModel() const;
    CollectivesModel* collectivesModel() const;
    MemoryModel* memoryModel() const;
    ScalingTable* scalingTable() const;
    MemoryBars* memoryBars() const;
    DiagnosticsModel* diagnosticsModel() const;
    QTreeView* treeView() const { return m_tree; }
    QTableView* diagnosticsView() const;
    QTableView* planView() const;
    QLineEdit* filterEdit() const { return m_filter; }
    QTabWidget* tabs() const { return m_tabs; }
    QCheckBox* everyLayerBox() const { return m_everyLayer; }
    QSpinBox* tpBox() const { return m_tp; }
    QSpinBox* seqBox() const { return m_seq; }
    RunPage* runPage() const { return m_runPage; }
    ResultsPage* resultsPage() const { return m_results; }
    AdvisorPage* advisorPage() const { return m_advisor; }
    ShardView* shardView() const { return m_shardView; }
    DataflowView* dataflowView() const;
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
    void loadCancelled(const QString& source);
    void previewApplied();

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void closeEvent(QCloseEvent* event) override;
    void changeEvent(QEvent* event) override;

private:
    void setupActions();
    void setupPreviewBar();
    struct LoadResult;
    void startOpen(const QString& what, const QByteArray& session);
    void loadFinished();
    void setOpening(bool on);
    void showModel(const LoadResult& r);
    void applyPreview(std::shared_ptr<const PreviewResult> r);
    void settingsFromBar();
    void addRecent(const QString& what);
    void rebuildRecentMenu();
    void editStyle(const QString& path, const QString& style);
    QStringList styleNames() const;
    void report(const QString& text);
    void showUserGuide();
    // Lists `source`'s work in the job tracker from each `started` to `done` (or its destruction);
    // returns what ends it, for other signals that end it too.
    template <class Source, class Started, class Done>
    std::function<void()> track(Source* source, Started started, Done done, const QString& title, std::function<void()> cancel);

    PlanDocument* m_doc;
    PreviewService* m_previews;
    ModuleTreeModel* m_treeModel = nullptr;
    QSortFilterProxyModel* m_proxy = nullptr;
    TreeExpander* m_expander = nullptr;
    static constexpr std::size_t kSyncFilterModules = 20000; // larger trees filter on a worker
    quint64 m_filterGeneration = 0;                          // of the filter's text: an older worker's verdicts are dropped
    QSet<QPersistentModelIndex> m_fold; // the tree's expanded rows without a filter (source indexes)
    QTreeView* m_tree = nullptr;
    QLineEdit* m_filter = nullptr;
    QCheckBox* m_everyLayer = nullptr;
    QListWidget* m_palette = nullptr;
    QTabWidget* m_tabs = nullptr;
    tpui::SummaryPage* m_summary = nullptr;
    tpui::PlanPage* m_planPage = nullptr;
    tpui::DataflowPage* m_dataflowPage = nullptr;
    tpui::CollectivesPage* m_collectivesPage = nullptr;
    tpui::DiagnosticsPage* m_diagnosticsPage = nullptr;
    ShardView* m_shardView = nullptr;
    RunPage* m_runPage = nullptr;
    ResultsPage* m_results = nullptr;
    AdvisorPage* m_advisor = nullptr;
    QSpinBox *m_tp = nullptr, *m_batch = nullptr, *m_seq = nullptr;
    QComboBox *m_hardware = nullptr, *m_dtype = nullptr;
    QMenu* m_recentMenu = nullptr;
    QList<QAction*> m_pageActions, m_themeActions;
    QAction* m_guideAction = nullptr;
    QToolButton* m_catalogButton = nullptr;
    JobTracker* m_jobs = nullptr;
    JobsButton* m_jobsButton = nullptr;
    quint64 m_openJob = 0, m_advisorJob = 0;
    QLabel* m_statusLabel = nullptr;
    QLabel* m_previewLabel = nullptr;
    std::vector<tp::Diagnostic> m_modelDiagnostics;
    double m_lastApplyMs = 0;

    // What a worker hands back to the GUI thread: the spec already in its shared pointer and only the
    // checkpoint's totals, so neither a copy of a large model nor its tensor table reaches this thread.
    struct LoadResult
    {
        std::shared_ptr<const tp::ModelSpec> spec;
        std::string configText; // what the spec was built from ("" when it has none)
        std::size_t checkpointFiles = 0, checkpointTensors = 0;
        std::int64_t checkpointBytes = -1; // -1: no checkpoint
        QString error;
        QString what;
        qint64 ms = 0;
        quint64 generation = 0;
    };
    QFutureWatcher<LoadResult> m_watcher;
    quint64 m_generation = 0;
    // Set when the open it belongs to is superseded or cancelled: the worker then frees what it
    // built itself instead of handing it over.
    std::shared_ptr<std::atomic<bool>> m_loadCancelled;
    bool m_opening = false;
    QString m_openingWhat;
    QString m_idleStatus; // the status line of the model shown (back after a cancel)
    QElapsedTimer m_openingTimer;
    QTimer* m_openingTick = nullptr;
    QProgressBar* m_busy = nullptr;
    QToolButton* m_cancelButton = nullptr;
    QAction* m_cancelOpenAction = nullptr;
    QAction* m_verifyAction = nullptr;
    QAction* m_calibrateAction = nullptr;
    bool m_showErrorDialogs = true;
    QByteArray m_pendingSession; // restored into the model being opened, when it opens
};

} // namespace tpui
