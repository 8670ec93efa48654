#include "tp/core/json.h"

#include <fmt/format.h>

namespace tp {

Result<nlohmann::json> parseJson(std::string_view text, const std::string& file, std::string_view what)
{
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        return invalidArgument(fmt::format("{}: {} is not valid JSON: {}", file, what, e.what()));
    }
}

} // namespace tp
