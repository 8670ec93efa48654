// diagnostic.h — findings about a model or a plan that are not fatal by themselves.
//
// A Status stops an operation; a Diagnostic is reported alongside a result: a checkpoint tensor the
// module tree does not know, a parameter with no tensor, an unknown architecture that fell back to
// names alone. `where` names the file, key or module path it is about.
#pragma once

#include <string>
#include <vector>

namespace tp {

enum class Severity { Info, Warning, Error };

const char* severityName(Severity s);

struct Diagnostic
{
    Severity severity = Severity::Warning;
    std::string where;   // file, config key or module path
    std::string message;
    std::string hint;    // how to fix it, may be empty
    // A consequence: the `where` of the error upstream it follows from (an error there set this one
    // off, and fixing that one fixes this); empty for a cause.
    std::string follows;
};

inline bool hasErrors(const std::vector<Diagnostic>& ds)
{
    for (const auto& d : ds)
        if (d.severity == Severity::Error)
            return true;
    return false;
}

} // namespace tp
