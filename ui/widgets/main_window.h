// main_window.h — TP Studio's main window: open a model, browse its module tree, read its summary,
// default plan and diagnostics. Models open on a worker thread; the newest request wins.
#pragma once

#include "tp/model/loader.h"

#include <QFutureWatcher>
#include <QMainWindow>

#include <memory>
#include <optional>

class QLabel;
class QLineEdit;
class QMenu;
class QSortFilterProxyModel;
class QTabWidget;
class QTableWidget;
class QTextBrowser;
class QTreeView;
class QTreeWidget;

namespace tpui {

class ModuleTreeModel;

class MainWindow final : public QMainWindow
{
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // Opens a folder, file, Hugging Face cache repo id or catalog id, asynchronously.
    void openModel(const QString& what);
    const tp::ModelSpec* spec() const { return m_spec.get(); }
    ModuleTreeModel* treeModel() const { return m_treeModel; }
    QTreeView* treeView() const { return m_tree; }
    QLineEdit* filterEdit() const { return m_filter; }
    QTreeWidget* diagnosticsView() const { return m_diagnostics; }
    QTabWidget* tabs() const { return m_tabs; }
    // Tests turn the modal error box off and read loadFailed instead.
    void setShowErrorDialogs(bool on) { m_showErrorDialogs = on; }

signals:
    void modelLoaded(const QString& source);
    void loadFailed(const QString& message);

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void setupActions();
    void showModel(std::shared_ptr<const tp::ModelSpec> spec, const tp::OpenedModel& om, qint64 ms);
    void fillSummary(const tp::OpenedModel& om);
    void fillPlan(const tp::ModelSpec& spec);
    void fillDiagnostics(const tp::ModelSpec& spec);
    void selectPath(const QString& path);
    void addRecent(const QString& what);
    void rebuildRecentMenu();

    ModuleTreeModel* m_treeModel = nullptr;
    QSortFilterProxyModel* m_proxy = nullptr;
    QTreeView* m_tree = nullptr;
    QLineEdit* m_filter = nullptr;
    QTabWidget* m_tabs = nullptr;
    QTextBrowser* m_summary = nullptr;
    QTableWidget* m_plan = nullptr;
    QTreeWidget* m_diagnostics = nullptr;
    QMenu* m_recentMenu = nullptr;
    QLabel* m_statusLabel = nullptr;

    // What a worker hands back to the GUI thread.
    struct LoadResult
    {
        std::optional<tp::OpenedModel> model;
        QString error;
        QString what;
        qint64 ms = 0;
        quint64 generation = 0;
    };
    std::shared_ptr<const tp::ModelSpec> m_spec;
    QFutureWatcher<LoadResult> m_watcher;
    quint64 m_generation = 0;
    bool m_showErrorDialogs = true;
};

} // namespace tpui
