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

// Whether text holds a control character a terminal acts on: C0 (tab and newline too), DEL, or C1
// (U+0080..U+009F, UTF-8 C2 80..C2 9F). Strings from a file that the program prints (names, keys,
// types) are refused with them; text shown from a record has them replaced (terminalSafe).
inline bool hasControlChar(std::string_view text)
{
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c == 0x7f)
            return true;
        if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80
            && static_cast<unsigned char>(text[i + 1]) <= 0x9f)
            return true;
    }
    return false;
}

// `text` with every control character of hasControlChar() shown as '?'.
inline std::string terminalSafe(std::string text)
{
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80
            && static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
            out += '?';
            ++i;
        } else {
            out += c < 0x20 || c == 0x7f ? '?' : text[i];
        }
    }
    return out;
}

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

// Empty when `name` (a key, tensor or style name from a file) is fit to print and to look up: at
// most 1,024 bytes, no control characters; else why not, with a bounded excerpt.
inline std::string badName(const std::string& name)
{
    if (name.size() > 1024)
        return fmt::format("{} is longer than 1024 bytes", jsonExcerpt(nlohmann::json(name)));
    if (hasControlChar(name))
        return fmt::format("{} holds a control character", jsonExcerpt(nlohmann::json(name)));
    return {};
}


} // namespace tp
