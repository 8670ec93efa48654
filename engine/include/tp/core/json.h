// json.h — JSON parsing that reports errors as Status values naming the file.
#pragma once

#include "tp/core/status.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace tp {

// Parses `text`; on error: "<file>: <what> is not valid JSON: <parser message with byte offset>".
Result<nlohmann::json> parseJson(std::string_view text, const std::string& file, std::string_view what);

} // namespace tp
