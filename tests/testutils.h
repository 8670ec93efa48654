// testutils.h — helpers shared by the test suites.
#pragma once

#include "tp/model/loader.h"

#include <QtGlobal>

namespace tptest {

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

} // namespace tptest
