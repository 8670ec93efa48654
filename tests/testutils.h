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
