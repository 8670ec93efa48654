// results_page.h — charts of runs (QCustomPlot): per-layer compute vs communication per rank,
// measured speedup against the predicted one, time to first token and inter-token latency against T
// (measured beside predicted), a timeline per rank (TimelineView), a baseline-vs-current
// comparison, and collective benchmark curves. Per layer, timeline and comparison show prefill or
// the representative decode step. Every measured figure carries its spread (min–max over the timed
// iterations); predictions use the run's own settings on a profile of the run's backend. Charts
// export to PNG, SVG and PDF with a title line (the timeline: its widget rendered); records to JSON,
// CSV and Chrome trace.
#pragma once

#include "models/preview_service.h"
#include "tp/cost/compare.h"
#include "widgets/run_page.h"

#include <QJsonArray>
#include <QWidget>

class QCustomPlot;
class QPushButton;
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
    ~ResultsPage() override; // a running benchmark is stopped, and heard from no more
    void setRun(std::shared_ptr<const RunData> run);
    void setPreview(std::shared_ptr<const PreviewResult> preview);
    // Collective benchmark rows (tpstudio-cli bench comm --json) of one communicator.
    void setBenchmark(const QString& communicator, const QJsonArray& rows);
    // Runs a child `tpstudio-cli bench comm` over `communicator`: "local" (threads), "mpi" (under
    // mpirun -n 2) or "nccl" (one GPU per rank); its curves join those already shown.
    void runBenchmark(const QString& communicator = QStringLiteral("local"));
    // Stops the benchmark's child, if one runs (it ends as a failed benchmark).
    void stopBenchmark();
    // The open model's config text and the spec built from it: a run is held to the model it ran
    // (compareRecord's digests) before its measurement is set beside the prediction.
    void setModelConfig(std::shared_ptr<const tp::ModelSpec> spec, std::string configText);
    std::shared_ptr<const RunData> run() const { return m_run; }
    // The warning above the charts when other processes kept the host busy during the run ("" when none).
    QString warningText() const;
    // The run's measurement beside the cost model's prediction per tp size (empty: none; comparisonNote says why).
    const std::vector<tp::RunComparison>& comparison() const { return m_cmp; }
    QString comparisonNote() const { return m_cmpNote; }
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
    // The centred text a chart shows when it has nothing to show ("" when it shows data).
    QString emptyText(int tab) const;
    // The hardware profile predictions on Results use for the current run: a calibrated profile of
    // this CPU or local-cpu for a CPU run, the toolbar's for a CUDA run (nullopt: none).
    std::optional<tp::HardwareProfile> predictionProfile() const;
    // The visible note when the toolbar's profile is not the one predictions use ("" when equal).
    QString profileNote() const;
    // The title line drawn into exported charts: model, T, profile, batch × seq, dtype, phase.
    QString exportTitle() const;

protected:
    // A theme switched while a run is shown: the series take the new palette's colours (whiskers, lines).
    void changeEvent(QEvent* event) override;

signals:
    void benchmarkStarted(const QString& communicator);
    void benchmarkFinished();
    void message(const QString& text);
    // A timeline span was clicked: the module it belongs to.
    void moduleActivated(const QString& modulePath);

private:
    void refresh();
    void compare(); // m_cmp from the run, the preview's model and plan, and the prediction profile
    void plotLayers();
    void plotSpeedup();
    void plotLatency();
    void plotTimeline();
    void plotCompare();
    void plotBenchmark();
    // The selected tp size's typed run and phase (nullptr when the run has no such tp size).
    const tp::TpRun* typedRun(const RunData& d) const;
    const std::vector<tp::LayerTiming>* typedLayers(const RunData& d) const;
    bool decodePhase() const;
    // The comparison of the selected tp size and phase (nullptr: none).
    const tp::PhaseComparison* comparedPhase() const;

    QTabWidget* m_tabs;
    QCustomPlot *m_layers, *m_speedup, *m_latency;
    TimelineView* m_timeline;
    QCustomPlot *m_compare, *m_bench;
    QComboBox *m_tpBox, *m_rankBox, *m_phaseBox, *m_commBox;
    QLabel *m_info, *m_warning;
    QPushButton* m_benchButton;
    std::vector<tp::HardwareProfile> m_userProfiles; // calibrated profiles, read when a run is set
    std::shared_ptr<const RunData> m_run, m_baseline;
    std::shared_ptr<const PreviewResult> m_preview;
    std::shared_ptr<const tp::ModelSpec> m_configSpec;
    std::string m_configText;
    std::vector<tp::RunComparison> m_cmp;
    QString m_cmpNote;
    std::map<QString, QJsonArray> m_benchRows;
    QProcess* m_benchProc = nullptr;
};

} // namespace tpui
