// results_page.h — charts of runs (QCustomPlot): per-layer compute vs communication per rank,
// measured speedup against the predicted one, time to first token and inter-token latency against T
// (measured beside predicted), a timeline per rank (TimelineView), a baseline-vs-current
// comparison, and collective benchmark curves. Per layer, timeline and comparison show prefill or
// the representative decode step. Charts export to PNG, SVG and
// PDF (the timeline: its widget rendered); records to JSON, CSV and Chrome trace.
#pragma once

#include "models/preview_service.h"
#include "widgets/run_page.h"

#include <QJsonArray>
#include <QWidget>

class QCustomPlot;
class QComboBox;
class QLabel;
class QProcess;
class QTabWidget;

namespace tpui {

class TimelineView;

class ResultsPage final : public QWidget
{
    Q_OBJECT
public:
    explicit ResultsPage(QWidget* parent = nullptr);
    void setRun(std::shared_ptr<const RunData> run);
    void setPreview(std::shared_ptr<const PreviewResult> preview);
    // Collective benchmark rows (tpstudio-cli bench comm --json) of one communicator.
    void setBenchmark(const QString& communicator, const QJsonArray& rows);
    // Runs a child `tpstudio-cli bench comm` over `communicator`: "local" (threads), "mpi" (under
    // mpirun -n 2) or "nccl" (one GPU per rank); its curves join those already shown.
    void runBenchmark(const QString& communicator = QStringLiteral("local"));
    std::shared_ptr<const RunData> run() const { return m_run; }
    QString infoText() const; // the run's settings line above the charts
    std::shared_ptr<const RunData> baseline() const { return m_baseline; }
    void setBaseline(std::shared_ptr<const RunData> run);
    QTabWidget* tabs() const { return m_tabs; }
    QComboBox* phaseBox() const { return m_phaseBox; }
    QCustomPlot* currentPlot() const;
    // Writes the visible chart; the format follows the suffix (.png, .svg, .pdf).
    bool exportChart(const QString& path) const;
    // Writes the run's record (.json), spans (.csv) or Chrome trace (.trace.json / any other .json).
    bool exportRecord(const QString& path, const QString& kind) const;
    // Number of plottables and items drawn in each chart (for tests and the status bar).
    int itemCount(int tab) const;
    TimelineView* timeline() const { return m_timeline; }

signals:
    void benchmarkFinished();
    void message(const QString& text);
    // A timeline span was clicked: the module it belongs to.
    void moduleActivated(const QString& modulePath);

private:
    void refresh();
    void plotLayers();
    void plotSpeedup();
    void plotLatency();
    void plotTimeline();
    void plotCompare();
    void plotBenchmark();
    QJsonObject selectedRun(const RunData& d) const;
    // The selected run's prefill, or its decode step (layers and spans) when that phase is chosen.
    QJsonObject selectedPhase(const RunData& d) const;

    QTabWidget* m_tabs;
    QCustomPlot *m_layers, *m_speedup, *m_latency;
    TimelineView* m_timeline;
    QCustomPlot *m_compare, *m_bench;
    QComboBox *m_tpBox, *m_rankBox, *m_phaseBox, *m_commBox;
    QLabel* m_info;
    std::shared_ptr<const RunData> m_run, m_baseline;
    std::shared_ptr<const PreviewResult> m_preview;
    std::map<QString, QJsonArray> m_benchRows;
    QProcess* m_benchProc = nullptr;
};

} // namespace tpui
