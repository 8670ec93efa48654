#include "models/preview_service.h"

#include "models/background.h"

#include <QElapsedTimer>

namespace tpui {

std::shared_ptr<const PreviewResult> computePreview(std::shared_ptr<const tp::ModelSpec> spec, tp::Plan plan,
                                                    PreviewSettings settings)
{
    QElapsedTimer timer;
    timer.start();
    auto r = std::make_shared<PreviewResult>();
    r->spec = spec;
    r->settings = settings;
    if (!spec)
        return r;
    plan.tpSize = settings.tpSize;
    tp::ShardOptions o;
    o.batch = settings.batch;
    o.seq = settings.seq;
    o.activationDtype = settings.activationDtype();
    o.kvCacheDtype = settings.kvCacheDtype();
    r->graph = tp::shardModel(*spec, plan, o);
    auto hw = tp::findHardware(settings.hardware.toStdString());
    if (hw.ok()) {
        r->hardware = *hw;
        if (r->graph.valid()) {
            r->cost = tp::estimateCost(*spec, r->graph, *hw);
            if (auto step = tp::estimateDecodeStep(*spec, r->graph, *hw, o.batch, o.seq); step.ok())
                r->decodeCost = std::move(*step);
            r->feasibility = tp::feasibilityDiagnostics(*spec, r->graph, *hw, o.seq);
            if (auto mem = tp::memoryPerRank(r->graph, *hw, o.batch, o.seq); mem.ok())
                r->memory = std::move(*mem);
            else
                r->memoryError = QString::fromStdString(mem.status().message());
            const std::int64_t maxPos = spec->config.maxPositionEmbeddings;
            if (auto f = tp::whatFits(r->graph, *hw, o.batch, o.seq, maxPos > 0 ? maxPos : tp::kMaxWorkloadContext); f.ok())
                r->fits = *f;
        }
        r->scaling = tp::predictScaling(*spec, plan, o, *hw, std::max(8, std::min(settings.tpSize, 64)));
    } else {
        r->hardwareError = QString::fromStdString(hw.status().message());
    }
    r->workerMs = timer.elapsed();
    return r;
}

PreviewService::PreviewService(PlanDocument* doc, QObject* parent)
    : QObject(parent)
    , m_doc(doc)
{
    connect(&m_watcher, &QFutureWatcher<std::shared_ptr<const PreviewResult>>::finished, this, [this] {
        auto r = m_watcher.result();
        if (m_running == m_generation) {
            m_latest = r;
            emit ready(r);
        }
        if (m_pending) { // a change arrived while this one ran: compute the newest state now
            m_pending = false;
            request();
        }
    });
    connect(doc, &PlanDocument::planChanged, this, &PreviewService::request);
    connect(doc, &PlanDocument::settingsChanged, this, &PreviewService::request);
}

// Nothing to wait for: the worker holds copies (the spec by shared pointer, the plan, the settings),
// and its result, unwatched once the watcher is gone, is dropped where its last reference goes.
PreviewService::~PreviewService() = default;

void PreviewService::request()
{
    if (!m_doc->spec())
        return; // nothing to preview before a model is open
    ++m_generation;
    if (m_watcher.isRunning() && m_runningSpec == m_doc->spec()) { // newest wins: run again when the current one ends
        m_pending = true;
        return;
    }
    // Idle, or the running preview is of the model shown before: a new model's preview starts now
    // instead of after a long preview of a large model nobody shows any more (that one ends unseen).
    m_pending = false;
    m_running = m_generation;
    m_runningSpec = m_doc->spec();
    m_watcher.setFuture(runInBackground([spec = m_doc->specPtr(), plan = m_doc->plan(), settings = m_doc->settings()] {
        return computePreview(spec, plan, settings);
    }));
}

} // namespace tpui
