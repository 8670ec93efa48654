// preview_service.h — computes the sharded graph, the cost model and the predicted scaling of the
// document's plan on a worker thread. The newest request wins: results of superseded requests are
// dropped, so editing quickly never shows a stale preview.
#pragma once

#include "models/plan_document.h"

#include "tp/cost/cost_model.h"
#include "tp/shard/sharded_graph.h"

#include <QFutureWatcher>
#include <QObject>

#include <memory>

namespace tpui {

struct PreviewResult
{
    std::shared_ptr<const tp::ModelSpec> spec;
    tp::ShardedGraph graph;
    std::optional<tp::CostReport> cost;          // when the plan is valid and the profile loads
    std::optional<tp::CostReport> decodeCost;    // one decode step at context seq, likewise
    std::vector<tp::ScalingPoint> scaling;       // T = 1…max(8, T): time, memory need, bytes per forward
    // Every rank's memory at batch × seq (weights, KV cache, activations, communication buffer)
    // against the profile's device; empty with memoryError set when it cannot be computed.
    std::vector<tp::RankMemoryUse> memory;
    QString memoryError;
    std::optional<tp::HardwareProfile> hardware;
    QString hardwareError;
    // The valid plan against the hardware (errors when it cannot run there: T above its devices, a
    // rank over its device memory at batch × seq, naming the smallest T that fits).
    std::vector<tp::Diagnostic> feasibility;
    // The longest context at the batch and the most sequences at the sequence length that fit (whatFits).
    std::optional<tp::FitLimits> fits;
    PreviewSettings settings;
    qint64 workerMs = 0;
};

// Computes one preview (what the worker runs; also usable synchronously in tests).
std::shared_ptr<const PreviewResult> computePreview(std::shared_ptr<const tp::ModelSpec> spec, tp::Plan plan,
                                                    PreviewSettings settings);

class PreviewService final : public QObject
{
    Q_OBJECT
public:
    explicit PreviewService(PlanDocument* doc, QObject* parent = nullptr);
    ~PreviewService() override;
    std::shared_ptr<const PreviewResult> latest() const { return m_latest; }
    // Starts a preview of the document's current state (called on every change).
    void request();
    bool busy() const { return m_watcher.isRunning(); }

signals:
    void ready(std::shared_ptr<const tpui::PreviewResult> result);

private:
    PlanDocument* m_doc;
    QFutureWatcher<std::shared_ptr<const PreviewResult>> m_watcher;
    std::shared_ptr<const PreviewResult> m_latest;
    quint64 m_generation = 0, m_running = 0;
    const tp::ModelSpec* m_runningSpec = nullptr; // the model of the running preview (compared, never used)
    bool m_pending = false;
};

} // namespace tpui
