#include "tp/core/json.h"

#include <fmt/format.h>

namespace tp {

Status checkJsonNesting(std::string_view text, const std::string& file, std::string_view what)
{
    int depth = 0;
    bool inString = false, escaped = false;
    for (const char c : text) {
        if (inString) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                inString = false;
        } else if (c == '"') {
            inString = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonNesting)
                return invalidArgument(fmt::format("{}: {} nests deeper than {} levels", file, what, kMaxJsonNesting));
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return {};
}

Result<nlohmann::json> parseJson(std::string_view text, const std::string& file, std::string_view what)
{
    TP_RETURN_IF_ERROR(checkJsonNesting(text, file, what));
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        return invalidArgument(fmt::format("{}: {} is not valid JSON: {}", file, what, e.what()));
    }
}

} // namespace tp
