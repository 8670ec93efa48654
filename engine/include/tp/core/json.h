// json.h — JSON parsing that reports errors as Status values naming the file.
#pragma once

#include "tp/core/status.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace tp {

// Containers nested deeper than this are refused before parsing: nothing later (a message that
// prints the value, a recursive walk) can then run out of stack.
inline constexpr int kMaxJsonNesting = 256;

// For every dump() that writes an output: bytes that are not UTF-8 (a file name from a Latin-1
// file system, say) become U+FFFD instead of an exception after the work is done.
inline constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;

// InvalidArgument "<file>: <what> nests deeper than 256 levels" when `text` does; a linear scan
// that skips strings.
Status checkJsonNesting(std::string_view text, const std::string& file, std::string_view what);

// Checks the nesting, then parses `text`; on error: "<file>: <what> is not valid JSON: <parser
// message with byte offset>".
Result<nlohmann::json> parseJson(std::string_view text, const std::string& file, std::string_view what);

// A JSON value for an error message, bounded whatever the input: numbers, booleans and null as
// written, strings cut after 60 characters (invalid UTF-8 replaced), arrays and objects by their
// size only.
template<typename Json> std::string jsonExcerpt(const Json& v)
{
    if (v.is_object())
        return fmt::format("an object of {} keys", v.size());
    if (v.is_array())
        return fmt::format("an array of {} elements", v.size());
    if (v.is_string()) {
        const auto& s = v.template get_ref<const std::string&>();
        const bool cut = s.size() > 60;
        return Json(cut ? s.substr(0, 60) : s).dump(-1, ' ', false, Json::error_handler_t::replace)
            + (cut ? fmt::format(" … ({} bytes)", s.size()) : std::string());
    }
    return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

} // namespace tp
