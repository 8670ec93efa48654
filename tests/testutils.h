// testutils.h — helpers shared by the test suites.
#pragma once

#include "tp/model/loader.h"
#include "tp/plan/plan.h"

#include <QByteArray>
#include <QtGlobal>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tptest {

// Runs f(rank) on one thread per rank and returns the first non-empty message (rank order).
template<typename F> std::string onRanks(int size, F f)
{
    std::vector<std::string> errors(static_cast<std::size_t>(size));
    std::vector<std::thread> ts;
    for (int r = 0; r < size; ++r)
        ts.emplace_back([&, r] { errors[std::size_t(r)] = f(r); });
    for (auto& t : ts)
        t.join();
    for (const auto& e : errors)
        if (!e.empty())
            return e;
    return {};
}

// TP_TEST_REDUCED=1: the sanitizer subset (scripts/sanitize.sh), where everything runs several times
// slower: the slowest cases keep their kind but shrink (fewer large buffers, iterations and shapes).
inline bool reducedRun() { return qEnvironmentVariableIntValue("TP_TEST_REDUCED") == 1; }

// The source tree: $TP_SOURCE_DIR when set (a test binary carried to another machine, as
// scripts/gpu-check.sh does), else where it was built from.
inline std::string sourceDir()
{
    const QByteArray env = qgetenv("TP_SOURCE_DIR");
    return env.isEmpty() ? std::string(TP_SOURCE_DIR) : env.toStdString();
}

// Opens a model (catalog id, folder, …) or aborts the test binary with the engine's message.
inline tp::ModelSpec openSpec(const char* what)
{
    auto om = tp::openModel(what);
    if (!om.ok())
        qFatal("cannot open %s: %s", what, om.status().message().c_str());
    return std::move(om).value().spec;
}

} // namespace tptest

namespace tptest {

// max |a - b| relative to the largest |b|: the tolerance measure of the fidelity tests.
inline double relError(const std::vector<float>& a, const std::vector<float>& b)
{
    if (a.size() != b.size())
        return 1e30;
    double diff = 0, scale = 1e-12;
    for (std::size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, double(std::abs(a[i] - b[i])));
        scale = std::max(scale, double(std::abs(b[i])));
    }
    return diff / scale;
}

// A model from config.json text (for shapes no catalog model has).
inline tp::ModelSpec specFromConfig(const std::string& json)
{
    auto cfg = tp::parseConfig(json, "test config.json", nullptr);
    if (!cfg.ok())
        qFatal("bad test config: %s", cfg.status().message().c_str());
    auto spec = tp::buildModelSpec(*cfg);
    if (!spec.ok())
        qFatal("cannot build: %s", spec.status().message().c_str());
    return std::move(spec).value();
}

// The class's default ep_plan over its default tp_plan (ep_size = tp_size), the tokens dispatched
// with all-to-all (Transformers' AllToAllEP); none for a class without an ep_plan.
inline std::optional<tp::Plan> allToAllExperts(const tp::ModelSpec& s, int tp)
{
    if (s.defaultEpPlan.empty())
        return std::nullopt;
    tp::Plan p = tp::defaultPlan(s, tp);
    for (const tp::PlanEntry& e : s.defaultEpPlan) {
        auto it = std::find_if(p.entries.begin(), p.entries.end(), [&](const tp::PlanEntry& x) { return x.key == e.key; });
        if (it == p.entries.end())
            p.entries.push_back(e);
        else
            it->style = e.style;
    }
    p.epImplementation = tp::EpImplementation::AllToAll;
    return p;
}

} // namespace tptest
