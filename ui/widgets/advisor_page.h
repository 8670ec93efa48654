// advisor_page.h — the planner as an advisor: every candidate plan of the open model on the
// toolbar's hardware (tp::searchPlans: each candidate at every valid T, those that do not fit the
// device memory dropped), as a Pareto scatter (inter-token latency against decode tokens/s per GPU,
// coloured by T) and a sortable table. Apply loads the selected candidate into the editor as one
// undo step; Export… writes it as plan JSON.
//
// The search runs on a background thread whenever its inputs change while the page is shown (or
// when it is shown with stale results); one search runs at a time, and a change made meanwhile
// starts the next when it ends. The GUI thread only fills the views.
#pragma once

#include "tp/cost/plan_search.h"

#include <QFutureWatcher>
#include <QWidget>

#include <memory>
#include <optional>

class QComboBox;
class QCPGraph;
class QCustomPlot;
class QLabel;
class QPushButton;
class QSortFilterProxyModel;
class QSpinBox;
class QStackedWidget;
class QTableView;
class QTimer;
class QToolButton;
class QAction;

namespace tpui {

class CandidateTableModel;
class PlanDocument;

class AdvisorPage final : public QWidget
{
    Q_OBJECT
public:
    enum Objective { TtftObjective, ItlObjective, ThroughputObjective };

    explicit AdvisorPage(PlanDocument* doc, QWidget* parent = nullptr);
    ~AdvisorPage() override;

    QSpinBox* batchBox() const { return m_batch; }
    QSpinBox* seqBox() const { return m_seq; }
    QSpinBox* contextBox() const { return m_context; } // 0: the prompt length
    QSpinBox* maxTpBox() const { return m_maxTp; }     // 0: the hardware's device count
    QComboBox* objectiveBox() const { return m_objective; }
    QTableView* table() const { return m_table; }
    QCustomPlot* plot() const { return m_plot; }
    QLabel* statusLabel() const { return m_status; }
    QLabel* emptyLabel() const { return m_empty; }
    QPushButton* applyButton() const { return m_apply; }
    QPushButton* exportButton() const { return m_export; }
    QPushButton* calibrateButton() const { return m_calibrate; }
    QToolButton* plansButton() const { return m_plans; }
    // Plan files tried beside the built-in, shipped and editor's candidates (forget: the list is cleared first).
    void addPlanFiles(const QStringList& files, bool forget = false);

    // The inputs as the engine takes them (hardware: the document's settings).
    tp::SearchOptions options() const;
    // The last result shown (null before the first one, or when the search failed).
    std::shared_ptr<const tp::SearchResult> result() const { return m_result; }
    bool searching() const { return m_watcher.isRunning(); }
    // Starts a search of the current inputs now (or after the running one).
    void search();
    // What the inputs name changed (a profile recalibrated under its id): search again when shown.
    void invalidate();

    // The selected candidate: an index into result()->candidates, -1 for none.
    int selectedIndex() const { return m_selected; }
    void selectCandidate(int index);
    // Where candidate `index` is drawn in the plot (its pixels).
    QPointF pixelOf(int index) const;
    // The candidate drawn nearest a point of the plot, within a few pixels; -1 for none.
    int candidateAt(const QPointF& pos) const;
    // Loads the selected candidate's plan and T into the editor as one undo step.
    void applySelected();
    tp::Status exportSelected(const QString& path) const;

signals:
    // A result of the current inputs is shown (or their error).
    void searchFinished();
    void searchStarted(); // a search went to its worker
    void calibrateRequested();
    void message(const QString& text);

protected:
    void showEvent(QShowEvent* event) override;

private:
    void finished();
    void clearResult(const QString& text); // no candidates; `text` in their place
    void showEmpty(const QString& text);
    void plotResult();
    void markSelection();
    void sortByObjective();
    void exportDialog();

    PlanDocument* m_doc;
    QSpinBox *m_batch, *m_seq, *m_context, *m_maxTp;
    QComboBox* m_objective;
    QLabel* m_status;
    QLabel* m_empty;
    QStackedWidget* m_stack;
    QCustomPlot* m_plot;
    QCPGraph* m_selectedGraph = nullptr;
    QTableView* m_table;
    CandidateTableModel* m_model;
    QSortFilterProxyModel* m_proxy;
    QPushButton *m_apply, *m_export, *m_calibrate;
    QToolButton* m_plans;
    QAction* m_forgetPlans = nullptr;
    QStringList m_planFiles;
    QTimer* m_debounce;

    struct Outcome
    {
        std::shared_ptr<const tp::SearchResult> result;
        QString error, hardwareName;
        QStringList skipped; // plan files that did not load, each with why
        double deviceBytes = 0;
        quint64 generation = 0;
    };
    QFutureWatcher<Outcome> m_watcher;
    quint64 m_generation = 0; // of the inputs; a result of an older one is stale
    bool m_pending = false;   // inputs changed while a search ran
    bool m_stale = true;      // the views do not show the current inputs
    std::shared_ptr<const tp::SearchResult> m_result;
    std::shared_ptr<const tp::ModelSpec> m_resultSpec; // the model m_result's plans belong to
    std::shared_ptr<const tp::ModelSpec> m_searchSpec; // the model of the search running
    QString m_lastHardware;                            // of the last search started
    std::optional<tp::DType> m_lastDtype;
    QString m_lastKvDtype;
    int m_selected = -1;
    double m_itlScale = 1; // seconds → the plot's x unit
    // Mirrors of the toolbar's batch and sequence: the page follows them while they change.
    qint64 m_barBatch = -1, m_barSeq = -1;
};

} // namespace tpui
