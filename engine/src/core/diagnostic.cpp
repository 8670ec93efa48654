#include "tp/core/diagnostic.h"

namespace tp {

const char* severityName(Severity s)
{
    switch (s) {
    case Severity::Info: return "info";
    case Severity::Warning: return "warning";
    case Severity::Error: return "error";
    }
    return "?";
}

} // namespace tp
