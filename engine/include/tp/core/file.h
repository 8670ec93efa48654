// file.h — reading a whole input file safely: a path from a colleague may name a directory, a FIFO
// (which would block forever), a device like /dev/zero (which never ends) or a file far too large.
#pragma once

#include "tp/core/status.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace tp {

// The whole of the regular file at `path` if it holds at most `maxBytes`; otherwise an error that
// names the path and says why (not found, a directory, not a regular file, too large), decided before
// anything is read. `what` names the kind of file in the message ("a plan").
Result<std::string> readInputFile(const std::string& path, std::int64_t maxBytes, std::string_view what);

} // namespace tp
